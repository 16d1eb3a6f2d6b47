/*
 * fleet.c: on PostgreSQL, fleet reports (an upsert per (host, runtime)) and
 * the fleet health document, read in one REPEATABLE READ snapshot with the
 * same queries and the same document as sqlite/fleet.c and fleet_dist.c:
 * the counters the triggers keep, the unhealthy artifacts (served first,
 * capped), the served head conventions, the verdict matrix and the
 * after-load probe distribution.  Lists a document shows are ordered with
 * COLLATE "C", SQLite's byte order, so every instance and both backends
 * give the same document.
 */
#include "store/pg/pg.h"

#include <math.h>
#include <string.h>

int fg_pg_fleet_report(struct fg_store *s, const char *host, int64_t artifact_id, const char *runtime,
		       const char *runtime_reported, const char *text, struct fg_err *err)
{
	struct fg_pg_args a = { 0 };
	int rc = fg_pg_begin(s, err);

	fg_pg_arg_text(&a, host);
	fg_pg_arg_text(&a, runtime);
	fg_pg_arg_int(&a, artifact_id);
	fg_pg_arg_text(&a, text);
	fg_pg_arg_text(&a, runtime_reported ? runtime_reported : runtime);
	if (!rc)
		rc = fg_pg_query(s,
				 "INSERT INTO fleet_reports (host, runtime, artifact_id, observed, reported_at, runtime_reported)"
				 " VALUES ($1, $2, $3, $4, now(), $5)"
				 " ON CONFLICT (host, runtime) DO UPDATE SET artifact_id = excluded.artifact_id,"
				 " observed = excluded.observed, reported_at = excluded.reported_at,"
				 " runtime_reported = excluded.runtime_reported",
				 &a, NULL, err, "storing a fleet report");
	if (rc && fg_pg_failed_with(s, "23503"))
		rc = fg_err_set(err, FG_ENOTFOUND, "fleet report from '%s': no artifact %lld", host,
				(long long)artifact_id);
	if (!rc)
		rc = fg_pg_notify(s, FG_PG_CHANNEL_DATA, err);
	if (!rc)
		rc = fg_pg_commit(s, err);
	if (rc)
		fg_pg_rollback(s);
	return rc;
}

/* ---- health ---- */

#define UNHEALTHY_COLS                                                                                     \
	"a.id, a.source, a.family, a.fingerprint,"                                                         \
	" coalesce((SELECT json_agg(v.code ORDER BY v.id) FROM verdicts v WHERE v.artifact_id = a.id), '[]')::text," \
	" coalesce((SELECT json_agg(json_build_object('host', f.host, 'runtime', f.runtime,"                      \
	" 'runtime_reported', f.runtime_reported, 'observed', f.observed::json, 'reported_at', "                    \
	PG_TS("f.reported_at") ") ORDER BY f.host COLLATE \"C\", f.runtime COLLATE \"C\")"                      \
	" FROM fleet_reports f WHERE f.artifact_id = a.id), '[]')::text,"                                         \
	" a.digest, a.head_fingerprint"

static const char sql_unhealthy_served[] =
	"SELECT " UNHEALTHY_COLS " FROM artifacts a"
	" WHERE a.unhealthy AND a.id IN (SELECT artifact_id FROM fleet_reports) ORDER BY a.id DESC LIMIT $1";
static const char sql_unhealthy_unserved[] =
	"SELECT " UNHEALTHY_COLS " FROM artifacts a"
	" WHERE a.unhealthy AND NOT EXISTS (SELECT 1 FROM fleet_reports f WHERE f.artifact_id = a.id)"
	" ORDER BY a.id DESC LIMIT $1";

static int unhealthy_rows(struct fg_store *s, const char *sql, cJSON *arr, int *n, struct fg_err *err)
{
	struct fg_pg_args a = { 0 };
	PGresult *res = NULL;
	int rc;

	if (*n >= FG_STORE_UNHEALTHY_MAX)
		return 0;
	fg_pg_arg_int(&a, FG_STORE_UNHEALTHY_MAX - *n);
	rc = fg_pg_query(s, sql, &a, &res, err, "listing unhealthy artifacts");
	if (rc)
		return rc;
	for (int r = 0; r < PQntuples(res); r++) {
		cJSON *item = cJSON_CreateObject();
		cJSON *codes = NULL, *hosts = NULL;

		if (!item || !cJSON_AddItemToArray(arr, item)) {
			cJSON_Delete(item);
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			break;
		}
		if (!cJSON_AddNumberToObject(item, "artifact_id", (double)fg_pg_int(res, r, 0)) ||
		    !cJSON_AddStringToObject(item, "source", fg_pg_text(res, r, 1)) ||
		    !cJSON_AddStringToObject(item, "family", fg_pg_text(res, r, 2)) ||
		    !(fg_pg_null(res, r, 3) ? cJSON_AddNullToObject(item, "fingerprint")
					    : cJSON_AddStringToObject(item, "fingerprint", fg_pg_text(res, r, 3))) ||
		    !(fg_pg_null(res, r, 6) ? cJSON_AddNullToObject(item, "digest")
					    : cJSON_AddStringToObject(item, "digest", fg_pg_text(res, r, 6))) ||
		    !(fg_pg_null(res, r, 7) ? cJSON_AddNullToObject(item, "head_fingerprint")
					    : cJSON_AddStringToObject(item, "head_fingerprint", fg_pg_text(res, r, 7)))) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			break;
		}
		rc = fg_pg_json(res, r, 4, &codes, err, "unhealthy artifact verdicts");
		if (rc)
			break;
		if (!cJSON_AddItemToObject(item, "verdicts", codes)) {
			cJSON_Delete(codes);
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			break;
		}
		rc = fg_pg_json(res, r, 5, &hosts, err, "unhealthy artifact hosts");
		if (rc)
			break;
		if (!cJSON_AddItemToObject(item, "hosts", hosts)) {
			cJSON_Delete(hosts);
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			break;
		}
		(*n)++;
	}
	PQclear(res);
	return rc;
}

static int warnings(struct fg_store *s, cJSON *doc, struct fg_err *err)
{
	int64_t artifacts[2] = { 0, 0 }, reports[2] = { 0, 0 };
	PGresult *res = NULL;
	int rc = fg_pg_query(s,
			     "SELECT a.head_convention, count(DISTINCT a.id), count(*)"
			     " FROM fleet_reports f JOIN artifacts a ON a.id = f.artifact_id"
			     " WHERE a.head_convention IN ('delta', 'absolute') GROUP BY a.head_convention",
			     NULL, &res, err, "reading served head conventions");

	if (rc)
		return rc;
	for (int r = 0; r < PQntuples(res); r++) {
		int k = strcmp(fg_pg_text(res, r, 0), "delta") == 0 ? 0 : 1;

		artifacts[k] = fg_pg_int(res, r, 1);
		reports[k] = fg_pg_int(res, r, 2);
	}
	PQclear(res);
	return fg_store_warnings_section(doc, artifacts, reports, err);
}

static int verdict_matrix(struct fg_store *s, cJSON *doc, struct fg_err *err)
{
	cJSON *list = cJSON_AddArrayToObject(doc, "verdict_matrix");
	PGresult *res = NULL;
	int rc;

	if (!list)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	rc = fg_pg_query(s,
			 "SELECT family, code, severity, n FROM verdict_stats WHERE n > 0"
			 " ORDER BY family COLLATE \"C\", code COLLATE \"C\", severity COLLATE \"C\"",
			 NULL, &res, err, "counting verdicts by family");
	if (rc)
		return rc;
	for (int r = 0; r < PQntuples(res); r++) {
		cJSON *row = cJSON_CreateObject();

		if (!row || !cJSON_AddStringToObject(row, "family", fg_pg_text(res, r, 0)) ||
		    !cJSON_AddStringToObject(row, "code", fg_pg_text(res, r, 1)) ||
		    !cJSON_AddStringToObject(row, "severity", fg_pg_text(res, r, 2)) ||
		    !cJSON_AddNumberToObject(row, "count", (double)fg_pg_int(res, r, 3)) || !cJSON_AddItemToArray(list, row)) {
			cJSON_Delete(row);
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			break;
		}
	}
	PQclear(res);
	return rc;
}

static int probe_after_load(struct fg_store *s, cJSON *doc, struct fg_err *err)
{
	cJSON *by_family = NULL, *counted = NULL, *left = NULL;
	PGresult *res = NULL;
	int64_t matched = 0, reports = 0;
	int rc = fg_store_dist_section(doc, &counted, &left, &by_family, err);

	if (rc)
		return rc;
	rc = fg_pg_query(s,
			 "SELECT a.family, p.probe_after, count(*) FROM fleet_reports f"
			 " JOIN artifact_probes p ON p.artifact_id = f.artifact_id AND p.runtime = f.runtime"
			 " JOIN artifacts a ON a.id = f.artifact_id GROUP BY a.family, p.probe_after",
			 NULL, &res, err, "reading after-load probes");
	if (rc)
		return rc;
	for (int r = 0; r < PQntuples(res) && !rc; r++) {
		double v = fg_pg_double(res, r, 1);
		int64_t n = fg_pg_int(res, r, 2);

		if (fg_pg_null(res, r, 1) || !isfinite(v))
			continue;
		rc = fg_store_dist_add(by_family, fg_pg_text(res, r, 0), v, n, err);
		matched += n;
	}
	PQclear(res);
	if (rc)
		return rc;
	rc = fg_store_dist_bands(cJSON_GetObjectItemCaseSensitive(doc, "probe_after_load"), by_family, err);
	if (rc)
		return rc;
	rc = fg_pg_query(s, "SELECT count(*) FROM fleet_reports", NULL, &res, err, "counting fleet reports");
	if (rc)
		return rc;
	reports = fg_pg_int(res, 0, 0);
	PQclear(res);
	cJSON_SetNumberValue(counted, (double)matched);
	cJSON_SetNumberValue(left, (double)(reports > matched ? reports - matched : 0));
	return 0;
}

/* probe_qnorm v2 (fleet_v2.c): the after-load probe of every served (artifact, runtime), by artifact. */
static int probe_section(struct fg_store *s, cJSON *doc, struct fg_err *err)
{
	struct fg_probe_acc *acc = fg_store_probe_acc_new();
	PGresult *res = NULL;
	int64_t total;
	int rc;

	if (!acc)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	rc = fg_pg_query(s,
			 "SELECT a.id, a.family, p.probe_after FROM fleet_reports f"
			 " JOIN artifact_probes p ON p.artifact_id = f.artifact_id AND p.runtime = f.runtime"
			 " JOIN artifacts a ON a.id = f.artifact_id ORDER BY a.id",
			 NULL, &res, err, "reading served after-load probes");
	for (int r = 0; !rc && r < PQntuples(res); r++)
		if (!fg_pg_null(res, r, 2))
			fg_store_probe_acc_add(acc, fg_pg_int(res, r, 0), fg_pg_text(res, r, 1), fg_pg_double(res, r, 2));
	PQclear(res);
	res = NULL;
	if (!rc)
		rc = fg_pg_query(s, "SELECT count(*) FROM fleet_reports", NULL, &res, err, "counting fleet reports");
	if (!rc) {
		total = fg_pg_int(res, 0, 0);
		rc = fg_store_probe_qnorm_section(doc, acc, total, err);
	}
	PQclear(res);
	fg_store_probe_acc_free(acc);
	return rc;
}

/* hosts[] (at most FG_STORE_HOSTS_MAX) and hosts_total: every standing report. */
static int hosts_section(struct fg_store *s, cJSON *doc, struct fg_err *err)
{
	cJSON *list = cJSON_AddArrayToObject(doc, "hosts");
	struct fg_pg_args a = { 0 };
	PGresult *res = NULL;
	int rc;

	if (!list)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	fg_pg_arg_int(&a, FG_STORE_HOSTS_MAX);
	rc = fg_pg_query(s,
			 "SELECT f.host, f.runtime, f.runtime_reported, f.artifact_id, a.family, f.observed, "
			 PG_TS("f.reported_at") ", p.probe_after FROM fleet_reports f JOIN artifacts a ON a.id = f.artifact_id"
			 " LEFT JOIN artifact_probes p ON p.artifact_id = f.artifact_id AND p.runtime = f.runtime"
			 " ORDER BY f.host COLLATE \"C\", f.runtime COLLATE \"C\" LIMIT $1",
			 &a, &res, err, "listing host reports");
	for (int r = 0; !rc && r < PQntuples(res); r++) {
		struct fg_store_host_row row = {
			.host = fg_pg_text(res, r, 0),
			.runtime = fg_pg_text(res, r, 1),
			.runtime_reported = fg_pg_null(res, r, 2) ? NULL : fg_pg_text(res, r, 2),
			.artifact_id = fg_pg_int(res, r, 3),
			.family = fg_pg_text(res, r, 4),
			.observed = fg_pg_null(res, r, 5) ? NULL : fg_pg_text(res, r, 5),
			.reported_at = fg_pg_text(res, r, 6),
			.has_probe = !fg_pg_null(res, r, 7),
			.probe_after = fg_pg_double(res, r, 7),
		};

		rc = fg_store_host_item(list, &row, err);
	}
	PQclear(res);
	res = NULL;
	if (!rc)
		rc = fg_pg_query(s, "SELECT count(*) FROM fleet_reports", NULL, &res, err, "counting fleet reports");
	if (!rc && !cJSON_AddNumberToObject(doc, "hosts_total", (double)fg_pg_int(res, 0, 0)))
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	PQclear(res);
	return rc;
}

int fg_pg_fleet_health(struct fg_store *s, cJSON **out, struct fg_err *err)
{
	struct fg_sql_stats stats;
	cJSON *doc = NULL, *sec, *total, *verdicts, *families, *unhealthy;
	int n = 0, rc;

	if (!s || !out)
		return fg_err_set(err, FG_EINPUT, "fleet health: no store or no output");
	doc = cJSON_CreateObject();
	if (!doc || !cJSON_AddStringToObject(doc, "schema", FG_STORE_HEALTH_SCHEMA)) {
		cJSON_Delete(doc);
		return fg_err_set(err, FG_ENOMEM, "fleet health: out of memory");
	}
	/* One snapshot, so the counts and the lists agree with each other. */
	rc = fg_pg_begin_read(s, err);
	if (rc)
		goto out;
	sec = cJSON_AddObjectToObject(doc, "artifacts");
	total = sec ? cJSON_AddNumberToObject(sec, "total", 0) : NULL;
	verdicts = sec ? cJSON_AddObjectToObject(sec, "by_verdict") : NULL;
	families = sec ? cJSON_AddObjectToObject(sec, "by_family") : NULL;
	if (!total || !verdicts || !families) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	rc = fg_pg_read_stats(s, &stats, verdicts, families, err);
	if (rc)
		goto out;
	cJSON_SetNumberValue(total, (double)stats.artifacts);
	unhealthy = cJSON_AddArrayToObject(doc, "unhealthy");
	if (!unhealthy) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	rc = unhealthy_rows(s, sql_unhealthy_served, unhealthy, &n, err);
	if (!rc)
		rc = unhealthy_rows(s, sql_unhealthy_unserved, unhealthy, &n, err);
	if (rc)
		goto out;
	if (!cJSON_AddNumberToObject(doc, "unhealthy_total", (double)stats.unhealthy)) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	rc = probe_section(s, doc, err);
	if (!rc)
		rc = warnings(s, doc, err);
	if (!rc)
		rc = verdict_matrix(s, doc, err);
	if (!rc)
		rc = probe_after_load(s, doc, err);
	if (!rc)
		rc = hosts_section(s, doc, err);
	if (!rc)
		rc = fg_pg_commit(s, err);
	if (rc)
		goto out;
	*out = doc;
	doc = NULL;
out:
	if (rc) {
		fg_pg_rollback(s);
		fg_err_prefix(err, rc, "fleet health: ");
	}
	cJSON_Delete(doc);
	return rc;
}
