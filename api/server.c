/*
 * server.c: the libmicrohttpd glue of the API (api.h): daemon start and
 * stop, the request lifecycle (body accumulation under the cap, content type,
 * auth, routing), problem+json, per-thread store connections and /metrics.
 *
 * libmicrohttpd 0.9.75 calls the access handler once with no data, then once
 * per chunk of upload, then a last time with *upload_data_size == 0: only
 * that last call may queue a response, so an oversized body is drained and
 * answered 413 there.
 */
#include "api/internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>

#include "forge/core/sha256.h"

static const double duration_bounds[FG_API_DURATION_BUCKETS] = { 0.1, 0.5, 1, 5, 15, 60, 300, 1800 };

/* ---- helpers for handlers ---- */

void fg_json_reply(struct fg_resp *resp, unsigned status, cJSON *doc)
{
	resp->status = status;
	resp->content_type = "application/json";
	resp->body = doc ? cJSON_PrintUnformatted(doc) : NULL;
	cJSON_Delete(doc);
	if (!resp->body) {
		resp->status = 500;
		resp->body = strdup("{\"type\":\"urn:forged:problem:internal\",\"title\":\"out of memory\",\"status\":500}");
		resp->content_type = "application/problem+json";
	}
}

void fg_problem(struct fg_resp *resp, struct fg_req *req, unsigned status, const char *slug,
		const char *title, const char *fmt, ...)
{
	char detail[600], type[96];
	cJSON *doc = cJSON_CreateObject();
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	snprintf(type, sizeof(type), "urn:forged:problem:%s", slug);
	cJSON_AddStringToObject(doc, "type", type);
	cJSON_AddStringToObject(doc, "title", title);
	cJSON_AddNumberToObject(doc, "status", status);
	cJSON_AddStringToObject(doc, "detail", detail);
	cJSON_AddStringToObject(doc, "instance", req->url);
	cJSON_AddStringToObject(doc, "request_id", req->request_id);
	fg_json_reply(resp, status, doc);
	resp->content_type = "application/problem+json";
}

void fg_problem_from_err(struct fg_resp *resp, struct fg_req *req, const struct fg_err *err)
{
	switch (err->code) {
	case FG_ENOTFOUND:
		fg_problem(resp, req, 404, "not-found", "Not found", "%s", err->msg);
		break;
	case FG_ECONFLICT:
		fg_problem(resp, req, 422, "idempotency-key-reused", "Idempotency key reused with another body",
			   "%s", err->msg);
		break;
	case FG_EBUSY:
		fg_problem(resp, req, 503, "queue-full", "Queue full", "%s", err->msg);
		break;
	case FG_EINPUT:
	case FG_EUSAGE:
		fg_problem(resp, req, 422, "unprocessable", "Unprocessable input", "%s", err->msg);
		break;
	case FG_EFORBIDDEN:
		fg_problem(resp, req, 403, "forbidden", "Forbidden", "%s", err->msg);
		break;
	case FG_ESTATE:
		fg_problem(resp, req, 503, "store-unavailable", "Store unavailable", "%s", err->msg);
		resp->retry_after = FG_API_RETRY_AFTER_S;
		break;
	case FG_ENOSPC:
		fg_problem(resp, req, 507, "insufficient-storage", "Insufficient storage", "%s", err->msg);
		break;
	default:
		fg_problem(resp, req, 500, "internal", "Internal error", "%s", err->msg);
		break;
	}
}

/* Deepest nesting of arrays/objects in JSON text, outside strings. */
static int json_depth(const char *s, size_t len)
{
	int depth = 0, max = 0, in_str = 0;

	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = 0;
		} else if (c == '"') {
			in_str = 1;
		} else if (c == '{' || c == '[') {
			if (++depth > max)
				max = depth;
		} else if (c == '}' || c == ']') {
			depth--;
		}
	}
	return max;
}

cJSON *fg_req_json(struct fg_req *req, struct fg_resp *resp)
{
	const char *end = NULL;
	cJSON *doc;

	if (!req->body_len) {
		fg_problem(resp, req, 400, "malformed-json", "Malformed JSON", "the request has no body");
		return NULL;
	}
	if (memchr(req->body, '\0', req->body_len)) {
		fg_problem(resp, req, 400, "malformed-json", "Malformed JSON", "the body contains a NUL byte");
		return NULL;
	}
	if (json_depth(req->body, req->body_len) > FG_API_JSON_DEPTH) {
		fg_problem(resp, req, 400, "json-too-deep", "JSON nested too deep",
			   "the body nests deeper than %d levels", FG_API_JSON_DEPTH);
		return NULL;
	}
	doc = cJSON_ParseWithLengthOpts(req->body, req->body_len + 1, &end, 1);
	if (!doc) {
		fg_problem(resp, req, 400, "malformed-json", "Malformed JSON", "invalid JSON near byte %td",
			   end ? end - req->body : (ptrdiff_t)0);
		return NULL;
	}
	if (!cJSON_IsObject(doc)) {
		cJSON_Delete(doc);
		fg_problem(resp, req, 400, "malformed-json", "Malformed JSON", "the body is not a JSON object");
		return NULL;
	}
	return doc;
}

const char *fg_req_query(struct fg_req *req, const char *key)
{
	return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, key);
}

const char *fg_req_header(struct fg_req *req, const char *key)
{
	return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, key);
}

static void close_store(void *p)
{
	fg_store_close(p);
}

struct fg_store *fg_api_store(struct fg_api *api, struct fg_err *err)
{
	struct fg_store *s = pthread_getspecific(api->store_key);

	if (s)
		return s;
	if (fg_store_open(&s, api->cfg.db_path, err) != 0)
		return NULL;
	pthread_setspecific(api->store_key, s);
	return s;
}

/* ---- metrics ---- */

static void count_status(struct fg_api *api, unsigned status)
{
	pthread_mutex_lock(&api->metrics_lock);
	for (size_t i = 0; i < FG_API_STATUS_SLOTS; i++) {
		if (api->status_code[i] == status || api->status_code[i] == 0) {
			api->status_code[i] = status;
			api->status_count[i]++;
			break;
		}
	}
	pthread_mutex_unlock(&api->metrics_lock);
}

/* The strong ETag of a body: its SHA-256's first 128 bits in quotes. */
static void make_etag(const void *data, size_t len, char out[FG_API_ETAG_MAX])
{
	char hex[FG_SHA256_HEX];

	fg_sha256_buf(data, len, hex);
	snprintf(out, FG_API_ETAG_MAX, "\"%.32s\"", hex);
}

/* If-None-Match names etag: "*", or a comma-separated list of (weak or strong) tags. */
static int etag_matches(const char *header, const char *etag)
{
	size_t n = strlen(etag);
	const char *p = header;

	if (!header || !*etag)
		return 0;
	while (*p) {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		if (*p == '*')
			return 1;
		if (p[0] == 'W' && p[1] == '/')
			p += 2;
		if (strncmp(p, etag, n) == 0 && (p[n] == '\0' || p[n] == ',' || p[n] == ' ' || p[n] == '\t'))
			return 1;
		while (*p && *p != ',')
			p++;
	}
	return 0;
}

struct fg_shared_body *fg_shared_body_new(const char *text, size_t len)
{
	struct fg_shared_body *b = malloc(sizeof(*b) + len + 1);

	if (!b)
		return NULL;
	b->refs = 1;
	b->len = len;
	memcpy(b->text, text, len);
	b->text[len] = '\0';
	/* Made once here, so the cached health answers cost no hashing. */
	make_etag(b->text, len, b->etag);
	return b;
}

struct fg_shared_body *fg_shared_body_ref(struct fg_shared_body *b)
{
	if (b)
		__atomic_add_fetch(&b->refs, 1, __ATOMIC_RELAXED);
	return b;
}

void fg_shared_body_unref(void *p)
{
	struct fg_shared_body *b = p;

	if (b && __atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) == 0)
		free(b);
}

void fg_api_data_changed(struct fg_api *api)
{
	if (!api)
		return;
	pthread_mutex_lock(&api->health_lock);
	api->generation++;
	pthread_mutex_unlock(&api->health_lock);
}

void fg_api_job_finished(struct fg_api *api, double seconds)
{
	size_t b = 0;

	if (!api)
		return;
	while (b < FG_API_DURATION_BUCKETS && seconds > duration_bounds[b])
		b++;
	pthread_mutex_lock(&api->metrics_lock);
	api->dur_bucket[b]++;
	api->dur_sum += seconds;
	api->dur_count++;
	pthread_mutex_unlock(&api->metrics_lock);
}

/* A growing text buffer for the metrics page. */
struct text {
	char *s;
	size_t len, cap;
};

static void text_add(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void text_add(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = t->s ? vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap) : -2;
		va_end(ap);
		if (n >= 0 && (size_t)n < t->cap - t->len) {
			t->len += (size_t)n;
			return;
		}
		if (n == -1)
			return;
		{
			size_t ncap = t->cap ? t->cap * 2 : 4096;
			char *ns = realloc(t->s, ncap);

			if (!ns)
				return;
			t->s = ns;
			t->cap = ncap;
		}
	}
}

char *fg_api_metrics_text(struct fg_api *api, const struct fg_store_counts *counts, const cJSON *by_verdict)
{
	struct text t = { NULL, 0, 0 };
	const cJSON *it;
	unsigned long long cum = 0;

	/* Every instance of a farm gives the same store figures: this line says which one answered. */
	if (api->cfg.instance_id)
		text_add(&t, "# HELP forged_instance_info The instance answering and its store's backend.\n"
			     "# TYPE forged_instance_info gauge\nforged_instance_info{instance=\"%s\",store=\"%s\"} 1\n",
			 api->cfg.instance_id, fg_store_is_postgres(api->cfg.db_path) ? "postgres" : "sqlite");
	text_add(&t, "# HELP forged_jobs Jobs by state.\n# TYPE forged_jobs gauge\n");
	for (int s = FG_JOB_QUEUED; s <= FG_JOB_CANCELLED; s++)
		text_add(&t, "forged_jobs{state=\"%s\"} %lld\n", fg_job_state_name((enum fg_job_state)s),
			 (long long)counts->jobs[s]);
	text_add(&t, "# HELP forged_queue_depth Jobs waiting for a worker.\n# TYPE forged_queue_depth gauge\n"
		     "forged_queue_depth %lld\n", (long long)counts->jobs[FG_JOB_QUEUED]);
	text_add(&t, "# HELP forged_job_duration_seconds Wall time of finished jobs.\n"
		     "# TYPE forged_job_duration_seconds histogram\n");
	pthread_mutex_lock(&api->metrics_lock);
	for (size_t b = 0; b < FG_API_DURATION_BUCKETS; b++) {
		cum += api->dur_bucket[b];
		text_add(&t, "forged_job_duration_seconds_bucket{le=\"%g\"} %llu\n", duration_bounds[b], cum);
	}
	cum += api->dur_bucket[FG_API_DURATION_BUCKETS];
	text_add(&t, "forged_job_duration_seconds_bucket{le=\"+Inf\"} %llu\n", cum);
	text_add(&t, "forged_job_duration_seconds_sum %g\nforged_job_duration_seconds_count %llu\n",
		 api->dur_sum, api->dur_count);
	text_add(&t, "# HELP forged_http_requests_total HTTP requests by status code.\n"
		     "# TYPE forged_http_requests_total counter\n");
	for (size_t i = 0; i < FG_API_STATUS_SLOTS && api->status_code[i]; i++)
		text_add(&t, "forged_http_requests_total{code=\"%llu\"} %llu\n", api->status_code[i],
			 api->status_count[i]);
	pthread_mutex_unlock(&api->metrics_lock);
	text_add(&t, "# HELP forged_artifacts Artifacts stored.\n# TYPE forged_artifacts gauge\n"
		     "forged_artifacts %lld\n", (long long)counts->artifacts);
	text_add(&t, "# HELP forged_artifacts_unhealthy Artifacts with an error verdict or collapsed acceptance.\n"
		     "# TYPE forged_artifacts_unhealthy gauge\nforged_artifacts_unhealthy %lld\n",
		 (long long)counts->artifacts_unhealthy);
	text_add(&t, "# HELP forged_artifacts_by_verdict Artifacts carrying each verdict code.\n"
		     "# TYPE forged_artifacts_by_verdict gauge\n");
	cJSON_ArrayForEach(it, by_verdict)
		text_add(&t, "forged_artifacts_by_verdict{verdict=\"%s\"} %g\n", it->string, it->valuedouble);
	return t.s;
}

/* ---- request lifecycle ---- */

static void make_request_id(struct fg_req *req)
{
	const char *given = fg_req_header(req, "X-Request-Id");
	static const char digits[] = "0123456789abcdef";
	unsigned char raw[8];
	ssize_t n;

	if (given && *given && strlen(given) < sizeof(req->request_id) &&
	    strspn(given, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:") == strlen(given)) {
		snprintf(req->request_id, sizeof(req->request_id), "%s", given);
		return;
	}
	/* One syscall per request, no file descriptor (was fopen of /dev/urandom). */
	n = getrandom(raw, sizeof(raw), GRND_NONBLOCK);
	if (n != (ssize_t)sizeof(raw)) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		memcpy(raw, &ts.tv_nsec, sizeof(raw) < sizeof(ts.tv_nsec) ? sizeof(raw) : sizeof(ts.tv_nsec));
	}
	for (size_t i = 0; i < sizeof(raw); i++) {
		req->request_id[2 * i] = digits[raw[i] >> 4];
		req->request_id[2 * i + 1] = digits[raw[i] & 15];
	}
	req->request_id[2 * sizeof(raw)] = '\0';
}

/*
 * Match url against a route path; "{id}" takes a positive integer, "{asset}"
 * one path segment (any bytes but '/', shorter than asset_size), copied
 * into asset.
 */
static int path_matches(const char *pattern, const char *url, int64_t *id, char *asset, size_t asset_size)
{
	while (*pattern && *url) {
		if (strncmp(pattern, "{asset}", 7) == 0) {
			size_t n = strcspn(url, "/");

			if (n == 0 || n >= asset_size)
				return 0;
			memcpy(asset, url, n);
			asset[n] = '\0';
			url += n;
			pattern += 7;
			continue;
		}
		if (strncmp(pattern, "{id}", 4) == 0) {
			char *end;
			long long v;

			if (*url < '1' || *url > '9')
				return 0;
			errno = 0;
			v = strtoll(url, &end, 10);
			if (errno || v <= 0)
				return 0;
			*id = v;
			url = end;
			pattern += 4;
			continue;
		}
		if (*pattern++ != *url++)
			return 0;
	}
	if (*url == '/' && url[1] == '\0')
		url++;
	return *pattern == '\0' && *url == '\0';
}

static int json_content_type(const char *ct)
{
	size_t n = strlen("application/json");

	return ct && strncasecmp(ct, "application/json", n) == 0 && (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

enum fg_role fg_req_role(struct fg_req *req, char *name, size_t size)
{
	struct fg_api *api = req->api;
	const char *h = fg_req_header(req, "Authorization");
	enum fg_role role = FG_ROLE_NONE;

	if (name && size)
		name[0] = '\0';
	if (!api->auth_enabled)
		return FG_ROLE_WRITE;
	if (h && strncasecmp(h, "Bearer ", 7) == 0) {
		const char *found = NULL;

		/* The name is copied under the lock: a SIGHUP reload frees the table. */
		pthread_rwlock_rdlock(&api->tokens_lock);
		role = fg_tokens_check(&api->tokens, h + 7, &found);
		if (found && name && size)
			snprintf(name, size, "%s", found);
		pthread_rwlock_unlock(&api->tokens_lock);
	}
	return role;
}

/* Authenticate the request for a route; 0 when allowed, else resp is set. */
static int authorize(struct fg_req *req, const struct fg_route *route, struct fg_resp *resp)
{
	struct fg_api *api = req->api;
	const char *h;

	if (route->need == FG_ROLE_NONE || !api->auth_enabled)
		return 0;
	h = fg_req_header(req, "Authorization");
	req->role = fg_req_role(req, req->token_copy, sizeof(req->token_copy));
	if (req->token_copy[0])
		req->token_name = req->token_copy;
	if (req->role == FG_ROLE_NONE) {
		fg_problem(resp, req, 401, "unauthorized", "Unauthorized",
			   h ? "the bearer token is not valid" : "an Authorization: Bearer token is required");
		return -1;
	}
	if (req->role < route->need) {
		fg_problem(resp, req, 403, "forbidden", "Forbidden", "a %s token cannot %s %s", "read",
			   req->method, req->url);
		return -1;
	}
	return 0;
}

static void dispatch(struct fg_req *req, struct fg_resp *resp)
{
	const struct fg_route *route = NULL;
	char allow[128] = "";
	int path_found = 0;

	for (size_t i = 0; i < fg_n_routes; i++) {
		int64_t id = 0;

		if (!path_matches(fg_routes[i].path, req->url, &id, req->asset, sizeof(req->asset)))
			continue;
		path_found = 1;
		if (strlen(allow) + strlen(fg_routes[i].method) + 3 < sizeof(allow)) {
			if (allow[0])
				strncat(allow, ", ", sizeof(allow) - strlen(allow) - 1);
			strncat(allow, fg_routes[i].method, sizeof(allow) - strlen(allow) - 1);
		}
		if (strcmp(fg_routes[i].method, req->method) == 0) {
			route = &fg_routes[i];
			req->id = id;
			break;
		}
	}
	if (!route) {
		if (path_found) {
			fg_problem(resp, req, 405, "method-not-allowed", "Method not allowed",
				   "%s is not allowed on %s (allowed: %s)", req->method, req->url, allow);
			snprintf(resp->allow, sizeof(resp->allow), "%s", allow);
		} else {
			fg_problem(resp, req, 404, "no-such-route", "Not found", "no route %s %s", req->method, req->url);
		}
		return;
	}
	if (authorize(req, route, resp))
		return;
	if (req->too_large) {
		fg_problem(resp, req, 413, "body-too-large", "Body too large", "the body exceeds %zu bytes",
			   req->api->cfg.max_body_bytes);
		return;
	}
	if (route->json_body && !json_content_type(fg_req_header(req, "Content-Type"))) {
		fg_problem(resp, req, 415, "unsupported-media-type", "Unsupported media type",
			   "the body must be application/json");
		return;
	}
	route->fn(req, resp);
}

static enum MHD_Result send_response(struct fg_req *req, struct fg_resp *resp)
{
	struct MHD_Response *r;
	const char *body = resp->body ? resp->body : "";
	int cacheable = resp->status == 200 &&
			(strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0);
	enum MHD_Result ret;

	if (cacheable && !resp->etag[0]) {
		if (resp->shared)
			memcpy(resp->etag, resp->shared->etag, sizeof(resp->etag));
		else if (resp->fixed)
			make_etag(resp->fixed, resp->fixed_len, resp->etag);
		else
			make_etag(body, strlen(body), resp->etag);
	}
	if (cacheable && etag_matches(fg_req_header(req, "If-None-Match"), resp->etag)) {
		/* Not modified: the same headers, no body. */
		resp->status = 304;
		fg_shared_body_unref(resp->shared);
		resp->shared = NULL;
		resp->fixed = NULL;
		body = "";
	}
	if (resp->shared) {
		/* MHD sends the shared text as is and drops the reference when done. */
		r = MHD_create_response_from_buffer_with_free_callback_cls(resp->shared->len, resp->shared->text,
									   fg_shared_body_unref, resp->shared);
		if (!r)
			fg_shared_body_unref(resp->shared);
		resp->shared = NULL;
	} else if (resp->fixed) {
		r = MHD_create_response_from_buffer(resp->fixed_len, (void *)resp->fixed, MHD_RESPMEM_PERSISTENT);
	} else {
		r = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
	}
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", resp->content_type ? resp->content_type : "application/json");
	MHD_add_response_header(r, "X-Request-Id", req->request_id);
	MHD_add_response_header(r, "Cache-Control", resp->cache_control ? resp->cache_control : "no-store");
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	if (resp->etag[0] && (resp->status == 200 || resp->status == 304))
		MHD_add_response_header(r, "ETag", resp->etag);
	for (size_t i = 0; resp->ui && fg_ui_headers[i]; i += 2)
		MHD_add_response_header(r, fg_ui_headers[i], fg_ui_headers[i + 1]);
	if (resp->allow[0])
		MHD_add_response_header(r, "Allow", resp->allow);
	if (resp->location[0])
		MHD_add_response_header(r, "Location", resp->location);
	if (resp->retry_after) {
		char secs[16];

		snprintf(secs, sizeof(secs), "%u", resp->retry_after);
		MHD_add_response_header(r, "Retry-After", secs);
	}
	ret = MHD_queue_response(req->conn, resp->status, r);
	MHD_destroy_response(r);
	count_status(req->api, resp->status);
	if (req->api->cfg.log)
		req->api->cfg.log(resp->status >= 500 ? 3 : 6, "%s %s %u request_id=%s%s%s", req->method, req->url,
				  resp->status, req->request_id, req->token_name ? " token=" : "",
				  req->token_name ? req->token_name : "");
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
				  const char *version, const char *upload_data, size_t *upload_size, void **con_cls)
{
	struct fg_api *api = cls;
	struct fg_req *req = *con_cls;
	struct fg_resp resp;
	enum MHD_Result ret;

	(void)version;
	if (!req) {
		req = calloc(1, sizeof(*req));
		if (!req)
			return MHD_NO;
		req->api = api;
		req->conn = conn;
		req->method = method;
		req->url = url;
		make_request_id(req);
		*con_cls = req;
		return MHD_YES;
	}
	if (*upload_size) {
		size_t n = *upload_size;

		if (!req->too_large && req->body_len + n > api->cfg.max_body_bytes) {
			req->too_large = 1;
			free(req->body);
			req->body = NULL;
			req->body_len = req->body_cap = 0;
		}
		if (!req->too_large) {
			if (req->body_len + n + 1 > req->body_cap) {
				size_t ncap = req->body_cap ? req->body_cap : 4096;
				char *nb;

				while (ncap < req->body_len + n + 1)
					ncap *= 2;
				nb = realloc(req->body, ncap);
				if (!nb)
					return MHD_NO;
				req->body = nb;
				req->body_cap = ncap;
			}
			memcpy(req->body + req->body_len, upload_data, n);
			req->body_len += n;
			req->body[req->body_len] = '\0';
		}
		*upload_size = 0; /* consumed, or drained when too large */
		return MHD_YES;
	}
	memset(&resp, 0, sizeof(resp));
	dispatch(req, &resp);
	ret = send_response(req, &resp);
	free(resp.body);
	return ret;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct fg_req *req = *con_cls;

	(void)cls; (void)conn; (void)toe;
	if (req) {
		free(req->body);
		free(req);
		*con_cls = NULL;
	}
}

static char *keep(struct fg_api *api, size_t *n, const char *s)
{
	char *copy = s ? strdup(s) : NULL;

	if (copy && *n < sizeof(api->owned) / sizeof(api->owned[0]))
		api->owned[(*n)++] = copy;
	return copy;
}

int fg_api_start(struct fg_api **out, const struct fg_api_config *cfg, struct fg_err *err)
{
	struct fg_api *api = calloc(1, sizeof(*api));
	struct sockaddr_storage ss;
	socklen_t sl;
	size_t n_owned = 0;
	const union MHD_DaemonInfo *info;
	int rc = 0;

	if (!api)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	api->cfg = *cfg;
	api->cfg.listen_addr = keep(api, &n_owned, cfg->listen_addr ? cfg->listen_addr : FG_API_LISTEN_DEFAULT);
	api->cfg.db_path = keep(api, &n_owned, cfg->db_path);
	api->cfg.instance_id = keep(api, &n_owned, cfg->instance_id);
	api->cfg.state_dir = keep(api, &n_owned, cfg->state_dir);
	api->cfg.tokens_file = keep(api, &n_owned, cfg->tokens_file);
	for (size_t i = 0; i < cfg->n_allow_roots && i < FG_API_MAX_ROOTS; i++)
		api->cfg.allow_roots[i] = keep(api, &n_owned, cfg->allow_roots[i]);
	for (size_t i = 0; i < cfg->n_allow_hosts && i < FG_API_MAX_ROOTS; i++)
		api->cfg.allow_hosts[i] = keep(api, &n_owned, cfg->allow_hosts[i]);
	api->cfg.cache_dir = keep(api, &n_owned, cfg->cache_dir);
	if (!api->cfg.max_body_bytes)
		api->cfg.max_body_bytes = FG_API_MAX_BODY_DEFAULT;
	pthread_key_create(&api->store_key, close_store);
	pthread_rwlock_init(&api->tokens_lock, NULL);
	pthread_mutex_init(&api->metrics_lock, NULL);
	pthread_mutex_init(&api->health_lock, NULL);
	if (api->cfg.tokens_file) {
		rc = fg_tokens_load(&api->tokens, api->cfg.tokens_file, err);
		if (rc)
			goto fail;
		api->auth_enabled = 1;
	}
	memset(&ss, 0, sizeof(ss));
	if (strchr(api->cfg.listen_addr, ':')) {
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;

		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons(cfg->port);
		if (inet_pton(AF_INET6, api->cfg.listen_addr, &a6->sin6_addr) != 1)
			rc = -1;
		sl = sizeof(*a6);
	} else {
		struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;

		a4->sin_family = AF_INET;
		a4->sin_port = htons(cfg->port);
		if (inet_pton(AF_INET, api->cfg.listen_addr, &a4->sin_addr) != 1)
			rc = -1;
		sl = sizeof(*a4);
	}
	(void)sl;
	if (rc) {
		rc = fg_err_set(err, FG_EUSAGE, "listen address '%s' is not an IP address", api->cfg.listen_addr);
		goto fail;
	}
	api->mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG |
				    (ss.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0),
				    0, NULL, NULL, on_request, api,
				    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
				    MHD_OPTION_THREAD_POOL_SIZE,
				    (unsigned int)(cfg->threads ? cfg->threads : FG_API_THREADS_DEFAULT),
				    MHD_OPTION_CONNECTION_TIMEOUT,
				    (unsigned int)(cfg->timeout_seconds ? cfg->timeout_seconds : FG_API_TIMEOUT_SECONDS_DEFAULT),
				    MHD_OPTION_CONNECTION_LIMIT,
				    (unsigned int)(cfg->connection_limit ? cfg->connection_limit : FG_API_CONNECTION_LIMIT_DEFAULT),
				    MHD_OPTION_PER_IP_CONNECTION_LIMIT,
				    (unsigned int)(cfg->per_ip_limit ? cfg->per_ip_limit : FG_API_PER_IP_LIMIT_DEFAULT),
				    MHD_OPTION_CONNECTION_MEMORY_LIMIT,
				    (size_t)(cfg->memory_limit ? cfg->memory_limit : FG_API_MEMORY_LIMIT_DEFAULT),
				    MHD_OPTION_NOTIFY_COMPLETED, on_completed, api,
				    MHD_OPTION_END);
	if (!api->mhd) {
		rc = fg_err_set(err, FG_EIO, "cannot listen on %s:%u (in use, or not allowed)", api->cfg.listen_addr,
				cfg->port);
		goto fail;
	}
	info = MHD_get_daemon_info(api->mhd, MHD_DAEMON_INFO_BIND_PORT);
	api->port = info ? info->port : cfg->port;
	*out = api;
	return 0;
fail:
	fg_api_stop(api);
	return rc;
}

void fg_api_stop(struct fg_api *api)
{
	if (!api)
		return;
	if (api->mhd)
		MHD_stop_daemon(api->mhd);
	fg_tokens_release(&api->tokens);
	pthread_rwlock_destroy(&api->tokens_lock);
	pthread_mutex_destroy(&api->metrics_lock);
	pthread_mutex_destroy(&api->health_lock);
	fg_shared_body_unref(api->health);
	pthread_key_delete(api->store_key);
	for (size_t i = 0; i < sizeof(api->owned) / sizeof(api->owned[0]); i++)
		free(api->owned[i]);
	free(api);
}

uint16_t fg_api_port(const struct fg_api *api)
{
	return api->port;
}

int fg_api_reload_tokens(struct fg_api *api, struct fg_err *err)
{
	struct fg_tokens fresh = { 0, NULL };
	int rc;

	if (!api->cfg.tokens_file)
		return 0;
	rc = fg_tokens_load(&fresh, api->cfg.tokens_file, err);
	if (rc)
		return rc;
	pthread_rwlock_wrlock(&api->tokens_lock);
	fg_tokens_release(&api->tokens);
	api->tokens = fresh;
	pthread_rwlock_unlock(&api->tokens_lock);
	return 0;
}

const struct fg_api_route_info *fg_api_routes(size_t *n)
{
	static struct fg_api_route_info info[64];

	*n = 0;
	for (size_t i = 0; i < fg_n_routes && i < 64; i++) {
		info[i].method = fg_routes[i].method;
		info[i].path = fg_routes[i].path;
		(*n)++;
	}
	return info;
}
