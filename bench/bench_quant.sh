#!/usr/bin/env bash
# bench_quant.sh [MiB]: forge/format/quant/ throughput against memcpy and numpy.
#
# Builds bench/bench_quant.c against build/libforge.a and runs it on MiB
# (default 1024) of BF16 weights and as many FP8 codes: affine 4-bit g64 and
# mxfp4 through the whole-tensor drivers forge uses, on 1 and on 2 threads,
# FP8 dequantization on 1, memcpy of the same bytes; the first run dumps its
# inputs to a temporary folder, and bench/quant_numpy_ref.py (affine and FP8
# in numpy, cross-checked against forged's output) runs on the first
# NUMPY_MIB (default 256) of them.  ROUNDS (default 3) rounds interleave the
# two processes (C, numpy, C, numpy, ...) so a change of load hits both; each
# C run itself interleaves memcpy, affine 1t, mxfp4 1t, affine 2t, mxfp4 2t,
# memcpy, fp8 three times, and checks that 2 threads write the bytes 1 thread
# does and the vector kernels those of the scalar reference paths.  Wall and
# CPU time (CPU: all threads of the process) are reported in ms per GiB of
# input, best and median; the ratios are forged over numpy, forged over
# memcpy, mxfp4 over affine at each thread count and 2 threads over 1 (time
# ratios, so mxfp4's GB/s over affine's is the inverse: the summary prints
# that).  The numpy side runs under BENCH_PYTHON (default /usr/bin/python3,
# Debian's, with python3-numpy; see bench/lib.sh).  Needs about 4.5 GiB of
# RAM plus 1.5 GiB of temporary disk for MiB=1024.
#
#   bench/bench_quant.sh            # 1 GiB
#   NUMPY_MIB=1024 bench/bench_quant.sh 1024
#   BENCH_QUICK=1 bench/bench_quant.sh    # 64 MiB, 64 MiB of numpy, 2 rounds
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
mib=${1:-$(quick 1024 64)}
numpy_mib=${NUMPY_MIB:-$(quick 256 64)}
rounds=${ROUNDS:-$(quick 3 2)}
python=$BENCH_PYTHON

make -s build/libforge.a
mkdir -p build/bench
cc -std=c11 -D_GNU_SOURCE -O2 -I. bench/bench_quant.c build/libforge.a -lcjson -lm -lpthread \
	-o build/bench/bench_quant

dir=$(mktemp -d "${TMPDIR:-/tmp}/bench_quant.XXXXXX")
trap 'rm -rf "$dir"' EXIT

bench_init quant mib="$mib" numpy_mib="$numpy_mib" rounds="$rounds"
for r in $(seq "$rounds"); do
	echo "== round $r of $rounds: forged (C), then numpy"
	dump=()
	[ "$r" = 1 ] && dump=(--dump "$dir")
	./build/bench/bench_quant "$mib" "${dump[@]}" | tee "$dir/c.$r.txt" | grep -v '^sample \|^name \|^unit \|^extra '
	echo
	OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$python" bench/quant_numpy_ref.py "$dir" --mib "$numpy_mib" |
		tee "$dir/numpy.$r.txt" | grep -v '^sample \|^name \|^unit \|^extra '
	echo
done
cat "$dir"/c.*.txt "$dir"/numpy.*.txt | bl samples "$FRAG"
# GB/s beside the time ratios of the thread and format cases, from the same
# samples (every round): GB/s = 2^30 bytes / (ms per GiB) / 1e6, and
# gbs_ratio = forged GB/s / reference GB/s (mxfp4 / affine; 2 threads / 1).
jq 'def gbs(ms): if ms and ms > 0 then 1073.741824 / ms * 1e4 | round / 1e4 else null end;
	def over(a; b): if a and b and b > 0 then a / b * 1e4 | round / 1e4 else null end;
	reduce ("mxfp4_vs_affine_1t", "mxfp4_vs_affine_2t", "affine_2t_vs_1t", "mxfp4_2t_vs_1t") as $c (.;
		.cases[$c] as $x | .cases[$c].extra += {
			forged_gbs_best: gbs($x.forged.wall.best), forged_gbs_median: gbs($x.forged.wall.median),
			reference_gbs_best: gbs($x.reference.wall.best), reference_gbs_median: gbs($x.reference.wall.median),
			gbs_ratio_best: over($x.reference.wall.best; $x.forged.wall.best),
			gbs_ratio_median: over($x.reference.wall.median; $x.forged.wall.median)})' "$FRAG" >"$FRAG.tmp"
mv "$FRAG.tmp" "$FRAG"

# get KEY: the best of the rounds' "result KEY" values (GB/s: higher is better)
get() { cat "$dir"/c.*.txt "$dir"/numpy.*.txt | sed -n "s/^result $1 //p" | sort -g | tail -n 1; }
echo
awk -v aff="$(get affine_gbs)" -v fp8="$(get fp8_gbs)" -v cp="$(get memcpy_bf16_gbs)" \
	-v cp8="$(get memcpy_fp8_gbs)" -v naff="$(get numpy_affine_gbs)" -v nfp8="$(get numpy_fp8_gbs)" \
	-v mx="$(get mxfp4_gbs)" -v aff2="$(get affine_2t_gbs)" -v mx2="$(get mxfp4_2t_gbs)" \
	-v py="$python" -v n="$rounds" \
	'BEGIN {
		printf "summary (GB/s of input, best of %d rounds; numpy under %s, one thread)\n", n, py;
		printf "  affine 4-bit g64 BF16: forged %.2f = %.2fx memcpy, %.1fx numpy (%.3f); 2 threads %.2f (%.2fx 1 thread)\n", aff, aff / cp, aff / naff, naff, aff2, aff2 / aff;
		printf "  mxfp4 BF16:            forged %.2f = %.2fx memcpy, %.2fx affine; 2 threads %.2f (%.2fx 1 thread) = %.2fx affine\n", mx, mx / cp, mx / aff, mx2, mx2 / mx, mx2 / aff2;
		printf "  fp8 -> BF16:           forged %.2f = %.2fx memcpy, %.1fx numpy (%.3f)\n", fp8, fp8 / cp8, fp8 / nfp8, nfp8;
	}'
if [ "$(cat "$dir"/numpy.*.txt | sed -n 's/^result numpy_matches //p' | sort -u)" != 1 ]; then
	echo "bench_quant: numpy and forged disagree" >&2
	exit 1
fi
bench_ok
