"""How a block's submodules map to resdiag's sites.

A block is a sequence of sublayers; each sublayer has a ``branch`` (the
module whose output is what gets added to the residual stream: dx), an
optional ``norm`` (the sublayer's norm: in front of the branch in pre-norm
and sandwich, after the add in post-norm), an optional ``out_norm`` (a norm
on the branch's raw output before the add: sandwich's second norm, the
only norm of x + Norm(F(x))) and an optional ``branch_in`` (the first
module of the branch, the one that reads the branch's input; default:
``branch``). Module hooks then give every site (see doc/PYTHON.md):

- norm_in / norm_out: the norm's input and output,
- branch_in: branch_in's input,
- branch_out: the branch's output; with an out_norm, that norm's output
  (what is added), and out_norm_in / out_norm_out its input and output,
- stream_in of sublayer 0: the block's input; stream_out of the last
  sublayer: the block's output,
- the stream between sublayer s-1 and s: the input of whichever of
  sublayer s's ``norm`` and ``branch_in`` runs first. A pre-norm block
  (x + F(Norm(x))) calls the norm first, and it reads the stream; a
  post-norm block (Norm(x + F(x))) calls the branch first, and it reads
  the stream. An out_norm runs after the branch has read its input, so it
  never takes part. So the mapping follows the code that actually ran,
  never a declared placement, and the library decides the placement from
  the data.

In a parallel block (x + Attn(Norm(x)) + MLP(Norm(x))) every sublayer's
stream_in is the block's input, and only the last one has a stream_out.

A model that keeps no module per layer (x-transformers: one container
entry per sublayer) is mapped with Layers: each run of ``per_layer``
consecutive entries is one layer.
"""
import torch.nn as nn

from . import _lib

# The roles of a sublayer's submodules; norm and out_norm may be absent
# (None) in some blocks, the others must be modules in every block.
ROLES = ("norm", "branch_in", "branch", "out_norm")
OPTIONAL_ROLES = ("norm", "out_norm")


class Sublayer:
    """One sublayer: its name in the run file and its submodules' dotted
    paths inside the block: branch (what is added, or what out_norm
    reads), norm, out_norm (a norm on the branch's output before the add)
    and branch_in (the module that reads the branch's input)."""

    __slots__ = ("name", "branch", "norm", "branch_in", "out_norm")

    def __init__(self, name, branch, norm=None, branch_in=None, out_norm=None):
        self.name = name
        self.branch = branch
        self.norm = norm
        self.branch_in = branch_in or branch
        self.out_norm = out_norm

    def __repr__(self):
        return "Sublayer(%r, branch=%r, norm=%r, branch_in=%r, out_norm=%r)" % (
            self.name, self.branch, self.norm, self.branch_in, self.out_norm)


class Block:
    """A block's sublayers, the per-layer parameters whose gradients are
    recorded ({run-file name: dotted path in the block}), whether the
    sublayers run in parallel, and which of the parameters (by its run-file
    name) is the matrix that writes a sublayer's output into the stream
    (W2 of the MLP, Wo of attention; None: not declared). The analysis
    reads that role, not the name."""

    def __init__(self, sublayers, params=None, parallel=False, residual=None):
        if not sublayers:
            raise ValueError("resdiag.Block: at least one sublayer")
        self.sublayers = list(sublayers)
        if len(self.sublayers) > _lib.MAX_SUBLAYERS:
            raise ValueError(
                "resdiag.Block: %d sublayers; a layer has at most %d (RESDIAG_MAX_SUBLAYERS). "
                "Are these the sublayers of several layers (a container with one entry per "
                "sublayer, as x-transformers' layers)? Map the container with "
                "resdiag.Layers(container, per_layer=..., sublayers=[...]), one layer per "
                "per_layer entries (doc/PYTHON.md)" % (len(self.sublayers), _lib.MAX_SUBLAYERS))
        self.params = dict(params or {})
        self.parallel = bool(parallel)
        if residual is not None and residual not in self.params:
            raise ValueError("resdiag.Block: residual=%r is not one of params (%s)"
                             % (residual, ", ".join(map(repr, self.params)) or "none"))
        self.residual = residual

    def __repr__(self):
        return "Block(%r, params=%r, parallel=%r, residual=%r)" % (
            self.sublayers, self.params, self.parallel, self.residual)


class Layers:
    """A container whose entries are sublayers, not layers (x-transformers'
    ``layers``: one ModuleList [norms, block, residual] per sublayer,
    attention and feed-forward alternating): each run of ``per_layer``
    consecutive entries is one layer. ``container`` is the container
    (nn.ModuleList, nn.Sequential) or its dotted path in the model;
    ``sublayers`` are one layer's, with paths inside its group of entries,
    the group's i-th entry named "i" (x-transformers: the attention's input
    norm "0.0.0", its block "0.1"; the feed-forward's "1.0.0", "1.1").
    params and residual as Block's, with paths inside the group.

    No module runs around a group, so the stream entering a layer is the
    input of whichever of its first sublayer's norm and branch_in runs
    first (as between sublayers), and the last layer's output is what the
    final norm reads (or the head, without a final norm)."""

    def __init__(self, container, per_layer, sublayers, params=None, residual=None):
        if isinstance(per_layer, bool) or not isinstance(per_layer, int) or per_layer < 1:
            raise ValueError("resdiag.Layers: per_layer=%r; the number of container entries "
                             "per layer, >= 1" % (per_layer,))
        sublayers = list(sublayers)
        if len(sublayers) > _lib.MAX_SUBLAYERS:
            raise ValueError("resdiag.Layers: %d sublayers per layer; a layer has at most %d "
                             "(RESDIAG_MAX_SUBLAYERS)" % (len(sublayers), _lib.MAX_SUBLAYERS))
        self.container = container
        self.per_layer = per_layer
        self.block = Block(sublayers, params, residual=residual)

    @property
    def sublayers(self):
        return self.block.sublayers

    def groups(self, model):
        """The layers of `model`: one module per group of entries, holding
        the group's entries as its children "0".."per_layer-1" (the model
        itself is left as it is)."""
        c = self.container
        if isinstance(c, str):
            found = get(model, c) if c else model
            if not isinstance(found, nn.Module):
                raise ValueError("resdiag.Layers: %r is no submodule of the model" % c)
            c = found
        if not isinstance(c, (nn.ModuleList, nn.Sequential)):
            raise TypeError("resdiag.Layers: container must be an nn.ModuleList or "
                            "nn.Sequential (or its dotted path), not %s" % type(c).__name__)
        entries = list(c)  # every entry in order (children() skips repeats)
        if any(not isinstance(e, nn.Module) for e in entries):
            raise ValueError("resdiag.Layers: the container holds an entry that is no module")
        n = len(entries)
        if n == 0 or n % self.per_layer:
            raise ValueError("resdiag.Layers: the container holds %d entries, not a multiple "
                             "of per_layer=%d" % (n, self.per_layer))
        return [Group(entries[i:i + self.per_layer], i) for i in range(0, n, self.per_layer)]

    def __repr__(self):
        return "Layers(%r, per_layer=%d, sublayers=%r, params=%r, residual=%r)" % (
            self.container, self.per_layer, self.block.sublayers, self.block.params,
            self.block.residual)


class Group(nn.Module):
    """per_layer consecutive entries of a Layers container, as one layer's
    block: its children are the entries, named "0".."n-1". Never called."""

    def __init__(self, entries, first):
        super().__init__()
        for i, e in enumerate(entries):
            self.add_module(str(i), e)
        self.first_entry = first  # the index of entry "0" in the container

    def forward(self, *args):
        raise RuntimeError("resdiag: a Layers group is a mapping, not a module to call")

    def what(self):
        """How errors name the group."""
        return "the layer of container entries %d..%d" % (
            self.first_entry, self.first_entry + len(self._modules) - 1)


# torch.nn.TransformerEncoderLayer: x + dropout1(self_attn(...)), then
# x + dropout2(linear2(dropout(activation(linear1(...))))), norm1/norm2
# before (norm_first=True) or after (False) each add. branch_in is what
# self_attn and linear1 read: norm1/norm2's output, or the stream.
ENCODER_LAYER = Block(
    [Sublayer("attn", norm="norm1", branch_in="self_attn", branch="dropout1"),
     Sublayer("mlp", norm="norm2", branch_in="linear1", branch="dropout2")],
    params={"attn.wo": "self_attn.out_proj.weight", "mlp.w1": "linear1.weight",
            "mlp.w2": "linear2.weight"},
    residual="mlp.w2")

# torch.nn.TransformerDecoderLayer: self-attention, cross-attention on the
# memory (branch_in: its query, the first argument), MLP.
DECODER_LAYER = Block(
    [Sublayer("attn", norm="norm1", branch_in="self_attn", branch="dropout1"),
     Sublayer("cross", norm="norm2", branch_in="multihead_attn", branch="dropout2"),
     Sublayer("mlp", norm="norm3", branch_in="linear1", branch="dropout3")],
    params={"attn.wo": "self_attn.out_proj.weight", "cross.wo": "multihead_attn.out_proj.weight",
            "mlp.w1": "linear1.weight", "mlp.w2": "linear2.weight"},
    residual="mlp.w2")

# A GPT-2-style block (nanoGPT's Block, Hugging Face's GPT2Block):
# x + attn(ln_1(x)), x + mlp(ln_2(x)); attn and mlp end with their own
# residual dropout, and branch_in is their input. Parameters that a block
# lacks are left out.
GPT2_BLOCK = Block(
    [Sublayer("attn", norm="ln_1", branch="attn"),
     Sublayer("mlp", norm="ln_2", branch="mlp")],
    params={"attn.wo": "attn.c_proj.weight", "mlp.w1": "mlp.c_fc.weight",
            "mlp.w2": "mlp.c_proj.weight"},
    residual="mlp.w2")


# minGPT's Block keeps its MLP in a ModuleDict (c_fc, act, c_proj, dropout)
# that is never called: its forward calls a lambda over the members. The
# modules that run are c_fc (reads the branch input) and dropout (what is
# added).
MINGPT_BLOCK = Block(
    [Sublayer("attn", norm="ln_1", branch="attn"),
     Sublayer("mlp", norm="ln_2", branch_in="mlp.c_fc", branch="mlp.dropout")],
    params=GPT2_BLOCK.params, residual=GPT2_BLOCK.residual)


def preset_for(module):
    """The built-in Block for a module, or None."""
    if isinstance(module, nn.TransformerEncoderLayer):
        return ENCODER_LAYER
    if isinstance(module, nn.TransformerDecoderLayer):
        return DECODER_LAYER
    if all(isinstance(getattr(module, a, None), nn.Module) for a in ("ln_1", "attn", "ln_2", "mlp")):
        mlp = module.mlp
        if isinstance(mlp, (nn.ModuleDict, nn.ModuleList)) and \
                all(isinstance(get(mlp, a), nn.Module) for a in ("c_fc", "dropout")):
            return MINGPT_BLOCK
        return GPT2_BLOCK
    return None


def find_blocks(model):
    """The modules under model (model itself included) that have a preset,
    in forward-definition order, without looking inside a found block."""
    found = []

    def walk(m):
        if preset_for(m) is not None:
            found.append(m)
            return
        for child in m.children():
            walk(child)

    walk(model)
    return found


def resolve(module, dotted):
    """(found, module.a.b.c) for "a.b.c": found is False when a part is
    not there at all (a wrong path), True with None when a part is there
    and holds None (a norm this block does not have: x-transformers keeps
    None in its norms' ModuleList)."""
    obj = module
    for part in dotted.split("."):
        if not hasattr(obj, part):
            return False, None
        obj = getattr(obj, part)
        if obj is None:
            return True, None
    return True, obj


def get(module, dotted):
    """module.a.b.c for "a.b.c", or None when a part is missing."""
    obj = module
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj
