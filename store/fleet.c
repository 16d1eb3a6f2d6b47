/*
 * fleet.c: what serving hosts say they run, and the fleet health document
 * built from it and from the artifacts' verdicts.
 *
 * A host reports (host, runtime, artifact); only the latest report per
 * (host, runtime) matters, so a report is an upsert on that key and the
 * table is the fleet as it stands.  Health reads one snapshot: the artifact
 * counts (total, unhealthy, by verdict, by family, by probe bucket) from the
 * artifact_stats table the schema's triggers keep, so they cost the same at
 * 100,000 artifacts as at ten; the unhealthy artifacts through the partial
 * index on artifacts.unhealthy, served ones first, capped at UNHEALTHY_MAX
 * with the full count beside them; and the head conventions the fleet
 * serves, a join whose size is the fleet's, not the catalog's.
 */
#include "store/internal.h"

#include <stdio.h>
#include <string.h>

#define HOST_MAX 253        /* a DNS name */
#define RUNTIME_MAX 64
#define UNHEALTHY_MAX 500   /* artifacts listed under "unhealthy" */

/* ---- reports ---- */

static const char sql_fleet_upsert[] =
	"INSERT INTO fleet_reports (host, runtime, artifact_id, observed, reported_at)"
	" VALUES (?1, ?2, ?3, ?4, " FG_SQL_NOW ")"
	" ON CONFLICT (host, runtime) DO UPDATE SET artifact_id = excluded.artifact_id,"
	" observed = excluded.observed, reported_at = excluded.reported_at";

int fg_store_fleet_report(struct fg_store *s, const char *host, int64_t artifact_id, const char *runtime,
			  const cJSON *observed, struct fg_err *err)
{
	sqlite3_stmt *st = NULL;
	char *text = NULL;
	int rc;

	if (!s)
		return fg_err_set(err, FG_EINPUT, "storing a fleet report: no store");
	if (!host || !*host || strlen(host) > HOST_MAX)
		return fg_err_set(err, FG_EINPUT, "storing a fleet report: the host is missing or over %d bytes",
				  HOST_MAX);
	if (!runtime || !*runtime || strlen(runtime) > RUNTIME_MAX)
		return fg_err_set(err, FG_EINPUT,
				  "storing a fleet report from '%s': the runtime is missing or over %d bytes", host,
				  RUNTIME_MAX);
	text = observed ? cJSON_PrintUnformatted(observed) : NULL;
	if (observed && !text)
		return fg_err_set(err, FG_ENOMEM, "storing a fleet report from '%s': out of memory", host);
	rc = fg_sql_get(s, sql_fleet_upsert, &st, err);
	if (rc)
		goto out;
	fg_sql_bind_text(st, 1, host);
	fg_sql_bind_text(st, 2, runtime);
	sqlite3_bind_int64(st, 3, artifact_id);
	fg_sql_bind_text(st, 4, text ? text : "{}");
	rc = sqlite3_step(st);
	if (rc == SQLITE_CONSTRAINT_FOREIGNKEY)
		rc = fg_err_set(err, FG_ENOTFOUND, "fleet report from '%s': no artifact %lld", host,
				(long long)artifact_id);
	else if (rc != SQLITE_DONE)
		rc = fg_sql_fail(s, rc, err, "storing a fleet report");
	else
		rc = 0;
out:
	fg_sql_put(st);
	cJSON_free(text);
	return rc;
}

/* ---- health ---- */

/*
 * The numeric ranges of the probe buckets (internal.h): [0, 1.25),
 * [1.25, 1.74), [1.74, 1.83] (the healthy band), (1.83, 2.4], (2.4, inf).
 * The first also takes anything below 0.  Which bucket a value falls in is
 * decided by the schema's probe_bucket column; these only label them.
 */
const struct fg_sql_probe_range fg_sql_probe_ranges[FG_SQL_PROBE_BUCKETS] = {
	{ 0.0, FG_QK_ABSOLUTE_MIN }, { FG_QK_ABSOLUTE_MIN, FG_QK_BAND_MIN }, { FG_QK_BAND_MIN, FG_QK_BAND_MAX },
	{ FG_QK_BAND_MAX, FG_QK_DOUBLE_ABOVE }, { FG_QK_DOUBLE_ABOVE, -1.0 },
};

#define UNHEALTHY_COLS                                                                          \
	"a.id, a.source, a.family, a.fingerprint,"                                              \
	" (SELECT json_group_array(code) FROM"                                                  \
	"  (SELECT code FROM verdicts WHERE artifact_id = a.id ORDER BY id)),"                  \
	" (SELECT json_group_array(json_object('host', f.host, 'runtime', f.runtime,"           \
	"  'reported_at', f.reported_at)) FROM fleet_reports f WHERE f.artifact_id = a.id)"

/* Served artifacts come first: those are the ones a host is answering with now. */
static const char sql_unhealthy_served[] =
	"SELECT " UNHEALTHY_COLS " FROM artifacts a"
	" WHERE a.id IN (SELECT artifact_id FROM fleet_reports) AND a.unhealthy = 1"
	" ORDER BY a.id DESC LIMIT ?1";
static const char sql_unhealthy_unserved[] =
	"SELECT " UNHEALTHY_COLS " FROM artifacts a"
	" WHERE a.unhealthy = 1 AND a.id NOT IN (SELECT artifact_id FROM fleet_reports)"
	" ORDER BY a.id DESC LIMIT ?1";

static const char sql_served_conventions[] =
	"SELECT a.head_convention, count(DISTINCT a.id), count(*)"
	" FROM fleet_reports f JOIN artifacts a ON a.id = f.artifact_id"
	" WHERE a.head_convention IN ('delta', 'absolute') GROUP BY a.head_convention";

static int artifacts_section(struct fg_store *s, cJSON *doc, struct fg_sql_stats *stats, struct fg_err *err)
{
	cJSON *sec = cJSON_AddObjectToObject(doc, "artifacts");
	cJSON *total, *verdicts, *families;
	int rc;

	if (!sec)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	/* Keys in the documented order: total first, its value filled in below. */
	total = cJSON_AddNumberToObject(sec, "total", 0);
	verdicts = cJSON_AddObjectToObject(sec, "by_verdict");
	families = cJSON_AddObjectToObject(sec, "by_family");
	if (!total || !verdicts || !families)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	rc = fg_sql_read_stats(s, stats, verdicts, families, err);
	if (rc)
		return rc;
	cJSON_SetNumberValue(total, (double)stats->artifacts);
	return 0;
}

/* Append the rows of sql (LIMIT ?1 = room) to arr; *n counts what arr holds. */
static int unhealthy_rows(struct fg_store *s, const char *sql, cJSON *arr, int *n, struct fg_err *err)
{
	sqlite3_stmt *st;
	int rc;

	if (*n >= UNHEALTHY_MAX)
		return 0;
	rc = fg_sql_get(s, sql, &st, err);
	if (rc)
		return rc;
	sqlite3_bind_int(st, 1, UNHEALTHY_MAX - *n);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		cJSON *item = cJSON_CreateObject();
		cJSON *codes = NULL, *hosts = NULL;
		const char *fp = (const char *)sqlite3_column_text(st, 3);

		if (!item || !cJSON_AddItemToArray(arr, item)) {
			cJSON_Delete(item);
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			goto out;
		}
		if (!cJSON_AddNumberToObject(item, "artifact_id", (double)sqlite3_column_int64(st, 0)) ||
		    !cJSON_AddStringToObject(item, "source", (const char *)sqlite3_column_text(st, 1)) ||
		    !cJSON_AddStringToObject(item, "family", (const char *)sqlite3_column_text(st, 2)) ||
		    !(fp ? cJSON_AddStringToObject(item, "fingerprint", fp) : cJSON_AddNullToObject(item, "fingerprint"))) {
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			goto out;
		}
		rc = fg_sql_column_json(st, 4, &codes, err, "unhealthy artifact verdicts");
		if (rc)
			goto out;
		if (!cJSON_AddItemToObject(item, "verdicts", codes)) {
			cJSON_Delete(codes);
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			goto out;
		}
		rc = fg_sql_column_json(st, 5, &hosts, err, "unhealthy artifact hosts");
		if (rc)
			goto out;
		if (!cJSON_AddItemToObject(item, "hosts", hosts)) {
			cJSON_Delete(hosts);
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
			goto out;
		}
		(*n)++;
	}
	rc = rc == SQLITE_DONE ? 0 : fg_sql_fail(s, rc, err, "listing unhealthy artifacts");
out:
	fg_sql_put(st);
	return rc;
}

static cJSON *range_json(size_t i)
{
	cJSON *r = cJSON_CreateArray();
	cJSON *lo = cJSON_CreateNumber(fg_sql_probe_ranges[i].lo);
	cJSON *hi = fg_sql_probe_ranges[i].hi < 0 ? cJSON_CreateNull() : cJSON_CreateNumber(fg_sql_probe_ranges[i].hi);

	if (!r || !lo || !hi || !cJSON_AddItemToArray(r, lo)) {
		cJSON_Delete(r);
		cJSON_Delete(lo);
		cJSON_Delete(hi);
		return NULL;
	}
	if (!cJSON_AddItemToArray(r, hi)) {
		cJSON_Delete(r);
		cJSON_Delete(hi);
		return NULL;
	}
	return r;
}

static int probe_section(cJSON *doc, const struct fg_sql_stats *stats, struct fg_err *err)
{
	cJSON *sec = cJSON_AddObjectToObject(doc, "probe_qnorm");
	cJSON *band, *list;
	int64_t outside = 0;

	if (!sec)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	band = range_json(FG_SQL_PROBE_BAND);
	if (!band || !cJSON_AddItemToObject(sec, "healthy_band", band)) {
		cJSON_Delete(band);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	list = cJSON_AddArrayToObject(sec, "buckets");
	if (!list)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	for (size_t i = 0; i < FG_SQL_PROBE_BUCKETS; i++) {
		cJSON *b = cJSON_CreateObject();
		cJSON *range = range_json(i);

		/* b joins the list last, so until then both are ours to free. */
		if (!b || !range || !cJSON_AddItemToObject(b, "range", range)) {
			cJSON_Delete(b);
			cJSON_Delete(range);
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		}
		if (!cJSON_AddNumberToObject(b, "count", (double)stats->probe[i]) || !cJSON_AddItemToArray(list, b)) {
			cJSON_Delete(b);
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		}
		if (i != FG_SQL_PROBE_BAND)
			outside += stats->probe[i];
	}
	if (!cJSON_AddNumberToObject(sec, "outside_band", (double)outside))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	return 0;
}

/* mixed_head_conventions_in_fleet: hosts serve heads stored in both conventions. */
static int warnings_section(struct fg_store *s, cJSON *doc, struct fg_err *err)
{
	cJSON *list = cJSON_AddArrayToObject(doc, "warnings");
	int64_t artifacts[2] = { 0, 0 }, reports[2] = { 0, 0 };
	sqlite3_stmt *st;
	int rc;

	if (!list)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	rc = fg_sql_get(s, sql_served_conventions, &st, err);
	if (rc)
		return rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int k = strcmp((const char *)sqlite3_column_text(st, 0), "delta") == 0 ? 0 : 1;

		artifacts[k] = sqlite3_column_int64(st, 1);
		reports[k] = sqlite3_column_int64(st, 2);
	}
	rc = rc == SQLITE_DONE ? 0 : fg_sql_fail(s, rc, err, "reading served head conventions");
	fg_sql_put(st);
	if (rc)
		return rc;
	if (artifacts[0] > 0 && artifacts[1] > 0) {
		const struct fg_verdict_row *row = &fg_verdict_table[FG_V_MIXED_HEAD_CONVENTIONS_IN_FLEET];
		char detail[256];
		cJSON *w = cJSON_CreateObject();

		snprintf(detail, sizeof(detail),
			 "the fleet serves MTP heads in both conventions: %lld delta artifact(s) on %lld "
			 "host report(s), %lld absolute artifact(s) on %lld host report(s)",
			 (long long)artifacts[0], (long long)reports[0], (long long)artifacts[1],
			 (long long)reports[1]);
		/* Added to the list last, so a failure before that leaves w ours to free. */
		if (!w || !cJSON_AddStringToObject(w, "code", row->name) ||
		    !cJSON_AddStringToObject(w, "severity", fg_severity_name(row->severity)) ||
		    !cJSON_AddStringToObject(w, "detail", detail) || !cJSON_AddItemToArray(list, w)) {
			cJSON_Delete(w);
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		}
	}
	return 0;
}

int fg_store_fleet_health(struct fg_store *s, cJSON **out, struct fg_err *err)
{
	struct fg_sql_stats stats;
	cJSON *doc = NULL, *unhealthy;
	int n = 0, rc;

	if (!s || !out)
		return fg_err_set(err, FG_EINPUT, "fleet health: no store or no output");
	doc = cJSON_CreateObject();
	if (!doc)
		return fg_err_set(err, FG_ENOMEM, "fleet health: out of memory");
	/* One snapshot, so the counts and the lists agree with each other. */
	rc = fg_sql_begin_read(s, err);
	if (rc)
		goto out;
	rc = artifacts_section(s, doc, &stats, err);
	if (rc)
		goto out;
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
	/* Beyond store.h's shape: how many there are when the list above stops at UNHEALTHY_MAX. */
	if (!cJSON_AddNumberToObject(doc, "unhealthy_total", (double)stats.unhealthy)) {
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		goto out;
	}
	rc = probe_section(doc, &stats, err);
	if (!rc)
		rc = warnings_section(s, doc, err);
	if (!rc)
		rc = fg_sql_fleet_distributions(s, doc, err);
	if (!rc)
		rc = fg_sql_commit(s, err);
	if (rc)
		goto out;
	*out = doc;
	doc = NULL;
out:
	if (rc) {
		fg_sql_rollback(s);
		fg_err_prefix(err, rc, "fleet health: ");
	}
	cJSON_Delete(doc);
	return rc;
}
