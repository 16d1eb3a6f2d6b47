#!/usr/bin/env bash
# test_faults.sh: crash consistency of forge jobs under the daemon (issue 11
# item 8).  24 jobs are queued (odd ones with a client's out, even ones
# with the default STATE/artifacts/ID); then, round after round, a
# one-worker server is started with FORGED_FAULT=POINT:2 (workers.c: it
# SIGKILLs itself, like a power cut, the second time a job reaches POINT,
# so one job gets through and the next dies there) and runs until it dies;
# the next round's server takes the dead one's job back (SQLite: at
# start-up; PostgreSQL: when its lease runs out).  POINTs: each forge stage
# (inspect, backbone, sidecar, provenance, check), done (after the rename
# into place), forged (the forge returned, nothing stored) and stored (the
# artifact and the job's success committed in one transaction: what used
# to be two writes, with a kill possible between them, is one), each twice.
# Then a clean server finishes everything, and: every job succeeded once,
# one artifact row per distinct content (one per digest: jobs forging the
# same bytes share it) and each job's artifact the one of its own out, no
# complete artifact left unregistered, no temporary folder left, and the
# store intact (PRAGMA integrity_check).
#
# FORGED_E2E_STORE=postgres (test_faults_pg.sh): the same on a PostgreSQL store.
set -u
. "$(dirname "$0")/lib.sh"
FIXTURES=$(cd "$FIXTURES" && pwd)
REPO=$(cd "$(dirname "$0")/../.." && pwd)
STORE=${FORGED_E2E_STORE:-sqlite}
LEASE=3
if [ "$STORE" = postgres ]; then
	if [ -z "${FORGED_TEST_PG:-}" ]; then
		echo "$(basename "$0" .sh): skipped: FORGED_TEST_PG is not set (tests/run_all.sh starts a PostgreSQL cluster when it is installed)"
		finish
		exit 0
	fi
	. "$REPO/tests/pg_cluster.sh"
fi
POINTS=(inspect backbone sidecar provenance check done forged stored)

PIDS=""
DB=""
cleanup() {
	local p
	for p in $PIDS; do kill -KILL "$p" 2>/dev/null; done
	for p in $PIDS; do wait "$p" 2>/dev/null; done
	[ -n "$DB" ] && psql -q -X "$FORGED_TEST_PG" -c "DROP DATABASE IF EXISTS \"$DB\" WITH (FORCE)" >/dev/null 2>&1
	rm -rf "$TMP"
}
trap cleanup EXIT

WTOK=faults-write-token-0b7d
printf 'write faults %s\n' "$(printf %s "$WTOK" | sha256sum | cut -d' ' -f1)" >"$TMP/tokens"
STATE=$TMP/state
OUT=$TMP/out
mkdir -p "$OUT"
if [ "$STORE" = postgres ]; then
	DB=faults_$$
	URL=$(pg_createdb "$DB") || { bad "cannot create database $DB"; finish; exit 1; }
	STORE_ARGS=(--store "$URL")
else
	STORE_ARGS=()
fi
q() {
	if [ "$STORE" = postgres ]; then
		psql -X -q -A -t "$URL" -c "$1"
	else
		"$PYTHON" -c 'import sqlite3, sys
db = sqlite3.connect(sys.argv[1], timeout=10)
for row in db.execute(sys.argv[2]): print(row[0])' "$STATE/forged.db" "$1"
	fi
}

# start NAME [ENV] [FLAGS]: a server (one worker), PORT and SPID set once /readyz answers.
start() {
	local name=$1 env=${2:-} k
	shift 2
	# shellcheck disable=SC2086
	env $env "$FORGED" serve --listen 127.0.0.1:0 --state-dir "$STATE" "${STORE_ARGS[@]}" --allow-roots "$FIXTURES" \
		--allow-roots "$OUT" --tokens-file "$TMP/tokens" --workers 1 --lease-seconds "$LEASE" --max-attempts 100 \
		"$@" >"$TMP/$name.log" 2>&1 &
	SPID=$!
	PIDS="$PIDS $SPID"
	PORT=""
	for k in $(seq 1 300); do
		PORT=$(sed -n 's/.* listening on [^ ]* port \([0-9][0-9]*\), state .*/\1/p' "$TMP/$name.log" 2>/dev/null)
		[ -n "$PORT" ] && break
		kill -0 "$SPID" 2>/dev/null || break
		sleep 0.05
	done
	[ -n "$PORT" ] || { bad "$name did not start: $(tail -n 3 "$TMP/$name.log")" 2>&"${FAIL_FD:-2}"; return 1; }
	for k in $(seq 1 100); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$PORT/readyz")" = 200 ] && return 0
		kill -0 "$SPID" 2>/dev/null || return 0 # already killed by its fault (a recovered job reached it)
		sleep 0.05
	done
	return 0
}

SOURCES=(qwen35_hf glm45 mimo qwen35_moe_hf_fused_linear)
JOBS=$((3 * ${#POINTS[@]}))
# The jobs, queued up front by a server that runs none (--workers 0): odd ones with a client's out.
start submit "" --workers 0 || { finish; exit 1; }
for n in $(seq 1 "$JOBS"); do
	if [ $((n % 2)) = 1 ]; then
		body="{\"kind\": \"forge\", \"source\": \"${SOURCES[$((n % 4))]}\", \"out\": \"$OUT/j$n\"}"
	else
		body="{\"kind\": \"forge\", \"source\": \"${SOURCES[$((n % 4))]}\"}"
	fi
	code=$(curl -s -o "$TMP/body" -w '%{http_code}' --max-time 30 -X POST -H "Authorization: Bearer $WTOK" \
		-H "Content-Type: application/json" -H "Idempotency-Key: fault-$n" --data-binary "$body" \
		"http://127.0.0.1:$PORT/v1/jobs")
	[ "$code" = 202 ] || bad "job $n: HTTP $code $(head -c 200 "$TMP/body")"
done
kill -TERM "$SPID"
wait "$SPID"
# Each round: FORGED_FAULT=POINT:2, so one job gets through POINT and the next one dies there.
KILLS=0
round=0
FAIL_FD=3
exec 3>&2 2>/dev/null # bash reports each SIGKILLed server: their status is checked instead, failures go to 3
for pass in 1 2; do
	for point in "${POINTS[@]}"; do
		round=$((round + 1))
		start "r$round" "FORGED_FAULT=$point:2" || continue
		for k in $(seq 1 600); do kill -0 "$SPID" 2>/dev/null || break; sleep 0.05; done
		rc=0
		if kill -0 "$SPID" 2>/dev/null; then rc=999; kill -KILL "$SPID"; fi
		[ "$rc" = 999 ] || wait "$SPID" || rc=$?
		if [ "$rc" = 137 ]; then
			KILLS=$((KILLS + 1))
			ok
		else
			bad "round $round ($point): the server did not die at its fault (status $rc)" 2>&3
		fi
	done
done
exec 2>&3 3>&-
FAIL_FD=2
check "at least 10 kills ($KILLS)" [ "$KILLS" -ge 10 ]
KILLED_JOBS=$(q "SELECT count(*) FROM jobs WHERE attempts > 0")

# A clean server finishes everything (a dead server's leases run out first on PostgreSQL).
start final "" || { finish; exit 1; }
FPID=$SPID
for k in $(seq 1 600); do
	[ "$(q "SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')")" = 0 ] && break
	sleep 0.1
done
N_JOBS=$(q "SELECT count(*) FROM jobs")
SUCC=$(q "SELECT count(*) FROM jobs WHERE state = 'succeeded'")
ARTS=$(q "SELECT count(*) FROM artifacts")
DUPS=$(q "SELECT count(*) - count(DISTINCT job_id) FROM artifacts WHERE job_id IS NOT NULL")
ATTEMPTS=$(q "SELECT coalesce(sum(attempts), 0) FROM jobs")
check "every submitted job is in the store, once ($N_JOBS of $JOBS)" [ "$N_JOBS" = "$JOBS" ]
check "every job succeeded exactly once ($SUCC of $N_JOBS)" [ "$SUCC" = "$N_JOBS" ]
# One artifact per digest (issue 13): jobs forging the same bytes share the row the first stored.
find "$STATE/artifacts" "$OUT" -mindepth 2 -maxdepth 2 -name forged.json -printf '%h\n' | sort >"$TMP/complete"
: >"$TMP/out_digests"
while read -r dir; do
	echo "$(jq -r .job.id "$dir/forged.json") $(jq -r .digest "$dir/forged.json")" >>"$TMP/out_digests"
done <"$TMP/complete"
DISTINCT=$(cut -d' ' -f2 "$TMP/out_digests" | sort -u | grep -c '^sha256:')
check "one artifact row per distinct content ($ARTS artifacts, $DISTINCT digests among the complete outs)" \
	[ "$ARTS" = "$DISTINCT" ]
check "no job has two artifact rows ($DUPS duplicates)" [ "$DUPS" = 0 ]
check "no digest stored twice" [ "$(q "SELECT count(*) - count(DISTINCT digest) FROM artifacts")" = 0 ]
q "SELECT j.id || ' ' || a.digest FROM jobs j JOIN artifacts a ON a.id = j.artifact_id" | sort >"$TMP/job_digests"
check "each job's artifact has the digest of the job's own out ($(wc -l <"$TMP/out_digests") outs)" \
	cmp -s "$TMP/job_digests" <(sort "$TMP/out_digests")
# No complete artifact unregistered: every folder holding a forged.json names a job whose artifact has its digest.
q "SELECT path FROM artifacts" | sort >"$TMP/registered"
UNREG=$(( $(wc -l <"$TMP/complete") - $(comm -12 <(sort "$TMP/out_digests") "$TMP/job_digests" | wc -l) ))
check "no complete artifact left unregistered ($UNREG)" [ "$UNREG" = 0 ]
TEMPS=$(find "$STATE/artifacts" "$OUT" -maxdepth 1 -name '*forged-tmp*' | wc -l)
check "no temporary folder left ($TEMPS)" [ "$TEMPS" = 0 ]
check "every registered artifact is complete" [ "$(comm -23 "$TMP/registered" "$TMP/complete" | wc -l)" = 0 ]
ADOPTED=$(cat "$TMP"/*.log | grep -c "adopted" || true)
kill -TERM "$FPID"
wait "$FPID" 2>/dev/null
if [ "$STORE" = sqlite ]; then
	check "PRAGMA integrity_check is ok" [ "$(q "PRAGMA integrity_check")" = ok ]
else
	check "the counters agree with the rows" \
		[ "$(q "SELECT (SELECT count(*) FROM artifacts) = (SELECT n FROM artifact_stats WHERE dim = 'total')")" = t ]
fi
echo "fault figures ($STORE): $KILLS kills (${#POINTS[@]} points, twice), $N_JOBS jobs ($KILLED_JOBS killed at least once," \
	"odd ones with a client's out), $SUCC succeeded," \
	"$DUPS duplicates, $((N_JOBS - SUCC)) lost, $UNREG unregistered and $TEMPS temporary leftovers," \
	"$ADOPTED out(s) adopted after a kill past the rename, $ATTEMPTS re-runs in all"
finish
