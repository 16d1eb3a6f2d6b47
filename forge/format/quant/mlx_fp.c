/*
 * mlx_fp.c: MLX quantized weights to the dense weight: the mxfp8 and nvfp4
 * modes (new here), and the module-level entry points for all four modes,
 * which run quant.h's fg_dequant_affine_rows_dt and fg_dequant_mxfp4_rows for
 * affine and mxfp4.
 *
 * The rules (notes/quant-formats.md section 7, read from mlx/ops.cpp and
 * mlx/backend/cpu/quantized.cpp at 846d176):
 *   - weight U32 [out, in*bits/32], each row an LSB-first stream;
 *   - mxfp8: four E4M3 bytes per word, byte k (little-endian) = value k;
 *     scales U8 E8M0 [out, in/32]; W = e4m3(b) * 2^(s - 127), byte 0 reads as
 *     2^-127 as in MLX's CPU kernel; 255 (MLX: infinity; OCP MX: NaN) is
 *     refused;
 *   - nvfp4: eight E2M1 codes per word, code k at bits 4k; scales U8 holding
 *     E4M3 bits [out, in/16]; W = e2m1(code) * e4m3(s).  nn.QuantizedLinear
 *     stores no global scale, so there is none here;
 *   - both products are exact in F32 (a 2- or 4-bit mantissa times a power of
 *     two or a 4-bit mantissa), so BF16 is the rounded true value.
 * E4M3 NaN scale codes (0x7f, 0xff; MLX decodes them as +-480) are refused.
 * E2M1 code 8 is -0, as in MLX.
 *
 * The BF16 outputs of affine and mxfp4 call quant.h's F32 dequantizers on
 * chunks of CHUNK columns of one row into a stack buffer and round: CHUNK is
 * a multiple of every group size and fills whole words at every width.
 */
#include "forge/format/quant/dequant.h"
#include "forge/format/quant/dq_internal.h"
#include "forge/format/quant/quant.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>

#define CHUNK 256

/* ---- raw buffers --------------------------------------------------------------- */

static int raw_check(const char *fmt, const void *packed, const uint8_t *scales, size_t rows,
		     size_t cols, size_t group, const void *out, struct fg_err *err)
{
	if (cols % group)
		return fg_err_set(err, FG_EINPUT, "%s: weight [%zu, %zu] has %zu columns, not a multiple of the group size %zu",
				  fmt, rows, cols, cols, group);
	if (dq_dims_fit(fmt, rows, cols, err))
		return FG_EINPUT;
	if (rows && cols && (!packed || !scales || !out))
		return fg_err_set(err, FG_EUSAGE, "%s: NULL buffer", fmt);
	return 0;
}

static int mxfp8_raw(const uint32_t *packed, const uint8_t *scales, size_t rows, size_t cols,
		     struct dq_out o, struct fg_err *err)
{
	static const char fmt[] = "mxfp8 dequantization";
	const unsigned char *w = (const unsigned char *)packed;
	size_t gpr = cols / 32, i, n = rows * cols;
	int rc = raw_check(fmt, packed, scales, rows, cols, 32, o.p, err);

	if (rc || !n)
		return rc;
	for (i = 0; i < rows * gpr; i++)
		if (scales[i] == 0xff)
			return fg_err_set(err, FG_EINPUT, "%s: scales[%zu, %zu] is the E8M0 byte 0xff (NaN)", fmt, i / gpr,
					  i % gpr);
	for (i = 0; i < n; i++) {
		const size_t r = i / cols, c = i % cols;

		dq_put(o, i, fg_e4m3_to_f32_ref(w[i]) * dq_e8m0(scales[r * gpr + c / 32]));
	}
	return 0;
}

static int nvfp4_raw(const uint32_t *packed, const uint8_t *scales, size_t rows, size_t cols,
		     struct dq_out o, struct fg_err *err)
{
	static const char fmt[] = "nvfp4 dequantization";
	const unsigned char *w = (const unsigned char *)packed;
	size_t gpr = cols / 16, i, n = rows * cols;
	int rc = raw_check(fmt, packed, scales, rows, cols, 16, o.p, err);

	if (rc || !n)
		return rc;
	for (i = 0; i < rows * gpr; i++)
		if ((scales[i] & 0x7f) == 0x7f)
			return fg_err_set(err, FG_EINPUT, "%s: scales[%zu, %zu] is the E4M3 NaN code 0x%02x", fmt, i / gpr,
					  i % gpr, scales[i]);
	for (i = 0; i < n; i++) {
		const size_t r = i / cols, c = i % cols;
		const unsigned code = ((unsigned)w[i / 2] >> (4 * (i & 1))) & 15u;

		dq_put(o, i, dq_e2m1(code) * fg_e4m3_to_f32_ref(scales[r * gpr + c / 16]));
	}
	return 0;
}

int fg_dequant_mxfp8_rows(const uint32_t *packed, const uint8_t *scales, size_t rows, size_t cols,
			  float *out, struct fg_err *err)
{
	return mxfp8_raw(packed, scales, rows, cols, (struct dq_out){ (unsigned char *)out, false }, err);
}

int fg_dequant_mxfp8_rows_bf16(const uint32_t *packed, const uint8_t *scales, size_t rows,
			       size_t cols, uint16_t *out, struct fg_err *err)
{
	return mxfp8_raw(packed, scales, rows, cols, (struct dq_out){ (unsigned char *)out, true }, err);
}

int fg_dequant_nvfp4_rows(const uint32_t *packed, const uint8_t *scales, size_t rows, size_t cols,
			  float *out, struct fg_err *err)
{
	return nvfp4_raw(packed, scales, rows, cols, (struct dq_out){ (unsigned char *)out, false }, err);
}

int fg_dequant_nvfp4_rows_bf16(const uint32_t *packed, const uint8_t *scales, size_t rows,
			       size_t cols, uint16_t *out, struct fg_err *err)
{
	return nvfp4_raw(packed, scales, rows, cols, (struct dq_out){ (unsigned char *)out, true }, err);
}

/* ---- modules ----------------------------------------------------------------------- */

static const char mlx_fmt[] = "mlx";

struct mlx_geom {
	int bits, group;
	size_t out, in, words, groups;
	enum fg_dtype sdt;
};

static int mlx_geom(const struct fg_qformat *f, const struct fg_qmodule *m, struct mlx_geom *g,
		    struct fg_err *err)
{
	static const enum fg_qrole allowed_affine[] = { FG_QR_WEIGHT, FG_QR_SCALES, FG_QR_BIASES };
	static const enum fg_dtype u32[] = { FG_DT_U32 }, u8[] = { FG_DT_U8 };
	bool affine;
	size_t w[2], sc[2];
	int rc, want_bits, want_group;

	if (!f || !m)
		return fg_err_set(err, FG_EUSAGE, "fg_mlx_*: NULL format or module");
	switch (f->kind) {
	case FG_QF_MLX_AFFINE:
		want_bits = f->bits;
		want_group = f->group;
		break;
	case FG_QF_MLX_MXFP4:
		want_bits = 4;
		want_group = 32;
		break;
	case FG_QF_MLX_MXFP8:
		want_bits = 8;
		want_group = 32;
		break;
	case FG_QF_MLX_NVFP4:
		want_bits = 4;
		want_group = 16;
		break;
	default:
		return fg_err_set(err, FG_EUSAGE, "fg_mlx_*: not an MLX format");
	}
	affine = f->kind == FG_QF_MLX_AFFINE;
	if (!affine && ((f->bits && f->bits != want_bits) || (f->group && f->group != want_group)))
		return dq_refuse(err, f, "this MLX mode has bits=%d group=%d only", want_bits, want_group);
	g->bits = want_bits;
	g->group = want_group;
	if (affine && fg_quant_affine_check(0, 0, g->bits, g->group, err)) {
		char why[FG_ERR_MSG_MAX];

		snprintf(why, sizeof(why), "%s", err ? err->msg : "affine parameters");
		return dq_refuse(err, f, "%s", why);
	}
	rc = dq_only(mlx_fmt, m, allowed_affine, affine ? 3 : 2, err);
	if (!rc)
		rc = dq_need(mlx_fmt, m, FG_QR_WEIGHT, u32, 1, 2, w, err);
	if (!rc)
		rc = affine ? dq_need(mlx_fmt, m, FG_QR_SCALES, dq_param_dtypes, 3, 2, sc, err)
			    : dq_need(mlx_fmt, m, FG_QR_SCALES, u8, 1, 2, sc, err);
	if (rc)
		return rc;
	g->out = w[0];
	g->words = w[1];
	if (g->words > SIZE_MAX / 32 || g->words * 32 % (size_t)g->bits)
		return fg_err_set(err, FG_EINPUT, "%s: weight [%zu, %zu] does not hold whole %d-bit values", mlx_fmt,
				  w[0], w[1], g->bits);
	g->in = g->words * 32 / (size_t)g->bits;
	if (g->in % (size_t)g->group) {
		return fg_err_set(err, FG_EINPUT, "%s: weight [%zu, %zu] holds %zu columns, not a multiple of the group size %d",
				  mlx_fmt, w[0], w[1], g->in, g->group);
	}
	g->groups = g->in / (size_t)g->group;
	g->sdt = m->t[FG_QR_SCALES]->dtype;
	if (sc[0] != g->out || sc[1] != g->groups)
		return dq_mismatch(err, mlx_fmt, FG_QR_SCALES, m, FG_QR_WEIGHT, "[%zu, %zu] ([out, in/%d], in = %zu)",
				   g->out, g->groups, g->group, g->in);
	if (affine) {
		size_t bi[2];

		rc = dq_need(mlx_fmt, m, FG_QR_BIASES, &g->sdt, 1, 2, bi, err);
		if (rc)
			return rc;
		if (bi[0] != sc[0] || bi[1] != sc[1])
			return dq_mismatch(err, mlx_fmt, FG_QR_BIASES, m, FG_QR_SCALES, "[%zu, %zu] (the shape of scales)",
					   sc[0], sc[1]);
	}
	rc = dq_dims_fit(mlx_fmt, g->out, g->in, err);
	if (!rc)
		rc = dq_bias(mlx_fmt, m, g->out, err);
	return rc;
}

int fg_mlx_check(const struct fg_qformat *f, const struct fg_qmodule *m, struct fg_qdims *d,
		 struct fg_err *err)
{
	struct mlx_geom g;
	int rc = mlx_geom(f, m, &g, err);

	if (!rc && d) {
		d->out = g.out;
		d->in = g.in;
	}
	return rc;
}

/* quant.h's F32 dequantizer for affine / mxfp4 on `rows` rows of `cols` columns. */
static int mlx_quant_h(const struct fg_qformat *f, const struct mlx_geom *g, const unsigned char *w,
		       const unsigned char *sc, const unsigned char *bi, size_t rows, size_t cols,
		       float *out, struct fg_err *err)
{
	if (f->kind == FG_QF_MLX_AFFINE)
		return fg_dequant_affine_rows_dt(g->sdt, (const uint32_t *)(const void *)w, sc, bi, rows, cols,
						 g->bits, g->group, out, err);
	return fg_dequant_mxfp4_rows((const uint32_t *)(const void *)w, sc, rows, cols, out, err);
}

static int mlx_rows(const struct fg_qformat *f, const struct fg_qmodule *m, size_t row0,
		    size_t n_rows, struct dq_out o, struct fg_err *err)
{
	const unsigned char *w, *sc, *bi = NULL;
	struct mlx_geom g;
	size_t esz, i, r, c0;
	int rc;

	rc = mlx_geom(f, m, &g, err);
	if (!rc)
		rc = dq_band(mlx_fmt, g.out, row0, n_rows, o.p, err);
	if (rc || !n_rows || !g.in)
		return rc;
	rc = dq_data(mlx_fmt, m, FG_QR_WEIGHT, &w, err);
	if (!rc)
		rc = dq_data(mlx_fmt, m, FG_QR_SCALES, &sc, err);
	if (!rc && f->kind == FG_QF_MLX_AFFINE)
		rc = dq_data(mlx_fmt, m, FG_QR_BIASES, &bi, err);
	if (rc)
		return rc;
	esz = fg_dtype_size(g.sdt);
	if (f->kind == FG_QF_MLX_AFFINE) {
		rc = dq_scales_finite(mlx_fmt, m, FG_QR_SCALES, g.sdt, sc, row0 * g.groups, n_rows * g.groups,
				      g.groups, err);
		if (!rc)
			rc = dq_scales_finite(mlx_fmt, m, FG_QR_BIASES, g.sdt, bi, row0 * g.groups, n_rows * g.groups,
					      g.groups, err);
		if (rc)
			return rc;
	} else if (f->kind == FG_QF_MLX_MXFP4) {
		for (i = row0 * g.groups; i < (row0 + n_rows) * g.groups; i++)
			if (sc[i] == 0xff)
				return fg_err_set(err, FG_EINPUT, "%s: scales[%zu, %zu] is the E8M0 byte 0xff (NaN)", mlx_fmt,
						  i / g.groups, i % g.groups);
	}
	w += 4 * row0 * g.words;
	sc += esz * row0 * g.groups;
	if (bi)
		bi += esz * row0 * g.groups;
	if (f->kind == FG_QF_MLX_MXFP8)
		return mxfp8_raw((const uint32_t *)(const void *)w, sc, n_rows, g.in, o, err);
	if (f->kind == FG_QF_MLX_NVFP4)
		return nvfp4_raw((const uint32_t *)(const void *)w, sc, n_rows, g.in, o, err);
	if (!o.bf16)
		return mlx_quant_h(f, &g, w, sc, bi, n_rows, g.in, (float *)(void *)o.p, err);
	for (r = 0; r < n_rows; r++) {
		for (c0 = 0; c0 < g.in; c0 += CHUNK) {
			size_t len = g.in - c0 < CHUNK ? g.in - c0 : CHUNK, gi = r * g.groups + c0 / (size_t)g.group;
			float buf[CHUNK];

			rc = mlx_quant_h(f, &g, w + 4 * (r * g.words + c0 * (size_t)g.bits / 32), sc + esz * gi,
					 bi ? bi + esz * gi : NULL, 1, len, buf, err);
			if (rc)
				return rc;
			for (i = 0; i < len; i++)
				dq_put(o, r * g.in + c0 + i, buf[i]);
		}
	}
	return 0;
}

int fg_mlx_dequant_rows(const struct fg_qformat *f, const struct fg_qmodule *m, size_t row0,
			size_t n_rows, float *out, struct fg_err *err)
{
	return mlx_rows(f, m, row0, n_rows, (struct dq_out){ (unsigned char *)out, false }, err);
}

int fg_mlx_dequant_rows_bf16(const struct fg_qformat *f, const struct fg_qmodule *m, size_t row0,
			     size_t n_rows, uint16_t *out, struct fg_err *err)
{
	return mlx_rows(f, m, row0, n_rows, (struct dq_out){ (unsigned char *)out, true }, err);
}
