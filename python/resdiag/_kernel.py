"""The C kernel path of CPU tensors: each tensor is read once, in place, by
the library's kernels (resdiag_partial_compute) when its hook runs, and
every site that saw it is submitted when the step ends, in one call
(resdiag_submit_partial_refs): each site points to its tensor's partial,
a forward tensor brings its per-token norms, from which the library pairs
the update ratio of a residual add as it does for the tensors it reads.

Every hook comes through here, so the work per site is small: the
partials and norms go into buffers kept from step to step, a site is one
tuple appended to the step's list, and the C array of a step's entries is
made again only when the list differs from the last step's (a training
loop records the same sites in the same order every step).

A site sees "that very tensor unchanged" when it is the same torch tensor
object as the one read last (held until the next read, so its memory
cannot be reused meanwhile), with the same version counter (t._version:
an in-place change in between makes it read again), the same first row
for the sketch's row signs and the same kind (forward, backward or a
parameter gradient: only the forward keeps row norms).

The buffers hold at most about NORMS_BUDGET bytes of norms and
PARTS_BUDGET partials: past that, what waits is submitted at once (in its
order, as the step's end would) and the buffers start again, so that a
step of many large tensors does not keep all their norms.

Hooks of the backward may run in autograd's device threads: a lock keeps
one read, and the buffers, to one thread at a time.
"""
import ctypes
import threading

import torch

from . import _lib, _tensor
from ._device import INDEX, PARTIAL_DOUBLES
from ._lib import lib

_NAN, _INF, _ABSMAX = INDEX["nan_count"], INDEX["inf_count"], INDEX["absmax"]
_PARTIAL_BYTES = PARTIAL_DOUBLES * ctypes.sizeof(ctypes.c_double)
_STRIDED = torch.strided
_PARAM = 2  # the kind of a parameter gradient (after FORWARD and BACKWARD)
NORMS_BUDGET = 32 << 20
PARTS_BUDGET = 4096


def _view(t):
    """_tensor.as_2d, its common case inline: a contiguous CPU tensor of a
    dtype C reads."""
    code = _tensor.DTYPES.get(t.dtype)
    if code is not None and t.is_cpu and t.is_contiguous() and t.layout == _STRIDED \
            and not t.is_nested and not t.is_neg() and t.dim() >= 2:
        cols = t.shape[-1]
        rows = t.numel() // cols if cols else 0
        return _lib.Tensor(t.data_ptr() if rows else None, code, rows, cols, cols), t
    return _tensor.as_2d(t)


class KernelPath:
    """A step's sites on the C kernel path: observe() and param() read and
    queue, submit() hands the queue to the library, new_step() forgets the
    step. rows_seen numbers each site's rows in the step (the rows its
    earlier calls gave) for the sketch's row signs."""

    def __init__(self, rd):
        self._rd = rd
        self._lock = threading.Lock()
        self._parts = None  # the step's partials, one row each
        self._cap = 0
        self._parts_at = 0
        self._norms = []    # the k-th forward tensor's row norms in buffer k
        self._moved = 0     # bumped when a buffer moves: the cached refs point into them
        self._cached = None  # (entries, their C array, _moved) of the last submission
        self._failed = ctypes.c_int(0)
        self._early = (_lib.OK, 0)  # what submissions before the step's end reported
        self._grow(256)
        self.new_step()

    def new_step(self):
        with self._lock:
            self.rows_seen = {}
            self._entries = []  # (dir, layer, sublayer, site, param, file, row, norms or -1)
            self._n = 0         # partial rows used in this step
            self._n_norms = 0   # norm buffers used in this step
            self._norms_bytes = 0
            self._last = None   # (tensor, version, row0, kind, (rows, row, norms))

    def _grow(self, cap):
        parts = (ctypes.c_double * (cap * PARTIAL_DOUBLES))()
        if self._parts is not None:
            ctypes.memmove(parts, self._parts, self._cap * _PARTIAL_BYTES)
        self._parts, self._cap, self._parts_at = parts, cap, ctypes.addressof(parts)
        self._moved += 1

    def _norms_buffer(self, k, rows):
        bufs = self._norms
        if k < len(bufs) and len(bufs[k]) >= rows:
            return bufs[k]
        buf = (ctypes.c_double * max(rows, 1))()
        if k < len(bufs):
            bufs[k] = buf
        else:
            bufs.append(buf)
        self._moved += 1
        return buf

    def _read(self, t, row0, kind):
        """Reads t into the next partial row (with lock held): (status,
        (rows, row, norms buffer index or -1))."""
        version = t._version
        view, owner = _view(t)
        rows = view.rows
        if self._n >= PARTS_BUDGET or (kind == _lib.FORWARD and self._norms_bytes and
                                       self._norms_bytes + 8 * rows > NORMS_BUDGET):
            self._submit_early()
        row = self._n
        if row == self._cap:
            self._grow(2 * self._cap)
        k, norms = -1, None
        if kind == _lib.FORWARD:
            k = self._n_norms
            norms = self._norms_buffer(k, rows)
            self._norms_bytes += 8 * rows
        st = lib.resdiag_partial_compute(self._rd, view, row0,
                                         self._parts_at + row * _PARTIAL_BYTES, norms)
        del owner
        if st != _lib.OK:
            self._last = None
            return st, None
        self._n = row + 1
        if k >= 0:
            self._n_norms = k + 1
        read = (rows, row, k)
        self._last = (t, version, row0, kind, read)
        return st, read

    def observe(self, direction, t, layer, sub, site, cs):
        """Reads t for the site (unless it is the tensor read last,
        unchanged) and queues the site; returns the read's status (the
        submission's comes from submit())."""
        key = (direction, layer, sub, site)
        with self._lock:
            seen = self.rows_seen
            row0 = seen.get(key, 0)
            last = self._last
            if last is not None and last[0] is t and last[1] == t._version and \
                    last[2] == row0 and last[3] == direction:
                read = last[4]
            else:
                st, read = self._read(t, row0, direction)
                if st != _lib.OK:
                    return st
            seen[key] = row0 + read[0]
            self._entries.append((direction, layer, sub, site, -1, cs, read[1], read[2]))
        return _lib.OK

    def observe_sites(self, direction, t, sites):
        """observe() at each of sites ((layer, sublayer, site, file) tuples):
        one tensor's gradient at the sites whose tensor it flows back to.
        Returns the first failure's status or OK."""
        first = _lib.OK
        for layer, sub, site, cs in sites:
            st = self.observe(direction, t, layer, sub, site, cs)
            if st and not first:
                first = st
        return first

    def param(self, layer, index, g, cs):
        """Reads gradient g of parameter `index` of `layer` (RESDIAG_MODEL_LEVEL
        for the model's) and queues it: (status, whether g is all zero: one
        read gives both)."""
        with self._lock:
            last = self._last
            if last is not None and last[0] is g and last[1] == g._version and \
                    last[3] == _PARAM:
                read = last[4]  # a parameter shared by two entries (tied weights)
            else:
                st, read = self._read(g, 0, _PARAM)
                if st != _lib.OK:
                    return st, False
            self._entries.append((_lib.FORWARD, layer, 0, -1, index, cs, read[1], -1))
            p, at = self._parts, read[1] * PARTIAL_DOUBLES
            return _lib.OK, p[at + _NAN] + p[at + _INF] == 0 and p[at + _ABSMAX] <= 0

    def _submit_early(self):
        """Submits what waits before the step ends (lock held) and starts the
        buffers again (the last tensor is read again if it comes again)."""
        st, failed = self._submit_locked()
        early = self._early
        self._early = (early[0] or st, early[1] + failed)
        self._n = self._n_norms = self._norms_bytes = 0
        self._last = None

    def submit(self):
        """Submits what waits, in the order it came, in one call: (status of
        the first failure or OK, how many entries failed), with what
        submissions before the step's end reported."""
        with self._lock:
            st, failed = self._submit_locked()
            early, self._early = self._early, (_lib.OK, 0)
            return early[0] or st, early[1] + failed

    def _submit_locked(self):
        """Submits what waits (lock held): (status, failed entries)."""
        entries = self._entries
        if not entries:
            return _lib.OK, 0
        self._entries = []
        c = self._cached
        if c is None or c[2] != self._moved or c[0] != entries:
            parts_at = self._parts_at
            norms = [ctypes.addressof(b) for b in self._norms]
            refs = (_lib.PartialRef * len(entries))(*[
                ((d, layer, sub, site, param, 0, cs), parts_at + row * _PARTIAL_BYTES,
                 norms[k] if k >= 0 else None)
                for d, layer, sub, site, param, cs, row, k in entries])
            self._cached = c = (entries, refs, self._moved)
        st = lib.resdiag_submit_partial_refs(self._rd, len(entries), c[1], None,
                                             ctypes.byref(self._failed))
        return st, self._failed.value
