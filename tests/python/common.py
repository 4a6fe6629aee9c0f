"""Shared by the tests of the PyTorch binding: models, and relative checks.

The tests run with RESDIAG_LIBRARY set by meson to the library just built
and PYTHONPATH to python/.
"""
import math
import os
import sys
import tempfile

import torch
import torch.nn as nn

# Meson sets PYTHONPATH; this also lets a test run by hand from anywhere.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

torch.set_num_threads(1)  # two cores shared by the whole suite


def rel(a, b):
    """Relative difference, 0 for two zeros."""
    a, b = float(a), float(b)
    return abs(a - b) / max(abs(a), abs(b), 1e-300)


def vnorm(t):
    return float(torch.linalg.vector_norm(t.detach()))


def tok_norm_mean(t):
    t = t.detach()
    return float(torch.linalg.vector_norm(t.reshape(-1, t.shape[-1]), dim=-1).mean())


class Seq(nn.Module):
    """embedding (given as input) -> stack -> linear head."""

    def __init__(self, stack, d, vocab):
        super().__init__()
        self.stack = stack
        self.head = nn.Linear(d, vocab)

    def forward(self, x):
        return self.head(self.stack(x))


def encoder(L, d, norm_first, dropout=0.0, final_norm=True, heads=4, batch_first=True):
    layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout, batch_first=batch_first,
                                       norm_first=norm_first)
    return nn.TransformerEncoder(layer, L, norm=nn.LayerNorm(d) if final_norm else None,
                                 enable_nested_tensor=False)


def xavier(model):
    for w in model.parameters():
        if w.dim() > 1:
            nn.init.xavier_uniform_(w)


def tmpdir():
    return tempfile.TemporaryDirectory(prefix="resdiag-py-")


def finite(x):
    return isinstance(x, float) and math.isfinite(x)
