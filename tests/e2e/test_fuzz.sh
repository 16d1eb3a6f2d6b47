#!/usr/bin/env bash
# The libFuzzer targets of tests/fuzz/ (built by `make test-build` into
# FUZZ_DIR), each run for FUZZ_TEST_SECONDS on its seeds and its saved
# corpus: a crash, a trap (a differential mismatch) or a leak fails.  Prints
# each target's executions.  `make fuzz` runs them longer.
set -u
. "$(dirname "$0")/lib.sh"
FUZZ_DIR=${FUZZ_DIR:-build/fuzz}
SECS=${FUZZ_TEST_SECONDS:-3}
root=$(cd "$(dirname "$0")/../.." && pwd)

for t in fuzz_st_header fuzz_jsonlex_diff fuzz_ckpt_open; do
	case $t in
	fuzz_st_header) seeds="$root/tests/hostile $root/tests/fuzz/seeds" ;;
	fuzz_jsonlex_diff) seeds="$root/tests/hostile $root/tests/fuzz/seeds $root/tests/fuzz/seeds_json" ;;
	*) seeds="$root/tests/fuzz/seeds_ckpt" ;;
	esac
	if [ ! -x "$FUZZ_DIR/$t" ]; then
		bad "$t: $FUZZ_DIR/$t is not built (make test-build)"
		continue
	fi
	corpus=$FUZZ_DIR/corpus_$t
	mkdir -p "$corpus"
	rc=0
	# shellcheck disable=SC2086
	(cd "$TMP" && "$FUZZ_DIR/$t" -max_total_time="$SECS" -max_len=65536 -timeout=20 -print_final_stats=1 \
		"$corpus" $seeds) >"$TMP/$t.log" 2>&1 || rc=$?
	runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$TMP/$t.log" | tail -n 1)
	echo "$t: ${runs:-0} executions in $SECS s (exit $rc)"
	if [ "$rc" -ne 0 ]; then
		bad "$t failed: $(grep -m1 -E 'ERROR|SUMMARY|deadly' "$TMP/$t.log")"
		tail -n 30 "$TMP/$t.log" >&2
		continue
	fi
	check "$t ran" [ "${runs:-0}" -gt 0 ]
done
finish
