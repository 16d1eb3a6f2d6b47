#!/usr/bin/env bash
# bench_quant.sh [MiB]: forge/format/quant/ throughput against memcpy and numpy.
#
# Builds bench/bench_quant.c against build/libforge.a, runs it (affine and
# mxfp4 on 1 and 2 threads, FP8 on one) on MiB (default 1024) of BF16
# weights and as many FP8 codes, dumps the
# inputs to a temporary folder, runs bench/quant_numpy_ref.py (the same
# algorithms in numpy, cross-checked against forged's output) on the first
# NUMPY_MIB (default 256) of them, and prints the ratios.  Needs
# /usr/bin/python3 with numpy (Debian python3-numpy) and about 4 GiB of RAM
# plus 1.5 GiB of temporary disk for MiB=1024.
#
#   bench/bench_quant.sh            # 1 GiB
#   NUMPY_MIB=1024 bench/bench_quant.sh 1024
set -euo pipefail
cd "$(dirname "$0")/.."
mib=${1:-1024}
numpy_mib=${NUMPY_MIB:-256}
python=${QUANT_PYTHON:-/usr/bin/python3}

make -s build/libforge.a
cc -std=c11 -D_GNU_SOURCE -O2 -I. bench/bench_quant.c build/libforge.a -lcjson -lm -lpthread \
	-o build/bench_quant

dir=$(mktemp -d "${TMPDIR:-/tmp}/bench_quant.XXXXXX")
trap 'rm -rf "$dir"' EXIT

./build/bench_quant "$mib" --dump "$dir" | tee "$dir/c.txt"
echo
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$python" bench/quant_numpy_ref.py "$dir" --mib "$numpy_mib" |
	tee "$dir/numpy.txt"

get() { sed -n "s/^result $1 //p" "$dir/c.txt" "$dir/numpy.txt"; }
echo
awk -v aff="$(get affine_gbs)" -v fp8="$(get fp8_gbs)" -v cp="$(get memcpy_bf16_gbs)" \
	-v cp8="$(get memcpy_fp8_gbs)" -v naff="$(get numpy_affine_gbs)" -v nfp8="$(get numpy_fp8_gbs)" \
	-v mx="$(get mxfp4_gbs)" -v aff2="$(get affine_2t_gbs)" -v mx2="$(get mxfp4_2t_gbs)" \
	'BEGIN {
		printf "summary (GB/s of input, one core; numpy single-threaded)\n";
		printf "  affine 4-bit g64 BF16: forged %.2f = %.2fx memcpy, %.1fx numpy (%.3f); 2 threads %.2f\n", aff, aff / cp, aff / naff, naff, aff2;
		printf "  mxfp4 BF16:            forged %.2f = %.2fx memcpy, %.2fx affine; 2 threads %.2f = %.2fx affine\n", mx, mx / cp, mx / aff, mx2, mx2 / aff2;
		printf "  fp8 -> BF16:           forged %.2f = %.2fx memcpy, %.1fx numpy (%.3f)\n", fp8, fp8 / cp8, fp8 / nfp8, nfp8;
	}'
[ "$(get numpy_matches)" = 1 ] || { echo "bench_quant: numpy and forged disagree" >&2; exit 1; }
