#!/usr/bin/env bash
# render-html.sh - renders `resdiag report --html` of two tinygpt runs (12
# layers at initialization, 96 layers trained) and the diff page with headless Chromium to PNG at a fixed window size and checks
# the picture: for the report page, render-check.py finds each plot's frame
# on the screen and checks that the numbers of `report --json` land on
# pixels of their series' colour where the SVG's declared axis mapping puts
# them, that the legend swatches are painted, and that nothing is painted
# outside the page's column or past the window; the diff page must be a PNG
# of the window's size that is not blank.
# Usage: render-html.sh RESDIAG TINYGPT
# Skipped (77) when Debian's chromium is not installed (.ci/run installs
# it; scripts/deps.sh does not), failed instead when RESDIAG_REQUIRE_CHROMIUM
# is set (.ci/run sets it). RENDER_KEEP=DIR keeps the pages and PNGs.
set -u
tool=$1
tinygpt=$2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../helpers/tool-test-lib.sh"

chromium=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chromium" ]; then
    if [ -n "${RESDIAG_REQUIRE_CHROMIUM:-}" ]; then
        echo "FAIL: chromium not installed, and RESDIAG_REQUIRE_CHROMIUM is set (CI)"
        exit 1
    fi
    echo "chromium not installed: skipped"
    exit 77
fi
py=$(command -v /usr/bin/python3 || command -v python3 || true)

tg() { "$tinygpt" --d-model 32 --heads 2 --seq 8 --batch 2 --seed 1 --threads 1 \
       --log-every 100000 "$@" >/dev/null 2>"$dir/tg.err" || { cat "$dir/tg.err"; fail "tinygpt $*"; }; }
tg --placement pre --layers 12 --steps 20 --out "$dir/pre.h5"
tg --placement post --layers 12 --steps 20 --out "$dir/post.h5"
"$tool" report --html "$dir/pre.html" "$dir/pre.h5" || fail "report --html"
"$tool" report --json "$dir/pre.h5" >"$dir/pre.json" || fail "report --json"
# 96 layers at a trained step: lines without markers, a fit not drawn
tg --placement pre --layers 96 --steps 30 --lr 0.01 --out "$dir/deep.h5"
"$tool" report --last --html "$dir/deep.html" "$dir/deep.h5" || fail "report --html deep"
"$tool" report --last --json "$dir/deep.h5" >"$dir/deep.json" || fail "report --json deep"
"$tool" diff --html "$dir/diff.html" "$dir/pre.h5" "$dir/post.h5" >/dev/null || fail "diff --html"

# A PNG of width x height with more than one colour: the header, then the
# inflated pixel rows (Python's zlib; only the size is checked without it).
check_png() { # FILE WIDTH HEIGHT
    if [ ! -s "$1" ]; then
        fail "$1: no PNG written"; return
    fi
    if [ -z "$py" ]; then
        [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] && pass ||
            fail "$1 is not a PNG"
        return
    fi
    if "$py" - "$1" "$2" "$3" <<'PY'
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
w, h = struct.unpack(">II", data[16:24])
assert (w, h) == (int(sys.argv[2]), int(sys.argv[3])), "size %dx%d" % (w, h)
idat, i = b"", 8
while i < len(data):
    n, kind = struct.unpack(">I4s", data[i:i + 8])
    if kind == b"IDAT":
        idat += data[i + 8:i + 8 + n]
    i += 12 + n
raw = zlib.decompress(idat)
# filtered rows: many distinct byte values only when the page has content
assert len(set(raw)) > 32, "the picture is blank (%d distinct bytes)" % len(set(raw))
PY
    then pass; else fail "$1 is not the rendered page"; fi
}

# The window: wide enough for the page's 820 px column and a margin on
# each side, tall enough for the whole report page (with the loss curve).
W=860 H=5600
for page in pre deep diff; do
    timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --hide-scrollbars \
        --force-device-scale-factor=1 --user-data-dir="$dir/profile" --window-size=$W,$H \
        --screenshot="$dir/$page.png" "file://$dir/$page.html" >/dev/null 2>&1
    check_png "$dir/$page.png" $W $H
done
for page in pre deep; do
    [ -n "$py" ] || break
    if "$py" "$here/render-check.py" "$dir/$page.png" "$dir/$page.html" "$dir/$page.json" $W $H \
        >"$dir/check.out" 2>&1; then
        pass
    else
        fail "the rendered report page $page:"; head -20 "$dir/check.out"
    fi
done
if [ -n "${RENDER_KEEP:-}" ]; then
    mkdir -p "$RENDER_KEEP" && cp "$dir"/*.html "$dir"/*.png "$RENDER_KEEP"/
fi

tool_test_finish
