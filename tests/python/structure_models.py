"""Toy torch models of every way of placing the norms, for test_structure.py.

Each model writes down, as its forward runs, which tensor each resdiag site
stands for (a Tape): the stream entering a sublayer, what its norm reads and
returns, what the branch reads, the branch's raw output, what a norm on the
branch's output returns, what is added, the stream leaving. The tape comes
from the model's own code, not from module hooks, so the test can hold the
recorder's sites against it. Tape.put stamps its sites with one moment of
the forward: sites of one call may be recorded in any order among
themselves, sites of a later call must be recorded later.

The families, as doc/PYTHON.md maps them (MAPPINGS):
  pre        x + F(N(x))
  post       N(x + F(x))
  sandwich   x + N2(F(N1(x)))        (Gemma 2 names)
  reordered  x + N(F(x))             (OLMo 2 names)
  hybrid     attn: x + F(x); mlp: N(x + F(x))   (HybridNorm-like)
  parallel   x + Attn(N(x)) + MLP(N(x))
  xt_pre     x-transformers' layers: [norms, block, residual] per sublayer, pre_norm=True
  xt_post    the same with pre_norm=False: the last sublayer has no norm of its own
"""
import math

import torch
import torch.nn as nn

import resdiag

Sub = resdiag.Sublayer


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


NORMS = {"layernorm": nn.LayerNorm, "rmsnorm": RMSNorm}


class Attention(nn.Module):
    """Causal self-attention, two heads."""

    def __init__(self, d, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2)
                   for z in self.qkv(x).split(c, dim=2))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        att = att.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        return self.proj((att.softmax(-1) @ v).transpose(1, 2).reshape(b, t, c))


class MLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, 4 * d)
        self.proj = nn.Linear(4 * d, d)

    def forward(self, x):
        return self.proj(nn.functional.gelu(self.fc(x)))


class Tape:
    """{(layer, sublayer, site): (moment, tensor)}; model sites take layer -1.
    Tensors that need a gradient keep it (retain_grad) for the backward
    sites."""

    def __init__(self):
        self.entries = {}
        self.moment = 0
        self.pending = []

    def with_next(self, *sites):
        """sites that belong to the next put's moment (the embedding's
        output is recorded where layer 0 begins)."""
        self.pending += sites

    def put(self, *sites):
        """sites: (layer, sublayer, {site: tensor}) triples, one moment."""
        self.moment += 1
        sites, self.pending = self.pending + list(sites), []
        for layer, sub, named in sites:
            for site, t in named.items():
                if t.requires_grad:
                    t.retain_grad()
                self.entries[(layer, sub, site)] = (self.moment, t)


class Sequential(nn.Module):
    """The two sublayers of one family in a block: attn then mlp."""

    def __init__(self, family, d, norm):
        super().__init__()
        self.family = family
        self.attn, self.mlp = Attention(d), MLP(d)
        if family in ("pre", "post"):
            self.norm1, self.norm2 = norm(d), norm(d)
        elif family == "sandwich":
            self.input_layernorm, self.post_attention_layernorm = norm(d), norm(d)
            self.pre_feedforward_layernorm, self.post_feedforward_layernorm = norm(d), norm(d)
        elif family == "reordered":
            self.attention_norm, self.ffn_norm = norm(d), norm(d)
        elif family == "hybrid":
            self.norm2 = norm(d)
        else:
            raise ValueError(family)
        self.layer, self.tape = 0, None

    def norms(self):
        """(input norm, output norm, post-add norm) of each sublayer."""
        f = self.family
        if f == "pre":
            return [(self.norm1, None, None), (self.norm2, None, None)]
        if f == "post":
            return [(None, None, self.norm1), (None, None, self.norm2)]
        if f == "sandwich":
            return [(self.input_layernorm, self.post_attention_layernorm, None),
                    (self.pre_feedforward_layernorm, self.post_feedforward_layernorm, None)]
        if f == "reordered":
            return [(None, self.attention_norm, None), (None, self.ffn_norm, None)]
        return [(None, None, None), (None, None, self.norm2)]  # hybrid

    def forward(self, x):
        put, l = self.tape.put, self.layer
        for s, (branch, (n_in, n_out, n_post)) in enumerate(zip((self.attn, self.mlp),
                                                                self.norms())):
            put((l, s, {"stream_in": x}))
            h = x
            if n_in is not None:
                h = n_in(x)
                put((l, s, {"norm_in": x}))
                put((l, s, {"norm_out": h}))
            put((l, s, {"branch_in": h}))
            r = branch(h)
            if n_out is None:
                put((l, s, {"branch_out": r}))
                f = r
            else:
                put((l, s, {"out_norm_in": r}))
                f = n_out(r)
                put((l, s, {"out_norm_out": f, "branch_out": f}))
            y = x + f
            if n_post is not None:
                put((l, s, {"norm_in": y}))
                y = n_post(y)
                put((l, s, {"norm_out": y}))
            put((l, s, {"stream_out": y}))
            x = y
        return x


class Parallel(nn.Module):
    def __init__(self, d, norm):
        super().__init__()
        self.norm, self.attn, self.mlp = norm(d), Attention(d), MLP(d)
        self.layer, self.tape = 0, None

    def forward(self, x):
        put, l = self.tape.put, self.layer
        put((l, 0, {"stream_in": x}), (l, 1, {"stream_in": x}))
        h = self.norm(x)
        put((l, 0, {"norm_in": x}), (l, 1, {"norm_in": x}))
        put((l, 0, {"norm_out": h}), (l, 1, {"norm_out": h}))
        put((l, 0, {"branch_in": h}))
        a = self.attn(h)
        put((l, 0, {"branch_out": a}))
        put((l, 1, {"branch_in": h}))
        m = self.mlp(h)
        put((l, 1, {"branch_out": m}))
        y = x + a + m
        put((l, 1, {"stream_out": y}))
        return y


class Model(nn.Module):
    """embedding (the input) -> blocks -> final norm -> head."""

    def __init__(self, family, L, d, vocab, norm):
        super().__init__()
        if family == "parallel":
            self.blocks = nn.ModuleList(Parallel(d, norm) for _ in range(L))
        else:
            self.blocks = nn.ModuleList(Sequential(family, d, norm) for _ in range(L))
        # post-norm stacks end normalized: no final norm
        self.ln_f = None if family == "post" else norm(d)
        self.head = nn.Linear(d, vocab)
        self.tape = Tape()
        for l, b in enumerate(self.blocks):
            b.layer, b.tape = l, self.tape

    def forward(self, x):
        self.tape.with_next((-1, 0, {"embed_out": x}))
        for b in self.blocks:
            x = b(x)
        if self.ln_f is not None:
            self.tape.put((-1, 0, {"final_norm_in": x}))
            x = self.ln_f(x)
        self.tape.put((-1, 0, {"final_norm_out": x}))
        logits = self.head(x)
        self.tape.put((-1, 0, {"logits": logits}))
        return logits


class Residual(nn.Module):
    def forward(self, out, residual):
        return out + residual


class XLayers(nn.Module):
    """x-transformers' AttentionLayers, the parts that place the norms:
    one entry [norms, block, residual] per sublayer, attention and
    feed-forward alternating; norms = [pre-branch, post-branch, post-main]
    with None where a norm is absent. pre_norm=False puts a post-main norm
    on every sublayer but the last, whose norm is the final norm."""

    def __init__(self, L, d, pre_norm, norm):
        super().__init__()
        self.layers = nn.ModuleList()
        for i in range(2 * L):
            last = i == 2 * L - 1
            norms = nn.ModuleList([norm(d) if pre_norm else None, None,
                                   norm(d) if not pre_norm and not last else None])
            self.layers.append(nn.ModuleList([norms, Attention(d) if i % 2 == 0 else MLP(d),
                                              Residual()]))
        self.final_norm = norm(d)
        self.tape = None

    def forward(self, x):
        put = self.tape.put
        for i, (norms, block, residual_fn) in enumerate(self.layers):
            l, s = divmod(i, 2)
            pre_branch, _, post_main = norms
            residual = x
            put((l, s, {"stream_in": x}))
            if pre_branch is not None:
                x = pre_branch(x)
                put((l, s, {"norm_in": residual}))
                put((l, s, {"norm_out": x}))
            put((l, s, {"branch_in": x}))
            out = block(x)
            put((l, s, {"branch_out": out}))
            x = residual_fn(out, residual)
            if post_main is not None:
                put((l, s, {"norm_in": x}))
                x = post_main(x)
                put((l, s, {"norm_out": x}))
            put((l, s, {"stream_out": x}))
        put((-1, 0, {"final_norm_in": x}))
        return self.final_norm(x)


class XTransformer(nn.Module):
    def __init__(self, L, d, vocab, pre_norm, norm):
        super().__init__()
        self.attn_layers = XLayers(L, d, pre_norm, norm)
        self.to_logits = nn.Linear(d, vocab)
        self.tape = self.attn_layers.tape = Tape()

    def forward(self, x):
        self.tape.with_next((-1, 0, {"embed_out": x}))
        h = self.attn_layers(x)
        self.tape.put((-1, 0, {"final_norm_out": h}))
        logits = self.to_logits(h)
        self.tape.put((-1, 0, {"logits": logits}))
        return logits


def block_mapping(family):
    """attach() keywords of the Block families: the mappings doc/PYTHON.md shows."""
    if family in ("pre", "post"):
        subs = [Sub("attn", norm="norm1", branch="attn"), Sub("mlp", norm="norm2", branch="mlp")]
    elif family == "sandwich":
        subs = [Sub("attn", norm="input_layernorm", branch="attn",
                    out_norm="post_attention_layernorm"),
                Sub("mlp", norm="pre_feedforward_layernorm", branch="mlp",
                    out_norm="post_feedforward_layernorm")]
    elif family == "reordered":
        subs = [Sub("attn", branch="attn", out_norm="attention_norm"),
                Sub("mlp", branch="mlp", out_norm="ffn_norm")]
    elif family == "hybrid":
        subs = [Sub("attn", branch="attn"), Sub("mlp", norm="norm2", branch="mlp")]
    elif family == "parallel":
        subs = [Sub("attn", norm="norm", branch="attn"), Sub("mlp", norm="norm", branch="mlp")]
    else:
        raise ValueError(family)
    return resdiag.Block(subs, params={"attn.wo": "attn.proj.weight", "mlp.w2": "mlp.proj.weight"},
                         parallel=family == "parallel", residual="mlp.w2")


def xt_mapping(pre_norm):
    """The x-transformers mapping: two entries per layer, the input norm at
    norms[0] (pre_norm) or the post-main norm at norms[2]."""
    n = "0" if pre_norm else "2"
    return resdiag.Layers("attn_layers.layers", per_layer=2, sublayers=[
        Sub("attn", norm="0.0." + n, branch="0.1"),
        Sub("mlp", norm="1.0." + n, branch="1.1")],
        params={"attn.wo": "0.1.proj.weight", "mlp.w2": "1.1.proj.weight"}, residual="mlp.w2")


FAMILIES = ("pre", "post", "sandwich", "reordered", "hybrid", "parallel", "xt_pre", "xt_post")


def build(family, L, d, vocab, norm_kind):
    """(model, attach keywords)."""
    norm = NORMS[norm_kind]
    if family.startswith("xt_"):
        pre_norm = family == "xt_pre"
        model = XTransformer(L, d, vocab, pre_norm, norm)
        return model, {"layers": xt_mapping(pre_norm), "head": "to_logits"}
    model = Model(family, L, d, vocab, norm)
    return model, {"blocks": model.blocks, "block": block_mapping(family)}
