/*
 * jobs.c: the durable job queue on PostgreSQL, shared by every instance of
 * a farm.  A claim is one statement: UPDATE ... WHERE id = (SELECT id ...
 * ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING, so two instances
 * never claim one job, and neither waits for the other's claim: a row
 * locked by another claim is skipped, and a row another claim has just
 * taken no longer matches state = 'queued' when it is re-checked under its
 * lock.  A claimed job carries its worker ("INSTANCE/N"), its owner (the
 * instance) and a lease (lease_until), renewed by progress reports and the
 * owner's heartbeat (fg_store_jobs_renew); any instance's reaper takes back
 * a job past its lease (FOR UPDATE SKIP LOCKED again, so reapers never
 * count one job twice).  Enqueues and requeues NOTIFY forged_jobs, which
 * wakes idle workers of every instance at the commit.
 *
 * Idempotency keys: looked up first; a key seen for the first time is
 * inserted with ON CONFLICT (idem_key) DO NOTHING, and when another
 * instance inserted it meanwhile its row is read back, so two instances
 * racing with one key make one job.
 */
#include "store/pg/pg.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Column order read by job_read. */
#define JOB_COLS                                                                                  \
	"id, kind, state, stage, progress, error, artifact_id, attempts, cancel_requested::int, params, " \
	PG_TS("created_at") ", " PG_TS("updated_at") ", refusal, verdicts, asked, bytes_done, bytes_total, eta_s"

#define LEASE_AT(p) "now() + make_interval(secs => " p "::float8)"

/* Fill *out from the JOB_COLS of row r of res, starting at column first. */
static int job_read(const PGresult *res, int r, int first, struct fg_job *out, struct fg_err *err)
{
	struct fg_job j;
	const char *state = fg_pg_text(res, r, first + 2);

	memset(&j, 0, sizeof(j));
	j.id = fg_pg_int(res, r, first + 0);
	fg_pg_copy(res, r, first + 1, j.kind, sizeof(j.kind));
	if (fg_job_state_parse(state, &j.state))
		return fg_err_set(err, FG_ESTATE, "job %lld has an unknown state '%s'", (long long)j.id, state);
	fg_pg_copy(res, r, first + 3, j.stage, sizeof(j.stage));
	j.progress = fg_pg_double(res, r, first + 4);
	fg_pg_copy(res, r, first + 5, j.error, sizeof(j.error));
	j.artifact_id = fg_pg_int(res, r, first + 6);
	j.attempts = (int)fg_pg_int(res, r, first + 7);
	j.cancel_requested = fg_pg_int(res, r, first + 8) != 0;
	j.params = strdup(fg_pg_null(res, r, first + 9) ? "{}" : fg_pg_text(res, r, first + 9));
	if (!j.params)
		return fg_err_set(err, FG_ENOMEM, "reading job %lld: out of memory", (long long)j.id);
	fg_pg_copy(res, r, first + 10, j.created_at, sizeof(j.created_at));
	fg_pg_copy(res, r, first + 11, j.updated_at, sizeof(j.updated_at));
	/* A code this forged does not know (a newer one wrote it) reads as no refusal. */
	j.refusal = fg_pg_null(res, r, first + 12) ? NULL : fg_verdict_code_find(fg_pg_text(res, r, first + 12));
	if ((!fg_pg_null(res, r, first + 13) && !(j.verdicts = strdup(fg_pg_text(res, r, first + 13)))) ||
	    (!fg_pg_null(res, r, first + 14) && !(j.asked = strdup(fg_pg_text(res, r, first + 14))))) {
		fg_job_release(&j);
		return fg_err_set(err, FG_ENOMEM, "reading job %lld: out of memory", (long long)j.id);
	}
	j.has_bytes = !fg_pg_null(res, r, first + 15) && !fg_pg_null(res, r, first + 16);
	j.bytes_done = j.has_bytes ? fg_pg_int(res, r, first + 15) : 0;
	j.bytes_total = j.has_bytes ? fg_pg_int(res, r, first + 16) : 0;
	j.eta_s = fg_pg_null(res, r, first + 17) ? -1.0 : fg_pg_double(res, r, first + 17);
	*out = j;
	return 0;
}

/* Run sql, which returns at most one job row: 1 with *out filled, 0 when no row. */
static int one_job(struct fg_store *s, const char *sql, const struct fg_pg_args *a, struct fg_job *out,
		   struct fg_err *err, const char *what)
{
	PGresult *res = NULL;
	int rc = fg_pg_query(s, sql, a, &res, err, what);

	if (rc)
		return rc;
	if (PQntuples(res) == 0) {
		PQclear(res);
		return 0;
	}
	rc = job_read(res, 0, 0, out, err);
	PQclear(res);
	return rc ? rc : 1;
}

/* Rows changed by the last command of res. */
static long changed(PGresult *res)
{
	return strtol(PQcmdTuples(res), NULL, 10);
}

/* Why an UPDATE guarded by state and worker changed nothing: no such job, not running, another holder. */
static int not_running(struct fg_store *s, int64_t id, const char *worker, const char *what, struct fg_err *err)
{
	struct fg_pg_args a = { 0 };
	PGresult *res = NULL;
	int rc;

	fg_pg_arg_int(&a, id);
	rc = fg_pg_query(s, "SELECT state, worker FROM jobs WHERE id = $1", &a, &res, err, what);
	if (rc)
		return rc;
	if (PQntuples(res) == 0)
		rc = fg_err_set(err, FG_ENOTFOUND, "%s job %lld: no such job", what, (long long)id);
	else if (worker && strcmp(fg_pg_text(res, 0, 0), "running") == 0)
		rc = fg_err_set(err, FG_ECONFLICT, "%s job %lld: the job is held by %s now, not %s (its lease expired)",
				what, (long long)id, fg_pg_null(res, 0, 1) ? "nobody" : fg_pg_text(res, 0, 1), worker);
	else
		rc = fg_err_set(err, FG_ECONFLICT, "%s job %lld: the job is %s, not running", what, (long long)id,
				fg_pg_text(res, 0, 0));
	PQclear(res);
	return rc;
}

/* ---- enqueue ---- */

static const char sql_job_by_key[] = "SELECT body_sha256, " JOB_COLS " FROM jobs WHERE idem_key = $1";
static const char sql_job_insert[] =
	"INSERT INTO jobs (kind, params, idem_key, body_sha256, asked) VALUES ($1, $2, $3, $4, $5)"
	" ON CONFLICT (idem_key) DO NOTHING RETURNING " JOB_COLS;

/* 1 with *out (same body), FG_ECONFLICT (another body), 0 (key unused). */
static int find_by_key(struct fg_store *s, const char *key, const char *body_sha256, struct fg_job *out,
		       struct fg_err *err)
{
	struct fg_pg_args a = { 0 };
	PGresult *res = NULL;
	int rc;

	fg_pg_arg_text(&a, key);
	rc = fg_pg_query(s, sql_job_by_key, &a, &res, err, "looking up an idempotency key");
	if (rc)
		return rc;
	if (PQntuples(res) == 0) {
		PQclear(res);
		return 0;
	}
	if (fg_pg_null(res, 0, 0) || strcmp(fg_pg_text(res, 0, 0), body_sha256) != 0)
		rc = fg_err_set(err, FG_ECONFLICT,
				"idempotency key '%s' was already used with another request body (job %lld)", key,
				(long long)fg_pg_int(res, 0, 1));
	else
		rc = job_read(res, 0, 1, out, err);
	PQclear(res);
	return rc ? rc : 1;
}

int fg_pg_job_enqueue(struct fg_store *s, const char *kind, const char *params_json, const char *asked_json,
		      const char *idem_key, const char *body_sha256, int queue_cap, struct fg_job *out, int *replayed,
		      struct fg_err *err)
{
	struct fg_pg_args a = { 0 };
	struct fg_job j;
	int rc;

	memset(&j, 0, sizeof(j));
	/* Checked by store.c before it queued (fg_store_check_enqueue). */
	if (!s || !out || !kind || !params_json)
		return fg_err_set(err, FG_EINPUT, "enqueueing a job: no store, kind, parameters or output");
	rc = fg_pg_begin(s, err);
	if (rc)
		return fg_err_prefix(err, rc, "enqueueing a job: ");
	if (idem_key) {
		rc = find_by_key(s, idem_key, body_sha256, &j, err);
		if (rc < 0)
			goto out;
		if (rc == 1)
			goto replay;
	}
	if (queue_cap > 0) {
		PGresult *res = NULL;
		int64_t queued;

		rc = fg_pg_query(s, "SELECT count(*) FROM jobs WHERE state = 'queued'", NULL, &res, err,
				 "counting queued jobs");
		if (rc)
			goto out;
		queued = fg_pg_int(res, 0, 0);
		PQclear(res);
		if (queued >= queue_cap) {
			rc = fg_err_set(err, FG_EBUSY, "the job queue is full (%lld queued, cap %d)", (long long)queued,
					queue_cap);
			goto out;
		}
	}
	fg_pg_arg_text(&a, kind);
	fg_pg_arg_text(&a, params_json);
	fg_pg_arg_text(&a, idem_key);
	fg_pg_arg_text(&a, idem_key ? body_sha256 : NULL);
	fg_pg_arg_text(&a, asked_json);
	rc = one_job(s, sql_job_insert, &a, &j, err, "inserting a job");
	if (rc < 0)
		goto out;
	if (rc == 0) {
		/* Another instance inserted this key meanwhile: its job is the answer. */
		rc = find_by_key(s, idem_key, body_sha256, &j, err);
		if (rc == 0)
			rc = fg_err_set(err, FG_EINTERNAL, "inserting a job returned no row");
		if (rc < 0)
			goto out;
		goto replay;
	}
	rc = fg_pg_notify(s, FG_PG_CHANNEL_JOBS, err);
	if (!rc)
		rc = fg_pg_commit(s, err);
	if (rc)
		goto out;
	if (replayed)
		*replayed = 0;
	*out = j;
	return 0;
replay:
	/* A replay answers even when the queue is full: the job exists already. */
	rc = fg_pg_commit(s, err);
	if (rc)
		goto out;
	if (replayed)
		*replayed = 1;
	*out = j;
	return 0;
out:
	fg_pg_rollback(s);
	fg_job_release(&j);
	return rc;
}

/* ---- the worker's side ---- */

static const char sql_job_claim[] =
	"UPDATE jobs SET state = 'running', worker = $1, owner = $2, stage = '', progress = 0,"
	" bytes_done = NULL, bytes_total = NULL, eta_s = NULL,"
	" heartbeat_at = now(), lease_until = " LEASE_AT("$3") ", updated_at = now()"
	" WHERE id = (SELECT id FROM jobs WHERE state = 'queued' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)"
	" RETURNING " JOB_COLS;

int fg_pg_job_claim(struct fg_store *s, const char *worker, int lease_seconds, struct fg_job *out,
		    struct fg_err *err)
{
	struct fg_pg_args a = { 0 };
	char owner[FG_STORE_WORKER_MAX + 1];
	struct fg_job j;
	int rc;

	memset(&j, 0, sizeof(j));
	if (!s || !out)
		return fg_err_set(err, FG_EINPUT, "claiming a job: no store or no output");
	rc = fg_store_check_text(worker, FG_STORE_WORKER_MAX, 1, "worker name", err);
	if (rc)
		return rc;
	fg_store_worker_instance(worker, owner, sizeof(owner));
	fg_pg_arg_text(&a, worker);
	fg_pg_arg_text(&a, owner);
	fg_pg_arg_int(&a, lease_seconds);
	rc = one_job(s, sql_job_claim, &a, &j, err, "claiming a job");
	if (rc == 1)
		*out = j;
	return rc;
}

static const char sql_job_progress[] =
	"UPDATE jobs SET stage = coalesce($2, stage), progress = $3::float8, heartbeat_at = now(),"
	" bytes_done = $6::bigint, bytes_total = $7::bigint, eta_s = $8::float8,"
	" lease_until = " LEASE_AT("$5") ", updated_at = now()"
	" WHERE id = $1 AND state = 'running' AND ($4::text IS NULL OR worker = $4::text)";

int fg_pg_job_progress(struct fg_store *s, int64_t id, const char *worker, const char *stage, double progress,
		       const struct fg_job_bytes *bytes, int lease_seconds, struct fg_err *err)
{
	struct fg_pg_args a = { 0 };
	PGresult *res = NULL;
	long n;
	int rc;

	/* store.c checked the store, the progress and the byte counts. */
	rc = fg_store_check_text(stage, FG_STORE_STAGE_MAX, 0, "job stage", err);
	if (rc)
		return rc;
	fg_pg_arg_int(&a, id);
	fg_pg_arg_text(&a, stage);
	fg_pg_arg_double(&a, progress);
	fg_pg_arg_text(&a, worker);
	fg_pg_arg_int(&a, lease_seconds);
	if (bytes) {
		fg_pg_arg_int(&a, bytes->done);
		fg_pg_arg_int(&a, bytes->total);
		fg_pg_arg_double(&a, bytes->eta_s >= 0 ? bytes->eta_s : NAN); /* NAN: NULL */
	} else {
		fg_pg_arg_text(&a, NULL);
		fg_pg_arg_text(&a, NULL);
		fg_pg_arg_text(&a, NULL);
	}
	rc = fg_pg_query(s, sql_job_progress, &a, &res, err, "reporting job progress");
	if (rc)
		return rc;
	n = changed(res);
	PQclear(res);
	return n ? 0 : not_running(s, id, worker, "reporting progress of", err);
}

static const char sql_job_finish[] =
	"UPDATE jobs SET state = $2, error = $3, artifact_id = $4, refusal = $5, verdicts = $7,"
	" progress = CASE WHEN $2 = 'succeeded' THEN 1.0 ELSE progress END, updated_at = now()"
	" WHERE id = $1 AND state = 'running' AND ($6::text IS NULL OR worker = $6::text)";

int fg_pg_job_finish(struct fg_store *s, int64_t id, const char *worker, enum fg_job_state state,
		     const char *error, const struct fg_verdict_row *refusal, const char *verdicts, int64_t artifact_id,
		     struct fg_err *err)
{
	struct fg_pg_args a = { 0 };
	PGresult *res = NULL;
	long n;
	int rc;

	if (!s)
		return fg_err_set(err, FG_EINPUT, "finishing a job: no store");
	rc = fg_store_check_finish(id, state, artifact_id, err);
	if (rc)
		return rc;
	fg_pg_arg_int(&a, id);
	fg_pg_arg_text(&a, fg_job_state_name(state));
	fg_pg_arg_text(&a, error ? error : "");
	if (artifact_id > 0)
		fg_pg_arg_int(&a, artifact_id);
	else
		fg_pg_arg_text(&a, NULL);
	fg_pg_arg_text(&a, refusal ? refusal->name : NULL);
	fg_pg_arg_text(&a, worker);
	fg_pg_arg_text(&a, verdicts);
	rc = fg_pg_query(s, sql_job_finish, &a, &res, err, "finishing a job");
	if (rc && fg_pg_failed_with(s, "23503"))
		return fg_err_set(err, FG_ENOTFOUND, "finishing job %lld: no artifact %lld", (long long)id,
				  (long long)artifact_id);
	if (rc)
		return rc;
	n = changed(res);
	PQclear(res);
	return n ? 0 : not_running(s, id, worker, "finishing", err);
}

int fg_pg_job_succeed(struct fg_store *s, int64_t id, const char *worker, const struct fg_store_artifact *in,
		      int64_t *artifact_id, int *existed, struct fg_err *err)
{
	struct fg_pg_args a = { 0 };
	PGresult *res = NULL;
	int64_t existing, aid = 0;
	int rc;

	if (!s || !in || !artifact_id)
		return fg_err_set(err, FG_EINPUT, "finishing a job: no store, artifact or output");
	rc = fg_pg_begin(s, err);
	if (rc)
		return fg_err_prefix(err, rc, "finishing job %lld: ", (long long)id);
	fg_pg_arg_int(&a, id);
	/* The job's row locked: its holder cannot change under this transaction. */
	rc = fg_pg_query(s,
			 "SELECT j.state, j.worker, coalesce((SELECT a.id FROM artifacts a WHERE a.job_id = j.id),"
			 " CASE WHEN j.state = 'succeeded' THEN j.artifact_id END) FROM jobs j WHERE j.id = $1 FOR UPDATE",
			 &a, &res, err, "finishing a job");
	if (rc)
		goto out;
	if (PQntuples(res) == 0) {
		rc = fg_err_set(err, FG_ENOTFOUND, "finishing job %lld: no such job", (long long)id);
		goto out;
	}
	existing = fg_pg_int(res, 0, 2);
	if (existing) {
		/* Stored already (this call is a retry): the same artifact, nothing new. */
		rc = fg_pg_commit(s, err);
		if (!rc)
			*artifact_id = existing;
		goto out;
	}
	if (strcmp(fg_pg_text(res, 0, 0), "running") != 0 || (worker && strcmp(fg_pg_text(res, 0, 1), worker) != 0)) {
		rc = not_running(s, id, worker, "finishing", err);
		goto out;
	}
	PQclear(res);
	res = NULL;
	rc = fg_pg_artifact_insert(s, in, id, &aid, existed, err);
	if (rc)
		goto out;
	a.n = 0;
	fg_pg_arg_int(&a, id);
	fg_pg_arg_int(&a, aid);
	rc = fg_pg_query(s,
			 "UPDATE jobs SET state = 'succeeded', error = '', artifact_id = $2, refusal = NULL,"
			 " progress = 1.0, updated_at = now() WHERE id = $1",
			 &a, NULL, err, "finishing a job");
	if (!rc)
		rc = fg_pg_notify(s, FG_PG_CHANNEL_DATA, err);
	if (!rc)
		rc = fg_pg_commit(s, err);
	if (!rc)
		*artifact_id = aid;
out:
	PQclear(res);
	if (rc)
		fg_pg_rollback(s);
	return rc;
}

static const char sql_job_cancel[] =
	"UPDATE jobs SET"
	" state = CASE WHEN state = 'queued' THEN 'cancelled' ELSE state END,"
	" cancel_requested = CASE WHEN state = 'running' THEN true ELSE cancel_requested END,"
	" updated_at = CASE WHEN state IN ('queued', 'running') THEN now() ELSE updated_at END"
	" WHERE id = $1 RETURNING " JOB_COLS;

int fg_pg_job_cancel(struct fg_store *s, int64_t id, struct fg_job *out, struct fg_err *err)
{
	struct fg_pg_args a = { 0 };
	struct fg_job j;
	int rc;

	memset(&j, 0, sizeof(j));
	if (!s)
		return fg_err_set(err, FG_EINPUT, "cancelling a job: no store");
	fg_pg_arg_int(&a, id);
	rc = one_job(s, sql_job_cancel, &a, &j, err, "cancelling a job");
	if (rc == 0)
		return fg_err_set(err, FG_ENOTFOUND, "cancelling job %lld: no such job", (long long)id);
	if (rc < 0)
		return rc;
	if (out)
		*out = j;
	else
		fg_job_release(&j);
	return 0;
}

static const char sql_job_requeue[] =
	"UPDATE jobs SET state = CASE WHEN cancel_requested THEN 'cancelled' ELSE 'queued' END,"
	" worker = NULL, owner = NULL, heartbeat_at = NULL, lease_until = NULL, stage = '', progress = 0,"
	" bytes_done = NULL, bytes_total = NULL, eta_s = NULL,"
	" updated_at = now() WHERE id = $1 AND state = 'running' AND ($2::text IS NULL OR worker = $2::text)";

int fg_pg_job_requeue(struct fg_store *s, int64_t id, const char *worker, struct fg_err *err)
{
	struct fg_pg_args a = { 0 };
	PGresult *res = NULL;
	long n;
	int rc;

	if (!s)
		return fg_err_set(err, FG_EINPUT, "requeueing a job: no store");
	fg_pg_arg_int(&a, id);
	fg_pg_arg_text(&a, worker);
	rc = fg_pg_query(s, sql_job_requeue, &a, &res, err, "requeueing a job");
	if (rc)
		return rc;
	n = changed(res);
	PQclear(res);
	if (!n)
		return not_running(s, id, worker, "requeueing", err);
	return fg_pg_notify(s, FG_PG_CHANNEL_JOBS, err);
}

/* ---- reading ---- */

int fg_pg_job_get(struct fg_store *s, int64_t id, struct fg_job *out, struct fg_err *err)
{
	struct fg_pg_args a = { 0 };
	int rc;

	if (!s || !out)
		return fg_err_set(err, FG_EINPUT, "reading a job: no store or no output");
	fg_pg_arg_int(&a, id);
	rc = one_job(s, "SELECT " JOB_COLS " FROM jobs WHERE id = $1", &a, out, err, "reading a job");
	if (rc == 0)
		return fg_err_set(err, FG_ENOTFOUND, "job %lld: no such job", (long long)id);
	return rc < 0 ? rc : 0;
}

int fg_pg_job_list(struct fg_store *s, int state, int64_t cursor, int limit, cJSON **out, int64_t *next,
		   struct fg_err *err)
{
	struct fg_pg_args a = { 0 };
	PGresult *res = NULL;
	cJSON *arr;
	int rc, n;

	if (!s || !out || !next)
		return fg_err_set(err, FG_EINPUT, "listing jobs: no store or no output");
	if (state >= FG_JOB_STATES)
		return fg_err_set(err, FG_EINPUT, "listing jobs: unknown state %d", state);
	if (cursor < 0)
		return fg_err_set(err, FG_EINPUT, "listing jobs: cursor %lld is negative", (long long)cursor);
	limit = fg_sql_clamp_limit(limit);
	fg_pg_arg_int(&a, cursor);
	fg_pg_arg_int(&a, limit);
	if (state >= 0) {
		fg_pg_arg_text(&a, fg_job_state_name((enum fg_job_state)state));
		rc = fg_pg_query(s, "SELECT " JOB_COLS " FROM jobs WHERE state = $3 AND id > $1 ORDER BY id LIMIT $2",
				 &a, &res, err, "listing jobs");
	} else {
		rc = fg_pg_query(s, "SELECT " JOB_COLS " FROM jobs WHERE id > $1 ORDER BY id LIMIT $2", &a, &res, err,
				 "listing jobs");
	}
	if (rc)
		return rc;
	arr = cJSON_CreateArray();
	n = PQntuples(res);
	for (int r = 0; arr && r < n; r++) {
		struct fg_job j;
		cJSON *item;

		rc = job_read(res, r, 0, &j, err);
		if (rc)
			break;
		item = fg_job_json(&j);
		fg_job_release(&j);
		if (!item || !cJSON_AddItemToArray(arr, item)) {
			cJSON_Delete(item);
			rc = fg_err_set(err, FG_ENOMEM, "listing jobs: out of memory");
			break;
		}
	}
	if (!arr)
		rc = fg_err_set(err, FG_ENOMEM, "listing jobs: out of memory");
	if (!rc) {
		*next = n == limit && n > 0 ? fg_pg_int(res, n - 1, 0) : 0;
		*out = arr;
		arr = NULL;
	}
	PQclear(res);
	cJSON_Delete(arr);
	return rc;
}

/* ---- recovery and leases ---- */

/* What an abandoned job becomes ($1: max attempts); see sqlite/jobs.c's ABANDON_SET. */
#define ABANDON_SET                                                                                      \
	" state = CASE WHEN cancel_requested THEN 'cancelled'"                                           \
	"  WHEN attempts + 1 >= $1 THEN 'failed' ELSE 'queued' END,"                                     \
	" error = CASE WHEN cancel_requested THEN error"                                                 \
	"  WHEN attempts + 1 >= $1 THEN 'abandoned after ' || (attempts + 1) || ' attempts' ELSE error END," \
	" attempts = attempts + 1,"                                                                      \
	" worker = CASE WHEN cancel_requested OR attempts + 1 >= $1 THEN worker END,"                    \
	" owner = CASE WHEN cancel_requested OR attempts + 1 >= $1 THEN owner END,"                      \
	" heartbeat_at = CASE WHEN cancel_requested OR attempts + 1 >= $1 THEN heartbeat_at END,"        \
	" lease_until = NULL,"                                                                           \
	" stage = CASE WHEN cancel_requested OR attempts + 1 >= $1 THEN stage ELSE '' END,"              \
	" progress = CASE WHEN cancel_requested OR attempts + 1 >= $1 THEN progress ELSE 0 END,"         \
	" updated_at = now()"

/*
 * Start-up recovery on a shared store: other instances are alive, so only
 * jobs past their lease, or with a heartbeat older than $2 seconds (when
 * $2 > 0), or running with no lease or heartbeat at all, are taken back.
 * The instance id is no reason either way: instance ids are new at every
 * start, and a live instance's job has a lease like any.
 */
static const char sql_jobs_recover[] =
	"UPDATE jobs SET" ABANDON_SET
	" WHERE id IN (SELECT id FROM jobs WHERE state = 'running' AND (lease_until < now()"
	"  OR (lease_until IS NULL AND heartbeat_at IS NULL)"
	"  OR ($2::int > 0 AND heartbeat_at < now() - make_interval(secs => $2::float8))) FOR UPDATE SKIP LOCKED)"
	" RETURNING state";

static const char sql_jobs_reap[] =
	"UPDATE jobs SET" ABANDON_SET
	" WHERE id IN (SELECT id FROM jobs WHERE state = 'running' AND lease_until < now() FOR UPDATE SKIP LOCKED)"
	" RETURNING state";

static int abandon(struct fg_store *s, const char *sql, const struct fg_pg_args *a, int *requeued, int *failed,
		   struct fg_err *err)
{
	PGresult *res = NULL;
	int n_requeued = 0, n_failed = 0;
	int rc = fg_pg_query(s, sql, a, &res, err, "recovering jobs");

	if (rc)
		return rc;
	for (int r = 0; r < PQntuples(res); r++) {
		const char *state = fg_pg_text(res, r, 0);

		if (strcmp(state, "queued") == 0)
			n_requeued++;
		else if (strcmp(state, "failed") == 0)
			n_failed++;
	}
	PQclear(res);
	if (requeued)
		*requeued = n_requeued;
	if (failed)
		*failed = n_failed;
	return n_requeued ? fg_pg_notify(s, FG_PG_CHANNEL_JOBS, err) : 0;
}

int fg_pg_jobs_recover(struct fg_store *s, const char *instance_id, int stale_seconds, int max_attempts,
		       int *requeued, int *failed, struct fg_err *err)
{
	struct fg_pg_args a = { 0 };
	int rc;

	if (!s)
		return fg_err_set(err, FG_EINPUT, "recovering jobs: no store");
	rc = fg_store_check_text(instance_id, FG_STORE_WORKER_MAX, 1, "instance id", err);
	if (rc)
		return rc;
	if (max_attempts < 1)
		return fg_err_set(err, FG_EINPUT, "recovering jobs: max attempts %d is below 1", max_attempts);
	fg_pg_arg_int(&a, max_attempts);
	fg_pg_arg_int(&a, stale_seconds > 0 ? stale_seconds : 0);
	return abandon(s, sql_jobs_recover, &a, requeued, failed, err);
}

int fg_pg_jobs_reap(struct fg_store *s, int max_attempts, int *requeued, int *failed, struct fg_err *err)
{
	struct fg_pg_args a = { 0 };

	if (!s)
		return fg_err_set(err, FG_EINPUT, "taking over jobs: no store");
	if (max_attempts < 1)
		return fg_err_set(err, FG_EINPUT, "taking over jobs: max attempts %d is below 1", max_attempts);
	fg_pg_arg_int(&a, max_attempts);
	return abandon(s, sql_jobs_reap, &a, requeued, failed, err);
}

int fg_pg_jobs_renew(struct fg_store *s, const char *instance_id, int lease_seconds, int *renewed,
		     struct fg_err *err)
{
	struct fg_pg_args a = { 0 };
	PGresult *res = NULL;
	int rc;

	if (!s)
		return fg_err_set(err, FG_EINPUT, "renewing leases: no store");
	rc = fg_store_check_text(instance_id, FG_STORE_WORKER_MAX, 1, "instance id", err);
	if (rc)
		return rc;
	fg_pg_arg_text(&a, instance_id);
	fg_pg_arg_int(&a, lease_seconds);
	rc = fg_pg_query(s,
			 "UPDATE jobs SET lease_until = " LEASE_AT("$2") ", heartbeat_at = now()"
			 " WHERE state = 'running' AND owner = $1",
			 &a, &res, err, "renewing leases");
	if (rc)
		return rc;
	if (renewed)
		*renewed = (int)changed(res);
	PQclear(res);
	return 0;
}

int fg_pg_jobs_expired(struct fg_store *s, int64_t *n, struct fg_err *err)
{
	PGresult *res = NULL;
	int rc = fg_pg_query(s, "SELECT count(*) FROM jobs WHERE state = 'running' AND lease_until < now()", NULL, &res,
			     err, "looking for expired leases");

	if (rc)
		return rc;
	*n = fg_pg_int(res, 0, 0);
	PQclear(res);
	return 0;
}
