/*
 * notify.h: the systemd notification protocol, implemented directly: one
 * datagram per message to the AF_UNIX socket named by $NOTIFY_SOCKET (a path,
 * or an abstract name when it starts with '@').  No libsystemd needed.
 */
#ifndef FG_NOTIFY_H
#define FG_NOTIFY_H

/* Send msg ("READY=1", "STATUS=...", ...).  0 sent, 1 no socket configured, -1 error. */
int fg_notify(const char *msg);

/* The watchdog interval in microseconds from $WATCHDOG_USEC (for this pid), or 0. */
unsigned long long fg_notify_watchdog_usec(void);

#endif
