#!/usr/bin/env bash
# test-completion.sh - the bash completion of resdiag (sourced in plain
# bash, without bash-completion): commands, options, the values of --expect
# and --what, run files; and for each command the options it completes are
# exactly those of the command's usage lines (plus --help, and plot's
# --output), so that a new option cannot be left out.
# Usage: test-completion.sh RESDIAG COMPLETION-SCRIPT
set -u
tool=$1
script=$2
. "$(dirname "$0")/../helpers/tool-test-lib.sh"

# shellcheck source=/dev/null
. "$script"

# complete WORD...: what _resdiag offers for the last word, sorted, one line
complete_words() {
    COMP_WORDS=("$@")
    COMP_CWORD=$(($# - 1))
    COMPREPLY=()
    _resdiag
    printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ' | sed 's/ $//'
}
expect_completion() { # WANT WORD...
    local want=$1 got
    shift
    got=$(complete_words "$@")
    if [ "$got" = "$want" ]; then pass; else fail "[$*]: '$got', expected '$want'"; fi
}

expect_completion "report" resdiag rep
expect_completion "diff dump" resdiag d
expect_completion "--help --version check diff dump help plot report version watch" resdiag ""
expect_completion "--step" resdiag report --st
expect_completion "--max-growth" resdiag check --expect pre --m
expect_completion "parallel post-norm pre-norm" resdiag check --expect p
expect_completion "declared deepnorm" resdiag check --expect=d   # one word
expect_completion "declared deepnorm" resdiag check --expect = d # split at '='
expect_completion "gradients growth" resdiag plot --what g
expect_completion "loss" resdiag plot --what l
expect_completion "diff dump" resdiag help d
expect_completion "" resdiag report --step ""

# Files: run files for the run, any file after --html / -o.
cd "$dir" || exit 1
mkdir sub && : >run1.h5 && : >run2.h5 && : >notes.txt
expect_completion "run1.h5 run2.h5 sub" resdiag report ""
expect_completion "notes.txt" resdiag report --html no
expect_completion "notes.txt" resdiag plot -o no
expect_completion "run1.h5" resdiag diff run2.h5 run1
cd - >/dev/null || exit 1

# Per command: the options offered for "-" against the usage lines.
usage_options() {
    "$tool" "$1" --help | sed '/^$/q' | grep -oE -- '(^|[][ |])-(-[a-z][a-z-]*|[a-z])' |
        sed 's/^[][ |]//' | sort -u
}
for cmd in report check diff plot dump watch; do
    want=$( (usage_options "$cmd"; echo --help; [ "$cmd" = plot ] && echo --output) |
            sort -u | tr '\n' ' ' | sed 's/ $//')
    expect_completion "$want" resdiag "$cmd" -
done

tool_test_finish
