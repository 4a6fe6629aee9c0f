#!/usr/bin/env python3
"""compare-reports.py - `resdiag report --json` of one run recorded as schema 1
(every value a float64) and as schema 2 (float32 statistics and sketches):
the same document, every number within what float32 storage can change.

Usage: compare-reports.py SCHEMA1.json SCHEMA2.json

Booleans and integers must be equal (counts, steps), strings equal with
their numbers masked (verdicts, placements, the reasons: their numbers are
the ones checked below); run.schema_version is 1 and 2. (JSON writes a
float that is an integer without a fraction: a number that is a float in
either document is a float.) Every float of schema 2 must lie
within a bound derived from one rounding to float32 of each stored value,
relative error at most u = 2^-24, and from the formula that makes the
number (doc/TESTING.md, "Schema 1 against schema 2"):

- a stored field, a quotient or product of two (r, rms, growth, last over
  first, the head's gradient, the coefficient of variation), an energy
  (a norm squared) or a mean of such positive numbers: relative 2u;
- the trainer's metrics (float64 in both schemas): equal;
- rounding_floor (from the tensors' dtype, f32 here): schema 2's adds
  m u for the float32 rounding of a relation's m stored sketches, m = 3
  for a sequential sublayer and S + 2 for a parallel block
  (lib/analysis/evidence.c): exactly that;
- a relation error e = ||sum_j c_j s_j|| / max_j ||c_j s_j|| over m sketches
  each rounded componentwise: |de| <= (m + e) u (the numerator moves by at
  most u sum_j ||c_j s_j|| <= m u max, the denominator by u relative);
- evidence_strength = rival / max(best, rounding_floor), rival and best
  relation errors (lib/analysis/placement.c): schema 2's within the
  extremes of rival / max(best, its own floor) with rival and best each
  moved by its bound;
- alpha = <a, b> / <b, b> with a = norm_in - branch, b = stream: relative
  (4u) / cos(a, b), cos = sqrt(1 - e^2) with e its relation error
  norm_reads_alpha_sum (no bound, so not compared, where e >= 1/2);
- a least-squares fit (energy over depth, or log-log): recomputed here from
  the schema-1 document's own series with each input moved by its bound
  (2u relative; 2u absolute after the log), the bound of every output
  (intercept, slope, slope_lo, slope_hi, r2) being sum_i |d out / d y_i|
  times that bound, the derivatives taken numerically. The recomputed fit
  must match the document within what the 9 printed digits of its series
  allow (the same sum with half a unit of the 9th digit: a check of this
  script).
Each bound also allows half a unit of the last printed digit of both
numbers (9 significant digits). Prints the largest ratio of a difference to
its bound for each kind; exits 1 listing any number beyond its bound.
"""
import json
import math
import re
import sys

U = 2.0 ** -24
PRINTED = 0.5e-8  # half a unit of the 9th significant digit, relative
TERMS = {"add": 3, "norm_reads_stream": 2, "norm_reads_sum": 3,
         "norm_reads_alpha_sum": 3, "out_is_norm": 2, "branch_is_norm_out": 2}

failures = []
worst = {}
NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def note(kind, path, a, b, bound):
    slack = PRINTED * (abs(a) + abs(b))
    diff = abs(a - b)
    ratio = diff / (bound + slack) if bound + slack > 0 else (0 if diff == 0 else math.inf)
    if ratio > worst.get(kind, (0, ""))[0]:
        worst[kind] = (ratio, path)
    if diff > bound + slack:
        failures.append("%s: schema 1 %.10g, schema 2 %.10g, difference %.3g > bound %.3g (%s)"
                        % (path, a, b, diff, bound + slack, kind))


def fit(x, y):
    """Least squares y = a + b x: intercept, slope, its standard error, r2."""
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    sxx = sum((xi - mx) ** 2 for xi in x)
    sxy = sum((xi - mx) * (yi - my) for xi, yi in zip(x, y))
    b = sxy / sxx
    a = my - b * mx
    ssr = sum((yi - a - b * xi) ** 2 for xi, yi in zip(x, y))
    sst = sum((yi - my) ** 2 for yi in y)
    se = math.sqrt(ssr / (n - 2) / sxx) if n > 2 else math.nan
    r2 = 1 - ssr / sst if sst > 0 else math.nan
    return a, b, se, r2


def fit_outputs(x, y, t):
    a, b, se, r2 = fit(x, y)
    return {"intercept": a, "slope": b, "slope_lo": b - t * se, "slope_hi": b + t * se,
            "r2": r2}


def check_fit(path, f1, f2, x, y, loglog):
    """f1, f2: the fit objects; x, y the series it was made from (schema 1)."""
    n = f1["n"]
    if len(y) != n or n < 2:
        failures.append("%s: %d points in the document, %d in its series" % (path, n, len(y)))
        return
    if loglog:
        x = [math.log(v) for v in x]
        dy = [2 * U] * n          # 2u relative becomes 2u after the log
        y = [math.log(v) for v in y]
    else:
        dy = [2 * U * abs(v) for v in y]
    # the printed series: half a unit of its 9th digit (after a log: absolute)
    dprint = [PRINTED] * n if loglog else [PRINTED * abs(v) for v in y]
    a, b, se, r2 = fit(x, y)
    t = (f1["slope_hi"] - b) / se if "slope_hi" in f1 and se > 0 else 0.0
    base = fit_outputs(x, y, t)
    bound = dict.fromkeys(base, 0.0)
    pbound = dict.fromkeys(base, 0.0)
    for i in range(n):
        h = max(abs(y[i]), 1.0) * 1e-7
        up = list(y)
        up[i] += h
        moved = fit_outputs(x, up, t)
        for key in bound:
            bound[key] += abs(moved[key] - base[key]) / h * dy[i]
            pbound[key] += abs(moved[key] - base[key]) / h * dprint[i]
    for key in ("intercept", "slope", "r2"):
        if key in f1 and not abs(base[key] - f1[key]) <= 1.01 * pbound[key] \
                + PRINTED * abs(f1[key]) + 1e-12:
            failures.append("%s.%s: recomputed %.10g, the document has %.10g: the series "
                            "is not what this script assumes" % (path, key, base[key], f1[key]))
    for key, value in f1.items():
        if key == "n":
            continue
        if key in bound and isinstance(value, float):
            note("fit " + key, path + "." + key, value, f2[key], bound[key] * 1.001)


def walk(a, b, path, ctx):
    if isinstance(a, dict):
        if set(a) != set(b):
            failures.append("%s: keys %s against %s" % (path, sorted(a), sorted(b)))
            return
        for k in a:
            walk(a[k], b[k], path + "." + k, ctx)
    elif isinstance(a, list):
        if len(a) != len(b):
            failures.append("%s: %d items against %d" % (path, len(a), len(b)))
            return
        for i, (x, y) in enumerate(zip(a, b)):
            walk(x, y, "%s[%d]" % (path, i), ctx)
    elif isinstance(a, str) and isinstance(b, str):
        if NUMBER.sub("#", a) != NUMBER.sub("#", b):
            failures.append("%s: %r against %r" % (path, a, b))
    elif (isinstance(a, float) or isinstance(b, float)) and not isinstance(a, bool) \
            and not isinstance(b, bool) and isinstance(a, (int, float)) \
            and isinstance(b, (int, float)):
        a, b = float(a), float(b)
        kind = classify(path)
        if kind is None:
            return  # checked elsewhere (the fits, alpha, evidence)
        if kind == "equal":
            if not (a == b or (math.isnan(a) and math.isnan(b))):
                failures.append("%s: %r against %r, must be equal" % (path, a, b))
            return
        if math.isnan(a) or math.isnan(b):
            if not (math.isnan(a) and math.isnan(b)):
                failures.append("%s: %r against %r" % (path, a, b))
            return
        note(kind, path, a, b, 2 * U * abs(a))
    elif path == ".run.schema_version":
        if (a, b) != (1, 2):
            failures.append("schema_version %r and %r, want 1 and 2" % (a, b))
    elif a != b:
        failures.append("%s: %r against %r" % (path, a, b))


def classify(path):
    leaf = path.rsplit(".", 1)[-1]
    if path.startswith(".metrics."):
        return "equal"
    if leaf == "rounding_floor":
        return None
    if "_fit" in path or "fit_all" in path or "fit_deeper" in path:
        return None
    if path.startswith(".measurements.") and leaf in ("exponent", "exponent_lo", "exponent_hi"):
        return None  # log-log fits: check_fits
    if ".relation_errors." in path or leaf in ("alpha", "evidence_strength"):
        return None
    return "stored or a quotient of two"


def check_floor(path, f1, f2, n_sublayers):
    if not isinstance(f1, float) or math.isnan(f1):
        return
    if not any(math.isclose(f2, f1 + m * U, rel_tol=1e-8) for m in (3, n_sublayers + 2)):
        failures.append("%s.rounding_floor: %r against %r, want it plus 3 or %d times 2^-24"
                        % (path, f1, f2, n_sublayers + 2))


def check_placement(p1, p2, n_sublayers):
    for li, (l1, l2) in enumerate(zip(p1["layers"], p2["layers"])):
        for si, (s1, s2) in enumerate(zip(l1["sublayers"], l2["sublayers"])):
            path = ".placement.layers[%d].sublayers[%d]" % (li, si)
            check_floor(path, s1.get("rounding_floor"), s2.get("rounding_floor"), n_sublayers)
            e1, e2 = s1.get("relation_errors", {}), s2.get("relation_errors", {})
            bounds = {}
            for name, v in e1.items():
                if not isinstance(v, float) or math.isnan(v):
                    continue
                m = TERMS.get(name)
                if m is None:
                    failures.append("%s: relation %s has no bound here" % (path, name))
                    continue
                bounds[name] = (m + v) * U * 1.000001
                note("relation error", path + ".relation_errors." + name, v, e2[name],
                     bounds[name])
            es = s1.get("evidence_strength")
            floor = s1.get("rounding_floor")
            if isinstance(es, (int, float)) and floor and not math.isnan(es):
                # which rival over max(best, floor) it is: best is a relation
                # error, the larger of two, or none (0: the floor alone)
                vals = {n: v for n, v in e1.items() if n in bounds}
                bests = [(0.0, 0.0)] + [(v, bounds[n]) for n, v in vals.items()]
                bests += [(max(vals[p], vals[q]), max(bounds[p], bounds[q]))
                          for p in vals for q in vals if p < q]
                found = None
                for rn, rival in vals.items():
                    for best, db in bests:
                        if math.isclose(rival / max(best, floor), es, rel_tol=2e-8 + 1e-6):
                            found = (rival, bounds[rn], best, db)
                if found:
                    rival, dr, best, db = found
                    floor2 = s2["rounding_floor"]
                    es2 = rival / max(best, floor2)
                    hi = (rival + dr) / max(best - db, floor2)
                    lo = (rival - dr) / max(best + db, floor2)
                    note("evidence strength", path + ".evidence_strength", es2,
                         s2["evidence_strength"], max(hi - es2, es2 - lo))
                else:
                    failures.append("%s: evidence_strength %g is no relation error over "
                                    "max(another, the floor)" % (path, es))
            alpha, e = s1.get("alpha"), e1.get("norm_reads_alpha_sum")
            if isinstance(alpha, float) and isinstance(e, float) and e < 0.5:
                note("alpha", path + ".alpha", alpha, s2["alpha"],
                     4 * U * abs(alpha) / math.sqrt(1 - e * e))


def as_fit(e, n):
    """A measurements exponent (exponent, _lo, _hi) as check_fit's fit object."""
    f = {"n": n, "slope": e["exponent"]}
    for k in ("lo", "hi"):
        if isinstance(e.get("exponent_" + k), float):
            f["slope_" + k] = e["exponent_" + k]
    return f


def check_fits(d1, d2):
    s1, s2 = d1.get("stream"), d2.get("stream")
    if s1 and "energy_fit" in s1:
        n = s1["energy_fit"]["n"]
        x = list(range(1, n + 1))
        check_fit(".stream.energy_fit", s1["energy_fit"], s2["energy_fit"], x,
                  s1["energy"][1:n + 1], False)
        check_fit(".stream.loglog_fit", s1["loglog_fit"], s2["loglog_fit"], x,
                  s1["norm"][1:n + 1], True)
    for i, (u1, u2) in enumerate(zip(d1.get("updates", []), d2.get("updates", []))):
        r = u1["r"]
        x = list(range(1, len(r) + 1))
        check_fit(".updates[%d].fit_all" % i, u1["fit_all"], u2["fit_all"], x, r, True)
        h = len(r) - u1["fit_deeper_half"]["n"]
        check_fit(".updates[%d].fit_deeper_half" % i, u1["fit_deeper_half"],
                  u2["fit_deeper_half"], x[h:], r[h:], True)
    m1, m2 = d1.get("measurements"), d2.get("measurements")
    if m1 and isinstance(m1["effective_depth"].get("exponent"), float):
        share = m1["effective_depth"]["share"]
        if all(isinstance(v, float) and v > 0 for v in share):
            check_fit(".measurements.effective_depth", as_fit(m1["effective_depth"], len(share)),
                      as_fit(m2["effective_depth"], len(share)),
                      list(range(1, len(share) + 1)), share, True)
    g1, g2 = d1.get("gradients"), d2.get("gradients")
    if g1:
        for i, (p1, p2) in enumerate(zip(g1["params"], g2["params"])):
            if "loglog_fit" in p1:
                norm = p1["norm"]
                check_fit(".gradients.params[%d].loglog_fit" % i, p1["loglog_fit"],
                          p2["loglog_fit"], list(range(1, len(norm) + 1)), norm, True)
        # the consequences' exponents: log-log fits of the same gradients
        m1, m2 = d1.get("measurements"), d2.get("measurements")
        names = {p["name"]: p["norm"] for p in g1["params"]}
        for i, (e1, e2) in enumerate(zip((m1 or {}).get("gradient_exponent", []),
                                         (m2 or {}).get("gradient_exponent", []))):
            norm = names.get(e1["param"])
            if isinstance(e1["exponent"], float) and norm and e1["n"] == len(norm):
                check_fit(".measurements.gradient_exponent[%d]" % i, as_fit(e1, e1["n"]),
                          as_fit(e2, e1["n"]), list(range(1, len(norm) + 1)), norm, True)
        if "stream_loglog_fit" in g1:
            st = g1["stream"]
            check_fit(".gradients.stream_loglog_fit", g1["stream_loglog_fit"],
                      g2["stream_loglog_fit"], list(range(1, len(st) + 1)), st, True)


def main():
    d1 = json.load(open(sys.argv[1]))
    d2 = json.load(open(sys.argv[2]))
    walk(d1, d2, "", None)
    if "placement" in d1 and "layers" in d1["placement"]:
        check_placement(d1["placement"], d2["placement"], d1["run"]["n_sublayers"])
    check_fits(d1, d2)
    for kind, (ratio, path) in sorted(worst.items()):
        print("  %-28s largest difference / bound %.3f (%s)" % (kind, ratio, path))
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
