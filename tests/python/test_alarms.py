"""Alarms through the binding (attach(alarms=..., on_alarm=...,
raise_on_alarm=...), rec.alarms): a NaN put into one block's weights at
step 3 fires at step 3, at that block's attention output, and the run file
holds step 3 while the recorder is still open; bounds on the update ratio
and the growth fire with the values computed here from the model's own
modules, and not where the bound is above them; bad declarations are
refused."""
import math
import subprocess
import sys
import unittest

import torch

from common import Seq, encoder, rel, tmpdir, tok_norm_mean, vnorm, xavier
import resdiag

D, V, L = 16, 8, 3


def model_and_input(seed=7):
    torch.manual_seed(seed)
    model = Seq(encoder(L, D, True), D, V)
    xavier(model)
    return model, torch.randn(2, 6, D)


def reference(model, x):
    """Per layer, the pre-norm block's update ratios ||F(Norm(x))|| / ||x||
    (attention, MLP), and the mean token norm of each layer's output."""
    ratios, outs = [], []
    with torch.no_grad():
        for layer in model.stack.layers:
            a = layer._sa_block(layer.norm1(x), None, None)
            ra = vnorm(a) / vnorm(x)
            x = x + a
            f = layer._ff_block(layer.norm2(x))
            rf = vnorm(f) / vnorm(x)
            x = x + f
            ratios.append((ra, rf))
            outs.append(tok_norm_mean(x))
    return ratios, outs


def steps_in_file(path):
    """The recorded steps, read by another process (HDF5 does not open a
    file twice in one process while it is written)."""
    code = "import sys, resdiag; print(resdiag.open(sys.argv[1]).steps())"
    out = subprocess.run([sys.executable, "-c", code, path], check=True, capture_output=True,
                         text=True).stdout
    return [int(s) for s in out.strip().strip("[]").split(",") if s.strip()]


def train(rec, model, x, steps, poison_at=None):
    for step in range(steps):
        if step == poison_at:
            with torch.no_grad():
                model.stack.layers[1].self_attn.in_proj_weight[0, 0] = float("nan")
        with rec.step(step):
            model(x).pow(2).mean().backward()
        model.zero_grad()


class Alarms(unittest.TestCase):
    def test_nan_fires_at_its_step_and_site_and_the_step_is_in_the_file(self):
        model, x = model_and_input()
        seen = []
        with tmpdir() as tmp:
            path = tmp + "/run.h5"
            rec = resdiag.attach(model, path, alarms={"nonfinite": True}, on_alarm=seen.append)
            train(rec, model, x, 3)
            self.assertEqual(rec.alarms, [])  # steps 0..2 are clean
            train_step = 3
            with torch.no_grad():
                model.stack.layers[1].self_attn.in_proj_weight[0, 0] = float("nan")
            with rec.step(train_step):
                model(x).pow(2).mean().backward()
            self.assertEqual(len(rec.alarms), 1)
            a = rec.alarms[0]
            self.assertEqual((a.kind, a.step, a.rank, a.direction, a.layer, a.sublayer, a.site),
                             ("nonfinite", 3, 0, "forward", 1, 0, "branch_out"))
            self.assertIsNone(a.param)
            self.assertGreater(a.value, 0)
            self.assertEqual(seen, rec.alarms)  # the callback saw the same alarm
            # flushed at once (flush_steps is 16): a second reader sees step 3 now
            self.assertEqual(steps_in_file(path), [0, 1, 2, 3])
            model.zero_grad()
            with rec.step(4):  # the kind fires once per run: not again
                model(x).pow(2).mean().backward()
            self.assertEqual(len(rec.alarms), 1)
            rec.detach()
            self.assertEqual(rec.errors, 0, rec.first_error)

    def test_raise_on_alarm_raises_after_the_step_is_written(self):
        model, x = model_and_input()
        with tmpdir() as tmp:
            path = tmp + "/run.h5"
            rec = resdiag.attach(model, path, alarms={"nonfinite": True}, raise_on_alarm=True)
            with self.assertRaises(resdiag.AlarmError) as cm:
                train(rec, model, x, 5, poison_at=2)
            self.assertEqual([(a.kind, a.step) for a in cm.exception.alarms], [("nonfinite", 2)])
            self.assertIn("step 2", str(cm.exception))
            self.assertIsInstance(cm.exception, resdiag.ResdiagError)
            self.assertEqual(steps_in_file(path), [0, 1, 2])
            rec.detach()

    def test_bounds_fire_with_the_values_computed_here(self):
        model, x = model_and_input()
        ratios, outs = reference(model, x)
        r_max = max(max(p) for p in ratios)
        l_max, s_max = max(((l, s) for l in range(L) for s in range(2)),
                           key=lambda ls: ratios[ls[0]][ls[1]])
        growth = outs[-1] / outs[0]
        for scale, fires in ((0.9, True), (1.1, False)):
            with tmpdir() as tmp:
                rec = resdiag.attach(model, tmp + "/run.h5", alarms={
                    "update_ratio": r_max * scale, "growth": growth * scale, "nonfinite": False})
                with rec.step(0):
                    model(x).pow(2).mean().backward()
                model.zero_grad()
                rec.detach()
                self.assertEqual(rec.errors, 0, rec.first_error)
                if not fires:
                    self.assertEqual(rec.alarms, [], "bounds above the values: %r" % rec.alarms)
                    continue
                kinds = {a.kind: a for a in rec.alarms}
                self.assertEqual(sorted(kinds), ["growth", "update_ratio"])
                u, g = kinds["update_ratio"], kinds["growth"]
                self.assertEqual((u.layer, u.sublayer, u.site), (l_max, s_max, "branch_out"))
                self.assertLess(rel(u.value, r_max), 1e-5)  # float32 forward against float32
                self.assertAlmostEqual(u.bound, r_max * scale)
                self.assertEqual((g.layer, g.ref_layer, g.site), (L - 1, 0, "stream_out"))
                self.assertLess(rel(g.value, growth), 1e-5)

    def test_bad_declarations_are_refused(self):
        model, _ = model_and_input()
        with tmpdir() as tmp:
            for bad, err in (({"nonfinite": 1}, TypeError), ({"update_ratio": -1}, ValueError),
                             ({"growth": math.nan}, ValueError), ({"grad": 3.0}, ValueError),
                             ({"grad_norm": "big"}, TypeError), ([("nonfinite", True)], TypeError)):
                with self.assertRaises(err, msg=repr(bad)):
                    resdiag.attach(model, tmp + "/bad.h5", alarms=bad)
            with self.assertRaises(TypeError):
                resdiag.attach(model, tmp + "/bad.h5", alarms={"nonfinite": True}, on_alarm=3)

    def test_without_alarms_a_nan_step_is_no_alarm(self):
        model, x = model_and_input()
        with tmpdir() as tmp:
            rec = resdiag.attach(model, tmp + "/run.h5")
            train(rec, model, x, 3, poison_at=1)
            rec.detach()
            self.assertEqual(rec.alarms, [])
            self.assertEqual(rec.errors, 0, rec.first_error)


if __name__ == "__main__":
    unittest.main()
