"""python-install-check.py LIBRARY_PREFIX - run by test-python-install.sh
after an install, with only PYTHONPATH (and, for pip, the loader's or
pkg-config's path) set: resdiag must be the installed module, load the
library under LIBRARY_PREFIX by itself, record one step of a small torch
encoder and read it back."""
import os
import sys
import tempfile

import torch
import torch.nn as nn

import resdiag

prefix = os.path.realpath(sys.argv[1])
module_dir = os.path.dirname(os.path.realpath(resdiag.__file__))
loaded = os.path.realpath(resdiag.library_path)
assert "RESDIAG_LIBRARY" not in os.environ
assert not module_dir.startswith(os.path.realpath(sys.argv[2])), \
    "imported the source tree's module: %s" % module_dir
assert loaded.startswith(prefix + os.sep), "loaded %s, not the installed library" % loaded
assert resdiag.library_version == resdiag.__version__, (resdiag.library_version,
                                                        resdiag.__version__)

torch.manual_seed(1)
torch.set_num_threads(1)
layer = nn.TransformerEncoderLayer(8, 2, 16, 0.0, batch_first=True, norm_first=True)
model = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8), enable_nested_tensor=False)
x = torch.randn(2, 5, 8)
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "run.h5")
    rec = resdiag.attach(model, path)
    with rec.step(3):
        out = model(x)
        out.square().mean().backward()
    rec.detach()
    with resdiag.open(path) as run:
        steps = run.steps()
        frob = run.site(0, "final_norm_out", -1)["frob"]
want = float(torch.linalg.vector_norm(out.detach()))
assert steps == [3], steps
assert abs(frob - want) <= 1e-4 * want, (frob, want)
print("ok: %s from %s, library %s" % (resdiag.__version__, module_dir, loaded))
