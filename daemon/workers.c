/*
 * workers.c: the worker pool (workers.h).
 *
 * A job's output folder defaults to STATE/artifacts/ID.  A forge that ends
 * well is stored as an artifact (its own inspection report, provenance and
 * fingerprint) before the job is marked succeeded, so a crash between the two
 * leaves a job that runs again and finds the artifact already in place.
 */
#include "daemon/workers.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"
#include "daemon/cli.h"
#include "daemon/log.h"
#include "daemon/notify.h"
#include "forge/artifact/forge.h"
#include "forge/artifact/request.h"
#include "store/store.h"

#define IDLE_WAIT_MS 1000

struct worker {
	struct fg_workers *pool;
	unsigned index;
	pthread_t tid;
	int started;
	struct timespec alive;         /* last loop turn or progress report */
	int busy;
	struct fg_store *store;
	int64_t job_id;
	char name[96];                 /* "INSTANCE/N" */
};

struct fg_workers {
	struct fg_workers_config cfg;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int stopping;                  /* no new claims */
	int abort_jobs;                /* stop running jobs at their next stage */
	int wakeups;
	struct timespec last_watchdog;
	struct worker *w;
};

static double since(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t->tv_sec) + (double)(now.tv_nsec - t->tv_nsec) / 1e9;
}

/* WATCHDOG=1 when every worker turned its loop (or reported progress) lately. */
static void maybe_watchdog(struct fg_workers *p)
{
	double interval = (double)p->cfg.watchdog_usec / 1e6, limit = interval / 2;
	int healthy = 1;

	if (!p->cfg.watchdog_usec)
		return;
	pthread_mutex_lock(&p->lock);
	if (since(&p->last_watchdog) >= interval / 3) {
		for (unsigned i = 0; i < p->cfg.n; i++)
			if (!p->w[i].busy && since(&p->w[i].alive) > limit + IDLE_WAIT_MS / 1000.0)
				healthy = 0;
		if (healthy) {
			clock_gettime(CLOCK_MONOTONIC, &p->last_watchdog);
			fg_notify("WATCHDOG=1");
		}
	}
	pthread_mutex_unlock(&p->lock);
}

static void touch(struct worker *w)
{
	pthread_mutex_lock(&w->pool->lock);
	clock_gettime(CLOCK_MONOTONIC, &w->alive);
	pthread_mutex_unlock(&w->pool->lock);
}

struct job_ctx {
	struct worker *w;
	int64_t id;
	int cancelled;
	int aborted;
	struct timespec last_fetch;    /* byte progress is recorded at most 4 times a second */
};

/* Forge progress: record it, and stop on cancel or shutdown. */
static int on_progress(void *ctx, const char *stage, double fraction)
{
	struct job_ctx *j = ctx;
	struct fg_err err = { 0 };
	struct fg_job job;
	const char *fault = getenv("FORGED_FAULT_STAGE");

	if (fault && strcmp(fault, stage) == 0)
		raise(SIGKILL); /* crash tests: die mid-job, like a power cut */
	touch(j->w);
	maybe_watchdog(j->w->pool);
	fg_store_job_progress(j->w->store, j->id, j->w->name, stage, fraction, &err);
	memset(&job, 0, sizeof(job));
	if (fg_store_job_get(j->w->store, j->id, &job, &err) == 0 && job.cancel_requested)
		j->cancelled = 1;
	fg_job_release(&job);
	pthread_mutex_lock(&j->w->pool->lock);
	j->aborted = j->w->pool->abort_jobs;
	pthread_mutex_unlock(&j->w->pool->lock);
	return j->cancelled || j->aborted;
}

/* Remote reads: the job's stage says the bytes fetched and the total to fetch. */
static int on_fetch(void *ctx, uint64_t done, uint64_t total)
{
	struct job_ctx *j = ctx;
	char stage[32];

	if (done < total && j->last_fetch.tv_sec && since(&j->last_fetch) < 0.25)
		return j->cancelled || j->aborted;
	clock_gettime(CLOCK_MONOTONIC, &j->last_fetch);
	snprintf(stage, sizeof(stage), "fetch %llu/%llu", (unsigned long long)done, (unsigned long long)total);
	return on_progress(ctx, stage, fg_forge_fetch_fraction(done, total));
}

/* Store the forged artifact; returns its id or 0 with err set. */
static int64_t store_artifact(struct worker *w, const char *source, const struct fg_forge_result *res,
			      struct fg_err *err)
{
	const struct fg_inspect *r = res->check;
	cJSON *report;
	int64_t id = 0;
	struct fg_inspect_summary sum;
	struct fg_artifact_in a = { .source = source, .path = res->artifact, .fingerprint = res->fingerprint };

	fg_inspect_summarize(r, &sum);
	a.family = sum.family;
	a.ok = sum.ok;
	a.probe_mean = sum.probe_mean;
	a.head_convention = sum.head_convention;

	/* The provenance forge wrote, from memory: an artifact is never stored without its fingerprints. */
	if (!res->provenance) {
		fg_err_set(err, FG_EINTERNAL, "the forge of %s returned no provenance", res->artifact);
		return 0;
	}
	a.provenance = res->provenance;
	report = fg_inspect_json(r);
	if (!report) {
		fg_err_set(err, FG_ENOMEM, "out of memory building the report of %s", res->artifact);
		return 0;
	}
	a.report = report;
	if (fg_store_artifact_put(w->store, &a, &id, err) != 0)
		id = 0;
	cJSON_Delete(report);
	return id;
}

static void run_job(struct worker *w, struct fg_job *job)
{
	struct fg_workers *p = w->pool;
	struct fg_forge_result res;
	struct fg_err err = { 0 };
	struct job_ctx ctx = { .w = w, .id = job->id };
	struct timespec t0;
	char out[PATH_MAX];
	cJSON *params = cJSON_Parse(job->params);
	struct fg_forge_opts o = { .version = FG_VERSION, .progress = on_progress, .progress_ctx = &ctx };
	struct fg_api *api;
	struct fg_pull_opts pull;
	struct fg_forge_request rq;
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	memset(&res, 0, sizeof(res));
	fg_ckpt_pull_opts(&pull, p->cfg.cache_dir, p->cfg.allow_hosts, p->cfg.n_allow_hosts);
	pull.progress = on_fetch;
	pull.progress_ctx = &ctx;
	o.pull = &pull;
	/* The stored params are what fg_forge_request_to_json wrote; read them with the same codec. */
	rc = fg_forge_request_from_json(&rq, params, NULL, &err);
	if (rc)
		fg_err_prefix(&err, rc, "job parameters: ");
	else
		fg_forge_request_opts(&rq, &o);
	if (!o.out) {
		snprintf(out, sizeof(out), "%s/artifacts/%lld", p->cfg.state_dir, (long long)job->id);
		o.out = out;
	}
	/*
	 * A rerun after a crash that happened after the rename replaces the
	 * artifact, but only in the job's own folder: never a client's out.
	 */
	o.force = job->attempts > 0 && o.out == out;
	fg_log(FG_LOG_INFO, "job %lld: forge %s -> %s (target %s, attempt %d)", (long long)job->id,
	       o.source ? o.source : "?", o.out, o.target ? o.target : "default", job->attempts + 1);
	if (!rc)
		rc = fg_forge_run(&o, &res, &err);
	if (rc == FG_ECANCELLED && ctx.aborted && !ctx.cancelled) {
		fg_store_job_requeue(w->store, job->id, w->name, &err);
		fg_log(FG_LOG_NOTICE, "job %lld: stopped for shutdown, back in the queue", (long long)job->id);
	} else if (rc == FG_ECANCELLED) {
		fg_store_job_finish(w->store, job->id, w->name, FG_JOB_CANCELLED, "cancelled on request", 0, &err);
		fg_log(FG_LOG_NOTICE, "job %lld: cancelled", (long long)job->id);
	} else if (rc) {
		/* The cause is kept whole: a refusal's verdict code is stored as data. */
		struct fg_err cause = err;
		const struct fg_verdict_row *refusal = fg_verdict_row(fg_err_refusal(&cause));

		fg_store_job_fail(w->store, job->id, w->name, &cause, &err);
		fg_log(FG_LOG_WARNING, "job %lld: %s: %s%s%s", (long long)job->id, refusal ? "refused" : "failed",
		       refusal ? refusal->name : "", refusal ? ": " : "", cause.msg);
	} else {
		int64_t aid = store_artifact(w, o.source, &res, &err);

		if (aid) {
			pthread_mutex_lock(&p->lock);
			api = p->cfg.api;
			pthread_mutex_unlock(&p->lock);
			fg_api_data_changed(api);
			fg_store_job_finish(w->store, job->id, w->name, FG_JOB_SUCCEEDED, NULL, aid, &err);
			fg_log(FG_LOG_INFO, "job %lld: succeeded, artifact %lld fingerprint %s", (long long)job->id,
			       (long long)aid, res.fingerprint);
		} else {
			char msg[FG_ERR_MSG_MAX + 32];

			snprintf(msg, sizeof(msg), "storing the artifact: %s", err.msg);
			fg_store_job_finish(w->store, job->id, w->name, FG_JOB_FAILED, msg, 0, &err);
			fg_log(FG_LOG_ERR, "job %lld: %s", (long long)job->id, msg);
		}
	}
	pthread_mutex_lock(&p->lock);
	api = p->cfg.api;
	pthread_mutex_unlock(&p->lock);
	fg_api_job_finished(api, since(&t0));
	fg_forge_result_release(&res);
	cJSON_Delete(params);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct fg_workers *p = w->pool;
	struct fg_err err = { 0 };
	const char *name = w->name;

	snprintf(w->name, sizeof(w->name), "%s/%u", p->cfg.instance_id, w->index);
	if (fg_store_open(&w->store, p->cfg.db_path, &err) != 0) {
		fg_log(FG_LOG_ERR, "worker %u: %s", w->index, err.msg);
		return NULL;
	}
	for (;;) {
		struct fg_job job;
		struct timespec until;
		int got;

		touch(w);
		maybe_watchdog(p);
		pthread_mutex_lock(&p->lock);
		if (p->stopping) {
			pthread_mutex_unlock(&p->lock);
			break;
		}
		pthread_mutex_unlock(&p->lock);
		memset(&job, 0, sizeof(job));
		got = fg_store_job_claim(w->store, name, &job, &err);
		if (got < 0)
			fg_log(FG_LOG_ERR, "worker %u: claim: %s", w->index, err.msg);
		if (got > 0) {
			pthread_mutex_lock(&p->lock);
			w->busy = 1;
			w->job_id = job.id;
			pthread_mutex_unlock(&p->lock);
			run_job(w, &job);
			pthread_mutex_lock(&p->lock);
			w->busy = 0;
			pthread_mutex_unlock(&p->lock);
			fg_job_release(&job);
			continue;
		}
		fg_job_release(&job);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += IDLE_WAIT_MS / 1000;
		pthread_mutex_lock(&p->lock);
		while (!p->stopping && !p->wakeups &&
		       pthread_cond_timedwait(&p->cond, &p->lock, &until) == 0)
			;
		if (p->wakeups)
			p->wakeups--;
		pthread_mutex_unlock(&p->lock);
	}
	fg_store_close(w->store);
	w->store = NULL;
	return NULL;
}

int fg_workers_start(struct fg_workers **out, const struct fg_workers_config *cfg, struct fg_err *err)
{
	struct fg_workers *p = calloc(1, sizeof(*p));
	char dir[PATH_MAX];

	if (!p)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	p->cfg = *cfg;
	snprintf(dir, sizeof(dir), "%s/artifacts", cfg->state_dir);
	if (mkdir(dir, 0750) != 0 && access(dir, W_OK) != 0) {
		free(p);
		return fg_err_set(err, FG_ESTATE, "%s: cannot create the artifacts folder", dir);
	}
	p->w = calloc(cfg->n ? cfg->n : 1, sizeof(*p->w));
	if (!p->w) {
		free(p);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	for (unsigned i = 0; i < cfg->n; i++) {
		p->w[i].pool = p;
		p->w[i].index = i;
		clock_gettime(CLOCK_MONOTONIC, &p->w[i].alive);
		if (pthread_create(&p->w[i].tid, NULL, worker_main, &p->w[i]) == 0)
			p->w[i].started = 1;
	}
	*out = p;
	return 0;
}

void fg_workers_set_api(struct fg_workers *p, struct fg_api *api)
{
	pthread_mutex_lock(&p->lock);
	p->cfg.api = api;
	pthread_mutex_unlock(&p->lock);
}

void fg_workers_wake(void *workers)
{
	struct fg_workers *p = workers;

	pthread_mutex_lock(&p->lock);
	if (p->wakeups < (int)p->cfg.n)
		p->wakeups++;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

int fg_workers_alive(void *workers)
{
	struct fg_workers *p = workers;
	int alive = 1;

	pthread_mutex_lock(&p->lock);
	for (unsigned i = 0; i < p->cfg.n; i++)
		if (!p->w[i].started || (!p->w[i].busy && since(&p->w[i].alive) > FG_WORKERS_IDLE_LIVENESS_SECONDS))
			alive = 0;
	pthread_mutex_unlock(&p->lock);
	return alive;
}

unsigned fg_workers_busy(struct fg_workers *p)
{
	unsigned n = 0;

	pthread_mutex_lock(&p->lock);
	for (unsigned i = 0; i < p->cfg.n; i++)
		n += (unsigned)p->w[i].busy;
	pthread_mutex_unlock(&p->lock);
	return n;
}

void fg_workers_stop(struct fg_workers *p, unsigned drain_seconds)
{
	struct timespec t0;

	if (!p)
		return;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_mutex_lock(&p->lock);
	p->stopping = 1;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	while (fg_workers_busy(p) && since(&t0) < (double)drain_seconds)
		usleep(50 * 1000);
	pthread_mutex_lock(&p->lock);
	p->abort_jobs = 1;
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < p->cfg.n; i++)
		if (p->w[i].started)
			pthread_join(p->w[i].tid, NULL);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p->w);
	free(p);
}
