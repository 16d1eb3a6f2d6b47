#!/usr/bin/env bash
# A hub file's SHA-256 is its LFS oid, which the hub names in the resolve
# response's X-Linked-Etag (issue 12 item 7): forging a remote hf:// source
# records it in each original (copies, since the source is remote) without
# reading any file whole to hash it, and a second forge served from the pull
# cache's records still knows it.  The hub is lfs_server.py.
set -u
declare -a requests
. "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
FIXTURES=$(cd "$FIXTURES" && pwd)

mkdir -p "$TMP/hub/org"
cp -r "$FIXTURES/qwen35_hf" "$TMP/hub/org/model"
"$PYTHON" "$here/lfs_server.py" "$TMP/hub" "$TMP/port" "$TMP/hub.log" &
SPID=$!
trap 'kill "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null; rm -rf "$TMP"' EXIT
for _ in $(seq 100); do [ -s "$TMP/port" ] && break; sleep 0.05; done
export HF_ENDPOINT=http://127.0.0.1:$(cat "$TMP/port") FORGED_CACHE_DIR=$TMP/cache

for run in 1 2; do
	rc=0
	"$FORGED" forge hf://org/model --backbone "$FIXTURES/qwen35_hf" --out "$TMP/art$run" --json \
		>"$TMP/art$run.json" 2>"$TMP/art$run.err" || rc=$?
	check "run $run: exit 0 ($(head -c 300 "$TMP/art$run.err"))" [ "$rc" -eq 0 ]
	prov=$TMP/art$run/forged.json
	check "run $run: the originals of a remote source are copies" \
		[ "$(jq -r '[.originals[].form] | unique | join(",")' "$prov" 2>/dev/null)" = copy ]
	bad_oids=$(jq -r '.originals[] | .source_file + " " + (.file_sha256 // "null")' "$prov" 2>/dev/null |
		while read -r file oid; do
			[ "$oid" = "$(sha256sum "$TMP/hub/org/model/$file" | cut -d' ' -f1)" ] || echo "$file:$oid"
		done)
	check "run $run: there are originals" [ "$(jq '.originals | length' "$prov" 2>/dev/null || echo 0)" -gt 0 ]
	check "run $run: each original names its hub file's SHA-256, the LFS oid (${bad_oids:-all match})" \
		[ -z "$bad_oids" ]
	check "run $run: verify-originals checks the copies" "$FORGED" verify-originals "$TMP/art$run" --json >/dev/null
	requests[$run]=$(wc -l <"$TMP/hub.log")
done
check "the second run asked the hub nothing: the oids came from the cache's records (${requests[1]} then ${requests[2]} requests)" \
	[ "${requests[2]}" = "${requests[1]}" ]
finish
