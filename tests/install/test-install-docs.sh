#!/usr/bin/env bash
# test-install-docs.sh - a staged install (meson install --destdir) holds
# the docs under datadir/doc/resdiag: every doc/ page that the tool's help
# texts (`resdiag help` and each command's) cite is there, the help names
# the installed directory, and the installed README's links to doc/ pages
# resolve inside the install.
# Usage: test-install-docs.sh MESON BUILD-DIR RESDIAG DOCDIR (absolute, as configured)
set -u
meson=$1
build=$2
tool=$3
docdir=$4
. "$(dirname "$0")/../helpers/tool-test-lib.sh"

stage=$dir/stage
if ! "$meson" install -C "$build" --no-rebuild --quiet --destdir "$stage" >"$dir/install.log" 2>&1
then
    echo "FAIL: meson install --destdir:"; cat "$dir/install.log"
    exit 1
fi
inst=$stage$docdir

# Every help text: the overview and each command's.
"$tool" help >"$dir/help" 2>&1
for c in $(awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { exit }' \
           "$dir/help"); do
    "$tool" help "$c" >>"$dir/help" 2>&1
done
grep -q "^  report " "$dir/help" && pass || fail "resdiag help lists no report command"

# The help says where the docs are: the configured directory.
grep -qF "$docdir" "$dir/help" && pass || fail "no help text names the doc directory $docdir"

# Each doc/ page a help text cites is installed (REPORT.md at least is cited).
cited=$(grep -o 'doc/[A-Za-z0-9_./-]*\.md' "$dir/help" | sort -u)
echo "$cited" | grep -qx 'doc/REPORT.md' && pass || fail "the help does not cite doc/REPORT.md"
for p in $cited; do
    [ -f "$inst/$p" ] && pass || fail "help cites $p, not installed at $docdir/$p"
done

# The installed README's links into doc/ hold there.
[ -f "$inst/README.md" ] && pass || fail "README.md not installed in $docdir"
for p in $(grep -o '](doc/[A-Za-z0-9_./-]*\.md' "$inst/README.md" 2>/dev/null | sed 's/^](//' | sort -u); do
    [ -f "$inst/$p" ] && pass || fail "the installed README links $p, which is not installed"
done
for page in resdiag resdiag-report; do
    [ -f "$inst/doc/man/$page.md" ] && pass || fail "doc/man/$page.md not installed"
done

tool_test_finish
