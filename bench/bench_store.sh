#!/usr/bin/env bash
# bench_store.sh [ARTIFACTS]: the store under a realistic catalog
# (bench/bench_store.c: 100,000 artifacts, or 1,000 under BENCH_QUICK=1):
# fleet health, counts, listings, verification_put and job enqueue + claim,
# wall and CPU per call; verification_put against a bare fsync'd SQLite
# commit, and fleet health / verification_put under load against idle, both
# interleaved.  Figures are reported, never asserted.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
n=${1:-$(quick 100000 1000)}
make -s build/libstore.a build/libforge.a
mkdir -p build/bench
cc -std=c11 -D_GNU_SOURCE -O2 -I. bench/bench_store.c build/libstore.a build/libforge.a \
	-lsqlite3 -lpq -lcjson -lzstd -lcrypto -lm -lpthread -o build/bench/bench_store
bench_init store artifacts="$n"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
./build/bench/bench_store "$n" | tee "$out" | grep -v '^sample \|^name \|^unit \|^extra '
bl samples "$FRAG" <"$out" >/dev/null 2>&1
bench_ok
