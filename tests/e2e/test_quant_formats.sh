#!/usr/bin/env bash
# Quantized sources (issue 12): every format forged reads is dequantized exactly
# (check_forge.py dequant decodes the packed codes with numpy) or kept in an MLX
# format the target reads; a format it cannot read is refused by name and never
# copied; a trunk a targeted runtime cannot read is trunk_format_unsupported with
# the --backbone hint; per-module overrides follow the renamed tensors; re-quantizing
# needs --allow-requantize and is recorded.  Fixtures: tests/fixtures/gen_quant_fixtures.py.
set -u
. "$(dirname "$0")/lib.sh"
here=$(dirname "$0")
NUMPY_PY=${NUMPY_PY:-/usr/bin/python3}
manifest=$FIXTURES/quant_manifest.json

# forge NAME OUT [ARGS...]: exit code in $RC, JSON in $TMP/OUT.json
forge() {
	local name=$1 out=$2; shift 2
	own "$out" "$FIXTURES/$name" "$@"
}
own() { # own NAME SRC ARGS...: forge SRC (a folder) into $TMP/NAME, exit in $RC
	local name=$1 src=$2; shift 2
	RC=0
	"$FORGED" forge "$src" --out "$TMP/$name" --json "$@" >"$TMP/$name.json" 2>"$TMP/$name.err" || RC=$?
}
variant() { # variant NAME SRC FILTER: $TMP/NAME, a copy of the folder SRC whose config.json is jq FILTER of SRC's
	mkdir -p "$TMP/$1"
	cp -r "$2/." "$TMP/$1/"
	jq "$3" "$2/config.json" >"$TMP/$1/config.json"
}
dequant_check() { # dequant_check DESC SRC ART [HEAD_FILE]
	if out=$("$NUMPY_PY" "$here/check_forge.py" dequant "$FIXTURES/$2" "$TMP/$3" ${4:+"$4"} 2>&1); then ok; else bad "$1: $out"; fi
}
inspect() { # inspect NAME [ARGS...]: report in $TMP/i_NAME.json, exit in $RC
	local name=$1; shift
	RC=0
	"$FORGED" inspect "$FIXTURES/$name" --json "$@" >"$TMP/i_$name.json" 2>"$TMP/i_$name.err" || RC=$?
}
verdict() { jq -r --arg c "$2" '.verdicts[] | select(.code == $c) | '"$3" "$TMP/$1"; }
side_keys() { "$PYTHON" - "$1" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
print("\n".join(sorted(k for k in json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]]) if k != "__metadata__")))
PY
}
BB=$FIXTURES/qwen35_mlx_sidecar

# Every fixture's report against the generator's facts (family, conventions, the verdicts it provokes).
for name in $(jq -r '.fixtures | keys[]' "$manifest"); do
	inspect "$name"
	if [ "$RC" -gt 1 ]; then bad "$name: exit $RC ($(head -c 300 "$TMP/i_$name.err"))"; continue; fi
	if out=$("$PYTHON" "$here/check_inspect.py" "$manifest" "$name" "$TMP/i_$name.json"); then ok; else bad "$out"; fi
done

# GPTQ v1 with desc_act: an MLX target cannot load the GPTQ trunk (mlx-lm refuses any g_idx) ...
inspect q_gptq_head --runtime mtplx-2.12
check "gptq trunk for mtplx-2.12: exit 1" [ "$RC" -eq 1 ]
check "gptq trunk: trunk_format_unsupported names mtplx-2.12 and the --backbone way out" \
	[ "$(verdict i_q_gptq_head.json trunk_format_unsupported '(.runtimes | join(",")) + " " + (.detail | test("gptq bits=4 .* --backbone") | tostring)')" = "mtplx-2.12 true" ]
check "gptq trunk: the runtime's load error is its format" \
	[ "$(jq -r '.runtimes[] | select(.runtime == "mtplx-2.12") | .load_error.cause + " " + .outcome' "$TMP/i_q_gptq_head.json")" = "format refused" ]
check "gptq trunk: quantized_mtp_head names the format" \
	[ "$(verdict i_q_gptq_head.json quantized_mtp_head '.detail | test("8 x gptq bits=4 group=32 desc_act=true")')" = true ]
forge q_gptq_head gptq_nobb --target mtplx-2.12
check "gptq without --backbone: refused (exit 1)" [ "$RC" -eq 1 ]
check "gptq without --backbone: trunk_format_unsupported with the hint" \
	[ "$(jq -r '.refusal.code + " " + (.refusal.detail | test("--backbone") | tostring)' "$TMP/gptq_nobb.json")" = "trunk_format_unsupported true" ]
check "gptq without --backbone: nothing written" [ ! -e "$TMP/gptq_nobb" ]
# ... with an MLX backbone the head is dequantized exactly, never copied.
forge q_gptq_head gptq --target mtplx-2.12 --backbone "$BB"
check "gptq head: exit 0 ($(head -c 300 "$TMP/gptq.err"))" [ "$RC" -eq 0 ]
dequant_check "gptq head" q_gptq_head gptq
check "gptq head: no qweight/qzeros/scales/g_idx in the sidecar" \
	[ -z "$(side_keys "$TMP/gptq/mtp.safetensors" | grep -E '\.(qweight|qzeros|scales|g_idx)$')" ]
check "gptq head: the record names the source format" \
	[ "$(jq -r '.mtp_quantization.modules["mtp.layers.0.self_attn.q_proj"].dequantized_from' "$TMP/gptq/config.json")" = \
	  "gptq bits=4 group=32 desc_act=true sym=false checkpoint_format=gptq" ]
check "gptq head: the originals keep every GPTQ tensor" \
	[ "$(jq '[.originals[].tensor | select(test("mtp.layers.0.self_attn.q_proj.(qweight|qzeros|scales|g_idx)$"))] | length' "$TMP/gptq/forged.json")" = 4 ]

# For a Hugging Face target the GPTQ source is its own backbone: the dequantized head modules are declared
# unquantized in the config (GPTQModel's dynamic "-:" patterns, first so they win), and so for the others.
# hf is vllm, whose drafter reads mtp.* in the index's shards: the head goes into its own shard (layout.h).
forge q_gptq_head gptq_hf --target hf
check "gptq head for hf: exit 0 ($(head -c 300 "$TMP/gptq_hf.err"))" [ "$RC" -eq 0 ]
dequant_check "gptq head for hf" q_gptq_head gptq_hf model-head.safetensors
check "gptq head for hf: dynamic excludes the head modules first" \
	[ "$(jq -r '.quantization_config.dynamic | keys_unsorted[0]' "$TMP/gptq_hf/config.json")" = '-:mtp\.fc$' ]
forge q_ct_moe_head ct_hf --target hf
check "ct moe head for hf: exit 0 ($(head -c 300 "$TMP/ct_hf.err"))" [ "$RC" -eq 0 ]
dequant_check "ct moe head for hf (experts dequantized one by one)" q_ct_moe_head ct_hf model-head.safetensors
check "ct moe head for hf: the ignore list names the dequantized experts" \
	[ "$(jq '.quantization_config.ignore | index("mtp.layers.0.mlp.experts.3.down_proj") != null' "$TMP/ct_hf/config.json")" = true ]

# A GPTQ layout forged does not read is refused by name.
forge q_gptq_marlin marlin --backbone "$BB"
check "gptq marlin: exit 1" [ "$RC" -eq 1 ]
check "gptq marlin: unsupported_quantization_format naming gptq and marlin" \
	[ "$(jq -r '.refusal.code + " " + (.refusal.detail | test("is gptq bits=4 .*checkpoint_format=marlin") | tostring)' "$TMP/marlin.json")" = \
	  "unsupported_quantization_format true" ]
check "gptq marlin: nothing written" [ ! -e "$TMP/marlin" ]

# AWQ, NVFP4: dequantized exactly; their trunks are refused by the MLX targets without a backbone.
forge q_awq_head awq --backbone "$BB"
check "awq head: exit 0 ($(head -c 300 "$TMP/awq.err"))" [ "$RC" -eq 0 ]
dequant_check "awq head" q_awq_head awq
forge q_nvfp4_head nvfp4 --backbone "$BB"
check "nvfp4 head: exit 0 ($(head -c 300 "$TMP/nvfp4.err"))" [ "$RC" -eq 0 ]
dequant_check "nvfp4 head" q_nvfp4_head nvfp4
check "nvfp4 head: mtp.fc stays as it was (BF16, not quantized)" \
	[ "$(jq -c '.mtp_quantization.modules["mtp.fc"]' "$TMP/nvfp4/config.json")" = null ]
inspect q_nvfp4_head --runtime mlx-lm-0.32
check "nvfp4 trunk for mlx-lm-0.32: trunk_format_unsupported" \
	[ "$(verdict i_q_nvfp4_head.json trunk_format_unsupported '.runtimes | join(",")')" = mlx-lm-0.32 ]

# The formats mlx-lm's loader reads (issue 12 item 4, utils.py at v0.31.3 and main): GPTQ never.  A g_idx is
# refused by name, and without one its AWQ path takes GPTQ's qweight [in/8, out] for AutoAWQ's [in, out/8], so
# the strict load refuses the repacked shapes; llama.cpp's GPTQ dequantizer reads the g_idx, which must be there.
inspect q_gptq_noidx --runtime mlx-lm-0.32 --runtime mtplx-2.12 --runtime llamacpp
check "gptq without g_idx: exit 1" [ "$RC" -eq 1 ]
check "gptq without g_idx: trunk_format_unsupported for mlx-lm-0.32, mtplx-2.12 and llamacpp, with the hint" \
	[ "$(verdict i_q_gptq_noidx.json trunk_format_unsupported '(.runtimes | sort | join(",")) + " " + (.detail | test("gptq bits=4 group=32 desc_act=false sym=true .* --backbone") | tostring)')" = \
	  "llamacpp,mlx-lm-0.32,mtplx-2.12 true" ]
forge q_gptq_noidx gptq_noidx --target mtplx-2.12 --backbone "$BB"
check "gptq without g_idx, MLX backbone: exit 0 ($(head -c 300 "$TMP/gptq_noidx.err"))" [ "$RC" -eq 0 ]
dequant_check "gptq without g_idx (groups by column)" q_gptq_noidx gptq_noidx
# compressed-tensors int4: mlx-lm remaps it only in deepseek_v3's sanitize; llama.cpp dequantizes it.
inspect q_ct_dense --runtime mlx-lm-0.32 --runtime llamacpp
check "ct int4 qwen3_5 trunk: trunk_format_unsupported for mlx-lm-0.32 only" \
	[ "$(verdict i_q_ct_dense.json trunk_format_unsupported '(.runtimes | join(",")) + " " + (.detail | test("compressed-tensors pack-quantized bits=4 group=32 strategy=group symmetric=true") | tostring)')" = \
	  "mlx-lm-0.32 true" ]
check "ct int4 qwen3_5 trunk: llamacpp loads it" \
	[ "$(jq -r '.runtimes[] | select(.runtime == "llamacpp") | .outcome' "$TMP/i_q_ct_dense.json")" = ok ]
forge q_ct_dense ct_dense --target mtplx-2.12 --backbone "$BB"
check "ct int4 dense head, MLX backbone: exit 0 ($(head -c 300 "$TMP/ct_dense.err"))" [ "$RC" -eq 0 ]
dequant_check "ct int4 dense head" q_ct_dense ct_dense
# Block FP8 (Qwen3-Next-80B-A3B-FP8): only the deepseek_v3 / v32 / mimo_v2 sanitizers dequantize it in mlx-lm;
# ollama reads E4M3 with a block size and a scale companion.
inspect q_fp8_qwen3_next --runtime mlx-lm-0.32 --runtime ollama
check "fp8 qwen3_next trunk: trunk_format_unsupported for mlx-lm-0.32 only, with the hint" \
	[ "$(verdict i_q_fp8_qwen3_next.json trunk_format_unsupported '(.runtimes | join(",")) + " " + (.detail | test("fp8 e4m3 strategy=block block=.128,128.* --backbone") | tostring)')" = \
	  "mlx-lm-0.32 true" ]

# compressed-tensors MoE: the numbered weight_packed experts are a numbered layout (not "0 numbered expert
# tensors"), the MTP group's int8 asymmetric scheme applies to the head, and the experts stack dequantized.
inspect q_ct_moe_head --runtime mtplx-2.12
check "ct moe: no expert_layout_ambiguous" [ -z "$(verdict i_q_ct_moe_head.json expert_layout_ambiguous .code)" ]
check "ct moe: head quantized as its own config group (int8 per channel, asymmetric)" \
	[ "$(verdict i_q_ct_moe_head.json quantized_mtp_head '.detail | test("19 x compressed-tensors pack-quantized bits=8 strategy=channel symmetric=false")')" = true ]
forge q_ct_moe_head ct --target mtplx-2.12 --backbone "$FIXTURES/qwen35_moe_mlx_sidecar"
check "ct moe head: exit 0 ($(head -c 300 "$TMP/ct.err"))" [ "$RC" -eq 0 ]
dequant_check "ct moe head" q_ct_moe_head ct
check "ct moe head: stacked switch_mlp experts, BF16 [4, 128, 64]" \
	[ "$(jq -r '.mtp_quantization.modules["mtp.layers.0.mlp.switch_mlp.gate_proj"] | (.experts | tostring) + " " + (.dequantized_from | split(" ")[0])' "$TMP/ct/config.json")" = "4 compressed-tensors" ]
check "ct moe head: mtp.fc, ignored by the config, is not quantized" \
	[ "$(jq -c '.mtp_quantization.modules["mtp.fc"]' "$TMP/ct/config.json")" = null ]

# compressed-tensors float-quantized FP8 (GLM-4.5-FP8: W = fp8 * weight_scale[row]).
forge q_ct_fp8_glm fp8_nobb --target mtplx-2.12
check "glm fp8 without --backbone: trunk_format_unsupported" \
	[ "$(jq -r '.refusal.code' "$TMP/fp8_nobb.json")" = trunk_format_unsupported ]
forge q_ct_fp8_glm fp8 --target mtplx-2.12 --backbone "$FIXTURES/glm45"
check "glm fp8 head: exit 0 ($(head -c 300 "$TMP/fp8.err"))" [ "$RC" -eq 0 ]
dequant_check "glm fp8 head" q_ct_fp8_glm fp8
check "glm fp8 head: the q/k/v biases are copied" \
	[ "$(side_keys "$TMP/fp8/mtp.safetensors" | grep -c 'self_attn\.[qkv]_proj\.bias$')" = 3 ]
check "glm fp8 head: o_proj read per tensor (its own config group), the rest per channel" \
	[ "$(jq -c '.mtp_quantization.modules | [.["model.layers.3.self_attn.o_proj"], .["model.layers.3.self_attn.q_proj"]] | map(.dequantized_from | split(" ") | .[-1])' "$TMP/fp8/config.json")" = \
	  '["strategy=tensor","strategy=channel"]' ]

# Five kinds among the MLX head's 7 modules (the config: 3 take the affine 4/64 default; gate_proj
# affine 8/64, k_proj mxfp8, v_proj nvfp4, o_proj mxfp4 one each): counted per kind, the first
# three kinds shown in module order, the rest cut to "...".
inspect q_mlx_lm_head
check "mlx head: quantized_mtp_head counts each kind, three shown" \
	[ "$(verdict i_q_mlx_lm_head.json quantized_mtp_head .detail)" = \
	  "7 head module(s) are quantized: 3 x mlx affine bits=4 group=64; 1 x mlx mxfp8 bits=8 group=32; 1 x mlx nvfp4 bits=4 group=16; ..." ]

# Its head holds kinds MTPLX would read right on one of its two paths only: not judged, so the
# verdicts MTPLX's other rules give stay (its guard refuses this trunk's probe).
inspect q_mlx_lm_head --runtime mtplx-2.12
check "mlx head for mtplx-2.12: exit 1 ($RC), the shift hazard still names mtplx-2.12" [ "$RC" -eq 1 ]
check "mlx head for mtplx-2.12: embedded_mtp_shift_hazard lists it" \
	[ "$(verdict i_q_mlx_lm_head.json embedded_mtp_shift_hazard '.runtimes | index("mtplx-2.12") != null')" = true ]
check "mlx head for mtplx-2.12: the row stays modelled" \
	[ "$(jq -r '.runtimes[] | select(.runtime == "mtplx-2.12") | .modelled' "$TMP/i_q_mlx_lm_head.json")" = true ]

# MLX head as language_model.mtp.*: kept as it is for an MLX target, overrides renamed with the tensors.
forge q_mlx_lm_head mlx --target mtplx-2.12
check "mlx head keep: exit 0 ($(head -c 300 "$TMP/mlx.err"))" [ "$RC" -eq 0 ]
dequant_check "mlx head keep" q_mlx_lm_head mlx
check "mlx head keep: the 8-bit gate_proj recorded as 8-bit (not the 4-bit default)" \
	[ "$(jq -c '.mtp_quantization.modules["mtp.layers.0.mlp.gate_proj"] | [.bits, .group_size, .mode]' "$TMP/mlx/config.json")" = '[8,64,"affine"]' ]
check "mlx head keep: the mxfp4 o_proj recorded as mxfp4 (bits 4, group 32)" \
	[ "$(jq -c '.mtp_quantization.modules["mtp.layers.0.self_attn.o_proj"] | [.bits, .group_size, .mode]' "$TMP/mlx/config.json")" = '[4,32,"mxfp4"]' ]
check "mlx head keep: override keys renamed to mtp.* in quantization" \
	[ "$(jq -c '.quantization | [.["mtp.layers.0.mlp.gate_proj"].bits, .["mtp.layers.0.self_attn.k_proj"].mode, .["mtp.fc"]]' "$TMP/mlx/config.json")" = '[8,"mxfp8",false]' ]
check "mlx head keep: ... and in mlx-lm's quantization_config copy" \
	[ "$(jq -c '.quantization_config["mtp.layers.0.self_attn.v_proj"].mode' "$TMP/mlx/config.json")" = '"nvfp4"' ]
check "mlx head keep: no override left under language_model.mtp.*" \
	[ "$(jq '[.quantization, .quantization_config | keys[] | select(startswith("language_model.mtp."))] | length' "$TMP/mlx/config.json")" = 0 ]
check "mlx head keep: the artifact inspects clean for mtplx-2.12" \
	"$FORGED" inspect "$TMP/mlx" --runtime mtplx-2.12 --json >/dev/null
# A Hugging Face target reads no MLX format: the same head is dequantized to BF16.
forge q_mlx_lm_head mlx_hf --target hf --backbone "$FIXTURES/qwen35_hf"
check "mlx head for hf: exit 0 ($(head -c 300 "$TMP/mlx_hf.err"))" [ "$RC" -eq 0 ]
dequant_check "mlx head for hf (mxfp4, mxfp8, nvfp4, affine 4/8-bit dequantized)" q_mlx_lm_head mlx_hf model-head.safetensors
check "mlx head for hf: every MLX mode dequantized" \
	[ "$(jq -c '[.mtp_quantization.modules[] | select(.) | .dequantized_from | split(" ")[1]] | unique' "$TMP/mlx_hf/config.json")" = \
	  '["affine","mxfp4","mxfp8","nvfp4"]' ]

# Re-quantizing a quantized head needs the flag, and is recorded where fleet data can find it.
forge q_mlx_lm_head mlx_rq --quant affine:4:64
check "requantize without --allow-requantize: exit 2" [ "$RC" -eq 2 ]
check "requantize without the flag: the message names it" grep -q -- "--allow-requantize" "$TMP/mlx_rq.err"
check "requantize without the flag: nothing written" [ ! -e "$TMP/mlx_rq" ]
forge q_mlx_lm_head mlx_rq2 --quant affine:4:64 --allow-requantize
check "requantize with --allow-requantize: exit 0 ($(head -c 300 "$TMP/mlx_rq2.err"))" [ "$RC" -eq 0 ]
dequant_check "requantized = numpy's MLX affine of the BF16 dequantization" q_mlx_lm_head mlx_rq2
check "requantize: config records allow_requantize and the modules" \
	[ "$(jq -c '.mtp_quantization | [.allow_requantize, (.requantized | length)]' "$TMP/mlx_rq2/config.json")" = '[true,7]' ]
check "requantize: forged.json records it too" \
	[ "$(jq -c '.decisions.quantization.requantized | length' "$TMP/mlx_rq2/forged.json")" = 7 ]
check "requantize: the artifact carries quantized_head_requantized (warning)" \
	[ "$(jq -r '.verdicts[] | select(.code == "quantized_head_requantized") | .severity' "$TMP/mlx_rq2.json")" = warning ]
check "requantize: the verdict names the disagreeing reports" \
	[ "$(jq -r '.verdicts[] | select(.code == "quantized_head_requantized") | .detail | test("79-85 %.*44.9 vs 43.8")' "$TMP/mlx_rq2.json")" = true ]
# A GPTQ head under match with an unquantized backbone: nothing to re-quantize, no flag needed.
forge q_gptq_head gptq_match --quant match --backbone "$BB"
check "gptq head, match against a BF16 backbone: exit 0" [ "$RC" -eq 0 ]
forge q_gptq_head gptq_rq --quant affine:4:64 --backbone "$BB"
check "gptq head, affine without the flag: exit 2" [ "$RC" -eq 2 ]
forge q_gptq_head gptq_rq2 --quant affine:4:64 --backbone "$BB" --allow-requantize
check "gptq head, affine with the flag: exit 0 ($(head -c 300 "$TMP/gptq_rq2.err"))" [ "$RC" -eq 0 ]
dequant_check "gptq head re-quantized" q_gptq_head gptq_rq2
# match against a 4-bit MLX backbone re-quantizes the dequantized GPTQ head as the backbone is (flag needed);
# mxfp4 applies to the dequantized AWQ head.
forge q_gptq_head gptq_mq4 --quant match --backbone "$FIXTURES/qwen35_mlx_q4"
check "gptq head, match against a 4-bit backbone without the flag: exit 2" [ "$RC" -eq 2 ]
forge q_gptq_head gptq_mq4b --quant match --backbone "$FIXTURES/qwen35_mlx_q4" --allow-requantize
check "gptq head, match against a 4-bit backbone with the flag: exit 0 ($(head -c 300 "$TMP/gptq_mq4b.err"))" [ "$RC" -eq 0 ]
dequant_check "gptq head matched = numpy's MLX affine (the backbone's bits and group) of the BF16 dequantization" \
	q_gptq_head gptq_mq4b
check "gptq head matched: the backbone's bits and group, the source format kept in the record" \
	[ "$(jq -c '.mtp_quantization.modules["mtp.layers.0.self_attn.q_proj"] | [.bits, .group_size, .mode, .requantized, (.source | split(" ")[0])]' "$TMP/gptq_mq4b/config.json")" = \
	  "[$(jq -r '.quantization.bits' "$FIXTURES/qwen35_mlx_q4/config.json"),$(jq -r '.quantization.group_size' "$FIXTURES/qwen35_mlx_q4/config.json"),\"affine\",true,\"gptq\"]" ]
# (lmstudio-mlx: MTPLX, the default target, refuses an mxfp4 head over a trunk without a quantization block)
forge q_awq_head awq_mx --quant mxfp4 --backbone "$BB" --allow-requantize --target lmstudio-mlx
check "awq head, mxfp4 with the flag: exit 0 ($(head -c 300 "$TMP/awq_mx.err"))" [ "$RC" -eq 0 ]
dequant_check "awq head re-quantized mxfp4 = numpy's mxfp4 of the BF16 dequantization" q_awq_head awq_mx
# DeepSeek FP8 blocks are a quantized source too: recorded as dequantized, re-quantized only with the flag.
forge deepseek_v3_fp8 ds_keep --target hf
check "deepseek fp8 keep: the record names the FP8 blocks" \
	[ "$(jq -r '.mtp_quantization.modules["model.layers.3.self_attn.kv_b_proj"].dequantized_from' "$TMP/ds_keep/config.json")" = \
	  "fp8 e4m3 strategy=block block=[128,128]" ]
forge deepseek_v3_fp8 ds_rq --target hf --quant affine:4:64
check "deepseek fp8, affine without --allow-requantize: exit 2" [ "$RC" -eq 2 ]

# forged's own artifact as a source: a head it quantized over a float trunk (the config has no
# quantization block, only forged's record, mtp_quantization.modules) is read as the record says.
# listed NAME: every file forged.json lists has that SHA-256 on disk (sha256sum); prints what differs
listed() {
	[ -f "$TMP/$1/forged.json" ] || { echo "no $1/forged.json"; return; }
	jq -r '.files | to_entries[] | "\(.value)  \(.key)"' "$TMP/$1/forged.json" | (cd "$TMP/$1" && sha256sum --quiet -c - 2>&1)
}
own own_mx "$FIXTURES/qwen35_hf" --quant mxfp4 --allow-requantize --target lmstudio-mlx
check "own mxfp4 artifact: forged ($(head -c 300 "$TMP/own_mx.err"))" [ "$RC" -eq 0 ]
RC=0
"$FORGED" inspect "$TMP/own_mx" --json >"$TMP/i_own_mx.json" 2>"$TMP/i_own_mx.err" || RC=$?
check "own mxfp4 artifact: inspect exits 0 ($RC)" [ "$RC" -eq 0 ]
check "own mxfp4 artifact: inspect reads each head module's format from forged's record" \
	[ "$(verdict i_own_mx.json quantized_mtp_head .detail)" = "7 head module(s) are quantized: 7 x mlx mxfp4 bits=4 group=32" ]
own own_mx_re "$TMP/own_mx" --target lmstudio-mlx
check "own mxfp4 artifact as a source: forges ($(head -c 300 "$TMP/own_mx_re.err"))" [ "$RC" -eq 0 ]
if out=$("$NUMPY_PY" "$here/check_forge.py" dequant "$TMP/own_mx" "$TMP/own_mx_re" 2>&1); then ok; else
	bad "own mxfp4 artifact re-forged: the head = numpy's mxfp4 decode rounded to BF16: $out"; fi
own own_af "$FIXTURES/qwen35_hf" --quant affine:4:64 --allow-requantize --target mtplx-2.12
check "own affine artifact for mtplx: forged ($(head -c 300 "$TMP/own_af.err"))" [ "$RC" -eq 0 ]
own own_af_re "$TMP/own_af" --target mtplx-2.12
check "own affine artifact as a source: forges ($(head -c 300 "$TMP/own_af_re.err"))" [ "$RC" -eq 0 ]
if out=$("$NUMPY_PY" "$here/check_forge.py" dequant "$TMP/own_af" "$TMP/own_af_re" 2>&1); then ok; else
	bad "own affine artifact re-forged: the head = numpy's affine decode rounded to BF16: $out"; fi
# Bits and group other than MLX's defaults (4, 64) come from the record, not from a default.
own own_a8 "$FIXTURES/qwen35_hf" --quant affine:8:32 --allow-requantize --target lmstudio-mlx
check "own affine 8/32 artifact: forged ($(head -c 300 "$TMP/own_a8.err"))" [ "$RC" -eq 0 ]
check "own affine 8/32 artifact: the record says what --quant asked" \
	[ "$(jq -c '[.mtp_quantization.modules[] | select(. != null) | [.bits, .group_size, .mode]] | unique' "$TMP/own_a8/config.json")" = '[[8,32,"affine"]]' ]
own own_a8_re "$TMP/own_a8" --target lmstudio-mlx
check "own affine 8/32 artifact as a source: forges ($(head -c 300 "$TMP/own_a8_re.err"))" [ "$RC" -eq 0 ]
if out=$("$NUMPY_PY" "$here/check_forge.py" dequant "$TMP/own_a8" "$TMP/own_a8_re" 2>&1); then ok; else
	bad "own affine 8/32 artifact re-forged: the head = numpy's 8-bit decode rounded to BF16: $out"; fi
# Over a compressed-tensors trunk (whose config says nothing of the MLX head modules), embedded for hf.
own own_ct "$FIXTURES/q_ct_dense" --quant affine:4:64 --allow-requantize --target hf
check "own head over a compressed-tensors trunk: forged ($(head -c 300 "$TMP/own_ct.err"))" [ "$RC" -eq 0 ]
own own_ct_re "$TMP/own_ct" --target hf
check "own head over a compressed-tensors trunk as a source: forges ($(head -c 300 "$TMP/own_ct_re.err"))" [ "$RC" -eq 0 ]
if out=$("$NUMPY_PY" "$here/check_forge.py" dequant "$TMP/own_ct" "$TMP/own_ct_re" model-head.safetensors 2>&1); then ok; else
	bad "own head over a compressed-tensors trunk re-forged = numpy's decode rounded to BF16: $out"; fi

# The source's mtplx_runtime.json names the source artifact: never carried, never listed (an
# artifact with a BF16 head too, which forged always read).
for src in own_af own_bf; do
	[ "$src" = own_bf ] && own own_bf "$FIXTURES/qwen35_hf" --target mtplx-2.12
	if [ "$src" = own_bf ]; then
		own own_bf_re "$TMP/own_bf" --target mtplx-2.12
		check "own_bf re-forged for mtplx: forged ($(head -c 300 "$TMP/own_bf_re.err"))" [ "$RC" -eq 0 ]
	fi
	check "$src re-forged for mtplx: forged.json lists no mtplx_runtime.json" \
		[ "$(jq -r '.files | has("mtplx_runtime.json")' "$TMP/${src}_re/forged.json")" = false ]
	check "$src re-forged for mtplx: every listed file has its listed SHA-256 ($(listed "${src}_re" | head -c 200))" \
		[ -z "$(listed "${src}_re")" ]
	own "${src}_lm" "$TMP/$src" --target lmstudio-mlx
	check "$src re-forged for lmstudio-mlx: forged ($(head -c 300 "$TMP/${src}_lm.err"))" [ "$RC" -eq 0 ]
	check "$src re-forged for lmstudio-mlx: the source's mtplx_runtime.json is not carried" \
		[ -f "$TMP/${src}_lm/forged.json" -a ! -e "$TMP/${src}_lm/mtplx_runtime.json" ]
done

# vllm-mlx's Qwen3.5 patch (qwen3_5_mtp.py@4b654c09e610 L356-396) dequantizes every quantized
# head module as affine with the quantization block's bits and group (4 and 64 without one),
# whatever the module is: a head quantized otherwise is refused before anything is written.
for q in mxfp4 affine:8:64 affine:4:32; do
	own "vm_$q" "$FIXTURES/qwen35_hf" --quant "$q" --allow-requantize --target vllm-mlx
	check "vllm-mlx, $q over a BF16 trunk: exit 1 ($RC)" [ "$RC" -eq 1 ]
	check "vllm-mlx, $q: the refusal says how it reads the head and what reads right" \
		grep -q "runtime_load_error: .*vllm-mlx.*reads every quantized head module as affine bits=4 group=64 (no quantization block: its defaults).*--quant affine:4:64 is what it reads" "$TMP/vm_$q.err"
	check "vllm-mlx, $q: nothing written" [ ! -e "$TMP/vm_$q" ]
done
own vm_ok "$FIXTURES/qwen35_hf" --quant affine:4:64 --allow-requantize --target vllm-mlx
check "vllm-mlx, affine:4:64 over a BF16 trunk: exit 0 ($(head -c 300 "$TMP/vm_ok.err"))" [ "$RC" -eq 0 ]
check "vllm-mlx, affine:4:64: the head in mtp/weights.safetensors" [ -f "$TMP/vm_ok/mtp/weights.safetensors" ]
# The block's bits and group, not the defaults: a BF16 checkpoint whose config states 8 bits, group 32.
variant h8 "$FIXTURES/qwen35_hf" '. + {quantization: {bits: 8, group_size: 32}}'
own vm_h8 "$TMP/h8" --quant affine:8:32 --allow-requantize --target vllm-mlx
check "vllm-mlx, affine:8:32 under an 8-bit, group-32 block: exit 0 ($(head -c 300 "$TMP/vm_h8.err"))" [ "$RC" -eq 0 ]
own vm_h8b "$TMP/h8" --quant affine:4:64 --allow-requantize --target vllm-mlx
check "vllm-mlx, affine:4:64 under an 8-bit, group-32 block: exit 1 ($RC)" [ "$RC" -eq 1 ]
check "vllm-mlx, affine:4:64 under the block: it reads 8 bits, group 32, from config.json quantization" \
	grep -q "as affine bits=8 group=32 (config.json quantization)" "$TMP/vm_h8b.err"
# text_config's block first, the top level's only when text_config has none (L356).
variant htc "$FIXTURES/qwen35_hf" '.text_config.quantization = {bits: 8, group_size: 32} | .quantization = {bits: 4, group_size: 64}'
own vm_htc "$TMP/htc" --quant affine:4:64 --allow-requantize --target vllm-mlx
check "vllm-mlx, text_config's 8/32 block over a top-level 4/64 one: affine:4:64 refused ($RC)" [ "$RC" -eq 1 ]
check "vllm-mlx, text_config's block is the one read" grep -q "as affine bits=8 group=32 (text_config.quantization)" "$TMP/vm_htc.err"
own vm_htc8 "$TMP/htc" --quant affine:8:32 --allow-requantize --target vllm-mlx
check "vllm-mlx, text_config's 8/32 block: affine:8:32 forged ($(head -c 300 "$TMP/vm_htc8.err"))" [ "$RC" -eq 0 ]
# It reads tensors, not formats: a head moved into vllm-mlx's layout with no record and no block
# is judged by its tensors (8 bits in groups of 64: the scales do not fit 4/64; mxfp4: no biases).
for q in affine:8:64 mxfp4; do
	own "vmt_$q" "$FIXTURES/qwen35_hf" --quant "$q" --allow-requantize --target lmstudio-mlx
	variant "vmt_${q}_moved" "$TMP/vmt_$q" 'del(.mtp_quantization) | del(.mlx_lm_extra_tensors)'
	mkdir -p "$TMP/vmt_${q}_moved/mtp"
	mv "$TMP/vmt_${q}_moved/mtp.safetensors" "$TMP/vmt_${q}_moved/mtp/weights.safetensors"
	RC=0
	"$FORGED" inspect "$TMP/vmt_${q}_moved" --runtime vllm-mlx --json >"$TMP/i_vmt_$q.json" 2>/dev/null || RC=$?
	check "vllm-mlx, a $q head with no record: inspect exits 1 ($RC)" [ "$RC" -eq 1 ]
	case $q in mxfp4) want="no biases: its packed weight goes into a float module" ;; *) want="its scales do not fit: the dequantize raises" ;; esac
	check "vllm-mlx, a $q head with no record: refused by its tensors ($want)" \
		[ "$(jq -r --arg w "$want" '.runtimes[] | select(.runtime == "vllm-mlx") | (.load_error.cause + " " + (.load_error.reason | contains($w) | tostring))' "$TMP/i_vmt_$q.json")" = "format true" ]
done
# MTPLX's generic injector without a block: a head with no record is judged by its tensors too
# (no biases is no affine module, which it reads on neither path).
variant mtplx_norec "$TMP/vmt_mxfp4" 'del(.mtp_quantization)'
RC=0
"$FORGED" inspect "$TMP/mtplx_norec" --runtime mtplx-2.12 --json >"$TMP/i_mtplx_norec.json" 2>/dev/null || RC=$?
check "mtplx-2.12, an mxfp4 head with no record: inspect exits 1 ($RC)" [ "$RC" -eq 1 ]
check "mtplx-2.12, an mxfp4 head with no record: refused by its tensors (no biases)" \
	[ "$(jq -r '.runtimes[] | select(.runtime == "mtplx-2.12") | (.load_error.cause + " " + (.load_error.reason | contains("no biases: not affine") | tostring))' "$TMP/i_mtplx_norec.json")" = "format true" ]
# A source head of five MLX kinds kept as stored: vllm-mlx reads four of them wrong (its
# block says affine 4/64). The forge's own check of the artifact refuses it, naming one.
forge q_mlx_lm_head vm_keep --target vllm-mlx
check "vllm-mlx, a mixed MLX head kept: exit 1 ($RC)" [ "$RC" -eq 1 ]
check "vllm-mlx, a mixed MLX head kept: 4 modules read wrong, e.g. the mxfp8 k_proj (no biases)" \
	grep -q "4 are not, e.g. mtp.layers.0.self_attn.k_proj (no biases: its packed weight goes into a float module)" "$TMP/vm_keep.err"
forge q_mlx_lm_head vm_match --target vllm-mlx --quant match --allow-requantize
check "vllm-mlx, the mixed head matched to the block: exit 0 ($(head -c 300 "$TMP/vm_match.err"))" [ "$RC" -eq 0 ]
check "vllm-mlx, the mixed head matched: every module recorded affine 4/64" \
	[ "$(jq -c '[.mtp_quantization.modules[] | select(. != null and .bits != null) | [.bits, .group_size, .mode]] | unique' "$TMP/vm_match/config.json")" = '[[4,64,"affine"]]' ]
dequant_check "vllm-mlx, the mixed head matched = numpy's affine 4/64 of the BF16 dequantization" q_mlx_lm_head vm_match mtp/weights.safetensors
# match takes each module's own entry of the block; vllm-mlx reads only the block's bits and group:
# a head module matched to an 8-bit override is refused before anything is written.
variant qov "$FIXTURES/q_mlx_lm_head" '.quantization["language_model.model.layers.0.mlp.gate_proj"] = {bits: 8, group_size: 64}
    | .quantization_config["language_model.model.layers.0.mlp.gate_proj"] = {bits: 8, group_size: 64}'
own vm_qov "$TMP/qov" --quant match --allow-requantize --target vllm-mlx
check "vllm-mlx, match to an 8-bit per-module entry: exit 1 ($RC)" [ "$RC" -eq 1 ]
check "vllm-mlx, match to an 8-bit per-module entry: refused before the write, naming it" \
	grep -q "the head would be affine bits=8 group=64: wrong values or a load error (--quant affine:4:64 is what it reads)" "$TMP/vm_qov.err"
check "no temporary folders left" [ -z "$(ls -A "$TMP" | grep forged-tmp)" ]
finish
