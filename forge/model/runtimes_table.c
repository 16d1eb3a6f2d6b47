/*
 * runtimes_table.c: the runtime rows of runtimes.h, pure data.
 *
 * Every fact carries its source beside it: repository path@commit:lines,
 * the commits being those of /work/notes (mlx-lm.md, mtplx.md, others.md)
 * and docs/runtimes.md.  Sources read from the search index rather than a
 * git snapshot (vLLM, SGLang, llama.cpp, transformers) name a symbol
 * instead of lines; MTPLX (no snapshot: youssofal/MTPLX could not be
 * fetched) names a function and a character offset (~cN) of the file
 * version read.  A fact the sources do not confirm is listed in the row's
 * `unconfirmed` and in docs/runtimes.md, never silently assumed: where the
 * simulation would need it, the row says FG_LOAD_UNSTATED / _UNSTATED or
 * leaves the layout out of *_known, and the result is `modelled: false`.
 *
 * Commits (first 12 hex digits):
 *   mlx-lm  v0.31.3 ed1fca4cef15, main (0.32.0) d78bf58e217c, PR 990
 *           e8ceeccf118d, PR 1740 bc1d11414c12, PR 1724 a9e671b33ce8,
 *           PR 1469 51b980d8a507, LM Studio's pin 2c008fd0252b
 *   mlx     846d176227a0 (Module.load_weights)
 *   mlx-vlm 9b13f522a7f1 (0.6.15); LM Studio's pin 321514d63334 (0.6.12)
 *   mlx-engine (LM Studio) 08f0c0758a80
 *   MTPLX   youssofal/MTPLX file versions 0943c6cb (2.9.2 tree), 09756775
 *           (2.12.0 qwen3_5_mtp_patch.py), 862e57cb (pre-2.10), 029eff70
 *           (CHANGELOG to 2.12.0), jvmenen 0d56bc6d (2.12.0 pyproject)
 *   vllm-mlx 4b654c09e610 (qwen3_next_mtp.py last changed c70b80b5e602)
 *   ollama  fb3076099687
 *   vLLM    qwen3_5_mtp.py 01d99805d1ef, qwen3_5.py 00def4f84211,
 *           default_loader.py 00b5ad071262, weight_utils.py 0a1ee72ed53f,
 *           speculative.py f19b16d95e43, layernorm.py 00cba797bda4,
 *           deepseek_mtp.py 03356f8cb59b, glm4_moe_mtp.py 6e052ba8f4d9,
 *           mimo_mtp.py 98debc242491
 *   SGLang  qwen3_5_mtp.py 008b79d2358b, qwen3_5.py 005fa711897e,
 *           weight_utils.py 00b08c497f07
 *   llama.cpp conversion/qwen.py 03173d5e78f8, conversion/base.py 00bd27a621f9
 *   transformers modeling_qwen3_next.py 7515843b6175, modular_qwen3_5.py 8940358af742
 */
#include "forge/model/runtimes.h"

#define LIST(...) ((const char *const[]){ __VA_ARGS__, NULL })
#define FAMILIES(...) ((const struct fg_rt_family[]){ __VA_ARGS__, { .family = NULL } })
#define HEADS(...) ((const struct fg_rt_head[]){ __VA_ARGS__, { .mode = FG_HEAD_NONE } })
#define SOURCES(...) ((const struct fg_rt_head_src[]){ __VA_ARGS__, { .kind = FG_HSRC_END } })

/* MLX Module.load_weights(strict=True): extra keys first, then missing ones, then shapes
 * (mlx python/mlx/nn/layers/base.py@846d176227a0:L179-203). */
#define MLX_STRICT_ERROR "ValueError: Received N parameters not in model (load_weights strict=True)"
#define MLX_EXPERTS_ERROR "ValueError from load_weights(strict=True): the expert tensors are neither " \
	"stacked switch_mlp parameters nor a layout the sanitize converts"

/* mlx-lm's qwen3_5_moe splits experts.gate_up_proj at shape[-2]//2 by name: a [E,H,2I] tensor yields
 * switch_mlp tensors of the wrong shape (qwen3_5_moe.py@d78bf58e217c:L23-52; base.py L179-203). */
#define MLX_BMM_ERROR "ValueError: Expected shape (E, I, H) but received shape (E, H/2, 2I) (load_weights " \
	"strict=True: the fused gate_up_proj is split on axis -2 as if it were [E,2I,H])"

/* The "mtp." substring drop every qwen3_5 sanitize applies. */
#define DROP_MTP { .kind = FG_DROP_SUBSTRING, .text = "mtp." }

/* ---- mlx-lm families ---- */

/* Families whose mlx-lm sanitize is the same blob at v0.31.3, LM Studio's pin and main
 * (mlx-lm.md "Per-family sanitize"); only qwen3_5's shift trigger differs (PR 1623). */
#define MLXLM_QWEN3_NEXT                                                                           \
	{ .family = "qwen3_next", .shift = FG_SHIFT_ALWAYS, .conv1d_transpose = 1,                  \
	  .gate = FG_GATE_TENSOR, .gate_tensor = "model.layers.0.mlp.experts.0.up_proj.weight",     \
	  .drop = DROP_MTP, .experts = FG_XL_NUMBERED | FG_XL_SWITCH_MLP, .experts_known = FG_XL_ALL, \
	  .source = "mlx-lm mlx_lm/models/qwen3_next.py@d78bf58e217c:L452-482" }
#define MLXLM_PLAIN                                                                                \
	{ .family = "glm4_moe", .drop = { .kind = FG_DROP_LAYER_L },                                 \
	  .experts = FG_XL_NUMBERED | FG_XL_SWITCH_MLP, .experts_known = FG_XL_ALL,                  \
	  .source = "mlx-lm mlx_lm/models/glm4_moe.py@d78bf58e217c:L317-337" },                     \
	{ .family = "glm4_moe_lite", .drop = { .kind = FG_DROP_LAYERS_FROM_L },                     \
	  .experts = FG_XL_NUMBERED | FG_XL_SWITCH_MLP, .experts_known = FG_XL_ALL,                  \
	  .source = "mlx-lm mlx_lm/models/glm4_moe_lite.py@d78bf58e217c:L381-449" },                \
	{ .family = "deepseek_v3", .drop = { .kind = FG_DROP_LAYER_FIXED, .layer = 61 },             \
	  .experts = FG_XL_NUMBERED | FG_XL_SWITCH_MLP, .experts_known = FG_XL_ALL,                  \
	  .source = "mlx-lm mlx_lm/models/deepseek_v3.py@d78bf58e217c:L380-478 (drops model.layers.61)" }, \
	{ .family = "deepseek_v32", .drop = { .kind = FG_DROP_LAYERS_FROM_L },                      \
	  .experts = FG_XL_NUMBERED | FG_XL_SWITCH_MLP, .experts_known = FG_XL_ALL,                  \
	  .source = "mlx-lm mlx_lm/models/deepseek_v32.py@ed1fca4cef15:L494-582" },                 \
	{ .family = "mimo", .drop = { .kind = FG_DROP_PREFIX, .text = "model.mtp_layers." },         \
	  .experts = FG_XL_ALL, .experts_known = FG_XL_ALL,                                          \
	  .source = "mlx-lm mlx_lm/models/mimo.py@d78bf58e217c:L181-190" },                         \
	{ .family = "mimo_v2", .drop = { .kind = FG_DROP_PREFIX, .text = "model.mtp" },              \
	  .experts = FG_XL_NUMBERED | FG_XL_SWITCH_MLP, .experts_known = FG_XL_ALL,                  \
	  .source = "mlx-lm mlx_lm/models/mimo_v2_flash.py@d78bf58e217c:L321-364" },                \
	{ .family = "*", .experts = FG_XL_ALL, .source = "not read for this family" }

/* qwen3_5 / qwen3_5_moe at 0.31.3 (and LM Studio's pin): "mtp." present OR a conv1d whose last
 * dimension is not 1 (no rank check), then moveaxis(2, 1) on it; mtp.* dropped by substring;
 * the MoE trunk unfuses experts.gate_up_proj only (split at shape[-2]//2). */
static const struct fg_rt_family mlxlm031_families[] = {
	{ .family = "qwen3_5", .shift = FG_SHIFT_ON_MTP_KEY | FG_SHIFT_ON_CONV1D, .conv1d_transpose = 1,
	  .drop = DROP_MTP, .experts = FG_XL_FUSED_LINEAR | FG_XL_SWITCH_MLP, .experts_known = FG_XL_ALL,
	  .bmm_error = MLX_BMM_ERROR,
	  .source = "mlx-lm mlx_lm/models/qwen3_5.py@ed1fca4cef15:L307-331; qwen3_5_moe.py@d78bf58e217c:L23-52" },
	MLXLM_QWEN3_NEXT,
	MLXLM_PLAIN,
	{ .family = NULL },
};

/* main (0.32.0): PR 1623 gates the qwen3_5 shift on the raw conv1d alone. */
static const struct fg_rt_family mlxlm032_families[] = {
	{ .family = "qwen3_5", .shift = FG_SHIFT_ON_CONV1D, .conv1d_transpose = 1,
	  .drop = DROP_MTP, .experts = FG_XL_FUSED_LINEAR | FG_XL_SWITCH_MLP, .experts_known = FG_XL_ALL,
	  .bmm_error = MLX_BMM_ERROR,
	  .source = "mlx-lm mlx_lm/models/qwen3_5.py@d78bf58e217c:L348-370; qwen3_5_moe.py@d78bf58e217c:L23-52" },
	MLXLM_QWEN3_NEXT,
	MLXLM_PLAIN,
	{ .family = NULL },
};

/* PR 1724: _normalize_experts accepts exactly one of fused, switch_mlp, numbered on every trunk
 * and head layer (mlx-lm mlx_lm/models/qwen3_5_moe.py@a9e671b33ce8:L23-83, L86-114); fused bmm
 * is not stated. */
static const struct fg_rt_family pr1724_families[] = {
	{ .family = "qwen3_5", .shift = FG_SHIFT_ON_CONV1D, .conv1d_transpose = 1, .drop = DROP_MTP,
	  .experts = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR | FG_XL_SWITCH_MLP,
	  .experts_known = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR | FG_XL_SWITCH_MLP,
	  .source = "mlx-lm mlx_lm/models/qwen3_5.py@a9e671b33ce8:L644-648; qwen3_5_moe.py@a9e671b33ce8:L23-114" },
	MLXLM_QWEN3_NEXT,
	MLXLM_PLAIN,
	{ .family = NULL },
};

/* mlx-lm's formats (mlx-lm.md "Quantization config branches"; utils.py@ed1fca4cef15:L365-390,
 * L72-172; 0.32 adds compressed-tensors nvfp4-pack-quantized, utils.py@d78bf58e217c:L407-414): MLX
 * quantization and plain floats; AutoAWQ 4-bit converted at load.  No GPTQ: a .g_idx is refused by
 * name, and without one the AWQ path reads GPTQ's qweight [in/8, out] as AutoAWQ's [in, out/8], so
 * the repacked weight is [8*out, in/64] where the model wants [out, in/8] and the strict load
 * refuses the shape (utils.py@d78bf58e217c:L74-174, L415-420, L445; ml-explore/mlx
 * python/mlx/nn/layers/base.py@846d176227a0:L179-203).  compressed-tensors only where a sanitize
 * remaps it (MLXLM_CT: symmetric int4, group 32), otherwise weight_packed/weight_scale are extra keys;
 * FP8 block scales only where a model's sanitize dequantizes them (MLXLM_FP8:
 * deepseek_v3.py@d78bf58e217c:L412-423); no ModelOpt or compressed-tensors FP8 scales (qwen3_5,
 * qwen3_next and glm4_moe keep them as extra keys, which the strict load refuses).  mlx-lm sums the
 * +1 in the array's own dtype (a BF16 tensor stays BF16), so shift_f32 stays 0. */
#define MLXLM_FORMATS                                                                              \
	(FG_WF_FLOAT | FG_WF_MLX_AFFINE | FG_WF_MLX_MXFP4 | FG_WF_MLX_NVFP4 | FG_WF_MLX_MXFP8 |     \
	 FG_WF_AWQ4 | FG_WF_FP8_BLOCK | FG_WF_CT_INT4_G32 | FG_WF_BITNET)
/* deepseek_v3's sanitize: weight_packed -> weight (U32 view), weight_scale -> scales, biases = -8 * scales
 * (deepseek_v3.py@d78bf58e217c:L397-410, the same blob at ed1fca4cef15); deepseek_v32 has no such remap */
#define MLXLM_CT LIST("deepseek_v3")
#define MLXLM_FP8 LIST("deepseek_v3", "deepseek_v32", "mimo_v2")

/* An MLX trunk-only target: absolute norms, stacked experts, no head key in the shards.
 * norm_convention "mlx" is what mlx-lm PR 1751 writes on converted models (config and shard
 * metadata; mlx_lm/utils.py@5e2416c2f06f:L60, L798-809, L994-995); no loader read at the commits
 * above reads it, so it is declared, never relied on. */
#define MLXLM_FORGE                                                                                \
	{ .head_file = NULL, .key_prefix = NULL, .experts = FG_XL_SWITCH_MLP,                        \
	  .convention = FG_CONV_ABSOLUTE, .declarations = LIST("quantization", "norm_convention"),   \
	  .shards_without_head = 1 }
/* mlx-vlm: the same without PR 1751's declaration (not an mlx-lm conversion). */
#define MLXVLM_FORGE                                                                               \
	{ .head_file = NULL, .key_prefix = NULL, .experts = FG_XL_SWITCH_MLP,                        \
	  .convention = FG_CONV_ABSOLUTE, .declarations = LIST("quantization"),                      \
	  .shards_without_head = 1 }

/* ---- the open mlx-lm pull requests: in-checkpoint heads ---- */

static const char *const qwen3_5_only[] = { "qwen3_5", NULL };

/* PR 990 (open): MTPModule built from text_config.mtp_num_hidden_layers; sanitize keeps "mtp."
 * keys when the head exists and refuses a declared head without them; the head's norms are in
 * the shift suffixes (qwen3_5.py@e8ceeccf118d:L55, L319-353, L442-443, L504-537); MoE heads:
 * fused unfused, otherwise _stack_per_expert pops experts.{e}.*_proj.weight with no default
 * (qwen3_5_moe.py@e8ceeccf118d:L23-45, L50-80): a switch_mlp head raises KeyError, and so does
 * a declared MoE head without tensors, before the ValueError. */
static const struct fg_rt_head pr990_heads[] = {
	{ .families = qwen3_5_only, .mode = FG_HEAD_MODULE, .count_keys = LIST("mtp_num_hidden_layers"),
	  .keys = FG_KEY_MTP | FG_KEY_LM_MTP, .strict = FG_LOAD_STRICT, .strict_error = MLX_STRICT_ERROR,
	  .heal = FG_HEAL_WITH_TRUNK, .norms = FG_NG_ALL,
	  .experts = FG_XL_FUSED_LINEAR | FG_XL_NUMBERED, .experts_known = FG_XL_ALL,
	  .experts_error = "KeyError: language_model.mtp.layers.0.mlp.experts.0.gate_proj.weight "
			   "(_stack_per_expert pops numbered experts the head does not have)",
	  .missing = FG_MISSING_REFUSE,
	  .missing_reason = "ValueError: Config specifies mtp_num_hidden_layers > 0 but the model weights "
			    "contain no MTP parameters. Set mtp_num_hidden_layers=0 to disable MTP.",
	  .missing_reason_moe = "KeyError: language_model.mtp.layers.0.mlp.experts.0.gate_proj.weight "
				"(qwen3_5_moe sanitize stacks the missing head's experts first)",
	  .hidden = FG_HIDDEN_PRE_NORM, .concat = FG_CONCAT_EMBEDDING_FIRST,
	  .source = "mlx-lm mlx_lm/models/qwen3_5.py@e8ceeccf118d:L319-353, L431, L456-462, L504-537" },
	{ .mode = FG_HEAD_NONE },
};

/* PR 1740 (closed): PR 990's head, but a declared head without "mtp." keys is deleted (plain
 * decoding) (qwen3_5.py@bc1d11414c12:L510-528); MoE head stacking runs only when layer 0 probes
 * fused or numbered, so switch_mlp passes (qwen3_5_moe.py@bc1d11414c12:L64-80). */
static const struct fg_rt_head pr1740_heads[] = {
	{ .families = qwen3_5_only, .mode = FG_HEAD_MODULE, .count_keys = LIST("mtp_num_hidden_layers"),
	  .keys = FG_KEY_MTP | FG_KEY_LM_MTP, .strict = FG_LOAD_STRICT, .strict_error = MLX_STRICT_ERROR,
	  .heal = FG_HEAL_WITH_TRUNK, .norms = FG_NG_ALL,
	  .experts = FG_XL_FUSED_LINEAR | FG_XL_NUMBERED | FG_XL_SWITCH_MLP, .experts_known = FG_XL_ALL,
	  .experts_error = MLX_EXPERTS_ERROR, .missing = FG_MISSING_AR,
	  .hidden = FG_HIDDEN_PRE_NORM, .concat = FG_CONCAT_EMBEDDING_FIRST,
	  .source = "mlx-lm mlx_lm/models/qwen3_5.py@bc1d11414c12:L319-353, L431, L456-462, L510-548" },
	{ .mode = FG_HEAD_NONE },
};

/* PR 1724 (closed): a configured head must match its key set exactly, else ValueError; a
 * declared head without keys is refused; the wrapper maps model.language_model.mtp.* to
 * language_model.mtp.* (qwen3_5.py@a9e671b33ce8:L649-707, L712-727, L802-819). */
static const struct fg_rt_head pr1724_heads[] = {
	{ .families = qwen3_5_only, .mode = FG_HEAD_MODULE, .count_keys = LIST("mtp_num_hidden_layers"),
	  .keys = FG_KEY_MTP | FG_KEY_LM_MTP | FG_KEY_MODEL_LM_MTP, .strict = FG_LOAD_STRICT,
	  .strict_error = "ValueError: Native Qwen MTP weights do not match the configured head",
	  .heal = FG_HEAL_WITH_TRUNK, .norms = FG_NG_ALL,
	  .experts = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR | FG_XL_SWITCH_MLP,
	  .experts_known = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR | FG_XL_SWITCH_MLP,
	  .experts_error = "ValueError: Mixed or incomplete MoE expert layouts", .missing = FG_MISSING_REFUSE,
	  .missing_reason = "ValueError: Native Qwen MTP weights do not match the configured head: "
			    "every key is missing",
	  .hidden = FG_HIDDEN_PRE_NORM, .concat = FG_CONCAT_EMBEDDING_FIRST,
	  .source = "mlx-lm mlx_lm/models/qwen3_5.py@a9e671b33ce8:L317-352, L459-491, L649-727" },
	{ .mode = FG_HEAD_NONE },
};

/* PR 1469 (closed): the head is built only when some key contains "mtp." and the config
 * declares it (else dropped: plain decoding); the shift suffixes are unchanged, so the head
 * layer's norms get +1 with the trunk but pre_fc_norm_* and mtp.norm do not
 * (qwen3_5.py@51b980d8a507:L401, L461-503); qwen3_5_moe.py is unchanged, so raw head experts are
 * not converted: only switch_mlp loads. */
static const struct fg_rt_head pr1469_heads[] = {
	{ .families = qwen3_5_only, .mode = FG_HEAD_MODULE, .count_keys = LIST("mtp_num_hidden_layers"),
	  .needs_keys = 1, .keys = FG_KEY_MTP | FG_KEY_LM_MTP, .strict = FG_LOAD_STRICT,
	  .strict_error = MLX_STRICT_ERROR, .heal = FG_HEAL_WITH_TRUNK, .norms = FG_NG_QK | FG_NG_LAYER,
	  .experts = FG_XL_SWITCH_MLP, .experts_known = FG_XL_ALL, .experts_error = MLX_EXPERTS_ERROR,
	  .missing = FG_MISSING_AR, .hidden = FG_HIDDEN_PRE_NORM, .concat = FG_CONCAT_EMBEDDING_FIRST,
	  .source = "mlx-lm mlx_lm/models/qwen3_5.py@51b980d8a507:L249-299, L375-423, L461-503" },
	{ .mode = FG_HEAD_NONE },
};

/* An in-checkpoint head target: absolute mtp.* keys in the shards. */
#define MLXLM_PR_FORGE                                                                             \
	{ .head_file = NULL, .key_prefix = "mtp.", .experts = FG_XL_FUSED_LINEAR,                    \
	  .convention = FG_CONV_ABSOLUTE,                                                            \
	  .declarations = LIST("text_config.mtp_num_hidden_layers", "norm_convention") }

/* ---- MTPLX ---- */

/* The generic injector (mtp_patch.py@0943c6cb inject_mtp_support ~c31000-33500): the head count
 * from text_config.mtp_num_hidden_layers, then num_nextn_predict_layers; expected_mtp_file
 * (artifacts.py@6d0a869a): the config pointer, else the first existing of mtp.safetensors,
 * mtp/weights.safetensors, model-mtp.safetensors, loaded alone and bound even with no "mtp."
 * key; else embedded keys through the index only (a pruned index gives {}), else the glob;
 * is_mtp_key keeps mtp. and language_model.mtp. only; load_weights(strict=False); declared delta
 * adds +1 to every 1-D *norm.weight (~c18500), else shift_delta_mtp_norms decides per set and
 * never shifts a set without q/k norms (test_missing_family_never_shifts);
 * _stack_mtp_moe_experts stacks numbered experts only (fused ones are dropped: #574);
 * MTPContract defaults post_norm, embedding_hidden (~c1700). */
#define MTPLX_GENERIC_HEAD                                                                         \
	{ .families = LIST("qwen3_5", "qwen3_next"), .mode = FG_HEAD_SEPARATE,                       \
	  .count_keys = LIST("mtp_num_hidden_layers", "num_nextn_predict_layers"),                   \
	  .sources = SOURCES({ .kind = FG_HSRC_POINTER, .empty = FG_EMPTY_BINDS },                   \
			     { .kind = FG_HSRC_FILE, .file = "mtp.safetensors", .empty = FG_EMPTY_BINDS }, \
			     { .kind = FG_HSRC_FILE, .file = "mtp/weights.safetensors", .empty = FG_EMPTY_BINDS }, \
			     { .kind = FG_HSRC_FILE, .file = "model-mtp.safetensors", .empty = FG_EMPTY_BINDS }, \
			     { .kind = FG_HSRC_EMBEDDED_INDEX, .empty = FG_EMPTY_NEXT }),            \
	  .keys = FG_KEY_MTP | FG_KEY_LM_MTP, .strict = FG_LOAD_LENIENT, .heal = FG_HEAL_SET_RULE,   \
	  .norms = FG_NG_ALL,                                                                        \
	  .declared_keys = LIST("mtplx_mtp_norm_encoding", "mtp_norm_encoding",                      \
				"mtplx_mtp_quantization.norm_encoding",                              \
				"mtplx_mtp_quantization.norm_weight_encoding"),                      \
	  .declared_delta = LIST("delta", "delta_plus_one", "mlx_delta"),                            \
	  .experts = FG_XL_NUMBERED | FG_XL_SWITCH_MLP, .experts_known = FG_XL_ALL,                  \
	  .missing = FG_MISSING_AR_IF_INDEX,                                                         \
	  .missing_reason = "RuntimeError: MTP injection failed (no head found, and "                \
			    "mtp_weights_present_on_disk is true without an index)",                 \
	  .hidden = FG_HIDDEN_POST_NORM, .concat = FG_CONCAT_EMBEDDING_FIRST,                        \
	  .quant = FG_HQ_CONFIG_ELSE_4_64,                                                           \
	  .source = "youssofal/MTPLX mtplx/mtp_patch.py@0943c6cb inject_mtp_support ~c31000-33500, "  \
		    "_mtp_contract_for_weight_keys, _finalize_mtp_weights ~c25000-28500; "             \
		    "mtplx/artifacts.py@6d0a869a expected_mtp_file, is_mtp_key" }

/* The qwen3_5_mtp injector (model_type qwen3_5_mtp with num_nextn_predict_layers > 0): wider
 * key filter (_strip_mtp_prefix), model-mtp-head.safetensors, strict coverage check raising
 * ValueError, no expert stacking before 2.12.1, hard-wired pre_norm + embedding_hidden
 * (qwen3_5_mtp_patch.py@09756775; mtplx.md 2.6). */
#define MTPLX_QWEN3_5_MTP_HEAD(heal_)                                                              \
	{ .model_type = "qwen3_5_mtp", .mode = FG_HEAD_SEPARATE,                                     \
	  .count_keys = LIST("num_nextn_predict_layers"),                                            \
	  .sources = SOURCES({ .kind = FG_HSRC_POINTER, .empty = FG_EMPTY_STOP },                    \
			     { .kind = FG_HSRC_FILE, .file = "mtp.safetensors", .empty = FG_EMPTY_STOP }, \
			     { .kind = FG_HSRC_FILE, .file = "mtp/weights.safetensors", .empty = FG_EMPTY_STOP }, \
			     { .kind = FG_HSRC_FILE, .file = "model-mtp.safetensors", .empty = FG_EMPTY_STOP }, \
			     { .kind = FG_HSRC_FILE, .file = "model-mtp-head.safetensors", .empty = FG_EMPTY_STOP }, \
			     { .kind = FG_HSRC_EMBEDDED_INDEX, .empty = FG_EMPTY_NEXT }),            \
	  .keys = FG_KEY_MTP | FG_KEY_LM_MTP | FG_KEY_MODEL_MTP | FG_KEY_MODEL_LM_MTP | FG_KEY_LM_MODEL_MTP, \
	  .strict = FG_LOAD_STRICT,                                                                  \
	  .strict_error = "ValueError: Qwen3.5 MTP overlay does not match runtime module tree",      \
	  .heal = heal_, .norms = FG_NG_ALL, .experts = FG_XL_SWITCH_MLP, .experts_known = FG_XL_ALL, \
	  .experts_error = "ValueError: Qwen3.5 MTP overlay does not match runtime module tree "     \
			   "(experts are not stacked before 2.12.1)",                                \
	  .missing = FG_MISSING_AR_IF_INDEX,                                                         \
	  .missing_reason = "RuntimeError: MTP injection failed (no head key maps, and "             \
			    "mtp_weights_present_on_disk is true without an index)",                 \
	  .hidden = FG_HIDDEN_PRE_NORM, .concat = FG_CONCAT_EMBEDDING_FIRST,                         \
	  .source = "youssofal/MTPLX mtplx/qwen3_5_mtp_patch.py@09756775 (2.12.0), @862e57cb (no heal)" }

/* 2.11: the qwen3_5_mtp injector has no heal (CHANGELOG.md@029eff70 [2.12.0] Fixed, PR #511;
 * qwen3_5_mtp_patch.py@862e57cb); the generic one heals by the set rule since 2.9.2. */
static const struct fg_rt_head mtplx211_heads[] = {
	MTPLX_QWEN3_5_MTP_HEAD(FG_HEAL_NONE),
	MTPLX_GENERIC_HEAD,
	{ .mode = FG_HEAD_NONE },
};

/* 2.12.0: the qwen3_5_mtp loader applies the same detector (qwen3_5_mtp_patch.py@09756775
 * _load_mtp_weights ends with shift_delta_mtp_norms). */
static const struct fg_rt_head mtplx212_heads[] = {
	MTPLX_QWEN3_5_MTP_HEAD(FG_HEAL_SET_RULE),
	MTPLX_GENERIC_HEAD,
	{ .mode = FG_HEAD_NONE },
};

/* The guard: _refuse_double_shifted_trunk_norms checks the top-level model_type only
 * (runtime.py@0943c6cb ~c46300, unchanged at 2.12.2): qwen3_5_moe is served double-shifted. */
#define MTPLX_GUARD                                                                                \
	.guard_model_types = LIST("qwen3_5", "qwen3_next", "qwen3next"), .guard_above = FG_QK_DOUBLE_ABOVE, \
	.guard_error = "ValueError: trunk RMSNorm weights read double-shifted (q_norm mean above 2.4; "  \
		       "healthy packs sit near 1.79) (issue #306)"

#define MTPLX_FORGE                                                                                \
	{ .head_file = "mtp.safetensors", .key_prefix = "mtp.", .experts = FG_XL_SWITCH_MLP,         \
	  .convention = FG_CONV_ABSOLUTE,                                                            \
	  .declarations = LIST("mlx_lm_extra_tensors.mtp_file", "mtp_norm_encoding",                 \
			       "mtplx_mtp_norm_encoding", "mtplx_runtime.json", "norm_convention"),  \
	  .shards_without_head = 1 }

/* ---- vllm-mlx ---- */

/* Qwen3.5 patch: only mtp/weights.safetensors, then model-mtp.safetensors (L290-298); keys
 * mtp. and language_model.mtp. (L29-37, L363-368); load_weights(strict=False) (L450); heal
 * skipped when manifest.json beside the weights says artifact_schema_version 1 and
 * rmsnorm_weight_format mlx_gamma (L94-112, L436-442), else +1 on every 1-D *norm.weight whose
 * mean is below 0.5 (L40-48, L74-91, L443-448); fused [E,2I,H] experts split, switch_mlp kept,
 * malformed shapes refused (L122-186, L406-434); mtp_hidden_state_mode default post_norm
 * (L50-71); [embedding, hidden] (L514-536).  Qwen3-Next patch: model-mtp.safetensors only
 * (qwen3_next_mtp.py@4b654c09e610:L47-55), mtp. only and strict=False (L114-116), no heal,
 * pre-norm hidden (L149), [hidden, embedding] (L163).  A quantized Qwen3.5 head: bits and group
 * from text_config's, else the top level's `quantization` (4 and 64 without one, L276-277,
 * L356-358), every weight/scales/biases triple mx.dequantize'd with them, any other tensor loaded
 * as stored (L374-396).  Not modelled: the Qwen3-Next patch's nn.quantize of the empty head
 * module with the top-level block's bits (default 6) and group before its load (L88-108). */
static const struct fg_rt_head vllm_mlx_heads[] = {
	{ .families = qwen3_5_only, .mode = FG_HEAD_SEPARATE,
	  .count_keys = LIST("num_nextn_predict_layers", "mtp_num_hidden_layers"),
	  .sources = SOURCES({ .kind = FG_HSRC_FILE, .file = "mtp/weights.safetensors", .empty = FG_EMPTY_BINDS },
			     { .kind = FG_HSRC_FILE, .file = "model-mtp.safetensors", .empty = FG_EMPTY_BINDS }),
	  .keys = FG_KEY_MTP | FG_KEY_LM_MTP, .strict = FG_LOAD_LENIENT, .heal = FG_HEAL_PER_TENSOR,
	  .norms = FG_NG_ALL, .below = 0.5,
	  .manifest = { .file = "manifest.json", .key = "rmsnorm_weight_format", .value = "mlx_gamma",
			.version_key = "artifact_schema_version", .version = 1 },
	  .experts = FG_XL_FUSED_LINEAR | FG_XL_SWITCH_MLP,
	  .experts_known = FG_XL_FUSED_LINEAR | FG_XL_FUSED_BMM | FG_XL_SWITCH_MLP | FG_XL_NUMBERED,
	  .experts_error = "the patch validates the fused expert shapes and refuses the artifact",
	  .missing = FG_MISSING_AR, .hidden = FG_HIDDEN_POST_NORM, .concat = FG_CONCAT_EMBEDDING_FIRST,
	  .quant = FG_HQ_DEQUANT_BLOCK_ELSE_4_64,
	  .source = "waybarrios/vllm-mlx vllm_mlx/patches/qwen3_5_mtp.py@4b654c09e610:L29-112, L276-277, L290-298, "
		    "L356-396, L406-450, L506-536" },
	{ .families = LIST("qwen3_next"), .mode = FG_HEAD_SEPARATE, .count_keys = LIST("num_nextn_predict_layers"),
	  .sources = SOURCES({ .kind = FG_HSRC_FILE, .file = "model-mtp.safetensors", .empty = FG_EMPTY_BINDS }),
	  .keys = FG_KEY_MTP, .strict = FG_LOAD_LENIENT, .heal = FG_HEAL_NONE,
	  .experts = FG_XL_SWITCH_MLP, .experts_known = FG_XL_SWITCH_MLP, .missing = FG_MISSING_AR,
	  .hidden = FG_HIDDEN_PRE_NORM, .concat = FG_CONCAT_HIDDEN_FIRST,
	  .source = "waybarrios/vllm-mlx vllm_mlx/patches/qwen3_next_mtp.py@4b654c09e610:L47-55, L114-116, L149, L163" },
	{ .mode = FG_HEAD_NONE },
};

/* ---- Ollama ---- */

/* Default import (GGUF): +1 on every GGUF *_norm.weight but ssm_norm, unconditionally
 * (convert/convert_qwen3next.go@fb3076099687:L1008-1010, L1541-1561); mtp.* (exact prefix) to
 * nextn blocks, head norms +1 too (L937, L963-968, L1071-1175); per-expert and fused
 * gate_up_proj (split on dim 1) + down_proj (L939-991).  What happens to other head spellings
 * and to a declared head without tensors at load time is not stated. */
static const struct fg_rt_head ollama_heads[] = {
	{ .families = LIST("qwen3_5", "qwen3_next"), .mode = FG_HEAD_MODULE, .needs_keys = 1,
	  .keys = FG_KEY_MTP, .strict = FG_LOAD_UNSTATED, .heal = FG_HEAL_ALWAYS, .norms = FG_NG_ALL,
	  .experts = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR, .experts_known = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR,
	  .missing = FG_MISSING_UNSTATED,
	  .source = "ollama convert/convert_qwen3next.go@fb3076099687:L118-131, L212-268, L937-1175" },
	{ .mode = FG_HEAD_NONE },
};

static const struct fg_rt_family ollama_families[] = {
	{ .family = "qwen3_5", .shift = FG_SHIFT_ALWAYS, .experts = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR,
	  .experts_known = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR,
	  .source = "ollama convert/convert_qwen3next.go@fb3076099687:L939-991, L1008-1010, L1541-1622" },
	{ .family = "qwen3_next", .shift = FG_SHIFT_ALWAYS, .experts = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR,
	  .experts_known = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR,
	  .source = "ollama convert/convert_qwen3next.go@fb3076099687:L939-991, L1008-1010, L1541-1622" },
	{ .family = "*", .experts = FG_XL_ALL, .source = "not read for this family" },
	{ .family = NULL },
};

/* --experimental (MLX runner): one flag for the whole model, any "mtp." name or a 3-D conv1d
 * whose third dimension is not 1 (x/models/qwen3_5/qwen3_5.go@fb3076099687:L831-838), then +1
 * on the final, layer, q/k and MTP norms (L846, L901-902, L965-966, L1026-1034); the head is
 * loaded only when mtp.fc exists, names without a container prefix (L884-891); experts fused,
 * switch_mlp, stacked or per-expert (L599-767); post-norm hidden (L1246-1247), [embedding,
 * hidden] (L1282-1305). */
static const struct fg_rt_head ollama_mlx_heads[] = {
	{ .families = LIST("qwen3_5", "qwen3_next"), .mode = FG_HEAD_MODULE, .needs_keys = 1,
	  .keys = FG_KEY_MTP, .strict = FG_LOAD_UNSTATED, .heal = FG_HEAL_WITH_TRUNK, .norms = FG_NG_ALL,
	  .experts = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR | FG_XL_SWITCH_MLP,
	  .experts_known = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR | FG_XL_SWITCH_MLP,
	  .missing = FG_MISSING_AR, .hidden = FG_HIDDEN_POST_NORM, .concat = FG_CONCAT_EMBEDDING_FIRST,
	  .source = "ollama x/models/qwen3_5/qwen3_5.go@fb3076099687:L884-891, L1018-1042, L1246-1305" },
	{ .mode = FG_HEAD_NONE },
};

static const struct fg_rt_family ollama_mlx_families[] = {
	{ .family = "qwen3_5", .shift = FG_SHIFT_ON_MTP_KEY | FG_SHIFT_ON_CONV1D_3D,
	  .experts = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR | FG_XL_SWITCH_MLP,
	  .experts_known = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR | FG_XL_SWITCH_MLP,
	  .source = "ollama x/models/qwen3_5/qwen3_5.go@fb3076099687:L599-767, L808-846" },
	{ .family = "qwen3_next", .shift = FG_SHIFT_ON_MTP_KEY | FG_SHIFT_ON_CONV1D_3D,
	  .experts = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR | FG_XL_SWITCH_MLP,
	  .experts_known = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR | FG_XL_SWITCH_MLP,
	  .source = "ollama x/models/qwen3_5/qwen3_5.go@fb3076099687:L20-25, L599-767, L808-846" },
	{ .family = "*", .experts = FG_XL_ALL, .source = "not read for this family" },
	{ .family = NULL },
};

/* ---- llama.cpp convert_hf_to_gguf ---- */

/* Qwen3.5: _Qwen35MtpMixin keeps mtp.* and model.mtp.* (language_model. stripped anywhere:
 * base.py ModelBase.filter_tensors) as nextn layers, +1 on names ending norm.weight but
 * linear_attn.norm.weight (qwen.py@03173d5e78f8 Qwen3NextModel.modify_tensors,
 * _Qwen35MtpMixin.filter_tensors); Qwen3-Next drops mtp* ("ignore MTP layers for now"). */
static const struct fg_rt_head llamacpp_heads[] = {
	{ .families = qwen3_5_only, .mode = FG_HEAD_MODULE, .needs_keys = 1,
	  .keys = FG_KEY_MTP | FG_KEY_MODEL_MTP | FG_KEY_LM_MTP | FG_KEY_MODEL_LM_MTP | FG_KEY_LM_MODEL_MTP,
	  .strict = FG_LOAD_UNSTATED, .heal = FG_HEAL_ALWAYS, .norms = FG_NG_ALL,
	  .experts = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR, .experts_known = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR,
	  .missing = FG_MISSING_UNSTATED,
	  .source = "ggml-org/llama.cpp conversion/qwen.py@03173d5e78f8 _Qwen35MtpMixin.filter_tensors" },
	{ .mode = FG_HEAD_NONE },
};

static const struct fg_rt_family llamacpp_families[] = {
	{ .family = "qwen3_5", .shift = FG_SHIFT_ALWAYS, .experts = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR,
	  .experts_known = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR,
	  .source = "ggml-org/llama.cpp conversion/qwen.py@03173d5e78f8 Qwen3NextModel.modify_tensors" },
	{ .family = "qwen3_next", .shift = FG_SHIFT_ALWAYS, .drop = { .kind = FG_DROP_PREFIX, .text = "mtp" },
	  .experts = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR, .experts_known = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR,
	  .source = "ggml-org/llama.cpp conversion/qwen.py@03173d5e78f8 Qwen3NextModel.filter_tensors" },
	{ .family = "*", .experts = FG_XL_ALL, .source = "not read for this family" },
	{ .family = NULL },
};

/* ---- Hugging Face runtimes ---- */

/* transformers: ^mtp.* is ignored on load and no MTP module exists
 * (modeling_qwen3_next.py@7515843b6175 Qwen3NextPreTrainedModel._keys_to_ignore_on_load_unexpected,
 * inherited by Qwen3_5PreTrainedModel, modular_qwen3_5.py@8940358af742); Qwen3NextRMSNorm computes
 * x * (1 + w); linear_attn.norm (RMSNormGated) w * x. */
static const struct fg_rt_family transformers_families[] = {
	{ .family = "qwen3_5", .shift = FG_SHIFT_RUN_TIME, .drop = { .kind = FG_DROP_PREFIX, .text = "mtp." },
	  .experts = FG_XL_ALL, .source = "huggingface/transformers modular_qwen3_5.py@8940358af742 Qwen3_5RMSNorm" },
	{ .family = "qwen3_next", .shift = FG_SHIFT_RUN_TIME, .drop = { .kind = FG_DROP_PREFIX, .text = "mtp." },
	  .experts = FG_XL_ALL,
	  .source = "huggingface/transformers modeling_qwen3_next.py@7515843b6175 Qwen3NextRMSNorm" },
	{ .family = "*", .experts = FG_XL_ALL, .source = "not read for this family" },
	{ .family = NULL },
};

/* vLLM: GemmaRMSNorm x * (1 + w) for Qwen3.5 / Qwen3-Next trunks and heads, q/k included
 * (layernorm.py@00cba797bda4 GemmaRMSNorm.forward_static; qwen3_next.py@002d6073aa03); the trunk
 * skips names starting mtp. (qwen3_5.py@00def4f84211 Qwen3_5Model.load_weights); per-expert and
 * fused experts (chunk on dim -2). */
static const struct fg_rt_family vllm_families[] = {
	{ .family = "qwen3_5", .shift = FG_SHIFT_RUN_TIME, .drop = { .kind = FG_DROP_PREFIX, .text = "mtp." },
	  .experts = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR, .experts_known = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR,
	  .source = "vllm-project/vllm model_executor/models/qwen3_5.py@00def4f84211 Qwen3_5Model.load_weights" },
	{ .family = "qwen3_next", .shift = FG_SHIFT_RUN_TIME, .drop = { .kind = FG_DROP_PREFIX, .text = "mtp." },
	  .experts = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR, .experts_known = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR,
	  .source = "vllm-project/vllm model_executor/models/qwen3_next.py@002d6073aa03 hf_to_vllm_mapper" },
	{ .family = "deepseek_v3", .experts = FG_XL_ALL, .experts_known = FG_XL_NUMBERED,
	  .source = "vllm-project/vllm deepseek_mtp.py@03356f8cb59b _rewrite_spec_layer_name" },
	{ .family = "deepseek_v32", .experts = FG_XL_ALL, .experts_known = FG_XL_NUMBERED,
	  .source = "vllm-project/vllm deepseek_mtp.py@03356f8cb59b _rewrite_spec_layer_name" },
	{ .family = "glm_moe_dsa", .experts = FG_XL_ALL, .experts_known = FG_XL_NUMBERED,
	  .source = "vllm-project/vllm deepseek_mtp.py@03356f8cb59b (DeepSeekMTPModel drafter)" },
	{ .family = "glm4_moe", .experts = FG_XL_ALL, .experts_known = FG_XL_NUMBERED,
	  .source = "vllm-project/vllm glm4_moe_mtp.py@6e052ba8f4d9 _rewrite_spec_layer_name" },
	{ .family = "glm4_moe_lite", .experts = FG_XL_ALL, .experts_known = FG_XL_NUMBERED,
	  .source = "vllm-project/vllm speculative.py@f19b16d95e43 hf_config_override (Glm4MoeLiteMTPModel)" },
	{ .family = "mimo", .experts = FG_XL_ALL, .experts_known = FG_XL_ALL,
	  .source = "vllm-project/vllm mimo_mtp.py@98debc242491 map_model_name_to_mtp_param_name" },
	{ .family = "*", .experts = FG_XL_ALL, .source = "not read for this family" },
	{ .family = NULL },
};

/* The vLLM drafter (method mtp) reads the target's files: Qwen names starting exactly mtp.
 * (everything else dropped), DeepSeek/GLM model.layers.{L+i}, MiMo model.mtp_layers.{i}; unknown
 * names warn; a parameter left unfilled raises when unquantized (so MLX switch_mlp experts,
 * which its per-expert and fused mappings do not name, leave the experts unfilled: inference,
 * listed unconfirmed); no load-time shift
 * (GemmaRMSNorm); post-norm hidden, [embedding, hidden] (qwen3_5_mtp.py@01d99805d1ef
 * Qwen3_5MTP.load_weights, Qwen3_5MultiTokenPredictor.forward; default_loader.py@00b5ad071262
 * track_weights_loading; speculative.py@f19b16d95e43 hf_config_override). */
#define VLLM_DRAFTER(families_, keys_, concat_, source_)                                          \
	{ .families = families_, .mode = FG_HEAD_SEPARATE,                                          \
	  .count_keys = LIST("mtp_num_hidden_layers", "num_nextn_predict_layers"),                   \
	  .sources = SOURCES({ .kind = FG_HSRC_EMBEDDED, .empty = FG_EMPTY_BINDS }),                 \
	  .keys = keys_, .strict = FG_LOAD_EXTRA_OK,                                                 \
	  .strict_error = "Following weights were not initialized from checkpoint (the drafter's parameters)", \
	  .heal = FG_HEAL_RUN_TIME, .norms = FG_NG_ALL,                                              \
	  .experts = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR,                                            \
	  .experts_known = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR | FG_XL_SWITCH_MLP,                   \
	  .missing = FG_MISSING_AR, .hidden = FG_HIDDEN_POST_NORM, .concat = concat_, .source = source_ }

static const struct fg_rt_head vllm_heads[] = {
	VLLM_DRAFTER(LIST("qwen3_5", "qwen3_next"), FG_KEY_MTP, FG_CONCAT_EMBEDDING_FIRST,
		     "vllm-project/vllm model_executor/models/qwen3_5_mtp.py@01d99805d1ef Qwen3_5MTP.load_weights, "
		     "Qwen3_5MultiTokenPredictor.forward; qwen3_next_mtp.py@055e47c28003"),
	/* The DeepSeek, GLM and MiMo drafters' names were read, not their forward: order unstated. */
	VLLM_DRAFTER(LIST("deepseek_v3", "deepseek_v32", "glm_moe_dsa", "glm4_moe", "glm4_moe_lite"), FG_KEY_APPENDED,
		     FG_CONCAT_UNSTATED, "vllm-project/vllm deepseek_mtp.py@03356f8cb59b, glm4_moe_mtp.py@6e052ba8f4d9 "
		     "_rewrite_spec_layer_name"),
	VLLM_DRAFTER(LIST("mimo"), FG_KEY_MTP_LAYERS, FG_CONCAT_UNSTATED,
		     "vllm-project/vllm mimo_mtp.py@98debc242491 map_model_name_to_mtp_param_name"),
	{ .mode = FG_HEAD_NONE },
};

/* SGLang: names without "mtp" skipped, mtp.* renamed, other mtp-containing names match nothing
 * and are skipped with a warning (lenient); per-expert and fused experts (switch_mlp names match
 * no parameter and are skipped the same way: inference, listed unconfirmed); [embedding, hidden]
 * (qwen3_5_mtp.py@008b79d2358b Qwen3_5ForCausalLMMTP.load_weights, forward). */
static const struct fg_rt_head sglang_heads[] = {
	{ .families = LIST("qwen3_5", "qwen3_next"), .mode = FG_HEAD_SEPARATE,
	  .count_keys = LIST("mtp_num_hidden_layers", "num_nextn_predict_layers"),
	  .sources = SOURCES({ .kind = FG_HSRC_EMBEDDED, .empty = FG_EMPTY_BINDS }),
	  .keys = FG_KEY_MTP, .strict = FG_LOAD_LENIENT, .heal = FG_HEAL_RUN_TIME, .norms = FG_NG_ALL,
	  .experts = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR,
	  .experts_known = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR | FG_XL_SWITCH_MLP,
	  .missing = FG_MISSING_AR, .hidden = FG_HIDDEN_POST_NORM, .concat = FG_CONCAT_EMBEDDING_FIRST,
	  .source = "sgl-project/sglang python/sglang/srt/models/qwen3_5_mtp.py@008b79d2358b load_weights, forward" },
	{ .mode = FG_HEAD_NONE },
};

static const struct fg_rt_family sglang_families[] = {
	{ .family = "qwen3_5", .shift = FG_SHIFT_RUN_TIME, .drop = { .kind = FG_DROP_SUBSTRING, .text = "mtp" },
	  .experts = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR, .experts_known = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR,
	  .source = "sgl-project/sglang python/sglang/srt/models/qwen3_5.py@005fa711897e Qwen3_5ForCausalLM.load_weights" },
	{ .family = "qwen3_next", .shift = FG_SHIFT_RUN_TIME, .drop = { .kind = FG_DROP_SUBSTRING, .text = "mtp" },
	  .experts = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR, .experts_known = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR,
	  .source = "sgl-project/sglang python/sglang/srt/models/qwen3_5.py@005fa711897e (skips names containing mtp)" },
	{ .family = "*", .experts = FG_XL_ALL, .source = "not read for this family" },
	{ .family = NULL },
};

/* A Hugging Face target: delta norms, mtp.* in the shards next to the trunk. */
#define HF_FORGE                                                                                   \
	{ .head_file = NULL, .key_prefix = "mtp.", .experts = FG_XL_FUSED_LINEAR,                    \
	  .convention = FG_CONV_DELTA, .declarations = LIST("text_config.mtp_num_hidden_layers",     \
							    "num_nextn_predict_layers") }

/* ---- mlx-vlm ---- */

/* The target's qwen3_5 sanitize drops "mtp." first, then shifts when a conv1d is raw or, per
 * key, when the original key does not start "language_model." (qwen3_5.py@9b13f522a7f1:L16-47,
 * L145-170); qwen3_5_moe normalizes HF-prefixed fused or numbered experts, switch_mlp passes
 * (qwen3_5_moe/qwen3_5_moe.py@9b13f522a7f1:L25-75). */
static const struct fg_rt_family mlx_vlm_families[] = {
	{ .family = "qwen3_5", .shift = FG_SHIFT_ON_CONV1D | FG_SHIFT_ON_BARE_KEY, .conv1d_transpose = 1,
	  .drop = DROP_MTP, .experts = FG_XL_NUMBERED | FG_XL_FUSED_LINEAR | FG_XL_SWITCH_MLP,
	  .experts_known = FG_XL_ALL, .bmm_error = MLX_BMM_ERROR,
	  .source = "Blaizzy/mlx-vlm mlx_vlm/models/qwen3_5/qwen3_5.py@9b13f522a7f1:L16-47, L145-170" },
	{ .family = "*", .experts = FG_XL_ALL, .source = "native copies mirror mlx-lm; key prefixes not read" },
	{ .family = NULL },
};

/* ---- the table ---- */

static const struct fg_runtime runtimes[] = {
	{ .id = "mlx-lm-0.31", .product = "mlx-lm", .version_min = "0.31.0", .version_max = "0.32.0",
	  .contract = "glob model*.safetensors, strict; qwen3_5 shifts on any mtp. key or raw conv1d; drops mtp.*",
	  .files = FG_FILES_GLOB, .dups = FG_DUPS_ORDER, /* utils.py@ed1fca4cef15:L316, L321-323 */
	  .no_files_error = "FileNotFoundError: No safetensors found", /* utils.py@ed1fca4cef15:L318-319 */
	  .strict = FG_LOAD_STRICT, .strict_error = MLX_STRICT_ERROR, /* utils.py@ed1fca4cef15:L282-288, L415 */
	  .unsupported_model_types = LIST("qwen3_5_mtp"), /* no mlx_lm/models/qwen3_5_mtp.py in any version */
	  .model_type_error = "ValueError: Model type {} not supported.", /* utils.py@ed1fca4cef15:L187-191 */
	  .families = mlxlm031_families,
	  .formats = MLXLM_FORMATS, .fp8_families = MLXLM_FP8, .ct_families = MLXLM_CT, .forge = MLXLM_FORGE,
	  .mlx = 1, .default_for = FG_LAYOUT_MLX,
	  .unconfirmed = LIST("whether an mlx-lm 0.31.4+ release exists (the mirror's newest tag is v0.31.3)"),
	  .source = "ml-explore/mlx-lm v0.31.3 ed1fca4cef15" },
	{ .id = "mlx-lm-0.32", .product = "mlx-lm", .version_min = "0.32.0",
	  .contract = "glob model*.safetensors, strict; qwen3_5 shifts only for a raw conv1d (PR 1623); drops mtp.*",
	  .files = FG_FILES_GLOB, .dups = FG_DUPS_ORDER, /* utils.py@d78bf58e217c:L336-343 */
	  .no_files_error = "FileNotFoundError: No safetensors found",
	  .strict = FG_LOAD_STRICT, .strict_error = MLX_STRICT_ERROR, /* utils.py@d78bf58e217c:L296-301, L445 */
	  .unsupported_model_types = LIST("qwen3_5_mtp"),
	  .model_type_error = "ValueError: Model type {} not supported.", /* utils.py@d78bf58e217c:L177-195 */
	  .families = mlxlm032_families,
	  .formats = MLXLM_FORMATS, .fp8_families = MLXLM_FP8, .ct_families = MLXLM_CT, .forge = MLXLM_FORGE,
	  .mlx = 1, .default_for = FG_LAYOUT_MLX | FG_LAYOUT_HF,
	  .unconfirmed = LIST("which commit the PyPI 0.32.x releases are built from (no v0.32 tag in the snapshot)"),
	  .source = "ml-explore/mlx-lm main d78bf58e217c (0.32.0)" },
	{ .id = "mlx-lm-pr990", .flags = FG_RT_OPT_IN,
	  .contract = "PR 990 (open): 0.32 plus an in-checkpoint head; refuses a declared head with no mtp.* keys",
	  .files = FG_FILES_GLOB, .dups = FG_DUPS_ORDER, .no_files_error = "FileNotFoundError: No safetensors found",
	  .strict = FG_LOAD_STRICT, .strict_error = MLX_STRICT_ERROR,
	  .unsupported_model_types = LIST("qwen3_5_mtp"), .model_type_error = "ValueError: Model type {} not supported.",
	  .families = mlxlm032_families, .heads = pr990_heads,
	  .formats = MLXLM_FORMATS, .fp8_families = MLXLM_FP8, .ct_families = MLXLM_CT, .forge = MLXLM_PR_FORGE, .mlx = 1,
	  .source = "ml-explore/mlx-lm refs/pull/990/head e8ceeccf118d" },
	{ .id = "mlx-lm-pr1740", .flags = FG_RT_OPT_IN,
	  .contract = "PR 1740 (closed): PR 990's head; a declared head without keys falls back to plain decoding",
	  .files = FG_FILES_GLOB, .dups = FG_DUPS_ORDER, .no_files_error = "FileNotFoundError: No safetensors found",
	  .strict = FG_LOAD_STRICT, .strict_error = MLX_STRICT_ERROR,
	  .unsupported_model_types = LIST("qwen3_5_mtp"), .model_type_error = "ValueError: Model type {} not supported.",
	  .families = mlxlm032_families, .heads = pr1740_heads,
	  .formats = MLXLM_FORMATS, .fp8_families = MLXLM_FP8, .ct_families = MLXLM_CT, .forge = MLXLM_PR_FORGE, .mlx = 1,
	  .source = "ml-explore/mlx-lm refs/pull/1740/head bc1d11414c12" },
	{ .id = "mlx-lm-pr1724", .flags = FG_RT_OPT_IN,
	  .contract = "PR 1724 (closed): exact head key-set validation; refuses a declared head without keys",
	  .files = FG_FILES_GLOB, .dups = FG_DUPS_ORDER, .no_files_error = "FileNotFoundError: No safetensors found",
	  .strict = FG_LOAD_STRICT, .strict_error = MLX_STRICT_ERROR,
	  .unsupported_model_types = LIST("qwen3_5_mtp"), .model_type_error = "ValueError: Model type {} not supported.",
	  .families = pr1724_families, .heads = pr1724_heads,
	  .formats = MLXLM_FORMATS, .fp8_families = MLXLM_FP8, .ct_families = MLXLM_CT, .forge = MLXLM_PR_FORGE, .mlx = 1,
	  .unconfirmed = LIST("how _normalize_experts treats a fused bmm [E,H,2I] layout"),
	  .source = "ml-explore/mlx-lm refs/pull/1724/head a9e671b33ce8" },
	{ .id = "mlx-lm-pr1469", .flags = FG_RT_OPT_IN,
	  .contract = "PR 1469 (closed): lazy head; shifts only the head layer's norms, so a raw head loads inverted",
	  .files = FG_FILES_GLOB, .dups = FG_DUPS_ORDER, .no_files_error = "FileNotFoundError: No safetensors found",
	  .strict = FG_LOAD_STRICT, .strict_error = MLX_STRICT_ERROR,
	  .unsupported_model_types = LIST("qwen3_5_mtp"), .model_type_error = "ValueError: Model type {} not supported.",
	  .families = mlxlm032_families, .heads = pr1469_heads,
	  .formats = MLXLM_FORMATS, .fp8_families = MLXLM_FP8, .ct_families = MLXLM_CT, .forge = MLXLM_PR_FORGE, .mlx = 1,
	  .unconfirmed = LIST("when load_mtp_head (the *_mtp sidecar path, utils.py@51b980d8a507:L453-531) is "
			      "called: not modelled"),
	  .source = "ml-explore/mlx-lm refs/pull/1469/head 51b980d8a507" },
	{ .id = "lmstudio-mlx",
	  .contract = "LM Studio mlx-engine: mlx-lm pinned before PR 1623 (presence-keyed shift); no MTP",
	  /* mlx-engine requirements.txt@08f0c0758a80:L28-31 pins mlx-lm 2c008fd0252b (0.31.3, PR 1623
	   * not an ancestor: qwen3_5.py@2c008fd0252b:L348-372; utils.py@2c008fd0252b:L323-330, L360, L429);
	   * a draft model is an mlx_lm peer model (model_kit.py@08f0c0758a80:L190-217); issue
	   * lmstudio-ai/mlx-engine#370: built-in MTP heads are ignored. */
	  .files = FG_FILES_GLOB, .dups = FG_DUPS_ORDER, .no_files_error = "FileNotFoundError: No safetensors found",
	  .strict = FG_LOAD_STRICT, .strict_error = MLX_STRICT_ERROR,
	  .unsupported_model_types = LIST("qwen3_5_mtp"), .model_type_error = "ValueError: Model type {} not supported.",
	  .routes_away = LIST("vision_config"), /* generate.py@08f0c0758a80:L257-278: mlx-vlm 0.6.12 */
	  .families = mlxlm031_families,
	  .formats = MLXLM_FORMATS, .fp8_families = MLXLM_FP8, .ct_families = MLXLM_CT, .forge = MLXLM_FORGE,
	  .mlx = 1, .default_for = FG_LAYOUT_MLX,
	  .unconfirmed = LIST("which max_seq_nums LM Studio passes: with the default 4 a text model is probe-loaded "
			      "by mlx-vlm first (generate.py@08f0c0758a80:L280-331), not modelled",
			      "the vision_config route (mlx-vlm 321514d63334) is not modelled"),
	  .source = "lmstudio-ai/mlx-engine 08f0c0758a80 with ml-explore/mlx-lm 2c008fd0252b" },
	{ .id = "mlx-vlm",
	  .contract = "mlx-vlm 0.6.15: index files else *.safetensors, strict; drops mtp.* first; shifts raw conv1d "
		      "or keys without language_model.",
	  .files = FG_FILES_INDEX_ELSE_ALL, .exclude = LIST("consolidated.safetensors"),
	  .dups = FG_DUPS_INDEX_SORTED, /* utils.py@9b13f522a7f1:L761-805 */
	  .no_files_error = "no safetensors found",
	  .strict = FG_LOAD_STRICT, .strict_error = MLX_STRICT_ERROR, /* utils.py@9b13f522a7f1:L758, L980 */
	  .families = mlx_vlm_families,
	  /* MLX quantization, mxfp4, compressed-tensors, modelopt nvfp4, FP8 for qwen3_5 (e4m3 128 -> mxfp8);
	   * AWQ/GPTQ only warn (utils.py@9b13f522a7f1:L830-906) */
	  .formats = FG_WF_FLOAT | FG_WF_MLX_AFFINE | FG_WF_MLX_MXFP4 | FG_WF_MLX_NVFP4 | FG_WF_MLX_MXFP8 |
		     FG_WF_COMPRESSED | FG_WF_MODELOPT_NVFP4 | FG_WF_FP8_BLOCK,
	  .fp8_families = LIST("qwen3_5"), .forge = MLXVLM_FORGE, .mlx = 1,
	  .unconfirmed = LIST("the qwen3_5_mtp drafter (load_drafter) is a separate checkpoint: not modelled",
			      "families other than qwen3_5: the native copies' key-prefix handling was not read"),
	  .source = "Blaizzy/mlx-vlm 9b13f522a7f1 (0.6.15)" },
	{ .id = "mtplx-2.11", .product = "mtplx", .version_min = "2.11.0", .version_max = "2.12.0",
	  .contract = "trunk through mlx-lm 0.31, guard above q-norm 2.4 for qwen3_5/qwen3_next; sidecar head, "
		      "strict=False; no heal for qwen3_5_mtp",
	  .files = FG_FILES_GLOB, .dups = FG_DUPS_ORDER, .no_files_error = "FileNotFoundError: No safetensors found",
	  .strict = FG_LOAD_STRICT, .strict_error = MLX_STRICT_ERROR,
	  .families = mlxlm031_families, MTPLX_GUARD, .heads = mtplx211_heads,
	  .formats = MLXLM_FORMATS, .fp8_families = MLXLM_FP8, .ct_families = MLXLM_CT, .forge = MTPLX_FORGE, .mlx = 1,
	  .unconfirmed = LIST("the 2.11 pyproject's mlx-lm pin (2.9.2 and 2.12.0 both pin mlx-lm>=0.31,<0.32)",
			      "the 2.11 qwen3_5_mtp_patch.py itself (no heal rests on the 2.12.0 changelog)",
			      "tag commits: no snapshot of youssofal/MTPLX; lines are character offsets"),
	  .source = "youssofal/MTPLX 2.11.x (CHANGELOG.md@029eff70; runtime.py, mtp_patch.py@0943c6cb)" },
	{ .id = "mtplx-2.12", .product = "mtplx", .version_min = "2.12.0", .version_max = "2.12.1",
	  .contract = "2.12.0: as 2.11, the qwen3_5_mtp loader heals too; fused MoE sidecar experts still dropped",
	  .files = FG_FILES_GLOB, .dups = FG_DUPS_ORDER, .no_files_error = "FileNotFoundError: No safetensors found",
	  .strict = FG_LOAD_STRICT, .strict_error = MLX_STRICT_ERROR,
	  .families = mlxlm031_families, MTPLX_GUARD, .heads = mtplx212_heads,
	  .formats = MLXLM_FORMATS, .fp8_families = MLXLM_FP8, .ct_families = MLXLM_CT, .forge = MTPLX_FORGE,
	  .mlx = 1, .default_for = FG_LAYOUT_MLX,
	  .unconfirmed = LIST("2.12.1+ (fused-expert fix #574) exists only in a fork's CHANGELOG "
			      "(shunya1810/MTPLX@ba1eae53); upstream has no 2.12.1 entry, so no row covers it",
			      "where model-mtp-head.safetensors entered the generic injector's candidates"),
	  .source = "youssofal/MTPLX 2.12.0 (CHANGELOG.md@029eff70; qwen3_5_mtp_patch.py@09756775; "
		    "pyproject jvmenen/MTPLX@0d56bc6d: mlx-lm>=0.31,<0.32)" },
	{ .id = "vllm-mlx",
	  .contract = "trunk through mlx-lm (retried strict=False on extra keys); head only from "
		      "mtp/weights.safetensors or model-mtp.safetensors, healed per tensor below 0.5",
	  .files = FG_FILES_GLOB, .dups = FG_DUPS_ORDER, .no_files_error = "FileNotFoundError: No safetensors found",
	  /* vllm_mlx/utils/tokenizer.py@4b654c09e610:L63-153: strict, retried with load_model(strict=False)
	   * on "parameters not in model"; VLM models load strict=False directly */
	  .strict = FG_LOAD_RETRY_LENIENT, .strict_error = MLX_STRICT_ERROR,
	  .unsupported_model_types = LIST("qwen3_5_mtp"), .model_type_error = "ValueError: Model type {} not supported.",
	  .families = mlxlm032_families, .heads = vllm_mlx_heads,
	  .formats = MLXLM_FORMATS, .fp8_families = MLXLM_FP8, .ct_families = MLXLM_CT,
	  .forge = { .head_file = "mtp/weights.safetensors", .key_prefix = "mtp.", .experts = FG_XL_SWITCH_MLP,
		     .convention = FG_CONV_ABSOLUTE,
		     .declarations = LIST("mtp/manifest.json", "mtp_hidden_state_mode", "norm_convention"),
		     .shards_without_head = 1 },
	  .mlx = 1,
	  .unconfirmed = LIST("which mlx-lm is installed: the pin is mlx-lm>=0.31.3 (pyproject.toml@4b654c09e610:L42-45); "
			      "the row uses main's (0.32) sanitize",
			      "numbered head experts: not accepted at inject time, skipped under strict=False (inference)"),
	  .source = "waybarrios/vllm-mlx 4b654c09e610" },
	{ .id = "ollama",
	  .contract = "default import to GGUF: +1 on every norm but ssm_norm, unconditionally; mtp.* to nextn blocks",
	  /* the client uploads the first of model*.safetensors (and model*.safetensors one folder down), consolidated*.safetensors,
	   * pytorch_model*.bin, ... (parser/parser.go@fb3076099687:L300-401); the server globs *.safetensors of
	   * the upload, not recursively (convert/reader.go@fb3076099687:L78-101); no index */
	  .files = FG_FILES_FIRST_PATTERN, .patterns = LIST("model*.safetensors", "consolidated*.safetensors"),
	  .dups = FG_DUPS_REFUSE, .dups_error = "duplicate tensor name", /* convert/convert.go@fb3076099687:L427-460 */
	  .no_files_error = "no safetensors or pytorch model files found",
	  .strict = FG_LOAD_UNSTATED,
	  .unsupported_architectures = LIST("Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM"),
	  .architecture_error = "unsupported architecture", /* convert/convert.go@fb3076099687:L296, L353-361 */
	  .families = ollama_families, .heads = ollama_heads,
	  /* F32, F16, BF16, U8, block-FP8 E4M3 with a scale companion (convert/reader_safetensors.go@fb3076099687:L213-517) */
	  .formats = FG_WF_FLOAT | FG_WF_U8_RAW | FG_WF_FP8_BLOCK,
	  /* addOne works on the []float32 of the tensor and 1-D tensors are written F32
	   * (convert/convert_qwen3next.go@fb3076099687:L1541-1561; convert/reader.go@fb3076099687:L62-66;
	   * convert/reader_safetensors.go@fb3076099687:L259-271) */
	  .shift_f32 = FG_SHIFT_F32_BF16 | FG_SHIFT_F32_F16,
	  .forge = { .head_file = NULL, .key_prefix = "mtp.", .experts = FG_XL_FUSED_LINEAR,
		     .convention = FG_CONV_DELTA, .declarations = LIST("num_nextn_predict_layers", "mtp_num_hidden_layers") },
	  .default_for = FG_LAYOUT_HF,
	  .unconfirmed = LIST("what the GGUF load does with head keys of other spellings (model.mtp.*)",
			      "a declared head without mtp.* tensors (nextn from the config, no tensors)",
			      "the hidden stage and concat order of the vendored llama.cpp graph",
			      "families other than qwen3_5 / qwen3_next"),
	  .source = "ollama/ollama fb3076099687 (convert/, parser/)" },
	{ .id = "ollama-mlx",
	  .contract = "--experimental: index tensors only; +1 on every norm (trunk and head) when any name has mtp. "
		      "or a 3-D conv1d is raw",
	  .files = FG_FILES_INDEX_TENSORS, .mono_and_shards_refused = 1, /* x/create/inventory.go@fb3076099687:L58-155 */
	  .index_check = FG_INDEX_REFUSE_MISSING,
	  .dups = FG_DUPS_REFUSE, .dups_error = "duplicate tensor: found in both files", /* inventory.go L87-90 */
	  .no_files_error = "no model weights found",
	  .strict = FG_LOAD_UNSTATED,
	  .families = ollama_mlx_families, .heads = ollama_mlx_heads,
	  /* x/create/classify.go@fb3076099687:L43-191 */
	  .formats = FG_WF_FLOAT | FG_WF_MLX_AFFINE | FG_WF_MLX_MXFP4 | FG_WF_MLX_NVFP4 | FG_WF_MLX_MXFP8 |
		     FG_WF_FP8_BLOCK | FG_WF_COMPRESSED | FG_WF_MODELOPT_NVFP4,
	  .forge = { .head_file = NULL, .key_prefix = "mtp.", .experts = FG_XL_SWITCH_MLP,
		     .convention = FG_CONV_DELTA, .declarations = LIST("model.safetensors.index.json") },
	  .mlx = 1, .default_for = FG_LAYOUT_MLX,
	  .unconfirmed = LIST("what the runner does with keys it has no use for",
			      "families other than qwen3_5 / qwen3_next"),
	  .source = "ollama/ollama fb3076099687 (x/create/, x/models/qwen3_5/)" },
	{ .id = "llamacpp",
	  .contract = "convert_hf_to_gguf: index files exactly; +1 on every norm but linear_attn.norm; "
		      "mtp.*/model.mtp.* to nextn layers",
	  /* conversion/base.py@00bd27a621f9 ModelBase.index_tensors: model*.safetensors, the index's files when
	   * there is one, and any difference between index and files raises */
	  .files = FG_FILES_INDEX_ELSE_GLOB, .index_check = FG_INDEX_REFUSE_ANY, .dups = FG_DUPS_ORDER,
	  .no_files_error = "no model parts found",
	  .strict = FG_LOAD_UNSTATED,
	  .families = llamacpp_families, .heads = llamacpp_heads,
	  /* conversion/base.py@00bd27a621f9 dequant_model: bitnet, fp8 blocks, GPTQ 2/4/8 bits through the
	   * module's g_idx (a GPTQ module without one is a KeyError), compressed-tensors pack-quantized and
	   * float-quantized, ModelOpt FP8 and NVFP4.  Not modelled: its compressed-tensors limits (one config
	   * group, pack-quantized strategy group, float-quantized channel or block). */
	  .formats = FG_WF_FLOAT | FG_WF_BITNET | FG_WF_FP8_BLOCK | FG_WF_FP8_SCALED | FG_WF_GPTQ | FG_WF_COMPRESSED |
		     FG_WF_MODELOPT_NVFP4,
	  /* prepare_tensors turns every tensor that is not F16/F32 into F32 before modify_tensors adds the 1
	   * (conversion/base.py@00bd27a621f9:ModelBase.prepare_tensors; conversion/qwen.py@03173d5e78f8:
	   * Qwen3NextModel.modify_tensors): a BF16 norm is summed in F32, an F16 one in F16 */
	  .shift_f32 = FG_SHIFT_F32_BF16,
	  .forge = { .head_file = NULL, .key_prefix = "mtp.", .experts = FG_XL_FUSED_LINEAR,
		     .convention = FG_CONV_DELTA, .declarations = LIST("mtp_num_hidden_layers") },
	  .default_for = FG_LAYOUT_HF,
	  .unconfirmed = LIST("the file rule's exact text (get_model_part_names seen only in unattributed hits)",
			      "duplicate names across parts", "the nextn graph's hidden stage and concat order",
			      "families other than qwen3_5 / qwen3_next"),
	  .source = "ggml-org/llama.cpp conversion/qwen.py@03173d5e78f8, conversion/base.py@00bd27a621f9" },
	{ .id = "transformers",
	  .contract = "from_pretrained: computes 1 + w at run time (expects delta); ignores ^mtp.*, runs no head",
	  .files = FG_FILES_INDEX_ELSE_SINGLE, .dups = FG_DUPS_ORDER, .no_files_error = "no model weights found",
	  .strict = FG_LOAD_LENIENT,
	  .families = transformers_families,
	  .formats = FG_WF_FLOAT, .formats_partial = 1, /* its quantizers were not read */
	  .forge = HF_FORGE,
	  .default_for = FG_LAYOUT_HF,
	  .unconfirmed = LIST("the file rule and strictness of from_pretrained (not read: index-driven sharded loading, "
			      "missing keys warned and initialised)", "weight formats (not read)"),
	  .source = "huggingface/transformers modeling_qwen3_next.py@7515843b6175" },
	{ .id = "vllm",
	  .contract = "computes 1 + w at run time (expects delta); the mtp drafter loads names starting mtp.",
	  /* default_loader.py@00b5ad071262 _prepare_weights; weight_utils.py@0a1ee72ed53f
	   * filter_duplicate_safetensors_files: index files only; no index: every root *.safetensors */
	  .files = FG_FILES_INDEX_ELSE_ALL, .dups = FG_DUPS_ORDER, .no_files_error = "no model weights found",
	  .strict = FG_LOAD_EXTRA_OK, .strict_error = "Following weights were not initialized from checkpoint",
	  .families = vllm_families, .heads = vllm_heads,
	  /* what the MTP sources state (modelopt_fp4, GPTQ biases, FP8 scales); its other quantization
	   * methods were not read */
	  .formats = FG_WF_FLOAT | FG_WF_MODELOPT_NVFP4 | FG_WF_GPTQ | FG_WF_FP8_BLOCK | FG_WF_FP8_SCALED,
	  .formats_partial = 1,
	  .forge = HF_FORGE,
	  .default_for = FG_LAYOUT_HF,
	  .unconfirmed = LIST("duplicate names: every copy is loaded in turn, the last wins (inference)",
			      "MLX switch_mlp head experts: no mapping names them, so the experts stay unfilled (inference)",
			      "linear_attn.norm's formula", "a declared head without tensors: the drafter is opt-in "
			      "(method mtp) and the row degrades to plain decoding, as issue 12 reports"),
	  .source = "vllm-project/vllm (index: default_loader.py@00b5ad071262, qwen3_5_mtp.py@01d99805d1ef)" },
	{ .id = "sglang",
	  .contract = "computes 1 + w at run time (expects delta); the drafter renames mtp.*, skips other mtp names",
	  .files = FG_FILES_INDEX_ELSE_ALL, .dups = FG_DUPS_ORDER, .no_files_error = "no model weights found",
	  .strict = FG_LOAD_LENIENT, /* unknown names warned (qwen3_5.py@005fa711897e load_weights) */
	  .families = sglang_families, .heads = sglang_heads,
	  .formats = FG_WF_FLOAT | FG_WF_MODELOPT_NVFP4 | FG_WF_GPTQ, .formats_partial = 1, /* as vLLM */
	  .forge = HF_FORGE,
	  .default_for = FG_LAYOUT_HF,
	  .unconfirmed = LIST("the glob patterns of model_loader/loader.py (the index filter is vLLM's)",
			      "GemmaRMSNorm's formula in SGLang (x * (1 + w) assumed from the name and vLLM)",
			      "that the captured hidden state is the post-norm output",
			      "MLX switch_mlp head experts: skipped as unknown names, the experts keep initial values (inference)"),
	  .source = "sgl-project/sglang (index: qwen3_5_mtp.py@008b79d2358b, qwen3_5.py@005fa711897e)" },
};

#define N_RUNTIMES (sizeof(runtimes) / sizeof(runtimes[0]))

/* "hf" was one row before issue 10: Hugging Face runtimes; one row is vLLM (it loads the head). */
static const struct fg_runtime_alias aliases[] = {
	{ .alias = "hf", .ids = LIST("vllm", "sglang", "transformers"),
	  .doc = "the Hugging Face runtimes (before issue 10 one row); vllm where one row is needed" },
};

const struct fg_runtime *fg_runtime_all(size_t *n)
{
	*n = N_RUNTIMES;
	return runtimes;
}

const struct fg_runtime_alias *fg_runtime_aliases(size_t *n)
{
	*n = sizeof(aliases) / sizeof(aliases[0]);
	return aliases;
}
