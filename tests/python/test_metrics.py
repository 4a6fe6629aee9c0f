"""rec.metric(name, value): the trainer's own per-step numbers go into the
run file as given (NaN and Inf too) at recorded steps, apart from "none
given", nothing at steps that are not recorded; an undeclared name is a
ValueError; the reader (None where none was given) and the JSON report
(strict JSON: "NaN", "Infinity", "-Infinity", null) give them back."""
import json
import math
import os
import subprocess
import unittest

import torch

from common import Seq, encoder, tmpdir
import resdiag

D = 16


def strict_json(text):
    """json.loads refusing the NaN and Infinity literals (which strict
    parsers, jq and JavaScript's JSON.parse, refuse)."""
    def refuse(name):
        raise ValueError("not JSON: %s" % name)
    return json.loads(text, parse_constant=refuse)


class Metrics(unittest.TestCase):
    def test_metric_round_trip(self):
        torch.manual_seed(0)
        model = Seq(encoder(2, D, True), D, 8)
        x = torch.randn(2, 5, D)
        # the recorded steps 0, 2, ..., 10: a number, NaN, +Inf, none, -Inf, a number
        nan, inf = float("nan"), float("inf")
        given = {0: 2.5, 2: nan, 4: inf, 6: None, 8: -inf, 10: 0.125}
        with tmpdir() as tmp:
            path = tmp + "/run.h5"
            rec = resdiag.attach(model, path, metrics=("loss", "lr", "nan_first", "unset",
                                                              "all_nan"),
                                 record_every=2)
            for step in range(11):
                with rec.step(step):
                    loss = model(x).pow(2).mean()
                    # steps 1, 3, ... are not recorded: their value is dropped
                    value = given.get(step, 100.0 + step)
                    if value is not None:
                        self.assertEqual(rec.metric("loss", torch.tensor(value)), step % 2 == 0)
                    rec.metric("lr", 1e-3 * step)
                    if step == 0:
                        rec.metric("nan_first", nan)
                    rec.metric("all_nan", nan)  # a whole block of given NaNs
                    with self.assertRaises(ValueError):
                        rec.metric("los", 1.0)
                    loss.backward()
            rec.detach()
            self.assertEqual(rec.errors, 0)
            steps = [0, 2, 4, 6, 8, 10]
            with resdiag.open(path) as rd:
                self.assertEqual(rd.info.metric_names,
                                 ["loss", "lr", "nan_first", "unset", "all_nan"])
                self.assertEqual(rd.steps(), steps)
                loss = rd.metric("loss")
                self.assertEqual(len(loss), 6)
                self.assertEqual(loss[0], 2.5)
                self.assertTrue(isinstance(loss[1], float) and math.isnan(loss[1]))
                self.assertEqual(loss[2], inf)
                self.assertIsNone(loss[3])  # not given at step 6
                self.assertEqual(loss[4], -inf)
                self.assertEqual(loss[5], 0.125)
                self.assertEqual(rd.metric("lr"), [1e-3 * s for s in steps])
                first = rd.metric("nan_first")
                self.assertTrue(math.isnan(first[0]))
                self.assertEqual(first[1:], [None] * 5)
                self.assertEqual(rd.metric("unset"), [None] * 6)
                self.assertTrue(all(isinstance(v, float) and math.isnan(v)
                                    for v in rd.metric("all_nan")), rd.metric("all_nan"))
                with self.assertRaises(KeyError):
                    rd.metric("nope")
                # the library's own JSON, as the binding returns it
                self.assertEqual(strict_json(rd.report(json=True))["metrics"]["loss"],
                                 [2.5, "NaN", "Infinity", None, "-Infinity", 0.125])
            tool = os.environ.get("RESDIAG_TOOL")
            if tool:
                out = subprocess.run([tool, "report", "--json", path], check=True,
                                     capture_output=True, text=True).stdout
                report = strict_json(out)
                self.assertEqual(report["metric_steps"], steps)
                self.assertEqual(report["metrics"]["loss"],
                                 [2.5, "NaN", "Infinity", None, "-Infinity", 0.125])
                self.assertEqual(report["metrics"]["nan_first"], ["NaN"] + [None] * 5)
                self.assertEqual(report["metrics"]["unset"], [None] * 6)
                self.assertEqual(report["metrics"]["all_nan"], ["NaN"] * 6)
                self.assertEqual(report["metrics"]["lr"], [1e-3 * s for s in steps])
                # the text report: each metric's last value given, NaN as nan,
                # a metric never given as such
                text = subprocess.run([tool, "report", path], check=True,
                                      capture_output=True, text=True).stdout
                line = [t for t in text.splitlines() if t.startswith("Trainer's metrics")]
                self.assertEqual(len(line), 1, text)
                self.assertIn(" loss 0.125 at step 10,", line[0])
                self.assertIn(" nan_first nan at step 0,", line[0])
                self.assertIn(" unset never given", line[0])


    def test_ranks_merge_given_values_only(self):
        """A job's metrics come from the lowest rank that gave each value:
        rank 0's NaN is its value; where rank 0 gave none, rank 1's."""
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_RUN_ID"):
            os.environ.pop(k, None)
        nan = float("nan")
        # per step: what rank 0 and rank 1 give (None: nothing)
        given = {0: (nan, 7.0), 1: (None, 3.0), 2: (5.0, nan), 3: (None, None)}
        with tmpdir() as tmp:
            path = tmp + "/run.h5"
            for rank in (0, 1):
                torch.manual_seed(0)
                model = Seq(encoder(2, D, True), D, 8)
                x = torch.randn(2, 5, D)
                rec = resdiag.attach(model, path, rank=rank, world_size=2, split="data",
                                     backward=False)
                for step, values in given.items():
                    with rec.step(step):
                        model(x)
                        if values[rank] is not None:
                            rec.metric("loss", values[rank])
                rec.detach()
                self.assertEqual(rec.errors, 0)
            with resdiag.open(path) as rd:
                self.assertEqual(rd.info.n_steps, 4)
                loss = rd.metric("loss")
            self.assertTrue(math.isnan(loss[0]), loss)
            self.assertEqual(loss[1:], [3.0, 5.0, None])


if __name__ == "__main__":
    unittest.main()
