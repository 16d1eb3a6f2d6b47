/*
 * log.c: journal-aware log lines (log.h).  One fprintf per line under a
 * lock, so lines from worker and HTTP threads never interleave.
 */
#include "daemon/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int journal;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

void fg_log_init(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	journal = js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 && fstat(STDERR_FILENO, &st) == 0 &&
		  (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void fg_log(int priority, const char *fmt, ...)
{
	static const char *const words[] = { "emerg", "alert", "crit", "error", "warning", "notice", "info", "debug" };
	char line[1024], when[40];
	struct timespec ts;
	struct tm tm;
	va_list ap;

	if (priority < 0 || priority > 7)
		priority = FG_LOG_INFO;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&log_lock);
	if (journal) {
		fprintf(stderr, "<%d>%s\n", priority, line);
	} else {
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
		fprintf(stderr, "%s.%03ldZ %s %s\n", when, ts.tv_nsec / 1000000, words[priority], line);
	}
	pthread_mutex_unlock(&log_lock);
}
