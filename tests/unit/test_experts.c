/*
 * test_experts.c: routed-expert layouts of MoE heads (experts.c) against
 * docs/domain.md section 1: numbered, fused "linear" ([E,2I,H] + [E,H,I]) and
 * fused "bmm" ([E,H,2I] + [E,I,H]), decided from shapes against the config;
 * a tensor that fits both layouts (2I == H) or neither is refused, never
 * guessed.  Only names and shapes matter, so tensors carry no data.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "forge/model/experts.h"
#include "tests/unit/support.h"

#define HEAD "mtp.layers.0.mlp.experts."

/* A header-only BF16 tensor called name of shape [d0, d1, d2] (d2 == 0: rank 2). */
static const struct fg_tensor *add(struct bench *b, const char *name, uint64_t d0, uint64_t d1,
				   uint64_t d2)
{
	return bench_shape(b, name, FG_DT_BF16, d0, d1, d2);
}

/* Scan b's set into b->blocks (at most max); the number of blocks found. */
static size_t scan(struct bench *b, const struct fg_expert_dims *d, size_t max)
{
	struct fg_err err = { 0 };

	fg_experts_release(b->blocks, b->n_blocks);
	b->n_blocks = 0;
	memset(b->blocks, 0, sizeof(b->blocks));
	assert_int_equal(fg_experts_scan(&b->set, d, b->blocks, max, &b->n_blocks, &err), 0);
	return b->n_blocks;
}

/* Scan b with H, I, E and expect exactly one block (valid until the next scan). */
static struct fg_expert_block scan_one(struct bench *b, int64_t h, int64_t i, int64_t e)
{
	struct fg_expert_dims d = { h, i, e };

	assert_int_equal(scan(b, &d, 4), 1);
	return b->blocks[0];
}

/* H = 64, I = 16, E = 4 unless a test says otherwise. */
static void test_fused_linear(void **state)
{
	struct bench *b;
	struct fg_expert_block blk;
	const struct fg_tensor *gu, *dn;

	(void)state;
	b = bench_new("mtp", "mtp.safetensors");
	add(b, "mtp.layers.0.mlp.gate.weight", 4, 64, 0);
	gu = add(b, HEAD "gate_up_proj", 4, 32, 64);
	dn = add(b, HEAD "down_proj", 4, 64, 16);
	blk = scan_one(b, 64, 16, 4);
	assert_string_equal(blk.prefix, HEAD);
	assert_int_equal(blk.layout, FG_EXPERTS_FUSED_LINEAR);
	assert_string_equal(fg_expert_layout_name(blk.layout), "fused_linear");
	assert_ptr_equal(blk.gate_up, gu);
	assert_ptr_equal(blk.down, dn);
	assert_int_equal(blk.n_experts, 4);
	/* I unknown: H alone still decides. */
	blk = scan_one(b, 64, -1, -1);
	assert_int_equal(blk.layout, FG_EXPERTS_FUSED_LINEAR);
	fg_tset_release(&b->set);
}

static void test_fused_bmm(void **state)
{
	struct bench *b;
	struct fg_expert_block blk;

	(void)state;
	b = bench_new("mtp", "mtp.safetensors");
	add(b, "model.mtp.layers.0.mlp.experts.down_proj", 4, 16, 64);
	add(b, "model.mtp.layers.0.mlp.experts.gate_up_proj", 4, 64, 32);
	blk = scan_one(b, 64, 16, 4);
	assert_string_equal(blk.prefix, "model.mtp.layers.0.mlp.experts.");
	assert_int_equal(blk.layout, FG_EXPERTS_FUSED_BMM);
	assert_int_equal(blk.n_experts, 4);
	blk = scan_one(b, 64, -1, -1);
	assert_int_equal(blk.layout, FG_EXPERTS_FUSED_BMM);
	fg_tset_release(&b->set);
}

static void test_fused_ambiguous(void **state)
{
	struct bench *b;
	struct fg_expert_block blk;

	(void)state;
	/* 2I == H: gate_up [4, 64, 64] reads the same both ways. */
	b = bench_new("mtp", "mtp.safetensors");
	add(b, HEAD "gate_up_proj", 4, 64, 64);
	add(b, HEAD "down_proj", 4, 64, 32);
	blk = scan_one(b, 64, 32, 4);
	assert_int_equal(blk.layout, FG_EXPERTS_AMBIGUOUS);
	assert_true(strlen(blk.why) > 0);
	/* Without I the config cannot break the tie either. */
	blk = scan_one(b, 64, -1, -1);
	assert_int_equal(blk.layout, FG_EXPERTS_AMBIGUOUS);
	fg_tset_release(&b->set);
}

static void test_fused_invalid(void **state)
{
	struct bench *b;
	struct fg_expert_block blk;

	(void)state;
	/* Shapes that fit neither layout with H = 64. */
	b = bench_new("mtp", "mtp.safetensors");
	add(b, HEAD "gate_up_proj", 4, 48, 40);
	add(b, HEAD "down_proj", 4, 40, 24);
	blk = scan_one(b, 64, 24, 4);
	assert_int_equal(blk.layout, FG_EXPERTS_INVALID);
	assert_true(strlen(blk.why) > 0);
	fg_tset_release(&b->set);

	/*
	 * Without I and E in the config, gate_up (bmm, 2I = 256) and down
	 * ([E, I, H] with I = 512) disagree on I: refused, not copied with the
	 * wrong shape.
	 */
	b = bench_new("mtp", "mtp.safetensors");
	add(b, HEAD "gate_up_proj", 4, 64, 256);
	add(b, HEAD "down_proj", 4, 512, 64);
	blk = scan_one(b, 64, -1, -1);
	assert_int_equal(blk.layout, FG_EXPERTS_INVALID);
	fg_tset_release(&b->set);

	/* And on E. */
	b = bench_new("mtp", "mtp.safetensors");
	add(b, HEAD "gate_up_proj", 4, 32, 64);
	add(b, HEAD "down_proj", 8, 64, 16);
	blk = scan_one(b, 64, -1, -1);
	assert_int_equal(blk.layout, FG_EXPERTS_INVALID);
	fg_tset_release(&b->set);

	/* Each fits one layout, but not the same one. */
	b = bench_new("mtp", "mtp.safetensors");
	add(b, HEAD "gate_up_proj", 4, 32, 64); /* linear */
	add(b, HEAD "down_proj", 4, 16, 64);    /* bmm */
	blk = scan_one(b, 64, 16, 4);
	assert_int_equal(blk.layout, FG_EXPERTS_INVALID);
	fg_tset_release(&b->set);

	/* The expert count disagrees with the config's. */
	b = bench_new("mtp", "mtp.safetensors");
	add(b, HEAD "gate_up_proj", 8, 32, 64);
	add(b, HEAD "down_proj", 8, 64, 16);
	blk = scan_one(b, 64, 16, 4);
	assert_int_equal(blk.layout, FG_EXPERTS_INVALID);
	/* ... and is fine when it agrees. */
	blk = scan_one(b, 64, 16, 8);
	assert_int_equal(blk.layout, FG_EXPERTS_FUSED_LINEAR);
	/* No hidden size: nothing to decide from, refuse. */
	blk = scan_one(b, -1, 16, 8);
	assert_int_equal(blk.layout, FG_EXPERTS_INVALID);
	fg_tset_release(&b->set);

	/* gate_up without down. */
	b = bench_new("mtp", "mtp.safetensors");
	add(b, HEAD "gate_up_proj", 4, 32, 64);
	blk = scan_one(b, 64, 16, 4);
	assert_int_equal(blk.layout, FG_EXPERTS_INVALID);
	assert_non_null(strstr(blk.why, "down_proj"));
	fg_tset_release(&b->set);

	/* down without gate_up. */
	b = bench_new("mtp", "mtp.safetensors");
	add(b, HEAD "down_proj", 4, 64, 16);
	blk = scan_one(b, 64, 16, 4);
	assert_int_equal(blk.layout, FG_EXPERTS_INVALID);
	fg_tset_release(&b->set);
}

/* Add the numbered experts 0..e-1 of prefix (gate, up, down), leaving out skip (or -1). */
static void add_numbered(struct bench *b, const char *prefix, int e, int skip, const char *suffix)
{
	static const char *const proj[] = { "gate_proj", "up_proj", "down_proj" };
	char name[96];
	int k = 0;

	for (int i = 0; i < e; i++)
		for (int p = 0; p < 3; p++, k++) {
			if (k == skip)
				continue;
			snprintf(name, sizeof(name), "%s%d.%s.%s", prefix, i, proj[p], suffix);
			add(b, name, p == 2 ? 64 : 16, p == 2 ? 16 : 64, 0);
		}
}

static void test_numbered(void **state)
{
	struct bench *b;
	struct fg_expert_block blk;

	(void)state;
	b = bench_new("mtp", "mtp.safetensors");
	add_numbered(b, HEAD, 4, -1, "weight");
	blk = scan_one(b, 64, 16, 4);
	assert_int_equal(blk.layout, FG_EXPERTS_NUMBERED);
	assert_int_equal(blk.n_numbered, 12);
	assert_string_equal(blk.prefix, HEAD);
	/* Without an expert count, the numbers 0..3 themselves are complete. */
	blk = scan_one(b, 64, 16, -1);
	assert_int_equal(blk.layout, FG_EXPERTS_NUMBERED);
	/* FP8 block scales beside each weight are not experts. */
	add_numbered(b, HEAD, 4, -1, "weight_scale_inv");
	blk = scan_one(b, 64, 16, 4);
	assert_int_equal(blk.layout, FG_EXPERTS_NUMBERED);
	assert_int_equal(blk.n_numbered, 12);
	fg_tset_release(&b->set);

	/*
	 * Expert 0 missing and no count in the config: numbers 1..4 leave a hole,
	 * refused rather than stacked without it (experts are never dropped).
	 */
	b = bench_new("mtp", "mtp.safetensors");
	for (int e = 1; e <= 4; e++) {
		static const char *const projs[] = { "gate_proj", "up_proj", "down_proj" };

		for (int p = 0; p < 3; p++) {
			char name[96];

			snprintf(name, sizeof(name), HEAD "%d.%s.weight", e, projs[p]);
			add(b, name, p == 2 ? 64 : 16, p == 2 ? 16 : 64, 0);
		}
	}
	blk = scan_one(b, 64, 16, -1);
	assert_int_equal(blk.layout, FG_EXPERTS_INVALID);
	assert_int_equal(blk.max_index, 4);
	fg_tset_release(&b->set);

	/*
	 * Quantized experts are numbered too (issue 12: a compressed-tensors MoE head was refused as
	 * "0 numbered expert tensors"): one carrier per projection, its companions not counted.
	 */
	{
		static const char *const formats[][5] = {
			{ "weight_packed", "weight_scale", "weight_shape", "weight_zero_point", NULL },
			{ "qweight", "qzeros", "scales", "g_idx", NULL },
			{ "weight", "scales", "biases", NULL, NULL },
			{ "weight", "weight_scale", "weight_scale_2", "input_scale", NULL },
		};

		for (size_t f = 0; f < sizeof(formats) / sizeof(formats[0]); f++) {
			b = bench_new("mtp", "mtp.safetensors");
			for (size_t k = 0; k < 5 && formats[f][k]; k++)
				add_numbered(b, HEAD, 4, -1, formats[f][k]);
			blk = scan_one(b, 64, 16, 4);
			if (blk.layout != FG_EXPERTS_NUMBERED || blk.n_numbered != 12)
				fail_msg("%s experts: layout %d, %zu numbered (%s)", formats[f][0], (int)blk.layout,
					 blk.n_numbered, blk.why);
			fg_tset_release(&b->set);
		}
	}

	/* One tensor missing: 11 of 12, refused, and the reason says how many. */
	b = bench_new("mtp", "mtp.safetensors");
	add_numbered(b, HEAD, 4, 7, "weight");
	blk = scan_one(b, 64, 16, 4);
	assert_int_equal(blk.layout, FG_EXPERTS_INVALID);
	assert_int_equal(blk.n_numbered, 11);
	assert_non_null(strstr(blk.why, "11"));
	fg_tset_release(&b->set);
}

static void test_fused_with_scale_companions(void **state)
{
	struct bench *b;
	struct fg_expert_block blk;
	const struct fg_tensor *gu, *dn;

	(void)state;
	/*
	 * FP8 sources store `<name>_scale_inv` block scales (128x128 blocks)
	 * beside each weight.  They are not the fused experts: the layout is
	 * still decided by gate_up_proj and down_proj themselves.
	 *
	 * A scan that matched "gate_up_proj" / "down_proj" as prefixes would
	 * let a later "gate_up_proj_scale_inv" replace the weight as the
	 * block's gate_up and judge the block on the scales' shape
	 * (forge/model/experts.c matches exact names).
	 */
	b = bench_new("mtp", "mtp.safetensors");
	gu = add(b, HEAD "gate_up_proj", 4, 256, 512);
	dn = add(b, HEAD "down_proj", 4, 512, 128);
	add(b, HEAD "gate_up_proj_scale_inv", 4, 2, 4);
	add(b, HEAD "down_proj_scale_inv", 4, 4, 1);
	blk = scan_one(b, 512, 128, 4);
	assert_ptr_equal(blk.gate_up, gu);
	assert_ptr_equal(blk.down, dn);
	assert_int_equal(blk.layout, FG_EXPERTS_FUSED_LINEAR);
	fg_tset_release(&b->set);
}

static void test_blocks(void **state)
{
	struct bench *b;
	struct fg_expert_dims d = { 64, 16, 4 };

	(void)state;
	b = bench_new("mtp", "mtp.safetensors");
	/* Two blocks: a trunk layer's numbered experts and the head's fused ones. */
	add_numbered(b, "model.layers.3.mlp.experts.", 4, -1, "weight");
	add(b, HEAD "gate_up_proj", 4, 32, 64);
	add(b, HEAD "down_proj", 4, 64, 16);
	/* Shared experts and the router are not routed experts. */
	add(b, "model.layers.3.mlp.shared_experts.gate_proj.weight", 16, 64, 0);
	add(b, "model.layers.3.mlp.shared_expert_gate.weight", 1, 64, 0);
	add(b, "model.layers.3.mlp.gate.weight", 4, 64, 0);
	assert_int_equal(scan(b, &d, 4), 2);
	assert_string_equal(b->blocks[0].prefix, "model.layers.3.mlp.experts.");
	assert_int_equal(b->blocks[0].layout, FG_EXPERTS_NUMBERED);
	assert_int_equal(b->blocks[0].n_numbered, 12);
	assert_string_equal(b->blocks[1].prefix, HEAD);
	assert_int_equal(b->blocks[1].layout, FG_EXPERTS_FUSED_LINEAR);
	/* At most max blocks are written. */
	assert_int_equal(scan(b, &d, 1), 1);
	assert_string_equal(b->blocks[0].prefix, "model.layers.3.mlp.experts.");
	assert_null(b->blocks[1].prefix);
	fg_tset_release(&b->set);

	/* No experts at all. */
	b = bench_new("mtp", "mtp.safetensors");
	add(b, "mtp.fc.weight", 64, 128, 0);
	assert_int_equal(scan(b, &d, 4), 0);
	fg_tset_release(&b->set);
}

/* A prefix of any length is kept whole: a cut one would match other blocks' tensors, or none. */
static void test_long_prefix(void **state)
{
	struct bench *b;
	struct fg_expert_dims d = { 64, 16, 4 };
	char prefix[260], gu[300], dn[300];

	(void)state;
	memset(prefix, 'p', sizeof(prefix));
	snprintf(prefix + 220, sizeof(prefix) - 220, ".mlp.experts.");
	snprintf(gu, sizeof(gu), "%sgate_up_proj", prefix);
	snprintf(dn, sizeof(dn), "%sdown_proj", prefix);
	b = bench_new("mtp", "mtp.safetensors");
	add(b, gu, 4, 32, 64);
	add(b, dn, 4, 64, 16);
	assert_int_equal(scan(b, &d, 4), 1);
	assert_string_equal(b->blocks[0].prefix, prefix);
	assert_int_equal(strlen(b->blocks[0].prefix), 233);
	assert_int_equal(b->blocks[0].layout, FG_EXPERTS_FUSED_LINEAR);
	assert_string_equal(b->blocks[0].gate_up->name, gu);
	fg_tset_release(&b->set);
}

static void test_dims(void **state)
{
	struct fg_expert_dims d;
	cJSON *cfg;

	(void)state;
	/* Qwen3.5 MoE (merged text_config keys). */
	cfg = cJSON_Parse("{\"hidden_size\": 2048, \"moe_intermediate_size\": 512, \"num_experts\": 256}");
	assert_non_null(cfg);
	fg_experts_dims(cfg, &d);
	assert_int_equal(d.hidden, 2048);
	assert_int_equal(d.intermediate, 512);
	assert_int_equal(d.experts, 256);
	cJSON_Delete(cfg);
	/* DeepSeek-V3 / GLM name the count n_routed_experts. */
	cfg = cJSON_Parse("{\"hidden_size\": 7168, \"moe_intermediate_size\": 2048, \"n_routed_experts\": 256}");
	assert_non_null(cfg);
	fg_experts_dims(cfg, &d);
	assert_int_equal(d.hidden, 7168);
	assert_int_equal(d.intermediate, 2048);
	assert_int_equal(d.experts, 256);
	cJSON_Delete(cfg);
	/* Missing or nonsensical values are unknown. */
	cfg = cJSON_Parse("{\"hidden_size\": \"2048\", \"moe_intermediate_size\": -1, \"intermediate_size\": 9}");
	assert_non_null(cfg);
	d.hidden = d.intermediate = d.experts = 5;
	fg_experts_dims(cfg, &d);
	assert_int_equal(d.hidden, -1);
	assert_int_equal(d.intermediate, -1);
	assert_int_equal(d.experts, -1);
	cJSON_Delete(cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_fused_linear, bench_release),
		cmocka_unit_test_teardown(test_fused_bmm, bench_release),
		cmocka_unit_test_teardown(test_fused_ambiguous, bench_release),
		cmocka_unit_test_teardown(test_fused_invalid, bench_release),
		cmocka_unit_test_teardown(test_numbered, bench_release),
		cmocka_unit_test_teardown(test_fused_with_scale_companions, bench_release),
		cmocka_unit_test_teardown(test_blocks, bench_release),
		cmocka_unit_test_teardown(test_long_prefix, bench_release),
		cmocka_unit_test_teardown(test_dims, bench_release),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
