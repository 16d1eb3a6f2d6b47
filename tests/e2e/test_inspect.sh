#!/usr/bin/env bash
# `forged inspect` on every generated fixture (checked against the manifest by
# check_inspect.py) and on each incident of docs/domain.md section 3, asserting the
# runtime table, verdict codes, `ok` and the exit code.
set -u
. "$(dirname "$0")/lib.sh"
here=$(dirname "$0")
manifest=$FIXTURES/manifest.json

# inspect NAME [ARGS...]: report in $TMP/NAME.json, exit code in $RC
inspect() {
	local name=$1; shift
	RC=0
	"$FORGED" inspect "$FIXTURES/$name" --json "$@" >"$TMP/$name.json" 2>"$TMP/$name.err" || RC=$?
}
# field NAME JQ: one value of the last report of NAME
field() { jq -r "$2" "$TMP/$1.json"; }
has_code() { jq -e --arg c "$2" '[.verdicts[].code] | index($c) != null' "$TMP/$1.json" >/dev/null; }

for name in $(jq -r '.fixtures | keys[]' "$manifest"); do
	inspect "$name"
	if [ "$RC" -gt 1 ]; then bad "$name: exit $RC ($(head -c 300 "$TMP/$name.err"))"; continue; fi
	want_rc=$(jq -r '.ok | if . then 0 else 1 end' "$TMP/$name.json")
	check "$name: exit $RC matches ok" [ "$RC" -eq "$want_rc" ]
	if out=$("$PYTHON" "$here/check_inspect.py" "$manifest" "$name" "$TMP/$name.json"); then ok; else bad "$out"; fi
done

# Incident 1 (MTPLX 306): absolute MLX trunk with embedded mtp.* keys.
inspect qwen35_mlx_embedded
check "306: exit 1" [ "$RC" -eq 1 ]
# Ollama's default import adds +1 unconditionally; the mtp.-keyed trigger is --experimental's (issue 10).
check "306: hazard names mlx-lm-0.31, mtplx-2.12, lmstudio-mlx, ollama-mlx" \
	[ "$(field qwen35_mlx_embedded '[.verdicts[]|select(.code=="embedded_mtp_shift_hazard").runtimes[]]|map(select(.=="mlx-lm-0.31" or .=="mtplx-2.12" or .=="lmstudio-mlx" or .=="ollama-mlx"))|length')" = 4 ]
check "306: ollama double-shifts unconditionally" \
	[ "$(field qwen35_mlx_embedded '.runtimes[]|select(.runtime=="ollama")|[.shift_reason,.trunk]|join(" ")')" = "unconditional double_shifted" ]
check "306: mlx-lm-0.31 double-shifts the trunk" \
	[ "$(field qwen35_mlx_embedded '.runtimes[]|select(.runtime=="mlx-lm-0.31")|[.trunk_shift,.trunk,.head,.outcome]|join(" ")')" = "true double_shifted dropped broken" ]
check "306: probe 1.79 becomes 2.79" \
	[ "$(field qwen35_mlx_embedded '.runtimes[]|select(.runtime=="mlx-lm-0.31").trunk_probe_after|.*100|floor')" = 279 ]
check "306: mlx-lm-0.32 is fine" \
	[ "$(field qwen35_mlx_embedded '.runtimes[]|select(.runtime=="mlx-lm-0.32")|[.trunk,.outcome]|join(" ")')" = "ok ok" ]
check "306: mtplx-2.12 refuses" \
	[ "$(field qwen35_mlx_embedded '.runtimes[]|select(.runtime=="mtplx-2.12").outcome')" = refused ]
check "306: every runtime listed" [ "$(field qwen35_mlx_embedded '.runtimes|length')" = 17 ]
check "306: mtplx-2.12's load error is its guard" \
	[ "$(field qwen35_mlx_embedded '.runtimes[]|select(.runtime=="mtplx-2.12").load_error.cause')" = guard ]
check "306: breakage says how mlx-lm-0.31 breaks" \
	[ "$(field qwen35_mlx_embedded '.runtimes[]|select(.runtime=="mlx-lm-0.31").breakage|join(",")')" = trunk_double_shifted ]
inspect qwen35_mlx_embedded --runtime mlx-lm-0.33
check "306 for mlx-lm-0.33: resolved to mlx-lm-0.32, exit 0" [ "$RC" -eq 0 ]
check "306 for mlx-lm-0.33: version_of" \
	[ "$(field qwen35_mlx_embedded '[.runtimes[]|select(.targeted)|.runtime+"="+.version_of]|join(",")')" = "mlx-lm-0.32=mlx-lm-0.33" ]
inspect qwen35_mlx_embedded --runtime mlx-lm-0.32
check "306 for mlx-lm-0.32 alone: exit 0" [ "$RC" -eq 0 ]
check "306 for mlx-lm-0.32 alone: only it is targeted" \
	[ "$(field qwen35_mlx_embedded '[.runtimes[]|select(.targeted).runtime]|join(",")')" = mlx-lm-0.32 ]

# The pruned index and the stray shard do not hide the keys from mlx-lm's glob.
inspect qwen35_mlx_pruned_index
check "pruned index: exit 1" [ "$RC" -eq 1 ]
check "pruned index: hazard" has_code qwen35_mlx_pruned_index embedded_mtp_shift_hazard
check "pruned index: index_mismatch" has_code qwen35_mlx_pruned_index index_mismatch
inspect qwen35_mlx_stray_shard
check "stray shard: exit 1" [ "$RC" -eq 1 ]
check "stray shard: hazard and stray_shard" has_code qwen35_mlx_stray_shard stray_shard
check "stray shard: mlx-lm-0.31 reads the stray file" \
	[ "$(field qwen35_mlx_stray_shard '[.runtimes[]|select(.runtime=="mlx-lm-0.31").files[]]|index("model-extra.safetensors") != null')" = true ]

# A trunk already double-shifted on disk.
inspect qwen35_mlx_trunk_double_shifted
check "double-shifted trunk: exit 1 and verdict" [ "$RC" -eq 1 ]
check "double-shifted trunk: trunk_double_shifted" has_code qwen35_mlx_trunk_double_shifted trunk_double_shifted

# Incident 2 (MTPLX 301): forge shifted an absolute head's q/k/mtp.norm again.
inspect qwen35_mlx_head_shifted
check "301: exit 1" [ "$RC" -eq 1 ]
check "301: head_double_shifted" has_code qwen35_mlx_head_shifted head_double_shifted
check "301: head set double_shifted, qk_max 2.79" \
	[ "$(field qwen35_mlx_head_shifted '.sets[]|select(.name=="mtp")|[.convention,(.qk_max*100|floor)]|map(tostring)|join(" ")')" = "double_shifted 279" ]
check "301: mtplx-2.12 head double_shifted, degraded" \
	[ "$(field qwen35_mlx_head_shifted '.runtimes[]|select(.runtime=="mtplx-2.12")|[.head,.outcome]|join(" ")')" = "double_shifted degraded" ]

# Incident 3 (MTPLX 176): a raw delta sidecar next to an absolute trunk.
inspect qwen35_mlx_raw_head
check "176: healed by mtplx-2.12: exit 0" [ "$RC" -eq 0 ]
check "176: raw_zero_centred_head info" \
	[ "$(field qwen35_mlx_raw_head '.verdicts[]|select(.code=="raw_zero_centred_head").severity')" = info ]
check "176: mtplx-2.12 heals the head" \
	[ "$(field qwen35_mlx_raw_head '.runtimes[]|select(.runtime=="mtplx-2.12")|[.head_shift,.head]|map(tostring)|join(" ")')" = "true ok" ]
# The 2.11 heal gap was the qwen3_5_mtp loader's: model_type qwen3_5_moe takes the generic injector,
# which heals since 2.9.2 (issue 10 corrects the old expectation "inverted, exit 1").
inspect qwen35_moe_mlx_raw_head --runtime mtplx-2.11
check "176 MoE for mtplx-2.11 (generic injector heals): exit 0" [ "$RC" -eq 0 ]
check "176 MoE for mtplx-2.11: head ok" \
	[ "$(field qwen35_moe_mlx_raw_head '.runtimes[]|select(.runtime=="mtplx-2.11")|[.head_shift,.head]|map(tostring)|join(" ")')" = "true ok" ]
inspect qwen35_mtp_model_type --runtime mtplx-2.11
check "176 qwen3_5_mtp for mtplx-2.11 (no heal): exit 1" [ "$RC" -eq 1 ]
check "176 qwen3_5_mtp for mtplx-2.11: head inverted" \
	[ "$(field qwen35_mtp_model_type '.runtimes[]|select(.runtime=="mtplx-2.11")|[.head,(.breakage|join(","))]|join(" ")')" = "inverted head_inverted" ]
inspect qwen35_mlx_raw_head --runtime mtplx-2.11
check "176 dense for mtplx-2.11 (healed since 2.2): exit 0" [ "$RC" -eq 0 ]

# Raw Hugging Face source: delta everywhere, loads right in its own runtimes.
inspect qwen35_hf
check "raw HF: exit 0" [ "$RC" -eq 0 ]
# "hf" is an alias now (vllm, sglang, transformers); vLLM is the old row's behaviour.
check "raw HF: vllm loads trunk and head ok" \
	[ "$(field qwen35_hf '.runtimes[]|select(.runtime=="vllm")|[.trunk,.head,.outcome]|join(" ")')" = "ok ok ok" ]
inspect qwen35_hf --runtime hf
check "raw HF for the hf alias: vllm, sglang, transformers targeted" \
	[ "$(field qwen35_hf '[.runtimes[]|select(.targeted).runtime]|join(",")')" = "transformers,vllm,sglang" ]
check "raw HF for the hf alias: exit 0" [ "$RC" -eq 0 ]
check "raw HF: mlx-lm-0.32 shifts for the raw conv1d" \
	[ "$(field qwen35_hf '.runtimes[]|select(.runtime=="mlx-lm-0.32")|[.trunk_shift,.shift_reason,.trunk]|map(tostring)|join(" ")')" = "true raw_conv1d ok" ]
# MTPLX finds the embedded keys through the index and heals them (mtp_patch.py@0943c6cb
# inject_mtp_support): the old expectation "absent, degraded" modelled a sidecar-only loader.
inspect qwen35_hf --runtime mtplx-2.12
check "raw HF for mtplx-2.12 (no sidecar): no error" [ "$RC" -eq 0 ]
check "raw HF for mtplx-2.12 (no sidecar): embedded head healed, ok" \
	[ "$(field qwen35_hf '.runtimes[]|select(.runtime=="mtplx-2.12")|[.head,.outcome,.decode]|join(" ")')" = "ok ok mtp" ]

# Plain-norm families never shift and never get shift verdicts.  deepseek_v3_fp8 (L = 3) is refused
# by mlx-lm, whose deepseek_v3 sanitize drops only model.layers.61 (deepseek_v3.py@d78bf58e217c:L380-478).
for name in glm45 glm47_flash deepseek_v3_fp8 deepseek_v32 mimo mimo_v2; do
	inspect "$name"
	if [ "$name" = deepseek_v3_fp8 ]; then
		check "$name: exit 1 (mlx-lm keeps the head layer 3)" [ "$RC" -eq 1 ]
		check "$name: runtime_load_error for mlx-lm-0.32" \
			[ "$(field "$name" '.verdicts[]|select(.code=="runtime_load_error").runtimes|join(",")')" = mlx-lm-0.32 ]
	else
		check "$name: exit 0" [ "$RC" -eq 0 ]
	fi
	check "$name: plain sets" [ "$(field "$name" '[.sets[].convention]|unique|join(",")')" = plain ]
	check "$name: no runtime shifts" [ "$(field "$name" '[.runtimes[]|select(.trunk_shift or .head_shift)]|length')" = 0 ]
done
check "mimo head is mtp_layers" [ "$(field mimo .mtp.scheme)" = mtp_layers ]
check "glm head is appended" [ "$(field glm45 .mtp.scheme)" = appended_layers ]

# A declared head with no tensors (issue 12): an info note naming who falls back to plain decoding;
# an error only for a runtime that refuses it (mlx-lm PR 990).
inspect qwen35_mlx_no_head_declared
check "declared missing: exit 0" [ "$RC" -eq 0 ]
check "declared missing: verdict" has_code qwen35_mlx_no_head_declared mtp_declared_missing
check "declared missing: info, mtplx-2.12 falls back" \
	[ "$(field qwen35_mlx_no_head_declared '.verdicts[]|select(.code=="mtp_declared_missing")|[.severity,(.runtimes|index("mtplx-2.12")!=null)]|map(tostring)|join(" ")')" = "info true" ]
inspect qwen35_mlx_no_head_declared --runtime mlx-lm-pr990
check "declared missing for mlx-lm-pr990: exit 1" [ "$RC" -eq 1 ]
check "declared missing for mlx-lm-pr990: its ValueError" \
	[ "$(field qwen35_mlx_no_head_declared '.runtimes[]|select(.runtime=="mlx-lm-pr990").load_error.reason|startswith("ValueError: Config specifies mtp_num_hidden_layers > 0")')" = true ]

# The +1 of a delta norm stored in 16 bits (issue 12): one verdict per set, with the worst effective-gain
# error as numpy computes it (check_shift16.py), and only for the runtimes that sum in 16 bits: mlx-lm keeps
# the BF16 dtype; llama.cpp casts BF16 to F32 before its +1 but sums an F16 norm in F16; ollama sums in F32.
shift16() { # shift16 DESC SOURCE REPORT EXPECT
	if out=$("$NUMPY_PY" "$here/check_shift16.py" "$2" "$3" "$4" 2>&1); then ok; else bad "$1: $out"; fi
}
NUMPY_PY=${NUMPY_PY:-/usr/bin/python3}
inspect qwen35_hf
shift16 "qwen35_hf (BF16): the trunk's rounding for mlx-lm-0.32 only" "$FIXTURES/qwen35_hf" "$TMP/qwen35_hf.json" \
	"trunk=mlx-lm-0.32"
inspect qwen35_hf --runtime llamacpp --runtime ollama
shift16 "qwen35_hf (BF16) for llamacpp and ollama: no 16-bit sum" "$FIXTURES/qwen35_hf" "$TMP/qwen35_hf.json" ""
inspect qwen35_hf --runtime mlx-lm-pr990
shift16 "qwen35_hf (BF16) for mlx-lm-pr990: the head's gains >= 2 lose a step (warning)" "$FIXTURES/qwen35_hf" \
	"$TMP/qwen35_hf.json" "trunk=mlx-lm-pr990;mtp=mlx-lm-pr990"
check "qwen35_hf for mlx-lm-pr990: the head's verdict is the warning" \
	[ "$(field qwen35_hf '.verdicts[]|select(.set=="mtp" and (.code|startswith("bf16_shift")))|.code+" "+.severity')" = \
	  "bf16_shift_precision_loss warning" ]
"$NUMPY_PY" "$here/check_shift16.py" to-f16 "$FIXTURES/qwen35_hf" "$TMP/qwen35_hf_f16"
RC=0
"$FORGED" inspect "$TMP/qwen35_hf_f16" --json >"$TMP/qwen35_hf_f16.json" 2>"$TMP/qwen35_hf_f16.err" || RC=$?
check "qwen35_hf with F16 norms: exit 0" [ "$RC" -eq 0 ]
shift16 "qwen35_hf with F16 norms: llamacpp sums them in F16 (trunk and head)" "$TMP/qwen35_hf_f16" \
	"$TMP/qwen35_hf_f16.json" "trunk=llamacpp,mlx-lm-0.32;mtp=llamacpp"

# Issue 10's cases, each from a fixture: the runtime, its outcome and the verdict.
inspect qwen35_mlx_conv1d_2d
check "2-D conv1d: mlx-lm-0.32 refuses" \
	[ "$(field qwen35_mlx_conv1d_2d '.runtimes[]|select(.runtime=="mlx-lm-0.32")|[.outcome,.load_error.cause]|join(" ")')" = "refused conv1d" ]
inspect qwen3_next_mlx_embedded
check "qwen3_next MLX + embedded head: mlx-lm-0.32 extra keys" \
	[ "$(field qwen3_next_mlx_embedded '.runtimes[]|select(.runtime=="mlx-lm-0.32").load_error.cause')" = extra_keys ]
inspect qwen35_mtp_model_type
check "qwen3_5_mtp: model_type_unsupported" has_code qwen35_mtp_model_type model_type_unsupported
inspect qwen35_mlx_sidecar_model_mtp
check "model.mtp.* sidecar: head_keys_not_loaded for mtplx-2.12" \
	[ "$(field qwen35_mlx_sidecar_model_mtp '.verdicts[]|select(.code=="head_keys_not_loaded").runtimes|join(",")')" = mtplx-2.12 ]
inspect qwen35_moe_mlx_fused_sidecar
check "fused MoE sidecar: head_experts_not_loaded" has_code qwen35_moe_mlx_fused_sidecar head_experts_not_loaded
inspect qwen35_mlx_qkless_delta_head
check "q/k-less delta head: mtplx-2.12 inverted" \
	[ "$(field qwen35_mlx_qkless_delta_head '.runtimes[]|select(.runtime=="mtplx-2.12").head')" = inverted ]
inspect qwen35_mlx_declared_delta
check "declared delta over absolute: mtplx-2.12 head_degraded" \
	[ "$(field qwen35_mlx_declared_delta '.runtimes[]|select(.runtime=="mtplx-2.12").breakage|join(",")')" = head_degraded ]
inspect qwen35_mlx_dup_stray
check "duplicates: order-dependent for mlx-lm" has_code qwen35_mlx_dup_stray duplicate_tensor_order_dependent
inspect qwen35_mlx_pruned_index --runtime ollama-mlx
check "pruned index for ollama-mlx: plain decoding, exit 0" [ "$RC" -eq 0 ]
check "pruned index for ollama-mlx: trunk ok, decode ar" \
	[ "$(field qwen35_mlx_pruned_index '.runtimes[]|select(.runtime=="ollama-mlx")|[.trunk,.decode,.outcome]|join(" ")')" = "ok ar degraded" ]
inspect qwen35_moe_mlx_embedded
check "qwen3_5_moe 306: mtplx-2.12 serves it broken (no guard)" \
	[ "$(field qwen35_moe_mlx_embedded '.runtimes[]|select(.runtime=="mtplx-2.12")|[.trunk,.outcome]|join(" ")')" = "double_shifted broken" ]

# Human output: five-second table.
"$FORGED" inspect "$FIXTURES/qwen35_mlx_embedded" >"$TMP/human.txt" 2>&1
check "human: NOT OK line" grep -q "NOT OK" "$TMP/human.txt"
check "human: runtime line" grep -q "mlx-lm-0.31 *double_shifted *dropped *broken" "$TMP/human.txt"
check "human: breakage column" grep -q "mlx-lm-0.31 .*mtp_keys *trunk_double_shifted" "$TMP/human.txt"

# Bad input: exit 2 with the file and the reason.
mkdir -p "$TMP/noconfig" && cp "$FIXTURES/glm45/model.safetensors" "$TMP/noconfig/"
rc=0; "$FORGED" inspect "$TMP/noconfig" >/dev/null 2>"$TMP/err" || rc=$?
check "no config.json: exit 2" [ "$rc" -eq 2 ]
check "no config.json: message" grep -q "no config.json" "$TMP/err"
cp -r "$FIXTURES/qwen35_hf" "$TMP/trunc"
shard=$TMP/trunc/model-00002-of-00002.safetensors
head -c 100 "$shard" >"$shard.part" && mv "$shard.part" "$shard"
rc=0; "$FORGED" inspect "$TMP/trunc" >/dev/null 2>"$TMP/err" || rc=$?
check "truncated shard: exit 2" [ "$rc" -eq 2 ]
check "truncated shard: names the shard" grep -q "model-00002-of-00002.safetensors" "$TMP/err"
rm "$shard"
rc=0; "$FORGED" inspect "$TMP/trunc" >/dev/null 2>"$TMP/err" || rc=$?
check "index names a missing file: exit 2" [ "$rc" -eq 2 ]
check "index names a missing file: message" grep -q "which is missing" "$TMP/err"
printf '{"model_type": "qwen3_5",' >"$TMP/trunc/config.json"
rc=0; "$FORGED" inspect "$TMP/trunc" >/dev/null 2>"$TMP/err" || rc=$?
check "malformed config: exit 2" [ "$rc" -eq 2 ]
check "malformed config: message" grep -q "config.json: invalid JSON" "$TMP/err"
rc=0; "$FORGED" inspect "$FIXTURES/glm45" --runtime vllm-9 >/dev/null 2>"$TMP/err" || rc=$?
check "unknown runtime: exit 2" [ "$rc" -eq 2 ]
check "unknown runtime: named, the runtimes listed" grep -q -- "--runtime 'vllm-9' is not a runtime: one of mlx-lm-0.31, .*, sglang, hf (an alias)" "$TMP/err"
rc=0; "$FORGED" inspect "$TMP/nothing-here" >/dev/null 2>&1 || rc=$?
check "missing source: exit 2" [ "$rc" -eq 2 ]
rc=0; "$FORGED" inspect "$here/../hostile/overlap.safetensors" >/dev/null 2>"$TMP/err" || rc=$?
check "hostile single file: exit 2" [ "$rc" -eq 2 ]

# forged's own state failing (here the pull cache cannot be made) is exit 3, not 2: the input was fine.
: >"$TMP/not_a_folder"
rc=0; FORGED_CACHE_DIR="$TMP/not_a_folder/cache" "$FORGED" inspect http://127.0.0.1:9/m/ >/dev/null 2>"$TMP/err" || rc=$?
check "a cache folder that cannot be made: exit 3 (got $rc)" [ "$rc" -eq 3 ]
check "a cache folder that cannot be made: named" grep -q "cache folder '$TMP/not_a_folder/cache" "$TMP/err"
# Libraries a local inspection does not need are not loaded (forge/core/lazylib.h): the
# dynamic loader's own log says which it initialised.
LD_DEBUG=libs "$FORGED" inspect "$FIXTURES/qwen35_mlx_embedded" --json >/dev/null 2>"$TMP/ld.txt" || true
check "local inspect: the loader ran" grep -q "calling init: .*libc.so" "$TMP/ld.txt"
check "local inspect: no libcurl, libmicrohttpd, libcrypto, GnuTLS or libpq loaded" \
	sh -c '! grep -qE "calling init: .*lib(curl|microhttpd|crypto|gnutls|pq)" "$0"' "$TMP/ld.txt"
LD_DEBUG=libs "$FORGED" version >"$TMP/version.txt" 2>"$TMP/ld.txt" || true
check "version: libcurl, libmicrohttpd and libcrypto loaded on first use" \
	sh -c 'grep -q "calling init: .*libcurl" "$0" && grep -q "calling init: .*libmicrohttpd" "$0" && grep -q "calling init: .*libcrypto" "$0"' "$TMP/ld.txt"
check "version: the loaded libraries report their versions" grep -qE "curl +[0-9]+[.][0-9]+" "$TMP/version.txt"
finish
