/*
 * test_quant.c: forge/format/quant/ against golden files computed by numpy, a
 * hand-worked example, properties of the format, and itself (the dispatched
 * vector kernels against the scalar reference).
 *
 * - Golden files come from tests/fixtures/quant_golden.py, an independent
 *   numpy implementation of the specs.  They live in $FORGED_QUANT_GOLDEN
 *   (default build/fixtures/quant_golden, made by `make test`); when the
 *   folder is missing the golden tests fail and say how to make it.  Every
 *   packed word, scale and bias must match bit for bit, for every (bits,
 *   group) and F32, BF16 and F16 inputs, whole and in bands of rows; so
 *   must mxfp4 codes and scale bytes, and FP8 block dequantization to F32
 *   and BF16 on ragged shapes.
 * - A group of 32 worked out by hand (the comment shows the arithmetic).
 * - The dispatched and reference paths are compared on many random rows of
 *   every width (a million values per width among them), odd row counts,
 *   unaligned buffers, raw bit patterns, and the errors they report.
 * - mxfp4 likewise, and its two tricks on every input that matters: the
 *   E2M1 code of every BF16 and F16 value up to 8 (groups led by 8.0 code
 *   each value as itself) at every power-of-two scale the dtype holds (all
 *   253 scale bytes for BF16), and of F32 values around every midpoint,
 *   scaled by powers of two; the scale byte of every BF16 and F16 amax and
 *   of every F32 amax mantissa near the rounding threshold at every
 *   exponent.  With FORGED_QUANT_EXHAUSTIVE=1, every F32 value up to 8 and
 *   every F32 amax (minutes per SIMD path; make test leaves it out).
 * - The threaded whole-tensor drivers write the bytes of one call for 1, 2,
 *   3 and 7 threads on tensors above their size threshold, and report the
 *   error one call reports; FORGED_QUANT_THREADS is parsed as documented.
 * - Dequantized values lie within half a step of the input; a group whose
 *   codes span 0..N (and whose bias is its edge) quantizes back to itself.
 * - Errors: unsupported bits and group sizes, shapes, non-finite weights and
 *   scales, bands outside the tensor.
 * - test_dispatch_forced re-runs this binary under FORGED_SIMD=scalar and
 *   FORGED_SIMD=avx2 so each kernel set is checked on an AVX-512 machine.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "forge/core/bytes.h"
#include "tests/unit/support.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "forge/format/dtype.h"
#include "forge/core/error.h"
#include "forge/format/quant/quant.h"

#define GOLDEN_HOWTO "/usr/bin/python3 tests/fixtures/quant_golden.py build/fixtures/quant_golden"

static char **saved_argv;

static const int all_bits[] = { 2, 3, 4, 5, 6, 8 };
static const int all_groups[] = { 32, 64, 128 };
static const enum fg_dtype param_dtypes[] = { FG_DT_F32, FG_DT_BF16, FG_DT_F16 };

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* ---- helpers ------------------------------------------------------------------ */

/* Uniform in [0, 1). */
static float rng_unit(void)
{
	return (float)(rng_u32() >> 8) / 16777216.0f;
}

/* Roughly normal (sum of four uniforms), times scale. */
static float rng_weight(float scale)
{
	return (rng_unit() + rng_unit() + rng_unit() + rng_unit() - 2.0f) * scale;
}

/* Fill n floats with one of several shapes of data, chosen by kind. */
static void fill_weights(float *w, size_t n, int kind)
{
	size_t i;
	float scale = powf(10.0f, (float)(int)(rng_u32() % 9) - 5.0f);

	for (i = 0; i < n; i++) {
		switch (kind % 7) {
		case 0: /* trained-weight-like */
			w[i] = rng_weight(0.05f);
			break;
		case 1: /* any magnitude */
			w[i] = (rng_unit() - 0.5f) * scale;
			break;
		case 2: /* small integers and halves: many exact ties */
			w[i] = (float)(int)(rng_u32() % 64) * 0.5f - 8.0f;
			break;
		case 3: /* one sign, offset: large |q0| */
			w[i] = 10.0f + rng_unit() * 0.1f;
			break;
		case 4: /* mostly zeros, some signed zeros and outliers */
			w[i] = (rng_u32() % 8 == 0) ? rng_weight(3.0f) : ((rng_u32() & 1) ? 0.0f : -0.0f);
			break;
		case 5: /* tiny ranges around a value */
			w[i] = 1e-3f + (float)(rng_u32() % 16) * 1e-10f;
			break;
		default: /* half steps of a grid, nudged by up to 2^-12 of a step */
			w[i] = 0.37f + 0.0123f * ((float)(int)(rng_u32() % 16) + 0.5f +
						  (float)((int)(rng_u32() % 65) - 32) * 0x1p-17f);
			break;
		}
	}
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	assert_non_null(p);
	return p;
}

/* Whole file into a fresh buffer; fails the test if it cannot be read. */
static unsigned char *read_all(const char *dir, const char *name, size_t *len)
{
	char path[1024];
	unsigned char *buf;
	FILE *f;
	long n;

	assert_true(snprintf(path, sizeof(path), "%s/%s", dir, name) < (int)sizeof(path));
	f = fopen(path, "rb");
	if (!f)
		fail_msg("cannot open golden file '%s' (regenerate: " GOLDEN_HOWTO ")", path);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n >= 0);
	assert_int_equal(fseek(f, 0, SEEK_SET), 0);
	buf = xmalloc((size_t)n);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* $FORGED_QUANT_GOLDEN, else BUILD/fixtures/quant_golden beside this binary. */
static const char *golden_dir(void)
{
	static char dir[PATH_MAX];

	return fixture_dir_env(dir, sizeof(dir), "FORGED_QUANT_GOLDEN", "quant_golden");
}

/* The parsed index.json; a missing folder fails the calling test. */
static cJSON *golden_index(void)
{
	const char *dir = golden_dir();
	char path[1024];
	unsigned char *text;
	size_t len;
	cJSON *root;
	FILE *f;

	assert_true(snprintf(path, sizeof(path), "%s/index.json", dir) < (int)sizeof(path));
	f = fopen(path, "rb");
	if (!f)
		fail_msg("quant golden files not found at '%s' (set FORGED_QUANT_GOLDEN or generate them: " GOLDEN_HOWTO ")",
			 path);
	fclose(f);
	text = read_all(dir, "index.json", &len);
	root = cJSON_ParseWithLength((const char *)text, len);
	free(text);
	assert_non_null(root);
	assert_int_equal(cJSON_GetObjectItem(root, "version")->valueint, 1);
	return root;
}

static int json_int(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItem(o, key);

	assert_true(cJSON_IsNumber(v));
	return v->valueint;
}

static const char *json_str(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItem(o, key);

	assert_true(cJSON_IsString(v));
	return v->valuestring;
}

/* A golden file that must hold exactly len bytes. */
static unsigned char *golden_file(const cJSON *c, const char *key, size_t len)
{
	size_t got;
	unsigned char *b = read_all(golden_dir(), json_str(c, key), &got);

	if (got != len)
		fail_msg("golden file '%s' has %zu bytes, expected %zu", json_str(c, key), got, len);
	return b;
}

/* Byte-exact comparison that names the first differing element. */
static void expect_same(const char *what, const char *name, const void *want, const void *got,
			size_t n, size_t elem)
{
	const unsigned char *a = want, *b = got;
	size_t i;

	if (memcmp(a, b, n * elem) == 0)
		return;
	for (i = 0; i < n; i++) {
		if (memcmp(a + i * elem, b + i * elem, elem)) {
			uint64_t wa = 0, wb = 0;

			memcpy(&wa, a + i * elem, elem);
			memcpy(&wb, b + i * elem, elem);
			fail_msg("%s: %s differs at element %zu of %zu: want 0x%llx, got 0x%llx", name, what,
				 i, n, (unsigned long long)wa, (unsigned long long)wb);
		}
	}
}

static enum fg_dtype parse_dt(const char *s)
{
	enum fg_dtype dt;

	assert_int_equal(fg_dtype_parse(s, &dt), 0);
	return dt;
}

/* ---- dispatch ------------------------------------------------------------------- */

static void test_dispatch(void **state)
{
	const char *cap = getenv("FORGED_SIMD");
	const char *path = fg_quant_simd_path();

	(void)state;
	print_message("quant kernels: %s (dtype kernels: %s)\n", path, fg_dtype_simd_path());
	if (cap && strcmp(cap, "scalar") == 0)
		assert_string_equal(path, "scalar");
	else if (cap && strcmp(cap, "avx2") == 0)
		assert_true(strcmp(path, "avx2") == 0 || strcmp(path, "scalar") == 0);
	else
		assert_true(strcmp(path, "avx512") == 0 || strcmp(path, "avx2") == 0 ||
			    strcmp(path, "scalar") == 0);
}

/* ---- a worked example ---------------------------------------------------------------
 *
 * One group of 32 at 4 bits (N = 15).  min = -1, max = 2.75: |min| < |max|,
 * so s0 = 3.75 / 15 = 0.25, s = -0.25, edge = 2.75, q0 = rint(2.75 / -0.25)
 * = -11, s = 2.75 / -11 = -0.25, bias = 2.75, and q = rint((w - 2.75) / -0.25)
 * = rint(4 * (2.75 - w)).  The half steps 0.125 .. -0.625 land on x.5 and go
 * to the even neighbour (10.5 -> 10, 9.5 -> 10, 8.5 -> 8, 7.5 -> 8, 14.5 -> 14,
 * 13.5 -> 14, 0.5 -> 0, 1.5 -> 2); 0.1 gives 10.6 -> 11, -0.1 11.4 -> 11,
 * 1.2 6.2 -> 6.  Nibble j sits at bits 4j, so word 0 (q0..q7 =
 * 0 15 11 7 3 13 9 5) reads 0x59d37bf0 from the high nibble down.
 */
static void test_hand_checked(void **state)
{
	static const float w[32] = {
		2.75f, -1.0f, 0.0f, 1.0f, 2.0f, -0.5f, 0.5f, 1.5f,
		2.5f, 0.125f, 0.375f, 0.625f, 0.875f, -0.875f, -0.625f, 2.625f,
		2.375f, 0.1f, -0.1f, 1.2f, -0.75f, 2.25f, 1.75f, -0.25f,
		0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f,
	};
	static const uint8_t want_q[32] = {
		0, 15, 11, 7, 3, 13, 9, 5,
		1, 10, 10, 8, 8, 14, 14, 0,
		2, 11, 11, 6, 14, 2, 4, 12,
		11, 11, 11, 11, 11, 11, 11, 11,
	};
	static const uint32_t want_words[4] = { 0x59d37bf0u, 0x0ee88aa1u, 0xc42e6bb2u, 0xbbbbbbbbu };
	uint32_t packed[4], packed_ref[4];
	float s, b, s_ref, b_ref, deq[32];
	int j;

	(void)state;
	assert_int_equal(fg_quant_affine_rows(w, 1, 32, 4, 32, packed, &s, &b, NULL), 0);
	assert_int_equal(fg_quant_affine_rows_ref(w, 1, 32, 4, 32, packed_ref, &s_ref, &b_ref, NULL), 0);
	assert_true(s == -0.25f);
	assert_true(b == 2.75f);
	assert_true(s_ref == -0.25f && b_ref == 2.75f);
	for (j = 0; j < 4; j++) {
		assert_int_equal(packed[j], want_words[j]);
		assert_int_equal(packed_ref[j], want_words[j]);
	}
	for (j = 0; j < 32; j++)
		assert_int_equal((packed[j / 8] >> (4 * (j % 8))) & 0xf, want_q[j]);
	assert_int_equal(fg_dequant_affine_rows(packed, &s, &b, 1, 32, 4, 32, deq, NULL), 0);
	for (j = 0; j < 32; j++)
		assert_true(deq[j] == -0.25f * (float)want_q[j] + 2.75f);

	/* mxfp4 of a group with amax 6: d = 1, byte 127, values by the table;
	 * 0.25 and 1.25 are ties that stay down, 0.75 and 1.75 go up (even
	 * codes), -0.1 becomes -0. */
	{
		float x[32] = { 6.0f, 0.25f, 0.75f, 1.25f, 1.75f, -3.5f, 5.0f, -0.1f };
		static const uint8_t want_codes[8] = { 0x7, 0x0, 0x2, 0x2, 0x4, 0xe, 0x6, 0x8 };
		uint32_t pk[4];
		uint8_t sc;

		assert_int_equal(fg_quant_mxfp4_rows(x, 1, 32, pk, &sc, NULL), 0);
		assert_int_equal(sc, 127);
		for (j = 0; j < 8; j++)
			assert_int_equal((pk[0] >> (4 * j)) & 0xf, want_codes[j]);
		assert_int_equal(pk[1], 0);
	}
}

/* ---- golden files: affine ------------------------------------------------------------ */

static void check_affine_case(const cJSON *c)
{
	const char *name = json_str(c, "name");
	const int bits = json_int(c, "bits"), group = json_int(c, "group");
	const enum fg_dtype dt = parse_dt(json_str(c, "dtype"));
	const size_t rows = (size_t)json_int(c, "rows"), cols = (size_t)json_int(c, "cols");
	const size_t esz = fg_dtype_size(dt), words = rows * fg_quant_affine_row_words(cols, bits);
	const size_t ng = rows * cols / (size_t)group, bands[] = { 1, 3, 7 };
	unsigned char *w = golden_file(c, "w", rows * cols * esz);
	unsigned char *want_packed = golden_file(c, "packed", words * 4);
	unsigned char *want_s = golden_file(c, "scales", ng * esz);
	unsigned char *want_b = golden_file(c, "biases", ng * esz);
	unsigned char *want_s32 = golden_file(c, "scales_f32", ng * 4);
	unsigned char *want_b32 = golden_file(c, "biases_f32", ng * 4);
	uint32_t *packed = xmalloc(words * 4);
	unsigned char *s = xmalloc(ng * 4), *b = xmalloc(ng * 4);
	float *wide = xmalloc(rows * cols * 4);
	struct fg_err err = { 0 };
	size_t k, r, n;
	int ref;

	for (ref = 0; ref < 2; ref++) {
		const char *path = ref ? "ref" : "dispatched";
		int rc;

		/* dtype in, dtype scales out: the layout mlx-lm writes. */
		memset(packed, 0xa5, words * 4);
		rc = ref ? fg_quant_affine_rows_dt_ref(dt, w, rows, cols, bits, group, packed, s, b, &err)
			 : fg_quant_affine_rows_dt(dt, w, rows, cols, bits, group, packed, s, b, &err);
		if (rc)
			fail_msg("%s (%s): %s", name, path, err.msg);
		expect_same(ref ? "packed (dt, ref)" : "packed (dt)", name, want_packed, packed, words, 4);
		expect_same("scales (dt)", name, want_s, s, ng, esz);
		expect_same("biases (dt)", name, want_b, b, ng, esz);

		/* F32 in, F32 scales out, after exact widening. */
		assert_int_equal(fg_dtype_to_f32_ref(dt, w, wide, rows * cols), 0);
		rc = ref ? fg_quant_affine_rows_ref(wide, rows, cols, bits, group, packed, (float *)(void *)s,
						    (float *)(void *)b, &err)
			 : fg_quant_affine_rows(wide, rows, cols, bits, group, packed, (float *)(void *)s,
						(float *)(void *)b, &err);
		if (rc)
			fail_msg("%s (%s, f32): %s", name, path, err.msg);
		expect_same("packed (f32)", name, want_packed, packed, words, 4);
		expect_same("scales (f32)", name, want_s32, s, ng, 4);
		expect_same("biases (f32)", name, want_b32, b, ng, 4);
		(void)path;
	}

	/* Streaming: the same rows in bands give the same bytes. */
	for (k = 0; k < COUNT(bands); k++) {
		const size_t wpr = fg_quant_affine_row_words(cols, bits), gpr = cols / (size_t)group;

		memset(packed, 0, words * 4);
		for (r = 0; r < rows; r += n) {
			n = rows - r < bands[k] ? rows - r : bands[k];
			assert_int_equal(fg_quant_affine_rows_dt(dt, w + r * cols * esz, n, cols, bits, group,
								 packed + r * wpr, s + r * gpr * esz,
								 b + r * gpr * esz, &err),
					 0);
		}
		expect_same("packed (bands)", name, want_packed, packed, words, 4);
		expect_same("scales (bands)", name, want_s, s, ng, esz);
	}
	free(w);
	free(want_packed);
	free(want_s);
	free(want_b);
	free(want_s32);
	free(want_b32);
	free(packed);
	free(s);
	free(b);
	free(wide);
}

static void test_golden_affine(void **state)
{
	cJSON *root = golden_index(), *c;
	bool seen[9][129][FG_DT_COUNT];
	size_t n = 0, i, j, k;

	(void)state;
	memset(seen, 0, sizeof(seen));
	cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "affine"))
	{
		check_affine_case(c);
		seen[json_int(c, "bits")][json_int(c, "group")][parse_dt(json_str(c, "dtype"))] = true;
		n++;
	}
	/* Every combination is present: a truncated index must not pass. */
	for (i = 0; i < COUNT(all_bits); i++)
		for (j = 0; j < COUNT(all_groups); j++)
			for (k = 0; k < COUNT(param_dtypes); k++)
				if (!seen[all_bits[i]][all_groups[j]][param_dtypes[k]])
					fail_msg("golden index lacks affine bits %d group %d %s", all_bits[i],
						 all_groups[j], fg_dtype_name(param_dtypes[k]));
	print_message("affine golden cases: %zu\n", n);
	cJSON_Delete(root);
}

/* ---- golden files: mxfp4 and fp8 ----------------------------------------------------- */

static void test_golden_mxfp4(void **state)
{
	cJSON *root = golden_index(), *c;
	size_t n = 0;

	(void)state;
	cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "mxfp4"))
	{
		const char *name = json_str(c, "name");
		const enum fg_dtype dt = parse_dt(json_str(c, "dtype"));
		const size_t rows = (size_t)json_int(c, "rows"), cols = (size_t)json_int(c, "cols");
		const size_t esz = fg_dtype_size(dt), ng = rows * cols / 32;
		unsigned char *w = golden_file(c, "w", rows * cols * esz);
		unsigned char *want_packed = golden_file(c, "packed", rows * cols / 2);
		unsigned char *want_s = golden_file(c, "scales", ng);
		unsigned char *want_deq = golden_file(c, "dequant", rows * cols * 4);
		uint32_t *packed = xmalloc(rows * cols / 2);
		uint8_t *s = xmalloc(ng);
		float *deq = xmalloc(rows * cols * 4), *wide = xmalloc(rows * cols * 4);
		struct fg_err err = { 0 };

		if (fg_quant_mxfp4_rows_dt(dt, w, rows, cols, packed, s, &err))
			fail_msg("%s: %s", name, err.msg);
		expect_same("scales", name, want_s, s, ng, 1);
		expect_same("packed", name, want_packed, packed, rows * cols / 8, 4);
		memset(packed, 0, rows * cols / 2);
		memset(s, 0, ng);
		assert_int_equal(fg_quant_mxfp4_rows_dt_ref(dt, w, rows, cols, packed, s, &err), 0);
		expect_same("scales (ref)", name, want_s, s, ng, 1);
		expect_same("packed (ref)", name, want_packed, packed, rows * cols / 8, 4);
		assert_int_equal(fg_dtype_to_f32_ref(dt, w, wide, rows * cols), 0);
		memset(packed, 0, rows * cols / 2);
		assert_int_equal(fg_quant_mxfp4_rows(wide, rows, cols, packed, s, &err), 0);
		expect_same("packed (f32)", name, want_packed, packed, rows * cols / 8, 4);
		assert_int_equal(fg_dequant_mxfp4_rows(packed, s, rows, cols, deq, &err), 0);
		expect_same("dequant", name, want_deq, deq, rows * cols, 4);
		free(w);
		free(want_packed);
		free(want_s);
		free(want_deq);
		free(packed);
		free(s);
		free(deq);
		free(wide);
		n++;
	}
	assert_int_equal(n, 3);
	cJSON_Delete(root);
}

static void test_golden_fp8(void **state)
{
	cJSON *root = golden_index(), *c;
	size_t n = 0;

	(void)state;
	cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "fp8"))
	{
		const char *name = json_str(c, "name");
		const size_t rows = (size_t)json_int(c, "rows"), cols = (size_t)json_int(c, "cols");
		const size_t sr = (size_t)json_int(c, "scale_rows"), sc = (size_t)json_int(c, "scale_cols");
		const size_t bands[] = { 200 * 300, 1, 37, 128 };
		unsigned char *w = golden_file(c, "w", rows * cols);
		float *si = (float *)(void *)golden_file(c, "scale_inv", sr * sc * 4);
		unsigned char *want32 = golden_file(c, "out_f32", rows * cols * 4);
		unsigned char *want16 = golden_file(c, "out_bf16", rows * cols * 2);
		float *out32 = xmalloc(rows * cols * 4);
		uint16_t *out16 = xmalloc(rows * cols * 2);
		struct fg_err err = { 0 };
		size_t k, r, m;
		int ref;

		for (ref = 0; ref < 2; ref++) {
			for (k = 0; k < COUNT(bands); k++) {
				memset(out32, 0xff, rows * cols * 4);
				memset(out16, 0xff, rows * cols * 2);
				for (r = 0; r < rows; r += m) {
					m = rows - r < bands[k] ? rows - r : bands[k];
					assert_int_equal((ref ? fg_fp8_block_dequant_rows_ref
							      : fg_fp8_block_dequant_rows)(w, rows, cols, si, sr, sc, r, m,
											   out32 + r * cols, &err),
							 0);
					assert_int_equal((ref ? fg_fp8_block_dequant_rows_bf16_ref
							      : fg_fp8_block_dequant_rows_bf16)(w, rows, cols, si, sr, sc, r,
												m, out16 + r * cols, &err),
							 0);
				}
				expect_same(ref ? "f32 (ref)" : "f32", name, want32, out32, rows * cols, 4);
				expect_same(ref ? "bf16 (ref)" : "bf16", name, want16, out16, rows * cols, 2);
			}
		}
		free(w);
		free(si);
		free(want32);
		free(want16);
		free(out32);
		free(out16);
		n++;
	}
	assert_true(n >= 1);
	cJSON_Delete(root);
}

/* ---- scalar and vector paths agree ------------------------------------------------------- */

/* Quantize the same rows on both paths from buffers at offset `off` bytes
 * (unaligned when off is not a multiple of 4) and compare every output byte. */
static void agree_once(enum fg_dtype dt, const float *w32, size_t rows, size_t cols, int bits,
		       int group, size_t off)
{
	const size_t esz = fg_dtype_size(dt), words = rows * fg_quant_affine_row_words(cols, bits);
	const size_t ng = rows * cols / (size_t)group;
	unsigned char *src = xmalloc(rows * cols * esz + off);
	unsigned char *pa = xmalloc(words * 4 + off), *pb = xmalloc(words * 4 + off);
	unsigned char *sa = xmalloc(ng * esz + off), *sb = xmalloc(ng * esz + off);
	unsigned char *ba = xmalloc(ng * esz + off), *bb = xmalloc(ng * esz + off);
	struct fg_err ea = { 0 }, eb = { 0 };
	char name[96];
	int ra, rb;

	snprintf(name, sizeof(name), "%s bits %d group %d rows %zu off %zu", fg_dtype_name(dt), bits, group,
		 rows, off);
	assert_int_equal(fg_dtype_from_f32_ref(dt, w32, src + off, rows * cols), 0);
	memset(pa, 0x5a, words * 4 + off);
	memset(pb, 0x5a, words * 4 + off);
	ra = fg_quant_affine_rows_dt(dt, src + off, rows, cols, bits, group, (uint32_t *)(void *)(pa + off),
				     sa + off, ba + off, &ea);
	rb = fg_quant_affine_rows_dt_ref(dt, src + off, rows, cols, bits, group,
					 (uint32_t *)(void *)(pb + off), sb + off, bb + off, &eb);
	assert_int_equal(ra, rb);
	if (ra == 0) {
		expect_same("packed", name, pb + off, pa + off, words, 4);
		expect_same("scales", name, sb + off, sa + off, ng, esz);
		expect_same("biases", name, bb + off, ba + off, ng, esz);
	} else {
		assert_string_equal(ea.msg, eb.msg);
	}
	free(src);
	free(pa);
	free(pb);
	free(sa);
	free(sb);
	free(ba);
	free(bb);
}

static void test_paths_agree(void **state)
{
	static const size_t row_counts[] = { 1, 3, 7, 13 };
	static const size_t col_groups[] = { 1, 2, 3, 5, 9 };
	size_t i, j, k, t, cases = 0;
	float *w = xmalloc(13 * 9 * 128 * 4);

	(void)state;
	for (i = 0; i < COUNT(all_bits); i++) {
		for (j = 0; j < COUNT(all_groups); j++) {
			for (k = 0; k < COUNT(param_dtypes); k++) {
				for (t = 0; t < 12; t++) {
					size_t rows = row_counts[t % COUNT(row_counts)];
					size_t cols = (size_t)all_groups[j] * col_groups[t % COUNT(col_groups)];

					fill_weights(w, rows * cols, (int)t);
					agree_once(param_dtypes[k], w, rows, cols, all_bits[i], all_groups[j],
						   t % 3 == 2 ? 1 : (t % 3 == 1 ? 2 : 0));
					cases++;
				}
			}
		}
	}
	/* F32 API too, on a longer band (odd count, 63 rows). */
	for (i = 0; i < COUNT(all_bits); i++) {
		const size_t rows = 63, cols = 640, words = rows * fg_quant_affine_row_words(cols, all_bits[i]);
		float *big = xmalloc(rows * cols * 4), *sa = xmalloc(rows * 20 * 4), *sb = xmalloc(rows * 20 * 4);
		float *ba = xmalloc(rows * 20 * 4), *bb = xmalloc(rows * 20 * 4);
		uint32_t *pa = xmalloc(words * 4), *pb = xmalloc(words * 4);

		fill_weights(big, rows * cols, (int)i);
		assert_int_equal(fg_quant_affine_rows(big, rows, cols, all_bits[i], 32, pa, sa, ba, NULL), 0);
		assert_int_equal(fg_quant_affine_rows_ref(big, rows, cols, all_bits[i], 32, pb, sb, bb, NULL), 0);
		expect_same("packed (f32 api)", "band of 63 rows", pb, pa, words, 4);
		expect_same("scales (f32 api)", "band of 63 rows", sb, sa, rows * 20, 4);
		expect_same("biases (f32 api)", "band of 63 rows", bb, ba, rows * 20, 4);
		free(big);
		free(sa);
		free(sb);
		free(ba);
		free(bb);
		free(pa);
		free(pb);
		cases++;
	}
	print_message("path agreement cases: %zu (kernels %s)\n", cases, fg_quant_simd_path());
	free(w);
}

/* Volume: a million values per width, every shape of data, both paths; the
 * vector kernels' reciprocal shortcut must never round differently. */
static void test_paths_agree_volume(void **state)
{
	const size_t rows = 256, cols = 4096;
	float *w = xmalloc(rows * cols * 4);
	size_t i, k;

	(void)state;
	for (i = 0; i < COUNT(all_bits); i++) {
		for (k = 0; k < rows; k++)
			fill_weights(w + k * cols, cols, (int)(k + i));
		agree_once(i % 2 ? FG_DT_BF16 : FG_DT_F32, w, rows, cols, all_bits[i],
			   all_groups[i % COUNT(all_groups)], 0);
	}
	free(w);
}

/* Random bit patterns, not just plausible weights: every finite F32 value
 * goes through both paths; non-finite ones must give the same error. */
static void test_paths_agree_bit_patterns(void **state)
{
	const size_t rows = 5, cols = 128;
	float w[5 * 128];
	size_t i, t;

	(void)state;
	for (t = 0; t < 200; t++) {
		for (i = 0; i < rows * cols; i++) {
			uint32_t x = rng_u32();

			/* Mostly moderate exponents so groups do not overflow;
			 * sometimes anything at all. */
			if (t % 10)
				x = (x & 0x807fffffu) | ((100u + (x >> 23) % 50u) << 23);
			w[i] = fg_bits_f32(x);
		}
		agree_once(FG_DT_F32, w, rows, cols, all_bits[t % COUNT(all_bits)],
			   all_groups[t % COUNT(all_groups)], t % 4);
		agree_once(FG_DT_BF16, w, rows, cols, all_bits[(t + 1) % COUNT(all_bits)],
			   all_groups[(t + 2) % COUNT(all_groups)], t % 3);
	}
}

/* ---- mxfp4: the dispatched kernels against the reference -------------------------------- */

static const enum fg_dtype mx_dtypes[] = { FG_DT_F32, FG_DT_BF16, FG_DT_F16 };

/* Input value j of a raw dt buffer, widened (for messages). */
static float raw_at(enum fg_dtype dt, const unsigned char *raw, size_t j)
{
	float x;

	assert_int_equal(fg_dtype_to_f32_ref(dt, raw + j * fg_dtype_size(dt), &x, 1), 0);
	return x;
}

/*
 * Quantize rows x cols values held as raw dt bytes on the dispatched and the
 * reference path, from buffers at offset off (unaligned unless off % 4 == 0),
 * and compare every output byte, or the errors.  The reference's scale bytes
 * go to scales_out when it is not NULL.  Returns the number of values.
 */
static size_t mx_agree_raw(enum fg_dtype dt, const void *raw, size_t rows, size_t cols, size_t off,
			   const char *what, uint8_t *scales_out)
{
	const size_t esz = fg_dtype_size(dt), n = rows * cols, ng = n / 32;
	unsigned char *src = xmalloc(n * esz + off);
	unsigned char *pa = xmalloc(n / 2 + off), *pb = xmalloc(n / 2 + off);
	unsigned char *sa = xmalloc(ng + off), *sb = xmalloc(ng + off);
	struct fg_err ea = { 0 }, eb = { 0 };
	size_t i;
	int ra, rb;

	memcpy(src + off, raw, n * esz);
	memset(pa, 0x5a, n / 2 + off);
	memset(pb, 0x5a, n / 2 + off);
	ra = fg_quant_mxfp4_rows_dt(dt, src + off, rows, cols, (uint32_t *)(void *)(pa + off), sa + off, &ea);
	rb = fg_quant_mxfp4_rows_dt_ref(dt, src + off, rows, cols, (uint32_t *)(void *)(pb + off), sb + off,
					&eb);
	if (ra != rb)
		fail_msg("%s %s: dispatched returns %d (%s), reference %d (%s)", what, fg_dtype_name(dt), ra,
			 ea.msg, rb, eb.msg);
	if (ra) {
		assert_string_equal(ea.msg, eb.msg);
	} else {
		for (i = 0; i < ng; i++)
			if (sa[off + i] != sb[off + i])
				fail_msg("%s %s: scale of group %zu is %u, reference %u (amax input %a)", what,
					 fg_dtype_name(dt), i, sa[off + i], sb[off + i],
					 (double)raw_at(dt, src + off, 32 * i));
		for (i = 0; i < n; i++) {
			unsigned ca = (pa[off + i / 2] >> (4 * (i & 1))) & 0xf;
			unsigned cb = (pb[off + i / 2] >> (4 * (i & 1))) & 0xf;

			if (ca != cb)
				fail_msg("%s %s: code of value %zu (%a, scale byte %u) is 0x%x, reference 0x%x",
					 what, fg_dtype_name(dt), i, (double)raw_at(dt, src + off, i),
					 sb[off + i / 32], ca, cb);
		}
		if (scales_out)
			memcpy(scales_out, sb + off, ng);
	}
	free(src);
	free(pa);
	free(pb);
	free(sa);
	free(sb);
	return n;
}

/* The same for F32 values, narrowed to dt first (rounded to nearest even). */
static size_t mx_agree_f32(enum fg_dtype dt, const float *w32, size_t rows, size_t cols, size_t off,
			   const char *what)
{
	unsigned char *raw = xmalloc(rows * cols * fg_dtype_size(dt));
	size_t n;

	assert_int_equal(fg_dtype_from_f32_ref(dt, w32, raw, rows * cols), 0);
	n = mx_agree_raw(dt, raw, rows, cols, off, what, NULL);
	free(raw);
	return n;
}

static float pow2f(int k)
{
	return ldexpf(1.0f, k);
}

static const float e2m1_mids[7] = { 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f };
static const float e2m1_codes[8] = { 0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f };

/* Signed x, or its neighbour below or above (one F32 ulp), chosen at random. */
static float nudged(float x)
{
	float s = rng_u32() & 1 ? -x : x;

	switch (rng_u32() % 3) {
	case 0:
		return nextafterf(s, INFINITY);
	case 1:
		return nextafterf(s, -INFINITY);
	default:
		return s;
	}
}

/*
 * Fill n values (a multiple of 32) group by group with data shaped for
 * mxfp4's edges, chosen by kind: exact ties at the midpoints (amax
 * 6 * 2^k makes the scale 2^k), subnormals, zeros and negative zeros, maxima
 * that are powers of two, scales at both ends of the E8M0 range, raw bit
 * patterns, and the affine test's shapes.
 */
static void mx_fill(float *w, size_t n, int kind)
{
	size_t g, i;

	for (g = 0; g < n; g += 32) {
		float *x = w + g;
		int k = (int)(rng_u32() % 41) - 20;

		switch (kind % 8) {
		case 0: /* trained-weight-like, any decade */
			for (i = 0; i < 32; i++)
				x[i] = rng_weight(powf(10.0f, (float)(int)(rng_u32() % 9) - 6.0f));
			break;
		case 1: /* ties and code values times 2^k, and their neighbours */
			for (i = 0; i < 32; i++)
				x[i] = ldexpf(nudged(rng_u32() & 1 ? e2m1_mids[rng_u32() % 7] : e2m1_codes[rng_u32() % 8]), k);
			x[rng_u32() % 32] = ldexpf(rng_u32() & 1 ? 6.0f : -6.0f, k);
			break;
		case 2: /* subnormals, a few tiny normals */
			for (i = 0; i < 32; i++)
				x[i] = fg_bits_f32(rng_u32() & (rng_u32() % 4 ? 0x807fffffu : 0x80ffffffu));
			break;
		case 3: /* zeros and negative zeros, sometimes one value */
			for (i = 0; i < 32; i++)
				x[i] = rng_u32() & 1 ? -0.0f : 0.0f;
			if (rng_u32() % 2)
				x[rng_u32() % 32] = rng_weight(1.0f);
			break;
		case 4: { /* the maximum a power of two, anywhere in the range */
			float m = pow2f((int)(rng_u32() % 277) - 149);

			for (i = 0; i < 32; i++)
				x[i] = m * (rng_unit() * 2.0f - 1.0f);
			x[rng_u32() % 32] = rng_u32() & 1 ? m : -m;
			break;
		}
		case 5: { /* amax near either end of the E8M0 range */
			float m = rng_u32() & 1 ? fg_bits_f32(0x7f000000u | (rng_u32() & 0x7fffffu))
						: fg_bits_f32((rng_u32() % 0x04000000u) | 0x1u);

			for (i = 0; i < 32; i++)
				x[i] = m * (rng_unit() * 2.0f - 1.0f);
			x[rng_u32() % 32] = m;
			break;
		}
		case 6: /* raw bit patterns, finite */
			for (i = 0; i < 32; i++) {
				uint32_t b = rng_u32();

				if ((b & 0x7f800000u) == 0x7f800000u)
					b &= 0xbfffffffu;
				x[i] = fg_bits_f32(b);
			}
			break;
		default:
			fill_weights(x, 32, (int)(rng_u32() % 7));
			break;
		}
	}
}

/* Random rows of every shape of data, every dtype, odd row counts, unaligned
 * buffers, and sometimes a NaN or an infinity (the errors must agree). */
static void test_mxfp4_paths_agree(void **state)
{
	static const size_t row_counts[] = { 1, 3, 7, 13 };
	static const size_t col_groups[] = { 1, 2, 3, 5, 9, 17, 33 };
	static const float bad[] = { NAN, INFINITY, -INFINITY };
	float *w = xmalloc(13 * 33 * 32 * 4);
	size_t d, t, values = 0, errors = 0;

	(void)state;
	for (d = 0; d < COUNT(mx_dtypes); d++) {
		for (t = 0; t < 160; t++) {
			const size_t rows = row_counts[t % COUNT(row_counts)];
			const size_t cols = 32 * col_groups[t % COUNT(col_groups)];

			mx_fill(w, rows * cols, (int)t);
			if (t % 10 == 9) {
				w[rng_u32() % (rows * cols)] = bad[t % 3];
				errors++;
			}
			values += mx_agree_f32(mx_dtypes[d], w, rows, cols, t % 4, "random rows");
		}
	}
	/* Volume: a million values per dtype, every kind. */
	{
		const size_t rows = 256, cols = 4096;
		float *big = xmalloc(rows * cols * 4);
		size_t r;

		for (d = 0; d < COUNT(mx_dtypes); d++) {
			for (r = 0; r < rows; r++)
				mx_fill(big + r * cols, cols, (int)(r + d));
			values += mx_agree_f32(mx_dtypes[d], big, rows, cols, 0, "volume");
		}
		free(big);
	}
	print_message("mxfp4 path agreement: %zu values, %zu error cases (kernels %s)\n", values, errors,
		      fg_quant_simd_path());
	free(w);
}

/*
 * The E2M1 encoder on every input that matters: groups led by 8.0 have scale
 * byte 127 (8 / 6 is below sqrt 2), so each other value is coded as itself,
 * and |y| < 8.5 holds for every value of every group.  Every BF16 and F16
 * value of magnitude up to 8, led by 8 and scaled together by every power
 * of two the dtype holds (for BF16 that is every scale byte, 0 to 252; the
 * AVX-512 kernel codes BF16 from the patterns, so this covers its every
 * input); F32 values around every midpoint and code value, zeros,
 * subnormals and two million random F32 values, scaled by powers of two so
 * that the product is exercised (including groups whose scale byte is 0 and
 * products that are subnormal).
 */
static void test_mxfp4_encoder_values(void **state)
{
	static const int scale_f32[] = { 0, -140, -127, -126, -100, -3, 5, 100, 117 };
	const size_t cap = 1u << 21;
	float *cand = xmalloc(cap * 4), *w = xmalloc((cap / 31 + 2) * 32 * 4);
	uint16_t *h = xmalloc((cap / 31 + 2) * 32 * 2);
	uint8_t *sc = xmalloc(cap / 31 + 2);
	size_t nc, i, j, s, values = 0;

	(void)state;
	/* 16-bit dtypes: every pattern of magnitude <= 8 (6 where 8 * 2^k would
	 * overflow), led by 8 (6), times 2^k. */
	for (s = 0; s < 2; s++) {
		const enum fg_dtype dt = s ? FG_DT_F16 : FG_DT_BF16;
		const int k_lo = s ? -27 : -133, k_hi = s ? 12 : 125;
		int k;

		for (k = k_lo; k <= k_hi; k++) {
			const bool six = s ? k > 12 : k > 124;
			const uint32_t top = six ? (s ? 0x4600u : 0x40c0u) : (s ? 0x4800u : 0x4100u);
			float lead = ldexpf(six ? 6.0f : 8.0f, k);
			uint32_t p;

			nc = 0;
			for (p = 0; p <= 0xffffu; p++) {
				float v;

				if ((p & 0x7fffu) > top)
					continue;
				v = raw_at(dt, (const unsigned char *)&(uint16_t){ (uint16_t)p }, 0);
				cand[nc++] = ldexpf(v, k);
			}
			for (i = 0, j = 0; i < nc; j++) {
				size_t m;

				w[32 * j] = lead;
				for (m = 1; m < 32; m++)
					w[32 * j + m] = i < nc ? cand[i++] : 0.0f;
			}
			assert_int_equal(fg_dtype_from_f32_ref(dt, w, h, 32 * j), 0);
			values += mx_agree_raw(dt, h, j, 32, (size_t)(k & 3), "all 16-bit values", sc);
			if (k == 0)
				for (i = 0; i < j; i++)
					assert_int_equal(sc[i], 127);
		}
	}
	/* F32: neighbourhoods of the midpoints and code values, specials, random. */
	nc = 0;
	for (i = 0; i < 7 + 8; i++) {
		float t = i < 7 ? e2m1_mids[i] : e2m1_codes[i - 7];
		float lo = t, hi = t;

		for (j = 0; j < 256; j++) {
			lo = nextafterf(lo, 0.0f);
			hi = nextafterf(hi, INFINITY);
			cand[nc++] = lo;
			cand[nc++] = -hi;
		}
		cand[nc++] = t;
		cand[nc++] = -t;
	}
	cand[nc++] = 8.0f;
	cand[nc++] = -8.0f;
	cand[nc++] = nextafterf(8.0f, 0.0f);
	cand[nc++] = 0.0f;
	cand[nc++] = -0.0f;
	cand[nc++] = fg_bits_f32(1);
	cand[nc++] = fg_bits_f32(0x807fffffu);
	cand[nc++] = fg_bits_f32(0x00800000u);
	while (nc < cap) {
		uint32_t b = rng_u32();

		cand[nc] = nc % 2 ? fg_bits_f32((b & 0x80000000u) | (b % 0x41000001u)) : (rng_unit() * 16.0f - 8.0f);
		nc++;
	}
	for (s = 0; s < COUNT(scale_f32); s++) {
		for (i = 0, j = 0; i < nc; j++) {
			size_t k;

			w[32 * j] = ldexpf(8.0f, scale_f32[s]);
			for (k = 1; k < 32; k++)
				w[32 * j + k] = i < nc ? ldexpf(cand[i++], scale_f32[s]) : 0.0f;
		}
		values += mx_agree_raw(FG_DT_F32, w, j / 64, 64 * 32, s % 4, "f32 values", sc);
		if (scale_f32[s] == 0)
			for (i = 0; i < j / 64 * 64; i++)
				assert_int_equal(sc[i], 127);
	}
	print_message("mxfp4 encoder: %zu values on both paths (kernels %s)\n", values, fg_quant_simd_path());
	free(cand);
	free(w);
	free(h);
	free(sc);
}

/* The E8M0 rule of mxfp4.c's reference, written again: the exhaustive test
 * compares the kernels' scale bytes with it (test_mxfp4_scale_bytes ties it
 * to the reference kernel first). */
static unsigned spec_e8m0(float amax)
{
	float d = fabsf(amax) / 6.0f, n;

	if (d == 0.0f)
		return 0;
	n = roundf((float)log2((double)d));
	n = n < -127.0f ? -127.0f : (n > 127.0f ? 127.0f : n);
	return (unsigned)(int)(n + 127.0f);
}

/*
 * Scale bytes on both paths for groups whose maximum magnitude is: every
 * finite BF16 and F16 value, every F32 mantissa within 512 of the
 * threshold's (0x07c3ce) at every exponent, random subnormals and random
 * F32 values.  The other values of a group are smaller fractions of it.
 */
static void test_mxfp4_scale_bytes(void **state)
{
	const size_t per = 1025, groups = 255 * per;
	float *w = xmalloc(groups * 32 * 4);
	uint16_t *h = xmalloc(0x8000 * 32 * 2);
	uint8_t *sc = xmalloc(groups);
	size_t g, k, n, values = 0;
	uint32_t p;
	int s;

	(void)state;
	for (s = 0; s < 2; s++) {
		const enum fg_dtype dt = s ? FG_DT_F16 : FG_DT_BF16;
		const uint32_t last = s ? 0x7bffu : 0x7f7fu;

		for (p = 0, n = 0; p <= last; p++, n++) {
			uint16_t *grp = h + 32 * n;

			for (k = 0; k < 32; k++)
				grp[k] = (uint16_t)(rng_u32() % (p + 1) | (rng_u32() & 0x8000u));
			grp[rng_u32() % 32] = (uint16_t)(p | (p & 1 ? 0x8000u : 0));
		}
		values += mx_agree_raw(dt, h, n, 32, (size_t)s, "amax of every 16-bit value", sc);
		for (p = 0; p <= last; p++) {
			float a = raw_at(dt, (const unsigned char *)&(uint16_t){ (uint16_t)p }, 0);

			if (sc[p] != spec_e8m0(a))
				fail_msg("%s amax %a: reference byte %u, spec_e8m0 %u", fg_dtype_name(dt), (double)a,
					 sc[p], spec_e8m0(a));
		}
	}
	for (g = 0; g < groups; g++) {
		uint32_t be = (uint32_t)(g / per), m = 0x07c3ceu - 512u + (uint32_t)(g % per);
		float a = fg_bits_f32(be << 23 | m);

		for (k = 0; k < 32; k++)
			w[32 * g + k] = a * (rng_unit() * 2.0f - 1.0f);
		w[32 * g + rng_u32() % 32] = g & 1 ? -a : a;
	}
	values += mx_agree_raw(FG_DT_F32, w, groups / 5, 5 * 32, 3, "amax around the thresholds", NULL);
	for (g = 0; g < groups; g++) {
		float a = fg_bits_f32(g % 4 ? rng_u32() % 0x7f800000u : rng_u32() % 0x00800000u);

		for (k = 0; k < 32; k++)
			w[32 * g + k] = a * rng_unit();
		w[32 * g + rng_u32() % 32] = a;
	}
	values += mx_agree_raw(FG_DT_F32, w, groups / 5, 5 * 32, 0, "random amax", NULL);
	print_message("mxfp4 scale bytes: %zu values on both paths\n", values);
	free(w);
	free(h);
	free(sc);
}

/*
 * FORGED_QUANT_EXHAUSTIVE=1 only (minutes; make test skips it): every F32
 * value of magnitude up to 8 through the encoder (groups led by 8.0, both
 * paths), and the scale byte of every finite F32 amax against spec_e8m0.
 */
static void test_mxfp4_exhaustive(void **state)
{
	const size_t batch = 1u << 16;
	float *w;
	unsigned char *pk;
	uint8_t *sc;
	uint64_t v, done = 0;
	size_t g, k;

	(void)state;
	if (!getenv("FORGED_QUANT_EXHAUSTIVE")) {
		skip();
		return;
	}
	w = xmalloc(batch * 32 * 4);
	pk = xmalloc(batch * 16);
	sc = xmalloc(batch);
	/* Encoder: 2 * (0x41000000 + 1) values, 31 to a group. */
	for (v = 0; v < 2 * 0x41000001ull;) {
		for (g = 0; g < batch; g++) {
			w[32 * g] = 8.0f;
			for (k = 1; k < 32; k++, v++) {
				uint64_t u = v < 2 * 0x41000001ull ? v : 0;

				w[32 * g + k] = fg_bits_f32((uint32_t)(u >> 1) | (u & 1 ? 0x80000000u : 0));
			}
		}
		done += mx_agree_raw(FG_DT_F32, w, batch, 32, 0, "exhaustive encoder", NULL);
	}
	/* Scale bytes: every amax 0 .. FLT_MAX, alone in its group. */
	memset(w, 0, batch * 32 * 4);
	for (v = 0; v <= 0x7f7fffffu;) {
		size_t n = 0;
		uint64_t first = v;

		for (g = 0; g < batch && v <= 0x7f7fffffu; g++, v++, n++)
			w[32 * g] = fg_bits_f32((uint32_t)v);
		assert_int_equal(fg_quant_mxfp4_rows_dt(FG_DT_F32, w, n, 32, (uint32_t *)(void *)pk, sc, NULL), 0);
		for (g = 0; g < n; g++)
			if (sc[g] != spec_e8m0(w[32 * g]))
				fail_msg("amax %a (0x%08llx): byte %u, spec %u", (double)w[32 * g],
					 (unsigned long long)(first + g), sc[g], spec_e8m0(w[32 * g]));
		done += n;
	}
	print_message("mxfp4 exhaustive: %llu values and amaxes (kernels %s)\n", (unsigned long long)done,
		      fg_quant_simd_path());
	free(w);
	free(pk);
	free(sc);
}

/* ---- whole tensors on two or more threads ----------------------------------------------------- */

/* FORGED_QUANT_THREADS in a forked child (the parent's value is read once). */
static int threads_with_env(const char *value)
{
	int status = 0;
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (value)
			setenv("FORGED_QUANT_THREADS", value, 1);
		else
			unsetenv("FORGED_QUANT_THREADS");
		_exit(fg_quant_threads());
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static void test_threads_env(void **state)
{
	const int dflt = threads_with_env(NULL);

	(void)state;
	assert_true(dflt == 1 || dflt == 2);
	assert_int_equal(threads_with_env("3"), 3);
	assert_int_equal(threads_with_env("1"), 1);
	assert_int_equal(threads_with_env("64"), 64);
	assert_int_equal(threads_with_env("0"), dflt);
	assert_int_equal(threads_with_env("65"), dflt);
	assert_int_equal(threads_with_env("2x"), dflt);
	assert_int_equal(threads_with_env(""), dflt);
	print_message("FORGED_QUANT_THREADS unset: %d threads\n", dflt);
}

/*
 * The threaded drivers write the bytes of the single call, for 1, 2, 3 and
 * 7 threads, on tensors above FG_QUANT_THREADS_MIN_BYTES (one with fewer rows
 * than threads), and report the error the single call reports: a
 * non-finite weight in a later band only, or in two bands, and an affine
 * range overflow.
 */
static void test_threads_bit_identical(void **state)
{
	static const int counts[] = { 1, 2, 3, 7, 0 };
	static const struct {
		size_t rows, cols;
		enum fg_dtype dt;
	} shapes[] = { { 1031, 4096, FG_DT_BF16 }, { 3, 1u << 21, FG_DT_F16 }, { 517, 4096, FG_DT_F32 } };
	size_t s, c;

	(void)state;
	for (s = 0; s < COUNT(shapes); s++) {
		const size_t rows = shapes[s].rows, cols = shapes[s].cols, n = rows * cols;
		const enum fg_dtype dt = shapes[s].dt;
		const size_t esz = fg_dtype_size(dt), words = rows * fg_quant_affine_row_words(cols, 4);
		const size_t ng = n / 64;
		float *w32 = xmalloc(n * 4);
		unsigned char *w = xmalloc(n * esz);
		unsigned char *pa = xmalloc(words * 4), *pb = xmalloc(words * 4);
		unsigned char *sa = xmalloc(ng * esz), *sb = xmalloc(ng * esz);
		unsigned char *ba = xmalloc(ng * esz), *bb = xmalloc(ng * esz);
		unsigned char *ma = xmalloc(n / 2), *mb = xmalloc(n / 2), *xa = xmalloc(n / 32), *xb = xmalloc(n / 32);
		struct fg_err ea = { 0 }, eb = { 0 };
		size_t i, bad_row;

		assert_true(n * esz >= FG_QUANT_THREADS_MIN_BYTES);
		for (i = 0; i < n; i += 4096)
			fill_weights(w32 + i, n - i < 4096 ? n - i : 4096, (int)(i / 4096));
		assert_int_equal(fg_dtype_from_f32_ref(dt, w32, w, n), 0);
		assert_int_equal(fg_quant_affine_rows_dt(dt, w, rows, cols, 4, 64, (uint32_t *)(void *)pa, sa, ba, NULL), 0);
		assert_int_equal(fg_quant_mxfp4_rows_dt(dt, w, rows, cols, (uint32_t *)(void *)ma, xa, NULL), 0);
		for (c = 0; c < COUNT(counts); c++) {
			memset(pb, 0, words * 4);
			memset(mb, 0, n / 2);
			assert_int_equal(fg_quant_affine_tensor_dt(dt, w, rows, cols, 4, 64, (uint32_t *)(void *)pb, sb,
								   bb, counts[c], &eb), 0);
			expect_same("packed (threads)", fg_dtype_name(dt), pa, pb, words, 4);
			expect_same("scales (threads)", fg_dtype_name(dt), sa, sb, ng, esz);
			expect_same("biases (threads)", fg_dtype_name(dt), ba, bb, ng, esz);
			assert_int_equal(fg_quant_mxfp4_tensor_dt(dt, w, rows, cols, (uint32_t *)(void *)mb, xb,
								  counts[c], &eb), 0);
			expect_same("mxfp4 packed (threads)", fg_dtype_name(dt), ma, mb, n / 8, 4);
			expect_same("mxfp4 scales (threads)", fg_dtype_name(dt), xa, xb, n / 32, 1);
		}
		/* Errors: in the last row only, then also in the first band. */
		bad_row = rows - 1;
		for (i = 0; i < 2; i++) {
			const float inf = INFINITY;

			assert_int_equal(fg_dtype_from_f32_ref(dt, &inf, w + (bad_row * cols + cols / 2) * esz, 1), 0);
			for (c = 0; c < COUNT(counts); c++) {
				assert_int_equal(fg_quant_affine_rows_dt(dt, w, rows, cols, 4, 64, (uint32_t *)(void *)pa,
									 sa, ba, &ea),
						 FG_EINPUT);
				assert_int_equal(fg_quant_affine_tensor_dt(dt, w, rows, cols, 4, 64, (uint32_t *)(void *)pb,
									   sb, bb, counts[c], &eb),
						 FG_EINPUT);
				assert_string_equal(ea.msg, eb.msg);
				assert_int_equal(fg_quant_mxfp4_rows_dt(dt, w, rows, cols, (uint32_t *)(void *)ma, xa, &ea),
						 FG_EINPUT);
				assert_int_equal(fg_quant_mxfp4_tensor_dt(dt, w, rows, cols, (uint32_t *)(void *)mb, xb,
									  counts[c], &eb),
						 FG_EINPUT);
				assert_string_equal(ea.msg, eb.msg);
			}
			bad_row = rows / 4;
		}
		print_message("threads: %s [%zu, %zu] last error: %s\n", fg_dtype_name(dt), rows, cols, eb.msg);
		if (dt == FG_DT_F32) { /* an affine range overflow in a later band */
			float big[2] = { 3e38f, -3e38f };

			memcpy(w32, big, sizeof(big));
			assert_int_equal(fg_dtype_from_f32_ref(dt, w32, w, n), 0);
			memcpy(w + ((rows - 2) * cols + 64) * 4, big, sizeof(big));
			assert_int_equal(fg_quant_affine_rows_dt(dt, w, rows, cols, 4, 64, (uint32_t *)(void *)pa, sa,
								 ba, &ea),
					 FG_EINPUT);
			assert_int_equal(fg_quant_affine_tensor_dt(dt, w, rows, cols, 4, 64, (uint32_t *)(void *)pb, sb,
								   bb, 2, &eb),
					 FG_EINPUT);
			assert_string_equal(ea.msg, eb.msg);
		}
		free(w32);
		free(w);
		free(pa);
		free(pb);
		free(sa);
		free(sb);
		free(ba);
		free(bb);
		free(ma);
		free(mb);
		free(xa);
		free(xb);
	}
	/* Parameter errors are found before anything is written. */
	{
		uint32_t pk[4] = { 7, 7, 7, 7 };
		uint8_t sc[1] = { 7 };
		float x[48] = { 0 };
		struct fg_err err = { 0 };

		assert_int_equal(fg_quant_mxfp4_tensor_dt(FG_DT_F32, x, 1, 48, pk, sc, 2, &err), FG_EINPUT);
		assert_int_equal(fg_quant_affine_tensor_dt(FG_DT_F32, x, 1, 48, 4, 32, pk, x, x, 2, &err), FG_EINPUT);
		assert_int_equal(fg_quant_affine_tensor_dt(FG_DT_I8, x, 1, 32, 4, 32, pk, x, x, 2, &err), FG_EUSAGE);
		assert_int_equal(fg_quant_mxfp4_tensor_dt(FG_DT_F32, NULL, 1, 32, pk, sc, 2, &err), FG_EUSAGE);
		assert_int_equal(fg_quant_mxfp4_tensor_dt(FG_DT_F32, NULL, 0, 32, NULL, NULL, 2, &err), 0);
		assert_true(pk[0] == 7 && sc[0] == 7);
	}
}

/* ---- properties --------------------------------------------------------------------------- */

static unsigned q_at(const uint32_t *row, size_t j, int bits)
{
	size_t pos = j * (size_t)bits;
	uint64_t two = row[pos / 32];

	if (pos % 32 + (size_t)bits > 32)
		two |= (uint64_t)row[pos / 32 + 1] << 32;
	return (unsigned)((two >> (pos % 32)) & ((1u << bits) - 1));
}

/*
 * Dequantized values are within half a step of the input wherever the code
 * was not clamped; a group whose codes reach both 0 and N (and whose bias is
 * its edge) quantizes back to the same codes, scale and bias.
 */
static void test_error_bound_and_round_trip(void **state)
{
	const size_t rows = 16, cols = 512;
	float *w = xmalloc(rows * cols * 4), *deq = xmalloc(rows * cols * 4);
	float *s = xmalloc(rows * 16 * 4), *b = xmalloc(rows * 16 * 4);
	float *s2 = xmalloc(rows * 16 * 4), *b2 = xmalloc(rows * 16 * 4);
	uint32_t *pk = xmalloc(rows * cols), *pk2 = xmalloc(rows * cols);
	size_t i, j, k, r, g, stable = 0, groups = 0, checked = 0;

	(void)state;
	for (i = 0; i < COUNT(all_bits); i++) {
		for (j = 0; j < COUNT(all_groups); j++) {
			const int bits = all_bits[i], group = all_groups[j];
			const unsigned n_bins = (1u << bits) - 1;
			const size_t wpr = fg_quant_affine_row_words(cols, bits), gpr = cols / (size_t)group;

			for (k = 0; k < rows * cols; k++)
				w[k] = rng_weight(k % 3 ? 0.02f : 1.0f) + (k / 512 % 4 == 3 ? 0.5f : 0.0f);
			assert_int_equal(fg_quant_affine_rows(w, rows, cols, bits, group, pk, s, b, NULL), 0);
			assert_int_equal(fg_dequant_affine_rows(pk, s, b, rows, cols, bits, group, deq, NULL), 0);
			for (r = 0; r < rows; r++) {
				for (k = 0; k < cols; k++) {
					const size_t gi = r * gpr + k / (size_t)group;
					const float x = w[r * cols + k];
					const float t = rintf((x - b[gi]) / s[gi]);
					const float slack = 4.0f * FLT_EPSILON *
							    (fabsf(x) + fabsf(b[gi]) + fabsf(s[gi]) * (float)n_bins);

					if (t < 0.0f || t > (float)n_bins)
						continue; /* clamped */
					checked++;
					if (!(fabsf(x - deq[r * cols + k]) <= fabsf(s[gi]) / 2.0f + slack))
						fail_msg("bits %d group %d row %zu col %zu: w %.9g deq %.9g step %.9g",
							 bits, group, r, k, (double)x, (double)deq[r * cols + k],
							 (double)s[gi]);
				}
			}
			assert_int_equal(fg_quant_affine_rows(deq, rows, cols, bits, group, pk2, s2, b2, NULL), 0);
			for (r = 0; r < rows; r++) {
				for (g = 0; g < gpr; g++) {
					const uint32_t *row = pk + r * wpr, *row2 = pk2 + r * wpr;
					const size_t gi = r * gpr + g;
					bool has0 = false, hasn = false;

					groups++;
					for (k = g * (size_t)group; k < (g + 1) * (size_t)group; k++) {
						has0 |= q_at(row, k, bits) == 0;
						hasn |= q_at(row, k, bits) == n_bins;
					}
					if (!has0 || !hasn || b[gi] == 0.0f)
						continue;
					stable++;
					assert_true(fg_f32_bits(s2[gi]) == fg_f32_bits(s[gi]));
					assert_true(fg_f32_bits(b2[gi]) == fg_f32_bits(b[gi]));
					for (k = g * (size_t)group; k < (g + 1) * (size_t)group; k++)
						assert_int_equal(q_at(row2, k, bits), q_at(row, k, bits));
				}
			}
		}
	}
	print_message("half-step bound on %zu values; round trip stable on %zu of %zu groups\n", checked,
		      stable, groups);
	/* The property must not be vacuous. */
	assert_true(stable * 3 > groups);
	assert_true(checked > rows * cols * 18 * 9 / 10);
	free(w);
	free(deq);
	free(s);
	free(b);
	free(s2);
	free(b2);
	free(pk);
	free(pk2);
}

/* The F32-rounded log2 of every scale near sqrt(2) * 2^k is unambiguous:
 * log2 in double is nowhere near the midpoint of two floats, so the E8M0
 * exponent does not depend on the last bit of the libm's log2. */
/*
 * fg_dequant_affine_rows_dt reads scales and biases stored as the weights'
 * dtype (what forge writes for BF16 and F16 heads): it equals widening them
 * exactly to F32 and dequantizing, bit for bit, and refuses other dtypes.
 */
static void test_dequant_dt(void **state)
{
	const size_t rows = 8, cols = 256, ng = rows * cols / 64;
	float *w = xmalloc(rows * cols * 4), *want = xmalloc(rows * cols * 4), *got = xmalloc(rows * cols * 4);
	float *s32 = xmalloc(ng * 4), *b32 = xmalloc(ng * 4);
	unsigned char *src = xmalloc(rows * cols * 4), *s = xmalloc(ng * 4), *b = xmalloc(ng * 4);
	uint32_t *pk = xmalloc(rows * fg_quant_affine_row_words(cols, 4) * 4);
	struct fg_err err = { 0 };

	(void)state;
	for (size_t i = 0; i < COUNT(param_dtypes); i++) {
		const enum fg_dtype dt = param_dtypes[i];

		fill_weights(w, rows * cols, (int)i);
		assert_int_equal(fg_dtype_from_f32_ref(dt, w, src, rows * cols), 0);
		assert_int_equal(fg_quant_affine_rows_dt(dt, src, rows, cols, 4, 64, pk, s, b, NULL), 0);
		assert_int_equal(fg_dtype_to_f32_ref(dt, s, s32, ng), 0);
		assert_int_equal(fg_dtype_to_f32_ref(dt, b, b32, ng), 0);
		assert_int_equal(fg_dequant_affine_rows(pk, s32, b32, rows, cols, 4, 64, want, NULL), 0);
		memset(got, 0x5a, rows * cols * 4);
		assert_int_equal(fg_dequant_affine_rows_dt(dt, pk, s, b, rows, cols, 4, 64, got, NULL), 0);
		expect_same("dequantized", fg_dtype_name(dt), want, got, rows * cols, 4);
	}
	assert_int_equal(fg_dequant_affine_rows_dt(FG_DT_U8, pk, s, b, rows, cols, 4, 64, got, &err), FG_EUSAGE);
	assert_non_null(strstr(err.msg, "scales of dtype U8 not supported"));
	assert_int_equal(fg_dequant_affine_rows_dt(FG_DT_BF16, pk, s, b, rows, cols, 4, 48, got, &err), FG_EINPUT);
	free(w);
	free(want);
	free(got);
	free(s32);
	free(b32);
	free(src);
	free(s);
	free(b);
	free(pk);
}

static void test_e8m0_log2_margin(void **state)
{
	int k;
	uint32_t m;
	size_t checked = 0;

	(void)state;
	for (k = -126; k <= 127; k++) {
		for (m = 0x3504f3 - 128; m <= 0x3504f3 + 128; m++) {
			float d = fg_bits_f32(((uint32_t)(k + 127) << 23) | m);
			double l = log2((double)d);
			float f = (float)l;
			double lo = ((double)f + (double)nextafterf(f, -INFINITY)) / 2.0;
			double hi = ((double)f + (double)nextafterf(f, INFINITY)) / 2.0;

			if (!(fabs(l - lo) > 1e-13 * fabs(l) + 1e-300 && fabs(l - hi) > 1e-13 * fabs(l) + 1e-300))
				fail_msg("log2 of %a is %.17g, within rounding error of a float midpoint", (double)d, l);
			checked++;
		}
	}
	assert_true(checked > 10000);
}

/* ---- FP8 specials ---------------------------------------------------------------------------- */

static void test_fp8_nan_and_specials(void **state)
{
	/* One row crossing a block edge: codes NaN, -NaN, max, -0, min subnormal. */
	uint8_t w[2 * 130];
	float si[2] = { 0.5f, 3.0f }, out[2 * 130], out_ref[2 * 130];
	uint16_t h[2 * 130], h_ref[2 * 130];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(w); i++)
		w[i] = (uint8_t)(i * 37);
	w[0] = 0x7f;
	w[1] = 0xff;
	w[2] = 0x7e;
	w[3] = 0x80;
	w[4] = 0x01;
	w[128] = 0x7e;
	assert_int_equal(fg_fp8_block_dequant_rows(w, 2, 130, si, 1, 2, 0, 2, out, NULL), 0);
	assert_int_equal(fg_fp8_block_dequant_rows_ref(w, 2, 130, si, 1, 2, 0, 2, out_ref, NULL), 0);
	assert_int_equal(fg_fp8_block_dequant_rows_bf16(w, 2, 130, si, 1, 2, 0, 2, h, NULL), 0);
	assert_int_equal(fg_fp8_block_dequant_rows_bf16_ref(w, 2, 130, si, 1, 2, 0, 2, h_ref, NULL), 0);
	assert_memory_equal(out, out_ref, sizeof(out));
	assert_memory_equal(h, h_ref, sizeof(h));
	assert_true(isnan(out[0]) && !signbit(out[0]));
	assert_true(isnan(out[1]) && signbit(out[1]));
	assert_int_equal(h[0], 0x7fc0);
	assert_int_equal(h[1], 0xffc0);
	assert_true(out[2] == 224.0f);          /* 448 * 0.5 */
	assert_true(out[3] == 0.0f && signbit(out[3]));
	assert_true(out[4] == ldexpf(1.0f, -10)); /* 2^-9 * 0.5 */
	assert_true(out[128] == 1344.0f);       /* 448 * 3, second block */
	for (i = 0; i < 260; i++)
		assert_true(isnan(out[i]) || out[i] == fg_e4m3_to_f32_ref(w[i]) * si[i % 130 / 128]);
}

/* The dispatched FP8 kernels against the reference on every code, ragged
 * widths, unaligned outputs and scales of every kind: subnormal, zero,
 * negative, and so large that scale * 256 overflows (the composed route). */
static void test_fp8_paths_agree(void **state)
{
	static const size_t widths[] = { 1, 15, 16, 17, 130, 300 };
	static const float scales[] = { 1e-4f, 0x1p-140f, 0.0f, -1.5f, 3.0e-3f, 0x1p121f, 7.0f, 0x1.234568p-20f };
	const size_t rows = 140;
	uint8_t *w = xmalloc(rows * 300);
	float si[2 * 3];
	unsigned char *a = xmalloc(rows * 300 * 4 + 1), *b = xmalloc(rows * 300 * 4 + 1);
	size_t i, k, t;

	(void)state;
	for (i = 0; i < rows * 300; i++)
		w[i] = (uint8_t)(i < 256 ? i : rng_u32());
	for (t = 0; t < COUNT(widths) * 4; t++) {
		const size_t cols = widths[t % COUNT(widths)], sc = (cols + 127) / 128;
		const size_t off = t % 2, r0 = t % 3, n = rows - r0 - t % 5;
		int bf16;

		for (k = 0; k < 2 * sc; k++)
			si[k] = scales[(t + k) % COUNT(scales)];
		for (bf16 = 0; bf16 < 2; bf16++) {
			const size_t osz = bf16 ? 2 : 4;
			int ra, rb;

			memset(a, 0x11, rows * 300 * 4 + 1);
			memset(b, 0x11, rows * 300 * 4 + 1);
			if (bf16) {
				ra = fg_fp8_block_dequant_rows_bf16(w, rows, cols, si, 2, sc, r0, n,
								    (uint16_t *)(void *)(a + off), NULL);
				rb = fg_fp8_block_dequant_rows_bf16_ref(w, rows, cols, si, 2, sc, r0, n,
									(uint16_t *)(void *)(b + off), NULL);
			} else {
				ra = fg_fp8_block_dequant_rows(w, rows, cols, si, 2, sc, r0, n,
							       (float *)(void *)(a + off), NULL);
				rb = fg_fp8_block_dequant_rows_ref(w, rows, cols, si, 2, sc, r0, n,
								   (float *)(void *)(b + off), NULL);
			}
			assert_int_equal(ra, 0);
			assert_int_equal(rb, 0);
			expect_same(bf16 ? "bf16" : "f32", "fp8 agreement", b, a, n * cols * osz + off + 1, 1);
		}
	}
	free(w);
	free(a);
	free(b);
}

/* ---- errors ------------------------------------------------------------------------------------ */

static void test_errors(void **state)
{
	float w[4 * 128], s[16], b[16];
	uint32_t pk[4 * 128];
	uint8_t sc[16];
	struct fg_err err = { 0 };
	size_t i;

	(void)state;
	for (i = 0; i < 4 * 128; i++)
		w[i] = (float)i * 0.01f;
	memset(pk, 0x77, sizeof(pk));

	assert_int_equal(fg_quant_affine_rows(w, 4, 128, 7, 64, pk, s, b, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "7 bits"));
	assert_int_equal(fg_quant_affine_rows_ref(w, 4, 128, 7, 64, pk, s, b, &err), FG_EINPUT);
	assert_int_equal(fg_quant_affine_rows(w, 4, 128, 4, 48, pk, s, b, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "group size 48"));
	assert_int_equal(fg_quant_affine_rows(w, 4, 100, 4, 64, pk, s, b, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "[4, 100]"));
	assert_non_null(strstr(err.msg, "group size 64"));
	assert_int_equal(fg_dequant_affine_rows(pk, s, b, 4, 96, 4, 64, w, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "[4, 96]"));
	assert_int_equal(fg_quant_affine_check(1, 128, 1, 32, &err), FG_EINPUT);
	assert_int_equal(fg_quant_affine_check(1, 128, 9, 32, &err), FG_EINPUT);
	assert_int_equal(fg_quant_affine_check(1, 128, 8, 16, &err), FG_EINPUT);
	assert_int_equal(fg_quant_affine_check(1, 128, 8, 128, &err), 0);
	assert_int_equal(fg_quant_affine_row_words(128, 3), 12);
	assert_int_equal(fg_quant_affine_row_words(128, 7), 0);
	/* Parameter errors write nothing. */
	for (i = 0; i < 4 * 128; i++)
		assert_int_equal(pk[i], 0x77777777u);

	assert_int_equal(fg_quant_affine_rows_dt(FG_DT_I8, w, 4, 128, 4, 64, pk, s, b, &err), FG_EUSAGE);
	assert_int_equal(fg_quant_affine_rows(NULL, 4, 128, 4, 64, pk, s, b, &err), FG_EUSAGE);
	/* Empty bands are fine. */
	assert_int_equal(fg_quant_affine_rows(NULL, 0, 128, 4, 64, NULL, NULL, NULL, &err), 0);

	/* Non-finite weights: both paths name the same row and column. */
	{
		static const float bad[] = { NAN, INFINITY, -INFINITY };
		int ref;

		for (i = 0; i < COUNT(bad); i++) {
			for (ref = 0; ref < 2; ref++) {
				w[2 * 128 + 70] = bad[i];
				assert_int_equal((ref ? fg_quant_affine_rows_ref : fg_quant_affine_rows)(
							 w, 4, 128, 4, 64, pk, s, b, &err),
						 FG_EINPUT);
				assert_non_null(strstr(err.msg, "non-finite weight at row 2, column 70"));
				assert_int_equal(fg_quant_mxfp4_rows(w, 4, 128, pk, sc, &err), FG_EINPUT);
				assert_non_null(strstr(err.msg, "row 2, column 70"));
			}
		}
		w[2 * 128 + 70] = 0.0f;
	}
	/* A group whose range overflows F32. */
	w[128 + 3] = 3e38f;
	w[128 + 4] = -3e38f;
	assert_int_equal(fg_quant_affine_rows(w, 4, 128, 4, 32, pk, s, b, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "row 1, columns 0-31"));
	assert_int_equal(fg_quant_affine_rows_ref(w, 4, 128, 4, 32, pk, s, b, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "row 1, columns 0-31"));

	/* mxfp4 shapes. */
	assert_int_equal(fg_quant_mxfp4_rows(w, 2, 48, pk, sc, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "[2, 48]"));
	assert_int_equal(fg_dequant_mxfp4_rows(pk, sc, 2, 40, w, &err), FG_EINPUT);

	/* FP8: the scale grid must be the block grid; bands inside the tensor. */
	{
		uint8_t f8[200];
		float si[4] = { 1, 1, 1, 1 }, out[200];

		memset(f8, 0x38, sizeof(f8));
		assert_int_equal(fg_fp8_block_check(200, 160, 2, 2, &err), 0);
		assert_int_equal(fg_fp8_block_check(256, 256, 2, 2, &err), 0);
		assert_int_equal(fg_fp8_block_check(257, 256, 2, 2, &err), FG_EINPUT);
		assert_int_equal(fg_fp8_block_dequant_rows(f8, 200, 160, si, 1, 2, 0, 1, out, &err), FG_EINPUT);
		assert_non_null(strstr(err.msg, "scale_inv [1, 2]"));
		assert_non_null(strstr(err.msg, "[2, 2]"));
		assert_non_null(strstr(err.msg, "[200, 160]"));
		assert_int_equal(fg_fp8_block_dequant_rows_bf16(f8, 200, 160, si, 2, 1, 0, 1, (uint16_t *)(void *)out, &err),
				 FG_EINPUT);
		assert_int_equal(fg_fp8_block_dequant_rows(f8, 1, 160, si, 1, 2, 1, 1, out, &err), FG_EUSAGE);
		assert_int_equal(fg_fp8_block_dequant_rows_ref(f8, 1, 160, si, 1, 2, 0, 2, out, &err), FG_EUSAGE);
		assert_int_equal(fg_fp8_block_dequant_rows(f8, 1, 160, si, 1, 2, 1, 0, out, &err), 0);
		/* A non-finite scale the band uses is refused; one it does not use is not read. */
		{
			uint8_t big[300];
			float grid[3 * 2] = { 1, 1, 1, 1, 1, 1 }, band[2 * 100];

			memset(big, 0x38, sizeof(big));
			grid[3] = NAN; /* block [1, 1]: rows 128-255 */
			assert_int_equal(fg_fp8_block_dequant_rows(big, 300, 1, grid, 3, 1, 0, 2, band, &err), 0);
			grid[1] = INFINITY;
			assert_int_equal(fg_fp8_block_dequant_rows(big, 300, 1, grid, 3, 1, 127, 2, band, &err),
					 FG_EINPUT);
			assert_non_null(strstr(err.msg, "scale_inv[1, 0] is not finite"));
			assert_int_equal(fg_fp8_block_dequant_rows_bf16_ref(big, 300, 1, grid, 3, 1, 200, 1,
									    (uint16_t *)(void *)band, &err),
					 FG_EINPUT);
		}
	}
}

/* ---- forced kernel sets ------------------------------------------------------------------------ */

/* Run this whole binary again under each cap; its tests then check that path. */
static void test_dispatch_forced(void **state)
{
	(void)state;
	simd_rerun(saved_argv, "FORGED_QUANT_TEST_CHILD");
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dispatch),
		cmocka_unit_test(test_hand_checked),
		cmocka_unit_test(test_golden_affine),
		cmocka_unit_test(test_golden_mxfp4),
		cmocka_unit_test(test_golden_fp8),
		cmocka_unit_test(test_paths_agree),
		cmocka_unit_test(test_paths_agree_bit_patterns),
		cmocka_unit_test(test_paths_agree_volume),
		cmocka_unit_test(test_mxfp4_paths_agree),
		cmocka_unit_test(test_mxfp4_encoder_values),
		cmocka_unit_test(test_mxfp4_scale_bytes),
		cmocka_unit_test(test_mxfp4_exhaustive),
		cmocka_unit_test(test_threads_env),
		cmocka_unit_test(test_threads_bit_identical),
		cmocka_unit_test(test_error_bound_and_round_trip),
		cmocka_unit_test(test_dequant_dt),
		cmocka_unit_test(test_e8m0_log2_margin),
		cmocka_unit_test(test_fp8_nan_and_specials),
		cmocka_unit_test(test_fp8_paths_agree),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_dispatch_forced),
	};

	(void)argc;
	saved_argv = argv;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
