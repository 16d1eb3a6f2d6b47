#!/usr/bin/env bash
# bench/forge/scale.sh: how forge's and inspect's time grows with the number of
# tensors.  The same command runs on a head (or shard) of N and of 10 x N
# experts, interleaved, and each case is the ratio big / small: about 10 is
# linear, 100 quadratic.  The tensors are tiny (bench/forge/gen_big_head.py
# --small: experts of [32, 64]), so what is timed is per-tensor work, not
# bytes.  Written after a review found five quadratic loops (a header lookup
# per tensor in the safetensors writer, a name scan per expert in the plan,
# a records scan per original, an all-pairs count of quantized modules, a
# module scan per module): at N = 1,000 and 10,000 experts they made these
# ratios 30-140 and a 98,600-tensor shard rewrite take 82 s.
#
# Commands, each on N (small) and 10 x N (big) experts:
#   keep      forge a BF16 head, default policy
#   mxfp4     forge it --quant mxfp4 --allow-requantize --target lmstudio-mlx (an original
#             per expert; MTPLX, the default target, refuses an mxfp4 head over a BF16 trunk)
#   fp8       forge an F8_E4M3 head with block scales (dequantized to BF16)
#   inspect8  inspect the F8_E4M3 head (quantized_mtp_head counts its modules)
#   rewrite   forge a one-shard checkpoint whose trunk holds 4 layers of N/4
#             numbered experts, for ollama-mlx (which stacks them at load): the
#             shard is rewritten without the head
# Cases NAME_scale (big / small); best and median of REPS interleaved rounds,
# wall and CPU (user + sys) from bench/measure.py.  Never asserted.
#
#   bash bench/forge/scale.sh
#   env: N=1000 REPS=3 FORGED=build/forged BENCH_DIR=build/bench
#        BENCH_QUICK=1: N=100, REPS=1
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
FORGED=${FORGED:-build/forged}
REPS=${REPS:-$(quick 3 1)}
N=${N:-$(quick 1000 100)}
DIR=$BENCH_DIR/forge_scale
OUT=$DIR/out
mkdir -p "$DIR"
trap 'rm -rf "$OUT"' EXIT

gen() { # gen NAME ARGS...: the checkpoint DIR/NAME, made once
	local d=$DIR/$1
	shift
	[ -f "$d/config.json" ] || "$BENCH_PYTHON" bench/forge/gen_big_head.py "$d" --small "$@" >/dev/null
}
bench_init forge_scale n_small="$N" n_big="$((10 * N))" reps="$REPS"
cmds=(--)
cases=()
for size in small big; do
	e=$([ "$size" = small ] && echo "$N" || echo "$((10 * N))")
	gen "bf16_$e" --experts "$e"
	gen "fp8_$e" --experts "$e" --fp8
	gen "one_$e" --experts 4 --one-shard --trunk-experts "$((e / 4))"
	[ "${#cmds[@]}" -gt 1 ] && cmds+=(:::)
	cmds+=("keep_$size" "$FORGED" forge "$DIR/bf16_$e" --out "$OUT"
		::: "mxfp4_$size" "$FORGED" forge "$DIR/bf16_$e" --out "$OUT" --quant mxfp4 --allow-requantize --target lmstudio-mlx
		::: "fp8_$size" "$FORGED" forge "$DIR/fp8_$e" --out "$OUT"
		::: "inspect8_$size" "$FORGED" inspect "$DIR/fp8_$e" --json
		::: "rewrite_$size" "$FORGED" forge "$DIR/one_$e" --out "$OUT" --target ollama-mlx)
done
for c in keep mxfp4 fp8 inspect8 rewrite; do
	cases+=(--case "${c}_scale=${c}_big/${c}_small")
done
echo "experts: $N and $((10 * N)) (x 3 tensors each); rewrite: $((N / 4 * 12)) and $((10 * N / 4 * 12)) trunk expert tensors"
bl abrun "$FRAG" --reps "$REPS" --pre "keep_small=rm -rf '$OUT'" --pre "keep_big=rm -rf '$OUT'" \
	--pre "mxfp4_small=rm -rf '$OUT'" --pre "mxfp4_big=rm -rf '$OUT'" --pre "fp8_small=rm -rf '$OUT'" \
	--pre "fp8_big=rm -rf '$OUT'" --pre "rewrite_small=rm -rf '$OUT'" --pre "rewrite_big=rm -rf '$OUT'" \
	"${cases[@]}" "${cmds[@]}"
bench_ok
