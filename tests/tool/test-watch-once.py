#!/usr/bin/python3
# test-watch-once.py - `resdiag watch --once` on finished tinygpt runs: its
# verdict, per-layer ||x||, r per sublayer, gradient and first non-finite
# value read back against `report --last --json` of the same file; a bad
# file gives one line and exit 2.
# usage: test-watch-once.py RESDIAG TINYGPT
import json, math, os, re, subprocess, sys, tempfile

tool, tinygpt = sys.argv[1], sys.argv[2]
fails = 0


def fail(msg):
    global fails
    fails += 1
    print("FAIL:", msg)


def close(a, b):  # watch prints %.4g
    if b is None:
        return a is None or math.isnan(a)
    return a is not None and abs(a - b) <= 6e-4 * abs(b) + 1e-12


def num(s):
    return float(s)


def parse(text):
    lines = text.splitlines()
    out = {"layers": []}
    m = re.match(r"verdict: (\S+) \((\S+)\) at step (\d+)", lines[1])
    out["verdict"], out["confidence"], out["step"] = m.group(1), m.group(2), int(m.group(3))
    for ln in lines:
        m = re.match(r"first non-finite: step (\d+), (model|layer (\d+), (\S+)) (?:, )?(\S+), "
                     r"(forward|backward), rank (\d+)", ln.replace("model, ", "model "))
        if m:
            out["nf"] = (int(m.group(1)), -1 if m.group(2).startswith("model") else int(m.group(3)),
                         m.group(5), m.group(6))
        elif ln == "first non-finite: none":
            out["nf"] = None
        m = re.match(r"\s*(\d+)\s+(\S+)", ln)
        if m and out.get("table"):
            # the layer number takes the first 5 columns; sparklines are blocks
            vals = re.findall(r"(?<!\S)(-?(?:nan|inf|\d[\d.]*(?:e[+-]\d+)?))(?!\S)", ln[5:])
            out["layers"].append([float(v) for v in vals])
        if ln.startswith("layer "):
            out["table"] = True
    return out


def check_run(path):
    w = subprocess.run([tool, "watch", "--once", path], capture_output=True, text=True)
    if w.returncode != 0 or w.stderr:
        fail(f"{path}: watch --once rc={w.returncode} stderr={w.stderr!r}")
        return
    if "\033" in w.stdout:
        fail(f"{path}: terminal codes in --once output")
    j = json.loads(subprocess.run([tool, "report", "--last", "--json", path],
                                  capture_output=True, text=True, check=True).stdout)
    got = parse(w.stdout)
    pl = j["placement"]
    if (got["verdict"], got["confidence"]) != (pl["verdict"], pl["confidence"]):
        fail(f"{path}: verdict {got['verdict']} ({got['confidence']}) != "
             f"{pl['verdict']} ({pl['confidence']})")
    if got["step"] != j["steps"]["analysed"]:
        fail(f"{path}: step {got['step']} != {j['steps']['analysed']}")
    L = len(j["stream"]["norm"]) - 1
    if len(got["layers"]) != L:
        fail(f"{path}: {len(got['layers'])} layer rows, the report has {L}")
        return
    for l, row in enumerate(got["layers"]):
        want = [j["stream"]["norm"][l + 1]] + [u["r"][l] for u in j["updates"]]
        want.append(j["gradients"]["stream"][l] if j.get("gradients") else None)
        for k, (a, b) in enumerate(zip(row, want)):
            if not close(a, b):
                fail(f"{path}: layer {l} column {k}: watch {a}, report {b}")
    nf = j["nonfinite"]
    want_nf = None if nf is None else (nf["step"], nf["layer"], nf["site"], nf["direction"])
    if got.get("nf", "missing") != want_nf:
        fail(f"{path}: first non-finite {got.get('nf')} != report's {want_nf}")
    return got


with tempfile.TemporaryDirectory() as d:
    runs = [("pre.h5", []), ("post.h5", ["--placement", "post"]),
            ("nan.h5", ["--nan-step", "4"])]
    for name, extra in runs:
        p = os.path.join(d, name)
        subprocess.run([tinygpt, "--steps", "6", "--layers", "3", "--d-model", "32", "--seq", "16",
                        "--log-every", "100", "--out", p] + extra,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        got = check_run(p)
        if got and name == "nan.h5" and (not got.get("nf") or got["nf"][0] != 4):
            fail(f"nan.h5: first non-finite {got.get('nf')}, injected at step 4")
        if got and name != "nan.h5" and got.get("nf") is not None:
            fail(f"{name}: a non-finite value in a clean run")
    bad = os.path.join(d, "bad.h5")
    with open(bad, "wb") as f:
        f.write(b"not an hdf5 file\n" * 10)
    for args in ([bad], [os.path.join(d, "missing.h5")]):
        r = subprocess.run([tool, "watch", "--once"] + args, capture_output=True, text=True)
        if r.returncode != 2 or r.stdout or len(r.stderr.splitlines()) != 1:
            fail(f"bad file {args}: rc={r.returncode} stdout={r.stdout!r} stderr={r.stderr!r}")
    r = subprocess.run([tool, "watch", "--interval", "0"], capture_output=True, text=True)
    if r.returncode != 2 or len(r.stderr.splitlines()) != 1:
        fail(f"--interval 0: rc={r.returncode} {r.stderr!r}")

print("ok" if not fails else f"{fails} failures")
sys.exit(1 if fails else 0)
