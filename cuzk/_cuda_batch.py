"""Batch addition on a CUDA device: Σ of the points whose bit is set in a bitmap (the prover's
"scalar is 1" sums for L, A, B_G1 in G1 and B_G2 in G2; kernels in ``cuzk/cu/msm/batch_add.cu``,
program "batch_add").

Bitmap semantics are the CPU's (``cuzk._native._msm.batch_add``): bit i of uint64 word i // 64,
LSB first, selects point i.  Points are affine Montgomery in the CPU layout (G1 uint64 (n, 12),
G2 (n, 24); all-zero = infinity).

Three kernels ("kind" of the plan): "xyzz", one XYZZ accumulator per thread over a contiguous
word range (madd-2008-s per set bit); "balanced", the same additions with a block's set bits
dealt out evenly to its threads, tile by tile (``batch_add.cu`` batch_add_balanced_body); and
"affine", lanes of a few bitmap bits per thread with affine additions that share one inversion
per thread and step (batch_add_affine_body; its lane state comes from the pool).
``default_kind`` picks by measurement.

Two levels:

* ``batch_add_plan`` + ``enqueue_batch_add``: for device-resident points and bitmap, on a
  worker's stream.  The kernel writes one XYZZ partial per block into pool scratch, a
  stream-ordered copy moves them into the caller's pinned host slice, and the returned
  ``PendingPoint`` sums them on the CPU after the caller's one synchronization.  Nothing in
  ``enqueue_batch_add`` synchronizes or allocates outside the pool.
* ``batch_add``: the NumPy convenience (upload, enqueue, synchronize), the same bytes as
  ``cuzk._native._msm.batch_add``.
"""
from __future__ import annotations

import math
import os
import threading

import numpy as np

from ._assignment import popcount_words
from ._cuda_pending import AFFINE_WORDS, XYZZ_WORDS, PendingPoint
from ._cuda_state import DeviceState, state_for

__all__ = ["BatchPlan", "KINDS", "default_kind", "batch_add_plan", "enqueue_batch_add", "batch_add",
           "check_bitmap"]

# program "batch_add": cuzk._kernels.PROGRAMS (the static table)

# Threads per block (a power of two: the block tree) and blocks per SM.  G1: 256 threads x 192-byte
# XYZZ = 48 KiB of shared memory, G2: 128 x 384 bytes = 48 KiB (no opt-in needed).
_THREADS = {"g1": 256, "g2": 128}
_BLOCKS_PER_SM = 4
KINDS = ("xyzz", "affine", "balanced")
# "affine": threads per block (its grid: the blocks the SMs hold at once, ``_resident_blocks``) and
# the lane width B (bits of the bitmap per lane) by points per thread t: a thread runs ~ρ·B sweeps
# (ρ: the share of bits set) of one inversion each and ends with J = t/B lane sums, so B grows as
# sqrt(t).  H200, session 10, 45 % of the bits set, B = 8/16/32/64: G1 2^27 (t ~ 3970) 36.5 /
# 31.7 / 28.9 / 27.6 ms, G2 2^25 (t ~ 990) 27.7 / 24.8 / 23.3 / 23.7: B = sqrt(t) to the nearest
# power of two (CUZK_BATCH_LANE_BITS overrides, for measurement).
_AFFINE_THREADS = 128
# "balanced": threads per block (a power of two: the scan and the block tree) and its grid, the
# blocks the SMs hold at once (one wave: its blocks get equal shares of the words, so a second,
# partial wave would leave SMs idle).  sm_90: 164 registers, so 128 threads give 3 blocks (12
# warps) per SM where 256 give 1 (8 warps).  CUZK_BATCH_BALANCED_THREADS overrides (measurement).
_BALANCED_THREADS = int(os.environ.get("CUZK_BATCH_BALANCED_THREADS", "128"))
_LANE_BITS = (8, 16, 32, 64)
_LANE_BITS_ENV = int(os.environ.get("CUZK_BATCH_LANE_BITS", "0"))


def _driver():
    from ._native import _driver as d
    return d


_states = {}
_states_lock = threading.Lock()


def _state(device):
    return state_for(_states, _states_lock, _driver(), device,
                     lambda dev: DeviceState(_driver(), dev, "batch_add"))


def _group(group):
    if group not in ("g1", "g2"):
        raise ValueError(f"group must be 'g1' or 'g2', got {group!r}")
    return group


class BatchPlan:
    """Launch shape of one batch addition over ``n_points`` points of ``group`` on ``device``.

    Attributes
    ----------
    n_points, group, device
    kind : {"xyzz", "affine", "balanced"}
        The kernel (``KINDS``).
    blocks : int
        Grid size = number of XYZZ partials (``PendingPoint``'s P).
    threads : int
        Threads per block.
    words : int
        Bitmap words read, ceil(n_points / 64).
    lane_bits, lanes : int
        "affine": bitmap bits per lane (B) and lanes (ceil(n_points / B)); 0 for the others.
    scratch_bytes : int
        Pool scratch per launch (the partials; "affine": and the lane state), allocated and
        freed on the stream.
    host_rows : int
        Rows of the pinned host slice the caller provides: uint64 (host_rows, XYZZ_WORDS[group]).
    shmem : int
        Dynamic shared memory per block.
    """

    __slots__ = ("n_points", "group", "device", "kind", "blocks", "threads", "words", "lane_bits", "lanes",
                 "scratch_bytes", "host_rows", "shmem")

    def __repr__(self):
        return (f"BatchPlan(n_points={self.n_points}, group={self.group!r}, kind={self.kind!r}, "
                f"blocks={self.blocks}, threads={self.threads}, lane_bits={self.lane_bits})")


# Measured on the H200 (bench/RESULTS.md), ms at 45 % / 90 % of the bits set.  Session 10, xyzz
# vs affine: G1 2^20 0.73 / 1.03 vs 0.88 / 0.94, 2^25 8.36 / 14.29 vs 8.91 / 11.88; G2 2^20 1.88 /
# 2.57 vs 1.81 / 1.86, 2^25 26.85 / 47.32 vs 23.31 / 33.85.  Sessions 19-20, balanced / xyzz /
# affine in one run: G1 2^20 0.447 / 0.756 / 0.899 and 0.759 / 1.025 / 0.967; 2^22 1.024 / 1.375 /
# 1.777 and 1.839 / 2.028 / 2.038; 2^24 3.545 / 4.658 / 5.104 and 6.850 / 7.475 / 6.731; 2^27
# 27.149 / 29.629 / 28.769 and 53.693 / 54.360 / 46.955.  G2 2^24 11.452 / 14.255 / 13.359 and
# 22.247 / 24.367 / 17.939; 2^27 88.294 / 98.165 / 77.977 and 174.372 / 183.860 / 128.161; at
# 45 %, balanced / affine: 2^25 22.559 / 23.158, 2^26 44.522 / 43.408.
# So: "balanced" (XYZZ additions, even work per thread) wherever its spread-free schedule beats
# affine's cheaper additions: every sparse G1 bitmap, dense G1 ones below _G1_DENSE_AFFINE_MIN
# points, sparse G2 ones below _G2_SPARSE_AFFINE_MIN (the balanced/affine ratio 0.86 at 2^24,
# 0.97 at 2^25, 1.03 at 2^26, 1.13 at 2^27; G2 below 2^24 not measured); "affine" for the rest
# (the more points per thread, the more its one inversion per lane saves).
# A bitmap is dense from _DENSE of its bits set (PoRep's ones are ~45 %).  "xyzz" stays selectable.
_DENSE = 0.6
_G1_DENSE_AFFINE_MIN = 1 << 24
_G2_SPARSE_AFFINE_MIN = 1 << 26


def default_kind(group, n_points, n_set=None):
    """The measured faster kernel (``KINDS``) for a batch addition over ``n_points`` points of
    which ``n_set`` are selected (None: not known, taken as PoRep's ~45 %): "affine" for dense
    bitmaps (at least ``_DENSE`` of the bits set) of G2 and of G1 from ``_G1_DENSE_AFFINE_MIN``
    points, and for sparse G2 ones from ``_G2_SPARSE_AFFINE_MIN``; else "balanced"."""
    dense = n_set is not None and n_set >= _DENSE * n_points
    if group == "g2":
        return "affine" if dense or n_points >= _G2_SPARSE_AFFINE_MIN else "balanced"
    return "affine" if dense and n_points >= _G1_DENSE_AFFINE_MIN else "balanced"


def _kernel(kind, group):
    """The program's kernel name for ``kind`` over ``group``."""
    return f"cuzk_batch_add_{group}" if kind == "xyzz" else f"cuzk_batch_add_{kind}_{group}"


def _lane_bits(points_per_thread):
    """The lane width B of the "affine" kernel (``_LANE_BITS``) for this many points per thread."""
    if _LANE_BITS_ENV:
        return _LANE_BITS_ENV
    want = math.sqrt(max(points_per_thread, 1))
    return min(_LANE_BITS, key=lambda b: abs(math.log2(b / want)))


def _affine_row(group):
    """Bytes of one lane of the "affine" kernel: an affine accumulator, a prefix product (one
    coordinate) and a 16-byte state word."""
    a = AFFINE_WORDS[group] * 8
    return a + a // 2 + 16


def batch_add_plan(n_points, group, device=None, kind=None, n_set=None):
    """The ``BatchPlan`` for ``n_points`` points of ``group`` ("g1" / "g2") on ``device`` (None:
    device 0; an int: that ordinal) with kernel ``kind`` (``KINDS``; None: ``default_kind`` for
    ``n_set`` selected points).  ``n_points`` = 0 gives blocks = 0 (nothing is launched)."""
    group = _group(group)
    n = int(n_points)
    if n < 0:
        raise ValueError(f"n_points must be >= 0, got {n}")
    if n >= 1 << 40:
        raise ValueError(f"n_points = {n}: at most 2^40 - 1 points")
    kind = default_kind(group, n, n_set) if kind is None else kind
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    st = _state(device)
    p = BatchPlan()
    p.n_points, p.group, p.device, p.kind = n, group, st.device, kind
    p.words = (n + 63) // 64
    p.lane_bits = p.lanes = 0
    lane_bytes = 0
    p.threads = {"affine": _AFFINE_THREADS, "balanced": min(_BALANCED_THREADS, _THREADS[group])}.get(
        kind, _THREADS[group])
    p.shmem = p.threads * XYZZ_WORDS[group] * 8         # the block tree (and "balanced"'s tile before it)
    if kind == "xyzz":
        # at least one word per thread; never more blocks than the device keeps busy
        p.blocks = min(st.device.sm_count * _BLOCKS_PER_SM, -(-p.words // p.threads)) if n else 0
    else:                                   # one wave: the blocks the SMs hold at once
        from ._cuda_msm import _resident_blocks
        name = _kernel(kind, group)
        resident = st.device.sm_count * _resident_blocks(st.fn(name, p.shmem), st.device, name, p.threads,
                                                         p.shmem)
        if kind == "balanced":
            p.blocks = min(resident, -(-p.words // p.threads)) if n else 0
        else:
            p.lane_bits = _lane_bits(n / (resident * p.threads))
            p.lanes = -(-n // p.lane_bits)
            p.blocks = min(resident, -(-p.lanes // p.threads)) if n else 0
            lane_bytes = p.lanes * _affine_row(group)
    p.host_rows = p.blocks
    p.scratch_bytes = p.blocks * XYZZ_WORDS[group] * 8 + lane_bytes
    return p


def enqueue_batch_add(plan, stream, pool, d_points_ptr, d_bits_ptr, host_view):
    """Enqueue Σ points[i] over the set bits i on ``stream``; no synchronization.

    Parameters
    ----------
    plan : BatchPlan
    stream : Stream
        The worker's compute stream; the kernel and the copy into ``host_view`` run on it.
    pool : MemPool
        Scratch (``plan.scratch_bytes``) is allocated from it and freed, stream-ordered.
    d_points_ptr, d_bits_ptr : int or DeviceBuffer
        Device-resident points (plan.n_points rows, the CPU layout, 16-byte aligned) and bitmap
        (>= plan.words uint64 words; bits at positions >= n_points are ignored).
    host_view : numpy.ndarray
        uint64 (plan.host_rows, XYZZ_WORDS[group]), C-contiguous, in pinned host memory (or any
        host memory when the caller synchronizes the stream anyway).

    Returns
    -------
    PendingPoint
        ``.value()`` (after the stream is synchronized) is the affine sum, uint64 (12,) / (24,).
    """
    g = plan.group
    rows = XYZZ_WORDS[g]
    if (not isinstance(host_view, np.ndarray) or host_view.dtype != np.uint64
            or host_view.shape != (plan.host_rows, rows) or not host_view.flags.c_contiguous):
        raise ValueError(f"host_view must be a C-contiguous uint64 array of shape "
                         f"({plan.host_rows}, {rows}) for {plan!r}")
    if plan.blocks == 0:
        from ._cuda_pending import ReadyPoint
        return ReadyPoint(np.zeros(AFFINE_WORDS[g], dtype=np.uint64))
    d = _driver()
    st = _state(plan.device)
    args = [("P", None), ("P", _ptr(d_points_ptr)), ("P", _ptr(d_bits_ptr)), ("Q", plan.n_points)]
    fn = st.fn(_kernel(plan.kind, g), plan.shmem)
    part = pool.alloc(plan.scratch_bytes, stream)
    partials = plan.blocks * rows * 8
    try:
        args[0] = ("P", part.ptr)
        if plan.kind == "affine":       # the lane state after the partials (16-byte aligned)
            args += [("I", plan.lane_bits), ("P", part.ptr + partials), ("Q", plan.lanes)]
        fn.launch(stream, plan.blocks, plan.threads, args, shmem=plan.shmem)
        d.copy_dtoh(host_view, part, partials, stream)
    finally:
        part.free(stream)
    return PendingPoint(host_view, g, W=1, P=plan.blocks)


def _ptr(x):
    return x if isinstance(x, int) else x.ptr


def check_bitmap(bits_words, n, name="bits_words"):
    """``bits_words`` as a C-contiguous uint64 array of at least ceil(n / 64) words with no bit
    set at a position >= n (the CPU batch_add's contract); ValueError naming the first bad bit."""
    need = (n + 63) // 64
    if (not isinstance(bits_words, np.ndarray) or bits_words.dtype != np.uint64
            or bits_words.ndim != 1 or bits_words.shape[0] < need):
        raise ValueError(f"{name}: expected a uint64 array of shape (>= {need},) for {n} points, "
                         f"got {getattr(bits_words, 'dtype', type(bits_words).__name__)} "
                         f"{getattr(bits_words, 'shape', '')}")
    bits_words = np.ascontiguousarray(bits_words)
    tail = bits_words[n // 64:].copy()
    if tail.size and n % 64:
        tail[0] &= ~np.uint64((1 << (n % 64)) - 1)
    nz = np.flatnonzero(tail)
    if nz.size:
        k = int(nz[0])
        v = int(tail[k])
        bit = (n // 64 + k) * 64 + ((v & -v).bit_length() - 1)
        raise ValueError(f"{name}: bit {bit} is set but there are only {n} points")
    return bits_words


def batch_add(points, bits_words, group, device=None, kind=None):
    """Σ points[i] over the set bits i of ``bits_words``, on the GPU.

    Parameters
    ----------
    points : numpy.ndarray
        uint64 (n, 12) for G1 / (n, 24) for G2: affine Montgomery (all-zero = infinity).
    bits_words : numpy.ndarray
        uint64 (w,), w >= ceil(n / 64): bit i of word i // 64 (LSB first) selects point i; bits at
        positions >= n must be clear.
    group : {"g1", "g2"}
    device : Device, int or None
    kind : {"xyzz", "affine", "balanced"} or None
        The kernel (None: ``default_kind`` for the bits set).

    Returns
    -------
    numpy.ndarray
        uint64 (12,) / (24,): the affine Montgomery sum (all-zero = infinity), the bytes of
        ``cuzk._native._msm.batch_add(points, bits_words, group)``.

    Raises
    ------
    ValueError
        Bad group, shapes or dtypes, too few words, or a set bit at a position >= n.
    """
    group = _group(group)
    w = AFFINE_WORDS[group]
    if (not isinstance(points, np.ndarray) or points.dtype != np.uint64 or points.ndim != 2
            or points.shape[1] != w):
        raise ValueError(f"points: expected a uint64 array of shape (n, {w}) (affine Montgomery "
                         f"{group.upper()}), got {getattr(points, 'dtype', type(points).__name__)} "
                         f"{getattr(points, 'shape', '')}")
    n = points.shape[0]
    bits_words = check_bitmap(bits_words, n)
    if n == 0:
        return np.zeros(w, dtype=np.uint64)
    points = np.ascontiguousarray(points)
    bits = np.ascontiguousarray(bits_words[:(n + 63) // 64])
    d = _driver()
    plan = batch_add_plan(n, group, device, kind, None if kind else popcount_words(bits))
    st = _state(plan.device)
    s = st.streams()[0]
    host = np.empty((plan.host_rows, XYZZ_WORDS[group]), dtype=np.uint64)
    d_pts = st.pool.alloc(points.nbytes, s)
    d_bits = st.pool.alloc(bits.nbytes, s)
    try:
        d.copy_htod(d_pts, points, points.nbytes, s)
        d.copy_htod(d_bits, bits, bits.nbytes, s)
        pending = enqueue_batch_add(plan, s, st.pool, d_pts, d_bits, host)
        s.synchronize()
    finally:
        d_pts.free(s)
        d_bits.free(s)
    return pending.value()
