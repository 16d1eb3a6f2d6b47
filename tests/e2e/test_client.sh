#!/usr/bin/env bash
# The client commands (forged jobs|artifacts|fleet) against a real `forged
# serve` on an ephemeral port (lib.sh's start_server), and against a fake
# server (fake_server.py) for retries; then `forged help`, the completion
# scripts, the man pages, `forged version --json` and --color.
#
# Exit codes checked: 0 for a clean forge (--wait), 1 for a refused one
# (qwen35_mlx_head_shifted: head_double_shifted), 2 for an unknown target
# and for requests the server refuses (403 path, 404 job, 401 token), 3 for
# a server that is down and for a 500.  -o json must print the API's
# documents byte for byte (compared with curl).  Retries: one invocation
# sends the same Idempotency-Key on every try, honours Retry-After, and a
# second invocation sends another key.
set -u
. "$(dirname "$0")/lib.sh"
FIXTURES=$(cd "$FIXTURES" && pwd)
REPO=$(cd "$(dirname "$0")/../.." && pwd)

# The client's environment: nothing inherited that would change its choices.
unset FORGED_URL FORGED_TOKEN NO_COLOR
export XDG_CONFIG_HOME=$TMP/xdg HOME=$TMP/home no_proxy=127.0.0.1,localhost NO_PROXY=127.0.0.1,localhost
mkdir -p "$HOME"

RTOK=client-read-token-5e1
WTOK=client-write-token-c93
sha() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
printf 'read reader %s\nwrite writer %s\n' "$(sha "$RTOK")" "$(sha "$WTOK")" >"$TMP/tokens"
printf '%s\n' "$WTOK" >"$TMP/wtoken"

# cli NAME ARGS...: run forged with stdout in $TMP/NAME.out, stderr in $TMP/NAME.err; status in $RC.
cli() {
	local name=$1
	shift
	RC=0
	timeout 120 "$FORGED" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" </dev/null || RC=$?
}
# expect_rc DESC WANT: the last cli's status (else its stderr is shown).
expect_rc() {
	if [ "$RC" = "$2" ]; then ok; else bad "$1: exit $RC, want $2: $(head -c 400 "$TMP/$LAST.err")"; fi
}
run() { LAST=$1; cli "$@"; }
# api PATH: the server's document for PATH, by curl, in $TMP/api.json.
api() { curl -sS --max-time 30 -H "Authorization: Bearer $RTOK" "$BASE$1" >"$TMP/api.json"; }
# same_doc DESC FILE: FILE (the client's output) is the last api document plus a newline.
same_doc() {
	if cmp -s "$2" <(cat "$TMP/api.json"; echo); then ok; else
		bad "$1: the client's JSON differs from the API's: $(diff <(head -c 600 "$2") <(head -c 600 "$TMP/api.json") | head -n 6)"
	fi
}

start_server main --state-dir "$TMP/state" --allow-roots "$FIXTURES" --allow-roots "$TMP" \
	--tokens-file "$TMP/tokens" --workers 2 || { finish; exit 1; }
export FORGED_URL=$BASE FORGED_TOKEN=$RTOK
# Writes name the write token's file (which wins over $FORGED_TOKEN).
W=(--token-file "$TMP/wtoken")

# ---- jobs submit --wait: ok, refused, bad request ----
run ok jobs submit qwen35_hf --target mtplx-2.12 --wait "${W[@]}"
expect_rc "submit --wait of a clean forge" 0
OKJOB=$(jq -r .id "$TMP/ok.out" 2>/dev/null)
check "submit --wait: the final job succeeded (JSON off a terminal)" [ "$(jq -r .state "$TMP/ok.out" 2>/dev/null)" = succeeded ]
api "/v1/jobs/$OKJOB"
same_doc "submit --wait -o json: the job document" "$TMP/ok.out"
OKART=$(jq -r .artifact_id "$TMP/ok.out" 2>/dev/null)

run refused jobs submit qwen35_mlx_head_shifted --wait -o json "${W[@]}"
expect_rc "submit --wait of a refused forge" 1
check "refused: the job failed" [ "$(jq -r .state "$TMP/refused.out" 2>/dev/null)" = failed ]
check "refused: stderr names the refusal code" grep -q "refused: head_double_shifted" "$TMP/refused.err"
check "refused: stderr gives the detail" grep -q "is above 2.4" "$TMP/refused.err"

run badtarget jobs submit qwen35_hf --target vllm-9 --wait "${W[@]}"
expect_rc "an unknown target" 2
check "unknown target: the option is named and the runtimes listed" \
	grep -q -- "--target 'vllm-9' is not a runtime: one of mlx-lm-0.31, .*, hf" "$TMP/badtarget.err"
run badquant jobs submit qwen35_hf --quant=affine:7:64 "${W[@]}"
expect_rc "a bad --quant=VALUE" 2
check "bad quant: the policies listed" grep -q "keep, match, affine:BITS:GROUP" "$TMP/badquant.err"
run forbidden jobs submit /etc --wait "${W[@]}"
expect_rc "a source outside the roots (403)" 2
check "403: the problem type and detail" grep -q "HTTP 403 path-forbidden: source '/etc'" "$TMP/forbidden.err"
run dashsrc jobs submit "${W[@]}" -- -not-an-option
expect_rc "'--' ends the options (the source -not-an-option is missing: 422)" 2
check "after '--', -not-an-option is the source" grep -q "path-missing: source '-not-an-option'" "$TMP/dashsrc.err"
run unknown jobs submit qwen35_hf --frobnicate
expect_rc "an unknown option" 2
check "unknown option: named" grep -q "forged jobs submit: unknown option '--frobnicate'" "$TMP/unknown.err"
run misplaced jobs list --wait
expect_rc "an option of another subcommand" 2
check "misplaced option: named" grep -q -- "--wait is not an option of 'forged jobs list'" "$TMP/misplaced.err"
run noval jobs submit qwen35_hf --target
expect_rc "an option without its value" 2
check "missing value: named" grep -q -- "--target needs a value" "$TMP/noval.err"
run nosub jobs frob
expect_rc "an unknown subcommand" 2
check "unknown subcommand: the subcommands listed" grep -q "one of submit, list, get, cancel, wait" "$TMP/nosub.err"

# ---- get, list, cancel: -o json is the API's document ----
run get jobs get "$OKJOB" -o json
expect_rc "jobs get" 0
api "/v1/jobs/$OKJOB"
same_doc "jobs get -o json" "$TMP/get.out"
# One JSON style for every command: the API's bytes off a terminal, pretty with --json-style=pretty or on one.
run getp jobs get "$OKJOB" --output=json --json-style=pretty
check "jobs get --json-style=pretty: tab-indented lines" [ "$(grep -c $'^\t"' "$TMP/getp.out")" -ge 5 ]
check "jobs get --json-style=pretty: the API's document" cmp -s <(jq -S . "$TMP/getp.out") <(jq -S . "$TMP/api.json")
TERM=dumb script -qec "$FORGED jobs get $OKJOB -o json" /dev/null | tr -d '\r' >"$TMP/gett.out"
check "jobs get -o json on a terminal: pretty" [ "$(grep -c $'^\t"' "$TMP/gett.out")" -ge 5 ]
check "jobs get -o json on a terminal: the API's document" cmp -s <(jq -S . "$TMP/gett.out") <(jq -S . "$TMP/api.json")
run list jobs list --state=succeeded --limit 500 -o json
api "/v1/jobs?limit=500&state=succeeded"
same_doc "jobs list -o json" "$TMP/list.out"
run table jobs list -o table
check "jobs list -o table: a header and the job" \
	[ "$(head -n 1 "$TMP/table.out" | tr -s ' ')" = "ID STATE STAGE PROGRESS ARTIFACT UPDATED ERROR" ]
check "jobs list -o table: the refused job's error" grep -q "failed .*head_double_shifted" "$TMP/table.out"
run missing jobs get 99999
expect_rc "jobs get of an unknown job (404)" 2
check "404: problem type named" grep -q "HTTP 404 not-found" "$TMP/missing.err"
check "404 -o json (not a terminal): the problem document on stdout" \
	[ "$(jq -r .type "$TMP/missing.out" 2>/dev/null)" = urn:forged:problem:not-found ]
run badid jobs get 12abc
expect_rc "a job id that is not a number" 2

run art artifacts get "$OKART" -o json
expect_rc "artifacts get of the forged artifact" 0
api "/v1/artifacts/$OKART"
same_doc "artifacts get -o json" "$TMP/art.out"
run arts artifacts list --limit 500
api "/v1/artifacts?limit=500"
same_doc "artifacts list -o json" "$TMP/arts.out"

# ---- verifications: MTPLX issue 306 and its control ----
cat >"$TMP/v306.json" <<'EOF'
{"schema": "forged.verification.v1", "hardware": "M4 Max", "runtime": "mtplx-2.12",
 "rows": [{"depth": 0, "tok_s": 15.04},
          {"depth": 1, "tok_s": 13.46, "acceptance": [0.067], "quality_passed": true},
          {"depth": 2, "tok_s": 11.48, "acceptance": [0.067, 0.004]},
          {"depth": 3, "tok_s": 11.18, "acceptance": [0.067, 0.004, 0.0]}]}
EOF
cat >"$TMP/vctl.json" <<'EOF'
{"schema": "forged.verification.v1", "hardware": "M4 Max", "runtime": "mtplx-2.12",
 "rows": [{"depth": 0, "tok_s": 15.04},
          {"depth": 1, "tok_s": 34.15584, "acceptance": [0.978], "quality_passed": true},
          {"depth": 2, "tok_s": 42.112, "acceptance": [0.978, 0.95], "quality_passed": true},
          {"depth": 3, "tok_s": 47.2256, "acceptance": [0.978, 0.95, 0.93], "quality_passed": true}]}
EOF
run v306 artifacts verify "$OKART" "$TMP/v306.json" "${W[@]}"
expect_rc "artifacts verify of the issue-306 rows" 1
check "306: mtp_acceptance_collapsed" [ "$(jq -r .result.verdict "$TMP/v306.out" 2>/dev/null)" = mtp_acceptance_collapsed ]
run art306 artifacts get "$OKART"
expect_rc "artifacts get after a collapsed verification: do not ship" 1
run v306t artifacts verify "$OKART" "$TMP/v306.json" -o table "${W[@]}"
check "306 -o table: the verdict and its severity" grep -q "mtp_acceptance_collapsed (error)" "$TMP/v306t.out"
LAST=vctl; RC=0; "$FORGED" artifacts verify "$OKART" - -o json "${W[@]}" <"$TMP/vctl.json" >"$TMP/vctl.out" 2>"$TMP/vctl.err" || RC=$?
expect_rc "artifacts verify of the control rows (from stdin)" 0
check "control: mtp_depth_wins at depth 3" [ "$(jq -r '[.result.verdict, .result.best_depth] | map(tostring) | join(" ")' "$TMP/vctl.out" 2>/dev/null)" = "mtp_depth_wins 3" ]
echo '{"rows": [{"depth": 1, "tok_s": 3}]}' >"$TMP/vbad.json"
run vbad artifacts verify "$OKART" "$TMP/vbad.json" "${W[@]}"
expect_rc "rows without depth 0 (422)" 2
run vnone artifacts verify 99999 "$TMP/v306.json" "${W[@]}"
expect_rc "verify of an unknown artifact (404)" 2

# ---- fleet ----
EMB=$(curl -sS -X POST -H "Authorization: Bearer $WTOK" -H 'Content-Type: application/json' \
	--data-binary '{"source": "qwen35_mlx_embedded"}' "$BASE/v1/inspections" | jq -r .artifact_id)
run health0 fleet health
expect_rc "fleet health while no host serves an unhealthy artifact" 0
api /v1/fleet/health
same_doc "fleet health -o json" "$TMP/health0.out"
run report fleet report --host gpu-a.example --artifact "$EMB" --runtime mlx-lm-0.31 --observed '{"tok_s": 12.1}' "${W[@]}"
expect_rc "fleet report" 0
check "fleet report: the server's answer" [ "$(jq -r '.host + " " + (.artifact_id | tostring)' "$TMP/report.out" 2>/dev/null)" = "gpu-a.example $EMB" ]
run health1 fleet health -o table
expect_rc "fleet health while a host serves an unhealthy artifact" 1
check "fleet health -o table names the host" grep -q "gpu-a.example (mlx-lm-0.31)" "$TMP/health1.out"
run badrt fleet report --artifact "$EMB" --runtime vllm-9 "${W[@]}"
expect_rc "fleet report with an unknown runtime" 2
run badobs fleet report --artifact "$EMB" --runtime ollama --observed '[1]' "${W[@]}"
expect_rc "fleet report with --observed not an object" 2
FP=$(jq -r .fingerprint "$TMP/art.out")
run byfp fleet report --host gpu-b --artifact "$FP" --runtime mtplx-2.12 "${W[@]}"
check "fleet report by fingerprint resolves the artifact" [ "$(jq -r .artifact_id "$TMP/byfp.out" 2>/dev/null)" = "$OKART" ]

# Bundled short options (after the fingerprint check: this forge makes the same fingerprint again).
run bundled jobs submit qwen35_hf -wo json "${W[@]}" --target=mtplx-2.12
expect_rc "bundled short options: -wo json (wait, JSON)" 0
check "bundled short options: waited for the end" [ "$(jq -r .state "$TMP/bundled.out" 2>/dev/null)" = succeeded ]

# ---- tokens ----
unset FORGED_TOKEN
run notoken jobs list --server "$BASE"
expect_rc "no token against a server with tokens (401)" 2
check "401: the hint names the ways to give a token" grep -q "token-file FILE, \$FORGED_TOKEN" "$TMP/notoken.err"
LAST=envtok; RC=0; FORGED_TOKEN=$RTOK "$FORGED" jobs list >/dev/null 2>"$TMP/envtok.err" || RC=$?
expect_rc "FORGED_TOKEN" 0
mkdir -p "$XDG_CONFIG_HOME/forged"
printf '  %s  \n# not read\n' "$RTOK" >"$XDG_CONFIG_HOME/forged/token"
run xdgtok jobs list
expect_rc "the default token file \$XDG_CONFIG_HOME/forged/token" 0
run readonly jobs submit qwen35_hf
expect_rc "a read token cannot submit (403)" 2
rm "$XDG_CONFIG_HOME/forged/token"
run both jobs list --token x --token-file "$TMP/wtoken"
expect_rc "--token and --token-file together" 2
run nofile jobs list --token-file "$TMP/none"
expect_rc "a missing --token-file" 2
run flagtok jobs list --token "$RTOK" -o table
expect_rc "--token" 0

# ---- cancel, wait, --timeout on a server without workers ----
start_server idle --state-dir "$TMP/idle" --allow-roots "$FIXTURES" --workers 0 || { finish; exit 1; }
IDLE=$BASE
t0=$(date +%s%N)
run timeout jobs submit qwen35_hf --wait --timeout 1 --server "$IDLE"
t1=$(date +%s%N)
expect_rc "submit --wait --timeout 1 of a job that never runs" 3
check "--timeout: about one second ($(((t1 - t0) / 1000000)) ms)" [ $(((t1 - t0) / 1000000)) -ge 900 -a $(((t1 - t0) / 1000000)) -lt 5000 ]
check "--timeout: the message says the job goes on" grep -q "has not ended after 1 s (it goes on" "$TMP/timeout.err"
QJOB=$(jq -r .id "$TMP/timeout.out" 2>/dev/null)
run cancel jobs cancel "$QJOB" --server "$IDLE"
expect_rc "jobs cancel" 0
check "jobs cancel: the job says cancelled" [ "$(jq -r .state "$TMP/cancel.out" 2>/dev/null)" = cancelled ]
run waitc jobs wait "$QJOB" --server "$IDLE"
expect_rc "jobs wait of a cancelled job" 1
check "jobs wait: says cancelled" grep -q "job $QJOB was cancelled" "$TMP/waitc.err"

# ---- server down, 500, retries with one Idempotency-Key (fake server) ----
DEAD=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
t0=$(date +%s%N)
run down jobs submit qwen35_hf --wait --server "http://127.0.0.1:$DEAD"
t1=$(date +%s%N)
expect_rc "server down" 3
check "server down: retried 4 times" [ "$(grep -c 'retrying in' "$TMP/down.err")" = 4 ]
check "server down: backoff 0.2+0.4+0.8+1.6 s ($(((t1 - t0) / 1000000)) ms)" [ $(((t1 - t0) / 1000000)) -ge 2900 ]
check "server down: the transport error is named" grep -q "Connection refused\|Couldn't connect" "$TMP/down.err"

JOB_Q='{"id": 7, "kind": "forge", "state": "queued", "stage": "", "progress": 0, "error": null, "artifact_id": null, "created_at": "x", "updated_at": "x"}'
JOB_OK='{"id": 7, "kind": "forge", "state": "succeeded", "stage": "done", "progress": 1, "error": null, "artifact_id": 3, "created_at": "x", "updated_at": "y"}'
JOB_REF='{"id": 8, "kind": "forge", "state": "failed", "stage": "inspect", "progress": 0, "error": "head_double_shifted: text", "refusal": {"code": "head_double_shifted", "severity": "error", "detail": "head set mtp q/k max 2.79"}, "artifact_id": null, "created_at": "x", "updated_at": "y"}'
JOB_RUN='{"id": 10, "kind": "forge", "state": "running", "stage": "sidecar", "progress": 0.5, "bytes_done": 740000000, "bytes_total": 1600000000, "eta_s": 2, "error": null, "artifact_id": null, "created_at": "x", "updated_at": "x"}'
JOB_DONE10='{"id": 10, "kind": "forge", "state": "succeeded", "stage": "done", "progress": 1, "bytes_done": null, "bytes_total": null, "eta_s": null, "error": null, "artifact_id": 4, "created_at": "x", "updated_at": "y"}'
cat >"$TMP/scenario.json" <<EOF
{"POST /v1/jobs": [{"status": 503, "headers": {"Retry-After": "1"}, "body": {"type": "urn:forged:problem:queue-full", "title": "Queue full", "status": 503, "detail": "full"}},
                   {"status": 202, "body": $JOB_Q}],
 "GET /v1/jobs/7": [{"status": 502, "body": "bad gateway"}, {"status": 200, "body": $JOB_OK}],
 "GET /v1/jobs/8": [{"status": 200, "body": $JOB_REF}],
 "GET /v1/jobs/9": [{"status": 500, "body": {"type": "urn:forged:problem:internal", "title": "Internal error", "status": 500, "detail": "disk on fire"}}],
 "GET /v1/jobs/10": [{"status": 200, "body": $JOB_RUN}, {"status": 200, "body": $JOB_DONE10}],
 "GET /v1/fleet/health": [{"status": 200, "body": "not json"}]}
EOF
python3 "$REPO/tests/e2e/fake_server.py" "$TMP/scenario.json" "$TMP/fake.log" "$TMP/fake.port" &
kill_on_exit $!
for i in $(seq 1 100); do [ -s "$TMP/fake.port" ] && break; sleep 0.05; done
FAKE=http://127.0.0.1:$(cat "$TMP/fake.port")
run retry jobs submit qwen35_hf --wait --server "$FAKE" --token t0k
expect_rc "fake: 503 then 202, 502 then succeeded: exit 0" 0
keys=$(jq -r 'select(.method == "POST") | .idempotency_key' "$TMP/fake.log")
check "fake: the POST was sent twice" [ "$(wc -l <<<"$keys")" = 2 ]
check "fake: the same Idempotency-Key on both tries ($(tr '\n' ' ' <<<"$keys"))" [ "$(sort -u <<<"$keys" | wc -l)" = 1 ]
check "fake: the key is random hex" grep -Eq '^forged-[0-9a-f]{32}$' <<<"$(head -n 1 <<<"$keys")"
check "fake: the same body on both tries" [ "$(jq -r 'select(.method == "POST") | .body' "$TMP/fake.log" | sort -u | wc -l)" = 1 ]
check "fake: the body is the job" [ "$(jq -r 'select(.method == "POST") | .body | fromjson | [.kind, .source] | join(" ")' "$TMP/fake.log" | head -n 1)" = "forge qwen35_hf" ]
gap=$(jq -s '[.[] | select(.method == "POST") | .t] | .[1] - .[0]' "$TMP/fake.log")
check "fake: Retry-After 1 honoured (gap $gap s)" python3 -c "import sys; sys.exit(not 0.95 <= $gap < 3)"
check "fake: the token sent as a bearer token" [ "$(jq -r .authorization "$TMP/fake.log" | sort -u)" = "Bearer t0k" ]
check "fake: GET retried after 502" [ "$(jq -r 'select(.method == "GET") | .path' "$TMP/fake.log" | grep -c '^/v1/jobs/7$')" = 2 ]
check "fake: GETs carry no Idempotency-Key" [ "$(jq -r 'select(.method == "GET") | .idempotency_key' "$TMP/fake.log" | sort -u)" = null ]
run retry2 jobs submit qwen35_hf --server "$FAKE"
key2=$(jq -r 'select(.method == "POST") | .idempotency_key' "$TMP/fake.log" | tail -n 1)
check "fake: another invocation, another key" [ "$key2" != "$(head -n 1 <<<"$keys")" ]
run refusal jobs wait 8 --server "$FAKE" -o table
expect_rc "fake: a failed job with a refusal object" 1
check "fake: the refusal object is preferred to the error text" \
	grep -q "job 8 refused: head_double_shifted (error): head set mtp q/k max 2.79" "$TMP/refusal.err"
check "fake: the table shows the refusal" grep -q "refusal   head_double_shifted (error)" "$TMP/refusal.out"
n_before=$(wc -l <"$TMP/fake.log")
run e500 jobs get 9 --server "$FAKE"
expect_rc "fake: HTTP 500" 3
check "fake: a 500 is not retried" [ "$(wc -l <"$TMP/fake.log")" = $((n_before + 1)) ]
check "fake: the 500's detail" grep -q "HTTP 500 internal: disk on fire" "$TMP/e500.err"
run notjson fleet health --server "$FAKE"
expect_rc "fake: an answer that is not JSON" 3
# On a terminal, jobs wait draws one live line: state, stage, percent, the stage's bytes and the ETA.
TERM=xterm script -qec "$FORGED jobs wait 10 --server $FAKE -o json" /dev/null >"$TMP/ttywait.out" 2>&1
check "jobs wait on a terminal: the live line has the stage's bytes and ETA ($(tr '\r' '|' <"$TMP/ttywait.out" | head -c 300))" \
	grep -q $'\rjob 10: running   sidecar     50%  740.0 MB/1.6 GB  eta 2 s' "$TMP/ttywait.out"
check "jobs wait on a terminal: the job's document is printed" grep -q '"artifact_id":[[:space:]]*4' "$TMP/ttywait.out"
# grep reads \r as any byte: a line starting with "{" follows a real newline, so the live line was ended.
check "jobs wait on a terminal: the live line is ended before it" grep -q '^{' "$TMP/ttywait.out"

# ---- help ----
run help help jobs
expect_rc "forged help jobs" 0
"$FORGED" jobs --help >"$TMP/jobs_help.out" 2>&1
check "forged help jobs = forged jobs --help" cmp -s "$TMP/help.out" "$TMP/jobs_help.out"
for s in submit list get cancel wait; do
	check "help jobs: the $s synopsis" grep -q "forged jobs $s" "$TMP/help.out"
done
check "help jobs: the exit codes" grep -q "3 server or transport failure" "$TMP/help.out"
run helpx help nosuch
expect_rc "forged help of an unknown command" 2
run overview help
COMMANDS=$(sed -n '/^commands:/,/^$/p' "$TMP/overview.out" | awk 'NF && $1 != "commands:" {print $1}')
check "the overview lists 12 commands" [ "$(wc -w <<<"$COMMANDS")" = 12 ]
for c in $COMMANDS; do
	run "h_$c" help "$c"
	if [ "$RC" = 0 ] && [ -s "$TMP/h_$c.out" ]; then ok; else bad "forged help $c: exit $RC"; fi
done

# ---- completions ----
run bash completion bash
run zsh completion zsh
check "the built completions are the binary's" cmp -s "$TMP/bash.out" "$(dirname "$FORGED")/completion/forged.bash"
for c in $COMMANDS; do
	check "bash completion has $c" grep -qw -- "$c" <(sed -n '/^_forged_commands/,/^}/p' "$TMP/bash.out")
	check "zsh completion has $c" grep -q "'$c:" "$TMP/zsh.out"
done
check "bash completion: bash -n" bash -n "$TMP/bash.out"
if command -v zsh >/dev/null 2>&1; then
	check "zsh completion: zsh -n" zsh -n "$TMP/zsh.out"
fi
# What bash would offer: COMPREPLY for a few command lines.
comp() {
	bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _forged; echo "${COMPREPLY[*]}"' \
		_ "$TMP/bash.out" "$@"
}
check "bash: forged jo<TAB>" [ "$(comp forged jo)" = jobs ]
check "bash: forged jobs <TAB>" [ "$(comp forged jobs '')" = "submit list get cancel wait --help" ]
check "bash: forged jobs submit --ta<TAB>" [ "$(comp forged jobs submit --ta)" = --target ]
check "bash: forged jobs submit --target mtp<TAB>" [ "$(comp forged jobs submit --target mtp)" = "mtplx-2.11 mtplx-2.12" ]
check "bash: forged jobs --server U list --st<TAB>" [ "$(comp forged jobs --server http://x list --st)" = --state ]
check "bash: forged artifacts list -o <TAB>" [ "$(comp forged artifacts list -o '')" = "table json" ]
check "bash: forged inspect --runtime=o<TAB>" [ "$(comp forged inspect --runtime = o)" = "ollama ollama-mlx" ]
check "bash: forged --color <TAB>" [ "$(comp forged --color '')" = "auto always never" ]
check "bash: forged help fl<TAB>" [ "$(comp forged help fl)" = fleet ]
check "bash: forged forge --quant <TAB>" [ "$(comp forged forge --quant '')" = "keep match mxfp4" ]
if command -v zsh >/dev/null 2>&1; then
	zcomp() {
		zsh -c 'compadd() { shift; echo "$@"; }; _describe() { echo "${(P)4}"; }; _files() { echo "(files)"; }
			compset() { :; }; _message() { echo "(message)"; }
			source <(sed "\$d" "$1"); shift; words=("$@"); CURRENT=${#words}; _forged' _ "$TMP/zsh.out" "$@"
	}
	check "zsh: forged jobs submit --target=ml<TAB>" [ "$(zcomp forged jobs submit --target=ml)" = "mlx-lm-0.31 mlx-lm-0.32 mlx-lm-pr990 mlx-lm-pr1740 mlx-lm-pr1724 mlx-lm-pr1469 lmstudio-mlx mlx-vlm mtplx-2.11 mtplx-2.12 vllm-mlx ollama ollama-mlx llamacpp transformers vllm sglang hf" ]
	check "zsh: forged fleet <TAB>" grep -q "^health:.* report:" <<<"$(zcomp forged fleet '')"
	check "zsh: forged jobs submit SOURCE<TAB> completes files" [ "$(zcomp forged jobs submit '')" = "(files)" ]
fi

# ---- make install: man pages and completions ----
ROOT=$TMP/root
if make -s -C "$REPO" -o "$FORGED" install FORGED="$FORGED" BUILD="$(dirname "$FORGED")" DESTDIR="$ROOT" \
	>"$TMP/install.log" 2>&1; then ok; else bad "make install: $(tail -n 5 "$TMP/install.log")"; fi
check "install: forged.1" cmp -s "$ROOT/usr/local/share/man/man1/forged.1" "$REPO/man/forged.1"
check "install: forged.conf.5" cmp -s "$ROOT/usr/local/share/man/man5/forged.conf.5" "$REPO/man/forged.conf.5"
check "install: the bash completion" cmp -s "$ROOT/usr/local/share/bash-completion/completions/forged" "$TMP/bash.out"
check "install: the zsh completion" cmp -s "$ROOT/usr/local/share/zsh/site-functions/_forged" "$TMP/zsh.out"

# ---- man pages ----
for m in forged.1 forged.conf.5; do
	out=$(groff -man -ww -z "$REPO/man/$m" 2>&1)
	check "groff -man -ww -z $m: no warning ($out)" [ -z "$out" ]
	if command -v man >/dev/null 2>&1; then
		out=$(MANWIDTH=80 man --warnings -l "$REPO/man/$m" 2>&1 >/dev/null)
		check "man -l $m: no warning ($out)" [ -z "$out" ]
	fi
done
# Every command and every option of every synopsis in forged(1) (roff writes - as \-).
MAN1=$(sed 's/\\-/-/g; s/\\f[BIRP]//g' "$REPO/man/forged.1")
for c in $COMMANDS; do
	check "forged.1 describes forged $c" grep -q "^\.SS \"forged $c" <<<"$MAN1"
	for o in $(sed '/^$/q' "$TMP/h_$c.out" | grep -o -- '--[a-z][a-z0-9-]*' | sort -u); do
		check "forged.1 names $o of $c" grep -q -- "$o" <<<"$MAN1"
	done
done
for e in FORGED_URL FORGED_TOKEN HF_ENDPOINT HF_TOKEN HF_HOME HF_HUB_OFFLINE FORGED_CACHE_DIR XDG_CACHE_HOME FORGED_SIMD; do
	check "forged.1 documents \$$e" grep -q "^\.B $e$" <<<"$MAN1"
done
for x in 0 1 2 3; do
	check "forged.1 documents exit status $x" grep -q "^\.B $x$" <<<"$(sed -n '/^\.SH EXIT STATUS/,/^\.SH ENVIRONMENT/p' "$REPO/man/forged.1")"
done
KEYS=$(sed -n '/^static const struct setting settings\[\]/,/^};/s/^[[:space:]]*{ "\([a-z_]*\)".*/\1/p' "$REPO/daemon/config.c")
check "config.c's settings table has 10 keys (the parse works)" [ "$(wc -w <<<"$KEYS")" -ge 10 ]
for k in $KEYS; do
	check "forged.conf.5 documents $k" grep -q "^\.BR $k " "$REPO/man/forged.conf.5"
done

# ---- version --json ----
run version version --json
check "version --json: schema forged.version.v1" [ "$(jq -r .schema "$TMP/version.out")" = forged.version.v1 ]
check "version --json: six libraries, none empty" \
	[ "$(jq -r '.libraries | [keys[], (to_entries[] | select(.value != "") | .key)] | length' "$TMP/version.out")" = 12 ]
check "version --json: sqlite3 is the system's" \
	[ "$(jq -r .libraries.sqlite3 "$TMP/version.out")" = "$(python3 -c 'import sqlite3; print(sqlite3.sqlite_version)')" ]
check "version --json: curl is the system's" \
	[ "$(jq -r .libraries.curl "$TMP/version.out")" = "$(curl --version | head -n 1 | cut -d' ' -f2)" ]
check "version --json: the fields it had stay" [ "$(jq -r '[.forged, .cjson, .simd] | map(type) | join(",")' "$TMP/version.out")" = string,string,string ]

# ---- colour ----
SRC=$FIXTURES/qwen35_mlx_embedded
has_esc() { grep -q $'\033\[' "$1"; }
TERM=xterm script -qec "$FORGED inspect $SRC" /dev/null >"$TMP/tty.out" 2>&1
check "a terminal gets colour" has_esc "$TMP/tty.out"
TERM=dumb script -qec "$FORGED inspect $SRC" /dev/null >"$TMP/dumb.out" 2>&1
check "TERM=dumb gets no colour" eval '! has_esc "$TMP/dumb.out"'
TERM=xterm script -qec "$FORGED --color=never inspect $SRC" /dev/null >"$TMP/never.out" 2>&1
check "--color=never on a terminal: no colour" eval '! has_esc "$TMP/never.out"'
"$FORGED" inspect "$SRC" --color always >"$TMP/always.out" 2>/dev/null
check "--color always into a pipe: colour" has_esc "$TMP/always.out"
run colorbad --color=sometimes version
expect_rc "--color=sometimes" 2
check "--color: the values listed" grep -q "auto, always or never" "$TMP/colorbad.err"
TERM=xterm script -qec "$FORGED jobs list --server $IDLE" /dev/null >"$TMP/ttyjobs.out" 2>&1
check "jobs list on a terminal: a table by default ($(head -c 300 "$TMP/ttyjobs.out"))" grep -q "ID .*STATE" "$TMP/ttyjobs.out"

check "no sanitizer report in the server logs" [ -z "$(grep -l 'Sanitizer\|runtime error:' "$TMP"/*.log)" ]
check "no sanitizer report from the client" [ -z "$(grep -l 'Sanitizer\|runtime error:' "$TMP"/*.err)" ]
finish
