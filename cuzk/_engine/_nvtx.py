"""NVTX ranges for nsys: one per stage and per lock hold.

Uses the ``nvtx`` package when it is installed; without it every range is a no-op and one
log line (logger ``cuzk.engine``) says so, once per process.
"""
import contextlib
import logging
import threading

__all__ = ["available", "nvtx_range", "push", "pop"]

_log = logging.getLogger("cuzk.engine")
_said = False
_said_lock = threading.Lock()
_NULL = contextlib.nullcontext()

try:
    import nvtx as _nvtx
except ImportError:                      # the GPU host lacks it: ranges are off
    _nvtx = None

#: Colours (ARGB names nvtx accepts) per stage / lock.
COLOURS = {"prepare": "blue", "upload": "purple", "run": "red", "sync": "orange", "finish": "green",
           "compute": "purple", "memory": "brown", "device": "grey"}


def available():
    """Whether NVTX ranges are emitted; the first call without ``nvtx`` logs that once."""
    global _said
    if _nvtx is None:
        with _said_lock:
            if not _said:
                _said = True
                _log.info("cuzk engine: the nvtx package is not installed; NVTX ranges are off")
        return False
    return True


def nvtx_range(name, colour=None):
    """A context manager emitting one NVTX range (no-op without ``nvtx``)."""
    if _nvtx is None:
        return _NULL
    return _nvtx.annotate(message=name, color=colour or COLOURS.get(name.split()[-1], "white"),
                          domain="cuzk")


def push(name, colour=None):
    """Open a range that :func:`pop` closes on the same thread (lock holds span steps)."""
    if _nvtx is not None:
        _nvtx.push_range(message=name, color=colour or COLOURS.get(name.split()[-1], "white"),
                         domain="cuzk")


def pop():
    if _nvtx is not None:
        _nvtx.pop_range(domain="cuzk")
