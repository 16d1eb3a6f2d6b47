#!/usr/bin/env bash
# deb_check.sh [--no-lintian]: build the Debian package of debian/ with
# `dpkg-buildpackage -us -uc -b` in a temporary copy of the tree (the work
# tree and its build/ are left alone), copy the .deb to build/deb/, check
# what it holds, and run lintian on the .changes: any error or warning tag
# fails (tags overridden in debian/*.lintian-overrides carry their reason).
# Run by `make check-deb` (and `make deb`, without lintian) and by .ci/run;
# not by `make test`, whose suite runs twice in CI.  Prints one closing line
# "deb_check: N passed, N failed".
set -u
REPO=$(cd "$(dirname "$0")/../.." && pwd)
lintian=1
[ "${1:-}" = --no-lintian ] && lintian=0
PASS=0
FAIL=0
ok() { PASS=$((PASS + 1)); }
bad() { FAIL=$((FAIL + 1)); printf 'FAIL: %s\n' "$*" >&2; }
check() {
	local desc=$1
	shift
	if "$@"; then ok; else bad "$desc"; fi
}
finish() {
	printf 'deb_check: %d passed, %d failed\n' "$PASS" "$FAIL"
	[ "$FAIL" -eq 0 ]
}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
VERSION=$(dpkg-parsechangelog -l "$REPO/debian/changelog" -S Version)
ARCH=$(dpkg --print-architecture)
SRC=$WORK/forged-$VERSION
mkdir -p "$SRC"

# The tree as git sees it (tracked and new files, nothing ignored), else all but build/.
if git -C "$REPO" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	(cd "$REPO" && git ls-files -z --cached --others --exclude-standard |
		while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done | tar --null -T - -cf -) |
		tar -xf - -C "$SRC"
else
	(cd "$REPO" && tar --exclude=./build --exclude=./forged-state -cf - .) | tar -xf - -C "$SRC"
fi

echo "deb_check: dpkg-buildpackage in $SRC"
rc=0
(cd "$SRC" && DEB_BUILD_OPTIONS="parallel=$(nproc) ${DEB_BUILD_OPTIONS:-}" dpkg-buildpackage -us -uc -b) \
	>"$WORK/build.log" 2>&1 || rc=$?
DEB=$WORK/forged_${VERSION}_$ARCH.deb
CHANGES=$WORK/forged_${VERSION}_$ARCH.changes
if [ "$rc" -ne 0 ] || [ ! -f "$DEB" ]; then
	tail -n 40 "$WORK/build.log"
	bad "dpkg-buildpackage -us -uc -b: exit $rc"
	finish
	exit 1
fi
ok
mkdir -p "$REPO/build/deb"
cp "$WORK"/forged*_"$VERSION"_* "$REPO/build/deb/"
echo "deb_check: $REPO/build/deb/$(basename "$DEB")"

# ---- what the package holds ----
dpkg-deb -c "$DEB" | awk '{print $NF}' | sed 's|^\./|/|' >"$WORK/files"
for f in /usr/bin/forged /lib/systemd/system/forged.service /etc/forged/config.json /etc/forged/tokens \
	/usr/share/man/man1/forged.1.gz /usr/share/man/man5/forged.conf.5.gz \
	/usr/share/bash-completion/completions/forged /usr/share/zsh/vendor-completions/_forged \
	/usr/share/doc/forged/config.example.json /usr/share/doc/forged/README.md /usr/share/doc/forged/copyright \
	/usr/share/doc/forged/README.Debian /usr/share/doc/forged/environment.example \
	/usr/lib/sysusers.d/forged.conf; do
	check "the package holds $f" grep -qx -- "$f" "$WORK/files"
done
check "nothing under /usr/local" eval '! grep -q "^/usr/local" "$WORK/files"'
dpkg-deb -x "$DEB" "$WORK/root"
dpkg-deb -e "$DEB" "$WORK/control"
check "/etc/forged/config.json and tokens are conffiles" \
	[ "$(sort "$WORK/control/conffiles" | tr '\n' ' ')" = "/etc/forged/config.json /etc/forged/tokens " ]
check "Depends names adduser" grep -q '^Depends:.*adduser' "$WORK/control/control"
check "postinst creates the forged system user" grep -q 'adduser --system --group' "$WORK/control/postinst"
check "postinst creates /var/lib/forged" grep -q 'chown forged:forged /var/lib/forged' "$WORK/control/postinst"
check "postinst registers the unit (dh_installsystemd)" grep -q 'deb-systemd-helper' "$WORK/control/postinst"
for s in postinst postrm; do
	check "$s is valid sh" sh -n "$WORK/control/$s"
done
unit=$WORK/root/lib/systemd/system/forged.service
check "the unit runs /usr/bin/forged" grep -qx 'ExecStart=/usr/bin/forged serve --config /etc/forged/config.json' "$unit"
check "the unit runs as the forged user" grep -qx 'User=forged' "$unit"
check "the unit has no DynamicUser" eval '! grep -q "^DynamicUser" "$unit"'
check "the unit's group is forged" grep -qx 'Group=forged' "$unit"
check "the unit keeps artifacts group-readable (StateDirectoryMode=0750, UMask=0027)" \
	[ "$(grep -cxE 'StateDirectoryMode=0750|UMask=0027' "$unit")" = 2 ]
check "the unit reads /etc/forged/environment when present" grep -qx 'EnvironmentFile=-/etc/forged/environment' "$unit"
check "postinst makes /var/lib/forged 0750" grep -q 'chmod 0750 /var/lib/forged' "$WORK/control/postinst"
check "the config names artifacts_dir and etag_ttl_seconds" \
	jq -e '.artifacts_dir == "/var/lib/forged/artifacts" and .etag_ttl_seconds == 3600' "$WORK/root/etc/forged/config.json" >/dev/null
check "the config points at /etc/forged/tokens" grep -q '"tokens_file": "/etc/forged/tokens"' "$WORK/root/etc/forged/config.json"
if command -v systemd-analyze >/dev/null 2>&1; then
	sed "s|^ExecStart=/usr/bin/forged|ExecStart=$WORK/root/usr/bin/forged|" "$unit" >"$WORK/forged.service"
	out=$(systemd-analyze verify "$WORK/forged.service" 2>&1)
	check "systemd-analyze verify of the packaged unit ($out)" [ -z "$out" ]
fi
out=$("$WORK/root/usr/bin/forged" version --json 2>&1)
check "the packaged binary runs" [ "$(jq -r .schema <<<"$out" 2>/dev/null)" = forged.version.v1 ]
check "the packaged bash completion is the binary's" \
	cmp -s "$WORK/root/usr/share/bash-completion/completions/forged" <("$WORK/root/usr/bin/forged" completion bash)

# ---- lintian ----
if [ "$lintian" = 1 ]; then
	rc=0
	lintian --fail-on error,warning --info --display-info --show-overrides "$CHANGES" >"$WORK/lintian.out" 2>&1 || rc=$?
	cat "$WORK/lintian.out"
	check "lintian: no error or warning tag (exit $rc)" [ "$rc" = 0 ]
	check "lintian: no error or warning tag in its output" eval '! grep -q "^[EW]: " "$WORK/lintian.out"'
fi
finish
