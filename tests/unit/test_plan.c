/*
 * test_plan.c: forge/artifact/plan.c, each FG_OP_* operation materialized
 * from small hand-made source tensors whose expected outputs are written
 * out by hand:
 *
 *   VIEW       the source bytes
 *   SHIFT      F32(source) + 1 (or - 1), bit for bit, from F32, BF16, F16
 *   FP8        E4M3 x 128x128 block scales, rounded to BF16, across block
 *              rows, block columns and the 256-row bands, F32 and BF16 grids
 *   STACK      numbered experts on a new first axis (FP8 experts dequantized)
 *   SPLIT      a half of a fused [E, 2I, H] gate_up
 *   SPLIT_T    a half of a fused [E, H, 2I] gate_up, transposed to [E, I, H]
 *   TRANSPOSE  a fused [E, I, H] down to [E, H, I]
 *   QUANT      the weight/scales/biases siblings of a policy-quantized entry,
 *              equal to quantizing the source directly, in any order
 *
 * and fg_plan_build on small checkpoints written with support.c's shard
 * writer: which operation each head tensor gets, in which direction norms
 * shift for MLX and Hugging Face targets, and the refusals.
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

#include "forge/artifact/plan.h"
#include "forge/artifact/policy.h"
#include "forge/format/quant/quant.h"
#include "tests/unit/support.h"

static char tmp[PATH_MAX];

static int setup(void **state)
{
	(void)state;
	tmpdir_new(tmp, sizeof(tmp), "plan");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return rm_tree(tmp);
}

/* A source tensor of dt and shape over data (borrowed). */
static struct fg_tensor src(const char *name, enum fg_dtype dt, int rank, const uint64_t *shape, const void *data)
{
	struct fg_tensor t;

	memset(&t, 0, sizeof(t));
	t.name = name;
	t.dtype = dt;
	t.rank = (unsigned)rank & 7u;
	t.shape = test_shape();
	for (int i = 0; i < rank; i++)
		TSHAPE(t)[i] = shape[i];
	t.data = data;
	return t;
}

/* A hand-made plan entry (outside any plan) with op, output dtype and shape. */
static struct fg_plan_entry entry(enum fg_plan_op op, enum fg_dtype dt, int rank, const uint64_t *shape,
				  const struct fg_tensor *from)
{
	static char out_name[] = "out";
	struct fg_plan_entry o;

	memset(&o, 0, sizeof(o));
	o.name = out_name;
	o.op = op;
	o.dtype = dt;
	o.rank = rank;
	memcpy(o.shape, shape, (size_t)rank * sizeof(uint64_t));
	o.src = from;
	return o;
}

/* Materialize o (into a buffer of exactly its size) and compare with want. */
static void expect_bytes(const struct fg_plan_entry *o, const void *want, size_t want_len)
{
	struct fg_plan plan;
	struct fg_err err = { 0 };
	uint8_t *buf;

	memset(&plan, 0, sizeof(plan));
	assert_int_equal(fg_plan_entry_bytes(o), want_len);
	buf = malloc(want_len);
	assert_non_null(buf);
	if (fg_plan_materialize(&plan, o, buf, &err) != 0)
		fail_msg("materializing op %d: %s", o->op, err.msg);
	assert_memory_equal(buf, want, want_len);
	free(buf);
}

static void test_view(void **state)
{
	static const uint16_t v[6] = { 1, 2, 3, 4, 5, 6 };
	static const uint64_t shape[2] = { 2, 3 };
	struct fg_tensor t = src("w", FG_DT_BF16, 2, shape, v);
	struct fg_plan_entry o = entry(FG_OP_VIEW, FG_DT_BF16, 2, shape, &t);

	(void)state;
	expect_bytes(&o, v, sizeof(v));
}

static void test_shift(void **state)
{
	/* BF16 0.25, -0.5, 2^-8, 0 plus one: 1.25, 0.5, 1.00390625, 1.0 in F32. */
	static const uint16_t bf[4] = { 0x3e80, 0xbf00, 0x3b80, 0x0000 };
	static const uint32_t bf_plus[4] = { 0x3fa00000, 0x3f000000, 0x3f808000, 0x3f800000 };
	/* F16 0.25 and 2^-7 plus one: 1.25, 1.0078125. */
	static const uint16_t h[2] = { 0x3400, 0x2000 };
	static const uint32_t h_plus[2] = { 0x3fa00000, 0x3f810000 };
	/*
	 * F32 2^-24 + 1 is a tie between 1 and 1 + 2^-23: even, so 1.0; 2^-23 + 1
	 * is exactly 1 + 2^-23.  F32 arithmetic, never a round trip through BF16.
	 */
	static const uint32_t f[2] = { 0x33800000, 0x34000000 };
	static const uint32_t f_plus[2] = { 0x3f800000, 0x3f800001 };
	/* Minus one: 1.25, 0.5, 1.0, 2.0 become 0.25, -0.5, 0, 1.0. */
	static const float g[4] = { 1.25f, 0.5f, 1.0f, 2.0f };
	static const uint32_t g_minus[4] = { 0x3e800000, 0xbf000000, 0x00000000, 0x3f800000 };
	uint64_t n;
	struct fg_tensor t;
	struct fg_plan_entry o;

	(void)state;
	n = 4;
	t = src("mtp.norm.weight", FG_DT_BF16, 1, &n, bf);
	o = entry(FG_OP_SHIFT, FG_DT_F32, 1, &n, &t);
	o.shift = 1.0f;
	expect_bytes(&o, bf_plus, sizeof(bf_plus));
	n = 2;
	t = src("mtp.norm.weight", FG_DT_F16, 1, &n, h);
	o = entry(FG_OP_SHIFT, FG_DT_F32, 1, &n, &t);
	o.shift = 1.0f;
	expect_bytes(&o, h_plus, sizeof(h_plus));
	t = src("mtp.norm.weight", FG_DT_F32, 1, &n, f);
	o = entry(FG_OP_SHIFT, FG_DT_F32, 1, &n, &t);
	o.shift = 1.0f;
	expect_bytes(&o, f_plus, sizeof(f_plus));
	n = 4;
	t = src("mtp.norm.weight", FG_DT_F32, 1, &n, g);
	o = entry(FG_OP_SHIFT, FG_DT_F32, 1, &n, &t);
	o.shift = -1.0f;
	expect_bytes(&o, g_minus, sizeof(g_minus));
}

static void test_shift_long(void **state)
{
	/* More than the 4096-element chunk: F16 (i % 7) / 8, each + 1 exactly. */
	enum { N = 5000 };
	uint16_t *h = malloc(N * sizeof(uint16_t));
	float *want = malloc(N * sizeof(float));
	static const uint16_t eighths[7] = { 0x0000, 0x3000, 0x3400, 0x3600, 0x3800, 0x3900, 0x3a00 };
	uint64_t n = N;
	struct fg_tensor t;
	struct fg_plan_entry o;

	(void)state;
	assert_non_null(h);
	assert_non_null(want);
	for (size_t i = 0; i < N; i++) {
		h[i] = eighths[i % 7];
		want[i] = 1.0f + (float)(i % 7) / 8.0f;
	}
	t = src("mtp.layers.0.input_layernorm.weight", FG_DT_F16, 1, &n, h);
	o = entry(FG_OP_SHIFT, FG_DT_F32, 1, &n, &t);
	o.shift = 1.0f;
	expect_bytes(&o, want, N * sizeof(float));
	free(h);
	free(want);
}

static void test_fp8(void **state)
{
	/*
	 * E4M3 1, 2, -1, 0.5, -0, 2^-9 (the smallest subnormal) times 2.0: BF16
	 * 2, 4, -2, 1, -0, 2^-8.
	 */
	static const uint8_t w[6] = { 0x38, 0x40, 0xb8, 0x30, 0x80, 0x01 };
	static const float s1[1] = { 2.0f };
	static const uint16_t want1[6] = { 0x4000, 0x4080, 0xc000, 0x3f80, 0x8000, 0x3b80 };
	static const uint64_t shape1[2] = { 2, 3 }, sshape1[2] = { 1, 1 };
	/* [2, 130] of 1.0 with block-column scales 2 and 0.5: columns 128 and 129 are in the second block. */
	static const float s2[2] = { 2.0f, 0.5f };
	static const uint64_t shape2[2] = { 2, 130 }, sshape2[2] = { 1, 2 };
	/* [300, 2] of 1.0 with block-row scales 1, 2, 4 given as BF16: rows 128.. and 256.. (the second band). */
	static const uint16_t s3[3] = { 0x3f80, 0x4000, 0x4080 };
	static const uint64_t shape3[2] = { 300, 2 }, sshape3[2] = { 3, 1 };
	uint8_t w2[260], w3[600];
	uint16_t want2[260], want3[600];
	struct fg_tensor t, s;
	struct fg_plan_entry o;

	(void)state;
	t = src("w", FG_DT_F8_E4M3, 2, shape1, w);
	s = src("w_scale_inv", FG_DT_F32, 2, sshape1, s1);
	o = entry(FG_OP_FP8, FG_DT_BF16, 2, shape1, &t);
	o.scale_inv = &s;
	expect_bytes(&o, want1, sizeof(want1));

	memset(w2, 0x38, sizeof(w2));
	for (size_t r = 0; r < 2; r++)
		for (size_t c = 0; c < 130; c++)
			want2[r * 130 + c] = c < 128 ? 0x4000 : 0x3f00;
	t = src("w", FG_DT_F8_E4M3, 2, shape2, w2);
	s = src("w_scale_inv", FG_DT_F32, 2, sshape2, s2);
	o = entry(FG_OP_FP8, FG_DT_BF16, 2, shape2, &t);
	o.scale_inv = &s;
	expect_bytes(&o, want2, sizeof(want2));

	memset(w3, 0x38, sizeof(w3));
	for (size_t r = 0; r < 300; r++)
		want3[2 * r] = want3[2 * r + 1] = r < 128 ? 0x3f80 : r < 256 ? 0x4000 : 0x4080;
	t = src("w", FG_DT_F8_E4M3, 2, shape3, w3);
	s = src("w_scale_inv", FG_DT_BF16, 2, sshape3, s3);
	o = entry(FG_OP_FP8, FG_DT_BF16, 2, shape3, &t);
	o.scale_inv = &s;
	expect_bytes(&o, want3, sizeof(want3));
}

static void test_stack(void **state)
{
	static const uint16_t e0[4] = { 0, 1, 2, 3 }, e1[4] = { 10, 11, 12, 13 }, e2[4] = { 20, 21, 22, 23 };
	static const uint16_t want[12] = { 0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23 };
	static const uint64_t piece[2] = { 2, 2 }, out[3] = { 3, 2, 2 };
	/* FP8 experts: [1, 2] of 1, 2 (scale 1) and 1, -1 (scale 4): BF16 1, 2, 4, -4. */
	static const uint8_t f0[2] = { 0x38, 0x40 }, f1[2] = { 0x38, 0xb8 };
	static const float sc0[1] = { 1.0f }, sc1[1] = { 4.0f };
	static const uint16_t fwant[4] = { 0x3f80, 0x4000, 0x4080, 0xc080 };
	static const uint64_t fpiece[2] = { 1, 2 }, fout[3] = { 2, 1, 2 }, one[2] = { 1, 1 };
	struct fg_tensor t[3], ft[2], fs[2];
	const struct fg_tensor *srcs[3], *scales[3] = { NULL, NULL, NULL };
	struct fg_plan_entry o;

	(void)state;
	t[0] = src("e.0", FG_DT_BF16, 2, piece, e0);
	t[1] = src("e.1", FG_DT_BF16, 2, piece, e1);
	t[2] = src("e.2", FG_DT_BF16, 2, piece, e2);
	for (int i = 0; i < 3; i++)
		srcs[i] = &t[i];
	o = entry(FG_OP_STACK, FG_DT_BF16, 3, out, NULL);
	o.srcs = srcs;
	o.scale_invs = scales;
	o.n_srcs = 3;
	expect_bytes(&o, want, sizeof(want));

	ft[0] = src("f.0", FG_DT_F8_E4M3, 2, fpiece, f0);
	ft[1] = src("f.1", FG_DT_F8_E4M3, 2, fpiece, f1);
	fs[0] = src("f.0_scale_inv", FG_DT_F32, 2, one, sc0);
	fs[1] = src("f.1_scale_inv", FG_DT_F32, 2, one, sc1);
	srcs[0] = &ft[0];
	srcs[1] = &ft[1];
	scales[0] = &fs[0];
	scales[1] = &fs[1];
	o = entry(FG_OP_STACK, FG_DT_BF16, 3, fout, NULL);
	o.srcs = srcs;
	o.scale_invs = scales;
	o.n_srcs = 2;
	expect_bytes(&o, fwant, sizeof(fwant));
}

/* Element [e][a][b] of an [E, A, B] source holds 100 e + 10 a + b. */
static void fill3(uint16_t *v, size_t E, size_t A, size_t B)
{
	for (size_t e = 0; e < E; e++)
		for (size_t a = 0; a < A; a++)
			for (size_t b = 0; b < B; b++)
				v[(e * A + a) * B + b] = (uint16_t)(100 * e + 10 * a + b);
}

static void test_split_and_transpose(void **state)
{
	/* Fused linear gate_up [E=2, 2I=4, H=3]: gate is rows 0-1 of each expert, up rows 2-3. */
	static const uint16_t gate[12] = { 0, 1, 2, 10, 11, 12, 100, 101, 102, 110, 111, 112 };
	static const uint16_t up[12] = { 20, 21, 22, 30, 31, 32, 120, 121, 122, 130, 131, 132 };
	/* Fused bmm gate_up [E=2, H=3, 2I=4] to [E, I=2, H=3]: out[e][i][h] = src[e][h][half * 2 + i]. */
	static const uint16_t gate_t[12] = { 0, 10, 20, 1, 11, 21, 100, 110, 120, 101, 111, 121 };
	static const uint16_t up_t[12] = { 2, 12, 22, 3, 13, 23, 102, 112, 122, 103, 113, 123 };
	/* bmm down [E=2, I=2, H=3] to [E, H=3, I=2]: out[e][h][i] = src[e][i][h]. */
	static const uint16_t down_t[12] = { 0, 10, 1, 11, 2, 12, 100, 110, 101, 111, 102, 112 };
	static const uint64_t lin[3] = { 2, 4, 3 }, bmm[3] = { 2, 3, 4 }, down[3] = { 2, 2, 3 };
	static const uint64_t eih[3] = { 2, 2, 3 }, ehi[3] = { 2, 3, 2 };
	uint16_t v[24], d[12];
	struct fg_tensor t;
	struct fg_plan_entry o;

	(void)state;
	fill3(v, 2, 4, 3);
	t = src("gate_up_proj", FG_DT_BF16, 3, lin, v);
	o = entry(FG_OP_SPLIT, FG_DT_BF16, 3, eih, &t);
	o.half = 0;
	expect_bytes(&o, gate, sizeof(gate));
	o.half = 1;
	expect_bytes(&o, up, sizeof(up));

	fill3(v, 2, 3, 4);
	t = src("gate_up_proj", FG_DT_BF16, 3, bmm, v);
	o = entry(FG_OP_SPLIT_T, FG_DT_BF16, 3, eih, &t);
	o.half = 0;
	expect_bytes(&o, gate_t, sizeof(gate_t));
	o.half = 1;
	expect_bytes(&o, up_t, sizeof(up_t));

	fill3(d, 2, 2, 3);
	t = src("down_proj", FG_DT_BF16, 3, down, d);
	o = entry(FG_OP_TRANSPOSE, FG_DT_BF16, 3, ehi, &t);
	expect_bytes(&o, down_t, sizeof(down_t));
}

static void test_plan_add_and_errors(void **state)
{
	static const uint64_t shape[2] = { 4, 64 };
	struct fg_plan plan;
	struct fg_plan_entry *o, bad;
	struct fg_err err = { 0 };
	uint8_t buf[16];

	(void)state;
	memset(&plan, 0, sizeof(plan));
	for (int i = 0; i < 100; i++) {
		char name[32];

		snprintf(name, sizeof(name), "t%d", i);
		o = fg_plan_add(&plan, name, &err);
		assert_non_null(o);
		assert_int_equal(o->op, FG_OP_VIEW);
		assert_null(o->src);
	}
	assert_int_equal(plan.n, 100);
	assert_string_equal(plan.t[0].name, "t0");
	assert_string_equal(plan.t[99].name, "t99");
	/* A QUANT entry of a plan without its quantization cache is a bug, said so. */
	plan.t[0].dtype = FG_DT_BF16;
	plan.t[0].rank = 2;
	memcpy(plan.t[0].shape, shape, sizeof(shape));
	o = &plan.t[1];
	o->op = FG_OP_QUANT;
	o->base = 0;
	o->rank = 2;
	memcpy(o->shape, shape, sizeof(shape));
	assert_int_equal(fg_plan_materialize(&plan, o, buf, &err), FG_EINTERNAL);
	assert_non_null(strstr(err.msg, "no quantization cache"));
	fg_plan_release(&plan);
	assert_int_equal(plan.n, 0);
	assert_null(plan.t);
	fg_plan_release(NULL);
	/* An operation outside the enum. */
	bad = entry((enum fg_plan_op)99, FG_DT_U8, 2, shape, NULL);
	assert_int_equal(fg_plan_materialize(&plan, &bad, buf, &err), FG_EINTERNAL);
	/* MLX-style targets by their runtime rows. */
	assert_true(fg_target_is_mlx("mlx-lm-0.31"));
	assert_true(fg_target_is_mlx("mtplx-2.12"));
	assert_false(fg_target_is_mlx("hf"));
	assert_false(fg_target_is_mlx("ollama"));
	assert_false(fg_target_is_mlx("no-such-runtime"));
}

/* ---- plans built from checkpoints ---- */

/*
 * A Qwen3.5 checkpoint TMP/name: a delta trunk and an mtp.* head whose q/k
 * norms have mean qk and low-set norms mean low, a linear_attn.norm (never
 * shifted), a BF16 q_proj [4, 64] of small ramp values, and what flags add:
 * an E4M3 o_proj [2, 3] with (FP8) or without (FP8_NO_SCALES) its scale
 * grid; numbered experts 0 and 1 with BF16 [2, 3] projections (EXPERTS),
 * the second expert's up_proj transposed (EXPERTS_BAD_SHAPE).
 */
enum { FP8 = 1, FP8_NO_SCALES = 2, EXPERTS = 4, EXPERTS_BAD_SHAPE = 8 };

/* Expert e's projection p (0 gate, 1 up, 2 down) holds 100 e + 10 p + k. */
static void add_experts(struct shard *s, int bad_shape)
{
	static const char *const projs[] = { "gate_proj", "up_proj", "down_proj" };
	static const uint64_t shape[2] = { 2, 3 }, transposed[2] = { 3, 2 };
	char name[128];
	uint16_t v[6];

	for (int e = 0; e < 2; e++) {
		for (int p = 0; p < 3; p++) {
			for (int k = 0; k < 6; k++)
				v[k] = (uint16_t)(100 * e + 10 * p + k);
			snprintf(name, sizeof(name), "mtp.layers.0.mlp.experts.%d.%s.weight", e, projs[p]);
			shard_add(s, name, "BF16", 2, bad_shape && e == 1 && p == 1 ? transposed : shape, v);
		}
	}
}

static const char *head_ckpt(char *dir, size_t len, const char *name, float qk, float low, int flags)
{
	static const uint64_t q_shape[2] = { 4, 64 }, o_shape[2] = { 2, 3 }, s_shape[2] = { 1, 1 };
	static const uint8_t o_w[6] = { 0x38, 0x40, 0xb8, 0x30, 0x80, 0x01 };
	static const float o_s[1] = { 2.0f };
	uint16_t q[256];
	struct shard *s = shard_new();

	for (int i = 0; i < 256; i++)
		q[i] = (uint16_t)(0x3c00 + (i * 37) % 512); /* BF16 values in [2^-7, 2^-5) */
	make_dir(dir, len, tmp, name);
	write_text(dir, "config.json",
		   "{\"model_type\": \"qwen3_5\", \"num_hidden_layers\": 1, \"mtp_num_hidden_layers\": 1}");
	shard_norm(s, "model.layers.0.self_attn.q_norm.weight", 0.78f);
	shard_norm(s, "model.layers.0.self_attn.k_norm.weight", 0.76f);
	shard_norm(s, "model.layers.0.input_layernorm.weight", 0.3f);
	shard_norm(s, "model.norm.weight", 2.5f);
	shard_norm(s, "mtp.pre_fc_norm_embedding.weight", low);
	shard_norm(s, "mtp.layers.0.input_layernorm.weight", low);
	shard_norm(s, "mtp.layers.0.self_attn.q_norm.weight", qk);
	shard_norm(s, "mtp.layers.0.self_attn.k_norm.weight", qk);
	shard_norm(s, "mtp.layers.0.linear_attn.norm.weight", 1.0f);
	shard_norm(s, "mtp.norm.weight", 2.5f);
	shard_add(s, "mtp.layers.0.self_attn.q_proj.weight", "BF16", 2, q_shape, q);
	if (flags & (FP8 | FP8_NO_SCALES))
		shard_add(s, "mtp.layers.0.self_attn.o_proj.weight", "F8_E4M3", 2, o_shape, o_w);
	if (flags & FP8)
		shard_add(s, "mtp.layers.0.self_attn.o_proj.weight_scale_inv", "F32", 2, s_shape, o_s);
	if (flags & (EXPERTS | EXPERTS_BAD_SHAPE))
		add_experts(s, (flags & EXPERTS_BAD_SHAPE) != 0);
	shard_save(s, dir, "model.safetensors");
	return dir;
}

static struct fg_inspect *inspect_dir(const char *dir)
{
	struct fg_inspect *r = NULL;
	struct fg_err err = { 0 };

	if (fg_inspect_run(&r, dir, NULL, 0, &err) != 0)
		fail_msg("inspecting %s: %s", dir, err.msg);
	/* Inspection maps nothing; a plan's materialize reads mapped data, as forge maps it. */
	for (size_t i = 0; i < r->ckpt->n_files; i++)
		if (fg_ckpt_map_file(r->ckpt, i, &err) != 0)
			fail_msg("mapping %s: %s", r->ckpt->files[i].name, err.msg);
	return r;
}

static const struct fg_plan_entry *find_entry(const struct fg_plan *plan, const char *name)
{
	for (size_t i = 0; i < plan->n; i++)
		if (strcmp(plan->t[i].name, name) == 0)
			return &plan->t[i];
	fail_msg("the plan has no entry '%s'", name);
	return NULL;
}

static void test_build_shift_direction(void **state)
{
	char dir[PATH_MAX];
	struct fg_inspect *r;
	struct fg_plan plan;
	struct fg_err err = { 0 };
	const struct fg_plan_entry *o;

	(void)state;
	/* A delta head for an MLX target: every zero-centred norm + 1 in F32, names stripped to mtp.*. */
	r = inspect_dir(head_ckpt(dir, sizeof(dir), "delta", 0.78f, 0.3f, FP8));
	assert_int_equal(fg_plan_build(r, "mlx-lm-0.32", &plan, &err), 0);
	assert_int_equal(plan.source_conv, FG_CONV_DELTA);
	assert_int_equal(plan.target_conv, FG_CONV_ABSOLUTE);
	assert_int_equal(plan.n_shifted, 5);
	o = find_entry(&plan, "mtp.layers.0.self_attn.q_norm.weight");
	assert_int_equal(o->op, FG_OP_SHIFT);
	assert_true(o->shift == 1.0f);
	assert_int_equal(o->dtype, FG_DT_F32);
	assert_true(o->changed);
	assert_int_equal(find_entry(&plan, "mtp.norm.weight")->op, FG_OP_SHIFT);
	/* linear_attn.norm stores no offset: never shifted. */
	assert_int_equal(find_entry(&plan, "mtp.layers.0.linear_attn.norm.weight")->op, FG_OP_VIEW);
	o = find_entry(&plan, "mtp.layers.0.self_attn.q_proj.weight");
	assert_int_equal(o->op, FG_OP_VIEW);
	assert_false(o->changed);
	/* The FP8 weight is dequantized with its grid; the grid itself is no entry. */
	o = find_entry(&plan, "mtp.layers.0.self_attn.o_proj.weight");
	assert_int_equal(o->op, FG_OP_FP8);
	assert_int_equal(o->dtype, FG_DT_BF16);
	assert_non_null(o->scale_inv);
	assert_string_equal(o->scale_inv->name, "mtp.layers.0.self_attn.o_proj.weight_scale_inv");
	assert_int_equal(plan.n, 8);
	{
		/* The same bytes as test_fp8's first case. */
		static const uint16_t want[6] = { 0x4000, 0x4080, 0xc000, 0x3f80, 0x8000, 0x3b80 };
		uint16_t got[6];

		assert_int_equal(fg_plan_materialize(&plan, o, (uint8_t *)got, &err), 0);
		assert_memory_equal(got, want, sizeof(want));
	}
	fg_plan_release(&plan);
	/* The same head for Hugging Face (delta): nothing shifts. */
	assert_int_equal(fg_plan_build(r, "hf", &plan, &err), 0);
	assert_int_equal(plan.target_conv, FG_CONV_DELTA);
	assert_int_equal(plan.n_shifted, 0);
	assert_int_equal(find_entry(&plan, "mtp.layers.0.self_attn.q_norm.weight")->op, FG_OP_VIEW);
	fg_plan_release(&plan);
	fg_inspect_free(r);

	/* An absolute head for Hugging Face: - 1. */
	r = inspect_dir(head_ckpt(dir, sizeof(dir), "absolute", 1.78f, 0.97f, 0));
	assert_int_equal(fg_plan_build(r, "hf", &plan, &err), 0);
	assert_int_equal(plan.source_conv, FG_CONV_ABSOLUTE);
	assert_int_equal(plan.n_shifted, 5);
	o = find_entry(&plan, "mtp.layers.0.input_layernorm.weight");
	assert_int_equal(o->op, FG_OP_SHIFT);
	assert_true(o->shift == -1.0f);
	fg_plan_release(&plan);
	assert_int_equal(fg_plan_build(r, "mtplx-2.12", &plan, &err), 0);
	assert_int_equal(plan.n_shifted, 0);
	fg_plan_release(&plan);
	fg_inspect_free(r);
}

static void test_build_refusals(void **state)
{
	char dir[PATH_MAX];
	struct fg_inspect *r;
	struct fg_plan plan;
	struct fg_err err = { 0 };

	(void)state;
	/* A head already shifted twice: refused with inspect's verdict. */
	r = inspect_dir(head_ckpt(dir, sizeof(dir), "double", 2.79f, 1.97f, 0));
	assert_int_equal(fg_plan_build(r, "mlx-lm-0.32", &plan, &err), FG_EVERDICT);
	assert_int_equal(fg_err_refusal(&err), FG_V_HEAD_DOUBLE_SHIFTED);
	fg_plan_release(&plan);
	fg_inspect_free(r);
	/* An FP8 weight without its block scales. */
	memset(&err, 0, sizeof(err));
	r = inspect_dir(head_ckpt(dir, sizeof(dir), "fp8-bare", 0.78f, 0.3f, FP8_NO_SCALES));
	assert_int_equal(fg_plan_build(r, "mlx-lm-0.32", &plan, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "has no 'mtp.layers.0.self_attn.o_proj.weight_scale_inv' block scales"));
	fg_plan_release(&plan);
	fg_inspect_free(r);
	/* Numbered experts of unequal shapes. */
	memset(&err, 0, sizeof(err));
	r = inspect_dir(head_ckpt(dir, sizeof(dir), "experts-bad", 0.78f, 0.3f, EXPERTS_BAD_SHAPE));
	assert_int_equal(fg_plan_build(r, "mlx-lm-0.32", &plan, &err), FG_EINPUT);
	assert_non_null(strstr(err.msg, "'mtp.layers.0.mlp.experts.1.up_proj.weight' differs in shape or dtype from expert 0"));
	fg_plan_release(&plan);
	fg_inspect_free(r);
}

static void test_build_experts(void **state)
{
	static const char *const projs[] = { "gate_proj", "up_proj", "down_proj" };
	char dir[PATH_MAX], name[128];
	struct fg_inspect *r;
	struct fg_plan plan;
	struct fg_err err = { 0 };
	uint16_t want[12], got[12];

	(void)state;
	r = inspect_dir(head_ckpt(dir, sizeof(dir), "experts", 0.78f, 0.3f, EXPERTS));
	/* MLX targets stack numbered experts into switch_mlp, expert 0 first. */
	assert_int_equal(fg_plan_build(r, "mlx-lm-0.32", &plan, &err), 0);
	assert_string_equal(plan.expert_layout, "numbered");
	for (int p = 0; p < 3; p++) {
		const struct fg_plan_entry *o;

		snprintf(name, sizeof(name), "mtp.layers.0.mlp.switch_mlp.%s.weight", projs[p]);
		o = find_entry(&plan, name);
		assert_int_equal(o->op, FG_OP_STACK);
		assert_int_equal(o->n_srcs, 2);
		assert_int_equal(o->rank, 3);
		assert_int_equal(o->shape[0], 2);
		assert_int_equal(o->shape[1], 2);
		assert_int_equal(o->shape[2], 3);
		assert_true(o->relayout);
		for (int e = 0; e < 2; e++)
			for (int k = 0; k < 6; k++)
				want[e * 6 + k] = (uint16_t)(100 * e + 10 * p + k);
		assert_int_equal(fg_plan_materialize(&plan, o, (uint8_t *)got, &err), 0);
		assert_memory_equal(got, want, sizeof(want));
	}
	fg_plan_release(&plan);
	/* Hugging Face keeps them numbered, byte for byte. */
	assert_int_equal(fg_plan_build(r, "hf", &plan, &err), 0);
	assert_int_equal(find_entry(&plan, "mtp.layers.0.mlp.experts.1.down_proj.weight")->op, FG_OP_VIEW);
	fg_plan_release(&plan);
	fg_inspect_free(r);
}

/* ---- QUANT siblings ---- */

static void test_quant_siblings(void **state)
{
	char dir[PATH_MAX];
	struct fg_inspect *r;
	struct fg_plan plan;
	struct fg_policy policy;
	struct fg_err err = { 0 };
	const struct fg_plan_entry *base = NULL, *part[3];
	const struct fg_tensor *q;
	uint32_t packed[4 * 64 * 4 / 32];
	uint16_t scales[4], biases[4];
	uint8_t got[512];
	size_t bi = 0;

	(void)state;
	r = inspect_dir(head_ckpt(dir, sizeof(dir), "quant", 0.78f, 0.3f, 0));
	assert_int_equal(fg_plan_build(r, "mlx-lm-0.32", &plan, &err), 0);
	assert_int_equal(fg_policy_parse("affine:4:64", &policy, &err), 0);
	assert_int_equal(fg_policy_apply(&plan, &policy, r, NULL, &err), 0);
	for (size_t i = 0; i < plan.n; i++)
		if (strcmp(plan.t[i].name, "mtp.layers.0.self_attn.q_proj.weight") == 0 && plan.t[i].hidden)
			base = &plan.t[bi = i];
	assert_non_null(base);
	assert_int_equal(base->op, FG_OP_VIEW);
	/* The parts follow their base in part order: weight (U32), scales, biases (BF16). */
	for (int p = 0; p < 3; p++) {
		part[p] = &plan.t[bi + 1 + (size_t)p];
		assert_int_equal(part[p]->op, FG_OP_QUANT);
		assert_int_equal(part[p]->base, (int)bi);
		assert_int_equal(part[p]->part, p);
	}
	assert_string_equal(part[0]->name, "mtp.layers.0.self_attn.q_proj.weight");
	assert_string_equal(part[1]->name, "mtp.layers.0.self_attn.q_proj.scales");
	assert_string_equal(part[2]->name, "mtp.layers.0.self_attn.q_proj.biases");
	assert_int_equal(part[0]->dtype, FG_DT_U32);
	assert_int_equal(part[0]->shape[1], 64 * 4 / 32);
	assert_int_equal(part[1]->shape[1], 1);
	assert_int_equal(fg_plan_entry_bytes(part[0]), sizeof(packed));
	assert_int_equal(fg_plan_entry_bytes(part[1]), sizeof(scales));
	/* Quantizing the source directly gives each part's bytes. */
	q = base->src;
	assert_int_equal(fg_quant_affine_tensor_dt(FG_DT_BF16, q->data, 4, 64, 4, 64, packed, scales, biases, 1, &err), 0);
	/* Biases first, then weight, then scales: one cache serves all three. */
	assert_int_equal(fg_plan_materialize(&plan, part[2], got, &err), 0);
	assert_memory_equal(got, biases, sizeof(biases));
	assert_int_equal(fg_plan_materialize(&plan, part[0], got, &err), 0);
	assert_memory_equal(got, packed, sizeof(packed));
	/* Another entry in between does not spoil the siblings. */
	assert_int_equal(fg_plan_materialize(&plan, find_entry(&plan, "mtp.norm.weight"), got, &err), 0);
	assert_int_equal(fg_plan_materialize(&plan, part[1], got, &err), 0);
	assert_memory_equal(got, scales, sizeof(scales));
	fg_plan_release(&plan);

	/* mxfp4: two siblings, no biases. */
	assert_int_equal(fg_plan_build(r, "mlx-lm-0.32", &plan, &err), 0);
	assert_int_equal(fg_policy_parse("mxfp4", &policy, &err), 0);
	assert_int_equal(fg_policy_apply(&plan, &policy, r, NULL, &err), 0);
	for (size_t i = 0; i < plan.n; i++)
		if (strcmp(plan.t[i].name, "mtp.layers.0.self_attn.q_proj.weight") == 0 && plan.t[i].hidden)
			bi = i;
	assert_int_equal(plan.t[bi + 1].op, FG_OP_QUANT);
	assert_int_equal(plan.t[bi + 2].op, FG_OP_QUANT);
	assert_string_equal(plan.t[bi + 2].name, "mtp.layers.0.self_attn.q_proj.scales");
	assert_int_equal(plan.t[bi + 2].dtype, FG_DT_U8);
	{
		uint32_t mx_packed[4 * 64 / 8];
		uint8_t mx_scales[4 * 2];

		assert_int_equal(fg_quant_mxfp4_tensor_dt(FG_DT_BF16, plan.t[bi].src->data, 4, 64, mx_packed, mx_scales,
							  1, &err), 0);
		assert_int_equal(fg_plan_materialize(&plan, &plan.t[bi + 2], got, &err), 0);
		assert_memory_equal(got, mx_scales, sizeof(mx_scales));
		assert_int_equal(fg_plan_materialize(&plan, &plan.t[bi + 1], got, &err), 0);
		assert_memory_equal(got, mx_packed, sizeof(mx_packed));
	}
	fg_plan_release(&plan);
	fg_inspect_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_view),
		cmocka_unit_test(test_shift),
		cmocka_unit_test(test_shift_long),
		cmocka_unit_test(test_fp8),
		cmocka_unit_test(test_stack),
		cmocka_unit_test(test_split_and_transpose),
		cmocka_unit_test(test_plan_add_and_errors),
		cmocka_unit_test(test_build_shift_direction),
		cmocka_unit_test(test_build_refusals),
		cmocka_unit_test(test_build_experts),
		cmocka_unit_test(test_quant_siblings),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
