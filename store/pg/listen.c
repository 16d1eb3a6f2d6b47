/*
 * listen.c: LISTEN/NOTIFY (store.h's fg_store_listen).  A thread with its
 * own connection LISTENs on forged_jobs and forged_data and waits on the
 * connection's socket (poll, a one-second tick, and a pipe that stop
 * writes to); each notification becomes a callback.  A dropped connection
 * is retried every second, and once back both events are reported, since
 * notifications sent meanwhile were lost.  Notifications only wake and
 * invalidate: workers still poll the queue once a second and cached
 * documents still expire, so a lost notification costs latency, never a
 * job or a correct answer.
 */
#include "store/pg/pg.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct fg_store_listener {
	char *target;
	void (*on_event)(void *ctx, enum fg_store_event ev);
	void *ctx;
	int pipe[2];
	pthread_t thread;
	PGconn *conn;
};

static void quiet(void *arg, const char *message)
{
	(void)arg;
	(void)message;
}

/* Connect and LISTEN; 0 when listening. */
static int listen_connect(struct fg_store_listener *l)
{
	static const char *const keys[] = { "dbname", "fallback_application_name", NULL };
	const char *values[] = { l->target, "forged-listen", NULL };
	PGresult *res;
	int ok;

	PQfinish(l->conn);
	l->conn = PQconnectdbParams(keys, values, 1);
	if (!l->conn || PQstatus(l->conn) != CONNECTION_OK)
		return -1;
	PQsetNoticeProcessor(l->conn, quiet, NULL);
	res = PQexec(l->conn, "LISTEN " FG_PG_CHANNEL_JOBS "; LISTEN " FG_PG_CHANNEL_DATA);
	ok = res && PQresultStatus(res) == PGRES_COMMAND_OK;
	PQclear(res);
	return ok ? 0 : -1;
}

/* Wait up to ms for the stop pipe; 1 when stop was asked for. */
static int stopped(struct fg_store_listener *l, int ms)
{
	struct pollfd p = { .fd = l->pipe[0], .events = POLLIN };

	return poll(&p, 1, ms) > 0;
}

static void *listen_main(void *arg)
{
	struct fg_store_listener *l = arg;
	int connected = listen_connect(l) == 0;

	for (;;) {
		struct pollfd p[2];
		PGnotify *n;

		if (!connected) {
			if (stopped(l, 1000))
				break;
			connected = listen_connect(l) == 0;
			if (connected) {
				/* What was sent while we were away is lost: act as if both happened. */
				l->on_event(l->ctx, FG_STORE_EV_JOB);
				l->on_event(l->ctx, FG_STORE_EV_DATA);
			}
			continue;
		}
		p[0].fd = l->pipe[0];
		p[0].events = POLLIN;
		p[1].fd = PQsocket(l->conn);
		p[1].events = POLLIN;
		if (poll(p, 2, 1000) < 0 && errno != EINTR)
			break;
		if (p[0].revents)
			break;
		if (!p[1].revents)
			continue;
		if (!PQconsumeInput(l->conn) || PQstatus(l->conn) != CONNECTION_OK) {
			connected = 0;
			continue;
		}
		while ((n = PQnotifies(l->conn)) != NULL) {
			l->on_event(l->ctx, strcmp(n->relname, FG_PG_CHANNEL_JOBS) == 0 ? FG_STORE_EV_JOB : FG_STORE_EV_DATA);
			PQfreemem(n);
		}
	}
	return NULL;
}

int fg_store_listen(struct fg_store_listener **out, const char *target,
		    void (*on_event)(void *ctx, enum fg_store_event ev), void *ctx, struct fg_err *err)
{
	struct fg_store_listener *l;

	*out = NULL;
	if (!fg_store_is_postgres(target))
		return 0; /* SQLite: one process writes, and it knows */
	l = calloc(1, sizeof(*l));
	if (!l || !(l->target = strdup(target))) {
		free(l);
		return fg_err_set(err, FG_ENOMEM, "listening for notifications: out of memory");
	}
	l->on_event = on_event;
	l->ctx = ctx;
	if (pipe2(l->pipe, O_CLOEXEC) != 0) {
		free(l->target);
		free(l);
		return fg_err_set(err, FG_ESTATE, "listening for notifications: %s", strerror(errno));
	}
	if (pthread_create(&l->thread, NULL, listen_main, l) != 0) {
		close(l->pipe[0]);
		close(l->pipe[1]);
		free(l->target);
		free(l);
		return fg_err_set(err, FG_ENOMEM, "listening for notifications: cannot start a thread");
	}
	*out = l;
	return 0;
}

void fg_store_listener_stop(struct fg_store_listener *l)
{
	if (!l)
		return;
	if (write(l->pipe[1], "x", 1) < 0) {
		/* The thread still ends at its next one-second tick... only if the pipe works; it does. */
	}
	pthread_join(l->thread, NULL);
	PQfinish(l->conn);
	close(l->pipe[0]);
	close(l->pipe[1]);
	free(l->target);
	free(l);
}
