/*
 * api.h: forged's HTTP API (docs/interfaces.md section 5) on libmicrohttpd 0.9.75.
 *
 * The server runs MHD's internal polling thread with epoll and a small thread
 * pool; connection timeout, per-IP and total connection limits and a memory
 * limit are set explicitly, and each connection has absolute deadlines for
 * its headers, its body and its answer (conns.h).  A request with a body is
 * refused before any of it is read when the route, the token, the declared
 * Content-Length (413 past max_body_bytes) or the content type (415) already
 * decide, so `Expect: 100-continue` uploads that would be refused get no 100
 * Continue.  Bodies parse with cJSON under a depth cap (400).
 * Errors are application/problem+json with a stable `type` per error.  Each
 * request carries an X-Request-Id (echoed, or made) that is logged.  Handler
 * threads each keep their own store connection.
 */
#ifndef FG_API_H
#define FG_API_H

#include <stddef.h>
#include <stdint.h>

#include "forge/core/error.h"

#define FG_API_MAX_ROOTS 16

/*
 * What fg_api_start uses for a config field left 0: the one place the
 * server's defaults are written (`forged serve` leaves these fields 0).
 */
#define FG_API_LISTEN_DEFAULT "127.0.0.1"
#define FG_API_THREADS_DEFAULT 4u               /* handler threads (MHD's pool) */
#define FG_API_CONNECTION_LIMIT_DEFAULT 256u
#define FG_API_PER_IP_LIMIT_DEFAULT 32u
#define FG_API_TIMEOUT_SECONDS_DEFAULT 30u      /* an idle connection is closed after this */
/* Absolute deadlines (conns.h): a trickle of bytes does not extend them. */
#define FG_API_HEADER_SECONDS_DEFAULT 10u       /* accept to the end of the headers */
#define FG_API_BODY_SECONDS_DEFAULT 30u         /* the end of the headers to the end of the body */
#define FG_API_SEND_SECONDS_DEFAULT 60u         /* writing one answer */
#define FG_API_MEMORY_LIMIT_DEFAULT (128u * 1024) /* per connection: headers and MHD's buffers */
#define FG_API_MAX_BODY_DEFAULT (1u << 20)      /* request bodies (413 past it) */
#define FG_API_INSPECT_SECONDS_DEFAULT 60u      /* an inspection answers 503 past it */

struct fg_api_config {
	const char *listen_addr;       /* an IPv4 or IPv6 literal or a host name (getaddrinfo, the first address); NULL: FG_API_LISTEN_DEFAULT */
	uint16_t port;                 /* 0: an ephemeral port (see fg_api_port) */
	const char *db_path;           /* the store's target (store.h: a path or a postgres:// URL) */
	const char *instance_id;       /* labels /metrics (forged_instance_info); NULL: none */
	const char *state_dir;         /* forged's state folder (jobs' outputs: the workers') */
	const char *tokens_file;       /* NULL: no authentication (logged as a warning) */
	const char *allow_roots[FG_API_MAX_ROOTS]; /* folders sources and outputs may be in */
	size_t n_allow_roots;
	const char *allow_hosts[FG_API_MAX_ROOTS]; /* hosts URL sources may name ("host[:port]") */
	size_t n_allow_hosts;                      /* 0: URL sources are refused (403) */
	const char *cache_dir;                     /* remote reads: STATE/cache */
	unsigned etag_ttl_seconds;                 /* their fg_pull_opts.cache_ttl_seconds (0: ask
						    * once per read; forged serve: etag_ttl_seconds) */
	size_t max_body_bytes;         /* 0: FG_API_MAX_BODY_DEFAULT */
	unsigned threads;              /* handler threads; 0: FG_API_THREADS_DEFAULT */
	unsigned connection_limit;     /* 0: FG_API_CONNECTION_LIMIT_DEFAULT */
	unsigned per_ip_limit;         /* 0: FG_API_PER_IP_LIMIT_DEFAULT */
	unsigned timeout_seconds;      /* idle, and kept alive to the next headers; 0: FG_API_TIMEOUT_SECONDS_DEFAULT */
	unsigned header_seconds;       /* 0: FG_API_HEADER_SECONDS_DEFAULT */
	unsigned body_seconds;         /* 0: FG_API_BODY_SECONDS_DEFAULT */
	size_t memory_limit;           /* per connection; 0: FG_API_MEMORY_LIMIT_DEFAULT */
	int queue_cap;                 /* jobs queued at most (503 past it) */
	double collapse_threshold;     /* verification verdicts; 0: FG_VERIFY_COLLAPSE_DEFAULT */
	const char *artifacts_dir;     /* where a job without an out writes (the job object names it); NULL: unknown */
	unsigned inspect_seconds;      /* an inspection's deadline; 0: FG_API_INSPECT_SECONDS_DEFAULT */
	const char *forge_target;      /* the target list of jobs naming none; NULL: FG_FORGE_DEFAULT_TARGET */
	/* Logging, owned by the daemon: priority as syslog (3 err .. 7 debug). */
	void (*log)(int priority, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
	/* Wakes the workers after an enqueue. */
	void (*job_enqueued)(void *ctx);
	/* 1 when every worker thread is alive. */
	int (*workers_alive)(void *ctx);
	void *ctx;
};

struct fg_api;

/* Start serving.  The config is copied.  On failure nothing runs. */
int fg_api_start(struct fg_api **out, const struct fg_api_config *cfg, struct fg_err *err);

/*
 * Begin the drain: every request from now on is answered 503 draining with
 * Retry-After (GET /livez still 200), and no handler calls job_enqueued or
 * workers_alive any more.  Returns once the handlers already running have
 * returned (at most wait_seconds).  The server keeps listening until
 * fg_api_stop, so clients hear 503 during a drain, not connection refused.
 * NULL allowed.
 */
void fg_api_drain(struct fg_api *api, unsigned wait_seconds);

/*
 * Stop accepting, finish in-flight requests, free everything.  NULL allowed.
 * The daemon stops its workers first: they call fg_api_data_changed and
 * fg_api_job_finished until they have stopped.
 */
void fg_api_stop(struct fg_api *api);

/*
 * The watchdog's look at the HTTP side: GET /livez over a fresh connection
 * to the listening address (the loopback for a wildcard one), answered 200
 * within timeout_ms, and not every inspection thread stuck past its
 * deadline.  0 when healthy; -1 with *why saying what is not.  Its request
 * id is FG_API_SELF_CHECK_ID, and requests with that id are not logged.
 */
int fg_api_self_check(struct fg_api *api, unsigned timeout_ms, const char **why);
#define FG_API_SELF_CHECK_ID "watchdog-self-check"

/* The port actually bound. */
uint16_t fg_api_port(const struct fg_api *api);

/* Re-read the tokens file (SIGHUP).  On failure the old tokens stay. */
int fg_api_reload_tokens(struct fg_api *api, struct fg_err *err);

/*
 * Artifacts, verdicts or fleet reports changed outside the API's handlers (a
 * worker stored an artifact): answers cached from the store are dropped.
 * NULL allowed.
 */
void fg_api_data_changed(struct fg_api *api);

/* Record a finished job's duration for /metrics. */
void fg_api_job_finished(struct fg_api *api, double seconds);

/*
 * Count, for /metrics, bytes a remote read fetched and bytes it took from
 * the pull cache (forged_pull_*), and bytes a forge job wrote
 * (forged_forge_bytes_written_total).  NULL allowed.
 */
void fg_api_count_pull(struct fg_api *api, unsigned long long fetched, unsigned long long from_cache);
void fg_api_count_forge_written(struct fg_api *api, unsigned long long bytes);

/* The routes the server answers: "METHOD PATH" pairs, PATH in OpenAPI form. */
struct fg_api_route_info {
	const char *method;
	const char *path;
};
const struct fg_api_route_info *fg_api_routes(size_t *n);

/* The OpenAPI document compiled in from docs/openapi.json. */
extern const char fg_openapi_json[];
extern const size_t fg_openapi_json_len;

#endif
