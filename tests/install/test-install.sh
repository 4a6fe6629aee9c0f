#!/usr/bin/env bash
# test-install.sh - a staged install of the build (meson install --destdir)
# holds the manual pages and the bash completion, and they work from there:
# each page renders (man -l, else groff) with NAME and SYNOPSIS and names
# every option of its command's usage lines; `man resdiag-report` finds its
# page through MANPATH; the installed completion completes "rep" to report.
# Without pandoc the pages are not built: that part is skipped (exit 77
# after the rest passed).
# Usage: test-install.sh MESON BUILD-DIR RESDIAG MANDIR COMPLETIONS-DIR HAVE-PANDOC
#   MANDIR, COMPLETIONS-DIR: absolute, as configured; HAVE-PANDOC: yes | no
set -u
meson=$1
build=$2
tool=$3
mandir=$4
completions=$5
have_pandoc=$6
. "$(dirname "$0")/../helpers/tool-test-lib.sh"

stage=$dir/stage
if ! "$meson" install -C "$build" --no-rebuild --quiet --destdir "$stage" >"$dir/install.log" 2>&1
then
    echo "FAIL: meson install --destdir:"; cat "$dir/install.log"
    exit 1
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
pages="resdiag resdiag-report resdiag-check resdiag-diff resdiag-plot resdiag-dump"
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
