/*
 * workers.c: the worker pool (workers.h).
 *
 * A job's output folder defaults to ARTIFACTS/ID (artifacts_dir, STATE/artifacts
 * unless configured).  A forge that ends well is stored as an artifact (its own inspection report, provenance and
 * fingerprint) and the job marked succeeded in one transaction
 * (fg_store_job_succeed), so a crash leaves either a running job and no
 * artifact row, or a finished job with exactly one.  forged.json names the
 * job ("job": {"id", "created_at"}); a rerun after a crash that came after
 * the rename finds the complete folder at `out` naming this job and adopts
 * it (inspects it and stores it) instead of forging again or failing
 * "already exists" on a client's out.
 *
 * Leases: each claim is this instance's for lease_seconds; a keeper thread
 * renews the leases of the running jobs every third of that (the
 * heartbeat), and every second takes over jobs whose lease expired, this
 * instance's or a dead one's (fg_store_jobs_reap).  A worker whose job was
 * taken over (its progress report is refused) stops it at the next stage
 * and leaves the job alone.
 *
 * Out: before forging, the worker checks that `out` lies in this
 * instance's allow_roots and that its parent (or the nearest folder that
 * exists above it) is writable here; a farm's outputs must be on storage
 * every instance sees, and an instance that cannot write there fails the
 * job saying so rather than half-writing it.
 *
 * Kill points (tests only, fault.h): each forge stage (inspect, fetch,
 * backbone, sidecar, provenance, check, done: after the rename), "forged"
 * (the forge returned, nothing stored) and "stored" (the artifact and the
 * job's success committed).
 */
#include "daemon/workers.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"
#include "api/paths.h"
#include "api/validate.h"
#include "daemon/cli.h"
#include "daemon/fault.h"
#include "daemon/log.h"
#include "forge/artifact/forge.h"
#include "forge/artifact/request.h"
#include "forge/core/json.h"
#include "forge/model/inspect.h"
#include "store/store.h"

#define IDLE_WAIT_MS 1000
#define REAP_EVERY_S 1

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
	struct worker *w;
	/* the keeper: heartbeats and take-overs */
	pthread_t keeper;
	int keeper_started;
	int keeper_stop;
	pthread_cond_t keeper_cond;
};

static double since(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t->tv_sec) + (double)(now.tv_nsec - t->tv_nsec) / 1e9;
}

/* ---- watchdog ---- */

int fg_workers_healthy(struct fg_workers *p)
{
	double limit = (double)p->cfg.watchdog_usec / 2e6 + IDLE_WAIT_MS / 1000.0;
	int healthy = 1;

	if (!p->cfg.watchdog_usec)
		limit = FG_WORKERS_IDLE_LIVENESS_SECONDS;
	pthread_mutex_lock(&p->lock);
	for (unsigned i = 0; i < p->cfg.n; i++)
		if (!p->w[i].busy && since(&p->w[i].alive) > limit)
			healthy = 0;
	pthread_mutex_unlock(&p->lock);
	return healthy;
}

static void touch(struct worker *w)
{
	pthread_mutex_lock(&w->pool->lock);
	clock_gettime(CLOCK_MONOTONIC, &w->alive);
	pthread_mutex_unlock(&w->pool->lock);
}

/*
 * Tell the API (when it still runs: fg_workers_set_api(NULL) before it
 * stops) that data changed, with the bytes forge wrote for it, and/or that
 * a job took seconds (>= 0) after fetching fetched bytes.  Under the pool's
 * lock, so the API cannot be freed meanwhile.
 */
static void tell_api(struct fg_workers *p, int data_changed, unsigned long long written, double seconds,
		     uint64_t fetched)
{
	pthread_mutex_lock(&p->lock);
	if (p->cfg.api && data_changed) {
		fg_api_data_changed(p->cfg.api);
		fg_api_count_forge_written(p->cfg.api, written);
	}
	if (p->cfg.api && seconds >= 0) {
		fg_api_job_finished(p->cfg.api, seconds);
		if (fetched)
			fg_api_count_pull(p->cfg.api, fetched, 0);
	}
	pthread_mutex_unlock(&p->lock);
}

struct job_ctx {
	struct worker *w;
	int64_t id;
	int cancelled;
	int aborted;
	int lost;                      /* another worker holds the job now (our lease expired) */
	struct timespec last_fetch;    /* byte progress is recorded at most 4 times a second */
	struct timespec last_store;    /* so is forge progress within a stage */
	char stage[16];                /* the stage last recorded */
	char began[16];                /* the stage last begun (a kill point, fault.h) */
	uint64_t fetched;              /* bytes the remote read fetched so far (for /metrics) */
};

#define PROGRESS_EVERY_S 0.25

/* Record progress (renewing the lease), and stop on cancel, shutdown or a lost lease. */
static int record_progress(struct job_ctx *j, const char *stage, double fraction, const struct fg_forge_progress *b)
{
	struct fg_err err = { 0 };
	struct fg_job job;
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &j->last_store);
	touch(j->w);
	if (b && b->bytes_total)
		rc = fg_store_job_progress_bytes(j->w->store, j->id, j->w->name, stage, fraction,
						 (int64_t)b->bytes_done, (int64_t)b->bytes_total, b->eta_s, &err);
	else
		rc = fg_store_job_progress(j->w->store, j->id, j->w->name, stage, fraction, &err);
	if (rc == FG_ECONFLICT || rc == FG_ENOTFOUND) {
		if (!j->lost)
			fg_log(FG_LOG_WARNING, "job %lld: %s; stopping this run", (long long)j->id, err.msg);
		j->lost = 1;
	}
	memset(&job, 0, sizeof(job));
	if (fg_store_job_get(j->w->store, j->id, &job, &err) == 0 && job.cancel_requested)
		j->cancelled = 1;
	fg_job_release(&job);
	pthread_mutex_lock(&j->w->pool->lock);
	j->aborted = j->w->pool->abort_jobs;
	pthread_mutex_unlock(&j->w->pool->lock);
	return j->cancelled || j->aborted || j->lost;
}

/*
 * Forge progress: a new stage is recorded at once, bytes within a stage at
 * most every PROGRESS_EVERY_S (each record is a committed write) and at the
 * stage's end, so the job's progress advances within long stages.
 */
static int on_progress(void *ctx, const struct fg_forge_progress *p)
{
	struct job_ctx *j = ctx;
	int new_stage = strcmp(j->stage, p->stage) != 0;

	/* Once per stage, as the CLI's forge does: not at each of its records. */
	if (strcmp(j->began, p->stage) != 0) {
		snprintf(j->began, sizeof(j->began), "%s", p->stage);
		fg_fault_point(p->stage);
	}
	if (!new_stage && !(p->bytes_total && p->bytes_done >= p->bytes_total) &&
	    since(&j->last_store) < PROGRESS_EVERY_S)
		return j->cancelled || j->aborted || j->lost;
	snprintf(j->stage, sizeof(j->stage), "%s", p->stage);
	return record_progress(j, p->stage, p->fraction, p);
}

/* Remote reads: the job's stage says the bytes fetched and the total to fetch. */
static int on_fetch(void *ctx, uint64_t done, uint64_t total)
{
	struct job_ctx *j = ctx;
	char stage[sizeof("fetch /") + 2 * 20]; /* two uint64_t in decimal: never cut */
	struct fg_forge_progress b = { .stage = "fetch", .bytes_done = done, .bytes_total = total, .eta_s = -1 };

	_Static_assert(sizeof(stage) - 1 <= FG_JOB_STAGE_MAX, "the store keeps a whole fetch stage");
	if (done > j->fetched)
		j->fetched = done;
	if (done < total && j->last_fetch.tv_sec && since(&j->last_fetch) < PROGRESS_EVERY_S)
		return j->cancelled || j->aborted || j->lost;
	clock_gettime(CLOCK_MONOTONIC, &j->last_fetch);
	snprintf(stage, sizeof(stage), "fetch %llu/%llu", (unsigned long long)done, (unsigned long long)total);
	j->stage[0] = '\0'; /* the forge's next report is recorded whatever its stage */
	return record_progress(j, stage, fg_forge_fetch_fraction(done, total), done <= total ? &b : NULL);
}

/*
 * A job's source and backbone are confined again when it runs, not only
 * when it was queued: a folder swapped for a link to elsewhere while the job
 * waited is refused here (FG_EFORBIDDEN); a URL is left to allow_hosts.  The
 * out is confined again by check_out and then created through its parent
 * opened link by link (out_nofollow), so a swap after the check does not
 * move it either.  Paths become the resolved ones.
 */
static int confine_again(const struct fg_workers *p, const char *field, const char **path, char *resolved,
			 struct fg_err *err)
{
	const char *why = "";

	if (!*path || fg_pull_is_url(*path))
		return 0;
	switch (fg_path_confine(*path, p->cfg.allow_roots, p->cfg.n_allow_roots, 1, resolved, &why)) {
	case FG_CONFINE_OK:
		*path = resolved;
		return 0;
	case FG_CONFINE_FORBIDDEN:
		return fg_err_set(err, FG_EFORBIDDEN, "%s '%s': %s (checked again as the job started)", field, *path,
				  why);
	default:
		return fg_err_set(err, FG_EINPUT, "%s '%s': %s (checked again as the job started)", field, *path, why);
	}
}

/*
 * Store the forged artifact and finish the job, in one transaction; 0 or
 * FG_E* with err set.  The same bytes forged before (the same digest) are
 * that artifact: *existed says so.
 */
static int store_artifact(struct worker *w, int64_t job, const char *source, const struct fg_forge_result *res,
			  int64_t *aid, int *existed, struct fg_err *err)
{
	const struct fg_inspect *r = res->check;
	cJSON *report;
	struct fg_inspect_summary sum;
	struct fg_artifact_in a = { .source = source, .path = res->artifact, .fingerprint = res->fingerprint,
				    .head_fingerprint = res->head_fingerprint, .digest = res->digest,
				    .mtplx_runtime = res->mtplx_runtime };
	int rc;

	fg_inspect_summarize(r, &sum);
	a.family = sum.family;
	a.ok = sum.ok;
	a.probe_mean = sum.probe_mean;
	a.head_convention = sum.head_convention;

	/* The provenance forge wrote, from memory: an artifact is never stored without its fingerprints. */
	if (!res->provenance)
		return fg_err_set(err, FG_EINTERNAL, "the forge of %s returned no provenance", res->artifact);
	a.provenance = res->provenance;
	report = fg_inspect_json(r);
	if (!report)
		return fg_err_set(err, FG_ENOMEM, "out of memory building the report of %s", res->artifact);
	/* File and tensor names are any bytes; what is stored (and served) is UTF-8. */
	fg_json_utf8_fix(report);
	fg_json_utf8_fix(res->provenance);
	a.report = report;
	rc = fg_store_job_succeed(w->store, job, w->name, &a, aid, existed, err);
	cJSON_Delete(report);
	return rc;
}

/* {"id", "created_at"}: what forged.json records of the job, so a rerun knows its own output. */
static cJSON *job_stamp(const struct fg_job *job)
{
	cJSON *o = cJSON_CreateObject();

	if (o && (!cJSON_AddNumberToObject(o, "id", (double)job->id) ||
		  !cJSON_AddStringToObject(o, "created_at", job->created_at))) {
		cJSON_Delete(o);
		o = NULL;
	}
	return o;
}

/* Copy forged.json's string key into dst (cap bytes); "" when absent, null or too long. */
static void doc_text(const cJSON *doc, const char *key, char *dst, size_t cap)
{
	const char *v = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(doc, key));

	dst[0] = '\0';
	if (v && strlen(v) < cap)
		snprintf(dst, cap, "%s", v);
}

/*
 * When out is a complete artifact whose forged.json names this job (a run
 * that died after the rename), fill res from it as a forge would: the
 * provenance, its fingerprints and digest, the mtplx_runtime.json it names,
 * and the folder's own inspection for target.  Returns 1 when adopted, 0
 * when out is not this job's.
 */
static int adopt(const char *out, const cJSON *stamp, const char *target, struct fg_forge_result *res,
		 struct fg_err *err)
{
	char path[PATH_MAX];
	cJSON *doc = NULL;
	const char *fp, *runtime;
	struct fg_err ignore = { 0 };

	if (snprintf(path, sizeof(path), "%s/forged.json", out) >= (int)sizeof(path) ||
	    fg_json_load(&doc, path, 64u << 20, &ignore) != 0)
		return 0;
	fp = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(doc, "fingerprint"));
	if (!cJSON_Compare(cJSON_GetObjectItemCaseSensitive(doc, "job"), stamp, 1) || !fp ||
	    strlen(fp) >= sizeof(res->fingerprint)) {
		cJSON_Delete(doc);
		return 0;
	}
	memset(res, 0, sizeof(*res));
	if (fg_inspect_run(&res->check, out, &target, 1, err) != 0) {
		cJSON_Delete(doc);
		return 0;
	}
	if (!res->check->ok) {
		fg_forge_result_release(res);
		cJSON_Delete(doc);
		return 0;
	}
	/* The runtime document it names is part of what was stored for it (forge.c wrote both). */
	runtime = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(doc, "mtplx_runtime"));
	if (runtime && (strchr(runtime, '/') ||
			snprintf(path, sizeof(path), "%s/%s", out, runtime) >= (int)sizeof(path) ||
			fg_json_load(&res->mtplx_runtime, path, 64u << 20, &ignore) != 0)) {
		fg_forge_result_release(res);
		cJSON_Delete(doc);
		return 0;
	}
	res->ok = 1;
	res->provenance = doc;
	snprintf(res->fingerprint, sizeof(res->fingerprint), "%s", fp);
	doc_text(doc, "head_fingerprint", res->head_fingerprint, sizeof(res->head_fingerprint));
	doc_text(doc, "digest", res->digest, sizeof(res->digest));
	if (!realpath(out, res->artifact))
		snprintf(res->artifact, sizeof(res->artifact), "%s", out);
	return 1;
}

/*
 * out must be writable by this instance.  A client's out is confined again
 * in this instance's allow_roots (the instance that took the request may
 * have other roots, and a folder may have been swapped for a link since);
 * *out then becomes the resolved path, kept in resolved.  Its parent, or
 * nearest existing ancestor, must be writable.
 */
static int check_out(struct fg_workers *p, const char **out, int own, char *resolved, struct fg_err *err)
{
	char dir[PATH_MAX];
	const char *why = "";

	if (!own) {
		switch (fg_path_confine(*out, p->cfg.allow_roots, p->cfg.n_allow_roots, 0, resolved, &why)) {
		case FG_CONFINE_OK:
			*out = resolved;
			break;
		case FG_CONFINE_FORBIDDEN:
			return fg_err_set(err, FG_EFORBIDDEN,
					  "instance %s cannot write out '%s': %s (checked again as the job started; out "
					  "must be in every instance's allow_roots, on storage every instance sees)",
					  p->cfg.instance_id, *out, why);
		default:
			return fg_err_set(err, FG_EINPUT, "out '%s': %s (checked again as the job started)", *out, why);
		}
	}
	snprintf(dir, sizeof(dir), "%s", *out);
	for (;;) {
		char *slash = strrchr(dir, '/');
		struct stat st;

		if (!slash)
			snprintf(dir, sizeof(dir), ".");
		else if (slash == dir)
			dir[1] = '\0';
		else
			*slash = '\0';
		if (stat(dir, &st) == 0)
			break;
		if (strcmp(dir, "/") == 0 || strcmp(dir, ".") == 0)
			break;
	}
	if (access(dir, W_OK) != 0)
		return fg_err_set(err, FG_EINPUT,
				  "instance %s cannot write out '%s': %s: %s (out must be on storage every instance sees "
				  "and can write)",
				  p->cfg.instance_id, *out, dir, strerror(errno));
	return 0;
}

/* Bytes of the regular files under dir that forge wrote: hard-linked (unchanged) shards are not counted. */
static unsigned long long bytes_written(const char *dir, int depth)
{
	unsigned long long n = 0;
	struct dirent *e;
	DIR *d;

	if (depth > 8 || !(d = opendir(dir)))
		return 0;
	while ((e = readdir(d))) {
		char path[PATH_MAX];
		struct stat st;

		if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int)sizeof(path) || lstat(path, &st) != 0)
			continue;
		if (S_ISDIR(st.st_mode))
			n += bytes_written(path, depth + 1);
		else if (S_ISREG(st.st_mode) && st.st_nlink == 1)
			n += (unsigned long long)st.st_size;
	}
	closedir(d);
	return n;
}

static void run_job(struct worker *w, struct fg_job *job)
{
	struct fg_workers *p = w->pool;
	struct fg_forge_result res;
	struct fg_err err = { 0 };
	struct job_ctx ctx = { .w = w, .id = job->id };
	struct timespec t0;
	char out[PATH_MAX];
	cJSON *params = cJSON_Parse(job->params), *stamp = job_stamp(job);
	struct fg_forge_opts o = { .version = FG_VERSION, .progress = on_progress, .progress_ctx = &ctx };
	struct fg_pull_opts pull;
	struct fg_forge_request rq;
	char src[PATH_MAX], bb[PATH_MAX], client_out[PATH_MAX];
	int adopted = 0, rc;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	memset(&res, 0, sizeof(res));
	fg_ckpt_pull_opts(&pull, p->cfg.cache_dir, p->cfg.allow_hosts, p->cfg.n_allow_hosts);
	pull.cache_ttl_seconds = p->cfg.etag_ttl_seconds;
	pull.progress = on_fetch;
	pull.progress_ctx = &ctx;
	o.pull = &pull;
	o.job = stamp;
	/* The stored params are what fg_forge_request_to_json wrote; read them with the same codec. */
	rc = fg_forge_request_from_json(&rq, params, NULL, &err);
	if (rc)
		fg_err_prefix(&err, rc, "job parameters: ");
	else
		fg_forge_request_opts(&rq, &o);
	/* A client's out: confined again in this instance's roots, with a writable parent (a farm's out is shared). */
	if (!rc && !(rc = confine_again(p, "source", &o.source, src, &err)) &&
	    !(rc = confine_again(p, "backbone", &o.backbone, bb, &err)) && o.out &&
	    !(rc = check_out(p, &o.out, 0, client_out, &err)))
		o.out_nofollow = 1;
	if (!o.out) {
		snprintf(out, sizeof(out), "%s/%lld", p->cfg.artifacts_dir, (long long)job->id);
		o.out = out;
		if (!rc)
			rc = check_out(p, &o.out, 1, NULL, &err);
	}
	if (!rc && !stamp)
		rc = fg_err_set(&err, FG_ENOMEM, "out of memory");
	/* A run that died after its rename left this job's artifact at out: adopt it. */
	if (!rc && adopt(o.out, stamp, o.target ? o.target : FG_FORGE_DEFAULT_TARGET, &res, &err)) {
		adopted = 1;
		fg_log(FG_LOG_NOTICE, "job %lld: %s is this job's complete artifact (a run died after its rename): adopted",
		       (long long)job->id, o.out);
	}
	/*
	 * Otherwise a rerun replaces what is at out, but only in the job's own
	 * folder: never a client's out.
	 */
	o.force = job->attempts > 0 && o.out == out;
	if (!adopted)
		fg_log(FG_LOG_INFO, "job %lld: forge %s -> %s (target %s, attempt %d)", (long long)job->id,
		       o.source ? o.source : "?", o.out, o.target ? o.target : "default", job->attempts + 1);
	if (!rc && !adopted)
		rc = fg_forge_run(&o, &res, &err);
	if (!rc)
		fg_fault_point("forged");
	if (ctx.lost) {
		/* Another instance took the job over when our lease ran out: it is theirs now. */
		fg_log(FG_LOG_NOTICE, "job %lld: taken over by another worker, this run is dropped", (long long)job->id);
	} else if (rc == FG_ECANCELLED && ctx.aborted && !ctx.cancelled) {
		fg_store_job_requeue(w->store, job->id, w->name, &err);
		fg_log(FG_LOG_NOTICE, "job %lld: stopped for shutdown, back in the queue", (long long)job->id);
	} else if (rc == FG_ECANCELLED) {
		fg_store_job_finish(w->store, job->id, w->name, FG_JOB_CANCELLED, "cancelled on request", 0, &err);
		fg_log(FG_LOG_NOTICE, "job %lld: cancelled", (long long)job->id);
	} else if (rc) {
		/* The cause is kept whole: a refusal's verdict code is stored as data, with the verdicts. */
		struct fg_err cause = err;
		const struct fg_verdict_row *refusal = fg_verdict_row(fg_err_refusal(&cause));
		cJSON *doc = fg_forge_result_json(&res, &o);

		if (doc)
			fg_json_utf8_fix(doc);
		fg_store_job_fail(w->store, job->id, w->name, &cause, cJSON_GetObjectItemCaseSensitive(doc, "verdicts"),
				  &err);
		cJSON_Delete(doc);
		fg_log(FG_LOG_WARNING, "job %lld: %s: %s%s%s", (long long)job->id, refusal ? "refused" : "failed",
		       refusal ? refusal->name : "", refusal ? ": " : "", cause.msg);
	} else {
		int64_t aid = 0;
		int existed = 0;

		rc = store_artifact(w, job->id, o.source, &res, &aid, &existed, &err);
		if (!rc) {
			fg_fault_point("stored");
			/* An adopted folder was written by an earlier run: nothing new written now. */
			tell_api(p, 1, adopted ? 0 : bytes_written(res.artifact, 0), -1.0, 0);
			fg_log(FG_LOG_INFO, "job %lld: succeeded, artifact %lld%s digest %s head fingerprint %s",
			       (long long)job->id, (long long)aid, existed ? " (the same bytes were stored before)" : "",
			       res.digest, res.head_fingerprint);
		} else if (rc == FG_ECONFLICT || rc == FG_ENOTFOUND) {
			fg_log(FG_LOG_NOTICE, "job %lld: not stored: %s", (long long)job->id, err.msg);
		} else if (rc == FG_ESTATE || rc == FG_ENOSPC) {
			/*
			 * Our own store failed (busy, full): the job stays running and the
			 * artifact at out; its lease runs out and a rerun adopts the folder.
			 */
			fg_log(FG_LOG_ERR, "job %lld: storing the artifact: %s (left for a rerun to adopt)",
			       (long long)job->id, err.msg);
		} else {
			char msg[FG_ERR_MSG_MAX + 32];

			snprintf(msg, sizeof(msg), "storing the artifact: %s", err.msg);
			fg_store_job_finish(w->store, job->id, w->name, FG_JOB_FAILED, msg, 0, &err);
			fg_log(FG_LOG_ERR, "job %lld: %s", (long long)job->id, msg);
		}
	}
	tell_api(p, 0, 0, since(&t0), ctx.fetched);
	fg_forge_result_release(&res);
	cJSON_Delete(params);
	cJSON_Delete(stamp);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct fg_workers *p = w->pool;
	struct fg_err err = { 0 };
	const char *name = w->name;

	snprintf(w->name, sizeof(w->name), "%s/%u", p->cfg.instance_id, w->index);
	if (fg_store_open(&w->store, p->cfg.store, &err) != 0) {
		fg_log(FG_LOG_ERR, "worker %u: %s", w->index, err.msg);
		return NULL;
	}
	fg_store_set_lease(w->store, p->cfg.lease_seconds);
	for (;;) {
		struct fg_job job;
		struct timespec until;
		int got;

		touch(w);
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
		/* Woken by an enqueue (this instance's, or another's through NOTIFY); else a poll a second. */
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

/*
 * The keeper: every REAP_EVERY_S, take over the jobs whose lease expired
 * (anyone's); every third of the lease, renew this instance's.  Its own
 * store connection; it runs until the workers have stopped, so a draining
 * job keeps its lease.
 */
static void *keeper_main(void *arg)
{
	struct fg_workers *p = arg;
	struct fg_store *s = NULL;
	struct fg_err err = { 0 };
	struct timespec last_renew = { 0, 0 };
	double renew_every = p->cfg.lease_seconds / 3.0;

	if (fg_store_open(&s, p->cfg.store, &err) != 0) {
		fg_log(FG_LOG_ERR, "lease keeper: %s", err.msg);
		return NULL;
	}
	fg_store_set_lease(s, p->cfg.lease_seconds);
	pthread_mutex_lock(&p->lock);
	while (!p->keeper_stop) {
		struct timespec until;
		unsigned busy = 0;
		int requeued = 0, failed = 0;

		for (unsigned i = 0; i < p->cfg.n; i++)
			busy += (unsigned)p->w[i].busy;
		pthread_mutex_unlock(&p->lock);
		if (busy && (!last_renew.tv_sec || since(&last_renew) >= renew_every)) {
			clock_gettime(CLOCK_MONOTONIC, &last_renew);
			if (fg_store_jobs_renew(s, p->cfg.instance_id, NULL, &err) != 0)
				fg_log(FG_LOG_ERR, "renewing leases: %s", err.msg);
		}
		if (fg_store_jobs_reap(s, p->cfg.max_attempts, &requeued, &failed, &err) != 0)
			fg_log(FG_LOG_ERR, "taking over expired jobs: %s", err.msg);
		else if (requeued || failed)
			fg_log(FG_LOG_NOTICE, "took over jobs whose lease expired: %d requeued, %d failed for good",
			       requeued, failed);
		if (requeued)
			fg_workers_wake(p);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += REAP_EVERY_S;
		pthread_mutex_lock(&p->lock);
		if (!p->keeper_stop)
			pthread_cond_timedwait(&p->keeper_cond, &p->lock, &until);
	}
	pthread_mutex_unlock(&p->lock);
	fg_store_close(s);
	return NULL;
}

int fg_workers_start(struct fg_workers **out, const struct fg_workers_config *cfg, struct fg_err *err)
{
	struct fg_workers *p = calloc(1, sizeof(*p));
	char dir[PATH_MAX];

	if (!p)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	p->cfg = *cfg;
	if (p->cfg.lease_seconds < 3)
		p->cfg.lease_seconds = FG_STORE_LEASE_DEFAULT;
	if (p->cfg.max_attempts < 1)
		p->cfg.max_attempts = 3;
	snprintf(dir, sizeof(dir), "%s", cfg->artifacts_dir);
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
	pthread_cond_init(&p->keeper_cond, NULL);
	for (unsigned i = 0; i < cfg->n; i++) {
		p->w[i].pool = p;
		p->w[i].index = i;
		clock_gettime(CLOCK_MONOTONIC, &p->w[i].alive);
		if (pthread_create(&p->w[i].tid, NULL, worker_main, &p->w[i]) == 0)
			p->w[i].started = 1;
	}
	if (pthread_create(&p->keeper, NULL, keeper_main, p) == 0)
		p->keeper_started = 1;
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
	pthread_mutex_lock(&p->lock);
	p->keeper_stop = 1;
	pthread_cond_signal(&p->keeper_cond);
	pthread_mutex_unlock(&p->lock);
	if (p->keeper_started)
		pthread_join(p->keeper, NULL);
	pthread_cond_destroy(&p->keeper_cond);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p->w);
	free(p);
}
