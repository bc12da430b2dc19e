# cython: language_level=3
# nogil entry points of the CPU NTT and H stage (cuzk/ntt.hpp), for other modules to cimport:
#   from cuzk._native._ntt cimport ntt_inplace, h_stage_inplace
# Data: 2^lg elements of 4 little-endian uint64 limbs, Montgomery form, fully reduced (< r).
from libc.stdint cimport uint64_t

cdef extern from "cuzk/ntt.hpp" nogil:
    # index of the first element >= r, or n when all are reduced
    size_t ntt_first_noncanonical "cuzk::ntt::first_noncanonical" (
        const uint64_t* v, size_t n, size_t threads)
    # in-place transform (natural order in and out); threads 0 = all cores; test_flags 0
    void ntt_inplace "cuzk::ntt::ntt_inplace" (
        uint64_t* data, int lg, bint inverse, bint coset, size_t threads, int test_flags) except +
    # a <- coefficients of h = (A·B − C)/Z from evaluations a, b, c (b, c overwritten); test_flags 0
    void h_stage_inplace "cuzk::ntt::h_stage_inplace" (
        uint64_t* a, uint64_t* b, uint64_t* c, int lg, size_t threads, int test_flags) except +
    # ω_(2^lg) in Montgomery form
    void ntt_domain_root "cuzk::ntt::domain_root" (uint64_t* out, int lg) except +
    # lazy-arithmetic test hook: out[0:12] = x + y, x − y, w·x·2^-256 (each < 2r)
    void ntt_arith_probe "cuzk::ntt::arith_probe" (
        const uint64_t* x, const uint64_t* y, const uint64_t* w, uint64_t* out, bint generic)
