#!/usr/bin/env bash
# test_write_suspend.sh: a verification post does not hold its handler
# thread while the store's writer has its write (api/server.c
# fg_req_suspend): with one handler thread, a read on another connection is
# answered while the post waits for the database, the post is answered once
# its write commits, and a shutdown in between waits for it.
#
# Another process holds SQLite's write lock (BEGIN IMMEDIATE) for a few
# seconds, so the post's write waits inside the writer (its budget is 5 s).
# The checks are on order, never on time: the read's answer arrives while
# the post's curl is still running.
set -u
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/serve_lib.sh"

sqlite_state "the lock is SQLite's file lock"
ROWS='{"schema": "forged.verification.v1", "runtime": "mtplx-2.12", "rows": [{"depth": 0, "tok_s": 15.04},
 {"depth": 1, "tok_s": 34.15, "acceptance": [0.978], "quality_passed": true}]}'

/usr/bin/python3 - "$STATE/forged.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
with db:
    db.execute("INSERT INTO artifacts (source, family, ok) VALUES ('a', 'qwen3_5', 1)")
    db.execute("INSERT INTO artifact_docs (artifact_id, report) VALUES (1, '{\"schema\": \"forged.inspect.v1\"}')")
PY

# hold_lock SECONDS: SQLite's write lock on the state's database for SECONDS, in the background (LOCK_PID);
# returns once the lock is held.
hold_lock() {
	rm -f "$TMP/locked"
	/usr/bin/python3 - "$STATE/forged.db" "$1" "$TMP/locked" <<'PY' &
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
open(sys.argv[3], "w").close()
time.sleep(float(sys.argv[2]))
db.execute("ROLLBACK")
PY
	LOCK_PID=$!
	for _ in $(seq 100); do [ -f "$TMP/locked" ] && return 0; sleep 0.05; done
	return 1
}
# post_later: the post in the background (POST_PID); status in $TMP/post.code, body in $TMP/post.json
post_later() {
	curl -s -o "$TMP/post.json" -w '%{http_code}' --max-time 60 -X POST "${W[@]}" "${J[@]}" --data-binary "$ROWS" \
		"$BASE/v1/artifacts/1/verifications" >"$TMP/post.code" &
	POST_PID=$!
}
verifications() { sqlite3 "$STATE/forged.db" 'SELECT count(*) FROM verifications'; }

start_server one --state-dir "$STATE" --tokens-file "$TMP/tokens" --workers 0 --http-threads 1 || { finish; exit 1; }
check "the lock is held" hold_lock 3
post_later
# The post is with the writer, waiting for the lock; the one handler thread is free.
sleep 0.5
get /v1/artifacts/1
expect "a read while the post waits for the database" 200
check "the read was answered while the post was still waiting" kill -0 "$POST_PID"
check "nothing was stored yet" [ "$(verifications)" = 0 ]
wait "$POST_PID"
wait "$LOCK_PID"
check "the post is answered 201 once the lock is free" [ "$(cat "$TMP/post.code")" = 201 ]
check "the answer names the artifact" [ "$(jq -r .artifact_id "$TMP/post.json")" = 1 ]
check "the verification is stored" [ "$(verifications)" = 1 ]
get /v1/artifacts/1
check "the artifact lists it" [ "$(jb '.verifications | length')" = 1 ]

# A shutdown while a post waits: the drain waits for its answer, then the server exits cleanly.
check "the lock is held again" hold_lock 2
post_later
sleep 0.5
kill -TERM "$SPID"
wait "$POST_PID"
wait "$LOCK_PID"
# No second signal (that one would cut the drain short): the server ends by itself.
for _ in $(seq 300); do kill -0 "$SPID" 2>/dev/null || break; sleep 0.1; done
wait "$SPID" 2>/dev/null
STOP_RC=$?
check "the post waiting at the shutdown is answered 201" [ "$(cat "$TMP/post.code")" = 201 ]
check "and stored" [ "$(verifications)" = 2 ]
check "the server exits 0 after the drain (status $STOP_RC)" [ "$STOP_RC" = 0 ]
finish
