"""Steps that do not complete, and forwards that are not the step's:
an exception inside ``with rec.step()`` ends the step as aborted (its type
and message as the reason) and goes on; the report names the aborted step,
and "last" judges the step before it. A forward without autograd
(torch.no_grad, inference_mode) inside a training step is left out of the
step's statistics, said once per step in the "resdiag" log."""
import logging
import math
import unittest

import torch

from common import Seq, encoder, tmpdir, xavier
import resdiag

D, V = 16, 8


class Boom(RuntimeError):
    pass


def model_and_input(seed=5):
    torch.manual_seed(seed)
    model = Seq(encoder(3, D, True), D, V)
    xavier(model)
    return model, torch.randn(2, 6, D)


class ListHandler(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


class Abort(unittest.TestCase):
    def test_exception_in_a_step_aborts_it_and_last_judges_the_one_before(self):
        model, x = model_and_input()
        with tmpdir() as tmp:
            path = tmp + "/run.h5"
            rec = resdiag.attach(model, path)
            for step in range(2):
                with rec.step(step):
                    model(x).pow(2).mean().backward()
                model.zero_grad()
            with self.assertRaises(Boom):
                with rec.step(2):
                    model(x)  # the forward ran, then the step raised
                    raise Boom("the loss went \u221e\nat step 2")
            self.assertFalse(rec.recording)
            rec.detach()
            self.assertEqual(rec.errors, 0, rec.first_error)
            with resdiag.open(path) as run:
                self.assertEqual(run.steps(), [0, 1, 2])
                self.assertIsNone(run.aborted(0))
                self.assertIsNone(run.aborted(1))
                self.assertEqual(run.aborted(2), "Boom: the loss went \u221e\nat step 2")
                # the aborted step keeps what its forward recorded
                self.assertIsNotNone(run.site(2, "stream_out", 2, 1))
                last = run.analyze("last")
                self.assertEqual(last.step, 1)
                self.assertEqual(last.verdict, "pre")
                report = last.text()
                self.assertIn("aborted: 1 step(s)", report)
                self.assertIn("step 2 (Boom: the loss went \u221e\\nat step 2)", report)
                js = last.json()
                self.assertEqual(js["n_aborted_steps"], 1)
                self.assertEqual(js["aborted_steps"],
                                 [{"step": 2, "index": 2,
                                   "reason": "Boom: the loss went \u221e\nat step 2"}])
                self.assertEqual(js["training"]["last_step"], 1)
                # asked for by index, the aborted step is shown, not judged
                a = run.analyze(2)
                self.assertEqual(a.verdict, "cannot_tell")
                self.assertTrue(a.text().startswith(
                    "NOTE: step 2 was aborted (Boom: the loss went \u221e\\nat step 2): its "
                    "records are incomplete, not judged"))
                self.assertTrue(a.json()["steps"]["analysed_aborted"])

    def test_eval_forward_inside_a_training_step_is_left_out(self):
        def run(path, eval_forward):
            model, x = model_and_input(9)
            rec = resdiag.attach(model, path)
            for step in range(2):
                with rec.step(step):
                    model(x).pow(2).mean().backward()
                    if eval_forward:
                        with torch.no_grad():
                            model(3 * torch.randn(4, 5, D))  # other data, other statistics
                        with torch.inference_mode():
                            model(torch.randn(1, 7, D))
                model.zero_grad()
            rec.detach()
            self.assertEqual(rec.errors, 0, rec.first_error)

        log = logging.getLogger("resdiag")
        handler, level = ListHandler(), log.level
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        try:
            with tmpdir() as tmp:
                run(tmp + "/plain.h5", False)
                self.assertEqual([m for m in handler.lines if "evaluation forward" in m], [])
                run(tmp + "/eval.h5", True)
                said = [m for m in handler.lines if "evaluation forward" in m]
                self.assertEqual(len(said), 2, said)  # once per step
                self.assertIn("step 0:", said[0])
                self.assertIn("step 1:", said[1])
                with resdiag.open(tmp + "/plain.h5") as a, resdiag.open(tmp + "/eval.h5") as b:
                    sites = [(s, l, sub, d) for s in resdiag.SITES
                             for l, sub in ((0, 0), (1, 1), (2, 1), (-1, 0))
                             for d in ("forward", "backward")]
                    compared = 0
                    for i in range(2):
                        for site, l, sub, d in sites:
                            if (l < 0) != (resdiag.SITES[site] >= 16):
                                continue
                            fa = a.site(i, site, l, sub, d)
                            fb = b.site(i, site, l, sub, d)
                            self.assertEqual(fa is None, fb is None, (i, site, l, sub, d))
                            if fa is None:
                                continue
                            compared += 1
                            for k, va in fa.items():
                                vb = fb[k]
                                self.assertTrue(va == vb or (math.isnan(va) and math.isnan(vb)),
                                                (i, site, l, sub, d, k, va, vb))
                    self.assertGreater(compared, 20)
        finally:
            log.removeHandler(handler)
            log.setLevel(level)


if __name__ == "__main__":
    unittest.main()
