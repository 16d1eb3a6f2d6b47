#!/usr/bin/env bash
# run_all.sh BUILD: runs every unit test binary and end-to-end script against
# the build in BUILD, then prints one closing line "tests: N passed, N failed".
# Each unit binary is a cmocka program; each e2e script ends with its own
# "NAME: N passed, N failed" line, which is summed here.
# run_all.sh BUILD --only "LIST": only the unit binaries (tests/NAME) and
# scripts (tests/e2e/NAME.sh) LIST names (make tsan-test).
set -u
build=${1:?usage: run_all.sh BUILD [--only LIST]}
only=""
[ "${2:-}" = --only ] && only=" ${3:-} "
build=$(cd "$build" && pwd)
# wanted NAME: whether NAME (tests/test_x or tests/e2e/test_y.sh) is to run.
wanted() { [ -z "$only" ] || [[ "$only" == *" $1 "* ]]; }
export FORGED=$build/forged FIXTURES=$build/fixtures PYTHON=${PYTHON:-python3}
passed=0
failed=0
log=$(mktemp)
# One throwaway PostgreSQL cluster for the run (tests/pg_cluster.sh): the
# store's tests run on it as well as on SQLite.  Without PostgreSQL they
# skip their PostgreSQL half, saying why; PostgreSQL installed but its
# cluster not starting is one failure (and the PostgreSQL half is not run).
. "$(dirname "$0")/pg_cluster.sh"
pgdir=$(mktemp -d /tmp/forged-pg.XXXXXX)
trap 'pg_cluster_stop; rm -f "$log"; rm -rf "$pgdir"' EXIT
pg_cluster_start "$pgdir"
pg_rc=$?
if [ "$pg_rc" = 0 ]; then
	echo "PostgreSQL for the store tests: $FORGED_TEST_PG"
elif [ "$pg_rc" = 1 ]; then
	echo "PostgreSQL store tests skipped: $PG_SKIP"
	unset FORGED_TEST_PG FORGED_TEST_PG_SOCKET
else
	echo "FAIL: PostgreSQL is installed but its test cluster does not start: $PG_FAIL"
	failed=$((failed + 1))
	unset FORGED_TEST_PG FORGED_TEST_PG_SOCKET
fi

tally() { # tally STATUS: add the counts found in $log
	local p f
	p=$(sed -n 's/.*\[  PASSED  \] \([0-9]*\) test.*/\1/p; s/^[a-z_]*: \([0-9]*\) passed, \([0-9]*\) failed$/\1/p' "$log" | tail -n 1)
	f=$(sed -n 's/.*\[  FAILED  \] \([0-9]*\) test.*/\1/p; s/^[a-z_]*: [0-9]* passed, \([0-9]*\) failed$/\1/p' "$log" | tail -n 1)
	passed=$((passed + ${p:-0}))
	failed=$((failed + ${f:-0}))
	# A crash or a non-zero exit without a count still fails the run.
	if [ "$1" -ne 0 ] && [ "${f:-0}" -eq 0 ]; then failed=$((failed + 1)); fi
}

for t in "$build"/tests/test_*; do
	[ -x "$t" ] || continue
	wanted "tests/$(basename "$t")" || continue
	echo "== $t"
	timeout 600 "$t" >"$log" 2>&1
	st=$?
	cat "$log"
	tally "$st"
done
for t in tests/e2e/test_*.sh; do
	wanted "$t" || continue
	echo "== $t"
	timeout 900 bash "$t" >"$log" 2>&1
	st=$?
	cat "$log"
	tally "$st"
done
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
