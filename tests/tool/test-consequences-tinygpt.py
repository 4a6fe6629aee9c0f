#!/usr/bin/python3
# test-consequences-tinygpt.py - the report's consequences on real tinygpt
# runs, each against its neighbour: post-norm at 12 layers without and with
# --warmup (the warm-up's length against the formula of tinygpt's --help),
# pre-norm at 48 layers against 6, and a post-norm branch scale at init
# from GPT-2's N(0, 0.02) against Xavier's, the median r recomputed here
# from the recorded per-sublayer ratios of `resdiag dump`; --no-consequences
# drops the section and leaves `check` as it was.
# usage: test-consequences-tinygpt.py RESDIAG TINYGPT
import json, os, re, statistics, subprocess, sys, tempfile

tool, tinygpt = sys.argv[1], sys.argv[2]
fails = 0
SMALL = ["--d-model", "16", "--heads", "2", "--seq", "8", "--batch", "2", "--vocab", "16",
         "--threads", "1", "--log-every", "1000"]


def fail(msg):
    global fails
    fails += 1
    print("FAIL:", msg)


def train(path, *args):
    subprocess.run([tinygpt, *SMALL, *args, "--out", path], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def report(path, *args):
    out = subprocess.run([tool, "report", "--json", *args, path], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def met(r):
    return {c["id"] for c in r["consequences"] if c["condition_met"] is True}


def expect_met(name, r, want, not_want):
    got = met(r)
    for i in want:
        if i not in got:
            fail("%s: %s not met (met: %s)" % (name, i, sorted(got)))
    for i in not_want:
        if i in got:
            fail("%s: %s met, it must not be" % (name, i))


with tempfile.TemporaryDirectory(prefix="resdiag-cons-") as d:
    p = lambda n: os.path.join(d, n)
    # post-norm, 12 layers: no warm-up against a 10-step warm-up (and 6 layers with it)
    train(p("post12.h5"), "--placement", "post", "--layers", "12", "--steps", "12", "--lr", "0.01")
    train(p("post12w.h5"), "--placement", "post", "--layers", "12", "--steps", "12", "--lr", "0.01",
          "--warmup", "10")
    train(p("post6w.h5"), "--placement", "post", "--layers", "6", "--steps", "12", "--lr", "0.01",
          "--warmup", "10")
    r, rw, r6 = report(p("post12.h5")), report(p("post12w.h5")), report(p("post6w.h5"))
    expect_met("post 12 no warm-up", r, ["post_no_warmup"], ["post_deep_with_warmup",
                                                             "pre_no_warmup", "pre_deep"])
    expect_met("post 12 warm-up", rw, ["post_deep_with_warmup"], ["post_no_warmup"])
    expect_met("post 6 warm-up", r6, [], ["post_deep_with_warmup", "post_no_warmup"])
    if r["measurements"]["lr"]["state"] != "no_warmup":
        fail("post 12: lr state %r" % r["measurements"]["lr"]["state"])
    lr = rw["measurements"]["lr"]
    # tinygpt: step s trains at X * min(1, (s + 1) / N): step N - 1 is the
    # first at X, so the warm-up counts steps 0 .. N - 1
    want = {"state": "warmup", "first": 0.01 / 10, "first_step": 0, "peak": 0.01,
            "peak_step": 9, "warmup_steps": 10}
    for k, v in want.items():
        if isinstance(v, float) and abs(lr[k] - v) > 1e-12 or not isinstance(v, float) \
                and lr[k] != v:
            fail("post 12 warm-up: measurements.lr.%s = %r, want %r" % (k, lr[k], v))

    # pre-norm without warm-up: deep at 48 layers, not at 6
    train(p("pre48.h5"), "--placement", "pre", "--layers", "48", "--steps", "2")
    train(p("pre6.h5"), "--placement", "pre", "--layers", "6", "--steps", "2")
    r48, r6p = report(p("pre48.h5")), report(p("pre6.h5"))
    expect_met("pre 48", r48, ["pre_deep", "pre_no_warmup"], ["post_no_warmup"])
    expect_met("pre 6", r6p, ["pre_no_warmup"], ["pre_deep"])
    eff = r48["measurements"]["effective_depth"]
    if len(eff["share"]) != 48:
        fail("pre 48: %d shares" % len(eff["share"]))
    # the entry says whether the source's slope -1/2 lies in the measured interval
    deep = [c for c in r48["consequences"] if c["id"] == "pre_deep"][0]
    word = "within" if eff["exponent_lo"] <= -0.5 <= eff["exponent_hi"] else "outside"
    if "the source's -1/2 %s it" % word not in deep["measured"]:
        fail("pre 48: %r lacks %r for [%g, %g]" % (deep["measured"], word, eff["exponent_lo"],
                                                   eff["exponent_hi"]))

    # post-norm branch scale at init: GPT-2's N(0, 0.02) against Xavier's
    for init, small in (("gpt2", True), ("xavier", False)):
        path = p("post-%s.h5" % init)
        train(path, "--placement", "post", "--layers", "4", "--steps", "1", "--init", init)
        rep = report(path)
        dump = subprocess.run([tool, "dump", path], check=True, capture_output=True,
                              text=True).stdout
        # the dump's update-ratio table: "layer sublayer r_frob r_tok"
        ratios = {}
        for m in re.finditer(r"^\s*L(\d+)\s+(attn|mlp)\s+(\S+)\s+(\S+)\s*$", dump, re.M):
            ratios.setdefault(m.group(2), []).append(float(m.group(3)))
        for sub in rep["measurements"]["init_scale"]["sublayers"]:
            rs = ratios.get(sub["name"], [])
            if len(rs) != 4:
                fail("%s: %d dumped ratios of %s" % (init, len(rs), sub["name"]))
                continue
            med = statistics.median(rs)
            if abs(sub["r"] - med) > 1e-5 * med:
                fail("%s %s: median r %r, recomputed %r" % (init, sub["name"], sub["r"], med))
            want_class = "small" if med <= 0.1 else "default"
            if sub["class"] != want_class:
                fail("%s %s: class %s for r %g" % (init, sub["name"], sub["class"], med))
        expect_met("post " + init, rep, ["post_small_init"] if small else [],
                   [] if small else ["post_small_init"])

    # --no-consequences: no section, and check does not change
    off = report(p("post12.h5"), "--no-consequences")
    if off["consequences"] is not None:
        fail("--no-consequences: consequences %r" % off["consequences"])
    text = subprocess.run([tool, "report", "--no-consequences", p("post12.h5")], check=True,
                          capture_output=True, text=True).stdout
    if "Consequences" in text:
        fail("--no-consequences: the text has the section")
    checks = [subprocess.run([tool, "check", "--expect", "post", *a, p("post12.h5")],
                             capture_output=True, text=True) for a in ([], )]
    if checks[0].returncode != 0:
        fail("check --expect post: exit %d" % checks[0].returncode)

print("%s" % ("ok" if not fails else "%d failed" % fails))
sys.exit(1 if fails else 0)
