#!/usr/bin/env python3
"""bench_overhead.py - what attaching resdiag costs a torch training step.

Times forward + backward of a 6-layer d=512 nn.TransformerEncoder (8 heads,
FF 2048, batch_first, dropout 0.1, train mode) with and without resdiag
attached (every step recorded: all sites forward and backward, the
parameter gradients). Two copies of the same model run alternately, one
step each per repetition (the order flips every repetition), and the
medians are compared.

    RESDIAG_LIBRARY=build/libresdiag.so python3 python/bench_overhead.py [--reps 9]
"""
import argparse
import copy
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import resdiag  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--reps", type=int, default=9)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--norm-first", action="store_true")
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(a.d_model, a.heads, 4 * a.d_model, 0.1, batch_first=True,
                                       norm_first=a.norm_first)
    plain = nn.TransformerEncoder(layer, a.layers, enable_nested_tensor=False).train()
    hooked = copy.deepcopy(plain)
    x = torch.randn(a.batch, a.seq, a.d_model)

    def step(model):
        t0, c0 = time.perf_counter(), time.process_time()
        model(x).pow(2).mean().backward()
        dt = (time.perf_counter() - t0, time.process_time() - c0)
        model.zero_grad(set_to_none=True)
        return dt

    # The time spent inside resdiag (statistics, ctypes, the step calls) is
    # also summed directly: on a busy machine it is a steadier figure than
    # the difference of two noisy medians.
    inside = [0.0, 0.0]  # wall, CPU

    def timed(fn):
        def wrapper(*args, **kw):
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                return fn(*args, **kw)
            finally:
                inside[0] += time.perf_counter() - t0
                inside[1] += time.process_time() - c0
        return wrapper

    for name in ("_observe", "_grad", "begin_step", "end_step"):
        setattr(resdiag.Recorder, name, timed(getattr(resdiag.Recorder, name)))

    with tempfile.TemporaryDirectory() as tmp:
        rec = resdiag.attach(hooked, os.path.join(tmp, "run.h5"))
        spent = []
        times = {"without": [], "with": []}

        def run_hooked(i):
            inside[0] = inside[1] = 0.0
            with rec.step(i):
                t = step(hooked)
            spent.append(tuple(inside))
            return t

        for i in range(a.reps + 1):  # the first repetition warms up
            pair = [("without", lambda: step(plain)), ("with", lambda i=i: run_hooked(i))]
            if i % 2:
                pair.reverse()
            for name, fn in pair:
                t = fn()
                if i:
                    times[name].append(t)
        t0 = time.perf_counter()
        rec.detach()
        close_s = time.perf_counter() - t0
        size = os.path.getsize(os.path.join(tmp, "run.h5"))

    print("torch %s, %d threads, %d layers, d=%d, %d heads, %d tokens (batch %d x seq %d), "
          "%d repetitions" % (torch.__version__, torch.get_num_threads(), a.layers, a.d_model,
                              a.heads, a.batch * a.seq, a.batch, a.seq, a.reps))
    # Wall time is what a user sees; CPU time of the process is what the
    # work costs, and stays meaningful on a machine shared with other jobs.
    for k, what in ((0, "wall"), (1, "CPU ")):
        for stat in (statistics.median, min):
            m0 = stat(t[k] for t in times["without"])
            m1 = stat(t[k] for t in times["with"])
            print("%s time, %-6s of forward+backward: without %.1f ms, with resdiag %.1f ms: "
                  "overhead %+.1f%% (%+.1f ms per recorded step)"
                  % (what, stat.__name__, 1e3 * m0, 1e3 * m1, 100 * (m1 - m0) / m0,
                     1e3 * (m1 - m0)))
    plain_wall = statistics.median(t[0] for t in times["without"])
    plain_cpu = statistics.median(t[1] for t in times["without"])
    ins = statistics.median(w for w, c in spent[1:])
    ins_cpu = statistics.median(c for w, c in spent[1:])
    print("inside resdiag per recorded step (hooks, statistics, step calls): median %.1f ms CPU "
          "= %.1f%% of the CPU time of a step without resdiag (wall %.1f ms = %.1f%%)"
          % (1e3 * ins_cpu, 100 * ins_cpu / plain_cpu, 1e3 * ins, 100 * ins / plain_wall))
    print("run file %.0f KiB for %d steps; detach (flush + close) %.1f ms"
          % (size / 1024, a.reps + 1, 1e3 * close_s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
