/*
 * fleet_dist.c: on SQLite, two distributions the fleet page draws, added to the fleet
 * health document (fleet.c) inside its read snapshot.
 *
 * verdict_matrix: verdict rows counted by (family, code, severity), so the
 * page can show verdict counts by family and severity: the verdict_stats
 * table the schema's triggers keep (db.c, version 2), so it costs the same
 * at 100,000 artifacts as at ten.
 *
 * probe_after_load: the trunk probe q-norm each serving host loads, per
 * family: for every fleet report (host, runtime), the after-load probe of
 * that runtime in the artifact's inspect report (report.runtimes[]
 * .trunk_probe_after, kept in artifact_probes; domain.md: 1.74 to 1.83 is
 * healthy for an absolute trunk, above 2.4 it was shifted twice).  A join
 * whose size is the fleet's.  Reports whose artifact has no probe for their
 * runtime (inspected for other runtimes) are counted in not_counted.
 */
#include "store/internal.h"

#include <math.h>
#include <string.h>

static const char sql_verdict_matrix[] =
	"SELECT family, code, severity, n FROM verdict_stats WHERE n > 0 ORDER BY family, code, severity";

static const char sql_probe_after_load[] =
	"SELECT a.family, p.probe_after, count(*) FROM fleet_reports f"
	" JOIN artifact_probes p ON p.artifact_id = f.artifact_id AND p.runtime = f.runtime"
	" JOIN artifacts a ON a.id = f.artifact_id GROUP BY a.family, p.probe_after";

static const char sql_report_count[] = "SELECT count(*) FROM fleet_reports";

static int verdict_matrix(struct fg_store *s, cJSON *doc, struct fg_err *err)
{
	cJSON *list = cJSON_AddArrayToObject(doc, "verdict_matrix");
	sqlite3_stmt *st;
	int rc;

	if (!list)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	rc = fg_sql_get(s, sql_verdict_matrix, &st, err);
	if (rc)
		return rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		cJSON *row = cJSON_CreateObject();

		/* row joins the list last, so a failure before that leaves it ours to free. */
		if (!row || !cJSON_AddStringToObject(row, "family", (const char *)sqlite3_column_text(st, 0)) ||
		    !cJSON_AddStringToObject(row, "code", (const char *)sqlite3_column_text(st, 1)) ||
		    !cJSON_AddStringToObject(row, "severity", (const char *)sqlite3_column_text(st, 2)) ||
		    !cJSON_AddNumberToObject(row, "count", (double)sqlite3_column_int64(st, 3)) ||
		    !cJSON_AddItemToArray(list, row)) {
			cJSON_Delete(row);
			fg_sql_put(st);
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		}
	}
	rc = rc == SQLITE_DONE ? 0 : fg_sql_fail(s, rc, err, "counting verdicts by family");
	fg_sql_put(st);
	return rc;
}

static int probe_after_load(struct fg_store *s, cJSON *doc, struct fg_err *err)
{
	cJSON *by_family = NULL, *counted = NULL, *left = NULL;
	sqlite3_stmt *st;
	int64_t matched = 0, reports = 0;
	int rc = fg_store_dist_section(doc, &counted, &left, &by_family, err);

	if (rc)
		return rc;
	rc = fg_sql_get(s, sql_probe_after_load, &st, err);
	if (rc)
		return rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int type = sqlite3_column_type(st, 1);
		double v = sqlite3_column_double(st, 1);
		int64_t n = sqlite3_column_int64(st, 2);

		if ((type != SQLITE_FLOAT && type != SQLITE_INTEGER) || !isfinite(v))
			continue;
		rc = fg_store_dist_add(by_family, (const char *)sqlite3_column_text(st, 0), v, n, err);
		if (rc) {
			fg_sql_put(st);
			return rc;
		}
		matched += n;
	}
	rc = rc == SQLITE_DONE ? 0 : fg_sql_fail(s, rc, err, "reading after-load probes");
	fg_sql_put(st);
	if (rc)
		return rc;
	rc = fg_store_dist_bands(cJSON_GetObjectItemCaseSensitive(doc, "probe_after_load"), by_family, err);
	if (rc)
		return rc;
	rc = fg_sql_get(s, sql_report_count, &st, err);
	if (rc)
		return rc;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		reports = sqlite3_column_int64(st, 0);
		rc = 0;
	} else {
		rc = fg_sql_fail(s, rc, err, "counting fleet reports");
	}
	fg_sql_put(st);
	if (rc)
		return rc;
	cJSON_SetNumberValue(counted, (double)matched);
	cJSON_SetNumberValue(left, (double)(reports > matched ? reports - matched : 0));
	return 0;
}

int fg_sql_fleet_distributions(struct fg_store *s, cJSON *doc, struct fg_err *err)
{
	int rc = verdict_matrix(s, doc, err);

	return rc ? rc : probe_after_load(s, doc, err);
}
