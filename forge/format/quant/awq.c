/*
 * awq.c: AutoAWQ GEMM (quant_method "awq", version "gemm") to the dense
 * weight, on bands of output rows.
 *
 * The rules (notes/quant-formats.md section 3, read from AutoAWQ gemm.py and
 * packing_utils.py):
 *   - qweight I32 [in, out/8]: packed along out, eight 4-bit codes per word,
 *     interleaved: nibble i (bits 4i..4i+3) of word j holds output column
 *     8j + [0,2,4,6,1,3,5,7][i], so column 8j + k is nibble [0,4,1,5,2,6,3,7][k];
 *   - qzeros I32 [G, out/8], the same packing; the zero is the field itself
 *     (no v1-style offset; a zero of 0 is possible);
 *   - scales [G, out] (F16; BF16 and F32 accepted), G = in / group, and
 *     group c / group for input column c (AWQ has no g_idx);
 *   - W[o, c] = scales[g, o] * (q - z), exact in F32 for F16 / BF16 scales.
 * Only 4 bits exist for GEMM (gemm.py asserts it).  GEMV, GEMV_fast, marlin
 * and the other kernels' layouts differ and are refused by the caller's
 * detection (fg_qformat_detect); a GEMM file without qzeros is not one
 * AutoAWQ writes, and is refused here.
 */
#include "forge/format/quant/dequant.h"
#include "forge/format/quant/dq_internal.h"

#include <stdint.h>

static const char awq_fmt[] = "awq";

/* Nibble that holds column 8j + k of word j. */
static const unsigned awq_nibble[8] = { 0, 4, 1, 5, 2, 6, 3, 7 };

struct awq_geom {
	size_t out, in, groups, group, words;
	enum fg_dtype sdt;
};

static int awq_geom(const struct fg_qformat *f, const struct fg_qmodule *m, struct awq_geom *g,
		    struct fg_err *err)
{
	static const enum fg_qrole allowed[] = { FG_QR_QWEIGHT, FG_QR_QZEROS, FG_QR_SCALES };
	static const enum fg_dtype i32[] = { FG_DT_I32 };
	size_t qw[2], qz[2], sc[2];
	int rc;

	if (!f || !m)
		return fg_err_set(err, FG_EUSAGE, "fg_awq_*: NULL format or module");
	if (f->kind != FG_QF_AWQ)
		return fg_err_set(err, FG_EUSAGE, "fg_awq_*: not an AWQ format");
	if (f->bits != 4)
		return dq_refuse(err, f, "AutoAWQ GEMM packs 4-bit codes only");
	if (f->group < 0)
		return dq_refuse(err, f, "group size %d", f->group);
	if (!m->t[FG_QR_QZEROS] && m->t[FG_QR_QWEIGHT])
		return dq_refuse(err, f, "qzeros is missing (AutoAWQ's GEMM layout always has zero points)");
	rc = dq_only(awq_fmt, m, allowed, sizeof(allowed) / sizeof(allowed[0]), err);
	if (!rc)
		rc = dq_need(awq_fmt, m, FG_QR_QWEIGHT, i32, 1, 2, qw, err);
	if (!rc)
		rc = dq_need(awq_fmt, m, FG_QR_QZEROS, i32, 1, 2, qz, err);
	if (!rc)
		rc = dq_need(awq_fmt, m, FG_QR_SCALES, dq_param_dtypes, 3, 2, sc, err);
	if (rc)
		return rc;
	g->in = qw[0];
	g->words = qw[1];
	g->groups = sc[0];
	g->sdt = m->t[FG_QR_SCALES]->dtype;
	if (g->words > SIZE_MAX / 8)
		return fg_err_set(err, FG_EINPUT, "%s: qweight [%zu, %zu] is too large to address", awq_fmt, g->in,
				  g->words);
	g->out = g->words * 8;
	if (sc[1] != g->out)
		return dq_mismatch(err, awq_fmt, FG_QR_SCALES, m, FG_QR_QWEIGHT, "[G, %zu] ([G, out], out = 8 * %zu)",
				   g->out, g->words);
	if (qz[0] != g->groups || qz[1] != g->words)
		return dq_mismatch(err, awq_fmt, FG_QR_QZEROS, m, FG_QR_SCALES, "[%zu, %zu] ([G, out/8])",
				   g->groups, g->words);
	if (!g->groups || g->in % g->groups)
		return dq_mismatch(err, awq_fmt, FG_QR_SCALES, m, FG_QR_QWEIGHT,
				   "a group count dividing in = %zu", g->in);
	g->group = g->in / g->groups;
	if (f->group > 0 ? g->group != (size_t)f->group : g->groups != 1)
		return dq_mismatch(err, awq_fmt, FG_QR_SCALES, m, FG_QR_QWEIGHT,
				   "%zu groups for in = %zu at group size %d",
				   f->group > 0 ? dq_ceil_div(g->in, (size_t)f->group) : (size_t)1, g->in,
				   f->group > 0 ? f->group : -1);
	rc = dq_dims_fit(awq_fmt, g->out, g->in, err);
	if (!rc)
		rc = dq_bias(awq_fmt, m, g->out, err);
	return rc;
}

int fg_awq_check(const struct fg_qformat *f, const struct fg_qmodule *m, struct fg_qdims *d,
		 struct fg_err *err)
{
	struct awq_geom g;
	int rc = awq_geom(f, m, &g, err);

	if (!rc && d) {
		d->out = g.out;
		d->in = g.in;
	}
	return rc;
}

static int awq_rows(const struct fg_qformat *f, const struct fg_qmodule *m, size_t row0,
		    size_t n_rows, struct dq_out o, struct fg_err *err)
{
	const unsigned char *qw, *qz, *sc;
	struct awq_geom g;
	size_t r, c, i;
	int rc;

	rc = awq_geom(f, m, &g, err);
	if (!rc)
		rc = dq_band(awq_fmt, g.out, row0, n_rows, o.p, err);
	if (rc || !n_rows || !g.in)
		return rc;
	rc = dq_data(awq_fmt, m, FG_QR_QWEIGHT, &qw, err);
	if (!rc)
		rc = dq_data(awq_fmt, m, FG_QR_QZEROS, &qz, err);
	if (!rc)
		rc = dq_data(awq_fmt, m, FG_QR_SCALES, &sc, err);
	for (i = 0; !rc && i < g.groups; i++)
		rc = dq_scales_finite(awq_fmt, m, FG_QR_SCALES, g.sdt, sc, i * g.out + row0, n_rows, g.out, err);
	if (rc)
		return rc;
	for (r = 0; r < n_rows; r++) {
		const size_t oc = row0 + r, word = oc / 8;
		const unsigned sh = 4 * awq_nibble[oc % 8];

		for (c = 0; c < g.in; c++) {
			const size_t grp = c / g.group;
			uint32_t q = (dq_word(qw, c * g.words + word) >> sh) & 15u;
			uint32_t z = (dq_word(qz, grp * g.words + word) >> sh) & 15u;
			float s = dq_load_float(g.sdt, sc, grp * g.out + oc);

			dq_put(o, r * g.in + c, s * (float)((int32_t)q - (int32_t)z));
		}
	}
	return 0;
}

int fg_awq_dequant_rows(const struct fg_qformat *f, const struct fg_qmodule *m, size_t row0,
			size_t n_rows, float *out, struct fg_err *err)
{
	return awq_rows(f, m, row0, n_rows, (struct dq_out){ (unsigned char *)out, false }, err);
}

int fg_awq_dequant_rows_bf16(const struct fg_qformat *f, const struct fg_qmodule *m, size_t row0,
			     size_t n_rows, uint16_t *out, struct fg_err *err)
{
	return awq_rows(f, m, row0, n_rows, (struct dq_out){ (unsigned char *)out, true }, err);
}
