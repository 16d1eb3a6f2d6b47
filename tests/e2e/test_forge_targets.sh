#!/usr/bin/env bash
# Forging for targets (issue 10 section 4): for every runtime row, an artifact
# forged from the fixtures and read back by check_layout.py, an independent
# numpy reading of that runtime's loader (files, key names, shapes, the +1 it
# adds, the expert layouts it stacks, each rule cited from the runtime's
# source); target lists that one layout serves, and the conflicts that none
# does (layout_conflict naming the targets, nothing written); the list on the
# CLI, in jobs and in serve's forge_target.
set -u
. "$(dirname "$0")/lib.sh"
here=$(dirname "$0")
NUMPY_PY=${NUMPY_PY:-/usr/bin/python3}

# forge NAME OUT ARGS...: exit code in $RC, JSON in $TMP/OUT.json
forge() {
	local name=$1 out=$2; shift 2
	RC=0
	"$FORGED" forge "$FIXTURES/$name" --out "$TMP/$out" --json "$@" >"$TMP/$out.json" 2>"$TMP/$out.err" || RC=$?
}
# loads DESC RUNTIME SRC ART CONVENTION: check_layout.py says RUNTIME loads ART's head as SRC's.
loads() {
	local out
	if out=$("$NUMPY_PY" "$here/check_layout.py" "$2" "$FIXTURES/$3" "$TMP/$4" "$5" 2>&1); then ok; else bad "$1: $out"; fi
}
field() { jq -r "$1" "$TMP/$2.json"; }

# ---- every row, from the raw Hugging Face release (delta offsets, head in the shards) ----
# Where each one reads the head, from its source (the citations are check_layout.py's):
#   MTPLX: the config pointer (mtplx/artifacts.py@6d0a869a expected_mtp_file);
#   vllm-mlx: mtp/weights.safetensors (vllm_mlx/patches/qwen3_5_mtp.py@4b654c09e610:L290-298);
#   vLLM, SGLang, Ollama, llama.cpp, the mlx-lm PRs: mtp.* in the shards they read;
#   mlx-lm, LM Studio, mlx-vlm, transformers run no head: anywhere their trunk load is not disturbed.
declare -A PLACE=(
	[mtplx-2.11]="sidecar mtp.safetensors" [mtplx-2.12]="sidecar mtp.safetensors"
	[vllm-mlx]="sidecar mtp/weights.safetensors"
	[vllm]="embedded model-head.safetensors" [sglang]="embedded model-head.safetensors"
	[ollama]="embedded model-head.safetensors" [ollama-mlx]="embedded model-head.safetensors"
	[llamacpp]="embedded model-head.safetensors" [transformers]="embedded model-head.safetensors"
	[mlx-lm-pr990]="embedded model-head.safetensors" [mlx-lm-pr1740]="embedded model-head.safetensors"
	[mlx-lm-pr1724]="embedded model-head.safetensors"
	[mlx-lm-0.31]="sidecar mtp.safetensors" [mlx-lm-0.32]="sidecar mtp.safetensors"
	[lmstudio-mlx]="sidecar mtp.safetensors" [mlx-vlm]="sidecar mtp.safetensors"
)
for rt in "${!PLACE[@]}"; do
	forge qwen35_hf "hf_$rt" --target "$rt"
	check "hf -> $rt: exit 0 ($(head -c 300 "$TMP/hf_$rt.err"))" [ "$RC" -eq 0 ]
	check "hf -> $rt: ${PLACE[$rt]}" [ "$(field '.layout.place + " " + .layout.file' "hf_$rt")" = "${PLACE[$rt]}" ]
	loads "hf -> $rt" "$rt" qwen35_hf "hf_$rt" delta
done
# The delta layouts keep the offsets as stored; the MTPLX one is 1 + offset in F32.
check "hf -> vllm: nothing shifted" [ "$(field '.shifted_tensors | length' hf_vllm)" = 0 ]
check "hf -> vllm: no pointer, delta declared" [ "$(jq -c '[.mlx_lm_extra_tensors, .mtp_norm_encoding]' "$TMP/hf_vllm/config.json")" = '[null,"delta"]' ]
check "hf -> vllm: the head's shard is in the index" \
	[ "$(jq -r '.weight_map["mtp.fc.weight"]' "$TMP/hf_vllm/model.safetensors.index.json")" = model-head.safetensors ]
check "hf -> vllm: no mtp.safetensors" [ ! -e "$TMP/hf_vllm/mtp.safetensors" ]
# MTPLX's fingerprint covers its expected_mtp_file (mtplx/artifacts.py@6d0a869a): a head in the shards has
# none, so neither framing of the head fingerprint exists; the digest still names the artifact.
check "hf -> vllm: no head fingerprint, no legacy one" \
	[ "$(field '[.head_fingerprint, .fingerprint] | map(tostring) | join(" ")' hf_vllm)" = "null null" ]
check "hf -> vllm: the head's shard is in forged.json's files with its SHA-256" \
	[ "$(jq -r '.files["model-head.safetensors"]' "$TMP/hf_vllm/forged.json")" = \
	  "$(sha256sum "$TMP/hf_vllm/model-head.safetensors" | cut -d' ' -f1)" ]
check "hf -> vllm: a digest" [ "$(field '.digest | startswith("sha256:")' hf_vllm)" = true ]
check "hf -> vllm-mlx: MTPLX's framing covers mtp/weights.safetensors too (the pointer names it)" \
	[ "$(field '.head_fingerprint | startswith("sha256:")' hf_vllm-mlx)" = true ]
check "mtplx-2.12: mtplx_runtime.json" [ -f "$TMP/hf_mtplx-2.12/mtplx_runtime.json" ]
check "vllm: no mtplx_runtime.json" [ ! -e "$TMP/hf_vllm/mtplx_runtime.json" ]
check "hf -> vllm-mlx: the manifest vllm-mlx reads (schema 1, mlx_gamma)" \
	[ "$(jq -c '[.artifact_schema_version, .rmsnorm_weight_format]' "$TMP/hf_vllm-mlx/mtp/manifest.json")" = '[1,"mlx_gamma"]' ]
check "hf -> vllm-mlx: the pointer names the file" \
	[ "$(jq -r .mlx_lm_extra_tensors.mtp_file "$TMP/hf_vllm-mlx/config.json")" = mtp/weights.safetensors ]
check "hf -> mtplx-2.12: 7 norms shifted" [ "$(field '.shifted_tensors | length' hf_mtplx-2.12)" = 7 ]
# PR 1469 shifts the head layer's norms with a raw trunk, not pre_fc_norm_* or mtp.norm
# (mlx_lm/models/qwen3_5.py@51b980d8a507:L490-503): no one convention loads right over a raw trunk.
forge qwen35_hf hf_pr1469 --target mlx-lm-pr1469
check "hf -> mlx-lm-pr1469: exit 1" [ "$RC" -eq 1 ]
check "hf -> mlx-lm-pr1469: layout_conflict naming it" \
	[ "$(field '[.refusal.code] + .refusal.runtimes | join(" ")' hf_pr1469)" = "layout_conflict mlx-lm-pr1469" ]
check "hf -> mlx-lm-pr1469: nothing written" [ ! -e "$TMP/hf_pr1469" ]

# ---- from an MLX conversion (absolute gains, head in mtp.safetensors) ----
for rt in mtplx-2.12 vllm-mlx mlx-lm-pr990 mlx-lm-pr1740 mlx-lm-pr1469 mlx-lm-0.32 lmstudio-mlx; do
	forge qwen35_mlx_sidecar "mlx_$rt" --target "$rt"
	check "mlx -> $rt: exit 0 ($(head -c 300 "$TMP/mlx_$rt.err"))" [ "$RC" -eq 0 ]
	loads "mlx -> $rt" "$rt" qwen35_mlx_sidecar "mlx_$rt" absolute
done
check "mlx -> mlx-lm-pr990: absolute in the shards, norm_convention mlx (PR 1751's key)" \
	[ "$(jq -c '[.mtp_norm_encoding, .norm_convention]' "$TMP/mlx_mlx-lm-pr990/config.json")" = '["absolute","mlx"]' ]
check "mlx -> mtplx-2.12: nothing shifted" [ "$(field '.shifted_tensors | length' mlx_mtplx-2.12)" = 0 ]

# ---- MoE heads with fused [E,2I,H] experts ----
# MTPLX 2.12.0 stacks numbered experts only and drops fused ones (mtp_patch.py@0943c6cb
# _stack_mtp_moe_experts, #574): switch_mlp.  vLLM, SGLang, Ollama, llama.cpp and PR 990 read fused
# experts: kept.
declare -A EXPERTS=(
	[mtplx-2.12]=switch_mlp [vllm-mlx]=switch_mlp [vllm]=as_source [sglang]=as_source
	[ollama]=as_source [llamacpp]=as_source [mlx-lm-pr990]=as_source
)
for rt in "${!EXPERTS[@]}"; do
	forge qwen35_moe_hf_fused_linear "moe_$rt" --target "$rt"
	check "moe -> $rt: exit 0 ($(head -c 300 "$TMP/moe_$rt.err"))" [ "$RC" -eq 0 ]
	check "moe -> $rt: experts ${EXPERTS[$rt]}" [ "$(field .layout.experts "moe_$rt")" = "${EXPERTS[$rt]}" ]
	loads "moe -> $rt" "$rt" qwen35_moe_hf_fused_linear "moe_$rt" delta
done

# ---- a plain family keeps its names: vLLM's GLM drafter reads model.layers.{L+i} from the index's
# files (vllm glm4_moe_mtp.py@6e052ba8f4d9 _rewrite_spec_layer_name) ----
forge glm45 glm_vllm --target vllm
check "glm45 -> vllm: exit 0 ($(head -c 300 "$TMP/glm_vllm.err"))" [ "$RC" -eq 0 ]
check "glm45 -> vllm: in the shards, plain" [ "$(field '.layout.place + " " + .layout.convention' glm_vllm)" = "embedded plain" ]
loads "glm45 -> vllm" vllm glm45 glm_vllm plain

# ---- target lists one layout serves ----
# MTPLX follows the pointer to any file; vllm-mlx reads only mtp/weights.safetensors or
# model-mtp.safetensors: one sidecar, mtp/weights.safetensors, with its manifest, serves both.
forge qwen35_hf both_mlx --target mtplx-2.12,vllm-mlx
check "mtplx-2.12,vllm-mlx: exit 0 ($(head -c 300 "$TMP/both_mlx.err"))" [ "$RC" -eq 0 ]
check "mtplx-2.12,vllm-mlx: mtp/weights.safetensors + pointer" \
	[ "$(field '[.layout.file, .layout.pointer, .layout.manifest] | map(tostring) | join(" ")' both_mlx)" = \
	  "mtp/weights.safetensors true mtp/manifest.json" ]
check "mtplx-2.12,vllm-mlx: targets" [ "$(field '.targets | join(",")' both_mlx)" = "mtplx-2.12,vllm-mlx" ]
loads "mtplx-2.12,vllm-mlx" mtplx-2.12 qwen35_hf both_mlx delta
loads "mtplx-2.12,vllm-mlx" vllm-mlx qwen35_hf both_mlx delta
"$FORGED" inspect "$TMP/both_mlx" --runtime mtplx-2.12 --runtime vllm-mlx --json >"$TMP/both_mlx_insp.json" 2>/dev/null
check "mtplx-2.12,vllm-mlx: both load the head, ok" \
	[ "$(jq -r '[.runtimes[] | select(.targeted) | .runtime + ":" + .outcome + ":" + .head] | join(" ")' "$TMP/both_mlx_insp.json")" = \
	  "mtplx-2.12:ok:ok vllm-mlx:ok:ok" ]
check "mtplx-2.12,vllm-mlx: mtplx_runtime.json for the MTPLX target of the list" \
	[ "$(field .mtplx_runtime both_mlx)" = mtplx_runtime.json ] && [ -f "$TMP/both_mlx/mtplx_runtime.json" ]
check "mtplx-2.12,vllm-mlx: provenance records the list and the layout" \
	[ "$(jq -r '.target + " " + .layout.file' "$TMP/both_mlx/forged.json")" = "mtplx-2.12,vllm-mlx mtp/weights.safetensors" ]
# Repeated --target options name the same list.
forge qwen35_hf both_mlx2 --target mtplx-2.12 --target vllm-mlx
check "--target twice = the list" [ "$(field .target both_mlx2)" = "mtplx-2.12,vllm-mlx" ]
check "--target twice: the same head bytes" cmp -s "$TMP/both_mlx/mtp/weights.safetensors" "$TMP/both_mlx2/mtp/weights.safetensors"
# MTPLX reads embedded keys through the index when no sidecar exists and heals a declared delta
# head (mtp_patch.py@0943c6cb _embedded_mtp_weight_map, ~c18500): one delta shard for both.
forge qwen35_hf both_hf --target "mtplx-2.12, vllm"
check "mtplx-2.12,vllm: exit 0 ($(head -c 300 "$TMP/both_hf.err"))" [ "$RC" -eq 0 ]
check "mtplx-2.12,vllm: blanks dropped" [ "$(field .target both_hf)" = "mtplx-2.12,vllm" ]
loads "mtplx-2.12,vllm" mtplx-2.12 qwen35_hf both_hf delta
loads "mtplx-2.12,vllm" vllm qwen35_hf both_hf delta
check "mtplx-2.12,vllm: a head in the shards, no mtplx_runtime.json (nothing for it to fingerprint)" \
	[ "$(field .mtplx_runtime both_hf)" = null ]
forge qwen35_moe_hf_numbered both_moe --target mtplx-2.11,sglang --backbone "$FIXTURES/qwen35_moe_hf_numbered"
# (mtplx's mlx-lm refuses the numbered HF trunk: the check names it, whatever the head)
check "numbered MoE trunk for mtplx: runtime_load_error (trunk experts)" \
	[ "$(field '.refusal.code' both_moe)" = runtime_load_error ]

# ---- conflicts: refused before writing, naming the targets ----
forge qwen35_hf c1 --target vllm,vllm-mlx
check "vllm,vllm-mlx: exit 1" [ "$RC" -eq 1 ]
check "vllm,vllm-mlx: layout_conflict, both named" \
	[ "$(field '[.refusal.code] + .refusal.runtimes | join(" ")' c1)" = "layout_conflict vllm vllm-mlx" ]
check "vllm,vllm-mlx: the verdict names them too" [ "$(field '.verdicts[0].runtimes | join(",")' c1)" = "vllm,vllm-mlx" ]
check "vllm,vllm-mlx: the reason" grep -q "vllm-mlx decodes plain" "$TMP/c1.err"
# PR 990 needs mtp.* in its glob; on an MLX trunk that makes mtplx's mlx-lm 0.31 shift the trunk
# (qwen3_5.py@ed1fca4cef15:L307-331) and MTPLX's guard refuse it (runtime.py@0943c6cb ~c46300).
forge qwen35_mlx_sidecar c2 --target mtplx-2.12,mlx-lm-pr990
check "mtplx-2.12,pr990 on an MLX trunk: layout_conflict naming both" \
	[ "$(field '[.refusal.code] + .refusal.runtimes | join(" ")' c2)" = "layout_conflict mtplx-2.12 mlx-lm-pr990" ]
# ollama --experimental shifts trunk and head once any name holds mtp.
# (x/models/qwen3_5/qwen3_5.go@fb3076099687:L831-846): no place for a head over an MLX trunk.
forge qwen35_mlx_sidecar c3 --target ollama-mlx
check "ollama-mlx on an MLX trunk: layout_conflict naming it" \
	[ "$(field '[.refusal.code] + .refusal.runtimes | join(" ")' c3)" = "layout_conflict ollama-mlx" ]
check "ollama-mlx on an MLX trunk: the trunk would double-shift" grep -q trunk_double_shifted "$TMP/c3.err"
# A fused-expert head: MTPLX 2.12.0 drops fused experts, vLLM reads no switch_mlp.
forge qwen35_moe_hf_fused_linear c4 --target mtplx-2.12,vllm
check "mtplx-2.12,vllm with fused experts: layout_conflict" [ "$(field .refusal.code c4)" = layout_conflict ]
for n in 1 2 3 4; do check "conflict $n: nothing written" [ ! -e "$TMP/c$n" ]; done
forge qwen35_hf bad1 --target vllm,nope
check "an unknown entry: exit 2" [ "$RC" -eq 2 ]
check "an unknown entry: named" grep -q "'nope' is not a runtime" "$TMP/bad1.err"
forge qwen35_hf bad2 --target "vllm,,sglang"
check "an empty entry: exit 2" [ "$RC" -eq 2 ]

# ---- jobs: the list, and serve's forge_target ----
RC=0; "$FORGED" serve --forge-target "vllm,nope" --state-dir "$TMP/badstate" >"$TMP/badserve.log" 2>&1 || RC=$?
check "forge_target with an unknown id: serve exits 2" [ "$RC" -eq 2 ]
check "forge_target with an unknown id: named" grep -q "forge_target: 'nope' is not a runtime id" "$TMP/badserve.log"
start_server targets --state-dir "$TMP/state" --allow-roots "$FIXTURES" --allow-roots "$TMP" --workers 1 \
	--forge-target "vllm" || { finish; exit 1; }
post() { # post BODY -> CODE, body in $TMP/post.json
	CODE=$(curl -sS -o "$TMP/post.json" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
		--data-binary "$1" "$BASE/v1/jobs")
}
post '{"kind": "forge", "source": "qwen35_hf", "target": "vllm,nope"}'
check "POST /v1/jobs target with an unknown entry: 422" [ "$CODE" = 422 ]
check "422 unknown-runtime at /target" [ "$(jq -r '.type + " " + .errors[0].pointer' "$TMP/post.json")" = \
	"urn:forged:problem:unknown-runtime /target" ]
RC=0; "$FORGED" jobs submit qwen35_hf --out "$TMP/job_default" --wait -o json -s "$BASE" >"$TMP/job1.json" 2>"$TMP/job1.err" || RC=$?
check "a job without a target: succeeded ($(head -c 300 "$TMP/job1.err"))" [ "$RC" -eq 0 ]
check "a job without a target: forged for forge_target (vllm): the head in the shards" \
	[ "$(jq -r '.target + " " + .layout.place' "$TMP/job_default/forged.json")" = "vllm embedded" ]
RC=0; "$FORGED" jobs submit qwen35_hf --out "$TMP/job_list" --target mtplx-2.12 --target vllm-mlx --wait -o json \
	-s "$BASE" >"$TMP/job2.json" 2>"$TMP/job2.err" || RC=$?
check "a job with a list: succeeded ($(head -c 300 "$TMP/job2.err"))" [ "$RC" -eq 0 ]
check "a job with a list: mtp/weights.safetensors for both" \
	[ "$(jq -r '.target + " " + .layout.file' "$TMP/job_list/forged.json")" = "mtplx-2.12,vllm-mlx mtp/weights.safetensors" ]
loads "job mtplx-2.12,vllm-mlx" vllm-mlx qwen35_hf job_list delta
RC=0; "$FORGED" jobs submit qwen35_hf --out "$TMP/job_conflict" --target vllm,vllm-mlx --wait -o json \
	-s "$BASE" >"$TMP/job3.json" 2>"$TMP/job3.err" || RC=$?
check "a job in conflict: exit 1" [ "$RC" -eq 1 ]
check "a job in conflict: refusal layout_conflict" [ "$(jq -r .refusal.code "$TMP/job3.json")" = layout_conflict ]
RC=0; "$FORGED" jobs submit qwen35_hf --target vllm,bogus -s "$BASE" >/dev/null 2>"$TMP/job4.err" || RC=$?
check "jobs submit --target with an unknown entry: exit 2, before any request" [ "$RC" -eq 2 ]
check "jobs submit --target: the entry named" grep -q "'bogus' is not a runtime" "$TMP/job4.err"
finish
