/*
 * workers.h: N worker threads on the durable job queue.
 *
 * Each worker has its own store connection, claims the oldest queued job,
 * runs it (a forge), records progress and the result, and waits on one
 * condition variable when the queue is empty (woken by an enqueue here, by
 * NOTIFY from another instance, or after a second).  A keeper thread renews
 * the leases of the running jobs and takes over jobs whose lease expired.  Lock order: workers->lock is
 * the only lock here and is never held across the store or forge.
 *
 * Threads: besides the n workers, each forge opens its checkpoints with
 * fg_ckpt_open, which starts up to FG_CKPT_OPEN_THREADS header-parsing
 * threads of its own for the duration of the open (checkpoint.h); with n
 * workers busy that is up to n x FG_CKPT_OPEN_THREADS more threads, plus
 * the API's handlers doing the same for POST /v1/inspections.
 */
#ifndef FG_WORKERS_H
#define FG_WORKERS_H

#include <pthread.h>
#include <stddef.h>
#include <time.h>

#include "forge/core/error.h"

/*
 * At start-up, fg_store_jobs_recover requeues running jobs of other
 * instances (on a shared PostgreSQL store only those past their lease), and
 * any running job whose heartbeat (its last progress report or lease
 * renewal) is older than this many seconds.
 */
#define FG_WORKERS_STALE_SECONDS 60

/*
 * An idle worker turns its loop at least once a second; one that has not
 * turned it for this long is stuck, and /readyz answers not ready.  Busy
 * workers are exempt: a forge stage may run for minutes.
 */
#define FG_WORKERS_IDLE_LIVENESS_SECONDS 10.0

struct fg_api;

struct fg_workers;

struct fg_workers_config {
	unsigned n;
	const char *store;             /* the store's target (store.h: a path or a URL) */
	int lease_seconds;             /* of each claim; renewed every third of it */
	int max_attempts;              /* take-overs fail a job at this many attempts */
	/* A job's source, backbone and out are confined to these again when it runs; its out must be writable here. */
	const char *const *allow_roots;
	size_t n_allow_roots;
	const char *artifacts_dir;     /* a job without an out writes artifacts_dir/ID */
	const char *instance_id;
	struct fg_api *api;            /* for job-duration metrics; may be NULL */
	unsigned long long watchdog_usec; /* 0: no watchdog */
	const char *cache_dir;         /* remote sources: STATE/cache */
	unsigned etag_ttl_seconds;     /* fg_pull_opts.cache_ttl_seconds */
	const char *const *allow_hosts;
	size_t n_allow_hosts;
};

int fg_workers_start(struct fg_workers **out, const struct fg_workers_config *cfg, struct fg_err *err);

/* Give the workers the API once it runs, for job-duration metrics; NULL before it stops. */
void fg_workers_set_api(struct fg_workers *w, struct fg_api *api);

/* Wake an idle worker (a job was enqueued). */
void fg_workers_wake(void *workers);

/* 1 when every worker thread is running its loop. */
int fg_workers_alive(void *workers);

/*
 * For the watchdog: 1 when every idle worker turned its loop within half
 * the watchdog interval (plus its idle wait); busy workers count as healthy.
 * `forged serve` sends WATCHDOG=1 only when this and the HTTP self-check
 * (fg_api_self_check) both hold.
 */
int fg_workers_healthy(struct fg_workers *w);

/* Jobs running now. */
unsigned fg_workers_busy(struct fg_workers *w);

/*
 * Stop: no new claims; running jobs get drain_seconds to finish, then are
 * stopped at their next stage and put back in the queue.  Joins and frees.
 */
void fg_workers_stop(struct fg_workers *w, unsigned drain_seconds);

#endif
