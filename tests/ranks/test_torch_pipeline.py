"""The PyTorch binding under torch.distributed, a layer split (pipeline):
rank 0 holds layers 0..L/2-1, rank 1 layers L/2..L-1, the final norm and
the head; the activations go forward and their gradients back with
dist.send/recv (gloo, loopback). Each rank records its layers
(split="pipeline", layer_first, layer_count; the rank from the
environment) and `resdiag report` joins them by layer range.

Against one process holding the whole model (same weights, same batch):
the same verdict (resdiag report --json), and step 0's sites, update
ratios and parameter gradients equal field by field to rounding (every
rank computes exactly the one process's tensors). The merged report's
text goes to the test log.
"""
import json
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn

from torch_ranks import (B, D, L, T, WORLD, Job, assert_fields, batch, in_one_process, loss_fn,
                         model, params, sites, skip_without_gloo, tool_report)
import resdiag

HERE = os.path.abspath(__file__)
HALF = L // 2


def single(path):
    m = model()
    x, target = batch()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    rec = resdiag.attach(m, path, placement="pre")
    for step in range(2):
        with rec.step(step):
            loss_fn(m(x), target).backward()
        opt.step()
        opt.zero_grad()
    rec.detach()


class Stage(nn.Module):
    """Rank 0: layers 0..HALF-1. Rank 1: the other layers, the final norm
    and the head."""

    def __init__(self, whole, rank):
        super().__init__()
        layers = whole.stack.layers
        self.layers = nn.ModuleList(layers[:HALF] if rank == 0 else layers[HALF:])
        if rank == 1:
            self.norm, self.head = whole.stack.norm, whole.head

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x)) if hasattr(self, "head") else x


def worker(path):
    dist.init_process_group("gloo", init_method="env://")
    try:
        rank = dist.get_rank()
        stage = Stage(model(), rank)
        x, target = batch()
        opt = torch.optim.SGD(stage.parameters(), lr=0.1)
        kw = dict(final_norm=stage.norm, head=stage.head) if rank == 1 else {}
        rec = resdiag.attach(stage, path, blocks=list(stage.layers), placement="pre",
                             split="pipeline", layer_first=0 if rank == 0 else HALF,
                             layer_count=HALF, n_layers=L, **kw)
        for step in range(2):
            with rec.step(step):
                if rank == 0:
                    h = stage(x)
                    dist.send(h.detach().contiguous(), 1)
                    g = torch.empty(B, T, D)
                    dist.recv(g, 1)
                    h.backward(g)
                else:
                    h = torch.empty(B, T, D)
                    dist.recv(h, 0)
                    h.requires_grad_(True)
                    loss_fn(stage(h), target).backward()
                    dist.send(h.grad.contiguous(), 0)
            opt.step()
            opt.zero_grad()
        rec.detach()
    finally:
        dist.destroy_process_group()


def main():
    skip_without_gloo()
    with tempfile.TemporaryDirectory(prefix="resdiag-ranks-pipeline-") as d:
        one, two = os.path.join(d, "one.h5"), os.path.join(d, "pipe.h5")
        job = Job(HERE, [two])
        try:
            in_one_process(single, one)
        except BaseException:
            job.kill()
            raise
        job.wait()
        with resdiag.open(one) as a, resdiag.open(two) as b:
            assert b.info.n_layers == a.info.n_layers == L, (a.info.n_layers, b.info.n_layers)
            n_ranks = resdiag._clib.resdiag_reader_n_ranks(b._r)
            assert n_ranks == WORLD, "merged reader of %d ranks, want %d" % (n_ranks, WORLD)
            compared = 0
            for direction, layer, s, site in sites(a):
                fa = a.site(0, site, layer, s, direction)
                fb = b.site(0, site, layer, s, direction)
                what = "%s %s layer %d sublayer %d" % (direction, site, layer, s)
                assert (fa is None) == (fb is None), "%s: observed in one only" % what
                if fa is not None:
                    assert_fields(fa, fb, what)
                    compared += 1
            for layer, name in params(a):
                assert_fields(a.param(0, layer, name), b.param(0, layer, name),
                              "param %s layer %d" % (name, layer))
                compared += 1
            for layer in range(L):
                for s in range(a.info.n_sublayers):
                    ua, ub = a.update(0, layer, s), b.update(0, layer, s)
                    for f in ua:
                        assert abs(ua[f] - ub[f]) <= 1e-9 * abs(ua[f]), \
                            "update %d/%d %s: %r vs %r" % (layer, s, f, ua[f], ub[f])
            assert compared >= 50, compared
        va = json.loads(tool_report(one, "--json"))["placement"]["verdict"]
        vb = json.loads(tool_report(two, "--json"))["placement"]["verdict"]
        assert va == vb == "pre", (va, vb)
        text = tool_report(two)
        print("--- 2 ranks, torch.distributed (gloo) pipeline, layers 0-%d and %d-%d: "
              "resdiag report %s" % (HALF - 1, HALF, L - 1, two), file=sys.stderr)
        print(text, file=sys.stderr)
        print("pipeline: %d tensors compared; verdict %s in both" % (compared, va))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2])
    else:
        sys.exit(main())
