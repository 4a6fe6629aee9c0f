"""Shared by the torch.distributed tests (test_torch_*.py): the model, the
processes of a job, and the field-by-field comparison of run files.

A test script is both the driver and the worker: run plainly it spawns
WORLD ranks of itself with the environment torchrun would give them (RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR=127.0.0.1, MASTER_PORT a free port), so
that resdiag finds the rank there; each rank joins the gloo group on
loopback and records its file, while the driver records the one-process
reference itself. Every rank has a deadline.
"""
import math
import os
import socket
import subprocess
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python"))
from common import Seq, encoder, xavier  # noqa: E402
import resdiag  # noqa: E402

torch.set_num_threads(1)  # two cores for the whole job
# float64: the one process and the ranks then agree to ~1e-16, whatever
# blocking the matrix products use for a batch of 8 or of 4 rows
torch.set_default_dtype(torch.float64)

L, D, B, T, V = 4, 32, 8, 16, 32
WORLD = 2
DEADLINE = 120  # seconds for a whole job
RANK_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
             "TORCHELASTIC_RUN_ID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK",
             "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS")


def skip_without_gloo():
    """Exit 77 (skipped) when torch.distributed has no gloo, or fail where
    RESDIAG_REQUIRE_MPI says the engines must be there (CI)."""
    import torch.distributed as dist
    if dist.is_available() and dist.is_gloo_available():
        return
    if os.environ.get("RESDIAG_REQUIRE_MPI"):
        print("FAIL: torch.distributed has no gloo backend, and RESDIAG_REQUIRE_MPI is set (CI)",
              file=sys.stderr)
        sys.exit(1)
    print("torch.distributed without gloo: skipped", file=sys.stderr)
    sys.exit(77)


def model(norm_first=True):
    """The whole model, the same weights in every process (seed 1): an
    embedded input -> L encoder layers -> final norm -> head."""
    torch.manual_seed(1)
    m = Seq(encoder(L, D, norm_first), D, V)
    xavier(m)
    return m.train()


def batch():
    """The batch of B sequences, the same in every process (seed 2)."""
    g = torch.Generator().manual_seed(2)
    return torch.randn(B, T, D, generator=g), torch.randint(0, V, (B, T), generator=g)


def loss_fn(logits, target):
    return nn.functional.cross_entropy(logits.reshape(-1, V), target.reshape(-1))


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env():
    """The environment without any launcher's rank variables."""
    env = dict(os.environ)
    for k in RANK_VARS:
        env.pop(k, None)
    return env


class Job:
    """WORLD ranks of `script worker ARGS`, started as torchrun would start
    them (the ranks import torch while the caller goes on: on two busy
    cores that alone takes seconds)."""

    def __init__(self, script, args, world=WORLD):
        port = str(free_port())
        self.script, self.procs = script, []
        for r in range(world):
            env = clean_env()
            env.update(RANK=str(r), WORLD_SIZE=str(world), LOCAL_RANK=str(r),
                       LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
                       GLOO_SOCKET_IFNAME="lo")
            self.procs.append(subprocess.Popen([sys.executable, script, "worker"] + list(args),
                                               env=env, stdout=subprocess.PIPE,
                                               stderr=subprocess.STDOUT, text=True))

    def wait(self):
        """Their outputs (stdout + stderr). AssertionError when one exits
        non-zero or passes the deadline (then all are killed)."""
        outs = []
        try:
            for p in self.procs:
                out, _ = p.communicate(timeout=DEADLINE)
                outs.append(out)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError("%s: a rank still ran after %d s, killed"
                                 % (self.script, DEADLINE))
        for r, p in enumerate(self.procs):
            if p.returncode != 0:
                self.kill()
                raise AssertionError("%s: rank %d exited %d:\n%s"
                                     % (self.script, r, p.returncode, outs[r]))
        return outs

    def kill(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            p.communicate()


def in_one_process(fn, *args):
    """fn(*args) in this process with no launcher's variables in the
    environment (resdiag reads it when the run file opens): the reference
    run of one process."""
    saved = {k: os.environ.pop(k) for k in RANK_VARS if k in os.environ}
    try:
        return fn(*args)
    finally:
        os.environ.update(saved)


def sites(run):
    """Every (direction, layer, sublayer, site) the run can hold."""
    for direction in ("forward", "backward"):
        for layer in range(run.info.n_layers):
            for s in range(run.info.n_sublayers):
                for site in ("stream_in", "norm_in", "norm_out", "branch_out", "stream_out"):
                    yield direction, layer, s, site
        for site in ("embed_out", "final_norm_in", "final_norm_out", "logits"):
            yield direction, -1, 0, site


def params(run):
    for layer in range(run.info.n_layers):
        for name in run.info.layer_param_names:
            yield layer, name
    for name in run.info.model_param_names:
        yield -1, name


# Fields that scale with the tensor (a tensor c*x has c times these) and
# those that do not (counts, width, the column of the largest value).
SCALED = ("frob", "tok_norm_mean", "tok_norm_std", "tok_norm_min", "tok_norm_max",
          "tok_mean_mean", "tok_mean_std", "tok_rms_mean", "tok_rms_std", "tok_std_mean",
          "tok_std_std", "absmax")
UNSCALED = ("rows", "cols", "absmax_col", "nan_count", "inf_count")

# float64 end to end: each token's row is computed as in the one process,
# the ranks' statistics merged in double; 1e-9 leaves room for a product
# blocked differently for 4 rows than for 8 (~1e-16 per operation).
REL = 1e-9
# Files of schema 2 keep each field as a float32 (half a step, 2^-24, on
# each rank and in the one process); the merge's sums of those add a few.
REL_F32 = 2.0 ** -20


def rel_of(run):
    """The tolerance for the fields of that run's file."""
    return REL if run.info.schema_version < 2 else REL_F32


def agree(a, b, scale, rel=REL):
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= rel * max(abs(a), abs(b)) + rel * scale


def assert_fields(one, merged, what, factor=1.0, rel=REL):
    """Every field of `merged` equals that of `one` (scaled ones times
    factor), the call order aside, to rel."""
    assert one is not None and merged is not None, "%s: observed in one, not the other" % what
    scale = factor * one["absmax"]
    for f in SCALED:
        assert agree(factor * one[f], merged[f], scale, rel), \
            "%s: %s: one process %r x %g, merged %r" % (what, f, one[f], factor, merged[f])
    for f in UNSCALED:
        assert agree(one[f], merged[f], 0), \
            "%s: %s: one process %r, merged %r" % (what, f, one[f], merged[f])
    assert set(SCALED) | set(UNSCALED) | {"call_seq"} == set(resdiag.FIELDS)


def tool_report(path, *opts):
    """`resdiag report PATH` text when $RESDIAG_TOOL is set, else the
    library's (the same text)."""
    tool = os.environ.get("RESDIAG_TOOL")
    if not tool:
        with resdiag.open(path) as run:
            return run.report()
    p = subprocess.run([tool, "report", path] + list(opts), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=60)
    assert p.returncode == 0, "resdiag report %s: exit %d\n%s" % (path, p.returncode, p.stdout)
    return p.stdout
