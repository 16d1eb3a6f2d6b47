/*
 * pg.h: the PostgreSQL backend's helpers (the files of store/pg/, tests): one libpq
 * connection per struct fg_store, statements prepared on first use and
 * kept (named per connection, prepared again after a reconnect), text
 * parameters and results, and SQLSTATE classes mapped to FG_E* codes.
 *
 * Timestamps are timestamptz columns given out as RFC 3339 UTC text with
 * milliseconds (PG_TS), the same text SQLite stores.  JSON documents are
 * text columns holding exactly what forged printed, as on SQLite; JSON is
 * built in SQL only from values forged wrote itself (verdict codes, host
 * reports through json_build_object, which escapes).  Text ordering that a
 * document shows uses COLLATE "C", SQLite's byte order, so both backends
 * answer alike whatever the database's locale.
 */
#ifndef FG_STORE_PG_H
#define FG_STORE_PG_H

#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>

#include "store/internal.h"

#define FG_PG_CACHE_MAX 128
#define FG_PG_MAX_ARGS 16

/* A timestamptz column as RFC 3339 UTC with milliseconds: 2026-01-02T03:04:05.678Z. */
#define PG_TS(col) "to_char((" col ") AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"

struct fg_pg_slot {
	uint64_t hash;
	const char *sql;            /* the caller's static text */
	char name[16];
};

struct fg_pg {
	PGconn *conn;
	char *target;
	size_t n_slots;
	unsigned next_name;
	struct fg_pg_slot slots[FG_PG_CACHE_MAX];
	char last_state[6];         /* SQLSTATE of the last failure, "" when none */
	long long lock_ms;          /* the session's lock_timeout */
};

/* Text parameters for a statement: NULL is SQL NULL. */
struct fg_pg_args {
	int n;
	const char *v[FG_PG_MAX_ARGS];
	char buf[FG_PG_MAX_ARGS][40];
};

void fg_pg_arg_text(struct fg_pg_args *a, const char *text);
void fg_pg_arg_int(struct fg_pg_args *a, int64_t v);
void fg_pg_arg_double(struct fg_pg_args *a, double v);  /* NAN and infinities become NULL */
void fg_pg_arg_bool(struct fg_pg_args *a, int v);

/* The FG_E* code of a SQLSTATE (NULL or "": the connection failed: FG_ESTATE). */
int fg_pg_code(const char *sqlstate);

/*
 * Run sql (prepared on first use on this connection) with args (NULL: none).
 * 0 with *res a PGRES_TUPLES_OK or PGRES_COMMAND_OK result (PQclear it; res
 * may be NULL when the rows do not matter), or the FG_E* code with err set
 * to "<what>: <server message>" and s->pg->last_state the SQLSTATE.  A
 * broken connection is reset first (outside a transaction).
 */
int fg_pg_query(struct fg_store *s, const char *sql, const struct fg_pg_args *args, PGresult **res,
		struct fg_err *err, const char *what);

/* 1 when the last failure on s had SQLSTATE state (e.g. "23503", a foreign key). */
int fg_pg_failed_with(const struct fg_store *s, const char *state);

/*
 * Transactions, as fg_sql_* for SQLite: fg_pg_begin opens a read-write
 * transaction, fg_pg_begin_read a REPEATABLE READ READ ONLY one (one
 * snapshot for several SELECTs); on the writer's connection inside a batch
 * begin, commit and rollback do nothing (the writer's savepoint stands for
 * them).
 */
int fg_pg_begin(struct fg_store *s, struct fg_err *err);
int fg_pg_begin_read(struct fg_store *s, struct fg_err *err);
int fg_pg_commit(struct fg_store *s, struct fg_err *err);
void fg_pg_rollback(struct fg_store *s);

/* Row r column c: text ("" for NULL), NULL check, numbers, a copy into dst (UTF-8 safe). */
const char *fg_pg_text(const PGresult *res, int r, int c);
int fg_pg_null(const PGresult *res, int r, int c);
int64_t fg_pg_int(const PGresult *res, int r, int c);
double fg_pg_double(const PGresult *res, int r, int c);
int fg_pg_bool(const PGresult *res, int r, int c);
void fg_pg_copy(const PGresult *res, int r, int c, char *dst, size_t cap);

/* Parse the JSON text of row r column c (SQL NULL: JSON null); FG_ESTATE when it does not parse. */
int fg_pg_json(const PGresult *res, int r, int c, cJSON **out, struct fg_err *err, const char *what);

/* The raw connection (tests). */
PGconn *fg_pg_conn(struct fg_store *s);

/* Tell other instances (LISTEN/NOTIFY) that jobs were queued, or that data changed. */
#define FG_PG_CHANNEL_JOBS "forged_jobs"
#define FG_PG_CHANNEL_DATA "forged_data"
int fg_pg_notify(struct fg_store *s, const char *channel, struct fg_err *err);

/* The backend's functions, for the ops table (pg/db.c). */
int fg_pg_job_enqueue(struct fg_store *s, const char *kind, const char *params_json, const char *asked_json,
		      const char *idem_key, const char *body_sha256, int queue_cap, struct fg_job *out, int *replayed,
		      struct fg_err *err);
int fg_pg_job_claim(struct fg_store *s, const char *worker, int lease_seconds, struct fg_job *out,
		    struct fg_err *err);
int fg_pg_job_progress(struct fg_store *s, int64_t id, const char *worker, const char *stage, double progress,
		       const struct fg_job_bytes *bytes, int lease_seconds, struct fg_err *err);
int fg_pg_job_finish(struct fg_store *s, int64_t id, const char *worker, enum fg_job_state state,
		     const char *error, const struct fg_verdict_row *refusal, const char *verdicts, int64_t artifact_id,
		     struct fg_err *err);
int fg_pg_job_succeed(struct fg_store *s, int64_t id, const char *worker, const struct fg_store_artifact *a,
		      int64_t *artifact_id, int *existed, struct fg_err *err);
int fg_pg_job_cancel(struct fg_store *s, int64_t id, struct fg_job *out, struct fg_err *err);
int fg_pg_job_requeue(struct fg_store *s, int64_t id, const char *worker, struct fg_err *err);
int fg_pg_job_get(struct fg_store *s, int64_t id, struct fg_job *out, struct fg_err *err);
int fg_pg_job_list(struct fg_store *s, int state, int64_t cursor, int limit, cJSON **out, int64_t *next,
		   struct fg_err *err);
int fg_pg_jobs_recover(struct fg_store *s, const char *instance_id, int stale_seconds, int max_attempts,
		       int *requeued, int *failed, struct fg_err *err);
int fg_pg_jobs_renew(struct fg_store *s, const char *instance_id, int lease_seconds, int *renewed,
		     struct fg_err *err);
int fg_pg_jobs_reap(struct fg_store *s, int max_attempts, int *requeued, int *failed, struct fg_err *err);
int fg_pg_jobs_expired(struct fg_store *s, int64_t *n, struct fg_err *err);
int fg_pg_artifact_put(struct fg_store *s, const struct fg_store_artifact *a, int64_t *id, int *existed,
		       struct fg_err *err);
int fg_pg_artifact_insert(struct fg_store *s, const struct fg_store_artifact *a, int64_t job, int64_t *id,
			  int *existed, struct fg_err *err);
int fg_pg_artifact_get(struct fg_store *s, int64_t id, int raw, cJSON **out, struct fg_err *err);
int fg_pg_artifact_runtime(struct fg_store *s, int64_t id, char *path, size_t cap, cJSON **runtime,
			   struct fg_err *err);
int fg_pg_artifact_by_fingerprint(struct fg_store *s, const char *fingerprint, int64_t *id, struct fg_err *err);
int fg_pg_artifact_resolve(struct fg_store *s, const char *key, const char *digest, int64_t want_id, int64_t *id,
			   enum fg_artifact_match *how, int *ambiguous, cJSON **candidates, struct fg_err *err);
int fg_pg_artifact_list(struct fg_store *s, const char *verdict, const char *family, int64_t cursor, int limit,
			cJSON **out, int64_t *next, struct fg_err *err);
int fg_pg_verification_put(struct fg_store *s, int64_t artifact_id, const char *rows_json,
			   const struct fg_verdict_row *row, const cJSON *result, const char *result_text, int64_t *id,
			   int *restamped, struct fg_err *err);
int fg_pg_fleet_report(struct fg_store *s, const char *host, int64_t artifact_id, const char *runtime,
		       const char *runtime_reported, const char *observed, struct fg_err *err);
int fg_pg_fleet_health(struct fg_store *s, cJSON **out, struct fg_err *err);
int fg_pg_idem_claim(struct fg_store *s, const char *route, const char *key, const char *body_sha256,
		     int stale_seconds, enum fg_idem_state *state, struct fg_idem_answer *answer, struct fg_err *err);
int fg_pg_idem_finish(struct fg_store *s, const char *route, const char *key, int status, const char *location,
		      const char *body, struct fg_err *err);
int fg_pg_idem_release(struct fg_store *s, const char *route, const char *key, struct fg_err *err);
int fg_pg_job_key_known(struct fg_store *s, const char *key, const char *body_sha256, int *known,
			struct fg_err *err);
int fg_pg_fleet_report_same(struct fg_store *s, const char *host, const char *runtime, const char *reported,
			    int64_t artifact_id, const char *observed_json, int *same, struct fg_err *err);
int fg_pg_read_stats(struct fg_store *s, struct fg_sql_stats *out, cJSON *by_verdict, cJSON *by_family,
		     struct fg_err *err);

#endif
