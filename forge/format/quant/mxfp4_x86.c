/*
 * mxfp4_x86.c: the AVX-512 and AVX2 kernels of MLX mxfp4 quantization (the
 * kernel contract is in kernels.h, the reference and the fast scalar kernel
 * in mxfp4.c, and kernels.c puts these into the "avx512" and "avx2" sets).
 *
 * Both work on blocks of 16 (8) groups of 32 values: (1) the largest
 * magnitude of each group as integers (the sign bits cleared, BF16 and F16
 * compared as 16-bit patterns, which order non-negative floats as their
 * values; a pattern at or above infinity's is a NaN or an infinity, so the
 * same maximum finds non-finite weights); (2) the scale bytes of the block
 * lane-wise by fg_qk_e8m0_from_amax's rule (kernels.h), its thresholds
 * gathered from the table; (3) per group, the values times 2^(127 - byte)
 * and their E2M1 codes by the magic addition of mxfp4.c's e2m1_fast, the
 * codes of BF16 values split into even and odd halves of 32-bit lanes so
 * that lane i packs byte i (codes 2i and 2i + 1) without a shuffle.  The
 * products and the addition are IEEE single operations in the lanes, which
 * with the default MXCSR (round to nearest, no DAZ/FTZ) round as the scalar
 * code does.  AVX-512 codes BF16 groups (but those of scale byte 0 to 3)
 * without widening: 32 patterns at a time through a table of cells
 * (e2m1_bf16x32), about half the work of widening; the tests cover that
 * path on every BF16 value at every scale byte.
 *
 * x86-64 only; elsewhere this file compiles to nothing.
 */
#include "forge/format/quant/kernels.h"
#include "forge/format/quant/quant.h"
#include "forge/format/dtype.h"
#include "forge/core/bytes.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)

#include <immintrin.h>

#define GROUP FG_MXFP4_GROUP

/* Bytes ahead of the first pass the kernels prefetch (as affine_x86.c). */
#define PREFETCH_AHEAD 4096

/* The constants of e2m1_fast (mxfp4.c). */
#define ABS_MASK 0x7fffffff
#define SIX_BITS 0x40c00000   /* 6.0f */
#define EXP_MASK 0x7f800000
#define ONE_BITS 0x3f800000   /* 1.0f */
#define MAGIC_EXP (22 << 23)  /* times 2^22 */
#define TWICE_149 298

/* Index in the group at p (dt) of its first non-finite value; the caller
 * knows there is one. */
static size_t first_nonfinite(enum fg_dtype dt, const unsigned char *p)
{
	float x[GROUP];
	size_t k;

	fg_dtype_to_f32_ref(dt, p, x, GROUP);
	for (k = 0; k < GROUP && isfinite(x[k]); k++)
		;
	return k;
}

/* -- AVX-512 -- */

#define BLOCK16 16

/* e2m1_fast in sixteen lanes. */
TARGET_AVX512 static ALWAYS_INLINE __m512i e2m1_16(__m512 y)
{
	const __m512i yi = _mm512_castps_si512(y);
	__m512i u = _mm512_min_epu32(_mm512_and_si512(yi, _mm512_set1_epi32(ABS_MASK)),
				     _mm512_set1_epi32(SIX_BITS));
	__m512i m = _mm512_add_epi32(_mm512_max_epu32(_mm512_and_si512(u, _mm512_set1_epi32(EXP_MASK)),
						      _mm512_set1_epi32(ONE_BITS)),
				     _mm512_set1_epi32(MAGIC_EXP));
	__m512i s = _mm512_castps_si512(_mm512_add_ps(_mm512_castsi512_ps(u), _mm512_castsi512_ps(m)));
	__m512i code = _mm512_add_epi32(_mm512_sub_epi32(s, m),
					_mm512_sub_epi32(_mm512_srli_epi32(m, 22), _mm512_set1_epi32(TWICE_149)));

	/* code | (y >> 28 & 8): the sign bit moved to bit 3. */
	return _mm512_ternarylogic_epi32(code, _mm512_srli_epi32(yi, 28), _mm512_set1_epi32(8), 0xf8);
}

/* The tables of e2m1_bf16x32, lane = cell % 32 for cell = pattern >> 5:
 * cells 499 (below 0.25) to 511 in lanes 19-31, 512 to 520 in lanes 0-8. */
static const int16_t bf16_cell_codes[32] = {
	4, 5, 5, 6, 6, 7, 7, 7, 7,                /* cells 512-520: 2 .. 8.5 */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0,             /* lanes 9-18: no cell */
	0, 1, 1, 1, 1, 1, 1, 2, 2, 2, 3, 3, 4,    /* cells 499-511: .. 2 */
};
static const int16_t bf16_cell_strict[32] = {
	0, 1, 0, 0, 0, 1, 0, 0, 0,                /* 2.5 (cell 513), 5 (517) */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0,    /* 0.25 (500), 1.25 (509) */
};

/*
 * The codes of 32 BF16 values of a group whose scale byte is at least 4,
 * in 16-bit lanes, without widening or multiplying: y = x * 2^k (k =
 * 127 - byte <= 123) is exact in BF16 wherever it is normal, and its pattern
 * is |x|'s plus k << 7; where that goes below the normal range (or x is
 * subnormal or zero, |y| < 2^-3 then) the code is 0 either way.  The code is
 * a step function of the pattern whose steps all start on multiples of 32
 * (each threshold has 3 significant bits): a table indexed by pattern >> 5
 * (cells 499 ("below 0.25") to 520 (8.5 > |y|), taken modulo 32 by the
 * permute) gives the code above each threshold, and a pattern exactly at a
 * threshold that rounds down (0.25, 1.25, 2.5, 5: ties to the even code)
 * takes one less.  Returns the codes with y's sign bit in bit 3.
 */
TARGET_AVX512 static ALWAYS_INLINE __m512i e2m1_bf16x32(__m512i v, __m512i shift)
{
	const __m512i codes = _mm512_loadu_si512(bf16_cell_codes);
	const __m512i strict = _mm512_loadu_si512(bf16_cell_strict);
	__m512i a = _mm512_add_epi16(_mm512_and_si512(v, _mm512_set1_epi16(0x7fff)), shift);
	__m512i cell = _mm512_max_epi16(_mm512_srai_epi16(a, 5), _mm512_set1_epi16(499));
	__mmask32 at_edge = _mm512_testn_epi16_mask(a, _mm512_set1_epi16(31));
	__m512i code = _mm512_permutexvar_epi16(cell, codes);

	code = _mm512_mask_sub_epi16(code, at_edge, code, _mm512_permutexvar_epi16(cell, strict));
	return _mm512_ternarylogic_epi32(code, _mm512_srli_epi16(v, 12), _mm512_set1_epi16(8), 0xf8);
}

/* Largest 16-bit lane of a 256-bit vector (phminposuw on the complement). */
TARGET_AVX512 static ALWAYS_INLINE uint32_t hmax_epu16(__m256i m)
{
	__m128i h = _mm_max_epu16(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));

	h = _mm_minpos_epu16(_mm_xor_si128(h, _mm_set1_epi32(-1)));
	return ~(uint32_t)_mm_cvtsi128_si32(h) & 0xffffu;
}

/* The F32 bits of the largest magnitude of the group at p (a NaN or an
 * infinity among them gives bits at or above infinity's). */
TARGET_AVX512 static ALWAYS_INLINE uint32_t amax_avx512(enum fg_dtype dt, const unsigned char *p)
{
	_mm_prefetch((const char *)((uintptr_t)p + PREFETCH_AHEAD), _MM_HINT_T0);
	if (dt == FG_DT_F32) {
		const __m512i abs = _mm512_set1_epi32(ABS_MASK);
		__m512i a = _mm512_and_si512(_mm512_loadu_si512(p), abs);
		__m512i b = _mm512_and_si512(_mm512_loadu_si512(p + 64), abs);

		_mm_prefetch((const char *)((uintptr_t)p + 64 + PREFETCH_AHEAD), _MM_HINT_T0);
		return _mm512_reduce_max_epu32(_mm512_max_epu32(a, b));
	} else {
		__m512i a = _mm512_and_si512(_mm512_loadu_si512(p), _mm512_set1_epi16(0x7fff));
		uint32_t h = hmax_epu16(_mm256_max_epu16(_mm512_castsi512_si256(a), _mm512_extracti64x4_epi64(a, 1)));

		if (dt == FG_DT_BF16)
			return h << 16;
		return fg_f32_bits(_cvtsh_ss((unsigned short)h));
	}
}

TARGET_AVX512 static ALWAYS_INLINE int mxfp4_avx512_body(enum fg_dtype dt, const unsigned char *src,
							  size_t n_groups, unsigned char *packed,
							  uint8_t *scales, size_t *bad)
{
	const size_t esz = dt == FG_DT_F32 ? 4 : 2, gbytes = GROUP * esz;
	uint32_t amax[BLOCK16], bytes[BLOCK16];
	float enc[BLOCK16];
	size_t g0, nb, k;

	for (g0 = 0; g0 < n_groups; g0 += nb) {
		__mmask16 lanes, nonfinite;
		__m512i va, be, byte;
		__mmask16 up;

		nb = n_groups - g0 < BLOCK16 ? n_groups - g0 : BLOCK16;
		lanes = (__mmask16)((1u << nb) - 1u);
		for (k = 0; k < nb; k++)
			amax[k] = amax_avx512(dt, src + (g0 + k) * gbytes);
		va = _mm512_maskz_loadu_epi32(lanes, amax);
		nonfinite = _mm512_mask_cmpge_epu32_mask(lanes, va, _mm512_set1_epi32(EXP_MASK));
		if (nonfinite) {
			k = g0 + (size_t)__builtin_ctz(nonfinite);
			*bad = k * GROUP + first_nonfinite(dt, src + k * gbytes);
			return FG_QK_ROW_NONFINITE;
		}
		/* fg_qk_e8m0_from_amax lane-wise. */
		be = _mm512_srli_epi32(va, 23);
		up = _mm512_cmpge_epu32_mask(_mm512_and_si512(va, _mm512_set1_epi32(0x7fffff)),
					     _mm512_i32gather_epi32(be, (const void *)fg_qk_e8m0_up, 4));
		byte = _mm512_max_epi32(_mm512_sub_epi32(_mm512_mask_add_epi32(be, up, be, _mm512_set1_epi32(1)),
							 _mm512_set1_epi32(3)),
					_mm512_setzero_si512());
		_mm512_mask_cvtepi32_storeu_epi8(scales + g0, lanes, byte);
		_mm512_storeu_si512(bytes, byte);
		_mm512_storeu_ps(enc, _mm512_castsi512_ps(_mm512_slli_epi32(
					      _mm512_sub_epi32(_mm512_set1_epi32(254), byte), 23)));
		for (k = 0; k < nb; k++) {
			const unsigned char *p = src + (g0 + k) * gbytes;
			unsigned char *out = packed + (g0 + k) * 16;
			const __m512 venc = _mm512_set1_ps(enc[k]);

			if (dt == FG_DT_BF16 && bytes[k] >= 4) {
				__m512i v = _mm512_loadu_si512(p);
				__m512i c = e2m1_bf16x32(v, _mm512_set1_epi16((short)((127 - (int)bytes[k]) * 128)));

				/* Lane i of 32 bits holds codes 2i and 2i + 1. */
				_mm_storeu_si128((__m128i *)(void *)out,
						 _mm512_cvtepi32_epi8(_mm512_or_si512(c, _mm512_srli_epi32(c, 12))));
			} else if (dt == FG_DT_BF16) {
				__m512i v = _mm512_loadu_si512(p);
				__m512 even = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
				__m512 odd = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xffff0000u)));
				__m512i ce = e2m1_16(_mm512_mul_ps(even, venc));
				__m512i co = e2m1_16(_mm512_mul_ps(odd, venc));

				_mm_storeu_si128((__m128i *)(void *)out,
						 _mm512_cvtepi32_epi8(_mm512_or_si512(ce, _mm512_slli_epi32(co, 4))));
			} else {
				__m512 x0, x1;
				__m512i c0, c1;

				if (dt == FG_DT_F16) {
					x0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
					x1 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p + 32)));
				} else {
					x0 = _mm512_loadu_ps(p);
					x1 = _mm512_loadu_ps(p + 64);
				}
				c0 = e2m1_16(_mm512_mul_ps(x0, venc));
				c1 = e2m1_16(_mm512_mul_ps(x1, venc));
				/* In each 64-bit lane the odd code moves next to the
				 * even one: low byte = c[2i] | c[2i+1] << 4. */
				c0 = _mm512_or_si512(c0, _mm512_srli_epi64(c0, 28));
				c1 = _mm512_or_si512(c1, _mm512_srli_epi64(c1, 28));
				_mm_storel_epi64((__m128i *)(void *)out, _mm512_cvtepi64_epi8(c0));
				_mm_storel_epi64((__m128i *)(void *)(out + 8), _mm512_cvtepi64_epi8(c1));
			}
		}
	}
	return 0;
}

TARGET_AVX512 int fg_qk_mxfp4_avx512(enum fg_dtype dt, const unsigned char *src, size_t n_groups,
				     unsigned char *packed, uint8_t *scales, size_t *bad)
{
	/* One instance per dtype so the loads compile without a branch. */
	switch (dt) {
	case FG_DT_BF16:
		return mxfp4_avx512_body(FG_DT_BF16, src, n_groups, packed, scales, bad);
	case FG_DT_F16:
		return mxfp4_avx512_body(FG_DT_F16, src, n_groups, packed, scales, bad);
	default:
		return mxfp4_avx512_body(FG_DT_F32, src, n_groups, packed, scales, bad);
	}
}

/* -- AVX2 -- */

#define BLOCK8 8

/* e2m1_fast in eight lanes. */
TARGET_AVX2 static ALWAYS_INLINE __m256i e2m1_8(__m256 y)
{
	const __m256i yi = _mm256_castps_si256(y);
	__m256i u = _mm256_min_epu32(_mm256_and_si256(yi, _mm256_set1_epi32(ABS_MASK)),
				     _mm256_set1_epi32(SIX_BITS));
	__m256i m = _mm256_add_epi32(_mm256_max_epu32(_mm256_and_si256(u, _mm256_set1_epi32(EXP_MASK)),
						      _mm256_set1_epi32(ONE_BITS)),
				     _mm256_set1_epi32(MAGIC_EXP));
	__m256i s = _mm256_castps_si256(_mm256_add_ps(_mm256_castsi256_ps(u), _mm256_castsi256_ps(m)));
	__m256i code = _mm256_add_epi32(_mm256_sub_epi32(s, m),
					_mm256_sub_epi32(_mm256_srli_epi32(m, 22), _mm256_set1_epi32(TWICE_149)));

	return _mm256_or_si256(code, _mm256_and_si256(_mm256_srli_epi32(yi, 28), _mm256_set1_epi32(8)));
}

TARGET_AVX2 static ALWAYS_INLINE uint32_t amax_avx2(enum fg_dtype dt, const unsigned char *p)
{
	__m128i h;

	_mm_prefetch((const char *)((uintptr_t)p + PREFETCH_AHEAD), _MM_HINT_T0);
	if (dt == FG_DT_F32) {
		const __m256i abs = _mm256_set1_epi32(ABS_MASK);
		__m256i a = _mm256_max_epu32(_mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)p), abs),
					     _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)(p + 32)), abs));
		__m256i b = _mm256_max_epu32(_mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)(p + 64)), abs),
					     _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)(p + 96)), abs));

		_mm_prefetch((const char *)((uintptr_t)p + 64 + PREFETCH_AHEAD), _MM_HINT_T0);
		a = _mm256_max_epu32(a, b);
		h = _mm_max_epu32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
		h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0x4e));
		h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0xb1));
		return (uint32_t)_mm_cvtsi128_si32(h);
	} else {
		const __m256i abs = _mm256_set1_epi16(0x7fff);
		__m256i a = _mm256_max_epu16(_mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)p), abs),
					     _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(const void *)(p + 32)), abs));
		uint32_t m;

		h = _mm_max_epu16(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
		h = _mm_minpos_epu16(_mm_xor_si128(h, _mm_set1_epi32(-1)));
		m = ~(uint32_t)_mm_cvtsi128_si32(h) & 0xffffu;
		if (dt == FG_DT_BF16)
			return m << 16;
		return fg_f32_bits(_cvtsh_ss((unsigned short)m));
	}
}

TARGET_AVX2 static ALWAYS_INLINE __m256 load8_f32(enum fg_dtype dt, const unsigned char *p)
{
	if (dt == FG_DT_F16)
		return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
	return _mm256_loadu_ps((const float *)(const void *)p);
}

TARGET_AVX2 static ALWAYS_INLINE int mxfp4_avx2_body(enum fg_dtype dt, const unsigned char *src,
						      size_t n_groups, unsigned char *packed, uint8_t *scales,
						      size_t *bad)
{
	const size_t esz = dt == FG_DT_F32 ? 4 : 2, gbytes = GROUP * esz;
	uint32_t amax[BLOCK8], bytes[BLOCK8];
	float enc[BLOCK8];
	size_t g0, nb, k;

	for (g0 = 0; g0 < n_groups; g0 += nb) {
		__m256i va, be, up, byte;
		unsigned nonfinite;

		nb = n_groups - g0 < BLOCK8 ? n_groups - g0 : BLOCK8;
		for (k = 0; k < BLOCK8; k++)
			amax[k] = k < nb ? amax_avx2(dt, src + (g0 + k) * gbytes) : 0;
		va = _mm256_loadu_si256((const __m256i *)(const void *)amax);
		/* amax <= 0x7fffffff, so signed comparisons order it. */
		nonfinite = (unsigned)_mm256_movemask_ps(
			_mm256_castsi256_ps(_mm256_cmpgt_epi32(va, _mm256_set1_epi32(EXP_MASK - 1))));
		if (nonfinite) {
			k = g0 + (size_t)__builtin_ctz(nonfinite);
			*bad = k * GROUP + first_nonfinite(dt, src + k * gbytes);
			return FG_QK_ROW_NONFINITE;
		}
		be = _mm256_srli_epi32(va, 23);
		up = _mm256_cmpgt_epi32(_mm256_and_si256(va, _mm256_set1_epi32(0x7fffff)),
					_mm256_sub_epi32(_mm256_i32gather_epi32((const int *)(const void *)fg_qk_e8m0_up, be, 4),
							 _mm256_set1_epi32(1)));
		/* be + up - 3 (up is -1 where the byte goes up), at least 0. */
		byte = _mm256_max_epi32(_mm256_sub_epi32(_mm256_sub_epi32(be, up), _mm256_set1_epi32(3)),
					_mm256_setzero_si256());
		_mm256_storeu_si256((__m256i *)(void *)bytes, byte);
		_mm256_storeu_ps(enc, _mm256_castsi256_ps(_mm256_slli_epi32(
					      _mm256_sub_epi32(_mm256_set1_epi32(254), byte), 23)));
		for (k = 0; k < nb; k++) {
			const unsigned char *p = src + (g0 + k) * gbytes;
			unsigned char *out = packed + (g0 + k) * 16;
			const __m256 venc = _mm256_set1_ps(enc[k]);
			__m256i q;

			scales[g0 + k] = (uint8_t)bytes[k];
			if (dt == FG_DT_BF16) {
				const __m256i high_half = _mm256_set1_epi32((int)0xffff0000u);
				__m256i v0 = _mm256_loadu_si256((const __m256i *)(const void *)p);
				__m256i v1 = _mm256_loadu_si256((const __m256i *)(const void *)(p + 32));
				/* Lane i of b0 (b1): the byte of values 2i, 2i + 1
				 * (16 + 2i, 17 + 2i). */
				__m256i b0 = _mm256_or_si256(
					e2m1_8(_mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(v0, 16)), venc)),
					_mm256_slli_epi32(e2m1_8(_mm256_mul_ps(_mm256_castsi256_ps(_mm256_and_si256(v0, high_half)), venc)), 4));
				__m256i b1 = _mm256_or_si256(
					e2m1_8(_mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(v1, 16)), venc)),
					_mm256_slli_epi32(e2m1_8(_mm256_mul_ps(_mm256_castsi256_ps(_mm256_and_si256(v1, high_half)), venc)), 4));
				/* packus works in 128-bit lanes: dwords b0 0-3, b1 0-3
				 * | b0 4-7, b1 4-7 after both packs; the permute puts
				 * them in order. */
				q = _mm256_packus_epi16(_mm256_packus_epi32(b0, b1), _mm256_setzero_si256());
				q = _mm256_permutevar8x32_epi32(q, _mm256_setr_epi32(0, 4, 1, 5, 2, 3, 6, 7));
			} else {
				__m256i c0 = e2m1_8(_mm256_mul_ps(load8_f32(dt, p), venc));
				__m256i c1 = e2m1_8(_mm256_mul_ps(load8_f32(dt, p + 8 * esz), venc));
				__m256i c2 = e2m1_8(_mm256_mul_ps(load8_f32(dt, p + 16 * esz), venc));
				__m256i c3 = e2m1_8(_mm256_mul_ps(load8_f32(dt, p + 24 * esz), venc));
				/* The 32 codes as bytes in order (as affine_x86.c's
				 * bytes32_avx2), then pairs of bytes to nibbles: as
				 * 16-bit lanes e0 | e1 << 8, or-ing in the lane shifted
				 * by 4 puts e1 in bits 4-7; pack the low bytes (lane-wise
				 * again, so keep quadwords 0 and 2). */
				__m256i all = _mm256_permutevar8x32_epi32(
					_mm256_packus_epi16(_mm256_packus_epi32(c0, c1), _mm256_packus_epi32(c2, c3)),
					_mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
				__m256i t = _mm256_and_si256(_mm256_or_si256(all, _mm256_srli_epi16(all, 4)),
							     _mm256_set1_epi16(0x00ff));

				q = _mm256_permute4x64_epi64(_mm256_packus_epi16(t, t), 0x08);
			}
			_mm_storeu_si128((__m128i *)(void *)out, _mm256_castsi256_si128(q));
		}
	}
	return 0;
}

TARGET_AVX2 int fg_qk_mxfp4_avx2(enum fg_dtype dt, const unsigned char *src, size_t n_groups,
				 unsigned char *packed, uint8_t *scales, size_t *bad)
{
	switch (dt) {
	case FG_DT_BF16:
		return mxfp4_avx2_body(FG_DT_BF16, src, n_groups, packed, scales, bad);
	case FG_DT_F16:
		return mxfp4_avx2_body(FG_DT_F16, src, n_groups, packed, scales, bad);
	default:
		return mxfp4_avx2_body(FG_DT_F32, src, n_groups, packed, scales, bad);
	}
}

#endif /* __x86_64__ */
