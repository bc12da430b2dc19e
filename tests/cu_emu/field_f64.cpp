// Host harness (developer/test tool only) for tests/test_cu_emu_f64.py: the FP64-pipe Fq
// product (cuzk/cu/ff/fq_f64.cuh) beside fq_t's integer product, over arrays of element
// pairs, compiled with CUZK_HOST_EMU like field_sqr.cpp (only the field headers).
//
// Build: c++ -O2 -std=c++20 -shared -fPIC -I<cuzk/cu> field_f64.cpp -o libcuzk_f64.so
#include "cuda_emu.hpp"
#include "ff/fq_f64.cuh"

#include <cstddef>
#include <cstring>

namespace cuzk {
namespace cc {
thread_local uint32_t emu_cf;  // the carry flag of cuzk/cu/ff/carry.cuh's host branch
}
}  // namespace cuzk

// out_f64[i] = fq_mul_f64(a[i], b[i]), out_int[i] = a[i] * b[i] (fq_t); 12 little-endian
// 32-bit limbs per element (Montgomery form, < p).
extern "C" __attribute__((visibility("default"))) void emu_fq_mul_f64(const uint32_t* a, const uint32_t* b,
                                                                      uint32_t* out_f64, uint32_t* out_int,
                                                                      size_t n)
{
    for (size_t i = 0; i < n; i++) {
        cuzk::fq_t x, y;
        std::memcpy(x.l, a + 12 * i, sizeof x.l);
        std::memcpy(y.l, b + 12 * i, sizeof y.l);
        const cuzk::fq_t f = cuzk::fq_mul_f64(x, y);
        cuzk::cc::emu_cf = 1;  // a chain that reads the carry before setting it computes garbage
        const cuzk::fq_t m = x * y;
        std::memcpy(out_f64 + 12 * i, f.l, sizeof f.l);
        std::memcpy(out_int + 12 * i, m.l, sizeof m.l);
    }
}

// The 48-bit words of p and -p^-1 mod 2^48 as the header has them (checked by the test).
extern "C" __attribute__((visibility("default"))) void emu_fq_f64_constants(uint64_t* words, uint64_t* pinv)
{
    for (int i = 0; i < 8; i++) words[i] = cuzk::f64::fq_word48(i);
    *pinv = cuzk::f64::FQ_PINV48;
}
