#!/usr/bin/env python3
"""bench-peers.py - per-row (per-token) norms in numpy and torch, timed the
way build/resdiag-bench times resdiag: tensors of (rows, cols) with rows =
size / (cols * itemsize), repetitions, median and min-max in GB/s of input
(1e9 bytes/s). resdiag-bench runs it and reads its "peer" lines:

    peer NAME DTYPE SIZE_MIB THREADS MEDIAN MIN MAX

Other lines are notes (versions, what is missing). Debian's python3-numpy
and python3-torch live under /usr/bin/python3 (a pyenv python first on
PATH may lack them), so resdiag-bench tries /usr/bin/python3 first.

    /usr/bin/python3 scripts/bench-peers.py [--cols 768] [--sizes 24,256] [--reps 11,5]
    /usr/bin/python3 scripts/bench-peers.py --serve [--cols 768] [--sizes 24]

--serve is how resdiag-bench interleaves the peers with its own
repetitions: the script makes f32 tensors of the first size, prints
"ready", then answers each line "numpy N" or "torch N" on stdin with one
warm-up and N timed calls (1 thread) and the line "secs S1 ... SN".

numpy: numpy.linalg.norm(x, axis=1) (one thread: numpy does not thread it).
torch: torch.linalg.vector_norm(x, dim=-1) with 1 and 2 intra-op threads.
"""
import argparse
import statistics
import sys
import time


def timed(fn, nbytes, reps):
    fn()  # warm-up
    gbs = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        gbs.append(nbytes / (time.perf_counter() - t0) / 1e9)
    return statistics.median(gbs), min(gbs), max(gbs)


def emit(name, dtype, mib, threads, r):
    print(f"peer {name} {dtype} {mib} {threads} {r[0]:.3f} {r[1]:.3f} {r[2]:.3f}", flush=True)


def serve(np, torch, cols, mib):
    """Times one peer at a time on request, so that the caller can pair
    each peer's repetitions with its own (the machine's drift then hits
    both alike)."""
    nbytes = mib * 1024 * 1024
    rows = nbytes // (cols * 4)
    fns = {}
    if np is not None:
        xn = np.random.default_rng(1).standard_normal((rows, cols), dtype=np.float32)
        fns["numpy"] = lambda: np.linalg.norm(xn, axis=1)
    if torch is not None:
        torch.set_num_threads(1)
        xt = torch.randn(rows, cols, dtype=torch.float32)
        fns["torch"] = lambda: torch.linalg.vector_norm(xt, dim=-1)
    print("ready " + " ".join(sorted(fns)), flush=True)
    for line in sys.stdin:
        words = line.split()
        if len(words) != 2 or words[0] not in fns:
            print("error", flush=True)
            continue
        fn = fns[words[0]]
        fn()  # warm-up: the caller's own buffer was in the cache until now
        secs = []
        for _ in range(max(1, int(words[1]))):
            t0 = time.perf_counter()
            fn()
            secs.append(time.perf_counter() - t0)
        print("secs " + " ".join(f"{t:.9f}" for t in secs), flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cols", type=int, default=768)
    ap.add_argument("--sizes", default="24,256")
    ap.add_argument("--reps", default="11,5")
    ap.add_argument("--serve", action="store_true")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    reps = [int(r) for r in a.reps.split(",")]
    reps += [reps[-1]] * (len(sizes) - len(reps))

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
    print(f"python {sys.version.split()[0]} ({sys.executable})"
          + (f", numpy {np.__version__}" if np is not None else "")
          + (f", torch {torch.__version__}" if torch is not None else ""))

    rng = np.random.default_rng(1) if np is not None else None
    for mib, nrep in zip(sizes, reps):
        nbytes = mib * 1024 * 1024
        if np is not None:
            for dt, name in ((np.float32, "f32"), (np.float16, "f16"), (np.float64, "f64")):
                rows = nbytes // (a.cols * np.dtype(dt).itemsize)
                x = rng.standard_normal((rows, a.cols), dtype=np.float32).astype(dt)
                emit("numpy", name, mib, 1,
                     timed(lambda: np.linalg.norm(x, axis=1), x.nbytes, nrep))
                del x
        if torch is not None:
            for dt, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16"),
                             (torch.float16, "f16"), (torch.float64, "f64")):
                itemsize = torch.tensor([], dtype=dt).element_size()
                rows = nbytes // (a.cols * itemsize)
                x = torch.randn(rows, a.cols, dtype=torch.float32).to(dt)
                for threads in (1, 2):
                    torch.set_num_threads(threads)
                    emit("torch", name, mib, threads,
                         timed(lambda: torch.linalg.vector_norm(x, dim=-1),
                               x.numel() * itemsize, nrep))
                del x
    return 0


if __name__ == "__main__":
    sys.exit(main())
