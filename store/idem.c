/*
 * idem.c: POST replays by Idempotency-Key, job keys, repeated fleet reports
 * (idem.h), over either backend (sqlite/idem.c, pg/idem.c).
 *
 * A claim, a finish and a release are writes: they go through the
 * process's writer (writer.c) like every other write, so a claim is
 * answered once the reservation it made is durable, and within one
 * process two requests with one key are ordered by the writer.  Across
 * processes the backend orders them: SQLite's write lock (the batch's
 * BEGIN IMMEDIATE), PostgreSQL's primary key (an insert racing another
 * instance's waits for it, then reads its row).  The replay table,
 * api_idempotency, is part of both schemas (SQLite version 5, PostgreSQL
 * version 2).  The two reads run on the caller's connection.
 */
#include "store/idem.h"

#include <stdlib.h>
#include <string.h>

#include "store/internal.h"

int fg_store_check_idem(const char *route, const char *key, struct fg_err *err)
{
	if (!route || !*route || strlen(route) > FG_STORE_ROUTE_MAX || !key || !*key || strlen(key) > FG_STORE_KEY_MAX)
		return fg_err_set(err, FG_EINPUT, "idempotency: the route or key is missing or too long");
	return 0;
}

struct claim_args {
	const char *route, *key, *sha;
	int stale;
	enum fg_idem_state state;
	struct fg_idem_answer answer;
};

static int claim_fn(struct fg_store *ws, void *arg, struct fg_err *err)
{
	struct claim_args *a = arg;

	/* A second run (the batch was retried write by write) starts afresh. */
	fg_idem_answer_release(&a->answer);
	a->state = FG_IDEM_NEW;
	return ws->ops->idem_claim(ws, a->route, a->key, a->sha, a->stale, &a->state, &a->answer, err);
}

int fg_store_idem_claim(struct fg_store *s, const char *route, const char *key, const char *body_sha256,
			int stale_seconds, enum fg_idem_state *state, struct fg_idem_answer *answer,
			struct fg_err *err)
{
	struct claim_args a = { route, key, body_sha256, stale_seconds, FG_IDEM_NEW, { 0, "", NULL } };
	int rc;

	if (answer)
		memset(answer, 0, sizeof(*answer));
	if (state)
		*state = FG_IDEM_NEW;
	if (!s || !state || !answer)
		return fg_err_set(err, FG_EINPUT, "idempotency: no store or no output");
	rc = fg_store_check_idem(route, key, err);
	if (!rc)
		rc = fg_store_check_text(body_sha256, FG_STORE_HASH_MAX, 1, "request body digest", err);
	if (!rc)
		rc = fg_store_write(s, claim_fn, &a, err);
	if (rc) {
		fg_idem_answer_release(&a.answer);
		return rc;
	}
	*state = a.state;
	*answer = a.answer;
	return 0;
}

struct finish_args {
	const char *route, *key, *location, *body;
	int status;
};

static int finish_fn(struct fg_store *ws, void *arg, struct fg_err *err)
{
	struct finish_args *a = arg;

	return ws->ops->idem_finish(ws, a->route, a->key, a->status, a->location, a->body, err);
}

int fg_store_idem_finish(struct fg_store *s, const char *route, const char *key, int status,
			 const char *location, const char *body, struct fg_err *err)
{
	struct finish_args a = { route, key, location ? location : "", body ? body : "", status };
	int rc;

	if (!s)
		return fg_err_set(err, FG_EINPUT, "idempotency: no store");
	rc = fg_store_check_idem(route, key, err);
	return rc ? rc : fg_store_write(s, finish_fn, &a, err);
}

struct release_args {
	const char *route, *key;
};

static int release_fn(struct fg_store *ws, void *arg, struct fg_err *err)
{
	struct release_args *a = arg;

	return ws->ops->idem_release(ws, a->route, a->key, err);
}

int fg_store_idem_release(struct fg_store *s, const char *route, const char *key, struct fg_err *err)
{
	struct release_args a = { route, key };
	int rc;

	if (!s)
		return fg_err_set(err, FG_EINPUT, "idempotency: no store");
	rc = fg_store_check_idem(route, key, err);
	return rc ? rc : fg_store_write(s, release_fn, &a, err);
}

void fg_idem_answer_release(struct fg_idem_answer *a)
{
	if (!a)
		return;
	free(a->body);
	a->body = NULL;
}

int fg_store_job_key_known(struct fg_store *s, const char *key, const char *body_sha256, int *known,
			   struct fg_err *err)
{
	if (known)
		*known = 0;
	if (!s || !known || !key || !body_sha256)
		return fg_err_set(err, FG_EINPUT, "looking up a job's key: no store, key, digest or output");
	return s->ops->job_key_known(s, key, body_sha256, known, err);
}

int fg_store_fleet_report_same(struct fg_store *s, const char *host, const char *runtime, const char *reported,
			       int64_t artifact_id, const char *observed_json, int *same, struct fg_err *err)
{
	if (same)
		*same = 0;
	if (!s || !same || !host || !runtime)
		return fg_err_set(err, FG_EINPUT, "comparing a fleet report: no store, host, runtime or output");
	return s->ops->fleet_report_same(s, host, runtime, reported ? reported : runtime, artifact_id,
					 observed_json ? observed_json : "{}", same, err);
}
