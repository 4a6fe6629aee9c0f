"""Placement by structure, from torch: for every way of placing the norms
(structure_models.py: pre, post, sandwich, reordered, HybridNorm-like,
parallel, x-transformers-like pre and post), in float32 and bfloat16, with
LayerNorm and RMSNorm, at 2, 4 and 6 layers:

- Sites: every site read back from the run file is the tensor the model's
  own forward says it stands for (its statistics against float64 ones of
  that tensor, forward and gradient), the sites the model does not have
  are not observed, and the sites were recorded in the order the forward
  ran them (call_seq).
- Aliases: the sites the binding takes from one tensor are marked so
  (by construction), and only those.
- Verdicts: the library's verdict on each family (pre, post, sandwich,
  reordered, per_sublayer "attn: none, mlp: post", parallel; post for
  x-transformers' pre_norm=False, whose last norm is the final norm).
- Mappings: the errors of a mapping that cannot be right.
"""
import types
import unittest

import torch
import torch.nn as nn

from common import rel, tmpdir
import resdiag
from structure_models import FAMILIES, XTransformer, build, block_mapping, xt_mapping
import structure_models

D, B, T, V = 16, 2, 8, 16
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
NORM_KINDS = ("layernorm", "rmsnorm")
N_LAYERS = (2, 4, 6)
BLOCK_SITES = ("stream_in", "norm_in", "norm_out", "branch_out", "stream_out", "branch_in",
               "out_norm_in", "out_norm_out")
MODEL_SITES = ("embed_out", "final_norm_in", "final_norm_out", "logits")
# tests/helpers/path-bounds.h: a norm (the Frobenius norm, a token's norm)
# read in float lanes is within half a row sum's bound (24 * 2^-24) of
# itself, 1e-12 on the portable path; the file keeps it as a float32 (one
# more rounding, 2^-24). The values read are the tensor's own (float32 or
# bfloat16), the reference their float64 norms.
NORM_TOL = 12 * 2.0 ** -24 + 2.0 ** -24 + 1e-12
EXPECT = {"pre": "pre", "post": "post", "sandwich": "sandwich", "reordered": "reordered",
          "hybrid": "per_sublayer", "parallel": "parallel", "xt_pre": "pre", "xt_post": "post"}


def reference(t):
    """rows, frob, tok_norm_mean and absmax of t, in float64."""
    x = t.detach().to(torch.float64).reshape(-1, t.shape[-1])
    return {"rows": x.shape[0], "frob": float(torch.linalg.vector_norm(x)),
            "tok_norm_mean": float(torch.linalg.vector_norm(x, dim=-1).mean()),
            "absmax": float(x.abs().max())}


def read_back(run, L, step=0):
    """{(direction, layer, sublayer, site): statistics or None} and
    {(direction, layer, sublayer, site): alias or None} of a recorded step."""
    got, aliases = {}, {}
    for d in ("forward", "backward"):
        for l in range(L):
            for s in range(2):
                for site in BLOCK_SITES:
                    got[(d, l, s, site)] = run.site(step, site, l, s, d)
                    aliases[(d, l, s, site)] = run.alias(step, site, l, s, d)
        for site in MODEL_SITES:
            got[(d, -1, 0, site)] = run.site(step, site, -1, 0, d)
    return got, aliases


_RUNS = {}


def recorded(family, dtype, norm_kind, L, **attach_kw):
    """One training step of the family's model with resdiag attached: the
    model's tape, what the run file holds, and the library's analysis."""
    key = (family, dtype, norm_kind, L, tuple(sorted(attach_kw.items())))
    if key in _RUNS:
        return _RUNS[key]
    torch.manual_seed(1000 * FAMILIES.index(family) + 10 * L + NORM_KINDS.index(norm_kind))
    model, kw = build(family, L, D, V, norm_kind)
    model = model.to(DTYPES[dtype]).train()
    x = torch.randn(B, T, D).to(DTYPES[dtype])
    target = torch.randint(0, V, (B, T))
    kw.update(attach_kw)
    with tmpdir() as tmp:
        path = tmp + "/run.h5"
        rec = resdiag.attach(model, path, **kw)
        with rec.step(0):
            logits = model(x)
            nn.functional.cross_entropy(logits.float().reshape(-1, V), target.reshape(-1)).backward()
        errors, first_error = rec.errors, rec.first_error
        rec.detach()
        with resdiag.open(path) as run:
            got, aliases = read_back(run, L)
            a = run.analyze()
            r = types.SimpleNamespace(tape=model.tape.entries, got=got, aliases=aliases, L=L,
                                      errors=errors, first_error=first_error,
                                      verdict=a.verdict, confidence=a.confidence, json=a.json(),
                                      check=a.check(EXPECT[family]),
                                      sublayers=[[a.sublayer(l, s)[0] for s in range(2)]
                                                 for l in range(L)])
    _RUNS[key] = r
    return r


def cases():
    for dtype in DTYPES:
        for norm_kind in NORM_KINDS:
            for L in N_LAYERS:
                yield dtype, norm_kind, L


class Sites(unittest.TestCase):
    def check_sites(self, family):
        for dtype, norm_kind, L in cases():
            r = recorded(family, dtype, norm_kind, L)
            with self.subTest(dtype=dtype, norm=norm_kind, L=L):
                self.assertEqual(r.errors, 0, r.first_error)
                for (l, s, site), (_, t) in r.tape.items():
                    want = reference(t)
                    got = r.got[("forward", l, s, site)]
                    where = "%s layer %d sublayer %d" % (site, l, s)
                    self.assertIsNotNone(got, where + " not observed")
                    self.assertEqual(got["rows"], want["rows"], where)
                    for field in ("frob", "tok_norm_mean", "absmax"):
                        self.assertLess(rel(got[field], want[field]), NORM_TOL,
                                        "%s: %s %r, the tensor's %r" % (where, field, got[field],
                                                                        want[field]))
                    if t.grad is not None:
                        back = r.got[("backward", l, s, site)]
                        self.assertIsNotNone(back, where + ": its gradient not observed")
                        self.assertLess(rel(back["frob"], reference(t.grad)["frob"]), NORM_TOL,
                                        where + ": gradient")
                # What the model does not have is not observed.
                for l in range(L):
                    for s in range(2):
                        for site in BLOCK_SITES:
                            if (l, s, site) not in r.tape:
                                self.assertIsNone(r.got[("forward", l, s, site)],
                                                  "%s layer %d sublayer %d" % (site, l, s))
                self.check_order(r)

    def check_order(self, r):
        """A site of a later moment of the forward was recorded later."""
        by_moment = sorted(r.tape.items(), key=lambda kv: kv[1][0])
        before = -1   # the latest call_seq of the moments before this one
        moment, latest = None, -1
        for (l, s, site), (m, _) in by_moment:
            if m != moment:
                before, moment = max(before, latest), m
            seq = r.got[("forward", l, s, site)]["call_seq"]
            self.assertGreater(seq, before, "%s layer %d sublayer %d recorded before a site "
                               "that ran earlier" % (site, l, s))
            latest = max(latest, seq)

    def test_pre(self):
        self.check_sites("pre")

    def test_post(self):
        self.check_sites("post")

    def test_sandwich(self):
        self.check_sites("sandwich")

    def test_reordered(self):
        self.check_sites("reordered")

    def test_hybrid(self):
        self.check_sites("hybrid")

    def test_parallel(self):
        self.check_sites("parallel")

    def test_xtransformers_pre(self):
        self.check_sites("xt_pre")

    def test_xtransformers_post(self):
        self.check_sites("xt_post")


class Aliases(unittest.TestCase):
    """The pairs the binding records from one tensor by its own choice:
    stream_in taken from the first hook of a sublayer that has no hook of
    its own where it begins (s >= 1 in a block; every sublayer of a Layers
    group), and branch_out taken from the out_norm's output. Two hooks that
    see one tensor because the model passes it on are evidence: no alias."""

    def expected(self, family, l, s):
        """{site: its alias} of sublayer s of layer l."""
        out = {}
        grouped = family.startswith("xt_")
        first_hook_is_norm = family in ("pre", "sandwich", "xt_pre")
        if family != "parallel" and (s > 0 or grouped):
            out["stream_in"] = "norm_in" if first_hook_is_norm else "branch_in"
        if family in ("sandwich", "reordered"):
            out["branch_out"] = "out_norm_out"
        return out

    def test_aliases(self):
        for family in FAMILIES:
            for dtype in DTYPES:
                r = recorded(family, dtype, "layernorm", 4)
                for l in range(4):
                    for s in range(2):
                        want = self.expected(family, l, s)
                        for d in ("forward", "backward"):
                            if d == "backward" and r.tape[(l, s, "stream_in")][1].grad is None:
                                # the model's input: no gradient, none of its sites'
                                want.pop("stream_in", None)
                            for site in BLOCK_SITES:
                                with self.subTest(family=family, dtype=dtype, l=l, s=s, d=d,
                                                  site=site):
                                    self.assertEqual(r.aliases[(d, l, s, site)], want.get(site))


class Verdicts(unittest.TestCase):
    def check_verdict(self, family):
        want = EXPECT[family]
        for dtype, norm_kind, L in cases():
            r = recorded(family, dtype, norm_kind, L)
            with self.subTest(dtype=dtype, norm=norm_kind, L=L):
                self.assertEqual(r.verdict, want, r.json["placement"]["why"])
                self.assertEqual(r.check[0], 0, r.check[1])
                if family == "hybrid":
                    self.assertEqual(r.json["placement"]["pattern"], "attn: none, mlp: post")
                    self.assertEqual(r.sublayers, [["none", "post"]] * L)
                if family == "xt_post":
                    self.assertTrue(r.json["placement"]["last_norm_is_final_norm"])

    def test_pre(self):
        self.check_verdict("pre")

    def test_post(self):
        self.check_verdict("post")

    def test_sandwich(self):
        self.check_verdict("sandwich")

    def test_reordered(self):
        self.check_verdict("reordered")

    def test_hybrid_per_sublayer(self):
        self.check_verdict("hybrid")

    def test_parallel(self):
        self.check_verdict("parallel")

    def test_xtransformers_pre(self):
        self.check_verdict("xt_pre")

    def test_xtransformers_post(self):
        self.check_verdict("xt_post")


class Layers(unittest.TestCase):
    def test_two_forwards_in_a_step(self):
        # No hook marks where a group begins: the second forward of a step
        # (a second micro-batch) must begin every layer's pass again.
        torch.manual_seed(5)
        for pre_norm in (True, False):
            model = XTransformer(3, D, V, pre_norm, nn.LayerNorm)
            with tmpdir() as tmp:
                rec = resdiag.attach(model, tmp + "/run.h5", layers=xt_mapping(pre_norm),
                                     head="to_logits")
                with rec.step(0):
                    for _ in range(2):
                        model.tape = model.attn_layers.tape = structure_models.Tape()
                        model(torch.randn(B, T, D)).sum().backward()
                self.assertEqual(rec.errors, 0, rec.first_error)
                rec.detach()
                with resdiag.open(tmp + "/run.h5") as run:
                    for l in range(3):
                        for s in range(2):
                            for site in ("stream_in", "branch_in", "branch_out", "stream_out"):
                                with self.subTest(pre_norm=pre_norm, l=l, s=s, site=site):
                                    self.assertEqual(run.site(0, site, l, s)["rows"], 2 * B * T)
                    self.assertEqual(run.site(0, "embed_out", -1)["rows"], 2 * B * T)

    def test_final_norm_found(self):
        model = XTransformer(2, D, V, True, nn.LayerNorm)
        with tmpdir() as tmp:
            rec = resdiag.attach(model, tmp + "/run.h5", layers=xt_mapping(True), head="to_logits")
            self.assertEqual(rec.final_norm_module, "attn_layers.final_norm")
            self.assertEqual((rec.n_layers, rec.sublayer_names), (2, ["attn", "mlp"]))
            rec.detach()

    def test_too_many_sublayers(self):
        # x-transformers' container mapped as one block: 2L sublayers.
        subs = [resdiag.Sublayer("s%d" % i, norm="%d.0.0" % i, branch="%d.1" % i)
                for i in range(2 * 9)]
        with self.assertRaises(ValueError) as e:
            resdiag.Block(subs)
        self.assertIn("16", str(e.exception))
        self.assertIn("RESDIAG_MAX_SUBLAYERS", str(e.exception))
        self.assertIn("resdiag.Layers(", str(e.exception))
        resdiag.Block(subs[:16])  # the limit itself is fine
        with self.assertRaises(ValueError) as e:
            resdiag.Layers("layers", per_layer=17, sublayers=subs[:17])
        self.assertIn("16", str(e.exception))

    def test_bad_groupings(self):
        model = XTransformer(2, D, V, True, nn.LayerNorm)
        with tmpdir() as tmp:
            path = tmp + "/run.h5"
            bad = [
                # 4 entries are no whole number of layers of 3
                resdiag.Layers("attn_layers.layers", per_layer=3, sublayers=[
                    resdiag.Sublayer("a", branch="0.1"), resdiag.Sublayer("b", branch="1.1"),
                    resdiag.Sublayer("c", branch="2.1")]),
                # no such container
                resdiag.Layers("attn_layers.nothing", 2, [resdiag.Sublayer("a", branch="0.1")]),
                # a path to nothing in the group
                resdiag.Layers("attn_layers.layers", 2, [
                    resdiag.Sublayer("attn", norm="0.0.0", branch="0.7"),
                    resdiag.Sublayer("mlp", norm="1.0.0", branch="1.1")]),
                # post-branch norms (index 1) are None in every layer: no such norm
                resdiag.Layers("attn_layers.layers", 2, [
                    resdiag.Sublayer("attn", norm="0.0.0", branch="0.1", out_norm="0.0.1"),
                    resdiag.Sublayer("mlp", norm="1.0.0", branch="1.1")]),
            ]
            for layers in bad:
                with self.subTest(layers=layers):
                    with self.assertRaises(ValueError):
                        resdiag.attach(model, path, layers=layers, head="to_logits")
            with self.assertRaises(ValueError):
                resdiag.attach(model, path, layers=xt_mapping(True), blocks=[model])
            with self.assertRaises(TypeError):
                resdiag.attach(model, path, layers=block_mapping("pre"))
            with self.assertRaises(ValueError):
                resdiag.Layers("attn_layers.layers", per_layer=0, sublayers=[])


class Mappings(unittest.TestCase):
    def test_out_norm_is_no_other_role(self):
        model, kw = build("sandwich", 2, D, V, "layernorm")
        block = resdiag.Block([
            resdiag.Sublayer("attn", norm="input_layernorm", branch="attn",
                             out_norm="input_layernorm"),
            resdiag.Sublayer("mlp", norm="pre_feedforward_layernorm", branch="mlp",
                             out_norm="post_feedforward_layernorm")])
        with tmpdir() as tmp:
            with self.assertRaises(ValueError) as e:
                resdiag.attach(model, tmp + "/run.h5", blocks=kw["blocks"], block=block)
            self.assertIn("out_norm", str(e.exception))

    def test_old_schema_records_no_new_sites(self):
        # A file of schema 2 has no place for branch_in and the out_norm
        # sites: none are recorded, and nothing fails; branch_out is still
        # what is added.
        r = recorded("sandwich", "fp32", "layernorm", 2, file_schema=2)
        self.assertEqual(r.errors, 0, r.first_error)
        for l in range(2):
            for s in range(2):
                for site in ("branch_in", "out_norm_in", "out_norm_out"):
                    self.assertIsNone(r.got[("forward", l, s, site)])
                want = reference(r.tape[(l, s, "out_norm_out")][1])["frob"]
                self.assertLess(rel(r.got[("forward", l, s, "branch_out")]["frob"], want),
                                NORM_TOL)

    def test_input_by_keyword(self):
        # Hugging Face calls self_attn(hidden_states=...): torch 2.0 on gives
        # the pre-hooks the keywords, and branch_in is that tensor; an older
        # torch gives none, and branch_in is not observed (nothing fails).
        class KeywordCall(nn.Module):
            def __init__(self):
                super().__init__()
                self.norm, self.attn = nn.LayerNorm(D), structure_models.Attention(D)
                self.seen = None

            def forward(self, x):
                self.seen = self.norm(x)
                return x + self.attn(x=self.seen)

        torch.manual_seed(8)
        blocks = nn.ModuleList(KeywordCall() for _ in range(2))
        model = nn.Sequential(*blocks, nn.Linear(D, V))
        spec = resdiag.Block([resdiag.Sublayer("attn", norm="norm", branch="attn")])
        with tmpdir() as tmp:
            rec = resdiag.attach(model, tmp + "/run.h5", blocks=list(blocks), block=spec,
                                 head=model[2])
            with rec.step(0):
                model(torch.randn(B, T, D)).sum().backward()
            self.assertEqual(rec.errors, 0, rec.first_error)
            rec.detach()
            with resdiag.open(tmp + "/run.h5") as run:
                for l, b in enumerate(blocks):
                    got = run.site(0, "branch_in", l, 0)
                    if resdiag.recorder._PRE_HOOK_KWARGS:
                        self.assertLess(rel(got["frob"], reference(b.seen)["frob"]), NORM_TOL)
                    else:
                        self.assertIsNone(got)

    def test_presets_record_branch_in(self):
        # The presets' branch_in: what self_attn/linear1 (encoder layer) and
        # attn/mlp (GPT-2 block) read: the norm's output in pre-norm, the
        # stream in post-norm. Taken here with hooks of the test's own on
        # the modules the preset names.
        from common import Seq, encoder
        for norm_first in (True, False):
            torch.manual_seed(3)
            model = Seq(encoder(2, D, norm_first, heads=2), D, V).train()
            seen = {}
            hooks = []
            for l, layer in enumerate(model.stack.layers):
                for s, (norm, first) in enumerate(((layer.norm1, layer.self_attn),
                                                   (layer.norm2, layer.linear1))):
                    hooks.append(first.register_forward_pre_hook(
                        lambda m, a, k=(l, s): seen.__setitem__(("in", k), a[0])))
                    hooks.append(norm.register_forward_hook(
                        lambda m, a, o, k=(l, s): seen.__setitem__(("norm", k), o)))
            with tmpdir() as tmp:
                rec = resdiag.attach(model, tmp + "/run.h5")
                with rec.step(0):
                    model(torch.randn(B, T, D)).sum().backward()
                rec.detach()
                for h in hooks:
                    h.remove()
                with resdiag.open(tmp + "/run.h5") as run:
                    for l in range(2):
                        for s in range(2):
                            with self.subTest(norm_first=norm_first, l=l, s=s):
                                got = run.site(0, "branch_in", l, s)["frob"]
                                self.assertLess(rel(got, reference(seen[("in", (l, s))])["frob"]),
                                                NORM_TOL)
                                # pre-norm: what the branch reads is the norm's output
                                is_norm_out = seen[("in", (l, s))] is seen[("norm", (l, s))]
                                self.assertEqual(is_norm_out, norm_first)


if __name__ == "__main__":
    unittest.main()
