/*
 * idem.h: what the API needs of the store beyond store.h: replays of POSTs
 * by Idempotency-Key for the routes other than POST /v1/jobs (which keeps
 * its key in the jobs table), the lookup of a job's key, and whether a
 * fleet report repeats the one standing for its (host, runtime).  On both
 * backends (store/idem.c over sqlite/idem.c and pg/idem.c): a farm's
 * instances share the keys, so a retry through another instance is a
 * replay too.
 *
 * The replay table, api_idempotency, is part of the schema (SQLite version
 * 5, PostgreSQL version 2).  One row per (route, key): the request body's
 * SHA-256, then the answer once the first request was answered 2xx.
 */
#ifndef FG_STORE_IDEM_H
#define FG_STORE_IDEM_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

enum fg_idem_state {
	FG_IDEM_NEW,        /* reserved for this request: answer, then finish or release */
	FG_IDEM_REPLAY,     /* answered before: the answer is filled in */
	FG_IDEM_IN_FLIGHT,  /* a request with this key is being answered now */
};

struct fg_idem_answer {
	int status;
	char location[128];
	char *body;         /* owned (fg_idem_answer_release) */
};

/*
 * Claim (route, key) for a request whose body hashes to body_sha256 (hex):
 * *state says what to do.  A reservation older than stale_seconds (its
 * request died) is taken over.  FG_ECONFLICT when the key was used on this
 * route with another body.
 */
int fg_store_idem_claim(struct fg_store *s, const char *route, const char *key, const char *body_sha256,
			int stale_seconds, enum fg_idem_state *state, struct fg_idem_answer *answer,
			struct fg_err *err);

/* Record the answer to the claimed request (a 2xx), for replays. */
int fg_store_idem_finish(struct fg_store *s, const char *route, const char *key, int status,
			 const char *location, const char *body, struct fg_err *err);

/* Drop the reservation of a claimed request that was not answered 2xx (a retry runs it again). */
int fg_store_idem_release(struct fg_store *s, const char *route, const char *key, struct fg_err *err);

void fg_idem_answer_release(struct fg_idem_answer *a);

/* *known = 1 when a job holds the idempotency key key with body_sha256 (a replay of it). */
int fg_store_job_key_known(struct fg_store *s, const char *key, const char *body_sha256, int *known,
			   struct fg_err *err);

/*
 * *same = 1 when the standing report of (host, runtime) names artifact_id
 * with observed_json (JSON text, "{}" when none) and runtime as reported
 * (NULL: runtime) already.
 */
int fg_store_fleet_report_same(struct fg_store *s, const char *host, const char *runtime, const char *reported,
			       int64_t artifact_id, const char *observed_json, int *same, struct fg_err *err);

#endif
