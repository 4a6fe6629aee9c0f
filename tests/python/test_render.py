"""The pictures of the Python binding are the library's: Analysis.to_html()
is `resdiag report --html`'s page (the verdict of to_json in words, the
figures, the heat maps while the run is open) and Analysis.svg(figure) the
figure of `resdiag plot`, whose axes and curve are checked against the
numbers of to_json, mapped through the axis the SVG declares."""
import os
import subprocess
import unittest
import xml.etree.ElementTree as ET

import torch
import torch.nn as nn

from common import Seq, encoder, tmpdir
import resdiag

D, B, T, V, L = 32, 4, 8, 32, 4
SVG = "{http://www.w3.org/2000/svg}"

# doc/REPORT-JSON.md's verdict names and the words the page gives them
HUMAN = {"pre": "pre-norm", "post": "post-norm", "sandwich": "sandwich (Peri-LN)",
         "deepnorm": "deepnorm", "mixed": "mixed", "parallel": "parallel block",
         "none": "no norm", "cannot_tell": "cannot tell", "inconsistent": "inconsistent",
         "post_family": "post-norm family (post-norm or deepnorm)",
         "pre_or_sandwich": "pre-norm or sandwich"}


def record(path, norm_first, steps):
    torch.manual_seed(3)
    model = Seq(encoder(L, D, norm_first), D, V)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    rec = resdiag.attach(model, path, overwrite=True)
    for step in range(steps):
        with rec.step(step):
            x, target = torch.randn(B, T, D), torch.randint(0, V, (B, T))
            nn.functional.cross_entropy(model(x).reshape(-1, V), target.reshape(-1)).backward()
        opt.step()
        opt.zero_grad()
    rec.detach()


def axis(g, name):
    """(lo, hi, p0, p1, log) of the plot's axis `name` ("x" or "y")."""
    return tuple(float(g.get("data-%s-%s" % (name, k))) for k in ("lo", "hi", "p0", "p1")) + (
        g.get("data-%s-scale" % name) == "log",)


def to_pixel(v, ax):
    lo, hi, p0, p1, log = ax
    assert not log
    return p0 + (v - lo) / (hi - lo) * (p1 - p0)


class Render(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tmpdir()
        cls.dir = cls.tmp.name
        cls.path = os.path.join(cls.dir, "run.h5")
        record(cls.path, norm_first=True, steps=3)

    def test_html_holds_the_verdict_and_the_figures(self):
        with resdiag.open(self.path) as run:
            a = run.analyze()
            js = a.json()
            page = a.to_html()
            growth = a.svg("growth")
        root = ET.fromstring(page.split("\n", 1)[1])  # well-formed XML after the doctype
        body = {e.get("id"): e for e in root.iter() if e.get("id")}
        card = body["verdict"]
        verdict = "".join(next(p for p in card.iter("p") if p.get("class") == "verdict").itertext())
        want = HUMAN[js["placement"]["verdict"]]
        self.assertTrue(verdict.startswith("Placement: " + want), verdict)
        self.assertIn("confidence " + js["placement"]["confidence"], verdict)
        self.assertIn(self.path, "".join(root.find("head").find("title").itertext()))
        for fig in ("growth", "updates", "gradients", "heatmaps"):
            self.assertIn(fig, body, "no figure %s" % fig)
        # the page's figure is the one svg() draws
        self.assertEqual(body["growth"][0].tag, SVG + "svg")
        self.assertIn(growth, page)

    def test_html_without_the_open_run_has_no_heat_maps(self):
        with resdiag.open(self.path) as run:
            a = run.analyze()
        page = a.to_html(name="a <name> & more")  # the run is closed now
        root = ET.fromstring(page.split("\n", 1)[1])
        ids = {e.get("id") for e in root.iter() if e.get("id")}
        self.assertIn("growth", ids)
        self.assertNotIn("heatmaps", ids)
        self.assertEqual("".join(root.find("head").find("title").itertext()),
                         "resdiag report: a <name> & more")

    def test_growth_svg_draws_the_stream_norms(self):
        with resdiag.open(self.path) as run:
            a = run.analyze()
        norms = a.json()["stream"]["norm"]  # ||x_k||, k = 0..L
        self.assertEqual(len(norms), L + 1)
        svg = ET.fromstring(a.svg("growth"))
        self.assertEqual(svg.tag, SVG + "svg")
        g = svg.find(SVG + "g")
        ax, ay = axis(g, "x"), axis(g, "y")
        # the depth axis spans exactly the layers; the norm axis holds every norm
        self.assertEqual((ax[0], ax[1]), (0, L))
        self.assertLessEqual(ay[0], min(norms))
        self.assertGreaterEqual(ay[1], max(norms))
        xt = [float(t.get("data-v")) for t in g.find(SVG + "g[@class='xticks']").iter(SVG + "text")]
        self.assertEqual(xt, [float(k) for k in range(L + 1)])
        yt = [t for t in g.find(SVG + "g[@class='yticks']").iter(SVG + "text")]
        self.assertGreaterEqual(len(yt), 3)
        for t in yt:  # each label says its value and sits where the axis maps it
            v = float(t.get("data-v"))
            self.assertAlmostEqual(float(t.text), v, places=12)
            self.assertTrue(ay[0] - 1e-12 <= v <= ay[1] + 1e-12)
            self.assertAlmostEqual(float(t.get("y")), to_pixel(v, ay) + 11 * 0.35, delta=0.01)
        steps = [float(yt[i + 1].get("data-v")) - float(yt[i].get("data-v"))
                 for i in range(len(yt) - 1)]
        self.assertAlmostEqual(min(steps), max(steps), delta=1e-9 * max(steps))
        line = next(p for p in g.iter(SVG + "polyline") if p.get("data-key") == "stream.norm")
        points = [tuple(map(float, xy.split(","))) for xy in line.get("points").split()]
        self.assertEqual(len(points), L + 1)
        for k, (px, py) in enumerate(points):
            self.assertAlmostEqual(px, to_pixel(k, ax), delta=0.002)
            self.assertAlmostEqual(py, to_pixel(norms[k], ay), delta=0.002)

    def test_svg_is_the_tools_figure_and_says_when_there_is_no_data(self):
        with resdiag.open(self.path) as run:
            a = run.analyze()
        self.assertEqual(resdiag.FIGURES, ("growth", "updates", "gradients", "loss"))
        for fig in ("growth", "updates", "gradients"):
            ET.fromstring(a.svg(fig))
        # the run declares "loss" (attach's default) but never gave one: no loss curve
        self.assertIsNone(a.svg("loss"))
        with self.assertRaises(ValueError):
            a.svg("accuracy")
        tool = os.environ.get("RESDIAG_TOOL")
        if tool:
            out = os.path.join(self.dir, "g.svg")
            subprocess.run([tool, "plot", "--what", "updates", "-o", out, self.path], check=True)
            with open(out, encoding="utf-8") as f:
                self.assertEqual(f.read(), a.svg("updates"))
        # an inference run records no gradients: no gradient figure
        path = os.path.join(self.dir, "eval.h5")
        torch.manual_seed(4)
        model = Seq(encoder(L, D, True), D, V).eval()
        rec = resdiag.attach(model, path, overwrite=True, backward=False)
        with torch.no_grad(), rec.step(0):
            model(torch.randn(B, T, D))
        rec.detach()
        with resdiag.open(path) as run:
            self.assertIsNone(run.analyze().svg("gradients"))


if __name__ == "__main__":
    unittest.main()
