// Host harness (developer/test tool only) for tests/test_cu_emu_sqr.py: mont_t::sqr() and the
// product a * a of one field over an array of elements, compiled with CUZK_HOST_EMU like
// emu.cpp but without the kernel launcher (only the field headers).
//
// Build: c++ -O2 -std=c++20 -shared -fPIC -I<cuzk/cu> field_sqr.cpp -o libcuzk_sqr.so
#include "cuda_emu.hpp"
#include "ff/bls12_381.cuh"

#include <cstddef>
#include <cstring>

namespace cuzk {
namespace cc {
thread_local uint32_t emu_cf;  // the carry flag of cuzk/cu/ff/carry.cuh's host branch
}
}  // namespace cuzk

namespace {

// The Fq field with the product and the square inlined (fq_t has both out of line).
typedef cuzk::mont_t<cuzk::fq_params_t> fq_inline_t;

template <class F>
void sqr_and_mul(const uint32_t* in, uint32_t* out_sqr, uint32_t* out_mul, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        F a;
        std::memcpy(a.l, in + i * F::N, sizeof a.l);
        cuzk::cc::emu_cf = 1;  // a chain that reads the carry before setting it computes garbage
        const F s = a.sqr();
        cuzk::cc::emu_cf = 1;
        const F m = a * a;
        std::memcpy(out_sqr + i * F::N, s.l, sizeof s.l);
        std::memcpy(out_mul + i * F::N, m.l, sizeof m.l);
    }
}

}  // namespace

// field: 0 Fr (fr_t), 1 Fq (fq_t: out of line), 2 Fq inlined.  Elements are N little-endian
// 32-bit limbs each (Montgomery form, < p).  Returns 0, or -1 for an unknown field.
extern "C" __attribute__((visibility("default"))) int emu_field_sqr(int field, const uint32_t* in,
                                                                    uint32_t* out_sqr, uint32_t* out_mul,
                                                                    size_t n)
{
    switch (field) {
    case 0: sqr_and_mul<cuzk::fr_t>(in, out_sqr, out_mul, n); return 0;
    case 1: sqr_and_mul<cuzk::fq_t>(in, out_sqr, out_mul, n); return 0;
    case 2: sqr_and_mul<fq_inline_t>(in, out_sqr, out_mul, n); return 0;
    default: return -1;
    }
}
