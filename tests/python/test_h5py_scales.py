"""h5py names every axis of a run file through its HDF5 dimension scales
(doc/FORMAT.md, "Dimension scales"): a tinygpt run recorded every third
step, read back with h5py alone. Each time series' first axis is labelled
"record" and has /steps as its scale, holding the real step numbers 0, 3,
6, ...; the other axes carry their label and the scale of their names
(layer indices, sublayer, site, field names), equal to the label
attributes that older readers use.

    test_h5py_scales.py TINYGPT"""
import os
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

TINYGPT = sys.argv.pop(1) if len(sys.argv) > 1 else None
LAYERS, STEPS, EVERY = 3, 10, 3


class H5pyScales(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.path = os.path.join(cls.tmp.name, "run.h5")
        subprocess.run([TINYGPT, "--layers", str(LAYERS), "--d-model", "16", "--heads", "2",
                        "--seq", "8", "--batch", "2", "--vocab", "16", "--steps", str(STEPS),
                        "--threads", "1", "--record-every", str(EVERY), "--out", cls.path],
                       check=True, stdout=subprocess.DEVNULL)
        cls.f = h5py.File(cls.path, "r")

    @classmethod
    def tearDownClass(cls):
        cls.f.close()
        cls.tmp.cleanup()

    def series(self):
        out = []
        self.f.visititems(lambda name, obj: out.append(name)
                          if isinstance(obj, h5py.Dataset) and obj.maxshape[0] is None
                          and name != "steps" else None)
        return out

    def test_record_axis_is_labelled_and_has_the_step_numbers(self):
        steps = self.f["steps"][:]
        np.testing.assert_array_equal(steps, np.arange(0, STEPS, EVERY))
        names = self.series()
        self.assertIn("forward/site_stats", names)
        self.assertGreater(len(names), 15)
        for name in names:
            d = self.f[name]
            self.assertEqual(d.dims[0].label, "record", name)
            self.assertEqual(list(d.dims[0].keys()), ["steps"], name)
            np.testing.assert_array_equal(d.dims[0][0][:], steps)

    def test_every_axis_is_labelled_as_its_axes_attribute_says(self):
        for name in self.series():
            d = self.f[name]
            axes = d.attrs["axes"].split(",")
            labels = [dim.label for dim in d.dims]
            want = ["record"] + axes[1:]
            self.assertEqual(labels, want, name)
            for dim, axis in zip(list(d.dims)[1:], axes[1:]):
                if axis == "field" and len(d.attrs["field_names"]) < len(self.f.attrs["field_names"]):
                    # schema 2: a dataset of some of the fields names them in
                    # its field_names; the field scale has them all
                    self.assertEqual(len(dim), 0, name)
                    continue
                self.assertEqual(len(dim), 1, f"{name} {axis}")
                self.assertEqual(dim[0].name, "/" + axis, f"{name} {axis}")

    def test_scales_hold_the_names_of_the_label_attributes(self):
        f = self.f
        d = f["forward/site_stats"]
        np.testing.assert_array_equal(d.dims[1][0][:], np.arange(LAYERS))
        self.assertIn("k is layer + 1", f["layer"].attrs["description"])
        for axis, attr in [(2, "sublayer_names"), (3, "site_names")]:
            got = [s.decode() for s in d.dims[axis][0][:]]
            self.assertEqual(got, list(f.attrs[attr]), attr)
        fields = list(f.attrs["field_names"])
        if f.attrs["schema_version"] < 2:
            self.assertEqual([s.decode() for s in d.dims[4][0][:]], fields)
        else:  # the real fields here, from frob to absmax; the rest in site_counts
            self.assertEqual(list(d.attrs["field_names"]),
                             fields[fields.index("frob"):fields.index("absmax") + 1])
            got = list(d.attrs["field_names"]) + list(f["forward/site_counts"].attrs["field_names"])
            self.assertEqual(sorted(got), sorted(fields))
        self.assertEqual(f["field"].shape, (len(fields),))


if __name__ == "__main__":
    unittest.main()
