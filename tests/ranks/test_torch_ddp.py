"""The PyTorch binding under torch.distributed, data parallel: 2 ranks of
DistributedDataParallel (gloo, loopback) train 4 sequences each of the
batch of 8 that one process trains whole; the ranks find their rank in the
environment (RANK, WORLD_SIZE, as torchrun sets them) and write one file
each; `resdiag report` merges them.

Step 0, merged, against the one process (same weights, same tokens):
- forward sites and update ratios: every field equal to rounding;
- parameter gradients: equal (DDP averages the ranks' gradients, each of
  its own mean loss: the mean loss of the whole batch);
- backward sites: world_size times the one process's in every field that
  scales with the tensor, the others equal: each rank's loss is the mean
  over its own N/2 tokens, so dL/dx of a token is 2/N times its loss's
  gradient where the one process has 1/N (doc/RANKS.md);
- the same verdict (resdiag report --json).
The merged report's text goes to the test log.
"""
import json
import os
import sys
import tempfile

import torch
import torch.distributed as dist

from torch_ranks import (B, WORLD, Job, assert_fields, batch, in_one_process, loss_fn, model,
                         params, rel_of, sites, skip_without_gloo, tool_report)
import resdiag

HERE = os.path.abspath(__file__)


def train(path, ddp):
    """Two steps; with ddp, this rank's share of the batch under DDP."""
    m = model()
    x, target = batch()
    if ddp:
        r, w = dist.get_rank(), dist.get_world_size()
        x, target = x[r * B // w:(r + 1) * B // w], target[r * B // w:(r + 1) * B // w]
        net = torch.nn.parallel.DistributedDataParallel(m)
    else:
        net = m
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    # the rank: from the environment; schema 1: the merge is checked to the
    # double, which float32 storage would round away
    rec = resdiag.attach(m, path, placement="pre", file_schema=1)
    for step in range(2):
        with rec.step(step):
            loss = loss_fn(net(x), target)
            loss.backward()
        opt.step()
        opt.zero_grad()
    rec.detach()


def worker(path):
    dist.init_process_group("gloo", init_method="env://")
    try:
        train(path, ddp=True)
    finally:
        dist.destroy_process_group()


def main():
    skip_without_gloo()
    with tempfile.TemporaryDirectory(prefix="resdiag-ranks-ddp-") as d:
        one, two = os.path.join(d, "one.h5"), os.path.join(d, "ddp.h5")
        job = Job(HERE, [two])
        try:
            in_one_process(train, one, False)
        except BaseException:
            job.kill()
            raise
        job.wait()
        with resdiag.open(one) as a, resdiag.open(two) as b:
            assert b.info.n_layers == a.info.n_layers
            n_ranks = resdiag._clib.resdiag_reader_n_ranks(b._r)
            assert n_ranks == WORLD, "merged reader of %d ranks, want %d" % (n_ranks, WORLD)
            compared = {"forward": 0, "backward": 0, "param": 0, "update": 0}
            for direction, layer, s, site in sites(a):
                fa = a.site(0, site, layer, s, direction)
                fb = b.site(0, site, layer, s, direction)
                what = "%s %s layer %d sublayer %d" % (direction, site, layer, s)
                assert (fa is None) == (fb is None), "%s: observed in one only" % what
                if fa is None:
                    continue
                # DDP: the backward tensors are world_size times the one process's
                assert_fields(fa, fb, what, factor=WORLD if direction == "backward" else 1.0,
                              rel=rel_of(a))
                compared[direction] += 1
            for layer, name in params(a):
                assert_fields(a.param(0, layer, name), b.param(0, layer, name),
                              "param %s layer %d" % (name, layer), rel=rel_of(a))
                compared["param"] += 1
            for layer in range(a.info.n_layers):
                for s in range(a.info.n_sublayers):
                    ua, ub = a.update(0, layer, s), b.update(0, layer, s)
                    for f in ua:
                        assert abs(ua[f] - ub[f]) <= rel_of(a) * abs(ua[f]), \
                            "update %d/%d %s: %r vs %r" % (layer, s, f, ua[f], ub[f])
                    compared["update"] += 1
            assert compared["forward"] >= 20 and compared["backward"] >= 20 and \
                compared["param"] >= 8, compared
        va = json.loads(tool_report(one, "--json"))["placement"]["verdict"]
        vb = json.loads(tool_report(two, "--json"))["placement"]["verdict"]
        assert va == vb == "pre", (va, vb)
        text = tool_report(two)
        print("--- 2 ranks, torch.distributed (gloo) DDP: resdiag report %s" % two,
              file=sys.stderr)
        print(text, file=sys.stderr)
        print("ddp: compared %s; verdict %s in both" % (compared, va))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2])
    else:
        sys.exit(main())
