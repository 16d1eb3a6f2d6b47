/*
 * routes.c: the handlers of the REST API (docs/interfaces.md section 5) and their table.
 *
 * Handlers validate the request, confine every path to the allowed roots,
 * call forge/ (inspect, verify) or the store, and answer JSON or a problem.
 * Forge work itself never runs here: POST /v1/jobs enqueues, workers run.
 */
#include "api/internal.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api/paths.h"
#include "api/validate.h"
#include "store/idem.h"
#include "forge/artifact/layout.h"
#include "forge/artifact/policy.h"
#include "forge/artifact/request.h"
#include "forge/core/fs.h"
#include "forge/core/sha256.h"
#include "forge/model/mtplx.h"
#include "forge/model/inspect.h"
#include "forge/source/checkpoint.h"
#include "forge/source/pull/pull.h"
#include "forge/model/runtimes.h"
#include "forge/verify/verify.h"

#define LIST_LIMIT_DEFAULT 50
/* The largest id a request may name: JSON numbers are doubles, exact to 2^53. */
#define FG_API_ID_MAX 9007199254740992LL
/* A fleet report's host (a DNS name, as the store keeps it) and its observed object as JSON. */
#define FG_API_HOST_MAX 253
#define FG_API_OBSERVED_MAX 16384

static struct fg_store *store_or_problem(struct fg_req *req, struct fg_resp *resp)
{
	struct fg_err err = { 0 };
	struct fg_store *s = fg_api_store(req->api, &err);

	if (s)
		return s;
	if (err.code == FG_ENOSPC || err.code == FG_ENOMEM) {
		fg_problem_from_err(resp, req, &err);
	} else {
		fg_problem(resp, req, 503, "store-unavailable", "Store unavailable", "%s", err.msg);
		resp->retry_after = FG_API_RETRY_AFTER_S;
	}
	return NULL;
}

/* Confine a path field; answers 403/422 and returns -1 when it is not allowed. */
static int confine(struct fg_req *req, struct fg_resp *resp, const char *field, const char *path, int must_exist,
		   char *resolved)
{
	const struct fg_api_config *cfg = &req->api->cfg;
	const char *why = "";

	switch (fg_path_confine(path, cfg->allow_roots, cfg->n_allow_roots, must_exist, resolved, &why)) {
	case FG_CONFINE_OK:
		return 0;
	case FG_CONFINE_FORBIDDEN:
		fg_problem(resp, req, 403, "path-forbidden", "Path not allowed", "%s '%s': %s", field, path, why);
		return -1;
	case FG_CONFINE_MISSING:
		fg_problem(resp, req, 422, "path-missing", "Path missing", "%s '%s': %s", field, path, why);
		return -1;
	case FG_CONFINE_URL:
		fg_problem(resp, req, 422, "url-source-unsupported", "Bad path", "%s '%s': %s", field, path, why);
		return -1;
	default:
		fg_problem(resp, req, 422, "bad-path", "Bad path", "%s '%s': %s", field, path, why);
		return -1;
	}
}

/* The pull options of this server: its cache and its allowed hosts. */
static void pull_opts(const struct fg_api_config *cfg, struct fg_pull_opts *o)
{
	fg_ckpt_pull_opts(o, cfg->cache_dir, cfg->allow_hosts, cfg->n_allow_hosts);
	o->cache_ttl_seconds = cfg->etag_ttl_seconds;
}

/*
 * A URL source is allowed when its host is in allow_hosts (opening a pull
 * checks the host and fetches nothing).  Answers 403/422 and returns -1 otherwise.
 */
static int allow_url(struct fg_req *req, struct fg_resp *resp, const char *field, const char *url)
{
	const struct fg_api_config *cfg = &req->api->cfg;
	struct fg_pull_opts o;
	struct fg_pull *p = NULL;
	struct fg_err err = { 0 };
	int rc;

	if (!cfg->n_allow_hosts) {
		fg_problem(resp, req, 403, "host-forbidden", "Host not allowed",
			   "%s '%s': this server has no allow_hosts, so URL sources are refused", field, url);
		return -1;
	}
	pull_opts(cfg, &o);
	rc = fg_pull_open(&p, url, &o, &err);
	fg_pull_close(p);
	if (rc == FG_EFORBIDDEN) {
		fg_problem(resp, req, 403, "host-forbidden", "Host not allowed", "%s: %s", field, err.msg);
		return -1;
	}
	if (rc == FG_ESTATE || rc == FG_ENOSPC || rc == FG_ENOMEM) {
		fg_problem_from_err(resp, req, &err); /* our cache, not the client's URL */
		return -1;
	}
	if (rc) {
		fg_problem(resp, req, 422, "bad-url", "Bad URL", "%s: %s", field, err.msg);
		return -1;
	}
	return 0;
}

/* A source: a URL of an allowed host, or a path inside the roots (resolved). */
static int confine_source(struct fg_req *req, struct fg_resp *resp, const char *field, const char *source,
			  char *resolved)
{
	if (fg_pull_is_url(source)) {
		if (allow_url(req, resp, field, source))
			return -1;
		snprintf(resolved, PATH_MAX, "%s", source);
		return 0;
	}
	return confine(req, resp, field, source, 1, resolved);
}

/*
 * The integer query parameter key within min..max, or def when absent; a
 * fault in v (and def) when it is not one: a cursor past the largest
 * integer is refused, not saturated.
 */
static long long query_num(struct fg_req *req, struct fg_vlist *v, const char *key, long long def, long long min,
			   long long max)
{
	const char *text = fg_req_query(req, key);
	char *end;
	long long n;

	if (!text || !*text)
		return def;
	errno = 0;
	n = strtoll(text, &end, 10);
	if (*end || end == text || (*text < '0' || *text > '9'))
		fg_v_add_param(v, "invalid-query", key, "must be a decimal integer");
	else if (errno == ERANGE)
		fg_v_add_param(v, "invalid-query", key, "is past the largest integer (%lld)", LLONG_MAX);
	else if (n < min || n > max)
		fg_v_add_param(v, "invalid-query", key, "must be %lld to %lld", min, max);
	else
		return n;
	return def;
}

/* The text query parameter key (NULL when absent), which must be UTF-8 (a fault in v otherwise). */
static const char *query_text(struct fg_req *req, struct fg_vlist *v, const char *key)
{
	const char *text = fg_req_query(req, key);

	if (text && !fg_utf8_valid(text, strlen(text))) {
		fg_v_add_param(v, "invalid-utf8", key, "not valid UTF-8");
		return NULL;
	}
	return text;
}

/* ---- probes, metrics, openapi ---- */

static void get_livez(struct fg_req *req, struct fg_resp *resp)
{
	cJSON *doc = cJSON_CreateObject();
	/* Tests of the watchdog: while this file exists /livez hangs (for 30 s at most), as a wedged API would. */
	const char *stall = getenv("FORGED_FAULT_LIVEZ_STALL");

	for (int i = 0; stall && *stall && i < 300 && access(stall, F_OK) == 0; i++)
		usleep(100 * 1000);
	(void)req;
	cJSON_AddStringToObject(doc, "status", "alive");
	fg_json_reply(resp, 200, doc);
}

static void get_readyz(struct fg_req *req, struct fg_resp *resp)
{
	struct fg_store_counts counts;
	struct fg_err err = { 0 };
	struct fg_store *s = fg_api_store(req->api, &err);
	const struct fg_api_config *cfg = &req->api->cfg;
	cJSON *doc = cJSON_CreateObject();
	char reason[FG_ERR_MSG_MAX + 64];
	const char *why = NULL;
	unsigned stuck = 0;

	/* Ready means the store takes a write now, not only that it opens. */
	if (!s || fg_store_probe_write(s, &err) != 0 || fg_store_counts(s, &counts, NULL, &err) != 0) {
		snprintf(reason, sizeof(reason), "the database cannot take a write: %s", err.msg);
		why = reason;
	} else if (cfg->workers_alive && !cfg->workers_alive(cfg->ctx))
		why = "a worker thread is not running";
	else if (fg_api_inspections_running(&stuck), stuck >= FG_API_INSPECT_THREADS_MAX)
		why = "every inspection thread is stuck past its deadline (a source that blocks)";
	else if (cfg->queue_cap > 0 && counts.jobs[FG_JOB_QUEUED] >= cfg->queue_cap)
		why = "the job queue is full";
	cJSON_AddStringToObject(doc, "status", why ? "not_ready" : "ready");
	if (why)
		cJSON_AddStringToObject(doc, "reason", why);
	fg_json_reply(resp, why ? 503 : 200, doc);
}

static void get_metrics(struct fg_req *req, struct fg_resp *resp)
{
	struct fg_store_counts counts;
	struct fg_err err = { 0 };
	struct fg_store *s = store_or_problem(req, resp);
	cJSON *by_verdict = NULL;

	if (!s)
		return;
	if (fg_store_counts(s, &counts, &by_verdict, &err) != 0) {
		fg_problem_from_err(resp, req, &err);
		return;
	}
	resp->status = 200;
	resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
	resp->body = fg_api_metrics_text(req->api, &counts, by_verdict);
	cJSON_Delete(by_verdict);
}

static char openapi_etag[FG_API_ETAG_MAX];
static pthread_once_t openapi_once = PTHREAD_ONCE_INIT;

static void openapi_etag_init(void)
{
	char hex[FG_SHA256_HEX];

	fg_sha256_buf(fg_openapi_json, fg_openapi_json_len, hex);
	snprintf(openapi_etag, sizeof(openapi_etag), "\"%.32s\"", hex);
}

/* The compiled-in document, sent as it is, its ETag made once. */
static void get_openapi(struct fg_req *req, struct fg_resp *resp)
{
	(void)req;
	pthread_once(&openapi_once, openapi_etag_init);
	resp->status = 200;
	resp->content_type = "application/json";
	resp->fixed = (const unsigned char *)fg_openapi_json;
	resp->fixed_len = fg_openapi_json_len;
	memcpy(resp->etag, openapi_etag, sizeof(resp->etag));
}

/* ---- inspections ---- */

static void post_inspections(struct fg_req *req, struct fg_resp *resp)
{
	const char *runtimes[FG_INSPECT_MAX_RUNTIMES];
	char resolved[PATH_MAX];
	struct fg_err err = { 0 };
	struct fg_inspect *r = NULL;
	struct fg_store *s;
	const cJSON *rts, *it;
	const char *source;
	size_t n_rt = 0;
	cJSON *body = fg_req_json(req, resp), *report, *doc;
	char digest[FG_DIGEST_MAX];
	int existed = 0;
	int64_t id;

	if (!body)
		return;
	{
		static const char *const fields[] = { "source", "runtimes", NULL };
		struct fg_vlist v = { .n = 0 };
		long i = 0;

		fg_v_known(&v, body, "", fields);
		source = fg_v_str(&v, body, "", "source", true, 1, PATH_MAX - 2);
		rts = cJSON_GetObjectItemCaseSensitive(body, "runtimes");
		if (rts && !cJSON_IsArray(rts))
			fg_v_add(&v, "invalid-field", "/runtimes", "must be an array of runtime ids");
		const cJSON *list = cJSON_IsArray(rts) ? rts : NULL;

		cJSON_ArrayForEach(it, list) {
			char ptr[32];

			snprintf(ptr, sizeof(ptr), "/runtimes/%ld", i++);
			if (!cJSON_IsString(it))
				fg_v_add(&v, "invalid-field", ptr, "must be a runtime id (a string)");
			else if (!fg_runtime_find(it->valuestring))
				fg_v_add(&v, "unknown-runtime", ptr, "'%s' is not a runtime id", it->valuestring);
			else if (n_rt == FG_INSPECT_MAX_RUNTIMES)
				fg_v_add(&v, "invalid-field", ptr, "more than %d runtimes", FG_INSPECT_MAX_RUNTIMES);
			else
				runtimes[n_rt++] = it->valuestring;
		}
		if (v.n) {
			fg_problem_v(resp, req, &v);
			goto out;
		}
	}
	if (confine_source(req, resp, "source", source, resolved))
		goto out;
	if (!(s = store_or_problem(req, resp)))
		goto out;
	switch (fg_api_inspect(req->api, resolved, runtimes, n_rt, &r, &err)) {
	case 0:
		break;
	case FG_API_INSPECT_BUSY:
		fg_problem(resp, req, 503, "inspections-busy", "Inspections busy",
			   "every inspection slot is taken; try again later");
		resp->retry_after = FG_API_RETRY_AFTER_S;
		goto out;
	case FG_API_INSPECT_TIMEOUT:
		fg_problem(resp, req, 503, "inspection-timeout", "Inspection timed out", "%s", err.msg);
		resp->retry_after = FG_API_RETRY_AFTER_S;
		goto out;
	case FG_API_INSPECT_DRAINING:
		fg_problem(resp, req, 503, "draining", "Shutting down",
			   "the server began draining before the inspection finished");
		resp->retry_after = FG_API_RETRY_AFTER_S;
		resp->close = 1;
		goto out;
	default:
		/* The code decides: the client's checkpoint (422), a redirect off the allowed hosts (403), ours. */
		if (err.code == FG_EINPUT || err.code == FG_EUSAGE)
			fg_problem(resp, req, 422, "malformed-checkpoint", "Malformed checkpoint", "%s", err.msg);
		else if (err.code == FG_EFORBIDDEN)
			fg_problem(resp, req, 403, "host-forbidden", "Host not allowed", "%s", err.msg);
		else
			fg_problem_from_err(resp, req, &err);
		goto out;
	}
	report = fg_inspect_json(r);
	if (!report) {
		fg_problem(resp, req, 500, "internal", "Internal error", "out of memory");
		goto out;
	}
	fg_json_utf8_fix(report); /* file and tensor names are any bytes; the stored report is UTF-8 */
	{
		/* What a remote inspection read, for /metrics. */
		const cJSON *rem = cJSON_GetObjectItemCaseSensitive(report, "remote");
		const cJSON *f = cJSON_GetObjectItemCaseSensitive(rem, "bytes_fetched");
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(rem, "bytes_from_cache");
		int64_t nf = 0, nc = 0;

		if (cJSON_IsNumber(f))
			fg_json_to_int(f->valuedouble, 0, FG_API_ID_MAX, &nf);
		if (cJSON_IsNumber(c))
			fg_json_to_int(c->valuedouble, 0, FG_API_ID_MAX, &nc);
		if (nf || nc)
			fg_api_count_pull(req->api, (unsigned long long)nf, (unsigned long long)nc);
	}
	{
		struct fg_inspect_summary sum;
		struct fg_artifact_in a = { .source = source, .report = report, .digest = digest,
					    .mtplx_runtime = r->mtplx_runtime };

		fg_inspect_summarize(r, &sum);
		a.family = sum.family;
		a.ok = sum.ok;
		a.probe_mean = sum.probe_mean;
		a.head_convention = sum.head_convention;

		/* The same source revision inspected again is the same report: one artifact (issue 13). */
		if (fg_inspect_report_digest(report, digest, &err) != 0 ||
		    fg_store_artifact_put(s, &a, &id, &existed, &err) != 0) {
			cJSON_Delete(report);
			fg_problem_from_err(resp, req, &err);
			goto out;
		}
		if (!existed)
			fg_api_data_changed(req->api);
	}
	doc = cJSON_CreateObject();
	cJSON_AddNumberToObject(doc, "artifact_id", (double)id);
	cJSON_AddItemToObject(doc, "report", report);
	cJSON_AddStringToObject(doc, "digest", digest);
	cJSON_AddBoolToObject(doc, "existing", existed);
	snprintf(resp->location, sizeof(resp->location), "/v1/artifacts/%lld", (long long)id);
	fg_json_reply(resp, existed ? 200 : 201, doc);
out:
	fg_inspect_free(r);
	cJSON_Delete(body);
}

/* ---- jobs ---- */

/* The problem a forge request fault answers with (always 422). */
static void request_problem(struct fg_req *req, struct fg_resp *resp, enum fg_forge_request_fault fault,
			    const char *msg)
{
	switch (fault) {
	case FG_FREQ_UNKNOWN_RUNTIME:
		fg_problem(resp, req, 422, "unknown-runtime", "Unknown runtime", "%s", msg);
		break;
	case FG_FREQ_BACKBONE_REQUIRED:
		fg_problem(resp, req, 422, "backbone-required", "Backbone required", "%s", msg);
		break;
	default:
		fg_problem(resp, req, 422, "invalid-field", "Invalid field", "%s", msg);
		break;
	}
}

/*
 * Every fault of a job body, listed with its pointer: unknown members, a
 * member of the wrong type (optional ones were ignored before), the kind,
 * the target and the policy.  Returns -1 with resp set when there is one.
 */
static int job_body_faults(struct fg_req *req, struct fg_resp *resp, const cJSON *body)
{
	static const char *const fields[] = { "kind", "source", "backbone", "target", "quant", "out",
					      "allow_requantize", NULL };
	struct fg_vlist v = { .n = 0 };
	struct fg_policy pol;
	const char *kind, *target, *quant;
	const cJSON *requantize = cJSON_GetObjectItemCaseSensitive(body, "allow_requantize");

	fg_v_known(&v, body, "", fields);
	kind = fg_v_str(&v, body, "", "kind", true, 1, 64);
	fg_v_str(&v, body, "", "source", true, 1, PATH_MAX - 2);
	fg_v_str(&v, body, "", "backbone", false, 1, PATH_MAX - 2);
	target = fg_v_str(&v, body, "", "target", false, 1, FG_FORGE_TARGET_MAX - 1);
	quant = fg_v_str(&v, body, "", "quant", false, 1, 64);
	fg_v_str(&v, body, "", "out", false, 1, PATH_MAX - 2);
	if (requantize && !cJSON_IsBool(requantize))
		fg_v_add(&v, "invalid-field", "/allow_requantize", "must be a boolean");
	if (kind && strcmp(kind, "forge") != 0)
		fg_v_add(&v, "invalid-field", "/kind", "must be \"forge\"");
	if (target) {
		const struct fg_runtime *rows[FG_LAYOUT_MAX_TARGETS];
		struct fg_err terr = { 0 };
		size_t n;

		/* One runtime id or a comma-separated list of them. */
		if (fg_layout_targets(target, rows, &n, &terr) != 0)
			fg_v_add(&v, "unknown-runtime", "/target", "%s", terr.msg);
	}
	if (quant && fg_policy_parse(quant, &pol, NULL) != 0)
		fg_v_add(&v, "invalid-field", "/quant", "must be keep, match, mxfp4 or affine:BITS:GROUP");
	if (!v.n)
		return 0;
	fg_problem_v(resp, req, &v);
	return -1;
}

/*
 * An out folder is refused at submission, not when the job runs: an allowed
 * root itself (422 bad-path: the forge would replace the root), or anything
 * that exists already (409 out-exists: a forge never writes over it), unless
 * the request replays a job submitted with the same key and body (whose out
 * that job may have made).  Returns -1 with resp set when refused.
 */
static int out_refused(struct fg_req *req, struct fg_resp *resp, struct fg_store *s, const char *out,
		       const char *key, const char *body_sha256)
{
	const struct fg_api_config *cfg = &req->api->cfg;
	struct fg_err err = { 0 };
	struct stat st;
	int known = 0;

	for (size_t i = 0; i < cfg->n_allow_roots; i++) {
		char root[PATH_MAX];

		if (realpath(cfg->allow_roots[i], root) && strcmp(root, out) == 0) {
			fg_problem(resp, req, 422, "bad-path", "Bad path", "out '%s' is an allowed root itself", out);
			return -1;
		}
	}
	if (lstat(out, &st) != 0)
		return 0;
	if (key && fg_store_job_key_known(s, key, body_sha256, &known, &err) != 0) {
		fg_problem_from_err(resp, req, &err);
		return -1;
	}
	if (known)
		return 0;
	fg_problem(resp, req, 409, "out-exists", "Output exists",
		   "out '%s' exists already (%s): a forge never writes over it; name a new folder", out,
		   S_ISDIR(st.st_mode) ? "a folder" : S_ISREG(st.st_mode) ? "a file" : "not a folder");
	return -1;
}

/*
 * A job object with its request's out resolved: a job without one writes
 * to artifacts_dir/ID (daemon/workers.c), which the store does not know.
 */
static void resolve_out(struct fg_req *req, cJSON *job)
{
	cJSON *rq = cJSON_GetObjectItemCaseSensitive(job, "request");
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(job, "id");
	char out[PATH_MAX];

	if (!req->api->cfg.artifacts_dir || !cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(rq, "out")) ||
	    !cJSON_IsNumber(id))
		return;
	if (snprintf(out, sizeof(out), "%s/%lld", req->api->cfg.artifacts_dir, (long long)id->valuedouble) <
	    (int)sizeof(out))
		cJSON_ReplaceItemInObjectCaseSensitive(rq, "out", cJSON_CreateString(out));
}

static cJSON *job_doc(struct fg_req *req, const struct fg_job *job)
{
	cJSON *doc = fg_job_json(job);

	if (doc)
		resolve_out(req, doc);
	return doc;
}

static void post_jobs(struct fg_req *req, struct fg_resp *resp)
{
	char src[PATH_MAX], bb[PATH_MAX], out[PATH_MAX], hex[FG_SHA256_HEX];
	struct fg_err err = { 0 };
	struct fg_forge_request rq;
	enum fg_forge_request_fault fault;
	struct fg_job job;
	struct fg_store *s;
	const char *key;
	cJSON *body = fg_req_json(req, resp), *params = NULL;
	char *params_text = NULL, *asked_text = NULL;
	int replayed = 0;

	memset(&job, 0, sizeof(job));
	if (!body)
		return;
	if (job_body_faults(req, resp, body))
		goto out;
	if (fg_forge_request_from_json(&rq, body, &fault, &err) != 0) {
		request_problem(req, resp, fault, err.msg);
		goto out;
	}
	/* No target named: the configured list (forge_target), stored with the job. */
	if (!cJSON_GetObjectItemCaseSensitive(body, "target") && req->api->cfg.forge_target)
		rq.target = req->api->cfg.forge_target;
	if (confine_source(req, resp, "source", rq.source, src) ||
	    (rq.backbone && confine(req, resp, "backbone", rq.backbone, 1, bb)) ||
	    (rq.out && confine(req, resp, "out", rq.out, 0, out)))
		goto out;
	/* The queue stores the confined paths, never the client's spelling. */
	rq.source = src;
	rq.backbone = rq.backbone ? bb : NULL;
	rq.out = rq.out ? out : NULL;
	params = fg_forge_request_to_json(&rq);
	params_text = params ? cJSON_PrintUnformatted(params) : NULL;
	/* The request as the client spelled it, for the job's echo (its fields were checked above). */
	asked_text = cJSON_PrintUnformatted(body);
	fg_sha256_buf(req->body, req->body_len, hex);
	key = fg_req_header(req, "Idempotency-Key");
	if (key && (strlen(key) > 200 || !*key)) {
		fg_problem(resp, req, 400, "bad-idempotency-key", "Bad Idempotency-Key", "the key must be 1-200 bytes");
		goto out;
	}
	if (!params_text || !asked_text) {
		fg_problem(resp, req, 500, "internal", "Internal error", "out of memory");
		goto out;
	}
	if (!(s = store_or_problem(req, resp)))
		goto out;
	if (rq.out && out_refused(req, resp, s, out, key, hex))
		goto out;
	if (fg_store_job_enqueue(s, "forge", params_text, asked_text, key, hex, req->api->cfg.queue_cap, &job,
				 &replayed, &err) != 0) {
		fg_problem_from_err(resp, req, &err);
		goto out;
	}
	if (!replayed && req->api->cfg.job_enqueued)
		req->api->cfg.job_enqueued(req->api->cfg.ctx);
	snprintf(resp->location, sizeof(resp->location), "/v1/jobs/%lld", (long long)job.id);
	fg_json_reply(resp, 202, job_doc(req, &job));
out:
	fg_job_release(&job);
	free(params_text);
	cJSON_free(asked_text);
	cJSON_Delete(params);
	cJSON_Delete(body);
}

static void get_job(struct fg_req *req, struct fg_resp *resp)
{
	struct fg_err err = { 0 };
	struct fg_store *s = store_or_problem(req, resp);
	struct fg_job job;

	memset(&job, 0, sizeof(job));
	if (!s)
		return;
	if (fg_store_job_get(s, req->id, &job, &err) != 0)
		fg_problem_from_err(resp, req, &err);
	else
		fg_json_reply(resp, 200, job_doc(req, &job));
	fg_job_release(&job);
}

static void list_reply(struct fg_resp *resp, cJSON *items, int64_t next)
{
	cJSON *doc = cJSON_CreateObject();

	cJSON_AddItemToObject(doc, "items", items);
	if (next)
		cJSON_AddNumberToObject(doc, "next_cursor", (double)next);
	else
		cJSON_AddNullToObject(doc, "next_cursor");
	fg_json_reply(resp, 200, doc);
}

static void get_jobs(struct fg_req *req, struct fg_resp *resp)
{
	struct fg_err err = { 0 };
	struct fg_vlist v = { .n = 0 };
	struct fg_store *s;
	const char *state = query_text(req, &v, "state");
	enum fg_job_state st = FG_JOB_QUEUED;
	long long cursor = query_num(req, &v, "cursor", 0, 0, LLONG_MAX);
	long long limit = query_num(req, &v, "limit", LIST_LIMIT_DEFAULT, 1, FG_STORE_LIST_LIMIT_MAX);
	cJSON *items = NULL;
	int64_t next = 0;

	if (state && fg_job_state_parse(state, &st) != 0)
		fg_v_add_param(&v, "invalid-query", "state", "'%s' is not a job state", state);
	if (v.n) {
		fg_problem_v(resp, req, &v);
		return;
	}
	if (!(s = store_or_problem(req, resp)))
		return;
	if (fg_store_job_list(s, state ? (int)st : -1, cursor, (int)limit, &items, &next, &err) != 0) {
		fg_problem_from_err(resp, req, &err);
	} else {
		cJSON *it;

		cJSON_ArrayForEach(it, items)
			resolve_out(req, it);
		list_reply(resp, items, next);
	}
}

static void delete_job(struct fg_req *req, struct fg_resp *resp)
{
	struct fg_err err = { 0 };
	struct fg_store *s = store_or_problem(req, resp);
	enum fg_job_state was;
	struct fg_job job;

	memset(&job, 0, sizeof(job));
	if (!s)
		return;
	/* A finished job cannot be cancelled: 409, naming its state (it was 200 with the job unchanged). */
	if (fg_store_job_get(s, req->id, &job, &err) != 0) {
		fg_problem_from_err(resp, req, &err);
		goto out;
	}
	was = job.state;
	fg_job_release(&job);
	if (was == FG_JOB_QUEUED || was == FG_JOB_RUNNING) {
		if (fg_store_job_cancel(s, req->id, &job, &err) != 0) {
			fg_problem_from_err(resp, req, &err);
			goto out;
		}
		was = job.state;
		if (was == FG_JOB_RUNNING || (was == FG_JOB_CANCELLED)) {
			fg_json_reply(resp, was == FG_JOB_RUNNING ? 202 : 200, job_doc(req, &job));
			goto out;
		}
	}
	fg_problem(resp, req, 409, "job-finished", "Job finished", "job %lld is %s already: there is nothing to cancel",
		   (long long)req->id, fg_job_state_name(was));
out:
	fg_job_release(&job);
}

/* ---- artifacts ---- */

static void get_artifact(struct fg_req *req, struct fg_resp *resp)
{
	struct fg_err err = { 0 };
	struct fg_store *s = store_or_problem(req, resp);
	cJSON *doc = NULL;

	if (!s)
		return;
	/* The stored report and provenance go out as stored (UTF-8 checked when stored), not parsed again. */
	if (fg_store_artifact_get_raw(s, req->id, &doc, &err) != 0)
		fg_problem_from_err(resp, req, &err);
	else
		fg_json_reply(resp, 200, doc);
}

static void get_artifacts(struct fg_req *req, struct fg_resp *resp)
{
	struct fg_err err = { 0 };
	struct fg_vlist v = { .n = 0 };
	struct fg_store *s;
	long long cursor = query_num(req, &v, "cursor", 0, 0, LLONG_MAX);
	long long limit = query_num(req, &v, "limit", LIST_LIMIT_DEFAULT, 1, FG_STORE_LIST_LIMIT_MAX);
	const char *verdict = query_text(req, &v, "verdict"), *family = query_text(req, &v, "family");
	cJSON *items = NULL;
	int64_t next = 0;

	if (v.n) {
		fg_problem_v(resp, req, &v);
		return;
	}
	if (!(s = store_or_problem(req, resp)))
		return;
	if (fg_store_artifact_list(s, verdict, family, cursor, (int)limit, &items, &next, &err) != 0)
		fg_problem_from_err(resp, req, &err);
	else
		list_reply(resp, items, next);
}

/*
 * After a verification is stored: a forged MTPLX pack's mtplx_runtime.json
 * on disk takes the restamped document the store now holds, so an MTPLX host
 * loading the folder sees the verification (MTPLX stamps its own packs the
 * same way after its verify).  Returns {path, written, error} or JSON null
 * when the artifact has no such file (an inspection, another target).  One
 * writer at a time, each writing the latest document, so two verifications
 * racing leave the later one on disk.
 */
static pthread_mutex_t runtime_file_lock = PTHREAD_MUTEX_INITIALIZER;

static cJSON *rewrite_runtime_file(struct fg_store *s, int64_t id)
{
	struct fg_err err = { 0 };
	char dir[PATH_MAX], path[PATH_MAX];
	cJSON *runtime = NULL, *o = NULL;
	struct stat st;
	char *text = NULL;
	int rc;

	/* Only the folder and the runtime document are read: most artifacts have none, and this runs per POST. */
	pthread_mutex_lock(&runtime_file_lock);
	rc = fg_store_artifact_runtime(s, id, dir, sizeof(dir), &runtime, &err);
	if (rc || !*dir || !cJSON_IsObject(runtime) ||
	    !cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(runtime, "forge_provenance"),
					      "forged_version") ||
	    snprintf(path, sizeof(path), "%s/%s", dir, FG_MTPLX_RUNTIME_FILE) >= (int)sizeof(path) ||
	    lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
		pthread_mutex_unlock(&runtime_file_lock);
		cJSON_Delete(runtime);
		return cJSON_CreateNull();
	}
	text = cJSON_Print(runtime);
	rc = text ? fg_fs_write_atomic(path, text, strlen(text), &err) : fg_err_set(&err, FG_ENOMEM, "out of memory");
	pthread_mutex_unlock(&runtime_file_lock);
	free(text);
	cJSON_Delete(runtime);
	o = cJSON_CreateObject();
	if (o) {
		cJSON_AddStringToObject(o, "path", path);
		cJSON_AddBoolToObject(o, "written", rc == 0);
		if (rc)
			cJSON_AddStringToObject(o, "error", err.msg);
		else
			cJSON_AddNullToObject(o, "error");
	}
	return o;
}

/*
 * The 201 body {id, artifact_id, result, mtplx_runtime}, with result as the
 * store printed it (compact, UTF-8: the body's strings were checked), not
 * printed a second time.  runtime: rewrite_runtime_file's answer, or NULL
 * for JSON null.  NULL when out of memory.
 */
static char *created_body(int64_t id, int64_t artifact, const char *result, cJSON *runtime)
{
	char *rt = NULL, *out;
	size_t cap;

	if (runtime) {
		fg_json_utf8_fix(runtime); /* the path is any bytes */
		if (!(rt = cJSON_PrintUnformatted(runtime)))
			return NULL;
	}
	cap = strlen(result) + (rt ? strlen(rt) : 4) + 96;
	out = malloc(cap);
	if (out)
		snprintf(out, cap, "{\"id\":%lld,\"artifact_id\":%lld,\"result\":%s,\"mtplx_runtime\":%s}", (long long)id,
			 (long long)artifact, result, rt ? rt : "null");
	cJSON_free(rt);
	return out;
}

/* A verification post between its checks and its answer (the write may be with the store's writer). */
struct verification_post {
	struct fg_verify_input in;
	cJSON *body, *result;
	struct fg_verification_put put;
};

static void verification_post_free(void *p)
{
	struct verification_post *v = p;

	fg_store_verification_put_release(&v->put);
	cJSON_Delete(v->result);
	fg_verify_release(&v->in);
	cJSON_Delete(v->body);
	free(v);
}

/* The answer once the write is done: the store's outcome in v->put. */
static void verification_answer(struct fg_req *req, struct fg_resp *resp, struct verification_post *v)
{
	struct fg_err err = { 0 };
	struct fg_store *s;
	cJSON *runtime = NULL;

	if (v->put.rc) {
		fg_problem_from_err(resp, req, &v->put.err);
		return;
	}
	fg_api_data_changed(req->api);
	/* Only a restamped document has a file to rewrite: the others answer null without reading the store again. */
	if (v->put.restamped) {
		if (!(s = fg_api_store(req->api, &err))) {
			/* Committed already: 201 without the file's news rather than an error a client would retry. */
			if (req->api->cfg.log)
				req->api->cfg.log(4, "artifact %lld: runtime file not rewritten: %s", (long long)req->id, err.msg);
		}
		/* Out of memory here still answers 201: the verification is committed, a retry would store it twice. */
		runtime = s ? rewrite_runtime_file(s, req->id) : NULL;
		if (runtime && cJSON_IsNull(runtime)) {
			cJSON_Delete(runtime);
			runtime = NULL;
		}
	}
	resp->body = created_body(v->put.id, req->id, v->put.result_text, runtime);
	cJSON_Delete(runtime);
	if (!resp->body) {
		fg_problem(resp, req, 500, "internal", "Internal error", "out of memory");
		return;
	}
	resp->status = 201;
	resp->content_type = "application/json";
	/* Verifications are read as the artifact's verifications[]. */
	snprintf(resp->location, sizeof(resp->location), "/v1/artifacts/%lld", (long long)req->id);
}

static void verification_finish(struct fg_req *req, struct fg_resp *resp)
{
	verification_answer(req, resp, req->pending);
}

/* The writer's callback: the connection runs again and verification_finish answers. */
static void verification_written(void *ctx)
{
	fg_req_resume(ctx);
}

static void post_verifications(struct fg_req *req, struct fg_resp *resp)
{
	struct fg_verify_result res;
	struct fg_err err = { 0 };
	struct fg_store *s;
	struct verification_post *v = calloc(1, sizeof(*v));

	if (!v) {
		fg_problem(resp, req, 500, "internal", "Internal error", "out of memory");
		return;
	}
	if (!(v->body = fg_req_json(req, resp)))
		goto out;
	if (fg_verify_parse(&v->in, v->body, &err) != 0 ||
	    fg_verify_decide(&v->in, req->api->cfg.collapse_threshold > 0 ? req->api->cfg.collapse_threshold
								   : FG_VERIFY_COLLAPSE_DEFAULT, &res, &err) != 0) {
		fg_problem(resp, req, 422, "invalid-verification", "Invalid verification rows", "%s", err.msg);
		goto out;
	}
	if (!(s = store_or_problem(req, resp)))
		goto out;
	/* An unknown artifact is the store's FG_ENOTFOUND (a foreign key), hence 404. */
	if (!(v->result = fg_verify_result_json(&res))) {
		fg_problem(resp, req, 500, "internal", "Internal error", "out of memory");
		goto out;
	}
	/* The store keeps the body as cJSON prints it (fg_store_verification_put). */
	/*
	 * The handler thread does not wait for the commit: the connection is
	 * suspended until the writer's callback resumes it, and
	 * verification_finish answers then.  Suspended first, so that a
	 * callback that comes at once finds it suspended.
	 */
	if (req->may_suspend && fg_req_suspend(req, verification_finish, v, verification_post_free) == 0) {
		if (fg_store_verification_put_async(s, &v->put, req->id, req->body, v->result, verification_written, req,
						    &err) != 0) {
			/* Refused at once (its checks, or no memory to queue it): the error is in err or in put.err. */
			if (err.code)
				v->put.err = err;
			v->put.rc = v->put.err.code ? v->put.err.code : FG_EINTERNAL;
			fg_req_resume(req);
		}
		return;
	}
	v->put.rc = fg_store_verification_put(s, req->id, req->body, v->result, &v->put.id, &v->put.restamped,
					      &v->put.result_text, &v->put.err);
	verification_answer(req, resp, v);
out:
	verification_post_free(v);
}

/* ---- fleet ---- */

/*
 * A host names the artifact it serves by id, by the artifact digest, or by
 * the head fingerprint in either framing (MTPLX's "sha256:HEX" as MTPLX
 * computes it, or forged's older bare hex); a fingerprint several artifacts
 * share needs the digest or the id beside it (409 ambiguous-artifact lists
 * them).  It names its runtime by a row id, an alias or its real version
 * string, kept as reported beside the row it maps to.
 */
static void post_fleet_reports(struct fg_req *req, struct fg_resp *resp)
{
	struct fg_err err = { 0 };
	struct fg_store *s;
	cJSON *body = fg_req_json(req, resp), *doc, *candidates = NULL;
	const cJSON *art, *observed;
	const char *host, *runtime, *reported = NULL, *key = NULL, *digest;
	const struct fg_runtime *rt = NULL;
	enum fg_runtime_match rt_how = FG_RT_MATCH_ID;
	enum fg_artifact_match how = FG_MATCH_ID;
	int64_t id = 0, named_id = 0, want_id = 0;
	int same = 0, ambiguous = 0;

	if (!body)
		return;
	{
		static const char *const fields[] = { "host", "artifact", "runtime", "observed", "digest", "artifact_id",
						      NULL };
		struct fg_vlist v = { .n = 0 };
		const cJSON *aid;
		char *text;

		fg_v_known(&v, body, "", fields);
		host = fg_v_str(&v, body, "", "host", true, 1, FG_API_HOST_MAX);
		runtime = fg_v_str(&v, body, "", "runtime", true, 1, 128);
		digest = fg_v_str(&v, body, "", "digest", false, 1, 128);
		if (runtime && !(rt = fg_runtime_find_reported(runtime, &rt_how)))
			fg_v_add(&v, "unknown-runtime", "/runtime",
				 "'%s' is not a runtime id, an alias, or a version string a row covers "
				 "(PRODUCT VERSION: 'mlx-lm 0.31.3', 'mtplx==2.12.0')", runtime);
		art = cJSON_GetObjectItemCaseSensitive(body, "artifact");
		aid = cJSON_GetObjectItemCaseSensitive(body, "artifact_id");
		if (!art && !aid)
			fg_v_add(&v, "invalid-field", "/artifact", "required: an artifact id, digest or head fingerprint");
		else if (art && cJSON_IsNumber(art) && fg_json_to_int(art->valuedouble, 1, FG_API_ID_MAX, &named_id) != 0)
			fg_v_add(&v, "invalid-field", "/artifact", "an artifact id is an integer from 1 to %lld",
				 (long long)FG_API_ID_MAX);
		else if (art && cJSON_IsString(art) && (!*art->valuestring || strlen(art->valuestring) > 128))
			fg_v_add(&v, "invalid-field", "/artifact", "a digest or fingerprint is 1 to 128 bytes");
		else if (art && !cJSON_IsNumber(art) && !cJSON_IsString(art))
			fg_v_add(&v, "invalid-field", "/artifact", "must be an artifact id, a digest or a head fingerprint");
		if (aid && (!cJSON_IsNumber(aid) || fg_json_to_int(aid->valuedouble, 1, FG_API_ID_MAX, &want_id) != 0))
			fg_v_add(&v, "invalid-field", "/artifact_id", "an artifact id is an integer from 1 to %lld",
				 (long long)FG_API_ID_MAX);
		observed = cJSON_GetObjectItemCaseSensitive(body, "observed");
		if (observed && !cJSON_IsObject(observed)) {
			fg_v_add(&v, "invalid-field", "/observed", "must be an object");
		} else if (observed) {
			/* Free-form, but bounded: it is stored as given. */
			text = cJSON_PrintUnformatted(observed);
			if (!text || strlen(text) > FG_API_OBSERVED_MAX)
				fg_v_add(&v, "invalid-field", "/observed", "must be at most %d bytes as JSON",
					 FG_API_OBSERVED_MAX);
			cJSON_free(text);
		}
		if (v.n) {
			fg_problem_v(resp, req, &v);
			goto out;
		}
		/* Kept as the row it names ("mlx-lm 0.33.1" -> mlx-lm-0.32, "hf" -> vllm): reports join on row ids. */
		reported = runtime;
		runtime = rt->id;
		if (cJSON_IsString(art))
			key = art->valuestring;
	}
	if (named_id && want_id && named_id != want_id) {
		fg_problem(resp, req, 409, "artifact-mismatch", "Artifact mismatch",
			   "the report names artifact %lld and artifact_id %lld", (long long)named_id, (long long)want_id);
		goto out;
	}
	if (!want_id)
		want_id = named_id;
	if (!(s = store_or_problem(req, resp)))
		goto out;
	if (fg_store_artifact_resolve(s, key, digest, want_id, &id, &how, &ambiguous, &candidates, &err) != 0) {
		if (err.code == FG_ECONFLICT && ambiguous)
			fg_problem(resp, req, 409, "ambiguous-artifact", "Ambiguous artifact", "%s", err.msg);
		else if (err.code == FG_ECONFLICT)
			fg_problem(resp, req, 409, "artifact-mismatch", "Artifact mismatch", "%s", err.msg);
		else
			fg_problem_from_err(resp, req, &err);
		fg_problem_extend(resp, "candidates", candidates);
		goto out;
	}
	{
		/* The same report again (a heartbeat) is 200: nothing new was created. */
		char *text = observed ? cJSON_PrintUnformatted(observed) : NULL;

		if (observed && !text) {
			fg_problem(resp, req, 500, "internal", "Internal error", "out of memory");
			goto out;
		}
		if (fg_store_fleet_report_same(s, host, runtime, reported, id, text ? text : "{}", &same, &err) != 0 &&
		    err.code != FG_ENOTFOUND) {
			cJSON_free(text);
			fg_problem_from_err(resp, req, &err);
			goto out;
		}
		cJSON_free(text);
	}
	if (fg_store_fleet_report(s, host, id, runtime, reported, observed, &err) != 0) {
		fg_problem_from_err(resp, req, &err);
		goto out;
	}
	fg_api_data_changed(req->api);
	doc = cJSON_CreateObject();
	cJSON_AddStringToObject(doc, "host", host);
	cJSON_AddNumberToObject(doc, "artifact_id", (double)id);
	cJSON_AddStringToObject(doc, "runtime", runtime);
	/* Issue 13: how the names in the report were read. */
	cJSON_AddStringToObject(doc, "runtime_reported", reported);
	cJSON_AddStringToObject(doc, "runtime_match", fg_runtime_match_name(rt_how));
	cJSON_AddStringToObject(doc, "artifact_match", fg_artifact_match_name(how));
	/* Reports are read in fleet health; a report stands per (host, runtime). */
	if (!same)
		snprintf(resp->location, sizeof(resp->location), "/v1/fleet/health");
	fg_json_reply(resp, same ? 200 : 201, doc);
out:
	cJSON_Delete(body);
}

/* Every GET route answers HEAD too (RFC 9110 9.3.2): the same headers, no body. */
const struct fg_route fg_routes[] = {
	{ "GET", "/livez", FG_ROLE_NONE, 0, get_livez },
	{ "HEAD", "/livez", FG_ROLE_NONE, 0, get_livez },
	{ "GET", "/readyz", FG_ROLE_NONE, 0, get_readyz },
	{ "HEAD", "/readyz", FG_ROLE_NONE, 0, get_readyz },
	{ "GET", "/healthz", FG_ROLE_NONE, 0, get_readyz },
	{ "HEAD", "/healthz", FG_ROLE_NONE, 0, get_readyz },
	{ "GET", "/metrics", FG_ROLE_NONE, 0, get_metrics },
	{ "HEAD", "/metrics", FG_ROLE_NONE, 0, get_metrics },
	{ "GET", "/openapi.json", FG_ROLE_NONE, 0, get_openapi },
	{ "HEAD", "/openapi.json", FG_ROLE_NONE, 0, get_openapi },
	{ "POST", "/v1/inspections", FG_ROLE_WRITE, 1, post_inspections },
	{ "POST", "/v1/jobs", FG_ROLE_WRITE, 1, post_jobs },
	{ "GET", "/v1/jobs", FG_ROLE_READ, 0, get_jobs },
	{ "HEAD", "/v1/jobs", FG_ROLE_READ, 0, get_jobs },
	{ "GET", "/v1/jobs/{id}", FG_ROLE_READ, 0, get_job },
	{ "HEAD", "/v1/jobs/{id}", FG_ROLE_READ, 0, get_job },
	{ "DELETE", "/v1/jobs/{id}", FG_ROLE_WRITE, 0, delete_job },
	{ "GET", "/v1/artifacts", FG_ROLE_READ, 0, get_artifacts },
	{ "HEAD", "/v1/artifacts", FG_ROLE_READ, 0, get_artifacts },
	{ "GET", "/v1/artifacts/{id}", FG_ROLE_READ, 0, get_artifact },
	{ "HEAD", "/v1/artifacts/{id}", FG_ROLE_READ, 0, get_artifact },
	{ "POST", "/v1/artifacts/{id}/verifications", FG_ROLE_WRITE, 1, post_verifications },
	{ "POST", "/v1/fleet/reports", FG_ROLE_WRITE, 1, post_fleet_reports },
	{ "GET", "/v1/fleet/health", FG_ROLE_READ, 0, fg_api_get_fleet_health },
	{ "HEAD", "/v1/fleet/health", FG_ROLE_READ, 0, fg_api_get_fleet_health },
	{ "GET", "/v1/whoami", FG_ROLE_NONE, 0, fg_ui_whoami },
	{ "HEAD", "/v1/whoami", FG_ROLE_NONE, 0, fg_ui_whoami },
	/* The dashboard (ui.c): static and open; its data needs a token like any client. */
	{ "GET", "/", FG_ROLE_NONE, 0, fg_ui_root },
	{ "HEAD", "/", FG_ROLE_NONE, 0, fg_ui_root },
	{ "GET", "/ui/", FG_ROLE_NONE, 0, fg_ui_index },
	{ "HEAD", "/ui/", FG_ROLE_NONE, 0, fg_ui_index },
	{ "GET", "/ui/{asset}", FG_ROLE_NONE, 0, fg_ui_asset },
	{ "HEAD", "/ui/{asset}", FG_ROLE_NONE, 0, fg_ui_asset },
};

const size_t fg_n_routes = sizeof(fg_routes) / sizeof(fg_routes[0]);
