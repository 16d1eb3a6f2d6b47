#!/usr/bin/env bash
# Remote sources (forge/pull) against a real nginx on loopback serving the
# generated fixtures under the Hugging Face layout (tests/e2e/nginx_lib.sh).
#
# The HTTP checks live in build/tests/test_pull (tests/unit/test_pull.c),
# which runs them when FORGED_TEST_BASE_URL is set; each of its cmocka
# results counts here.  This script adds what it can see from outside: the
# access log (bytes nginx sent to a client that dropped a Range-ignoring
# transfer, a second pass over a cache making no request, a corrupted cache
# entry refetched with exactly one request) and the cache folder itself.
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nginx_lib.sh"

BUILD=$(cd "$(dirname "$FORGED")" && pwd)
TEST_PULL=$BUILD/tests/test_pull
MB=$((1024 * 1024))
BLOB_SIZE=$((96 * MB))

if ! [ -x "$NGINX_BIN" ]; then
	bad "nginx is not installed (make deps installs it)"
	finish
	exit
fi
if ! [ -x "$TEST_PULL" ]; then
	bad "$TEST_PULL is missing (make $TEST_PULL)"
	finish
	exit
fi
[ -f "$FIXTURES/manifest.json" ] || "$PYTHON" tests/fixtures/gen_fixtures.py "$FIXTURES" >/dev/null

# The served tree: fx/<fixture> is every generated fixture, big/data holds a
# 96 MiB blob under three names (tail.bin and model.bin are links to it).
ROOT=$TMP/root
mkdir -p "$ROOT/big/data"
ln -s "$(cd "$FIXTURES" && pwd)" "$ROOT/fx"
head -c "$BLOB_SIZE" /dev/urandom >"$ROOT/big/data/blob.bin"
ln -s blob.bin "$ROOT/big/data/tail.bin"
ln -s blob.bin "$ROOT/big/data/model.bin"

if ! nginx_start "$ROOT" "$TMP/nginx"; then
	bad "nginx did not start"
	finish
	exit
fi
ok

export FORGED_TEST_BASE_URL=$NGINX_URL
export FORGED_TEST_NORANGE_URL=$NGINX_URL/norange
export FORGED_TEST_SLOW_URL=$NGINX_URL/slow
export FORGED_TEST_LOCAL_ROOT=$ROOT
export FORGED_TEST_ACCESS_LOG=$NGINX_LOG
export FORGED_TEST_CACHE_DIR=$TMP/cache
export FORGED_TEST_HUB_COMMIT=$NGINX_HUB_COMMIT
FORGED_TEST_KILL_CMD=$(nginx_kill_workers_cmd)
export FORGED_TEST_KILL_CMD
mkdir -p "$FORGED_TEST_CACHE_DIR"

# run_phase PHASE: run test_pull's group for PHASE and count its results.
run_phase() {
	local out=$TMP/phase_$1.log p f
	FORGED_TEST_PHASE=$1 timeout 300 "$TEST_PULL" >"$out" 2>&1
	local st=$?
	p=$(sed -n 's/.*\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$out" | tail -n 1)
	f=$(sed -n 's/.*\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$out" | tail -n 1)
	PASS=$((PASS + ${p:-0}))
	FAIL=$((FAIL + ${f:-0}))
	if [ "$st" -ne 0 ] || [ -n "$f" ]; then
		[ -n "$f" ] || FAIL=$((FAIL + 1))
		bad "test_pull phase $1 (exit $st):"
		grep -vE '^\[ (RUN|      OK) ' "$out" | head -n 40 >&2
	fi
}

run_phase main

# A client that wants a few KB of a 64 MiB file from a server that ignores
# Range must drop the transfer: nginx logs how much it managed to send.
norange=$(grep -c '"GET /norange/big/data/resolve/main/blob.bin ' "$NGINX_LOG")
check "norange: requests logged ($norange)" [ "$norange" -ge 2 ]
worst=$(awk '$3 == "\"GET" && $4 ~ /^\/norange\/big\/data\/resolve\/main\/blob.bin$/ { if ($2 > m) m = $2 } END { print m + 0 }' "$NGINX_LOG")
check "norange: at most $worst of $BLOB_SIZE bytes sent per request" [ "$worst" -lt $((BLOB_SIZE / 4)) ]
check "norange: every such request was answered 200" \
	[ "$(grep '"GET /norange/big/data/resolve/main/blob.bin ' "$NGINX_LOG" | grep -vc '^200 ')" = 0 ]

# The cache seen from outside: a cold pass, a warm pass with no request, a
# corrupted entry refetched by exactly one request, then warm again.
n0=$(nginx_log_lines)
run_phase cold
n1=$(nginx_log_lines)
check "cold pass: 7 requests logged ($((n1 - n0)))" [ $((n1 - n0)) -eq 7 ]
run_phase warm
n2=$(nginx_log_lines)
check "warm pass: no request logged ($((n2 - n1)))" [ "$n2" -eq "$n1" ]
entry=$(find "$FORGED_TEST_CACHE_DIR/shell/v1/ranges" -type f -size +4k | head -n 1)
check "a cache entry to corrupt" [ -n "$entry" ]
if [ -n "$entry" ]; then
	"$PYTHON" - "$entry" <<'EOF'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(100)
    b = f.read(1)
    f.seek(100)
    f.write(bytes([b[0] ^ 0x40]))
EOF
	sum_bad=$(sha256sum "$entry" | cut -d' ' -f1)
	run_phase refetch
	n3=$(nginx_log_lines)
	check "refetch: one request logged ($((n3 - n2)))" [ $((n3 - n2)) -eq 1 ]
	check "refetch: the entry was rewritten" [ "$(sha256sum "$entry" | cut -d' ' -f1)" != "$sum_bad" ]
	run_phase warm
	check "warm again: no request logged" [ "$(nginx_log_lines)" -eq "$n3" ]
fi

# No cache folder holds a half-written file.
check "no tmp file left in any cache" \
	[ "$(find "$FORGED_TEST_CACHE_DIR" -path '*/v1/tmp/*' -type f | wc -l)" -eq 0 ]
check "the disconnect left only the resumed entry" \
	[ "$(find "$FORGED_TEST_CACHE_DIR/disconnect/v1/ranges" -type f | wc -l)" -eq 1 ]

nginx_stop
finish
