/*
 * idem.c: POST replays by Idempotency-Key, job keys and repeated fleet
 * reports on PostgreSQL (store/idem.h, store/idem.c), shared by every
 * instance of a farm: a key answered through one instance is replayed by
 * any other.
 *
 * A claim first inserts the reservation with ON CONFLICT DO NOTHING: the
 * primary key (route, idem_key) lets one insert win when instances race
 * (the loser's insert waits for the winner's transaction, then does
 * nothing); a key already there is read back FOR UPDATE and decides the
 * answer: another body (FG_ECONFLICT), answered (a replay), being answered
 * (in flight), or a reservation older than stale_seconds whose request died
 * (taken over).  A row released between the insert and the read is
 * claimed again.  The table is schema version 2 (db.c).
 */
#include "store/pg/pg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char sql_reserve[] =
	"INSERT INTO api_idempotency (route, idem_key, body_sha256) VALUES ($1, $2, $3)"
	" ON CONFLICT (route, idem_key) DO NOTHING RETURNING 1";
static const char sql_get[] =
	"SELECT body_sha256, status, location, body, created_at < now() - make_interval(secs => $3::float8)"
	" FROM api_idempotency WHERE route = $1 AND idem_key = $2 FOR UPDATE";
static const char sql_take_over[] =
	"UPDATE api_idempotency SET created_at = now() WHERE route = $1 AND idem_key = $2";
static const char sql_finish[] =
	"UPDATE api_idempotency SET status = $3, location = $4, body = $5 WHERE route = $1 AND idem_key = $2";
static const char sql_release[] = "DELETE FROM api_idempotency WHERE route = $1 AND idem_key = $2 AND status = 0";

/* One round of a claim: 1 when decided (*state set), 0 when the row vanished meanwhile (try again). */
static int claim_once(struct fg_store *s, const char *route, const char *key, const char *body_sha256,
		      int stale_seconds, enum fg_idem_state *state, struct fg_idem_answer *answer, struct fg_err *err)
{
	struct fg_pg_args a = { 0 };
	PGresult *res = NULL;
	int rc;

	fg_pg_arg_text(&a, route);
	fg_pg_arg_text(&a, key);
	fg_pg_arg_text(&a, body_sha256);
	rc = fg_pg_query(s, sql_reserve, &a, &res, err, "reserving an idempotency key");
	if (rc)
		return rc;
	if (PQntuples(res) == 1) {
		PQclear(res);
		*state = FG_IDEM_NEW;
		return 1;
	}
	PQclear(res);
	a.n = 2;
	fg_pg_arg_int(&a, stale_seconds);
	rc = fg_pg_query(s, sql_get, &a, &res, err, "looking up an idempotency key");
	if (rc)
		return rc;
	if (PQntuples(res) == 0) {
		PQclear(res);
		return 0;
	}
	if (strcmp(fg_pg_text(res, 0, 0), body_sha256) != 0) {
		rc = fg_err_set(err, FG_ECONFLICT, "idempotency key '%s' was already used on %s with another body", key,
				route);
	} else if (fg_pg_int(res, 0, 1)) {
		answer->status = (int)fg_pg_int(res, 0, 1);
		fg_pg_copy(res, 0, 2, answer->location, sizeof(answer->location));
		answer->body = strdup(fg_pg_text(res, 0, 3));
		if (!answer->body)
			rc = fg_err_set(err, FG_ENOMEM, "out of memory");
		else
			*state = FG_IDEM_REPLAY;
	} else if (!fg_pg_bool(res, 0, 4)) {
		*state = FG_IDEM_IN_FLIGHT;
	} else {
		/* Reserved by a request that died: this one takes it over. */
		a.n = 2;
		rc = fg_pg_query(s, sql_take_over, &a, NULL, err, "taking over an idempotency key");
		if (!rc)
			*state = FG_IDEM_NEW;
	}
	PQclear(res);
	return rc ? rc : 1;
}

int fg_pg_idem_claim(struct fg_store *s, const char *route, const char *key, const char *body_sha256,
		     int stale_seconds, enum fg_idem_state *state, struct fg_idem_answer *answer, struct fg_err *err)
{
	int rc = fg_store_check_idem(route, key, err);

	memset(answer, 0, sizeof(*answer));
	*state = FG_IDEM_NEW;
	if (rc)
		return rc;
	if ((rc = fg_pg_begin(s, err)) != 0)
		return rc;
	for (int round = 0; round < 3; round++) {
		rc = claim_once(s, route, key, body_sha256, stale_seconds, state, answer, err);
		if (rc)
			break;
	}
	if (rc == 0)
		rc = fg_err_set(err, FG_ESTATE, "idempotency key '%s' on %s: reserved and released three times over; retry",
				key, route);
	if (rc < 0) {
		fg_pg_rollback(s);
		fg_idem_answer_release(answer);
		*state = FG_IDEM_NEW;
		return rc;
	}
	rc = fg_pg_commit(s, err);
	if (rc) {
		fg_pg_rollback(s);
		fg_idem_answer_release(answer);
		*state = FG_IDEM_NEW;
	}
	return rc;
}

int fg_pg_idem_finish(struct fg_store *s, const char *route, const char *key, int status, const char *location,
		      const char *body, struct fg_err *err)
{
	struct fg_pg_args a = { 0 };
	int rc = fg_store_check_idem(route, key, err);

	if (rc)
		return rc;
	fg_pg_arg_text(&a, route);
	fg_pg_arg_text(&a, key);
	fg_pg_arg_int(&a, status);
	fg_pg_arg_text(&a, location ? location : "");
	fg_pg_arg_text(&a, body ? body : "");
	return fg_pg_query(s, sql_finish, &a, NULL, err, "recording an idempotent answer");
}

int fg_pg_idem_release(struct fg_store *s, const char *route, const char *key, struct fg_err *err)
{
	struct fg_pg_args a = { 0 };
	int rc = fg_store_check_idem(route, key, err);

	if (rc)
		return rc;
	fg_pg_arg_text(&a, route);
	fg_pg_arg_text(&a, key);
	return fg_pg_query(s, sql_release, &a, NULL, err, "releasing an idempotency key");
}

/* 1 in *yes when sql with a returns a row. */
static int exists(struct fg_store *s, const char *sql, const struct fg_pg_args *a, int *yes, const char *what,
		  struct fg_err *err)
{
	PGresult *res = NULL;
	int rc = fg_pg_query(s, sql, a, &res, err, what);

	*yes = 0;
	if (rc)
		return rc;
	*yes = PQntuples(res) > 0;
	PQclear(res);
	return 0;
}

int fg_pg_job_key_known(struct fg_store *s, const char *key, const char *body_sha256, int *known,
			struct fg_err *err)
{
	struct fg_pg_args a = { 0 };

	fg_pg_arg_text(&a, key);
	fg_pg_arg_text(&a, body_sha256);
	return exists(s, "SELECT 1 FROM jobs WHERE idem_key = $1 AND body_sha256 = $2", &a, known,
		      "looking up a job's key", err);
}

int fg_pg_fleet_report_same(struct fg_store *s, const char *host, const char *runtime, const char *reported,
			    int64_t artifact_id, const char *observed_json, int *same, struct fg_err *err)
{
	struct fg_pg_args a = { 0 };

	fg_pg_arg_text(&a, host);
	fg_pg_arg_text(&a, runtime);
	fg_pg_arg_int(&a, artifact_id);
	fg_pg_arg_text(&a, observed_json);
	fg_pg_arg_text(&a, reported);
	return exists(s,
		      "SELECT 1 FROM fleet_reports WHERE host = $1 AND runtime = $2 AND artifact_id = $3"
		      " AND observed = $4 AND runtime_reported IS NOT DISTINCT FROM $5",
		      &a, same, "comparing a fleet report", err);
}
