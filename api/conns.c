/*
 * conns.c: per-connection deadlines and their reaper (conns.h).
 */
#include "api/conns.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct fg_conn {
	int fd;
	enum fg_conn_phase phase;
	struct timespec since;         /* CLOCK_MONOTONIC, when the phase began */
	int shut;                      /* shut down by the reaper already */
	struct fg_conn *prev, *next;
};

static const char *const phase_names[FG_CONN_PHASES] = { "headers", "body", "handling", "sending", "idle" };

const char *fg_conn_phase_name(enum fg_conn_phase phase)
{
	return (unsigned)phase < FG_CONN_PHASES ? phase_names[phase] : "unknown";
}

static double seconds_since(const struct timespec *t, const struct timespec *now)
{
	return (double)(now->tv_sec - t->tv_sec) + (double)(now->tv_nsec - t->tv_nsec) / 1e9;
}

void fg_conns_notify(void *cls, struct MHD_Connection *connection, void **socket_context,
		     enum MHD_ConnectionNotificationCode toe)
{
	struct fg_conns *c = cls;
	struct fg_conn *k = *socket_context;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *info =
			MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);

		k = calloc(1, sizeof(*k));
		if (!k || !info) {
			free(k);
			return; /* no deadline for this one: libmicrohttpd's idle timeout still applies */
		}
		k->fd = info->connect_fd;
		k->phase = FG_CONN_HEADERS;
		clock_gettime(CLOCK_MONOTONIC, &k->since);
		pthread_mutex_lock(&c->lock);
		k->next = c->head;
		if (c->head)
			c->head->prev = k;
		c->head = k;
		pthread_mutex_unlock(&c->lock);
		*socket_context = k;
		return;
	}
	if (!k)
		return;
	/* MHD_CONNECTION_NOTIFY_CLOSED comes before the descriptor is closed. */
	pthread_mutex_lock(&c->lock);
	if (k->prev)
		k->prev->next = k->next;
	else
		c->head = k->next;
	if (k->next)
		k->next->prev = k->prev;
	pthread_mutex_unlock(&c->lock);
	free(k);
	*socket_context = NULL;
}

void fg_conns_phase(struct fg_conns *c, struct MHD_Connection *connection, enum fg_conn_phase phase)
{
	const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct fg_conn *k = info ? info->socket_context : NULL;

	if (!k)
		return;
	pthread_mutex_lock(&c->lock);
	k->phase = phase;
	clock_gettime(CLOCK_MONOTONIC, &k->since);
	pthread_mutex_unlock(&c->lock);
}

static void *reaper_main(void *arg)
{
	struct fg_conns *c = arg;

	pthread_mutex_lock(&c->lock);
	while (!c->stopping) {
		struct timespec now, until;

		clock_gettime(CLOCK_MONOTONIC, &now);
		for (struct fg_conn *k = c->head; k; k = k->next) {
			unsigned limit = c->limits.seconds[k->phase];

			if (k->shut || !limit || seconds_since(&k->since, &now) <= (double)limit)
				continue;
			/* libmicrohttpd reads end-of-file next and closes the connection itself. */
			shutdown(k->fd, SHUT_RDWR);
			k->shut = 1;
			c->closed[k->phase]++;
		}
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += 250 * 1000 * 1000;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&c->wake, &c->lock, &until);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

int fg_conns_start(struct fg_conns *c, const struct fg_conn_limits *limits)
{
	memset(c, 0, sizeof(*c));
	c->limits = *limits;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->wake, NULL);
	if (pthread_create(&c->reaper, NULL, reaper_main, c) != 0)
		return -1;
	c->started = 1;
	return 0;
}

void fg_conns_stop(struct fg_conns *c)
{
	if (c->started) {
		pthread_mutex_lock(&c->lock);
		c->stopping = 1;
		pthread_cond_signal(&c->wake);
		pthread_mutex_unlock(&c->lock);
		pthread_join(c->reaper, NULL);
		c->started = 0;
	}
	while (c->head) {
		struct fg_conn *k = c->head;

		c->head = k->next;
		free(k);
	}
	pthread_cond_destroy(&c->wake);
	pthread_mutex_destroy(&c->lock);
}
