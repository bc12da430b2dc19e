# cdef declarations of cuzk._native._msm (cuzk/msm.hpp), for other Cython modules to cimport.
#
# Contract: raw little-endian u64 arrays. Points are affine Montgomery (G1: 12 u64 = x‖y,
# G2: 24 u64 = x.c0‖x.c1‖y.c0‖y.c1), all-zero = infinity; scalars 4 u64 canonical, < 2^255.
# group 1 = G1, 2 = G2; out receives the affine result (12 / 24 u64). threads 0 = all cores.
# Every function runs without the GIL; std::bad_alloc surfaces as MemoryError.

from libc.stdint cimport uint32_t, uint64_t
from libc.stddef cimport size_t


cdef extern from "cuzk/msm.hpp" namespace "cuzk" nogil:
    cdef cppclass msm_config:
        msm_config()
        unsigned window
        unsigned ranges
        size_t block
        size_t batch
        size_t small
        size_t scratch
        size_t group
        int portable
        int no_simd

    void msm_u64(int group, uint64_t* out, const uint64_t* points, const uint64_t* scalars,
                 size_t n, size_t threads, const msm_config& cfg) except +
    void msm_indexed_u64(int group, uint64_t* out, const uint64_t* base, const uint64_t* scalars,
                         const uint64_t* idx64, const uint32_t* idx32, size_t m, size_t threads,
                         const msm_config& cfg) except +
    void batch_add_u64(int group, uint64_t* out, const uint64_t* points, size_t n,
                       const uint64_t* bitmap, size_t threads, const msm_config& cfg) except +
    unsigned msm_compiled_isa()
    unsigned msm_runtime_isa()
