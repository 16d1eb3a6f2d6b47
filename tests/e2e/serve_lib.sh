# serve_lib.sh: helpers for the scripts that drive `forged serve` with curl
# (sourced after lib.sh, not run): http, post, get, header, jb, expect,
# expect_problem, poll_job; start_server and stop_server are lib.sh's.

FIXTURES=$(cd "$FIXTURES" && pwd)
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# Servers a script starts itself go in PIDS (start_server's are lib.sh's
# kill_on_exit); on exit both are killed, then lib.sh's exit runs (the
# databases of a FORGED_E2E_STORE=postgres run dropped, $TMP removed unless
# KEEP_TMP=1 keeps the logs and state for a look after a failure).
PIDS=""
cleanup() {
	local p
	for p in $PIDS; do kill -KILL "$p" 2>/dev/null; done
	for p in $PIDS; do wait "$p" 2>/dev/null; done
	_lib_exit
}
trap cleanup EXIT

RTOK=e2e-read-token-5be1
WTOK=e2e-write-token-c3d9
sha() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
printf 'read ci-reader %s\nwrite ci-writer %s\n' "$(sha "$RTOK")" "$(sha "$WTOK")" >"$TMP/tokens"

# http METHOD PATH [CURL ARGS...]: status in $CODE, body in $TMP/body, headers in $TMP/hdr.
http() {
	local m=$1 p=$2 how=(-X "$1")
	shift 2
	local out=$TMP/body
	# curl -X HEAD would wait for the body Content-Length announces; --head writes the headers to -o.
	[ "$m" = HEAD ] && how=(--head) && out=/dev/null
	# curl leaves -o alone when there is no body (304, HEAD): the last body must not linger.
	: >"$TMP/body"
	CODE=$(curl -sS -o "$out" -D "$TMP/hdr" -w '%{http_code}' --max-time "${HTTP_MAX_TIME:-120}" "${how[@]}" "$@" \
		"$BASE$p" 2>"$TMP/curl.err") || CODE=000
}
R=(-H "Authorization: Bearer $RTOK")
W=(-H "Authorization: Bearer $WTOK")
J=(-H "Content-Type: application/json")
# post PATH JSON [CURL ARGS...]: a write-token JSON POST.
post() {
	local p=$1 body=$2
	shift 2
	http POST "$p" "${W[@]}" "${J[@]}" --data-binary "$body" "$@"
}
get() { http GET "$1" "${R[@]}"; }
# header NAME: the last response's header value (CR stripped).
header() { sed -n "s/^$1: *//Ip" "$TMP/hdr" | tr -d '\r' | tail -n 1; }
# jb [JQ OPTIONS] FILTER: jq -r on the last response body.
jb() { jq -r "$@" "$TMP/body" 2>/dev/null; }
# expect DESC STATUS: the last response has STATUS (else the body is shown).
expect() {
	if [ "$CODE" = "$2" ]; then ok; else bad "$1: HTTP $CODE, want $2: $(head -c 400 "$TMP/body")"; fi
}
# expect_problem DESC STATUS SLUG: STATUS, application/problem+json, type urn:forged:problem:SLUG.
expect_problem() {
	local ct type
	ct=$(header Content-Type)
	type=$(jb .type)
	if [ "$CODE" != "$2" ] || [ "$ct" != application/problem+json ] || [ "$type" != "urn:forged:problem:$3" ] ||
		[ "$(jb .status)" != "$2" ] || [ -z "$(jb .title)" ]; then
		bad "$1: HTTP $CODE $ct type $type, want $2 problem+json $3: $(head -c 300 "$TMP/body")"
	else
		ok
	fi
}
# expect_pointers DESC P1,P2,...: the last problem's errors[] name exactly these JSON pointers (sorted).
expect_pointers() {
	local got
	got=$(jb '[.errors[]?.pointer] | sort | join(",")')
	if [ "$got" = "$2" ]; then ok; else bad "$1: errors name '$got', want '$2': $(head -c 400 "$TMP/body")"; fi
}
# poll_job ID STATE TRIES: poll GET /v1/jobs/ID every 0.2 s until STATE; the job in $TMP/body.
poll_job() {
	local i
	for i in $(seq 1 "$3"); do
		get "/v1/jobs/$1"
		[ "$CODE" = 200 ] && [ "$(jb .state)" = "$2" ] && return 0
		case "$(jb .state)" in failed | cancelled | succeeded) [ "$(jb .state)" != "$2" ] && return 1 ;; esac
		sleep 0.2
	done
	return 1
}
# valid_utf8 FILE: the file decodes as strict UTF-8 (what a strict client does).
valid_utf8() { "$PYTHON" -c 'import sys; open(sys.argv[1], "rb").read().decode("utf-8", "strict")' "$1" 2>/dev/null; }
# no_sanitizer_report: no ASan/UBSan/TSan report in any server log so far.
no_sanitizer_report() { [ -z "$(grep -l 'Sanitizer\|runtime error:' "$TMP"/*.log 2>/dev/null)" ]; }

# sqlite_state WHY: STATE=$TMP/state, a state folder whose SQLite database has
# forged's schema (a server started and stopped on it), for scripts that then
# write rows or hold locks in that file themselves.  Under
# FORGED_E2E_STORE=postgres the script says WHY it needs SQLite and ends.
sqlite_state() {
	if [ "$E2E_STORE" = postgres ]; then
		echo "$(basename "$0" .sh): $1: SQLite only"
		finish
		exit 0
	fi
	STATE=$TMP/state
	start_server boot --state-dir "$STATE" --tokens-file "$TMP/tokens" --workers 0 || { finish; exit 1; }
	stop_server "$SPID" 10
	check "forged made the schema" [ -f "$STATE/forged.db" ]
}
