"""resdiag.open(): a run file read through the C reader, and its analysis
by the C library (the same verdict and report as `resdiag report`)."""
import ctypes
import json as _json
import math
import os

from . import _lib
from ._lib import lib, ResdiagError


def _site(site):
    if isinstance(site, str):
        try:
            return _lib.SITES[site]
        except KeyError:
            raise ValueError("resdiag: unknown site %r (one of %s)"
                             % (site, ", ".join(_lib.SITES))) from None
    return _lib.c_int(site, "site")


def _field(field):
    if isinstance(field, str):
        try:
            return _lib.FIELDS.index(field)
        except ValueError:
            raise ValueError("resdiag: unknown field %r (one of %s)"
                             % (field, ", ".join(_lib.FIELDS))) from None
    return _lib.c_int(field, "field")


def _dir(direction):
    if isinstance(direction, bool):  # True == 1 == BACKWARD: no direction
        raise ValueError("resdiag: direction is 'forward' or 'backward', not %r" % (direction,))
    if direction in ("forward", _lib.FORWARD):
        return _lib.FORWARD
    if direction in ("backward", _lib.BACKWARD):
        return _lib.BACKWARD
    raise ValueError("resdiag: direction is 'forward' or 'backward', not %r" % (direction,))


def _where(step_index=None, layer=None, sublayer=None):
    """The C ints of a reader call's step index (int64), layer and sublayer
    (int), each checked (_lib.c_int) before the call; None stays None."""
    return ((None if step_index is None else _lib.c_int(step_index, "step_index", 64)),
            (None if layer is None else _lib.c_int(layer, "layer")),
            (None if sublayer is None else _lib.c_int(sublayer, "sublayer")))


def _check(st, what):
    if st != _lib.OK:
        raise ResdiagError("resdiag: %s: %s (see the 'resdiag' log)" % (what, _lib.strerror(st)), st)


def _text(b):
    return (b or b"").decode("utf-8", "replace")


def _strs(arr, n):
    return [_text(arr[i]) for i in range(n)]


class Info:
    """What the run file says about itself (resdiag_run_info)."""

    def __init__(self, c):
        self.schema_version = c.schema_version
        # a run file is input from strangers: a stray byte must not raise
        self.resdiag_version = _text(c.resdiag_version)
        self.n_layers, self.d_model, self.n_sublayers = c.n_layers, c.d_model, c.n_sublayers
        self.sublayer_names = _strs(c.sublayer_names, c.n_sublayers)
        self.block = "parallel" if c.block == 1 else "sequential"
        self.declared_placement = _lib.PLACEMENTS[c.declared_placement]
        self.declared_mix_layers = c.declared_mix_layers
        self.norm_kind = _lib.NORM_KINDS[c.norm_kind]
        self.layer_param_names = _strs(c.layer_param_names, c.n_layer_params)
        self.model_param_names = _strs(c.model_param_names, c.n_model_params)
        self.sketch_size = c.sketch_size
        self.n_steps = c.n_steps
        flat = _strs(c.meta, 2 * c.n_meta)
        self.meta = dict(zip(flat[0::2], flat[1::2]))
        self.description = _text(c.description)
        self.created_utc = _text(c.created_utc)
        self.program = _text(c.program)
        # the trainer's per-step metrics (resdiag_step_metric); [] for older files
        self.metric_names = _strs(c.metric_names, c.n_metrics)

    def __repr__(self):
        return "<resdiag.Info L=%d d=%d sublayers=%s steps=%d>" % (
            self.n_layers, self.d_model, self.sublayer_names, self.n_steps)


class Analysis:
    """resdiag_analyze() of one step: the verdict, its evidence and the report."""

    def __init__(self, handle, run=None):
        self._a = handle
        self._run = run  # the Run analysed: its reader feeds to_html's heat maps

    def __del__(self):
        if getattr(self, "_a", None):
            lib.resdiag_analysis_destroy(self._a)
            self._a = None

    @property
    def verdict(self):
        """pre, post, sandwich, deepnorm, mixed, parallel, none, inconsistent,
        cannot-tell, ... (resdiag_verdict_name)."""
        return lib.resdiag_verdict_name(lib.resdiag_analysis_verdict(self._a)).decode()

    @property
    def confidence(self):
        return lib.resdiag_confidence_name(lib.resdiag_analysis_confidence(self._a)).decode()

    @property
    def mix_layers(self):
        return lib.resdiag_analysis_mix_layers(self._a)

    @property
    def alpha(self):
        return lib.resdiag_analysis_alpha(self._a)

    @property
    def final_norm(self):
        """True: the head reads a norm's output; False: the data show none (what
        the head reads is the last stream itself); None: not observed."""
        v = lib.resdiag_analysis_final_norm(self._a)
        return None if v < 0 else bool(v)

    @property
    def stream_only(self):
        return bool(lib.resdiag_analysis_stream_only(self._a))

    @property
    def growth(self):
        return lib.resdiag_analysis_growth(self._a)

    @property
    def step(self):
        return lib.resdiag_analysis_step(self._a)

    def sublayer(self, layer, sublayer):
        """(verdict name, alpha or None) of one sublayer."""
        alpha = ctypes.c_double(math.nan)
        _, layer, sublayer = _where(None, layer, sublayer)
        v = lib.resdiag_analysis_sublayer(self._a, layer, sublayer, ctypes.byref(alpha))
        return (lib.resdiag_verdict_name(v).decode(),
                None if math.isnan(alpha.value) else alpha.value)

    def text(self):
        """The report, as `resdiag report` prints it."""
        return _lib.take_string(lib.resdiag_analysis_to_text(self._a))

    def json(self):
        """The report as a dict (keys in doc/REPORT-JSON.md)."""
        return _json.loads(self.json_text())

    def json_text(self):
        return _lib.take_string(lib.resdiag_analysis_to_json(self._a))

    def to_html(self, name=None):
        """The page `resdiag report --html` writes: the verdict card, the
        figures, and for a run with several steps the layer x step heat
        maps while the Run it came from is open. name: the run in the title
        (default: the Run's path)."""
        o = _lib.HtmlOptions()
        lib.resdiag_html_options_init(ctypes.byref(o))
        run = self._run
        if name is None and run is not None:
            name = run.path
        o.run_name = None if name is None else _lib.c_text(str(name), "run name")
        o.reader = run._r if run is not None and run._r else None
        page = _lib.take_string(lib.resdiag_analysis_to_html(self._a, ctypes.byref(o)))
        if page is None:
            raise ResdiagError("resdiag: to_html: the page cannot be made (see the 'resdiag' "
                               "log)")
        return page

    def svg(self, figure):
        """One figure as a standalone SVG document, as `resdiag plot --what
        FIGURE` writes it: "growth", "updates", "gradients" or "loss"
        (resdiag.FIGURES). None when the run holds no data for it (e.g. no
        gradients recorded)."""
        try:
            f = _lib.FIGURES.index(figure)
        except ValueError:
            raise ValueError("resdiag: unknown figure %r (one of %s)"
                             % (figure, ", ".join(_lib.FIGURES))) from None
        out = ctypes.c_void_p()
        st = lib.resdiag_analysis_figure_svg(self._a, f, ctypes.byref(out))
        if st == _lib.E_NOT_FOUND:
            return None
        _check(st, "svg %s" % figure)
        return _lib.take_string(out.value)

    def check(self, expect, require_final_norm=False, max_growth=0.0):
        """(result, why) as `resdiag check`: result 0 holds, 1 fails, 2 cannot tell."""
        o = _lib.CheckOptions()
        lib.resdiag_check_options_init(ctypes.byref(o))
        o.expect = _lib.placement(expect)[0]
        o.require_final_norm = int(bool(require_final_norm))
        o.max_growth = max_growth
        why = ctypes.create_string_buffer(512)
        r = lib.resdiag_analysis_check(self._a, ctypes.byref(o), why, len(why))
        return r, why.value.decode("utf-8", "replace")

    def __repr__(self):
        return "<resdiag.Analysis %s (%s)>" % (self.verdict, self.confidence)


class Run:
    """An open run file. Site arguments are names ("stream_out", "norm_in",
    ..., "embed_out", "logits") or resdiag_site values; fields are names
    ("frob", ...: resdiag.FIELDS) or indices."""

    def __init__(self, path):
        self._r = None
        enc = _lib.c_path(path, "open")
        h = ctypes.c_void_p()
        st = lib.resdiag_reader_open(ctypes.byref(h), enc)
        if st != _lib.OK or not h:
            raise ResdiagError("resdiag: cannot read %s: %s (see the 'resdiag' log)"
                               % (os.fsdecode(enc), _lib.strerror(st)), st)
        self._r = h
        self.path = os.fsdecode(enc)
        self.info = Info(lib.resdiag_reader_info(h).contents)

    def close(self):
        if getattr(self, "_r", None):
            lib.resdiag_reader_destroy(self._r)
            self._r = None

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _h(self):
        if not self._r:
            raise ResdiagError("resdiag: the run is closed")
        return self._r

    def refresh(self):
        """Re-reads the number of steps (for a file still being written)."""
        _check(lib.resdiag_reader_refresh(self._h()), "refresh")
        self.info = Info(lib.resdiag_reader_info(self._r).contents)

    def steps(self):
        """The trainer's step numbers of the recorded steps."""
        n = self.info.n_steps
        out = (ctypes.c_int64 * max(1, n))()
        _check(lib.resdiag_reader_steps(self._h(), out, n), "steps")
        return list(out[:n])

    def aborted(self, step_index):
        """None when recorded step step_index ended normally; when the
        trainer aborted it (resdiag_step_abort, ``with rec.step()`` left by
        an exception), the reason given ("" for none)."""
        ab = ctypes.c_int(0)
        _check(lib.resdiag_reader_step_aborted(self._h(), int(step_index), ctypes.byref(ab)),
               "aborted")
        if not ab.value:
            return None
        buf = ctypes.create_string_buffer(_lib.MAX_ABORT_REASON)
        _check(lib.resdiag_reader_abort_reason(self._r, int(step_index), buf, len(buf)),
               "aborted")
        return buf.value.decode("utf-8", "replace")

    def metric(self, name):
        """The trainer's metric `name` at every recorded step, in the order
        of steps(): the value it gave (NaN and +-Inf as given), None where it
        gave none."""
        if name not in self.info.metric_names:
            raise KeyError("resdiag: the run declares no metric %r (it has %s)"
                           % (name, self.info.metric_names))
        n = self.info.n_steps
        out = (ctypes.c_double * max(1, n))()
        _check(lib.resdiag_reader_metric(self._h(), self.info.metric_names.index(name), 0, n,
                                         out), "metric %s" % name)
        return [v if lib.resdiag_metric_given(v) else None for v in out[:n]]

    def site(self, step_index, site, layer=0, sublayer=0, direction="forward"):
        """{field: value} of one observed tensor, or None if not observed."""
        out = (ctypes.c_double * _lib.N_FIELDS)()
        obs = ctypes.c_int(0)
        step_index, layer, sublayer = _where(step_index, layer, sublayer)
        _check(lib.resdiag_reader_site(self._h(), step_index, _dir(direction), layer, sublayer,
                                       _site(site), out, ctypes.byref(obs)), "site")
        return dict(zip(_lib.FIELDS, out)) if obs.value else None

    def sketch(self, step_index, site, layer=0, sublayer=0, direction="forward"):
        out = (ctypes.c_double * max(1, self.info.sketch_size))()
        step_index, layer, sublayer = _where(step_index, layer, sublayer)
        _check(lib.resdiag_reader_sketch(self._h(), step_index, _dir(direction), layer, sublayer,
                                         _site(site), out), "sketch")
        return list(out[:self.info.sketch_size])

    def alias(self, step_index, site, layer=0, sublayer=0, direction="forward"):
        """The name of the block site whose tensor the recorder took for
        `site` too at that step (one tensor recorded at two sites: their
        relation holds by construction), or None."""
        same_as = ctypes.c_int(-1)
        step_index, layer, sublayer = _where(step_index, layer, sublayer)
        _check(lib.resdiag_reader_alias(self._h(), step_index, _dir(direction), layer, sublayer,
                                        _site(site), ctypes.byref(same_as)), "alias")
        if same_as.value < 0:
            return None
        return lib.resdiag_site_name(same_as.value).decode()

    def param(self, step_index, layer, name):
        """{field: value} of a parameter gradient (layer = -1: model level), or None."""
        out = (ctypes.c_double * _lib.N_FIELDS)()
        obs = ctypes.c_int(0)
        step_index, layer, _ = _where(step_index, layer)
        _check(lib.resdiag_reader_param(self._h(), step_index, layer,
                                        _lib.c_text(name, "parameter name"), out,
                                        ctypes.byref(obs)), "param %s" % name)
        return dict(zip(_lib.FIELDS, out)) if obs.value else None

    def update(self, step_index, layer, sublayer):
        """{"ratio_frob": ||dx||/||x||, "ratio_tok_mean": ...} at the add."""
        out = (ctypes.c_double * _lib.N_UPDATE_FIELDS)()
        step_index, layer, sublayer = _where(step_index, layer, sublayer)
        _check(lib.resdiag_reader_update(self._h(), step_index, layer, sublayer, out), "update")
        return dict(zip(_lib.UPDATE_FIELDS, out))

    def callsite(self, site, layer=0, sublayer=0, direction="forward"):
        """The trainer's "file:line" behind a site's hook ("" if never
        observed)."""
        d, site = _dir(direction), _site(site)
        _, layer, sublayer = _where(None, layer, sublayer)
        # The C call answers "" for a site outside the model too (it has no
        # status): refused here as the other reader calls refuse it.
        if site not in _lib.SITES.values():
            bad = "site %d is not a site" % site
        elif site >= _lib.N_BLOCK_SITES:
            bad = None  # a model site: layer and sublayer are not read
        elif not 0 <= layer < self.info.n_layers:
            bad = "layer %d is outside 0..%d" % (layer, self.info.n_layers - 1)
        elif not 0 <= sublayer < self.info.n_sublayers:
            bad = "sublayer %d is outside 0..%d" % (sublayer, self.info.n_sublayers - 1)
        else:
            bad = None
        if bad:
            raise ResdiagError("resdiag: callsite: %s: %s" % (bad, _lib.strerror(_lib.E_RANGE)),
                               _lib.E_RANGE)
        return lib.resdiag_reader_callsite(self._h(), d, layer, sublayer,
                                           site).decode("utf-8", "replace")

    def series(self, site, field="frob", layer=0, sublayer=0, direction="forward"):
        """One field of one site over all recorded steps (NaN where not observed)."""
        n = self.info.n_steps
        out = (ctypes.c_double * max(1, n))()
        _, layer, sublayer = _where(None, layer, sublayer)
        _check(lib.resdiag_reader_series(self._h(), _dir(direction), layer, sublayer, _site(site),
                                         _field(field), out, n), "series")
        return list(out[:n])

    def analyze(self, step="first", max_growth=None):
        """The library's analysis at step "first" (default, as the tool),
        "last", or a recorded step index."""
        o = _lib.AnalyzeOptions()
        lib.resdiag_analyze_options_init(ctypes.byref(o))
        o.step_index = (_lib.STEP_FIRST if step == "first" else _lib.STEP_LAST if step == "last"
                        else _lib.c_int(step, "step", 64))
        if max_growth is not None:
            o.max_growth = max_growth
        a = ctypes.c_void_p()
        _check(lib.resdiag_analyze(self._h(), ctypes.byref(o), ctypes.byref(a)), "analyze")
        return Analysis(a.value, self)

    def to_pandas(self, what="sites", dropna=True):
        """A tidy pandas.DataFrame of the run, one row per value: for
        what="sites" the columns step, layer, sublayer, site, direction,
        field, value; "params", "updates" and "metrics" too (frames.py,
        doc/PYTHON.md). Needs pandas (Debian: python3-pandas)."""
        from . import frames
        return frames.to_pandas(self, what, dropna)

    def to_xarray(self):
        """An xarray.Dataset of the run's tables with named coordinates
        (step numbers, layer, sublayer, site, field, ...: frames.py,
        doc/PYTHON.md). Needs xarray (Debian: python3-xarray)."""
        from . import frames
        return frames.to_xarray(self)

    def verdict(self, step="first"):
        return self.analyze(step).verdict

    def report(self, json=False, step="first"):
        """The text (or JSON string) that `resdiag report [--json]` prints."""
        a = self.analyze(step)
        return a.json_text() if json else a.text()


def open(path):  # noqa: A001 - resdiag.open mirrors the built-in on purpose
    """Opens a run file for reading: ``with resdiag.open("run.h5") as run: ...``"""
    return Run(path)
