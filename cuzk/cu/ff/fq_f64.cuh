// The Fq Montgomery product on the FP64 pipe: the same value and bytes as fq_t's
// operator* (R = 2^384, result fully reduced), computed with double-precision FMAs
// instead of 32-bit IMADs, so that it runs on the SM's FP64 units (64 lanes per clock
// per SM on sm_90, beside the IMAD pipe's 64).  Experimental: measured by
// bench/bench_gpu_fq_mul.py; no kernel uses it yet.
//
// Limbs: 8 words of 48 bits (8 * 48 = 384, so R is the same as fq_t's), held as
// doubles (exact: < 2^53).  A word x < 2^48 becomes a double with one OR and one
// subtraction: the bits 0x433 << 52 | x are the double 2^52 + x.
//
// Limb product (3 FP64 operations, no conversion instruction): for x, y < 2^48,
//   h = RN(x*y + 2^100)          every double in [2^100, 2^101) is a multiple of 2^48,
//                                 so h - 2^100 = hi * 2^48 with |x*y - hi * 2^48| <= 2^47;
//   t = (2^100 + K) - h           = K - hi * 2^48, exact (a multiple of 2^48 below 2^97);
//   l = RN(x*y + t)               = K + (x*y - hi * 2^48), exact: K = 3 * 2^51 keeps it in
//                                 [2^52, 2^53), where every integer is a double.
// In those binades the bit pattern is an affine function of the value, so
//   bits(h) - bits(2^100) = hi   (0 <= hi <= 2^48)     and
//   bits(l) - bits(K)     = lo   (|lo| <= 2^47, signed),  x*y = hi * 2^48 + lo.
// Both go into 64-bit integer columns as raw bit patterns (wrapping sums); each column's
// count of offsets is known at compile time after unrolling, so the offsets cost one
// subtraction per column read, not one per term.
//
// Montgomery reduction by 48-bit words (operand scanning): for row r = 0..7,
// m = (column r) * (-p^-1) mod 2^48 (three IMADs), m * p added to columns r..r+8, which
// zeroes column r mod 2^48; its quotient carries into column r+1.  Columns stay below
// 2^55 in magnitude (at most 32 terms of 2^48 and a carry), far inside int64.  The result,
// columns 8..15, is (a*b + M*p) / 2^384 < (p^2 + 2^384 p) / 2^384 < 2p; normalized to
// 48-bit words it is packed into fq_t's twelve 32-bit limbs and fq_t::reduce_once
// subtracts p once if needed, giving the same bytes as the integer product.
//
// Under CUZK_HOST_EMU std::fma and plain subtraction give the same IEEE round-to-nearest
// results as the device's __fma_rn / __dsub_rn, so the host emulator checks this code
// bit for bit (tests/test_cu_emu_f64.py).
#pragma once
#include "ff/bls12_381.cuh"
#ifdef CUZK_HOST_EMU
#include <cmath>
#include <cstring>
#endif

namespace cuzk {
namespace f64 {

constexpr uint64_t BITS_2P100 = 0x4630000000000000ull;    // 2^100 (ulp 2^48)
constexpr uint64_t BITS_K = 0x4338000000000000ull;        // K = 3 * 2^51 (ulp 1)
constexpr uint64_t BITS_2P100_K = 0x4630000000000018ull;  // 2^100 + K (exact)
constexpr uint64_t BITS_2P52 = 0x4330000000000000ull;     // 2^52
constexpr uint64_t MASK48 = (1ull << 48) - 1;
constexpr uint64_t FQ_PINV48 = 0xfffcfffcfffdull;          // -p^-1 mod 2^48

// Fq's modulus in 48-bit words (checked against fq_params_t by tests/test_cu_emu_f64.py).
CUZK_DEVICE constexpr uint64_t fq_word48(int i)
{
    switch (i) {
    case 0: return 0xffffffffaaabull; case 1: return 0xb153ffffb9feull;
    case 2: return 0xf6241eabfffeull; case 3: return 0x6730d2a0f6b0ull;
    case 4: return 0x4b84f38512bfull; case 5: return 0x434bacd76477ull;
    case 6: return 0xe69a4b1ba7b6ull; case 7: return 0x1a0111ea397full;
    default: return 0;
    }
}

#ifdef CUZK_HOST_EMU
inline double as_double(uint64_t b) { double d; std::memcpy(&d, &b, 8); return d; }
inline uint64_t as_bits(double d) { uint64_t b; std::memcpy(&b, &d, 8); return b; }
inline double fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
inline double sub_rn(double a, double b) { return a - b; }
#else
CUZK_DEVICE double as_double(uint64_t b) { return __longlong_as_double((long long)b); }
CUZK_DEVICE uint64_t as_bits(double d) { return (uint64_t)__double_as_longlong(d); }
CUZK_DEVICE double fma_rn(double a, double b, double c) { return __fma_rn(a, b, c); }
CUZK_DEVICE double sub_rn(double a, double b) { return __dsub_rn(a, b); }
#endif

// A 48-bit word as a double.
CUZK_DEVICE double word(uint64_t w) { return sub_rn(as_double(BITS_2P52 | w), as_double(BITS_2P52)); }

// Columns k (lo) and k+1 (hi) += x * y, as raw bit patterns; off[] tallies the offsets.
CUZK_DEVICE void mac(uint64_t* col, uint64_t* off, int k, double x, double y)
{
    const double h = fma_rn(x, y, as_double(BITS_2P100));
    const double t = sub_rn(as_double(BITS_2P100_K), h);
    const double l = fma_rn(x, y, t);
    col[k] += as_bits(l);
    off[k] += BITS_K;
    col[k + 1] += as_bits(h);
    off[k + 1] += BITS_2P100;
}

// fq_t's twelve 32-bit limbs as eight 48-bit words (doubles).
CUZK_DEVICE void to_words(const uint32_t* l, double* x)
{
#pragma unroll
    for (int q = 0; q < 4; q++) {
        const uint32_t l0 = l[3 * q], l1 = l[3 * q + 1], l2 = l[3 * q + 2];
        x[2 * q] = word((uint64_t)(l1 & 0xffffu) << 32 | l0);
        x[2 * q + 1] = word((uint64_t)l2 << 16 | l1 >> 16);
    }
}

}  // namespace f64

// a * b * 2^-384 mod p for the Fq types (fq_t, mont_t<fq_params_t>): the same bytes as
// their operator*.
template <class F>
CUZK_DEVICE F fq_mul_f64(const F& a, const F& b)
{
    static_assert(F::N == 12, "fq_mul_f64 is the Fq product");
    using namespace f64;
    double x[8], y[8];
    to_words(a.l, x);
    to_words(b.l, y);
    uint64_t col[16], off[16];
#pragma unroll
    for (int k = 0; k < 16; k++) col[k] = off[k] = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) {
#pragma unroll
        for (int j = 0; j < 8; j++) mac(col, off, i + j, x[i], y[j]);
    }
#pragma unroll
    for (int r = 0; r < 8; r++) {
        const uint64_t m = ((col[r] - off[r]) * FQ_PINV48) & MASK48;
        const double md = word(m);
#pragma unroll
        for (int j = 0; j < 8; j++) mac(col, off, r + j, md, (double)fq_word48(j));
        col[r + 1] += (uint64_t)((int64_t)(col[r] - off[r]) >> 48);  // exact: column r is 0 mod 2^48
    }
    uint64_t w[8];
    int64_t c = 0;
#pragma unroll
    for (int k = 0; k < 8; k++) {
        const uint64_t v = col[8 + k] - off[8 + k] + (uint64_t)c;
        w[k] = v & MASK48;
        c = (int64_t)v >> 48;  // 0 after the last word: the value is < 2p < 2^384
    }
    uint32_t r[12];
#pragma unroll
    for (int q = 0; q < 4; q++) {
        r[3 * q] = (uint32_t)w[2 * q];
        r[3 * q + 1] = (uint32_t)(w[2 * q] >> 32) | (uint32_t)(w[2 * q + 1] << 16);
        r[3 * q + 2] = (uint32_t)(w[2 * q + 1] >> 16);
    }
    return F::reduce_once(r);
}

}  // namespace cuzk
