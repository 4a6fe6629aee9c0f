"""Decisive evidence is called decisive: clean torch encoders
(examples/pytorch/encoder.py, nn.TransformerEncoder with norm_first True
and False, f32) at initialization are pre-norm and post-norm with
confidence "high" (the rival relations miss by 1e-2 or more, f32 rounding
leaves 1e-7), and the report gives no reason for less. The example runs as
a user runs it, in its own process."""
import json
import os
import subprocess
import sys
import unittest

from common import tmpdir
import resdiag

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
EXAMPLE = os.path.join(ROOT, "examples", "pytorch", "encoder.py")


def run_example(path, norm_first, layers):
    subprocess.run([sys.executable, EXAMPLE, "--norm-first", norm_first, "--layers", str(layers),
                    "--steps", "1", "--d-model", "32", "--batch", "4", "--seq", "16",
                    "--out", path], check=True, stdout=subprocess.DEVNULL)


class EncoderConfidence(unittest.TestCase):
    def test_clean_encoders_at_init_are_high(self):
        with tmpdir() as d:
            self.check_encoders(d)

    def check_encoders(self, d):
        for norm_first, verdict in (("true", "pre"), ("false", "post")):
            for layers in (2, 6):
                with self.subTest(norm_first=norm_first, layers=layers):
                    path = os.path.join(d, "enc_%s_%d.h5" % (norm_first, layers))
                    run_example(path, norm_first, layers)
                    with resdiag.open(path) as run:
                        a = run.analyze()
                        self.assertEqual(a.verdict, verdict)
                        self.assertEqual(a.confidence, "high")
                    tool = os.environ.get("RESDIAG_TOOL")
                    if tool:
                        out = subprocess.run([tool, "report", "--json", path], check=True,
                                             capture_output=True, text=True).stdout
                        p = json.loads(out)["placement"]
                        self.assertEqual((p["verdict"], p["confidence"]), (verdict, "high"))
                        self.assertEqual(p["confidence_why"], "")
                        for layer in p["layers"]:
                            for s, sub in enumerate(layer["sublayers"]):
                                self.assertGreaterEqual(sub["evidence_strength"], 25)
                                # pre-norm: the second sublayer's stream_in is
                                # taken from its norm's input, so norm_in =
                                # stream_in holds by construction (declared by
                                # the binding), and so do the relations with
                                # both terms; post-norm: it is taken from what
                                # the branch reads, so branch_in = stream_in;
                                # the first sublayer's are two hooks.
                                want = [] if s == 0 else (
                                    ["norm_reads_stream", "norm_reads_sum",
                                     "norm_reads_alpha_sum"] if norm_first == "true"
                                    else ["branch_reads_stream"])
                                self.assertEqual(sub["by_construction"], want)


if __name__ == "__main__":
    unittest.main()
