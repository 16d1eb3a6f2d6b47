/*
 * test_tset.c: tensor sets (forge/model/tset.c) and the statistics of one
 * float tensor (stats.c) on hand-made tensors of F32, BF16, F16, F8_E4M3
 * and F64, whose bit patterns are written out here.  Every expected figure
 * is worked out by hand in the comment beside it: count, non-finite count,
 * exact ones, min, max, mean and the population std over finite elements,
 * all_zero (every element exactly 0, -0 included, nothing non-finite); also
 * tensors longer than the 1024-element conversion chunk, and which tensors
 * a set measures as norms, counts as quantized, or refuses as bad norms.
 *
 * Sets keep their names whole, however long: a set name is looked up later
 * (verdicts name their set, forge finds the head's verdicts by it), so a cut
 * name could match another set or none.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forge/model/tset.h"
#include "tests/unit/support.h"

/* cmocka 1.1's assert_float_equal compares in float; these checks need double. */
#define assert_near(a, b, eps)                                                               \
	do {                                                                                 \
		double got_ = (a), want_ = (b);                                              \
		if (!(fabs(got_ - want_) <= (eps)))                                          \
			fail_msg("%s = %.17g, want %.17g (+- %g)", #a, got_, want_, (double)(eps)); \
	} while (0)

/* A 1-D bench tensor of 16-bit patterns. */
static struct fg_tensor *add16(struct bench *b, const char *name, enum fg_dtype dt, const uint16_t *bits, size_t n)
{
	struct fg_tensor *t = bench_tensor(b, name, dt, n);

	memcpy(b->data[b->n - 1].h, bits, n * sizeof(uint16_t));
	return t;
}

static struct fg_tstats stats_of(const struct fg_tensor *t)
{
	struct fg_tstats st;

	assert_int_equal(fg_tstats_compute(t, &st), 0);
	return st;
}

static void test_f32(void **state)
{
	/* 2 4 4 4 5 5 7 9: sum 40, mean 5; squared deviations 9 1 1 1 0 0 4 16 = 32, variance 4, std 2. */
	static const float v[8] = { 2, 4, 4, 4, 5, 5, 7, 9 };
	/* 1, NaN, -inf, 1, 3: finite 1 1 3, mean 5/3, deviations -2/3 -2/3 4/3, variance 8/9. */
	const float w[5] = { 1.0f, NAN, -INFINITY, 1.0f, 3.0f };
	struct bench *b = bench_new("trunk", "model.safetensors");
	struct fg_tstats st;

	(void)state;
	st = stats_of(bench_f32(b, "a", v, 8));
	assert_int_equal(st.count, 8);
	assert_int_equal(st.nonfinite, 0);
	assert_int_equal(st.n_one, 0);
	assert_true(st.has_finite);
	assert_near(st.min, 2.0, 0.0);
	assert_near(st.max, 9.0, 0.0);
	assert_near(st.mean, 5.0, 1e-15);
	assert_near(st.std, 2.0, 1e-15);

	st = stats_of(bench_f32(b, "b", w, 5));
	assert_int_equal(st.count, 5);
	assert_int_equal(st.nonfinite, 2);
	assert_int_equal(st.n_one, 2);
	assert_near(st.min, 1.0, 0.0);
	assert_near(st.max, 3.0, 0.0);
	assert_near(st.mean, 5.0 / 3.0, 1e-15);
	assert_near(st.std, sqrt(8.0 / 9.0), 1e-15);
}

/*
 * Tensors longer than one 1024-element chunk: the chunks' figures merged
 * (plain chunks and one holding NaN and infinity, which takes the careful
 * path) equal the figures over the whole, worked out here in two passes:
 * 3000 elements, element i = i % 10 except i = 1500 (NaN) and 2500 (+inf).
 */
static void test_many_chunks(void **state)
{
	float *v = malloc(3000 * sizeof(*v));
	struct fg_tensor t;
	struct fg_tstats st;
	double sum = 0.0, m2 = 0.0, mean;
	size_t n = 0;

	(void)state;
	assert_non_null(v);
	for (int i = 0; i < 3000; i++)
		v[i] = (float)(i % 10);
	v[1500] = NAN;
	v[2500] = INFINITY;
	/* 300 of each digit but two zeros (at 1500 and 2500): 2998 finite values summing 300 * 45. */
	for (int i = 0; i < 3000; i++) {
		if (i != 1500 && i != 2500) {
			sum += i % 10;
			n++;
		}
	}
	mean = sum / (double)n;
	for (int i = 0; i < 3000; i++)
		if (i != 1500 && i != 2500)
			m2 += (i % 10 - mean) * (i % 10 - mean);
	assert_int_equal(n, 2998);
	assert_near(mean, 13500.0 / 2998.0, 1e-12);
	memset(&t, 0, sizeof(t));
	t.name = "long";
	t.dtype = FG_DT_F32;
	t.rank = 1;
	t.shape = test_shape();
	TSHAPE(t)[0] = 3000;
	t.data = (const uint8_t *)v;
	st = stats_of(&t);
	assert_int_equal(st.count, 3000);
	assert_int_equal(st.nonfinite, 2);
	assert_int_equal(st.n_one, 300);
	assert_near(st.min, 0.0, 0.0);
	assert_near(st.max, 9.0, 0.0);
	assert_near(st.mean, mean, 1e-13);
	assert_near(st.std, sqrt(m2 / (double)n), 1e-13);
	free(v);
}

static void test_bf16(void **state)
{
	/*
	 * 1.0 2.0 -1.0 0.5 NaN -inf: finite 1 2 -1 0.5, mean 0.625; deviations
	 * 0.375 1.375 -1.625 -0.125, squares sum 4.6875, variance 1.171875.
	 */
	static const uint16_t bits[6] = { 0x3f80, 0x4000, 0xbf80, 0x3f00, 0x7fc0, 0xff80 };
	struct bench *b = bench_new("trunk", "model.safetensors");
	struct fg_tstats st;

	(void)state;
	st = stats_of(add16(b, "x", FG_DT_BF16, bits, 6));
	assert_int_equal(st.count, 6);
	assert_int_equal(st.nonfinite, 2);
	assert_int_equal(st.n_one, 1);
	assert_true(st.has_finite);
	assert_near(st.min, -1.0, 0.0);
	assert_near(st.max, 2.0, 0.0);
	assert_near(st.mean, 0.625, 1e-15);
	assert_near(st.std, sqrt(1.171875), 1e-15);
}

static void test_f16(void **state)
{
	/*
	 * 1.0 0.5 3.0 -2.0 +inf NaN 1.0: finite 1 0.5 3 -2 1, mean 0.7; deviations
	 * 0.3 -0.2 2.3 -2.7 0.3, squares sum 12.8, variance 2.56, std 1.6.
	 */
	static const uint16_t bits[7] = { 0x3c00, 0x3800, 0x4200, 0xc000, 0x7c00, 0x7e00, 0x3c00 };
	/* The smallest subnormal, 2^-24, and zeros: not all zero, max 2^-24. */
	static const uint16_t tiny[3] = { 0x0000, 0x0001, 0x8000 };
	struct bench *b = bench_new("trunk", "model.safetensors");
	struct fg_tstats st;

	(void)state;
	st = stats_of(add16(b, "x", FG_DT_F16, bits, 7));
	assert_int_equal(st.count, 7);
	assert_int_equal(st.nonfinite, 2);
	assert_int_equal(st.n_one, 2);
	assert_near(st.min, -2.0, 0.0);
	assert_near(st.max, 3.0, 0.0);
	assert_near(st.mean, 0.7, 1e-15);
	assert_near(st.std, 1.6, 1e-15);

	st = stats_of(add16(b, "y", FG_DT_F16, tiny, 3));
	assert_near(st.max, ldexp(1.0, -24), 0.0);
	assert_near(st.min, 0.0, 0.0);
	assert_near(st.mean, ldexp(1.0, -24) / 3.0, 1e-20);
}

static void test_e4m3_and_f64(void **state)
{
	/* E4M3: 0x38 = 1.0, 0x40 = 2.0, 0xb8 = -1.0, 0x7f = NaN: mean 2/3, variance 14/9. */
	static const uint8_t e4m3[4] = { 0x38, 0x40, 0xb8, 0x7f };
	struct bench *b = bench_new("trunk", "model.safetensors");
	struct fg_tensor *t;
	struct fg_tstats st;

	(void)state;
	t = bench_tensor(b, "e", FG_DT_F8_E4M3, 4);
	memcpy(b->data[b->n - 1].h, e4m3, 4);
	st = stats_of(t);
	assert_int_equal(st.count, 4);
	assert_int_equal(st.nonfinite, 1);
	assert_int_equal(st.n_one, 1);
	assert_near(st.min, -1.0, 0.0);
	assert_near(st.max, 2.0, 0.0);
	assert_near(st.mean, 2.0 / 3.0, 1e-15);
	assert_near(st.std, sqrt(14.0 / 9.0), 1e-15);

	/* F64 is read as doubles: 1 + 2^-40 and 1 - 2^-40 average to exactly 1, neither is 1. */
	t = bench_tensor(b, "d", FG_DT_F64, 2);
	b->data[b->n - 1].f64[0] = 1.0 + ldexp(1.0, -40);
	b->data[b->n - 1].f64[1] = 1.0 - ldexp(1.0, -40);
	st = stats_of(t);
	assert_int_equal(st.n_one, 0);
	assert_near(st.mean, 1.0, 0.0);
	assert_near(st.std, ldexp(1.0, -40), 1e-24);
	assert_near(st.max - st.min, ldexp(1.0, -39), 0.0);
}

static void test_refused_and_empty(void **state)
{
	struct bench *b = bench_new("trunk", "model.safetensors");
	struct fg_tensor *t;
	struct fg_tstats st;

	(void)state;
	/* Integer tensors and float tensors without data are refused. */
	t = bench_tensor(b, "i", FG_DT_I32, 2);
	assert_int_equal(fg_tstats_compute(t, &st), FG_EUSAGE);
	t = bench_shape(b, "unmapped", FG_DT_F32, 4, 0, 0);
	assert_int_equal(fg_tstats_compute(t, &st), FG_EUSAGE);
	/* No elements: nothing finite, every figure 0. */
	t = bench_tensor(b, "none", FG_DT_BF16, 0);
	st = stats_of(t);
	assert_int_equal(st.count, 0);
	assert_false(st.has_finite);
	assert_near(st.mean, 0.0, 0.0);
	assert_near(st.std, 0.0, 0.0);
	/* Only non-finite elements: counted, but no figures. */
	{
		static const uint16_t nan2[2] = { 0x7fc0, 0x7f80 };

		st = stats_of(add16(b, "nan", FG_DT_BF16, nan2, 2));
		assert_int_equal(st.nonfinite, 2);
		assert_false(st.has_finite);
	}
}

/* A heap tensor of n elements of dt holding i % 10 (exact in every float dtype here). */
static struct fg_tensor ramp(enum fg_dtype dt, size_t n, void **mem)
{
	struct fg_tensor t;
	float *f = malloc(n * sizeof(float));
	uint8_t *data = malloc(n * fg_dtype_size(dt));

	assert_non_null(f);
	assert_non_null(data);
	for (size_t i = 0; i < n; i++)
		f[i] = (float)(i % 10);
	assert_int_equal(fg_dtype_from_f32(dt, f, data, n), 0);
	free(f);
	memset(&t, 0, sizeof(t));
	t.name = "ramp";
	t.dtype = dt;
	t.rank = 1;
	t.shape = test_shape();
	TSHAPE(t)[0] = n;
	t.data = data;
	*mem = data;
	return t;
}

static void test_past_the_chunk(void **state)
{
	/* 0..9 repeated: mean 4.5, variance (10^2 - 1) / 12 = 8.25, a tenth of them exactly 1. */
	static const enum fg_dtype dts[] = { FG_DT_F32, FG_DT_BF16, FG_DT_F16 };
	static const size_t lens[] = { 2500, 3000, 1030 };

	(void)state;
	for (size_t i = 0; i < 3; i++) {
		void *mem;
		struct fg_tensor t = ramp(dts[i], lens[i], &mem);
		struct fg_tstats st = stats_of(&t);

		assert_int_equal(st.count, lens[i]);
		assert_int_equal(st.n_one, lens[i] / 10);
		assert_near(st.min, 0.0, 0.0);
		assert_near(st.max, 9.0, 0.0);
		assert_near(st.mean, 4.5, 1e-12);
		assert_near(st.std, sqrt(8.25), 1e-12);
		free(mem);
	}
}

static void test_all_zero(void **state)
{
	static const uint16_t bf_zero[4] = { 0x0000, 0x8000, 0x0000, 0x8000 };
	static const uint16_t f16_zero[2] = { 0x8000, 0x0000 };
	static const uint16_t f16_tiny[2] = { 0x0000, 0x8001 };
	const float f32_nan[3] = { 0.0f, 0.0f, NAN };
	struct bench *b = bench_new("mtp", "mtp.safetensors");

	(void)state;
	add16(b, "mtp.layers.0.input_layernorm.weight", FG_DT_BF16, bf_zero, 4);
	add16(b, "mtp.layers.0.post_attention_layernorm.weight", FG_DT_F16, f16_zero, 2);
	add16(b, "mtp.layers.0.self_attn.q_norm.weight", FG_DT_F16, f16_tiny, 2);
	bench_f32(b, "mtp.layers.0.self_attn.k_norm.weight", f32_nan, 3);
	bench_tensor(b, "mtp.norm.weight", FG_DT_F32, 0);
	bench_measure(b);
	assert_int_equal(b->set.n_norms, 5);
	assert_true(fg_tset_norm(&b->set, "mtp.layers.0.input_layernorm.weight")->all_zero);
	assert_true(fg_tset_norm(&b->set, "mtp.layers.0.post_attention_layernorm.weight")->all_zero);
	/* -2^-24 is not zero; a NaN beside zeros is not all zero either; nor is an empty norm. */
	assert_false(fg_tset_norm(&b->set, "mtp.layers.0.self_attn.q_norm.weight")->all_zero);
	assert_near(fg_tset_norm(&b->set, "mtp.layers.0.self_attn.q_norm.weight")->st.min, -ldexp(1.0, -24), 0.0);
	assert_false(fg_tset_norm(&b->set, "mtp.layers.0.self_attn.k_norm.weight")->all_zero);
	assert_false(fg_tset_norm(&b->set, "mtp.norm.weight")->all_zero);
}

static void test_set_measure(void **state)
{
	struct bench *b = bench_new("trunk", "model-00001-of-00002.safetensors");
	const struct fg_norm *n;
	struct fg_tensor *t;

	(void)state;
	bench_norm(b, "model.layers.0.self_attn.q_norm.weight", 0.78f);
	bench_shape(b, "model.layers.0.self_attn.q_proj.weight", FG_DT_BF16, 8, 8, 0);
	bench_shape(b, "model.layers.0.self_attn.q_proj.scales", FG_DT_BF16, 8, 1, 0);
	bench_shape(b, "model.layers.0.mlp.up_proj.weight_scale_inv", FG_DT_F32, 1, 1, 0);
	bench_norm16(b, "model.layers.0.input_layernorm.weight", FG_DT_BF16, 0x3e80); /* 0.25 */
	/* Bad norms: rank 2, an integer dtype, a float without data. */
	t = bench_tensor(b, "model.layers.1.self_attn.q_norm.weight", FG_DT_F32, 4);
	t->rank = 2;
	TSHAPE(*t)[0] = TSHAPE(*t)[1] = 2;
	bench_tensor(b, "model.layers.1.input_layernorm.weight", FG_DT_I32, 4);
	bench_shape(b, "model.layers.2.input_layernorm.weight", FG_DT_F32, 4, 0, 0);
	bench_norm(b, "model.norm.weight", 2.25f);
	bench_measure(b);
	assert_int_equal(b->set.n_tensors, 9);
	assert_int_equal(b->set.n_norms, 3);
	assert_int_equal(b->set.n_quantized, 0); /* quantized modules are qmods.c's to count, by their tensors (issue 12) */
	assert_int_equal(b->set.n_bad_norms, 3);
	assert_string_equal(b->set.bad_norm, "model.layers.1.self_attn.q_norm.weight");
	n = fg_tset_norm(&b->set, "model.layers.0.input_layernorm.weight");
	assert_non_null(n);
	assert_int_equal(n->cls, FG_NAME_LOW);
	assert_string_equal(n->file, "model-00001-of-00002.safetensors");
	assert_near(n->st.mean, 0.25, 0.0);
	assert_int_equal(fg_tset_norm(&b->set, "model.norm.weight")->cls, FG_NAME_FINAL);
	assert_int_equal(fg_tset_norm(&b->set, "model.layers.0.self_attn.q_norm.weight")->cls, FG_NAME_QK);
	assert_null(fg_tset_norm(&b->set, "model.layers.0.self_attn.q_proj.weight"));
	assert_null(fg_tset_norm(&b->set, "model.layers.1.self_attn.q_norm.weight"));
	/* Measuring again starts every count over. */
	bench_measure(b);
	assert_int_equal(b->set.n_norms, 3);
	assert_int_equal(b->set.n_quantized, 0); /* quantized modules are qmods.c's to count, by their tensors (issue 12) */
	assert_int_equal(b->set.n_bad_norms, 3);
}

#define LONG_NAME "sidecar:a-name-that-is-much-longer-than-the-sixty-three-bytes-the-set-keeps.safetensors"

static void test_set_growth_and_release(void **state)
{
	enum { N = 200 };
	struct fg_tensor *t = calloc(N, sizeof(*t));
	char (*names)[64] = calloc(N, sizeof(*names));
	float one = 1.0f;
	struct fg_tset s;
	struct fg_err err = { 0 };

	(void)state;
	assert_non_null(t);
	assert_non_null(names);
	/* A name longer than the set's old 64-byte field is kept whole, not overrun. */
	assert_int_equal(fg_tset_init(&s, LONG_NAME, &err), 0);
	assert_string_equal(s.name, LONG_NAME);
	for (int i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[0]), i % 4 ? "model.layers.%d.mlp.w.weight" : "model.layers.%d.input_layernorm.weight", i);
		t[i].name = names[i];
		t[i].dtype = FG_DT_F32;
		t[i].rank = 1;
		t[i].shape = test_shape();
		TSHAPE(t[i])[0] = 1;
		t[i].data = (const uint8_t *)&one;
		assert_int_equal(fg_tset_add(&s, &t[i], i % 2 ? "odd.safetensors" : "even.safetensors", &err), 0);
	}
	/* Past the first allocation: every tensor kept, in order, with its file. */
	assert_int_equal(s.n_tensors, N);
	for (int i = 0; i < N; i++) {
		assert_ptr_equal(s.tensors[i], &t[i]);
		assert_string_equal(fg_tset_file(&s, (size_t)i), i % 2 ? "odd.safetensors" : "even.safetensors");
	}
	assert_int_equal(fg_tset_measure(&s, &err), 0);
	assert_int_equal(s.n_norms, N / 4);
	assert_int_equal(s.norms[0].st.n_one, 1);
	assert_string_equal(s.norms[1].file, "even.safetensors");
	fg_tset_release(&s);
	assert_int_equal(s.n_tensors, 0);
	assert_null(s.tensors);
	assert_null(s.norms);
	fg_tset_release(NULL);
	free(t);
	free(names);
}

/*
 * A set keeps its tensors' files by runs: tensors come file by file, so a
 * trunk of 400,000 tensors from 18 shards keeps 18 file pointers, not
 * 400,000.  A file met again after another starts a run of its own.
 */
static void test_set_files_by_runs(void **state)
{
	static const char *const files[] = { "a", "a", "a", "b", "b", "a", "c" };
	enum { N = sizeof(files) / sizeof(files[0]) };
	struct fg_tensor t[N];
	struct fg_tset s;
	struct fg_err err = { 0 };
	/* each file name as its own pointer, as the checkpoint layer passes them */
	const char *a = "x.safetensors", *b = "y.safetensors", *c = "z.safetensors";

	(void)state;
	memset(t, 0, sizeof(t));
	assert_int_equal(fg_tset_init(&s, "trunk", &err), 0);
	for (int i = 0; i < N; i++) {
		const char *f = files[i][0] == 'a' ? a : files[i][0] == 'b' ? b : c;

		t[i].name = "model.layers.0.mlp.w.weight";
		t[i].shape = test_shape();
		t[i].dtype = FG_DT_U8;
		assert_int_equal(fg_tset_add(&s, &t[i], f, &err), 0);
	}
	assert_int_equal(s.n_tensors, N);
	assert_int_equal(s.n_runs, 4);
	for (int i = 0; i < N; i++)
		assert_ptr_equal(fg_tset_file(&s, (size_t)i), files[i][0] == 'a' ? a : files[i][0] == 'b' ? b : c);
	fg_tset_release(&s);
	assert_null(s.runs);
}

static void test_long_name_kept_whole(void **state)
{
	char a[400], b[400];
	struct fg_tset s1, s2;
	struct fg_tensor t = { .name = "mtp.norm.weight", .dtype = FG_DT_BF16, .rank = 1, .shape = test_shape() };
	struct fg_err err = { 0 };

	(void)state;
	/* Two sidecar-style names sharing a 300-character prefix. */
	memset(a, 'x', 300);
	memcpy(a, "sidecar:", 8);
	memcpy(b, a, 300);
	snprintf(a + 300, sizeof(a) - 300, "-one.safetensors");
	snprintf(b + 300, sizeof(b) - 300, "-two.safetensors");
	assert_int_equal(fg_tset_init(&s1, a, &err), 0);
	assert_int_equal(fg_tset_init(&s2, b, &err), 0);
	assert_string_equal(s1.name, a);
	assert_string_equal(s2.name, b);
	assert_int_equal(strlen(s1.name), 316);
	assert_string_not_equal(s1.name, s2.name);
	/* The name is the set's own copy. */
	assert_ptr_not_equal(s1.name, a);
	assert_int_equal(fg_tset_add(&s1, &t, "mtp.safetensors", &err), 0);
	assert_int_equal(s1.n_tensors, 1);
	fg_tset_release(&s1);
	fg_tset_release(&s2);
	assert_null(s1.name);
	fg_tset_release(&s1); /* released twice: still fine */
	fg_tset_release(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_f32, bench_release),
		cmocka_unit_test_teardown(test_bf16, bench_release),
		cmocka_unit_test_teardown(test_f16, bench_release),
		cmocka_unit_test_teardown(test_e4m3_and_f64, bench_release),
		cmocka_unit_test_teardown(test_refused_and_empty, bench_release),
		cmocka_unit_test(test_past_the_chunk),
		cmocka_unit_test(test_many_chunks),
		cmocka_unit_test_teardown(test_all_zero, bench_release),
		cmocka_unit_test_teardown(test_set_measure, bench_release),
		cmocka_unit_test(test_set_growth_and_release),
		cmocka_unit_test(test_set_files_by_runs),
		cmocka_unit_test(test_long_name_kept_whole),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
