/*
 * log.h: the daemon's log lines on stderr.
 *
 * Under systemd (stderr is the journal stream named by $JOURNAL_STREAM) each
 * line starts with a `<N>` syslog priority prefix and no timestamp (the journal
 * adds its own); otherwise with an RFC 3339 UTC timestamp and a level word.
 */
#ifndef FG_LOG_H
#define FG_LOG_H

enum { FG_LOG_ERR = 3, FG_LOG_WARNING = 4, FG_LOG_NOTICE = 5, FG_LOG_INFO = 6, FG_LOG_DEBUG = 7 };

/* Decide the format once, at start-up. */
void fg_log_init(void);

void fg_log(int priority, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
