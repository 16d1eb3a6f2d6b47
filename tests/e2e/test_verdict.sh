#!/usr/bin/env bash
# `forged verdict` on hand-written verification rows: the MTPLX issue-306
# figures collapse (exit 1), the healthy control wins at depth 3 (exit 0),
# and each kind of bad input or usage exits 2 with its message on stderr and
# nothing on stdout.  Also MTPLX's own verify.json and tune payload (issue
# 13): MTPLX's structure in the result, its own verdict compared, both
# thresholds, unknown fields named.
set -u
. "$(dirname "$0")/lib.sh"

# Issue 306 as measured (docs/domain.md section 3).
cat >"$TMP/306.json" <<'EOF'
{"schema": "forged.verification.v1", "hardware": "M4 Max", "runtime": "mtplx-2.12",
 "rows": [{"depth": 0, "tok_s": 15.04},
          {"depth": 1, "tok_s": 13.46, "acceptance": [0.067], "quality_passed": true},
          {"depth": 2, "tok_s": 11.48, "acceptance": [0.067, 0.004]},
          {"depth": 3, "tok_s": 11.18, "acceptance": [0.067, 0.004, 0.0]}]}
EOF
# The same quantization without embedded mtp.* keys: 97.8 % acceptance,
# 2.271x at depth 1, 3.140x at depth 3 (tok/s = 15.04 x ratio).
cat >"$TMP/control.json" <<'EOF'
{"schema": "forged.verification.v1", "hardware": "M4 Max", "runtime": "mtplx-2.12",
 "rows": [{"depth": 0, "tok_s": 15.04},
          {"depth": 1, "tok_s": 34.15584, "acceptance": [0.978], "quality_passed": true},
          {"depth": 2, "tok_s": 42.112, "acceptance": [0.978, 0.95], "quality_passed": true},
          {"depth": 3, "tok_s": 47.2256, "acceptance": [0.978, 0.95, 0.93], "quality_passed": true}]}
EOF

# jq_is FILE FILTER WANT: the filter's raw output equals WANT.
jq_is() {
	local got
	got=$(jq -r "$2" "$1" 2>/dev/null)
	[ "$got" = "$3" ] || { printf '  %s: got "%s", want "%s"\n' "$2" "$got" "$3" >&2; return 1; }
}

# one_document FILE: FILE holds exactly one JSON value.
one_document() {
	[ "$(jq -s length "$1" 2>/dev/null)" = 1 ]
}

# Issue 306: an error verdict, exit 1, one JSON document.
rc=0; run_forged "$TMP/out" "$TMP/err" verdict "$TMP/306.json" --json || rc=$?
check "306 exits 1 (do not ship)" [ "$rc" -eq 1 ]
check "306 prints one JSON document" one_document "$TMP/out"
check "306 verdict" jq_is "$TMP/out" .verdict mtp_acceptance_collapsed
check "306 severity" jq_is "$TMP/out" .severity error
check "306 best_depth null" jq_is "$TMP/out" '.best_depth' null
check "306 speedup depth 1" jq_is "$TMP/out" '.speedups."1"' 0.895
check "306 speedup depth 2" jq_is "$TMP/out" '.speedups."2"' 0.763
check "306 speedup depth 3" jq_is "$TMP/out" '.speedups."3"' 0.743
check "306 no speedup for depth 0" jq_is "$TMP/out" '.speedups | has("0")' false
check "306 best first acceptance" jq_is "$TMP/out" .best_first_acceptance 0.067
check "306 runtime" jq_is "$TMP/out" .runtime mtplx-2.12
check "306 schema" jq_is "$TMP/out" .schema forged.verdict.v1
check "306 --json says nothing on stderr" [ ! -s "$TMP/err" ]

# Human output: same exit code, the verdict, a line per depth, the rule.
rc=0; run_forged "$TMP/out" "$TMP/err" verdict "$TMP/306.json" || rc=$?
check "306 human exits 1" [ "$rc" -eq 1 ]
check "306 human names the verdict" grep -q "mtp_acceptance_collapsed" "$TMP/out"
check "306 human shows no best depth" grep -q "best depth: none" "$TMP/out"
check "306 human shows depth 1" grep -Eq '^ +1 +13\.46 +0\.895x' "$TMP/out"
check "306 human has a line per depth" [ "$(grep -Ec '^ +[0-3] +[0-9.]+ +[0-9.]+x' "$TMP/out")" -eq 4 ]
check "306 human names the rule" grep -q "rule 3 of 4" "$TMP/out"

# A looser threshold than the measured 6.7 %: no collapse, warning, exit 0.
rc=0; run_forged "$TMP/out" "$TMP/err" verdict "$TMP/306.json" --json --collapse-threshold 0.05 || rc=$?
check "306 at threshold 0.05 exits 0" [ "$rc" -eq 0 ]
check "306 at threshold 0.05 verdict" jq_is "$TMP/out" .verdict no_mtp_depth_beat_ar
rc=0; run_forged "$TMP/out" "$TMP/err" verdict --collapse-threshold=0.067 "$TMP/306.json" --json || rc=$?
check "threshold equal to the acceptance collapses" [ "$rc" -eq 1 ]

# The control: depth 3 wins, exit 0.
rc=0; run_forged "$TMP/out" "$TMP/err" verdict "$TMP/control.json" --json || rc=$?
check "control exits 0" [ "$rc" -eq 0 ]
check "control verdict" jq_is "$TMP/out" .verdict mtp_depth_wins
check "control severity" jq_is "$TMP/out" .severity info
check "control best_depth" jq_is "$TMP/out" .best_depth 3
check "control speedup depth 1" jq_is "$TMP/out" '.speedups."1"' 2.271
check "control speedup depth 3" jq_is "$TMP/out" '.speedups."3"' 3.14
rc=0; run_forged "$TMP/out" "$TMP/err" verdict "$TMP/control.json" || rc=$?
check "control human exits 0" [ "$rc" -eq 0 ]
check "control human best depth" grep -q "best depth: 3" "$TMP/out"

# A faster depth that failed quality: warning, exit 0.
cat >"$TMP/quality.json" <<'EOF'
{"schema": "forged.verification.v1", "rows": [{"depth": 0, "tok_s": 10.0},
          {"depth": 1, "tok_s": 14.0, "acceptance": [0.8], "quality_passed": false}]}
EOF
rc=0; run_forged "$TMP/out" "$TMP/err" verdict "$TMP/quality.json" --json || rc=$?
check "quality failure exits 0" [ "$rc" -eq 0 ]
check "quality failure verdict" jq_is "$TMP/out" .verdict no_quality_passed_mtp_depth_beat_ar

# bad_input NAME PHRASE ARGS...: exit 2, PHRASE on stderr, nothing on stdout.
bad_input() {
	local name=$1 phrase=$2 rc=0; shift 2
	run_forged "$TMP/out" "$TMP/err" verdict "$@" || rc=$?
	if [ "$rc" -ne 2 ]; then
		bad "$name: exit $rc, want 2 ($(head -c 300 "$TMP/err"))"
	elif ! grep -qF -- "$phrase" "$TMP/err"; then
		bad "$name: message '$(head -c 300 "$TMP/err")' lacks '$phrase'"
	elif [ -s "$TMP/out" ]; then
		bad "$name: printed on stdout"
	else
		ok
	fi
}

cat >"$TMP/no_depth0.json" <<'EOF'
{"schema": "forged.verification.v1", "rows": [{"depth": 1, "tok_s": 13.46, "acceptance": [0.067]},
          {"depth": 2, "tok_s": 11.48, "acceptance": [0.067, 0.004]}]}
EOF
cat >"$TMP/negative.json" <<'EOF'
{"schema": "forged.verification.v1", "rows": [{"depth": 0, "tok_s": 15.04}, {"depth": 1, "tok_s": -3}]}
EOF
cat >"$TMP/accept15.json" <<'EOF'
{"schema": "forged.verification.v1", "rows": [{"depth": 0, "tok_s": 15.04}, {"depth": 1, "tok_s": 13.46, "acceptance": [1.5]}]}
EOF
cat >"$TMP/malformed.json" <<'EOF'
{"rows": [{"depth": 0, "tok_s": 15.04},
EOF
cat >"$TMP/wrong_schema.json" <<'EOF'
{"schema": "forged.inspect.v1", "rows": [{"depth": 0, "tok_s": 15.04}]}
EOF

bad_input "no depth 0" "rows have no depth 0 (plain decode) to compare against" "$TMP/no_depth0.json"
bad_input "no depth 0 names the file" "no_depth0.json" "$TMP/no_depth0.json" --json
bad_input "negative tok_s" 'rows[1]: "tok_s" is negative (-3)' "$TMP/negative.json"
bad_input "acceptance 1.5" 'rows[1]: "acceptance"[0] is 1.5, outside [0, 1]' "$TMP/accept15.json" --json
bad_input "malformed JSON" "malformed.json: invalid JSON" "$TMP/malformed.json"
bad_input "wrong schema" "expected 'forged.verification.v1'" "$TMP/wrong_schema.json"
bad_input "missing file" "nope.json: cannot open" "$TMP/nope.json"
bad_input "a folder" "not a readable regular file" "$TMP"
bad_input "threshold 1" "collapse threshold '1' is not a number in (0, 1)" "$TMP/306.json" --collapse-threshold 1
bad_input "threshold 0" "collapse threshold '0' is not a number in (0, 1)" "$TMP/306.json" --collapse-threshold 0
bad_input "threshold -0.1" "collapse threshold '-0.1'" "$TMP/306.json" --collapse-threshold=-0.1
bad_input "threshold text" "collapse threshold 'ten'" "$TMP/306.json" --collapse-threshold ten
bad_input "threshold nan" "collapse threshold 'nan'" "$TMP/306.json" --collapse-threshold nan
bad_input "threshold without value" "--collapse-threshold needs a value" "$TMP/306.json" --collapse-threshold
bad_input "no file" "missing ROWS.json" --json
bad_input "two files" "one ROWS.json only" "$TMP/306.json" "$TMP/control.json"
bad_input "unknown option" "unknown option '--bogus'" "$TMP/306.json" --bogus

# Over the 1 MiB cap.
{ printf '{"pad": "'; head -c 1100000 /dev/zero | tr '\0' x; printf '", "rows": [{"depth": 0, "tok_s": 1}]}\n'; } >"$TMP/huge.json"
bad_input "over the size cap" "exceed the cap" "$TMP/huge.json"

# ---- MTPLX's own files, as MTPLX writes them (issue 13) ----
# Issue 306 as MTPLX's verify.json, carrying the verdict MTPLX's own 0.05 gives it.
cat >"$TMP/verify.json" <<'EOF'
{"rows": [{"depth": 0, "tok_s": 15.04, "multiplier_vs_ar": 1.0, "acceptance_by_position": [], "verify_time_s": 12.1},
          {"depth": 1, "tok_s": 13.46, "multiplier_vs_ar": 0.895, "acceptance_by_position": [0.067],
           "verify_time_s": 10.2, "hit_token_budget": false, "hit_token_budget_count": 0,
           "finish_reasons": {"stop": 1}, "quality_passed": true, "validations_total": 2, "validations_passed": 2},
          {"depth": 2, "tok_s": 11.48, "multiplier_vs_ar": 0.763, "acceptance_by_position": [0.067, 0.004],
           "verify_time_s": 9.7},
          {"depth": 3, "tok_s": 11.18, "multiplier_vs_ar": 0.743, "acceptance_by_position": [0.067, 0.004, 0.0],
           "verify_time_s": 9.5}],
 "verdict": "no_mtp_depth_beat_ar", "failure_reasons": ["no_mtp_depth_beat_ar"]}
EOF
rc=0; run_forged "$TMP/out" "$TMP/err" verdict "$TMP/verify.json" --json || rc=$?
check "verify.json: exit 1 at the default 0.10 (the published verdict)" [ "$rc" -eq 1 ]
check "verify.json: source_format" jq_is "$TMP/out" .source_format mtplx.verify
check "verify.json: collapsed" jq_is "$TMP/out" .verdict mtp_acceptance_collapsed
check "verify.json: MTPLX's failure_reasons" jq_is "$TMP/out" '.failure_reasons | join(",")' \
	mtp_acceptance_collapsed,no_mtp_depth_beat_ar
check "verify.json: collapsed depths" jq_is "$TMP/out" '[.acceptance_collapsed[].depth] | join(",")' 1,2,3
check "verify.json: a collapsed entry keeps verify_time_s" jq_is "$TMP/out" '.acceptance_collapsed[0].verify_time_s' 10.2
check "verify.json: threshold" jq_is "$TMP/out" .threshold 0.1
check "verify.json: MTPLX's verdict kept" jq_is "$TMP/out" .mtplx_verdict no_mtp_depth_beat_ar
check "verify.json: the disagreement reported" jq_is "$TMP/out" .agrees false
check "verify.json: speed_evidence" jq_is "$TMP/out" \
	'[.speed_evidence.depth, .speed_evidence.greedy_diagnostic.tok_s] | map(tostring) | join(",")' 0,15.04
check "verify.json: unused MTPLX fields listed" jq_is "$TMP/out" '.unused_fields | join(",")' \
	"rows[].validations_total,rows[].validations_passed"
check "verify.json: the old fields as before" jq_is "$TMP/out" \
	'[.severity, .speedups."1", .best_first_acceptance] | map(tostring) | join(",")' error,0.895,0.067
rc=0; run_forged "$TMP/out" "$TMP/err" verdict "$TMP/verify.json" --json --collapse-threshold 0.05 || rc=$?
check "verify.json at MTPLX's 0.05: exit 0" [ "$rc" -eq 0 ]
check "verify.json at 0.05: no_mtp_depth_beat_ar" jq_is "$TMP/out" .verdict no_mtp_depth_beat_ar
check "verify.json at 0.05: agrees with MTPLX" jq_is "$TMP/out" .agrees true
check "verify.json at 0.05: reasons" jq_is "$TMP/out" '.failure_reasons | join(",")' no_mtp_depth_beat_ar
rc=0; run_forged "$TMP/out" "$TMP/err" verdict "$TMP/verify.json" || rc=$?
check "verify.json human: exit 1" [ "$rc" -eq 1 ]
check "verify.json human: the source" grep -q "^source: mtplx.verify$" "$TMP/out"
check "verify.json human: the disagreement" grep -qF \
	"MTPLX's own verdict (verdict): no_mtp_depth_beat_ar [no_mtp_depth_beat_ar]: DISAGREES with mtp_acceptance_collapsed at collapse threshold 0.1" \
	"$TMP/out"
check "verify.json human: collapsed depths" grep -q "^acceptance collapsed at depth: 1, 2, 3$" "$TMP/out"
check "verify.json human: failure reasons" grep -q "^failure reasons: mtp_acceptance_collapsed, no_mtp_depth_beat_ar$" "$TMP/out"
check "verify.json human: a line per depth" [ "$(grep -Ec '^ +[0-3] +[0-9.]+ +[0-9.]+x' "$TMP/out")" -eq 4 ]
check "verify.json human: kept fields" grep -qF \
	"MTPLX fields kept, not used: rows[].validations_total, rows[].validations_passed" "$TMP/out"

# The tune payload: AR is mode "AR" with depth null; a failed candidate is skipped, as MTPLX skips it.
cat >"$TMP/tune.json" <<'EOF'
{"action": "tune", "run_id": "r1", "model": "m", "hardware": {"chip": "M4 Max"},
 "results": [{"mode": "AR", "depth": null, "tok_s": 15.04, "multiplier_vs_ar": 1.0},
             {"mode": "D1", "depth": 1, "tok_s": 34.15584, "multiplier_vs_ar": 2.271, "acceptance_by_depth": [0.978]},
             {"mode": "D2", "depth": 2, "error": "candidate did not write an artifact"}],
 "best_multiplier": {"available": true, "verdict": "mtp_depth_wins", "failure_reasons": []}}
EOF
rc=0; run_forged "$TMP/out" "$TMP/err" verdict "$TMP/tune.json" --json || rc=$?
check "tune payload: exit 0" [ "$rc" -eq 0 ]
check "tune payload: the control wins at depth 1" jq_is "$TMP/out" \
	'[.source_format, .verdict, .best_depth, .agrees] | map(tostring) | join(",")' mtplx.tune,mtp_depth_wins,1,true
check "tune payload: the skipped row described" jq_is "$TMP/out" '.skipped_rows[0]' \
	"results[2] (D2): no tok_s: candidate did not write an artifact"

# Unknown fields: exit 2 naming every one; a forged-shaped document without its schema is refused.
cat >"$TMP/typo.json" <<'EOF'
{"rows": [{"depth": 0, "tok_s": 15.04, "acceptance_by_position": []},
          {"depth": 1, "tok_s": 13.46, "acceptance_by_position": [0.067], "tok_per_s": 13.4}], "verdikt": "x"}
EOF
bad_input "unknown MTPLX fields named" \
	"unknown fields in an MTPLX verify.json: verdikt, rows[1].tok_per_s (not a field MTPLX writes there)" "$TMP/typo.json"
cat >"$TMP/typo_v1.json" <<'EOF'
{"schema": "forged.verification.v1", "rows": [{"depth": 0, "tok_s": 15.04, "acceptence": [0.5]}]}
EOF
bad_input "unknown forged field named" \
	'unknown field in a forged.verification.v1 document: rows[0].acceptence' "$TMP/typo_v1.json" --json
cat >"$TMP/noschema.json" <<'EOF'
{"rows": [{"depth": 0, "tok_s": 15.04}, {"depth": 1, "tok_s": 13.46, "acceptance": [0.067]}]}
EOF
bad_input "forged's shape without schema" \
	'no "schema": rows with "acceptance" are forged.verification.v1, which must say so' "$TMP/noschema.json"
echo '{"depths": []}' >"$TMP/shape.json"
bad_input "no recognisable shape" 'no "schema", and no shape forged recognises' "$TMP/shape.json"

rc=0; run_forged "$TMP/out" "$TMP/err" verdict --help || rc=$?
check "verdict --help exits 0" [ "$rc" -eq 0 ]
check "verdict --help prints its usage" grep -q "forged verdict ROWS.json" "$TMP/out"
finish
