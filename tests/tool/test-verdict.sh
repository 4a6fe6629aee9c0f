#!/usr/bin/env bash
# test-verdict.sh - `resdiag check` on real tinygpt runs: every placement x
# {layernorm, rmsnorm} x L in {2, 6, 12} x {--record full, --record stream}.
# Full records: the right expectation exits 0, every wrong one 1, but
# --expect sandwich on pre-norm: 2 (no out_norm sites to refute it).
# Stream-only records: the exact code the stream can decide (below), and
# where it cannot, exit 2 with the "cannot tell" line of that case. A post-norm model is
# never called pre-norm: `--expect pre-norm` on post, deepnorm and mix runs
# must exit 1 in both record modes. Full records of clean pre-norm and
# post-norm models at initialization are decisive evidence: "confidence
# high"; a sandwich is told from the relations at gpt2 init, RMSNorm too.
# reordered (x + Norm(F(x))) and hybrid (attention without a norm, MLP
# post-norm) are recorded full only: full records decide them as
# "reordered" and "per_sublayer" (--expect reordered, --expect
# per-sublayer), and full records of every placement are checked against
# those two expectations as well.
# Usage: test-verdict.sh RESDIAG TINYGPT   (VERDICT_TABLE=1 prints the table)
set -u
tool=$1
tinygpt=$2
. "$(dirname "$0")/../helpers/tool-test-lib.sh"

placements="pre post sandwich deepnorm mix parallel none reordered hybrid"
expects="pre-norm post-norm sandwich deepnorm mixed parallel none"
full_expects="$expects reordered per-sublayer"
right() { # placement -> the expectation that names it
    case $1 in
      pre) echo pre-norm ;; post) echo post-norm ;; mix) echo mixed ;; hybrid) echo per-sublayer ;;
      *) echo "$1" ;;
    esac
}
records() { # placement -> the record modes it is run with
    case $1 in reordered | hybrid) echo full ;; *) echo full stream ;; esac
}
expects_of() { # record mode -> the expectations checked
    [ "$1" = full ] && echo "$full_expects" || echo "$expects"
}

# Stream-only records show whether each layer renormalizes the stream and
# no more: pre, sandwich, parallel and none leave it unrenormalized, post
# and deepnorm renormalize every layer, mix some layers. What the tool can
# tell from that it must tell exactly: 0 for mixed on a mix run, 1 for an
# expectation of the other family; within a family it must give exit 2
# with the one "cannot tell" answer of that family.
family() {
    case $1 in post | deepnorm) echo renormalized ;; mix) echo mixed ;; *) echo not-renormalized ;; esac
}
expect_family() {
    case $1 in post-norm | deepnorm) echo renormalized ;; mixed) echo mixed ;; *) echo not-renormalized ;; esac
}
cannot_tell() {
    case $(family "$1") in
      renormalized) echo "cannot tell post-norm from deepnorm with stream-only evidence: every layer's stream is renormalized" ;;
      *) echo "cannot tell with stream-only evidence: the stream is not renormalized in any layer" ;;
    esac
}
expected() { # placement expectation record -> the one exit code
    if [ "$3" = full ] && [ "$1" = pre ] && [ "$2" = sandwich ]; then
      echo 2 # a sandwich's second norm would be at out_norm_in/out, which pre-norm lacks
    elif [ "$3" = full ]; then
      [ "$2" = "$(right "$1")" ] && echo 0 || echo 1
    elif [ "$(expect_family "$2")" != "$(family "$1")" ]; then
      echo 1
    elif [ "$1" = mix ]; then
      echo 0
    else
      echo 2
    fi
}

# The runs: tiny models, one step, two at a time.
jobs=()
for p in $placements; do
  for n in layernorm rmsnorm; do
    for L in 2 6 12; do
      for rec in $(records "$p"); do
        arg=$p
        [ "$p" = mix ] && arg="mix:$((L / 2))"
        jobs+=("$arg $n $L $rec $dir/${p}_${n}_${L}_${rec}.h5")
      done
    done
  done
done
printf '%s\n' "${jobs[@]}" | xargs -P 2 -L 1 sh -c \
  '"$0" --placement "$1" --norm "$2" --layers "$3" --record "$4" --out "$5" --d-model 32 \
   --heads 2 --seq 8 --batch 2 --steps 1 --threads 1 --log-every 1000 >/dev/null 2>"$5.err" ||
   echo "tinygpt failed: $*"' "$tinygpt"

table=""
for p in $placements; do
  for n in layernorm rmsnorm; do
    for L in 2 6 12; do
      for rec in $(records "$p"); do
        f=$dir/${p}_${n}_${L}_${rec}.h5
        if [ ! -s "$f" ]; then fail "no run file for $p $n L=$L $rec"; cat "$f.err"; continue; fi
        row="$(printf '%-9s %-9s %2s %-6s' "$p" "$n" "$L" "$rec")"
        for e in $(expects_of "$rec"); do
          "$tool" check --expect "$e" "$f" >"$dir/out" 2>"$dir/err"
          rc=$?
          row="$row $rc"
          lines=$(cat "$dir/out" "$dir/err" | wc -l)
          [ "$lines" -eq 1 ] || fail "$p $n L=$L $rec expect $e: $lines lines of output"
          ok=$(expected "$p" "$e" "$rec")
          if [ "$ok" = 2 ] && [ "$rec" = full ]; then
            grep -qF "which were not recorded" "$dir/out" && grep -qF out_norm_in "$dir/out" &&
              pass || fail "$p $n L=$L full expect $e: not the missing out_norm sites: $(cat "$dir/out")"
          elif [ "$ok" = 2 ]; then
            grep -qF "$(cannot_tell "$p")" "$dir/out" && pass ||
              fail "$p $n L=$L stream expect $e: not the stream-only 'cannot tell': $(cat "$dir/out" "$dir/err")"
          fi
          # Decisive evidence is called so: the rival relations miss by far
          # more than f32 rounding (post-norm at init: 1e-2 against 1e-7).
          if [ "$e" = "$(right "$p")" ] && [ "$rec" = full ] &&
             { [ "$p" = pre ] || [ "$p" = post ]; }; then
            grep -q "(confidence high)" "$dir/out" && pass ||
              fail "$p $n L=$L full: not confidence high: $(cat "$dir/out" "$dir/err")"
          fi
          case " $ok " in
            *" $rc "*) pass ;;
            *) fail "$p $n L=$L $rec: check --expect $e exited $rc (expected $ok): $(cat "$dir/out" "$dir/err")" ;;
          esac
          # Never pre-norm for a post-norm model, whatever the evidence.
          if [ "$e" = pre-norm ] &&
             { [ "$p" = post ] || [ "$p" = deepnorm ] || [ "$p" = mix ] || [ "$p" = hybrid ]; }; then
            [ "$rc" -eq 1 ] && pass || fail "$p $n L=$L $rec: --expect pre-norm exited $rc, not 1"
          fi
        done
        table="$table$row"$'\n'
      done
    done
  done
done
# Full records decide exactly: every right expectation holds there.
[ "${VERDICT_TABLE:-0}" = 1 ] && {
  printf '%-9s %-9s %2s %-6s %s\n' placement norm L record "pre post sand deep mix par none reo per"
  printf '%s' "$table"
}
tool_test_finish
