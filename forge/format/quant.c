/*
 * quant.c: MLX affine and mxfp4 quantization, and FP8 block-scaled
 * dequantization, on bands of rows.
 *
 * forged re-quantizes an MTP head so that it matches the MLX backbone it is
 * shipped with: same bits, group size and mode, and the same packed words MLX
 * itself would write, so a head converted here and one converted by mlx-lm are
 * interchangeable byte for byte.  FP8 sources (DeepSeek-V3) are dequantized
 * first.  Tensors can be gigabytes, so everything works on a range of rows
 * with stack buffers only.
 *
 * Where the definitions come from (read in ml-explore/mlx, commit 846d176,
 * August 2026):
 *   - affine: mlx/backend/cpu/quantized.cpp, function quantize().  It keeps
 *     min and max from +-infinity, computes scale, edge and q0 in float as
 *     domain.md section 5 states, divides (no reciprocal), rounds with
 *     std::rint, clamps to [0, N], and casts scale and bias to the source
 *     type only when storing them: the q values use the F32 scale.  That is
 *     exactly domain.md; the differences are at the edges: MLX lets NaN slip
 *     through its min/max (std::max keeps its first argument) and then casts
 *     a NaN q to an integer (undefined), and an infinite weight gives an
 *     infinite scale; forged refuses both.  MLX groups over the flattened
 *     tensor, the same thing when cols is a multiple of group.  For 3, 5 and
 *     6 bits it writes bytes of 24- or 40-bit packs, which is the same
 *     little-endian bit stream.  The Metal kernel differs as domain.md says
 *     (max starts at 0, round() is half away from zero, no clamp at 0); the
 *     generic fallback in mlx/ops.cpp agrees with the CPU kernel.
 *   - mxfp4: MLX has three implementations that do not agree.  (1) The Metal
 *     kernel fp_quantize (mlx/backend/metal/kernels/fp_quantized.h, fp4.h,
 *     fp8.h), what mlx-lm runs on a Mac, and the CPU helpers to_fp8_e8m0 and
 *     to_fp4_e2m1 in quantized.cpp: d = amax / 6 in float, exponent
 *     round(log2(d)) with round() half away from zero, clamped to
 *     [-127, 127], stored +127; values w * (1 / 2^e) (a product with the
 *     reciprocal, exact for a power of two) through comparisons that are
 *     round-to-nearest-even on the code (> 0.25, >= 0.75, > 1.25, >= 1.75,
 *     > 2.5, >= 3.5, > 5), keeping the sign bit.  (2) The CPU path of
 *     mx.quantize is the op graph in mlx/ops.cpp fp_quantize(): the same
 *     steps in the source dtype (a BF16 input rounds d and log2(d) to BF16),
 *     round() half to even, d == 0 gives exponent 0 (byte 127) instead of
 *     byte 0, and values by argmin over the code table, so ties go to the
 *     smaller magnitude and a small negative value becomes +0, never -0.
 *     (3) CUDA converts through cutlass's float_ue8m0_t.  forged implements
 *     (1).  Its log2 is evaluated in float; we take the correctly rounded
 *     float log2 (log2 in double, then rounded to float) so the result does
 *     not depend on a libm: a faithful-but-not-correct log2f can move a
 *     value within an ulp or two of 2^(k + 1/2) to the other exponent.  For
 *     d = 0, Metal's log2 gives -inf, which converts to the most negative
 *     integer and clamps to -127: byte 0.
 *   - FP8 blocks: DeepSeek-V3's weight_dequant (W = fp8 * scale_inv per
 *     128 x 128 block, F32, then the target dtype).
 *
 * Layers, as in dtype.c.  The _ref functions are plain C written from the
 * spec: affine widens a group with dtype.c's reference, finds min and max,
 * runs affine_group_params, divides and rounds one value at a time and packs
 * through a 64-bit bit-stream accumulator; FP8 converts one code at a time.
 * The dispatched functions use a kernel set chosen once per process:
 * "avx512", "avx2" or "scalar" (FORGED_SIMD=scalar or =avx2 caps the choice;
 * the scalar set is the reference kernels).  The vector kernels reach the
 * same bits by other routes, which is what makes the agreement tests worth
 * running:
 *   - affine works on blocks of 16 (8) groups: min/max in vectors (BF16
 *     split into even and odd values, 32 per load), the group step computed
 *     lane-wise for the whole block, then per value a product with the
 *     rounded reciprocal of the scale, with a division only for the rare
 *     values where that could round differently (see affine_q16), and
 *     packing in registers for 8 and 4 bits (SWAR over bytes otherwise);
 *   - FP8 widens codes through F16C and narrows to BF16 with an integer
 *     add, fused per 128-column block (see fp8_block_avx512); the scalar set
 *     composes dtype.c's bulk conversions instead.
 * The vector code assumes the default MXCSR (round to nearest, no DAZ/FTZ),
 * as the reference's rintf and float arithmetic do.
 *
 * Floating-point contraction: the dequantization product and sum are kept in
 * separate statements (and separate intrinsics) so no compiler fuses them.
 */
#include "forge/format/quant.h"
#include "forge/core/bytes.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

/* Largest group of any mode; sizes the per-group stack buffers. */
#define AFFINE_MAX_GROUP 128
/* Groups quantized per call of a row kernel: bounds the stack buffers of
 * scales and biases that are narrowed to the storage dtype afterwards. */
#define GROUPS_PER_CHUNK 64

/* Bytes ahead of the min/max pass the vector kernels prefetch: a block or
 * two of groups (measured: +25% on a 1 GiB BF16 tensor from DRAM). */
#define PREFETCH_AHEAD 4096

/* What a row kernel reports instead of 0. */
#define ROW_NONFINITE 1 /* a weight is NaN or infinite */
#define ROW_RANGE 2     /* a group's max - min overflows F32 */

static const float affine_eps = 1e-7f;

/* ---- byte access ---------------------------------------------------------- */






/* ---- parameters ------------------------------------------------------------- */

static const int affine_bits[] = { 2, 3, 4, 5, 6, 8 };
static const int affine_groups[] = { 32, 64, 128 };

static bool int_in(int v, const int *set, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (set[i] == v)
			return true;
	return false;
}

static bool affine_bits_ok(int bits)
{
	return int_in(bits, affine_bits, sizeof(affine_bits) / sizeof(affine_bits[0]));
}

size_t fg_quant_affine_row_words(size_t cols, int bits)
{
	if (!affine_bits_ok(bits))
		return 0;
	return cols / 32 * (size_t)bits + cols % 32 * (size_t)bits / 32;
}

int fg_quant_affine_check(size_t rows, size_t cols, int bits, int group, struct fg_err *err)
{
	if (!affine_bits_ok(bits))
		return fg_err_set(err, FG_EINPUT,
				  "affine quantization: %d bits not supported (2, 3, 4, 5, 6 or 8)", bits);
	if (!int_in(group, affine_groups, sizeof(affine_groups) / sizeof(affine_groups[0])))
		return fg_err_set(err, FG_EINPUT,
				  "affine quantization: group size %d not supported (32, 64 or 128)", group);
	if (cols % (size_t)group)
		return fg_err_set(err, FG_EINPUT,
				  "affine quantization: weight [%zu, %zu] has %zu columns, not a multiple of the group size %d",
				  rows, cols, cols, group);
	/* Implied by the above (group is a multiple of 32); kept as the rule. */
	if (cols % 32 * (size_t)bits % 32)
		return fg_err_set(err, FG_EINPUT,
				  "affine quantization: weight [%zu, %zu] at %d bits does not fill whole uint32 words",
				  rows, cols, bits);
	return 0;
}

/* rows * cols elements of elem bytes fit in size_t (so every offset does). */
static int check_size(const char *what, size_t rows, size_t cols, size_t elem, struct fg_err *err)
{
	if (cols && rows > SIZE_MAX / cols / elem)
		return fg_err_set(err, FG_EINPUT, "%s: weight [%zu, %zu] is too large to address", what,
				  rows, cols);
	return 0;
}

static bool dtype_is_param(enum fg_dtype dt)
{
	return dt == FG_DT_F32 || dt == FG_DT_F16 || dt == FG_DT_BF16;
}

/* ---- affine: the reference ------------------------------------------------- */

/*
 * Scale and bias of a group from its min and max (both finite), as MLX's CPU
 * kernel computes them; returns FG_EINPUT when max - min overflows F32, which would
 * make the scale infinite.  std::max(x, eps) returns eps only when x < eps,
 * hence the comparison (x is never NaN here).  The vector kernels compute the
 * same steps in the lanes of a vector, one group per lane.
 */
static int affine_group_params(float wmin, float wmax, float n_bins, float *scale, float *bias)
{
	float range = wmax - wmin;
	float s, edge, q0;
	bool low_edge;

	if (!isfinite(range))
		return FG_EINPUT;
	s = range / n_bins;
	if (s < affine_eps)
		s = affine_eps;
	low_edge = fabsf(wmin) > fabsf(wmax);
	if (!low_edge)
		s = -s;
	edge = low_edge ? wmin : wmax;
	q0 = rintf(edge / s);
	if (q0 != 0.0f) {
		s = edge / q0;
		*bias = edge;
	} else {
		*bias = 0.0f;
	}
	*scale = s;
	return 0;
}

/* Column of the first non-finite value among n of dt at src (n if none). */
static size_t first_nonfinite(enum fg_dtype dt, const unsigned char *src, size_t n)
{
	float x[AFFINE_MAX_GROUP];
	size_t esz = fg_dtype_size(dt), i, k, m;

	for (i = 0; i < n; i += m) {
		m = n - i < AFFINE_MAX_GROUP ? n - i : AFFINE_MAX_GROUP;
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
			return ROW_NONFINITE;
		}
	}
	*bad = last * gsz;
	return ROW_RANGE;
}

/*
 * A row kernel quantizes n_groups groups of one row: src holds
 * n_groups * group values of dt (F32, F16 or BF16, any alignment); it writes
 * n_groups * group * bits / 32 words at packed and one F32 scale and bias per
 * group into scales[] and biases[] (the caller's stack arrays).  Returns 0,
 * or ROW_NONFINITE / ROW_RANGE with *bad set to the column (counted from src)
 * of the first non-finite value or the first column of the overflowing group.
 */
typedef int (*affine_row_fn)(enum fg_dtype dt, const unsigned char *src, size_t n_groups, int bits,
			     int group, unsigned char *packed, float *scales, float *biases, size_t *bad);

/*
 * The reference: the spec one element at a time.  The packed words come from
 * one bit stream per call (a group's bits always end on a word boundary, so
 * calls can start anywhere a group starts).
 */
static int affine_row_ref(enum fg_dtype dt, const unsigned char *src, size_t n_groups, int bits,
			  int group, unsigned char *packed, float *scales, float *biases, size_t *bad)
{
	const float n_bins = (float)((1 << bits) - 1);
	const size_t esz = fg_dtype_size(dt), gsz = (size_t)group;
	float x[AFFINE_MAX_GROUP];
	uint64_t stream = 0;
	size_t g, j, word = 0;
	int stream_bits = 0;

	for (g = 0; g < n_groups; g++) {
		float wmin = INFINITY, wmax = -INFINITY, s, b;

		fg_dtype_to_f32_ref(dt, src + g * gsz * esz, x, gsz);
		for (j = 0; j < gsz; j++) {
			if (!isfinite(x[j])) {
				*bad = g * gsz + j;
				return ROW_NONFINITE;
			}
			if (x[j] > wmax)
				wmax = x[j];
			if (x[j] < wmin)
				wmin = x[j];
		}
		if (affine_group_params(wmin, wmax, n_bins, &s, &b) < 0) {
			*bad = g * gsz;
			return ROW_RANGE;
		}
		scales[g] = s;
		biases[g] = b;
		for (j = 0; j < gsz; j++) {
			float q = rintf((x[j] - b) / s);

			if (q < 0.0f)
				q = 0.0f;
			if (q > n_bins)
				q = n_bins;
			stream |= (uint64_t)q << stream_bits;
			stream_bits += bits;
			if (stream_bits >= 32) {
				fg_store_u32(packed + 4 * word++, (uint32_t)stream);
				stream >>= 32;
				stream_bits -= 32;
			}
		}
	}
	return 0;
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
	unsigned char stage[AFFINE_MAX_GROUP * 6 / 8 + 8];
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

/* ---- x86 vector kernels ------------------------------------------------------- */

#if defined(__x86_64__)

#define TARGET_AVX2 __attribute__((target("avx2,f16c")))
#define TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,f16c")))
#define ALWAYS_INLINE inline __attribute__((always_inline))
/* rint: round to nearest even, no precision exception (an immediate operand). */
#define ROUND_NEAREST (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

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
	const __m512 eps = _mm512_set1_ps(affine_eps);
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
	uint8_t q8[AFFINE_MAX_GROUP];
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

TARGET_AVX512 static int affine_row_avx512(enum fg_dtype dt, const unsigned char *src, size_t n_groups,
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
	const __m256 eps = _mm256_set1_ps(affine_eps);
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
	uint8_t q8[AFFINE_MAX_GROUP];
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

TARGET_AVX2 static int affine_row_avx2(enum fg_dtype dt, const unsigned char *src, size_t n_groups,
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

TARGET_AVX512 static void fp8_block_avx512(const uint8_t *src, size_t n, float scale, unsigned char *dst,
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

TARGET_AVX2 static void fp8_block_avx2(const uint8_t *src, size_t n, float scale, unsigned char *dst,
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

/* ---- kernel sets and dispatch ----------------------------------------------- */

struct quant_kernels {
	const char *name;
	affine_row_fn affine_row;
	/* n <= 128 E4M3 codes times scale (with scale * 256 finite) to F32 or
	 * BF16 at dst; NULL: compose dtype.c's conversions instead. */
	void (*fp8_block)(const uint8_t *src, size_t n, float scale, unsigned char *dst, bool bf16);
	int (*to_f32)(enum fg_dtype dt, const void *src, float *dst, size_t n);
	int (*from_f32)(enum fg_dtype dt, const float *src, void *dst, size_t n);
};

/* The _ref functions: reference kernels and dtype.c's reference conversions. */
static const struct quant_kernels kernels_ref = {
	"ref", affine_row_ref, NULL, fg_dtype_to_f32_ref, fg_dtype_from_f32_ref,
};

static const struct quant_kernels kernels_scalar = {
	"scalar", affine_row_ref, NULL, fg_dtype_to_f32, fg_dtype_from_f32,
};

#if defined(__x86_64__)
static const struct quant_kernels kernels_avx2 = {
	"avx2", affine_row_avx2, fp8_block_avx2, fg_dtype_to_f32, fg_dtype_from_f32,
};

static const struct quant_kernels kernels_avx512 = {
	"avx512", affine_row_avx512, fp8_block_avx512, fg_dtype_to_f32, fg_dtype_from_f32,
};

/* CPUID.1:ECX bit 29 (clang's __builtin_cpu_supports does not know f16c). */
static bool cpu_has_f16c(void)
{
	unsigned int eax, ebx, ecx, edx;

	return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
}
#endif

static pthread_once_t dispatch_once = PTHREAD_ONCE_INIT;
static const struct quant_kernels *active_kernels = &kernels_scalar;

/* Runs once: the same rule and the same FORGED_SIMD cap as dtype.c. */
static void dispatch_init(void)
{
	const char *cap = getenv("FORGED_SIMD");

	active_kernels = &kernels_scalar;
	if (cap && strcmp(cap, "scalar") == 0)
		return;
#if defined(__x86_64__)
	__builtin_cpu_init();
	if (!(cap && strcmp(cap, "avx2") == 0) && __builtin_cpu_supports("avx512f") &&
	    __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") && cpu_has_f16c()) {
		active_kernels = &kernels_avx512;
		return;
	}
	if (__builtin_cpu_supports("avx2") && cpu_has_f16c())
		active_kernels = &kernels_avx2;
#endif
}

static const struct quant_kernels *dispatch(void)
{
	pthread_once(&dispatch_once, dispatch_init);
	return active_kernels;
}

const char *fg_quant_simd_path(void)
{
	return dispatch()->name;
}

/* ---- affine: row drivers ---------------------------------------------------- */

/*
 * Quantize rows of dt weights; scales and biases are written as param_dt.
 * Parameter checks come before the first write; a non-finite weight or an
 * overflowing group stops the band where it is met.
 */
static int affine_run(const struct quant_kernels *ks, enum fg_dtype dt, const void *w, size_t rows,
		      size_t cols, int bits, int group, uint32_t *packed, void *scales, void *biases,
		      enum fg_dtype param_dt, struct fg_err *err)
{
	const unsigned char *src = w;
	unsigned char *pk = (unsigned char *)packed, *sc = scales, *bi = biases;
	size_t esz, psz, words, gpr, r, g0, ng, bad = 0;
	float sbuf[GROUPS_PER_CHUNK], bbuf[GROUPS_PER_CHUNK];
	int rc;

	if (!dtype_is_param(dt) || !dtype_is_param(param_dt))
		return fg_err_set(err, FG_EUSAGE, "affine quantization: weights of dtype %s not supported (F32, F16 or BF16)",
				  fg_dtype_name(dt));
	rc = fg_quant_affine_check(rows, cols, bits, group, err);
	if (rc)
		return rc;
	esz = fg_dtype_size(dt);
	psz = fg_dtype_size(param_dt);
	rc = check_size("affine quantization", rows, cols, 4, err);
	if (rc)
		return rc;
	if (!rows || !cols)
		return 0;
	if (!w || !packed || !scales || !biases)
		return fg_err_set(err, FG_EUSAGE, "affine quantization: NULL buffer");
	words = fg_quant_affine_row_words(cols, bits);
	gpr = cols / (size_t)group;
	for (r = 0; r < rows; r++) {
		for (g0 = 0; g0 < gpr; g0 += ng) {
			size_t col0 = g0 * (size_t)group;

			ng = gpr - g0 < GROUPS_PER_CHUNK ? gpr - g0 : GROUPS_PER_CHUNK;
			rc = ks->affine_row(dt, src + (r * cols + col0) * esz, ng, bits, group,
					    pk + 4 * (r * words + col0 / 32 * (size_t)bits), sbuf, bbuf, &bad);
			if (rc == ROW_NONFINITE)
				return fg_err_set(err, FG_EINPUT,
						  "affine quantization: non-finite weight at row %zu, column %zu",
						  r, col0 + bad);
			if (rc)
				return fg_err_set(err, FG_EINPUT,
						  "affine quantization: group at row %zu, columns %zu-%zu spans more than the F32 range",
						  r, col0 + bad, col0 + bad + (size_t)group - 1);
			ks->from_f32(param_dt, sbuf, sc + (r * gpr + g0) * psz, ng);
			ks->from_f32(param_dt, bbuf, bi + (r * gpr + g0) * psz, ng);
		}
	}
	return 0;
}

int fg_quant_affine_rows(const float *w, size_t rows, size_t cols, int bits, int group,
			 uint32_t *packed, float *scales, float *biases, struct fg_err *err)
{
	return affine_run(dispatch(), FG_DT_F32, w, rows, cols, bits, group, packed, scales, biases,
			  FG_DT_F32, err);
}

int fg_quant_affine_rows_ref(const float *w, size_t rows, size_t cols, int bits, int group,
			     uint32_t *packed, float *scales, float *biases, struct fg_err *err)
{
	return affine_run(&kernels_ref, FG_DT_F32, w, rows, cols, bits, group, packed, scales, biases,
			  FG_DT_F32, err);
}

int fg_quant_affine_rows_dt(enum fg_dtype dt, const void *w, size_t rows, size_t cols, int bits,
			    int group, uint32_t *packed, void *scales, void *biases, struct fg_err *err)
{
	return affine_run(dispatch(), dt, w, rows, cols, bits, group, packed, scales, biases, dt, err);
}

int fg_quant_affine_rows_dt_ref(enum fg_dtype dt, const void *w, size_t rows, size_t cols, int bits,
				int group, uint32_t *packed, void *scales, void *biases,
				struct fg_err *err)
{
	return affine_run(&kernels_ref, dt, w, rows, cols, bits, group, packed, scales, biases, dt, err);
}

/* ---- affine: dequantization ---------------------------------------------------- */

static int affine_dequant_run(enum fg_dtype dt, const uint32_t *packed, const void *scales,
			      const void *biases, size_t rows, size_t cols, int bits, int group,
			      float *out, struct fg_err *err)
{
	const unsigned char *pk = (const unsigned char *)packed, *sc = scales, *bi = biases;
	unsigned char *dst = (unsigned char *)out;
	const uint32_t mask = (1u << bits) - 1u;
	float sbuf[GROUPS_PER_CHUNK], bbuf[GROUPS_PER_CHUNK];
	size_t psz, words, gpr, r, g0, ng, c;
	int rc;

	if (!dtype_is_param(dt))
		return fg_err_set(err, FG_EUSAGE, "affine dequantization: scales of dtype %s not supported (F32, F16 or BF16)",
				  fg_dtype_name(dt));
	rc = fg_quant_affine_check(rows, cols, bits, group, err);
	if (rc)
		return rc;
	rc = check_size("affine dequantization", rows, cols, 4, err);
	if (rc)
		return rc;
	if (!rows || !cols)
		return 0;
	if (!packed || !scales || !biases || !out)
		return fg_err_set(err, FG_EUSAGE, "affine dequantization: NULL buffer");
	psz = fg_dtype_size(dt);
	words = fg_quant_affine_row_words(cols, bits);
	gpr = cols / (size_t)group;
	for (r = 0; r < rows; r++) {
		const unsigned char *row = pk + 4 * r * words;

		for (g0 = 0; g0 < gpr; g0 += ng) {
			ng = gpr - g0 < GROUPS_PER_CHUNK ? gpr - g0 : GROUPS_PER_CHUNK;
			fg_dtype_to_f32(dt, sc + (r * gpr + g0) * psz, sbuf, ng);
			fg_dtype_to_f32(dt, bi + (r * gpr + g0) * psz, bbuf, ng);
			for (c = g0 * (size_t)group; c < (g0 + ng) * (size_t)group; c++) {
				size_t pos = c * (size_t)bits, gi = c / (size_t)group - g0;
				unsigned sh = (unsigned)(pos & 31);
				uint32_t v = fg_load_u32(row + 4 * (pos >> 5)) >> sh;
				float t;

				if (sh + (unsigned)bits > 32)
					v |= fg_load_u32(row + 4 * (pos >> 5) + 4) << (32 - sh);
				t = sbuf[gi] * (float)(v & mask);
				fg_store_f32(dst + 4 * (r * cols + c), t + bbuf[gi]);
			}
		}
	}
	return 0;
}

int fg_dequant_affine_rows(const uint32_t *packed, const float *scales, const float *biases,
			   size_t rows, size_t cols, int bits, int group, float *out,
			   struct fg_err *err)
{
	return affine_dequant_run(FG_DT_F32, packed, scales, biases, rows, cols, bits, group, out, err);
}

int fg_dequant_affine_rows_dt(enum fg_dtype dt, const uint32_t *packed, const void *scales,
			      const void *biases, size_t rows, size_t cols, int bits, int group,
			      float *out, struct fg_err *err)
{
	return affine_dequant_run(dt, packed, scales, biases, rows, cols, bits, group, out, err);
}

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
	return check_size(what, rows, cols, 4, err);
}

static int mxfp4_run(enum fg_dtype dt, const void *w, size_t rows, size_t cols, uint32_t *packed,
		     uint8_t *scales, struct fg_err *err)
{
	const unsigned char *src = w;
	unsigned char *pk = (unsigned char *)packed;
	float x[FG_MXFP4_GROUP];
	size_t esz, gpr, r, g;
	int rc, k;

	if (!dtype_is_param(dt))
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
	return check_size("fp8 block dequantization", rows, cols, 4, err);
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
	const struct quant_kernels *ks = dispatch();
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
