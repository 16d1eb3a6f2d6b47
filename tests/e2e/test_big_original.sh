#!/usr/bin/env bash
# A compressed original larger than one write(2) can move (Linux stops at
# 0x7ffff000 bytes a call): `--quant --keep-originals copy` (a local source's
# originals are otherwise references) on a head whose fused gate_up_proj is
# 2.2 GiB of incompressible BF16 keeps that tensor as a zstd original, which
# must be written whole and decompress to the SHA-256 forged.json records.
# (The writer once compressed into one buffer and wrote it with a single
# write(): this forge failed with "cannot write: Success".)
#
# Disk: the source shard (2.2 GiB; down_proj is a hole), the original
# (2.2 GiB) and the 4-bit sidecar (~1 GiB), about 5.7 GB at the peak; the
# test is skipped, and says so, with less than 7 GB free.
set -u
. "$(dirname "$0")/lib.sh"
here=$(dirname "$0")
NUMPY_PY=${NUMPY_PY:-/usr/bin/python3}
INTER=2310144   # gate_up [4, 2*INTER, 64] BF16 = 2,365,587,456 bytes, over 2.2 GiB

free_kb=$(df -Pk "$TMP" | awk 'NR == 2 { print $4 }')
if [ "${free_kb:-0}" -lt $((7 * 1024 * 1024)) ]; then
	echo "test_big_original: skipped: $((free_kb / 1024)) MB free in $TMP, 7000 MB needed" >&2
	finish
	exit
fi

src=$TMP/big_src
read -r bytes want < <("$NUMPY_PY" "$here/big_experts.py" "$FIXTURES/qwen35_moe_hf_fused_linear" "$src" "$INTER")
check "generator: gate_up over 2.2 GiB ($bytes bytes)" [ "${bytes:-0}" -gt 2362232012 ]

rc=0
"$FORGED" forge "$src" --out "$TMP/big_art" --quant affine:4:64 --keep-originals copy --json >"$TMP/big.json" \
	2>"$TMP/big.err" || rc=$?
check "forge --quant affine:4:64 of a 2.2 GiB fused expert: exit 0 (exit $rc: $(head -c 300 "$TMP/big.err"))" \
	[ "$rc" -eq 0 ]
rm -rf "$src"   # the source's disk is not needed to check the artifact

prov=$TMP/big_art/forged.json
rec=$(jq -c '.originals[] | select(.tensor | endswith("experts.gate_up_proj"))' "$prov" 2>/dev/null)
check "the fused gate_up is kept as an original" [ -n "$rec" ]
blob=$(jq -r '.blob' <<<"$rec" 2>/dev/null)
check "its record has the tensor's size" [ "$(jq -r '.bytes' <<<"$rec" 2>/dev/null)" = "$bytes" ]
check "the compressed original is larger than one write(2) moves ($(stat -c %s "$TMP/big_art/$blob" 2>/dev/null) bytes)" \
	[ "$(stat -c %s "$TMP/big_art/$blob" 2>/dev/null || echo 0)" -gt 2147479552 ]
check "forged.json hashes the blob as it is on disk" \
	[ "$(sha256sum "$TMP/big_art/$blob" 2>/dev/null | cut -d' ' -f1)" = "$(jq -r --arg b "$blob" '.files[$b]' "$prov" 2>/dev/null)" ]
check "the recorded SHA-256 is the generated tensor's" [ "$(jq -r '.sha256' <<<"$rec" 2>/dev/null)" = "$want" ]
check "zstd -d gives back the recorded SHA-256" \
	[ "$(zstd -dc "$TMP/big_art/$blob" 2>/dev/null | sha256sum | cut -d' ' -f1)" = "$want" ]
rm -rf "$TMP/big_art"
finish
