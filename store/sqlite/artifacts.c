/*
 * artifacts.c: artifacts on SQLite, and what hangs off them: the stored inspect report
 * and provenance, one verdict row per code (origin 'static' from the report,
 * 'verification' from the latest verification), the file fingerprints of
 * forged artifacts, and verification runs.
 *
 * Verdict rows are the queryable face of an artifact: listing by verdict
 * code, counting by code for /metrics and fleet health.  A verification
 * replaces the artifact's previous verification verdict row (its history
 * stays in the verifications table), so listings and counts describe each
 * artifact as it stands now.  The derived artifacts.unhealthy flag is
 * recomputed by one statement in every transaction that changes verdicts.
 */
#include "store/internal.h"

#include "forge/model/mtplx.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the unhealthy flag ---- */

/*
 * The rule of store.h, in one place: an error-severity static verdict, or a
 * latest verification whose verdict is ?2 (mtp_acceptance_collapsed, bound
 * from the verdict table).
 */
static const char sql_refresh_health[] =
	"UPDATE artifacts SET unhealthy = x.v FROM (SELECT"
	" (EXISTS (SELECT 1 FROM verdicts WHERE artifact_id = ?1 AND origin = 'static' AND severity = 'error')"
	"  OR coalesce((SELECT verdict FROM verifications WHERE artifact_id = ?1 ORDER BY id DESC LIMIT 1)"
	"   = ?2, 0)) AS v) AS x"
	/* An unchanged flag is not written: no page of the artifact's row rewritten for nothing. */
	" WHERE id = ?1 AND unhealthy IS NOT x.v";

static int refresh_health(struct fg_store *s, int64_t id, struct fg_err *err)
{
	sqlite3_stmt *st;
	int rc = fg_sql_get(s, sql_refresh_health, &st, err);

	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, id);
	fg_sql_bind_text(st, 2, fg_verdict_table[FG_V_MTP_ACCEPTANCE_COLLAPSED].name);
	return fg_sql_exec(s, st, err, "updating the artifact's health");
}

/* ---- storing an artifact ---- */

/* The artifact a fingerprint row belongs to (fg_store_each_file's ctx). */
struct file_ctx {
	struct fg_store *s;
	int64_t id;
};

static const char sql_fingerprint_insert[] =
	"INSERT INTO fingerprints (artifact_id, file, sha256) VALUES (?1, ?2, ?3)"
	" ON CONFLICT (artifact_id, file) DO UPDATE SET sha256 = excluded.sha256";

static int add_fingerprint(void *ctx, const char *file, const char *sha, struct fg_err *err)
{
	const struct file_ctx *c = ctx;
	sqlite3_stmt *st;
	int rc = fg_sql_get(c->s, sql_fingerprint_insert, &st, err);

	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, c->id);
	fg_sql_bind_text(st, 2, file);
	fg_sql_bind_text(st, 3, sha);
	return fg_sql_exec(c->s, st, err, "storing a file fingerprint");
}

/* A code raised for two tensor sets is one row; the first severity stays (the table fixes it per code). */
static const char sql_verdict_insert[] =
	"INSERT INTO verdicts (artifact_id, code, severity, origin) VALUES (?1, ?2, ?3, ?4)"
	" ON CONFLICT (artifact_id, code) DO NOTHING";

static int add_verdict(struct fg_store *s, int64_t id, const char *code, const char *severity, const char *origin,
		       struct fg_err *err)
{
	sqlite3_stmt *st;
	int rc = fg_sql_get(s, sql_verdict_insert, &st, err);

	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, id);
	fg_sql_bind_text(st, 2, code);
	fg_sql_bind_text(st, 3, severity);
	fg_sql_bind_text(st, 4, origin);
	return fg_sql_exec(s, st, err, "storing a verdict");
}

/* The after-load trunk probe of each runtime of the report (fleet_dist.c reads them). */
static const char sql_probe_insert[] =
	"INSERT OR REPLACE INTO artifact_probes (artifact_id, runtime, probe_after) VALUES (?1, ?2, ?3)";

static int add_probes(struct fg_store *s, int64_t id, const cJSON *report, struct fg_err *err)
{
	const cJSON *r;

	cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(report, "runtimes")) {
		const char *rt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "runtime"));
		const cJSON *probe = cJSON_GetObjectItemCaseSensitive(r, "trunk_probe_after");
		sqlite3_stmt *st;
		int rc;

		if (!rt || !*rt || strlen(rt) > FG_STORE_RUNTIME_MAX || !cJSON_IsNumber(probe) || !isfinite(probe->valuedouble))
			continue;
		rc = fg_sql_get(s, sql_probe_insert, &st, err);
		if (rc)
			return rc;
		sqlite3_bind_int64(st, 1, id);
		fg_sql_bind_text(st, 2, rt);
		sqlite3_bind_double(st, 3, probe->valuedouble);
		rc = fg_sql_exec(s, st, err, "storing a runtime's probe");
		if (rc)
			return rc;
	}
	return 0;
}

static const char sql_artifact_insert[] =
	"INSERT INTO artifacts (source, path, family, fingerprint, ok, probe_mean, head_convention, digest,"
	" head_fingerprint, created_at, job_id)"
	" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, " FG_SQL_NOW ", ?10)";
static const char sql_doc_insert[] =
	"INSERT INTO artifact_docs (artifact_id, report, provenance) VALUES (?1, ?2, ?3)";
/* Its own table (migration 8), so that a verification's restamp rewrites one small row, not the report's pages. */
static const char sql_runtime_insert[] = "INSERT INTO artifact_runtime (artifact_id, doc) VALUES (?1, ?2)";

/* The rows of d (checked, report and provenance printed) inside the open transaction. */
static int insert_rows(struct fg_store *s, const struct fg_store_artifact *d, int64_t job, int64_t *id,
		       struct fg_err *err)
{
	const struct fg_artifact_in *a = d->in;
	sqlite3_stmt *st = NULL;
	struct file_ctx files;
	const cJSON *v;
	int64_t new_id;
	int rc = fg_sql_get(s, sql_artifact_insert, &st, err);

	if (rc)
		return rc;
	fg_sql_bind_text(st, 1, a->source);
	fg_sql_bind_text(st, 2, a->path);
	fg_sql_bind_text(st, 3, a->family && *a->family ? a->family : "unknown");
	fg_sql_bind_text(st, 4, a->fingerprint && *a->fingerprint ? a->fingerprint : NULL);
	sqlite3_bind_int(st, 5, a->ok != 0);
	/* NAN means "no probe"; infinities are not a measurement either. */
	if (isfinite(a->probe_mean))
		sqlite3_bind_double(st, 6, a->probe_mean);
	else
		sqlite3_bind_null(st, 6);
	fg_sql_bind_text(st, 7, a->head_convention && *a->head_convention ? a->head_convention : NULL);
	fg_sql_bind_text(st, 8, a->digest && *a->digest ? a->digest : NULL);
	fg_sql_bind_text(st, 9, a->head_fingerprint && *a->head_fingerprint ? a->head_fingerprint : NULL);
	if (job > 0)
		sqlite3_bind_int64(st, 10, job);
	/* last_insert_rowid rather than RETURNING, which buffers its row in a temporary table. */
	rc = fg_sql_exec(s, st, err, "inserting an artifact");
	if (rc)
		return rc;
	new_id = sqlite3_last_insert_rowid(s->db);
	rc = fg_sql_get(s, sql_doc_insert, &st, err);
	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, new_id);
	fg_sql_bind_text(st, 2, d->report);
	fg_sql_bind_text(st, 3, d->provenance);
	rc = fg_sql_exec(s, st, err, "storing the report");
	if (!rc && d->runtime && !(rc = fg_sql_get(s, sql_runtime_insert, &st, err))) {
		sqlite3_bind_int64(st, 1, new_id);
		fg_sql_bind_text(st, 2, d->runtime);
		rc = fg_sql_exec(s, st, err, "storing the runtime document");
	}
	if (rc)
		return rc;
	cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(a->report, "verdicts")) {
		rc = add_verdict(s, new_id, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(v, "code")),
				 cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(v, "severity")), "static", err);
		if (rc)
			return rc;
	}
	if (a->provenance) {
		files.s = s;
		files.id = new_id;
		rc = fg_store_each_file(a->provenance, add_fingerprint, &files, err);
		if (rc)
			return rc;
	}
	rc = add_probes(s, new_id, a->report, err);
	if (!rc)
		rc = refresh_health(s, new_id, err);
	if (!rc)
		*id = new_id;
	return rc;
}

/*
 * The same bytes again (issue 13: one identity per artifact): the row with
 * this digest, filled in where it lacks what the new copy knows.
 */
static const char sql_by_digest[] = "SELECT id FROM artifacts WHERE digest = ?1";
static const char sql_fill_head[] =
	"UPDATE artifacts SET head_fingerprint = ?2 WHERE id = ?1 AND head_fingerprint IS NULL";
static const char sql_fill_runtime[] =
	"INSERT INTO artifact_runtime (artifact_id, doc) VALUES (?1, ?2) ON CONFLICT (artifact_id) DO NOTHING";

/* 1 with *id when an artifact has d's digest (filled in as above), 0 when none, or FG_E*. */
static int find_same(struct fg_store *s, const struct fg_store_artifact *d, int64_t *id, struct fg_err *err)
{
	const struct fg_artifact_in *a = d->in;
	sqlite3_stmt *st;
	int64_t found;
	int rc = fg_sql_get(s, sql_by_digest, &st, err);

	if (rc)
		return rc;
	fg_sql_bind_text(st, 1, a->digest);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE) {
		fg_sql_put(st);
		return 0;
	}
	if (rc != SQLITE_ROW) {
		rc = fg_sql_fail(s, rc, err, "finding an artifact by digest");
		fg_sql_put(st);
		return rc;
	}
	found = sqlite3_column_int64(st, 0);
	fg_sql_put(st);
	if (a->head_fingerprint && *a->head_fingerprint) {
		if ((rc = fg_sql_get(s, sql_fill_head, &st, err)))
			return rc;
		sqlite3_bind_int64(st, 1, found);
		fg_sql_bind_text(st, 2, a->head_fingerprint);
		if ((rc = fg_sql_exec(s, st, err, "filling in a head fingerprint")))
			return rc;
	}
	if (d->runtime) {
		if ((rc = fg_sql_get(s, sql_fill_runtime, &st, err)))
			return rc;
		sqlite3_bind_int64(st, 1, found);
		fg_sql_bind_text(st, 2, d->runtime);
		if ((rc = fg_sql_exec(s, st, err, "filling in a runtime document")))
			return rc;
	}
	*id = found;
	return 1;
}

int fg_sqlite_artifact_insert(struct fg_store *s, const struct fg_store_artifact *a, int64_t job, int64_t *id,
			      int *existed, struct fg_err *err)
{
	int rc = 0;

	*existed = 0;
	/* Inside the write lock: two stores of the same bytes serialise, the second finds the first. */
	if (a->in->digest && *a->in->digest) {
		rc = find_same(s, a, id, err);
		if (rc == 1) {
			*existed = 1;
			return 0;
		}
	}
	if (!rc)
		rc = insert_rows(s, a, job, id, err);
	return rc ? fg_err_prefix(err, rc, "storing artifact '%s': ", a->in->source) : 0;
}

int fg_sqlite_artifact_put(struct fg_store *s, const struct fg_store_artifact *a, int64_t *id, int *existed,
			   struct fg_err *err)
{
	int64_t new_id = 0;
	int rc = fg_sql_begin(s, err);

	if (!rc)
		rc = fg_sqlite_artifact_insert(s, a, 0, &new_id, existed, err);
	if (!rc)
		rc = fg_sql_commit(s, err);
	if (rc) {
		fg_sql_rollback(s);
		return rc;
	}
	*id = new_id;
	return 0;
}

/* ---- reading one artifact ---- */

static const char sql_artifact_doc[] =
	"SELECT a.id, a.source, a.path, a.family, a.fingerprint, a.ok, a.created_at, d.report, d.provenance,"
	" a.digest, a.head_fingerprint, r.doc"
	" FROM artifacts a JOIN artifact_docs d ON d.artifact_id = a.id"
	" LEFT JOIN artifact_runtime r ON r.artifact_id = a.id WHERE a.id = ?1";
/* What the fleet says of it: every standing report, with what the host observed. */
static const char sql_artifact_fleet[] =
	"SELECT host, runtime, runtime_reported, observed, reported_at FROM fleet_reports"
	" WHERE artifact_id = ?1 ORDER BY host, runtime";
static const char sql_artifact_verdicts[] =
	"SELECT code, severity, origin FROM verdicts WHERE artifact_id = ?1 ORDER BY id";
static const char sql_artifact_verifications[] =
	"SELECT id, verdict, result, created_at, rows FROM verifications"
	" WHERE artifact_id = ?1 ORDER BY id";
static const char sql_artifact_fingerprints[] =
	"SELECT file, sha256 FROM fingerprints WHERE artifact_id = ?1 ORDER BY file";

/* Add text column col of st to o as key (SQL NULL: JSON null). */
static int add_text(cJSON *o, const char *key, sqlite3_stmt *st, int col)
{
	const char *t = (const char *)sqlite3_column_text(st, col);

	return (t ? cJSON_AddStringToObject(o, key, t) : cJSON_AddNullToObject(o, key)) != NULL;
}

static int add_json(cJSON *o, const char *key, sqlite3_stmt *st, int col, struct fg_err *err)
{
	cJSON *j = NULL;
	int rc = fg_sql_column_json(st, col, &j, err, key);

	if (rc)
		return rc;
	if (!cJSON_AddItemToObject(o, key, j)) {
		cJSON_Delete(j);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	return 0;
}

/* Column col's stored JSON text under key as a cJSON_Raw item (NULL: JSON null), not parsed. */
static int add_raw(cJSON *o, const char *key, sqlite3_stmt *st, int col, struct fg_err *err)
{
	const char *t = (const char *)sqlite3_column_text(st, col);
	cJSON *j;

	if (!t && sqlite3_column_type(st, col) != SQLITE_NULL)
		return fg_err_set(err, FG_ENOMEM, "%s: out of memory", key);
	j = t ? cJSON_CreateRaw(t) : cJSON_CreateNull();
	if (!j || !cJSON_AddItemToObject(o, key, j)) {
		cJSON_Delete(j);
		return fg_err_set(err, FG_ENOMEM, "%s: out of memory", key);
	}
	return 0;
}

/* The rows of st (bound by the caller) as an array under key, each built by row(). */
typedef int (*row_fn)(cJSON *item, sqlite3_stmt *st, struct fg_err *err);

static int add_rows(struct fg_store *s, cJSON *doc, const char *key, sqlite3_stmt *st, row_fn row,
		    struct fg_err *err)
{
	cJSON *arr = cJSON_AddArrayToObject(doc, key);
	int rc;

	if (!arr)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		cJSON *item = cJSON_CreateObject();

		if (!item || !cJSON_AddItemToArray(arr, item)) {
			cJSON_Delete(item);
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		}
		rc = row(item, st, err);
		if (rc)
			return rc;
	}
	if (rc != SQLITE_DONE)
		return fg_sql_fail(s, rc, err, key);
	return 0;
}

static int verdict_row(cJSON *item, sqlite3_stmt *st, struct fg_err *err)
{
	if (!add_text(item, "code", st, 0) || !add_text(item, "severity", st, 1) || !add_text(item, "origin", st, 2))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	return 0;
}

static int verification_row(cJSON *item, sqlite3_stmt *st, struct fg_err *err)
{
	int rc;

	if (!cJSON_AddNumberToObject(item, "id", (double)sqlite3_column_int64(st, 0)) ||
	    !add_text(item, "verdict", st, 1))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	rc = add_json(item, "result", st, 2, err);
	if (rc)
		return rc;
	if (!add_text(item, "created_at", st, 3))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	/* The rows as posted, for charts. */
	return fg_store_add_rows_member(item, (const char *)sqlite3_column_text(st, 4),
					(size_t)sqlite3_column_bytes(st, 4), err);
}

static int fleet_row(cJSON *item, sqlite3_stmt *st, struct fg_err *err)
{
	int rc;

	if (!add_text(item, "host", st, 0) || !add_text(item, "runtime", st, 1) ||
	    !add_text(item, "runtime_reported", st, 2))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	rc = add_json(item, "observed", st, 3, err);
	if (rc)
		return rc;
	return add_text(item, "reported_at", st, 4) ? 0 : fg_err_set(err, FG_ENOMEM, "out of memory");
}

int fg_sqlite_artifact_get(struct fg_store *s, int64_t id, int raw, cJSON **out, struct fg_err *err)
{
	static const struct {
		const char *key;
		const char *sql;
		row_fn row;
	} lists[] = {
		{ "verdicts", sql_artifact_verdicts, verdict_row },
		{ "verifications", sql_artifact_verifications, verification_row },
	};
	sqlite3_stmt *st = NULL;
	cJSON *doc = NULL, *prints, *runtime_doc = NULL;
	int rc;

	if (!s || !out)
		return fg_err_set(err, FG_EINPUT, "reading an artifact: no store or no output");
	doc = cJSON_CreateObject();
	if (!doc)
		return fg_err_set(err, FG_ENOMEM, "reading artifact %lld: out of memory", (long long)id);
	/* One snapshot: a verification landing meanwhile shows up whole or not at all. */
	rc = fg_sql_begin_read(s, err);
	if (rc)
		goto out;
	rc = fg_sql_get(s, sql_artifact_doc, &st, err);
	if (rc)
		goto out;
	sqlite3_bind_int64(st, 1, id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE) {
		rc = fg_err_set(err, FG_ENOTFOUND, "artifact %lld: no such artifact", (long long)id);
		goto out;
	}
	if (rc != SQLITE_ROW) {
		rc = fg_sql_fail(s, rc, err, "reading an artifact");
		goto out;
	}
	if (!cJSON_AddNumberToObject(doc, "id", (double)sqlite3_column_int64(st, 0)) ||
	    !add_text(doc, "source", st, 1) || !add_text(doc, "path", st, 2) || !add_text(doc, "family", st, 3) ||
	    !add_text(doc, "fingerprint", st, 4) || !add_text(doc, "digest", st, 9) ||
	    !add_text(doc, "head_fingerprint", st, 10) || !cJSON_AddBoolToObject(doc, "ok", sqlite3_column_int(st, 5)) ||
	    !add_text(doc, "created_at", st, 6)) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	rc = (raw ? add_raw : add_json)(doc, "report", st, 7, err);
	if (!rc)
		rc = (raw ? add_raw : add_json)(doc, "provenance", st, 8, err);
	if (!rc)
		rc = add_json(doc, "mtplx_runtime", st, 11, err);
	if (rc)
		goto out;
	/* mtplx_runtime goes last with fleet, after the documented v1 keys. */
	runtime_doc = cJSON_DetachItemFromObjectCaseSensitive(doc, "mtplx_runtime");
	fg_sql_put(st);
	st = NULL;
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		rc = fg_sql_get(s, lists[i].sql, &st, err);
		if (rc)
			goto out;
		sqlite3_bind_int64(st, 1, id);
		rc = add_rows(s, doc, lists[i].key, st, lists[i].row, err);
		if (rc)
			goto out;
		fg_sql_put(st);
		st = NULL;
	}
	/* docs/interfaces.md promises the fingerprints too: {file: sha256}. */
	prints = cJSON_AddObjectToObject(doc, "fingerprints");
	if (!prints) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	rc = fg_sql_get(s, sql_artifact_fingerprints, &st, err);
	if (rc)
		goto out;
	sqlite3_bind_int64(st, 1, id);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (!cJSON_AddStringToObject(prints, (const char *)sqlite3_column_text(st, 0),
					     (const char *)sqlite3_column_text(st, 1))) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			goto out;
		}
	}
	if (rc != SQLITE_DONE) {
		rc = fg_sql_fail(s, rc, err, "reading fingerprints");
		goto out;
	}
	fg_sql_put(st);
	st = NULL;
	if (!cJSON_AddItemToObject(doc, "mtplx_runtime", runtime_doc ? runtime_doc : cJSON_CreateNull())) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	runtime_doc = NULL;
	rc = fg_sql_get(s, sql_artifact_fleet, &st, err);
	if (rc)
		goto out;
	sqlite3_bind_int64(st, 1, id);
	rc = add_rows(s, doc, "fleet", st, fleet_row, err);
	if (rc)
		goto out;
	fg_sql_put(st);
	st = NULL;
	rc = fg_sql_commit(s, err);
	if (rc)
		goto out;
	*out = doc;
	doc = NULL;
out:
	fg_sql_put(st);
	if (rc) {
		fg_sql_rollback(s);
		if (rc != FG_ENOTFOUND)
			fg_err_prefix(err, rc, "reading artifact %lld: ", (long long)id);
	}
	cJSON_Delete(runtime_doc);
	cJSON_Delete(doc);
	return rc;
}

static const char sql_artifact_by_fingerprint[] =
	"SELECT max(id) FROM artifacts WHERE head_fingerprint = ?1 OR fingerprint = ?1";

int fg_sqlite_artifact_by_fingerprint(struct fg_store *s, const char *fingerprint, int64_t *id, struct fg_err *err)
{
	sqlite3_stmt *st;
	int rc;

	if (!s || !id || !fingerprint || !*fingerprint)
		return fg_err_set(err, FG_EINPUT, "finding an artifact: no store, fingerprint or output");
	rc = fg_sql_get(s, sql_artifact_by_fingerprint, &st, err);
	if (rc)
		return rc;
	fg_sql_bind_text(st, 1, fingerprint);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) {
		*id = sqlite3_column_int64(st, 0);
		rc = 0;
	} else if (rc == SQLITE_ROW) {
		rc = fg_err_set(err, FG_ENOTFOUND, "no artifact has fingerprint '%s'", fingerprint);
	} else {
		rc = fg_sql_fail(s, rc, err, "finding an artifact by fingerprint");
	}
	fg_sql_put(st);
	return rc;
}

/* ---- resolving what a fleet report names ---- */

/*
 * Every artifact key names, by each identity in turn (column 7 says which:
 * 1 digest, 2 head fingerprint, 3 legacy fingerprint), or the one want_id
 * names (column 7 = 0).  Each arm walks its own index.
 */
static const char sql_resolve[] =
	"SELECT id, digest, head_fingerprint, fingerprint, source, path, created_at, 1 FROM artifacts WHERE digest = ?1"
	" UNION ALL SELECT id, digest, head_fingerprint, fingerprint, source, path, created_at, 2 FROM artifacts"
	"  WHERE head_fingerprint = ?1"
	" UNION ALL SELECT id, digest, head_fingerprint, fingerprint, source, path, created_at, 3 FROM artifacts"
	"  WHERE fingerprint = ?1"
	" UNION ALL SELECT id, digest, head_fingerprint, fingerprint, source, path, created_at, 0 FROM artifacts"
	"  WHERE id = ?2"
	" LIMIT 200";

int fg_sqlite_artifact_resolve(struct fg_store *s, const char *key, const char *digest, int64_t want_id,
			       int64_t *id, enum fg_artifact_match *how, int *ambiguous, cJSON **candidates,
			       struct fg_err *err)
{
	struct fg_store_resolver r;
	sqlite3_stmt *st;
	int rc = fg_store_resolver_init(&r, err);

	if (rc)
		return rc;
	/* One snapshot: the candidates listed are the ones the decision saw. */
	rc = fg_sql_begin_read(s, err);
	if (!rc)
		rc = fg_sql_get(s, sql_resolve, &st, err);
	if (rc) {
		fg_sql_rollback(s);
		fg_store_resolver_free(&r);
		return rc;
	}
	fg_sql_bind_text(st, 1, key ? key : "");
	sqlite3_bind_int64(st, 2, want_id);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct fg_store_resolve_row row = {
			.id = sqlite3_column_int64(st, 0),
			.by = sqlite3_column_int(st, 7),
			.digest = (const char *)sqlite3_column_text(st, 1),
			.head_fingerprint = (const char *)sqlite3_column_text(st, 2),
			.fingerprint = (const char *)sqlite3_column_text(st, 3),
			.source = (const char *)sqlite3_column_text(st, 4),
			.path = (const char *)sqlite3_column_text(st, 5),
			.created_at = (const char *)sqlite3_column_text(st, 6),
		};

		if ((rc = fg_store_resolver_row(&r, &row, err)) != 0)
			break;
	}
	/* rc: SQLITE_DONE, a SQLite failure (> 0), or the resolver's FG_E* (< 0). */
	if (rc > 0 && rc != SQLITE_DONE)
		rc = fg_sql_fail(s, rc, err, "resolving an artifact");
	fg_sql_put(st);
	fg_sql_rollback(s);
	if (rc != SQLITE_DONE) {
		fg_store_resolver_free(&r);
		return rc;
	}
	return fg_store_resolver_decide(&r, key, digest, want_id, id, how, ambiguous, candidates, err);
}

/* ---- listing ---- */

/*
 * One statement per filter combination, each able to walk an index in id
 * order and stop at the limit: by verdict the (code, artifact_id) index
 * drives, by family the (family) index, else the table itself.
 */
#define ITEM_COLS                                                                     \
	"a.id, a.source, a.family, a.fingerprint, a.ok, a.created_at,"                \
	" (SELECT json_group_array(code) FROM"                                        \
	" (SELECT code FROM verdicts WHERE artifact_id = a.id ORDER BY id)),"         \
	" a.digest, a.head_fingerprint"

static const char sql_list_all[] =
	"SELECT " ITEM_COLS " FROM artifacts a WHERE a.id < ?1 ORDER BY a.id DESC LIMIT ?2";
static const char sql_list_family[] =
	"SELECT " ITEM_COLS " FROM artifacts a WHERE a.family = ?4 AND a.id < ?1 ORDER BY a.id DESC LIMIT ?2";
static const char sql_list_verdict[] =
	"SELECT " ITEM_COLS " FROM verdicts v JOIN artifacts a ON a.id = v.artifact_id"
	" WHERE v.code = ?3 AND v.artifact_id < ?1 ORDER BY v.artifact_id DESC LIMIT ?2";
static const char sql_list_both[] =
	"SELECT " ITEM_COLS " FROM verdicts v JOIN artifacts a ON a.id = v.artifact_id"
	" WHERE v.code = ?3 AND a.family = ?4 AND v.artifact_id < ?1 ORDER BY v.artifact_id DESC LIMIT ?2";

static int list_item(cJSON *arr, sqlite3_stmt *st, struct fg_err *err)
{
	cJSON *item = cJSON_CreateObject();
	int rc;

	if (!item || !cJSON_AddItemToArray(arr, item)) {
		cJSON_Delete(item);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	if (!cJSON_AddNumberToObject(item, "id", (double)sqlite3_column_int64(st, 0)) ||
	    !add_text(item, "source", st, 1) || !add_text(item, "family", st, 2) ||
	    !add_text(item, "fingerprint", st, 3) || !add_text(item, "digest", st, 7) ||
	    !add_text(item, "head_fingerprint", st, 8) || !cJSON_AddBoolToObject(item, "ok", sqlite3_column_int(st, 4)))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	rc = add_json(item, "verdicts", st, 6, err);
	if (rc)
		return rc;
	if (!add_text(item, "created_at", st, 5))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	return 0;
}

int fg_sqlite_artifact_list(struct fg_store *s, const char *verdict, const char *family, int64_t cursor, int limit,
			   cJSON **out, int64_t *next, struct fg_err *err)
{
	sqlite3_stmt *st = NULL;
	const char *sql;
	int rc;

	if (!s || !out || !next)
		return fg_err_set(err, FG_EINPUT, "listing artifacts: no store or no output");
	if (cursor < 0)
		return fg_err_set(err, FG_EINPUT, "listing artifacts: cursor %lld is negative", (long long)cursor);
	if (verdict && !*verdict)
		verdict = NULL;
	if (family && !*family)
		family = NULL;
	limit = fg_sql_clamp_limit(limit);
	sql = verdict ? (family ? sql_list_both : sql_list_verdict) : (family ? sql_list_family : sql_list_all);
	rc = fg_sql_get(s, sql, &st, err);
	if (rc)
		return fg_err_prefix(err, rc, "listing artifacts: ");
	sqlite3_bind_int64(st, 1, cursor > 0 ? cursor : INT64_MAX);
	sqlite3_bind_int(st, 2, limit);
	if (verdict)
		fg_sql_bind_text(st, 3, verdict);
	if (family)
		fg_sql_bind_text(st, 4, family);
	rc = fg_sql_page(s, st, limit, list_item, out, next, "listing artifacts", err);
	return rc ? fg_err_prefix(err, rc, "listing artifacts: ") : 0;
}

static const char sql_artifact_runtime[] =
	"SELECT a.path, r.doc FROM artifacts a LEFT JOIN artifact_runtime r ON r.artifact_id = a.id WHERE a.id = ?1";

int fg_sqlite_artifact_runtime(struct fg_store *s, int64_t id, char *path, size_t cap, cJSON **runtime,
			       struct fg_err *err)
{
	sqlite3_stmt *st;
	int rc = fg_sql_get(s, sql_artifact_runtime, &st, err);

	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW && (size_t)sqlite3_column_bytes(st, 0) >= cap) {
		rc = fg_err_set(err, FG_ESTATE, "artifact %lld: its stored path is longer than %zu bytes", (long long)id,
				cap - 1);
	} else if (rc == SQLITE_ROW) {
		fg_sql_column_copy(st, 0, path, cap);
		rc = sqlite3_column_type(st, 1) == SQLITE_NULL ? 0
			: fg_sql_column_json(st, 1, runtime, err, "the artifact's mtplx_runtime.json");
	} else if (rc == SQLITE_DONE) {
		rc = fg_err_set(err, FG_ENOTFOUND, "artifact %lld: no such artifact", (long long)id);
	} else {
		rc = fg_sql_fail(s, rc, err, "reading an artifact's runtime document");
	}
	fg_sql_put(st);
	return rc;
}

/* ---- verifications ---- */

static const char sql_runtime_doc[] =
	"SELECT r.doc, v.created_at FROM artifact_runtime r, verifications v WHERE r.artifact_id = ?1 AND v.id = ?2";
static const char sql_runtime_update[] = "UPDATE artifact_runtime SET doc = ?2 WHERE artifact_id = ?1";

/*
 * The runtime document forged wrote for an MTPLX target (its
 * forge_provenance names forged_version) takes the verification, as MTPLX's
 * own stamp does after its verify (mtplx.h).  A document read from an
 * inspected MTPLX pack is that pack's, and left as read.
 */
static int restamp_runtime(struct fg_store *s, int64_t artifact_id, int64_t verification, const cJSON *result,
			   int *restamped, struct fg_err *err)
{
	char when[32];
	sqlite3_stmt *st;
	cJSON *doc = NULL;
	char *text = NULL;
	int rc = fg_sql_get(s, sql_runtime_doc, &st, err);

	if (rc)
		return rc;
	sqlite3_bind_int64(st, 1, artifact_id);
	sqlite3_bind_int64(st, 2, verification);
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		rc = rc == SQLITE_DONE ? 0 : fg_sql_fail(s, rc, err, "reading the runtime document");
		fg_sql_put(st);
		return rc;
	}
	fg_sql_column_copy(st, 1, when, sizeof(when));
	rc = fg_sql_column_json(st, 0, &doc, err, "the artifact's mtplx_runtime.json");
	fg_sql_put(st);
	if (rc)
		return rc;
	if (!cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "forge_provenance"),
					      "forged_version")) {
		cJSON_Delete(doc);
		return 0;
	}
	rc = fg_mtplx_runtime_stamp(doc, result, when, err);
	if (!rc && !(text = cJSON_PrintUnformatted(doc)))
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	cJSON_Delete(doc);
	if (!rc)
		rc = fg_sql_get(s, sql_runtime_update, &st, err);
	if (!rc) {
		sqlite3_bind_int64(st, 1, artifact_id);
		fg_sql_bind_text(st, 2, text);
		rc = fg_sql_exec(s, st, err, "restamping the runtime document");
	}
	cJSON_free(text);
	if (!rc)
		*restamped = 1;
	return rc;
}

static const char sql_verification_insert[] =
	"INSERT INTO verifications (artifact_id, rows, result, verdict, created_at)"
	" VALUES (?1, ?2, ?3, ?4, " FG_SQL_NOW ")";
/*
 * The previous verification's verdict row goes unless it is this one's code
 * and severity (a row an older table gave another severity is replaced),
 * which then stays as it is (sql_verdict_insert does nothing): an unchanged
 * verdict, the common case, writes no page of the verdict table, its two
 * indexes or the counters its triggers keep.
 */
static const char sql_verdicts_drop_verification[] =
	"DELETE FROM verdicts WHERE artifact_id = ?1 AND origin = 'verification' AND (code IS NOT ?2 OR severity IS NOT ?3)";

int fg_sqlite_verification_put(struct fg_store *s, int64_t artifact_id, const char *rows_json,
			       const struct fg_verdict_row *row, const cJSON *result, const char *result_text, int64_t *id,
			       int *restamped, struct fg_err *err)
{
	sqlite3_stmt *st = NULL;
	const char *verdict = row->name;
	int64_t new_id = 0;
	int rc;

	*restamped = 0;
	rc = fg_sql_begin(s, err);
	if (rc)
		goto out;
	rc = fg_sql_get(s, sql_verification_insert, &st, err);
	if (rc)
		goto out;
	sqlite3_bind_int64(st, 1, artifact_id);
	fg_sql_bind_text(st, 2, rows_json);
	fg_sql_bind_text(st, 3, result_text);
	fg_sql_bind_text(st, 4, verdict);
	rc = sqlite3_step(st);
	if (rc == SQLITE_CONSTRAINT_FOREIGNKEY) {
		rc = fg_err_set(err, FG_ENOTFOUND, "artifact %lld: no such artifact", (long long)artifact_id);
		goto out;
	}
	if (rc != SQLITE_DONE) {
		rc = fg_sql_fail(s, rc, err, "inserting a verification");
		goto out;
	}
	new_id = sqlite3_last_insert_rowid(s->db);
	fg_sql_put(st);
	rc = fg_sql_get(s, sql_verdicts_drop_verification, &st, err);
	if (rc)
		goto out;
	sqlite3_bind_int64(st, 1, artifact_id);
	fg_sql_bind_text(st, 2, verdict);
	fg_sql_bind_text(st, 3, fg_severity_name(row->severity));
	rc = fg_sql_exec(s, st, err, "replacing the verification verdict");
	st = NULL;
	if (!rc)
		rc = add_verdict(s, artifact_id, verdict, fg_severity_name(row->severity), "verification", err);
	if (!rc)
		rc = refresh_health(s, artifact_id, err);
	if (!rc)
		rc = restamp_runtime(s, artifact_id, new_id, result, restamped, err);
	if (!rc)
		rc = fg_sql_commit(s, err);
	if (!rc && id)
		*id = new_id;
out:
	fg_sql_put(st);
	if (rc) {
		fg_sql_rollback(s);
		if (rc != FG_ENOTFOUND)
			fg_err_prefix(err, rc, "storing a verification of artifact %lld: ", (long long)artifact_id);
	}
	return rc;
}
