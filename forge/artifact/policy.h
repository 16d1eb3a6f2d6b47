/*
 * policy.h: quantization policies (keep, match, affine:BITS:GROUP, mxfp4) and
 * their application to a sidecar plan.
 */
#ifndef FG_POLICY_H
#define FG_POLICY_H

#include <cjson/cJSON.h>

#include "forge/artifact/plan.h"
#include "forge/core/error.h"
#include "forge/model/inspect.h"

/* A quantization policy: keep, match (the backbone's block), affine, mxfp4. */
enum fg_policy_kind { FG_POLICY_KEEP, FG_POLICY_MATCH, FG_POLICY_AFFINE, FG_POLICY_MXFP4 };

struct fg_policy {
	enum fg_policy_kind kind;
	struct fg_plan_quant spec;      /* AFFINE: bits and group; MXFP4: group 32 */
	char text[32];                  /* as given: "keep", "affine:4:64", ... */
};

/* Parse "keep", "match", "affine:BITS:GROUP" or "mxfp4" (NULL: keep); FG_EUSAGE otherwise. */
int fg_policy_parse(const char *text, struct fg_policy *out, struct fg_err *err);

/*
 * Apply a quantization policy to a plan: each head linear the policy selects
 * becomes a hidden input of MLX-quantized outputs (`.weight` U32, `.scales`,
 * `.biases`; mxfp4 has no biases).  With FG_POLICY_MATCH the backbone's
 * config.json `quantization` block and the backbone's own `.scales` tensors
 * decide, module by module: a head linear is quantized as its backbone
 * counterpart is, and not at all when the counterpart is not (or there is
 * none: fc, eh_proj and input_proj).  Norms, biases and routers are never
 * selected unless the backbone quantizes its own.  record (a cJSON object,
 * may be NULL) receives module -> {"bits","group_size","mode"} or null.
 */
int fg_policy_apply(struct fg_plan *plan, const struct fg_policy *policy, const struct fg_inspect *backbone,
		   cJSON *record, struct fg_err *err);

#endif
