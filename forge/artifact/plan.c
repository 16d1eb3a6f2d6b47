/*
 * plan.c: plans and materializes an MTP sidecar (plan.h).
 *
 * The plan is built from the inspect report, so the head's convention is the
 * one decided for its whole set (never per tensor) and the expert layout is
 * the one decided from shapes.  Materialization converts through F32 where
 * values change and copies bytes where they do not.
 */
#include "forge/artifact/plan.h"

#include "forge/core/grow.h"
#include "forge/core/str.h"
#include "forge/format/quant/quant.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROW_CHUNK 4096

int fg_target_is_mlx(const char *runtime)
{
	const struct fg_runtime *rt = fg_runtime_find(runtime);

	return rt && rt->mlx;
}

uint64_t fg_plan_entry_bytes(const struct fg_plan_entry *o)
{
	uint64_t n = 0;

	fg_shape_nelem(o->shape, o->rank, &n);
	return n * fg_dtype_size(o->dtype);
}

struct fg_plan_entry *fg_plan_add(struct fg_plan *plan, const char *name, struct fg_err *err)
{
	struct fg_plan_entry *o;

	if (FG_GROW(plan->t, plan->n + 1, plan->cap)) {
		fg_err_set(err, FG_ENOMEM, "out of memory planning the head");
		return NULL;
	}
	o = &plan->t[plan->n];
	memset(o, 0, sizeof(*o));
	if (!(o->name = strdup(name))) {
		fg_err_set(err, FG_ENOMEM, "out of memory planning the head");
		return NULL;
	}
	plan->n++;
	return o;
}

/* The outputs of the last quantized tensor, shared by its two or three parts. */
struct fg_plan_qcache {
	int base;
	uint8_t *part[3];
	uint64_t bytes[3];
};

static void qcache_clear(struct fg_plan_qcache *c)
{
	for (int i = 0; i < 3; i++) {
		free(c->part[i]);
		c->part[i] = NULL;
		c->bytes[i] = 0;
	}
	c->base = -1;
}

void fg_plan_release(struct fg_plan *plan)
{
	for (size_t i = 0; plan && i < plan->n; i++) {
		free(plan->t[i].name);
		free(plan->t[i].srcs);
		free(plan->t[i].scale_invs);
		free(plan->t[i].qsrcs);
	}
	for (size_t i = 0; plan && i < plan->n_mods; i++) {
		free(plan->mods[i].source);
		free(plan->mods[i].out);
	}
	if (plan) {
		free(plan->mods);
		if (plan->qcache)
			qcache_clear(plan->qcache);
		free(plan->qcache);
		free(plan->t);
		memset(plan, 0, sizeof(*plan));
	}
}

/* The output name of a source name under the family's naming rule: src itself or a tail of it. */
static const char *out_name(const struct fg_inspect *r, const char *src)
{
	return r->family->strips_to_mtp ? fg_name_strip(src) : src;
}

/* printf into a new string (caller frees); NULL on ENOMEM. */
static char *str_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static char *str_fmt(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	return n < 0 ? NULL : s;
}

static const struct fg_tensor *find_in_set(const struct fg_tset *set, const char *name)
{
	for (size_t i = 0; i < set->n_tensors; i++)
		if (strcmp(set->tensors[i]->name, name) == 0)
			return set->tensors[i];
	return NULL;
}

/* ---- quantized head modules (issue 12) ---- */

struct fg_plan_module *fg_plan_module_find(const struct fg_plan *plan, const char *out)
{
	for (size_t i = 0; i < plan->n_mods; i++)
		if (strcmp(plan->mods[i].out, out) == 0)
			return &plan->mods[i];
	return NULL;
}

/* Record a quantized module of the head (once per output module); 0 or FG_ENOMEM. */
static int note_module(struct fg_plan *plan, const char *source, const char *out, const struct fg_qmod *q,
		       size_t experts, enum fg_plan_qhow how, struct fg_err *err)
{
	struct fg_plan_module *m;

	if (fg_plan_module_find(plan, out))
		return 0;
	if (FG_GROW(plan->mods, plan->n_mods + 1, plan->cap_mods))
		return fg_err_set(err, FG_ENOMEM, "out of memory planning the head");
	m = &plan->mods[plan->n_mods];
	memset(m, 0, sizeof(*m));
	m->source = strdup(source);
	m->out = strdup(out);
	if (!m->source || !m->out) {
		free(m->source);
		free(m->out);
		return fg_err_set(err, FG_ENOMEM, "out of memory planning the head");
	}
	m->q = q;
	m->experts = experts;
	m->how = how;
	plan->n_mods++;
	return 0;
}

/* Record a DeepSeek FP8 module (quant/fp8.c's path) dequantized to BF16 as weight out ("....weight"). */
static int note_fp8(struct fg_plan *plan, const struct fg_qmod *q, const char *out, size_t experts, struct fg_err *err)
{
	char *mod = strndup(out, strlen(out) - strlen(".weight"));
	int rc = mod ? note_module(plan, q->name, mod, q, experts, FG_PQ_DEQUANT, err)
		     : fg_err_set(err, FG_ENOMEM, "out of memory planning the head");

	free(mod);
	return rc;
}

/* A head module forged cannot read: refused by its format's name (never copied), or malformed. */
static int refuse_module(const struct fg_qmod *q, struct fg_err *err)
{
	char name[FG_ERR_MSG_MAX];

	if (q->unsupported)
		return fg_err_verdict(err, FG_V_UNSUPPORTED_QUANTIZATION_FORMAT, "head module '%s' is %s; nothing was copied",
				      q->name, fg_qmod_name(q, name, sizeof(name)));
	return fg_err_set(err, FG_EINPUT, "head module '%s' is quantized in no format forged reads: %s", q->name, q->why);
}

/*
 * The existing FP8 path (E4M3 with DeepSeek's 128x128 weight_scale_inv, quant/fp8.c) handles a module
 * itself; every other quantized module goes through dequant.h.
 */
static int generic_module(const struct fg_qmod *q)
{
	return fg_qmod_quantized(q) &&
	       !(q->rc == 0 && q->f.kind == FG_QF_FP8 && q->m.t[FG_QR_WEIGHT_SCALE_INV] && q->f.block[0] == FG_FP8_BLOCK &&
		 q->f.block[1] == FG_FP8_BLOCK);
}

/* The tensor of a module that carries its codes: weight, qweight or weight_packed. */
static const struct fg_tensor *carrier(const struct fg_qmod *q)
{
	return q->m.t[FG_QR_WEIGHT] ? q->m.t[FG_QR_WEIGHT]
	       : q->m.t[FG_QR_QWEIGHT] ? q->m.t[FG_QR_QWEIGHT]
				       : q->m.t[FG_QR_WEIGHT_PACKED];
}

/* The FG_WF_* bit of an MLX format (0 for any other), to ask whether a target reads it as stored. */
static unsigned mlx_format_bit(enum fg_qformat_kind k)
{
	switch (k) {
	case FG_QF_MLX_AFFINE:
		return FG_WF_MLX_AFFINE;
	case FG_QF_MLX_MXFP4:
		return FG_WF_MLX_MXFP4;
	case FG_QF_MLX_MXFP8:
		return FG_WF_MLX_MXFP8;
	case FG_QF_MLX_NVFP4:
		return FG_WF_MLX_NVFP4;
	default:
		return 0;
	}
}

/*
 * Kept as stored: an MLX format every target reads (the spec's rows, else
 * its target's row), with a quantization block to resolve it, nothing
 * forcing.
 */
static int keep_module(const struct fg_qmod *q, const struct fg_plan_spec *spec, const struct fg_plan_opts *opts)
{
	const struct fg_runtime *one = spec->rows ? NULL : fg_runtime_find(spec->target);
	const struct fg_runtime *const *rows = spec->rows ? spec->rows : &one;
	size_t n = spec->rows ? spec->n_rows : 1;
	unsigned bit = mlx_format_bit(q->f.kind);
	int all = n > 0;

	for (size_t i = 0; i < n; i++)
		all &= rows[i] && (rows[i]->formats & bit) != 0;
	return bit && all && opts && !opts->dequant_all &&
	       cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(opts->config, "quantization"));
}

/* The *_scale_inv companion of an FP8 tensor; FG_EINPUT when missing or malformed. */
static int fp8_scales(const struct fg_tset *set, const struct fg_tensor *t,
		      const struct fg_tensor **out, struct fg_err *err)
{
	char *name = str_fmt("%s_scale_inv", t->name);
	const struct fg_tensor *s;
	uint64_t rows, cols;
	int rc = 0;

	if (!name)
		return fg_err_set(err, FG_ENOMEM, "out of memory planning the head");
	s = find_in_set(set, name);
	rows = (t->shape[0] + FG_FP8_BLOCK - 1) / FG_FP8_BLOCK;
	cols = (t->shape[1] + FG_FP8_BLOCK - 1) / FG_FP8_BLOCK;
	if (!s)
		rc = fg_err_set(err, FG_EINPUT, "FP8 tensor '%s' has no '%s' block scales", t->name, name);
	else if (t->rank != 2 || s->rank != 2 || (s->dtype != FG_DT_F32 && s->dtype != FG_DT_BF16))
		rc = fg_err_set(err, FG_EINPUT, "FP8 tensor '%s': expected a 2-D weight and 2-D F32 scales",
				t->name);
	else if (s->shape[0] != rows || s->shape[1] != cols)
		rc = fg_err_set(err, FG_EINPUT,
				"'%s' is [%llu,%llu], the %dx%d blocks of '%s' need [%llu,%llu]",
				name, (unsigned long long)s->shape[0], (unsigned long long)s->shape[1],
				FG_FP8_BLOCK, FG_FP8_BLOCK, t->name, (unsigned long long)rows, (unsigned long long)cols);
	else
		*out = s;
	free(name);
	return rc;
}

/* The output dtype of a weight: FP8 becomes BF16. */
static enum fg_dtype widened(enum fg_dtype dt)
{
	return dt == FG_DT_F8_E4M3 || dt == FG_DT_F8_E5M2 ? FG_DT_BF16 : dt;
}

/* Does name belong to one of the expert blocks being restacked? */
static const struct fg_expert_block *block_of(const char *name, const struct fg_expert_block *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strncmp(name, b[i].prefix, strlen(b[i].prefix)) == 0)
			return &b[i];
	return NULL;
}

/*
 * "...mlp.experts." -> a new plan entry "...mlp.switch_mlp.PROJ.weight"
 * under the naming rule; NULL (err set) on ENOMEM.
 */
static struct fg_plan_entry *add_switch(const struct fg_inspect *r, const struct fg_expert_block *b,
					const char *proj, struct fg_plan *plan, struct fg_err *err)
{
	size_t plen = strlen(b->prefix) - strlen("experts.");
	char *src = str_fmt("%.*sswitch_mlp.%s.weight", (int)plen, b->prefix, proj);
	struct fg_plan_entry *o;

	if (!src) {
		fg_err_set(err, FG_ENOMEM, "out of memory planning experts");
		return NULL;
	}
	o = fg_plan_add(plan, out_name(r, src), err);
	free(src);
	return o;
}

static int plan_numbered(const struct fg_inspect *r, const struct fg_set_report *head,
			 const struct fg_expert_block *b, struct fg_plan *plan, struct fg_err *err)
{
	static const char *const projs[] = { "gate_proj", "up_proj", "down_proj" };
	const struct fg_tset *set = &head->set;
	uint64_t experts = b->max_index + 1;

	for (size_t p = 0; p < 3; p++) {
		struct fg_plan_entry *o = add_switch(r, b, projs[p], plan, err);
		size_t quantized = 0;

		if (!o)
			return FG_ENOMEM;
		o->op = FG_OP_STACK;
		o->srcs = calloc(experts, sizeof(*o->srcs));
		o->scale_invs = calloc(experts, sizeof(*o->scale_invs));
		o->qsrcs = calloc(experts, sizeof(*o->qsrcs));
		if (!o->srcs || !o->scale_invs || !o->qsrcs)
			return fg_err_set(err, FG_ENOMEM, "out of memory planning experts");
		o->n_srcs = experts;
		for (uint64_t e = 0; e < experts; e++) {
			char *mod = str_fmt("%s%llu.%s", b->prefix, (unsigned long long)e, projs[p]);
			char *src_name = mod ? str_fmt("%s.weight", mod) : NULL;
			const struct fg_qmod *qm = mod ? fg_qmods_module(&head->qmods, mod) : NULL;
			const struct fg_tensor *t = src_name ? find_in_set(set, src_name) : NULL;
			int rc = 0;

			if (!src_name) {
				free(mod);
				return fg_err_set(err, FG_ENOMEM, "out of memory planning experts");
			}
			if (qm && generic_module(qm)) {
				/* A quantized expert (GPTQ, AWQ, compressed-tensors, NVFP4, MLX ...): dequantized to BF16. */
				if (qm->rc)
					rc = refuse_module(qm, err);
				else if (!qm->checked || fg_qmod_stacked(qm))
					rc = fg_err_set(err, FG_EINPUT, "expert '%s': a quantized expert must be one 2-D module", mod);
				else if (e && (!o->qsrcs[0] || qm->dims.out != o->qsrcs[0]->dims.out ||
					       qm->dims.in != o->qsrcs[0]->dims.in))
					rc = fg_err_set(err, FG_EINPUT, "expert '%s' differs in shape or format from expert 0", mod);
				t = carrier(qm);
				o->qsrcs[e] = qm;
				quantized++;
			} else if (!t) {
				rc = fg_err_verdict(err, FG_V_EXPERT_LAYOUT_AMBIGUOUS,
						    "'%s' is missing (experts are never dropped)", src_name);
			} else if (quantized || (e && o->qsrcs[0])) {
				rc = fg_err_set(err, FG_EINPUT, "expert '%s' is dense but expert 0 is quantized", src_name);
			} else if (t->rank != 2 || (e && (t->shape[0] != o->srcs[0]->shape[0] ||
							   t->shape[1] != o->srcs[0]->shape[1] ||
							   t->dtype != o->srcs[0]->dtype))) {
				rc = fg_err_set(err, FG_EINPUT, "expert tensor '%s' differs in shape or dtype from expert 0",
						src_name);
			} else if (t->dtype == FG_DT_F8_E5M2) {
				rc = fg_err_set(err, FG_EINPUT, "'%s': F8_E5M2 experts are not supported", src_name);
			} else if (t->dtype == FG_DT_F8_E4M3) {
				rc = fp8_scales(set, t, &o->scale_invs[e], err);
			}
			free(src_name);
			free(mod);
			if (rc)
				return rc;
			o->srcs[e] = t;
		}
		o->rank = 3;
		o->shape[0] = experts;
		if (quantized) {
			char *out_mod = strndup(o->name, strlen(o->name) - strlen(".weight"));

			o->dtype = FG_DT_BF16;
			o->shape[1] = o->qsrcs[0]->dims.out;
			o->shape[2] = o->qsrcs[0]->dims.in;
			o->changed = 1;
			if (!out_mod || note_module(plan, o->qsrcs[0]->name, out_mod, o->qsrcs[0], (size_t)experts,
						    FG_PQ_DEQUANT, err)) {
				free(out_mod);
				return fg_err_set(err, FG_ENOMEM, "out of memory planning experts");
			}
			free(out_mod);
		} else {
			free(o->qsrcs);
			o->qsrcs = NULL;
			o->dtype = widened(o->srcs[0]->dtype);
			o->shape[1] = o->srcs[0]->shape[0];
			o->shape[2] = o->srcs[0]->shape[1];
			o->changed = o->scale_invs[0] != NULL; /* FP8 experts are dequantized too */
			if (o->changed) {
				const struct fg_qmod *q0 = fg_qmods_find(&head->qmods, o->srcs[0]->name, NULL);
				int rc = q0 ? note_fp8(plan, q0, o->name, (size_t)experts, err) : 0;

				if (rc)
					return rc;
			}
		}
		o->relayout = 1;
	}
	return 0;
}

static int plan_fused(const struct fg_inspect *r, const struct fg_expert_block *b,
		      struct fg_plan *plan, struct fg_err *err)
{
	int bmm = b->layout == FG_EXPERTS_FUSED_BMM;
	uint64_t E = b->gate_up->shape[0];
	uint64_t two_i = bmm ? b->gate_up->shape[2] : b->gate_up->shape[1];
	uint64_t h = bmm ? b->gate_up->shape[1] : b->gate_up->shape[2];
	static const char *const projs[] = { "gate_proj", "up_proj", "down_proj" };

	if (!fg_dtype_is_float(b->gate_up->dtype) || b->gate_up->dtype == FG_DT_F8_E4M3 ||
	    b->gate_up->dtype != b->down->dtype)
		return fg_err_set(err, FG_EINPUT, "fused experts '%s': dtype %s is not supported",
				  b->gate_up->name, fg_dtype_name(b->gate_up->dtype));
	for (int p = 0; p < 3; p++) {
		struct fg_plan_entry *o = add_switch(r, b, projs[p], plan, err);

		if (!o)
			return FG_ENOMEM;
		o->dtype = b->gate_up->dtype;
		o->rank = 3;
		o->shape[0] = E;
		o->relayout = 1;
		if (p < 2) {
			o->op = bmm ? FG_OP_SPLIT_T : FG_OP_SPLIT;
			o->src = b->gate_up;
			o->half = p;
			o->shape[1] = two_i / 2;
			o->shape[2] = h;
		} else {
			o->op = bmm ? FG_OP_TRANSPOSE : FG_OP_VIEW;
			o->src = b->down;
			o->shape[1] = h;
			o->shape[2] = two_i / 2;
		}
	}
	return 0;
}

/* The convention the target loads norms in, for the family's style. */
static enum fg_convention target_convention(const struct fg_inspect *r, enum fg_convention wanted)
{
	if (r->family->norm_style != FG_STYLE_ZERO_CENTRED)
		return FG_CONV_PLAIN;
	return wanted == FG_CONV_ABSOLUTE ? FG_CONV_ABSOLUTE : FG_CONV_DELTA;
}

void fg_plan_spec_for(const char *target, struct fg_plan_spec *out)
{
	out->conv = fg_target_is_mlx(target) ? FG_CONV_ABSOLUTE : FG_CONV_DELTA;
	out->restack = fg_target_is_mlx(target);
	out->target = target;
	out->rows = NULL;
	out->n_rows = 0;
}

/*
 * The refusals are inspect's: a head set whose convention is broken or
 * cannot be decided, or whose experts cannot be laid out, already carries
 * the error verdict, so the plan quotes it rather than deciding again.
 */
static const enum fg_verdict_code refusing_codes[] = {
	FG_V_HEAD_DOUBLE_SHIFTED, FG_V_MIXED_CONVENTION, FG_V_NO_CONVENTION_EVIDENCE, FG_V_EXPERT_LAYOUT_AMBIGUOUS,
};

static int refuse_by_verdict(const struct fg_inspect *r, const struct fg_set_report *head, struct fg_err *err)
{
	for (size_t i = 0; i < r->verdicts.n; i++) {
		const struct fg_verdict *v = &r->verdicts.v[i];

		if (strcmp(v->set, head->set.name) != 0)
			continue;
		for (size_t k = 0; k < sizeof(refusing_codes) / sizeof(refusing_codes[0]); k++)
			if (v->row->code == refusing_codes[k])
				return fg_err_verdict(err, v->row->code, "head set '%s': %s", head->set.name,
						      v->detail);
	}
	/* A head without a single norm raises no verdict in inspect, yet has no convention to carry over. */
	if (r->family->norm_style == FG_STYLE_ZERO_CENTRED && head->decision.conv == FG_CONV_EMPTY)
		return fg_err_verdict(err, FG_V_NO_CONVENTION_EVIDENCE,
				      "head set '%s' has no q/k or low-set norm to decide its convention",
				      head->set.name);
	return 0;
}

static int plan_tensor(const struct fg_inspect *r, const struct fg_tset *set, const struct fg_tensor *t,
		       struct fg_plan *plan, struct fg_err *err)
{
	struct fg_plan_entry *o;
	int shift = plan->source_conv != plan->target_conv &&
		    (plan->target_conv == FG_CONV_ABSOLUTE || plan->target_conv == FG_CONV_DELTA) &&
		    fg_name_norm_class(t->name) != FG_NAME_NOT_NORM && fg_name_zero_centred(t->name);

	o = fg_plan_add(plan, out_name(r, t->name), err);
	if (!o)
		return FG_ENOMEM;
	o->src = t;
	o->rank = t->rank;
	memcpy(o->shape, t->shape, sizeof(o->shape));
	o->dtype = t->dtype;
	o->op = FG_OP_VIEW;
	if (t->dtype == FG_DT_F8_E5M2)
		return fg_err_set(err, FG_EINPUT, "'%s': F8_E5M2 weights are not supported (E4M3 with block scales is)",
				  t->name);
	if (t->dtype == FG_DT_F8_E4M3) {
		const struct fg_qmod *q = fg_qmods_find(&fg_inspect_head(r)->qmods, t->name, NULL);
		int rc;

		o->op = FG_OP_FP8;
		o->dtype = FG_DT_BF16;
		o->changed = 1;
		rc = fp8_scales(set, t, &o->scale_inv, err);
		if (!rc && q)
			rc = note_fp8(plan, q, o->name, 0, err);
		return rc;
	}
	if (shift) {
		if (t->rank != 1 || !fg_dtype_is_float(t->dtype))
			return fg_err_set(err, FG_EINPUT, "norm '%s' is not a 1-D float vector", t->name);
		o->op = FG_OP_SHIFT;
		o->dtype = FG_DT_F32;
		o->shift = plan->target_conv == FG_CONV_ABSOLUTE ? 1.0f : -1.0f;
		o->changed = 1;
		plan->n_shifted++;
	}
	return 0;
}

/*
 * A tensor of a quantized head module (qmods.h).  Kept modules go on as
 * plain tensors (1: not handled here).  A dequantized module becomes one
 * BF16 `.weight` entry where its code-carrying tensor appears, its linear
 * bias is copied, and its other tensors (zero points, scales, g_idx, shapes,
 * activation scales) are consumed.  0 when handled, or an error.
 */
static int plan_qtensor(const struct fg_inspect *r, const struct fg_set_report *head, const struct fg_tensor *t,
			const struct fg_plan_spec *spec, const struct fg_plan_opts *opts, struct fg_plan *plan,
			struct fg_err *err)
{
	enum fg_qrole role;
	const struct fg_qmod *q = fg_qmods_find(&head->qmods, t->name, &role);
	struct fg_plan_entry *o;
	char *src = NULL;
	const char *out;
	uint64_t stacked;
	int rc;

	if (!q || !generic_module(q))
		return 1;
	if (q->rc)
		return refuse_module(q, err);
	if (keep_module(q, spec, opts)) {
		/* Its tensors go on as they are (renamed); the record is the weight's module under the naming rule. */
		char *mod = NULL;

		if (role != FG_QR_WEIGHT)
			return 1;
		src = str_fmt("%s.weight", q->name);
		out = src ? out_name(r, src) : NULL;
		mod = out ? strndup(out, strlen(out) - strlen(".weight")) : NULL;
		rc = mod ? note_module(plan, q->name, mod, q, (size_t)fg_qmod_stacked(q), FG_PQ_KEPT, err)
			 : fg_err_set(err, FG_ENOMEM, "out of memory planning the head");
		free(mod);
		free(src);
		return rc ? rc : 1;
	}
	if (role == FG_QR_BIAS)
		return 1; /* a linear bias: copied as it is */
	if (t != carrier(q))
		return 0; /* consumed by the module's entry */
	if (!q->checked)
		return fg_err_set(err, FG_EINTERNAL, "head module '%s' was not checked", q->name);
	src = str_fmt("%s.weight", q->name);
	if (!src)
		return fg_err_set(err, FG_ENOMEM, "out of memory planning the head");
	o = fg_plan_add(plan, out_name(r, src), err);
	free(src);
	if (!o)
		return FG_ENOMEM;
	o->op = FG_OP_DEQUANT;
	o->src = t;
	o->qsrc = q;
	o->dtype = FG_DT_BF16;
	o->changed = 1;
	stacked = fg_qmod_stacked(q);
	o->rank = stacked ? 3 : 2;
	o->shape[0] = stacked ? stacked : q->dims.out;
	o->shape[stacked ? 1 : 0] = q->dims.out;
	o->shape[stacked ? 2 : 1] = q->dims.in;
	{
		char *mod = strndup(o->name, strlen(o->name) - strlen(".weight"));

		rc = mod ? note_module(plan, q->name, mod, q, 0, FG_PQ_DEQUANT, err)
			 : fg_err_set(err, FG_ENOMEM, "out of memory planning the head");
		free(mod);
	}
	return rc;
}

int fg_plan_build(const struct fg_inspect *r, const char *target, struct fg_plan *plan,
		    struct fg_err *err)
{
	return fg_plan_build_opts(r, target, NULL, plan, err);
}

int fg_plan_build_opts(const struct fg_inspect *r, const char *target, const struct fg_plan_opts *opts,
		       struct fg_plan *plan, struct fg_err *err)
{
	struct fg_plan_spec spec;

	fg_plan_spec_for(target, &spec);
	return fg_plan_build_spec(r, &spec, opts, plan, err);
}

int fg_plan_build_spec(const struct fg_inspect *r, const struct fg_plan_spec *spec, const struct fg_plan_opts *opts,
		       struct fg_plan *plan, struct fg_err *err)
{
	int planned[FG_EXPERTS_MAX_BLOCKS] = { 0 };
	const struct fg_set_report *head = fg_inspect_head(r);
	const struct fg_expert_block *blocks;
	const struct fg_tset *set;
	size_t n_blocks;
	int restack, rc = 0;

	memset(plan, 0, sizeof(*plan));
	plan->target = spec->target;
	plan->qcache = calloc(1, sizeof(*plan->qcache));
	if (!plan->qcache)
		return fg_err_set(err, FG_ENOMEM, "out of memory planning the head");
	plan->qcache->base = -1;
	if (!head || head->set.n_tensors == 0)
		return fg_err_set(err, FG_EINPUT, "%s: no MTP head (no mtp.*, appended layer or mtp_layers tensors)",
				  r->ckpt->source);
	set = &head->set;
	plan->source_conv = head->decision.conv;
	plan->target_conv = target_convention(r, spec->conv);
	if ((rc = refuse_by_verdict(r, head, err)))
		return rc;
	/* The layouts inspect decided; an ambiguous one was refused above. */
	blocks = head->experts;
	n_blocks = head->n_experts;
	for (size_t i = 0; i < n_blocks; i++) {
		if (blocks[i].layout == FG_EXPERTS_AMBIGUOUS || blocks[i].layout == FG_EXPERTS_INVALID)
			return fg_err_set(err, FG_EINTERNAL, "expert block '%s*' is undecided but raised no verdict",
					  blocks[i].prefix);
		snprintf(plan->expert_layout, sizeof(plan->expert_layout), "%s",
			 fg_expert_layout_name(blocks[i].layout));
	}
	restack = spec->restack && n_blocks;
	for (size_t i = 0; i < set->n_tensors; i++) {
		const struct fg_tensor *t = set->tensors[i];
		const struct fg_expert_block *b = restack ? block_of(t->name, blocks, n_blocks) : NULL;

		if (fg_str_ends_with(t->name, "_scale_inv"))
			continue; /* consumed with its FP8 weight */
		if (b) {
			/* A block is planned once, where its first tensor appears. */
			size_t k = (size_t)(b - blocks);

			if (!planned[k])
				rc = b->layout == FG_EXPERTS_NUMBERED ? plan_numbered(r, head, b, plan, err)
								      : plan_fused(r, b, plan, err);
			planned[k] = 1;
		} else if ((rc = plan_qtensor(r, head, t, spec, opts, plan, err)) == 1) {
			rc = plan_tensor(r, set, t, plan, err);
		}
		if (rc)
			break;
	}
	if (rc)
		fg_plan_release(plan);
	return rc;
}

/* ---- materialization ---- */

/* BF16 from E4M3 x FG_FP8_BLOCK-square block scales, in bands of rows (quant/fp8.c does the arithmetic). */
static int fp8_dequant(const struct fg_tensor *t, const struct fg_tensor *scale_inv, uint8_t *out,
		       struct fg_err *err)
{
	uint64_t rows = t->shape[0], cols = t->shape[1], band = 256;
	float *scales = NULL;
	int rc = 0;

	if (scale_inv->dtype != FG_DT_F32) {
		/* quant/fp8.c reads F32 grids: widen a BF16 grid once (it is tiny). */
		scales = malloc((size_t)scale_inv->nelem * sizeof(float) + 1);
		if (!scales)
			return fg_err_set(err, FG_ENOMEM, "out of memory for '%s'", scale_inv->name);
		fg_dtype_to_f32(scale_inv->dtype, scale_inv->data, scales, (size_t)scale_inv->nelem);
	}
	for (uint64_t r0 = 0; !rc && r0 < rows; r0 += band) {
		uint64_t n = rows - r0 < band ? rows - r0 : band;

		rc = fg_fp8_block_dequant_rows_bf16(t->data, (size_t)rows, (size_t)cols,
						    scales ? scales : (const float *)(const void *)scale_inv->data,
						    (size_t)scale_inv->shape[0], (size_t)scale_inv->shape[1],
						    (size_t)r0, (size_t)n, (uint16_t *)(void *)(out + 2 * r0 * cols), err);
	}
	free(scales);
	if (rc)
		fg_err_prefix(err, rc, "dequantizing '%s': ", t->name);
	return rc;
}

/* A quantized module dequantized to BF16 (dequant.h, F32 arithmetic); a stacked MLX module expert by expert. */
static int dequant_module(const struct fg_qmod *q, uint8_t *out, struct fg_err *err)
{
	uint64_t experts = fg_qmod_stacked(q);
	size_t piece = q->dims.out * q->dims.in * 2;
	int rc = 0;

	if (!experts)
		rc = fg_qformat_dequant_rows_bf16(&q->f, &q->m, 0, q->dims.out, (uint16_t *)(void *)out, err);
	for (uint64_t e = 0; !rc && e < experts; e++) {
		struct fg_tensor views[FG_QR_COUNT];
		struct fg_qmodule slice;

		fg_qmod_slice(q, e, views, &slice);
		rc = fg_qformat_dequant_rows_bf16(&q->f, &slice, 0, q->dims.out,
						  (uint16_t *)(void *)(out + (size_t)e * piece), err);
	}
	if (rc)
		fg_err_prefix(err, rc, "dequantizing '%s': ", q->name);
	return rc;
}

static void shift_norm(const struct fg_tensor *t, float shift, uint8_t *out)
{
	float buf[ROW_CHUNK];

	for (uint64_t i = 0; i < t->nelem; i += ROW_CHUNK) {
		size_t n = t->nelem - i < ROW_CHUNK ? (size_t)(t->nelem - i) : ROW_CHUNK;

		fg_dtype_to_f32(t->dtype, t->data + i * fg_dtype_size(t->dtype), buf, n);
		for (size_t k = 0; k < n; k++)
			buf[k] = buf[k] + shift; /* F32 arithmetic: BF16 would lose offsets below 2^-8 */
		memcpy(out + i * 4, buf, n * 4);
	}
}

/* out[e][i][j] = src[e][j][col0 + i] for i < ni, j < nj: a per-expert transpose. */
static void transpose_experts(const uint8_t *src, uint64_t experts, uint64_t src_rows, uint64_t src_cols,
			      uint64_t col0, uint64_t ni, size_t es, uint8_t *out)
{
	for (uint64_t e = 0; e < experts; e++) {
		const uint8_t *s = src + e * src_rows * src_cols * es;
		uint8_t *d = out + e * ni * src_rows * es;

		for (uint64_t i = 0; i < ni; i++)
			for (uint64_t j = 0; j < src_rows; j++)
				memcpy(d + (i * src_rows + j) * es, s + (j * src_cols + col0 + i) * es, es);
	}
}

static int materialize_quant(const struct fg_plan *plan, const struct fg_plan_entry *o, uint8_t *buf,
			     struct fg_err *err);

int fg_plan_materialize(const struct fg_plan *plan, const struct fg_plan_entry *o, uint8_t *buf,
			struct fg_err *err)
{
	const struct fg_tensor *t = o->src;
	size_t es = fg_dtype_size(o->dtype);

	switch (o->op) {
	case FG_OP_VIEW:
		memcpy(buf, t->data, (size_t)fg_tensor_bytes(t));
		return 0;
	case FG_OP_SHIFT:
		shift_norm(t, o->shift, buf);
		return 0;
	case FG_OP_FP8:
		return fp8_dequant(t, o->scale_inv, buf, err);
	case FG_OP_STACK: {
		uint64_t piece = o->shape[1] * o->shape[2] * es;

		for (size_t e = 0; e < o->n_srcs; e++) {
			if (o->qsrcs && o->qsrcs[e]) {
				if (dequant_module(o->qsrcs[e], buf + e * piece, err))
					return err->code;
			} else if (!o->scale_invs[e]) {
				memcpy(buf + e * piece, o->srcs[e]->data, (size_t)piece);
			} else if (fp8_dequant(o->srcs[e], o->scale_invs[e], buf + e * piece, err)) {
				return err->code;
			}
		}
		return 0;
	}
	case FG_OP_DEQUANT:
		return dequant_module(o->qsrc, buf, err);
	case FG_OP_SPLIT: {
		uint64_t rows = o->shape[1], cols = o->shape[2];

		for (uint64_t e = 0; e < o->shape[0]; e++)
			memcpy(buf + e * rows * cols * es,
			       t->data + (e * 2 * rows + (uint64_t)o->half * rows) * cols * es, (size_t)(rows * cols * es));
		return 0;
	}
	case FG_OP_SPLIT_T:
		transpose_experts(t->data, t->shape[0], t->shape[1], t->shape[2],
				  (uint64_t)o->half * o->shape[1], o->shape[1], es, buf);
		return 0;
	case FG_OP_TRANSPOSE:
		transpose_experts(t->data, t->shape[0], t->shape[1], t->shape[2], 0, t->shape[2], es, buf);
		return 0;
	case FG_OP_QUANT:
		return materialize_quant(plan, o, buf, err);
	}
	return fg_err_set(err, FG_EINTERNAL, "tensor '%s': operation %d cannot be materialized", o->name, o->op);
}

static int materialize_quant(const struct fg_plan *plan, const struct fg_plan_entry *o, uint8_t *buf,
			     struct fg_err *err)
{
	struct fg_plan_qcache *c = plan->qcache;
	const struct fg_plan_entry *b = &plan->t[o->base];
	uint64_t cols = b->shape[b->rank - 1], rows, in_bytes = fg_plan_entry_bytes(b);
	uint8_t *input = NULL;
	int rc = 0;

	if (!c)
		return fg_err_set(err, FG_EINTERNAL, "tensor '%s': no quantization cache", o->name);
	if (c->base != o->base) {
		qcache_clear(c);
		rows = cols ? b->shape[0] * (b->rank == 3 ? b->shape[1] : 1) : 0;
		for (int p = 0; p < 3; p++) {
			/* policy.c appends a base's parts right after it, in part order: siblings are adjacent. */
			const struct fg_plan_entry *sib = o + (p - (int)o->part);

			if (p == 2 && o->quant.mxfp4)
				break;
			assert(sib >= plan->t && sib < plan->t + plan->n && sib->op == FG_OP_QUANT &&
			       sib->base == o->base && (int)sib->part == p);
			c->bytes[p] = fg_plan_entry_bytes(sib);
			c->part[p] = malloc(c->bytes[p] ? (size_t)c->bytes[p] : 1);
			if (!c->part[p])
				rc = fg_err_set(err, FG_ENOMEM, "out of memory quantizing '%s'", b->name);
		}
		input = rc ? NULL : malloc(in_bytes ? (size_t)in_bytes : 1);
		if (!rc && !input)
			rc = fg_err_set(err, FG_ENOMEM, "out of memory quantizing '%s'", b->name);
		if (!rc)
			rc = fg_plan_materialize(plan, b, input, err);
		if (!rc && o->quant.mxfp4) /* threads: FORGED_QUANT_THREADS, quant.h */
			rc = fg_quant_mxfp4_tensor_dt(b->dtype, input, (size_t)rows, (size_t)cols,
						      (uint32_t *)(void *)c->part[0], c->part[1], 0, err);
		else if (!rc)
			rc = fg_quant_affine_tensor_dt(b->dtype, input, (size_t)rows, (size_t)cols, o->quant.bits,
						       o->quant.group, (uint32_t *)(void *)c->part[0], c->part[1],
						       c->part[2], 0, err);
		free(input);
		if (rc) {
			qcache_clear(c);
			return fg_err_prefix(err, rc, "quantizing '%s': ", b->name);
		}
		c->base = o->base;
	}
	memcpy(buf, c->part[o->part], (size_t)c->bytes[o->part]);
	return 0;
}
