#!/usr/bin/env bash
# test_health_build.sh: GET /v1/fleet/health after a write is built once,
# not once per handler thread asking at the same moment, and every answer
# holds the write (api/health.c).
#
# A fleet of 60,000 artifacts (rows written straight into the SQLite file
# after forged made the schema) makes one build take tens of milliseconds,
# so 16 requests sent together after a write all arrive while the first
# build runs.  forged_fleet_health_builds_total (/metrics) counts builds.
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/serve_lib.sh"

sqlite_state "the fleet is written into the SQLite file"
N=60000

# Unhealthy artifacts (an error-severity static verdict each), as forged stores them;
# the triggers keep the counters.
/usr/bin/python3 - "$STATE/forged.db" "$N" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
n = int(sys.argv[2])
with db:
    for i in range(1, n + 1):
        cur = db.execute("INSERT INTO artifacts (source, family, ok, fingerprint) VALUES (?, 'qwen3_5', 0, ?)",
                         ("fleet-%d" % i, "%064x" % i))
        db.execute("INSERT INTO verdicts (artifact_id, code, severity, origin)"
                   " VALUES (?, 'embedded_mtp_shift_hazard', 'error', 'static')", (cur.lastrowid,))
    db.execute("UPDATE artifacts SET unhealthy = 1")
db.close()
PY
check "the fleet was written" [ "$(sqlite3 "$STATE/forged.db" 'SELECT count(*) FROM artifacts WHERE unhealthy = 1')" = "$N" ]

start_server health --state-dir "$STATE" --tokens-file "$TMP/tokens" --workers 0 || { finish; exit 1; }

builds() { curl -s -H "Authorization: Bearer $RTOK" "$BASE/metrics" | sed -n 's/^forged_fleet_health_builds_total \([0-9]*\)$/\1/p'; }
# at_most N A B: A and B are counts and B - A <= N
at_most() { [[ $2 =~ ^[0-9]+$ && $3 =~ ^[0-9]+$ ]] && [ $(($3 - $2)) -le "$1" ]; }
# together TAG: 16 GETs of fleet health sent at once; their bodies in $TMP/TAG.N.json, statuses in $TMP/TAG.codes
together() {
	local args=() i
	for i in $(seq 1 16); do args+=(-o "$TMP/$1.$i.json" -w '%{http_code}\n' "$BASE/v1/fleet/health"); done
	curl -s --no-progress-meter --parallel --parallel-immediate --parallel-max 16 -H "Authorization: Bearer $RTOK" "${args[@]}" >"$TMP/$1.codes"
}
ROWS='{"schema": "forged.verification.v1", "runtime": "mtplx-2.12", "rows": [{"depth": 0, "tok_s": 15.04},
 {"depth": 1, "tok_s": 13.46, "acceptance": [0.067], "quality_passed": true}]}'

get /v1/fleet/health
expect "fleet health answers" 200
check "fleet health counts the fleet" [ "$(jb .unhealthy_total)" = "$N" ]
b0=$(builds)
check "/metrics counts health builds" [ -n "$b0" ]

# A write through this server: the cached document is stale for everyone.
post /v1/artifacts/1/verifications "$ROWS"
expect "a verification of artifact 1" 201
b1=$(builds)
together first
b2=$(builds)
check "16 answers of 200" [ "$(grep -c '^200$' "$TMP/first.codes")" = 16 ]
check "16 requests after a write: one build, not one each (builds $b1 -> $b2)" at_most 2 "$b1" "$b2"
check "every answer holds the write (mtp_acceptance_collapsed counted)" \
	[ "$(cat "$TMP"/first.*.json | jq -rs 'map(.artifacts.by_verdict.mtp_acceptance_collapsed) | unique | tostring')" = "[1]" ]

# And again: the next write is in every answer that follows it.
post /v1/artifacts/2/verifications "$ROWS"
expect "a verification of artifact 2" 201
b3=$(builds)
together second
b4=$(builds)
check "again: one build (builds $b3 -> $b4)" at_most 2 "$b3" "$b4"
check "again: every answer holds both writes" \
	[ "$(cat "$TMP"/second.*.json | jq -rs 'map(.artifacts.by_verdict.mtp_acceptance_collapsed) | unique | tostring')" = "[2]" ]

# Without a write the copy answers: no build at all.
together third
b5=$(builds)
check "no write since: no build (builds $b4 -> $b5)" at_most 0 "$b4" "$b5"
finish
