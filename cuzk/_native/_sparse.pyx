# cython: language_level=3
"""Witness-side vectors of a snarkjs Groth16 proof on the CPU (``cuzk/sparse.hpp``), GIL released.

``abc_eval`` computes A·w, B·w and C = A·w ∘ B·w from a zkey's coefficient records;
``snarkjs_h`` turns them into snarkjs's H scalars (A·B − C on the odd points of the doubled
domain).  Fr arrays are ``uint64`` ``(n, 4)`` C-contiguous: Montgomery form unless the name
says canonical.
"""
import numpy as np

from cuzk._args import threads_arg
from cuzk._native._pool cimport bind_shared_pool

bind_shared_pool()  # one CPU pool and thread budget for all native modules (_pool.pxd)
cimport numpy as cnp
from libc.stdint cimport uint32_t, uint64_t
from libcpp cimport bool as cbool

cnp.import_array()

__all__ = ["abc_eval", "snarkjs_h"]

cdef extern from "cuzk/sparse.hpp" namespace "cuzk::sparse" nogil:
    cdef cppclass fr_t "cuzk::fr_t":
        pass
    cdef struct coeffs_t:
        const uint32_t* matrix
        const uint32_t* row
        const uint32_t* col
        const uint64_t* value
        size_t nnz
    cdef struct check_t:
        size_t index
        int status
    check_t validate(const coeffs_t& co, size_t n_rows, const uint64_t* w, size_t n_vars,
                     size_t threads)
    cbool rows_sorted(const uint32_t* row, size_t nnz, size_t threads)
    void sort_by_row(const uint32_t* row, size_t nnz, size_t n_rows, uint32_t* order)
    void c_abc_eval "cuzk::sparse::abc_eval"(const coeffs_t& co, const uint32_t* order, const uint64_t* w_canon,
                  size_t n_vars, int lg, uint64_t row_mult, fr_t* a, fr_t* b, fr_t* c,
                  size_t threads)
    void scale_geometric(fr_t* x, size_t n, const fr_t& s, const fr_t& q, size_t threads)
    void h_gather(const fr_t* a, const fr_t* b, const fr_t* c, int lg, uint64_t J,
                  uint64_t* h_canon, size_t threads)
    fr_t fr_one "cuzk::fr_t::one"()
    fr_t fr_from_limbs "cuzk::fr_t::from_limbs"(const uint64_t* v)

_STATUS = {1: "matrix must be 0 (A) or 1 (B)", 2: "constraint must be < the domain size",
           3: "signal must be < the witness length", 4: "value must be < r"}


cdef size_t _threads(object threads) except? 0:
    return threads_arg(threads)


def _u32(name, a, size_t n):
    if not isinstance(a, np.ndarray) or a.dtype != np.uint32 or a.ndim != 1 or a.shape[0] != n:
        raise ValueError(f"{name}: expected a uint32 array of shape ({n},)")
    return np.ascontiguousarray(a)


def _fr(name, a):
    if not isinstance(a, np.ndarray) or a.dtype != np.uint64 or a.ndim != 2 or a.shape[1] != 4:
        raise ValueError(f"{name}: expected a uint64 array of shape (n, 4)")
    return np.ascontiguousarray(a)


def _log2(size_t n):
    if n < 2 or n & (n - 1):
        raise ValueError(f"domain size must be a power of two >= 2, got {n}")
    cdef int lg = 0
    while (<size_t>1 << lg) < n:
        lg += 1
    return lg


def abc_eval(matrix, constraint, signal, value, witness, size_t n, row_mult=1, threads=None):
    """A·w, B·w and C = A·w ∘ B·w from snarkjs coefficient records.

    Parameters
    ----------
    matrix, constraint, signal : ndarray uint32 (nnz,)
        The records of zkey section 4 (matrix 0 = A, 1 = B).
    value : ndarray uint64 (nnz, 4)
        coef·2^512 mod r, canonical limbs (as stored in the zkey).
    witness : ndarray uint64 (n_vars, 4)
        Canonical witness values (as stored in a .wtns).
    n : int
        Domain size (power of two); every constraint must be < n.
    row_mult : int
        Row i lands at index i·row_mult mod n (odd; 1 = natural order).
    threads : int or None
        Worker threads (None or 0 = all cores).  The GIL is released.

    Returns
    -------
    (a, b, c) : ndarray uint64 (n, 4), Montgomery form; rows without records are 0.

    Raises
    ------
    ValueError
        Bad shapes or dtypes, an even ``row_mult``, or the first bad record (matrix, constraint,
        signal out of range, value >= r) or witness value (>= r), by index.
    """
    cdef size_t nt = _threads(threads)
    cdef int lg = _log2(n)
    value = _fr("value", value)
    witness = _fr("witness", witness)
    cdef size_t nnz = value.shape[0], n_vars = witness.shape[0]
    matrix = _u32("matrix", matrix, nnz)
    constraint = _u32("constraint", constraint, nnz)
    signal = _u32("signal", signal, nnz)
    rm = int(row_mult)
    if rm % 2 == 0 or rm < 0:
        raise ValueError(f"row_mult must be a positive odd integer, got {row_mult}")
    cdef uint64_t mult = rm % n
    a = np.zeros((n, 4), dtype=np.uint64)
    b = np.zeros((n, 4), dtype=np.uint64)
    c = np.zeros((n, 4), dtype=np.uint64)
    if nnz == 0:
        return a, b, c
    cdef const uint32_t[::1] vm = matrix, vr = constraint, vs = signal
    cdef const uint64_t[:, ::1] vv = value
    cdef const uint64_t[:, ::1] vw = witness if n_vars else np.zeros((1, 4), np.uint64)
    cdef uint64_t[:, ::1] va = a, vb = b, vc = c
    cdef coeffs_t co
    co.matrix = &vm[0]
    co.row = &vr[0]
    co.col = &vs[0]
    co.value = &vv[0, 0]
    co.nnz = nnz
    cdef check_t chk
    cdef cbool sorted_rows
    with nogil:
        chk = validate(co, n, &vw[0, 0], n_vars, nt)
        sorted_rows = chk.status == 0 and rows_sorted(co.row, nnz, nt)
    if chk.status == 5:
        raise ValueError(f"witness[{chk.index}] is not a canonical Fr element (>= r)")
    if chk.status != 0:
        raise ValueError(f"coefficient {chk.index}: {_STATUS[chk.status]}")
    cdef uint32_t[::1] vo
    cdef const uint32_t* order = NULL
    if not sorted_rows:
        perm = np.empty(nnz, dtype=np.uint32)
        vo = perm
        with nogil:
            sort_by_row(co.row, nnz, n, &vo[0])
        order = &vo[0]
    with nogil:
        c_abc_eval(co, order, &vw[0, 0], n_vars, lg, mult, <fr_t*>&va[0, 0], <fr_t*>&vb[0, 0],
                 <fr_t*>&vc[0, 0], nt)
    return a, b, c


def snarkjs_h(a, b, c, J, threads=None):
    """snarkjs's H MSM scalars from the evaluations of A·w, B·w, C·w on cuzk's domain.

    Parameters
    ----------
    a, b, c : ndarray uint64 (n, 4), C-contiguous, writable, Montgomery, n = 2^k (k < 32)
        Evaluations at ω_n^k (ω from generator 7), e.g. from ``abc_eval(..., row_mult=J)``.
        Overwritten (scratch).
    J : int
        The odd exponent with ω5_(2^32) = ω7_(2^32)^J (see ``cuzk._snarkjs_prover``).
    threads : int or None
        Worker threads (None or 0 = all cores).  The GIL is released.

    Returns
    -------
    ndarray uint64 (n, 4), canonical: h[j] = (A·B − C)(ω5_2n^(2j+1)), snarkjs's order.

    Raises
    ------
    ValueError
        Bad shapes, lengths, overlap, a read-only array, an even J.
    """
    cdef size_t nt = _threads(threads)
    for name, v in (("a", a), ("b", b), ("c", c)):
        if (not isinstance(v, np.ndarray) or v.dtype != np.uint64 or v.ndim != 2
                or v.shape[1] != 4 or not v.flags.c_contiguous or not v.flags.writeable):
            raise ValueError(f"{name}: expected a writable C-contiguous uint64 array (n, 4)")
    cdef size_t n = a.shape[0]
    if b.shape[0] != n or c.shape[0] != n:
        raise ValueError(f"a, b, c lengths differ: {a.shape[0]}, {b.shape[0]}, {c.shape[0]}")
    if np.may_share_memory(a, b) or np.may_share_memory(a, c) or np.may_share_memory(b, c):
        raise ValueError("a, b and c must not overlap")
    cdef int lg = _log2(n)
    if lg >= 32:
        raise ValueError(f"domain 2^{lg} too large: the doubled domain must fit in 2^32")
    j = int(J)
    if j % 2 == 0 or j < 0:
        raise ValueError(f"J must be a positive odd integer, got {J}")
    cdef uint64_t Jm = j % (2 * n)
    from cuzk._native import _ntt
    # ω_2n (Montgomery), from cuzk's generator-7 domain
    cdef uint64_t[::1] w2n = np.ascontiguousarray(_ntt.domain_root(lg + 1), dtype=np.uint64)
    cdef fr_t q = fr_from_limbs(&w2n[0])
    cdef fr_t one = fr_one()
    cdef uint64_t[:, ::1] mv
    for arr in (a, b, c):
        # evaluations -> coefficients -> ×ω_2n^i -> values at ω_2n^(2k+1); each step nogil
        _ntt.ntt_mont(arr, inverse=True, threads=nt)
        mv = arr
        with nogil:
            scale_geometric(<fr_t*>&mv[0, 0], n, one, q, nt)
        _ntt.ntt_mont(arr, inverse=False, threads=nt)
    out = np.empty((n, 4), dtype=np.uint64)
    cdef uint64_t[:, ::1] va = a, vb = b, vc = c, vo = out
    with nogil:
        h_gather(<const fr_t*>&va[0, 0], <const fr_t*>&vb[0, 0], <const fr_t*>&vc[0, 0], lg, Jm,
                 &vo[0, 0], nt)
    return out
