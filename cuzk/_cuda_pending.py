"""Results of enqueued GPU reductions that the host finishes after the kernel region.

A GPU stage enqueues its kernels on a worker's stream and copies a few partial sums (XYZZ
points) into a slice of pinned host memory; nothing waits.  After the region's one host
synchronization, ``PendingPoint.value()`` combines the partials on the CPU (a latency chain of a
few hundred point operations: one CPU core runs it faster than one GPU thread) and returns the
affine point in the CPU's layout.
"""
from __future__ import annotations

import numpy as np

__all__ = ["PendingPoint", "ReadyPoint", "XYZZ_WORDS", "AFFINE_WORDS"]

# uint64 words per point: XYZZ (X, Y, ZZ, ZZZ) and affine (x, y); Fq = 6 words, Fq2 = 12.
XYZZ_WORDS = {"g1": 24, "g2": 48}
AFFINE_WORDS = {"g1": 12, "g2": 24}


class PendingPoint:
    """Σ_w 2^(w·c) Σ_p host[w·P + p] once the stream that fills ``host`` has completed.

    Parameters
    ----------
    host : numpy.ndarray
        uint64 (W·P, XYZZ_WORDS[group]) view into pinned memory, written by a device-to-host
        copy enqueued on the worker's stream.
    group : {"g1", "g2"}
    W, P, c : int
        Windows, partial sums per window and window width (W = 1: a plain sum of P partials).
    """

    __slots__ = ("host", "group", "W", "P", "c", "_value")

    def __init__(self, host, group, W=1, P=None, c=0):
        rows = XYZZ_WORDS[group]
        if host.dtype != np.uint64 or host.ndim != 2 or host.shape[1] != rows:
            raise ValueError(f"host must be uint64 (k, {rows}) for {group}")
        self.host, self.group, self.W, self.c = host, group, int(W), int(c)
        self.P = int(P) if P is not None else host.shape[0] // self.W
        if self.W * self.P != host.shape[0]:
            raise ValueError(f"host holds {host.shape[0]} partials, expected W·P = {self.W * self.P}")
        self._value = None

    def value(self):
        """The affine Montgomery point uint64 (12,) / (24,) (all-zero = infinity).  Call only after
        the stream that fills ``host`` has been synchronized."""
        if self._value is None:
            from ._native import _field
            fn = _field.g1_xyzz_horner if self.group == "g1" else _field.g2_xyzz_horner
            self._value = fn(np.ascontiguousarray(self.host), self.W, self.P, self.c)
        return self._value


class ReadyPoint:
    """A point already known on the host (an empty MSM, a CPU-computed stage), with the
    ``PendingPoint`` interface."""

    __slots__ = ("_value",)

    def __init__(self, value):
        self._value = value

    def value(self):
        return self._value
