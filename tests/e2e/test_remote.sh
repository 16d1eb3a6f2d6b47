#!/usr/bin/env bash
# Remote sources: fixtures served by nginx on loopback under the Hugging Face
# layout; `forged inspect` over http:// and hf:// must decide exactly what it
# decides on the local copy, read only headers and norm tensors (bytes from
# nginx's access log against needed_bytes.py's independent count), and read
# nothing the second time; a server that ignores Range still works; 404s and
# remote backbones are refused clearly; a forge from a remote source writes
# the same sidecar as from the local copy.
set -u
. "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
. "$here/nginx_lib.sh"

mkdir -p "$TMP/hub/fx"
for d in "$FIXTURES"/*/; do ln -s "$(cd "$d" && pwd)" "$TMP/hub/fx/$(basename "$d")"; done
if ! nginx_start "$TMP/hub" "$TMP/nginx"; then bad "nginx did not start"; finish; exit; fi
export FORGED_CACHE_DIR=$TMP/cache
url() { printf '%s/fx/%s/resolve/main/' "$NGINX_URL" "$1"; }
sent() { awk '$1 ~ /^2/ {s += $2} END {print s + 0}' "$NGINX_LOG"; } # data, not 404 pages
within5() { [ "$1" -ge "$2" ] && [ $(( $1 * 100 )) -le $(( $2 * 105 )) ]; }

# What the runtimes and verdicts say, minus what a remote listing cannot see.
summary='[.family, .layout, .norm_style, [.sets[] | [.name, .convention, .qk_max, .low_min]],
	[.runtimes[] | [.runtime, .trunk, .head, .outcome, .trunk_probe_after]],
	([.verdicts[].code | select(. != "stray_shard" and . != "index_mismatch")] | sort), .ok]'

for name in qwen35_hf qwen35_mlx_embedded qwen35_mlx_pruned_index qwen35_mlx_sidecar qwen35_mlx_raw_head \
	qwen35_mlx_head_shifted qwen35_mlx_trunk_double_shifted qwen35_moe_hf_fused_bmm glm45 deepseek_v3_fp8 mimo; do
	before=$(sent)
	lines=$(nginx_log_lines)
	rc=0; "$FORGED" inspect "$(url "$name")" --json >"$TMP/r.json" 2>"$TMP/err" || rc=$?
	lrc=0; "$FORGED" inspect "$FIXTURES/$name" --json >"$TMP/l.json" 2>/dev/null || lrc=$?
	check "$name: remote exit $rc equals local $lrc ($(head -c 200 "$TMP/err"))" [ "$rc" -eq "$lrc" ]
	check "$name: same decisions, runtimes and verdicts" \
		[ "$(jq -c "$summary" "$TMP/r.json")" = "$(jq -c "$summary" "$TMP/l.json")" ]
	check "$name: the summary is not empty" [ -n "$(jq -c "$summary" "$TMP/l.json")" ]
	got=$(( $(sent) - before ))
	want=$("$PYTHON" "$here/needed_bytes.py" "$FIXTURES/$name")
	check "$name: $got bytes transferred, needed $want (within 5%)" within5 "$got" "$want"
	check "$name: the report names the remote base" [ "$(jq -r .remote.base_url "$TMP/r.json")" = "$(url "$name" | sed 's#/$##')" ]
	lines=$(nginx_log_lines)
	"$FORGED" inspect "$(url "$name")" --json >"$TMP/r2.json" 2>/dev/null
	check "$name: a second inspect transfers nothing" [ "$(nginx_log_lines)" -eq "$lines" ]
	check "$name: and decides the same" [ "$(jq -c "$summary" "$TMP/r2.json")" = "$(jq -c "$summary" "$TMP/r.json")" ]
done

# hf:// names resolve against $HF_ENDPOINT; a fresh cache makes requests again.
rc=0; HF_ENDPOINT=$NGINX_URL FORGED_CACHE_DIR=$TMP/cache2 "$FORGED" inspect hf://fx/qwen35_mlx_embedded --json >"$TMP/hf.json" 2>"$TMP/err" || rc=$?
check "hf://: exit 1 like the local copy ($(head -c 200 "$TMP/err"))" [ "$rc" -eq 1 ]
check "hf://: hazard found" [ "$(jq -r '[.verdicts[].code] | index("embedded_mtp_shift_hazard") != null' "$TMP/hf.json")" = true ]
rc=0; FORGED_CACHE_DIR=$TMP/cache2 HF_ENDPOINT= "$FORGED" inspect hf://fx/qwen35_hf >/dev/null 2>"$TMP/err" || rc=$?
check "hf:// without an endpoint: exit 2" [ "$rc" -eq 2 ]

# A server that ignores Range (answers 200 with the whole file) still works.
rc=0; FORGED_CACHE_DIR=$TMP/cache3 "$FORGED" inspect "$NGINX_URL/norange/fx/qwen35_hf/resolve/main/" --json >"$TMP/nr.json" 2>"$TMP/err" || rc=$?
"$FORGED" inspect "$FIXTURES/qwen35_hf" --json >"$TMP/l.json" 2>/dev/null
check "no Range support: exit 0 ($(head -c 200 "$TMP/err"))" [ "$rc" -eq 0 ]
check "no Range support: same decisions" [ "$(jq -c "$summary" "$TMP/nr.json")" = "$(jq -c "$summary" "$TMP/l.json")" ]

# Missing things: clear errors, exit 2.
rc=0; "$FORGED" inspect "$(url nothing-here)" >/dev/null 2>"$TMP/err" || rc=$?
check "missing repository: exit 2" [ "$rc" -eq 2 ]
check "missing repository: says so" grep -q "no config.json" "$TMP/err"
rc=0; "$FORGED" inspect "$NGINX_URL/fx/qwen35_hf/resolve/main/model-00009-of-00009.safetensors" >/dev/null 2>"$TMP/err" || rc=$?
check "missing file: exit 2" [ "$rc" -eq 2 ]
check "missing file: 404 named" grep -q "404" "$TMP/err"

# Forge from a remote source with a local backbone: the same sidecar as locally.
rc=0; "$FORGED" forge "$(url qwen35_hf)" --backbone "$FIXTURES/qwen35_hf" --out "$TMP/remote_art" >/dev/null 2>"$TMP/err" || rc=$?
check "remote forge: exit 0 ($(head -c 200 "$TMP/err"))" [ "$rc" -eq 0 ]
"$FORGED" forge "$FIXTURES/qwen35_hf" --out "$TMP/local_art" >/dev/null 2>&1
check "remote forge: sidecar identical to the local forge's" cmp -s "$TMP/remote_art/mtp.safetensors" "$TMP/local_art/mtp.safetensors"
rc=0; "$FORGED" forge "$(url qwen35_hf)" --out "$TMP/no_bb" >/dev/null 2>"$TMP/err" || rc=$?
check "remote backbone: exit 2" [ "$rc" -eq 2 ]
check "remote backbone: explains" grep -q "backbone must be a local folder" "$TMP/err"
check "remote backbone: nothing written" [ ! -e "$TMP/no_bb" ]
# The service: URL sources of allowed hosts only; jobs fetch the head remotely.
start_server serve --state-dir "$TMP/state" --allow-roots "$FIXTURES" --allow-roots "$TMP" \
	--allow-hosts "127.0.0.1:$NGINX_PORT" --workers 1
spid=$SPID
api=$BASE
post() { curl -s -o "$TMP/body" -w '%{http_code}' -H 'Content-Type: application/json' -d "$2" "$api$1"; }
code=$(post /v1/inspections "{\"source\": \"$(url qwen35_mlx_embedded)\"}")
check "API: inspection of an allowed URL: 201 (got $code: $(head -c 200 "$TMP/body"))" [ "$code" = 201 ]
check "API: the remote inspection finds the hazard" \
	[ "$(jq -r '[.report.verdicts[].code] | index("embedded_mtp_shift_hazard") != null' "$TMP/body")" = true ]
code=$(post /v1/inspections "{\"source\": \"http://localhost:$NGINX_PORT/fx/qwen35_hf/resolve/main/\"}")
check "API: a host not in allow_hosts: 403 ($code)" [ "$code" = 403 ]
check "API: 403 names the reason" [ "$(jq -r .type "$TMP/body")" = urn:forged:problem:host-forbidden ]
code=$(post /v1/jobs "{\"kind\": \"forge\", \"source\": \"$(url qwen35_hf)\"}")
check "API: a remote job without a local backbone: 422 ($code)" [ "$code" = 422 ]
code=$(post /v1/jobs "{\"kind\": \"forge\", \"source\": \"$(url qwen35_hf)\", \"backbone\": \"qwen35_hf\"}")
check "API: remote forge job accepted: 202 ($code)" [ "$code" = 202 ]
job=$(jq -r .id "$TMP/body")
state=
for _ in $(seq 1 100); do
	state=$(curl -s "$api/v1/jobs/$job" | jq -r .state)
	case $state in succeeded|failed|cancelled) break ;; esac
	sleep 0.1
done
check "API: remote forge job succeeded ($state)" [ "$state" = succeeded ]
aid=$(curl -s "$api/v1/jobs/$job" | jq -r .artifact_id)
check "API: the remote job's artifact has the local forge's fingerprint" \
	[ "$(curl -s "$api/v1/artifacts/$aid" | jq -r .fingerprint)" = "$(jq -r .fingerprint "$TMP/local_art/forged.json")" ]
stop_server "$spid" 10
finish
