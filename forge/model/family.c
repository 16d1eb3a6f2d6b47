/*
 * family.c: the family table and the name rules of family.h.
 *
 * The rows transcribe domain.md section 1.  Name rules work on suffixes and
 * on the name with container prefixes stripped, because the same tensor is
 * spelled `mtp.fc.weight`, `model.mtp.fc.weight` or
 * `language_model.model.mtp.fc.weight` depending on who exported it.
 */
#include "forge/model/family.h"

#include <stdint.h>
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

/* Index of s in the NULL-terminated list, or SIZE_MAX. */
static size_t list_index(const char *const *list, const char *s)
{
	for (size_t i = 0; s && list[i]; i++)
		if (strcmp(list[i], s) == 0)
			return i;
	return SIZE_MAX;
}

static const struct fg_family *match_type(const char *type, int *moe)
{
	for (size_t i = 0; i < N_FAMILIES; i++) {
		size_t k = list_index(families[i].model_types, type);

		if (k != SIZE_MAX) {
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
				if (cJSON_IsString(a) && list_index(families[i].architectures, a->valuestring) != SIZE_MAX) {
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

const char *fg_family_style_name(enum fg_family_style s)
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

int fg_family_declared_mtp(const struct fg_family *fam, const cJSON *config)
{
	for (int i = 0; fam->mtp_count_keys[i]; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(config, fam->mtp_count_keys[i]);

		if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= 1024)
			return (int)v->valuedouble;
	}
	return fam->implied_mtp_layers ? fam->implied_mtp_layers : -1;
}
