#!/usr/bin/env bash
# `forged forge` per family and per incident: the sidecar's values checked by
# numpy (check_forge.py), the artifact inspected for its target, refusals with
# their exit codes, and atomicity (a killed forge leaves nothing; a rerun works).
set -u
. "$(dirname "$0")/lib.sh"
here=$(dirname "$0")
NUMPY_PY=${NUMPY_PY:-/usr/bin/python3}

# forge NAME OUT [ARGS...]: exit code in $RC, JSON in $TMP/OUT.json
forge() {
	local name=$1 out=$2; shift 2
	RC=0
	"$FORGED" forge "$FIXTURES/$name" --out "$TMP/$out" --json "$@" >"$TMP/$out.json" 2>"$TMP/$out.err" || RC=$?
}
numpy_check() { # numpy_check DESC MODE SRC ART [HEAD_FILE]
	if out=$("$NUMPY_PY" "$here/check_forge.py" "$2" "$3" "$4" ${5:+"$5"} 2>&1); then ok; else bad "$1: $out"; fi
}
inspect_clean() { # inspect_clean DESC ART TARGET
	local rc=0
	"$FORGED" inspect "$2" --runtime "$3" --json >"$TMP/insp.json" 2>&1 || rc=$?
	check "$1: artifact inspects clean for $3 (exit $rc)" [ "$rc" -eq 0 ]
}

# Raw Hugging Face Qwen3.5: absolute F32 norms = 1 + offsets, exactly.
forge qwen35_hf hf_mtplx --target mtplx-2.12
check "raw HF -> mtplx: exit 0" [ "$RC" -eq 0 ]
check "raw HF -> mtplx: 7 shifted" [ "$(jq '.shifted_tensors|length' "$TMP/hf_mtplx.json")" = 7 ]
check "raw HF -> mtplx: ok" [ "$(jq .ok "$TMP/hf_mtplx.json")" = true ]
check "raw HF -> mtplx: fingerprint" [ "$(jq -r '.fingerprint|length' "$TMP/hf_mtplx.json")" = 64 ]
numpy_check "raw HF -> mtplx" shift "$FIXTURES/qwen35_hf" "$TMP/hf_mtplx"
inspect_clean "raw HF -> mtplx" "$TMP/hf_mtplx" mtplx-2.12
check "raw HF -> mtplx: sidecar set absolute" \
	[ "$(jq -r '.sets[]|select(.name=="mtp").convention' "$TMP/insp.json")" = absolute ]
check "raw HF -> mtplx: shard without head is hard-linked" \
	[ "$(stat -c %i "$TMP/hf_mtplx/model-00001-of-00002.safetensors")" = "$(stat -c %i "$FIXTURES/qwen35_hf/model-00001-of-00002.safetensors")" ]
check "raw HF -> mtplx: shard with head is rewritten" \
	[ "$(stat -c %i "$TMP/hf_mtplx/model-00002-of-00002.safetensors")" != "$(stat -c %i "$FIXTURES/qwen35_hf/model-00002-of-00002.safetensors")" ]
# A local source's originals are references: its file, the file's SHA-256, the tensor's offset and length.
rec=$(jq -c '.originals[0]' "$TMP/hf_mtplx/forged.json")
orig_file=$FIXTURES/qwen35_hf/$(jq -r '.source_file' <<<"$rec")
check "originals: a local source's are references" [ "$(jq -r '.form' <<<"$rec")" = reference ]
check "originals: the reference holds the source file's SHA-256" \
	[ "$(sha256sum "$orig_file" | cut -d' ' -f1)" = "$(jq -r '.file_sha256' <<<"$rec")" ]
check "originals: offset and length are the tensor's bytes in that file" [ "$("$PYTHON" - "$orig_file" "$rec" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
rec = json.loads(sys.argv[2])
n = struct.unpack("<Q", b[:8])[0]
t = json.loads(b[8:8 + n])[rec["tensor"]]
print(8 + n + t["data_offsets"][0] == rec["offset"] and t["data_offsets"][1] - t["data_offsets"][0] == rec["length"])
PY
)" = True ]
check "originals: nothing is copied for a local source" [ ! -e "$TMP/hf_mtplx/provenance" ]
# --keep-originals copy: zstd copies, each decompressing to the recorded bytes.
forge qwen35_hf hf_copy --target mtplx-2.12 --keep-originals copy
check "--keep-originals copy: exit 0" [ "$RC" -eq 0 ]
blob=$(jq -r '.originals[0].blob' "$TMP/hf_copy/forged.json")
want=$(jq -r '.originals[0].sha256' "$TMP/hf_copy/forged.json")
check "originals: zstd blob decompresses to the recorded bytes" \
	[ "$(zstd -dc "$TMP/hf_copy/$blob" | sha256sum | cut -d' ' -f1)" = "$want" ]
check "originals: the copy's record still names its source bytes" \
	[ "$(jq -r '.originals[0] | [.form, .offset, .length] | map(tostring) | join(" ")' "$TMP/hf_copy/forged.json")" = \
	  "copy $(jq -r '[.offset, .length] | map(tostring) | join(" ")' <<<"$rec")" ]
# forged verify-originals reads the bytes back: references against the source file, copies by decompressing.
quiet() { "$@" >/dev/null 2>&1; }
check "verify-originals: references check out (exit 0)" quiet "$FORGED" verify-originals "$TMP/hf_mtplx" --source "$FIXTURES/qwen35_hf"
check "verify-originals: copies check out (exit 0)" quiet "$FORGED" verify-originals "$TMP/hf_copy" --source "$FIXTURES/qwen35_hf"
check "verify-originals --json: every record checked" [ "$("$FORGED" verify-originals "$TMP/hf_mtplx" --json \
	--source "$FIXTURES/qwen35_hf" | jq -r '[.ok, .checked, .failed] | map(tostring) | join(" ")')" = "true 7 0" ]
# Records of two source files, interleaved: each is checked against its own file's header (the
# check keeps the last header open; record 1 names the other shard, which holds none of the head).
mkdir -p "$TMP/two_files" && cp -r "$TMP/hf_mtplx/." "$TMP/two_files/"
other=$(jq -r '.originals[0].source_file' "$TMP/hf_mtplx/forged.json" | sed 's/00002-of/00001-of/')
jq --arg f "$other" --arg h "$(sha256sum "$FIXTURES/qwen35_hf/$other" | cut -d' ' -f1)" \
	'.originals[1].source_file = $f | .originals[1].file_sha256 = $h' "$TMP/hf_mtplx/forged.json" \
	>"$TMP/two_files/forged.json"
rc=0; "$FORGED" verify-originals "$TMP/two_files" --json --source "$FIXTURES/qwen35_hf" >"$TMP/two_files.json" || rc=$?
check "verify-originals: a failed record is exit 1 ($rc)" [ "$rc" -eq 1 ]
check "verify-originals: the record naming the other shard fails, the rest pass" \
	[ "$(jq -r '[.originals[].ok] | map(tostring) | join(" ")' "$TMP/two_files.json")" = \
	  "true false true true true true true" ]
check "verify-originals: the failure says the other shard holds no such tensor" \
	jq -e --arg f "$other" '.originals[1].detail | contains($f) and contains("holds no tensor")' "$TMP/two_files.json"
cp -r "$FIXTURES/qwen35_hf" "$TMP/src_tamper"
forge qwen35_hf tamper_art --target mtplx-2.12 # from the fixture, checked against the copy below
"$PYTHON" - "$TMP/src_tamper/$(jq -r '.originals[0].source_file' "$TMP/tamper_art/forged.json")" \
	"$(jq -r '.originals[-1].offset' "$TMP/tamper_art/forged.json")" <<'PY'
import sys
path, off = sys.argv[1], int(sys.argv[2])
b = bytearray(open(path, "rb").read())
b[off] ^= 1
open(path, "wb").write(b)
PY
rc=0; "$FORGED" verify-originals "$TMP/tamper_art" --source "$TMP/src_tamper" >"$TMP/tamper.out" 2>&1 || rc=$?
check "verify-originals: a changed source byte fails (exit $rc)" [ "$rc" -eq 1 ]
check "verify-originals: the failure names the SHA-256" grep -q "FAIL.*SHA-256" "$TMP/tamper.out"
printf 'x' | dd of="$TMP/hf_copy/$(jq -r '.originals[0].blob' "$TMP/hf_copy/forged.json")" bs=1 seek=20 conv=notrunc 2>/dev/null
rc=0; "$FORGED" verify-originals "$TMP/hf_copy" --source "$FIXTURES/qwen35_hf" >/dev/null 2>&1 || rc=$?
check "verify-originals: a changed zstd copy fails (exit $rc)" [ "$rc" -eq 1 ]
rc=0; "$FORGED" verify-originals "$TMP/nothing_here" >/dev/null 2>&1 || rc=$?
check "verify-originals: no forged.json is exit 2 ($rc)" [ "$rc" -eq 2 ]
check "--keep-originals other: exit 2" [ "$("$FORGED" forge "$FIXTURES/qwen35_hf" --out "$TMP/ko" --keep-originals zip >/dev/null 2>&1; echo $?)" = 2 ]

# Raw HF kept delta for a Hugging Face target: nothing shifted.
forge qwen35_hf hf_hf --target hf
check "raw HF -> hf: exit 0" [ "$RC" -eq 0 ]
check "raw HF -> hf: no shift" [ "$(jq '.shifted_tensors|length' "$TMP/hf_hf.json")" = 0 ]
check "raw HF -> hf: delta encoding declared" [ "$(jq -r .mtp_norm_encoding "$TMP/hf_hf/config.json")" = delta ]

# Incident 1: an MLX artifact with embedded absolute head keys.
forge qwen35_mlx_embedded embedded
check "306 artifact: exit 0" [ "$RC" -eq 0 ]
check "306 artifact: 29 keys removed" [ "$(jq '.removed_from_backbone|length' "$TMP/embedded.json")" = 29 ]
numpy_check "306 artifact: norms untouched" same "$FIXTURES/qwen35_mlx_embedded" "$TMP/embedded"
inspect_clean "306 artifact" "$TMP/embedded" mlx-lm-0.31
inspect_clean "306 artifact" "$TMP/embedded" mtplx-2.12
forge qwen35_mlx_stray_shard stray
check "stray shard: exit 0" [ "$RC" -eq 0 ]
# The stray shard holds head keys only: not carried, and every one of its keys (read from its own
# header here) is reported as taken out of the backbone, in forge --json and in the provenance.
stray_keys=$("$PYTHON" -c 'import json, struct, sys
f = open(sys.argv[1], "rb"); n = struct.unpack("<Q", f.read(8))[0]
print(json.dumps(sorted(k for k in json.loads(f.read(n)) if k != "__metadata__"), separators=(",", ":")))' \
	"$FIXTURES/qwen35_mlx_stray_shard/model-extra.safetensors")
check "stray shard: its $(echo "$stray_keys" | jq length) keys are removed_from_backbone" \
	[ "$(jq -c '.removed_from_backbone | sort' "$TMP/stray.json")" = "$stray_keys" ]
check "stray shard: the shard has head keys to remove" [ "$(echo "$stray_keys" | jq length)" -gt 0 ]
check "stray shard: the provenance lists them too" \
	[ "$(jq -c '.removed_from_backbone | sort' "$TMP/stray/forged.json")" = "$stray_keys" ]
check "stray shard: the shard is not carried" [ ! -e "$TMP/stray/model-extra.safetensors" ]
inspect_clean "stray shard" "$TMP/stray" mlx-lm-0.31

# An absolute source is never shifted again.
forge qwen35_mlx_sidecar absolute
check "absolute source: exit 0" [ "$RC" -eq 0 ]
numpy_check "absolute source" same "$FIXTURES/qwen35_mlx_sidecar" "$TMP/absolute"

# Incident 3: a raw delta sidecar gets healed into an absolute one.
forge qwen35_mlx_raw_head rawhead
check "176 raw head: exit 0" [ "$RC" -eq 0 ]
check "176 raw head: shifted" [ "$(jq '.shifted_tensors|length' "$TMP/rawhead.json")" = 7 ]
inspect_clean "176 raw head" "$TMP/rawhead" mtplx-2.11

# Plain families: heads extracted, norms unchanged, source names kept.
for name in glm45 glm47_flash deepseek_v32 mimo mimo_v2; do
	forge "$name" "plain_$name" --target mtplx-2.12
	check "$name: exit 0 ($(head -c 200 "$TMP/plain_$name.err"))" [ "$RC" -eq 0 ]
	check "$name: nothing shifted" [ "$(jq '.shifted_tensors|length' "$TMP/plain_$name.json")" = 0 ]
	numpy_check "$name" same "$FIXTURES/$name" "$TMP/plain_$name"
done
# For hf (vllm) the head goes where vLLM's drafter reads it: its own shard in the index, names kept
# (vllm deepseek_mtp.py@03356f8cb59b _rewrite_spec_layer_name reads model.layers.{L+i}).
forge deepseek_v3_fp8 fp8 --target hf
check "deepseek fp8: exit 0 ($(head -c 200 "$TMP/fp8.err"))" [ "$RC" -eq 0 ]
numpy_check "deepseek fp8" fp8 "$FIXTURES/deepseek_v3_fp8" "$TMP/fp8" model-head.safetensors

# MoE heads: numbered, fused-linear and fused-bmm experts give identical stacks.  The trunk is an MLX
# backbone's: MTPLX loads it through mlx-lm, whose qwen3_5_moe sanitize unfuses only [E,2I,H] experts,
# so the HF numbered and bmm trunks themselves would not load (issue 10; qwen3_5_moe.py@d78bf58e217c:L23-52).
for layout in numbered fused_linear fused_bmm; do
	forge "qwen35_moe_hf_$layout" "moe_$layout" --target mtplx-2.12 --backbone "$FIXTURES/qwen35_moe_mlx_sidecar"
	check "moe $layout: exit 0 ($(head -c 200 "$TMP/moe_$layout.err"))" [ "$RC" -eq 0 ]
	numpy_check "moe $layout" experts "$FIXTURES/qwen35_moe_hf_numbered" "$TMP/moe_$layout"
done
check "moe: fused-linear sidecar equals numbered" cmp -s "$TMP/moe_numbered/mtp.safetensors" "$TMP/moe_fused_linear/mtp.safetensors"
check "moe: fused-bmm sidecar equals numbered" cmp -s "$TMP/moe_numbered/mtp.safetensors" "$TMP/moe_fused_bmm/mtp.safetensors"
# Without the backbone the artifact keeps the source's numbered trunk: the check refuses it for mtplx-2.12.
forge qwen35_moe_hf_numbered moe_no_backbone --target mtplx-2.12
check "moe numbered, no backbone: exit 1" [ "$RC" -eq 1 ]
check "moe numbered, no backbone: runtime_load_error" grep -q "runtime_load_error" "$TMP/moe_no_backbone.err"

# Quantization policies: bit-exact with numpy's MLX affine and mxfp4.
forge qwen35_hf quant_affine --quant affine:4:64
check "affine:4:64: exit 0 ($(head -c 200 "$TMP/quant_affine.err"))" [ "$RC" -eq 0 ]
numpy_check "affine:4:64" quant "$FIXTURES/qwen35_hf" "$TMP/quant_affine"
check "affine:4:64: fc never quantized" [ "$(jq '.mtp_quantization.modules["mtp.fc"]' "$TMP/quant_affine/config.json")" = null ]
inspect_clean "affine:4:64" "$TMP/quant_affine" mtplx-2.12
check "affine:4:64: mtplx-2.12 loads the 4/64 head it assumes (outcome ok, modelled)" \
	[ "$(jq -r '.runtimes[] | select(.runtime == "mtplx-2.12") | "\(.outcome) \(.modelled)"' "$TMP/insp.json")" = "ok true" ]
# (an MLX trunk as the backbone, as above: the numbered HF trunk itself would not load)
forge qwen35_moe_hf_numbered quant_stack --quant affine:4:64 --backbone "$FIXTURES/qwen35_moe_mlx_sidecar"
check "affine:4:64 of stacked experts: exit 0 ($(head -c 200 "$TMP/quant_stack.err"))" [ "$RC" -eq 0 ]
numpy_check "affine:4:64 of stacked experts (quantized in row bands across experts)" quant \
	"$FIXTURES/qwen35_moe_hf_numbered" "$TMP/quant_stack"
# MTPLX reads a quantized head over a config with no quantization block as affine 4/64
# (mtp_patch.py@0943c6cb _finalize_mtp_weights): an mxfp4 head (no biases) would go into float
# Linears as it is, so the default target refuses it, naming the format and a module.
forge qwen35_hf quant_mxfp4_mtplx --quant mxfp4
check "mxfp4 for mtplx-2.12 (no quantization block): exit 1 ($RC)" [ "$RC" -eq 1 ]
# (refused before anything is written: the forge asks the row what the written artifact's check would say)
check "mxfp4 for mtplx-2.12: the refusal says what the runtime assumes and what the head would be" \
	grep -q "refused: runtime_load_error: .*mtplx-2.12.*(format): .*affine bits=4 group=64; the head would be mxfp4 bits=4 group=32" \
	"$TMP/quant_mxfp4_mtplx.err"
check "mxfp4 for mtplx-2.12: nothing left at the output" [ ! -e "$TMP/quant_mxfp4_mtplx" ]
forge qwen35_hf quant_affine8 --quant affine:8:64
check "affine:8:64 for mtplx-2.12 (no quantization block): exit 1 ($RC)" [ "$RC" -eq 1 ]
check "affine:8:64 for mtplx-2.12: refused for the format it assumes" \
	grep -q "refused: runtime_load_error: .*(format): .*affine bits=4 group=64; the head would be affine bits=8 group=64" \
	"$TMP/quant_affine8.err"
# 4 bits of another group: read right on MTPLX's prequantized path (when the sidecar's keys are one
# of its expected sets, which forged does not check), so it is not refused.
forge qwen35_hf quant_affine432 --quant affine:4:32
check "affine:4:32 for mtplx-2.12: exit 0 ($RC)" [ "$RC" -eq 0 ]
# The bytes, for a target whose head loader's quantization forged does not model (docs/runtimes.md).
forge qwen35_hf quant_mxfp4 --quant mxfp4 --target lmstudio-mlx
check "mxfp4: exit 0 ($(head -c 200 "$TMP/quant_mxfp4.err"))" [ "$RC" -eq 0 ]
numpy_check "mxfp4" quant "$FIXTURES/qwen35_hf" "$TMP/quant_mxfp4"
# MTPLX takes a head's bits from a quantization block only: its own mtplx_mtp_quantization key
# (a norm declaration here) does not tell _finalize_mtp_weights the bits, so the mxfp4 head is
# still read as affine 4/64.
mkdir -p "$TMP/mx_declared" && cp -r "$TMP/quant_mxfp4/." "$TMP/mx_declared/"
jq '.mtplx_mtp_quantization = {"norm_encoding": "absolute"}' "$TMP/quant_mxfp4/config.json" >"$TMP/mx_declared/config.json"
"$FORGED" inspect "$TMP/mx_declared" --runtime mtplx-2.12 --json >"$TMP/mx_declared.json" 2>/dev/null || true
check "mxfp4 head, mtplx_mtp_quantization without bits: mtplx-2.12 still refuses it (format)" \
	[ "$(jq -r '.runtimes[] | select(.runtime == "mtplx-2.12") | .load_error.cause' "$TMP/mx_declared.json")" = format ]
# The written artifact's own check says the same as the forge's early refusal, naming a module.
"$FORGED" inspect "$TMP/quant_mxfp4" --runtime mtplx-2.12 --json >"$TMP/mx_art.json" 2>/dev/null || true
check "the mxfp4 artifact inspected for mtplx-2.12: format, 7 modules, one named" \
	jq -e '.runtimes[] | select(.runtime == "mtplx-2.12") | .load_error.cause == "format" and
		(.load_error.reason | test("7 head module\\(s\\) are otherwise \\(e.g. mtp.layers.0.self_attn.q_proj: mxfp4 bits=4 group=32\\)"))' \
	"$TMP/mx_art.json"
# With a quantization block (a 4-bit MLX backbone), an 8-bit head's own spec is in the block: read
# right on the prequantized path, so not refused.
forge qwen35_hf quant_bb8 --quant affine:8:64 --backbone "$FIXTURES/qwen35_mlx_q4"
check "affine:8:64 over a 4-bit MLX backbone: exit 0 ($RC)" [ "$RC" -eq 0 ]
forge qwen35_hf quant_match --quant match --backbone "$FIXTURES/qwen35_mlx_q4"
check "match: exit 0 ($(head -c 200 "$TMP/quant_match.err"))" [ "$RC" -eq 0 ]
numpy_check "match" quant "$FIXTURES/qwen35_hf" "$TMP/quant_match"
want=$(jq -c '.quantization | {bits, group_size}' "$FIXTURES/qwen35_mlx_q4/config.json")
check "match: q_proj quantized as the backbone's ($want)" \
	[ "$(jq -c '.mtp_quantization.modules["mtp.layers.0.self_attn.q_proj"] | {bits, group_size}' "$TMP/quant_match/config.json")" = "$want" ]
for shard in "$FIXTURES"/qwen35_mlx_q4/model*.safetensors; do
	check "match: backbone shard $(basename "$shard") hard-linked" \
		[ "$(stat -c %i "$shard")" = "$(stat -c %i "$TMP/quant_match/$(basename "$shard")")" ]
done
forge qwen35_hf quant_keep_bb --quant match --backbone "$FIXTURES/qwen35_mlx_sidecar"
check "match with an unquantized backbone: nothing quantized" \
	[ "$(jq '[.mtp_quantization.modules[] | select(. != null)] | length' "$TMP/quant_keep_bb/config.json")" = 0 ]

# A lone file under another name still gives a trunk mlx-lm's glob finds.
mkdir -p "$TMP/single"
cp "$FIXTURES/qwen35_hf_single/model.safetensors" "$TMP/single/qwen-tiny.safetensors"
cp "$FIXTURES/qwen35_hf_single/config.json" "$TMP/single/"
RC=0; "$FORGED" forge "$TMP/single/qwen-tiny.safetensors" --out "$TMP/single_art" --json >"$TMP/single.json" 2>"$TMP/single.err" || RC=$?
check "single file: exit 0 ($(head -c 200 "$TMP/single.err"))" [ "$RC" -eq 0 ]
check "single file: the trunk is model.safetensors" [ -f "$TMP/single_art/model.safetensors" ]
"$FORGED" inspect "$TMP/single_art" --runtime mtplx-2.12 --json >"$TMP/single_insp.json" 2>/dev/null
check "single file: the artifact's trunk set is not empty" \
	[ "$(jq '.sets[] | select(.name == "trunk") | .tensors' "$TMP/single_insp.json")" -gt 0 ]

# GLM without num_hidden_layers: the appended head is found from eh_proj/enorm/hnorm.
cp -r "$FIXTURES/glm45" "$TMP/glm_nol"
jq 'del(.num_hidden_layers)' "$FIXTURES/glm45/config.json" >"$TMP/glm_nol/config.json"
"$FORGED" inspect "$TMP/glm_nol" --json >"$TMP/glm_nol.json" 2>/dev/null
check "GLM without num_hidden_layers: head found as appended layers" \
	[ "$(jq -r '.mtp.scheme + " " + (.mtp.tensors | tostring)' "$TMP/glm_nol.json")" = \
	  "$(jq -r '.mtp.scheme + " " + (.mtp.tensors | tostring)' <("$FORGED" inspect "$FIXTURES/glm45" --json))" ]

# Numbered experts with expert 0 missing (renamed to 4 in the header, same length): refused.
mkdir -p "$TMP/hole"
cp "$FIXTURES/qwen35_moe_hf_numbered/"* "$TMP/hole/"
"$PYTHON" - "$TMP/hole" <<'PY'
import glob, json, struct, sys
d = sys.argv[1]
cfg = json.load(open(d + "/config.json"))
cfg.get("text_config", cfg).pop("num_experts", None)
json.dump(cfg, open(d + "/config.json", "w"))
for f in glob.glob(d + "/model-*.safetensors"):
    b = bytearray(open(f, "rb").read())
    n = struct.unpack("<Q", b[:8])[0]
    b[8:8 + n] = b[8:8 + n].replace(b"mtp.layers.0.mlp.experts.0.", b"mtp.layers.0.mlp.experts.4.")
    open(f, "wb").write(b)
idx = json.load(open(d + "/model.safetensors.index.json"))
idx["weight_map"] = {k.replace("mtp.layers.0.mlp.experts.0.", "mtp.layers.0.mlp.experts.4."): v
                     for k, v in idx["weight_map"].items()}
json.dump(idx, open(d + "/model.safetensors.index.json", "w"))
PY
RC=0; "$FORGED" forge "$TMP/hole" --out "$TMP/hole_art" >/dev/null 2>"$TMP/hole.err" || RC=$?
check "expert 0 missing: exit 1" [ "$RC" -eq 1 ]
check "expert 0 missing: expert_layout_ambiguous" grep -q expert_layout_ambiguous "$TMP/hole.err"
check "expert 0 missing: nothing written" [ ! -e "$TMP/hole_art" ]

# Long names are kept whole: fused experts under a 257-character module path
# (an expert block prefix past 192 characters, switch_mlp names past 256).
mkdir -p "$TMP/long"
cp "$FIXTURES/qwen35_moe_hf_fused_linear/"* "$TMP/long/"
long_mod="mtp.layers.0.mlp.$(printf 'm%.0s' $(seq 240))"
"$PYTHON" - "$TMP/long" "$long_mod" <<'PY'
import glob, json, struct, sys
d, mod = sys.argv[1], sys.argv[2]
old, new = "mtp.layers.0.mlp.experts.", mod + ".experts."
for f in glob.glob(d + "/model-*.safetensors"):
    b = open(f, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    h = {k.replace(old, new): v for k, v in h.items()}
    t = json.dumps(h, separators=(",", ":")).encode()
    t += b" " * (-len(t) % 8)
    open(f, "wb").write(struct.pack("<Q", len(t)) + t + b[8 + n:])
idx = json.load(open(d + "/model.safetensors.index.json"))
idx["weight_map"] = {k.replace(old, new): v for k, v in idx["weight_map"].items()}
json.dump(idx, open(d + "/model.safetensors.index.json", "w"))
PY
RC=0; "$FORGED" forge "$TMP/long" --out "$TMP/long_art" --json >"$TMP/long.json" 2>"$TMP/long.err" || RC=$?
check "long names: exit 0 ($(head -c 200 "$TMP/long.err"))" [ "$RC" -eq 0 ]
long_names=$("$PYTHON" - "$TMP/long_art/mtp.safetensors" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
print("\n".join(sorted(k for k in json.loads(b[8:8 + n]) if "switch_mlp" in k)))
PY
)
check "long names: the experts are restacked under their whole names" \
	[ "$long_names" = "$(printf '%s.switch_mlp.%s.weight\n' "$long_mod" down_proj "$long_mod" gate_proj "$long_mod" up_proj)" ]
check "long names: the relayouts name the whole source" \
	[ "$(jq -r '.relayouts[] | select(.op == "split") | .sources[0]' "$TMP/long_art/forged.json" | sort -u)" = \
	  "$long_mod.experts.gate_up_proj" ]

# Refusals: a verdict exits 1, bad input 2, and nothing is written either way.
forge qwen35_mlx_head_shifted refused1
check "301 head: exit 1" [ "$RC" -eq 1 ]
check "301 head: names head_double_shifted" grep -q head_double_shifted "$TMP/refused1.err"
check "301 head: nothing written" [ ! -e "$TMP/refused1" ]
# --json: the refusal is data (code, severity, detail), and the verdict list carries it.
check "301 head --json: refusal {code, severity, detail}" [ "$(jq -r '[.refusal.code, .refusal.severity,
	(.refusal.detail | startswith("head set")), .ok, .artifact] | map(tostring) | join(" ")' "$TMP/refused1.json")" = \
	"head_double_shifted error true false null" ]
check "301 head --json: verdicts[] holds the refusal" [ "$(jq -r '[.verdicts[] | .code + ":" + .severity] | join(",")' \
	"$TMP/refused1.json")" = "head_double_shifted:error" ]
check "ambiguous experts --json: refusal code" [ "$(jq -r '.refusal.code' <("$FORGED" forge \
	"$FIXTURES/qwen35_moe_hf_ambiguous" --out "$TMP/refused3b" --json 2>/dev/null))" = expert_layout_ambiguous ]
forge qwen35_mlx_mixed_head refused2
check "mixed head: exit 1, mixed_convention" [ "$RC" -eq 1 ]
check "mixed head: message" grep -q mixed_convention "$TMP/refused2.err"
forge qwen35_moe_hf_ambiguous refused3
check "ambiguous experts: exit 1" [ "$RC" -eq 1 ]
check "ambiguous experts: message" grep -q expert_layout_ambiguous "$TMP/refused3.err"
forge qwen35_mlx_no_head_declared refused4
check "no head: exit 2" [ "$RC" -eq 2 ]
check "no head: message" grep -q "no MTP head" "$TMP/refused4.err"
forge qwen35_hf refused5 --backbone "$FIXTURES/glm45"
check "backbone of another family: exit 2" [ "$RC" -eq 2 ]
check "backbone of another family: message" grep -q "family glm4_moe" "$TMP/refused5.err"
forge qwen35_hf hf_mtplx
check "existing out without --force: exit 2" [ "$RC" -eq 2 ]
check "existing out: message" grep -q "already exists" "$TMP/hf_mtplx.err"
forge qwen35_hf refused6 --quant affine:7:64
check "bad policy: exit 2" [ "$RC" -eq 2 ]
for n in 1 2 3 4 5 6; do check "refusal $n left nothing" [ ! -e "$TMP/refused$n" ]; done
check "no temporary folders left" [ -z "$(ls -A "$TMP" | grep forged-tmp)" ]

# --force replaces an artifact atomically.
forge qwen35_mlx_sidecar hf_mtplx --force
check "--force: exit 0" [ "$RC" -eq 0 ]
check "--force: new content" [ "$(jq '.decisions.shifted_tensors|length' "$TMP/hf_mtplx/forged.json")" = 0 ]

# Crash at any stage leaves nothing at the destination; a rerun succeeds.
for stage in backbone sidecar provenance check; do
	rc=0
	{ FORGED_FAULT_STAGE=$stage "$FORGED" forge "$FIXTURES/qwen35_hf" --out "$TMP/crash" >/dev/null 2>&1 || rc=$?; } 2>/dev/null
	check "kill -9 at $stage: killed (exit $rc)" [ "$rc" -eq 137 ]
	check "kill -9 at $stage: nothing at the destination" [ ! -e "$TMP/crash" ]
done
forge qwen35_hf crash
check "rerun after crashes: exit 0" [ "$RC" -eq 0 ]
check "rerun after crashes: stale temporaries cleaned" [ -z "$(ls -A "$TMP" | grep forged-tmp)" ]
numpy_check "rerun after crashes" shift "$FIXTURES/qwen35_hf" "$TMP/crash"
finish
