"""Tensors reach C as they are where C can read them (no copy: the data
pointer, dtype and row stride of the tensor itself) and are copied
otherwise; either way the statistics equal torch's of the same values, for
float32, float64, bfloat16 and float16, contiguous and not. A bfloat16
encoder still gets the right verdict."""
import unittest

import torch

from common import Seq, encoder, rel, tmpdir
import resdiag
from resdiag import _tensor

D = 16
CODES = {torch.float32: 0, torch.float64: 1, torch.float16: 2, torch.bfloat16: 3}


def reference(t):
    """frob, per-token norm mean, absmax and its column, in float64."""
    m = t.detach().to(torch.float64).reshape(-1, t.shape[-1])
    absmax = float(m.abs().max())
    col = int((m.abs() == absmax).nonzero()[:, 1].min())  # first column holding it
    return {"frob": float(torch.linalg.vector_norm(m)),
            "tok_norm_mean": float(torch.linalg.vector_norm(m, dim=1).mean()),
            "absmax": absmax, "absmax_col": col, "rows": m.shape[0]}


class Views(unittest.TestCase):
    def test_contiguous_is_not_copied(self):
        for dt in CODES:
            t = torch.randn(3, 5, D).to(dt)
            v, owner = _tensor.as_2d(t)
            self.assertEqual(v.data, t.data_ptr(), dt)
            self.assertEqual((v.dtype, v.rows, v.cols, v.row_stride), (CODES[dt], 15, D, D))

    def test_strided_rows_are_not_copied(self):
        wide = torch.randn(4, 6, 3 * D)
        t = wide[:, :, D:2 * D]  # every row D wide, 3*D apart
        v, owner = _tensor.as_2d(t)
        self.assertEqual(v.data, t.data_ptr())
        self.assertEqual((v.rows, v.cols, v.row_stride), (24, D, 3 * D))

    def test_other_layouts_are_copied(self):
        base = torch.randn(6, 4, D)
        for t, why in ((base.transpose(0, 1), "(T,B,C) seen as (B,T,C)"),
                       (torch.randn(D, 9).t(), "columns not adjacent"),
                       (torch.randn(1, D).expand(5, D), "rows overlap"),
                       (torch.arange(3 * D).reshape(3, D), "integer dtype")):
            v, owner = _tensor.as_2d(t)
            self.assertNotEqual(v.data, t.data_ptr(), why)
            self.assertEqual(v.data, owner.data_ptr(), why)
            self.assertTrue(owner.is_contiguous(), why)
            self.assertEqual((v.rows, v.cols, v.row_stride), (owner.numel() // t.shape[-1],
                                                              t.shape[-1], t.shape[-1]), why)
            # The copy holds the rows in the tensor's logical order.
            self.assertTrue(torch.equal(owner.reshape(-1, t.shape[-1]),
                                        t.reshape(-1, t.shape[-1]).to(owner.dtype)), why)


class Recorded(unittest.TestCase):
    def test_every_dtype_and_layout_gives_torch_values(self):
        torch.manual_seed(1)
        model = Seq(encoder(2, D, True), D, 8)
        wide = torch.randn(5, 7, 2 * D) * 3
        cases = []
        for dt in CODES:
            x = (torch.randn(5, 7, D) * 4).to(dt)
            x[1, 2, 5] = 40  # a clear maximum in column 5
            cases += [(x, "contiguous %s" % dt), (x.transpose(0, 1), "transposed %s" % dt),
                      (wide.to(dt)[:, :, D:],
                       "strided %s" % dt)]
        cases.append((torch.randn(D, 11).t(), "column-major"))
        with tmpdir() as tmp:
            path = tmp + "/run.h5"
            rec = resdiag.attach(model, path)
            refs = []
            for step, (t, why) in enumerate(cases):
                with rec.step(step):  # the model does not run: only this tensor
                    self.assertTrue(rec.observe(t, "stream_in", layer=1, sublayer=1))
                    self.assertTrue(rec.observe(t, "stream_in", layer=0, sublayer=0,
                                                direction="backward"))
                refs.append(reference(t))
            rec.detach()
            self.assertEqual(rec.errors, 0)
            with resdiag.open(path) as run:
                for si, ((t, why), ref) in enumerate(zip(cases, refs)):
                    for got in (run.site(si, "stream_in", 1, 1),
                                run.site(si, "stream_in", 0, 0, "backward")):
                        for k in ("frob", "tok_norm_mean", "absmax"):
                            self.assertLess(rel(got[k], ref[k]), 1e-5, (why, k))
                        self.assertEqual(got["absmax_col"], ref["absmax_col"], why)
                        self.assertEqual(got["rows"], ref["rows"], why)

    def test_bfloat16_encoder_verdict(self):
        with tmpdir() as tmp:
            for norm_first in (True, False):
                torch.manual_seed(2)
                model = Seq(encoder(6, 32, norm_first, dropout=0.1), 32, 16).to(torch.bfloat16)
                rec = resdiag.attach(model, tmp + "/run.h5", overwrite=True)  # one path per case
                x = torch.randn(4, 16, 32, dtype=torch.bfloat16)
                with rec.step(0):
                    model(x).float().pow(2).mean().backward()
                rec.detach()
                self.assertEqual(rec.errors, 0)
                with resdiag.open(tmp + "/run.h5") as run:
                    # What was recorded is the bf16 tensor the model made.
                    w2 = model.stack.layers[5].linear2.weight.grad
                    self.assertLess(rel(run.param(0, 5, "mlp.w2")["frob"],
                                        float(torch.linalg.vector_norm(w2.double()))), 1e-5)
                    self.assertEqual(run.verdict(), "pre" if norm_first else "post")

    def test_observe_outside_a_step_records_nothing(self):
        model = Seq(encoder(2, D, True), D, 8)
        with tmpdir() as tmp:
            rec = resdiag.attach(model, tmp + "/run.h5")
            self.assertFalse(rec.observe(torch.ones(2, D), "stream_in"))
            with rec.step(0):
                self.assertTrue(rec.observe(torch.ones(2, D), "stream_in"))
                # A width that is not d_model: refused by the library, counted, no exception.
                self.assertFalse(rec.observe(torch.ones(2, D + 1), "stream_in"))
            self.assertEqual(rec.errors, 1)
            with self.assertWarns(RuntimeWarning):
                rec.detach()


if __name__ == "__main__":
    unittest.main()
