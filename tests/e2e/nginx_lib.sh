# shellcheck shell=bash disable=SC2034  # NGINX_* are for the sourcing script
# nginx_lib.sh: a throwaway nginx on loopback for end-to-end tests (sourced).
#
#   nginx_start ROOT [DIR]   serve ROOT on 127.0.0.1 at a free port; sets
#                            NGINX_URL (http://127.0.0.1:PORT), NGINX_PORT,
#                            NGINX_DIR (prefix: conf, logs, temp paths),
#                            NGINX_LOG (access log), NGINX_PID (master)
#   nginx_stop               stop it (also done on exit)
#   nginx_log_lines          lines in the access log so far
#
# ROOT is laid out as a Hugging Face hub: ROOT/ORG/NAME/FILE is served as
# /ORG/NAME/resolve/REV/FILE for any REV, with Range and ETag (nginx's
# defaults) and, as the hub does, the commit REV resolved to in an
# X-Repo-Commit header: NGINX_HUB_COMMIT for the branch main and the tag
# v1.0, REV itself for a 40-hex REV, none for other names; the branch
# "moving" names NGINX_HUB_COMMIT2 for config.json and NGINX_HUB_COMMIT for
# the rest (a branch that moved between two requests).
# Variants of the same tree, under a path prefix:
#   /norange/...   ignores Range and answers 200 with the whole file (max_ranges 0)
#   /slow/...      limit_rate 2 MiB/s, to kill a worker mid-transfer
#   /private/...   401 unless "Authorization: Bearer sekrit"
#   /flaky/...     always 503
#   /redir/X       302 to /X on the same host
#   /offsite/X     302 to http://localhost:PORT/X (another host name)
# The access log has one line per request:
#   $status $body_bytes_sent "$request" "$http_range" $request_time
# nginx runs in the foreground (daemon off) as a child of the shell, with
# every path under DIR, so it needs no root paths; as root it keeps running
# as root (user root), since workers would otherwise switch to nobody.

NGINX_BIN=${NGINX_BIN:-$(command -v nginx || echo /usr/sbin/nginx)}
NGINX_PID=
NGINX_DIR=
NGINX_HUB_COMMIT=3f9c1e0d2b4a6c8e0f1a3b5c7d9e1f2a4b6c8d0e
NGINX_HUB_COMMIT2=7e5d3c1b9a8f6e4d2c0b1a3f5e7d9c1b3a5f7e9d

nginx_free_port() {
	"${PYTHON:-python3}" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

_nginx_conf() { # _nginx_conf ROOT PORT DIR
	local root=$1 port=$2 dir=$3 user=
	[ "$(id -u)" = 0 ] && user="user root;"
	local hub='([^/]+)/([^/]+)/resolve/[^/]+/(.+)$'
	cat <<EOF
$user
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log info;
events { worker_connections 256; }
http {
	log_format fg '\$status \$body_bytes_sent "\$request" "\$http_range" \$request_time';
	access_log $dir/access.log fg;
	client_body_temp_path $dir/tmp/body;
	proxy_temp_path $dir/tmp/proxy;
	fastcgi_temp_path $dir/tmp/fastcgi;
	uwsgi_temp_path $dir/tmp/uwsgi;
	scgi_temp_path $dir/tmp/scgi;
	default_type application/octet-stream;
	sendfile on;
	etag on;
	keepalive_requests 100000;
	map \$uri \$fg_repo_commit {
		"~/resolve/([0-9a-f]{40})/" \$1;
		"~/resolve/moving/config\.json\$" $NGINX_HUB_COMMIT2;
		"~/resolve/(main|v1\.0|moving)/" $NGINX_HUB_COMMIT;
		default "";
	}
	add_header X-Repo-Commit \$fg_repo_commit;
	server {
		listen 127.0.0.1:$port;
		location ~ ^/norange/$hub { max_ranges 0; alias $root/\$1/\$2/\$3; }
		location ~ ^/slow/$hub { limit_rate 2m; alias $root/\$1/\$2/\$3; }
		location ~ ^/private/$hub {
			if (\$http_authorization != "Bearer sekrit") { return 401; }
			alias $root/\$1/\$2/\$3;
		}
		location ^~ /flaky/ { return 503; }
		location ~ ^/redir/(.*)$ { return 302 /\$1; }
		location ~ ^/offsite/(.*)$ { return 302 http://localhost:$port/\$1; }
		location ~ ^/$hub { alias $root/\$1/\$2/\$3; }
		location / { return 404; }
	}
}
EOF
}

nginx_start() { # nginx_start ROOT [DIR]
	local root dir
	root=$(cd "$1" && pwd) || return 1
	dir=${2:-$(mktemp -d)}
	mkdir -p "$dir/tmp" || return 1
	NGINX_DIR=$dir
	NGINX_LOG=$dir/access.log
	# A port picked free may be taken before nginx binds it: try a few.
	for _ in 1 2 3 4 5; do
		NGINX_PORT=$(nginx_free_port) || return 1
		NGINX_URL=http://127.0.0.1:$NGINX_PORT
		_nginx_conf "$root" "$NGINX_PORT" "$dir" >"$dir/nginx.conf"
		: >"$NGINX_LOG"
		"$NGINX_BIN" -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" \
			>>"$dir/stdout.log" 2>&1 &
		NGINX_PID=$!
		for _ in $(seq 50); do
			if ! kill -0 "$NGINX_PID" 2>/dev/null; then break; fi
			if curl -s -o /dev/null "$NGINX_URL/"; then
				: >"$NGINX_LOG" # forget the readiness probes
				return 0
			fi
			sleep 0.1
		done
		nginx_stop
		grep -q 'Address already in use' "$dir/error.log" 2>/dev/null || break
	done
	echo "nginx_start: nginx did not start; $dir/error.log says:" >&2
	tail -n 5 "$dir/error.log" >&2 2>/dev/null
	return 1
}

nginx_stop() {
	[ -n "$NGINX_PID" ] || return 0
	kill -QUIT "$NGINX_PID" 2>/dev/null
	for _ in $(seq 50); do
		kill -0 "$NGINX_PID" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$NGINX_PID" 2>/dev/null
	wait "$NGINX_PID" 2>/dev/null
	NGINX_PID=
}

# The workers of our master, by parent id (a kill command for a test).
nginx_kill_workers_cmd() {
	printf 'pkill -KILL -P %s' "$NGINX_PID"
}

# nginx logs a request after answering it: give the last line time to land.
nginx_log_lines() {
	sleep 0.2
	wc -l <"$NGINX_LOG" | tr -d ' '
}

# Stop nginx on exit, then run whatever exit trap was set before us.
_NGINX_PREV_TRAP=$(trap -p EXIT)
_nginx_on_exit() {
	nginx_stop
	if [ -n "$_NGINX_PREV_TRAP" ]; then
		eval "set -- ${_NGINX_PREV_TRAP#trap -- }"
		eval "$1"
	fi
}
trap _nginx_on_exit EXIT
trap 'exit 130' INT TERM
