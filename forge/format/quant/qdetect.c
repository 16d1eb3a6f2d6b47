/*
 * qdetect.c: which format a module's tensors are in (fg_qformat_detect), from
 * the tensors' names, dtypes and shapes and the config's parameters for the
 * module; and the rendering of those parameters for refusals.
 *
 * The procedure is notes/quant-formats.md section 9: the tensors decide the
 * family (GPTQModel's own detector uses "qweight + g_idx is GPTQ"), the
 * config supplies what tensors cannot say and must agree with them.  Only
 * headers are looked at (no tensor data), so this runs on header-only views.
 */
#include "forge/format/quant/dequant.h"
#include "forge/format/quant/dq_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void fg_qparams_init(struct fg_qparams *p)
{
	if (!p)
		return;
	memset(p, 0, sizeof(*p));
	p->method = FG_QM_NONE;
	p->sym = -1;
	p->desc_act = -1;
	p->ct_version[0] = p->ct_version[1] = -1;
}

/* ---- names ----------------------------------------------------------------------- */

struct sbuf {
	char *p;
	size_t len, used;
};

static void sb_add(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_add(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->used >= b->len)
		return;
	va_start(ap, fmt);
	n = vsnprintf(b->p + b->used, b->len - b->used, fmt, ap);
	va_end(ap);
	if (n > 0)
		b->used += (size_t)n;
}

static void sb_int(struct sbuf *b, const char *key, int v, int unset)
{
	if (v != unset)
		sb_add(b, " %s=%d", key, v);
}

static void sb_tri(struct sbuf *b, const char *key, int v)
{
	if (v >= 0)
		sb_add(b, " %s=%s", key, v ? "true" : "false");
}

static void sb_str(struct sbuf *b, const char *key, const char *v)
{
	if (v && *v)
		sb_add(b, " %s=%s", key, v);
}

const char *fg_qparams_name(const struct fg_qparams *p, char *buf, size_t len)
{
	struct sbuf b = { buf, len, 0 };

	if (!buf || !len)
		return buf;
	buf[0] = 0;
	if (!p)
		return buf;
	switch (p->method) {
	case FG_QM_NONE:
		sb_add(&b, "none");
		break;
	case FG_QM_GPTQ:
		sb_add(&b, "gptq");
		sb_int(&b, "bits", p->bits, 0);
		sb_int(&b, "group", p->group_size, 0);
		sb_tri(&b, "desc_act", p->desc_act);
		sb_tri(&b, "sym", p->sym);
		sb_add(&b, " checkpoint_format=%s", p->fmt[0] ? p->fmt : "gptq");
		if (p->marlin)
			sb_add(&b, " is_marlin_format=true");
		sb_str(&b, "pack_dtype", p->pack_dtype);
		break;
	case FG_QM_AWQ:
		sb_add(&b, "awq");
		sb_int(&b, "bits", p->bits, 0);
		sb_int(&b, "group", p->group_size, 0);
		sb_add(&b, " version=%s", p->fmt[0] ? p->fmt : "gemm");
		if (p->sym >= 0)
			sb_add(&b, " zero_point=%s", p->sym ? "false" : "true");
		break;
	case FG_QM_CT:
		sb_add(&b, "compressed-tensors");
		sb_str(&b, "format", p->fmt);
		sb_str(&b, "type", p->type);
		sb_int(&b, "bits", p->bits, 0);
		sb_str(&b, "strategy", p->strategy);
		sb_int(&b, "group", p->group_size, 0);
		if (p->block[0])
			sb_add(&b, " block=[%d,%d]", p->block[0], p->block[1]);
		sb_tri(&b, "symmetric", p->sym);
		sb_str(&b, "actorder", p->actorder);
		break;
	case FG_QM_MODELOPT:
		sb_add(&b, "modelopt");
		sb_str(&b, "quant_algo", p->fmt);
		sb_int(&b, "group", p->group_size, 0);
		break;
	case FG_QM_FP8:
		sb_add(&b, "fp8");
		sb_str(&b, "fmt", p->fmt);
		if (p->block[0])
			sb_add(&b, " weight_block_size=[%d,%d]", p->block[0], p->block[1]);
		break;
	case FG_QM_MLX:
		sb_add(&b, "mlx mode=%s", p->fmt[0] ? p->fmt : "affine");
		sb_int(&b, "bits", p->bits, 0);
		sb_int(&b, "group", p->group_size, 0);
		break;
	case FG_QM_UNSUPPORTED:
		sb_add(&b, "%s", p->method_name[0] ? p->method_name : "unknown");
		break;
	}
	return buf;
}

/* FG_EINPUT "unsupported_quantization_format: <params>: <reason>". */
static int refuse(struct fg_err *err, bool *uns, const struct fg_qparams *p, const char *reason, ...)
	__attribute__((format(printf, 4, 5)));

static int refuse(struct fg_err *err, bool *uns, const struct fg_qparams *p, const char *reason, ...)
{
	char name[192], why[256];
	va_list ap;

	va_start(ap, reason);
	vsnprintf(why, sizeof(why), reason, ap);
	va_end(ap);
	*uns = true;
	return fg_err_set(err, FG_EINPUT, FG_QUNSUPPORTED "%s: %s", fg_qparams_name(p, name, sizeof(name)), why);
}

/* ---- helpers ----------------------------------------------------------------------- */

static const char *sfx(enum fg_qrole r)
{
	return fg_qrole_suffix(r);
}

static bool is_float(const struct fg_tensor *t)
{
	return t && (t->dtype == FG_DT_F32 || t->dtype == FG_DT_F16 || t->dtype == FG_DT_BF16);
}

/* The roles besides weight / bias / input_scale that are present, as "a, b". */
static const char *aux_roles(const struct fg_qmodule *m, char *buf, size_t len)
{
	struct sbuf b = { buf, len, 0 };
	int r;

	buf[0] = 0;
	for (r = 0; r < FG_QR_COUNT; r++) {
		if (!m->t[r] || r == FG_QR_WEIGHT || r == FG_QR_BIAS || r == FG_QR_INPUT_SCALE)
			continue;
		sb_add(&b, "%s%s", b.used ? ", " : "", sfx((enum fg_qrole)r));
	}
	return buf;
}

/* Tensors of one family, config of another. */
static int contradiction(struct fg_err *err, const struct fg_qparams *p, const char *family)
{
	char name[192];

	if (p->method == FG_QM_NONE)
		return fg_err_set(err, FG_EINPUT, "quantized module: the tensors are %s but the config declares no quantization",
				  family);
	return fg_err_set(err, FG_EINPUT, "quantized module: the tensors are %s but the config says %s%s%s", family,
			  fg_qparams_name(p, name, sizeof(name)), p->why[0] ? " by " : "", p->why);
}

/* Tensors quantized, config leaves the module alone (ignore lists, "-:", false). */
static int excluded(struct fg_err *err, const struct fg_qparams *p, const char *family)
{
	return fg_err_set(err, FG_EINPUT,
			  "quantized module: the tensors are %s but the config does not quantize the module (%s)", family,
			  p->why[0] ? p->why : "excluded");
}

static bool streq(const char *a, const char *b)
{
	return strcmp(a, b) == 0;
}

/* ---- families ------------------------------------------------------------------------ */

static int detect_gptq(const struct fg_qparams *p, const struct fg_qmodule *m, struct fg_qformat *f,
		       struct fg_err *err, bool *uns)
{
	const struct fg_tensor *qw = m->t[FG_QR_QWEIGHT], *gi = m->t[FG_QR_G_IDX];
	const char *fmt = p->fmt[0] ? p->fmt : "gptq";

	if (p->method != FG_QM_GPTQ)
		return contradiction(err, p, "GPTQ (qweight with [G, out] scales)");
	if (!p->have_weights)
		return excluded(err, p, "GPTQ");
	if (p->marlin)
		return refuse(err, uns, p, "the marlin layout is not read");
	if (!streq(fmt, "gptq") && !streq(fmt, "gptq_v2"))
		return refuse(err, uns, p, "checkpoint format '%s' is another kernel's layout (forged reads gptq and gptq_v2)", fmt);
	if (p->pack_dtype[0] && !streq(p->pack_dtype, "int32"))
		return refuse(err, uns, p, "codes packed in %s words (forged reads int32)", p->pack_dtype);
	if (p->bits >= 5 && p->bits <= 7)
		return refuse(err, uns, p, "%d-bit GPTQ is GPTQModel's planar layout (gptq_p), which forged does not read",
			      p->bits);
	if (p->bits != 2 && p->bits != 3 && p->bits != 4 && p->bits != 8)
		return p->bits ? refuse(err, uns, p, "GPTQ has no %d-bit layout (2, 3, 4 or 8 bits)", p->bits)
			       : fg_err_set(err, FG_EINPUT, "gptq: the config gives no bits");
	if (!p->group_size)
		return fg_err_set(err, FG_EINPUT, "gptq: the config gives no group_size");
	if (p->group_size < -1)
		return refuse(err, uns, p, "group size %d", p->group_size);
	/* The tensors' own bit width, when g_idx gives in. */
	if (gi && gi->rank == 1 && qw->rank == 2 && gi->shape[0] &&
	    qw->shape[0] * 32 != gi->shape[0] * (uint64_t)p->bits) {
		char a[DQ_SHAPE_MAX], b[DQ_SHAPE_MAX];

		return fg_err_set(err, FG_EINPUT, "gptq: the config says bits=%d but qweight %s and g_idx %s hold %.3g-bit codes",
				  p->bits, dq_shape(qw, a, sizeof(a)), dq_shape(gi, b, sizeof(b)),
				  (double)qw->shape[0] * 32.0 / (double)gi->shape[0]);
	}
	f->kind = FG_QF_GPTQ;
	f->method = FG_QM_GPTQ;
	f->bits = p->bits;
	f->group = p->group_size > 0 ? p->group_size : 0;
	f->sym = p->sym != 0;
	f->act_order = p->desc_act == 1;
	f->version = streq(fmt, "gptq") ? 1 : 2;
	return 0;
}

static int detect_awq(const struct fg_qparams *p, const struct fg_qmodule *m, struct fg_qformat *f,
		      struct fg_err *err, bool *uns)
{
	const char *ver = p->fmt[0] ? p->fmt : "gemm";

	if (p->method != FG_QM_AWQ)
		return contradiction(err, p, "AutoAWQ (qweight with scales 8 times wider)");
	if (!p->have_weights)
		return excluded(err, p, "AutoAWQ");
	if (!streq(ver, "gemm"))
		return refuse(err, uns, p, "the %s kernel's layout is not read (forged reads gemm)", ver);
	if (p->bits && p->bits != 4)
		return refuse(err, uns, p, "AutoAWQ GEMM packs 4-bit codes only");
	if (p->sym == 1)
		return refuse(err, uns, p, "GEMM without zero points is not a layout AutoAWQ writes");
	if (!m->t[FG_QR_QZEROS])
		return refuse(err, uns, p, "qzeros is missing (AutoAWQ's GEMM layout always has zero points)");
	if (!p->group_size)
		return fg_err_set(err, FG_EINPUT, "awq: the config gives no group_size");
	if (p->group_size < -1)
		return refuse(err, uns, p, "group size %d", p->group_size);
	f->kind = FG_QF_AWQ;
	f->method = FG_QM_AWQ;
	f->bits = 4;
	f->group = p->group_size > 0 ? p->group_size : 0;
	f->sym = false;
	return 0;
}

static int detect_qweight(const struct fg_qparams *p, const struct fg_qmodule *m, struct fg_qformat *f,
			  struct fg_err *err, bool *uns)
{
	const struct fg_tensor *qw = m->t[FG_QR_QWEIGHT], *sc = m->t[FG_QR_SCALES];

	if (m->t[FG_QR_G_IDX])
		return detect_gptq(p, m, f, err, uns);
	if (sc && qw->rank == 2 && sc->rank == 2) {
		if (sc->shape[1] == qw->shape[1] && p->method != FG_QM_AWQ)
			return detect_gptq(p, m, f, err, uns); /* GPTQ without g_idx: groups c / group */
		if (sc->shape[1] == qw->shape[1] * 8)
			return detect_awq(p, m, f, err, uns);
	}
	if (p->method == FG_QM_AWQ)
		return detect_awq(p, m, f, err, uns);
	if (p->method == FG_QM_GPTQ)
		return detect_gptq(p, m, f, err, uns);
	return contradiction(err, p, "GPTQ- or AWQ-style (qweight)");
}

static int ct_version(const struct fg_qparams *p)
{
	if (p->ct_version[0] < 0)
		return 0;
	if (p->ct_version[0] > 0 || p->ct_version[1] >= 18)
		return 2;
	return 1;
}

static int detect_ct_packed(const struct fg_qparams *p, const struct fg_qmodule *m, struct fg_qformat *f,
			    struct fg_err *err, bool *uns)
{
	const struct fg_tensor *wp = m->t[FG_QR_WEIGHT_PACKED];
	bool zp = m->t[FG_QR_WEIGHT_ZERO_POINT] != NULL, gidx = m->t[FG_QR_WEIGHT_G_IDX] != NULL;

	if (p->method != FG_QM_CT)
		return contradiction(err, p, "compressed-tensors (weight_packed)");
	if (wp->dtype == FG_DT_U8)
		return refuse(err, uns, p, "%s is not read",
			      m->t[FG_QR_WEIGHT_GLOBAL_SCALE] ? "nvfp4-pack-quantized (U8 weight_packed with weight_global_scale)"
							    : "mxfp4-pack-quantized (U8 weight_packed)");
	if (wp->dtype != FG_DT_I32 || !m->t[FG_QR_WEIGHT_SHAPE])
		return fg_err_set(err, FG_EINPUT, "compressed-tensors: weight_packed of dtype %s%s is no known layout",
				  fg_dtype_name(wp->dtype), m->t[FG_QR_WEIGHT_SHAPE] ? "" : " without weight_shape");
	if (!p->have_weights)
		return fg_err_set(err, FG_EINPUT,
				  "compressed-tensors: the module has weight_packed but no config group gives its weights' parameters%s%s%s",
				  p->why[0] ? " (" : "", p->why, p->why[0] ? ")" : "");
	if (p->fmt[0] && !streq(p->fmt, "pack-quantized"))
		return contradiction(err, p, "pack-quantized (I32 weight_packed + weight_shape)");
	if (p->type[0] && !streq(p->type, "int"))
		return contradiction(err, p, "integer pack-quantized");
	if (p->bits < 2 || p->bits > 8)
		return p->bits ? refuse(err, uns, p, "pack-quantized reads 2 to 8 bits")
			       : fg_err_set(err, FG_EINPUT, "compressed-tensors: the config gives no num_bits");
	f->kind = FG_QF_CT_INT;
	f->method = FG_QM_CT;
	f->bits = p->bits;
	if (streq(p->strategy, "group") || (!p->strategy[0] && p->group_size > 0)) {
		if (p->group_size <= 0)
			return refuse(err, uns, p, "strategy group without a group size");
		f->scale = FG_QS_GROUP;
		f->group = p->group_size;
	} else if (streq(p->strategy, "channel") || (!p->strategy[0] && p->group_size == -1)) {
		f->scale = FG_QS_CHANNEL;
	} else if (streq(p->strategy, "tensor") || !p->strategy[0]) {
		f->scale = FG_QS_TENSOR;
	} else {
		return refuse(err, uns, p, "strategy %s is not read for packed integer weights", p->strategy);
	}
	/* Symmetry: the zero-point tensor says it; the config must agree. */
	if (p->sym == 1 && zp)
		return contradiction(err, p, "asymmetric (weight_zero_point present)");
	if (p->sym == 0 && !zp)
		return contradiction(err, p, "symmetric (no weight_zero_point)");
	f->sym = !zp;
	if (!f->sym && f->scale == FG_QS_TENSOR)
		return refuse(err, uns, p, "an asymmetric per-tensor zero point is not packed, and its layout is unconfirmed");
	if (streq(p->actorder, "group") && !gidx)
		return contradiction(err, p, "without act-order groups (no weight_g_idx)");
	f->act_order = gidx;
	f->version = ct_version(p);
	return 0;
}

static int detect_nvfp4(const struct fg_qparams *p, const struct fg_qmodule *m, struct fg_qformat *f,
			struct fg_err *err, bool *uns)
{
	if (p->method != FG_QM_MODELOPT)
		return contradiction(err, p, "ModelOpt NVFP4 (U8 weight, F8_E4M3 weight_scale, weight_scale_2)");
	if (!p->have_weights)
		return excluded(err, p, "ModelOpt NVFP4");
	if (m->t[FG_QR_PRE_QUANT_SCALE] || strstr(p->fmt, "awq"))
		return refuse(err, uns, p,
			      "pre_quant_scale (an AWQ-style algorithm) would have to be folded into the weight, which forged does not do");
	if (p->fmt[0] && !streq(p->fmt, "nvfp4") && !streq(p->fmt, "w4a8_nvfp4_fp8"))
		return contradiction(err, p, "NVFP4");
	if (p->group_size && p->group_size != 16)
		return refuse(err, uns, p, "NVFP4 blocks are 16 columns");
	f->kind = FG_QF_NVFP4;
	f->method = FG_QM_MODELOPT;
	f->bits = 4;
	f->group = 16;
	return 0;
}

/* The strategy an FP8 weight_scale's shape implies when it is one of tensor / channel. */
static int fp8_shape_strategy(const struct fg_tensor *w, const struct fg_tensor *s, enum fg_qscale *out)
{
	uint64_t n = 1;
	int i;

	for (i = 0; i < s->rank; i++)
		n *= s->shape[i];
	if (n == 1 && s->rank <= 2) {
		*out = FG_QS_TENSOR;
		return 0;
	}
	if (w->rank == 2 && ((s->rank == 2 && s->shape[0] == w->shape[0] && s->shape[1] == 1) ||
			     (s->rank == 1 && s->shape[0] == w->shape[0]))) {
		*out = FG_QS_CHANNEL;
		return 0;
	}
	return FG_EINPUT; /* neither: the caller says what the shape is */
}

static int detect_fp8(const struct fg_qparams *p, const struct fg_qmodule *m, struct fg_qformat *f,
		      struct fg_err *err, bool *uns)
{
	const struct fg_tensor *w = m->t[FG_QR_WEIGHT], *s = m->t[FG_QR_WEIGHT_SCALE];
	char sh[DQ_SHAPE_MAX];

	f->kind = FG_QF_FP8;
	f->bits = 8;
	if (m->t[FG_QR_WEIGHT_SCALE_INV]) {
		if (p->method != FG_QM_FP8)
			return contradiction(err, p, "block FP8 (F8_E4M3 weight with weight_scale_inv)");
		if (!p->have_weights)
			return excluded(err, p, "block FP8");
		if (p->fmt[0] && !streq(p->fmt, "e4m3"))
			return refuse(err, uns, p, "fp8 format %s (forged reads e4m3)", p->fmt);
		f->method = FG_QM_FP8;
		f->scale = FG_QS_BLOCK;
		f->block[0] = p->block[0] ? p->block[0] : 128;
		f->block[1] = p->block[1] ? p->block[1] : 128;
		return 0;
	}
	if (!s)
		return refuse(err, uns, p, "the F8_E4M3 weight has no weight_scale or weight_scale_inv");
	if (s->dtype == FG_DT_U8)
		return refuse(err, uns, p, "mxfp8-quantized (E8M0 weight_scale) is not read");
	if (p->method == FG_QM_CT) {
		if (!p->have_weights)
			return fg_err_set(err, FG_EINPUT,
					  "compressed-tensors: the module has an F8_E4M3 weight but no config group gives its weights' parameters%s%s%s",
					  p->why[0] ? " (" : "", p->why, p->why[0] ? ")" : "");
		if ((p->type[0] && !streq(p->type, "float")) || (p->bits && p->bits != 8) ||
		    (p->fmt[0] && !streq(p->fmt, "float-quantized") && !streq(p->fmt, "naive-quantized")))
			return contradiction(err, p, "float-quantized FP8 (F8_E4M3 weight with weight_scale)");
		f->method = FG_QM_CT;
		if (streq(p->strategy, "tensor")) {
			f->scale = FG_QS_TENSOR;
		} else if (streq(p->strategy, "channel")) {
			f->scale = FG_QS_CHANNEL;
		} else if (streq(p->strategy, "group")) {
			f->scale = FG_QS_GROUP;
			f->group = p->group_size;
		} else if (streq(p->strategy, "block")) {
			f->scale = FG_QS_BLOCK;
			f->block[0] = p->block[0];
			f->block[1] = p->block[1];
			if (f->block[0] <= 0 || f->block[1] <= 0)
				return refuse(err, uns, p, "strategy block without block_structure");
		} else if (p->strategy[0]) {
			return refuse(err, uns, p, "strategy %s is not read for FP8 weights", p->strategy);
		} else if (fp8_shape_strategy(w, s, &f->scale)) {
			return refuse(err, uns, p, "the strategy of weight_scale %s is not given and not tensor or channel",
				      dq_shape(s, sh, sizeof(sh)));
		}
		return 0;
	}
	if (p->method == FG_QM_MODELOPT) {
		if (p->fmt[0] && strncmp(p->fmt, "fp8", 3) != 0)
			return contradiction(err, p, "FP8 (F8_E4M3 weight with weight_scale)");
		if (!p->have_weights)
			return excluded(err, p, "FP8");
		f->method = FG_QM_MODELOPT;
		if (fp8_shape_strategy(w, s, &f->scale))
			return refuse(err, uns, p, "weight_scale %s is neither per tensor nor per channel (block layouts are unconfirmed)",
				      dq_shape(s, sh, sizeof(sh)));
		return 0;
	}
	return contradiction(err, p, "FP8 with weight_scale (compressed-tensors or ModelOpt)");
}

static int detect_mlx(const struct fg_qparams *p, const struct fg_qmodule *m, struct fg_qformat *f,
		      struct fg_err *err, bool *uns)
{
	const char *mode = p->fmt[0] ? p->fmt : "affine";
	bool biases = m->t[FG_QR_BIASES] != NULL;

	if (p->method != FG_QM_MLX)
		return contradiction(err, p, "MLX (U32 weight with scales)");
	if (!p->have_weights)
		return excluded(err, p, "MLX-quantized");
	f->method = FG_QM_MLX;
	if (streq(mode, "affine")) {
		if (!biases)
			return contradiction(err, p, "an MLX fp mode (no biases)");
		f->kind = FG_QF_MLX_AFFINE;
		f->bits = p->bits ? p->bits : 4;
		f->group = p->group_size ? p->group_size : 64;
		return 0;
	}
	if (biases)
		return contradiction(err, p, "MLX affine (biases present)");
	if (streq(mode, "mxfp4")) {
		f->kind = FG_QF_MLX_MXFP4;
		f->bits = 4;
		f->group = 32;
	} else if (streq(mode, "mxfp8")) {
		f->kind = FG_QF_MLX_MXFP8;
		f->bits = 8;
		f->group = 32;
	} else if (streq(mode, "nvfp4")) {
		f->kind = FG_QF_MLX_NVFP4;
		f->bits = 4;
		f->group = 16;
	} else {
		return refuse(err, uns, p, "MLX mode %s is not read", mode);
	}
	if ((p->bits && p->bits != f->bits) || (p->group_size && p->group_size != f->group))
		return refuse(err, uns, p, "mode %s has bits=%d group=%d only", mode, f->bits, f->group);
	return 0;
}

int fg_qformat_detect(const struct fg_qparams *p, const struct fg_qmodule *m,
		      struct fg_qformat *out, struct fg_err *err)
{
	return fg_qformat_detect_why(p, m, out, NULL, err);
}

int fg_qformat_detect_why(const struct fg_qparams *p, const struct fg_qmodule *m, struct fg_qformat *out,
			  bool *unsupported, struct fg_err *err)
{
	const struct fg_tensor *w;
	struct fg_qparams none;
	bool scratch = false, *uns = unsupported ? unsupported : &scratch;
	char aux[256];

	*uns = false;
	if (!m || !out)
		return fg_err_set(err, FG_EUSAGE, "fg_qformat_detect: NULL module or output");
	if (!p) {
		fg_qparams_init(&none);
		p = &none;
	}
	memset(out, 0, sizeof(*out));
	w = m->t[FG_QR_WEIGHT];
	if (is_float(w) && !aux_roles(m, aux, sizeof(aux))[0]) {
		out->kind = FG_QF_DENSE; /* the tensors decide: ignore lists are a cross-check only */
		return 0;
	}
	if (!w && !m->t[FG_QR_QWEIGHT] && !m->t[FG_QR_WEIGHT_PACKED])
		return fg_err_set(err, FG_EINPUT, "quantized module: no weight, qweight or weight_packed tensor (has: %s)",
				  aux_roles(m, aux, sizeof(aux))[0] ? aux : "nothing");
	if (p->method == FG_QM_UNSUPPORTED)
		return refuse(err, uns, p, "quant_method %s is not read", p->method_name[0] ? p->method_name : "?");
	if (m->t[FG_QR_QWEIGHT])
		return detect_qweight(p, m, out, err, uns);
	if (m->t[FG_QR_WEIGHT_PACKED])
		return detect_ct_packed(p, m, out, err, uns);
	switch (w->dtype) {
	case FG_DT_F8_E4M3:
		return detect_fp8(p, m, out, err, uns);
	case FG_DT_U8:
		if (m->t[FG_QR_WEIGHT_SCALE] && m->t[FG_QR_WEIGHT_SCALE]->dtype == FG_DT_F8_E4M3 &&
		    m->t[FG_QR_WEIGHT_SCALE_2])
			return detect_nvfp4(p, m, out, err, uns);
		break;
	case FG_DT_U32:
		if (m->t[FG_QR_SCALES])
			return detect_mlx(p, m, out, err, uns);
		break;
	case FG_DT_I8:
		if (m->t[FG_QR_WEIGHT_SCALE])
			return refuse(err, uns, p, "int-quantized (I8 weight with weight_scale) is not read");
		break;
	case FG_DT_F8_E5M2:
		return refuse(err, uns, p, "F8_E5M2 weights are not read");
	default:
		break;
	}
	return fg_err_set(err, FG_EINPUT, "quantized module: a %s weight with %s is no format forged knows",
			  fg_dtype_name(w->dtype), aux_roles(m, aux, sizeof(aux))[0] ? aux : "no other tensor");
}
