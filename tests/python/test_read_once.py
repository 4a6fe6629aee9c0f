"""The C kernel path reads a tensor once for all the sites that see it and
submits a step's sites together at the step's end: what it records is
still, field for field, what the definitions give for the tensors the
model made (numpy float64 of copies taken by hooks of this test, not by
the binding), the per-token update ratio is the library's pairing of the
row norms, the sites keep the order the hooks ran in (CALL_SEQ), and a
tensor changed in place between two sites is read again at the second;
buffers too small for a step are submitted early with the same result."""
import unittest
import warnings

import numpy as np
import torch
import torch.nn as nn

from common import tmpdir
import resdiag
from resdiag import _kernel, _lib

D, L, V, B, T = 32, 2, 17, 3, 8
SITES = resdiag.SITES
# the float kernels sum rows in float lanes (doc/FORMAT.md, "Precision"):
# every recorded field is within this of its float64 value, relative to
# the scale of its family
TOL = 2e-5


class Block(nn.Module):
    """nanoGPT's block layout (ln_1, attn, ln_2, mlp) with a plain MLP for
    the attention."""

    def __init__(self, d):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = nn.Sequential(nn.Linear(d, d), nn.Tanh())
        self.attn.c_proj = self.attn[0]
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.mlp.c_fc, self.mlp.c_proj = self.mlp[0], self.mlp[2]

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(V, D)
        self.h = nn.ModuleList(Block(D) for _ in range(L))
        self.ln_f = nn.LayerNorm(D)
        self.lm_head = nn.Linear(D, V, bias=False)

    def forward(self, idx):
        x = self.wte(idx)
        for b in self.h:
            x = b(x)
        return self.lm_head(self.ln_f(x))


def fields(x):
    """The recorded fields of a tensor's values (no NaN or Inf here), in
    float64, from their definitions (doc/PARTIAL.md)."""
    x = np.asarray(x, dtype=np.float64).reshape(-1, x.shape[-1])
    rows, cols = x.shape
    n = np.sqrt((x * x).sum(1))
    m = x.sum(1) / cols
    q = n / np.sqrt(cols)
    s = np.sqrt(((x - m[:, None]) ** 2).sum(1) / cols)
    a = np.abs(x)
    at = int(np.argmax(a))  # the first in row order: its row first, then its column
    return {"rows": rows, "cols": cols, "frob": float(np.sqrt((x * x).sum())),
            "tok_norm_mean": n.mean(), "tok_norm_std": n.std(), "tok_norm_min": n.min(),
            "tok_norm_max": n.max(), "tok_mean_mean": m.mean(), "tok_mean_std": m.std(),
            "tok_rms_mean": q.mean(), "tok_rms_std": q.std(), "tok_std_mean": s.mean(),
            "tok_std_std": s.std(), "absmax": float(a.max()), "absmax_col": at % cols,
            "nan_count": 0, "inf_count": 0, "_norms": n}


EXACT = ("rows", "cols", "absmax", "absmax_col", "nan_count", "inf_count")


def scale(want, f):
    """What an error in field f is measured against."""
    if f.startswith("tok_norm") or f == "frob":
        return want["tok_norm_mean"] if f != "frob" else want["frob"]
    rms = want["frob"] / np.sqrt(want["rows"] * want["cols"])
    return rms


class Capture:
    """Copies of every site's tensor (and its gradient) by hooks of our own,
    registered before resdiag's, in the order the sites are taken."""

    def __init__(self, model):
        self.fwd, self.grads, self.order = {}, {}, []
        self.hooks = []
        for l, b in enumerate(model.h):
            self._pre(b, [(l, 0, "stream_in")] + ([(-1, 0, "embed_out")] if l == 0 else []))
            self._pre(b.ln_1, [(l, 0, "norm_in")])
            self._post(b.ln_1, [(l, 0, "norm_out")])
            self._post(b.attn, [(l, 0, "branch_out")])
            self._pre(b.ln_2, [(l, 0, "stream_out"), (l, 1, "stream_in"), (l, 1, "norm_in")])
            self._post(b.ln_2, [(l, 1, "norm_out")])
            self._post(b.mlp, [(l, 1, "branch_out")])
            self._post(b, [(l, 1, "stream_out")])
        self._pre(model.ln_f, [(-1, 0, "final_norm_in")])
        self._post(model.ln_f, [(-1, 0, "final_norm_out")])
        self._post(model.lm_head, [(-1, 0, "logits")])

    def _take(self, t, keys):
        for k in keys:
            self.order.append(k)
            self.fwd[k] = t.detach().to(torch.float64).numpy().copy()

        def grad(g, keys=keys):
            for k in keys:
                self.grads[k] = g.detach().to(torch.float64).numpy().copy()
        t.register_hook(grad)

    def _pre(self, mod, keys):
        self.hooks.append(mod.register_forward_pre_hook(lambda m, a: self._take(a[0], keys)))

    def _post(self, mod, keys):
        self.hooks.append(mod.register_forward_hook(lambda m, a, o: self._take(o, keys)))


class ReadOnce(unittest.TestCase):
    def check(self, got, want, what):
        self.assertIsNotNone(got, what)
        for f in _lib.FIELDS:
            if f == "call_seq":
                continue
            if f in EXACT:
                self.assertEqual(got[f], want[f], "%s: %s" % (what, f))
            else:
                self.assertLessEqual(abs(got[f] - want[f]), TOL * scale(want, f),
                                     "%s: %s %r, float64 gives %r" % (what, f, got[f], want[f]))

    def run_model(self, dtype):
        torch.manual_seed(5)
        model = GPT().to(dtype)
        cap = Capture(model)
        idx = torch.randint(0, V, (B, T))
        with tmpdir() as tmp:
            path = tmp + "/run.h5"
            rec = resdiag.attach(model, path)
            params = {}
            for step in range(2):
                model.zero_grad()
                cap.order = []
                with rec.step(step):
                    logits = model(idx)
                    nn.functional.cross_entropy(logits.float().reshape(-1, V),
                                                idx.reshape(-1)).backward()
                for l, b in enumerate(model.h):
                    for name, p in (("attn.wo", b.attn.c_proj.weight),
                                    ("mlp.w1", b.mlp.c_fc.weight),
                                    ("mlp.w2", b.mlp.c_proj.weight)):
                        params[(step, l, name)] = p.grad.to(torch.float64).numpy().copy()
                params[(step, -1, "head.w")] = model.lm_head.weight.grad.to(
                    torch.float64).numpy().copy()
                if step == 0:
                    fwd, grads, order = dict(cap.fwd), dict(cap.grads), list(cap.order)
            rec.detach()
            self.assertEqual(rec.errors, 0, rec.first_error)
            with resdiag.open(path) as run:
                self.assertEqual(len(order), 10 * L + 4)
                seqs = []
                for (l, s, site) in order:
                    want = fields(fwd[(l, s, site)])
                    got = run.site(0, site, l, s)
                    self.check(got, want, "%s forward %s %d %d" % (dtype, site, l, s))
                    seqs.append(got["call_seq"])
                    self.check(run.site(0, site, l, s, "backward"), fields(grads[(l, s, site)]),
                               "%s backward %s %d %d" % (dtype, site, l, s))
                # the forward sites in the order their hooks ran
                self.assertEqual(seqs, sorted(seqs))
                self.assertEqual(len(set(seqs)), len(seqs))
                for (step, l, name), g in params.items():
                    self.check(run.param(step, l, name), fields(g),
                               "%s step %d gradient %s %d" % (dtype, step, name, l))
                for l in range(L):
                    for s in range(2):
                        x, dx = fields(fwd[(l, s, "stream_in")]), fields(fwd[(l, s, "branch_out")])
                        keep = x["_norms"] > 0
                        want_tok = float((dx["_norms"][keep] / x["_norms"][keep]).mean())
                        u = run.update(0, l, s)
                        self.assertLess(abs(u["ratio_frob"] / (dx["frob"] / x["frob"]) - 1), TOL)
                        self.assertLess(abs(u["ratio_tok_mean"] / want_tok - 1), TOL, (l, s))

    def test_float32(self):
        self.run_model(torch.float32)

    def test_bfloat16(self):
        self.run_model(torch.bfloat16)


class Budget(unittest.TestCase):
    def record(self, tmp, name):
        torch.manual_seed(7)
        model = GPT()
        idx = torch.randint(0, V, (B, T))
        path = "%s/%s.h5" % (tmp, name)
        rec = resdiag.attach(model, path)
        for step in range(2):
            model.zero_grad()
            with rec.step(step):
                nn.functional.cross_entropy(model(idx).reshape(-1, V), idx.reshape(-1)).backward()
        rec.detach()
        self.assertEqual(rec.errors, 0, rec.first_error)
        out = []
        with resdiag.open(path) as run:
            for si in range(2):
                for direction in ("forward", "backward"):
                    for l in range(L):
                        for s in range(2):
                            for site in ("stream_in", "norm_in", "norm_out", "branch_out",
                                         "stream_out"):
                                out.append(run.site(si, site, l, s, direction))
                    for site in ("embed_out", "final_norm_in", "final_norm_out", "logits"):
                        out.append(run.site(si, site, -1, 0, direction))
                for l in range(L):
                    out += [run.update(si, l, 0), run.update(si, l, 1)]
                    out += [run.param(si, l, n) for n in ("attn.wo", "mlp.w1", "mlp.w2")]
                out.append(run.param(si, -1, "head.w"))
        return out

    def test_full_buffers_are_submitted_early_with_the_same_result(self):
        """Buffers too small for a step: what waits is submitted early, in
        its order; every field (CALL_SEQ too) is the one-submission run's."""
        with tmpdir() as tmp:
            whole = self.record(tmp, "whole")
            saved = _kernel.NORMS_BUDGET, _kernel.PARTS_BUDGET
            _kernel.NORMS_BUDGET, _kernel.PARTS_BUDGET = 1, 3
            try:
                early = self.record(tmp, "early")
            finally:
                _kernel.NORMS_BUDGET, _kernel.PARTS_BUDGET = saved
        self.assertEqual(len(whole), len(early))
        for a, b in zip(whole, early):
            self.assertIsNotNone(a)
            self.assertEqual(a.keys(), b.keys())
            for k in a:
                self.assertTrue(a[k] == b[k] or (np.isnan(a[k]) and np.isnan(b[k])), (k, a, b))


class ChangedInPlace(nn.Module):
    """A block that scales its input in place before its norm reads it: the
    block's input hook and the norm's input hook see one tensor object,
    with different values."""

    def __init__(self, d):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.Linear(d, d)

    def forward(self, x):
        x.mul_(3.0)
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class InPlace(unittest.TestCase):
    def test_a_tensor_changed_in_place_is_read_again(self):
        torch.manual_seed(2)
        model = nn.Sequential(ChangedInPlace(D), ChangedInPlace(D))
        x = torch.randn(B, T, D)
        with tmpdir() as tmp, torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # no gradients: none recorded
            path = tmp + "/run.h5"
            rec = resdiag.attach(model, path, blocks=list(model), block=resdiag.GPT2_BLOCK,
                                 backward=False)
            with rec.step(0):
                before = x.clone()
                y0 = model[0](x)  # x is now 3 * before
                model[1](y0)
            rec.detach()
            with resdiag.open(path) as run:
                s_in = run.site(0, "stream_in", 0, 0)
                n_in = run.site(0, "norm_in", 0, 0)
                self.assertLess(abs(s_in["frob"] / fields(before.numpy())["frob"] - 1), TOL)
                self.assertLess(abs(n_in["frob"] / fields(x.numpy())["frob"] - 1), TOL)
                self.assertLess(abs(n_in["frob"] / s_in["frob"] - 3), 3 * TOL)
                # and the layer after: its input is the first layer's output,
                # changed in place after the first layer's stream_out
                s_out = run.site(0, "stream_out", 0, 1)
                self.assertLess(abs(run.site(0, "norm_in", 1, 0)["frob"] / s_out["frob"] - 3),
                                3 * TOL)

    def test_the_same_unchanged_tensor_is_read_once(self):
        torch.manual_seed(3)
        model = GPT()
        idx = torch.randint(0, V, (B, T))
        reads = []
        compute = _lib.lib.resdiag_partial_compute

        def counting(*a):
            reads.append(a[1].rows)
            return compute(*a)
        with tmpdir() as tmp, warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # no gradients: none recorded
            rec = resdiag.attach(model, tmp + "/run.h5", backward=False)
            _lib.lib.resdiag_partial_compute = counting
            try:
                with torch.no_grad(), rec.step(0):
                    model(idx)
            finally:
                _lib.lib.resdiag_partial_compute = compute
            rec.detach()
        # per layer: ln_1's output, attn's, the stream after it, ln_2's, mlp's,
        # the layer's output (the next one's input); then the embedding
        # (stream_in of layer 0), ln_f's output and the logits: 6 L + 3 reads
        # for 10 L + 4 sites
        self.assertEqual(len(reads), 6 * L + 3)


if __name__ == "__main__":
    unittest.main()
