"""Hooks come off with detach() and leave nothing behind (no hook, no
reference cycle, the model as it was); steps follow the record options;
torch's fused eval-mode path of TransformerEncoderLayer does not hide the
submodules from the hooks."""
import gc
import unittest
import weakref

import torch

from common import Seq, encoder, rel, tmpdir
import resdiag

D = 16


def hook_count(model):
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) + len(m._backward_hooks)
               for m in model.modules())


class Detach(unittest.TestCase):
    def test_detach_removes_everything(self):
        torch.manual_seed(0)
        model = Seq(encoder(3, D, True), D, 8)
        x = torch.randn(2, 5, D, requires_grad=True)
        before = hook_count(model)
        gc.collect()
        gc.disable()  # what is freed below is freed by reference counting alone
        try:
            with tmpdir() as tmp:
                rec = resdiag.attach(model, tmp + "/run.h5")
                self.assertGreater(hook_count(model), before)
                with rec.step(0):
                    out = model(x)
                    out.sum().backward()
                rec.detach()
                self.assertEqual(hook_count(model), before)
                # The tensors of the step are still alive: their grad hooks were removed too.
                self.assertEqual(len(out._backward_hooks or {}), 0)
                self.assertEqual(len(x._backward_hooks or {}), 0)
                ref = weakref.ref(rec)
                del rec
                self.assertIsNone(ref(), "the recorder is kept alive after detach")
                rec2 = resdiag.attach(model, tmp + "/run2.h5")
                rec2.detach()
                rec2.detach()  # idempotent
                ref2 = weakref.ref(rec2)
                del rec2
                self.assertIsNone(ref2())
                with resdiag.open(tmp + "/run.h5") as run:
                    self.assertEqual(run.steps(), [0])
        finally:
            gc.enable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            gc.collect()
            leaked = [o for o in gc.garbage if type(o).__module__.startswith("resdiag")]
            self.assertEqual(leaked, [])
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
        # The model still trains as before.
        model(x).sum().backward()

    def test_record_every_and_pause(self):
        model = Seq(encoder(2, D, False), D, 8)
        x = torch.randn(2, 5, D)
        with tmpdir() as tmp:
            with resdiag.attach(model, tmp + "/run.h5", record_every=3) as rec:
                for step in range(7):
                    with rec.step(step):
                        self.assertEqual(rec.recording, step % 3 == 0)
                        model(x).sum().backward()
            with resdiag.open(tmp + "/run.h5") as run:
                self.assertEqual(run.steps(), [0, 3, 6])
            # The second run replaces the first at the same path.
            with resdiag.attach(model, tmp + "/run.h5", overwrite=True) as rec:
                for step in range(4):
                    rec.set_enabled(step < 2)
                    with rec.step():
                        model(x).sum().backward()
            with resdiag.open(tmp + "/run.h5") as run:
                self.assertEqual(run.steps(), [0, 1])

    def test_eval_fast_path_is_seen(self):
        torch.manual_seed(1)
        for norm_first in (True, False):
            model = Seq(encoder(4, D, norm_first, dropout=0.1, heads=2), D, 8).eval()
            x = torch.randn(3, 6, D)
            key_padding = torch.zeros(3, 6, dtype=torch.bool)
            key_padding[:, -1] = True  # lets nn.TransformerEncoder take its nested-tensor path
            with torch.no_grad():
                plain = model.stack(x, src_key_padding_mask=key_padding)
            with tmpdir() as tmp:
                rec = resdiag.attach(model, tmp + "/run.h5")
                with torch.no_grad(), rec.step(0):
                    seen = model.stack(x, src_key_padding_mask=key_padding)
                rec.detach()
                self.assertEqual(rec.errors, 0)
                self.assertFalse(any(m.training for m in model.modules()))
                # The same function: the fused path pads masked rows with 0.
                keep = ~key_padding
                self.assertLess(float((seen - plain)[keep].abs().max()), 1e-5)
                with resdiag.open(tmp + "/run.h5") as run:
                    for l in range(4):
                        for s in range(2):
                            for site in ("norm_in", "norm_out", "branch_out", "stream_out"):
                                self.assertIsNotNone(run.site(0, site, l, s), (l, s, site))
                    out = run.site(0, "final_norm_out", -1)
                    self.assertLess(rel(out["frob"], float(torch.linalg.vector_norm(seen))), 1e-5)
                    self.assertEqual(run.verdict(), "pre" if norm_first else "post")

    def test_hook_errors_do_not_break_training(self):
        model = Seq(encoder(2, D, True), D, 8)
        with tmpdir() as tmp:
            rec = resdiag.attach(model, tmp + "/run.h5")
            with rec.step(0):
                model(torch.randn(2, 5, D)).sum().backward()
            rec.begin_step(0)  # steps must increase: refused and counted, no exception
            self.assertFalse(rec.recording)
            model(torch.randn(2, 5, D)).sum().backward()
            rec.end_step()
            with self.assertWarns(RuntimeWarning):
                rec.detach()
            self.assertEqual(rec.errors, 1)
            self.assertIn("step", rec.first_error)

    def test_existing_path_needs_overwrite(self):
        torch.manual_seed(3)
        model = Seq(encoder(1, D, True), D, 8)
        x = torch.randn(2, 5, D)
        with tmpdir() as tmp:
            path = tmp + "/run.h5"
            with resdiag.attach(model, path) as rec:
                with rec.step(0):
                    model(x).sum().backward()
                # a run being written: locked, even with overwrite
                with self.assertRaises(resdiag.ResdiagError) as cm:
                    resdiag.attach(model, path, overwrite=True)
                self.assertEqual(cm.exception.status, 15)  # RESDIAG_E_LOCKED
            with self.assertRaises(resdiag.ResdiagError) as cm:
                resdiag.attach(model, path)
            self.assertEqual(cm.exception.status, 14)  # RESDIAG_E_EXISTS
            with resdiag.open(path) as run:
                self.assertEqual(run.steps(), [0])
            with resdiag.attach(model, path, overwrite=True) as rec:
                for step in range(3):
                    with rec.step(10 + step):
                        model(x).sum().backward()
            with resdiag.open(path) as run:
                self.assertEqual(run.steps(), [10, 11, 12])
            # a checkpoint is never replaced
            ckpt = tmp + "/model.pt"
            torch.save(model.state_dict(), ckpt)
            with open(ckpt, "rb") as f:
                before = f.read()
            with self.assertRaises(resdiag.ResdiagError) as cm:
                resdiag.attach(model, ckpt, overwrite=True)
            self.assertEqual(cm.exception.status, 14)
            with open(ckpt, "rb") as f:
                self.assertEqual(f.read(), before)
            self.assertEqual(hook_count(model), 0)

    def test_bad_arguments(self):
        with tmpdir() as tmp:
            with self.assertRaises(ValueError):
                resdiag.attach(torch.nn.Linear(4, 4), tmp + "/run.h5")
            model = Seq(encoder(1, D, True), D, 8)
            with self.assertRaises(ValueError):
                resdiag.attach(model, tmp + "/run.h5", head="no_such_head")
            self.assertEqual(hook_count(model), 0)
            with self.assertRaises(resdiag.ResdiagError):
                resdiag.attach(Seq(encoder(1, D, True), D, 8), tmp + "/no/such/dir/run.h5")
            with self.assertRaises(resdiag.ResdiagError):
                resdiag.open(tmp + "/missing.h5")


if __name__ == "__main__":
    unittest.main()
