#!/usr/bin/env bash
# test-quickstart.sh - scripts/quickstart.sh keeps stdout for the trainer and
# the report: in a copy of the scripts with a fake apt (deps.sh), a fake
# meson and ninja on PATH, and fake trainer and tool, what apt and meson
# print goes to the build log the script names on stderr, the phase lines
# stay on stderr, and a failed build says so with the log's end. The real
# build and 200 training steps take minutes; the streams are the script's.
# Usage: test-quickstart.sh SCRIPTS_DIR
set -u
scripts=$1
. "$(dirname "$0")/../helpers/tool-test-lib.sh"

tree=$dir/tree
mkdir -p "$tree/scripts" "$tree/build/examples/tinygpt" "$dir/bin"
cp "$scripts/quickstart.sh" "$scripts/build.sh" "$tree/scripts/"
# deps.sh as apt prints when it installs: the phase on stderr, apt on stdout
cat >"$tree/scripts/deps.sh" <<'FAKE'
echo "installing: check" >&2
echo "Get:1 http://deb.debian.org/debian bookworm/main amd64 check 0.15.2-2 [52 kB]"
FAKE
cat >"$dir/bin/meson" <<'FAKE'
#!/bin/sh
[ -n "${FAIL_BUILD:-}" ] && [ "$1" = compile ] && { echo "FAILED: lib/x.c.o"; exit 1; }
[ "$1" = setup ] && { mkdir -p "$2"; : >"$2/build.ninja"; }
echo "INFO: autodetecting backend as ninja"
echo "[1/1] Linking target resdiag"
FAKE
printf '#!/bin/sh\necho "[1/1] cc x.c"\n' >"$dir/bin/ninja"
printf '#!/bin/sh\necho "step 0 loss 4.16"\n' >"$tree/build/examples/tinygpt/tinygpt"
printf '#!/bin/sh\necho "Placement: pre-norm (confidence high)"\n' >"$tree/build/resdiag"
chmod +x "$dir/bin"/* "$tree/build/examples/tinygpt/tinygpt" "$tree/build/resdiag"

log=$dir/quickstart.log
run_qs() {
    PATH="$dir/bin:$PATH" RESDIAG_QUICKSTART_LOG=$log bash "$tree/scripts/quickstart.sh" \
        "$dir/run.h5" >"$dir/out" 2>"$dir/err"
}

run_qs && pass || { fail "quickstart: exit $?"; cat "$dir/err"; }
printf 'step 0 loss 4.16\nPlacement: pre-norm (confidence high)\n' >"$dir/want"
cmp -s "$dir/out" "$dir/want" && pass ||
    { fail "stdout is not the loss lines and the report alone:"; cat "$dir/out"; }
expect_text "$dir/err" "build log: $log" "names the build log on stderr"
expect_text "$dir/err" "installing: check" "the install phase on stderr"
expect_text "$dir/err" "configuring build/" "the configure phase on stderr"
expect_text "$log" "INFO: autodetecting backend" "meson's lines in the log"
expect_text "$log" "Get:1 http://deb.debian.org" "apt's lines in the log"

# a failed build: not 0, and its end on stderr
FAIL_BUILD=1 run_qs && fail "quickstart with a failed build: exit 0" || pass
expect_text "$dir/err" "FAILED: lib/x.c.o" "a failed build's end on stderr"
[ -s "$dir/out" ] && { fail "a failed build wrote to stdout:"; cat "$dir/out"; } || pass

tool_test_finish
