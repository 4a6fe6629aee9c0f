#!/usr/bin/env bash
# test-readme.sh - what README.md shows works as shown: its C program
# ("Instrumenting a trainer"), taken from the README as it is, compiles
# against the built library with warnings as errors, runs with no line
# logged (no "client bug"), and writes the run it says (3 steps, 2 layers
# of attn and mlp, the mlp.w2 gradient of every layer); its synopsis of the
# tool names every option of each command's usage and every figure; its
# package lists hold every package scripts/deps.sh installs.
# Usage: test-readme.sh SOURCE_ROOT BUILD_ROOT RESDIAG SANITIZE CC...
set -u
src=$1
build=$2
tool=$3
sanitize=$4
shift 4
. "$(dirname "$0")/../helpers/tool-test-lib.sh"

# The first ```c block of the README.
awk '/^```c$/ { on = 1; next } on && /^```$/ { exit } on' "$src/README.md" >"$dir/snippet.c"
[ -s "$dir/snippet.c" ] && pass || fail "no \`\`\`c block in README.md"

flags=(-std=c11 -Wall -Wextra -Werror -I"$src/include" -I"$build")
# a sanitized library links only into a sanitized program
[ "$sanitize" != none ] && flags+=(-fsanitize="$sanitize")
expect_exit 0 "the README's C program compiles" -- \
    "$@" "${flags[@]}" -o "$dir/snippet" "$dir/snippet.c" \
    -L"$build" -lresdiag -Wl,-rpath,"$build"
if [ -x "$dir/snippet" ]; then
    (cd "$dir" && ./snippet >"$dir/run.out" 2>"$dir/run.err")
    rc=$?
    [ "$rc" -eq 0 ] && pass || fail "the README's program exits $rc"
    if grep -q "client bug" "$dir/run.err"; then
        fail "the README's program logs a client bug:"; head -n 3 "$dir/run.err"
    elif [ -s "$dir/run.err" ]; then
        fail "the README's program logs:"; head -n 3 "$dir/run.err"
    else
        pass
    fi
    [ -s "$dir/run.out" ] && fail "the README's program writes to stdout" || pass
    expect_exit 0 "resdiag dump --all of its run" -- "$tool" dump --all "$dir/run.h5"
    expect_text "$dir/out" "recorded: 3 steps, step 0 .. 2" "its run"
    expect_text "$dir/out" "2 layers, d_model 16" "its run"
    # the gradient of both layers at every step: 2 x 3 rows naming mlp.w2
    n=$(grep -c 'mlp\.w2' "$dir/out")
    [ "$n" -ge 6 ] && pass || { fail "mlp.w2 in $n lines of the dump, expected >= 6"; cat "$dir/out"; }
fi

# ------------------------------------------------------------ the synopsis
# The lines of "## The tool"'s first block from "resdiag CMD" to the next command.
awk '/^## The tool/ { t = 1 } t && /^```$/ { if (on) exit; on = 1; next } on' \
    "$src/README.md" >"$dir/synopsis"
for cmd in report check diff plot dump help version; do
    awk -v c="resdiag $cmd" 'index($0, c) == 1 { on = 1; print; next }
        /^resdiag / { on = 0 } on' "$dir/synopsis" >"$dir/syn.$cmd"
    [ -s "$dir/syn.$cmd" ] && pass || fail "README synopsis: no line for $cmd"
    for opt in $("$tool" "$cmd" --help | sed '/^$/q' |
                 grep -oE -- '(^|[][ |])-(-[a-z][a-z-]*|[a-z])' | sed 's/^[][ |]//' | sort -u); do
        grep -qF -- "$opt" "$dir/syn.$cmd" && pass || fail "README synopsis: $cmd lacks $opt"
    done
done
for what in growth updates gradients loss; do
    grep -qF -- "$what" "$dir/syn.plot" && pass || fail "README synopsis: plot lacks --what $what"
done

# ------------------------------------------------------------ the packages
read -ra packages < <(sed -n 's/^packages=(\(.*\))$/\1/p' "$src/scripts/deps.sh")
[ "${#packages[@]}" -gt 5 ] && pass || fail "no packages=(...) line in scripts/deps.sh"
grep -E '^apt-get install ' "$src/README.md" | head -n 1 >"$dir/apt"
tr '\n' ' ' <"$src/README.md" | grep -oE '`scripts/deps.sh` installs only what is missing: `[^`]*`' \
    >"$dir/listed"
for p in "${packages[@]}"; do
    grep -qw -- "$p" "$dir/apt" && pass || fail "README's apt-get install lacks $p"
    grep -qw -- "$p" "$dir/listed" && pass || fail "README's list of deps.sh lacks $p"
done
tool_test_finish
