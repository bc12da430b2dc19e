# distutils: language = c++
"""BLS12-381 fields and curves on the CPU: NumPy bindings over ff.hpp / ec.hpp / encode.hpp.

Layouts (little-endian 64-bit limbs, the blst/blstrs in-memory layout):
  fr   uint64 (n, 4)   Montgomery, R = 2^256     canonical bytes: uint8 (n, 32) little-endian
  fq   uint64 (n, 6)   Montgomery, R = 2^384     canonical bytes: uint8 (n, 48) little-endian
  fq2  uint64 (n, 12)  c0‖c1, each as fq
  g1   uint64 (n, 12)  affine x‖y Montgomery, infinity all-zero; Jacobian (n, 18) X‖Y‖Z
  g2   uint64 (n, 24)  affine x‖y (each c0‖c1), infinity all-zero; Jacobian (n, 36)
Point bytes follow the zcash/bellperson convention (see encode.hpp): g1 48 / 96 bytes,
g2 96 / 192 bytes, compressed / uncompressed.

Every function that loops over elements releases the GIL and takes ``threads``
(None or 0 = all hardware threads). Arrays are validated (dtype, shape); bad values raise
ValueError naming the first bad index.
"""
import operator
import sys

import numpy as np

from cuzk._args import threads_arg
from cuzk._native._pool cimport bind_shared_pool

bind_shared_pool()  # one CPU pool and thread budget for all native modules (_pool.pxd)

from libc.stdint cimport uint8_t, uint64_t
from libcpp cimport bool as cbool

__all__ = [
    "FR_MODULUS", "FQ_MODULUS", "STATUS_MESSAGES", "FIELDS", "GROUPS",
    "to_mont", "from_mont", "canonical_limbs",
    "add", "sub", "mul", "neg", "sqr", "inv", "pow", "sqrt",
    "decode_points", "encode_points", "check_points", "jacobian_to_affine",
    "generator", "point_add", "point_double", "point_neg", "point_mul", "on_curve", "g1_xyzz_horner",
    "g2_xyzz_horner",
    "in_subgroup", "msm_simple",
]

if sys.byteorder != "little":  # pragma: no cover
    raise ImportError("cuzk needs a little-endian host")

from cuzk._constants import FQ_MODULUS, FR_MODULUS  # one definition (checked by scripts/)

STATUS_MESSAGES = {
    DECODE_BAD_FLAGS: "wrong flag bits for this encoding form",
    DECODE_BAD_INFINITY: "invalid point-at-infinity encoding",
    DECODE_NONCANONICAL: "coordinate not canonical (>= p)",
    DECODE_NOT_ON_CURVE: "not on the curve",
    DECODE_NOT_IN_SUBGROUP: "not in the prime-order subgroup",
}

# name -> (code, limbs per element)
FIELDS = {"fr": (0, 4), "fq": (1, 6), "fq2": (2, 12)}
# name -> (code, affine limbs, compressed bytes, uncompressed bytes)
GROUPS = {"g1": (1, 12, 48, 96), "g2": (2, 24, 96, 192)}


cdef extern from * nogil:
    """
    #include "cuzk/encode.hpp"
    namespace cuzk_field {
    using namespace cuzk;

    template <class F, class Op>
    inline void map2(F* o, const F* a, const F* b, size_t n, bool bcast, size_t threads, Op op) {
        parallel_for(n, threads, 4096, [&](size_t s, size_t e, size_t) {
            if (bcast) { const F y = b[0]; for (size_t i = s; i < e; i++) o[i] = op(a[i], y); }
            else for (size_t i = s; i < e; i++) o[i] = op(a[i], b[i]);
        });
    }
    template <class F, class Op>
    inline void map1(F* o, const F* a, size_t n, size_t threads, Op op) {
        parallel_for(n, threads, 4096, [&](size_t s, size_t e, size_t) {
            for (size_t i = s; i < e; i++) o[i] = op(a[i]);
        });
    }

    // op: 0 add, 1 sub, 2 mul
    template <class F>
    inline void binop_t(int op, uint64_t* o, const uint64_t* a, const uint64_t* b, size_t n, bool bc, size_t t) {
        F* O = (F*)o; const F* A = (const F*)a; const F* B = (const F*)b;
        switch (op) {
            case 0: map2(O, A, B, n, bc, t, [](const F& x, const F& y) { return x + y; }); break;
            case 1: map2(O, A, B, n, bc, t, [](const F& x, const F& y) { return x - y; }); break;
            default: map2(O, A, B, n, bc, t, [](const F& x, const F& y) { return x * y; }); break;
        }
    }
    // op: 0 neg, 1 sqr, 2 inv (batch inversion per chunk; 0 -> 0)
    template <class F>
    inline void unop_t(int op, uint64_t* o, const uint64_t* a, size_t n, size_t t) {
        F* O = (F*)o; const F* A = (const F*)a;
        switch (op) {
            case 0: map1(O, A, n, t, [](const F& x) { return -x; }); break;
            case 1: map1(O, A, n, t, [](const F& x) { return x.sqr(); }); break;
            default:
                parallel_for(n, t, 1024, [&](size_t s, size_t e, size_t) {
                    std::vector<F> scratch(e - s);
                    batch_inverse(O + s, A + s, e - s, scratch.data());
                });
        }
    }
    template <class F>
    inline void pow_t(uint64_t* o, const uint64_t* a, size_t n, const uint64_t* e, size_t ne, size_t t) {
        map1((F*)o, (const F*)a, n, t, [&](const F& x) { return x.pow(e, ne); });
    }
    template <class F, class S>
    inline void sqrt_t(uint64_t* o, uint8_t* ok, const uint64_t* a, size_t n, size_t t, S sq) {
        F* O = (F*)o; const F* A = (const F*)a;
        parallel_for(n, t, 256, [&](size_t s, size_t e, size_t) {
            for (size_t i = s; i < e; i++) {
                F r = F::zero();
                ok[i] = sq(r, A[i]);
                O[i] = r;
            }
        });
    }

    // field: 0 fr, 1 fq, 2 fq2
    inline void binop(int field, int op, uint64_t* o, const uint64_t* a, const uint64_t* b, size_t n, bool bc, size_t t) {
        if (field == 0) binop_t<fr_t>(op, o, a, b, n, bc, t);
        else if (field == 1) binop_t<fq_t>(op, o, a, b, n, bc, t);
        else binop_t<fq2_t>(op, o, a, b, n, bc, t);
    }
    inline void unop(int field, int op, uint64_t* o, const uint64_t* a, size_t n, size_t t) {
        if (field == 0) unop_t<fr_t>(op, o, a, n, t);
        else if (field == 1) unop_t<fq_t>(op, o, a, n, t);
        else unop_t<fq2_t>(op, o, a, n, t);
    }
    inline void powop(int field, uint64_t* o, const uint64_t* a, size_t n, const uint64_t* e, size_t ne, size_t t) {
        if (field == 0) pow_t<fr_t>(o, a, n, e, ne, t);
        else if (field == 1) pow_t<fq_t>(o, a, n, e, ne, t);
        else pow_t<fq2_t>(o, a, n, e, ne, t);
    }
    // fq or fq2 only
    inline void sqrtop(int field, uint64_t* o, uint8_t* ok, const uint64_t* a, size_t n, size_t t) {
        if (field == 1) sqrt_t<fq_t>(o, ok, a, n, t, [](fq_t& r, const fq_t& x) { return fq_sqrt(r, x); });
        else sqrt_t<fq2_t>(o, ok, a, n, t, [](fq2_t& r, const fq2_t& x) { return fq2_sqrt(r, x); });
    }

    // ---- single points (group: 1 g1, 2 g2) -------------------------------------------
    // op: 0 add(p, q), 1 double(p), 2 neg(p), 3 generator
    template <class C>
    inline void point_op_t(int op, uint64_t* o, const uint64_t* p, const uint64_t* q) {
        typedef affine_t<C> A; typedef jacobian_t<C> J;
        const A& P = *(const A*)p;
        A& O = *(A*)o;
        switch (op) {
            case 0: O = J::from_affine(P).add(*(const A*)q).to_affine(); break;
            case 1: O = J::from_affine(P).dbl().to_affine(); break;
            case 2: O = -P; break;
            default: O = A::generator();
        }
    }
    inline void point_op(int g, int op, uint64_t* o, const uint64_t* p, const uint64_t* q) {
        if (g == 1) point_op_t<g1_curve>(op, o, p, q); else point_op_t<g2_curve>(op, o, p, q);
    }
    inline void point_mul(int g, uint64_t* o, const uint64_t* p, const uint64_t* k, size_t nk) {
        if (g == 1) *(g1_affine_t*)o = scalar_mul(*(const g1_affine_t*)p, k, nk).to_affine();
        else *(g2_affine_t*)o = scalar_mul(*(const g2_affine_t*)p, k, nk).to_affine();
    }
    // what: 0 on curve, 1 in subgroup (fast), 2 in subgroup (exact [r]P)
    inline bool point_pred(int g, int what, const uint64_t* p) {
        if (g == 1) {
            const g1_affine_t& P = *(const g1_affine_t*)p;
            return what == 0 ? P.on_curve() : what == 1 ? in_subgroup_fast(P) : in_subgroup(P);
        }
        const g2_affine_t& P = *(const g2_affine_t*)p;
        return what == 0 ? P.on_curve() : what == 1 ? in_subgroup_fast(P) : in_subgroup(P);
    }
    inline void msm_simple(int g, uint64_t* o, const uint64_t* p, const uint64_t* k, size_t n, size_t t) {
        if (g == 1) *(g1_affine_t*)o = cuzk::msm_simple((const g1_affine_t*)p, k, n, t).to_affine();
        else *(g2_affine_t*)o = cuzk::msm_simple((const g2_affine_t*)p, k, n, t).to_affine();
    }
    // Σ_w 2^(w·c)·Σ_p parts[w·P + p] over XYZZ points (the GPU's window / block partial sums:
    // the layout of cuzk/cu/ec/xyzz_t.cuh, G1 4 x 48 bytes, G2 4 x 96 bytes), to affine.
    static_assert(sizeof(g1_xyzz_t) == 4 * 48, "XYZZ layout shared with cuzk/cu/ec/xyzz_t.cuh");
    static_assert(sizeof(g2_xyzz_t) == 4 * 96, "XYZZ layout shared with cuzk/cu/ec/xyzz_t.cuh");
    template <class C>
    inline void xyzz_horner(uint64_t* o, const uint64_t* parts, unsigned W, unsigned P, unsigned c) {
        const xyzz_t<C>* S = (const xyzz_t<C>*)parts;
        xyzz_t<C> acc = xyzz_t<C>::infinity();
        for (unsigned w = W; w-- > 0;) {
            if (w + 1 < W)
                for (unsigned k = 0; k < c; k++) acc = acc.dbl();
            for (unsigned p = 0; p < P; p++) acc = acc.add(S[(size_t)w * P + p]);
        }
        *(affine_t<C>*)o = acc.to_affine();
    }
    inline void g1_xyzz_horner(uint64_t* o, const uint64_t* parts, unsigned W, unsigned P, unsigned c) {
        xyzz_horner<g1_curve>(o, parts, W, P, c);
    }
    inline void g2_xyzz_horner(uint64_t* o, const uint64_t* parts, unsigned W, unsigned P, unsigned c) {
        xyzz_horner<g2_curve>(o, parts, W, P, c);
    }
    }  // namespace cuzk_field
    """
    void c_binop "cuzk_field::binop"(int field, int op, uint64_t* o, const uint64_t* a, const uint64_t* b,
                                     size_t n, cbool bcast, size_t threads)
    void c_unop "cuzk_field::unop"(int field, int op, uint64_t* o, const uint64_t* a, size_t n, size_t threads)
    void c_pow "cuzk_field::powop"(int field, uint64_t* o, const uint64_t* a, size_t n, const uint64_t* e,
                                   size_t ne, size_t threads)
    void c_sqrt "cuzk_field::sqrtop"(int field, uint64_t* o, uint8_t* ok, const uint64_t* a, size_t n,
                                     size_t threads)
    void c_point_op "cuzk_field::point_op"(int g, int op, uint64_t* o, const uint64_t* p, const uint64_t* q)
    void c_point_mul "cuzk_field::point_mul"(int g, uint64_t* o, const uint64_t* p, const uint64_t* k, size_t nk)
    cbool c_point_pred "cuzk_field::point_pred"(int g, int what, const uint64_t* p)
    void c_msm_simple "cuzk_field::msm_simple"(int g, uint64_t* o, const uint64_t* p, const uint64_t* k,
                                               size_t n, size_t threads)
    void c_g1_xyzz_horner "cuzk_field::g1_xyzz_horner"(uint64_t* o, const uint64_t* parts, unsigned W,
                                                        unsigned P, unsigned c)
    void c_g2_xyzz_horner "cuzk_field::g2_xyzz_horner"(uint64_t* o, const uint64_t* parts, unsigned W,
                                                        unsigned P, unsigned c)


# ---- argument checking ---------------------------------------------------------------
cdef size_t _threads(threads) except? 0:
    """None or 0: all hardware threads (the convention of every native module)."""
    return threads_arg(threads)


def _field(field):
    try:
        return FIELDS[field]
    except (KeyError, TypeError):
        raise ValueError(f"field must be one of {sorted(FIELDS)}, got {field!r}") from None


def _group(group):
    try:
        return GROUPS[group]
    except (KeyError, TypeError):
        raise ValueError(f"group must be 'g1' or 'g2', got {group!r}") from None


def _as_limbs(a, int w, str name="array"):
    """uint64 (n, w) or uint8 (n, 8w) -> C-contiguous, aligned uint64 (n, w) (a view when possible)."""
    if not isinstance(a, np.ndarray):
        raise ValueError(f"{name} must be a NumPy array, got {type(a).__name__}")
    if a.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n, {w}) uint64 or (n, {8 * w}) uint8, got shape {a.shape}")
    if a.dtype == np.uint64 and a.shape[1] == w:
        out = np.ascontiguousarray(a)
    elif a.dtype == np.uint8 and a.shape[1] == 8 * w:
        out = np.ascontiguousarray(a).view(np.uint64)
    else:
        raise ValueError(f"{name} must be uint64 (n, {w}) or uint8 (n, {8 * w}), "
                         f"got {a.dtype} {a.shape}")
    if not out.flags.aligned:
        out = out.copy()
    return out


def _point(p, int w, str name="point"):
    """One affine point: uint64 (w,) -> C-contiguous copy."""
    if not isinstance(p, np.ndarray) or p.dtype != np.uint64 or p.shape != (w,):
        raise ValueError(f"{name} must be a uint64 array of shape ({w},)")
    return np.ascontiguousarray(p)


# ---- canonical <-> Montgomery ---------------------------------------------------------
def to_mont(a, field="fr", threads=None, name="values"):
    """Canonical little-endian values -> Montgomery limbs.

    Parameters
    ----------
    a : ndarray
        uint8 (n, 32|48|96) little-endian bytes or uint64 (n, 4|6|12) limbs (fq2: c0‖c1).
    field : {"fr", "fq", "fq2"}
    threads : int or None
    name : str
        What to call the array in error messages.

    Returns
    -------
    ndarray uint64 (n, 4|6|12), a new array.

    Raises
    ------
    ValueError
        Bad dtype/shape, or a value >= the modulus (the message names the first such index).
    """
    code, w = _field(field)
    cdef size_t t = _threads(threads)
    src = _as_limbs(a, w, name)
    out = np.empty_like(src)
    cdef size_t n = src.shape[0], bad = 0, cw = w
    if n == 0:
        return out
    cdef const uint64_t[:, ::1] s = src
    cdef uint64_t[:, ::1] o = out
    cdef int c = code
    with nogil:
        if c == 0:
            bad = fr_to_mont(&o[0, 0], &s[0, 0], n, cw, t)
        else:
            bad = fq_to_mont(&o[0, 0], &s[0, 0], n, cw, t)
    if bad < n:
        raise ValueError(f"{name}[{bad}] is not a canonical {field} element (>= modulus)")
    return out


def from_mont(a, field="fr", threads=None):
    """Montgomery limbs uint64 (n, 4|6|12) -> canonical limbs, same shape (view as uint8 for bytes)."""
    code, w = _field(field)
    cdef size_t t = _threads(threads)
    src = _as_limbs(a, w, "values")
    out = np.empty_like(src)
    cdef size_t n = src.shape[0], cw = w
    if n == 0:
        return out
    cdef const uint64_t[:, ::1] s = src
    cdef uint64_t[:, ::1] o = out
    cdef int c = code
    with nogil:
        if c == 0:
            fr_from_mont(&o[0, 0], &s[0, 0], n, cw, t)
        else:
            fq_from_mont(&o[0, 0], &s[0, 0], n, cw, t)
    return out


def canonical_limbs(a, field="fr", threads=None, name="values"):
    """Validate canonical values and return them as uint64 (n, w) limbs (a view when possible).

    Raises ValueError naming the first value >= the modulus.
    """
    code, w = _field(field)
    cdef size_t t = _threads(threads)
    src = _as_limbs(a, w, name)
    cdef size_t n = src.shape[0], bad = 0, cw = w
    if n == 0:
        return src
    cdef const uint64_t[:, ::1] s = src
    cdef int c = code
    with nogil:
        if c == 0:
            bad = fr_first_noncanonical(&s[0, 0], n, cw, t)
        else:
            bad = fq_first_noncanonical(&s[0, 0], n, cw, t)
    if bad < n:
        raise ValueError(f"{name}[{bad}] is not a canonical {field} element (>= modulus)")
    return src


# ---- elementwise arithmetic (Montgomery in, Montgomery out) -----------------------------
def _binop(int op, a, b, field, threads):
    code, w = _field(field)
    cdef size_t t = _threads(threads)
    x = _as_limbs(a, w, "a")
    y = _as_limbs(b, w, "b")
    cdef cbool bc = y.shape[0] == 1 and x.shape[0] != 1
    if not bc and y.shape[0] != x.shape[0]:
        raise ValueError(f"a and b must have the same length (or b length 1), got {x.shape[0]} and {y.shape[0]}")
    out = np.empty_like(x)
    cdef size_t n = x.shape[0]
    if n == 0:
        return out
    cdef const uint64_t[:, ::1] xa = x
    cdef const uint64_t[:, ::1] ya = y
    cdef uint64_t[:, ::1] o = out
    cdef int c = code
    with nogil:
        c_binop(c, op, &o[0, 0], &xa[0, 0], &ya[0, 0], n, bc, t)
    return out


def _unop(int op, a, field, threads):
    code, w = _field(field)
    cdef size_t t = _threads(threads)
    x = _as_limbs(a, w, "a")
    out = np.empty_like(x)
    cdef size_t n = x.shape[0]
    if n == 0:
        return out
    cdef const uint64_t[:, ::1] xa = x
    cdef uint64_t[:, ::1] o = out
    cdef int c = code
    with nogil:
        c_unop(c, op, &o[0, 0], &xa[0, 0], n, t)
    return out


def add(a, b, field="fr", threads=None):
    """a + b elementwise (Montgomery uint64 (n, w); b may have length 1 to broadcast)."""
    return _binop(0, a, b, field, threads)


def sub(a, b, field="fr", threads=None):
    """a - b elementwise (b may have length 1)."""
    return _binop(1, a, b, field, threads)


def mul(a, b, field="fr", threads=None):
    """a · b elementwise (b may have length 1)."""
    return _binop(2, a, b, field, threads)


def neg(a, field="fr", threads=None):
    """-a elementwise."""
    return _unop(0, a, field, threads)


def sqr(a, field="fr", threads=None):
    """a² elementwise."""
    return _unop(1, a, field, threads)


def inv(a, field="fr", threads=None):
    """a⁻¹ elementwise by batch inversion (3 M per element + one inversion per thread); 0 ↦ 0."""
    return _unop(2, a, field, threads)


def pow(a, e, field="fr", threads=None):
    """a^e elementwise for one non-negative Python integer e (any size)."""
    code, w = _field(field)
    cdef size_t t = _threads(threads)
    e = operator.index(e)
    if e < 0:
        raise ValueError("exponent must be non-negative")
    ne = max(1, (e.bit_length() + 63) // 64)
    ev = np.array([(e >> (64 * i)) & 0xFFFFFFFFFFFFFFFF for i in range(ne)], dtype=np.uint64)
    x = _as_limbs(a, w, "a")
    out = np.empty_like(x)
    cdef size_t n = x.shape[0], cne = ne
    if n == 0:
        return out
    cdef const uint64_t[:, ::1] xa = x
    cdef const uint64_t[::1] ea = ev
    cdef uint64_t[:, ::1] o = out
    cdef int c = code
    with nogil:
        c_pow(c, &o[0, 0], &xa[0, 0], n, &ea[0], cne, t)
    return out


def sqrt(a, field="fq", threads=None):
    """Square roots in fq or fq2 (Montgomery). Returns (roots, is_square bool (n,)); roots are 0 where none."""
    code, w = _field(field)
    if code == 0:
        raise ValueError("sqrt is implemented for fq and fq2 only")
    cdef size_t t = _threads(threads)
    x = _as_limbs(a, w, "a")
    out = np.empty_like(x)
    ok = np.zeros(x.shape[0], dtype=np.uint8)
    cdef size_t n = x.shape[0]
    if n == 0:
        return out, ok.astype(bool)
    cdef const uint64_t[:, ::1] xa = x
    cdef uint64_t[:, ::1] o = out
    cdef uint8_t[::1] k = ok
    cdef int c = code
    with nogil:
        c_sqrt(c, &o[0, 0], &k[0], &xa[0, 0], n, t)
    return out, ok.astype(bool)


# ---- point encodings --------------------------------------------------------------------
def decode_points(data, group="g1", subgroup=False, threads=None, return_status=False, name="points"):
    """Decode zcash point encodings to Montgomery affine points.

    Parameters
    ----------
    data : ndarray uint8 (n, width)
        g1: width 48 (compressed) or 96 (uncompressed); g2: 96 or 192. The form follows
        from the width.
    group : {"g1", "g2"}
    subgroup : bool
        Also check membership of the prime-order subgroup (Scott's endomorphism test).
    threads : int or None
    return_status : bool
        If true, return (points, status) with status uint8 (n,) per element (0 = valid,
        else a key of STATUS_MESSAGES; invalid points are left as infinity) instead of
        raising.
    name : str
        What to call the array in error messages.

    Returns
    -------
    ndarray uint64 (n, 12|24) (and the status array with return_status).

    Raises
    ------
    ValueError
        Bad dtype/shape, or an invalid encoding (the first bad index and why).
    """
    code, w, csize, usize = _group(group)
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 \
            or data.shape[1] not in (csize, usize):
        raise ValueError(f"{name}: {group} encodings must be uint8 of shape (n, {csize}) (compressed) or "
                         f"(n, {usize}) (uncompressed), got "
                         f"{getattr(data, 'dtype', type(data).__name__)} {getattr(data, 'shape', '')}")
    cdef size_t t = _threads(threads)
    src = np.ascontiguousarray(data)
    cdef cbool compressed = src.shape[1] == csize
    cdef cbool sg = bool(subgroup)
    cdef size_t n = src.shape[0]
    out = np.zeros((n, w), dtype=np.uint64)
    status = np.zeros(n, dtype=np.uint8) if return_status else None
    if n == 0:
        return (out, status) if return_status else out
    cdef const uint8_t[:, ::1] s = src
    cdef uint64_t[:, ::1] o = out
    cdef uint8_t[::1] st
    cdef uint8_t* stp = NULL
    if return_status:
        st = status
        stp = &st[0]
    cdef bulk_result r
    with nogil:
        if code == 1:
            r = decode_g1(<g1_affine_t*>&o[0, 0], &s[0, 0], n, compressed, sg, t, stp)
        else:
            r = decode_g2(<g2_affine_t*>&o[0, 0], &s[0, 0], n, compressed, sg, t, stp)
    if return_status:
        return out, status
    if r.index < n:
        raise ValueError(f"{name}[{r.index}] ({group}): {STATUS_MESSAGES[r.status]}")
    return out


def encode_points(points, group="g1", compressed=True, threads=None):
    """Montgomery affine points uint64 (n, 12|24) -> zcash bytes uint8 (n, width).

    No validation: points are assumed on the curve (all-zero = infinity).
    """
    code, w, csize, usize = _group(group)
    cdef size_t t = _threads(threads)
    src = _as_limbs(points, w, "points")
    cdef size_t n = src.shape[0]
    cdef cbool cmp = bool(compressed)
    out = np.empty((n, csize if cmp else usize), dtype=np.uint8)
    if n == 0:
        return out
    cdef const uint64_t[:, ::1] s = src
    cdef uint8_t[:, ::1] o = out
    with nogil:
        if code == 1:
            encode_g1(&o[0, 0], <const g1_affine_t*>&s[0, 0], n, cmp, t)
        else:
            encode_g2(&o[0, 0], <const g2_affine_t*>&s[0, 0], n, cmp, t)
    return out


def check_points(points, group="g1", subgroup=False, threads=None):
    """Validate Montgomery affine points in memory: on the curve (infinity allowed), and
    optionally in the subgroup. Raises ValueError naming the first bad index."""
    code, w, csize, usize = _group(group)
    cdef size_t t = _threads(threads)
    src = _as_limbs(points, w, "points")
    cdef size_t n = src.shape[0]
    cdef cbool sg = bool(subgroup)
    if n == 0:
        return
    cdef const uint64_t[:, ::1] s = src
    cdef bulk_result r
    with nogil:
        if code == 1:
            r = check_g1(<const g1_affine_t*>&s[0, 0], n, sg, t)
        else:
            r = check_g2(<const g2_affine_t*>&s[0, 0], n, sg, t)
    if r.index < n:
        raise ValueError(f"points[{r.index}] ({group}): {STATUS_MESSAGES[r.status]}")


def jacobian_to_affine(points, group="g1", threads=None):
    """Jacobian uint64 (n, 18|36) X‖Y‖Z (infinity Z = 0) -> affine uint64 (n, 12|24)."""
    code, w, csize, usize = _group(group)
    cdef size_t t = _threads(threads)
    src = _as_limbs(points, w * 3 // 2, "points")
    cdef size_t n = src.shape[0]
    out = np.zeros((n, w), dtype=np.uint64)
    if n == 0:
        return out
    cdef const uint64_t[:, ::1] s = src
    cdef uint64_t[:, ::1] o = out
    with nogil:
        if code == 1:
            jacobian_to_affine_g1(<g1_affine_t*>&o[0, 0], <const g1_jacobian_t*>&s[0, 0], n, t)
        else:
            jacobian_to_affine_g2(<g2_affine_t*>&o[0, 0], <const g2_jacobian_t*>&s[0, 0], n, t)
    return out


# ---- single points (tests, the epilogue) ------------------------------------------------
def _pointop(int op, group, p=None, q=None):
    code, w, _, _ = _group(group)
    out = np.zeros(w, dtype=np.uint64)
    pa = _point(p, w, "p") if p is not None else out
    qa = _point(q, w, "q") if q is not None else pa
    cdef const uint64_t[::1] pv = pa
    cdef const uint64_t[::1] qv = qa
    cdef uint64_t[::1] o = out
    c_point_op(code, op, &o[0], &pv[0], &qv[0])
    return out


def generator(group="g1"):
    """The standard generator, Montgomery affine uint64 (12|24,)."""
    return _pointop(3, group)


def point_add(p, q, group="g1"):
    """p + q for affine points (complete: handles p = ±q and infinity)."""
    return _pointop(0, group, p, q)


def point_double(p, group="g1"):
    """2p."""
    return _pointop(1, group, p)


def point_neg(p, group="g1"):
    """-p."""
    return _pointop(2, group, p)


def point_mul(p, k, group="g1"):
    """[k]p for any Python integer k (negative: [-k](-p)); not reduced mod r."""
    code, w, _, _ = _group(group)
    k = operator.index(k)
    pa = _point(p, w, "p")
    if k < 0:
        pa = point_neg(pa, group)
        k = -k
    nk = max(1, (k.bit_length() + 63) // 64)
    kv = np.array([(k >> (64 * i)) & 0xFFFFFFFFFFFFFFFF for i in range(nk)], dtype=np.uint64)
    out = np.zeros(w, dtype=np.uint64)
    cdef const uint64_t[::1] pv = pa
    cdef const uint64_t[::1] kk = kv
    cdef uint64_t[::1] o = out
    cdef size_t cnk = nk
    cdef int c = code
    with nogil:
        c_point_mul(c, &o[0], &pv[0], &kk[0], cnk)
    return out


def _xyzz_horner(parts, unsigned W, unsigned P, unsigned c, bint g2):
    cdef size_t rows = 48 if g2 else 24
    if (not isinstance(parts, np.ndarray) or parts.dtype != np.uint64 or parts.ndim != 2
            or parts.shape[1] != rows or not parts.flags.c_contiguous):
        raise ValueError(f"parts must be a C-contiguous uint64 array of shape (k, {rows})")
    if W == 0 or P == 0 or parts.shape[0] != W * P:
        raise ValueError(f"parts must hold W·P = {W * P} points, got {parts.shape[0]}")
    out = np.zeros(rows // 2, dtype=np.uint64)
    cdef const uint64_t[:, ::1] pv = parts
    cdef uint64_t[::1] o = out
    with nogil:
        if g2:
            c_g2_xyzz_horner(&o[0], &pv[0, 0], W, P, c)
        else:
            c_g1_xyzz_horner(&o[0], &pv[0, 0], W, P, c)
    return out


def g1_xyzz_horner(parts, unsigned W, unsigned P, unsigned c):
    """Σ_w 2^(w·c)·Σ_p parts[w·P + p] for G1 points in XYZZ coordinates (Montgomery Fq, uint64
    (W·P, 24): X, Y, ZZ, ZZZ; ZZ = 0 is infinity), returned affine uint64 (12,) (all-zero =
    infinity).  The host end of the GPU MSM (cuzk._cuda_msm)."""
    return _xyzz_horner(parts, W, P, c, False)


def g2_xyzz_horner(parts, unsigned W, unsigned P, unsigned c):
    """``g1_xyzz_horner`` for G2: parts uint64 (W·P, 48) (X, Y, ZZ, ZZZ, each Fq2 = c0‖c1
    Montgomery; ZZ = 0 is infinity), returned affine uint64 (24,) (all-zero = infinity).  The
    host end of the GPU G2 reductions (batch addition, MSM)."""
    return _xyzz_horner(parts, W, P, c, True)


def on_curve(p, group="g1"):
    """True iff the affine point is on the curve (all-zero infinity counts as on it)."""
    code, w, _, _ = _group(group)
    cdef const uint64_t[::1] pv = _point(p, w, "p")
    return bool(c_point_pred(code, 0, &pv[0]))


def in_subgroup(p, group="g1", exact=False):
    """True iff the (on-curve) point lies in the prime-order subgroup.

    The default is Scott's endomorphism test; exact=True computes [r]p == O instead.
    """
    code, w, _, _ = _group(group)
    cdef const uint64_t[::1] pv = _point(p, w, "p")
    cdef int what = 2 if exact else 1
    cdef int c = code
    cdef cbool r
    with nogil:
        r = c_point_pred(c, what, &pv[0])
    return bool(r)


def msm_simple(points, scalars, group="g1", threads=None):
    """Σ k_i·P_i by a shared double-and-add chain (slow, exact reference path).

    points: Montgomery affine uint64 (n, 12|24); scalars: canonical uint64 (n, 4) (not
    checked against r: any 256-bit integers). Returns affine uint64 (12|24,), all-zero =
    infinity.
    """
    code, w, _, _ = _group(group)
    cdef size_t t = _threads(threads)
    p = _as_limbs(points, w, "points")
    k = _as_limbs(scalars, 4, "scalars")
    if p.shape[0] != k.shape[0]:
        raise ValueError(f"points and scalars differ in length: {p.shape[0]} != {k.shape[0]}")
    out = np.zeros(w, dtype=np.uint64)
    cdef size_t n = p.shape[0]
    if n == 0:
        return out
    cdef const uint64_t[:, ::1] pv = p
    cdef const uint64_t[:, ::1] kv = k
    cdef uint64_t[::1] o = out
    cdef int c = code
    with nogil:
        c_msm_simple(c, &o[0], &pv[0, 0], &kv[0, 0], n, t)
    return out
