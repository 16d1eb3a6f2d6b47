/*
 * family.c: the family table and the name rules of family.h.
 *
 * The rows transcribe domain.md section 1.  Name rules work on suffixes and
 * on the name with container prefixes stripped, because the same tensor is
 * spelled `mtp.fc.weight`, `model.mtp.fc.weight` or
 * `language_model.model.mtp.fc.weight` depending on who exported it.
 */
#include "forge/model/family.h"

#include <stdlib.h>
#include <string.h>

#define LIST(...) ((const char *const[]){ __VA_ARGS__, NULL })

static const char *const nextn_key[] = { "num_nextn_predict_layers", NULL };
static const char *const qwen_keys[] = { "mtp_num_hidden_layers", "num_nextn_predict_layers", NULL };

static const struct fg_family families[] = {
	{ .id = "qwen3_next", .model_types = LIST("qwen3_next"),
	  .architectures = LIST("Qwen3NextForCausalLM"),
	  .norm_style = FG_STYLE_ZERO_CENTRED, .mtp_count_keys = qwen_keys,
	  .scheme = FG_SCHEME_PREFIX, .moe_types = 1 },
	{ .id = "qwen3_5",
	  .model_types = LIST("qwen3_5", "qwen3_5_moe", "qwen3_5_text", "qwen3_5_moe_text"),
	  .architectures = LIST("Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
				"Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM"),
	  .norm_style = FG_STYLE_ZERO_CENTRED, .mtp_count_keys = qwen_keys,
	  .scheme = FG_SCHEME_PREFIX, .moe_types = 0xa },
	{ .id = "glm4_moe", .model_types = LIST("glm4_moe"), .architectures = LIST("Glm4MoeForCausalLM"),
	  .norm_style = FG_STYLE_PLAIN, .mtp_count_keys = nextn_key,
	  .scheme = FG_SCHEME_APPENDED, .moe_types = 1 },
	{ .id = "glm4_moe_lite", .model_types = LIST("glm4_moe_lite"),
	  .architectures = LIST("Glm4MoeLiteForCausalLM"),
	  .norm_style = FG_STYLE_PLAIN, .mtp_count_keys = nextn_key,
	  .scheme = FG_SCHEME_APPENDED, .moe_types = 1 },
	{ .id = "glm_moe_dsa", .model_types = LIST("glm_moe_dsa"), .architectures = LIST("GlmMoeDsaForCausalLM"),
	  .norm_style = FG_STYLE_PLAIN, .mtp_count_keys = nextn_key,
	  .scheme = FG_SCHEME_APPENDED, .moe_types = 1 },
	{ .id = "deepseek_v3", .model_types = LIST("deepseek_v3"), .architectures = LIST("DeepseekV3ForCausalLM"),
	  .norm_style = FG_STYLE_PLAIN, .mtp_count_keys = nextn_key,
	  .scheme = FG_SCHEME_APPENDED, .moe_types = 1 },
	{ .id = "deepseek_v32", .model_types = LIST("deepseek_v32"),
	  .architectures = LIST("DeepseekV32ForCausalLM"),
	  .norm_style = FG_STYLE_PLAIN, .mtp_count_keys = nextn_key,
	  .scheme = FG_SCHEME_APPENDED, .moe_types = 1 },
	{ .id = "mimo", .model_types = LIST("mimo"), .architectures = LIST("MiMoForCausalLM"),
	  .norm_style = FG_STYLE_PLAIN, .mtp_count_keys = nextn_key,
	  .scheme = FG_SCHEME_MTP_LAYERS, .hidden_first = 1 },
	{ .id = "mimo_v2", .model_types = LIST("mimo_v2_flash", "mimo_v2"),
	  .architectures = LIST("MiMoV2FlashForCausalLM"),
	  .norm_style = FG_STYLE_PLAIN, .mtp_count_keys = nextn_key, .implied_mtp_layers = 3,
	  .scheme = FG_SCHEME_PREFIX, .moe_types = 3 },
};

const struct fg_family fg_family_unknown = {
	.id = "unknown", .model_types = LIST("unknown"), .architectures = LIST("unknown"),
	.norm_style = FG_STYLE_UNKNOWN, .mtp_count_keys = nextn_key, .scheme = FG_SCHEME_NONE,
};

#define N_FAMILIES (sizeof(families) / sizeof(families[0]))

const struct fg_family *const *fg_family_all(size_t *n)
{
	static const struct fg_family *all[N_FAMILIES];

	for (size_t i = 0; i < N_FAMILIES; i++)
		all[i] = &families[i];
	*n = N_FAMILIES;
	return all;
}

static const char *json_str(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Index of s in list, or -1. */
static int list_index(const char *const *list, const char *s)
{
	for (int i = 0; s && list[i]; i++)
		if (strcmp(list[i], s) == 0)
			return i;
	return -1;
}

static const struct fg_family *match_type(const char *type, int *moe)
{
	for (size_t i = 0; i < N_FAMILIES; i++) {
		int k = list_index(families[i].model_types, type);

		if (k >= 0) {
			*moe |= (families[i].moe_types >> k) & 1;
			return &families[i];
		}
	}
	return NULL;
}

static int declares_experts(const cJSON *obj)
{
	static const char *const keys[] = { "num_experts", "n_routed_experts", "num_local_experts" };

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, keys[i]);

		if (cJSON_IsNumber(v) && v->valuedouble > 0)
			return 1;
	}
	return 0;
}

const struct fg_family *fg_family_detect(const cJSON *config, int *moe)
{
	const cJSON *tc = cJSON_GetObjectItemCaseSensitive(config, "text_config");
	const cJSON *arch = cJSON_GetObjectItemCaseSensitive(config, "architectures");
	const struct fg_family *fam;
	const cJSON *a;
	int is_moe = 0;

	fam = match_type(json_str(config, "model_type"), &is_moe);
	if (!fam)
		fam = match_type(json_str(tc, "model_type"), &is_moe);
	else if (json_str(tc, "model_type"))
		match_type(json_str(tc, "model_type"), &is_moe);
	if (!fam && cJSON_IsArray(arch)) {
		cJSON_ArrayForEach(a, arch) {
			for (size_t i = 0; !fam && i < N_FAMILIES; i++) {
				if (cJSON_IsString(a) && list_index(families[i].architectures, a->valuestring) >= 0) {
					fam = &families[i];
					is_moe |= strstr(a->valuestring, "Moe") != NULL;
				}
			}
		}
	}
	if (!fam)
		fam = &fg_family_unknown;
	is_moe |= declares_experts(config) || declares_experts(tc);
	if (moe)
		*moe = is_moe;
	return fam;
}

const char *fg_norm_style_name(enum fg_norm_style s)
{
	switch (s) {
	case FG_STYLE_ZERO_CENTRED:
		return "zero_centred";
	case FG_STYLE_PLAIN:
		return "plain";
	default:
		return "unknown";
	}
}

const char *fg_head_scheme_name(enum fg_head_scheme s)
{
	switch (s) {
	case FG_SCHEME_PREFIX:
		return "prefix";
	case FG_SCHEME_APPENDED:
		return "appended_layers";
	case FG_SCHEME_MTP_LAYERS:
		return "mtp_layers";
	default:
		return NULL;
	}
}

int fg_family_declared_mtp(const struct fg_family *fam, const cJSON *config)
{
	for (int i = 0; fam->mtp_count_keys[i]; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(config, fam->mtp_count_keys[i]);

		if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= 1024)
			return (int)v->valuedouble;
	}
	return fam->implied_mtp_layers ? fam->implied_mtp_layers : -1;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

/* Suffix -> class, first match wins; ".norm.weight" must come after linear_attn. */
static const struct {
	const char *suffix;
	enum fg_norm_class cls;
	int zero_centred;  /* stores an offset in zero-centred families */
	int mlx_shifted;   /* in mlx-lm's sanitize suffix list */
} norm_rules[] = {
	{ ".q_norm.weight", FG_NORM_QK, 1, 1 },
	{ ".k_norm.weight", FG_NORM_QK, 1, 1 },
	{ ".input_layernorm.weight", FG_NORM_LOW, 1, 1 },
	{ ".post_attention_layernorm.weight", FG_NORM_LOW, 1, 1 },
	{ ".pre_fc_norm_embedding.weight", FG_NORM_LOW, 1, 0 },
	{ ".pre_fc_norm_hidden.weight", FG_NORM_LOW, 1, 0 },
	/* The pre-fc norms of the plain families' heads: evidence-class only. */
	{ ".enorm.weight", FG_NORM_LOW, 0, 0 },
	{ ".hnorm.weight", FG_NORM_LOW, 0, 0 },
	{ ".token_layernorm.weight", FG_NORM_LOW, 0, 0 },
	{ ".hidden_layernorm.weight", FG_NORM_LOW, 0, 0 },
	{ "linear_attn.norm.weight", FG_NORM_NEVER, 0, 0 },
	{ "model.norm.weight", FG_NORM_FINAL, 1, 1 },
	{ "mtp.norm.weight", FG_NORM_FINAL, 1, 0 },
};

static int norm_rule(const char *name)
{
	for (size_t i = 0; i < sizeof(norm_rules) / sizeof(norm_rules[0]); i++)
		if (ends_with(name, norm_rules[i].suffix))
			return (int)i;
	return -1;
}

enum fg_norm_class fg_norm_classify(const char *name)
{
	const char *last, *end;
	int r = norm_rule(name);

	if (r >= 0)
		return norm_rules[r].cls;
	if (!ends_with(name, ".weight"))
		return FG_NORM_NONE;
	/* The module name before ".weight" says whether it is a norm. */
	end = name + strlen(name) - strlen(".weight");
	last = end;
	while (last > name && last[-1] != '.')
		last--;
	for (const char *p = last; p + 4 <= end; p++)
		if (memcmp(p, "norm", 4) == 0)
			return FG_NORM_OTHER;
	return FG_NORM_NONE;
}

int fg_norm_zero_centred(const char *name)
{
	int r = norm_rule(name);

	return r >= 0 && norm_rules[r].zero_centred;
}

int fg_norm_mlx_shifted(const char *name)
{
	int r = norm_rule(name);

	return r >= 0 && norm_rules[r].mlx_shifted;
}

const char *fg_name_strip(const char *name)
{
	for (;;) {
		if (strncmp(name, "model.", 6) == 0)
			name += 6;
		else if (strncmp(name, "language_model.", 15) == 0)
			name += 15;
		else
			return name;
	}
}

/* Parse a decimal number at s followed by '.'; returns -1 when there is none. */
static long parse_index(const char *s)
{
	long v = 0;
	int digits = 0;

	while (*s >= '0' && *s <= '9' && digits < 9) {
		v = v * 10 + (*s++ - '0');
		digits++;
	}
	return digits && *s == '.' ? v : -1;
}

enum fg_head_scheme fg_head_name_scheme(const char *name, long n_layers, int *index)
{
	const char *s = fg_name_strip(name);
	long i;

	if (index)
		*index = 0;
	if (strncmp(s, "mtp.", 4) == 0) {
		if (index && strncmp(s + 4, "layers.", 7) == 0 && (i = parse_index(s + 11)) >= 0)
			*index = (int)i;
		return FG_SCHEME_PREFIX;
	}
	if (strncmp(s, "mtp_layers.", 11) == 0 && (i = parse_index(s + 11)) >= 0) {
		if (index)
			*index = (int)i;
		return FG_SCHEME_MTP_LAYERS;
	}
	if (n_layers >= 0 && strncmp(s, "layers.", 7) == 0 && (i = parse_index(s + 7)) >= n_layers) {
		if (index)
			*index = (int)(i - n_layers);
		return FG_SCHEME_APPENDED;
	}
	return FG_SCHEME_NONE;
}

long fg_name_layer(const char *name)
{
	const char *p = strstr(name, "layers.");

	while (p) {
		if (p == name || p[-1] == '.') {
			long i = parse_index(p + 7);

			if (i >= 0)
				return i;
		}
		p = strstr(p + 1, "layers.");
	}
	return -1;
}
