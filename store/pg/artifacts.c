/*
 * artifacts.c: artifacts on PostgreSQL, and what hangs off them (the same
 * rows and rules as sqlite/artifacts.c): the stored report and provenance,
 * one verdict row per code, file fingerprints, after-load probes, and
 * verification runs; the derived unhealthy flag is recomputed in every
 * transaction that changes verdicts.  Writes NOTIFY forged_data, so other
 * instances drop their cached fleet health at the commit.
 */
#include "store/pg/pg.h"

#include "forge/model/mtplx.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The rule of store.h: an error-severity static verdict, or a latest verification verdict of $2. */
static const char sql_refresh_health[] =
	"UPDATE artifacts SET unhealthy = x.v FROM (SELECT"
	" (EXISTS (SELECT 1 FROM verdicts WHERE artifact_id = $1 AND origin = 'static' AND severity = 'error')"
	"  OR coalesce((SELECT verdict FROM verifications WHERE artifact_id = $1 ORDER BY id DESC LIMIT 1) = $2,"
	"   false)) AS v) x"
	" WHERE id = $1 AND unhealthy IS DISTINCT FROM x.v";

static int refresh_health(struct fg_store *s, int64_t id, struct fg_err *err)
{
	struct fg_pg_args a = { 0 };

	fg_pg_arg_int(&a, id);
	fg_pg_arg_text(&a, fg_verdict_table[FG_V_MTP_ACCEPTANCE_COLLAPSED].name);
	return fg_pg_query(s, sql_refresh_health, &a, NULL, err, "updating the artifact's health");
}

/* ---- storing an artifact ---- */

struct file_ctx {
	struct fg_store *s;
	int64_t id;
};

static int add_fingerprint(void *ctx, const char *file, const char *sha, struct fg_err *err)
{
	const struct file_ctx *c = ctx;
	struct fg_pg_args a = { 0 };

	fg_pg_arg_int(&a, c->id);
	fg_pg_arg_text(&a, file);
	fg_pg_arg_text(&a, sha);
	return fg_pg_query(c->s,
			   "INSERT INTO fingerprints (artifact_id, file, sha256) VALUES ($1, $2, $3)"
			   " ON CONFLICT (artifact_id, file) DO UPDATE SET sha256 = excluded.sha256",
			   &a, NULL, err, "storing a file fingerprint");
}

static int add_verdict(struct fg_store *s, int64_t id, const char *code, const char *severity, const char *origin,
		       struct fg_err *err)
{
	struct fg_pg_args a = { 0 };

	fg_pg_arg_int(&a, id);
	fg_pg_arg_text(&a, code);
	fg_pg_arg_text(&a, severity);
	fg_pg_arg_text(&a, origin);
	/* A code raised for two tensor sets is one row; the first severity stays. */
	return fg_pg_query(s,
			   "INSERT INTO verdicts (artifact_id, code, severity, origin) VALUES ($1, $2, $3, $4)"
			   " ON CONFLICT (artifact_id, code) DO NOTHING",
			   &a, NULL, err, "storing a verdict");
}

static int add_probes(struct fg_store *s, int64_t id, const cJSON *report, struct fg_err *err)
{
	const cJSON *r;

	cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(report, "runtimes")) {
		const char *rt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "runtime"));
		const cJSON *probe = cJSON_GetObjectItemCaseSensitive(r, "trunk_probe_after");
		struct fg_pg_args a = { 0 };
		int rc;

		if (!rt || !*rt || strlen(rt) > FG_STORE_RUNTIME_MAX || !cJSON_IsNumber(probe) ||
		    !isfinite(probe->valuedouble))
			continue;
		fg_pg_arg_int(&a, id);
		fg_pg_arg_text(&a, rt);
		fg_pg_arg_double(&a, probe->valuedouble);
		rc = fg_pg_query(s,
				 "INSERT INTO artifact_probes (artifact_id, runtime, probe_after) VALUES ($1, $2, $3)"
				 " ON CONFLICT (artifact_id, runtime) DO UPDATE SET probe_after = excluded.probe_after",
				 &a, NULL, err, "storing a runtime's probe");
		if (rc)
			return rc;
	}
	return 0;
}

static int insert_rows(struct fg_store *s, const struct fg_store_artifact *d, int64_t job, int64_t *id,
		       struct fg_err *err)
{
	const struct fg_artifact_in *in = d->in;
	struct fg_pg_args a = { 0 };
	struct file_ctx files;
	PGresult *res = NULL;
	const cJSON *v;
	int64_t new_id;
	int rc;

	fg_pg_arg_text(&a, in->source);
	fg_pg_arg_text(&a, in->path);
	fg_pg_arg_text(&a, in->family && *in->family ? in->family : "unknown");
	fg_pg_arg_text(&a, in->fingerprint && *in->fingerprint ? in->fingerprint : NULL);
	fg_pg_arg_bool(&a, in->ok != 0);
	/* NAN means "no probe"; infinities are not a measurement either (both bind NULL). */
	fg_pg_arg_double(&a, in->probe_mean);
	fg_pg_arg_text(&a, in->head_convention && *in->head_convention ? in->head_convention : NULL);
	if (job > 0)
		fg_pg_arg_int(&a, job);
	else
		fg_pg_arg_text(&a, NULL);
	fg_pg_arg_text(&a, in->digest && *in->digest ? in->digest : NULL);
	fg_pg_arg_text(&a, in->head_fingerprint && *in->head_fingerprint ? in->head_fingerprint : NULL);
	rc = fg_pg_query(s,
			 "INSERT INTO artifacts (source, path, family, fingerprint, ok, probe_mean, head_convention, job_id,"
			 " digest, head_fingerprint) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
			 " ON CONFLICT (digest) WHERE digest IS NOT NULL DO NOTHING RETURNING id",
			 &a, &res, err, "inserting an artifact");
	if (rc)
		return rc;
	if (PQntuples(res) == 0) {
		/* Another instance stored the same bytes meanwhile (its commit came first). */
		PQclear(res);
		*id = 0;
		return 0;
	}
	new_id = fg_pg_int(res, 0, 0);
	PQclear(res);
	a.n = 0;
	fg_pg_arg_int(&a, new_id);
	fg_pg_arg_text(&a, d->report);
	fg_pg_arg_text(&a, d->provenance);
	fg_pg_arg_text(&a, d->runtime);
	rc = fg_pg_query(s,
			 "INSERT INTO artifact_docs (artifact_id, report, provenance, mtplx_runtime) VALUES ($1, $2, $3, $4)",
			 &a, NULL, err, "storing the report");
	if (rc)
		return rc;
	cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(in->report, "verdicts")) {
		rc = add_verdict(s, new_id, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(v, "code")),
				 cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(v, "severity")), "static", err);
		if (rc)
			return rc;
	}
	if (in->provenance) {
		files.s = s;
		files.id = new_id;
		rc = fg_store_each_file(in->provenance, add_fingerprint, &files, err);
		if (rc)
			return rc;
	}
	rc = add_probes(s, new_id, in->report, err);
	if (!rc)
		rc = refresh_health(s, new_id, err);
	if (!rc)
		rc = fg_pg_notify(s, FG_PG_CHANNEL_DATA, err);
	if (!rc)
		*id = new_id;
	return rc;
}

/*
 * The same bytes again (issue 13: one identity per artifact): 1 with *id
 * when an artifact has d's digest, filled in where it lacks what the new
 * copy knows; 0 when none.  FOR UPDATE: two instances storing the same
 * bytes at once are ordered by the digest's unique index (the second
 * insert waits for the first commit and fails 23505; fg_pg_artifact_insert
 * then finds the row).
 */
static int find_same(struct fg_store *s, const struct fg_store_artifact *d, int64_t *id, struct fg_err *err)
{
	const struct fg_artifact_in *in = d->in;
	struct fg_pg_args a = { 0 };
	PGresult *res = NULL;
	int64_t found;
	int rc;

	fg_pg_arg_text(&a, in->digest);
	rc = fg_pg_query(s, "SELECT id FROM artifacts WHERE digest = $1 FOR UPDATE", &a, &res, err,
			 "finding an artifact by digest");
	if (rc)
		return rc;
	if (PQntuples(res) == 0) {
		PQclear(res);
		return 0;
	}
	found = fg_pg_int(res, 0, 0);
	PQclear(res);
	if (in->head_fingerprint && *in->head_fingerprint) {
		a.n = 0;
		fg_pg_arg_int(&a, found);
		fg_pg_arg_text(&a, in->head_fingerprint);
		rc = fg_pg_query(s, "UPDATE artifacts SET head_fingerprint = $2 WHERE id = $1 AND head_fingerprint IS NULL",
				 &a, NULL, err, "filling in a head fingerprint");
		if (rc)
			return rc;
	}
	if (d->runtime) {
		a.n = 0;
		fg_pg_arg_int(&a, found);
		fg_pg_arg_text(&a, d->runtime);
		rc = fg_pg_query(s,
				 "UPDATE artifact_docs SET mtplx_runtime = $2 WHERE artifact_id = $1 AND mtplx_runtime IS NULL",
				 &a, NULL, err, "filling in a runtime document");
		if (rc)
			return rc;
	}
	*id = found;
	return 1;
}

int fg_pg_artifact_insert(struct fg_store *s, const struct fg_store_artifact *a, int64_t job, int64_t *id,
			  int *existed, struct fg_err *err)
{
	int rc = 0;

	*existed = 0;
	if (a->in->digest && *a->in->digest) {
		rc = find_same(s, a, id, err);
		if (rc == 1) {
			*existed = 1;
			return 0;
		}
	}
	if (!rc)
		rc = insert_rows(s, a, job, id, err);
	if (!rc && *id == 0) {
		rc = find_same(s, a, id, err);
		if (rc == 1) {
			*existed = 1;
			rc = 0;
		} else if (rc == 0) {
			rc = fg_err_set(err, FG_EINTERNAL, "an artifact with digest %s conflicted, then was not found",
					a->in->digest);
		}
	}
	return rc ? fg_err_prefix(err, rc, "storing artifact '%s': ", a->in->source) : 0;
}

int fg_pg_artifact_put(struct fg_store *s, const struct fg_store_artifact *a, int64_t *id, int *existed,
		       struct fg_err *err)
{
	int64_t new_id = 0;
	int rc = fg_pg_begin(s, err);

	if (!rc)
		rc = fg_pg_artifact_insert(s, a, 0, &new_id, existed, err);
	else
		fg_err_prefix(err, rc, "storing artifact '%s': ", a->in->source);
	if (!rc)
		rc = fg_pg_commit(s, err);
	if (rc) {
		fg_pg_rollback(s);
		return rc;
	}
	*id = new_id;
	return 0;
}

/* ---- reading one artifact ---- */

static int add_text(cJSON *o, const char *key, const PGresult *res, int r, int c)
{
	return (fg_pg_null(res, r, c) ? cJSON_AddNullToObject(o, key)
				      : cJSON_AddStringToObject(o, key, fg_pg_text(res, r, c))) != NULL;
}

/* The JSON text of column c under key: parsed, or (raw) as a cJSON_Raw item of the stored text. */
static int add_json(cJSON *o, const char *key, const PGresult *res, int r, int c, int raw, struct fg_err *err)
{
	cJSON *j = NULL;
	int rc = 0;

	if (raw) {
		j = fg_pg_null(res, r, c) ? cJSON_CreateNull() : cJSON_CreateRaw(fg_pg_text(res, r, c));
		if (!j)
			return fg_err_set(err, FG_ENOMEM, "%s: out of memory", key);
	} else {
		rc = fg_pg_json(res, r, c, &j, err, key);
	}
	if (rc)
		return rc;
	if (!cJSON_AddItemToObject(o, key, j)) {
		cJSON_Delete(j);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	return 0;
}

int fg_pg_artifact_runtime(struct fg_store *s, int64_t id, char *path, size_t cap, cJSON **runtime,
			   struct fg_err *err)
{
	struct fg_pg_args a = { 0 };
	PGresult *res = NULL;
	int rc;

	fg_pg_arg_int(&a, id);
	rc = fg_pg_query(s,
			 "SELECT a.path, d.mtplx_runtime FROM artifacts a JOIN artifact_docs d ON d.artifact_id = a.id"
			 " WHERE a.id = $1",
			 &a, &res, err, "reading an artifact's runtime document");
	if (rc)
		return rc;
	if (PQntuples(res) == 0)
		rc = fg_err_set(err, FG_ENOTFOUND, "artifact %lld: no such artifact", (long long)id);
	else if (strlen(fg_pg_text(res, 0, 0)) >= cap)
		rc = fg_err_set(err, FG_ESTATE, "artifact %lld: its stored path is longer than %zu bytes", (long long)id,
				cap - 1);
	else {
		fg_pg_copy(res, 0, 0, path, cap);
		rc = fg_pg_null(res, 0, 1) ? 0 : fg_pg_json(res, 0, 1, runtime, err, "the artifact's mtplx_runtime.json");
	}
	PQclear(res);
	return rc;
}

int fg_pg_artifact_get(struct fg_store *s, int64_t id, int raw, cJSON **out, struct fg_err *err)
{
	struct fg_pg_args a = { 0 };
	PGresult *res = NULL;
	cJSON *doc = NULL, *arr, *prints, *runtime_doc = NULL;
	int rc;

	if (!s || !out)
		return fg_err_set(err, FG_EINPUT, "reading an artifact: no store or no output");
	doc = cJSON_CreateObject();
	if (!doc)
		return fg_err_set(err, FG_ENOMEM, "reading artifact %lld: out of memory", (long long)id);
	fg_pg_arg_int(&a, id);
	/* One snapshot: a verification landing meanwhile shows up whole or not at all. */
	rc = fg_pg_begin_read(s, err);
	if (rc)
		goto out;
	rc = fg_pg_query(s,
			 "SELECT a.id, a.source, a.path, a.family, a.fingerprint, a.ok, " PG_TS("a.created_at")
			 ", d.report, d.provenance, a.digest, a.head_fingerprint, d.mtplx_runtime"
			 " FROM artifacts a JOIN artifact_docs d ON d.artifact_id = a.id WHERE a.id = $1",
			 &a, &res, err, "reading an artifact");
	if (rc)
		goto out;
	if (PQntuples(res) == 0) {
		rc = fg_err_set(err, FG_ENOTFOUND, "artifact %lld: no such artifact", (long long)id);
		goto out;
	}
	if (!cJSON_AddNumberToObject(doc, "id", (double)fg_pg_int(res, 0, 0)) || !add_text(doc, "source", res, 0, 1) ||
	    !add_text(doc, "path", res, 0, 2) || !add_text(doc, "family", res, 0, 3) ||
	    !add_text(doc, "fingerprint", res, 0, 4) || !add_text(doc, "digest", res, 0, 9) ||
	    !add_text(doc, "head_fingerprint", res, 0, 10) || !cJSON_AddBoolToObject(doc, "ok", fg_pg_bool(res, 0, 5)) ||
	    !add_text(doc, "created_at", res, 0, 6)) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	rc = add_json(doc, "report", res, 0, 7, raw, err);
	if (!rc)
		rc = add_json(doc, "provenance", res, 0, 8, raw, err);
	/* mtplx_runtime goes last with fleet, after the documented v1 keys. */
	if (!rc)
		rc = fg_pg_json(res, 0, 11, &runtime_doc, err, "mtplx_runtime");
	if (rc)
		goto out;
	PQclear(res);
	res = NULL;
	rc = fg_pg_query(s, "SELECT code, severity, origin FROM verdicts WHERE artifact_id = $1 ORDER BY id", &a,
			 &res, err, "verdicts");
	if (rc)
		goto out;
	arr = cJSON_AddArrayToObject(doc, "verdicts");
	if (!arr) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	for (int r = 0; r < PQntuples(res); r++) {
		cJSON *item = cJSON_CreateObject();

		if (!item || !cJSON_AddItemToArray(arr, item)) {
			cJSON_Delete(item);
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			goto out;
		}
		if (!add_text(item, "code", res, r, 0) || !add_text(item, "severity", res, r, 1) ||
		    !add_text(item, "origin", res, r, 2)) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			goto out;
		}
	}
	PQclear(res);
	res = NULL;
	rc = fg_pg_query(s,
			 "SELECT id, verdict, result, " PG_TS("created_at") ", rows FROM verifications"
			 " WHERE artifact_id = $1 ORDER BY id",
			 &a, &res, err, "verifications");
	if (rc)
		goto out;
	arr = cJSON_AddArrayToObject(doc, "verifications");
	if (!arr) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	for (int r = 0; r < PQntuples(res); r++) {
		cJSON *item = cJSON_CreateObject();

		if (!item || !cJSON_AddItemToArray(arr, item)) {
			cJSON_Delete(item);
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			goto out;
		}
		if (!cJSON_AddNumberToObject(item, "id", (double)fg_pg_int(res, r, 0)) ||
		    !add_text(item, "verdict", res, r, 1)) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			goto out;
		}
		rc = add_json(item, "result", res, r, 2, 0, err);
		if (rc)
			goto out;
		if (!add_text(item, "created_at", res, r, 3)) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			goto out;
		}
		/* The rows as posted, for charts. */
		rc = fg_store_add_rows_member(item, fg_pg_text(res, r, 4), (size_t)PQgetlength(res, r, 4), err);
		if (rc)
			goto out;
	}
	PQclear(res);
	res = NULL;
	prints = cJSON_AddObjectToObject(doc, "fingerprints");
	if (!prints) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	rc = fg_pg_query(s, "SELECT file, sha256 FROM fingerprints WHERE artifact_id = $1 ORDER BY file COLLATE \"C\"",
			 &a, &res, err, "reading fingerprints");
	if (rc)
		goto out;
	for (int r = 0; r < PQntuples(res); r++) {
		if (!cJSON_AddStringToObject(prints, fg_pg_text(res, r, 0), fg_pg_text(res, r, 1))) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			goto out;
		}
	}
	PQclear(res);
	res = NULL;
	if (!cJSON_AddItemToObject(doc, "mtplx_runtime", runtime_doc)) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	runtime_doc = NULL;
	/* What the fleet says of it: every standing report, with what the host observed. */
	rc = fg_pg_query(s,
			 "SELECT host, runtime, runtime_reported, observed, " PG_TS("reported_at") " FROM fleet_reports"
			 " WHERE artifact_id = $1 ORDER BY host COLLATE \"C\", runtime COLLATE \"C\"",
			 &a, &res, err, "reading the artifact's fleet");
	if (rc)
		goto out;
	arr = cJSON_AddArrayToObject(doc, "fleet");
	if (!arr) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	for (int r = 0; r < PQntuples(res); r++) {
		cJSON *item = cJSON_CreateObject();

		if (!item || !cJSON_AddItemToArray(arr, item)) {
			cJSON_Delete(item);
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			goto out;
		}
		if (!add_text(item, "host", res, r, 0) || !add_text(item, "runtime", res, r, 1) ||
		    !add_text(item, "runtime_reported", res, r, 2)) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			goto out;
		}
		rc = add_json(item, "observed", res, r, 3, 0, err);
		if (rc)
			goto out;
		if (!add_text(item, "reported_at", res, r, 4)) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			goto out;
		}
	}
	rc = fg_pg_commit(s, err);
	if (rc)
		goto out;
	*out = doc;
	doc = NULL;
out:
	PQclear(res);
	if (rc) {
		fg_pg_rollback(s);
		if (rc != FG_ENOTFOUND)
			fg_err_prefix(err, rc, "reading artifact %lld: ", (long long)id);
	}
	cJSON_Delete(runtime_doc);
	cJSON_Delete(doc);
	return rc;
}

int fg_pg_artifact_by_fingerprint(struct fg_store *s, const char *fingerprint, int64_t *id, struct fg_err *err)
{
	struct fg_pg_args a = { 0 };
	PGresult *res = NULL;
	int rc;

	if (!s || !id || !fingerprint || !*fingerprint)
		return fg_err_set(err, FG_EINPUT, "finding an artifact: no store, fingerprint or output");
	fg_pg_arg_text(&a, fingerprint);
	rc = fg_pg_query(s, "SELECT max(id) FROM artifacts WHERE head_fingerprint = $1 OR fingerprint = $1", &a, &res,
			 err, "finding an artifact by fingerprint");
	if (rc)
		return rc;
	if (PQntuples(res) == 1 && !fg_pg_null(res, 0, 0))
		*id = fg_pg_int(res, 0, 0);
	else
		rc = fg_err_set(err, FG_ENOTFOUND, "no artifact has fingerprint '%s'", fingerprint);
	PQclear(res);
	return rc;
}

/* ---- resolving what a fleet report names ---- */

int fg_pg_artifact_resolve(struct fg_store *s, const char *key, const char *digest, int64_t want_id, int64_t *id,
			   enum fg_artifact_match *how, int *ambiguous, cJSON **candidates, struct fg_err *err)
{
	struct fg_store_resolver r;
	struct fg_pg_args a = { 0 };
	PGresult *res = NULL;
	int rc = fg_store_resolver_init(&r, err);

	if (rc)
		return rc;
	fg_pg_arg_text(&a, key ? key : "");
	fg_pg_arg_int(&a, want_id);
	/* Each arm walks its own index (column 7: 1 digest, 2 head fingerprint, 3 legacy, 0 the id asked for). */
	rc = fg_pg_query(s,
			 "SELECT id, digest, head_fingerprint, fingerprint, source, path, " PG_TS("created_at")
			 ", 1 FROM artifacts WHERE digest = $1"
			 " UNION ALL SELECT id, digest, head_fingerprint, fingerprint, source, path, " PG_TS("created_at")
			 ", 2 FROM artifacts WHERE head_fingerprint = $1"
			 " UNION ALL SELECT id, digest, head_fingerprint, fingerprint, source, path, " PG_TS("created_at")
			 ", 3 FROM artifacts WHERE fingerprint = $1"
			 " UNION ALL SELECT id, digest, head_fingerprint, fingerprint, source, path, " PG_TS("created_at")
			 ", 0 FROM artifacts WHERE id = $2 LIMIT 200",
			 &a, &res, err, "resolving an artifact");
	for (int i = 0; !rc && i < PQntuples(res); i++) {
		struct fg_store_resolve_row row = {
			.id = fg_pg_int(res, i, 0),
			.by = (int)fg_pg_int(res, i, 7),
			.digest = fg_pg_null(res, i, 1) ? NULL : fg_pg_text(res, i, 1),
			.head_fingerprint = fg_pg_null(res, i, 2) ? NULL : fg_pg_text(res, i, 2),
			.fingerprint = fg_pg_null(res, i, 3) ? NULL : fg_pg_text(res, i, 3),
			.source = fg_pg_null(res, i, 4) ? NULL : fg_pg_text(res, i, 4),
			.path = fg_pg_null(res, i, 5) ? NULL : fg_pg_text(res, i, 5),
			.created_at = fg_pg_text(res, i, 6),
		};

		rc = fg_store_resolver_row(&r, &row, err);
	}
	PQclear(res);
	if (rc) {
		fg_store_resolver_free(&r);
		return rc;
	}
	return fg_store_resolver_decide(&r, key, digest, want_id, id, how, ambiguous, candidates, err);
}

/* ---- listing ---- */

#define ITEM_COLS                                                                                 \
	"a.id, a.source, a.family, a.fingerprint, a.ok, " PG_TS("a.created_at") ","                \
	" coalesce((SELECT json_agg(x.code ORDER BY x.id) FROM verdicts x WHERE x.artifact_id = a.id), '[]')::text," \
	" a.digest, a.head_fingerprint"

static const char sql_list_all[] =
	"SELECT " ITEM_COLS " FROM artifacts a WHERE a.id < $1 ORDER BY a.id DESC LIMIT $2";
static const char sql_list_family[] =
	"SELECT " ITEM_COLS " FROM artifacts a WHERE a.family = $3 AND a.id < $1 ORDER BY a.id DESC LIMIT $2";
static const char sql_list_verdict[] =
	"SELECT " ITEM_COLS " FROM verdicts v JOIN artifacts a ON a.id = v.artifact_id"
	" WHERE v.code = $3 AND v.artifact_id < $1 ORDER BY v.artifact_id DESC LIMIT $2";
static const char sql_list_both[] =
	"SELECT " ITEM_COLS " FROM verdicts v JOIN artifacts a ON a.id = v.artifact_id"
	" WHERE v.code = $3 AND a.family = $4 AND v.artifact_id < $1 ORDER BY v.artifact_id DESC LIMIT $2";

int fg_pg_artifact_list(struct fg_store *s, const char *verdict, const char *family, int64_t cursor, int limit,
			cJSON **out, int64_t *next, struct fg_err *err)
{
	struct fg_pg_args a = { 0 };
	PGresult *res = NULL;
	const char *sql;
	cJSON *arr = NULL;
	int rc, n;

	if (!s || !out || !next)
		return fg_err_set(err, FG_EINPUT, "listing artifacts: no store or no output");
	if (cursor < 0)
		return fg_err_set(err, FG_EINPUT, "listing artifacts: cursor %lld is negative", (long long)cursor);
	if (verdict && !*verdict)
		verdict = NULL;
	if (family && !*family)
		family = NULL;
	limit = fg_sql_clamp_limit(limit);
	fg_pg_arg_int(&a, cursor > 0 ? cursor : INT64_MAX);
	fg_pg_arg_int(&a, limit);
	if (verdict)
		fg_pg_arg_text(&a, verdict);
	if (family)
		fg_pg_arg_text(&a, family);
	sql = verdict ? (family ? sql_list_both : sql_list_verdict) : (family ? sql_list_family : sql_list_all);
	rc = fg_pg_query(s, sql, &a, &res, err, "listing artifacts");
	if (rc)
		return fg_err_prefix(err, rc, "listing artifacts: ");
	arr = cJSON_CreateArray();
	if (!arr)
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	n = PQntuples(res);
	for (int r = 0; !rc && r < n; r++) {
		cJSON *item = cJSON_CreateObject();

		if (!item || !cJSON_AddItemToArray(arr, item)) {
			cJSON_Delete(item);
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			break;
		}
		if (!cJSON_AddNumberToObject(item, "id", (double)fg_pg_int(res, r, 0)) ||
		    !add_text(item, "source", res, r, 1) || !add_text(item, "family", res, r, 2) ||
		    !add_text(item, "fingerprint", res, r, 3) || !add_text(item, "digest", res, r, 7) ||
		    !add_text(item, "head_fingerprint", res, r, 8) || !cJSON_AddBoolToObject(item, "ok", fg_pg_bool(res, r, 4))) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			break;
		}
		rc = add_json(item, "verdicts", res, r, 6, 0, err);
		if (!rc && !add_text(item, "created_at", res, r, 5))
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	if (!rc) {
		*next = n == limit && n > 0 ? fg_pg_int(res, n - 1, 0) : 0;
		*out = arr;
		arr = NULL;
	}
	PQclear(res);
	cJSON_Delete(arr);
	return rc ? fg_err_prefix(err, rc, "listing artifacts: ") : 0;
}

/* ---- verifications ---- */

/*
 * The runtime document forged wrote for an MTPLX target (its
 * forge_provenance names forged_version) takes the verification, as MTPLX's
 * own stamp does after its verify (mtplx.h).  A document read from an
 * inspected MTPLX pack is that pack's, and left as read.
 */
static int restamp_runtime(struct fg_store *s, int64_t artifact_id, int64_t verification, const cJSON *result,
			   int *restamped, struct fg_err *err)
{
	struct fg_pg_args a = { 0 };
	PGresult *res = NULL;
	cJSON *doc = NULL;
	char when[32], *text = NULL;
	int rc;

	fg_pg_arg_int(&a, artifact_id);
	fg_pg_arg_int(&a, verification);
	rc = fg_pg_query(s,
			 "SELECT d.mtplx_runtime, " PG_TS("v.created_at") " FROM artifact_docs d, verifications v"
			 " WHERE d.artifact_id = $1 AND v.id = $2",
			 &a, &res, err, "reading the runtime document");
	if (rc)
		return rc;
	if (PQntuples(res) == 0) {
		PQclear(res);
		return 0;
	}
	fg_pg_copy(res, 0, 1, when, sizeof(when));
	rc = fg_pg_json(res, 0, 0, &doc, err, "the artifact's mtplx_runtime.json");
	PQclear(res);
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
	if (!rc) {
		a.n = 0;
		fg_pg_arg_int(&a, artifact_id);
		fg_pg_arg_text(&a, text);
		rc = fg_pg_query(s, "UPDATE artifact_docs SET mtplx_runtime = $2 WHERE artifact_id = $1", &a, NULL, err,
				 "restamping the runtime document");
	}
	cJSON_free(text);
	if (!rc)
		*restamped = 1;
	return rc;
}

int fg_pg_verification_put(struct fg_store *s, int64_t artifact_id, const char *rows_json,
			   const struct fg_verdict_row *row, const cJSON *result, const char *result_text, int64_t *id,
			   int *restamped, struct fg_err *err)
{
	struct fg_pg_args a = { 0 };
	PGresult *res = NULL;
	int64_t new_id = 0;
	int rc;

	*restamped = 0;
	rc = fg_pg_begin(s, err);
	if (rc)
		goto out;
	fg_pg_arg_int(&a, artifact_id);
	fg_pg_arg_text(&a, rows_json);
	fg_pg_arg_text(&a, result_text);
	fg_pg_arg_text(&a, row->name);
	rc = fg_pg_query(s, "INSERT INTO verifications (artifact_id, rows, result, verdict) VALUES ($1, $2, $3, $4)"
			    " RETURNING id",
			 &a, &res, err, "inserting a verification");
	if (rc && fg_pg_failed_with(s, "23503")) {
		rc = fg_err_set(err, FG_ENOTFOUND, "artifact %lld: no such artifact", (long long)artifact_id);
		goto out;
	}
	if (rc)
		goto out;
	new_id = fg_pg_int(res, 0, 0);
	a.n = 0;
	fg_pg_arg_int(&a, artifact_id);
	fg_pg_arg_text(&a, row->name);
	fg_pg_arg_text(&a, fg_severity_name(row->severity));
	/* An unchanged verdict stays as it is (add_verdict does nothing): no row, index or counter rewritten. */
	rc = fg_pg_query(s,
			 "DELETE FROM verdicts WHERE artifact_id = $1 AND origin = 'verification'"
			 " AND (code IS DISTINCT FROM $2 OR severity IS DISTINCT FROM $3)",
			 &a, NULL, err, "replacing the verification verdict");
	if (!rc)
		rc = add_verdict(s, artifact_id, row->name, fg_severity_name(row->severity), "verification", err);
	if (!rc)
		rc = refresh_health(s, artifact_id, err);
	if (!rc)
		rc = restamp_runtime(s, artifact_id, new_id, result, restamped, err);
	if (!rc)
		rc = fg_pg_notify(s, FG_PG_CHANNEL_DATA, err);
	if (!rc)
		rc = fg_pg_commit(s, err);
	if (!rc && id)
		*id = new_id;
out:
	PQclear(res);
	if (rc) {
		fg_pg_rollback(s);
		if (rc != FG_ENOTFOUND)
			fg_err_prefix(err, rc, "storing a verification of artifact %lld: ", (long long)artifact_id);
	}
	return rc;
}
