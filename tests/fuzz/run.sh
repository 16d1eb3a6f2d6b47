#!/usr/bin/env bash
# run.sh: runs the libFuzzer targets of tests/fuzz (make fuzz-smoke, make fuzz).
#
#   run.sh --probe             exit 0 when $FUZZ_CC (clang) links -fsanitize=fuzzer;
#                              else say why the fuzzers are skipped and exit 1
#   run.sh SECONDS NAME...     run build/fuzz/fuzz_NAME for SECONDS each, on
#                              build/fuzz/corpus/NAME (new inputs) and the seeds
#
# Every target runs from the top of the tree with its files under
# build/fuzz/work (FORGED_FUZZ_WORK), new corpus entries in build/fuzz/corpus,
# a crash, leak, timeout or sanitizer report's input in build/fuzz/crashes and
# the whole log in build/fuzz/logs/NAME.log.  A target fails on a non-zero exit
# or on any sanitizer report in its log; the run fails if any target does.
# One line per target: executions, coverage (edges, features), corpus size.
#
# To replay an input (a crash, or a reproducer of tests/fuzz/crashes), from
# the top of the tree:  build/fuzz/fuzz_NAME -artifact_prefix=build/fuzz/ FILE...
# (several files run in order in one process: fuzz_api's server keeps its
# database between them).
set -u
cd "$(dirname "$0")/../.."
out=build/fuzz
cc=${FUZZ_CC:-clang}

if [ "${1:-}" = --probe ]; then
	mkdir -p "$out"
	probe=$out/probe.c
	printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
		'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);' \
		'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }' >"$probe"
	if ! command -v "$cc" >/dev/null 2>&1; then
		echo "fuzz-smoke: skipped: no $cc (install clang and libclang-rt-14-dev, as make deps does)"
		exit 1
	fi
	if ! "$cc" -fsanitize=fuzzer,address,undefined "$probe" -o "$out/probe" >"$out/probe.log" 2>&1; then
		echo "fuzz-smoke: skipped: $cc cannot link -fsanitize=fuzzer ($(head -n 1 "$out/probe.log"); install libclang-rt-14-dev)"
		exit 1
	fi
	exit 0
fi

secs=${1:?usage: run.sh --probe | run.sh SECONDS NAME...}
shift
mkdir -p "$out/corpus" "$out/crashes" "$out/logs" "$out/work"
export FORGED_FUZZ_WORK=$out/work
# fuzz_api's seeds name fixture checkpoints (make sets this to BUILD/fixtures).
export FORGED_FUZZ_FIXTURES=${FORGED_FUZZ_FIXTURES:-$PWD/build/fixtures}
# halt_on_error: the one recoverable check (float-cast-overflow) stops the run
# too, unless known_ubsan.supp lists it as a reported finding.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:suppressions=$PWD/tests/fuzz/known_ubsan.supp}
rm -rf "$out/work"/*   # what a crashed target left (its exit handler did not run)
passed=0
failed=0
for name in "$@"; do
	bin=$out/fuzz_$name
	log=$out/logs/$name.log
	seeds=(tests/fuzz/seeds/"$name")
	max_len=4096
	timeout=10
	case $name in
	st_header) seeds+=(tests/hostile); max_len=65536 ;;
	jsonlex_diff) seeds+=(tests/fuzz/seeds/st_header tests/hostile); max_len=65536 ;;
	ckpt_open) max_len=65536; timeout=20 ;;
	config) max_len=8192 ;;
	tokens) max_len=131072 ;;      # a seed holds more than FG_TOKENS_MAX lines
	verify) max_len=65536 ;;
	api) max_len=32768; timeout=30 ;; # bodies up to twice the server's 16 KiB cap
	esac
	if [ ! -x "$bin" ]; then
		echo "fuzz_$name: FAILED: $bin is not built"
		failed=$((failed + 1))
		continue
	fi
	mkdir -p "$out/corpus/$name"
	# The reproducers of fixed findings (tests/fuzz/crashes/NAME-*) replay first, in order.
	repro=(tests/fuzz/crashes/"$name"-*)
	if [ -e "${repro[0]}" ]; then
		if ! "$bin" -timeout="$timeout" "${repro[@]}" >"$log.repro" 2>&1 ||
			grep -qE 'runtime error:|ERROR: (Address|Leak|UndefinedBehavior)Sanitizer|==ERROR:|SUMMARY: ' "$log.repro"; then
			echo "fuzz_$name: FAILED replaying ${#repro[@]} reproducers of tests/fuzz/crashes; log $log.repro"
			failed=$((failed + 1))
			continue
		fi
	fi
	"$bin" -max_total_time="$secs" -timeout="$timeout" -rss_limit_mb=2560 -max_len="$max_len" \
		-print_final_stats=1 -artifact_prefix="$out/crashes/$name-" \
		"$out/corpus/$name" "${seeds[@]}" >"$log" 2>&1
	st=$?
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -n 1)
	if [ "$st" -ne 0 ] || grep -qE 'runtime error:|ERROR: (Address|Leak|UndefinedBehavior)Sanitizer|==ERROR:|SUMMARY: ' "$log"; then
		echo "fuzz_$name: FAILED (exit $st) after ${runs:-?} runs; log $log"
		grep -m 5 -E 'runtime error:|ERROR:|SUMMARY:|Test unit written|fuzz(_api)?: ' "$log" | sed 's/^/    /'
		failed=$((failed + 1))
	else
		echo "fuzz_$name: ${runs:-?} runs in ${secs}s, ${cov:-no coverage line}: ok"
		passed=$((passed + 1))
	fi
done
echo "fuzz: $passed targets passed, $failed failed"
[ "$failed" -eq 0 ]
