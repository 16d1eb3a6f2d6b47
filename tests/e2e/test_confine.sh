#!/usr/bin/env bash
# Paths are confined again when a job runs, not only when it is queued
# (issue 11 item 6): a source folder or an output's parent swapped for a link
# to somewhere outside allow_roots while the job waited in the queue fails the
# job, and nothing is read from or written to the outside.  Two forges racing
# for one destination without --force (item 7): one wins, the other fails with
# "already exists", and the artifact is the winner's.
set -u
. "$(dirname "$0")/lib.sh"
FIXTURES=$(cd "$FIXTURES" && pwd)


WTOK=e2e-confine-write-3b1d
printf 'write ci-writer %s\n' "$(printf %s "$WTOK" | sha256sum | cut -d' ' -f1)" >"$TMP/tokens"

# submit BODY: the new job's id on stdout.
submit() {
	curl -sS --max-time 30 -H "Authorization: Bearer $WTOK" -H "Content-Type: application/json" \
		--data-binary "$1" "$BASE/v1/jobs" | jq -r .id
}
# job_end ID: the job's document once it has ended, in $TMP/job.json.
job_end() {
	local i
	for i in $(seq 1 300); do
		curl -sS --max-time 30 -H "Authorization: Bearer $WTOK" "$BASE/v1/jobs/$1" >"$TMP/job.json"
		case "$(jq -r .state "$TMP/job.json")" in succeeded | failed | cancelled) return 0 ;; esac
		sleep 0.2
	done
	return 1
}

ROOT=$TMP/root
OUT=$TMP/outside
mkdir -p "$ROOT/outs" "$ROOT/outs2" "$OUT/outs2" "$OUT"
cp -r "$FIXTURES/qwen35_hf" "$ROOT/model"
cp -r "$FIXTURES/qwen35_hf" "$ROOT/model2"
cp -r "$FIXTURES/qwen35_mlx_sidecar" "$OUT/model" # what a swapped source would read
STATE=$TMP/state

# Queued while everything is inside the roots: the API confines and accepts.
start_server queue --tokens-file "$TMP/tokens" --state-dir "$STATE" --allow-roots "$ROOT" --workers 0 || { finish; exit 1; }
J1=$(submit '{"kind": "forge", "source": "model", "out": "outs/a"}')
J2=$(submit '{"kind": "forge", "source": "model2", "out": "outs2/b"}')
J3=$(submit '{"kind": "forge", "source": "model2", "out": "outs/c"}')
for j in "$J1" "$J2" "$J3"; do check "job queued ($j)" [ "${j:-null}" != null ]; done
stop_server "$SPID" 60

# While they wait: the first job's source and the second's output folder become links out of the roots.
mv "$ROOT/model" "$ROOT/model.real"
ln -s "$OUT/model" "$ROOT/model"
rmdir "$ROOT/outs2"
ln -s "$OUT/outs2" "$ROOT/outs2"

start_server run --tokens-file "$TMP/tokens" --state-dir "$STATE" --allow-roots "$ROOT" --workers 1 || { finish; exit 1; }
job_end "$J1" || bad "job $J1 did not end"
check "swapped source: the job failed ($(jq -r .state "$TMP/job.json"))" [ "$(jq -r .state "$TMP/job.json")" = failed ]
check "swapped source: the error says it is outside the roots" grep -q "outside the allowed roots" <<<"$(jq -r .error "$TMP/job.json")"
check "swapped source: no artifact from the outside model" [ ! -e "$ROOT/outs/a" ]
job_end "$J2" || bad "job $J2 did not end"
check "swapped output folder: the job failed ($(jq -r .state "$TMP/job.json"))" [ "$(jq -r .state "$TMP/job.json")" = failed ]
check "swapped output folder: the error says it is outside the roots" grep -q "outside the allowed roots" <<<"$(jq -r .error "$TMP/job.json")"
check "swapped output folder: nothing written outside the roots" [ -z "$(ls -A "$OUT/outs2")" ]
job_end "$J3" || bad "job $J3 did not end"
check "an untouched job still succeeds ($(jq -r '.state + " " + (.error // "")' "$TMP/job.json"))" \
	[ "$(jq -r .state "$TMP/job.json")" = succeeded ]
check "its artifact is where it was asked" [ -f "$ROOT/outs/c/forged.json" ]
stop_server "$SPID" 60

# Two forges to one destination without --force: the second to finish must not replace the first.
rc1=0 rc2=0
FORGED_TEST_STAGE_DELAY=check:1500 "$FORGED" forge "$FIXTURES/qwen35_hf" --out "$TMP/race" --json \
	>"$TMP/race1.json" 2>"$TMP/race1.err" &
P1=$!
FORGED_TEST_STAGE_DELAY=check:1500 "$FORGED" forge "$FIXTURES/qwen35_mlx_sidecar" --out "$TMP/race" --json \
	>"$TMP/race2.json" 2>"$TMP/race2.err" &
P2=$!
wait "$P1" || rc1=$?
wait "$P2" || rc2=$?
check "racing forges: one succeeds and one fails (exits $rc1 and $rc2)" \
	[ "$(printf '%s\n' "$rc1" "$rc2" | sort | tr '\n' ' ')" = "0 2 " ]
if [ "$rc1" = 0 ]; then win=1 lose=2; else win=2 lose=1; fi
check "racing forges: the loser says the destination already exists" grep -q "already exists" "$TMP/race$lose.err"
check "racing forges: the artifact is the winner's" \
	[ "$(jq -r .fingerprint "$TMP/race/forged.json")" = "$(jq -r .fingerprint "$TMP/race$win.json")" ]
check "racing forges: no temporary folder left" [ -z "$(ls -A "$TMP" | grep forged-tmp)" ]
finish
