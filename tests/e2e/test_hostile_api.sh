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

# ---- the main server for the request checks ----
mkdir -p "$TMP/roots"
MSTATE=$TMP/mstate
start_server main --state-dir "$MSTATE" --allow-roots "$FIXTURES" --allow-roots "$TMP/roots" \
	--tokens-file "$TMP/tokens" --workers 1 || { finish; exit 1; }
MAIN_PID=$SPID
MAIN_PORT=$PORT
# raw_post PATH FILE: a write-token JSON POST of FILE's bytes as they are.
raw_post() { http POST "$1" "${W[@]}" "${J[@]}" --data-binary "@$2"; }

# ---- 10. invalid UTF-8 and U+0000: refused with the pointer, never stored or served ----
post /v1/inspections '{"source": "qwen35_mlx_sidecar"}'
AID=$(jb .artifact_id)
printf '{"host": "gpu-\xff\xfe-01", "artifact": %s, "runtime": "ollama"}' "$AID" >"$TMP/badhost.json"
raw_post /v1/fleet/reports "$TMP/badhost.json"
expect_problem "utf-8: a fleet report with host gpu-\\xff\\xfe-01 is 400" 400 invalid-utf8
expect_pointers "utf-8: the problem names /host" /host
check "utf-8: the problem itself is UTF-8" valid_utf8 "$TMP/body"
get /v1/fleet/health
check "utf-8: fleet health decodes as strict UTF-8" valid_utf8 "$TMP/body"
check "utf-8: the host was not stored" [ "$(jb '[.unhealthy[]?.hosts[]?.host] | map(select(startswith("gpu-"))) | length')" = 0 ]
printf '{"sou\xffrce": "qwen35_hf"}' >"$TMP/badkey.json"
raw_post /v1/inspections "$TMP/badkey.json"
expect_problem "utf-8: a member name that is not UTF-8 is 400" 400 invalid-utf8
check "utf-8: its pointer shows U+FFFD ($(jb -c '.errors'))" \
	[ "$(jb '[.errors[].pointer] | index("/sou\ufffdrce") != null')" = true ]
post /v1/inspections '{"source": "qwen35_hf\u0000/../x"}'
expect_problem "nul: a path holding \\u0000 is 422, not inspected as qwen35_hf" 422 invalid-field
expect_pointers "nul: the problem names /source" /source
post /v1/jobs '{"kind": "forge", "source": "qwen35_hf", "out": "x\u0000y"}'
expect_problem "nul: \\u0000 in a job's out is 422" 422 invalid-field
expect_pointers "nul: the problem names /out" /out
http GET "/v1/%ff%fe" "${R[@]}"
expect_problem "utf-8: a URL path of raw bytes is 404" 404 no-such-route
check "utf-8: the 404 echoing the path is UTF-8" valid_utf8 "$TMP/body"
# A raw control character inside a string (found by fuzz_api: cJSON takes it,
# SQLite's JSON does not, and the artifact answered 500 from then on): 400.
printf '{"schema": "forged.verification.v1", "hardware": "a\tb", "rows": [{"depth": 0, "tok_s": 1}]}' >"$TMP/rawtab.json"
raw_post "/v1/artifacts/$AID/verifications" "$TMP/rawtab.json"
expect_problem "control: a raw tab inside a string is 400" 400 malformed-json
expect_pointers "control: the problem names /hardware" /hardware
get "/v1/artifacts/$AID"
expect "control: the artifact still answers 200" 200
check "control: nothing was stored ($(jb '.verifications | length'))" [ "$(jb '.verifications | length')" = 0 ]
# A file name that is not UTF-8: the report shows U+FFFD, and every answer decodes.
BADDIR=$TMP/roots/badname
cp -r "$FIXTURES/qwen35_mlx_sidecar" "$BADDIR"
cp "$(ls "$BADDIR"/model*.safetensors | head -n 1)" "$BADDIR/$(printf 'model-\xff\xfe.safetensors')"
post /v1/inspections "{\"source\": \"$BADDIR\"}"
expect "utf-8: a checkpoint with a file named model-\\xff\\xfe is inspected" 201
check "utf-8: the inspection answer is UTF-8" valid_utf8 "$TMP/body"
check "utf-8: the file name shows U+FFFD" [ "$(jb '[.report.files[].name] | index("model-\ufffd\ufffd.safetensors") != null')" = true ]
BADAID=$(jb .artifact_id)
get "/v1/artifacts/$BADAID"
check "utf-8: the stored artifact is UTF-8" valid_utf8 "$TMP/body"
get "/v1/fleet/health"
check "utf-8: fleet health is UTF-8" valid_utf8 "$TMP/body"
"$FORGED" inspect "$BADDIR" --json >"$TMP/cli_bad.json" 2>/dev/null
check "utf-8: forged inspect --json is UTF-8" valid_utf8 "$TMP/cli_bad.json"

# ---- 12. numbers too large for an integer: range-checked before any conversion ----
post /v1/fleet/reports "{\"host\": \"h1\", \"artifact\": 1e300, \"runtime\": \"ollama\"}"
expect_problem "number: artifact 1e300 is 422" 422 invalid-field
expect_pointers "number: the problem names /artifact" /artifact
post /v1/fleet/reports "{\"host\": \"h1\", \"artifact\": 1.5, \"runtime\": \"ollama\"}"
expect_problem "number: artifact 1.5 is 422" 422 invalid-field
echo '{"workers": 1e300}' >"$TMP/huge_workers.json"
rc=0; "$FORGED" serve --config "$TMP/huge_workers.json" --listen 127.0.0.1:0 --state-dir "$TMP/x" >/dev/null 2>"$TMP/err" || rc=$?
check "number: config workers 1e300 exits 2 (got $rc)" [ "$rc" = 2 ]
check "number: the message names workers and its range ($(tail -n 1 "$TMP/err"))" grep -q "workers 1e+300 is not an integer within 0..256" "$TMP/err"
for bits in 1e9 1e300 -4; do
	rm -rf "$TMP/q4_bits"
	cp -r "$FIXTURES/qwen35_mlx_q4" "$TMP/q4_bits"
	jq --argjson b "$bits" '.quantization.bits = $b' "$FIXTURES/qwen35_mlx_q4/config.json" >"$TMP/q4_bits/config.json"
	rc=0; "$FORGED" forge "$FIXTURES/qwen35_hf" --quant match --backbone "$TMP/q4_bits" --out "$TMP/q4_out_$bits" \
		>/dev/null 2>"$TMP/err" || rc=$?
	check "number: --quant match with backbone bits $bits exits 2, not a silent unquantized forge (got $rc)" [ "$rc" = 2 ]
	check "number: the message names quantization.bits ($(tail -n 1 "$TMP/err"))" grep -q "quantization.bits .* is not an integer in 1..32" "$TMP/err"
	check "number: nothing written for bits $bits" [ ! -e "$TMP/q4_out_$bits" ]
done

# ---- 9. slowloris and bodies refused before they are read ----
RAW=(python3 "$REPO/tests/e2e/raw_http.py")
# Two sources of 128 trickling sockets each filled the 256 connections (128 per IP were allowed).
"${RAW[@]}" flood 127.0.0.1 "$PORT" 128 127.0.0.2 6 >"$TMP/flood2.out" 2>&1 &
F2=$!
"${RAW[@]}" flood 127.0.0.1 "$PORT" 128 127.0.0.3 6 >"$TMP/flood3.out" 2>&1 &
F3=$!
PIDS="$PIDS $F2 $F3"
for i in $(seq 1 50); do [ -s "$TMP/flood2.out" ] && [ -s "$TMP/flood3.out" ] && break; sleep 0.1; done
HTTP_MAX_TIME=3 http GET /livez
expect "slowloris: /livez answers while 256 sockets from two addresses trickle" 200
check "slowloris: at most 32 connections per address ($(cat "$TMP/flood2.out"))" \
	[ "$(sed -n 's/^accepted \([0-9]*\) .*/\1/p' "$TMP/flood2.out")" -le 32 ]
wait "$F2" "$F3" 2>/dev/null
# Clients behind one proxy share its address: per_ip_connections raises the cap (here to 48).
start_server wide --state-dir "$TMP/ipstate" --allow-roots "$FIXTURES" --tokens-file "$TMP/tokens" --workers 0 \
	--per-ip-connections 48 || { finish; exit 1; }
WPID=$SPID
"${RAW[@]}" flood 127.0.0.1 "$PORT" 64 127.0.0.4 1 >"$TMP/flood4.out" 2>&1
check "per_ip_connections 48: 48 of 64 connections from one address accepted ($(cat "$TMP/flood4.out"))" \
	[ "$(sed -n 's/^accepted \([0-9]*\) .*/\1/p' "$TMP/flood4.out")" = 48 ]
stop_server "$WPID" 15
PORT=$MAIN_PORT
BASE=http://127.0.0.1:$PORT
# One byte a second resets an idle timeout, not the 10 s deadline for the headers.
closed=$("${RAW[@]}" trickle 127.0.0.1 "$PORT" 16)
check "slowloris: a trickled request is closed at the header deadline (after $closed s)" \
	"$PYTHON" -c 'import sys; sys.exit(not (sys.argv[1] != "open" and 9 <= float(sys.argv[1]) <= 14))' "$closed"
first=$("${RAW[@]}" first-line 127.0.0.1 "$PORT" POST /v1/inspections "Content-Type: application/json" \
	"Content-Length: 30000000")
check "early: a 30 MB body without a token gets 401 before it is sent ($first)" [ "$first" = "HTTP/1.1 401 Unauthorized" ]
first=$("${RAW[@]}" first-line 127.0.0.1 "$PORT" POST /v1/inspections "Content-Type: application/json" \
	"Content-Length: 100000000" "Expect: 100-continue" "Authorization: Bearer $WTOK")
check "early: Expect: 100-continue for 100 MB gets 413, no 100 Continue ($first)" \
	[ "${first#HTTP/1.1 413 }" != "$first" ]
first=$("${RAW[@]}" first-line 127.0.0.1 "$PORT" POST /v1/inspections "Content-Type: application/json" \
	"Content-Length: 100" "Expect: 100-continue")
check "early: Expect: 100-continue without a token gets 401, no 100 Continue ($first)" \
	[ "$first" = "HTTP/1.1 401 Unauthorized" ]
first=$("${RAW[@]}" first-line 127.0.0.1 "$PORT" POST /v1/inspections "Content-Type: text/plain" \
	"Content-Length: 100" "Expect: 100-continue" "Authorization: Bearer $WTOK")
check "early: Expect: 100-continue of text/plain gets 415 ($first)" [ "$first" = "HTTP/1.1 415 Unsupported Media Type" ]
first=$("${RAW[@]}" first-line 127.0.0.1 "$PORT" POST /v1/inspections "Content-Type: application/json" \
	"Content-Length: 100" "Expect: 100-continue" "Authorization: Bearer $WTOK")
check "early: an acceptable upload still gets 100 Continue ($first)" [ "$first" = "HTTP/1.1 100 Continue" ]
head -c 30000000 /dev/zero >"$TMP/30mb"
up=$(curl -sS -o /dev/null -w '%{http_code} %{size_upload}' -H 'Content-Type: application/json' \
	-H 'Expect: 100-continue' --data-binary "@$TMP/30mb" "$BASE/v1/inspections")
check "early: curl uploading 30 MB without a token: 401 and nothing uploaded ($up)" [ "$up" = "401 0" ]
rm -f "$TMP/30mb"
HTTP_MAX_TIME=3 http GET /livez
expect "early: the server still answers" 200

# ---- 3. a FIFO where config.json should be: inspections off the HTTP threads, with a deadline ----
# open() blocked before fstat: a few such requests held every HTTP thread, /livez
# timed out and SIGTERM never completed.  Now each answers 503 (inspection-timeout
# or inspections-busy; 422 once the reader refuses FIFOs) and the rest is served.
FIFODIR=$TMP/roots/fifo_ckpt
mkdir -p "$FIFODIR"
mkfifo "$FIFODIR/config.json"
cp "$FIXTURES/qwen35_hf/"*.safetensors "$FIFODIR/"
start_server fifo --state-dir "$TMP/fstate" --allow-roots "$FIXTURES" --allow-roots "$TMP/roots" \
	--tokens-file "$TMP/tokens" --workers 1 --inspect-seconds 2 || { finish; exit 1; }
FPID=$SPID
CURLS=""
for i in $(seq 1 10); do
	curl -sS -o "$TMP/fifo_$i.body" -w '%{http_code}' --max-time 15 "${W[@]}" "${J[@]}" \
		--data-binary "{\"source\": \"$FIFODIR\"}" "$BASE/v1/inspections" >"$TMP/fifo_$i.code" 2>/dev/null &
	CURLS="$CURLS $!"
done
sleep 0.5
live=0
for i in $(seq 1 5); do
	HTTP_MAX_TIME=2 http GET /livez
	[ "$CODE" = 200 ] && live=$((live + 1))
	sleep 0.2
done
check "fifo: /livez answers within 2 s while 10 inspections of a FIFO are pending ($live of 5)" [ "$live" = 5 ]
HTTP_MAX_TIME=2 get /v1/jobs
expect "fifo: reads are served meanwhile" 200
# shellcheck disable=SC2086
wait $CURLS
codes=$(for f in "$TMP"/fifo_*.code; do cat "$f"; echo; done | sort | uniq -c | tr -s ' ' | paste -sd, -)
check "fifo: every inspection of the FIFO is answered 503 or 422, none hangs ($codes)" \
	[ -z "$(for f in "$TMP"/fifo_*.code; do cat "$f"; echo; done | grep -v '^\(503\|422\)$')" ]
check "fifo: the 503s say why ($(jq -r .type "$TMP/fifo_1.body" 2>/dev/null))" \
	[ -z "$(for f in "$TMP"/fifo_*.body; do jq -r 'select(.status == 503) | .type' "$f"; done | grep -v 'urn:forged:problem:inspection\(-timeout\|s-busy\)')" ]
# Threads blocked in open() keep their slots: once all 8 are stuck past their
# deadline, inspections are down until a restart, and /readyz and the watchdog say so.
# Since the reader opens O_NONBLOCK and refuses FIFOs (422), that path is taken
# only when no inspection was refused; a slow machine (TSan) may still time a
# few out (503) before the refusal, which is no stuck thread.
if ! grep -q 422 "$TMP"/fifo_*.code; then
	for wave in $(seq 1 6); do
		http GET /readyz
		[ "$CODE" = 503 ] && break
		CURLS=""
		for i in 1 2 3; do
			curl -s -o /dev/null --max-time 15 "${W[@]}" "${J[@]}" --data-binary "{\"source\": \"$FIFODIR\"}" \
				"$BASE/v1/inspections" &
			CURLS="$CURLS $!"
		done
		# shellcheck disable=SC2086
		wait $CURLS
	done
	http GET /readyz
	expect "fifo: with all 8 inspection threads stuck, /readyz is 503" 503
	check "fifo: /readyz names the stuck inspections ($(jb .reason))" grep -q "inspection thread is stuck" <<<"$(jb .reason)"
	post /v1/inspections '{"source": "qwen35_hf"}'
	expect_problem "fifo: then another inspection is 503 inspections-busy" 503 inspections-busy
	check "fifo: Retry-After on the 503" [ -n "$(header Retry-After)" ]
else
	post /v1/inspections '{"source": "qwen35_hf"}'
	expect "fifo: FIFOs refused at once (422): an ordinary inspection still works" 201
fi
stop_server "$FPID" 10
check "fifo: SIGTERM completes, exit 0 (status $STOP_RC)" [ "$STOP_RC" = 0 ]

# ---- 3. the watchdog looks at the HTTP side too ----
# WATCHDOG=1 was tied to the worker loop alone: an API whose HTTP threads all
# hung kept being pinged and was never restarted.  FORGED_FAULT_LIVEZ_STALL
# makes /livez hang while its file exists, as a wedged API would.
"$PYTHON" - "$TMP/notify.sock" "$TMP/notify.txt" <<'EOF2' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(0.5)
end = time.time() + 120
with open(sys.argv[2], "a", buffering=1) as out:
    while time.time() < end:
        try:
            out.write(s.recv(4096).decode() + "\n")
        except socket.timeout:
            pass
EOF2
PIDS="$PIDS $!"
for i in $(seq 1 50); do [ -S "$TMP/notify.sock" ] && break; sleep 0.1; done
pings() { grep -c '^WATCHDOG=1$' "$TMP/notify.txt" 2>/dev/null; }
SERVER_ENV="NOTIFY_SOCKET=$TMP/notify.sock WATCHDOG_USEC=1500000 FORGED_FAULT_LIVEZ_STALL=$TMP/stall" \
	start_server wd --state-dir "$TMP/wstate" --tokens-file "$TMP/tokens" --workers 1 || { finish; exit 1; }
WPID=$SPID
for i in $(seq 1 50); do [ "$(pings)" -ge 2 ] && break; sleep 0.1; done
check "watchdog: WATCHDOG=1 while healthy ($(pings))" [ "$(pings)" -ge 2 ]
touch "$TMP/stall"
sleep 1.5
n1=$(pings)
sleep 3
n2=$(pings)
check "watchdog: no WATCHDOG=1 while /livez hangs ($n1 then $n2)" [ "$n1" = "$n2" ]
check "watchdog: the reason is logged" grep -q "watchdog: the HTTP side did not answer GET /livez in time" "$TMP/wd.log"
rm -f "$TMP/stall"
for i in $(seq 1 50); do [ "$(pings)" -gt "$n2" ] && break; sleep 0.1; done
check "watchdog: WATCHDOG=1 again once /livez answers ($(pings))" [ "$(pings)" -gt "$n2" ]
check "watchdog: recovery logged" grep -q "watchdog: healthy again" "$TMP/wd.log"
stop_server "$WPID" 10
check "watchdog: exit 0" [ "$STOP_RC" = 0 ]

# ---- 11. tokens file: a line over 511 bytes is refused, naming the line ----
# fgets split it: the tail of a long commented-out line became a write token.
EVIL=evil-token-from-a-comment
{
	printf 'read ci-reader %s\n' "$(sha "$RTOK")"
	printf '# %s' "$(head -c 509 /dev/zero | tr '\0' x)"
	printf 'write evil %s\n' "$(sha "$EVIL")"
} >"$TMP/tokens.long"
rc=0
"$FORGED" serve --listen 127.0.0.1:0 --state-dir "$TMP/tstate" --tokens-file "$TMP/tokens.long" \
	--workers 0 >"$TMP/tokens_long.log" 2>&1 &
TPID=$!
PIDS="$PIDS $TPID"
for i in $(seq 1 100); do
	grep -q "listening on" "$TMP/tokens_long.log" 2>/dev/null && break
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

stop_server "$MAIN_PID" 10
check "main: exit 0 on SIGTERM" [ "$STOP_RC" = 0 ]
check "no sanitizer report in any server log" no_sanitizer_report
finish
