#!/usr/bin/env bash
# bench-callgrind.sh - the fixed per-call costs of the public API as
# instruction counts: runs resdiag-bench's fixed-cost scenario (every block
# site forward and backward of a 12-layer model on 4 x 64 f32 tensors, two
# parameter gradients per layer, flush_steps 64) under callgrind, once per
# function, counting only inside that function (--toggle-collect), and
# prints the instructions executed (Ir) per call. Deterministic: the same
# build gives the same counts whatever else the machine runs, unlike a
# clock. Needs valgrind.
#
#   bash scripts/bench-callgrind.sh [BUILD_DIR] [STEPS]     (build, 128)
#
# Output, one line per function:
#   callgrind FUNCTION: IR Ir per call (CALLS calls, STEPS steps)
set -euo pipefail
build=${1:-build}
steps=${2:-128}
bench="$build/resdiag-bench"
if ! command -v valgrind >/dev/null; then
    echo "bench-callgrind: valgrind is not installed (apt-get install valgrind)" >&2
    exit 1
fi
if [ ! -x "$bench" ]; then
    echo "bench-callgrind: $bench not built (meson compile -C $build)" >&2
    exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for fn in resdiag_step_begin resdiag_observe_at resdiag_param_grad_at resdiag_step_end; do
    out="$tmp/$fn.out"
    valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect="$fn" \
        "$bench" --fixed-cost "$steps" >"$tmp/$fn.calls" 2>"$tmp/$fn.log" || {
        echo "bench-callgrind: the scenario failed under valgrind:" >&2
        cat "$tmp/$fn.log" >&2
        exit 1
    }
    calls=$(awk -v f="$fn" '$1 == "calls" && $2 == f { print $3 }' "$tmp/$fn.calls")
    # "summary: N" (or "totals: N"): the instructions counted while collecting
    ir=$(awk '$1 == "summary:" || $1 == "totals:" { print $2; exit }' "$out")
    if [ -z "$calls" ] || [ -z "$ir" ] || [ "$calls" -eq 0 ]; then
        echo "bench-callgrind: no count for $fn" >&2
        exit 1
    fi
    awk -v f="$fn" -v ir="$ir" -v c="$calls" -v s="$steps" \
        'BEGIN { printf "callgrind %s: %.0f Ir per call (%d calls, %d steps)\n", f, ir / c, c, s }'
done
