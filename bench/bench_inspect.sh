#!/usr/bin/env bash
# bench_inspect.sh: `forged inspect --json` on a sparse >1 TB Qwen3.5-MoE MLX
# checkpoint (100,836 tensors, dozens of shards, an MTP sidecar), against a
# Python reference run in the same script.
#
# Data.  bench/gen_sparse_moe.py writes the checkpoint once into
# build/bench/sparse_moe (BENCH_DIR/sparse_moe): headers, the index, the norm
# tensors and conv1d weights hold real bytes, everything else is holes, so it
# takes ~31 MB of disk for 1.28 TB of logical size.  Delete the folder (or set
# REGEN=1) to regenerate it.
#
# Page cache.  Nothing is dropped from the page cache (that needs root).  The
# first run of each command is reported apart from the warm runs; if the data
# was just generated or used, it is warm too (read_bytes tells how much came
# from storage).
#
# Order.  forged and the reference run interleaved (first run of each, then
# REPS rounds of forged, reference), so a change of load on the machine hits
# both; best and median of the REPS warm runs are reported, wall and CPU
# (user + sys of the measured process, from wait4).  The reference runs under
# BENCH_PYTHON (default /usr/bin/python3, never PATH's python3; see
# bench/lib.sh), whose start-up is part of its figure.
#
# What is measured, per run, by bench/measure.py (see its header):
#   wall time        spawn to reap; best and median of REPS warm runs
#   CPU time         user + sys from wait4()'s rusage of the child
#   peak RSS         ru_maxrss from wait4() of the child
#   bytes read       rchar of the child: every byte read()/pread() returned
#                    (config.json, the index, the safetensors headers).
#                    Pages of norm tensors faulted in through forged's
#                    read-only mmap do not appear in rchar, so the script also
#                    prints rchar + (minflt + majflt) * 4096: an UPPER BOUND of
#                    bytes touched (faults also count heap pages), and the
#                    number of distinct 4 KiB pages the norm tensors span (the
#                    least any mmap reader must fault in).
#   mmap faults      when perf works: bench/file_faults.py attributes every
#                    page fault to its mapping (perf page-fault events with
#                    data addresses + perf's mmap events) and counts those on
#                    *.safetensors mappings.  A warm fault may map up to 16
#                    cached neighbours at once (the kernel's 64 KiB
#                    fault-around), so pages reachable through the mapping
#                    are at most file_faults x 16, and
#                    rchar + file_faults x 64 KiB is a much tighter upper bound of
#                    the bytes forged reads (cold, each fault reads one page:
#                    MADV_RANDOM disables read-ahead).
#   How rchar is obtained: Linux adds a reaped child's I/O accounting to its
#   parent's /proc/PID/io, so the wrapper diffs its own /proc/self/io around
#   spawn + wait4.  `measure.py --selftest` verifies this on the running
#   kernel (cat of a 3 MiB file) before the figures are trusted.
#
# The reference (bench/ref_inspect.py) does the minimal equivalent: parse every
# header with the json module, seek+read every norm tensor, average it, and
# apply the two-signal rule.  forged does more (index cross-check, family,
# MTP scheme, runtime table, verdicts, full validation), so the ratio is
# conservative.  Targets set by the issue (reported, never asserted): forged
# under 1 s wall, under 64 MiB read, faster than the Python reference.
# A non-zero exit means a command failed or disagreed, not that it was slow.
#
# Sizes.  By default the script runs three checkpoints of the same shape at
# about 10k, 100k and 400k tensors (gen_sparse_moe.py: 64 layers with 48,
# 512 and 2048 experts; the 400k one with --moe-intermediate 128 so that it
# stays at 18 shards of 25 GB) and ends with one table of the ratios, so a
# ratio that falls with size shows.  INSPECT_SIZES="100k" (any of 10k, 100k,
# 400k) picks sizes; each size's figures go to results fragment
# inspect_SIZE, and its case is copied into fragment inspect as case
# inspect_SIZE (what `make bench` collects).  BENCH_QUICK=1 runs the one
# small checkpoint as before, its case named inspect.
#
#   make && bash bench/bench_inspect.sh        (run from anywhere)
#   env: REPS=5 FORGED=build/forged BENCH_DIR=build/bench BENCH_PYTHON=/usr/bin/python3 RUNTIME=ollama-mlx
#        BASE_FORGED=path/to/another/forged: that binary too, interleaved in the same rounds, and
#          the case inspect_vs_base (forged / base): a change's cost against the build it
#          replaces, in one run (e.g. main's, built from `git archive main`)
#        REGEN=0 GEN_ARGS="--layers 64 --experts 512"  (passed to gen_sparse_moe.py)
#        BENCH_QUICK=1: a 4-layer, 16-expert checkpoint in build/bench/quick, REPS=2
# shellcheck disable=SC2154  # F_* and P_* are set through printf -v
set -euo pipefail
shopt -s inherit_errexit

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# shellcheck source=bench/lib.sh
. bench/lib.sh
REPS=${REPS:-$(quick 5 2)}
FORGED=${FORGED:-build/forged}
DIR=$SPARSE_DIR
MEASURE=("$BENCH_PYTHON" bench/measure.py)
TARGET_S=1
TARGET_MIB=64
# The checkpoint's routed experts are numbered, which no mlx-lm-based loader stacks for qwen3_5_moe
# (qwen3_5_moe.py@d78bf58e217c:L23-52): since issue 10 inspect's default targets report that load
# error.  ollama --experimental stacks per-expert tensors at load (x/models/qwen3_5/qwen3_5.go@fb3076099687:
# L599-767), so the run targets it and still asserts ok=true; every row is simulated either way.
RUNTIME=${RUNTIME:-$SPARSE_RUNTIME}

[ -x "$FORGED" ] || { echo "bench_inspect: $FORGED missing: run make first" >&2; exit 2; }
# The driver: one run of this script per size, then the table of ratios.
if [ -z "${INSPECT_ONE:-}" ] && [ "$BENCH_QUICK" = 0 ]; then
	sizes=${INSPECT_SIZES:-10k 100k 400k}
	table=""
	# The fragment bench/run_all.sh collects: one case per size, inspect_SIZE,
	# copied from that size's own fragment once it is complete.
	bench_init inspect sizes="\"$sizes\""
	for size in $sizes; do
		case $size in
		10k) gen="--layers 64 --experts 48" ;;
		100k) gen="--layers 64 --experts 512" ;;
		400k) gen="--layers 64 --experts 2048 --moe-intermediate 128" ;;
		*) echo "bench_inspect: unknown size $size (10k, 100k, 400k)" >&2; exit 2 ;;
		esac
		echo "==== bench_inspect $size ($gen) ===="
		INSPECT_ONE=$size SPARSE_DIR=$BENCH_DIR/sparse_$size GEN_ARGS=$gen bash "$0" || exit $?
		f=$BENCH_RESULTS/inspect_$size.json
		jq --arg s "$size" --slurpfile p "$f" '.cases["inspect_" + $s] = $p[0].cases.inspect
			| .cases["inspect_" + $s].extra.checkpoint = $p[0].params.checkpoint' "$FRAG" >"$FRAG.tmp" &&
			mv "$FRAG.tmp" "$FRAG"
		table+=$(jq -r --arg s "$size" '.cases.inspect as $c | $c.extra as $x |
			"\($s)\t\($x.tensors)\t\($c.forged.cpu.best)\t\($c.reference.cpu.best)\t\($c.forged.wall.best)\t\($c.reference.wall.best)\t\($c.forged.maxrss_kib)"' "$f" 2>/dev/null || echo "$size")
		table+=$'\n'
	done
	echo
	echo "==== bench_inspect: python reference / forged (above 1 = forged faster), best warm runs ===="
	printf '%-6s %8s %10s %10s %8s %10s %10s %8s %10s\n' size tensors "cpu forged" "cpu py" ratio "wall forged" "wall py" ratio "rss KiB"
	while IFS=$'\t' read -r size n fc pc fw pw rss; do
		[ -n "$size" ] || continue
		printf '%-6s %8s %10s %10s %8s %10s %10s %8s %10s\n' "$size" "$n" "$fc" "$pc" \
			"$(awk -v a="$pc" -v b="$fc" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }')" "$fw" "$pw" \
			"$(awk -v a="$pw" -v b="$fw" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }')" "$rss"
	done <<< "$table"
	# What the peak RSS grows by per tensor between the 100k and 400k checkpoints (issue 15: at most 0.1 KB).
	awk -F'\t' '$1 == "100k" { n1 = $2; r1 = $7 } $1 == "400k" { n2 = $2; r2 = $7 }
		END { if (n1 && n2 && n2 > n1) printf "peak RSS growth 100k -> 400k: %.0f bytes per tensor\n", (r2 - r1) * 1024 / (n2 - n1) }' <<< "$table"
	bench_ok
	exit 0
fi
command -v jq > /dev/null || { echo "bench_inspect: jq missing (make deps)" >&2; exit 2; }
mkdir -p "$BENCH_DIR"
if [ "${REGEN:-0}" = 1 ]; then bench_sparse --force; else bench_sparse; fi

du_disk=$(du -sh "$DIR" | cut -f1)
du_logical=$(du -sh --apparent-size "$DIR" | cut -f1)
echo "checkpoint $DIR: $du_logical logical (du --apparent-size), $du_disk on disk (du)"

if "${MEASURE[@]}" --selftest; then io_ok=yes; else
	io_ok=no
	echo "WARNING: child I/O is not accounted to the parent on this kernel: rchar figures below are not the child's" >&2
fi

# field KEY LINE: the value of KEY=... in one key=value line
field() { tr ' ' '\n' <<< "$2" | sed -n "s/^$1=//p"; }

NAME=inspect${INSPECT_ONE:+_$INSPECT_ONE}
bench_init "$NAME" reps="$REPS" checkpoint="\"$DIR\""
J="$BENCH_DIR/$NAME.json"
R="$BENCH_DIR/ref_$NAME.json"
RAW="$BENCH_DIR/${NAME}_runs.json"
echo "forged inspect and the python reference, interleaved: 1 first run + $REPS warm runs each..."
base=()
if [ -n "${BASE_FORGED:-}" ]; then
	[ -x "$BASE_FORGED" ] || { echo "bench_inspect: BASE_FORGED=$BASE_FORGED is not executable" >&2; exit 2; }
	base=(--label base="$BASE_FORGED inspect DIR --json" --case inspect_vs_base=forged/base
	      ::: base "$BASE_FORGED" inspect "$DIR" --json --runtime "$RUNTIME")
	echo "and the base build $BASE_FORGED, in the same rounds"
fi
bl abrun "$FRAG" --reps "$REPS" --first --raw "$RAW" --stdout forged="$J" --stdout reference="$R" \
	--label forged="forged inspect DIR --json" --label reference="$(basename "$BENCH_PYTHON") bench/ref_inspect.py DIR" \
	--case inspect=forged/reference "${base[@]:0:4}" \
	-- forged "$FORGED" inspect "$DIR" --json --runtime "$RUNTIME" ::: reference "$BENCH_PYTHON" bench/ref_inspect.py "$DIR" \
	"${base[@]:4}"
# fig NAME JQ: a figure of command NAME's runs in the raw file (best = the fastest warm run)
fig() { jq -r --arg n "$1" ".commands[\$n] | $2" "$RAW"; }
MEDIAN='sort | (if length % 2 == 1 then .[length / 2 | floor] else (.[length / 2 - 1] + .[length / 2]) / 2 end) * 1000 | round / 1000'
for n in forged reference; do
	v=$([ $n = forged ] && echo F || echo P)
	printf -v "${v}_first" %s "$(fig $n .first.wall_ms)"
	printf -v "${v}_first_cpu" %s "$(fig $n .first.cpu_ms)"
	printf -v "${v}_rb0" %s "$(fig $n .first.read_bytes)"
	printf -v "${v}_best" %s "$(fig $n '[.runs[].wall_ms] | min')"
	printf -v "${v}_med" %s "$(fig $n "[.runs[].wall_ms] | $MEDIAN")"
	printf -v "${v}_cpu" %s "$(fig $n '[.runs[].cpu_ms] | min')"
	printf -v "${v}_cpu_med" %s "$(fig $n "[.runs[].cpu_ms] | $MEDIAN")"
	printf -v "${v}_rss" %s "$(fig $n '[.runs[].maxrss_kib] | max')"
	printf -v "${v}_floor" %s "$(fig $n '.runs[0].rss_floor_kib')"
	printf -v "${v}_rchar" %s "$(fig $n '.runs | min_by(.wall_ms) | .rchar')"
	printf -v "${v}_flt" %s "$(fig $n '.runs | min_by(.wall_ms) | .minflt + .majflt')"
done
ff_line=""
if command -v perf > /dev/null; then
	echo "forged inspect under perf (page faults by mapping)..."
	ff_line=$("$BENCH_PYTHON" bench/file_faults.py -- "$FORGED" inspect "$DIR" --json --runtime "$RUNTIME") || ff_line=""
fi

ok=$(jq -r .ok "$J")
trunk=$(jq -r '.sets[] | select(.name == "trunk") | "\(.convention) (qk_max \(.qk_max), low_min \(.low_min))"' "$J")
head=$(jq -r '.sets[] | select(.name == "mtp") | "\(.convention) (qk_max \(.qk_max), low_min \(.low_min))"' "$J")
ref_trunk=$(jq -r '.sets.trunk | "\(.convention) (qk_max \(.qk_max), low_min \(.low_min))"' "$R")
ref_head=$(jq -r '.sets.mtp | "\(.convention) (qk_max \(.qk_max), low_min \(.low_min))"' "$R")
n_tensors=$(jq '[.files[].tensors] | add' "$J")
n_files=$(jq '.files | length' "$J")
logical=$(jq '[.files[].bytes] | add' "$J")
ref_tensors=$(jq .tensors "$R")
norm_pages=$(jq .norm_pages "$R")
verdicts=$(jq -r '[.verdicts[] | "\(.severity):\(.code)"] | join(", ") | if . == "" then "none" else . end' "$J")

mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
yesno() { awk "BEGIN { print ($1) ? \"yes\" : \"NO\" }"; }
upper=$((F_rchar + F_flt * 4096))
agree=$([ "$trunk" = "$ref_trunk" ] && [ "$head" = "$ref_head" ] && [ "$n_tensors" = "$ref_tensors" ] && echo yes || echo NO)
ff_text="mmap faults         (perf unavailable: not measured)"
ff_ok="not measured (no perf)"
if [ -n "$ff_line" ]; then
	ff_n=$(field file_faults "$ff_line")
	ff_bound=$((F_rchar + ff_n * 65536))
	ff_text="mmap faults         $ff_n of $(field faults "$ff_line") faults hit the $(field maps "$ff_line") shard/sidecar mappings; rchar + $ff_n x 64 KiB = $ff_bound ($(mib "$ff_bound")), an upper bound"
	ff_ok=$(yesno "$ff_bound < $TARGET_MIB * 1048576")
fi
targets=$(
	row() { printf '  %-52s %s\n' "$1" "$2"; }
	row "under ${TARGET_S} s wall (best warm):" "$(yesno "$F_best < $TARGET_S * 1000")"
	row "under $TARGET_MIB MiB read, rchar alone:" "$(yesno "$F_rchar < $TARGET_MIB * 1048576")"
	row "under $TARGET_MIB MiB read, rchar + mmap faults x 64 KiB:" "$ff_ok"
	row "under $TARGET_MIB MiB read, rchar + all faults x 4 KiB:" "$(yesno "$upper < $TARGET_MIB * 1048576") (loose: counts heap faults)"
	row "faster than the python reference (best warm):" "$(yesno "$F_best < $P_best")"
)
rss_note=""
[ "$F_rss" -le "$((F_floor + 1024))" ] && rss_note=" (at the wrapper's floor of $F_floor KiB: forged's own peak is lower)"

cat <<EOF

==== bench_inspect summary ====
checkpoint          $DIR: $n_files files, $n_tensors tensors, $(awk -v b="$logical" 'BEGIN { printf "%.1f GB", b / 1e9 }') logical ($logical bytes); $du_disk on disk
forged inspect      exit 0, ok=$ok, verdicts: $verdicts
  trunk             $trunk
  mtp head          $head
python reference    trunk $ref_trunk; head $ref_head; $ref_tensors tensors; agrees with forged: $agree
python interpreter  $BENCH_PYTHON
wall, first run     forged $F_first ms   python $P_first ms   (read from storage: forged $(mib "$F_rb0"), python $(mib "$P_rb0"))
cpu, first run      forged $F_first_cpu ms   python $P_first_cpu ms   (user + sys)
wall, warm          forged best $F_best, median $F_med ms   python best $P_best, median $P_med ms   ($REPS interleaved runs each)
cpu, warm           forged best $F_cpu, median $F_cpu_med ms   python best $P_cpu, median $P_cpu_med ms
ratio forged/python wall best $(awk -v a="$F_best" -v b="$P_best" 'BEGIN { printf "%.2fx", a / b }'), cpu best $(awk -v a="$F_cpu" -v b="$P_cpu" 'BEGIN { printf "%.2fx", a / b }') (below 1 = forged faster)
peak RSS            forged $F_rss KiB$rss_note   python $P_rss KiB
bytes read (rchar)  forged $F_rchar ($(mib "$F_rchar"))   python $P_rchar ($(mib "$P_rchar"))   [accounting check: $io_ok]
page faults         forged $F_flt (minor+major); rchar + faults x 4096 = $upper ($(mib "$upper")), an upper bound
norm tensor pages   $norm_pages x 4 KiB = $(mib $((norm_pages * 4096))) (the pages holding norm bytes)
$ff_text
targets for forged (reported, not asserted):
$targets
===============================
EOF
bl set "$FRAG" cases.inspect.extra ok="$ok" agree_with_reference="\"$agree\"" tensors="$n_tensors" \
	files="$n_files" logical_bytes="$logical" forged_rchar="$F_rchar" reference_rchar="$P_rchar" \
	forged_faults="$F_flt" rchar_plus_faults_bound="$upper" norm_pages="$norm_pages" \
	mmap_file_faults="${ff_n:-null}" accounting_check="\"$io_ok\"" forged_rss_kib="$F_rss" \
	reference_rss_kib="$P_rss"
if [ "$ok" != true ] || [ "$agree" != yes ]; then
	echo "bench_inspect: forged and the reference disagree, or ok is not true" >&2
	exit 1
fi
bench_ok
