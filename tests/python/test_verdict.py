"""The library's verdict on runs recorded from torch models is right:
nn.TransformerEncoder with norm_first True/False at L = 2, 6, 12 with
default and Xavier init, nn.TransformerDecoder, and a GPT-2-style block
written here (pre-norm, and the same block rewired post-norm: the preset
maps it from the order the hooks fire, not from a declaration). Python's
report is the tool's (resdiag report --json) when $RESDIAG_TOOL is set."""
import json
import math
import os
import subprocess
import unittest

import torch
import torch.nn as nn

from common import Seq, encoder, tmpdir, xavier
import resdiag

D, B, T, V = 32, 4, 16, 32


def record(model, path, make_input, steps=1, **kw):
    """Trains `steps` steps with resdiag attached; returns the analysis."""
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    rec = resdiag.attach(model, path, overwrite=True, **kw)  # the cases share one path
    # meson runs these tests a second time with every tensor through the device path
    assert rec.device_stats == os.environ.get("RESDIAG_DEVICE_STATS", "auto")
    for step in range(steps):
        with rec.step(step):
            x, target = make_input()
            logits = model(x)
            nn.functional.cross_entropy(logits.reshape(-1, V), target.reshape(-1)).backward()
        opt.step()
        opt.zero_grad()
    rec.detach()
    with resdiag.open(path) as run:
        return run.analyze()


def embedded_input():
    return torch.randn(B, T, D), torch.randint(0, V, (B, T))


# A GPT-2-style model, written out here (nanoGPT's layout and init).
class Attention(nn.Module):
    def __init__(self, d, heads, dropout):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.resid_dropout = nn.Dropout(dropout)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        att = att.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        y = (att.softmax(-1) @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, d, dropout):
        super().__init__()
        self.c_fc = nn.Linear(d, 4 * d)
        self.c_proj = nn.Linear(4 * d, d)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(nn.functional.gelu(self.c_fc(x))))


class GPT2Block(nn.Module):
    def __init__(self, d, heads, dropout, post=False):
        super().__init__()
        self.post = post
        self.ln_1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads, dropout)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = MLP(d, dropout)

    def forward(self, x):
        if self.post:
            x = self.ln_1(x + self.attn(x))
            return self.ln_2(x + self.mlp(x))
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, L, d, heads=4, dropout=0.1, post=False):
        super().__init__()
        self.wte = nn.Embedding(V, d)
        self.wpe = nn.Embedding(T, d)
        self.h = nn.ModuleList(GPT2Block(d, heads, dropout, post) for _ in range(L))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, V, bias=False)
        for name, p in self.named_parameters():
            if p.dim() > 1:
                std = 0.02 / math.sqrt(2 * L) if name.endswith("c_proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def token_input():
    idx = torch.randint(0, V, (B, T))
    return idx, idx.roll(-1, dims=1)


class Decoder(nn.Module):
    def __init__(self, L, norm_first):
        super().__init__()
        layer = nn.TransformerDecoderLayer(D, 4, 4 * D, 0.1, batch_first=True, norm_first=norm_first)
        self.dec = nn.TransformerDecoder(layer, L, norm=nn.LayerNorm(D))
        self.head = nn.Linear(D, V)
        self.memory = torch.randn(B, T, D)

    def forward(self, x):
        return self.head(self.dec(x, self.memory))


class ParallelBlock(nn.Module):
    """GPT-J style, named freely: x + attn(norm(x)) + ff(norm(x))."""

    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.attn = Attention(d, 4, 0.0)
        self.ff = MLP(d, 0.0)

    def forward(self, x):
        h = self.norm(x)
        return x + self.attn(h) + self.ff(h)


class ParallelModel(nn.Module):
    def __init__(self, L):
        super().__init__()
        self.blocks = nn.ModuleList(ParallelBlock(D) for _ in range(L))
        self.out = nn.Linear(D, V)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.out(x)


PARALLEL_SPEC = resdiag.Block([resdiag.Sublayer("attn", norm="norm", branch="attn"),
                               resdiag.Sublayer("mlp", norm="norm", branch="ff")],
                              params={"mlp.w2": "ff.c_proj.weight"}, parallel=True)


class Verdict(unittest.TestCase):
    def test_encoder_matrix(self):
        seen = []
        with tmpdir() as tmp:
            for norm_first in (True, False):
                for L in (2, 6, 12):
                    for init in ("default", "xavier"):
                        torch.manual_seed(L * 10 + norm_first)
                        model = Seq(encoder(L, D, norm_first, dropout=0.1, final_norm=norm_first), D, V)
                        if init == "xavier":
                            xavier(model)
                        a = record(model, tmp + "/run.h5", embedded_input)
                        want = "pre" if norm_first else "post"
                        with self.subTest(norm_first=norm_first, L=L, init=init):
                            self.assertEqual(a.verdict, want)
                            self.assertEqual(a.check(want)[0], 0)
                            self.assertEqual(a.check("post" if norm_first else "pre")[0], 1)
                            self.assertFalse(a.stream_only)
                            for l in range(L):
                                for s in range(2):
                                    self.assertEqual(a.sublayer(l, s)[0], want)
                            self.assertEqual(a.final_norm, norm_first)
                        seen.append(a.verdict)
        self.assertEqual(len(seen), 12)

    def test_gpt2_block(self):
        with tmpdir() as tmp:
            for L, post in ((2, False), (6, False), (12, False), (6, True)):
                torch.manual_seed(L)
                a = record(GPT(L, D, post=post), tmp + "/run.h5", token_input, steps=2)
                with self.subTest(L=L, post=post):
                    self.assertEqual(a.verdict, "post" if post else "pre")
                    rep = a.json()
                    self.assertEqual(rep["run"]["n_layers"], L)
                    self.assertEqual(rep["observed"]["forward"]["final_norm_out"], 1)
                    self.assertEqual(rep["observed"]["forward"]["logits"], 1)

    def test_decoder(self):
        with tmpdir() as tmp:
            for norm_first in (True, False):
                torch.manual_seed(7)
                a = record(Decoder(2, norm_first), tmp + "/run.h5", embedded_input)
                with self.subTest(norm_first=norm_first):
                    self.assertEqual(a.json()["run"]["sublayer_names"], ["attn", "cross", "mlp"])
                    self.assertEqual(a.verdict, "pre" if norm_first else "post")

    def test_custom_parallel_block(self):
        with tmpdir() as tmp:
            torch.manual_seed(9)
            model = ParallelModel(4)
            with self.assertRaises(ValueError):  # no preset fits: the spec must be given
                resdiag.attach(model, tmp + "/run.h5")
            a = record(model, tmp + "/run.h5", embedded_input, blocks=model.blocks,
                       block=PARALLEL_SPEC, head=model.out)
            self.assertEqual(a.json()["run"]["block"], "parallel")
            self.assertEqual(a.verdict, "parallel")

    def test_declared_placement_does_not_decide(self):
        # A post-norm model declared pre-norm is still found post-norm, and
        # `check --expect pre` fails on it.
        with tmpdir() as tmp:
            torch.manual_seed(5)
            a = record(Seq(encoder(6, D, False, dropout=0.1, final_norm=False), D, V),
                       tmp + "/run.h5", embedded_input, placement="pre")
            self.assertEqual(a.json()["run"]["declared_placement"], "pre")
            self.assertEqual(a.verdict, "post")
            self.assertEqual(a.check("pre")[0], 1)

    def test_same_report_as_the_tool(self):
        tool = os.environ.get("RESDIAG_TOOL")
        if not tool:
            self.skipTest("RESDIAG_TOOL not set")
        with tmpdir() as tmp:
            for norm_first in (True, False):
                torch.manual_seed(11)
                path = tmp + "/run%d.h5" % norm_first
                record(Seq(encoder(6, D, norm_first, dropout=0.1), D, V), path, embedded_input,
                       steps=3)
                with resdiag.open(path) as run:
                    a = run.analyze()
                    out = subprocess.run([tool, "report", "--json", path], capture_output=True,
                                         text=True, check=True).stdout
                    self.assertEqual(json.loads(out), a.json())
                    self.assertEqual(json.loads(out)["placement"]["verdict"],
                                     "pre" if norm_first else "post")
                    self.assertEqual(a.verdict, "pre" if norm_first else "post")
                    text = subprocess.run([tool, "report", path], capture_output=True, text=True,
                                          check=True).stdout
                    self.assertIn(a.text(), text)
                    self.assertIn(a.verdict + "-norm", text)
                    rc = subprocess.run([tool, "check", "--expect", a.verdict, path],
                                        capture_output=True).returncode
                    self.assertEqual(rc, 0)


if __name__ == "__main__":
    unittest.main()
