#!/usr/bin/env bash
# test-metrics.sh - the trainer's loss on its way through resdiag: a real
# tinygpt run gives its loss with resdiag_step_metric; `report --json`
# must give back, at every recorded step, the loss tinygpt printed on its
# own stdout (an independent source: the trainer's printf, to its 6
# decimals); `plot --what loss` must draw exactly those values through its
# declared axes; the HTML page holds the figure and the text report the
# last value. (Runs without metrics: tests/unit/test-api.c.)
# Usage: test-metrics.sh RESDIAG TINYGPT
# Skipped (77) without python3.
set -u
tool=$1
tinygpt=$2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../helpers/tool-test-lib.sh"
py=$(command -v /usr/bin/python3 || command -v python3 || true)
if [ -z "$py" ]; then
    echo "no python3: skipped"
    exit 77
fi

# 13 steps, every one printed, every 3rd recorded: 0, 3, 6, 9, 12
"$tinygpt" --d-model 32 --heads 2 --seq 8 --batch 2 --seed 3 --threads 1 --layers 2 \
    --steps 13 --record-every 3 --log-every 1 --out "$dir/run.h5" >"$dir/tg.out" 2>"$dir/tg.err" \
    && pass || { cat "$dir/tg.err"; fail "tinygpt run"; }
expect_exit 0 "report --json" -- "$tool" report --json "$dir/run.h5"
cp "$dir/out" "$dir/report.json"
expect_exit 0 "plot --what loss" -- "$tool" plot --what loss -o "$dir/loss.svg" "$dir/run.h5"
expect_exit 0 "plot --what=loss to stdout" -- "$tool" plot --what=loss -o - "$dir/run.h5"
cmp -s "$dir/out" "$dir/loss.svg" && pass || fail "plot --what loss: stdout and file differ"
expect_exit 0 "report --html" -- "$tool" report --html "$dir/page.html" "$dir/run.h5"
expect_exit 0 "report (text)" -- "$tool" report "$dir/run.h5"
cp "$dir/out" "$dir/report.txt"

if "$py" - "$dir/tg.out" "$dir/report.json" "$dir/loss.svg" "$dir/page.html" \
    "$dir/report.txt" <<'PY'
import json, re, sys
import xml.etree.ElementTree as ET
tg_out, report, svg_path, page, text = sys.argv[1:]
printed = {int(m.group(1)): float(m.group(2))
           for m in re.finditer(r"^step +(\d+) loss (\S+)$", open(tg_out).read(), re.M)}
assert sorted(printed) == list(range(13)), sorted(printed)
r = json.load(open(report))
assert r["metric_steps"] == [0, 3, 6, 9, 12], r["metric_steps"]
loss = r["metrics"]["loss"]
assert list(r["metrics"]) == ["loss", "lr"], r["metrics"].keys()
# tinygpt's default: no warm-up, --lr 0.001 at every step
assert r["metrics"]["lr"] == [0.001] * 5, r["metrics"]["lr"]
for s, v in zip(r["metric_steps"], loss):
    # tinygpt prints %.6f: half a unit of the 6th decimal, plus the JSON's 9 digits
    assert abs(v - printed[s]) <= 5e-7 + 1e-8 * abs(v), (s, v, printed[s])

# the figure: one polyline whose points, through the plot's declared axes,
# are (step, loss) of every recorded step, in order
ns = {"s": "http://www.w3.org/2000/svg"}
root = ET.parse(svg_path).getroot()
plot = root.find(".//s:g[@class='plot']", ns)
ax = {k: float(plot.get("data-x-" + k)) for k in ("lo", "hi", "p0", "p1")}
ay = {k: float(plot.get("data-y-" + k)) for k in ("lo", "hi", "p0", "p1")}
assert plot.get("data-x-scale") == "linear" and plot.get("data-y-scale") == "linear"
inv = lambda a, p: a["lo"] + (p - a["p0"]) / (a["p1"] - a["p0"]) * (a["hi"] - a["lo"])
lines = root.findall(".//s:polyline[@data-key='metric.loss']", ns)
assert len(lines) == 1, len(lines)
pts = [tuple(map(float, p.split(","))) for p in lines[0].get("points").split()]
assert len(pts) == 5, pts
yspan = ay["hi"] - ay["lo"]
for (px, py_), s, v in zip(pts, r["metric_steps"], loss):
    assert abs(inv(ax, px) - s) <= 2e-3 * (ax["hi"] - ax["lo"]), (px, s)
    assert abs(inv(ay, py_) - v) <= 2e-3 * yspan, (py_, v)
    assert ay["lo"] <= v <= ay["hi"] and ax["lo"] <= s <= ax["hi"]

html = open(page).read()
assert '<figure id="loss">' in html and "data-key=\"metric.loss\"" in html
txt = open(text).read()
m = re.search(r"^Trainer's metrics \(last value given\): loss (\S+) at step 12, lr 0.001 at step 12$",
              txt, re.M)
assert m and abs(float(m.group(1)) - printed[12]) <= 1e-5 * abs(printed[12]) + 5e-7, m
PY
then pass; else fail "loss of report --json, plot --what loss, HTML and text against tinygpt's stdout"; fi

tool_test_finish
