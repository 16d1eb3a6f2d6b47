#!/usr/bin/env bash
# The dashboard's HTTP side, with curl against a real `forged serve`: `/`
# redirects to /ui/; every file of web/ is served from the binary byte for
# byte with its Content-Type, an ETag from its SHA-256 and no-cache; every
# dashboard answer carries the Content-Security-Policy (default-src 'self',
# no inline code, frame-ancestors 'none'), X-Frame-Options DENY and nosniff;
# HEAD works; If-None-Match gives 304; unknown files and traversal are 404;
# the static files are open while the data still needs a token; GET
# /v1/whoami names the token's role; the API's GETs carry ETags too.  Also
# a static look at web/: no inline script or style, no handler attributes,
# no HTML parsing of strings in the JavaScript.  The browser tests
# (test_browser.sh) drive the page itself.
set -u
. "$(dirname "$0")/lib.sh"
FIXTURES=$(cd "$FIXTURES" && pwd)
REPO=$(cd "$(dirname "$0")/../.." && pwd)

RTOK=ui-e2e-read
WTOK=ui-e2e-write
sha() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
printf 'read r %s\nwrite w %s\n' "$(sha "$RTOK")" "$(sha "$WTOK")" >"$TMP/tokens"

# start NAME ARGS...: lib.sh's start_server with this script's state folder, roots and one worker.
start() {
	local name=$1
	shift
	start_server "$name" --state-dir "$TMP/$name" --allow-roots "$FIXTURES" --workers 1 "$@"
}

# req ARGS... PATH: status in $CODE, body bytes received in $SIZE, body in $TMP/body, headers in $TMP/hdr.
req() {
	local out
	rm -f "$TMP/body"
	out=$(curl -sS -o "$TMP/body" -D "$TMP/hdr" -w '%{http_code} %{size_download}' --max-time 20 "${@:1:$#-1}" "$BASE${!#}" 2>"$TMP/curl.err") || out="000 0"
	CODE=${out% *}
	SIZE=${out#* }
}
# raw_body_bytes METHOD PATH [IF-NONE-MATCH]: bytes after the headers of an HTTP/1.0 answer read off
# the socket (curl --head would not read a body the server wrongly sent).
raw_body_bytes() {
	local port=${BASE##*:}
	exec 3<>"/dev/tcp/127.0.0.1/$port"
	printf '%s %s HTTP/1.0\r\nHost: 127.0.0.1\r\n%b\r\n' "$1" "$2" "${3:+If-None-Match: $3\r\n}" >&3
	timeout 5 cat <&3 >"$TMP/raw"
	exec 3<&-
	"$PYTHON" -c 'import sys; d = open(sys.argv[1], "rb").read(); print(len(d) - d.index(b"\r\n\r\n") - 4 if b"\r\n\r\n" in d else -1)' "$TMP/raw"
}
header() { sed -n "s/^$1: *//Ip" "$TMP/hdr" | tr -d '\r' | tail -n 1; }
CSP_WANT=("default-src 'self'" "script-src 'self'" "style-src 'self'" "frame-ancestors 'none'" "object-src 'none'" "base-uri 'none'")
# ui_headers DESC: the last answer carries the dashboard's security headers.
ui_headers() {
	local csp want miss=""
	csp=$(header Content-Security-Policy)
	for want in "${CSP_WANT[@]}"; do
		case "$csp" in *"$want"*) ;; *) miss="$miss [$want]" ;; esac
	done
	case "$csp" in *unsafe-inline* | *unsafe-eval*) miss="$miss [no unsafe-*]" ;; esac
	check "$1: Content-Security-Policy has$miss (got: $csp)" [ -z "$miss" ]
	check "$1: X-Frame-Options DENY" [ "$(header X-Frame-Options)" = DENY ]
	check "$1: X-Content-Type-Options nosniff" [ "$(header X-Content-Type-Options)" = nosniff ]
}

start main --tokens-file "$TMP/tokens" || { finish; exit 1; }

# ---- / redirects ----
req /
check "GET /: 302 (got $CODE)" [ "$CODE" = 302 ]
check "GET /: Location /ui/" [ "$(header Location)" = /ui/ ]
ui_headers "GET /"
req --head /
check "HEAD /: 302 to /ui/ ($CODE)" [ "$CODE:$(header Location)" = "302:/ui/" ]
code=$(curl -sS -L -o "$TMP/followed" -w '%{http_code} %{url_effective}' "$BASE/")
check "following / lands on /ui/ with 200 ($code)" [ "$code" = "200 $BASE/ui/" ]

# ---- every file of web/ ----
n_files=0
for f in "$REPO"/web/*; do
	name=$(basename "$f")
	case $name in
	*.html) want_type="text/html; charset=utf-8" ;;
	*.css) want_type="text/css; charset=utf-8" ;;
	*.js) want_type="text/javascript; charset=utf-8" ;;
	*.svg) want_type="image/svg+xml" ;;
	*) continue ;;
	esac
	n_files=$((n_files + 1))
	req "/ui/$name"
	check "GET /ui/$name: 200 ($CODE)" [ "$CODE" = 200 ]
	check "GET /ui/$name: the file byte for byte" cmp -s "$TMP/body" "$f"
	check "GET /ui/$name: Content-Type $want_type (got $(header Content-Type))" [ "$(header Content-Type)" = "$want_type" ]
	check "GET /ui/$name: ETag from its SHA-256" [ "$(header ETag)" = "\"$(sha256sum "$f" | cut -c1-32)\"" ]
	check "GET /ui/$name: Cache-Control no-cache" [ "$(header Cache-Control)" = no-cache ]
	ui_headers "GET /ui/$name"
done
check "web/ has the page, its styles and scripts ($n_files files)" [ "$n_files" -ge 4 ]
req /ui/
check "GET /ui/ is web/index.html" cmp -s "$TMP/body" "$REPO/web/index.html"
check "GET /ui/: text/html" [ "$(header Content-Type)" = "text/html; charset=utf-8" ]
ui_headers "GET /ui/"

# ---- HEAD, conditional requests ----
req --head /ui/app.js
check "HEAD /ui/app.js: 200 ($CODE)" [ "$CODE" = 200 ]
check "HEAD /ui/app.js: Content-Length of the file" [ "$(header Content-Length)" = "$(wc -c <"$REPO/web/app.js" | tr -d ' ')" ]
n=$(raw_body_bytes HEAD /ui/app.js)
check "HEAD /ui/app.js: no body on the wire ($n bytes)" [ "$n" = 0 ]
n=$(raw_body_bytes GET /ui/app.js)
check "control: GET /ui/app.js on the wire has the file ($n bytes)" [ "$n" = "$(wc -c <"$REPO/web/app.js" | tr -d ' ')" ]
ui_headers "HEAD /ui/app.js"
req --head /ui/
check "HEAD /ui/: 200 ($CODE)" [ "$CODE" = 200 ]
etag=$(sha256sum "$REPO/web/app.js" | cut -c1-32)
req -H "If-None-Match: \"$etag\"" /ui/app.js
check "If-None-Match with the ETag: 304 ($CODE)" [ "$CODE" = 304 ]
n=$(raw_body_bytes GET /ui/app.js "\"$etag\"")
check "304: no body on the wire ($SIZE, $n bytes)" [ "$SIZE" = 0 -a "$n" = 0 ]
check "304: the ETag again" [ "$(header ETag)" = "\"$etag\"" ]
ui_headers "304 /ui/app.js"
req -H "If-None-Match: \"nope\", W/\"$etag\"" /ui/app.js
check "If-None-Match listing a weak form of the ETag: 304 ($CODE)" [ "$CODE" = 304 ]
req -H 'If-None-Match: "0123"' /ui/app.js
check "If-None-Match with another ETag: 200 ($CODE)" [ "$CODE" = 200 ]

# ---- what is not there ----
req /ui/no-such-file.js
check "unknown dashboard file: 404 not-found ($CODE $(jq -r .type "$TMP/body" 2>/dev/null))" \
	[ "$CODE:$(jq -r .type "$TMP/body" 2>/dev/null)" = "404:urn:forged:problem:not-found" ]
ui_headers "404 /ui/no-such-file.js"
req --path-as-is /ui/../Makefile
check "/ui/../Makefile: 404 ($CODE)" [ "$CODE" = 404 ]
req --path-as-is '/ui/..%2fMakefile'
check "/ui/..%2fMakefile: 404 ($CODE)" [ "$CODE" = 404 ]
check "no file of the repository leaks" [ "$(grep -c 'FORGE_SRC' "$TMP/body")" = 0 ]
req /ui
check "/ui without the slash: not a route ($CODE)" [ "$CODE" = 404 ]
req -X PATCH /ui/app.js
check "PATCH /ui/app.js: 405 Allow GET, HEAD ($CODE $(header Allow))" [ "$CODE:$(header Allow)" = "405:GET, HEAD" ]
req -X POST /
check "POST /: 405 ($CODE)" [ "$CODE" = 405 ]

# ---- auth: the page is open, the data is not ----
req /v1/fleet/health
check "fleet health without a token: 401 ($CODE)" [ "$CODE" = 401 ]
req /v1/whoami
check "whoami without a token: auth on, no role" [ "$(jq -c '[.auth, .role, .token]' "$TMP/body")" = '[true,null,null]' ]
req -H "Authorization: Bearer $RTOK" /v1/whoami
check "whoami with the read token" [ "$(jq -c '[.auth, .role, .token]' "$TMP/body")" = '[true,"read","r"]' ]
req -H "Authorization: Bearer $WTOK" /v1/whoami
check "whoami with the write token" [ "$(jq -c '[.auth, .role, .token]' "$TMP/body")" = '[true,"write","w"]' ]
req -H "Authorization: Bearer wrong" /v1/whoami
check "whoami with a wrong token: 200, no role" [ "$CODE:$(jq -c .role "$TMP/body")" = "200:null" ]

# ---- the API's GETs revalidate too ----
R=(-H "Authorization: Bearer $RTOK")
req "${R[@]}" /v1/fleet/health
h1=$(header ETag)
check "fleet health: an ETag ($h1)" grep -Eq '^"[0-9a-f]{32}"$' <<<"$h1"
check "fleet health: still no-store" [ "$(header Cache-Control)" = no-store ]
check "fleet health: the new sections" [ "$(jq -c '[(.verdict_matrix | type), (.probe_after_load.bins)]' "$TMP/body")" = '["array",80]' ]
req "${R[@]}" -H "If-None-Match: $h1" /v1/fleet/health
check "fleet health unchanged: 304 ($CODE)" [ "$CODE" = 304 ]
curl -s -o /dev/null -X POST -H "Authorization: Bearer $WTOK" -H 'Content-Type: application/json' \
	--data-binary '{"source": "qwen35_mlx_embedded"}' "$BASE/v1/inspections"
curl -s -o /dev/null -X POST -H "Authorization: Bearer $WTOK" -H 'Content-Type: application/json' \
	--data-binary '{"host": "h1", "artifact": 1, "runtime": "mlx-lm-0.31"}' "$BASE/v1/fleet/reports"
req "${R[@]}" -H "If-None-Match: $h1" /v1/fleet/health
check "fleet health after a report: 200 with another ETag ($CODE)" [ "$CODE" = 200 -a "$(header ETag)" != "$h1" ]
check "fleet health: the report in probe_after_load (2.7913 in bin 55)" \
	[ "$(jq -c '[.probe_after_load.reports, .probe_after_load.by_family.qwen3_5[55]]' "$TMP/body")" = '[1,1]' ]
req "${R[@]}" /v1/jobs
j1=$(header ETag)
req "${R[@]}" -H "If-None-Match: $j1" /v1/jobs
check "job list unchanged: 304 ($CODE)" [ "$CODE" = 304 ]
req "${R[@]}" -H "If-None-Match: $j1" /v1/artifacts/1
check "another document's ETag: 200 ($CODE)" [ "$CODE" = 200 ]
req -X POST -H "Authorization: Bearer $WTOK" -H 'Content-Type: application/json' -H 'If-None-Match: *' \
	--data-binary '{"host": "h2", "artifact": 1, "runtime": "ollama"}' /v1/fleet/reports
check "If-None-Match never turns a write into a 304 ($CODE)" [ "$CODE" = 201 ]

# ---- a server without a tokens file: whoami says everyone may write ----
start open || { finish; exit 1; }
req /v1/whoami
check "open server: whoami auth off, role write" [ "$(jq -c '[.auth, .role]' "$TMP/body")" = '[false,"write"]' ]
req /ui/
check "open server: the page ($CODE)" [ "$CODE" = 200 ]

# ---- web/ itself: no inline code, no markup from strings ----
check "index.html has no inline script" [ "$(grep -Eic '<script( [^>]*)?>[^<]' "$REPO"/web/*.html)" = 0 ]
check "index.html scripts all have src" [ "$(grep -Ei '<script' "$REPO"/web/*.html | grep -vc 'src=')" = 0 ]
check "no style attributes or <style> in web/*.html" [ "$(grep -Eic ' style=|<style' "$REPO"/web/*.html)" = 0 ]
check "no on* handler attributes in web/*.html" [ "$(grep -Eic ' on[a-z]+=' "$REPO"/web/*.html)" = 0 ]
check "no innerHTML, outerHTML, insertAdjacentHTML, document.write or eval in web/*.js" \
	[ "$(cat "$REPO"/web/*.js | grep -Ec '\.(innerHTML|outerHTML)|insertAdjacentHTML|document\.write|\beval\(|new Function')" = 0 ]
check "no .style assignment in web/*.js" [ "$(cat "$REPO"/web/*.js | grep -Ec '\.style(\.|\[| *=)|setAttribute\(.style')" = 0 ]
finish
