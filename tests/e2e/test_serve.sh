#!/usr/bin/env bash
# `forged serve` end to end, as a CI job drives it: the real server on
# 127.0.0.1 with an ephemeral port and a temporary state folder, talked to
# with curl and checked with jq.  Covers issue 5's list: inspections of every
# fixture read back from the store, a forge job polled to `succeeded`, the
# issue-306 verification figures and their control, fleet reports and fleet
# health, idempotent resubmission, cancel, auth, body limits, path
# confinement, request ids, keyset pagination, /metrics, /openapi.json, token
# reload on SIGHUP, a kill -9 in the middle of a forge, and a graceful stop.
#
# FORGED_E2E_STORE=postgres (test_serve_pg.sh) runs all of it again with
# every server on a PostgreSQL database of its own (--store, one per state
# folder) on the cluster FORGED_TEST_PG names; what only SQLite has (its
# file, its write lock, its disk filling) has a PostgreSQL counterpart or
# is said to be skipped.
set -u
. "$(dirname "$0")/lib.sh"
FIXTURES=$(cd "$FIXTURES" && pwd)
REPO=$(cd "$(dirname "$0")/../.." && pwd)
STORE=$E2E_STORE
# sql STATE_DIR SQL: run SQL on that server's database; prints the first column of each row.
sql() {
	if [ "$STORE" = postgres ]; then
		psql -X -q -A -t "$(store_url "$1")" -c "$2"
	else
		"$PYTHON" -c 'import sqlite3, sys
db = sqlite3.connect(sys.argv[1], timeout=10)
for row in db.execute(sys.argv[2]): print(row[0])
db.commit()' "$1/forged.db" "$2"
	fi
}
# store_intact STATE_DIR: SQLite's PRAGMA integrity_check, or PostgreSQL's counters against their rows.
store_intact() {
	if [ "$STORE" = postgres ]; then
		[ "$(sql "$1" "SELECT (SELECT count(*) FROM artifacts) = coalesce((SELECT n FROM artifact_stats WHERE dim = 'total'), 0)")" = t ]
	else
		[ "$("$PYTHON" -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("PRAGMA integrity_check").fetchone()[0])' "$1/forged.db")" = ok ]
	fi
}

# Every server start_server starts is killed on exit (lib.sh); then the tmpfs goes.
FULL_MOUNTED=0
on_exit() {
	[ "$FULL_MOUNTED" = 1 ] && umount "$TMP/fullout" 2>/dev/null
	[ "$FULL_MOUNTED" = 1 ] && umount "$TMP/full" 2>/dev/null
}

RTOK=e2e-read-token-1f0c
WTOK=e2e-write-token-77a2
sha() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
printf 'read ci-reader %s\nwrite ci-writer %s\n' "$(sha "$RTOK")" "$(sha "$WTOK")" >"$TMP/tokens"

# http METHOD PATH [CURL ARGS...]: status in $CODE, body in $TMP/body, headers in $TMP/hdr.
http() {
	local m=$1 p=$2
	shift 2
	CODE=$(curl -sS -o "$TMP/body" -D "$TMP/hdr" -w '%{http_code}' --max-time 120 -X "$m" "$@" "$BASE$p" 2>"$TMP/curl.err") || CODE=000
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

STATE=$TMP/state
mkdir -p "$TMP/roots"
start_server main --state-dir "$STATE" --allow-roots "$FIXTURES" --allow-roots "$TMP" \
	--tokens-file "$TMP/tokens" --workers 2 || { finish; exit 1; }
MAIN_PID=$SPID

# ---- probes, metrics, openapi: open ----
for p in /livez /readyz /healthz; do
	http GET "$p"
	expect "$p without a token" 200
done
http GET /livez
check "/livez says alive" [ "$(jb .status)" = alive ]
http GET /readyz
check "/readyz says ready" [ "$(jb .status)" = ready ]
http GET /openapi.json
expect "/openapi.json without a token" 200
check "/openapi.json parses as OpenAPI 3" [ "$(jb .openapi)" = 3.0.3 ]
check "/openapi.json is docs/openapi.json" cmp -s "$TMP/body" "$REPO/docs/openapi.json"

# ---- auth ----
http GET /v1/jobs
expect_problem "no token: 401" 401 unauthorized
http GET /v1/jobs -H "Authorization: Bearer not-a-token"
expect_problem "wrong token: 401" 401 unauthorized
http GET /v1/jobs -H "Authorization: Basic $(printf 'a:b' | base64)"
expect_problem "basic auth: 401" 401 unauthorized
http GET /v1/jobs -H "Authorization: Bearer $(sha "$RTOK")"
expect_problem "the token's hash as a token: 401" 401 unauthorized
get /v1/jobs
expect "read token on GET: 200" 200
http GET /v1/fleet/health "${W[@]}"
expect "write token on GET: 200" 200
http POST /v1/inspections "${R[@]}" "${J[@]}" --data-binary '{"source": "qwen35_hf"}'
expect_problem "read token on POST: 403" 403 forbidden
http POST /v1/inspections "${J[@]}" --data-binary '{"source": "qwen35_hf"}'
expect_problem "no token on POST: 401" 401 unauthorized
http DELETE /v1/jobs/1 "${R[@]}"
expect_problem "read token on DELETE: 403" 403 forbidden

# ---- routing ----
get /v1/nothing
expect_problem "unknown route: 404" 404 no-such-route
http PUT /v1/jobs "${W[@]}"
expect_problem "PUT /v1/jobs: 405" 405 method-not-allowed
check "405 names the allowed methods" [ "$(header Allow)" = "POST, GET, HEAD" ]
get /v1/jobs/0
expect_problem "job id 0 is no route" 404 no-such-route
get /v1/jobs/99999
expect_problem "unknown job: 404" 404 not-found
get /v1/artifacts/99999
expect_problem "unknown artifact: 404" 404 not-found

# ---- request ids ----
http GET /livez -H "X-Request-Id: e2e-req.42:a_b"
check "X-Request-Id echoed" [ "$(header X-Request-Id)" = "e2e-req.42:a_b" ]
http GET /livez
check "X-Request-Id made when absent (16 hex digits)" grep -Eq '^[0-9a-f]{16}$' <<<"$(header X-Request-Id)"
http GET /livez -H 'X-Request-Id: bad id with spaces'
check "an X-Request-Id with spaces is replaced" grep -Eq '^[0-9a-f]{16}$' <<<"$(header X-Request-Id)"
http GET /v1/jobs/99999 "${R[@]}" -H "X-Request-Id: e2e-problem-7"
check "X-Request-Id in a problem body" [ "$(jb .request_id)" = e2e-problem-7 ]
check "X-Request-Id logged" grep -q "GET /v1/jobs/99999 404 request_id=e2e-problem-7 token=ci-reader" "$TMP/main.log"

# ---- bodies: 413, 415, 400 ----
{ printf '{"source": "'; head -c 1100000 /dev/zero | tr '\0' x; printf '"}'; } >"$TMP/huge.json"
http POST /v1/inspections "${W[@]}" "${J[@]}" --data-binary "@$TMP/huge.json"
expect_problem "body over 1 MiB: 413" 413 body-too-large
head -c 1048000 /dev/zero | tr '\0' ' ' >"$TMP/big_ok.json"
printf '{"source": "qwen35_mlx_sidecar"}' >>"$TMP/big_ok.json"
http POST /v1/inspections "${W[@]}" "${J[@]}" --data-binary "@$TMP/big_ok.json"
expect "body just under 1 MiB: accepted" 201
http POST /v1/inspections "${W[@]}" -H 'Content-Type: text/plain' --data-binary '{"source": "qwen35_hf"}'
expect_problem "text/plain: 415" 415 unsupported-media-type
http POST /v1/inspections "${W[@]}" --data-binary '{"source": "qwen35_hf"}' -H 'Content-Type:'
expect_problem "no content type: 415" 415 unsupported-media-type
http POST /v1/inspections "${W[@]}" -H 'Content-Type: application/json; charset=utf-8' \
	--data-binary '{"source": "qwen35_mlx_sidecar"}'
# The same source revision again is the same report, so the same artifact (issue 13): 200, not a new one.
expect "application/json; charset=utf-8 is JSON (the same inspection again: 200)" 200
check "the same inspection again: existing, the same digest" [ "$(jb '[.existing, (.digest | startswith("sha256:"))] | map(tostring) | join(" ")')" = "true true" ]
post /v1/inspections '{"source": "qwen35_hf",'
expect_problem "malformed JSON: 400" 400 malformed-json
post /v1/inspections '["qwen35_hf"]'
expect_problem "a JSON array: 400" 400 malformed-json
post /v1/inspections ''
expect_problem "no body: 400" 400 malformed-json
post /v1/inspections "$(printf '{"a":%.0s' $(seq 1 40))1$(printf '}%.0s' $(seq 1 40))"
expect_problem "JSON 40 deep: 400" 400 json-too-deep
post /v1/inspections '{"source": 7}'
expect_problem "source not a string: 422" 422 invalid-field
post /v1/inspections '{"source": "qwen35_hf", "runtimes": ["vllm-9"]}'
expect_problem "unknown runtime: 422" 422 unknown-runtime

# ---- path confinement ----
ln -s /etc "$TMP/escape"
mkdir -p "$TMP/inside"
ln -s "$FIXTURES/qwen35_mlx_sidecar" "$TMP/inside/link_ok"
post /v1/inspections '{"source": "/etc"}'
expect_problem "absolute path outside the roots: 403" 403 path-forbidden
post /v1/inspections '{"source": "../fixtures/qwen35_hf"}'
expect_problem "relative ..: 403" 403 path-forbidden
post /v1/inspections "{\"source\": \"$FIXTURES/qwen35_hf/../qwen35_hf\"}"
expect_problem ".. inside a root: 403" 403 path-forbidden
post /v1/inspections "{\"source\": \"$TMP/escape\"}"
expect_problem "symlink out of a root: 403" 403 path-forbidden
post /v1/inspections "{\"source\": \"$TMP/escape/ssl\"}"
expect_problem "path through a symlink out of a root: 403" 403 path-forbidden
post /v1/inspections "{\"source\": \"$TMP/inside/link_ok\"}"
expect "symlink between two roots: allowed (the folder it resolves to, inspected before: 200)" 200
post /v1/inspections '{"source": "no_such_fixture"}'
expect_problem "missing source: 422" 422 path-missing
post /v1/inspections '{"source": "https://example.com/model"}'
expect_problem "URL source of a host not in allow_hosts: 403" 403 host-forbidden
post /v1/jobs '{"kind": "forge", "source": "/etc"}'
expect_problem "job source outside the roots: 403" 403 path-forbidden
post /v1/jobs "{\"kind\": \"forge\", \"source\": \"qwen35_hf\", \"out\": \"/var/tmp/forged-e2e-out\"}"
expect_problem "job out outside the roots: 403" 403 path-forbidden
post /v1/jobs "{\"kind\": \"forge\", \"source\": \"qwen35_hf\", \"out\": \"$TMP/escape/out\"}"
expect_problem "job out through a symlink out of a root: 403" 403 path-forbidden
check "nothing was written outside the roots" [ ! -e /var/tmp/forged-e2e-out ]

# ---- inspections: every fixture, read back from the store ----
# Each report is compared with `forged inspect --json` on the same folder
# (the CLI runs the same code offline), then the stored artifact's verdicts.
declare -A AID
for name in $(jq -r '.fixtures | keys[]' "$FIXTURES/manifest.json"); do
	[ "$name" = tensors_zoo ] && continue
	"$FORGED" inspect "$FIXTURES/$name" --json >"$TMP/cli_$name.json" 2>/dev/null
	post /v1/inspections "{\"source\": \"$name\"}"
	# qwen35_mlx_sidecar was inspected above: the same artifact again (200).
	want=201
	[ "$name" = qwen35_mlx_sidecar ] && want=200
	if [ "$CODE" != "$want" ]; then bad "inspect $name: HTTP $CODE, want $want $(head -c 300 "$TMP/body")"; continue; fi
	AID[$name]=$(jb .artifact_id)
	check "inspect $name: Location" [ "$(header Location)" = "/v1/artifacts/${AID[$name]}" ]
	check "inspect $name: the report is forged.inspect.v1" [ "$(jb .report.schema)" = forged.inspect.v1 ]
	check "inspect $name: report equals the CLI's" \
		[ "$(jb '.report | del(.source)' | jq -S -c .)" = "$(jq -S -c 'del(.source)' "$TMP/cli_$name.json")" ]
	get "/v1/artifacts/${AID[$name]}"
	expect "artifact of $name" 200
	check "artifact of $name: verdict codes" \
		[ "$(jb '[.verdicts[].code] | sort | join(",")')" = "$(jq -r '[.verdicts[].code] | unique | join(",")' "$TMP/cli_$name.json")" ]
	check "artifact of $name: ok" [ "$(jb .ok)" = "$(jq -r .ok "$TMP/cli_$name.json")" ]
	check "artifact of $name: family" [ "$(jb .family)" = "$(jq -r .family "$TMP/cli_$name.json")" ]
	check "artifact of $name: source as named" [ "$(jb .source)" = "$name" ]
	check "artifact of $name: report stored" [ "$(jb .report.family)" = "$(jq -r .family "$TMP/cli_$name.json")" ]
done

# stored_has NAME CODE SEVERITY OK: the stored artifact of NAME has CODE with SEVERITY, and ok is OK.
stored_has() {
	local sev okv
	get "/v1/artifacts/${AID[$1]:-0}"
	sev=$(jb --arg c "$2" '.verdicts[] | select(.code == $c) | .severity')
	okv=$(jb .ok)
	if [ "$sev" = "$3" ] && [ "$okv" = "$4" ]; then ok; else bad "$1: $2 severity '$sev' ok $okv, want $3 $4"; fi
}
# Incidents of docs/domain.md section 3 and each error verdict's fixture.
stored_has qwen35_mlx_embedded embedded_mtp_shift_hazard error false
stored_has qwen35_mlx_pruned_index index_mismatch warning false
stored_has qwen35_mlx_stray_shard stray_shard warning false
stored_has qwen35_mlx_embedded_lm_prefix embedded_mtp_shift_hazard error false
stored_has qwen35_mlx_trunk_double_shifted trunk_double_shifted error false
stored_has qwen35_mlx_head_shifted head_double_shifted error false
stored_has qwen35_mlx_raw_head raw_zero_centred_head info true
stored_has qwen35_mlx_mixed_head mixed_convention error false
stored_has qwen35_mlx_zero_head degenerate_head error false
stored_has qwen35_mlx_nan_head nonfinite_norm error false
stored_has qwen35_mlx_no_head_declared mtp_declared_missing info true
stored_has qwen35_moe_hf_ambiguous expert_layout_ambiguous error false
get "/v1/artifacts/${AID[qwen35_mlx_sidecar]:-0}"
check "healthy sidecar: no verdicts, ok" [ "$(jb '[(.verdicts | length), .ok] | map(tostring) | join(" ")')" = "0 true" ]
get "/v1/artifacts/${AID[qwen35_mlx_embedded]:-0}"
check "306 stored report: mlx-lm-0.31 double-shifts the trunk" \
	[ "$(jb '.report.runtimes[] | select(.runtime == "mlx-lm-0.31") | [.trunk, .head, .outcome] | join(" ")')" = "double_shifted dropped broken" ]
# Incident 3 for a runtime that does not heal the head: MTPLX 2.11's qwen3_5_mtp loader (issue 10:
# qwen3_5_moe takes the generic injector, which heals, so the old MoE case is clean now).
post /v1/inspections '{"source": "qwen35_mtp_model_type", "runtimes": ["mtplx-2.11"]}'
expect "176 qwen3_5_mtp for mtplx-2.11" 201
AID[mtp_raw_2_11]=$(jb .artifact_id)
check "176 qwen3_5_mtp for mtplx-2.11: only it is targeted" \
	[ "$(jb '[.report.runtimes[] | select(.targeted).runtime] | join(",")')" = mtplx-2.11 ]
stored_has mtp_raw_2_11 head_convention_mismatch error false
post /v1/inspections '{"source": "qwen35_hf", "runtimes": ["mlx-lm-0.33", "hf"]}'
expect "a versioned id and the hf alias" 201
check "a versioned id and the hf alias: the rows they name" \
	[ "$(jb '[.report.runtimes[] | select(.targeted) | .runtime + (if .version_of then "=" + .version_of else "" end)] | join(",")')" = "mlx-lm-0.32=mlx-lm-0.33,transformers,vllm,sglang" ]

# ---- a forge job ----
http GET /v1/fleet/health "${R[@]}"
total_before=$(jb .artifacts.total)
post /v1/jobs '{"kind": "forge", "source": "qwen35_hf", "target": "mtplx-2.12"}'
expect "forge job: 202" 202
JOB=$(jb .id)
check "forge job: Location" [ "$(header Location)" = "/v1/jobs/$JOB" ]
check "forge job: the job object's fields" \
	[ "$(jb 'keys | sort | join(",")')" = "artifact_id,artifact_url,bytes_done,bytes_total,created_at,error,eta_s,id,kind,progress,refusal,request,stage,state,updated_at,verdicts" ]
check "forge job: kind forge, not finished" grep -Eq '^forge (queued|running)$' <<<"$(jb '.kind + " " + .state')"
if poll_job "$JOB" succeeded 300; then ok; else bad "forge job $JOB: $(head -c 300 "$TMP/body")"; fi
check "forge job: progress 1, no error" [ "$(jb '[.progress, .error] | map(tostring) | join(" ")')" = "1 null" ]
FORGED_ID=$(jb .artifact_id)
http GET /v1/fleet/health "${R[@]}"
check "fleet health counts the worker's new artifact at once" [ "$(jb .artifacts.total)" = $((total_before + 1)) ]
get "/v1/artifacts/$FORGED_ID"
expect "forged artifact" 200
art=$(jb .path)
check "forged artifact: under state/artifacts/JOB" [ "$art" = "$STATE/artifacts/$JOB" ]
check "forged artifact: fingerprint = sha256(config.json + mtp.safetensors)" \
	[ "$(jb .fingerprint)" = "$(cat "$art/config.json" "$art/mtp.safetensors" | sha256sum | cut -d' ' -f1)" ]
check "forged artifact: fingerprint equals forged.json's" [ "$(jb .fingerprint)" = "$(jq -r .fingerprint "$art/forged.json")" ]
check "forged artifact: file fingerprints" \
	[ "$(jb '.fingerprints["mtp.safetensors"]')" = "$(sha256sum "$art/mtp.safetensors" | cut -d' ' -f1)" ]
check "forged artifact: ok, provenance" [ "$(jb '[.ok, (.provenance != null)] | map(tostring) | join(" ")')" = "true true" ]
check "forged artifact: the head is absolute in the sidecar" \
	[ "$(jb '.report.sets[] | select(.name == "mtp") | .convention')" = absolute ]
FP=$(jb .fingerprint)
post /v1/jobs '{"kind": "inspect", "source": "qwen35_hf"}'
expect_problem "job kind other than forge: 422" 422 invalid-field
post /v1/jobs '{"kind": "forge", "source": "qwen35_hf", "target": "vllm-9"}'
expect_problem "job with an unknown target: 422" 422 unknown-runtime
post /v1/jobs '{"kind": "forge", "source": "qwen35_hf", "quant": "affine:7:64"}'
expect_problem "job with a bad quant policy: 422" 422 invalid-field
post /v1/jobs '{"kind": "forge", "source": "q_mlx_lm_head", "quant": "affine:4:64", "allow_requantize": "yes"}'
expect_problem "job with allow_requantize not a boolean: 422" 422 invalid-field
check "allow_requantize not a boolean: errors[] names it" \
	[ "$(jb -c '.errors')" = '[{"pointer":"/allow_requantize","detail":"must be a boolean"}]' ]
# Re-quantizing an already quantized head (issue 12) needs allow_requantize, as the CLI's --allow-requantize.
post /v1/jobs '{"kind": "forge", "source": "q_mlx_lm_head", "quant": "affine:4:64"}'
expect "requantize job without the flag: accepted" 202
RQJOB=$(jb .id)
if poll_job "$RQJOB" failed 300; then ok; else bad "job $RQJOB should fail: $(head -c 300 "$TMP/body")"; fi
check "requantize job without the flag: the error names allow-requantize" grep -q -- "--allow-requantize" <<<"$(jb .error)"
check "requantize job without the flag: the request echo says allow_requantize false" \
	[ "$(jb '.request.allow_requantize')" = false ]
post /v1/jobs "{\"kind\": \"forge\", \"source\": \"q_mlx_lm_head\", \"quant\": \"affine:4:64\", \"allow_requantize\": true, \"out\": \"$TMP/out_rq\"}"
expect "requantize job with allow_requantize: accepted" 202
RQJOB=$(jb .id)
if poll_job "$RQJOB" succeeded 300; then ok; else bad "job $RQJOB with allow_requantize: $(head -c 300 "$TMP/body")"; fi
get "/v1/jobs/$RQJOB"
check "requantize job: the request echo says allow_requantize" [ "$(jb '.request.allow_requantize')" = true ]
check "requantize job: the artifact's config records it" \
	[ "$(jq -c '.mtp_quantization | [.allow_requantize, (.requantized | length)]' "$TMP/out_rq/config.json")" = '[true,7]' ]
post /v1/jobs "{\"kind\": \"forge\", \"source\": \"glm45\", \"out\": \"$TMP/out_glm\"}"
expect "job with out inside a root" 202
OUTJOB=$(jb .id)
if poll_job "$OUTJOB" succeeded 300; then ok; else bad "job $OUTJOB with out: $(head -c 300 "$TMP/body")"; fi
check "job with out: the artifact is there" [ -f "$TMP/out_glm/mtp.safetensors" ]
post /v1/jobs '{"kind": "forge", "source": "qwen35_mlx_head_shifted"}'
expect "forge of a refused source: accepted" 202
BADJOB=$(jb .id)
if poll_job "$BADJOB" failed 300; then ok; else bad "job $BADJOB should fail: $(head -c 300 "$TMP/body")"; fi
check "refused forge: the error names the verdict" grep -q head_double_shifted <<<"$(jb .error)"
check "refused forge: refusal {code, severity, detail} as data" \
	[ "$(jb '[.refusal.code, .refusal.severity, (.refusal.detail | startswith("head set"))] | map(tostring) | join(" ")')" = \
	"head_double_shifted error true" ]
check "refused forge: no artifact" [ "$(jb .artifact_id)" = null ]
check "refused forge: nothing in state/artifacts" [ ! -e "$STATE/artifacts/$BADJOB" ]
get "/v1/jobs/$JOB"
DELETE_DONE=$(jb .state)
http DELETE "/v1/jobs/$JOB" "${W[@]}"
expect_problem "DELETE of a succeeded job is 409 job-finished" 409 job-finished
get "/v1/jobs/$JOB"
check "DELETE of a succeeded job leaves it succeeded" [ "$(jb .state)" = "$DELETE_DONE" ]

# ---- verifications: MTPLX issue 306 and its control ----
V306='{"schema": "forged.verification.v1", "hardware": "M4 Max", "runtime": "mtplx-2.12",
 "rows": [{"depth": 0, "tok_s": 15.04},
          {"depth": 1, "tok_s": 13.46, "acceptance": [0.067], "quality_passed": true},
          {"depth": 2, "tok_s": 11.48, "acceptance": [0.067, 0.004]},
          {"depth": 3, "tok_s": 11.18, "acceptance": [0.067, 0.004, 0.0]}]}'
VCTL='{"schema": "forged.verification.v1", "hardware": "M4 Max", "runtime": "mtplx-2.12",
 "rows": [{"depth": 0, "tok_s": 15.04},
          {"depth": 1, "tok_s": 34.15584, "acceptance": [0.978], "quality_passed": true},
          {"depth": 2, "tok_s": 42.112, "acceptance": [0.978, 0.95], "quality_passed": true},
          {"depth": 3, "tok_s": 47.2256, "acceptance": [0.978, 0.95, 0.93], "quality_passed": true}]}'
post "/v1/artifacts/$FORGED_ID/verifications" "$V306"
expect "306 figures: 201" 201
check "306 figures: mtp_acceptance_collapsed" [ "$(jb .result.verdict)" = mtp_acceptance_collapsed ]
check "306 figures: no best depth, speed-ups" \
	[ "$(jb '[.result.best_depth, .result.speedups."1", .result.speedups."3", .artifact_id] | map(tostring) | join(" ")')" = "null 0.895 0.743 $FORGED_ID" ]
http GET /v1/fleet/health "${R[@]}"
check "after 306: the forged artifact is unhealthy" \
	[ "$(jb --argjson id "$FORGED_ID" '[.unhealthy[] | select(.artifact_id == $id)] | length')" = 1 ]
post "/v1/artifacts/$FORGED_ID/verifications" "$VCTL"
expect "control figures: 201" 201
check "control figures: mtp_depth_wins at depth 3" \
	[ "$(jb '[.result.verdict, .result.best_depth, .result.speedups."3"] | map(tostring) | join(" ")')" = "mtp_depth_wins 3 3.14" ]
get "/v1/artifacts/$FORGED_ID"
check "artifact lists both verifications in order" \
	[ "$(jb '[.verifications[].verdict] | join(",")')" = "mtp_acceptance_collapsed,mtp_depth_wins" ]
post "/v1/artifacts/$FORGED_ID/verifications" '{"rows": [{"depth": 1, "tok_s": 13.46}]}'
expect_problem "rows without depth 0: 422" 422 invalid-verification
post "/v1/artifacts/99999/verifications" "$VCTL"
expect_problem "verification of an unknown artifact: 404" 404 not-found
post "/v1/artifacts/${AID[qwen35_mlx_sidecar]:-0}/verifications" "$V306"
expect "306 figures on the inspected healthy sidecar" 201
SIDECAR_COLLAPSED=${AID[qwen35_mlx_sidecar]:-0}
get "/v1/artifacts?verdict=mtp_acceptance_collapsed&limit=500"
check "listing by a verification verdict finds the collapsed artifact" \
	[ "$(jb --argjson id "$SIDECAR_COLLAPSED" '[.items[] | select(.id == $id)] | length')" = 1 ]

# ---- fleet: two hosts, one serving an unhealthy artifact ----
post /v1/fleet/reports "{\"host\": \"gpu-a.example\", \"artifact\": ${AID[qwen35_mlx_embedded]:-0}, \"runtime\": \"mlx-lm-0.31\", \"observed\": {\"tok_s\": 12.1}}"
expect "report from host A (by id)" 201
post /v1/fleet/reports "{\"host\": \"gpu-b.example\", \"artifact\": \"$FP\", \"runtime\": \"mtplx-2.12\", \"observed\": {\"tok_s\": 47.2}}"
expect "report from host B (by fingerprint)" 201
check "host B's fingerprint resolves to the forged artifact (got $(jb .artifact_id), want $FORGED_ID)" [ "$(jb .artifact_id)" = "$FORGED_ID" ]
post /v1/fleet/reports '{"host": "gpu-c", "artifact": "0000000000000000000000000000000000000000000000000000000000000000", "runtime": "ollama"}'
expect_problem "report naming an unknown fingerprint: 404" 404 not-found
post /v1/fleet/reports '{"host": "gpu-c", "artifact": 1, "runtime": "vllm-9"}'
expect_problem "report with an unknown runtime: 422" 422 unknown-runtime
post /v1/fleet/reports '{"artifact": 1, "runtime": "ollama"}'
expect_problem "report without a host: 422" 422 invalid-field
http GET /v1/fleet/health "${R[@]}"
expect "fleet health" 200
EMB=${AID[qwen35_mlx_embedded]:-0}
check "health names the unhealthy artifact" \
	[ "$(jb --argjson id "$EMB" '.unhealthy[] | select(.artifact_id == $id) | .source')" = qwen35_mlx_embedded ]
check "health names the host serving it, with its runtime" \
	[ "$(jb --argjson id "$EMB" '.unhealthy[] | select(.artifact_id == $id) | .hosts | map(.host + " " + .runtime) | join(",")')" = "gpu-a.example mlx-lm-0.31" ]
check "health: the unhealthy artifact's verdicts" \
	[ "$(jb --argjson id "$EMB" '.unhealthy[] | select(.artifact_id == $id) | .verdicts | index("embedded_mtp_shift_hazard") != null')" = true ]
check "health: the forged artifact (control wins) is healthy" \
	[ "$(jb --argjson id "$FORGED_ID" '[.unhealthy[] | select(.artifact_id == $id)] | length')" = 0 ]
check "health: host B serves nothing unhealthy" [ "$(jb '[.unhealthy[].hosts[] | select(.host == "gpu-b.example")] | length')" = 0 ]
n_err=$(for n in "${!AID[@]}"; do [ "$n" = mtp_raw_2_11 ] && continue; jq -r 'select(.ok == false) | 1' "$TMP/cli_$n.json" 2>/dev/null; done | wc -l)
# Unhealthy: every error-verdict inspection, the 2.11 qwen3_5_mtp inspection, and the sidecar whose latest verification collapsed.
check "health: unhealthy count ($n_err + 2)" [ "$(jb .unhealthy_total)" = $((n_err + 2)) ]
check "health: artifacts counted" [ "$(jb .artifacts.total)" -ge $((${#AID[@]} + 2)) ]
check "health: counts by verdict" [ "$(jb '.artifacts.by_verdict.embedded_mtp_shift_hazard')" -ge 2 ]
check "health: counts by family" [ "$(jb '.artifacts.by_family.glm4_moe')" -ge 1 ]
check "health: probe q-norm band" [ "$(jb '.probe_qnorm.healthy_band | length')" = 2 ]
post /v1/fleet/reports "{\"host\": \"gpu-a.example\", \"artifact\": \"$FP\", \"runtime\": \"mlx-lm-0.31\"}"
expect "host A moves to the forged artifact" 201
http GET /v1/fleet/health "${R[@]}"
check "health: only the latest report per host and runtime counts" \
	[ "$(jb --argjson id "$EMB" '.unhealthy[] | select(.artifact_id == $id) | .hosts | length')" = 0 ]

# Health is cached until a write through this server; a write by another
# process shows within FG_API_HEALTH_MAX_AGE_MS (1 s).
http GET /v1/fleet/health "${R[@]}"
cp "$TMP/body" "$TMP/health1.json"
http GET /v1/fleet/health "${R[@]}"
check "fleet health: the same document twice without a write" cmp -s "$TMP/body" "$TMP/health1.json"
sql "$STATE" "INSERT INTO fleet_reports (host, runtime, artifact_id, observed, reported_at)
 VALUES ('outside.example', 'ollama', $EMB, '{}', '2026-01-01T00:00:00.000Z')" >/dev/null
sleep 1.2
http GET /v1/fleet/health "${R[@]}"
check "fleet health: a write by another process shows within 1 s" \
	[ "$(jb --argjson id "$EMB" '.unhealthy[] | select(.artifact_id == $id) | .hosts | map(.host) | join(",")')" = outside.example ]

# ---- idempotent resubmission ----
get "/v1/jobs?limit=500"
n_before=$(jb '.items | length')
BODY='{"kind": "forge", "source": "qwen35_mlx_q4", "target": "mlx-lm-0.32"}'
post /v1/jobs "$BODY" -H "Idempotency-Key: e2e-key-1"
expect "keyed submission: 202" 202
K1=$(jb .id)
post /v1/jobs "$BODY" -H "Idempotency-Key: e2e-key-1"
expect "same key, same body: 202" 202
check "same key, same body: the same job" [ "$(jb .id)" = "$K1" ]
check "same key, same body: Location of the first job" [ "$(header Location)" = "/v1/jobs/$K1" ]
post /v1/jobs '{"kind": "forge", "source": "qwen35_mlx_sidecar"}' -H "Idempotency-Key: e2e-key-1"
expect_problem "same key, other body: 422" 422 idempotency-key-reused
get "/v1/jobs?limit=500"
check "no second job was made" [ "$(jb '.items | length')" = $((n_before + 1)) ]
post /v1/jobs "$BODY" -H "Idempotency-Key: e2e-key-2"
check "another key: another job" [ "$(jb .id)" != "$K1" ]
post /v1/jobs "$BODY" -H "Idempotency-Key: $(head -c 300 /dev/zero | tr '\0' k)"
expect_problem "a 300-byte key: 400" 400 bad-idempotency-key
poll_job "$K1" succeeded 300 || bad "keyed job $K1 did not succeed"
post /v1/jobs "$BODY" -H "Idempotency-Key: e2e-key-1"
check "replay after completion answers the same job" [ "$(jb .id)" = "$K1" ]

# ---- keyset pagination ----
get "/v1/artifacts?limit=500"
all_ids=$(jb '[.items[].id] | sort | map(tostring) | join(",")')
n_art=$(jb '.items | length')
paged=""
cursor=""
pages=0
while [ $pages -lt 200 ]; do
	get "/v1/artifacts?limit=2${cursor:+&cursor=$cursor}"
	[ "$CODE" = 200 ] || { bad "page $pages: HTTP $CODE"; break; }
	[ "$(jb '.items | length')" -le 2 ] || bad "page $pages holds more than 2 items"
	paged="$paged $(jb '.items[].id')"
	cursor=$(jb '.next_cursor // empty')
	pages=$((pages + 1))
	[ -z "$cursor" ] && break
done
check "artifact pages: every item exactly once" \
	[ "$(tr ' ' '\n' <<<"$paged" | sed '/^$/d' | sort -n | paste -sd, -)" = "$all_ids" ]
check "artifact pages: no duplicates, $n_art items" [ "$(tr ' ' '\n' <<<"$paged" | sed '/^$/d' | sort -u | wc -l)" = "$n_art" ]
check "artifact pages: about $(((n_art + 1) / 2)) pages ($pages)" [ "$pages" -ge $(((n_art + 1) / 2)) -a "$pages" -le $((n_art / 2 + 1)) ]
get "/v1/jobs?limit=500"
all_jobs=$(jb '[.items[].id] | sort | map(tostring) | join(",")')
paged=""
cursor=""
for i in $(seq 1 100); do
	get "/v1/jobs?limit=2${cursor:+&cursor=$cursor}"
	paged="$paged $(jb '.items[].id')"
	cursor=$(jb '.next_cursor // empty')
	[ -z "$cursor" ] && break
done
check "job pages: every job exactly once" [ "$(tr ' ' '\n' <<<"$paged" | sed '/^$/d' | sort -n | paste -sd, -)" = "$all_jobs" ]
get "/v1/artifacts?family=glm4_moe&limit=500"
check "artifacts by family" [ "$(jb '[.items[].family] | unique | join(",")')" = glm4_moe ]
get "/v1/artifacts?verdict=embedded_mtp_shift_hazard&limit=500"
check "artifacts by verdict: the embedded-keys incidents" [ "$(jb '.items | length')" -ge 4 ]
check "artifacts by verdict: each has it" [ "$(jb '[.items[] | select(.verdicts | index("embedded_mtp_shift_hazard") == null)] | length')" = 0 ]
get "/v1/jobs?state=succeeded&limit=500"
check "jobs by state" [ "$(jb '[.items[].state] | unique | join(",")')" = succeeded ]
get "/v1/jobs?state=sleeping"
expect_problem "unknown job state: 422" 422 invalid-query
get "/v1/artifacts?limit=0"
expect_problem "limit 0: 422" 422 invalid-query
get "/v1/artifacts?cursor=abc"
expect_problem "cursor not a number: 422" 422 invalid-query

# ---- /metrics ----
http GET /metrics
expect "/metrics without a token" 200
check "/metrics is Prometheus text 0.0.4" grep -q '^text/plain; version=0.0.4' <<<"$(header Content-Type)"
check "/metrics: succeeded jobs" grep -Eq '^forged_jobs\{state="succeeded"\} [1-9][0-9]*$' "$TMP/body"
# failed: the refused source and the re-quantizing job without allow_requantize
check "/metrics: failed jobs" grep -Eq '^forged_jobs\{state="failed"\} 2$' "$TMP/body"
check "/metrics: HTTP 200s counted" grep -Eq '^forged_http_requests_total\{code="200"\} [1-9][0-9]*$' "$TMP/body"
check "/metrics: HTTP 401s counted" grep -Eq '^forged_http_requests_total\{code="401"\} [1-9][0-9]*$' "$TMP/body"
check "/metrics: job durations" grep -Eq '^forged_job_duration_seconds_count [1-9][0-9]*$' "$TMP/body"
check "/metrics: artifacts by verdict" grep -Eq '^forged_artifacts_by_verdict\{verdict="embedded_mtp_shift_hazard"\} [1-9]' "$TMP/body"
check "/metrics: every line is a comment or a sample" \
	[ "$(grep -Evc '^(# (HELP|TYPE) [a-z_]+ .+|[a-z_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? [-+0-9.eE]+(Inf)?)$' "$TMP/body")" = 0 ]
check "/metrics: every family has a TYPE" \
	[ "$(grep -c '^# TYPE' "$TMP/body")" -ge 7 ]

# ---- SIGHUP reloads the tokens ----
WTOK2=e2e-rotated-token-93bd
printf 'read ci-reader %s\nwrite ci-writer-2 %s\n' "$(sha "$RTOK")" "$(sha "$WTOK2")" >"$TMP/tokens.new"
mv "$TMP/tokens.new" "$TMP/tokens"
kill -HUP "$MAIN_PID"
for i in $(seq 1 50); do grep -q "tokens reloaded" "$TMP/main.log" && break; sleep 0.1; done
check "SIGHUP: reload logged" grep -q "tokens reloaded" "$TMP/main.log"
http GET /v1/jobs -H "Authorization: Bearer $WTOK2"
expect "SIGHUP: the new token works" 200
http GET /v1/jobs "${W[@]}"
expect_problem "SIGHUP: the old token is refused" 401 unauthorized
printf 'admin root %s\n' "$(sha x)" >"$TMP/tokens"
kill -HUP "$MAIN_PID"
for i in $(seq 1 50); do grep -q "reloading tokens" "$TMP/main.log" && break; sleep 0.1; done
check "SIGHUP with a bad file: error logged" grep -q "reloading tokens: .*neither read nor write" "$TMP/main.log"
http GET /v1/jobs -H "Authorization: Bearer $WTOK2"
expect "SIGHUP with a bad file: the old tokens stay" 200

# ---- forged's own state: a locked database is 503 with Retry-After, never 422 ----
if [ "$STORE" = postgres ]; then
	# Another session holds the tables a write needs (PostgreSQL's lock_timeout, 5 s, then 503).
	PGAPPNAME=forged-e2e-locker psql -X -q "postgresql:///e2e_state_$$?host=$FORGED_TEST_PG_SOCKET&user=forged" \
		-c "BEGIN" -c "LOCK TABLE artifacts, write_probe IN EXCLUSIVE MODE" -c "\\! touch $TMP/locked" \
		-c "SELECT pg_sleep(60)" >/dev/null 2>&1 &
else
"$PYTHON" - "$STATE/forged.db" "$TMP/locked" <<'PY' &
import os, sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10)
db.execute("BEGIN IMMEDIATE")
open(sys.argv[2], "w").close()
while os.path.exists(sys.argv[2]):
    time.sleep(0.05)
db.execute("ROLLBACK")
PY
fi
LOCKER=$!
for i in $(seq 1 100); do [ -e "$TMP/locked" ] && break; sleep 0.05; done
http POST /v1/inspections -H "Authorization: Bearer $WTOK2" "${J[@]}" --data-binary '{"source": "qwen35_hf"}'
expect_problem "locked database: an inspection is 503" 503 store-unavailable
check "locked database: Retry-After 5" [ "$(header Retry-After)" = 5 ]
http GET /readyz
expect "locked database: /readyz 503" 503
check "locked database: /readyz names the write" grep -q "cannot take a write: .*locked" <<<"$(jb .reason)"
rm -f "$TMP/locked"
[ "$STORE" = postgres ] && psql -X -q -A -t "$FORGED_TEST_PG" -c \
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'forged-e2e-locker'" >/dev/null
wait "$LOCKER"
http GET /readyz
expect "lock released: /readyz 200" 200

# ---- graceful stop ----
stop_server "$MAIN_PID" 10
check "SIGTERM: exit 0 within 10 s (status $STOP_RC)" [ "$STOP_RC" = 0 ]
check "SIGTERM: draining logged" grep -q "SIGTERM: draining" "$TMP/main.log"
check "SIGTERM: stopped logged" grep -q " stopped$" "$TMP/main.log"
check "the database is intact" store_intact "$STATE"

# ---- cancel and the queue cap, on a server with no workers ----
rc=0
timeout 20 "$FORGED" serve --listen 127.0.0.1:0 --state-dir "$TMP/qstate" --tokens-file "$TMP/tokens.q" \
	>/dev/null 2>"$TMP/err" || rc=$?
check "a missing tokens file: exit 2 (got $rc)" [ "$rc" -eq 2 ]
check "a missing tokens file: named" grep -q "tokens.q: cannot open the tokens file" "$TMP/err"
printf 'write ci-writer %s\nread ci-reader %s\n' "$(sha "$WTOK")" "$(sha "$RTOK")" >"$TMP/tokens.q"
start_server queue --state-dir "$TMP/qstate" --allow-roots "$FIXTURES" --tokens-file "$TMP/tokens.q" --workers 0 \
	--queue-cap 2 || { finish; exit 1; }
QPID=$SPID
post /v1/jobs '{"kind": "forge", "source": "qwen35_hf"}'
expect "queued job: 202" 202
C1=$(jb .id)
check "queued job: queued" [ "$(jb .state)" = queued ]
http DELETE "/v1/jobs/$C1" "${W[@]}"
expect "cancel a queued job: 200" 200
check "cancel: the job says cancelled" [ "$(jb .state)" = cancelled ]
get "/v1/jobs/$C1"
check "cancel: GET says cancelled" [ "$(jb .state)" = cancelled ]
http DELETE "/v1/jobs/$C1" "${W[@]}"
expect_problem "cancel twice: 409 job-finished" 409 job-finished
get "/v1/jobs/$C1"
check "cancel twice: still cancelled" [ "$(jb .state)" = cancelled ]
http DELETE /v1/jobs/4242 "${W[@]}"
expect_problem "cancel an unknown job: 404" 404 not-found
get "/v1/jobs?state=cancelled"
check "cancelled jobs listed" [ "$(jb '[.items[].id] | map(tostring) | join(",")')" = "$C1" ]
post /v1/jobs '{"kind": "forge", "source": "qwen35_hf"}'
expect "queue 1 of 2" 202
post /v1/jobs '{"kind": "forge", "source": "qwen35_mlx_sidecar"}'
expect "queue 2 of 2" 202
post /v1/jobs '{"kind": "forge", "source": "qwen35_mlx_q4"}'
expect_problem "queue over the cap: 503" 503 queue-full
http GET /readyz
expect "/readyz with a full queue: 503" 503
check "/readyz names the full queue" [ "$(jb .reason)" = "the job queue is full" ]
http GET /metrics
check "/metrics: queue depth 2" grep -q '^forged_queue_depth 2$' "$TMP/body"
stop_server "$QPID" 10
check "queue server: exit 0 on SIGTERM" [ "$STOP_RC" = 0 ]
# The cancelled job never runs: restart with a worker and let the others finish.
start_server queue2 --state-dir "$TMP/qstate" --allow-roots "$FIXTURES" --tokens-file "$TMP/tokens.q" --workers 1 ||
	{ finish; exit 1; }
Q2PID=$SPID
poll_job $((C1 + 2)) succeeded 300 || bad "queued job $((C1 + 2)) did not run after the restart"
get "/v1/jobs/$C1"
check "the cancelled job stayed cancelled" [ "$(jb .state)" = cancelled ]
check "the cancelled job left no artifact" [ ! -e "$TMP/qstate/artifacts/$C1" ]
stop_server "$Q2PID" 10

# ---- crash: kill -9 in the middle of a forge, restart, the job completes once ----
CSTATE=$TMP/cstate
# On a shared store a dead instance's job comes back when its lease runs out (here 3 s), not at a restart.
CRASH_LEASE=""
[ "$STORE" = postgres ] && CRASH_LEASE="--lease-seconds 3"
# shellcheck disable=SC2086
SERVER_ENV=FORGED_FAULT_STAGE=sidecar start_server crash --state-dir "$CSTATE" --allow-roots "$FIXTURES" \
	--tokens-file "$TMP/tokens.q" --workers 2 $CRASH_LEASE || { finish; exit 1; }
CPID=$SPID
# (stderr aside until the server is reaped: bash reports a SIGKILLed job)
exec 3>&2 2>/dev/null
post /v1/jobs '{"kind": "forge", "source": "qwen35_hf"}' -H "Idempotency-Key: crash-1"
expect "crash: job accepted" 202 2>&3
CJOB=$(jb .id)
for i in $(seq 1 300); do kill -0 "$CPID" 2>/dev/null || break; sleep 0.1; done
crc=0
if kill -0 "$CPID" 2>/dev/null; then crc=999; else wait "$CPID" || crc=$?; fi
exec 2>&3 3>&-
check "crash: the server died of SIGKILL at the sidecar stage (status $crc)" [ "$crc" = 137 ]
check "crash: a partial folder was left behind" [ -n "$(ls -A "$CSTATE/artifacts" | grep -F .forged-tmp-)" ]
check "crash: nothing at the destination yet" [ ! -e "$CSTATE/artifacts/$CJOB" ]
# shellcheck disable=SC2086
SERVER_ENV="" start_server crash2 --state-dir "$CSTATE" --allow-roots "$FIXTURES" --tokens-file "$TMP/tokens.q" \
	--workers 2 $CRASH_LEASE || { finish; exit 1; }
C2PID=$SPID
if [ "$STORE" = postgres ]; then
	for i in $(seq 1 100); do
		grep -Eq "(recovered jobs of a previous instance|took over jobs whose lease expired): 1 requeued, 0 failed" \
			"$TMP/crash2.log" && break
		sleep 0.1
	done
	check "restart: the running job was taken over once its lease ran out" \
		grep -Eq "(recovered jobs of a previous instance|took over jobs whose lease expired): 1 requeued, 0 failed" "$TMP/crash2.log"
else
	check "restart: the running job was requeued" grep -q "recovered jobs of a previous instance: 1 requeued, 0 failed" "$TMP/crash2.log"
fi
if poll_job "$CJOB" succeeded 300; then ok; else bad "crash: job $CJOB after restart: $(head -c 300 "$TMP/body")"; fi
CART=$(jb .artifact_id)
check "crash: exactly one artifact folder" [ "$(ls -A "$CSTATE/artifacts")" = "$CJOB" ]
check "crash: no .forged-tmp- folder left" [ -z "$(ls -A "$CSTATE/artifacts" | grep -F forged-tmp)" ]
get "/v1/artifacts?limit=500"
check "crash: exactly one artifact stored" [ "$(jb '[.items[].id] | map(tostring) | join(",")')" = "$CART" ]
get "/v1/jobs?limit=500"
check "crash: exactly one job" [ "$(jb '.items | length')" = 1 ]
get "/v1/artifacts/$CART"
check "crash: the artifact's fingerprint matches its files" \
	[ "$(jb .fingerprint)" = "$(cat "$CSTATE/artifacts/$CJOB/config.json" "$CSTATE/artifacts/$CJOB/mtp.safetensors" | sha256sum | cut -d' ' -f1)" ]
post /v1/jobs '{"kind": "forge", "source": "qwen35_hf"}' -H "Idempotency-Key: crash-1"
check "crash: the acknowledged idempotency key survived" [ "$(jb .id)" = "$CJOB" ]
stop_server "$C2PID" 10
check "crash: restarted server stops cleanly" [ "$STOP_RC" = 0 ]
check "crash: PRAGMA integrity_check is ok" store_intact "$CSTATE"

# ---- sanitizer builds: no report in any server log ----
check "no sanitizer report in the server logs" [ -z "$(grep -l 'Sanitizer\|runtime error:' "$TMP"/*.log)" ]

# ---- bad configuration refuses to start ----
rc=0; "$FORGED" serve --listen 127.0.0.1:0 --state-dir "$TMP/x" --workers many >/dev/null 2>"$TMP/err" || rc=$?
check "serve --workers many: exit 2" [ "$rc" -eq 2 ]
rc=0; "$FORGED" serve --listen nowhere --state-dir "$TMP/x" >/dev/null 2>"$TMP/err" || rc=$?
check "serve --listen nowhere: exit 2" [ "$rc" -eq 2 ]
# A state folder that cannot be made is forged's own state: exit 3 (it was 2).
: >"$TMP/not_a_folder"
rc=0; "$FORGED" serve --listen 127.0.0.1:0 --state-dir "$TMP/not_a_folder/state" >/dev/null 2>"$TMP/err" || rc=$?
check "serve with a state folder that cannot be made: exit 3 (got $rc)" [ "$rc" -eq 3 ]

# ---- a full disk under the state folder: 507, /readyz not ready, never 422 ----
# Needs a small tmpfs (root with CAP_SYS_ADMIN); elsewhere test_store.c's
# max_page_count test covers the store's side.  With PostgreSQL the
# database is not under the state folder (its disk is the server's), so
# only the jobs' out folder fills here.
FULL=$TMP/full
FULLOUT=$TMP/fullout
mkdir -p "$FULL" "$FULLOUT"
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=4m forged-e2e-full "$FULL" 2>/dev/null; then
	FULL_MOUNTED=1
	if start_server full --state-dir "$FULL/state" --allow-roots "$FIXTURES" --allow-roots "$TMP" \
		--tokens-file "$TMP/tokens.q" --workers 1; then
		FPID=$SPID
		if [ "$STORE" = sqlite ]; then
			dd if=/dev/zero of="$FULL/fill" bs=64k >/dev/null 2>&1
			post /v1/inspections '{"source": "qwen35_hf"}'
			expect_problem "full disk: an inspection is 507" 507 insufficient-storage
			check "full disk: the detail says so" grep -q "full" <<<"$(jb .detail)"
			post /v1/jobs '{"kind": "forge", "source": "qwen35_hf"}'
			expect_problem "full disk: a job submission is 507" 507 insufficient-storage
			http GET /readyz
			expect "full disk: /readyz 503" 503
			rm -f "$FULL/fill"
			http GET /readyz
			expect "space again: /readyz 200" 200
			post /v1/inspections '{"source": "qwen35_hf"}'
			expect "space again: the inspection is stored" 201
		else
			echo "full-disk check of the database skipped: a PostgreSQL store's disk is the server's (not counted)"
		fi
		# A job whose out is on a disk too small for the artifact: a clean failure saying so.
		if mount -t tmpfs -o size=256k forged-e2e-fullout "$FULLOUT" 2>/dev/null; then
			get "/v1/artifacts?limit=500"
			n_art=$(jb '.items | length')
			post /v1/jobs "{\"kind\": \"forge\", \"source\": \"qwen35_hf\", \"out\": \"$FULLOUT/a\"}"
			expect "full out disk: the job is accepted" 202
			FJOB=$(jb .id)
			if poll_job "$FJOB" failed 300; then ok; else bad "full out disk: job $FJOB should fail: $(head -c 300 "$TMP/body")"; fi
			check "full out disk: the error says the disk is full" grep -qi "no space left" <<<"$(jb .error)"
			check "full out disk: no artifact" [ "$(jb .artifact_id)" = null ]
			get "/v1/artifacts?limit=500"
			check "full out disk: nothing registered" [ "$(jb '.items | length')" = "$n_art" ]
			check "full out disk: nothing half-written left" [ -z "$(ls -A "$FULLOUT")" ]
			umount "$FULLOUT"
		fi
		stop_server "$FPID" 10
		check "full disk: the store is intact" store_intact "$FULL/state"
	fi
	umount "$FULL" && FULL_MOUNTED=0
else
	echo "full-disk check skipped: cannot mount a tmpfs here (not counted)"
fi
finish
