"""The device path (attach(device_stats="always"): torch ops on the tensor's
device, one submission per step) against the C kernel path, on CPU tensors.

- Partials: every member against resdiag_partial_compute (the C kernel, the
  reference) within the documented bound plus the reference's own, with
  float32 and float64 accumulation, for f32, bf16, f16, strided views,
  NaN/Inf, one row and many rows; the exact members are equal.
- Recorded fields: a model recorded through each path gives the same
  fields (exact ones equal), update ratios, parameter gradients, call order
  and verdict, for a float32 and a bfloat16 model, and for one token.
- Sketches: linear across the paths, sk(x + f) = sk(x) + sk(f) with x
  through the C kernel and f, x + f through the device path; a tensor
  shard's sketch by its global columns on both paths.
- One read for consecutive sites of one tensor, again after an in-place
  change.
- No host synchronization: no .item(), .cpu(), .tolist(), .numpy(),
  bool()/float()/int() of a tensor, .to("cpu") or torch.cuda.synchronize
  from the first hook until the step ends (counted by patching them).
"""
import ctypes
import math
import unittest

import torch

from common import Seq, encoder, rel, tmpdir
import resdiag
from resdiag import _device, _lib, _tensor
from resdiag._lib import lib
import test_device as reductions

D = 48


def c_partial(rec, t, row0=0):
    """The C kernel's partial of t (resdiag_partial_compute) as a dict."""
    out = (ctypes.c_double * _device.PARTIAL_DOUBLES)()
    view, owner = _tensor.as_2d(t)
    st = lib.resdiag_partial_compute(rec._rd, view, row0, out, None)
    assert st == _lib.OK, _lib.strerror(st)
    return list(out)


def rec_for(tmp, d=D, **kw):
    model = Seq(encoder(1, d, True), d, 8)
    return resdiag.attach(model, tmp + "/run.h5", overwrite=True, **kw)


class AgainstTheKernel(unittest.TestCase):
    def compare(self, rec, x, acc, row0, why):
        parts = rec._partials
        xr = _device.as_rows(x)
        if acc == torch.float32:
            got, _ = reductions.compute_f32(parts, xr, row0)
        else:
            got, _ = parts.compute(xr, row0)
        got = got.tolist()
        ref_c = c_partial(rec, x, row0)
        k = lib.resdiag_sketch_size(rec._rd)
        ref = reductions.reference(x, lambda *a: _layout(rec, *a), row0)
        b = reductions.bounds(ref, reductions.U32 if acc == torch.float32 else reductions.U64)
        # The reference's own bound: each row sum within 1.4e-6 of the sum of
        # its |terms| (doc/PARTIAL.md), taken here as 4e-6 of each member's scale.
        c_tol = 4e-6
        qmax = float(ref["q"].max()) if ref["rows"] else 0.0
        scale = {"sumsq": ref["sumsq"], "norm_mean": float(ref["n"].max()),
                 "norm_min": float(ref["n"].max()), "norm_max": float(ref["n"].max()),
                 "mean_mean": qmax, "rms_mean": qmax, "std_mean": qmax}
        idx = _device.INDEX
        for name in ("rows", "cols", "nan_count", "inf_count", "absmax", "ratio_sum",
                     "ratio_rows"):
            self.assertEqual(got[idx[name]], ref_c[idx[name]], (why, name))
        a, c = got[idx["absmax_col"]], ref_c[idx["absmax_col"]]
        self.assertTrue(a == c or (math.isnan(a) and math.isnan(c)), (why, a, c))
        for name in ("sumsq", "norm_mean", "norm_min", "norm_max", "mean_mean", "rms_mean",
                     "std_mean"):
            tol = b[name] + c_tol * scale[name] + 1e-300
            self.assertLessEqual(abs(got[idx[name]] - ref_c[idx[name]]), tol, (why, name))
        for name, sc in (("norm", float(ref["n"].max())), ("mean", qmax), ("rms", qmax),
                         ("std", qmax)):
            sg = math.sqrt(got[idx[name + "_m2"]] / ref["rows"])
            sc_ = math.sqrt(ref_c[idx[name + "_m2"]] / ref["rows"])
            self.assertLessEqual(abs(sg - sc_), b[name + "_std"] + c_tol * sc + 1e-300,
                                 (why, name + "_m2"))
        s0 = _device.SKETCH0
        for m in range(k):
            tol = float(b["sketch"][m]) + c_tol * float(ref["sketch_abs"][m]) + 1e-300
            self.assertLessEqual(abs(got[s0 + m] - ref_c[s0 + m]), tol, (why, "sketch", m))

    def test_partials_match_the_kernel(self):
        with tmpdir() as tmp:
            rec = rec_for(tmp, device_stats="always")
            for x, why in reductions.cases():
                for acc in (torch.float32, torch.float64):
                    self.compare(rec, x, acc, 5, "%s, %s" % (why, acc))
            rec.detach()

    def test_no_rows(self):
        with tmpdir() as tmp:
            rec = rec_for(tmp, device_stats="always")
            got, _ = rec._partials.compute(torch.zeros(0, D), 0)
            ref = c_partial(rec, torch.zeros(0, D))
            for a, c, name in zip(got.tolist(), ref, _device.HEAD):
                self.assertTrue(a == c or (math.isnan(a) and math.isnan(c)), (name, a, c))
            rec.detach()


def _layout(rec, col0, n_cols, row0, n_rows):
    return resdiag.recorder._sketch_layout(rec._rd, col0, n_cols, row0, n_rows)


def record(mode, dtype=torch.float32, batch=(3, 7), steps=2, tmp=None):
    """Trains a 2-layer pre-norm encoder (d = 32, no dropout) a few steps
    with one path; returns the run's path."""
    torch.manual_seed(9)
    model = Seq(encoder(2, 32, True), 32, 16).to(dtype).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    torch.manual_seed(10)
    xs = [torch.randn(*batch, 32).to(dtype) for _ in range(steps)]
    path = "%s/%s.h5" % (tmp, mode)
    rec = resdiag.attach(model, path, device_stats=mode)
    for step, x in enumerate(xs):
        with rec.step(step):
            model(x).float().pow(2).mean().backward()
        opt.step()
        opt.zero_grad()
    rec.detach()
    assert rec.errors == 0, rec.first_error
    return path


EXACT = ("rows", "cols", "absmax", "absmax_col", "nan_count", "inf_count", "call_seq")


class RecordedFields(unittest.TestCase):
    def same_runs(self, dtype, batch):
        with tmpdir() as tmp:
            a, b = record("never", dtype, batch, tmp=tmp), record("always", dtype, batch, tmp=tmp)
            with resdiag.open(a) as ra, resdiag.open(b) as rb:
                self.assertEqual(ra.verdict(), rb.verdict())
                self.observed = n = 0
                for step in range(2):
                    for l in range(2):
                        for s in range(2):
                            for site in ("stream_in", "norm_in", "norm_out", "branch_out",
                                         "stream_out"):
                                for d in ("forward", "backward"):
                                    fa, fb = ra.site(step, site, l, s, d), rb.site(step, site, l, s, d)
                                    self.fields_match(fa, fb, (step, l, s, site, d))
                                    n += 1
                            ua, ub = ra.update(step, l, s), rb.update(step, l, s)
                            for k in ua:
                                self.assertLess(rel(ua[k], ub[k]), 1e-5, (step, l, s, k))
                        for p in ("attn.wo", "mlp.w1", "mlp.w2"):
                            self.fields_match(ra.param(step, l, p), rb.param(step, l, p),
                                              (step, l, p))
                    for site in ("embed_out", "final_norm_in", "final_norm_out", "logits"):
                        for d in ("forward", "backward"):
                            self.fields_match(ra.site(step, site, -1, 0, d),
                                              rb.site(step, site, -1, 0, d), (step, site, d))
                self.assertEqual(n, 80)
                self.assertGreater(self.observed, 90)  # of 108: some backward sites are aliases

    def fields_match(self, fa, fb, why):
        self.assertEqual(fa is None, fb is None, why)
        if fa is None:
            return
        self.observed += 1
        self.assertEqual(set(fa), set(fb))
        for k, va in fa.items():
            vb = fb[k]
            if k in EXACT:
                self.assertTrue(va == vb or (math.isnan(va) and math.isnan(vb)), (why, k, va, vb))
            elif k.endswith("_std") or k == "tok_mean_mean":
                # spreads and means near 0: relative to the tensor's RMS
                self.assertLessEqual(abs(va - vb), 1e-5 * fa["tok_rms_mean"] + 1e-300,
                                     (why, k, va, vb))
            else:
                self.assertLess(rel(va, vb), 1e-5, (why, k, va, vb))

    def test_float32_model(self):
        self.same_runs(torch.float32, (3, 7))

    def test_bfloat16_model(self):
        self.same_runs(torch.bfloat16, (3, 7))

    def test_one_token(self):
        self.same_runs(torch.float32, (1, 1))

    def test_nan_and_inf_recorded(self):
        x = torch.randn(5, 32)
        x[0, 1], x[2, 3], x[4, 4] = math.nan, math.inf, -math.inf
        with tmpdir() as tmp:
            got = {}
            for mode in ("never", "always"):
                model = Seq(encoder(1, 32, True), 32, 8)
                rec = resdiag.attach(model, "%s/%s.h5" % (tmp, mode), device_stats=mode)
                with rec.step(0):
                    self.assertTrue(rec.observe(x[:, ::1], "stream_in"))
                    self.assertTrue(rec.observe(x.t().contiguous().t(), "norm_in"))
                rec.detach()
                with resdiag.open("%s/%s.h5" % (tmp, mode)) as run:
                    got[mode] = (run.site(0, "stream_in"), run.site(0, "norm_in"))
            self.observed = 0
            for fa, fb in zip(got["never"], got["always"]):
                self.assertEqual((fb["nan_count"], fb["inf_count"]), (1, 2))
                self.fields_match(fa, fb, "nan/inf")


class OneReadPerTensor(unittest.TestCase):
    """Consecutive sites of one tensor are read once, on either path, and
    a tensor changed in place in between is read again."""

    def test_same_tensor_read_once(self):
        for mode in ("never", "always"):
            x = torch.randn(4, 32)
            with tmpdir() as tmp:
                rec = resdiag.attach(Seq(encoder(1, 32, True), 32, 8), tmp + "/run.h5",
                                     device_stats=mode)
                calls = []
                saved = (lib.resdiag_partial_compute, rec._partials.compute if rec._partials
                         else None)

                def c_compute(*a):
                    calls.append("c")
                    return saved[0](*a)

                def torch_compute(*a, **kw):
                    calls.append("torch")
                    return saved[1](*a, **kw)
                lib.resdiag_partial_compute = c_compute
                if rec._partials:
                    rec._partials.compute = torch_compute
                try:
                    with rec.step(0):
                        self.assertTrue(rec.observe(x, "stream_in"))
                        self.assertTrue(rec.observe(x, "norm_in"))      # the same: not read
                        x.mul_(2)
                        self.assertTrue(rec.observe(x, "norm_out"))     # changed: read
                        self.assertTrue(rec.observe(x.clone(), "stream_out"))  # another tensor
                finally:
                    lib.resdiag_partial_compute = saved[0]
                rec.detach()
                self.assertEqual(len(calls), 3, (mode, calls))
                with resdiag.open(tmp + "/run.h5") as run:
                    f = {s: run.site(0, s)["frob"] for s in ("stream_in", "norm_in", "norm_out",
                                                            "stream_out")}
                self.assertEqual(f["stream_in"], f["norm_in"])
                self.assertLess(rel(f["norm_out"], 2 * f["stream_in"]), 1e-6)
                self.assertLess(rel(f["stream_out"], f["norm_out"]), 1e-6)


class Sketches(unittest.TestCase):
    def test_linear_across_paths(self):
        torch.manual_seed(4)
        x, f = torch.randn(6, 5, 32), torch.randn(6, 5, 32) * 0.3
        with tmpdir() as tmp:
            model = Seq(encoder(1, 32, True), 32, 8)
            rec = resdiag.attach(model, tmp + "/run.h5", device_stats="always")
            with rec.step(0):
                rec.device_stats = "never"
                rec.observe(x, "stream_in")           # the C kernel
                rec.device_stats = "always"
                rec.observe(f, "branch_out")          # torch ops
                rec.observe(x + f, "stream_out")      # torch ops
            rec.detach()
            self.assertEqual(rec.errors, 0, rec.first_error)
            with resdiag.open(tmp + "/run.h5") as run:
                sx = run.sketch(0, "stream_in")
                sf = run.sketch(0, "branch_out")
                sxf = run.sketch(0, "stream_out")
            self.assertEqual(len(sx), 16)
            # within float32's rounding of x + f (each sum of |terms| below 2 * 30 * 1.5)
            for a, b, c in zip(sx, sf, sxf):
                self.assertLess(abs(a + b - c), 1e-5 * 100, (a, b, c))
            self.assertGreater(max(abs(a) for a in sx), 1.0)  # not trivially zero


class TensorShards(unittest.TestCase):
    def test_shard_sketched_by_global_columns(self):
        """A tensor-parallel shard's sketch uses the global columns, and its
        column of ABSMAX is placed in d_model, on both paths alike."""
        torch.manual_seed(6)
        x = torch.randn(5, 16)
        x[3, 2] = 9.0
        got = {}
        with tmpdir() as tmp:
            for mode in ("never", "always"):
                path = "%s/%s.h5" % (tmp, mode)
                rec = resdiag.attach(Seq(encoder(1, 32, True), 32, 8), path, rank=0,
                                     world_size=2, split="tensor", shard_cols=16,
                                     shard_col_offset=16, device_stats=mode)
                with rec.step(0):
                    self.assertTrue(rec.observe(x, "branch_out"))
                rec.detach()
                self.assertEqual(rec.errors, 0, rec.first_error)
                with resdiag.open(path) as run:
                    got[mode] = (run.site(0, "branch_out"), run.sketch(0, "branch_out"))
        (fa, sa), (fb, sb) = got["never"], got["always"]
        self.assertEqual(fa["absmax_col"], 18)
        self.assertEqual(fb["absmax_col"], 18)
        for a, b in zip(sa, sb):
            self.assertLess(abs(a - b), 1e-5, (sa, sb))


class NoHostSync(unittest.TestCase):
    NAMES = ("item", "cpu", "tolist", "numpy", "__bool__", "__float__", "__int__", "__index__")

    def count_calls(self):
        counts = {}
        saved = {}

        def wrap(name, fn):
            def counted(*a, **kw):
                counts[name] = counts.get(name, 0) + 1
                return fn(*a, **kw)
            return counted
        for name in self.NAMES:
            saved[name] = getattr(torch.Tensor, name)
            setattr(torch.Tensor, name, wrap(name, saved[name]))
        saved["to"] = torch.Tensor.to

        def to(t, *a, **kw):
            dev = kw.get("device", a[0] if a else None)
            if isinstance(dev, (str, torch.device)) and str(dev).startswith("cpu"):
                counts["to cpu"] = counts.get("to cpu", 0) + 1
            return saved["to"](t, *a, **kw)
        torch.Tensor.to = to
        if hasattr(torch, "cuda"):
            saved["sync"] = torch.cuda.synchronize
            torch.cuda.synchronize = wrap("cuda.synchronize", saved["sync"])

        def restore():
            for name in self.NAMES + ("to",):
                setattr(torch.Tensor, name, saved[name])
            if "sync" in saved:
                torch.cuda.synchronize = saved["sync"]
        return counts, restore

    def step_counts(self, mode):
        """Calls of the patched functions during one step's forward and
        backward (hooks included, end_step excluded); mode None: the model
        without resdiag."""
        torch.manual_seed(2)
        model = Seq(encoder(2, 32, False), 32, 16).train()
        x = torch.randn(2, 5, 32)
        if mode is None:
            model(x).pow(2).mean().backward()
            counts, restore = self.count_calls()
            try:
                model(x).pow(2).mean().backward()
            finally:
                restore()
            return counts
        with tmpdir() as tmp:
            rec = resdiag.attach(model, tmp + "/run.h5", device_stats=mode)
            with rec.step(0):
                model(x).pow(2).mean().backward()  # warms torch's caches
            model.zero_grad()
            rec.begin_step(1)
            counts, restore = self.count_calls()
            try:
                model(x).pow(2).mean().backward()
                rec.observe(x[0], "stream_in", layer=1, sublayer=1)
                during = dict(counts)
            finally:
                restore()
            self.assertGreater(len(rec._batch), 0)
            rec.end_step()
            rec.detach()
            self.assertEqual(rec.errors, 0, rec.first_error)
        return during

    def test_no_sync_before_step_end(self):
        self.assertEqual(self.step_counts(None), {})  # the model itself calls none
        self.assertEqual(self.step_counts("always"), {})

    def test_the_counter_counts(self):
        counts, restore = self.count_calls()
        try:
            t = torch.ones(2)
            t.sum().item()
            bool(t.any())
            t.to("cpu")
        finally:
            restore()
        self.assertEqual(counts, {"item": 1, "__bool__": 1, "to cpu": 1})


if __name__ == "__main__":
    unittest.main()
