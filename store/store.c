/*
 * store.c: the store interface of store.h over its two backends.
 *
 * fg_store_open reads the target (a path or sqlite:///PATH: the SQLite
 * backend, sqlite/; postgres:// or postgresql://: the PostgreSQL backend,
 * pg/), opens the caller's connection (which migrates), and attaches to
 * the process's writer for that database (writer.c).  Reads run on the
 * caller's connection; every write is a small function handed to the
 * writer, which runs it inside the batch's transaction and answers once the
 * commit is durable.  A write function may run twice (writer.c): each
 * releases what an earlier run left in its arguments.
 */
#include "store/internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUSY_DEFAULT_MS 5000
#define PROBE_BUSY_MS 500   /* the readiness write probe waits this long for another process's lock */

static int has_prefix(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

int fg_store_is_postgres(const char *target)
{
	return target && (has_prefix(target, "postgres://") || has_prefix(target, "postgresql://"));
}

const char *fg_store_sqlite_path(const char *target)
{
	if (!target || !*target || fg_store_is_postgres(target))
		return NULL;
	if (has_prefix(target, "sqlite://"))
		return *(target + strlen("sqlite://")) ? target + strlen("sqlite://") : NULL;
	return strstr(target, "://") ? NULL : target;
}

/* The backend of target and what it opens (a path, or the URL itself). */
static int parse_target(const char *target, const struct fg_store_ops **ops, const char **what, struct fg_err *err)
{
	if (!target || !*target)
		return fg_err_set(err, FG_EINPUT, "opening the store: no database path");
	if (fg_store_is_postgres(target)) {
		*ops = &fg_pg_ops;
		*what = target;
		return 0;
	}
	if (has_prefix(target, "sqlite://")) {
		*ops = &fg_sqlite_ops;
		*what = target + strlen("sqlite://");
		if (!**what)
			return fg_err_set(err, FG_EINPUT, "store '%s': no database path after sqlite://", target);
		return 0;
	}
	if (strstr(target, "://"))
		return fg_err_set(err, FG_EINPUT,
				  "store '%s': unknown scheme (sqlite:///PATH or postgres://USER@HOST/DB)", target);
	*ops = &fg_sqlite_ops;
	*what = target;
	return 0;
}

void fg_store_describe(const char *target, char *buf, size_t cap)
{
	const char *at, *colon, *rest;

	if (!cap)
		return;
	if (!target) {
		snprintf(buf, cap, "(none)");
		return;
	}
	if (!fg_store_is_postgres(target)) {
		snprintf(buf, cap, "sqlite:%s", has_prefix(target, "sqlite://") ? target + strlen("sqlite://") : target);
		return;
	}
	/* postgres://user:secret@host/db: the password stays out of logs. */
	rest = strstr(target, "://") + 3;
	at = strchr(rest, '@');
	colon = strchr(rest, ':');
	if (at && colon && colon < at && !memchr(rest, '/', (size_t)(at - rest)))
		snprintf(buf, cap, "%.*s%.*s%s", (int)(rest - target), target, (int)(colon - rest), rest, at);
	else
		snprintf(buf, cap, "%s", target);
	/* A password may also ride in the query string (password=...). */
	{
		char *p = strstr(buf, "password=");

		if (p)
			snprintf(p, cap - (size_t)(p - buf), "password=...");
	}
}

struct fg_store *fg_store_new_conn(const struct fg_store_ops *ops, const char *target, struct fg_err *err)
{
	struct fg_store *s = calloc(1, sizeof(*s));

	if (!s) {
		fg_err_set(err, FG_ENOMEM, "opening '%s': out of memory", target);
		return NULL;
	}
	s->ops = ops;
	s->busy_ms = BUSY_DEFAULT_MS;
	s->lease_seconds = FG_STORE_LEASE_DEFAULT;
	if (ops->open(s, target, err) != 0) {
		fg_store_free_conn(s);
		return NULL;
	}
	return s;
}

void fg_store_free_conn(struct fg_store *s)
{
	if (!s)
		return;
	s->ops->close(s);
	free(s);
}

int fg_store_open(struct fg_store **out, const char *target, struct fg_err *err)
{
	const struct fg_store_ops *ops = NULL;
	const char *what = NULL;
	struct fg_store *s;
	char key[PATH_MAX];
	int rc;

	if (!out)
		return fg_err_set(err, FG_EINPUT, "opening the store: no output");
	rc = parse_target(target, &ops, &what, err);
	if (rc)
		return rc;
	s = fg_store_new_conn(ops, what, err);
	if (!s)
		return err && err->code ? err->code : FG_ESTATE;
	/* One writer per database file, however its path is spelled (the file exists now). */
	if (ops == &fg_sqlite_ops && realpath(what, key))
		what = key;
	s->writer = fg_writer_get(ops, what, err);
	if (!s->writer) {
		rc = err && err->code ? err->code : FG_ESTATE;
		fg_store_free_conn(s);
		return rc;
	}
	*out = s;
	return 0;
}

void fg_store_close(struct fg_store *s)
{
	if (!s)
		return;
	fg_writer_put(s->writer);
	fg_store_free_conn(s);
}

int fg_store_user_version(struct fg_store *s)
{
	return s ? s->user_version : -1;
}

const char *fg_store_backend(const struct fg_store *s)
{
	return s ? s->ops->name : "none";
}

void fg_store_set_lease(struct fg_store *s, int seconds)
{
	if (s)
		s->lease_seconds = seconds < 2 ? 2 : seconds;
}

/* ---- jobs ---- */

struct enqueue_args {
	const char *kind, *params, *asked, *key, *sha;
	int cap;
	int replayed;
	struct fg_job job;
};

static int enqueue_fn(struct fg_store *ws, void *arg, struct fg_err *err)
{
	struct enqueue_args *a = arg;

	fg_job_release(&a->job);
	memset(&a->job, 0, sizeof(a->job));
	a->replayed = 0;
	return ws->ops->job_enqueue(ws, a->kind, a->params, a->asked, a->key, a->sha, a->cap, &a->job, &a->replayed,
				    err);
}

int fg_store_job_enqueue(struct fg_store *s, const char *kind, const char *params_json, const char *asked_json,
			 const char *idem_key, const char *body_sha256, int queue_cap, struct fg_job *out, int *replayed,
			 struct fg_err *err)
{
	struct enqueue_args a = { kind, params_json, asked_json, idem_key, body_sha256, queue_cap, 0, { 0 } };
	int rc;

	if (!s || !out)
		return fg_err_set(err, FG_EINPUT, "enqueueing a job: no store or no output");
	/* Refused before it queues: bad arguments never take the writer's time. */
	rc = fg_store_check_enqueue(kind, &a.params, asked_json, idem_key, body_sha256, err);
	if (!rc)
		rc = fg_store_write(s, enqueue_fn, &a, err);
	if (rc) {
		fg_job_release(&a.job);
		return rc;
	}
	*out = a.job;
	if (replayed)
		*replayed = a.replayed;
	return 0;
}

struct claim_args {
	const char *worker;
	int lease;
	int got;
	struct fg_job job;
};

static int claim_fn(struct fg_store *ws, void *arg, struct fg_err *err)
{
	struct claim_args *a = arg;
	int rc;

	fg_job_release(&a->job);
	memset(&a->job, 0, sizeof(a->job));
	rc = ws->ops->job_claim(ws, a->worker, a->lease, &a->job, err);
	a->got = rc > 0;
	return rc < 0 ? rc : 0;
}

int fg_store_job_claim(struct fg_store *s, const char *worker, struct fg_job *out, struct fg_err *err)
{
	struct claim_args a = { worker, 0, 0, { 0 } };
	int rc;

	if (!s || !out)
		return fg_err_set(err, FG_EINPUT, "claiming a job: no store or no output");
	rc = fg_store_check_text(worker, FG_STORE_WORKER_MAX, 1, "worker name", err);
	if (rc)
		return rc;
	a.lease = s->lease_seconds;
	rc = fg_store_write(s, claim_fn, &a, err);
	if (rc) {
		fg_job_release(&a.job);
		return rc;
	}
	if (a.got)
		*out = a.job;
	return a.got;
}

struct progress_args {
	int64_t id;
	const char *worker, *stage;
	double progress;
	const struct fg_job_bytes *bytes;
	int lease;
};

static int progress_fn(struct fg_store *ws, void *arg, struct fg_err *err)
{
	const struct progress_args *a = arg;

	return ws->ops->job_progress(ws, a->id, a->worker, a->stage, a->progress, a->bytes, a->lease, err);
}

static int job_progress(struct fg_store *s, int64_t id, const char *worker, const char *stage, double progress,
			const struct fg_job_bytes *bytes, struct fg_err *err)
{
	struct progress_args a = { id, worker, stage, progress, bytes, 0 };

	if (!s)
		return fg_err_set(err, FG_EINPUT, "reporting progress: no store");
	if (!(progress >= 0.0 && progress <= 1.0))
		return fg_err_set(err, FG_EINPUT, "reporting progress of job %lld: progress %g is outside 0..1",
				  (long long)id, progress);
	if (bytes && (bytes->done < 0 || bytes->done > bytes->total))
		return fg_err_set(err, FG_EINPUT, "reporting progress of job %lld: %lld bytes done of %lld",
				  (long long)id, (long long)bytes->done, (long long)bytes->total);
	a.lease = s->lease_seconds;
	return fg_store_write(s, progress_fn, &a, err);
}

int fg_store_job_progress(struct fg_store *s, int64_t id, const char *worker, const char *stage, double progress,
			  struct fg_err *err)
{
	return job_progress(s, id, worker, stage, progress, NULL, err);
}

int fg_store_job_progress_bytes(struct fg_store *s, int64_t id, const char *worker, const char *stage,
				double progress, int64_t bytes_done, int64_t bytes_total, double eta_s,
				struct fg_err *err)
{
	struct fg_job_bytes b = { bytes_done, bytes_total, eta_s };

	return job_progress(s, id, worker, stage, progress, &b, err);
}

struct finish_args {
	int64_t id;
	const char *worker;
	enum fg_job_state state;
	const char *error;
	const struct fg_verdict_row *refusal;
	const char *verdicts;
	int64_t artifact_id;
};

static int finish_fn(struct fg_store *ws, void *arg, struct fg_err *err)
{
	const struct finish_args *a = arg;

	return ws->ops->job_finish(ws, a->id, a->worker, a->state, a->error, a->refusal, a->verdicts, a->artifact_id,
				   err);
}

int fg_store_job_finish(struct fg_store *s, int64_t id, const char *worker, enum fg_job_state state,
			const char *error, int64_t artifact_id, struct fg_err *err)
{
	struct finish_args a = { id, worker, state, error, NULL, NULL, artifact_id };
	int rc;

	if (!s)
		return fg_err_set(err, FG_EINPUT, "finishing a job: no store");
	rc = fg_store_check_finish(id, state, artifact_id, err);
	return rc ? rc : fg_store_write(s, finish_fn, &a, err);
}

int fg_store_job_fail(struct fg_store *s, int64_t id, const char *worker, const struct fg_err *cause,
		      const cJSON *verdicts, struct fg_err *err)
{
	int verdict = fg_err_refusal(cause);
	struct finish_args a = { id, worker, FG_JOB_FAILED, NULL, fg_verdict_row(verdict), NULL, 0 };
	char *text;
	int rc;

	if (!s)
		return fg_err_set(err, FG_EINPUT, "finishing a job: no store");
	if (!cause)
		return fg_err_set(err, FG_EINPUT, "failing job %lld: no cause", (long long)id);
	if (verdict != FG_ERR_NO_VERDICT && !a.refusal)
		return fg_err_set(err, FG_EINPUT, "failing job %lld: %d is not a verdict code", (long long)id,
				  verdict);
	if (verdicts && !cJSON_IsArray(verdicts))
		return fg_err_set(err, FG_EINPUT, "failing job %lld: the verdicts are not an array", (long long)id);
	text = verdicts ? cJSON_PrintUnformatted(verdicts) : NULL;
	if (verdicts && !text)
		return fg_err_set(err, FG_ENOMEM, "failing job %lld: out of memory", (long long)id);
	a.error = cause->msg;
	a.verdicts = text;
	rc = fg_store_write(s, finish_fn, &a, err);
	cJSON_free(text);
	return rc;
}

struct succeed_args {
	int64_t id;
	const char *worker;
	struct fg_store_artifact a;
	int64_t artifact_id;
	int existed;
};

static int succeed_fn(struct fg_store *ws, void *arg, struct fg_err *err)
{
	struct succeed_args *a = arg;

	a->artifact_id = 0;
	a->existed = 0;
	return ws->ops->job_succeed(ws, a->id, a->worker, &a->a, &a->artifact_id, &a->existed, err);
}

int fg_store_job_succeed(struct fg_store *s, int64_t id, const char *worker, const struct fg_artifact_in *a,
			 int64_t *artifact_id, int *existed, struct fg_err *err)
{
	struct succeed_args args = { id, worker, { a, NULL, NULL, NULL }, 0, 0 };
	char *report = NULL, *provenance = NULL, *runtime = NULL;
	int rc;

	if (!s || !a || !artifact_id)
		return fg_err_set(err, FG_EINPUT, "finishing a job: no store, artifact or output");
	/* Checked and printed here: the writer thread spends its time on SQL only. */
	rc = fg_store_prepare_artifact(a, &report, &provenance, &runtime, err);
	args.a.report = report;
	args.a.provenance = provenance;
	args.a.runtime = runtime;
	if (!rc)
		rc = fg_store_write(s, succeed_fn, &args, err);
	if (!rc) {
		*artifact_id = args.artifact_id;
		if (existed)
			*existed = args.existed;
	}
	cJSON_free(report);
	cJSON_free(provenance);
	cJSON_free(runtime);
	return rc;
}

struct cancel_args {
	int64_t id;
	struct fg_job job;
};

static int cancel_fn(struct fg_store *ws, void *arg, struct fg_err *err)
{
	struct cancel_args *a = arg;

	fg_job_release(&a->job);
	memset(&a->job, 0, sizeof(a->job));
	return ws->ops->job_cancel(ws, a->id, &a->job, err);
}

int fg_store_job_cancel(struct fg_store *s, int64_t id, struct fg_job *out, struct fg_err *err)
{
	struct cancel_args a = { id, { 0 } };
	int rc;

	if (!s)
		return fg_err_set(err, FG_EINPUT, "cancelling a job: no store");
	rc = fg_store_write(s, cancel_fn, &a, err);
	if (rc || !out)
		fg_job_release(&a.job);
	else
		*out = a.job;
	return rc;
}

struct requeue_args {
	int64_t id;
	const char *worker;
};

static int requeue_fn(struct fg_store *ws, void *arg, struct fg_err *err)
{
	const struct requeue_args *a = arg;

	return ws->ops->job_requeue(ws, a->id, a->worker, err);
}

int fg_store_job_requeue(struct fg_store *s, int64_t id, const char *worker, struct fg_err *err)
{
	struct requeue_args a = { id, worker };

	if (!s)
		return fg_err_set(err, FG_EINPUT, "requeueing a job: no store");
	return fg_store_write(s, requeue_fn, &a, err);
}

int fg_store_job_get(struct fg_store *s, int64_t id, struct fg_job *out, struct fg_err *err)
{
	if (!s || !out)
		return fg_err_set(err, FG_EINPUT, "reading a job: no store or no output");
	return s->ops->job_get(s, id, out, err);
}

int fg_store_job_list(struct fg_store *s, int state, int64_t cursor, int limit, cJSON **out, int64_t *next,
		      struct fg_err *err)
{
	if (!s || !out || !next)
		return fg_err_set(err, FG_EINPUT, "listing jobs: no store or no output");
	return s->ops->job_list(s, state, cursor, limit, out, next, err);
}

struct recover_args {
	const char *instance;
	int stale, max_attempts, lease;
	int requeued, failed, renewed;
};

static int recover_fn(struct fg_store *ws, void *arg, struct fg_err *err)
{
	struct recover_args *a = arg;

	a->requeued = a->failed = 0;
	return ws->ops->jobs_recover(ws, a->instance, a->stale, a->max_attempts, &a->requeued, &a->failed, err);
}

int fg_store_jobs_recover(struct fg_store *s, const char *instance_id, int stale_seconds, int max_attempts,
			  int *requeued, int *failed, struct fg_err *err)
{
	struct recover_args a = { instance_id, stale_seconds, max_attempts, 0, 0, 0, 0 };
	int rc;

	if (!s)
		return fg_err_set(err, FG_EINPUT, "recovering jobs: no store");
	rc = fg_store_check_text(instance_id, FG_STORE_WORKER_MAX, 1, "instance id", err);
	if (!rc && max_attempts < 1)
		rc = fg_err_set(err, FG_EINPUT, "recovering jobs: max attempts %d is below 1", max_attempts);
	if (!rc)
		rc = fg_store_write(s, recover_fn, &a, err);
	if (rc)
		return rc;
	if (requeued)
		*requeued = a.requeued;
	if (failed)
		*failed = a.failed;
	return 0;
}

static int renew_fn(struct fg_store *ws, void *arg, struct fg_err *err)
{
	struct recover_args *a = arg;

	a->renewed = 0;
	return ws->ops->jobs_renew(ws, a->instance, a->lease, &a->renewed, err);
}

int fg_store_jobs_renew(struct fg_store *s, const char *instance_id, int *renewed, struct fg_err *err)
{
	struct recover_args a = { instance_id, 0, 0, 0, 0, 0, 0 };
	int rc;

	if (!s)
		return fg_err_set(err, FG_EINPUT, "renewing leases: no store");
	rc = fg_store_check_text(instance_id, FG_STORE_WORKER_MAX, 1, "instance id", err);
	if (rc)
		return rc;
	a.lease = s->lease_seconds;
	rc = fg_store_write(s, renew_fn, &a, err);
	if (!rc && renewed)
		*renewed = a.renewed;
	return rc;
}

static int reap_fn(struct fg_store *ws, void *arg, struct fg_err *err)
{
	struct recover_args *a = arg;

	a->requeued = a->failed = 0;
	return ws->ops->jobs_reap(ws, a->max_attempts, &a->requeued, &a->failed, err);
}

int fg_store_jobs_reap(struct fg_store *s, int max_attempts, int *requeued, int *failed, struct fg_err *err)
{
	struct recover_args a = { NULL, 0, max_attempts, 0, 0, 0, 0 };
	int64_t expired = 0;
	int rc;

	if (!s)
		return fg_err_set(err, FG_EINPUT, "taking over jobs: no store");
	if (max_attempts < 1)
		return fg_err_set(err, FG_EINPUT, "taking over jobs: max attempts %d is below 1", max_attempts);
	/* A read first, on this connection: a reaper with nothing to take writes nothing. */
	rc = s->ops->jobs_expired(s, &expired, err);
	if (!rc && expired)
		rc = fg_store_write(s, reap_fn, &a, err);
	if (rc)
		return rc;
	if (requeued)
		*requeued = a.requeued;
	if (failed)
		*failed = a.failed;
	return 0;
}

/* ---- artifacts ---- */

struct put_args {
	struct fg_store_artifact a;
	int64_t id;
	int existed;
};

static int put_fn(struct fg_store *ws, void *arg, struct fg_err *err)
{
	struct put_args *a = arg;

	a->existed = 0;
	return ws->ops->artifact_put(ws, &a->a, &a->id, &a->existed, err);
}

int fg_store_artifact_put(struct fg_store *s, const struct fg_artifact_in *a, int64_t *id, int *existed,
			  struct fg_err *err)
{
	struct put_args args = { { a, NULL, NULL, NULL }, 0, 0 };
	char *report = NULL, *provenance = NULL, *runtime = NULL;
	int rc;

	if (existed)
		*existed = 0;
	if (!s || !a || !id)
		return fg_err_set(err, FG_EINPUT, "storing an artifact: no store, artifact or output");
	rc = fg_store_prepare_artifact(a, &report, &provenance, &runtime, err);
	args.a.report = report;
	args.a.provenance = provenance;
	args.a.runtime = runtime;
	if (!rc)
		rc = fg_store_write(s, put_fn, &args, err);
	if (!rc) {
		*id = args.id;
		if (existed)
			*existed = args.existed;
	}
	cJSON_free(report);
	cJSON_free(provenance);
	cJSON_free(runtime);
	return rc;
}

int fg_store_artifact_get(struct fg_store *s, int64_t id, cJSON **out, struct fg_err *err)
{
	if (!s || !out)
		return fg_err_set(err, FG_EINPUT, "reading an artifact: no store or no output");
	return s->ops->artifact_get(s, id, 0, out, err);
}

int fg_store_artifact_get_raw(struct fg_store *s, int64_t id, cJSON **out, struct fg_err *err)
{
	if (!s || !out)
		return fg_err_set(err, FG_EINPUT, "reading an artifact: no store or no output");
	return s->ops->artifact_get(s, id, 1, out, err);
}

int fg_store_artifact_runtime(struct fg_store *s, int64_t id, char *path, size_t cap, cJSON **runtime,
			      struct fg_err *err)
{
	if (!s || !path || !cap || !runtime)
		return fg_err_set(err, FG_EINPUT, "reading an artifact's runtime document: no store or no output");
	*path = '\0';
	*runtime = NULL;
	return s->ops->artifact_runtime(s, id, path, cap, runtime, err);
}

int fg_store_artifact_by_fingerprint(struct fg_store *s, const char *fingerprint, int64_t *id, struct fg_err *err)
{
	if (!s || !id || !fingerprint || !*fingerprint)
		return fg_err_set(err, FG_EINPUT, "finding an artifact: no store, fingerprint or output");
	return s->ops->artifact_by_fingerprint(s, fingerprint, id, err);
}

int fg_store_artifact_resolve(struct fg_store *s, const char *key, const char *digest, int64_t want_id,
			      int64_t *id, enum fg_artifact_match *how, int *ambiguous, cJSON **candidates,
			      struct fg_err *err)
{
	if (ambiguous)
		*ambiguous = 0;
	if (candidates)
		*candidates = NULL;
	if (!s || !id || !how || (!key && want_id <= 0))
		return fg_err_set(err, FG_EINPUT, "resolving an artifact: no store, key or output");
	if (key && (!*key || strlen(key) > FG_STORE_SHA_MAX))
		return fg_err_set(err, FG_EINPUT, "resolving an artifact: the key is empty or over %d bytes",
				  FG_STORE_SHA_MAX);
	return s->ops->artifact_resolve(s, key, digest, want_id, id, how, ambiguous, candidates, err);
}

int fg_store_artifact_list(struct fg_store *s, const char *verdict, const char *family, int64_t cursor, int limit,
			   cJSON **out, int64_t *next, struct fg_err *err)
{
	if (!s || !out || !next)
		return fg_err_set(err, FG_EINPUT, "listing artifacts: no store or no output");
	return s->ops->artifact_list(s, verdict, family, cursor, limit, out, next, err);
}

static int verification_fn(struct fg_store *ws, void *arg, struct fg_err *err)
{
	struct fg_verification_put *v = arg;

	return ws->ops->verification_put(ws, v->artifact, v->rows_text, v->row, v->result, v->result_text, &v->id,
					 &v->restamped, err);
}

/* v set up for artifact_id: the checks and the texts of fg_store_prepare_verification. */
static int verification_prepare(struct fg_verification_put *v, struct fg_store *s, int64_t artifact_id,
				const char *rows_json, const cJSON *result, struct fg_err *err)
{
	memset(v, 0, sizeof(*v));
	v->artifact = artifact_id;
	v->result = result;
	if (!s || !rows_json || !result)
		return fg_err_set(err, FG_EINPUT, "storing a verification: no store, rows or result");
	return fg_store_prepare_verification(artifact_id, rows_json, result, &v->row, &v->result_text, &v->rows_text,
					     err);
}

void fg_store_verification_put_release(struct fg_verification_put *v)
{
	if (!v)
		return;
	cJSON_free(v->result_text);
	cJSON_free(v->rows_text);
	v->result_text = v->rows_text = NULL;
}

int fg_store_verification_put(struct fg_store *s, int64_t artifact_id, const char *rows_json, const cJSON *result,
			      int64_t *id, int *restamped, char **result_text, struct fg_err *err)
{
	struct fg_verification_put v;
	int rc;

	if (restamped)
		*restamped = 0;
	if (result_text)
		*result_text = NULL;
	rc = verification_prepare(&v, s, artifact_id, rows_json, result, err);
	if (!rc)
		rc = fg_store_write(s, verification_fn, &v, err);
	if (!rc && id)
		*id = v.id;
	if (!rc && restamped)
		*restamped = v.restamped;
	if (!rc && result_text) {
		*result_text = v.result_text;
		v.result_text = NULL;
	}
	fg_store_verification_put_release(&v);
	return rc;
}

static void verification_done(void *ctx, int rc)
{
	struct fg_verification_put *v = ctx;

	v->rc = rc;
	v->done(v->done_ctx);
}

int fg_store_verification_put_async(struct fg_store *s, struct fg_verification_put *v, int64_t artifact_id,
				    const char *rows_json, const cJSON *result, void (*done)(void *ctx), void *ctx,
				    struct fg_err *err)
{
	int rc = verification_prepare(v, s, artifact_id, rows_json, result, err);

	if (!rc) {
		v->done = done;
		v->done_ctx = ctx;
		rc = fg_store_write_async(s, verification_fn, v, &v->err, verification_done, v);
	}
	if (rc)
		fg_store_verification_put_release(v);
	return rc;
}

/* ---- fleet ---- */

struct report_args {
	const char *host, *runtime, *reported;
	int64_t artifact;
	const char *observed;
};

static int report_fn(struct fg_store *ws, void *arg, struct fg_err *err)
{
	const struct report_args *a = arg;

	return ws->ops->fleet_report(ws, a->host, a->artifact, a->runtime, a->reported, a->observed, err);
}

int fg_store_fleet_report(struct fg_store *s, const char *host, int64_t artifact_id, const char *runtime,
			  const char *runtime_reported, const cJSON *observed, struct fg_err *err)
{
	struct report_args a = { host, runtime, runtime_reported, artifact_id, NULL };
	char *text = NULL;
	int rc;

	if (!s)
		return fg_err_set(err, FG_EINPUT, "storing a fleet report: no store");
	rc = fg_store_prepare_report(host, runtime, runtime_reported, observed, &text, err);
	a.observed = text ? text : "{}";
	if (!rc)
		rc = fg_store_write(s, report_fn, &a, err);
	cJSON_free(text);
	return rc;
}

int fg_store_fleet_health(struct fg_store *s, cJSON **out, struct fg_err *err)
{
	if (!s || !out)
		return fg_err_set(err, FG_EINPUT, "fleet health: no store or no output");
	return s->ops->fleet_health(s, out, err);
}

/* ---- metrics, checks ---- */

int fg_store_counts(struct fg_store *s, struct fg_store_counts *out, cJSON **by_verdict, struct fg_err *err)
{
	if (!s || !out)
		return fg_err_set(err, FG_EINPUT, "counting: no store or no output");
	return s->ops->counts(s, out, by_verdict, err);
}

int fg_store_check(struct fg_store *s, struct fg_err *err)
{
	if (!s)
		return fg_err_set(err, FG_EINPUT, "integrity check: no store");
	return s->ops->check(s, err);
}

static int probe_fn(struct fg_store *ws, void *arg, struct fg_err *err)
{
	(void)arg;
	return ws->ops->probe_write(ws, err);
}

int fg_store_probe_write(struct fg_store *s, struct fg_err *err)
{
	long long busy;
	int rc;

	if (!s)
		return fg_err_set(err, FG_EINPUT, "write probe: no store");
	/* A readiness probe answers in well under a second, busy or not. */
	busy = s->busy_ms;
	s->busy_ms = PROBE_BUSY_MS;
	rc = fg_store_write(s, probe_fn, NULL, err);
	s->busy_ms = busy;
	return rc;
}
