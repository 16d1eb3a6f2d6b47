/*
 * conns.h: absolute deadlines per connection (slowloris).
 *
 * libmicrohttpd's connection timeout is an idle timeout: a client sending
 * one byte every few seconds resets it and holds its connection for ever,
 * and 256 of them took the whole API down.  Here every connection is in a
 * phase with an absolute deadline, counted from when the phase began:
 *
 *   headers  accepted, the request line and headers not complete yet
 *   body     headers complete, the body not received yet
 *   handling the handler runs (no deadline: inspections bound themselves)
 *   sending  the answer is queued and being written
 *   idle     kept alive after an answer: the next request's headers must
 *            be complete by then (this covers the wait and the headers)
 *
 * A reaper thread shuts down (shutdown(2), both ways) each connection past
 * its deadline; libmicrohttpd then reads end-of-file and closes it as it
 * closes any connection.  The table is updated from libmicrohttpd's
 * connection notifications under one mutex, which the reaper holds while it
 * calls shutdown, so a closed (and reused) descriptor is never touched.
 */
#ifndef FG_API_CONNS_H
#define FG_API_CONNS_H

#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include <microhttpd.h>

enum fg_conn_phase {
	FG_CONN_HEADERS,
	FG_CONN_BODY,
	FG_CONN_HANDLING,
	FG_CONN_SENDING,
	FG_CONN_IDLE,
	FG_CONN_PHASES
};

/* Deadlines in seconds per phase; 0: none. */
struct fg_conn_limits {
	unsigned seconds[FG_CONN_PHASES];
};

struct fg_conn;

struct fg_conns {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	pthread_t reaper;
	int started, stopping;
	struct fg_conn_limits limits;
	struct fg_conn *head;                      /* open connections */
	unsigned long long closed[FG_CONN_PHASES]; /* shut down past their deadline, per phase */
};

/* Start the reaper. 0, or -1 when the thread cannot be made. */
int fg_conns_start(struct fg_conns *c, const struct fg_conn_limits *limits);

/* Stop the reaper (after the daemon stopped: every connection is gone). */
void fg_conns_stop(struct fg_conns *c);

/* libmicrohttpd's MHD_OPTION_NOTIFY_CONNECTION callback; cls is the struct fg_conns. */
void fg_conns_notify(void *cls, struct MHD_Connection *connection, void **socket_context,
		     enum MHD_ConnectionNotificationCode toe);

/* The connection moved to phase (its deadline counts from now). */
void fg_conns_phase(struct fg_conns *c, struct MHD_Connection *connection, enum fg_conn_phase phase);

/* The name of a phase, for /metrics ("headers", "body", ...). */
const char *fg_conn_phase_name(enum fg_conn_phase phase);

#endif
