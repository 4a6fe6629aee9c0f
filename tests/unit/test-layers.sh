#!/bin/bash
# The layering of lib/ (doc/ARCHITECTURE.md), checked on the sources:
#   - a file in lib/ includes private headers only from its own layer or
#     from a layer below it (common < stats < format < h5 < record, analysis
#     < render; record and analysis are siblings: neither includes the other);
#   - tools/ and every folder in it include no private header: they are
#     built on resdiag.h alone (and their own headers, found in the file's
#     folder or in tools/);
#   - bench/ is a consumer of lib's internals: it times each kernel path of
#     lib/stats directly (one process, the paths interleaved), which the
#     public header cannot select, so it may include stats/ headers, and no
#     other private header;
#   - no function in lib/ is 150 lines or longer (needs ctags; else skipped
#     with a message).
# Usage: test-layers.sh SOURCE_ROOT
src=${1:?usage: test-layers.sh SOURCE_ROOT}
cd "$src" || exit 1
fail=0
rank() {
    case $1 in
        common) echo 0 ;; stats) echo 1 ;; format) echo 2 ;; h5) echo 3 ;;
        record) echo 4 ;; analysis) echo 4 ;; render) echo 5 ;; *) echo -1 ;;
    esac
}
for f in lib/*/*.c lib/*/*.h; do
    layer=${f#lib/}; layer=${layer%%/*}
    mine=$(rank "$layer")
    if [ "$mine" -lt 0 ]; then
        echo "FAIL: $f: folder '$layer' is no layer of doc/ARCHITECTURE.md"; fail=1; continue
    fi
    while read -r inc; do
        to=${inc%%/*}
        if [ "$to" = "$inc" ]; then
            [ "$inc" = resdiag.h ] || [ "$inc" = resdiag-version.h ] && continue
            echo "FAIL: $f includes \"$inc\" without its layer folder"; fail=1; continue
        fi
        theirs=$(rank "$to")
        if [ "$theirs" -lt 0 ]; then
            echo "FAIL: $f includes \"$inc\" from no layer"; fail=1
        elif [ "$to" != "$layer" ] && [ "$theirs" -ge "$mine" ]; then
            echo "FAIL: $f ($layer) includes \"$inc\" ($to): an arrow up or sideways"; fail=1
        fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done
# The quoted includes of file $1.
includes() {
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$1"
}
while IFS= read -r -d '' f; do
    here=$(dirname "$f")
    while read -r inc; do
        case $inc in
            resdiag.h | resdiag-version.h) ;;
            */*) echo "FAIL: $f includes the private header \"$inc\""; fail=1 ;;
            *) [ -e "$here/$inc" ] || [ -e "tools/$inc" ] ||
                { echo "FAIL: $f includes \"$inc\", not in $here/ or tools/"; fail=1; } ;;
        esac
    done < <(includes "$f")
done < <(find tools -type f \( -name '*.c' -o -name '*.h' \) -print0)
while IFS= read -r -d '' f; do
    while read -r inc; do
        case $inc in
            resdiag.h | resdiag-version.h | stats/*.h) ;;
            */*) echo "FAIL: $f includes \"$inc\": bench/ may include stats/ headers only"; fail=1 ;;
            *) [ -e "bench/$inc" ] || { echo "FAIL: $f includes \"$inc\", not in bench/"; fail=1; } ;;
        esac
    done < <(includes "$f")
done < <(find bench -type f \( -name '*.c' -o -name '*.h' \) -print0 2>/dev/null)
if command -v ctags >/dev/null && ctags --version 2>/dev/null | grep -q Universal; then
    long=$(for f in lib/*/*.c; do
        ctags -x --c-kinds=f --_xformat='%N %n %e' "$f" | awk -v f="$f" '$3 - $2 + 1 >= 150 { print f ": " $1 " is " $3 - $2 + 1 " lines" }'
    done)
    if [ -n "$long" ]; then echo "$long" | sed 's/^/FAIL: /'; fail=1; fi
else
    echo "note: Universal Ctags not installed; function lengths not checked"
fi
[ $fail = 0 ] && echo "layers: every include goes down, tools/ uses resdiag.h only, bench/ stats/ only"
exit $fail
