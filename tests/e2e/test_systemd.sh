#!/usr/bin/env bash
# The systemd side of `forged serve` (docs/interfaces.md section 1), without systemd
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
check "install: the sysusers.d file declares the forged user" \
	grep -q '^u forged - "forged service" /var/lib/forged$' "$ROOT/usr/lib/sysusers.d/forged.conf"
check "install: the environment file's example is in the docs" \
	grep -q '^#HF_TOKEN=' "$ROOT/usr/local/share/doc/forged/environment.example"
check "install: no environment file is made (it would hold a token)" [ ! -e "$ROOT/etc/forged/environment" ]
make -s -C "$REPO" -o "$FORGED" install FORGED="$FORGED" DESTDIR="$TMP/svc" SERVICE_USER=svc >/dev/null 2>&1
check "install with SERVICE_USER=svc: the unit and sysusers.d follow" \
	[ "$(grep -E '^(User|Group)=' "$TMP/svc/lib/systemd/system/forged.service" | paste -sd, -):$(cut -d' ' -f2 "$TMP/svc/usr/lib/sysusers.d/forged.conf" | tail -n 1)" = "User=svc,Group=svc:svc" ]
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
		check "systemd-analyze security: exposure $exposure <= 1.5 (1.1 with DynamicUser= before)" \
			awk -v e="$exposure" -v rc="$rc" 'BEGIN { exit !(rc == 0 && e != "" && e + 0 <= 1.5) }'
	else
		echo "systemd-analyze security --offline unsupported here: skipped (not counted)"
	fi
else
	echo "systemd-analyze not installed: unit verification skipped (not counted)"
fi
check "unit: Type=notify" grep -qx 'Type=notify' "$unit"
check "unit: WatchdogSec" grep -qx 'WatchdogSec=30' "$unit"
check "unit: StateDirectory" grep -qx 'StateDirectory=forged' "$unit"
# Artifacts readable by runtime hosts: a static user and group forged, the state
# folder 0750 and files 0640 (UMask=0027); the hub's variables from an optional file.
check "unit: User=forged" grep -qx 'User=forged' "$unit"
check "unit: Group=forged" grep -qx 'Group=forged' "$unit"
check "unit: no DynamicUser (its state folder is unreadable by other users)" eval '! grep -q "^DynamicUser" "$unit"'
check "unit: StateDirectoryMode=0750" grep -qx 'StateDirectoryMode=0750' "$unit"
check "unit: UMask=0027" grep -qx 'UMask=0027' "$unit"
check "unit: EnvironmentFile=-/etc/forged/environment" grep -qx 'EnvironmentFile=-/etc/forged/environment' "$unit"
check "unit: no stale comment (dynamic user, URL sources to come)" \
	eval '! grep -Eiq "dynamic user|once they land" "$unit"'
check "unit: stop timeout above drain_seconds" \
	[ "$(sed -n 's/^TimeoutStopSec=//p' "$unit")" -gt "$(jq .drain_seconds "$REPO/systemd/config.example.json")" ]

# ---- the example config: every key is one the binary accepts ----
TOK=systemd-e2e
printf 'write ci %s\n' "$(printf %s "$TOK" | sha256sum | cut -d' ' -f1)" >"$TMP/tokens"
mkdir -p "$TMP/models"
check "the example config names every key of daemon/config.c" \
	[ "$(jq -r 'keys | sort | join(",")' "$REPO/systemd/config.example.json")" = \
	  "$(sed -n 's/^\t{ "\([a-z_]*\)", K_.*/\1/p' "$REPO/daemon/config.c" | sort | paste -sd, -)" ]

# (start_server counts a server that does not start as the failed check)
if start_server conf --config "$REPO/systemd/config.example.json" --state-dir "$TMP/s1" --artifacts-dir "$TMP/s1/artifacts" \
	--tokens-file "$TMP/tokens" --allow-roots "$TMP/models"; then ok; fi
check "example config: workers from the file" grep -q ", 2 workers," "$TMP/conf.log"
stop_server "$SPID" 15
check "example config: clean stop" [ "$STOP_RC" = 0 ]

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
kill_on_exit "$LPID"
for i in $(seq 1 50); do [ -S "$TMP/notify.sock" ] && break; sleep 0.1; done
SERVER_ENV="NOTIFY_SOCKET=$TMP/notify.sock WATCHDOG_USEC=1500000" start_server notify --state-dir "$TMP/s2" \
	--tokens-file "$TMP/tokens" --allow-roots "$TMP/models" --workers 2
NPID=$SPID
for i in $(seq 1 100); do [ "$(grep -c '^WATCHDOG=1$' "$TMP/notify.txt" 2>/dev/null)" -ge 3 ] && break; sleep 0.1; done
check "sd_notify: READY=1" grep -qx 'READY=1' "$TMP/notify.txt"
check "sd_notify: STATUS= with queue figures" grep -Eq '^STATUS=queued [0-9]+, running [0-9]+' "$TMP/notify.txt"
check "sd_notify: WATCHDOG=1 repeatedly within 10 s" [ "$(grep -c '^WATCHDOG=1$' "$TMP/notify.txt")" -ge 3 ]
kill -HUP "$NPID"
reload_seen() { [ "$(grep -E '^(RELOADING|READY)=1$' "$TMP/notify.txt" | tail -n 2 | paste -sd, -)" = "RELOADING=1,READY=1" ]; }
for i in $(seq 1 50); do reload_seen && break; sleep 0.1; done  # READY=1 follows RELOADING=1: wait for both
check "sd_notify: SIGHUP sends RELOADING=1 then READY=1" reload_seen
stop_server "$NPID" 15
check "sd_notify: STOPPING=1 on SIGTERM" grep -qx 'STOPPING=1' "$TMP/notify.txt"
check "sd_notify: clean stop" [ "$STOP_RC" = 0 ]
# WATCHDOG_PID naming another process: no watchdog pings.
: >"$TMP/notify.txt"
SERVER_ENV="NOTIFY_SOCKET=$TMP/notify.sock WATCHDOG_USEC=600000 WATCHDOG_PID=1" start_server notify2 \
	--state-dir "$TMP/s3" --tokens-file "$TMP/tokens" --allow-roots "$TMP/models" --workers 1
sleep 2
check "sd_notify: no WATCHDOG=1 when WATCHDOG_PID is another process" [ "$(grep -c '^WATCHDOG=1$' "$TMP/notify.txt")" = 0 ]
stop_server "$SPID" 15
kill "$LPID" 2>/dev/null

# ---- artifacts under the unit's UMask=0027: group-readable, the database private ----
mkdir -p "$TMP/m5"
cp -r "$FIXTURES/qwen35_hf" "$TMP/m5/"
chmod 0644 "$TMP/m5/qwen35_hf"/*
# the server inherits the unit's umask (the shell's is put back once it is up)
umask_was=$(umask)
umask 0027
start_server umask --state-dir "$TMP/s5" --allow-roots "$TMP/m5" --workers 1
umask "$umask_was"
UPID=$SPID
job=$(curl -s -H 'Content-Type: application/json' -d '{"kind": "forge", "source": "qwen35_hf"}' \
	"$BASE/v1/jobs" | jq -r .id)
state=
for i in $(seq 1 200); do
	state=$(curl -s "$BASE/v1/jobs/$job" | jq -r .state)
	case $state in succeeded|failed|cancelled) break ;; esac
	sleep 0.1
done
check "umask 0027: the forge job succeeded ($state)" [ "$state" = succeeded ]
art=$TMP/s5/artifacts/$job
check "umask 0027: artifacts_dir is 0750 ($(stat -c %a "$TMP/s5/artifacts"))" [ "$(stat -c %a "$TMP/s5/artifacts")" = 750 ]
check "umask 0027: the artifact's folder is 0750 ($(stat -c %a "$art"))" [ "$(stat -c %a "$art")" = 750 ]
check "umask 0027: a written file is 0640 ($(stat -c %a "$art/mtp.safetensors"))" [ "$(stat -c %a "$art/mtp.safetensors")" = 640 ]
check "umask 0027: forged.json is 0640" [ "$(stat -c %a "$art/forged.json")" = 640 ]
check "umask 0027: the hard-linked shard is read-only for all ($(stat -c %a "$art/model-00001-of-00002.safetensors"))" \
	[ "$(stat -c %a "$art/model-00001-of-00002.safetensors")" = 444 ]
check "umask 0027: forged.db stays 0600 ($(stat -c %a "$TMP/s5/forged.db"))" [ "$(stat -c %a "$TMP/s5/forged.db")" = 600 ]
stop_server "$UPID" 15

# ---- journal: <N> priority prefixes when stderr is the journal stream ----
: >"$TMP/journal.log"
stream=$(stat -c '%d:%i' "$TMP/journal.log")
# start_server writes the log over this same file (same inode), so stderr is the stream.
SERVER_ENV="JOURNAL_STREAM=$stream" start_server journal --state-dir "$TMP/s4" --allow-roots "$TMP/models" --workers 1
stop_server "$SPID" 15
check "journal: the warning has <4>" grep -q '^<4>no tokens_file' "$TMP/journal.log"
check "journal: the listening line has <5>" grep -q '^<5>listening on 127.0.0.1 port' "$TMP/journal.log"
check "journal: every line has a priority" [ "$(grep -cv '^<[0-7]>' "$TMP/journal.log")" = 0 ]
check "plain stderr: timestamps instead" grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z notice listening on' "$TMP/conf.log"
finish
