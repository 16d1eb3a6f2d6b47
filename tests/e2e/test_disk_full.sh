#!/usr/bin/env bash
# A forge onto a full disk is forged's own trouble, not the request's: exit 3
# ("disk full"), the message names the real folder and the file whose write
# failed (never /proc/self/fd/N), and nothing is left at the destination:
# no artifact, no temporary folder.  The same forge onto a folder that cannot
# be written for another reason (a read-only mount) is the output's fault:
# exit 2.  A roomy file system takes the same forge (exit 0), so the failures
# come from the space, not the setup.  The file systems are small tmpfs
# mounts in a private mount namespace: the part needs root and unshare(1);
# without them it is skipped, saying why (not counted).
set -u
. "$(dirname "$0")/lib.sh"
FORGED=$(cd "$(dirname "$FORGED")" && pwd)/$(basename "$FORGED")
FIXTURES=$(cd "$FIXTURES" && pwd)

skip=""
if [ "$(id -u)" != 0 ]; then skip="not root"
elif ! command -v unshare >/dev/null 2>&1; then skip="unshare is not installed"
elif ! unshare -m --propagation private true 2>/dev/null; then skip="unshare -m is not permitted here"
fi
if [ -n "$skip" ]; then
	echo "disk full: skipped ($skip; not counted)"
	finish
	exit
fi

cp -r "$FIXTURES/qwen35_hf" "$TMP/src"
chmod 0644 "$TMP/src"/*
src_bytes=$(du -sb "$TMP/src" | cut -f1)

# In the namespace: three mounts, one forge into each; exit codes and
# listings are written out for the checks below.
cat >"$TMP/mounted.sh" <<'EOF'
set -u
T=$1 FORGED=$2 SRC=$3
for m in full ro roomy; do mkdir -p "$T/$m"; done
# 128 KiB: the folder and the small files fit, the shards (about 280 KiB each) do not.
mount -t tmpfs -o size=128k forged-full "$T/full" || { echo "mount: tmpfs refused" >"$T/skip"; exit 0; }
mount -t tmpfs -o size=8m,ro forged-ro "$T/ro" || { echo "mount: read-only tmpfs refused" >"$T/skip"; exit 0; }
mount -t tmpfs -o size=8m forged-roomy "$T/roomy" || { echo "mount: tmpfs refused" >"$T/skip"; exit 0; }
for m in full ro roomy; do
	rc=0; "$FORGED" forge "$SRC" --out "$T/$m/art" >/dev/null 2>"$T/$m.err" || rc=$?
	echo "$rc" >"$T/$m.rc"
	ls -A "$T/$m" >"$T/$m.ls"
done
# A second forge once the space is back: nothing the failed one left is in its way.
mount -o remount,size=8m "$T/full" && { rc=0; "$FORGED" forge "$SRC" --out "$T/full/art" >/dev/null \
	2>"$T/again.err" || rc=$?; echo "$rc" >"$T/again.rc"; }
EOF
mkdir -p "$TMP/x"
unshare -m --propagation private bash "$TMP/mounted.sh" "$TMP/x" "$FORGED" "$TMP/src" >"$TMP/x/out" 2>&1
if [ -s "$TMP/x/skip" ]; then
	echo "disk full: skipped ($(cat "$TMP/x/skip"); not counted)"
	finish
	exit
fi
X=$TMP/x
lacks() { ! grep -q "$1" "$2"; }
err=$(head -c 400 "$X/full.err")
check "the source ($src_bytes bytes) does not fit in 128 KiB" [ "$src_bytes" -gt 131072 ]
check "a forge onto the full disk: exit 3 ($(cat "$X/full.rc"): $err)" [ "$(cat "$X/full.rc")" = 3 ]
check "its message says the disk is full" grep -q "No space left on device" "$X/full.err"
check "it names the real folder ($X/full)" grep -q "$X/full/" "$X/full.err"
check "not the folder's /proc/self/fd link" lacks "/proc/self/fd" "$X/full.err"
check "nothing is left on the full disk (listing: $(tr '\n' ' ' <"$X/full.ls"))" [ ! -s "$X/full.ls" ]
check "a forge onto a read-only mount: exit 2 ($(cat "$X/ro.rc"): $(head -c 300 "$X/ro.err"))" \
	[ "$(cat "$X/ro.rc")" = 2 ]
check "its message says the file system is read-only" grep -q "Read-only file system" "$X/ro.err"
check "the same forge onto a roomy tmpfs: exit 0 ($(cat "$X/roomy.rc"): $(head -c 300 "$X/roomy.err"))" \
	[ "$(cat "$X/roomy.rc")" = 0 ]
check "once the space is back the forge goes through: exit 0 ($(cat "$X/again.rc" 2>/dev/null): $(head -c 300 \
	"$X/again.err" 2>/dev/null))" [ "$(cat "$X/again.rc" 2>/dev/null)" = 0 ]
finish
