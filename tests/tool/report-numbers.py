#!/usr/bin/env python3
"""report-numbers.py - the numbers of a `resdiag report` against an
independent computation from the same run file.

Usage: report-numbers.py REPORT.txt DUMP.txt H5DUMP.txt > TEMPLATE.txt
  REPORT.txt  `resdiag report RUN`
  DUMP.txt    `resdiag dump --step N RUN` of the analysed step N: the
              recorded per-site statistics and parameter gradients
  H5DUMP.txt  `h5dump -y -w 0 -m %.17g -d /forward/site_sketch
              -d /forward/site_stats [-d /forward/site_counts: schema 2]
              -d /backward/site_stats
              -d /forward/model_sketch RUN`: the
              sketches the placement relations are tested on, and the
              statistics in full precision (dump's 6 digits of values near
              32 leave too few for a slope of 0.01)

Recomputes here, from those files only, every number of these lines of the
report: the per-layer table; the fits of the residual stream (least squares
and the 95% interval, with a t quantile found by integrating Student's
density) and its growth; the fits of the relative updates; the gradient
lines; the sketch relation errors of the evidence, the final norm's
difference and the stream's normalization signature (token-norm spread),
the rounding-level ones (~1e-8) too. A printed number agrees
with the recomputed one when it is that value rounded to the digits
printed: within half a unit of its last digit, plus 1e-6 relative for the
six digits `dump` prints and the order of summation.

Prints the report with every number it checked replaced by '#': the
template that tests/tool/golden/ holds, which fixes the rest of the text
and the numbers not checked here. Exits 1 with one line per disagreement.
"""
import math
import re
import sys

NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?"
SITES = ["stream_in", "norm_in", "norm_out", "branch_out", "stream_out",  # include/resdiag.h
         "branch_in", "out_norm_in", "out_norm_out"]  # schema 3 adds the last three
MODEL_SITES = ["embed_out", "final_norm_in", "final_norm_out", "logits"]
FIELD_ROWS, FIELD_FROB, FIELD_TOK_NORM_MEAN, FIELD_TOK_NORM_STD = 0, 2, 3, 4

errors = []


def t975(df):
    """The 0.975 quantile of Student's t with df degrees of freedom:
    Simpson's rule on the density from 0, bisection on the area 0.475."""
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)

    def area(t):
        n = 2000
        h = t / n
        s = sum((1 if i in (0, n) else 4 if i % 2 else 2) * (1 + (i * h) ** 2 / df) ** (-(df + 1) / 2)
                for i in range(n + 1))
        return c * s * h / 3

    lo, hi = 0.0, 20.0
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if area(mid) < 0.475 else (lo, mid)
    return (lo + hi) / 2


def fit(x, y):
    """Least squares y = a + b x: a, b, R^2 and the 95% interval of b."""
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    sxx = sum((u - mx) ** 2 for u in x)
    sxy = sum((u - mx) * (v - my) for u, v in zip(x, y))
    syy = sum((v - my) ** 2 for v in y)
    b = sxy / sxx
    r2 = sxy * sxy / (sxx * syy) if syy > 0 else 1.0
    half = t975(n - 2) * math.sqrt(max(syy - b * sxy, 0) / (n - 2) / sxx) if n > 2 else math.nan
    return my - b * mx, b, r2, b - half, b + half


def loglog(y):
    """The fit of log y against log k, k = 1, 2, ..."""
    return fit([math.log(k) for k in range(1, len(y) + 1)], [math.log(v) for v in y])


def agree(printed, want, what):
    """The printed text of a number against the value recomputed here."""
    mant = re.sub(r"e.*", "", printed.lstrip("+-"))
    unit = 10.0 ** -len(mant.split(".")[1]) if "." in mant else 1.0
    if "e" in printed:
        unit *= 10.0 ** int(printed.split("e")[1])
    if want is None or not abs(float(printed) - want) <= 0.5 * unit + 1e-6 * abs(want):
        errors.append("%s: report %s, recomputed %s" % (what, printed, want))


def read_dump(path):
    """{(fwd|grad, model | (layer, sublayer), site): stats}, {(layer | None, param): ||g||}"""
    site, param = {}, {}
    for line in open(path):
        m = re.match(r"  (fwd|grad) (model|L(\d+) (\w+)) +(\w+) +(\d+) +(" + NUM + r") +(" + NUM
                     + r") +\S+ +(" + NUM + r")", line)
        if m:
            where = "model" if m.group(2) == "model" else (int(m.group(3)), m.group(4))
            site[(m.group(1), where, m.group(5))] = {
                "frob": float(m.group(7)), "tok_norm": float(m.group(8)), "rms": float(m.group(9))}
            continue
        m = re.match(r" {20,}(model|L(\d+)) ([\w.]+) +(" + NUM + r") +" + NUM + r" +\d+ +\d+$", line)
        if m:
            layer = None if m.group(1) == "model" else int(m.group(2))
            param[(layer, m.group(3))] = float(m.group(4))
    return site, param


def read_h5dump(path):
    """{dataset: (shape, values in C order)}; NaN (not observed) is "nan"."""
    sets = {}
    for block in open(path).read().split('DATASET "')[1:]:
        name = block.split('"', 1)[0]
        shape = [int(v) for v in re.search(r"DATASPACE +SIMPLE \{ \(([^)]*)\)", block)
                 .group(1).split(",")]
        data = block.split("DATA {", 1)[1].split("}", 1)[0].replace(",", " ").split()
        sets[name] = (shape, [float(v) for v in data])
    return sets


def element(dataset, *index):
    shape, data = dataset
    o = 0
    for n, i in zip(shape, index):
        o = o * n + i
    for n in shape[len(index):]:
        o *= n
    return data, o


def vector(dataset, *index):
    data, o = element(dataset, *index)
    return data[o:o + dataset[0][-1]]


def rel(vectors, coefs):
    """||sum c_j v_j|| / max_j |c_j| ||v_j||: the relative error of a
    sketch relation (doc/FORMAT.md)."""
    scale = max(abs(c) * math.sqrt(sum(u * u for u in v)) for v, c in zip(vectors, coefs))
    r = [sum(c * v[i] for v, c in zip(vectors, coefs)) for i in range(len(vectors[0]))]
    return math.sqrt(sum(u * u for u in r)) / scale


class Run:
    """What the report's numbers are recomputed from."""

    def __init__(self, report, dump, h5):
        head = report[1]
        self.L = int(re.search(r"Run: (\d+) layers", head).group(1))
        self.subs = re.search(r"block of ([\w ]+?);", head).group(1).split()
        self.record = int(re.search(r"\(record (\d+)\)", "\n".join(report)).group(1)) - 1
        self.site, self.param = read_dump(dump)
        self.h5 = read_h5dump(h5)
        last = len(self.subs) - 1
        self.norms = [self.stream(k, "tok_norm") for k in range(self.L + 1)]
        # ||x_k||^2: the mean over tokens of the squared per-token norm
        stats = self.h5["/forward/site_stats"]
        # schema 2: site_stats holds the real fields from frob on, and
        # site_counts the integer ones from rows on (doc/FORMAT.md)
        counts = self.h5.get("/forward/site_counts", stats)
        real = FIELD_FROB if "/forward/site_counts" in self.h5 else 0
        self.squares = [None]
        for k in range(1, self.L + 1):
            data, o = element(stats, self.record, k - 1, last, SITES.index("stream_out"))
            cdata, co = element(counts, self.record, k - 1, last, SITES.index("stream_out"))
            self.squares.append(data[o + FIELD_FROB - real] ** 2 / cdata[co + FIELD_ROWS])
        # the normalization signature: std / mean of the per-token norm
        self.spread = []
        for layer in range(self.L):
            data, o = element(stats, self.record, layer, last, SITES.index("stream_out"))
            self.spread.append(data[o + FIELD_TOK_NORM_STD - real]
                               / data[o + FIELD_TOK_NORM_MEAN - real])
        gm = re.search(r"\|\|grad ([\w.]+)\|\|", "\n".join(report))
        self.grad_param = gm.group(1) if gm else None

    def stream(self, k, col):
        """||x_k|| (x_0 the embedding, x_k the stream leaving layer k-1)."""
        where = "model" if k == 0 else (k - 1, self.subs[-1])
        s = self.site.get(("fwd", where, "embed_out" if k == 0 else "stream_out"))
        return s[col] if s else None

    def grad_stream(self, k):
        where = "model" if k == 0 else (k - 1, self.subs[-1])
        s = self.site.get(("grad", where, "embed_out" if k == 0 else "stream_out"))
        if s and k > 0 and "/backward/site_stats" in self.h5:
            # in full: the gradient's norms agree to about the dump's six
            # digits over the layers, and a fit of them needs every digit
            real = FIELD_FROB if "/forward/site_counts" in self.h5 else 0
            data, o = element(self.h5["/backward/site_stats"], self.record, k - 1,
                              len(self.subs) - 1, SITES.index("stream_out"))
            return data[o + FIELD_FROB - real]
        return s["frob"] if s else None

    def r(self, layer, sub):
        """r = ||branch_out||_F / ||stream_in||_F of a sublayer."""
        b = self.site.get(("fwd", (layer, sub), "branch_out"))
        x = self.site.get(("fwd", (layer, sub), "stream_in"))
        return b["frob"] / x["frob"] if b and x else None

    def relations(self, layer, sub):
        """The relation errors of one sublayer, by the words the report uses."""
        sk = self.h5["/forward/site_sketch"]
        n_sites = sk[0][-2]  # 8 from schema 3, 5 before
        x, ni, no, f, y = (vector(sk, self.record, layer, sub, b) for b in range(5))
        alpha = sum(u * (v - w) for u, v, w in zip(x, ni, f)) / sum(u * u for u in x)
        e_add, e_nx = rel([y, x, f], [1, -1, -1]), rel([ni, x], [1, -1])
        e_nsum, e_deep = rel([ni, x, f], [1, -1, -1]), rel([ni, x, f], [1, -alpha, -1])
        e_yn = rel([y, no], [1, -1])
        pre, post = [e_add, e_nx], [e_deep, e_yn]
        bi = vector(sk, self.record, layer, sub, 5) if n_sites > 5 else None
        if bi is not None and all(v == v for v in bi):
            # what the branch reads: the stream (post-type) or the norm's
            # output (pre-type); a copy of either holds by construction
            one = self.same_tensor(layer, sub)
            if one(5) != one(0):
                post.append(rel([bi, x], [1, -1]))
            if one(5) != one(2):
                pre.append(rel([bi, no], [1, -1]))
        return {"stream_out = stream_in + branch_out": e_add,
                "norm reads stream_in": e_nx,
                "norm reads stream_in + branch_out": e_nsum,
                "stream_out = norm_out": e_yn,
                "post-type off by": max(post),
                "pre-type off by": max(pre)}

    def same_tensor(self, layer, sub):
        """site -> the smallest site recorded from the same tensor (by the
        file's /forward/site_alias, chains and both directions followed)."""
        al = self.h5.get("/forward/site_alias")
        n = al[0][-1] if al else 0
        row = vector(al, self.record, layer, sub) if al else []
        group = list(range(8))  # a site and its source are one group, either way
        for b in range(n):
            o = row[b]
            if o == o and o >= 0:
                lo, hi = sorted((group[b], group[int(o)]))
                group = [lo if g == hi else g for g in group]
        return lambda b: group[b]

    def final_norm_difference(self, ref):
        sk = self.h5["/forward/model_sketch"]
        out = vector(sk, self.record, MODEL_SITES.index("final_norm_out"))
        if ref == "its input":
            other = vector(sk, self.record, MODEL_SITES.index("final_norm_in"))
        else:  # the last layer's stream_out
            other = vector(self.h5["/forward/site_sketch"], self.record, self.L - 1,
                           len(self.subs) - 1, SITES.index("stream_out"))
        return rel([out, other], [1, -1])


class Checker:
    """Walks the report line by line; each number it recomputes is checked
    and remembered, to be replaced by '#'."""

    def __init__(self, report, run):
        self.report, self.run = report, run
        self.spans = {}

    def check(self, i, printed_span, want, what):
        start, end = printed_span
        agree(self.report[i][start:end], want, what)
        self.spans.setdefault(i, []).append((start, end))

    def groups(self, i, m, offset, wants):
        for g, (want, what) in wants.items():
            self.check(i, (offset + m.start(g), offset + m.end(g)), want, what)

    def table_row(self, i, header):
        line, run = self.report[i], self.run
        m = re.match(r" +(\d+) +(embed|\d+)((?: +(?:" + NUM + r"|-)| {2,})*)$", line)
        if not m:
            return False
        k = int(m.group(1))
        for c in re.finditer(NUM, line[m.start(3):]):
            start, end = m.start(3) + c.start(), m.start(3) + c.end()
            # right-aligned: the header cell that ends where the number ends
            name = next((h.group(0) for h in re.finditer(r"\S+(?: \S+)*", header)
                         if h.end() == end), None)
            if name == "||x_k||":
                want = run.norms[k]
            elif name == "rms":
                want = run.stream(k, "rms")
            elif name and name.startswith("r_"):
                want = run.r(k - 1, name[2:])
            elif name == "||dL/dx||":
                want = run.grad_stream(k)
            elif name == "||grad %s||" % run.grad_param:
                want = run.param.get((k - 1, run.grad_param))
            else:
                errors.append("table row %d: no column above %s" % (k, line[start:end]))
                continue
            self.check(i, (start, end), want, "table k=%d %s" % (k, name))
        return True

    def evidence_line(self, i):
        line = self.report[i]
        m = re.match(r"    layers? (\d+)(?:-\d+)? +(\w+) +(pre|post) +", line)
        if not m:
            return False
        layer, sub = int(m.group(1)), m.group(2)
        relations = self.run.relations(layer, self.run.subs.index(sub))
        for e in re.finditer(r"([\w =+]+?) \(error (" + NUM + r")\)|(p\w+-type off by) (" + NUM
                             + ")", line[m.end():]):
            name = (e.group(1) or e.group(3)).strip(", ")
            g = 2 if e.group(2) else 4
            span = (m.end() + e.start(g), m.end() + e.end(g))
            if name not in relations:
                errors.append("evidence: no recomputation for '%s'" % name)
            else:
                self.check(i, span, relations[name], "evidence layer %d %s: %s" % (layer, sub, name))
        return True

    def other_line(self, i, sub):
        """The lines of one number or one fit each; returns the sublayer a
        'deeper half' line below belongs to."""
        line, run, L = self.report[i], self.run, self.run.L
        N = "(" + NUM + ")"
        m = re.match(r"  \|\|x_k\|\|\^2 = " + N + r" ([-+]) " + N + r" k over k = 1\.\.L \(R\^2 "
                     + N + r", n = \d+\)", line)
        if m:
            a, b, r2, _, _ = fit(list(range(1, L + 1)), run.squares[1:])
            if (b < 0) != (m.group(2) == "-"):
                errors.append("||x_k||^2 slope: sign %s, recomputed %g" % (m.group(2), b))
            self.groups(i, m, 0, {1: (a, "||x_k||^2 intercept"), 3: (abs(b), "||x_k||^2 slope"),
                                  4: (r2, "||x_k||^2 R^2")})
        m = re.match(r"  \|\|x_k\|\|\^2 = " + N + r" at every layer \(flat to 1e-4", line)
        if m:
            sq = run.squares[1:]
            if not max(sq) - min(sq) <= 1e-4 * max(sq):
                errors.append("||x_k||^2 called flat to 1e-4: %s" % sq)
            self.groups(i, m, 0, {1: (sum(sq) / len(sq), "||x_k||^2 flat value")})
        m = re.match(r"  log-log slope of \|\|x_k\|\| \(k = 1\.\.L\): " + N + r" \[" + N + ", " + N
                     + r"\] \(95%\), R\^2 " + N, line)
        if m:
            _, b, r2, lo, hi = loglog(run.norms[1:])
            self.groups(i, m, 0, {1: (b, "||x_k|| slope"), 2: (lo, "||x_k|| slope low"),
                                  3: (hi, "||x_k|| slope high"), 4: (r2, "||x_k|| R^2")})
        m = re.match(r"  growth over depth \|\|x_L\|\| / \|\|x_1\|\|: " + N + "$", line)
        if m:
            self.groups(i, m, 0, {1: (run.norms[L] / run.norms[1], "growth")})
        m = re.match(r"  (\w+) +all layers: " + N + r" \[" + N + ", " + N + r"\] \(95%\), R\^2 " + N,
                     line)
        if m and m.group(1) in run.subs:
            sub = m.group(1)
            _, b, r2, lo, hi = loglog([run.r(layer, sub) for layer in range(L)])
            self.groups(i, m, 0, {2: (b, "r %s slope" % sub), 3: (lo, "r %s low" % sub),
                                  4: (hi, "r %s high" % sub), 5: (r2, "r %s R^2" % sub)})
        m = re.match(r" +deeper half: " + N + r" from 2 points", line)
        if m and sub:
            rs = [run.r(layer, sub) for layer in range(L // 2, L)]
            b = fit([math.log(layer + 1) for layer in range(L // 2, L)], [math.log(v) for v in rs])[1]
            self.groups(i, m, 0, {1: (b, "r %s deeper half slope" % sub)})
        m = re.match(r"  (stream|[\w.]+) +" + N + " -> " + N + ", last/first " + N + "; log-log slope: "
                     + N + r" \[" + N + ", " + N + r"\] \(95%\), R\^2 " + N, line)
        if m:
            p = m.group(1)
            g = ([run.grad_stream(k) for k in range(1, L + 1)] if p == "stream"
                 else [run.param.get((layer, p)) for layer in range(L)])
            _, b, r2, lo, hi = loglog(g)
            self.groups(i, m, 0, {2: (g[0], p + " first"), 3: (g[-1], p + " last"),
                                  4: (g[-1] / g[0], p + " last/first"), 5: (b, p + " slope"),
                                  6: (lo, p + " low"), 7: (hi, p + " high"), 8: (r2, p + " R^2")})
        m = re.match(r"  head ([\w.]+): " + N + "$", line)
        if m:
            self.groups(i, m, 0, {2: (run.param.get((None, m.group(1))), "head gradient")})
        m = re.search(r"\(here \|\|x_1\|\|/\|\|x_L\|\| = " + N + r"\)", line)
        if m:
            self.groups(i, m, 0, {1: (run.norms[1] / run.norms[L], "Xiong ||x_1||/||x_L||")})
        m = re.search(r"measured last/first " + N, line) if line.startswith("  Xiong") else None
        if m:
            g = [run.param.get((layer, run.grad_param)) for layer in range(L)]
            self.groups(i, m, 0, {1: (g[-1] / g[0], "Xiong last/first")})
        m = re.search(r"final_norm_out\)? (?:differs from|is) (its input|the last layer's stream_out)"
                      r"(?: unchanged)? \(difference " + N + r"\)", line)
        if m:
            self.groups(i, m, 0, {2: (run.final_norm_difference(m.group(1)), "final norm difference")})
        m = re.match(r"  (\w+) +all layers", line)
        return m.group(1) if m else sub

    def signature_line(self, i):
        found = False
        for m in re.finditer(r"L(\d+) \w+ \((" + NUM + r")\)", self.report[i]):
            layer = int(m.group(1))
            self.check(i, m.span(2), self.run.spread[layer], "signature L%d" % layer)
            found = True
        return found

    def walk(self):
        header = None
        in_evidence = in_signature = False
        sub = None
        for i, line in enumerate(self.report):
            if re.match(r" +k +layer ", line):
                header = line
                continue
            if header is not None:
                if self.table_row(i, header):
                    continue
                header = None
            if line.startswith("  evidence (sketch relations"):
                in_evidence = True
                continue
            if in_evidence:
                if self.evidence_line(i):
                    continue
                in_evidence = False
            if line.startswith("  signature (token-norm spread"):
                in_signature = True
                continue
            if in_signature:
                if self.signature_line(i):
                    continue
                in_signature = False
            sub = self.other_line(i, sub)

    def template(self):
        out = list(self.report)
        for i, spans in self.spans.items():
            for start, end in sorted(spans, reverse=True):
                out[i] = out[i][:start] + "#" + out[i][end:]
        return "\n".join(out)


def main():
    report = open(sys.argv[1]).read().split("\n")
    checker = Checker(report, Run(report, sys.argv[2], sys.argv[3]))
    checker.walk()
    sys.stdout.write(checker.template())
    for e in errors:
        print("report-numbers: " + e, file=sys.stderr)
    sys.exit(1 if errors else 0)


main()
