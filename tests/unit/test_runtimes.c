/*
 * test_runtimes.c: the runtime table and its load simulation (runtimes.h),
 * data-driven.
 *
 * The heart is one table, `cases`: each row is a scenario (a fixture of
 * tests/fixtures/gen_fixtures.py, inspected for one runtime id), the
 * expected trunk, head, outcome, breakage and load-error cause, and the
 * source line the expectation comes from.  The expectations are written
 * from the loaders' sources (docs/runtimes.md; /work/notes), never from
 * forged's output.  Every mismatch is printed before the test fails, as
 * curl's data-driven tests do.  `variants` are the same with the input
 * changed first (a manifest removed).  Then the table's invariants, id
 * resolution (aliases, version ranges) and the file rules on hand-built
 * checkpoints.  Without the fixtures (fixtures_root: $FIXTURES, else
 * BUILD/fixtures) the fixture tests are skipped.
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
#include <unistd.h>

#include "forge/model/inspect.h"
#include "forge/model/runtimes.h"
#include "tests/unit/support.h"

/* One scenario: a fixture, a runtime id, and what its source says loads. */
struct scenario {
	const char *fixture;
	const char *runtime;      /* as given to --runtime */
	const char *trunk, *head, *outcome;
	const char *breakage;     /* breakage names, space-separated ("" none) */
	const char *load;         /* the load error's cause, NULL when it loads */
	const char *source;       /* where the expectation comes from */
};

#define ML031 "ml-explore/mlx-lm mlx_lm/models/qwen3_5.py@ed1fca4cef15:L307-331"
#define ML032 "ml-explore/mlx-lm mlx_lm/models/qwen3_5.py@d78bf58e217c:L348-370"
#define MOE "ml-explore/mlx-lm mlx_lm/models/qwen3_5_moe.py@d78bf58e217c:L23-52"
#define MTPLX_INJ "youssofal/MTPLX mtplx/mtp_patch.py@0943c6cb inject_mtp_support ~c31000-33500"
#define VMLX "waybarrios/vllm-mlx vllm_mlx/patches/qwen3_5_mtp.py@4b654c09e610"

static const struct scenario cases[] = {
	/* MTPLX issue 306: an absolute MLX trunk with 29 embedded mtp.* keys. */
	{ "qwen35_mlx_embedded", "mlx-lm-0.31", "double_shifted", "dropped", "broken", "trunk_double_shifted", NULL,
	  ML031 " (any key containing \"mtp.\" shifts, then mtp.* is dropped)" },
	{ "qwen35_mlx_embedded", "mlx-lm-0.32", "ok", "dropped", "ok", "", NULL, ML032 " (PR 1623: raw conv1d only)" },
	{ "qwen35_mlx_embedded", "lmstudio-mlx", "double_shifted", "dropped", "broken", "trunk_double_shifted", NULL,
	  "ml-explore/mlx-lm mlx_lm/models/qwen3_5.py@2c008fd0252b:L348-372 (mlx-engine requirements.txt@08f0c0758a80:L28-31)" },
	{ "qwen35_mlx_embedded", "mtplx-2.12", "double_shifted", "ok", "refused", "", "guard",
	  "youssofal/MTPLX mtplx/runtime.py@0943c6cb _refuse_double_shifted_trunk_norms ~c46300 (model_type qwen3_5)" },
	{ "qwen35_mlx_embedded", "ollama-mlx", "double_shifted", "double_shifted", "broken",
	  "trunk_double_shifted head_degraded", NULL, "ollama x/models/qwen3_5/qwen3_5.go@fb3076099687:L831-838, L1026-1034" },
	/* Issue 12: the default import reads F32, F16, BF16 and E4M3 only: the 4-bit MLX trunk's U32 weights are
	 * refused before the +1 (convert/convert_qwen3next.go@fb3076099687:L1541-1561) could apply. */
	{ "qwen35_mlx_embedded", "ollama", "double_shifted", "double_shifted", "refused", "", "format",
	  "ollama convert/reader_safetensors.go@fb3076099687:L213-257 (\"unknown data type: U32\")" },
	{ "qwen35_mlx_embedded", "vllm", "double_shifted", "double_shifted", "broken", "trunk_double_shifted head_degraded",
	  NULL, "vllm-project/vllm layers/layernorm.py@00cba797bda4 GemmaRMSNorm.forward_static (x * (1 + w))" },
	{ "qwen35_mlx_embedded", "mlx-lm-pr990", "ok", "ok", "ok", "", NULL,
	  "ml-explore/mlx-lm mlx_lm/models/qwen3_5.py@e8ceeccf118d:L504-537 (keeps mtp.* when the head exists)" },
	{ "qwen35_mlx_embedded", "vllm-mlx", "ok", "absent", "degraded", "", NULL, VMLX ":L290-298 (two sidecar files only)" },
	/* Pruning the index: mlx-lm globs; ollama --experimental reads index-listed tensors only. */
	{ "qwen35_mlx_pruned_index", "mlx-lm-0.31", "double_shifted", "dropped", "broken", "trunk_double_shifted", NULL,
	  "ml-explore/mlx-lm mlx_lm/utils.py@ed1fca4cef15:L316 (glob model*.safetensors, index ignored)" },
	{ "qwen35_mlx_pruned_index", "ollama-mlx", "ok", "dropped", "degraded", "", NULL,
	  "ollama x/create/inventory.go@fb3076099687:L58-76 (tensors not in the index are skipped)" },
	{ "qwen35_mlx_pruned_index", "llamacpp", "double_shifted", "double_shifted", "refused", "", "index",
	  "ggml-org/llama.cpp conversion/base.py@00bd27a621f9 ModelBase.index_tensors (index and parts must agree)" },
	{ "qwen35_mlx_stray_shard", "mlx-lm-0.31", "double_shifted", "dropped", "broken", "trunk_double_shifted", NULL,
	  "ml-explore/mlx-lm mlx_lm/utils.py@ed1fca4cef15:L316 (the stray model-extra.safetensors is globbed)" },
	{ "qwen35_mlx_stray_shard", "ollama-mlx", "ok", "absent", "degraded", "", NULL,
	  "ollama x/create/inventory.go@fb3076099687:L58-76, L132-155 (only the index's files)" },
	/* A raw Hugging Face checkpoint: delta trunk and head, conv1d [C,1,K]. */
	{ "qwen35_hf", "mlx-lm-0.32", "ok", "dropped", "ok", "", NULL, ML032 " (raw conv1d shifts; mtp.* dropped)" },
	{ "qwen35_hf", "transformers", "ok", "dropped", "ok", "", NULL,
	  "huggingface/transformers modeling_qwen3_next.py@7515843b6175 _keys_to_ignore_on_load_unexpected ^mtp.*" },
	{ "qwen35_hf", "vllm", "ok", "ok", "ok", "", NULL,
	  "vllm-project/vllm qwen3_5_mtp.py@01d99805d1ef Qwen3_5MTP.load_weights (mtp. -> model., 1 + w)" },
	{ "qwen35_hf", "sglang", "ok", "ok", "ok", "", NULL, "sgl-project/sglang qwen3_5_mtp.py@008b79d2358b load_weights" },
	{ "qwen35_hf", "ollama", "ok", "ok", "ok", "", NULL,
	  "ollama convert/convert_qwen3next.go@fb3076099687:L1071-1175, L1541-1561 (nextn blocks, +1)" },
	{ "qwen35_hf", "llamacpp", "ok", "ok", "ok", "", NULL,
	  "ggml-org/llama.cpp conversion/qwen.py@03173d5e78f8 _Qwen35MtpMixin.filter_tensors, modify_tensors" },
	{ "qwen35_hf", "mtplx-2.12", "ok", "ok", "ok", "", NULL,
	  MTPLX_INJ " (embedded keys through the index, then shift_delta_mtp_norms)" },
	{ "qwen35_hf", "mlx-lm-pr1469", "ok", "inverted", "degraded", "head_inverted", NULL,
	  "ml-explore/mlx-lm mlx_lm/models/qwen3_5.py@51b980d8a507:L490-503 (pre_fc_norm_* and mtp.norm not shifted)" },
	{ "qwen35_hf", "mlx-lm-pr990", "ok", "ok", "ok", "", NULL,
	  "ml-explore/mlx-lm mlx_lm/models/qwen3_5.py@e8ceeccf118d:L504-537 (head norms in the suffixes)" },
	{ "qwen35_hf", "mlx-vlm", "ok", "dropped", "ok", "", NULL,
	  "Blaizzy/mlx-vlm mlx_vlm/models/qwen3_5/qwen3_5.py@9b13f522a7f1:L145-170 (keys without language_model. shift)" },
	{ "qwen35_hf_single", "mtplx-2.12", "ok", "ok", "ok", "", NULL, MTPLX_INJ " (no index: the glob's headers)" },
	/* Healthy MLX artifacts and their sidecars. */
	{ "qwen35_mlx_sidecar", "mtplx-2.12", "ok", "ok", "ok", "", NULL, MTPLX_INJ " (config pointer, absolute head)" },
	{ "qwen35_mlx_sidecar", "mlx-lm-pr990", "ok", "absent", "refused", "", "head_missing",
	  "ml-explore/mlx-lm mlx_lm/models/qwen3_5.py@e8ceeccf118d:L504-537 (declared, no mtp. key: ValueError)" },
	{ "qwen35_mlx_sidecar", "mlx-lm-pr1740", "ok", "absent", "degraded", "", NULL,
	  "ml-explore/mlx-lm mlx_lm/models/qwen3_5.py@bc1d11414c12:L510-528 (the head is deleted)" },
	{ "qwen35_mlx_sidecar", "transformers", "double_shifted", "dropped", "broken", "trunk_double_shifted", NULL,
	  "huggingface/transformers modular_qwen3_5.py@8940358af742 Qwen3_5RMSNorm (x * (1 + w))" },
	{ "qwen35_mlx_raw_head", "mtplx-2.12", "ok", "ok", "ok", "", NULL, MTPLX_INJ " (set-level detector: delta)" },
	{ "qwen35_mlx_raw_head", "mtplx-2.11", "ok", "ok", "ok", "", NULL,
	  "youssofal/MTPLX CHANGELOG.md@029eff70 [2.9.2] (per-set decision in the generic injector)" },
	{ "qwen35_moe_mlx_raw_head", "mtplx-2.11", "ok", "ok", "ok", "", NULL,
	  "youssofal/MTPLX mtplx/runtime.py@0943c6cb ~c30500 (qwen3_5_moe reaches the generic injector, which heals)" },
	{ "qwen35_mlx_head_shifted", "mtplx-2.12", "ok", "double_shifted", "degraded", "head_degraded", NULL,
	  "fourthDimensional/MTPLX-Optimized compressed_tensors.py@7e9dfaa80642 shift_delta_mtp_norms (q/k >= 1.25: no shift)" },
	/* A declared head with no tensors (issue 12): plain decoding, refused by PR 990 and 1724 only. */
	{ "qwen35_mlx_no_head_declared", "mlx-lm-0.32", "ok", "absent", "ok", "", NULL,
	  "ml-explore/mlx-lm mlx_lm/utils.py@ed1fca4cef15:L899-922 (save_config keeps the count; nothing loads it)" },
	{ "qwen35_mlx_no_head_declared", "mtplx-2.12", "ok", "absent", "degraded", "", NULL,
	  MTPLX_INJ " (an index without mtp keys: False, then AR)" },
	{ "qwen35_mlx_no_head_declared", "mlx-lm-pr990", "ok", "absent", "refused", "", "head_missing",
	  "ml-explore/mlx-lm mlx_lm/models/qwen3_5.py@e8ceeccf118d:L504-537" },
	{ "qwen35_mlx_no_head_declared", "mlx-lm-pr1740", "ok", "absent", "degraded", "", NULL,
	  "ml-explore/mlx-lm mlx_lm/models/qwen3_5.py@bc1d11414c12:L510-528" },
	{ "qwen35_mlx_no_head_declared", "mlx-lm-pr1724", "ok", "absent", "refused", "", "head_missing",
	  "ml-explore/mlx-lm mlx_lm/models/qwen3_5.py@a9e671b33ce8:L649-707" },
	/* Expert layouts of raw HF Qwen3.5-MoE trunks. */
	{ "qwen35_moe_hf_numbered", "mlx-lm-0.32", "ok", "dropped", "refused", "", "experts", MOE " (fused gate_up_proj only)" },
	{ "qwen35_moe_hf_numbered", "mlx-lm-pr1724", "ok", "ok", "ok", "", NULL,
	  "ml-explore/mlx-lm mlx_lm/models/qwen3_5_moe.py@a9e671b33ce8:L23-114 (_normalize_experts)" },
	{ "qwen35_moe_hf_numbered", "vllm-mlx", "ok", "absent", "broken", "experts_uninitialized", NULL,
	  "waybarrios/vllm-mlx vllm_mlx/utils/tokenizer.py@4b654c09e610:L63-153 (retried with strict=False)" },
	{ "qwen35_moe_hf_numbered", "vllm", "ok", "ok", "ok", "", NULL,
	  "vllm-project/vllm qwen3_5_mtp.py@01d99805d1ef Qwen3_5MultiTokenPredictor.load_weights (per-expert)" },
	{ "qwen35_moe_hf_numbered", "ollama", "ok", "ok", "ok", "", NULL,
	  "ollama convert/convert_qwen3next.go@fb3076099687:L939-957 (per-expert merged)" },
	{ "qwen35_moe_hf_fused_bmm", "mlx-lm-0.32", "ok", "dropped", "refused", "", "experts",
	  MOE " (split at shape[-2]//2 whatever the orientation; strict shapes)" },
	{ "qwen35_moe_hf_fused_bmm", "vllm-mlx", "ok", "absent", "refused", "", "experts",
	  "waybarrios/vllm-mlx vllm_mlx/utils/tokenizer.py@4b654c09e610:L63-153 (the retry is for extra keys only)" },
	{ "qwen35_moe_hf_fused_linear", "mlx-lm-0.32", "ok", "dropped", "ok", "", NULL, MOE },
	{ "qwen35_moe_hf_fused_linear", "mlx-lm-pr990", "ok", "ok", "ok", "", NULL,
	  "ml-explore/mlx-lm mlx_lm/models/qwen3_5_moe.py@e8ceeccf118d:L50-80 (fused head unfused)" },
	/* Qwen3-Next. */
	{ "qwen3_next_hf", "mlx-lm-0.32", "ok", "dropped", "ok", "", NULL,
	  "ml-explore/mlx-lm mlx_lm/models/qwen3_next.py@d78bf58e217c:L452-482 (+1 unconditionally past the gate)" },
	{ "qwen3_next_hf", "llamacpp", "ok", "dropped", "ok", "", NULL,
	  "ggml-org/llama.cpp conversion/qwen.py@03173d5e78f8 Qwen3NextModel.filter_tensors (ignore MTP layers)" },
	{ "qwen3_next_hf", "vllm-mlx", "ok", "absent", "degraded", "", NULL,
	  "waybarrios/vllm-mlx vllm_mlx/patches/qwen3_next_mtp.py@4b654c09e610:L53-55 (model-mtp.safetensors only)" },
	{ "qwen3_next_mlx_embedded", "mlx-lm-0.32", "ok", "dropped", "refused", "", "extra_keys",
	  "ml-explore/mlx-lm mlx_lm/models/qwen3_next.py@d78bf58e217c:L452-482 (early return keeps mtp.*; strict load)" },
	{ "qwen3_next_mlx_embedded", "mtplx-2.12", "ok", "ok", "refused", "", "extra_keys",
	  "youssofal/MTPLX mtplx/runtime.py@0943c6cb _load_base_model (the trunk through mlx_lm.utils.load)" },
	{ "qwen3_next_mlx_embedded", "vllm-mlx", "ok", "absent", "degraded", "", NULL,
	  "waybarrios/vllm-mlx vllm_mlx/utils/tokenizer.py@4b654c09e610:L84-101 (strict=False retry drops mtp.*)" },
	{ "qwen3_next_mlx_embedded", "ollama-mlx", "double_shifted", "double_shifted", "broken",
	  "trunk_double_shifted head_degraded", NULL, "ollama x/models/qwen3_5/qwen3_5.go@fb3076099687:L831-838" },
	/* model-mtp.safetensors matches mlx-lm's glob: qwen3_next keeps its mtp.* keys (gate closed). */
	{ "qwen3_next_mlx_model_mtp", "mlx-lm-0.32", "ok", "dropped", "refused", "", "extra_keys",
	  "ml-explore/mlx-lm mlx_lm/models/qwen3_next.py@d78bf58e217c:L452-482; utils.py@d78bf58e217c:L336-343" },
	{ "qwen3_next_mlx_model_mtp", "vllm-mlx", "ok", "ok", "degraded", "head_contract_mismatch", NULL,
	  "waybarrios/vllm-mlx vllm_mlx/patches/qwen3_next_mtp.py@4b654c09e610:L163 ([hidden, embedding]); "
	  "vllm-project/vllm qwen3_next_mtp.py@055e47c28003 forward ([embedding, hidden])" },
	/* conv1d stored 2-D: raw by mlx-lm's rank-free test, and its moveaxis(2, 1) fails. */
	{ "qwen35_mlx_conv1d_2d", "mlx-lm-0.32", "double_shifted", "dropped", "refused", "", "conv1d",
	  ML032 " (shape[-1] != 1 at any rank, then moveaxis(2, 1))" },
	{ "qwen35_mlx_conv1d_2d", "mlx-lm-0.31", "double_shifted", "dropped", "refused", "", "conv1d", ML031 },
	{ "qwen35_mlx_conv1d_2d", "mtplx-2.12", "double_shifted", "ok", "refused", "", "conv1d",
	  ML031 " (MTPLX pins mlx-lm>=0.31,<0.32)" },
	{ "qwen35_mlx_conv1d_2d", "mlx-vlm", "double_shifted", "dropped", "refused", "", "conv1d",
	  "Blaizzy/mlx-vlm mlx_vlm/models/qwen3_5/qwen3_5.py@9b13f522a7f1:L145-170" },
	/* model_type qwen3_5_mtp. */
	{ "qwen35_mtp_model_type", "mlx-lm-0.31", "ok", "dropped", "refused", "", "model_type",
	  "ml-explore/mlx-lm mlx_lm/utils.py@ed1fca4cef15:L187-191 (no qwen3_5_mtp module)" },
	{ "qwen35_mtp_model_type", "mlx-lm-0.32", "ok", "dropped", "refused", "", "model_type",
	  "ml-explore/mlx-lm mlx_lm/utils.py@d78bf58e217c:L177-195" },
	{ "qwen35_mtp_model_type", "lmstudio-mlx", "ok", "dropped", "refused", "", "model_type",
	  "lmstudio-ai/mlx-engine mlx_engine/model_kit/model_kit.py@08f0c0758a80:L190-217 (mlx_lm.utils.load)" },
	{ "qwen35_mtp_model_type", "mtplx-2.11", "ok", "inverted", "degraded", "head_inverted", NULL,
	  "youssofal/MTPLX mtplx/qwen3_5_mtp_patch.py@862e57cb (no heal); CHANGELOG.md@029eff70 [2.12.0] PR #511" },
	{ "qwen35_mtp_model_type", "mtplx-2.12", "ok", "ok", "ok", "", NULL,
	  "youssofal/MTPLX mtplx/qwen3_5_mtp_patch.py@09756775 _load_mtp_weights (shift_delta_mtp_norms)" },
	/* Head keys, experts and heals of sidecars. */
	{ "qwen35_mlx_sidecar_model_mtp", "mtplx-2.12", "ok", "dropped", "degraded", "head_uninitialized", NULL,
	  "youssofal/MTPLX mtplx/artifacts.py@6d0a869a is_mtp_key; mtp_patch.py@0943c6cb strict=False ~c33500" },
	{ "qwen35_mlx_sidecar_model_mtp", "mtplx-2.11", "ok", "dropped", "degraded", "head_uninitialized", NULL,
	  "youssofal/MTPLX mtplx/artifacts.py@6d0a869a is_mtp_key" },
	{ "qwen35_moe_mlx_fused_sidecar", "mtplx-2.12", "ok", "ok", "degraded", "head_experts_uninitialized", NULL,
	  "youssofal/MTPLX mtplx/mtp_patch.py@0943c6cb _stack_mtp_moe_experts (numbered only; #574)" },
	{ "qwen35_mlx_qkless_delta_head", "mtplx-2.12", "ok", "inverted", "degraded", "head_inverted", NULL,
	  "youssofal/MTPLX test_missing_family_never_shifts (shift_delta_mtp_norms needs q/k norms)" },
	{ "qwen35_mlx_declared_delta", "mtplx-2.12", "ok", "double_shifted", "degraded", "head_degraded", NULL,
	  "youssofal/MTPLX mtplx/mtp_patch.py@0943c6cb _mtp_norms_are_delta_encoded ~c18500 (+1, no detector)" },
	{ "qwen35_mlx_raw_head_mtp_dir", "vllm-mlx", "ok", "inverted", "degraded", "head_inverted", NULL,
	  VMLX ":L40-48, L74-91, L443-448 (+1 below 0.5 only: delta q/k ~0.78 stay)" },
	{ "qwen35_mlx_raw_head_mtp_dir", "mtplx-2.12", "ok", "ok", "ok", "", NULL,
	  "youssofal/MTPLX mtplx/artifacts.py@6d0a869a expected_mtp_file (mtp/weights.safetensors)" },
	{ "qwen35_moe_mlx_gamma_manifest", "vllm-mlx", "ok", "ok", "ok", "", NULL,
	  VMLX ":L94-112, L436-442 (mlx_gamma manifest: no heal)" },
	/* MTPLX's guard scope: qwen3_5_moe is served double-shifted. */
	{ "qwen35_moe_mlx_embedded", "mtplx-2.12", "double_shifted", "ok", "broken", "trunk_double_shifted", NULL,
	  "youssofal/MTPLX mtplx/runtime.py@0943c6cb ~c46300 (guard: model_type in qwen3_5, qwen3_next, qwen3next)" },
	{ "qwen35_moe_mlx_embedded", "mlx-lm-pr990", "ok", "ok", "refused", "", "head_experts",
	  "ml-explore/mlx-lm mlx_lm/models/qwen3_5_moe.py@e8ceeccf118d:L50-80 (_stack_per_expert KeyError)" },
	{ "qwen35_moe_mlx_embedded", "mlx-lm-pr1740", "ok", "ok", "ok", "", NULL,
	  "ml-explore/mlx-lm mlx_lm/models/qwen3_5_moe.py@bc1d11414c12:L64-80 (switch_mlp passes)" },
	/* Duplicate names in a stray shard. */
	{ "qwen35_mlx_dup_stray", "ollama", "double_shifted", "absent", "refused", "", "duplicates",
	  "ollama convert/convert.go@fb3076099687:L427-460 (duplicate tensor name)" },
	{ "qwen35_mlx_dup_stray", "ollama-mlx", "ok", "absent", "degraded", "", NULL,
	  "ollama x/create/inventory.go@fb3076099687:L58-76 (the stray is not in the index)" },
	/* Plain families: each sanitize's drop rule. */
	{ "deepseek_v3_fp8", "mlx-lm-0.32", "ok", "dropped", "refused", "", "extra_keys",
	  "ml-explore/mlx-lm mlx_lm/models/deepseek_v3.py@d78bf58e217c:L380-478 (drops model.layers.61 only; L = 3)" },
	{ "deepseek_v3_fp8", "vllm", "ok", "ok", "ok", "", NULL,
	  "vllm-project/vllm deepseek_mtp.py@03356f8cb59b _rewrite_spec_layer_name" },
	{ "glm45", "mlx-lm-0.32", "ok", "dropped", "ok", "", NULL,
	  "ml-explore/mlx-lm mlx_lm/models/glm4_moe.py@d78bf58e217c:L317-337 (drops model.layers.{L})" },
	{ "glm47_flash", "mlx-lm-0.32", "ok", "dropped", "ok", "", NULL,
	  "ml-explore/mlx-lm mlx_lm/models/glm4_moe_lite.py@d78bf58e217c:L381-449 (layers >= L)" },
	{ "deepseek_v32", "mlx-lm-0.32", "ok", "dropped", "ok", "", NULL,
	  "ml-explore/mlx-lm mlx_lm/models/deepseek_v32.py@d78bf58e217c:L495-583 (layers >= L)" },
	{ "mimo", "mlx-lm-0.32", "ok", "dropped", "ok", "", NULL,
	  "ml-explore/mlx-lm mlx_lm/models/mimo.py@d78bf58e217c:L181-190 (model.mtp_layers.)" },
	{ "mimo_v2", "mlx-lm-0.32", "ok", "dropped", "ok", "", NULL,
	  "ml-explore/mlx-lm mlx_lm/models/mimo_v2_flash.py@d78bf58e217c:L321-364 (model.mtp)" },
	/* Versioned ids and aliases resolve to rows. */
	{ "qwen35_mlx_embedded", "mlx-lm-0.33", "ok", "dropped", "ok", "", NULL, "range: mlx-lm-0.32 is [0.32.0, open)" },
	{ "qwen35_mlx_embedded", "mlx-lm-0.31.3", "double_shifted", "dropped", "broken", "trunk_double_shifted", NULL,
	  "range: mlx-lm-0.31 is [0.31.0, 0.32.0)" },
	{ "qwen35_mlx_raw_head", "mtplx-2.11.3", "ok", "ok", "ok", "", NULL, "range: mtplx-2.11 is [2.11.0, 2.12.0)" },
	{ "qwen35_hf", "hf", "ok", "ok", "ok", "", NULL, "alias: hf is vllm, sglang, transformers" },
};

/* Expected order-dependent duplicates: runtime id, fixture, yes or no. */
static const struct {
	const char *fixture, *runtime;
	int order_dependent;
	const char *source;
} dup_cases[] = {
	{ "qwen35_mlx_dup_stray", "mlx-lm-0.32", 1,
	  "ml-explore/mlx-lm mlx_lm/utils.py@d78bf58e217c:L336-343 (weights.update per globbed file, unsorted)" },
	{ "qwen35_mlx_dup_stray", "mtplx-2.12", 1, "the trunk through mlx-lm 0.31 (utils.py@ed1fca4cef15:L321-323)" },
	{ "qwen35_mlx_dup_stray", "vllm", 0,
	  "vllm-project/vllm weight_utils.py@0a1ee72ed53f filter_duplicate_safetensors_files (index files only)" },
	{ "qwen35_mlx_dup_stray", "llamacpp", 0, "ggml-org/llama.cpp conversion/base.py@00bd27a621f9 (the index's files)" },
	{ "qwen35_mlx_sidecar", "mlx-lm-0.32", 0, "no name held twice" },
};

/* ---- fixtures ---- */

static struct fg_inspect *inspect_for(const char *fixture, const char *runtime)
{
	const char *ids[1] = { runtime };
	struct fg_err err = { 0 };
	struct fg_inspect *r = NULL;
	char root[PATH_MAX], path[PATH_MAX];

	/* No fixtures at all: skipped; a fixture missing from them: the run fails, naming it. */
	if (access(fixtures_root(root, sizeof(root)), F_OK) != 0)
		skip();
	path_join(path, sizeof(path), root, fixture);
	if (fg_inspect_run(&r, path, ids, runtime ? 1 : 0, &err) != 0)
		fail_msg("inspecting %s for %s: %s", path, runtime ? runtime : "(defaults)", err.msg);
	return r;
}

static const struct fg_runtime_result *result_of(const struct fg_inspect *r, const char *id)
{
	const struct fg_runtime *rt = fg_runtime_find(id);

	for (size_t i = 0; rt && i < r->n_runtimes; i++)
		if (r->runtimes[i].rt == rt)
			return &r->runtimes[i];
	return NULL;
}

static void breakage_text(unsigned bits, char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (unsigned b = 0; b < FG_BREAK_COUNT && used < len; b++)
		if (bits & (1u << b))
			used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? " " : "",
						 fg_runtime_breakage_name(1u << b));
}

/* 0 when res matches the scenario, else 1 with the difference printed. */
static int check_result(const struct scenario *sc, const struct fg_runtime_result *res)
{
	const char *load = fg_runtime_load_cause_name(res->load_cause);
	char got[160];

	breakage_text(res->breakage, got, sizeof(got));
	if (!res->modelled) {
		print_error("%s / %s: not modelled (%s); want trunk %s head %s outcome %s\n  source: %s\n",
			    sc->fixture, sc->runtime, res->unmodelled, sc->trunk, sc->head, sc->outcome, sc->source);
		return 1;
	}
	if (strcmp(fg_runtime_trunk_name(res->trunk), sc->trunk) != 0 ||
	    strcmp(fg_runtime_head_name(res->head), sc->head) != 0 ||
	    strcmp(fg_runtime_outcome_name(res->outcome), sc->outcome) != 0 || strcmp(got, sc->breakage) != 0 ||
	    (load ? !sc->load || strcmp(load, sc->load) != 0 : sc->load != NULL)) {
		print_error("%s / %s: trunk %s head %s outcome %s breakage [%s] load %s (%s)\n"
			    "  want trunk %s head %s outcome %s breakage [%s] load %s\n  source: %s\n",
			    sc->fixture, sc->runtime, fg_runtime_trunk_name(res->trunk), fg_runtime_head_name(res->head),
			    fg_runtime_outcome_name(res->outcome), got, load ? load : "-", res->load_error, sc->trunk,
			    sc->head, sc->outcome, sc->breakage, sc->load ? sc->load : "-", sc->source);
		return 1;
	}
	if (!res->targeted) {
		print_error("%s / %s: the row is not targeted\n", sc->fixture, sc->runtime);
		return 1;
	}
	return 0;
}

static void test_scenarios(void **state)
{
	int bad = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct scenario *sc = &cases[i];
		struct fg_inspect *r = inspect_for(sc->fixture, sc->runtime);
		const struct fg_runtime_result *res = result_of(r, sc->runtime);

		if (!res) {
			print_error("%s / %s: no such runtime\n", sc->fixture, sc->runtime);
			bad++;
		} else {
			bad += check_result(sc, res);
		}
		fg_inspect_free(r);
	}
	if (bad)
		fail_msg("%d of %zu scenarios differ from their sources (above)", bad, sizeof(cases) / sizeof(cases[0]));
}

static void test_duplicates(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(dup_cases) / sizeof(dup_cases[0]); i++) {
		struct fg_inspect *r = inspect_for(dup_cases[i].fixture, dup_cases[i].runtime);
		const struct fg_runtime_result *res = result_of(r, dup_cases[i].runtime);

		assert_non_null(res);
		if ((res->order_dependent > 0) != dup_cases[i].order_dependent)
			fail_msg("%s / %s: order_dependent %zu, want %s (%s)", dup_cases[i].fixture, dup_cases[i].runtime,
				 res->order_dependent, dup_cases[i].order_dependent ? "> 0" : "0", dup_cases[i].source);
		if (res->order_dependent)
			assert_non_null(fg_verdicts_find(&r->verdicts, FG_V_DUPLICATE_TENSOR_ORDER_DEPENDENT));
		fg_inspect_free(r);
	}
}

/* Ranged ids and aliases: the results say which id targeted them. */
static void test_resolved_targets(void **state)
{
	struct fg_inspect *r = inspect_for("qwen35_mlx_embedded", "mlx-lm-0.33");
	const struct fg_runtime_result *res = result_of(r, "mlx-lm-0.32");
	size_t targeted = 0;

	(void)state;
	assert_non_null(res);
	assert_true(res->targeted);
	assert_string_equal(res->version_of, "mlx-lm-0.33");
	for (size_t i = 0; i < r->n_runtimes; i++)
		targeted += (size_t)r->runtimes[i].targeted;
	assert_int_equal(targeted, 1);
	fg_inspect_free(r);
	r = inspect_for("qwen35_hf", "hf");
	targeted = 0;
	for (size_t i = 0; i < r->n_runtimes; i++) {
		if (!r->runtimes[i].targeted)
			continue;
		targeted++;
		assert_string_equal(r->runtimes[i].version_of, "");
		assert_true(strcmp(r->runtimes[i].rt->id, "vllm") == 0 || strcmp(r->runtimes[i].rt->id, "sglang") == 0 ||
			    strcmp(r->runtimes[i].rt->id, "transformers") == 0);
	}
	assert_int_equal(targeted, 3);
	fg_inspect_free(r);
}

/*
 * The same fixture with the input changed: vllm-mlx's manifest removed, the
 * heuristic heals an absolute MoE head whose pre-fc gains sit below 0.5.
 */
static void test_variants(void **state)
{
	struct fg_inspect *r = inspect_for("qwen35_moe_mlx_gamma_manifest", "vllm-mlx");
	struct fg_head_input sidecars[FG_INSPECT_MAX_SETS];
	struct fg_runtime_input in;
	struct fg_runtime_result res;
	const struct scenario no_manifest = {
		"qwen35_moe_mlx_gamma_manifest (manifest removed)", "vllm-mlx", "ok", "double_shifted", "degraded",
		"head_degraded", NULL, VMLX ":L40-48, L443-448 (+1 on each norm with mean < 0.5: pre-fc 0.27, 0.49)",
	};

	(void)state;
	fg_inspect_runtime_input(r, &in, sidecars);
	assert_true(in.n_sidecars > 0);
	for (size_t i = 0; i < in.n_sidecars; i++)
		sidecars[i].manifest = NULL;
	fg_runtime_simulate(fg_runtime_find("vllm-mlx"), &in, &res);
	res.targeted = 1;
	if (check_result(&no_manifest, &res))
		fail_msg("the manifest-less variant differs from its source");
	fg_inspect_free(r);
}

/* Issue 12: a declared head without tensors is a note; only the refusing runtimes make it an error. */
static void test_declared_missing_per_runtime(void **state)
{
	struct fg_inspect *r = inspect_for("qwen35_mlx_no_head_declared", NULL);
	const struct fg_verdict *v = fg_verdicts_find(&r->verdicts, FG_V_MTP_DECLARED_MISSING);
	int mtplx = 0;

	(void)state;
	assert_non_null(v);
	assert_int_equal(v->row->severity, FG_SEV_INFO);
	assert_true(r->ok);
	for (size_t i = 0; i < v->n_runtimes; i++)
		mtplx |= strcmp(v->runtimes[i], "mtplx-2.12") == 0;
	assert_true(mtplx);
	fg_inspect_free(r);
	r = inspect_for("qwen35_mlx_no_head_declared", "mlx-lm-pr990");
	v = fg_verdicts_find(&r->verdicts, FG_V_RUNTIME_LOAD_ERROR);
	assert_non_null(v);
	assert_non_null(strstr(v->detail, "Set mtp_num_hidden_layers=0 to disable MTP."));
	assert_string_equal(v->runtimes[0], "mlx-lm-pr990");
	assert_false(r->ok);
	fg_inspect_free(r);
}

/* ---- the table ---- */

static void test_table(void **state)
{
	static const char *const ids[] = {
		"mlx-lm-0.31", "mlx-lm-0.32", "mlx-lm-pr990", "mlx-lm-pr1740", "mlx-lm-pr1724", "mlx-lm-pr1469",
		"lmstudio-mlx", "mlx-vlm", "mtplx-2.11", "mtplx-2.12", "vllm-mlx", "ollama", "ollama-mlx", "llamacpp",
		"transformers", "vllm", "sglang",
	};
	const struct fg_runtime *all;
	size_t n = 0;

	(void)state;
	all = fg_runtime_all(&n);
	assert_int_equal(n, sizeof(ids) / sizeof(ids[0]));
	assert_true(n <= FG_INSPECT_MAX_RUNTIMES && n <= FG_VERDICT_MAX_RUNTIMES);
	for (size_t i = 0; i < n; i++) {
		const struct fg_runtime *rt = &all[i];

		assert_string_equal(rt->id, ids[i]);
		assert_ptr_equal(fg_runtime_find(ids[i]), rt);
		if (!rt->contract || !rt->source || !rt->families || !rt->no_files_error || !rt->formats)
			fail_msg("%s: contract, source, families, no_files_error and formats are required", rt->id);
		for (const struct fg_rt_family *f = rt->families; f->family; f++)
			if (!f->source)
				fail_msg("%s: family %s has no source", rt->id, f->family);
		for (const struct fg_rt_head *h = rt->heads; h && h->mode != FG_HEAD_NONE; h++) {
			if (!h->source)
				fail_msg("%s: a head loader has no source", rt->id);
			if (h->mode == FG_HEAD_SEPARATE && (!h->sources || h->sources[0].kind == FG_HSRC_END))
				fail_msg("%s: a separate head loader without sources", rt->id);
			if (h->missing == FG_MISSING_REFUSE && !h->missing_reason)
				fail_msg("%s: a refusing loader must say what it prints", rt->id);
		}
		/* Opt-in rows (open pull requests) are never defaults; forge data is present for phase 2. */
		if ((rt->flags & FG_RT_OPT_IN) && rt->default_for)
			fail_msg("%s: opt-in rows are no default target", rt->id);
		if (rt->forge.convention != FG_CONV_ABSOLUTE && rt->forge.convention != FG_CONV_DELTA)
			fail_msg("%s: forge.convention must be absolute or delta", rt->id);
		if (rt->heads && !rt->forge.key_prefix)
			fail_msg("%s: a row that loads a head names the key spelling a forge writes", rt->id);
		if (rt->strict == FG_LOAD_STRICT && !rt->strict_error)
			fail_msg("%s: a strict row says what it prints", rt->id);
	}
	/* The MLX-style forge targets and the defaults of each layout (docs/runtimes.md). */
	for (size_t i = 0; i < n; i++) {
		int hf_style = strcmp(all[i].id, "ollama") == 0 || strcmp(all[i].id, "llamacpp") == 0 ||
			       strcmp(all[i].id, "transformers") == 0 || strcmp(all[i].id, "vllm") == 0 ||
			       strcmp(all[i].id, "sglang") == 0;

		assert_int_equal(all[i].mlx, !hf_style);
	}
	assert_int_equal(fg_runtime_find("mlx-lm-0.31")->default_for, FG_LAYOUT_MLX);
	assert_int_equal(fg_runtime_find("mlx-lm-0.32")->default_for, FG_LAYOUT_MLX | FG_LAYOUT_HF);
	assert_int_equal(fg_runtime_find("mtplx-2.11")->default_for, 0);
	assert_int_equal(fg_runtime_find("mtplx-2.12")->default_for, FG_LAYOUT_MLX);
	assert_int_equal(fg_runtime_find("ollama")->default_for, FG_LAYOUT_HF);
	assert_int_equal(fg_runtime_find("vllm")->default_for, FG_LAYOUT_HF);
	assert_int_equal(fg_runtime_layout_bit("mlx"), FG_LAYOUT_MLX);
	assert_int_equal(fg_runtime_layout_bit("hf"), FG_LAYOUT_HF);
	assert_int_equal(fg_runtime_layout_bit("unknown"), 0);
}

static void test_resolve(void **state)
{
	static const struct {
		const char *id, *row;  /* NULL row: unknown */
		int by_range;
	} ids[] = {
		{ "mlx-lm-0.31", "mlx-lm-0.31", 0 },
		{ "mlx-lm-0.31.0", "mlx-lm-0.31", 1 },
		{ "mlx-lm-0.31.3", "mlx-lm-0.31", 1 },
		{ "mlx-lm-0.32.2", "mlx-lm-0.32", 1 },
		{ "mlx-lm-0.33", "mlx-lm-0.32", 1 },  /* newest row it satisfies */
		{ "mlx-lm-1.0", "mlx-lm-0.32", 1 },
		{ "mlx-lm-0.30", NULL, 0 },           /* older than every row */
		{ "mtplx-2.11.1", "mtplx-2.11", 1 },
		{ "mtplx-2.12.0", "mtplx-2.12", 1 },
		{ "mtplx-2.12.1", NULL, 0 },          /* fused-expert fix: no row (docs/runtimes.md) */
		{ "mtplx-2.9.2", NULL, 0 },
		{ "hf", "vllm", 0 },                  /* alias; vllm where one row is needed */
		{ "ollama", "ollama", 0 },
		{ "mlx-lm-pr990", "mlx-lm-pr990", 0 },
		{ "mlx-lm-", NULL, 0 }, { "mlx-lm-x", NULL, 0 }, { "mlx-lm-0.31.", NULL, 0 },
		{ "mlx-lm-0.1.2.3.4", NULL, 0 }, { "mlx-lm", NULL, 0 }, { "vllm-9", NULL, 0 }, { "", NULL, 0 },
	};
	const struct fg_runtime *rows[FG_RUNTIME_MAX_ALIAS];
	size_t n_alias;
	const struct fg_runtime_alias *al = fg_runtime_aliases(&n_alias);
	int by_range;

	(void)state;
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		const struct fg_runtime *rt = fg_runtime_find(ids[i].id);
		size_t n = fg_runtime_resolve(ids[i].id, rows, &by_range);

		if (!ids[i].row) {
			if (rt || n)
				fail_msg("'%s' resolves to %s, want nothing", ids[i].id, rt ? rt->id : "a set");
			continue;
		}
		if (!rt || strcmp(rt->id, ids[i].row) != 0)
			fail_msg("'%s' resolves to %s, want %s", ids[i].id, rt ? rt->id : "nothing", ids[i].row);
		assert_true(n >= 1);
		assert_int_equal(by_range, ids[i].by_range);
	}
	assert_null(fg_runtime_find(NULL));
	assert_int_equal(fg_runtime_resolve("hf", rows, NULL), 3);
	assert_string_equal(rows[0]->id, "vllm");
	assert_string_equal(rows[1]->id, "sglang");
	assert_string_equal(rows[2]->id, "transformers");
	assert_int_equal(n_alias, 1);
	assert_string_equal(al[0].alias, "hf");
	/* An alias never shadows a row; where one row is needed it is the alias's first. */
	for (size_t i = 0; i < n_alias; i++) {
		size_t n_rows;
		const struct fg_runtime *all = fg_runtime_all(&n_rows);

		for (size_t k = 0; k < n_rows; k++)
			assert_string_not_equal(all[k].id, al[i].alias);
		assert_ptr_equal(fg_runtime_find(al[i].alias), fg_runtime_find(al[i].ids[0]));
		assert_non_null(al[i].doc);
	}
	/* Opt-in rows never answer a version range: no "mlx-lm-pr990-1". */
	assert_null(fg_runtime_find("mlx-lm-pr990-1"));
}

static void test_names(void **state)
{
	(void)state;
	assert_string_equal(fg_runtime_trunk_name(FG_TRUNK_OK), "ok");
	assert_string_equal(fg_runtime_trunk_name(FG_TRUNK_DOUBLE_SHIFTED), "double_shifted");
	assert_string_equal(fg_runtime_trunk_name(FG_TRUNK_MISSING_SHIFT), "missing_shift");
	assert_string_equal(fg_runtime_trunk_name((enum fg_runtime_trunk)(FG_TRUNK_MISSING_SHIFT + 1)), "unknown");
	assert_string_equal(fg_runtime_head_name(FG_HEAD_OK), "ok");
	assert_string_equal(fg_runtime_head_name(FG_HEAD_INVERTED), "inverted");
	assert_string_equal(fg_runtime_head_name(FG_HEAD_DOUBLE_SHIFTED), "double_shifted");
	assert_string_equal(fg_runtime_head_name(FG_HEAD_DROPPED), "dropped");
	assert_string_equal(fg_runtime_head_name(FG_HEAD_ABSENT), "absent");
	assert_string_equal(fg_runtime_head_name((enum fg_runtime_head)(FG_HEAD_ABSENT + 1)), "unknown");
	assert_string_equal(fg_runtime_outcome_name(FG_OUTCOME_OK), "ok");
	assert_string_equal(fg_runtime_outcome_name(FG_OUTCOME_DEGRADED), "degraded");
	assert_string_equal(fg_runtime_outcome_name(FG_OUTCOME_BROKEN), "broken");
	assert_string_equal(fg_runtime_outcome_name(FG_OUTCOME_REFUSED), "refused");
	assert_string_equal(fg_runtime_outcome_name((enum fg_runtime_outcome)-1), "unknown");
	assert_null(fg_runtime_shift_reason_name(FG_SHIFT_NONE));
	assert_string_equal(fg_runtime_shift_reason_name(FG_SHIFT_MTP_KEYS), "mtp_keys");
	assert_string_equal(fg_runtime_shift_reason_name(FG_SHIFT_RAW_CONV1D), "raw_conv1d");
	assert_string_equal(fg_runtime_shift_reason_name(FG_SHIFT_UNCONDITIONAL), "unconditional");
	assert_string_equal(fg_runtime_shift_reason_name(FG_SHIFT_KEY_PREFIX), "key_prefix");
	assert_null(fg_runtime_shift_reason_name((enum fg_shift_reason)(FG_SHIFT_KEY_PREFIX + 1)));
	assert_string_equal(fg_runtime_breakage_name(FG_BREAK_TRUNK_DOUBLE_SHIFTED), "trunk_double_shifted");
	assert_string_equal(fg_runtime_breakage_name(FG_BREAK_HEAD_UNINITIALIZED), "head_uninitialized");
	assert_string_equal(fg_runtime_breakage_name(FG_BREAK_TRUNK_EXPERTS), "experts_uninitialized");
	assert_null(fg_runtime_breakage_name(3));
	assert_null(fg_runtime_breakage_name(1u << FG_BREAK_COUNT));
	assert_string_equal(fg_runtime_decode_name(FG_DECODE_AR), "ar");
	assert_string_equal(fg_runtime_decode_name(FG_DECODE_MTP), "mtp");
	assert_null(fg_runtime_decode_name(FG_DECODE_NONE));
	assert_null(fg_runtime_load_cause_name(FG_LOAD_OK));
	assert_string_equal(fg_runtime_load_cause_name(FG_LOAD_GUARD), "guard");
	assert_string_equal(fg_runtime_load_cause_name(FG_LOAD_FORMAT), "format");
	assert_null(fg_runtime_load_cause_name((enum fg_load_cause)(FG_LOAD_FORMAT + 1)));
	/* Key spellings and norm groups the filters and heals read. */
	assert_int_equal(fg_runtime_key_class("mtp.fc.weight", 4), FG_KEY_MTP);
	assert_int_equal(fg_runtime_key_class("language_model.mtp.fc.weight", 4), FG_KEY_LM_MTP);
	assert_int_equal(fg_runtime_key_class("model.mtp.fc.weight", 4), FG_KEY_MODEL_MTP);
	assert_int_equal(fg_runtime_key_class("model.language_model.mtp.norm.weight", 4), FG_KEY_MODEL_LM_MTP);
	assert_int_equal(fg_runtime_key_class("language_model.model.mtp.norm.weight", 4), FG_KEY_LM_MODEL_MTP);
	assert_int_equal(fg_runtime_key_class("model.layers.4.eh_proj.weight", 4), FG_KEY_APPENDED);
	assert_int_equal(fg_runtime_key_class("model.mtp_layers.0.input_proj.weight", 4), FG_KEY_MTP_LAYERS);
	assert_int_equal(fg_runtime_key_class("layers.0.mlp.gate.weight", 4), FG_KEY_OTHER);
	assert_int_equal(fg_runtime_norm_group("mtp.layers.0.self_attn.q_norm.weight"), FG_NG_QK);
	assert_int_equal(fg_runtime_norm_group("mtp.layers.0.input_layernorm.weight"), FG_NG_LAYER);
	assert_int_equal(fg_runtime_norm_group("mtp.pre_fc_norm_embedding.weight"), FG_NG_PRE_FC);
	assert_int_equal(fg_runtime_norm_group("mtp.norm.weight"), FG_NG_FINAL);
	assert_int_equal(fg_runtime_norm_group("mtp.fc.weight"), 0);
}

/* ---- file rules on hand-built checkpoints ---- */

#define MAX_FILES 8

struct world {
	struct fg_ckpt ckpt;
	struct fg_ckpt_file files[MAX_FILES];
	struct fg_file_facts facts[MAX_FILES];
	cJSON *index;
	struct fg_tensor probe_t;
	struct fg_norm probe;
	struct fg_decision trunk;
	struct fg_runtime_input in;
};

static cJSON *live_index; /* freed by the teardown if a test fails */

static int release_index(void **state)
{
	(void)state;
	cJSON_Delete(live_index);
	live_index = NULL;
	return 0;
}

static void world_init(struct world *w, int with_index)
{
	memset(w, 0, sizeof(*w));
	w->ckpt.source = (char *)"models/case";
	w->ckpt.dir = (char *)"models/case";
	w->ckpt.files = w->files;
	w->ckpt.sidecar = -1;
	if (with_index) {
		w->index = live_index = cJSON_Parse("{\"weight_map\": {}}");
		assert_non_null(w->index);
		w->ckpt.index = w->index;
	}
	w->probe_t.name = "language_model.model.layers.3.self_attn.q_norm.weight";
	w->probe_t.dtype = FG_DT_F32;
	w->probe_t.rank = 1;
	w->probe.t = &w->probe_t;
	w->probe.cls = FG_NAME_QK;
	w->probe.st.has_finite = 1;
	w->probe.st.mean = 1.7906;
	w->trunk.conv = FG_CONV_ABSOLUTE;
	w->trunk.has_qk = 1;
	w->trunk.qk_max = w->trunk.qk_min = 1.7906;
	w->trunk.probe = &w->probe;
	w->in.ckpt = &w->ckpt;
	w->in.facts = w->facts;
	w->in.style = FG_STYLE_ZERO_CENTRED;
	w->in.trunk = &w->trunk;
	w->in.n_layers = 4;
	w->in.pointer_file = -1;
	w->in.declared_mtp = -1;
	w->in.trunk_keys_prefixed = 1;
}

static void world_family(struct world *w, const char *model_type)
{
	char cfg[128];
	cJSON *doc;

	snprintf(cfg, sizeof(cfg), "{\"model_type\": \"%s\"}", model_type);
	doc = cJSON_Parse(cfg);
	assert_non_null(doc);
	w->in.family = fg_family_detect(doc, &w->in.moe);
	cJSON_Delete(doc);
}

static void world_release(struct world *w)
{
	cJSON_Delete(w->index);
	w->index = live_index = NULL;
}

static size_t add_file(struct world *w, const char *name, int globbed, int in_index, int sidecar, size_t mtp_keys)
{
	size_t i = w->ckpt.n_files++;
	struct fg_ckpt_file *f = &w->files[i];

	assert_true(i < MAX_FILES);
	f->name = (char *)name;
	f->path = (char *)name;
	f->globbed = globbed;
	f->in_index = in_index;
	f->stray = globbed && w->ckpt.index && !in_index;
	f->sidecar = sidecar;
	w->facts[i].mtp_keys = mtp_keys;
	if (sidecar && w->ckpt.sidecar < 0)
		w->ckpt.sidecar = (int)i;
	return i;
}

static struct fg_runtime_result sim(const struct world *w, const char *id)
{
	const struct fg_runtime *rt = fg_runtime_find(id);
	struct fg_runtime_result r;

	assert_non_null(rt);
	memset(&r, 0x5a, sizeof(r));
	fg_runtime_simulate(rt, &w->in, &r);
	assert_ptr_equal(r.rt, rt);
	return r;
}

static int reads(const struct fg_runtime_result *r, const char *name)
{
	for (size_t i = 0; i < r->n_files && i < FG_RUNTIME_MAX_FILES; i++)
		if (strcmp(r->files[i], name) == 0)
			return 1;
	return 0;
}

/* Which files each rule reads (docs/runtimes.md "File rules"). */
static void test_file_rules(void **state)
{
	struct world w;
	struct fg_runtime_result r;

	(void)state;
	/* An index, two shards, a stray model-extra.safetensors and an unindexed mtp.safetensors. */
	world_init(&w, 1);
	world_family(&w, "qwen3_5");
	add_file(&w, "model-00001-of-00002.safetensors", 1, 1, 0, 0);
	add_file(&w, "model-00002-of-00002.safetensors", 1, 1, 0, 0);
	add_file(&w, "model-extra.safetensors", 1, 0, 0, 5);
	add_file(&w, "mtp.safetensors", 0, 0, 1, 15);
	r = sim(&w, "mlx-lm-0.32"); /* utils.py@d78bf58e217c:L336-343: glob, index ignored */
	assert_int_equal(r.n_files, 3);
	assert_true(reads(&r, "model-extra.safetensors"));
	assert_false(reads(&r, "mtp.safetensors"));
	r = sim(&w, "vllm"); /* weight_utils.py@0a1ee72ed53f filter_duplicate_safetensors_files */
	assert_int_equal(r.n_files, 2);
	assert_false(reads(&r, "model-extra.safetensors"));
	r = sim(&w, "ollama-mlx"); /* inventory.go@fb3076099687:L132-141 */
	assert_int_equal(r.n_files, 2);
	r = sim(&w, "ollama"); /* parser.go@fb3076099687:L336-346: model*.safetensors */
	assert_int_equal(r.n_files, 3);
	assert_true(reads(&r, "model-extra.safetensors"));
	assert_false(reads(&r, "mtp.safetensors"));
	r = sim(&w, "transformers");
	assert_int_equal(r.n_files, 2);
	world_release(&w);

	/* No index: vLLM and mlx-vlm read every root *.safetensors, mtp/weights.safetensors is in a folder. */
	world_init(&w, 0);
	world_family(&w, "qwen3_5");
	add_file(&w, "model.safetensors", 1, 0, 0, 0);
	add_file(&w, "mtp.safetensors", 0, 0, 1, 15);
	add_file(&w, "mtp/weights.safetensors", 0, 0, 1, 15);
	add_file(&w, "consolidated.safetensors", 0, 0, 0, 0);
	r = sim(&w, "vllm");
	assert_int_equal(r.n_files, 3);
	assert_true(reads(&r, "mtp.safetensors"));
	assert_false(reads(&r, "mtp/weights.safetensors"));
	r = sim(&w, "mlx-vlm"); /* utils.py@9b13f522a7f1:L761-805: minus consolidated.safetensors */
	assert_int_equal(r.n_files, 2);
	assert_false(reads(&r, "consolidated.safetensors"));
	r = sim(&w, "transformers");
	assert_int_equal(r.n_files, 1);
	r = sim(&w, "ollama"); /* model*.safetensors matched first */
	assert_int_equal(r.n_files, 1);
	world_release(&w);

	/* Ollama's import falls back to consolidated*.safetensors, and reads nothing else. */
	world_init(&w, 0);
	world_family(&w, "qwen3_5");
	add_file(&w, "consolidated.safetensors", 0, 0, 0, 0);
	add_file(&w, "mtp.safetensors", 0, 0, 1, 15);
	r = sim(&w, "ollama");
	assert_int_equal(r.n_files, 1);
	assert_string_equal(r.files[0], "consolidated.safetensors");
	r = sim(&w, "mlx-lm-0.31"); /* utils.py@ed1fca4cef15:L318-319 */
	assert_int_equal(r.n_files, 0);
	assert_int_equal(r.load_cause, FG_LOAD_NO_FILES);
	assert_int_equal(r.outcome, FG_OUTCOME_REFUSED);
	world_release(&w);

	/* ollama --experimental without an index: model.safetensors next to shards is ambiguous. */
	world_init(&w, 0);
	world_family(&w, "qwen3_5");
	add_file(&w, "model.safetensors", 1, 0, 0, 0);
	add_file(&w, "model-00001-of-00001.safetensors", 1, 0, 0, 0);
	r = sim(&w, "ollama-mlx"); /* inventory.go@fb3076099687:L142-155 */
	assert_int_equal(r.load_cause, FG_LOAD_AMBIGUOUS_FILES);
	r = sim(&w, "mlx-lm-0.32");
	assert_int_equal(r.load_cause, FG_LOAD_OK);
	world_release(&w);
}

/* One trunk format of the world's input: the bits fg_runtime_format_bits gives f. */
static void trunk_format(struct world *w, struct fg_format_need *need, const struct fg_qformat *f, int g_idx,
			 int scale_inv)
{
	memset(need, 0, sizeof(*need));
	need->any_of = fg_runtime_format_bits(f, g_idx, scale_inv, &need->fp8_block);
	snprintf(need->name, sizeof(need->name), "%s bits=%d", fg_qformat_kind_name(f->kind), f->bits);
	need->example = "model.layers.0.mlp.down_proj";
	need->modules = 1;
	w->in.trunk_formats = need;
	w->in.n_trunk_formats = 1;
}

/*
 * Which trunk weight formats each loader reads (issue 12 item 4), from the sources: mlx-lm reads no GPTQ
 * (utils.py@ed1fca4cef15:L72-172: a .g_idx is a ValueError; without one, GPTQ's qweight [in/8, out] is
 * taken for AutoAWQ's [in, out/8] and mlx's strict load_weights refuses the shapes,
 * python/mlx/nn/layers/base.py@846d176227a0:L179-203), compressed-tensors only as deepseek_v3's sanitize
 * remaps it (deepseek_v3.py@d78bf58e217c:L397-410: weight_packed as U32, biases -8 * scale under the
 * global group 32), FP8 blocks only in the deepseek_v3 / v32 / mimo_v2 sanitizers; llama.cpp's GPTQ
 * dequantizer reads the g_idx (conversion/base.py@00bd27a621f9:dequant_model).
 */
static void test_trunk_formats(void **state)
{
	const struct fg_qformat gptq4 = { .kind = FG_QF_GPTQ, .bits = 4, .group = 128, .sym = true, .version = 1 };
	const struct fg_qformat gptq3 = { .kind = FG_QF_GPTQ, .bits = 3, .group = 128, .version = 1 };
	const struct fg_qformat awq = { .kind = FG_QF_AWQ, .bits = 4, .group = 128 };
	const struct fg_qformat ct4 = { .kind = FG_QF_CT_INT, .bits = 4, .group = 32, .sym = true,
					.scale = FG_QS_GROUP };
	struct fg_qformat ct4_g128 = ct4, ct4_asym = ct4, ct8 = ct4;
	const struct fg_qformat fp8 = { .kind = FG_QF_FP8, .bits = 8, .scale = FG_QS_BLOCK, .block = { 128, 128 } };
	struct fg_format_need need;
	struct world w;
	struct fg_runtime_result r;
	static const char *const mlx_rows[] = { "mlx-lm-0.31", "mlx-lm-0.32", "mtplx-2.12", "lmstudio-mlx" };

	(void)state;
	ct4_g128.group = 128;
	ct4_asym.sym = false;
	ct8.bits = 8;
	world_init(&w, 0);
	world_family(&w, "qwen3_5");
	add_file(&w, "model.safetensors", 1, 0, 0, 0);
	r = sim(&w, "mlx-lm-0.32");
	assert_int_equal(r.load_cause, FG_LOAD_OK); /* the world loads as it is */

	for (size_t i = 0; i < sizeof(mlx_rows) / sizeof(mlx_rows[0]); i++) {
		trunk_format(&w, &need, &gptq4, 1, 0);
		r = sim(&w, mlx_rows[i]);
		if (r.load_cause != FG_LOAD_FORMAT || r.unread_format != &need)
			fail_msg("%s: a GPTQ trunk with g_idx loads (cause %d)", mlx_rows[i], (int)r.load_cause);
		trunk_format(&w, &need, &gptq4, 0, 0);
		r = sim(&w, mlx_rows[i]);
		if (r.load_cause != FG_LOAD_FORMAT)
			fail_msg("%s: a 4-bit GPTQ trunk without g_idx loads (its AWQ path misreads the qweight)",
				 mlx_rows[i]);
		trunk_format(&w, &need, &awq, 0, 0);
		r = sim(&w, mlx_rows[i]);
		if (r.load_cause != FG_LOAD_OK)
			fail_msg("%s: an AWQ trunk is refused (cause %d)", mlx_rows[i], (int)r.load_cause);
	}
	/* llama.cpp: GPTQ 2/4/8 bits with their g_idx; 3 bits raise; without a g_idx, a KeyError. */
	trunk_format(&w, &need, &gptq4, 1, 0);
	assert_int_equal(sim(&w, "llamacpp").load_cause, FG_LOAD_OK);
	trunk_format(&w, &need, &gptq4, 0, 0);
	assert_int_equal(sim(&w, "llamacpp").load_cause, FG_LOAD_FORMAT);
	trunk_format(&w, &need, &gptq3, 1, 0);
	assert_int_equal(sim(&w, "llamacpp").load_cause, FG_LOAD_FORMAT);
	/* compressed-tensors int4 g32 symmetric: refused for qwen3_5 by mlx-lm, read by llama.cpp. */
	trunk_format(&w, &need, &ct4, 0, 0);
	assert_int_equal(sim(&w, "mlx-lm-0.32").load_cause, FG_LOAD_FORMAT);
	assert_int_equal(sim(&w, "llamacpp").load_cause, FG_LOAD_OK);
	/* Block FP8 in qwen3_5: no mlx-lm sanitize dequantizes it. */
	trunk_format(&w, &need, &fp8, 0, 1);
	assert_int_equal(sim(&w, "mlx-lm-0.32").load_cause, FG_LOAD_FORMAT);
	world_release(&w);

	/* deepseek_v3: its sanitize remaps int4 g32 symmetric and dequantizes FP8 blocks; nothing else. */
	world_init(&w, 0);
	world_family(&w, "deepseek_v3");
	w.in.style = FG_STYLE_PLAIN;
	w.trunk.conv = FG_CONV_PLAIN;
	w.probe.st.mean = 0.9;
	add_file(&w, "model.safetensors", 1, 0, 0, 0);
	trunk_format(&w, &need, &ct4, 0, 0);
	assert_int_equal(sim(&w, "mlx-lm-0.32").load_cause, FG_LOAD_OK);
	assert_int_equal(sim(&w, "mlx-lm-0.31").load_cause, FG_LOAD_OK); /* the same sanitize at ed1fca4cef15 */
	trunk_format(&w, &need, &ct4_g128, 0, 0);
	assert_int_equal(sim(&w, "mlx-lm-0.32").load_cause, FG_LOAD_FORMAT); /* scales for 128, quantized for 32 */
	trunk_format(&w, &need, &ct4_asym, 0, 0);
	assert_int_equal(sim(&w, "mlx-lm-0.32").load_cause, FG_LOAD_FORMAT); /* weight_zero_point: an extra key */
	trunk_format(&w, &need, &ct8, 0, 0);
	assert_int_equal(sim(&w, "mlx-lm-0.32").load_cause, FG_LOAD_FORMAT); /* biases -8 * scale: 4 bits only */
	trunk_format(&w, &need, &fp8, 0, 1);
	assert_int_equal(sim(&w, "mlx-lm-0.32").load_cause, FG_LOAD_OK);
	world_release(&w);
}

/* A family no row lists is not modelled, and plain families never shift. */
static void test_coverage(void **state)
{
	struct world w;
	struct fg_runtime_result r;
	size_t n;
	const struct fg_runtime *all = fg_runtime_all(&n);

	(void)state;
	world_init(&w, 0);
	world_family(&w, "glm4_moe");
	w.in.style = FG_STYLE_PLAIN;
	w.trunk.conv = FG_CONV_PLAIN;
	w.probe.st.mean = 0.9;
	add_file(&w, "model.safetensors", 1, 0, 0, 0);
	w.facts[0].raw_conv1d = w.facts[0].conv1d_last_not_1 = 1;
	for (size_t i = 0; i < n; i++) {
		r = sim(&w, all[i].id);
		if (r.trunk_shift || r.head_shift || r.trunk != FG_TRUNK_OK)
			fail_msg("%s: a plain family shifted", all[i].id);
	}
	r = sim(&w, "ollama"); /* the GGUF import of glm4_moe was not read */
	assert_false(r.modelled);
	assert_non_null(strstr(r.unmodelled, "glm4_moe"));
	r = sim(&w, "mlx-lm-0.32");
	assert_true(r.modelled);
	world_release(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_table, release_index),
		cmocka_unit_test_teardown(test_names, release_index),
		cmocka_unit_test_teardown(test_resolve, release_index),
		cmocka_unit_test_teardown(test_file_rules, release_index),
		cmocka_unit_test_teardown(test_coverage, release_index),
		cmocka_unit_test_teardown(test_trunk_formats, release_index),
		cmocka_unit_test(test_scenarios),
		cmocka_unit_test(test_duplicates),
		cmocka_unit_test(test_resolved_targets),
		cmocka_unit_test(test_variants),
		cmocka_unit_test(test_declared_missing_per_runtime),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
