/*
 * idem.c: POST replays by Idempotency-Key, job keys and repeated fleet
 * reports on SQLite (store/idem.h, store/idem.c).
 *
 * A claim runs in one write transaction (the writer's batch, which holds
 * the write lock from its BEGIN IMMEDIATE): read the row, write the
 * reservation, so two requests racing with one key are ordered: the second
 * sees the first's reservation and is told it is in flight.  The table is
 * schema version 5 (db.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/internal.h"
static const char sql_get[] =
	"SELECT body_sha256, status, location, body,"
	" created_at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-' || ?3 || ' seconds')"
	" FROM api_idempotency WHERE route = ?1 AND idem_key = ?2";
static const char sql_reserve[] =
	"INSERT INTO api_idempotency (route, idem_key, body_sha256, created_at) VALUES (?1, ?2, ?3, " FG_SQL_NOW ")"
	" ON CONFLICT (route, idem_key) DO UPDATE SET created_at = excluded.created_at";
static const char sql_finish[] =
	"UPDATE api_idempotency SET status = ?3, location = ?4, body = ?5 WHERE route = ?1 AND idem_key = ?2";
static const char sql_release[] = "DELETE FROM api_idempotency WHERE route = ?1 AND idem_key = ?2 AND status = 0";

int fg_sqlite_idem_claim(struct fg_store *s, const char *route, const char *key, const char *body_sha256,
			 int stale_seconds, enum fg_idem_state *state, struct fg_idem_answer *answer,
			 struct fg_err *err)
{
	sqlite3_stmt *st = NULL;
	int rc = fg_store_check_idem(route, key, err);

	memset(answer, 0, sizeof(*answer));
	*state = FG_IDEM_NEW;
	if (rc)
		return rc;
	if ((rc = fg_sql_begin(s, err)) != 0)
		return rc;
	if ((rc = fg_sql_get(s, sql_get, &st, err)) != 0)
		goto fail;
	fg_sql_bind_text(st, 1, route);
	fg_sql_bind_text(st, 2, key);
	sqlite3_bind_int(st, 3, stale_seconds);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const char *sha = (const char *)sqlite3_column_text(st, 0);
		int status = sqlite3_column_int(st, 1), stale = sqlite3_column_int(st, 4);

		if (!sha || strcmp(sha, body_sha256) != 0) {
			rc = fg_err_set(err, FG_ECONFLICT, "idempotency key '%s' was already used on %s with another body",
					key, route);
			goto fail;
		}
		if (status) {
			const char *body = (const char *)sqlite3_column_text(st, 3);

			answer->status = status;
			fg_sql_column_copy(st, 2, answer->location, sizeof(answer->location));
			answer->body = strdup(body ? body : "");
			if (!answer->body) {
				rc = fg_err_set(err, FG_ENOMEM, "out of memory");
				goto fail;
			}
			*state = FG_IDEM_REPLAY;
			fg_sql_put(st);
			fg_sql_rollback(s);
			return 0;
		}
		if (!stale) {
			*state = FG_IDEM_IN_FLIGHT;
			fg_sql_put(st);
			fg_sql_rollback(s);
			return 0;
		}
	} else if (rc != SQLITE_DONE) {
		rc = fg_sql_fail(s, rc, err, "looking up an idempotency key");
		goto fail;
	}
	fg_sql_put(st);
	st = NULL;
	if ((rc = fg_sql_get(s, sql_reserve, &st, err)) != 0)
		goto fail;
	fg_sql_bind_text(st, 1, route);
	fg_sql_bind_text(st, 2, key);
	fg_sql_bind_text(st, 3, body_sha256);
	rc = fg_sql_exec(s, st, err, "reserving an idempotency key");
	st = NULL;
	if (rc)
		goto fail;
	return fg_sql_commit(s, err);
fail:
	fg_sql_put(st);
	fg_sql_rollback(s);
	fg_idem_answer_release(answer);
	return rc;
}

int fg_sqlite_idem_finish(struct fg_store *s, const char *route, const char *key, int status,
			  const char *location, const char *body, struct fg_err *err)
{
	sqlite3_stmt *st;
	int rc = fg_store_check_idem(route, key, err);

	if (rc)
		return rc;
	if ((rc = fg_sql_get(s, sql_finish, &st, err)) != 0)
		return rc;
	fg_sql_bind_text(st, 1, route);
	fg_sql_bind_text(st, 2, key);
	sqlite3_bind_int(st, 3, status);
	fg_sql_bind_text(st, 4, location ? location : "");
	fg_sql_bind_text(st, 5, body ? body : "");
	return fg_sql_exec(s, st, err, "recording an idempotent answer");
}

int fg_sqlite_idem_release(struct fg_store *s, const char *route, const char *key, struct fg_err *err)
{
	sqlite3_stmt *st;
	int rc = fg_store_check_idem(route, key, err);

	if (rc)
		return rc;
	if ((rc = fg_sql_get(s, sql_release, &st, err)) != 0)
		return rc;
	fg_sql_bind_text(st, 1, route);
	fg_sql_bind_text(st, 2, key);
	return fg_sql_exec(s, st, err, "releasing an idempotency key");
}

int fg_sqlite_job_key_known(struct fg_store *s, const char *key, const char *body_sha256, int *known,
			    struct fg_err *err)
{
	static const char sql[] = "SELECT 1 FROM jobs WHERE idem_key = ?1 AND body_sha256 = ?2";
	sqlite3_stmt *st;
	int rc = fg_sql_get(s, sql, &st, err);

	*known = 0;
	if (rc)
		return rc;
	fg_sql_bind_text(st, 1, key);
	fg_sql_bind_text(st, 2, body_sha256);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*known = 1;
	rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : fg_sql_fail(s, rc, err, "looking up a job's key");
	fg_sql_put(st);
	return rc;
}

int fg_sqlite_fleet_report_same(struct fg_store *s, const char *host, const char *runtime, const char *reported,
				int64_t artifact_id, const char *observed_json, int *same, struct fg_err *err)
{
	static const char sql[] = "SELECT 1 FROM fleet_reports WHERE host = ?1 AND runtime = ?2 AND artifact_id = ?3"
				  " AND observed = ?4 AND runtime_reported IS ?5";
	sqlite3_stmt *st;
	int rc = fg_sql_get(s, sql, &st, err);

	*same = 0;
	if (rc)
		return rc;
	fg_sql_bind_text(st, 1, host);
	fg_sql_bind_text(st, 2, runtime);
	sqlite3_bind_int64(st, 3, artifact_id);
	fg_sql_bind_text(st, 4, observed_json);
	fg_sql_bind_text(st, 5, reported);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*same = 1;
	rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : fg_sql_fail(s, rc, err, "comparing a fleet report");
	fg_sql_put(st);
	return rc;
}
