#!/usr/bin/env bash
# `forged serve` in a hostile world (issue 11, the API and daemon findings):
# a SIGTERM landing in the middle of a job (under `make SANITIZE=address,undefined
# test` this is where a use-after-free showed), clients answered 503 during
# the drain, a FIFO where a checkpoint file should be, trickling sockets,
# bodies refused before they are read, invalid UTF-8 and NUL characters in
# requests and in file names, tokens files with over-long lines, numbers too
# large for an integer, and the protocol details (HEAD, cursors, outputs).
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/serve_lib.sh"

# A checkpoint host that sends 10 kB/s: a remote forge of qwen35_hf takes ~15 s.
mkdir -p "$TMP/hub"
ln -s "$FIXTURES/qwen35_hf" "$TMP/hub/qwen35_hf"
"$PYTHON" "$REPO/tests/e2e/slow_http.py" "$TMP/hub" 10000 "$TMP/slow.port" 2>"$TMP/slow.err" &
PIDS="$PIDS $!"
for i in $(seq 1 100); do [ -s "$TMP/slow.port" ] && break; sleep 0.05; done
SLOW=127.0.0.1:$(cat "$TMP/slow.port")

# ---- 1. SIGTERM while a job runs: the workers stop before the API is freed ----
# The job is still fetching when SIGTERM lands and when the drain ends, so it
# is stopped and requeued while the API still exists (it was freed first:
# fg_api_job_finished wrote into freed memory, which ASan reports).  During
# the drain clients get 503 draining with Retry-After, not connection refused.
DSTATE=$TMP/dstate
start_server drain --state-dir "$DSTATE" --allow-roots "$FIXTURES" --allow-hosts "$SLOW" \
	--tokens-file "$TMP/tokens" --workers 1 --drain-seconds 3 || { finish; exit 1; }
DPID=$SPID
post /v1/jobs "{\"kind\": \"forge\", \"source\": \"http://$SLOW/qwen35_hf/\", \"backbone\": \"qwen35_hf\"}"
expect "drain: remote job accepted" 202
DJOB=$(jb .id)
for i in $(seq 1 100); do
	get "/v1/jobs/$DJOB"
	[ "$(jb .state)" = running ] && case "$(jb .stage)" in fetch*) break ;; esac
	sleep 0.1
done
check "drain: the job is running a fetch when SIGTERM lands ($(jb '.state + " " + .stage'))" \
	[ "$(jb .state)" = running ]
kill -TERM "$DPID"
for i in $(seq 1 30); do grep -q "SIGTERM: draining" "$TMP/drain.log" && break; sleep 0.05; done
sleep 0.3
HTTP_MAX_TIME=5 get "/v1/jobs/$DJOB"
expect_problem "drain: a request during the drain is 503 draining" 503 draining
check "drain: Retry-After on the 503" [ -n "$(header Retry-After)" ]
http GET /livez
expect "drain: /livez still answers" 200
http GET /readyz
expect "drain: /readyz is 503" 503
for i in $(seq 1 150); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.1; done
rc=999
kill -0 "$DPID" 2>/dev/null || { rc=0; wait "$DPID" || rc=$?; }
check "drain: exit 0 after the drain (status $rc)" [ "$rc" = 0 ]
check "drain: the job went back to the queue" grep -q "job $DJOB: stopped for shutdown, back in the queue" "$TMP/drain.log"
check "drain: no sanitizer report ($(grep -m1 -h 'Sanitizer\|runtime error:' "$TMP/drain.log"))" no_sanitizer_report
check "drain: stopped logged" grep -q " stopped$" "$TMP/drain.log"
start_server drain2 --state-dir "$DSTATE" --allow-roots "$FIXTURES" --tokens-file "$TMP/tokens" --workers 0 ||
	{ finish; exit 1; }
get "/v1/jobs/$DJOB"
check "drain: after a restart the job is queued, not running or failed ($(jb .state))" [ "$(jb .state)" = queued ]
get "/v1/artifacts"
check "drain: no artifact was stored for the stopped job" [ "$(jb '.items | length')" = 0 ]
stop_server "$SPID" 10
check "drain: second stop exit 0" [ "$STOP_RC" = 0 ]

# ---- 11. tokens file: a line over 511 bytes is refused, naming the line ----
# fgets split it: the tail of a long commented-out line became a write token.
EVIL=evil-token-from-a-comment
{
	printf 'read ci-reader %s\n' "$(sha "$RTOK")"
	printf '# %s' "$(head -c 509 /dev/zero | tr '\0' x)"
	printf 'write evil %s\n' "$(sha "$EVIL")"
} >"$TMP/tokens.long"
rc=0
timeout 20 "$FORGED" serve --listen 127.0.0.1:0 --state-dir "$TMP/tstate" --tokens-file "$TMP/tokens.long" \
	--workers 0 >"$TMP/tokens_long.log" 2>&1 &
TPID=$!
PIDS="$PIDS $TPID"
for i in $(seq 1 100); do
	grep -q "listening on" "$TMP/tokens_long.log" && break
	kill -0 "$TPID" 2>/dev/null || break
	sleep 0.05
done
if grep -q "listening on" "$TMP/tokens_long.log"; then
	BASE=http://127.0.0.1:$(sed -n 's/.* listening on [^ ]* port \([0-9][0-9]*\),.*/\1/p' "$TMP/tokens_long.log")
	http GET /v1/whoami -H "Authorization: Bearer $EVIL"
	bad "tokens: a file with a 570-byte line was accepted (the comment's tail is role $(jb .role))"
	kill -KILL "$TPID"
	wait "$TPID" 2>/dev/null
else
	wait "$TPID" || rc=$?
	check "tokens: a 570-byte line refuses the start, exit 2 (got $rc)" [ "$rc" = 2 ]
	check "tokens: the message names the line ($(tail -n 1 "$TMP/tokens_long.log"))" \
		grep -q "tokens.long:2: the line is longer than 511 bytes" "$TMP/tokens_long.log"
fi
# A last line without a newline is still read whole.
printf 'read ci-reader %s\nwrite ci-writer %s' "$(sha "$RTOK")" "$(sha "$WTOK")" >"$TMP/tokens.nonl"
start_server tokens_nonl --state-dir "$TMP/tstate2" --tokens-file "$TMP/tokens.nonl" --workers 0 && {
	http GET /v1/whoami "${W[@]}"
	check "tokens: a last line without a newline works ($(jb .role))" [ "$(jb .role)" = write ]
	stop_server "$SPID" 10
}

check "no sanitizer report in any server log" no_sanitizer_report
finish
