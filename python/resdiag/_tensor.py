"""torch tensor -> resdiag_tensor view, without a copy where C can read it.

A CPU tensor of float32, float64, bfloat16 or float16 whose elements form
(rows, cols) with unit column stride and one row stride is passed as is
(data pointer, shape, row stride). Everything else is copied once:
tensors on another device (copied to the CPU), other dtypes (converted to
float32), and layouts that no single row stride describes (made contiguous,
e.g. a (T, B, C) tensor transposed to (B, T, C)).
"""
import torch

from . import _lib

DTYPES = {
    torch.float32: _lib.DTYPE_F32,
    torch.float64: _lib.DTYPE_F64,
    torch.float16: _lib.DTYPE_F16,
    torch.bfloat16: _lib.DTYPE_BF16,
}


def check(t):
    """Refuses what holds no real values to record, where it is given:
    TypeError for a non-tensor and for a complex tensor (converting it
    would keep its real part only), ValueError for a tensor on the meta
    device (no data: it would fail only when the step ends)."""
    if not isinstance(t, torch.Tensor):
        raise TypeError("resdiag: observe takes a torch.Tensor, not %s" % type(t).__name__)
    if t.is_complex():
        raise TypeError("resdiag: a complex tensor (%s) is not recorded (its real part alone "
                        "would be); observe t.real and t.imag, or t.abs()" % t.dtype)
    if t.is_meta:
        raise ValueError("resdiag: a tensor on the meta device has no values to record")


def _row_stride(shape, strides):
    """The one stride between consecutive rows when the leading axes
    collapse into rows in their logical order, else None. Size-1 axes do
    not matter. Checked by hand: a failing torch view() raises, and torch
    errors are slow to build."""
    lead = [(n, s) for n, s in zip(shape[:-1], strides[:-1]) if n != 1]
    if not lead:
        return shape[-1]  # one row
    for (n0, s0), (n1, s1) in zip(lead, lead[1:]):
        if s0 != s1 * n1:
            return None
    return lead[-1][1]


def as_2d(t):
    """Returns (view, owner): a resdiag Tensor over t's last axis as cols and
    every other axis as rows, and the tensor whose memory it points into
    (t itself, or a copy); keep owner alive while C reads the view."""
    # The common case first, in as few torch calls as it takes (every
    # observed tensor comes through here): a contiguous CPU tensor of a
    # dtype C reads. data_ptr() needs no detach().
    code = DTYPES.get(t.dtype)
    if code is not None and t.is_cpu and t.is_contiguous() and t.layout == torch.strided \
            and not t.is_nested and not t.is_neg() and t.dim() >= 2:
        shape = t.shape
        cols = shape[-1]
        rows = t.numel() // cols if cols else 0
        return _lib.Tensor(t.data_ptr() if rows else None, code, rows, cols, cols), t
    check(t)
    t = t.detach()
    if t.layout != torch.strided or t.is_nested:
        raise TypeError("resdiag: only strided (dense) tensors can be observed")
    if t.device.type != "cpu":
        t = t.to("cpu")
    if t.dtype not in DTYPES:
        t = t.to(torch.float32)
    if t.is_neg() or t.is_conj():
        t = t.resolve_neg().resolve_conj()
    if t.dim() < 2:
        t = t.reshape(1, -1)
    shape, strides = t.shape, t.stride()
    cols = shape[-1]
    rows = t.numel() // cols if cols else 0
    stride = _row_stride(shape, strides)
    # Copy when the rows are not one stride apart (e.g. (T, B, C) memory seen
    # as (B, T, C): the row order matters to the sketches), when columns are
    # not adjacent, or when rows overlap (broadcast views).
    if stride is None or (cols > 1 and strides[-1] != 1) or stride < cols:
        t = t.contiguous()
        stride = cols
    view = _lib.Tensor(t.data_ptr() if rows else None, DTYPES[t.dtype], rows, cols, stride)
    return view, t
