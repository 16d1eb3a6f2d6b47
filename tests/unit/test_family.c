/*
 * test_family.c: the family table (family.h) and the tensor-name rules
 * (names.h), against docs/domain.md sections 1 and 2 and docs/interfaces.md section 3.
 *
 * - fg_family_detect on configs written here: model_type, then
 *   text_config.model_type, then architectures; unknown configs are
 *   "unknown", never a guess; the MoE flag from the type or an expert count.
 * - fg_family_declared_mtp: the first count key present, MiMo-V2's implied 3,
 *   -1 when nothing is declared.
 * - The name rules: evidence class of every norm, which norms are
 *   zero-centred, which mlx-lm shifts, prefix stripping, head schemes, layer
 *   numbers.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "forge/model/family.h"
#include "forge/model/names.h"

/* Detect the family of a config given as JSON text; *moe gets the flag. */
static const struct fg_family *detect(const char *json, int *moe)
{
	cJSON *cfg = cJSON_Parse(json);
	const struct fg_family *fam;

	assert_non_null(cfg);
	*moe = -1;
	fam = fg_family_detect(cfg, moe);
	cJSON_Delete(cfg);
	assert_non_null(fam);
	return fam;
}

static void test_detect_by_model_type(void **state)
{
	/* Every row of docs/domain.md section 1, by its config model_type. */
	static const struct {
		const char *model_type;
		const char *id;
		enum fg_family_style style;
		enum fg_name_scheme scheme;
		int hidden_first;
	} rows[] = {
		{ "qwen3_next", "qwen3_next", FG_STYLE_ZERO_CENTRED, FG_SCHEME_PREFIX, 0 },
		{ "qwen3_5", "qwen3_5", FG_STYLE_ZERO_CENTRED, FG_SCHEME_PREFIX, 0 },
		{ "qwen3_5_moe", "qwen3_5", FG_STYLE_ZERO_CENTRED, FG_SCHEME_PREFIX, 0 },
		{ "qwen3_5_text", "qwen3_5", FG_STYLE_ZERO_CENTRED, FG_SCHEME_PREFIX, 0 },
		{ "qwen3_5_moe_text", "qwen3_5", FG_STYLE_ZERO_CENTRED, FG_SCHEME_PREFIX, 0 },
		{ "glm4_moe", "glm4_moe", FG_STYLE_PLAIN, FG_SCHEME_APPENDED, 0 },
		{ "glm4_moe_lite", "glm4_moe_lite", FG_STYLE_PLAIN, FG_SCHEME_APPENDED, 0 },
		{ "glm_moe_dsa", "glm_moe_dsa", FG_STYLE_PLAIN, FG_SCHEME_APPENDED, 0 },
		{ "deepseek_v3", "deepseek_v3", FG_STYLE_PLAIN, FG_SCHEME_APPENDED, 0 },
		{ "deepseek_v32", "deepseek_v32", FG_STYLE_PLAIN, FG_SCHEME_APPENDED, 0 },
		{ "mimo", "mimo", FG_STYLE_PLAIN, FG_SCHEME_MTP_LAYERS, 1 },
		{ "mimo_v2_flash", "mimo_v2", FG_STYLE_PLAIN, FG_SCHEME_PREFIX, 0 },
	};
	char json[128];
	int moe;

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct fg_family *fam;

		snprintf(json, sizeof(json), "{\"model_type\": \"%s\"}", rows[i].model_type);
		fam = detect(json, &moe);
		if (strcmp(fam->id, rows[i].id) != 0)
			fail_msg("model_type %s: family %s, want %s", rows[i].model_type, fam->id, rows[i].id);
		assert_int_equal(fam->norm_style, rows[i].style);
		assert_int_equal(fam->scheme, rows[i].scheme);
		assert_int_equal(fam->hidden_first, rows[i].hidden_first);
		assert_int_not_equal(moe, -1);
	}
}

static void test_detect_text_config_and_order(void **state)
{
	const struct fg_family *fam;
	int moe;

	(void)state;
	/* A wrapper whose own model_type is unknown: text_config decides. */
	fam = detect("{\"model_type\": \"some_vl_wrapper\","
		     " \"text_config\": {\"model_type\": \"qwen3_5_moe_text\"}}", &moe);
	assert_string_equal(fam->id, "qwen3_5");
	assert_int_equal(moe, 1);
	fam = detect("{\"text_config\": {\"model_type\": \"qwen3_5_text\"}}", &moe);
	assert_string_equal(fam->id, "qwen3_5");
	assert_int_equal(moe, 0);
	/* model_type is read before text_config.model_type. */
	fam = detect("{\"model_type\": \"glm4_moe\","
		     " \"text_config\": {\"model_type\": \"qwen3_5_text\"}}", &moe);
	assert_string_equal(fam->id, "glm4_moe");
	/* ... and both before architectures. */
	fam = detect("{\"model_type\": \"deepseek_v3\","
		     " \"architectures\": [\"MiMoForCausalLM\"]}", &moe);
	assert_string_equal(fam->id, "deepseek_v3");
}

static void test_detect_by_architectures(void **state)
{
	static const struct {
		const char *json;
		const char *id;
	} rows[] = {
		{ "{\"architectures\": [\"Qwen3_5MoeForConditionalGeneration\"]}", "qwen3_5" },
		{ "{\"architectures\": [\"Qwen3_5ForCausalLM\"]}", "qwen3_5" },
		{ "{\"architectures\": [\"Qwen3NextForCausalLM\"]}", "qwen3_next" },
		{ "{\"architectures\": [\"DeepseekV3ForCausalLM\"]}", "deepseek_v3" },
		{ "{\"architectures\": [\"MiMoForCausalLM\"]}", "mimo" },
		{ "{\"architectures\": [\"MiMoV2FlashForCausalLM\"]}", "mimo_v2" },
		/* Any entry of the list, not only the first. */
		{ "{\"architectures\": [\"SomethingElse\", \"Glm4MoeForCausalLM\"]}", "glm4_moe" },
		/* An unknown model_type falls through to architectures. */
		{ "{\"model_type\": \"mystery\", \"architectures\": [\"GlmMoeDsaForCausalLM\"]}",
		  "glm_moe_dsa" },
	};
	int moe;

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const char *id = detect(rows[i].json, &moe)->id;

		if (strcmp(id, rows[i].id) != 0)
			fail_msg("%s: family %s, want %s", rows[i].json, id, rows[i].id);
	}
}

static void test_detect_unknown(void **state)
{
	const struct fg_family *fam;
	int moe;

	(void)state;
	fam = detect("{\"model_type\": \"llama\", \"architectures\": [\"LlamaForCausalLM\"]}", &moe);
	assert_ptr_equal(fam, &fg_family_unknown);
	assert_string_equal(fam->id, "unknown");
	assert_int_equal(fam->norm_style, FG_STYLE_UNKNOWN);
	assert_int_equal(moe, 0);
	/* Architectures that are not a list of known names do not match. */
	fam = detect("{\"architectures\": \"Qwen3_5ForCausalLM\"}", &moe);
	assert_string_equal(fam->id, "unknown");
	fam = detect("{}", &moe);
	assert_string_equal(fam->id, "unknown");
	/* NULL config and NULL moe are allowed. */
	fam = fg_family_detect(NULL, NULL);
	assert_ptr_equal(fam, &fg_family_unknown);
	assert_string_equal(fg_family_style_name(fam->norm_style), "unknown");
}

static void test_detect_moe(void **state)
{
	int moe;

	(void)state;
	detect("{\"model_type\": \"qwen3_5_moe\"}", &moe);
	assert_int_equal(moe, 1);
	detect("{\"model_type\": \"qwen3_5\"}", &moe);
	assert_int_equal(moe, 0);
	detect("{\"model_type\": \"qwen3_5_text\"}", &moe);
	assert_int_equal(moe, 0);
	detect("{\"model_type\": \"qwen3_5_moe_text\"}", &moe);
	assert_int_equal(moe, 1);
	/* The top-level type is dense but text_config says MoE. */
	detect("{\"model_type\": \"qwen3_5\", \"text_config\": {\"model_type\": \"qwen3_5_moe_text\"}}",
	       &moe);
	assert_int_equal(moe, 1);
	/* An expert count declares MoE, at the top level or in text_config. */
	detect("{\"model_type\": \"qwen3_5\", \"text_config\": {\"num_experts\": 256}}", &moe);
	assert_int_equal(moe, 1);
	detect("{\"model_type\": \"qwen3_5\", \"num_experts\": 128}", &moe);
	assert_int_equal(moe, 1);
	detect("{\"model_type\": \"qwen3_5\", \"num_experts\": 0}", &moe);
	assert_int_equal(moe, 0);
}

static void test_family_all(void **state)
{
	static const char *const ids[] = {
		"qwen3_next", "qwen3_5", "glm4_moe", "glm4_moe_lite", "glm_moe_dsa",
		"deepseek_v3", "deepseek_v32", "mimo", "mimo_v2",
	};
	const struct fg_family *const *all;
	size_t n = 0;

	(void)state;
	all = fg_family_all(&n);
	assert_int_equal(n, sizeof(ids) / sizeof(ids[0]));
	/* Each vocabulary id exactly once, and "unknown" is not a row. */
	for (size_t k = 0; k < sizeof(ids) / sizeof(ids[0]); k++) {
		int found = 0;

		for (size_t i = 0; i < n; i++)
			found += strcmp(all[i]->id, ids[k]) == 0;
		assert_int_equal(found, 1);
	}
	for (size_t i = 0; i < n; i++) {
		assert_string_not_equal(all[i]->id, "unknown");
		assert_non_null(all[i]->mtp_count_keys);
		assert_non_null(all[i]->mtp_count_keys[0]);
		assert_non_null(all[i]->model_types[0].name);
		assert_non_null(all[i]->head_linears);
		/* Only the Qwen rows rename their heads to mtp.* */
		assert_int_equal(all[i]->strips_to_mtp, strncmp(all[i]->id, "qwen", 4) == 0);
		/* Each model type detects its own row with its own MoE flag. */
		for (const struct fg_model_type *t = all[i]->model_types; t->name; t++) {
			char json[96];
			int moe;

			snprintf(json, sizeof(json), "{\"model_type\": \"%s\"}", t->name);
			assert_ptr_equal(detect(json, &moe), all[i]);
			assert_int_equal(moe, t->moe);
		}
	}
}

/* The head linears an explicit policy quantizes: projections, DeepSeek's MLA and indexer ones. */
static void test_head_linears(void **state)
{
	static const char *const yes[] = {
		"mtp.layers.0.self_attn.q_proj", "model.layers.61.mlp.experts.3.down_proj", "o_proj",
		"model.layers.61.self_attn.q_a_proj", "model.layers.61.self_attn.kv_a_proj_with_mqa",
		"model.layers.61.self_attn.indexer.wq_b", "model.layers.61.self_attn.indexer.wk",
	};
	static const char *const no[] = {
		"mtp.fc", "model.layers.61.eh_proj", "mtp.layers.0.mlp.gate", "model.embed_tokens",
		"mtp.layers.0.self_attn.q_proj.bias", "input_proj", "shared_head.head", "wq_a",
	};
	const struct fg_family *const *all;
	size_t n = 0;

	(void)state;
	all = fg_family_all(&n);
	for (size_t i = 0; i <= n; i++) {
		const struct fg_family *fam = i < n ? all[i] : &fg_family_unknown;

		for (size_t k = 0; k < sizeof(yes) / sizeof(yes[0]); k++)
			assert_true(fg_family_is_head_linear(fam, yes[k]));
		for (size_t k = 0; k < sizeof(no) / sizeof(no[0]); k++)
			assert_false(fg_family_is_head_linear(fam, no[k]));
	}
}

/* Declared MTP layers of family model_type for a (merged) config. */
static int declared(const char *model_type, const char *json)
{
	char type_json[96];
	cJSON *cfg = cJSON_Parse(json);
	const struct fg_family *fam;
	int moe, n;

	snprintf(type_json, sizeof(type_json), "{\"model_type\": \"%s\"}", model_type);
	fam = detect(type_json, &moe);
	assert_non_null(cfg);
	n = fg_family_declared_mtp(fam, cfg);
	cJSON_Delete(cfg);
	return n;
}

static void test_declared_mtp(void **state)
{
	(void)state;
	/* Qwen: mtp_num_hidden_layers (folded up from text_config by the merge). */
	assert_int_equal(declared("qwen3_5", "{\"model_type\": \"qwen3_5\", \"mtp_num_hidden_layers\": 1}"), 1);
	/* ... or num_nextn_predict_layers. */
	assert_int_equal(declared("qwen3_next", "{\"num_nextn_predict_layers\": 2}"), 2);
	/* The first key present wins. */
	assert_int_equal(declared("qwen3_5", "{\"mtp_num_hidden_layers\": 1, \"num_nextn_predict_layers\": 4}"),
			 1);
	/* A key that is present and zero declares zero layers. */
	assert_int_equal(declared("qwen3_5", "{\"mtp_num_hidden_layers\": 0}"), 0);
	/* Absent on some Qwen3-Next configs: nothing declared. */
	assert_int_equal(declared("qwen3_next", "{\"hidden_size\": 2048}"), -1);
	assert_int_equal(declared("deepseek_v3", "{\"num_nextn_predict_layers\": 1}"), 1);
	assert_int_equal(declared("glm4_moe", "{\"num_nextn_predict_layers\": 1}"), 1);
	/* GLM's key is num_nextn_predict_layers only. */
	assert_int_equal(declared("glm4_moe", "{\"mtp_num_hidden_layers\": 2}"), -1);
	assert_int_equal(declared("mimo", "{}"), -1);
	/* MiMo-V2: not in config, 3 layers. */
	assert_int_equal(declared("mimo_v2_flash", "{\"hidden_size\": 4096}"), 3);
	/* A non-number is not a declaration. */
	assert_int_equal(declared("deepseek_v3", "{\"num_nextn_predict_layers\": \"1\"}"), -1);
}

static void test_norm_classify(void **state)
{
	static const struct {
		const char *name;
		enum fg_name_norm cls;
	} rows[] = {
		{ "model.layers.0.self_attn.q_norm.weight", FG_NAME_QK },
		{ "model.layers.3.self_attn.k_norm.weight", FG_NAME_QK },
		{ "language_model.model.layers.3.self_attn.q_norm.weight", FG_NAME_QK },
		{ "mtp.layers.0.self_attn.k_norm.weight", FG_NAME_QK },
		{ "model.layers.0.input_layernorm.weight", FG_NAME_LOW },
		{ "model.layers.0.post_attention_layernorm.weight", FG_NAME_LOW },
		{ "mtp.layers.0.input_layernorm.weight", FG_NAME_LOW },
		{ "mtp.pre_fc_norm_embedding.weight", FG_NAME_LOW },
		{ "model.mtp.pre_fc_norm_hidden.weight", FG_NAME_LOW },
		{ "model.layers.61.enorm.weight", FG_NAME_LOW },
		{ "model.layers.61.hnorm.weight", FG_NAME_LOW },
		{ "model.norm.weight", FG_NAME_FINAL },
		{ "language_model.model.norm.weight", FG_NAME_FINAL },
		{ "model.language_model.norm.weight", FG_NAME_FINAL },
		{ "mtp.norm.weight", FG_NAME_FINAL },
		{ "language_model.model.mtp.norm.weight", FG_NAME_FINAL },
		{ "model.layers.0.linear_attn.norm.weight", FG_NAME_NEVER },
		{ "language_model.model.layers.4.linear_attn.norm.weight", FG_NAME_NEVER },
		{ "model.layers.61.shared_head.norm.weight", FG_NAME_OTHER },
		{ "model.layers.0.self_attn.q_a_layernorm.weight", FG_NAME_OTHER },
		{ "model.layers.0.self_attn.kv_a_layernorm.weight", FG_NAME_OTHER },
		/* DSA's indexer LayerNorm (DeepSeek-V3.2, GLM-5.x) is no q/k evidence (issue 12). */
		{ "model.layers.3.self_attn.indexer.k_norm.weight", FG_NAME_OTHER },
		{ "mtp.layers.0.self_attn.indexer.k_norm.weight", FG_NAME_OTHER },
		{ "model.layers.0.mlp.down_proj.weight", FG_NAME_NOT_NORM },
		{ "model.embed_tokens.weight", FG_NAME_NOT_NORM },
		{ "lm_head.weight", FG_NAME_NOT_NORM },
		{ "mtp.fc.weight", FG_NAME_NOT_NORM },
		{ "model.layers.0.linear_attn.conv1d.weight", FG_NAME_NOT_NORM },
		{ "model.layers.0.self_attn.q_proj.scales", FG_NAME_NOT_NORM },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		enum fg_name_norm got = fg_name_norm_class(rows[i].name);

		if (got != rows[i].cls)
			fail_msg("%s: class %d, want %d", rows[i].name, (int)got, (int)rows[i].cls);
	}
}

static void test_norm_zero_centred(void **state)
{
	static const char *const yes[] = {
		"model.layers.0.input_layernorm.weight",
		"model.layers.0.post_attention_layernorm.weight",
		"model.layers.0.self_attn.q_norm.weight",
		"model.layers.0.self_attn.k_norm.weight",
		"model.norm.weight",
		"language_model.model.norm.weight",
		"mtp.pre_fc_norm_embedding.weight",
		"mtp.pre_fc_norm_hidden.weight",
		"mtp.norm.weight",
		"mtp.layers.0.input_layernorm.weight",
		"mtp.layers.0.post_attention_layernorm.weight",
		"mtp.layers.0.self_attn.q_norm.weight",
		"mtp.layers.0.self_attn.k_norm.weight",
	};
	static const char *const no[] = {
		"model.layers.0.linear_attn.norm.weight",
		"model.layers.61.shared_head.norm.weight",
		"model.layers.0.self_attn.q_a_layernorm.weight",
		"model.layers.0.self_attn.indexer.k_norm.weight",
		"model.layers.0.mlp.down_proj.weight",
		"mtp.fc.weight",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (!fg_name_zero_centred(yes[i]))
			fail_msg("%s: want true", yes[i]);
	}
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		if (fg_name_zero_centred(no[i]))
			fail_msg("%s: want false", no[i]);
	}
}

static void test_norm_mlx_shifted(void **state)
{
	/* mlx-lm's suffix list (docs/domain.md section 4). */
	static const char *const yes[] = {
		"model.layers.0.input_layernorm.weight",
		"language_model.model.layers.0.post_attention_layernorm.weight",
		"model.norm.weight",
		"language_model.model.norm.weight",
		"model.layers.5.self_attn.q_norm.weight",
		"model.layers.5.self_attn.k_norm.weight",
	};
	/* Not in it: the pre-fc norms and mtp.norm (only mlx-lm PR 990 shifts those). */
	static const char *const no[] = {
		"mtp.pre_fc_norm_embedding.weight",
		"mtp.pre_fc_norm_hidden.weight",
		"mtp.norm.weight",
		"model.layers.0.linear_attn.norm.weight",
		"model.layers.0.input_layernorm.bias",
		"mtp.fc.weight",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (!fg_name_mlx_shifted(yes[i]))
			fail_msg("%s: want true", yes[i]);
	}
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		if (fg_name_mlx_shifted(no[i]))
			fail_msg("%s: want false", no[i]);
	}
}

static void test_name_strip(void **state)
{
	static const char a[] = "language_model.model.mtp.fc.weight";
	static const char b[] = "model.language_model.layers.0.mlp.gate.weight";
	static const char c[] = "mtp.fc.weight";
	static const char d[] = "lm_head.weight";
	static const char e[] = "model.model.norm.weight";
	static const char f[] = "models.x.weight";

	(void)state;
	assert_string_equal(fg_name_strip(a), "mtp.fc.weight");
	/* A pointer into the name, not a copy. */
	assert_ptr_equal(fg_name_strip(a), a + strlen("language_model.model."));
	assert_string_equal(fg_name_strip(b), "layers.0.mlp.gate.weight");
	assert_ptr_equal(fg_name_strip(c), c);
	assert_ptr_equal(fg_name_strip(d), d);
	assert_string_equal(fg_name_strip(e), "norm.weight");
	/* Only whole "model." components are prefixes. */
	assert_ptr_equal(fg_name_strip(f), f);
}

static void test_head_name_scheme(void **state)
{
	int idx;

	(void)state;
	idx = -7;
	assert_int_equal(fg_name_head_scheme("model.mtp.layers.2.self_attn.q_proj.weight", 64, &idx),
			 FG_SCHEME_PREFIX);
	assert_int_equal(idx, 2);
	idx = -7;
	assert_int_equal(fg_name_head_scheme("mtp.fc.weight", 64, &idx), FG_SCHEME_PREFIX);
	assert_int_equal(idx, 0);
	idx = -7;
	assert_int_equal(fg_name_head_scheme("language_model.model.mtp.norm.weight", -1, &idx),
			 FG_SCHEME_PREFIX);
	assert_int_equal(idx, 0);
	/* Appended layers: layers.{L+i} with L = num_hidden_layers. */
	idx = -7;
	assert_int_equal(fg_name_head_scheme("model.layers.61.eh_proj.weight", 61, &idx), FG_SCHEME_APPENDED);
	assert_int_equal(idx, 0);
	idx = -7;
	assert_int_equal(fg_name_head_scheme("model.layers.63.enorm.weight", 61, &idx), FG_SCHEME_APPENDED);
	assert_int_equal(idx, 2);
	idx = -7;
	assert_int_equal(fg_name_head_scheme("model.layers.60.mlp.gate.weight", 61, &idx), FG_SCHEME_NONE);
	assert_int_equal(idx, 0);
	/* L unknown: never appended. */
	assert_int_equal(fg_name_head_scheme("model.layers.61.eh_proj.weight", -1, NULL), FG_SCHEME_NONE);
	assert_int_equal(fg_name_head_scheme("model.layers.0.eh_proj.weight", -1, NULL), FG_SCHEME_NONE);
	/* MiMo-7B. */
	idx = -7;
	assert_int_equal(fg_name_head_scheme("model.mtp_layers.1.input_proj.weight", 36, &idx),
			 FG_SCHEME_MTP_LAYERS);
	assert_int_equal(idx, 1);
	assert_int_equal(fg_name_head_scheme("lm_head.weight", 36, NULL), FG_SCHEME_NONE);
	assert_int_equal(fg_name_head_scheme("model.embed_tokens.weight", 36, NULL), FG_SCHEME_NONE);

	assert_string_equal(fg_name_scheme_name(FG_SCHEME_PREFIX), "prefix");
	assert_string_equal(fg_name_scheme_name(FG_SCHEME_APPENDED), "appended_layers");
	assert_string_equal(fg_name_scheme_name(FG_SCHEME_MTP_LAYERS), "mtp_layers");
	assert_null(fg_name_scheme_name(FG_SCHEME_NONE));
}

/* The expert naming by the rule inspect applied before it became a parse-time fact (strstr on the name). */
static enum fg_name_expert expert_by_strstr(const char *name)
{
	const char *p = strstr(name, "experts."), *rest;

	if (!p) {
		p = strstr(name, "switch_mlp.");
		return p && (p == name || p[-1] == '.') ? FG_EXPERT_SWITCH_MLP : FG_EXPERT_NONE;
	}
	if (p != name && p[-1] != '.')
		return FG_EXPERT_NONE;
	rest = p + 8;
	if (*rest >= '0' && *rest <= '9')
		return FG_EXPERT_NUMBERED;
	if (strncmp(rest, "gate_up_proj", 12) != 0 || (rest[12] && strcmp(rest + 12, ".weight") != 0))
		return FG_EXPERT_NONE;
	return FG_EXPERT_GATE_UP;
}

static int ends(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/*
 * The facts the parser computes once per tensor (fg_name_classify) say
 * what the rules say of the same name: every rule of names.h, and the
 * expert naming, for names short and long (the substring scans take 16
 * bytes at a time from 17 bytes on), with the marks at every offset.
 */
static void test_parse_time_facts(void **state)
{
	static const char *const names[] = {
		"model.layers.0.self_attn.q_norm.weight", "language_model.model.layers.3.input_layernorm.weight",
		"model.norm.weight", "mtp.norm.weight", "mtp.fc.weight", "model.mtp.layers.0.mlp.experts.7.up_proj.weight",
		"model.layers.61.eh_proj.weight", "model.mtp_layers.1.input_proj.weight", "mtp.", "a.mtp.",
		"model.layers.2.linear_attn.conv1d.weight", "model.layers.2.linear_attn.norm.weight",
		"model.layers.1.mlp.experts.gate_up_proj", "model.layers.1.mlp.experts.gate_up_proj.weight",
		"model.layers.1.mlp.experts.gate_up_proj.bias", "model.layers.1.mlp.experts.down_proj",
		"model.layers.1.mlp.xexperts.0.w", "xexperts.0.w.experts.1.w", "experts.3", "experts.",
		"model.layers.4.mlp.switch_mlp.gate_proj.weight", "aswitch_mlp.x", "switch_mlp.", "q.scales",
		"model.layers.0.mlp.down_proj.weight_scale_inv", "model.layers.0.mlp.gate.e_score_correction_bias",
		"model.layers.9.pre_fc_norm_hidden.weight", "x.enorm.weight", "model.layers.0.mlp.shared_expert.weight",
		"", "m", "mt", "mtp", "xmtp.y", "model.", "language_model.model.", "model.language_model.layers.70.x",
	};
	char name[128];

	(void)state;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		for (size_t pad = 0; pad < 20; pad++) {
			struct fg_tensor t;
			long layers = 61;
			unsigned f;
			int n;

			/* The same name behind 0 to 19 bytes of a neutral prefix, so every mark falls at every offset. */
			n = snprintf(name, sizeof(name), "%.*s%s", (int)pad, "qqqqqqqqqqqqqqqqqqqq", names[i]);
			memset(&t, 0, sizeof(t));
			t.name = name;
			fg_name_classify(&t, (size_t)n, &layers);
			f = t.facts;
			assert_true(f & FG_FACT_VALID);
			assert_int_equal(f & FG_FACT_NORM_MASK, fg_name_norm_class(name));
			assert_int_equal(!!(f & FG_FACT_ZERO_C), !!fg_name_zero_centred(name));
			assert_int_equal(!!(f & FG_FACT_MLX_SHIFT), !!fg_name_mlx_shifted(name));
			assert_int_equal(!!(f & FG_FACT_MTP_KEY), strstr(name, "mtp.") != NULL);
			assert_int_equal(!!(f & FG_FACT_SCALES), ends(name, ".scales"));
			assert_int_equal(!!(f & FG_FACT_SCALE_INV), ends(name, "_scale_inv"));
			assert_int_equal(!!(f & FG_FACT_CONV1D), ends(name, "conv1d.weight"));
			assert_int_equal((f & FG_FACT_SCHEME) >> FG_FACT_SCHEME_SH, fg_name_head_scheme(name, layers, NULL));
			assert_int_equal((f & FG_FACT_EXPERT) >> FG_FACT_EXPERT_SH, expert_by_strstr(name));
			assert_int_equal(fg_name_expert_kind(&t), expert_by_strstr(name));
			assert_int_equal(t.skip, fg_name_strip(name) - name);
			t.facts = 0; /* unclassified: computed from the name */
			assert_int_equal(fg_name_facts(&t, layers), f);
			assert_int_equal(fg_name_expert_kind(&t), expert_by_strstr(name));
		}
	}
}

static void test_name_layer(void **state)
{
	(void)state;
	assert_int_equal(fg_name_layer("model.layers.7.self_attn.q_norm.weight"), 7);
	assert_int_equal(fg_name_layer("language_model.model.layers.12.mlp.gate.weight"), 12);
	assert_int_equal(fg_name_layer("layers.5.input_layernorm.weight"), 5);
	assert_int_equal(fg_name_layer("model.layers.123.x"), 123);
	assert_int_equal(fg_name_layer("model.norm.weight"), -1);
	assert_int_equal(fg_name_layer("lm_head.weight"), -1);
	assert_int_equal(fg_name_layer("model.layers.x.weight"), -1);
	/* "layers." must be a whole component. */
	assert_int_equal(fg_name_layer("model.sublayers.4.x"), -1);

	assert_string_equal(fg_family_style_name(FG_STYLE_ZERO_CENTRED), "zero_centred");
	assert_string_equal(fg_family_style_name(FG_STYLE_PLAIN), "plain");
	assert_string_equal(fg_family_style_name(FG_STYLE_UNKNOWN), "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_detect_by_model_type),
		cmocka_unit_test(test_detect_text_config_and_order),
		cmocka_unit_test(test_detect_by_architectures),
		cmocka_unit_test(test_detect_unknown),
		cmocka_unit_test(test_detect_moe),
		cmocka_unit_test(test_family_all),
		cmocka_unit_test(test_head_linears),
		cmocka_unit_test(test_declared_mtp),
		cmocka_unit_test(test_norm_classify),
		cmocka_unit_test(test_norm_zero_centred),
		cmocka_unit_test(test_norm_mlx_shifted),
		cmocka_unit_test(test_name_strip),
		cmocka_unit_test(test_head_name_scheme),
		cmocka_unit_test(test_name_layer),
		cmocka_unit_test(test_parse_time_facts),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
