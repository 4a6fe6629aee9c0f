"""h5py names every axis of a run file through its HDF5 dimension scales
(doc/FORMAT.md, "Dimension scales"): a tinygpt run recorded every third
step, read back with h5py alone. Each time series' first axis is labelled
"step" (as its axes attribute names it) and has /steps as its scale, holding the real step numbers 0, 3,
6, ...; the other axes carry their label and the scale of their names
(layer indices, sublayer, site, field names), equal to the label
attributes that older readers use; the field axis of a split statistics
table (schema 2 and later) has /stat_field (12 names) or /count_field (6).

The run is recorded twice, as schema 3 (the default) and as schema 1, and
each is checked; the scale of an axis has the axis' length (the site axis:
8 block sites in schema 3, 5 in schema 1). Schema 3 also has schema 2's
pinned layout (doc/FORMAT.md): the dtype of every kind of dataset,
each statistics table split into its float32 fields and its int64 counts,
each with a field_names attribute labelling its last axis, every chunked
dataset filtered by exactly shuffle then deflate (level 1), the model
sites' sketches kept float64 (the final norm is told from a difference
below float32's resolution); and its values
are schema 1's (the same run, --threads 1) on the sites both hold:
float32-rounded where float32, equal where integers, with the sentinels
where schema 1 has NaN.

    test_h5py_scales.py TINYGPT"""
import os
import sys
import tempfile
import unittest

import h5py
import numpy as np

import tinygpt_runs

TINYGPT = sys.argv.pop(1) if len(sys.argv) > 1 else None
LAYERS, STEPS, EVERY = 3, 10, 3


def record(path, *flags):
    tinygpt_runs.record(TINYGPT, path, LAYERS, STEPS, EVERY, *flags)


class H5pyScales(unittest.TestCase):
    FLAGS = ()  # the default: schema 3

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.path = os.path.join(cls.tmp.name, "run.h5")
        record(cls.path, *cls.FLAGS)
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
            self.assertEqual(d.dims[0].label, "step", name)
            self.assertEqual(list(d.dims[0].keys()), ["steps"], name)
            np.testing.assert_array_equal(d.dims[0][0][:], steps)

    def test_every_axis_is_labelled_as_its_axes_attribute_says(self):
        for name in self.series():
            d = self.f[name]
            axes = d.attrs["axes"].split(",")
            labels = [dim.label for dim in d.dims]
            self.assertEqual(labels, axes, name)
            for k, (dim, axis) in enumerate(zip(list(d.dims)[1:], axes[1:]), 1):
                scale = "/" + axis
                if axis == "field" and d.shape[k] != 18:  # a part of a split table
                    scale = "/count_field" if name.endswith("_counts") else "/stat_field"
                    self.assertEqual([s.decode() for s in dim[0][:]],
                                     list(d.attrs["field_names"]), name)
                self.assertEqual(len(dim), 1, f"{name} {axis}")
                self.assertEqual(dim[0].name, scale, f"{name} {axis}")
                self.assertEqual(len(dim[0]), d.shape[k], f"{name} {axis}: scale length")

    def test_scales_hold_the_names_of_the_label_attributes(self):
        f = self.f
        d = f["forward/site_stats"]
        np.testing.assert_array_equal(d.dims[1][0][:], np.arange(LAYERS))
        self.assertIn("k is layer + 1", f["layer"].attrs["description"])
        for axis, attr in [(2, "sublayer_names"), (3, "site_names")]:
            got = [s.decode() for s in d.dims[axis][0][:]]
            self.assertEqual(got, list(f.attrs[attr]), attr)
        fields = list(d.attrs["field_names"]) if "field_names" in d.attrs \
            else list(f.attrs["field_names"])
        self.assertEqual([s.decode() for s in d.dims[4][0][:]], fields)


COUNT_FIELDS = ["rows", "cols", "absmax_col", "nan_count", "inf_count", "call_seq"]
STATS = ["forward/site_stats", "backward/site_stats", "forward/model_stats",
         "backward/model_stats", "backward/param_stats", "backward/model_param_stats"]


def dataset_names(f):
    out = []
    f.visititems(lambda name, obj: out.append(name) if isinstance(obj, h5py.Dataset) else None)
    return out


def site_axis(d):
    """The index of d's "site" axis, or None."""
    axes = d.attrs["axes"].split(",") if "axes" in d.attrs else []
    return axes.index("site") if "site" in axes else None


def old_sites(f, name, n):
    """Dataset name of f on its first n block sites (all of it without a
    site axis)."""
    d = f[name]
    k = site_axis(d)
    return d[:] if k is None else np.take(d[:], np.arange(n), axis=k)


class H5pySchema2(H5pyScales):
    """The default file: schema 3 (schema 2's layout with 8 block sites),
    compression 1."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.s1_path = os.path.join(cls.tmp.name, "schema1.h5")
        record(cls.s1_path, "--file-schema", "1")
        cls.s1 = h5py.File(cls.s1_path, "r")

    @classmethod
    def tearDownClass(cls):
        cls.s1.close()
        super().tearDownClass()

    def test_schema_versions(self):
        self.assertEqual(int(self.f.attrs["schema_version"]), 3)
        self.assertEqual(int(self.s1.attrs["schema_version"]), 1)

    def test_site_axes_hold_the_schemas_sites(self):
        """8 block sites on every site axis of schema 3, 5 in schema 1; the
        /site scale and site_names alike."""
        names = ["stream_in", "norm_in", "norm_out", "branch_out", "stream_out",
                 "branch_in", "out_norm_in", "out_norm_out"]
        for f, n in ((self.f, 8), (self.s1, 5)):
            self.assertEqual([s if isinstance(s, str) else s.decode()
                              for s in f.attrs["site_names"]], names[:n])
            self.assertEqual([s.decode() for s in f["site"][:]], names[:n])
            seen = [name for name in dataset_names(f) if site_axis(f[name]) is not None]
            self.assertIn("forward/site_stats", seen)
            self.assertIn("backward/site_alias", seen)
            for name in seen:
                self.assertEqual(f[name].shape[site_axis(f[name])], n, name)

    def test_the_pinned_dtypes(self):
        f = self.f
        names = dataset_names(f)
        self.assertEqual(len(f.attrs["field_names"]), 18)
        for name in names:
            d, leaf = f[name], name.rsplit("/", 1)[-1]
            if name in STATS:
                want = np.float32
                self.assertEqual(d.shape[-1], 12, name)
            elif leaf.endswith("_counts"):
                want = np.int64
                self.assertEqual(d.shape[-1], 6, name)
            elif leaf == "model_sketch":
                want = np.float64  # the final norm is told by a tiny difference
            elif leaf.endswith("_sketch") or name == "forward/update":
                want = np.float32
            elif leaf.endswith("_calls"):
                want = np.int32
            elif leaf.endswith("_alias"):
                want = np.int8
            elif name in ("steps",):
                want = np.int64
            elif name in ("step_time", "metrics/values"):
                want = np.float64
            else:
                continue
            self.assertEqual(d.dtype, np.dtype(want), name)
        for name in STATS:
            if name in f:
                self.assertIn(name.replace("_stats", "_counts"), f, name)

    def test_field_names_label_the_split(self):
        f = self.f
        api = [s if isinstance(s, str) else s.decode() for s in f.attrs["field_names"]]
        real = [n for n in api if n not in COUNT_FIELDS]
        self.assertEqual(len(real), 12)
        for name in STATS:
            if name not in f:
                continue
            got = [s if isinstance(s, str) else s.decode() for s in f[name].attrs["field_names"]]
            self.assertEqual(got, real, name)
            c = f[name.replace("_stats", "_counts")]
            got = [s if isinstance(s, str) else s.decode() for s in c.attrs["field_names"]]
            self.assertEqual(got, COUNT_FIELDS, c.name)

    def test_filters_are_shuffle_then_deflate_1(self):
        """Every table of at least 1024 bytes a step (its shape after the
        step axis times its dtype's size; doc/FORMAT.md, "Filters"), in
        chunks of one step; the smaller tables, /summary, /steps,
        /step_time (whose chunks each append rewrites) and the call sites
        never filtered. This file has tables on both sides."""
        from h5py import h5z
        seen = set()
        for f, want in ((self.f, [(h5z.FILTER_SHUFFLE, None), (h5z.FILTER_DEFLATE, 1)]),
                        (self.s1, [])):
            for name in dataset_names(f):
                plist = f[name].id.get_create_plist()
                if plist.get_layout() != h5py.h5d.CHUNKED:
                    continue
                got = [plist.get_filter(i) for i in range(plist.get_nfilters())]
                if name in ("steps", "step_time") or name.startswith("summary/") \
                        or name.endswith("_callsite"):
                    self.assertEqual(got, [], name)
                    continue
                d = f[name]
                step_bytes = d.dtype.itemsize * int(np.prod(d.shape[1:]))
                big = step_bytes >= 1024
                if f is self.f:
                    seen.add(big)
                    self.assertEqual(d.chunks[0] == 1, big, name)
                w = want if big else []
                self.assertEqual([g[0] for g in got], [x[0] for x in w], name)
                for g, x in zip(got, w):
                    if x[1] is not None:
                        self.assertEqual(g[2][0], x[1], name + ": deflate level")
        self.assertEqual(seen, {True, False})

    def test_values_are_schema_1_s_at_their_precision(self):
        f, s1 = self.f, self.s1
        api = [s if isinstance(s, str) else s.decode() for s in f.attrs["field_names"]]
        count_idx = [api.index(n) for n in COUNT_FIELDS]
        real_idx = [i for i in range(18) if i not in count_idx]
        for name in STATS:
            if name not in f:
                continue
            old = s1[name][:]
            np.testing.assert_array_equal(old_sites(f, name, 5),
                                          old[..., real_idx].astype(np.float32), name)
            counts = old[..., count_idx]
            want = np.where(np.isnan(counts), -1, counts).astype(np.int64)
            got = old_sites(f, name.replace("_stats", "_counts"), 5)
            # call_seq numbers every hook call of the step, and schema 3's
            # run makes more of them (branch_in): the order of the calls both
            # runs made is the same, their numbers are not
            seq = COUNT_FIELDS.index("call_seq")
            np.testing.assert_array_equal(got[..., :seq], want[..., :seq], name)
            for step in range(got.shape[0]):
                g, w = got[step, ..., seq].ravel(), want[step, ..., seq].ravel()
                np.testing.assert_array_equal(g < 0, w < 0, name + ": observed")
                np.testing.assert_array_equal(np.argsort(g[g >= 0], kind="stable"),
                                              np.argsort(w[w >= 0], kind="stable"),
                                              name + ": call order")
        for name in dataset_names(s1):
            leaf = name.rsplit("/", 1)[-1]
            old = s1[name][:]
            new = old_sites(f, name, 5) if name in f else None
            if leaf == "model_sketch":
                np.testing.assert_array_equal(new, old, name)
            elif leaf.endswith("_sketch") or name == "forward/update":
                np.testing.assert_array_equal(new, old.astype(np.float32), name)
            elif leaf.endswith("_calls"):
                want = np.where(np.isnan(old), 0, old).astype(np.int32)
                np.testing.assert_array_equal(new, want, name)
            elif leaf.endswith("_alias"):
                want = np.where(np.isnan(old), -1, old).astype(np.int8)
                np.testing.assert_array_equal(new, want, name)
            elif name in ("steps", "metrics/values"):
                np.testing.assert_array_equal(new, old, name)


class H5pySchema1(H5pyScales):
    FLAGS = ("--file-schema", "1")


del H5pyScales  # run through its two subclasses only


if __name__ == "__main__":
    unittest.main()
