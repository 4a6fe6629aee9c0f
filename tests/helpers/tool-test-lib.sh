# tool-test-lib.sh - shared by the shell tests of the resdiag tool: a scratch
# folder, pass/fail counting, and the checks every tool test uses.
# Source it: . "$(dirname "$0")/tool-test-lib.sh"; end with tool_test_finish.

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0
passes=0

pass() { passes=$((passes + 1)); }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect_exit CODE DESCRIPTION -- COMMAND...: runs it with stdout in
# $dir/out and stderr in $dir/err, checks the exit code, and for code 2 that
# stderr is exactly one line and nothing went to stdout.
expect_exit() {
    local want=$1 what=$2
    shift 3
    "$@" >"$dir/out" 2>"$dir/err"
    local got=$?
    if [ "$got" -ne "$want" ]; then
        fail "$what: exit $got, expected $want"; cat "$dir/err"; return
    fi
    if [ "$want" -eq 2 ] && [ "$(wc -l <"$dir/err")" -ne 1 ]; then
        fail "$what: stderr is not one line:"; cat "$dir/err"; return
    fi
    if [ "$want" -eq 2 ] && grep -q . "$dir/out"; then
        fail "$what: wrote to stdout on exit 2"; return
    fi
    pass
}

# expect_verdict CODE DESCRIPTION -- COMMAND...: for `resdiag check`: the
# exit code, and the one line saying why on stdout, nothing on stderr
# (whatever the verdict; stderr is for errors and usage only).
expect_verdict() {
    local want=$1 what=$2
    shift 3
    "$@" >"$dir/out" 2>"$dir/err"
    local got=$?
    if [ "$got" -ne "$want" ]; then
        fail "$what: exit $got, expected $want"; cat "$dir/err"; return
    fi
    if [ "$(wc -l <"$dir/out")" -ne 1 ] || ! grep -q '^resdiag check: ' "$dir/out"; then
        fail "$what: stdout is not the one verdict line:"; cat "$dir/out"; return
    fi
    if [ -s "$dir/err" ]; then
        fail "$what: wrote to stderr:"; cat "$dir/err"; return
    fi
    pass
}

expect_text() { # FILE TEXT DESCRIPTION
    if grep -qF -- "$2" "$1"; then pass; else fail "$3: '$2' not in output"; cat "$1"; fi
}

# Prints the closing line and returns the suite's status.
tool_test_finish() {
    echo "$passes passed, $fails failed"
    [ "$fails" -eq 0 ]
}
