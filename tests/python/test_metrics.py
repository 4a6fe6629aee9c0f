"""rec.metric(name, value): the trainer's own per-step numbers go into the
run file as given (NaN and Inf too) at recorded steps, NaN where none was
given, nothing at steps that are not recorded; an undeclared name is a
ValueError; the reader and the JSON report give them back."""
import json
import math
import os
import subprocess
import unittest

import torch

from common import Seq, encoder, tmpdir
import resdiag

D = 16


class Metrics(unittest.TestCase):
    def test_metric_round_trip(self):
        torch.manual_seed(0)
        model = Seq(encoder(2, D, True), D, 8)
        x = torch.randn(2, 5, D)
        given = {0: 2.5, 2: float("nan"), 4: float("inf"), 6: None, 8: 0.125}
        with tmpdir() as tmp:
            path = tmp + "/run.h5"
            rec = resdiag.attach(model, path, metrics=("loss", "lr"), record_every=2)
            for step in range(9):
                with rec.step(step):
                    loss = model(x).pow(2).mean()
                    # steps 1, 3, ... are not recorded: their value is dropped
                    value = given.get(step, 100.0 + step)
                    if value is not None:
                        self.assertEqual(rec.metric("loss", torch.tensor(value)), step % 2 == 0)
                    rec.metric("lr", 1e-3 * step)
                    with self.assertRaises(ValueError):
                        rec.metric("los", 1.0)
                    loss.backward()
            rec.detach()
            self.assertEqual(rec.errors, 0)
            with resdiag.open(path) as rd:
                self.assertEqual(rd.info.metric_names, ["loss", "lr"])
                self.assertEqual(rd.steps(), [0, 2, 4, 6, 8])
                loss = rd.metric("loss")
                self.assertEqual(loss[0], 2.5)
                self.assertTrue(math.isnan(loss[1]))
                self.assertEqual(loss[2], float("inf"))
                self.assertTrue(math.isnan(loss[3]))  # not given at step 6
                self.assertEqual(loss[4], 0.125)
                self.assertEqual(rd.metric("lr"), [1e-3 * s for s in (0, 2, 4, 6, 8)])
                with self.assertRaises(KeyError):
                    rd.metric("nope")
            tool = os.environ.get("RESDIAG_TOOL")
            if tool:
                out = subprocess.run([tool, "report", "--json", path], check=True,
                                     capture_output=True, text=True).stdout
                report = json.loads(out)
                self.assertEqual(report["metric_steps"], [0, 2, 4, 6, 8])
                self.assertEqual(report["metrics"]["loss"], [2.5, None, None, None, 0.125])


if __name__ == "__main__":
    unittest.main()
