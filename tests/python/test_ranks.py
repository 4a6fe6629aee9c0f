"""The rank keywords of attach() (doc/RANKS.md): the rank's own file, a rank
that does not record, and a pipeline stage whose blocks are layers
layer_first.. of the whole model."""
import os
import unittest

import torch

from common import Seq, encoder, tmpdir
import resdiag

D = 16


def run_step(rec, model, x):
    with rec.step(0):
        model(x).sum().backward()
    rec.detach()


class Ranks(unittest.TestCase):
    def setUp(self):
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_RUN_ID"):
            os.environ.pop(k, None)

    def test_explicit_rank_writes_its_own_file(self):
        torch.manual_seed(0)
        model = Seq(encoder(2, D, True), D, 8)
        x = torch.randn(2, 5, D, requires_grad=True)
        with tmpdir() as tmp:
            rec = resdiag.attach(model, tmp + "/run.h5", rank=1, world_size=2, split="sequence")
            run_step(rec, model, x)
            self.assertFalse(os.path.exists(tmp + "/run.h5"))
            with resdiag.open(tmp + "/run.rank00001.h5") as run:
                self.assertEqual(run.steps(), [0])

    def test_environment_and_record_rank_every(self):
        torch.manual_seed(0)
        model = Seq(encoder(2, D, True), D, 8)
        x = torch.randn(2, 5, D, requires_grad=True)
        os.environ.update(RANK="3", WORLD_SIZE="4")
        with tmpdir() as tmp:
            rec = resdiag.attach(model, tmp + "/run.h5", record_rank_every=2)
            with rec.step(0):
                self.assertFalse(rec.recording)
                model(x).sum().backward()
            rec.detach()
            self.assertEqual(os.listdir(tmp), [])
            rec = resdiag.attach(model, tmp + "/run.h5", record_rank_every=3)
            run_step(rec, model, x)
            self.assertEqual(os.listdir(tmp), ["run.rank00003.h5"])

    def test_pipeline_stage_numbers_its_layers(self):
        torch.manual_seed(0)
        model = Seq(encoder(2, D, True), D, 8)
        x = torch.randn(2, 5, D, requires_grad=True)
        with tmpdir() as tmp:
            with self.assertRaises(ValueError):
                resdiag.attach(model, tmp + "/a.h5", split="pipeline", layer_first=2)
            with self.assertRaises(ValueError):
                resdiag.attach(model, tmp + "/a.h5", split="diagonal")
            rec = resdiag.attach(model, tmp + "/run.h5", rank=1, world_size=2,
                                 split="pipeline", layer_first=2, n_layers=4)
            self.assertEqual(rec.errors, 0)
            run_step(rec, model, x)
            self.assertEqual(rec.errors, 0)
            with resdiag.open(tmp + "/run.rank00001.h5") as run:
                self.assertIsNone(run.site(0, "stream_out", layer=0))
                self.assertIsNone(run.site(0, "stream_out", layer=1))
                self.assertIsNotNone(run.site(0, "stream_out", layer=2))
                self.assertIsNotNone(run.site(0, "stream_out", layer=3))
                self.assertIsNotNone(run.site(0, "stream_out", layer=3, direction="backward"))


if __name__ == "__main__":
    unittest.main()
