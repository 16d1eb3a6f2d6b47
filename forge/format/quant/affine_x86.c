/*
 * affine_x86.c: the AVX-512 and AVX2 row kernels of MLX affine quantization
 * (the row-kernel contract is in kernels.h, the reference in affine.c, and
 * kernels.c puts them into the "avx512" and "avx2" kernel sets).
 *
 * They reach the reference's bits by other routes, which is what makes the
 * agreement tests (tests/unit/test_quant.c) worth running: they work on
 * blocks of 16 (8) groups: min/max in vectors (BF16 split into even and odd
 * values, 32 per load), the group step computed lane-wise for the whole
 * block, then per value a product with the rounded reciprocal of the scale,
 * with a division only for the rare values where that could round
 * differently (see affine_q16), and packing in registers for 8 and 4 bits
 * (SWAR over bytes otherwise, pack_bytes).  The vector code assumes the
 * default MXCSR (round to nearest, no DAZ/FTZ), as the reference's rintf and
 * float arithmetic do.
 *
 * x86-64 only; elsewhere this file compiles to nothing and the scalar set is
 * the only one.
 */
#include "forge/format/quant/kernels.h"
#include "forge/format/dtype.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)

#include <immintrin.h>

/* Bytes ahead of the min/max pass the vector kernels prefetch: a block or
 * two of groups (measured: +25% on a 1 GiB BF16 tensor from DRAM). */
#define PREFETCH_AHEAD 4096

/* rint: round to nearest even, no precision exception (an immediate operand). */
#define ROUND_NEAREST (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

/* ---- what the vector kernels share ------------------------------------------- */

/* Column of the first non-finite value among n of dt at src (n if none). */
static size_t first_nonfinite(enum fg_dtype dt, const unsigned char *src, size_t n)
{
	float x[FG_QK_AFFINE_MAX_GROUP];
	size_t esz = fg_dtype_size(dt), i, k, m;

	for (i = 0; i < n; i += m) {
		m = n - i < FG_QK_AFFINE_MAX_GROUP ? n - i : FG_QK_AFFINE_MAX_GROUP;
		fg_dtype_to_f32_ref(dt, src + i * esz, x, m);
		for (k = 0; k < m; k++)
			if (!isfinite(x[k]))
				return i + k;
	}
	return n;
}

/*
 * What a vector kernel reports once it knows group `last` is bad (from its
 * min, max or range, or from a non-finite value met while coding it), having
 * found nothing wrong before group `first`: the first non-finite value of
 * groups first..last, in column order as the reference meets it, else a
 * range overflow of group last.  Groups are counted from src.
 */
static int block_error(enum fg_dtype dt, const unsigned char *src, size_t first, size_t last, size_t gsz,
		       size_t *bad)
{
	size_t esz = fg_dtype_size(dt), g, c;

	for (g = first; g <= last; g++) {
		c = first_nonfinite(dt, src + g * gsz * esz, gsz);
		if (c < gsz) {
			*bad = g * gsz + c;
			return FG_QK_ROW_NONFINITE;
		}
	}
	*bad = last * gsz;
	return FG_QK_ROW_RANGE;
}

/*
 * Pack n q values of 2, 3, 5 or 6 bits held one per byte (n a multiple of 8)
 * for the vector kernels: eight bytes at a time are squeezed inside a 64-bit
 * word (pairs of bytes, then pairs of pairs, then the halves), leaving
 * 8 * bits bits, which are `bits` whole bytes of the stream.  Deliberately
 * not the reference's algorithm, so the agreement tests compare two packers.
 */
static void pack_bytes(const uint8_t *q, size_t n, int bits, unsigned char *out)
{
	unsigned char stage[FG_QK_AFFINE_MAX_GROUP * 6 / 8 + 8];
	const unsigned b = (unsigned)bits;
	size_t i, o = 0;

	for (i = 0; i < n; i += 8) {
		uint64_t x;

		memcpy(&x, q + i, 8);
		x = (x & 0x00ff00ff00ff00ffull) | ((x & 0xff00ff00ff00ff00ull) >> (8 - b));
		x = (x & 0x0000ffff0000ffffull) | ((x & 0xffff0000ffff0000ull) >> (16 - 2 * b));
		x = (x & 0x00000000ffffffffull) | ((x >> 32) << (4 * b));
		memcpy(stage + o, &x, 8); /* the next store overwrites the spare bytes */
		o += b;
	}
	memcpy(out, stage, o);
}

/* -- AVX-512 -- */

/* Groups handled together: their scale/edge/q0 steps run in the lanes of one
 * vector instead of one after another in scalar code. */
#define BLOCK16 16

/* Sixteen values of dt widened exactly (BF16 by a shift: NaN payloads are not
 * quieted, but a NaN is refused anyway). */
TARGET_AVX512 static ALWAYS_INLINE __m512 load16_avx512(enum fg_dtype dt, const unsigned char *p)
{
	if (dt == FG_DT_BF16) {
		__m256i h = _mm256_loadu_si256((const __m256i *)(const void *)p);

		return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
	}
	if (dt == FG_DT_F16)
		return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
	return _mm512_loadu_ps(p);
}

/*
 * q = clamp(rint((x - bias) / scale), 0, N) as integers, equal to the
 * reference's result but without a division per value when it can (the
 * divider alone would cost about 0.6 cycles per value):
 *   - t = (x - bias) * recip, recip = 1 / scale rounded, differs from the
 *     rounded quotient by less than 3 * 2^-24 * |quotient| (two roundings
 *     against one; plus 2^-149 where the product is subnormal);
 *   - |quotient| < 2N + 1 <= 511 in every group: |x - bias| <= max - min
 *     <= N * s0 (or |x| <= s0 / 2 when bias is 0), and the q0 step leaves
 *     |scale| above s0 / 2.  So t and the quotient are less than 2^-12 apart;
 *   - rint(t) is therefore rint(quotient) unless t lies within 2^-10 of a
 *     half-integer; those lanes (about one in 500) are divided after all.
 * recip is exact enough only while it is a normal number: the caller sets
 * divide for groups with |scale| >= 2^100, which then divide every lane.
 * The clamp runs on the converted integers, equal to the float clamp since
 * the values are far inside the int32 range.
 */
TARGET_AVX512 static ALWAYS_INLINE __m512i affine_q16(__m512 x, __m512 vb, __m512 vs, __m512 vr, __m512i vn,
						  bool divide, __mmask16 *nonfinite)
{
	const __m512 inf = _mm512_set1_ps(INFINITY);
	__m512 a = _mm512_sub_ps(x, vb), r;

	if (divide) {
		r = _mm512_roundscale_ps(_mm512_div_ps(a, vs), ROUND_NEAREST);
		*nonfinite |= _mm512_cmp_ps_mask(_mm512_abs_ps(x), inf, _CMP_NLT_UQ);
	} else {
		__m512 t = _mm512_mul_ps(a, vr);
		__mmask16 odd;

		r = _mm512_roundscale_ps(t, ROUND_NEAREST);
		/* Near a half-integer, or unordered: a NaN or infinite weight
		 * (the min/max pass does not look for them) lands here too. */
		odd = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(t, r)), _mm512_set1_ps(0.5f - 0x1p-10f),
					 _CMP_NLT_UQ);
		if (odd) {
			*nonfinite |= _mm512_cmp_ps_mask(_mm512_abs_ps(x), inf, _CMP_NLT_UQ);
			r = _mm512_mask_roundscale_ps(r, odd, _mm512_div_ps(a, vs), ROUND_NEAREST);
		}
	}
	return _mm512_min_epi32(_mm512_max_epi32(_mm512_cvttps_epi32(r), _mm512_setzero_si512()), vn);
}

/* affine_group_params for sixteen groups, one per lane (lanes whose min, max
 * or range are not finite give garbage and are rejected by the caller).
 * Negation flips the sign bit, as the scalar unary minus does. */
TARGET_AVX512 static ALWAYS_INLINE void affine_params16(__m512 wmin, __m512 wmax, float n_bins,
							 __m512 *scale, __m512 *bias)
{
	const __m512 eps = _mm512_set1_ps(FG_QK_AFFINE_EPS);
	const __m512i sign = _mm512_set1_epi32((int)0x80000000u);
	__m512 s = _mm512_div_ps(_mm512_sub_ps(wmax, wmin), _mm512_set1_ps(n_bins));
	__m512 neg_s, edge, q0;
	__mmask16 low_edge, nz;

	s = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(s, eps, _CMP_LT_OQ), s, eps);
	low_edge = _mm512_cmp_ps_mask(_mm512_abs_ps(wmin), _mm512_abs_ps(wmax), _CMP_GT_OQ);
	neg_s = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(s), sign));
	s = _mm512_mask_blend_ps(low_edge, neg_s, s);
	edge = _mm512_mask_blend_ps(low_edge, wmax, wmin);
	q0 = _mm512_roundscale_ps(_mm512_div_ps(edge, s), ROUND_NEAREST);
	nz = _mm512_cmp_ps_mask(q0, _mm512_setzero_ps(), _CMP_NEQ_OQ);
	*scale = _mm512_mask_div_ps(s, nz, edge, q0);
	*bias = _mm512_maskz_mov_ps(nz, edge);
}

/*
 * Sixteen groups at a time: (1) min and max of each (BF16 thirty-two values
 * per load, as even and odd halves: order does not matter here); (2) the
 * group step in the lanes of one vector, after rejecting groups whose
 * min, max or range is not finite; (3) codes and packing per group.  NaN
 * can hide from (1) (vminps returns its second operand when one is NaN), so
 * (3) also flags non-finite weights, at no cost on the common path.
 */
TARGET_AVX512 static ALWAYS_INLINE int affine_row_avx512_body(enum fg_dtype dt, const unsigned char *src,
							       size_t n_groups, int bits, int group,
							       unsigned char *packed, float *scales,
							       float *biases, size_t *bad)
{
	const size_t esz = dt == FG_DT_F32 ? 4 : 2, gsz = (size_t)group;
	const size_t group_bytes = gsz * (size_t)bits / 8;
	const float n_bins = (float)((1 << bits) - 1);
	const __m512i vn = _mm512_set1_epi32((1 << bits) - 1);
	const __m512i high_half = _mm512_set1_epi32((int)0xffff0000u);
	const __m512 inf = _mm512_set1_ps(INFINITY);
	float mins[BLOCK16], maxs[BLOCK16], sc[BLOCK16], bi[BLOCK16];
	uint8_t q8[FG_QK_AFFINE_MAX_GROUP];
	size_t g0, nb, k, j;

	for (g0 = 0; g0 < n_groups; g0 += nb) {
		__mmask16 lanes, rejected;
		__m512 vmin16, vmax16, vs16, vb16;

		nb = n_groups - g0 < BLOCK16 ? n_groups - g0 : BLOCK16;
		lanes = (__mmask16)((1u << nb) - 1u);
		for (k = 0; k < nb; k++) {
			const unsigned char *p = src + (g0 + k) * gsz * esz;
			__m512 vmin = inf, vmax = _mm512_set1_ps(-INFINITY);

			if (dt == FG_DT_BF16) {
				for (j = 0; j < gsz; j += 32) {
					__m512i v = _mm512_loadu_si512(p + 2 * j);
					__m512 even = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
					__m512 odd = _mm512_castsi512_ps(_mm512_and_si512(v, high_half));

					_mm_prefetch((const char *)((uintptr_t)(p + 2 * j) + PREFETCH_AHEAD), _MM_HINT_T0);
					vmin = _mm512_min_ps(vmin, _mm512_min_ps(even, odd));
					vmax = _mm512_max_ps(vmax, _mm512_max_ps(even, odd));
				}
			} else {
				for (j = 0; j < gsz; j += 16) {
					__m512 x = load16_avx512(dt, p + j * esz);

					_mm_prefetch((const char *)((uintptr_t)(p + j * esz) + PREFETCH_AHEAD), _MM_HINT_T0);
					vmin = _mm512_min_ps(vmin, x);
					vmax = _mm512_max_ps(vmax, x);
				}
			}
			mins[k] = _mm512_reduce_min_ps(vmin);
			maxs[k] = _mm512_reduce_max_ps(vmax);
		}
		vmin16 = _mm512_maskz_loadu_ps(lanes, mins);
		vmax16 = _mm512_maskz_loadu_ps(lanes, maxs);
		rejected = (_mm512_cmp_ps_mask(_mm512_abs_ps(vmin16), inf, _CMP_NLT_UQ) |
			    _mm512_cmp_ps_mask(_mm512_abs_ps(vmax16), inf, _CMP_NLT_UQ) |
			    _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(vmax16, vmin16)), inf, _CMP_NLT_UQ)) &
			   lanes;
		if (rejected)
			return block_error(dt, src, g0, g0 + (size_t)__builtin_ctz(rejected), gsz, bad);
		affine_params16(vmin16, vmax16, n_bins, &vs16, &vb16);
		_mm512_storeu_ps(sc, vs16);
		_mm512_storeu_ps(bi, vb16);
		memcpy(scales + g0, sc, nb * sizeof(float));
		memcpy(biases + g0, bi, nb * sizeof(float));
		for (k = 0; k < nb; k++) {
			const unsigned char *p = src + (g0 + k) * gsz * esz;
			unsigned char *out = packed + (g0 + k) * group_bytes;
			const __m512 vs = _mm512_set1_ps(sc[k]), vb = _mm512_set1_ps(bi[k]);
			const __m512 vr = _mm512_set1_ps(1.0f / sc[k]);
			const bool divide = !(fabsf(sc[k]) < 0x1p100f);
			__mmask16 nonfinite = 0;

			if (dt == FG_DT_BF16) {
				/* Even and odd values in separate vectors: value 2i
				 * and 2i+1 meet in lane i, which packs a byte (4 bits)
				 * or a 16-bit pair (8 bits, and the byte staging of
				 * the other widths) in order. */
				for (j = 0; j < gsz; j += 32) {
					__m512i v = _mm512_loadu_si512(p + 2 * j);
					__m512 even = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
					__m512 odd = _mm512_castsi512_ps(_mm512_and_si512(v, high_half));
					__m512i qe = affine_q16(even, vb, vs, vr, vn, divide, &nonfinite);
					__m512i qo = affine_q16(odd, vb, vs, vr, vn, divide, &nonfinite);

					if (bits == 4) {
						__m512i pair = _mm512_or_si512(qe, _mm512_slli_epi32(qo, 4));

						_mm_storeu_si128((__m128i *)(void *)(out + j / 2), _mm512_cvtepi32_epi8(pair));
					} else {
						__m512i pair = _mm512_or_si512(qe, _mm512_slli_epi32(qo, 8));

						_mm256_storeu_si256((__m256i *)(void *)(bits == 8 ? out + j : q8 + j),
								    _mm512_cvtepi32_epi16(pair));
					}
				}
			} else if (bits == 8) {
				for (j = 0; j < gsz; j += 16) {
					__m512i q = affine_q16(load16_avx512(dt, p + j * esz), vb, vs, vr, vn, divide,
							       &nonfinite);

					_mm_storeu_si128((__m128i *)(void *)(out + j), _mm512_cvtepi32_epi8(q));
				}
			} else if (bits == 4) {
				for (j = 0; j < gsz; j += 16) {
					__m512i q = affine_q16(load16_avx512(dt, p + j * esz), vb, vs, vr, vn, divide,
							       &nonfinite);
					/* In each 64-bit lane the odd value moves next to
					 * the even one: low byte = q[2i] | q[2i+1] << 4. */
					__m512i t = _mm512_or_si512(q, _mm512_srli_epi64(q, 28));

					_mm_storel_epi64((__m128i *)(void *)(out + j / 2), _mm512_cvtepi64_epi8(t));
				}
			} else {
				for (j = 0; j < gsz; j += 16) {
					__m512i q = affine_q16(load16_avx512(dt, p + j * esz), vb, vs, vr, vn, divide,
							       &nonfinite);

					_mm_storeu_si128((__m128i *)(void *)(q8 + j), _mm512_cvtepi32_epi8(q));
				}
			}
			if (nonfinite)
				return block_error(dt, src, g0 + k, g0 + k, gsz, bad);
			if (bits != 8 && bits != 4)
				pack_bytes(q8, gsz, bits, out);
		}
	}
	return 0;
}

TARGET_AVX512 int fg_qk_affine_row_avx512(enum fg_dtype dt, const unsigned char *src, size_t n_groups,
					  int bits, int group, unsigned char *packed, float *scales,
					  float *biases, size_t *bad)
{
	/* One instance per dtype so the loads compile without a branch. */
	switch (dt) {
	case FG_DT_BF16:
		return affine_row_avx512_body(FG_DT_BF16, src, n_groups, bits, group, packed, scales, biases, bad);
	case FG_DT_F16:
		return affine_row_avx512_body(FG_DT_F16, src, n_groups, bits, group, packed, scales, biases, bad);
	default:
		return affine_row_avx512_body(FG_DT_F32, src, n_groups, bits, group, packed, scales, biases, bad);
	}
}

/* -- AVX2 -- */

#define BLOCK8 8

TARGET_AVX2 static ALWAYS_INLINE __m256 load8_avx2(enum fg_dtype dt, const unsigned char *p)
{
	if (dt == FG_DT_BF16) {
		__m128i h = _mm_loadu_si128((const __m128i *)(const void *)p);

		return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
	}
	if (dt == FG_DT_F16)
		return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
	return _mm256_loadu_ps((const float *)(const void *)p);
}

/* As affine_q16, eight lanes; the AVX2 min/max pass looks for NaN itself, so
 * non-finite weights never get here. */
TARGET_AVX2 static ALWAYS_INLINE __m256i affine_q8(__m256 x, __m256 vb, __m256 vs, __m256 vr, __m256i vn,
						bool divide)
{
	__m256 a = _mm256_sub_ps(x, vb), r;

	if (divide) {
		r = _mm256_round_ps(_mm256_div_ps(a, vs), ROUND_NEAREST);
	} else {
		const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
		__m256 t = _mm256_mul_ps(a, vr), near_half;

		r = _mm256_round_ps(t, ROUND_NEAREST);
		near_half = _mm256_cmp_ps(_mm256_and_ps(_mm256_sub_ps(t, r), abs_mask),
					  _mm256_set1_ps(0.5f - 0x1p-10f), _CMP_GE_OQ);
		if (_mm256_movemask_ps(near_half))
			r = _mm256_blendv_ps(r, _mm256_round_ps(_mm256_div_ps(a, vs), ROUND_NEAREST), near_half);
	}
	return _mm256_min_epi32(_mm256_max_epi32(_mm256_cvttps_epi32(r), _mm256_setzero_si256()), vn);
}

/* affine_group_params for eight groups, one per lane. */
TARGET_AVX2 static ALWAYS_INLINE void affine_params8(__m256 wmin, __m256 wmax, float n_bins, __m256 *scale,
						     __m256 *bias)
{
	const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
	const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u));
	const __m256 eps = _mm256_set1_ps(FG_QK_AFFINE_EPS);
	__m256 s = _mm256_div_ps(_mm256_sub_ps(wmax, wmin), _mm256_set1_ps(n_bins));
	__m256 low_edge, edge, q0, nz;

	s = _mm256_blendv_ps(s, eps, _mm256_cmp_ps(s, eps, _CMP_LT_OQ));
	low_edge = _mm256_cmp_ps(_mm256_and_ps(wmin, abs_mask), _mm256_and_ps(wmax, abs_mask), _CMP_GT_OQ);
	s = _mm256_blendv_ps(_mm256_xor_ps(s, sign), s, low_edge);
	edge = _mm256_blendv_ps(wmax, wmin, low_edge);
	q0 = _mm256_round_ps(_mm256_div_ps(edge, s), ROUND_NEAREST);
	nz = _mm256_cmp_ps(q0, _mm256_setzero_ps(), _CMP_NEQ_OQ);
	/* Lanes with q0 == 0 divide by zero; the blend drops them. */
	*scale = _mm256_blendv_ps(s, _mm256_div_ps(edge, q0), nz);
	*bias = _mm256_and_ps(edge, nz);
}

TARGET_AVX2 static ALWAYS_INLINE float hmin_avx2(__m256 v)
{
	__m128 m = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));

	m = _mm_min_ps(m, _mm_movehl_ps(m, m));
	m = _mm_min_ss(m, _mm_shuffle_ps(m, m, 1));
	return _mm_cvtss_f32(m);
}

TARGET_AVX2 static ALWAYS_INLINE float hmax_avx2(__m256 v)
{
	__m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));

	m = _mm_max_ps(m, _mm_movehl_ps(m, m));
	m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
	return _mm_cvtss_f32(m);
}

/* Thirty-two q values in four vectors to 32 bytes in order.  packus works in
 * 128-bit lanes, leaving dwords a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7;
 * the permute restores a0-7 b0-7 c0-7 d0-7.  Values are at most 255, so
 * nothing saturates. */
TARGET_AVX2 static ALWAYS_INLINE __m256i bytes32_avx2(__m256i a, __m256i b, __m256i c, __m256i d)
{
	__m256i ab = _mm256_packus_epi32(a, b), cd = _mm256_packus_epi32(c, d);

	return _mm256_permutevar8x32_epi32(_mm256_packus_epi16(ab, cd),
					   _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

TARGET_AVX2 static ALWAYS_INLINE int affine_row_avx2_body(enum fg_dtype dt, const unsigned char *src,
							   size_t n_groups, int bits, int group,
							   unsigned char *packed, float *scales,
							   float *biases, size_t *bad)
{
	const size_t esz = dt == FG_DT_F32 ? 4 : 2, gsz = (size_t)group;
	const size_t group_bytes = gsz * (size_t)bits / 8;
	const float n_bins = (float)((1 << bits) - 1);
	const __m256i vn = _mm256_set1_epi32((1 << bits) - 1);
	const __m256 inf = _mm256_set1_ps(INFINITY);
	const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
	float mins[BLOCK8], maxs[BLOCK8], sc[BLOCK8], bi[BLOCK8];
	uint8_t q8[FG_QK_AFFINE_MAX_GROUP];
	size_t g0, nb, k, j;

	for (g0 = 0; g0 < n_groups; g0 += nb) {
		unsigned unord_groups = 0, nonfinite, rejected, lanes;
		__m256 vmin8, vmax8, vs8, vb8;

		nb = n_groups - g0 < BLOCK8 ? n_groups - g0 : BLOCK8;
		lanes = (1u << nb) - 1u;
		for (k = 0; k < BLOCK8; k++) {
			const unsigned char *p = src + (g0 + k) * gsz * esz;
			__m256 vmin = inf, vmax = _mm256_set1_ps(-INFINITY), unord = _mm256_setzero_ps();

			if (k >= nb) {
				mins[k] = maxs[k] = 0.0f;
				continue;
			}
			for (j = 0; j < gsz; j += 8) {
				__m256 x = load8_avx2(dt, p + j * esz);

				_mm_prefetch((const char *)((uintptr_t)(p + j * esz) + PREFETCH_AHEAD), _MM_HINT_T0);
				vmin = _mm256_min_ps(vmin, x);
				vmax = _mm256_max_ps(vmax, x);
				unord = _mm256_or_ps(unord, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
			}
			mins[k] = hmin_avx2(vmin);
			maxs[k] = hmax_avx2(vmax);
			if (_mm256_movemask_ps(unord))
				unord_groups |= 1u << k;
		}
		vmin8 = _mm256_loadu_ps(mins);
		vmax8 = _mm256_loadu_ps(maxs);
		nonfinite = unord_groups |
			    (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(vmin8, abs_mask), inf, _CMP_EQ_OQ)) |
			    (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(vmax8, abs_mask), inf, _CMP_EQ_OQ));
		rejected = (nonfinite |
			    (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(
				    _mm256_and_ps(_mm256_sub_ps(vmax8, vmin8), abs_mask), inf, _CMP_NLT_UQ))) &
			   lanes;
		/* Pass 1 saw every NaN, so earlier groups are clean. */
		if (rejected) {
			k = g0 + (size_t)__builtin_ctz(rejected);
			return block_error(dt, src, k, k, gsz, bad);
		}
		affine_params8(vmin8, vmax8, n_bins, &vs8, &vb8);
		_mm256_storeu_ps(sc, vs8);
		_mm256_storeu_ps(bi, vb8);
		memcpy(scales + g0, sc, nb * sizeof(float));
		memcpy(biases + g0, bi, nb * sizeof(float));
		for (k = 0; k < nb; k++) {
			const unsigned char *p = src + (g0 + k) * gsz * esz;
			unsigned char *out = packed + (g0 + k) * group_bytes;
			const __m256 vs = _mm256_set1_ps(sc[k]), vb = _mm256_set1_ps(bi[k]);
			const __m256 vr = _mm256_set1_ps(1.0f / sc[k]);
			const bool divide = !(fabsf(sc[k]) < 0x1p100f);

			for (j = 0; j < gsz; j += 32) {
				__m256i q = bytes32_avx2(affine_q8(load8_avx2(dt, p + j * esz), vb, vs, vr, vn, divide),
							 affine_q8(load8_avx2(dt, p + (j + 8) * esz), vb, vs, vr, vn, divide),
							 affine_q8(load8_avx2(dt, p + (j + 16) * esz), vb, vs, vr, vn, divide),
							 affine_q8(load8_avx2(dt, p + (j + 24) * esz), vb, vs, vr, vn, divide));

				if (bits == 8) {
					_mm256_storeu_si256((__m256i *)(void *)(out + j), q);
				} else if (bits == 4) {
					/* As 16-bit lanes e0 | e1 << 8: or-ing in the
					 * lane shifted by 4 puts e1 in bits 4-7; pack the
					 * low bytes (lane-wise again, so keep quadwords 0
					 * and 2). */
					__m256i t = _mm256_and_si256(_mm256_or_si256(q, _mm256_srli_epi16(q, 4)),
								     _mm256_set1_epi16(0x00ff));
					__m256i n4 = _mm256_permute4x64_epi64(_mm256_packus_epi16(t, t), 0x08);

					_mm_storeu_si128((__m128i *)(void *)(out + j / 2), _mm256_castsi256_si128(n4));
				} else {
					_mm256_storeu_si256((__m256i *)(void *)(q8 + j), q);
				}
			}
			if (bits != 8 && bits != 4)
				pack_bytes(q8, gsz, bits, out);
		}
	}
	return 0;
}

TARGET_AVX2 int fg_qk_affine_row_avx2(enum fg_dtype dt, const unsigned char *src, size_t n_groups,
				      int bits, int group, unsigned char *packed, float *scales,
				      float *biases, size_t *bad)
{
	switch (dt) {
	case FG_DT_BF16:
		return affine_row_avx2_body(FG_DT_BF16, src, n_groups, bits, group, packed, scales, biases, bad);
	case FG_DT_F16:
		return affine_row_avx2_body(FG_DT_F16, src, n_groups, bits, group, packed, scales, biases, bad);
	default:
		return affine_row_avx2_body(FG_DT_F32, src, n_groups, bits, group, packed, scales, biases, bad);
	}
}

#endif /* __x86_64__ */
