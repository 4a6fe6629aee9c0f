#!/usr/bin/env bash
# quickstart.sh - the main job on a fresh machine: install what is missing,
# build, train the instrumented example trainer (examples/tinygpt, pre-norm,
# 200 steps), and print the report of its run file. Says what it is doing,
# one line per phase ("installing: ...", "configuring build/", "building
# (N targets)...", "training tinygpt ...", "report:").
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
out=${1:-run.h5}
echo "training tinygpt (pre-norm, 200 steps, the loss every 10) -> $out" >&2
# --overwrite: the quickstart is meant to be run again; it replaces its own
# earlier run file (never anything else, see doc/FORMAT.md).
./build/examples/tinygpt/tinygpt --out "$out" --overwrite
echo "report:" >&2
./build/resdiag report "$out"
