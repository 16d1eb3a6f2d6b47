/*
 * test_convention.c: norm statistics of a tensor set (tset.c, stats.c) and
 * the one-decision-per-set rule of domain.md section 2 (convention.c).
 *
 * Sets are built by hand from tensors whose bytes live in this file: each
 * norm is a few elements of one value (so its mean is that value), encoded
 * as F32, F64, BF16 or F16 bit patterns written here.  The cases are the
 * fleet fingerprints of docs/domain.md (delta q/k 0.78, absolute 1.78, pre-fc
 * 0.27 in an absolute set, final norms that overlap), the thresholds at
 * their exact values, and forged's guards (double_shifted, mixed,
 * no_evidence, plain, empty).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "forge/model/convention.h"
#include "tests/unit/support.h"

/* Measure and decide the bench as a zero-centred set. */
static enum fg_convention decide(struct bench *b, struct fg_decision *d)
{
	bench_measure(b);
	fg_conv_decide(&b->set, FG_STYLE_ZERO_CENTRED, d);
	return d->conv;
}

#define EPS 1e-6

/* cmocka 1.1's assert_float_equal compares in float; these checks need double. */
#define assert_near(a, b, eps)                                                       \
	do {                                                                         \
		double got_ = (a), want_ = (b);                                      \
		if (!(fabs(got_ - want_) <= (eps)))                                  \
			fail_msg("%s = %.17g, want %.17g (+- %g)", #a, got_, want_,   \
				 (double)(eps));                                     \
	} while (0)

static void test_delta_set(void **state)
{
	struct bench *b;
	struct fg_decision d;

	(void)state;
	b = bench_new("trunk", "model.safetensors");
	bench_norm(b, "model.layers.0.input_layernorm.weight", 0.03f);
	bench_norm(b, "model.layers.0.post_attention_layernorm.weight", 0.35f);
	bench_norm(b, "model.layers.3.input_layernorm.weight", 0.3f);
	bench_norm(b, "model.layers.3.self_attn.q_norm.weight", 0.78f);
	bench_norm(b, "model.layers.3.self_attn.k_norm.weight", 0.74f);
	bench_norm(b, "model.layers.0.linear_attn.norm.weight", 1.0f);
	/* Final norms overlap (2.58 seen in delta) and must not count. */
	bench_norm(b, "model.norm.weight", 2.58f);
	assert_int_equal(decide(b, &d), FG_CONV_DELTA);
	assert_string_equal(fg_conv_name(d.conv), "delta");
	assert_true(d.has_qk);
	assert_true(d.has_low);
	assert_near(d.qk_max, 0.78, EPS);
	assert_near(d.qk_min, 0.74, EPS);
	assert_near(d.low_min, 0.03, EPS);
	assert_string_equal(d.qk_max_norm->t->name, "model.layers.3.self_attn.q_norm.weight");
	assert_string_equal(d.qk_min_norm->t->name, "model.layers.3.self_attn.k_norm.weight");
	assert_string_equal(d.low_min_norm->t->name, "model.layers.0.input_layernorm.weight");
	assert_false(fg_conv_rule_says_absolute(&d));
	fg_tset_release(&b->set);
}

/* A DSA indexer's LayerNorm gain (~1.0) beside delta q/k norms: not q/k evidence, so not mixed (issue 12). */
static void test_indexer_k_norm_not_evidence(void **state)
{
	struct bench *b;
	struct fg_decision d;

	(void)state;
	b = bench_new("trunk", "model.safetensors");
	bench_norm(b, "model.layers.0.input_layernorm.weight", 0.03f);
	bench_norm(b, "model.layers.3.self_attn.q_norm.weight", 0.78f);
	bench_norm(b, "model.layers.3.self_attn.k_norm.weight", 0.74f);
	bench_norm(b, "model.layers.3.self_attn.indexer.k_norm.weight", 1.31f);
	assert_int_equal(decide(b, &d), FG_CONV_DELTA);
	assert_near(d.qk_max, 0.78, EPS);
	fg_tset_release(&b->set);
}

static void test_absolute_set(void **state)
{
	struct bench *b;
	struct fg_decision d;

	(void)state;
	b = bench_new("trunk", "model.safetensors");
	bench_norm(b, "language_model.model.layers.0.input_layernorm.weight", 0.9666f);
	bench_norm(b, "language_model.model.layers.3.self_attn.q_norm.weight", 1.78f);
	bench_norm(b, "language_model.model.layers.3.self_attn.k_norm.weight", 1.7795f);
	bench_norm(b, "language_model.model.norm.weight", 2.25f);
	assert_int_equal(decide(b, &d), FG_CONV_ABSOLUTE);
	assert_near(d.qk_max, 1.78, EPS);
	assert_near(d.low_min, 0.9666, EPS);
	assert_true(fg_conv_rule_says_absolute(&d));
	fg_tset_release(&b->set);
}

static void test_absolute_with_low_pre_fc(void **state)
{
	struct bench *b;
	struct fg_decision d;

	(void)state;
	/* Qwen3.6-35B-A3B's absolute head: pre-fc gains of 0.27 and 0.49. */
	b = bench_new("trunk", "model.safetensors");
	bench_norm(b, "mtp.pre_fc_norm_embedding.weight", 0.2734f);
	bench_norm(b, "mtp.pre_fc_norm_hidden.weight", 0.4937f);
	bench_norm(b, "mtp.layers.0.input_layernorm.weight", 0.93f);
	bench_norm(b, "mtp.layers.0.self_attn.q_norm.weight", 1.79f);
	bench_norm(b, "mtp.layers.0.self_attn.k_norm.weight", 1.77f);
	bench_norm(b, "mtp.norm.weight", 2.252f);
	assert_int_equal(decide(b, &d), FG_CONV_ABSOLUTE);
	assert_near(d.low_min, 0.2734, EPS);
	assert_string_equal(d.low_min_norm->t->name, "mtp.pre_fc_norm_embedding.weight");
	fg_tset_release(&b->set);
}

static void test_low_set_only(void **state)
{
	struct bench *b;
	struct fg_decision d;

	(void)state;
	/* No q/k norms: the low set decides on its own. */
	b = bench_new("trunk", "model.safetensors");
	bench_norm(b, "model.layers.0.input_layernorm.weight", 0.97f);
	bench_norm(b, "model.layers.0.post_attention_layernorm.weight", 1.02f);
	assert_int_equal(decide(b, &d), FG_CONV_ABSOLUTE);
	assert_false(d.has_qk);
	assert_null(d.probe);
	fg_tset_release(&b->set);

	b = bench_new("trunk", "model.safetensors");
	bench_norm(b, "model.layers.0.input_layernorm.weight", 0.3f);
	bench_norm(b, "model.layers.0.post_attention_layernorm.weight", 0.39f);
	bench_norm(b, "model.norm.weight", 2.25f);
	assert_int_equal(decide(b, &d), FG_CONV_DELTA);
	fg_tset_release(&b->set);

	/*
	 * An absolute head without q/k norms: layernorms near 1, a pre-fc gain of
	 * 0.2734 (seen in Qwen3.6-35B-A3B).  The low set spans 0.5, so nothing
	 * decides it: shifting it as delta would double-shift the layernorms.
	 */
	b = bench_new("trunk", "model.safetensors");
	bench_norm(b, "mtp.layers.0.input_layernorm.weight", 0.97f);
	bench_norm(b, "mtp.pre_fc_norm_embedding.weight", 0.2734f);
	assert_int_equal(decide(b, &d), FG_CONV_NO_EVIDENCE);
	fg_tset_release(&b->set);
}

#define ABSENT NAN

/* The decision for a set of one q_norm of mean qk and one input_layernorm of mean low (F64; ABSENT leaves it out). */
static enum fg_convention decide_qk_low(double qk, double low)
{
	struct bench *b;
	struct fg_decision d;
	enum fg_convention c;

	b = bench_new("trunk", "model.safetensors");
	if (!isnan(qk))
		bench_norm64(b, "model.layers.0.self_attn.q_norm.weight", qk);
	if (!isnan(low))
		bench_norm64(b, "model.layers.0.input_layernorm.weight", low);
	c = decide(b, &d);
	fg_tset_release(&b->set);
	return c;
}

static void test_thresholds(void **state)
{
	(void)state;
	/* qk_max >= 1.25 is absolute; just below is delta. */
	assert_int_equal(decide_qk_low(1.25, ABSENT), FG_CONV_ABSOLUTE);
	assert_int_equal(decide_qk_low(1.2499, ABSENT), FG_CONV_DELTA);
	assert_int_equal(decide_qk_low(1.2499, 0.3), FG_CONV_DELTA);
	/* low_min >= 0.5 is absolute, even with q/k below 1.25. */
	assert_int_equal(decide_qk_low(ABSENT, 0.5), FG_CONV_ABSOLUTE);
	assert_int_equal(decide_qk_low(ABSENT, 0.4999), FG_CONV_DELTA);
	assert_int_equal(decide_qk_low(0.78, 0.5), FG_CONV_ABSOLUTE);
	/* qk_max > 2.4 is double_shifted; exactly 2.4 is still absolute. */
	assert_int_equal(decide_qk_low(2.4, ABSENT), FG_CONV_ABSOLUTE);
	assert_int_equal(decide_qk_low(2.4001, ABSENT), FG_CONV_DOUBLE_SHIFTED);
	assert_int_equal(decide_qk_low(2.79, 1.9666), FG_CONV_DOUBLE_SHIFTED);
	/* The same boundaries with F32 tensors (1.25 and 0.5 are exact in F32). */
	{
		struct bench *b;
		struct fg_decision d;

		b = bench_new("trunk", "model.safetensors");
		bench_norm(b, "model.layers.0.self_attn.q_norm.weight", 1.25f);
		bench_norm(b, "model.layers.0.input_layernorm.weight", 0.3f);
		assert_int_equal(decide(b, &d), FG_CONV_ABSOLUTE);
		fg_tset_release(&b->set);
		b = bench_new("trunk", "model.safetensors");
		bench_norm(b, "model.layers.0.self_attn.q_norm.weight", 1.2499f);
		bench_norm(b, "model.layers.0.input_layernorm.weight", 0.3f);
		assert_int_equal(decide(b, &d), FG_CONV_DELTA);
		fg_tset_release(&b->set);
		b = bench_new("trunk", "model.safetensors");
		bench_norm(b, "model.layers.0.self_attn.q_norm.weight", 2.4001f);
		assert_int_equal(decide(b, &d), FG_CONV_DOUBLE_SHIFTED);
		fg_tset_release(&b->set);
	}
}

static void test_mixed(void **state)
{
	struct bench *b;
	struct fg_decision d;

	(void)state;
	/* A partial shift: q absolute, k delta. */
	b = bench_new("trunk", "model.safetensors");
	bench_norm(b, "model.layers.3.self_attn.q_norm.weight", 1.78f);
	bench_norm(b, "model.layers.3.self_attn.k_norm.weight", 0.78f);
	bench_norm(b, "model.layers.3.input_layernorm.weight", 0.96f);
	assert_int_equal(decide(b, &d), FG_CONV_MIXED);
	assert_string_equal(fg_conv_name(d.conv), "mixed");
	assert_near(d.qk_max, 1.78, EPS);
	assert_near(d.qk_min, 0.78, EPS);
	assert_string_equal(d.qk_min_norm->t->name, "model.layers.3.self_attn.k_norm.weight");
	fg_tset_release(&b->set);
}

static void test_no_evidence(void **state)
{
	struct bench *b;
	struct fg_decision d;

	(void)state;
	/* Final norms and linear_attn.norm are never evidence, whatever their values. */
	b = bench_new("trunk", "model.safetensors");
	bench_norm(b, "model.norm.weight", 2.25f);
	bench_norm(b, "mtp.norm.weight", 2.252f);
	bench_norm(b, "model.layers.0.linear_attn.norm.weight", 1.0f);
	bench_norm(b, "model.layers.61.shared_head.norm.weight", 3.0f);
	assert_int_equal(decide(b, &d), FG_CONV_NO_EVIDENCE);
	assert_string_equal(fg_conv_name(d.conv), "no_evidence");
	assert_false(d.has_qk);
	assert_false(d.has_low);
	assert_false(fg_conv_rule_says_absolute(&d));
	fg_tset_release(&b->set);
}

static void test_plain_and_empty(void **state)
{
	static const float delta_like[] = { 0.78f, 0.3f };
	static const float double_like[] = { 2.79f, 1.97f };
	const float *cases[] = { delta_like, double_like };
	struct bench *b;
	struct fg_decision d;

	(void)state;
	/* A plain family never shifts: plain whatever the values. */
	for (size_t i = 0; i < 2; i++) {
		b = bench_new("trunk", "model.safetensors");
		bench_norm(b, "model.layers.0.self_attn.q_norm.weight", cases[i][0]);
		bench_norm(b, "model.layers.0.input_layernorm.weight", cases[i][1]);
		bench_norm(b, "model.layers.61.enorm.weight", cases[i][1]);
		bench_measure(b);
		fg_conv_decide(&b->set, FG_STYLE_PLAIN, &d);
		assert_int_equal(d.conv, FG_CONV_PLAIN);
		assert_string_equal(fg_conv_name(d.conv), "plain");
		fg_tset_release(&b->set);
	}
	/* No norms at all: empty. */
	b = bench_new("trunk", "model.safetensors");
	bench_tensor(b, "mtp.fc.weight", FG_DT_F32, 4);
	bench_tensor(b, "model.layers.0.mlp.down_proj.weight", FG_DT_F32, 4);
	assert_int_equal(decide(b, &d), FG_CONV_EMPTY);
	assert_string_equal(fg_conv_name(d.conv), "empty");
	assert_int_equal(b->set.n_norms, 0);
	fg_tset_release(&b->set);
	/* A set with no tensors at all. */
	b = bench_new("trunk", "model.safetensors");
	assert_int_equal(decide(b, &d), FG_CONV_EMPTY);
	fg_tset_release(&b->set);
}

static void test_nan_norm_is_not_evidence(void **state)
{
	const float nan4[4] = { NAN, NAN, NAN, NAN };
	struct bench *b;
	struct fg_decision d;

	(void)state;
	/* An all-NaN q_norm would be "absolute" or "mixed" if it counted. */
	b = bench_new("trunk", "model.safetensors");
	bench_f32(b, "model.layers.0.self_attn.q_norm.weight", nan4, 4);
	bench_norm(b, "model.layers.1.self_attn.q_norm.weight", 0.78f);
	bench_norm(b, "model.layers.1.input_layernorm.weight", 0.3f);
	assert_int_equal(decide(b, &d), FG_CONV_DELTA);
	assert_near(d.qk_max, 0.78, EPS);
	assert_string_equal(d.qk_max_norm->t->name, "model.layers.1.self_attn.q_norm.weight");
	/* The probe skips it too. */
	assert_non_null(d.probe);
	assert_string_equal(d.probe->t->name, "model.layers.1.self_attn.q_norm.weight");
	fg_tset_release(&b->set);

	/* Only NaN norms: no evidence. */
	b = bench_new("trunk", "model.safetensors");
	bench_f32(b, "model.layers.0.self_attn.q_norm.weight", nan4, 4);
	bench_f32(b, "model.layers.0.input_layernorm.weight", nan4, 4);
	assert_int_equal(decide(b, &d), FG_CONV_NO_EVIDENCE);
	assert_false(d.has_qk);
	assert_false(d.has_low);
	fg_tset_release(&b->set);
}

static void test_norm_stats(void **state)
{
	const float v[7] = { 0.5f, 1.0f, NAN, 1.0f, 2.0f, INFINITY, -0.25f };
	const float zero[3] = { 0.0f, -0.0f, 0.0f };
	const float nan2[2] = { NAN, -INFINITY };
	const struct fg_norm *n;
	struct bench *b;
	/*
	 * By hand, over the finite elements 0.5, 1, 1, 2, -0.25: sum 4.25, mean
	 * 0.85; deviations -0.35 0.15 0.15 1.15 -1.1, squares sum 2.7, population
	 * variance 0.54.
	 */
	const double mean = 0.85, sd = sqrt(0.54);

	(void)state;
	b = bench_new("trunk", "model.safetensors");
	bench_f32(b, "model.layers.0.input_layernorm.weight", v, 7);
	bench_f32(b, "model.layers.1.input_layernorm.weight", zero, 3);
	bench_f32(b, "model.layers.2.input_layernorm.weight", nan2, 2);
	bench_tensor(b, "model.layers.0.mlp.down_proj.weight", FG_DT_F32, 1);
	bench_tensor(b, "model.layers.0.mlp.down_proj.scales", FG_DT_F32, 1);
	bench_tensor(b, "model.layers.0.mlp.up_proj.weight_scale_inv", FG_DT_F32, 1);
	bench_measure(b);
	assert_int_equal(b->set.n_tensors, 6);
	assert_int_equal(b->set.n_norms, 3);
	assert_int_equal(b->set.n_quantized, 0); /* quantized modules are qmods.c's to count, by their tensors */
	assert_int_equal(b->set.n_bad_norms, 0);

	n = fg_tset_norm(&b->set, "model.layers.0.input_layernorm.weight");
	assert_non_null(n);
	assert_int_equal(n->cls, FG_NAME_LOW);
	assert_string_equal(n->file, "model.safetensors");
	assert_int_equal(n->st.count, 7);
	assert_int_equal(n->st.nonfinite, 2);
	assert_int_equal(n->st.n_one, 2);
	assert_true(n->st.has_finite);
	assert_near(n->st.min, -0.25, 1e-12);
	assert_near(n->st.max, 2.0, 1e-12);
	assert_near(n->st.mean, mean, 1e-12);
	assert_near(n->st.std, sd, 1e-12);
	assert_false(n->all_zero);

	n = fg_tset_norm(&b->set, "model.layers.1.input_layernorm.weight");
	assert_non_null(n);
	assert_true(n->all_zero);
	assert_near(n->st.mean, 0.0, 0.0);
	assert_near(n->st.std, 0.0, 0.0);
	assert_int_equal(n->st.n_one, 0);

	n = fg_tset_norm(&b->set, "model.layers.2.input_layernorm.weight");
	assert_non_null(n);
	assert_false(n->st.has_finite);
	assert_int_equal(n->st.nonfinite, 2);
	assert_false(n->all_zero);

	assert_null(fg_tset_norm(&b->set, "model.layers.0.mlp.down_proj.weight"));
	assert_null(fg_tset_norm(&b->set, "model.norm.weight"));
	fg_tset_release(&b->set);
}

static void test_stats_in_f64(void **state)
{
	/* 1 + 2^-40 is lost in F32: the statistics of an F64 norm keep it. */
	const double tiny = ldexp(1.0, -40);
	struct fg_tensor t;
	struct fg_tstats st;
	double v[3] = { 1.0 + tiny, 1.0 + tiny, 1.0 + tiny };

	(void)state;
	memset(&t, 0, sizeof(t));
	t.name = "model.norm.weight";
	t.dtype = FG_DT_F64;
	t.rank = 1;
	t.shape = test_shape();
	TSHAPE(t)[0] = 3;
	t.data = (const uint8_t *)v;
	assert_int_equal(fg_tstats_compute(&t, &st), 0);
	assert_true(st.mean > 1.0);
	assert_near(st.mean - 1.0, tiny, tiny * 1e-6);
	assert_int_equal(st.n_one, 0);
	/* A non-float tensor is refused. */
	t.dtype = FG_DT_I64;
	assert_int_equal(fg_tstats_compute(&t, &st), FG_EUSAGE);
}

static void test_half_precision_same_decision(void **state)
{
	static const enum fg_dtype dts[] = { FG_DT_BF16, FG_DT_F16 };
	/* Bit patterns of 0.78125, 1.78125, 0.296875 and 1.03125. */
	static const uint16_t bits[2][4] = {
		{ 0x3f48, 0x3fe4, 0x3e98, 0x3f84 }, /* BF16 */
		{ 0x3a40, 0x3f20, 0x34c0, 0x3c20 }, /* F16 */
	};
	struct bench *b;
	struct fg_decision d;

	(void)state;
	for (size_t k = 0; k < 2; k++) {
		/* Delta: q/k 0.78125, low 0.296875. */
		b = bench_new("trunk", "model.safetensors");
		bench_norm16(b, "model.layers.3.self_attn.q_norm.weight", dts[k], bits[k][0]);
		bench_norm16(b, "model.layers.3.self_attn.k_norm.weight", dts[k], bits[k][0]);
		bench_norm16(b, "model.layers.3.input_layernorm.weight", dts[k], bits[k][2]);
		assert_int_equal(decide(b, &d), FG_CONV_DELTA);
		assert_near(d.qk_max, 0.78125, 0.0);
		assert_near(d.low_min, 0.296875, 0.0);
		assert_near(d.probe->st.mean, 0.78125, 0.0);
		fg_tset_release(&b->set);
		/* Absolute: q/k 1.78125, low 1.03125; and 1.0 counted in n_one. */
		b = bench_new("trunk", "model.safetensors");
		bench_norm16(b, "model.layers.3.self_attn.q_norm.weight", dts[k], bits[k][1]);
		bench_norm16(b, "model.layers.3.self_attn.k_norm.weight", dts[k], bits[k][1]);
		bench_norm16(b, "model.layers.3.input_layernorm.weight", dts[k], bits[k][3]);
		bench_norm16(b, "model.layers.0.linear_attn.norm.weight", dts[k], k ? 0x3c00 : 0x3f80);
		assert_int_equal(decide(b, &d), FG_CONV_ABSOLUTE);
		assert_near(d.qk_max, 1.78125, 0.0);
		assert_near(d.low_min, 1.03125, 0.0);
		assert_int_equal(fg_tset_norm(&b->set, "model.layers.0.linear_attn.norm.weight")->st.n_one, 4);
		fg_tset_release(&b->set);
	}
}

static void test_probe(void **state)
{
	struct bench *b;
	struct fg_decision d;

	(void)state;
	/* The lowest layer with a q_norm, whatever the order of discovery. */
	b = bench_new("trunk", "model.safetensors");
	bench_norm(b, "language_model.model.layers.7.self_attn.q_norm.weight", 1.70f);
	bench_norm(b, "language_model.model.layers.10.self_attn.q_norm.weight", 1.72f);
	bench_norm(b, "language_model.model.layers.3.self_attn.q_norm.weight", 1.7906f);
	/* A k_norm of a lower layer is not the probe, nor is a layer without q_norm. */
	bench_norm(b, "language_model.model.layers.1.self_attn.k_norm.weight", 1.79f);
	bench_norm(b, "language_model.model.layers.0.input_layernorm.weight", 0.9666f);
	bench_norm(b, "language_model.model.layers.3.self_attn.k_norm.weight", 1.7795f);
	assert_int_equal(decide(b, &d), FG_CONV_ABSOLUTE);
	assert_non_null(d.probe);
	assert_string_equal(d.probe->t->name, "language_model.model.layers.3.self_attn.q_norm.weight");
	assert_near(d.probe->st.mean, 1.7906, EPS);
	fg_tset_release(&b->set);

	/* Reverse order: still layer 3. */
	b = bench_new("trunk", "model.safetensors");
	bench_norm(b, "model.layers.3.self_attn.q_norm.weight", 0.78f);
	bench_norm(b, "model.layers.7.self_attn.q_norm.weight", 0.76f);
	assert_int_equal(decide(b, &d), FG_CONV_DELTA);
	assert_string_equal(d.probe->t->name, "model.layers.3.self_attn.q_norm.weight");
	fg_tset_release(&b->set);
}

static void test_bad_norms(void **state)
{
	struct bench *b;
	struct fg_decision d;
	struct fg_tensor *t;

	(void)state;
	b = bench_new("trunk", "model.safetensors");
	bench_norm(b, "model.layers.0.self_attn.q_norm.weight", 0.78f);
	bench_norm(b, "model.layers.0.input_layernorm.weight", 0.3f);
	/* A rank-2 q_norm that would say double_shifted if it were measured. */
	t = bench_tensor(b, "model.layers.1.self_attn.q_norm.weight", FG_DT_F32, 4);
	for (int i = 0; i < 4; i++)
		b->data[b->n - 1].f32[i] = 2.79f;
	t->rank = 2;
	TSHAPE(*t)[0] = 2;
	TSHAPE(*t)[1] = 2;
	/* An integer norm is not a float norm either. */
	t = bench_tensor(b, "model.layers.1.input_layernorm.weight", FG_DT_I32, 4);
	(void)t;
	assert_int_equal(decide(b, &d), FG_CONV_DELTA);
	assert_int_equal(b->set.n_bad_norms, 2);
	assert_non_null(b->set.bad_norm);
	assert_string_equal(b->set.bad_norm, "model.layers.1.self_attn.q_norm.weight");
	assert_int_equal(b->set.n_norms, 2);
	assert_null(fg_tset_norm(&b->set, "model.layers.1.self_attn.q_norm.weight"));
	/* Measuring again starts the counts over. */
	bench_measure(b);
	assert_int_equal(b->set.n_bad_norms, 2);
	assert_int_equal(b->set.n_norms, 2);
	fg_tset_release(&b->set);
}

static void test_after_shift(void **state)
{
	static const struct {
		enum fg_convention c;
		int shift;
		enum fg_convention want;
	} rows[] = {
		{ FG_CONV_DELTA, 1, FG_CONV_ABSOLUTE },
		{ FG_CONV_DELTA, 0, FG_CONV_DELTA },
		{ FG_CONV_ABSOLUTE, 1, FG_CONV_DOUBLE_SHIFTED },
		{ FG_CONV_ABSOLUTE, 0, FG_CONV_ABSOLUTE },
		{ FG_CONV_DOUBLE_SHIFTED, 0, FG_CONV_DOUBLE_SHIFTED },
		{ FG_CONV_DOUBLE_SHIFTED, 1, FG_CONV_DOUBLE_SHIFTED },
		{ FG_CONV_NO_EVIDENCE, 0, FG_CONV_DELTA },
		{ FG_CONV_NO_EVIDENCE, 1, FG_CONV_ABSOLUTE },
		{ FG_CONV_MIXED, 0, FG_CONV_MIXED },
		{ FG_CONV_MIXED, 1, FG_CONV_MIXED },
		{ FG_CONV_PLAIN, 0, FG_CONV_PLAIN },
		{ FG_CONV_PLAIN, 1, FG_CONV_PLAIN },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		enum fg_convention got = fg_conv_after_shift(rows[i].c, rows[i].shift);

		if (got != rows[i].want)
			fail_msg("%s + %d: %s, want %s", fg_conv_name(rows[i].c), rows[i].shift,
				 fg_conv_name(got), fg_conv_name(rows[i].want));
	}
}

static void test_names_and_rule(void **state)
{
	static const char *const words[] = {
		[FG_CONV_DELTA] = "delta", [FG_CONV_ABSOLUTE] = "absolute",
		[FG_CONV_DOUBLE_SHIFTED] = "double_shifted", [FG_CONV_MIXED] = "mixed",
		[FG_CONV_NO_EVIDENCE] = "no_evidence", [FG_CONV_PLAIN] = "plain",
		[FG_CONV_EMPTY] = "empty",
	};
	struct fg_decision d;

	(void)state;
	for (int c = FG_CONV_DELTA; c <= FG_CONV_EMPTY; c++)
		assert_string_equal(fg_conv_name((enum fg_convention)c), words[c]);
	/* The two-signal rule alone, on decisions written by hand. */
	memset(&d, 0, sizeof(d));
	assert_false(fg_conv_rule_says_absolute(&d));
	d.qk_max = 1.8; /* not evidence without has_qk */
	d.low_min = 0.9;
	assert_false(fg_conv_rule_says_absolute(&d));
	d.has_qk = 1;
	assert_true(fg_conv_rule_says_absolute(&d));
	d.qk_max = 1.2499;
	assert_false(fg_conv_rule_says_absolute(&d));
	d.has_low = 1;
	assert_true(fg_conv_rule_says_absolute(&d));
	d.low_min = 0.4999;
	assert_false(fg_conv_rule_says_absolute(&d));
	d.low_min = 0.5;
	assert_true(fg_conv_rule_says_absolute(&d));
	d.has_qk = 0;
	d.qk_max = 1.25;
	d.low_min = 0.3;
	assert_false(fg_conv_rule_says_absolute(&d));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_delta_set, bench_release),
		cmocka_unit_test_teardown(test_indexer_k_norm_not_evidence, bench_release),
		cmocka_unit_test_teardown(test_absolute_set, bench_release),
		cmocka_unit_test_teardown(test_absolute_with_low_pre_fc, bench_release),
		cmocka_unit_test_teardown(test_low_set_only, bench_release),
		cmocka_unit_test_teardown(test_thresholds, bench_release),
		cmocka_unit_test_teardown(test_mixed, bench_release),
		cmocka_unit_test_teardown(test_no_evidence, bench_release),
		cmocka_unit_test_teardown(test_plain_and_empty, bench_release),
		cmocka_unit_test_teardown(test_nan_norm_is_not_evidence, bench_release),
		cmocka_unit_test_teardown(test_norm_stats, bench_release),
		cmocka_unit_test_teardown(test_stats_in_f64, bench_release),
		cmocka_unit_test_teardown(test_half_precision_same_decision, bench_release),
		cmocka_unit_test_teardown(test_probe, bench_release),
		cmocka_unit_test_teardown(test_bad_norms, bench_release),
		cmocka_unit_test_teardown(test_after_shift, bench_release),
		cmocka_unit_test_teardown(test_names_and_rule, bench_release),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
