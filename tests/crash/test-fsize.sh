#!/usr/bin/env bash
# test-fsize.sh - tinygpt under a file size limit (`ulimit -f`) with SIGXFSZ
# at its default action, as a shell leaves it: the library stops recording
# before the limit (a write past it would kill the trainer), says so in one
# line, and the trainer finishes; the run file holds every step flushed
# before (the last "flushed S" of --flush-log), stays within the limit, and
# the tool reads it. A limit below what creating the file needs (1 MiB)
# leaves no file and a trainer that trains without recording. Schema 1 at
# fixed limits; schema 2 with deflate level 1 (the default: compressed
# chunks grow at each flush) and without compression at half the size of
# the same run without a limit, and below creation.
# Usage: test-fsize.sh TINYGPT RESDIAG
set -u
tinygpt=$1
tool=$2
. "$(dirname "$0")/../helpers/tool-test-lib.sh"

# Long enough that half a run of schema 2 at level 1 is well above what one
# append may reserve (about 2.2 MB for this model): its file is then ~6 MB.
steps=500
train_args() { # SCHEMA LEVEL RUN FLUSH_LOG: tinygpt's command line, in $args
    args=("$tinygpt" --layers 2 --d-model 32 --heads 2 --seq 16 --batch 2 --vocab 32
          --steps "$steps" --threads 1 --log-every 50 --flush-steps 4
          --file-schema "$1" --compression "$2" --out "$3" --flush-log "$4")
}
# half the KiB of a whole run of schema 2 at level $1
half_kib() {
    train_args 2 "$1" "$dir/whole-$1.h5" "$dir/whole-$1.log"
    "${args[@]}" >/dev/null 2>&1 || fail "whole run of schema 2 level $1"
    echo $(( $(stat -c %s "$dir/whole-$1.h5") / 2048 ))
}
# SCHEMA LEVEL KIB (bash's ulimit -f counts KiB). Schema 1: 64, 1000: below
# creation; 1600: the first batch fits, not the second; 2400: early; 4000:
# about an eighth. (They follow the writer's estimate of what a phase may
# allocate: more datasets, more margin.)
cases="1 0 64
1 0 1000
1 0 1600
1 0 2400
1 0 4000
2 1 64
2 1 $(half_kib 1)
2 0 $(half_kib 0)"
while read -r schema level kib; do
    limit=$((kib * 1024))
    run="$dir/run-$schema-$level-$kib.h5"
    flog="$dir/flushed-$schema-$level-$kib.log"
    # no trap, no handler: exec keeps SIGXFSZ at its default action
    train_args "$schema" "$level" "$run" "$flog"
    bash -c 'ulimit -f "$1"; shift; exec "$@"' _ "$kib" "${args[@]}" \
        >"$dir/train.out" 2>"$dir/train.err"
    rc=$?
    what="schema $schema level $level, ulimit -f $kib"
    if [ "$rc" -ge 128 ]; then
        fail "$what: tinygpt killed by signal $((rc - 128))"; cat "$dir/train.err"; continue
    fi
    grep -q "^step *$((steps - 1)) " "$dir/train.out" && grep -q "final loss" "$dir/train.out" \
        && pass || fail "$what: training did not finish"
    n_lib=$(grep -c "^resdiag: " "$dir/train.err")
    n_limit=$(grep -c "^resdiag: .*file size limit (ulimit -f) of $limit bytes reached" \
        "$dir/train.err")
    if [ "$n_lib" -eq 1 ] && [ "$n_limit" -eq 1 ]; then pass; else
        fail "$what: $n_lib library lines, $n_limit about the limit, want 1 and 1:"
        cat "$dir/train.err"
    fi

    if [ "$kib" -le 1000 ] && [ "$schema" = 1 ] || [ "$kib" = 64 ]; then
        # tinygpt's contract: a file that cannot be created -> exit 0
        [ "$rc" -eq 0 ] && pass || fail "$what: exit $rc, want 0 (training without recording)"
        grep -q "recording: off" "$dir/train.out" && pass || fail "$what: recording not off"
        [ ! -e "$run" ] && pass || fail "$what: a run file was left"
        continue
    fi
    # tinygpt's contract: recording stopped for lack of space -> exit 0
    [ "$rc" -eq 0 ] && pass || fail "$what: exit $rc, want 0 (recording stopped, training done)"
    size=$(stat -c %s "$run" 2>/dev/null || echo missing)
    [ "$size" != missing ] && [ "$size" -le "$limit" ] && pass \
        || fail "$what: run file size $size, limit $limit"
    last=$(awk '$1 == "flushed" { s = $2 } END { print (s == "" ? -1 : s) }' "$flog")
    if [ "$last" -ge 0 ] && [ "$last" -lt $((steps - 1)) ]; then pass; else
        fail "$what: last flushed step $last: want the limit reached after step 0"
    fi
    expect_exit 0 "$what: dump" -- "$tool" dump "$run"
    expect_text "$dir/out" "recorded: $((last + 1)) steps, step 0 .. $last" "$what: dump"
    expect_exit 0 "$what: dump --all" -- "$tool" dump --all "$run"
    got=$(grep -E '^step [0-9]+ ' "$dir/out" | awk '{ printf "%s%s", sep, $2; sep = " " }')
    want=$(seq -s ' ' 0 "$last")
    [ "$got" = "$want" ] && pass || fail "$what: dump --all steps '$got', want '$want'"
    expect_exit 0 "$what: report" -- "$tool" report "$run"
    echo "$what: $((last + 1)) of $steps steps recorded, file $size bytes of $limit"
done <<<"$cases"

tool_test_finish
