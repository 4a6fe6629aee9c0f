"""xarray opens every group of a run file (doc/FORMAT.md, "Dimension
scales"): a tinygpt run of schema 3 (and one of schema 1) opened group by
group with xarray's h5netcdf engine and no phony_dims, every axis named by
its dimension scale, and the group's dimensions given the root's
coordinates. The coordinates and a selection by them are checked against
h5py's own reading of the file: the names in the root's label attributes,
the step numbers of /steps, the values of each dataset.

Skipped (exit 77) without xarray or h5netcdf (Debian: python3-xarray,
python3-h5netcdf).

    test_xarray_groups.py TINYGPT"""
import sys
import unittest

try:
    import h5py
    import numpy as np
    import xarray as xr
    import h5netcdf  # noqa: F401 - the engine
except ImportError as exc:
    print("test_xarray_groups: %s (apt-get install python3-xarray python3-h5netcdf): skipped"
          % exc, file=sys.stderr)
    sys.exit(77)

from tinygpt_runs import recorded

TINYGPT = sys.argv.pop(1) if len(sys.argv) > 1 else None
LAYERS, STEPS, EVERY = 3, 8, 2


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


class XarrayGroups(unittest.TestCase):
    FLAGS = ()  # the default: schema 3

    @classmethod
    def setUpClass(cls):
        recorded(cls, TINYGPT, LAYERS, STEPS, EVERY)
        cls.f = h5py.File(cls.path, "r")
        cls.groups = []
        cls.f.visititems(lambda name, obj: cls.groups.append(name)
                         if isinstance(obj, h5py.Group) else None)
        cls.root = xr.open_dataset(cls.path, engine="h5netcdf")

    @classmethod
    def tearDownClass(cls):
        cls.root.close()
        cls.f.close()
        cls.tmp.cleanup()

    def open(self, group):
        ds = xr.open_dataset(self.path, engine="h5netcdf", group=group, mask_and_scale=False)
        self.addCleanup(ds.close)
        # the coordinates live at the root, once for every group
        return ds.assign_coords({d: self.root[d] for d in ds.dims})

    def expected_coords(self):
        """Each dimension's values as h5py reads the root's attributes and
        /steps, without the scales."""
        a = self.f.attrs
        names = lambda key: [text(s) for s in a[key]]  # noqa: E731
        want = {"steps": list(self.f["steps"][:]), "layer": list(range(LAYERS)),
                "sublayer": names("sublayer_names"), "site": names("site_names"),
                "model_site": names("model_site_names"), "param": names("layer_param_names"),
                "model_param": names("model_param_names"),
                "update_field": ["ratio_frob", "ratio_tok_mean"],
                "metric": names("metric_names")}
        fields = names("field_names")
        if int(a["schema_version"]) >= 2:
            want["stat_field"] = [text(s) for s in self.f["forward/site_stats"].attrs["field_names"]]
            want["count_field"] = [text(s) for s in self.f["forward/site_counts"].attrs["field_names"]]
            self.assertEqual(sorted(want["stat_field"] + want["count_field"]), sorted(fields))
        else:
            want["field"] = fields
        return want

    def test_every_group_opens_with_named_coordinates(self):
        want = self.expected_coords()
        self.assertIn("forward", self.groups)
        self.assertIn("backward", self.groups)
        seen = set()
        for g in self.groups:
            ds = self.open(g)
            for d in ds.dims:
                self.assertFalse(d.startswith("phony_dim"), f"{g}: {d}")
                self.assertIn(d, ds.coords, f"{g}: {d}")
                if d in want:
                    seen.add(d)
                    got = [text(v) if isinstance(v, (bytes, str)) else int(v)
                           for v in ds[d].values]
                    self.assertEqual(got, want[d], f"{g}: {d}")
            for name, var in ds.data_vars.items():
                h = self.f[g + "/" + name]
                self.assertEqual(var.shape, h.shape, f"{g}/{name}")
                # each axis' dimension is the scale the HDF5 convention attaches
                got = [h.dims[k][0].name.rsplit("/", 1)[-1] for k in range(h.ndim)]
                self.assertEqual(list(var.dims), got, f"{g}/{name}")
        self.assertGreaterEqual(seen, {"steps", "layer", "sublayer", "site", "model_site"})

    def test_a_selection_by_coordinates_is_h5py_s_value(self):
        ds = self.open("forward")
        h = self.f["forward/site_stats"]
        sites = [text(s) for s in self.f.attrs["site_names"]]
        fields = [text(s) for s in h.attrs["field_names"]] if "field_names" in h.attrs else \
            [text(s) for s in self.f.attrs["field_names"]]
        fdim = "stat_field" if "stat_field" in ds.dims else "field"
        step = int(self.f["steps"][-1])
        got = ds["site_stats"].sel(steps=step, layer=LAYERS - 1, site="stream_out",
                                   **{fdim: "frob"}).values
        want = h[-1, LAYERS - 1, :, sites.index("stream_out"), fields.index("frob")]
        np.testing.assert_array_equal(got, want)
        self.assertTrue(np.all(np.isfinite(want)))
        if fdim == "stat_field":
            c = self.f["forward/site_counts"]
            got = ds["site_counts"].sel(steps=step, count_field="rows").values
            np.testing.assert_array_equal(got, c[-1, ..., list(c.attrs["field_names"]).index("rows")])


class XarrayGroupsSchema1(XarrayGroups):
    FLAGS = ("--file-schema", "1")


if __name__ == "__main__":
    unittest.main()
