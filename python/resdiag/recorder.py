"""attach(): forward and backward hooks on an nn.Module that feed libresdiag.

A CPU tensor is read by the C library's kernel at once, as a view (see
_tensor.py), in the thread that runs the hook, and its sites reach the
library together when the step ends (_kernel.py). A tensor on
another device (or any tensor, with device_stats="always") is reduced there
to its partial statistics (_device.py), which wait on the device until the
step ends and reach the library together (_batch.py). Forward statistics
come from module hooks, stream gradients from tensor hooks registered
during the forward (removed at the step's end), parameter gradients from
``.grad`` when the step ends.
"""
import ctypes
import functools
import inspect
import logging
import os
import warnings
import weakref

import torch
import torch.nn as nn

from . import _batch, _device, _kernel, _lib, _tensor, alarms as _alarms, blocks as _blocks
from ._lib import lib, ResdiagError

S_STREAM_IN, S_NORM_IN, S_NORM_OUT, S_BRANCH_OUT, S_STREAM_OUT = 0, 1, 2, 3, 4
S_BRANCH_IN, S_OUT_NORM_IN, S_OUT_NORM_OUT = 5, 6, 7
S_EMBED_OUT, S_FINAL_NORM_IN, S_FINAL_NORM_OUT, S_LOGITS = 16, 17, 18, 19
_log = logging.getLogger("resdiag")

# Where the statistics of a tensor are computed (attach(device_stats=...)):
# "auto" on the tensor's device when it is not on the CPU (the C kernel
# reads CPU tensors in place), "always" on the tensor's device (torch ops,
# CPU tensors too), "never" by the C kernel (other devices' tensors copied
# to the host first).
DEVICE_STATS = ("auto", "always", "never")
_NAN, _INF, _ABSMAX = (_device.INDEX[k] for k in ("nan_count", "inf_count", "absmax"))

# The binding's name for the head's weight (the one model-level parameter
# it records), declared as the head role.
HEAD_PARAM = "head.w"
# The call site of every parameter gradient (one string: the library keeps
# the pointer).
PARAM_CALLSITE = b"param.grad"

# Where models keep the norm between the last block and the head: nanoGPT
# and minGPT (transformer.ln_f), Hugging Face Llama/Mistral (model.norm),
# GPT-2 heads over a bare body (ln_f), Megatron and Phi (final_layernorm),
# GPT-NeoX (final_layer_norm), x-transformers (attn_layers.final_norm).
# What is found there is only hooked: an Identity() is no norm, and the
# report decides that from the data.
FINAL_NORM_PATHS = ("transformer.ln_f", "ln_f", "model.norm", "norm", "final_layernorm",
                    "model.final_layernorm", "decoder.final_layernorm", "final_layer_norm",
                    "gpt_neox.final_layer_norm", "attn_layers.final_norm")


def _first_tensor(x):
    """A module's output or first argument: a tensor, or the first element
    of a tuple/list (nn.MultiheadAttention and Hugging Face blocks return
    tuples)."""
    while isinstance(x, (tuple, list)) and x:
        x = x[0]
    return x if isinstance(x, torch.Tensor) else None


# Where torch passes a module's keyword arguments to its forward pre-hooks
# (2.0 on), the input of a module called by keyword (Hugging Face calls
# self_attn(hidden_states=...)) is taken from these names, in this order;
# any other keyword call gives no tensor, and its site is not observed.
_PRE_HOOK_KWARGS = "with_kwargs" in inspect.signature(
    nn.Module.register_forward_pre_hook).parameters
INPUT_KEYWORDS = ("hidden_states", "x", "input", "query", "inputs_embeds")


def _keyword_input(kwargs):
    for name in INPUT_KEYWORDS:
        t = _first_tensor(kwargs.get(name))
        if t is not None:
            return t
    return None


def _pre_hook(module, fn):
    """Registers fn(module, args) as a forward pre-hook; a call that passes
    the input by keyword (see INPUT_KEYWORDS) gives fn (input,) as args."""
    if not _PRE_HOOK_KWARGS:
        return module.register_forward_pre_hook(fn)

    def hook(m, args, kwargs):
        if kwargs and _first_tensor(args) is None:
            args = (_keyword_input(kwargs),)
        fn(m, args)  # returns None: the call's arguments stay as they are

    return module.register_forward_pre_hook(hook, with_kwargs=True)


def _norm_kind(norms):
    """What the norm modules are: a fact of their classes, not a belief."""
    kinds = set()
    for m in norms:
        if isinstance(m, nn.LayerNorm):
            kinds.add(1)
        elif "rmsnorm" in type(m).__name__.lower():
            kinds.add(2)
        else:
            return 0
    return kinds.pop() if len(kinds) == 1 else 0


def _check_roles(mods, sub):
    """The out_norm is a module of its own: a norm on the branch's output
    cannot be the branch, its first module or the input norm."""
    out = mods.get("out_norm")
    for role in ("norm", "branch", "branch_in"):
        if out is not None and mods.get(role) is out:
            raise ValueError("resdiag.attach: out_norm of %s is its %s too (%s); out_norm is "
                             "the norm applied to the branch's output before the add"
                             % (sub.name, role, getattr(sub, role)))


def _d_model(block, spec):
    for sub in spec.sublayers:
        for dotted in (sub.norm, sub.out_norm):
            norm = _blocks.get(block, dotted) if dotted else None
            shape = getattr(norm, "normalized_shape", None)
            if shape:
                return int(shape[-1])
            w = getattr(norm, "weight", None)
            if isinstance(w, torch.Tensor) and w.dim() == 1:
                return int(w.shape[0])
    for attr in ("embed_dim", "d_model", "n_embd"):
        if isinstance(getattr(block, attr, None), int):
            return getattr(block, attr)
    first = _blocks.get(block, spec.sublayers[0].branch_in)
    for attr in ("embed_dim", "in_features"):
        if isinstance(getattr(first, attr, None), int):
            return getattr(first, attr)
    return None


class Recorder:
    """What attach() returns: brackets steps and owns the hooks and the run
    file. Use ``with rec.step(n): ...`` (or begin_step/end_step) around the
    forward and backward of each training step, and ``rec.detach()`` at the
    end (removes every hook and closes the file)."""

    def __init__(self, model, path, blocks=None, block=None, layers=None, final_norm=None,
                 head=None,
                 placement=None, norm_kind=None, d_model=None, backward=True,
                 record_every=1, record_first=0, record_last=None, record_init_only=False,
                 sketch_size=None, flush_steps=None, description=None, meta=None,
                 disable_fast_path=True, overwrite=False, metrics=("loss",),
                 rank=None, world_size=None, split=None, shard_cols=None, shard_col_offset=0,
                 layer_first=0, layer_count=None, n_layers=None, record_rank_every=1,
                 device_stats=None, device_float64=False, file_schema=0, compression=1,
                 alarms=None, on_alarm=None, raise_on_alarm=False):
        enc_path = _lib.c_path(path, "attach")  # first: attach(model, None) makes no file
        self.path = os.fsdecode(enc_path)
        device_stats = device_stats or os.environ.get("RESDIAG_DEVICE_STATS") or "auto"
        if device_stats not in DEVICE_STATS:
            raise ValueError("resdiag.attach: device_stats=%r; one of %s"
                             % (device_stats, ", ".join(DEVICE_STATS)))
        if device_stats != "never" and not _lib.HAS_PARTIALS:
            if device_stats == "always":
                raise ResdiagError("resdiag.attach: device_stats='always' needs a libresdiag "
                                   "with resdiag_submit_partials (%s has none)" % _lib.path)
            device_stats = "never"
        names = {id(m): n for n, m in model.named_modules()}
        # Layers: groups of container entries stand for the blocks, and no
        # module runs around a group (see _group_entry).
        self._grouped = layers is not None
        if self._grouped:
            if not isinstance(layers, _blocks.Layers):
                raise TypeError("resdiag.attach: layers= takes a resdiag.Layers, not %s"
                                % type(layers).__name__)
            if blocks is not None or block is not None:
                raise ValueError("resdiag.attach: layers= maps the blocks itself; pass it "
                                 "without blocks= and block=")
            blocks, block = layers.groups(model), layers.block
        if blocks is None:
            blocks = _blocks.find_blocks(model)
            if not blocks:
                raise ValueError("resdiag.attach: no nn.TransformerEncoderLayer, "
                                 "nn.TransformerDecoderLayer or GPT-2-style block "
                                 "(ln_1, attn, ln_2, mlp) in the model; pass blocks= and block=")
        blocks = list(blocks)
        specs = [block or _blocks.preset_for(b) for b in blocks]
        if any(s is None for s in specs):
            raise ValueError("resdiag.attach: a block has no preset (%s); pass block=resdiag.Block(...)"
                             % type(blocks[specs.index(None)]).__name__)
        sub_names = [s.name for s in specs[0].sublayers]
        for b, s in zip(blocks, specs):
            if [x.name for x in s.sublayers] != sub_names or s.parallel != specs[0].parallel:
                raise ValueError("resdiag.attach: blocks of different kinds (%s); pass blocks= "
                                 "with one kind, e.g. model.decoder.layers" % type(b).__name__)
        self._parallel = specs[0].parallel

        # Resolve each block's submodules and parameters once. A norm or
        # out_norm whose path holds None in a block is absent there (the
        # last layer of x-transformers' post-norm stack has no norm of its
        # own); absent in every block, the path names nothing.
        self._layers = []
        norms = []
        present = set()  # (sublayer, role) of the optional roles found in some block
        for b, s in zip(blocks, specs):
            subs = []
            for si, sub in enumerate(s.sublayers):
                mods = {}
                for role in _blocks.ROLES:
                    dotted = getattr(sub, role)
                    if dotted is None:
                        continue
                    found, m = _blocks.resolve(b, dotted)
                    if found and m is None and role in _blocks.OPTIONAL_ROLES:
                        continue
                    if not isinstance(m, nn.Module):
                        where = b.what() if isinstance(b, _blocks.Group) else type(b).__name__
                        raise ValueError("resdiag.attach: %s has no submodule %r (%s of %s)"
                                         % (where, dotted, role, sub.name))
                    mods[role] = m
                    present.add((si, role))
                _check_roles(mods, sub)
                norms += [mods[r] for r in _blocks.OPTIONAL_ROLES if r in mods]
                subs.append(mods)
            self._layers.append((b, subs))
        for si, sub in enumerate(specs[0].sublayers):
            for role in _blocks.OPTIONAL_ROLES:
                if getattr(sub, role) is not None and (si, role) not in present:
                    raise ValueError("resdiag.attach: %s=%r of %s is None in every block: "
                                     "no such norm (leave %s out)"
                                     % (role, getattr(sub, role), sub.name, role))
        # A parameter is recorded when every block has it.
        pnames = [n for n in specs[0].params
                  if all(isinstance(_blocks.get(b, s.params.get(n, "")), torch.Tensor)
                         for b, s in zip(blocks, specs) if n in s.params)
                  and all(n in s.params for s in specs)]
        self._params = [[_blocks.get(b, s.params[n]) for n in pnames] for b, s in zip(blocks, specs)]
        # The residual-write role, when every block declares the same one
        # and it is recorded.
        residual = specs[0].residual
        if residual not in pnames or any(s.residual != residual for s in specs):
            residual = None

        for what, dotted in (("final_norm", final_norm), ("head", head)):
            if isinstance(dotted, str) and not isinstance(_blocks.get(model, dotted), nn.Module):
                raise ValueError("resdiag.attach: %s=%r is no submodule of the model" % (what, dotted))
        if isinstance(final_norm, str):
            final_norm = _blocks.get(model, final_norm)
        if isinstance(head, str):
            head = _blocks.get(model, head)
        if final_norm is None:
            # The norm of the nn.TransformerEncoder/Decoder holding the last
            # block, else the first of the common places.
            for mod in model.modules():
                if isinstance(mod, (nn.TransformerEncoder, nn.TransformerDecoder)) and \
                        any(x is blocks[-1] for x in mod.layers):
                    final_norm = mod.norm
            in_blocks = {id(m) for b in blocks for m in b.modules()}
            for dotted in FINAL_NORM_PATHS:
                if final_norm is not None:
                    break
                cand = _blocks.get(model, dotted)
                if isinstance(cand, nn.Module) and id(cand) not in in_blocks:
                    final_norm = cand
        if head is None:
            for attr in ("lm_head", "head"):
                if isinstance(getattr(model, attr, None), nn.Linear):
                    head = getattr(model, attr)
                    break
        self._final_norm, self._head = final_norm, head
        # Which modules were taken, as dotted paths ("" = the model itself).
        self.final_norm_module = names.get(id(final_norm)) if final_norm is not None else None
        self.head_module = names.get(id(head)) if head is not None else None
        if final_norm is not None:
            _log.info("resdiag: final norm: %s (%s)", self.final_norm_module or "the model",
                      type(final_norm).__name__)
        elif head is not None:
            _log.info("resdiag: no final norm found; the head's input (%s) is recorded as "
                      "final_norm_out, and the report tells from the data whether it is one",
                      self.head_module)
        else:
            _log.info("resdiag: no final norm and no head found: the report says "
                      "'not observed' (pass final_norm= and head=)")
            if self._grouped:
                warnings.warn("resdiag.attach: with layers=, the last layer's output is what "
                              "the final norm or the head reads, and neither was found: the "
                              "last sublayer's stream_out is not recorded (pass final_norm= or "
                              "head=)", RuntimeWarning, stacklevel=3)
        head_w = getattr(head, "weight", None) if head is not None else None
        self._model_params = [head_w] if isinstance(head_w, torch.Tensor) else []
        recorded = {id(p) for ps in self._params for p in ps} | {id(p) for p in self._model_params}
        self._param_paths = {id(p): n for n, p in model.named_parameters() if id(p) in recorded}

        d = d_model or _d_model(blocks[0], specs[0])
        if not d:
            raise ValueError("resdiag.attach: cannot tell d_model from the block; pass d_model=")
        self.d_model = d
        self.n_layers = len(blocks)
        # A pipeline stage's blocks are the layers layer_first.. of a model
        # of n_layers: the C run numbers them so (doc/RANKS.md).
        if split is not None and split not in _lib.SPLITS:
            raise ValueError("resdiag.attach: split=%r; one of %s"
                             % (split, ", ".join(_lib.SPLITS)))
        pipeline = split == "pipeline"
        if pipeline and n_layers is None:
            raise ValueError("resdiag.attach: split='pipeline' needs n_layers=, the whole "
                             "model's number of layers")
        ci = _lib.c_int
        layer_first = ci(layer_first, "layer_first")
        self._layer0 = layer_first if pipeline else 0
        if pipeline and layer_count is None:
            layer_count = len(blocks)
        self.sublayer_names = sub_names
        self.layer_param_names = pnames

        # The C run.
        keep = []  # C strings must live until resdiag_open has copied the model
        m = _lib.Model()
        lib.resdiag_model_init(ctypes.byref(m))
        m.n_layers = ci(n_layers or self.n_layers, "n_layers")
        m.d_model, m.n_sublayers = ci(d, "d_model"), len(sub_names)
        m.rank = _lib.RANK_DETECT if rank is None else ci(rank, "rank")
        m.world_size = 0 if world_size is None else ci(world_size, "world_size")
        m.split = _lib.SPLITS.index(split) if split is not None else 0
        if shard_cols is not None:
            m.shard_cols = ci(shard_cols, "shard_cols")
        m.shard_col_offset = ci(shard_col_offset, "shard_col_offset")
        m.layer_first = layer_first
        m.layer_count = 0 if layer_count is None else ci(layer_count, "layer_count")
        arr, enc = _lib.cstrings(sub_names)
        keep += [arr, enc]
        m.sublayer_names = arr
        m.block = 1 if self._parallel else 0
        if placement:
            m.declared_placement, m.declared_mix_layers = _lib.placement(placement)
        m.norm_kind = (_lib.NORM_KINDS.index(norm_kind) if norm_kind is not None
                       else _norm_kind(norms))
        if pnames:
            arr, enc = _lib.cstrings(pnames)
            keep += [arr, enc]
            m.n_layer_params, m.layer_param_names = len(pnames), arr
        # Every stage of a pipeline declares the whole model's parameters
        # (the reader merges only files of one model): the head's too,
        # which only the last stage holds and records.
        if self._model_params or pipeline:
            arr, enc = _lib.cstrings([HEAD_PARAM])
            keep += [arr, enc]
            m.n_model_params, m.model_param_names = 1, arr
            enc = HEAD_PARAM.encode()
            keep.append(enc)
            m.head_param = enc
        if residual is not None:
            enc = residual.encode()
            keep.append(enc)
            m.residual_param = enc
        self.residual_param = residual
        # the trainer's own per-step numbers, given with rec.metric(name, value)
        self.metric_names = [str(x) for x in (metrics or ())]
        if self.metric_names:
            arr, enc = _lib.cstrings(self.metric_names)
            keep += [arr, enc]
            m.n_metrics, m.metric_names = len(self.metric_names), arr
        meta = dict(meta or {})
        meta.setdefault("frontend", "python/torch %s" % torch.__version__)
        flat = [str(x) for kv in meta.items() for x in kv]
        arr, enc = _lib.cstrings(flat)
        keep += [arr, enc]
        m.n_meta, m.meta = len(meta), arr
        if description:
            enc = _lib.c_text(description, "description")
            keep.append(enc)
            m.description = enc
        o = _lib.Options()
        lib.resdiag_options_init(ctypes.byref(o))
        o.record_every = ci(record_every, "record_every", 64)
        o.record_first = ci(record_first, "record_first", 64)
        if record_last is not None:
            o.record_last = ci(record_last, "record_last", 64)
        o.record_init_only = int(bool(record_init_only))
        if sketch_size is not None:
            o.sketch_size = ci(sketch_size, "sketch_size")
        if flush_steps is not None:
            o.flush_steps = ci(flush_steps, "flush_steps")
        o.overwrite = 1 if overwrite else 0
        o.record_rank_every = ci(record_rank_every, "record_rank_every")
        o.file_schema = ci(file_schema, "file_schema")
        o.compression = ci(compression, "compression")
        _alarms.declare(o, alarms)
        if on_alarm is not None and not callable(on_alarm):
            raise TypeError("resdiag.attach: on_alarm= takes a function of one Alarm, not %s"
                            % type(on_alarm).__name__)
        self._on_alarm = on_alarm
        self._raise_on_alarm = bool(raise_on_alarm)
        # The alarms fired so far (resdiag.Alarm), in the order they fired.
        self.alarms = []
        h = ctypes.c_void_p()
        st = lib.resdiag_open(ctypes.byref(h), enc_path, ctypes.byref(m), ctypes.byref(o))
        if st != _lib.OK or not h:
            raise ResdiagError("resdiag.attach: cannot record to %s: %s (see the 'resdiag' log)"
                               % (self.path, _lib.strerror(st)), st)
        self._rd = h
        # Closes the C run if the Recorder is dropped without detach().
        self._finalizer = weakref.finalize(self, lib.resdiag_destroy, h)

        self.device_stats = device_stats
        # (no reference back to the recorder from these: detach() frees it)
        # A tensor-parallel shard (width shard_cols) is sketched by its global
        # columns, from shard_col_offset on, as the library does for a tensor.
        shard = (int(shard_cols), int(shard_col_offset)) \
            if split == "tensor" and shard_cols and int(shard_cols) != d else None
        self._partials = _device.Partials(lib.resdiag_sketch_size(h),
                                          functools.partial(_sketch_layout, h),
                                          device_float64, shard) \
            if device_stats != "never" else None
        self._batch = _batch.StepBatch(h)
        self._in_norms = {}  # (layer, sublayer) -> STREAM_IN row norms, on their device
        # The last tensor observed on the device path and its partial:
        # (tensor, its _version, row0, partial, row norms, True). A pre-norm
        # block's stream is the previous sublayer's STREAM_OUT, this one's
        # STREAM_IN and its NORM_IN, observed one after the other (their
        # gradients too): read once. Holding the tensor keeps its memory from
        # being reused, so identity and version mean the same values. (The
        # C kernel path does the same in _kernel.KernelPath.)
        self._last = None
        self._kernel = _kernel.KernelPath(h) if _lib.HAS_PARTIALS else None
        self._param_index = {n: i for i, n in enumerate(pnames)}
        self._device_grads = []  # (batch index, parameter) of this step's device gradients
        self._pnames = {n: n.encode() for n in pnames + [HEAD_PARAM]}
        # The recorded parameters in the order their gradients are recorded:
        # (layer as the run numbers it, index among its names, name, tensor).
        self._param_entries = [(l + self._layer0, i, n, p) for l, ps in enumerate(self._params)
                               for i, (n, p) in enumerate(zip(pnames, ps))]
        self._param_entries += [(_lib.MODEL_LEVEL, 0, HEAD_PARAM, p) for p in self._model_params]
        self._hooked = None  # (tensor, [its sites]) of the last tensor hook registered

        self._backward = backward
        self._training_run = m.run_kind == 0  # RESDIAG_RUN_TRAINING: see _eval_forward
        self._eval_noted = False
        self._step_grad = True  # autograd was on when the step began: see _eval_forward
        self._in_step = False
        self._recording = False
        self._next_step = 0
        self.errors = 0
        self.first_error = None
        self._warned = set()
        self._thooks = []   # tensor hooks of the current step
        self._flipped = {}  # id(hooked module) -> the module whose training flag it set
        self._entered = [0] * self.n_layers   # sublayers whose stream_in was seen
        self._seen_sub = [False] * self.n_layers
        # Layers groups: the (sublayer, role) pre-hooks that ran in the
        # layer's current pass (a repeat begins the next pass).
        self._fired = [set() for _ in range(self.n_layers)]
        # branch_in and out_norm_in/out are sites of schema 3: a file of an
        # older schema has no place for them.
        self._new_sites = o.file_schema not in (1, 2)
        # Mapped modules that have not run in a recorded step yet: {path:
        # what it stands for}; checked when the first recorded step that ran
        # any of them ends (see _check_ran).
        self._unran = {}
        self._ran_hooks = []
        self.not_run = []

        self._hooks = []
        try:
            # Call sites: "<module path> <role>" for the report's "file:line".
            def cs(mod, role):
                return ("%s %s" % (names.get(id(mod), type(mod).__name__) or "model", role)).encode()
            self._cs = {}
            reg = self._hooks.append

            def mark(mod, what):
                path = names.get(id(mod)) or "model"
                if path not in self._unran:
                    self._unran[path] = what
                    self._ran_hooks.append(mod.register_forward_pre_hook(
                        functools.partial(self._ran, path)))
            for l, (b, subs) in enumerate(self._layers):
                if not self._grouped:  # a group is never called: no hooks of its own
                    self._cs[(l, "in")] = cs(b, "input")
                    self._cs[(l, "out")] = cs(b, "output")
                    reg(_pre_hook(b, functools.partial(self._block_in, l)))
                    reg(b.register_forward_hook(functools.partial(self._block_out, l)))
                for s, mods in enumerate(subs):
                    for role in _blocks.ROLES:
                        if role in mods:
                            mark(mods[role], "layer %d %s %s" % (l, sub_names[s], role))
                    # Registered in the order the hooks run: norm, branch_in,
                    # branch, out_norm (a module in two roles calls its
                    # hooks of one kind in this order).
                    if "norm" in mods:
                        self._cs[(l, s, "norm_in")] = cs(mods["norm"], "input")
                        self._cs[(l, s, "norm_out")] = cs(mods["norm"], "output")
                        reg(_pre_hook(mods["norm"], functools.partial(self._norm_in, l, s)))
                        reg(mods["norm"].register_forward_hook(functools.partial(self._norm_out, l, s)))
                    self._cs[(l, s, "branch_in")] = cs(mods["branch_in"], "input")
                    reg(_pre_hook(mods["branch_in"], functools.partial(self._branch_in, l, s)))
                    out_norm = mods.get("out_norm")
                    if out_norm is None:
                        self._cs[(l, s, "branch_out")] = cs(mods["branch"], "output")
                        reg(mods["branch"].register_forward_hook(
                            functools.partial(self._branch_out, l, s)))
                    else:
                        # What is added is the out_norm's output: branch_out
                        # comes from its hook, not from the branch's.
                        self._cs[(l, s, "branch_out")] = cs(out_norm, "output")
                        self._cs[(l, s, "out_norm_in")] = cs(out_norm, "input")
                        self._cs[(l, s, "out_norm_out")] = self._cs[(l, s, "branch_out")]
                        reg(_pre_hook(out_norm, functools.partial(self._out_norm_in, l, s)))
                        reg(out_norm.register_forward_hook(
                            functools.partial(self._out_norm_out, l, s)))
            if final_norm is not None:
                mark(final_norm, "final norm")
                self._cs["fn_in"] = cs(final_norm, "input")
                self._cs["fn_out"] = cs(final_norm, "output")
                reg(_pre_hook(final_norm, self._final_in))
                reg(final_norm.register_forward_hook(self._final_out))
            if head is not None:
                mark(head, "head")
                self._cs["head"] = cs(head, "output")
                reg(head.register_forward_hook(self._head_out))
                if final_norm is None:
                    # What reaches the head stands in for the final norm's
                    # output: equal to the last block's output, it shows
                    # from the data that there is no final norm.
                    self._cs["head_in"] = cs(head, "input")
                    reg(_pre_hook(head, self._head_in))
            self._cs["param"] = PARAM_CALLSITE
            self._cs["manual"] = b"Recorder.observe"
            # torch 1.13 runs TransformerEncoderLayer (and TransformerEncoder)
            # as one fused kernel in eval mode without grad, which no submodule
            # hook sees. While a step is recorded, the layer's own training flag
            # is set (its dropout modules keep theirs, so the math is the same)
            # to take the ordinary path.
            if disable_fast_path:
                enc_layers = {id(b) for b, _ in self._layers if isinstance(b, nn.TransformerEncoderLayer)}
                for b, _ in self._layers:
                    if id(b) in enc_layers:
                        reg(b.register_forward_pre_hook(functools.partial(self._fast_off, b, b)))
                        reg(b.register_forward_hook(functools.partial(self._fast_on, b)))
                for mod in model.modules():
                    if isinstance(mod, nn.TransformerEncoder) and len(mod.layers) and \
                            id(mod.layers[0]) in enc_layers:
                        reg(mod.register_forward_pre_hook(functools.partial(self._fast_off, mod,
                                                                            mod.layers[0])))
                        reg(mod.register_forward_hook(functools.partial(self._fast_on, mod)))
        except BaseException:
            # Leave the model as it was found.
            for hk in self._hooks + self._ran_hooks:
                hk.remove()
            self._finalizer()
            raise
        self._keep_alive = keep

    # ------------------------------------------------------------ steps
    def begin_step(self, step=None):
        """Begins training step `step` (default: one more than the last)."""
        if self._rd is None:
            raise ResdiagError("resdiag: the recorder was detached")
        if self._in_step:
            self.end_step()
        step = self._next_step if step is None else _lib.c_int(step, "step", 64)
        st = lib.resdiag_step_begin(self._rd, step)
        self._note(st)
        if st != _lib.OK:  # refused (e.g. a step number that does not increase): not in a step
            return
        self._next_step = step + 1
        self._in_step = True
        self._eval_noted = False
        self._step_grad = torch.is_grad_enabled()
        self._recording = bool(lib.resdiag_step_is_recorded(self._rd))

    def end_step(self, abort_reason=None):
        """Records the parameter gradients (.grad as it is now: call this after
        backward and before zero_grad) and ends the step; with abort_reason
        (a str: why) ends it as aborted instead (resdiag_step_abort): the
        hooks' records are written, flagged incomplete. When a declared alarm
        fires (attach(alarms=...)) the step is written and flushed first, then
        the alarms join ``rec.alarms``, on_alarm is called with each, and with
        raise_on_alarm=True (not for an aborted step) resdiag.AlarmError is
        raised."""
        if not self._in_step:
            return
        if self._recording:
            empty = []  # (parameter, "None" or "zero") of gradients that are not there
            self._record_params(empty)
            self._submit_kernel()  # before the device path's: the order they came in
            host = self._batch.submit(self._note)  # the step's one wait for its devices
            for i, p in self._device_grads:
                if host[i, _NAN] + host[i, _INF] == 0 and host[i, _ABSMAX] <= 0:
                    empty.append((p, "all zero"))
            if empty:
                self._warn_empty_grads(empty)
            if self._ran_hooks:
                self._check_ran()
        for h in self._thooks:
            h.remove()
        self._thooks = []
        self._batch.clear()
        self._in_norms = {}
        if self._kernel is not None:
            self._kernel.new_step()
        self._last = self._hooked = None
        self._device_grads = []
        self._restore_all()
        self._in_step = self._recording = False
        if abort_reason is None:
            st = lib.resdiag_step_end(self._rd)
        else:
            st = lib.resdiag_step_abort(self._rd, _abort_reason(abort_reason))
        if st != _lib.ALARM:
            self._note(st)
            return
        # The step is written and flushed; then the trainer hears of it.
        fired = _alarms.fired_since(self._rd, len(self.alarms))
        self.alarms += fired
        if self._on_alarm is not None:
            for a in fired:
                if abort_reason is None:
                    self._on_alarm(a)
                    continue
                try:  # an aborted step's exception is the one that matters
                    self._on_alarm(a)
                except Exception as e:  # noqa: BLE001 - see _fail
                    self._fail(e)
        if self._raise_on_alarm and fired and abort_reason is None:
            raise _lib.AlarmError("resdiag: alarm: " + "; ".join(map(_alarms.describe, fired)),
                                  fired)

    class _Step:
        __slots__ = ("rec",)

        def __init__(self, rec):
            self.rec = rec

        def __enter__(self):
            return self.rec

        def __exit__(self, exc_type, exc, tb):
            if exc_type is None:
                self.rec.end_step()
            else:
                self.rec._abort_step(exc_type, exc)
            return False  # the exception goes on

    def _abort_step(self, exc_type, exc):
        """Ends the step as aborted (resdiag_step_abort) for an exception
        that left ``with rec.step()``: what the hooks recorded is written,
        flagged incomplete; the parameter gradients are not read (the
        backward may not have run or finished). Never raises: the trainer's
        exception is the one that matters."""
        if not self._in_step:
            return
        try:
            if self._recording:
                self._submit_kernel()
                self._batch.submit(self._note)
        except Exception as e:  # noqa: BLE001 - see _fail
            self._fail(e)
        self._recording = False  # end_step: clean up, then resdiag_step_abort
        self.end_step(abort_reason="%s: %s" % (getattr(exc_type, "__name__", "exception"), exc))

    def _eval_forward(self):
        """True for a forward without autograd (torch.no_grad(),
        torch.inference_mode()) inside a step of a training run that began
        with autograd on: an evaluation pass, which the hooks leave out so
        that the step's statistics are those of its training forward;
        logged once a step. (A step begun under no_grad is a forward-only
        step: all of it is recorded.)"""
        if not self._training_run or not self._step_grad or torch.is_grad_enabled():
            return False
        if not self._eval_noted:
            self._eval_noted = True
            _log.info("resdiag: step %d: a forward without autograd (torch.no_grad or "
                      "inference_mode) inside a recorded training step was left out of the "
                      "step's statistics (an evaluation forward)", self._next_step - 1)
        return True

    def step(self, step=None):
        """``with rec.step(n): loss = ...; loss.backward()`` brackets one step.
        An exception that leaves the block ends the step as aborted
        (resdiag_step_abort, with the exception's type and message) and
        goes on."""
        self.begin_step(step)
        return Recorder._Step(self)

    def metric(self, name, value):
        """Gives the value of a declared metric (attach(metrics=...), default
        ("loss",)) for the current step, e.g. ``rec.metric("loss", loss)``:
        a float or a one-element tensor. Stored as given (NaN and Inf too) in
        a recorded step; nothing is recorded in other steps or outside a
        step. Raises ValueError for a name not declared."""
        if self._rd is None:
            raise ResdiagError("resdiag: the recorder was detached")
        if name not in self.metric_names:
            raise ValueError("resdiag: %r is not a declared metric (attach(metrics=...) "
                             "declares %s)" % (name, self.metric_names))
        if not self._recording:
            return False
        st = lib.resdiag_step_metric(self._rd, name.encode(), float(value))
        self._note(st)
        return st == _lib.OK

    @property
    def recording(self):
        """Whether the current step is recorded (work that only feeds the
        hooks can be skipped otherwise)."""
        return self._recording

    def observe(self, tensor, site, layer=0, sublayer=0, direction="forward"):
        """Observes a tensor by hand at a site (a name from resdiag.SITES),
        as the C hook macros do: for what no module hook sees. Model sites
        take layer=-1. Does nothing outside a recorded step; returns whether
        the library accepted it. Bad arguments raise in every step:
        ValueError for a layer or sublayer outside a C int, TypeError for a
        complex tensor, ValueError for a meta one."""
        from .reader import _dir, _site, _where  # the same rules as the reader
        _tensor.check(tensor)
        _, layer, sublayer = _where(None, layer, sublayer)
        direction, site = _dir(direction), _site(site)
        if not self._recording:
            return False
        if self._on_device(tensor):
            self._observe_device(direction, tensor, layer, sublayer, site,
                                 self._cs["manual"])
            return True
        if self._kernel is not None:
            self._submit_kernel()  # what waits goes first, in its order
            st = self._kernel.observe(direction, tensor, layer, sublayer, site,
                                      self._cs["manual"])
            failed = 0
            if st == _lib.OK:
                st, failed = self._kernel.submit()
            self._note(st, failed)
            return st == _lib.OK
        view, owner = _tensor.as_2d(tensor)
        st = lib.resdiag_observe_at(self._rd, direction, layer, sublayer, site,
                                    view, self._cs["manual"], 0)
        del owner
        self._note(st)
        return st == _lib.OK

    def set_enabled(self, enabled):
        """Pauses or resumes recording from the next step on."""
        if self._rd is not None:
            self._note(lib.resdiag_set_enabled(self._rd, int(bool(enabled))))

    def flush(self):
        if self._rd is not None:
            self._note(lib.resdiag_flush(self._rd))

    def detach(self):
        """Removes every hook, closes the run file and releases the model.
        Idempotent. Raises ResdiagError when the final write failed; warns
        when hooks failed during the run."""
        if self._in_step:
            self.end_step()
        for h in self._hooks + self._thooks + self._ran_hooks:
            h.remove()
        self._hooks, self._thooks, self._ran_hooks = [], [], []
        self._hooked = self._last = None
        if self._kernel is not None:
            self._kernel.new_step()
        self._restore_all()
        self._layers, self._params, self._model_params = [], [], []
        self._param_entries = []
        self._final_norm = self._head = None
        if self._rd is None:
            return
        rd, self._rd = self._rd, None
        st = lib.resdiag_close(rd)
        msg = (lib.resdiag_errmsg(rd) or b"").decode("utf-8", "replace")
        self._finalizer()  # resdiag_destroy, once
        if st != _lib.OK:
            raise ResdiagError("resdiag: closing %s: %s: %s" % (self.path, _lib.strerror(st), msg), st)
        if self.errors:
            warnings.warn("resdiag: %d calls failed, the first: %s" % (self.errors, self.first_error),
                          RuntimeWarning, stacklevel=2)

    close = detach

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.detach()
        return False

    # ------------------------------------------------------------ errors
    def _note(self, st, failed=1):
        """Counts failed calls (or entries of a submission): st is the
        first one's status."""
        if st == _lib.OK:
            return
        self.errors += max(1, failed)
        if self.first_error is None:
            msg = lib.resdiag_errmsg(self._rd).decode("utf-8", "replace") if self._rd else ""
            self.first_error = "%s: %s" % (_lib.strerror(st), msg)

    def _warn_once(self, key, msg):
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(msg, RuntimeWarning, stacklevel=3)

    def _fail(self, e):
        # A hook must never break the user's training step.
        self.errors += 1
        if self.first_error is None:
            self.first_error = "%s: %s" % (type(e).__name__, e)
        self._warn_once("exc", "resdiag: a hook failed (%s: %s); recording goes on without it"
                        % (type(e).__name__, e))

    # ------------------------------------------------------------ observing
    def _on_device(self, t):
        """Whether t goes the device path: device_stats "always", or "auto"
        and t is not on the CPU, or partials of this step already wait (so
        that the library sees the step's tensors in their order)."""
        mode = self.device_stats
        if mode == "auto":
            return not t.is_cpu or bool(self._batch.partials)
        return mode == "always"

    def _observe_device(self, direction, t, layer, sub, site, cs):
        """Queues the partial of t at the site, computed on t's device
        (once for consecutive sites of one tensor: see _last)."""
        x = _device.as_rows(t)
        row0 = self._batch.row0((direction, layer, sub, site), x.shape[0])
        pair = direction == _lib.FORWARD and site == S_BRANCH_OUT and layer >= 0
        last = self._last
        if not pair and last is not None and last[0] is t and last[1] == t._version \
                and last[2] == row0 and last[5]:
            p, norms = last[3], last[4]
        else:
            ratio_in = self._in_norms.pop((layer, sub), None) if pair else None
            p, norms = self._partials.compute(x, row0, True, ratio_in, pair)
            self._last = (t, t._version, row0, p, norms, True)
        if direction == _lib.FORWARD and site == S_STREAM_IN and layer >= 0:
            self._in_norms[(layer, sub)] = norms
        self._batch.add((direction, layer, sub, site, -1, 0), cs, p)

    def _observe(self, t, layer, sub, site, cs):
        if t is None or not t.is_floating_point() or self._eval_forward():
            return
        if layer >= 0:
            layer += self._layer0
        try:
            kernel = self._kernel
            if kernel is not None and self.device_stats != "always" and \
                    (self.device_stats == "never" or (t.is_cpu and not self._batch.partials)):
                st = kernel.observe(_lib.FORWARD, t, layer, sub, site, cs)  # not _on_device(t)
                if st:
                    self._note(st)
            elif self._on_device(t):
                self._observe_device(_lib.FORWARD, t, layer, sub, site, cs)
            else:
                view, owner = _tensor.as_2d(t)
                self._note(lib.resdiag_observe_at(self._rd, _lib.FORWARD, layer, sub, site,
                                                  view, cs, 0))
                del owner
            if self._backward and t.requires_grad and torch.is_grad_enabled():
                # One tensor hook for consecutive sites of one tensor: its
                # gradient comes once, for all of them, in their order.
                hooked = self._hooked
                if hooked is not None and hooked[0] is t:
                    hooked[1].append((layer, sub, site, cs))
                else:
                    sites = [(layer, sub, site, cs)]
                    self._hooked = (t, sites)
                    self._thooks.append(t.register_hook(functools.partial(self._grads, sites)))
        except Exception as e:  # noqa: BLE001 - see _fail
            self._fail(e)

    def _grads(self, sites, g):
        """The tensor hook: g at the sites of its tensor."""
        if not self._recording or g is None:
            return None
        kernel = self._kernel
        if kernel is not None and self.device_stats != "always" and \
                (self.device_stats == "never" or (g.is_cpu and not self._batch.partials)):
            try:
                st = kernel.observe_sites(_lib.BACKWARD, g, sites)  # not _on_device(g)
                if st:
                    self._note(st)
            except Exception as e:  # noqa: BLE001 - see _fail
                self._fail(e)
            return None
        for layer, sub, site, cs in sites:
            self._grad(layer, sub, site, cs, g)
        return None

    def _grad(self, layer, sub, site, cs, g):
        if not self._recording or g is None:
            return None
        try:
            if self._on_device(g):
                self._observe_device(_lib.BACKWARD, g, layer, sub, site, cs)
                return None
            if self._kernel is not None:
                st = self._kernel.observe(_lib.BACKWARD, g, layer, sub, site, cs)
                if st:
                    self._note(st)
                return None
            view, owner = _tensor.as_2d(g)
            self._note(lib.resdiag_observe_at(self._rd, _lib.BACKWARD, layer, sub, site, view, cs, 0))
        except Exception as e:  # noqa: BLE001
            self._fail(e)
        return None

    def _record_params(self, empty):
        """The step's parameter gradients (.grad as it is now), in order:
        queued on the C kernel path (submitted with the step's sites), or
        on the device path, or recorded at once by a library without
        partials."""
        kernel = self._kernel
        for layer, index, name, p in self._param_entries:
            g = p.grad
            if g is None:
                empty.append((p, "None"))
                continue
            try:
                if kernel is not None and not self._on_device(g):
                    st, zero = kernel.param(layer, index, g, PARAM_CALLSITE)
                    if zero:
                        empty.append((p, "all zero"))
                    if st:
                        self._note(st)
                else:
                    self._param(layer, index, name, p, g, empty)
            except Exception as e:  # noqa: BLE001 - see _fail
                self._fail(e)

    def _submit_kernel(self):
        """Submits the sites that wait on the C kernel path."""
        if self._kernel is not None:
            st, failed = self._kernel.submit()
            if st:
                self._note(st, failed)

    def _param(self, layer, index, name, p, g, empty):
        """A gradient on the device path, or through a library without
        partials."""
        if self._on_device(g):
            # all zero or not: told by the partial once it is on the host
            part, _ = self._partials.compute(_device.as_rows(g), 0, False)
            self._device_grads.append((len(self._batch), p))
            self._batch.add((_lib.FORWARD, layer, 0, -1, index, 0), self._cs["param"], part)
            return
        view, owner = _tensor.as_2d(g)
        if not bool(g.any()):
            empty.append((p, "all zero"))
        self._note(lib.resdiag_param_grad_at(self._rd, layer, self._pnames[name], view,
                                             self._cs["param"], 0))

    def _warn_empty_grads(self, empty):
        p, how = empty[0]
        msg = ("resdiag: step %d: the gradient of %s is %s when the step ends%s; "
               "were the gradients zeroed inside rec.step() (opt.zero_grad() before the "
               "step's end)? End the step after backward() and before zero_grad(); the "
               "report shows these parameter gradients as zero or not available"
               % (self._next_step - 1, self._param_paths.get(id(p), "a parameter"), how,
                  " (and %d more)" % (len(empty) - 1) if len(empty) > 1 else ""))
        self._warn_once("grads", msg)

    def _ran(self, path, module, args):
        if self._recording:
            self._unran.pop(path, None)

    def _check_ran(self):
        """At the end of the first recorded step that ran any mapped module:
        those that did not run never gave their sites (e.g. minGPT's
        Block.mlp, a ModuleDict its forward never calls)."""
        total = len(self._ran_hooks)
        if len(self._unran) == total:
            return  # nothing ran in this step: ask again at the next one
        for h in self._ran_hooks:
            h.remove()
        self._ran_hooks = []
        self.not_run = sorted(self._unran)
        if self.not_run:
            msg = ("resdiag: mapped modules that did not run in step %d, so their sites were "
                   "not recorded and the report cannot tell those sublayers: %s. Map the "
                   "modules that run (block=resdiag.Block(...), doc/PYTHON.md)"
                   % (self._next_step - 1, "; ".join("%s (%s)" % (p, self._unran[p])
                                                     for p in self.not_run)))
            self._warn_once("not_run", msg)
        self._unran = {}

    # Module hooks: (module, args) for pre-hooks, (module, args, output) after.
    def _block_in(self, l, module, args):
        if not self._recording:
            return
        self._entered[l] = 1
        self._seen_sub[l] = False
        x = _first_tensor(args)
        cs = self._cs[(l, "in")]
        if self._parallel:
            for s in range(len(self.sublayer_names)):
                self._observe(x, l, s, S_STREAM_IN, cs)
        else:
            self._observe(x, l, 0, S_STREAM_IN, cs)
        if l + self._layer0 == 0:  # a later pipeline stage's input is no embedding
            self._observe(x, _lib.MODEL_LEVEL, 0, S_EMBED_OUT, cs)

    def _block_out(self, l, module, args, output):
        if not self._recording:
            return
        self._observe(_first_tensor(output), l, len(self.sublayer_names) - 1, S_STREAM_OUT,
                      self._cs[(l, "out")])
        if not self._seen_sub[l]:
            self._warn_once(("bypass", l), "resdiag: block %d ran without calling its submodules "
                            "(a fused path?); only its input and output were recorded" % l)

    def _sub_entry(self, l, s, x, cs, role):
        """Records x as the stream between sublayers s-1 and s, the first
        time a pre-hook (of `role`) of sublayer s >= 1 sees it; in a
        Layers group also the stream entering the layer (s = 0). True
        when it did."""
        self._seen_sub[l] = True
        if self._grouped:
            return self._group_entry(l, s, x, cs, role)
        if s == 0 or self._parallel or self._entered[l] & (1 << s):
            return False
        self._entered[l] |= 1 << s
        self._observe(x, l, s - 1, S_STREAM_OUT, cs)
        self._observe(x, l, s, S_STREAM_IN, cs)
        return True

    def _group_entry(self, l, s, x, cs, role):
        """_sub_entry in a Layers group, where no hook marks where a layer
        begins: a pre-hook of sublayer 0 begins the layer's next pass (the
        next forward) once the pass went past sublayer 0 or when it ran in
        it already; the stream entering the layer is also the previous
        layer's output (and the embedding's, for layer 0)."""
        fired = self._fired[l]
        if s == 0 and ((0, role) in fired or self._entered[l] & ~1):
            fired.clear()
            self._entered[l] = 0
        fired.add((s, role))
        if self._entered[l] & (1 << s):
            return False
        self._entered[l] |= 1 << s
        if s > 0:
            self._observe(x, l, s - 1, S_STREAM_OUT, cs)
        elif l > 0:
            self._observe(x, l - 1, len(self.sublayer_names) - 1, S_STREAM_OUT, cs)
        self._observe(x, l, s, S_STREAM_IN, cs)
        if s == 0 and l + self._layer0 == 0:
            self._observe(x, _lib.MODEL_LEVEL, 0, S_EMBED_OUT, cs)
        return True

    def _last_layer_out(self, x, cs):
        """The last group's output, in a Layers mapping: what the final
        norm (or the head) reads."""
        if self._grouped and self.n_layers:
            self._observe(x, self.n_layers - 1, len(self.sublayer_names) - 1, S_STREAM_OUT, cs)

    def _norm_in(self, l, s, module, args):
        if not self._recording:
            return
        x = _first_tensor(args)
        entered = self._sub_entry(l, s, x, self._cs[(l, s, "norm_in")], "norm")
        self._observe(x, l, s, S_NORM_IN, self._cs[(l, s, "norm_in")])
        if entered:
            # stream_in of this sublayer was taken from the norm's input: the
            # relation norm_in = stream_in holds by construction, no evidence.
            self._alias(l, s, S_STREAM_IN, S_NORM_IN, x)

    def _alias(self, l, s, site, same_as, t):
        """Declares that the binding took one tensor for two sites of the
        sublayer (not that the model passed one tensor to two hooks: that
        is evidence)."""
        if t is None or not t.is_floating_point():
            return  # nothing was observed at either site
        if self._eval_forward():
            return
        l += self._layer0
        try:
            self._note(lib.resdiag_observe_alias(self._rd, _lib.FORWARD, l, s, site, same_as))
            if self._backward and t.requires_grad and torch.is_grad_enabled():
                self._note(lib.resdiag_observe_alias(self._rd, _lib.BACKWARD, l, s, site,
                                                     same_as))
        except Exception as e:  # noqa: BLE001 - see _fail
            self._fail(e)

    def _norm_out(self, l, s, module, args, output):
        if self._recording:
            self._observe(_first_tensor(output), l, s, S_NORM_OUT, self._cs[(l, s, "norm_out")])

    def _branch_in(self, l, s, module, args):
        if not self._recording:
            return
        x = _first_tensor(args)
        cs = self._cs[(l, s, "branch_in")]
        entered = self._sub_entry(l, s, x, cs, "branch_in")
        if self._new_sites:
            self._observe(x, l, s, S_BRANCH_IN, cs)
            if entered:
                # stream_in was taken from what the branch reads (post-norm,
                # reordered, no norm): branch_in = stream_in by construction.
                self._alias(l, s, S_STREAM_IN, S_BRANCH_IN, x)

    def _branch_out(self, l, s, module, args, output):
        if self._recording:
            self._seen_sub[l] = True
            self._observe(_first_tensor(output), l, s, S_BRANCH_OUT, self._cs[(l, s, "branch_out")])

    def _out_norm_in(self, l, s, module, args):
        if self._recording:
            self._seen_sub[l] = True
            if self._new_sites:
                self._observe(_first_tensor(args), l, s, S_OUT_NORM_IN,
                              self._cs[(l, s, "out_norm_in")])

    def _out_norm_out(self, l, s, module, args, output):
        if not self._recording:
            return
        self._seen_sub[l] = True
        y = _first_tensor(output)
        if self._new_sites:
            self._observe(y, l, s, S_OUT_NORM_OUT, self._cs[(l, s, "out_norm_out")])
        self._observe(y, l, s, S_BRANCH_OUT, self._cs[(l, s, "branch_out")])
        if self._new_sites:
            # branch_out is taken from the out_norm's output: one tensor
            self._alias(l, s, S_BRANCH_OUT, S_OUT_NORM_OUT, y)

    def _final_in(self, module, args):
        if self._recording:
            x = _first_tensor(args)
            self._last_layer_out(x, self._cs["fn_in"])
            self._observe(x, _lib.MODEL_LEVEL, 0, S_FINAL_NORM_IN, self._cs["fn_in"])

    def _final_out(self, module, args, output):
        if self._recording:
            self._observe(_first_tensor(output), _lib.MODEL_LEVEL, 0, S_FINAL_NORM_OUT,
                          self._cs["fn_out"])

    def _head_in(self, module, args):
        if self._recording:
            x = _first_tensor(args)
            self._last_layer_out(x, self._cs["head_in"])
            self._observe(x, _lib.MODEL_LEVEL, 0, S_FINAL_NORM_OUT, self._cs["head_in"])

    def _head_out(self, module, args, output):
        if self._recording:
            self._observe(_first_tensor(output), _lib.MODEL_LEVEL, 0, S_LOGITS, self._cs["head"])

    # ------------------------------------------------------------ fast path
    def _fast_off(self, key, target, module, args):
        if self._recording and not target.training and id(key) not in self._flipped:
            self._flipped[id(key)] = target
            target.training = True

    def _fast_on(self, key, module, args, output):
        target = self._flipped.pop(id(key), None)
        if target is not None:
            target.training = False

    def _restore_all(self):
        # After an exception inside forward the post-hooks did not run.
        for target in self._flipped.values():
            target.training = False
        self._flipped = {}


def _abort_reason(text):
    """text (e.g. an exception's "Type: message") as resdiag_step_abort
    takes it: UTF-8, control characters other than newline and tab as '?'
    (the library cuts it to RESDIAG_MAX_ABORT_REASON - 1 bytes)."""
    text = "".join(c if c in "\n\t" or not (ord(c) < 32 or 127 <= ord(c) < 160) else "?"
                   for c in text[:_lib.MAX_ABORT_REASON])
    return text.encode("utf-8", "replace")


def _sketch_layout(rd, col0, n_cols, row0, n_rows):
    """resdiag_sketch_layout of run rd as lists (bucket, col_sign, row_sign)."""
    bucket = (ctypes.c_int32 * max(1, n_cols))()
    col_sign = (ctypes.c_float * max(1, n_cols))()
    row_sign = (ctypes.c_float * max(1, n_rows))()
    st = lib.resdiag_sketch_layout(rd, col0, n_cols, bucket, col_sign, row0, n_rows, row_sign)
    if st != _lib.OK:
        raise ResdiagError("resdiag: resdiag_sketch_layout: %s" % _lib.strerror(st), st)
    return bucket[:n_cols], col_sign[:n_cols], row_sign[:n_rows]


def attach(model, path, **kw):
    """Registers resdiag's hooks on `model` and opens the run file `path`.

    Blocks are found by class (nn.TransformerEncoderLayer,
    nn.TransformerDecoderLayer) or shape (a GPT-2-style block with ln_1,
    attn, ln_2, mlp), or given: ``blocks=[...]`` (in layer order) and
    ``block=resdiag.Block([...])`` to name the norm, the branch and the
    parameters of any other block, or ``layers=resdiag.Layers(...)`` for
    a container with one entry per sublayer (x-transformers). Keywords: final_norm, head (module or
    dotted name), placement (declared; default undeclared: the verdict
    comes from the data either way), norm_kind, d_model, backward
    (default True), record_every, record_first, record_last,
    record_init_only, sketch_size, flush_steps, description, meta (dict),
    disable_fast_path (default True), overwrite (default False: path must
    not exist; True: an earlier resdiag run file there is replaced).
    Jobs of several processes (doc/RANKS.md): rank, world_size (default:
    from torchrun, Open MPI, PMI or Slurm), split ('data', 'sequence',
    'tensor', 'pipeline'), shard_cols and shard_col_offset (tensor),
    layer_first, layer_count and n_layers (pipeline: the blocks are this
    stage's, n_layers the whole model's), record_rank_every (default 1).
    device_stats ("auto": tensors not on the CPU are reduced on their
    device, "always", "never"; default $RESDIAG_DEVICE_STATS or "auto"),
    device_float64 (CUDA row sums in float64). The file's layout
    (resdiag_options.file_schema, .compression): file_schema 0 = the newest
    (2: float32 statistics), 1 = every value a float64; compression 0..9
    (schema 2; default 1). Alarms, checked as each step ends
    (doc/INSTRUMENTING.md, "Alarms"): alarms={"nonfinite": True,
    "update_ratio": B, "growth": B, "grad_norm": B}, on_alarm (called with
    each resdiag.Alarm), raise_on_alarm (raise resdiag.AlarmError once the
    step is written); rec.alarms lists those fired.
    See doc/PYTHON.md.
    """
    return Recorder(model, path, **kw)
