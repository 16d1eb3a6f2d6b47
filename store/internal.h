/*
 * internal.h: what the store's .c files share and nothing outside store/
 * may use (tests and the store benchmarks excepted): the connection struct,
 * the backend table, the group-commit writer, the backend-neutral helpers
 * (common.c), and the SQLite backend's helpers (sqlite/db.c): the
 * prepared-statement cache, transaction and error helpers, and the SQL
 * fragments every SQLite file writes the same way (the timestamp format).
 * The PostgreSQL backend's helpers are in store/pg/pg.h.
 *
 * Layout: store.c parses the store URL and dispatches every public call to
 * the backend (sqlite/ or pg/: each backend's SQL lives in its own files);
 * writes go through writer.c, one thread per process and database owning
 * the write connection; common.c holds what both backends compute the same
 * way (job objects, the verdict and provenance checks, the health
 * document's fixed parts).
 *
 * A struct fg_store is one connection (SQLite or libpq) plus the
 * statements prepared on it.  It is not thread-safe and must not be
 * shared: the SQLite connection is opened with SQLITE_OPEN_NOMUTEX, a libpq
 * connection serves one query at a time, and the cached statements hold
 * per-call state, so each thread opens its own store.  Reads run on the
 * caller's connection; writes are handed to the process's writer for that
 * database (writer.c), which batches them into one transaction per commit.
 */
#ifndef FG_STORE_INTERNAL_H
#define FG_STORE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "forge/core/error.h"
#include "forge/model/convention.h"
#include "store/idem.h"
#include "store/store.h"

/*
 * RFC 3339 UTC with milliseconds.  Every timestamp the SQLite store writes
 * uses this exact form, so text comparison orders them (the stale-heartbeat
 * test of recovery and the lease test rely on it).
 */
#define FG_SQL_NOW "strftime('%Y-%m-%dT%H:%M:%fZ','now')"

/* Distinct SQL texts one connection may cache; the store uses fewer than 60. */
#define FG_SQL_CACHE_MAX 96

/* The largest page a list returns (the smallest is 1). */
#define FG_SQL_LIMIT_MAX FG_STORE_LIST_LIMIT_MAX

/* Byte limits of the texts the store checks before writing them. */
#define FG_STORE_KEY_MAX 255        /* idempotency key */
#define FG_STORE_HASH_MAX 128       /* request body digest (hex SHA-256 is 64) */
#define FG_STORE_WORKER_MAX 128     /* worker name "INSTANCE/N", instance id */
#define FG_STORE_STAGE_MAX (sizeof(((struct fg_job *)0)->stage) - 1)
#define FG_STORE_FILE_MAX 4096      /* fingerprinted file name */
#define FG_STORE_SHA_MAX 128        /* digest text */
#define FG_STORE_RUNTIME_MAX 64     /* runtime id */
#define FG_STORE_HOST_MAX 253       /* a DNS name */
#define FG_STORE_UNHEALTHY_MAX 500  /* artifacts listed under fleet health's "unhealthy" */

struct fg_sql_slot {
	uint64_t hash;          /* FNV-1a of the SQL text, checked before strcmp */
	sqlite3_stmt *stmt;     /* sqlite3_sql(stmt) is the key itself */
};

struct fg_store_ops;
struct fg_writer;
struct fg_pg;

/*
 * An artifact as the backends store it: checked and printed by store.c
 * (fg_store_prepare_artifact) in the caller's thread, so the writer thread
 * spends its time on SQL only.
 */
struct fg_store_artifact {
	const struct fg_artifact_in *in;
	const char *report;
	const char *provenance;        /* NULL when in->provenance is */
	const char *runtime;           /* in->mtplx_runtime printed, NULL when none */
};

struct fg_store {
	const struct fg_store_ops *ops;
	struct fg_writer *writer; /* the process's writer for this database; NULL on the writer's own connection */
	int in_batch;           /* the writer's connection inside a batch: begin/commit are savepoints */
	int user_version;       /* after migration */
	int lease_seconds;      /* leases this handle's claims and renewals ask for */
	long long busy_ms;      /* how long a statement waits for a lock (db.c's busy handler; pg: lock_timeout) */
	/* SQLite */
	sqlite3 *db;
	size_t n_slots;
	struct fg_sql_slot slots[FG_SQL_CACHE_MAX];
	/* PostgreSQL (store/pg/pg.h) */
	struct fg_pg *pg;
};

/*
 * A backend.  Every function runs on the connection it is given: reads on
 * the caller's, writes on the writer's (inside a batch, where begin and
 * commit of the backend's own helpers are savepoints).  Argument checks are
 * the backend's, through the common helpers below, so both answer alike.
 */
struct fg_store_ops {
	const char *name;                /* "sqlite", "postgres" */
	/* target: a file path (sqlite) or a libpq URL (postgres) */
	int (*open)(struct fg_store *s, const char *target, struct fg_err *err);
	void (*close)(struct fg_store *s);
	/* the writer's transaction: begin, commit, rollback; 1 when the open transaction was lost */
	int (*tx_begin)(struct fg_store *s, struct fg_err *err);
	int (*tx_commit)(struct fg_store *s, struct fg_err *err);
	void (*tx_rollback)(struct fg_store *s);
	int (*tx_lost)(struct fg_store *s);
	/* a savepoint around each write of a batch */
	int (*sp_begin)(struct fg_store *s, struct fg_err *err);
	int (*sp_release)(struct fg_store *s, struct fg_err *err);
	void (*sp_rollback)(struct fg_store *s);
	/* the writer's own connection opened (SQLite: its WAL hook asks for checkpoints); may be NULL */
	void (*writer_attach)(struct fg_store *ws, struct fg_writer *w);
	/* a checkpoint on the checkpoint thread's connection; NULL: the backend needs none */
	int (*checkpoint)(struct fg_store *s, struct fg_err *err);

	int (*job_enqueue)(struct fg_store *s, const char *kind, const char *params_json, const char *asked_json,
			   const char *idem_key, const char *body_sha256, int queue_cap, struct fg_job *out, int *replayed,
			   struct fg_err *err);
	int (*job_claim)(struct fg_store *s, const char *worker, int lease_seconds, struct fg_job *out,
			 struct fg_err *err);
	/* bytes: the stage's byte counts, or NULL (cleared) */
	int (*job_progress)(struct fg_store *s, int64_t id, const char *worker, const char *stage, double progress,
			    const struct fg_job_bytes *bytes, int lease_seconds, struct fg_err *err);
	/* verdicts: a failed forge's verdicts[] printed, or NULL */
	int (*job_finish)(struct fg_store *s, int64_t id, const char *worker, enum fg_job_state state,
			  const char *error, const struct fg_verdict_row *refusal, const char *verdicts, int64_t artifact_id,
			  struct fg_err *err);
	int (*job_succeed)(struct fg_store *s, int64_t id, const char *worker, const struct fg_store_artifact *a,
			   int64_t *artifact_id, int *existed, struct fg_err *err);
	int (*job_cancel)(struct fg_store *s, int64_t id, struct fg_job *out, struct fg_err *err);
	int (*job_requeue)(struct fg_store *s, int64_t id, const char *worker, struct fg_err *err);
	int (*job_get)(struct fg_store *s, int64_t id, struct fg_job *out, struct fg_err *err);
	int (*job_list)(struct fg_store *s, int state, int64_t cursor, int limit, cJSON **out, int64_t *next,
			struct fg_err *err);
	int (*jobs_recover)(struct fg_store *s, const char *instance_id, int stale_seconds, int max_attempts,
			    int *requeued, int *failed, struct fg_err *err);
	int (*jobs_renew)(struct fg_store *s, const char *instance_id, int lease_seconds, int *renewed,
			  struct fg_err *err);
	int (*jobs_reap)(struct fg_store *s, int max_attempts, int *requeued, int *failed, struct fg_err *err);
	/* a read: running jobs past their lease (so an idle reaper writes nothing) */
	int (*jobs_expired)(struct fg_store *s, int64_t *n, struct fg_err *err);
	int (*artifact_put)(struct fg_store *s, const struct fg_store_artifact *a, int64_t *id, int *existed,
			    struct fg_err *err);
	/* raw: report and provenance as cJSON_Raw items of the stored text (fg_store_artifact_get_raw) */
	int (*artifact_get)(struct fg_store *s, int64_t id, int raw, cJSON **out, struct fg_err *err);
	/* path: the artifact's folder (cap bytes), runtime: its stored mtplx_runtime.json or NULL */
	int (*artifact_runtime)(struct fg_store *s, int64_t id, char *path, size_t cap, cJSON **runtime,
				struct fg_err *err);
	int (*artifact_by_fingerprint)(struct fg_store *s, const char *fingerprint, int64_t *id, struct fg_err *err);
	int (*artifact_resolve)(struct fg_store *s, const char *key, const char *digest, int64_t want_id, int64_t *id,
				enum fg_artifact_match *how, int *ambiguous, cJSON **candidates, struct fg_err *err);
	int (*artifact_list)(struct fg_store *s, const char *verdict, const char *family, int64_t cursor, int limit,
			     cJSON **out, int64_t *next, struct fg_err *err);
	/* row: the result's verdict (checked), result: the caller's (the runtime stamp), result_text: it printed */
	int (*verification_put)(struct fg_store *s, int64_t artifact_id, const char *rows_json,
				const struct fg_verdict_row *row, const cJSON *result, const char *result_text, int64_t *id,
				int *restamped, struct fg_err *err);
	/* runtime_reported: as the host named it (NULL: runtime); observed: printed ("{}" when none) */
	int (*fleet_report)(struct fg_store *s, const char *host, int64_t artifact_id, const char *runtime,
			    const char *runtime_reported, const char *observed, struct fg_err *err);
	int (*fleet_health)(struct fg_store *s, cJSON **out, struct fg_err *err);
	int (*counts)(struct fg_store *s, struct fg_store_counts *out, cJSON **by_verdict, struct fg_err *err);
	int (*check)(struct fg_store *s, struct fg_err *err);
	int (*probe_write)(struct fg_store *s, struct fg_err *err);
	/* idem.h: POST replays (writes), a job's key and a repeated fleet report (reads) */
	int (*idem_claim)(struct fg_store *s, const char *route, const char *key, const char *body_sha256,
			  int stale_seconds, enum fg_idem_state *state, struct fg_idem_answer *answer, struct fg_err *err);
	int (*idem_finish)(struct fg_store *s, const char *route, const char *key, int status, const char *location,
			   const char *body, struct fg_err *err);
	int (*idem_release)(struct fg_store *s, const char *route, const char *key, struct fg_err *err);
	int (*job_key_known)(struct fg_store *s, const char *key, const char *body_sha256, int *known,
			     struct fg_err *err);
	int (*fleet_report_same)(struct fg_store *s, const char *host, const char *runtime, const char *reported,
				 int64_t artifact_id, const char *observed_json, int *same, struct fg_err *err);
};

extern const struct fg_store_ops fg_sqlite_ops;
extern const struct fg_store_ops fg_pg_ops;

/* ---- the group-commit writer (writer.c) ---- */

/* One write: runs on the writer's connection ws, inside the batch's transaction. */
typedef int (*fg_write_fn)(struct fg_store *ws, void *arg, struct fg_err *err);

/*
 * The writer of (ops, target), started on first use and shared by every
 * store of the process opened on it (a reference each).  NULL with err set
 * when its connection does not open.
 */
struct fg_writer *fg_writer_get(const struct fg_store_ops *ops, const char *target, struct fg_err *err);
void fg_writer_put(struct fg_writer *w);

/*
 * Run fn(ws, arg, err) on s's writer and wait until the transaction that
 * holds it has committed (or fn failed, and only its savepoint was rolled
 * back).  fn may run twice: when the batch's commit fails, each write of it
 * is run again in a transaction of its own, so fn must give the same
 * result when run again (release what an earlier run put in arg).  Without
 * a writer (s is the writer's own connection) fn runs in its own
 * transaction on s.  The wait for another process's lock is s->busy_ms.
 */
int fg_store_write(struct fg_store *s, fg_write_fn fn, void *arg, struct fg_err *err);

/* fg_store_write_async's callback: rc, with err filled when rc is not 0. */
typedef void (*fg_write_done_fn)(void *ctx, int rc);

/*
 * fg_store_write without waiting: fn is queued to the writer and
 * done(ctx, rc) runs on the writer's thread once the transaction that holds
 * it has committed or fn failed, after which the writer touches nothing of
 * the caller's.  arg, err and ctx must live until then.  Without a writer,
 * fn runs at once (as fg_store_write) and done runs before this returns.
 * Returns 0 when done will run or has run, else an error (done never runs).
 */
int fg_store_write_async(struct fg_store *s, fg_write_fn fn, void *arg, struct fg_err *err, fg_write_done_fn done,
			 void *ctx);

/*
 * A connection of ops to target with the handle's defaults, opened (and
 * migrated) by ops->open; NULL with err set.  fg_store_free_conn closes
 * and frees one (NULL allowed).  store.c; the writer's connections are these.
 */
struct fg_store *fg_store_new_conn(const struct fg_store_ops *ops, const char *target, struct fg_err *err);
void fg_store_free_conn(struct fg_store *s);

/* The writer asks for a checkpoint (SQLite: the WAL holds frames frames). */
void fg_writer_want_checkpoint(struct fg_writer *w, int frames);

/*
 * The writer's own connection, for tests that must change a setting of the
 * connection writes run on (PRAGMA query_only, max_page_count).  Only while
 * no write is in flight.  NULL when s has no writer.
 */
struct fg_store *fg_store_writer_conn(struct fg_store *s);

/* ---- backend-neutral helpers (common.c) ---- */

/* text within max bytes; required: present and not empty. */
int fg_store_check_text(const char *text, size_t max, int required, const char *name, struct fg_err *err);

/*
 * The checks of fg_store_job_enqueue before anything is written: kind,
 * key, digest, params parse.  *params_json becomes "{}" when NULL.
 */
int fg_store_check_enqueue(const char *kind, const char **params_json, const char *asked_json, const char *idem_key,
			   const char *body_sha256, struct fg_err *err);

/*
 * The report's verdicts, checked against the verdict table: a known code a
 * report may carry (not a verification code), at the table's severity.
 */
int fg_store_check_verdicts(const cJSON *report, struct fg_err *err);

/*
 * provenance.files as forge writes it ({"name": "sha256hex", ...}):
 * add(ctx, name, sha, err) for each when add is non-NULL; with add NULL
 * only checks.
 */
typedef int (*fg_store_file_fn)(void *ctx, const char *file, const char *sha, struct fg_err *err);
int fg_store_each_file(const cJSON *provenance, fg_store_file_fn add, void *ctx, struct fg_err *err);

/* The checks of fg_store_artifact_put, then report, provenance and runtime document printed (cJSON_free all). */
int fg_store_prepare_artifact(const struct fg_artifact_in *a, char **report, char **provenance, char **runtime,
			      struct fg_err *err);

/*
 * The checks of fg_store_verification_put: the verdict row of result, its
 * printed text, and the rows as cJSON prints them (cJSON_free both): cJSON
 * reads numbers like "1." and "01" that stricter readers (SQLite's
 * json_extract, a client's) refuse, and the stored rows are served back.
 */
int fg_store_prepare_verification(int64_t artifact_id, const char *rows_json, const cJSON *result,
				  const struct fg_verdict_row **row, char **result_text, char **rows_text,
				  struct fg_err *err);

/* The checks of fg_store_fleet_report; observed printed into *text (NULL: "{}"; cJSON_free). */
int fg_store_prepare_report(const char *host, const char *runtime, const char *runtime_reported,
			    const cJSON *observed, char **text, struct fg_err *err);

/*
 * fg_store_artifact_resolve's decision, the same on both backends: the
 * backend reads the candidate rows in one snapshot (by digest, head
 * fingerprint, legacy fingerprint, and the id asked for) and hands each
 * to fg_store_resolver_row, then fg_store_resolver_decide picks (and frees
 * the resolver; fg_store_resolver_free when the backend fails before).
 */
struct fg_store_found {
	int64_t id;
	int by;                        /* 0 the id asked for, 1 digest, 2 head fingerprint, 3 legacy */
	char digest[FG_STORE_SHA_MAX + 1];
};

struct fg_store_resolver {
	struct fg_store_found by_id, by_digest, *fp;
	size_t n_fp, cap;
	cJSON *list;                   /* candidates for a 409 */
};

struct fg_store_resolve_row {
	int64_t id;
	int by;
	const char *digest, *head_fingerprint, *fingerprint, *source, *path, *created_at;
};

int fg_store_resolver_init(struct fg_store_resolver *r, struct fg_err *err);
int fg_store_resolver_row(struct fg_store_resolver *r, const struct fg_store_resolve_row *row, struct fg_err *err);
int fg_store_resolver_decide(struct fg_store_resolver *r, const char *key, const char *digest, int64_t want_id,
			     int64_t *id, enum fg_artifact_match *how, int *ambiguous, cJSON **candidates,
			     struct fg_err *err);
void fg_store_resolver_free(struct fg_store_resolver *r);

/* The verdict row of a finish: state final, artifact id not negative. */
int fg_store_check_finish(int64_t id, enum fg_job_state state, int64_t artifact_id, struct fg_err *err);

/* The instance part of a worker name "INSTANCE/N" (the whole name when it has no '/'), into buf. */
void fg_store_worker_instance(const char *worker, char *buf, size_t cap);

/*
 * The "rows" member of a stored verification body (text, len bytes) added
 * to o as "rows", JSON null when the body has none or does not parse (a
 * body stored before forged stored them canonical: one cJSON read, which
 * SQLite's stricter json_extract refused, failing the whole artifact);
 * FG_ENOMEM.
 */
int fg_store_add_rows_member(cJSON *o, const char *text, size_t len, struct fg_err *err);

/* Health document parts both backends build alike (common.c). */
/* mixed_head_conventions_in_fleet from the served counts [delta, absolute]. */
int fg_store_warnings_section(cJSON *doc, const int64_t artifacts[2], const int64_t reports[2],
			      struct fg_err *err);
/* probe_after_load's fixed keys; *counted, *left and *by_family are filled in by the caller. */
int fg_store_dist_section(cJSON *doc, cJSON **counted, cJSON **left, cJSON **by_family, struct fg_err *err);
/* Add n reports at probe v of family to by_family's bins; FG_ENOMEM. */
int fg_store_dist_add(cJSON *by_family, const char *family, double v, int64_t n, struct fg_err *err);

/* ---- fleet health v2's backend-neutral parts (fleet_v2.c) ---- */

#define FG_STORE_HEALTH_SCHEMA "forged.fleet_health.v2"
#define FG_STORE_HOSTS_MAX 500        /* reports listed under fleet health's "hosts" */
#define FG_STORE_REPORTED_MAX 128     /* a runtime's version string as a host reports it */

/*
 * probe_qnorm from the after-load probes of the served (artifact, runtime)
 * pairs: fg_store_probe_acc_add each row (artifact id, its family, the
 * probe) in artifact id order, then fg_store_probe_qnorm_section with the
 * number of fleet reports in all (for not_counted).  NULL from _new: out of
 * memory.
 */
struct fg_probe_acc;
struct fg_probe_acc *fg_store_probe_acc_new(void);
void fg_store_probe_acc_add(struct fg_probe_acc *acc, int64_t id, const char *family, double v);
int fg_store_probe_qnorm_section(cJSON *doc, struct fg_probe_acc *acc, int64_t total, struct fg_err *err);
void fg_store_probe_acc_free(struct fg_probe_acc *acc);

/* One report of fleet health's hosts[], as a backend read it (texts may be NULL: JSON null). */
struct fg_store_host_row {
	const char *host, *runtime, *runtime_reported, *family, *observed, *reported_at;
	int64_t artifact_id;
	int has_probe;
	double probe_after;
};

/* Append r to arr: {host, runtime, runtime_reported, artifact_id, family, observed, reported_at, probe_after, probe_bucket}. */
int fg_store_host_item(cJSON *arr, const struct fg_store_host_row *r, struct fg_err *err);

/* probe_after_load's "bands": each family of by_family, its band or null. */
int fg_store_dist_bands(cJSON *sec, const cJSON *by_family, struct fg_err *err);

/* ---- SQLite (sqlite/db.c) ---- */

/*
 * The statement for sql on this connection, prepared on first use and kept
 * until fg_store_close.  The statement comes back reset with its bindings
 * cleared; the caller binds, steps, and hands it back with fg_sql_put (which
 * resets it, ending any read it holds open).  A statement may be in use once
 * at a time: a caller must not fetch the same SQL again before putting it.
 * fg_sql_fail's code with SQLite's message when the SQL does not prepare,
 * FG_EINTERNAL when the cache is full.
 */
int fg_sql_get(struct fg_store *s, const char *sql, sqlite3_stmt **out, struct fg_err *err);

/* Reset st and clear its bindings (so large bound texts are freed).  NULL allowed. */
void fg_sql_put(sqlite3_stmt *st);

/*
 * The FG_E* code of a SQLite result code (primary or extended), which is
 * what the API and the CLI act on: FG_ENOMEM for SQLITE_NOMEM; FG_ENOSPC for
 * SQLITE_FULL (our disk is full: 507); FG_ESTATE for BUSY, LOCKED, IOERR,
 * CANTOPEN, READONLY, CORRUPT, NOTADB, PERM, PROTOCOL, NOLFS (our database
 * cannot be used now: 503, exit 3); FG_EINTERNAL for the rest (a bug of ours:
 * a client's input never reaches SQLite unchecked).
 */
int fg_sql_code(int rc);

/*
 * Record a SQLite failure of rc in err as "<what>: <sqlite3_errmsg>" and
 * return fg_sql_code(rc).
 */
int fg_sql_fail(struct fg_store *s, int rc, struct fg_err *err, const char *what);

/*
 * Transactions.  fg_sql_begin takes the write lock at once (BEGIN IMMEDIATE:
 * a read-then-write never meets SQLITE_BUSY halfway, and busy_timeout waits
 * for the lock); fg_sql_begin_read opens a deferred transaction so several
 * SELECTs see one snapshot.  fg_sql_commit commits (rolling back if the commit
 * fails); fg_sql_rollback rolls back when a transaction is open and never fails.
 * On the writer's connection inside a batch, fg_sql_begin, fg_sql_commit
 * and fg_sql_rollback do nothing: the writer holds a savepoint around each
 * write and rolls it back when the write fails.
 */
int fg_sql_begin(struct fg_store *s, struct fg_err *err);
int fg_sql_begin_read(struct fg_store *s, struct fg_err *err);
int fg_sql_commit(struct fg_store *s, struct fg_err *err);
void fg_sql_rollback(struct fg_store *s);

/* Run a statement that returns no rows (or whose rows are ignored) to completion. */
int fg_sql_exec(struct fg_store *s, sqlite3_stmt *st, struct fg_err *err, const char *what);

/*
 * Bind text (NULL binds SQL NULL).  The text is copied by SQLite
 * (SQLITE_TRANSIENT) so the caller's buffer may go away before the step.
 */
int fg_sql_bind_text(sqlite3_stmt *st, int i, const char *text);

/*
 * Copy column col of the current row into dst of cap bytes, truncated at a
 * UTF-8 character boundary; a NULL column gives "".
 */
void fg_sql_column_copy(sqlite3_stmt *st, int col, char *dst, size_t cap);

/* Copy text into dst of cap bytes, truncated at a UTF-8 character boundary (NULL gives ""). */
void fg_store_copy_text(const char *text, size_t len, char *dst, size_t cap);

/*
 * Parse stored JSON text of column col (NULL column: JSON null).  FG_ESTATE
 * naming what when the stored text is not JSON (a corrupted row), FG_ENOMEM.
 */
int fg_sql_column_json(sqlite3_stmt *st, int col, cJSON **out, struct fg_err *err, const char *what);

/* Clamp a page size to 1..FG_SQL_LIMIT_MAX. */
int fg_sql_clamp_limit(int limit);

/* Append the JSON of the current row of st to arr; 0 or FG_E*. */
typedef int (*fg_sql_item_fn)(cJSON *arr, sqlite3_stmt *st, struct fg_err *err);

/*
 * Step st, a bound keyset query whose column 0 is the row id, appending each
 * row with item; then *out is the array and *next the last id when the page
 * holds limit rows (0 otherwise).  Puts st back in every case.
 */
int fg_sql_page(struct fg_store *s, sqlite3_stmt *st, int limit, fg_sql_item_fn item, cJSON **out,
	       int64_t *next, const char *what, struct fg_err *err);

/*
 * The probe q-norm buckets, in order, as the schema's probe_bucket column
 * names them: [0, 1.25), [1.25, 1.74), [1.74, 1.83] (the healthy band),
 * (1.83, 2.4], (2.4, inf).  The edges are convention.h's FG_QK_ABSOLUTE_MIN,
 * FG_QK_BAND_MIN, FG_QK_BAND_MAX and FG_QK_DOUBLE_ABOVE: both schemas' CASE
 * is built from them (FG_SQL_STR) and the health document's ranges use
 * them (common.c); tests/unit/test_store.c checks the two against each other.
 */
#define FG_SQL_PROBE_BUCKETS 5
#define FG_SQL_PROBE_BAND 2
extern const char *const fg_sql_probe_buckets[FG_SQL_PROBE_BUCKETS];

/* The numeric range of each bucket, for the health document (common.c). */
struct fg_sql_probe_range {
	double lo, hi;      /* hi < 0: unbounded */
};
extern const struct fg_sql_probe_range fg_sql_probe_ranges[FG_SQL_PROBE_BUCKETS];

/* A numeric macro as SQL text: FG_SQL_STR(FG_QK_BAND_MIN) is "1.74". */
#define FG_SQL_STR_(x) #x
#define FG_SQL_STR(x) FG_SQL_STR_(x)

/* The artifact figures the artifact_stats triggers keep. */
struct fg_sql_stats {
	int64_t artifacts;
	int64_t unhealthy;
};

/*
 * Fold one artifact_stats row (dim, key, n) into out / by_verdict / by_family;
 * FG_ENOMEM.  The "probe" rows are skipped: fleet health bins the after-load
 * probes of artifact_probes itself (fleet_v2.c), and nothing reads them.
 */
int fg_store_stats_row(struct fg_sql_stats *out, cJSON *by_verdict, cJSON *by_family, const char *dim,
		       const char *key, int64_t n, struct fg_err *err);

/*
 * Read artifact_stats: the totals into *out, and {code: n} / {family: n}
 * into by_verdict / by_family when they are non-NULL (counts of zero are
 * left out, as a GROUP BY would).  Call inside a read transaction when
 * other queries must agree with these figures.
 */
int fg_sql_read_stats(struct fg_store *s, struct fg_sql_stats *out, cJSON *by_verdict, cJSON *by_family,
		     struct fg_err *err);

/*
 * Add the fleet health sections "verdict_matrix" and "probe_after_load"
 * (sqlite/fleet_dist.c) to doc; call inside fleet health's read transaction.
 */
int fg_sql_fleet_distributions(struct fg_store *s, cJSON *doc, struct fg_err *err);

/* The SQLite backend's functions, for the ops table (sqlite/db.c). */
int fg_sqlite_job_enqueue(struct fg_store *s, const char *kind, const char *params_json, const char *asked_json,
			  const char *idem_key, const char *body_sha256, int queue_cap, struct fg_job *out, int *replayed,
			  struct fg_err *err);
int fg_sqlite_job_claim(struct fg_store *s, const char *worker, int lease_seconds, struct fg_job *out,
			struct fg_err *err);
int fg_sqlite_job_progress(struct fg_store *s, int64_t id, const char *worker, const char *stage, double progress,
			   const struct fg_job_bytes *bytes, int lease_seconds, struct fg_err *err);
int fg_sqlite_job_finish(struct fg_store *s, int64_t id, const char *worker, enum fg_job_state state,
			 const char *error, const struct fg_verdict_row *refusal, const char *verdicts, int64_t artifact_id,
			 struct fg_err *err);
int fg_sqlite_job_succeed(struct fg_store *s, int64_t id, const char *worker, const struct fg_store_artifact *a,
			  int64_t *artifact_id, int *existed, struct fg_err *err);
int fg_sqlite_job_cancel(struct fg_store *s, int64_t id, struct fg_job *out, struct fg_err *err);
int fg_sqlite_job_requeue(struct fg_store *s, int64_t id, const char *worker, struct fg_err *err);
int fg_sqlite_job_get(struct fg_store *s, int64_t id, struct fg_job *out, struct fg_err *err);
int fg_sqlite_job_list(struct fg_store *s, int state, int64_t cursor, int limit, cJSON **out, int64_t *next,
		       struct fg_err *err);
int fg_sqlite_jobs_recover(struct fg_store *s, const char *instance_id, int stale_seconds, int max_attempts,
			   int *requeued, int *failed, struct fg_err *err);
int fg_sqlite_jobs_renew(struct fg_store *s, const char *instance_id, int lease_seconds, int *renewed,
			 struct fg_err *err);
int fg_sqlite_jobs_reap(struct fg_store *s, int max_attempts, int *requeued, int *failed, struct fg_err *err);
int fg_sqlite_jobs_expired(struct fg_store *s, int64_t *n, struct fg_err *err);
int fg_sqlite_artifact_put(struct fg_store *s, const struct fg_store_artifact *a, int64_t *id, int *existed,
			   struct fg_err *err);
/*
 * Store a's rows for job (0: none) in the open transaction; *id the new
 * artifact, or the one with a's digest (*existed = 1, nothing added).
 */
int fg_sqlite_artifact_insert(struct fg_store *s, const struct fg_store_artifact *a, int64_t job, int64_t *id,
			      int *existed, struct fg_err *err);
int fg_sqlite_artifact_get(struct fg_store *s, int64_t id, int raw, cJSON **out, struct fg_err *err);
int fg_sqlite_artifact_runtime(struct fg_store *s, int64_t id, char *path, size_t cap, cJSON **runtime,
			       struct fg_err *err);
int fg_sqlite_artifact_by_fingerprint(struct fg_store *s, const char *fingerprint, int64_t *id, struct fg_err *err);
int fg_sqlite_artifact_resolve(struct fg_store *s, const char *key, const char *digest, int64_t want_id, int64_t *id,
			       enum fg_artifact_match *how, int *ambiguous, cJSON **candidates, struct fg_err *err);
int fg_sqlite_artifact_list(struct fg_store *s, const char *verdict, const char *family, int64_t cursor, int limit,
			    cJSON **out, int64_t *next, struct fg_err *err);
int fg_sqlite_verification_put(struct fg_store *s, int64_t artifact_id, const char *rows_json,
			       const struct fg_verdict_row *row, const cJSON *result, const char *result_text, int64_t *id,
			       int *restamped, struct fg_err *err);
int fg_sqlite_fleet_report(struct fg_store *s, const char *host, int64_t artifact_id, const char *runtime,
			   const char *runtime_reported, const char *observed, struct fg_err *err);
int fg_sqlite_fleet_health(struct fg_store *s, cJSON **out, struct fg_err *err);
int fg_sqlite_idem_claim(struct fg_store *s, const char *route, const char *key, const char *body_sha256,
			 int stale_seconds, enum fg_idem_state *state, struct fg_idem_answer *answer, struct fg_err *err);
int fg_sqlite_idem_finish(struct fg_store *s, const char *route, const char *key, int status, const char *location,
			  const char *body, struct fg_err *err);
int fg_sqlite_idem_release(struct fg_store *s, const char *route, const char *key, struct fg_err *err);
int fg_sqlite_job_key_known(struct fg_store *s, const char *key, const char *body_sha256, int *known,
			    struct fg_err *err);
int fg_sqlite_fleet_report_same(struct fg_store *s, const char *host, const char *runtime, const char *reported,
				int64_t artifact_id, const char *observed_json, int *same, struct fg_err *err);

/* The route and key of an idempotent request: present, within their byte limits (idem.c's checks). */
#define FG_STORE_ROUTE_MAX 300
int fg_store_check_idem(const char *route, const char *key, struct fg_err *err);

#endif
