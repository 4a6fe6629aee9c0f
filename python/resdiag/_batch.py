"""A step's partial statistics, kept on their devices until the step ends,
then moved to the host in one copy per device and submitted together.

add() only appends (the partial stays where it was computed, no
synchronization); submit() stacks the step's partials per device, copies
each stack to the host (non_blocking into pinned memory on CUDA, then one
wait for that copy), and hands them to resdiag_submit_partials in the order
they were added, in one call (each entry names its own call site).
"""
import ctypes
import threading

import torch

from . import _device, _lib
from ._lib import lib


class StepBatch:
    def __init__(self, rd):
        self._rd = rd
        self._lock = threading.Lock()  # backward hooks may run in autograd's device threads
        self._pinned = {}  # device -> pinned host buffer, grown as needed
        self.clear()

    def clear(self):
        self.sites = []     # (dir, layer, sublayer, site, param, line)
        self.files = []     # the call site (bytes, kept alive by the recorder) per entry
        self.partials = []  # device tensors (PARTIAL_DOUBLES)
        self.rows = {}      # (dir, layer, sublayer, site) -> rows added in this step
        self.streams = {}   # CUDA streams the partials were computed on (hooks of the
                            # backward run on autograd's), by (device, handle)

    def __len__(self):
        return len(self.partials)

    def row0(self, key, rows):
        """The sign index of the first of rows more rows at site key (the
        rows added before at that site in this step), and notes them."""
        with self._lock:
            r0 = self.rows.get(key, 0)
            self.rows[key] = r0 + rows
            return r0

    def add(self, site, file, partial):
        if partial.is_cuda:
            stream = torch.cuda.current_stream(partial.device)
            self.streams.setdefault((partial.device, stream.cuda_stream), stream)
        with self._lock:
            self.sites.append(site)
            self.files.append(file)
            self.partials.append(partial)

    def _to_host(self):
        """The step's partials as one contiguous float64 CPU tensor (n,
        PARTIAL_DOUBLES), in the order they were added."""
        with self._lock:
            partials = self.partials
        by_device = {}
        for i, p in enumerate(partials):
            by_device.setdefault(p.device, []).append(i)
        # The stacks are made on each device's current stream: after the work
        # of every stream a partial was computed on.
        for (sdev, _), stream in self.streams.items():
            current = torch.cuda.current_stream(sdev)
            if current.cuda_stream != stream.cuda_stream:
                current.wait_stream(stream)
        if len(by_device) == 1:
            dev = partials[0].device
            return self._copy(dev, torch.stack(partials))
        out = torch.empty((len(partials), _device.PARTIAL_DOUBLES), dtype=torch.float64)
        pending = [(idx, self._copy(dev, torch.stack([partials[i] for i in idx]), wait=False))
                   for dev, idx in by_device.items()]
        for idx, (host, done) in pending:
            if done is not None:
                done.synchronize()
            out[torch.tensor(idx)] = host.to(torch.float64)
        return out

    def _copy(self, dev, stacked, wait=True):
        """stacked on the host: the tensor itself on the CPU; on CUDA a
        non_blocking copy into pinned memory and an event, waited for here
        unless wait is False (then (host, event) is returned)."""
        if dev.type == "cpu":
            host = stacked.to(torch.float64)
            return host if wait else (host, None)
        if dev.type == "cuda":
            n = stacked.shape[0]
            buf = self._pinned.get(dev)
            if buf is None or buf.shape[0] < n or buf.dtype != stacked.dtype:
                buf = self._pinned[dev] = torch.empty(
                    (max(n, 2 * (buf.shape[0] if buf is not None else 0)),
                     _device.PARTIAL_DOUBLES), dtype=stacked.dtype, pin_memory=True)
            host = buf[:n]
            host.copy_(stacked, non_blocking=True)
            done = torch.cuda.Event()
            done.record(torch.cuda.current_stream(dev))
            if not wait:
                return host, done
            done.synchronize()  # the step's one wait
            return host.to(torch.float64)
        host = stacked.to("cpu")  # other devices: one blocking copy
        return host.to(torch.float64) if wait else (host, None)

    def submit(self, note):
        """Submits the step's partials, giving each call's status to note;
        returns them (the host tensor, in
        the order added) for checks the caller makes on the values, or None
        when there were none. Clears the batch."""
        if not self.partials:
            self.clear()
            return None
        host = self._to_host().contiguous()
        n = host.shape[0]
        sites = (_lib.PartialSite * n)(*[site + (f,) for site, f in zip(self.sites, self.files)])
        note(lib.resdiag_submit_partials(self._rd, n, ctypes.addressof(sites), host.data_ptr(),
                                         None))
        self.clear()
        return host
