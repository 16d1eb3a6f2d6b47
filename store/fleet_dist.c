/*
 * fleet_dist.c: two distributions the fleet page draws, added to the fleet
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

#include "forge/model/family.h"

#define DIST_LO 0.0
#define DIST_WIDTH 0.05
#define DIST_BINS 80             /* [0, 4); below 0 goes to the first bin, 4 and above to the last */
#define BAND_LO 1.74             /* the healthy band, as fleet.c's buckets */
#define BAND_HI 1.83
#define DOUBLE_SHIFT_ABOVE 2.4

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

/* The bin of value v: [DIST_LO + i w, DIST_LO + (i + 1) w), clamped to the ends. */
static int bin_of(double v)
{
	double x = floor((v - DIST_LO) / DIST_WIDTH + 1e-9);

	if (x < 0)
		return 0;
	if (x >= DIST_BINS)
		return DIST_BINS - 1;
	return (int)x;
}

/* The counts array of family in by_family, made with DIST_BINS zeros on first use; NULL on ENOMEM. */
static cJSON *family_bins(cJSON *by_family, const char *family)
{
	cJSON *arr = cJSON_GetObjectItemCaseSensitive(by_family, family);

	if (arr)
		return arr;
	arr = cJSON_AddArrayToObject(by_family, family);
	for (int i = 0; arr && i < DIST_BINS; i++) {
		cJSON *zero = cJSON_CreateNumber(0);

		if (!zero || !cJSON_AddItemToArray(arr, zero)) {
			cJSON_Delete(zero);
			return NULL;
		}
	}
	return arr;
}

static int probe_after_load(struct fg_store *s, cJSON *doc, struct fg_err *err)
{
	cJSON *sec = cJSON_AddObjectToObject(doc, "probe_after_load");
	cJSON *band, *by_family, *counted, *left, *bands;
	const cJSON *fam;
	sqlite3_stmt *st;
	int64_t matched = 0, reports = 0;
	int rc;

	if (!sec || !cJSON_AddNumberToObject(sec, "lo", DIST_LO) ||
	    !cJSON_AddNumberToObject(sec, "bin_width", DIST_WIDTH) || !cJSON_AddNumberToObject(sec, "bins", DIST_BINS))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	band = cJSON_AddArrayToObject(sec, "healthy_band");
	if (!band || !cJSON_AddItemToArray(band, cJSON_CreateNumber(BAND_LO)) ||
	    !cJSON_AddItemToArray(band, cJSON_CreateNumber(BAND_HI)) ||
	    !cJSON_AddNumberToObject(sec, "double_shift_above", DOUBLE_SHIFT_ABOVE) ||
	    !(counted = cJSON_AddNumberToObject(sec, "reports", 0)) ||
	    !(left = cJSON_AddNumberToObject(sec, "not_counted", 0)) ||
	    !(by_family = cJSON_AddObjectToObject(sec, "by_family")))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	rc = fg_sql_get(s, sql_probe_after_load, &st, err);
	if (rc)
		return rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int type = sqlite3_column_type(st, 1);
		double v = sqlite3_column_double(st, 1);
		int64_t n = sqlite3_column_int64(st, 2);
		cJSON *bins, *cell;

		if ((type != SQLITE_FLOAT && type != SQLITE_INTEGER) || !isfinite(v))
			continue;
		bins = family_bins(by_family, (const char *)sqlite3_column_text(st, 0));
		cell = bins ? cJSON_GetArrayItem(bins, bin_of(v)) : NULL;
		if (!cell) {
			fg_sql_put(st);
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		}
		cJSON_SetNumberValue(cell, cell->valuedouble + (double)n);
		matched += n;
	}
	rc = rc == SQLITE_DONE ? 0 : fg_sql_fail(s, rc, err, "reading after-load probes");
	fg_sql_put(st);
	if (rc)
		return rc;
	/* Issue 13: each family's own band (null: none published), beside the shared healthy_band. */
	bands = cJSON_AddObjectToObject(sec, "bands");
	if (!bands)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	cJSON_ArrayForEach(fam, by_family) {
		const struct fg_probe_band *b = fg_family_probe_band(fam->string);
		cJSON *o = b ? cJSON_CreateObject() : cJSON_CreateNull(), *h = NULL, *p = NULL;

		if (b && o) {
			h = cJSON_AddArrayToObject(o, "healthy");
			p = cJSON_AddArrayToObject(o, "plausible");
		}
		if (!o || (b && (!h || !p || !cJSON_AddItemToArray(h, cJSON_CreateNumber(b->healthy_lo)) ||
				 !cJSON_AddItemToArray(h, cJSON_CreateNumber(b->healthy_hi)) ||
				 !cJSON_AddItemToArray(p, cJSON_CreateNumber(b->plausible_lo)) ||
				 !cJSON_AddItemToArray(p, cJSON_CreateNumber(b->plausible_hi)))) ||
		    !cJSON_AddItemToObject(bands, fam->string, o)) {
			cJSON_Delete(o);
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		}
	}
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
