"""Models laid out as nanoGPT and minGPT lay theirs out, written here: the
final norm at model.transformer.ln_f is found and reported present (from
the data), every sublayer is recorded (minGPT's MLP is a ModuleDict that is
never called), an Identity() in ln_f's place is reported absent, a model
without any final-norm site "not observed"; a mapped module that never runs
warns and its sublayer is "cannot tell"; the CLI's placement names are
accepted; gradients zeroed inside the step are told in words."""
import math
import unittest
import warnings

import torch
import torch.nn as nn

from common import tmpdir
import resdiag

D, B, T, V, HEADS = 32, 4, 16, 48, 4


class CausalSelfAttention(nn.Module):
    """nanoGPT's and minGPT's attention (c_attn, c_proj, residual dropout)."""

    def __init__(self, d):
        super().__init__()
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.attn_dropout = nn.Dropout(0.1)
        self.resid_dropout = nn.Dropout(0.1)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // HEADS)
        att = att.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        y = (self.attn_dropout(att.softmax(-1)) @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.resid_dropout(self.c_proj(y))


class NanoMLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.c_fc = nn.Linear(d, 4 * d)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * d, d)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class NanoBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = NanoMLP(d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class NewGELU(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


class MinBlock(nn.Module):
    """minGPT's Block: the MLP is a ModuleDict, run through a lambda."""

    def __init__(self, d):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = nn.ModuleDict(dict(c_fc=nn.Linear(d, 4 * d), c_proj=nn.Linear(4 * d, d),
                                      act=NewGELU(), dropout=nn.Dropout(0.1)))
        m = self.mlp
        self.mlpf = lambda x: m.dropout(m.c_proj(m.act(m.c_fc(x))))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlpf(self.ln_2(x))


class GPT(nn.Module):
    """nanoGPT's and minGPT's model: transformer.{wte, wpe, drop, h, ln_f},
    lm_head tied to wte. head_name renames lm_head (then no head is found)."""

    def __init__(self, block, L, head_name="lm_head"):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(V, D), wpe=nn.Embedding(T, D), drop=nn.Dropout(0.1),
            h=nn.ModuleList(block(D) for _ in range(L)), ln_f=nn.LayerNorm(D)))
        self.head_name = head_name
        setattr(self, head_name, nn.Linear(D, V, bias=False))
        self.transformer.wte.weight = getattr(self, head_name).weight
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * L))
            elif p.dim() > 1:
                nn.init.normal_(p, 0.0, 0.02)
            elif name.endswith("bias") and "ln" not in name:
                nn.init.zeros_(p)

    def forward(self, idx):
        tr = self.transformer
        x = tr.drop(tr.wte(idx) + tr.wpe(torch.arange(idx.shape[1])))
        for block in tr.h:
            x = block(x)
        return getattr(self, self.head_name)(tr.ln_f(x))


def train(model, path, steps=2, zero_inside=False, **kw):
    """Trains with resdiag attached; returns (recorder, analysis, warnings)."""
    torch.manual_seed(3)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rec = resdiag.attach(model, path, **kw)
        for step in range(steps):
            idx = torch.randint(0, V, (B, T))
            with rec.step(step):
                logits = model(idx)
                nn.functional.cross_entropy(logits.reshape(-1, V),
                                            idx.roll(-1, 1).reshape(-1)).backward()
                if zero_inside:  # the mistake: gradients gone before the step ends
                    opt.step()
                    opt.zero_grad(set_to_none=zero_inside == "none")
            if not zero_inside:
                opt.step()
                opt.zero_grad()
        rec.detach()
    with resdiag.open(path) as run:
        a = run.analyze()
        observed = {(l, s): run.site(0, "branch_out", layer=l, sublayer=s) is not None
                    for l in range(run.info.n_layers) for s in range(run.info.n_sublayers)}
    return rec, a, [str(w.message) for w in caught], observed


class Layouts(unittest.TestCase):
    def test_nanogpt_final_norm_found(self):
        with tmpdir() as tmp:
            for L in (2, 4):
                torch.manual_seed(L)
                rec, a, warned, observed = train(GPT(NanoBlock, L), tmp + "/nano%d.h5" % L)
                with self.subTest(L=L):
                    self.assertEqual(rec.final_norm_module, "transformer.ln_f")
                    self.assertEqual(rec.head_module, "lm_head")
                    self.assertEqual(a.verdict, "pre")
                    self.assertIs(a.final_norm, True)
                    self.assertIn("final norm: present", a.text())
                    self.assertNotIn("without a final norm", a.text())
                    self.assertEqual(a.check("pre", require_final_norm=True)[0], 0)
                    self.assertTrue(all(observed.values()), observed)
                    self.assertEqual(rec.not_run, [])
                    self.assertFalse([w for w in warned if "did not run" in w], warned)

    def test_mingpt_every_sublayer_recorded(self):
        with tmpdir() as tmp:
            for L in (2, 4):
                torch.manual_seed(L)
                model = GPT(MinBlock, L)
                rec, a, warned, observed = train(model, tmp + "/min%d.h5" % L)
                with self.subTest(L=L):
                    self.assertTrue(all(observed.values()), observed)
                    self.assertEqual(rec.not_run, [])
                    self.assertFalse([w for w in warned if "did not run" in w], warned)
                    self.assertEqual(rec.final_norm_module, "transformer.ln_f")
                    self.assertEqual(a.verdict, "pre")
                    for l in range(L):
                        for s in range(2):
                            self.assertEqual(a.sublayer(l, s)[0], "pre", (l, s))
                    self.assertEqual(rec.layer_param_names, ["attn.wo", "mlp.w1", "mlp.w2"])
                    self.assertEqual(a.check("pre", require_final_norm=True)[0], 0)

    def test_roles_are_declared_by_the_block(self):
        # The presets name mlp.w2 as the residual-write parameter; a Block
        # of the trainer's own names its own, or none; the library refuses
        # a role that is not among the recorded parameters, so an open that
        # succeeds got the binding's strings.
        with tmpdir() as tmp:
            torch.manual_seed(1)
            rec, a, _, _ = train(GPT(NanoBlock, 2), tmp + "/preset.h5")
            self.assertEqual(rec.residual_param, "mlp.w2")
            sub = resdiag.GPT2_BLOCK.sublayers
            for residual in ("attn.wo", None):
                spec = resdiag.Block(sub, params={"attn.wo": "attn.c_proj.weight",
                                                  "out": "mlp.c_proj.weight"},
                                     residual=residual)
                rec, a, _, _ = train(GPT(NanoBlock, 2), tmp + "/own-%s.h5" % residual,
                                     block=spec)
                self.assertEqual(rec.layer_param_names, ["attn.wo", "out"])
                self.assertEqual(rec.residual_param, residual)
        with self.assertRaisesRegex(ValueError, "residual='mlp.w2' is not one of params"):
            resdiag.Block(sub, params={"out": "mlp.c_proj.weight"}, residual="mlp.w2")

    def test_mapped_module_that_never_runs(self):
        # minGPT's block with the GPT-2 mapping: Block.mlp (the ModuleDict)
        # never runs. The binding says so, the sublayer is "cannot tell".
        with tmpdir() as tmp:
            torch.manual_seed(1)
            rec, a, warned, observed = train(GPT(MinBlock, 3), tmp + "/run.h5",
                                             block=resdiag.GPT2_BLOCK)
            self.assertEqual(rec.not_run, ["transformer.h.%d.mlp" % l for l in range(3)])
            hits = [w for w in warned if "did not run" in w]
            self.assertEqual(len(hits), 1, warned)
            self.assertIn("transformer.h.0.mlp (layer 0 mlp branch", hits[0])
            for l in range(3):
                self.assertTrue(observed[(l, 0)])
                self.assertFalse(observed[(l, 1)])
                self.assertEqual(a.sublayer(l, 0)[0], "pre")
                self.assertEqual(a.sublayer(l, 1)[0], "cannot_tell")
            text = a.text()
            self.assertIn("mlp    ?            branch_out not observed; cannot tell", text)
            self.assertIn("branch_out not observed while the other sites are, in 3 of 6", text)

    def test_identity_final_norm_is_absent(self):
        with tmpdir() as tmp:
            torch.manual_seed(2)
            model = GPT(NanoBlock, 3)
            model.transformer.ln_f = nn.Identity()
            rec, a, warned, observed = train(model, tmp + "/run.h5")
            self.assertEqual(rec.final_norm_module, "transformer.ln_f")
            self.assertEqual(a.verdict, "pre")
            self.assertIs(a.final_norm, False)
            self.assertIn("final norm: absent", a.text())
            self.assertIn("pre without a final norm", a.text())
            self.assertEqual(a.check("pre", require_final_norm=True)[0], 1)

    def test_no_final_norm_site_is_not_observed(self):
        # No module at any of the usual places, and the head under another
        # name: nothing about a final norm is recorded.
        with tmpdir() as tmp:
            torch.manual_seed(4)
            class NoLnF(nn.Module):
                def __init__(self, gpt):
                    super().__init__()
                    self.body = gpt.transformer.h
                    self.emb = gpt.transformer.wte
                    self.unembed = gpt.unembed

                def forward(self, idx):
                    x = self.emb(idx)
                    for blk in self.body:
                        x = blk(x)
                    return self.unembed(x)

            model = NoLnF(GPT(NanoBlock, 2, head_name="unembed"))
            rec, a, warned, observed = train(model, tmp + "/run.h5")
            self.assertIsNone(rec.final_norm_module)
            self.assertIsNone(rec.head_module)
            self.assertIsNone(a.final_norm)
            self.assertIn("final norm: not observed", a.text())
            self.assertNotIn("without a final norm", a.text())
            self.assertEqual(a.check("pre", require_final_norm=True)[0], 2)
            self.assertEqual(a.json()["placement"]["final_norm"], "not observed")

    def test_head_without_final_norm_is_absent(self):
        # No final norm, but the head is found: what reaches it is the last
        # block's output, so the data say there is none.
        with tmpdir() as tmp:
            torch.manual_seed(6)
            model = GPT(NanoBlock, 2)
            del model.transformer["ln_f"]

            def forward(idx, self=model):
                tr = self.transformer
                x = tr.wte(idx) + tr.wpe(torch.arange(idx.shape[1]))
                for block in tr.h:
                    x = block(x)
                return self.lm_head(x)
            model.forward = forward
            rec, a, warned, observed = train(model, tmp + "/run.h5")
            self.assertIsNone(rec.final_norm_module)
            self.assertEqual(rec.head_module, "lm_head")
            self.assertIs(a.final_norm, False)
            self.assertIn("final norm: absent", a.text())

    def test_placement_names(self):
        with tmpdir() as tmp:
            for i, (name, stored) in enumerate((("pre-norm", "pre"), ("post-norm", "post"),
                                                ("Sandwich", "sandwich"), ("peri-ln", "sandwich"),
                                                ("pre", "pre"), ("mix:1", "mixed"))):
                torch.manual_seed(i)
                rec = resdiag.attach(GPT(NanoBlock, 2), tmp + "/p%d.h5" % i, placement=name)
                rec.detach()
                with resdiag.open(tmp + "/p%d.h5" % i) as run, self.subTest(name=name):
                    self.assertEqual(run.info.declared_placement, stored)
                    if stored == "mixed":
                        self.assertEqual(run.info.declared_mix_layers, 1)
            with self.assertRaisesRegex(ValueError, "unknown placement 'prenorm2'.*pre-norm"):
                resdiag.attach(GPT(NanoBlock, 2), tmp + "/bad.h5", placement="prenorm2")

    def test_zero_grad_inside_step(self):
        with tmpdir() as tmp:
            for how in ("none", "zero"):  # zero_grad(set_to_none=True / False)
                torch.manual_seed(8)
                rec, a, warned, observed = train(GPT(NanoBlock, 2), tmp + "/%s.h5" % how,
                                                 zero_inside=how)
                with self.subTest(how=how):
                    hits = [w for w in warned if "inside rec.step()" in w]
                    self.assertEqual(len(hits), 1, warned)
                    self.assertIn("transformer.h.0.attn.c_proj.weight", hits[0])
                    self.assertIn("None" if how == "none" else "all zero", hits[0])
                    text = a.text()
                    self.assertIn("parameter gradients were zero or not available", text)
                    self.assertNotIn("last/first nan", text)


if __name__ == "__main__":
    unittest.main()
