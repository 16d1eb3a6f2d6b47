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

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forge/model/family.h"

#define HOST_MAX 253        /* a DNS name */
#define RUNTIME_MAX 64
#define REPORTED_MAX 128    /* a runtime's version string as a host reports it */
#define UNHEALTHY_MAX 500   /* artifacts listed under "unhealthy" */
#define HOSTS_MAX 500       /* reports listed under "hosts" */
#define HEALTH_SCHEMA "forged.fleet_health.v2"

/* ---- reports ---- */

static const char sql_fleet_upsert[] =
	"INSERT INTO fleet_reports (host, runtime, artifact_id, observed, reported_at, runtime_reported)"
	" VALUES (?1, ?2, ?3, ?4, " FG_SQL_NOW ", ?5)"
	" ON CONFLICT (host, runtime) DO UPDATE SET artifact_id = excluded.artifact_id,"
	" observed = excluded.observed, reported_at = excluded.reported_at,"
	" runtime_reported = excluded.runtime_reported";

int fg_store_fleet_report(struct fg_store *s, const char *host, int64_t artifact_id, const char *runtime,
			  const char *runtime_reported, const cJSON *observed, struct fg_err *err)
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
	if (runtime_reported && (!*runtime_reported || strlen(runtime_reported) > REPORTED_MAX))
		return fg_err_set(err, FG_EINPUT,
				  "storing a fleet report from '%s': the runtime as reported is empty or over %d bytes",
				  host, REPORTED_MAX);
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
	fg_sql_bind_text(st, 5, runtime_reported ? runtime_reported : runtime);
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
	"  'runtime_reported', f.runtime_reported, 'observed', json(f.observed),"               \
	"  'reported_at', f.reported_at)) FROM fleet_reports f WHERE f.artifact_id = a.id),"    \
	" a.digest, a.head_fingerprint"

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

static int text_or_null(cJSON *o, const char *key, sqlite3_stmt *st, int col)
{
	const char *t = (const char *)sqlite3_column_text(st, col);

	return (t ? cJSON_AddStringToObject(o, key, t) : cJSON_AddNullToObject(o, key)) != NULL;
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
		    !(fp ? cJSON_AddStringToObject(item, "fingerprint", fp) : cJSON_AddNullToObject(item, "fingerprint")) ||
		    !text_or_null(item, "digest", st, 6) || !text_or_null(item, "head_fingerprint", st, 7)) {
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

/* ---- the after-load probe against each family's band ---- */

/*
 * The five buckets of a banded family: below its plausible band, between
 * plausible and healthy, the healthy band (closed), above it but plausible,
 * above the plausible band (shifted twice).
 */
#define BUCKETS 5
#define BUCKET_HEALTHY 2
#define FAMILIES_MAX 32

static const char *const bucket_names[BUCKETS] = { "below", "low", "healthy", "high", "above" };

static int bucket_of(const struct fg_probe_band *b, double v)
{
	if (v < b->plausible_lo)
		return 0;
	if (v < b->healthy_lo)
		return 1;
	if (v <= b->healthy_hi)
		return 2;
	if (v <= b->plausible_hi)
		return 3;
	return 4;
}

struct fam_probe {
	char family[64];
	const struct fg_probe_band *band;
	int64_t artifacts, reports;
	int64_t b_artifacts[BUCKETS], b_reports[BUCKETS];
	int64_t outside_band, outside_plausible;
	double min, max;
};

struct probe_acc {
	struct fam_probe fam[FAMILIES_MAX];
	size_t n_fam;
	int64_t matched;
	/* the artifact being read (rows come by artifact id) */
	int64_t cur;
	struct fam_probe *cur_fam;
	unsigned cur_buckets;
};

static struct fam_probe *fam_of(struct probe_acc *acc, const char *family)
{
	for (size_t i = 0; i < acc->n_fam; i++)
		if (strcmp(acc->fam[i].family, family) == 0)
			return &acc->fam[i];
	if (acc->n_fam == FAMILIES_MAX)
		return NULL;
	memset(&acc->fam[acc->n_fam], 0, sizeof(acc->fam[0]));
	snprintf(acc->fam[acc->n_fam].family, sizeof(acc->fam[0].family), "%s", family);
	acc->fam[acc->n_fam].band = fg_family_probe_band(family);
	return &acc->fam[acc->n_fam++];
}

/* The artifact just read: counted once in each bucket it was served in, once if any is outside. */
static void flush_artifact(struct probe_acc *acc)
{
	struct fam_probe *f = acc->cur_fam;

	if (!f)
		return;
	f->artifacts++;
	for (int b = 0; b < BUCKETS; b++)
		if (acc->cur_buckets & (1u << b))
			f->b_artifacts[b]++;
	if (f->band && (acc->cur_buckets & ~(1u << BUCKET_HEALTHY)))
		f->outside_band++;
	if (f->band && (acc->cur_buckets & ((1u << 0) | (1u << 4))))
		f->outside_plausible++;
	acc->cur_fam = NULL;
	acc->cur_buckets = 0;
}

static const char sql_served_probes[] =
	"SELECT a.id, a.family, p.probe_after FROM fleet_reports f"
	" JOIN artifact_probes p ON p.artifact_id = f.artifact_id AND p.runtime = f.runtime"
	" JOIN artifacts a ON a.id = f.artifact_id ORDER BY a.id";

static int read_probes(struct fg_store *s, struct probe_acc *acc, struct fg_err *err)
{
	sqlite3_stmt *st;
	int rc = fg_sql_get(s, sql_served_probes, &st, err);

	if (rc)
		return rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t id = sqlite3_column_int64(st, 0);
		const char *family = (const char *)sqlite3_column_text(st, 1);
		double v = sqlite3_column_double(st, 2);
		struct fam_probe *f;

		if (!isfinite(v) || !family)
			continue;
		if (id != acc->cur) {
			flush_artifact(acc);
			acc->cur = id;
			acc->cur_fam = fam_of(acc, family);
		}
		if (!(f = acc->cur_fam))
			continue;
		acc->matched++;
		f->reports++;
		if (f->reports == 1 || v < f->min)
			f->min = v;
		if (f->reports == 1 || v > f->max)
			f->max = v;
		if (f->band) {
			int b = bucket_of(f->band, v);

			f->b_reports[b]++;
			acc->cur_buckets |= 1u << b;
		}
	}
	flush_artifact(acc);
	rc = rc == SQLITE_DONE ? 0 : fg_sql_fail(s, rc, err, "reading served after-load probes");
	fg_sql_put(st);
	return rc;
}

static cJSON *pair(double lo, double hi, int lo_open, int hi_open)
{
	cJSON *r = cJSON_CreateArray();

	if (!r || !cJSON_AddItemToArray(r, lo_open ? cJSON_CreateNull() : cJSON_CreateNumber(lo)) ||
	    !cJSON_AddItemToArray(r, hi_open ? cJSON_CreateNull() : cJSON_CreateNumber(hi))) {
		cJSON_Delete(r);
		return NULL;
	}
	return r;
}

/* Bucket b's [lo, hi] for band (v1 wrote [0, 1.25] for the first: kept). */
static cJSON *bucket_range(const struct fg_probe_band *band, int b)
{
	const double edges[BUCKETS + 1] = { 0.0, band->plausible_lo, band->healthy_lo, band->healthy_hi,
					    band->plausible_hi, 0.0 };

	return pair(edges[b], edges[b + 1], 0, b == BUCKETS - 1);
}

static int put(cJSON *o, const char *key, cJSON *item)
{
	if (item && cJSON_AddItemToObject(o, key, item))
		return 1;
	cJSON_Delete(item);
	return 0;
}

static cJSON *band_json(const struct fg_probe_band *b)
{
	cJSON *o = cJSON_CreateObject();

	if (!o || !put(o, "healthy", pair(b->healthy_lo, b->healthy_hi, 0, 0)) ||
	    !put(o, "plausible", pair(b->plausible_lo, b->plausible_hi, 0, 0)) ||
	    !cJSON_AddStringToObject(o, "source", b->source)) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

static cJSON *family_json(const struct fam_probe *f)
{
	cJSON *o = cJSON_CreateObject(), *list;
	int ok = o != NULL;

	if (ok && f->band) {
		ok = put(o, "band", band_json(f->band)) && cJSON_AddNumberToObject(o, "artifacts", (double)f->artifacts) &&
		     cJSON_AddNumberToObject(o, "reports", (double)f->reports) &&
		     (list = cJSON_AddArrayToObject(o, "buckets")) != NULL;
		for (int b = 0; ok && b < BUCKETS; b++) {
			cJSON *it = cJSON_CreateObject();

			ok = it && cJSON_AddItemToArray(list, it) && cJSON_AddStringToObject(it, "name", bucket_names[b]) &&
			     put(it, "range", bucket_range(f->band, b)) &&
			     cJSON_AddNumberToObject(it, "artifacts", (double)f->b_artifacts[b]) &&
			     cJSON_AddNumberToObject(it, "reports", (double)f->b_reports[b]);
			if (!ok && it && !cJSON_GetArrayItem(list, b))
				cJSON_Delete(it);
		}
		ok = ok && cJSON_AddNumberToObject(o, "outside_band", (double)f->outside_band) &&
		     cJSON_AddNumberToObject(o, "outside_plausible", (double)f->outside_plausible);
	} else if (ok) {
		ok = cJSON_AddNullToObject(o, "band") &&
		     cJSON_AddStringToObject(o, "note", "no published band for this family: the distribution is "
							"shown, nothing is counted outside a band") &&
		     cJSON_AddNumberToObject(o, "artifacts", (double)f->artifacts) &&
		     cJSON_AddNumberToObject(o, "reports", (double)f->reports) &&
		     cJSON_AddNumberToObject(o, "min", f->min) && cJSON_AddNumberToObject(o, "max", f->max);
	}
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

static const char sql_report_total[] = "SELECT count(*) FROM fleet_reports";

static int count_of(struct fg_store *s, const char *sql, int64_t *n, struct fg_err *err)
{
	sqlite3_stmt *st;
	int rc = fg_sql_get(s, sql, &st, err);

	if (rc)
		return rc;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*n = sqlite3_column_int64(st, 0);
		rc = 0;
	} else {
		rc = fg_sql_fail(s, rc, err, "counting fleet reports");
	}
	fg_sql_put(st);
	return rc;
}

/*
 * probe_qnorm, version 2: the trunk probe each serving host's runtime
 * loads (the artifact's report, runtimes[].trunk_probe_after of the reported
 * runtime: artifact_probes), never the stored one.  The top-level buckets
 * and counts sum the banded families (their shared band: Qwen3.5/3.8's),
 * as v1's readers read them; by_family has every family.
 */
static int probe_section(struct fg_store *s, cJSON *doc, struct fg_err *err)
{
	static const struct fg_probe_band none = { 0, 0, 0, 0, "" };
	const struct fg_probe_band *shared = fg_family_probe_band("qwen3_5");
	struct probe_acc *acc = calloc(1, sizeof(*acc));
	cJSON *sec = cJSON_AddObjectToObject(doc, "probe_qnorm"), *list = NULL, *fams = NULL;
	int64_t buckets[BUCKETS] = { 0 }, outside = 0, implausible = 0, total = 0;
	int ok, rc;

	if (!acc || !sec) {
		free(acc);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	if (!shared)
		shared = &none;
	rc = read_probes(s, acc, err);
	if (!rc)
		rc = count_of(s, sql_report_total, &total, err);
	if (rc) {
		free(acc);
		return rc;
	}
	for (size_t i = 0; i < acc->n_fam; i++) {
		if (!acc->fam[i].band)
			continue;
		for (int b = 0; b < BUCKETS; b++)
			buckets[b] += acc->fam[i].b_artifacts[b];
		outside += acc->fam[i].outside_band;
		implausible += acc->fam[i].outside_plausible;
	}
	ok = cJSON_AddStringToObject(sec, "basis", "after_load") &&
	     put(sec, "healthy_band", pair(shared->healthy_lo, shared->healthy_hi, 0, 0)) &&
	     put(sec, "plausible_band", pair(shared->plausible_lo, shared->plausible_hi, 0, 0)) &&
	     (list = cJSON_AddArrayToObject(sec, "buckets")) != NULL;
	for (int b = 0; ok && b < BUCKETS; b++) {
		cJSON *it = cJSON_CreateObject();

		ok = it && cJSON_AddItemToArray(list, it);
		if (!ok)
			cJSON_Delete(it);
		ok = ok && put(it, "range", bucket_range(shared, b)) &&
		     cJSON_AddNumberToObject(it, "count", (double)buckets[b]);
	}
	ok = ok && cJSON_AddNumberToObject(sec, "outside_band", (double)outside) &&
	     cJSON_AddNumberToObject(sec, "outside_plausible", (double)implausible) &&
	     cJSON_AddNumberToObject(sec, "reports", (double)acc->matched) &&
	     cJSON_AddNumberToObject(sec, "not_counted", (double)(total > acc->matched ? total - acc->matched : 0)) &&
	     (fams = cJSON_AddObjectToObject(sec, "by_family")) != NULL;
	for (size_t i = 0; ok && i < acc->n_fam; i++)
		ok = put(fams, acc->fam[i].family, family_json(&acc->fam[i]));
	free(acc);
	return ok ? 0 : fg_err_set(err, FG_ENOMEM, "out of memory");
}

/* ---- every host report ---- */

static const char sql_hosts[] =
	"SELECT f.host, f.runtime, f.runtime_reported, f.artifact_id, a.family, f.observed, f.reported_at,"
	" p.probe_after FROM fleet_reports f JOIN artifacts a ON a.id = f.artifact_id"
	" LEFT JOIN artifact_probes p ON p.artifact_id = f.artifact_id AND p.runtime = f.runtime"
	" ORDER BY f.host, f.runtime LIMIT ?1";

static int host_item(cJSON *arr, sqlite3_stmt *st, struct fg_err *err)
{
	const char *family = (const char *)sqlite3_column_text(st, 4);
	const struct fg_probe_band *band = fg_family_probe_band(family);
	int has_probe = sqlite3_column_type(st, 7) != SQLITE_NULL;
	double v = sqlite3_column_double(st, 7);
	cJSON *o = cJSON_CreateObject(), *observed = NULL;
	int rc;

	if (!o || !cJSON_AddItemToArray(arr, o)) {
		cJSON_Delete(o);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	if (!text_or_null(o, "host", st, 0) || !text_or_null(o, "runtime", st, 1) ||
	    !text_or_null(o, "runtime_reported", st, 2) ||
	    !cJSON_AddNumberToObject(o, "artifact_id", (double)sqlite3_column_int64(st, 3)) ||
	    !text_or_null(o, "family", st, 4))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	rc = fg_sql_column_json(st, 5, &observed, err, "a host's observed figures");
	if (rc)
		return rc;
	if (!cJSON_AddItemToObject(o, "observed", observed)) {
		cJSON_Delete(observed);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	if (!text_or_null(o, "reported_at", st, 6) ||
	    !(has_probe && isfinite(v) ? cJSON_AddNumberToObject(o, "probe_after", v)
				       : cJSON_AddNullToObject(o, "probe_after")) ||
	    !(band && has_probe && isfinite(v) ? cJSON_AddStringToObject(o, "probe_bucket", bucket_names[bucket_of(band, v)])
					       : cJSON_AddNullToObject(o, "probe_bucket")))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	return 0;
}

static int hosts_section(struct fg_store *s, cJSON *doc, struct fg_err *err)
{
	cJSON *list = cJSON_AddArrayToObject(doc, "hosts");
	sqlite3_stmt *st;
	int64_t total = 0;
	int rc;

	if (!list)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	rc = fg_sql_get(s, sql_hosts, &st, err);
	if (rc)
		return rc;
	sqlite3_bind_int(st, 1, HOSTS_MAX);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		rc = host_item(list, st, err);
		if (rc) {
			fg_sql_put(st);
			return rc;
		}
	}
	rc = rc == SQLITE_DONE ? 0 : fg_sql_fail(s, rc, err, "listing host reports");
	fg_sql_put(st);
	if (!rc)
		rc = count_of(s, sql_report_total, &total, err);
	if (!rc && !cJSON_AddNumberToObject(doc, "hosts_total", (double)total))
		rc = fg_err_set(err, FG_ENOMEM, "out of memory");
	return rc;
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
	if (!doc || !cJSON_AddStringToObject(doc, "schema", HEALTH_SCHEMA)) {
		cJSON_Delete(doc);
		return fg_err_set(err, FG_ENOMEM, "fleet health: out of memory");
	}
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
	rc = probe_section(s, doc, err);
	if (!rc)
		rc = warnings_section(s, doc, err);
	if (!rc)
		rc = fg_sql_fleet_distributions(s, doc, err);
	if (!rc)
		rc = hosts_section(s, doc, err);
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
