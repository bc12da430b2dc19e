# cython: language_level=3
"""prep_msm on the CPU: split a partition's aux scalars into zeros, ones and a full-value tail."""
import numpy as np

from cuzk._args import threads_arg
from cuzk._native._pool cimport bind_shared_pool

bind_shared_pool()  # one CPU pool and thread budget for all native modules (_pool.pxd)
cimport numpy as cnp
from libc.stdint cimport uint32_t, uint64_t
from libc.stddef cimport size_t
from libcpp.vector cimport vector

cnp.import_array()

__all__ = ["popcount", "prep_msm"]

cdef extern from "cuzk/prep.hpp" namespace "cuzk" nogil:
    cdef cppclass fr_t:
        pass
    ctypedef struct prep_query_t:
        uint64_t* ones
        uint64_t* tail_scalars
        uint32_t* tail_idx
        size_t n_ones
        size_t n_tail
    ctypedef struct prep_counts_t:
        size_t ones[3]
        size_t full[3]
    ctypedef struct prep_chunk_t:
        size_t full[3]
        size_t ra
        size_t rb
    size_t prep_parts(size_t n_aux, size_t threads)
    size_t prep_words(size_t n_aux)
    prep_counts_t prep_count(const fr_t* aux, size_t n_aux, const uint64_t* a_aux,
                             const uint64_t* b_aux, size_t parts, prep_chunk_t* chunks,
                             uint64_t* one_w, uint64_t* full_w)
    void prep_fill(const fr_t* inputs, size_t n_in, const fr_t* aux, size_t n_aux,
                   const uint64_t* a_aux, const uint64_t* b_input, const uint64_t* b_aux,
                   prep_query_t* q, size_t parts, const prep_chunk_t* chunks,
                   const uint64_t* one_w, const uint64_t* full_w, bint canonical)
    size_t popcount_words(const uint64_t* w, size_t nbits)


def _words(name, w, nbits):
    w = np.ascontiguousarray(w, dtype=np.uint64)
    need = (nbits + 63) // 64
    if w.ndim != 1 or w.shape[0] < need:
        raise ValueError(f"{name}: need {need} uint64 words for {nbits} bits, got shape {w.shape}")
    if w.shape[0] == 0:
        w = np.zeros(1, dtype=np.uint64)
    return w


def _fr(name, a):
    if not isinstance(a, np.ndarray) or a.dtype != np.uint64 or a.ndim != 2 or a.shape[1] != 4:
        raise ValueError(f"{name}: expected a uint64 array of shape (n, 4) (Montgomery Fr)")
    return np.ascontiguousarray(a)


def popcount(words, nbits=None):
    """Set bits among the first ``nbits`` (None: all) bits of a uint64 bit vector (bit i of
    word i // 64), without the GIL and without a copy.  ValueError when ``words`` holds fewer
    than ``nbits`` bits or is not one-dimensional."""
    w = np.ascontiguousarray(words, dtype=np.uint64)
    if w.ndim != 1:
        raise ValueError(f"popcount: expected a 1-D uint64 array, got shape {w.shape}")
    cdef size_t nb = 64 * <size_t>w.shape[0] if nbits is None else <size_t>int(nbits)
    if nb > 64 * <size_t>w.shape[0]:
        raise ValueError(f"popcount: {nb} bits asked of {w.shape[0]} words")
    if nb == 0:
        return 0
    cdef uint64_t[::1] v = w
    cdef size_t c
    with nogil:
        c = popcount_words(&v[0], nb)
    return int(c)


def prep_msm(inputs, aux, a_aux, b_input, b_aux, threads=0, form="canonical"):
    """Classify a partition's scalars for batch addition and tail MSMs.

    Parameters
    ----------
    inputs, aux : ndarray uint64 (n, 4)
        Montgomery Fr assignments (inputs[0] is the constant 1).
    a_aux, b_input, b_aux : ndarray uint64
        Density bit vectors (bit i of word i // 64): aux in A, inputs in B, aux in B.
    threads : int
        Worker threads (0 = all cores). Runs without the GIL.
    form : {"canonical", "montgomery"}
        Form of the tail scalars: canonical (the CPU MSM) or Montgomery as given (the GPU MSM
        reads them with ``scalar_form="montgomery"``; no conversion here).

    Returns
    -------
    dict with, for q in ``("l", "a", "b")``: ``q + "_ones"`` (uint64 bitmap over the query's
    density-compacted SRS index space), ``q + "_tail_scalars"`` (uint64 (m, 4) canonical),
    ``q + "_tail_idx"`` (uint32 (m,) SRS indices, increasing: what the GPU MSM reads and the CPU
    MSM accepts), ``q + "_n_ones"``,
    ``q + "_size"`` (the number of SRS points of the query), and ``"tail_form"`` (``form``).

    Raises
    ------
    ValueError
        Bad shapes or dtypes, density vectors too short, an unknown ``form``, an index space of
        2^32 points or more (the tail indices are 32-bit).
    """
    if form not in ("canonical", "montgomery"):
        raise ValueError(f"form must be 'canonical' or 'montgomery', got {form!r}")
    cdef bint canonical = form == "canonical"
    inputs = _fr("inputs", inputs)
    aux = _fr("aux", aux)
    cdef size_t n_in = inputs.shape[0], n_aux = aux.shape[0]
    a_aux = _words("a_aux", a_aux, n_aux)
    b_aux = _words("b_aux", b_aux, n_aux)
    b_input = _words("b_input", b_input, n_in)
    cdef uint64_t[:, ::1] v_in = inputs if n_in else np.zeros((1, 4), np.uint64)
    cdef uint64_t[:, ::1] v_aux = aux if n_aux else np.zeros((1, 4), np.uint64)
    cdef uint64_t[::1] w_a = a_aux, w_b = b_aux, w_bi = b_input
    cdef prep_counts_t cnt
    cdef size_t nt = threads_arg(threads)
    cdef size_t parts = prep_parts(n_aux, nt)
    cdef vector[prep_chunk_t] chunks = vector[prep_chunk_t](parts)
    # pass 1 classifies aux into two bitmaps: ones (L's `ones` itself: L indexes aux) and full
    l_ones = np.empty(max(1, prep_words(n_aux)), dtype=np.uint64)
    full_bits = np.empty(max(1, prep_words(n_aux)), dtype=np.uint64)
    cdef uint64_t[::1] w_one = l_ones, w_full = full_bits
    with nogil:
        cnt = prep_count(<const fr_t*>&v_aux[0, 0], n_aux, &w_a[0], &w_b[0], parts, chunks.data(),
                         &w_one[0], &w_full[0])
    cdef size_t pa, pb, pbi
    with nogil:
        pa = popcount_words(&w_a[0], n_aux)
        pb = popcount_words(&w_b[0], n_aux)
        pbi = popcount_words(&w_bi[0], n_in)
    sizes = [n_aux, n_in + pa, pbi + pb]
    if max(sizes) >= 1 << 32:
        raise ValueError(f"prep_msm: {max(sizes)} SRS points in one query: the tail indices are 32-bit")
    tails = [cnt.full[0], cnt.full[1] + n_in, cnt.full[2] + pbi]
    out = {}
    cdef prep_query_t q[3]
    cdef uint64_t[::1] ones_v
    cdef uint64_t[:, ::1] ts_v
    cdef uint32_t[::1] ti_v
    keep = []
    for k, name in enumerate(("l", "a", "b")):
        ones = l_ones if k == 0 else np.zeros(max(1, (sizes[k] + 63) // 64), dtype=np.uint64)
        ts = np.empty((max(1, tails[k]), 4), dtype=np.uint64)
        ti = np.empty(max(1, tails[k]), dtype=np.uint32)
        keep.append((ones, ts, ti))
        ones_v = ones
        ts_v = ts
        ti_v = ti
        q[k].ones = &ones_v[0]
        q[k].tail_scalars = &ts_v[0, 0]
        q[k].tail_idx = &ti_v[0]
        q[k].n_ones = 0
        q[k].n_tail = 0
    with nogil:
        prep_fill(<const fr_t*>&v_in[0, 0], n_in, <const fr_t*>&v_aux[0, 0], n_aux,
                  &w_a[0], &w_bi[0], &w_b[0], q, parts, chunks.data(), &w_one[0], &w_full[0],
                  canonical)
    for k, name in enumerate(("l", "a", "b")):
        ones, ts, ti = keep[k]
        if q[k].n_tail != tails[k]:
            raise RuntimeError(f"prep_msm: {name} tail count mismatch {q[k].n_tail} != {tails[k]}")
        out[name + "_ones"] = ones[: (sizes[k] + 63) // 64]
        out[name + "_tail_scalars"] = ts[: tails[k]]
        out[name + "_tail_idx"] = ti[: tails[k]]
        out[name + "_n_ones"] = int(q[k].n_ones)
        out[name + "_size"] = int(sizes[k])
    out["tail_form"] = form
    return out
