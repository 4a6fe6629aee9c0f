"""Run.to_pandas() and Run.to_xarray() (python/resdiag/frames.py,
doc/PYTHON.md) against the reader's own values: a tinygpt run of schema 3
(and one of schema 1) read back value by value through Run.site, .param,
.update, .metric and .steps (the C reader's per-slot calls), which the
tidy frames and the labelled dataset must hold exactly, no more rows and
no fewer. Without pandas or xarray they raise an ImportError naming the
Debian and the pip package (checked in a child Python that cannot import
them); the whole test is skipped (exit 77) when this Python has neither.

    test_frames.py TINYGPT"""
import math
import subprocess
import sys
import unittest

try:
    import pandas as pd
    import xarray  # noqa: F401
except ImportError as exc:
    print("test_frames: %s (apt-get install python3-pandas python3-xarray): skipped" % exc,
          file=sys.stderr)
    sys.exit(77)

import resdiag
from tinygpt_runs import recorded

TINYGPT = sys.argv.pop(1) if len(sys.argv) > 1 else None
LAYERS, STEPS, EVERY = 2, 6, 2


def same(a, b):
    return a == b or (math.isnan(a) and math.isnan(b))


class Frames(unittest.TestCase):
    FLAGS = ()  # the default: schema 3

    @classmethod
    def setUpClass(cls):
        recorded(cls, TINYGPT, LAYERS, STEPS, EVERY)
        cls.rf = resdiag.open(cls.path)
        cls.steps = cls.rf.steps()
        cls.sites = [s for s, v in resdiag.SITES.items()
                     if v >= 16 or v < (8 if cls.rf.info.schema_version >= 3 else 5)]

    @classmethod
    def tearDownClass(cls):
        cls.rf.close()
        cls.tmp.cleanup()

    def expected_sites(self):
        """{(step, layer, sublayer, site, direction, field): value} of every
        observed tensor, by Run.site (once per class)."""
        if type(self).__dict__.get("_sites") is not None:  # not the parent's
            return type(self)._sites
        info, want = self.rf.info, {}
        for i, step in enumerate(self.steps):
            for d in ("forward", "backward"):
                for site in self.sites:
                    model = resdiag.SITES[site] >= 16
                    where = [(None, None)] if model else [
                        (l, s) for l in range(info.n_layers) for s in range(info.n_sublayers)]
                    for l, s in where:
                        got = self.rf.site(i, site, l or 0, s or 0, d)
                        if got is None:
                            continue
                        sub = None if s is None else info.sublayer_names[s]
                        for f, v in got.items():
                            want[(step, l, sub, site, d, f)] = v
        type(self)._sites = want
        return want

    def test_sites_frame_is_the_readers_values(self):
        df = self.rf.to_pandas()
        self.assertEqual(list(df.columns),
                         ["step", "layer", "sublayer", "site", "direction", "field", "value"])
        want = self.expected_sites()
        self.assertGreater(len(want), 1000)
        self.assertTrue(any(k[1] is None for k in want))  # the model sites too
        got = {}
        for r in df.itertuples(index=False):
            key = (int(r.step), None if pd.isna(r.layer) else int(r.layer),
                   None if pd.isna(r.sublayer) else r.sublayer, r.site, r.direction, r.field)
            self.assertNotIn(key, got)
            got[key] = r.value
        self.assertEqual(set(got), set(want))
        for k, v in want.items():
            self.assertTrue(same(got[k], v), (k, got[k], v))
        # every slot, observed or not, without dropna
        info = self.rf.info
        slots = 2 * (info.n_layers * info.n_sublayers * (len(self.sites) - 4) + 4)
        self.assertEqual(len(self.rf.to_pandas(dropna=False)), len(self.steps) * slots * 18)

    def test_params_updates_metrics(self):
        info = self.rf.info
        params = self.rf.to_pandas("params")
        want = {}
        for i, step in enumerate(self.steps):
            for l in list(range(info.n_layers)) + [-1]:
                for name in info.layer_param_names if l >= 0 else info.model_param_names:
                    got = self.rf.param(i, l, name)
                    for f, v in (got or {}).items():
                        want[(step, None if l < 0 else l, name, f)] = v
        got = {(int(r.step), None if pd.isna(r.layer) else int(r.layer), r.param, r.field): r.value
               for r in params.itertuples(index=False)}
        self.assertEqual(len(got), len(params))
        self.assertEqual(set(got), set(want))
        self.assertTrue(all(same(got[k], v) for k, v in want.items()))

        updates = self.rf.to_pandas("updates")
        want = {(step, l, info.sublayer_names[s], f): v
                for i, step in enumerate(self.steps) for l in range(info.n_layers)
                for s in range(info.n_sublayers)
                for f, v in self.rf.update(i, l, s).items() if not math.isnan(v)}
        got = {(int(r.step), int(r.layer), r.sublayer, r.field): r.value
               for r in updates.itertuples(index=False)}
        self.assertGreater(len(want), 0)
        self.assertEqual(got, want)

        metrics = self.rf.to_pandas("metrics")
        want = {(step, m): v for m in info.metric_names
                for step, v in zip(self.steps, self.rf.metric(m)) if v is not None}
        got = {(int(r.step), r.metric): r.value for r in metrics.itertuples(index=False)}
        self.assertGreater(len(want), 0)
        self.assertEqual(got, want)
        with self.assertRaises(ValueError):
            self.rf.to_pandas("sketches")

    def test_xarray_dataset_is_labelled_with_the_readers_names(self):
        ds = self.rf.to_xarray()
        info = self.rf.info
        self.assertEqual(list(ds["step"].values), self.steps)
        self.assertEqual(list(ds["sublayer"].values), info.sublayer_names)
        self.assertEqual(list(ds["field"].values), list(resdiag.FIELDS))
        self.assertEqual(list(ds["param"].values), info.layer_param_names)
        self.assertEqual(list(ds["site"].values), [s for s in self.sites
                                                    if resdiag.SITES[s] < 16])
        self.assertEqual(ds["forward_site_stats"].dims,
                         ("step", "layer", "sublayer", "site", "field"))
        pos = {name: {v: k for k, v in enumerate(ds[name].values.tolist())}
               for name in ("step", "sublayer", "site", "model_site", "field")}
        for n, ((step, l, sub, site, d, f), v) in enumerate(self.expected_sites().items()):
            i, j = pos["step"][step], pos["field"][f]
            if l is None:
                x = ds[d + "_model_stats"].values[i, pos["model_site"][site], j]
            else:
                x = ds[d + "_site_stats"].values[i, l, pos["sublayer"][sub], pos["site"][site], j]
            self.assertTrue(same(float(x), v), (step, l, sub, site, d, f))
            if n % 97:
                continue  # and a sample by the coordinates' names
            if l is None:
                x = ds[d + "_model_stats"].sel(step=step, model_site=site, field=f)
            else:
                x = ds[d + "_site_stats"].sel(step=step, layer=l, sublayer=sub, site=site,
                                              field=f)
            self.assertTrue(same(float(x), v), (step, l, sub, site, d, f))
        m = info.metric_names[0]
        self.assertEqual([None if math.isnan(v) else v
                          for v in ds["metrics_values"].sel(metric=m).values],
                         self.rf.metric(m))

    def test_missing_pandas_or_xarray_names_the_package(self):
        code = ("import sys; sys.modules['pandas'] = sys.modules['xarray'] = None\n"
                "import resdiag\nr = resdiag.open(sys.argv[1])\n"
                "for call in (r.to_pandas, r.to_xarray):\n"
                "    try:\n        call()\n    except ImportError as e:\n        print(e)\n")
        out = subprocess.run([sys.executable, "-c", code, self.path], check=True,
                             capture_output=True, text=True).stdout.splitlines()
        self.assertEqual(len(out), 2, out)
        self.assertIn("apt-get install python3-pandas", out[0])
        self.assertIn("pip install pandas", out[0])
        self.assertIn("apt-get install python3-xarray", out[1])
        self.assertIn("pip install xarray", out[1])


class FramesSchema1(Frames):
    FLAGS = ("--file-schema", "1")


if __name__ == "__main__":
    unittest.main()
