"""alarms.py - the trainer's alarms (doc/INSTRUMENTING.md, "Alarms"):
attach(alarms=...) into resdiag_options' alarm fields, and the alarms a
step fired, read back from the library (resdiag_alarm_get) as Alarm
tuples. The library checks them at resdiag_step_end; nothing here runs in
a hook."""
import collections
import ctypes
import math

from . import _lib
from ._lib import lib

# One fired alarm. kind: "nonfinite", "update_ratio", "growth" or
# "grad_norm"; direction "forward" / "backward"; layer -1 and sublayer -1
# for a model site or a parameter; site a site name (None for a parameter
# gradient), param a parameter's name (else None); ref_layer the growth's
# lower layer (else -1); value the NaN + Inf elements (nonfinite) or the
# ratio, growth or norm; bound the declared bound (nonfinite: 0).
Alarm = collections.namedtuple(
    "Alarm", "kind step rank direction layer sublayer site param ref_layer value bound")

_SITE_NAMES = {v: k for k, v in _lib.SITES.items()}
_BOUNDS = {"update_ratio": "alarm_update_ratio", "growth": "alarm_growth",
           "grad_norm": "alarm_grad_norm"}


def declare(options, alarms):
    """Sets the alarm fields of a resdiag_options from attach's alarms=: a
    dict of nonfinite (bool) and update_ratio, growth, grad_norm (bounds
    > 0, or None for off). A bad key or value is a ValueError / TypeError
    naming it."""
    if alarms is None:
        return
    if not isinstance(alarms, dict):
        raise TypeError("resdiag.attach: alarms= takes a dict such as "
                        "{'nonfinite': True, 'update_ratio': 2.0}, not %s" % type(alarms).__name__)
    for key, value in alarms.items():
        if key == "nonfinite":
            if not isinstance(value, bool):
                raise TypeError("resdiag.attach: alarms['nonfinite'] is True or False, not %r"
                                % (value,))
            options.alarm_nonfinite = int(value)
        elif key in _BOUNDS:
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError("resdiag.attach: alarms[%r] is a number or None, not %r"
                                % (key, value))
            if not math.isfinite(value) or value <= 0:
                raise ValueError("resdiag.attach: alarms[%r] = %r: a bound above 0 "
                                 "(None turns it off)" % (key, value))
            setattr(options, _BOUNDS[key], float(value))
        else:
            raise ValueError("resdiag.attach: alarms has no %r; its keys are %s"
                             % (key, ", ".join(("nonfinite",) + tuple(_BOUNDS))))


def fired_since(handle, seen):
    """The alarms of the run after the first `seen`, in the order they fired."""
    out = []
    a = _lib.AlarmStruct()
    for i in range(seen, lib.resdiag_alarm_count(handle)):
        if lib.resdiag_alarm_get(handle, i, ctypes.byref(a)) != _lib.OK:
            break
        out.append(Alarm(kind=_lib.ALARM_KINDS[a.kind] if 0 <= a.kind < len(_lib.ALARM_KINDS)
                         else str(a.kind),
                         step=a.step, rank=a.rank,
                         direction="backward" if a.direction == _lib.BACKWARD else "forward",
                         layer=a.layer, sublayer=a.sublayer,
                         site=_SITE_NAMES.get(a.site) if a.site >= 0 else None,
                         param=a.param.decode("utf-8", "replace") if a.param else None,
                         ref_layer=a.ref_layer, value=a.value, bound=a.bound))
    return out


def describe(alarm):
    """One line for an alarm, as AlarmError's message says it."""
    where = alarm.param or alarm.site or "?"
    if alarm.layer >= 0:
        where = "layer %d %s" % (alarm.layer, where)
    if alarm.kind == "nonfinite":
        return "step %d: a non-finite value at %s (%s, %g NaN/Inf elements)" % (
            alarm.step, where, alarm.direction, alarm.value)
    return "step %d: %s %g above the bound %g at %s" % (
        alarm.step, alarm.kind, alarm.value, alarm.bound, where)
