#!/usr/bin/env bash
# The files an artifact carries unchanged from the backbone share no mutable
# inode with it: a hard-linked shard (or tokenizer file) is made read-only,
# the source's name included (one inode); where link(2) cannot be used
# (another mount: here a bind mount of the same tmpfs, in a private mount
# namespace) the copy is made with copy_file_range(2) (strace counts the
# calls when it is installed) and is read-only too, while the source keeps
# its mode.  The mount part needs root and unshare(1); without them it is
# skipped, saying why (not counted).
set -u
. "$(dirname "$0")/lib.sh"
FORGED=$(cd "$(dirname "$FORGED")" && pwd)/$(basename "$FORGED")
FIXTURES=$(cd "$FIXTURES" && pwd)
SHARD=model-00001-of-00002.safetensors   # holds no head tensor: carried as is
HEADSHARD=model-00002-of-00002.safetensors
no_w() { [ $(( 0$(stat -c %a "$1") & 0222 )) -eq 0 ]; }

# ---- same file system: hard links, made read-only ----
cp -r "$FIXTURES/qwen35_hf" "$TMP/src"
printf '{"model": "test"}\n' >"$TMP/src/tokenizer.json"
chmod 0644 "$TMP/src"/*
rc=0; "$FORGED" forge "$TMP/src" --out "$TMP/art" >/dev/null 2>"$TMP/err" || rc=$?
check "forge: exit 0 ($(head -c 200 "$TMP/err"))" [ "$rc" -eq 0 ]
check "the unchanged shard is a hard link of the source's" \
	[ "$(stat -c %i "$TMP/art/$SHARD")" = "$(stat -c %i "$TMP/src/$SHARD")" ]
check "the hard-linked shard has no write bit (mode $(stat -c %a "$TMP/art/$SHARD"))" no_w "$TMP/art/$SHARD"
check "it keeps its read bits" [ "$(stat -c %a "$TMP/art/$SHARD")" = 444 ]
check "the linked tokenizer.json has no write bit either ($(stat -c %a "$TMP/art/tokenizer.json"))" \
	no_w "$TMP/art/tokenizer.json"
check "the tokenizer is a link too" [ "$(stat -c %i "$TMP/art/tokenizer.json")" = "$(stat -c %i "$TMP/src/tokenizer.json")" ]
check "the rewritten shard is the artifact's own file" \
	[ "$(stat -c %i "$TMP/art/$HEADSHARD")" != "$(stat -c %i "$TMP/src/$HEADSHARD")" ]
check "the source's untouched shard keeps its mode" [ "$(stat -c %a "$TMP/src/$HEADSHARD")" = 644 ]
check "the artifact inspects clean" "$FORGED" inspect "$TMP/art" --runtime mlx-lm-0.32 >/dev/null 2>&1
# A second forge from the same (now read-only) source links again.
rc=0; "$FORGED" forge "$TMP/src" --out "$TMP/art2" >/dev/null 2>"$TMP/err" || rc=$?
check "a second forge from the read-only source: exit 0 ($(head -c 200 "$TMP/err"))" [ "$rc" -eq 0 ]
check "and links the same inode" [ "$(stat -c %i "$TMP/art2/$SHARD")" = "$(stat -c %i "$TMP/src/$SHARD")" ]
rc=0; "$FORGED" forge "$TMP/src" --out "$TMP/art" --force >/dev/null 2>"$TMP/err" || rc=$?
check "--force replaces an artifact of read-only files: exit 0 ($(head -c 200 "$TMP/err"))" [ "$rc" -eq 0 ]

# ---- across mounts: link(2) fails with EXDEV, copy_file_range(2) copies ----
skip=""
if [ "$(id -u)" != 0 ]; then skip="not root"
elif ! command -v unshare >/dev/null 2>&1; then skip="unshare is not installed"
elif ! unshare -m --propagation private true 2>/dev/null; then skip="unshare -m is not permitted here"
fi
STRACE=$(command -v strace || true)
if [ -n "$skip" ]; then
	echo "cross-mount copy: skipped ($skip; not counted)"
else
	cat >"$TMP/mounted.sh" <<'EOF'
set -u
T=$1 FORGED=$2 SRC=$3 STRACE=$4
mkdir -p "$T/m" "$T/b"
mount -t tmpfs -o size=256m forged-test "$T/m" || { echo "mount: tmpfs refused" >"$T/skip"; exit 0; }
mkdir "$T/m/src" "$T/m/out"
mount --bind "$T/m/out" "$T/b" || { echo "mount --bind refused" >"$T/skip"; exit 0; }
cp -r "$SRC" "$T/m/src/ckpt" && chmod 0644 "$T/m/src/ckpt"/*
if ln "$T/m/src/ckpt/config.json" "$T/b/probe" 2>/dev/null; then echo "link across the bind mount worked" >"$T/skip"; exit 0; fi
rc=0
if [ -n "$STRACE" ]; then
	# LeakSanitizer cannot run under ptrace (a sanitizer build): leaks are other tests' business.
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
	"$STRACE" -f -e trace=copy_file_range -o "$T/strace.txt" "$FORGED" forge "$T/m/src/ckpt" --out "$T/b/art" \
		>/dev/null 2>"$T/forge.err" || rc=$?
else
	"$FORGED" forge "$T/m/src/ckpt" --out "$T/b/art" >/dev/null 2>"$T/forge.err" || rc=$?
fi
echo "$rc" >"$T/rc"
f=model-00001-of-00002.safetensors
stat -c '%i %a' "$T/m/src/ckpt/$f" >"$T/src.stat"
stat -c '%i %a' "$T/m/out/art/$f" >"$T/art.stat"
cmp -s "$T/m/src/ckpt/$f" "$T/m/out/art/$f" && echo same >"$T/cmp"
stat -c %s "$T/m/src/ckpt/$f" >"$T/size"
EOF
	mkdir -p "$TMP/x"
	unshare -m --propagation private bash "$TMP/mounted.sh" "$TMP/x" "$FORGED" "$FIXTURES/qwen35_hf" "$STRACE" \
		>"$TMP/x/out" 2>&1
	if [ -s "$TMP/x/skip" ]; then
		echo "cross-mount copy: skipped ($(cat "$TMP/x/skip"); not counted)"
	else
		check "cross-mount forge: exit 0 ($(cat "$TMP/x/forge.err" "$TMP/x/out" 2>/dev/null | head -c 300))" \
			[ "$(cat "$TMP/x/rc" 2>/dev/null)" = 0 ]
		read -r si sm <"$TMP/x/src.stat"
		read -r ai am <"$TMP/x/art.stat"
		check "cross-mount: the shard is a copy (inode $ai, source $si)" [ "$ai" != "$si" ]
		check "cross-mount: the copy has the source's bytes" [ "$(cat "$TMP/x/cmp" 2>/dev/null)" = same ]
		check "cross-mount: the copy has no write bit (mode $am)" [ $(( 0$am & 0222 )) -eq 0 ]
		check "cross-mount: the source keeps its mode ($sm)" [ "$sm" = 644 ]
		if [ -n "$STRACE" ]; then
			# copy_file_range(IN, NULL, OUT, NULL, LEN, 0) = N: the shard's bytes went through it.
			got=$(awk '/copy_file_range\(/ && / = [0-9]+$/ { s += $NF } END { print s + 0 }' "$TMP/x/strace.txt")
			check "cross-mount: copy_file_range copied the shard ($got bytes, file $(cat "$TMP/x/size"))" \
				[ "$got" -ge "$(cat "$TMP/x/size")" ]
			check "cross-mount: no copy_file_range failed" \
				[ "$(grep -c 'copy_file_range(.* = -1' "$TMP/x/strace.txt")" = 0 ]
		else
			echo "strace is not installed: the copy_file_range count is skipped (not counted)"
		fi
	fi
fi
finish
