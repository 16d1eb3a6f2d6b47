# lib.sh: shared helpers for the end-to-end scripts (sourced, not run).
#
# Each script runs the real build/forged (FORGED) on generated fixtures
# (FIXTURES) and counts checks; `finish` prints "N passed, N failed" and sets
# the exit status.  Checks assert on values that matter: exit codes, messages,
# JSON fields compared with independent expectations.  start_server and
# stop_server run `forged serve` on an ephemeral port.

: "${FORGED:?FORGED must name the forged binary}"
: "${FIXTURES:=build/fixtures}"
: "${PYTHON:=python3}"
PASS=0
FAIL=0
TMP=$(mktemp -d)

# On exit: every process handed to kill_on_exit (each server start_server
# starts among them) is killed and reaped, then the script's own on_exit
# function runs if it defines one, then $TMP is removed.  nginx_lib.sh chains
# its own stop in front of this trap.
LIB_PIDS=""
kill_on_exit() { LIB_PIDS="$LIB_PIDS $*"; }
_lib_exit() {
	local p
	for p in $LIB_PIDS; do kill -KILL "$p" 2>/dev/null; done
	for p in $LIB_PIDS; do wait "$p" 2>/dev/null; done
	if declare -F on_exit >/dev/null; then on_exit; fi
	rm -rf "$TMP"
}
trap _lib_exit EXIT

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

# start_server NAME ARGS...: `forged serve --listen 127.0.0.1:0 ARGS...` in the
# background, with the VAR=VALUE words of SERVER_ENV in its environment and
# its stdout and stderr in $TMP/NAME.log; killed on exit.  Sets SPID, PORT
# (the ephemeral port, from the log's "listening on ADDR port N," line) and
# BASE (http://127.0.0.1:PORT) once /readyz answers 200.  When the server
# exits first or never gets ready: one failed check (bad) and status 1.
start_server() {
	local name=$1 i
	shift
	# shellcheck disable=SC2086
	env ${SERVER_ENV:-} "$FORGED" serve --listen 127.0.0.1:0 "$@" >"$TMP/$name.log" 2>&1 &
	SPID=$!
	kill_on_exit "$SPID"
	PORT=""
	for i in $(seq 1 300); do
		PORT=$(sed -n 's/.*listening on [^ ]* port \([0-9][0-9]*\),.*/\1/p' "$TMP/$name.log")
		[ -n "$PORT" ] && break
		kill -0 "$SPID" 2>/dev/null || break
		sleep 0.05
	done
	if [ -z "$PORT" ]; then
		bad "$name: the server did not start: $(tail -n 3 "$TMP/$name.log")"
		return 1
	fi
	BASE=http://127.0.0.1:$PORT
	for i in $(seq 1 100); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$BASE/readyz")" = 200 ] && return 0
		sleep 0.1
	done
	bad "$name: /readyz never answered 200"
	return 1
}

# stop_server PID SECONDS: SIGTERM, then wait at most SECONDS for it to exit;
# its exit status in STOP_RC (999: still running).
stop_server() {
	local pid=$1 i
	kill -TERM "$pid" 2>/dev/null
	STOP_RC=999
	for i in $(seq 1 $(($2 * 10))); do
		if ! kill -0 "$pid" 2>/dev/null; then
			STOP_RC=0
			wait "$pid" 2>/dev/null || STOP_RC=$?
			return 0
		fi
		sleep 0.1
	done
}

finish() {
	printf '%s: %d passed, %d failed\n' "$(basename "$0" .sh)" "$PASS" "$FAIL"
	[ "$FAIL" -eq 0 ]
}
