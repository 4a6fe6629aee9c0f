"""The partial statistics of a torch tensor, computed with torch ops on the
tensor's own device (resdiag_partial of include/resdiag.h; doc/PYTHON.md,
"Tensors on other devices", derives the error bound).

The result of one tensor is one small tensor of PARTIAL_DOUBLES values in
the header's pinned layout, on the tensor's device. Nothing here reads a
value back to the host: no .item(), .cpu(), .tolist(), no bool() of a
tensor, no Python decision on a tensor's value, and no host-to-device copy
that waits (constants and layouts go up once, from pinned memory where the
device has it). Only shapes, dtypes and devices, which torch keeps on the
host, steer the code.

Per row i of the (rows, cols) view x, with its NaN and Inf replaced by 0
(as the C kernel treats them): n_i = ||x_i||, m_i = sum_j x_ij / cols,
q_i = n_i / sqrt(cols), s_i = ||x_i - m_i|| / sqrt(cols) (two passes over
the row: the deviations are taken from the row's mean). Elements are
accumulated in `acc` (float32, or float64) per row; the four row vectors are
then combined over rows in float64 (mean, then the sum of squared
deviations from it: two passes over each vector), and the sketch's sums
are float64 too, except on devices without float64.
"""
import math

import torch

from . import _tensor

# The members of resdiag_partial before its sketch, in the header's order.
HEAD = ("rows", "cols", "sumsq", "norm_mean", "norm_m2", "norm_min", "norm_max",
        "mean_mean", "mean_m2", "rms_mean", "rms_m2", "std_mean", "std_m2", "absmax",
        "absmax_col", "nan_count", "inf_count", "ratio_sum", "ratio_rows")
INDEX = {name: i for i, name in enumerate(HEAD)}
MAX_SKETCH = 64  # RESDIAG_MAX_SKETCH
N_HEAD = len(HEAD)
PARTIAL_DOUBLES = N_HEAD + MAX_SKETCH  # RESDIAG_PARTIAL_DOUBLES
SKETCH0 = N_HEAD  # index of sketch[0]

# Devices whose kernels have no float64 (their partials are float32 until
# they reach the host).
_NO_F64 = ("mps",)


def combine_dtype(device):
    """The dtype of the combination over rows (and of the partial itself)."""
    return torch.float32 if device.type in _NO_F64 else torch.float64


def accumulate_dtype(device, dtype, cuda_f64=False):
    """The dtype elements are summed in: float64 on the CPU (cheap there),
    for float64 data, and on CUDA when asked (cuda_f64: consumer GPUs run
    float64 at 1/32 to 1/64 of the float32 rate); float32 elsewhere."""
    if device.type in _NO_F64:
        return torch.float32
    if device.type == "cpu" or dtype == torch.float64 or (cuda_f64 and device.type == "cuda"):
        return torch.float64
    return torch.float32


def upload(values, dtype, device):
    """A host sequence as a tensor on device, without a copy that waits for
    the device: from pinned memory with non_blocking on CUDA (torch keeps
    the pinned source alive until the copy has run)."""
    host = torch.tensor(values, dtype=dtype)
    if device.type == "cpu":
        return host
    if device.type == "cuda":
        return host.pin_memory().to(device, non_blocking=True)
    return host.to(device)  # once per cached layout, not per site


def as_rows(t):
    """t detached, as (rows, cols): the last axis is the columns, every
    other axis the rows (a vector is one row). A view where torch can make
    one, else a copy on the tensor's device."""
    _tensor.check(t)
    t = t.detach()
    if t.layout != torch.strided or t.is_nested:
        raise TypeError("resdiag: only strided (dense) tensors can be observed")
    if t.dim() == 0:
        return t.reshape(1, 1)
    if t.dim() == 1:
        return t.reshape(1, -1)
    return t.reshape(-1, t.shape[-1])


class Partials:
    """Computes partials of tensors on any device, and caches what goes up
    to each device once: the sketch's column layout per (device, width,
    dtype), the row signs per (device, row0, rows, dtype) and the constant
    part of a partial per (device, rows, cols). layout(col0, n_cols, row0,
    n_rows) returns the host arrays (bucket list, col_sign list, row_sign
    list) of the run (resdiag_sketch_layout); k is the run's sketch size;
    shard = (shard_cols, shard_col_offset) of a tensor-parallel rank, whose
    tensors of width shard_cols are sketched by their global columns."""

    MAX_ROW_SIGNS = 64  # cached (row0, rows) pairs per device before the cache restarts

    def __init__(self, k, layout, cuda_f64=False, shard=None):
        self.k = int(k)
        self.shard = shard
        self._layout = layout
        self.cuda_f64 = cuda_f64
        self._cols = {}
        self._rows = {}
        self._consts = {}

    def column_matrix(self, device, cols, dtype):
        """(k, cols): column j holds tau(j) in the row of its bucket, 0
        elsewhere, so that matrix @ c sums the signed columns per bucket."""
        key = (device, cols, dtype)
        m = self._cols.get(key)
        if m is None:
            col0 = self.shard[1] if self.shard and cols == self.shard[0] else 0
            bucket, sign, _ = self._layout(col0, cols, 0, 0)
            dense = [[0.0] * cols for _ in range(self.k)]
            for j in range(cols):
                dense[bucket[j]][j] = sign[j]
            m = self._cols[key] = upload(dense, dtype, device)
        return m

    def row_signs(self, device, row0, rows, dtype):
        key = (device, row0, rows, dtype)
        s = self._rows.get(key)
        if s is None:
            if len(self._rows) >= self.MAX_ROW_SIGNS:
                self._rows.clear()
            _, _, sign = self._layout(0, 0, row0, rows)
            s = self._rows[key] = upload(sign, dtype, device)
        return s

    def _const(self, device, rows, cols, dtype):
        """rows, cols, then the tail of the partial for K = 0 and no ratio."""
        key = (device, rows, cols, dtype)
        c = self._consts.get(key)
        if c is None:
            c = self._consts[key] = upload([float(rows), float(cols), 0.0, -1.0]
                                           + [0.0] * MAX_SKETCH, dtype, device)
        return c

    def empty(self, device, cols):
        """The partial of a tensor with no rows."""
        nan = float("nan")
        vals = [0.0] * PARTIAL_DOUBLES
        vals[INDEX["cols"]] = float(cols)
        for name in ("norm_mean", "norm_min", "norm_max", "mean_mean", "rms_mean", "std_mean",
                     "absmax_col"):
            vals[INDEX[name]] = nan
        vals[INDEX["absmax"]] = -1.0
        vals[INDEX["ratio_rows"]] = -1.0
        key = (device, "empty", cols)
        c = self._consts.get(key)
        if c is None:
            c = self._consts[key] = upload(vals, combine_dtype(device), device)
        return c

    def compute(self, x, row0=0, sketch=True, ratio_in=None, pair=False):
        """(partial, row norms) of the (rows, cols) tensor x (as_rows).
        row0: the sign index of x's first row. sketch: compute the K sums
        (False: zeros, for parameter gradients). pair: compute the update
        ratio against ratio_in, the row norms of the STREAM_IN tensor of the
        same sublayer call (None or another row count: not paired,
        ratio_rows = -1). The row norms are in the combination dtype."""
        rows, cols = x.shape
        dev = x.device
        over = combine_dtype(dev)
        if rows == 0:
            return self.empty(dev, cols), None
        acc = accumulate_dtype(dev, x.dtype, self.cuda_f64)
        nan = torch.isnan(x).sum()
        inf = torch.isinf(x).sum()
        xf = x.to(acc)
        # Non-finite values count as 0 everywhere (and the divisor stays cols).
        xf = torch.nan_to_num(xf, 0.0, 0.0, 0.0) if xf is x else xf.nan_to_num_(0.0, 0.0, 0.0)
        root = math.sqrt(cols)
        norms = torch.linalg.vector_norm(xf, dim=1)
        means = xf.sum(1) / cols
        stds = torch.linalg.vector_norm(xf - means[:, None], dim=1) / root
        per_row = torch.stack((norms, means, norms / root, stds)).to(over)  # (4, rows)
        mu = per_row.mean(1)
        m2 = (per_row - mu[:, None]).square().sum(1)
        moments = torch.stack((mu, m2), 1).reshape(8)  # norm, mean, rms, std: (mean, m2)
        n_over = per_row[0]
        lo_hi = torch.aminmax(n_over)
        amax, idx = xf.abs().reshape(-1).max(0)  # the first maximal element (row-major)
        none = (nan + inf) == rows * cols        # no finite value
        absmax = amax.to(over).masked_fill(none, -1.0)
        col = (idx % cols).to(over).masked_fill(none, float("nan"))
        head = torch.stack((n_over.square().sum(), moments[0], moments[1], lo_hi[0], lo_hi[1],
                            moments[2], moments[3], moments[4], moments[5], moments[6],
                            moments[7], absmax, col, nan.to(over), inf.to(over)))
        const = self._const(dev, rows, cols, over)
        parts = [const[:2], head]
        if pair and ratio_in is not None and ratio_in.shape[0] == rows:
            live = ratio_in > 0
            parts.append(torch.stack(((n_over / ratio_in).masked_fill(~live, 0.0).sum(),
                                      live.sum().to(over))))
        else:
            parts.append(const[2:4])
        if sketch and self.k:
            parts += [self._sketch(xf, row0, over), const[4 + self.k:]]
        else:
            parts.append(const[4:])
        return torch.cat(parts), n_over

    def _sketch(self, xf, row0, over):
        """sketch[m] = sum_i sigma(row0+i) sum_{bucket(j)=m} tau(j) x_ij:
        the rows' signed sum (one value per column), then the signed
        columns summed per bucket, both accumulated in the combination
        dtype (float64 but on devices without it: the reduction reads the
        elements as they are and adds in float64, without a float64 copy
        of the tensor; doc/PARTIAL.md asks for it, since the sketch
        relations of f32 tensors are judged near float32's own rounding).
        Products by the signs are exact. No matmul in float32, which TF32
        settings would round to 10 bits."""
        rows, cols = xf.shape
        if xf.dtype == over:
            sigma = self.row_signs(xf.device, row0, rows, over)
            return torch.mv(self.column_matrix(xf.device, cols, over), torch.mv(xf.t(), sigma))
        sigma = self.row_signs(xf.device, row0, rows, xf.dtype)
        c = (xf * sigma[:, None]).sum(0, dtype=over)
        return (self.column_matrix(xf.device, cols, over) * c).sum(1)
