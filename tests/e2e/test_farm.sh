#!/usr/bin/env bash
# test_farm.sh: the distributed claim (issue 17).  FARM_JOBS (200) forge
# jobs are submitted through every instance with Idempotency-Keys, some
# resubmitted through another instance; mid-run one instance is killed with
# SIGKILL and another is restarted (SIGTERM, then started again); then every
# job must have ended exactly once (succeeded), its out complete and naming
# it, one artifact row per distinct content (one per digest, issue 13: jobs
# forging the same bytes share the row the first stored) with each job's
# artifact the digest of its own out, no job left running past its lease,
# nothing temporary left, and the fleet view (health, listings, /metrics
# figures) the same from every instance.
#
#   FORGED_E2E_STORE=postgres (test_farm_pg.sh): three instances on one
#   PostgreSQL database (FORGED_TEST_PG's cluster), outputs on a shared
#   folder every instance has in allow_roots; the killed instance's jobs are
#   taken over by the others when their lease (4 s) runs out.
#   default (SQLite): one instance; it is the one killed, and restarted.
#
# Figures (jobs, kills, take-over latency, wall time, jobs/s) are printed,
# not asserted beyond "taken over within the lease and a reap tick".
set -u
. "$(dirname "$0")/lib.sh"
FIXTURES=$(cd "$FIXTURES" && pwd)
REPO=$(cd "$(dirname "$0")/../.." && pwd)
STORE=${FORGED_E2E_STORE:-sqlite}
JOBS=${FARM_JOBS:-200}
LEASE=4
if [ "$STORE" = postgres ]; then
	if [ -z "${FORGED_TEST_PG:-}" ]; then
		echo "$(basename "$0" .sh): skipped: FORGED_TEST_PG is not set (tests/run_all.sh starts a PostgreSQL cluster when it is installed)"
		finish
		exit 0
	fi
	. "$REPO/tests/pg_cluster.sh"
	N=3
else
	N=1
fi

PIDS=""
DB=""
cleanup() {
	local p
	for p in $PIDS; do kill -KILL "$p" 2>/dev/null; done
	for p in $PIDS; do wait "$p" 2>/dev/null; done
	[ -n "$DB" ] && psql -q -X "$FORGED_TEST_PG" -c "DROP DATABASE IF EXISTS \"$DB\" WITH (FORCE)" >/dev/null 2>&1
	if [ -n "${FARM_KEEP:-}" ]; then echo "kept $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT

WTOK=farm-write-token-5c1e
printf 'write farm %s\n' "$(printf %s "$WTOK" | sha256sum | cut -d' ' -f1)" >"$TMP/tokens"
SHARED=$TMP/shared # the "shared mount": every instance has it in allow_roots
mkdir -p "$SHARED/out"
if [ "$STORE" = postgres ]; then
	DB=farm_$$
	URL=$(pg_createdb "$DB") || { bad "cannot create database $DB"; finish; exit 1; }
	STORE_ARGS=(--store "$URL")
else
	STORE_ARGS=(--store "sqlite://$TMP/s1/forged.db")
fi

# q SQL: the first column of each row, on the farm's store.
q() {
	if [ "$STORE" = postgres ]; then
		psql -X -q -A -t "$URL" -c "$1"
	else
		"$PYTHON" -c 'import sqlite3, sys
db = sqlite3.connect(sys.argv[1], timeout=10)
for row in db.execute(sys.argv[2]): print(row[0])' "$TMP/s1/forged.db" "$1"
	fi
}

declare -A PORT IPID INST
# start_inst I: instance I on an ephemeral port, its log in $TMP/iI.N.log.
start_inst() {
	local i=$1 log n=0 k
	while [ -e "$TMP/i$i.$n.log" ]; do n=$((n + 1)); done
	log=$TMP/i$i.$n.log
	# shellcheck disable=SC2086
	env ${FAULT_ENV:-} "$FORGED" serve --listen 127.0.0.1:0 --state-dir "$TMP/s$i" "${STORE_ARGS[@]}" --allow-roots "$FIXTURES" \
		--allow-roots "$SHARED" --tokens-file "$TMP/tokens" --workers 2 --lease-seconds "$LEASE" --max-attempts 10 \
		--drain-seconds 10 >"$log" 2>&1 &
	IPID[$i]=$!
	PIDS="$PIDS ${IPID[$i]}"
	PORT[$i]=""
	for k in $(seq 1 300); do
		PORT[$i]=$(sed -n 's/.* listening on [^ ]* port \([0-9][0-9]*\), state .*/\1/p' "$log" 2>/dev/null)
		[ -n "${PORT[$i]}" ] && break
		sleep 0.05
	done
	INST[$i]=$(sed -n 's/.*, instance \([^,]*\), store .*/\1/p' "$log")
	for k in $(seq 1 100); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:${PORT[$i]}/readyz")" = 200 ] && return 0
		sleep 0.1
	done
	bad "instance $i did not start: $(tail -n 3 "$log")"
	return 1
}

# api I METHOD PATH [CURL ARGS]: status in $CODE, body in $TMP/body.
api() {
	local i=$1 m=$2 p=$3
	shift 3
	CODE=$(curl -sS -o "$TMP/body" -w '%{http_code}' --max-time 60 -X "$m" -H "Authorization: Bearer $WTOK" "$@" \
		"http://127.0.0.1:${PORT[$i]}$p" 2>/dev/null) || CODE=000
}
jb() { jq -r "$@" "$TMP/body" 2>/dev/null; }

declare -A JID
RESUBMITS=0
RETRIES=0
# submit FIRST LAST I...: jobs FIRST..LAST through instances I... (farm_submit.py, eight at a time).
submit() {
	local first=$1 last=$2 i line
	shift 2
	: >"$TMP/ports"
	for i in "$@"; do echo "${PORT[$i]}" >>"$TMP/ports"; done
	PORTS_FILE=$TMP/ports "$PYTHON" "$REPO/tests/e2e/farm_submit.py" "$WTOK" "$SHARED/out" "$first" "$last" \
		$(cat "$TMP/ports") >"$TMP/submit.$first" 2>&1
	while read -r line; do
		set -- $line
		case "$1" in
		job) JID[$2]=$3 ;;
		retries) RETRIES=$((RETRIES + $2)) ;;
		mismatches) check "resubmissions with the same key answered the same job ($2 did not)" [ "$2" = 0 ] ;;
		esac
	done <"$TMP/submit.$first"
	RESUBMITS=$((RESUBMITS + (last / 7) - ((first - 1) / 7)))
}
succeeded() { q "SELECT count(*) FROM jobs WHERE state = 'succeeded'"; }
live() { local i; for i in $(seq 1 "$N"); do kill -0 "${IPID[$i]}" 2>/dev/null && echo "$i"; done; }

# Instance 1 is killed by SIGKILL in the middle of a job, at the sidecar stage of
# its KILL_AT-th job (FORGED_FAULT: the forges are too quick to aim a kill from outside).
KILL_AT=$((JOBS / 10 / N))
for i in $(seq 1 "$N"); do
	if [ "$i" = 1 ]; then
		FAULT_ENV="FORGED_FAULT=sidecar:$KILL_AT" start_inst "$i" || { finish; exit 1; }
	else
		start_inst "$i" || { finish; exit 1; }
	fi
done
VICTIM=${INST[1]}
T0=$(date +%s.%N)
half=$((JOBS / 2))
exec 3>&2 2>/dev/null
submit 1 "$half" $(seq 1 "$N")
for k in $(seq 1 600); do kill -0 "${IPID[1]}" 2>/dev/null || break; sleep 0.02; done
fired=1
kill -0 "${IPID[1]}" 2>/dev/null && fired=0 && kill -KILL "${IPID[1]}"
krc=0
wait "${IPID[1]}" || krc=$?
exec 2>&3 3>&-
T_KILL=$(date +%s.%N)
KILLS=1
check "instance 1 died of SIGKILL mid-job (status $krc)" [ "$krc" = 137 ]
check "the SIGKILL was the fault point's, not this script's" [ "$fired" = 1 ]
HELD=$(q "SELECT count(*) FROM jobs WHERE state = 'running' AND owner = '$VICTIM'")
check "the killed instance held running jobs ($HELD)" [ "$HELD" -gt 0 ]
if [ "$STORE" = sqlite ]; then
	start_inst 1 || { finish; exit 1; } # the only instance: back at once, its start-up takes the jobs back
fi
# The victim's jobs are taken over (by another instance, or the restart) within the lease and a reap tick.
TAKEOVER=""
for k in $(seq 1 400); do
	if [ "$(q "SELECT count(*) FROM jobs WHERE state = 'running' AND owner = '$VICTIM'")" = 0 ]; then
		TAKEOVER=$(awk -v a="$T_KILL" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
		break
	fi
	sleep 0.02
done
check "the killed instance's $HELD running job(s) were taken over (after ${TAKEOVER:-never} s)" [ -n "$TAKEOVER" ]
# The rest through the live instances; meanwhile another instance restarts gracefully.
mapfile -t LIVE < <(live)
RESTARTED=0
if [ "$N" -gt 1 ]; then
	submit $((half + 1)) "$JOBS" "${LIVE[@]}" &
	SUBMITTER=$!
	for k in $(seq 1 600); do [ "$(q "SELECT count(*) FROM jobs")" -ge $((half + half / 2)) ] && break; sleep 0.02; done
	kill -TERM "${IPID[2]}"
	rc=0
	wait "${IPID[2]}" || rc=$?
	check "instance 2 stopped cleanly on SIGTERM mid-run (status $rc)" [ "$rc" = 0 ]
	start_inst 2 || { finish; exit 1; }
	printf '%s\n' "${PORT[2]}" "${PORT[3]}" >"$TMP/ports"
	RESTARTED=1
	wait "$SUBMITTER"
	# The background submit ran in a subshell: read its answers here.
	while read -r line; do
		set -- $line
		case "$1" in
		job) JID[$2]=$3 ;;
		retries) RETRIES=$((RETRIES + $2)) ;;
		mismatches) check "resubmissions with the same key answered the same job ($2 did not)" [ "$2" = 0 ] ;;
		esac
	done <"$TMP/submit.$((half + 1))"
	RESUBMITS=$((RESUBMITS + (JOBS / 7) - (half / 7)))
else
	submit $((half + 1)) "$JOBS" "${LIVE[@]}"
fi
check "every submission was answered" [ "${#JID[@]}" = "$JOBS" ]
# Every job ends.
for k in $(seq 1 2400); do
	[ "$(q "SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')")" = 0 ] && break
	sleep 0.1
done
T_END=$(date +%s.%N)
[ "$N" -gt 1 ] && { start_inst 1 || { finish; exit 1; }; } # back, so that every instance answers below

check "$JOBS jobs, one per key (resubmissions answered the same job)" [ "$(q "SELECT count(*) FROM jobs")" = "$JOBS" ]
check "every job succeeded" [ "$(succeeded)" = "$JOBS" ]
check "no job queued or running" [ "$(q "SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')")" = 0 ]
# One artifact per digest (issue 13): a job forging bytes another job stored before
# succeeds with that artifact, no second row; so the store holds one row per
# distinct forged content, each naming the job that stored it, at that job's out.
bad_out=0
: >"$TMP/out_digests"
for n in $(seq 1 "$JOBS"); do
	jid=${JID[$n]:-0}
	f=$SHARED/out/j$n/forged.json
	if [ ! -f "$SHARED/out/j$n/mtp.safetensors" ] || [ "$(jq -r .job.id "$f" 2>/dev/null)" != "$jid" ]; then
		bad_out=$((bad_out + 1))
	fi
	echo "$jid $(jq -r .digest "$f" 2>/dev/null)" >>"$TMP/out_digests"
done
check "every out is complete and names its job ($bad_out not)" [ "$bad_out" = 0 ]
DIGESTS=$(cut -d' ' -f2 "$TMP/out_digests" | sort -u | grep -c '^sha256:')
check "one artifact per distinct content ($DIGESTS digests among the $JOBS outs)" \
	[ "$(q "SELECT count(*) FROM artifacts")" = "$DIGESTS" ]
check "the outs carry digests ($DIGESTS)" [ "$DIGESTS" -gt 0 ]
check "no digest stored twice" [ "$(q "SELECT count(*) - count(DISTINCT digest) FROM artifacts")" = 0 ]
check "each artifact names the job that stored it, each job at most once" \
	[ "$(q "SELECT count(DISTINCT job_id) FROM artifacts WHERE job_id IS NOT NULL")" = "$DIGESTS" ]
q "SELECT j.id || ' ' || a.digest FROM jobs j JOIN artifacts a ON a.id = j.artifact_id ORDER BY j.id" \
	| sort >"$TMP/job_digests"
check "each job's artifact has the digest of the job's own out" \
	cmp -s "$TMP/job_digests" <(sort "$TMP/out_digests")
declare -A OUT_OF
for n in $(seq 1 "$JOBS"); do OUT_OF[${JID[$n]:-0}]=$SHARED/out/j$n; done
bad_path=0
while read -r jid path; do
	[ "$path" = "${OUT_OF[$jid]:-}" ] || bad_path=$((bad_path + 1))
done < <(q "SELECT job_id || ' ' || path FROM artifacts")
check "every artifact's path is the out of the job that stored it ($bad_path not)" [ "$bad_path" = 0 ]
check "no temporary folder left" [ -z "$(find "$SHARED/out" -maxdepth 1 -name '*forged-tmp*')" ]
ATTEMPTS=$(q "SELECT coalesce(sum(attempts), 0) FROM jobs")

# One fleet view from anywhere: a report through one instance, then health, listings and figures from all.
aid=$(q "SELECT min(id) FROM artifacts")
api "$N" POST /v1/fleet/reports -H "Content-Type: application/json" \
	--data-binary "{\"host\": \"gpu-farm.example\", \"artifact\": $aid, \"runtime\": \"mtplx-2.12\"}"
check "a fleet report through instance $N" [ "$CODE" = 201 ]
same=0
for k in $(seq 1 40); do
	for i in $(seq 1 "$N"); do
		api "$i" GET /v1/fleet/health
		jq -S -c . "$TMP/body" >"$TMP/health.$i" 2>/dev/null
	done
	same=1
	for i in $(seq 2 "$N"); do cmp -s "$TMP/health.1" "$TMP/health.$i" || same=0; done
	[ "$(jq -r ".probe_after_load.reports + .probe_after_load.not_counted" "$TMP/health.1")" = 1 ] || same=0
	[ "$same" = 1 ] && break
	sleep 0.1
done
check "fleet health is the same document from all $N instance(s), the new report in it" [ "$same" = 1 ]
check "fleet health counts every artifact" [ "$(jq -r .artifacts.total "$TMP/health.1")" = "$DIGESTS" ]
for path in "/v1/artifacts?limit=500" "/v1/jobs?state=succeeded&limit=500"; do
	for i in $(seq 1 "$N"); do
		api "$i" GET "$path"
		jq -S -c . "$TMP/body" >"$TMP/list.$i"
	done
	same=1
	for i in $(seq 2 "$N"); do cmp -s "$TMP/list.1" "$TMP/list.$i" || same=0; done
	check "GET $path is the same from all $N instance(s)" [ "$same" = 1 ]
done
for i in $(seq 1 "$N"); do
	api "$i" GET /metrics
	grep -E '^forged_(jobs|artifacts)' "$TMP/body" >"$TMP/metrics.$i"
	check "/metrics of instance $i labels it" grep -q "^forged_instance_info{instance=\"${INST[$i]}\",store=\"$STORE\"} 1$" "$TMP/body"
done
same=1
for i in $(seq 2 "$N"); do cmp -s "$TMP/metrics.1" "$TMP/metrics.$i" || same=0; done
check "/metrics store figures are the same from all $N instance(s)" [ "$same" = 1 ]
if [ "$STORE" = sqlite ]; then
	check "PRAGMA integrity_check is ok" [ "$(q "PRAGMA integrity_check")" = ok ]
else
	check "the counters agree with the rows" \
		[ "$(q "SELECT (SELECT count(*) FROM artifacts) = (SELECT n FROM artifact_stats WHERE dim = 'total')")" = t ]
fi
check "no sanitizer report in the instances' logs" [ -z "$(grep -l 'Sanitizer\|runtime error:' "$TMP"/i*.log)" ]

# An instance that cannot write a job's out refuses it, saying so: the others stop, one instance
# accepts the job (the shared folder is in its roots) and runs nothing, another runs it without
# the shared folder in its roots.
if [ "$N" -gt 1 ]; then
	for i in $(seq 1 "$N"); do kill -TERM "${IPID[$i]}" 2>/dev/null; wait "${IPID[$i]}" 2>/dev/null; done
	"$FORGED" serve --listen 127.0.0.1:0 --state-dir "$TMP/s5" "${STORE_ARGS[@]}" --allow-roots "$FIXTURES" \
		--allow-roots "$SHARED" --tokens-file "$TMP/tokens" --workers 0 >"$TMP/i5.log" 2>&1 &
	IPID[5]=$!
	PIDS="$PIDS ${IPID[5]}"
	mkdir -p "$TMP/elsewhere"
	"$FORGED" serve --listen 127.0.0.1:0 --state-dir "$TMP/s4" "${STORE_ARGS[@]}" --allow-roots "$FIXTURES" \
		--allow-roots "$TMP/elsewhere" --tokens-file "$TMP/tokens" --workers 1 >"$TMP/i4.log" 2>&1 &
	IPID[4]=$!
	PIDS="$PIDS ${IPID[4]}"
	for k in $(seq 1 200); do
		PORT[5]=$(sed -n 's/.* listening on [^ ]* port \([0-9][0-9]*\), state .*/\1/p' "$TMP/i5.log")
		[ -n "${PORT[5]}" ] && grep -q "listening on" "$TMP/i4.log" && break
		sleep 0.05
	done
	api 5 POST /v1/jobs -H "Content-Type: application/json" \
		--data-binary "{\"kind\": \"forge\", \"source\": \"qwen35_hf\", \"out\": \"$SHARED/out/refused\"}"
	check "a job with out on the shared folder is accepted by an instance that has it" [ "$CODE" = 202 ]
	RJOB=$(jb .id)
	for k in $(seq 1 200); do
		[ "$(q "SELECT state FROM jobs WHERE id = $RJOB")" = failed ] && break
		sleep 0.05
	done
	INST4=$(sed -n 's/.*, instance \([^,]*\), store .*/\1/p' "$TMP/i4.log")
	err=$(q "SELECT error FROM jobs WHERE id = $RJOB")
	check "the instance without the shared folder in its roots refuses the job, saying so ($err)" \
		grep -q "instance $INST4 cannot write out '$SHARED/out/refused'" <<<"$err"
	check "the refused job left nothing at its out" [ ! -e "$SHARED/out/refused" ]
fi

WALL=$(awk -v a="$T0" -v b="$T_END" 'BEGIN { printf "%.1f", b - a }')
echo "farm figures ($STORE): $JOBS jobs through $N instance(s) with 2 workers each, $RESUBMITS resubmissions" \
	"and $RETRIES retries of unanswered submissions, $KILLS SIGKILL mid-job (holding $HELD running job(s))," \
	"$RESTARTED graceful restart(s), take-over latency ${TAKEOVER:-?} s" \
	"(lease $LEASE s), $ATTEMPTS take-over attempt(s) in all, wall ${WALL} s," \
	"$(awk -v n="$JOBS" -v w="$WALL" 'BEGIN { printf "%.1f", n / w }') jobs/s"
finish
