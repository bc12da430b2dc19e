# cython: language_level=3
"""NTT over Fr and the Groth16 H stage on the CPU (``cuzk/ntt.hpp``), GIL released.

Every array is ``uint64`` of shape ``(n, 4)``, C-contiguous: n = 2^k little-endian 4-limb
Fr elements in Montgomery form (x·2^256 mod r), fully reduced.  Transforms work in place in
natural order; ω_n = 7^((r-1)/n) and the coset shift is g = 7 (bellperson/arkworks):

* forward:        X[i] = Σ_j x[j]·ω^(ij)
* inverse:        x[j] = n^-1·Σ_i X[i]·ω^(-ij)
* coset forward:  X[i] = Σ_j x[j]·g^j·ω^(ij)
* coset inverse:  x[j] = g^-j·n^-1·Σ_i X[i]·ω^(-ij)
"""

import numpy as np

from cuzk._args import threads_arg
from cuzk._native._pool cimport bind_shared_pool

bind_shared_pool()  # one CPU pool and thread budget for all native modules (_pool.pxd)
cimport numpy as cnp
from libc.stdint cimport uint64_t

cnp.import_array()

__all__ = ["ntt_mont", "h_stage", "domain_root", "MAX_LOG_SIZE"]

MAX_LOG_SIZE = 32


cdef int _check(str name, object v, size_t threads) except -1:
    """Validate one (n, 4) Montgomery array in place; return lg n."""
    if not isinstance(v, np.ndarray):
        raise TypeError(f"{name}: expected a numpy.ndarray, got {type(v).__name__}")
    if v.dtype != np.uint64:
        raise ValueError(f"{name}: expected dtype uint64, got {v.dtype}")
    if v.ndim != 2 or v.shape[1] != 4:
        raise ValueError(f"{name}: expected shape (n, 4), got {v.shape}")
    if not v.flags.c_contiguous:
        raise ValueError(f"{name}: array must be C-contiguous")
    if not v.flags.writeable:
        raise ValueError(f"{name}: array is read-only (the transform works in place)")
    cdef size_t n = v.shape[0]
    if n == 0 or (n & (n - 1)) != 0:
        raise ValueError(f"{name}: length {n} is not a power of two")
    cdef int lg = 0
    while (<size_t>1 << lg) < n:
        lg += 1
    if lg > MAX_LOG_SIZE:
        raise ValueError(f"{name}: length 2^{lg} exceeds 2^{MAX_LOG_SIZE}")
    cdef uint64_t[:, ::1] view = v
    cdef size_t bad
    with nogil:
        bad = ntt_first_noncanonical(&view[0, 0], n, threads)
    if bad != n:
        raise ValueError(f"{name}[{bad}] is not a reduced Montgomery Fr element (>= r)")
    return lg


cdef size_t _threads(object threads) except? 0:
    return threads_arg(threads)


_PATHS = {"auto": 0, "direct": 1, "fourstep": 2}


cdef int _test_flags(bint portable, str path) except -1:
    if path not in _PATHS:
        raise ValueError(f"path must be one of {sorted(_PATHS)}, got {path!r}")
    return (1 if portable else 0) | (_PATHS[path] << 1)


def _ntt(values, bint inverse, bint coset, threads, int flags):
    cdef size_t nt = _threads(threads)
    cdef int lg = _check("values", values, nt)
    cdef uint64_t[:, ::1] v = values
    with nogil:
        ntt_inplace(&v[0, 0], lg, inverse, coset, nt, flags)


def ntt_mont(values, bint inverse=False, bint coset=False, threads=0):
    """Number-theoretic transform over Fr, in place, natural order in and out.

    Parameters
    ----------
    values : ndarray uint64 (n, 4), C-contiguous, writable
        n = 2^k (k <= 32) Fr elements in Montgomery form, each < r.
    inverse : bool
        Interpolate (ω^-1 and the 1/n scaling) instead of evaluate.
    coset : bool
        Work on the coset g·<ω> (g = 7): forward scales x[j] by g^j first, inverse scales the
        result by g^-j.
    threads : int or None
        Worker threads, 0 or None = all cores.  The GIL is released throughout.

    Raises
    ------
    TypeError
        ``values`` is not a NumPy array, or ``threads`` is not an integer.
    ValueError
        Wrong dtype, shape, layout, a length that is not a power of two, a read-only array,
        or an element >= r (the message names the first such index).
    """
    _ntt(values, inverse, coset, threads, 0)


def _ntt_mont_impl(values, bint inverse=False, bint coset=False, threads=0, bint portable=False,
                   str path="auto"):
    """``ntt_mont`` with the implementation pinned, for tests: the portable arithmetic instead of
    the x86 asm, and/or the path ("direct": one contiguous DIF, lg <= 18; "fourstep": lg >= 2).
    Every choice must give the same bytes."""
    _ntt(values, inverse, coset, threads, _test_flags(portable, path))


def _h(a, b, c, threads, int flags):
    cdef size_t nt = _threads(threads)
    cdef int lg = _check("a", a, nt)
    _check("b", b, nt)
    _check("c", c, nt)
    if not (a.shape[0] == b.shape[0] == c.shape[0]):
        raise ValueError(f"a, b, c must have the same length, got {a.shape[0]}, {b.shape[0]}, {c.shape[0]}")
    if lg >= MAX_LOG_SIZE:
        raise ValueError(f"h_stage: at most 2^{MAX_LOG_SIZE - 1} elements (the stage needs a 2n-th root of unity)")
    if np.may_share_memory(a, b) or np.may_share_memory(a, c) or np.may_share_memory(b, c):
        raise ValueError("a, b and c must not overlap")
    cdef uint64_t[:, ::1] va = a, vb = b, vc = c
    with nogil:
        h_stage_inplace(&va[0, 0], &vb[0, 0], &vc[0, 0], lg, nt, flags)


def h_stage(a, b, c, threads=0):
    """Groth16 H stage (bellperson): coefficients of h = (A·B − C)/Z, in place in ``a``.

    ``a, b, c`` hold the evaluations of A·z, B·z, C·z on the domain <ω_n>.  The result is
    bellperson's: iNTT → coset NTT for each, (a·b − c)·(g^n − 1)^-1 on the coset, coset
    iNTT — computed with six transforms instead of those seven, the same field elements
    (``cuzk/_native/include/cuzk/ntt.hpp``, ``detail::h_stage``).  ``a`` receives the n
    coefficients of h (the last is 0 when A·B − C vanishes on the domain); ``b`` and ``c``
    are overwritten (scratch).  n <= 2^31.

    Parameters
    ----------
    a, b, c : ndarray uint64 (n, 4), C-contiguous, writable, Montgomery, same n = 2^k
    threads : int or None
        Worker threads, 0 or None = all cores.  The GIL is released throughout.

    Raises
    ------
    TypeError, ValueError
        As ``ntt_mont``; also for arrays of different lengths or that overlap.
    """
    _h(a, b, c, threads, 0)


def _h_stage_impl(a, b, c, threads=0, bint portable=False, str path="auto", bint seven=False):
    """``h_stage`` with the implementation pinned (see ``_ntt_mont_impl``), for tests and
    benchmarks; ``seven``: bellperson's seven-transform order instead of the six-transform one
    (the same bytes)."""
    _h(a, b, c, threads, _test_flags(portable, path) | (8 if seven else 0))


def domain_root(int lg_n):
    """ω for the domain of size 2^lg_n: 7^((r-1)/2^lg_n), Montgomery form, uint64 (4,).

    Raises
    ------
    ValueError
        ``lg_n`` outside 0 … 32.
    """
    if lg_n < 0 or lg_n > MAX_LOG_SIZE:
        raise ValueError(f"lg_n must be in 0..{MAX_LOG_SIZE}, got {lg_n}")
    out = np.zeros(4, dtype=np.uint64)
    cdef uint64_t[::1] o = out
    ntt_domain_root(&o[0], lg_n)
    return out


from cuzk._constants import FR_MODULUS as _R


def _arith_probe(x, y, w, bint portable=False):
    """Test hook: the internal lazy ops on raw 256-bit integers (x, y < 2r, w < r).

    Returns the integers (x + y, x − y, w·x·2^-256), each < 2r and correct mod r.
    """
    if not (0 <= x < 2 * _R and 0 <= y < 2 * _R and 0 <= w < _R):
        raise ValueError("need x, y < 2r and w < r")
    cdef uint64_t lx[4]
    cdef uint64_t ly[4]
    cdef uint64_t lw[4]
    cdef uint64_t out[12]
    cdef int i
    for i in range(4):
        lx[i] = (x >> (64 * i)) & 0xffffffffffffffff
        ly[i] = (y >> (64 * i)) & 0xffffffffffffffff
        lw[i] = (w >> (64 * i)) & 0xffffffffffffffff
    ntt_arith_probe(lx, ly, lw, out, portable)
    return tuple(sum(int(out[4 * k + i]) << (64 * i) for i in range(4)) for k in range(3))
