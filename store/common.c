/*
 * common.c: what both backends compute the same way (internal.h): job
 * states and the job object, the checks every write makes before any SQL
 * runs (so a bad argument is refused alike whatever the backend), the probe
 * buckets and their ranges, and the fixed parts of the fleet health
 * document.
 */
#include "store/internal.h"

#include "forge/artifact/forge.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- job states and the job object ---- */

static const char *const state_names[] = {
	[FG_JOB_QUEUED] = "queued",
	[FG_JOB_RUNNING] = "running",
	[FG_JOB_SUCCEEDED] = "succeeded",
	[FG_JOB_FAILED] = "failed",
	[FG_JOB_CANCELLED] = "cancelled",
};

#define N_STATES ((int)(sizeof(state_names) / sizeof(state_names[0])))
_Static_assert(N_STATES == FG_JOB_STATES, "a name for every job state");

const char *fg_job_state_name(enum fg_job_state s)
{
	if ((unsigned)s < (unsigned)N_STATES)
		return state_names[s];
	return "unknown";
}

int fg_job_state_parse(const char *name, enum fg_job_state *out)
{
	if (!name || !out)
		return FG_EINPUT;
	for (int i = 0; i < N_STATES; i++) {
		if (strcmp(name, state_names[i]) == 0) {
			*out = (enum fg_job_state)i;
			return 0;
		}
	}
	return FG_EINPUT;
}

void fg_job_release(struct fg_job *job)
{
	if (!job)
		return;
	free(job->params);
	free(job->verdicts);
	free(job->asked);
	job->params = job->verdicts = job->asked = NULL;
}

/* {code, severity, detail} of the refusal that failed job, or JSON null; NULL when out of memory. */
static cJSON *refusal_json(const struct fg_job *job)
{
	const struct fg_verdict_row *row = job->refusal;
	cJSON *o;

	if (!row)
		return cJSON_CreateNull();
	o = cJSON_CreateObject();
	if (o && (!cJSON_AddStringToObject(o, "code", row->name) ||
		  !cJSON_AddStringToObject(o, "severity", fg_severity_name(row->severity)) ||
		  !cJSON_AddStringToObject(o, "detail", job->error))) {
		cJSON_Delete(o);
		o = NULL;
	}
	return o;
}

/* The error a person reads: a refusal's detail is led by its code. */
static int add_error(cJSON *o, const struct fg_job *job)
{
	const struct fg_verdict_row *row = job->refusal;
	char text[sizeof(job->error) + 80];

	if (!job->error[0] && !row)
		return cJSON_AddNullToObject(o, "error") != NULL;
	if (!row)
		return cJSON_AddStringToObject(o, "error", job->error) != NULL;
	snprintf(text, sizeof(text), "%s: %s", row->name, job->error);
	return cJSON_AddStringToObject(o, "error", text) != NULL;
}

/* bytes_done, bytes_total and eta_s of a running job's stage, else null. */
static int add_bytes(cJSON *o, const struct fg_job *job)
{
	int known = job->state == FG_JOB_RUNNING && job->has_bytes;

	return (known ? cJSON_AddNumberToObject(o, "bytes_done", (double)job->bytes_done)
		      : cJSON_AddNullToObject(o, "bytes_done")) &&
	       (known ? cJSON_AddNumberToObject(o, "bytes_total", (double)job->bytes_total)
		      : cJSON_AddNullToObject(o, "bytes_total")) &&
	       (known && job->eta_s >= 0 ? cJSON_AddNumberToObject(o, "eta_s", job->eta_s)
					 : cJSON_AddNullToObject(o, "eta_s"));
}

/* Parsed JSON text, or a fresh empty array (array) or object when the text is absent or not that. */
static cJSON *parse_or(const char *text, int array)
{
	cJSON *j = text ? cJSON_Parse(text) : NULL;

	if (j && (array ? cJSON_IsArray(j) : cJSON_IsObject(j)))
		return j;
	cJSON_Delete(j);
	return array ? cJSON_CreateArray() : cJSON_CreateObject();
}

static int add_str_or_null(cJSON *o, const char *key, const char *s)
{
	return (s ? cJSON_AddStringToObject(o, key, s) : cJSON_AddNullToObject(o, key)) != NULL;
}

/*
 * What was asked: the client's spelling (asked) beside what the queue
 * holds (params: paths confined), defaults filled in (allow_requantize
 * false unless asked).  A job stored before issue 13 has no asked: its
 * source as named is then the stored one.
 */
static cJSON *request_json(const struct fg_job *job)
{
	cJSON *params = parse_or(job->params, 0), *asked = parse_or(job->asked, 0), *o = cJSON_CreateObject();
	const char *src = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(params, "source"));
	const char *bb = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(params, "backbone"));
	const char *named = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(asked, "source"));
	const char *named_bb = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(asked, "backbone"));
	const char *target = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(params, "target"));
	const char *quant = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(params, "quant"));
	int ok = params && asked && o;

	ok = ok && add_str_or_null(o, "source", named ? named : src) && add_str_or_null(o, "source_resolved", src) &&
	     add_str_or_null(o, "backbone", named_bb ? named_bb : bb) && add_str_or_null(o, "backbone_resolved", bb) &&
	     cJSON_AddStringToObject(o, "target", target ? target : FG_FORGE_DEFAULT_TARGET) &&
	     cJSON_AddStringToObject(o, "quant", quant ? quant : "keep") &&
	     add_str_or_null(o, "out", cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(params, "out"))) &&
	     cJSON_AddBoolToObject(o, "allow_requantize",
				   cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(params, "allow_requantize")));
	cJSON_Delete(params);
	cJSON_Delete(asked);
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

cJSON *fg_job_json(const struct fg_job *job)
{
	cJSON *o, *refusal, *item;
	char url[48];

	if (!job)
		return NULL;
	o = cJSON_CreateObject();
	if (!o)
		return NULL;
	if (!cJSON_AddNumberToObject(o, "id", (double)job->id) ||
	    !cJSON_AddStringToObject(o, "kind", job->kind) ||
	    !cJSON_AddStringToObject(o, "state", fg_job_state_name(job->state)) ||
	    !cJSON_AddStringToObject(o, "stage", job->stage) ||
	    !cJSON_AddNumberToObject(o, "progress", job->progress) || !add_bytes(o, job) ||
	    !add_error(o, job))
		goto fail;
	refusal = refusal_json(job);
	if (!refusal || !cJSON_AddItemToObject(o, "refusal", refusal)) {
		cJSON_Delete(refusal); /* not o's when the add failed */
		goto fail;
	}
	if (!(job->artifact_id > 0 ? cJSON_AddNumberToObject(o, "artifact_id", (double)job->artifact_id)
				   : cJSON_AddNullToObject(o, "artifact_id")) ||
	    !cJSON_AddStringToObject(o, "created_at", job->created_at) ||
	    !cJSON_AddStringToObject(o, "updated_at", job->updated_at))
		goto fail;
	/* Issue 13, new fields: the verdicts as data, the artifact's link, what was asked. */
	item = parse_or(job->verdicts, 1);
	if (!item || !cJSON_AddItemToObject(o, "verdicts", item)) {
		cJSON_Delete(item);
		goto fail;
	}
	snprintf(url, sizeof(url), "/v1/artifacts/%lld", (long long)job->artifact_id);
	if (!add_str_or_null(o, "artifact_url", job->artifact_id > 0 ? url : NULL))
		goto fail;
	item = request_json(job);
	if (!item || !cJSON_AddItemToObject(o, "request", item)) {
		cJSON_Delete(item);
		goto fail;
	}
	return o;
fail:
	cJSON_Delete(o);
	return NULL;
}

/* ---- what an artifact key matched ---- */

static const char *const match_names[] = {
	[FG_MATCH_ID] = "id",
	[FG_MATCH_DIGEST] = "digest",
	[FG_MATCH_HEAD_FINGERPRINT] = "head_fingerprint",
	[FG_MATCH_LEGACY_FINGERPRINT] = "fingerprint",
};

const char *fg_artifact_match_name(enum fg_artifact_match m)
{
	return (unsigned)m < sizeof(match_names) / sizeof(match_names[0]) ? match_names[m] : "unknown";
}


/* ---- resolving what a fleet report names (the rows: each backend's resolve) ---- */

#define CANDIDATES_MAX 50   /* candidates a 409 lists */

int fg_store_resolver_init(struct fg_store_resolver *r, struct fg_err *err)
{
	memset(r, 0, sizeof(*r));
	r->list = cJSON_CreateArray();
	return r->list ? 0 : fg_err_set(err, FG_ENOMEM, "out of memory");
}

static int put_text(cJSON *o, const char *key, const char *t)
{
	return (t ? cJSON_AddStringToObject(o, key, t) : cJSON_AddNullToObject(o, key)) != NULL;
}

int fg_store_resolver_row(struct fg_store_resolver *r, const struct fg_store_resolve_row *row, struct fg_err *err)
{
	struct fg_store_found f = { .id = row->id, .by = row->by };
	cJSON *o;
	int seen = 0;

	fg_store_copy_text(row->digest, row->digest ? strlen(row->digest) : 0, f.digest, sizeof(f.digest));
	if (f.by == 0) {
		r->by_id = f;
		return 0;
	}
	if (f.by == 1) {
		r->by_digest = f;
		return 0;
	}
	for (size_t i = 0; i < r->n_fp; i++)
		seen |= r->fp[i].id == f.id;
	if (seen)
		return 0;
	if (r->n_fp == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 8;
		struct fg_store_found *g = realloc(r->fp, cap * sizeof(*r->fp));

		if (!g)
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		r->fp = g;
		r->cap = cap;
	}
	r->fp[r->n_fp++] = f;
	if (cJSON_GetArraySize(r->list) >= CANDIDATES_MAX)
		return 0;
	o = cJSON_CreateObject();
	if (!o || !cJSON_AddItemToArray(r->list, o)) {
		cJSON_Delete(o);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	if (!cJSON_AddNumberToObject(o, "artifact_id", (double)row->id) || !put_text(o, "digest", row->digest) ||
	    !put_text(o, "head_fingerprint", row->head_fingerprint) || !put_text(o, "fingerprint", row->fingerprint) ||
	    !put_text(o, "source", row->source) || !put_text(o, "path", row->path) ||
	    !put_text(o, "created_at", row->created_at))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	return 0;
}

int fg_store_resolver_decide(struct fg_store_resolver *r, const char *key, const char *digest, int64_t want_id,
			     int64_t *id, enum fg_artifact_match *how, int *ambiguous, cJSON **candidates,
			     struct fg_err *err)
{
	int64_t pick = 0;
	int rc = 0, conflict = 0, amb = 0;

	if (want_id > 0 && !r->by_id.id) {
		rc = fg_err_set(err, FG_ENOTFOUND, "no artifact %lld", (long long)want_id);
		goto out;
	}
	if (!key) {
		/* By id; a digest beside it must be that artifact's. */
		pick = r->by_id.id;
		*how = FG_MATCH_ID;
		conflict = digest && strcmp(r->by_id.digest, digest) != 0;
	} else if (r->by_digest.id) {
		/* A digest names one artifact: what else the report says must agree with it. */
		pick = r->by_digest.id;
		*how = FG_MATCH_DIGEST;
		conflict = (want_id > 0 && want_id != pick) || (digest && strcmp(digest, key) != 0);
	} else if (r->n_fp == 0) {
		rc = fg_err_set(err, FG_ENOTFOUND, "no artifact has digest or fingerprint '%s'", key);
		goto out;
	} else if (!digest && want_id <= 0) {
		if (r->n_fp > 1) {
			conflict = amb = 1;
			rc = fg_err_set(err, FG_ECONFLICT,
					"fingerprint '%s' is shared by %zu artifacts: name the artifact's digest or id too",
					key, r->n_fp);
			goto out;
		}
		pick = r->fp[0].id;
		*how = r->fp[0].by == 2 ? FG_MATCH_HEAD_FINGERPRINT : FG_MATCH_LEGACY_FINGERPRINT;
	} else {
		/* Narrowed by the digest and/or the id: a digest or an id is one artifact at most. */
		for (size_t i = 0; i < r->n_fp; i++) {
			if ((digest && strcmp(r->fp[i].digest, digest) != 0) || (want_id > 0 && r->fp[i].id != want_id))
				continue;
			pick = r->fp[i].id;
			*how = r->fp[i].by == 2 ? FG_MATCH_HEAD_FINGERPRINT : FG_MATCH_LEGACY_FINGERPRINT;
		}
		conflict = !pick;
	}
	if (conflict) {
		rc = fg_err_set(err, FG_ECONFLICT, "the report names different artifacts: %s%s%s%s%s%s%lld",
				key ? "'" : "", key ? key : "", key ? "'" : "", digest ? ", digest " : "",
				digest ? digest : "", want_id > 0 ? ", id " : ", artifact ",
				(long long)(want_id > 0 ? want_id : pick));
		goto out;
	}
	*id = pick;
out:
	if (rc == FG_ECONFLICT && conflict) {
		if (ambiguous)
			*ambiguous = amb;
		if (candidates) {
			*candidates = r->list;
			r->list = NULL;
		}
	}
	fg_store_resolver_free(r);
	return rc;
}

void fg_store_resolver_free(struct fg_store_resolver *r)
{
	cJSON_Delete(r->list);
	free(r->fp);
	r->list = NULL;
	r->fp = NULL;
	r->n_fp = r->cap = 0;
}

/* ---- checks before writing ---- */

int fg_store_check_text(const char *text, size_t max, int required, const char *name, struct fg_err *err)
{
	if (!text)
		return required ? fg_err_set(err, FG_EINPUT, "%s is missing", name) : 0;
	if (required && !*text)
		return fg_err_set(err, FG_EINPUT, "%s is empty", name);
	if (strlen(text) > max)
		return fg_err_set(err, FG_EINPUT, "%s is longer than %zu bytes", name, max);
	return 0;
}

int fg_store_check_enqueue(const char *kind, const char **params_json, const char *asked_json, const char *idem_key,
			   const char *body_sha256, struct fg_err *err)
{
	cJSON *parsed;
	int rc = fg_store_check_text(kind, sizeof(((struct fg_job *)0)->kind) - 1, 1, "job kind", err);

	if (!rc)
		rc = fg_store_check_text(idem_key, FG_STORE_KEY_MAX, 0, "idempotency key", err);
	if (!rc && idem_key)
		rc = fg_store_check_text(body_sha256, FG_STORE_HASH_MAX, 1, "request body digest", err);
	if (rc)
		return rc;
	if (idem_key && !*idem_key)
		return fg_err_set(err, FG_EINPUT, "idempotency key is empty");
	if (!*params_json)
		*params_json = "{}";
	/* Stored params are parsed by workers later; refuse now what they could not read. */
	parsed = cJSON_Parse(*params_json);
	if (!parsed)
		return fg_err_set(err, FG_EINPUT, "job parameters are not JSON");
	cJSON_Delete(parsed);
	parsed = asked_json ? cJSON_Parse(asked_json) : NULL;
	if (asked_json && !cJSON_IsObject(parsed)) {
		cJSON_Delete(parsed);
		return fg_err_set(err, FG_EINPUT, "the job's request as asked is not a JSON object");
	}
	cJSON_Delete(parsed);
	return 0;
}

int fg_store_check_finish(int64_t id, enum fg_job_state state, int64_t artifact_id, struct fg_err *err)
{
	if (state != FG_JOB_SUCCEEDED && state != FG_JOB_FAILED && state != FG_JOB_CANCELLED)
		return fg_err_set(err, FG_EINPUT, "finishing job %lld: '%s' is not a final state", (long long)id,
				  fg_job_state_name(state));
	if (artifact_id < 0)
		return fg_err_set(err, FG_EINPUT, "finishing job %lld: artifact id %lld is negative", (long long)id,
				  (long long)artifact_id);
	return 0;
}

void fg_store_worker_instance(const char *worker, char *buf, size_t cap)
{
	const char *slash = worker ? strrchr(worker, '/') : NULL;

	if (!cap)
		return;
	if (!worker)
		buf[0] = '\0';
	else if (slash)
		snprintf(buf, cap, "%.*s", (int)(slash - worker), worker);
	else
		snprintf(buf, cap, "%s", worker);
}

int fg_store_check_verdicts(const cJSON *report, struct fg_err *err)
{
	const cJSON *list = cJSON_GetObjectItemCaseSensitive(report, "verdicts");
	const cJSON *v;
	int i = 0;

	if (!list || cJSON_IsNull(list))
		return 0;
	if (!cJSON_IsArray(list))
		return fg_err_set(err, FG_EINPUT, "report.verdicts is not an array");
	cJSON_ArrayForEach(v, list) {
		const char *code = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(v, "code"));
		const char *sev = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(v, "severity"));
		const struct fg_verdict_row *row = fg_verdict_code_find(code);
		enum fg_severity parsed;

		if (!row || row->kind == FG_VK_VERIFICATION)
			return fg_err_set(err, FG_EINPUT, "report.verdicts[%d].code is missing or not a verdict code", i);
		if (!fg_severity_parse(sev, &parsed))
			return fg_err_set(err, FG_EINPUT,
					  "report.verdicts[%d].severity is not info, warning or error", i);
		if (parsed != row->severity)
			return fg_err_set(err, FG_EINPUT, "report.verdicts[%d].severity is %s, but %s is raised at %s",
					  i, sev, row->name, fg_severity_name(row->severity));
		i++;
	}
	return 0;
}

int fg_store_each_file(const cJSON *provenance, fg_store_file_fn add, void *ctx, struct fg_err *err)
{
	const cJSON *files = cJSON_GetObjectItemCaseSensitive(provenance, "files");
	const cJSON *f;
	int i = 0, rc;

	if (!files || cJSON_IsNull(files))
		return 0;
	if (!cJSON_IsObject(files))
		return fg_err_set(err, FG_EINPUT, "provenance.files is not an object of file name -> sha256");
	cJSON_ArrayForEach(f, files) {
		const char *name = f->string, *sha = cJSON_GetStringValue(f);

		if (!name || !*name || strlen(name) > FG_STORE_FILE_MAX)
			return fg_err_set(err, FG_EINPUT, "provenance.files[%d] has no usable file name", i);
		if (!sha || !*sha || strlen(sha) > FG_STORE_SHA_MAX)
			return fg_err_set(err, FG_EINPUT, "provenance.files['%s'] has no usable sha256", name);
		if (add) {
			rc = add(ctx, name, sha, err);
			if (rc)
				return rc;
		}
		i++;
	}
	return 0;
}

int fg_store_prepare_artifact(const struct fg_artifact_in *a, char **report, char **provenance, char **runtime,
			      struct fg_err *err)
{
	int rc;

	*report = NULL;
	*provenance = NULL;
	*runtime = NULL;
	if (!a)
		return fg_err_set(err, FG_EINPUT, "storing an artifact: no artifact");
	if (!a->source || !*a->source)
		return fg_err_set(err, FG_EINPUT, "storing an artifact: no source");
	if (!cJSON_IsObject(a->report))
		return fg_err_set(err, FG_EINPUT, "storing artifact '%s': the report is not a JSON object", a->source);
	if (a->provenance && !cJSON_IsObject(a->provenance))
		return fg_err_set(err, FG_EINPUT, "storing artifact '%s': the provenance is not a JSON object",
				  a->source);
	rc = fg_store_check_verdicts(a->report, err);
	if (!rc && a->provenance)
		rc = fg_store_each_file(a->provenance, NULL, NULL, err);
	if (rc)
		return fg_err_prefix(err, rc, "storing artifact '%s': ", a->source);
	if (a->mtplx_runtime && !cJSON_IsObject(a->mtplx_runtime))
		return fg_err_set(err, FG_EINPUT, "storing artifact '%s': the mtplx_runtime.json is not a JSON object",
				  a->source);
	if ((a->digest && strlen(a->digest) > FG_STORE_SHA_MAX) ||
	    (a->head_fingerprint && strlen(a->head_fingerprint) > FG_STORE_SHA_MAX))
		return fg_err_set(err, FG_EINPUT, "storing artifact '%s': a digest or fingerprint over %d bytes",
				  a->source, FG_STORE_SHA_MAX);
	*report = cJSON_PrintUnformatted(a->report);
	*provenance = a->provenance ? cJSON_PrintUnformatted(a->provenance) : NULL;
	*runtime = a->mtplx_runtime ? cJSON_PrintUnformatted(a->mtplx_runtime) : NULL;
	if (!*report || (a->provenance && !*provenance) || (a->mtplx_runtime && !*runtime)) {
		cJSON_free(*report);
		cJSON_free(*provenance);
		cJSON_free(*runtime);
		*report = *provenance = *runtime = NULL;
		return fg_err_set(err, FG_ENOMEM, "storing artifact '%s': out of memory", a->source);
	}
	return 0;
}

int fg_store_prepare_verification(int64_t artifact_id, const char *rows_json, const cJSON *result,
				  const struct fg_verdict_row **out_row, char **result_text, char **rows_text,
				  struct fg_err *err)
{
	const struct fg_verdict_row *row;
	enum fg_severity parsed;
	const char *sev;
	cJSON *rows;

	*result_text = *rows_text = NULL;
	if (!rows_json || !result)
		return fg_err_set(err, FG_EINPUT, "storing a verification: no store, rows or result");
	rows = cJSON_Parse(rows_json);
	if (!rows)
		return fg_err_set(err, FG_EINPUT, "storing a verification of artifact %lld: the rows are not JSON",
				  (long long)artifact_id);
	*rows_text = cJSON_PrintUnformatted(rows);
	cJSON_Delete(rows);
	if (!*rows_text)
		return fg_err_set(err, FG_ENOMEM, "storing a verification: out of memory");
	row = fg_verdict_code_find(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(result, "verdict")));
	if (!row || row->kind != FG_VK_VERIFICATION)
		return fg_err_set(err, FG_EINPUT,
				  "storing a verification of artifact %lld: result.verdict is missing or not a verification code",
				  (long long)artifact_id);
	/* The severity is the table's; a result that says otherwise is refused. */
	sev = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(result, "severity"));
	if (sev && (!fg_severity_parse(sev, &parsed) || parsed != row->severity))
		return fg_err_set(err, FG_EINPUT,
				  "storing a verification of artifact %lld: result.severity '%.20s' is not %s's %s",
				  (long long)artifact_id, sev, row->name, fg_severity_name(row->severity));
	*result_text = cJSON_PrintUnformatted(result);
	if (!*result_text)
		return fg_err_set(err, FG_ENOMEM, "storing a verification: out of memory");
	*out_row = row;
	return 0;
}

int fg_store_prepare_report(const char *host, const char *runtime, const char *runtime_reported,
			    const cJSON *observed, char **text, struct fg_err *err)
{
	*text = NULL;
	if (!host || !*host || strlen(host) > FG_STORE_HOST_MAX)
		return fg_err_set(err, FG_EINPUT, "storing a fleet report: the host is missing or over %d bytes",
				  FG_STORE_HOST_MAX);
	if (!runtime || !*runtime || strlen(runtime) > FG_STORE_RUNTIME_MAX)
		return fg_err_set(err, FG_EINPUT,
				  "storing a fleet report from '%s': the runtime is missing or over %d bytes", host,
				  FG_STORE_RUNTIME_MAX);
	if (runtime_reported && (!*runtime_reported || strlen(runtime_reported) > FG_STORE_REPORTED_MAX))
		return fg_err_set(err, FG_EINPUT,
				  "storing a fleet report from '%s': the runtime as reported is empty or over %d bytes",
				  host, FG_STORE_REPORTED_MAX);
	*text = observed ? cJSON_PrintUnformatted(observed) : NULL;
	if (observed && !*text)
		return fg_err_set(err, FG_ENOMEM, "storing a fleet report from '%s': out of memory", host);
	return 0;
}

void fg_store_copy_text(const char *t, size_t len, char *dst, size_t cap)
{
	if (!cap)
		return;
	if (!t) {
		dst[0] = '\0';
		return;
	}
	if (len >= cap) {
		len = cap - 1;
		/* Step back over continuation bytes so no character is cut in half. */
		while (len > 0 && ((const unsigned char *)t)[len] >> 6 == 2)
			len--;
	}
	memcpy(dst, t, len);
	dst[len] = '\0';
}

/* ---- probe buckets and the health document's fixed parts ---- */

const char *const fg_sql_probe_buckets[FG_SQL_PROBE_BUCKETS] = { "below", "low", "band", "high", "above" };

/*
 * The numeric ranges of the probe buckets (internal.h): [0, 1.25),
 * [1.25, 1.74), [1.74, 1.83] (the healthy band), (1.83, 2.4], (2.4, inf).
 * The first also takes anything below 0.  Which bucket a value falls in is
 * decided by the schemas' probe_bucket column; these only label them.
 */
const struct fg_sql_probe_range fg_sql_probe_ranges[FG_SQL_PROBE_BUCKETS] = {
	{ 0.0, FG_QK_ABSOLUTE_MIN }, { FG_QK_ABSOLUTE_MIN, FG_QK_BAND_MIN }, { FG_QK_BAND_MIN, FG_QK_BAND_MAX },
	{ FG_QK_BAND_MAX, FG_QK_DOUBLE_ABOVE }, { FG_QK_DOUBLE_ABOVE, -1.0 },
};

int fg_store_stats_row(struct fg_sql_stats *c, cJSON *by_verdict, cJSON *by_family, const char *dim,
		       const char *key, int64_t n, struct fg_err *err)
{
	cJSON *obj = NULL;

	if (!dim || !key)
		return 0;
	if (strcmp(dim, "total") == 0) {
		c->artifacts = n;
	} else if (strcmp(dim, "unhealthy") == 0) {
		c->unhealthy = n;
	} else if (strcmp(dim, "verdict") == 0) {
		obj = by_verdict;
	} else if (strcmp(dim, "family") == 0) {
		obj = by_family;
	}
	if (obj && !cJSON_AddNumberToObject(obj, key, (double)n))
		return fg_err_set(err, FG_ENOMEM, "reading artifact counts: out of memory");
	return 0;
}

int fg_store_add_rows_member(cJSON *o, const char *text, size_t len, struct fg_err *err)
{
	cJSON *body = text ? cJSON_ParseWithLength(text, len) : NULL;
	cJSON *rows = cJSON_IsObject(body) ? cJSON_DetachItemFromObjectCaseSensitive(body, "rows") : NULL;

	cJSON_Delete(body);
	if (!rows)
		rows = cJSON_CreateNull();
	if (!rows || !cJSON_AddItemToObject(o, "rows", rows)) {
		cJSON_Delete(rows);
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	}
	return 0;
}

int fg_store_warnings_section(cJSON *doc, const int64_t artifacts[2], const int64_t reports[2],
			      struct fg_err *err)
{
	cJSON *list = cJSON_AddArrayToObject(doc, "warnings");

	if (!list)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	if (artifacts[0] > 0 && artifacts[1] > 0) {
		const struct fg_verdict_row *row = &fg_verdict_table[FG_V_MIXED_HEAD_CONVENTIONS_IN_FLEET];
		char detail[256];
		cJSON *w = cJSON_CreateObject();

		snprintf(detail, sizeof(detail),
			 "the fleet serves MTP heads in both conventions: %lld delta artifact(s) on %lld "
			 "host report(s), %lld absolute artifact(s) on %lld host report(s)",
			 (long long)artifacts[0], (long long)reports[0], (long long)artifacts[1],
			 (long long)reports[1]);
		/* Added to the list last, so a failure before that leaves w ours to free. */
		if (!w || !cJSON_AddStringToObject(w, "code", row->name) ||
		    !cJSON_AddStringToObject(w, "severity", fg_severity_name(row->severity)) ||
		    !cJSON_AddStringToObject(w, "detail", detail) || !cJSON_AddItemToArray(list, w)) {
			cJSON_Delete(w);
			return fg_err_set(err, FG_ENOMEM, "out of memory");
		}
	}
	return 0;
}

#define DIST_LO 0.0
#define DIST_WIDTH 0.05
#define DIST_BINS 80             /* [0, 4); below 0 goes to the first bin, 4 and above to the last */
#define BAND_LO FG_QK_BAND_MIN   /* the healthy band, as the probe buckets */
#define BAND_HI FG_QK_BAND_MAX
#define DOUBLE_SHIFT_ABOVE FG_QK_DOUBLE_ABOVE

int fg_store_dist_section(cJSON *doc, cJSON **counted, cJSON **left, cJSON **by_family, struct fg_err *err)
{
	cJSON *sec = cJSON_AddObjectToObject(doc, "probe_after_load");
	cJSON *band;

	if (!sec || !cJSON_AddNumberToObject(sec, "lo", DIST_LO) ||
	    !cJSON_AddNumberToObject(sec, "bin_width", DIST_WIDTH) || !cJSON_AddNumberToObject(sec, "bins", DIST_BINS))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	band = cJSON_AddArrayToObject(sec, "healthy_band");
	if (!band || !cJSON_AddItemToArray(band, cJSON_CreateNumber(BAND_LO)) ||
	    !cJSON_AddItemToArray(band, cJSON_CreateNumber(BAND_HI)) ||
	    !cJSON_AddNumberToObject(sec, "double_shift_above", DOUBLE_SHIFT_ABOVE) ||
	    !(*counted = cJSON_AddNumberToObject(sec, "reports", 0)) ||
	    !(*left = cJSON_AddNumberToObject(sec, "not_counted", 0)) ||
	    !(*by_family = cJSON_AddObjectToObject(sec, "by_family")))
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	return 0;
}

/* The bin of value v: [DIST_LO + i w, DIST_LO + (i + 1) w), clamped to the ends. */
static int bin_of(double v)
{
	double x = floor((v - DIST_LO) / DIST_WIDTH + 1e-9);

	if (x < 0)
		return 0;
	if (x >= DIST_BINS)
		return DIST_BINS - 1;
	return (int)x;
}

/* The counts array of family in by_family, made with DIST_BINS zeros on first use; NULL on ENOMEM. */
static cJSON *family_bins(cJSON *by_family, const char *family)
{
	cJSON *arr = cJSON_GetObjectItemCaseSensitive(by_family, family);

	if (arr)
		return arr;
	arr = cJSON_AddArrayToObject(by_family, family);
	for (int i = 0; arr && i < DIST_BINS; i++) {
		cJSON *zero = cJSON_CreateNumber(0);

		if (!zero || !cJSON_AddItemToArray(arr, zero)) {
			cJSON_Delete(zero);
			return NULL;
		}
	}
	return arr;
}

int fg_store_dist_add(cJSON *by_family, const char *family, double v, int64_t n, struct fg_err *err)
{
	cJSON *bins = family_bins(by_family, family ? family : "unknown");
	cJSON *cell = bins ? cJSON_GetArrayItem(bins, bin_of(v)) : NULL;

	if (!cell)
		return fg_err_set(err, FG_ENOMEM, "out of memory");
	cJSON_SetNumberValue(cell, cell->valuedouble + (double)n);
	return 0;
}
