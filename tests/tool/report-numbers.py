#!/usr/bin/env python3
"""report-numbers.py - the numbers of a `resdiag report` against an
independent computation from the same run file.

Usage: report-numbers.py REPORT.txt DUMP.txt SKETCH.txt STATS.txt > TEMPLATE.txt
  REPORT.txt  `resdiag report RUN`
  DUMP.txt    `resdiag dump --step N RUN` of the analysed step N: the
              recorded per-site statistics and parameter gradients
  SKETCH.txt  `h5dump -d /forward/site_sketch -y -w 0 -m %.17g RUN`: the
              sketches the placement relations are tested on
  STATS.txt   the same of /forward/site_stats: the statistics in full
              precision, for the fit of ||x_k||^2 (dump's 6 digits of
              values near 32 leave too few for a slope of 0.01)

Recomputes here, from DUMP and SKETCH only, every number of these lines:
the per-layer table, the fits of the residual stream (least squares and
the 95% interval with a t quantile found by integrating Student's density),
the growth, the gradient lines and the sketch relation errors of the
evidence (also the rounding-level ones, ~1e-7). Each printed number must
agree with the recomputed one to the digits printed: within one unit in
the last printed digit (printed % formats round, so half a unit; the other
half allows for the order of summation), relative 2e-3 for %.3g and finer.

Prints the report with every number it checked replaced by '#': the
template tests/tool/golden/ holds, which fixes the rest of the text and the
numbers not checked here. Exits 1 with one line per disagreement.
"""
import math
import re
import sys

NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?"
errors = []


def t975(df):
    """The 0.975 quantile of Student's t with df degrees of freedom:
    Simpson's rule on the density from 0, bisection on the area 0.475."""
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)

    def area(t):
        n = 2000
        h = t / n
        s = 0.0
        for i in range(n + 1):
            w = 1 if i in (0, n) else (4 if i % 2 else 2)
            s += w * (1 + (i * h) ** 2 / df) ** (-(df + 1) / 2)
        return c * s * h / 3

    lo, hi = 0.0, 20.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if area(mid) < 0.475:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def fit(x, y):
    """Least squares y = a + b x: a, b, R^2, the 95% interval of b."""
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    sxx = sum((u - mx) ** 2 for u in x)
    sxy = sum((u - mx) * (v - my) for u, v in zip(x, y))
    syy = sum((v - my) ** 2 for v in y)
    b = sxy / sxx
    r2 = sxy * sxy / (sxx * syy) if syy > 0 else 1.0
    half = float("nan")
    if n > 2:
        half = t975(n - 2) * math.sqrt(max(syy - b * sxy, 0) / (n - 2) / sxx)
    return my - b * mx, b, r2, b - half, b + half


def agree(printed, want, what):
    """The printed text of a number against the value recomputed here."""
    got = float(printed)
    mant = re.sub(r"e.*", "", printed.lstrip("+-"))
    if "." in mant:
        unit = 10.0 ** -len(mant.split(".")[1])
    else:
        unit = 1.0
    if "e" in printed:
        unit *= 10.0 ** int(printed.split("e")[1])
    if not abs(got - want) <= max(unit, 2e-3 * abs(want)):
        errors.append("%s: report %s, recomputed %.6g" % (what, printed, want))


def read_dump(path):
    site, param = {}, {}
    for line in open(path):
        m = re.match(r"  (fwd|grad) (model|L(\d+) (\w+)) +(\w+) +(\d+) +(" + NUM + r") +(" + NUM
                     + r") +\S+ +(" + NUM + r")", line)
        if m:
            where = "model" if m.group(2) == "model" else (int(m.group(3)), m.group(4))
            site[(m.group(1), where, m.group(5))] = {
                "tokens": int(m.group(6)), "frob": float(m.group(7)), "tok_norm": float(m.group(8)),
                "rms": float(m.group(9))}
            continue
        m = re.match(r" {20,}(model|L(\d+)) ([\w.]+) +(" + NUM + r") +" + NUM + r" +\d+ +\d+$",
                     line)
        if m:
            param[(None if m.group(1) == "model" else int(m.group(2)), m.group(3))] = \
                float(m.group(4))
    return site, param


def read_sketch(path):
    text = open(path).read()
    shape = [int(v) for v in re.search(r"DATASPACE +SIMPLE \{ \(([^)]*)\)", text)
             .group(1).split(",")]
    # (h5dump prints NaN, for what was not observed, as "nan")
    data = [float(v) for v in text.split("DATA {", 1)[1].split("}", 1)[0].replace(",", " ").split()]
    return shape, data


def rel(vectors, coefs):
    """||sum c_j v_j|| / max_j |c_j| ||v_j||, as doc/FORMAT.md defines the
    relative error of a sketch relation."""
    scale = max(abs(c) * math.sqrt(sum(u * u for u in v)) for v, c in zip(vectors, coefs))
    r = [sum(c * v[i] for v, c in zip(vectors, coefs)) for i in range(len(vectors[0]))]
    return math.sqrt(sum(u * u for u in r)) / scale


def main():
    report = open(sys.argv[1]).read().split("\n")
    site, param = read_dump(sys.argv[2])
    shape, sk_data = read_sketch(sys.argv[3])
    st_shape, st_data = read_sketch(sys.argv[4])
    head = report[1]
    L = int(re.search(r"Run: (\d+) layers", head).group(1))
    subs = re.search(r"block of ([\w ]+?);", head).group(1).split()
    record = int(re.search(r"\(record (\d+)\)", "\n".join(report)).group(1)) - 1
    _, nl, ns, nb, k = shape

    def sketch(layer, sub, b):
        o = ((((record * nl) + layer) * ns + sub) * nb + b) * k
        return sk_data[o:o + k]

    # ||x_k||: the stream leaving layer k-1 (x_0 the embedding)
    def stream(kk, col):
        key = ("fwd", "model", "embed_out") if kk == 0 else ("fwd", (kk - 1, subs[-1]), "stream_out")
        return site[key][col] if key in site else None

    def grad_stream(kk):
        key = ("grad", "model", "embed_out") if kk == 0 else ("grad", (kk - 1, subs[-1]), "stream_out")
        return site[key]["frob"] if key in site else None

    def r_of(layer, sub):
        b = site.get(("fwd", (layer, sub), "branch_out"))
        x = site.get(("fwd", (layer, sub), "stream_in"))
        return b["frob"] / x["frob"] if b and x else None

    checked = {}  # line index -> spans of numbers checked

    def mark(i, m, group, want, what):
        agree(m.group(group), want, what)
        checked.setdefault(i, []).append(m.span(group))

    text = "\n".join(report)
    grad_param = None
    gm = re.search(r"\|\|grad ([\w.]+)\|\|", text)
    if gm:
        grad_param = gm.group(1)
    norms = [stream(kk, "tok_norm") for kk in range(L + 1)]
    # ||x_k||^2: the mean over tokens of the squared per-token norm
    # (the fields: 0 rows, 2 the Frobenius norm; include/resdiag.h)
    def stat(layer, sub, b, field):
        _, sl, ss, sb, nf = st_shape
        return st_data[((((record * sl) + layer) * ss + sub) * sb + b) * nf + field]
    last = len(subs) - 1
    squares = [None] + [stat(kk - 1, last, 4, 2) ** 2 / stat(kk - 1, last, 4, 0)
                        for kk in range(1, L + 1)]
    in_table = in_evidence = False
    for i, line in enumerate(report):
        if re.match(r" +k +layer ", line):
            in_table, header = True, line
            continue
        if in_table:
            m = re.match(r" +(\d+) +(embed|\d+)((?: +(?:" + NUM + r"|-)| {2,})*)$", line)
            if not m:
                in_table = False
            else:
                kk = int(m.group(1))
                # the columns, by position under their header
                for c in re.finditer(NUM, line[m.start(3):]):
                    start = m.start(3) + c.start()
                    end = m.start(3) + c.end()
                    # right-aligned: the header cell that ends where it ends
                    name = None
                    for h in re.finditer(r"\S+(?: \S+)*", header):
                        if h.end() == end:
                            name = h.group(0)
                    want = None
                    if name == "||x_k||":
                        want = norms[kk]
                    elif name == "rms":
                        want = stream(kk, "rms")
                    elif name and name.startswith("r_"):
                        want = r_of(kk - 1, name[2:])
                    elif name == "||dL/dx||":
                        want = grad_stream(kk)
                    elif name and name.endswith("||") and grad_param:
                        want = param.get((kk - 1, grad_param))
                    if want is None:
                        errors.append("table row %d: no recomputation for column %s" % (kk, name))
                        continue
                    agree(line[start:end], want, "table k=%d %s" % (kk, name))
                    checked.setdefault(i, []).append((start, end))
                continue
        m = re.match(r"  \|\|x_k\|\|\^2 = (" + NUM + r") ([-+]) (" + NUM + r") k over k = 1\.\.L "
                     r"\(R\^2 (" + NUM + r"), n = (\d+)\)", line)
        if m:
            a, b, r2, _, _ = fit(list(range(1, L + 1)), squares[1:])
            mark(i, m, 1, a, "||x_k||^2 intercept")
            mark(i, m, 3, abs(b), "||x_k||^2 slope")
            if (b < 0) != (m.group(2) == "-"):
                errors.append("||x_k||^2 slope sign: report %s, recomputed %g" % (m.group(2), b))
            mark(i, m, 4, r2, "||x_k||^2 R^2")
        m = re.match(r"  \|\|x_k\|\|\^2 = (" + NUM + r") at every layer \(flat to 1e-4", line)
        if m:
            sq = squares[1:]
            mark(i, m, 1, sum(sq) / len(sq), "||x_k||^2 flat value")
            if not max(sq) - min(sq) <= 1e-4 * max(sq):
                errors.append("||x_k||^2 called flat to 1e-4: %s" % sq)
        m = re.match(r"  log-log slope of \|\|x_k\|\| \(k = 1\.\.L\): (" + NUM + r") \[(" + NUM
                     + r"), (" + NUM + r")\] \(95%\), R\^2 (" + NUM + r")", line)
        if m:
            _, b, r2, lo, hi = fit([math.log(v) for v in range(1, L + 1)],
                                   [math.log(v) for v in norms[1:]])
            for g, want, what in ((1, b, "slope"), (2, lo, "low"), (3, hi, "high"),
                                  (4, r2, "R^2")):
                mark(i, m, g, want, "log-log ||x_k|| " + what)
        m = re.match(r"  growth over depth \|\|x_L\|\| / \|\|x_1\|\|: (" + NUM + ")$", line)
        if m:
            mark(i, m, 1, norms[L] / norms[1], "growth")
        m = re.match(r"  (stream|[\w.]+) +(" + NUM + r") -> (" + NUM + r"), last/first (" + NUM
                     + r"); log-log slope: (" + NUM + r") \[(" + NUM + r"), (" + NUM
                     + r")\] \(95%\), R\^2 (" + NUM + r"), n = (\d+)", line)
        if m:
            if m.group(1) == "stream":
                g = [grad_stream(kk) for kk in range(1, L + 1)]
            else:
                g = [param.get((layer, m.group(1))) for layer in range(L)]
            _, b, r2, lo, hi = fit([math.log(v) for v in range(1, L + 1)], [math.log(v) for v in g])
            for grp, want, what in ((2, g[0], "first"), (3, g[-1], "last"),
                                    (4, g[-1] / g[0], "last/first"), (5, b, "slope"),
                                    (6, lo, "low"), (7, hi, "high"), (8, r2, "R^2")):
                mark(i, m, grp, want, "gradient %s %s" % (m.group(1), what))
        m = re.match(r"  head ([\w.]+): (" + NUM + ")$", line)
        if m:
            mark(i, m, 2, param[(None, m.group(1))], "head gradient")
        if line.startswith("  evidence (sketch relations"):
            in_evidence = True
            continue
        if in_evidence:
            m = re.match(r"    layers? (\d+)(?:-\d+)? +(\w+) +(pre|post) +(.*)$", line)
            if not m:
                in_evidence = False
                continue
            layer, sub = int(m.group(1)), subs.index(m.group(2))
            x, ni, no, f, y = (sketch(layer, sub, b) for b in range(5))
            xx = sum(u * u for u in x)
            alpha = sum(u * (v - w) for u, v, w in zip(x, ni, f)) / xx
            e_add = rel([y, x, f], [1, -1, -1])
            e_nx = rel([ni, x], [1, -1])
            e_nsum = rel([ni, x, f], [1, -1, -1])
            e_deep = rel([ni, x, f], [1, -alpha, -1])
            e_yn = rel([y, no], [1, -1])
            relations = {"stream_out = stream_in + branch_out": e_add,
                         "norm reads stream_in": e_nx,
                         "norm reads stream_in + branch_out": e_nsum,
                         "stream_out = norm_out": e_yn,
                         "post-type off by": max(e_deep, e_yn),
                         "pre-type off by": max(e_add, e_nx)}
            for e in re.finditer(r"([\w =+]+?) \(error (" + NUM + r")\)|(p\w+-type off by) (" + NUM
                                 + ")", line[m.start(4):]):
                name = (e.group(1) or e.group(3)).strip(", ")
                g = 2 if e.group(2) else 4
                start = m.start(4) + e.start(g)
                if name not in relations:
                    errors.append("evidence: no recomputation for '%s'" % name)
                    continue
                agree(e.group(g), relations[name], "evidence layer %d %s: %s"
                      % (layer, m.group(2), name))
                checked.setdefault(i, []).append((start, start + len(e.group(g))))
    for i, spans in checked.items():
        line = report[i]
        for start, end in sorted(spans, reverse=True):
            line = line[:start] + "#" + line[end:]
        report[i] = line
    sys.stdout.write("\n".join(report))
    for e in errors:
        print("report-numbers: " + e, file=sys.stderr)
    sys.exit(1 if errors else 0)


main()
