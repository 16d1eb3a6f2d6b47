/*
 * dtype.c: the safetensors element types (size, name, parse) and conversion of
 * the float types BF16, F16, F8_E4M3 and F8_E5M2 to and from F32.
 *
 * forged reads every float tensor through F32: statistics, norm-convention
 * probes, re-quantization and dequantizing FP8 sources all start by widening,
 * and writing a BF16 or F16 artifact ends by narrowing.  Narrowing is where
 * silent damage happens (an offset of 0.0011 added to 1.0 vanishes in BF16),
 * so its rounding is defined exactly and tested exhaustively.
 *
 * Two layers:
 *   - reference conversions (fg_*_ref) in plain C on bit patterns, written for
 *     clarity, not speed: widening F16 and FP8 by ldexpf arithmetic, narrowing
 *     by one integer round-to-nearest-even routine shared by F16 and both FP8
 *     formats (BF16, a truncated F32, needs only an add);
 *   - bulk kernels chosen once per process from a table of kernel sets:
 *     "avx512" (AVX-512F/BW/VL), "avx2+f16c", or "scalar".  They use other
 *     algorithms than the reference (F16C instructions, a float "magic add"
 *     for FP8 subnormals, FP8 widening through F16) so the bit-for-bit tests
 *     in tests/unit/test_dtype.c compare two independent implementations.
 *     The scalar kernel set widens FP8 through 256-entry tables built from
 *     the reference on first use; the vector sets compute instead.
 *
 * Rules every path follows (the header states them, these are the details):
 *   - narrowing rounds to nearest, ties to even, into subnormals as well;
 *     values rounding past the largest finite value become infinity (F16,
 *     BF16, E5M2) or saturate to +-448 (E4M3, which has no infinity).  E4M3
 *     saturates infinite inputs too, and the midpoint 464 between 448 and the
 *     missing 480 would round to the odd code 0x7f (NaN), so it saturates;
 *   - every NaN produced is quiet and keeps the sign.  The payload rule is the
 *     one F16C hardware applies, so the F16C kernels need no fix-up: widening
 *     keeps the payload bits and sets the quiet bit; narrowing to F16 or BF16
 *     truncates the payload and sets the quiet bit; E5M2 NaN is the high byte
 *     of the F16 NaN; E4M3 NaN is 0x7f with the sign and widens to 0x7fc00000
 *     with the sign.  Widening a BF16 signalling NaN therefore also sets the
 *     quiet bit (not a bare shift);
 *   - the vector kernels assume the default MXCSR rounding mode (nearest).
 *     DAZ/FTZ (a -ffast-math process) cannot change a result: the BF16
 *     kernels are integer-only, no float operation here produces a subnormal,
 *     and the F32 subnormals DAZ would flush round to zero in F16 and FP8
 *     anyway.  Lanes whose result is discarded may raise the invalid or
 *     inexact flags; nothing in forged traps on them.
 *
 * Dispatch: the kernel set follows fg_cpu_simd() (forge/core/cpu.h), decided
 * once per process: the environment variable FORGED_SIMD, read once at the
 * first call, caps it: "scalar" forces the scalar kernels, "avx2" forbids
 * AVX-512; unset or any other value means the best the CPU supports.  Tests
 * and benchmarks use it to exercise every path on one machine.
 *
 * Pointers need no alignment: scalar code moves bytes with memcpy and vector
 * code uses unaligned loads and stores; a float pointer from the caller is
 * never dereferenced as a float.  Source and destination must not overlap.
 */
#include "forge/format/dtype.h"
#include "forge/core/bytes.h"
#include "forge/core/cpu.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* ---- the dtype table ---------------------------------------------------- */

struct dtype_row {
	const char *name; /* as safetensors spells it */
	size_t size;      /* bytes per element */
	bool is_float;
};

static const struct dtype_row dtype_rows[FG_DT_COUNT] = {
	[FG_DT_F64] = { "F64", 8, true },
	[FG_DT_F32] = { "F32", 4, true },
	[FG_DT_F16] = { "F16", 2, true },
	[FG_DT_BF16] = { "BF16", 2, true },
	[FG_DT_I64] = { "I64", 8, false },
	[FG_DT_I32] = { "I32", 4, false },
	[FG_DT_I16] = { "I16", 2, false },
	[FG_DT_I8] = { "I8", 1, false },
	[FG_DT_U64] = { "U64", 8, false },
	[FG_DT_U32] = { "U32", 4, false },
	[FG_DT_U16] = { "U16", 2, false },
	[FG_DT_U8] = { "U8", 1, false },
	[FG_DT_BOOL] = { "BOOL", 1, false },
	[FG_DT_F8_E4M3] = { "F8_E4M3", 1, true },
	[FG_DT_F8_E5M2] = { "F8_E5M2", 1, true },
};

static bool dtype_valid(enum fg_dtype dt)
{
	return (unsigned)dt < FG_DT_COUNT;
}

size_t fg_dtype_size(enum fg_dtype dt)
{
	return dtype_valid(dt) ? dtype_rows[dt].size : 0;
}

const char *fg_dtype_name(enum fg_dtype dt)
{
	/* Not NULL even for garbage: callers print this in error messages. */
	return dtype_valid(dt) ? dtype_rows[dt].name : "invalid";
}

int fg_dtype_parse(const char *name, enum fg_dtype *out)
{
	int i;

	if (!name)
		return FG_EINPUT;
	for (i = 0; i < FG_DT_COUNT; i++) {
		if (strcmp(name, dtype_rows[i].name) == 0) {
			*out = (enum fg_dtype)i;
			return 0;
		}
	}
	return FG_EINPUT;
}

bool fg_dtype_is_float(enum fg_dtype dt)
{
	return dtype_valid(dt) && dtype_rows[dt].is_float;
}

/* ---- bit access ----------------------------------------------------------- */



/* Element loads and stores at any alignment (tensor data sits at arbitrary
 * offsets inside a mapping). */




#define F32_ABS_MASK 0x7fffffffu
#define F32_INF 0x7f800000u
#define F32_QUIET 0x00400000u
#define F32_MANT_MASK 0x007fffffu

/* ---- reference conversions ----------------------------------------------- */

/*
 * A narrow binary format with an implicit leading bit, described by what the
 * rounding routine needs.  ovf_code is what a value rounding past max_code
 * becomes: the infinity code, or max_code itself for a saturating format.
 */
struct minifloat {
	int mant_bits;
	int bias;
	uint32_t max_code; /* largest finite magnitude */
	uint32_t ovf_code;
};

static const struct minifloat fmt_f16 = { 10, 15, 0x7bff, 0x7c00 };
static const struct minifloat fmt_e4m3 = { 3, 7, 0x7e, 0x7e };
static const struct minifloat fmt_e5m2 = { 2, 15, 0x7b, 0x7c };

/*
 * Round the non-NaN F32 magnitude a (sign cleared; infinity allowed) to the
 * nearest code of fmt, ties to even, and return the magnitude code.  The
 * significand is shifted right by the number of bits the target lacks, plus
 * the exponent shortfall when the result is subnormal, so one rule covers
 * normals and subnormals; a carry out of the mantissa bumps the exponent
 * field, which is exactly the next code up.
 */
static uint32_t minifloat_round(const struct minifloat *fmt, uint32_t a)
{
	uint32_t exp = a >> 23, sig, q, rem, half, code;
	int te, shift;

	/* F32 zeros and subnormals are below 2^-126: far below half the
	 * smallest subnormal of every format here. */
	if (exp == 0)
		return 0;
	sig = (a & F32_MANT_MASK) | 0x00800000u;
	te = (int)exp - 127 + fmt->bias;
	shift = 23 - fmt->mant_bits + (te < 1 ? 1 - te : 0);
	/* sig < 2^24: with 25 or more bits dropped it is below half an ulp. */
	if (shift > 24)
		return 0;
	q = sig >> shift;
	rem = sig & ((1u << shift) - 1);
	half = 1u << (shift - 1);
	if (rem > half || (rem == half && (q & 1)))
		q++;
	code = (te >= 1 ? (uint32_t)(te - 1) << fmt->mant_bits : 0) + q;
	/* Infinity (exp 255) lands here too, far above max_code. */
	return code > fmt->max_code ? fmt->ovf_code : code;
}

float fg_bf16_to_f32_ref(uint16_t h)
{
	uint32_t x = (uint32_t)h << 16;

	if ((x & F32_ABS_MASK) > F32_INF)
		x |= F32_QUIET;
	return fg_bits_f32(x);
}

uint16_t fg_f32_to_bf16_ref(float f)
{
	uint32_t x = fg_f32_bits(f);

	/* Rounding a NaN could carry it into infinity: keep it a NaN. */
	if ((x & F32_ABS_MASK) > F32_INF)
		return (uint16_t)((x >> 16) | 0x0040);
	/* BF16 is F32 with 16 mantissa bits dropped, same exponent range, so
	 * RNE is one add; the carry into the exponent (and into infinity past
	 * the largest finite value) is the correct result. */
	x += 0x7fffu + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

float fg_f16_to_f32_ref(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
	float mag;

	if (e == 0x1f)
		return fg_bits_f32(sign | F32_INF | (m ? F32_QUIET | m << 13 : 0));
	if (e)
		mag = ldexpf((float)(m | 0x400), (int)e - 25);
	else
		mag = ldexpf((float)m, -24);
	return fg_bits_f32(sign | fg_f32_bits(mag));
}

uint16_t fg_f32_to_f16_ref(float f)
{
	uint32_t x = fg_f32_bits(f), a = x & F32_ABS_MASK;
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000);

	if (a > F32_INF)
		return (uint16_t)(sign | 0x7e00 | ((a & F32_MANT_MASK) >> 13));
	return (uint16_t)(sign | minifloat_round(&fmt_f16, a));
}

float fg_e4m3_to_f32_ref(uint8_t b)
{
	uint32_t sign = (uint32_t)(b & 0x80) << 24;
	int e = (b >> 3) & 0xf, m = b & 7;
	float mag;

	/* E4M3FN: exponent 15 holds finite values, only S.1111.111 is NaN. */
	if ((b & 0x7f) == 0x7f)
		return fg_bits_f32(sign | F32_INF | F32_QUIET);
	if (e)
		mag = ldexpf((float)(m | 8), e - 10);
	else
		mag = ldexpf((float)m, -9);
	return fg_bits_f32(sign | fg_f32_bits(mag));
}

uint8_t fg_f32_to_e4m3_ref(float f)
{
	uint32_t x = fg_f32_bits(f), a = x & F32_ABS_MASK;
	uint8_t sign = (uint8_t)((x >> 24) & 0x80);

	if (a > F32_INF)
		return (uint8_t)(sign | 0x7f);
	return (uint8_t)(sign | minifloat_round(&fmt_e4m3, a));
}

float fg_e5m2_to_f32_ref(uint8_t b)
{
	uint32_t sign = (uint32_t)(b & 0x80) << 24;
	int e = (b >> 2) & 0x1f, m = b & 3;
	float mag;

	if (e == 0x1f)
		return fg_bits_f32(sign | F32_INF | (m ? F32_QUIET | (uint32_t)m << 21 : 0));
	if (e)
		mag = ldexpf((float)(m | 4), e - 17);
	else
		mag = ldexpf((float)m, -16);
	return fg_bits_f32(sign | fg_f32_bits(mag));
}

uint8_t fg_f32_to_e5m2_ref(float f)
{
	uint32_t x = fg_f32_bits(f), a = x & F32_ABS_MASK;
	uint8_t sign = (uint8_t)((x >> 24) & 0x80);

	/* The high byte of the F16 NaN: quiet bit plus the top payload bit. */
	if (a > F32_INF)
		return (uint8_t)(sign | 0x7e | ((a >> 21) & 1));
	return (uint8_t)(sign | minifloat_round(&fmt_e5m2, a));
}

/* ---- scalar bulk kernels ---------------------------------------------------
 *
 * Every kernel takes byte pointers (no alignment) and n >= 1 elements.
 */

typedef void (*convert_fn)(const unsigned char *src, unsigned char *dst, size_t n);

static void f32_copy(const unsigned char *src, unsigned char *dst, size_t n)
{
	memcpy(dst, src, n * 4);
}

static void f64_to_f32(const unsigned char *src, unsigned char *dst, size_t n)
{
	size_t i;
	double d;

	for (i = 0; i < n; i++) {
		memcpy(&d, src + 8 * i, sizeof(d));
		fg_store_f32(dst + 4 * i, (float)d);
	}
}

static void f32_to_f64(const unsigned char *src, unsigned char *dst, size_t n)
{
	size_t i;
	double d;

	for (i = 0; i < n; i++) {
		d = fg_load_f32(src + 4 * i);
		memcpy(dst + 8 * i, &d, sizeof(d));
	}
}

static void bf16_to_f32_scalar(const unsigned char *src, unsigned char *dst, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		fg_store_f32(dst + 4 * i, fg_bf16_to_f32_ref(fg_load_u16(src + 2 * i)));
}

static void f32_to_bf16_scalar(const unsigned char *src, unsigned char *dst, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		fg_store_u16(dst + 2 * i, fg_f32_to_bf16_ref(fg_load_f32(src + 4 * i)));
}

static void f16_to_f32_scalar(const unsigned char *src, unsigned char *dst, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		fg_store_f32(dst + 4 * i, fg_f16_to_f32_ref(fg_load_u16(src + 2 * i)));
}

static void f32_to_f16_scalar(const unsigned char *src, unsigned char *dst, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		fg_store_u16(dst + 2 * i, fg_f32_to_f16_ref(fg_load_f32(src + 4 * i)));
}

static void e4m3_to_f32_scalar(const unsigned char *src, unsigned char *dst, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		fg_store_f32(dst + 4 * i, fg_e4m3_to_f32_ref(src[i]));
}

static void f32_to_e4m3_scalar(const unsigned char *src, unsigned char *dst, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		dst[i] = fg_f32_to_e4m3_ref(fg_load_f32(src + 4 * i));
}

static void e5m2_to_f32_scalar(const unsigned char *src, unsigned char *dst, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		fg_store_f32(dst + 4 * i, fg_e5m2_to_f32_ref(src[i]));
}

static void f32_to_e5m2_scalar(const unsigned char *src, unsigned char *dst, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		dst[i] = fg_f32_to_e5m2_ref(fg_load_f32(src + 4 * i));
}

/* F32 bit patterns of every FP8 code, filled from the reference by
 * dispatch_init (under pthread_once) before any kernel reads them. */
static uint32_t e4m3_table[256];
static uint32_t e5m2_table[256];

static void e4m3_to_f32_table(const unsigned char *src, unsigned char *dst, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		memcpy(dst + 4 * i, &e4m3_table[src[i]], 4);
}

static void e5m2_to_f32_table(const unsigned char *src, unsigned char *dst, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		memcpy(dst + 4 * i, &e5m2_table[src[i]], 4);
}

/* ---- x86 vector kernels -------------------------------------------------- */

#if defined(__x86_64__)

#define TARGET_AVX2 __attribute__((target("avx2,f16c")))
#define TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,f16c")))

/*
 * Constants for narrowing F32 to an FP8 format without branches (the method
 * of F. Giesen's float_to_half_fast3_rtne, generalised): normal results add
 * the exponent rebias and a round-half-minus-one plus the kept lsb, then
 * shift; subnormal results come from a float add of a "magic" power of two
 * whose ulp is the target's smallest subnormal, so the FPU does the RNE.
 * Overflow (infinity included) is a min against clamp.
 */
struct fp8_narrow {
	uint32_t shift;      /* 23 - mantissa bits */
	uint32_t rebias;     /* (bias - 127) << 23, two's complement */
	uint32_t round;      /* (1 << (shift - 1)) - 1 */
	uint32_t min_normal; /* F32 bits of the smallest normal of the format */
	uint32_t magic;      /* F32 bits of 2^(24 - bias - mantissa bits) */
	uint32_t clamp;      /* code of every overflow: inf or saturation */
	uint32_t nan_base;   /* NaN code is nan_base | ((a >> nan_shift) & nan_mask) */
	uint32_t nan_shift;
	uint32_t nan_mask;
};

#define FP8_NARROW(m, bias, clamp, nan_base, nan_shift, nan_mask) \
	{ 23u - (m), 0u - ((127u - (bias)) << 23), (1u << (22u - (m))) - 1u, \
	  (128u - (bias)) << 23, (151u - (bias) - (m)) << 23, (clamp), \
	  (nan_base), (nan_shift), (nan_mask) }

static const struct fp8_narrow narrow_e4m3 = FP8_NARROW(3u, 7u, 0x7eu, 0x7fu, 0u, 0u);
static const struct fp8_narrow narrow_e5m2 = FP8_NARROW(2u, 15u, 0x7cu, 0x7eu, 21u, 1u);

/* -- AVX2 + F16C -- */

TARGET_AVX2 static void bf16_to_f32_avx2(const unsigned char *src, unsigned char *dst, size_t n)
{
	const __m256i abs_mask = _mm256_set1_epi32((int)F32_ABS_MASK);
	const __m256i inf = _mm256_set1_epi32((int)F32_INF);
	const __m256i quiet = _mm256_set1_epi32((int)F32_QUIET);
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m128i h = _mm_loadu_si128((const __m128i *)(const void *)(src + 2 * i));
		__m256i x = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
		__m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs_mask), inf);

		x = _mm256_or_si256(x, _mm256_and_si256(nan, quiet));
		_mm256_storeu_si256((__m256i *)(void *)(dst + 4 * i), x);
	}
	if (i < n)
		bf16_to_f32_scalar(src + 2 * i, dst + 4 * i, n - i);
}

/* Eight F32 to BF16 (in the low 16 bits of each lane): RNE, NaN quieted. */
TARGET_AVX2 static inline __m256i bf16_round_avx2(__m256i x)
{
	const __m256i abs_mask = _mm256_set1_epi32((int)F32_ABS_MASK);
	const __m256i inf = _mm256_set1_epi32((int)F32_INF);
	__m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs_mask), inf);
	__m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
	__m256i r = _mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb));

	r = _mm256_blendv_epi8(r, _mm256_or_si256(x, _mm256_set1_epi32((int)F32_QUIET)), nan);
	return _mm256_srli_epi32(r, 16);
}

TARGET_AVX2 static void f32_to_bf16_avx2(const unsigned char *src, unsigned char *dst, size_t n)
{
	size_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m256i a = bf16_round_avx2(_mm256_loadu_si256((const __m256i *)(const void *)(src + 4 * i)));
		__m256i b = bf16_round_avx2(_mm256_loadu_si256((const __m256i *)(const void *)(src + 4 * i + 32)));
		/* packus works within 128-bit lanes: a0-3 b0-3 a4-7 b4-7; the
		 * permute puts the quadwords back in order.  No saturation:
		 * every value is below 65536. */
		__m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8);

		_mm256_storeu_si256((__m256i *)(void *)(dst + 2 * i), p);
	}
	if (i < n)
		f32_to_bf16_scalar(src + 4 * i, dst + 2 * i, n - i);
}

TARGET_AVX2 static void f16_to_f32_avx2(const unsigned char *src, unsigned char *dst, size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m128i h = _mm_loadu_si128((const __m128i *)(const void *)(src + 2 * i));

		_mm256_storeu_ps((float *)(void *)(dst + 4 * i), _mm256_cvtph_ps(h));
	}
	if (i < n)
		f16_to_f32_scalar(src + 2 * i, dst + 4 * i, n - i);
}

TARGET_AVX2 static void f32_to_f16_avx2(const unsigned char *src, unsigned char *dst, size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256 x = _mm256_loadu_ps((const float *)(const void *)(src + 4 * i));

		_mm_storeu_si128((__m128i *)(void *)(dst + 2 * i),
				 _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
	}
	if (i < n)
		f32_to_f16_scalar(src + 4 * i, dst + 2 * i, n - i);
}

/*
 * FP8 widening goes through F16, which holds every E4M3 and E5M2 value
 * exactly.  E5M2 is the high byte of an F16.  E4M3 magnitude bits shifted
 * left by 7 form an F16 whose value is the E4M3 value times 2^-8 (normal and
 * subnormal alike, since both exponent biases differ by 8), so one exact
 * multiply by 256 finishes; NaN lanes become the F16 NaN 0x7e00, which
 * F16C widens to 0x7fc00000 and the multiply passes through unchanged.
 */
TARGET_AVX2 static void e4m3_to_f32_avx2(const unsigned char *src, unsigned char *dst, size_t n)
{
	const __m128i mag_mask = _mm_set1_epi16(0x7f);
	const __m128i sign_mask = _mm_set1_epi16(0x80);
	const __m256 scale = _mm256_set1_ps(256.0f);
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m128i x = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)(const void *)(src + i)));
		__m128i mag = _mm_and_si128(x, mag_mask);
		__m128i sign = _mm_slli_epi16(_mm_and_si128(x, sign_mask), 8);
		__m128i nan = _mm_cmpeq_epi16(mag, mag_mask);
		__m128i h = _mm_blendv_epi8(_mm_slli_epi16(mag, 7), _mm_set1_epi16(0x7e00), nan);
		__m256 f = _mm256_mul_ps(_mm256_cvtph_ps(_mm_or_si128(h, sign)), scale);

		_mm256_storeu_ps((float *)(void *)(dst + 4 * i), f);
	}
	if (i < n)
		e4m3_to_f32_scalar(src + i, dst + 4 * i, n - i);
}

TARGET_AVX2 static void e5m2_to_f32_avx2(const unsigned char *src, unsigned char *dst, size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m128i x = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)(const void *)(src + i)));

		_mm256_storeu_ps((float *)(void *)(dst + 4 * i), _mm256_cvtph_ps(_mm_slli_epi16(x, 8)));
	}
	if (i < n)
		e5m2_to_f32_scalar(src + i, dst + 4 * i, n - i);
}

/* Eight F32 bit patterns to FP8 codes in the low byte of each lane. */
TARGET_AVX2 static inline __m256i fp8_narrow_avx2(__m256i x, const struct fp8_narrow *c)
{
	const __m128i shift = _mm_cvtsi32_si128((int)c->shift);
	const __m256i magic = _mm256_set1_epi32((int)c->magic);
	__m256i a = _mm256_and_si256(x, _mm256_set1_epi32((int)F32_ABS_MASK));
	__m256i sign = _mm256_srli_epi32(_mm256_xor_si256(x, a), 24);
	__m256i odd = _mm256_and_si256(_mm256_srl_epi32(a, shift), _mm256_set1_epi32(1));
	__m256i nrm = _mm256_add_epi32(a, _mm256_set1_epi32((int)(c->rebias + c->round)));
	__m256i sub = _mm256_castps_si256(_mm256_add_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(magic)));
	__m256i is_sub = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)c->min_normal), a);
	__m256i is_nan = _mm256_cmpgt_epi32(a, _mm256_set1_epi32((int)F32_INF));
	__m256i nan = _mm256_or_si256(_mm256_set1_epi32((int)c->nan_base),
				      _mm256_and_si256(_mm256_srl_epi32(a, _mm_cvtsi32_si128((int)c->nan_shift)),
						       _mm256_set1_epi32((int)c->nan_mask)));
	__m256i r;

	nrm = _mm256_srl_epi32(_mm256_add_epi32(nrm, odd), shift);
	sub = _mm256_sub_epi32(sub, magic);
	r = _mm256_blendv_epi8(nrm, sub, is_sub);
	r = _mm256_min_epu32(r, _mm256_set1_epi32((int)c->clamp));
	r = _mm256_blendv_epi8(r, nan, is_nan);
	return _mm256_or_si256(r, sign);
}

TARGET_AVX2 static void f32_to_fp8_avx2(const struct fp8_narrow *c, convert_fn tail,
					const unsigned char *src, unsigned char *dst, size_t n)
{
	const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
	size_t i = 0;

	for (; i + 32 <= n; i += 32) {
		const unsigned char *s = src + 4 * i;
		__m256i r0 = fp8_narrow_avx2(_mm256_loadu_si256((const __m256i *)(const void *)s), c);
		__m256i r1 = fp8_narrow_avx2(_mm256_loadu_si256((const __m256i *)(const void *)(s + 32)), c);
		__m256i r2 = fp8_narrow_avx2(_mm256_loadu_si256((const __m256i *)(const void *)(s + 64)), c);
		__m256i r3 = fp8_narrow_avx2(_mm256_loadu_si256((const __m256i *)(const void *)(s + 96)), c);
		/* Two in-lane packs leave dwords ordered r0 r1 r2 r3 (low
		 * halves) then r0 r1 r2 r3 (high halves); one permute fixes it. */
		__m256i p = _mm256_packus_epi16(_mm256_packus_epi32(r0, r1), _mm256_packus_epi32(r2, r3));

		p = _mm256_permutevar8x32_epi32(p, order);
		_mm256_storeu_si256((__m256i *)(void *)(dst + i), p);
	}
	if (i < n)
		tail(src + 4 * i, dst + i, n - i);
}

TARGET_AVX2 static void f32_to_e4m3_avx2(const unsigned char *src, unsigned char *dst, size_t n)
{
	f32_to_fp8_avx2(&narrow_e4m3, f32_to_e4m3_scalar, src, dst, n);
}

TARGET_AVX2 static void f32_to_e5m2_avx2(const unsigned char *src, unsigned char *dst, size_t n)
{
	f32_to_fp8_avx2(&narrow_e5m2, f32_to_e5m2_scalar, src, dst, n);
}

/* -- AVX-512F/BW/VL: 16 lanes, tails by masked loads and stores -- */

static __mmask16 tail_mask16(size_t left)
{
	return (__mmask16)((1u << left) - 1);
}

TARGET_AVX512 static inline __m512i bf16_widen_avx512(__m256i h)
{
	__m512i x = _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16);
	__mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, _mm512_set1_epi32((int)F32_ABS_MASK)),
						_mm512_set1_epi32((int)F32_INF));

	return _mm512_mask_or_epi32(x, nan, x, _mm512_set1_epi32((int)F32_QUIET));
}

TARGET_AVX512 static void bf16_to_f32_avx512(const unsigned char *src, unsigned char *dst, size_t n)
{
	size_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m256i h = _mm256_loadu_si256((const __m256i *)(const void *)(src + 2 * i));

		_mm512_storeu_si512(dst + 4 * i, bf16_widen_avx512(h));
	}
	if (i < n) {
		__mmask16 m = tail_mask16(n - i);

		_mm512_mask_storeu_epi32(dst + 4 * i, m,
					 bf16_widen_avx512(_mm256_maskz_loadu_epi16(m, src + 2 * i)));
	}
}

TARGET_AVX512 static inline __m256i bf16_narrow_avx512(__m512i x)
{
	__mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, _mm512_set1_epi32((int)F32_ABS_MASK)),
						_mm512_set1_epi32((int)F32_INF));
	__m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
	__m512i r = _mm512_add_epi32(x, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb));

	r = _mm512_mask_or_epi32(r, nan, x, _mm512_set1_epi32((int)F32_QUIET));
	return _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16));
}

TARGET_AVX512 static void f32_to_bf16_avx512(const unsigned char *src, unsigned char *dst, size_t n)
{
	size_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m512i x = _mm512_loadu_si512(src + 4 * i);

		_mm256_storeu_si256((__m256i *)(void *)(dst + 2 * i), bf16_narrow_avx512(x));
	}
	if (i < n) {
		__mmask16 m = tail_mask16(n - i);

		_mm256_mask_storeu_epi16(dst + 2 * i, m,
					 bf16_narrow_avx512(_mm512_maskz_loadu_epi32(m, src + 4 * i)));
	}
}

TARGET_AVX512 static void f16_to_f32_avx512(const unsigned char *src, unsigned char *dst, size_t n)
{
	size_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m256i h = _mm256_loadu_si256((const __m256i *)(const void *)(src + 2 * i));

		_mm512_storeu_ps(dst + 4 * i, _mm512_cvtph_ps(h));
	}
	if (i < n) {
		__mmask16 m = tail_mask16(n - i);

		_mm512_mask_storeu_ps(dst + 4 * i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, src + 2 * i)));
	}
}

TARGET_AVX512 static void f32_to_f16_avx512(const unsigned char *src, unsigned char *dst, size_t n)
{
	size_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m512 x = _mm512_loadu_ps(src + 4 * i);

		_mm256_storeu_si256((__m256i *)(void *)(dst + 2 * i),
				    _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
	}
	if (i < n) {
		__mmask16 m = tail_mask16(n - i);
		__m512 x = _mm512_maskz_loadu_ps(m, src + 4 * i);

		_mm256_mask_storeu_epi16(dst + 2 * i, m, _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
	}
}

/* See e4m3_to_f32_avx2 for why this goes through F16 and a multiply. */
TARGET_AVX512 static inline __m512 e4m3_widen_avx512(__m128i b)
{
	const __m256i mag_mask = _mm256_set1_epi16(0x7f);
	__m256i x = _mm256_cvtepu8_epi16(b);
	__m256i mag = _mm256_and_si256(x, mag_mask);
	__m256i sign = _mm256_slli_epi16(_mm256_and_si256(x, _mm256_set1_epi16(0x80)), 8);
	__mmask16 nan = _mm256_cmpeq_epi16_mask(mag, mag_mask);
	__m256i h = _mm256_mask_blend_epi16(nan, _mm256_slli_epi16(mag, 7), _mm256_set1_epi16(0x7e00));

	return _mm512_mul_ps(_mm512_cvtph_ps(_mm256_or_si256(h, sign)), _mm512_set1_ps(256.0f));
}

TARGET_AVX512 static void e4m3_to_f32_avx512(const unsigned char *src, unsigned char *dst, size_t n)
{
	size_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m128i b = _mm_loadu_si128((const __m128i *)(const void *)(src + i));

		_mm512_storeu_ps(dst + 4 * i, e4m3_widen_avx512(b));
	}
	if (i < n) {
		__mmask16 m = tail_mask16(n - i);

		_mm512_mask_storeu_ps(dst + 4 * i, m, e4m3_widen_avx512(_mm_maskz_loadu_epi8(m, src + i)));
	}
}

TARGET_AVX512 static inline __m512 e5m2_widen_avx512(__m128i b)
{
	return _mm512_cvtph_ps(_mm256_slli_epi16(_mm256_cvtepu8_epi16(b), 8));
}

TARGET_AVX512 static void e5m2_to_f32_avx512(const unsigned char *src, unsigned char *dst, size_t n)
{
	size_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m128i b = _mm_loadu_si128((const __m128i *)(const void *)(src + i));

		_mm512_storeu_ps(dst + 4 * i, e5m2_widen_avx512(b));
	}
	if (i < n) {
		__mmask16 m = tail_mask16(n - i);

		_mm512_mask_storeu_ps(dst + 4 * i, m, e5m2_widen_avx512(_mm_maskz_loadu_epi8(m, src + i)));
	}
}

/* Sixteen F32 bit patterns to FP8 codes; see struct fp8_narrow. */
TARGET_AVX512 static inline __m128i fp8_narrow_avx512(__m512i x, const struct fp8_narrow *c)
{
	const __m128i shift = _mm_cvtsi32_si128((int)c->shift);
	const __m512i magic = _mm512_set1_epi32((int)c->magic);
	__m512i a = _mm512_and_si512(x, _mm512_set1_epi32((int)F32_ABS_MASK));
	__m512i sign = _mm512_srli_epi32(_mm512_xor_si512(x, a), 24);
	__m512i odd = _mm512_and_si512(_mm512_srl_epi32(a, shift), _mm512_set1_epi32(1));
	__m512i nrm = _mm512_add_epi32(a, _mm512_set1_epi32((int)(c->rebias + c->round)));
	__m512i sub = _mm512_castps_si512(_mm512_add_ps(_mm512_castsi512_ps(a), _mm512_castsi512_ps(magic)));
	__mmask16 is_sub = _mm512_cmplt_epu32_mask(a, _mm512_set1_epi32((int)c->min_normal));
	__mmask16 is_nan = _mm512_cmpgt_epu32_mask(a, _mm512_set1_epi32((int)F32_INF));
	__m512i nan = _mm512_or_si512(_mm512_set1_epi32((int)c->nan_base),
				      _mm512_and_si512(_mm512_srl_epi32(a, _mm_cvtsi32_si128((int)c->nan_shift)),
						       _mm512_set1_epi32((int)c->nan_mask)));
	__m512i r;

	nrm = _mm512_srl_epi32(_mm512_add_epi32(nrm, odd), shift);
	sub = _mm512_sub_epi32(sub, magic);
	r = _mm512_mask_blend_epi32(is_sub, nrm, sub);
	r = _mm512_min_epu32(r, _mm512_set1_epi32((int)c->clamp));
	r = _mm512_mask_mov_epi32(r, is_nan, nan);
	return _mm512_cvtepi32_epi8(_mm512_or_si512(r, sign));
}

TARGET_AVX512 static void f32_to_fp8_avx512(const struct fp8_narrow *c, const unsigned char *src,
					    unsigned char *dst, size_t n)
{
	size_t i = 0;

	for (; i + 16 <= n; i += 16) {
		__m512i x = _mm512_loadu_si512(src + 4 * i);

		_mm_storeu_si128((__m128i *)(void *)(dst + i), fp8_narrow_avx512(x, c));
	}
	if (i < n) {
		__mmask16 m = tail_mask16(n - i);

		_mm_mask_storeu_epi8(dst + i, m, fp8_narrow_avx512(_mm512_maskz_loadu_epi32(m, src + 4 * i), c));
	}
}

TARGET_AVX512 static void f32_to_e4m3_avx512(const unsigned char *src, unsigned char *dst, size_t n)
{
	f32_to_fp8_avx512(&narrow_e4m3, src, dst, n);
}

TARGET_AVX512 static void f32_to_e5m2_avx512(const unsigned char *src, unsigned char *dst, size_t n)
{
	f32_to_fp8_avx512(&narrow_e5m2, src, dst, n);
}

#endif /* __x86_64__ */

/* ---- kernel sets and dispatch ---------------------------------------------- */

/* One row per path; a NULL entry means the dtype is not a float type. */
struct kernel_set {
	const char *name;
	convert_fn to_f32[FG_DT_COUNT];
	convert_fn from_f32[FG_DT_COUNT];
};

/* The _ref bulk functions: reference conversion per element. */
static const struct kernel_set kernels_ref = {
	"ref",
	{ [FG_DT_F64] = f64_to_f32, [FG_DT_F32] = f32_copy,
	  [FG_DT_F16] = f16_to_f32_scalar, [FG_DT_BF16] = bf16_to_f32_scalar,
	  [FG_DT_F8_E4M3] = e4m3_to_f32_scalar, [FG_DT_F8_E5M2] = e5m2_to_f32_scalar },
	{ [FG_DT_F64] = f32_to_f64, [FG_DT_F32] = f32_copy,
	  [FG_DT_F16] = f32_to_f16_scalar, [FG_DT_BF16] = f32_to_bf16_scalar,
	  [FG_DT_F8_E4M3] = f32_to_e4m3_scalar, [FG_DT_F8_E5M2] = f32_to_e5m2_scalar },
};

static const struct kernel_set kernels_scalar = {
	"scalar",
	{ [FG_DT_F64] = f64_to_f32, [FG_DT_F32] = f32_copy,
	  [FG_DT_F16] = f16_to_f32_scalar, [FG_DT_BF16] = bf16_to_f32_scalar,
	  [FG_DT_F8_E4M3] = e4m3_to_f32_table, [FG_DT_F8_E5M2] = e5m2_to_f32_table },
	{ [FG_DT_F64] = f32_to_f64, [FG_DT_F32] = f32_copy,
	  [FG_DT_F16] = f32_to_f16_scalar, [FG_DT_BF16] = f32_to_bf16_scalar,
	  [FG_DT_F8_E4M3] = f32_to_e4m3_scalar, [FG_DT_F8_E5M2] = f32_to_e5m2_scalar },
};

#if defined(__x86_64__)
static const struct kernel_set kernels_avx2 = {
	"avx2+f16c",
	{ [FG_DT_F64] = f64_to_f32, [FG_DT_F32] = f32_copy,
	  [FG_DT_F16] = f16_to_f32_avx2, [FG_DT_BF16] = bf16_to_f32_avx2,
	  [FG_DT_F8_E4M3] = e4m3_to_f32_avx2, [FG_DT_F8_E5M2] = e5m2_to_f32_avx2 },
	{ [FG_DT_F64] = f32_to_f64, [FG_DT_F32] = f32_copy,
	  [FG_DT_F16] = f32_to_f16_avx2, [FG_DT_BF16] = f32_to_bf16_avx2,
	  [FG_DT_F8_E4M3] = f32_to_e4m3_avx2, [FG_DT_F8_E5M2] = f32_to_e5m2_avx2 },
};

static const struct kernel_set kernels_avx512 = {
	"avx512",
	{ [FG_DT_F64] = f64_to_f32, [FG_DT_F32] = f32_copy,
	  [FG_DT_F16] = f16_to_f32_avx512, [FG_DT_BF16] = bf16_to_f32_avx512,
	  [FG_DT_F8_E4M3] = e4m3_to_f32_avx512, [FG_DT_F8_E5M2] = e5m2_to_f32_avx512 },
	{ [FG_DT_F64] = f32_to_f64, [FG_DT_F32] = f32_copy,
	  [FG_DT_F16] = f32_to_f16_avx512, [FG_DT_BF16] = f32_to_bf16_avx512,
	  [FG_DT_F8_E4M3] = f32_to_e4m3_avx512, [FG_DT_F8_E5M2] = f32_to_e5m2_avx512 },
};
#endif

static pthread_once_t dispatch_once = PTHREAD_ONCE_INIT;
static const struct kernel_set *active_kernels = &kernels_scalar;

/* Runs once (pthread_once): fills the FP8 tables, then picks the kernel set
 * for the SIMD level of forge/core/cpu.h. */
static void dispatch_init(void)
{
	int i;

	for (i = 0; i < 256; i++) {
		e4m3_table[i] = fg_f32_bits(fg_e4m3_to_f32_ref((uint8_t)i));
		e5m2_table[i] = fg_f32_bits(fg_e5m2_to_f32_ref((uint8_t)i));
	}
	switch (fg_cpu_simd()) {
#if defined(__x86_64__)
	case FG_CPU_AVX512:
		active_kernels = &kernels_avx512;
		break;
	case FG_CPU_AVX2:
		active_kernels = &kernels_avx2;
		break;
#endif
	default:
		active_kernels = &kernels_scalar;
		break;
	}
}

static const struct kernel_set *dispatch(void)
{
	pthread_once(&dispatch_once, dispatch_init);
	return active_kernels;
}

static int run_to_f32(const struct kernel_set *ks, enum fg_dtype dt, const void *src, float *dst,
		      size_t n)
{
	if (!dtype_valid(dt) || !ks->to_f32[dt])
		return FG_EINPUT;
	/* n == 0 may come with NULL pointers; memcpy(NULL, NULL, 0) is UB. */
	if (n)
		ks->to_f32[dt](src, (unsigned char *)(void *)dst, n);
	return 0;
}

static int run_from_f32(const struct kernel_set *ks, enum fg_dtype dt, const float *src, void *dst,
			size_t n)
{
	if (!dtype_valid(dt) || !ks->from_f32[dt])
		return FG_EINPUT;
	if (n)
		ks->from_f32[dt]((const unsigned char *)(const void *)src, dst, n);
	return 0;
}

int fg_dtype_to_f32(enum fg_dtype dt, const void *src, float *dst, size_t n)
{
	return run_to_f32(dispatch(), dt, src, dst, n);
}

int fg_dtype_from_f32(enum fg_dtype dt, const float *src, void *dst, size_t n)
{
	return run_from_f32(dispatch(), dt, src, dst, n);
}

int fg_dtype_to_f32_ref(enum fg_dtype dt, const void *src, float *dst, size_t n)
{
	return run_to_f32(&kernels_ref, dt, src, dst, n);
}

int fg_dtype_from_f32_ref(enum fg_dtype dt, const float *src, void *dst, size_t n)
{
	return run_from_f32(&kernels_ref, dt, src, dst, n);
}

const char *fg_dtype_simd_path(void)
{
	return dispatch()->name;
}

/*
 * Not a float dtype: NaN rather than a guess, so a caller that ignored the
 * contract sees it in every statistic.  Integer tensors need their own reader.
 */
double fg_dtype_load_f64(enum fg_dtype dt, const void *base, size_t i)
{
	const unsigned char *p = base;
	double d;

	switch (dt) {
	case FG_DT_F64:
		memcpy(&d, p + 8 * i, sizeof(d));
		return d;
	case FG_DT_F32:
		return fg_load_f32(p + 4 * i);
	case FG_DT_F16:
		return fg_f16_to_f32_ref(fg_load_u16(p + 2 * i));
	case FG_DT_BF16:
		return fg_bf16_to_f32_ref(fg_load_u16(p + 2 * i));
	case FG_DT_F8_E4M3:
		return fg_e4m3_to_f32_ref(p[i]);
	case FG_DT_F8_E5M2:
		return fg_e5m2_to_f32_ref(p[i]);
	default:
		return NAN;
	}
}
