#!/usr/bin/env bash
# test-tool.sh - the resdiag binary on a real run file written by
# examples/minimal: what it prints, and exit code 2 with one line on stderr
# for every kind of unusable input.
# Usage: test-tool.sh RESDIAG MINIMAL
set -u
tool=$1
minimal=$2
. "$(dirname "$0")/../helpers/tool-test-lib.sh"

expect_exit 0 "minimal writes a run" -- "$minimal" "$dir/run.h5"
expect_exit 0 "dump" -- "$tool" dump "$dir/run.h5"
expect_text "$dir/out" "model: 2 layers, d_model 16, sequential block of mlp" "dump header"
expect_text "$dir/out" "declared: placement pre, norm rmsnorm" "dump declared"
expect_text "$dir/out" "recorded: 3 steps, step 0 .. 2" "dump steps"
expect_text "$dir/out" "fwd L1 mlp" "dump layer rows"
expect_text "$dir/out" "minimal.c:" "dump call sites"
expect_text "$dir/out" "update ratio" "dump update ratios"
# The stream entering layer 0 is sin(i) for i < 128: its norm, computed here.
want=$(awk 'BEGIN { s = 0; for (i = 0; i < 128; i++) s += sin(i) * sin(i); printf "%.6g", sqrt(s) }')
if grep -E "fwd L0 mlp +stream_in" "$dir/out" | grep -qF " $want "; then pass; else
    fail "stream_in norm $want not in:"; grep "fwd L0 mlp" "$dir/out"; fi

# Every site's RMS after the RMS norm is 1 (to the norm's epsilon).
bad=$(grep -E "fwd L[01] mlp +norm_out" "$dir/out" | awk '{ d = $9 - 1; if (d < 0) d = -d; if (d > 1e-3) print }')
n=$(grep -cE "fwd L[01] mlp +norm_out" "$dir/out")
if [ "$n" -eq 2 ] && [ -z "$bad" ]; then pass; else fail "norm_out rms not 1 in $n rows: $bad"; fi

expect_exit 0 "dump --all" -- "$tool" dump --all "$dir/run.h5"
[ "$(grep -c '^step ' "$dir/out")" -eq 3 ] && pass || fail "dump --all shows 3 steps"
# Each step of --all is what --step prints for it, rows and all (the
# minimal example writes every step into one row of chunks).
mv "$dir/out" "$dir/all"
for s in 0 1 2; do
    "$tool" dump --step "$s" "$dir/run.h5" | sed -n '/^step /,$p' >"$dir/one"
    sed -n "/^step $s /,/^\$/p" "$dir/all" | sed '/^$/d' >"$dir/from-all"
    if [ "$(grep -c '^  fwd ' "$dir/one")" -gt 0 ] && diff <(sed '/^$/d' "$dir/one") "$dir/from-all" >"$dir/diff"; then pass
    else fail "dump --all, step $s, differs from dump --step $s:"; head -5 "$dir/diff"; fi
done
expect_exit 0 "dump --step 2" -- "$tool" dump --step 2 "$dir/run.h5"
expect_text "$dir/out" "step 2 (record 3 of 3)" "dump --step"

# Unusable input: exit 2, one line.
expect_exit 2 "no arguments" -- "$tool"
expect_exit 2 "unknown command" -- "$tool" frobnicate
expect_exit 2 "dump without a file" -- "$tool" dump
expect_exit 2 "dump with a bad option" -- "$tool" dump --bogus "$dir/run.h5"
expect_exit 2 "dump of a step not recorded" -- "$tool" dump --step 99 "$dir/run.h5"
expect_exit 2 "missing file" -- "$tool" dump "$dir/nope.h5"
expect_text "$dir/err" "nope.h5" "missing file names the path"
printf 'not hdf5 at all\n' >"$dir/text.h5"
expect_exit 2 "a text file" -- "$tool" dump "$dir/text.h5"
head -c 3000 "$dir/run.h5" >"$dir/cut.h5"
expect_exit 2 "a truncated run file" -- "$tool" dump "$dir/cut.h5"
: >"$dir/empty.h5"
expect_exit 2 "an empty file" -- "$tool" dump "$dir/empty.h5"
expect_exit 2 "a directory" -- "$tool" dump "$dir"

# Help agrees with --help.
"$tool" help dump >"$dir/h1"; "$tool" dump --help >"$dir/h2"
cmp -s "$dir/h1" "$dir/h2" && pass || fail "help dump differs from dump --help"
expect_exit 0 "version" -- "$tool" version
expect_text "$dir/out" "resdiag " "version output"

# Readable without resdiag.
if command -v h5dump >/dev/null; then
    expect_exit 0 "h5dump -A" -- h5dump -A "$dir/run.h5"
    expect_text "$dir/out" "schema_version" "h5dump shows the schema version"
fi

tool_test_finish
