/*
 * test_dtype.c: forge/format/dtype.c against hand-checked values, an independent
 * oracle, and itself (bulk kernels against the scalar reference).
 *
 * - The reference is checked against formulas written here: every 16-bit and
 *   8-bit code widened by ldexp, and narrowing by an oracle that binary-
 *   searches the target's sorted codes in double precision and breaks ties by
 *   the even code.  Neither shares code with dtype.c.
 * - The dispatched bulk kernels are compared with the reference bit for bit
 *   on every code (widening) and on a few million F32 inputs (narrowing):
 *   each representable value, +-1 ulp, every tie, ties +-1 ulp, specials and
 *   pseudo-random bit patterns, aligned and at odd addresses, and on short
 *   odd lengths with guard bytes so tails and masked stores are exercised.
 * - test_dispatch_forced re-runs this binary with FORGED_SIMD=scalar and
 *   FORGED_SIMD=avx2, so every kernel set is checked on an AVX-512 machine.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "forge/core/bytes.h"
#include "tests/unit/support.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "forge/format/dtype.h"

static char **saved_argv;

/* ---- helpers ---------------------------------------------------------------- */

/* A growable array of F32 bit patterns. */
struct inputs {
	uint32_t *v;
	size_t n, cap;
};

static void inputs_push(struct inputs *in, uint32_t x)
{
	if (in->n == in->cap) {
		in->cap = in->cap ? in->cap * 2 : 4096;
		in->v = realloc(in->v, in->cap * sizeof(*in->v));
		assert_non_null(in->v);
	}
	in->v[in->n++] = x;
}

static void inputs_release(struct inputs *in)
{
	free(in->v);
	in->v = NULL;
	in->n = in->cap = 0;
}

/*
 * One narrow float format as this test understands it, independent of
 * dtype.c: field widths, the largest finite magnitude code, what overflow
 * gives (infinity code, or max_code for saturating E4M3) and whether the
 * all-ones exponent is IEEE inf/NaN.
 */
struct test_fmt {
	enum fg_dtype dt;
	const char *name;
	size_t bytes;
	int ebits, mbits, bias;
	uint32_t max_code, ovf_code, sign_bit;
	bool ieee_specials;
};

static const struct test_fmt fmts[] = {
	{ FG_DT_BF16, "BF16", 2, 8, 7, 127, 0x7f7f, 0x7f80, 0x8000, true },
	{ FG_DT_F16, "F16", 2, 5, 10, 15, 0x7bff, 0x7c00, 0x8000, true },
	{ FG_DT_F8_E4M3, "F8_E4M3", 1, 4, 3, 7, 0x7e, 0x7e, 0x80, false },
	{ FG_DT_F8_E5M2, "F8_E5M2", 1, 5, 2, 15, 0x7b, 0x7c, 0x80, true },
};
#define NFMTS (sizeof(fmts) / sizeof(fmts[0]))

static uint32_t fmt_codes(const struct test_fmt *f)
{
	return 1u << (8 * f->bytes);
}

static uint32_t fmt_exp_field(const struct test_fmt *f, uint32_t code)
{
	return (code >> f->mbits) & ((1u << f->ebits) - 1);
}

static bool fmt_is_nan(const struct test_fmt *f, uint32_t code)
{
	uint32_t mag = code & (f->sign_bit - 1);

	if (!f->ieee_specials)
		return mag == 0x7f;
	return fmt_exp_field(f, code) == (1u << f->ebits) - 1 && (code & ((1u << f->mbits) - 1));
}

static bool fmt_is_inf(const struct test_fmt *f, uint32_t code)
{
	return f->ieee_specials && fmt_exp_field(f, code) == (1u << f->ebits) - 1 &&
	       !(code & ((1u << f->mbits) - 1));
}

/* The value of a magnitude code by the textbook formula (no specials; the
 * code one past the largest finite one gives the "next value" the rounding
 * compares against). */
static double fmt_decode(const struct test_fmt *f, uint32_t mag)
{
	uint32_t e = mag >> f->mbits, m = mag & ((1u << f->mbits) - 1);

	if (e == 0)
		return ldexp((double)m, 1 - f->bias - f->mbits);
	return ldexp((double)(m | (1u << f->mbits)), (int)e - f->bias - f->mbits);
}

/* The documented NaN rules: quiet, sign kept, F16C's payload truncation. */
static uint32_t fmt_nan_narrow(const struct test_fmt *f, uint32_t x)
{
	switch (f->dt) {
	case FG_DT_BF16:
		return (x >> 16) | 0x0040;
	case FG_DT_F16:
		return ((x >> 16) & 0x8000) | 0x7e00 | ((x & 0x7fffff) >> 13);
	case FG_DT_F8_E4M3:
		return ((x >> 24) & 0x80) | 0x7f;
	default:
		return ((x >> 24) & 0x80) | 0x7e | ((x >> 21) & 1);
	}
}

static uint32_t fmt_nan_widen(const struct test_fmt *f, uint32_t code)
{
	uint32_t sign = code & f->sign_bit ? 0x80000000u : 0;
	uint32_t m = code & ((1u << f->mbits) - 1);

	if (f->dt == FG_DT_F8_E4M3)
		return sign | 0x7fc00000u;
	return sign | 0x7fc00000u | m << (23 - f->mbits);
}

/* Expected F32 bits of a code, from the formula. */
static uint32_t oracle_widen(const struct test_fmt *f, uint32_t code)
{
	uint32_t sign = code & f->sign_bit ? 0x80000000u : 0;

	if (fmt_is_nan(f, code))
		return fmt_nan_widen(f, code);
	if (fmt_is_inf(f, code))
		return sign | 0x7f800000u;
	return sign | fg_f32_bits((float)fmt_decode(f, code & (f->sign_bit - 1)));
}

/*
 * Expected code for F32 bits x: the nearest representable value by binary
 * search over the sorted magnitude codes, ties to the even code.  The two
 * distances are exact in double except when the lower neighbour is 0, where
 * the rounding error cannot change which side wins.
 */
static uint32_t oracle_narrow(const struct test_fmt *f, uint32_t x)
{
	uint32_t sign = x & 0x80000000u ? f->sign_bit : 0, a = x & 0x7fffffffu;
	uint32_t lo = 0, hi = f->max_code, mid, c;
	double v, d_lo, d_hi;

	if (a > 0x7f800000u)
		return fmt_nan_narrow(f, x);
	v = (double)fg_bits_f32(a);
	if (v >= fmt_decode(f, f->max_code + 1))
		return sign | f->ovf_code;
	while (lo < hi) {
		mid = lo + (hi - lo + 1) / 2;
		if (fmt_decode(f, mid) <= v)
			lo = mid;
		else
			hi = mid - 1;
	}
	c = lo;
	d_lo = v - fmt_decode(f, c);
	d_hi = fmt_decode(f, c + 1) - v;
	if (d_hi < d_lo || (d_hi == d_lo && (c & 1)))
		c++;
	if (c > f->max_code)
		c = f->ovf_code;
	return sign | c;
}

static uint32_t ref_widen(const struct test_fmt *f, uint32_t code)
{
	switch (f->dt) {
	case FG_DT_BF16:
		return fg_f32_bits(fg_bf16_to_f32_ref((uint16_t)code));
	case FG_DT_F16:
		return fg_f32_bits(fg_f16_to_f32_ref((uint16_t)code));
	case FG_DT_F8_E4M3:
		return fg_f32_bits(fg_e4m3_to_f32_ref((uint8_t)code));
	default:
		return fg_f32_bits(fg_e5m2_to_f32_ref((uint8_t)code));
	}
}

static uint32_t ref_narrow(const struct test_fmt *f, uint32_t x)
{
	switch (f->dt) {
	case FG_DT_BF16:
		return fg_f32_to_bf16_ref(fg_bits_f32(x));
	case FG_DT_F16:
		return fg_f32_to_f16_ref(fg_bits_f32(x));
	case FG_DT_F8_E4M3:
		return fg_f32_to_e4m3_ref(fg_bits_f32(x));
	default:
		return fg_f32_to_e5m2_ref(fg_bits_f32(x));
	}
}

static uint32_t load_code(const struct test_fmt *f, const unsigned char *p, size_t i)
{
	uint16_t h;

	if (f->bytes == 1)
		return p[i];
	memcpy(&h, p + 2 * i, 2);
	return h;
}

static void store_code(const struct test_fmt *f, unsigned char *p, size_t i, uint32_t code)
{
	uint16_t h = (uint16_t)code;

	if (f->bytes == 1)
		p[i] = (unsigned char)code;
	else
		memcpy(p + 2 * i, &h, 2);
}

static uint32_t load_bits(const unsigned char *p, size_t i)
{
	uint32_t x;

	memcpy(&x, p + 4 * i, 4);
	return x;
}

/* Bit-exact comparison that names the first mismatch. */
#define EXPECT_BITS(got, want, what, fmtname, input)                                            \
	do {                                                                                    \
		if ((uint32_t)(got) != (uint32_t)(want))                                        \
			fail_msg("%s %s: input 0x%08x gave 0x%08x, expected 0x%08x", fmtname, what, \
				 (unsigned)(input), (unsigned)(got), (unsigned)(want));         \
	} while (0)

/* Every input a narrowing test uses for format f (see the file comment). */
static void narrow_inputs(const struct test_fmt *f, struct inputs *in, size_t n_random)
{
	static const uint32_t specials[] = {
		0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000,
		0x7f800001, 0xff800001, 0x7fbfffff, 0x7fffffff, 0xffffffff, 0x7fa00000,
		0x7f802000, 0x7f7fffff, 0xff7fffff, 0x00800000, 0x00000001, 0x807fffff,
		0x3f800000, 0xbf800000, 0x4f000000, 0x5f000000,
	};
	uint32_t c, s, b, m, mag_codes = f->max_code + 1;
	int emin = 1 - f->bias - f->mbits - 3, emax = (1 << f->ebits) - f->bias + 2;
	size_t i;

	for (i = 0; i < sizeof(specials) / sizeof(specials[0]); i++)
		inputs_push(in, specials[i]);
	for (s = 0; s < 2; s++) {
		uint32_t sign = s ? 0x80000000u : 0;

		for (c = 0; c < mag_codes; c++) {
			double v = fmt_decode(f, c), next = fmt_decode(f, c + 1);

			b = fg_f32_bits((float)v);
			inputs_push(in, sign | b);
			inputs_push(in, sign | (b + 1));
			if (b)
				inputs_push(in, sign | (b - 1));
			/* The midpoint needs mbits + 2 significant bits: exact in F32. */
			m = fg_f32_bits((float)((v + next) / 2));
			inputs_push(in, sign | m);
			inputs_push(in, sign | (m + 1));
			inputs_push(in, sign | (m - 1));
		}
	}
	if (emin + 127 < 1)
		emin = 1 - 127;
	for (i = 0; i < n_random; i++) {
		uint32_t x = rng_u32();

		inputs_push(in, x);
		/* The same mantissa with an exponent near the format's range, where
		 * rounding decisions (and subnormals) actually happen. */
		b = (uint32_t)(emin + 127) + rng_u32() % (uint32_t)(emax - emin + 1);
		inputs_push(in, (x & 0x807fffffu) | (b > 254 ? 254u : b) << 23);
	}
}

static bool cpu_has_avx2_f16c(void)
{
#if defined(__x86_64__)
	unsigned int eax, ebx, ecx, edx;

	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) &&
	       (ecx & bit_F16C);
#else
	return false;
#endif
}

static bool cpu_has_avx512(void)
{
#if defined(__x86_64__)
	__builtin_cpu_init();
	return cpu_has_avx2_f16c() && __builtin_cpu_supports("avx512f") &&
	       __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
#else
	return false;
#endif
}

/* ---- the dtype table ---------------------------------------------------------- */

static void test_dtype_table(void **state)
{
	static const struct {
		enum fg_dtype dt;
		const char *name;
		size_t size;
		bool is_float;
	} rows[] = {
		{ FG_DT_F64, "F64", 8, true },       { FG_DT_F32, "F32", 4, true },
		{ FG_DT_F16, "F16", 2, true },       { FG_DT_BF16, "BF16", 2, true },
		{ FG_DT_I64, "I64", 8, false },      { FG_DT_I32, "I32", 4, false },
		{ FG_DT_I16, "I16", 2, false },      { FG_DT_I8, "I8", 1, false },
		{ FG_DT_U64, "U64", 8, false },      { FG_DT_U32, "U32", 4, false },
		{ FG_DT_U16, "U16", 2, false },      { FG_DT_U8, "U8", 1, false },
		{ FG_DT_BOOL, "BOOL", 1, false },    { FG_DT_F8_E4M3, "F8_E4M3", 1, true },
		{ FG_DT_F8_E5M2, "F8_E5M2", 1, true },
	};
	enum fg_dtype dt;
	size_t i;
	float f = 1.0f;

	(void)state;
	assert_int_equal(sizeof(rows) / sizeof(rows[0]), FG_DT_COUNT);
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		assert_int_equal(fg_dtype_size(rows[i].dt), rows[i].size);
		assert_string_equal(fg_dtype_name(rows[i].dt), rows[i].name);
		assert_int_equal(fg_dtype_is_float(rows[i].dt), rows[i].is_float);
		dt = FG_DT_COUNT;
		assert_int_equal(fg_dtype_parse(rows[i].name, &dt), 0);
		assert_int_equal(dt, rows[i].dt);
		/* Bulk conversion exists exactly for the float types. */
		assert_int_equal(fg_dtype_to_f32(rows[i].dt, &f, &f, 0), rows[i].is_float ? 0 : FG_EINPUT);
		assert_int_equal(fg_dtype_from_f32_ref(rows[i].dt, &f, &f, 0), rows[i].is_float ? 0 : FG_EINPUT);
	}
	dt = FG_DT_F32;
	assert_int_equal(fg_dtype_parse("bf16", &dt), FG_EINPUT); /* names are case-sensitive */
	assert_int_equal(fg_dtype_parse("F8_E4M3FN", &dt), FG_EINPUT);
	assert_int_equal(fg_dtype_parse("", &dt), FG_EINPUT);
	assert_int_equal(fg_dtype_parse(NULL, &dt), FG_EINPUT);
	assert_int_equal(dt, FG_DT_F32); /* untouched on failure */
	assert_int_equal(fg_dtype_size(FG_DT_COUNT), 0);
	assert_non_null(fg_dtype_name(FG_DT_COUNT));
	assert_false(fg_dtype_is_float(FG_DT_COUNT));
	assert_int_equal(fg_dtype_to_f32(FG_DT_COUNT, &f, &f, 1), FG_EINPUT);
	assert_int_equal(fg_dtype_from_f32(FG_DT_I32, &f, &f, 1), FG_EINPUT);
	/* n == 0 with NULL pointers is a no-op, not a crash. */
	assert_int_equal(fg_dtype_to_f32(FG_DT_BF16, NULL, NULL, 0), 0);
	assert_int_equal(fg_dtype_from_f32(FG_DT_F8_E4M3, NULL, NULL, 0), 0);
}

/* ---- golden values, worked out by hand ---------------------------------------- */

/* Narrow x to dt by the reference, by bulk n=1, and by bulk over 37 copies
 * (vector main loop plus a tail); all must give want. */
static void golden_narrow(enum fg_dtype dt, float x, uint32_t want)
{
	const struct test_fmt *f = NULL;
	unsigned char out[37 * 2 + 1];
	float src[37];
	size_t i;

	for (i = 0; i < NFMTS; i++)
		if (fmts[i].dt == dt)
			f = &fmts[i];
	assert_non_null(f);
	EXPECT_BITS(ref_narrow(f, fg_f32_bits(x)), want, "golden ref", f->name, fg_f32_bits(x));
	EXPECT_BITS(oracle_narrow(f, fg_f32_bits(x)), want, "golden oracle", f->name, fg_f32_bits(x));
	for (i = 0; i < 37; i++)
		src[i] = x;
	assert_int_equal(fg_dtype_from_f32(dt, src, out + 1, 1), 0);
	EXPECT_BITS(load_code(f, out + 1, 0), want, "golden bulk n=1", f->name, fg_f32_bits(x));
	assert_int_equal(fg_dtype_from_f32(dt, src, out + 1, 37), 0);
	for (i = 0; i < 37; i++)
		EXPECT_BITS(load_code(f, out + 1, i), want, "golden bulk n=37", f->name, fg_f32_bits(x));
}

static void golden_widen(enum fg_dtype dt, uint32_t code, uint32_t want)
{
	const struct test_fmt *f = NULL;
	unsigned char src[37 * 2 + 1];
	float out[37];
	size_t i;

	for (i = 0; i < NFMTS; i++)
		if (fmts[i].dt == dt)
			f = &fmts[i];
	assert_non_null(f);
	EXPECT_BITS(ref_widen(f, code), want, "golden widen ref", f->name, code);
	for (i = 0; i < 37; i++)
		store_code(f, src + 1, i, code);
	assert_int_equal(fg_dtype_to_f32(dt, src + 1, out, 37), 0);
	for (i = 0; i < 37; i++)
		EXPECT_BITS(fg_f32_bits(out[i]), want, "golden widen bulk", f->name, code);
}

static void test_golden_bf16(void **state)
{
	(void)state;
	golden_widen(FG_DT_BF16, 0x3f80, fg_f32_bits(1.0f));
	golden_widen(FG_DT_BF16, 0xc000, fg_f32_bits(-2.0f));
	golden_widen(FG_DT_BF16, 0x0001, 0x00010000);            /* smallest subnormal, 2^-133 */
	golden_widen(FG_DT_BF16, 0x7f81, 0x7fc10000);            /* signalling NaN comes back quiet */
	golden_widen(FG_DT_BF16, 0xff80, 0xff800000);            /* -inf */
	golden_narrow(FG_DT_BF16, 1.0f, 0x3f80);
	golden_narrow(FG_DT_BF16, 1.0011367798f, 0x3f80);        /* the norm-shift hazard: offset lost */
	golden_narrow(FG_DT_BF16, 1.00390625f, 0x3f80);          /* tie 1.0 / 1.0078125: even */
	golden_narrow(FG_DT_BF16, 1.0039063692f, 0x3f81);        /* just past the tie */
	golden_narrow(FG_DT_BF16, 1.01171875f, 0x3f82);          /* tie 1.0078125 / 1.015625: even */
	golden_narrow(FG_DT_BF16, -1.01171875f, 0xbf82);
	golden_narrow(FG_DT_BF16, FLT_MAX, 0x7f80);              /* above the last tie: inf */
	golden_narrow(FG_DT_BF16, fg_bits_f32(0x7f7f7fff), 0x7f7f); /* below it: max finite */
	golden_narrow(FG_DT_BF16, INFINITY, 0x7f80);
	golden_narrow(FG_DT_BF16, fg_bits_f32(0x7f800001), 0x7fc0); /* sNaN stays NaN, not inf */
	golden_narrow(FG_DT_BF16, fg_bits_f32(0xffffffff), 0xffff);
	golden_narrow(FG_DT_BF16, fg_bits_f32(0x00008000), 0x0000); /* 2^-134: tie to even 0 */
	golden_narrow(FG_DT_BF16, fg_bits_f32(0x00018000), 0x0002); /* 1.5 * 2^-133: tie to even 2 */
}

static void test_golden_f16(void **state)
{
	(void)state;
	golden_widen(FG_DT_F16, 0x3c00, fg_f32_bits(1.0f));
	golden_widen(FG_DT_F16, 0x7bff, fg_f32_bits(65504.0f));
	golden_widen(FG_DT_F16, 0x0001, fg_f32_bits(0x1p-24f));
	golden_widen(FG_DT_F16, 0x83ff, fg_f32_bits(-0x3ffp-24f));
	golden_widen(FG_DT_F16, 0xfc00, 0xff800000);
	golden_widen(FG_DT_F16, 0x7c01, 0x7fc02000); /* sNaN: payload kept, quiet bit set */
	golden_narrow(FG_DT_F16, 1.0f, 0x3c00);
	golden_narrow(FG_DT_F16, 0.1f, 0x2e66);
	golden_narrow(FG_DT_F16, 65504.0f, 0x7bff);
	golden_narrow(FG_DT_F16, 65519.0f, 0x7bff);
	golden_narrow(FG_DT_F16, 65520.0f, 0x7c00); /* tie with the missing 65536: odd, so inf */
	golden_narrow(FG_DT_F16, -1e9f, 0xfc00);
	golden_narrow(FG_DT_F16, 0x1p-24f, 0x0001);
	golden_narrow(FG_DT_F16, 0x1p-25f, 0x0000);           /* tie: even 0 */
	golden_narrow(FG_DT_F16, -0x1p-25f, 0x8000);
	golden_narrow(FG_DT_F16, 0x1.000002p-25f, 0x0001);   /* just past the tie */
	golden_narrow(FG_DT_F16, 0x3p-25f, 0x0002);           /* tie 1/2: even 2 */
	golden_narrow(FG_DT_F16, 0x1p-14f, 0x0400);           /* smallest normal */
	golden_narrow(FG_DT_F16, 0x1.ffcp-15f, 0x0400);       /* 1023.5 * 2^-24: tie, even is the normal */
	golden_narrow(FG_DT_F16, fg_bits_f32(0x7f800001), 0x7e00);
	golden_narrow(FG_DT_F16, fg_bits_f32(0xffa02000), 0xff01); /* payload truncated */
}

static void test_golden_e4m3(void **state)
{
	(void)state;
	golden_widen(FG_DT_F8_E4M3, 0x7e, fg_f32_bits(448.0f));
	golden_widen(FG_DT_F8_E4M3, 0x38, fg_f32_bits(1.0f));
	golden_widen(FG_DT_F8_E4M3, 0x01, fg_f32_bits(0x1p-9f));
	golden_widen(FG_DT_F8_E4M3, 0x08, fg_f32_bits(0x1p-6f));
	golden_widen(FG_DT_F8_E4M3, 0x78, fg_f32_bits(256.0f)); /* exponent 15 is finite in E4M3FN */
	golden_widen(FG_DT_F8_E4M3, 0x80, fg_f32_bits(-0.0f));
	golden_widen(FG_DT_F8_E4M3, 0x7f, 0x7fc00000);
	golden_widen(FG_DT_F8_E4M3, 0xff, 0xffc00000);
	golden_narrow(FG_DT_F8_E4M3, 448.0f, 0x7e);
	golden_narrow(FG_DT_F8_E4M3, 416.0f, 0x7d);
	golden_narrow(FG_DT_F8_E4M3, 432.0f, 0x7e);  /* tie 416/448: even */
	golden_narrow(FG_DT_F8_E4M3, 464.0f, 0x7e);  /* tie 448/480: saturates */
	golden_narrow(FG_DT_F8_E4M3, 1000.0f, 0x7e);
	golden_narrow(FG_DT_F8_E4M3, -1000.0f, 0xfe);
	golden_narrow(FG_DT_F8_E4M3, FLT_MAX, 0x7e);
	golden_narrow(FG_DT_F8_E4M3, INFINITY, 0x7e);
	golden_narrow(FG_DT_F8_E4M3, -INFINITY, 0xfe);
	golden_narrow(FG_DT_F8_E4M3, NAN, 0x7f);
	golden_narrow(FG_DT_F8_E4M3, fg_bits_f32(0xff800001), 0xff);
	golden_narrow(FG_DT_F8_E4M3, 1.0f, 0x38);
	golden_narrow(FG_DT_F8_E4M3, 240.0f, 0x77);
	golden_narrow(FG_DT_F8_E4M3, 0x1p-9f, 0x01);
	golden_narrow(FG_DT_F8_E4M3, 0x1p-10f, 0x00);  /* tie: even 0 */
	golden_narrow(FG_DT_F8_E4M3, 0x3p-10f, 0x02);  /* 1.5 * 2^-9: tie 1/2, even */
	golden_narrow(FG_DT_F8_E4M3, 0x1p-6f, 0x08);
	golden_narrow(FG_DT_F8_E4M3, 0xfp-10f, 0x08);  /* 7.5 * 2^-9: tie 7/8, even: into normal */
	golden_narrow(FG_DT_F8_E4M3, 0x1p-100f, 0x00);
}

static void test_golden_e5m2(void **state)
{
	(void)state;
	golden_widen(FG_DT_F8_E5M2, 0x7b, fg_f32_bits(57344.0f));
	golden_widen(FG_DT_F8_E5M2, 0x7c, 0x7f800000);
	golden_widen(FG_DT_F8_E5M2, 0xfc, 0xff800000);
	golden_widen(FG_DT_F8_E5M2, 0x01, fg_f32_bits(0x1p-16f));
	golden_widen(FG_DT_F8_E5M2, 0x3c, fg_f32_bits(1.0f));
	golden_widen(FG_DT_F8_E5M2, 0x7d, 0x7fe00000); /* sNaN: quieted, payload kept */
	golden_narrow(FG_DT_F8_E5M2, 57344.0f, 0x7b);
	golden_narrow(FG_DT_F8_E5M2, 61439.0f, 0x7b);
	golden_narrow(FG_DT_F8_E5M2, 61440.0f, 0x7c); /* tie with the missing 65536: odd, so inf */
	golden_narrow(FG_DT_F8_E5M2, INFINITY, 0x7c);
	golden_narrow(FG_DT_F8_E5M2, -INFINITY, 0xfc);
	golden_narrow(FG_DT_F8_E5M2, NAN, 0x7e);
	golden_narrow(FG_DT_F8_E5M2, 1.0f, 0x3c);
	golden_narrow(FG_DT_F8_E5M2, 0x1p-16f, 0x01);
	golden_narrow(FG_DT_F8_E5M2, 0x1p-17f, 0x00);
	golden_narrow(FG_DT_F8_E5M2, 0x1p-14f, 0x04);
	golden_narrow(FG_DT_F8_E5M2, 1.125f, 0x3c); /* tie 1.0/1.25: even */
	golden_narrow(FG_DT_F8_E5M2, 1.375f, 0x3e); /* tie 1.25/1.5: even */
}

/* ---- widening: every code ----------------------------------------------------- */

/* The reference against the formula, for every code of every format. */
static void test_widen_ref_formula(void **state)
{
	size_t k;
	uint32_t c;

	(void)state;
	for (k = 0; k < NFMTS; k++) {
		const struct test_fmt *f = &fmts[k];

		for (c = 0; c < fmt_codes(f); c++)
			EXPECT_BITS(ref_widen(f, c), oracle_widen(f, c), "widen ref vs formula", f->name, c);
	}
}

/* The dispatched bulk path against the reference on every code, with the
 * codes at an odd address and the output at a non-multiple of 4, plus the
 * _ref bulk function. */
static void test_widen_bulk_exhaustive(void **state)
{
	size_t k, i;

	(void)state;
	print_message("widening through the %s path\n", fg_dtype_simd_path());
	for (k = 0; k < NFMTS; k++) {
		const struct test_fmt *f = &fmts[k];
		size_t n = fmt_codes(f);
		unsigned char *src = malloc(n * f->bytes + 1);
		unsigned char *dst = malloc(n * 4 + 3);
		float *aligned = malloc(n * 4);

		assert_non_null(src);
		assert_non_null(dst);
		assert_non_null(aligned);
		for (i = 0; i < n; i++)
			store_code(f, src + 1, i, (uint32_t)i);
		assert_int_equal(fg_dtype_to_f32(f->dt, src + 1, (float *)(void *)(dst + 3), n), 0);
		for (i = 0; i < n; i++)
			EXPECT_BITS(load_bits(dst + 3, i), ref_widen(f, (uint32_t)i), "bulk widen (odd addresses)",
				    f->name, i);
		memmove(src, src + 1, n * f->bytes);
		assert_int_equal(fg_dtype_to_f32(f->dt, src, aligned, n), 0);
		for (i = 0; i < n; i++)
			EXPECT_BITS(fg_f32_bits(aligned[i]), ref_widen(f, (uint32_t)i), "bulk widen", f->name, i);
		assert_int_equal(fg_dtype_to_f32_ref(f->dt, src, aligned, n), 0);
		for (i = 0; i < n; i++)
			EXPECT_BITS(fg_f32_bits(aligned[i]), ref_widen(f, (uint32_t)i), "ref bulk widen", f->name, i);
		free(src);
		free(dst);
		free(aligned);
	}
}

/* ---- narrowing ----------------------------------------------------------------- */

/* The reference against the oracle: every value, +-1 ulp, tie and tie +-1 ulp
 * of every code, the specials, and 2 * 100k pseudo-random inputs. */
static void test_narrow_ref_oracle(void **state)
{
	struct inputs in = { 0 };
	size_t k, i;

	(void)state;
	for (k = 0; k < NFMTS; k++) {
		const struct test_fmt *f = &fmts[k];

		narrow_inputs(f, &in, 100000);
		for (i = 0; i < in.n; i++)
			EXPECT_BITS(ref_narrow(f, in.v[i]), oracle_narrow(f, in.v[i]), "narrow ref vs oracle",
				    f->name, in.v[i]);
		in.n = 0;
	}
	inputs_release(&in);
}

/* The dispatched bulk path against the reference on the same neighbourhoods
 * plus 2 * 1M pseudo-random inputs per format, aligned and at odd addresses. */
static void test_narrow_bulk_agreement(void **state)
{
	struct inputs in = { 0 };
	size_t k, i;

	(void)state;
	print_message("narrowing through the %s path\n", fg_dtype_simd_path());
	for (k = 0; k < NFMTS; k++) {
		const struct test_fmt *f = &fmts[k];
		unsigned char *src, *dst;

		narrow_inputs(f, &in, 1000000);
		src = malloc(in.n * 4 + 1);
		dst = malloc(in.n * f->bytes + 3);
		assert_non_null(src);
		assert_non_null(dst);

		assert_int_equal(fg_dtype_from_f32(f->dt, (const float *)(const void *)in.v, dst, in.n), 0);
		for (i = 0; i < in.n; i++)
			EXPECT_BITS(load_code(f, dst, i), ref_narrow(f, in.v[i]), "bulk narrow", f->name, in.v[i]);

		memcpy(src + 1, in.v, in.n * 4);
		memset(dst, 0, in.n * f->bytes + 3);
		assert_int_equal(fg_dtype_from_f32(f->dt, (const float *)(const void *)(src + 1), dst + 3, in.n), 0);
		for (i = 0; i < in.n; i++)
			EXPECT_BITS(load_code(f, dst + 3, i), ref_narrow(f, in.v[i]), "bulk narrow (odd addresses)",
				    f->name, in.v[i]);

		assert_int_equal(fg_dtype_from_f32_ref(f->dt, (const float *)(const void *)in.v, dst, in.n), 0);
		for (i = 0; i < in.n; i++)
			EXPECT_BITS(load_code(f, dst, i), ref_narrow(f, in.v[i]), "ref bulk narrow", f->name,
				    in.v[i]);
		free(src);
		free(dst);
		in.n = 0;
	}
	inputs_release(&in);
}

/* ---- tails, odd addresses, guard bytes ------------------------------------------ */

#define GUARD 64
#define GUARD_BYTE 0xa5

static void check_guards(const unsigned char *buf, size_t start, size_t len, size_t total,
			 const char *what, const char *name, size_t n)
{
	size_t i;

	for (i = 0; i < start; i++)
		if (buf[i] != GUARD_BYTE)
			fail_msg("%s %s n=%zu: wrote before the destination", name, what, n);
	for (i = start + len; i < total; i++)
		if (buf[i] != GUARD_BYTE)
			fail_msg("%s %s n=%zu: wrote past the destination (byte %zu)", name, what, n,
				 i - start - len);
}

/* Every length 0..80 and a few around vector multiples, at every byte offset
 * 0..3 of source and destination: values agree and nothing outside the
 * destination is written (masked and scalar tails). */
static void test_tails_and_offsets(void **state)
{
	static const size_t extra[] = { 95, 96, 97, 127, 128, 129, 255, 257, 1023, 1031 };
	enum { MAXN = 1031 };
	uint32_t values[MAXN];
	unsigned char src[MAXN * 4 + 8], dst[MAXN * 4 + 2 * GUARD + 8];
	size_t k, i, n, idx, so, d_o;

	(void)state;
	/* Random bits, values just above 1.0 (ties for BF16), and NaN/inf. */
	for (i = 0; i < MAXN; i++) {
		if (i % 3 == 0)
			values[i] = rng_u32();
		else if (i % 3 == 1)
			values[i] = 0x3f800000u + (rng_u32() & 0x1ffff);
		else
			values[i] = rng_u32() | 0x7f800000u;
	}
	for (k = 0; k < NFMTS; k++) {
		const struct test_fmt *f = &fmts[k];

		for (idx = 0; idx < 81 + sizeof(extra) / sizeof(extra[0]); idx++) {
			n = idx < 81 ? idx : extra[idx - 81];
			for (so = 0; so < 4; so++) {
				for (d_o = 0; d_o < 4; d_o++) {
					size_t total = GUARD + d_o + n * 4 + GUARD;

					/* narrowing */
					memcpy(src + so, values, n * 4);
					memset(dst, GUARD_BYTE, sizeof(dst));
					assert_int_equal(fg_dtype_from_f32(f->dt, (const float *)(const void *)(src + so),
									   dst + GUARD + d_o, n), 0);
					check_guards(dst, GUARD + d_o, n * f->bytes, total, "narrow tail", f->name, n);
					for (i = 0; i < n; i++)
						EXPECT_BITS(load_code(f, dst + GUARD + d_o, i), ref_narrow(f, values[i]),
							    "narrow tail", f->name, values[i]);

					/* widening the codes just produced */
					memcpy(src + so, dst + GUARD + d_o, n * f->bytes);
					memset(dst, GUARD_BYTE, sizeof(dst));
					assert_int_equal(fg_dtype_to_f32(f->dt, src + so,
									 (float *)(void *)(dst + GUARD + d_o), n), 0);
					check_guards(dst, GUARD + d_o, n * 4, total, "widen tail", f->name, n);
					for (i = 0; i < n; i++)
						EXPECT_BITS(load_bits(dst + GUARD + d_o, i),
							    ref_widen(f, load_code(f, src + so, i)), "widen tail",
							    f->name, load_code(f, src + so, i));
				}
			}
		}
	}
}

/* ---- round trips ---------------------------------------------------------------- */

/* Every non-NaN code survives widening and narrowing, by the reference and by
 * the bulk path; NaN codes come back as NaN codes of the same sign. */
static void test_round_trip(void **state)
{
	size_t k, i;

	(void)state;
	for (k = 0; k < NFMTS; k++) {
		const struct test_fmt *f = &fmts[k];
		size_t n = fmt_codes(f);
		unsigned char *codes = malloc(n * f->bytes), *back = malloc(n * f->bytes);
		float *wide = malloc(n * 4);

		assert_non_null(codes);
		assert_non_null(back);
		assert_non_null(wide);
		for (i = 0; i < n; i++)
			store_code(f, codes, i, (uint32_t)i);
		assert_int_equal(fg_dtype_to_f32(f->dt, codes, wide, n), 0);
		assert_int_equal(fg_dtype_from_f32(f->dt, wide, back, n), 0);
		for (i = 0; i < n; i++) {
			uint32_t c = (uint32_t)i, got = load_code(f, back, i);

			if (fmt_is_nan(f, c)) {
				assert_true(fmt_is_nan(f, got));
				assert_int_equal(got & f->sign_bit, c & f->sign_bit);
				continue;
			}
			EXPECT_BITS(ref_narrow(f, ref_widen(f, c)), c, "ref round trip", f->name, c);
			EXPECT_BITS(got, c, "bulk round trip", f->name, c);
		}
		free(codes);
		free(back);
		free(wide);
	}
}

/* ---- F64, F32 and load_f64 ------------------------------------------------------- */

static void test_f64_f32(void **state)
{
	const double in[5] = { 1.0 + 0x1p-30, 1e300, -0.0, 0x1.000001p0, 0x1.000003p0 };
	const uint32_t want[5] = { 0x3f800000, 0x7f800000, 0x80000000, 0x3f800000, 0x3f800002 };
	unsigned char src[5 * 8 + 1], dst[5 * 8 + 3];
	float f32[5] = { 1.5f, -2.25f, 0x1p-149f, INFINITY, 3.0f };
	double d;
	size_t i;

	(void)state;
	memcpy(src + 1, in, sizeof(in));
	assert_int_equal(fg_dtype_to_f32(FG_DT_F64, src + 1, (float *)(void *)(dst + 3), 5), 0);
	for (i = 0; i < 5; i++)
		EXPECT_BITS(load_bits(dst + 3, i), want[i], "F64 to F32", "F64", i);
	assert_int_equal(fg_dtype_from_f32(FG_DT_F64, f32, dst + 3, 5), 0);
	for (i = 0; i < 5; i++) {
		memcpy(&d, dst + 3 + 8 * i, 8);
		assert_true(d == (double)f32[i]);
	}
	assert_int_equal(fg_dtype_to_f32(FG_DT_F32, f32, (float *)(void *)(dst + 1), 5), 0);
	assert_memory_equal(dst + 1, f32, sizeof(f32));
}

static void test_load_f64(void **state)
{
	unsigned char buf[64];
	double d = -0.1;
	float f = 3.5f;
	uint16_t h;

	(void)state;
	memset(buf, 0, sizeof(buf));
	memcpy(buf + 1 + 2 * 8, &d, 8);
	assert_true(fg_dtype_load_f64(FG_DT_F64, buf + 1, 2) == -0.1);
	memcpy(buf + 3 + 2 * 4, &f, 4);
	assert_true(fg_dtype_load_f64(FG_DT_F32, buf + 3, 2) == 3.5);
	h = 0x3e00; /* 1.5 */
	memcpy(buf + 1 + 2 * 2, &h, 2);
	assert_true(fg_dtype_load_f64(FG_DT_F16, buf + 1, 2) == 1.5);
	h = 0xc040; /* -3.0 */
	memcpy(buf + 1 + 2 * 2, &h, 2);
	assert_true(fg_dtype_load_f64(FG_DT_BF16, buf + 1, 2) == -3.0);
	buf[5] = 0x7e;
	assert_true(fg_dtype_load_f64(FG_DT_F8_E4M3, buf, 5) == 448.0);
	buf[5] = 0xfb;
	assert_true(fg_dtype_load_f64(FG_DT_F8_E5M2, buf, 5) == -57344.0);
	buf[5] = 0x7f;
	assert_true(isnan(fg_dtype_load_f64(FG_DT_F8_E4M3, buf, 5)));
	assert_true(isnan(fg_dtype_load_f64(FG_DT_I32, buf, 0)));
}

/* ---- dispatch ------------------------------------------------------------------- */

/* The path is the one this CPU and FORGED_SIMD call for; on this project's
 * AVX-512 machines an unforced run must use the AVX-512 kernels. */
static void test_dispatch(void **state)
{
	const char *forced = getenv("FORGED_SIMD");
	const char *path = fg_dtype_simd_path();
	const char *want = "scalar";

	(void)state;
	print_message("dtype path: %s (FORGED_SIMD=%s)\n", path, forced ? forced : "(unset)");
	if (forced && strcmp(forced, "scalar") == 0)
		want = "scalar";
	else if (cpu_has_avx512() && !(forced && strcmp(forced, "avx2") == 0))
		want = "avx512";
	else if (cpu_has_avx2_f16c())
		want = "avx2+f16c";
	assert_string_equal(path, want);
	/* Read once: changing the variable now changes nothing. */
	setenv("FORGED_SIMD", "scalar", 1);
	assert_string_equal(fg_dtype_simd_path(), want);
	if (forced)
		setenv("FORGED_SIMD", forced, 1);
	else
		unsetenv("FORGED_SIMD");
}

/* Run this whole binary again with each forced path; the child's
 * test_dispatch checks it got that path and the other tests check its kernels. */
static void test_dispatch_forced(void **state)
{
	(void)state;
	simd_rerun(saved_argv, "FORGED_DTYPE_TEST_CHILD");
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dispatch),
		cmocka_unit_test(test_dtype_table),
		cmocka_unit_test(test_golden_bf16),
		cmocka_unit_test(test_golden_f16),
		cmocka_unit_test(test_golden_e4m3),
		cmocka_unit_test(test_golden_e5m2),
		cmocka_unit_test(test_widen_ref_formula),
		cmocka_unit_test(test_widen_bulk_exhaustive),
		cmocka_unit_test(test_narrow_ref_oracle),
		cmocka_unit_test(test_narrow_bulk_agreement),
		cmocka_unit_test(test_tails_and_offsets),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_f64_f32),
		cmocka_unit_test(test_load_f64),
		cmocka_unit_test(test_dispatch_forced),
	};

	(void)argc;
	saved_argv = argv;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
