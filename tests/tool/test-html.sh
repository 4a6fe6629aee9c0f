#!/usr/bin/env bash
# test-html.sh - the pictures: `resdiag report --html`, `resdiag plot` and
# `resdiag diff --html` on real tinygpt runs (L = 2, 12 pre and post, 96; one
# step and 600 steps; 96 layers trained to a negative-intercept energy fit). Each page and SVG must parse strictly (xmllint, and
# Python's XML and HTML parsers) and its plotted points, read back through
# the inverse axis transform, must equal the numbers of `report --json`
# (tests/tool/test-html.py says how, and the tolerance). Then help, and the bad
# arguments: one line on stderr and exit 2.
# Usage: test-html.sh RESDIAG TINYGPT
# Skipped (77) when neither python3 nor xmllint is there.
set -u
tool=$1
tinygpt=$2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../helpers/tool-test-lib.sh"

py=
for p in /usr/bin/python3 python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import xml.etree.ElementTree, html.parser' \
        2>/dev/null; then
        py=$p
        break
    fi
done
xmllint=$(command -v xmllint || true)
if [ -z "$py" ] && [ -z "$xmllint" ]; then
    echo "neither python3 nor xmllint: skipped"
    exit 77
fi

tg() { "$tinygpt" --d-model 32 --heads 2 --seq 8 --batch 2 --seed 1 --threads 1 \
       --log-every 100000 "$@" >/dev/null 2>"$dir/tg.err" || { cat "$dir/tg.err"; fail "tinygpt $*"; }; }
tg --placement pre --layers 2 --steps 1 --out "$dir/l2.h5"
tg --placement pre --layers 12 --steps 1 --out "$dir/pre12.h5"
tg --placement post --layers 12 --steps 1 --out "$dir/post12.h5"
tg --placement pre --layers 96 --steps 2 --out "$dir/l96.h5"
tg --placement post --layers 3 --steps 600 --out "$dir/many.h5"
# diverges: the loss is not finite at step 1 and tinygpt stops (exit 1)
"$tinygpt" --d-model 32 --heads 2 --seq 8 --batch 2 --seed 1 --threads 1 --log-every 100000 \
    --placement none --init xavier --lr 10 --layers 6 --steps 60 --out "$dir/nf.h5" >/dev/null 2>&1

# strict_xml FILE: well-formed XML by xmllint (when there)
strict_xml() {
    if [ -n "$xmllint" ]; then
        if "$xmllint" --noout --nonet "$1" 2>"$dir/xml.err"; then pass; else
            fail "$1 is not well-formed:"; head -5 "$dir/xml.err"; fi
    fi
}
# check MODE FILE JSON...: the Python read-back (when python3 is there)
check() {
    [ -n "$py" ] || return 0
    if "$py" "$here/test-html.py" "$@" >"$dir/py.out" 2>&1; then pass; else
        fail "test-html.py $*:"; head -20 "$dir/py.out"; fi
}

for run in l2 pre12 post12 l96 many nf; do
    f=$dir/$run.h5
    "$tool" report --json "$f" >"$dir/$run.json" || fail "report --json $run"
    "$tool" report --last --json "$f" >"$dir/$run-last.json" || fail "report --last --json $run"
    steps=$(sed -n 's/.*"steps": {"recorded": \([0-9]*\),.*/\1/p' "$dir/$run.json")
    [ -n "$steps" ] || { fail "$run.json: no step count"; steps=1; }
    expect_exit 0 "report --html $run" -- "$tool" report "$f" --html "$dir/$run.html"
    [ -s "$dir/$run.html" ] || fail "$run.html is empty"
    [ -s "$dir/out" ] && fail "report --html $run also wrote to stdout"
    strict_xml "$dir/$run.html"
    check check-page "$dir/$run.html" "$dir/$run.json" --steps "$steps" \
        --json-last "$dir/$run-last.json"
    for what in growth updates gradients; do
        expect_exit 0 "plot $what $run" -- "$tool" plot "$f" --what "$what" -o "$dir/$run-$what.svg"
        strict_xml "$dir/$run-$what.svg"
        check check-svg "$dir/$run-$what.svg" "$dir/$run.json"
    done
done
# A 96-layer run trained until ||x_k||^2 = a + b k fits with a negative
# intercept at its last step: the fit is not drawn, and the figure says why.
tg --placement pre --layers 96 --steps 30 --lr 0.01 --out "$dir/l96t.h5"
"$tool" report --last --json "$dir/l96t.h5" >"$dir/l96t.json" || fail "report --json l96t"
"$tool" report --json "$dir/l96t.h5" >"$dir/l96t-first.json" || fail "report --json l96t"
"$tool" report --last --html "$dir/l96t.html" "$dir/l96t.h5" || fail "report --html l96t"
check check-page "$dir/l96t.html" "$dir/l96t.json" --steps 30 --json-first "$dir/l96t-first.json" \
    --json-last "$dir/l96t.json"
grep -q '"intercept": -' "$dir/l96t.json" && pass ||
    fail "l96t: the energy fit's intercept is not negative: the case is not tested"

# --last draws the last step: its numbers, not the first step's
expect_exit 0 "plot --last" -- "$tool" plot --last --what updates -o "$dir/last.svg" "$dir/many.h5"
check check-svg "$dir/last.svg" "$dir/many-last.json"
if [ -n "$py" ] && "$py" "$here/test-html.py" check-svg "$dir/last.svg" "$dir/many.json" \
    >/dev/null 2>&1; then
    fail "the last step's figure matches the first step's numbers too: the check cannot tell"
else
    pass
fi

# The pages say what they show.
grep -q '"nonfinite": null' "$dir/nf.json" && fail "the diverging run has no non-finite value" || pass
expect_text "$dir/nf.html" 'id="nonfinite"' "first non-finite value card"
expect_text "$dir/nf.html" 'class="nfmark"' "first non-finite value marked on the heat maps"
expect_text "$dir/pre12.html" "Placement: pre-norm" "pre verdict card"
expect_text "$dir/post12.html" "Placement: post-norm" "post verdict card"
expect_text "$dir/many.html" "Layers over training" "heat maps of a many-step run"
grep -q 'class="heatmap"' "$dir/pre12.html" && fail "heat map for one step" || pass

# ||x_k||^2 = a + b k: the page says what the text report says (one rule
# for "flat", the same numbers), for a flat (post) and a growing (pre) run.
for run in post12 pre12; do
    "$tool" report "$dir/$run.h5" >"$dir/$run.txt" || fail "report $run"
    law=$(sed -n 's/^  ||x_k||^2 = \([^;]*\);.*/\1/p' "$dir/$run.txt" | sed 's/R^2/R²/')
    [ -n "$law" ] || { fail "$run: no ||x_k||^2 line in the text report"; continue; }
    expect_text "$dir/$run.html" "‖x_k‖² = $law" "$run: the page's ||x_k||^2 law is the text's"
done
grep -q "at every layer (flat to 1e-4" "$dir/post12.txt" || fail "post12: the stream energy is not flat"

# The pre-norm 1/||x_k|| reference (Xiong et al.) only where the verdict is pre-norm.
expect_text "$dir/pre12-gradients.svg" 'data-key="ref.inv_xnorm"' "pre-norm run: the 1/||x_k|| reference"
grep -q 'ref.inv_xnorm' "$dir/post12-gradients.svg" &&
    fail "post-norm run: the pre-norm 1/||x_k|| reference is drawn" || pass
grep -q '1/‖x_k‖ (dotted)' "$dir/post12.html" &&
    fail "post-norm page: the caption names a dotted reference that is not drawn" || pass

# diff --html: both runs on the same axes; the text still on stdout
expect_exit 0 "diff --html" -- "$tool" diff "$dir/pre12.h5" "$dir/post12.h5" --html "$dir/diff.html"
expect_text "$dir/out" "Differences that matter" "diff text with --html"
strict_xml "$dir/diff.html"
check check-page "$dir/diff.html" "$dir/pre12.json" "$dir/post12.json"
expect_exit 0 "diff --html -" -- "$tool" diff --html - "$dir/pre12.h5" "$dir/l2.h5"
# with the page on stdout, stdout is the page alone
[ "$(head -n 1 "$dir/out")" = "<!DOCTYPE html>" ] && [ "$(tail -n 1 "$dir/out")" = "</html>" ] \
    && pass || fail "diff --html -: stdout is not the page alone"

# help
"$tool" help plot >"$dir/h1"
"$tool" plot --help >"$dir/h2"
cmp -s "$dir/h1" "$dir/h2" && pass || fail "resdiag help plot differs from resdiag plot --help"
expect_text "$dir/h1" "--what growth|updates|gradients" "plot usage"
"$tool" help >"$dir/h3"
expect_text "$dir/h3" "plot" "plot in the command list"

# bad arguments: one line on stderr, exit 2, nothing on stdout
expect_exit 2 "plot without --what" -- "$tool" plot -o "$dir/x.svg" "$dir/pre12.h5"
expect_exit 2 "plot --what bad" -- "$tool" plot --what bogus -o "$dir/x.svg" "$dir/pre12.h5"
expect_exit 2 "plot without -o" -- "$tool" plot --what growth "$dir/pre12.h5"
expect_exit 2 "plot without a run" -- "$tool" plot --what growth -o "$dir/x.svg"
expect_exit 2 "plot missing file" -- "$tool" plot --what growth -o "$dir/x.svg" "$dir/nope.h5"
expect_exit 2 "plot unknown option" -- "$tool" plot --frobnicate "$dir/pre12.h5"
expect_exit 2 "plot --step not recorded" -- "$tool" plot --what growth -o "$dir/x.svg" \
    --step 999 "$dir/pre12.h5"
expect_exit 2 "plot unwritable" -- "$tool" plot --what growth -o "$dir/no/such/dir/x.svg" \
    "$dir/pre12.h5"
expect_exit 2 "report --html without file" -- "$tool" report "$dir/pre12.h5" --html
expect_exit 2 "report --html and --json" -- "$tool" report --json --html "$dir/x.html" \
    "$dir/pre12.h5"
expect_exit 2 "report --html unwritable" -- "$tool" report --html "$dir/no/such/x.html" \
    "$dir/pre12.h5"
expect_exit 2 "diff --html without file" -- "$tool" diff "$dir/pre12.h5" "$dir/post12.h5" --html
[ -e "$dir/x.svg" ] && fail "a failed plot left a file" || pass
tg --placement pre --layers 4 --steps 1 --record stream --out "$dir/stream.h5"
expect_exit 2 "plot gradients of a stream-only run" -- "$tool" plot --what gradients \
    -o "$dir/x.svg" "$dir/stream.h5"
expect_exit 0 "report --html of a stream-only run" -- "$tool" report --html "$dir/stream.html" \
    "$dir/stream.h5"
strict_xml "$dir/stream.html"

tool_test_finish
