# lib.sh: shared helpers for the end-to-end scripts (sourced, not run).
#
# Each script runs the real build/forged (FORGED) on generated fixtures
# (FIXTURES) and counts checks; `finish` prints "N passed, N failed" and sets
# the exit status.  Checks assert on values that matter: exit codes, messages,
# JSON fields compared with independent expectations.

: "${FORGED:?FORGED must name the forged binary}"
: "${FIXTURES:=build/fixtures}"
: "${PYTHON:=python3}"
PASS=0
FAIL=0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

ok()   { PASS=$((PASS + 1)); }
bad()  { FAIL=$((FAIL + 1)); printf 'FAIL: %s\n' "$*" >&2; }

# check DESC CMD...: passes when CMD exits 0.
check() {
	local desc=$1; shift
	if "$@"; then ok; else bad "$desc"; fi
}

# run_forged OUT ERR ARGS...: runs forged, stores stdout/stderr, returns its exit code.
run_forged() {
	local out=$1 err=$2; shift 2
	"$FORGED" "$@" >"$out" 2>"$err"
}

finish() {
	printf '%s: %d passed, %d failed\n' "$(basename "$0" .sh)" "$PASS" "$FAIL"
	[ "$FAIL" -eq 0 ]
}
