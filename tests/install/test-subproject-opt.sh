#!/usr/bin/env bash
# test-subproject-opt.sh - as another project's subproject, resdiag compiles
# its statistics (every lib/stats source and the SIMD kernels) at -O2 or more
# even when the parent builds at buildtype=debug, while the rest of the
# library keeps the parent's -O0. Read from the parent's compile_commands.json
# after `meson setup` alone: nothing is compiled.
# Usage: test-subproject-opt.sh SOURCE_ROOT
set -u
src=$1
. "$(dirname "$0")/../helpers/tool-test-lib.sh"

# A parent of one line; resdiag is a link to this tree, tests and all off
# as for any subproject (doc/USING.md).
mkdir -p "$dir/parent/subprojects"
cat >"$dir/parent/meson.build" <<'MESON'
project('parent', 'c', default_options : ['buildtype=debug'])
dep = dependency('resdiag')
MESON
ln -s "$(cd "$src" && pwd)" "$dir/parent/subprojects/resdiag"
expect_exit 0 "meson setup (buildtype=debug)" -- \
    meson setup --wrap-mode=nodownload "$dir/build" "$dir/parent"
[ -f "$dir/build/build.ninja" ] || { tail -n 20 "$dir/out" "$dir/err"; tool_test_finish; exit; }
expect_text "$dir/out" "statistics kernels (lib/stats) are compiled at -O2" "setup says so"

# For each source of the library: its last -O flag (what gcc and clang use).
python3 - "$dir/build/compile_commands.json" "$(cd "$src" && pwd)" >"$dir/levels" <<'PY'
import json, os, shlex, sys
commands, root = json.load(open(sys.argv[1])), sys.argv[2]
for c in commands:
    path = os.path.normpath(os.path.join(c["directory"], c["file"]))
    rel = os.path.relpath(os.path.realpath(path), root)
    if not rel.startswith("lib/"):
        continue
    args = c["arguments"] if "arguments" in c else shlex.split(c["command"])
    levels = [a[2:] for a in args if a.startswith("-O")]
    print(rel, levels[-1] if levels else "none")
PY
n_stats=$(grep -c '^lib/stats/' "$dir/levels")
n_want=$(cd "$src" && ls lib/stats/*.c | wc -l)
# The SIMD files exist only on x86_64; every file present must be compiled.
[ "$n_stats" -ge 3 ] && [ "$n_stats" -le "$n_want" ] && pass ||
    fail "$n_stats lib/stats sources compiled, expected 3..$n_want"
while read -r file level; do
    case $file:$level in
    lib/stats/*:2 | lib/stats/*:3 | lib/stats/*:fast) pass ;;
    lib/stats/*) fail "$file compiled at -O$level, expected -O2 or more" ;;
    *:0) pass ;;
    *) fail "$file compiled at -O$level, expected the parent's -O0" ;;
    esac
done <"$dir/levels"
[ "$(grep -vc '^lib/stats/' "$dir/levels")" -gt 50 ] && pass ||
    fail "too few other library sources in compile_commands.json"
tool_test_finish
