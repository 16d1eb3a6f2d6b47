/*
 * test_policy.c: quantization policies (forge/artifact/policy.c) on a
 * hand-made head plan against a small synthetic MLX backbone written with
 * support.c's shard writer.  The backbone quantizes q/k/o/gate/up/down_proj
 * (their .scales exist) but not v_proj; its config.json quantization block
 * says 4 bits, group 64, with per-module overrides: down_proj 8 bits,
 * o_proj mxfp4, up_proj false.  Which head modules each policy quantizes
 * is asserted through the plan (hidden bases followed by their QUANT parts,
 * with their dtypes and shapes) and through the record.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forge/artifact/policy.h"
#include "forge/format/quant/quant.h"
#include "tests/unit/support.h"

static char tmp[PATH_MAX];
static struct fg_inspect *backbone, *plain_backbone;

/* An MLX backbone in TMP/name: the quantized modules (weight, scales, biases), v_proj in BF16. */
static struct fg_inspect *write_backbone(const char *name, const char *config)
{
	static const char *const quantized[] = { "self_attn.q_proj", "self_attn.k_proj", "self_attn.o_proj",
						 "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj" };
	static const uint64_t packed[2] = { 64, 16 }, groups[2] = { 64, 2 }, plain[2] = { 64, 128 };
	char dir[PATH_MAX + 16], t[160];
	struct shard *s = shard_new();
	struct fg_inspect *r = NULL;
	struct fg_err err = { 0 };

	make_dir(dir, sizeof(dir), tmp, name);
	write_text(dir, "config.json", config);
	shard_meta(s, "format", "mlx");
	shard_norm(s, "model.layers.0.self_attn.q_norm.weight", 1.78f);
	shard_norm(s, "model.layers.0.input_layernorm.weight", 0.97f);
	for (size_t i = 0; i < sizeof(quantized) / sizeof(quantized[0]); i++) {
		snprintf(t, sizeof(t), "model.layers.0.%s.weight", quantized[i]);
		shard_add(s, t, "U32", 2, packed, NULL);
		snprintf(t, sizeof(t), "model.layers.0.%s.scales", quantized[i]);
		shard_add(s, t, "BF16", 2, groups, NULL);
		snprintf(t, sizeof(t), "model.layers.0.%s.biases", quantized[i]);
		shard_add(s, t, "BF16", 2, groups, NULL);
	}
	shard_add(s, "model.layers.0.self_attn.v_proj.weight", "BF16", 2, plain, NULL);
	/* The backbone's own head quantizes v_proj: that is no trunk counterpart. */
	shard_add(s, "mtp.layers.0.self_attn.v_proj.weight", "U32", 2, packed, NULL);
	shard_add(s, "mtp.layers.0.self_attn.v_proj.scales", "BF16", 2, groups, NULL);
	shard_add(s, "mtp.layers.0.self_attn.v_proj.biases", "BF16", 2, groups, NULL);
	shard_save(s, dir, "model.safetensors");
	if (fg_inspect_run(&r, dir, NULL, 0, &err) != 0)
		fail_msg("inspecting the backbone %s: %s", dir, err.msg);
	return r;
}

static int setup(void **state)
{
	(void)state;
	tmpdir_new(tmp, sizeof(tmp), "policy");
	backbone = write_backbone("mlx",
				  "{\"model_type\": \"qwen3_5\", \"num_hidden_layers\": 1, \"quantization\": {"
				  "\"bits\": 4, \"group_size\": 64,"
				  " \"model.layers.0.mlp.down_proj\": {\"bits\": 8, \"group_size\": 64},"
				  " \"model.layers.0.self_attn.o_proj\": {\"mode\": \"mxfp4\"},"
				  " \"model.layers.0.mlp.up_proj\": false}}");
	plain_backbone = write_backbone("noblock", "{\"model_type\": \"qwen3_5\", \"num_hidden_layers\": 1}");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	fg_inspect_free(backbone);
	fg_inspect_free(plain_backbone);
	return rm_tree(tmp);
}

/* The head plan: (name, dtype, shape) rows, written as VIEW entries. */
static const struct {
	const char *name;
	enum fg_dtype dtype;
	int rank;
	uint64_t shape[2];
} head[] = {
	{ "mtp.fc.weight", FG_DT_BF16, 2, { 64, 128 } },
	{ "mtp.layers.0.input_layernorm.weight", FG_DT_F32, 1, { 64, 0 } },
	{ "mtp.layers.0.self_attn.q_proj.weight", FG_DT_BF16, 2, { 64, 128 } },
	{ "mtp.layers.0.self_attn.q_proj.bias", FG_DT_BF16, 1, { 64, 0 } },
	{ "mtp.layers.0.self_attn.k_proj.weight", FG_DT_BF16, 2, { 64, 96 } }, /* 96: no group of 64 fits */
	{ "mtp.layers.0.self_attn.v_proj.weight", FG_DT_BF16, 2, { 64, 128 } },
	{ "mtp.layers.0.self_attn.o_proj.weight", FG_DT_BF16, 2, { 64, 128 } },
	{ "mtp.layers.0.mlp.gate.weight", FG_DT_BF16, 2, { 4, 64 } },        /* the router */
	{ "mtp.layers.0.mlp.gate_proj.weight", FG_DT_F16, 2, { 64, 128 } },
	{ "mtp.layers.0.mlp.up_proj.weight", FG_DT_BF16, 2, { 64, 128 } },
	{ "mtp.layers.0.mlp.down_proj.weight", FG_DT_F32, 2, { 128, 64 } },
	{ "mtp.layers.0.self_attn.q_b_proj.weight", FG_DT_F64, 2, { 64, 128 } }, /* no quantizable dtype */
	{ "mtp.layers.0.mlp.shared_expert.down_proj.weight", FG_DT_BF16, 2, { 64, 80 } }, /* 80: not even 32 fits */
};

#define N_HEAD (sizeof(head) / sizeof(head[0]))

static void head_plan(struct fg_plan *plan)
{
	struct fg_err err = { 0 };

	memset(plan, 0, sizeof(*plan));
	for (size_t i = 0; i < N_HEAD; i++) {
		struct fg_plan_entry *o = fg_plan_add(plan, head[i].name, &err);

		assert_non_null(o);
		o->dtype = head[i].dtype;
		o->rank = head[i].rank;
		o->shape[0] = head[i].shape[0];
		o->shape[1] = head[i].shape[1];
	}
}

/* Apply policy text to the head plan with bb; the record must equal want (JSON text). */
static void apply(const char *text, const struct fg_inspect *bb, struct fg_plan *plan, const char *want)
{
	struct fg_policy policy;
	struct fg_err err = { 0 };
	cJSON *record = cJSON_CreateObject(), *expected = cJSON_Parse(want);

	assert_non_null(expected);
	assert_int_equal(fg_policy_parse(text, &policy, &err), 0);
	head_plan(plan);
	if (fg_policy_apply(plan, &policy, bb, record, &err) != 0)
		fail_msg("%s: %s", text, err.msg);
	if (!cJSON_Compare(record, expected, 1)) {
		char *got = cJSON_PrintUnformatted(record);

		fail_msg("%s: record %s, want %s", text, got, want);
	}
	cJSON_Delete(record);
	cJSON_Delete(expected);
}

/* The entry named name that is no QUANT part (the base when quantized), or NULL. */
static const struct fg_plan_entry *base_of(const struct fg_plan *plan, const char *name, size_t *at)
{
	for (size_t i = 0; i < plan->n; i++) {
		if (plan->t[i].op != FG_OP_QUANT && strcmp(plan->t[i].name, name) == 0) {
			*at = i;
			return &plan->t[i];
		}
	}
	return NULL;
}

/*
 * name is quantized with bits/group (mxfp4 or affine), its parts right after
 * it with the MLX dtypes and shapes; bits 0: it stays a plain, written entry.
 */
static void expect_quant(const struct fg_plan *plan, const char *name, int bits, int group, int mxfp4)
{
	size_t at = 0;
	const struct fg_plan_entry *b = base_of(plan, name, &at);
	static const char *const suffix[] = { "weight", "scales", "biases" };
	char module[200], want[256];

	assert_non_null(b);
	if (!bits) {
		assert_false(b->hidden);
		if (at + 1 < plan->n && plan->t[at + 1].op == FG_OP_QUANT)
			fail_msg("%s has QUANT parts", name);
		return;
	}
	assert_true(b->hidden);
	assert_true(b->changed);
	snprintf(module, sizeof(module), "%.*s", (int)(strlen(name) - strlen(".weight")), name);
	for (int p = 0; p < (mxfp4 ? 2 : 3); p++) {
		const struct fg_plan_entry *q = &plan->t[at + 1 + (size_t)p];
		uint64_t cols = b->shape[1];

		snprintf(want, sizeof(want), "%s.%s", module, suffix[p]);
		assert_string_equal(q->name, want);
		assert_int_equal(q->op, FG_OP_QUANT);
		assert_int_equal(q->base, (int)at);
		assert_int_equal(q->part, p);
		assert_int_equal(q->quant.bits, bits);
		assert_int_equal(q->quant.group, group);
		assert_int_equal(q->quant.mxfp4, mxfp4);
		assert_int_equal(q->shape[0], b->shape[0]);
		if (p == 0) {
			assert_int_equal(q->dtype, FG_DT_U32);
			assert_int_equal(q->shape[1], mxfp4 ? cols / 8 : cols * (uint64_t)bits / 32);
		} else {
			assert_int_equal(q->dtype, mxfp4 ? FG_DT_U8 : b->dtype);
			assert_int_equal(q->shape[1], cols / (uint64_t)group);
		}
	}
	if (mxfp4 && at + 3 < plan->n)
		assert_int_not_equal(plan->t[at + 3].op, FG_OP_QUANT);
}

static void test_parse(void **state)
{
	static const char *const bad[] = { "affine:7:64", "affine:4:48", "affine:4:64x", "affine:4", "Keep", "mxfp8", "" };
	struct fg_policy p;
	struct fg_err err = { 0 };

	(void)state;
	assert_int_equal(fg_policy_parse(NULL, &p, &err), 0);
	assert_int_equal(p.kind, FG_POLICY_KEEP);
	assert_string_equal(p.text, "keep");
	assert_int_equal(fg_policy_parse("match", &p, &err), 0);
	assert_int_equal(p.kind, FG_POLICY_MATCH);
	assert_int_equal(fg_policy_parse("mxfp4", &p, &err), 0);
	assert_int_equal(p.kind, FG_POLICY_MXFP4);
	assert_int_equal(p.spec.bits, 4);
	assert_int_equal(p.spec.group, 32);
	assert_true(p.spec.mxfp4);
	assert_int_equal(fg_policy_parse("affine:8:128", &p, &err), 0);
	assert_int_equal(p.kind, FG_POLICY_AFFINE);
	assert_int_equal(p.spec.bits, 8);
	assert_int_equal(p.spec.group, 128);
	assert_false(p.spec.mxfp4);
	assert_string_equal(p.text, "affine:8:128");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (fg_policy_parse(bad[i], &p, &err) != FG_EUSAGE)
			fail_msg("'%s' accepted", bad[i]);
		assert_non_null(strstr(err.msg, "use keep, match, mxfp4 or affine:BITS:GROUP"));
	}
}

static void test_keep(void **state)
{
	struct fg_plan plan;

	(void)state;
	/* keep records every head linear (issue 12), here none quantized: the plan is left as it is. */
	apply("keep", backbone, &plan,
	      "{\"mtp.fc\": null, \"mtp.layers.0.self_attn.q_proj\": null, \"mtp.layers.0.self_attn.k_proj\": null,"
	      " \"mtp.layers.0.self_attn.v_proj\": null, \"mtp.layers.0.self_attn.o_proj\": null,"
	      " \"mtp.layers.0.mlp.gate\": null, \"mtp.layers.0.mlp.gate_proj\": null, \"mtp.layers.0.mlp.up_proj\": null,"
	      " \"mtp.layers.0.mlp.down_proj\": null, \"mtp.layers.0.self_attn.q_b_proj\": null,"
	      " \"mtp.layers.0.mlp.shared_expert.down_proj\": null}");
	assert_int_equal(plan.n, N_HEAD);
	for (size_t i = 0; i < plan.n; i++)
		assert_false(plan.t[i].hidden);
	fg_plan_release(&plan);
}

static void test_match(void **state)
{
	struct fg_plan plan;

	(void)state;
	apply("match", backbone, &plan,
	      "{\"mtp.fc\": null,"
	      " \"mtp.layers.0.self_attn.q_proj\": {\"bits\": 4, \"group_size\": 64, \"mode\": \"affine\"},"
	      " \"mtp.layers.0.self_attn.k_proj\": null,"
	      " \"mtp.layers.0.self_attn.v_proj\": null,"
	      " \"mtp.layers.0.self_attn.o_proj\": {\"bits\": 4, \"group_size\": 32, \"mode\": \"mxfp4\"},"
	      " \"mtp.layers.0.mlp.gate\": null,"
	      " \"mtp.layers.0.mlp.gate_proj\": {\"bits\": 4, \"group_size\": 64, \"mode\": \"affine\"},"
	      " \"mtp.layers.0.mlp.up_proj\": null,"
	      " \"mtp.layers.0.mlp.down_proj\": {\"bits\": 8, \"group_size\": 64, \"mode\": \"affine\"},"
	      " \"mtp.layers.0.self_attn.q_b_proj\": null, \"mtp.layers.0.mlp.shared_expert.down_proj\": null}");
	/* fc has no backbone counterpart; the router neither; norms and biases are never touched. */
	expect_quant(&plan, "mtp.fc.weight", 0, 0, 0);
	expect_quant(&plan, "mtp.layers.0.mlp.gate.weight", 0, 0, 0);
	expect_quant(&plan, "mtp.layers.0.input_layernorm.weight", 0, 0, 0);
	expect_quant(&plan, "mtp.layers.0.self_attn.q_proj.bias", 0, 0, 0);
	/* The block's default, its overrides (mxfp4, 8 bits, false) and an unquantized counterpart. */
	expect_quant(&plan, "mtp.layers.0.self_attn.q_proj.weight", 4, 64, 0);
	expect_quant(&plan, "mtp.layers.0.self_attn.o_proj.weight", 4, 32, 1);
	expect_quant(&plan, "mtp.layers.0.mlp.down_proj.weight", 8, 64, 0);
	expect_quant(&plan, "mtp.layers.0.mlp.up_proj.weight", 0, 0, 0);
	expect_quant(&plan, "mtp.layers.0.self_attn.v_proj.weight", 0, 0, 0);
	/* F16 keeps F16 scales; a width no group divides stays as it is. */
	expect_quant(&plan, "mtp.layers.0.mlp.gate_proj.weight", 4, 64, 0);
	expect_quant(&plan, "mtp.layers.0.self_attn.k_proj.weight", 0, 0, 0);
	/* The head's entries + 3 affine modules x 3 parts + mxfp4 o_proj x 2. */
	assert_int_equal(plan.n, N_HEAD + 9 + 2);
	fg_plan_release(&plan);

	/* A backbone without a quantization block: match quantizes nothing. */
	apply("match", plain_backbone, &plan,
	      "{\"mtp.fc\": null, \"mtp.layers.0.self_attn.q_proj\": null, \"mtp.layers.0.self_attn.k_proj\": null,"
	      " \"mtp.layers.0.self_attn.v_proj\": null, \"mtp.layers.0.self_attn.o_proj\": null,"
	      " \"mtp.layers.0.mlp.gate\": null, \"mtp.layers.0.mlp.gate_proj\": null,"
	      " \"mtp.layers.0.mlp.up_proj\": null, \"mtp.layers.0.mlp.down_proj\": null,"
	      " \"mtp.layers.0.self_attn.q_b_proj\": null, \"mtp.layers.0.mlp.shared_expert.down_proj\": null}");
	assert_int_equal(plan.n, N_HEAD);
	fg_plan_release(&plan);
}

static void test_explicit(void **state)
{
	struct fg_plan plan;
	static const char *const linears[] = {
		"mtp.layers.0.self_attn.q_proj.weight", "mtp.layers.0.self_attn.v_proj.weight",
		"mtp.layers.0.self_attn.o_proj.weight", "mtp.layers.0.mlp.gate_proj.weight",
		"mtp.layers.0.mlp.up_proj.weight",      "mtp.layers.0.mlp.down_proj.weight",
	};

	(void)state;
	/* An explicit policy ignores the backbone: every head linear of the family's list that fits. */
	apply("affine:4:64", plain_backbone, &plan,
	      "{\"mtp.fc\": null,"
	      " \"mtp.layers.0.self_attn.q_proj\": {\"bits\": 4, \"group_size\": 64, \"mode\": \"affine\"},"
	      " \"mtp.layers.0.self_attn.k_proj\": null,"
	      " \"mtp.layers.0.self_attn.v_proj\": {\"bits\": 4, \"group_size\": 64, \"mode\": \"affine\"},"
	      " \"mtp.layers.0.self_attn.o_proj\": {\"bits\": 4, \"group_size\": 64, \"mode\": \"affine\"},"
	      " \"mtp.layers.0.mlp.gate\": null,"
	      " \"mtp.layers.0.mlp.gate_proj\": {\"bits\": 4, \"group_size\": 64, \"mode\": \"affine\"},"
	      " \"mtp.layers.0.mlp.up_proj\": {\"bits\": 4, \"group_size\": 64, \"mode\": \"affine\"},"
	      " \"mtp.layers.0.mlp.down_proj\": {\"bits\": 4, \"group_size\": 64, \"mode\": \"affine\"},"
	      " \"mtp.layers.0.self_attn.q_b_proj\": null, \"mtp.layers.0.mlp.shared_expert.down_proj\": null}");
	for (size_t i = 0; i < sizeof(linears) / sizeof(linears[0]); i++)
		expect_quant(&plan, linears[i], 4, 64, 0);
	expect_quant(&plan, "mtp.fc.weight", 0, 0, 0);
	expect_quant(&plan, "mtp.layers.0.mlp.gate.weight", 0, 0, 0);
	expect_quant(&plan, "mtp.layers.0.self_attn.k_proj.weight", 0, 0, 0);
	expect_quant(&plan, "mtp.layers.0.self_attn.q_b_proj.weight", 0, 0, 0);
	assert_int_equal(plan.n, N_HEAD + 6 * 3);
	fg_plan_release(&plan);

	/* mxfp4 groups of 32 fit k_proj's 96 columns. */
	apply("mxfp4", backbone, &plan,
	      "{\"mtp.fc\": null,"
	      " \"mtp.layers.0.self_attn.q_proj\": {\"bits\": 4, \"group_size\": 32, \"mode\": \"mxfp4\"},"
	      " \"mtp.layers.0.self_attn.k_proj\": {\"bits\": 4, \"group_size\": 32, \"mode\": \"mxfp4\"},"
	      " \"mtp.layers.0.self_attn.v_proj\": {\"bits\": 4, \"group_size\": 32, \"mode\": \"mxfp4\"},"
	      " \"mtp.layers.0.self_attn.o_proj\": {\"bits\": 4, \"group_size\": 32, \"mode\": \"mxfp4\"},"
	      " \"mtp.layers.0.mlp.gate\": null,"
	      " \"mtp.layers.0.mlp.gate_proj\": {\"bits\": 4, \"group_size\": 32, \"mode\": \"mxfp4\"},"
	      " \"mtp.layers.0.mlp.up_proj\": {\"bits\": 4, \"group_size\": 32, \"mode\": \"mxfp4\"},"
	      " \"mtp.layers.0.mlp.down_proj\": {\"bits\": 4, \"group_size\": 32, \"mode\": \"mxfp4\"},"
	      " \"mtp.layers.0.self_attn.q_b_proj\": null, \"mtp.layers.0.mlp.shared_expert.down_proj\": null}");
	expect_quant(&plan, "mtp.layers.0.self_attn.k_proj.weight", 4, 32, 1);
	expect_quant(&plan, "mtp.layers.0.mlp.down_proj.weight", 4, 32, 1);
	expect_quant(&plan, "mtp.layers.0.mlp.shared_expert.down_proj.weight", 0, 0, 0);
	assert_int_equal(plan.n, N_HEAD + 7 * 2);
	fg_plan_release(&plan);
}

static void test_already_quantized_and_owned_arrays(void **state)
{
	static const uint64_t shape[2] = { 64, 16 };
	struct fg_tensor scales, packed;
	struct fg_plan plan;
	struct fg_policy policy;
	struct fg_err err = { 0 };
	struct fg_plan_entry *o;
	const struct fg_tensor **srcs;

	(void)state;
	memset(&scales, 0, sizeof(scales));
	scales.name = "mtp.layers.0.self_attn.q_proj.scales";
	scales.dtype = FG_DT_BF16;
	packed = scales;
	packed.name = "mtp.layers.0.self_attn.q_proj.weight";
	packed.dtype = FG_DT_U32;
	assert_int_equal(fg_policy_parse("affine:4:64", &policy, &err), 0);
	/* A head that is already quantized: by its .scales, or by a U32 weight. */
	head_plan(&plan);
	plan.t[3].src = &scales;
	assert_int_equal(fg_policy_apply(&plan, &policy, backbone, NULL, &err), FG_EUSAGE);
	assert_non_null(strstr(err.msg, "the head is already quantized ('mtp.layers.0.self_attn.q_proj.scales')"));
	assert_int_equal(plan.n, N_HEAD); /* untouched */
	fg_plan_release(&plan);
	head_plan(&plan);
	plan.t[2].src = &packed;
	plan.t[2].rank = 2;
	memcpy(plan.t[2].shape, shape, sizeof(shape));
	assert_int_equal(fg_policy_apply(&plan, &policy, backbone, NULL, &err), FG_EUSAGE);
	fg_plan_release(&plan);

	/* A stacked entry's arrays move to the new plan, owned once (release frees them once). */
	head_plan(&plan);
	o = fg_plan_add(&plan, "mtp.layers.0.mlp.switch_mlp.gate_proj.weight", &err);
	assert_non_null(o);
	o->op = FG_OP_STACK;
	o->dtype = FG_DT_BF16;
	o->rank = 3;
	o->shape[0] = 2;
	o->shape[1] = 64;
	o->shape[2] = 128;
	srcs = calloc(2, sizeof(*srcs));
	assert_non_null(srcs);
	o->srcs = srcs;
	o->scale_invs = calloc(2, sizeof(*o->scale_invs));
	o->n_srcs = 2;
	assert_int_equal(fg_policy_apply(&plan, &policy, backbone, NULL, &err), 0);
	o = NULL;
	for (size_t i = 0; i < plan.n; i++)
		if (strcmp(plan.t[i].name, "mtp.layers.0.mlp.switch_mlp.gate_proj.weight") == 0 && plan.t[i].op == FG_OP_STACK)
			o = &plan.t[i];
	assert_non_null(o);
	assert_ptr_equal(o->srcs, srcs);
	/* A rank-3 stack is quantized too: parts keep the expert axis. */
	assert_true(o->hidden);
	assert_int_equal(o[1].rank, 3);
	assert_int_equal(o[1].shape[2], 128 * 4 / 32);
	fg_plan_release(&plan);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_keep),
		cmocka_unit_test(test_match),
		cmocka_unit_test(test_explicit),
		cmocka_unit_test(test_already_quantized_and_owned_arrays),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
