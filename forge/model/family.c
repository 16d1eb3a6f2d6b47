/*
 * family.c: the family table of family.h and its lookups: detection from
 * config.json, the declared MTP layer count, the head's linears.
 *
 * The rows transcribe domain.md section 1.  The tensor-name rules every
 * family shares (suffixes, container prefixes) are names.c's.
 */
#include "forge/model/family.h"
#include "forge/model/convention.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LIST(...) ((const char *const[]){ __VA_ARGS__, NULL })
#define TYPES(...) ((const struct fg_model_type[]){ __VA_ARGS__, { NULL, 0 } })
#define DENSE(name) { name, 0 }
#define MOE(name) { name, 1 }

static const char *const nextn_key[] = { "num_nextn_predict_layers", NULL };
static const char *const qwen_keys[] = { "mtp_num_hidden_layers", "num_nextn_predict_layers", NULL };

/*
 * The head linears an explicit policy (affine, mxfp4) quantizes, shared by
 * every family today: attention and MLP projections, DeepSeek's MLA
 * projections (q_a/q_b, kv_a_proj_with_mqa, kv_b) and the V3.2 indexer's
 * wq_b and wk.  Routers, fc/eh_proj/input_proj and embeddings are never in
 * it.  A family whose head differs gets its own list on its row.
 */
static const char *const head_linears[] = {
	"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
	"q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "wq_b", "wk", NULL,
};

/*
 * Qwen3.5/3.8: docs/domain.md's fleet figures (healthy 1.74-1.83), the band
 * MTPLX's loader guard states (youssofal/MTPLX mtplx/runtime.py@0943c6cb
 * `_refuse_double_shifted_trunk_norms`: "healthy q-norm means 1.74-1.83",
 * refusing above 2.4), and inspect's own rule for a loaded trunk
 * ([1.25, 2.4], convention.h).  No other family has published figures.
 */
static const struct fg_probe_band qwen35_band = {
	FG_QK_BAND_MIN, FG_QK_BAND_MAX, FG_QK_ABSOLUTE_MIN, FG_QK_DOUBLE_ABOVE,
	"docs/domain.md (Qwen3.5/3.8 fleet figures); youssofal/MTPLX mtplx/runtime.py "
	"_refuse_double_shifted_trunk_norms",
};

static const struct fg_family families[] = {
	{ .id = "qwen3_next", .model_types = TYPES(MOE("qwen3_next")),
	  .architectures = LIST("Qwen3NextForCausalLM"),
	  .norm_style = FG_STYLE_ZERO_CENTRED, .mtp_count_keys = qwen_keys,
	  .scheme = FG_SCHEME_PREFIX, .strips_to_mtp = 1, .head_linears = head_linears },
	{ .id = "qwen3_5",
	  .model_types = TYPES(DENSE("qwen3_5"), MOE("qwen3_5_moe"), DENSE("qwen3_5_text"), MOE("qwen3_5_moe_text")),
	  .architectures = LIST("Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
				"Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM"),
	  .norm_style = FG_STYLE_ZERO_CENTRED, .mtp_count_keys = qwen_keys,
	  .scheme = FG_SCHEME_PREFIX, .strips_to_mtp = 1, .head_linears = head_linears,
	  .probe_band = &qwen35_band },
	{ .id = "glm4_moe", .model_types = TYPES(MOE("glm4_moe")), .architectures = LIST("Glm4MoeForCausalLM"),
	  .norm_style = FG_STYLE_PLAIN, .mtp_count_keys = nextn_key,
	  .scheme = FG_SCHEME_APPENDED, .head_linears = head_linears },
	{ .id = "glm4_moe_lite", .model_types = TYPES(MOE("glm4_moe_lite")),
	  .architectures = LIST("Glm4MoeLiteForCausalLM"),
	  .norm_style = FG_STYLE_PLAIN, .mtp_count_keys = nextn_key,
	  .scheme = FG_SCHEME_APPENDED, .head_linears = head_linears },
	{ .id = "glm_moe_dsa", .model_types = TYPES(MOE("glm_moe_dsa")), .architectures = LIST("GlmMoeDsaForCausalLM"),
	  .norm_style = FG_STYLE_PLAIN, .mtp_count_keys = nextn_key,
	  .scheme = FG_SCHEME_APPENDED, .head_linears = head_linears },
	{ .id = "deepseek_v3", .model_types = TYPES(MOE("deepseek_v3")), .architectures = LIST("DeepseekV3ForCausalLM"),
	  .norm_style = FG_STYLE_PLAIN, .mtp_count_keys = nextn_key,
	  .scheme = FG_SCHEME_APPENDED, .head_linears = head_linears },
	{ .id = "deepseek_v32", .model_types = TYPES(MOE("deepseek_v32")),
	  .architectures = LIST("DeepseekV32ForCausalLM"),
	  .norm_style = FG_STYLE_PLAIN, .mtp_count_keys = nextn_key,
	  .scheme = FG_SCHEME_APPENDED, .head_linears = head_linears },
	{ .id = "mimo", .model_types = TYPES(DENSE("mimo")), .architectures = LIST("MiMoForCausalLM"),
	  .norm_style = FG_STYLE_PLAIN, .mtp_count_keys = nextn_key,
	  .scheme = FG_SCHEME_MTP_LAYERS, .hidden_first = 1, .head_linears = head_linears },
	{ .id = "mimo_v2", .model_types = TYPES(MOE("mimo_v2_flash"), MOE("mimo_v2")),
	  .architectures = LIST("MiMoV2FlashForCausalLM"),
	  .norm_style = FG_STYLE_PLAIN, .mtp_count_keys = nextn_key, .implied_mtp_layers = 3,
	  .scheme = FG_SCHEME_PREFIX, .head_linears = head_linears },
};

const struct fg_family fg_family_unknown = {
	.id = "unknown", .model_types = TYPES(DENSE("unknown")), .architectures = LIST("unknown"),
	.norm_style = FG_STYLE_UNKNOWN, .mtp_count_keys = nextn_key, .scheme = FG_SCHEME_NONE,
	.head_linears = head_linears,
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
	for (size_t i = 0; type && i < N_FAMILIES; i++) {
		for (const struct fg_model_type *t = families[i].model_types; t->name; t++) {
			if (strcmp(t->name, type) == 0) {
				*moe |= t->moe;
				return &families[i];
			}
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

int fg_family_is_head_linear(const struct fg_family *fam, const char *module)
{
	const char *dot = strrchr(module, '.');

	return list_index(fam->head_linears, dot ? dot + 1 : module) != SIZE_MAX;
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

const struct fg_probe_band *fg_family_probe_band(const char *family)
{
	for (size_t i = 0; family && i < N_FAMILIES; i++)
		if (strcmp(families[i].id, family) == 0)
			return families[i].probe_band;
	return NULL;
}
