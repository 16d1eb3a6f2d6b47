/*
 * gptq.c: GPTQ (AutoGPTQ, GPTQModel; quant_method "gptq") to the dense
 * weight, on bands of output rows.
 *
 * The rules (notes/quant-formats.md section 2, read from AutoGPTQ
 * qlinear_cuda_old.py and GPTQModel model_dequant.py):
 *   - qweight I32 [in*bits/32, out]: column o holds the codes of W[o, :] as an
 *     LSB-first bit stream down the rows (word r of the stream is
 *     qweight[r, o]); for 2, 4 and 8 bits that is code c at bits
 *     bits*(c % (32/bits)) of row c / (32/bits); for 3 bits AutoGPTQ's
 *     three-words-per-32-codes layout is the same 96-bit stream (notes 2.2).
 *   - qzeros I32 [G, out*bits/32]: row g is the stream of zero fields along
 *     out.  checkpoint_format "gptq" (v1) stores zero - 1, so
 *     z = (field + 1) & (2^bits - 1) (GPTQModel's rule; AutoGPTQ's newer
 *     kernel adds 1 after masking and differs for field 2^bits - 1 only);
 *     "gptq_v2" stores z.
 *   - scales [G, out] (F16 usually; BF16, F32 accepted).
 *   - g_idx I32 [in]: the group of input column c, always used (act-order
 *     permutes it; the weights stay in column order).  Missing g_idx means
 *     g = c / group.
 *   - W[o, c] = scales[g, o] * (q - z): the difference is an integer of at
 *     most 9 bits, so the F32 product is exact for F16 and BF16 scales.
 * Bits 5, 6 and 7 exist only as GPTQModel's "gptq_p" planar layout, which the
 * notes do not specify: refused.
 *
 * The loop runs over output rows and, inside, input columns, reading a
 * column of qweight with a stride of out words; that is cache-unfriendly for
 * wide layers but this reads a head once.
 */
#include "forge/format/quant/dequant.h"
#include "forge/format/quant/dq_internal.h"

#include <stdint.h>

static const char gptq_fmt[] = "gptq";

struct gptq_geom {
	size_t out, in, groups, qrows, zcols;
	enum fg_dtype sdt;
};

static int gptq_geom(const struct fg_qformat *f, const struct fg_qmodule *m, struct gptq_geom *g,
		     struct fg_err *err)
{
	static const enum fg_qrole allowed[] = { FG_QR_QWEIGHT, FG_QR_QZEROS, FG_QR_SCALES, FG_QR_G_IDX };
	static const enum fg_dtype i32[] = { FG_DT_I32 };
	size_t qw[2], sc[2], qz[2], gi = 0;
	int bits = f->bits, rc;

	if (f->kind != FG_QF_GPTQ)
		return fg_err_set(err, FG_EUSAGE, "fg_gptq_*: not a GPTQ format");
	if (bits >= 5 && bits <= 7)
		return dq_refuse(err, f, "%d-bit GPTQ is GPTQModel's planar layout (gptq_p), which forged does not read",
				 bits);
	if (bits != 2 && bits != 3 && bits != 4 && bits != 8)
		return dq_refuse(err, f, "GPTQ has no %d-bit layout (2, 3, 4 or 8 bits)", bits);
	if (f->version != 1 && f->version != 2)
		return dq_refuse(err, f, "checkpoint format version %d is neither gptq (1) nor gptq_v2 (2)",
				 f->version);
	if (f->group < 0)
		return dq_refuse(err, f, "group size %d", f->group);
	rc = dq_only(gptq_fmt, m, allowed, sizeof(allowed) / sizeof(allowed[0]), err);
	if (!rc)
		rc = dq_need(gptq_fmt, m, FG_QR_QWEIGHT, i32, 1, 2, qw, err);
	if (!rc)
		rc = dq_need(gptq_fmt, m, FG_QR_SCALES, dq_param_dtypes, 3, 2, sc, err);
	if (!rc)
		rc = dq_need(gptq_fmt, m, FG_QR_QZEROS, i32, 1, 2, qz, err);
	if (!rc && m->t[FG_QR_G_IDX])
		rc = dq_need(gptq_fmt, m, FG_QR_G_IDX, i32, 1, 1, &gi, err);
	if (rc)
		return rc;
	g->qrows = qw[0];
	g->out = qw[1];
	g->groups = sc[0];
	g->zcols = qz[1];
	g->sdt = m->t[FG_QR_SCALES]->dtype;
	if (sc[1] != g->out)
		return dq_mismatch(err, gptq_fmt, FG_QR_SCALES, m, FG_QR_QWEIGHT, "[G, %zu] ([G, out])", g->out);
	if (g->out % 32 * (size_t)bits % 32)
		return fg_err_set(err, FG_EINPUT,
				  "%s: qweight [%zu, %zu]: %zu output columns do not fill whole qzeros words at %d bits",
				  gptq_fmt, g->qrows, g->out, g->out, bits);
	if (qz[0] != g->groups || qz[1] != dq_stream_words(g->out, bits))
		return dq_mismatch(err, gptq_fmt, FG_QR_QZEROS, m, FG_QR_SCALES, "[%zu, %zu] ([G, out*%d/32])",
				   g->groups, dq_stream_words(g->out, bits), bits);
	if (g->qrows > SIZE_MAX / 32)
		return fg_err_set(err, FG_EINPUT, "%s: qweight [%zu, %zu] is too large to address", gptq_fmt,
				  g->qrows, g->out);
	if (m->t[FG_QR_G_IDX]) {
		g->in = gi;
		if (g->in % 32 * (size_t)bits % 32 || dq_stream_words(g->in, bits) != g->qrows)
			return dq_mismatch(err, gptq_fmt, FG_QR_QWEIGHT, m, FG_QR_G_IDX,
					   "in*%d/32 rows for in = %zu input columns, in a multiple of %d", bits,
					   g->in, bits == 3 ? 32 : 32 / bits);
	} else {
		if (g->qrows * 32 % (size_t)bits)
			return fg_err_set(err, FG_EINPUT,
					  "%s: qweight [%zu, %zu] does not hold a whole number of %d-bit codes per column",
					  gptq_fmt, g->qrows, g->out, bits);
		g->in = g->qrows * 32 / (size_t)bits;
	}
	if (f->group > 0 ? g->groups != dq_ceil_div(g->in, (size_t)f->group) : g->groups != 1)
		return dq_mismatch(err, gptq_fmt, FG_QR_SCALES, m, FG_QR_QWEIGHT,
				   "%zu groups for in = %zu at group size %d",
				   f->group > 0 ? dq_ceil_div(g->in, (size_t)f->group) : (size_t)1, g->in,
				   f->group > 0 ? f->group : -1);
	rc = dq_dims_fit(gptq_fmt, g->out, g->in, err);
	if (!rc)
		rc = dq_bias(gptq_fmt, m, g->out, err);
	return rc;
}

int fg_gptq_check(const struct fg_qformat *f, const struct fg_qmodule *m, struct fg_qdims *d,
		  struct fg_err *err)
{
	struct gptq_geom g;
	int rc;

	if (!f || !m)
		return fg_err_set(err, FG_EUSAGE, "fg_gptq_check: NULL format or module");
	rc = gptq_geom(f, m, &g, err);
	if (!rc && d) {
		d->out = g.out;
		d->in = g.in;
	}
	return rc;
}

static int gptq_rows(const struct fg_qformat *f, const struct fg_qmodule *m, size_t row0,
		     size_t n_rows, struct dq_out o, struct fg_err *err)
{
	const unsigned char *qw, *qz, *sc, *gi = NULL;
	struct gptq_geom g;
	uint32_t mask;
	size_t r, c, i;
	int rc;

	if (!f || !m)
		return fg_err_set(err, FG_EUSAGE, "fg_gptq_dequant_rows: NULL format or module");
	rc = gptq_geom(f, m, &g, err);
	if (!rc)
		rc = dq_band(gptq_fmt, g.out, row0, n_rows, o.p, err);
	if (rc || !n_rows || !g.in)
		return rc;
	mask = (1u << f->bits) - 1u;
	rc = dq_data(gptq_fmt, m, FG_QR_QWEIGHT, &qw, err);
	if (!rc)
		rc = dq_data(gptq_fmt, m, FG_QR_QZEROS, &qz, err);
	if (!rc)
		rc = dq_data(gptq_fmt, m, FG_QR_SCALES, &sc, err);
	if (!rc && m->t[FG_QR_G_IDX])
		rc = dq_data(gptq_fmt, m, FG_QR_G_IDX, &gi, err);
	if (rc)
		return rc;
	if (gi) {
		for (c = 0; c < g.in; c++) {
			int32_t v = (int32_t)dq_word(gi, c);

			if (v < 0 || (size_t)v >= g.groups)
				return fg_err_set(err, FG_EINPUT, "%s: g_idx[%zu] = %d is outside the %zu groups of scales",
						  gptq_fmt, c, (int)v, g.groups);
		}
	}
	for (i = 0; i < g.groups; i++) {
		rc = dq_scales_finite(gptq_fmt, m, FG_QR_SCALES, g.sdt, sc, i * g.out + row0, n_rows, g.out, err);
		if (rc)
			return rc;
	}
	for (r = 0; r < n_rows; r++) {
		const size_t oc = row0 + r;

		for (c = 0; c < g.in; c++) {
			size_t grp = gi ? (size_t)dq_word(gi, c) : f->group > 0 ? c / (size_t)f->group : 0;
			uint32_t q = dq_stream(qw + 4 * oc, 4 * g.out, c, f->bits);
			uint32_t z = dq_stream(qz + 4 * grp * g.zcols, 4, oc, f->bits);
			float s = dq_load_float(g.sdt, sc, grp * g.out + oc);

			if (f->version == 1)
				z = (z + 1u) & mask;
			dq_put(o, r * g.in + c, s * (float)((int32_t)q - (int32_t)z));
		}
	}
	return 0;
}

int fg_gptq_dequant_rows(const struct fg_qformat *f, const struct fg_qmodule *m, size_t row0,
			 size_t n_rows, float *out, struct fg_err *err)
{
	return gptq_rows(f, m, row0, n_rows, (struct dq_out){ (unsigned char *)out, false }, err);
}

int fg_gptq_dequant_rows_bf16(const struct fg_qformat *f, const struct fg_qmodule *m, size_t row0,
			      size_t n_rows, uint16_t *out, struct fg_err *err)
{
	return gptq_rows(f, m, row0, n_rows, (struct dq_out){ (unsigned char *)out, true }, err);
}
