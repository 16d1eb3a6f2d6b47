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
	local p db
	for p in $LIB_PIDS; do kill -KILL "$p" 2>/dev/null; done
	for p in $LIB_PIDS; do wait "$p" 2>/dev/null; done
	if declare -F on_exit >/dev/null; then on_exit; fi
	if [ -f "$TMP/pg_dbs" ]; then
		while read -r db; do
			psql -q -X "$FORGED_TEST_PG" -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null 2>&1
		done <"$TMP/pg_dbs"
	fi
	# KEEP_TMP=1 keeps the logs and state for a look after a failure.
	if [ -n "${KEEP_TMP:-}" ]; then echo "kept $TMP" >&2; else rm -rf "$TMP"; fi
}

# The store the servers of a script use: FORGED_E2E_STORE=postgres (the
# *_pg.sh wrappers) gives each state folder a database of its own on the
# cluster of FORGED_TEST_PG (tests/run_all.sh starts one, tests/pg_cluster.sh),
# dropped on exit; the default is each state folder's SQLite file.
# A postgres run without a cluster prints why it is skipped and exits 0
# (at the end of this file).
E2E_STORE=${FORGED_E2E_STORE:-sqlite}
# store_db STATE_DIR: the database name of that state folder's server (postgres).
store_db() { echo "e2e_$(basename "$1" | tr -c 'a-z0-9_\n' '_')_$$"; }
# store_url STATE_DIR: the libpq URL of that database.
store_url() { echo "postgresql:///$(store_db "$1")?host=$FORGED_TEST_PG_SOCKET&user=forged"; }
# store_args STATE_DIR: the --store flag of a server with that state folder
# (postgres: its database, created on first use); nothing on SQLite.
# Status 1 when the database cannot be created (the caller counts it).
store_args() {
	local db
	[ "$E2E_STORE" = postgres ] || return 0
	db=$(store_db "$1")
	if ! grep -qx "$db" "$TMP/pg_dbs" 2>/dev/null; then
		pg_createdb "$db" >/dev/null || return 1
		echo "$db" >>"$TMP/pg_dbs"
	fi
	echo "--store $(store_url "$1")"
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
# its stdout and stderr in $TMP/NAME.log; killed on exit; under
# FORGED_E2E_STORE=postgres with --store naming the database of its
# --state-dir (store_args).  Sets SPID, PORT
# (the ephemeral port, from the log's "listening on ADDR port N," line) and
# BASE (http://127.0.0.1:PORT) once /readyz answers 200.  When the server
# exits first or never gets ready: one failed check (bad) and status 1.
start_server() {
	local name=$1 i a prev="" sa=""
	shift
	for a in "$@"; do
		if [ "$prev" = --state-dir ]; then
			sa=$(store_args "$a") || { bad "$name: cannot create the database of $a"; return 1; }
		fi
		prev=$a
	done
	# shellcheck disable=SC2086
	env ${SERVER_ENV:-} "$FORGED" serve --listen 127.0.0.1:0 $sa "$@" >"$TMP/$name.log" 2>&1 &
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

if [ "$E2E_STORE" = postgres ]; then
	if [ -z "${FORGED_TEST_PG:-}" ]; then
		echo "$(basename "$0" .sh): skipped: FORGED_TEST_PG is not set (tests/run_all.sh starts a PostgreSQL cluster when it is installed)"
		finish
		exit 0
	fi
	. "$(dirname "${BASH_SOURCE[0]}")/../pg_cluster.sh"
fi
