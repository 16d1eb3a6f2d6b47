/*
 * request.h: the parameters of a forge job, in the one JSON shape both ends
 * of the durable queue use.
 *
 * POST /v1/jobs reads the client's body with fg_forge_request_from_json()
 * (which validates, so the API answers 422 from what it says), replaces the
 * paths by their confined forms and enqueues fg_forge_request_to_json(); a
 * worker reads the stored text back with fg_forge_request_from_json() and
 * runs it through fg_forge_request_opts().  The shape:
 *
 *   {"kind": "forge", "source": S, "backbone": B?, "target": RUNTIMES?,
 *    "quant": POLICY?, "out": DIR?, "allow_requantize": true?}
 *
 * where RUNTIMES is one runtime id or a comma-separated list of them.
 * Optional fields that are not strings are ignored, as the API always did
 * (allow_requantize counts only when it is the boolean true).
 */
#ifndef FG_REQUEST_H
#define FG_REQUEST_H

#include <cjson/cJSON.h>

#include "forge/artifact/forge.h"
#include "forge/core/error.h"

struct fg_forge_request {
	const char *source;     /* required: a path or a URL */
	const char *backbone;   /* NULL: the source */
	const char *target;     /* a runtime id or a list; FG_FORGE_DEFAULT_TARGET when none is given */
	const char *quant;      /* a policy fg_policy_parse accepts; "keep" when none is given */
	const char *out;        /* NULL: the worker's default folder */
	int allow_requantize;   /* quant may quantize a head the source already quantized */
};

/* Why a body is not a forge request, for the API's problem types. */
enum fg_forge_request_fault {
	FG_FREQ_OK,
	FG_FREQ_INVALID_FIELD,      /* kind is not "forge", source is not a string, a bad quant policy */
	FG_FREQ_UNKNOWN_RUNTIME,    /* an entry of target is not a row of the runtime table */
	FG_FREQ_BACKBONE_REQUIRED,  /* a URL source without a local backbone */
};

/*
 * Read and check a request object.  On success out's strings borrow from doc
 * (or are static defaults), so doc must outlive out.  Otherwise FG_EINPUT
 * with the reason in err, *fault (may be NULL) saying which kind, and out
 * untouched.
 */
int fg_forge_request_from_json(struct fg_forge_request *out, const cJSON *doc,
			       enum fg_forge_request_fault *fault, struct fg_err *err);

/* The stored form of rq (defaults written out); caller frees with cJSON_Delete.  NULL on ENOMEM. */
cJSON *fg_forge_request_to_json(const struct fg_forge_request *rq);

/* Point o's source, backbone, target, quant and out at rq's (borrowed), copy allow_requantize; others untouched. */
void fg_forge_request_opts(const struct fg_forge_request *rq, struct fg_forge_opts *o);

#endif
