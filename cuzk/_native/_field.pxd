# nogil C++ declarations of the CPU field/curve encoding layer (cuzk/encode.hpp), for
# other native modules to cimport:  from cuzk._native._field cimport decode_g1, ...
# Pointers to affine points are the opaque types below; a C-contiguous uint64 array of
# shape (n, 12) / (n, 24) (Montgomery x‖y, infinity all-zero) casts to them directly.
from libc.stdint cimport uint8_t, uint64_t
from libcpp cimport bool as cbool


cdef extern from "cuzk/encode.hpp" namespace "cuzk" nogil:
    cdef cppclass g1_affine_t "cuzk::g1_affine_t":
        pass
    cdef cppclass g2_affine_t "cuzk::g2_affine_t":
        pass
    cdef cppclass g1_jacobian_t "cuzk::g1_jacobian_t":
        pass
    cdef cppclass g2_jacobian_t "cuzk::g2_jacobian_t":
        pass

    cdef struct bulk_result "cuzk::bulk_result":
        size_t index      # first bad element, n when none
        int status        # decode_status of that element

    enum:
        DECODE_OK "cuzk::DECODE_OK"
        DECODE_BAD_FLAGS "cuzk::DECODE_BAD_FLAGS"
        DECODE_BAD_INFINITY "cuzk::DECODE_BAD_INFINITY"
        DECODE_NONCANONICAL "cuzk::DECODE_NONCANONICAL"
        DECODE_NOT_ON_CURVE "cuzk::DECODE_NOT_ON_CURVE"
        DECODE_NOT_IN_SUBGROUP "cuzk::DECODE_NOT_IN_SUBGROUP"

    # Bulk point codecs (threads = 0: all hardware threads). status may be NULL.
    bulk_result decode_g1 "cuzk::decode_points<cuzk::g1_curve>"(
        g1_affine_t* out, const uint8_t* inp, size_t n, cbool compressed, cbool subgroup,
        size_t threads, uint8_t* status)
    bulk_result decode_g2 "cuzk::decode_points<cuzk::g2_curve>"(
        g2_affine_t* out, const uint8_t* inp, size_t n, cbool compressed, cbool subgroup,
        size_t threads, uint8_t* status)
    void encode_g1 "cuzk::encode_points<cuzk::g1_curve>"(
        uint8_t* out, const g1_affine_t* inp, size_t n, cbool compressed, size_t threads)
    void encode_g2 "cuzk::encode_points<cuzk::g2_curve>"(
        uint8_t* out, const g2_affine_t* inp, size_t n, cbool compressed, size_t threads)
    bulk_result check_g1 "cuzk::check_points<cuzk::g1_curve>"(
        const g1_affine_t* inp, size_t n, cbool subgroup, size_t threads)
    bulk_result check_g2 "cuzk::check_points<cuzk::g2_curve>"(
        const g2_affine_t* inp, size_t n, cbool subgroup, size_t threads)
    void jacobian_to_affine_g1 "cuzk::jacobian_to_affine<cuzk::g1_curve>"(
        g1_affine_t* out, const g1_jacobian_t* inp, size_t n, size_t threads)
    void jacobian_to_affine_g2 "cuzk::jacobian_to_affine<cuzk::g2_curve>"(
        g2_affine_t* out, const g2_jacobian_t* inp, size_t n, size_t threads)

    # Canonical limbs <-> Montgomery; w limbs per element (fr 4, fq 6, fq2 12 with the
    # fq variants). to_mont returns the first element >= the modulus, or n.
    size_t fr_to_mont "cuzk::to_mont<cuzk::fr_t>"(uint64_t* out, const uint64_t* inp, size_t n, size_t w, size_t threads)
    size_t fq_to_mont "cuzk::to_mont<cuzk::fq_t>"(uint64_t* out, const uint64_t* inp, size_t n, size_t w, size_t threads)
    void fr_from_mont "cuzk::from_mont<cuzk::fr_t>"(uint64_t* out, const uint64_t* inp, size_t n, size_t w, size_t threads)
    void fq_from_mont "cuzk::from_mont<cuzk::fq_t>"(uint64_t* out, const uint64_t* inp, size_t n, size_t w, size_t threads)
    size_t fr_first_noncanonical "cuzk::first_noncanonical<cuzk::fr_t>"(const uint64_t* inp, size_t n, size_t w, size_t threads)
    size_t fq_first_noncanonical "cuzk::first_noncanonical<cuzk::fq_t>"(const uint64_t* inp, size_t n, size_t w, size_t threads)
