#!/usr/bin/env bash
# quickstart.sh - the main job on a fresh machine: install what is missing,
# build, train the instrumented example trainer (examples/tinygpt, pre-norm,
# 200 steps), and print the report of its run file. Says what it is doing,
# one line per phase on stderr ("installing: ...", "configuring build/",
# "building (N targets)...", "training tinygpt ...", "report:"); what apt
# and meson print on stdout goes to a log file whose path it says, so that
# stdout holds the trainer's loss lines and the report only.
# Usage: quickstart.sh [RUN_FILE]   (default run.h5)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-run.h5}
log=${RESDIAG_QUICKSTART_LOG:-${TMPDIR:-/tmp}/resdiag-quickstart.log}
echo "build log: $log" >&2
# stderr stays: build.sh's phase lines and any error are on it
if ! bash scripts/build.sh >"$log"; then
    echo "the build failed; the end of $log:" >&2
    tail -n 40 "$log" >&2
    exit 1
fi
echo "training tinygpt (pre-norm, 200 steps, the loss every 10) -> $out" >&2
# --overwrite: the quickstart is meant to be run again; it replaces its own
# earlier run file (never anything else, see doc/FORMAT.md).
./build/examples/tinygpt/tinygpt --out "$out" --overwrite
echo "report:" >&2
./build/resdiag report "$out"
