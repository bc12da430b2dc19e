"""Public primitives on canonical bytes: multi-scalar multiplication and NTT over BLS12-381.

These take and return the external encodings (zcash point bytes, little-endian canonical
scalars) and convert at the boundary to the in-memory Montgomery layout the native
stages work on. Both run with the GIL released.
"""
from __future__ import annotations

import numpy as np

from ._args import threads_arg
from ._errors import BackendUnavailable
from ._native import _field

__all__ = ["msm", "ntt"]

_GROUP_WIDTH = {"g1": 96, "g2": 192}


def _u8_rows(a, width, name):
    if not isinstance(a, np.ndarray):
        raise ValueError(f"{name} must be a NumPy uint8 array of shape (n, {width}), got {type(a).__name__}")
    if a.dtype != np.uint8 or a.ndim != 2 or a.shape[1] != width:
        raise ValueError(f"{name} must be uint8 of shape (n, {width}), got {a.dtype} {a.shape}")
    return a


def _native_msm():
    """The Pippenger MSM of cuzk._native._msm, or None while that module is not built."""
    try:
        from ._native import _msm
    except ImportError:
        return None
    return getattr(_msm, "msm", None)


def _native_ntt():
    try:
        from ._native import _ntt
    except ImportError:
        return None
    return getattr(_ntt, "ntt_mont", None)


def msm(points: np.ndarray, scalars: np.ndarray, group: str = "g1",
        threads: int | None = None) -> bytes:
    """Multi-scalar multiplication Σ sᵢ·Pᵢ over G1 or G2.

    Parameters
    ----------
    points : numpy.ndarray
        uint8 of shape (n, 96) for G1 or (n, 192) for G2: uncompressed zcash encodings
        (x‖y big-endian; G2 coordinates c1‖c0; infinity = 0x40 then zeros). Points are
        checked to lie on the curve, not checked for subgroup membership.
    scalars : numpy.ndarray
        uint8 of shape (n, 32): little-endian canonical integers, each < r.
    group : {"g1", "g2"}
    threads : int or None
        Worker threads (None or 0: all hardware threads).

    Returns
    -------
    bytes
        The compressed encoding of the sum (48 bytes for G1, 96 for G2).

    Raises
    ------
    ValueError
        Bad group, dtype or shape; a point not validly encoded or not on the curve, or a
        scalar >= r (the message names the first bad index).
    """
    if group not in _GROUP_WIDTH:
        raise ValueError(f"group must be 'g1' or 'g2', got {group!r}")
    t = threads_arg(threads)
    _u8_rows(points, _GROUP_WIDTH[group], "points")
    _u8_rows(scalars, 32, "scalars")
    if points.shape[0] != scalars.shape[0]:
        raise ValueError(f"points and scalars differ in length: {points.shape[0]} != {scalars.shape[0]}")
    pts = _field.decode_points(points, group, subgroup=False, threads=threads, name="points")
    ks = _field.canonical_limbs(scalars, "fr", threads=threads, name="scalars")
    native = _native_msm() if len(pts) > 2 else None
    if native is not None:
        acc = native(pts, ks, group, t)
    else:
        acc = _field.msm_simple(pts, ks, group, threads=threads)
    return _field.encode_points(np.asarray(acc, dtype=np.uint64).reshape(1, -1), group,
                                compressed=True)[0].tobytes()


def ntt(values: np.ndarray, inverse: bool = False, coset: bool = False, *,
        threads: int | None = None) -> np.ndarray:
    """Number-theoretic transform over Fr.

    Forward: evaluations at ω^i, i < n, with ω = 7^((r-1)/n) the n-th root of unity from
    the multiplicative generator 7 (the bellperson/arkworks convention). ``coset``:
    evaluations at 7·ω^i instead. ``inverse`` undoes the matching forward transform.

    Parameters
    ----------
    values : numpy.ndarray
        uint8 of shape (n, 32), little-endian canonical elements of Fr; n a power of two.
    inverse, coset : bool
    threads : int or None
        Worker threads (None or 0: all hardware threads).

    Returns
    -------
    numpy.ndarray
        uint8 of shape (n, 32), canonical little-endian (a new array).

    Raises
    ------
    ValueError
        Bad dtype or shape, n not a power of two, or a value >= r (naming the first bad index).
    BackendUnavailable
        The native NTT module is not built.
    """
    t = threads_arg(threads)
    _u8_rows(values, 32, "values")
    n = values.shape[0]
    if n == 0 or n & (n - 1):
        raise ValueError(f"the number of values must be a power of two, got {n}")
    mont = _field.to_mont(values, "fr", threads=threads, name="values")
    if n > 1:  # size 1 is the identity in every direction
        native = _native_ntt()
        if native is None:
            raise BackendUnavailable("cpu", "cuzk._native._ntt is not built")
        native(mont, bool(inverse), bool(coset), t)
    return _field.from_mont(mont, "fr", threads=threads).view(np.uint8).reshape(n, 32)
