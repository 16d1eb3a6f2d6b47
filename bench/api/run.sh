#!/usr/bin/env bash
# bench/api/run.sh: the API under load (issue 5's "Performance and load").
#
# Seeds a state folder with 100,000 artifacts and their verdicts once
# (bench/api/seed.py; kept in build/bench/api/seed and reused), copies it,
# starts the real `forged serve` on 127.0.0.1 with an ephemeral port, and runs
# wrk (Debian package `wrk`, installed here when missing) for DURATION seconds
# with CONNECTIONS connections against
#   GET  /v1/fleet/health
#   POST /v1/artifacts/{id}/verifications   (post_verification.lua: the
#        control rows, ids spread over the catalog)
# Reports requests/s, p50/p99 latency (wrk --latency), non-2xx responses,
# socket errors, and the server's RSS (VmRSS) at start, after a 5 s warm-up
# of each, and before and after each run.
# Targets (reported, not asserted): health p99 < 50 ms, >= 5,000 GET/s,
# >= 1,000 POST/s.  Results also go to build/bench/api/results.json.
#
#   bash bench/api/run.sh                       # 30 s, 64 connections
#   DURATION=10 CONNECTIONS=32 bash bench/api/run.sh
set -eu
cd "$(dirname "$0")/../.."
FORGED=${FORGED:-build/forged}
FIXTURES=${FIXTURES:-build/fixtures}
PYTHON=${PYTHON:-python3}
DURATION=${DURATION:-30}
CONNECTIONS=${CONNECTIONS:-64}
THREADS=${THREADS:-2}
ARTIFACTS=${ARTIFACTS:-100000}
OUT=build/bench/api
SEED=$OUT/seed-$ARTIFACTS
RUN=$OUT/run

if ! command -v wrk >/dev/null 2>&1; then
	echo "installing wrk"
	SUDO=""
	[ "$(id -u)" = 0 ] || SUDO=sudo
	$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends wrk
fi
make -s "$FORGED" "$FIXTURES/manifest.json"
if [ ! -f "$SEED/state/forged.db" ]; then
	rm -rf "$SEED"
	mkdir -p "$SEED"
	echo "seeding $ARTIFACTS artifacts into $SEED/state"
	"$PYTHON" bench/api/seed.py "$FORGED" "$FIXTURES" "$SEED/state" --artifacts "$ARTIFACTS" | tee "$SEED/seed.json"
fi
rm -rf "$RUN"
mkdir -p "$RUN"
cp -a "$SEED/state" "$RUN/state"

TOKEN=bench-api-seed-token   # seed.py's write token, in seed.tokens
PID=""
trap '[ -n "$PID" ] && kill -KILL "$PID" 2>/dev/null; true' EXIT
"$FORGED" serve --listen 127.0.0.1:0 --state-dir "$RUN/state" --tokens-file "$RUN/state/seed.tokens" \
	--workers 1 >"$RUN/server.log" 2>&1 &
PID=$!
PORT=""
for _ in $(seq 1 300); do
	PORT=$(sed -n 's/.* listening on [^ ]* port \([0-9][0-9]*\),.*/\1/p' "$RUN/server.log")
	[ -n "$PORT" ] && break
	sleep 0.05
done
[ -n "$PORT" ] || { echo "forged serve did not start:"; cat "$RUN/server.log"; exit 1; }
BASE=http://127.0.0.1:$PORT
for _ in $(seq 1 100); do
	[ "$(curl -s -o /dev/null -w '%{http_code}' "$BASE/readyz")" = 200 ] && break
	sleep 0.1
done

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$PID/status"; }
cpu_s() { awk '{ printf "%.1f", ($14 + $15) / '"$(getconf CLK_TCK)"' }' "/proc/$PID/stat"; }
# to_ms VALUE: wrk's "1.23ms" / "456.00us" / "1.20s" in milliseconds.
to_ms() {
	awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n += 0;
		else if (v ~ /m$/) n *= 60000; else if (v ~ /s$/) n *= 1000; printf "%.3f", n }'
}
# run NAME ARGS...: wrk with --latency; prints and records the figures.
declare -A R
run() {
	local name=$1
	shift
	local before after
	curl -s -o /dev/null -H "Authorization: Bearer $TOKEN" "$BASE/v1/fleet/health"
	before=$(rss_kb)
	wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency "$@" >"$RUN/$name.txt" 2>&1
	after=$(rss_kb)
	R[$name.rps]=$(sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' "$RUN/$name.txt")
	R[$name.p50]=$(to_ms "$(awk '$1 == "50%" { print $2 }' "$RUN/$name.txt")")
	R[$name.p99]=$(to_ms "$(awk '$1 == "99%" { print $2 }' "$RUN/$name.txt")")
	R[$name.requests]=$(sed -n 's/^ *\([0-9]*\) requests in .*/\1/p' "$RUN/$name.txt")
	R[$name.non2xx]=$(sed -n 's/^ *Non-2xx or 3xx responses: *\([0-9]*\).*/\1/p' "$RUN/$name.txt")
	R[$name.non2xx]=${R[$name.non2xx]:-0}
	R[$name.socket_errors]=$(sed -n 's/^ *Socket errors: *\(.*\)/\1/p' "$RUN/$name.txt")
	R[$name.socket_errors]=${R[$name.socket_errors]:-none}
	R[$name.rss_before_kb]=$before
	R[$name.rss_after_kb]=$after
	printf '%-22s %10s req/s  p50 %8s ms  p99 %8s ms  non-2xx %s  socket errors: %s  RSS %s -> %s kB\n' \
		"$name" "${R[$name.rps]}" "${R[$name.p50]}" "${R[$name.p99]}" "${R[$name.non2xx]}" \
		"${R[$name.socket_errors]}" "$before" "$after"
}

rss_start=$(rss_kb)
echo "forged serve on $BASE: $(jq -r .artifacts "$SEED/seed.json" 2>/dev/null || echo "$ARTIFACTS") artifacts," \
	"RSS at start $rss_start kB; wrk -t$THREADS -c$CONNECTIONS -d${DURATION}s on $(nproc) cores"
health_once=$(curl -s -o /dev/null -w '%{time_total}' -H "Authorization: Bearer $TOKEN" "$BASE/v1/fleet/health")
# Warm-up: CONNECTIONS connections open their pools and every handler thread
# its store connection, so the runs' before/after RSS compares steady states.
wrk -t"$THREADS" -c"$CONNECTIONS" -d5s -H "Authorization: Bearer $TOKEN" "$BASE/v1/fleet/health" >/dev/null 2>&1
FORGED_TOKEN=$TOKEN ARTIFACTS=$ARTIFACTS wrk -t"$THREADS" -c"$CONNECTIONS" -d5s -s bench/api/post_verification.lua \
	"$BASE" >/dev/null 2>&1
rss_warm=$(rss_kb)
echo "RSS after a 5 s warm-up of each: $rss_warm kB"
run fleet_health -H "Authorization: Bearer $TOKEN" "$BASE/v1/fleet/health"
verifications_before=$("$PYTHON" -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM verifications").fetchone()[0])' "$RUN/state/forged.db")
FORGED_TOKEN=$TOKEN ARTIFACTS=$ARTIFACTS run post_verifications -s bench/api/post_verification.lua "$BASE"
verifications_after=$("$PYTHON" -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM verifications").fetchone()[0])' "$RUN/state/forged.db")
run fleet_health_after_writes -H "Authorization: Bearer $TOKEN" "$BASE/v1/fleet/health"
cpu=$(cpu_s)
kill -TERM "$PID"
rc=0
wait "$PID" || rc=$?
PID=""
echo "first (uncached) fleet health request: $(awk -v t="$health_once" 'BEGIN { printf "%.1f", t * 1000 }') ms;" \
	"verifications stored during the POST run: $((verifications_after - verifications_before))" \
	"(wrk counted ${R[post_verifications.requests]}); server CPU ${cpu} s; exit $rc on SIGTERM"
{
	printf '{"duration_s": %s, "connections": %s, "threads": %s, "artifacts": %s, "rss_start_kb": %s, "rss_warm_kb": %s,' \
		"$DURATION" "$CONNECTIONS" "$THREADS" "$ARTIFACTS" "$rss_start" "$rss_warm"
	printf ' "first_health_ms": %s, "verifications_stored": %s, "server_cpu_s": %s, "exit": %s' \
		"$(awk -v t="$health_once" 'BEGIN { printf "%.1f", t * 1000 }')" \
		"$((verifications_after - verifications_before))" "$cpu" "$rc"
	for name in fleet_health post_verifications fleet_health_after_writes; do
		printf ', "%s": {"rps": %s, "p50_ms": %s, "p99_ms": %s, "requests": %s, "non_2xx": %s, "socket_errors": "%s", "rss_before_kb": %s, "rss_after_kb": %s}' \
			"$name" "${R[$name.rps]}" "${R[$name.p50]}" "${R[$name.p99]}" "${R[$name.requests]}" \
			"${R[$name.non2xx]}" "${R[$name.socket_errors]}" "${R[$name.rss_before_kb]}" "${R[$name.rss_after_kb]}"
	done
	printf '}\n'
} >"$OUT/results.json"
echo "results: $OUT/results.json"
