"""python/bench_overhead.py's judged lines: the binding's whole cost is the
median of the paired step differences over the plain median (checked on
made-up steps against a hand computation), bf16 is judged only where its
matmuls run at least half as fast as float32 ("not judged here" with the
ratio otherwise), and a short run of the bench prints those lines (the
old inside-resdiag target no more)."""
import contextlib
import io
import os
import re
import subprocess
import sys
import unittest

import resdiag

BENCH = os.environ.get("RESDIAG_BENCH_OVERHEAD") or os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(resdiag.__file__))), "bench_overhead.py")
sys.path.insert(0, os.path.dirname(BENCH))
import bench_overhead as bench  # noqa: E402


def printed(fn, *args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        fn(*args)
    return out.getvalue()


class Verdicts(unittest.TestCase):
    def steps(self, cpus):
        return [bench.Step(c, c, 0.0, c, 0.0, 0) for c in cpus]

    def test_step_overhead_is_the_median_paired_difference_over_the_plain_median(self):
        plain = [1.00, 1.20, 0.90, 1.10, 1.05]
        rec = [1.03, 1.20, 0.95, 1.11, 1.30]
        # differences 0.03, 0.00, 0.05, 0.01, 0.25: median 0.03; plain
        # median 1.05 (not the median of the ratios, nor of the means)
        line = printed(bench.step_target, "binding-f32-step-overhead", "float32",
                       self.steps(plain), self.steps(rec), 5)
        m = re.match(r"target binding-f32-step-overhead: measured ([-+0-9.]+) %, goal <= 2 %, "
                     r"(met|missed) ", line)
        self.assertTrue(m, line)
        self.assertAlmostEqual(float(m.group(1)), 100 * 0.03 / 1.05, places=2)
        self.assertEqual(m.group(2), "missed")
        self.assertIn("+30.0 ms (0.0 to 250.0)", line)
        self.assertIn("1050.0 ms (900.0-1200.0)", line)
        self.assertIn("load average", line)

    def test_met_within_two_per_cent(self):
        line = printed(bench.step_target, "binding-f32-step-overhead", "float32",
                       self.steps([1.0, 1.0, 1.0]), self.steps([1.01, 1.019, 1.5]), 3)
        self.assertIn("measured +1.90 %, goal <= 2 %, met", line)
        line = printed(bench.step_target, "binding-f32-step-overhead", "float32",
                       self.steps([1.0, 1.0, 1.0]), self.steps([0.9, 1.021, 1.5]), 3)
        self.assertIn("measured +2.10 %, goal <= 2 %, missed", line)

    def test_bf16_not_judged_below_half_of_float32s_speed(self):
        line = bench.bf16_not_judged(0.037)
        self.assertTrue(line.startswith("target binding-bf16-step-overhead: not judged here "
                                        "(bf16 matmul runs at 0.037 of float32's speed on "
                                        "this CPU"), line)
        self.assertIsNone(bench.bf16_not_judged(0.5))
        self.assertIsNone(bench.bf16_not_judged(1.07))


class ShortRun(unittest.TestCase):
    def run_bench(self, ratio):
        env = dict(os.environ, OMP_NUM_THREADS="1")
        r = subprocess.run([sys.executable, BENCH, "--reps", "1", "--skip-encoder",
                            "--gpt-seq", "16", "--gpt-batch", "2", "--bf16-ratio", str(ratio)],
                           env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        return r.stdout

    def targets(self, out):
        return [x for x in out.splitlines() if x.startswith("target ")]

    def test_slow_bf16_leaves_only_the_float32_target_judged(self):
        out = self.run_bench(0.04)
        t = self.targets(out)
        self.assertEqual(len(t), 2, out)
        self.assertRegex(t[0], r"^target binding-f32-step-overhead: measured [-+0-9.]+ %, "
                         r"goal <= 2 %, (met|missed) \(paired step CPU time")
        self.assertTrue(t[1].startswith("target binding-bf16-step-overhead: not judged here "
                                        "(bf16 matmul runs at 0.040 "), t[1])
        self.assertNotIn("bfloat16, ", out)  # its steps were not run
        self.assertRegex(out, r"info binding-f32-inside-resdiag: [0-9.]+ % of the plain step")
        self.assertRegex(out, r"info binding-f32-hooks: [1-9][0-9]* tensor hooks and "
                         r"[1-9][0-9]* module hooks per step")
        self.assertNotIn("binding-bf16-overhead", out)

    def test_fast_bf16_is_judged_like_float32(self):
        t = self.targets(self.run_bench(0.9))
        self.assertEqual(len(t), 2, t)
        self.assertRegex(t[1], r"^target binding-bf16-step-overhead: measured [-+0-9.]+ %, "
                         r"goal <= 2 %, (met|missed) \(paired step CPU time with and without "
                         r"attach, bfloat16")


if __name__ == "__main__":
    unittest.main()
