"""Loading libresdiag through ctypes and declaring the C API it uses.

Every call into C goes through the ``lib`` object built here; the structs
mirror include/resdiag.h field for field, and the ones that carry
``struct_size`` are checked against the library at load time so that a
header/binding mismatch fails loudly instead of corrupting memory.
"""
import ctypes
import ctypes.util
import logging
import operator
import os
import subprocess
import sys
import sysconfig

from ._version import __version__

try:  # written by `meson install`: where it installed the library
    from . import _config
except ImportError:  # a source tree, or `pip install ./python`
    _config = None

# The library's file name as the loader knows it (its soname).
_SONAME = "libresdiag.so.%d" % int(__version__.split(".")[0])

# resdiag_status values (pinned in the header).
OK = 0
ALARM = 17  # RESDIAG_ALARM: step_end wrote the step and an alarm fired (not an error)
E_RANGE = 3
E_NOT_FOUND = 11

# Directions, dtypes and the two step selectors.
FORWARD, BACKWARD = 0, 1
DTYPE_F32, DTYPE_F64, DTYPE_F16, DTYPE_BF16 = 0, 1, 2, 3
MODEL_LEVEL = -1
STEP_FIRST, STEP_LAST = -1, -2

# Sites: values of resdiag_site.
SITES = {
    "stream_in": 0, "norm_in": 1, "norm_out": 2, "branch_out": 3, "stream_out": 4,
    "branch_in": 5, "out_norm_in": 6, "out_norm_out": 7,
    "embed_out": 16, "final_norm_in": 17, "final_norm_out": 18, "logits": 19,
}
N_BLOCK_SITES = 8  # block sites are 0..7, the others model sites
# Sites 5..7 came with schema 3: a file of schema 1 or 2 holds only 0..4.
FIRST_SCHEMA3_SITE = 5
MAX_SUBLAYERS = 16  # = RESDIAG_MAX_SUBLAYERS: sublayers per layer
N_FIELDS = 18
MAX_ABORT_REASON = 128  # = RESDIAG_MAX_ABORT_REASON, bytes with the NUL
N_UPDATE_FIELDS = 2
UPDATE_FIELDS = ("ratio_frob", "ratio_tok_mean")
# resdiag_placement by value; 8..11 are verdicts only (None here).
PLACEMENTS = ("undeclared", "pre", "post", "sandwich", "deepnorm", "mixed", "parallel", "none",
              None, None, None, None, "reordered", "per_sublayer")
NORM_KINDS = ("undeclared", "layernorm", "rmsnorm")
RUN_KINDS = ("training", "evaluation", "inference")  # = resdiag_run_kind
SPLITS = ("none", "data", "sequence", "tensor", "pipeline")  # = resdiag_split
RANK_DETECT = -1  # = RESDIAG_RANK_DETECT
EXPECT_DECLARED = 100  # = RESDIAG_EXPECT_DECLARED, CheckOptions.expect
# Other spellings of PLACEMENTS, as `resdiag check --expect` and tinygpt
# --placement take them.
_PLACEMENT_ALIASES = {"pre-norm": "pre", "prenorm": "pre", "post-norm": "post",
                      "postnorm": "post", "peri-ln": "sandwich", "mix": "mixed",
                      "per-sublayer": "per_sublayer"}


def placement(name):
    """(index into PLACEMENTS, post-norm layers of a mixed placement or 0)
    for a placement name: PLACEMENTS, the CLI's names ("pre-norm",
    "post-norm", "peri-ln", ...) and "mixed:K" / "mix:K" (post-norm in
    layers 0..K-1); any case. ValueError for anything else."""
    text = str(name).strip().lower()
    base, sep, k = text.partition(":")
    base = _PLACEMENT_ALIASES.get(base, base)
    if base in PLACEMENTS and (not sep or (base == "mixed" and k.isdigit() and int(k) > 0)):
        return PLACEMENTS.index(base), int(k) if sep else 0
    raise ValueError("resdiag: unknown placement %r; one of %s, %s, or mixed:K"
                     % (name, ", ".join(p for p in PLACEMENTS[1:] if p),
                        ", ".join(sorted(_PLACEMENT_ALIASES))))


class ResdiagError(RuntimeError):
    """A libresdiag call failed; ``status`` is the resdiag_status value."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


class AlarmError(ResdiagError):
    """attach(raise_on_alarm=True): an alarm fired at the step just ended,
    which the run file already holds; ``alarms`` lists the step's alarms
    (resdiag.Alarm)."""

    def __init__(self, message, alarms):
        super().__init__(message, ALARM)
        self.alarms = alarms


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int),
                ("rows", ctypes.c_int64), ("cols", ctypes.c_int64),
                ("row_stride", ctypes.c_int64)]


class PartialSite(ctypes.Structure):  # resdiag_partial_site
    _fields_ = [("dir", ctypes.c_int), ("layer", ctypes.c_int), ("sublayer", ctypes.c_int),
                ("site", ctypes.c_int), ("param", ctypes.c_int), ("line", ctypes.c_int),
                ("file", ctypes.c_char_p)]


class PartialRef(ctypes.Structure):  # resdiag_partial_ref
    _fields_ = [("site", PartialSite), ("p", ctypes.c_void_p), ("row_norms", ctypes.c_void_p)]


_strv = ctypes.POINTER(ctypes.c_char_p)
LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)


class Model(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("n_layers", ctypes.c_int),
                ("d_model", ctypes.c_int), ("n_sublayers", ctypes.c_int),
                ("sublayer_names", _strv), ("block", ctypes.c_int),
                ("declared_placement", ctypes.c_int), ("declared_mix_layers", ctypes.c_int),
                ("norm_kind", ctypes.c_int), ("shard_cols", ctypes.c_int),
                ("n_layer_params", ctypes.c_int), ("layer_param_names", _strv),
                ("n_model_params", ctypes.c_int), ("model_param_names", _strv),
                ("n_meta", ctypes.c_int), ("meta", _strv), ("description", ctypes.c_char_p),
                ("run_kind", ctypes.c_int), ("head_param", ctypes.c_char_p),
                ("residual_param", ctypes.c_char_p), ("n_metrics", ctypes.c_int),
                ("metric_names", _strv), ("rank", ctypes.c_int), ("world_size", ctypes.c_int),
                ("split", ctypes.c_int), ("shard_col_offset", ctypes.c_int),
                ("layer_first", ctypes.c_int), ("layer_count", ctypes.c_int)]


class AlarmStruct(ctypes.Structure):
    """resdiag_alarm."""
    _fields_ = [("kind", ctypes.c_int), ("step", ctypes.c_int64), ("rank", ctypes.c_int),
                ("direction", ctypes.c_int), ("layer", ctypes.c_int), ("sublayer", ctypes.c_int),
                ("site", ctypes.c_int), ("param", ctypes.c_char_p), ("ref_layer", ctypes.c_int),
                ("value", ctypes.c_double), ("bound", ctypes.c_double)]


# resdiag_alarm_kind values, by their names in attach(alarms=...).
ALARM_KINDS = ("nonfinite", "update_ratio", "growth", "grad_norm")


class Options(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("record_every", ctypes.c_int64),
                ("record_first", ctypes.c_int64), ("record_last", ctypes.c_int64),
                ("record_init_only", ctypes.c_int), ("sketch_size", ctypes.c_int),
                ("sketch_seed", ctypes.c_uint64), ("flush_steps", ctypes.c_int),
                ("flush_seconds", ctypes.c_double), ("log_fn", ctypes.c_void_p),
                ("log_user_data", ctypes.c_void_p), ("hook_threads", ctypes.c_int),
                ("overwrite", ctypes.c_int), ("one_call_per_site", ctypes.c_int),
                ("record_rank_every", ctypes.c_int), ("file_schema", ctypes.c_int),
                ("compression", ctypes.c_int), ("alarm_nonfinite", ctypes.c_int),
                ("alarm_update_ratio", ctypes.c_double), ("alarm_growth", ctypes.c_double),
                ("alarm_grad_norm", ctypes.c_double), ("alarm_fn", ctypes.c_void_p),
                ("alarm_user_data", ctypes.c_void_p)]


class RunInfo(ctypes.Structure):
    _fields_ = [("schema_version", ctypes.c_int), ("resdiag_version", ctypes.c_char_p),
                ("n_layers", ctypes.c_int), ("d_model", ctypes.c_int),
                ("n_sublayers", ctypes.c_int), ("sublayer_names", _strv),
                ("block", ctypes.c_int), ("declared_placement", ctypes.c_int),
                ("declared_mix_layers", ctypes.c_int), ("norm_kind", ctypes.c_int),
                ("shard_cols", ctypes.c_int), ("n_layer_params", ctypes.c_int),
                ("layer_param_names", _strv), ("n_model_params", ctypes.c_int),
                ("model_param_names", _strv), ("sketch_size", ctypes.c_int),
                ("sketch_seed", ctypes.c_uint64), ("n_steps", ctypes.c_int64),
                ("n_meta", ctypes.c_int), ("meta", _strv), ("description", ctypes.c_char_p),
                ("created_utc", ctypes.c_char_p), ("program", ctypes.c_char_p),
                ("hdf5_version", ctypes.c_char_p), ("run_kind", ctypes.c_int),
                ("head_param", ctypes.c_char_p), ("residual_param", ctypes.c_char_p),
                ("n_metrics", ctypes.c_int), ("metric_names", _strv),
                ("rank", ctypes.c_int), ("world_size", ctypes.c_int),
                ("local_rank", ctypes.c_int), ("split", ctypes.c_int),
                ("shard_col_offset", ctypes.c_int), ("layer_first", ctypes.c_int),
                ("layer_count", ctypes.c_int), ("record_rank_every", ctypes.c_int),
                ("rank_source", ctypes.c_char_p), ("job_id", ctypes.c_char_p),
                ("n_ranks_merged", ctypes.c_int)]


class AnalyzeOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("step_index", ctypes.c_int64),
                ("max_growth", ctypes.c_double), ("no_consequences", ctypes.c_int)]


class CheckOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("expect", ctypes.c_int),
                ("require_final_norm", ctypes.c_int), ("max_growth", ctypes.c_double)]


class HtmlOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("run_name", ctypes.c_char_p),
                ("reader", ctypes.c_void_p)]


def _source_tree_build():
    """build/libresdiag.so when this package is python/resdiag of a source
    tree (the developer flow), else None."""
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    if not os.path.isfile(os.path.join(root, "meson.build")):
        return None
    return os.path.join(root, "build", "libresdiag.so")


def _module_prefix():
    """The prefix this module is installed under when it lies where pip and
    meson put modules (PREFIX/lib/pythonX.Y/site-packages,
    PREFIX/lib/python3/dist-packages, lib64 too), else None: a
    `pip install --target DIR` or a source tree has none."""
    site = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    pydir = os.path.dirname(site)
    libdir = os.path.dirname(pydir)
    if (os.path.basename(site) in ("site-packages", "dist-packages")
            and os.path.basename(pydir).startswith("python3")
            and os.path.basename(libdir) in ("lib", "lib64")):
        return os.path.dirname(libdir)
    return None


def _module_prefixes():
    """_module_prefix() and, when it ends in /local, its parent too: Debian's
    pip puts `pip install --prefix P` under P/local/lib/python3.X/dist-packages,
    where meson's --prefix P puts the library in P/lib/..."""
    prefix = _module_prefix()
    if prefix is None:
        return []
    if os.path.basename(prefix) == "local":
        return [prefix, os.path.dirname(prefix)]
    return [prefix]


def _prefix_libraries(prefixes):
    """PREFIX/lib/MULTIARCH/libresdiag.so.MAJOR (meson's libdir on Debian),
    PREFIX/lib64/... and PREFIX/lib/... for each absolute prefix given, the
    files that exist. Only absolute paths built from the module's own place
    and fixed prefixes: never the working directory, nothing a run file or
    the environment names."""
    arch = sysconfig.get_config_var("MULTIARCH") or ""
    subdirs = [os.path.join("lib", arch)] if arch else []
    subdirs += ["lib64", "lib"]
    out = []
    for prefix in prefixes:
        if not prefix or not os.path.isabs(prefix):
            continue
        for sub in subdirs:
            path = os.path.join(prefix, sub, _SONAME)
            if path not in out and os.path.isfile(path):
                out.append(path)
    return out


def _pkg_config_library():
    """libresdiag.so.MAJOR in `pkg-config --variable=libdir resdiag`, for a
    prefix that the loader does not search; None without pkg-config."""
    try:
        out = subprocess.run(["pkg-config", "--variable=libdir", "resdiag"],
                             capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    libdir = out.stdout.strip()
    if out.returncode != 0 or not libdir:
        return None
    return os.path.join(libdir, _SONAME)


def _candidates():
    """Where to look, in order: $RESDIAG_LIBRARY; the library that `meson
    install` put next to this module (its _config.py); build/libresdiag.so
    of the source tree this module is in; the library of the prefix the
    module is installed under and of sys.prefix (a venv), where `meson
    install --prefix` of the same prefix puts it; the system loader
    (LD_LIBRARY_PATH, ld.so.conf); /usr/local, for an install whose
    ldconfig was not run. _load then asks pkg-config."""
    env = os.environ.get("RESDIAG_LIBRARY")
    if env:
        return [env]  # an explicit choice is never second-guessed
    out = []
    if _config is not None:
        out.append(_config.LIBRARY)
    in_tree = _source_tree_build()
    if in_tree:
        out.append(in_tree)
    # The module's own prefix before the loader: a library installed with
    # it is of its release, one elsewhere on the system may not be.
    out += [p for p in _prefix_libraries(_module_prefixes() + [sys.prefix]) if p not in out]
    out.append(_SONAME)
    found = ctypes.util.find_library("resdiag")
    if found and found != _SONAME:
        out.append(found)
    out += [p for p in _prefix_libraries(["/usr/local"]) if p not in out]
    return out


def _load():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path + " (missing)")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    if not os.environ.get("RESDIAG_LIBRARY"):
        # Last, as it runs a program: only when nothing else loaded.
        path = _pkg_config_library()
        if path:
            try:
                return ctypes.CDLL(path), path
            except OSError as e:
                tried.append("%s (%s, from pkg-config)" % (path, e))
    raise ImportError("resdiag: cannot load libresdiag; set RESDIAG_LIBRARY to the path of "
                      "libresdiag.so, or put its directory in LD_LIBRARY_PATH or its "
                      "resdiag.pc in PKG_CONFIG_PATH (tried: %s)" % "; ".join(tried))


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _file_of(lib, name):
    """The file the loader took for a bare name like libresdiag.so.0 (glibc's
    dladdr on one of its functions); the name itself where that fails."""
    if os.sep in name:
        return name
    try:
        dladdr = ctypes.CDLL(None).dladdr
        dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
        info = _DlInfo()
        addr = ctypes.cast(lib.resdiag_version_number, ctypes.c_void_p)
        if dladdr(addr, ctypes.byref(info)) and info.dli_fname:
            return os.fsdecode(info.dli_fname)
    except (AttributeError, OSError):
        pass
    return name


def _check_version(lib, path):
    """The library must be the release line of this module: same major and
    minor version (the structs and calls of the binding are those of that
    header); the micro version may differ. Checked before any other symbol
    is looked up, so an older library fails here and not on a missing name."""
    try:
        number_fn, string_fn = lib.resdiag_version_number, lib.resdiag_version_string
    except AttributeError:
        raise ImportError("resdiag: %s is not libresdiag (no resdiag_version_number); "
                          "this module is resdiag %s" % (path, __version__)) from None
    number_fn.restype, number_fn.argtypes = ctypes.c_uint, []
    string_fn.restype, string_fn.argtypes = ctypes.c_char_p, []
    number = number_fn()
    text = (string_fn() or b"?").decode("utf-8", "replace")
    want = tuple(int(part) for part in __version__.split(".")[:2])
    have = (number // 10000, number // 100 % 100)
    if have != want:
        raise ImportError("resdiag: %s is libresdiag %s (version number %d); this resdiag "
                          "Python module is %s and needs libresdiag %d.%d.x"
                          % (path, text, number, __version__, want[0], want[1]))


lib, path = _load()
path = _file_of(lib, path)
_check_version(lib, path)

_c, _i, _i64, _d, _p = ctypes.c_char_p, ctypes.c_int, ctypes.c_int64, ctypes.c_double, ctypes.c_void_p
_dp, _ip, _i64p = ctypes.POINTER(_d), ctypes.POINTER(_i), ctypes.POINTER(_i64)

# name: (restype, argtypes)
_PROTOS = {
    "resdiag_version_number": (ctypes.c_uint, []),
    "resdiag_version_string": (_c, []),
    "resdiag_strerror": (_c, [_i]),
    "resdiag_set_log_handler": (None, [LOG_FN, _p]),
    "resdiag_set_log_priority": (None, [_i]),
    "resdiag_model_init": (None, [ctypes.POINTER(Model)]),
    "resdiag_options_init": (None, [ctypes.POINTER(Options)]),
    "resdiag_open": (_i, [ctypes.POINTER(_p), _c, ctypes.POINTER(Model),
                          ctypes.POINTER(Options)]),
    "resdiag_step_begin": (_i, [_p, _i64]),
    "resdiag_step_end": (_i, [_p]),
    "resdiag_step_abort": (_i, [_p, _c]),
    "resdiag_step_is_recorded": (_i, [_p]),
    "resdiag_step_metric": (_i, [_p, _c, _d]),
    "resdiag_set_enabled": (_i, [_p, _i]),
    "resdiag_observe_at": (_i, [_p, _i, _i, _i, _i, Tensor, _c, _i]),
    "resdiag_observe_alias": (_i, [_p, _i, _i, _i, _i, _i]),
    "resdiag_param_grad_at": (_i, [_p, _i, _c, Tensor, _c, _i]),
    "resdiag_flush": (_i, [_p]),
    "resdiag_close": (_i, [_p]),
    "resdiag_destroy": (None, [_p]),
    "resdiag_errmsg": (_c, [_p]),
    "resdiag_reader_open": (_i, [ctypes.POINTER(_p), _c]),
    "resdiag_reader_destroy": (None, [_p]),
    "resdiag_reader_info": (ctypes.POINTER(RunInfo), [_p]),
    "resdiag_reader_refresh": (_i, [_p]),
    "resdiag_reader_steps": (_i, [_p, _i64p, _i64]),
    "resdiag_reader_step_aborted": (_i, [_p, _i64, _ip]),
    "resdiag_reader_abort_reason": (_i, [_p, _i64, _c, ctypes.c_size_t]),
    "resdiag_reader_site": (_i, [_p, _i64, _i, _i, _i, _i, _dp, _ip]),
    "resdiag_reader_sketch": (_i, [_p, _i64, _i, _i, _i, _i, _dp]),
    "resdiag_reader_param": (_i, [_p, _i64, _i, _c, _dp, _ip]),
    "resdiag_reader_update": (_i, [_p, _i64, _i, _i, _dp]),
    "resdiag_reader_callsite": (_c, [_p, _i, _i, _i, _i]),
    "resdiag_reader_alias": (_i, [_p, _i64, _i, _i, _i, _i, _ip]),
    "resdiag_reader_series": (_i, [_p, _i, _i, _i, _i, _i, _dp, _i64]),
    "resdiag_reader_metric": (_i, [_p, _i, _i64, _i64, _dp]),
    "resdiag_metric_given": (_i, [_d]),
    # the generic dataset access (frames.py: whole tables at once)
    "resdiag_reader_n_datasets": (_i, [_p]),
    "resdiag_reader_dataset_name": (_c, [_p, _i]),
    "resdiag_reader_dims": (_i, [_p, _c, _i64p, _i, _ip]),
    "resdiag_reader_read": (_i, [_p, _c, _i64, _i64, _dp, ctypes.c_size_t]),
    "resdiag_site_name": (_c, [_i]),
    "resdiag_alarm_count": (_i, [_p]),
    "resdiag_alarm_get": (_i, [_p, _i, ctypes.POINTER(AlarmStruct)]),
    "resdiag_field_name": (_c, [_i]),
    "resdiag_analyze_options_init": (None, [ctypes.POINTER(AnalyzeOptions)]),
    "resdiag_analyze": (_i, [_p, ctypes.POINTER(AnalyzeOptions), ctypes.POINTER(_p)]),
    "resdiag_analysis_destroy": (None, [_p]),
    "resdiag_analysis_verdict": (_i, [_p]),
    "resdiag_analysis_confidence": (_i, [_p]),
    "resdiag_analysis_mix_layers": (_i, [_p]),
    "resdiag_analysis_alpha": (_d, [_p]),
    "resdiag_analysis_final_norm": (_i, [_p]),
    "resdiag_analysis_stream_only": (_i, [_p]),
    "resdiag_analysis_sublayer": (_i, [_p, _i, _i, _dp]),
    "resdiag_analysis_growth": (_d, [_p]),
    "resdiag_analysis_step": (_i64, [_p]),
    "resdiag_verdict_name": (_c, [_i]),
    "resdiag_confidence_name": (_c, [_i]),
    "resdiag_check_options_init": (None, [ctypes.POINTER(CheckOptions)]),
    "resdiag_analysis_check": (_i, [_p, ctypes.POINTER(CheckOptions), _c, ctypes.c_size_t]),
    # Strings the caller frees: kept as raw pointers, read, then resdiag_free'd.
    "resdiag_analysis_to_text": (_p, [_p]),
    "resdiag_analysis_to_json": (_p, [_p]),
    "resdiag_analysis_diff_text": (_p, [_p, _p, _c, _c]),
    "resdiag_html_options_init": (None, [ctypes.POINTER(HtmlOptions)]),
    "resdiag_analysis_to_html": (_p, [_p, ctypes.POINTER(HtmlOptions)]),
    "resdiag_analysis_diff_html": (_p, [_p, _p, _c, _c]),
    "resdiag_figure_name": (_c, [_i]),
    "resdiag_analysis_figure_svg": (_i, [_p, _i, ctypes.POINTER(_p)]),
    "resdiag_free": (None, [_p]),
}

for _name, (_res, _args) in _PROTOS.items():
    try:
        _fn = getattr(lib, _name)
    except AttributeError:
        raise ImportError("resdiag: %s (libresdiag %s) has no %s, which this module "
                          "(resdiag %s) calls" % (path, lib.resdiag_version_string().decode(),
                                                  _name, __version__)) from None
    _fn.restype = _res
    _fn.argtypes = _args

# The calls for statistics computed elsewhere (the device path): looked up
# apart, so that the rest of the module works with a library without them;
# HAS_PARTIALS tells whether it has them all.
_PARTIAL_PROTOS = {
    "resdiag_submit_partials": (_i, [_p, _i, _p, _p, _c]),
    "resdiag_partial_compute": (_i, [_p, Tensor, _i64, _p, _p]),
    "resdiag_sketch_layout": (_i, [_p, _i64, _i64, ctypes.POINTER(ctypes.c_int32),
                                   ctypes.POINTER(ctypes.c_float), _i64, _i64,
                                   ctypes.POINTER(ctypes.c_float)]),
    "resdiag_sketch_size": (_i, [_p]),
    "resdiag_param_grad_partial": (_i, [_p, _i, _c, _p, _c, _i]),
    "resdiag_observe_partial": (_i, [_p, _i, _i, _i, _i, _p, _c, _i]),
    "resdiag_submit_partial_refs": (_i, [_p, _i, _p, _c, ctypes.POINTER(_i)]),
}
HAS_PARTIALS = True
for _name, (_res, _args) in _PARTIAL_PROTOS.items():
    _fn = getattr(lib, _name, None)
    if _fn is None:
        HAS_PARTIALS = False
        continue
    _fn.restype = _res
    _fn.argtypes = _args


def _check_struct(init, cls):
    s = cls()
    init(ctypes.byref(s))
    if s.struct_size != ctypes.sizeof(cls):
        raise ImportError("resdiag: %s in %s has %d bytes, the binding expects %d"
                          % (cls.__name__, path, s.struct_size, ctypes.sizeof(cls)))


_check_struct(lib.resdiag_model_init, Model)
_check_struct(lib.resdiag_options_init, Options)
_check_struct(lib.resdiag_analyze_options_init, AnalyzeOptions)
_check_struct(lib.resdiag_check_options_init, CheckOptions)
_check_struct(lib.resdiag_html_options_init, HtmlOptions)

# The library's messages go to Python's logging (logger "resdiag") instead
# of straight to stderr; the callback object must outlive every call.
log = logging.getLogger("resdiag")
_LEVELS = {10: logging.DEBUG, 20: logging.INFO, 30: logging.ERROR}


def _on_log(priority, msg, _user):
    log.log(_LEVELS.get(priority, logging.ERROR), "%s", msg.decode("utf-8", "replace"))


_log_cb = LOG_FN(_on_log)
lib.resdiag_set_log_handler(_log_cb, None)


def strerror(status):
    return lib.resdiag_strerror(status).decode()


def take_string(ptr):
    """Reads and frees a string the library returned (NULL -> None)."""
    if not ptr:
        return None
    try:
        return ctypes.string_at(ptr).decode("utf-8", "replace")
    finally:
        lib.resdiag_free(ptr)


def c_int(value, what, bits=32):
    """value for a C int (bits 32) or int64_t (bits 64) argument or struct
    field, checked before ctypes sees it: ctypes wraps an int outside the
    type silently (layer 2**32 + 1 would read layer 1). ValueError outside
    the type's range; TypeError for what is not an integer (operator.index:
    no float, no str) and for a bool, which is an int to Python but no
    layer, step or rank."""
    if isinstance(value, bool):
        raise TypeError("resdiag: %s = %r: a bool is not an integer here" % (what, value))
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError("resdiag: %s = %r is not an integer" % (what, value)) from None
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if not lo <= v <= hi:
        raise ValueError("resdiag: %s = %d is outside %d..%d (a C int%d)"
                         % (what, v, lo, hi, bits))
    return v


def c_text(text, what):
    """text as the bytes of a C string (UTF-8); ValueError when it holds a
    NUL, where C would read only the part before it."""
    if not isinstance(text, (str, bytes)):
        raise TypeError("resdiag: %s must be a str, not %s" % (what, type(text).__name__))
    enc = text.encode() if isinstance(text, str) else text
    if b"\0" in enc:
        raise ValueError("resdiag: %s %r holds a NUL character" % (what, text))
    return enc


def c_path(path, what):
    """A path (str, bytes or os.PathLike) as the bytes C opens: TypeError for
    anything else (None is no file name), ValueError for a NUL in it (C
    would open the part before it)."""
    try:
        p = os.fspath(path)
    except TypeError:
        raise TypeError("resdiag: %s: the path must be str, bytes or os.PathLike, not %s"
                        % (what, type(path).__name__)) from None
    enc = os.fsencode(p)
    if b"\0" in enc:
        raise ValueError("resdiag: %s: the path %r holds a NUL character" % (what, p))
    return enc


def cstrings(names):
    """A C array of the given strings; keep the returned tuple alive."""
    enc = [c_text(n, "the name") for n in names]
    arr = (ctypes.c_char_p * max(1, len(enc)))(*enc)
    return arr, enc


FIELDS = tuple(lib.resdiag_field_name(i).decode() for i in range(N_FIELDS))
# the figures of `resdiag plot --what` (resdiag_figure), by name
N_FIGURES = 4
FIGURES = tuple(lib.resdiag_figure_name(i).decode() for i in range(N_FIGURES))
