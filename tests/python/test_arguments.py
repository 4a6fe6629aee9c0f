"""Arguments the binding hands to C are checked before ctypes sees them:
a layer, sublayer, site, step or rank outside its C type raises ValueError
(ctypes would wrap it: layer 2**32 + 1 is layer 1), a bool where an
integer is wanted TypeError; a path must be str, bytes or os.PathLike
without a NUL; a complex or meta tensor is refused when it is given; a
reader call for a site outside the model raises ResdiagError."""
import os
import pathlib
import unittest

import torch

from common import Seq, encoder, tmpdir
import resdiag

D = 16
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
# Values a C int (int32) cannot hold, and what ctypes would make of each.
TOO_BIG_INT32 = (2**40, 2**32 + 1, 2**32, INT32_MAX + 1, -2**31 - 1)


def record(path, steps=1, **kw):
    torch.manual_seed(0)
    model = Seq(encoder(2, D, True), D, 8)
    x = torch.randn(2, 5, D, requires_grad=True)
    rec = resdiag.attach(model, path, **kw)
    for step in range(steps):
        with rec.step(step):
            model(x).sum().backward()
    rec.detach()
    return model


class ReaderIntegers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tmpdir()
        cls.path = cls.tmp.name + "/run.h5"
        record(cls.path)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_layer_and_sublayer_outside_int32(self):
        with resdiag.open(self.path) as run:
            self.assertIsNotNone(run.site(0, "stream_in", layer=1))
            calls = {
                "site": lambda l, s: run.site(0, "stream_in", layer=l, sublayer=s),
                "sketch": lambda l, s: run.sketch(0, "stream_in", layer=l, sublayer=s),
                "update": lambda l, s: run.update(0, l, s),
                "series": lambda l, s: run.series("stream_in", layer=l, sublayer=s),
                "callsite": lambda l, s: run.callsite("stream_in", layer=l, sublayer=s),
                "param": lambda l, s: run.param(0, l, run.info.layer_param_names[0]),
            }
            a = run.analyze()
            calls["analysis.sublayer"] = lambda l, s: a.sublayer(l, s)
            for name, call in calls.items():
                for v in TOO_BIG_INT32:
                    with self.subTest(call=name, layer=v), self.assertRaises(ValueError):
                        call(v, 0)
                    if name != "param":
                        with self.subTest(call=name, sublayer=v), self.assertRaises(ValueError):
                            call(0, v)

    def test_edges_of_int32_reach_the_library(self):
        # INT32_MAX is a C int: the library refuses it as a layer it lacks.
        with resdiag.open(self.path) as run:
            for v in (INT32_MAX, -2**31):
                with self.assertRaises(resdiag.ResdiagError) as cm:
                    run.site(0, "stream_in", layer=v)
                self.assertEqual(cm.exception.status, 3)  # RESDIAG_E_RANGE

    def test_step_index_outside_int64(self):
        with resdiag.open(self.path) as run:
            for v in (2**64, INT64_MAX + 1, -2**63 - 1):
                for call in (lambda: run.site(v, "stream_in"), lambda: run.sketch(v, "stream_in"),
                             lambda: run.update(v, 0, 0), lambda: run.analyze(v),
                             lambda: run.param(v, 0, run.info.layer_param_names[0])):
                    with self.subTest(step=v), self.assertRaises(ValueError):
                        call()
            # 2**64 would wrap to step index 0, which is there
            self.assertIsNotNone(run.site(0, "stream_in"))

    def test_site_and_field_numbers_outside_int32(self):
        with resdiag.open(self.path) as run:
            # site 2**32 would wrap to 0 (stream_in), field 2**32 to 0 (frob)
            with self.assertRaises(ValueError):
                run.site(0, 2**32)
            with self.assertRaises(ValueError):
                run.series("stream_in", field=2**32)

    def test_bools_are_no_integers(self):
        # True == 1 to Python; as a layer, step or direction it is a mistake.
        with resdiag.open(self.path) as run:
            with self.assertRaises(TypeError):
                run.site(0, "stream_in", layer=True)
            with self.assertRaises(TypeError):
                run.site(False, "stream_in")
            with self.assertRaises(TypeError):
                run.series("stream_in", sublayer=True)
            with self.assertRaises(ValueError):
                run.site(0, "stream_in", direction=True)
            with self.assertRaises(TypeError):
                run.site(0, "stream_in", layer=1.0)

    def test_callsite_outside_the_model_raises_like_the_others(self):
        with resdiag.open(self.path) as run:
            with self.assertRaises(resdiag.ResdiagError) as site_err:
                run.site(0, "stream_in", layer=99)
            for kw in ({"layer": 99}, {"layer": -1}, {"sublayer": 99}):
                with self.subTest(**kw), self.assertRaises(resdiag.ResdiagError) as cm:
                    run.callsite("stream_in", **kw)
                self.assertEqual(cm.exception.status, site_err.exception.status)
            with self.assertRaises(resdiag.ResdiagError):
                run.callsite(12)  # no site has the number 12
            # a block site in the model, and a model site (layer not read)
            self.assertIn("input", run.callsite("stream_in", layer=1))
            self.assertIsInstance(run.callsite("logits", layer=99), str)


class RecorderIntegers(unittest.TestCase):
    def test_observe_and_steps_outside_their_types(self):
        torch.manual_seed(0)
        model = Seq(encoder(2, D, True), D, 8)
        with tmpdir() as tmp:
            rec = resdiag.attach(model, tmp + "/run.h5", backward=False)
            with self.assertRaises(ValueError):
                rec.begin_step(2**63)
            with self.assertRaises(TypeError):
                rec.begin_step(True)
            t = torch.randn(5, D)
            with rec.step(0):
                for v in TOO_BIG_INT32:
                    with self.assertRaises(ValueError):
                        rec.observe(t, "stream_in", layer=v)
                    with self.assertRaises(ValueError):
                        rec.observe(t, "stream_in", sublayer=v)
                with self.assertRaises(TypeError):
                    rec.observe(t, "stream_in", layer=True)
            rec.detach()
            self.assertEqual(rec.errors, 0)
            with resdiag.open(tmp + "/run.h5") as run:
                # nothing reached layer 0's or 1's stream_in from the bad calls
                self.assertIsNone(run.site(0, "stream_in", layer=0))
                self.assertIsNone(run.site(0, "stream_in", layer=1))

    def test_attach_keywords_outside_their_types(self):
        torch.manual_seed(0)
        model = Seq(encoder(2, D, True), D, 8)
        bad = {"rank": 2**32, "world_size": 2**32 + 1, "record_every": 2**64 + 1,
               "record_first": -2**63 - 1, "sketch_size": 2**32 + 16, "layer_first": 2**32,
               "n_layers": 2**32 + 2, "record_rank_every": 2**32 + 1, "compression": 2**32 + 1}
        with tmpdir() as tmp:
            for key, value in bad.items():
                with self.subTest(key=key), self.assertRaises(ValueError):
                    resdiag.attach(model, tmp + "/run.h5", **{key: value})
                self.assertFalse(os.path.exists(tmp + "/run.h5"), key)
            with self.assertRaises(TypeError):
                resdiag.attach(model, tmp + "/run.h5", rank=True)


class Paths(unittest.TestCase):
    def test_path_must_be_a_path(self):
        torch.manual_seed(0)
        model = Seq(encoder(2, D, True), D, 8)
        with tmpdir() as tmp:
            cwd = os.getcwd()
            os.chdir(tmp)
            try:
                for bad in (None, 3, 2.5):
                    with self.subTest(path=bad), self.assertRaises(TypeError):
                        resdiag.attach(model, bad)
                    with self.subTest(path=bad), self.assertRaises(TypeError):
                        resdiag.open(bad)
                self.assertEqual(os.listdir(tmp), [])  # no file named "None"
            finally:
                os.chdir(cwd)

    def test_nul_in_a_path(self):
        torch.manual_seed(0)
        model = Seq(encoder(2, D, True), D, 8)
        with tmpdir() as tmp:
            with self.assertRaises(ValueError):
                resdiag.attach(model, tmp + "/s2.h5\x00evil")
            with self.assertRaises(ValueError):
                resdiag.attach(model, os.fsencode(tmp) + b"/s2.h5\x00evil")
            self.assertEqual(os.listdir(tmp), [])  # s2.h5 was not made
            record(tmp + "/s2.h5")
            with self.assertRaises(ValueError):
                resdiag.open(tmp + "/s2.h5\x00evil")
            with self.assertRaises(ValueError):
                resdiag.open(pathlib.Path(tmp) / "s2.h5\x00evil")

    def test_str_bytes_and_pathlike(self):
        with tmpdir() as tmp:
            record(pathlib.Path(tmp) / "p.h5")
            record(os.fsencode(tmp) + b"/b.h5")
            for p in (pathlib.Path(tmp) / "p.h5", os.fsencode(tmp) + b"/b.h5", tmp + "/p.h5"):
                with resdiag.open(p) as run:
                    self.assertEqual(run.steps(), [0])
                    self.assertIsInstance(run.path, str)


class Tensors(unittest.TestCase):
    def observe_one(self, t, **kw):
        """rec.observe(t) in a recorded step: (what it raised, the recorder)."""
        torch.manual_seed(0)
        model = Seq(encoder(2, D, True), D, 8)
        with tmpdir() as tmp:
            rec = resdiag.attach(model, tmp + "/run.h5", backward=False, **kw)
            raised = None
            with rec.step(0):
                try:
                    rec.observe(t, "stream_in", layer=1)
                except Exception as e:  # noqa: BLE001 - the test looks at it
                    raised = e
            rec.detach()
            with resdiag.open(tmp + "/run.h5") as run:
                seen = run.site(0, "stream_in", layer=1)
            return raised, rec, seen

    def test_complex_is_refused(self):
        t = torch.randn(5, D, dtype=torch.complex64)
        for mode in ("never", "always"):
            raised, rec, seen = self.observe_one(t, device_stats=mode)
            with self.subTest(device_stats=mode):
                self.assertIsInstance(raised, TypeError)
                self.assertIn("complex", str(raised))
                self.assertIsNone(seen)  # not its real part either
                self.assertEqual(rec.errors, 0)

    def test_meta_is_refused_when_given(self):
        t = torch.empty(5, D, device="meta")
        raised, rec, seen = self.observe_one(t)
        self.assertIsInstance(raised, ValueError)
        self.assertIn("meta", str(raised))
        # refused at observe(): the step's end had nothing of it to fail on
        self.assertEqual(rec.errors, 0, rec.first_error)
        self.assertIsNone(seen)


if __name__ == "__main__":
    unittest.main()
