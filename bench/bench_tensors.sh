#!/usr/bin/env bash
# bench_tensors.sh: `forged tensors` on one safetensors file of 100,000 tensors,
# against a Python reference run in the same script.
#
# The file comes from `gen_fixtures.py --many-tensors N` (small BF16/F32/F16
# tensors named like a large MoE checkpoint; a ~11 MB header).  Timed, best of
# REPS, stdout to /dev/null, wall clock from `date +%s%N`:
#   forged tensors FILE --json    the header dump with per-tensor stats, as JSON
#   forged tensors FILE           the same, human-readable
#   python3 reference             reads the 8-byte length and parses the JSON
#                                 header with the json module, nothing more
# forged computes min/max/mean/nonfinite over every tensor's data (all 100,000
# tensors) and formats a row per tensor, while the reference only parses the
# header: the ratio is an upper bound of forged's parsing overhead, not a
# like-for-like comparison.  Peak RSS comes from `/usr/bin/time -f %M` (or
# bench/measure.py, i.e. wait4's rusage, when GNU time is missing).
#
# Machines are noisy: figures are reported, ratios are against the reference
# measured in the same run, and nothing is asserted about timings.  A non-zero
# exit means a command failed, not that it was slow.
#
#   make && bash bench/bench_tensors.sh        (run from anywhere)
#   env: N=100000 REPS=5 FORGED=build/forged BENCH_DIR=build/bench PYTHON=python3
set -euo pipefail
shopt -s inherit_errexit

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
N=${N:-100000}
REPS=${REPS:-5}
FORGED=${FORGED:-build/forged}
BENCH_DIR=${BENCH_DIR:-build/bench}
PYTHON=${PYTHON:-python3}
FILE="$BENCH_DIR/many_$N.safetensors"

[ -x "$FORGED" ] || { echo "bench_tensors: $FORGED missing: run make first" >&2; exit 2; }
mkdir -p "$BENCH_DIR"
if [ ! -s "$FILE" ] || [ tests/fixtures/gen_fixtures.py -nt "$FILE" ]; then
	echo "generating $FILE ($N tensors)..."
	"$PYTHON" tests/fixtures/gen_fixtures.py --many-tensors "$N" "$FILE.tmp"
	mv "$FILE.tmp" "$FILE"
fi

REF='import json, struct, sys
with open(sys.argv[1], "rb") as f:
    (n,) = struct.unpack("<Q", f.read(8))
    h = json.loads(f.read(n))
print(len(h) - ("__metadata__" in h))'

# best_ms CMD...: run REPS times (stdout to /dev/null), print the best wall time in ms.
best_ms() {
	local best="" t0 t1 ns
	for _ in $(seq "$REPS"); do
		t0=$(date +%s%N)
		"$@" > /dev/null || { echo "bench_tensors: failed: $*" >&2; return 1; }
		t1=$(date +%s%N)
		ns=$((t1 - t0))
		if [ -z "$best" ] || [ "$ns" -lt "$best" ]; then best=$ns; fi
	done
	awk -v ns="$best" 'BEGIN { printf "%.1f", ns / 1e6 }'
}

# peak_kib CMD...: peak resident set of one run, KiB.
peak_kib() {
	if [ -x /usr/bin/time ]; then
		/usr/bin/time -f %M -o "$BENCH_DIR/.time.out" "$@" > /dev/null ||
			{ echo "bench_tensors: failed: $*" >&2; return 1; }
		tail -n 1 "$BENCH_DIR/.time.out"
	else
		"$PYTHON" bench/measure.py -- "$@" | tr ' ' '\n' | sed -n 's/^maxrss_kib=//p'
	fi
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

# Correctness first (untimed): every command succeeds and sees N tensors.
got_forged=$("$FORGED" tensors "$FILE" --json | "$PYTHON" -c 'import json,sys; print(len(json.load(sys.stdin)["tensors"]))')
got_ref=$("$PYTHON" -c "$REF" "$FILE")
"$FORGED" tensors "$FILE" > /dev/null
if [ "$got_forged" != "$N" ] || [ "$got_ref" != "$N" ]; then
	echo "bench_tensors: tensor count mismatch: forged $got_forged, python $got_ref, expected $N" >&2
	exit 1
fi

size=$(stat -c %s "$FILE")
hlen=$("$PYTHON" -c 'import struct,sys; print(struct.unpack("<Q", open(sys.argv[1],"rb").read(8))[0])' "$FILE")

echo "timing (best of $REPS, warm page cache)..."
t_json=$(best_ms "$FORGED" tensors "$FILE" --json)
t_human=$(best_ms "$FORGED" tensors "$FILE")
t_ref=$(best_ms "$PYTHON" -c "$REF" "$FILE")
t_py0=$(best_ms "$PYTHON" -c pass)
rss_json=$(peak_kib "$FORGED" tensors "$FILE" --json)
rss_human=$(peak_kib "$FORGED" tensors "$FILE")
rss_ref=$(peak_kib "$PYTHON" -c "$REF" "$FILE")

cat <<EOF

==== bench_tensors summary ====
file                      $FILE
tensors                   $N
file size                 $size bytes (header $hlen bytes)
forged tensors --json     $t_json ms   peak RSS $rss_json KiB
forged tensors (human)    $t_human ms   peak RSS $rss_human KiB
python3 json header ref   $t_ref ms   peak RSS $rss_ref KiB  (interpreter start alone: $t_py0 ms)
ratio forged/python       --json $(ratio "$t_json" "$t_ref")x   human $(ratio "$t_human" "$t_ref")x   (lower is better for forged)
note: forged computes stats over every tensor's data and prints a row per
      tensor; the python reference only parses the header.
===============================
EOF
