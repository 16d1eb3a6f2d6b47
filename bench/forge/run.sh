#!/usr/bin/env bash
# bench/forge/run.sh: total `forged forge` wall time and peak RSS on a 1.6 GB
# BF16 MoE head (bench/forge/gen_big_head.py), for the keep, affine:4:64 and
# mxfp4 policies, beside a plain `cp` of the head's shard in the same run (the
# I/O floor).  Quantization and FP8 throughput per core against memcpy and
# numpy: bench/bench_quant.sh.  Figures are reported, never asserted.
set -euo pipefail
cd "$(dirname "$0")/../.."
FORGED=${FORGED:-build/forged}
DIR=${BENCH_DIR:-build/bench/forge}
SRC=$DIR/big_head
mkdir -p "$DIR"
[ -f "$SRC/config.json" ] || /usr/bin/python3 bench/forge/gen_big_head.py "$SRC"
shard=$SRC/model-00002-of-00002.safetensors
bytes=$(stat -c %s "$shard")

measure() { # measure LABEL CMD...: prints wall seconds and peak RSS (KiB)
	local label=$1; shift
	/usr/bin/time -f "%e %M" -o "$DIR/time.txt" "$@" >/dev/null 2>"$DIR/err.txt" || { cat "$DIR/err.txt"; exit 1; }
	read -r wall rss <"$DIR/time.txt"
	printf '%-26s wall %6.2f s   peak RSS %7.1f MiB   %5.2f GB/s of head\n' "$label" "$wall" \
		"$(echo "$rss / 1024" | bc -l)" "$(echo "$bytes / $wall / 1000000000" | bc -l)"
}

echo "head shard: $(echo "$bytes / 1000000000" | bc -l | cut -c1-5) GB"
cat "$shard" >/dev/null # warm the page cache for every run alike
measure "cp (I/O floor)" cp "$shard" "$DIR/copy.safetensors"
rm -f "$DIR/copy.safetensors"
for policy in keep affine:4:64 mxfp4; do
	rm -rf "$DIR/out"
	measure "forge --quant $policy" "$FORGED" forge "$SRC" --out "$DIR/out" --quant "$policy"
done
rm -rf "$DIR/out"
