#!/usr/bin/env bash
# bench/forge/run.sh: `forged forge` wall and CPU time and peak RSS on a 1.6 GB
# BF16 MoE head (bench/forge/gen_big_head.py), for the keep, affine:4:64
# (originals as references to the source), affine:4:64 --keep-originals copy
# (zstd copies) and mxfp4 policies, beside a plain `cp` of the head's shard in
# the same run (the I/O floor) and `cp` + `sync` of the copy (forged fsyncs
# what it writes; cp does not), warm and cold: cases NAME_TEMP against cp and
# NAME_TEMP_vs_cp_sync against cp + sync.  Quantization and FP8 throughput per
# core against memcpy and numpy: bench/bench_quant.sh.  Figures are reported,
# never asserted.
#
# Rounds interleave the commands (cp, cp+sync, keep, affine, affine_copy,
# mxfp4, cp, ...),
# REPS rounds after a first one reported apart, best and median of each; wall
# and CPU (user + sys) from bench/measure.py.  Before every run all outputs
# are deleted (their dirty pages go with them), so no run pays for the
# previous one's writeback.
#   warm  the source's pages are in the page cache (read once beforehand);
#   cold  before every run the source's files are evicted from the page cache
#         with posix_fadvise(POSIX_FADV_DONTNEED) (bench/evict.c: no root
#         needed; it prints how much was resident before and after), so each
#         run reads the source from storage: read_bytes in the results says
#         how much the block layer really read (on a VM the host may still
#         cache the disk).
#
#   bash bench/forge/run.sh
#   env: REPS=3 FORGED=build/forged BENCH_DIR=build/bench EXPERTS=256
#        POLICIES="keep affine:4:64 affine:4:64+copy mxfp4" (+copy: --keep-originals copy;
#        a subset to iterate on one), TEMPS="warm cold"
#        BENCH_QUICK=1: a 4-expert head (~70 MB), REPS=1
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
FORGED=${FORGED:-build/forged}
REPS=${REPS:-$(quick 3 1)}
EXPERTS=${EXPERTS:-$(quick 256 4)}
DIR=$BENCH_DIR/forge
SRC=$DIR/big_head-$EXPERTS
mkdir -p "$DIR" build/bench
[ -f "$SRC/config.json" ] || "$BENCH_PYTHON" bench/forge/gen_big_head.py "$SRC" --experts "$EXPERTS"
cc -std=c11 -D_GNU_SOURCE -O2 bench/evict.c -o build/bench/evict
shard=$SRC/model-00002-of-00002.safetensors
bytes=$(stat -c %s "$shard")
src_bytes=$(du -cb "$SRC"/* | tail -n 1 | cut -f1)
COPY=$DIR/copy.safetensors
OUT=$DIR/out
trap 'rm -rf "$OUT" "$COPY"' EXIT

bench_init forge head_bytes="$bytes" source_bytes="$src_bytes" experts="$EXPERTS" reps="$REPS"
echo "head shard: $(echo "$bytes / 1000000000" | bc -l | cut -c1-5) GB; source folder $(echo "$src_bytes / 1000000000" | bc -l | cut -c1-5) GB"
clean="rm -rf '$OUT' '$COPY'"
evict="build/bench/evict '$SRC'/* >&2"
cmds=(-- cp cp "$shard" "$COPY"
	::: cp_sync sh -c 'cp "$1" "$2" && sync "$2" "$(dirname "$2")"' sh "$shard" "$COPY")
labels=(--label cp="cp SHARD COPY" --label cp_sync="cp SHARD COPY && sync COPY DIR")
POLICIES=${POLICIES:-keep affine:4:64 affine:4:64+copy mxfp4}
TEMPS=${TEMPS:-warm cold}
names=()
for policy in $POLICIES; do
	n=${policy%%:*}
	extra=()
	case $policy in *+copy) # the originals as zstd copies (on both cores) instead of references
		policy=${policy%+copy}
		n=${n}_copy
		extra=(--keep-originals copy)
		;;
	esac
	# MTPLX (the default target) reads a quantized head over this BF16 trunk as affine 4/64 and
	# refuses the rest (docs/runtimes.md): other formats are forged for lmstudio-mlx
	case $policy in affine:4:64 | keep) ;; *) extra+=(--target lmstudio-mlx) ;; esac
	names+=("$n")
	cmds+=(::: "$n" "$FORGED" forge "$SRC" --out "$OUT" --quant "$policy" "${extra[@]}")
	labels+=(--label "$n=forged forge SRC --out OUT --quant $policy${extra[*]:+ ${extra[*]}}")
done

for temp in $TEMPS; do
	pre=()
	for n in cp cp_sync "${names[@]}"; do
		if [ $temp = warm ]; then pre+=(--pre "$n=$clean"); else pre+=(--pre "$n=$clean; $evict"); fi
	done
	cases=()
	for n in "${names[@]}"; do cases+=(--case "${n}_$temp=$n/cp" --case "${n}_${temp}_vs_cp_sync=$n/cp_sync"); done
	echo "== $temp: $((REPS + 1)) rounds of cp, cp+sync, forge $POLICIES"
	[ $temp = warm ] && cat "$SRC"/* >/dev/null # warm the page cache for every run alike
	bl abrun "$FRAG" --reps "$REPS" --first --raw "$DIR/runs_$temp.json" "${pre[@]}" "${labels[@]}" \
		"${cases[@]}" "${cmds[@]}" 2>&1 | grep -v '^evict: ' || { echo "forge bench: a run failed" >&2; exit 1; }
	[ $temp = cold ] && build/bench/evict "$SRC"/* # the last eviction's report, as a sample
	jq -r --argjson b "$bytes" '.commands | to_entries[] | .key as $k | .value.runs as $r |
		($r | map(.wall_ms) | sort) as $w | ($r | map(.cpu_ms) | sort) as $c |
		"  \($k | . + "         " | .[0:8]) wall best \($w[0] / 1000 | . * 100 | round / 100) s, median \($w[($w | length) / 2 | floor] / 1000 | . * 100 | round / 100) s" +
		"   cpu best \($c[0] / 1000 | . * 100 | round / 100) s   \($b / $w[0] * 1000 / 1e9 | . * 100 | round / 100) GB/s of head" +
		"   peak RSS \([$r[].maxrss_kib] | max / 1024 | round) MiB   read from storage \([$r[].read_bytes] | max / 1048576 | round) MiB"' \
		"$DIR/runs_$temp.json"
done
for n in "${names[@]}"; do
	for temp in $TEMPS; do
		for c in "${n}_$temp" "${n}_${temp}_vs_cp_sync"; do
			bl set "$FRAG" "cases.$c.extra" temperature="\"$temp\"" head_bytes="$bytes"
		done
	done
done
bench_ok
