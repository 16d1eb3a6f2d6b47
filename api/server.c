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

#include "forge/core/grow.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <errno.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "api/validate.h"
#include "store/idem.h"
#include "forge/core/sha256.h"
#include "forge/core/version.h"

static const double duration_bounds[FG_API_DURATION_BUCKETS] = { 0.1, 0.5, 1, 5, 15, 60, 300, 1800 };

/* ---- helpers for handlers ---- */

void fg_json_reply(struct fg_resp *resp, unsigned status, cJSON *doc)
{
	resp->status = status;
	resp->content_type = "application/json";
	/* Names from the file system or the URL may be any bytes: answers are always UTF-8. */
	if (doc)
		fg_json_utf8_fix(doc);
	resp->body = doc ? cJSON_PrintUnformatted(doc) : NULL;
	cJSON_Delete(doc);
	if (!resp->body) {
		resp->status = 500;
		resp->body = strdup("{\"type\":\"urn:forged:problem:internal\",\"title\":\"out of memory\",\"status\":500}");
		resp->content_type = "application/problem+json";
	}
}

static cJSON *problem_doc(struct fg_req *req, unsigned status, const char *slug, const char *title,
			  const char *detail)
{
	char type[96];
	cJSON *doc = cJSON_CreateObject();

	snprintf(type, sizeof(type), "urn:forged:problem:%s", slug);
	cJSON_AddStringToObject(doc, "type", type);
	cJSON_AddStringToObject(doc, "title", title);
	cJSON_AddNumberToObject(doc, "status", status);
	cJSON_AddStringToObject(doc, "detail", detail);
	cJSON_AddStringToObject(doc, "instance", req->url);
	cJSON_AddStringToObject(doc, "request_id", req->request_id);
	return doc;
}

static void problem_reply(struct fg_resp *resp, unsigned status, cJSON *doc)
{
	fg_json_reply(resp, status, doc);
	resp->content_type = "application/problem+json";
	if (status == 401)
		resp->www_authenticate = 1;
}

void fg_problem(struct fg_resp *resp, struct fg_req *req, unsigned status, const char *slug,
		const char *title, const char *fmt, ...)
{
	char detail[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	problem_reply(resp, status, problem_doc(req, status, slug, title, detail));
}

void fg_problem_extend(struct fg_resp *resp, const char *member, cJSON *value)
{
	cJSON *doc = resp->body ? cJSON_Parse(resp->body) : NULL;
	char *text;

	if (!doc || !value || !cJSON_AddItemToObject(doc, member, value)) {
		cJSON_Delete(doc);
		cJSON_Delete(value);
		return;
	}
	fg_json_utf8_fix(doc);
	text = cJSON_PrintUnformatted(doc);
	cJSON_Delete(doc);
	if (text) {
		free(resp->body);
		resp->body = text;
	}
}

/* The title of each slug a validation fault can carry. */
static const char *fault_title(const char *slug)
{
	static const char *const titles[][2] = {
		{ "invalid-field", "Invalid field" },     { "unknown-runtime", "Unknown runtime" },
		{ "invalid-utf8", "Invalid UTF-8" },      { "invalid-query", "Invalid query" },
		{ "backbone-required", "Backbone required" }, { "malformed-json", "Malformed JSON" },
	};

	for (size_t i = 0; i < sizeof(titles) / sizeof(titles[0]); i++)
		if (strcmp(titles[i][0], slug) == 0)
			return titles[i][1];
	return "Invalid request";
}

void fg_problem_v(struct fg_resp *resp, struct fg_req *req, const struct fg_vlist *v)
{
	const char *slug = v->n ? v->e[0].slug : "invalid-field";
	unsigned status = 422;
	char detail[600] = "";
	size_t o = 0;
	cJSON *doc, *errors;

	/* 400 when any fault is one of the text itself; one slug when all agree, else invalid-field. */
	for (size_t i = 0; i < v->n; i++)
		if (v->e[i].status == 400)
			status = 400;
	for (size_t i = 0; i < v->n; i++)
		if (strcmp(v->e[i].slug, slug) != 0)
			slug = status == 400 ? "invalid-utf8" : "invalid-field";
	if (status == 400 && strcmp(slug, "invalid-utf8") != 0 && strcmp(slug, "malformed-json") != 0)
		slug = "invalid-utf8";
	for (size_t i = 0; i < v->n && o + 1 < sizeof(detail); i++) {
		const struct fg_verror *e = &v->e[i];
		int n = snprintf(detail + o, sizeof(detail) - o, "%s%s%s: %s", i ? "; " : "",
				 e->parameter[0] ? "query parameter " : "", e->parameter[0] ? e->parameter : e->pointer,
				 e->detail);

		if (n < 0)
			break;
		o += (size_t)n < sizeof(detail) - o ? (size_t)n : sizeof(detail) - o - 1;
	}
	if (v->more && o + 1 < sizeof(detail))
		snprintf(detail + o, sizeof(detail) - o, "; and %zu more", v->more);
	doc = problem_doc(req, status, slug, fault_title(slug), detail);
	errors = cJSON_AddArrayToObject(doc, "errors");
	for (size_t i = 0; i < v->n; i++) {
		cJSON *e = cJSON_CreateObject();

		if (v->e[i].parameter[0])
			cJSON_AddStringToObject(e, "parameter", v->e[i].parameter);
		else
			cJSON_AddStringToObject(e, "pointer", v->e[i].pointer);
		cJSON_AddStringToObject(e, "detail", v->e[i].detail);
		cJSON_AddItemToArray(errors, e);
	}
	problem_reply(resp, status, doc);
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
	{
		/* Every string of the text, with its pointer: UTF-8, and no \u0000 cJSON would cut at. */
		struct fg_vlist v;

		v.n = v.more = 0;
		fg_v_scan_json_text(&v, req->body, req->body_len);
		if (v.n) {
			cJSON_Delete(doc);
			fg_problem_v(resp, req, &v);
			return NULL;
		}
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

void fg_api_count_pull(struct fg_api *api, unsigned long long fetched, unsigned long long from_cache)
{
	if (!api)
		return;
	pthread_mutex_lock(&api->metrics_lock);
	api->pull_fetched += fetched;
	api->pull_from_cache += from_cache;
	pthread_mutex_unlock(&api->metrics_lock);
}

void fg_api_count_forge_written(struct fg_api *api, unsigned long long bytes)
{
	if (!api)
		return;
	pthread_mutex_lock(&api->metrics_lock);
	api->forge_written += bytes;
	pthread_mutex_unlock(&api->metrics_lock);
}

static const double req_bounds[FG_API_REQ_BUCKETS] = { 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10 };

/* A request's duration, by its route (fg_n_routes: none), for forged_http_request_duration_seconds. */
static void count_duration(struct fg_api *api, const struct fg_req *req)
{
	struct timespec now;
	size_t r = req->route ? (size_t)(req->route - fg_routes) : fg_n_routes;
	double secs;
	size_t b = 0;

	if (r > FG_API_ROUTES_MAX)
		return;
	clock_gettime(CLOCK_MONOTONIC, &now);
	secs = (double)(now.tv_sec - req->started.tv_sec) + (double)(now.tv_nsec - req->started.tv_nsec) / 1e9;
	while (b < FG_API_REQ_BUCKETS && secs > req_bounds[b])
		b++;
	pthread_mutex_lock(&api->metrics_lock);
	api->req_bucket[r][b]++;
	api->req_sum[r] += secs;
	api->req_count[r]++;
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
		if (FG_GROW(t->s, t->len + (n > 0 ? (size_t)n : 0) + 1, t->cap))
			return;
	}
}

/* The process_* figures from /proc (Linux): 0 when /proc cannot be read. */
struct proc_figures {
	double cpu_seconds, start_time;
	unsigned long long rss_bytes, vm_bytes, open_fds, max_fds;
};

static void proc_figures(struct proc_figures *f)
{
	char buf[1024], *p;
	unsigned long long utime = 0, stime = 0, start = 0, vsize = 0, rss = 0, btime = 0;
	long tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	struct rlimit rl;
	FILE *fp;
	DIR *dir;

	memset(f, 0, sizeof(*f));
	if ((fp = fopen("/proc/self/stat", "r"))) {
		size_t n = fread(buf, 1, sizeof(buf) - 1, fp);

		buf[n] = '\0';
		fclose(fp);
		/* Fields after the command name "(...)": state is field 3; utime 14, stime 15, starttime 22, vsize 23, rss 24. */
		p = strrchr(buf, ')');
		if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d %llu %llu %llu",
				&utime, &stime, &start, &vsize, &rss) == 5 && tick > 0) {
			f->cpu_seconds = (double)(utime + stime) / (double)tick;
			f->vm_bytes = vsize;
			f->rss_bytes = rss * (unsigned long long)(page > 0 ? page : 4096);
		}
	}
	if ((fp = fopen("/proc/stat", "r"))) {
		while (fgets(buf, sizeof(buf), fp))
			if (sscanf(buf, "btime %llu", &btime) == 1)
				break;
		fclose(fp);
		if (btime && tick > 0)
			f->start_time = (double)btime + (double)start / (double)tick;
	}
	if ((dir = opendir("/proc/self/fd"))) {
		struct dirent *e;

		while ((e = readdir(dir)))
			if (e->d_name[0] != '.')
				f->open_fds++;
		closedir(dir);
		if (f->open_fds)
			f->open_fds--; /* the one opendir holds */
	}
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		f->max_fds = rl.rlim_cur == RLIM_INFINITY ? 0 : (unsigned long long)rl.rlim_cur;
}

/*
 * The Prometheus text: every family once, each with its HELP and TYPE
 * before its samples (tests/e2e/test_conventions.sh parses it so).
 */
char *fg_api_metrics_text(struct fg_api *api, const struct fg_store_counts *counts, const cJSON *by_verdict)
{
	struct text t = { NULL, 0, 0 };
	struct proc_figures pf;
	const cJSON *it;
	unsigned long long cum = 0, closed[FG_CONN_PHASES], health_builds;
	unsigned stuck = 0, running = fg_api_inspections_running(&stuck);

	/* Every instance of a farm gives the same store figures: this line says which one answered. */
	if (api->cfg.instance_id)
		text_add(&t, "# HELP forged_instance_info The instance answering and its store's backend.\n"
			     "# TYPE forged_instance_info gauge\nforged_instance_info{instance=\"%s\",store=\"%s\"} 1\n",
			 api->cfg.instance_id, fg_store_is_postgres(api->cfg.db_path) ? "postgres" : "sqlite");
	proc_figures(&pf);
	text_add(&t, "# HELP forged_build_info The running forged: its version and libmicrohttpd's.\n"
		     "# TYPE forged_build_info gauge\nforged_build_info{version=\"%s\",libmicrohttpd=\"%s\"} 1\n",
		 FG_VERSION, MHD_get_version());
	text_add(&t, "# HELP process_cpu_seconds_total User and system CPU time spent.\n"
		     "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %.2f\n", pf.cpu_seconds);
	text_add(&t, "# HELP process_resident_memory_bytes Resident memory size.\n"
		     "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %llu\n", pf.rss_bytes);
	text_add(&t, "# HELP process_virtual_memory_bytes Virtual memory size.\n"
		     "# TYPE process_virtual_memory_bytes gauge\nprocess_virtual_memory_bytes %llu\n", pf.vm_bytes);
	text_add(&t, "# HELP process_open_fds Open file descriptors.\n"
		     "# TYPE process_open_fds gauge\nprocess_open_fds %llu\n", pf.open_fds);
	text_add(&t, "# HELP process_max_fds The file descriptor limit (0: none).\n"
		     "# TYPE process_max_fds gauge\nprocess_max_fds %llu\n", pf.max_fds);
	text_add(&t, "# HELP process_start_time_seconds Start time of the process since the epoch.\n"
		     "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %.2f\n", pf.start_time);
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
	text_add(&t, "# HELP forged_http_request_duration_seconds Time from the end of the headers to the answer "
		     "queued, by route and method.\n# TYPE forged_http_request_duration_seconds histogram\n");
	for (size_t r = 0; r <= fg_n_routes && r <= FG_API_ROUTES_MAX; r++) {
		const char *path = r < fg_n_routes ? fg_routes[r].path : "(none)";
		const char *method = r < fg_n_routes ? fg_routes[r].method : "(any)";

		if (!api->req_count[r])
			continue;
		cum = 0;
		for (size_t b = 0; b <= FG_API_REQ_BUCKETS; b++) {
			cum += api->req_bucket[r][b];
			if (b < FG_API_REQ_BUCKETS)
				text_add(&t, "forged_http_request_duration_seconds_bucket{route=\"%s\",method=\"%s\",le=\"%g\"} %llu\n",
					 path, method, req_bounds[b], cum);
			else
				text_add(&t, "forged_http_request_duration_seconds_bucket{route=\"%s\",method=\"%s\",le=\"+Inf\"} %llu\n",
					 path, method, cum);
		}
		text_add(&t, "forged_http_request_duration_seconds_sum{route=\"%s\",method=\"%s\"} %g\n", path, method,
			 api->req_sum[r]);
		text_add(&t, "forged_http_request_duration_seconds_count{route=\"%s\",method=\"%s\"} %llu\n", path,
			 method, api->req_count[r]);
	}
	text_add(&t, "# HELP forged_pull_fetched_bytes_total Bytes remote reads (inspections and jobs) fetched.\n"
		     "# TYPE forged_pull_fetched_bytes_total counter\nforged_pull_fetched_bytes_total %llu\n",
		 api->pull_fetched);
	text_add(&t, "# HELP forged_pull_cache_hit_bytes_total Bytes remote inspections read from the pull cache "
		     "instead of the network.\n# TYPE forged_pull_cache_hit_bytes_total counter\n"
		     "forged_pull_cache_hit_bytes_total %llu\n", api->pull_from_cache);
	text_add(&t, "# HELP forged_forge_bytes_written_total Bytes of the files forge jobs wrote (hard-linked "
		     "shards not counted).\n# TYPE forged_forge_bytes_written_total counter\n"
		     "forged_forge_bytes_written_total %llu\n", api->forge_written);
	pthread_mutex_unlock(&api->metrics_lock);
	pthread_mutex_lock(&api->health_lock);
	health_builds = api->health_builds;
	pthread_mutex_unlock(&api->health_lock);
	text_add(&t, "# HELP forged_fleet_health_builds_total Fleet health documents built from the store (one at "
		     "a time; the others are answered from the last one).\n# TYPE forged_fleet_health_builds_total counter\n"
		     "forged_fleet_health_builds_total %llu\n", health_builds);
	pthread_mutex_lock(&api->conns.lock);
	memcpy(closed, api->conns.closed, sizeof(closed));
	pthread_mutex_unlock(&api->conns.lock);
	text_add(&t, "# HELP forged_http_deadline_closed_total Connections shut down past their deadline, by phase.\n"
		     "# TYPE forged_http_deadline_closed_total counter\n");
	for (int ph = 0; ph < FG_CONN_PHASES; ph++)
		if (ph != FG_CONN_HANDLING)
			text_add(&t, "forged_http_deadline_closed_total{phase=\"%s\"} %llu\n",
				 fg_conn_phase_name((enum fg_conn_phase)ph), closed[ph]);
	pthread_mutex_lock(&api->inspect_lock);
	text_add(&t, "# HELP forged_inspections_running Inspection threads alive (stuck ones too).\n"
		     "# TYPE forged_inspections_running gauge\nforged_inspections_running %u\n", running);
	text_add(&t, "# HELP forged_inspections_stuck Inspection threads still running past their deadline.\n"
		     "# TYPE forged_inspections_stuck gauge\nforged_inspections_stuck %u\n", stuck);
	text_add(&t, "# HELP forged_inspection_timeouts_total Inspections answered 503 at their deadline.\n"
		     "# TYPE forged_inspection_timeouts_total counter\nforged_inspection_timeouts_total %llu\n",
		 api->inspect_timeouts);
	pthread_mutex_unlock(&api->inspect_lock);
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

/* ---- the drain ---- */

static void answer_draining(struct fg_req *req, struct fg_resp *resp)
{
	fg_problem(resp, req, 503, "draining", "Shutting down",
		   "the server is draining before it stops: try again shortly (another instance may answer)");
	resp->retry_after = FG_API_RETRY_AFTER_S;
	resp->close = 1;
}

/* Count a handler in; 0 (and nothing counted) once the drain has begun. */
static int handler_enter(struct fg_api *api)
{
	int ok;

	pthread_mutex_lock(&api->drain_lock);
	ok = !api->draining;
	if (ok)
		api->handlers_running++;
	pthread_mutex_unlock(&api->drain_lock);
	return ok;
}

static void handler_leave(struct fg_api *api)
{
	pthread_mutex_lock(&api->drain_lock);
	if (--api->handlers_running == 0)
		pthread_cond_broadcast(&api->drain_cond);
	pthread_mutex_unlock(&api->drain_lock);
}

static int draining(struct fg_api *api)
{
	int d;

	pthread_mutex_lock(&api->drain_lock);
	d = api->draining;
	pthread_mutex_unlock(&api->drain_lock);
	return d;
}

void fg_api_drain(struct fg_api *api, unsigned wait_seconds)
{
	struct timespec until;

	if (!api)
		return;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (time_t)wait_seconds;
	pthread_mutex_lock(&api->drain_lock);
	api->draining = 1;
	while (api->handlers_running > 0 &&
	       pthread_cond_timedwait(&api->drain_cond, &api->drain_lock, &until) == 0)
		;
	pthread_mutex_unlock(&api->drain_lock);
}

/* Find the request's route (req->route, NULL when none) and the methods its path allows. */
static void route_request(struct fg_req *req)
{
	req->route = NULL;
	req->allow[0] = '\0';
	req->path_found = 0;
	for (size_t i = 0; i < fg_n_routes; i++) {
		int64_t id = 0;

		if (!path_matches(fg_routes[i].path, req->url, &id, req->asset, sizeof(req->asset)))
			continue;
		req->path_found = 1;
		if (strlen(req->allow) + strlen(fg_routes[i].method) + 3 < sizeof(req->allow)) {
			if (req->allow[0])
				strncat(req->allow, ", ", sizeof(req->allow) - strlen(req->allow) - 1);
			strncat(req->allow, fg_routes[i].method, sizeof(req->allow) - strlen(req->allow) - 1);
		}
		if (!req->route && strcmp(fg_routes[i].method, req->method) == 0) {
			req->route = &fg_routes[i];
			req->id = id;
		}
	}
}

/*
 * What may be decided before the body is read: the drain, the route, the
 * token, a declared length over the cap, the content type.  0 when the
 * request may go on; else resp holds the answer.
 */
static int refuse_early(struct fg_req *req, struct fg_resp *resp)
{
	const struct fg_route *route = req->route;
	/* Liveness stays true in the drain: the process is alive and stopping on purpose. */
	int livez = strcmp(req->url, "/livez") == 0;

	if (!livez && draining(req->api)) {
		answer_draining(req, resp);
		return -1;
	}
	if (!route) {
		if (req->path_found) {
			fg_problem(resp, req, 405, "method-not-allowed", "Method not allowed",
				   "%s is not allowed on %s (allowed: %s)", req->method, req->url, req->allow);
			snprintf(resp->allow, sizeof(resp->allow), "%s", req->allow);
		} else {
			fg_problem(resp, req, 404, "no-such-route", "Not found", "no route %s %s", req->method, req->url);
		}
		return -1;
	}
	if (authorize(req, route, resp))
		return -1;
	if (req->too_large || req->declared_len > req->api->cfg.max_body_bytes) {
		fg_problem(resp, req, 413, "body-too-large", "Body too large", "the body exceeds %zu bytes",
			   req->api->cfg.max_body_bytes);
		return -1;
	}
	if (route->json_body && !json_content_type(fg_req_header(req, "Content-Type"))) {
		fg_problem(resp, req, 415, "unsupported-media-type", "Unsupported media type",
			   "the body must be application/json");
		return -1;
	}
	return 0;
}

/* An Idempotency-Key is 1 to 200 visible ASCII characters. */
static int key_ok(const char *key)
{
	size_t n = strlen(key);

	if (!n || n > FG_API_IDEM_KEY_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (key[i] < 0x21 || key[i] > 0x7E)
			return 0;
	return 1;
}

/*
 * Run a POST handler under its Idempotency-Key (every POST but /v1/jobs,
 * whose key the store keeps with the job): a request repeating the key and
 * body of one answered 2xx gets that answer again (Idempotent-Replayed:
 * true), with another body 422 idempotency-key-reused, while the first is
 * still being answered 409 idempotency-key-in-use.
 */
static void run_keyed(struct fg_req *req, struct fg_resp *resp, const char *key)
{
	char route[sizeof(req->allow) + 300], hex[FG_SHA256_HEX];
	struct fg_idem_answer answer;
	enum fg_idem_state state;
	struct fg_err err = { 0 };
	struct fg_store *s = fg_api_store(req->api, &err);
	int stale;

	if (!s) {
		fg_problem_from_err(resp, req, &err);
		if (err.code != FG_ENOSPC && err.code != FG_ENOMEM)
			resp->retry_after = FG_API_RETRY_AFTER_S;
		return;
	}
	snprintf(route, sizeof(route), "%s %s", req->method, req->url);
	fg_sha256_buf(req->body ? req->body : "", req->body_len, hex);
	/* A reservation outlives the longest request it can stand for (an inspection's deadline). */
	stale = (int)(req->api->cfg.inspect_seconds ? req->api->cfg.inspect_seconds : FG_API_INSPECT_SECONDS_DEFAULT) + 60;
	if (stale < FG_API_IDEM_STALE_SECONDS)
		stale = FG_API_IDEM_STALE_SECONDS;
	if (fg_store_idem_claim(s, route, key, hex, stale, &state, &answer, &err) != 0) {
		fg_problem_from_err(resp, req, &err);
		return;
	}
	if (state == FG_IDEM_IN_FLIGHT) {
		fg_problem(resp, req, 409, "idempotency-key-in-use", "Idempotency key in use",
			   "a request with Idempotency-Key '%s' is being answered now; retry", key);
		resp->retry_after = 1;
		return;
	}
	if (state == FG_IDEM_REPLAY) {
		resp->status = (unsigned)answer.status;
		resp->body = answer.body;
		resp->content_type = "application/json";
		resp->replayed = 1;
		snprintf(resp->location, sizeof(resp->location), "%s", answer.location);
		return;
	}
	req->route->fn(req, resp);
	if (resp->status >= 200 && resp->status < 300 && resp->body)
		fg_store_idem_finish(s, route, key, (int)resp->status, resp->location, resp->body, &err);
	else
		fg_store_idem_release(s, route, key, &err);
}

static void dispatch(struct fg_req *req, struct fg_resp *resp)
{
	const char *key = fg_req_header(req, "Idempotency-Key");

	if (refuse_early(req, resp))
		return;
	if (strcmp(req->url, "/livez") == 0) {
		req->route->fn(req, resp);
		return;
	}
	if (key && strcmp(req->method, "POST") == 0 && !key_ok(key)) {
		fg_problem(resp, req, 400, "bad-idempotency-key", "Bad Idempotency-Key",
			   "the key must be 1 to %d visible ASCII characters", FG_API_IDEM_KEY_MAX);
		return;
	}
	if (!handler_enter(req->api)) {
		answer_draining(req, resp);
		return;
	}
	if (key && strcmp(req->method, "POST") == 0 && strcmp(req->route->path, "/v1/jobs") != 0) {
		run_keyed(req, resp, key);
	} else {
		/* Under a key the answer is stored before the handler returns: only unkeyed requests suspend. */
		req->may_suspend = 1;
		req->route->fn(req, resp);
		req->may_suspend = 0;
	}
	/* A suspended request is still running: it leaves once answered (or when its connection ends). */
	if (!req->suspended)
		handler_leave(req->api);
}

int fg_req_suspend(struct fg_req *req, void (*finish)(struct fg_req *, struct fg_resp *), void *pending,
		   void (*pending_free)(void *))
{
	struct fg_api *api = req->api;

	/* Once the stop has begun, libmicrohttpd may be stopped before a write queued now comes back. */
	pthread_mutex_lock(&api->drain_lock);
	if (api->stopping) {
		pthread_mutex_unlock(&api->drain_lock);
		return -1;
	}
	api->suspended++;
	pthread_mutex_unlock(&api->drain_lock);
	req->finish = finish;
	req->pending = pending;
	req->pending_free = pending_free;
	req->suspended = 1;
	atomic_store(&req->resumed, 0);
	MHD_suspend_connection(req->conn);
	return 0;
}

void fg_req_resume(struct fg_req *req)
{
	/* Nothing of req is touched once its connection runs again: it may be answered and freed at once. */
	struct fg_api *api = req->api;
	struct MHD_Connection *conn = req->conn;

	atomic_store(&req->resumed, 1);
	MHD_resume_connection(conn);
	pthread_mutex_lock(&api->drain_lock);
	if (--api->suspended == 0)
		pthread_cond_broadcast(&api->drain_cond);
	pthread_mutex_unlock(&api->drain_lock);
}

static void pending_release(struct fg_req *req)
{
	if (req->pending && req->pending_free)
		req->pending_free(req->pending);
	req->pending = NULL;
	req->pending_free = NULL;
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
	if (resp->close)
		MHD_add_response_header(r, "Connection", "close");
	if (resp->location[0])
		MHD_add_response_header(r, "Location", resp->location);
	if (resp->www_authenticate)
		MHD_add_response_header(r, "WWW-Authenticate", "Bearer realm=\"forged\"");
	if (resp->replayed)
		MHD_add_response_header(r, "Idempotent-Replayed", "true");
	/* Every 503 says when to try again, every 202 when to look again (RFC 9110 10.2.3). */
	if (!resp->retry_after && resp->status == 503)
		resp->retry_after = FG_API_RETRY_AFTER_S;
	if (!resp->retry_after && resp->status == 202)
		resp->retry_after = FG_API_POLL_AFTER_S;
	if (resp->retry_after) {
		char secs[16];

		snprintf(secs, sizeof(secs), "%u", resp->retry_after);
		MHD_add_response_header(r, "Retry-After", secs);
	}
	ret = MHD_queue_response(req->conn, resp->status, r);
	MHD_destroy_response(r);
	count_status(req->api, resp->status);
	count_duration(req->api, req);
	/* The watchdog's self-check every few seconds would drown the log. */
	if (req->api->cfg.log && strcmp(req->request_id, FG_API_SELF_CHECK_ID) != 0)
		req->api->cfg.log(resp->status >= 500 ? 3 : 6, "%s %s %u request_id=%s%s%s", req->method, req->url,
				  resp->status, req->request_id, req->token_name ? " token=" : "",
				  req->token_name ? req->token_name : "");
	return ret;
}

/* The declared body length (Content-Length), 0 when none; *chunked when the body is chunked. */
static unsigned long long declared_length(struct fg_req *req, int *chunked)
{
	const char *cl = fg_req_header(req, "Content-Length");
	const char *te = fg_req_header(req, "Transfer-Encoding");
	unsigned long long n = 0;
	char *end;

	*chunked = te && strcasestr(te, "chunked") != NULL;
	if (cl && *cl >= '0' && *cl <= '9') {
		errno = 0;
		n = strtoull(cl, &end, 10);
		if (errno)
			n = ULLONG_MAX;
	}
	return n;
}

static enum MHD_Result answer_now(struct fg_req *req, struct fg_resp *resp)
{
	enum MHD_Result ret = send_response(req, resp);

	free(resp->body);
	fg_conns_phase(&req->api->conns, req->conn, FG_CONN_SENDING);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
				  const char *version, const char *upload_data, size_t *upload_size, void **con_cls)
{
	struct fg_api *api = cls;
	struct fg_req *req = *con_cls;
	struct fg_resp resp;

	(void)version;
	memset(&resp, 0, sizeof(resp));
	if (!req) {
		int chunked = 0;

		req = calloc(1, sizeof(*req));
		if (!req)
			return MHD_NO;
		clock_gettime(CLOCK_MONOTONIC, &req->started);
		req->api = api;
		req->conn = conn;
		req->method = method;
		req->url = url;
		make_request_id(req);
		*con_cls = req;
		fg_conns_phase(&api->conns, conn, FG_CONN_BODY);
		route_request(req);
		req->declared_len = declared_length(req, &chunked);
		/*
		 * A request with a body is refused here, before any of it is read,
		 * when the answer does not depend on it (no route, no valid token, a
		 * declared length over the cap, not JSON): libmicrohttpd then sends
		 * no 100 Continue and closes the connection after the answer.
		 */
		if ((req->declared_len > 0 || chunked) && refuse_early(req, &resp)) {
			req->answered = 1;
			return answer_now(req, &resp);
		}
		return MHD_YES;
	}
	if (*upload_size) {
		size_t n = *upload_size;

		if (req->answered) {
			*upload_size = 0;
			return MHD_YES;
		}
		if (!req->too_large && req->body_len + n > api->cfg.max_body_bytes) {
			/* Only a chunked body gets here (a declared length was refused at once): close. */
			req->too_large = 1;
			free(req->body);
			req->body = NULL;
			req->body_len = req->body_cap = 0;
			return MHD_NO;
		}
		if (FG_GROW(req->body, req->body_len + n + 1, req->body_cap))
			return MHD_NO;
		memcpy(req->body + req->body_len, upload_data, n);
		req->body_len += n;
		req->body[req->body_len] = '\0';
		*upload_size = 0;
		return MHD_YES;
	}
	if (req->suspended) {
		/* Called again once fg_req_resume has run: the write is done, finish answers. */
		if (!atomic_load(&req->resumed))
			return MHD_YES;
		req->suspended = 0;
		req->finish(req, &resp);
		pending_release(req);
		handler_leave(api);
		req->answered = 1;
		return answer_now(req, &resp);
	}
	if (req->answered)
		return MHD_YES;
	fg_conns_phase(&api->conns, conn, FG_CONN_HANDLING);
	dispatch(req, &resp);
	if (req->suspended)
		return MHD_YES;
	req->answered = 1;
	return answer_now(req, &resp);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct fg_req *req = *con_cls;

	(void)toe;
	/* Kept alive: the next request's headers must be complete within the idle deadline. */
	fg_conns_phase(&((struct fg_api *)cls)->conns, conn, FG_CONN_IDLE);
	if (req) {
		/* Resumed, but the connection ended before finish ran: the handler leaves here. */
		if (req->suspended)
			handler_leave(req->api);
		pending_release(req);
		free(req->body);
		free(req);
		*con_cls = NULL;
	}
}

/* libmicrohttpd's own messages ("Server reached connection limit...") go to the daemon's log. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct fg_api *api = cls;
	char line[512];
	size_t n;

	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		line[--n] = '\0';
	if (api->cfg.log)
		api->cfg.log(6, "libmicrohttpd: %s", line);
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
	if (!api->cfg.threads)
		api->cfg.threads = FG_API_THREADS_DEFAULT;
	pthread_key_create(&api->store_key, close_store);
	pthread_rwlock_init(&api->tokens_lock, NULL);
	pthread_mutex_init(&api->metrics_lock, NULL);
	pthread_mutex_init(&api->health_lock, NULL);
	pthread_cond_init(&api->health_built, NULL);
	pthread_mutex_init(&api->drain_lock, NULL);
	pthread_mutex_init(&api->inspect_lock, NULL);
	pthread_cond_init(&api->drain_cond, NULL);
	if (api->cfg.tokens_file) {
		rc = fg_tokens_load(&api->tokens, api->cfg.tokens_file, err);
		if (rc)
			goto fail;
		api->auth_enabled = 1;
	}
	memset(&ss, 0, sizeof(ss));
	{
		/* A literal or a name (localhost): the first address getaddrinfo gives. */
		struct addrinfo hints, *res = NULL;
		int gai;

		memset(&hints, 0, sizeof(hints));
		hints.ai_family = AF_UNSPEC;
		hints.ai_socktype = SOCK_STREAM;
		hints.ai_flags = AI_PASSIVE;
		gai = getaddrinfo(api->cfg.listen_addr, NULL, &hints, &res);
		if (gai != 0 || !res || (res->ai_family != AF_INET && res->ai_family != AF_INET6) ||
		    res->ai_addrlen > sizeof(ss)) {
			rc = fg_err_set(err, FG_EUSAGE, "listen address '%s' does not resolve to an IP address%s%s",
					api->cfg.listen_addr, gai ? ": " : "", gai ? gai_strerror(gai) : "");
			if (res)
				freeaddrinfo(res);
			goto fail;
		}
		memcpy(&ss, res->ai_addr, res->ai_addrlen);
		freeaddrinfo(res);
		if (ss.ss_family == AF_INET6)
			((struct sockaddr_in6 *)&ss)->sin6_port = htons(cfg->port);
		else
			((struct sockaddr_in *)&ss)->sin_port = htons(cfg->port);
	}
	{
		struct fg_conn_limits lim = { { 0 } };

		lim.seconds[FG_CONN_HEADERS] = cfg->header_seconds ? cfg->header_seconds : FG_API_HEADER_SECONDS_DEFAULT;
		lim.seconds[FG_CONN_BODY] = cfg->body_seconds ? cfg->body_seconds : FG_API_BODY_SECONDS_DEFAULT;
		lim.seconds[FG_CONN_SENDING] = FG_API_SEND_SECONDS_DEFAULT;
		lim.seconds[FG_CONN_IDLE] = cfg->timeout_seconds ? cfg->timeout_seconds : FG_API_TIMEOUT_SECONDS_DEFAULT;
		if (fg_conns_start(&api->conns, &lim) != 0) {
			rc = fg_err_set(err, FG_ENOMEM, "cannot start the connection reaper thread");
			api->conns_started = 1;
			goto fail;
		}
		api->conns_started = 1;
	}
	api->mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG |
				    MHD_ALLOW_SUSPEND_RESUME |
				    (ss.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0),
				    0, NULL, NULL, on_request, api,
				    MHD_OPTION_EXTERNAL_LOGGER, mhd_log, api,
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
				    MHD_OPTION_NOTIFY_CONNECTION, fg_conns_notify, &api->conns,
				    MHD_OPTION_END);
	if (!api->mhd) {
		rc = fg_err_set(err, FG_EINPUT, "cannot listen on %s:%u (in use, or not allowed)", api->cfg.listen_addr,
				cfg->port);
		goto fail;
	}
	info = MHD_get_daemon_info(api->mhd, MHD_DAEMON_INFO_BIND_PORT);
	api->port = info ? info->port : cfg->port;
	api->bound = ss;
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
	/* A write with the store's writer resumes its connection when done: the daemon must outlive that. */
	pthread_mutex_lock(&api->drain_lock);
	api->stopping = 1;
	while (api->suspended > 0)
		pthread_cond_wait(&api->drain_cond, &api->drain_lock);
	pthread_mutex_unlock(&api->drain_lock);
	if (api->mhd)
		MHD_stop_daemon(api->mhd);
	if (api->conns_started)
		fg_conns_stop(&api->conns);
	fg_tokens_release(&api->tokens);
	pthread_rwlock_destroy(&api->tokens_lock);
	pthread_mutex_destroy(&api->metrics_lock);
	pthread_mutex_destroy(&api->health_lock);
	pthread_cond_destroy(&api->health_built);
	pthread_mutex_destroy(&api->drain_lock);
	pthread_mutex_destroy(&api->inspect_lock);
	pthread_cond_destroy(&api->drain_cond);
	fg_health_snap_unref(api->health);
	pthread_key_delete(api->store_key);
	for (size_t i = 0; i < sizeof(api->owned) / sizeof(api->owned[0]); i++)
		free(api->owned[i]);
	free(api);
}

int fg_api_self_check(struct fg_api *api, unsigned timeout_ms, const char **why)
{
	static const char request[] = "GET /livez HTTP/1.1\r\nHost: self\r\nX-Request-Id: " FG_API_SELF_CHECK_ID
				      "\r\nConnection: close\r\n\r\n";
	struct sockaddr_storage ss = api->bound;
	struct timespec t0, now;
	char reply[64];
	size_t got = 0, sent = 0;
	int fd, rc = -1;
	unsigned stuck = 0;
	socklen_t sl;

	fg_api_inspections_running(&stuck);
	if (stuck >= FG_API_INSPECT_THREADS_MAX) {
		*why = "every inspection thread is stuck past its deadline (a source that blocks)";
		return -1;
	}
	*why = "the HTTP side did not answer GET /livez in time";
	/* A wildcard address is reached on the loopback. */
	if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;

		if (IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr))
			a6->sin6_addr = in6addr_loopback;
		a6->sin6_port = htons(api->port);
		sl = sizeof(*a6);
	} else {
		struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;

		if (a4->sin_addr.s_addr == htonl(INADDR_ANY))
			a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		a4->sin_port = htons(api->port);
		sl = sizeof(*a4);
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (connect(fd, (struct sockaddr *)&ss, sl) != 0 && errno != EINPROGRESS)
		goto out;
	for (;;) {
		struct pollfd pfd = { fd, (short)(sent < sizeof(request) - 1 ? POLLOUT : POLLIN), 0 };
		long left;

		clock_gettime(CLOCK_MONOTONIC, &now);
		left = (long)timeout_ms - ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
			goto out;
		if (sent < sizeof(request) - 1) {
			ssize_t n = send(fd, request + sent, sizeof(request) - 1 - sent, MSG_NOSIGNAL);

			if (n < 0 && errno != EAGAIN && errno != EINTR)
				goto out;
			sent += n > 0 ? (size_t)n : 0;
			continue;
		}
		{
			ssize_t n = recv(fd, reply + got, sizeof(reply) - 1 - got, 0);

			if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
				goto out;
			got += n > 0 ? (size_t)n : 0;
			reply[got] = '\0';
			if (got >= 12) {
				rc = strncmp(reply, "HTTP/1.1 200", 12) == 0 ? 0 : -1;
				goto out;
			}
		}
	}
out:
	close(fd);
	return rc;
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
