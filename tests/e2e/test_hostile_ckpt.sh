#!/usr/bin/env bash
# Hostile checkpoint folders (issue 11, "A hostile world"): links out of the
# folder, FIFOs, files that are no regular files, declared sizes that would
# make forged work without bound, an expert count that wraps, 100,000 shards.
# Each case names the finding it pins.
set -u
. "$(dirname "$0")/lib.sh"
SRC=$FIXTURES/qwen35_mlx_sidecar

# jqt FILTER FILE: true when FILTER holds (jq -e, quietly)
jqt() { jq -e "$1" "$2" >/dev/null; }

# fresh NAME: a copy of the sidecar fixture in $TMP/NAME (echoes the path)
fresh() { rm -rf "${TMP:?}/$1"; cp -r "$SRC" "$TMP/$1"; echo "$TMP/$1"; }

# tiny_shard PATH NAME... : a shard of 1-element F32 tensors
tiny_shard() {
	"$PYTHON" - "$@" <<'EOF'
import json, struct, sys
path, names = sys.argv[1], sys.argv[2:]
hdr = {n: {"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]} for i, n in enumerate(names)}
text = json.dumps(hdr).encode()
with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + struct.pack("<f", 1.0) * len(names))
EOF
}

# ---- finding 2: links beneath the folder are not followed ----
OUT=$TMP/outside
mkdir -p "$OUT"
cp "$FIXTURES/qwen35_hf/model-00001-of-00002.safetensors" "$OUT/model.safetensors"
D=$(fresh link_out)
ln -s "$OUT/model.safetensors" "$D/model-00003-of-00003.safetensors"
rc=0; run_forged "$TMP/o" "$TMP/e" inspect "$D" --json || rc=$?
check "2: a shard linked out of the folder is refused (exit 1, got $rc)" [ "$rc" -eq 1 ]
check "2: ... as unreadable_shard naming mlx-lm" \
	jqt '[.verdicts[] | select(.code == "unreadable_shard" and (.runtimes | index("mlx-lm-0.31")))] | length == 1' "$TMP/o"
check "2: ... and its tensors are not inspected" \
	jqt '[.files[].name] | index("model-00003-of-00003.safetensors") == null' "$TMP/o"

D=$(fresh passwd)
rm -f "$D"/model-*.safetensors "$D/model.safetensors.index.json"
ln -s /etc/passwd "$D/model.safetensors"
leak=$("$PYTHON" -c 'import struct; print(struct.unpack("<Q", open("/etc/passwd","rb").read(8))[0])')
rc=0; run_forged "$TMP/o" "$TMP/e" inspect "$D" || rc=$?
check "2: model.safetensors -> /etc/passwd is refused (got $rc)" [ "$rc" -eq 1 -o "$rc" -eq 2 ]
check "2: ... and its first 8 bytes are not echoed" bash -c "! grep -q '$leak' '$TMP/e' '$TMP/o'"
rc=0; run_forged "$TMP/o" "$TMP/e" inspect "$D" --follow-symlinks || rc=$?
check "2: ... not echoed either when links are followed" bash -c "! grep -q '$leak' '$TMP/e' '$TMP/o'"

D=$(fresh environ)
ln -s /proc/self/environ "$D/tokenizer_config.json"
echo '{"ok": true}' > "$D/generation_config.json"
rc=0
FORGED_TEST_SECRET=hf_s3cr3t_token "$FORGED" forge "$D" --out "$TMP/environ_art" --json >"$TMP/o" 2>"$TMP/e" || rc=$?
check "2: a forge with a linked tokenizer_config.json succeeds (exit $rc: $(head -c 200 "$TMP/e"))" [ "$rc" -eq 0 ]
check "2: ... without copying the link's target" [ ! -e "$TMP/environ_art/tokenizer_config.json" ]
check "2: ... no file of the artifact holds the environment" bash -c "! grep -rq hf_s3cr3t_token '$TMP/environ_art'"
check "2: ... regular extras are still carried" [ -f "$TMP/environ_art/generation_config.json" ]

# A Hugging Face cache snapshot: every file a link into ../../blobs.
HF=$TMP/hub/models--org--m
mkdir -p "$HF/blobs" "$HF/snapshots/abc"
for f in "$FIXTURES"/qwen35_hf/*; do
	b=$(sha256sum "$f" | cut -c1-40)
	cp "$f" "$HF/blobs/$b"
	ln -s "../../blobs/$b" "$HF/snapshots/abc/$(basename "$f")"
done
rc=0; run_forged "$TMP/o" "$TMP/e" inspect "$HF/snapshots/abc" --json || rc=$?
check "2: an HF cache snapshot is refused by default (exit 2, got $rc)" [ "$rc" -eq 2 ]
check "2: ... saying why" grep -q "symbolic link" "$TMP/e"
rc=0; run_forged "$TMP/o" "$TMP/e" inspect "$HF/snapshots/abc" --json --follow-symlinks || rc=$?
want=0; "$FORGED" inspect "$FIXTURES/qwen35_hf" >/dev/null 2>&1 || want=$?
check "2: ... and read with --follow-symlinks (exit $rc, the folder itself: $want)" [ "$rc" -eq "$want" ]

# ---- finding 3: a FIFO config.json or index does not wedge forged ----
for name in config.json model.safetensors.index.json; do
	D=$(fresh "fifo_${name%%.*}")
	rm -f "$D/$name"
	mkfifo "$D/$name"
	rc=0; timeout 20 "$FORGED" inspect "$D" >"$TMP/o" 2>"$TMP/e" || rc=$?
	check "3: a FIFO $name exits 2 at once (got $rc)" [ "$rc" -eq 2 ]
	check "3: ... saying it is no regular file" grep -q "not a regular file" "$TMP/e"
done

# ---- finding 5: work is bounded by caps, not by declared sizes ----
D=$(fresh huge_norm)
"$PYTHON" - "$D/model-00003-of-00003.safetensors" <<'EOF'
import json, struct, sys
n = 1 << 38  # 2^38 F32 = 1 TiB, a sparse file
hdr = json.dumps({"language_model.model.layers.0.self_attn.q_norm.weight":
                  {"dtype": "F32", "shape": [n], "data_offsets": [0, 4 * n]}}).encode()
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(hdr)) + hdr)
    f.truncate(8 + len(hdr) + 4 * n)
EOF
start=$(date +%s)
rc=0; timeout 60 "$FORGED" inspect "$D" --json >"$TMP/o" 2>"$TMP/e" || rc=$?
took=$(($(date +%s) - start))
check "5: a 1 TiB sparse norm is refused (exit 1, got $rc)" [ "$rc" -eq 1 ]
check "5: ... in seconds, not minutes ($took s)" [ "$took" -le 10 ]
check "5: ... as malformed_checkpoint" jqt '[.verdicts[].code] | index("malformed_checkpoint") != null' "$TMP/o"

# The same norm at 4 GiB, remote: the cap keeps it from being fetched.
if command -v nginx >/dev/null; then
	. "$(dirname "$0")/nginx_lib.sh"
	mkdir -p "$TMP/web/org"
	D=$(fresh huge_remote)
	"$PYTHON" - "$D/model-00003-of-00003.safetensors" <<'EOF2'
import json, struct, sys
n = 1 << 30  # 2^30 F32 = 4 GiB, sparse
hdr = json.dumps({"language_model.model.layers.0.self_attn.k_norm.weight":
                  {"dtype": "F32", "shape": [n], "data_offsets": [0, 4 * n]}}).encode()
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(hdr)) + hdr)
    f.truncate(8 + len(hdr) + 4 * n)
EOF2
	"$PYTHON" - "$D" <<'EOF2'
import json, sys
p = sys.argv[1] + "/model.safetensors.index.json"
ix = json.load(open(p))
ix["weight_map"]["language_model.model.layers.0.self_attn.k_norm.weight"] = "model-00003-of-00003.safetensors"
json.dump(ix, open(p, "w"))
EOF2
	mv "$D" "$TMP/web/org/m"
	if nginx_start "$TMP/web" "$TMP/nginx"; then
		export FORGED_CACHE_DIR=$TMP/cache
		rc=0; timeout 120 "$FORGED" inspect "$NGINX_URL/org/m/resolve/main/" --json >"$TMP/o" 2>"$TMP/e" || rc=$?
		got=$(awk '$1 ~ /^2/ {s += $2} END {print s + 0}' "$NGINX_LOG")
		check "5: a remote 4 GiB norm is refused (exit 1, got $rc: $(head -c 200 "$TMP/e"))" [ "$rc" -eq 1 ]
		check "5: ... after $got bytes, not 4 GiB" [ "$got" -lt $((64 << 20)) ]
		check "5: ... the report gives the pull's cap" jqt '.remote.max_bytes > 0' "$TMP/o"
		nginx_stop 2>/dev/null || true
	else
		bad "5: nginx did not start"
	fi
fi

D=$(fresh many_nodes)
"$PYTHON" - "$D/config.json" <<'EOF'
import json, sys
cfg = json.load(open(sys.argv[1]))
cfg["pad"] = [[] for _ in range(300000)]
open(sys.argv[1], "w").write(json.dumps(cfg, separators=(",", ":")))
EOF
rc=0; run_forged "$TMP/o" "$TMP/e" inspect "$D" || rc=$?
check "5: a config.json of 300,000 values exits 2 (got $rc)" [ "$rc" -eq 2 ]
check "5: ... naming the cap" grep -q "JSON values exceed the cap" "$TMP/e"
D=$(fresh big_config)
"$PYTHON" -c "import sys; open(sys.argv[1], 'w').write('{\"pad\": \"' + 'x' * (5 << 20) + '\"}')" "$D/config.json"
rc=0; run_forged "$TMP/o" "$TMP/e" inspect "$D" || rc=$?
check "5: a 5 MiB config.json exits 2 (got $rc)" [ "$rc" -eq 2 ]

# ---- finding 13: a numbered expert count that wraps is an input error ----
D=$(fresh experts_wrap)
"$PYTHON" - "$D/mtp.safetensors" <<'EOF'
import json, struct, sys
names = ["mtp.layers.0.mlp.experts.0.gate_proj.weight",
         "mtp.layers.0.mlp.experts.6148914691236517205.gate_proj.weight"]
hdr = {n: {"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]} for i, n in enumerate(names)}
text = json.dumps(hdr).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(text)) + text + struct.pack("<f", 1.0) * 2)
EOF
rc=0; run_forged "$TMP/o" "$TMP/e" inspect "$D" || rc=$?
check "13: experts 0 and 6148914691236517205 exit 2 (got $rc)" [ "$rc" -eq 2 ]
check "13: ... naming the number" grep -q "expert number 6148914691236517205" "$TMP/e"
rc=0; run_forged "$TMP/o" "$TMP/e" forge "$D" --out "$TMP/wrap_art" || rc=$?
check "13: ... and so does the forge (got $rc)" [ "$rc" -eq 2 ]

# ---- finding 14: non-regular shards are reported, not skipped ----
D=$(fresh odd_shards)
mkfifo "$D/model-00003-of-00005.safetensors"
ln -s /dev/zero "$D/model-00004-of-00005.safetensors"
ln -s model-00005-of-00005.safetensors "$D/model-00005-of-00005.safetensors"
for follow in "" --follow-symlinks; do
	rc=0; timeout 20 "$FORGED" inspect "$D" --json $follow >"$TMP/o" 2>"$TMP/e" || rc=$?
	check "14: a FIFO, a /dev/zero link and a link loop fail the report (exit 1, got $rc) $follow" [ "$rc" -eq 1 ]
	check "14: ... one unreadable_shard each $follow" \
		jqt '[.verdicts[] | select(.code == "unreadable_shard")] | length == 3' "$TMP/o"
	check "14: ... naming the runtimes that glob $follow" \
		jqt '[.verdicts[] | select(.code == "unreadable_shard") | .runtimes | index("mlx-lm-0.32")] | all' "$TMP/o"
done

# ---- finding 15: 100,000 shards (the documented cap) open ----
D=$TMP/many
mkdir -p "$D"
echo '{"model_type": "llama", "num_hidden_layers": 1}' > "$D/config.json"
"$PYTHON" - "$D" 100000 <<'EOF'
import json, os, struct, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    name = f"model.layers.0.mlp.w{i}"
    text = json.dumps({name: {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    with open(os.path.join(d, f"model-{i:06d}-of-{n:06d}.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"\0\0\x80?")
EOF
start=$(date +%s)
rc=0; timeout 300 "$FORGED" inspect "$D" --json >"$TMP/o" 2>"$TMP/e" || rc=$?
took=$(($(date +%s) - start))
check "15: 100,000 shards inspect (exit $rc: $(head -c 200 "$TMP/e"))" [ "$rc" -eq 0 ]
check "15: ... all of them" jqt '.files | length == 100000' "$TMP/o"
echo "15: 100,000 shards: $took s"; check "15: ... in under a minute ($took s)" [ "$took" -lt 60 ]
finish
