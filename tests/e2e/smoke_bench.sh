#!/usr/bin/env bash
# smoke_bench.sh: `make bench BENCH_QUICK=1` runs end to end (every
# benchmark, small sizes, in a fresh folder) and writes a valid JSON with the
# expected keys: per benchmark ok, the python interpreter, and per case the
# forged and reference figures (wall and CPU, best/median/min/max/n) and the
# ratios.  No time is asserted.
#
# 40-45 s on a quiet 2-core VM, 76 s under load (it regenerates the data and
# seeds a store in a fresh folder): over the ~60 s a `make test` script may
# take, so it is not named test_*.sh and `make test` does not run it.  It
# benchmarks the plain build (SANITIZE= : a sanitized
# forged would only be slower), and leaves out bench/api/run.sh when wrk is
# not installed (that script would install it; `make deps` does not).
#   FORGED=build/forged bash tests/e2e/smoke_bench.sh
set -u
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$TMP/results.json

BENCHES="tensors inspect quant dtype store forge pull pull_inspect api"
if ! command -v wrk >/dev/null; then
	echo "smoke_bench: wrk is not installed: bench/api/run.sh left out"
	BENCHES=${BENCHES% api}
fi
t0=$(date +%s)
rc=0
env -u FORGED -u FIXTURES -u BENCH_PYTHON BENCH_DIR="$TMP/bench" BENCH_JSON="$OUT" BENCH_ONLY="$BENCHES" \
	make -s -C "$ROOT" bench BENCH_QUICK=1 SANITIZE= >"$TMP/log" 2>&1 || rc=$?
echo "make bench BENCH_QUICK=1: exit $rc in $(($(date +%s) - t0)) s"
if [ "$rc" != 0 ]; then
	for f in "$TMP"/bench/logs/*.log; do grep -q FAILED "$TMP/log" && tail -n 15 "$f" | sed "s|^|$(basename "$f" .log): |"; done |
		grep -F -f <(sed -n 's/^======== \([a-z_]*\) FAILED.*/\1: /p' "$TMP/log") >&2
fi
check "make bench BENCH_QUICK=1 exits 0 (log: $(tail -n 3 "$TMP/log" | tr '\n' ' '))" [ "$rc" = 0 ]
check "results JSON written and valid" jq -e . "$OUT" >/dev/null
j() { jq -r "$@" "$OUT" 2>/dev/null; }
check "schema forged.bench.v1" [ "$(j .schema)" = forged.bench.v1 ]
check "quick recorded" [ "$(j .quick)" = true ]
check "interpreter is /usr/bin/python3 by default" [ "$(j .interpreter.path)" = /usr/bin/python3 ]
check "the log names the interpreter" grep -q 'python for references and helpers: /usr/bin/python3' "$TMP/log"
for b in $BENCHES; do
	check "$b: present and ok" [ "$(j --arg b "$b" '.benches[$b].ok')" = true ]
	check "$b: has cases" [ "$(j --arg b "$b" '.benches[$b].cases | length')" -gt 0 ]
	check "$b: every case has a unit and forged wall and cpu stats" [ "$(j --arg b "$b" '[.benches[$b].cases[] |
		(.unit | type == "string") and ([.forged.wall, .forged.cpu][] | (.best, .median, .min, .max, .n) | type == "number")]
		| all')" = true ]
	check "$b: at least one case against a reference, with every ratio" [ "$(j --arg b "$b" '[.benches[$b].cases[] |
		select(.reference != null) | ([.reference.wall, .reference.cpu][] | (.best, .median) | type == "number") and
		(.ratios | (.wall_best, .wall_median, .cpu_best, .cpu_median) | type == "number")] | length > 0 and all')" = true ]
	check "$b: min <= median <= max" [ "$(j --arg b "$b" '[.benches[$b].cases[] | .forged, .reference | select(. != null) |
		.wall, .cpu | .min <= .median and .median <= .max and .best == .min] | all')" = true ]
done
for c in inspect:inspect tensors:tensors_json quant:affine_4bit_g64 quant:fp8_to_bf16 forge:keep_warm forge:keep_cold \
	forge:mxfp4_cold pull:pull_nocache pull_inspect:inspect_cold_cache api:fleet_health store:verification_put; do
	case " $BENCHES " in *" ${c%%:*} "*) ;; *) continue ;; esac
	check "case ${c#*:} of ${c%%:*}" [ "$(j --arg b "${c%%:*}" --arg c "${c#*:}" '.benches[$b].cases[$c].ratios.wall_best | type')" = number ]
done
check "runs were interleaved" [ "$(j '.benches.inspect.cases.inspect.extra.order')" = "interleaved forged reference" ]
check "forge cold runs evicted the source" grep -q 'evict: .* 0.0 MiB after' "$TMP/log" "$TMP/bench/logs/forge.log"
finish
