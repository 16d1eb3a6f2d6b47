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

# ---- the Hub as its users know it (README "Remote sources") ----
hub() { # hub CACHE ARGS...: forged with the hub's variables cleared but HF_ENDPOINT=nginx; exit in $rc
	local cache=$1; shift
	rc=0
	env -u HF_TOKEN -u HF_HOME -u HF_HUB_OFFLINE -u XDG_CACHE_HOME HOME="$TMP/nohome" \
		HF_ENDPOINT="$NGINX_URL" FORGED_CACHE_DIR="$cache" "$FORGED" "$@" >"$TMP/hub.json" 2>"$TMP/err" || rc=$?
}
# A branch, a tag and a commit: the revision as named and the commit it resolved to
# (the hub's X-Repo-Commit header) are in the report's remote block.
hub "$TMP/cache_rev" inspect hf://fx/qwen35_hf --json
check "hf:// main: exit 0 ($(head -c 200 "$TMP/err"))" [ "$rc" -eq 0 ]
check "hf:// main: remote.revision" [ "$(jq -r .remote.revision "$TMP/hub.json")" = main ]
check "hf:// main: remote.resolved_commit is the hub's commit" \
	[ "$(jq -r .remote.resolved_commit "$TMP/hub.json")" = "$NGINX_HUB_COMMIT" ]
lines=$(nginx_log_lines)
hub "$TMP/cache_rev" inspect hf://fx/qwen35_hf --json
check "hf:// main from the cache: no request" [ "$(nginx_log_lines)" -eq "$lines" ]
check "hf:// main from the cache: the commit is still known" \
	[ "$(jq -r .remote.resolved_commit "$TMP/hub.json")" = "$NGINX_HUB_COMMIT" ]
hub "$TMP/cache_rev" inspect hf://fx/qwen35_hf@v1.0 --json
check "hf://@v1.0 (a tag): exit 0 and resolved" \
	[ "$rc $(jq -r '.remote | .revision + " " + .resolved_commit' "$TMP/hub.json")" = "0 v1.0 $NGINX_HUB_COMMIT" ]
pin=0123456789abcdef0123456789abcdef01234567
hub "$TMP/cache_rev" inspect "hf://fx/qwen35_hf@$pin" --json
check "hf://@COMMIT: exit 0, resolved to itself" \
	[ "$rc $(jq -r '.remote | .revision + " " + .resolved_commit' "$TMP/hub.json")" = "0 $pin $pin" ]
check "hf://@COMMIT: read at that commit" grep -q "\"GET /fx/qwen35_hf/resolve/$pin/config.json" "$NGINX_LOG"
check "hf:// report: the decisions equal the local copy's" \
	[ "$(jq -c "$summary" "$TMP/hub.json")" = "$("$FORGED" inspect "$FIXTURES/qwen35_hf" --json 2>/dev/null | jq -c "$summary")" ]
hub "$TMP/cache_rev" inspect hf://fx/qwen35_hf@other-branch --json
check "hf:// on a server that names no commit: resolved_commit null" \
	[ "$rc $(jq -r .remote.resolved_commit "$TMP/hub.json")" = "0 null" ]
check "http:// sources have no revision" [ "$(jq -r '.remote | [.revision, .resolved_commit] | tostring' "$TMP/r.json")" = '[null,null]' ]
# A branch that moves between two responses: refused rather than mixed.
hub "$TMP/cache_moving" inspect hf://fx/qwen35_hf@moving
check "hf:// branch moved while read: exit 2 ($rc)" [ "$rc" -eq 2 ]
check "hf:// branch moved while read: says so" grep -q "revision 'moving' moved while being read" "$TMP/err"
# forge provenance records them.
hub "$TMP/cache_rev" forge hf://fx/qwen35_hf@v1.0 --backbone "$FIXTURES/qwen35_hf" --out "$TMP/hub_art"
check "hf:// forge: exit 0 ($(head -c 200 "$TMP/err"))" [ "$rc" -eq 0 ]
check "hf:// forge: forged.json names the revision and the resolved commit" \
	[ "$(jq -r '.source | .path + " " + .revision + " " + .resolved_commit' "$TMP/hub_art/forged.json")" = \
	  "hf://fx/qwen35_hf@v1.0 v1.0 $NGINX_HUB_COMMIT" ]

# The token: $HF_TOKEN, else $HF_HOME/token, else $XDG_CACHE_HOME/huggingface/token,
# else ~/.cache/huggingface/token (nginx's /private wants "Bearer sekrit").
private() { # private CACHE ENV...: inspect hf://fx/qwen35_hf against /private; exit in $rc
	local cache=$1; shift
	rc=0
	env -u HF_TOKEN -u HF_HOME -u HF_HUB_OFFLINE -u XDG_CACHE_HOME HOME="$TMP/nohome" \
		HF_ENDPOINT="$NGINX_URL/private" FORGED_CACHE_DIR="$cache" "$@" "$FORGED" inspect hf://fx/qwen35_hf \
		>/dev/null 2>"$TMP/err" || rc=$?
}
private "$TMP/tok0"
check "private repo without a token: exit 2 ($rc)" [ "$rc" -eq 2 ]
check "private repo without a token: 401 named" grep -q "401 Unauthorized" "$TMP/err"
mkdir -p "$TMP/hfhome" "$TMP/xdg/huggingface" "$TMP/home/.cache/huggingface"
printf 'sekrit\n' >"$TMP/hfhome/token"
printf 'sekrit\n' >"$TMP/xdg/huggingface/token"
printf 'sekrit' >"$TMP/home/.cache/huggingface/token"
private "$TMP/tok1" HF_TOKEN=sekrit
check "private repo with \$HF_TOKEN: exit 0 ($(head -c 200 "$TMP/err"))" [ "$rc" -eq 0 ]
private "$TMP/tok2" HF_HOME="$TMP/hfhome"
check "private repo with \$HF_HOME/token: exit 0 ($(head -c 200 "$TMP/err"))" [ "$rc" -eq 0 ]
private "$TMP/tok3" XDG_CACHE_HOME="$TMP/xdg"
check "private repo with \$XDG_CACHE_HOME/huggingface/token: exit 0 ($(head -c 200 "$TMP/err"))" [ "$rc" -eq 0 ]
private "$TMP/tok4" HOME="$TMP/home"
check "private repo with ~/.cache/huggingface/token: exit 0 ($(head -c 200 "$TMP/err"))" [ "$rc" -eq 0 ]
private "$TMP/tok5" HOME="$TMP/home" HF_TOKEN=wrong
check "\$HF_TOKEN wins over the token file: exit 2" [ "$rc" -eq 2 ]

# HF_HUB_OFFLINE=1: the cache only, expired or not; what it lacks fails clearly, naming the URL.
lines=$(nginx_log_lines)
hub "$TMP/cache_rev" inspect hf://fx/qwen35_hf --json
cp "$TMP/hub.json" "$TMP/online.json"
rc=0
env -u HF_TOKEN -u HF_HOME -u XDG_CACHE_HOME HOME="$TMP/nohome" HF_HUB_OFFLINE=1 HF_ENDPOINT="$NGINX_URL" \
	FORGED_CACHE_DIR="$TMP/cache_rev" "$FORGED" inspect hf://fx/qwen35_hf --json >"$TMP/off.json" 2>"$TMP/err" || rc=$?
check "offline with a warm cache: exit 0 ($(head -c 200 "$TMP/err"))" [ "$rc" -eq 0 ]
check "offline with a warm cache: the same report" \
	[ "$(jq -c "$summary" "$TMP/off.json")" = "$(jq -c "$summary" "$TMP/online.json")" ]
check "offline with a warm cache: the commit is known" [ "$(jq -r .remote.resolved_commit "$TMP/off.json")" = "$NGINX_HUB_COMMIT" ]
check "offline: no request made" [ "$(nginx_log_lines)" -eq "$lines" ]
# With no HF_ENDPOINT the default hub is the one forged would ask: offline, it names the URL.
rc=0
env -u HF_ENDPOINT -u HF_TOKEN -u HF_HOME -u XDG_CACHE_HOME HOME="$TMP/nohome" HF_HUB_OFFLINE=1 \
	FORGED_CACHE_DIR="$TMP/cache_cold" "$FORGED" inspect hf://fx/qwen35_hf >/dev/null 2>"$TMP/err" || rc=$?
check "offline, cold cache: exit 2 ($rc)" [ "$rc" -eq 2 ]
check "offline, cold cache: names the default hub's URL and HF_HUB_OFFLINE ($(head -c 300 "$TMP/err"))" \
	grep -q "GET https://huggingface.co/fx/qwen35_hf/resolve/main/config.json: not in the cache, and HF_HUB_OFFLINE is set" "$TMP/err"
rc=0
env -u HF_TOKEN -u HF_HOME -u XDG_CACHE_HOME HOME="$TMP/nohome" HF_HUB_OFFLINE=1 HF_ENDPOINT= \
	FORGED_CACHE_DIR="$TMP/cache_cold" "$FORGED" inspect hf://fx/qwen35_hf >/dev/null 2>"$TMP/err" || rc=$?
check "an empty HF_ENDPOINT is the default hub too" grep -q "GET https://huggingface.co/fx/" "$TMP/err"
# XDG_CACHE_HOME moves forged's own cache when FORGED_CACHE_DIR is unset.
rc=0
env -u FORGED_CACHE_DIR XDG_CACHE_HOME="$TMP/xdgcache" HOME="$TMP/nohome" "$FORGED" inspect "$(url qwen35_hf)" >/dev/null 2>"$TMP/err" || rc=$?
check "XDG_CACHE_HOME: exit 0 ($(head -c 200 "$TMP/err"))" [ "$rc" -eq 0 ]
check "XDG_CACHE_HOME: the cache is in \$XDG_CACHE_HOME/forged" [ -d "$TMP/xdgcache/forged/v1/ranges" ]
check "XDG_CACHE_HOME: nothing under ~/.cache" [ ! -e "$TMP/nohome/.cache" ]

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
check "local forge: provenance revision and resolved_commit are null" \
	[ "$(jq -c '.source | [.revision, .resolved_commit]' "$TMP/local_art/forged.json")" = '[null,null]' ]
check "http:// forge: no revision either" [ "$(jq -c '.source | [.revision, .resolved_commit]' "$TMP/remote_art/forged.json")" = '[null,null]' ]
# A quantized remote head (issue 12): the compressed-tensors weight_shape and every tensor of each
# dequantized module are fetched; the sidecar equals the local forge's.
rc=0; "$FORGED" forge "$(url q_ct_moe_head)" --backbone "$FIXTURES/qwen35_moe_mlx_sidecar" --target mtplx-2.12 \
	--out "$TMP/remote_ct" >/dev/null 2>"$TMP/err" || rc=$?
check "remote compressed-tensors forge: exit 0 ($(head -c 200 "$TMP/err"))" [ "$rc" -eq 0 ]
"$FORGED" forge "$FIXTURES/q_ct_moe_head" --backbone "$FIXTURES/qwen35_moe_mlx_sidecar" --target mtplx-2.12 \
	--out "$TMP/local_ct" >/dev/null 2>&1
check "remote compressed-tensors forge: sidecar identical to the local forge's" \
	cmp -s "$TMP/remote_ct/mtp.safetensors" "$TMP/local_ct/mtp.safetensors"
rc=0; "$FORGED" forge "$(url qwen35_hf)" --out "$TMP/no_bb" >/dev/null 2>"$TMP/err" || rc=$?
check "remote backbone: exit 2" [ "$rc" -eq 2 ]
check "remote backbone: explains" grep -q "backbone must be a local folder" "$TMP/err"
check "remote backbone: nothing written" [ ! -e "$TMP/no_bb" ]
# The service: URL sources of allowed hosts only; jobs fetch the head remotely
# (into artifacts_dir, here outside the state folder).
serve() { # serve NAME ARGS...: start_server with the allowed roots and hosts; sets spid and api
	local name=$1; shift
	start_server "$name" --allow-roots "$FIXTURES" --allow-roots "$TMP" \
		--allow-hosts "127.0.0.1:$NGINX_PORT" "$@"
	spid=$SPID
	api=$BASE
}
post() { curl -s -o "$TMP/body" -w '%{http_code}' -H 'Content-Type: application/json' -d "$2" "$api$1"; }
# etag_ttl_seconds: the default (3600) trusts what the cache learned; 0 asks the server again.
for ttl in default 0; do
	args=(); [ "$ttl" = default ] || args=(--etag-ttl-seconds "$ttl")
	serve "serve_ttl_$ttl" --state-dir "$TMP/state_ttl_$ttl" --workers 0 "${args[@]}"
	post /v1/inspections "{\"source\": \"$(url qwen35_hf)\"}" >/dev/null
	lines=$(nginx_log_lines)
	code=$(post /v1/inspections "{\"source\": \"$(url qwen35_hf)\"}")
	n=$(( $(nginx_log_lines) - lines ))
	if [ "$ttl" = default ]; then
		# The same source revision again: the same report, so the same artifact (200, issue 13).
		check "etag_ttl_seconds default: a second inspection makes no request ($code, $n)" [ "$code:$n" = 200:0 ]
	else
		check "etag_ttl_seconds 0: a second inspection confirms the files ($code, $n requests)" [ "$code" = 200 -a "$n" -gt 0 ]
	fi
	stop_server "$spid" 10
done
serve serve --state-dir "$TMP/state" --artifacts-dir "$TMP/arts" --workers 1
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
check "API: a job without an out writes artifacts_dir/JOB" \
	[ "$(curl -s "$api/v1/artifacts/$aid" | jq -r .path)" = "$(cd "$TMP" && pwd -P)/arts/$job" ]
check "API: artifacts_dir was made, mode 0750" [ "$(stat -c %a "$TMP/arts")" = 750 ]
check "API: nothing under state/artifacts" [ ! -e "$TMP/state/artifacts" ]
stop_server "$spid" 10
finish
