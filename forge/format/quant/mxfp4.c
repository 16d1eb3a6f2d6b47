/*
 * mxfp4.c: MLX mxfp4 quantization and dequantization on bands of rows (E2M1
 * values with an E8M0 scale per 32), plain C only: forged writes mxfp4 heads
 * rarely and reads them to check an artifact, not on the hot path.
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
 */
#include "forge/format/quant/quant.h"
#include "forge/format/quant/kernels.h"
#include "forge/core/bytes.h"

#include <math.h>
#include <stdint.h>

/* ---- mxfp4 -------------------------------------------------------------------- */

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

static int mxfp4_check(const char *what, size_t rows, size_t cols, struct fg_err *err)
{
	if (cols % FG_MXFP4_GROUP)
		return fg_err_set(err, FG_EINPUT,
				  "%s: weight [%zu, %zu] has %zu columns, not a multiple of the group size %d",
				  what, rows, cols, cols, FG_MXFP4_GROUP);
	return fg_qk_check_size(what, rows, cols, 4, err);
}

static int mxfp4_run(enum fg_dtype dt, const void *w, size_t rows, size_t cols, uint32_t *packed,
		     uint8_t *scales, struct fg_err *err)
{
	const unsigned char *src = w;
	unsigned char *pk = (unsigned char *)packed;
	float x[FG_MXFP4_GROUP];
	size_t esz, gpr, r, g;
	int rc, k;

	if (!fg_qk_dtype_is_param(dt))
		return fg_err_set(err, FG_EUSAGE, "mxfp4 quantization: weights of dtype %s not supported (F32, F16 or BF16)",
				  fg_dtype_name(dt));
	rc = mxfp4_check("mxfp4 quantization", rows, cols, err);
	if (rc)
		return rc;
	if (!rows || !cols)
		return 0;
	if (!w || !packed || !scales)
		return fg_err_set(err, FG_EUSAGE, "mxfp4 quantization: NULL buffer");
	esz = fg_dtype_size(dt);
	gpr = cols / FG_MXFP4_GROUP;
	for (r = 0; r < rows; r++) {
		for (g = 0; g < gpr; g++) {
			size_t col0 = g * FG_MXFP4_GROUP;

			fg_dtype_to_f32(dt, src + (r * cols + col0) * esz, x, FG_MXFP4_GROUP);
			for (k = 0; k < FG_MXFP4_GROUP; k++)
				if (!isfinite(x[k]))
					return fg_err_set(err, FG_EINPUT,
							  "mxfp4 quantization: non-finite weight at row %zu, column %zu",
							  r, col0 + (size_t)k);
			mxfp4_group(x, pk + (r * cols + col0) / 2, scales + r * gpr + g);
		}
	}
	return 0;
}

int fg_quant_mxfp4_rows(const float *w, size_t rows, size_t cols, uint32_t *packed,
			uint8_t *scales, struct fg_err *err)
{
	return mxfp4_run(FG_DT_F32, w, rows, cols, packed, scales, err);
}

int fg_quant_mxfp4_rows_dt(enum fg_dtype dt, const void *w, size_t rows, size_t cols,
			   uint32_t *packed, uint8_t *scales, struct fg_err *err)
{
	return mxfp4_run(dt, w, rows, cols, packed, scales, err);
}

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
