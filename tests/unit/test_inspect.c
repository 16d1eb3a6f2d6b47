/*
 * test_inspect.c: the inspection as a whole (inspect.h) on the generated
 * fixture checkpoints ($FIXTURES, made by tests/fixtures/gen_fixtures.py):
 * the trunk is set 0, and fg_inspect_summarize() gives the fields the
 * store keeps (family, ok, trunk probe, head convention, verdicts) for a
 * raw Hugging Face release, an absolute MLX artifact, a checkpoint without
 * a head, and a plain family without a probe (skipped without the
 * fixtures).  Then the verdicts derived on small synthetic checkpoints
 * written here: a delta trunk with an absolute head, double-shifted head and
 * trunk, mixed q/k, no evidence, a plain family that never shifts, the
 * runtime shift verdicts, the head's payload, structure against values.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forge/model/inspect.h"
#include "tests/unit/support.h"

/* Inspect the fixture called name with the layout's default runtimes (skipped without fixtures). */
static struct fg_inspect *inspect_fixture(const char *name)
{
	struct fg_err err = { 0 };
	struct fg_inspect *r = NULL;
	char path[PATH_MAX];

	if (!fixture_path(path, sizeof(path), name))
		skip();
	if (fg_inspect_run(&r, path, NULL, 0, &err) != 0)
		fail_msg("inspecting %s: %s", path, err.msg);
	return r;
}

static int has_verdict(const struct fg_inspect_summary *s, const char *code)
{
	for (size_t i = 0; i < s->n_verdicts; i++)
		if (strcmp(s->verdicts[i].row->name, code) == 0)
			return 1;
	return 0;
}

static void test_trunk_is_set_zero(void **state)
{
	static const char *const names[] = { "qwen35_hf", "qwen35_mlx_sidecar", "qwen35_mlx_embedded", "glm45" };

	(void)state;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		struct fg_inspect *r = inspect_fixture(names[i]);

		assert_ptr_equal(fg_inspect_trunk(r), &r->sets[0]);
		assert_string_equal(fg_inspect_trunk(r)->set.name, "trunk");
		for (size_t k = 1; k < r->n_sets; k++)
			assert_int_not_equal(r->sets[k].role, FG_ROLE_TRUNK);
		assert_non_null(fg_inspect_head(r));
		assert_int_equal(fg_inspect_trunk(r)->n_experts, 0);
		fg_inspect_free(r);
	}
}

static void test_summary_raw_hf(void **state)
{
	struct fg_inspect *r = inspect_fixture("qwen35_hf");
	struct fg_inspect_summary s;

	(void)state;
	fg_inspect_summarize(r, &s);
	assert_string_equal(s.family, "qwen3_5");
	assert_true(s.ok);
	assert_true(fabs(s.probe_mean - 0.7908) < 1e-3);
	assert_string_equal(s.head_convention, "delta");
	assert_int_equal(s.n_verdicts, r->verdicts.n);
	assert_ptr_equal(s.verdicts, r->verdicts.v);
	assert_true(has_verdict(&s, "raw_zero_centred_head"));
	fg_inspect_free(r);
}

static void test_summary_mlx_sidecar(void **state)
{
	struct fg_inspect *r = inspect_fixture("qwen35_mlx_sidecar");
	struct fg_inspect_summary s;

	(void)state;
	fg_inspect_summarize(r, &s);
	assert_string_equal(s.family, "qwen3_5");
	assert_true(s.ok);
	assert_true(fabs(s.probe_mean - 1.7913) < 1e-3);
	assert_string_equal(s.head_convention, "absolute");
	assert_int_equal(s.n_verdicts, 0);
	fg_inspect_free(r);
}

/*
 * The config declares a head no tensor holds: the empty "mtp" set has no
 * convention, and the note is info (issue 12): the default MLX targets load it.
 */
static void test_summary_no_head(void **state)
{
	struct fg_inspect *r = inspect_fixture("qwen35_mlx_no_head_declared");
	struct fg_inspect_summary s;

	(void)state;
	fg_inspect_summarize(r, &s);
	assert_true(s.ok);
	assert_null(s.head_convention);
	assert_null(fg_inspect_head(r));
	assert_true(has_verdict(&s, "mtp_declared_missing"));
	assert_true(isfinite(s.probe_mean) != 0);
	fg_inspect_free(r);
}

/* A plain family: no q_norm probe, the head's convention is "plain". */
static void test_summary_plain(void **state)
{
	struct fg_inspect *r = inspect_fixture("glm45");
	struct fg_inspect_summary s;

	(void)state;
	fg_inspect_summarize(r, &s);
	assert_string_equal(s.family, "glm4_moe");
	assert_true(isnan(s.probe_mean) != 0);
	assert_string_equal(s.head_convention, "plain");
	fg_inspect_free(r);
}

/* Expert layouts are decided once, in inspect, on head sets. */
static void test_experts_decided_in_inspect(void **state)
{
	struct fg_inspect *r = inspect_fixture("qwen35_moe_hf_numbered");
	const struct fg_set_report *head;

	(void)state;
	head = fg_inspect_head(r);
	assert_non_null(head);
	assert_true(head->n_experts > 0);
	assert_int_equal(head->experts[0].layout, FG_EXPERTS_NUMBERED);
	fg_inspect_free(r);
	r = inspect_fixture("qwen35_moe_hf_ambiguous");
	head = fg_inspect_head(r);
	assert_non_null(head);
	assert_int_equal(head->experts[0].layout, FG_EXPERTS_AMBIGUOUS);
	assert_non_null(fg_verdicts_find(&r->verdicts, FG_V_EXPERT_LAYOUT_AMBIGUOUS));
	fg_inspect_free(r);
}

/* ---- verdicts derived on synthetic checkpoints ---- */

/*
 * Each case is a small checkpoint folder written with support.c's shard
 * writer: a config.json, one model.safetensors of 4-element norms of chosen
 * means (and whatever else the case needs), inspected for the runtimes the
 * case names.  The assertions name verdict codes (FG_V_*), their severity
 * and the set they are raised on, found with fg_verdicts_find.
 */

#define QWEN "{\"model_type\": \"qwen3_5\", \"num_hidden_layers\": 1, \"mtp_num_hidden_layers\": 1}"
#define GLM "{\"model_type\": \"glm4_moe\", \"num_hidden_layers\": 1, \"num_nextn_predict_layers\": 1}"

static char tmp[PATH_MAX];
static int case_no;

static int setup(void **state)
{
	(void)state;
	tmpdir_new(tmp, sizeof(tmp), "inspect");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return rm_tree(tmp);
}

/* A delta- or absolute-looking trunk: q/k norms of mean qk, input and post-attention layernorms of mean low. */
static void trunk(struct shard *s, float qk, float low)
{
	shard_norm(s, "model.layers.0.self_attn.q_norm.weight", qk);
	shard_norm(s, "model.layers.0.self_attn.k_norm.weight", qk);
	shard_norm(s, "model.layers.0.input_layernorm.weight", low);
	shard_norm(s, "model.layers.0.post_attention_layernorm.weight", low);
	shard_norm(s, "model.norm.weight", 2.5f);
}

/* An mtp.* head: q_norm mean q, k_norm mean k, low-set norms mean low, and its fc. */
static void head(struct shard *s, float q, float k, float low)
{
	static const float fc[4] = { 0.01f, -0.02f, 0.03f, -0.04f };

	shard_norm(s, "mtp.pre_fc_norm_embedding.weight", low);
	shard_norm(s, "mtp.pre_fc_norm_hidden.weight", low);
	shard_norm(s, "mtp.layers.0.input_layernorm.weight", low);
	shard_norm(s, "mtp.layers.0.self_attn.q_norm.weight", q);
	shard_norm(s, "mtp.layers.0.self_attn.k_norm.weight", k);
	shard_norm(s, "mtp.norm.weight", 2.5f);
	shard_f32(s, "mtp.fc.weight", fc, 4);
}

/* Save s as TMP/caseN/model.safetensors beside config, and inspect it for runtimes (NULL-terminated; NULL: defaults). */
static struct fg_inspect *inspect_case(struct shard *s, const char *config, const char *const *runtimes)
{
	char dir[PATH_MAX], name[32];
	struct fg_inspect *r = NULL;
	struct fg_err err = { 0 };
	size_t n = 0;

	snprintf(name, sizeof(name), "case%d", ++case_no);
	make_dir(dir, sizeof(dir), tmp, name);
	write_text(dir, "config.json", config);
	shard_save(s, dir, "model.safetensors");
	while (runtimes && runtimes[n])
		n++;
	if (fg_inspect_run(&r, dir, runtimes, n, &err) != 0)
		fail_msg("inspecting %s: %s", dir, err.msg);
	return r;
}

static void print_verdicts(const struct fg_inspect *r)
{
	for (size_t i = 0; i < r->verdicts.n; i++)
		print_message("  verdict %s (%s) on '%s': %s\n", r->verdicts.v[i].row->name,
			      fg_severity_name(r->verdicts.v[i].row->severity), r->verdicts.v[i].set,
			      r->verdicts.v[i].detail);
}

/* The verdict code of r, raised on set with severity sev (the report is printed when it is not there). */
static const struct fg_verdict *expect_verdict(const struct fg_inspect *r, enum fg_verdict_code code, const char *set,
					       enum fg_severity sev)
{
	const struct fg_verdict *v = fg_verdicts_find(&r->verdicts, code);

	if (!v) {
		print_verdicts(r);
		fail_msg("no %s verdict", fg_verdict_table[code].name);
	}
	assert_int_equal(v->row->code, code);
	assert_int_equal(v->row->severity, sev);
	assert_string_equal(v->set, set);
	return v;
}

static void expect_no_verdict(const struct fg_inspect *r, enum fg_verdict_code code)
{
	if (fg_verdicts_find(&r->verdicts, code)) {
		print_verdicts(r);
		fail_msg("unexpected %s verdict", fg_verdict_table[code].name);
	}
}

static int names_runtime(const struct fg_verdict *v, const char *id)
{
	for (size_t i = 0; i < v->n_runtimes; i++)
		if (strcmp(v->runtimes[i], id) == 0)
			return 1;
	return 0;
}

static int names_tensor(const struct fg_verdict *v, const char *name)
{
	for (size_t i = 0; i < v->n_tensors && i < FG_VERDICT_MAX_LIST; i++)
		if (strcmp(v->tensors[i], name) == 0)
			return 1;
	return 0;
}

static enum fg_convention conv_of(const struct fg_inspect *r, const char *set)
{
	const struct fg_decision *d = NULL;

	assert_non_null(fg_inspect_set(r, set, &d));
	return d->conv;
}

static void test_delta_trunk_absolute_head(void **state)
{
	static const char *const hf[] = { "vllm", NULL }; /* the old "hf" row, now an alias */
	struct shard *s = shard_new();
	struct fg_inspect *r;
	const struct fg_verdict *v;

	(void)state;
	trunk(s, 0.78f, 0.3f);
	head(s, 1.78f, 1.77f, 0.97f);
	r = inspect_case(s, QWEN, hf);
	assert_int_equal(conv_of(r, "trunk"), FG_CONV_DELTA);
	assert_int_equal(conv_of(r, "mtp"), FG_CONV_ABSOLUTE);
	/* Hugging Face adds 1 at run time: right for the delta trunk, twice for the absolute head. */
	v = expect_verdict(r, FG_V_HEAD_CONVENTION_MISMATCH, "mtp", FG_SEV_ERROR);
	assert_true(names_runtime(v, "vllm"));
	assert_non_null(strstr(v->detail, "the absolute head loads double_shifted ("));
	expect_no_verdict(r, FG_V_TRUNK_MISSING_SHIFT);
	expect_no_verdict(r, FG_V_TRUNK_DOUBLE_SHIFT_AT_LOAD);
	expect_no_verdict(r, FG_V_RAW_ZERO_CENTRED_HEAD);
	assert_false(r->ok);
	fg_inspect_free(r);

	/* The same with a delta head: only the informational raw-head verdict. */
	s = shard_new();
	trunk(s, 0.78f, 0.3f);
	head(s, 0.78f, 0.77f, 0.3f);
	r = inspect_case(s, QWEN, hf);
	expect_verdict(r, FG_V_RAW_ZERO_CENTRED_HEAD, "mtp", FG_SEV_INFO);
	expect_no_verdict(r, FG_V_HEAD_CONVENTION_MISMATCH);
	assert_int_equal(r->verdicts.n, 1);
	assert_true(r->ok);
	fg_inspect_free(r);

	/* That delta head where nothing heals it (mlx-lm PR 990 keeps it, shifting only for a raw conv1d). */
	{
		static const char *const pr990[] = { "mlx-lm-pr990", NULL };

		s = shard_new();
		trunk(s, 0.78f, 0.3f);
		head(s, 0.78f, 0.77f, 0.3f);
		r = inspect_case(s, QWEN, pr990);
		v = expect_verdict(r, FG_V_HEAD_CONVENTION_MISMATCH, "mtp", FG_SEV_ERROR);
		assert_true(names_runtime(v, "mlx-lm-pr990"));
		assert_non_null(strstr(v->detail, "the delta head loads inverted ("));
		expect_no_verdict(r, FG_V_RAW_ZERO_CENTRED_HEAD);
		fg_inspect_free(r);
	}
}

static void test_double_shifted(void **state)
{
	static const char *const hf[] = { "vllm", NULL }; /* the old "hf" row, now an alias */
	struct shard *s = shard_new();
	struct fg_inspect *r;
	const struct fg_verdict *v;

	(void)state;
	trunk(s, 0.78f, 0.3f);
	head(s, 2.79f, 2.78f, 1.97f);
	r = inspect_case(s, QWEN, hf);
	assert_int_equal(conv_of(r, "mtp"), FG_CONV_DOUBLE_SHIFTED);
	v = expect_verdict(r, FG_V_HEAD_DOUBLE_SHIFTED, "mtp", FG_SEV_ERROR);
	assert_true(names_tensor(v, "mtp.layers.0.self_attn.q_norm.weight"));
	assert_non_null(strstr(v->detail, "above 2.4 on disk: head already shifted twice"));
	/* A broken convention is that verdict alone: no runtime mismatch on top of it. */
	expect_no_verdict(r, FG_V_HEAD_CONVENTION_MISMATCH);
	expect_no_verdict(r, FG_V_TRUNK_DOUBLE_SHIFTED);
	fg_inspect_free(r);

	/* A trunk shifted twice on disk: its own code, and no at-load verdict for a runtime adding 1 again. */
	s = shard_new();
	trunk(s, 2.79f, 1.97f);
	r = inspect_case(s, "{\"model_type\": \"qwen3_5\", \"num_hidden_layers\": 1}", hf);
	v = expect_verdict(r, FG_V_TRUNK_DOUBLE_SHIFTED, "trunk", FG_SEV_ERROR);
	assert_true(names_tensor(v, "model.layers.0.self_attn.q_norm.weight"));
	expect_no_verdict(r, FG_V_TRUNK_DOUBLE_SHIFT_AT_LOAD);
	expect_no_verdict(r, FG_V_HEAD_DOUBLE_SHIFTED);
	fg_inspect_free(r);
}

static void test_mixed_and_no_evidence(void **state)
{
	static const char *const hf[] = { "vllm", NULL }; /* the old "hf" row, now an alias */
	struct shard *s = shard_new();
	struct fg_inspect *r;
	const struct fg_verdict *v;

	(void)state;
	/* A partial shift: q absolute, k delta. */
	trunk(s, 0.78f, 0.3f);
	head(s, 1.78f, 0.78f, 0.97f);
	r = inspect_case(s, QWEN, hf);
	assert_int_equal(conv_of(r, "mtp"), FG_CONV_MIXED);
	v = expect_verdict(r, FG_V_MIXED_CONVENTION, "mtp", FG_SEV_ERROR);
	assert_true(names_tensor(v, "mtp.layers.0.self_attn.q_norm.weight"));
	assert_true(names_tensor(v, "mtp.layers.0.self_attn.k_norm.weight"));
	expect_no_verdict(r, FG_V_HEAD_CONVENTION_MISMATCH);
	fg_inspect_free(r);

	/* A head whose only norms are never evidence (final and linear_attn norms). */
	s = shard_new();
	trunk(s, 0.78f, 0.3f);
	shard_norm(s, "mtp.norm.weight", 2.25f);
	shard_norm(s, "mtp.layers.0.linear_attn.norm.weight", 1.0f);
	r = inspect_case(s, QWEN, hf);
	assert_int_equal(conv_of(r, "mtp"), FG_CONV_NO_EVIDENCE);
	v = expect_verdict(r, FG_V_NO_CONVENTION_EVIDENCE, "mtp", FG_SEV_ERROR);
	assert_non_null(strstr(v->detail, "2 norm tensor(s) but no q/k or low-set norm"));
	expect_no_verdict(r, FG_V_RAW_ZERO_CENTRED_HEAD);
	fg_inspect_free(r);
}

static void test_plain_family_never_shifts(void **state)
{
	struct shard *s = shard_new();
	struct fg_inspect *r;
	struct fg_inspect_summary sum;
	static const enum fg_verdict_code convention_codes[] = {
		FG_V_TRUNK_DOUBLE_SHIFTED, FG_V_HEAD_DOUBLE_SHIFTED, FG_V_MIXED_CONVENTION,
		FG_V_NO_CONVENTION_EVIDENCE, FG_V_RAW_ZERO_CENTRED_HEAD, FG_V_HEAD_CONVENTION_MISMATCH,
		FG_V_TRUNK_MISSING_SHIFT, FG_V_TRUNK_DOUBLE_SHIFT_AT_LOAD, FG_V_EMBEDDED_MTP_SHIFT_HAZARD,
		FG_V_CONVENTION_STRUCTURE_MISMATCH, FG_V_BF16_SHIFT_PRECISION_LOSS, FG_V_BF16_SHIFT_ROUNDING,
	};

	(void)state;
	/*
	 * GLM's head is appended as layer 1 (num_hidden_layers 1).  Values that
	 * would read double-shifted (2.79) or mixed in a zero-centred family mean
	 * nothing here, for every runtime.
	 */
	shard_norm(s, "model.layers.0.self_attn.q_norm.weight", 2.79f);
	shard_norm(s, "model.layers.0.self_attn.k_norm.weight", 0.78f);
	shard_norm(s, "model.layers.0.input_layernorm.weight", 0.3f);
	shard_norm(s, "model.norm.weight", 2.5f);
	shard_norm(s, "model.layers.1.enorm.weight", 2.79f);
	shard_norm(s, "model.layers.1.hnorm.weight", 0.2f);
	shard_norm(s, "model.layers.1.input_layernorm.weight", 2.79f);
	shard_norm(s, "model.layers.1.self_attn.q_norm.weight", 1.78f);
	shard_norm(s, "model.layers.1.self_attn.k_norm.weight", 0.78f);
	{
		static const float w[4] = { 0.1f, 0.2f, 0.3f, 0.4f };

		/* A conv1d in Hugging Face layout [C, 1, K] would make mlx-lm shift a zero-centred trunk. */
		static const uint64_t conv[3] = { 2, 1, 2 };

		shard_f32(s, "model.layers.1.eh_proj.weight", w, 4);
		shard_add(s, "model.layers.0.linear_attn.conv1d.weight", "F32", 3, conv, w);
	}
	r = inspect_case(s, GLM, NULL);
	assert_string_equal(r->family->id, "glm4_moe");
	assert_string_equal(r->structure.conv1d, "hf");
	assert_int_equal(conv_of(r, "trunk"), FG_CONV_PLAIN);
	assert_int_equal(conv_of(r, "mtp"), FG_CONV_PLAIN);
	for (size_t i = 0; i < sizeof(convention_codes) / sizeof(convention_codes[0]); i++)
		expect_no_verdict(r, convention_codes[i]);
	/* No runtime shifts a plain trunk or head. */
	for (size_t i = 0; i < r->n_runtimes; i++) {
		assert_false(r->runtimes[i].trunk_shift);
		assert_false(r->runtimes[i].head_shift);
	}
	fg_inspect_summarize(r, &sum);
	assert_string_equal(sum.head_convention, "plain");
	assert_true(sum.ok);
	fg_inspect_free(r);
}

static void test_runtime_shifts(void **state)
{
	static const char *const mlx031[] = { "mlx-lm-0.31", NULL };
	static const char *const mlx032[] = { "mlx-lm-0.32", NULL };
	static const char *const hf[] = { "vllm", NULL }; /* the old "hf" row, now an alias */
	struct shard *s = shard_new();
	struct fg_inspect *r;
	const struct fg_verdict *v;

	(void)state;
	/* An absolute MLX trunk with embedded mtp.* keys: mlx-lm 0.31 adds 1 because of the keys. */
	shard_meta(s, "format", "mlx");
	trunk(s, 1.78f, 0.97f);
	head(s, 1.78f, 1.77f, 0.97f);
	r = inspect_case(s, QWEN, mlx031);
	assert_string_equal(r->layout, "mlx");
	v = expect_verdict(r, FG_V_EMBEDDED_MTP_SHIFT_HAZARD, "trunk", FG_SEV_ERROR);
	assert_true(names_runtime(v, "mlx-lm-0.31"));
	/* Every runtime the keys endanger is named, targeted or not. */
	assert_true(names_runtime(v, "mtplx-2.12"));
	assert_false(names_runtime(v, "mlx-lm-0.32"));
	assert_true(names_tensor(v, "mtp.fc.weight"));
	assert_int_equal(v->n_tensors, 7);
	expect_no_verdict(r, FG_V_TRUNK_DOUBLE_SHIFT_AT_LOAD);
	fg_inspect_free(r);

	/* An absolute trunk for Hugging Face, which adds 1 at run time: a double shift at load, not by keys. */
	s = shard_new();
	trunk(s, 1.78f, 0.97f);
	r = inspect_case(s, "{\"model_type\": \"qwen3_5\", \"num_hidden_layers\": 1}", hf);
	v = expect_verdict(r, FG_V_TRUNK_DOUBLE_SHIFT_AT_LOAD, "trunk", FG_SEV_ERROR);
	assert_true(names_runtime(v, "vllm"));
	expect_no_verdict(r, FG_V_EMBEDDED_MTP_SHIFT_HAZARD);
	fg_inspect_free(r);

	/* A delta trunk for mlx-lm 0.32, which shifts only for a raw conv1d: the +1 is missing. */
	s = shard_new();
	trunk(s, 0.78f, 0.3f);
	r = inspect_case(s, "{\"model_type\": \"qwen3_5\", \"num_hidden_layers\": 1}", mlx032);
	v = expect_verdict(r, FG_V_TRUNK_MISSING_SHIFT, "trunk", FG_SEV_ERROR);
	assert_true(names_runtime(v, "mlx-lm-0.32"));
	fg_inspect_free(r);
}

/* A 1-D BF16 norm of four copies of bits. */
static void norm16(struct shard *s, const char *name, uint16_t bits)
{
	static const uint64_t four[1] = { 4 };
	const uint16_t v[4] = { bits, bits, bits, bits };

	shard_add(s, name, "BF16", 1, four, v);
}

/* A linear-attention conv1d in the raw Hugging Face layout [C, 1, K]. */
static void raw_conv1d(struct shard *s)
{
	static const float w[4] = { 0.1f, 0.2f, 0.3f, 0.4f };
	static const uint64_t conv[3] = { 2, 1, 2 };

	shard_add(s, "model.layers.0.linear_attn.conv1d.weight", "F32", 3, conv, w);
}

static void test_head_payload_verdicts(void **state)
{
	static const char *const hf[] = { "vllm", NULL }; /* the old "hf" row, now an alias */
	static const char *const ollama[] = { "ollama", NULL };
	static const char *const pr990[] = { "mlx-lm-pr990", NULL };
	static const uint64_t two_by_two[2] = { 2, 2 };
	const float nan_norm[4] = { 0.78f, NAN, 0.78f, 0.78f };
	struct shard *s = shard_new();
	struct fg_inspect *r;
	const struct fg_verdict *v;

	(void)state;
	/* A NaN in a head norm. */
	trunk(s, 0.78f, 0.3f);
	head(s, 0.78f, 0.77f, 0.3f);
	shard_f32(s, "mtp.layers.0.post_attention_layernorm.weight", nan_norm, 4);
	r = inspect_case(s, QWEN, hf);
	v = expect_verdict(r, FG_V_NONFINITE_NORM, "mtp", FG_SEV_ERROR);
	assert_true(names_tensor(v, "mtp.layers.0.post_attention_layernorm.weight"));
	assert_int_equal(v->n_tensors, 1);
	fg_inspect_free(r);

	/* Every head norm exactly zero (-0 too); then norms gone and every byte zero. */
	s = shard_new();
	trunk(s, 0.78f, 0.3f);
	shard_norm(s, "mtp.layers.0.input_layernorm.weight", 0.0f);
	shard_norm(s, "mtp.layers.0.self_attn.q_norm.weight", -0.0f);
	shard_norm(s, "mtp.norm.weight", 0.0f);
	r = inspect_case(s, QWEN, hf);
	v = expect_verdict(r, FG_V_DEGENERATE_HEAD, "mtp", FG_SEV_ERROR);
	assert_string_equal(v->detail, "all 3 head norm tensor(s) are exactly zero");
	fg_inspect_free(r);
	s = shard_new();
	trunk(s, 0.78f, 0.3f);
	shard_add(s, "mtp.fc.weight", "BF16", 2, two_by_two, NULL);
	shard_add(s, "mtp.layers.0.self_attn.q_proj.weight", "BF16", 2, two_by_two, NULL);
	r = inspect_case(s, QWEN, hf);
	v = expect_verdict(r, FG_V_DEGENERATE_HEAD, "mtp", FG_SEV_ERROR);
	assert_string_equal(v->detail, "none of the 2 head tensors has a non-zero byte");
	fg_inspect_free(r);
	/* One zero norm among others is no degenerate head. */
	s = shard_new();
	trunk(s, 0.78f, 0.3f);
	head(s, 0.78f, 0.77f, 0.3f);
	shard_norm(s, "mtp.layers.0.post_attention_layernorm.weight", 0.0f);
	r = inspect_case(s, QWEN, hf);
	expect_no_verdict(r, FG_V_DEGENERATE_HEAD);
	fg_inspect_free(r);
	/* One non-zero byte is a payload. */
	s = shard_new();
	trunk(s, 0.78f, 0.3f);
	{
		const uint16_t w[4] = { 0, 0, 0, 1 };

		shard_add(s, "mtp.fc.weight", "BF16", 2, two_by_two, w);
	}
	r = inspect_case(s, QWEN, hf);
	expect_no_verdict(r, FG_V_DEGENERATE_HEAD);
	fg_inspect_free(r);

	/* Declared, but no tensor holds it: the verdict names no set. */
	s = shard_new();
	trunk(s, 0.78f, 0.3f);
	r = inspect_case(s, QWEN, hf);
	v = expect_verdict(r, FG_V_MTP_DECLARED_MISSING, "", FG_SEV_INFO);
	assert_non_null(strstr(v->detail, "declares 1 MTP layer(s)"));
	fg_inspect_free(r);

	/* A quantized head, and a norm that is no 1-D vector. */
	s = shard_new();
	trunk(s, 0.78f, 0.3f);
	head(s, 0.78f, 0.77f, 0.3f);
	shard_add(s, "mtp.layers.0.self_attn.q_proj.weight", "U32", 2, two_by_two, NULL);
	shard_add(s, "mtp.layers.0.self_attn.q_proj.scales", "BF16", 2, two_by_two, NULL);
	shard_add(s, "mtp.layers.0.post_attention_layernorm.weight", "F32", 2, two_by_two, NULL);
	r = inspect_case(s, QWEN, hf);
	expect_verdict(r, FG_V_QUANTIZED_MTP_HEAD, "mtp", FG_SEV_WARNING);
	v = expect_verdict(r, FG_V_MALFORMED_CHECKPOINT, "mtp", FG_SEV_ERROR);
	assert_true(names_tensor(v, "mtp.layers.0.post_attention_layernorm.weight"));
	fg_inspect_free(r);

	/*
	 * A delta head in BF16 that a runtime shifts with a 16-bit sum (mlx-lm PR 990's head keeps the
	 * array's BF16), once per set with the worst error (issue 12): 1 + 0.30078125 is a tie between two
	 * BF16 steps of 2^-7, half a step off (rounding, info); with mtp.norm at 1.2265625, 2.2265625 ties
	 * between steps of 2^-6 and lands 2^-7 off (a warning).  Ollama's +1 is F32: no verdict.  A raw
	 * conv1d [C, 1, K] is what makes mlx-lm's sanitize shift (PR 1623).
	 */
	s = shard_new();
	trunk(s, 0.78f, 0.3f);
	raw_conv1d(s);
	norm16(s, "mtp.layers.0.input_layernorm.weight", 0x3e9a);   /* 0.30078125 */
	norm16(s, "mtp.layers.0.self_attn.q_norm.weight", 0x3f48);  /* 0.78125: 1.78125 exact */
	norm16(s, "mtp.layers.0.self_attn.k_norm.weight", 0x3f48);
	r = inspect_case(s, QWEN, pr990);
	assert_int_equal(conv_of(r, "mtp"), FG_CONV_DELTA);
	v = expect_verdict(r, FG_V_BF16_SHIFT_ROUNDING, "mtp", FG_SEV_INFO);
	assert_true(names_runtime(v, "mlx-lm-pr990"));
	assert_non_null(strstr(v->detail, "3 delta norm(s) stored in 16-bit get +1 at load as a 16-bit sum: the worst "
				   "effective gain is off by 0.00391 (mtp.layers.0.input_layernorm[0]: 1 + 0.3007812 "
				   "stored as 1.296875;"));
	expect_no_verdict(r, FG_V_BF16_SHIFT_PRECISION_LOSS);
	fg_inspect_free(r);
	s = shard_new();
	trunk(s, 0.78f, 0.3f);
	norm16(s, "mtp.layers.0.input_layernorm.weight", 0x3e9a);
	norm16(s, "mtp.layers.0.self_attn.q_norm.weight", 0x3f48);
	norm16(s, "mtp.layers.0.self_attn.k_norm.weight", 0x3f48);
	norm16(s, "mtp.norm.weight", 0x3f9d);                       /* 1.2265625 */
	raw_conv1d(s);
	r = inspect_case(s, QWEN, pr990);
	v = expect_verdict(r, FG_V_BF16_SHIFT_PRECISION_LOSS, "mtp", FG_SEV_WARNING);
	assert_non_null(strstr(v->detail, "4 delta norm(s)"));
	assert_non_null(strstr(v->detail, "off by 0.00781 (mtp.norm[0]: 1 + 1.226562 stored as 2.21875;"));
	assert_true(names_tensor(v, "mtp.norm.weight"));
	expect_no_verdict(r, FG_V_BF16_SHIFT_ROUNDING);
	fg_inspect_free(r);
	s = shard_new();
	trunk(s, 0.78f, 0.3f);
	norm16(s, "mtp.layers.0.input_layernorm.weight", 0x3e9a);
	norm16(s, "mtp.layers.0.self_attn.q_norm.weight", 0x3f48);
	norm16(s, "mtp.layers.0.self_attn.k_norm.weight", 0x3f48);
	norm16(s, "mtp.norm.weight", 0x3f9d);
	r = inspect_case(s, QWEN, ollama);
	expect_no_verdict(r, FG_V_BF16_SHIFT_PRECISION_LOSS);
	expect_no_verdict(r, FG_V_BF16_SHIFT_ROUNDING);
	fg_inspect_free(r);
	/* An absolute head in BF16 shifted again is a mismatch, but no precision loss of a delta set. */
	s = shard_new();
	trunk(s, 0.78f, 0.3f);
	norm16(s, "mtp.layers.0.input_layernorm.weight", 0x3f80);  /* 1.0 */
	norm16(s, "mtp.layers.0.self_attn.q_norm.weight", 0x3fe4); /* 1.78125 */
	norm16(s, "mtp.layers.0.self_attn.k_norm.weight", 0x3fe4);
	r = inspect_case(s, QWEN, ollama);
	assert_int_equal(conv_of(r, "mtp"), FG_CONV_ABSOLUTE);
	expect_verdict(r, FG_V_HEAD_CONVENTION_MISMATCH, "mtp", FG_SEV_ERROR);
	expect_no_verdict(r, FG_V_BF16_SHIFT_PRECISION_LOSS);
	fg_inspect_free(r);
}

static void test_structure_against_values(void **state)
{
	static const char *const hf[] = { "vllm", NULL }; /* the old "hf" row, now an alias */
	struct shard *s = shard_new();
	struct fg_inspect *r;
	const struct fg_verdict *v;

	(void)state;
	/* config.json declares absolute head norms; the values say delta. */
	trunk(s, 0.78f, 0.3f);
	head(s, 0.78f, 0.77f, 0.3f);
	r = inspect_case(s,
			 "{\"model_type\": \"qwen3_5\", \"num_hidden_layers\": 1, \"mtp_num_hidden_layers\": 1,"
			 " \"mtp_norm_encoding\": \"absolute\"}",
			 hf);
	v = expect_verdict(r, FG_V_CONVENTION_STRUCTURE_MISMATCH, "mtp", FG_SEV_ERROR);
	assert_non_null(strstr(v->detail, "config.json mtp_norm_encoding says absolute but the head's norms are delta"));
	fg_inspect_free(r);
	/* Declared delta, values delta: nothing. */
	s = shard_new();
	trunk(s, 0.78f, 0.3f);
	head(s, 0.78f, 0.77f, 0.3f);
	r = inspect_case(s,
			 "{\"model_type\": \"qwen3_5\", \"num_hidden_layers\": 1, \"mtp_num_hidden_layers\": 1,"
			 " \"mtplx_mtp_norm_encoding\": \"delta\"}",
			 hf);
	expect_no_verdict(r, FG_V_CONVENTION_STRUCTURE_MISMATCH);
	fg_inspect_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_trunk_is_set_zero),
		cmocka_unit_test(test_summary_raw_hf),
		cmocka_unit_test(test_summary_mlx_sidecar),
		cmocka_unit_test(test_summary_no_head),
		cmocka_unit_test(test_summary_plain),
		cmocka_unit_test(test_experts_decided_in_inspect),
		cmocka_unit_test(test_delta_trunk_absolute_head),
		cmocka_unit_test(test_double_shifted),
		cmocka_unit_test(test_mixed_and_no_evidence),
		cmocka_unit_test(test_plain_family_never_shifts),
		cmocka_unit_test(test_runtime_shifts),
		cmocka_unit_test(test_head_payload_verdicts),
		cmocka_unit_test(test_structure_against_values),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
