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

// Field operations as static functions, the policy O of xyzz_formulas: field_ops over ff.hpp's
// operators; msm.hpp adds a back end with mulx/adcx/adox assembly for Fq.  Fq2 operations derive
// from the Fq ones (field_ops_base, CRTP on the back end D).
template <class D>
struct field_ops_base {
    static inline fq2_t add(const fq2_t& a, const fq2_t& b) { return {D::add(a.c0, b.c0), D::add(a.c1, b.c1)}; }
    static inline fq2_t sub(const fq2_t& a, const fq2_t& b) { return {D::sub(a.c0, b.c0), D::sub(a.c1, b.c1)}; }
    static inline fq2_t dbl(const fq2_t& a) { return {D::add(a.c0, a.c0), D::add(a.c1, a.c1)}; }
    static inline fq2_t neg(const fq2_t& a) { return {D::neg(a.c0), D::neg(a.c1)}; }
    // Karatsuba over u^2 = -1: 3M + 5A
    static inline fq2_t mul(const fq2_t& a, const fq2_t& b) {
        fq_t v0 = D::mul(a.c0, b.c0), v1 = D::mul(a.c1, b.c1);
        fq_t s = D::mul(D::add(a.c0, a.c1), D::add(b.c0, b.c1));
        return {D::sub(v0, v1), D::sub(D::sub(s, v0), v1)};
    }
    // (c0+c1)(c0-c1) + 2·c0·c1·u: 2M
    static inline fq2_t sqr(const fq2_t& a) {
        fq_t t = D::mul(a.c0, a.c1);
        return {D::mul(D::add(a.c0, a.c1), D::sub(a.c0, a.c1)), D::add(t, t)};
    }
    // 1/(c0 + c1 u) = (c0 - c1 u)/(c0^2 + c1^2); inverse of 0 is 0
    static inline fq2_t inv(const fq2_t& a) {
        fq_t n = D::inv(D::add(D::sqr(a.c0), D::sqr(a.c1)));
        return {D::mul(a.c0, n), D::neg(D::mul(a.c1, n))};
    }
    // a^(p-2) by 4-bit fixed windows: 380 S + 96 M; inverse of 0 is 0
    static inline fq_t inv(const fq_t& a) {
        fq_t tab[16];
        tab[0] = fq_t::one();
        tab[1] = a;
        for (int i = 2; i < 16; i++) tab[i] = D::mul(tab[i - 1], a);
        const uint64_t* e = fq_params::MOD_MINUS_2;
        fq_t r = tab[e[5] >> 60];
        for (int bit = 380 - 4; bit >= 0; bit -= 4) {
            r = D::sqr(D::sqr(D::sqr(D::sqr(r))));
            unsigned nib = (unsigned)(e[bit >> 6] >> (bit & 63)) & 15;
            if (nib) r = D::mul(r, tab[nib]);
        }
        return r;
    }
};

// A back end's Fq functions hide the base's Fq2 (and Fq inv) overloads unless brought in:
#define CUZK_FIELD_OPS_BASE(B) \
    using B::add; using B::sub; using B::dbl; using B::neg; using B::mul; using B::sqr; using B::inv

struct field_ops : field_ops_base<field_ops> {
    CUZK_FIELD_OPS_BASE(field_ops_base<field_ops>);
    static CUZK_INLINE fq_t add(const fq_t& a, const fq_t& b) { return a + b; }
    static CUZK_INLINE fq_t sub(const fq_t& a, const fq_t& b) { return a - b; }
    static CUZK_INLINE fq_t dbl(const fq_t& a) { return a + a; }
    static CUZK_INLINE fq_t neg(const fq_t& a) { return fq_t::zero() - a; }
    static inline fq_t mul(const fq_t& a, const fq_t& b) { return a * b; }
    static inline fq_t sqr(const fq_t& a) { return a * a; }
};

template <class C, class O>
struct xyzz_formulas;

template <class C>
struct xyzz_t {
    typedef typename C::field_t F;
    typedef xyzz_formulas<C, field_ops> ops;
    F X, Y, ZZ, ZZZ;
    static CUZK_INLINE xyzz_t infinity() { return {F::one(), F::one(), F::zero(), F::zero()}; }
    static CUZK_INLINE xyzz_t from_affine(const affine_t<C>& p) {
        return p.is_inf() ? infinity() : xyzz_t{p.x, p.y, F::one(), F::one()};
    }
    CUZK_INLINE bool is_inf() const { return ZZ.is_zero(); }
    CUZK_INLINE xyzz_t operator-() const { return {X, -Y, ZZ, ZZZ}; }
    // the formulas (and their costs) are xyzz_formulas', over ff.hpp's operators
    CUZK_INLINE xyzz_t dbl() const { return ops::dbl(*this); }
    static CUZK_INLINE xyzz_t dbl_affine(const affine_t<C>& p) { return p.is_inf() ? infinity() : ops::dbl_affine(p); }
    CUZK_INLINE xyzz_t add(const affine_t<C>& q) const { return ops::madd(*this, q); }
    CUZK_INLINE xyzz_t sub(const affine_t<C>& q) const { return add(-q); }
    CUZK_INLINE xyzz_t add(const xyzz_t& q) const { return ops::add(*this, q); }
    CUZK_INLINE affine_t<C> to_affine() const { return ops::to_affine(*this); }
    CUZK_INLINE jacobian_t<C> to_jacobian() const {
        if (is_inf()) return jacobian_t<C>::infinity();
        F Z = ZZ * ZZZ;  // Z^2 = ZZ^2·ZZZ^2; X_j = X·ZZ·ZZZ^2, Y_j = Y·ZZ^3·ZZZ^2
        F ZZZs = ZZZ.sqr();
        return {X * ZZ * ZZZs, Y * ZZ.sqr() * ZZ * ZZZs, Z};
    }
};

// XYZZ point arithmetic over the field operations O (field_ops, or msm.hpp's assembly back end):
// the one copy of these formulas on the CPU (the GPU's is cuzk/cu/ec/xyzz_t.cuh).
template <class C, class O>
struct xyzz_formulas {
    typedef typename C::field_t F;
    typedef affine_t<C> A;
    typedef xyzz_t<C> X;

    static CUZK_INLINE X inf() { return X::infinity(); }
    static CUZK_INLINE X from_affine(const A& p) { return X::from_affine(p); }
    static CUZK_INLINE A neg(const A& p) { return A{p.x, O::neg(p.y)}; }  // neg(0) = 0 keeps infinity

    // mdbl-2008-s-1: 4M + 3S (p not infinity)
    static inline X dbl_affine(const A& p) {
        F U = O::dbl(p.y), V = O::sqr(U), W = O::mul(U, V), S = O::mul(p.x, V);
        F Xs = O::sqr(p.x), M = O::add(O::dbl(Xs), Xs);  /* M = 3x^2 */
        X r;
        r.X = O::sub(O::sqr(M), O::dbl(S));
        r.Y = O::sub(O::mul(M, O::sub(S, r.X)), O::mul(W, p.y));
        r.ZZ = V;
        r.ZZZ = W;
        return r;
    }
    // dbl-2008-s-1: 6M + 4S
    static inline X dbl(const X& p) {
        if (p.ZZ.is_zero()) return p;
        F U = O::dbl(p.Y), V = O::sqr(U), W = O::mul(U, V), S = O::mul(p.X, V);
        F Xs = O::sqr(p.X), M = O::add(O::dbl(Xs), Xs);
        X r;
        r.X = O::sub(O::sqr(M), O::dbl(S));
        r.Y = O::sub(O::mul(M, O::sub(S, r.X)), O::mul(W, p.Y));
        r.ZZ = O::mul(V, p.ZZ);
        r.ZZZ = O::mul(W, p.ZZZ);
        return r;
    }
    // madd-2008-s: 8M + 2S
    static inline X madd(const X& p, const A& q) {
        if (q.is_inf()) return p;
        if (p.ZZ.is_zero()) return from_affine(q);
        F P = O::sub(O::mul(q.x, p.ZZ), p.X), R = O::sub(O::mul(q.y, p.ZZZ), p.Y);
        if (P.is_zero()) return R.is_zero() ? dbl_affine(q) : inf();
        F PP = O::sqr(P), PPP = O::mul(P, PP), Q = O::mul(p.X, PP);
        X r;
        r.X = O::sub(O::sub(O::sqr(R), PPP), O::dbl(Q));
        r.Y = O::sub(O::mul(R, O::sub(Q, r.X)), O::mul(p.Y, PPP));
        r.ZZ = O::mul(p.ZZ, PP);
        r.ZZZ = O::mul(p.ZZZ, PPP);
        return r;
    }
    // add-2008-s: 12M + 2S
    static inline X add(const X& p, const X& q) {
        if (q.ZZ.is_zero()) return p;
        if (p.ZZ.is_zero()) return q;
        F U1 = O::mul(p.X, q.ZZ), U2 = O::mul(q.X, p.ZZ);
        F S1 = O::mul(p.Y, q.ZZZ), S2 = O::mul(q.Y, p.ZZZ);
        F P = O::sub(U2, U1), R = O::sub(S2, S1);
        if (P.is_zero()) return R.is_zero() ? dbl(p) : inf();
        F PP = O::sqr(P), PPP = O::mul(P, PP), Q = O::mul(U1, PP);
        X r;
        r.X = O::sub(O::sub(O::sqr(R), PPP), O::dbl(Q));
        r.Y = O::sub(O::mul(R, O::sub(Q, r.X)), O::mul(S1, PPP));
        r.ZZ = O::mul(O::mul(p.ZZ, q.ZZ), PP);
        r.ZZZ = O::mul(O::mul(p.ZZZ, q.ZZZ), PPP);
        return r;
    }
    // [k]p for a small k (double-and-add from the top bit)
    static inline X mul_small(const X& p, uint64_t k) {
        X r = inf();
        if (k == 0 || p.ZZ.is_zero()) return r;
        for (int b = 63 - __builtin_clzll(k); b >= 0; b--) {
            r = dbl(r);
            if ((k >> b) & 1) r = add(r, p);
        }
        return r;
    }
    // x = X/ZZ, y = Y/ZZZ from one inversion of ZZ·ZZZ
    static inline A to_affine(const X& p) {
        if (p.ZZ.is_zero()) return A::infinity();
        F i = O::inv(O::mul(p.ZZ, p.ZZZ));
        return A{O::mul(p.X, O::mul(i, p.ZZZ)), O::mul(p.Y, O::mul(i, p.ZZ))};
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
// P: jacobian_t<C> or affine_t<C> (jacobian_t::add takes either).
template <class C, class P>
inline jacobian_t<C> scalar_mul_of(const P& p, const uint64_t* k, size_t nlimbs) {
    jacobian_t<C> r = jacobian_t<C>::infinity();
    for (size_t i = nlimbs; i-- > 0;)
        for (int b = 63; b >= 0; b--) {
            r = r.dbl();
            if ((k[i] >> b) & 1) r = r.add(p);
        }
    return r;
}
template <class C>
inline jacobian_t<C> scalar_mul(const jacobian_t<C>& p, const uint64_t* k, size_t nlimbs) {
    return scalar_mul_of<C>(p, k, nlimbs);
}
template <class C>
inline jacobian_t<C> scalar_mul(const affine_t<C>& p, const uint64_t* k, size_t nlimbs) {
    return scalar_mul_of<C>(p, k, nlimbs);
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
