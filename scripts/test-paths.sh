#!/usr/bin/env bash
# test-paths.sh - the suites again on every other statistics kernel path
# this CPU can take (lib/stats/stats.h), so that a developer or CI on an
# AVX-512 machine sees what an AVX2-only or a non-SIMD machine sees:
#   RESDIAG_DISABLE_AVX512=1  the AVX2 path (only where the CPU has AVX-512;
#                             elsewhere the default run already took it)
#   RESDIAG_FORCE_PORTABLE=1  the portable path
# scripts/test.sh runs the best path. Every suite but 'install' (builds and
# installs that compute nothing new). Ends with one line "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >/dev/null || exit 1

# The library's own test for AVX-512 (F, DQ and BW) and AVX2 (with FMA
# and F16C), read from the CPU's flags.
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
has() { for f in "$@"; do [[ " $flags " == *" $f "* ]] || return 1; done; }
runs=()
if has avx512f avx512dq avx512bw; then
    runs+=("RESDIAG_DISABLE_AVX512=1")
else
    echo "test-paths: no AVX-512 on this CPU: the default run took the best path left" >&2
fi
has avx2 fma f16c || echo "test-paths: no AVX2 on this CPU: the default run was portable" >&2
runs+=("RESDIAG_FORCE_PORTABLE=1")

ok=0 fail=0 rc=0
for setting in "${runs[@]}"; do
    echo "== kernel path: $setting" >&2
    summary=build/test-summary-${setting%%=*}.txt
    env "$setting" meson test -C build --no-rebuild --print-errorlogs --no-suite install \
        | tee "$summary"
    [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
    n_ok=$(awk '/^Ok:/ {n += $2} END {print n + 0}' "$summary")
    n_fail=$(awk '/^(Fail|Unexpected Pass|Timeout):/ {n += $2} END {print n + 0}' "$summary")
    [ "$rc" -eq 0 ] || [ "$n_fail" -gt 0 ] || n_fail=1 # died before its summary
    ok=$((ok + n_ok)) fail=$((fail + n_fail))
done
echo "${ok} passed, ${fail} failed"
exit "$rc"
