"""G1 multi-scalar multiplication on a CUDA device (bucket method; kernels in
``cuzk/cu/msm/msm.cu``, program "msm").

``msm_g1(points, scalars)`` takes the CPU's layouts — affine Montgomery points uint64 (n, 12)
(all-zero rows = infinity) and canonical scalars uint64 (n, 4), < 2^255 — and returns the
affine Montgomery sum uint64 (12,), the same bytes as ``cuzk._native._msm.msm(points,
scalars, "g1")``.

Steps (one stream, stream-ordered pool memory, one synchronization at the end): upload;
count the bucket sizes of every c-bit window (c from the size, ``window_bits``); their
exclusive prefix sum (one block); a counting sort of point indices by bucket; one thread per
bucket sums its points in XYZZ coordinates; P blocks per window reduce Σ d·B_d; the host
sums the W·P partial window sums by Horner's rule in C (``_field.g1_xyzz_horner``: 255
doublings are a latency chain one CPU core runs faster than one GPU thread) and converts to
affine.  A first GPU MSM: unsigned digits, no precomputation, the SRS is uploaded per call.
"""

import logging
import os
import threading
import time

import numpy as np

from . import _kernels
from ._cuda_state import DeviceState, state_for
from ._native import _field

__all__ = ["msm_g1", "msm_g1_indexed", "window_bits"]

_XYZZ_BYTES = 4 * 48

_kernels.register("msm", "msm/msm.cu")
log = logging.getLogger("cuzk.msm")
# CUZK_MSM_PROFILE=1: synchronize after every step and log the step times (development).
_PROFILE = os.environ.get("CUZK_MSM_PROFILE", "0") not in ("", "0")


def window_bits(n):
    """Window width c for n points.  A bucket is summed by one thread, so every window must
    spread the points evenly: only widths whose top window (bits c·(W−1) .. 254) is (nearly)
    full are used — 5 (255 = 51·5), 8 (top window 7 bits), 15 (255 = 17·15), 16 (top 15 bits).
    A 3-bit top window (c = 12 or 14) put n/8 points into each of its buckets: 144 ms of one
    thread's additions at n = 2^16 (bench/RESULTS.md)."""
    if n < 1 << 9:
        return 5
    if n < 1 << 16:
        return 8
    return 15 if n < 1 << 20 else 16


def _window_split(c):
    """(blocks per window P, threads per block) for cuzk_msm_windows."""
    segs = min(256, 1 << max(0, c - 2))
    parts = max(1, min(8, (1 << c) // (segs * 4)))
    return parts, segs


def _driver():
    from ._native import _driver as d
    return d


_states = {}
_states_lock = threading.Lock()


def _state(device):
    return state_for(_states, _states_lock, _driver(), device,
                     lambda dev: DeviceState(_driver(), dev, "msm"))


def _check_points(points):
    if not isinstance(points, np.ndarray) or points.dtype != np.uint64 or points.ndim != 2 \
            or points.shape[1] != 12:
        raise ValueError("points must be a uint64 array of shape (n, 12)")
    if points.shape[0] >= 1 << 32:
        raise ValueError("at most 2^32 - 1 points")
    return np.ascontiguousarray(points)


def _check_scalars(scalars):
    if not isinstance(scalars, np.ndarray) or scalars.dtype != np.uint64 or scalars.ndim != 2 \
            or scalars.shape[1] != 4:
        raise ValueError("scalars must be a uint64 array of shape (n, 4)")
    if scalars.shape[0] >= 1 << 32:
        raise ValueError("at most 2^32 - 1 scalars")
    big = np.flatnonzero(scalars[:, 3] >> np.uint64(63))
    if big.size:
        raise ValueError(f"scalars[{int(big[0])}] >= 2^255")
    return np.ascontiguousarray(scalars)


def _check(points, scalars):
    points, scalars = _check_points(points), _check_scalars(scalars)
    if points.shape[0] != scalars.shape[0]:
        raise ValueError(f"points and scalars differ in length: {points.shape[0]} vs {scalars.shape[0]}")
    return points, scalars


def msm_g1(points, scalars, device=None, stream=None, c=None):
    """Σ scalars[i]·points[i] over G1 on the GPU.

    Parameters
    ----------
    points : numpy.ndarray
        uint64 (n, 12): affine Montgomery G1 points (all-zero rows: infinity), the CPU layout.
    scalars : numpy.ndarray
        uint64 (n, 4): canonical scalars, each < 2^255.
    device : Device, int or None
    stream : Stream or None
        None: a stream private to the calling thread.  The call returns the result.
    c : int or None
        Window width in bits (4..16); None: ``window_bits(n)`` (other widths are slower for
        uniform scalars: see there).

    Returns
    -------
    numpy.ndarray
        uint64 (12,): the affine Montgomery sum (all-zero = infinity), the bytes of
        ``cuzk._native._msm.msm(points, scalars, "g1")``.
    """
    points, scalars = _check(points, scalars)
    return _run(points, scalars, None, device, stream, c)


def msm_g1_indexed(points, scalars, idx, device=None, stream=None, c=None):
    """Σ scalars[i]·points[idx[i]] over G1 on the GPU (the prover's tail MSMs): the bytes of
    ``cuzk._native._msm.msm_indexed(points, scalars, idx, "g1")``.

    ``points`` uint64 (N, 12), ``scalars`` uint64 (n, 4) < 2^255, ``idx`` integer (n,) in
    [0, N).  Other parameters as ``msm_g1``.
    """
    points = _check_points(points)
    scalars = _check_scalars(scalars)
    idx = np.ascontiguousarray(idx)
    if idx.ndim != 1 or idx.shape[0] != scalars.shape[0] or not np.issubdtype(idx.dtype, np.integer):
        raise ValueError(f"idx must be an integer array of shape ({scalars.shape[0]},)")
    if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= points.shape[0]):
        bad = int(np.flatnonzero((idx < 0) | (idx >= points.shape[0]))[0])
        raise ValueError(f"idx[{bad}] = {int(idx[bad])} is outside [0, {points.shape[0]})")
    return _run(points, scalars, idx.astype(np.uint32), device, stream, c)


def _run(points, scalars, idx, device, stream, c):
    n = scalars.shape[0]
    if n == 0 or points.shape[0] == 0:
        return np.zeros(12, dtype=np.uint64)
    c = window_bits(n) if c is None else int(c)
    if not 4 <= c <= 16:
        raise ValueError(f"c must be in 4..16, got {c}")
    W = -(-255 // c)
    nb = W << c
    d = _driver()
    st = _state(device)
    s = stream if stream is not None else st.streams()[0]
    bufs = []

    def alloc(nbytes):
        b = st.pool.alloc(max(nbytes, 4), s)
        bufs.append(b)
        return b

    def upload(a):
        b = alloc(a.nbytes)
        d.copy_htod(b, a, a.nbytes, s)
        return b

    marks = []

    def mark(name):
        if _PROFILE:
            s.synchronize()
            marks.append((name, time.perf_counter()))

    mark("start")
    try:
        d_pts, d_sc = upload(points), upload(scalars)
        d_idx = upload(idx) if idx is not None else None
        d_cnt = alloc(nb * 4)
        d.memset_d32(d_cnt, 0, nb, s)
        threads = 256
        grid = max(1, min((n * W + threads - 1) // threads, st.device.sm_count * 32))
        args = [("P", d_sc.ptr), ("I", n), ("I", c), ("I", W)]
        mark("upload")
        st.fn("cuzk_msm_count").launch(s, grid, threads, [("P", d_cnt.ptr)] + args)
        mark("count")
        d_off = alloc((nb + 1) * 4)
        d_cur = alloc(nb * 4)
        st.fn("cuzk_msm_scan").launch(s, 1, 1024, [("P", d_off.ptr), ("P", d_cur.ptr), ("P", d_cnt.ptr),
                                                   ("I", nb)], shmem=1024 * 4)
        mark("scan")
        d_sorted = alloc(n * W * 4)                                 # at most one entry per (i, w)
        st.fn("cuzk_msm_scatter").launch(s, grid, threads, [("P", d_sorted.ptr), ("P", d_cur.ptr)] + args)
        mark("scatter")
        d_buckets = alloc(nb * _XYZZ_BYTES)
        bgrid = max(1, min((nb + 127) // 128, st.device.sm_count * 16))
        st.fn("cuzk_msm_buckets").launch(
            s, bgrid, 128, [("P", d_buckets.ptr), ("P", d_off.ptr), ("P", d_sorted.ptr),
                            ("P", d_pts.ptr), ("P", d_idx.ptr if d_idx is not None else 0), ("I", nb)])
        mark("buckets")
        parts, segs = _window_split(c)
        d_sums = alloc(W * parts * _XYZZ_BYTES)
        st.fn("cuzk_msm_windows").launch(
            s, W * parts, segs, [("P", d_sums.ptr), ("P", d_buckets.ptr), ("I", c), ("I", parts)],
            shmem=segs * _XYZZ_BYTES)
        sums = np.empty((W * parts, 24), dtype=np.uint64)
        d.copy_dtoh(sums, d_sums, sums.nbytes, s)
        s.synchronize()
        mark("windows")
        out = _field.g1_xyzz_horner(sums, W, parts, c)
        mark("horner")
        if _PROFILE:
            steps = " ".join(f"{b[0]}={1e3 * (b[1] - a[1]):.2f}" for a, b in zip(marks, marks[1:]))
            log.warning("msm n=%d N=%d c=%d: %s ms", n, points.shape[0], c, steps)
    finally:
        for b in bufs:
            b.free(s)
    return out
