/*
 * test_qmods.c: a tensor set's quantized modules (qmods.c), recognised by
 * their tensor families with the config's parameters per module (issue 12):
 * MLX affine with a per-module override, GPTQ, a compressed-tensors MoE
 * head's numbered experts with their weight_shape, formats forged does not
 * read (flagged as unsupported, named without the code), tensors the config
 * contradicts (not flagged), a config that did not parse, a name held twice.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "forge/model/qmods.h"

#define MAX_TENSORS 64

struct bench {
	struct fg_tset set;
	size_t n;
	struct fg_tensor t[MAX_TENSORS];
	char names[MAX_TENSORS][128];
	int64_t shapes[MAX_TENSORS][2]; /* weight_shape data */
	uint64_t dims[MAX_TENSORS][FG_ST_MAX_RANK]; /* the tensors' shapes */
	struct fg_qmods q;
	cJSON *config;
	struct fg_qconfig qc;
};

static struct bench bench_store;

static struct bench *bench_new(const char *config)
{
	struct bench *b = &bench_store;
	struct fg_qconfig_src src = { 0 };
	struct fg_err err = { 0 };

	fg_tset_release(&b->set);
	fg_qmods_release(&b->q);
	cJSON_Delete(b->config);
	memset(b, 0, sizeof(*b));
	assert_int_equal(fg_tset_init(&b->set, "mtp", NULL), 0);
	if (config) {
		b->config = cJSON_Parse(config);
		assert_non_null(b->config);
		src.config = b->config;
	}
	if (fg_qconfig_parse(&b->qc, &src, &err))
		fail_msg("config: %s", err.msg);
	return b;
}

static int release_bench(void **state)
{
	(void)state;
	fg_tset_release(&bench_store.set);
	fg_qmods_release(&bench_store.q);
	cJSON_Delete(bench_store.config);
	bench_store.config = NULL;
	return 0;
}

/* A header-only tensor (weight_shape gets its two values as data). */
static void add(struct bench *b, const char *name, enum fg_dtype dt, uint64_t d0, uint64_t d1)
{
	struct fg_tensor *t;
	struct fg_err err = { 0 };

	assert_true(b->n < MAX_TENSORS);
	t = &b->t[b->n];
	snprintf(b->names[b->n], sizeof(b->names[0]), "%s", name);
	t->name = b->names[b->n];
	t->dtype = dt;
	t->rank = d1 ? 2 : 1;
	memset(b->dims[b->n], 0, sizeof(b->dims[0]));
	b->dims[b->n][0] = d0;
	b->dims[b->n][1] = d1;
	t->shape = b->dims[b->n];
	b->n++;
	assert_int_equal(fg_tset_add(&b->set, t, "model.safetensors", &err), 0);
}

static void add_shape(struct bench *b, const char *name, int64_t out, int64_t in)
{
	add(b, name, FG_DT_I64, 2, 0);
	b->shapes[b->n - 1][0] = out;
	b->shapes[b->n - 1][1] = in;
	b->t[b->n - 1].data = (const uint8_t *)b->shapes[b->n - 1];
}

static void scan(struct bench *b, int check)
{
	struct fg_err err = { 0 };

	fg_qmods_release(&b->q);
	assert_int_equal(fg_qmods_scan(&b->set, &b->qc, NULL, check, &b->q, &err), 0);
}

/*
 * Expert e's slice of a stacked MLX module: 2-D views of [E, out, words]
 * and [E, out, groups] (a [E, out] bias 1-D) whose shapes are the slice's
 * own, whose data and offsets are e's part, and whose source tensors keep
 * their 3-D shapes (a view never writes through to the file's shape pool).
 */
static void test_slice_keeps_sources(void **state)
{
	static const uint64_t w_shape[FG_ST_MAX_RANK] = { 3, 4, 2 }, s_shape[FG_ST_MAX_RANK] = { 3, 4, 1 },
			      b_shape[FG_ST_MAX_RANK] = { 3, 4 };
	uint32_t w[3 * 4 * 2];
	uint16_t sc[3 * 4], bi[3 * 4];
	struct fg_tensor tw = { .name = "m.weight", .data = (const uint8_t *)w, .shape = w_shape, .begin = 1000,
				.dtype = FG_DT_U32, .rank = 3 };
	struct fg_tensor ts = { .name = "m.scales", .data = (const uint8_t *)sc, .shape = s_shape, .dtype = FG_DT_BF16,
				.rank = 3 };
	struct fg_tensor tb = { .name = "m.bias", .data = (const uint8_t *)bi, .shape = b_shape, .dtype = FG_DT_BF16,
				.rank = 2 };
	struct fg_qmod q;
	struct fg_qslice v;
	struct fg_qmodule out;

	(void)state;
	memset(&q, 0, sizeof(q));
	q.f.kind = FG_QF_MLX_AFFINE;
	q.m.t[FG_QR_WEIGHT] = &tw;
	q.m.t[FG_QR_SCALES] = &ts;
	q.m.t[FG_QR_BIAS] = &tb;
	assert_int_equal(fg_qmod_stacked(&q), 3);
	fg_qmod_slice(&q, 2, &v, &out);
	assert_ptr_equal(out.t[FG_QR_WEIGHT], &v.views[FG_QR_WEIGHT]);
	assert_int_equal(out.t[FG_QR_WEIGHT]->rank, 2);
	assert_int_equal(out.t[FG_QR_WEIGHT]->shape[0], 4);
	assert_int_equal(out.t[FG_QR_WEIGHT]->shape[1], 2);
	assert_int_equal(out.t[FG_QR_WEIGHT]->shape[2], 0);
	assert_int_equal(fg_tensor_nelem(out.t[FG_QR_WEIGHT]), 8);
	assert_int_equal(out.t[FG_QR_WEIGHT]->begin, 1000 + 2 * 8 * 4);
	assert_int_equal(fg_tensor_end(out.t[FG_QR_WEIGHT]), 1000 + 3 * 8 * 4);
	assert_ptr_equal(out.t[FG_QR_WEIGHT]->data, (const uint8_t *)&w[16]);
	assert_int_equal(out.t[FG_QR_SCALES]->shape[1], 1);
	assert_ptr_equal(out.t[FG_QR_SCALES]->data, (const uint8_t *)&sc[8]);
	assert_int_equal(out.t[FG_QR_BIAS]->rank, 1);
	assert_int_equal(out.t[FG_QR_BIAS]->shape[0], 4);
	assert_int_equal(out.t[FG_QR_BIAS]->shape[1], 0);
	/* the sources are as they were */
	assert_int_equal(tw.rank, 3);
	assert_ptr_equal(tw.shape, w_shape);
	assert_int_equal(w_shape[0], 3);
	assert_int_equal(w_shape[1], 4);
	assert_int_equal(w_shape[2], 2);
	assert_int_equal(s_shape[2], 1);
	assert_int_equal(b_shape[0], 3);
	assert_int_equal(b_shape[1], 4);
	/* A stacked tensor with an empty dimension slices to an empty view: [E, out, 0] is [out, 0], 0 bytes. */
	{
		static const uint64_t z_shape[FG_ST_MAX_RANK] = { 3, 4, 0 };
		struct fg_tensor tz = { .name = "m.scales", .shape = z_shape, .begin = 96, .dtype = FG_DT_BF16, .rank = 3 };

		q.m.t[FG_QR_SCALES] = &tz;
		fg_qmod_slice(&q, 1, &v, &out);
		assert_int_equal(out.t[FG_QR_SCALES]->rank, 2);
		assert_int_equal(out.t[FG_QR_SCALES]->shape[0], 4);
		assert_int_equal(out.t[FG_QR_SCALES]->shape[1], 0);
		assert_int_equal(fg_tensor_bytes(out.t[FG_QR_SCALES]), 0);
		assert_int_equal(fg_tensor_end(out.t[FG_QR_SCALES]), 96);
	}
}

static void test_mlx_and_dense(void **state)
{
	struct bench *b;
	const struct fg_qmod *m;
	enum fg_qrole role;
	char name[160];

	(void)state;
	b = bench_new("{\"quantization\": {\"group_size\": 32, \"bits\": 4, \"mode\": \"affine\","
		      " \"mtp.layers.0.mlp.gate\": {\"group_size\": 64, \"bits\": 8}}}");
	add(b, "mtp.fc.weight", FG_DT_BF16, 64, 128);                 /* dense: no candidate */
	add(b, "mtp.norm.weight", FG_DT_F32, 64, 0);
	add(b, "mtp.layers.0.self_attn.q_proj.weight", FG_DT_U32, 8, 4); /* 32 columns at 4 bits */
	add(b, "mtp.layers.0.self_attn.q_proj.scales", FG_DT_BF16, 8, 1);
	add(b, "mtp.layers.0.self_attn.q_proj.biases", FG_DT_BF16, 8, 1);
	add(b, "mtp.layers.0.mlp.gate.weight", FG_DT_U32, 4, 16);         /* 64 columns at 8 bits */
	add(b, "mtp.layers.0.mlp.gate.scales", FG_DT_BF16, 4, 1);
	add(b, "mtp.layers.0.mlp.gate.biases", FG_DT_BF16, 4, 1);
	add(b, "mtp.layers.0.mlp.gate.scales", FG_DT_BF16, 4, 1);        /* a second copy: the first is kept */
	scan(b, 1);
	assert_int_equal(b->q.n, 2);
	assert_int_equal(fg_qmods_quantized(&b->q), 2);
	m = fg_qmods_find(&b->q, "mtp.layers.0.self_attn.q_proj.scales", &role);
	assert_non_null(m);
	assert_int_equal(role, FG_QR_SCALES);
	assert_string_equal(m->name, "mtp.layers.0.self_attn.q_proj");
	assert_int_equal(m->rc, 0);
	assert_int_equal(m->f.kind, FG_QF_MLX_AFFINE);
	assert_int_equal(m->f.bits, 4);
	assert_true(m->checked);
	assert_int_equal(m->dims.out, 8);
	assert_int_equal(m->dims.in, 32);
	/* the per-module override */
	m = fg_qmods_module(&b->q, "mtp.layers.0.mlp.gate");
	assert_non_null(m);
	assert_int_equal(m->f.bits, 8);
	assert_int_equal(m->f.group, 64);
	assert_ptr_equal(m->m.t[FG_QR_SCALES], &b->t[6]);
	assert_string_equal(fg_qmod_name(m, name, sizeof(name)), "mlx affine bits=8 group=64");
	assert_null(fg_qmods_find(&b->q, "mtp.fc.weight", NULL));
	assert_null(fg_qmods_find(&b->q, "mtp.layers.0.mlp.gate.bias", NULL));
}

static void test_gptq_and_refusals(void **state)
{
	struct bench *b;
	const struct fg_qmod *m;
	char name[256];

	(void)state;
	b = bench_new("{\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 4, \"group_size\": 16,"
		      " \"desc_act\": true, \"sym\": true, \"checkpoint_format\": \"gptq\"}}");
	/* in 32, out 16: qweight [32*4/32, 16], qzeros [2, 16*4/32], scales [2, 16], g_idx [32] */
	add(b, "model.layers.3.mlp.down_proj.qweight", FG_DT_I32, 4, 16);
	add(b, "model.layers.3.mlp.down_proj.qzeros", FG_DT_I32, 2, 2);
	add(b, "model.layers.3.mlp.down_proj.scales", FG_DT_F16, 2, 16);
	add(b, "model.layers.3.mlp.down_proj.g_idx", FG_DT_I32, 32, 0);
	add(b, "model.layers.3.mlp.down_proj.bias", FG_DT_F16, 16, 0);
	scan(b, 1);
	assert_int_equal(b->q.n, 1);
	m = &b->q.v[0];
	assert_int_equal(m->rc, 0);
	assert_int_equal(m->f.kind, FG_QF_GPTQ);
	assert_true(m->f.act_order);
	assert_int_equal(m->dims.out, 16);
	assert_int_equal(m->dims.in, 32);
	assert_non_null(m->m.t[FG_QR_BIAS]);

	/* 5-bit GPTQ is GPTQModel's planar layout: unsupported, named without the code */
	b = bench_new("{\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 5, \"group_size\": 16}}");
	add(b, "model.layers.3.mlp.down_proj.qweight", FG_DT_I32, 5, 16);
	add(b, "model.layers.3.mlp.down_proj.qzeros", FG_DT_I32, 2, 3);
	add(b, "model.layers.3.mlp.down_proj.scales", FG_DT_F16, 2, 16);
	add(b, "model.layers.3.mlp.down_proj.g_idx", FG_DT_I32, 32, 0);
	scan(b, 1);
	m = &b->q.v[0];
	assert_int_equal(m->rc, FG_EINPUT);
	assert_true(m->unsupported);
	assert_true(fg_qmod_quantized(m));
	assert_int_equal(strncmp(m->why, FG_QUNSUPPORTED "gptq bits=5", strlen(FG_QUNSUPPORTED "gptq bits=5")), 0);
	fg_qmod_name(m, name, sizeof(name));
	assert_int_equal(strncmp(name, "gptq bits=5", 11), 0);

	/* GPTQ tensors under a config that declares none: a contradiction, not an unsupported format */
	b = bench_new("{\"model_type\": \"qwen3_5\"}");
	add(b, "model.layers.3.mlp.down_proj.qweight", FG_DT_I32, 4, 16);
	add(b, "model.layers.3.mlp.down_proj.scales", FG_DT_F16, 2, 16);
	add(b, "model.layers.3.mlp.down_proj.g_idx", FG_DT_I32, 32, 0);
	scan(b, 0);
	m = &b->q.v[0];
	assert_int_equal(m->rc, FG_EINPUT);
	assert_false(m->unsupported);
	assert_non_null(strstr(m->why, "declares no quantization"));

	/* a config that did not parse: every candidate carries its message */
	fg_qmods_release(&b->q);
	{
		struct fg_err err = { 0 };

		assert_int_equal(fg_qmods_scan(&b->set, NULL, "quantization config: bad", 0, &b->q, &err), 0);
	}
	assert_int_equal(b->q.v[0].rc, FG_EINPUT);
	assert_string_equal(b->q.v[0].why, "quantization config: bad");
}

/* A compressed-tensors MoE head: every numbered expert is a module, with weight_shape giving its shape. */
static void test_ct_experts(void **state)
{
	static const char *const proj[] = { "gate_proj", "up_proj", "down_proj" };
	struct bench *b;
	char name[128];

	(void)state;
	b = bench_new("{\"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"format\": \"pack-quantized\","
		      " \"version\": \"0.12.0\", \"config_groups\": {\"group_0\": {\"targets\": [\"Linear\"],"
		      " \"weights\": {\"num_bits\": 4, \"type\": \"int\", \"symmetric\": true, \"strategy\": \"group\","
		      " \"group_size\": 32}}}, \"ignore\": [\"lm_head\", \"re:.*mlp\\\\.gate$\"]}}");
	for (int e = 0; e < 4; e++) {
		for (int p = 0; p < 3; p++) {
			uint64_t out = p == 2 ? 64 : 32, in = p == 2 ? 32 : 64;

			snprintf(name, sizeof(name), "mtp.layers.0.mlp.experts.%d.%s.weight_packed", e, proj[p]);
			add(b, name, FG_DT_I32, out, in / 8);
			snprintf(name, sizeof(name), "mtp.layers.0.mlp.experts.%d.%s.weight_scale", e, proj[p]);
			add(b, name, FG_DT_BF16, out, in / 32);
			snprintf(name, sizeof(name), "mtp.layers.0.mlp.experts.%d.%s.weight_shape", e, proj[p]);
			add_shape(b, name, (int64_t)out, (int64_t)in);
		}
	}
	add(b, "mtp.layers.0.mlp.gate.weight", FG_DT_BF16, 4, 64); /* the router: ignored, dense */
	scan(b, 1);
	assert_int_equal(b->q.n, 12);
	for (size_t i = 0; i < b->q.n; i++) {
		const struct fg_qmod *m = &b->q.v[i];

		if (m->rc || m->f.kind != FG_QF_CT_INT || !m->checked)
			fail_msg("%s: rc %d kind %d (%s)", m->name, m->rc, (int)m->f.kind, m->why);
	}
	assert_int_equal(b->q.v[2].dims.out, 64);
	assert_int_equal(b->q.v[2].dims.in, 32);
	assert_string_equal(b->q.v[2].name, "mtp.layers.0.mlp.experts.0.down_proj");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slice_keeps_sources),
		cmocka_unit_test_teardown(test_mlx_and_dense, release_bench),
		cmocka_unit_test_teardown(test_gptq_and_refusals, release_bench),
		cmocka_unit_test_teardown(test_ct_experts, release_bench),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
