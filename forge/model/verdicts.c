/*
 * verdicts.c: the verdict table and report verdict lists (verdicts.h).
 */
#include "forge/model/verdicts.h"

#include "forge/core/grow.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct fg_verdict_code codes[] = {
	{ "trunk_double_shifted", FG_SEV_ERROR, "the trunk's norms are already shifted twice on disk" },
	{ "embedded_mtp_shift_hazard", FG_SEV_ERROR,
	  "embedded mtp.* keys make a runtime add +1 to an absolute trunk" },
	{ "trunk_missing_shift", FG_SEV_ERROR, "a targeted runtime loads a delta trunk without its +1" },
	{ "trunk_double_shift_at_load", FG_SEV_ERROR,
	  "a targeted runtime adds +1 to an absolute trunk (not because of head keys)" },
	{ "head_convention_mismatch", FG_SEV_ERROR,
	  "the head loads inverted or double-shifted in a targeted runtime" },
	{ "head_double_shifted", FG_SEV_ERROR, "the head's norms are already shifted twice on disk" },
	{ "mixed_convention", FG_SEV_ERROR, "one tensor set holds both conventions" },
	{ "no_convention_evidence", FG_SEV_ERROR, "a shift may be needed but no norm decides it" },
	{ "convention_structure_mismatch", FG_SEV_ERROR,
	  "the checkpoint's structure and its norm values disagree on the convention" },
	{ "nonfinite_norm", FG_SEV_ERROR, "a norm tensor holds NaN or infinity" },
	{ "degenerate_head", FG_SEV_ERROR, "the head's norms are all zero or its payload is empty" },
	{ "expert_layout_ambiguous", FG_SEV_ERROR, "expert tensors fit both fused layouts, or neither" },
	{ "mtp_declared_missing", FG_SEV_ERROR, "config.json declares an MTP head but no tensor holds it" },
	{ "malformed_checkpoint", FG_SEV_ERROR, "the checkpoint contradicts itself" },
	{ "stray_shard", FG_SEV_WARNING, "a model*.safetensors absent from the index: mlx-lm loads it anyway" },
	{ "index_mismatch", FG_SEV_WARNING, "the index and the shard headers disagree" },
	{ "bf16_shift_precision_loss", FG_SEV_WARNING, "+1 applied in BF16/F16 loses small offsets" },
	{ "quantized_mtp_head", FG_SEV_WARNING, "the MTP head is quantized" },
	{ "mixed_head_conventions_in_fleet", FG_SEV_WARNING, "the fleet serves heads of both conventions" },
	{ "raw_zero_centred_head", FG_SEV_INFO, "a delta head; fine for runtimes that heal it" },
};

#define N_CODES (sizeof(codes) / sizeof(codes[0]))

const struct fg_verdict_code *fg_verdict_code(const char *code)
{
	for (size_t i = 0; i < N_CODES; i++)
		if (strcmp(codes[i].code, code) == 0)
			return &codes[i];
	return NULL;
}

const struct fg_verdict_code *fg_verdict_codes(size_t *n)
{
	*n = N_CODES;
	return codes;
}

const char *fg_severity_name(enum fg_severity s)
{
	static const char *const names[] = { "info", "warning", "error" };

	return names[s];
}

struct fg_verdict *fg_verdicts_add(struct fg_verdicts *list, const char *code, const char *set,
				   const char *fmt, ...)
{
	const struct fg_verdict_code *row = fg_verdict_code(code);
	struct fg_verdict *v;
	va_list ap;

	if (!row)
		return NULL;
	if (FG_GROW(list->v, list->n + 1, list->cap))
		return NULL;
	v = &list->v[list->n];
	memset(v, 0, sizeof(*v));
	v->code = row;
	if (!(v->set = strdup(set ? set : "")))
		return NULL;
	list->n++;
	va_start(ap, fmt);
	vsnprintf(v->detail, sizeof(v->detail), fmt, ap);
	va_end(ap);
	return v;
}

void fg_verdict_runtime(struct fg_verdict *v, const char *runtime)
{
	for (size_t i = 0; i < v->n_runtimes; i++)
		if (strcmp(v->runtimes[i], runtime) == 0)
			return;
	if (v->n_runtimes < FG_VERDICT_MAX_LIST)
		v->runtimes[v->n_runtimes++] = runtime;
}

void fg_verdict_tensor(struct fg_verdict *v, const char *tensor)
{
	if (v->n_tensors < FG_VERDICT_MAX_LIST)
		v->tensors[v->n_tensors] = strdup(tensor);
	v->n_tensors++;
}

int fg_verdicts_has_error(const struct fg_verdicts *list)
{
	for (size_t i = 0; i < list->n; i++)
		if (list->v[i].code->severity == FG_SEV_ERROR)
			return 1;
	return 0;
}

const struct fg_verdict *fg_verdicts_find(const struct fg_verdicts *list, const char *code)
{
	for (size_t i = 0; i < list->n; i++)
		if (strcmp(list->v[i].code->code, code) == 0)
			return &list->v[i];
	return NULL;
}

void fg_verdicts_release(struct fg_verdicts *list)
{
	for (size_t i = 0; list && i < list->n; i++) {
		for (size_t k = 0; k < list->v[i].n_tensors && k < FG_VERDICT_MAX_LIST; k++)
			free(list->v[i].tensors[k]);
		free(list->v[i].set);
	}
	if (list) {
		free(list->v);
		memset(list, 0, sizeof(*list));
	}
}
