/*
 * qformat.c: the pieces of dequant.h every format shares: module roles,
 * format names, the generic dispatch, the dense "format", and the helpers of
 * dq_internal.h (shape checks and their messages, exact widening, small-float
 * decoding, band checks, refusals).
 */
#include "forge/format/quant/dequant.h"
#include "forge/format/quant/dq_internal.h"
#include "forge/core/bytes.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- roles ----------------------------------------------------------------------- */

static const char *const role_suffix[FG_QR_COUNT] = {
	[FG_QR_WEIGHT] = "weight",
	[FG_QR_QWEIGHT] = "qweight",
	[FG_QR_QZEROS] = "qzeros",
	[FG_QR_SCALES] = "scales",
	[FG_QR_G_IDX] = "g_idx",
	[FG_QR_BIASES] = "biases",
	[FG_QR_BIAS] = "bias",
	[FG_QR_WEIGHT_PACKED] = "weight_packed",
	[FG_QR_WEIGHT_SCALE] = "weight_scale",
	[FG_QR_WEIGHT_ZERO_POINT] = "weight_zero_point",
	[FG_QR_WEIGHT_SHAPE] = "weight_shape",
	[FG_QR_WEIGHT_G_IDX] = "weight_g_idx",
	[FG_QR_WEIGHT_GLOBAL_SCALE] = "weight_global_scale",
	[FG_QR_WEIGHT_SCALE_2] = "weight_scale_2",
	[FG_QR_WEIGHT_SCALE_INV] = "weight_scale_inv",
	[FG_QR_INPUT_SCALE] = "input_scale",
	[FG_QR_INPUT_GLOBAL_SCALE] = "input_global_scale",
	[FG_QR_PRE_QUANT_SCALE] = "pre_quant_scale",
};

const char *fg_qrole_suffix(enum fg_qrole r)
{
	return (unsigned)r < FG_QR_COUNT ? role_suffix[r] : "invalid";
}

int fg_qrole_parse(const char *suffix, enum fg_qrole *out)
{
	int i;

	if (!suffix)
		return FG_EINPUT;
	for (i = 0; i < FG_QR_COUNT; i++) {
		if (strcmp(suffix, role_suffix[i]) == 0) {
			*out = (enum fg_qrole)i;
			return 0;
		}
	}
	return FG_EINPUT;
}

int fg_qmodule_add(struct fg_qmodule *m, const char *suffix, const struct fg_tensor *t,
		   struct fg_err *err)
{
	enum fg_qrole r;

	if (!m || !t)
		return fg_err_set(err, FG_EUSAGE, "fg_qmodule_add: NULL module or tensor");
	if (fg_qrole_parse(suffix, &r))
		return 0;
	if (m->t[r] && m->t[r] != t)
		return fg_err_set(err, FG_EINPUT, "quantized module: two tensors for role %s ('%s' and '%s')",
				  role_suffix[r], m->t[r]->name ? m->t[r]->name : "?",
				  t->name ? t->name : "?");
	m->t[r] = t;
	return 1;
}

/* ---- names ----------------------------------------------------------------------- */

static const char *const kind_names[FG_QF_COUNT] = {
	[FG_QF_DENSE] = "dense",
	[FG_QF_GPTQ] = "gptq",
	[FG_QF_AWQ] = "awq",
	[FG_QF_CT_INT] = "compressed-tensors pack-quantized",
	[FG_QF_FP8] = "fp8",
	[FG_QF_NVFP4] = "modelopt nvfp4",
	[FG_QF_MLX_AFFINE] = "mlx affine",
	[FG_QF_MLX_MXFP4] = "mlx mxfp4",
	[FG_QF_MLX_MXFP8] = "mlx mxfp8",
	[FG_QF_MLX_NVFP4] = "mlx nvfp4",
};

const char *fg_qformat_kind_name(enum fg_qformat_kind k)
{
	return (unsigned)k < FG_QF_COUNT ? kind_names[k] : "invalid";
}

const char *fg_qformat_mlx_mode(enum fg_qformat_kind k)
{
	switch (k) {
	case FG_QF_MLX_AFFINE:
		return "affine";
	case FG_QF_MLX_MXFP4:
		return "mxfp4";
	case FG_QF_MLX_MXFP8:
		return "mxfp8";
	case FG_QF_MLX_NVFP4:
		return "nvfp4";
	default:
		return NULL;
	}
}

static const char *scale_name(enum fg_qscale s)
{
	switch (s) {
	case FG_QS_TENSOR:
		return "tensor";
	case FG_QS_CHANNEL:
		return "channel";
	case FG_QS_GROUP:
		return "group";
	case FG_QS_BLOCK:
		return "block";
	}
	return "invalid";
}

static const char *tf(bool b)
{
	return b ? "true" : "false";
}

const char *fg_qformat_name(const struct fg_qformat *f, char *buf, size_t len)
{
	int g;

	if (!buf || !len)
		return buf;
	buf[0] = 0;
	if (!f)
		return buf;
	g = f->group ? f->group : -1;
	switch (f->kind) {
	case FG_QF_GPTQ:
		snprintf(buf, len, "gptq bits=%d group=%d desc_act=%s sym=%s checkpoint_format=%s", f->bits, g,
			 tf(f->act_order), tf(f->sym),
			 f->version == 1 ? "gptq" : f->version == 2 ? "gptq_v2" : "unknown");
		break;
	case FG_QF_AWQ:
		snprintf(buf, len, "awq bits=%d group=%d version=gemm zero_point=%s", f->bits, g, tf(!f->sym));
		break;
	case FG_QF_CT_INT:
		if (f->scale == FG_QS_GROUP)
			snprintf(buf, len,
				 "compressed-tensors pack-quantized bits=%d group=%d strategy=group symmetric=%s actorder=%s packing=%s",
				 f->bits, f->group, tf(f->sym), f->act_order ? "group" : "none",
				 f->version == 1 ? "padded" : f->version == 2 ? "bitstream" : "auto");
		else
			snprintf(buf, len,
				 "compressed-tensors pack-quantized bits=%d strategy=%s symmetric=%s actorder=%s packing=%s",
				 f->bits, scale_name(f->scale), tf(f->sym), f->act_order ? "group" : "none",
				 f->version == 1 ? "padded" : f->version == 2 ? "bitstream" : "auto");
		break;
	case FG_QF_FP8: {
		const char *who = f->method == FG_QM_CT ? "compressed-tensors float-quantized fp8"
				  : f->method == FG_QM_MODELOPT ? "modelopt fp8"
								  : "fp8 e4m3";

		if (f->scale == FG_QS_BLOCK)
			snprintf(buf, len, "%s strategy=block block=[%d,%d]", who, f->block[0], f->block[1]);
		else if (f->scale == FG_QS_GROUP)
			snprintf(buf, len, "%s strategy=group group=%d", who, f->group);
		else
			snprintf(buf, len, "%s strategy=%s", who, scale_name(f->scale));
		break;
	}
	case FG_QF_NVFP4:
		snprintf(buf, len, "modelopt nvfp4 group=%d", f->group ? f->group : 16);
		break;
	case FG_QF_MLX_AFFINE:
	case FG_QF_MLX_MXFP4:
	case FG_QF_MLX_MXFP8:
	case FG_QF_MLX_NVFP4:
		snprintf(buf, len, "%s bits=%d group=%d", kind_names[f->kind], f->bits, f->group);
		break;
	case FG_QF_DENSE:
		snprintf(buf, len, "dense");
		break;
	default:
		snprintf(buf, len, "invalid format kind %d", (int)f->kind);
		break;
	}
	return buf;
}

/* ---- generic dispatch ------------------------------------------------------------ */

typedef int (*check_fn)(const struct fg_qformat *, const struct fg_qmodule *, struct fg_qdims *,
			struct fg_err *);
typedef int (*rows_fn)(const struct fg_qformat *, const struct fg_qmodule *, size_t, size_t, float *,
		       struct fg_err *);
typedef int (*rows16_fn)(const struct fg_qformat *, const struct fg_qmodule *, size_t, size_t,
			 uint16_t *, struct fg_err *);

static const struct {
	check_fn check;
	rows_fn rows;
	rows16_fn rows16;
} dispatch[FG_QF_COUNT] = {
	[FG_QF_DENSE] = { fg_dense_check, fg_dense_dequant_rows, fg_dense_dequant_rows_bf16 },
	[FG_QF_GPTQ] = { fg_gptq_check, fg_gptq_dequant_rows, fg_gptq_dequant_rows_bf16 },
	[FG_QF_AWQ] = { fg_awq_check, fg_awq_dequant_rows, fg_awq_dequant_rows_bf16 },
	[FG_QF_CT_INT] = { fg_ct_int_check, fg_ct_int_dequant_rows, fg_ct_int_dequant_rows_bf16 },
	[FG_QF_FP8] = { fg_fp8_scaled_check, fg_fp8_scaled_dequant_rows, fg_fp8_scaled_dequant_rows_bf16 },
	[FG_QF_NVFP4] = { fg_modelopt_nvfp4_check, fg_modelopt_nvfp4_dequant_rows,
			  fg_modelopt_nvfp4_dequant_rows_bf16 },
	[FG_QF_MLX_AFFINE] = { fg_mlx_check, fg_mlx_dequant_rows, fg_mlx_dequant_rows_bf16 },
	[FG_QF_MLX_MXFP4] = { fg_mlx_check, fg_mlx_dequant_rows, fg_mlx_dequant_rows_bf16 },
	[FG_QF_MLX_MXFP8] = { fg_mlx_check, fg_mlx_dequant_rows, fg_mlx_dequant_rows_bf16 },
	[FG_QF_MLX_NVFP4] = { fg_mlx_check, fg_mlx_dequant_rows, fg_mlx_dequant_rows_bf16 },
};

static int kind_ok(const struct fg_qformat *f, const struct fg_qmodule *m, struct fg_err *err)
{
	if (!f || !m)
		return fg_err_set(err, FG_EUSAGE, "dequantization: NULL format or module");
	if ((unsigned)f->kind >= FG_QF_COUNT)
		return fg_err_set(err, FG_EUSAGE, "dequantization: invalid format kind %d", (int)f->kind);
	return 0;
}

int fg_qformat_check(const struct fg_qformat *f, const struct fg_qmodule *m, struct fg_qdims *d,
		     struct fg_err *err)
{
	int rc = kind_ok(f, m, err);

	return rc ? rc : dispatch[f->kind].check(f, m, d, err);
}

int fg_qformat_dequant_rows(const struct fg_qformat *f, const struct fg_qmodule *m, size_t row0,
			    size_t n_rows, float *out, struct fg_err *err)
{
	int rc = kind_ok(f, m, err);

	return rc ? rc : dispatch[f->kind].rows(f, m, row0, n_rows, out, err);
}

int fg_qformat_dequant_rows_bf16(const struct fg_qformat *f, const struct fg_qmodule *m,
				 size_t row0, size_t n_rows, uint16_t *out, struct fg_err *err)
{
	int rc = kind_ok(f, m, err);

	return rc ? rc : dispatch[f->kind].rows16(f, m, row0, n_rows, out, err);
}

/* ---- shared helpers (dq_internal.h) ------------------------------------------------ */

const enum fg_dtype dq_param_dtypes[3] = { FG_DT_F32, FG_DT_F16, FG_DT_BF16 };

static const float e2m1_mag[8] = { 0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f };

float dq_e2m1(unsigned code)
{
	float v = e2m1_mag[code & 7];

	return (code & 8) ? -v : v;
}

float dq_e8m0(uint8_t b)
{
	return fg_bits_f32(b ? (uint32_t)b << 23 : 0x00400000u);
}

float dq_load_float(enum fg_dtype dt, const unsigned char *base, size_t i)
{
	switch (dt) {
	case FG_DT_F32:
		return fg_load_f32(base + 4 * i);
	case FG_DT_F16:
		return fg_f16_to_f32_ref(fg_load_u16(base + 2 * i));
	case FG_DT_BF16:
		return fg_bf16_to_f32_ref(fg_load_u16(base + 2 * i));
	case FG_DT_F8_E4M3:
		return fg_e4m3_to_f32_ref(base[i]);
	default:
		return NAN;
	}
}

const char *dq_shape(const struct fg_tensor *t, char *buf, size_t len)
{
	size_t used = 0;
	int i, n;

	if (!len)
		return buf;
	buf[0] = 0;
	if (!t) {
		snprintf(buf, len, "(absent)");
		return buf;
	}
	n = snprintf(buf, len, "[");
	used = n > 0 ? (size_t)n : 0;
	for (i = 0; i < t->rank && used < len; i++) {
		if (i == 4 && t->rank > 5) {
			n = snprintf(buf + used, len - used, ", ...");
			used += n > 0 ? (size_t)n : 0;
			i = t->rank - 1;
			if (used >= len)
				break;
		}
		n = snprintf(buf + used, len - used, "%s%llu", i ? ", " : "",
			     (unsigned long long)t->shape[i]);
		used += n > 0 ? (size_t)n : 0;
	}
	if (used < len)
		snprintf(buf + used, len - used, "]");
	return buf;
}

int dq_count(const char *fmt, const char *role, const struct fg_tensor *t, size_t *n,
	     struct fg_err *err)
{
	size_t c = 1, esz = fg_dtype_size(t->dtype);
	int i;

	if (t->rank > FG_ST_MAX_RANK)
		return fg_err_set(err, FG_EINPUT, "%s: %s has rank %d", fmt, role, t->rank);
	for (i = 0; i < t->rank; i++) {
		uint64_t d = t->shape[i];

		if (d > SIZE_MAX || (d && c > SIZE_MAX / (size_t)d))
			goto big;
		c *= (size_t)d;
	}
	if (!esz || (c && c > SIZE_MAX / esz))
		goto big;
	*n = c;
	return 0;
big:;
	char sh[DQ_SHAPE_MAX];

	return fg_err_set(err, FG_EINPUT, "%s: %s %s is too large to address", fmt, role,
			  dq_shape(t, sh, sizeof(sh)));
}

int dq_need(const char *fmt, const struct fg_qmodule *m, enum fg_qrole r, const enum fg_dtype *dts,
	    size_t n, int rank, size_t *dims, struct fg_err *err)
{
	const struct fg_tensor *t = m->t[r];
	char sh[DQ_SHAPE_MAX];
	size_t i, count;
	int rc;

	if (!t)
		return fg_err_set(err, FG_EINPUT, "%s: %s is missing", fmt, role_suffix[r]);
	for (i = 0; i < n; i++)
		if (t->dtype == dts[i])
			break;
	if (i == n) {
		char allowed[64] = "";
		size_t used = 0;

		for (i = 0; i < n && used < sizeof(allowed); i++) {
			int k = snprintf(allowed + used, sizeof(allowed) - used, "%s%s", i ? ", " : "",
					 fg_dtype_name(dts[i]));

			used += k > 0 ? (size_t)k : 0;
		}
		return fg_err_set(err, FG_EINPUT, "%s: %s %s has dtype %s, expected %s", fmt, role_suffix[r],
				  dq_shape(t, sh, sizeof(sh)), fg_dtype_name(t->dtype), allowed);
	}
	if (rank >= 0 && t->rank != rank)
		return fg_err_set(err, FG_EINPUT, "%s: %s %s has rank %d, expected %d", fmt, role_suffix[r],
				  dq_shape(t, sh, sizeof(sh)), t->rank, rank);
	rc = dq_count(fmt, role_suffix[r], t, &count, err);
	if (rc)
		return rc;
	if (dims)
		for (i = 0; i < (size_t)t->rank; i++)
			dims[i] = (size_t)t->shape[i];
	return 0;
}

int dq_only(const char *fmt, const struct fg_qmodule *m, const enum fg_qrole *allowed, size_t n,
	    struct fg_err *err)
{
	int r;
	size_t i;

	for (r = 0; r < FG_QR_COUNT; r++) {
		bool ok = r == FG_QR_BIAS || r == FG_QR_INPUT_SCALE || !m->t[r];

		for (i = 0; i < n && !ok; i++)
			ok = allowed[i] == (enum fg_qrole)r;
		if (!ok) {
			char sh[DQ_SHAPE_MAX];

			return fg_err_set(err, FG_EINPUT, "%s: unexpected tensor %s %s for this format", fmt,
					  role_suffix[r], dq_shape(m->t[r], sh, sizeof(sh)));
		}
	}
	return 0;
}

int dq_bias(const char *fmt, const struct fg_qmodule *m, size_t out, struct fg_err *err)
{
	const struct fg_tensor *b = m->t[FG_QR_BIAS];
	size_t dim;
	int rc;

	if (!b)
		return 0;
	rc = dq_need(fmt, m, FG_QR_BIAS, dq_param_dtypes, 3, 1, &dim, err);
	if (rc)
		return rc;
	if (dim != out) {
		char sh[DQ_SHAPE_MAX];

		return fg_err_set(err, FG_EINPUT, "%s: bias %s does not fit the weight's %zu output rows", fmt,
				  dq_shape(b, sh, sizeof(sh)), out);
	}
	return 0;
}

int dq_mismatch(struct fg_err *err, const char *fmt, enum fg_qrole role, const struct fg_qmodule *m,
		enum fg_qrole other, const char *want, ...)
{
	char a[DQ_SHAPE_MAX], b[DQ_SHAPE_MAX], w[160];
	va_list ap;

	va_start(ap, want);
	vsnprintf(w, sizeof(w), want, ap);
	va_end(ap);
	return fg_err_set(err, FG_EINPUT, "%s: %s %s does not fit %s %s: expected %s", fmt, role_suffix[role],
			  dq_shape(m->t[role], a, sizeof(a)), role_suffix[other],
			  dq_shape(m->t[other], b, sizeof(b)), w);
}

int dq_refuse(struct fg_err *err, const struct fg_qformat *f, const char *reason, ...)
{
	char name[160], why[256];
	va_list ap;

	va_start(ap, reason);
	vsnprintf(why, sizeof(why), reason, ap);
	va_end(ap);
	return fg_err_set(err, FG_EINPUT, FG_QUNSUPPORTED "%s: %s", fg_qformat_name(f, name, sizeof(name)), why);
}

int dq_dims_fit(const char *fmt, size_t out, size_t in, struct fg_err *err)
{
	if (!dq_mul_fits(out, in) || !dq_mul_fits(out * in, 4))
		return fg_err_set(err, FG_EINPUT, "%s: weight [%zu, %zu] is too large to address", fmt, out, in);
	return 0;
}

int dq_band(const char *fmt, size_t rows, size_t row0, size_t n_rows, const void *out,
	    struct fg_err *err)
{
	if (row0 > rows || n_rows > rows - row0)
		return fg_err_set(err, FG_EUSAGE, "%s: rows %zu-%zu are outside the weight's %zu rows", fmt, row0,
				  row0 + n_rows, rows);
	if (n_rows && !out)
		return fg_err_set(err, FG_EUSAGE, "%s: NULL output buffer", fmt);
	return 0;
}

int dq_data(const char *fmt, const struct fg_qmodule *m, enum fg_qrole r, const unsigned char **p,
	    struct fg_err *err)
{
	const struct fg_tensor *t = m->t[r];

	*p = NULL;
	if (!t || !t->data)
		return fg_err_set(err, FG_EUSAGE, "%s: %s has no data (a header-only view)", fmt,
				  role_suffix[r]);
	*p = t->data;
	return 0;
}

int dq_scales_finite(const char *fmt, const struct fg_qmodule *m, enum fg_qrole r, enum fg_dtype dt,
		     const unsigned char *p, size_t i0, size_t n, size_t cols, struct fg_err *err)
{
	size_t i;

	(void)m;
	for (i = i0; i < i0 + n; i++) {
		float s = dq_load_float(dt, p, i);

		if (!isfinite(s)) {
			if (cols)
				return fg_err_set(err, FG_EINPUT, "%s: %s[%zu, %zu] is not finite (%g)", fmt,
						  role_suffix[r], i / cols, i % cols, (double)s);
			return fg_err_set(err, FG_EINPUT, "%s: %s[%zu] is not finite (%g)", fmt, role_suffix[r], i,
					  (double)s);
		}
	}
	return 0;
}

/* ---- dense ------------------------------------------------------------------------ */

static const char dense_fmt[] = "dense weight";

int fg_dense_check(const struct fg_qformat *f, const struct fg_qmodule *m, struct fg_qdims *d,
		   struct fg_err *err)
{
	static const enum fg_qrole allowed[] = { FG_QR_WEIGHT };
	size_t dims[2];
	int rc;

	if (!f || !m || f->kind != FG_QF_DENSE)
		return fg_err_set(err, FG_EUSAGE, "fg_dense_check: not a dense format");
	rc = dq_need(dense_fmt, m, FG_QR_WEIGHT, dq_param_dtypes, 3, 2, dims, err);
	if (!rc)
		rc = dq_only(dense_fmt, m, allowed, 1, err);
	if (!rc)
		rc = dq_bias(dense_fmt, m, dims[0], err);
	if (rc)
		return rc;
	if (d) {
		d->out = dims[0];
		d->in = dims[1];
	}
	return 0;
}

static int dense_rows(const struct fg_qformat *f, const struct fg_qmodule *m, size_t row0,
		      size_t n_rows, struct dq_out o, struct fg_err *err)
{
	const struct fg_tensor *w;
	const unsigned char *p;
	struct fg_qdims d;
	size_t i, n;
	int rc;

	rc = fg_dense_check(f, m, &d, err);
	if (!rc)
		rc = dq_band(dense_fmt, d.out, row0, n_rows, o.p, err);
	if (rc || !n_rows || !d.in)
		return rc;
	rc = dq_data(dense_fmt, m, FG_QR_WEIGHT, &p, err);
	if (rc)
		return rc;
	w = m->t[FG_QR_WEIGHT];
	n = n_rows * d.in;
	for (i = 0; i < n; i++)
		dq_put(o, i, dq_load_float(w->dtype, p, row0 * d.in + i));
	return 0;
}

int fg_dense_dequant_rows(const struct fg_qformat *f, const struct fg_qmodule *m, size_t row0,
			  size_t n_rows, float *out, struct fg_err *err)
{
	return dense_rows(f, m, row0, n_rows, (struct dq_out){ (unsigned char *)out, false }, err);
}

int fg_dense_dequant_rows_bf16(const struct fg_qformat *f, const struct fg_qmodule *m, size_t row0,
			       size_t n_rows, uint16_t *out, struct fg_err *err)
{
	return dense_rows(f, m, row0, n_rows, (struct dq_out){ (unsigned char *)out, true }, err);
}
