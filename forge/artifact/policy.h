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
	int allow_requantize;           /* quantize a head module the source already quantized (dequantized first) */
};

/* Parse "keep", "match", "affine:BITS:GROUP" or "mxfp4" (NULL: keep); FG_EUSAGE otherwise. */
int fg_policy_parse(const char *text, struct fg_policy *out, struct fg_err *err);

/*
 * Whether a plan for policy must dequantize every quantized head module
 * (fg_plan_opts.dequant_all): only a quantizing policy allowed to
 * re-quantize does.
 */
int fg_policy_dequantizes_all(const struct fg_policy *policy);

/*
 * Apply a quantization policy to a plan: each head linear the policy selects
 * becomes a hidden input of MLX-quantized outputs (`.weight` U32, `.scales`,
 * `.biases`; mxfp4 has no biases).  With FG_POLICY_MATCH the backbone's
 * config.json `quantization` block and the backbone's own `.scales` tensors
 * decide, module by module: a head linear is quantized as its backbone
 * counterpart is, and not at all when the counterpart is not (or there is
 * none: fc, eh_proj and input_proj).  Norms, biases and routers are never
 * selected unless the backbone quantizes its own.  A head module the source
 * already quantized (plan->mods) is quantized again only with
 * allow_requantize (it is marked requantized); without, a policy that would
 * quantize it is refused (FG_EUSAGE naming the module and --allow-requantize).
 * record (a cJSON object, may be NULL) receives every head linear, under
 * its output module: {"bits","group_size","mode"} when quantized (plus
 * "source", the source format, when it was quantized already, and
 * "requantized": true), {"bits": null, "group_size": null, "mode": null,
 * "dequantized_from": FORMAT} for a quantized source module written BF16,
 * or null.  The keep policy leaves the plan as it is and still records.
 */
int fg_policy_apply(struct fg_plan *plan, const struct fg_policy *policy, const struct fg_inspect *backbone,
		   cJSON *record, struct fg_err *err);

/*
 * The artifact config's quantization record and overrides (write.c calls it
 * on the copy of the backbone's config.json it writes): `mtp_quantization`
 * {policy, allow_requantize, modules: record, requantized: [modules]}; and
 * when the config has an MLX `quantization` block (and mlx-lm's copy,
 * `quantization_config` without quant_method), the head's per-module
 * overrides renamed with the tensors (the source's keys removed) and every
 * head linear named under its output module: its {group_size, bits, mode}
 * when the sidecar stores it quantized, else false, so a loader resolving
 * bits per module never reads a head module with the trunk's defaults.
 * 0 or FG_ENOMEM.
 */
int fg_policy_write_config(cJSON *cfg, const struct fg_plan *plan, const struct fg_policy *policy,
			   const cJSON *record, struct fg_err *err);

/* The `mtp_quantization` object alone (config.json and forged.json carry the same); NULL on ENOMEM. */
cJSON *fg_policy_record_json(const struct fg_plan *plan, const struct fg_policy *policy, const cJSON *record);

#endif
