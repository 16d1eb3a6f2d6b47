/*
 * jobs.c: the durable job queue on SQLite.  A job is a row that moves
 * queued -> running -> succeeded | failed | cancelled; workers of any number
 * of processes claim the oldest queued row with one UPDATE ... RETURNING
 * inside BEGIN IMMEDIATE, so the write lock makes every claim see the claims
 * before it and no job is handed out twice.  The running row carries its
 * worker ("INSTANCE/N"), its owner (the instance), a heartbeat and a lease
 * expiry: start-up recovery reads the first three to tell a job whose
 * worker died from one still in progress, and any worker's reaper takes
 * back a job whose lease expired.  Calls about a running job may name the
 * worker that claimed it; they then change nothing when another worker
 * holds it now.
 *
 * Idempotency keys are a UNIQUE column checked and written in the same
 * IMMEDIATE transaction: two clients racing with one key serialise on the
 * write lock, and the second sees the first's row.
 */
#include "store/internal.h"

#include "forge/artifact/forge.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Column order read by job_read. */
#define JOB_COLS                                                                               \
	"id, kind, state, stage, progress, error, artifact_id, attempts, cancel_requested, params, " \
	"created_at, updated_at, refusal, verdicts, asked, bytes_done, bytes_total, eta_s"

/* Fill *out from the JOB_COLS of st's current row (starting at column first). */
static int job_read(sqlite3_stmt *st, int first, struct fg_job *out, struct fg_err *err)
{
	struct fg_job j;
	const char *state = (const char *)sqlite3_column_text(st, first + 2);
	const char *params;

	memset(&j, 0, sizeof(j));
	j.id = sqlite3_column_int64(st, first + 0);
	fg_sql_column_copy(st, first + 1, j.kind, sizeof(j.kind));
	if (fg_job_state_parse(state, &j.state))
		return fg_err_set(err, FG_ESTATE, "job %lld has an unknown state '%s'", (long long)j.id,
				  state ? state : "(null)");
	fg_sql_column_copy(st, first + 3, j.stage, sizeof(j.stage));
	j.progress = sqlite3_column_double(st, first + 4);
	fg_sql_column_copy(st, first + 5, j.error, sizeof(j.error));
	j.artifact_id = sqlite3_column_int64(st, first + 6);
	j.attempts = sqlite3_column_int(st, first + 7);
	j.cancel_requested = sqlite3_column_int(st, first + 8) != 0;
	params = (const char *)sqlite3_column_text(st, first + 9);
	j.params = strdup(params ? params : "{}");
	if (!j.params)
		return fg_err_set(err, FG_ENOMEM, "reading job %lld: out of memory", (long long)j.id);
	fg_sql_column_copy(st, first + 10, j.created_at, sizeof(j.created_at));
	fg_sql_column_copy(st, first + 11, j.updated_at, sizeof(j.updated_at));
	/* A code this forged does not know (a newer one wrote it) reads as no refusal. */
	j.refusal = fg_verdict_code_find((const char *)sqlite3_column_text(st, first + 12));
	if ((sqlite3_column_type(st, first + 13) != SQLITE_NULL &&
	     !(j.verdicts = strdup((const char *)sqlite3_column_text(st, first + 13)))) ||
	    (sqlite3_column_type(st, first + 14) != SQLITE_NULL &&
	     !(j.asked = strdup((const char *)sqlite3_column_text(st, first + 14))))) {
		fg_job_release(&j);
		return fg_err_set(err, FG_ENOMEM, "reading job %lld: out of memory", (long long)j.id);
	}
	j.has_bytes = sqlite3_column_type(st, first + 15) != SQLITE_NULL &&
		      sqlite3_column_type(st, first + 16) != SQLITE_NULL;
	j.bytes_done = sqlite3_column_int64(st, first + 15);
	j.bytes_total = sqlite3_column_int64(st, first + 16);
	j.eta_s = sqlite3_column_type(st, first + 17) == SQLITE_NULL ? -1.0 : sqlite3_column_double(st, first + 17);
	*out = j;
	return 0;
}

/*
 * Step st, which returns at most one job row, and read it.  Returns 1 with
 * *out filled, 0 when there was no row.  Leaves st stepped: the caller puts it.
 */
static int step_job(struct fg_store *s, sqlite3_stmt *st, struct fg_job *out, struct fg_err *err,
		    const char *what)
{
	int rc = sqlite3_step(st);

	if (rc == SQLITE_DONE)
		return 0;
	if (rc != SQLITE_ROW)
		return fg_sql_fail(s, rc, err, what);
	rc = job_read(st, 0, out, err);
	if (rc)
		return rc;
	/* Finish the statement: an UPDATE ... RETURNING is only complete at SQLITE_DONE. */
	rc = sqlite3_step(st);
	if (rc != SQLITE_DONE) {
		fg_job_release(out);
		return fg_sql_fail(s, rc, err, what);
	}
	return 1;
}

/* SQL time lease_seconds (?N) from now. */
#define LEASE_AT(n) "strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '+' || " n " || ' seconds')"

/*
 * Why an UPDATE guarded by "state = 'running'" (and the worker, when given)
 * changed nothing: no such job, not running, or another worker holds it.
 */
static int not_running(struct fg_store *s, int64_t id, const char *worker, const char *what, struct fg_err *err)
{
	static const char sql[] = "SELECT state, worker FROM jobs WHERE id = ?1";
	sqlite3_stmt *st;
	int rc = fg_sql_get(s, sql, &st, err);

	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		rc = fg_err_set(err, FG_ENOTFOUND, "%s job %lld: no such job", what, (long long)id);
	else if (rc == SQLITE_ROW && worker && strcmp((const char *)sqlite3_column_text(st, 0), "running") == 0)
		rc = fg_err_set(err, FG_ECONFLICT, "%s job %lld: the job is held by %s now, not %s (its lease expired)",
				what, (long long)id,
				sqlite3_column_text(st, 1) ? (const char *)sqlite3_column_text(st, 1) : "nobody", worker);
	else if (rc == SQLITE_ROW)
		rc = fg_err_set(err, FG_ECONFLICT, "%s job %lld: the job is %s, not running", what, (long long)id,
				(const char *)sqlite3_column_text(st, 0));
	else
		rc = fg_sql_fail(s, rc, err, what);
	fg_sql_put(st);
	return rc;
}

/* ---- enqueue ---- */

static const char sql_job_by_key[] = "SELECT body_sha256, " JOB_COLS " FROM jobs WHERE idem_key = ?1";
static const char sql_count_queued[] = "SELECT count(*) FROM jobs WHERE state = 'queued'";
static const char sql_job_insert[] =
	"INSERT INTO jobs (kind, params, idem_key, body_sha256, asked, created_at, updated_at)"
	" VALUES (?1, ?2, ?3, ?4, ?5, " FG_SQL_NOW ", " FG_SQL_NOW ") RETURNING " JOB_COLS;

/*
 * The job already holding idem_key, if any: 1 with *out filled (same body),
 * FG_ECONFLICT (another body), 0 (key unused).
 */
static int find_by_key(struct fg_store *s, const char *key, const char *body_sha256, struct fg_job *out,
		       struct fg_err *err)
{
	sqlite3_stmt *st;
	const char *stored;
	int rc = fg_sql_get(s, sql_job_by_key, &st, err);

	if (rc)
		return rc;
	fg_sql_bind_text(st, 1, key);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE) {
		rc = 0;
		goto out;
	}
	if (rc != SQLITE_ROW) {
		rc = fg_sql_fail(s, rc, err, "looking up an idempotency key");
		goto out;
	}
	stored = (const char *)sqlite3_column_text(st, 0);
	if (!stored || strcmp(stored, body_sha256) != 0) {
		rc = fg_err_set(err, FG_ECONFLICT,
				"idempotency key '%s' was already used with another request body (job %lld)", key,
				(long long)sqlite3_column_int64(st, 1));
		goto out;
	}
	rc = job_read(st, 1, out, err);
	if (!rc)
		rc = 1;
out:
	fg_sql_put(st);
	return rc;
}

int fg_sqlite_job_enqueue(struct fg_store *s, const char *kind, const char *params_json, const char *asked_json,
			  const char *idem_key, const char *body_sha256, int queue_cap, struct fg_job *out, int *replayed,
			  struct fg_err *err)
{
	struct fg_job j;
	sqlite3_stmt *st = NULL;
	int rc;

	memset(&j, 0, sizeof(j));
	/* Checked by store.c before it queued (fg_store_check_enqueue). */
	if (!s || !out || !kind || !params_json)
		return fg_err_set(err, FG_EINPUT, "enqueueing a job: no store, kind, parameters or output");

	rc = fg_sql_begin(s, err);
	if (rc)
		return fg_err_prefix(err, rc, "enqueueing a job: ");
	if (idem_key) {
		rc = find_by_key(s, idem_key, body_sha256, &j, err);
		if (rc < 0)
			goto out;
		if (rc == 1) {
			/* A replay answers even when the queue is full: the job exists already. */
			rc = fg_sql_commit(s, err);
			if (rc)
				goto out;
			if (replayed)
				*replayed = 1;
			*out = j;
			return 0;
		}
	}
	if (queue_cap > 0) {
		int64_t queued;

		rc = fg_sql_get(s, sql_count_queued, &st, err);
		if (rc)
			goto out;
		rc = sqlite3_step(st);
		if (rc != SQLITE_ROW) {
			rc = fg_sql_fail(s, rc, err, "counting queued jobs");
			goto out;
		}
		queued = sqlite3_column_int64(st, 0);
		fg_sql_put(st);
		st = NULL;
		if (queued >= queue_cap) {
			rc = fg_err_set(err, FG_EBUSY, "the job queue is full (%lld queued, cap %d)",
					(long long)queued, queue_cap);
			goto out;
		}
	}
	rc = fg_sql_get(s, sql_job_insert, &st, err);
	if (rc)
		goto out;
	fg_sql_bind_text(st, 1, kind);
	fg_sql_bind_text(st, 2, params_json);
	fg_sql_bind_text(st, 3, idem_key);
	fg_sql_bind_text(st, 4, idem_key ? body_sha256 : NULL);
	fg_sql_bind_text(st, 5, asked_json);
	rc = step_job(s, st, &j, err, "inserting a job");
	if (rc == 0)
		rc = fg_err_set(err, FG_EINTERNAL, "inserting a job returned no row");
	if (rc < 0)
		goto out;
	fg_sql_put(st);
	st = NULL;
	rc = fg_sql_commit(s, err);
	if (rc)
		goto out;
	if (replayed)
		*replayed = 0;
	*out = j;
	return 0;
out:
	fg_sql_put(st);
	fg_sql_rollback(s);
	fg_job_release(&j);
	return rc;
}

/* ---- the worker's side ---- */

static const char sql_job_claim[] =
	"UPDATE jobs SET state = 'running', worker = ?1, owner = ?2, stage = '', progress = 0,"
	" bytes_done = NULL, bytes_total = NULL, eta_s = NULL,"
	" heartbeat_at = " FG_SQL_NOW ", lease_until = " LEASE_AT("?3") ", updated_at = " FG_SQL_NOW
	" WHERE id = (SELECT id FROM jobs WHERE state = 'queued' ORDER BY id LIMIT 1)"
	" RETURNING " JOB_COLS;

int fg_sqlite_job_claim(struct fg_store *s, const char *worker, int lease_seconds, struct fg_job *out,
			struct fg_err *err)
{
	struct fg_job j;
	sqlite3_stmt *st = NULL;
	char owner[FG_STORE_WORKER_MAX + 1];
	int rc, got;

	memset(&j, 0, sizeof(j));
	if (!s || !out)
		return fg_err_set(err, FG_EINPUT, "claiming a job: no store or no output");
	rc = fg_store_check_text(worker, FG_STORE_WORKER_MAX, 1, "worker name", err);
	if (rc)
		return rc;
	fg_store_worker_instance(worker, owner, sizeof(owner));
	rc = fg_sql_begin(s, err);
	if (rc)
		return fg_err_prefix(err, rc, "claiming a job: ");
	rc = fg_sql_get(s, sql_job_claim, &st, err);
	if (rc)
		goto out;
	fg_sql_bind_text(st, 1, worker);
	fg_sql_bind_text(st, 2, owner);
	sqlite3_bind_int(st, 3, lease_seconds);
	got = step_job(s, st, &j, err, "claiming a job");
	if (got < 0) {
		rc = got;
		goto out;
	}
	fg_sql_put(st);
	st = NULL;
	rc = fg_sql_commit(s, err);
	if (rc)
		goto out;
	if (got)
		*out = j;
	return got;
out:
	fg_sql_put(st);
	fg_sql_rollback(s);
	fg_job_release(&j);
	return rc;
}

static const char sql_job_progress[] =
	"UPDATE jobs SET stage = coalesce(?2, stage), progress = ?3, bytes_done = ?6, bytes_total = ?7, eta_s = ?8,"
	" heartbeat_at = " FG_SQL_NOW ", lease_until = " LEASE_AT("?5") ", updated_at = " FG_SQL_NOW
	" WHERE id = ?1 AND state = 'running' AND (?4 IS NULL OR worker = ?4)";

int fg_sqlite_job_progress(struct fg_store *s, int64_t id, const char *worker, const char *stage, double progress,
			   const struct fg_job_bytes *bytes, int lease_seconds, struct fg_err *err)
{
	sqlite3_stmt *st;
	int rc;

	/* store.c checked the store, the progress and the byte counts. */
	rc = fg_store_check_text(stage, FG_STORE_STAGE_MAX, 0, "job stage", err);
	if (rc)
		return rc;
	rc = fg_sql_get(s, sql_job_progress, &st, err);
	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, id);
	fg_sql_bind_text(st, 2, stage);
	sqlite3_bind_double(st, 3, progress);
	fg_sql_bind_text(st, 4, worker);
	sqlite3_bind_int(st, 5, lease_seconds);
	if (bytes) {
		sqlite3_bind_int64(st, 6, bytes->done);
		sqlite3_bind_int64(st, 7, bytes->total);
	} /* else ?6 and ?7 stay NULL: the stage's byte counts are cleared */
	if (bytes && bytes->eta_s >= 0)
		sqlite3_bind_double(st, 8, bytes->eta_s);
	rc = fg_sql_exec(s, st, err, "reporting job progress");
	if (rc)
		return rc;
	if (sqlite3_changes(s->db) == 0)
		return not_running(s, id, worker, "reporting progress of", err);
	return 0;
}

static const char sql_job_finish[] =
	"UPDATE jobs SET state = ?2, error = ?3, artifact_id = ?4, refusal = ?5, verdicts = ?7,"
	" progress = CASE WHEN ?2 = 'succeeded' THEN 1.0 ELSE progress END,"
	" updated_at = " FG_SQL_NOW " WHERE id = ?1 AND state = 'running' AND (?6 IS NULL OR worker = ?6)";

int fg_sqlite_job_finish(struct fg_store *s, int64_t id, const char *worker, enum fg_job_state state,
			 const char *error, const struct fg_verdict_row *refusal, const char *verdicts, int64_t artifact_id,
			 struct fg_err *err)
{
	sqlite3_stmt *st;
	int rc;

	if (!s)
		return fg_err_set(err, FG_EINPUT, "finishing a job: no store");
	rc = fg_store_check_finish(id, state, artifact_id, err);
	if (rc)
		return rc;
	rc = fg_sql_get(s, sql_job_finish, &st, err);
	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, id);
	fg_sql_bind_text(st, 2, fg_job_state_name(state));
	fg_sql_bind_text(st, 3, error ? error : "");
	if (artifact_id > 0)
		sqlite3_bind_int64(st, 4, artifact_id);
	else
		sqlite3_bind_null(st, 4);
	fg_sql_bind_text(st, 5, refusal ? refusal->name : NULL);
	fg_sql_bind_text(st, 6, worker);
	fg_sql_bind_text(st, 7, verdicts);
	rc = sqlite3_step(st);
	if (rc == SQLITE_CONSTRAINT_FOREIGNKEY) {
		rc = fg_err_set(err, FG_ENOTFOUND, "finishing job %lld: no artifact %lld", (long long)id,
				(long long)artifact_id);
		fg_sql_put(st);
		return rc;
	}
	if (rc != SQLITE_DONE) {
		rc = fg_sql_fail(s, rc, err, "finishing a job");
		fg_sql_put(st);
		return rc;
	}
	fg_sql_put(st);
	if (sqlite3_changes(s->db) == 0)
		return not_running(s, id, worker, "finishing", err);
	return 0;
}

/* The job, and its artifact when it succeeded already: its own row, or the same bytes stored before it. */
static const char sql_job_for_success[] =
	"SELECT j.state, j.worker, coalesce((SELECT a.id FROM artifacts a WHERE a.job_id = j.id),"
	" CASE WHEN j.state = 'succeeded' THEN j.artifact_id END) FROM jobs j WHERE j.id = ?1";
static const char sql_job_succeed[] =
	"UPDATE jobs SET state = 'succeeded', error = '', artifact_id = ?2, refusal = NULL, progress = 1.0,"
	" updated_at = " FG_SQL_NOW " WHERE id = ?1";

int fg_sqlite_job_succeed(struct fg_store *s, int64_t id, const char *worker, const struct fg_store_artifact *a,
			  int64_t *artifact_id, int *existed, struct fg_err *err)
{
	sqlite3_stmt *st = NULL;
	char state[16] = "", holder[FG_STORE_WORKER_MAX + 1] = "";
	int64_t existing = 0, aid = 0;
	int rc;

	if (!s || !a || !artifact_id)
		return fg_err_set(err, FG_EINPUT, "finishing a job: no store, artifact or output");
	rc = fg_sql_begin(s, err);
	if (rc)
		return fg_err_prefix(err, rc, "finishing job %lld: ", (long long)id);
	rc = fg_sql_get(s, sql_job_for_success, &st, err);
	if (rc)
		goto out;
	sqlite3_bind_int64(st, 1, id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE) {
		rc = fg_err_set(err, FG_ENOTFOUND, "finishing job %lld: no such job", (long long)id);
		goto out;
	}
	if (rc != SQLITE_ROW) {
		rc = fg_sql_fail(s, rc, err, "finishing a job");
		goto out;
	}
	fg_sql_column_copy(st, 0, state, sizeof(state));
	fg_sql_column_copy(st, 1, holder, sizeof(holder));
	existing = sqlite3_column_int64(st, 2);
	fg_sql_put(st);
	st = NULL;
	if (existing) {
		/* Stored already (this call is a retry): the same artifact, nothing new. */
		rc = fg_sql_commit(s, err);
		if (!rc)
			*artifact_id = existing;
		goto out;
	}
	if (strcmp(state, "running") != 0 || (worker && strcmp(holder, worker) != 0)) {
		rc = not_running(s, id, worker, "finishing", err);
		goto out;
	}
	rc = fg_sqlite_artifact_insert(s, a, id, &aid, existed, err);
	if (rc)
		goto out;
	rc = fg_sql_get(s, sql_job_succeed, &st, err);
	if (rc)
		goto out;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int64(st, 2, aid);
	rc = fg_sql_exec(s, st, err, "finishing a job");
	st = NULL;
	if (!rc)
		rc = fg_sql_commit(s, err);
	if (!rc)
		*artifact_id = aid;
out:
	fg_sql_put(st);
	if (rc)
		fg_sql_rollback(s);
	return rc;
}

/*
 * One statement decides by the row's state, so a worker finishing the job at
 * the same moment either finishes first (and the cancel leaves it alone) or
 * sees cancel_requested.
 */
static const char sql_job_cancel[] =
	"UPDATE jobs SET"
	" state = CASE WHEN state = 'queued' THEN 'cancelled' ELSE state END,"
	" cancel_requested = CASE WHEN state = 'running' THEN 1 ELSE cancel_requested END,"
	" updated_at = CASE WHEN state IN ('queued', 'running') THEN " FG_SQL_NOW " ELSE updated_at END"
	" WHERE id = ?1 RETURNING " JOB_COLS;

int fg_sqlite_job_cancel(struct fg_store *s, int64_t id, struct fg_job *out, struct fg_err *err)
{
	struct fg_job j;
	sqlite3_stmt *st;
	int rc;

	memset(&j, 0, sizeof(j));
	if (!s)
		return fg_err_set(err, FG_EINPUT, "cancelling a job: no store");
	rc = fg_sql_get(s, sql_job_cancel, &st, err);
	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, id);
	rc = step_job(s, st, &j, err, "cancelling a job");
	fg_sql_put(st);
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

/* A cancel requested while the job ran wins over the requeue. */
static const char sql_job_requeue[] =
	"UPDATE jobs SET state = CASE WHEN cancel_requested THEN 'cancelled' ELSE 'queued' END,"
	" worker = NULL, owner = NULL, heartbeat_at = NULL, lease_until = NULL, stage = '', progress = 0,"
	" bytes_done = NULL, bytes_total = NULL, eta_s = NULL,"
	" updated_at = " FG_SQL_NOW " WHERE id = ?1 AND state = 'running' AND (?2 IS NULL OR worker = ?2)";

int fg_sqlite_job_requeue(struct fg_store *s, int64_t id, const char *worker, struct fg_err *err)
{
	sqlite3_stmt *st;
	int rc;

	if (!s)
		return fg_err_set(err, FG_EINPUT, "requeueing a job: no store");
	rc = fg_sql_get(s, sql_job_requeue, &st, err);
	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, id);
	fg_sql_bind_text(st, 2, worker);
	rc = fg_sql_exec(s, st, err, "requeueing a job");
	if (rc)
		return rc;
	if (sqlite3_changes(s->db) == 0)
		return not_running(s, id, worker, "requeueing", err);
	return 0;
}

/* ---- reading ---- */

static const char sql_job_get[] = "SELECT " JOB_COLS " FROM jobs WHERE id = ?1";

int fg_sqlite_job_get(struct fg_store *s, int64_t id, struct fg_job *out, struct fg_err *err)
{
	sqlite3_stmt *st;
	int rc;

	if (!s || !out)
		return fg_err_set(err, FG_EINPUT, "reading a job: no store or no output");
	rc = fg_sql_get(s, sql_job_get, &st, err);
	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, id);
	rc = step_job(s, st, out, err, "reading a job");
	fg_sql_put(st);
	if (rc == 0)
		return fg_err_set(err, FG_ENOTFOUND, "job %lld: no such job", (long long)id);
	return rc < 0 ? rc : 0;
}

static const char sql_job_list[] = "SELECT " JOB_COLS " FROM jobs WHERE id > ?1 ORDER BY id LIMIT ?2";
static const char sql_job_list_state[] =
	"SELECT " JOB_COLS " FROM jobs WHERE state = ?3 AND id > ?1 ORDER BY id LIMIT ?2";

static int job_item(cJSON *arr, sqlite3_stmt *st, struct fg_err *err)
{
	struct fg_job j;
	cJSON *item;
	int rc = job_read(st, 0, &j, err);

	if (rc)
		return rc;
	item = fg_job_json(&j);
	fg_job_release(&j);
	if (!item || !cJSON_AddItemToArray(arr, item)) {
		cJSON_Delete(item);
		return fg_err_set(err, FG_ENOMEM, "listing jobs: out of memory");
	}
	return 0;
}

int fg_sqlite_job_list(struct fg_store *s, int state, int64_t cursor, int limit, cJSON **out, int64_t *next,
		       struct fg_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if (!s || !out || !next)
		return fg_err_set(err, FG_EINPUT, "listing jobs: no store or no output");
	if (state >= FG_JOB_STATES)
		return fg_err_set(err, FG_EINPUT, "listing jobs: unknown state %d", state);
	if (cursor < 0)
		return fg_err_set(err, FG_EINPUT, "listing jobs: cursor %lld is negative", (long long)cursor);
	limit = fg_sql_clamp_limit(limit);
	rc = fg_sql_get(s, state < 0 ? sql_job_list : sql_job_list_state, &st, err);
	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, cursor);
	sqlite3_bind_int(st, 2, limit);
	if (state >= 0)
		fg_sql_bind_text(st, 3, fg_job_state_name((enum fg_job_state)state));
	return fg_sql_page(s, st, limit, job_item, out, next, "listing jobs", err);
}

/* ---- recovery and leases ---- */

/*
 * What a job abandoned by its worker becomes (recovery and the reaper
 * share it): each abandoned run counts as an attempt; at ?3 attempts the
 * job fails for good.  A job whose cancel was requested is simply
 * cancelled: nobody wants it run again.  SET expressions read the row as it
 * was, so every "attempts + 1" below is the new count.
 */
#define ABANDON_SET                                                                                      \
	" state = CASE WHEN cancel_requested THEN 'cancelled'"                                           \
	"  WHEN attempts + 1 >= ?3 THEN 'failed' ELSE 'queued' END,"                                     \
	" error = CASE WHEN cancel_requested THEN error"                                                 \
	"  WHEN attempts + 1 >= ?3 THEN 'abandoned after ' || (attempts + 1) || ' attempts' ELSE error END," \
	" attempts = attempts + 1,"                                                                      \
	" worker = CASE WHEN cancel_requested OR attempts + 1 >= ?3 THEN worker ELSE NULL END,"          \
	" owner = CASE WHEN cancel_requested OR attempts + 1 >= ?3 THEN owner ELSE NULL END,"            \
	" heartbeat_at = CASE WHEN cancel_requested OR attempts + 1 >= ?3 THEN heartbeat_at ELSE NULL END," \
	" lease_until = NULL,"                                                                           \
	" stage = CASE WHEN cancel_requested OR attempts + 1 >= ?3 THEN stage ELSE '' END,"              \
	" progress = CASE WHEN cancel_requested OR attempts + 1 >= ?3 THEN progress ELSE 0 END,"         \
	" updated_at = " FG_SQL_NOW

/*
 * A job is abandoned when it is running and its worker belongs to another
 * instance (worker is "INSTANCE/N"; compared by prefix with substr, not LIKE,
 * since an instance id may hold '%' or '_'), or its heartbeat is older than
 * ?2 seconds (when ?2 > 0), or its lease expired.
 */
static const char sql_jobs_recover[] =
	"UPDATE jobs SET" ABANDON_SET
	" WHERE state = 'running' AND ("
	"  worker IS NULL OR NOT (worker = ?1 OR substr(worker, 1, length(?1) + 1) = ?1 || '/')"
	"  OR heartbeat_at IS NULL"
	"  OR (?2 > 0 AND heartbeat_at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-' || ?2 || ' seconds'))"
	"  OR lease_until < " FG_SQL_NOW ")"
	" RETURNING state";

/* The reaper: running jobs whose lease expired, whoever holds them. */
static const char sql_jobs_reap[] =
	"UPDATE jobs SET" ABANDON_SET " WHERE state = 'running' AND lease_until < " FG_SQL_NOW " RETURNING state";

static int abandon(struct fg_store *s, const char *sql, const char *instance_id, int stale_seconds,
		   int max_attempts, int *requeued, int *failed, struct fg_err *err)
{
	sqlite3_stmt *st;
	int n_requeued = 0, n_failed = 0, rc;

	if (max_attempts < 1)
		return fg_err_set(err, FG_EINPUT, "recovering jobs: max attempts %d is below 1", max_attempts);
	rc = fg_sql_get(s, sql, &st, err);
	if (rc)
		return rc;
	if (instance_id) {
		fg_sql_bind_text(st, 1, instance_id);
		sqlite3_bind_int(st, 2, stale_seconds > 0 ? stale_seconds : 0);
	}
	sqlite3_bind_int(st, 3, max_attempts);
	/* One statement, one implicit transaction: all abandoned jobs move, or none. */
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *state = (const char *)sqlite3_column_text(st, 0);

		if (state && strcmp(state, "queued") == 0)
			n_requeued++;
		else if (state && strcmp(state, "failed") == 0)
			n_failed++;
	}
	if (rc != SQLITE_DONE) {
		rc = fg_sql_fail(s, rc, err, "recovering jobs");
		fg_sql_put(st);
		return rc;
	}
	fg_sql_put(st);
	if (requeued)
		*requeued = n_requeued;
	if (failed)
		*failed = n_failed;
	return 0;
}

int fg_sqlite_jobs_recover(struct fg_store *s, const char *instance_id, int stale_seconds, int max_attempts,
			   int *requeued, int *failed, struct fg_err *err)
{
	int rc;

	if (!s)
		return fg_err_set(err, FG_EINPUT, "recovering jobs: no store");
	rc = fg_store_check_text(instance_id, FG_STORE_WORKER_MAX, 1, "instance id", err);
	if (rc)
		return rc;
	return abandon(s, sql_jobs_recover, instance_id, stale_seconds, max_attempts, requeued, failed, err);
}

int fg_sqlite_jobs_reap(struct fg_store *s, int max_attempts, int *requeued, int *failed, struct fg_err *err)
{
	if (!s)
		return fg_err_set(err, FG_EINPUT, "taking over jobs: no store");
	return abandon(s, sql_jobs_reap, NULL, 0, max_attempts, requeued, failed, err);
}

static const char sql_jobs_renew[] =
	"UPDATE jobs SET lease_until = " LEASE_AT("?2") ", heartbeat_at = " FG_SQL_NOW
	" WHERE state = 'running' AND owner = ?1";

int fg_sqlite_jobs_renew(struct fg_store *s, const char *instance_id, int lease_seconds, int *renewed,
			 struct fg_err *err)
{
	sqlite3_stmt *st;
	int rc;

	if (!s)
		return fg_err_set(err, FG_EINPUT, "renewing leases: no store");
	rc = fg_store_check_text(instance_id, FG_STORE_WORKER_MAX, 1, "instance id", err);
	if (rc)
		return rc;
	rc = fg_sql_get(s, sql_jobs_renew, &st, err);
	if (rc)
		return rc;
	fg_sql_bind_text(st, 1, instance_id);
	sqlite3_bind_int(st, 2, lease_seconds);
	rc = fg_sql_exec(s, st, err, "renewing leases");
	if (!rc && renewed)
		*renewed = sqlite3_changes(s->db);
	return rc;
}

int fg_sqlite_jobs_expired(struct fg_store *s, int64_t *n, struct fg_err *err)
{
	sqlite3_stmt *st;
	int rc = fg_sql_get(s, "SELECT count(*) FROM jobs WHERE state = 'running' AND lease_until < " FG_SQL_NOW, &st,
			    err);

	if (rc)
		return rc;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*n = sqlite3_column_int64(st, 0);
		rc = 0;
	} else {
		rc = fg_sql_fail(s, rc, err, "looking for expired leases");
	}
	fg_sql_put(st);
	return rc;
}
