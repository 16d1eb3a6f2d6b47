/*
 * test_layout.c: the artifact layout for a target list (forge/artifact/
 * layout.h), on the generated fixtures (fixture_path: $FIXTURES or
 * BUILD/fixtures; skipped without them).
 *
 * What each case expects comes from the runtimes' sources, cited beside it
 * (the same commits as forge/model/runtimes_table.c): where the loader looks
 * for the head, which keys and expert layouts it keeps, how it heals norms,
 * and what its trunk loader globs.
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

#include "forge/artifact/forge.h"
#include "forge/artifact/layout.h"
#include "tests/unit/support.h"

struct decided {
	struct fg_inspect *src, *bb;
	struct fg_layout l;
	struct fg_plan plan;
	struct fg_err err;
	int rc;
};

/* Inspect the source (and backbone, NULL: the source) and decide for the list; skips without fixtures. */
static int decide(struct decided *d, const char *source, const char *backbone, const char *list)
{
	char src[PATH_MAX], bb[PATH_MAX];
	const struct fg_runtime *rows[FG_LAYOUT_MAX_TARGETS];
	size_t n;

	memset(d, 0, sizeof(*d));
	if (!fixture_path(src, sizeof(src), source) || (backbone && !fixture_path(bb, sizeof(bb), backbone)))
		return 0;
	assert_int_equal(fg_inspect_run(&d->src, src, NULL, 0, &d->err), 0);
	if (backbone)
		assert_int_equal(fg_inspect_run(&d->bb, bb, NULL, 0, &d->err), 0);
	assert_int_equal(fg_layout_targets(list, rows, &n, &d->err), 0);
	d->rc = fg_layout_decide(d->src, backbone ? d->bb : d->src, rows, n, NULL, &d->l, &d->plan, &d->err);
	return 1;
}

static void release(struct decided *d)
{
	fg_plan_release(&d->plan);
	fg_inspect_free(d->bb);
	fg_inspect_free(d->src);
}

static const struct fg_plan_entry *entry(const struct fg_plan *p, const char *name)
{
	for (size_t i = 0; i < p->n; i++)
		if (strcmp(p->t[i].name, name) == 0)
			return &p->t[i];
	return NULL;
}

static void test_targets_parse(void **state)
{
	const struct fg_runtime *rows[FG_LAYOUT_MAX_TARGETS];
	struct fg_err err = { 0 };
	size_t n = 0;

	(void)state;
	assert_int_equal(fg_layout_targets(NULL, rows, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_string_equal(rows[0]->id, FG_FORGE_DEFAULT_TARGET);
	assert_int_equal(fg_layout_targets(" mtplx-2.12 , vllm-mlx", rows, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(rows[0]->id, "mtplx-2.12");
	assert_string_equal(rows[1]->id, "vllm-mlx");
	/* hf stands for vllm where one row is needed; a row named twice is targeted once. */
	assert_int_equal(fg_layout_targets("vllm,hf,mlx-lm-0.33", rows, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(rows[0]->id, "vllm");
	assert_string_equal(rows[1]->id, "mlx-lm-0.32");
	assert_int_equal(fg_layout_targets("vllm,,sglang", rows, &n, &err), FG_EUSAGE);
	assert_non_null(strstr(err.msg, "empty entry"));
	assert_int_equal(fg_layout_targets("vllm,no-such", rows, &n, &err), FG_EUSAGE);
	assert_string_equal(err.msg, "'no-such' is not a runtime id");
	assert_int_equal(fg_layout_targets("mtplx-2.12.1", rows, &n, &err), FG_EUSAGE);
}

/*
 * MTPLX: the config pointer first (mtplx/artifacts.py@6d0a869a expected_mtp_file), absolute MLX
 * gains, numbered or switch_mlp experts (mtp_patch.py@0943c6cb _stack_mtp_moe_experts): the
 * sidecar MTPLX's own forge writes, mtp.safetensors, which mlx-lm's model*.safetensors glob never
 * reads (mlx_lm/utils.py@ed1fca4cef15:L316).
 */
static void test_mtplx_sidecar(void **state)
{
	struct decided d;

	(void)state;
	if (!decide(&d, "qwen35_hf", NULL, "mtplx-2.12"))
		skip();
	assert_int_equal(d.rc, 0);
	assert_int_equal(d.l.place, FG_PLACE_SIDECAR);
	assert_string_equal(d.l.file, "mtp.safetensors");
	assert_true(d.l.pointer);
	assert_string_equal(d.l.encoding, "absolute");
	assert_false(d.l.manifest);
	assert_int_equal(d.plan.target_conv, FG_CONV_ABSOLUTE);
	assert_int_equal(d.l.fit[0], FG_FIT_OK);
	/* Qwen heads are spelled exactly mtp.* (artifacts.py is_mtp_key: mtp. or language_model.mtp.). */
	assert_non_null(entry(&d.plan, "mtp.fc.weight"));
	release(&d);
}

/*
 * vLLM's drafter reads names starting exactly "mtp." from the target's own files, which are the
 * index's (qwen3_5_mtp.py@01d99805d1ef Qwen3_5MTP.load_weights; weight_utils.py@0a1ee72ed53f
 * filter_duplicate_safetensors_files) and computes 1 + w at run time (layernorm.py@00cba797bda4
 * GemmaRMSNorm): a delta head in a shard of the index, nothing pointing at a sidecar.
 */
static void test_vllm_embedded_delta(void **state)
{
	struct decided d;
	cJSON *cfg;

	(void)state;
	if (!decide(&d, "qwen35_hf", NULL, "vllm"))
		skip();
	assert_int_equal(d.rc, 0);
	assert_int_equal(d.l.place, FG_PLACE_EMBEDDED);
	assert_string_equal(d.l.file, FG_LAYOUT_HEAD_SHARD);
	assert_false(d.l.pointer);
	assert_true(d.l.index);
	assert_string_equal(d.l.encoding, "delta");
	assert_int_equal(d.plan.target_conv, FG_CONV_DELTA);
	assert_int_equal(d.plan.n_shifted, 0);
	/* The config keeps no stale pointer. */
	cfg = cJSON_Parse("{\"mlx_lm_extra_tensors\": {\"mtp_file\": \"mtp.safetensors\"}, \"mtp_norm_encoding\": \"absolute\"}");
	assert_int_equal(fg_layout_patch_config(&d.l, cfg, &d.err), 0);
	assert_null(cJSON_GetObjectItemCaseSensitive(cfg, "mlx_lm_extra_tensors"));
	assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "mtp_norm_encoding")), "delta");
	cJSON_Delete(cfg);
	release(&d);
}

/*
 * vllm-mlx reads mtp/weights.safetensors, then model-mtp.safetensors, and no other file
 * (vllm_mlx/patches/qwen3_5_mtp.py@4b654c09e610:L290-298), heals any 1-D norm whose mean is
 * below 0.5 unless manifest.json beside it says rmsnorm_weight_format mlx_gamma (L94-112,
 * L436-448).  MTPLX follows the pointer to any file: one sidecar serves both.
 */
static void test_mtplx_and_vllm_mlx(void **state)
{
	struct decided d;
	char path[96];
	cJSON *m;

	(void)state;
	if (!decide(&d, "qwen35_hf", NULL, "mtplx-2.12,vllm-mlx"))
		skip();
	assert_int_equal(d.rc, 0);
	assert_int_equal(d.l.place, FG_PLACE_SIDECAR);
	assert_string_equal(d.l.file, "mtp/weights.safetensors");
	assert_true(d.l.pointer);
	assert_true(d.l.manifest);
	assert_string_equal(fg_layout_manifest_path(&d.l, path, sizeof(path)), "mtp/manifest.json");
	m = fg_layout_manifest(&d.l, &d.plan);
	assert_non_null(m);
	assert_int_equal((int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(m, "artifact_schema_version")), 1);
	assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(m, "rmsnorm_weight_format")), "mlx_gamma");
	cJSON_Delete(m);
	assert_int_equal(d.l.fit[0], FG_FIT_OK);
	assert_int_equal(d.l.fit[1], FG_FIT_OK);
	release(&d);
}

/*
 * MTPLX reads embedded keys through the index when no sidecar exists (mtp_patch.py@0943c6cb
 * _embedded_mtp_weight_map) and a declared delta encoding gets +1 on every norm (~c18500):
 * with vLLM, the head goes delta in the shards and config.json says so.
 */
static void test_mtplx_and_vllm(void **state)
{
	struct decided d;

	(void)state;
	if (!decide(&d, "qwen35_hf", NULL, "mtplx-2.12,vllm"))
		skip();
	assert_int_equal(d.rc, 0);
	assert_int_equal(d.l.place, FG_PLACE_EMBEDDED);
	assert_false(d.l.pointer);
	assert_string_equal(d.l.encoding, "delta");
	release(&d);
}

/*
 * One head cannot be both: vllm-mlx reads only its two sidecar names as MLX gains, vLLM only
 * delta keys in the index's shards.  The refusal names both.
 */
static void test_conflict_vllm_vllm_mlx(void **state)
{
	struct decided d;

	(void)state;
	if (!decide(&d, "qwen35_hf", NULL, "vllm,vllm-mlx"))
		skip();
	assert_int_equal(d.rc, FG_EVERDICT);
	assert_int_equal(fg_err_refusal(&d.err), FG_V_LAYOUT_CONFLICT);
	assert_int_equal(d.l.n_conflict, 2);
	assert_string_equal(d.l.conflict[0], "vllm");
	assert_string_equal(d.l.conflict[1], "vllm-mlx");
	assert_non_null(strstr(d.err.msg, "no one layout serves both vllm and vllm-mlx"));
	release(&d);
}

/*
 * mlx-lm PR 990 reads the head only as mtp.* keys in its globbed shards and refuses a declared
 * head without them (qwen3_5.py@e8ceeccf118d:L504-537); MTPLX's trunk loader (mlx-lm 0.31) adds
 * +1 to the whole trunk when any key holds "mtp." (qwen3_5.py@ed1fca4cef15:L307-331) and MTPLX
 * then refuses the double-shifted trunk (runtime.py@0943c6cb ~c46300).  On an MLX trunk no
 * layout serves both.
 */
static void test_conflict_pr990_mtplx(void **state)
{
	struct decided d;

	(void)state;
	if (!decide(&d, "qwen35_mlx_sidecar", NULL, "mtplx-2.12,mlx-lm-pr990"))
		skip();
	assert_int_equal(d.rc, FG_EVERDICT);
	assert_int_equal(fg_err_refusal(&d.err), FG_V_LAYOUT_CONFLICT);
	assert_int_equal(d.l.n_conflict, 2);
	assert_non_null(strstr(d.err.msg, "head_missing"));
	assert_non_null(strstr(d.err.msg, "guard"));
	release(&d);
	/* Alone, PR 990 gets the head absolute in the shards (no shift fires on an MLX trunk). */
	if (!decide(&d, "qwen35_mlx_sidecar", NULL, "mlx-lm-pr990"))
		skip();
	assert_int_equal(d.rc, 0);
	assert_int_equal(d.l.place, FG_PLACE_EMBEDDED);
	assert_string_equal(d.l.encoding, "absolute");
	assert_true(d.l.norm_convention); /* an absolute trunk, declared as PR 1751 writes it */
	release(&d);
}

/*
 * ollama --experimental adds +1 to every norm, trunk and head, once any name holds "mtp."
 * (x/models/qwen3_5/qwen3_5.go@fb3076099687:L831-846) and loads the head only from mtp.* names
 * it reads through the index (L884-891; x/create/inventory.go L58-76): on an absolute (MLX)
 * trunk every place it reads the head from shifts the trunk.  No layout serves it.
 */
static void test_ollama_mlx_on_mlx_trunk(void **state)
{
	struct decided d;

	(void)state;
	if (!decide(&d, "qwen35_mlx_sidecar", NULL, "ollama-mlx"))
		skip();
	assert_int_equal(d.rc, FG_EVERDICT);
	assert_int_equal(fg_err_refusal(&d.err), FG_V_LAYOUT_CONFLICT);
	assert_int_equal(d.l.n_conflict, 1);
	assert_string_equal(d.l.conflict[0], "ollama-mlx");
	assert_non_null(strstr(d.err.msg, "trunk_double_shifted"));
	release(&d);
	/* A raw HF trunk is shifted anyway (its conv1d is raw): the head goes delta into the index. */
	if (!decide(&d, "qwen35_hf", NULL, "ollama-mlx"))
		skip();
	assert_int_equal(d.rc, 0);
	assert_int_equal(d.l.place, FG_PLACE_EMBEDDED);
	assert_string_equal(d.l.encoding, "delta");
	release(&d);
}

/*
 * An MLX trunk in vLLM: 1 + w at run time on absolute gains, whatever the head.  The layout is
 * still decided for the head; the artifact's inspection refuses the trunk (trunk fit).
 */
static void test_trunk_blocked(void **state)
{
	struct decided d;

	(void)state;
	if (!decide(&d, "qwen35_mlx_sidecar", NULL, "vllm"))
		skip();
	assert_int_equal(d.rc, 0);
	assert_int_equal(d.l.fit[0], FG_FIT_TRUNK);
	release(&d);
}

/*
 * Experts: MTPLX ≤ 2.12.0 stacks numbered experts only and drops fused ones under strict=False
 * (mtp_patch.py@0943c6cb _stack_mtp_moe_experts; #574), so it gets switch_mlp; vLLM's drafter
 * reads numbered or fused experts, not switch_mlp (qwen3_5_mtp.py@01d99805d1ef
 * Qwen3_5MultiTokenPredictor.load_weights).  A fused-linear head serves both only restacked for
 * one and kept for the other: refused, naming the two.
 */
static void test_experts_conflict(void **state)
{
	struct decided d;

	(void)state;
	if (!decide(&d, "qwen35_moe_hf_fused_linear", NULL, "mtplx-2.12"))
		skip();
	assert_int_equal(d.rc, 0);
	assert_true(d.l.experts);
	assert_true(d.l.spec.restack);
	assert_non_null(entry(&d.plan, "mtp.layers.0.mlp.switch_mlp.gate_proj.weight"));
	release(&d);
	if (!decide(&d, "qwen35_moe_hf_fused_linear", NULL, "vllm"))
		skip();
	assert_int_equal(d.rc, 0);
	assert_false(d.l.spec.restack);
	assert_non_null(entry(&d.plan, "mtp.layers.0.mlp.experts.gate_up_proj"));
	release(&d);
	if (!decide(&d, "qwen35_moe_hf_fused_linear", NULL, "mtplx-2.12,vllm"))
		skip();
	assert_int_equal(d.rc, FG_EVERDICT);
	assert_int_equal(fg_err_refusal(&d.err), FG_V_LAYOUT_CONFLICT);
	assert_non_null(strstr(d.err.msg, "head_experts_uninitialized"));
	release(&d);
	/* Numbered experts are read by both: kept numbered, in the shards, delta and declared. */
	if (!decide(&d, "qwen35_moe_hf_numbered", NULL, "mtplx-2.12,vllm"))
		skip();
	assert_int_equal(d.rc, 0);
	assert_false(d.l.spec.restack);
	assert_int_equal(d.l.place, FG_PLACE_EMBEDDED);
	assert_non_null(entry(&d.plan, "mtp.layers.0.mlp.experts.0.gate_proj.weight"));
	release(&d);
}

/*
 * A plain family keeps its names and its norms: vLLM's DeepSeek/GLM drafters read
 * model.layers.{L+i} in the target's files (deepseek_mtp.py@03356f8cb59b, glm4_moe_mtp.py@6e052ba8f4d9
 * _rewrite_spec_layer_name), so the head goes into the shards under its source names.
 */
static void test_plain_family(void **state)
{
	struct decided d;

	(void)state;
	if (!decide(&d, "glm45", NULL, "vllm"))
		skip();
	assert_int_equal(d.rc, 0);
	assert_int_equal(d.l.place, FG_PLACE_EMBEDDED);
	assert_null(d.l.encoding);
	assert_int_equal(d.plan.target_conv, FG_CONV_PLAIN);
	for (size_t i = 0; i < d.plan.n; i++)
		assert_null(strstr(d.plan.t[i].name, "mtp."));
	release(&d);
}

/* A trunk-only target never runs MTP: the head goes where its glob never looks. */
static void test_trunk_only_target(void **state)
{
	struct decided d;
	cJSON *j;

	(void)state;
	if (!decide(&d, "qwen35_mlx_embedded", NULL, "mlx-lm-0.31,lmstudio-mlx"))
		skip();
	assert_int_equal(d.rc, 0);
	assert_int_equal(d.l.place, FG_PLACE_SIDECAR);
	assert_string_equal(d.l.file, "mtp.safetensors");
	assert_int_equal(d.l.fit[0], FG_FIT_OK);
	assert_int_equal(d.l.fit[1], FG_FIT_OK);
	j = fg_layout_json(&d.l);
	assert_non_null(j);
	assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "place")), "sidecar");
	assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(j, "experts")));
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "targets")), 2);
	cJSON_Delete(j);
	release(&d);
}

/*
 * model-mtp.safetensors matches mlx-lm's model*.safetensors glob (mlx_lm/utils.py@ed1fca4cef15:L316):
 * over an MLX trunk, mlx-lm 0.31 (and LM Studio's pin, before PR 1623) adds +1 to the whole trunk
 * once a loaded key holds "mtp." (qwen3_5.py@ed1fca4cef15:L307-331; @2c008fd0252b:L348-372), and
 * MTPLX, loading its trunk so, refuses the double-shifted trunk (runtime.py@0943c6cb ~c46300);
 * 0.32 gates the shift on a raw conv1d only and drops mtp.* (qwen3_5.py@d78bf58e217c:L348-370).
 * mtp.safetensors is globbed by none of them.
 */
static void test_globbed_sidecar_judged(void **state)
{
	static const char *const ids[] = { "mlx-lm-0.31", "lmstudio-mlx", "mtplx-2.12", "mlx-lm-0.32" };
	const struct fg_runtime *rows[4];
	enum fg_layout_fit fits[4];
	char reasons[4][FG_LAYOUT_REASON_MAX];
	char src[PATH_MAX];
	struct fg_inspect *r = NULL;
	struct fg_layout l;
	struct fg_err err = { 0 };

	(void)state;
	if (!fixture_path(src, sizeof(src), "qwen35_mlx_sidecar"))
		skip();
	assert_int_equal(fg_inspect_run(&r, src, NULL, 0, &err), 0);
	for (size_t i = 0; i < 4; i++)
		assert_non_null(rows[i] = fg_runtime_find(ids[i]));
	memset(&l, 0, sizeof(l));
	l.place = FG_PLACE_SIDECAR;
	l.spec = (struct fg_plan_spec){ .conv = FG_CONV_ABSOLUTE, .restack = 1 };
	snprintf(l.file, sizeof(l.file), "model-mtp.safetensors");
	assert_int_equal(fg_layout_judge(r, r, rows, 4, NULL, &l, fits, reasons, &err), 0);
	assert_int_equal(fits[0], FG_FIT_FAILS);
	assert_non_null(strstr(reasons[0], "trunk_double_shifted"));
	assert_int_equal(fits[1], FG_FIT_FAILS);
	assert_non_null(strstr(reasons[1], "trunk_double_shifted"));
	assert_int_equal(fits[2], FG_FIT_FAILS);
	assert_non_null(strstr(reasons[2], "guard"));
	assert_int_equal(fits[3], FG_FIT_OK);
	snprintf(l.file, sizeof(l.file), "mtp.safetensors");
	assert_int_equal(fg_layout_judge(r, r, rows, 4, NULL, &l, fits, reasons, &err), 0);
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(fits[i], FG_FIT_OK);
	fg_inspect_free(r);
}

/* A head inspect refuses is refused the same (the plan quotes inspect's verdict). */
static void test_refused_head(void **state)
{
	struct decided d;

	(void)state;
	if (!decide(&d, "qwen35_mlx_head_shifted", NULL, "mtplx-2.12,vllm"))
		skip();
	assert_int_equal(d.rc, FG_EVERDICT);
	assert_int_equal(fg_err_refusal(&d.err), FG_V_HEAD_DOUBLE_SHIFTED);
	release(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_targets_parse),
		cmocka_unit_test(test_mtplx_sidecar),
		cmocka_unit_test(test_vllm_embedded_delta),
		cmocka_unit_test(test_mtplx_and_vllm_mlx),
		cmocka_unit_test(test_mtplx_and_vllm),
		cmocka_unit_test(test_conflict_vllm_vllm_mlx),
		cmocka_unit_test(test_conflict_pr990_mtplx),
		cmocka_unit_test(test_ollama_mlx_on_mlx_trunk),
		cmocka_unit_test(test_trunk_blocked),
		cmocka_unit_test(test_experts_conflict),
		cmocka_unit_test(test_plain_family),
		cmocka_unit_test(test_trunk_only_target),
		cmocka_unit_test(test_globbed_sidecar_judged),
		cmocka_unit_test(test_refused_head),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
