/*
 * db.c: the SQLite backend's connection: opening a database file, the
 * pragmas that make it durable and concurrent (WAL, synchronous=FULL, a
 * busy handler, foreign keys), schema migrations by PRAGMA user_version, the
 * per-connection cache of prepared statements, the transaction and error
 * helpers the other SQLite files share, the integrity check, the counts
 * /metrics reads, and the backend table (fg_sqlite_ops).
 *
 * Checkpoints are off the commit path: every connection runs with
 * wal_autocheckpoint off, the writer's connection counts the WAL's frames
 * after each commit (sqlite3_wal_hook) and asks the writer's checkpoint
 * thread for a PASSIVE checkpoint once the WAL holds CHECKPOINT_FRAMES
 * frames (16 MB: a page written by many commits is copied once), or a
 * second after the last one (writer.c).
 *
 * Migrations are a table of SQL texts: entry i brings a database from
 * version i to i + 1, inside one BEGIN IMMEDIATE transaction that also bumps
 * user_version, so a crash or a second process opening the same file at the
 * same moment never sees half a schema.  A released migration is never
 * edited; a schema change is a new entry and a new FG_STORE_SCHEMA_VERSION.
 */
#include "store/internal.h"

#include "forge/core/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BUSY_TIMEOUT_MS 5000
#define WAL_RETRY_MS 10
#define CHECKPOINT_FRAMES 4000  /* about 16 MB of WAL pages */

/*
 * Version 1.  Notes on choices that are not obvious from the columns:
 * - artifacts holds the small, often-read fields; the report and the
 *   provenance (kilobytes each) live in artifact_docs, so listings and joins
 *   over artifacts read compact pages.
 * - artifacts.unhealthy is derived (an error-severity static verdict, or a
 *   latest verification verdict of mtp_acceptance_collapsed) and refreshed
 *   by artifacts.c in the same transaction that changes the verdicts; fleet
 *   health lists unhealthy artifacts through its partial index instead of
 *   re-deriving the rule over every verdict.
 * - verdicts keeps one row per (artifact, code): a report may raise a code
 *   for two tensor sets, but listings and counts are per artifact.
 * - artifact_stats holds the counts fleet health and /metrics show (all
 *   artifacts, unhealthy ones, by family, by verdict code, by probe bucket),
 *   kept by triggers in the same transaction as the rows they count.  A
 *   GROUP BY over 100,000 artifacts and their verdicts costs tens of
 *   milliseconds per health request; the triggers cost a few row updates
 *   per write.  tests/unit/test_store.c checks them against the GROUP BYs.
 * - probe_bucket names the q-norm bucket of probe_mean (the bounds of
 *   fg_sql_probe_buckets); a virtual column, so the triggers share one CASE.
 *   Its numbers come from convention.h, stringized into exactly the text
 *   version 1 was released with (test_store.c checks the stored schema).
 * - CHECKs over more than two values are written as OR chains: SQLite
 *   codes "x IN (a, b, c)" in a CHECK by building a temporary table on every
 *   row written, which more than doubled the cost of storing an artifact.
 * - timestamps are RFC 3339 UTC text with milliseconds (FG_SQL_NOW), which
 *   order correctly as text.
 */
static const char schema_v1[] =
	"CREATE TABLE artifacts ("
	" id INTEGER PRIMARY KEY,"
	" source TEXT NOT NULL,"
	" path TEXT,"
	" family TEXT NOT NULL,"
	" fingerprint TEXT,"
	" ok INTEGER NOT NULL CHECK (ok IN (0, 1)),"
	" probe_mean REAL,"
	" probe_bucket TEXT GENERATED ALWAYS AS (CASE WHEN probe_mean IS NULL THEN NULL"
	"  WHEN probe_mean < " FG_SQL_STR(FG_QK_ABSOLUTE_MIN) " THEN 'below'"
	" WHEN probe_mean < " FG_SQL_STR(FG_QK_BAND_MIN) " THEN 'low'"
	"  WHEN probe_mean <= " FG_SQL_STR(FG_QK_BAND_MAX) " THEN 'band'"
	" WHEN probe_mean <= " FG_SQL_STR(FG_QK_DOUBLE_ABOVE) " THEN 'high' ELSE 'above' END) VIRTUAL,"
	" head_convention TEXT,"
	" unhealthy INTEGER NOT NULL DEFAULT 0,"
	" created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))"
	");"
	"CREATE INDEX artifacts_fingerprint ON artifacts(fingerprint) WHERE fingerprint IS NOT NULL;"
	"CREATE INDEX artifacts_family ON artifacts(family);"
	"CREATE INDEX artifacts_unhealthy ON artifacts(unhealthy) WHERE unhealthy = 1;"
	"CREATE TABLE artifact_docs ("
	" artifact_id INTEGER PRIMARY KEY REFERENCES artifacts(id) ON DELETE CASCADE,"
	" report TEXT NOT NULL,"
	" provenance TEXT"
	");"
	"CREATE TABLE verdicts ("
	" id INTEGER PRIMARY KEY,"
	" artifact_id INTEGER NOT NULL REFERENCES artifacts(id) ON DELETE CASCADE,"
	" code TEXT NOT NULL,"
	" severity TEXT NOT NULL CHECK (severity = 'info' OR severity = 'warning' OR severity = 'error'),"
	" origin TEXT NOT NULL CHECK (origin IN ('static', 'verification')),"
	" UNIQUE (artifact_id, code)"
	");"
	"CREATE INDEX verdicts_code ON verdicts(code, artifact_id);"
	"CREATE TABLE fingerprints ("
	" artifact_id INTEGER NOT NULL REFERENCES artifacts(id) ON DELETE CASCADE,"
	" file TEXT NOT NULL,"
	" sha256 TEXT NOT NULL,"
	" PRIMARY KEY (artifact_id, file)"
	") WITHOUT ROWID;"
	"CREATE TABLE verifications ("
	" id INTEGER PRIMARY KEY,"
	" artifact_id INTEGER NOT NULL REFERENCES artifacts(id) ON DELETE CASCADE,"
	" rows TEXT NOT NULL,"
	" result TEXT NOT NULL,"
	" verdict TEXT NOT NULL,"
	" created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))"
	");"
	"CREATE INDEX verifications_artifact ON verifications(artifact_id, id);"
	"CREATE TABLE jobs ("
	" id INTEGER PRIMARY KEY,"
	" kind TEXT NOT NULL,"
	" state TEXT NOT NULL DEFAULT 'queued'"
	"  CHECK (state = 'queued' OR state = 'running' OR state = 'succeeded' OR state = 'failed'"
	"   OR state = 'cancelled'),"
	" stage TEXT NOT NULL DEFAULT '',"
	" progress REAL NOT NULL DEFAULT 0,"
	" error TEXT NOT NULL DEFAULT '',"
	" artifact_id INTEGER REFERENCES artifacts(id) ON DELETE SET NULL,"
	" attempts INTEGER NOT NULL DEFAULT 0,"
	" cancel_requested INTEGER NOT NULL DEFAULT 0,"
	" params TEXT NOT NULL DEFAULT '{}',"
	" idem_key TEXT UNIQUE,"
	" body_sha256 TEXT,"
	" worker TEXT,"
	" heartbeat_at TEXT,"
	" created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),"
	" updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))"
	");"
	"CREATE INDEX jobs_state_id ON jobs(state, id);"
	"CREATE INDEX jobs_artifact ON jobs(artifact_id);"
	"CREATE TABLE fleet_reports ("
	" host TEXT NOT NULL,"
	" runtime TEXT NOT NULL,"
	" artifact_id INTEGER NOT NULL REFERENCES artifacts(id) ON DELETE CASCADE,"
	" observed TEXT NOT NULL,"
	" reported_at TEXT NOT NULL,"
	" PRIMARY KEY (host, runtime)"
	") WITHOUT ROWID;"
	"CREATE INDEX fleet_reports_artifact ON fleet_reports(artifact_id);"
	"CREATE TABLE artifact_stats ("
	" dim TEXT NOT NULL CHECK (dim = 'total' OR dim = 'unhealthy' OR dim = 'family' OR dim = 'verdict'"
	"  OR dim = 'probe'),"
	" key TEXT NOT NULL,"
	" n INTEGER NOT NULL,"
	" PRIMARY KEY (dim, key)"
	") WITHOUT ROWID;"
	"CREATE TRIGGER artifacts_stats_insert AFTER INSERT ON artifacts BEGIN"
	" INSERT INTO artifact_stats (dim, key, n) VALUES ('total', '', 1), ('family', NEW.family, 1)"
	"  ON CONFLICT DO UPDATE SET n = n + excluded.n;"
	" INSERT INTO artifact_stats (dim, key, n) SELECT 'probe', NEW.probe_bucket, 1"
	"  WHERE NEW.probe_bucket IS NOT NULL ON CONFLICT DO UPDATE SET n = n + excluded.n;"
	" INSERT INTO artifact_stats (dim, key, n) SELECT 'unhealthy', '', 1"
	"  WHERE NEW.unhealthy ON CONFLICT DO UPDATE SET n = n + excluded.n;"
	" END;"
	"CREATE TRIGGER artifacts_stats_delete AFTER DELETE ON artifacts BEGIN"
	" UPDATE artifact_stats SET n = n - 1 WHERE (dim = 'total' AND key = '')"
	"  OR (dim = 'family' AND key = OLD.family) OR (dim = 'probe' AND key = OLD.probe_bucket)"
	"  OR (dim = 'unhealthy' AND key = '' AND OLD.unhealthy);"
	" END;"
	"CREATE TRIGGER artifacts_stats_health AFTER UPDATE OF unhealthy ON artifacts"
	" WHEN OLD.unhealthy IS NOT NEW.unhealthy BEGIN"
	" INSERT INTO artifact_stats (dim, key, n) VALUES ('unhealthy', '', NEW.unhealthy - OLD.unhealthy)"
	"  ON CONFLICT DO UPDATE SET n = n + excluded.n;"
	" END;"
	"CREATE TRIGGER artifacts_stats_update AFTER UPDATE OF family, probe_mean ON artifacts BEGIN"
	" UPDATE artifact_stats SET n = n - 1"
	"  WHERE (dim = 'family' AND key = OLD.family) OR (dim = 'probe' AND key = OLD.probe_bucket);"
	" INSERT INTO artifact_stats (dim, key, n) VALUES ('family', NEW.family, 1)"
	"  ON CONFLICT DO UPDATE SET n = n + excluded.n;"
	" INSERT INTO artifact_stats (dim, key, n) SELECT 'probe', NEW.probe_bucket, 1"
	"  WHERE NEW.probe_bucket IS NOT NULL ON CONFLICT DO UPDATE SET n = n + excluded.n;"
	" END;"
	"CREATE TRIGGER verdicts_stats_insert AFTER INSERT ON verdicts BEGIN"
	" INSERT INTO artifact_stats (dim, key, n) VALUES ('verdict', NEW.code, 1)"
	"  ON CONFLICT DO UPDATE SET n = n + excluded.n;"
	" END;"
	"CREATE TRIGGER verdicts_stats_delete AFTER DELETE ON verdicts BEGIN"
	" UPDATE artifact_stats SET n = n - 1 WHERE dim = 'verdict' AND key = OLD.code;"
	" END;"
	"CREATE TRIGGER verdicts_stats_update AFTER UPDATE OF code ON verdicts BEGIN"
	" UPDATE artifact_stats SET n = n - 1 WHERE dim = 'verdict' AND key = OLD.code;"
	" INSERT INTO artifact_stats (dim, key, n) VALUES ('verdict', NEW.code, 1)"
	"  ON CONFLICT DO UPDATE SET n = n + excluded.n;"
	" END;";

/*
 * Version 2.
 * - jobs.refusal: the verdict code (a name of forge/model/verdicts.h's table)
 *   of the refusal that failed a job, NULL for any other end; the job's error
 *   keeps the refusal's detail.
 * - write_probe: one row that /readyz rewrites to prove the database takes a
 *   write (a committed write is the only test that sees a full disk).
 */
static const char schema_v2[] =
	"ALTER TABLE jobs ADD COLUMN refusal TEXT;"
	"CREATE TABLE write_probe ("
	" id INTEGER PRIMARY KEY CHECK (id = 1),"
	" at TEXT NOT NULL"
	");";

/*
 * Version 3: what fleet health's distributions read (fleet_dist.c), kept as
 * the rows change so health costs the same at any catalog size.
 * - verdict_stats counts verdict rows by the artifact's family, code and
 *   severity.  A verdict row's triggers find the family through its
 *   artifact; an artifact being deleted takes its verdicts' counts off
 *   BEFORE the delete, because the cascade deletes the verdicts after the
 *   artifact row is gone (their trigger then finds no family and does
 *   nothing).  A change of family moves the artifact's counts.
 * - artifact_probes holds each runtime's after-load trunk probe of an
 *   artifact's inspect report (report.runtimes[].trunk_probe_after), written
 *   with the report (artifacts.c), so fleet health joins the fleet's reports
 *   to it instead of parsing a report per served (artifact, runtime).
 * Both are filled from the existing rows by the migration itself.
 */
static const char schema_v3[] =
	"CREATE TABLE verdict_stats ("
	" family TEXT NOT NULL,"
	" code TEXT NOT NULL,"
	" severity TEXT NOT NULL,"
	" n INTEGER NOT NULL,"
	" PRIMARY KEY (family, code, severity)"
	") WITHOUT ROWID;"
	"INSERT INTO verdict_stats (family, code, severity, n)"
	" SELECT a.family, v.code, v.severity, count(*) FROM verdicts v JOIN artifacts a ON a.id = v.artifact_id"
	" GROUP BY a.family, v.code, v.severity;"
	"CREATE TRIGGER verdicts_family_insert AFTER INSERT ON verdicts BEGIN"
	" INSERT INTO verdict_stats (family, code, severity, n)"
	"  SELECT family, NEW.code, NEW.severity, 1 FROM artifacts WHERE id = NEW.artifact_id"
	"  ON CONFLICT DO UPDATE SET n = n + excluded.n;"
	" END;"
	"CREATE TRIGGER verdicts_family_delete AFTER DELETE ON verdicts BEGIN"
	" UPDATE verdict_stats SET n = n - 1 WHERE code = OLD.code AND severity = OLD.severity"
	"  AND family = (SELECT family FROM artifacts WHERE id = OLD.artifact_id);"
	" END;"
	"CREATE TRIGGER verdicts_family_update AFTER UPDATE OF code, severity, artifact_id ON verdicts BEGIN"
	" UPDATE verdict_stats SET n = n - 1 WHERE code = OLD.code AND severity = OLD.severity"
	"  AND family = (SELECT family FROM artifacts WHERE id = OLD.artifact_id);"
	" INSERT INTO verdict_stats (family, code, severity, n)"
	"  SELECT family, NEW.code, NEW.severity, 1 FROM artifacts WHERE id = NEW.artifact_id"
	"  ON CONFLICT DO UPDATE SET n = n + excluded.n;"
	" END;"
	"CREATE TRIGGER artifacts_family_verdicts_delete BEFORE DELETE ON artifacts BEGIN"
	" UPDATE verdict_stats SET n = n - (SELECT count(*) FROM verdicts v WHERE v.artifact_id = OLD.id"
	"  AND v.code = verdict_stats.code AND v.severity = verdict_stats.severity) WHERE family = OLD.family;"
	" END;"
	"CREATE TRIGGER artifacts_family_verdicts_move AFTER UPDATE OF family ON artifacts"
	" WHEN OLD.family IS NOT NEW.family BEGIN"
	" UPDATE verdict_stats SET n = n - (SELECT count(*) FROM verdicts v WHERE v.artifact_id = NEW.id"
	"  AND v.code = verdict_stats.code AND v.severity = verdict_stats.severity) WHERE family = OLD.family;"
	" INSERT INTO verdict_stats (family, code, severity, n)"
	"  SELECT NEW.family, code, severity, count(*) FROM verdicts WHERE artifact_id = NEW.id GROUP BY code, severity"
	"  ON CONFLICT DO UPDATE SET n = n + excluded.n;"
	" END;"
	"CREATE TABLE artifact_probes ("
	" artifact_id INTEGER NOT NULL REFERENCES artifacts(id) ON DELETE CASCADE,"
	" runtime TEXT NOT NULL,"
	" probe_after REAL NOT NULL,"
	" PRIMARY KEY (artifact_id, runtime)"
	") WITHOUT ROWID;"
	"INSERT OR IGNORE INTO artifact_probes (artifact_id, runtime, probe_after)"
	" SELECT d.artifact_id, json_extract(r.value, '$.runtime'), json_extract(r.value, '$.trunk_probe_after')"
	" FROM artifact_docs d, json_each(d.report, '$.runtimes') r"
	" WHERE json_type(r.value, '$.runtime') = 'text'"
	"  AND json_type(r.value, '$.trunk_probe_after') IN ('real', 'integer');";

/*
 * Version 4 (issue 13): one identity per artifact, and what a fleet and a
 * job say in their own words.
 * - artifacts.digest: the artifact digest (forge/model/mtplx.h: over every
 *   file forged.json lists; an inspection's over its report), unique, so
 *   storing the same bytes again finds the row instead of adding one.
 * - artifacts.head_fingerprint: MTPLX's framing of the head fingerprint,
 *   which several artifacts may share (the same head on another trunk).
 *   artifacts.fingerprint keeps forged's older framing.  Rows stored before
 *   this version keep NULL in both: neither can be computed from what was
 *   stored (the head fingerprint needs the files' bytes, and digests of old
 *   re-forges would collide on the unique index).
 * - artifact_docs.mtplx_runtime: the mtplx_runtime.json forged wrote (an
 *   MTPLX target) or read (an inspected pack), restamped by verifications.
 * - fleet_reports.runtime_reported: the runtime as the host named it (a
 *   version string), beside the table row it maps to (runtime).
 * - jobs.verdicts: the failed forge's verdicts[] (JSON); jobs.asked: the
 *   request as the client spelled it (params holds it confined).
 */
static const char schema_v4[] =
	"ALTER TABLE artifacts ADD COLUMN digest TEXT;"
	"ALTER TABLE artifacts ADD COLUMN head_fingerprint TEXT;"
	"CREATE UNIQUE INDEX artifacts_digest ON artifacts(digest) WHERE digest IS NOT NULL;"
	"CREATE INDEX artifacts_head_fingerprint ON artifacts(head_fingerprint) WHERE head_fingerprint IS NOT NULL;"
	"ALTER TABLE artifact_docs ADD COLUMN mtplx_runtime TEXT;"
	"ALTER TABLE fleet_reports ADD COLUMN runtime_reported TEXT;"
	"ALTER TABLE jobs ADD COLUMN verdicts TEXT;"
	"ALTER TABLE jobs ADD COLUMN asked TEXT;";

/*
 * Version 5: leases and one artifact per job.
 * - jobs.owner is the instance that claimed a running job (the worker's
 *   "INSTANCE" part) and jobs.lease_until when its lease ends unless the
 *   instance renews it (claims, progress reports and heartbeats do); a
 *   running job past its lease is taken back by any instance's reaper.
 * - artifacts.job_id names the job that forged an artifact (NULL for
 *   inspections), unique: the artifact and the job's success are written in
 *   one transaction, and a retry finds the stored artifact instead of adding
 *   a second.
 */
static const char schema_v5[] =
	"ALTER TABLE jobs ADD COLUMN owner TEXT;"
	"ALTER TABLE jobs ADD COLUMN lease_until TEXT;"
	"CREATE INDEX jobs_lease ON jobs(lease_until) WHERE state = 'running';"
	"ALTER TABLE artifacts ADD COLUMN job_id INTEGER REFERENCES jobs(id) ON DELETE SET NULL;"
	"CREATE UNIQUE INDEX artifacts_job ON artifacts(job_id) WHERE job_id IS NOT NULL;";

/*
 * Version 6: api_idempotency, the answers of POSTs other than POST /v1/jobs
 * replayed by Idempotency-Key (store/idem.h): one row per (route, key), the
 * request body's SHA-256, then the answer once the first request was
 * answered 2xx (status 0 until then: a reservation).  IF NOT EXISTS: a
 * database an earlier forged used has the table already (it was created by
 * the first keyed request then, outside the migrations).
 */
static const char schema_v6[] =
	"CREATE TABLE IF NOT EXISTS api_idempotency ("
	" route TEXT NOT NULL,"
	" idem_key TEXT NOT NULL,"
	" body_sha256 TEXT NOT NULL,"
	" status INTEGER NOT NULL DEFAULT 0,"
	" location TEXT NOT NULL DEFAULT '',"
	" body TEXT,"
	" created_at TEXT NOT NULL,"
	" PRIMARY KEY (route, idem_key));";

/*
 * Version 7: a running job's progress within its stage (jobs.c): bytes moved
 * of the stage's total and the seconds left, NULL when the stage counts no
 * bytes or the ETA is unknown.
 */
static const char schema_v7[] =
	"ALTER TABLE jobs ADD COLUMN bytes_done INTEGER;"
	"ALTER TABLE jobs ADD COLUMN bytes_total INTEGER;"
	"ALTER TABLE jobs ADD COLUMN eta_s REAL;";

/*
 * Version 8: an artifact's mtplx_runtime.json in its own table,
 * artifact_runtime, out of artifact_docs: a verification restamps it, and
 * as the last column of a row holding kilobytes of report and provenance
 * every read of it walked the row's overflow pages and every restamp
 * rewrote them all (bench/api/run.sh's POST verifications).  Artifacts
 * without one have no row.
 */
static const char schema_v8[] =
	"CREATE TABLE artifact_runtime ("
	" artifact_id INTEGER PRIMARY KEY REFERENCES artifacts(id) ON DELETE CASCADE,"
	" doc TEXT NOT NULL"
	");"
	"INSERT INTO artifact_runtime (artifact_id, doc)"
	" SELECT artifact_id, mtplx_runtime FROM artifact_docs WHERE mtplx_runtime IS NOT NULL;"
	"ALTER TABLE artifact_docs DROP COLUMN mtplx_runtime;";

static const char *const migrations[] = {
	schema_v1,
	schema_v2,
	schema_v3,
	schema_v4,
	schema_v5,
	schema_v6,
	schema_v7,
	schema_v8,
};

_Static_assert(sizeof(migrations) / sizeof(migrations[0]) == FG_STORE_SCHEMA_VERSION,
	       "one migration per schema version");

/* ---- helpers shared by the store files (internal.h) ---- */

int fg_sql_code(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_NOMEM:
		return FG_ENOMEM;
	case SQLITE_FULL:
		return FG_ENOSPC;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
	case SQLITE_IOERR:
	case SQLITE_CANTOPEN:
	case SQLITE_READONLY:
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
	case SQLITE_PERM:
	case SQLITE_PROTOCOL:
	case SQLITE_NOLFS:
		return FG_ESTATE;
	default:
		/* SQLITE_ERROR, CONSTRAINT, MISUSE, ...: our SQL or our checks are wrong. */
		return FG_EINTERNAL;
	}
}

int fg_sql_fail(struct fg_store *s, int rc, struct fg_err *err, const char *what)
{
	return fg_err_set(err, fg_sql_code(rc), "%s: %s", what,
			  s && s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
}

int fg_sql_get(struct fg_store *s, const char *sql, sqlite3_stmt **out, struct fg_err *err)
{
	uint64_t h = fg_fnv1a(sql);
	sqlite3_stmt *st = NULL;
	const char *tail = NULL;
	int rc;

	for (size_t i = 0; i < s->n_slots; i++) {
		if (s->slots[i].hash == h && strcmp(sqlite3_sql(s->slots[i].stmt), sql) == 0) {
			st = s->slots[i].stmt;
			sqlite3_reset(st);
			sqlite3_clear_bindings(st);
			*out = st;
			return 0;
		}
	}
	if (s->n_slots == FG_SQL_CACHE_MAX)
		return fg_err_set(err, FG_EINTERNAL, "statement cache full (%d statements)", FG_SQL_CACHE_MAX);
	/* PERSISTENT: the statement lives as long as the connection. */
	rc = sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, &tail);
	if (rc != SQLITE_OK) {
		char what[96];

		snprintf(what, sizeof(what), "preparing \"%.60s\"", sql);
		return fg_sql_fail(s, rc, err, what);
	}
	if (!st || (tail && *tail)) {
		/* Only one statement per text: a second one would silently never run. */
		sqlite3_finalize(st);
		return fg_err_set(err, FG_EINTERNAL, "statement \"%.60s\" is empty or holds two", sql);
	}
	s->slots[s->n_slots].hash = h;
	s->slots[s->n_slots].stmt = st;
	s->n_slots++;
	*out = st;
	return 0;
}

void fg_sql_put(sqlite3_stmt *st)
{
	if (!st)
		return;
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

int fg_sql_exec(struct fg_store *s, sqlite3_stmt *st, struct fg_err *err, const char *what)
{
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		;
	if (rc != SQLITE_DONE) {
		rc = fg_sql_fail(s, rc, err, what);
		fg_sql_put(st);
		return rc;
	}
	fg_sql_put(st);
	return 0;
}

static int run_sql(struct fg_store *s, const char *sql, struct fg_err *err, const char *what)
{
	sqlite3_stmt *st;
	int rc = fg_sql_get(s, sql, &st, err);

	return rc ? rc : fg_sql_exec(s, st, err, what);
}

int fg_sql_begin(struct fg_store *s, struct fg_err *err)
{
	/* Inside a writer's batch the writer's savepoint stands for this transaction. */
	if (s->in_batch)
		return 0;
	return run_sql(s, "BEGIN IMMEDIATE", err, "starting a write transaction");
}

int fg_sql_begin_read(struct fg_store *s, struct fg_err *err)
{
	return run_sql(s, "BEGIN", err, "starting a read transaction");
}

int fg_sql_commit(struct fg_store *s, struct fg_err *err)
{
	int rc;

	if (s->in_batch)
		return 0;
	rc = run_sql(s, "COMMIT", err, "committing");

	if (rc)
		fg_sql_rollback(s);
	return rc;
}

void fg_sql_rollback(struct fg_store *s)
{
	/* Some errors (SQLITE_FULL, IOERR, NOMEM) already rolled back: nothing to do then. */
	if (!s || s->in_batch || sqlite3_get_autocommit(s->db))
		return;
	(void)run_sql(s, "ROLLBACK", NULL, "rolling back");
}

int fg_sql_bind_text(sqlite3_stmt *st, int i, const char *text)
{
	if (!text)
		return sqlite3_bind_null(st, i);
	return sqlite3_bind_text(st, i, text, -1, SQLITE_TRANSIENT);
}

void fg_sql_column_copy(sqlite3_stmt *st, int col, char *dst, size_t cap)
{
	const char *t = (const char *)sqlite3_column_text(st, col);

	fg_store_copy_text(t, t ? (size_t)sqlite3_column_bytes(st, col) : 0, dst, cap);
}

int fg_sql_column_json(sqlite3_stmt *st, int col, cJSON **out, struct fg_err *err, const char *what)
{
	const char *t = (const char *)sqlite3_column_text(st, col);
	cJSON *j;

	if (!t) {
		if (sqlite3_column_type(st, col) != SQLITE_NULL)
			return fg_err_set(err, FG_ENOMEM, "%s: out of memory", what);
		j = cJSON_CreateNull();
		if (!j)
			return fg_err_set(err, FG_ENOMEM, "%s: out of memory", what);
		*out = j;
		return 0;
	}
	j = cJSON_ParseWithLength(t, (size_t)sqlite3_column_bytes(st, col));
	if (!j)
		return fg_err_set(err, FG_ESTATE, "%s: the stored JSON does not parse", what);
	*out = j;
	return 0;
}

int fg_sql_page(struct fg_store *s, sqlite3_stmt *st, int limit, fg_sql_item_fn item, cJSON **out,
	       int64_t *next, const char *what, struct fg_err *err)
{
	cJSON *arr = cJSON_CreateArray();
	int64_t last = 0;
	int n = 0, rc;

	if (!arr) {
		fg_sql_put(st);
		return fg_err_set(err, FG_ENOMEM, "%s: out of memory", what);
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		last = sqlite3_column_int64(st, 0);
		rc = item(arr, st, err);
		if (rc)
			goto out;
		n++;
	}
	if (rc != SQLITE_DONE) {
		rc = fg_sql_fail(s, rc, err, what);
		goto out;
	}
	rc = 0;
	*next = n == limit ? last : 0;
	*out = arr;
	arr = NULL;
out:
	fg_sql_put(st);
	cJSON_Delete(arr);
	return rc;
}

int fg_sql_clamp_limit(int limit)
{
	if (limit < 1)
		return 1;
	return limit > FG_SQL_LIMIT_MAX ? FG_SQL_LIMIT_MAX : limit;
}

/* ---- opening, migrating, closing ---- */

static int read_user_version(struct fg_store *s, int *version, struct fg_err *err)
{
	sqlite3_stmt *st;
	int rc = fg_sql_get(s, "PRAGMA user_version", &st, err);

	if (rc)
		return rc;
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		rc = fg_sql_fail(s, rc, err, "reading the schema version");
		fg_sql_put(st);
		return rc;
	}
	*version = sqlite3_column_int(st, 0);
	fg_sql_put(st);
	return 0;
}

static int refuse_newer(int version, const char *path, struct fg_err *err)
{
	return fg_err_set(err, FG_ESTATE,
			  "database '%s' has schema version %d, newer than this forged's %d: "
			  "run a newer forged",
			  path, version, FG_STORE_SCHEMA_VERSION);
}

/*
 * Bring the schema to FG_STORE_SCHEMA_VERSION.  The version is read again
 * inside each write transaction because another process may have migrated
 * between our first look and our lock.
 */
static int migrate(struct fg_store *s, const char *path, struct fg_err *err)
{
	int version = 0;
	int rc = read_user_version(s, &version, err);

	if (rc)
		return rc;
	if (version > FG_STORE_SCHEMA_VERSION)
		return refuse_newer(version, path, err);
	while (version < FG_STORE_SCHEMA_VERSION) {
		char *msg = NULL;
		char bump[48];

		rc = fg_sql_begin(s, err);
		if (rc)
			return fg_err_prefix(err, rc, "migrating '%s': ", path);
		rc = read_user_version(s, &version, err);
		if (rc)
			goto fail;
		if (version > FG_STORE_SCHEMA_VERSION) {
			/* A newer forged migrated it while we waited for the lock. */
			rc = refuse_newer(version, path, err);
			goto fail;
		}
		if (version == FG_STORE_SCHEMA_VERSION) {
			fg_sql_rollback(s);
			break;
		}
		rc = sqlite3_exec(s->db, migrations[version], NULL, NULL, &msg);
		if (rc == SQLITE_OK) {
			snprintf(bump, sizeof(bump), "PRAGMA user_version = %d", version + 1);
			rc = sqlite3_exec(s->db, bump, NULL, NULL, &msg);
		}
		if (rc != SQLITE_OK) {
			rc = fg_err_set(err, fg_sql_code(rc), "migrating '%s' to schema version %d: %s", path, version + 1,
					msg ? msg : sqlite3_errstr(rc));
			sqlite3_free(msg);
			goto fail;
		}
		rc = fg_sql_commit(s, err);
		if (rc)
			return fg_err_prefix(err, rc, "migrating '%s' to schema version %d: ", path, version + 1);
		version++;
	}
	s->user_version = version;
	return 0;
fail:
	fg_sql_rollback(s);
	return rc;
}

/*
 * Wait for a lock in short steps: 100 us doubling to a 10 ms ceiling, up to
 * the store's busy_ms (BUSY_TIMEOUT_MS; less for the readiness probe,
 * store.c) in all.  Only another process's lock is waited for: the writes
 * of this process go through one writer thread (writer.c) and never wait
 * for each other.  SQLite's own busy_timeout sleeps in steps of up to 100 ms,
 * which left a writer idle long after the lock was free (a p99 of about 0.8 s
 * for verifications under 64 concurrent clients).
 */
static int busy_wait(void *arg, int count)
{
	const struct fg_store *s = arg;
	long long step = 100LL << (count < 7 ? count : 7), waited;

	if (step > 10000)
		step = 10000;
	/* Time already waited: the doubling steps, then the 10 ms ones. */
	waited = count < 7 ? 100LL * ((1LL << count) - 1) : 12700LL + 10000LL * (count - 7);
	if (waited / 1000 >= s->busy_ms)
		return 0;
	usleep((useconds_t)step);
	return 1;
}

static int configure(struct fg_store *s, const char *path, struct fg_err *err)
{
	static const char *const pragmas[] = {
		/* FULL: a commit is on disk before we tell a client it is stored. */
		"PRAGMA synchronous = FULL",
		"PRAGMA foreign_keys = ON",
	};
	sqlite3_stmt *st;
	const char *mode;
	int rc;

	s->busy_ms = BUSY_TIMEOUT_MS;
	sqlite3_busy_handler(s->db, busy_wait, s);
	rc = fg_sql_get(s, "PRAGMA journal_mode = WAL", &st, err);
	if (rc)
		return rc;
	/*
	 * Several first opens of a new file race to switch it from a rollback
	 * journal to WAL; the losers hold a read lock while asking for the write
	 * lock, and SQLite then answers SQLITE_BUSY at once instead of calling
	 * the busy handler (waiting could deadlock).  So wait here instead.
	 */
	for (int waited = 0;; waited += WAL_RETRY_MS) {
		rc = sqlite3_step(st);
		if ((rc & 0xff) != SQLITE_BUSY || waited >= BUSY_TIMEOUT_MS)
			break;
		sqlite3_reset(st);
		sqlite3_sleep(WAL_RETRY_MS);
	}
	if (rc != SQLITE_ROW) {
		rc = fg_sql_fail(s, rc, err, "setting WAL mode");
		fg_sql_put(st);
		return fg_err_prefix(err, rc, "database '%s': ", path);
	}
	mode = (const char *)sqlite3_column_text(st, 0);
	/* An in-memory database (":memory:", tests) cannot be WAL and needs no durability. */
	if (!mode || (strcmp(mode, "wal") != 0 && strcmp(mode, "memory") != 0)) {
		rc = fg_err_set(err, FG_ESTATE, "database '%s' cannot use WAL (journal mode stays '%s')", path,
				mode ? mode : "?");
		fg_sql_put(st);
		return rc;
	}
	fg_sql_put(st);
	for (size_t i = 0; i < sizeof(pragmas) / sizeof(pragmas[0]); i++) {
		rc = run_sql(s, pragmas[i], err, pragmas[i]);
		if (rc)
			return fg_err_prefix(err, rc, "database '%s': ", path);
	}
	return 0;
}

/* The writer's connection: the WAL's size after each commit (checkpoints, writer.c). */
static int wal_hook(void *arg, sqlite3 *db, const char *name, int frames)
{
	struct fg_writer *w = arg;

	(void)db;
	(void)name;
	fg_writer_want_checkpoint(w, frames >= CHECKPOINT_FRAMES ? frames : 0);
	return SQLITE_OK;
}

static int sqlite_open(struct fg_store *s, const char *path, struct fg_err *err)
{
	int rc;

	if (!path || !*path)
		return fg_err_set(err, FG_EINPUT, "opening the store: no database path");
	/* Each thread has its own connection, but they share the library's state. */
	if (!sqlite3_threadsafe())
		return fg_err_set(err, FG_EINTERNAL, "opening '%s': libsqlite3 was built without thread support", path);
	/* NOMUTEX: a connection is never shared between threads (internal.h). */
	rc = sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
			     NULL);
	if (rc != SQLITE_OK)
		return fg_err_set(err, s->db ? fg_sql_code(rc) : FG_ENOMEM, "opening database '%s': %s", path,
				  s->db ? sqlite3_errmsg(s->db) : "out of memory");
	sqlite3_extended_result_codes(s->db, 1);
	/* No checkpoint from a commit: the writer's checkpoint thread runs them (writer.c). */
	sqlite3_wal_autocheckpoint(s->db, 0);
	rc = configure(s, path, err);
	if (!rc)
		rc = migrate(s, path, err);
	return rc;
}

static void sqlite_close(struct fg_store *s)
{
	for (size_t i = 0; i < s->n_slots; i++)
		sqlite3_finalize(s->slots[i].stmt);
	s->n_slots = 0;
	/* close_v2 still frees everything if a statement were somehow left behind. */
	sqlite3_close_v2(s->db);
	s->db = NULL;
}

/* ---- the writer's transactions ---- */

static int sqlite_tx_begin(struct fg_store *s, struct fg_err *err)
{
	return run_sql(s, "BEGIN IMMEDIATE", err, "starting a write transaction");
}

static int sqlite_tx_commit(struct fg_store *s, struct fg_err *err)
{
	int rc = run_sql(s, "COMMIT", err, "committing");

	if (rc && !sqlite3_get_autocommit(s->db))
		(void)run_sql(s, "ROLLBACK", NULL, "rolling back");
	return rc;
}

static void sqlite_tx_rollback(struct fg_store *s)
{
	if (!sqlite3_get_autocommit(s->db))
		(void)run_sql(s, "ROLLBACK", NULL, "rolling back");
}

/* SQLITE_FULL, IOERR, NOMEM and BUSY may roll the whole transaction back under a statement. */
static int sqlite_tx_lost(struct fg_store *s)
{
	return sqlite3_get_autocommit(s->db);
}

static int sqlite_sp_begin(struct fg_store *s, struct fg_err *err)
{
	return run_sql(s, "SAVEPOINT w", err, "starting a write");
}

static int sqlite_sp_release(struct fg_store *s, struct fg_err *err)
{
	return run_sql(s, "RELEASE w", err, "ending a write");
}

static void sqlite_sp_rollback(struct fg_store *s)
{
	if (sqlite3_get_autocommit(s->db))
		return;
	(void)run_sql(s, "ROLLBACK TO w", NULL, "rolling a write back");
	(void)run_sql(s, "RELEASE w", NULL, "ending a write");
}

/*
 * The writer's connection reports the WAL's size to its writer after each
 * commit, and keeps WRITER_CACHE_KB of pages: writes land anywhere in a
 * large catalog (a verification touches the verdict indexes at its
 * artifact), and the default 2 MB cache read most of those pages again
 * with a system call each.
 */
#define WRITER_CACHE_KB 32768

static void sqlite_writer_attach(struct fg_store *ws, struct fg_writer *w)
{
	char sql[48];

	sqlite3_wal_hook(ws->db, wal_hook, w);
	snprintf(sql, sizeof(sql), "PRAGMA cache_size = -%d", WRITER_CACHE_KB);
	(void)run_sql(ws, sql, NULL, "sizing the writer's page cache");
}

/* A PASSIVE checkpoint: copies what no reader still needs, never waits for a lock. */
static int sqlite_checkpoint(struct fg_store *s, struct fg_err *err)
{
	int rc = sqlite3_wal_checkpoint_v2(s->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);

	/* BUSY: a reader or another checkpoint holds what it needs; the next one goes further. */
	if (rc == SQLITE_OK || (rc & 0xff) == SQLITE_BUSY)
		return 0;
	return fg_sql_fail(s, rc, err, "checkpointing");
}

/* ---- checks and counts ---- */

static int sqlite_check(struct fg_store *s, struct fg_err *err)
{
	sqlite3_stmt *st;
	const char *first;
	int rc;

	if (!s)
		return fg_err_set(err, FG_EINPUT, "integrity check: no store");
	rc = fg_sql_get(s, "PRAGMA integrity_check", &st, err);
	if (rc)
		return rc;
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		rc = fg_sql_fail(s, rc, err, "integrity check");
		goto out;
	}
	first = (const char *)sqlite3_column_text(st, 0);
	if (!first || strcmp(first, "ok") != 0) {
		rc = fg_err_set(err, FG_ESTATE, "integrity check failed: %s", first ? first : "(no message)");
		goto out;
	}
	rc = 0;
out:
	fg_sql_put(st);
	return rc;
}

static const char sql_write_probe[] =
	"INSERT INTO write_probe (id, at) VALUES (1, " FG_SQL_NOW ")"
	" ON CONFLICT (id) DO UPDATE SET at = excluded.at";

/* Runs on the writer's connection, which waits at most the probe's budget for the lock (store.c). */
static int sqlite_probe_write(struct fg_store *s, struct fg_err *err)
{
	sqlite3_stmt *st;
	int rc;

	if (!s)
		return fg_err_set(err, FG_EINPUT, "write probe: no store");
	rc = fg_sql_begin(s, err);
	if (!rc)
		rc = fg_sql_get(s, sql_write_probe, &st, err);
	if (!rc)
		rc = fg_sql_exec(s, st, err, "writing the probe row");
	if (!rc)
		rc = fg_sql_commit(s, err);
	if (rc)
		fg_sql_rollback(s);
	return rc;
}

static const char sql_stats[] = "SELECT dim, key, n FROM artifact_stats WHERE n <> 0";

int fg_sql_read_stats(struct fg_store *s, struct fg_sql_stats *out, cJSON *by_verdict, cJSON *by_family,
		     struct fg_err *err)
{
	struct fg_sql_stats c;
	sqlite3_stmt *st;
	int rc = fg_sql_get(s, sql_stats, &st, err);

	if (rc)
		return rc;
	memset(&c, 0, sizeof(c));
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		rc = fg_store_stats_row(&c, by_verdict, by_family, (const char *)sqlite3_column_text(st, 0),
					(const char *)sqlite3_column_text(st, 1), sqlite3_column_int64(st, 2), err);
		if (rc) {
			fg_sql_put(st);
			return rc;
		}
	}
	rc = rc == SQLITE_DONE ? 0 : fg_sql_fail(s, rc, err, "reading artifact counts");
	fg_sql_put(st);
	if (!rc)
		*out = c;
	return rc;
}

static const char sql_jobs_by_state[] = "SELECT state, count(*) FROM jobs GROUP BY state";

static int sqlite_counts(struct fg_store *s, struct fg_store_counts *out, cJSON **by_verdict, struct fg_err *err)
{
	struct fg_store_counts c;
	struct fg_sql_stats stats;
	sqlite3_stmt *st = NULL;
	cJSON *verdicts = NULL;
	int rc;

	if (!s || !out)
		return fg_err_set(err, FG_EINPUT, "counting: no store or no output");
	memset(&c, 0, sizeof(c));
	if (by_verdict) {
		verdicts = cJSON_CreateObject();
		if (!verdicts)
			return fg_err_set(err, FG_ENOMEM, "counting: out of memory");
	}
	/* One snapshot for the job and artifact figures. */
	rc = fg_sql_begin_read(s, err);
	if (rc)
		goto out;
	rc = fg_sql_get(s, sql_jobs_by_state, &st, err);
	if (rc)
		goto out;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		enum fg_job_state js;

		if (fg_job_state_parse((const char *)sqlite3_column_text(st, 0), &js) == 0)
			c.jobs[js] = sqlite3_column_int64(st, 1);
	}
	if (rc != SQLITE_DONE) {
		rc = fg_sql_fail(s, rc, err, "counting jobs");
		goto out;
	}
	fg_sql_put(st);
	st = NULL;
	rc = fg_sql_read_stats(s, &stats, verdicts, NULL, err);
	if (!rc)
		rc = fg_sql_commit(s, err);
	if (rc)
		goto out;
	c.artifacts = stats.artifacts;
	c.artifacts_unhealthy = stats.unhealthy;
	*out = c;
	if (by_verdict) {
		*by_verdict = verdicts;
		verdicts = NULL;
	}
out:
	fg_sql_put(st);
	if (rc)
		fg_sql_rollback(s);
	cJSON_Delete(verdicts);
	return rc;
}

const struct fg_store_ops fg_sqlite_ops = {
	.name = "sqlite",
	.open = sqlite_open,
	.close = sqlite_close,
	.tx_begin = sqlite_tx_begin,
	.tx_commit = sqlite_tx_commit,
	.tx_rollback = sqlite_tx_rollback,
	.tx_lost = sqlite_tx_lost,
	.sp_begin = sqlite_sp_begin,
	.sp_release = sqlite_sp_release,
	.sp_rollback = sqlite_sp_rollback,
	.writer_attach = sqlite_writer_attach,
	.checkpoint = sqlite_checkpoint,
	.job_enqueue = fg_sqlite_job_enqueue,
	.job_claim = fg_sqlite_job_claim,
	.job_progress = fg_sqlite_job_progress,
	.job_finish = fg_sqlite_job_finish,
	.job_succeed = fg_sqlite_job_succeed,
	.job_cancel = fg_sqlite_job_cancel,
	.job_requeue = fg_sqlite_job_requeue,
	.job_get = fg_sqlite_job_get,
	.job_list = fg_sqlite_job_list,
	.jobs_recover = fg_sqlite_jobs_recover,
	.jobs_renew = fg_sqlite_jobs_renew,
	.jobs_reap = fg_sqlite_jobs_reap,
	.jobs_expired = fg_sqlite_jobs_expired,
	.artifact_put = fg_sqlite_artifact_put,
	.artifact_get = fg_sqlite_artifact_get,
	.artifact_runtime = fg_sqlite_artifact_runtime,
	.artifact_by_fingerprint = fg_sqlite_artifact_by_fingerprint,
	.artifact_resolve = fg_sqlite_artifact_resolve,
	.artifact_list = fg_sqlite_artifact_list,
	.verification_put = fg_sqlite_verification_put,
	.fleet_report = fg_sqlite_fleet_report,
	.fleet_health = fg_sqlite_fleet_health,
	.counts = sqlite_counts,
	.check = sqlite_check,
	.probe_write = sqlite_probe_write,
	.idem_claim = fg_sqlite_idem_claim,
	.idem_finish = fg_sqlite_idem_finish,
	.idem_release = fg_sqlite_idem_release,
	.job_key_known = fg_sqlite_job_key_known,
	.fleet_report_same = fg_sqlite_fleet_report_same,
};
