/*
 * runtimes.c: the runtime table and the load simulation of runtimes.h.
 *
 * Rows transcribe domain.md section 4.  The simulation works on conventions
 * and on the trunk probe (the first decoder layer's q_norm mean): a trunk is
 * healthy when its effective probe lands in [1.25, 2.4] after load.  Shifts
 * apply to zero-centred families only; plain families load as stored.
 */
#include "forge/model/runtimes.h"

#include <fnmatch.h>
#include <string.h>

static const struct fg_runtime runtimes[] = {
	{ .id = "mlx-lm-0.31", .files = FG_FILES_GLOB, .shift_on_mtp_key = 1, .shift_on_raw_conv1d = 1,
	  .head_source = FG_HSRC_UNUSED, .head_shift = FG_HSHIFT_NONE, .mlx = 1, .default_for = FG_LAYOUT_MLX,
	  .contract = "shifts the trunk when any key contains mtp. or a conv1d is raw; drops mtp.*" },
	{ .id = "mlx-lm-0.32", .files = FG_FILES_GLOB, .shift_on_raw_conv1d = 1,
	  .head_source = FG_HSRC_UNUSED, .head_shift = FG_HSHIFT_NONE, .mlx = 1,
	  .default_for = FG_LAYOUT_MLX | FG_LAYOUT_HF,
	  .contract = "shifts the trunk only for a raw conv1d; drops mtp.*" },
	{ .id = "mlx-lm-pr990", .files = FG_FILES_GLOB, .shift_on_raw_conv1d = 1,
	  .head_source = FG_HSRC_SHARDS, .head_shift = FG_HSHIFT_WITH_TRUNK, .mlx = 1,
	  .contract = "shifts trunk and head (pre-fc norms, mtp.norm) for a raw conv1d; keeps mtp.*" },
	{ .id = "mtplx-2.11", .files = FG_FILES_GLOB, .shift_on_mtp_key = 1, .shift_on_raw_conv1d = 1,
	  .head_source = FG_HSRC_SIDECAR, .head_shift = FG_HSHIFT_HEAL_DENSE_ONLY,
	  .refuse_probe_above = FG_QK_DOUBLE_ABOVE, .mlx = 1,
	  .contract = "trunk through mlx-lm 0.31, refuses above q-norm 2.4; heals dense sidecar heads, MoE byte for byte" },
	{ .id = "mtplx-2.12", .files = FG_FILES_GLOB, .shift_on_mtp_key = 1, .shift_on_raw_conv1d = 1,
	  .head_source = FG_HSRC_SIDECAR, .head_shift = FG_HSHIFT_HEAL,
	  .refuse_probe_above = FG_QK_DOUBLE_ABOVE, .mlx = 1, .default_for = FG_LAYOUT_MLX,
	  .contract = "trunk through mlx-lm 0.31, refuses above q-norm 2.4; heals a delta sidecar head" },
	{ .id = "ollama", .files = FG_FILES_OLLAMA, .shift_on_mtp_key = 1, .shift_on_raw_conv1d = 1,
	  .head_source = FG_HSRC_SHARDS, .head_shift = FG_HSHIFT_WITH_TRUNK, .default_for = FG_LAYOUT_HF,
	  .contract = "one detection (mtp. key or raw conv1d) shifts trunk and head together" },
	{ .id = "hf", .files = FG_FILES_INDEX, .head_source = FG_HSRC_SHARDS, .head_shift = FG_HSHIFT_NONE,
	  .adds_one_at_run_time = 1, .default_for = FG_LAYOUT_HF,
	  .contract = "computes 1 + w at run time: expects delta; vLLM/SGLang load the head" },
};

#define N_RUNTIMES (sizeof(runtimes) / sizeof(runtimes[0]))

const struct fg_runtime *fg_runtime_all(size_t *n)
{
	*n = N_RUNTIMES;
	return runtimes;
}

const struct fg_runtime *fg_runtime_find(const char *id)
{
	for (size_t i = 0; id && i < N_RUNTIMES; i++)
		if (strcmp(runtimes[i].id, id) == 0)
			return &runtimes[i];
	return NULL;
}

unsigned fg_runtime_layout_bit(const char *layout)
{
	if (layout && strcmp(layout, "mlx") == 0)
		return FG_LAYOUT_MLX;
	if (layout && strcmp(layout, "hf") == 0)
		return FG_LAYOUT_HF;
	return 0;
}

static const char *const trunk_names[] = {
	[FG_TRUNK_OK] = "ok",
	[FG_TRUNK_DOUBLE_SHIFTED] = "double_shifted",
	[FG_TRUNK_MISSING_SHIFT] = "missing_shift",
};

static const char *const head_names[] = {
	[FG_HEAD_OK] = "ok",
	[FG_HEAD_INVERTED] = "inverted",
	[FG_HEAD_DOUBLE_SHIFTED] = "double_shifted",
	[FG_HEAD_DROPPED] = "dropped",
	[FG_HEAD_ABSENT] = "absent",
};

static const char *const outcome_names[] = {
	[FG_OUTCOME_OK] = "ok",
	[FG_OUTCOME_DEGRADED] = "degraded",
	[FG_OUTCOME_BROKEN] = "broken",
	[FG_OUTCOME_REFUSED] = "refused",
};

static const char *const shift_reason_names[] = {
	[FG_SHIFT_NONE] = NULL,
	[FG_SHIFT_MTP_KEYS] = "mtp_keys",
	[FG_SHIFT_RAW_CONV1D] = "raw_conv1d",
};

#define NAME_OF(table, v) \
	((unsigned)(v) < sizeof(table) / sizeof((table)[0]) ? (table)[v] : NULL)

const char *fg_runtime_trunk_name(enum fg_runtime_trunk t)
{
	const char *name = NAME_OF(trunk_names, t);

	return name ? name : "unknown";
}

const char *fg_runtime_head_name(enum fg_runtime_head h)
{
	const char *name = NAME_OF(head_names, h);

	return name ? name : "unknown";
}

const char *fg_runtime_outcome_name(enum fg_runtime_outcome o)
{
	const char *name = NAME_OF(outcome_names, o);

	return name ? name : "unknown";
}

const char *fg_runtime_shift_reason_name(enum fg_shift_reason r)
{
	return NAME_OF(shift_reason_names, r);
}

/* Ollama's converter takes the first of these patterns that matches a file. */
static const char *const ollama_patterns[] = {
	"model-*-of-*.safetensors", "model.safetensors", "adapters.safetensors",
	"adapter_model.safetensors", "*.safetensors",
};

static int reads_file(const struct fg_runtime *rt, const struct fg_ckpt *c, size_t i,
		      const char *ollama_pattern)
{
	const struct fg_ckpt_file *f = &c->files[i];

	if (c->single_file)
		return 1;
	switch (rt->files) {
	case FG_FILES_GLOB:
		return f->globbed;
	case FG_FILES_INDEX:
		return c->index ? f->in_index : strcmp(f->name, "model.safetensors") == 0;
	case FG_FILES_OLLAMA:
		return ollama_pattern && !strchr(f->name, '/') && fnmatch(ollama_pattern, f->name, 0) == 0;
	}
	return 0;
}

static const char *pick_ollama_pattern(const struct fg_ckpt *c)
{
	for (size_t p = 0; p < sizeof(ollama_patterns) / sizeof(ollama_patterns[0]); p++)
		for (size_t i = 0; i < c->n_files; i++)
			if (!strchr(c->files[i].name, '/') &&
			    fnmatch(ollama_patterns[p], c->files[i].name, 0) == 0)
				return ollama_patterns[p];
	return NULL;
}

/* Trunk health from the effective probe mean, else from the convention. */
static enum fg_runtime_trunk classify_trunk(struct fg_runtime_result *r, const struct fg_runtime_input *in)
{
	enum fg_convention after;

	if (in->style != FG_STYLE_ZERO_CENTRED)
		return FG_TRUNK_OK;
	if (r->has_probe) {
		if (r->trunk_probe_after > FG_QK_DOUBLE_ABOVE)
			return FG_TRUNK_DOUBLE_SHIFTED;
		if (r->trunk_probe_after < FG_QK_ABSOLUTE_MIN)
			return FG_TRUNK_MISSING_SHIFT;
		return FG_TRUNK_OK;
	}
	after = fg_conv_after_shift(in->trunk->conv, r->trunk_shift || r->rt->adds_one_at_run_time);
	if (after == FG_CONV_DOUBLE_SHIFTED)
		return FG_TRUNK_DOUBLE_SHIFTED;
	if (after == FG_CONV_DELTA)
		return FG_TRUNK_MISSING_SHIFT;
	return FG_TRUNK_OK;
}

/* Head health from its effective convention, in MLX terms (stored + shift). */
static enum fg_runtime_head classify_head(enum fg_convention after)
{
	switch (after) {
	case FG_CONV_DELTA:
	case FG_CONV_MIXED:
		return FG_HEAD_INVERTED;
	case FG_CONV_DOUBLE_SHIFTED:
		return FG_HEAD_DOUBLE_SHIFTED;
	default:
		return FG_HEAD_OK;
	}
}

static void simulate_head(const struct fg_runtime *rt, const struct fg_runtime_input *in,
			  size_t head_in_files, struct fg_runtime_result *r)
{
	const struct fg_decision *head = NULL;
	int zero_centred = in->style == FG_STYLE_ZERO_CENTRED;

	switch (rt->head_source) {
	case FG_HSRC_UNUSED:
		r->head_keys_dropped = head_in_files;
		r->head = (in->embedded_head || in->sidecar_head) ? FG_HEAD_DROPPED : FG_HEAD_ABSENT;
		return;
	case FG_HSRC_SHARDS:
		head = head_in_files ? in->embedded_head : NULL;
		r->head_shift = zero_centred && rt->head_shift == FG_HSHIFT_WITH_TRUNK && r->trunk_shift;
		break;
	case FG_HSRC_SIDECAR:
		head = in->sidecar_head;
		r->head_keys_dropped = head_in_files;
		if (head && zero_centred && !fg_conv_rule_says_absolute(head))
			r->head_shift = rt->head_shift == FG_HSHIFT_HEAL ||
					(rt->head_shift == FG_HSHIFT_HEAL_DENSE_ONLY && !in->moe);
		break;
	}
	if (!head) {
		r->head = FG_HEAD_ABSENT;
		return;
	}
	r->head_after = fg_conv_after_shift(head->conv, r->head_shift || rt->adds_one_at_run_time);
	if (!zero_centred)
		r->head_after = head->conv;
	else if (rt->adds_one_at_run_time && head->conv == FG_CONV_MIXED)
		r->head_after = FG_CONV_DOUBLE_SHIFTED; /* its absolute part gets 1 + w */
	r->head = classify_head(r->head_after);
}

void fg_runtime_simulate(const struct fg_runtime *rt, const struct fg_runtime_input *in,
			 struct fg_runtime_result *r)
{
	const struct fg_ckpt *c = in->ckpt;
	const char *pattern = rt->files == FG_FILES_OLLAMA ? pick_ollama_pattern(c) : NULL;
	size_t mtp_keys = 0, head_in_files = 0;
	int raw_conv1d = 0;

	memset(r, 0, sizeof(*r));
	r->rt = rt;
	for (size_t i = 0; i < c->n_files; i++) {
		if (!reads_file(rt, c, i, pattern))
			continue;
		if (r->n_files < FG_RUNTIME_MAX_FILES)
			r->files[r->n_files] = c->files[i].name;
		r->n_files++;
		mtp_keys += in->facts[i].mtp_keys;
		head_in_files += in->facts[i].head_tensors;
		raw_conv1d |= in->facts[i].raw_conv1d;
	}
	if (in->style == FG_STYLE_ZERO_CENTRED) {
		if (rt->shift_on_raw_conv1d && raw_conv1d) {
			r->trunk_shift = 1;
			r->shift_reason = FG_SHIFT_RAW_CONV1D;
		} else if (rt->shift_on_mtp_key && mtp_keys) {
			r->trunk_shift = 1;
			r->shift_reason = FG_SHIFT_MTP_KEYS;
		}
	}
	if (in->trunk->probe) {
		double m = in->trunk->probe->st.mean;
		int plus = in->style == FG_STYLE_ZERO_CENTRED && (r->trunk_shift || rt->adds_one_at_run_time);

		r->has_probe = 1;
		r->trunk_probe_after = plus ? m + 1.0 : m;
	}
	r->trunk = classify_trunk(r, in);
	simulate_head(rt, in, head_in_files, r);
	if (r->trunk != FG_TRUNK_OK)
		r->outcome = rt->refuse_probe_above > 0 && r->has_probe &&
			     r->trunk_probe_after > rt->refuse_probe_above ? FG_OUTCOME_REFUSED : FG_OUTCOME_BROKEN;
	else if (r->head == FG_HEAD_INVERTED || r->head == FG_HEAD_DOUBLE_SHIFTED)
		r->outcome = FG_OUTCOME_DEGRADED;
	else if (r->head == FG_HEAD_ABSENT && rt->head_source != FG_HSRC_UNUSED &&
		 (in->embedded_head || in->sidecar_head))
		r->outcome = FG_OUTCOME_DEGRADED; /* a head exists but this runtime cannot find it */
	else
		r->outcome = FG_OUTCOME_OK;
}
