/*
 * store.h: forged's store: one connection per thread, migrations, the
 * durable job queue with leases, artifacts with their fingerprints and
 * verdicts, verifications, and fleet reports, on one of two backends:
 *
 *   sqlite:///PATH (or a plain PATH)   the embedded default, one host
 *   postgres://USER@HOST/DB            a farm: many instances on one database
 *                                      (libpq's URL; postgresql:// too)
 *
 * SQLite runs in WAL mode with synchronous=FULL (nothing a client was told
 * is stored may be lost by a crash), foreign_keys=ON; migrations run by
 * PRAGMA user_version, each in one BEGIN IMMEDIATE transaction.  PostgreSQL
 * migrates through a schema_migrations table, each migration in one
 * transaction under an advisory lock, so instances starting together
 * migrate once; connection parameters, passwords (PGPASSFILE, ~/.pgpass),
 * service files and sslmode follow libpq's own conventions.  On both, a
 * database newer than this binary is refused.  Writes of one process go
 * through one writer thread per database (group commit: the writes queued
 * meanwhile share one transaction and one flush), and a write returns only
 * once the commit that holds it is durable.  Every function
 * returns 0 or a negative FG_E* code with err set: FG_ESTATE when the
 * database cannot be used (busy, locked, read-only, unreadable, corrupt),
 * FG_ENOSPC when its disk is full, FG_EINTERNAL for a bug, FG_EINPUT for bad
 * arguments, FG_ENOTFOUND / FG_ECONFLICT below.  A failure of the store is
 * never FG_EINPUT: the client's input was fine.  The store
 * knows nothing of HTTP; JSON arguments and results are text or cJSON trees.
 * Statements are prepared once per connection and kept.
 */
#ifndef FG_STORE_H
#define FG_STORE_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "forge/core/error.h"
#include "forge/model/verdicts.h"

/* The SQLite schema version (PRAGMA user_version). */
#define FG_STORE_SCHEMA_VERSION 8
/* The PostgreSQL schema version (the highest row of schema_migrations). */
#define FG_STORE_PG_SCHEMA_VERSION 4

/* The lease a claim takes unless fg_store_set_lease says otherwise (seconds). */
#define FG_STORE_LEASE_DEFAULT 60

/* The largest page a listing returns (the smallest is 1); docs/openapi.json's Limit maximum. */
#define FG_STORE_LIST_LIMIT_MAX 500

struct fg_store;
struct fg_artifact_in;

/*
 * Open the store named by target (above: a path, sqlite:///PATH or a
 * postgres:// URL), creating a SQLite file, migrating the schema, and
 * attaching to (or starting) the process's writer for it.  FG_EINPUT for an
 * empty or malformed target, FG_ESTATE when the database cannot be used.
 */
int fg_store_open(struct fg_store **out, const char *target, struct fg_err *err);
void fg_store_close(struct fg_store *s);

/* The schema version of the open database (FG_STORE_SCHEMA_VERSION or FG_STORE_PG_SCHEMA_VERSION). */
int fg_store_user_version(struct fg_store *s);

/* "sqlite" or "postgres". */
const char *fg_store_backend(const struct fg_store *s);

/* 1 when target names a PostgreSQL store (postgres:// or postgresql://). */
int fg_store_is_postgres(const char *target);

/* The database file a SQLite target names (a path, or the PATH of sqlite://PATH); NULL for PostgreSQL. */
const char *fg_store_sqlite_path(const char *target);

/*
 * target as a log may show it: a postgres URL without its password
 * (user:secret@ becomes user@), a sqlite:// prefix dropped.
 */
void fg_store_describe(const char *target, char *buf, size_t cap);

/* The lease (seconds, >= 2) this handle's claims, progress reports and renewals ask for. */
void fg_store_set_lease(struct fg_store *s, int seconds);

/* ---- jobs ---- */

enum fg_job_state {
	FG_JOB_QUEUED,
	FG_JOB_RUNNING,
	FG_JOB_SUCCEEDED,
	FG_JOB_FAILED,
	FG_JOB_CANCELLED,
};

/* Job states, for arrays indexed by enum fg_job_state (fg_store_counts.jobs). */
#define FG_JOB_STATES 5
_Static_assert(FG_JOB_CANCELLED + 1 == FG_JOB_STATES, "FG_JOB_STATES counts enum fg_job_state");

const char *fg_job_state_name(enum fg_job_state s);
int fg_job_state_parse(const char *name, enum fg_job_state *out);

/*
 * The longest job stage stored; a longer one is refused (FG_EINPUT), never
 * cut.  Sized from what workers write: a forge stage word, or "fetch
 * DONE/TOTAL" with two 20-digit byte counts (47 bytes).
 */
#define FG_JOB_STAGE_MAX 63

struct fg_job {
	int64_t id;
	char kind[16];                 /* "forge" */
	enum fg_job_state state;
	char stage[FG_JOB_STAGE_MAX + 1];
	double progress;               /* 0..1 */
	char error[512];               /* empty when none */
	int64_t artifact_id;           /* 0 when none */
	int attempts;
	int cancel_requested;
	char *params;                  /* the job's parameters (JSON text), owned */
	char created_at[32];           /* RFC 3339 UTC */
	char updated_at[32];
	const struct fg_verdict_row *refusal; /* the verdict that refused it (error is the
						 detail), or NULL */
	char *verdicts;                /* a failed forge's verdicts[] (JSON text), owned, or NULL */
	char *asked;                   /* the request as the client spelled it (JSON text), owned, or NULL */
	/* Within the running stage: bytes moved of the stage's total, seconds left (-1: unknown). */
	int has_bytes;                 /* 0: the stage reported no byte counts */
	int64_t bytes_done, bytes_total;
	double eta_s;
};

/* A running stage's byte counts as a worker reports them (fg_store_job_progress_bytes). */
struct fg_job_bytes {
	int64_t done, total;
	double eta_s;                  /* < 0: unknown */
};

/* Free job->params, verdicts and asked (the struct itself is the caller's). NULL allowed. */
void fg_job_release(struct fg_job *job);

/*
 * The job object of docs/interfaces.md section 3: id, kind, state, stage, progress,
 * bytes_done, bytes_total, eta_s (a running job's stage's byte counts and
 * seconds left, else null), error, refusal, artifact_id, created_at, updated_at, and since issue 13
 * verdicts (a failed forge's verdicts[], else []), artifact_url
 * ("/v1/artifacts/ID" or null) and request (what was asked: source as named
 * and source_resolved, backbone and backbone_resolved, target and quant as
 * resolved (defaults filled in), out as resolved or null for the default
 * folder).  refusal is {code, severity, detail} (severity from the verdict
 * table) when a verdict refused the job, else null; error is then
 * "code: detail", for people.
 */
cJSON *fg_job_json(const struct fg_job *job);

/*
 * Enqueue a job.  asked_json (may be NULL) is the request as the client
 * spelled it, kept for the job object's request echo.  With an idempotency
 * key: the same key with the same body_sha256 returns the first job and
 * sets *replayed; the same key with another body returns FG_ECONFLICT.
 * queue_cap > 0 refuses (FG_EBUSY) when that many jobs are queued already.
 */
int fg_store_job_enqueue(struct fg_store *s, const char *kind, const char *params_json, const char *asked_json,
			 const char *idem_key, const char *body_sha256, int queue_cap,
			 struct fg_job *out, int *replayed, struct fg_err *err);

/*
 * Claim the oldest queued job for worker ("INSTANCE/N": the instance id
 * becomes the job's owner) with one statement: SQLite, an UPDATE ...
 * RETURNING inside BEGIN IMMEDIATE; PostgreSQL, SELECT ... FOR UPDATE SKIP
 * LOCKED inside the UPDATE, so instances never claim one job twice and
 * never wait for each other's claims.  The claim carries a lease of the
 * handle's lease seconds, renewed by progress reports and
 * fg_store_jobs_renew.  Returns 1 and fills out when a job was claimed, 0
 * when the queue is empty.
 */
int fg_store_job_claim(struct fg_store *s, const char *worker, struct fg_job *out, struct fg_err *err);

/*
 * The calls below about a running job take the worker that claimed it:
 * when another worker holds the job now (its lease expired and another
 * instance took it over), they change nothing and return FG_ECONFLICT.
 * worker NULL: whoever holds it (tools and tests).
 */

/*
 * Heartbeat and progress of a running job (stage may be NULL: unchanged);
 * renews the lease and clears the stage's byte counts.
 */
int fg_store_job_progress(struct fg_store *s, int64_t id, const char *worker, const char *stage, double progress,
			  struct fg_err *err);

/*
 * The same with the stage's bytes done of total and the seconds left
 * (eta_s < 0: unknown, stored as NULL).  FG_EINPUT when done is negative or
 * past total.
 */
int fg_store_job_progress_bytes(struct fg_store *s, int64_t id, const char *worker, const char *stage,
				double progress, int64_t bytes_done, int64_t bytes_total, double eta_s,
				struct fg_err *err);

/* Finish a running job: state SUCCEEDED (artifact_id set), FAILED (error) or CANCELLED. */
int fg_store_job_finish(struct fg_store *s, int64_t id, const char *worker, enum fg_job_state state,
			const char *error, int64_t artifact_id, struct fg_err *err);

/*
 * Store the artifact a running job made and finish the job as succeeded
 * with it, in one transaction: a crash leaves the job running with no
 * artifact, or succeeded with exactly one.  Idempotent per job: a job whose
 * artifact is stored already (artifacts.job_id is unique) gets that one
 * back in *artifact_id and nothing new is written.  One artifact per digest
 * (fg_store_artifact_put): when the same bytes were stored before (another
 * job forged them), the job succeeds with that artifact, *existed (may be
 * NULL) is 1 and no row is added.
 */
int fg_store_job_succeed(struct fg_store *s, int64_t id, const char *worker, const struct fg_artifact_in *a,
			 int64_t *artifact_id, int *existed, struct fg_err *err);

/*
 * Finish a running job as FAILED because of cause: its message is the
 * error and, when cause is a refusal (fg_err_refusal), its verdict code is
 * stored as the job's refusal.  verdicts (a JSON array, may be NULL: none)
 * are the forge's verdicts[] as data.  FG_EINPUT when cause names a code
 * outside the verdict table or verdicts is not an array.
 */
int fg_store_job_fail(struct fg_store *s, int64_t id, const char *worker, const struct fg_err *cause,
		      const cJSON *verdicts, struct fg_err *err);

/*
 * Cancel: a queued job becomes cancelled at once; a running job gets
 * cancel_requested (its worker stops at the next stage); finished jobs are
 * left alone.  FG_ENOTFOUND for an unknown id.  *out (may be NULL) gets the job after.
 */
int fg_store_job_cancel(struct fg_store *s, int64_t id, struct fg_job *out, struct fg_err *err);

/* Put a running job back in the queue (graceful drain), attempts unchanged. */
int fg_store_job_requeue(struct fg_store *s, int64_t id, const char *worker, struct fg_err *err);

int fg_store_job_get(struct fg_store *s, int64_t id, struct fg_job *out, struct fg_err *err);

/*
 * List jobs (optionally of one state; state < 0 means any) with id > cursor in
 * id order, at most limit (1..FG_STORE_LIST_LIMIT_MAX).  Returns a cJSON array of job objects in
 * *out and the cursor of the next page in *next (0 when there is none).
 */
int fg_store_job_list(struct fg_store *s, int state, int64_t cursor, int limit, cJSON **out,
		      int64_t *next, struct fg_err *err);

/*
 * At start-up: jobs left running by another instance (worker not starting
 * with instance_id) or with a heartbeat older than stale_seconds go back to
 * queued with attempts + 1, or to failed ("abandoned after N attempts") when
 * attempts reaches max_attempts.  On a shared store (PostgreSQL) other
 * instances are alive: only jobs whose lease expired (or whose heartbeat is
 * stale) are taken back.
 */
int fg_store_jobs_recover(struct fg_store *s, const char *instance_id, int stale_seconds,
			  int max_attempts, int *requeued, int *failed, struct fg_err *err);

/*
 * Heartbeat: extend by the handle's lease seconds the lease of every job
 * running under instance_id.  *renewed (may be NULL) counts them.
 */
int fg_store_jobs_renew(struct fg_store *s, const char *instance_id, int *renewed, struct fg_err *err);

/*
 * Take over the running jobs whose lease expired, whoever owned them: back
 * to queued with attempts + 1, or failed ("abandoned after N attempts") at
 * max_attempts; a job whose cancel was requested is cancelled.  Any
 * instance may call it at any time (workers do, every few seconds).
 */
int fg_store_jobs_reap(struct fg_store *s, int max_attempts, int *requeued, int *failed, struct fg_err *err);

/* ---- artifacts ---- */

struct fg_artifact_in {
	const char *source;            /* as the client named it */
	const char *path;              /* artifact folder for forge jobs, else NULL */
	const char *family;
	const char *fingerprint;       /* the legacy framing; NULL for a plain inspection */
	const char *head_fingerprint;  /* MTPLX's framing; NULL for a plain inspection */
	const char *digest;            /* the artifact digest (forge/model/mtplx.h), or NULL */
	const cJSON *report;           /* the forged.inspect.v1 report (copied) */
	const cJSON *provenance;       /* forged.json for forge jobs, else NULL */
	const cJSON *mtplx_runtime;    /* mtplx_runtime.json written or read, else NULL (copied) */
	int ok;
	double probe_mean;             /* trunk probe q-norm mean, NAN when none */
	const char *head_convention;   /* convention of the "mtp" set, or NULL */
};

/*
 * Store an artifact: its report, the verdict codes of report.verdicts (one
 * row each: code, severity), fingerprints (file SHA-256s of provenance.files).
 * When an artifact with the same digest exists, nothing new is stored: *id
 * is the existing artifact's and *existed (may be NULL) 1 (a head
 * fingerprint or runtime document it lacked is filled in).
 */
int fg_store_artifact_put(struct fg_store *s, const struct fg_artifact_in *a, int64_t *id, int *existed,
			  struct fg_err *err);

/*
 * The artifact document: {"id", "source", "path", "family", "fingerprint",
 * "digest", "head_fingerprint", "ok", "created_at", "report", "provenance",
 * "verdicts": [...], "verifications": [...], "fingerprints", "mtplx_runtime",
 * "fleet": [{host, runtime, runtime_reported, observed, reported_at}]}; each
 * verification carries the "rows" it was posted with (null when the posted
 * body had none).
 */
int fg_store_artifact_get(struct fg_store *s, int64_t id, cJSON **out, struct fg_err *err);

/*
 * The same document for printing as it is: "report" and "provenance" are
 * cJSON_Raw items holding the stored text (NULL in the database: JSON
 * null), so a GET answers them without parsing and printing them again;
 * a caller that reads inside them takes fg_store_artifact_get instead.
 */
int fg_store_artifact_get_raw(struct fg_store *s, int64_t id, cJSON **out, struct fg_err *err);

/*
 * What a verification rewrites on disk, and nothing else of the artifact:
 * its folder (path, cap bytes; "" when the row has none) and its stored
 * mtplx_runtime.json (*runtime, the caller's to free; NULL when it has
 * none).  FG_ENOTFOUND for an unknown id.
 */
int fg_store_artifact_runtime(struct fg_store *s, int64_t id, char *path, size_t cap, cJSON **runtime,
			      struct fg_err *err);

/* The id of the artifact with this fingerprint (any framing, newest), FG_ENOTFOUND when none. */
int fg_store_artifact_by_fingerprint(struct fg_store *s, const char *fingerprint, int64_t *id,
				     struct fg_err *err);

/* What fg_store_artifact_resolve matched. */
enum fg_artifact_match {
	FG_MATCH_ID,                 /* the id */
	FG_MATCH_DIGEST,             /* the artifact digest */
	FG_MATCH_HEAD_FINGERPRINT,   /* the head fingerprint, MTPLX's framing */
	FG_MATCH_LEGACY_FINGERPRINT, /* the head fingerprint, forged's framing before issue 13 */
};

const char *fg_artifact_match_name(enum fg_artifact_match m);

/*
 * The artifact a fleet report names.  key is an artifact digest, a head
 * fingerprint in MTPLX's framing ("sha256:HEX") or in the legacy one (bare
 * hex), or NULL when want_id names it; digest (may be NULL) and want_id
 * (0: none) narrow a head fingerprint several artifacts share.  Returns 0
 * with *id and *how; FG_ENOTFOUND when nothing matches; FG_ECONFLICT when
 * several artifacts share the fingerprint and nothing narrows it to one
 * (*ambiguous = 1), or when what the report names contradicts itself (an id
 * or digest that is not one of the fingerprint's artifacts: *ambiguous = 0);
 * on a conflict *candidates (may be NULL) is an array of {artifact_id,
 * digest, head_fingerprint, fingerprint, source, path, created_at}, the
 * caller's to free.
 */
int fg_store_artifact_resolve(struct fg_store *s, const char *key, const char *digest, int64_t want_id,
			      int64_t *id, enum fg_artifact_match *how, int *ambiguous, cJSON **candidates,
			      struct fg_err *err);

/*
 * List artifacts with id < cursor (0: from the newest), newest first, filtered by
 * a verdict code (static or verification) and/or family (NULL: any), at most
 * limit.  Items: {"id", "source", "family", "fingerprint", "digest",
 * "head_fingerprint", "ok", "verdicts": [codes], "created_at"}.
 */
int fg_store_artifact_list(struct fg_store *s, const char *verdict, const char *family, int64_t cursor,
			   int limit, cJSON **out, int64_t *next, struct fg_err *err);

/*
 * Store verification rows (JSON text, kept as cJSON prints it, so that
 * every reader reads it back) and their result (cJSON, with "verdict").
 * The artifact's stored mtplx_runtime.json, when it is one
 * forged wrote, is restamped with the result in the same transaction
 * (fg_mtplx_runtime_stamp).  Each output may be NULL: *id the new
 * verification's id; *restamped 1 when the runtime document took the
 * result; *result_text the result as stored, compact (cJSON_free), so a
 * caller that answers with it need not print it again.
 */
int fg_store_verification_put(struct fg_store *s, int64_t artifact_id, const char *rows_json,
			      const cJSON *result, int64_t *id, int *restamped, char **result_text,
			      struct fg_err *err);

/*
 * fg_store_verification_put without waiting for the commit (the API, so
 * that a handler thread serves other connections meanwhile): the checks
 * run now (an error returned, done never runs), then the write is queued
 * and done(ctx) runs on the writer's thread once it has committed or
 * failed (without a writer: at once, before this returns).  v is the caller's and holds the outcome then: rc (0, or an
 * error with err), id, restamped and result_text as above.  v and result
 * must live until done has run; fg_store_verification_put_release frees
 * v's texts afterwards.
 */
struct fg_verification_put {
	int rc;
	struct fg_err err;
	int64_t id;
	int restamped;
	char *result_text;                 /* the result as stored, compact (cJSON_free or _release) */
	/* the store's own */
	int64_t artifact;
	const cJSON *result;
	const struct fg_verdict_row *row;
	char *rows_text;
	void (*done)(void *ctx);
	void *done_ctx;
};
int fg_store_verification_put_async(struct fg_store *s, struct fg_verification_put *v, int64_t artifact_id,
				    const char *rows_json, const cJSON *result, void (*done)(void *ctx), void *ctx,
				    struct fg_err *err);
void fg_store_verification_put_release(struct fg_verification_put *v);

/* ---- fleet ---- */

/*
 * A serving host says it runs artifact_id under runtime (a row id of the
 * runtime table), which it named runtime_reported (its version string; NULL:
 * the row id itself); observed is stored as given.
 */
int fg_store_fleet_report(struct fg_store *s, const char *host, int64_t artifact_id, const char *runtime,
			  const char *runtime_reported, const cJSON *observed, struct fg_err *err);

/*
 * Fleet health, schema "forged.fleet_health.v2" (the probe meanings
 * changed in v2; docs/interfaces.md): {"schema",
 * "artifacts": {"total", "by_verdict": {code: n}, "by_family": {family: n}},
 * "unhealthy": [{"artifact_id", "source", "family", "fingerprint", "digest",
 *   "head_fingerprint", "verdicts": [...], "hosts": [{"host", "runtime",
 *   "runtime_reported", "observed", "reported_at"}]}],
 * "unhealthy_total",
 * "probe_qnorm": the after-load trunk probe of each served (artifact,
 *   runtime) against its family's band (fleet.c), "outside_band" counting
 *   the served artifacts of banded families outside their healthy band,
 * "warnings": [{"code": "mixed_head_conventions_in_fleet", "severity": "warning", "detail": ...}]
 * (code and severity from the verdict table),
 * "verdict_matrix": [{"family", "code", "severity", "count"}],
 * "probe_after_load": {"lo", "bin_width", "bins", "healthy_band", "double_shift_above", "reports",
 * "not_counted", "bands", "by_family": {family: [count per bin]}}} (the last two: store/fleet_dist.c),
 * "hosts": [{"host", "runtime", "runtime_reported", "artifact_id", "family", "observed",
 *   "reported_at", "probe_after", "probe_bucket"}] (every report, at most 500), "hosts_total"}.
 * An artifact is unhealthy when it has an error-severity verdict or its latest
 * verification verdict is mtp_acceptance_collapsed.  Only the latest report
 * per (host, runtime) counts.
 */
int fg_store_fleet_health(struct fg_store *s, cJSON **out, struct fg_err *err);

/* ---- metrics ---- */

struct fg_store_counts {
	int64_t jobs[FG_JOB_STATES];   /* by enum fg_job_state */
	int64_t artifacts;
	int64_t artifacts_unhealthy;
};

int fg_store_counts(struct fg_store *s, struct fg_store_counts *out, cJSON **by_verdict, struct fg_err *err);

/* PRAGMA integrity_check == "ok" (tests, readiness). */
int fg_store_check(struct fg_store *s, struct fg_err *err);

/*
 * Readiness: commit a one-row write (an upsert of write_probe's only row),
 * waiting at most half a second for the write lock.  0 when the database
 * takes writes; else FG_ESTATE (locked, read-only, unreadable), FG_ENOSPC
 * (its disk is full) or FG_ENOMEM.  Costs one small commit (one fsync).
 */
int fg_store_probe_write(struct fg_store *s, struct fg_err *err);

/* ---- notifications (PostgreSQL LISTEN/NOTIFY) ---- */

enum fg_store_event {
	FG_STORE_EV_JOB,      /* a job was enqueued or requeued somewhere */
	FG_STORE_EV_DATA,     /* artifacts, verifications or fleet reports changed somewhere */
};

struct fg_store_listener;

/*
 * Listen for what other instances write: a thread with its own connection
 * calls on_event (from that thread) for each notification, reconnecting
 * when the connection drops (and then calling on_event with both events,
 * since notifications may have been missed).  SQLite has no such channel:
 * *out is NULL and 0 is returned (one process writes, and it knows).
 */
int fg_store_listen(struct fg_store_listener **out, const char *target,
		    void (*on_event)(void *ctx, enum fg_store_event ev), void *ctx, struct fg_err *err);
void fg_store_listener_stop(struct fg_store_listener *l);

#endif
