// Short-Weierstrass points y^2 = x^3 + b (a = 0) over Fq (G1) and Fq2 (G2), CPU backend.
//
// Representations (all coordinates Montgomery):
//   affine_t   (x, y); the point at infinity is (0, 0) — never on the curve since b != 0
//              (the blst in-memory convention; bulk arrays use it too).
//   jacobian_t (X, Y, Z): x = X/Z^2, y = Y/Z^3; infinity iff Z == 0.
//   xyzz_t     (X, Y, ZZ, ZZZ): x = X/ZZ, y = Y/ZZZ, ZZ^3 = ZZZ^2; infinity iff ZZ == 0.
// Formula names and costs refer to the Explicit-Formulas Database (hyperelliptic.org/EFD).
#pragma once
#include "ff.hpp"

namespace cuzk {

struct g1_curve {
    typedef fq_t field_t;
    static CUZK_INLINE field_t b() { static constexpr uint64_t B[6] = CUZK_FQ_B_G1; return field_t::from_limbs(B); }
    static CUZK_INLINE field_t gen_x() { static constexpr uint64_t V[6] = CUZK_G1_GEN_X; return field_t::from_limbs(V); }
    static CUZK_INLINE field_t gen_y() { static constexpr uint64_t V[6] = CUZK_G1_GEN_Y; return field_t::from_limbs(V); }
};

struct g2_curve {
    typedef fq2_t field_t;
    // b' = 4(1 + u)
    static CUZK_INLINE field_t b() { static constexpr uint64_t B[6] = CUZK_FQ_B_G1; fq_t f = fq_t::from_limbs(B); return {f, f}; }
    static CUZK_INLINE field_t gen_x() {
        static constexpr uint64_t A[6] = CUZK_G2_GEN_X0, B[6] = CUZK_G2_GEN_X1;
        return {fq_t::from_limbs(A), fq_t::from_limbs(B)};
    }
    static CUZK_INLINE field_t gen_y() {
        static constexpr uint64_t A[6] = CUZK_G2_GEN_Y0, B[6] = CUZK_G2_GEN_Y1;
        return {fq_t::from_limbs(A), fq_t::from_limbs(B)};
    }
};

template <class C>
struct affine_t {
    typedef typename C::field_t F;
    F x, y;
    static CUZK_INLINE affine_t infinity() { return {F::zero(), F::zero()}; }
    static CUZK_INLINE affine_t generator() { return {C::gen_x(), C::gen_y()}; }
    CUZK_INLINE bool is_inf() const { return x.is_zero() && y.is_zero(); }
    CUZK_INLINE bool on_curve() const {  // infinity counts as on the curve
        if (is_inf()) return true;
        return y.sqr() == x.sqr() * x + C::b();
    }
    CUZK_INLINE affine_t operator-() const { return is_inf() ? *this : affine_t{x, -y}; }
    CUZK_INLINE bool operator==(const affine_t& o) const { return x == o.x && y == o.y; }
};

template <class C>
struct jacobian_t {
    typedef typename C::field_t F;
    F X, Y, Z;
    static CUZK_INLINE jacobian_t infinity() { return {F::one(), F::one(), F::zero()}; }
    static CUZK_INLINE jacobian_t from_affine(const affine_t<C>& p) {
        return p.is_inf() ? infinity() : jacobian_t{p.x, p.y, F::one()};
    }
    CUZK_INLINE bool is_inf() const { return Z.is_zero(); }
    CUZK_INLINE jacobian_t operator-() const { return {X, -Y, Z}; }

    // dbl-2009-l: 2M + 5S
    CUZK_INLINE jacobian_t dbl() const {
        if (is_inf()) return *this;
        F A = X.sqr(), B = Y.sqr(), Cc = B.sqr();
        F D = ((X + B).sqr() - A - Cc).dbl();   /* D = 4·X·Y^2 */
        F E = A.dbl() + A;                      /* E = 3·X^2 */
        F Fv = E.sqr();
        jacobian_t r;
        r.X = Fv - D.dbl();
        r.Y = E * (D - r.X) - Cc.dbl().dbl().dbl();
        r.Z = (Y * Z).dbl();
        return r;
    }
    // madd-2007-bl: 7M + 4S (q affine)
    CUZK_INLINE jacobian_t add(const affine_t<C>& q) const {
        if (q.is_inf()) return *this;
        if (is_inf()) return from_affine(q);
        F Z1Z1 = Z.sqr();
        F U2 = q.x * Z1Z1, S2 = q.y * Z * Z1Z1;
        F H = U2 - X, R = (S2 - Y).dbl();
        if (H.is_zero()) return R.is_zero() ? from_affine(q).dbl() : infinity();
        F HH = H.sqr(), I = HH.dbl().dbl(), J = H * I, V = X * I;
        jacobian_t r;
        r.X = R.sqr() - J - V.dbl();
        r.Y = R * (V - r.X) - (Y * J).dbl();
        r.Z = (Z + H).sqr() - Z1Z1 - HH;
        return r;
    }
    // add-2007-bl: 11M + 5S
    CUZK_INLINE jacobian_t add(const jacobian_t& q) const {
        if (q.is_inf()) return *this;
        if (is_inf()) return q;
        F Z1Z1 = Z.sqr(), Z2Z2 = q.Z.sqr();
        F U1 = X * Z2Z2, U2 = q.X * Z1Z1;
        F S1 = Y * q.Z * Z2Z2, S2 = q.Y * Z * Z1Z1;
        F H = U2 - U1, R = (S2 - S1).dbl();
        if (H.is_zero()) return R.is_zero() ? dbl() : infinity();
        F I = H.dbl().sqr(), J = H * I, V = U1 * I;
        jacobian_t r;
        r.X = R.sqr() - J - V.dbl();
        r.Y = R * (V - r.X) - (S1 * J).dbl();
        r.Z = ((Z + q.Z).sqr() - Z1Z1 - Z2Z2) * H;
        return r;
    }
    CUZK_INLINE affine_t<C> to_affine() const {
        if (is_inf()) return affine_t<C>::infinity();
        F zi = Z.inv(), zi2 = zi.sqr();
        return {X * zi2, Y * zi2 * zi};
    }
    CUZK_INLINE bool operator==(const jacobian_t& q) const {  // projective equality
        if (is_inf() || q.is_inf()) return is_inf() && q.is_inf();
        F Z1Z1 = Z.sqr(), Z2Z2 = q.Z.sqr();
        return X * Z2Z2 == q.X * Z1Z1 && Y * q.Z * Z2Z2 == q.Y * Z * Z1Z1;
    }
};

template <class C>
struct xyzz_t {
    typedef typename C::field_t F;
    F X, Y, ZZ, ZZZ;
    static CUZK_INLINE xyzz_t infinity() { return {F::one(), F::one(), F::zero(), F::zero()}; }
    static CUZK_INLINE xyzz_t from_affine(const affine_t<C>& p) {
        return p.is_inf() ? infinity() : xyzz_t{p.x, p.y, F::one(), F::one()};
    }
    CUZK_INLINE bool is_inf() const { return ZZ.is_zero(); }
    CUZK_INLINE xyzz_t operator-() const { return {X, -Y, ZZ, ZZZ}; }

    // dbl-2008-s-1: 6M + 4S
    CUZK_INLINE xyzz_t dbl() const {
        if (is_inf()) return *this;
        F U = Y.dbl(), V = U.sqr(), W = U * V, S = X * V;
        F Xs = X.sqr(), M = Xs.dbl() + Xs;
        xyzz_t r;
        r.X = M.sqr() - S.dbl();
        r.Y = M * (S - r.X) - W * Y;
        r.ZZ = V * ZZ;
        r.ZZZ = W * ZZZ;
        return r;
    }
    // mdbl-2008-s-1 (affine input): 4M + 3S
    static CUZK_INLINE xyzz_t dbl_affine(const affine_t<C>& p) {
        if (p.is_inf()) return infinity();
        F U = p.y.dbl(), V = U.sqr(), W = U * V, S = p.x * V;
        F Xs = p.x.sqr(), M = Xs.dbl() + Xs;
        xyzz_t r;
        r.X = M.sqr() - S.dbl();
        r.Y = M * (S - r.X) - W * p.y;
        r.ZZ = V;
        r.ZZZ = W;
        return r;
    }
    // madd-2008-s: 8M + 2S (q affine)
    CUZK_INLINE xyzz_t add(const affine_t<C>& q) const {
        if (q.is_inf()) return *this;
        if (is_inf()) return from_affine(q);
        F P = q.x * ZZ - X, R = q.y * ZZZ - Y;
        if (P.is_zero()) return R.is_zero() ? dbl_affine(q) : infinity();
        F PP = P.sqr(), PPP = P * PP, Q = X * PP;
        xyzz_t r;
        r.X = R.sqr() - PPP - Q.dbl();
        r.Y = R * (Q - r.X) - Y * PPP;
        r.ZZ = ZZ * PP;
        r.ZZZ = ZZZ * PPP;
        return r;
    }
    // subtract an affine point: add(-q)
    CUZK_INLINE xyzz_t sub(const affine_t<C>& q) const { return add(-q); }
    // add-2008-s: 12M + 2S
    CUZK_INLINE xyzz_t add(const xyzz_t& q) const {
        if (q.is_inf()) return *this;
        if (is_inf()) return q;
        F U1 = X * q.ZZ, U2 = q.X * ZZ, S1 = Y * q.ZZZ, S2 = q.Y * ZZZ;
        F P = U2 - U1, R = S2 - S1;
        if (P.is_zero()) return R.is_zero() ? dbl() : infinity();
        F PP = P.sqr(), PPP = P * PP, Q = U1 * PP;
        xyzz_t r;
        r.X = R.sqr() - PPP - Q.dbl();
        r.Y = R * (Q - r.X) - S1 * PPP;
        r.ZZ = ZZ * q.ZZ * PP;
        r.ZZZ = ZZZ * q.ZZZ * PPP;
        return r;
    }
    // x = X/ZZ, y = Y/ZZZ with one inversion of ZZ·ZZZ
    CUZK_INLINE affine_t<C> to_affine() const {
        if (is_inf()) return affine_t<C>::infinity();
        F inv = (ZZ * ZZZ).inv();
        return {X * (inv * ZZZ), Y * (inv * ZZ)};
    }
    CUZK_INLINE jacobian_t<C> to_jacobian() const {
        if (is_inf()) return jacobian_t<C>::infinity();
        F Z = ZZ * ZZZ;  // Z^2 = ZZ^2·ZZZ^2; X_j = X·ZZ·ZZZ^2, Y_j = Y·ZZ^3·ZZZ^2
        F ZZZs = ZZZ.sqr();
        return {X * ZZ * ZZZs, Y * ZZ.sqr() * ZZ * ZZZs, Z};
    }
};

// Batch conversion to affine with one inversion (Montgomery's trick on Z).
// scratch: 2n field elements.
template <class C>
inline void batch_to_affine(affine_t<C>* out, const jacobian_t<C>* in, size_t n,
                            typename C::field_t* scratch) {
    typedef typename C::field_t F;
    F* z = scratch;
    for (size_t i = 0; i < n; i++) z[i] = in[i].Z;
    batch_inverse(z, z, n, scratch + n);
    for (size_t i = 0; i < n; i++) {
        if (in[i].is_inf()) { out[i] = affine_t<C>::infinity(); continue; }
        F zi2 = z[i].sqr();
        out[i] = {in[i].X * zi2, in[i].Y * zi2 * z[i]};
    }
}

// [k]P for a canonical little-endian scalar of nlimbs limbs (double-and-add, not constant time:
// cuzk works on public data or randomizers whose timing leaks nothing across a process boundary).
template <class C>
inline jacobian_t<C> scalar_mul(const jacobian_t<C>& p, const uint64_t* k, size_t nlimbs) {
    jacobian_t<C> r = jacobian_t<C>::infinity();
    for (size_t i = nlimbs; i-- > 0;)
        for (int b = 63; b >= 0; b--) {
            r = r.dbl();
            if ((k[i] >> b) & 1) r = r.add(p);
        }
    return r;
}
template <class C>
inline jacobian_t<C> scalar_mul(const affine_t<C>& p, const uint64_t* k, size_t nlimbs) {
    jacobian_t<C> r = jacobian_t<C>::infinity();
    for (size_t i = nlimbs; i-- > 0;)
        for (int b = 63; b >= 0; b--) {
            r = r.dbl();
            if ((k[i] >> b) & 1) r = r.add(p);
        }
    return r;
}

// Prime-order subgroup membership: [r]P == O (255 doublings + adds; exact, not the fastest).
template <class C>
inline bool in_subgroup(const affine_t<C>& p) {
    if (p.is_inf()) return true;
    static constexpr uint64_t R[4] = CUZK_FR_MOD;
    return scalar_mul(p, R, 4).is_inf();
}

typedef affine_t<g1_curve> g1_affine_t;
typedef jacobian_t<g1_curve> g1_jacobian_t;
typedef xyzz_t<g1_curve> g1_xyzz_t;
typedef affine_t<g2_curve> g2_affine_t;
typedef jacobian_t<g2_curve> g2_jacobian_t;
typedef xyzz_t<g2_curve> g2_xyzz_t;

}  // namespace cuzk
