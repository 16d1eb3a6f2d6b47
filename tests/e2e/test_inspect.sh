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
check "306: hazard names mlx-lm-0.31, mtplx-2.12, ollama" \
	[ "$(field qwen35_mlx_embedded '[.verdicts[]|select(.code=="embedded_mtp_shift_hazard").runtimes[]]|map(select(.=="mlx-lm-0.31" or .=="mtplx-2.12" or .=="ollama"))|length')" = 3 ]
check "306: mlx-lm-0.31 double-shifts the trunk" \
	[ "$(field qwen35_mlx_embedded '.runtimes[]|select(.runtime=="mlx-lm-0.31")|[.trunk_shift,.trunk,.head,.outcome]|join(" ")')" = "true double_shifted dropped broken" ]
check "306: probe 1.79 becomes 2.79" \
	[ "$(field qwen35_mlx_embedded '.runtimes[]|select(.runtime=="mlx-lm-0.31").trunk_probe_after|.*100|floor')" = 279 ]
check "306: mlx-lm-0.32 is fine" \
	[ "$(field qwen35_mlx_embedded '.runtimes[]|select(.runtime=="mlx-lm-0.32")|[.trunk,.outcome]|join(" ")')" = "ok ok" ]
check "306: mtplx-2.12 refuses" \
	[ "$(field qwen35_mlx_embedded '.runtimes[]|select(.runtime=="mtplx-2.12").outcome')" = refused ]
check "306: every runtime listed" [ "$(field qwen35_mlx_embedded '.runtimes|length')" = 7 ]
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
inspect qwen35_moe_mlx_raw_head --runtime mtplx-2.11
check "176 MoE for mtplx-2.11 (no heal): exit 1" [ "$RC" -eq 1 ]
check "176 MoE for mtplx-2.11: head_convention_mismatch" has_code qwen35_moe_mlx_raw_head head_convention_mismatch
check "176 MoE for mtplx-2.11: head inverted" \
	[ "$(field qwen35_moe_mlx_raw_head '.runtimes[]|select(.runtime=="mtplx-2.11").head')" = inverted ]
inspect qwen35_mlx_raw_head --runtime mtplx-2.11
check "176 dense for mtplx-2.11 (healed since 2.2): exit 0" [ "$RC" -eq 0 ]

# Raw Hugging Face source: delta everywhere, loads right in its own runtimes.
inspect qwen35_hf
check "raw HF: exit 0" [ "$RC" -eq 0 ]
check "raw HF: hf loads trunk and head ok" \
	[ "$(field qwen35_hf '.runtimes[]|select(.runtime=="hf")|[.trunk,.head,.outcome]|join(" ")')" = "ok ok ok" ]
check "raw HF: mlx-lm-0.32 shifts for the raw conv1d" \
	[ "$(field qwen35_hf '.runtimes[]|select(.runtime=="mlx-lm-0.32")|[.trunk_shift,.shift_reason,.trunk]|map(tostring)|join(" ")')" = "true raw_conv1d ok" ]
inspect qwen35_hf --runtime mtplx-2.12
check "raw HF for mtplx-2.12 (no sidecar): no error" [ "$RC" -eq 0 ]
check "raw HF for mtplx-2.12 (no sidecar): head absent, degraded" \
	[ "$(field qwen35_hf '.runtimes[]|select(.runtime=="mtplx-2.12")|[.head,.outcome]|join(" ")')" = "absent degraded" ]

# Plain-norm families never shift and never get shift verdicts.
for name in glm45 glm47_flash deepseek_v3_fp8 deepseek_v32 mimo mimo_v2; do
	inspect "$name"
	check "$name: exit 0" [ "$RC" -eq 0 ]
	check "$name: plain sets" [ "$(field "$name" '[.sets[].convention]|unique|join(",")')" = plain ]
	check "$name: no runtime shifts" [ "$(field "$name" '[.runtimes[]|select(.trunk_shift or .head_shift)]|length')" = 0 ]
done
check "mimo head is mtp_layers" [ "$(field mimo .mtp.scheme)" = mtp_layers ]
check "glm head is appended" [ "$(field glm45 .mtp.scheme)" = appended_layers ]

# A declared head with no tensors.
inspect qwen35_mlx_no_head_declared
check "declared missing: exit 1" [ "$RC" -eq 1 ]
check "declared missing: verdict" has_code qwen35_mlx_no_head_declared mtp_declared_missing

# Human output: five-second table.
"$FORGED" inspect "$FIXTURES/qwen35_mlx_embedded" >"$TMP/human.txt" 2>&1
check "human: NOT OK line" grep -q "NOT OK" "$TMP/human.txt"
check "human: runtime line" grep -q "mlx-lm-0.31 *double_shifted *dropped *broken" "$TMP/human.txt"

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
check "unknown runtime: named" grep -q "unknown runtime 'vllm-9'" "$TMP/err"
rc=0; "$FORGED" inspect "$TMP/nothing-here" >/dev/null 2>&1 || rc=$?
check "missing source: exit 2" [ "$rc" -eq 2 ]
rc=0; "$FORGED" inspect "$here/../hostile/overlap.safetensors" >/dev/null 2>"$TMP/err" || rc=$?
check "hostile single file: exit 2" [ "$rc" -eq 2 ]

# forged's own state failing (here the pull cache cannot be made) is exit 3, not 2: the input was fine.
: >"$TMP/not_a_folder"
rc=0; FORGED_CACHE_DIR="$TMP/not_a_folder/cache" "$FORGED" inspect http://127.0.0.1:9/m/ >/dev/null 2>"$TMP/err" || rc=$?
check "a cache folder that cannot be made: exit 3 (got $rc)" [ "$rc" -eq 3 ]
check "a cache folder that cannot be made: named" grep -q "cache folder '$TMP/not_a_folder/cache" "$TMP/err"
finish
