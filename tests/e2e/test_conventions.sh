#!/usr/bin/env bash
# The API's conventions (issue 14 section 4, and the protocol points of issue
# 11): unknown members listed with JSON pointers, WWW-Authenticate on 401,
# HEAD on every GET route, ETag and 304 on artifacts, jobs, fleet health and
# openapi.json, Location on every 201, Retry-After on 202 and 503,
# Idempotency-Key on every POST, 409 for a finished job's DELETE and for an
# existing out, 200 for a repeated fleet report, cursors past int64, fleet
# health paging, --listen localhost:PORT, and /metrics families.
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/serve_lib.sh"

mkdir -p "$TMP/roots"
start_server main --state-dir "$TMP/state" --allow-roots "$FIXTURES" --allow-roots "$TMP/roots" \
	--tokens-file "$TMP/tokens" --workers 1 || { finish; exit 1; }
MAIN_PID=$SPID

# ---- every fault of a body, each with its pointer ----
post /v1/jobs '{"kind": "forge", "source": "qwen35_hf", "traget": "mlx-lm-0.32"}'
expect_problem "an unknown member is 422" 422 invalid-field
check "errors[] names /traget as an unknown field ($(jb -c .errors))" \
	[ "$(jb -c '.errors')" = '[{"pointer":"/traget","detail":"unknown field"}]' ]
post /v1/jobs '{"kind": "inspect", "source": 7, "target": "vllm-9", "quant": "affine:7:64", "extra": 1, "out": []}'
expect_problem "several faults: 422 invalid-field" 422 invalid-field
expect_pointers "several faults: every one listed" "/extra,/kind,/out,/quant,/source,/target"
post /v1/inspections '{"source": "qwen35_hf", "runtimes": ["mlx-lm-0.32", 7, "vllm-9"], "deep": true}'
expect_pointers "inspection faults with array pointers" "/deep,/runtimes/1,/runtimes/2"
post /v1/fleet/reports '{"host": "h", "artifact": 1, "runtime": "ollama", "observed": {"free": {"form": [1, 2]}}, "x": 1}'
expect_pointers "fleet report: observed stays free-form, the unknown member is named" /x
big=$(head -c 20000 /dev/zero | tr '\0' a)
post /v1/fleet/reports "{\"host\": \"h\", \"artifact\": 1, \"runtime\": \"ollama\", \"observed\": {\"a\": \"$big\"}}"
expect_pointers "fleet report: observed is bounded (20 kB)" /observed
get "/v1/jobs?limit=0&cursor=x&state=nope"
expect_problem "query faults: 422 invalid-query" 422 invalid-query
check "query faults name their parameters ($(jb -c '[.errors[].parameter]'))" \
	[ "$(jb '[.errors[].parameter] | sort | join(",")')" = "cursor,limit,state" ]
get "/v1/artifacts?cursor=9223372036854775808"
expect_problem "a cursor past int64 is 422, not saturated" 422 invalid-query
get "/v1/jobs?cursor=99999999999999999999999"
expect_problem "a job cursor past int64 is 422" 422 invalid-query
get "/v1/artifacts?cursor=9223372036854775807"
expect "the largest int64 cursor is fine" 200

# ---- 401 says how to authenticate ----
http GET /v1/jobs
expect_problem "no token: 401" 401 unauthorized
check "401 carries WWW-Authenticate: Bearer ($(header WWW-Authenticate))" grep -q '^Bearer' <<<"$(header WWW-Authenticate)"

# ---- Location on every 201, Retry-After on 202 ----
post /v1/inspections '{"source": "qwen35_mlx_sidecar"}'
expect "inspection: 201" 201
AID=$(jb .artifact_id)
check "inspection: Location" [ "$(header Location)" = "/v1/artifacts/$AID" ]
V='{"schema": "forged.verification.v1", "rows": [{"depth": 0, "tok_s": 15.0}, {"depth": 1, "tok_s": 30.0, "acceptance": [0.9], "quality_passed": true}]}'
post "/v1/artifacts/$AID/verifications" "$V"
expect "verification: 201" 201
check "verification: Location names the artifact holding it ($(header Location))" [ "$(header Location)" = "/v1/artifacts/$AID" ]
post /v1/fleet/reports "{\"host\": \"gpu-1\", \"artifact\": $AID, \"runtime\": \"ollama\", \"observed\": {\"tok_s\": 1}}"
expect "fleet report: 201" 201
check "fleet report: Location ($(header Location))" [ "$(header Location)" = /v1/fleet/health ]
post /v1/fleet/reports "{\"host\": \"gpu-1\", \"artifact\": $AID, \"runtime\": \"ollama\", \"observed\": {\"tok_s\": 1}}"
expect "the same fleet report again: 200, not a second 201" 200
post /v1/fleet/reports "{\"host\": \"gpu-1\", \"artifact\": $AID, \"runtime\": \"ollama\", \"observed\": {\"tok_s\": 2}}"
expect "a changed fleet report: 201" 201
post /v1/jobs '{"kind": "forge", "source": "qwen35_hf"}'
expect "job: 202" 202
JOB=$(jb .id)
check "job: Retry-After on the 202 ($(header Retry-After))" [ -n "$(header Retry-After)" ]
poll_job "$JOB" succeeded 300 || bad "job $JOB did not succeed: $(head -c 300 "$TMP/body")"

# ---- DELETE of a finished job is 409 ----
http DELETE "/v1/jobs/$JOB" "${W[@]}"
expect_problem "DELETE of a succeeded job: 409" 409 job-finished

# ---- out: an existing folder or file, or a root, is refused at submission ----
mkdir -p "$TMP/roots/taken"
: >"$TMP/roots/afile"
post /v1/jobs "{\"kind\": \"forge\", \"source\": \"qwen35_hf\", \"out\": \"$TMP/roots/taken\"}"
expect_problem "out that exists: 409, not 202 then a failed job" 409 out-exists
post /v1/jobs "{\"kind\": \"forge\", \"source\": \"qwen35_hf\", \"out\": \"$TMP/roots/afile\"}"
expect_problem "out that is a file: 409" 409 out-exists
post /v1/jobs "{\"kind\": \"forge\", \"source\": \"qwen35_hf\", \"out\": \"$TMP/roots\"}"
expect_problem "out that is an allowed root itself: 422" 422 bad-path
OBODY="{\"kind\": \"forge\", \"source\": \"qwen35_hf\", \"out\": \"$TMP/roots/fresh\"}"
post /v1/jobs "$OBODY" -H "Idempotency-Key: out-key-1"
expect "out that is new: 202" 202
OJOB=$(jb .id)
poll_job "$OJOB" succeeded 300 || bad "job $OJOB did not succeed"
post /v1/jobs "$OBODY" -H "Idempotency-Key: out-key-1"
check "a replay of the job that made out is still the same job ($CODE $(jb .id))" [ "$CODE:$(jb .id)" = "202:$OJOB" ]

# ---- Idempotency-Key on every POST ----
post /v1/inspections '{"source": "glm45"}' -H "Idempotency-Key: insp-1"
expect "keyed inspection: 201" 201
IA=$(jb .artifact_id)
post /v1/inspections '{"source": "glm45"}' -H "Idempotency-Key: insp-1"
check "keyed inspection replayed: the same artifact ($CODE $(jb .artifact_id))" [ "$CODE:$(jb .artifact_id)" = "201:$IA" ]
check "replay says so" [ "$(header Idempotent-Replayed)" = true ]
check "replay keeps Location" [ "$(header Location)" = "/v1/artifacts/$IA" ]
post /v1/inspections '{"source": "qwen35_hf"}' -H "Idempotency-Key: insp-1"
expect_problem "keyed inspection, another body: 422" 422 idempotency-key-reused
post "/v1/artifacts/$AID/verifications" "$V" -H "Idempotency-Key: ver-1"
VID=$(jb .id)
post "/v1/artifacts/$AID/verifications" "$V" -H "Idempotency-Key: ver-1"
check "keyed verification replayed: the same id ($CODE $(jb .id))" [ "$CODE:$(jb .id)" = "201:$VID" ]
get "/v1/artifacts/$AID"
check "keyed verification stored once ($(jb '.verifications | length') verifications)" [ "$(jb '.verifications | length')" = 2 ]
post /v1/fleet/reports "{\"host\": \"gpu-2\", \"artifact\": $AID, \"runtime\": \"ollama\"}" -H "Idempotency-Key: rep-1"
expect "keyed fleet report: 201" 201
post /v1/fleet/reports "{\"host\": \"gpu-2\", \"artifact\": $AID, \"runtime\": \"ollama\"}" -H "Idempotency-Key: rep-1"
check "keyed fleet report replayed: 201 again, replayed" [ "$CODE:$(header Idempotent-Replayed)" = "201:true" ]
post /v1/fleet/reports "{\"host\": \"gpu-2\", \"artifact\": $AID, \"runtime\": \"ollama\"}" -H "Idempotency-Key: bad key"
expect_problem "a key with a space: 400" 400 bad-idempotency-key

# ---- HEAD on every GET route; ETag and 304 ----
for path in /livez /readyz /healthz /metrics /openapi.json /v1/jobs "/v1/jobs/$JOB" /v1/artifacts "/v1/artifacts/$AID" \
	/v1/fleet/health /v1/whoami /ui/ /ui/app.js; do
	http GET "$path" "${R[@]}"
	gcode=$CODE
	getag=$(header ETag)
	glen=$(header Content-Length)
	http HEAD "$path" "${R[@]}"
	check "HEAD $path: $CODE like GET ($gcode), not 405" [ "$CODE" = "$gcode" ]
	# /metrics changes with every request it counts.
	[ "$path" = /metrics ] && continue
	check "HEAD $path: the GET's ETag and Content-Length ($(header Content-Length) vs $glen)" \
		[ "$(header ETag)" = "$getag" -a "$(header Content-Length)" = "$glen" ]
done
for path in /openapi.json /v1/jobs "/v1/jobs/$JOB" /v1/artifacts "/v1/artifacts/$AID" /v1/fleet/health; do
	http GET "$path" "${R[@]}"
	etag=$(header ETag)
	check "GET $path: a strong ETag ($etag)" grep -Eq '^"[0-9a-f]{32}"$' <<<"$etag"
	http GET "$path" "${R[@]}" -H "If-None-Match: $etag"
	check "GET $path with If-None-Match: 304, no body ($CODE)" [ "$CODE" = 304 -a ! -s "$TMP/body" ]
	http HEAD "$path" "${R[@]}" -H "If-None-Match: W/$etag"
	check "HEAD $path with a weak If-None-Match: 304 ($CODE)" [ "$CODE" = 304 ]
	http GET "$path" "${R[@]}" -H 'If-None-Match: "nope"'
	expect "GET $path with another tag: 200" 200
done

# ---- fleet health: the summary and a bounded unhealthy list, with a cursor ----
# 60 unhealthy artifacts (the 306 incident copied to 60 folders: the same folder
# inspected again is one artifact since issue 13), one served.
for i in $(seq 1 60); do
	cp -r "$FIXTURES/qwen35_mlx_embedded" "$TMP/roots/pack306_$i"
	post /v1/inspections "{\"source\": \"$TMP/roots/pack306_$i\"}"
done
post /v1/fleet/reports "{\"host\": \"gpu-9\", \"artifact\": $(jb .artifact_id), \"runtime\": \"mlx-lm-0.31\"}"
get /v1/fleet/health
expect "health: 200" 200
check "health: the default page lists 50 unhealthy ($(jb '.unhealthy | length'))" [ "$(jb '.unhealthy | length')" = 50 ]
check "health: unhealthy_total counts them all ($(jb .unhealthy_total))" [ "$(jb .unhealthy_total)" -ge 60 ]
check "health: next_cursor 50" [ "$(jb .next_cursor)" = 50 ]
check "health: the summary is there" [ "$(jb '[.artifacts.total > 60, (.verdict_matrix | type), (.probe_after_load | type)] | map(tostring) | join(" ")')" = "true array object" ]
check "health: the served one comes first" [ "$(jb '.unhealthy[0].hosts[0].host')" = gpu-9 ]
cp "$TMP/body" "$TMP/page0.json"
size0=$(wc -c <"$TMP/body")
get /v1/fleet/health?full=1
check "health ?full=1: the whole list ($(jb '.unhealthy | length'))" [ "$(jb '.unhealthy | length')" = "$(jb .unhealthy_total)" ]
check "health ?full=1: no next_cursor (the document as it was)" [ "$(jb 'has("next_cursor")')" = false ]
check "health: the default page ($size0 B) is smaller than the whole ($(wc -c <"$TMP/body") B)" [ "$size0" -lt "$(wc -c <"$TMP/body")" ]
jb -c '[.unhealthy[].artifact_id]' >"$TMP/all_ids"
paged="[]"
cursor=0
for i in $(seq 1 20); do
	get "/v1/fleet/health?unhealthy_limit=7&cursor=$cursor"
	[ "$CODE" = 200 ] || { bad "health page at $cursor: HTTP $CODE"; break; }
	[ "$(jb '.unhealthy | length')" -le 7 ] || bad "health page at $cursor holds more than 7"
	paged=$(jq -c --argjson p "$paged" '$p + [.unhealthy[].artifact_id]' "$TMP/body")
	cursor=$(jb '.next_cursor // empty')
	[ -z "$cursor" ] && break
done
check "health pages: every unhealthy artifact once, in order" [ "$paged" = "$(cat "$TMP/all_ids")" ]
get "/v1/fleet/health?unhealthy_limit=0"
expect_problem "health: unhealthy_limit 0 is 422" 422 invalid-query
get "/v1/fleet/health?unhealthy_limit=501"
expect_problem "health: unhealthy_limit over 500 is 422" 422 invalid-query
get "/v1/fleet/health?full=yes"
expect_problem "health: full=yes is 422" 422 invalid-query

# ---- /metrics: every family once, with HELP and TYPE; the process, requests, reads and writes ----
http GET /metrics
expect "/metrics: 200" 200
if out=$("$PYTHON" - "$TMP/body" <<'PY' 2>&1
import re, sys
lines = open(sys.argv[1]).read().splitlines()
help_, type_, seen, order = {}, {}, {}, []
problems = []
for ln in lines:
    m = re.match(r"# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$", ln)
    if m:
        d = help_ if m.group(1) == "HELP" else type_
        if m.group(2) in d:
            problems.append("%s %s twice" % (m.group(1), m.group(2)))
        d[m.group(2)] = m.group(3)
        continue
    m = re.match(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})? (\S+)$', ln)
    if not m:
        problems.append("not a sample: " + ln)
        continue
    name = m.group(1)
    fam = name
    for suf in ("_bucket", "_sum", "_count"):
        if name.endswith(suf) and type_.get(name[: -len(suf)]) == "histogram":
            fam = name[: -len(suf)]
    if fam not in type_ or fam not in help_:
        problems.append("sample of %s before its HELP and TYPE" % fam)
    if order and order[-1] != fam and fam in seen:
        problems.append("family %s appears twice" % fam)
    seen[fam] = True
    if not order or order[-1] != fam:
        order.append(fam)
for fam in ["forged_build_info", "process_resident_memory_bytes", "process_open_fds", "process_cpu_seconds_total",
            "process_start_time_seconds", "forged_http_request_duration_seconds", "forged_pull_fetched_bytes_total",
            "forged_pull_cache_hit_bytes_total", "forged_forge_bytes_written_total", "forged_http_requests_total"]:
    if fam not in seen:
        problems.append("no " + fam)
print("\n".join(problems) if problems else "ok %d families" % len(seen))
sys.exit(1 if problems else 0)
PY
); then ok; else bad "/metrics families: $out"; fi
check "/metrics: request durations by route and method" \
	grep -q '^forged_http_request_duration_seconds_count{route="/v1/jobs/{id}",method="GET"} [1-9]' "$TMP/body"
check "/metrics: a forge job wrote bytes" grep -Eq '^forged_forge_bytes_written_total [1-9][0-9]*$' "$TMP/body"
check "/metrics: resident memory" grep -Eq '^process_resident_memory_bytes [1-9][0-9]*$' "$TMP/body"
check "/metrics: open fds" grep -Eq '^process_open_fds [1-9][0-9]*$' "$TMP/body"
check "/metrics: start time near now" \
	"$PYTHON" -c 'import re,sys,time; v=float(re.search(r"^process_start_time_seconds (\S+)$", open(sys.argv[1]).read(), re.M).group(1)); sys.exit(not (time.time() - 3600 < v <= time.time() + 5))' "$TMP/body"
check "/metrics: build info names the version" grep -Eq '^forged_build_info\{version="[0-9.]+",libmicrohttpd="[0-9.]+"\} 1$' "$TMP/body"

# ---- Retry-After on 503 ----
stop_server "$MAIN_PID" 10
check "main: exit 0" [ "$STOP_RC" = 0 ]
start_server capped --state-dir "$TMP/qstate" --allow-roots "$FIXTURES" --tokens-file "$TMP/tokens" --workers 0 \
	--queue-cap 1 || { finish; exit 1; }
post /v1/jobs '{"kind": "forge", "source": "qwen35_hf"}'
post /v1/jobs '{"kind": "forge", "source": "qwen35_mlx_sidecar"}'
expect_problem "queue over the cap: 503" 503 queue-full
check "queue-full carries Retry-After ($(header Retry-After))" [ -n "$(header Retry-After)" ]
http GET /readyz
check "/readyz 503 carries Retry-After ($CODE $(header Retry-After))" [ "$CODE" = 503 -a -n "$(header Retry-After)" ]
stop_server "$SPID" 10

# ---- --listen localhost:PORT ----
"$FORGED" serve --listen localhost:0 --state-dir "$TMP/lstate" --workers 0 >"$TMP/localhost.log" 2>&1 &
LPID=$!
PIDS="$PIDS $LPID"
for i in $(seq 1 100); do grep -q "listening on" "$TMP/localhost.log" 2>/dev/null && break; kill -0 "$LPID" 2>/dev/null || break; sleep 0.05; done
LPORT=$(sed -n 's/.* listening on [^ ]* port \([0-9][0-9]*\),.*/\1/p' "$TMP/localhost.log" 2>/dev/null)
check "--listen localhost:0 starts ($(tail -n 1 "$TMP/localhost.log"))" [ -n "$LPORT" ]
check "--listen localhost:0 answers on localhost" [ "$(curl -s --max-time 5 "http://localhost:${LPORT:-1}/livez" | jq -r .status)" = alive ]
kill -TERM "$LPID"
wait "$LPID" 2>/dev/null
rc=0; "$FORGED" serve --listen nowhere.invalid:8470 --state-dir "$TMP/lstate" >/dev/null 2>"$TMP/err" || rc=$?
check "--listen of a name that does not resolve: exit 2 ($rc)" [ "$rc" = 2 ]

check "no sanitizer report in any server log" no_sanitizer_report
finish
