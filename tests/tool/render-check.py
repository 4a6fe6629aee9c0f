#!/usr/bin/env python3
"""render-check.py - checks the PICTURE of a `resdiag report --html` page
that headless Chromium painted (a PNG screenshot), against the numbers of
`resdiag report --json` and the axis mapping each figure declares.

usage: render-check.py SHOT.png PAGE.html REPORT.json WIDTH HEIGHT

What is checked, on the pixels (the PNG decoded here: zlib and the five PNG
row filters, no imaging library):
  - the screenshot is WIDTH x HEIGHT and not blank;
  - nothing lies outside the page's column: the side margins left and
    right of the 820 px main column, and the last rows, are all background
    (the page ended inside the window);
  - the frame of every plot is found on the screen (long dark lines), one
    per <g class="plot"> in page order; its size gives the figure's scale,
    the same across and down (no distortion);
  - through that frame and the data-x-* / data-y-* mapping the SVG
    declares, the report's stream norms (k = 0, 1, L/2, L-1, L), every
    parameter's gradient (k = 1, 2, L/2, L-1, L) and the head's one gradient
    at k = L + 1 land on pixels of their series' colour (within 3 pixels;
    points within 4 pixels of the frame, which is painted over them, are
    left out, and two at least of each series must be clear of it);
  - every legend swatch shows its colour where the legend puts it.
Prints FAIL lines and exits 1 on any failure.
"""
import json
import struct
import sys
import xml.etree.ElementTree as ET
import zlib

SVGNS = "{http://www.w3.org/2000/svg}"
BACKGROUND = (0xf4, 0xf5, 0xf7)  # the page's body colour (html.c's CSS)
MAIN_W = 820                     # main{max-width:820px}
EDGE = 4                         # pixels near the frame, which covers a line there
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def read_png(path):
    """(width, height, bytes-per-pixel, pixel rows as one bytearray)"""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    w, h, depth, ctype = struct.unpack(">IIBB", data[16:26])
    if depth != 8 or ctype not in (2, 6):
        raise ValueError("PNG of depth %d, colour type %d" % (depth, ctype))
    bpp = 3 if ctype == 2 else 4
    idat, i = [], 8
    while i < len(data):
        n, kind = struct.unpack(">I4s", data[i:i + 8])
        if kind == b"IDAT":
            idat.append(data[i + 8:i + 8 + n])
        i += 12 + n
    raw = zlib.decompress(b"".join(idat))
    stride = w * bpp
    out = bytearray(h * stride)
    prev = bytearray(stride)
    pos = 0
    for r in range(h):
        f = raw[pos]
        line = bytearray(raw[pos + 1:pos + 1 + stride])
        pos += 1 + stride
        if f == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif f == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif f == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif f == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out[r * stride:(r + 1) * stride] = line
        prev = line
    return w, h, bpp, out


class Shot:
    def __init__(self, path):
        self.w, self.h, self.bpp, self.px = read_png(path)

    def at(self, x, y):
        i = (y * self.w + x) * self.bpp
        return tuple(self.px[i:i + 3])

    def near(self, x, y, colour, radius, tol=70):
        """a pixel within radius of (x, y) whose colour is within tol of colour"""
        for dy in range(-radius, radius + 1):
            for dx in range(-radius, radius + 1):
                xx, yy = int(round(x)) + dx, int(round(y)) + dy
                if 0 <= xx < self.w and 0 <= yy < self.h:
                    if dist(self.at(xx, yy), colour) <= tol:
                        return True
        return False


def dist(a, b):
    return max(abs(p - q) for p, q in zip(a, b))


def hexcolour(s):
    s = s.lstrip("#")
    return tuple(int(s[i:i + 2], 16) for i in (0, 2, 4))


def dark(p):
    return max(p) < 170 and max(p) - min(p) < 30


def left_edge(shot, xa, xb, ya, yb):
    """the leftmost column in xa..xb dark over 80% of the rows ya..yb (a
    frame's left side), else xa"""
    for x in range(xa, xb + 1):
        if sum(dark(shot.at(x, y)) for y in range(int(ya) + 2, int(yb) - 1)) \
                >= 0.8 * (yb - ya - 3):
            return x
    return xa


def find_frames(shot, min_len):
    """rectangles (x0, y0, x1, y1) drawn as long dark horizontal lines,
    top and bottom pairs, in screen order"""
    lines = []  # (y, x0, x1) rows of a long dark run, merged over neighbours
    for y in range(shot.h):
        x = 0
        while x < shot.w:
            if not dark(shot.at(x, y)):
                x += 1
                continue
            s = x
            while x < shot.w and dark(shot.at(x, y)):
                x += 1
            if x - s >= min_len:
                # a line between two pixel rows paints both, and a series
                # crossing it can cut one row's run short: rows next to each
                # other that overlap over 90% of the shorter are one line
                if lines and y - lines[-1][3] <= 1 and \
                        min(lines[-1][2], x) - max(lines[-1][1], s) >= \
                        0.9 * min(lines[-1][2] - lines[-1][1], x - s):
                    ly, lx0, lx1, _ = lines[-1]
                    lines[-1] = (ly, min(lx0, s), max(lx1, x), y)
                else:
                    lines.append((y, s, x, y))
    rects, used = [], set()
    for i, (y0, x0, x1, e0) in enumerate(lines):
        if i in used:
            continue
        for j in range(i + 1, len(lines)):
            y1, a0, a1, e1 = lines[j]
            # a y tick (5 px) on the top or bottom edge lengthens that
            # edge's line on the left, a series at the corner shortens it:
            # the left edge is the frame's vertical line there
            if j not in used and abs(a0 - x0) <= 6 and abs(a1 - x1) <= 3:
                rects.append((left_edge(shot, min(x0, a0), max(x0, a0), e0, y1),
                              (y0 + e0) / 2, x1 - 1, (y1 + e1) / 2))
                used.update((i, j))
                break
    return rects


class Mapping:
    """SVG user units of one figure -> screen pixels, through its frame"""

    def __init__(self, frame_svg, frame_screen):
        fx, fy, fw, fh = frame_svg
        x0, y0, x1, y1 = frame_screen
        self.sx, self.sy = (x1 - x0) / fw, (y1 - y0) / fh
        self.ox, self.oy = x0 - fx * self.sx, y0 - fy * self.sy

    def __call__(self, x, y):
        return self.ox + x * self.sx, self.oy + y * self.sy


def axis_map(g, name, v):
    """the figure's own declared mapping (data-NAME-*), applied to v"""
    import math
    lo, hi = float(g.get("data-%s-lo" % name)), float(g.get("data-%s-hi" % name))
    p0, p1 = float(g.get("data-%s-p0" % name)), float(g.get("data-%s-p1" % name))
    if g.get("data-%s-scale" % name) == "log":
        t = (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))
    else:
        t = (v - lo) / (hi - lo)
    return p0 + t * (p1 - p0)


def check_point(shot, where, g, m, k, v, colour, frame):
    """0 when the point lies within EDGE pixels of the frame (the frame is
    painted over it there), else 1 after checking it"""
    sx, sy = m(axis_map(g, "x", k), axis_map(g, "y", v))
    x0, y0, x1, y1 = frame
    if min(sx - x0, x1 - sx, sy - y0, y1 - sy) < EDGE:
        return 0
    if not shot.near(sx, sy, colour, 3):
        fail("%s: no pixel of %s near (%.1f, %.1f), where k = %g, value %.6g is drawn"
             % (where, "#%02x%02x%02x" % colour, sx, sy, k, v))
    return 1


def check_series(shot, where, g, m, ks, values, colour, frame):
    """the points at ks (values[k]) that are clear of the frame: two at least"""
    n = sum(check_point(shot, where, g, m, k, values[k], colour, frame)
            for k in sorted(set(ks)) if values[k] is not None and values[k] > 0)
    if n < 2:
        fail("%s: only %d of the points at k = %s lie clear of the frame" % (where, n, ks))


def check_legend(shot, where, g, m):
    for lg in g.iter(SVGNS + "g"):
        if lg.get("class") != "legend":
            continue
        for e in lg:
            if e.tag == SVGNS + "line":
                x1, x2, y = float(e.get("x1")), float(e.get("x2")), float(e.get("y1"))
                c = hexcolour(e.get("stroke"))
                a, sy = m(x1, y)
                b, _ = m(x2, y)
                if not any(shot.near(x, sy, c, 1) for x in range(int(a), int(b) + 1)):
                    fail("%s: the legend swatch %s is not painted" % (where, e.get("stroke")))
            elif e.tag == SVGNS + "path":  # a point's marker alone
                c = hexcolour(e.get("fill"))
                d = e.get("d").split("l")[0].lstrip("M").split()
                sx, sy = m(float(d[0]), float(d[1]) + 4.5)
                if not shot.near(sx, sy, c, 2):
                    fail("%s: the legend marker %s is not painted" % (where, e.get("fill")))


def main():
    png, page, report, width, height = sys.argv[1:6]
    width, height = int(width), int(height)
    shot = Shot(png)
    j = json.load(open(report))
    root = ET.parse(page).getroot()
    L = j["run"]["n_layers"]
    if (shot.w, shot.h) != (width, height):
        fail("the screenshot is %dx%d, the window %dx%d" % (shot.w, shot.h, width, height))
        return 1
    colours = set(shot.at(x, y) for y in range(0, shot.h, 7) for x in range(0, shot.w, 7))
    if len(colours) < 50:
        fail("the picture is blank (%d colours)" % len(colours))
    margin = (width - MAIN_W) // 2
    for x in list(range(0, margin - 1)) + list(range(width - margin + 1, width)):
        for y in range(0, height, 3):
            if dist(shot.at(x, y), BACKGROUND) > 2:
                fail("something is painted at (%d, %d), outside the page's column" % (x, y))
                break
    for y in range(height - 20, height):
        if any(dist(shot.at(x, y), BACKGROUND) > 2 for x in range(0, width, 2)):
            fail("row %d is painted: the page runs past the window's %d rows" % (y, height))
            break

    plots = [g for g in root.iter(SVGNS + "g") if g.get("class") == "plot"]
    frames_svg = []
    for g in plots:
        r = [e for e in g if e.tag == SVGNS + "rect" and e.get("class") == "frame"][0]
        frames_svg.append(tuple(float(r.get(a)) for a in ("x", "y", "width", "height")))
    found = find_frames(shot, min(f[2] for f in frames_svg) * 0.6)
    if len(found) < len(plots):
        fail("%d plot frames on the screen, the page has %d plots" % (len(found), len(plots)))
        return 1
    figures = {}
    for g, fs, fr in zip(plots, frames_svg, found):
        m = Mapping(fs, fr)
        if abs(m.sx / m.sy - 1) > 0.02:
            fail("a figure is distorted: scale %.4f across, %.4f down" % (m.sx, m.sy))
        keys = [p.get("data-key") for p in g.iter(SVGNS + "polyline")]
        name = "growth" if "stream.norm" in keys else "gradients" if "gradients.stream" in keys \
            else "updates"
        figures[name] = (g, m, fr)
        check_legend(shot, name, g, m)
    if "growth" not in figures:
        fail("no growth figure found")
    else:
        g, m, fr = figures["growth"]
        blue = hexcolour([p.get("stroke") for p in g.iter(SVGNS + "polyline")
                          if p.get("data-key") == "stream.norm"][0])
        check_series(shot, "growth", g, m, (0, 1, L // 2, L - 1, L), j["stream"]["norm"], blue, fr)
    if j["gradients"] is not None:
        if "gradients" not in figures:
            fail("no gradient figure found")
            return 1
        g, m, fr = figures["gradients"]
        strokes = {p.get("data-key"): p.get("stroke") for p in g.iter(SVGNS + "polyline")}
        for p in j["gradients"]["params"]:
            c = strokes.get("gradients." + p["name"])
            if c is None:
                fail("gradients: no series for %s" % p["name"])
                continue
            check_series(shot, "gradients " + p["name"], g, m, (1, 2, L // 2, L - 1, L),
                         [None] + p["norm"], hexcolour(c), fr)
        head = [e for e in g.iter(SVGNS + "path") if e.get("data-key") == "gradients.head"]
        if j["gradients"]["head"] and not head:
            fail("gradients: no head point")
        elif head:
            if not check_point(shot, "gradients head", g, m, L + 1, j["gradients"]["head"],
                               hexcolour(head[0].get("fill")), fr):
                fail("gradients: the head point lies on the frame")
    print("%s: %d plots found on the screen, %d colours" % (png, len(found), len(colours)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
