/*
 * mxfp4.c: MLX mxfp4 quantization and dequantization on bands of rows (E2M1
 * values with an E8M0 scale per 32): the reference kernel, the fast scalar
 * kernel, the row drivers, and the dequantizer (plain C: it checks an
 * artifact, not the hot path).  The AVX2 and AVX-512 kernels are in
 * mxfp4_x86.c; kernels.c puts each kernel in its kernel set.
 *
 * Where the definition comes from (read in ml-explore/mlx, commit 846d176,
 * August 2026).  MLX has three implementations that do not agree.  (1) The
 * Metal kernel fp_quantize (mlx/backend/metal/kernels/fp_quantized.h, fp4.h,
 * fp8.h), what mlx-lm runs on a Mac, and the CPU helpers to_fp8_e8m0 and
 * to_fp4_e2m1 in mlx/backend/cpu/quantized.cpp: d = amax / 6 in float,
 * exponent round(log2(d)) with round() half away from zero, clamped to
 * [-127, 127], stored +127; values w * (1 / 2^e) (a product with the
 * reciprocal, exact for a power of two) through comparisons that are
 * round-to-nearest-even on the code (> 0.25, >= 0.75, > 1.25, >= 1.75,
 * > 2.5, >= 3.5, > 5), keeping the sign bit.  (2) The CPU path of
 * mx.quantize is the op graph in mlx/ops.cpp fp_quantize(): the same steps
 * in the source dtype (a BF16 input rounds d and log2(d) to BF16), round()
 * half to even, d == 0 gives exponent 0 (byte 127) instead of byte 0, and
 * values by argmin over the code table, so ties go to the smaller magnitude
 * and a small negative value becomes +0, never -0.  (3) CUDA converts
 * through cutlass's float_ue8m0_t.  forged implements (1).  Its log2 is
 * evaluated in float; we take the correctly rounded float log2 (log2 in
 * double, then rounded to float) so the result does not depend on a libm: a
 * faithful-but-not-correct log2f can move a value within an ulp or two of
 * 2^(k + 1/2) to the other exponent.  For d = 0, Metal's log2 gives -inf,
 * which converts to the most negative integer and clamps to -127: byte 0.
 *
 * Layers, as in affine.c.  The reference (fg_qk_mxfp4_ref, behind the _ref
 * functions) is that definition written out: a division, a log2, a chain of
 * seven comparisons per value.  The fast kernels reach the same bits from
 * the float bits instead (both tricks are exact, and tests/unit/test_quant.c
 * compares them with the reference on every BF16 and F16 value and around
 * every threshold):
 *   - the scale byte from amax's exponent and one compare of its mantissa
 *     against a per-exponent threshold (fg_qk_e8m0_from_amax, kernels.h);
 *   - the code of y = w * 2^(127 - byte) by one float addition that rounds
 *     |y| to the E2M1 step of its binade (e2m1_fast below).
 * The scalar set runs the fast scalar kernel; the vector sets run
 * mxfp4_x86.c's, which use the same two tricks sixteen (eight) lanes at a
 * time (AVX-512 codes BF16 from its 16-bit patterns by a table instead of
 * the addition, 32 lanes at a time).
 */
#include "forge/format/quant/quant.h"
#include "forge/format/quant/kernels.h"
#include "forge/core/bytes.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* ---- the reference --------------------------------------------------------------- */

/* E2M1 magnitudes by code. */
static const float e2m1_values[8] = { 0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f };

/* Midpoints between consecutive E2M1 magnitudes: a magnitude above
 * e2m1_mid[k] rounds to code k + 1 or higher; one equal to it goes up only
 * when k + 1 is even (ties to the even code).  This is the comparison chain
 * of MLX's fp4_e2m1 written as data. */
static const float e2m1_mid[7] = { 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f };

/* x not NaN; magnitudes past 6 saturate to code 7. */
static uint8_t e2m1_encode(float x)
{
	float a = fabsf(x);
	uint8_t code = 0;
	int k;

	for (k = 0; k < 7; k++)
		if (a > e2m1_mid[k] || (a == e2m1_mid[k] && (k + 1) % 2 == 0))
			code = (uint8_t)(k + 1);
	return (uint8_t)(code | (signbit(x) ? 8 : 0));
}

/*
 * E8M0 byte of a finite d >= 0: 127 + round(log2 d), half away from zero,
 * clamped to [-127, 127].  MLX takes log2 in float, so log2 d is rounded to
 * F32 before round(); we round the double log2, which is the correctly
 * rounded float log2 (test_e8m0_log2_margin checks the double is never near
 * a float midpoint where it matters), so no libm's last bit can change the
 * byte.  d == 0 gives byte 0 (Metal: log2 is -inf, converted and clamped to
 * -127).
 */
static uint8_t e8m0_encode(float d)
{
	float l, n;

	if (d == 0.0f)
		return 0;
	l = (float)log2((double)d);
	n = roundf(l);
	if (n < -127.0f)
		n = -127.0f;
	if (n > 127.0f)
		n = 127.0f;
	return (uint8_t)(int)(n + 127.0f);
}

/* 2^(b - 127); b == 0 is 2^-127 (a subnormal), b == 255 is infinity. */
static float e8m0_decode(uint8_t b)
{
	return fg_bits_f32(b ? (uint32_t)b << 23 : 0x00400000u);
}

/* One group of 32 finite F32 values to four words and a scale byte. */
static void mxfp4_group(const float *x, unsigned char *packed, uint8_t *scale)
{
	float amax = 0.0f, enc;
	uint8_t e;
	int k, i;

	for (k = 0; k < FG_MXFP4_GROUP; k++)
		if (fabsf(x[k]) > amax)
			amax = fabsf(x[k]);
	e = e8m0_encode(amax / 6.0f);
	enc = 1.0f / e8m0_decode(e);
	*scale = e;
	for (k = 0; k < FG_MXFP4_GROUP / 8; k++) {
		uint32_t word = 0;

		for (i = 0; i < 8; i++)
			word |= (uint32_t)e2m1_encode(x[8 * k + i] * enc) << (4 * i);
		fg_store_u32(packed + 4 * (size_t)k, word);
	}
}

/*
 * The reference kernel (the contract is in kernels.h): each group widened with
 * dtype.c's reference, checked, and quantized by mxfp4_group.
 */
int fg_qk_mxfp4_ref(enum fg_dtype dt, const unsigned char *src, size_t n_groups, unsigned char *packed,
		    uint8_t *scales, size_t *bad)
{
	const size_t esz = fg_dtype_size(dt);
	float x[FG_MXFP4_GROUP];
	size_t g;
	int k;

	for (g = 0; g < n_groups; g++) {
		fg_dtype_to_f32_ref(dt, src + g * FG_MXFP4_GROUP * esz, x, FG_MXFP4_GROUP);
		for (k = 0; k < FG_MXFP4_GROUP; k++) {
			if (!isfinite(x[k])) {
				*bad = g * FG_MXFP4_GROUP + (size_t)k;
				return FG_QK_ROW_NONFINITE;
			}
		}
		mxfp4_group(x, packed + 16 * g, scales + g);
	}
	return 0;
}

/* ---- the fast scalar kernel ------------------------------------------------------- */

/* Table entries repeated 1, 2, 4, ... times (the runs of equal thresholds). */
#define UP1(t) t,
#define UP2(t) UP1(t) UP1(t)
#define UP4(t) UP2(t) UP2(t)
#define UP8(t) UP4(t) UP4(t)
#define UP16(t) UP8(t) UP8(t)
#define UP32(t) UP16(t) UP16(t)
#define NEVER 0x800000u

/*
 * fg_qk_e8m0_from_amax's thresholds (kernels.h), by amax's biased exponent.
 * They are the first mantissa at which e8m0_encode(amax / 6.0f) goes up,
 * found by bisection on the reference (which is monotonic in amax) once and
 * written down; the runs are as long as the F32 steps of log2(amax / 6) near
 * the half-integer stay the same, so they double with the distance from
 * exponent 0.  test_quant.c checks the table against the reference.
 */
const uint32_t fg_qk_e8m0_up[] = {
	UP2(NEVER) UP1(NEVER)                                   /* be 0-2: byte 0 */
	UP1(0x07c3cfu)                                          /* be 3 */
	UP32(0x07c3ceu) UP16(0x07c3ceu) UP8(0x07c3ceu) UP4(0x07c3ceu) UP2(0x07c3ceu) /* 4-65 */
	UP32(0x07c3c2u)                                         /* be 66-97 */
	UP16(0x07c3bdu)                                         /* be 98-113 */
	UP8(0x07c3bau)                                          /* be 114-121 */
	UP4(0x07c3b9u)                                          /* be 122-125 */
	UP2(0x07c3b8u)                                          /* be 126-127 */
	UP2(0x07c3b7u) UP1(0x07c3b7u)                           /* be 128-130 */
	UP4(0x07c3b6u) UP2(0x07c3b6u) UP1(0x07c3b6u)            /* be 131-137 */
	UP8(0x07c3b4u)                                          /* be 138-145 */
	UP16(0x07c3b1u)                                         /* be 146-161 */
	UP32(0x07c3abu)                                         /* be 162-193 */
	UP32(0x07c39fu) UP16(0x07c39fu) UP8(0x07c39fu) UP4(0x07c39fu) UP1(0x07c39fu) /* 194-254 */
	UP1(NEVER)                                              /* be 255: not finite */
};
_Static_assert(sizeof(fg_qk_e8m0_up) == 256 * sizeof(uint32_t), "one threshold per biased exponent");

/*
 * The E2M1 code of y (not NaN) from its bits, as e2m1_encode computes it.
 * The E2M1 magnitudes are evenly spaced within each binade of |y|: steps of
 * 0.5 below 2 (0, 0.5, 1, 1.5, 2), of 1 in [2, 4), of 2 in [4, 8), and the
 * reference's comparisons are exactly round-to-nearest-even onto those steps
 * (the even code is the even multiple of the step).  Adding the magic
 * M = 2^(22 + j), j = max(0, floor(log2 |y|)), to |y| rounds it, in the one
 * rounding of the float addition, to a multiple of 2^(j - 1), the spacing of
 * floats in [M, 2M): the sum's bits minus M's are q = |y| / 2^(j - 1)
 * rounded half to even, and the code is q + 2j (j = 0: q is the code;
 * j = 1, 2: q is 2..4 and the code 4..6, 6..8).  |y| is first clamped to
 * 6 (code 7), which makes that saturation and keeps the trick away from
 * large exponents.  2j is (M >> 22) - 298.  The sign is y's.  No value is
 * compared, so nothing branches; the vector kernels compute the same steps
 * lane-wise.
 */
static inline uint32_t e2m1_fast(uint32_t y)
{
	uint32_t u = y & 0x7fffffffu, e, m, s;

	if (u > 0x40c00000u) /* 6.0f */
		u = 0x40c00000u;
	e = u & 0x7f800000u;
	m = (e > 0x3f800000u ? e : 0x3f800000u) + (22u << 23);
	s = fg_f32_bits(fg_bits_f32(u) + fg_bits_f32(m));
	return (s - m + (m >> 22) - 298u) | ((y >> 28) & 8u);
}

/* The fast scalar kernel: amax as the largest magnitude's bits, the scale
 * byte by fg_qk_e8m0_from_amax, the codes by e2m1_fast. */
int fg_qk_mxfp4_scalar(enum fg_dtype dt, const unsigned char *src, size_t n_groups,
		       unsigned char *packed, uint8_t *scales, size_t *bad)
{
	const size_t esz = fg_dtype_size(dt);
	float x[FG_MXFP4_GROUP];
	uint32_t u[FG_MXFP4_GROUP];
	size_t g;
	int k, i;

	for (g = 0; g < n_groups; g++) {
		uint32_t amax = 0;
		unsigned byte;
		float enc;

		fg_dtype_to_f32(dt, src + g * FG_MXFP4_GROUP * esz, x, FG_MXFP4_GROUP);
		memcpy(u, x, sizeof(u));
		for (k = 0; k < FG_MXFP4_GROUP; k++) {
			uint32_t a = u[k] & 0x7fffffffu;

			amax = a > amax ? a : amax;
		}
		if (amax >= 0x7f800000u) {
			for (k = 0; (u[k] & 0x7fffffffu) < 0x7f800000u; k++)
				;
			*bad = g * FG_MXFP4_GROUP + (size_t)k;
			return FG_QK_ROW_NONFINITE;
		}
		byte = fg_qk_e8m0_from_amax(amax);
		enc = fg_bits_f32(FG_QK_MXFP4_ENC_BITS(byte));
		scales[g] = (uint8_t)byte;
		for (k = 0; k < FG_MXFP4_GROUP / 8; k++) {
			uint32_t word = 0;

			for (i = 0; i < 8; i++)
				word |= e2m1_fast(fg_f32_bits(x[8 * k + i] * enc)) << (4 * i);
			fg_store_u32(packed + 16 * g + 4 * (size_t)k, word);
		}
	}
	return 0;
}

/* ---- row drivers -------------------------------------------------------------------- */

static int mxfp4_check(const char *what, size_t rows, size_t cols, struct fg_err *err)
{
	if (cols % FG_MXFP4_GROUP)
		return fg_err_set(err, FG_EINPUT,
				  "%s: weight [%zu, %zu] has %zu columns, not a multiple of the group size %d",
				  what, rows, cols, cols, FG_MXFP4_GROUP);
	return fg_qk_check_size(what, rows, cols, 4, err);
}

int fg_qk_mxfp4_check_all(enum fg_dtype dt, const void *w, size_t rows, size_t cols,
			  const void *packed, const void *scales, struct fg_err *err)
{
	int rc;

	if (!fg_qk_dtype_is_param(dt))
		return fg_err_set(err, FG_EUSAGE, "mxfp4 quantization: weights of dtype %s not supported (F32, F16 or BF16)",
				  fg_dtype_name(dt));
	rc = mxfp4_check("mxfp4 quantization", rows, cols, err);
	if (rc)
		return rc;
	if (rows && cols && (!w || !packed || !scales))
		return fg_err_set(err, FG_EUSAGE, "mxfp4 quantization: NULL buffer");
	return 0;
}

int fg_qk_mxfp4_band(const struct fg_qk_kernels *ks, enum fg_dtype dt, const void *w, size_t rows,
		     size_t cols, uint32_t *packed, uint8_t *scales, size_t row_base, struct fg_err *err)
{
	size_t bad = 0;
	int rc = fg_qk_mxfp4_check_all(dt, w, rows, cols, packed, scales, err);

	if (rc || !rows || !cols)
		return rc;
	if (ks->mxfp4(dt, w, rows * (cols / FG_MXFP4_GROUP), (unsigned char *)packed, scales, &bad))
		return fg_err_set(err, FG_EINPUT, "mxfp4 quantization: non-finite weight at row %zu, column %zu",
				  row_base + bad / cols, bad % cols);
	return 0;
}

int fg_quant_mxfp4_rows(const float *w, size_t rows, size_t cols, uint32_t *packed,
			uint8_t *scales, struct fg_err *err)
{
	return fg_qk_mxfp4_band(fg_qk_dispatch(), FG_DT_F32, w, rows, cols, packed, scales, 0, err);
}

int fg_quant_mxfp4_rows_ref(const float *w, size_t rows, size_t cols, uint32_t *packed,
			    uint8_t *scales, struct fg_err *err)
{
	return fg_qk_mxfp4_band(&fg_qk_kernels_ref, FG_DT_F32, w, rows, cols, packed, scales, 0, err);
}

int fg_quant_mxfp4_rows_dt(enum fg_dtype dt, const void *w, size_t rows, size_t cols,
			   uint32_t *packed, uint8_t *scales, struct fg_err *err)
{
	return fg_qk_mxfp4_band(fg_qk_dispatch(), dt, w, rows, cols, packed, scales, 0, err);
}

int fg_quant_mxfp4_rows_dt_ref(enum fg_dtype dt, const void *w, size_t rows, size_t cols,
			       uint32_t *packed, uint8_t *scales, struct fg_err *err)
{
	return fg_qk_mxfp4_band(&fg_qk_kernels_ref, dt, w, rows, cols, packed, scales, 0, err);
}

/* ---- dequantization ----------------------------------------------------------------- */

int fg_dequant_mxfp4_rows(const uint32_t *packed, const uint8_t *scales, size_t rows, size_t cols,
			  float *out, struct fg_err *err)
{
	const unsigned char *pk = (const unsigned char *)packed;
	unsigned char *dst = (unsigned char *)out;
	size_t gpr, r, c;
	int rc;

	rc = mxfp4_check("mxfp4 dequantization", rows, cols, err);
	if (rc)
		return rc;
	if (!rows || !cols)
		return 0;
	if (!packed || !scales || !out)
		return fg_err_set(err, FG_EUSAGE, "mxfp4 dequantization: NULL buffer");
	gpr = cols / FG_MXFP4_GROUP;
	for (r = 0; r < rows; r++) {
		for (c = 0; c < cols; c++) {
			size_t i = r * cols + c;
			unsigned code = (pk[i / 2] >> (4 * (i & 1))) & 0xf;
			float v = e2m1_values[code & 7];

			if (code & 8)
				v = -v;
			fg_store_f32(dst + 4 * i, e8m0_decode(scales[r * gpr + c / FG_MXFP4_GROUP]) * v);
		}
	}
	return 0;
}
