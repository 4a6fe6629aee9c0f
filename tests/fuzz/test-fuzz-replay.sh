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
# The crafted runs of make-hostile-runs (external storage and links,
# virtual datasets, a FIFO, an unknown filter with a plugin in
# HDF5_PLUGIN_PATH, declared-size bombs, an unreadable table) go through
# 1 and 2 as well; through `resdiag report` each must be refused (exit 2),
# with the secret they point at in no output and the plugin never loaded.
# Usage: test-fuzz-replay.sh RESDIAG MUTATE-RUNS REPLAY-READER REPLAY-API CORPUS
#                            MAKE-HOSTILE-RUNS PLUGIN.so
. "$(dirname "$0")/../helpers/tool-test-lib.sh"
tool=$1 mutate=$2 replay_reader=$3 replay_api=$4 corpus=$5 make_hostile=$6 plugin=$7
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
secret="resdiag-secret-$$-$RANDOM"
echo "$secret" >"$dir/secret.txt"
mkfifo "$dir/fifo"
mkdir "$dir/hostile" "$dir/plugins"
cp "$plugin" "$dir/plugins/"
export HDF5_PLUGIN_PATH=$dir/plugins RESDIAG_TEST_PLUGIN_MARKER=$dir/plugin-loaded
timeout 60 "$make_hostile" "$dir/hostile" "$dir/secret.txt" "$dir/fifo" ||
    { echo "FAIL: make-hostile-runs"; exit 1; }
# (copies: the originals stay where their links point; steps-100k.h5 is a
# valid run of 100000 steps that the harness, which reads every slot over
# every step, would take minutes over: tests/tool/test-hostile.sh has it;
# scales-dangling.h5 is crafted but valid for resdiag, which follows no
# dimension scale: it must give a report, so it is not named hostile-;
# s2-steps-3g.h5 claims 3e9 steps, which the harness would read one by one)
for f in "$dir"/hostile/*.h5; do
    case $(basename "$f") in
    base.h5 | base-plain.h5 | secret-target.h5 | steps-* | s2-steps-*) continue ;;
    # valid for resdiag, or integers it may read as not observed, or
    # claims it may bound rather than refuse: a report or a refusal
    scales-dangling.h5 | s2-counts-* | s2-calls-* | s2-alias-* | s2-bomb-*)
        cp "$f" "$dir/runs/crafted-$(basename "$f")"; continue ;;
    esac
    cp "$f" "$dir/runs/hostile-$(basename "$f")"
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
    case $(basename "$f") in
    hostile-*)
        [ "$rc" -eq 2 ] || fail "$(basename "$f") $*: a crafted run was not refused"
        if grep -qF -- "$secret" "$dir/out" "$dir/err"; then
            fail "$(basename "$f") $*: the secret it points at was printed"
        fi ;;
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
if [ -e "$dir/plugin-loaded" ]; then fail "a plugin in HDF5_PLUGIN_PATH was loaded"; else pass; fi

# In one process, every reader call; a crash or an abort fails.
if timeout 240 "$replay_reader" "$dir/runs" >"$dir/out" 2>"$dir/err"; then pass
else fail "replay-reader: exit $?"; tail -5 "$dir/err"; fi
cat "$dir/out"
# the reader API turns no plugin loading off, so this holds only because it
# refuses every file with a filter before reading it
if [ -e "$dir/plugin-loaded" ]; then fail "replay-reader loaded the plugin"; else pass; fi

if [ -d "$corpus/api" ] && ls "$corpus/api" | grep -q .; then
    if timeout 120 "$replay_api" "$corpus/api" >"$dir/out" 2>"$dir/err"; then pass
    else fail "replay-api: exit $?"; tail -5 "$dir/err"; fi
    cat "$dir/out"
else
    fail "no API inputs in $corpus/api"
fi
tool_test_finish
