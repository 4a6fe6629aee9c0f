#!/usr/bin/env python3
"""test-html.py - checks the pictures of `resdiag report --html`, `plot` and
`diff --html` against the numbers of `resdiag report --json`.

usage: test-html.py check-page PAGE.html JSON [JSON_B] [--steps N] [--json-last J]
                     [--json-first J] (the heat maps' first step, when JSON is not it)
       test-html.py check-svg FILE.svg JSON
Prints FAIL lines and exits 1 on any failure, 0 otherwise.

What is checked:
  - strict parsing: the SVG and the HTML page are well-formed XML
    (xml.etree), and the page's tags nest and close properly under
    html.parser (void elements excepted); no script, no external resource;
  - every plotted series (<polyline data-key=...>) read back: its pixel
    coordinates, through the inverse of the axis transform written on its
    <g class="plot"> (linear or log10), give the numbers of the JSON report;
    tolerance: 0.002 pixel (the coordinates are printed with 3 decimals),
    converted to data units at each point, plus 1e-7 relative for the
    9-digit JSON numbers;
  - every point and every tick lies inside its plot area; tick labels read
    back (the label's number against the inverse transform of its pixel),
    log axes have their decade ticks equally spaced, and neighbouring tick
    labels on an axis do not overlap; the legend sits outside the plot area;
  - heat maps: no more than the column limits, first and last column equal
    the report's r at the first and the last recorded step; the growth map
    starts at layer 1 (layer 0's ratio is 1 by definition) and its first
    column equals the report's norm[k] / norm[1]; every colour bar labels
    four or more values, each where the bar's axis maps it, apart;
  - the legend lists only what is drawn (no sqrt(d) entry without its line);
    every recorded per-layer parameter gradient is a series of its own colour
    with a legend entry; the head's single gradient is one point at
    k = L + 1 (no line); the fit sqrt(a + b k) reads back as the report's
    energy fit over the data's k range, and is not drawn (the figure says
    so in a note) when its intercept is not positive.
"""
import html.parser
import json
import math
import re
import sys
import xml.etree.ElementTree as ET

SVGNS = "{http://www.w3.org/2000/svg}"
CHAR_W = 6.6  # the writer's character width estimate at 11 px
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def local(tag):
    return tag.split("}")[-1]


class Axis:
    def __init__(self, g, name):
        self.scale = g.get("data-%s-scale" % name)
        self.lo = float(g.get("data-%s-lo" % name))
        self.hi = float(g.get("data-%s-hi" % name))
        self.p0 = float(g.get("data-%s-p0" % name))
        self.p1 = float(g.get("data-%s-p1" % name))
        self.log = self.scale == "log"

    def inverse(self, px):
        t = (px - self.p0) / (self.p1 - self.p0)
        if self.log:
            return 10 ** (math.log10(self.lo) + t * (math.log10(self.hi) - math.log10(self.lo)))
        return self.lo + t * (self.hi - self.lo)

    def tol(self, v, px_err=0.002):
        """data-unit size of px_err pixels at value v"""
        span = abs(self.p1 - self.p0)
        if self.log:
            return abs(v) * (math.log(self.hi / self.lo) * px_err / span) * 1.01
        return (self.hi - self.lo) * px_err / span

    def inside(self, px):
        a, b = sorted((self.p0, self.p1))
        return a - 1e-3 <= px <= b + 1e-3


def parse_points(s):
    pts = []
    for pair in s.split():
        x, y = pair.split(",")
        pts.append((float(x), float(y)))
    return pts


def json_series(key, j):
    """(x values, y values) that the series `key` must draw, from report JSON."""
    L = j["run"]["n_layers"]
    if key == "stream.norm":
        return list(range(L + 1)), j["stream"]["norm"]
    if key.startswith("updates."):
        name = key[len("updates."):]
        for u in j["updates"]:
            if u["sublayer"] == name:
                return list(range(1, L + 1)), u["r"]
    if key == "gradients.stream":
        return list(range(1, L + 1)), j["gradients"]["stream"]
    if key.startswith("gradients."):
        name = key[len("gradients."):]
        for p in j["gradients"]["params"]:
            if p["name"] == name:
                return list(range(1, L + 1)), p["norm"]
    return None


def check_series(where, g, poly, want, log_x, log_y):
    ax, ay = Axis(g, "x"), Axis(g, "y")
    xs, ys = want
    expect = {}
    for x, y in zip(xs, ys):
        if y is None or (log_y and y <= 0) or (log_x and x <= 0):
            continue
        expect[x] = y
    got = {}
    for p in poly:
        for px, py in parse_points(p.get("points")):
            if not ax.inside(px) or not ay.inside(py):
                fail("%s: point (%.3f, %.3f) outside the plot area" % (where, px, py))
            x = ax.inverse(px)
            xr = round(x)
            if abs(x - xr) > ax.tol(x):
                fail("%s: x %.6f is not a layer index" % (where, x))
            got[xr] = (ay.inverse(py), ay.tol(ay.inverse(py)))
    if sorted(got) != sorted(expect):
        fail("%s: points at x %s, the report has values at %s" % (where, sorted(got), sorted(expect)))
        return 0
    n = 0
    for x, (v, tol) in got.items():
        w = expect[x]
        if abs(v - w) > tol + 1e-7 * abs(w):
            fail("%s: at x=%d read %.9g, report says %.9g (tolerance %.3g)" % (where, x, v, w, tol))
        n += 1
    return n


def tick_labels(g, cls):
    out = []
    for t in g.iter(SVGNS + "g"):
        if t.get("class") == cls:
            for e in t.iter(SVGNS + "text"):
                out.append(e)
    return out


def check_ticks(where, g, need_log=None):
    """labels read back, inside the area, no overlap, decades equally spaced"""
    ax, ay = Axis(g, "x"), Axis(g, "y")
    for cls, axis, horizontal in (("xticks", ax, True), ("yticks", ay, False)):
        labels = tick_labels(g, cls)
        if len(labels) < 2:
            fail("%s: %s has %d labels" % (where, cls, len(labels)))
            continue
        boxes = []
        for e in labels:
            val = float(e.text)
            px = float(e.get("x")) if horizontal else float(e.get("y")) - 11 * 0.35
            if not axis.inside(px):
                fail("%s: tick %s outside the axis" % (where, e.text))
            back = axis.inverse(px)
            if abs(back - val) > axis.tol(val) + 1e-9 * abs(val) + 1e-12:
                fail("%s: tick label %s sits where the axis says %.6g" % (where, e.text, back))
            w = len(e.text) * CHAR_W if horizontal else 11.0
            boxes.append((px - w / 2, px + w / 2, e.text))
        boxes.sort()
        for a, b in zip(boxes, boxes[1:]):
            if a[1] > b[0]:
                fail("%s: tick labels %s and %s overlap" % (where, a[2], b[2]))
        if axis.log:
            dec = [float(e.get("x") if horizontal else e.get("y")) for e in labels
                   if abs(math.log10(float(e.text)) - round(math.log10(float(e.text)))) < 1e-9]
            gaps = [b - a for a, b in zip(dec, dec[1:])]
            if gaps and max(gaps) - min(gaps) > 0.01:
                fail("%s: decades not equally spaced on a log axis: %s" % (where, gaps))
    if need_log is not None:
        for name, axis in (("x", ax), ("y", ay)):
            if axis.log != need_log:
                fail("%s: %s axis is %s, expected %s" % (where, name, axis.scale,
                                                         "log" if need_log else "linear"))


def check_legend(where, g, width):
    """right of the plot area, and inside the figure"""
    ax, ay = Axis(g, "x"), Axis(g, "y")
    right = max(ax.p0, ax.p1)
    for lg in g.iter(SVGNS + "g"):
        if lg.get("class") == "legend":
            for e in lg.iter(SVGNS + "line"):
                if float(e.get("x1")) < right:
                    fail("%s: legend inside the plot area" % where)
            ys = []
            for e in lg.iter(SVGNS + "text"):
                end = float(e.get("x")) + len(e.text) * CHAR_W
                if end > width:
                    fail("%s: legend text '%s' runs past the figure (%.0f > %.0f)"
                         % (where, e.text, end, width))
                ys.append(float(e.get("y")))
            ys.sort()
            for a, b in zip(ys, ys[1:]):
                if b - a < 11:
                    fail("%s: legend lines overlap" % where)
            if ys and ys[-1] > max(ay.p0, ay.p1) + 11:
                fail("%s: legend runs below the plot area" % where)


def legend_texts(g):
    return [e.text or "" for lg in g.iter(SVGNS + "g") if lg.get("class") == "legend"
            for e in lg.iter(SVGNS + "text")]


def note_texts(g):
    return " ".join(e.text or "" for n in g.iter(SVGNS + "g") if n.get("class") == "notes"
                    for e in n.iter(SVGNS + "text"))


def keyed(g, tag, key):
    return [e for e in g.iter(SVGNS + tag) if e.get("data-key") == key]


def check_drawn_legend(where, g, run_names):
    """the sqrt(d) entry only with its line inside the frame"""
    ay = Axis(g, "y")
    lines = keyed(g, "line", "ref.sqrt_d")
    listed = [t for t in legend_texts(g) if t.startswith("√d")]
    if listed and not lines:
        fail("%s: the legend lists %s, which is not drawn" % (where, listed[0]))
    for e in lines:
        if not ay.inside(float(e.get("y1"))):
            fail("%s: the sqrt(d) line lies outside the frame" % where)


def check_fit(where, g, j):
    """fit.energy = sqrt(a + b k) of the report, over the data's k only"""
    polys = keyed(g, "polyline", "fit.energy")
    f = j["stream"]["energy_fit"]
    if f is None or f["intercept"] is None or f["slope"] is None:
        return
    a, b = f["intercept"], f["slope"]
    ks = [k for k, v in enumerate(j["stream"]["norm"]) if k >= 1 and v is not None]
    if a <= 0:
        if polys:
            fail("%s: the fit with intercept %g < 0 is drawn" % (where, a))
        if "not drawn" not in note_texts(g):
            fail("%s: the figure does not say why the fit (intercept %g) is missing" % (where, a))
        return
    ax, ay = Axis(g, "x"), Axis(g, "y")
    for pl in polys:
        for px, py in parse_points(pl.get("points")):
            k, y = ax.inverse(px), ay.inverse(py)
            if k < min(ks) - ax.tol(k) or k > max(ks) + ax.tol(k):
                fail("%s: the fit is drawn at k = %.3f, outside the data's k %d..%d"
                     % (where, k, min(ks), max(ks)))
            want = math.sqrt(a + b * k) if a + b * k > 0 else float("nan")
            if not abs(y - want) <= ay.tol(y) + 1e-6 * abs(want):
                fail("%s: the fit at k = %.3f reads %.6g, sqrt(a + b k) = %.6g"
                     % (where, k, y, want))
                break


def check_gradients(where, g, j, name, run=0):
    """every parameter a series of its own colour; the head one point"""
    pre = "" if name is None else name + "/"
    L = j["run"]["n_layers"]
    colours = {}
    for p in j["gradients"]["params"]:
        if not any(v is not None and v > 0 for v in p["norm"]):
            continue
        pl = keyed(g, "polyline", pre + "gradients." + p["name"])
        if not pl:
            fail("%s: the gradient of %s is not drawn" % (where, p["name"]))
            continue
        colours.setdefault(pl[0].get("stroke"), []).append(p["name"])
        if not any("∇" + p["name"] in t for t in legend_texts(g)):
            fail("%s: the legend has no entry for the gradient of %s" % (where, p["name"]))
    # one run: a colour per parameter; several: colour is the run's (the
    # diff page checks that), the parameters told apart by dash and marker
    for c, ps in colours.items():
        if len(ps) > 1 and name is None:
            fail("%s: the gradients of %s share the colour %s" % (where, ps, c))
    key = pre + "gradients.head"
    if keyed(g, "line", key) or keyed(g, "polyline", key):
        fail("%s: the head's one gradient is drawn as a line" % where)
    head = j["gradients"]["head"]
    pts = keyed(g, "path", key)
    if head is None or head <= 0:
        return
    if len(pts) != 1:
        fail("%s: %d head points, the report has one head gradient" % (where, len(pts)))
        return
    ax, ay = Axis(g, "x"), Axis(g, "y")
    k, v = ax.inverse(float(pts[0].get("data-px"))), ay.inverse(float(pts[0].get("data-py")))
    # on the diff page run i's head sits at (L + 1) 1.08^i, off the others'
    kk = (L + 1) * 1.08 ** run
    if abs(k - kk) > ax.tol(k) or abs(v - head) > ay.tol(v) + 1e-7 * head:
        fail("%s: the head point at (%.4f, %.6g), the report says (%d, %.6g)"
             % (where, k, v, L + 1, head))
    if not any("head" in t for t in legend_texts(g)):
        fail("%s: the head point has no legend entry" % where)


def check_run_colours(where, plots, names):
    """the diff page: in every figure each run's series (lines and points,
    fits and references aside) have the run's one colour, a colour no other
    run has; the runs' head points do not cover each other"""
    colour = {}  # run name -> set of colours, over all figures
    for g, _ in plots:
        heads = []
        for e in g.iter():
            key = e.get("data-key") or ""
            if "/" not in key or local(e.tag) not in ("polyline", "path"):
                continue
            run = key.split("/", 1)[0]
            c = e.get("stroke") if local(e.tag) == "polyline" else e.get("fill")
            if c:
                colour.setdefault(run, set()).add(c.lower())
            if key.endswith("/gradients.head"):
                heads.append((float(e.get("data-px")), float(e.get("data-py")), e.get("d")))
        for a in range(len(heads)):
            for b in range(a + 1, len(heads)):
                (xa, ya, _), (xb, yb, _) = heads[a], heads[b]
                if math.hypot(xa - xb, ya - yb) < 10:  # a diamond is 10 px wide
                    fail("%s: two runs' head points %.1f px apart: one hides the other"
                         % (where, math.hypot(xa - xb, ya - yb)))
    for run, cs in colour.items():
        if len(cs) != 1:
            fail("%s: run %s is drawn in %d colours %s: colour must mean the run"
                 % (where, run, len(cs), sorted(cs)))
    runs = sorted(colour)
    for a in range(len(runs)):
        for b in range(a + 1, len(runs)):
            if colour[runs[a]] & colour[runs[b]]:
                fail("%s: runs %s and %s share a colour" % (where, runs[a], runs[b]))


def check_plots(where, root, jsons, names):
    """every <g class=plot> of an svg root; returns {key: points checked}"""
    checked = {}
    figs = [s for s in root.iter(SVGNS + "svg") if s.get("font-family")]
    plots = [(g, float(s.get("width"))) for s in figs for g in s.iter(SVGNS + "g")
             if g.get("class") == "plot"]
    if len(jsons) > 1:
        check_run_colours(where, plots, names)
    for g, width in plots:
        ax, ay = Axis(g, "x"), Axis(g, "y")
        check_ticks(where, g)
        check_legend(where, g, width)
        check_drawn_legend(where, g, names)
        keys = [p.get("data-key") or "" for p in g.iter(SVGNS + "polyline")]
        if any(k.split("/")[-1] == "stream.norm" for k in keys) and len(jsons) == 1:
            check_fit(where, g, jsons[0])
        if any(k.split("/")[-1] == "gradients.stream" for k in keys):
            for run, j in enumerate(jsons):
                if j["gradients"] is not None:
                    check_gradients(where, g, j, names[run], run)
        polys = {}
        for p in g.iter(SVGNS + "polyline"):
            k = p.get("data-key")
            if k:
                polys.setdefault(k, []).append(p)
        for key, pl in polys.items():
            run = 0
            base = key
            if "/" in key:
                name, base = key.split("/", 1)
                run = names.index(name)
            want = json_series(base, jsons[run])
            if want is None:
                continue  # fits and reference lines
            if base.startswith(("updates.", "gradients.")) and not (ax.log and ay.log):
                fail("%s: %s is not on log-log axes" % (where, key))
            checked[key] = check_series("%s %s" % (where, key), g, pl, want, ax.log, ay.log)
    return checked


def check_heatmaps(where, root, j_first, j_last, n_steps):
    maps = [g for g in root.iter(SVGNS + "g") if g.get("class") == "heatmap"]
    if not maps:
        fail("%s: no heat maps for a run of %d steps" % (where, n_steps))
        return
    L = j_first["run"]["n_layers"]
    nf = j_first["nonfinite"]
    for g in maps:
        key = g.get("data-key")
        ax = Axis(g, "x")
        marks = [e for e in g.iter(SVGNS + "line") if e.get("class") == "nfmark"]
        if nf is None and marks:
            fail("%s %s: a non-finite mark in a finite run" % (where, key))
        if nf is not None:
            if len(marks) != 1:
                fail("%s %s: %d non-finite marks" % (where, key, len(marks)))
            elif abs(ax.inverse(float(marks[0].get("x1"))) - nf["step"]) > ax.tol(nf["step"]):
                fail("%s %s: non-finite mark at step %.3f, the report says %d"
                     % (where, key, ax.inverse(float(marks[0].get("x1"))), nf["step"]))
        check_ticks("%s %s" % (where, key), g)
        check_colorbar("%s %s" % (where, key), g)
        cells = [r for r in g.iter(SVGNS + "rect") if r.get("data-v") is not None]
        cols = sorted(set(round(float(r.get("x")), 3) for r in cells))
        limit = min(n_steps, 500, max(1, 12000 // L))
        if len(cols) != limit:
            fail("%s %s: %d columns, expected %d" % (where, key, len(cols), limit))
        if abs(ax.lo - j_first["steps"]["first"]) > 1e-9:
            fail("%s %s: step axis starts at %g" % (where, key, ax.lo))
        if key == "heat.growth":
            check_growth_map("%s %s" % (where, key), g, cells, cols[0], j_first)
        if not key.startswith("heat.updates."):
            continue
        name = key[len("heat.updates."):]
        for col, j in ((cols[0], j_first), (cols[-1], j_last)):
            r = [u for u in j["updates"] if u["sublayer"] == name][0]["r"]
            got = {}
            h = Axis(g, "y")
            for c in cells:
                if round(float(c.get("x")), 3) == col:
                    mid = float(c.get("y")) + (float(c.get("height")) - 0.3) / 2
                    got[round(h.inverse(mid))] = float(c.get("data-v"))
            for layer in range(L):
                w = r[layer]
                v = got.get(layer)
                if w is None or w <= 0:  # no value, or none on a log colour scale
                    if v is not None:
                        fail("%s %s: layer %d has a cell, the report has no value" % (where, key, layer))
                elif v is None or abs(v - w) > 1e-5 * abs(w):
                    fail("%s %s: layer %d reads %s, report says %.9g" % (where, key, layer, v, w))


def check_colorbar(where, g):
    """four or more labels, each where the colour axis maps it, apart"""
    ac = Axis(g, "c")
    bars = [b for b in g.iter(SVGNS + "g") if b.get("class") == "colorbar"]
    labels = [e for b in bars for e in b.iter(SVGNS + "text") if e.get("data-v") is not None]
    if len(labels) < 4:
        fail("%s: the colour bar labels %d values" % (where, len(labels)))
    ys = []
    for e in labels:
        v, py = float(e.get("data-v")), float(e.get("y")) - 11 * 0.35
        if abs(float(e.text) - v) > 1e-9 * abs(v) + 1e-300:
            fail("%s: colour bar label %s for the value %r" % (where, e.text, v))
        if not ac.inside(py) or abs(ac.inverse(py) - v) > ac.tol(v) + 1e-9 * abs(v):
            fail("%s: colour bar label %s sits where the bar says %.6g" % (where, e.text, ac.inverse(py)))
        ys.append(py)
    ys.sort()
    for a, b in zip(ys, ys[1:]):
        if b - a < 12:
            fail("%s: colour bar labels overlap (%.1f px apart)" % (where, b - a))


def check_growth_map(where, g, cells, col, j):
    """rows from layer 1; the first column is norm[k] / norm[1] (k = layer + 1)"""
    h = Axis(g, "y")
    norm = j["stream"]["norm"]
    seen = 0
    for c in cells:
        if round(float(c.get("x")), 3) != col:
            continue
        mid = float(c.get("y")) + (float(c.get("height")) - 0.3) / 2
        layer = round(h.inverse(mid))
        if layer < 1:
            fail("%s: a row for layer %d, whose ratio is 1 by definition" % (where, layer))
            continue
        want = norm[layer + 1] / norm[1]
        if abs(float(c.get("data-v")) - want) > 1e-5 * want:
            fail("%s: layer %d reads %s, the report's norms give %.6g" % (where, layer, c.get("data-v"), want))
        seen += 1
    if seen != j["run"]["n_layers"] - 1:
        fail("%s: %d growth rows, expected layers 1..%d" % (where, seen, j["run"]["n_layers"] - 1))


VOID = {"meta", "br", "hr", "img", "input", "link", "col", "area", "base", "wbr", "source"}


class Strict(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=False)
        self.stack = []
        self.errors = []
        self.doctype = False

    def handle_decl(self, decl):
        self.doctype |= decl.lower() == "doctype html"

    def handle_starttag(self, tag, attrs):
        if tag == "script":
            self.errors.append("script element")
        for k, v in attrs:
            if k in ("src", "href") and v and re.match(r"(https?:)?//", v):
                self.errors.append("external resource %s" % v)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.stack.pop()

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append("</%s> closes <%s>" % (tag, self.stack[-1] if self.stack else "nothing"))
        else:
            self.stack.pop()

    def handle_entityref(self, name):
        if name not in ("amp", "lt", "gt", "quot"):
            self.errors.append("unknown entity &%s;" % name)


def parse_strict(path):
    text = open(path, encoding="utf-8").read()
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        fail("%s: not well-formed XML: %s" % (path, e))
        return None, text
    return root, text


def main():
    args = sys.argv[1:]
    mode = args.pop(0)
    steps, jlast = 1, None
    if "--steps" in args:
        i = args.index("--steps")
        steps = int(args[i + 1])
        del args[i:i + 2]
    jfirst = None
    if "--json-first" in args:
        i = args.index("--json-first")
        jfirst = json.load(open(args[i + 1]))
        del args[i:i + 2]
    if "--json-last" in args:
        i = args.index("--json-last")
        jlast = json.load(open(args[i + 1]))
        del args[i:i + 2]
    path = args[0]
    jsons = [json.load(open(p)) for p in args[1:]]
    root, text = parse_strict(path)
    if root is None:
        return 1
    names = ["A", "B"] if len(jsons) > 1 else [None]
    if mode == "check-svg":
        if local(root.tag) != "svg":
            fail("%s: root is %s" % (path, root.tag))
        checked = check_plots(path, root, jsons, names)
        if not checked or not all(checked.values()):
            fail("%s: no data points checked (%s)" % (path, checked))
    else:
        p = Strict()
        p.feed(text)
        p.close()
        if not p.doctype:
            fail("%s: no <!DOCTYPE html>" % path)
        if p.stack:
            fail("%s: unclosed %s" % (path, p.stack))
        for e in p.errors:
            fail("%s: %s" % (path, e))
        if local(root.tag) != "html":
            fail("%s: root is %s" % (path, root.tag))
        checked = check_plots(path, root, jsons, names)
        want = ["stream.norm"] + ["updates." + u["sublayer"] for u in jsons[0]["updates"]
                                  if any(v is not None and v > 0 for v in u["r"])]
        if all(j["gradients"] is not None for j in jsons):
            want.append("gradients.stream")
            want += ["gradients." + p["name"] for p in jsons[0]["gradients"]["params"]
                     if any(v is not None and v > 0 for v in p["norm"])]
        for n in names:
            for k in want:
                key = k if n is None else n + "/" + k
                if not checked.get(key):
                    fail("%s: series %s missing or empty" % (path, key))
        if "nonfinite" not in text and jsons[0]["nonfinite"] is not None:
            fail("%s: the first non-finite value is not shown" % path)
        verdict = jsons[0]["placement"]["verdict"]
        if len(jsons) == 1 and "Placement: " not in text:
            fail("%s: no verdict card" % path)
        has_heat = 'class="heatmap"' in text
        if steps > 1:
            check_heatmaps(path, root, jfirst or jsons[0], jlast or jsons[0], steps)
        elif has_heat:
            fail("%s: heat maps for a single step" % path)
        print("%s: %s, %d series, %d points checked" % (path, verdict, len(checked),
                                                        sum(checked.values())))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
