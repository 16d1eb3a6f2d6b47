/*
 * plan.c: plans and materializes an MTP sidecar (plan.h).
 *
 * The plan is built from the inspect report, so the head's convention is the
 * one decided for its whole set (never per tensor) and the expert layout is
 * the one decided from shapes.  Materialization converts through F32 where
 * values change and copies bytes where they do not.
 */
#include "forge/artifact/plan.h"

#include "forge/artifact/internal.h"

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

/*
 * What a quantized base leaves behind between calls: its scales and biases
 * (small: a 64th of the input each for 4-bit groups of 64) for every row
 * quantized so far, filled while its weight part streams, and the reused
 * band buffers.  Weight rows themselves are never kept.
 */
struct fg_plan_qcache {
	int base;                 /* the plan entry the parts belong to, -1: none */
	uint8_t *part[3];         /* [FG_PART_SCALES], [FG_PART_BIASES]: every row's (part[0] unused) */
	uint64_t bytes[3];
	uint64_t rows_done;       /* rows [0, rows_done) of the parts are filled */
	uint8_t *input;           /* one band of the base's rows */
	size_t input_cap;
	uint8_t *weight;          /* one band of packed weight rows */
	size_t weight_cap;
};

static void qcache_clear(struct fg_plan_qcache *c)
{
	for (int i = 0; i < 3; i++) {
		free(c->part[i]);
		c->part[i] = NULL;
		c->bytes[i] = 0;
	}
	c->rows_done = 0;
	c->base = -1;
}

static void qcache_free(struct fg_plan_qcache *c)
{
	if (!c)
		return;
	qcache_clear(c);
	free(c->input);
	free(c->weight);
	free(c);
}

int fg_plan_entry_inputs(const struct fg_plan_entry *e, int (*fn)(void *ctx, const struct fg_tensor *t), void *ctx)
{
	int rc = 0;

	if (e->src)
		rc = fn(ctx, e->src);
	if (!rc && e->scale_inv)
		rc = fn(ctx, e->scale_inv);
	for (size_t k = 0; !rc && k < e->n_srcs; k++) {
		if (e->srcs[k])
			rc = fn(ctx, e->srcs[k]);
		if (!rc && e->scale_invs && e->scale_invs[k])
			rc = fn(ctx, e->scale_invs[k]);
	}
	for (size_t k = 0; !rc && k <= e->n_srcs; k++) {
		const struct fg_qmod *q = k < e->n_srcs ? (e->qsrcs ? e->qsrcs[k] : NULL) : e->qsrc;

		for (int r = 0; !rc && q && r < FG_QR_COUNT; r++)
			if (q->m.t[r])
				rc = fn(ctx, q->m.t[r]);
	}
	return rc;
}

size_t fg_plan_entry_max_inputs(const struct fg_plan_entry *e)
{
	return 2 + 2 * e->n_srcs + FG_QR_COUNT * (1 + e->n_srcs);
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
		free(plan->by_name);
		fg_nameidx_free(&plan->mods_by_out);
		qcache_free(plan->qcache);
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

static int cmp_by_name(const void *a, const void *b, void *ctx)
{
	const struct fg_tset *set = ctx;
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	int c = strcmp(set->tensors[x]->name, set->tensors[y]->name);

	return c ? c : (x > y) - (x < y);
}

/*
 * The first tensor of set (in its order) called name, or NULL; FG_ENOMEM
 * in *rc when the index could not be made.  The set's tensors are sorted
 * by name once per plan and set.
 */
static const struct fg_tensor *find_in_set(struct fg_plan *plan, const struct fg_tset *set, const char *name,
					   int *rc)
{
	size_t lo = 0, hi = set->n_tensors;

	*rc = 0;
	if (plan->by_name_set != set) {
		free(plan->by_name);
		plan->by_name_set = NULL;
		if (!(plan->by_name = malloc((set->n_tensors ? set->n_tensors : 1) * sizeof(*plan->by_name)))) {
			*rc = FG_ENOMEM;
			return NULL;
		}
		for (size_t i = 0; i < set->n_tensors; i++)
			plan->by_name[i] = i;
		qsort_r(plan->by_name, set->n_tensors, sizeof(*plan->by_name), cmp_by_name, (void *)set);
		plan->by_name_set = set;
	}
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(set->tensors[plan->by_name[mid]]->name, name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < set->n_tensors && strcmp(set->tensors[plan->by_name[lo]]->name, name) == 0
		       ? set->tensors[plan->by_name[lo]]
		       : NULL;
}

/* ---- quantized head modules (issue 12) ---- */

struct fg_plan_module *fg_plan_module_find(const struct fg_plan *plan, const char *out)
{
	uintptr_t i;

	return fg_nameidx_get(&plan->mods_by_out, out, &i) ? &plan->mods[i] : NULL;
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
	if (fg_nameidx_put(&plan->mods_by_out, m->out, plan->n_mods, NULL) == FG_ENOMEM) {
		free(m->source);
		free(m->out);
		return fg_err_set(err, FG_ENOMEM, "out of memory planning the head");
	}
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
static int fp8_scales(struct fg_plan *plan, const struct fg_tset *set, const struct fg_tensor *t,
		      const struct fg_tensor **out, struct fg_err *err)
{
	char *name = str_fmt("%s_scale_inv", t->name);
	const struct fg_tensor *s;
	uint64_t rows, cols;
	int rc = 0;

	if (!name)
		return fg_err_set(err, FG_ENOMEM, "out of memory planning the head");
	s = find_in_set(plan, set, name, &rc);
	if (rc) {
		free(name);
		return fg_err_set(err, FG_ENOMEM, "out of memory planning the head");
	}
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
			int rc = 0;
			const struct fg_tensor *t = src_name ? find_in_set(plan, set, src_name, &rc) : NULL;

			if (!src_name || rc) {
				free(src_name);
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
				rc = fp8_scales(plan, set, t, &o->scale_invs[e], err);
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
		rc = fp8_scales(plan, set, t, &o->scale_inv, err);
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
	/* The name index is the build's: nothing reads it after (and the set may go before the plan). */
	free(plan->by_name);
	plan->by_name = NULL;
	plan->by_name_set = NULL;
	if (rc)
		fg_plan_release(plan);
	return rc;
}

/* ---- materialization ----
 *
 * Every operation produces any byte range of its output, so a writer streams
 * an entry in chunks and never holds a whole tensor: copies read the source
 * range they need, FP8 and shifts convert the rows or elements the range
 * covers, transposes gather the output rows, and quantization works in row
 * bands of its base.  Reads are announced to the kernel first
 * (fg_art_will_read), so a cold source streams in ahead of the arithmetic.
 */

#define QUANT_BAND_BYTES ((uint64_t)16 << 20) /* input bytes quantized per call: two threads' worth */
#define FP8_BAND_ROWS 256

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* Copy [off, off + len) of a source tensor's bytes, announcing the read. */
static void copy_source(const struct fg_tensor *t, uint64_t off, uint64_t len, uint8_t *dst)
{
	fg_art_will_read(t, off, len);
	memcpy(dst, t->data + off, (size_t)len);
}

/* Rows of R output bytes each: rows [row0, row0 + n) into dst. */
typedef int (*rows_fn)(const struct fg_plan_entry *o, const void *ctx, uint64_t row0, uint64_t n, uint8_t *dst,
		       struct fg_err *err);

/*
 * Bytes [offset, offset + len) of an output made of R-byte rows: the whole
 * rows inside go straight to buf, a row cut by either end is made in a
 * scratch row and the covered part copied.
 */
static int by_rows(const struct fg_plan_entry *o, const void *ctx, uint64_t R, uint64_t offset, uint64_t len,
		   uint8_t *buf, rows_fn fn, struct fg_err *err)
{
	uint64_t end = offset + len, pos = offset;
	uint8_t *tmp = NULL;
	int rc = 0;

	if (!len)
		return 0;
	if (pos % R) {
		uint64_t row = pos / R, stop = min_u64((row + 1) * R, end);

		if (!(tmp = malloc((size_t)R)))
			return fg_err_set(err, FG_ENOMEM, "out of memory for a row of '%s'", o->name);
		rc = fn(o, ctx, row, 1, tmp, err);
		if (!rc)
			memcpy(buf, tmp + pos % R, (size_t)(stop - pos));
		pos = stop;
	}
	if (!rc && end / R > pos / R) {
		uint64_t row = pos / R, n = end / R - row;

		rc = fn(o, ctx, row, n, buf + (pos - offset), err);
		pos = (row + n) * R;
	}
	if (!rc && pos < end) {
		if (!tmp && !(tmp = malloc((size_t)R)))
			return fg_err_set(err, FG_ENOMEM, "out of memory for a row of '%s'", o->name);
		rc = fn(o, ctx, pos / R, 1, tmp, err);
		if (!rc)
			memcpy(buf + (pos - offset), tmp, (size_t)(end - pos));
	}
	free(tmp);
	return rc;
}

/* F32 elements of a shifted norm: element i = source[i] + shift. */
static int shift_rows(const struct fg_plan_entry *o, const void *ctx, uint64_t row0, uint64_t n, uint8_t *dst,
		      struct fg_err *err)
{
	const struct fg_tensor *t = o->src;
	size_t es = fg_dtype_size(t->dtype);
	float tmp[ROW_CHUNK];

	(void)ctx;
	(void)err;
	fg_art_will_read(t, row0 * es, n * es);
	for (uint64_t i = 0; i < n; i += ROW_CHUNK) {
		size_t k = n - i < ROW_CHUNK ? (size_t)(n - i) : ROW_CHUNK;

		fg_dtype_to_f32(t->dtype, t->data + (row0 + i) * es, tmp, k);
		for (size_t j = 0; j < k; j++)
			tmp[j] = tmp[j] + o->shift; /* F32 arithmetic: BF16 would lose offsets below 2^-8 */
		memcpy(dst + i * 4, tmp, k * 4);
	}
	return 0;
}

/* One FP8 weight and its block scales, for fp8_rows. */
struct fp8_src {
	const struct fg_tensor *t, *scale_inv;
};

/* BF16 rows [row0, row0 + n) of an E4M3 weight times its block scales (quant/fp8.c does the arithmetic). */
static int fp8_rows(const struct fg_plan_entry *o, const void *ctx, uint64_t row0, uint64_t n, uint8_t *dst,
		    struct fg_err *err)
{
	const struct fp8_src *f = ctx;
	const struct fg_tensor *t = f->t, *s = f->scale_inv;
	uint64_t rows = t->shape[0], cols = t->shape[1];
	float *widened = NULL;
	int rc = 0;

	(void)o;
	if (s->dtype != FG_DT_F32) {
		/* quant/fp8.c reads F32 grids: widen a BF16 grid (it is tiny). */
		widened = malloc((size_t)fg_tensor_nelem(s) * sizeof(float) + 1);
		if (!widened)
			return fg_err_set(err, FG_ENOMEM, "out of memory for '%s'", s->name);
		fg_dtype_to_f32(s->dtype, s->data, widened, (size_t)fg_tensor_nelem(s));
	}
	fg_art_will_read(t, row0 * cols, n * cols);
	for (uint64_t r = row0; !rc && r < row0 + n; r += FP8_BAND_ROWS) {
		uint64_t k = min_u64(row0 + n - r, FP8_BAND_ROWS);

		rc = fg_fp8_block_dequant_rows_bf16(t->data, (size_t)rows, (size_t)cols,
						    widened ? widened : (const float *)(const void *)s->data,
						    (size_t)s->shape[0], (size_t)s->shape[1], (size_t)r, (size_t)k,
						    (uint16_t *)(void *)(dst + 2 * (r - row0) * cols), err);
	}
	free(widened);
	if (rc)
		fg_err_prefix(err, rc, "dequantizing '%s': ", t->name);
	return rc;
}

/*
 * BF16 rows of a quantized module dequantized (dequant.h, F32 arithmetic):
 * rows [row0, row0 + n) of W [out, in]; a stacked MLX module's row g is
 * expert g / out's row g % out.  ctx is the module.
 */
static int dequant_rows(const struct fg_plan_entry *o, const void *ctx, uint64_t row0, uint64_t n, uint8_t *dst,
			struct fg_err *err)
{
	const struct fg_qmod *q = ctx;
	uint64_t experts = fg_qmod_stacked(q), out = q->dims.out, row_bytes = q->dims.in * 2;
	int rc = 0;

	(void)o;
	if (!experts)
		rc = fg_qformat_dequant_rows_bf16(&q->f, &q->m, (size_t)row0, (size_t)n, (uint16_t *)(void *)dst, err);
	for (uint64_t g = row0; !rc && experts && g < row0 + n;) {
		uint64_t e = g / out, r = g % out, k = min_u64(out - r, row0 + n - g);
		struct fg_qslice views;
		struct fg_qmodule slice;

		fg_qmod_slice(q, e, &views, &slice);
		rc = fg_qformat_dequant_rows_bf16(&q->f, &slice, (size_t)r, (size_t)k,
						  (uint16_t *)(void *)(dst + (g - row0) * row_bytes), err);
		g += k;
	}
	if (rc)
		fg_err_prefix(err, rc, "dequantizing '%s': ", q->name);
	return rc;
}

/* Bytes [offset, offset + len) of quantized module q dequantized to BF16. */
static int dequant_range(const struct fg_plan_entry *o, const struct fg_qmod *q, uint64_t offset, uint64_t len,
			 uint8_t *buf, struct fg_err *err)
{
	return by_rows(o, q, q->dims.in * 2, offset, len, buf, dequant_rows, err);
}

/* Bytes [offset, offset + len) of the BF16 form of an FP8 weight. */
static int fp8_range(const struct fg_plan_entry *o, const struct fg_tensor *t, const struct fg_tensor *scale_inv,
		     uint64_t offset, uint64_t len, uint8_t *buf, struct fg_err *err)
{
	const struct fp8_src f = { t, scale_inv };

	return by_rows(o, &f, 2 * t->shape[1], offset, len, buf, fp8_rows, err);
}

/*
 * Output rows of a per-expert transpose: out[e][i][j] = src[e][j][col0 + i]
 * for i < ni (o->shape[1]), j < the source's rows; one output row is one
 * (e, i).  Gathered in tiles so both sides stay in cache.
 */
#define TILE 64

static int transpose_rows(const struct fg_plan_entry *o, const void *ctx, uint64_t row0, uint64_t n, uint8_t *dst,
			  struct fg_err *err)
{
	const struct fg_tensor *t = o->src;
	uint64_t src_rows = t->shape[1], src_cols = t->shape[2], ni = o->shape[1];
	uint64_t col0 = o->op == FG_OP_SPLIT_T ? (uint64_t)o->half * ni : 0;
	size_t es = fg_dtype_size(o->dtype);

	(void)ctx;
	(void)err;
	for (uint64_t g = row0; g < row0 + n;) {
		uint64_t e = g / ni, i0 = g % ni, i1 = min_u64(ni, i0 + (row0 + n - g));
		const uint8_t *s = t->data + e * src_rows * src_cols * es;
		uint8_t *d = dst + (g - row0) * src_rows * es;

		fg_art_will_read(t, e * src_rows * src_cols * es, src_rows * src_cols * es);
		for (uint64_t ib = i0; ib < i1; ib += TILE) {
			uint64_t ie = min_u64(i1, ib + TILE);

			for (uint64_t jb = 0; jb < src_rows; jb += TILE) {
				uint64_t je = min_u64(src_rows, jb + TILE);

				for (uint64_t i = ib; i < ie; i++) {
					uint8_t *drow = d + (i - i0) * src_rows * es;

					if (es == 2) {
						for (uint64_t j = jb; j < je; j++)
							memcpy(drow + j * 2, s + (j * src_cols + col0 + i) * 2, 2);
					} else {
						for (uint64_t j = jb; j < je; j++)
							memcpy(drow + j * es, s + (j * src_cols + col0 + i) * es, es);
					}
				}
			}
		}
		g += i1 - i0;
	}
	return 0;
}

const struct fg_tensor *fg_plan_direct(const struct fg_plan_entry *o, uint64_t offset, size_t *len,
				       uint64_t *at_out)
{
	const struct fg_tensor *t = NULL;
	uint64_t es = fg_dtype_size(o->dtype), at = 0, piece, room;

	switch (o->op) {
	case FG_OP_VIEW:
		t = o->src;
		at = offset;
		room = fg_tensor_bytes(t) - min_u64(offset, fg_tensor_bytes(t));
		break;
	case FG_OP_STACK:
		piece = o->shape[1] * o->shape[2] * es;
		if (!piece || offset / piece >= o->n_srcs || o->scale_invs[offset / piece] ||
		    (o->qsrcs && o->qsrcs[offset / piece]))
			return NULL; /* FP8 or quantized experts are computed */
		t = o->srcs[offset / piece];
		at = offset % piece;
		room = piece - at;
		break;
	case FG_OP_SPLIT:
		piece = o->shape[1] * o->shape[2] * es;
		if (!piece || offset / piece >= o->shape[0])
			return NULL;
		t = o->src;
		at = ((offset / piece) * 2 + (uint64_t)o->half) * piece + offset % piece;
		room = piece - offset % piece;
		break;
	default:
		return NULL;
	}
	if (!t->data || !room)
		return NULL;
	if (*len > room)
		*len = (size_t)room;
	*at_out = at;
	return t;
}

/* A run fg_plan_direct gave is about to be read through its mapping: read ahead of it (and of the experts after). */
static void direct_ahead(const struct fg_plan_entry *o, const struct fg_tensor *t, uint64_t at, uint64_t len)
{
	fg_art_will_read(t, at, len);
	if (o->op == FG_OP_STACK && at == 0)
		for (size_t e = 0; e < o->n_srcs; e++)
			if (o->srcs[e] == t) {
				fg_art_will_read_run(o->srcs, o->n_srcs, e);
				break;
			}
}

static int materialize_quant(const struct fg_plan *plan, const struct fg_plan_entry *o, uint64_t offset,
			     uint64_t len, uint8_t *buf, struct fg_err *err);

int fg_plan_materialize_range(const struct fg_plan *plan, const struct fg_plan_entry *o, uint64_t offset,
			      size_t len, uint8_t *buf, struct fg_err *err)
{
	uint64_t es = fg_dtype_size(o->dtype), end = offset + len, piece;

	if (end < offset || end > fg_plan_entry_bytes(o))
		return fg_err_set(err, FG_EINTERNAL, "tensor '%s': bytes %llu..%llu are outside its %llu", o->name,
				  (unsigned long long)offset, (unsigned long long)end,
				  (unsigned long long)fg_plan_entry_bytes(o));
	switch (o->op) {
	case FG_OP_VIEW:
		copy_source(o->src, offset, len, buf);
		return 0;
	case FG_OP_SHIFT:
		return by_rows(o, NULL, 4, offset, len, buf, shift_rows, err);
	case FG_OP_FP8:
		return fp8_range(o, o->src, o->scale_inv, offset, len, buf, err);
	case FG_OP_STACK:
	case FG_OP_SPLIT:
		/* One piece per expert: a source expert, or half of a fused one. */
		piece = o->shape[1] * o->shape[2] * es;
		for (uint64_t pos = offset; pos < end;) {
			uint64_t e = pos / piece, at = pos % piece, n = min_u64(piece - at, end - pos);
			int rc = 0;

			if (o->op == FG_OP_STACK && at == 0)
				fg_art_will_read_run(o->srcs, o->n_srcs, (size_t)e);
			if (o->op == FG_OP_SPLIT)
				copy_source(o->src, (e * 2 + (uint64_t)o->half) * piece + at, n, buf + (pos - offset));
			else if (o->qsrcs && o->qsrcs[e]) /* a quantized expert (GPTQ, AWQ, ...): dequantized */
				rc = dequant_range(o, o->qsrcs[e], at, n, buf + (pos - offset), err);
			else if (!o->scale_invs[e])
				copy_source(o->srcs[e], at, n, buf + (pos - offset));
			else
				rc = fp8_range(o, o->srcs[e], o->scale_invs[e], at, n, buf + (pos - offset), err);
			if (rc)
				return rc;
			pos += n;
		}
		return 0;
	case FG_OP_SPLIT_T:
	case FG_OP_TRANSPOSE:
		return by_rows(o, NULL, o->src->shape[1] * es, offset, len, buf, transpose_rows, err);
	case FG_OP_QUANT:
		return materialize_quant(plan, o, offset, len, buf, err);
	case FG_OP_DEQUANT:
		return dequant_range(o, o->qsrc, offset, len, buf, err);
	}
	return fg_err_set(err, FG_EINTERNAL, "tensor '%s': operation %d cannot be materialized", o->name, o->op);
}

int fg_plan_materialize(const struct fg_plan *plan, const struct fg_plan_entry *o, uint8_t *buf,
			struct fg_err *err)
{
	return fg_plan_materialize_range(plan, o, 0, (size_t)fg_plan_entry_bytes(o), buf, err);
}

/* Grow *p to at least n bytes (*cap its size); 0 or FG_ENOMEM. */
static int reserve(uint8_t **p, size_t *cap, uint64_t n)
{
	uint8_t *q;

	if (n <= *cap)
		return 0;
	q = realloc(*p, (size_t)n);
	if (!q)
		return FG_ENOMEM;
	*p = q;
	*cap = (size_t)n;
	return 0;
}

/*
 * Quantize rows [r0, r1) of base b (rows of cols inputs) into c->weight
 * (packed words, w_row bytes a row) and the cached parts (s_row bytes a
 * row).  Rows are read where they are when they are a run of one source
 * tensor (a plain linear, each expert of a stack: no copy), else the band
 * is materialized into c->input first.
 */
static int quant_band(const struct fg_plan *plan, const struct fg_plan_entry *o, const struct fg_plan_entry *b,
		      uint64_t r0, uint64_t r1, uint64_t w_row, uint64_t s_row, struct fg_err *err)
{
	struct fg_plan_qcache *c = plan->qcache;
	uint64_t cols = b->shape[b->rank - 1], in_row = cols * fg_dtype_size(b->dtype);
	int rc = 0;

	if (reserve(&c->weight, &c->weight_cap, (r1 - r0) * w_row))
		return fg_err_set(err, FG_ENOMEM, "out of memory quantizing '%s'", b->name);
	for (uint64_t q = r0; !rc && q < r1;) {
		size_t run = (size_t)((r1 - q) * in_row);
		uint64_t at = 0, n;
		const struct fg_tensor *t = fg_plan_direct(b, q * in_row, &run, &at);
		const uint8_t *input;
		uint8_t *scales = c->part[FG_PART_SCALES] + q * s_row;
		uint8_t *biases = c->part[FG_PART_BIASES] ? c->part[FG_PART_BIASES] + q * s_row : NULL;
		uint32_t *packed = (uint32_t *)(void *)(c->weight + (q - r0) * w_row);

		if (t && t->data && run >= in_row) {
			n = run / in_row;
			input = t->data + at;
			direct_ahead(b, t, at, n * in_row);
		} else {
			n = r1 - q;
			if (reserve(&c->input, &c->input_cap, n * in_row))
				return fg_err_set(err, FG_ENOMEM, "out of memory quantizing '%s'", b->name);
			rc = fg_plan_materialize_range(plan, b, q * in_row, (size_t)(n * in_row), c->input, err);
			if (rc)
				return rc;
			input = c->input;
		}
		/* threads 0: FORGED_QUANT_THREADS (quant.h), for runs of 8 MiB and more */
		if (o->quant.mxfp4)
			rc = fg_quant_mxfp4_tensor_dt(b->dtype, input, (size_t)n, (size_t)cols, packed, scales, 0, err);
		else
			rc = fg_quant_affine_tensor_dt(b->dtype, input, (size_t)n, (size_t)cols, o->quant.bits,
						       o->quant.group, packed, scales, biases, 0, err);
		if (rc)
			return fg_err_prefix(err, rc, "quantizing '%s' (rows %llu..%llu): ", b->name,
					     (unsigned long long)q, (unsigned long long)(q + n));
		q += n;
	}
	if (r0 <= c->rows_done && r1 > c->rows_done)
		c->rows_done = r1;
	return 0;
}

static int materialize_quant(const struct fg_plan *plan, const struct fg_plan_entry *o, uint64_t offset,
			     uint64_t len, uint8_t *buf, struct fg_err *err)
{
	struct fg_plan_qcache *c = plan->qcache;
	const struct fg_plan_entry *b = &plan->t[o->base], *weight = o - (int)o->part;
	uint64_t cols = b->shape[b->rank - 1], rows, in_row, band, w_row, s_row;
	int rc = 0;

	if (!c)
		return fg_err_set(err, FG_EINTERNAL, "tensor '%s': no quantization cache", o->name);
	rows = cols ? b->shape[0] * (b->rank == 3 ? b->shape[1] : 1) : 0;
	if (!rows)
		return 0;
	/* policy.c appends a base's parts right after it, in part order: siblings are adjacent. */
	assert(weight >= plan->t && weight->op == FG_OP_QUANT && weight->base == o->base &&
	       weight->part == FG_PART_WEIGHT && weight[1].base == o->base);
	w_row = fg_plan_entry_bytes(weight) / rows;
	s_row = fg_plan_entry_bytes(weight + 1) / rows;
	in_row = cols * fg_dtype_size(b->dtype);
	band = QUANT_BAND_BYTES / in_row ? QUANT_BAND_BYTES / in_row : 1;
	if (c->base != o->base) {
		qcache_clear(c);
		for (int p = FG_PART_SCALES; p <= (o->quant.mxfp4 ? FG_PART_SCALES : FG_PART_BIASES); p++) {
			assert(weight[p].part == (enum fg_plan_part)p && weight[p].base == o->base);
			c->bytes[p] = fg_plan_entry_bytes(&weight[p]);
			c->part[p] = malloc(c->bytes[p] ? (size_t)c->bytes[p] : 1);
			if (!c->part[p]) {
				qcache_clear(c);
				return fg_err_set(err, FG_ENOMEM, "out of memory quantizing '%s'", b->name);
			}
		}
		c->base = o->base;
	}
	if (o->part == FG_PART_WEIGHT) {
		/* The bands of rows the range covers; their scales and biases are kept for the next parts. */
		uint64_t end = offset + len;

		for (uint64_t r0 = offset / w_row; !rc && r0 * w_row < end; r0 += band) {
			uint64_t r1 = min_u64(rows, r0 + band), from, to;

			if (r1 * w_row > end)
				r1 = min_u64(rows, (end + w_row - 1) / w_row);
			rc = quant_band(plan, o, b, r0, r1, w_row, s_row, err);
			from = r0 * w_row > offset ? r0 * w_row : offset;
			to = min_u64(r1 * w_row, end);
			if (!rc)
				memcpy(buf + (from - offset), c->weight + (from - r0 * w_row), (size_t)(to - from));
		}
	} else {
		/* Scales or biases: the rows not yet quantized are, their packed words dropped. */
		for (uint64_t r0 = c->rows_done; !rc && r0 < rows; r0 = c->rows_done) {
			rc = quant_band(plan, o, b, r0, min_u64(rows, r0 + band), w_row, s_row, err);
		}
		if (!rc)
			memcpy(buf, c->part[o->part] + offset, (size_t)len);
	}
	if (rc)
		qcache_clear(c);
	return rc;
}
