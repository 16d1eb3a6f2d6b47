#!/usr/bin/env bash
# Issue 13, parts 2-5, end to end: one identity per artifact, MTPLX's
# fingerprint and runtime file, a fleet health that tells the truth, and
# refusals as data.  Every expected digest is computed here with hashlib in
# /usr/bin/python3 from the artifact's own files, by the rules MTPLX and
# docs/interfaces.md give, never read back from forged:
#   head fingerprint (MTPLX, mtplx/commands/forge.py
#     `_verification_artifact_fingerprint`):
#     "sha256:" + sha256(b"config.json\0" + config + b"\0mtp\0" + mtp + b"\0")
#   legacy fingerprint: sha256(config + mtp.safetensors)
#   artifact digest: "sha256:" + sha256(join(name + b"\0" + sha256(file) + b"\n"
#     for name in sorted(forged.json files)))
# Covered: the forge CLI's identities and mtplx_runtime.json (MTPLX's required
# keys and its unverified status, checked by a reading of MTPLX's registry
# rules in Python); a duplicate inspection counted once; a re-forge of the
# same bytes linking the first artifact; two hosts reporting the same bytes
# under both framings; the same head on a changed trunk, and the 409 with
# candidates, resolved by digest and by id; runtime version strings and their
# mapping; an HF-layout artifact served healthy never outside the band;
# observed figures read back; a verification restamping mtplx_runtime.json
# on disk; a refused job's verdicts and request echo; the CLI's 409.
set -u
. "$(dirname "$0")/lib.sh"
FIXTURES=$(cd "$FIXTURES" && pwd)
PY3=/usr/bin/python3

# digests DIR: "HEAD LEGACY DIGEST" of an artifact folder, by hashlib.
digests() {
	"$PY3" - "$1" <<'EOF'
import hashlib, json, os, sys
d = sys.argv[1]
cfg = open(os.path.join(d, "config.json"), "rb").read()
mtp = open(os.path.join(d, "mtp.safetensors"), "rb").read()
head = "sha256:" + hashlib.sha256(b"config.json\0" + cfg + b"\0mtp\0" + mtp + b"\0").hexdigest()
legacy = hashlib.sha256(cfg + mtp).hexdigest()
files = json.load(open(os.path.join(d, "forged.json")))["files"]
for name, want in files.items():
    got = hashlib.sha256(open(os.path.join(d, name), "rb").read()).hexdigest()
    assert got == want, (name, got, want)
lines = b"".join(n.encode() + b"\0" + files[n].encode() + b"\n" for n in sorted(files, key=lambda x: x.encode()))
print(head, legacy, "sha256:" + hashlib.sha256(lines).hexdigest())
EOF
}

# ---- the forge CLI: both identities, and MTPLX's runtime file ----
"$FORGED" forge "$FIXTURES/qwen35_hf" --out "$TMP/cli1" --json >"$TMP/cli1.json" 2>"$TMP/cli1.err"
check "forge qwen35_hf: exit 0" [ $? = 0 ]
read -r HEAD LEGACY DIGEST <<<"$(digests "$TMP/cli1")"
check "forge --json: head_fingerprint in MTPLX's framing (hashlib)" [ "$(jq -r .head_fingerprint "$TMP/cli1.json")" = "$HEAD" ]
check "forge --json: the legacy fingerprint (hashlib)" [ "$(jq -r .fingerprint "$TMP/cli1.json")" = "$LEGACY" ]
check "forge --json: the artifact digest over every listed file (hashlib)" [ "$(jq -r .digest "$TMP/cli1.json")" = "$DIGEST" ]
check "forge --json: source and out as asked, mtplx_runtime named" \
	[ "$(jq -r '[.source, .out, .mtplx_runtime] | join(" ")' "$TMP/cli1.json")" = "$FIXTURES/qwen35_hf $TMP/cli1 mtplx_runtime.json" ]
check "forged.json: the same three" [ "$(jq -r '[.head_fingerprint, .fingerprint, .digest] | join(" ")' "$TMP/cli1/forged.json")" = "$HEAD $LEGACY $DIGEST" ]
check "forged.json's files: neither forged.json nor mtplx_runtime.json" \
	[ "$(jq -r '.files | has("forged.json") or has("mtplx_runtime.json")' "$TMP/cli1/forged.json")" = false ]
# MTPLX's registry, read in Python: RuntimeContract.from_dict's required keys and
# conversions, then _runtime_contract_blocker (youssofal/MTPLX mtplx/backends/registry.py@a845fd10).
mtplx_reads() {
	"$PY3" - "$1" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
missing = [k for k in ("mtplx_version", "arch_id", "mtp_depth_max", "recommended_profile", "exactness_baseline", "verified_on") if k not in d]
if missing:
    print("missing " + ",".join(missing)); sys.exit()
assert d["recommended_profile"] in ("stable", "performance-cold", "sustained", "turbo", "exact", "max-diagnostic", "turbo-full-stack")
assert int(d["mtp_depth_max"]) > 0
dict(d["exactness_baseline"]); dict(d["verified_on"])
block = {"candidate", "candidate_build_only_benchmark_pending", "candidate_build_only", "failed", "fail", "failing",
         "pending", "blocked", "blocker", "needs_repair", "needs_reverify", "unverified"}
text = lambda v: str(v or "").lower().replace("-", "_")
for name in ("exactness_baseline", "speed_evidence"):
    sec = d.get(name)
    if isinstance(sec, dict) and text(sec.get("status")) in block:
        print("blocked %s status %s" % (name, sec["status"])); sys.exit()
ev = d.get("speed_evidence") or {}
if text(ev.get("verdict")) in {"mtp_acceptance_collapsed", "no_mtp_depth_beat_ar", "no_quality_passed_mtp_depth_beat_ar"}:
    print("blocked verdict " + ev["verdict"]); sys.exit()
print("verified %s depth %s profile %s fingerprint %s" % (ev.get("verdict"), d["mtp_depth_max"], d["recommended_profile"],
      ev.get("artifact_fingerprint")))
EOF
}
check "mtplx_runtime.json: MTPLX loads it, unverified until a verification" \
	[ "$(mtplx_reads "$TMP/cli1/mtplx_runtime.json")" = "blocked speed_evidence status unverified" ]
check "mtplx_runtime.json: arch_id, versions, the fingerprint it binds to" \
	[ "$(jq -r '[.arch_id, .mtplx_version, .min_engine_version, .speed_evidence.artifact_fingerprint] | join(" ")' "$TMP/cli1/mtplx_runtime.json")" = \
	"qwen3-next-mtp 2.12.0 2.12.0 $HEAD" ]
"$FORGED" inspect "$TMP/cli1" --json >"$TMP/cli1.inspect" 2>/dev/null
check "inspect reads it back: loads, not verified, written by forged" \
	[ "$(jq -r '.mtplx_runtime | [.loads, .verified, .blocker, .written_by] | map(tostring) | join(" ")' "$TMP/cli1.inspect")" = \
	"true false speed_evidence status is unverified forged" ]
"$FORGED" forge "$FIXTURES/qwen35_hf" --out "$TMP/cli_mlx" --target mlx-lm-0.32 --json >"$TMP/cli_mlx.json" 2>/dev/null
check "a non-MTPLX target writes no mtplx_runtime.json" \
	[ ! -e "$TMP/cli_mlx/mtplx_runtime.json" ] && [ "$(jq -r .mtplx_runtime "$TMP/cli_mlx.json")" = null ]
# A refusal: the code as data in verdicts[] (issue 13 part 4).
"$FORGED" forge "$FIXTURES/qwen35_mlx_head_shifted" --out "$TMP/refused" --json >"$TMP/refused.json" 2>/dev/null
check "forge --json refusal: exit 1" [ $? = 1 ]
check "forge --json refusal: verdicts[] carries code, severity and detail" \
	[ "$(jq -r '.verdicts[0] | [.code, .severity, (.detail | test("above 2.4"))] | map(tostring) | join(" ")' "$TMP/refused.json")" = \
	"head_double_shifted error true" ]
check "forge --json refusal: no identities" [ "$(jq -r '[.head_fingerprint, .digest, .ok] | map(tostring) | join(" ")' "$TMP/refused.json")" = "null null false" ]

# ---- the service ----
start_server main --state-dir "$TMP/state" --allow-roots "$FIXTURES" --allow-roots "$TMP" --workers 1 ||
	{ finish; exit 1; }
http() {
	local m=$1 p=$2
	shift 2
	CODE=$(curl -sS -o "$TMP/body" -w '%{http_code}' --max-time 120 -X "$m" "$@" "$BASE$p" 2>"$TMP/curl.err") || CODE=000
}
post() { http POST "$1" -H "Content-Type: application/json" --data-binary "$2"; }
get() { http GET "$1"; }
jb() { jq -r "$@" "$TMP/body" 2>/dev/null; }
expect() { if [ "$CODE" = "$2" ]; then ok; else bad "$1: HTTP $CODE, want $2: $(head -c 400 "$TMP/body")"; fi; }
poll_job() {
	local i
	for i in $(seq 1 300); do
		get "/v1/jobs/$1"
		case "$(jb .state)" in succeeded | failed | cancelled) return 0 ;; esac
		sleep 0.2
	done
	return 1
}

# Duplicate inspections: one row, counted once.
post /v1/inspections '{"source": "qwen35_hf"}'
expect "inspect qwen35_hf" 201
HF_ID=$(jb .artifact_id)
check "an inspection's digest: sha256: + 64 hex" grep -Eq '^sha256:[0-9a-f]{64}$' <<<"$(jb .digest)"
post /v1/inspections '{"source": "qwen35_hf"}'
expect "the same inspection again: 200" 200
check "the same inspection again: the same artifact, existing" [ "$(jb '[.artifact_id, .existing] | map(tostring) | join(" ")')" = "$HF_ID true" ]
post /v1/inspections "{\"source\": \"$FIXTURES/qwen35_hf\"}"
check "named by its absolute path: the same artifact" [ "$(jb .artifact_id)" = "$HF_ID" ]
get /v1/fleet/health
check "fleet health counts it once" [ "$(jb '[.artifacts.total, .artifacts.by_family.qwen3_5] | map(tostring) | join(" ")')" = "1 1" ]
post /v1/inspections '{"source": "qwen35_hf", "runtimes": ["mlx-lm-0.31"]}'
expect "the same source for other runtimes: another report, another artifact" 201

# A forge job, then the same bytes again.
post /v1/jobs '{"kind": "forge", "source": "qwen35_hf"}'
expect "forge job" 202
J1=$(jb .id)
check "the job echoes the request: as named, as resolved, defaults, out" \
	[ "$(jb '.request | [.source, .source_resolved, .target, .quant, .out] | join(" ")')" = \
	"qwen35_hf $FIXTURES/qwen35_hf mtplx-2.12 keep $TMP/state/artifacts/$J1" ]
poll_job "$J1"
check "forge job succeeded" [ "$(jb .state)" = succeeded ]
A1=$(jb .artifact_id)
check "the job links its artifact" [ "$(jb .artifact_url)" = "/v1/artifacts/$A1" ]
read -r H1 L1 D1 <<<"$(digests "$TMP/state/artifacts/$J1")"
get "/v1/artifacts/$A1"
check "the stored artifact: its three identities (hashlib)" \
	[ "$(jb '[.head_fingerprint, .fingerprint, .digest] | join(" ")')" = "$H1 $L1 $D1" ]
check "the stored artifact keeps mtplx_runtime.json" [ "$(jb .mtplx_runtime.speed_evidence.status)" = unverified ]
post /v1/jobs '{"kind": "forge", "source": "qwen35_hf"}'
J2=$(jb .id)
poll_job "$J2"
check "a re-forge of the same bytes links the first artifact" [ "$(jb '[.state, .artifact_id] | join(" ")')" = "succeeded $A1" ]
get /v1/fleet/health
check "and is not counted twice" [ "$(jb .artifacts.total)" = 3 ]

# Two hosts, the same bytes, both framings.
post /v1/fleet/reports "{\"host\": \"mtplx-host\", \"artifact\": \"$H1\", \"runtime\": \"mtplx 2.12.0\", \"observed\": {\"tok_s\": 41.5, \"acceptance\": [0.97]}}"
expect "a host naming MTPLX's fingerprint" 201
check "MTPLX's framing finds the artifact, the version string its row" \
	[ "$(jb '[.artifact_id, .artifact_match, .runtime, .runtime_reported, .runtime_match] | map(tostring) | join("|")')" = \
	"$A1|head_fingerprint|mtplx-2.12|mtplx 2.12.0|range" ]
post /v1/fleet/reports "{\"host\": \"old-host\", \"artifact\": \"$L1\", \"runtime\": \"mlx_lm==0.33.1\"}"
expect "a host naming the legacy fingerprint" 201
check "the legacy framing finds the same artifact; mlx_lm==0.33.1 maps to mlx-lm-0.32" \
	[ "$(jb '[.artifact_id, .artifact_match, .runtime, .runtime_match] | map(tostring) | join("|")')" = "$A1|fingerprint|mlx-lm-0.32|range" ]
post /v1/fleet/reports "{\"host\": \"x\", \"artifact\": 1, \"runtime\": \"mtplx 2.12.0rc1\"}"
expect "a pre-release version string: 422" 422
check "  named unknown-runtime" [ "$(jb .type)" = urn:forged:problem:unknown-runtime ]
post /v1/fleet/reports "{\"host\": \"x\", \"artifact\": 1, \"runtime\": \"mtplx 2.12.2\"}"
expect "a version no row covers: 422" 422

# The same head on a changed trunk: the head fingerprint is shared, the digest is not.
cp -r "$FIXTURES/qwen35_hf" "$TMP/hf_changed"
"$PY3" - "$TMP/hf_changed" <<'EOF'
import json, os, struct, sys
d = sys.argv[1]
for f in sorted(os.listdir(d)):
    if not f.endswith(".safetensors"):
        continue
    p = os.path.join(d, f)
    b = bytearray(open(p, "rb").read())
    n = struct.unpack("<Q", bytes(b[:8]))[0]
    for k, v in json.loads(bytes(b[8:8 + n])).items():
        if k.endswith("embed_tokens.weight"):
            b[8 + n + v["data_offsets"][0] + 10] ^= 1   # one trunk byte
            open(p, "wb").write(b)
EOF
post /v1/jobs "{\"kind\": \"forge\", \"source\": \"$TMP/hf_changed\"}"
J3=$(jb .id)
poll_job "$J3"
A3=$(jb .artifact_id)
read -r H3 L3 D3 <<<"$(digests "$TMP/state/artifacts/$J3")"
check "the changed trunk: the same head fingerprints (hashlib)" [ "$H3 $L3" = "$H1 $L1" ]
check "the changed trunk: another digest, another artifact" [ "$D3" != "$D1" ] && [ "$A3" != "$A1" ]
for fp in "$H1" "$L1"; do
	post /v1/fleet/reports "{\"host\": \"h\", \"artifact\": \"$fp\", \"runtime\": \"mtplx-2.12\"}"
	expect "a shared fingerprint ($(cut -c1-12 <<<"$fp")...): 409" 409
	check "  ambiguous-artifact with both candidates and their digests" \
		[ "$(jb '[.type, ([.candidates[].artifact_id] | sort | map(tostring) | join(",")), ([.candidates[].digest] | sort | join(","))] | join(" ")')" = \
		"urn:forged:problem:ambiguous-artifact $(printf '%s\n' "$A1" "$A3" | sort -n | paste -sd,) $(printf '%s\n' "$D1" "$D3" | sort | paste -sd,)" ]
done
post /v1/fleet/reports "{\"host\": \"h\", \"artifact\": \"$H1\", \"digest\": \"$D3\", \"runtime\": \"mtplx-2.12\"}"
expect "the fingerprint and the digest" 201
check "  the digest picks the artifact" [ "$(jb .artifact_id)" = "$A3" ]
post /v1/fleet/reports "{\"host\": \"h2\", \"artifact\": \"$L1\", \"artifact_id\": $A1, \"runtime\": \"mtplx-2.12\"}"
expect "the fingerprint and the id" 201
check "  the id picks the artifact" [ "$(jb .artifact_id)" = "$A1" ]
post /v1/fleet/reports "{\"host\": \"h3\", \"artifact\": \"$D3\", \"runtime\": \"mtplx-2.12\"}"
check "the digest alone names one artifact" [ "$CODE $(jb .artifact_id) $(jb .artifact_match)" = "201 $A3 digest" ]
post /v1/fleet/reports "{\"host\": \"h\", \"artifact\": \"$H1\", \"artifact_id\": $HF_ID, \"runtime\": \"mtplx-2.12\"}"
expect "an id that is not one of the fingerprint's artifacts: 409" 409
check "  artifact-mismatch" [ "$(jb .type)" = urn:forged:problem:artifact-mismatch ]
"$FORGED" fleet report --server "$BASE" --host cli --artifact "$H1" --runtime mtplx-2.12 >"$TMP/cli409.out" 2>"$TMP/cli409.err"
check "the CLI on a shared fingerprint: exit 2" [ $? = 2 ]
check "  and prints both candidates" [ "$(grep -c 'candidate artifact' "$TMP/cli409.err")" = 2 ]
"$FORGED" fleet report --server "$BASE" --host cli --artifact "$H1" --digest "$D1" --runtime 'mlx-lm 0.31.3' -o table >"$TMP/cli.out" 2>&1
check "the CLI with --digest: exit 0, the mapping shown" \
	grep -q "reported: cli serves artifact $A1 (by head_fingerprint) under mlx-lm-0.31 ('mlx-lm 0.31.3', by range)" "$TMP/cli.out"

# The truth about probes: an HF-layout artifact served healthy is never outside the band.
post /v1/fleet/reports "{\"host\": \"hf-host\", \"artifact\": $HF_ID, \"runtime\": \"hf\", \"observed\": {\"tok_s\": 30}}"
expect "serving the raw HF inspection on hf (vllm)" 201
get "/v1/fleet/health?full=1"
check "fleet health: schema v2, after load" [ "$(jb '[.schema, .probe_qnorm.basis] | join(" ")')" = "forged.fleet_health.v2 after_load" ]
check "the HF host's probe after load: 1.7908, healthy (0.7908 on disk)" \
	[ "$(jb '.hosts[] | select(.host == "hf-host") | [.probe_after, .probe_bucket, .runtime, .runtime_reported] | map(tostring) | join(" ")')" = \
	"1.7908 healthy vllm hf" ]
check "nothing served is outside the band" [ "$(jb '[.probe_qnorm.outside_band, .probe_qnorm.outside_plausible] | map(tostring) | join(" ")')" = "0 0" ]
check "qwen3_5's band" [ "$(jb '.probe_qnorm.by_family.qwen3_5.band | [.healthy, .plausible] | flatten | map(tostring) | join(" ")')" = "1.74 1.83 1.25 2.4" ]
check "the healthy bucket counts the served artifacts once each" \
	[ "$(jb '.probe_qnorm.buckets[2].count')" = 3 ] && [ "$(jb '.probe_qnorm.by_family.qwen3_5.artifacts')" = 3 ]
check "hosts: what each observed" [ "$(jb '.hosts[] | select(.host == "mtplx-host") | .observed.tok_s')" = 41.5 ]
total_hosts=$(jb .hosts_total)
get /v1/fleet/health
check "the default page (a poller's) leaves the host list out, keeps its count" \
	[ "$(jb '[has("hosts"), .hosts_total] | map(tostring) | join(" ")')" = "false $total_hosts" ]
get "/v1/fleet/health?unhealthy_limit=50"
check "a page asked for carries it" [ "$(jb '.hosts | length')" = "$total_hosts" ]
get "/v1/artifacts/$A1"
check "the artifact's fleet[]: its hosts, as named, with what they observed" \
	[ "$(jb '[.fleet[] | select(.host == "mtplx-host" or .host == "old-host") | .host + "=" + .runtime_reported] | join(",")')" = \
	"mtplx-host=mtplx 2.12.0,old-host=mlx_lm==0.33.1" ]
# A raw HF artifact served by a runtime that shifts it twice is outside: inspect's own after-load figure.
post /v1/inspections '{"source": "qwen35_mlx_sidecar"}'
SIDECAR=$(jb .artifact_id)
post /v1/fleet/reports "{\"host\": \"wrong-runtime\", \"artifact\": $SIDECAR, \"runtime\": \"vllm\"}"
get "/v1/fleet/health?full=1"
check "an MLX artifact served on vllm (2.7913 after load) is outside both bands" \
	[ "$(jb '[.probe_qnorm.outside_band, .probe_qnorm.outside_plausible, (.hosts[] | select(.host == "wrong-runtime") | .probe_bucket)] | map(tostring) | join(" ")')" = "1 1 above" ]

# A verification restamps mtplx_runtime.json, in the store and on disk, as MTPLX's stamp would.
post "/v1/artifacts/$A1/verifications" '{"schema": "forged.verification.v1", "hardware": "M4 Max", "runtime": "mtplx-2.12",
 "rows": [{"depth": 0, "tok_s": 15.04}, {"depth": 1, "tok_s": 34.15584, "acceptance": [0.978], "quality_passed": true},
          {"depth": 3, "tok_s": 47.2256, "acceptance": [0.978, 0.95, 0.93], "quality_passed": true}]}'
expect "a winning verification" 201
check "the runtime file in the artifact's folder was rewritten" \
	[ "$(jb '.mtplx_runtime | [.path, .written] | map(tostring) | join(" ")')" = "$TMP/state/artifacts/$J1/mtplx_runtime.json true" ]
check "MTPLX now reads it as verified, depth 3, sustained, bound to the bytes" \
	[ "$(mtplx_reads "$TMP/state/artifacts/$J1/mtplx_runtime.json")" = "verified mtp_depth_wins depth 3 profile sustained fingerprint $H1" ]
check "the head fingerprint still matches the bytes (the file is outside it)" [ "$(digests "$TMP/state/artifacts/$J1" | cut -d' ' -f1)" = "$H1" ]
post "/v1/artifacts/$A1/verifications" '{"schema": "forged.verification.v1", "rows": [{"depth": 0, "tok_s": 15.04},
 {"depth": 1, "tok_s": 13.46, "acceptance": [0.067]}]}'
check "a collapsed verification blocks it again" \
	[ "$(mtplx_reads "$TMP/state/artifacts/$J1/mtplx_runtime.json")" = "blocked verdict mtp_acceptance_collapsed" ]
post "/v1/artifacts/$HF_ID/verifications" '{"schema": "forged.verification.v1", "rows": [{"depth": 0, "tok_s": 15.04}]}'
check "an inspection has no runtime file to restamp" [ "$CODE $(jb .mtplx_runtime)" = "201 null" ]

# A refused job carries its refusal and verdicts as data, and what was asked.
post /v1/jobs '{"kind": "forge", "source": "qwen35_mlx_head_shifted", "target": "mlx-lm-0.32", "quant": "keep"}'
J4=$(jb .id)
poll_job "$J4"
check "refused job: failed, refusal as data" [ "$(jb '[.state, .refusal.code, .refusal.severity] | join(" ")')" = "failed head_double_shifted error" ]
check "refused job: verdicts[] with code, severity, detail" \
	[ "$(jb '.verdicts[0] | [.code, .severity, (.detail | test("above 2.4"))] | map(tostring) | join(" ")')" = "head_double_shifted error true" ]
check "refused job: the request echoed, no artifact" \
	[ "$(jb '[.request.source, .request.target, .request.quant, .artifact_id, .artifact_url] | map(tostring) | join(" ")')" = \
	"qwen35_mlx_head_shifted mlx-lm-0.32 keep null null" ]

stop_server "$SPID" 20
finish
