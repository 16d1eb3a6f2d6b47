#!/usr/bin/env bash
# The systemd side of `forged serve` (design.md section 10), without systemd
# running: `make install` into a DESTDIR, the installed unit checked with
# `systemd-analyze verify` and `systemd-analyze security --offline` when
# systemd-analyze exists (otherwise reported as skipped and not counted),
# the installed example config accepted by the binary, and the sd_notify
# datagrams (READY=1, STATUS=, WATCHDOG=1, RELOADING=1, STOPPING=1) and
# journal priority prefixes, received by a stand-in for systemd.
set -u
. "$(dirname "$0")/lib.sh"
REPO=$(cd "$(dirname "$0")/../.." && pwd)
FORGED=$(cd "$(dirname "$FORGED")" && pwd)/$(basename "$FORGED")

PIDS=""
cleanup() {
	local p
	for p in $PIDS; do kill -KILL "$p" 2>/dev/null; done
	for p in $PIDS; do wait "$p" 2>/dev/null; done
	rm -rf "$TMP"
}
trap cleanup EXIT

# ---- make install into a DESTDIR ----
ROOT=$TMP/root
if make -s -C "$REPO" -o "$FORGED" install FORGED="$FORGED" DESTDIR="$ROOT" >"$TMP/install.log" 2>&1; then ok; else
	bad "make install: $(tail -n 5 "$TMP/install.log")"; fi
check "install: the binary" [ -x "$ROOT/usr/local/bin/forged" ]
check "install: the unit" [ -f "$ROOT/lib/systemd/system/forged.service" ]
check "install: the config" jq -e '.listen == "127.0.0.1:8470"' "$ROOT/etc/forged/config.json" >/dev/null
check "install: a tokens file with no token" [ "$(grep -cv '^#' "$ROOT/etc/forged/tokens")" = 0 ]
check "install: the unit runs the installed path" \
	grep -qx 'ExecStart=/usr/local/bin/forged serve --config /etc/forged/config.json' "$ROOT/lib/systemd/system/forged.service"
echo '{"listen": "127.0.0.1:1"}' >"$ROOT/etc/forged/config.json"
make -s -C "$REPO" -o "$FORGED" install FORGED="$FORGED" DESTDIR="$ROOT" >/dev/null 2>&1
check "install again: an edited config is kept" grep -q '127.0.0.1:1' "$ROOT/etc/forged/config.json"
make -s -C "$REPO" -o "$FORGED" install FORGED="$FORGED" DESTDIR="$TMP/opt" PREFIX=/opt/forged SYSCONFDIR=/etc/opt \
	>/dev/null 2>&1
check "install with PREFIX and SYSCONFDIR: the unit follows" \
	grep -qx 'ExecStart=/opt/forged/bin/forged serve --config /etc/opt/forged/config.json' "$TMP/opt/lib/systemd/system/forged.service"
check "install with SYSCONFDIR: the config names its tokens file there" \
	jq -e '.tokens_file == "/etc/opt/forged/tokens"' "$TMP/opt/etc/opt/forged/config.json" >/dev/null

# ---- systemd-analyze ----
unit=$TMP/forged.service
# The unit as installed, but running the staged binary, which exists here.
sed "s|^ExecStart=/usr/local/bin/forged|ExecStart=$ROOT/usr/local/bin/forged|" "$ROOT/lib/systemd/system/forged.service" >"$unit"
if command -v systemd-analyze >/dev/null 2>&1; then
	rc=0
	systemd-analyze verify "$unit" >"$TMP/verify.out" 2>&1 || rc=$?
	check "systemd-analyze verify: exit 0 and no warning ($(head -c 300 "$TMP/verify.out"))" [ "$rc" = 0 -a ! -s "$TMP/verify.out" ]
	# A control: the same check notices a broken directive.
	sed 's/^Type=notify$/Type=notifyy/' "$unit" >"$TMP/broken.service"
	systemd-analyze verify "$TMP/broken.service" >"$TMP/verify.out" 2>&1
	check "systemd-analyze verify: a bad Type= is reported" grep -q "Failed to parse service type" "$TMP/verify.out"
	if systemd-analyze security --help 2>/dev/null | grep -q -- --offline; then
		rc=0
		systemd-analyze security --offline=true --threshold=20 "$unit" >"$TMP/security.out" 2>&1 || rc=$?
		exposure=$(sed -n 's/.*Overall exposure level for forged.service: \([0-9.]*\).*/\1/p' "$TMP/security.out")
		echo "systemd-analyze security: exposure $exposure"
		check "systemd-analyze security: exposure $exposure <= 2.0" [ "$rc" = 0 -a -n "$exposure" ]
	else
		echo "systemd-analyze security --offline unsupported here: skipped (not counted)"
	fi
else
	echo "systemd-analyze not installed: unit verification skipped (not counted)"
fi
check "unit: Type=notify" grep -qx 'Type=notify' "$unit"
check "unit: WatchdogSec" grep -qx 'WatchdogSec=30' "$unit"
check "unit: StateDirectory" grep -qx 'StateDirectory=forged' "$unit"
check "unit: stop timeout above drain_seconds" \
	[ "$(sed -n 's/^TimeoutStopSec=//p' "$unit")" -gt "$(jq .drain_seconds "$REPO/systemd/config.example.json")" ]

# ---- the example config: every key is one the binary accepts ----
TOK=systemd-e2e
printf 'write ci %s\n' "$(printf %s "$TOK" | sha256sum | cut -d' ' -f1)" >"$TMP/tokens"
mkdir -p "$TMP/models"
check "the example config names every key of daemon/config.c" \
	[ "$(jq -r 'keys | sort | join(",")' "$REPO/systemd/config.example.json")" = \
	  "$(sed -n 's/^\t{ "\([a-z_]*\)", K_.*/\1/p' "$REPO/daemon/config.c" | sort | paste -sd, -)" ]

# start NAME ENV... -- ARGS...: forged serve with ENV, log in $TMP/NAME.log; sets SPID, BASE.
start() {
	local name=$1 i port=""
	shift
	local envs=()
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	env ${envs[@]+"${envs[@]}"} "$FORGED" serve --listen 127.0.0.1:0 "$@" >"$TMP/$name.log" 2>&1 &
	SPID=$!
	PIDS="$PIDS $SPID"
	for i in $(seq 1 300); do
		port=$(sed -n 's/.*listening on [^ ]* port \([0-9][0-9]*\),.*/\1/p' "$TMP/$name.log")
		[ -n "$port" ] && break
		kill -0 "$SPID" 2>/dev/null || break
		sleep 0.05
	done
	BASE=http://127.0.0.1:$port
	[ -n "$port" ]
}
# term PID: SIGTERM and wait (bounded); status in $RC.
term() {
	local i
	kill -TERM "$1" 2>/dev/null
	RC=999
	for i in $(seq 1 150); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
	kill -0 "$1" 2>/dev/null || { RC=0; wait "$1" || RC=$?; }
}

if start conf -- --config "$REPO/systemd/config.example.json" --state-dir "$TMP/s1" --artifacts-dir "$TMP/s1/artifacts" \
	--tokens-file "$TMP/tokens" --allow-roots "$TMP/models"; then ok; else bad "example config refused: $(tail -n 2 "$TMP/conf.log")"; fi
check "example config: workers from the file" grep -q ", 2 workers," "$TMP/conf.log"
term "$SPID"
check "example config: clean stop" [ "$RC" = 0 ]

# ---- sd_notify and the watchdog, with a stand-in for systemd ----
"$PYTHON" - "$TMP/notify.sock" "$TMP/notify.txt" <<'EOF' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(0.5)
end = time.time() + 120
with open(sys.argv[2], "a", buffering=1) as out:
    while time.time() < end:
        try:
            out.write(s.recv(4096).decode() + "\n")
        except socket.timeout:
            pass
EOF
LPID=$!
PIDS="$PIDS $LPID"
for i in $(seq 1 50); do [ -S "$TMP/notify.sock" ] && break; sleep 0.1; done
start notify NOTIFY_SOCKET="$TMP/notify.sock" WATCHDOG_USEC=1500000 -- --state-dir "$TMP/s2" \
	--tokens-file "$TMP/tokens" --allow-roots "$TMP/models" --workers 2 || bad "notify: server did not start"
NPID=$SPID
for i in $(seq 1 100); do [ "$(grep -c '^WATCHDOG=1$' "$TMP/notify.txt" 2>/dev/null)" -ge 3 ] && break; sleep 0.1; done
check "sd_notify: READY=1" grep -qx 'READY=1' "$TMP/notify.txt"
check "sd_notify: STATUS= with queue figures" grep -Eq '^STATUS=queued [0-9]+, running [0-9]+' "$TMP/notify.txt"
check "sd_notify: WATCHDOG=1 repeatedly within 10 s" [ "$(grep -c '^WATCHDOG=1$' "$TMP/notify.txt")" -ge 3 ]
kill -HUP "$NPID"
for i in $(seq 1 50); do grep -qx 'RELOADING=1' "$TMP/notify.txt" && break; sleep 0.1; done
check "sd_notify: SIGHUP sends RELOADING=1 then READY=1" \
	[ "$(grep -E '^(RELOADING|READY)=1$' "$TMP/notify.txt" | tail -n 2 | paste -sd, -)" = "RELOADING=1,READY=1" ]
term "$NPID"
check "sd_notify: STOPPING=1 on SIGTERM" grep -qx 'STOPPING=1' "$TMP/notify.txt"
check "sd_notify: clean stop" [ "$RC" = 0 ]
# WATCHDOG_PID naming another process: no watchdog pings.
: >"$TMP/notify.txt"
start notify2 NOTIFY_SOCKET="$TMP/notify.sock" WATCHDOG_USEC=600000 WATCHDOG_PID=1 -- --state-dir "$TMP/s3" \
	--tokens-file "$TMP/tokens" --allow-roots "$TMP/models" --workers 1 || bad "notify2: server did not start"
sleep 2
check "sd_notify: no WATCHDOG=1 when WATCHDOG_PID is another process" [ "$(grep -c '^WATCHDOG=1$' "$TMP/notify.txt")" = 0 ]
term "$SPID"
kill "$LPID" 2>/dev/null

# ---- journal: <N> priority prefixes when stderr is the journal stream ----
: >"$TMP/journal.log"
stream=$(stat -c '%d:%i' "$TMP/journal.log")
JOURNAL_STREAM=$stream "$FORGED" serve --listen 127.0.0.1:0 --state-dir "$TMP/s4" --allow-roots "$TMP/models" \
	--workers 1 2>>"$TMP/journal.log" &
JPID=$!
PIDS="$PIDS $JPID"
for i in $(seq 1 100); do grep -q 'listening on' "$TMP/journal.log" && break; sleep 0.05; done
term "$JPID"
check "journal: the warning has <4>" grep -q '^<4>no tokens_file' "$TMP/journal.log"
check "journal: the listening line has <5>" grep -q '^<5>listening on 127.0.0.1 port' "$TMP/journal.log"
check "journal: every line has a priority" [ "$(grep -cv '^<[0-7]>' "$TMP/journal.log")" = 0 ]
check "plain stderr: timestamps instead" grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z notice listening on' "$TMP/conf.log"
finish
