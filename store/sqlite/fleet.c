/*
 * fleet.c: on SQLite, what serving hosts say they run, and the fleet health
 * document built from it and from the artifacts' verdicts (the parts both
 * backends share: common.c, fleet_v2.c).
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

#define UNHEALTHY_MAX FG_STORE_UNHEALTHY_MAX

/* ---- reports ---- */

static const char sql_fleet_upsert[] =
	"INSERT INTO fleet_reports (host, runtime, artifact_id, observed, reported_at, runtime_reported)"
	" VALUES (?1, ?2, ?3, ?4, " FG_SQL_NOW ", ?5)"
	" ON CONFLICT (host, runtime) DO UPDATE SET artifact_id = excluded.artifact_id,"
	" observed = excluded.observed, reported_at = excluded.reported_at,"
	" runtime_reported = excluded.runtime_reported";

int fg_sqlite_fleet_report(struct fg_store *s, const char *host, int64_t artifact_id, const char *runtime,
			   const char *runtime_reported, const char *observed, struct fg_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc = fg_sql_get(s, sql_fleet_upsert, &st, err);

	if (rc)
		return rc;
	fg_sql_bind_text(st, 1, host);
	fg_sql_bind_text(st, 2, runtime);
	sqlite3_bind_int64(st, 3, artifact_id);
	fg_sql_bind_text(st, 4, observed);
	fg_sql_bind_text(st, 5, runtime_reported ? runtime_reported : runtime);
	rc = sqlite3_step(st);
	if (rc == SQLITE_CONSTRAINT_FOREIGNKEY)
		rc = fg_err_set(err, FG_ENOTFOUND, "fleet report from '%s': no artifact %lld", host,
				(long long)artifact_id);
	else if (rc != SQLITE_DONE)
		rc = fg_sql_fail(s, rc, err, "storing a fleet report");
	else
		rc = 0;
	fg_sql_put(st);
	return rc;
}

/* ---- health ---- */

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

/* ---- the after-load probe, and every host report (fleet_v2.c decides what they mean) ---- */

static const char sql_served_probes[] =
	"SELECT a.id, a.family, p.probe_after FROM fleet_reports f"
	" JOIN artifact_probes p ON p.artifact_id = f.artifact_id AND p.runtime = f.runtime"
	" JOIN artifacts a ON a.id = f.artifact_id ORDER BY a.id";
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

static int probe_section(struct fg_store *s, cJSON *doc, struct fg_err *err)
{
	struct fg_probe_acc *acc = fg_store_probe_acc_new();
	sqlite3_stmt *st;
	int64_t total = 0;
	int rc;

	if (!acc)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	rc = fg_sql_get(s, sql_served_probes, &st, err);
	if (rc) {
		fg_store_probe_acc_free(acc);
		return rc;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		fg_store_probe_acc_add(acc, sqlite3_column_int64(st, 0), (const char *)sqlite3_column_text(st, 1),
				       sqlite3_column_double(st, 2));
	rc = rc == SQLITE_DONE ? 0 : fg_sql_fail(s, rc, err, "reading served after-load probes");
	fg_sql_put(st);
	if (!rc)
		rc = count_of(s, sql_report_total, &total, err);
	if (!rc)
		rc = fg_store_probe_qnorm_section(doc, acc, total, err);
	fg_store_probe_acc_free(acc);
	return rc;
}

static const char sql_hosts[] =
	"SELECT f.host, f.runtime, f.runtime_reported, f.artifact_id, a.family, f.observed, f.reported_at,"
	" p.probe_after FROM fleet_reports f JOIN artifacts a ON a.id = f.artifact_id"
	" LEFT JOIN artifact_probes p ON p.artifact_id = f.artifact_id AND p.runtime = f.runtime"
	" ORDER BY f.host, f.runtime LIMIT ?1";

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
	sqlite3_bind_int(st, 1, FG_STORE_HOSTS_MAX);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct fg_store_host_row r = {
			.host = (const char *)sqlite3_column_text(st, 0),
			.runtime = (const char *)sqlite3_column_text(st, 1),
			.runtime_reported = (const char *)sqlite3_column_text(st, 2),
			.artifact_id = sqlite3_column_int64(st, 3),
			.family = (const char *)sqlite3_column_text(st, 4),
			.observed = (const char *)sqlite3_column_text(st, 5),
			.reported_at = (const char *)sqlite3_column_text(st, 6),
			.has_probe = sqlite3_column_type(st, 7) != SQLITE_NULL,
			.probe_after = sqlite3_column_double(st, 7),
		};

		rc = fg_store_host_item(list, &r, err);
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
	int64_t artifacts[2] = { 0, 0 }, reports[2] = { 0, 0 };
	sqlite3_stmt *st;
	int rc;

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
	return fg_store_warnings_section(doc, artifacts, reports, err);
}

int fg_sqlite_fleet_health(struct fg_store *s, cJSON **out, struct fg_err *err)
{
	struct fg_sql_stats stats;
	cJSON *doc = NULL, *unhealthy;
	int n = 0, rc;

	if (!s || !out)
		return fg_err_set(err, FG_EINPUT, "fleet health: no store or no output");
	doc = cJSON_CreateObject();
	if (!doc || !cJSON_AddStringToObject(doc, "schema", FG_STORE_HEALTH_SCHEMA)) {
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
