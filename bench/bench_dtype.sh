#!/usr/bin/env bash
# bench_dtype.sh [MiB]: forge/format/dtype bulk conversions, the dispatched
# (vectorized) path against the scalar reference path, interleaved, wall and
# CPU time (bench/bench_dtype.c).  MiB of F32 per conversion: 64, or 4 under
# BENCH_QUICK=1.  Figures are reported, never asserted.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
mib=${1:-$(quick 64 4)}
make -s build/libforge.a
mkdir -p build/bench
cc -std=c11 -D_GNU_SOURCE -O2 -I. bench/bench_dtype.c build/libforge.a -lm -lpthread -o build/bench/bench_dtype
bench_init dtype mib="$mib"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
./build/bench/bench_dtype "$mib" | tee "$out" | grep -v '^sample \|^name \|^unit \|^extra '
bl samples "$FRAG" <"$out"
bench_ok
