#!/usr/bin/env bash
# test-install.sh - a staged install of the build (meson install --destdir)
# holds the manual pages and the bash completion, and they work from there,
# and its tool starts there with no LD_LIBRARY_PATH (its RUNPATH names the
# library's directory relative to itself) and reads a run:
# each page renders (man -l, else groff) with NAME and SYNOPSIS and names
# every option of its command's usage lines; `man resdiag-report` finds its
# page through MANPATH; the installed completion completes "rep" to report.
# Without pandoc the pages are not built: that part is skipped (exit 77
# after the rest passed).
# Usage: test-install.sh MESON BUILD-DIR RESDIAG MANDIR COMPLETIONS-DIR HAVE-PANDOC
#                        BINDIR LIBDIR VERSION MINIMAL
#   MANDIR, COMPLETIONS-DIR, BINDIR, LIBDIR: absolute, as configured;
#   HAVE-PANDOC: yes | no; MINIMAL: examples/minimal, to write a run, or none
set -u
meson=$1
build=$2
tool=$3
mandir=$4
completions=$5
have_pandoc=$6
bindir=$7
libdir=$8
version=$9
minimal=${10}
. "$(dirname "$0")/../helpers/tool-test-lib.sh"

stage=$dir/stage
if ! "$meson" install -C "$build" --no-rebuild --quiet --destdir "$stage" >"$dir/install.log" 2>&1
then
    echo "FAIL: meson install --destdir:"; cat "$dir/install.log"
    exit 1
fi

# ------------------------------------------------- the tool, where it lies
# Under /usr the loader finds the library anyway and no RUNPATH is set.
if [ "${bindir#/usr/}" = "$bindir" ] || [ "${bindir#/usr/local/}" != "$bindir" ]; then
    staged=$stage$bindir/resdiag
    # The library of the staged prefix, not one of the build or the system.
    env -u LD_LIBRARY_PATH ldd "$staged" >"$dir/ldd" 2>&1
    got=$(awk -v so="libresdiag.so.${version%%.*}" '$1 == so && $2 == "=>" { print $3 }' "$dir/ldd")
    [ -n "$got" ] && [ "$(realpath "$got")" = "$(realpath "$stage$libdir")/libresdiag.so.$version" ] &&
        pass || { fail "staged tool: libresdiag not from $stage$libdir:"; cat "$dir/ldd"; }
    expect_exit 0 "staged tool: resdiag version" -- env -u LD_LIBRARY_PATH "$staged" version
    expect_text "$dir/out" "$version" "staged tool: resdiag version"
    if [ "$minimal" != none ]; then
        expect_exit 0 "minimal writes a run" -- "$minimal" "$dir/run.h5"
        expect_exit 0 "staged tool: resdiag report" -- \
            env -u LD_LIBRARY_PATH "$staged" report "$dir/run.h5"
        expect_text "$dir/out" "Run: 2 layers" "staged tool: resdiag report"  # L = 2 in minimal.c
    fi
fi

# ------------------------------------------------------------ completion
comp=$stage$completions/resdiag
if [ -f "$comp" ]; then
    got=$(bash -c '. "$1"; COMP_WORDS=(resdiag rep); COMP_CWORD=1; _resdiag; echo "${COMPREPLY[@]}"' \
          _ "$comp")
    [ "$got" = report ] && pass || fail "installed completion: 'resdiag rep' gives '$got'"
else
    fail "no completion at $completions/resdiag"
fi

# -------------------------------------------------------------- man pages
pages="resdiag resdiag-report resdiag-check resdiag-diff resdiag-plot resdiag-dump resdiag-watch"
if [ "$have_pandoc" != yes ]; then
    for p in $pages; do
        [ -e "$stage$mandir/man1/$p.1" ] && fail "$p.1 installed without pandoc" || pass
    done
    echo "SKIP: the man pages (pandoc not found when configured); $passes passed, $fails failed"
    [ "$fails" -eq 0 ] && exit 77
    exit 1
fi

# Renders a page as plain ASCII text, wide enough that nothing is broken
# or hyphenated.
render() {
    if command -v man >/dev/null; then
        LC_ALL=C MANWIDTH=400 man -E ascii -l -P cat "$1" 2>/dev/null
    elif command -v groff >/dev/null; then
        groff -man -Tascii -rLL=400n -P-cbou "$1" 2>/dev/null
    else
        return 1
    fi
}
if ! command -v man >/dev/null && ! command -v groff >/dev/null; then
    echo "SKIP: neither man nor groff to render the pages; $passes passed, $fails failed"
    [ "$fails" -eq 0 ] && exit 77
    exit 1
fi

usage_options() {
    "$tool" "$1" --help | sed '/^$/q' | grep -oE -- '(^|[][ |])-(-[a-z][a-z-]*|[a-z])' |
        sed 's/^[][ |]//' | sort -u
}

for p in $pages; do
    f=$stage$mandir/man1/$p.1
    if [ ! -s "$f" ]; then fail "$p.1 not installed in $mandir/man1"; continue; fi
    render "$f" >"$dir/$p.txt"
    for section in NAME SYNOPSIS DESCRIPTION; do
        grep -qx "$section" "$dir/$p.txt" && pass || fail "$p.1: no $section section"
    done
    # the NAME line names the command
    name=${p/-/ }
    sed -n '/^NAME$/,/^[A-Z]/p' "$dir/$p.txt" | grep -qF -- "$name - " && pass ||
        fail "$p.1: NAME does not say '$name - ...'"
    # the title line: resdiag-report(1)
    head -n 1 "$dir/$p.txt" | grep -qF "$p(1)" && pass || fail "$p.1: title is not $p(1)"
    if [ "$p" != resdiag ]; then
        cmd=${p#resdiag-}
        for opt in $(usage_options "$cmd"); do
            grep -qF -- "$opt" "$dir/$p.txt" && pass || fail "$p.1: option $opt not in the page"
        done
        # and the synopsis is the command's
        sed -n '/^SYNOPSIS$/,/^[A-Z]/p' "$dir/$p.txt" | grep -qF -- "resdiag $cmd" && pass ||
            fail "$p.1: SYNOPSIS does not show 'resdiag $cmd'"
    else
        for cmd in report check diff plot dump; do
            grep -qF -- "resdiag-$cmd(1)" "$dir/$p.txt" && pass ||
                fail "resdiag.1 does not refer to resdiag-$cmd(1)"
        done
    fi
done

# man finds an installed page by name
if command -v man >/dev/null; then
    MANPATH=$stage$mandir LC_ALL=C MANWIDTH=400 man -E ascii -P cat resdiag-report \
        >"$dir/by-name.txt" 2>"$dir/by-name.err"
    grep -qx SYNOPSIS "$dir/by-name.txt" && pass ||
        { fail "MANPATH=... man resdiag-report"; cat "$dir/by-name.err"; }
fi

tool_test_finish
