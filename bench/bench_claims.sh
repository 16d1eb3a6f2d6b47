#!/usr/bin/env bash
# bench_claims.sh [JOBS]: claims/s of 1 and 3 instances (processes, 2
# claiming threads each, as `forged serve --workers 2`) draining one queue
# of JOBS (default 3000; 600 under BENCH_QUICK=1) jobs: on SQLite (a file)
# and on PostgreSQL (a throwaway cluster, tests/pg_cluster.sh, unless
# FORGED_TEST_PG names one).  Each claim is followed by its finish, each a
# durable commit through the instance's writer.  Figures, never asserted;
# bench_claims itself checks every job was claimed exactly once.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
n=${1:-$(quick 3000 600)}
make -s build/libstore.a build/libforge.a
mkdir -p build/bench
cc -std=c11 -D_GNU_SOURCE -O2 -I. bench/bench_claims.c build/libstore.a build/libforge.a \
	-lsqlite3 -lpq -lcjson -lzstd -lcrypto -lm -lpthread -o build/bench/bench_claims
tmp=$(mktemp -d)
# The cluster's own folder: it runs as nobody under root, who cannot enter $tmp (0700).
pgtmp=$(mktemp -d /tmp/forged-bench-pg.XXXXXX)
# shellcheck source=tests/pg_cluster.sh
. tests/pg_cluster.sh
started=0
cleanup() { [ "$started" = 1 ] && pg_cluster_stop; rm -rf "$tmp" "$pgtmp"; }
trap cleanup EXIT
for p in 1 3; do
	./build/bench/bench_claims "$tmp/claims-$p.db" "$n" "$p" 2
done
if [ -z "${FORGED_TEST_PG:-}" ]; then
	if pg_cluster_start "$pgtmp"; then started=1; else echo "bench_claims: PostgreSQL skipped: $PG_SKIP$PG_FAIL"; exit 0; fi
fi
FORGED_TEST_PG_SOCKET=${FORGED_TEST_PG_SOCKET:-$pgtmp}
for p in 1 3; do
	url=$(pg_createdb "bench_claims_$p")
	./build/bench/bench_claims "$url" "$n" "$p" 2
	psql -q -X "$FORGED_TEST_PG" -c "DROP DATABASE bench_claims_$p" >/dev/null
done
