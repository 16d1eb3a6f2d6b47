# pg_cluster.sh: a throwaway PostgreSQL cluster for the tests (sourced).
#
#   pg_cluster_start DIR   initdb a cluster in DIR/data, listening only on a
#                          Unix socket in DIR (no TCP), and export
#                          FORGED_TEST_PG (a libpq URL of its "postgres"
#                          database as the superuser "forged") and
#                          FORGED_TEST_PG_SOCKET; returns 1 with the reason
#                          in PG_SKIP when PostgreSQL is not installed (the
#                          one case its tests may be skipped), 2 with the
#                          reason in PG_FAIL when it is installed but the
#                          cluster does not start (a failure, not a skip)
#   pg_cluster_stop        stop it (pg_ctl -m immediate) and remove DIR
#   pg_createdb NAME       a fresh database; prints its URL
#
# Debian's initdb and pg_ctl live in /usr/lib/postgresql/VERSION/bin (the
# newest is taken).  PostgreSQL refuses to run as root: as root the cluster
# runs as the unprivileged user nobody (runuser), and DIR is made theirs.
# fsync stays on: the tests measure the durable path.

pg_bindir() {
	local d
	d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
	[ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && echo "$d"
}

# pg_as CMD...: CMD as the cluster's owner.
pg_as() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u nobody -- "$@"
	else
		"$@"
	fi
}

pg_cluster_start() {
	local dir=$1 bin
	PG_SKIP=""
	PG_FAIL=""
	bin=$(pg_bindir)
	if [ -z "$bin" ]; then
		PG_SKIP="PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb; apt-get install postgresql)"
		return 1
	fi
	if ! command -v psql >/dev/null 2>&1; then
		PG_SKIP="psql is not installed (apt-get install postgresql-client)"
		return 1
	fi
	mkdir -p "$dir"
	if [ "$(id -u)" = 0 ]; then
		if ! command -v runuser >/dev/null 2>&1; then
			PG_FAIL="running as root without runuser (util-linux): cannot start PostgreSQL as an unprivileged user"
			return 2
		fi
		chown nobody: "$dir"
		chmod 0755 "$dir"
	fi
	PG_DIR=$dir
	PG_BIN=$bin
	if ! pg_as "$bin/initdb" -D "$dir/data" -U forged --auth=trust -E UTF8 --locale=C.UTF-8 --no-sync \
		>"$dir/initdb.log" 2>&1; then
		PG_FAIL="initdb failed: $(tail -n 2 "$dir/initdb.log" | tr '\n' ' ')"
		return 2
	fi
	# Unix socket only; room for three instances' connections and the tests'.
	if ! pg_as "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
		-o "-k $dir -h '' -c max_connections=300 -c shared_buffers=64MB" start >"$dir/pg_ctl.log" 2>&1; then
		PG_FAIL="the cluster did not start: $(tail -n 3 "$dir/server.log" 2>/dev/null | tr '\n' ' ')"
		return 2
	fi
	FORGED_TEST_PG_SOCKET=$dir
	FORGED_TEST_PG="postgresql:///postgres?host=$dir&user=forged"
	export FORGED_TEST_PG FORGED_TEST_PG_SOCKET
	return 0
}

pg_cluster_stop() {
	[ -n "${PG_DIR:-}" ] || return 0
	pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate -w stop >/dev/null 2>&1
	rm -rf "$PG_DIR"
	PG_DIR=""
}

# pg_createdb NAME: a fresh database on FORGED_TEST_PG's cluster; prints its URL.
pg_createdb() {
	local name=$1
	PGOPTIONS='-c client_min_messages=warning' psql -q -X "$FORGED_TEST_PG" -c "DROP DATABASE IF EXISTS \"$name\"" \
		-c "CREATE DATABASE \"$name\"" >/dev/null || return 1
	echo "postgresql:///$name?host=$FORGED_TEST_PG_SOCKET&user=forged"
}
