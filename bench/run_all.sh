#!/usr/bin/env bash
# bench/run_all.sh: every benchmark, one after the other, then one JSON of
# their figures and ratios (`make bench`).
#
#   bash bench/run_all.sh                  full sizes (about half an hour)
#   BENCH_QUICK=1 bash bench/run_all.sh    small sizes, a couple of minutes (smoke test)
#   BENCH_ONLY="inspect forge" ...         a subset, by the names below
#   BENCH_JSON=FILE                        where the JSON goes (default
#                                          build/bench/results.json, or
#                                          build/bench/quick/results.json when quick)
#   BENCH_PYTHON=/usr/bin/python3          the references' interpreter (bench/lib.sh)
#
# Each benchmark writes a fragment (BENCH_RESULTS/NAME.json, see
# bench/benchlib.py for its fields) and its output to BENCH_DIR/logs/NAME.log
# (also shown here).  The JSON has, for each benchmark, whether it completed
# ("ok"), and for each of its cases the forged and reference figures (wall
# and CPU: best, median, min, max, n) and the ratios forged / reference.  A
# benchmark that fails is recorded with ok=false and the others still run;
# the exit status is then 1.  Timings are never asserted.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
# shellcheck source=bench/lib.sh
. bench/lib.sh
BENCH_JSON=${BENCH_JSON:-$BENCH_DIR/results.json}
ALL="tensors inspect quant dtype store forge forge_scale originals pull pull_inspect api"
ONLY=${BENCH_ONLY:-$ALL}
LOGS=$BENCH_DIR/logs

script() {
	case $1 in
	tensors) echo bench/bench_tensors.sh ;;
	inspect) echo bench/bench_inspect.sh ;;
	quant) echo bench/bench_quant.sh ;;
	dtype) echo bench/bench_dtype.sh ;;
	store) echo bench/bench_store.sh ;;
	forge) echo bench/forge/run.sh ;;
	forge_scale) echo bench/forge/scale.sh ;;
	originals) echo bench/bench_originals.sh ;;
	pull) echo bench/pull/run.sh ;;
	pull_inspect) echo bench/pull/inspect.sh ;;
	api) echo bench/api/run.sh ;;
	*) return 1 ;;
	esac
}

for b in $ONLY; do script "$b" >/dev/null || { echo "run_all: no benchmark named $b (have: $ALL)" >&2; exit 2; }; done
make -s build/forged build/libforge.a build/libstore.a || exit 2
mkdir -p "$BENCH_RESULTS" "$LOGS" "$(dirname "$BENCH_JSON")"
echo "benchmarks: $ONLY$([ "$BENCH_QUICK" != 0 ] && echo ' (BENCH_QUICK=1)')"
echo "python for references and helpers: $(bl interpreter "$BENCH_PYTHON")"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
failed=0
frags=()
t_all=$(date +%s)
for b in $ONLY; do
	frag=$BENCH_RESULTS/$b.json
	rm -f "$frag"
	echo
	echo "======== $b: $(script "$b")"
	t0=$(date +%s)
	bash "$(script "$b")" 2>&1 | tee "$LOGS/$b.log"
	rc=${PIPESTATUS[0]}
	secs=$(($(date +%s) - t0))
	if [ ! -f "$frag" ]; then
		bl init "$frag" "$b" >/dev/null
	fi
	if [ "$rc" != 0 ] || [ "$(jq -r .ok "$frag")" != true ]; then
		failed=$((failed + 1))
		bl set "$frag" . ok=false exit="$rc" error="\"exit $rc; see $LOGS/$b.log\""
		echo "======== $b FAILED (exit $rc, ${secs} s)"
	else
		echo "======== $b done in ${secs} s"
	fi
	bl set "$frag" . seconds="$secs" log="\"$LOGS/$b.log\""
	frags+=("$frag")
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg); $(($(date +%s) - t_all)) s in all"
bl collect "$BENCH_JSON" "${frags[@]}"
[ "$failed" = 0 ] || { echo "run_all: $failed benchmark(s) failed" >&2; exit 1; }
