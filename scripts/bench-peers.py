#!/usr/bin/env python3
"""bench-peers.py - the peers of build/resdiag-bench: per-row (per-token)
norms in numpy and torch, and torch computing the statistics resdiag
computes, on tensors of (rows, cols) with rows = size / (cols * itemsize).
Every call is timed by the calling thread's CPU clock (time.thread_time,
CLOCK_THREAD_CPUTIME_ID) beside the wall clock: numpy runs in the calling
thread, and so does torch with one intra-op thread, so the CPU clock
counts the peer's work and not the other jobs of a shared machine.

    /usr/bin/python3 scripts/bench-peers.py [--cols 768] [--sizes 24,256] [--reps 15]
    ATEN_CPU_CAPABILITY=avx512 /usr/bin/python3 scripts/bench-peers.py ...
    /usr/bin/python3 scripts/bench-peers.py --serve [--cols 768] [--sizes 24]

By hand it prints, per peer, dtype and size, GB/s of input (1e9 bytes/s)
as median and min-max by the CPU clock, then the wall clock's median:

    peer NAME DTYPE SIZE_MIB THREADS CPU_MEDIAN CPU_MIN CPU_MAX WALL_MEDIAN

--serve is how resdiag-bench pairs the peers with its own calls: the
script makes f32 tensors of the first size, prints "ready NAME ...
capability=C" (C: the kernels torch dispatches to, AVX2 or AVX512; torch
picks them from ATEN_CPU_CAPABILITY), then answers each line "NAME N" on
stdin with one warm-up and N timed calls (1 thread) and the line
"times CPU1 WALL1 ... CPUN WALLN" in seconds.

The peers (NAME):
  numpy        numpy.linalg.norm(x, axis=1) (numpy does not thread it)
  torch        torch.linalg.vector_norm(x, dim=-1)
  torch-stats  torch computing the set of statistics resdiag's one pass
               yields: the norm of each row, the mean, the RMS, the
               largest |x| and where it is, the counts of NaN and Inf - the
               fair peer (resdiag computes still more in that pass).
Debian's python3-numpy and python3-torch live under /usr/bin/python3 (a
pyenv python first on PATH may lack them), so resdiag-bench tries
/usr/bin/python3 first.
"""
import argparse
import statistics
import sys
import time


def torch_same_stats(torch, x):
    norms = torch.linalg.vector_norm(x, dim=-1)
    # float accumulation for every dtype (torch's f16 sqrt does not exist)
    mean = x.mean(dtype=torch.float32)
    rms = x.square().mean(dtype=torch.float32).sqrt()
    absmax, argmax = x.abs().flatten().max(0)
    nans = torch.isnan(x).sum()
    infs = torch.isinf(x).sum()
    return norms, mean, rms, absmax, argmax, nans, infs


def peer_functions(np, torch, x_np, x_torch):
    fns = {}
    if np is not None and x_np is not None:
        fns["numpy"] = lambda: np.linalg.norm(x_np, axis=1)
    if torch is not None and x_torch is not None:
        fns["torch"] = lambda: torch.linalg.vector_norm(x_torch, dim=-1)
        fns["torch-stats"] = lambda: torch_same_stats(torch, x_torch)
    return fns


def timed_calls(fn, reps):
    """One warm-up, then (cpu, wall) seconds of each of reps calls."""
    fn()
    out = []
    for _ in range(reps):
        c0, w0 = time.thread_time(), time.perf_counter()
        fn()
        out.append((time.thread_time() - c0, time.perf_counter() - w0))
    return out


def torch_capability(torch):
    for line in torch.__config__.show().splitlines():
        if "CPU capability usage:" in line:
            return line.split(":", 1)[1].strip()
    return "?"


def serve(np, torch, cols, mib):
    """Times one peer at a time on request, so that the caller can pair
    each peer's calls with its own (the machine's drift then hits both
    alike)."""
    rows = mib * 1024 * 1024 // (cols * 4)
    x_np = x_torch = None
    if np is not None:
        x_np = np.random.default_rng(1).standard_normal((rows, cols), dtype=np.float32)
    if torch is not None:
        torch.set_num_threads(1)
        x_torch = torch.randn(rows, cols, dtype=torch.float32)
    fns = peer_functions(np, torch, x_np, x_torch)
    cap = torch_capability(torch) if torch is not None else "none"
    print("ready " + " ".join(sorted(fns)) + f" capability={cap}", flush=True)
    for line in sys.stdin:
        words = line.split()
        if len(words) != 2 or words[0] not in fns:
            print("error", flush=True)
            continue
        times = timed_calls(fns[words[0]], max(1, int(words[1])))
        print("times " + " ".join(f"{c:.9f} {w:.9f}" for c, w in times), flush=True)
    return 0


def emit(name, dtype, mib, nbytes, times):
    cpu = [nbytes / c / 1e9 for c, _ in times]
    wall = [nbytes / w / 1e9 for _, w in times]
    print(f"peer {name} {dtype} {mib} 1 {statistics.median(cpu):.3f} {min(cpu):.3f} "
          f"{max(cpu):.3f} {statistics.median(wall):.3f}", flush=True)


def by_hand(np, torch, cols, sizes, reps):
    print(f"python {sys.version.split()[0]} ({sys.executable})"
          + (f", numpy {np.__version__}" if np is not None else "")
          + (f", torch {torch.__version__} ({torch_capability(torch)})"
             if torch is not None else ""))
    if torch is not None:
        torch.set_num_threads(1)
    rng = np.random.default_rng(1) if np is not None else None
    for mib in sizes:
        nbytes = mib * 1024 * 1024
        if np is not None:
            for dt, name in ((np.float32, "f32"), (np.float16, "f16"), (np.float64, "f64")):
                rows = nbytes // (cols * np.dtype(dt).itemsize)
                x = rng.standard_normal((rows, cols), dtype=np.float32).astype(dt)
                emit("numpy", name, mib, x.nbytes,
                     timed_calls(peer_functions(np, None, x, None)["numpy"], reps))
                del x
        if torch is not None:
            for dt, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16"),
                             (torch.float16, "f16"), (torch.float64, "f64")):
                itemsize = torch.tensor([], dtype=dt).element_size()
                rows = nbytes // (cols * itemsize)
                x = torch.randn(rows, cols, dtype=torch.float32).to(dt)
                fns = peer_functions(None, torch, None, x)
                for peer in ("torch", "torch-stats"):
                    emit(peer, name, mib, x.numel() * itemsize, timed_calls(fns[peer], reps))
                del x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cols", type=int, default=768)
    ap.add_argument("--sizes", default="24,256")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--serve", action="store_true")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]

    try:
        import numpy as np
    except ImportError:
        print(f"numpy: not installed for {sys.executable}")
        np = None
    try:
        import torch
    except ImportError:
        print(f"torch: not installed for {sys.executable}")
        torch = None
    if np is None and torch is None:
        return 1
    if a.serve:
        return serve(np, torch, a.cols, sizes[0])
    by_hand(np, torch, a.cols, sizes, max(1, a.reps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
