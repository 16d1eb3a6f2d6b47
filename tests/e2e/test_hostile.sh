#!/usr/bin/env bash
# Every hand-made hostile file of tests/hostile/ is rejected by `forged tensors`
# with exit 2 and its own message, and nothing is printed on stdout.
set -u
. "$(dirname "$0")/lib.sh"
dir=$(dirname "$0")/../hostile

while IFS=$'\t' read -r file phrase; do
	rc=0
	run_forged "$TMP/out" "$TMP/err" tensors "$dir/$file" --json || rc=$?
	if [ "$rc" -ne 2 ]; then
		bad "$file: exit $rc, want 2 ($(head -c 300 "$TMP/err"))"
		continue
	fi
	if ! grep -qF -- "$phrase" "$TMP/err"; then
		bad "$file: message '$(head -c 300 "$TMP/err")' lacks '$phrase'"
		continue
	fi
	if ! grep -qF -- "$file" "$TMP/err"; then
		bad "$file: message does not name the file"
		continue
	fi
	[ -s "$TMP/out" ] && { bad "$file: printed on stdout"; continue; }
	ok
done < "$dir/expected.tsv"

# Each reason has its own message: no two files share one.
n_files=$(wc -l < "$dir/expected.tsv")
n_msgs=$(for f in $(cut -f1 "$dir/expected.tsv"); do
	"$FORGED" tensors "$dir/$f" 2>&1 >/dev/null | sed "s#$dir/$f##"; done | sort -u | wc -l)
check "distinct messages ($n_msgs for $n_files files)" [ "$n_msgs" -eq "$n_files" ]

# Missing file, a folder, and bad usage.
rc=0; run_forged "$TMP/out" "$TMP/err" tensors "$TMP/nope.safetensors" || rc=$?
check "missing file exits 2" [ "$rc" -eq 2 ]
check "missing file is named" grep -q "nope.safetensors: cannot open" "$TMP/err"
rc=0; run_forged "$TMP/out" "$TMP/err" tensors "$TMP" || rc=$?
check "a folder exits 2" [ "$rc" -eq 2 ]
rc=0; run_forged "$TMP/out" "$TMP/err" tensors || rc=$?
check "no FILE exits 2" [ "$rc" -eq 2 ]
rc=0; run_forged "$TMP/out" "$TMP/err" tensors --bogus x || rc=$?
check "unknown option exits 2" [ "$rc" -eq 2 ]
rc=0; run_forged "$TMP/out" "$TMP/err" frobnicate || rc=$?
check "unknown command exits 2" [ "$rc" -eq 2 ]
for cmd in tensors version; do
	rc=0; run_forged "$TMP/out" "$TMP/err" "$cmd" --help || rc=$?
	check "$cmd --help exits 0" [ "$rc" -eq 0 ]
	check "$cmd --help prints its usage" grep -q "forged $cmd" "$TMP/out"
done
finish
