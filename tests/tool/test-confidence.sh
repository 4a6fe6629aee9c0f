#!/usr/bin/env bash
# test-confidence.sh - the confidence of the verdict follows the strength of
# the evidence, on real tinygpt runs at initialization (step 0, gpt2 init):
# clean pre-norm and post-norm models of several depths and widths, both
# norms, are "confidence high" (at init the rival relations miss by 1e-3 to
# 1, f32 rounding leaves 1e-7); a sandwich is decided from its sites
# (what is added is the output of the norm on the branch), also with
# RMSNorm, whose output at init does not look normalized; evidence that is
# really weaker (only the stream recorded) is "medium" and the report says
# why.
# Usage: test-confidence.sh RESDIAG TINYGPT
set -u
tool=$1
tinygpt=$2
. "$(dirname "$0")/../helpers/tool-test-lib.sh"

tg() { "$tinygpt" --heads 2 --seq 8 --batch 2 --steps 1 --threads 1 --log-every 1000 "$@" \
       >/dev/null 2>"$dir/tg.err" || { cat "$dir/tg.err"; fail "tinygpt $*"; }; }

for p in pre post; do
  want=$([ $p = pre ] && echo pre-norm || echo post-norm)
  for n in layernorm rmsnorm; do
    for L in 2 6; do
      for d in 32 64; do
        f=$dir/${p}_${n}_${L}_${d}.h5
        tg --placement $p --norm $n --layers $L --d-model $d --out "$f"
        expect_exit 0 "$p $n L=$L d=$d: check --expect $want" -- "$tool" check --expect "$want" "$f"
        expect_text "$dir/out" "holds: $p (confidence high)" "$p $n L=$L d=$d"
        "$tool" report --json "$f" >"$dir/json" 2>"$dir/err" || fail "$p $n L=$L d=$d: report --json"
        expect_text "$dir/json" '"confidence": "high", "why": ' "$p $n L=$L d=$d JSON"
        expect_text "$dir/json" '"confidence_why": ""' "$p $n L=$L d=$d JSON reason empty"
      done
    done
  done
done

# The sandwich at gpt2 init: the branch entering Norm2 is small next to its
# epsilon; the structure (out_norm_in, out_norm_out) still says that what is
# added is Norm2's output.
for n in layernorm rmsnorm; do
  f=$dir/sandwich_$n.h5
  tg --placement sandwich --norm $n --layers 6 --d-model 64 --init gpt2 --out "$f"
  expect_exit 0 "sandwich $n: check --expect sandwich" -- "$tool" check --expect sandwich "$f"
  for e in pre-norm post-norm deepnorm mixed parallel none reordered per-sublayer; do
    expect_exit 1 "sandwich $n: check --expect $e" -- "$tool" check --expect "$e" "$f"
  done
  "$tool" report "$f" >"$dir/report" 2>"$dir/err" || fail "sandwich $n: report"
  expect_text "$dir/report" "branch_out is the output of a norm on the branch" \
      "sandwich $n: the deciding relation"
done

# Weaker evidence: only the stream. "medium", and the report says why.
f=$dir/post_stream.h5
tg --placement post --layers 4 --d-model 32 --record stream --out "$f"
"$tool" report "$f" >"$dir/report" 2>"$dir/err" || fail "stream: report"
expect_text "$dir/report" "(confidence medium)" "stream: medium"
expect_text "$dir/report" "confidence medium: only the stream's normalization signature" \
    "stream: the reason"
"$tool" report --json "$f" >"$dir/json" 2>"$dir/err" || fail "stream: report --json"
expect_text "$dir/json" '"confidence_why": "only the stream' "stream: JSON reason"
"$tool" report --html "$dir/stream.html" "$f" >"$dir/out" 2>"$dir/err" || fail "stream: --html"
expect_text "$dir/stream.html" "<tr><th>confidence medium</th><td>only the stream&#39;s" \
    "stream: HTML reason"

tool_test_finish
