"""The device path (python/resdiag/_device.py: the partial statistics of a
tensor computed with torch ops on its own device), run on CPU tensors.

Reductions: every member of the partial agrees with a float64 reference
written here from the definitions in include/resdiag.h, within the error
bound doc/PYTHON.md derives ("Tensors on other devices"), for float32
accumulation (as on CUDA) and float64 (as on the CPU): float32, float64,
bfloat16, float16, strided views, NaN and Inf, one row, many rows. The
exact members (shape, counts, ABSMAX and its column) are equal.
"""
import math
import unittest

import torch

from common import rel  # noqa: F401 - also puts python/ on sys.path
from resdiag import _device

U32, U64 = 2.0 ** -24, 2.0 ** -53
K = 16


def gamma(n, u):
    return n * u / (1 - n * u)


def stub_layout(seed=7):
    """A sketch layout as resdiag_sketch_layout gives one (any fixed
    buckets and signs will do for the reductions)."""
    def layout(col0, n_cols, row0, n_rows):
        g = torch.Generator().manual_seed(seed)
        bucket = torch.randint(0, K, (col0 + n_cols,), generator=g)[col0:].tolist()
        g = torch.Generator().manual_seed(seed + 1)
        col_sign = (torch.randint(0, 2, (col0 + n_cols,), generator=g) * 2 - 1)[col0:].tolist()
        row_sign = [1.0 if ((row0 + i) * 2654435761) % 7 < 4 else -1.0 for i in range(n_rows)]
        return bucket, [float(s) for s in col_sign], row_sign
    return layout


def reference(x, layout, row0=0, ratio_in=None):
    """The partial of x by the header's definitions, in float64, and the
    quantities the error bound is stated in."""
    m = x.detach().to(torch.float64).reshape(-1, x.shape[-1])
    rows, cols = m.shape
    finite = torch.isfinite(m)
    z = torch.where(finite, m, torch.zeros_like(m))
    n = z.square().sum(1).sqrt()
    mean = z.sum(1) / cols
    q = n / math.sqrt(cols)
    s = (z - mean[:, None]).square().sum(1).div(cols).sqrt()
    out = {"rows": rows, "cols": cols, "sumsq": float(z.square().sum()),
           "nan_count": int(torch.isnan(m).sum()), "inf_count": int(torch.isinf(m).sum())}
    for name, v in (("norm", n), ("mean", mean), ("rms", q), ("std", s)):
        mu = float(v.mean())
        out[name + "_mean"] = mu
        out[name + "_m2"] = float((v - mu).square().sum())
    out["norm_min"], out["norm_max"] = float(n.min()), float(n.max())
    a = torch.where(finite, m.abs(), torch.full_like(m, -1.0)).reshape(-1)
    amax = float(a.max())
    out["absmax"] = amax
    out["absmax_col"] = (int((a == amax).nonzero()[0, 0]) % cols) if amax >= 0 else math.nan
    bucket, col_sign, row_sign = layout(0, cols, row0, rows)
    signed = z * torch.tensor(row_sign, dtype=torch.float64)[:, None] \
        * torch.tensor(col_sign, dtype=torch.float64)[None, :]
    b = torch.tensor(bucket)
    out["sketch"] = torch.zeros(K, dtype=torch.float64).index_add_(0, b, signed.sum(0))
    out["sketch_abs"] = torch.zeros(K, dtype=torch.float64).index_add_(0, b, signed.abs().sum(0))
    if ratio_in is not None:
        live = ratio_in > 0
        out["ratio_sum"] = float((n[live] / ratio_in[live]).sum())
        out["ratio_rows"] = int(live.sum())
    out["q"], out["n"], out["s"], out["a"] = q, n, s, z.abs().sum(1)
    return out


def bounds(ref, u):
    """The documented bound (doc/PYTHON.md) of each member, for element
    accumulation of unit roundoff u and the combination over rows in
    float64."""
    rows, c = ref["rows"], ref["cols"]
    q, n = ref["q"], ref["n"]
    e_n = (c / 2 + 1) * u * n                    # each row norm
    e_q = (c / 2 + 3) * u * q                    # each RMS
    e_m = (c + 1) * u * ref["a"] / c             # each mean (sum of |x| / cols <= q)
    e_s = (c + 1) * u * ref["a"] / c + (c / 2 + 4) * u * ref["s"]  # each std (two passes)
    g = gamma(rows + 2, U64)
    out = {"sumsq": (2 * float((e_n / n.clamp_min(1e-300)).max()) + g) * ref["sumsq"]}
    for name, v, e in (("norm", n, e_n), ("mean", None, e_m), ("rms", q, e_q),
                       ("std", ref["s"], e_s)):
        scale = float((v if v is not None else ref["q"]).abs().max())
        emax = float(e.max())
        out[name + "_mean"] = emax + g * scale
        # m2 = rows * std^2 over rows; std moves by at most max_i e_i
        std = math.sqrt(ref[name + "_m2"] / rows)
        out[name + "_std"] = emax + g * scale
        out[name + "_m2_from"] = std
    out["norm_min"] = out["norm_max"] = float(e_n.max())
    # the sketch's sums are float64 whatever the elements' accumulation
    out["sketch"] = gamma(rows + c + 2, U64) * ref["sketch_abs"] + 1e-300
    return out


def check(tc, x, acc, row0=0, why=""):
    layout = stub_layout()
    parts = _device.Partials(K, layout)
    got, norms = parts.compute(_device.as_rows(x), row0)
    if acc == torch.float32:  # what CUDA does: force float32 element sums
        got, norms = compute_f32(parts, _device.as_rows(x), row0)
    ref = reference(x, layout, row0)
    u = U32 if acc == torch.float32 else U64
    b = bounds(ref, u)
    g = dict(zip(_device.HEAD, got[:_device.N_HEAD].tolist()))
    for k in ("rows", "cols", "nan_count", "inf_count", "absmax"):
        tc.assertEqual(g[k], ref[k], (why, k))
    if math.isnan(ref["absmax_col"]):
        tc.assertTrue(math.isnan(g["absmax_col"]), why)
    else:
        tc.assertEqual(g["absmax_col"], ref["absmax_col"], why)
    tc.assertEqual((g["ratio_sum"], g["ratio_rows"]), (0.0, -1.0), why)
    tc.assertLessEqual(abs(g["sumsq"] - ref["sumsq"]), b["sumsq"] + 1e-300, (why, "sumsq"))
    for name in ("norm", "mean", "rms", "std"):
        tc.assertLessEqual(abs(g[name + "_mean"] - ref[name + "_mean"]), b[name + "_mean"],
                           (why, name + "_mean"))
        # compare the standard deviations over rows, sqrt(m2 / rows)
        sg = math.sqrt(max(g[name + "_m2"], 0.0) / ref["rows"])
        tc.assertLessEqual(abs(sg - b[name + "_m2_from"]), b[name + "_std"] + 1e-300,
                           (why, name + "_m2"))
    for k in ("norm_min", "norm_max"):
        tc.assertLessEqual(abs(g[k] - ref[k]), b[k] + 1e-300, (why, k))
    sk = got[_device.SKETCH0:_device.SKETCH0 + K].to(torch.float64)
    err = (sk - ref["sketch"]).abs()
    tc.assertTrue(bool((err <= b["sketch"]).all()), (why, "sketch", err.max(), b["sketch"].max()))
    tc.assertTrue(bool((got[_device.SKETCH0 + K:] == 0).all()), why)
    tc.assertEqual(tuple(got.shape), (_device.PARTIAL_DOUBLES,), why)
    tc.assertTrue(torch.allclose(norms.to(torch.float64), ref["n"], rtol=(c_of(x) / 2 + 2) * u,
                                 atol=1e-300), why)
    return got, ref


def c_of(x):
    return x.shape[-1]


def compute_f32(parts, x, row0):
    """Partials.compute with float32 element sums on the CPU, as on CUDA."""
    saved = _device.accumulate_dtype
    _device.accumulate_dtype = lambda device, dtype, f64=False: torch.float32
    try:
        return parts.compute(x, row0)
    finally:
        _device.accumulate_dtype = saved


def cases():
    torch.manual_seed(11)
    wide = torch.randn(6, 9, 3 * 48) * 2 + 0.5
    out = []
    for dt in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
        x = (torch.randn(5, 7, 48) * 3 + 1).to(dt)
        x[2, 3, 11] = 30  # a clear maximum
        out.append((x, "contiguous %s" % dt))
        out.append((wide.to(dt)[:, :, 48:96], "strided rows %s" % dt))
        out.append((x.transpose(0, 1), "transposed %s" % dt))
    t = torch.randn(48, 13).t()  # columns not adjacent
    out.append((t, "column-major"))
    bad = torch.randn(4, 48)
    bad[0, 3], bad[1, 7], bad[1, 8], bad[3, 0] = math.nan, math.inf, -math.inf, math.nan
    out.append((bad, "NaN and Inf"))
    allbad = torch.full((2, 48), math.nan)
    allbad[1, :] = math.inf
    out.append((allbad, "no finite value"))
    ties = torch.zeros(3, 48)
    ties[1, 5] = ties[2, 2] = ties[0, 40] = -4.0
    out.append((ties, "ties: first in row-major order"))
    out.append((torch.zeros(3, 48), "all zero"))
    out.append((torch.randn(1, 48) * 5, "one row"))
    out.append((torch.randn(48), "a vector"))
    out.append((torch.randn(4096, 48) * 0.01 + 100, "many rows, mean >> std"))
    out.append((torch.randn(64, 2048).to(torch.bfloat16), "wide bf16"))
    return out


class Reductions(unittest.TestCase):
    def test_float64_accumulation(self):
        for x, why in cases():
            check(self, x, torch.float64, row0=3, why=why)

    def test_float32_accumulation(self):
        for x, why in cases():
            check(self, x, torch.float32, row0=0, why=why)

    def test_no_rows(self):
        parts = _device.Partials(K, stub_layout())
        got, norms = parts.compute(torch.zeros(0, 48), 0)
        g = dict(zip(_device.HEAD, got[:_device.N_HEAD].tolist()))
        self.assertEqual((g["rows"], g["cols"], g["absmax"], g["ratio_rows"]), (0, 48, -1, -1))
        self.assertTrue(math.isnan(g["absmax_col"]) and math.isnan(g["norm_min"]))
        self.assertIsNone(norms)

    def test_update_ratio_pairs_rows(self):
        torch.manual_seed(5)
        parts = _device.Partials(K, stub_layout())
        x = torch.randn(6, 48)
        x[2] = 0  # a row of zero norm is left out
        dx = torch.randn(6, 48) * 0.1
        _, x_norms = parts.compute(x, 0)
        got, _ = parts.compute(dx, 0, ratio_in=x_norms, pair=True)
        ref = reference(dx, stub_layout(), 0, ratio_in=torch.linalg.vector_norm(
            x.double(), dim=1))
        g = dict(zip(_device.HEAD, got[:_device.N_HEAD].tolist()))
        self.assertEqual(g["ratio_rows"], 5)
        self.assertLess(rel(g["ratio_sum"], ref["ratio_sum"]), 1e-12)
        # another row count: not paired
        got, _ = parts.compute(dx[:5], 0, ratio_in=x_norms, pair=True)
        self.assertEqual(got[_device.INDEX["ratio_rows"]].item(), -1)

    def test_bound_can_fail(self):
        """The check is not vacuous: a partial off by more than the bound
        (one ulp of float32 in every row norm, times cols) is caught."""
        x = torch.randn(8, 48)
        with self.assertRaises(AssertionError):
            saved = torch.linalg.vector_norm
            torch.linalg.vector_norm = lambda t, dim=None: saved(t, dim=dim) * (1 + 48 * U32)
            try:
                check(self, x, torch.float32, why="perturbed")
            finally:
                torch.linalg.vector_norm = saved


if __name__ == "__main__":
    unittest.main()
