#!/usr/bin/env bash
# What `make run` and `make test` install (Makefile RUN_PKGS, TEST_PKGS):
# `make run` only what building and running forged needs; and an installed
# nginx is no system service left running: nothing listens on port 80 and,
# under systemd, nginx.service is not active (checked when nginx is
# installed).  tests/tools/apt_install.sh is also run against stand-ins for
# apt-get, dpkg-query, systemctl, service and update-rc.d: while it installs
# nginx, policy-rc.d refuses service starts, and afterwards nginx is stopped
# and disabled.
set -u
. "$(dirname "$0")/lib.sh"
REPO=$(cd "$(dirname "$0")/../.." && pwd)
mk() { env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS make --no-print-directory -s -C "$REPO" "$@"; }

# ---- the package lists, as make would install them ----
mk -n run FORGED=/bin/true >"$TMP/run.n" 2>&1
mk -n deps >"$TMP/deps.n" 2>&1
run_pkgs=$(grep -m1 'apt_install.sh' "$TMP/run.n")
deps_pkgs=$(grep -m1 'apt_install.sh' "$TMP/deps.n")
check "make run installs through apt_install.sh ($run_pkgs)" [ -n "$run_pkgs" ]
for p in libmicrohttpd-dev libsqlite3-dev libcjson-dev libzstd-dev libcurl4-openssl-dev libssl-dev libpq-dev python3 ca-certificates; do
	check "make run installs $p" grep -qw -- "$p" <<<"$run_pkgs"
done
for p in nginx clang python3-numpy libcmocka-dev libclang-rt-14-dev chromium jq strace postgresql; do
	check "make run does not install $p" eval '! grep -qw -- "$p" <<<"$run_pkgs"'
done
for p in nginx python3-numpy libcmocka-dev strace jq libmicrohttpd-dev chromium postgresql libpq-dev; do
	check "make deps (make test) installs $p" grep -qw -- "$p" <<<"$deps_pkgs"
done
check "no package lists libxxhash-dev (nothing links it)" eval '! grep -q libxxhash "$REPO/Makefile"'
check "make run depends on deps-run, not deps" grep -q '^run: deps-run$' "$REPO/Makefile"

# ---- an installed nginx does not run as a system service ----
listening80() { # a TCP socket in LISTEN (0A) on local port 80 (0050), IPv4 or IPv6
	awk 'NR > 1 && $4 == "0A" && $2 ~ /:0050$/ { found = 1 } END { exit !found }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}
if dpkg-query -W -f='${Status}' nginx 2>/dev/null | grep -q 'ok installed'; then
	check "nginx installed: nothing listens on port 80" eval '! listening80'
	if [ -d /run/systemd/system ]; then
		state=$(systemctl is-active nginx.service 2>/dev/null)
		check "nginx installed: nginx.service is not active ($state)" [ "$state" != active ]
	else
		echo "systemd is not running: the nginx.service check is skipped (not counted)"
	fi
else
	echo "nginx is not installed: the port 80 check is skipped (not counted)"
fi

# ---- apt_install.sh against stand-ins ----
if [ "$(id -u)" != 0 ]; then
	echo "not root: the apt_install.sh stand-in run is skipped (not counted)"
else
	FAKE=$TMP/fake
	mkdir -p "$FAKE"
	LOG=$TMP/calls.log
	: >"$LOG"
	policy_before=absent
	[ -e /usr/sbin/policy-rc.d ] && policy_before=$(sha256sum /usr/sbin/policy-rc.d)
	cat >"$FAKE/dpkg-query" <<'EOF'
#!/bin/sh
echo "unknown ok not-installed"
EOF
	# apt-get install: what nginx's postinst would do, ask policy-rc.d whether it may start.
	cat >"$FAKE/apt-get" <<EOF
#!/bin/sh
echo "apt-get \$*" >>"$LOG"
if [ "\$1" = install ]; then
	rc=0
	/usr/sbin/policy-rc.d nginx start >/dev/null 2>&1 || rc=\$?
	echo "policy-rc.d nginx start: \$rc" >>"$LOG"
fi
exit 0
EOF
	for c in systemctl service update-rc.d; do
		printf '#!/bin/sh\necho "%s $*" >>"%s"\n' "$c" "$LOG" >"$FAKE/$c"
	done
	chmod +x "$FAKE"/*
	rc=0
	PATH="$FAKE:$PATH" bash "$REPO/tests/tools/apt_install.sh" nginx >"$TMP/apt.out" 2>&1 || rc=$?
	check "apt_install.sh nginx: exit 0 ($(head -c 200 "$TMP/apt.out"))" [ "$rc" = 0 ]
	check "apt-get install --no-install-recommends nginx" grep -qx 'apt-get install -y --no-install-recommends nginx' "$LOG"
	check "policy-rc.d refused nginx's start during the install (101)" grep -qx 'policy-rc.d nginx start: 101' "$LOG"
	if [ -d /run/systemd/system ]; then
		check "then nginx is stopped and disabled (systemctl disable --now)" grep -q '^systemctl disable --now nginx' "$LOG"
	else
		check "then nginx is stopped (service nginx stop)" grep -qx 'service nginx stop' "$LOG"
		check "and disabled at boot (update-rc.d nginx disable)" grep -qx 'update-rc.d nginx disable' "$LOG"
	fi
	policy_after=absent
	[ -e /usr/sbin/policy-rc.d ] && policy_after=$(sha256sum /usr/sbin/policy-rc.d)
	check "policy-rc.d is as it was before" [ "$policy_after" = "$policy_before" ]
	: >"$LOG"
	mkdir -p "$TMP/fake2"
	cp "$FAKE/apt-get" "$TMP/fake2/"
	PATH="$TMP/fake2:$PATH" bash "$REPO/tests/tools/apt_install.sh" bash coreutils >/dev/null 2>&1
	check "apt_install.sh with nothing missing asks nothing of apt-get" [ ! -s "$LOG" ]
fi
finish
