/*
 * internal.h: what api/server.c and api/routes.c share.
 *
 * Locks: api->tokens_lock, api->metrics_lock and api->health_lock are
 * never held together, nor while calling the store or forge.
 */
#ifndef FG_API_INTERNAL_H
#define FG_API_INTERNAL_H

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>

#include "api/api.h"
#include "api/auth.h"
#include "api/conns.h"
#include "store/store.h"

#define FG_API_JSON_DEPTH 32
#define FG_API_STATUS_SLOTS 16
#define FG_API_DURATION_BUCKETS 8
#define FG_API_REQ_BUCKETS 11
#define FG_API_ROUTES_MAX 64

struct fg_api {
	struct fg_api_config cfg;
	char *owned[2 * FG_API_MAX_ROOTS + 8]; /* copies of the config strings */
	struct MHD_Daemon *mhd;
	uint16_t port;
	struct sockaddr_storage bound;       /* the listening address (port in `port`) */
	pthread_key_t store_key;             /* per-thread store connection */
	pthread_rwlock_t tokens_lock;
	struct fg_tokens tokens;
	int auth_enabled;
	/* metrics */
	unsigned long long status_code[FG_API_STATUS_SLOTS];
	unsigned long long status_count[FG_API_STATUS_SLOTS];
	pthread_mutex_t metrics_lock;
	unsigned long long dur_bucket[FG_API_DURATION_BUCKETS + 1];
	double dur_sum;
	unsigned long long dur_count;
	/* Request durations per route (index into fg_routes; fg_n_routes: no route). */
	unsigned long long req_bucket[FG_API_ROUTES_MAX + 1][FG_API_REQ_BUCKETS + 1];
	double req_sum[FG_API_ROUTES_MAX + 1];
	unsigned long long req_count[FG_API_ROUTES_MAX + 1];
	/* Remote reads (inspections and jobs) and what forge jobs wrote. */
	unsigned long long pull_fetched, pull_from_cache, forge_written;
	/*
	 * GET /v1/fleet/health is answered from the last document built while
	 * nothing was written since (generation unchanged) and for at most
	 * FG_API_HEALTH_MAX_AGE_MS, which bounds staleness from writers outside
	 * this process.  Building it reads the whole fleet (milliseconds at
	 * thousands of hosts); serving the copy costs a memcpy.
	 */
	pthread_mutex_t health_lock;
	unsigned long long generation;       /* bumped after each write that can change health */
	unsigned long long health_gen;       /* the generation health was built at */
	struct timespec health_at;           /* CLOCK_MONOTONIC, when it was built */
	struct fg_health_snap *health;       /* one reference; NULL: none (health.c) */
	int health_building;                 /* a request is building one: the others wait or answer the old */
	pthread_cond_t health_built;         /* broadcast when that build ends (under health_lock) */
	unsigned long long health_builds;    /* builds started (/metrics) */
	/*
	 * The drain (fg_api_drain): from then on requests are answered 503
	 * draining (/livez still 200), and fg_api_drain returns once no handler
	 * is running any more, so nothing calls into the workers after it.
	 */
	pthread_mutex_t drain_lock;
	pthread_cond_t drain_cond;
	int draining;
	unsigned handlers_running;           /* a suspended request counts until it is answered */
	unsigned suspended;                  /* requests whose write is with the store's writer (fg_req_suspend) */
	int stopping;                        /* fg_api_stop has begun: no request suspends any more */
	/* Inspections off the HTTP threads (inspect_task.c). */
	pthread_mutex_t inspect_lock;
	unsigned inspect_waiting;            /* HTTP threads waiting for an inspection */
	unsigned long long inspect_timeouts; /* inspections given up at their deadline */
	unsigned long long inspect_busy;     /* refused for want of a slot */
	/* Absolute deadlines per connection (conns.h). */
	struct fg_conns conns;
	int conns_started;
};

#define FG_API_HEALTH_MAX_AGE_MS 1000

/* Fleet health pages: unhealthy artifacts per page by default and at most (health.c). */
#define FG_API_HEALTH_PAGE_DEFAULT 50
#define FG_API_HEALTH_PAGE_MAX 500

struct fg_health_snap;
void fg_health_snap_unref(struct fg_health_snap *h);   /* NULL allowed */

/* An ETag: a quoted prefix of the body's SHA-256. */
#define FG_API_ETAG_MAX 40

/*
 * A response body many responses send without copying it (the cached fleet
 * health): each holder has a reference; the last fg_shared_body_unref frees.
 */
struct fg_shared_body {
	int refs;                            /* atomic */
	size_t len;
	char etag[FG_API_ETAG_MAX];          /* of text, made once (server.c) */
	char text[];
};

/* A body holding a copy of text (one reference), or NULL. */
struct fg_shared_body *fg_shared_body_new(const char *text, size_t len);
struct fg_shared_body *fg_shared_body_ref(struct fg_shared_body *b);
void fg_shared_body_unref(void *b);         /* NULL allowed; an MHD free callback */

struct fg_route;

struct fg_resp;

/* One request, from the first MHD callback to the completion callback. */
struct fg_req {
	struct fg_api *api;
	struct MHD_Connection *conn;
	const char *method;
	const char *url;
	char request_id[72];
	char *body;
	size_t body_len, body_cap;
	int too_large;
	struct timespec started;              /* CLOCK_MONOTONIC, the first callback (headers complete) */
	const struct fg_route *route;         /* NULL: no route for method and path */
	int path_found;                       /* some route has this path */
	char allow[128];                      /* the methods routes of this path take */
	unsigned long long declared_len;      /* Content-Length, 0 when none */
	int answered;                         /* a response is queued */
	int64_t id;                           /* {id} of the route, when it has one */
	char asset[64];                       /* {asset} of the route, when it has one */
	enum fg_role role;
	const char *token_name;               /* points at token_copy once authenticated */
	char token_copy[64];
	/*
	 * A handler whose write goes to the store's writer without waiting
	 * (fg_req_suspend): the connection is suspended, the handler thread
	 * serves others, and once the writer's callback has resumed it
	 * (fg_req_resume) finish answers on the connection's thread.
	 */
	int may_suspend;                      /* dispatch: no Idempotency-Key, so the handler may suspend */
	int suspended;
	_Atomic int resumed;                  /* stored by fg_req_resume before it resumes the connection */
	void (*finish)(struct fg_req *req, struct fg_resp *resp);
	void *pending;                        /* the handler's state, freed by pending_free (once) */
	void (*pending_free)(void *pending);
};

/*
 * Suspend req's connection before handing a write to the store's writer
 * (only when req->may_suspend): the handler returns without an answer and
 * finish(req, resp) answers once fg_req_resume has run, from any thread
 * (the writer's callback), exactly once; pending is freed after finish or
 * when the connection ends first.  -1 (nothing suspended) once fg_api_stop
 * has begun: the handler then writes and answers in its thread.
 */
int fg_req_suspend(struct fg_req *req, void (*finish)(struct fg_req *, struct fg_resp *), void *pending,
		   void (*pending_free)(void *));
void fg_req_resume(struct fg_req *req);

/*
 * What a handler answers.  Answers of GET and HEAD with status 200 carry an
 * ETag (the handler's, else made from the body) and are answered 304 when
 * If-None-Match names it.
 */
struct fg_resp {
	unsigned status;
	char *body;                          /* owned, NUL-terminated */
	struct fg_shared_body *shared;       /* instead of body: one reference, passed to MHD */
	const unsigned char *fixed;          /* instead of body: fixed_len bytes that outlive the response */
	size_t fixed_len;
	const char *content_type;
	const char *cache_control;           /* NULL: no-store */
	char etag[FG_API_ETAG_MAX];          /* empty: made from the body */
	int ui;                              /* a dashboard answer: the UI's security headers (ui.c) */
	char location[128];                  /* Location header */
	char allow[128];                     /* Allow header (405) */
	unsigned retry_after;                /* Retry-After header in seconds (503), 0: none */
	int close;                           /* Connection: close (the drain) */
	int www_authenticate;                /* WWW-Authenticate: Bearer (every 401) */
	int replayed;                        /* Idempotent-Replayed: true (a stored answer sent again) */
};

/* Idempotency-Key: its length, and how long a reservation whose request died blocks its key. */
#define FG_API_IDEM_KEY_MAX 200
#define FG_API_IDEM_STALE_SECONDS 120

/* Retry-After of a 503 (forged's own state failed, the queue is full, the drain); of a 202 (poll again). */
#define FG_API_RETRY_AFTER_S 5
#define FG_API_POLL_AFTER_S 1

typedef void (*fg_handler)(struct fg_req *req, struct fg_resp *resp);

struct fg_route {
	const char *method;
	const char *path;                    /* OpenAPI form, "{id}" for a number */
	enum fg_role need;                   /* FG_ROLE_NONE: open */
	int json_body;                       /* requires application/json */
	fg_handler fn;
};

extern const struct fg_route fg_routes[];
extern const size_t fg_n_routes;

/* GET /v1/fleet/health (health.c). */
void fg_api_get_fleet_health(struct fg_req *req, struct fg_resp *resp);

/* The dashboard's handlers (ui.c). */
void fg_ui_root(struct fg_req *req, struct fg_resp *resp);
void fg_ui_index(struct fg_req *req, struct fg_resp *resp);
void fg_ui_asset(struct fg_req *req, struct fg_resp *resp);
void fg_ui_whoami(struct fg_req *req, struct fg_resp *resp);

/* The headers every dashboard answer carries (Content-Security-Policy, ...), NULL-terminated pairs. */
extern const char *const fg_ui_headers[];

/*
 * The role the request's bearer token has (FG_ROLE_NONE: none or not valid;
 * FG_ROLE_WRITE for everyone when the server has no tokens file); *name
 * (may be NULL) gets the token's name, or "" (size bytes).
 */
enum fg_role fg_req_role(struct fg_req *req, char *name, size_t size);

/* The store connection of the calling thread (opened on first use); NULL with err set. */
struct fg_store *fg_api_store(struct fg_api *api, struct fg_err *err);

/* Set resp to an application/problem+json error. */
void fg_problem(struct fg_resp *resp, struct fg_req *req, unsigned status, const char *slug,
		const char *title, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

struct fg_vlist;

/*
 * Set resp to the problem listing v's faults (at least one): status 400
 * when one is a fault of the text (invalid-utf8), else 422; the type the
 * faults share, else invalid-field; errors: [{pointer | parameter, detail}].
 */
void fg_problem_v(struct fg_resp *resp, struct fg_req *req, const struct fg_vlist *v);

/*
 * Add member (an RFC 9457 extension member; value taken, NULL: nothing) to
 * the problem fg_problem just answered.  Out of memory leaves the problem as
 * it was.
 */
void fg_problem_extend(struct fg_resp *resp, const char *member, cJSON *value);

/*
 * Set resp to a JSON document (takes ownership of doc and frees it).  Bytes
 * that are not UTF-8 in its strings become U+FFFD.
 */
void fg_json_reply(struct fg_resp *resp, unsigned status, cJSON *doc);

/*
 * The problem for a store/forge error code, chosen by the code alone: 404
 * FG_ENOTFOUND; 422 FG_EINPUT, FG_EUSAGE, FG_ECONFLICT; 403 FG_EFORBIDDEN;
 * 503 FG_EBUSY (queue-full) and FG_ESTATE (store-unavailable, with
 * Retry-After); 507 FG_ENOSPC; 500 otherwise.
 */
void fg_problem_from_err(struct fg_resp *resp, struct fg_req *req, const struct fg_err *err);

/* Parse the request body as a JSON object under the depth cap, or answer 400. */
cJSON *fg_req_json(struct fg_req *req, struct fg_resp *resp);

/* A query parameter or request header, or NULL. */
const char *fg_req_query(struct fg_req *req, const char *key);
const char *fg_req_header(struct fg_req *req, const char *key);

/* Prometheus text for /metrics (counts from the store added by the caller). */
char *fg_api_metrics_text(struct fg_api *api, const struct fg_store_counts *counts, const cJSON *by_verdict);

/* Inspection threads at most, abandoned ones (a FIFO for config.json) included. */
#define FG_API_INSPECT_THREADS_MAX 8

/* What fg_api_inspect returns besides 0 and the FG_E* codes of the inspection. */
#define FG_API_INSPECT_BUSY 1       /* no slot: 503 inspections-busy */
#define FG_API_INSPECT_TIMEOUT 2    /* not done within the deadline: 503 inspection-timeout */
#define FG_API_INSPECT_DRAINING 3   /* the drain began while waiting: 503 draining */

struct fg_inspect;

/*
 * Inspect source (a confined path or an allowed URL) for runtimes on a
 * thread of its own, waiting at most the configured deadline
 * (inspect_task.c).  0 with *out set (the caller frees it), an FG_E* code of
 * the inspection with err set, or FG_API_INSPECT_*.
 */
int fg_api_inspect(struct fg_api *api, const char *source, const char *const *runtimes, size_t n_runtimes,
		   struct fg_inspect **out, struct fg_err *err);

/* Inspection threads alive in this process; *stuck (may be NULL): those past their deadline. */
unsigned fg_api_inspections_running(unsigned *stuck);

#endif
