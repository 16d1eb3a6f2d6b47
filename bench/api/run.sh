#!/usr/bin/env bash
# bench/api/run.sh: the API under load (issue 5's "Performance and load").
#
# Seeds a state folder with 100,000 artifacts and their verdicts once
# (bench/api/seed.py through the real server; kept in BENCH_DIR/api/seed-N
# and reused), copies it into this run's own folder (mktemp: concurrent or
# repeated runs never share a state or a log file), starts the real
# `forged serve` on 127.0.0.1 with an ephemeral port, logging to that
# folder's server.log, and waits for its "listening on ... port N, state"
# line (while checking that the server is still alive), then for /readyz.
# wrk (Debian package `wrk`, installed here when missing) then runs for
# DURATION seconds with CONNECTIONS connections, ROUNDS rounds interleaving
#   GET  /v1/fleet/health                    forged
#   GET  the same JSON as a static file      nginx (the reference: the HTTP
#                                            floor of this machine, same bytes,
#                                            same wrk, same run)
#   POST /v1/artifacts/{id}/verifications    forged (post_verification.lua: the
#                                            control rows, ids spread over the
#                                            catalog; no reference)
# and finally fleet health again after the writes, against nginx once more.
# Per run: requests/s, p50/p99 latency (wrk --latency), non-2xx responses,
# socket errors, and the server's CPU time (utime + stime from /proc of
# forged serve, or of nginx's master and workers) over the run.  In the
# results, wall is the time per request at saturation (1e6 / requests/s, in
# us) and cpu the server's CPU per request (us); wrk shares the 2 cores.
# RSS (VmRSS) at start, after a WARMUP s warm-up of each, before and after
# each run.  Connections the server closed at accept for its connection
# limits (wrk's 64 all come from 127.0.0.1, and forged serve allows
# FG_API_PER_IP_LIMIT_DEFAULT per address) are counted from server.log, noted
# and recorded (connections_refused_at_limit; socket_errors per run).
# Targets (reported, not asserted): health p99 < 50 ms, >= 5,000 GET/s;
# POST verifications p99 < 50 ms and >= 4,000/s at 64 connections.
#
#
# STORE=postgres: the same with the server on a PostgreSQL store (a
# throwaway cluster, tests/pg_cluster.sh, on a Unix socket with fsync on,
# unless FORGED_TEST_PG names one): the seed's catalog is copied into a
# fresh database (bench/api/seed_pg.py, after forged's own migrations made
# the schema), the results go to api_pg.json.  The cluster shares the 2
# cores with forged and wrk, and its CPU is not in the server's figure.
#
#   bash bench/api/run.sh                       # 3 rounds of 10 s, 64 connections
#   DURATION=30 ROUNDS=1 CONNECTIONS=32 bash bench/api/run.sh
#   STORE=postgres bash bench/api/run.sh
#   BENCH_QUICK=1: 1,000 artifacts, 1 round of 1 s runs; KEEP_RUN=1 keeps the run folder
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
FORGED=${FORGED:-build/forged}
FIXTURES=${FIXTURES:-build/fixtures}
DURATION=${DURATION:-$(quick 10 1)}
ROUNDS=${ROUNDS:-$(quick 3 1)}
WARMUP=${WARMUP:-$(quick 5 1)}
CONNECTIONS=${CONNECTIONS:-64}
THREADS=${THREADS:-2}
ARTIFACTS=${ARTIFACTS:-$(quick 100000 1000)}
STORE=${STORE:-sqlite}
case $STORE in sqlite | postgres) ;; *) echo "bench/api: STORE must be sqlite or postgres"; exit 2 ;; esac
OUT=$BENCH_DIR/api
SEED=$OUT/seed-$ARTIFACTS
TOKEN=bench-api-seed-token # seed.py's write token, in seed.tokens

if ! command -v wrk >/dev/null 2>&1; then
	echo "installing wrk"
	SUDO=""
	[ "$(id -u)" = 0 ] || SUDO=sudo
	$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends wrk
fi
make -s "$FORGED" "$FIXTURES/manifest.json"
mkdir -p "$OUT"
if [ ! -f "$SEED/state/forged.db" ]; then
	# Seeded aside and renamed into place, so a half-seeded folder is never reused.
	tmp_seed=$(mktemp -d "$OUT/seed-$ARTIFACTS.tmp.XXXXXX")
	echo "seeding $ARTIFACTS artifacts into $SEED/state"
	"$BENCH_PYTHON" bench/api/seed.py "$FORGED" "$FIXTURES" "$tmp_seed/state" --artifacts "$ARTIFACTS" |
		tee "$tmp_seed/seed.json"
	rm -rf "$SEED"
	mv -T "$tmp_seed" "$SEED"
fi

RUN=$(cd "$(mktemp -d "$OUT/run.XXXXXX")" && pwd) # absolute: nginx -p needs it
LOG=$RUN/server.log
PID=""
PG_STARTED=0
PG_DB=""
STORE_ARGS=()
if [ "$STORE" = postgres ]; then
	mkdir -p "$RUN/state"
	cp "$SEED/state/seed.tokens" "$RUN/state/"
else
	cp -a "$SEED/state" "$RUN/state"
fi
stop_server() {
	[ -n "$PID" ] || return 0
	kill -TERM "$PID" 2>/dev/null || true
	for _ in $(seq 100); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$PID" 2>/dev/null || true
	wait "$PID" 2>/dev/null || true
	PID=""
}
on_exit() {
	local rc=$?
	stop_server
	[ -n "$PG_DB" ] && psql -q -X "$FORGED_TEST_PG" -c "DROP DATABASE IF EXISTS \"$PG_DB\" WITH (FORCE)" >/dev/null 2>&1
	[ "$PG_STARTED" = 1 ] && pg_cluster_stop
	if [ "$rc" != 0 ] || [ "${KEEP_RUN:-0}" = 1 ]; then
		echo "bench/api: run folder kept: $RUN"
	else
		rm -rf "$RUN"
	fi
}
trap on_exit EXIT
# shellcheck source=tests/e2e/nginx_lib.sh
. tests/e2e/nginx_lib.sh

if [ "$STORE" = postgres ]; then
	# shellcheck source=tests/pg_cluster.sh
	. tests/pg_cluster.sh
	if [ -z "${FORGED_TEST_PG:-}" ]; then
		# Its own folder under /tmp: the cluster runs as nobody under root, who cannot enter $RUN (0700).
		pg_cluster_start "$(mktemp -d /tmp/forged-bench-pg.XXXXXX)" ||
			{ echo "bench/api: no PostgreSQL: $PG_SKIP$PG_FAIL"; exit 1; }
		PG_STARTED=1
	fi
	PG_DB=bench_api_$$
	PG_URL=$(pg_createdb "$PG_DB") || { echo "bench/api: cannot create database $PG_DB"; exit 1; }
	echo "copying the seed into PostgreSQL ($PG_URL)"
	"$BENCH_PYTHON" bench/api/seed_pg.py "$FORGED" "$SEED/state/forged.db" "$PG_URL" | tee "$RUN/seed_pg.json"
	STORE_ARGS=(--store "$PG_URL")
fi
# CONNECTIONS from one address: past the default 32 per address, raise it (a forged
# older than per_ip_connections has its own compiled-in limit).
SERVE_ARGS=()
if [ "$CONNECTIONS" -gt 32 ] && "$FORGED" serve --help 2>&1 | grep -q -- --per-ip-connections; then
	# Twice CONNECTIONS: a connection wrk reopens may arrive before the server has seen the old one close.
	SERVE_ARGS=(--per-ip-connections "$((2 * CONNECTIONS > 256 ? 256 : 2 * CONNECTIONS))")
fi
# HTTP_THREADS: the handler pool (--http-threads); unset or "default", forged's own
# default (16). A verification post does not hold its thread while its write waits for
# the group commit (the connection is suspended), so 64 connections need no 64 threads.
HTTP_THREADS=${HTTP_THREADS:-default}
if [ "$HTTP_THREADS" != default ]; then
	SERVE_ARGS+=(--http-threads "$HTTP_THREADS")
fi

"$FORGED" serve --listen 127.0.0.1:0 --state-dir "$RUN/state" --tokens-file "$RUN/state/seed.tokens" \
	"${STORE_ARGS[@]}" "${SERVE_ARGS[@]}" --workers 1 >"$LOG" 2>&1 &
PID=$!
# The port is in the "listening on ADDR port N, state ..." line: match it
# whole (the comma and "state" after the digits), so a line still being
# written is never taken for a port.
PORT=""
for _ in $(seq 600); do
	PORT=$(sed -n 's/.* listening on [^ ]* port \([0-9][0-9]*\), state .*/\1/p' "$LOG" | head -n 1)
	[ -n "$PORT" ] && break
	kill -0 "$PID" 2>/dev/null || break
	sleep 0.05
done
[ -n "$PORT" ] || { echo "forged serve did not start (log $LOG):"; cat "$LOG"; exit 1; }
BASE=http://127.0.0.1:$PORT
for _ in $(seq 100); do
	[ "$(curl -s -o /dev/null -w '%{http_code}' "$BASE/readyz")" = 200 ] && break
	kill -0 "$PID" 2>/dev/null || { echo "forged serve exited:"; cat "$LOG"; exit 1; }
	sleep 0.1
done

# The reference: nginx serving the bytes of fleet health as a static file.
mkdir -p "$RUN/hub/bench/api"
curl -sf -H "Authorization: Bearer $TOKEN" "$BASE/v1/fleet/health" >"$RUN/hub/bench/api/fleet_health.json"
nginx_start "$RUN/hub" "$RUN/nginx"
STATIC=$NGINX_URL/bench/api/resolve/main/fleet_health.json
health_bytes=$(stat -c %s "$RUN/hub/bench/api/fleet_health.json")
[ "$(curl -s "$STATIC" | wc -c)" = "$health_bytes" ] || { echo "nginx does not serve the copy"; exit 1; }

rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$PID/status"; }
TCK=$(getconf CLK_TCK)
# cpu_ticks PID...: utime + stime of these processes, in clock ticks
cpu_ticks() { for p in "$@"; do cut -d' ' -f14,15 "/proc/$p/stat"; done | awk '{ s += $1 + $2 } END { print s + 0 }'; }
server_pids() { if [ "$1" = forged ]; then echo "$PID"; else echo "$NGINX_PID" $(pgrep -P "$NGINX_PID"); fi; }
# to_ms VALUE: wrk's "1.23ms" / "456.00us" / "1.20s" in milliseconds.
to_ms() {
	awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n += 0;
		else if (v ~ /m$/) n *= 60000; else if (v ~ /s$/) n *= 1000; printf "%.3f", n }'
}
SAMPLES=$RUN/samples.txt
: >"$SAMPLES"
# run CASE ROLE SERVER ARGS...: one wrk run against SERVER (forged or nginx); prints
# its figures and appends them to $SAMPLES
run() {
	local cas=$1 role=$2 server=$3 txt rps p50 p99 req non2xx sock before after t0 t1 cpu_us
	shift 3
	txt=$RUN/$cas.$role.$(date +%s%N).txt
	# shellcheck disable=SC2046
	t0=$(cpu_ticks $(server_pids "$server"))
	before=$(rss_kb)
	wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency "$@" >"$txt" 2>&1
	after=$(rss_kb)
	# shellcheck disable=SC2046
	t1=$(cpu_ticks $(server_pids "$server"))
	rps=$(sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' "$txt")
	p50=$(to_ms "$(awk '$1 == "50%" { print $2 }' "$txt")")
	p99=$(to_ms "$(awk '$1 == "99%" { print $2 }' "$txt")")
	req=$(sed -n 's/^ *\([0-9]*\) requests in .*/\1/p' "$txt")
	non2xx=$(sed -n 's/^ *Non-2xx or 3xx responses: *\([0-9]*\).*/\1/p' "$txt")
	sock=$(sed -n 's/^ *Socket errors: *\(.*\)/\1/p' "$txt")
	[ -n "$rps" ] && [ -n "$req" ] && [ "$req" -gt 0 ] || { echo "wrk failed:"; cat "$txt"; exit 1; }
	cpu_us=$(awk -v t="$((t1 - t0))" -v k="$TCK" -v n="$req" 'BEGIN { printf "%.3f", t / k * 1e6 / n }')
	{
		echo "sample $cas $role wall $(awk -v r="$rps" 'BEGIN { printf "%.3f", 1e6 / r }')"
		echo "sample $cas $role cpu $cpu_us"
		echo "sample $cas $role rps $rps"
		echo "sample $cas $role p50_ms $p50"
		echo "sample $cas $role p99_ms $p99"
		echo "sample $cas $role non_2xx ${non2xx:-0}"
		# wrk counts a connection the server closed as a read error (and opens another)
		echo "sample $cas $role socket_errors $(echo "${sock:-}" | tr -cs '0-9' ' ' | awk '{ s = 0; for (i = 1; i <= NF; i++) s += $i; print s }')"
	} >>"$SAMPLES"
	printf '%-26s %-7s %10s req/s  p50 %8s ms  p99 %8s ms  cpu %7s us/req  non-2xx %s  socket errors: %s  forged RSS %s -> %s kB\n' \
		"$cas" "$server" "$rps" "$p50" "$p99" "$cpu_us" "${non2xx:-0}" "${sock:-none}" "$before" "$after"
}
verifications() {
	if [ "$STORE" = postgres ]; then
		psql -X -q -A -t "$PG_URL" -c "SELECT count(*) FROM verifications"
		return
	fi
	"$BENCH_PYTHON" -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM verifications").fetchone()[0])' "$RUN/state/forged.db"
}

NAME=api
[ "$STORE" = postgres ] && NAME=api_pg
bench_init "$NAME" store="$STORE" artifacts="$ARTIFACTS" duration_s="$DURATION" rounds="$ROUNDS" connections="$CONNECTIONS" \
	threads="$THREADS" http_threads="$HTTP_THREADS" health_json_bytes="$health_bytes"
rss_start=$(rss_kb)
echo "forged serve on $BASE (log $LOG): $(jq -r .artifacts "$SEED/seed.json" 2>/dev/null || echo "$ARTIFACTS") artifacts," \
	"RSS at start $rss_start kB; nginx reference on $STATIC ($health_bytes bytes);" \
	"wrk -t$THREADS -c$CONNECTIONS -d${DURATION}s on $(nproc) cores, $ROUNDS interleaved rounds;" \
	"handler threads: $HTTP_THREADS"
health_once=$(curl -s -o /dev/null -w '%{time_total}' -H "Authorization: Bearer $TOKEN" "$BASE/v1/fleet/health")
# Warm-up: CONNECTIONS connections open their pools and every handler thread
# its store connection, so the runs' before/after RSS compares steady states.
wrk -t"$THREADS" -c"$CONNECTIONS" -d"${WARMUP}s" -H "Authorization: Bearer $TOKEN" "$BASE/v1/fleet/health" >/dev/null 2>&1
wrk -t"$THREADS" -c"$CONNECTIONS" -d"${WARMUP}s" "$STATIC" >/dev/null 2>&1
FORGED_TOKEN=$TOKEN ARTIFACTS=$ARTIFACTS wrk -t"$THREADS" -c"$CONNECTIONS" -d"${WARMUP}s" \
	-s bench/api/post_verification.lua "$BASE" >/dev/null 2>&1
rss_warm=$(rss_kb)
echo "RSS after a ${WARMUP} s warm-up of each: $rss_warm kB"
v0=$(verifications)
posted=0
for r in $(seq "$ROUNDS"); do
	echo "== round $r of $ROUNDS"
	run fleet_health forged forged -H "Authorization: Bearer $TOKEN" "$BASE/v1/fleet/health"
	run fleet_health reference nginx "$STATIC"
	FORGED_TOKEN=$TOKEN ARTIFACTS=$ARTIFACTS run post_verifications forged forged \
		-s bench/api/post_verification.lua "$BASE"
	posted=$((posted + $(sed -n 's/^ *\([0-9]*\) requests in .*/\1/p' "$(ls -t "$RUN"/post_verifications.forged.*.txt | head -n 1)")))
done
v1=$(verifications)
echo "== after the writes"
run fleet_health_after_writes forged forged -H "Authorization: Bearer $TOKEN" "$BASE/v1/fleet/health"
run fleet_health_after_writes reference nginx "$STATIC"
cpu_total=$(awk -v t="$(cpu_ticks "$PID")" -v k="$TCK" 'BEGIN { printf "%.1f", t / k }')
# Connections libmicrohttpd closed at accept for a limit (total, or per client
# address: all of wrk's come from 127.0.0.1): each is a reconnect inside the
# figures above, so they are said and recorded.
refused=$(grep -c 'reached connection limit' "$LOG" || true)
rss_end=$(rss_kb)
stop_server
nginx_stop || true # its last kill -KILL fails once nginx is gone
{
	cat "$SAMPLES"
	for c in fleet_health fleet_health_after_writes post_verifications; do
		echo "unit $c us per request (wall: 1e6 / requests per s at $CONNECTIONS connections; cpu: server CPU / requests)"
		echo "name $c forged forged serve (--workers 1, $STORE), $( [ $c = post_verifications ] && echo 'POST /v1/artifacts/{id}/verifications' || echo 'GET /v1/fleet/health')"
	done
	echo "name fleet_health reference nginx, the same $health_bytes bytes as a static file"
	echo "name fleet_health_after_writes reference nginx, the same $health_bytes bytes as a static file"
	echo "extra post_verifications verifications_stored $((v1 - v0))"
	echo "extra post_verifications wrk_requests $posted"
	echo "extra fleet_health first_request_ms $(awk -v t="$health_once" 'BEGIN { printf "%.1f", t * 1000 }')"
	echo "extra fleet_health rss_start_kb $rss_start"
	echo "extra fleet_health rss_warm_kb $rss_warm"
	echo "extra fleet_health rss_end_kb $rss_end"
	echo "extra fleet_health server_cpu_total_s $cpu_total"
	echo "extra fleet_health connections_refused_at_limit $refused"
	echo "extra post_verifications connections_refused_at_limit $refused"
} | bl samples "$FRAG" >/dev/null 2>&1
echo "first (uncached) fleet health request: $(awk -v t="$health_once" 'BEGIN { printf "%.1f", t * 1000 }') ms;" \
	"verifications stored during the POST runs: $((v1 - v0)) (wrk counted $posted); server CPU ${cpu_total} s in all; RSS end $rss_end kB"
if [ "$refused" -gt 0 ]; then
	echo "NOTE: the server closed $refused connections at accept for its connection limit (server.log: 'reached connection" \
		"limit'); with $CONNECTIONS connections from one address the per-address limit applies, so these figures include" \
		"reconnects (wrk's socket errors) and are not those of $CONNECTIONS kept-alive connections"
fi
jq -r '.cases | to_entries[] | "\(.key): wall (us/req) forged best \(.value.forged.wall.best) median \(.value.forged.wall.median)" +
	(if .value.reference then ", nginx best \(.value.reference.wall.best); cpu (us/req) forged \(.value.forged.cpu.best), nginx \(.value.reference.cpu.best); ratio wall \(.value.ratios.wall_best), cpu \(.value.ratios.cpu_best)"
	 else "; cpu (us/req) best \(.value.forged.cpu.best)" end) +
	"; p99 median \(.value.forged.p99_ms.median) ms"' "$FRAG"
bench_ok
