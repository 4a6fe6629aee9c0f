#!/usr/bin/env python3
"""encoder.py - trains a small torch nn.TransformerEncoder for a few steps
with resdiag attached, and writes the run file.

    PYTHONPATH=python python3 examples/pytorch/encoder.py \
        --norm-first true --layers 6 --steps 20 --out run.h5
    build/resdiag report run.h5

The task: predict each token of a random sequence from the sequence itself
(embedding -> encoder -> linear head, cross-entropy, Adam). Nothing is
declared about the placement: `resdiag report` tells pre-norm from
post-norm from the recorded data.
"""
import argparse
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import resdiag  # noqa: E402


def boolean(s):
    if s.lower() in ("true", "1", "yes"):
        return True
    if s.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError("true or false, not %r" % s)


class Model(nn.Module):
    def __init__(self, vocab, d, heads, layers, norm_first, dropout, final_norm):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout, batch_first=True,
                                           norm_first=norm_first)
        norm = nn.LayerNorm(d) if final_norm else None
        self.encoder = nn.TransformerEncoder(layer, layers, norm=norm, enable_nested_tensor=False)
        self.head = nn.Linear(d, vocab)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens)))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--norm-first", type=boolean, required=True, help="true (pre-norm) or false")
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--out", default="run.h5")
    p.add_argument("--overwrite", action="store_true",
                   help="replace --out if it is an earlier resdiag run file (else it must not exist)")
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--vocab", type=int, default=64)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--init", choices=("default", "xavier"), default="default",
                   help="xavier: xavier_uniform_ on every matrix, as nn.Transformer does")
    p.add_argument("--final-norm", type=boolean, default=None,
                   help="a LayerNorm after the last layer (default: with --norm-first true)")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args(argv)
    if a.layers < 1 or a.steps < 1:
        p.error("--layers and --steps must be at least 1")

    torch.manual_seed(a.seed)
    final_norm = a.norm_first if a.final_norm is None else a.final_norm
    model = Model(a.vocab, a.d_model, a.heads, a.layers, a.norm_first, a.dropout, final_norm)
    if a.init == "xavier":
        for w in model.parameters():
            if w.dim() > 1:
                nn.init.xavier_uniform_(w)
    model.to(getattr(torch, a.dtype)).train()
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    data = torch.randint(0, a.vocab, (a.batch, a.seq))

    rec = resdiag.attach(model, a.out, overwrite=a.overwrite,
                         meta={"example": "encoder.py", "norm_first": str(a.norm_first)})
    for step in range(a.steps):
        with rec.step(step):
            logits = model(data)
            loss = nn.functional.cross_entropy(logits.float().reshape(-1, a.vocab), data.reshape(-1))
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step == 0 or step == a.steps - 1:
            print("step %d loss %.4f" % (step, loss.item()))
    rec.detach()
    print("wrote %s (%d layers, d=%d, norm_first=%s)" % (a.out, a.layers, a.d_model, a.norm_first))
    return 0


if __name__ == "__main__":
    sys.exit(main())
