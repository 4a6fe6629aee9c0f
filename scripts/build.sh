#!/usr/bin/env bash
# build.sh - configures (once) and builds resdiag in ./build, saying what it
# does: one line per phase, then the build's own progress lines.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
if [ ! -f build/build.ninja ]; then
    echo "configuring build/" >&2
    setup_log=$(mktemp)
    trap 'rm -f "$setup_log"' EXIT
    # meson's own 60 lines only when it fails
    meson setup build >"$setup_log" 2>&1 || { cat "$setup_log" >&2; exit 1; }
fi
# What is left to build, from ninja's dry run (its "[k/N] ..." lines).
if command -v ninja >/dev/null; then
    todo=$(ninja -C build -n 2>/dev/null | grep -c '^\[' || true)
    if [ "${todo:-0}" -eq 0 ]; then
        echo "build/ is up to date" >&2
    else
        echo "building (${todo} targets)..." >&2
    fi
else
    echo "building..." >&2
fi
meson compile -C build
