"""Multi-scalar multiplication on a CUDA device, G1 and G2 (Pippenger; kernels and their
contracts in ``cuzk/cu/msm/msm.cuh``, program "msm").

Device-resident interface (the prover's stages; bases stay in device memory across calls):

* ``msm_plan(n, group, device, npoints, c, indexed, k, segment)`` -> ``MsmPlan``: window width,
  windows, partial sums per window, the device scratch bytes one ``enqueue_msm`` allocates from
  the pool and the rows of the host result slice; pure arithmetic, nothing is allocated.
* ``enqueue_msm(plan, stream, pool, d_points_ptr, d_scalars_ptr, host_view, ...)`` enqueues the
  whole MSM on ``stream`` (stream-ordered scratch from ``pool``), copies the W·P partial window
  sums into ``host_view`` (pinned, the caller's) and returns a ``PendingPoint``: no host
  synchronization.  ``PendingPoint.value()`` finishes by Horner's rule on the CPU after the
  caller's stream sync.
* ``precompute_bases(plan, stream, d_points_ptr, d_table_ptr)`` fills a table of
  ``plan.k`` shifted copies of fixed bases (``plan.precompute_bytes``): an MSM over it processes
  ceil(W/k) windows instead of W.

Numpy conveniences on top (upload, enqueue, sync; tests and simple callers): ``msm_g1``,
``msm_g1_indexed``, ``msm_g2``, ``msm_g2_indexed`` take the CPU's layouts and return the bytes
of ``cuzk._native._msm.msm`` / ``msm_indexed``.  Their level-0 balance, when not given, is
``sampled_balance``: ``default_balance``, minus "batch" for mostly small plain scalars; their
window width ``sampled_window``: ``window_bits``, but c = 20 for large plain G1 MSMs of uniform
scalars.

Scalars: 4 x 64-bit little-endian limbs per scalar, ``scalar_form="canonical"`` (< 2^255) or
``"montgomery"`` (x·2^256 mod r for x < r, the blstrs layout the NTT leaves on the device;
converted inside the digit kernels).
"""

import logging
import os
import re
import threading
import time

import numpy as np

from ._cuda_pending import AFFINE_WORDS, XYZZ_WORDS, PendingPoint, ReadyPoint
from ._cuda_state import DeviceState, state_for

__all__ = ["MsmPlan", "msm_plan", "enqueue_msm", "SortShare", "precompute_bases", "window_bits", "SCALAR_FORMS", "BALANCES",
           "SCATTER_MODES", "scatter_cursors",
           "default_balance", "sampled_balance", "sampled_window", "default_window", "G1_ONE_SET", "msm_g1", "msm_g1_indexed", "msm_g2", "msm_g2_indexed"]

SCALAR_FORMS = ("canonical", "montgomery")
from ._constants import FR_MODULUS as _R  # noqa: E402
_GROUPS = ("g1", "g2")
# The automatic width stops at 16: measured on the H200 (bench/RESULTS.md, 2026-12-01, 2^24,
# k = 1/2/4), c = 16 beat 18 and 20 for uniform (137.5 vs 168.0 / 174.8 ms) and bits90 (34.8 vs
# 47.8 / 75.1 ms) scalars: past 16 bits the bucket pass (atomics on 2^(c-1) counters and the
# segment sums) costs more than the windows it saves, which this cost model does not see.
_C_MIN, _C_MAX, _C_AUTO_MAX = 2, 24, 16
_SEGMENT = 64              # default entries per segment (bench: --segment)
# ... and from _SEGMENT_BIG_ENTRIES entries (n·W) on, _SEGMENT_BIG: H200, G1 2^27 uniform, c = 20,
# k = 2, flat (1.745 G entries): S = 64/128/256 903.8/898.8/892.3 ms, scratch 12.8/10.3/9.1 GiB;
# real_tail 2^27 (skewed: few entries) unchanged.  Not measured below 2^30 entries, where
# fewer, longer chunks could leave threads idle (2^20 at c = 16: ~124 entries per thread).
_SEGMENT_BIG, _SEGMENT_BIG_ENTRIES = 256, 1 << 30
# Level 0's work split (bench: --balance): "bucket" = one thread per bucket-relative segment of
# <= S entries; "flat" = one thread per S consecutive sorted entries, cut at bucket boundaries
# (msm.cuh chunk_sums), equal work per thread.  Default (``default_balance``), from the H200
# sweep of session 5 (bench/RESULTS.md; c 16..22, k 1/4, three distributions): "flat" for G2
# (every configuration, 4-17 % faster: 2^22 uniform c=16 k=1 109.8 vs 129.2 ms) and for the
# indexed tail MSMs, whose scalars are skewed (G1 2^24 real_tail c=16 k=4 25.3 vs 26.4 ms,
# bits90 22.1 vs 23.3); "bucket" for the plain G1 MSM (the H MSM's uniform scalars: 127.1 vs
# 130.8 ms at 2^24 c=16 k=4).  "affine": the flat chunks and pieces, with affine additions that
# share one inversion per block and step (msm.cuh sum_points_affine, ~6M instead of 8M + 2S per
# addition): the default for G2 MSMs of >= 2^23 scalars (``_G2_AFFINE_MIN``).  Timed on the H200
# (c=16, 256 threads, 32 lanes): G2 2^22 uniform 81.3 ms against flat's 103.2 (k=4); after the
# lanes were sized to the grid (session 6) skewed G2 2^22 is 15 % slower than flat and G2 2^24
# 10-20 % faster on every distribution; G1 2^24 uniform 150.3 against bucket's 138.3 (k=1).
# (Session 6 also timed the lanes in shared memory, 8 x 128 threads, two blocks per SM: G1 level 0
# 171 ms against 128 in local memory and XYZZ's 116; removed.)
# "batch": the flat chunks, J per thread, with affine additions that share one inversion per
# thread and step; the lanes' state (accumulator, prefix product, bucket and flags) in device
# memory (msm.cuh sum_points_batch: no barriers, one lane in registers at a time).
BALANCES = ("bucket", "flat", "affine", "batch")
_FLAT_LEVEL0 = ("flat", "affine", "batch")   # balances whose level 0 leaves the flat pieces
_MAX_INDEX = 1 << 31       # entries carry the point index in 31 bits (+ the sign bit)
_ALIGN = 256               # pool allocations are rounded to this in scratch_bytes
_THREADS = 256             # digit kernels
_SUM_THREADS = 128         # segment-sum kernels
_SCAN_ITEMS = 8            # items per thread of the tiled prefix sums
# Buckets per scatter pass (msm::scatter): its writes stay in L2 when few buckets take them.
# Measured (H200, G1 2^27, c = 20, k = 2, uniform): 3.6 M buckets in one pass 167 ms, 2^20 per pass
# 116, 2^19 103, 2^18 93.5 (each pass re-reads the scalars: ~1.3 ms at 2^27).
_SCATTER_BUCKETS = int(os.environ.get("CUZK_MSM_SCATTER_BUCKETS", str(1 << 18)))
# The scatter's bucket positions (msm::scatter; bench: --scatter): "offsets" reads off[b] beside
# the atomic on counts[b] for every entry; "cursors" first turns counts into absolute 32-bit
# cursors (msm::cursors), so an entry costs an atomic and a write (taken where n·W < 2^32).
# H100, same process, alternating (bench/RESULTS.md session 54): G1 2^27 c = 20 k = 2 scatter
# 118.1 -> 107.0 ms (MSM 730.1 -> 718.7), 2^24 k = 13 11.0 -> 9.5 (93.9 -> 92.6); bits90 and
# real_tail -0.1 ms.  2^18 buckets per pass stays the best for both forms.
SCATTER_MODES = ("offsets", "cursors")
_SCATTER_MODE = os.environ.get("CUZK_MSM_SCATTER", "cursors")
# balance "affine": threads per block (a power of two: msm.cuh block_inverse's tree; the
# additions one inversion serves are _AFFINE_THREADS x the kernel's lanes, CUZK_MSM_AFFINE_LANES)
# and blocks per SM of the grid.  H200, G1 2^24 uniform, ms (session 5): T = 64/128/256 at 8
# lanes 211/196/193; lanes 4/8/16/32 at T = 256 245/193/165/150 (sm_90, NVRTC: G1 180
# registers + a 1248-byte stack frame at 8 lanes, G2 255 + 2432); CUZK_MSM_AFFINE_THREADS
# overrides (development).
_AFFINE_THREADS = int(os.environ.get("CUZK_MSM_AFFINE_THREADS", "256"))
_AFFINE_PER_SM = 1         # the blocks an SM holds at once (180-255 registers x 256 threads)
# balance "batch": threads per block, and the grid: as many blocks as the SMs hold at once
# (Function.occupancy; _BATCH_PER_SM where the driver cannot say), so every thread runs its J
# lanes in one wave and J = chunks / resident threads is as large as it can be.
_BATCH_THREADS = int(os.environ.get("CUZK_MSM_BATCH_THREADS", "128"))
_BATCH_PER_SM = 2

# program "msm": cuzk._kernels.PROGRAMS (the static table)
log = logging.getLogger("cuzk.msm")
# CUZK_MSM_PROFILE=1: synchronize after every step and log the step times (development).
_PROFILE = os.environ.get("CUZK_MSM_PROFILE", "0") not in ("", "0")
# CUZK_MSM_SKIP_LEVELS=0: every segment level of the plan runs, also those after the one that left
# every bucket one sum (which then copy; the same bytes): the A/B of that skip (development).
_SKIP_LEVELS = os.environ.get("CUZK_MSM_SKIP_LEVELS", "1") not in ("", "0")


def _windows(c, k=1):
    """(W, Wk): signed-digit windows of a scalar < 2^255 (the top one never carries out) and
    windows processed with k precomputed copies."""
    W = -(-256 // c)
    return W, -(-W // k)


def _cost(n, c, k=1):
    """Relative cost of an n-point MSM at width c: one mixed addition per entry (n·W at most)
    plus the window reduction (2 XYZZ additions per bucket, ~1.5 mixed ones each)."""
    W, Wk = _windows(c, k)
    return n * W + 3 * Wk * (1 << (c - 1))


def default_segment(n, W):
    """Entries per segment S of an MSM of n scalars over W windows: ``_SEGMENT``, or
    ``_SEGMENT_BIG`` once n·W reaches ``_SEGMENT_BIG_ENTRIES`` (fewer partial sums to reduce)."""
    return _SEGMENT_BIG if int(n) * int(W) >= _SEGMENT_BIG_ENTRIES else _SEGMENT


def window_bits(n, k=1):
    """Window width c for n scalars (k precomputed copies of the bases): the minimum of
    ``_cost`` over c = 3.._C_AUTO_MAX (16), for uniform scalars (skewed ones make fewer entries, never more:
    the segmented bucket sums keep every thread at <= S additions whatever the distribution)."""
    return min(range(3, _C_AUTO_MAX + 1), key=lambda c: (_cost(max(int(n), 1), c, k), c))


def _pow2_floor(x):
    return 1 << (max(int(x), 1).bit_length() - 1)


# The window kernel's grid (_window_split).  "wave" (the default since session 21): one block of 256
# per SM in all, so each thread's running sums are long (2^27 H MSM: 64 buckets, 128 blocks) and the
# per-thread multiplication by its first bucket's weight (32 doublings + ~16 additions) is paid by
# few threads; "spread" (CUZK_MSM_WINDOW_GRID=spread, the default before): >= 8 buckets per thread
# and up to ~8 blocks per SM (2^27: 1024 blocks of 8 buckets).  Counted (XYZZ operations per window
# step, 2 per bucket + ~48 per thread): 2^27 16.8 M -> 5.8 M, G1 2^24 with 13 copies 4.2 M -> 2.6 M;
# measured (session 21, same call): the step 6.88 -> 3.14 ms at 2^27, 1.81 -> 1.26 ms at 2^24.
_WINDOW_GRID = os.environ.get("CUZK_MSM_WINDOW_GRID", "wave")
if _WINDOW_GRID not in ("spread", "wave"):
    raise ValueError(f"CUZK_MSM_WINDOW_GRID must be 'spread' or 'wave', got {_WINDOW_GRID!r}")


def _window_split(c, Wk, sm_count, grid=None):
    """(blocks per window P, threads per block) of the window kernel: H = 2^(c−1) buckets split
    evenly (both powers of two, P·threads divides H), >= 8 buckets per thread where possible
    (each thread also pays a 32-doubling multiplication); ``grid`` (None: ``_WINDOW_GRID``)
    "spread": ~4-8 blocks per SM in all, "wave": at most one per SM (Wk·P <= sm_count)."""
    H = 1 << (c - 1)
    segs = min(256, max(1, H // 8))
    P = 1
    if (grid or _WINDOW_GRID) == "wave":
        while H // (2 * P * segs) >= 8 and Wk * 2 * P <= sm_count:
            P *= 2
        return P, segs
    while H // (2 * P * segs) >= 8 and Wk * P < 4 * sm_count:
        P *= 2
    return P, segs


def _levels(m, S, flat=False):
    """Segment steps until every bucket holds <= 1 sum, m = the most items one bucket can get.
    ``flat``: level 0 cuts at global multiples of S, so a bucket can get one piece more
    (ceil(m/S) + 1: a bucket of <= S entries may straddle a chunk boundary)."""
    m = max(int(m), 1)
    if flat:
        m = -(-m // S) + 1 if m > 1 else 1      # pieces after a flat level 0
    else:
        m = -(-m // S)                          # segments after a bucket-relative level 0
    levels = 1
    while m > 1:
        m, levels = -(-m // S), levels + 1
    return levels


def _align(nbytes):
    return -(-max(int(nbytes), 1) // _ALIGN) * _ALIGN


class MsmPlan:
    """Sizes and launch shapes of one MSM (``msm_plan``); read-only.

    Attributes: ``n`` scalars, ``npoints`` bases (N), ``group``, ``c`` window width, ``W``
    signed-digit windows, ``k`` precomputed copies (1: none), ``Wk`` windows processed
    (ceil(W/k)), ``H`` buckets per window (2^(c−1)), ``nb`` buckets (Wk·H), ``S`` entries per
    segment, ``levels`` segment steps, ``P`` partial sums per window, ``host_rows`` = Wk·P (rows
    of the pinned result slice, ``XYZZ_WORDS[group]`` uint64 each), ``scratch_bytes`` (device
    bytes ``enqueue_msm`` takes from the pool, alignment included), ``precompute_bytes`` (bytes
    of the k-copy base table, 0 when k = 1), ``indexed``, ``device``.
    """

    __slots__ = ("n", "npoints", "group", "c", "W", "k", "Wk", "H", "nb", "S", "levels", "P", "segs",
                 "scan_threads", "ntiles", "host_rows", "buffers", "scratch_bytes", "precompute_bytes", "indexed", "device",
                 "sm_count", "balance")

    def __repr__(self):
        return (f"MsmPlan(n={self.n}, npoints={self.npoints}, group={self.group!r}, c={self.c}, "
                f"W={self.W}, k={self.k}, Wk={self.Wk}, S={self.S}, balance={self.balance!r}, "
                f"levels={self.levels}, P={self.P}, "
                f"scratch_bytes={self.scratch_bytes}, precompute_bytes={self.precompute_bytes})")


# G2 MSMs of at least this many scalars default to "affine".  H200, session 6 (bench/RESULTS.md),
# c = 16, k = 1/4, affine vs flat: 2^24 uniform 324.5/314.3 vs 408.7/397.2 ms, bits90 62.5/56.1 vs
# 69.1/63.9, real_tail 69.7/63.1 vs 79.2/73.6 (affine faster on all three); 2^22 uniform
# 88.5/81.9 vs 109.7/103.6 but bits90 31.8/27.2 vs 27.7/23.5 and real_tail 34.0/29.1 vs
# 30.8/26.4 (flat faster on the skewed ones, which is what G2 tails are).  2^23 is between.
_G2_AFFINE_MIN = 1 << 23
# ... and from this many when a sample of the scalars says they are not mostly small (the B_G2 tail
# of a witness whose full values are uniform; ``sampled_balance``).  H200, session 10 (call 1,
# c = 16, k = 1, uniform, affine vs flat): 2^20 40.85 vs 34.59 ms, 2^21 52.56 vs 60.13, 2^22
# 87.95 vs 109.16 (batch: 41.03 / 65.85 / 105.94; on bits90 and real_tail flat wins at all three).
_G2_AFFINE_UNIFORM_MIN = 1 << 21
# Plain G1 at c >= 20 (H200, uniform): 2^27 k = 2 flat 903 ms vs bucket 910; 2^24 k = 4 133 vs 152.
_G1_FLAT_C = 20
# Plain G1 MSMs of at least this many scalars default to "batch".  H200, session 9 (bench/RESULTS.md),
# uniform, batch vs flat: 2^27 c = 20 k = 2 695.9 vs 827.1 ms (level 0 560.8 vs 691.6); 2^24 k = 4
# c = 16 102.6 vs 121.6, c = 20 110.4 vs 117.6.  Skewed scalars make fewer chunks, hence fewer
# lanes per thread to share an inversion: bits90 / real_tail 2^24 c = 16 24.1 / 25.9 vs 21.1 / 23.1
# (so skewed scalars, which a sample shows, keep the narrower default: ``sampled_balance``).
# Below 2^23 J = chunks / resident threads falls under ~30 and batch stops paying: 2^22
# (c = 16, k = 8) 30.3 vs bucket's 32.0, 2^20 (k = 16) 13.0 vs 9.3.  Tails (indexed, k = 1, as the
# stages run them), session 10, uniform, batch vs flat: 2^23 59.40 vs 64.14 ms, 2^24 107.49 vs
# 124.60; bits90 18.15 / 26.64 vs 13.38 / 22.52, real_tail 19.68 / 29.06 vs 15.15 / 25.14.
_G1_BATCH_MIN = 1 << 23


def default_balance(group, indexed, n=None, c=None, skewed=None):
    """Level 0's measured best work split for an MSM of ``n`` scalars of ``group`` at window
    width ``c`` (see ``BALANCES``).

    ``skewed``: whether most scalars are small (``_skewed``: one entry each, few chunks); None
    (not looked at) takes plain scalars as uniform (the H MSM's) and indexed ones as skewed (the
    tails of a witness).  Uniform scalars: "batch" for G1 from ``_G1_BATCH_MIN`` scalars, "affine"
    for G2 from ``_G2_AFFINE_UNIFORM_MIN``.  Skewed: "affine" for G2 from ``_G2_AFFINE_MIN``.
    Otherwise "flat" for G2 and for indexed G1, and for plain G1 "flat" from ``_G1_FLAT_C`` bits
    (their buckets are Poisson-sized) and "bucket" below."""
    skewed = indexed if skewed is None else skewed
    if group == "g2":
        wide = _G2_AFFINE_MIN if skewed else _G2_AFFINE_UNIFORM_MIN
        return "affine" if n is not None and n >= wide else "flat"
    if not skewed and n is not None and n >= _G1_BATCH_MIN:
        return "batch"
    if indexed:
        return "flat"
    return "flat" if c is not None and c >= _G1_FLAT_C else "bucket"


def msm_plan(n, group="g1", device=None, npoints=None, c=None, indexed=False, k=1, segment=None,
             balance=None):
    """Plan an MSM of ``n`` scalars over ``npoints`` resident bases.

    Parameters
    ----------
    n : int
        Scalars (0 allowed: ``enqueue_msm`` then returns infinity without touching the device).
    group : {"g1", "g2"}
    device : Device, int or None
        Sizes launch shapes by its SM count (None: device 0).
    npoints : int or None
        Bases N (None: n).  Not indexed: n <= N, scalar i multiplies base i.
    c : int or None
        Window width, 2..24 (None: ``window_bits(n, k)``).
    indexed : bool
        Scalar i multiplies base idx[i] (``d_idx_ptr`` of ``enqueue_msm``).
    k : int
        Precomputed copies of the bases (``precompute_bases``); 1: none.
    segment : int or None
        Entries per segment S >= 2 (None: ``default_segment(n, W)``).
    balance : {"bucket", "flat", "affine", "batch"} or None
        Level 0's work split (``BALANCES``; None: ``default_balance(group, indexed, n, c)``); "affine"
        plans exactly as "flat" (the same pieces and levels) and differs only in its kernel;
        "batch" also takes the lanes' state (``_batch_row`` bytes per flat chunk) from the pool.

    Raises
    ------
    ValueError
        Unknown group, sizes out of range (k·N >= 2^31: the entries' 31-bit point index; n >= 2^32;
        W·2^(c−1) >= 2^32 buckets), c or S out of range.
    """
    if group not in _GROUPS:
        raise ValueError(f"group must be one of {_GROUPS}, got {group!r}")
    n = int(n)
    N = n if npoints is None else int(npoints)
    k = int(k)
    if n < 0 or N < 0:
        raise ValueError(f"n and npoints must be >= 0, got {n}, {N}")
    if n >= 1 << 32:
        raise ValueError(f"at most 2^32 - 1 scalars, got {n}")
    if not indexed and n > N:
        raise ValueError(f"{n} scalars but only {N} points (not indexed)")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if k * N >= _MAX_INDEX:
        raise ValueError(f"k·npoints = {k * N} >= 2^31: the MSM's entries index points in 31 bits")
    c = window_bits(n, k) if c is None else int(c)
    if not _C_MIN <= c <= _C_MAX:
        raise ValueError(f"c must be in {_C_MIN}..{_C_MAX}, got {c}")
    balance = default_balance(group, indexed, n, c) if balance is None else balance
    if balance not in BALANCES:
        raise ValueError(f"balance must be one of {BALANCES}, got {balance!r}")
    W, Wk = _windows(c, k)
    S = default_segment(n, W) if segment is None else int(segment)
    if S < 2:
        raise ValueError(f"segment must be >= 2, got {S}")
    if k > W:
        raise ValueError(f"k = {k} copies but only W = {W} windows at c = {c}")
    H = 1 << (c - 1)
    nb = Wk * H
    if nb >= 1 << 32:
        raise ValueError(f"{nb} buckets (c = {c}) >= 2^32")
    if device is None or isinstance(device, int):
        device = _driver().Device.get(device or 0)
    p = MsmPlan()
    p.n, p.npoints, p.group, p.c, p.W, p.k, p.Wk, p.H, p.nb, p.S = n, N, group, c, W, k, Wk, H, nb, S
    p.indexed, p.device, p.sm_count = bool(indexed), device, int(device.sm_count)
    p.balance = balance
    p.levels = _levels(max(n, 1) * k, S, flat=balance in _FLAT_LEVEL0)
    p.P, p.segs = _window_split(c, Wk, p.sm_count)
    p.host_rows = Wk * p.P if n else 0
    xyzz = XYZZ_WORDS[group] * 8
    entries = n * W                                   # at most one entry per (scalar, window)
    sums1 = -(-entries // S) + nb                     # Σ_b ceil(cnt_b / S) <= entries/S + nb
    sums2 = -(-sums1 // S) + nb if p.levels > 1 else 0
    p.scan_threads = min(256, max(32, 1 << (-(-nb // _SCAN_ITEMS) - 1).bit_length()))
    p.ntiles = -(-nb // (_SCAN_ITEMS * p.scan_threads))
    p.buffers = (("counts", nb * 4), ("off_a", (nb + 1) * 8), ("off_b", (nb + 1) * 8),
                 ("tiles", (2 * p.ntiles + 1) * 8),
                 ("entries", entries * 4), ("sums_a", sums1 * xyzz), ("sums_b", sums2 * xyzz),
                 ("windows", p.host_rows * xyzz), ("more", p.levels * 4)) if n else ()
    if n and balance == "batch":
        p.buffers += (("lanes", _batch_cap(entries, S) * _batch_row(group)),)
    p.scratch_bytes = sum(_align(b) for _, b in p.buffers)
    p.precompute_bytes = k * N * AFFINE_WORDS[group] * 8 if k > 1 else 0
    return p


def _batch_cap(entries, S):
    """Lanes (flat chunks) of a "batch" level 0 over at most ``entries`` sorted entries."""
    return max(1, -(-int(entries) // int(S)))


def _batch_row(group):
    """Bytes of one lane of a "batch" level 0: an affine accumulator, a prefix product (one
    coordinate) and a (bucket, flags) word."""
    a = AFFINE_WORDS[group] * 8
    return a + a // 2 + 8


def _driver():
    from ._native import _driver as d
    return d


_states = {}
_states_lock = threading.Lock()


def _state(device):
    return state_for(_states, _states_lock, _driver(), device,
                     lambda dev: DeviceState(_driver(), dev, "msm"))


def _grid(items, threads, sm_count, per_sm):
    return max(1, min(-(-max(items, 1) // threads), sm_count * per_sm))


_LANES_RE = re.compile(r"^#define CUZK_MSM_AFFINE_LANES (\d+)$", re.M)
_lanes = {}
_LANES_DEFINE = "-DCUZK_MSM_AFFINE_LANES="


def _affine_lanes():
    """Lanes (flat chunks) per thread of the affine level 0, as the msm program is compiled
    (``_kernels.nvrtc_options``): the last ``-DCUZK_MSM_AFFINE_LANES=N`` among its options (e.g.
    from ``$CUZK_NVRTC_OPTIONS``: a measurement, as session 49's G2 lanes A/B in
    bench/RESULTS.md), else CUZK_MSM_AFFINE_LANES read from msm/msm.cuh (the one place it is
    written); cached per option list, so the grid is sized for the lanes the kernel has."""
    from ._kernels import cu_root, nvrtc_options
    opts = tuple(nvrtc_options("msm"))
    if opts not in _lanes:
        defined = [o[len(_LANES_DEFINE):] for o in opts if o.startswith(_LANES_DEFINE)]
        if defined:
            _lanes[opts] = int(defined[-1])     # the compiler takes the last definition
        else:
            with open(os.path.join(cu_root(), "msm", "msm.cuh"), encoding="utf-8") as f:
                _lanes[opts] = int(_LANES_RE.search(f.read()).group(1))
    return _lanes[opts]


_occupancy = {}


def _resident_blocks(fn, device, name, threads, shmem=0):
    """Blocks of ``threads`` (with ``shmem`` dynamic shared bytes each) an SM of ``device`` holds
    at once for kernel ``fn`` (memoized by device ordinal, name and sizes; ``_BATCH_PER_SM``
    where the driver has no occupancy query)."""
    key = (getattr(device, "ordinal", 0), name, threads, shmem)
    if key not in _occupancy:
        occ = getattr(fn, "occupancy", None)
        _occupancy[key] = max(1, int(occ(threads, shmem))) if occ is not None else _BATCH_PER_SM
    return _occupancy[key]


def _launch_level0(st, s, plan, sums, seg, off, entries, d_points_ptr, chunks_bound, lanes=0):
    """Enqueue level 0 of ``plan.balance`` over the sorted entries into ``sums``; ``chunks_bound``
    bounds the segments (or flat chunks) it can have; ``lanes``: the "batch" lane state."""
    g, args = plan.group, [("P", sums), ("P", seg), ("P", off), ("P", entries), ("P", d_points_ptr),
                           ("I", plan.nb), ("I", plan.S)]
    if plan.balance == "batch":
        T, name = _BATCH_THREADS, "cuzk_msm_sum_points_batch_" + g
        fn = st.fn(name)
        cap = _batch_cap(plan.n * plan.W, plan.S)
        grid = max(1, min(-(-cap // T), plan.sm_count * _resident_blocks(fn, plan.device, name, T)))
        fn.launch(s, grid, T, args + [("P", lanes), ("Q", cap)])
        return
    if plan.balance == "affine":
        T = _AFFINE_THREADS
        if not 1 <= T <= 1024 or T & (T - 1):
            raise ValueError(f"affine level 0: {T} threads per block, not a power of two <= 1024")
        grid = _grid(chunks_bound, T * _affine_lanes(), plan.sm_count, _AFFINE_PER_SM)
        field = (XYZZ_WORDS[g] * 8) // 4              # one coordinate: a quarter of an XYZZ point
        st.fn("cuzk_msm_sum_points_affine_" + g, T * field).launch(s, grid, T, args, shmem=T * field)
        return
    name = "cuzk_msm_sum_points_flat_" if plan.balance == "flat" else "cuzk_msm_sum_points_"
    st.fn(name + g).launch(s, _grid(chunks_bound, _SUM_THREADS, plan.sm_count, 8), _SUM_THREADS, args)


def _scan_threads(nb):
    return min(1024, max(32, _pow2_floor(-(-nb // 16))))


def _scan(st, s, plan, d_out, d_tiles, counts=None, off=None, flat=False, need=0, more=0):
    """Enqueue d_out[b] = Σ_{b'<b} counts[b'] (``counts``) or Σ ceil((off[b'+1] − off[b'])/S) (``off``;
    ``flat``: the pieces of a flat level 0), b <= nb: tile totals, their scan (one block), the tiles
    again.  Segments only: ``more`` (a device word) is set when some bucket gets more than one
    segment, and the three launches do nothing when the device word ``need`` is 0 (0: no
    pointer, they run)."""
    nb, K, T, nt = plan.nb, _SCAN_ITEMS, plan.scan_threads, plan.ntiles
    tile_off = d_tiles + 8 * nt
    if counts is not None:
        st.fn("cuzk_msm_tiles_counts").launch(s, nt, T, [("P", d_tiles), ("P", counts), ("I", nb), ("I", K)],
                                              shmem=8 * T)
    else:
        st.fn("cuzk_msm_tiles_segments").launch(
            s, nt, T, [("P", d_tiles), ("P", off), ("I", nb), ("I", plan.S), ("I", K), ("I", int(flat)),
                       ("P", need)], shmem=8 * T)
    tb = _scan_threads(nt)
    st.fn("cuzk_msm_scan_block").launch(s, 1, tb, [("P", tile_off), ("P", d_tiles), ("I", nt), ("P", need)],
                                        shmem=8 * tb)
    if counts is not None:
        st.fn("cuzk_msm_apply_counts").launch(
            s, nt, T, [("P", d_out), ("P", tile_off), ("P", counts), ("I", nb), ("I", K), ("I", nt)], shmem=8 * T)
    else:
        st.fn("cuzk_msm_apply_segments").launch(
            s, nt, T, [("P", d_out), ("P", tile_off), ("P", off), ("I", nb), ("I", plan.S), ("I", K), ("I", nt),
                       ("I", int(flat)), ("P", need), ("P", more)], shmem=8 * T)


def scatter_passes(nb, per_pass=None):
    """The bucket ranges [b_lo, b_hi) of the scatter passes, in order: consecutive ranges of
    ``per_pass`` (None: ``_SCATTER_BUCKETS``, at least 1) buckets covering [0, nb)."""
    step = max(1, int(_SCATTER_BUCKETS if per_pass is None else per_pass))
    return [(lo, min(nb, lo + step)) for lo in range(0, nb, step)]


def scatter_cursors(plan):
    """Whether ``_sort`` scatters through absolute 32-bit cursors (``_SCATTER_MODE`` "cursors"
    and every entry position, < n·W, below 2^32)."""
    if _SCATTER_MODE not in SCATTER_MODES:
        raise ValueError(f"CUZK_MSM_SCATTER must be one of {SCATTER_MODES}, got {_SCATTER_MODE!r}")
    return _SCATTER_MODE == "cursors" and plan.n * plan.W < 1 << 32


def _sort(st, s, plan, ptr, d_scalars_ptr, d_idx_ptr, mont, mark=None):
    """Enqueue the counting sort of the (bucket, ±point) entries: ptr["off_a"] = the bucket offsets,
    ptr["entries"] sorted by bucket, ptr["counts"] spent (back to 0, or with ``scatter_cursors``
    each bucket's start mod 2^32).  ``mark(name)`` after each of its three steps (count, scan,
    scatter: CUZK_MSM_PROFILE's breakdown).  The scatter runs in ``scatter_passes(plan.nb)``, one
    launch each."""
    mark = mark or (lambda name: None)
    d = _driver()
    n, c, W, Wk, nb = plan.n, plan.c, plan.W, plan.Wk, plan.nb
    d.memset_d32(ptr["counts"], 0, nb, s)
    dgrid = _grid(n, _THREADS, plan.sm_count, 16)
    st.fn("cuzk_msm_count").launch(
        s, dgrid, _THREADS, [("P", ptr["counts"]), ("P", d_scalars_ptr), ("I", n), ("I", c), ("I", W),
                             ("I", Wk), ("I", mont)])
    mark("count")
    _scan(st, s, plan, ptr["off_a"], ptr["tiles"], counts=ptr["counts"])
    off = ptr["off_a"]
    if scatter_cursors(plan):
        st.fn("cuzk_msm_cursors").launch(s, _grid(nb, _THREADS, plan.sm_count, 16), _THREADS,
                                         [("P", ptr["counts"]), ("P", off), ("I", nb)])
        off = 0
    mark("scan")
    for b_lo, b_hi in scatter_passes(nb):
        st.fn("cuzk_msm_scatter").launch(
            s, dgrid, _THREADS, [("P", ptr["entries"]), ("P", ptr["counts"]), ("P", off),
                                 ("P", d_scalars_ptr), ("P", d_idx_ptr), ("I", n), ("I", plan.npoints),
                                 ("I", c), ("I", W), ("I", Wk), ("I", mont), ("I", b_lo), ("I", b_hi)])
    mark("scatter")


class SortShare:
    """The sort of one MSM (its sorted entries and bucket offsets) handed to the next MSM over the
    same scalars, indices and plan shape: the prover's B_G1 tail to its B_G2 tail, whose scalars and
    base indices are the same, so their sorted (bucket, ±index) words are too (an entry names a
    point by index, not by value; the order inside a bucket is free).  The first ``enqueue_msm``
    (``keep_sort``) keeps its entries and a copy of its offsets (level 1 overwrites them), the
    second (``sorted_from``) skips count, scan and scatter and frees them; both on one stream.
    ``kept_bytes(plan)``: the device bytes held from the first MSM's end to the second's start."""

    __slots__ = ("key", "entries", "off")

    def __init__(self):
        self.key = self.entries = self.off = None

    @staticmethod
    def _sorts_by(plan):
        """What a plan's sort depends on (W, Wk and the buckets follow from c and k)."""
        return plan.n, plan.npoints, plan.c, plan.k, plan.indexed

    @staticmethod
    def shape(plan, d_scalars_ptr, d_idx_ptr, mont):
        return SortShare._sorts_by(plan) + (int(d_scalars_ptr), int(d_idx_ptr), int(mont))

    @staticmethod
    def compatible(a, b):
        """Whether plans ``a`` and ``b`` sort alike (the groups and level 0 may differ)."""
        return SortShare._sorts_by(a) == SortShare._sorts_by(b)

    @staticmethod
    def offsets_bytes(plan):
        """Pool bytes of the offsets' copy, which the first MSM holds beside its scratch."""
        return _align((plan.nb + 1) * 8) if plan.n else 0

    @staticmethod
    def kept_bytes(plan):
        """Pool bytes held between the two MSMs: the entries and the offsets' copy."""
        return _align(dict(plan.buffers)["entries"]) + SortShare.offsets_bytes(plan) if plan.n else 0

    def release(self, stream):
        """Free what a first MSM kept and no second one took (an abandoned share)."""
        for b in (self.entries, self.off):
            if b is not None:
                b.free(stream)
        self.entries = self.off = self.key = None


def enqueue_msm(plan, stream, pool, d_points_ptr, d_scalars_ptr, host_view, d_idx_ptr=0,
                scalar_form="canonical", keep_sort=None, sorted_from=None):
    """Enqueue Σ scalars[i]·points[i] (or points[idx[i]]) on ``stream``; no host synchronization.

    Parameters
    ----------
    plan : MsmPlan
    stream : Stream
    pool : MemPool
        Scratch (``plan.scratch_bytes``) is allocated and freed stream-ordered on ``stream``.
    d_points_ptr : int
        Device affine bases in the CPU layout (``AFFINE_WORDS[group]`` uint64 per point, all-zero
        = infinity); with ``plan.k > 1`` the table filled by ``precompute_bases``.  16-byte
        aligned (128-bit loads), as every pool allocation is.
    d_scalars_ptr : int
        Device scalars uint64 (n, 4) in ``scalar_form``; canonical < 2^255, Montgomery < r (not
        checked on the device).  16-byte aligned.
    host_view : numpy.ndarray
        uint64 (plan.host_rows, XYZZ_WORDS[group]), pinned; written by a device-to-host copy on
        ``stream``.
    d_idx_ptr : int
        Device uint32 (n,) base indices < npoints when ``plan.indexed``, else 0.
    scalar_form : {"canonical", "montgomery"}
    keep_sort : SortShare or None
        An empty share: keep this MSM's sort in it for a later MSM (``SortShare``).
    sorted_from : SortShare or None
        A share filled by an earlier MSM on this stream over the same scalars, indices and plan
        shape: its sort is used (and freed) instead of sorting.

    Returns
    -------
    PendingPoint (ReadyPoint infinity when n == 0); ``.value()`` after the stream is synchronized.

    Raises
    ------
    ValueError
        A bad scalar_form, a host_view of the wrong shape, an index pointer that does not match
        ``plan.indexed``, a ``keep_sort`` already filled, a ``sorted_from`` that is empty or from
        another shape.
    """
    if scalar_form not in SCALAR_FORMS:
        raise ValueError(f"scalar_form must be one of {SCALAR_FORMS}, got {scalar_form!r}")
    if bool(d_idx_ptr) != plan.indexed:
        raise ValueError("d_idx_ptr must be given exactly when the plan is indexed")
    mont = 1 if scalar_form == "montgomery" else 0
    shape = SortShare.shape(plan, d_scalars_ptr, d_idx_ptr, mont)
    if keep_sort is not None and keep_sort.entries is not None:
        raise ValueError("keep_sort already holds a sort")
    if sorted_from is not None and (sorted_from.entries is None or sorted_from.key != shape):
        raise ValueError("sorted_from holds no sort of these scalars, indices and plan shape")
    g = plan.group
    if plan.n == 0:
        return ReadyPoint(np.zeros(AFFINE_WORDS[g], dtype=np.uint64))
    rows = XYZZ_WORDS[g]
    if not isinstance(host_view, np.ndarray) or host_view.dtype != np.uint64 \
            or host_view.shape != (plan.host_rows, rows) or not host_view.flags.c_contiguous:
        raise ValueError(f"host_view must be C-contiguous uint64 ({plan.host_rows}, {rows})")
    d = _driver()
    st = _state(plan.device)
    s = stream
    buf = {}
    marks = []

    def mark(name):
        if _PROFILE:
            s.synchronize()
            marks.append((name, time.perf_counter()))

    n, c, Wk, nb, S, sm = plan.n, plan.c, plan.Wk, plan.nb, plan.S, plan.sm_count
    try:
        if sorted_from is not None:       # the earlier MSM's entries and offsets, freed below
            buf["entries"], buf["off_a"] = sorted_from.entries, sorted_from.off
            sorted_from.entries = sorted_from.off = sorted_from.key = None
        # a kept sort outlives this MSM: from the pool's long-lived end where it has one
        # (``_stages._cuda._Arena.alloc_keep``)
        keep_alloc = getattr(pool, "alloc_keep", pool.alloc) if keep_sort is not None else None
        for name, nbytes in plan.buffers:
            if name not in buf and not (name == "counts" and sorted_from is not None):
                alloc = keep_alloc if keep_alloc and name == "entries" else pool.alloc
                buf[name] = alloc(_align(nbytes), s)
        ptr = {name: b.ptr for name, b in buf.items()}
        mark("start")
        if sorted_from is None:
            _sort(st, s, plan, ptr, d_scalars_ptr, d_idx_ptr, mont, mark)
        if keep_sort is not None:         # level 1 overwrites off_a: the share keeps a copy
            buf["kept_off"] = keep_alloc(SortShare.offsets_bytes(plan), s)
            d.copy_dtod(buf["kept_off"].ptr, ptr["off_a"], (nb + 1) * 8, s)
        off, seg = ptr["off_a"], ptr["off_b"]
        sums, other = ptr["sums_a"], ptr["sums_b"]
        bound = dict(plan.buffers)["sums_a"] // (rows * 8)
        flat = plan.balance in _FLAT_LEVEL0
        more = ptr["more"]                 # more[L]: level L left some bucket > 1 sum (msm.cu)
        d.memset_d32(more, 0, plan.levels, s)
        for level in range(plan.levels):
            need = more + 4 * (level - 1) if level and _SKIP_LEVELS else 0
            _scan(st, s, plan, seg, ptr["tiles"], off=off, flat=flat and level == 0, need=need,
                  more=more + 4 * level)
            grid = _grid(bound, _SUM_THREADS, sm, 8)
            if level == 0:
                _launch_level0(st, s, plan, sums, seg, off, ptr["entries"], d_points_ptr, bound,
                               ptr.get("lanes", 0))
            else:
                st.fn("cuzk_msm_sum_partials_" + g).launch(
                    s, grid, _SUM_THREADS, [("P", other), ("P", seg), ("P", off), ("P", sums),
                                            ("I", nb), ("I", S), ("P", need)])
                sums, other = other, sums
            off, seg = seg, off            # this level's segment offsets index its sums
            bound = -(-bound // S) + nb
            mark(f"level{level}")
        # even levels wrote sums_a at off_b, odd ones sums_b at off_a; the kernel reads the last
        # level that ran (a level after one that left every bucket <= 1 sum returns at once)
        st.fn("cuzk_msm_windows_" + g, plan.segs * rows * 8).launch(
            s, Wk * plan.P, plan.segs, [("P", ptr["windows"]), ("P", ptr["sums_a"]), ("P", ptr["off_b"]),
                                        ("P", ptr["sums_b"]), ("P", ptr["off_a"]), ("P", more),
                                        ("I", plan.levels), ("I", c), ("I", plan.P)],
            shmem=plan.segs * rows * 8)
        d.copy_dtoh(host_view, ptr["windows"], host_view.nbytes, s)
        mark("windows")
        if _PROFILE:
            steps = " ".join(f"{b[0]}={1e3 * (b[1] - a[1]):.2f}" for a, b in zip(marks, marks[1:]))
            log.warning("msm %s n=%d N=%d c=%d k=%d S=%d: %s ms", g, n, plan.npoints, c, plan.k, S, steps)
        if keep_sort is not None:         # handed over: freed by the MSM that takes them
            keep_sort.entries, keep_sort.off = buf.pop("entries"), buf.pop("kept_off")
            keep_sort.key = shape
    finally:
        for b in buf.values():
            b.free(s)
    return PendingPoint(host_view, g, Wk, plan.P, c)


def precompute_bases(plan, stream, d_points_ptr, d_table_ptr):
    """Enqueue the table of ``plan.k`` shifted copies of the bases on ``stream``:
    table[q·N + j] = 2^(q·c·Wk)·points[j] (affine, the bases' layout; ``plan.precompute_bytes``
    bytes at ``d_table_ptr``, which the caller allocates and accounts).  Built once per resident
    key; any plan with the same (group, npoints, c, k) reads it.  Cost per point: (k − 1)·c·Wk
    doublings and k − 1 inversions.  ``d_points_ptr == d_table_ptr``: the bases are already in
    copy 0 (a resident key uploads them there)."""
    if plan.k < 2:
        raise ValueError("precompute_bases needs a plan with k >= 2")
    d = _driver()
    st = _state(plan.device)
    N = plan.npoints
    if d_points_ptr != d_table_ptr:
        d.copy_dtod(d_table_ptr, d_points_ptr, N * AFFINE_WORDS[plan.group] * 8, stream)
    st.fn("cuzk_msm_precompute_" + plan.group).launch(
        stream, _grid(N, 128, plan.sm_count, 16), 128,
        [("P", d_table_ptr), ("I", N), ("I", plan.k), ("I", plan.c * plan.Wk)])


# ---- numpy conveniences ------------------------------------------------------------------------

def _check_points(points, group):
    w = AFFINE_WORDS[group]
    if not isinstance(points, np.ndarray) or points.dtype != np.uint64 or points.ndim != 2 \
            or points.shape[1] != w:
        raise ValueError(f"points must be a uint64 array of shape (n, {w}) for {group}")
    return np.ascontiguousarray(points)


def _check_scalars(scalars, scalar_form):
    if scalar_form not in SCALAR_FORMS:
        raise ValueError(f"scalar_form must be one of {SCALAR_FORMS}, got {scalar_form!r}")
    if not isinstance(scalars, np.ndarray) or scalars.dtype != np.uint64 or scalars.ndim != 2 \
            or scalars.shape[1] != 4:
        raise ValueError("scalars must be a uint64 array of shape (n, 4)")
    if scalars.shape[0] >= 1 << 32:
        raise ValueError("at most 2^32 - 1 scalars")
    if scalar_form == "canonical":
        big = np.flatnonzero(scalars[:, 3] >> np.uint64(63))
        if big.size:
            raise ValueError(f"scalars[{int(big[0])}] >= 2^255")
    else:
        big = _at_least_r(scalars)
        if big.size:
            raise ValueError(f"scalars[{int(big[0])}] >= r: not a reduced Montgomery value")
    return np.ascontiguousarray(scalars)


def _at_least_r(s):
    """Indices of the rows of s (uint64 (n, 4), little-endian limbs) that are >= r."""
    ge = np.zeros(s.shape[0], dtype=bool)
    eq = np.ones(s.shape[0], dtype=bool)
    for limb in (3, 2, 1, 0):
        r = np.uint64((_R >> (64 * limb)) & (2**64 - 1))
        ge |= eq & (s[:, limb] > r)
        eq &= s[:, limb] == r
    return np.flatnonzero(ge | eq)


# Plain G1 MSMs through the NumPy API (scalars on the host, so they can be looked at) from
# _G1_BATCH_MIN scalars: "batch" wins when chunks are many (uniform scalars: ~W entries each) and
# loses when most scalars are small (one entry each: few chunks, few lanes per thread to share an
# inversion).  H200, 2^24 c = 16 k = 4: bits90 24.06 against flat's 21.05 ms, real_tail 25.89
# against 23.11; uniform 102.6 against 121.6.  So a sample decides: when at least _SKEW_SMALL of
# _SKEW_SAMPLE evenly spaced scalars are < 2^16, the plan takes the default below "batch".
_SKEW_SAMPLE, _SKEW_SMALL = 1024, 0.5


def _skewed(scalars, scalar_form):
    """Whether at least ``_SKEW_SMALL`` of an evenly spaced sample of ``scalars`` (uint64 (n, 4)
    in ``scalar_form``) is below 2^16."""
    n = scalars.shape[0]
    if n == 0:
        return False
    sample = np.ascontiguousarray(scalars[:: max(1, n // _SKEW_SAMPLE)][:_SKEW_SAMPLE])
    if scalar_form == "montgomery":
        from ._assignment import fr_from_mont
        sample = fr_from_mont(sample)
    small = (sample[:, 1:] == 0).all(axis=1) & (sample[:, 0] < np.uint64(1 << 16))
    return float(small.mean()) >= _SKEW_SMALL


def sampled_balance(group, scalars, scalar_form="canonical", c=None, k=1, indexed=False):
    """The default level-0 balance of an MSM of these host ``scalars`` (uint64 (n, 4) in
    ``scalar_form``; ``c`` and ``k`` as ``msm_plan``'s): ``default_balance`` told whether they are
    ``_skewed``.  Plain or indexed alike: the tails of a witness whose full values are uniform take
    the wide balances as the H MSM does."""
    n = scalars.shape[0]
    c = window_bits(n, k) if c is None else c
    return default_balance(group, indexed, n, c, skewed=_skewed(scalars, scalar_form))


# Plain G1 MSMs of uniform scalars from this many on take c = _G1_WIDE_C instead of the cost
# model's (capped at _C_AUTO_MAX, which suits skewed scalars: few entries, and the buckets of a
# wide window would hold one point each).  H200 (bench/RESULTS.md), uniform, batch level 0:
# 2^27 k = 4 c = 20 669.8 ms (session 15) vs c = 16 756.2 (session 16); 2^26 k = 2 374.5 vs
# 392.9 (session 9); 2^24 k = 4 c = 16 102.6 vs c = 20 110.4 (session 9), so 2^24 keeps 16.
# The prover's H MSM has its own table (_stages/_cuda.py _AUTO_H: c = 20 at 2^27).  With k = W(20)
# = 13 copies every window shares one bucket set (Wk = 1) and c = 20 pays from 2^24 on (session
# 18: 2^24 91.03 ms against c = 16's 101.88 with k = 4 and 103.69 with k = 13; 2^26 328.12 against
# 353.99 with k = 4): _G1_ONE_SET_MIN.  2^23 and below not measured.  Without copies (k = 1) c = 20
# pays from 2^27 only (H100, session 36, same call: 2^27 769.7 ms against c = 16's 812.1 and
# c = 18's 801.2; 2^26 422.4 against 418.2 and 417.9): _G1_WIDE_MIN_K1.
_G1_WIDE_MIN, _G1_WIDE_C = 1 << 26, 20
_G1_WIDE_MIN_K1 = 1 << 27
_G1_ONE_SET_MIN = 1 << 24
# (k, c) that puts every window of a G1 MSM on one bucket set: W(_G1_WIDE_C) copies at that width
# (also the prover's H MSM choice, _stages/_cuda.py _AUTO_H).
G1_ONE_SET = (_windows(_G1_WIDE_C)[0], _G1_WIDE_C)


def sampled_window(group, scalars, scalar_form="canonical", k=1, indexed=False):
    """The default window width of an MSM of these host ``scalars`` (uint64 (n, 4) in
    ``scalar_form``): ``_G1_WIDE_C`` for plain G1 MSMs that a sample shows are not mostly small
    (``_skewed``) of at least ``_G1_WIDE_MIN`` scalars (``_G1_WIDE_MIN_K1`` without copies), or
    of ``_G1_ONE_SET_MIN`` with k = W(20) copies (one bucket set), else ``window_bits(n, k)``."""
    return default_window(group, scalars.shape[0], k, indexed, _skewed(scalars, scalar_form))


def default_window(group, n, k=1, indexed=False, skewed=False):
    """``sampled_window``'s choice for n scalars that ``_skewed`` found skewed or not (callers
    that know their scalars, like the prover's H MSM over uniform ones, ask it directly)."""
    W = G1_ONE_SET[0]
    least = _G1_WIDE_MIN_K1 if k == 1 else _G1_WIDE_MIN
    wide = group == "g1" and not indexed and k <= W and (n >= least or (k == W and n >= _G1_ONE_SET_MIN))
    return _G1_WIDE_C if wide and not skewed else window_bits(n, k)


def _run(group, points, scalars, idx, device, stream, c, scalar_form, k, segment, balance=None):
    n, N = scalars.shape[0], points.shape[0]
    if n == 0 or N == 0:
        return np.zeros(AFFINE_WORDS[group], dtype=np.uint64)
    d = _driver()
    st = _state(device)
    if c is None or balance is None:                     # sampled_window, sampled_balance: one sample
        skewed = _skewed(scalars, scalar_form)
        if c is None:
            c = default_window(group, n, k, idx is not None, skewed)
        if balance is None:
            balance = default_balance(group, idx is not None, n, c, skewed=skewed)
    plan = msm_plan(n, group, st.device, npoints=N, c=c, indexed=idx is not None, k=k, segment=segment,
                    balance=balance)
    s = stream if stream is not None else st.streams()[0]
    bufs = []

    def upload(a):
        b = st.pool.alloc(max(a.nbytes, 4), s)
        bufs.append(b)
        d.copy_htod(b, a, a.nbytes, s)
        return b.ptr

    try:
        d_pts, d_sc = upload(points), upload(scalars)
        d_idx = upload(idx) if idx is not None else 0
        if k > 1:
            table = st.pool.alloc(plan.precompute_bytes, s)
            bufs.append(table)
            precompute_bases(plan, s, d_pts, table.ptr)
            d_pts = table.ptr
        host = np.zeros((plan.host_rows, XYZZ_WORDS[group]), dtype=np.uint64)
        pending = enqueue_msm(plan, s, st.pool, d_pts, d_sc, host, d_idx, scalar_form)
        s.synchronize()
    finally:
        for b in bufs:
            b.free(s)
    return pending.value()


def _check_idx(idx, n, N):
    idx = np.ascontiguousarray(idx)
    if idx.ndim != 1 or idx.shape[0] != n or not np.issubdtype(idx.dtype, np.integer):
        raise ValueError(f"idx must be an integer array of shape ({n},)")
    if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= N):
        bad = int(np.flatnonzero((idx < 0) | (idx >= N))[0])
        raise ValueError(f"idx[{bad}] = {int(idx[bad])} is outside [0, {N})")
    return idx.astype(np.uint32)


def _msm(group, points, scalars, device, stream, c, scalar_form, k, segment, balance=None):
    points = _check_points(points, group)
    scalars = _check_scalars(scalars, scalar_form)
    if points.shape[0] != scalars.shape[0]:
        raise ValueError(f"points and scalars differ in length: {points.shape[0]} vs {scalars.shape[0]}")
    return _run(group, points, scalars, None, device, stream, c, scalar_form, k, segment, balance)


def _msm_indexed(group, points, scalars, idx, device, stream, c, scalar_form, k, segment, balance=None):
    points = _check_points(points, group)
    scalars = _check_scalars(scalars, scalar_form)
    idx = _check_idx(idx, scalars.shape[0], points.shape[0])
    return _run(group, points, scalars, idx, device, stream, c, scalar_form, k, segment, balance)


def msm_g1(points, scalars, device=None, stream=None, c=None, scalar_form="canonical", k=1, segment=None,
           balance=None):
    """Σ scalars[i]·points[i] over G1 on the GPU (uploads, enqueues, synchronizes).

    Parameters
    ----------
    points : numpy.ndarray
        uint64 (n, 12): affine Montgomery G1 points (all-zero rows: infinity), the CPU layout.
    scalars : numpy.ndarray
        uint64 (n, 4): canonical scalars < 2^255, or Montgomery ones < r (``scalar_form``).
    device : Device, int or None
    stream : Stream or None
        None: a stream private to the calling thread.
    c, k, segment, balance
        As ``msm_plan`` (k > 1: the copies are precomputed for this call); c None:
        ``sampled_window``, balance None: ``sampled_balance``.
    scalar_form : {"canonical", "montgomery"}

    Returns
    -------
    numpy.ndarray
        uint64 (12,): the affine Montgomery sum (all-zero = infinity), the bytes of
        ``cuzk._native._msm.msm(points, scalars, "g1")`` (for canonical scalars).

    Raises
    ------
    ValueError
        Bad shapes or dtypes, lengths that differ, a scalar out of range for its form.
    """
    return _msm("g1", points, scalars, device, stream, c, scalar_form, k, segment, balance)


def msm_g1_indexed(points, scalars, idx, device=None, stream=None, c=None, scalar_form="canonical", k=1,
                   segment=None, balance=None):
    """Σ scalars[i]·points[idx[i]] over G1 on the GPU (the prover's tail MSMs): the bytes of
    ``cuzk._native._msm.msm_indexed(points, scalars, idx, "g1")``.  ``points`` uint64 (N, 12),
    ``scalars`` uint64 (n, 4), ``idx`` integer (n,) in [0, N); other parameters as ``msm_g1``.
    ValueError for an index outside [0, N)."""
    return _msm_indexed("g1", points, scalars, idx, device, stream, c, scalar_form, k, segment, balance)


def msm_g2(points, scalars, device=None, stream=None, c=None, scalar_form="canonical", k=1, segment=None,
           balance=None):
    """``msm_g1`` over G2: ``points`` uint64 (n, 24) affine Montgomery G2 (x.c0, x.c1, y.c0,
    y.c1), returns uint64 (24,), the bytes of ``cuzk._native._msm.msm(points, scalars, "g2")``."""
    return _msm("g2", points, scalars, device, stream, c, scalar_form, k, segment, balance)


def msm_g2_indexed(points, scalars, idx, device=None, stream=None, c=None, scalar_form="canonical", k=1,
                   segment=None, balance=None):
    """``msm_g1_indexed`` over G2 (points uint64 (N, 24), result uint64 (24,))."""
    return _msm_indexed("g2", points, scalars, idx, device, stream, c, scalar_form, k, segment, balance)
