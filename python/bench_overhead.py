#!/usr/bin/env python3
"""bench_overhead.py - what attaching resdiag costs a torch training step.

Every step recorded (all block and model sites forward and backward, the
parameter gradients), forward + backward timed by the thread's CPU clock
(time.thread_time; torch runs on one thread, --threads 1) beside the wall
clock. The variants of a case run interleaved, one step each per
repetition (the order rotates every repetition); figures are medians with
min-max over the repetitions, and an overhead is the median of the
per-repetition differences to the plain step, over the plain step's median.

1. A 6-layer d=512 nn.TransformerEncoder (8 heads, FF 2048, batch 8 x 64,
   dropout 0.1, train mode, float32): plain; the C kernel path (CPU
   tensors read in place, the default); the device path (device_stats=
   "always": torch ops on the tensor's device, one copy to the host per
   step); the copy path (device_stats="never" with every tensor copied
   whole before the C kernel, as a GPU tensor is copied to the host).
2. A nanoGPT-shaped GPT (12 layers, d=384, 6 heads, vocab 65, batch 4 x
   256 tokens, no dropout) in float32 and bfloat16: plain vs the default
   path. The judged line is `target binding-f32-step-overhead`: the whole
   cost of attaching, i.e. the median of the per-repetition differences of
   the step's CPU time (forward + backward, no optimizer) with and without
   attach, over the plain median, goal <= 2 %. `target
   binding-bf16-step-overhead` is judged the same way only where bf16
   matmuls run at least half as fast as float32 on this CPU (a (1024x384)
   @ (384x1536) matmul timed in both dtypes in the same run): elsewhere a
   slow bf16 step makes any overhead look small, and the line says "not
   judged here" with the measured ratio (the bf16 steps are then not run).
   Info lines, not targets: the CPU time inside resdiag's hooks and step
   calls (what the binding's own code costs; it leaves out torch's
   dispatch of the hooks and any effect on the trainer's own work), the
   user and system CPU time and page faults of the steps (a loaded machine
   moves the system time by tens of ms per step), and the hooks: how many
   are registered per step and what torch's dispatch of them costs,
   measured in the same run on no-op hooks.
3. The binding's fixed cost per site: one observe of a (1, d) bf16 tensor
   (no kernel time to speak of), per path, with its share of the step's
   submission on the C kernel path.

    RESDIAG_LIBRARY=build/libresdiag.so /usr/bin/python3 python/bench_overhead.py [--reps 9]
"""
import argparse
import copy
import functools
import math
import os
import resource
import statistics
import sys
import tempfile
import time
import warnings

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import resdiag  # noqa: E402
from resdiag import _tensor, recorder as _recorder  # noqa: E402


# ------------------------------------------------------------ models
class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        att = att.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        y = (att.softmax(-1) @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.c_fc = nn.Linear(d, 4 * d)
        self.c_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        return self.c_proj(nn.functional.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = MLP(d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """nanoGPT's layout (wte, wpe, h, ln_f, lm_head)."""

    def __init__(self, layers, d, heads, seq, vocab):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(seq, d)
        self.h = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


# ------------------------------------------------------------ timing
COPY_ALL = [False]  # the emulated copy path: as_2d copies every tensor first
_as_2d = _tensor.as_2d


def _copying_as_2d(t):
    return _as_2d(t.detach().clone() if COPY_ALL[0] else t)


_tensor.as_2d = _copying_as_2d


# CPU time spent inside resdiag's hooks and step calls (Python, ctypes, the
# statistics), summed directly: an info figure beside the step difference
# (it leaves out torch's own cost of calling the hooks and any effect on
# the trainer's work; the two clock reads per call add about 0.2 ms a step
# to the recorded variant, within the target's noise). TENSOR_HOOKS: the
# tensor hooks a step registered, counted as the step ends.
INSIDE = [0.0]
TENSOR_HOOKS = [0]
_HOOKS = ("_block_in", "_block_out", "_norm_in", "_norm_out", "_branch_in", "_branch_out",
          "_out_norm_in", "_out_norm_out", "_final_in", "_final_out", "_head_in", "_head_out",
          "_grads", "begin_step", "end_step")


def _timed(fn):
    def wrapper(*args, **kw):
        c0 = time.thread_time()
        try:
            return fn(*args, **kw)
        finally:
            INSIDE[0] += time.thread_time() - c0
    return wrapper


def _counting(fn):
    def end_step(self, *args, **kw):
        TENSOR_HOOKS[0] = len(self._thooks)
        return fn(self, *args, **kw)
    return end_step


for _name in _HOOKS:
    setattr(resdiag.Recorder, _name, _timed(getattr(resdiag.Recorder, _name)))
resdiag.Recorder.end_step = _counting(resdiag.Recorder.end_step)


def load():
    return " ".join("%.1f" % x for x in os.getloadavg())


def spread(xs, scale=1e3):
    return "%.1f (%.1f-%.1f)" % (scale * statistics.median(xs), scale * min(xs), scale * max(xs))


class Step:
    """One timed step: CPU (time.thread_time), wall, CPU inside resdiag,
    the thread's user and system CPU time and minor page faults."""
    __slots__ = ("cpu", "wall", "inside", "user", "sys", "faults")

    def __init__(self, *values):
        for k, v in zip(self.__slots__, values):
            setattr(self, k, v)


def run_case(title, make_model, make_loss, variants, reps, tmp):
    """variants: [(name, attach keywords or None for plain, copy_all)].
    Returns ({name: [Step]}, {name: (tensor hooks per step, module hooks)})."""
    models, recs = {}, {}
    base = make_model()
    for name, kw, _ in variants:
        models[name] = copy.deepcopy(base)
        if kw is not None:
            recs[name] = resdiag.attach(models[name], os.path.join(tmp, name + ".h5"),
                                        overwrite=True, **kw)
    times = {name: [] for name, _, _ in variants}
    hooks = {name: (0, len(rec._hooks)) for name, rec in recs.items()}
    order = list(variants)
    thread = resource.RUSAGE_THREAD
    for i in range(reps + 1):  # the first repetition warms up
        for name, kw, copy_all in order:
            model = models[name]
            model.zero_grad(set_to_none=True)
            COPY_ALL[0] = copy_all
            INSIDE[0] = 0.0
            r0 = resource.getrusage(thread)
            c0, w0 = time.thread_time(), time.perf_counter()
            if name in recs:
                with recs[name].step(i):
                    make_loss(model).backward()
            else:
                make_loss(model).backward()
            c1, w1 = time.thread_time(), time.perf_counter()
            r1 = resource.getrusage(thread)
            COPY_ALL[0] = False
            if name in recs:
                hooks[name] = (TENSOR_HOOKS[0], hooks[name][1])
            if i:
                times[name].append(Step(c1 - c0, w1 - w0, INSIDE[0], r1.ru_utime - r0.ru_utime,
                                        r1.ru_stime - r0.ru_stime, r1.ru_minflt - r0.ru_minflt))
        order = order[1:] + order[:1]
    for rec in recs.values():
        rec.detach()
        if rec.errors:
            print("  (%s: %d failed calls: %s)" % (title, rec.errors, rec.first_error))
    plain = times[variants[0][0]]
    print(title)
    for name, kw, _ in variants:
        t = times[name]
        line = "  %-28s CPU %s ms, wall %s ms" % (name, spread([x.cpu for x in t]),
                                                   spread([x.wall for x in t]))
        if kw is not None:
            line += ", overhead %s" % overhead_text(plain, t)
            inside = [x.inside for x in t]
            line += "\n  %-28s inside resdiag CPU %s ms = %.2f %% of the plain step" % (
                "", spread(inside), 100 * statistics.median(inside)
                / statistics.median(a.cpu for a in plain))
        print(line)
    return times, hooks


def diffs(plain, other, k="cpu"):
    """The per-repetition differences of figure k."""
    return [getattr(b, k) - getattr(a, k) for a, b in zip(plain, other)]


def overhead(plain, other, k="cpu"):
    """Median of the per-repetition differences over the plain median, and
    the differences."""
    d = diffs(plain, other, k)
    return statistics.median(d) / statistics.median(getattr(a, k) for a in plain), d


def overhead_text(plain, other):
    cpu, d = overhead(plain, other)
    wall, _ = overhead(plain, other, "wall")
    return "%+.2f %% CPU (%+.1f ms, %.1f to %.1f), %+.2f %% wall" % (
        100 * cpu, 1e3 * statistics.median(d), 1e3 * min(d), 1e3 * max(d), 100 * wall)


def matmul_speed_ratio(reps=7, calls=5):
    """bf16 matmul speed over float32's on this CPU: a (1024x384) @
    (384x1536) matmul (the MLP's first matmul of the GPT case), thread CPU
    time, the dtypes interleaved; the median of the per-repetition ratios
    and their min-max."""
    torch.manual_seed(0)
    a, b = torch.randn(1024, 384), torch.randn(384, 1536)
    pairs = {dt: (a.to(dt), b.to(dt)) for dt in (torch.float32, torch.bfloat16)}
    for x, y in pairs.values():
        x @ y  # warm-up
    ratios = []
    for _ in range(reps):
        t = {}
        for dt, (x, y) in pairs.items():
            c0 = time.thread_time()
            for _ in range(calls):
                x @ y
            t[dt] = time.thread_time() - c0
        ratios.append(t[torch.float32] / t[torch.bfloat16])
    return statistics.median(ratios), min(ratios), max(ratios)


def hook_dispatch_cost(n=2000, reps=9):
    """CPU microseconds torch spends on no-op hooks, measured in this run:
    (one tensor hook registered in the forward and called in the backward,
    one module call with a forward pre-hook and a forward hook), each over
    the same work without the hook, medians of reps."""
    def chain(hooked):
        x = torch.randn(1, 8, requires_grad=True)
        c0 = time.thread_time()
        y = x
        for i in range(n):
            y = y * 1.0
            if hooked:
                y.register_hook(functools.partial(_no_tensor_hook, i))
        loss = y.sum()
        c1 = time.thread_time()
        loss.backward()
        return time.thread_time() - c1 + (c1 - c0)

    class Identity(nn.Module):
        def forward(self, x):
            return x

    mods = [Identity() for _ in range(n)]

    def calls():
        x = torch.zeros(1)
        c0 = time.thread_time()
        for m in mods:
            m(x)
        return time.thread_time() - c0

    chain(False), chain(True)
    bare = statistics.median(chain(False) for _ in range(reps))
    with_hooks = statistics.median(chain(True) for _ in range(reps))
    mod_bare = statistics.median(calls() for _ in range(reps))
    for m in mods:
        m.register_forward_pre_hook(functools.partial(_no_pre_hook, 0))
        m.register_forward_hook(functools.partial(_no_post_hook, 0))
    mod_hooked = statistics.median(calls() for _ in range(reps))
    return 1e6 * (with_hooks - bare) / n, 1e6 * (mod_hooked - mod_bare) / n


def _no_tensor_hook(i, g):
    return None


def _no_pre_hook(i, module, args):
    return None


def _no_post_hook(i, module, args, output):
    return None


# bf16 is judged only where its matmuls run at least this fraction of
# float32's speed: below it a slow bf16 step makes any overhead look small.
BF16_MIN_RATIO = 0.5


def bf16_not_judged(ratio):
    """The bf16 target line where bf16 matmuls are too slow to judge it,
    else None."""
    if ratio >= BF16_MIN_RATIO:
        return None
    return ("target binding-bf16-step-overhead: not judged here (bf16 matmul runs at %.3f of "
            "float32's speed on this CPU, below %.1f: a slow bf16 step makes any overhead look "
            "small; load average %s)" % (ratio, BF16_MIN_RATIO, load()))


def step_target(name, dtype_name, plain, rec, reps):
    """The judged line of one dtype: the paired step difference."""
    ratio, d = overhead(plain, rec)
    base = [x.cpu for x in plain]
    print("target %s: measured %+.2f %%, goal <= 2 %%, %s (paired step CPU time with and "
          "without attach, %s, forward + backward, median of %d interleaved repetitions' "
          "differences %+.1f ms (%.1f to %.1f) over the plain step's median %.1f ms "
          "(%.1f-%.1f); load average %s)"
          % (name, 100 * ratio, "met" if ratio <= 0.02 else "missed", dtype_name, reps,
             1e3 * statistics.median(d), 1e3 * min(d), 1e3 * max(d),
             1e3 * statistics.median(base), 1e3 * min(base), 1e3 * max(base), load()))


def info_lines(dtype_name, plain, rec, hooks, dispatch):
    """What the step difference is made of, beside the target."""
    base = statistics.median(x.cpu for x in plain)
    inside = statistics.median(x.inside for x in rec)
    diff = overhead(plain, rec)[0]
    print("info binding-%s-inside-resdiag: %.2f %% of the plain step (CPU time inside "
          "resdiag's hooks and step calls, median %.1f ms; not a target: it leaves out "
          "torch's hook dispatch and any effect on the trainer's own work); step "
          "difference minus it %+.2f %%"
          % (dtype_name, 100 * inside / base, 1e3 * inside, 100 * diff - 100 * inside / base))
    for k, what in (("user", "user CPU"), ("sys", "system CPU")):
        d = diffs(plain, rec, k)
        print("info binding-%s-%s: plain %s ms, recorded %s ms, paired difference median "
              "%+.1f ms (%.1f to %.1f)"
              % (dtype_name, k, spread([getattr(x, k) for x in plain]),
                 spread([getattr(x, k) for x in rec]), 1e3 * statistics.median(d),
                 1e3 * min(d), 1e3 * max(d)))
    fp = [x.faults for x in plain]
    fr = [x.faults for x in rec]
    print("info binding-%s-page-faults: plain %d (%d-%d), recorded %d (%d-%d) minor faults "
          "per step" % (dtype_name, statistics.median(fp), min(fp), max(fp),
                        statistics.median(fr), min(fr), max(fr)))
    tensor_hooks, module_hooks = hooks
    tensor_us, module_us = dispatch
    # A module hook pair is one call of each of a pre and a post hook:
    # module_us counts a pair, the registered hooks are counted one by one.
    cost = tensor_hooks * tensor_us + module_hooks * module_us / 2
    print("info binding-%s-hooks: %d tensor hooks and %d module hooks per step; torch's "
          "dispatch of no-op hooks costs %.2f us per tensor hook (registered and called) and "
          "%.2f us per module pre+post pair here, about %.3f ms = %.3f %% of the plain step"
          % (dtype_name, tensor_hooks, module_hooks, tensor_us, module_us, 1e-3 * cost,
             1e-4 * cost / base))


def per_site_cost(tmp, d=384, n=2000):
    """CPU microseconds of one observe() of a (1, d) bf16 tensor, by path."""
    model = GPT(1, d, 6, 8, 65)
    out = {}
    warnings.simplefilter("ignore", RuntimeWarning)  # no backward here: no gradients
    for mode in ("never", "always") if resdiag._lib.HAS_PARTIALS else ("never",):
        rec = resdiag.attach(model, os.path.join(tmp, "site-%s.h5" % mode), overwrite=True,
                             device_stats=mode)
        x = torch.randn(1, d, dtype=torch.bfloat16)
        cs = rec._cs[(0, "in")]
        runs = []
        for step in range(5):
            with rec.step(step):
                c0 = time.thread_time()
                for _ in range(n):
                    rec._observe(x, 0, 0, _recorder.S_STREAM_IN, cs)
                rec._submit_kernel()  # the C kernel path submits a step's sites at its end
                runs.append((time.thread_time() - c0) / n)
        rec.detach()
        out[mode] = runs
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=9)
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--gpt-batch", type=int, default=4)
    p.add_argument("--gpt-seq", type=int, default=256)
    p.add_argument("--skip-encoder", action="store_true")
    p.add_argument("--bf16-ratio", type=float, default=None,
                   help="take this bf16/float32 matmul speed ratio instead of the measured one "
                   "(to see the other verdict's path)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    print("torch %s, %d thread(s), %d repetitions, load average %s"
          % (torch.__version__, torch.get_num_threads(), a.reps, load()))
    ratio = matmul_speed_ratio()
    print("bf16 matmul (1024x384)@(384x1536) runs at %.3f (%.3f-%.3f) of float32's speed "
          "on this CPU" % ratio)
    if a.bf16_ratio is not None:
        ratio = (a.bf16_ratio,) * 3
        print("(--bf16-ratio: taken as %.3f)" % a.bf16_ratio)
    dispatch = hook_dispatch_cost()
    with tempfile.TemporaryDirectory() as tmp:
        if not a.skip_encoder:
            torch.manual_seed(0)
            x = torch.randn(8, 64, 512)

            def encoder():
                layer = nn.TransformerEncoderLayer(512, 8, 2048, 0.1, batch_first=True)
                return nn.TransformerEncoder(layer, 6, enable_nested_tensor=False).train()

            run_case("6-layer d=512 encoder, float32, 512 tokens (ms per step, median (min-max))",
                     encoder, lambda m: m(x).pow(2).mean(),
                     [("plain", None, False), ("C kernel path (default)", {}, False),
                      ("device path (always)", {"device_stats": "always"}, False),
                      ("copy path (never + copy)", {"device_stats": "never"}, True)],
                     a.reps, tmp)
        results = {}
        not_judged = bf16_not_judged(ratio[0])
        dtypes = [torch.float32] + ([] if not_judged else [torch.bfloat16])
        for dtype in dtypes:
            torch.manual_seed(0)
            idx = torch.randint(0, 65, (a.gpt_batch, a.gpt_seq))
            target = torch.randint(0, 65, (a.gpt_batch, a.gpt_seq))

            def loss(m, idx=idx, target=target):
                return nn.functional.cross_entropy(m(idx).float().reshape(-1, 65),
                                                   target.reshape(-1))

            name = str(dtype).replace("torch.", "")
            results[name] = run_case(
                "nanoGPT-shaped 12x384, %s, %d tokens (%d x %d)"
                % (name, a.gpt_batch * a.gpt_seq, a.gpt_batch, a.gpt_seq),
                lambda dtype=dtype: GPT(12, 384, 6, a.gpt_seq, 65).to(dtype),
                loss, [("plain", None, False), ("recorded (default)", {}, False)], a.reps, tmp)
        sites = per_site_cost(tmp)
        for mode, runs in sites.items():
            print("fixed cost per site (observe of a (1, 384) bf16 tensor, %s path): %s us CPU"
                  % ("C kernel" if mode == "never" else "device", spread(runs, 1e6)))
    short = {"float32": "f32", "bfloat16": "bf16"}
    for name, (times, hooks) in results.items():
        info_lines(short[name], times["plain"], times["recorded (default)"],
                   hooks["recorded (default)"], dispatch)
    for name, (times, hooks) in results.items():
        step_target("binding-%s-step-overhead" % short[name], name, times["plain"],
                    times["recorded (default)"], a.reps)
    if not_judged:
        print(not_judged)
    return 0


if __name__ == "__main__":
    sys.exit(main())
