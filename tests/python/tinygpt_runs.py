"""The small tinygpt runs that the file tests of tests/python read back
(test_h5py_scales.py, test_xarray_groups.py, test_frames.py): one
recorded into a temporary directory per test class, with the class's
FLAGS (the file schema), and removed after it. Needs no torch."""
import os
import subprocess
import tempfile


def record(tinygpt, path, layers, steps, every, *flags):
    """A run of `steps` steps of a small tinygpt of `layers` layers,
    recorded every `every` steps, on one thread (the same values each time)."""
    subprocess.run([tinygpt, "--layers", str(layers), "--d-model", "16", "--heads", "2",
                    "--seq", "8", "--batch", "2", "--vocab", "16", "--steps", str(steps),
                    "--threads", "1", "--record-every", str(every), "--out", path, *flags],
                   check=True, stdout=subprocess.DEVNULL)


def recorded(cls, tinygpt, layers, steps, every):
    """cls.tmp (a temporary directory) and cls.path, the run in it,
    recorded with cls.FLAGS; cls.tmp.cleanup() removes it."""
    cls.tmp = tempfile.TemporaryDirectory()
    cls.path = os.path.join(cls.tmp.name, "run.h5")
    record(tinygpt, cls.path, layers, steps, every, *cls.FLAGS)
