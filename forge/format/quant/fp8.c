/*
 * fp8.c: dequantization of FP8 E4M3 block-scaled weights (DeepSeek-V3) to
 * F32 or BF16 on bands of rows, before forged re-quantizes them.
 *
 * The definition is DeepSeek-V3's weight_dequant: W = fp8 * scale_inv per
 * 128 x 128 block, in F32, then the target dtype.  The _ref functions convert
 * one code at a time with dtype.c's reference conversions.  The dispatched
 * functions use the kernel set of kernels.c: the vector sets have a fused
 * kernel here that widens codes through F16C and narrows to BF16 with an
 * integer add, per 128-column block (see fg_qk_fp8_block_avx512); the scalar
 * set composes dtype.c's bulk conversions instead.  The vector code assumes
 * the default MXCSR (round to nearest, no DAZ/FTZ), as the reference's float
 * arithmetic does; it is compiled on x86-64 only.
 */
#include "forge/format/quant/quant.h"
#include "forge/format/quant/kernels.h"
#include "forge/format/dtype.h"
#include "forge/core/bytes.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* ---- x86 vector kernels ------------------------------------------------------- */

#if defined(__x86_64__)

/*
 * FP8 blocks, fused: E4M3 codes to F32 through F16.  The code's bits shifted
 * into an F16 (sign to bit 15, exponent and mantissa to bits 7-13) are the
 * value times 2^-8 exactly, subnormals included, and F16C widens exactly;
 * so e4m3(b) * s is f16(b) * (s * 256), one rounding of the same real
 * product, whenever s * 256 is finite (the caller checks).  Codes of
 * magnitude 0x7f (NaN) become the F16 quiet NaN with their sign, which
 * widens to 0x7fc00000 | sign like the reference, and a product keeps a NaN
 * first operand.  BF16 narrowing is the round-to-nearest-even add, which
 * maps those NaNs to 0x7fc0 | sign as the reference does.  The last n % 16
 * values take the reference route.  This is not dtype.c's route, which the
 * scalar kernel set composes instead.
 */
static void fp8_tail(const uint8_t *src, size_t n, float scale, unsigned char *dst, bool bf16)
{
	size_t i;

	for (i = 0; i < n; i++) {
		float v = fg_e4m3_to_f32_ref(src[i]) * scale;

		if (bf16) {
			uint16_t h = fg_f32_to_bf16_ref(v);

			memcpy(dst + 2 * i, &h, 2);
		} else {
			fg_store_f32(dst + 4 * i, v);
		}
	}
}

/* Sixteen E4M3 codes to the F16 patterns described above; nan says whether
 * any of them may be a NaN code. */
TARGET_AVX2 static ALWAYS_INLINE __m256i e4m3_as_f16(__m128i b, bool nan)
{
	const __m256i mag = _mm256_set1_epi16(0x3f80);
	__m256i t = _mm256_slli_epi16(_mm256_cvtepu8_epi16(b), 7);
	__m256i h = _mm256_add_epi16(t, _mm256_and_si256(t, _mm256_set1_epi16(0x4000)));

	if (nan) {
		__m256i is_nan = _mm256_cmpeq_epi16(_mm256_and_si256(t, mag), mag);
		__m256i qnan = _mm256_or_si256(_mm256_and_si256(h, _mm256_set1_epi16((short)0x8000)),
					       _mm256_set1_epi16(0x7e00));

		h = _mm256_blendv_epi8(h, qnan, is_nan);
	}
	return h;
}

/* Sixteen F32 to BF16 (in the low halves of the lanes), nearest even. */
TARGET_AVX512 static ALWAYS_INLINE __m512i bf16_rne_avx512(__m512 v)
{
	__m512i x = _mm512_castps_si512(v);
	__m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));

	return _mm512_srli_epi32(_mm512_add_epi32(x, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
}

/* One block of n <= 128 codes; nan: whether NaN codes occur in it. */
TARGET_AVX512 static ALWAYS_INLINE void fp8_block_avx512_body(const uint8_t *src, size_t n, float scale,
							       unsigned char *dst, bool bf16, bool nan)
{
	const __m512 s256 = _mm512_set1_ps(scale * 256.0f);
	/* packus works within 128-bit lanes; this puts the quadwords back. */
	const __m512i order = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
	size_t i = 0;

	for (; i + 32 <= n; i += 32) {
		__m256i h = e4m3_as_f16(_mm_loadu_si128((const __m128i *)(const void *)(src + i)), nan);
		__m256i h2 = e4m3_as_f16(_mm_loadu_si128((const __m128i *)(const void *)(src + i + 16)), nan);
		__m512 v = _mm512_mul_ps(_mm512_cvtph_ps(h), s256);
		__m512 v2 = _mm512_mul_ps(_mm512_cvtph_ps(h2), s256);

		if (bf16) {
			__m512i p = _mm512_packus_epi32(bf16_rne_avx512(v), bf16_rne_avx512(v2));

			_mm512_storeu_si512(dst + 2 * i, _mm512_permutexvar_epi64(order, p));
		} else {
			_mm512_storeu_ps(dst + 4 * i, v);
			_mm512_storeu_ps(dst + 4 * i + 64, v2);
		}
	}
	for (; i + 16 <= n; i += 16) {
		__m256i h = e4m3_as_f16(_mm_loadu_si128((const __m128i *)(const void *)(src + i)), nan);
		__m512 v = _mm512_mul_ps(_mm512_cvtph_ps(h), s256);

		if (bf16)
			_mm256_storeu_si256((__m256i *)(void *)(dst + 2 * i),
					    _mm512_cvtepi32_epi16(bf16_rne_avx512(v)));
		else
			_mm512_storeu_ps(dst + 4 * i, v);
	}
	fp8_tail(src + i, n - i, scale, dst + (bf16 ? 2 : 4) * i, bf16);
}

TARGET_AVX512 void fg_qk_fp8_block_avx512(const uint8_t *src, size_t n, float scale, unsigned char *dst,
					  bool bf16)
{
	/* One test per block for NaN codes (magnitude 0x7f), which are rare. */
	const __m512i sign = _mm512_set1_epi8((char)0x80), ones = _mm512_set1_epi8((char)0xff);
	__mmask64 nan = 0;
	size_t i;

	for (i = 0; i < n; i += 64) {
		__mmask64 m = n - i >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (n - i)) - 1);
		__m512i b = _mm512_maskz_loadu_epi8(m, src + i);

		nan |= _mm512_mask_cmpeq_epi8_mask(m, _mm512_or_si512(b, sign), ones);
	}
	if (nan)
		fp8_block_avx512_body(src, n, scale, dst, bf16, true);
	else
		fp8_block_avx512_body(src, n, scale, dst, bf16, false);
}

/* Eight F32 to BF16 in the low halves of the lanes, rounded to nearest even. */
TARGET_AVX2 static ALWAYS_INLINE __m256i bf16_rne_avx2(__m256 v)
{
	__m256i x = _mm256_castps_si256(v);
	__m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));

	return _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), 16);
}

TARGET_AVX2 void fg_qk_fp8_block_avx2(const uint8_t *src, size_t n, float scale, unsigned char *dst,
				      bool bf16)
{
	const __m256 s256 = _mm256_set1_ps(scale * 256.0f);
	size_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m256i h = e4m3_as_f16(_mm_loadu_si128((const __m128i *)(const void *)(src + i)), true);
		__m256 lo = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h)), s256);
		__m256 hi = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)), s256);

		if (bf16) {
			/* packus interleaves 128-bit lanes; the permute restores order. */
			__m256i p = _mm256_packus_epi32(bf16_rne_avx2(lo), bf16_rne_avx2(hi));

			_mm256_storeu_si256((__m256i *)(void *)(dst + 2 * i), _mm256_permute4x64_epi64(p, 0xd8));
		} else {
			_mm256_storeu_ps((float *)(void *)(dst + 4 * i), lo);
			_mm256_storeu_ps((float *)(void *)(dst + 4 * i + 32), hi);
		}
	}
	fp8_tail(src + i, n - i, scale, dst + (bf16 ? 2 : 4) * i, bf16);
}

#endif /* __x86_64__ */

/* ---- FP8 block-scaled dequantization --------------------------------------- */

static size_t ceil_div(size_t a, size_t b)
{
	return a / b + (a % b != 0);
}

int fg_fp8_block_check(size_t rows, size_t cols, size_t scale_rows, size_t scale_cols,
		       struct fg_err *err)
{
	size_t want_r = ceil_div(rows, FG_FP8_BLOCK), want_c = ceil_div(cols, FG_FP8_BLOCK);

	if (scale_rows != want_r || scale_cols != want_c)
		return fg_err_set(err, FG_EINPUT,
				  "fp8 block dequantization: scale_inv [%zu, %zu] is not the %dx%d block grid [%zu, %zu] of weight [%zu, %zu]",
				  scale_rows, scale_cols, FG_FP8_BLOCK, FG_FP8_BLOCK, want_r, want_c, rows, cols);
	return fg_qk_check_size("fp8 block dequantization", rows, cols, 4, err);
}

static int fp8_band_check(const uint8_t *w, size_t rows, size_t cols, const float *scale_inv,
			  size_t scale_rows, size_t scale_cols, size_t row0, size_t n_rows,
			  const void *out, struct fg_err *err)
{
	int rc = fg_fp8_block_check(rows, cols, scale_rows, scale_cols, err);
	size_t br, bc;

	if (rc)
		return rc;
	if (row0 > rows || n_rows > rows - row0)
		return fg_err_set(err, FG_EUSAGE,
				  "fp8 block dequantization: rows %zu-%zu are outside weight [%zu, %zu]",
				  row0, row0 + n_rows, rows, cols);
	if (!n_rows || !cols)
		return 0;
	if (!w || !scale_inv || !out)
		return fg_err_set(err, FG_EUSAGE, "fp8 block dequantization: NULL buffer");
	/* The scales this band uses: a NaN or infinite one is a corrupt
	 * checkpoint, not something to multiply through. */
	for (br = row0 / FG_FP8_BLOCK; br <= (row0 + n_rows - 1) / FG_FP8_BLOCK; br++) {
		for (bc = 0; bc < scale_cols; bc++) {
			float s = fg_load_f32((const unsigned char *)scale_inv + 4 * (br * scale_cols + bc));

			if (!isfinite(s))
				return fg_err_set(err, FG_EINPUT,
						  "fp8 block dequantization: scale_inv[%zu, %zu] is not finite (%g)",
						  br, bc, (double)s);
		}
	}
	return 0;
}

/* The reference: one element at a time with dtype.c's reference conversions. */
static int fp8_band_ref(const uint8_t *w, size_t rows, size_t cols, const float *scale_inv,
			size_t scale_rows, size_t scale_cols, size_t row0, size_t n_rows, void *out,
			bool bf16, struct fg_err *err)
{
	const unsigned char *si = (const unsigned char *)scale_inv;
	unsigned char *dst = out;
	size_t i, c;
	int rc;

	rc = fp8_band_check(w, rows, cols, scale_inv, scale_rows, scale_cols, row0, n_rows, out, err);
	if (rc)
		return rc;
	for (i = 0; i < n_rows; i++) {
		size_t r = row0 + i;

		for (c = 0; c < cols; c++) {
			float s = fg_load_f32(si + 4 * (r / FG_FP8_BLOCK * scale_cols + c / FG_FP8_BLOCK));
			float v = fg_e4m3_to_f32_ref(w[r * cols + c]) * s;

			if (bf16) {
				uint16_t h = fg_f32_to_bf16_ref(v);

				memcpy(dst + 2 * (i * cols + c), &h, 2);
			} else {
				fg_store_f32(dst + 4 * (i * cols + c), v);
			}
		}
	}
	return 0;
}

/*
 * The bulk path, one 128-column block at a time: the kernel set's fused
 * kernel, or else (scalar set, or a scale so large that scale * 256
 * overflows) dtype.c's bulk widening, a product, and dtype.c's narrowing.
 */
static int fp8_band(const uint8_t *w, size_t rows, size_t cols, const float *scale_inv,
		    size_t scale_rows, size_t scale_cols, size_t row0, size_t n_rows, void *out,
		    bool bf16, struct fg_err *err)
{
	const struct fg_qk_kernels *ks = fg_qk_dispatch();
	const unsigned char *si = (const unsigned char *)scale_inv;
	const size_t osz = bf16 ? 2 : 4;
	unsigned char *dst = out;
	float buf[FG_FP8_BLOCK];
	size_t i, c0, len, k;
	int rc;

	rc = fp8_band_check(w, rows, cols, scale_inv, scale_rows, scale_cols, row0, n_rows, out, err);
	if (rc)
		return rc;
	for (i = 0; i < n_rows; i++) {
		const size_t r = row0 + i;
		const unsigned char *srow = si + 4 * (r / FG_FP8_BLOCK * scale_cols);

		for (c0 = 0; c0 < cols; c0 += len) {
			const float s = fg_load_f32(srow + 4 * (c0 / FG_FP8_BLOCK));
			unsigned char *o = dst + osz * (i * cols + c0);

			len = cols - c0 < FG_FP8_BLOCK ? cols - c0 : FG_FP8_BLOCK;
			if (ks->fp8_block && isfinite(s * 256.0f)) {
				ks->fp8_block(w + r * cols + c0, len, s, o, bf16);
				continue;
			}
			ks->to_f32(FG_DT_F8_E4M3, w + r * cols + c0, buf, len);
			for (k = 0; k < len; k++)
				buf[k] *= s;
			if (bf16)
				ks->from_f32(FG_DT_BF16, buf, o, len);
			else
				memcpy(o, buf, len * 4);
		}
	}
	return 0;
}

int fg_fp8_block_dequant_rows(const uint8_t *w, size_t rows, size_t cols, const float *scale_inv,
			      size_t scale_rows, size_t scale_cols, size_t row0, size_t n_rows,
			      float *out, struct fg_err *err)
{
	return fp8_band(w, rows, cols, scale_inv, scale_rows, scale_cols, row0, n_rows, out, false, err);
}

int fg_fp8_block_dequant_rows_bf16(const uint8_t *w, size_t rows, size_t cols,
				   const float *scale_inv, size_t scale_rows, size_t scale_cols,
				   size_t row0, size_t n_rows, uint16_t *out, struct fg_err *err)
{
	return fp8_band(w, rows, cols, scale_inv, scale_rows, scale_cols, row0, n_rows, out, true, err);
}

int fg_fp8_block_dequant_rows_ref(const uint8_t *w, size_t rows, size_t cols,
				  const float *scale_inv, size_t scale_rows, size_t scale_cols,
				  size_t row0, size_t n_rows, float *out, struct fg_err *err)
{
	return fp8_band_ref(w, rows, cols, scale_inv, scale_rows, scale_cols, row0, n_rows, out, false,
			    err);
}

int fg_fp8_block_dequant_rows_bf16_ref(const uint8_t *w, size_t rows, size_t cols,
				       const float *scale_inv, size_t scale_rows, size_t scale_cols,
				       size_t row0, size_t n_rows, uint16_t *out, struct fg_err *err)
{
	return fp8_band_ref(w, rows, cols, scale_inv, scale_rows, scale_cols, row0, n_rows, out, true,
			    err);
}
