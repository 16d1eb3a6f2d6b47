#!/usr/bin/env bash
# apt_install.sh PKG...: install the Debian packages of the list that are not
# installed yet (make deps-run, deps, deps-deb).  Nothing happens, and
# nothing is asked of the network, when all of them are there.
#
# A package's service must not be left running by the install: Debian's
# nginx starts a system nginx on port 80 from its postinst, while the tests
# run nginx themselves, on loopback ports of their own, only for as long as a
# test needs it.  So while apt-get runs, /usr/sbin/policy-rc.d refuses every
# service start (invoke-rc.d and deb-systemd-invoke ask it; one already there
# is left alone), and nginx, once installed here, is stopped and disabled,
# under systemd or not, so that it does not start at boot either.  The same
# goes for Debian's postgresql: its postinst makes a "main" cluster and
# would start it on port 5432; the tests run a throwaway cluster of their
# own on a Unix socket in a temporary folder (tests/pg_cluster.sh).
set -eu
missing=()
for p in "$@"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
[ "${#missing[@]}" -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
SUDO=()
[ "$(id -u)" = 0 ] || SUDO=(sudo)
POLICY=/usr/sbin/policy-rc.d
if [ ! -e "$POLICY" ]; then
	printf '#!/bin/sh\n# written by forged tests/tools/apt_install.sh while it installs packages\nexit 101\n' |
		"${SUDO[@]}" tee "$POLICY" >/dev/null
	"${SUDO[@]}" chmod 0755 "$POLICY"
	trap '"${SUDO[@]}" rm -f "$POLICY"' EXIT
fi
"${SUDO[@]}" apt-get update
DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
for p in "${missing[@]}"; do
	case $p in
	nginx | nginx-*)
		echo "apt_install: nginx stays stopped and disabled (the tests start their own)"
		if [ -d /run/systemd/system ]; then
			"${SUDO[@]}" systemctl disable --now nginx.service || true
		else
			"${SUDO[@]}" service nginx stop >/dev/null 2>&1 || true
			"${SUDO[@]}" update-rc.d nginx disable >/dev/null 2>&1 || true
			"${SUDO[@]}" systemctl disable nginx.service >/dev/null 2>&1 || true
		fi
		;;
	postgresql | postgresql-[0-9]*)
		echo "apt_install: the postgresql service stays stopped and disabled (the tests start their own cluster)"
		if [ -d /run/systemd/system ]; then
			"${SUDO[@]}" systemctl disable --now postgresql.service || true
		else
			"${SUDO[@]}" service postgresql stop >/dev/null 2>&1 || true
			"${SUDO[@]}" update-rc.d postgresql disable >/dev/null 2>&1 || true
			"${SUDO[@]}" systemctl disable postgresql.service >/dev/null 2>&1 || true
		fi
		;;
	esac
done
