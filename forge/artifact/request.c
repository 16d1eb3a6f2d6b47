/*
 * request.c: the forge job parameters codec (request.h).
 *
 * The checks are the forge's own: the target must be a runtime row and the
 * policy must parse with fg_policy_parse, so the API and the pipeline can
 * never disagree on what a valid job is.
 */
#include "forge/artifact/request.h"

#include <string.h>

#include "forge/artifact/layout.h"
#include "forge/artifact/policy.h"
#include "forge/model/runtimes.h"
#include "forge/source/pull/pull.h"

static const char *json_str(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Record why and return FG_EINPUT (err holds the message already set by the caller). */
static int refuse(enum fg_forge_request_fault *fault, enum fg_forge_request_fault why, int rc)
{
	if (fault)
		*fault = why;
	return rc;
}

int fg_forge_request_from_json(struct fg_forge_request *out, const cJSON *doc,
			       enum fg_forge_request_fault *fault, struct fg_err *err)
{
	const char *kind = json_str(doc, "kind");
	struct fg_forge_request rq = {
		.source = json_str(doc, "source"),
		.backbone = json_str(doc, "backbone"),
		.target = json_str(doc, "target"),
		.quant = json_str(doc, "quant"),
		.out = json_str(doc, "out"),
		.allow_requantize = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(doc, "allow_requantize")),
	};
	struct fg_policy policy;
	const struct fg_runtime *rows[FG_LAYOUT_MAX_TARGETS];
	size_t n_rows;
	struct fg_err terr = { 0 };

	if (fault)
		*fault = FG_FREQ_OK;
	if (!kind || strcmp(kind, "forge") != 0)
		return refuse(fault, FG_FREQ_INVALID_FIELD,
			      fg_err_set(err, FG_EINPUT, "\"kind\" must be \"forge\""));
	if (!rq.source)
		return refuse(fault, FG_FREQ_INVALID_FIELD,
			      fg_err_set(err, FG_EINPUT, "\"source\" must be a string"));
	if (rq.target && fg_layout_targets(rq.target, rows, &n_rows, &terr) != 0)
		return refuse(fault, FG_FREQ_UNKNOWN_RUNTIME, fg_err_set(err, FG_EINPUT, "\"target\" %s", terr.msg));
	if (rq.quant && fg_policy_parse(rq.quant, &policy, NULL) != 0)
		return refuse(fault, FG_FREQ_INVALID_FIELD,
			      fg_err_set(err, FG_EINPUT, "\"quant\" must be keep, match, mxfp4 or affine:BITS:GROUP"));
	if (fg_pull_is_url(rq.source) && !rq.backbone)
		return refuse(fault, FG_FREQ_BACKBONE_REQUIRED,
			      fg_err_set(err, FG_EINPUT,
					 "a remote source needs a local \"backbone\": the artifact links its shards"));
	if (!rq.target)
		rq.target = FG_FORGE_DEFAULT_TARGET;
	if (!rq.quant)
		rq.quant = "keep";
	*out = rq;
	return 0;
}

cJSON *fg_forge_request_to_json(const struct fg_forge_request *rq)
{
	cJSON *o = cJSON_CreateObject();

	if (!o || !cJSON_AddStringToObject(o, "kind", "forge") || !cJSON_AddStringToObject(o, "source", rq->source) ||
	    (rq->backbone && !cJSON_AddStringToObject(o, "backbone", rq->backbone)) ||
	    !cJSON_AddStringToObject(o, "target", rq->target ? rq->target : FG_FORGE_DEFAULT_TARGET) ||
	    !cJSON_AddStringToObject(o, "quant", rq->quant ? rq->quant : "keep") ||
	    (rq->out && !cJSON_AddStringToObject(o, "out", rq->out)) ||
	    (rq->allow_requantize && !cJSON_AddBoolToObject(o, "allow_requantize", 1))) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

void fg_forge_request_opts(const struct fg_forge_request *rq, struct fg_forge_opts *o)
{
	o->source = rq->source;
	o->backbone = rq->backbone;
	o->target = rq->target;
	o->quant = rq->quant;
	o->out = rq->out;
	o->allow_requantize = rq->allow_requantize;
}
