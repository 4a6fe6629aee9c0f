#!/usr/bin/env bash
# test-python-prefix.sh - the pip-installed module finds a library that
# `meson install` put under the same prefix, with no variable set (no
# RESDIAG_LIBRARY, LD_LIBRARY_PATH, PKG_CONFIG_PATH, PYTHONPATH but for
# --prefix): the build is staged (meson install --destdir STAGE), which puts
# the library in STAGE/usr/local/lib/MULTIARCH, as `meson install --prefix
# STAGE/usr/local` would, and
#   venv      a venv at STAGE/usr/local (--system-site-packages, for
#             Debian's torch) gets the module by its own `python -m pip
#             install ./python`;
#   --prefix  `pip install --prefix STAGE/usr/local ./python` (Debian's pip
#             puts it under PREFIX/local/lib/python3.X/dist-packages).
# Exit 77 (skipped) without torch or pip with setuptools >= 61.
# Usage: test-python-prefix.sh SOURCE_ROOT MESON BUILD_ROOT PROJECT_VERSION
set -u
src=$1
meson=$2
build=$3
version=$4
. "$(dirname "$0")/../helpers/tool-test-lib.sh"
py=/usr/bin/python3

. "$(dirname "$0")/python-needs.sh"

clean=(env -u RESDIAG_LIBRARY -u LD_LIBRARY_PATH -u PKG_CONFIG_PATH -u PKG_CONFIG_LIBDIR
       -u PYTHONPATH PYTHONDONTWRITEBYTECODE=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1)
check="$src/tests/install/python-install-check.py"
stage=$dir/stage
prefix=$stage/usr/local
if ! "$meson" install -C "$build" --no-rebuild --quiet --destdir "$stage" >"$dir/install.log" 2>&1
then
    echo "FAIL: meson install --destdir:"; cat "$dir/install.log"; exit 1
fi
# the library alone, as -Dpython=disabled installs it: meson's module and
# its _config.py would name the library themselves
rm -rf "$prefix"/lib/python3*/*-packages/resdiag
ls "$prefix"/lib/*/libresdiag.so.* >/dev/null 2>&1 && pass ||
    { fail "no library in $prefix/lib/MULTIARCH"; find "$stage" -name 'libresdiag*'; }
# pip builds in the source folder: a copy
mkdir "$dir/pysrc"
cp -r "$src/python/pyproject.toml" "$src/python/resdiag" "$dir/pysrc/"
rm -rf "$dir/pysrc/resdiag/__pycache__"

# run_check WHAT PYTHON [ENV...]: the check from a scratch folder (not the
# source tree), the library expected under $prefix.
run_check() {
    local what=$1 python=$2; shift 2
    expect_exit 0 "$what" -- bash -c 'cd "$1" && shift && exec "$@"' _ "$dir" "${clean[@]}" "$@" \
        "$python" "$check" "$prefix" "$src"
    expect_text "$dir/out" "ok: $version" "$what"
}

# ------------------------------------------------------------------- venv
if "$py" -m venv --system-site-packages --without-pip "$prefix" >"$dir/venv.log" 2>&1; then
    expect_exit 0 "venv: pip install ./python" -- "${clean[@]}" "$prefix/bin/python" -m pip \
        install --no-build-isolation --no-deps --no-index "$dir/pysrc"
    run_check "venv: import" "$prefix/bin/python"
    expect_text "$dir/out" "from $(realpath "$prefix")/lib/python3" "venv: the venv's module"
else
    fail "python3 -m venv"; cat "$dir/venv.log"
fi

# --------------------------------------------------------------- --prefix
expect_exit 0 "pip install --prefix" -- "${clean[@]}" "$py" -m pip install --no-build-isolation \
    --no-deps --no-index --prefix "$prefix" "$dir/pysrc"
module=$(find "$prefix" -path '*/resdiag/recorder.py' -not -path "$prefix/lib/python3*/site-packages/*" |
         head -n 1)
if [ -z "$module" ]; then
    fail "pip install --prefix: no module under $prefix but the venv's"
else
    site=$(dirname "$(dirname "$module")")
    run_check "pip --prefix: import" "$py" PYTHONPATH="$site"
    expect_text "$dir/out" "from $(realpath "$site")/resdiag" "pip --prefix: that module"
fi

tool_test_finish
