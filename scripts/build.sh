#!/usr/bin/env bash
# build.sh - configures (once) and builds resdiag in ./build.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
if [ ! -f build/build.ninja ]; then
    meson setup build >/dev/null
fi
meson compile -C build >/dev/null
