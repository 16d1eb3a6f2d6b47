#!/usr/bin/env bash
# bench_tensors.sh: `forged tensors` on one safetensors file of 100,000 tensors,
# against a Python reference run in the same script.
#
# The file comes from `gen_fixtures.py --many-tensors N` (small BF16/F32/F16
# tensors named like a large MoE checkpoint; a ~11 MB header).  Timed, best of
# REPS, stdout to /dev/null, wall clock from `date +%s%N`:
#   forged tensors FILE --json    the header dump with per-tensor stats, as JSON
#   forged tensors FILE           the same, human-readable
#   python reference              reads the 8-byte length and parses the JSON
#                                 header with the json module, nothing more,
#                                 under BENCH_PYTHON (default /usr/bin/python3,
#                                 never PATH's python3: see bench/lib.sh)
#   interpreter start-up          BENCH_PYTHON -c pass, part of the reference
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
#   env: N=100000 REPS=5 FORGED=build/forged BENCH_DIR=build/bench BENCH_PYTHON=/usr/bin/python3
#        BENCH_QUICK=1: N=5000, REPS=2
# shellcheck disable=SC2154  # t_* are set through printf -v
set -euo pipefail
shopt -s inherit_errexit

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# shellcheck source=bench/lib.sh
. bench/lib.sh
N=${N:-$(quick 100000 5000)}
REPS=${REPS:-$(quick 5 2)}
FORGED=${FORGED:-build/forged}
PYTHON=$BENCH_PYTHON
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
# row NAME: "wall best/median ms, cpu best/median ms" of NAME
row() {
	local v=t_$1
	local wb=${v}_wall_best wm=${v}_wall_median cb=${v}_cpu_best cm=${v}_cpu_median
	printf 'wall %7s / %-7s cpu %7s / %-7s ms' "${!wb}" "${!wm}" "${!cb}" "${!cm}"
}

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

bench_init tensors n="$N" reps="$REPS"
RAW=$BENCH_DIR/tensors_runs.json
echo "timing ($REPS interleaved rounds after a warm-up round, warm page cache)..."
bl abrun "$FRAG" --reps "$REPS" --first --raw "$RAW" \
	--label json="forged tensors FILE --json" --label human="forged tensors FILE" \
	--label reference="$(basename "$PYTHON") -c 'json.loads(header)' FILE" --label start="$PYTHON -c pass" \
	--case tensors_json=json/reference --case tensors_human=human/reference \
	-- json "$FORGED" tensors "$FILE" --json ::: human "$FORGED" tensors "$FILE" \
	::: reference "$PYTHON" -c "$REF" "$FILE" ::: start "$PYTHON" -c pass
# ms NAME FIELD STAT: best (min) or median of NAME's warm runs
ms() {
	jq -r --arg n "$1" --arg f "$2" --arg s "$3" '[.commands[$n].runs[][$f]] | sort |
		(if $s == "best" then .[0] elif length % 2 == 1 then .[length / 2 | floor]
		 else (.[length / 2 - 1] + .[length / 2]) / 2 end) * 10 | round / 10' "$RAW"
}
for n in json human reference start; do
	for f in wall cpu; do
		for st in best median; do printf -v "t_${n}_${f}_${st}" %s "$(ms $n ${f}_ms $st)"; done
	done
done
rss_json=$(peak_kib "$FORGED" tensors "$FILE" --json)
rss_human=$(peak_kib "$FORGED" tensors "$FILE")
rss_ref=$(peak_kib "$PYTHON" -c "$REF" "$FILE")

cat <<EOF

==== bench_tensors summary ====
file                      $FILE
tensors                   $N
file size                 $size bytes (header $hlen bytes)
interpreter               $PYTHON ($REPS interleaved rounds; best / median)
forged tensors --json     $(row json)   peak RSS $rss_json KiB
forged tensors (human)    $(row human)   peak RSS $rss_human KiB
python json header ref    $(row reference)   peak RSS $rss_ref KiB
  interpreter start alone $(row start)
ratio forged/python       wall best: --json $(ratio "$t_json_wall_best" "$t_reference_wall_best")x   human $(ratio "$t_human_wall_best" "$t_reference_wall_best")x
                          cpu best:  --json $(ratio "$t_json_cpu_best" "$t_reference_cpu_best")x   human $(ratio "$t_human_cpu_best" "$t_reference_cpu_best")x   (lower is better for forged)
note: forged computes stats over every tensor's data and prints a row per
      tensor; the python reference only parses the header.
===============================
EOF
for c in tensors_json tensors_human; do
	bl set "$FRAG" "cases.$c.extra" tensors="$N" file_bytes="$size" header_bytes="$hlen" \
		interpreter_start_wall_best_ms="$t_start_wall_best" interpreter_start_cpu_best_ms="$t_start_cpu_best"
done
bl set "$FRAG" cases.tensors_json.extra peak_rss_kib="$rss_json" reference_peak_rss_kib="$rss_ref"
bl set "$FRAG" cases.tensors_human.extra peak_rss_kib="$rss_human" reference_peak_rss_kib="$rss_ref"
bench_ok
