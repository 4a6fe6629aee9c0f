"""The numbers resdiag records from a torch nn.TransformerEncoder, read back
through the C reader, agree with an independent torch computation (the
block's math redone by hand from the same submodules, torch.linalg
.vector_norm, torch.autograd.grad, .grad of the parameters) to 1e-5
relative, for norm_first True and False."""
import unittest

import torch
import torch.nn as nn

from common import Seq, encoder, rel, tmpdir, tok_norm_mean, vnorm
import resdiag

TOL = 1e-5
L, D, B, T, V = 3, 32, 4, 8, 16
SITES = ("stream_in", "norm_in", "norm_out", "branch_out", "stream_out")


def by_hand(enc, head, src, pre):
    """The encoder's forward written out: {(l, s, site): tensor}, model
    sites, and the loss (same ops, same order as torch's layer)."""
    out = {}
    x = src
    for l, layer in enumerate(enc.layers):
        def sa(h, layer=layer):
            return layer.dropout1(layer.self_attn(h, h, h, need_weights=False)[0])

        def ff(h, layer=layer):
            return layer.dropout2(layer.linear2(layer.dropout(layer.activation(layer.linear1(h)))))

        for s, (norm, f) in enumerate(((layer.norm1, sa), (layer.norm2, ff))):
            if pre:
                n_in, n_out = x, norm(x)
                b = f(n_out)
                y = x + b
            else:
                b = f(x)
                n_in = x + b
                n_out = norm(n_in)
                y = n_out
            for site, t in zip(SITES, (x, n_in, n_out, b, y)):
                out[(l, s, site)] = t
            x = y
    fn = enc.norm(x)
    logits = head(fn)
    out["embed_out"], out["final_norm_in"], out["final_norm_out"], out["logits"] = src, x, fn, logits
    return out, loss_of(logits)


def loss_of(logits):
    target = torch.arange(logits.shape[0] * logits.shape[1]) % logits.shape[-1]
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target)


class Numbers(unittest.TestCase):
    def run_case(self, pre):
        torch.manual_seed(3 if pre else 4)
        enc = encoder(L, D, pre, dropout=0.0)
        model = Seq(enc, D, V).train()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        src = torch.randn(B, T, D, requires_grad=True)
        with tmpdir() as tmp:
            path = tmp + "/run.h5"
            rec = resdiag.attach(model, path, record_every=2)  # records steps 0 and 2
            self.assertEqual(rec.layer_param_names, ["attn.wo", "mlp.w1", "mlp.w2"])
            expect = []  # per recorded step: (site values, site grads, param grads)
            for step in range(3):
                with rec.step(step):
                    loss = loss_of(model(src))
                    loss.backward()
                if step % 2 == 0:
                    params = {(l, "mlp.w2"): vnorm(layer.linear2.weight.grad)
                              for l, layer in enumerate(enc.layers)}
                    params.update({(l, "attn.wo"): vnorm(layer.self_attn.out_proj.weight.grad)
                                   for l, layer in enumerate(enc.layers)})
                    params[(-1, "head.w")] = vnorm(model.head.weight.grad)
                    # Outside a step the hooks record nothing: recompute by hand.
                    sites, loss_h = by_hand(enc, model.head, src, pre)
                    self.assertLess(rel(loss_h, loss), 1e-6)
                    keys = list(sites)
                    uniq = {id(t): t for t in sites.values()}
                    grads = dict(zip(uniq, torch.autograd.grad(loss_h, list(uniq.values()))))
                    expect.append(({k: sites[k].detach() for k in keys},
                                   {k: grads[id(sites[k])] for k in keys}, params))
                opt.step()
                opt.zero_grad()
                src.grad = None
            rec.detach()

            with resdiag.open(path) as run:
                self.assertEqual(run.steps(), [0, 2])
                self.assertEqual(run.info.n_layers, L)
                self.assertEqual(run.info.sublayer_names, ["attn", "mlp"])
                self.assertEqual(run.info.norm_kind, "layernorm")
                self.assertEqual(run.info.declared_placement, "undeclared")
                self.assertEqual(run.info.meta["frontend"], "python/torch %s" % torch.__version__)
                compared = 0
                for si, (fwd, bwd, params) in enumerate(expect):
                    for key, t in fwd.items():
                        if isinstance(key, tuple):
                            l, s, site = key
                        else:
                            l, s, site = -1, 0, key
                        for direction, ref in (("forward", t), ("backward", bwd[key])):
                            got = run.site(si, site, l, s, direction)
                            self.assertIsNotNone(got, (si, key, direction))
                            self.assertLess(rel(got["frob"], vnorm(ref)), TOL, (si, key, direction))
                            self.assertLess(rel(got["tok_norm_mean"], tok_norm_mean(ref)), TOL,
                                            (si, key, direction))
                            self.assertLess(rel(got["absmax"], float(ref.abs().max())), TOL)
                            self.assertEqual(got["rows"], ref.numel() // ref.shape[-1])
                            compared += 1
                    for (l, name), ref in params.items():
                        got = run.param(si, l, name)
                        self.assertLess(rel(got["frob"], ref), TOL, (si, l, name))
                        compared += 1
                    for l in range(L):
                        for s in range(2):
                            r = run.update(si, l, s)["ratio_frob"]
                            ref = vnorm(fwd[(l, s, "branch_out")]) / vnorm(fwd[(l, s, "stream_in")])
                            self.assertLess(rel(r, ref), TOL)
                # The series of a site is the per-step values above.
                series = run.series("stream_out", "frob", L - 1, 1)
                self.assertEqual(len(series), 2)
                for si in range(2):
                    self.assertLess(rel(series[si], vnorm(expect[si][0][(L - 1, 1, "stream_out")])), TOL)
                self.assertGreater(compared, 100)
                self.assertEqual(run.verdict(), "pre" if pre else "post")

    def test_pre_norm(self):
        self.run_case(True)

    def test_post_norm(self):
        self.run_case(False)


if __name__ == "__main__":
    unittest.main()
