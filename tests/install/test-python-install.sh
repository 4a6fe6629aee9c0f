#!/usr/bin/env bash
# test-python-install.sh - the Python module as a user installs it
# (doc/PYTHON.md, "Install"), with Debian's /usr/bin/python3:
#   1. `meson install` of this tree into a scratch prefix: `import resdiag`
#      with only PYTHONPATH set (the prefix's purelib directory) loads the
#      library installed with it (the generated _config.py), records one
#      step of a torch encoder and reads it back; -Dpython=disabled
#      installs no module;
#   2. `pip install --no-build-isolation --no-deps --target DIR ./python`
#      (offline, Debian's setuptools): the same, the library found through
#      LD_LIBRARY_PATH, then through PKG_CONFIG_PATH (pkg-config's libdir);
#      neither: one clear ImportError;
#   3. a library of another release (FAKE_LIB, version FAKE_VERSION): the
#      import fails naming both versions; the module's version is the
#      project's.
# Exit 77 (skipped) without torch, pip or setuptools >= 61 for /usr/bin/python3.
# Usage: test-python-install.sh SOURCE_ROOT MESON PROJECT_VERSION FAKE_LIB FAKE_VERSION
set -u
src=$1
meson=$2
version=$3
fake_lib=$4
fake_version=$5
. "$(dirname "$0")/../helpers/tool-test-lib.sh"
py=/usr/bin/python3

. "$(dirname "$0")/python-needs.sh"
if ! command -v "$meson" >/dev/null 2>&1; then
    echo "no meson to install with: skipped"; exit 77
fi

# A clean environment: nothing points at the build tree or a library.
clean=(env -u RESDIAG_LIBRARY -u LD_LIBRARY_PATH -u PKG_CONFIG_PATH -u PYTHONPATH
       PYTHONDONTWRITEBYTECODE=1)
check="$src/tests/install/python-install-check.py"

# The module's version is the project's.
got=$("$py" -c 'import ast, sys
tree = ast.parse(open(sys.argv[1]).read())
print(next(n.value.value for n in tree.body if isinstance(n, ast.Assign)
           and n.targets[0].id == "__version__"))' "$src/python/resdiag/_version.py")
[ "$got" = "$version" ] && pass || fail "python/resdiag/_version.py says '$got', meson.build '$version'"

# 1. meson install into a scratch prefix.
prefix=$dir/prefix
opts=(-Dtests=false -Dtools=false -Dexamples=false -Dbench=false)
if "$meson" setup "$dir/b" "$src" --prefix="$prefix" "${opts[@]}" -Dpython=enabled \
        >"$dir/setup.log" 2>&1 && "$meson" install -C "$dir/b" >"$dir/install.log" 2>&1; then
    pass
else
    fail "meson setup/install"; tail -n 20 "$dir/setup.log" "$dir/install.log"
fi
config=$(find "$prefix" -path '*/resdiag/_config.py' | head -n 1)
libfile=$(find "$prefix" -name 'libresdiag.so.*.*.*' | head -n 1)
if [ -n "$config" ] && [ -n "$libfile" ]; then
    pass
else
    fail "meson install put no resdiag/_config.py or no library under $prefix"
    find "$prefix"; tool_test_finish; exit
fi
purelib=$(dirname "$(dirname "$config")")
libdir=$(dirname "$libfile")
expect_exit 0 "import after meson install" -- \
    bash -c 'cd "$1" && shift && "$@"' _ "$dir" "${clean[@]}" PYTHONPATH="$purelib" \
    "$py" "$check" "$prefix" "$src"
expect_text "$dir/out" "ok: $version" "import after meson install"

# -Dpython=disabled: the library and no module.
"$meson" setup "$dir/b-nopy" "$src" --prefix="$prefix-nopy" "${opts[@]}" -Dpython=disabled \
    >"$dir/setup.log" 2>&1 || fail "meson setup -Dpython=disabled"
"$meson" introspect "$dir/b-nopy" --installed >"$dir/installed.json" 2>&1
if grep -q 'libresdiag\.so' "$dir/installed.json" && ! grep -q 'resdiag/[^"]*\.py' "$dir/installed.json"; then
    pass
else
    fail "-Dpython=disabled: not the library alone"; cat "$dir/installed.json"
fi

# 2. pip, from a copy (setuptools builds in the source folder).
mkdir "$dir/pysrc"
cp -r "$src/python/pyproject.toml" "$src/python/resdiag" "$dir/pysrc/"
rm -rf "$dir/pysrc/resdiag/__pycache__"
expect_exit 0 "pip install" -- "${clean[@]}" PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    "$py" -m pip install --no-build-isolation --no-deps --no-index --target "$dir/pip" "$dir/pysrc"
[ -f "$dir/pip/resdiag/recorder.py" ] && [ ! -e "$dir/pip/resdiag/_config.py" ] && pass \
    || fail "pip install: not the module alone in $dir/pip"
pip_import() { # DESCRIPTION ENV...: the check under the pip-installed module
    local what=$1; shift
    expect_exit 0 "$what" -- bash -c 'cd "$1" && shift && "$@"' _ "$dir" "${clean[@]}" \
        PYTHONPATH="$dir/pip" "$@" "$py" "$check" "$prefix" "$src"
    expect_text "$dir/out" "ok: $version" "$what"
}
pip_import "pip module, library through LD_LIBRARY_PATH" LD_LIBRARY_PATH="$libdir"
if command -v pkg-config >/dev/null 2>&1; then
    pip_import "pip module, library through pkg-config" PKG_CONFIG_PATH="$libdir/pkgconfig"
fi
if ! ldconfig -p 2>/dev/null | grep -q libresdiag &&
   ! ls /usr/local/lib/*/libresdiag.so.* /usr/local/lib/libresdiag.so.* >/dev/null 2>&1; then
    expect_exit 1 "pip module, no library anywhere" -- bash -c 'cd "$1" && shift && "$@"' _ \
        "$dir" "${clean[@]}" PYTHONPATH="$dir/pip" "$py" -c 'import resdiag'
    expect_text "$dir/err" "ImportError: resdiag: cannot load libresdiag" "no library anywhere"
fi

# 3. A library of another release, by path.
expect_exit 1 "library of another version" -- bash -c 'cd "$1" && shift && "$@"' _ "$dir" \
    "${clean[@]}" PYTHONPATH="$purelib" RESDIAG_LIBRARY="$fake_lib" "$py" -c 'import resdiag'
expect_text "$dir/err" "ImportError: resdiag: $fake_lib is libresdiag $fake_version" "another version"
expect_text "$dir/err" "this resdiag Python module is $version" "another version"

tool_test_finish
