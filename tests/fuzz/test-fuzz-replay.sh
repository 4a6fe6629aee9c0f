#!/usr/bin/env bash
# test-fuzz-replay.sh - the fuzzers' regression replay (doc/FUZZING.md):
#  1. valid run files and damaged copies of them (mutate-runs, fixed seed)
#     plus the kept inputs that once found bugs (corpus/reader/*.h5.gz)
#     through `resdiag report` (text, or JSON at the last step): exit 0
#     with a report, or exit 2 with one line on stderr and nothing on
#     stdout; never a crash, a hang or another code;
#  2. the same files through the reader harness in one process
#     (replay-reader: every reader call, the analysis, leaked HDF5 ids);
#  3. the kept API-call sequences (corpus/api) through replay-api.
# Usage: test-fuzz-replay.sh RESDIAG MUTATE-RUNS REPLAY-READER REPLAY-API CORPUS
. "$(dirname "$0")/../tool-test-lib.sh"
tool=$1 mutate=$2 replay_reader=$3 replay_api=$4 corpus=$5
n_mutants=${RESDIAG_FUZZ_MUTANTS:-80}
# Under ASan (build-asan): HDF5's own leaks on damaged files are not ours.
supp=$(cd "$corpus/.." && pwd)/lsan-hdf5.supp
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$supp:print_suppressions=0}
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0

mkdir "$dir/runs"
"$mutate" "$dir/runs" "$n_mutants" 0x5eed || { echo "FAIL: mutate-runs"; exit 1; }
for gz in "$corpus"/reader/*.h5.gz; do
    [ -e "$gz" ] || continue
    b=$(basename "$gz" .gz)
    gzip -dc "$gz" >"$dir/runs/bug-$b" || fail "cannot unpack $gz"
done

# report_ok FILE ARGS...: exit 0 with a report, or 2 with one line.
reports=0 refusals=0
report_ok() {
    local f=$1
    shift
    timeout 60 "$tool" report "$@" "$f" >"$dir/out" 2>"$dir/err"
    local rc=$?
    case $rc in
    0)
        if [ -s "$dir/out" ]; then reports=$((reports + 1)); pass
        else fail "$(basename "$f") $*: exit 0 without a report"; fi ;;
    2)
        if [ "$(wc -l <"$dir/err")" -ne 1 ]; then
            fail "$(basename "$f") $*: exit 2, stderr is not one line:"; head -5 "$dir/err"
        elif [ -s "$dir/out" ]; then
            fail "$(basename "$f") $*: exit 2 with output on stdout"
        else refusals=$((refusals + 1)); pass; fi ;;
    124) fail "$(basename "$f") $*: no answer in 60 s" ;;
    *) fail "$(basename "$f") $*: exit $rc"; tail -3 "$dir/err" ;;
    esac
}

k=0
for f in "$dir"/runs/*.h5; do
    if [ $((k++ % 2)) -eq 0 ]; then report_ok "$f"; else report_ok "$f" --json --last; fi
done
for f in "$dir"/runs/base-*.h5; do
    expect_exit 0 "$(basename "$f") is a valid run" -- "$tool" report "$f"
done
echo "resdiag report: $reports reports, $refusals refusals (exit 2)"

# In one process, every reader call; a crash or an abort fails.
if timeout 240 "$replay_reader" "$dir/runs" >"$dir/out" 2>"$dir/err"; then pass
else fail "replay-reader: exit $?"; tail -5 "$dir/err"; fi
cat "$dir/out"

if [ -d "$corpus/api" ] && ls "$corpus/api" | grep -q .; then
    if timeout 120 "$replay_api" "$corpus/api" >"$dir/out" 2>"$dir/err"; then pass
    else fail "replay-api: exit $?"; tail -5 "$dir/err"; fi
    cat "$dir/out"
else
    fail "no API inputs in $corpus/api"
fi
tool_test_finish
