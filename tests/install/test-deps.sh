#!/usr/bin/env bash
# test-deps.sh - scripts/deps.sh against a fake dpkg-query, apt-get and sudo
# on PATH: nothing is installed when nothing is missing; what is missing is
# installed, and apt waits for the dpkg lock (DPkg::Lock::Timeout) instead of
# failing when another apt holds it; the benchmark's optional peers are in
# the list, so that CI builds the bench with them.
# Usage: test-deps.sh DEPS_SH
set -u
deps=$1
. "$(dirname "$0")/../helpers/tool-test-lib.sh"

fake=$dir/bin
mkdir -p "$fake"
# dpkg-query -W -f=... PACKAGE: installed, except those in $dir/missing
cat >"$fake/dpkg-query" <<FAKE
#!/bin/sh
for p; do :; done
grep -qx "\$p" "$dir/missing" 2>/dev/null && exit 1
printf 'install ok installed'
FAKE
# apt-get: one line of arguments per call
cat >"$fake/apt-get" <<FAKE
#!/bin/sh
echo "\$*" >>"$dir/apt-args"
FAKE
printf '#!/bin/sh\nexec "$@"\n' >"$fake/sudo"
chmod +x "$fake"/*

run_deps() { PATH="$fake:$PATH" bash "$deps" >"$dir/out" 2>"$dir/err"; }

: >"$dir/missing"
run_deps && pass || { fail "deps.sh with nothing missing: exit $?"; cat "$dir/err"; }
[ ! -e "$dir/apt-args" ] && pass || { fail "apt-get called with nothing missing:"; cat "$dir/apt-args"; }

echo pandoc >"$dir/missing"
run_deps && pass || { fail "deps.sh with pandoc missing: exit $?"; cat "$dir/err"; }
expect_text "$dir/err" "installing: pandoc" "says what it installs"
[ "$(wc -l <"$dir/apt-args" 2>/dev/null)" = 2 ] && pass || fail "expected 2 apt-get calls (update, install)"
# every call waits for the lock; the install names exactly what is missing
if [ -e "$dir/apt-args" ]; then
    grep -vq -- "-o DPkg::Lock::Timeout=600 " "$dir/apt-args" &&
        { fail "an apt-get call without -o DPkg::Lock::Timeout=600:"; cat "$dir/apt-args"; } || pass
    grep -q -- " update" "$dir/apt-args" && pass || fail "no apt-get update"
    grep -qE -- " install .* pandoc$" "$dir/apt-args" && pass || { fail "pandoc not installed:"; cat "$dir/apt-args"; }
    grep " install " "$dir/apt-args" | grep -q "gcc" && fail "installs a package that is there" || pass
fi
# the benchmark's libdeflate peer (bench/deflate.c) is installed when missing
: >"$dir/apt-args"
echo libdeflate-dev >"$dir/missing"
run_deps && pass || { fail "deps.sh with libdeflate-dev missing: exit $?"; cat "$dir/err"; }
grep -qE -- " install .* libdeflate-dev$" "$dir/apt-args" && pass ||
    { fail "libdeflate-dev not installed:"; cat "$dir/apt-args"; }
tool_test_finish
