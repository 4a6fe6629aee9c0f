#!/usr/bin/env bash
# quickstart.sh - the main job on a fresh machine: install what is missing,
# build, train the instrumented example trainer (examples/tinygpt, pre-norm,
# 200 steps), and print the report of its run file.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
out=${1:-run.h5}
./build/examples/tinygpt/tinygpt --out "$out"
./build/resdiag report "$out"
