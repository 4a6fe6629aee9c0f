#!/usr/bin/env bash
# quickstart.sh - the main job on a fresh machine: install what is missing,
# build, train the instrumented example trainer (examples/tinygpt, pre-norm,
# 200 steps), and print the report of its run file.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
out=${1:-run.h5}
# --overwrite: the quickstart is meant to be run again; it replaces its own
# earlier run file (never anything else, see doc/FORMAT.md).
./build/examples/tinygpt/tinygpt --out "$out" --overwrite
./build/resdiag report "$out"
