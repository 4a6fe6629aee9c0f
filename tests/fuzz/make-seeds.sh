#!/usr/bin/env bash
# make-seeds.sh - seed corpora for the libFuzzer harnesses (doc/FUZZING.md):
#   OUT/reader: valid run files of every kind the project writes (examples/
#               minimal, tinygpt runs of several placements and record modes,
#               of schema 1, of schema 2 and of schema 3 (the default, 8
#               block sites) at deflate levels 0, 1 and 9,
#               make-bad-runs, mutate-runs' bases) and the kept bug inputs;
#   OUT/api:    the kept API-call inputs (tests/fuzz/corpus/api).
# Usage: tests/fuzz/make-seeds.sh BUILD_DIR OUT_DIR   (BUILD_DIR: any build
# with tools, examples and tests, e.g. build-fuzz)
set -euo pipefail
build=$1 out=$2
src=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out/reader" "$out/api"
r=$out/reader

# Run again into the same OUT, the runs replace their own earlier files
# (examples/minimal has no --overwrite: its file goes first).
rm -f "$r/minimal.h5"
"$build/minimal" "$r/minimal.h5" >/dev/null
tiny=(--layers 2 --d-model 16 --heads 2 --seq 8 --vocab 16 --batch 2 --steps 4 --log-every 100)
for p in pre post sandwich deepnorm mix:1 parallel none; do
    "$build/examples/tinygpt/tinygpt" "${tiny[@]}" --placement "$p" \
        --out "$r/tinygpt-${p/:/}.h5" --overwrite >/dev/null
done
# the other layouts: schemas 1 and 2 (5 block sites), schema 3 without
# compression and at level 9
for schema in 1 2; do
    "$build/examples/tinygpt/tinygpt" "${tiny[@]}" --file-schema "$schema" \
        --out "$r/tinygpt-schema$schema.h5" --overwrite >/dev/null
done
for level in 0 9; do
    "$build/examples/tinygpt/tinygpt" "${tiny[@]}" --compression "$level" \
        --out "$r/tinygpt-deflate$level.h5" --overwrite >/dev/null
done
for rec in stream; do
    "$build/examples/tinygpt/tinygpt" "${tiny[@]}" --record "$rec" \
        --out "$r/tinygpt-rec-$rec.h5" --overwrite >/dev/null 2>&1 || true
done
mkdir -p "$out/tmp"
"$build/tests/helpers/make-bad-runs" "$out/tmp"
for f in "$out"/tmp/*.h5; do mv "$f" "$r/bad-$(basename "$f")"; done
"$build/tests/fuzz/mutate-runs" "$out/tmp" 0 1
for f in "$out"/tmp/base-*.h5; do mv "$f" "$r/mutate-$(basename "$f")"; done
rmdir "$out/tmp"
for gz in "$src"/corpus/reader/*.h5.gz; do
    [ -e "$gz" ] && gzip -dc "$gz" >"$r/$(basename "$gz" .gz)"
done
cp "$src"/corpus/api/* "$out/api/"
echo "seeds: $(ls "$r" | wc -l) run files, $(ls "$out/api" | wc -l) API inputs in $out"
