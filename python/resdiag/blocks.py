"""How a block's submodules map to resdiag's sites.

A block is a sequence of sublayers; each sublayer has a ``branch`` (the
module whose output is what gets added to the residual stream: dx), an
optional ``norm`` and an optional ``branch_in`` (the first module of the
branch, the one that reads the branch's input; default: ``branch``).
Module hooks then give every site (see doc/PYTHON.md):

- norm_in / norm_out: the norm's input and output,
- branch_out: the branch's output,
- stream_in of sublayer 0: the block's input; stream_out of the last
  sublayer: the block's output,
- the stream between sublayer s-1 and s: the input of whichever of
  sublayer s's ``norm`` and ``branch_in`` runs first. A pre-norm block
  (x + F(Norm(x))) calls the norm first, and it reads the stream; a
  post-norm block (Norm(x + F(x))) calls the branch first, and it reads
  the stream. So the mapping follows the code that actually ran, never a
  declared placement, and the library decides the placement from the data.

In a parallel block (x + Attn(Norm(x)) + MLP(Norm(x))) every sublayer's
stream_in is the block's input, and only the last one has a stream_out.
"""
import torch.nn as nn


class Sublayer:
    """One sublayer: its name in the run file and its submodules' dotted
    paths inside the block."""

    __slots__ = ("name", "branch", "norm", "branch_in")

    def __init__(self, name, branch, norm=None, branch_in=None):
        self.name = name
        self.branch = branch
        self.norm = norm
        self.branch_in = branch_in or branch

    def __repr__(self):
        return "Sublayer(%r, branch=%r, norm=%r, branch_in=%r)" % (
            self.name, self.branch, self.norm, self.branch_in)


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
        self.params = dict(params or {})
        self.parallel = bool(parallel)
        if residual is not None and residual not in self.params:
            raise ValueError("resdiag.Block: residual=%r is not one of params (%s)"
                             % (residual, ", ".join(map(repr, self.params)) or "none"))
        self.residual = residual

    def __repr__(self):
        return "Block(%r, params=%r, parallel=%r, residual=%r)" % (
            self.sublayers, self.params, self.parallel, self.residual)


# torch.nn.TransformerEncoderLayer: x + dropout1(self_attn(...)), then
# x + dropout2(linear2(dropout(activation(linear1(...))))), norm1/norm2
# before (norm_first=True) or after (False) each add.
ENCODER_LAYER = Block(
    [Sublayer("attn", norm="norm1", branch_in="self_attn", branch="dropout1"),
     Sublayer("mlp", norm="norm2", branch_in="linear1", branch="dropout2")],
    params={"attn.wo": "self_attn.out_proj.weight", "mlp.w1": "linear1.weight",
            "mlp.w2": "linear2.weight"},
    residual="mlp.w2")

# torch.nn.TransformerDecoderLayer: self-attention, cross-attention on the
# memory, MLP.
DECODER_LAYER = Block(
    [Sublayer("attn", norm="norm1", branch_in="self_attn", branch="dropout1"),
     Sublayer("cross", norm="norm2", branch_in="multihead_attn", branch="dropout2"),
     Sublayer("mlp", norm="norm3", branch_in="linear1", branch="dropout3")],
    params={"attn.wo": "self_attn.out_proj.weight", "cross.wo": "multihead_attn.out_proj.weight",
            "mlp.w1": "linear1.weight", "mlp.w2": "linear2.weight"},
    residual="mlp.w2")

# A GPT-2-style block (nanoGPT's Block, Hugging Face's GPT2Block):
# x + attn(ln_1(x)), x + mlp(ln_2(x)); attn and mlp end with their own
# residual dropout. Parameters that a block lacks are left out.
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


def get(module, dotted):
    """module.a.b.c for "a.b.c", or None when a part is missing."""
    obj = module
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj
