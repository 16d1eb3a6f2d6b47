/*
 * ctensors.c: compressed-tensors pack-quantized integer weights, and F8_E4M3
 * weights times a broadcast scale (compressed-tensors float-quantized,
 * ModelOpt FP8, DeepSeek block FP8), to the dense weight on bands of rows.
 *
 * pack-quantized (notes/quant-formats.md section 4, read from
 * compressed-tensors pack_quantized.py, helpers.py, forward.py at the
 * neuralmagic snapshot and at tag 0.18.0):
 *   - values are signed, v in [-2^(b-1), 2^(b-1) - 1], stored as
 *     u = v + 2^(b-1) (calculate_range; pack subtracts nothing else);
 *   - weight_packed I32 [out, words]: row o is W[o, :] packed LSB first.
 *     For 2, 4 and 8 bits, value c is at bits b * (c % (32/b)) of word
 *     c / (32/b) in every version.  For 3, 5, 6 and 7 bits, versions before
 *     0.18 put floor(32/b) values in each word and leave the top bits zero;
 *     0.18 ("CT support for humming") packs one continuous bitstream,
 *     ceil(in*b/32) words.  The row is padded with zeros and trimmed by
 *     weight_shape = [out, in] (I64 as saved; I32 accepted);
 *   - weight_zero_point (asymmetric only) holds the zero points, signed with
 *     the same offset, packed the same way along dim 0 (out): column g is the
 *     packed stream of zp[:, g];
 *   - the strategy follows weight_scale's shape: [1] tensor, [out, 1]
 *     channel, [out, G] group (G = ceil(in / group)); with weight_g_idx
 *     (actorder "group") the group of column c is g_idx[c], unless g_idx is
 *     all -1 (its initial value: unused);
 *   - W[o, c] = (q - zp) * s: q - zp is an integer of at most 9 bits, so the
 *     F32 product is exact for BF16 / F16 scales.
 *
 * F8_E4M3 weights (notes 5 and 8): W = e4m3(w) * s with s broadcast by
 * tensor, channel, group or block; DeepSeek's weight_scale_inv is the same
 * multiplier.  One F32 rounding of the product (exact for BF16 / F16 scales).
 */
#include "forge/format/quant/dequant.h"
#include "forge/format/quant/dq_internal.h"

#include <stdint.h>

/* ---- broadcasting a scale ------------------------------------------------------- */

struct bcast {
	enum fg_qscale kind;
	size_t group, b0, b1; /* group columns; block rows, columns */
	size_t cols;          /* columns of the scale tensor (1 for tensor / channel) */
};

static size_t bcast_index(const struct bcast *b, size_t o, size_t c)
{
	switch (b->kind) {
	case FG_QS_TENSOR:
		return 0;
	case FG_QS_CHANNEL:
		return o;
	case FG_QS_GROUP:
		return o * b->cols + c / b->group;
	case FG_QS_BLOCK:
		return o / b->b0 * b->cols + c / b->b1;
	}
	return 0;
}

/*
 * Check scale tensor role r against W [out, in] for f's strategy; fill b.
 * other names the tensor the mismatch message compares against.
 */
static int bcast_check(const char *fmt, const struct fg_qformat *f, const struct fg_qmodule *m,
		       enum fg_qrole r, enum fg_qrole other, size_t out, size_t in, struct bcast *b,
		       struct fg_err *err)
{
	const struct fg_tensor *t;
	size_t dims[FG_ST_MAX_RANK], n;
	int rc = dq_need(fmt, m, r, dq_param_dtypes, 3, -1, dims, err);

	if (rc)
		return rc;
	t = m->t[r];
	rc = dq_count(fmt, fg_qrole_suffix(r), t, &n, err);
	if (rc)
		return rc;
	b->kind = f->scale;
	b->group = b->b0 = b->b1 = 1;
	b->cols = 1;
	switch (f->scale) {
	case FG_QS_TENSOR:
		if (n != 1 || t->rank > 2)
			return dq_mismatch(err, fmt, r, m, other, "one value ([], [1] or [1, 1]) for strategy tensor");
		return 0;
	case FG_QS_CHANNEL:
		if (!((t->rank == 2 && dims[0] == out && dims[1] == 1) || (t->rank == 1 && dims[0] == out)))
			return dq_mismatch(err, fmt, r, m, other, "[%zu, 1] for strategy channel", out);
		return 0;
	case FG_QS_GROUP:
		if (f->group <= 0)
			return dq_refuse(err, f, "strategy group needs a group size > 0, not %d", f->group);
		b->group = (size_t)f->group;
		b->cols = dq_ceil_div(in, b->group);
		if (t->rank != 2 || dims[0] != out || dims[1] != b->cols)
			return dq_mismatch(err, fmt, r, m, other, "[%zu, %zu] for group %d of in = %zu", out, b->cols,
					   f->group, in);
		return 0;
	case FG_QS_BLOCK:
		if (f->block[0] <= 0 || f->block[1] <= 0)
			return dq_refuse(err, f, "strategy block needs block sizes > 0");
		b->b0 = (size_t)f->block[0];
		b->b1 = (size_t)f->block[1];
		b->cols = dq_ceil_div(in, b->b1);
		if (t->rank != 2 || dims[0] != dq_ceil_div(out, b->b0) || dims[1] != b->cols)
			return dq_mismatch(err, fmt, r, m, other, "[%zu, %zu], the %dx%d block grid of [%zu, %zu]",
					   dq_ceil_div(out, b->b0), b->cols, f->block[0], f->block[1], out, in);
		return 0;
	}
	return dq_refuse(err, f, "unknown scale strategy %d", (int)f->scale);
}

/* The scales rows [row0, row0 + n) use are finite. */
static int bcast_finite(const char *fmt, const struct fg_qmodule *m, enum fg_qrole r,
			const struct bcast *b, size_t row0, size_t n, struct fg_err *err)
{
	const struct fg_tensor *t = m->t[r];
	const unsigned char *p;
	size_t first, last;
	int rc = dq_data(fmt, m, r, &p, err);

	if (rc || !n)
		return rc;
	switch (b->kind) {
	case FG_QS_TENSOR:
		return dq_scales_finite(fmt, m, r, t->dtype, p, 0, 1, 0, err);
	case FG_QS_CHANNEL:
		return dq_scales_finite(fmt, m, r, t->dtype, p, row0, n, 1, err);
	case FG_QS_GROUP:
		return dq_scales_finite(fmt, m, r, t->dtype, p, row0 * b->cols, n * b->cols, b->cols, err);
	case FG_QS_BLOCK:
		first = row0 / b->b0;
		last = (row0 + n - 1) / b->b0;
		return dq_scales_finite(fmt, m, r, t->dtype, p, first * b->cols, (last - first + 1) * b->cols,
					b->cols, err);
	}
	return 0;
}

/* ---- pack-quantized ---------------------------------------------------------------- */

static const char ct_fmt[] = "compressed-tensors pack-quantized";

struct ct_geom {
	size_t out, in, words, zrows;
	bool padded; /* floor(32/b) values per word (bits 3, 5, 6, 7 before 0.18) */
	struct bcast sc;
};

/* Words of n values in the padded layout: floor(32/bits) per word. */
static size_t padded_words(size_t n, int bits)
{
	return dq_ceil_div(n, (size_t)(32 / bits));
}

/* Value k of a packed run (word j at base + j * stride). */
static uint32_t ct_get(const unsigned char *base, size_t stride, size_t k, int bits, bool padded)
{
	if (padded) {
		size_t pf = (size_t)(32 / bits);

		return (fg_load_u32(base + k / pf * stride) >> ((unsigned)bits * (unsigned)(k % pf))) &
		       ((1u << bits) - 1u);
	}
	return dq_stream(base, stride, k, bits);
}

/* weight_shape's two values. */
static int ct_weight_shape(const struct fg_qmodule *m, size_t *out, size_t *in, struct fg_err *err)
{
	static const enum fg_dtype dts[] = { FG_DT_I64, FG_DT_I32 };
	const struct fg_tensor *t;
	const unsigned char *p;
	size_t dim, v[2];
	int rc, i;

	rc = dq_need(ct_fmt, m, FG_QR_WEIGHT_SHAPE, dts, 2, 1, &dim, err);
	if (rc)
		return rc;
	t = m->t[FG_QR_WEIGHT_SHAPE];
	if (dim != 2)
		return dq_mismatch(err, ct_fmt, FG_QR_WEIGHT_SHAPE, m, FG_QR_WEIGHT_PACKED, "[2] ([out, in])");
	rc = dq_data(ct_fmt, m, FG_QR_WEIGHT_SHAPE, &p, err);
	if (rc)
		return rc;
	for (i = 0; i < 2; i++) {
		int64_t x;

		if (t->dtype == FG_DT_I64) {
			memcpy(&x, p + 8 * (size_t)i, 8);
		} else {
			int32_t y;

			memcpy(&y, p + 4 * (size_t)i, 4);
			x = y;
		}
		if (x < 0 || (uint64_t)x > SIZE_MAX)
			return fg_err_set(err, FG_EINPUT, "%s: weight_shape[%d] = %lld is not a dimension", ct_fmt, i,
					  (long long)x);
		v[i] = (size_t)x;
	}
	*out = v[0];
	*in = v[1];
	return 0;
}

static int ct_geom(const struct fg_qformat *f, const struct fg_qmodule *m, struct ct_geom *g,
		   struct fg_err *err)
{
	static const enum fg_qrole allowed[] = { FG_QR_WEIGHT_PACKED, FG_QR_WEIGHT_SHAPE, FG_QR_WEIGHT_SCALE,
						 FG_QR_WEIGHT_ZERO_POINT, FG_QR_WEIGHT_G_IDX };
	static const enum fg_dtype i32[] = { FG_DT_I32 };
	size_t wp[2], shape_out = 0, dense, padded;
	int bits, rc;

	if (!f || !m)
		return fg_err_set(err, FG_EUSAGE, "fg_ct_int_*: NULL format or module");
	if (f->kind != FG_QF_CT_INT)
		return fg_err_set(err, FG_EUSAGE, "fg_ct_int_*: not a compressed-tensors pack-quantized format");
	bits = f->bits;
	if (bits < 2 || bits > 8)
		return dq_refuse(err, f, "pack-quantized reads 2 to 8 bits");
	if (f->version < 0 || f->version > 2)
		return dq_refuse(err, f, "packing version %d", f->version);
	if (f->scale == FG_QS_BLOCK)
		return dq_refuse(err, f, "block strategy for packed integer weights is not specified in forged's notes");
	if (!f->sym && f->scale == FG_QS_TENSOR)
		return dq_refuse(err, f, "an asymmetric per-tensor zero point is not packed, and its layout is unconfirmed");
	rc = dq_only(ct_fmt, m, allowed, sizeof(allowed) / sizeof(allowed[0]), err);
	if (!rc)
		rc = dq_need(ct_fmt, m, FG_QR_WEIGHT_PACKED, i32, 1, 2, wp, err);
	if (!rc)
		rc = ct_weight_shape(m, &shape_out, &g->in, err);
	if (rc)
		return rc;
	g->out = wp[0];
	g->words = wp[1];
	if (shape_out != g->out)
		return fg_err_set(err, FG_EINPUT, "%s: weight_shape [%zu, %zu] does not fit weight_packed [%zu, %zu]: expected [%zu, in]",
				  ct_fmt, shape_out, g->in, wp[0], wp[1], g->out);
	rc = dq_dims_fit(ct_fmt, g->out, g->in, err);
	if (rc)
		return rc;
	dense = dq_stream_words(g->in, bits);
	padded = padded_words(g->in, bits);
	if (32 % bits == 0) {
		g->padded = false; /* the two layouts coincide */
		if (g->words != dense)
			goto bad_words;
	} else if (f->version == 2) {
		g->padded = false;
		if (g->words != dense)
			goto bad_words;
	} else if (f->version == 1) {
		g->padded = true;
		if (g->words != padded)
			goto bad_words;
	} else if (g->words == dense && g->words == padded) {
		/* One word holds every value: the layouts coincide; else ambiguous. */
		if (g->in > (size_t)(32 / bits))
			return dq_refuse(err, f,
					 "weight_packed [%zu, %zu] fits both the padded (< 0.18) and the bitstream (>= 0.18) packing of in = %zu, and the config gives no version",
					 wp[0], wp[1], g->in);
		g->padded = true;
	} else if (g->words == dense) {
		g->padded = false;
	} else if (g->words == padded) {
		g->padded = true;
	} else {
		goto bad_words;
	}
	rc = bcast_check(ct_fmt, f, m, FG_QR_WEIGHT_SCALE, FG_QR_WEIGHT_PACKED, g->out, g->in, &g->sc, err);
	if (rc)
		return rc;
	g->zrows = g->padded ? padded_words(g->out, bits) : dq_stream_words(g->out, bits);
	if (f->sym && m->t[FG_QR_WEIGHT_ZERO_POINT])
		return fg_err_set(err, FG_EINPUT, "%s: weight_zero_point is present but the format is symmetric", ct_fmt);
	if (!f->sym) {
		size_t zp[2];

		rc = dq_need(ct_fmt, m, FG_QR_WEIGHT_ZERO_POINT, i32, 1, 2, zp, err);
		if (rc)
			return rc;
		if (zp[0] != g->zrows || zp[1] != g->sc.cols)
			return dq_mismatch(err, ct_fmt, FG_QR_WEIGHT_ZERO_POINT, m, FG_QR_WEIGHT_SCALE,
					   "[%zu, %zu] (out = %zu packed along dim 0, one column per scale column)",
					   g->zrows, g->sc.cols, g->out);
	}
	if (f->act_order) {
		size_t n;

		rc = dq_need(ct_fmt, m, FG_QR_WEIGHT_G_IDX, i32, 1, 1, &n, err);
		if (rc)
			return rc;
		if (n != g->in)
			return dq_mismatch(err, ct_fmt, FG_QR_WEIGHT_G_IDX, m, FG_QR_WEIGHT_SHAPE, "[%zu] ([in])", g->in);
	} else if (m->t[FG_QR_WEIGHT_G_IDX]) {
		return fg_err_set(err, FG_EINPUT, "%s: weight_g_idx is present but the format has no act-order", ct_fmt);
	}
	return 0;
bad_words:
	if (32 % bits && !f->version)
		return dq_mismatch(err, ct_fmt, FG_QR_WEIGHT_PACKED, m, FG_QR_WEIGHT_SHAPE,
				   "[%zu, %zu] (bitstream) or [%zu, %zu] (padded) for in = %zu at %d bits", g->out,
				   dense, g->out, padded, g->in, bits);
	return dq_mismatch(err, ct_fmt, FG_QR_WEIGHT_PACKED, m, FG_QR_WEIGHT_SHAPE, "[%zu, %zu] for in = %zu at %d bits",
			   g->out, f->version == 1 && 32 % bits ? padded : dense, g->in, bits);
}

int fg_ct_int_check(const struct fg_qformat *f, const struct fg_qmodule *m, struct fg_qdims *d,
		    struct fg_err *err)
{
	struct ct_geom g;
	int rc = ct_geom(f, m, &g, err);

	if (!rc && d) {
		d->out = g.out;
		d->in = g.in;
	}
	return rc;
}

static int ct_rows(const struct fg_qformat *f, const struct fg_qmodule *m, size_t row0,
		   size_t n_rows, struct dq_out o, struct fg_err *err)
{
	const unsigned char *wp, *sc, *zp = NULL, *gi = NULL;
	enum fg_dtype sdt;
	struct ct_geom g;
	size_t r, c, ngroups;
	uint32_t mid;
	int rc;

	rc = ct_geom(f, m, &g, err);
	if (!rc)
		rc = dq_band(ct_fmt, g.out, row0, n_rows, o.p, err);
	if (rc || !n_rows || !g.in)
		return rc;
	rc = dq_data(ct_fmt, m, FG_QR_WEIGHT_PACKED, &wp, err);
	if (!rc)
		rc = dq_data(ct_fmt, m, FG_QR_WEIGHT_SCALE, &sc, err);
	if (!rc && !f->sym)
		rc = dq_data(ct_fmt, m, FG_QR_WEIGHT_ZERO_POINT, &zp, err);
	if (!rc && f->act_order)
		rc = dq_data(ct_fmt, m, FG_QR_WEIGHT_G_IDX, &gi, err);
	if (!rc)
		rc = bcast_finite(ct_fmt, m, FG_QR_WEIGHT_SCALE, &g.sc, row0, n_rows, err);
	if (rc)
		return rc;
	sdt = m->t[FG_QR_WEIGHT_SCALE]->dtype;
	ngroups = g.sc.kind == FG_QS_GROUP ? g.sc.cols : 1;
	if (gi) {
		size_t unused = 0;

		for (c = 0; c < g.in; c++) {
			int32_t v = (int32_t)dq_word(gi, c);

			if (v == -1)
				unused++;
			else if (v < 0 || (size_t)v >= ngroups)
				return fg_err_set(err, FG_EINPUT,
						  "%s: weight_g_idx[%zu] = %d is outside the %zu groups of weight_scale", ct_fmt,
						  c, (int)v, ngroups);
		}
		if (unused == g.in)
			gi = NULL; /* never filled in: groups are c / group */
		else if (unused)
			return fg_err_set(err, FG_EINPUT, "%s: weight_g_idx mixes -1 (unset) with group indices", ct_fmt);
	}
	mid = 1u << (f->bits - 1);
	for (r = 0; r < n_rows; r++) {
		const size_t oc = row0 + r;
		const unsigned char *row = wp + 4 * oc * g.words;

		for (c = 0; c < g.in; c++) {
			size_t si = gi && g.sc.kind == FG_QS_GROUP ? oc * g.sc.cols + (size_t)dq_word(gi, c)
									 : bcast_index(&g.sc, oc, c);
			uint32_t q = ct_get(row, 4, c, f->bits, g.padded);
			uint32_t z = mid;
			float s = dq_load_float(sdt, sc, si);

			if (zp)
				z = ct_get(zp + 4 * (si % g.sc.cols), 4 * g.sc.cols, oc, f->bits, g.padded);
			dq_put(o, r * g.in + c, (float)((int32_t)q - (int32_t)z) * s);
		}
	}
	return 0;
}

int fg_ct_int_dequant_rows(const struct fg_qformat *f, const struct fg_qmodule *m, size_t row0,
			   size_t n_rows, float *out, struct fg_err *err)
{
	return ct_rows(f, m, row0, n_rows, (struct dq_out){ (unsigned char *)out, false }, err);
}

int fg_ct_int_dequant_rows_bf16(const struct fg_qformat *f, const struct fg_qmodule *m,
				size_t row0, size_t n_rows, uint16_t *out, struct fg_err *err)
{
	return ct_rows(f, m, row0, n_rows, (struct dq_out){ (unsigned char *)out, true }, err);
}

/* ---- F8_E4M3 times a scale ----------------------------------------------------------- */

static const char fp8_fmt[] = "fp8";

struct fp8_geom {
	size_t out, in;
	enum fg_qrole role; /* weight_scale or weight_scale_inv */
	struct bcast sc;
};

static int fp8_geom(const struct fg_qformat *f, const struct fg_qmodule *m, struct fp8_geom *g,
		    struct fg_err *err)
{
	static const enum fg_qrole allowed[] = { FG_QR_WEIGHT, FG_QR_WEIGHT_SCALE, FG_QR_WEIGHT_SCALE_INV };
	static const enum fg_dtype e4m3[] = { FG_DT_F8_E4M3 };
	size_t w[2];
	int rc;

	if (!f || !m)
		return fg_err_set(err, FG_EUSAGE, "fg_fp8_scaled_*: NULL format or module");
	if (f->kind != FG_QF_FP8)
		return fg_err_set(err, FG_EUSAGE, "fg_fp8_scaled_*: not an FP8 format");
	if (f->bits != 8)
		return dq_refuse(err, f, "FP8 E4M3 codes are 8 bits, not %d", f->bits);
	rc = dq_only(fp8_fmt, m, allowed, sizeof(allowed) / sizeof(allowed[0]), err);
	if (!rc)
		rc = dq_need(fp8_fmt, m, FG_QR_WEIGHT, e4m3, 1, 2, w, err);
	if (rc)
		return rc;
	if (m->t[FG_QR_WEIGHT_SCALE] && m->t[FG_QR_WEIGHT_SCALE_INV])
		return fg_err_set(err, FG_EINPUT, "%s: both weight_scale and weight_scale_inv are present", fp8_fmt);
	if (!m->t[FG_QR_WEIGHT_SCALE] && !m->t[FG_QR_WEIGHT_SCALE_INV])
		return dq_refuse(err, f, "the F8_E4M3 weight has no weight_scale or weight_scale_inv");
	g->out = w[0];
	g->in = w[1];
	g->role = m->t[FG_QR_WEIGHT_SCALE] ? FG_QR_WEIGHT_SCALE : FG_QR_WEIGHT_SCALE_INV;
	rc = dq_dims_fit(fp8_fmt, g->out, g->in, err);
	if (!rc)
		rc = bcast_check(fp8_fmt, f, m, g->role, FG_QR_WEIGHT, g->out, g->in, &g->sc, err);
	if (!rc)
		rc = dq_bias(fp8_fmt, m, g->out, err);
	return rc;
}

int fg_fp8_scaled_check(const struct fg_qformat *f, const struct fg_qmodule *m, struct fg_qdims *d,
			struct fg_err *err)
{
	struct fp8_geom g;
	int rc = fp8_geom(f, m, &g, err);

	if (!rc && d) {
		d->out = g.out;
		d->in = g.in;
	}
	return rc;
}

static int fp8_rows(const struct fg_qformat *f, const struct fg_qmodule *m, size_t row0,
		    size_t n_rows, struct dq_out o, struct fg_err *err)
{
	const unsigned char *w, *sc;
	struct fp8_geom g;
	enum fg_dtype sdt;
	size_t r, c;
	int rc;

	rc = fp8_geom(f, m, &g, err);
	if (!rc)
		rc = dq_band(fp8_fmt, g.out, row0, n_rows, o.p, err);
	if (rc || !n_rows || !g.in)
		return rc;
	rc = dq_data(fp8_fmt, m, FG_QR_WEIGHT, &w, err);
	if (!rc)
		rc = dq_data(fp8_fmt, m, g.role, &sc, err);
	if (!rc)
		rc = bcast_finite(fp8_fmt, m, g.role, &g.sc, row0, n_rows, err);
	if (rc)
		return rc;
	sdt = m->t[g.role]->dtype;
	for (r = 0; r < n_rows; r++) {
		const size_t oc = row0 + r;

		for (c = 0; c < g.in; c++) {
			float s = dq_load_float(sdt, sc, bcast_index(&g.sc, oc, c));

			dq_put(o, r * g.in + c, fg_e4m3_to_f32_ref(w[oc * g.in + c]) * s);
		}
	}
	return 0;
}

int fg_fp8_scaled_dequant_rows(const struct fg_qformat *f, const struct fg_qmodule *m, size_t row0,
			       size_t n_rows, float *out, struct fg_err *err)
{
	return fp8_rows(f, m, row0, n_rows, (struct dq_out){ (unsigned char *)out, false }, err);
}

int fg_fp8_scaled_dequant_rows_bf16(const struct fg_qformat *f, const struct fg_qmodule *m,
				    size_t row0, size_t n_rows, uint16_t *out, struct fg_err *err)
{
	return fp8_rows(f, m, row0, n_rows, (struct dq_out){ (unsigned char *)out, true }, err);
}
