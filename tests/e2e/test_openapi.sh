#!/usr/bin/env bash
# docs/openapi.json against the running server, in both directions.
#
# How the server's routes are known: the binary is not asked to list them
# (nothing is added to it for tests).  Instead (1) api/routes.c's route table
# is parsed with a regex, and each parsed route must be in the document AND
# must be answered by the live server (neither 404 no-such-route nor 405), so
# the parse cannot silently miss or invent routes; (2) for every documented
# path the server's own 405 answer to an unused method names, in its Allow
# header, every method it answers there, which must equal the document's
# methods for that path; (3) every documented path+method is requested and
# must not get 404 no-such-route or 405.  tests/unit/test_openapi.c checks the
# compiled-in table (fg_routes) against the compiled-in document as well.
# Also: the served document is byte for byte docs/openapi.json, it validates
# as OpenAPI 3.0 (when openapi-spec-validator is installed), and the problem
# types the code can answer are exactly the document's list.
set -u
. "$(dirname "$0")/lib.sh"
FIXTURES=$(cd "$FIXTURES" && pwd)
REPO=$(cd "$(dirname "$0")/../.." && pwd)
DOC=$REPO/docs/openapi.json

WTOK=openapi-e2e-write
printf 'write ci %s\n' "$(printf %s "$WTOK" | sha256sum | cut -d' ' -f1)" >"$TMP/tokens"
start_server serve --state-dir "$TMP/state" --allow-roots "$FIXTURES" --tokens-file "$TMP/tokens" --workers 1 ||
	{ finish; exit 1; }
PID=$SPID

# ---- the served document is the file ----
code=$(curl -sS -o "$TMP/served.json" -w '%{http_code}' "$BASE/openapi.json")
check "GET /openapi.json: 200" [ "$code" = 200 ]
check "GET /openapi.json equals docs/openapi.json byte for byte" cmp -s "$TMP/served.json" "$DOC"
check "the document parses" jq -e '.openapi == "3.0.3" and (.paths | length) > 0' "$DOC" >/dev/null
if "$PYTHON" -c 'import openapi_spec_validator' 2>/dev/null; then
	if out=$("$PYTHON" -c 'import json, sys
from openapi_spec_validator import validate
validate(json.load(open(sys.argv[1])))' "$DOC" 2>&1); then ok; else bad "openapi-spec-validator: $(tail -n 3 <<<"$out")"; fi
else
	echo "openapi-spec-validator not installed for $PYTHON: schema validation skipped (not counted)"
fi

# ---- (1) api/routes.c's table: documented and answered ----
"$PYTHON" - "$REPO/api/routes.c" >"$TMP/table" <<'EOF'
import re, sys
src = open(sys.argv[1]).read()
table = re.search(r"const struct fg_route fg_routes\[\] = \{(.*?)\n\};", src, re.S).group(1)
for m in re.finditer(r'\{\s*"([A-Z]+)",\s*"([^"]+)",\s*FG_ROLE_(\w+),\s*([01]),', table):
    print(m.group(1), m.group(2), m.group(3), m.group(4))
EOF
jq -r '.paths | to_entries[] | .key as $p | .value | keys[] | select(IN("get","put","post","delete","patch","head","options","trace")) | "\(ascii_upcase) \($p)"' \
	"$DOC" | sort >"$TMP/doc_ops"
cut -d' ' -f1,2 "$TMP/table" | sort >"$TMP/table_ops"
check "the route table parses ($(wc -l <"$TMP/table_ops") routes)" [ "$(wc -l <"$TMP/table_ops")" -ge 15 ]
while read -r method path; do
	if grep -qxF "$method $path" "$TMP/doc_ops"; then ok; else bad "route $method $path is not in docs/openapi.json"; fi
done <"$TMP/table_ops"
while read -r method path; do
	if grep -qxF "$method $path" "$TMP/table_ops"; then ok; else bad "docs/openapi.json has $method $path, not in api/routes.c"; fi
done <"$TMP/doc_ops"

# answered METHOD PATH: the live server routes it (not 404 no-such-route, not 405).
answered() {
	local url=${2//\{id\}/1} code type how=(-X "$1")
	url=${url//\{asset\}/no-such-file.js}
	# curl -X HEAD would wait for the body Content-Length announces.
	[ "$1" = HEAD ] && how=(--head)
	code=$(curl -sS -o "$TMP/body" -w '%{http_code}' --max-time 20 "${how[@]}" -H "Authorization: Bearer $WTOK" \
		-H 'Content-Type: application/json' ${3:+--data-binary "$3"} "$BASE$url")
	type=$(jq -r '.type? // empty' "$TMP/body" 2>/dev/null)
	if [ "$code" = 405 ] || { [ "$code" = 404 ] && [ "$type" = urn:forged:problem:no-such-route ]; }; then
		bad "$1 $2: the server does not answer it (HTTP $code $type)"
	else
		ok
	fi
}
# ---- (3) every documented operation is answered ----
while read -r method path; do
	case $method in POST | PUT | PATCH) answered "$method" "$path" '{}' ;; *) answered "$method" "$path" ;; esac
done <"$TMP/doc_ops"
# ... and so is every parsed table route (the regex found real routes).
while read -r method path; do
	case $method in POST) answered "$method" "$path" '{}' ;; *) answered "$method" "$path" ;; esac
done <"$TMP/table_ops"
# A control: a route that does not exist is told apart.
code=$(curl -sS -o "$TMP/body" -w '%{http_code}' "$BASE/v1/not-a-route")
check "control: an undocumented path is 404 no-such-route" \
	[ "$code:$(jq -r .type "$TMP/body")" = "404:urn:forged:problem:no-such-route" ]

# ---- (2) the server's Allow header per documented path = the document's methods ----
for path in $(jq -r '.paths | keys[]' "$DOC"); do
	url=${path//\{id\}/1}
	url=${url//\{asset\}/app.js}
	curl -sS -o /dev/null -D "$TMP/hdr" -X PATCH -H "Authorization: Bearer $WTOK" "$BASE$url"
	status=$(head -n 1 "$TMP/hdr" | cut -d' ' -f2)
	allow=$(sed -n 's/^Allow: *//Ip' "$TMP/hdr" | tr -d '\r' | tr ',' '\n' | tr -d ' ' | sort | paste -sd, -)
	want=$(jq -r --arg p "$path" '.paths[$p] | keys | map(select(IN("get","put","post","delete","patch","head","options","trace")) | ascii_upcase) | sort | join(",")' "$DOC")
	check "PATCH $path: 405 with Allow $want (got $status, Allow $allow)" [ "$status" = 405 -a "$allow" = "$want" ]
done

# ---- problem types: what the code can answer = the document's list ----
"$PYTHON" - "$REPO"/api/*.c >"$TMP/code_types" <<'EOF'
import re, sys
slugs = set()
for path in sys.argv[1:]:
    src = open(path).read()
    for m in re.finditer(r"fg_problem\(\s*resp,\s*req,\s*\d+,(.*?)\);", src, re.S):
        for lit in re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1)):
            if re.fullmatch(r"[a-z]+(-[a-z]+)*", lit):
                slugs.add(lit)
            elif " " in lit or re.fullmatch(r"[A-Z][a-z]+", lit):
                break  # the title: slugs come before it
    slugs.update(re.findall(r"urn:forged:problem:([a-z-]+)", src))
    # Validation faults (api/validate.c) carry their type as the second argument.
    slugs.update(re.findall(r'fg_v_add(?:_param)?\(\s*[^,]+,\s*"([a-z0-9]+(?:-[a-z0-9]+)*)"', src))
for s in sorted(slugs):
    print("urn:forged:problem:" + s)
EOF
jq -r '.components.schemas.Problem.properties.type.enum[]' "$DOC" | sort >"$TMP/doc_types"
check "problem types found in the code ($(wc -l <"$TMP/code_types"))" [ "$(wc -l <"$TMP/code_types")" -ge 20 ]
if diff "$TMP/code_types" "$TMP/doc_types" >"$TMP/types.diff"; then ok; else bad "problem types differ (< code, > document): $(cat "$TMP/types.diff")"; fi
# Every error response of the document is problem+json.
check "every 4xx/5xx response is application/problem+json" \
	[ "$(jq '[.components.responses[] | .content | keys[]] | unique == ["application/problem+json"]' "$DOC")" = true ]

stop_server "$PID" 10
check "server stops with exit 0" [ "$STOP_RC" = 0 ]
finish
