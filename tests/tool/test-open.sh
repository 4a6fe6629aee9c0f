#!/usr/bin/env bash
# test-open.sh - what examples/tinygpt --out may do to what is at the path
# (doc/FORMAT.md, "Creating a run file"): a second run is refused unless
# --overwrite, which replaces only a resdiag run file; checkpoints, symlinks,
# FIFOs and device nodes stay as they were; a run that another tinygpt is
# writing is refused as locked while `resdiag report` reads it. Training goes
# on without recording each time (exit 0).
# Usage: test-open.sh RESDIAG TINYGPT
set -u
tool=$1
tinygpt=$2
. "$(dirname "$0")/../helpers/tool-test-lib.sh"

tiny=(--layers 2 --d-model 16 --heads 2 --seq 8 --vocab 16 --batch 2 --log-every 1000 --threads 1)
tg() { timeout 60 "$tinygpt" "${tiny[@]}" "$@"; }
steps_in() { "$tool" dump "$1" 2>/dev/null | sed -n 's/^ *recorded: \([0-9]*\) steps.*/\1/p'; }
refused() { # WHAT TEXT: the last tinygpt trained on without recording, saying TEXT
    if grep -q "recording: off (cannot create" "$dir/out" && grep -qF -- "$2" "$dir/err"; then
        pass
    else
        fail "$1: not refused with '$2'"; cat "$dir/out" "$dir/err"
    fi
}

# A second run at the same path: refused, the first run's file unchanged.
expect_exit 0 "first run" -- tg --steps 2 --out "$dir/run.h5"
cp "$dir/run.h5" "$dir/run.copy"
expect_exit 0 "second run without --overwrite" -- tg --steps 3 --out "$dir/run.h5"
refused "second run" "already exists; pass overwrite = 1 (--overwrite)"
cmp -s "$dir/run.h5" "$dir/run.copy" && pass || fail "the first run's file changed"
# With --overwrite: replaced.
expect_exit 0 "second run with --overwrite" -- tg --steps 3 --out "$dir/run.h5" --overwrite
expect_text "$dir/out" "recording: full" "--overwrite records"
[ "$(steps_in "$dir/run.h5")" = 3 ] && pass || fail "the replaced run has not 3 steps"

# A checkpoint: never replaced, not even with --overwrite.
printf 'CHECKPOINT\0weights' >"$dir/model.ckpt"
cp "$dir/model.ckpt" "$dir/ckpt.copy"
expect_exit 0 "checkpoint with --overwrite" -- tg --steps 1 --out "$dir/model.ckpt" --overwrite
refused "checkpoint" "is not a resdiag run file"
cmp -s "$dir/model.ckpt" "$dir/ckpt.copy" && pass || fail "the checkpoint changed"

# A symlink to a run file: refused in both modes, the target unchanged.
ln -s "$dir/run.h5" "$dir/link.h5"
cp "$dir/run.h5" "$dir/run.copy"
for ow in "" --overwrite; do
    expect_exit 0 "symlink $ow" -- tg --steps 1 --out "$dir/link.h5" $ow
    refused "symlink $ow" "is a symbolic link"
done
cmp -s "$dir/run.h5" "$dir/run.copy" && pass || fail "the symlink's target changed"
[ -L "$dir/link.h5" ] && pass || fail "the symlink is gone"

# A FIFO: refused at once (timeout 60 catches a hang), still there.
mkfifo "$dir/fifo"
expect_exit 0 "FIFO" -- tg --steps 1 --out "$dir/fifo" --overwrite
refused "FIFO" "is a FIFO"
[ -p "$dir/fifo" ] && pass || fail "the FIFO is gone"

# A device node (a copy of /dev/null's, made here; needs root): refused,
# still there. The old writer unlinked it.
if mknod "$dir/null" c 1 3 2>/dev/null; then
    expect_exit 0 "device node" -- tg --steps 1 --out "$dir/null" --overwrite
    refused "device node" "is a character device"
    [ -c "$dir/null" ] && [ "$(stat -c %t:%T "$dir/null")" = 1:3 ] && pass ||
        fail "the device node is gone or changed"
else
    echo "(no mknod here: the device node case is not run)"
fi

# Two trainers on one path: the second is refused as locked, even with
# --overwrite; resdiag report reads the run meanwhile; the first, stopped by
# SIGTERM (--handle-signals stop closes its file), keeps every flushed step.
"$tinygpt" "${tiny[@]}" --steps 1000000 --flush-steps 1 --flush-log "$dir/flush.log" --handle-signals stop \
    --out "$dir/live.h5" >"$dir/live.out" 2>"$dir/live.err" &
live=$!
for _ in $(seq 600); do grep -q '^flushed 3$' "$dir/flush.log" 2>/dev/null && break; sleep 0.05; done
grep -q '^flushed 3$' "$dir/flush.log" 2>/dev/null && pass || fail "the first trainer did not flush"
expect_exit 0 "second trainer on a live run" -- tg --steps 1 --out "$dir/live.h5" --overwrite
refused "second trainer" "is being written by another run"
expect_exit 0 "report on the live run" -- timeout 60 "$tool" report "$dir/live.h5"
kill -TERM "$live"
wait "$live"
rc=$?
[ "$rc" -eq 130 ] && pass || { fail "the first trainer exited $rc, not 130"; cat "$dir/live.err"; }
last=$(sed -n 's/^flushed //p' "$dir/flush.log" | tail -1)
[ -n "$last" ] && [ "$(steps_in "$dir/live.h5")" = $((last + 1)) ] && pass ||
    fail "the first run does not hold its $((last + 1)) steps: $(steps_in "$dir/live.h5")"
# Its lock went with it: the path may now be replaced.
expect_exit 0 "replace after the first trainer ended" -- tg --steps 2 --out "$dir/live.h5" --overwrite
[ "$(steps_in "$dir/live.h5")" = 2 ] && pass || fail "the run was not replaced after the end"

tool_test_finish
