#!/usr/bin/env bash
# quickstart.sh - the main job on a fresh machine: install what is missing,
# build, run the instrumented example trainer, and show its run file.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
out=${1:-run.h5}
./build/minimal "$out"
./build/resdiag dump "$out"
