// BLS12-381 G1 on the GPU: affine points (the CPU's layout) and XYZZ coordinates.
//
// affine_g1_t: x ‖ y, each an Fq element in Montgomery form (12 x 32-bit limbs, the same
// bytes as the CPU's 6 x 64-bit limbs); all-zero = the point at infinity (as on the CPU).
// xyzz_g1_t (X, Y, ZZ, ZZZ): x = X/ZZ, y = Y/ZZZ, ZZ^3 = ZZZ^2; infinity iff ZZ == 0.
// Formulas: the same as cuzk/_native/include/cuzk/ec.hpp (EFD "xyzz" shortcuts): madd-2008-s
// (mixed, 8M + 2S), add-2008-s (12M + 2S), dbl-2008-s-1 (6M + 4S), mdbl-2008-s-1; the
// exceptional cases (either input infinity, P == Q, P == -Q) are handled, so any order of
// additions gives the same group element.
#pragma once
#include "ff/bls12_381.cuh"

namespace cuzk {

struct affine_g1_t {
    fq_t x, y;
    CUZK_DEVICE bool is_inf() const { return x.is_zero() && y.is_zero(); }
};

struct xyzz_g1_t {
    fq_t X, Y, ZZ, ZZZ;

    static CUZK_DEVICE xyzz_g1_t infinity()
    {
        xyzz_g1_t r;
        r.X = fq_t::one();
        r.Y = fq_t::one();
        r.ZZ = fq_t::zero();
        r.ZZZ = fq_t::zero();
        return r;
    }
    static CUZK_DEVICE xyzz_g1_t from_affine(const affine_g1_t& p)
    {
        if (p.is_inf()) return infinity();
        xyzz_g1_t r;
        r.X = p.x;
        r.Y = p.y;
        r.ZZ = fq_t::one();
        r.ZZZ = fq_t::one();
        return r;
    }
    CUZK_DEVICE bool is_inf() const { return ZZ.is_zero(); }

    // dbl-2008-s-1: 6M + 4S
    CUZK_DEVICE xyzz_g1_t dbl() const
    {
        if (is_inf()) return *this;
        fq_t U = Y + Y, V = U.sqr(), W = U * V, S = X * V;
        fq_t Xs = X.sqr(), M = Xs + Xs + Xs;
        xyzz_g1_t r;
        r.X = M.sqr() - (S + S);
        r.Y = M * (S - r.X) - W * Y;
        r.ZZ = V * ZZ;
        r.ZZZ = W * ZZZ;
        return r;
    }
    // mdbl-2008-s-1: 4M + 3S (affine input, not infinity)
    static CUZK_DEVICE xyzz_g1_t dbl_affine(const affine_g1_t& p)
    {
        fq_t U = p.y + p.y, V = U.sqr(), W = U * V, S = p.x * V;
        fq_t Xs = p.x.sqr(), M = Xs + Xs + Xs;
        xyzz_g1_t r;
        r.X = M.sqr() - (S + S);
        r.Y = M * (S - r.X) - W * p.y;
        r.ZZ = V;
        r.ZZZ = W;
        return r;
    }
    // madd-2008-s: 8M + 2S
    CUZK_DEVICE xyzz_g1_t add(const affine_g1_t& q) const
    {
        if (q.is_inf()) return *this;
        if (is_inf()) return from_affine(q);
        fq_t P = q.x * ZZ - X, R = q.y * ZZZ - Y;
        if (P.is_zero()) return R.is_zero() ? dbl_affine(q) : infinity();
        fq_t PP = P.sqr(), PPP = P * PP, Q = X * PP;
        xyzz_g1_t r;
        r.X = R.sqr() - PPP - (Q + Q);
        r.Y = R * (Q - r.X) - Y * PPP;
        r.ZZ = ZZ * PP;
        r.ZZZ = ZZZ * PPP;
        return r;
    }
    // add-2008-s: 12M + 2S
    CUZK_DEVICE xyzz_g1_t add(const xyzz_g1_t& q) const
    {
        if (q.is_inf()) return *this;
        if (is_inf()) return q;
        fq_t U1 = X * q.ZZ, U2 = q.X * ZZ, S1 = Y * q.ZZZ, S2 = q.Y * ZZZ;
        fq_t P = U2 - U1, R = S2 - S1;
        if (P.is_zero()) return R.is_zero() ? dbl() : infinity();
        fq_t PP = P.sqr(), PPP = P * PP, Q = U1 * PP;
        xyzz_g1_t r;
        r.X = R.sqr() - PPP - (Q + Q);
        r.Y = R * (Q - r.X) - S1 * PPP;
        r.ZZ = ZZ * q.ZZ * PP;
        r.ZZZ = ZZZ * q.ZZZ * PPP;
        return r;
    }
    // k·this for a small scalar k (double and add, MSB first)
    CUZK_DEVICE xyzz_g1_t mul_u32(uint32_t k) const
    {
        xyzz_g1_t r = infinity();
        for (int i = 31; i >= 0; i--) {
            r = r.dbl();
            if ((k >> i) & 1u) r = r.add(*this);
        }
        return r;
    }
};

}  // namespace cuzk
