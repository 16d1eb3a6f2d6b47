#!/usr/bin/env bash
# bench_originals.sh: `forged verify-originals` of an artifact whose originals
# are R references into one source shard of N tensors (a large MoE shard's
# header), against the same check written in Python in the same script.
#
# The shard is gen_fixtures.py's --many-tensors file (bench_tensors.sh's), the
# artifact a folder holding only forged.json: its source path and R reference
# records (tensor, source_file, file_sha256, dtype, offset, length) read from
# the shard's header by the generator, never by forged.  forged hashes the
# shard once and checks each record against the shard's header; the Python
# reference (BENCH_PYTHON) does the same with hashlib and the json module.
# What moved: forged used to parse the shard's header again for each record
# (R x N work); it now keeps the last header open.
#
# Runs are interleaved (forged, base when given, reference), best and median of
# REPS with CPU (user + sys from wait4) beside wall, from bench/measure.py.
# Nothing is asserted about timings; a non-zero exit means a command failed or
# the checks disagreed.
#
#   make && bash bench/bench_originals.sh
#   env: N=100000 R=2000 REPS=3 FORGED=build/forged BASE_FORGED=path/to/another/forged
#        BENCH_QUICK=1: N=5000, R=500, REPS=2
set -euo pipefail
shopt -s inherit_errexit

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# shellcheck source=bench/lib.sh
. bench/lib.sh
N=${N:-$(quick 100000 5000)}
R=${R:-$(quick 2000 500)}
REPS=${REPS:-$(quick 3 2)}
FORGED=${FORGED:-build/forged}
BASE_FORGED=${BASE_FORGED:-}
SRC="$BENCH_DIR/originals_src_$N"
ART="$BENCH_DIR/originals_art_${N}_$R"

[ -x "$FORGED" ] || { echo "bench_originals: $FORGED missing: run make first" >&2; exit 2; }
bench_init originals n_tensors="$N" n_records="$R" reps="$REPS"
if [ ! -s "$SRC/model.safetensors" ] || [ tests/fixtures/gen_fixtures.py -nt "$SRC/model.safetensors" ]; then
	mkdir -p "$SRC"
	"$BENCH_PYTHON" tests/fixtures/gen_fixtures.py --many-tensors "$N" "$SRC/model.safetensors.tmp"
	mv "$SRC/model.safetensors.tmp" "$SRC/model.safetensors"
fi
mkdir -p "$ART"
"$BENCH_PYTHON" - "$SRC" "$ART/forged.json" "$R" <<'PY'
import hashlib, json, struct, sys
src, out, r = sys.argv[1], sys.argv[2], int(sys.argv[3])
path = src + "/model.safetensors"
with open(path, "rb") as f:
    (n,) = struct.unpack("<Q", f.read(8))
    header = json.loads(f.read(n))
sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
names = sorted(k for k in header if k != "__metadata__")
step = max(1, len(names) // r)
recs = []
for name in names[::step][:r]:
    e = header[name]
    b, end = e["data_offsets"]
    recs.append({"form": "reference", "tensor": name, "source_file": "model.safetensors",
                 "file_sha256": sha, "dtype": e["dtype"], "offset": 8 + n + b, "length": end - b})
json.dump({"source": {"path": src}, "originals": recs}, open(out, "w"))
PY

REF='import hashlib, json, struct, sys
art = json.load(open(sys.argv[1] + "/forged.json"))
src = art["source"]["path"]
hashes, headers, bad = {}, {}, 0
for rec in art["originals"]:
    p = src + "/" + rec["source_file"]
    if p not in hashes:
        hashes[p] = hashlib.sha256(open(p, "rb").read()).hexdigest()
        with open(p, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            headers[p] = (n, json.loads(f.read(n)))
    n, h = headers[p]
    e = h.get(rec["tensor"])
    ok = hashes[p] == rec["file_sha256"] and e is not None and e["dtype"] == rec["dtype"] and \
        8 + n + e["data_offsets"][0] == rec["offset"] and e["data_offsets"][1] - e["data_offsets"][0] == rec["length"]
    bad += not ok
sys.exit(1 if bad else 0)'

cmds=(forged "$FORGED" verify-originals "$ART" ::: reference "$BENCH_PYTHON" -c "$REF" "$ART")
cases=(--case verify_originals=forged/reference)
if [ -n "$BASE_FORGED" ]; then
	cmds+=(::: base "$BASE_FORGED" verify-originals "$ART")
	cases+=(--case verify_originals_vs_base=forged/base)
fi
bl abrun "$FRAG" --reps "$REPS" --first "${cases[@]}" --label forged="forged verify-originals ($R records, $N-tensor shard)" \
	--label reference="Python: hashlib + json, each header parsed once" -- "${cmds[@]}"
bench_ok
