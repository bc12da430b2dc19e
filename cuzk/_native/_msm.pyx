# cython: language_level=3
"""Pippenger MSM and bitmap batch addition over BLS12-381 G1/G2 on the CPU (cuzk/msm.hpp).

Arrays are NumPy uint64, C-contiguous, in the in-memory layout of cuzk: affine Montgomery
points (G1 ``(n, 12)``, G2 ``(n, 24)``, all-zero rows = infinity) and canonical little-endian
scalars ``(n, 4)``. Results are affine Montgomery ``(12,)`` / ``(24,)`` (all-zero = infinity).
Every function validates shapes and dtypes (ValueError), then runs without the GIL on
``threads`` OS threads (0 = all cores); results do not depend on ``threads``.
"""
import numpy as np

from cuzk._args import threads_arg
from cuzk._native._pool cimport bind_shared_pool

bind_shared_pool()  # one CPU pool and thread budget for all native modules (_pool.pxd)
cimport numpy as cnp
from libc.stdint cimport uint32_t, uint64_t
from libc.stddef cimport size_t

cnp.import_array()

__all__ = ["msm", "msm_indexed", "batch_add", "cpu_features"]

_WIDTH = {"g1": 12, "g2": 24}


cdef int _group(str group) except -1:
    if group == "g1":
        return 1
    if group == "g2":
        return 2
    raise ValueError(f"group must be 'g1' or 'g2', got {group!r}")


cdef size_t _threads(threads) except? 0:
    return threads_arg(threads)


def _points(name, a, str group):
    w = _WIDTH[group]
    if not isinstance(a, np.ndarray) or a.dtype != np.uint64 or a.ndim != 2 or a.shape[1] != w:
        raise ValueError(f"{name}: expected a uint64 array of shape (n, {w}) (affine Montgomery "
                         f"{group.upper()}), got {_describe(a)}")
    if not a.flags.c_contiguous:
        raise ValueError(f"{name}: array must be C-contiguous")
    return a


def _scalars(a, size_t n):
    if not isinstance(a, np.ndarray) or a.dtype != np.uint64 or a.ndim != 2 or a.shape[1] != 4:
        raise ValueError(f"scalars: expected a uint64 array of shape (n, 4) (canonical Fr), "
                         f"got {_describe(a)}")
    if <size_t>a.shape[0] != n:
        raise ValueError(f"scalars: {a.shape[0]} rows for {n} points")
    if not a.flags.c_contiguous:
        raise ValueError("scalars: array must be C-contiguous")
    cdef const uint64_t[:, ::1] v = a
    cdef size_t i, bad = n
    with nogil:
        for i in range(n):
            if v[i, 3] >> 63:
                bad = i
                break
    if bad < n:
        raise ValueError(f"scalars[{bad}] is not a canonical Fr scalar (>= 2^255)")
    return a


def _describe(a):
    if isinstance(a, np.ndarray):
        return f"dtype {a.dtype}, shape {a.shape}"
    return type(a).__name__


_ISA_BITS = ("bmi2", "adx", "avx2", "avx512f", "avx512ifma")


def cpu_features():
    """What this build assumes of the CPU and which MSM paths the running CPU takes.

    Returns
    -------
    dict
        ``compiled_for``: the ISA extensions the extension was compiled to assume (from the
        compiler's predefined macros; empty for the default portable build, which runs on any
        x86-64 CPU; ``CUZK_NATIVE_ARCH=1`` builds list the build host's). ``adx``: the mulx/adx
        field arithmetic is used (BMI2 + ADX detected at run time: the MSM, the NTT and the Fq
        product of every native module). ``ifma``: the AVX-512 IFMA
        lanes are used (compiled in, detected at run time, and ``CUZK_CPU_IFMA`` is not "0").
        ``ifma_compiled``: the lane code is in this build (every x86-64 build with GCC >= 8 or
        clang).
    """
    cdef unsigned c = msm_compiled_isa(), r = msm_runtime_isa()
    return {
        "compiled_for": [n for i, n in enumerate(_ISA_BITS) if (c >> i) & 1],
        "adx": bool(r & 1),
        "ifma": bool(r & 2),
        "ifma_compiled": bool(r & 4),
    }


cdef msm_config _config(dict tune):
    cdef msm_config cfg = msm_config()
    if tune:
        cfg.window = tune.get("window", 0)
        cfg.ranges = tune.get("ranges", 0)
        cfg.block = tune.get("block", 0)
        cfg.batch = tune.get("batch", 0)
        cfg.small = tune.get("small", 0)
        cfg.scratch = tune.get("scratch", 0)
        cfg.group = tune.get("group", 0)
        cfg.portable = 1 if tune.get("portable", False) else 0
        cfg.no_simd = 1 if tune.get("no_simd", False) else 0
    return cfg


def msm(points, scalars, str group, threads=0, *, _tune=None):
    """Multi-scalar multiplication Σ scalars[i]·points[i] (Pippenger, signed windows).

    Parameters
    ----------
    points : ndarray uint64, shape (n, 12) for G1 or (n, 24) for G2, C-contiguous
        Affine Montgomery points; all-zero rows are the point at infinity (skipped).
    scalars : ndarray uint64, shape (n, 4), C-contiguous
        Canonical little-endian scalars (the caller checks < r; values >= 2^255 raise).
    group : {"g1", "g2"}
    threads : int
        Worker threads, 0 = all cores. The GIL is released while they run.

    Returns
    -------
    ndarray uint64 of shape (12,) or (24,): the affine Montgomery sum (all-zero = infinity).

    Raises
    ------
    ValueError
        Bad group, dtype, shape, contiguity, thread count, or a scalar >= 2^255 (first index).
    """
    cdef int g = _group(group)
    points = _points("points", points, group)
    cdef size_t n = points.shape[0]
    scalars = _scalars(scalars, n)
    cdef size_t nt = _threads(threads)
    cdef msm_config cfg = _config(_tune)
    out = np.zeros(_WIDTH[group], dtype=np.uint64)
    if n == 0:
        return out
    cdef uint64_t[::1] o = out
    cdef const uint64_t[:, ::1] p = points
    cdef const uint64_t[:, ::1] s = scalars
    with nogil:
        msm_u64(g, &o[0], &p[0, 0], &s[0, 0], n, nt, cfg)
    return out


def msm_indexed(points, scalars, idx, str group, threads=0, *, _tune=None):
    """Σ scalars[i]·points[idx[i]]: an MSM over (scalar, base index) pairs (the prover's tails).

    Parameters
    ----------
    points : ndarray uint64 (N, 12) / (N, 24), C-contiguous
        The base array (affine Montgomery, all-zero = infinity).
    scalars : ndarray uint64 (m, 4), C-contiguous
        Canonical scalars, < 2^255.
    idx : ndarray uint32 or uint64, shape (m,), C-contiguous
        Indices into ``points``; each must be < N (repeats allowed).
    group : {"g1", "g2"}
    threads : int
        Worker threads, 0 = all cores.

    Returns
    -------
    ndarray uint64 (12,) / (24,), affine Montgomery.

    Raises
    ------
    ValueError
        Bad shapes or dtypes, an index out of range or a scalar >= 2^255 (first bad index named).
    """
    cdef int g = _group(group)
    points = _points("points", points, group)
    cdef size_t nbase = points.shape[0]
    if (not isinstance(idx, np.ndarray) or idx.ndim != 1
            or idx.dtype not in (np.dtype(np.uint32), np.dtype(np.uint64))):
        raise ValueError(f"idx: expected a uint32 or uint64 array of shape (m,), got {_describe(idx)}")
    if not idx.flags.c_contiguous:
        raise ValueError("idx: array must be C-contiguous")
    cdef size_t m = idx.shape[0]
    scalars = _scalars(scalars, m)
    cdef size_t nt = _threads(threads)
    cdef msm_config cfg = _config(_tune)
    out = np.zeros(_WIDTH[group], dtype=np.uint64)
    if m == 0:
        return out
    cdef const uint64_t[::1] i64
    cdef const uint32_t[::1] i32
    cdef const uint64_t* p64 = NULL
    cdef const uint32_t* p32 = NULL
    cdef size_t i, bad = m
    if idx.dtype == np.uint64:
        i64 = idx
        p64 = &i64[0]
        with nogil:
            for i in range(m):
                if p64[i] >= nbase:
                    bad = i
                    break
    else:
        i32 = idx
        p32 = &i32[0]
        with nogil:
            for i in range(m):
                if p32[i] >= nbase:
                    bad = i
                    break
    if bad < m:
        raise ValueError(f"idx[{bad}] = {int(idx[bad])} is out of range for {nbase} points")
    cdef uint64_t[::1] o = out
    cdef const uint64_t[:, ::1] p = points
    cdef const uint64_t[:, ::1] s = scalars
    with nogil:
        msm_indexed_u64(g, &o[0], &p[0, 0], &s[0, 0], p64, p32, m, nt, cfg)
    return out


def batch_add(points, bitmap_words, str group, threads=0, *, _tune=None):
    """Sum of the points selected by a bitmap: Σ points[i] over set bits i.

    Parameters
    ----------
    points : ndarray uint64 (n, 12) / (n, 24), C-contiguous
        Affine Montgomery points (all-zero = infinity).
    bitmap_words : ndarray uint64, shape (w,), w >= ceil(n / 64), C-contiguous
        Bit i of word i // 64 (LSB first) selects point i; bits at positions >= n must be clear.
    group : {"g1", "g2"}
    threads : int
        Worker threads, 0 = all cores.

    Returns
    -------
    ndarray uint64 (12,) / (24,), affine Montgomery (all-zero = infinity).

    Raises
    ------
    ValueError
        Bad shapes or dtypes, too few words, or a set bit at a position >= n (first one named).
    """
    cdef int g = _group(group)
    points = _points("points", points, group)
    cdef size_t n = points.shape[0]
    cdef size_t need = (n + 63) // 64
    if (not isinstance(bitmap_words, np.ndarray) or bitmap_words.dtype != np.uint64
            or bitmap_words.ndim != 1 or <size_t>bitmap_words.shape[0] < need):
        raise ValueError(f"bitmap_words: expected a uint64 array of shape (>= {need},) for {n} "
                         f"points, got {_describe(bitmap_words)}")
    if not bitmap_words.flags.c_contiguous:
        raise ValueError("bitmap_words: array must be C-contiguous")
    cdef size_t nt = _threads(threads)
    cdef msm_config cfg = _config(_tune)
    cdef size_t nw = bitmap_words.shape[0], k
    cdef const uint64_t[::1] bw
    cdef uint64_t extra
    if nw:
        bw = bitmap_words
        for k in range(n // 64, nw):
            extra = bw[k]
            if k == n // 64:
                extra &= ~((<uint64_t>1 << (n % 64)) - 1)
            if extra:
                bit = k * 64 + ((extra & -extra).bit_length() - 1)
                raise ValueError(f"bitmap_words: bit {bit} is set but there are only {n} points")
    out = np.zeros(_WIDTH[group], dtype=np.uint64)
    if n == 0:
        return out
    cdef uint64_t[::1] o = out
    cdef const uint64_t[:, ::1] p = points
    with nogil:
        batch_add_u64(g, &o[0], &p[0, 0], n, &bw[0], nt, cfg)
    return out
