#!/usr/bin/env bash
# The one command-line grammar (daemon/args.h) in every command: getopt_long
# everywhere (options before or after arguments, --opt=value and --opt value,
# abbreviations, '--' ending the options, -h), errors that name the option
# and show the command's synopsis, valid values listed in errors and in help,
# the global --color and --json-style before or after the command, one JSON
# style for every document (pretty on a terminal, compact otherwise), and
# completions made from the same option tables the parser reads.
#
# The client commands' grammar against a server is in test_client.sh; here
# they fail in the parse, before any connection.
set -u
. "$(dirname "$0")/lib.sh"
FIXTURES=$(cd "$FIXTURES" && pwd)
unset NO_COLOR FORGED_URL FORGED_TOKEN

# cli NAME ARGS...: forged with stdout in $TMP/NAME.out, stderr in $TMP/NAME.err, the status in $RC.
cli() {
	local name=$1
	shift
	LAST=$name
	RC=0
	timeout 120 "$FORGED" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" </dev/null || RC=$?
}
expect_rc() {
	if [ "$RC" = "$2" ]; then ok; else bad "$1: exit $RC, want $2: $(head -c 400 "$TMP/$LAST.err")"; fi
}
# err_has DESC TEXT: the last command's stderr holds TEXT (a fixed string).
err_has() {
	if grep -qF -- "$2" "$TMP/$LAST.err"; then ok; else bad "$1: stderr lacks '$2': $(head -c 400 "$TMP/$LAST.err")"; fi
}
# usage_error DESC TEXT ARGS...: exit 2, TEXT on stderr, a usage line, nothing on stdout.
usage_error() {
	local desc=$1 text=$2
	shift 2
	cli ue "$@"
	expect_rc "$desc" 2
	err_has "$desc: the message" "$text"
	check "$desc: a usage line follows" grep -q "^usage: forged \|'forged help [a-z]*' lists its subcommands" "$TMP/ue.err"
	check "$desc: nothing on stdout" [ ! -s "$TMP/ue.out" ]
}
# one_line FILE: FILE is one JSON document on one line.
one_line() { [ "$(wc -l <"$1")" = 1 ] && [ "$(jq -s length "$1" 2>/dev/null)" = 1 ]; }
# pretty FILE: FILE is one JSON document over several lines, indented with tabs.
pretty() { [ "$(wc -l <"$1")" -gt 2 ] && grep -q $'^\t"' "$1" && [ "$(jq -s length "$1" 2>/dev/null)" = 1 ]; }
# same_json A B: the same document (jq's canonical form).
same_json() { cmp -s <(jq -S . "$1") <(jq -S . "$2"); }

SRC=$FIXTURES/qwen35_hf
ST=$FIXTURES/qwen35_hf/model-00001-of-00002.safetensors
cat >"$TMP/rows.json" <<'EOF'
{"schema": "forged.verification.v1", "rows": [{"depth": 0, "tok_s": 15.04},
 {"depth": 1, "tok_s": 34.1, "acceptance": [0.978], "quality_passed": true}]}
EOF

# ---- every command: -h and --help, help COMMAND, an unknown option ----
cli overview --help
COMMANDS=$(sed -n '/^commands:/,/^$/p' "$TMP/overview.out" | awk 'NF && $1 != "commands:" {print $1}')
check "the overview lists the commands" [ "$(wc -w <<<"$COMMANDS")" -ge 11 ]
for c in $COMMANDS; do
	cli "help_$c" help "$c"
	cli "long_$c" "$c" --help
	expect_rc "forged $c --help" 0
	cli "short_$c" "$c" -h
	expect_rc "forged $c -h" 0
	check "forged $c --help is 'forged help $c'" cmp -s "$TMP/help_$c.out" "$TMP/long_$c.out"
	check "forged $c -h is --help" cmp -s "$TMP/short_$c.out" "$TMP/long_$c.out"
	check "forged $c --help names the global options" grep -q "^global options: .*--color=auto|always|never.*--json-style=auto|pretty|compact" "$TMP/long_$c.out"
	cli "after_$c" "$c" --frobnicate
	expect_rc "forged $c --frobnicate" 2
	err_has "forged $c --frobnicate: named" "unknown option '--frobnicate'"
	cli "color_$c" "$c" --color=sometimes
	expect_rc "forged $c --color=sometimes" 2
	err_has "forged $c --color=sometimes: the values" "--color 'sometimes' is not one of auto, always or never"
done
# A group's subcommand shows its own synopsis.
usage_error "jobs list --frobnicate" "forged jobs list: unknown option '--frobnicate'" jobs list --frobnicate
check "jobs list: its synopsis" grep -q "^usage: forged jobs list \[--state" "$TMP/ue.err"
# The help of the commands that take a runtime, a verdict code or a family lists them.
for c in forge inspect jobs fleet; do
	check "help $c lists the runtimes" grep -q "^  mtplx-2.12 " "$TMP/help_$c.out"
	check "help $c lists the hf alias" grep -q "^  hf  *alias:" "$TMP/help_$c.out"
done
check "help artifacts lists the verdict codes" grep -q "^verdict codes .*head_double_shifted, .*mtp_acceptance_collapsed" "$TMP/help_artifacts.out"
check "help artifacts lists the families" grep -q "^families: qwen3_next, .*unknown$" "$TMP/help_artifacts.out"

# ---- one grammar in every command ----
# Options before or after the argument, --opt=value or --opt value, abbreviations.
cli i1 inspect "$SRC" --json --runtime mlx-lm-0.32
expect_rc "inspect SRC --json --runtime ID" 0
cli i2 inspect --runtime=mlx-lm-0.32 --json "$SRC"
check "inspect --runtime=ID --json SRC: the same report" cmp -s "$TMP/i1.out" "$TMP/i2.out"
cli i3 inspect --runt mlx-lm-0.32 "$SRC" --json
check "inspect --runt ID: an unambiguous abbreviation" cmp -s "$TMP/i1.out" "$TMP/i3.out"
check "inspect: mlx-lm-0.32 was the target" [ "$(jq -r '[.runtimes[] | select(.targeted) | .runtime] | join(",")' "$TMP/i1.out")" = mlx-lm-0.32 ]
cli v1 verdict --collapse-threshold=0.5 --json "$TMP/rows.json"
cli v2 verdict "$TMP/rows.json" --json --collapse-threshold 0.5
check "verdict --collapse-threshold=X and --collapse-threshold X" cmp -s "$TMP/v1.out" "$TMP/v2.out"
check "verdict: the rows decided" [ "$(jq -r .verdict "$TMP/v1.out" 2>/dev/null)" = mtp_depth_wins ]
# The same with POSIXLY_CORRECT set (getopt would stop at the first argument).
LAST=posix; RC=0
POSIXLY_CORRECT=1 "$FORGED" inspect "$SRC" --json --runtime mlx-lm-0.32 >"$TMP/posix.out" 2>"$TMP/posix.err" || RC=$?
check "POSIXLY_CORRECT: options after the argument still read" cmp -s "$TMP/i1.out" "$TMP/posix.out"
LAST=posix2; RC=0
POSIXLY_CORRECT=1 "$FORGED" jobs list --server http://127.0.0.1:9 --state done >"$TMP/posix2.out" 2>"$TMP/posix2.err" || RC=$?
err_has "POSIXLY_CORRECT: a client subcommand's options read" "--state 'done' is not one of"
# '--' ends the options: names that begin with '-' are arguments after it.
mkdir -p "$TMP/w"
cp -r "$SRC" "$TMP/w/-src"
cp "$ST" "$TMP/w/-t.safetensors"
cp "$TMP/rows.json" "$TMP/w/-rows.json"
(cd "$TMP/w" && "$FORGED" inspect --json -- -src >"$TMP/dd_inspect.out" 2>"$TMP/dd_inspect.err")
check "inspect -- -src: the source named -src" [ "$(jq -r .source "$TMP/dd_inspect.out" 2>/dev/null)" = -src ]
(cd "$TMP/w" && "$FORGED" tensors --json -- -t.safetensors >"$TMP/dd_tensors.out" 2>"$TMP/dd_tensors.err")
check "tensors -- -t.safetensors" [ "$(jq -r .file "$TMP/dd_tensors.out" 2>/dev/null)" = -t.safetensors ]
(cd "$TMP/w" && "$FORGED" verdict --json -- -rows.json >"$TMP/dd_verdict.out" 2>"$TMP/dd_verdict.err")
check "verdict -- -rows.json" [ "$(jq -r .verdict "$TMP/dd_verdict.out" 2>/dev/null)" = mtp_depth_wins ]
(cd "$TMP/w" && "$FORGED" forge --out=art --json -- -src >"$TMP/dd_forge.out" 2>"$TMP/dd_forge.err")
check "forge --out=DIR -- -src: written" [ "$(jq -r .ok "$TMP/dd_forge.out" 2>/dev/null)" = true ] && [ -f "$TMP/w/art/mtp.safetensors" ]
(cd "$TMP/w" && "$FORGED" -- version --json >"$TMP/dd_version.out" 2>"$TMP/dd_version.err")
check "forged -- version" [ "$(jq -r .schema "$TMP/dd_version.out" 2>/dev/null)" = forged.version.v1 ]
cli dd_help help -- inspect
check "help -- inspect" cmp -s "$TMP/dd_help.out" "$TMP/help_inspect.out"
cli dd_comp completion -- bash
check "completion -- bash" cmp -s "$TMP/dd_comp.out" <("$FORGED" completion bash)

# ---- uniform errors: the option named, the synopsis shown ----
usage_error "a missing value" "forged verdict: --collapse-threshold needs a value" verdict "$TMP/rows.json" --collapse-threshold
usage_error "forge: a missing value" "forged forge: --out needs a value" forge "$SRC" --out
check "forge: the whole synopsis (every line)" grep -q "^  *\[--quant keep|match|affine:BITS:GROUP|mxfp4\] \[--allow-requantize\]$" "$TMP/ue.err"
check "forge: the synopsis' last line" grep -q "^  *\[--keep-originals copy|auto\] \[--json\] \[--force\]$" "$TMP/ue.err"
usage_error "a flag given a value" "forged tensors: --json takes no value" tensors --json=yes "$ST"
usage_error "an unknown short option" "forged inspect: unknown option '-x'" inspect -x "$SRC"
usage_error "a misspelt option: the nearest named" "forged forge: unknown option '--traget' (did you mean --target?)" \
	forge "$SRC" --out "$TMP/o" --traget mtplx-2.12
usage_error "an ambiguous abbreviation: the candidates" "forged version: ambiguous option '--js': --json-style, --json" version --js
usage_error "a second SOURCE" "forged inspect: one SOURCE only (got '$SRC' and 'x')" inspect "$SRC" x
usage_error "no SOURCE" "forged forge: missing SOURCE" forge --out "$TMP/o"
usage_error "serve: an unknown option" "forged serve: unknown option '--bogus'" serve --bogus
check "serve: the synopsis lists the keys' flags" grep -q "\[--inspect-seconds N\]" "$TMP/ue.err"
usage_error "serve: a missing value" "forged serve: --workers needs a value" serve --workers
usage_error "serve: a bad number" "forged serve: workers 'abc' is not an integer" serve --state-dir="$TMP/never" --workers=abc
check "serve: nothing made for a bad command line" [ ! -e "$TMP/never" ]
# A long command line (a farm's instance: 24 words) reaches the command whole; its own last error shows.
usage_error "serve: a long command line is the command's to read" "forged serve: workers 'abc' is not an integer" \
	serve --listen 127.0.0.1:0 --state-dir="$TMP/never" --allow-roots "$TMP" --allow-roots "$TMP/w" \
	--lease-seconds 4 --max-attempts 10 --drain-seconds 10 --http-threads 4 --queue-cap 9 --workers=abc
check "serve: nothing made for the long bad command line" [ ! -e "$TMP/never" ]
usage_error "help: an extra argument" "forged help: unexpected argument 'x'" help inspect x
cli top --frobnicate
expect_rc "forged --frobnicate" 2
err_has "forged --frobnicate: named" "forged: unknown option '--frobnicate'"

# ---- valid values listed ----
usage_error "forge: an unknown target" "forged forge: --target 'vllm-9' is not a runtime: one of mlx-lm-0.31, " \
	forge "$SRC" --out "$TMP/o" --target vllm-9
err_has "forge: the alias and versioned ids" "sglang, hf (an alias), or a versioned id (mlx-lm-0.33, mtplx-2.11.3)"
check "forge: nothing written for an unknown target" [ ! -e "$TMP/o" ]
usage_error "inspect: an unknown runtime" "forged inspect: --runtime 'vllm-9' is not a runtime: one of mlx-lm-0.31, " \
	inspect "$SRC" --runtime=vllm-9
usage_error "forge: a bad policy" "--quant 'affine:7:64' is not a policy: keep, match, affine:BITS:GROUP (BITS 2 3 4 5 6 8, GROUP 32 64 128) or mxfp4" \
	forge "$SRC" --out "$TMP/o" --quant affine:7:64
usage_error "--json-style: the styles" "--json-style 'fancy' is not one of auto, pretty or compact" version --json-style=fancy
usage_error "artifacts list: an unknown verdict code" "--verdict 'head_flipped' is not a verdict code: one of trunk_double_shifted, " \
	artifacts list --verdict head_flipped --server http://127.0.0.1:9
err_has "artifacts list: every code" "head_double_shifted"
usage_error "artifacts list: an unknown family" "--family 'qwen9' is not a family: one of qwen3_next, qwen3_5, " \
	artifacts list --family qwen9 --server http://127.0.0.1:9
err_has "artifacts list: unknown is a family too" ", unknown"
usage_error "jobs list: an unknown state" "--state 'done' is not one of queued, running, succeeded, failed or cancelled" \
	jobs list --state done --server http://127.0.0.1:9
usage_error "jobs: an ambiguous abbreviation" "ambiguous option '--s': --server, --state" jobs list --s x

# ---- one JSON style: pretty on a terminal, compact otherwise, or --json-style ----
# on_tty NAME ARGS...: forged on a pseudo-terminal (script), stdout and stderr in $TMP/NAME.out (no CRs).
on_tty() {
	local name=$1 cmd
	shift
	printf -v cmd '%q ' "$FORGED" "$@"
	TERM=dumb script -qec "$cmd" /dev/null | tr -d '\r' >"$TMP/$name.out"
}
docs=(
	"version|version --json"
	"inspect|inspect $SRC --json"
	"tensors|tensors $ST --json"
	"verdict|verdict $TMP/rows.json --json"
)
for d in "${docs[@]}"; do
	name=${d%%|*}
	read -r -a args <<<"${d#*|}"
	cli "js_$name" "${args[@]}"
	check "$name --json into a pipe: compact, one line" one_line "$TMP/js_$name.out"
	cli "jp_$name" "${args[@]}" --json-style=pretty
	check "$name --json --json-style=pretty into a pipe: pretty" pretty "$TMP/jp_$name.out"
	check "$name: the pretty document is the compact one" same_json "$TMP/js_$name.out" "$TMP/jp_$name.out"
	on_tty "jt_$name" "${args[@]}"
	check "$name --json on a terminal: pretty" pretty "$TMP/jt_$name.out"
	on_tty "jc_$name" --json-style=compact "${args[@]}"
	check "$name --json on a terminal with --json-style=compact (before the command): one line" one_line "$TMP/jc_$name.out"
done
check "tensors pretty: streamed as cJSON lays out a document (tensor keys three tabs deep)" \
	grep -q $'^\t\t\t"name":\t"model.language_model.embed_tokens.weight",$' "$TMP/jp_tensors.out"
cli fs_c forge "$FIXTURES/qwen35_mlx_head_shifted" --out "$TMP/refused" --json
expect_rc "forge --json of a refused source" 1
check "forge --json into a pipe: compact" one_line "$TMP/fs_c.out"
cli fs_p forge "$FIXTURES/qwen35_mlx_head_shifted" --out "$TMP/refused" --json --json-style pretty
check "forge --json --json-style pretty: pretty, the same refusal" pretty "$TMP/fs_p.out"
check "forge: the refusal is head_double_shifted" [ "$(jq -r .refusal.code "$TMP/fs_p.out" 2>/dev/null)" = head_double_shifted ]

# ---- completions come from the option tables, and match the synopses ----
"$FORGED" completion bash >"$TMP/bash.sh"
# synopsis_opts CMD [SUB]: the long options the help's synopsis names (not the global ones).
synopsis_opts() {
	if [ $# = 1 ]; then
		sed '/^$/q' "$TMP/help_$1.out"
	else
		grep -E "^(usage:|      ) forged $1 $2( |$)|^options of every $1 subcommand:" "$TMP/help_$1.out"
	fi | grep -o -- '--[a-z][a-z0-9-]*' | grep -vxE -- '--(help|color|json-style)' | sort -u
}
# completion_opts "CMD [SUB]": what bash completion offers as its options (not the global ones).
completion_opts() {
	bash -c 'source "$1"; _forged_opts "$2"' _ "$TMP/bash.sh" "$1" | tr ' ' '\n' |
		grep -vxE -- '--(help|color|json-style)' | grep . | sort -u
}
for c in $COMMANDS; do
	subs=$(bash -c 'source "$1"; _forged_subs "$2"' _ "$TMP/bash.sh" "$c")
	if [ -z "$subs" ] || [ "$c" = completion ]; then
		want=$(synopsis_opts "$c")
		got=$(completion_opts "$c")
		[ "$c" = completion ] && got=$(completion_opts "$c bash")
		check "completion of $c: the options its synopsis names ($(tr '\n' ' ' <<<"$got"))" [ "$got" = "$want" ]
	else
		for s in $subs; do
			want=$(synopsis_opts "$c" "$s")
			got=$(completion_opts "$c $s")
			check "completion of $c $s: the options its synopsis names ($(tr '\n' ' ' <<<"$got"))" [ "$got" = "$want" ]
		done
	fi
done
comp() {
	bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _forged; echo "${COMPREPLY[*]}"' \
		_ "$TMP/bash.sh" "$@"
}
check "bash: forged inspect --json-s<TAB>" [ "$(comp forged inspect --json-s)" = --json-style ]
check "bash: forged version --json-style <TAB>" [ "$(comp forged version --json-style '')" = "auto pretty compact" ]
check "bash: forged artifacts list --family glm<TAB>" [ "$(comp forged artifacts list --family glm)" = "glm4_moe glm4_moe_lite glm_moe_dsa" ]
check "bash: forged artifacts list --verdict head_d<TAB>" [ "$(comp forged artifacts list --verdict head_d)" = head_double_shifted ]
check "bash: forged --c<TAB>" [ "$(comp forged --c)" = --color ]

finish
