// Fq2 = Fq[u]/(u^2 + 1) on the GPU: c0 + c1·u, each an fq_t (Montgomery, 12 x 32-bit limbs).
// In memory c0 ‖ c1: 96 bytes, the same bytes as the CPU's fq2_t (cuzk/_native/include/cuzk/ff.hpp).
// Costs (M, S: Fq products; an Fq product is one out-of-line call, see bls12_381.cuh):
// mul 3M (Karatsuba), sqr 2M (complex squaring), add/sub/neg 2 Fq additions.
#pragma once
#include "ff/bls12_381.cuh"
#include "ff/inverse.cuh"

namespace cuzk {

struct fq2_t {
    fq_t c0, c1;

    static CUZK_DEVICE fq2_t zero() { return fq2_t{fq_t::zero(), fq_t::zero()}; }
    static CUZK_DEVICE fq2_t one() { return fq2_t{fq_t::one(), fq_t::zero()}; }

    CUZK_DEVICE bool is_zero() const { return c0.is_zero() && c1.is_zero(); }
    CUZK_DEVICE bool operator==(const fq2_t& b) const { return c0 == b.c0 && c1 == b.c1; }

    friend CUZK_DEVICE fq2_t operator+(const fq2_t& a, const fq2_t& b) { return fq2_t{a.c0 + b.c0, a.c1 + b.c1}; }
    friend CUZK_DEVICE fq2_t operator-(const fq2_t& a, const fq2_t& b) { return fq2_t{a.c0 - b.c0, a.c1 - b.c1}; }
    CUZK_DEVICE fq2_t operator-() const { return fq2_t{-c0, -c1}; }
    CUZK_DEVICE fq2_t& operator+=(const fq2_t& b) { return *this = *this + b; }
    CUZK_DEVICE fq2_t& operator-=(const fq2_t& b) { return *this = *this - b; }
    CUZK_DEVICE fq2_t& operator*=(const fq2_t& b) { return *this = *this * b; }

    // Karatsuba, 3M: v0 = a0·b0, v1 = a1·b1; c0 = v0 − v1 (u^2 = −1), c1 = (a0 + a1)(b0 + b1) − v0 − v1.
    friend CUZK_DEVICE fq2_t operator*(const fq2_t& a, const fq2_t& b)
    {
        const fq_t v0 = a.c0 * b.c0, v1 = a.c1 * b.c1;
        const fq_t s = (a.c0 + a.c1) * (b.c0 + b.c1);
        return fq2_t{v0 - v1, s - v0 - v1};
    }
    // complex squaring, 2M: (c0 + c1 u)^2 = (c0 + c1)(c0 − c1) + 2·c0·c1·u
    CUZK_DEVICE fq2_t sqr() const
    {
        const fq_t t = c0 * c1;
        return fq2_t{(c0 + c1) * (c0 - c1), t + t};
    }
    CUZK_DEVICE fq2_t mul_fq(const fq_t& s) const { return fq2_t{c0 * s, c1 * s}; }
    CUZK_DEVICE fq2_t conj() const { return fq2_t{c0, -c1}; }
};

// 1/(a0 + a1·u) = (a0 − a1·u) / (a0^2 + a1^2) in Fq2 = Fq[u]/(u^2 + 1): one Fq inversion
// (ff/inverse.cuh) + 2S + 2M; 0 ↦ 0.
CUZK_DEVICE fq2_t inverse(const fq2_t& a)
{
    const fq_t t = inverse(a.c0.sqr() + a.c1.sqr());
    return fq2_t{a.c0 * t, -(a.c1 * t)};
}

}  // namespace cuzk
