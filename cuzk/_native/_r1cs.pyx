# cython: language_level=3
"""Native R1CS and parameter-generation kernels (CPU, GIL released).

Arrays follow the Groth16 data model (``notes/groth16_api.md``): Fr is uint64 ``(n, 4)``
Montgomery, G1 affine uint64 ``(n, 12)``, G2 affine uint64 ``(n, 24)`` (x.c0, x.c1, y.c0,
y.c1), the point at infinity all-zero.  CSR matrices are ``indptr`` int64 ``(m+1,)``,
``cols`` uint32 ``(nnz,)``, ``vals`` uint64 ``(nnz, 4)``.

Every function checks what the native code relies on (dtypes, shapes, contiguity, indptr
monotone from 0 to nnz, column indices in range: O(nnz) integer work, negligible next to the
field products) and raises ValueError otherwise.  ``threads=None`` or 0 uses every hardware
thread.
"""

cimport cython
from libc.stdint cimport uint32_t, uint64_t, int64_t
from libcpp cimport bool as cbool

import numpy as np

from cuzk._args import threads_arg
from cuzk._native._pool cimport bind_shared_pool

bind_shared_pool()  # one CPU pool and thread budget for all native modules (_pool.pxd)

__all__ = [
    "spmv", "spmv_t", "fix_pivots", "geometric", "lagrange_coeffs", "qap_combine",
    "fr_first_unreduced", "fr_first_zero", "first_unsatisfied", "fixed_base_mul",
    "fixed_base_window", "column_bits", "gather_rows",
]


cdef extern from "cuzk/r1cs.hpp" namespace "cuzk" nogil:
    cdef cppclass fr_t:
        pass
    cdef cppclass g1_affine_t:
        pass
    cdef cppclass g2_affine_t:
        pass


cdef extern from "cuzk/r1cs.hpp" nogil:
    void c_spmv "cuzk::r1cs::spmv"(const int64_t* indptr, const uint32_t* cols, const fr_t* vals,
                                    size_t m, const fr_t* z, fr_t* out, size_t threads)
    void c_spmv_t "cuzk::r1cs::spmv_t"(const int64_t* indptr, const uint32_t* cols,
                                        const fr_t* vals, size_t m, const fr_t* y, size_t n_vars,
                                        fr_t* out, size_t threads)
    int64_t c_fix_pivots "cuzk::r1cs::fix_pivots"(const int64_t* indptr, const uint32_t* cols,
                                                   fr_t* vals, size_t m, const fr_t* z,
                                                   const fr_t* a, const fr_t* b, size_t threads)
    void c_geometric "cuzk::r1cs::geometric"(const fr_t& first, const fr_t& ratio, size_t n,
                                              fr_t* out, size_t threads)
    cbool c_lagrange "cuzk::r1cs::lagrange_coeffs"(const fr_t& tau, const fr_t& omega, size_t n,
                                                    fr_t* out, size_t threads)
    void c_qap_combine "cuzk::r1cs::qap_combine"(const fr_t* u, const fr_t* v, const fr_t* w,
                                                  const fr_t& alpha, const fr_t& beta,
                                                  const fr_t& s, size_t n, fr_t* out,
                                                  size_t threads)
    int64_t c_fr_first_unreduced "cuzk::r1cs::fr_first_unreduced"(const uint64_t* limbs, size_t n,
                                                                   size_t threads)
    int64_t c_fr_first_zero "cuzk::r1cs::fr_first_zero"(const fr_t* a, size_t n, size_t threads)
    size_t c_gather_rows "cuzk::r1cs::gather_rows"(const fr_t* src, const uint64_t* words,
                                                   size_t n_bits, fr_t* out, size_t out_rows,
                                                   size_t threads)
    void c_column_bits "cuzk::r1cs::column_bits"(const uint32_t* cols, const fr_t* vals,
                                                  size_t nnz, size_t j0, size_t j1,
                                                  uint64_t* words, size_t threads)
    int64_t c_first_decrease "cuzk::r1cs::first_decrease"(const int64_t* a, size_t n,
                                                           size_t threads)
    int64_t c_first_col_at_least "cuzk::r1cs::first_col_at_least"(const uint32_t* cols,
                                                                   size_t nnz, uint64_t n_cols,
                                                                   size_t threads)
    int64_t c_first_unsatisfied "cuzk::r1cs::first_unsatisfied"(const fr_t* a, const fr_t* b,
                                                                 const fr_t* c, size_t m,
                                                                 size_t threads)
    # generators (Montgomery affine), from the constants header via ec.hpp
    g1_affine_t g1_generator "cuzk::g1_affine_t::generator"()
    g2_affine_t g2_generator "cuzk::g2_affine_t::generator"()


cdef extern from "cuzk/r1cs.hpp" namespace "cuzk::r1cs" nogil:
    cdef cppclass g1_fixed_base_t:
        g1_fixed_base_t()
        @staticmethod
        size_t choose_window(size_t n)
        void build(const g1_affine_t& base, size_t window, size_t threads)
        void mul(const fr_t* scalars, size_t n, g1_affine_t* out, size_t threads)
    cdef cppclass g2_fixed_base_t:
        g2_fixed_base_t()
        void build(const g2_affine_t& base, size_t window, size_t threads)
        void mul(const fr_t* scalars, size_t n, g2_affine_t* out, size_t threads)


cdef inline size_t _threads(object threads) except? 0:
    return threads_arg(threads)


cdef object _fr_array(object a, str name, object n=None):
    """Check a C-contiguous uint64 (n, 4) array; return it."""
    if not isinstance(a, np.ndarray) or a.dtype != np.uint64 or a.ndim != 2 or a.shape[1] != 4:
        raise ValueError(f"{name} must be a uint64 array of shape (n, 4)")
    if not a.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous")
    if n is not None and a.shape[0] != n:
        raise ValueError(f"{name} has {a.shape[0]} rows, expected {n}")
    return a


cdef object _fr_scalar(object a, str name):
    a = np.ascontiguousarray(a, dtype=np.uint64).reshape(-1)
    if a.shape[0] != 4:
        raise ValueError(f"{name} must be one Fr element (4 uint64 limbs)")
    return a


cdef object _out_fr(object out, size_t n, str name="out"):
    if out is None:
        return np.empty((n, 4), dtype=np.uint64)
    _fr_array(out, name, n)
    if not out.flags.writeable:
        raise ValueError(f"{name} must be writable")
    return out


cdef tuple _csr(object indptr, object cols, object vals, object n_cols, size_t threads):
    if not (isinstance(indptr, np.ndarray) and indptr.dtype == np.int64 and indptr.ndim == 1
            and indptr.flags.c_contiguous and indptr.shape[0] >= 1):
        raise ValueError("indptr must be a C-contiguous int64 array of shape (m+1,)")
    if not (isinstance(cols, np.ndarray) and cols.dtype == np.uint32 and cols.ndim == 1
            and cols.flags.c_contiguous):
        raise ValueError("cols must be a C-contiguous uint32 array of shape (nnz,)")
    _fr_array(vals, "vals", cols.shape[0])
    nnz = cols.shape[0]
    if indptr[0] != 0 or indptr[indptr.shape[0] - 1] != nnz:
        raise ValueError("indptr must start at 0 and end at nnz")
    cdef const int64_t[::1] ip = indptr
    cdef const uint32_t[::1] cc = cols
    cdef size_t n_ip = indptr.shape[0], n_cc = nnz
    cdef uint64_t nc = <uint64_t>min(int(n_cols), 2**64 - 1)
    cdef int64_t bad
    with nogil:
        bad = c_first_decrease(&ip[0], n_ip, threads)
    if bad >= 0:
        raise ValueError(f"indptr decreases at row {bad - 1}")
    if nnz:
        with nogil:
            bad = c_first_col_at_least(&cc[0], n_cc, nc, threads)
        if bad >= 0:
            raise ValueError(f"cols[{bad}] >= {n_cols} (out of range)")
    return indptr, cols, vals, <size_t>(indptr.shape[0] - 1)


def spmv(indptr, cols, vals, z, out=None, threads=None):
    """Sparse matrix-vector product over Fr: ``out[i] = Σ vals[k]·z[cols[k]]`` over row i.

    Parameters: CSR arrays of an ``m``-row matrix; ``z`` (n_vars, 4) Montgomery with
    ``n_vars > max(cols)``; ``out`` optional (m, 4) destination.
    Returns ``out``.  Runs without the GIL on ``threads`` threads.
    """
    cdef size_t m, t = _threads(threads)
    _fr_array(z, "z")
    indptr, cols, vals, m = _csr(indptr, cols, vals, z.shape[0], t)
    out = _out_fr(out, m)
    cdef int64_t[::1] ip = indptr
    cdef uint32_t[::1] cc = cols
    cdef uint64_t[:, ::1] vv = vals
    cdef uint64_t[:, ::1] zz = z
    cdef uint64_t[:, ::1] oo = out
    cdef const int64_t* p_ip = &ip[0]
    cdef const uint32_t* p_cc = &cc[0] if cc.shape[0] else NULL
    cdef const fr_t* p_vv = <const fr_t*>&vv[0, 0] if vv.shape[0] else NULL
    cdef const fr_t* p_z = <const fr_t*>&zz[0, 0] if zz.shape[0] else NULL
    cdef fr_t* p_o = <fr_t*>&oo[0, 0] if m else NULL
    if m:
        with nogil:
            c_spmv(p_ip, p_cc, p_vv, m, p_z, p_o, t)
    return out


def spmv_t(indptr, cols, vals, y, n_vars, out=None, threads=None):
    """Transposed product: ``out[j] = Σ_{k: cols[k]=j} vals[k]·y[row(k)]`` for j < n_vars.

    With ``y`` the Lagrange coefficients at τ this gives the QAP evaluations u_j(τ).
    ``y`` needs at least m rows.  Returns ``out`` (n_vars, 4).
    """
    cdef size_t m, t = _threads(threads), nv = int(n_vars)
    indptr, cols, vals, m = _csr(indptr, cols, vals, nv, t)
    _fr_array(y, "y")
    if <size_t>y.shape[0] < m:
        raise ValueError(f"y has {y.shape[0]} rows, the matrix has {m}")
    out = _out_fr(out, nv)
    if nv == 0:
        return out
    cdef int64_t[::1] ip = indptr
    cdef uint32_t[::1] cc = cols
    cdef uint64_t[:, ::1] vv = vals
    cdef uint64_t[:, ::1] yy = y
    cdef uint64_t[:, ::1] oo = out
    cdef const int64_t* p_ip = &ip[0]
    cdef const uint32_t* p_cc = &cc[0] if cc.shape[0] else NULL
    cdef const fr_t* p_vv = <const fr_t*>&vv[0, 0] if vv.shape[0] else NULL
    cdef const fr_t* p_y = <const fr_t*>&yy[0, 0] if yy.shape[0] else NULL
    with nogil:
        c_spmv_t(p_ip, p_cc, p_vv, m, p_y, nv, <fr_t*>&oo[0, 0], t)
    return out


def fix_pivots(indptr, cols, vals, z, a, b, threads=None):
    """Rewrite the first coefficient of every non-empty row of C (in place, ``vals``) so that
    ``C·z = a ∘ b``; each row's first variable must have value 1 in ``z``.

    Raises ValueError naming the first row whose pivot value is not 1.
    """
    cdef size_t m, t = _threads(threads)
    _fr_array(z, "z")
    indptr, cols, vals, m = _csr(indptr, cols, vals, z.shape[0], t)
    if not vals.flags.writeable:
        raise ValueError("vals must be writable")
    _fr_array(a, "a", m)
    _fr_array(b, "b", m)
    if m == 0 or cols.shape[0] == 0:
        return
    cdef int64_t[::1] ip = indptr
    cdef uint32_t[::1] cc = cols
    cdef uint64_t[:, ::1] vv = vals
    cdef uint64_t[:, ::1] zz = z
    cdef uint64_t[:, ::1] aa = a
    cdef uint64_t[:, ::1] bb = b
    cdef int64_t bad
    with nogil:
        bad = c_fix_pivots(&ip[0], &cc[0], <fr_t*>&vv[0, 0], m, <const fr_t*>&zz[0, 0],
                           <const fr_t*>&aa[0, 0], <const fr_t*>&bb[0, 0], t)
    if bad >= 0:
        raise ValueError(f"row {bad}: pivot variable does not have value 1")


def geometric(first, ratio, n, threads=None, out=None):
    """``out[i] = first·ratio^i`` for i < n (Fr, Montgomery); returns ``out`` (n, 4)."""
    cdef size_t nn = int(n), t = _threads(threads)
    f = _fr_scalar(first, "first")
    r = _fr_scalar(ratio, "ratio")
    out = _out_fr(out, nn)
    if nn == 0:
        return out
    cdef uint64_t[::1] ff = f
    cdef uint64_t[::1] rr = r
    cdef uint64_t[:, ::1] oo = out
    with nogil:
        c_geometric((<const fr_t*>&ff[0])[0], (<const fr_t*>&rr[0])[0], nn, <fr_t*>&oo[0, 0], t)
    return out


def lagrange_coeffs(tau, omega, n, threads=None):
    """Lagrange basis of {ω^i : i < n} at τ: ``L_i(τ) = (τ^n − 1)/n · ω^i/(τ − ω^i)``.

    ``tau`` and ``omega`` are Montgomery Fr (4 limbs); ω must have order n.  Returns (n, 4).
    Raises ValueError when τ^n = 1 (τ in the domain).
    """
    cdef size_t nn = int(n), t = _threads(threads)
    tt = _fr_scalar(tau, "tau")
    ww = _fr_scalar(omega, "omega")
    if nn == 0:
        raise ValueError("n must be positive")
    out = np.empty((nn, 4), dtype=np.uint64)
    cdef uint64_t[::1] pt = tt
    cdef uint64_t[::1] pw = ww
    cdef uint64_t[:, ::1] oo = out
    cdef cbool ok
    with nogil:
        ok = c_lagrange((<const fr_t*>&pt[0])[0], (<const fr_t*>&pw[0])[0], nn, <fr_t*>&oo[0, 0], t)
    if not ok:
        raise ValueError("tau lies in the evaluation domain (tau^n = 1)")
    return out


def qap_combine(u, v, w, alpha, beta, s, threads=None, out=None):
    """``out[j] = (β·u_j + α·v_j + w_j)·s`` (Fr, Montgomery); returns ``out`` (n, 4)."""
    cdef size_t t = _threads(threads)
    _fr_array(u, "u")
    cdef size_t n = u.shape[0]
    _fr_array(v, "v", n)
    _fr_array(w, "w", n)
    al = _fr_scalar(alpha, "alpha")
    be = _fr_scalar(beta, "beta")
    ss = _fr_scalar(s, "s")
    out = _out_fr(out, n)
    if n == 0:
        return out
    cdef uint64_t[:, ::1] uu = u
    cdef uint64_t[:, ::1] vv = v
    cdef uint64_t[:, ::1] ww = w
    cdef uint64_t[::1] pa = al
    cdef uint64_t[::1] pb = be
    cdef uint64_t[::1] ps = ss
    cdef uint64_t[:, ::1] oo = out
    with nogil:
        c_qap_combine(<const fr_t*>&uu[0, 0], <const fr_t*>&vv[0, 0], <const fr_t*>&ww[0, 0],
                      (<const fr_t*>&pa[0])[0], (<const fr_t*>&pb[0])[0],
                      (<const fr_t*>&ps[0])[0], n, <fr_t*>&oo[0, 0], t)
    return out


cdef object _first_row(a, threads, bint zero):
    """The row scans below: the first all-zero row (``zero``) or the first row >= r, or -1."""
    cdef size_t t = _threads(threads)
    _fr_array(a, "a")
    cdef size_t n = a.shape[0]
    if n == 0:
        return -1
    cdef const uint64_t[:, ::1] aa = a
    cdef int64_t r
    with nogil:
        if zero:
            r = c_fr_first_zero(<const fr_t*>&aa[0, 0], n, t)
        else:
            r = c_fr_first_unreduced(&aa[0, 0], n, t)
    return int(r)


def fr_first_unreduced(a, threads=None):
    """Index of the first row of the (n, 4) uint64 array ``a`` that is ≥ r, or -1."""
    return _first_row(a, threads, False)


def fr_first_zero(a, threads=None):
    """Index of the first all-zero row of the (n, 4) uint64 array ``a``, or -1."""
    return _first_row(a, threads, True)


def column_bits(cols, vals, lo, hi, threads=None):
    """Density of the columns ``lo <= j < hi`` of a sparse matrix (``cols`` uint32 (nnz,),
    ``vals`` uint64 (nnz, 4)): bit ``j − lo`` of the returned uint64 words (⌈(hi − lo)/64⌉) is
    set iff some entry of column j has a non-zero coefficient (bits past hi − lo clear)."""
    cdef size_t t = _threads(threads)
    if not (isinstance(cols, np.ndarray) and cols.dtype == np.uint32 and cols.ndim == 1
            and cols.flags.c_contiguous):
        raise ValueError("cols must be a C-contiguous uint32 array of shape (nnz,)")
    _fr_array(vals, "vals", cols.shape[0])
    cdef size_t j0 = int(lo), j1 = int(hi), nnz = cols.shape[0]
    if j1 < j0 or j1 > 2**32:
        raise ValueError(f"need 0 <= lo <= hi <= 2^32, got {lo}, {hi}")
    words = np.zeros((j1 - j0 + 63) // 64, dtype=np.uint64)
    if words.shape[0] == 0 or nnz == 0:
        return words
    cdef const uint32_t[::1] cc = cols
    cdef const uint64_t[:, ::1] vv = vals
    cdef uint64_t[::1] ww = words
    with nogil:
        c_column_bits(&cc[0], <const fr_t*>&vv[0, 0], nnz, j0, j1, &ww[0], t)
    return words


def gather_rows(src, words, n_bits, out=None, threads=None):
    """``src[i]`` for the set bits i < n_bits of the bit vector ``words`` (uint64, bit i is
    ``words[i // 64] >> (i % 64) & 1``), in order: ``src[mask]`` without the mask.  ``src`` is
    uint64 (≥ n_bits, 4); ``out`` (popcount, 4) when given.  Returns ``out``."""
    cdef size_t t = _threads(threads), nb = int(n_bits)
    _fr_array(src, "src")
    if <size_t>src.shape[0] < nb:
        raise ValueError(f"src has {src.shape[0]} rows, fewer than n_bits = {nb}")
    words = np.ascontiguousarray(words, dtype=np.uint64).reshape(-1)
    if <size_t>words.shape[0] != (nb + 63) // 64:
        raise ValueError(f"{nb} bits need {(nb + 63) // 64} words, got {words.shape[0]}")
    cdef const uint64_t[::1] ww = words
    cdef size_t cnt
    if out is None:
        if nb:
            with nogil:
                cnt = c_gather_rows(NULL, &ww[0], nb, NULL, <size_t>-1, t)   # count only
        else:
            cnt = 0
        out = np.empty((cnt, 4), dtype=np.uint64)
    _fr_array(out, "out")
    if not out.flags.writeable:
        raise ValueError("out must be writable")
    cdef size_t rows = out.shape[0]
    if nb == 0:
        if rows:
            raise ValueError(f"out has {rows} rows, the bit vector sets 0")
        return out
    cdef const uint64_t[:, ::1] ss = src
    cdef uint64_t[:, ::1] oo = out
    cdef fr_t* po = <fr_t*>&oo[0, 0] if rows else NULL
    with nogil:
        cnt = c_gather_rows(<const fr_t*>&ss[0, 0], &ww[0], nb, po, rows, t)
    if cnt != rows:
        raise ValueError(f"out has {rows} rows, the bit vector sets {cnt}")
    return out


def first_unsatisfied(a, b, c, threads=None):
    """First row i with ``a[i]·b[i] != c[i]`` (Fr, Montgomery (m, 4) arrays), or -1."""
    cdef size_t t = _threads(threads)
    _fr_array(a, "a")
    cdef size_t m = a.shape[0]
    _fr_array(b, "b", m)
    _fr_array(c, "c", m)
    if m == 0:
        return -1
    cdef uint64_t[:, ::1] aa = a
    cdef uint64_t[:, ::1] bb = b
    cdef uint64_t[:, ::1] cc = c
    cdef int64_t r
    with nogil:
        r = c_first_unsatisfied(<const fr_t*>&aa[0, 0], <const fr_t*>&bb[0, 0],
                                <const fr_t*>&cc[0, 0], m, t)
    return int(r)


def fixed_base_window(n):
    """The window width (bits) :func:`fixed_base_mul` picks for n scalars."""
    return int(g1_fixed_base_t.choose_window(<size_t>int(n)))


def fixed_base_mul(group, scalars, base=None, out=None, window=None, threads=None):
    """Fixed-base batch scalar multiplication ``out[i] = [k_i]·base``, output affine.

    Parameters
    ----------
    group : "g1" or "g2"
    scalars : uint64 (n, 4) Montgomery Fr.
    base : affine point, uint64 (12,) or (24,) Montgomery; default the standard generator.
    out : optional uint64 (n, 12|24) destination.
    window : window width in bits (2..16); default by n (:func:`fixed_base_window`).

    Signed fixed windows over a precomputed affine table of the base: ≤ ceil(256/w) mixed
    additions per scalar, no doublings; batch conversion to affine per block of 256.
    A zero scalar gives the all-zero (infinity) point.
    """
    cdef size_t t = _threads(threads)
    _fr_array(scalars, "scalars")
    cdef size_t n = scalars.shape[0]
    cdef size_t width
    if group not in ("g1", "g2"):
        raise ValueError(f"group must be 'g1' or 'g2', got {group!r}")
    cdef size_t words = 12 if group == "g1" else 24
    if out is None:
        out = np.empty((n, words), dtype=np.uint64)
    elif not (isinstance(out, np.ndarray) and out.dtype == np.uint64 and out.shape == (n, words)
              and out.flags.c_contiguous and out.flags.writeable):
        raise ValueError(f"out must be a writable C-contiguous uint64 array of shape ({n}, {words})")
    if n == 0:
        return out
    width = g1_fixed_base_t.choose_window(n) if window is None else int(window)
    if width < 2 or width > 16:
        raise ValueError(f"window must be in 2..16, got {width}")
    cdef uint64_t[::1] bb
    cdef uint64_t[:, ::1] ss = scalars
    cdef uint64_t[:, ::1] oo = out
    cdef g1_fixed_base_t* t1
    cdef g2_fixed_base_t* t2
    cdef g1_affine_t b1
    cdef g2_affine_t b2
    if base is not None:
        base = np.ascontiguousarray(base, dtype=np.uint64).reshape(-1)
        if base.shape[0] != words:
            raise ValueError(f"base must hold {words} uint64 limbs")
        if not base.any():
            raise ValueError("base must not be the point at infinity")
        bb = base
    if group == "g1":
        b1 = (<g1_affine_t*>&bb[0])[0] if base is not None else g1_generator()
        t1 = new g1_fixed_base_t()
        try:
            with nogil:
                t1.build(b1, width, t)
                t1.mul(<const fr_t*>&ss[0, 0], n, <g1_affine_t*>&oo[0, 0], t)
        finally:
            del t1
    else:
        b2 = (<g2_affine_t*>&bb[0])[0] if base is not None else g2_generator()
        t2 = new g2_fixed_base_t()
        try:
            with nogil:
                t2.build(b2, width, t)
                t2.mul(<const fr_t*>&ss[0, 0], n, <g2_affine_t*>&oo[0, 0], t)
        finally:
            del t2
    return out
