#!/usr/bin/env bash
# `forged tensors --json` on every generated fixture file, checked against an
# independent reader (tests/fixtures/check_tensors.py parses the bytes itself),
# plus the human listing's header line.
set -u
. "$(dirname "$0")/lib.sh"
checker=$(dirname "$0")/../fixtures/check_tensors.py

n=0
while IFS= read -r -d '' f; do
	n=$((n + 1))
	rc=0
	run_forged "$TMP/out.json" "$TMP/err" tensors "$f" --json || rc=$?
	if [ "$rc" -ne 0 ]; then
		bad "$f: exit $rc ($(head -c 300 "$TMP/err"))"
		continue
	fi
	if "$PYTHON" "$checker" "$f" "$TMP/out.json" >"$TMP/check" 2>&1; then ok; else
		bad "$f: $(head -c 500 "$TMP/check")"
	fi
done < <(find "$FIXTURES" -name '*.safetensors' -print0 | sort -z)
check "fixture files found ($n)" [ "$n" -gt 20 ]

# The schema and the tensor count are what a CI job reads first.
f=$FIXTURES/qwen35_mlx_sidecar/mtp.safetensors
run_forged "$TMP/out.json" "$TMP/err" tensors "$f" --json
check "schema" [ "$(jq -r .schema "$TMP/out.json")" = "forged.tensors.v1" ]
want=$("$PYTHON" -c 'import json,struct,sys
b=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",b[:8])[0]
print(len([k for k in json.loads(b[8:8+n]) if k!="__metadata__"]))' "$f")
check "tensor count ($want)" [ "$(jq '.tensors|length' "$TMP/out.json")" = "$want" ]
check "metadata format mlx" [ "$(jq -r .metadata.format "$TMP/out.json")" = "mlx" ]
run_forged "$TMP/out.txt" "$TMP/err" tensors "$f"
check "human listing names the file and count" grep -q "^$f: $want tensors" "$TMP/out.txt"
finish
