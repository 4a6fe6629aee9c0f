"""resdiag for PyTorch: record residual-stream diagnostics of a torch model
into a resdiag run file, and read run files back, through libresdiag
(ctypes; the verdict and the report come from the C library).

    import resdiag
    rec = resdiag.attach(model, "run.h5")
    for step in range(steps):
        with rec.step(step):
            loss = loss_fn(model(x), y)
            loss.backward()
        opt.step(); opt.zero_grad()
    rec.detach()
    print(resdiag.open("run.h5").report())
    df = resdiag.open("run.h5").to_pandas()   # or .to_xarray(): needs pandas / xarray

See doc/PYTHON.md. The library is found through $RESDIAG_LIBRARY, then
where `meson install` put it, then build/libresdiag.so of the source tree,
then the system loader, then pkg-config's libdir.
"""
from ._version import __version__
from ._lib import AlarmError, FIELDS, FIGURES, ResdiagError, SITES, path as library_path
from ._lib import lib as _clib
from .alarms import Alarm
from .blocks import Block, Layers, Sublayer, DECODER_LAYER, ENCODER_LAYER, GPT2_BLOCK, MINGPT_BLOCK
from .reader import Analysis, Info, Run, open  # noqa: A004
from .recorder import Recorder, attach

library_version = _clib.resdiag_version_string().decode()

__all__ = ["attach", "open", "Recorder", "Run", "Analysis", "Info", "Block", "Layers", "Sublayer",
           "ENCODER_LAYER", "DECODER_LAYER", "GPT2_BLOCK", "MINGPT_BLOCK", "ResdiagError",
           "Alarm", "AlarmError",
           "FIELDS", "FIGURES", "SITES", "library_path", "library_version", "__version__"]
