#!/usr/bin/env bash
# test-sanitizers.sh - the test suite again under the sanitizers (doc/TESTING.md):
#   build-asan: every suite but 'python' (an ASan library cannot be loaded
#               into a plain python) and 'install' (a consumer built without
#               the sanitizers cannot link an ASan library) with
#               AddressSanitizer + LeakSanitizer + UndefinedBehaviorSanitizer,
#               any report fatal;
#   build-tsan: the 'threads' suite under ThreadSanitizer.
# Ends with one line "N passed, N failed" over both.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh || exit 1
root=$PWD

# Any sanitizer report ends the test with an error. LSan skips the leaks
# that are HDF5's own (tests/fuzz/lsan-hdf5.supp); HDF5 has no frame
# pointers, so telling them needs the slow unwinder, which the fuzz replay
# (the test that opens damaged files) turns on for itself.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export LSAN_OPTIONS=suppressions=$root/tests/fuzz/lsan-hdf5.supp:print_suppressions=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export TSAN_OPTIONS="halt_on_error=1:exitcode=66:second_deadlock_stack=1"
# Check's fork per test keeps working under both sanitizers.

if [ ! -f build-asan/build.ninja ]; then
    meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dbench=false \
        -Dc_args=-fno-sanitize-recover=all -Dcpp_args=-fno-sanitize-recover=all >/dev/null || exit 1
fi
meson compile -C build-asan >/dev/null || exit 1
meson test -C build-asan --print-errorlogs --no-suite python --no-suite install --timeout-multiplier 3 \
    | tee build-asan/test-summary.txt
rc_asan=${PIPESTATUS[0]}

# The kernel's large mmap randomisation (vm.mmap_rnd_bits > 28) breaks the
# TSan runtime of gcc 12 ("unexpected memory mapping"): run without ASLR.
if [ ! -f build-tsan/build.ninja ]; then
    meson setup build-tsan -Db_sanitize=thread -Db_lundef=false -Dbench=false \
        -Dtools=false -Dexamples=false >/dev/null || exit 1
fi
meson compile -C build-tsan test-threads test-team >/dev/null || exit 1
wrapper=()
if command -v setarch >/dev/null; then
    wrapper=(--wrapper "setarch $(uname -m) -R")
fi
meson test -C build-tsan --no-rebuild --print-errorlogs --suite threads "${wrapper[@]}" \
    | tee build-tsan/test-summary.txt
rc_tsan=${PIPESTATUS[0]}

ok=$(cat build-asan/test-summary.txt build-tsan/test-summary.txt |
     awk '/^Ok:/ {n += $2} END {print n + 0}')
fail=$(cat build-asan/test-summary.txt build-tsan/test-summary.txt |
       awk '/^(Fail|Unexpected Pass|Timeout):/ {n += $2} END {print n + 0}')
echo "${ok} passed, ${fail} failed"
[ "$rc_asan" -eq 0 ] && [ "$rc_tsan" -eq 0 ]
