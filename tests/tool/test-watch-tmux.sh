#!/usr/bin/env bash
# test-watch-tmux.sh - `resdiag watch` in a real terminal (a detached tmux
# session of a fixed size, read with capture-pane) following a tinygpt run
# as it is written: the step shown advances, the NaN tinygpt injects at
# --nan-step appears with its step, the frame re-fits a resized window,
# and watch exits by itself when the run ends; q and Ctrl-C end it on a
# run still being written, and the terminal's modes come back.
# usage: test-watch-tmux.sh RESDIAG TINYGPT   (exit 77: no tmux)
set -uo pipefail
tool=$1 tinygpt=$2
command -v tmux >/dev/null || { echo "SKIP: tmux is not installed"; exit 77; }
dir=$(mktemp -d)
sock="resdiag-watch-$$"
tm() { tmux -L "$sock" -f /dev/null "$@"; }
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    tm kill-server 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; cat "$dir"/*.rc 2>/dev/null; echo "--- screen:"; cat "$dir/screen" 2>/dev/null; exit 1; }

# screen SESSION: the pane's text into $dir/screen
screen() { tm capture-pane -p -t "$1" >"$dir/screen" 2>/dev/null; }
# wait_screen SESSION SECONDS REGEX: polls the pane until a line matches
wait_screen() {
    local end=$((SECONDS + $2))
    while ((SECONDS < end)); do
        screen "$1" && grep -Eq "$3" "$dir/screen" && return 0
        sleep 0.2
    done
    return 1
}
# wait_gone SESSION SECONDS: the pane's one command exited (the pane
# stays, remain-on-exit, so its last frame can still be read)
wait_gone() {
    local end=$((SECONDS + $2))
    while ((SECONDS < end)); do
        [ "$(tm display-message -p -t "$1" '#{pane_dead}' 2>/dev/null)" = 1 ] && return 0
        sleep 0.2
    done
    return 1
}
# start_run NAME ARGS...: tinygpt writing $dir/NAME.h5 a step at a time,
# returned once its first step is in the file
start_run() {
    local name=$1
    shift
    "$tinygpt" --layers 2 --d-model 16 --heads 2 --seq 8 --batch 2 --log-every 1000 \
        --flush-steps 1 --flush-log "$dir/$name.log" --out "$dir/$name.h5" "$@" \
        >/dev/null 2>&1 &
    pids+=($!)
    local end=$((SECONDS + 20))
    until grep -q '^flushed' "$dir/$name.log" 2>/dev/null; do
        ((SECONDS < end)) || fail "tinygpt wrote no step of $name in 20 s"
        sleep 0.1
    done
}
step_shown() { sed -n 's/^resdiag watch  step \([0-9]*\) (.*/\1/p' "$dir/screen" | head -1; }

# 1. A run that blows up at step 800 and then ends, followed to its end;
# paused (SIGSTOP) while the frame is read, so a fast machine cannot end
# it in between.
start_run nan --steps 2000 --nan-step 800
trainer=${pids[-1]}
tm new-session -d -s follow -x 100 -y 30 \
    "'$tool' watch --interval 0.1 '$dir/nan.h5'; echo \$? >'$dir/follow.rc'" \; \
    set-option -t follow remain-on-exit on
wait_screen follow 15 '^resdiag watch  step [0-9]+ ' || fail "no frame in 15 s"
kill -STOP "$trainer"
sleep 0.3
screen follow
first=$(step_shown)
kill -CONT "$trainer"
end=$((SECONDS + 15))
while screen follow && [ "$(step_shown)" = "$first" ]; do
    ((SECONDS < end)) || fail "the step shown stayed at $first for 15 s"
    sleep 0.1
done
kill -STOP "$trainer"
sleep 0.3
screen follow
[ -n "$(step_shown)" ] && [ "$(step_shown)" != "$first" ] || fail "the step did not advance"
echo "step shown: $first, then $(step_shown)"
grep -q '\[100x30\]' "$dir/screen" || fail "the frame does not give the 100x30 size"
if [ "$(step_shown)" -lt 800 ]; then
    grep -q 'first non-finite: none' "$dir/screen" || fail "a non-finite value before step 800"
    cp "$dir/screen" "$dir/live-screen"
fi
# the resize: SIGWINCH, the frame redrawn at the new size and cut to it
tm resize-window -t follow -x 60 -y 18
wait_screen follow 15 '\[60x18\]' || fail "the frame did not follow the resize to 60x18"
# characters, not bytes: the sparklines are UTF-8 blocks
! LC_ALL=C.UTF-8 grep -Eq '^.{61}' "$dir/screen" ||
    fail "a line wider than the 60 columns"
[ "$(wc -l <"$dir/screen")" -le 18 ] || fail "more lines than the 18 rows"
kill -CONT "$trainer"
tm resize-window -t follow -x 100 -y 30
wait_screen follow 30 'first non-finite: step 800, .*forward, rank 0' ||
    fail "the NaN injected at step 800 did not appear as the first non-finite value"
wait_gone follow 30 || fail "watch did not exit within 30 s of the run's end"
# the last frame: tmux scrolled it up a line for its "Pane is dead"
tm capture-pane -p -S -1 -t follow >"$dir/nan-screen"
[ "$(cat "$dir/follow.rc" 2>/dev/null)" = 0 ] ||
    fail "watch exited with $(cat "$dir/follow.rc" 2>/dev/null) after the run ended"

# 2. q and Ctrl-C on a run still being written; the terminal's modes back.
start_run long --steps 100000
for key in q C-c; do
    tm new-session -d -s "key$key" -x 100 -y 30 \
        "stty -a >'$dir/before.$key'; '$tool' watch '$dir/long.h5'; echo \$? >'$dir/$key.rc'; stty -a >'$dir/after.$key'" \; \
        set-option -t "key$key" remain-on-exit on
    wait_screen "key$key" 15 '^resdiag watch .* writing' || fail "no frame of the live run ($key)"
    tm send-keys -t "key$key" "$key"
    wait_gone "key$key" 10 || fail "watch did not end on $key"
    want=0
    [ "$key" = C-c ] && want=130
    [ "$(cat "$dir/$key.rc")" = "$want" ] || fail "$key: exit $(cat "$dir/$key.rc"), not $want"
    cmp -s "$dir/before.$key" "$dir/after.$key" || fail "$key: the terminal's modes changed"
done
echo "a screen during the run:"
cat "$dir/live-screen" 2>/dev/null
echo "after the NaN:"
cat "$dir/nan-screen"
echo ok
