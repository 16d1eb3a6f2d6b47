/*
 * nvfp4.c: NVIDIA ModelOpt NVFP4 (quant_algo "NVFP4") to the dense weight, on
 * bands of rows.
 *
 * The rules (notes/quant-formats.md section 6, read from ModelOpt
 * nvfp4_tensor.py and unified_export_hf.py):
 *   - weight U8 [out, in/2]: two E2M1 codes per byte, the low nibble is the
 *     even column 2j, the high nibble the odd column 2j + 1;
 *   - weight_scale F8_E4M3 [out, in/16]: one scale per 16 columns;
 *   - weight_scale_2 F32 scalar (shape [] after export's squeeze; [1] accepted);
 *   - per block: se = f32(e4m3(weight_scale)) * weight_scale_2, rounded to
 *     F32 (ModelOpt computes per_block_scale first), then
 *     W = e2m1(code) * se, rounded to F32 again; then BF16.
 * E2M1 code 8 is decoded as -0 (see dequant.h): ModelOpt's own e2m1_values
 * table has +0 there, MLX and compressed-tensors keep the sign.  forged keeps
 * the sign like its mxfp4 path, so values compare equal to ModelOpt's and a
 * re-quantization to an FP4 mode writes code 8 back.
 * pre_quant_scale (NVFP4_AWQ and other AWQ-flavoured algorithms) would have
 * to be folded into W; that convention is derived, not read (notes 6.4), so
 * it is refused.
 */
#include "forge/format/quant/dequant.h"
#include "forge/format/quant/dq_internal.h"

#include <math.h>
#include <stdint.h>

static const char nv_fmt[] = "modelopt nvfp4";

#define NV_GROUP 16

struct nv_geom {
	size_t out, in, half, blocks;
};

static int nv_geom(const struct fg_qformat *f, const struct fg_qmodule *m, struct nv_geom *g,
		   struct fg_err *err)
{
	static const enum fg_qrole allowed[] = { FG_QR_WEIGHT, FG_QR_WEIGHT_SCALE, FG_QR_WEIGHT_SCALE_2 };
	static const enum fg_dtype u8[] = { FG_DT_U8 }, e4m3[] = { FG_DT_F8_E4M3 }, f32[] = { FG_DT_F32 };
	size_t w[2], sc[2], n;
	int rc;

	if (!f || !m)
		return fg_err_set(err, FG_EUSAGE, "fg_modelopt_nvfp4_*: NULL format or module");
	if (f->kind != FG_QF_NVFP4)
		return fg_err_set(err, FG_EUSAGE, "fg_modelopt_nvfp4_*: not an NVFP4 format");
	if (f->bits != 4)
		return dq_refuse(err, f, "NVFP4 codes are 4 bits, not %d", f->bits);
	if (f->group != 0 && f->group != NV_GROUP)
		return dq_refuse(err, f, "NVFP4 blocks are 16 columns, not %d", f->group);
	if (m->t[FG_QR_PRE_QUANT_SCALE])
		return dq_refuse(err, f,
				 "pre_quant_scale (an AWQ-style algorithm) would have to be folded into the weight, which forged does not do");
	rc = dq_only(nv_fmt, m, allowed, sizeof(allowed) / sizeof(allowed[0]), err);
	if (!rc)
		rc = dq_need(nv_fmt, m, FG_QR_WEIGHT, u8, 1, 2, w, err);
	if (!rc)
		rc = dq_need(nv_fmt, m, FG_QR_WEIGHT_SCALE, e4m3, 1, 2, sc, err);
	if (!rc)
		rc = dq_need(nv_fmt, m, FG_QR_WEIGHT_SCALE_2, f32, 1, -1, NULL, err);
	if (!rc)
		rc = dq_count(nv_fmt, "weight_scale_2", m->t[FG_QR_WEIGHT_SCALE_2], &n, err);
	if (rc)
		return rc;
	g->out = w[0];
	g->half = w[1];
	if (g->half > SIZE_MAX / 2)
		return fg_err_set(err, FG_EINPUT, "%s: weight is too large to address", nv_fmt);
	g->in = 2 * g->half;
	if (g->in % NV_GROUP)
		return fg_err_set(err, FG_EINPUT, "%s: weight [%zu, %zu] holds %zu columns, not a multiple of %d",
				  nv_fmt, w[0], w[1], g->in, NV_GROUP);
	g->blocks = g->in / NV_GROUP;
	if (sc[0] != g->out || sc[1] != g->blocks)
		return dq_mismatch(err, nv_fmt, FG_QR_WEIGHT_SCALE, m, FG_QR_WEIGHT, "[%zu, %zu] ([out, in/16], in = %zu)",
				   g->out, g->blocks, g->in);
	if (n != 1 || m->t[FG_QR_WEIGHT_SCALE_2]->rank > 1)
		return dq_mismatch(err, nv_fmt, FG_QR_WEIGHT_SCALE_2, m, FG_QR_WEIGHT, "a scalar ([] or [1])");
	rc = dq_dims_fit(nv_fmt, g->out, g->in, err);
	if (!rc)
		rc = dq_bias(nv_fmt, m, g->out, err);
	return rc;
}

int fg_modelopt_nvfp4_check(const struct fg_qformat *f, const struct fg_qmodule *m,
			    struct fg_qdims *d, struct fg_err *err)
{
	struct nv_geom g;
	int rc = nv_geom(f, m, &g, err);

	if (!rc && d) {
		d->out = g.out;
		d->in = g.in;
	}
	return rc;
}

static int nv_rows(const struct fg_qformat *f, const struct fg_qmodule *m, size_t row0,
		   size_t n_rows, struct dq_out o, struct fg_err *err)
{
	const unsigned char *w, *sc, *s2p;
	struct nv_geom g;
	size_t r, b, k, i;
	float s2;
	int rc;

	rc = nv_geom(f, m, &g, err);
	if (!rc)
		rc = dq_band(nv_fmt, g.out, row0, n_rows, o.p, err);
	if (rc || !n_rows || !g.in)
		return rc;
	rc = dq_data(nv_fmt, m, FG_QR_WEIGHT, &w, err);
	if (!rc)
		rc = dq_data(nv_fmt, m, FG_QR_WEIGHT_SCALE, &sc, err);
	if (!rc)
		rc = dq_data(nv_fmt, m, FG_QR_WEIGHT_SCALE_2, &s2p, err);
	if (rc)
		return rc;
	s2 = fg_load_f32(s2p);
	if (!isfinite(s2))
		return fg_err_set(err, FG_EINPUT, "%s: weight_scale_2 is not finite (%g)", nv_fmt, (double)s2);
	for (i = row0 * g.blocks; i < (row0 + n_rows) * g.blocks; i++)
		if ((sc[i] & 0x7f) == 0x7f)
			return fg_err_set(err, FG_EINPUT, "%s: weight_scale[%zu, %zu] is the E4M3 NaN code 0x%02x", nv_fmt,
					  i / g.blocks, i % g.blocks, sc[i]);
	for (r = 0; r < n_rows; r++) {
		const size_t oc = row0 + r;

		for (b = 0; b < g.blocks; b++) {
			const float se = fg_e4m3_to_f32_ref(sc[oc * g.blocks + b]) * s2;

			for (k = 0; k < NV_GROUP; k++) {
				const size_t c = b * NV_GROUP + k;
				const unsigned code = ((unsigned)w[oc * g.half + c / 2] >> (4 * (c & 1))) & 15u;

				dq_put(o, r * g.in + c, dq_e2m1(code) * se);
			}
		}
	}
	return 0;
}

int fg_modelopt_nvfp4_dequant_rows(const struct fg_qformat *f, const struct fg_qmodule *m,
				   size_t row0, size_t n_rows, float *out, struct fg_err *err)
{
	return nv_rows(f, m, row0, n_rows, (struct dq_out){ (unsigned char *)out, false }, err);
}

int fg_modelopt_nvfp4_dequant_rows_bf16(const struct fg_qformat *f, const struct fg_qmodule *m,
					size_t row0, size_t n_rows, uint16_t *out,
					struct fg_err *err)
{
	return nv_rows(f, m, row0, n_rows, (struct dq_out){ (unsigned char *)out, true }, err);
}
