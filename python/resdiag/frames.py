"""A run file's numbers as a tidy pandas.DataFrame or a labelled
xarray.Dataset (Run.to_pandas, Run.to_xarray; doc/PYTHON.md), for the
plots people make themselves. Every value comes from the C reader, a whole
table per call (resdiag_reader_read): each table as schema 1 has it, 18
fields of doubles, NaN where not observed, whatever the file's schema.
pandas and xarray are optional: asked for only here, and a missing one
raises an ImportError that names its Debian and pip package."""
import ctypes
import importlib

from . import _lib
from ._lib import lib, ResdiagError

# The tables given, by their dataset name in the file, and the names of
# their axes after the step axis (the axes of doc/FORMAT.md).
TABLES = {
    "forward/site_stats": ("layer", "sublayer", "site", "field"),
    "backward/site_stats": ("layer", "sublayer", "site", "field"),
    "forward/model_stats": ("model_site", "field"),
    "backward/model_stats": ("model_site", "field"),
    "backward/param_stats": ("layer", "param", "field"),
    "backward/model_param_stats": ("model_param", "field"),
    "forward/update": ("layer", "sublayer", "update_field"),
    "metrics/values": ("metric",),
    "step_time": (),
}
WHAT = ("sites", "params", "updates", "metrics")
_ROWS = _lib.FIELDS.index("rows")  # NaN: the slot was not observed


def _need(module, debian, pip, caller):
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError("resdiag: %s needs %s, which cannot be imported (%s): install it "
                          "with 'apt-get install %s' (Debian) or 'pip install %s'"
                          % (caller, module, exc, debian, pip)) from exc


def _names(raw):
    return [(s or b"").decode("utf-8", "replace") for s in raw]


def _present(rd):
    return {_names([lib.resdiag_reader_dataset_name(rd, i)])[0]
            for i in range(lib.resdiag_reader_n_datasets(rd))}


def read_table(run, name):
    """Dataset `name` of the run (one of TABLES) as a float64 numpy array,
    the step axis first, as the C reader reads it; None when the file has
    no such dataset."""
    np = _need("numpy", "python3-numpy", "numpy", "resdiag")
    rd = run._h()
    if name not in _present(rd):
        return None
    dims = (ctypes.c_int64 * 8)()
    rank = ctypes.c_int(0)
    enc = name.encode()
    st = lib.resdiag_reader_dims(rd, enc, dims, 8, ctypes.byref(rank))
    if st != _lib.OK:
        raise ResdiagError("resdiag: %s: %s (see the 'resdiag' log)"
                           % (name, _lib.strerror(st)), st)
    shape = tuple(dims[:rank.value])
    out = np.empty(shape, dtype=np.float64)
    st = lib.resdiag_reader_read(rd, enc, 0, shape[0],
                                 out.ctypes.data_as(ctypes.POINTER(ctypes.c_double)), out.size)
    if st != _lib.OK:
        raise ResdiagError("resdiag: %s: %s (see the 'resdiag' log)"
                           % (name, _lib.strerror(st)), st)
    return out


def _axis_names(run, n_block_sites):
    info = run.info
    return {
        "layer": list(range(info.n_layers)),
        "sublayer": list(info.sublayer_names),
        "site": _names([lib.resdiag_site_name(i) for i in range(n_block_sites)]),
        "model_site": _names([lib.resdiag_site_name(_lib.SITES["embed_out"] + i)
                              for i in range(4)]),
        "param": list(info.layer_param_names),
        "model_param": list(info.model_param_names),
        "field": list(_lib.FIELDS),
        "update_field": list(_lib.UPDATE_FIELDS),
        "metric": list(info.metric_names),
    }


def _tables(run):
    tables = {name: read_table(run, name) for name in TABLES}
    site = tables["forward/site_stats"]
    n_block_sites = site.shape[3] if site is not None else _lib.N_BLOCK_SITES
    return tables, _axis_names(run, n_block_sites)


def to_xarray(run):
    """An xarray.Dataset of the run: one variable per table, named after
    its dataset ("forward/site_stats" -> forward_site_stats), with the
    coordinates step (the trainer's step numbers), layer, sublayer, site,
    model_site, field, param, model_param, update_field and metric."""
    np = _need("numpy", "python3-numpy", "numpy", "Run.to_xarray()")
    xr = _need("xarray", "python3-xarray", "xarray", "Run.to_xarray()")
    tables, names = _tables(run)
    steps = np.asarray(run.steps(), dtype=np.int64)
    data, used = {}, set()
    for name, axes in TABLES.items():
        a = tables[name]
        if a is None:
            continue
        data[name.replace("/", "_")] = (("step",) + axes, a)
        used.update(axes)
    coords = {"step": steps}
    coords.update({axis: names[axis] for axis in names if axis in used})
    info = run.info
    attrs = {"path": run.path, "schema_version": info.schema_version,
             "resdiag_version": info.resdiag_version, "n_layers": info.n_layers,
             "d_model": info.d_model, "description": info.description}
    return xr.Dataset(data, coords=coords, attrs=attrs)


def _tidy(pd, np, steps, a, labels, keep, direction=None):
    """The rows of table a (step, axes..., last) whose slot `keep` holds
    (a boolean array of a's shape without its last axis), one row per
    value of the last axis; labels: (column, names or None) per axis after
    the step axis, the last one's included."""
    idx = np.nonzero(keep)
    width = a.shape[-1]
    cols = {"step": np.repeat(steps[idx[0]], width)}
    for k, (col, names) in enumerate(labels[:-1]):
        cols[col] = np.repeat(np.asarray(names, dtype=object)[idx[k + 1]], width)
    if direction is not None:
        cols["direction"] = direction
    col, names = labels[-1]
    cols[col] = np.tile(np.asarray(names, dtype=object), len(idx[0]))
    cols["value"] = a[idx].reshape(-1)
    return pd.DataFrame(cols)


def _finish(pd, frames, columns, categories):
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        {c: [] for c in columns})
    df = df.reindex(columns=columns)
    df["step"] = df["step"].astype("int64")
    if "layer" in df:
        df["layer"] = df["layer"].astype("Int64")
    for col, cats in categories.items():
        df[col] = pd.Categorical(df[col], categories=cats)
    df["value"] = df["value"].astype("float64")
    return df


def to_pandas(run, what="sites", dropna=True):
    """A tidy pandas.DataFrame, one row per value:

    - "sites": step, layer, sublayer, site, direction, field, value: the
      statistics of every observed tensor (model sites: layer <NA>,
      sublayer NaN);
    - "params": step, layer, param, field, value (model-level
      parameters: layer <NA>);
    - "updates": step, layer, sublayer, field, value (ratio_frob,
      ratio_tok_mean);
    - "metrics": step, metric, value (the trainer's own numbers).

    dropna: leave out what was not recorded (a tensor not observed at a
    step, a metric not given); a NaN statistic of an observed tensor stays.
    step is the trainer's step number; site, sublayer, field, ... are
    categories in the file's order."""
    if what not in WHAT:
        raise ValueError("resdiag: to_pandas: what is one of %s, not %r" % (", ".join(WHAT), what))
    np = _need("numpy", "python3-numpy", "numpy", "Run.to_pandas()")
    pd = _need("pandas", "python3-pandas", "pandas", "Run.to_pandas()")
    tables, names = _tables(run)
    steps = np.asarray(run.steps(), dtype=np.int64)

    def keep(a):
        if not dropna:
            return np.ones(a.shape[:-1], dtype=bool)
        return ~np.isnan(a[..., _ROWS])

    frames = []
    fields = ("field", names["field"])
    if what == "sites":
        for d in ("forward", "backward"):
            a = tables[d + "/site_stats"]
            if a is not None:
                frames.append(_tidy(pd, np, steps, a, [("layer", names["layer"]),
                                                       ("sublayer", names["sublayer"]),
                                                       ("site", names["site"]), fields],
                                    keep(a), d))
            a = tables[d + "/model_stats"]
            if a is not None:
                frames.append(_tidy(pd, np, steps, a, [("site", names["model_site"]), fields],
                                    keep(a), d))
        return _finish(pd, frames, ["step", "layer", "sublayer", "site", "direction", "field",
                                    "value"],
                       {"sublayer": names["sublayer"], "site": names["site"] + names["model_site"],
                        "direction": ["forward", "backward"], "field": names["field"]})
    if what == "params":
        a = tables["backward/param_stats"]
        if a is not None:
            frames.append(_tidy(pd, np, steps, a, [("layer", names["layer"]),
                                                   ("param", names["param"]), fields], keep(a)))
        a = tables["backward/model_param_stats"]
        if a is not None:
            frames.append(_tidy(pd, np, steps, a, [("param", names["model_param"]), fields],
                                keep(a)))
        return _finish(pd, frames, ["step", "layer", "param", "field", "value"],
                       {"param": list(dict.fromkeys(names["param"] + names["model_param"])),
                        "field": names["field"]})
    if what == "updates":
        a = tables["forward/update"]
        if a is not None:
            # a ratio is NaN exactly where the sublayer's add was not observed
            k = np.ones(a.shape[:-1], dtype=bool) if not dropna else ~np.all(np.isnan(a), -1)
            frames.append(_tidy(pd, np, steps, a, [("layer", names["layer"]),
                                                   ("sublayer", names["sublayer"]),
                                                   ("field", names["update_field"])], k))
        return _finish(pd, frames, ["step", "layer", "sublayer", "field", "value"],
                       {"sublayer": names["sublayer"], "field": names["update_field"]})
    a = tables["metrics/values"]
    if a is not None:
        # not given is a NaN of its own (resdiag_metric_given): a NaN the
        # trainer gave stays
        given = np.array([[bool(lib.resdiag_metric_given(v)) for v in row] for row in a],
                         dtype=bool).reshape(a.shape)
        frames.append(_tidy(pd, np, steps, a[..., None],
                            [("metric", names["metric"]), ("value_", ["v"])],
                            given if dropna else np.ones(a.shape, dtype=bool)))
    df = _finish(pd, frames, ["step", "metric", "value"], {"metric": names["metric"]})
    return df
