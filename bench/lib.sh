# shellcheck shell=bash
# bench/lib.sh: sourced by every benchmark script (after it has cd'd to the
# repository root).  Sets:
#   BENCH_PYTHON   the interpreter of every Python reference and helper:
#                  /usr/bin/python3 (Debian's, with python3-numpy) unless set.
#                  Never `python3` from PATH: on the build machines that is a
#                  pyenv shim whose start-up alone cost 87 ms, which made
#                  forged look faster than it was.
#   BENCH_QUICK    1: small sizes, so all of `make bench` runs in minutes
#   BENCH_DIR      data (build/bench, or build/bench/quick when quick)
#   BENCH_RESULTS  folder of the per-benchmark JSON fragments
#                  (BENCH_DIR/results.d); bench/run_all.sh merges them
# and the functions bench_init NAME [KEY=VALUE...] (prints the interpreter,
# starts $FRAG), bl (bench/benchlib.py under BENCH_PYTHON) and bench_ok.
BENCH_PYTHON=${BENCH_PYTHON:-/usr/bin/python3}
BENCH_QUICK=${BENCH_QUICK:-0}
[ -n "$BENCH_QUICK" ] || BENCH_QUICK=0
if [ "$BENCH_QUICK" != 0 ]; then
	BENCH_DIR=${BENCH_DIR:-build/bench/quick}
else
	BENCH_DIR=${BENCH_DIR:-build/bench}
fi
BENCH_RESULTS=${BENCH_RESULTS:-$BENCH_DIR/results.d}
export BENCH_PYTHON BENCH_QUICK BENCH_DIR BENCH_RESULTS
# nginx_lib.sh and the test helpers pick a free port with $PYTHON.
export PYTHON=$BENCH_PYTHON

if [ ! -x "$BENCH_PYTHON" ]; then
	echo "bench: BENCH_PYTHON=$BENCH_PYTHON is not an executable interpreter" >&2
	exit 2
fi

bl() { "$BENCH_PYTHON" bench/benchlib.py "$@"; }

# quick FULL QUICK: FULL, or QUICK under BENCH_QUICK=1
quick() { if [ "$BENCH_QUICK" != 0 ]; then echo "$2"; else echo "$1"; fi; }

# bench_init NAME [KEY=VALUE...]: FRAG=$BENCH_RESULTS/NAME.json, interpreter printed
bench_init() {
	local name=$1
	shift
	mkdir -p "$BENCH_RESULTS" "$BENCH_DIR"
	FRAG=$BENCH_RESULTS/$name.json
	echo "$name: python for references and helpers: $(bl interpreter "$BENCH_PYTHON")$([ "$BENCH_QUICK" != 0 ] && echo ', BENCH_QUICK=1')"
	bl init "$FRAG" "$name" "$@"
}

# bench_ok: mark $FRAG complete (a fragment left at ok=false means the script failed)
bench_ok() { bl set "$FRAG" . ok=true; }

# The sparse >1 TB checkpoint of bench_inspect.sh and bench/pull/ (its
# GEN_ARGS: full size, or 4 layers x 16 experts under BENCH_QUICK=1).
SPARSE_DIR=${SPARSE_DIR:-$BENCH_DIR/sparse_moe}
SPARSE_GEN_ARGS=${GEN_ARGS:-$(quick "" "--layers 4 --experts 16")}
# The runtime its inspections target: its routed experts are numbered, which
# every mlx-lm-based default target reports as a load error (ok=false, exit 1)
# since issue 10; ollama-mlx stacks them at load (sources in
# bench/bench_inspect.sh).  Every runtime row is simulated either way.
SPARSE_RUNTIME=${SPARSE_RUNTIME:-ollama-mlx}
# bench_sparse [--force]: generate SPARSE_DIR unless it is there (or --force)
bench_sparse() {
	if [ "${1:-}" = --force ] || [ ! -s "$SPARSE_DIR/config.json" ]; then
		# shellcheck disable=SC2086
		"$BENCH_PYTHON" bench/gen_sparse_moe.py "$SPARSE_DIR" --force $SPARSE_GEN_ARGS
	fi
}
