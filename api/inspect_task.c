/*
 * inspect_task.c: inspections off the HTTP threads, with a deadline
 * (internal.h, fg_api_inspect).
 *
 * An inspection opens and reads files of the client's choosing.  A FIFO
 * where config.json should be blocks open() for good: run on the HTTP
 * thread, a few such requests held every HTTP thread, /livez timed out and
 * SIGTERM never completed.  So each inspection runs on a detached thread of
 * its own, which owns copies of everything it reads (the source, the
 * runtime ids, the pull options), never the API.  The HTTP thread waits for
 * it until the deadline, or until the drain begins, and then answers 503
 * with Retry-After; a thread still running after that finishes (or stays
 * blocked) on its own and frees the task when the last of the two lets go.
 *
 * Two bounds keep the HTTP side answering: at most threads - 1 HTTP threads
 * wait for inspections at once (one always serves probes and reads), and at
 * most FG_API_INSPECT_THREADS_MAX inspection threads exist, counting those
 * whose requests gave up on them (a wedged thread keeps its slot: that is
 * what the bound is for).  Past either, 503 inspections-busy at once.  When
 * every slot is held by a thread past its deadline, inspections are down
 * until a restart: /readyz says so and the watchdog withholds WATCHDOG=1,
 * so systemd restarts the service (fg_api_self_check).
 */
#include "api/internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "forge/model/inspect.h"
#include "forge/source/checkpoint.h"

struct inspect_task {
	pthread_mutex_t lock;
	pthread_cond_t done_cond;
	int refs;                      /* the thread's and the waiter's */
	int done;
	char source[PATH_MAX];
	char rt_ids[FG_INSPECT_MAX_RUNTIMES][64];
	const char *rts[FG_INSPECT_MAX_RUNTIMES];
	size_t n_rt;
	char cache_dir[PATH_MAX];
	int has_cache;
	unsigned etag_ttl_seconds;     /* the server's etag_ttl_seconds */
	char hosts[FG_API_MAX_ROOTS][256];
	const char *host_ptrs[FG_API_MAX_ROOTS];
	size_t n_hosts;
	int rc;
	struct fg_err err;
	struct fg_inspect *r;          /* the result, the waiter's once taken */
	int abandoned;                 /* its request gave up on it at the deadline */
};

/* Inspection threads alive, the abandoned ones too: process-wide, as the threads may outlive an API. */
static pthread_mutex_t running_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned running, abandoned;

static void task_unref(struct inspect_task *t)
{
	int last;

	pthread_mutex_lock(&t->lock);
	last = --t->refs == 0;
	pthread_mutex_unlock(&t->lock);
	if (!last)
		return;
	fg_inspect_free(t->r);
	pthread_cond_destroy(&t->done_cond);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

static void *inspect_main(void *arg)
{
	struct inspect_task *t = arg;
	struct fg_pull_opts o;
	struct fg_inspect *r = NULL;
	struct fg_err err = { 0 };
	int rc;

	fg_ckpt_pull_opts(&o, t->has_cache ? t->cache_dir : NULL, t->host_ptrs, t->n_hosts);
	o.cache_ttl_seconds = t->etag_ttl_seconds;
	rc = fg_inspect_run_opts(&r, t->source, t->rts, t->n_rt, &o, &err);
	int was_abandoned;

	pthread_mutex_lock(&t->lock);
	t->rc = rc;
	t->err = err;
	t->r = r;
	t->done = 1;
	was_abandoned = t->abandoned;
	pthread_cond_signal(&t->done_cond);
	pthread_mutex_unlock(&t->lock);
	task_unref(t);
	pthread_mutex_lock(&running_lock);
	running--;
	if (was_abandoned)
		abandoned--;
	pthread_mutex_unlock(&running_lock);
	return NULL;
}

unsigned fg_api_inspections_running(unsigned *stuck)
{
	unsigned n;

	pthread_mutex_lock(&running_lock);
	n = running;
	if (stuck)
		*stuck = abandoned;
	pthread_mutex_unlock(&running_lock);
	return n;
}

static int api_draining(struct fg_api *api)
{
	int d;

	pthread_mutex_lock(&api->drain_lock);
	d = api->draining;
	pthread_mutex_unlock(&api->drain_lock);
	return d;
}

int fg_api_inspect(struct fg_api *api, const char *source, const char *const *runtimes, size_t n_runtimes,
		   struct fg_inspect **out, struct fg_err *err)
{
	const struct fg_api_config *cfg = &api->cfg;
	unsigned waiters_max = cfg->threads > 1 ? cfg->threads - 1 : 1;
	unsigned seconds = cfg->inspect_seconds ? cfg->inspect_seconds : FG_API_INSPECT_SECONDS_DEFAULT;
	struct inspect_task *t;
	struct timespec until;
	pthread_attr_t attr;
	pthread_t tid;
	int rc, slot = 0;

	*out = NULL;
	pthread_mutex_lock(&api->inspect_lock);
	if (api->inspect_waiting < waiters_max) {
		pthread_mutex_lock(&running_lock);
		if (running < FG_API_INSPECT_THREADS_MAX) {
			running++;
			api->inspect_waiting++;
			slot = 1;
		}
		pthread_mutex_unlock(&running_lock);
	}
	pthread_mutex_unlock(&api->inspect_lock);
	if (!slot)
		return FG_API_INSPECT_BUSY;
	t = calloc(1, sizeof(*t));
	if (!t) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto unslot;
	}
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->done_cond, NULL);
	t->refs = 2;
	snprintf(t->source, sizeof(t->source), "%s", source);
	for (size_t i = 0; i < n_runtimes && i < FG_INSPECT_MAX_RUNTIMES; i++) {
		snprintf(t->rt_ids[i], sizeof(t->rt_ids[i]), "%s", runtimes[i]);
		t->rts[t->n_rt++] = t->rt_ids[i];
	}
	if (cfg->cache_dir) {
		snprintf(t->cache_dir, sizeof(t->cache_dir), "%s", cfg->cache_dir);
		t->has_cache = 1;
	}
	t->etag_ttl_seconds = cfg->etag_ttl_seconds;
	for (size_t i = 0; i < cfg->n_allow_hosts && i < FG_API_MAX_ROOTS; i++) {
		snprintf(t->hosts[i], sizeof(t->hosts[i]), "%s", cfg->allow_hosts[i]);
		t->host_ptrs[t->n_hosts++] = t->hosts[i];
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&tid, &attr, inspect_main, t);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		pthread_cond_destroy(&t->done_cond);
		pthread_mutex_destroy(&t->lock);
		free(t);
		rc = fg_err_set(err, FG_ESTATE, "cannot start an inspection thread (%s)", strerror(rc));
		goto unslot;
	}
	/* From here the thread owns its slot in `running`; this thread keeps its waiter slot. */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (time_t)seconds;
	pthread_mutex_lock(&t->lock);
	while (!t->done) {
		struct timespec now, slice;

		clock_gettime(CLOCK_REALTIME, &now);
		if (now.tv_sec > until.tv_sec || (now.tv_sec == until.tv_sec && now.tv_nsec >= until.tv_nsec))
			break;
		/* Slices of 200 ms, so the drain does not wait for the deadline. */
		slice = now;
		slice.tv_nsec += 200 * 1000 * 1000;
		if (slice.tv_nsec >= 1000000000L) {
			slice.tv_sec++;
			slice.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&t->done_cond, &t->lock, &slice);
		if (!t->done) {
			pthread_mutex_unlock(&t->lock);
			if (api_draining(api)) {
				pthread_mutex_lock(&t->lock);
				break;
			}
			pthread_mutex_lock(&t->lock);
		}
	}
	if (t->done) {
		rc = t->rc;
		*err = t->err;
		*out = t->r;
		t->r = NULL;
	} else {
		rc = api_draining(api) ? FG_API_INSPECT_DRAINING : FG_API_INSPECT_TIMEOUT;
		fg_err_set(err, FG_ESTATE, "the inspection of %s did not finish within %u s", source, seconds);
		t->abandoned = 1;
		/* Under t->lock: the thread reads the flag under it, so the count cannot go wrong. */
		pthread_mutex_lock(&running_lock);
		abandoned++;
		pthread_mutex_unlock(&running_lock);
	}
	pthread_mutex_unlock(&t->lock);
	task_unref(t);
	pthread_mutex_lock(&api->inspect_lock);
	api->inspect_waiting--;
	if (rc == FG_API_INSPECT_TIMEOUT)
		api->inspect_timeouts++;
	pthread_mutex_unlock(&api->inspect_lock);
	return rc;
unslot:
	pthread_mutex_lock(&running_lock);
	running--;
	pthread_mutex_unlock(&running_lock);
	pthread_mutex_lock(&api->inspect_lock);
	api->inspect_waiting--;
	pthread_mutex_unlock(&api->inspect_lock);
	return rc;
}
