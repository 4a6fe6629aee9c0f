#!/usr/bin/env bash
# compare-outputs.sh - saves what a build prints and writes, to show that a
# re-layering changed no output: run it with the build before the change and
# the build after, then `diff -r -x runs` the two directories.
#
#   scripts/compare-outputs.sh BUILD_DIR OUT_DIR [RUNS_DIR]
#
# Writes tinygpt runs in every placement (and the older schemas, gradient
# accumulation, stream-only and thinned recordings) into OUT_DIR/runs,
# `h5dump` of each (attributes and values) into OUT_DIR/h5dump, and every
# report format, check, dump, plot and diff of the runs in RUNS_DIR (default OUT_DIR/runs; give the
# first build's runs to compare the reader on the same bytes) into
# OUT_DIR/tool. Times of creation, the trainer's wall time, source line
# numbers (file:line of the hooks), the values of /step_time and the build
# directory are masked.
set -u
build=$(cd "${1:?usage: compare-outputs.sh BUILD_DIR OUT_DIR [RUNS_DIR]}" && pwd)
out=${2:?usage: compare-outputs.sh BUILD_DIR OUT_DIR [RUNS_DIR]}
mkdir -p "$out/runs" "$out/h5dump" "$out/tool"
out=$(cd "$out" && pwd)
runs=$(cd "${3:-$out/runs}" && pwd)
tiny=$build/examples/tinygpt/tinygpt
tool=$build/resdiag

mask() { sed -E -e 's/[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z/TIME/g' \
                -e 's/(\.[ch]):[0-9]+/\1:LINE/g' -e '/^time: /d' \
                -e 's#[^ "=]*/examples/tinygpt/tinygpt#BUILD/examples/tinygpt/tinygpt#g' \
                -e "s#$build#BUILD#g" -e "s#$runs#RUNS#g" -e "s#$out#OUT#g"; }

# /step_time holds wall seconds: its values differ from run to run.
drop_step_time() { awk '/^   DATASET "step_time"/ { skip = 1 } skip && /^      DATA \{/ { data = 1 }
                        data { if (/^      \}/) { data = 0; skip = 0 } ; next } { print }'; }

cd "$out/runs"
train() { # name, tinygpt options...
    local name=$1; shift
    rm -f "$name.h5"
    "$tiny" --layers 3 --d-model 32 --heads 2 --seq 16 --batch 4 --steps 4 \
        --log-every 100 --out "$name.h5" "$@" 2>&1 | mask > "$out/h5dump/$name.stdout"
    echo "exit ${PIPESTATUS[0]}" >> "$out/h5dump/$name.stdout"
    h5dump "$name.h5" 2>&1 | drop_step_time | mask > "$out/h5dump/$name.txt"
}
for p in pre post sandwich deepnorm mix:1 parallel none reordered hybrid; do
    train "${p/:/}" --placement "$p"
done
train pre-rms --norm rmsnorm --final-norm off
train pre-schema1 --file-schema 1
train pre-schema2 --file-schema 2
train pre-accum --grad-accum 2
train pre-stream --record stream
train pre-every2 --record-every 2
train pre-xavier --placement post --init xavier --declare pre

cd "$runs"
for f in *.h5; do
    n=${f%.h5}
    {
        for args in "" "--last" "--step 1" "--json" "--json --last"; do
            echo "== report $args"; "$tool" report $args "$f" 2>&1; echo "exit $?"
        done
        "$tool" report --html "$out/tool/$n.html" "$f" 2>&1; echo "html exit $?"
        for e in pre post sandwich declared; do
            echo "== check --expect $e"; "$tool" check --expect "$e" "$f" 2>&1; echo "exit $?"
        done
        echo "== dump --all"; "$tool" dump --all "$f" 2>&1; echo "exit $?"
        for w in growth updates gradients loss; do
            "$tool" plot --what "$w" -o "$out/tool/$n.$w.svg" "$f" 2>&1; echo "plot $w exit $?"
        done
        echo "== diff pre"; "$tool" diff pre.h5 "$f" 2>&1; echo "exit $?"
    } | mask > "$out/tool/$n.txt"
    for g in "$out/tool/$n".*; do
        case $g in *.txt) ;; *) mask < "$g" > "$g.m" && mv "$g.m" "$g" ;; esac
    done
done
echo "saved in $out"
