#!/usr/bin/env bash
# test.sh - install what is missing, build, and run the whole test suite.
# Ends with one line "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh || exit 1
meson test -C build --print-errorlogs "$@" | tee build/test-summary.txt
rc=${PIPESTATUS[0]}
ok=$(awk '/^Ok:/ {print $2}' build/test-summary.txt)
fail=$(awk '/^(Fail|Unexpected Pass|Timeout):/ {n += $2} END {print n + 0}' build/test-summary.txt)
echo "${ok:-0} passed, ${fail} failed"
exit "$rc"
