// Short-Weierstrass points y^2 = x^3 + b (a = 0) on the GPU, one template over the field:
// G1 over Fq (fq_t), G2 over Fq2 (fq2_t).  The same formulas as the CPU's
// cuzk/_native/include/cuzk/ec.hpp (EFD "xyzz" shortcuts, hyperelliptic.org/EFD):
//   madd-2008-s   mixed addition (affine addend)      8M + 2S
//   add-2008-s    general addition                   12M + 2S
//   dbl-2008-s-1  doubling                            6M + 4S
//   mdbl-2008-s-1 doubling of an affine point         4M + 3S
// M, S: products and squares in the field (an Fq2 M is 3 Fq M, an Fq2 S 2 Fq M).
// The exceptional cases (either input infinity, P == Q, P == −Q) are handled, so any order
// of additions gives the same group element.
//
// Layouts (the CPU's, byte for byte; Montgomery, little-endian limbs):
//   affine_t<F> (x, y): G1 96 bytes = uint64 (12,), G2 192 bytes = uint64 (24,) as
//               x.c0, x.c1, y.c0, y.c1; all-zero = the point at infinity (never on the curve
//               since b != 0).
//   xyzz_t<F>   (X, Y, ZZ, ZZZ): x = X/ZZ, y = Y/ZZZ, ZZ^3 = ZZZ^2; infinity iff ZZ == 0.
//               G1 4 x 48 bytes = uint64 (24,), G2 4 x 96 bytes = uint64 (48,).
#pragma once
#include "ff/bls12_381.cuh"
#include "ff/fq2_t.cuh"

namespace cuzk {

// 32-bit word i of a field element (i < sizeof(F) / 4), for vector loads and stores; with a
// constant i (an unrolled loop) it is a register name, not a memory access.
template <class P>
CUZK_DEVICE uint32_t& field_word(mont_t<P>& f, int i) { return f.l[i]; }
CUZK_DEVICE uint32_t& field_word(fq2_t& f, int i) { return i < fq_t::N ? f.c0.l[i] : f.c1.l[i - fq_t::N]; }

// One field element through 128-bit loads / stores (sizeof(F) a multiple of 16, p 16-byte aligned;
// a whole point: affine_t::load / store).
template <class F>
CUZK_DEVICE F load_field(const F* p)
{
    constexpr int V = sizeof(F) / 16;
    static_assert(sizeof(F) % 16 == 0, "load_field: field size not a multiple of 16");
    const uint4* q = reinterpret_cast<const uint4*>(p);
    F r;
#pragma unroll
    for (int k = 0; k < V; k++) {
        const uint4 v = q[k];
        field_word(r, 4 * k) = v.x;
        field_word(r, 4 * k + 1) = v.y;
        field_word(r, 4 * k + 2) = v.z;
        field_word(r, 4 * k + 3) = v.w;
    }
    return r;
}

template <class F>
CUZK_DEVICE void store_field(F* p, F v)
{
    constexpr int V = sizeof(F) / 16;
    uint4* q = reinterpret_cast<uint4*>(p);
#pragma unroll
    for (int k = 0; k < V; k++)
        q[k] = make_uint4(field_word(v, 4 * k), field_word(v, 4 * k + 1), field_word(v, 4 * k + 2),
                          field_word(v, 4 * k + 3));
}

template <class field_t>
struct affine_t {
    field_t x, y;

    static CUZK_DEVICE affine_t infinity() { return affine_t{field_t::zero(), field_t::zero()}; }
    CUZK_DEVICE bool is_inf() const { return x.is_zero() && y.is_zero(); }
    CUZK_DEVICE affine_t neg() const { return affine_t{x, -y}; }   // −0 = 0: infinity stays
    CUZK_DEVICE affine_t operator-() const { return neg(); }

    // *p with 128-bit loads (sizeof(field_t) is a multiple of 16; p 16-byte aligned, as every
    // row of a point array from the pool is).
    // Not load_field / store_field per coordinate: the point's 2V vector accesses are issued
    // interleaved, and the per-coordinate form compiles to other SASS (sm_90: reordered and 8
    // instructions more in sum_points_affine_g1) than the kernels were measured with.
    static CUZK_DEVICE affine_t load(const affine_t* p)
    {
        constexpr int V = sizeof(field_t) / 16;
        static_assert(sizeof(field_t) % 16 == 0, "affine_t::load: field size not a multiple of 16");
        const uint4* q = reinterpret_cast<const uint4*>(p);
        uint4 v[2 * V];
#pragma unroll
        for (int k = 0; k < 2 * V; k++) v[k] = q[k];
        affine_t r;
#pragma unroll
        for (int k = 0; k < V; k++) {
            field_word(r.x, 4 * k) = v[k].x;
            field_word(r.x, 4 * k + 1) = v[k].y;
            field_word(r.x, 4 * k + 2) = v[k].z;
            field_word(r.x, 4 * k + 3) = v[k].w;
            field_word(r.y, 4 * k) = v[V + k].x;
            field_word(r.y, 4 * k + 1) = v[V + k].y;
            field_word(r.y, 4 * k + 2) = v[V + k].z;
            field_word(r.y, 4 * k + 3) = v[V + k].w;
        }
        return r;
    }
    // *p = *this with 128-bit stores.
    CUZK_DEVICE void store(affine_t* p) const
    {
        constexpr int V = sizeof(field_t) / 16;
        affine_t s = *this;
        uint4* q = reinterpret_cast<uint4*>(p);
#pragma unroll
        for (int k = 0; k < V; k++) {
            q[k] = make_uint4(field_word(s.x, 4 * k), field_word(s.x, 4 * k + 1),
                              field_word(s.x, 4 * k + 2), field_word(s.x, 4 * k + 3));
            q[V + k] = make_uint4(field_word(s.y, 4 * k), field_word(s.y, 4 * k + 1),
                                  field_word(s.y, 4 * k + 2), field_word(s.y, 4 * k + 3));
        }
    }
};

template <class field_t>
struct xyzz_t {
    typedef affine_t<field_t> affine;
    field_t X, Y, ZZ, ZZZ;

    static CUZK_DEVICE xyzz_t infinity()  // (1, 1, 0, 0): the CPU's bytes
    {
        return xyzz_t{field_t::one(), field_t::one(), field_t::zero(), field_t::zero()};
    }
    static CUZK_DEVICE xyzz_t from_affine(const affine& p)
    {
        if (p.is_inf()) return infinity();
        return xyzz_t{p.x, p.y, field_t::one(), field_t::one()};
    }
    CUZK_DEVICE bool is_inf() const { return ZZ.is_zero(); }
    CUZK_DEVICE xyzz_t neg() const { return xyzz_t{X, -Y, ZZ, ZZZ}; }
    CUZK_DEVICE xyzz_t operator-() const { return neg(); }

    // dbl-2008-s-1: 6M + 4S
    CUZK_DEVICE xyzz_t dbl() const
    {
        if (is_inf()) return *this;
        const field_t U = Y + Y;          /* U = 2·Y1 */
        const field_t V = U.sqr();        /* V = U^2 */
        const field_t W = U * V;          /* W = U·V */
        const field_t S = X * V;          /* S = X1·V */
        const field_t Xs = X.sqr();
        const field_t M = Xs + Xs + Xs;   /* M = 3·X1^2 (a = 0) */
        xyzz_t r;
        r.X = M.sqr() - (S + S);          /* X3 = M^2 − 2·S */
        r.Y = M * (S - r.X) - W * Y;      /* Y3 = M·(S − X3) − W·Y1 */
        r.ZZ = V * ZZ;                    /* ZZ3 = V·ZZ1 */
        r.ZZZ = W * ZZZ;                  /* ZZZ3 = W·ZZZ1 */
        return r;
    }
    // mdbl-2008-s-1: 4M + 3S (affine input, not infinity)
    static CUZK_DEVICE xyzz_t dbl_affine(const affine& p)
    {
        const field_t U = p.y + p.y;      /* U = 2·y1 */
        const field_t V = U.sqr();        /* V = U^2 */
        const field_t W = U * V;          /* W = U·V */
        const field_t S = p.x * V;        /* S = x1·V */
        const field_t Xs = p.x.sqr();
        const field_t M = Xs + Xs + Xs;   /* M = 3·x1^2 */
        xyzz_t r;
        r.X = M.sqr() - (S + S);          /* X3 = M^2 − 2·S */
        r.Y = M * (S - r.X) - W * p.y;    /* Y3 = M·(S − X3) − W·y1 */
        r.ZZ = V;                         /* ZZ3 = V */
        r.ZZZ = W;                        /* ZZZ3 = W */
        return r;
    }
    // madd-2008-s: 8M + 2S (q affine)
    CUZK_DEVICE xyzz_t add(const affine& q) const
    {
        if (q.is_inf()) return *this;
        if (is_inf()) return from_affine(q);
        const field_t P = q.x * ZZ - X;   /* P = x2·ZZ1 − X1 */
        const field_t R = q.y * ZZZ - Y;  /* R = y2·ZZZ1 − Y1 */
        if (P.is_zero()) return R.is_zero() ? dbl_affine(q) : infinity();  // q == ±this
        const field_t PP = P.sqr();       /* PP = P^2 */
        const field_t PPP = P * PP;       /* PPP = P·PP */
        const field_t Q = X * PP;         /* Q = X1·PP */
        xyzz_t r;
        r.X = R.sqr() - PPP - (Q + Q);    /* X3 = R^2 − PPP − 2·Q */
        r.Y = R * (Q - r.X) - Y * PPP;    /* Y3 = R·(Q − X3) − Y1·PPP */
        r.ZZ = ZZ * PP;                   /* ZZ3 = ZZ1·PP */
        r.ZZZ = ZZZ * PPP;                /* ZZZ3 = ZZZ1·PPP */
        return r;
    }
    CUZK_DEVICE xyzz_t sub(const affine& q) const { return add(q.neg()); }
    // add-2008-s: 12M + 2S
    CUZK_DEVICE xyzz_t add(const xyzz_t& q) const
    {
        if (q.is_inf()) return *this;
        if (is_inf()) return q;
        const field_t U1 = X * q.ZZ;      /* U1 = X1·ZZ2 */
        const field_t U2 = q.X * ZZ;      /* U2 = X2·ZZ1 */
        const field_t S1 = Y * q.ZZZ;     /* S1 = Y1·ZZZ2 */
        const field_t S2 = q.Y * ZZZ;     /* S2 = Y2·ZZZ1 */
        const field_t P = U2 - U1;        /* P = U2 − U1 */
        const field_t R = S2 - S1;        /* R = S2 − S1 */
        if (P.is_zero()) return R.is_zero() ? dbl() : infinity();  // q == ±this
        const field_t PP = P.sqr();       /* PP = P^2 */
        const field_t PPP = P * PP;       /* PPP = P·PP */
        const field_t Q = U1 * PP;        /* Q = U1·PP */
        xyzz_t r;
        r.X = R.sqr() - PPP - (Q + Q);    /* X3 = R^2 − PPP − 2·Q */
        r.Y = R * (Q - r.X) - S1 * PPP;   /* Y3 = R·(Q − X3) − S1·PPP */
        r.ZZ = ZZ * q.ZZ * PP;            /* ZZ3 = ZZ1·ZZ2·PP */
        r.ZZZ = ZZZ * q.ZZZ * PPP;        /* ZZZ3 = ZZZ1·ZZZ2·PPP */
        return r;
    }
    CUZK_DEVICE xyzz_t sub(const xyzz_t& q) const { return add(q.neg()); }
    // k·this for a small scalar k (double and add, MSB first; 32 dbl + popcount(k) add)
    CUZK_DEVICE xyzz_t mul_u32(uint32_t k) const
    {
        xyzz_t r = infinity();
        for (int i = 31; i >= 0; i--) {
            r = r.dbl();
            if ((k >> i) & 1u) r = r.add(*this);
        }
        return r;
    }
};

// The sum of every thread's v over the block, by a tree in shared memory: part holds blockDim.x
// points (blockDim.x a power of two); on return part[0] is the sum (every thread has passed the
// last barrier).
template <class field_t>
CUZK_DEVICE void block_sum(xyzz_t<field_t>* part, const xyzz_t<field_t>& v)
{
    const uint32_t t = threadIdx.x;
    part[t] = v;
    __syncthreads();
    for (uint32_t half = blockDim.x >> 1; half; half >>= 1) {
        if (t < half) part[t] = part[t].add(part[t + half]);
        __syncthreads();
    }
}

typedef affine_t<fq_t> g1_affine_t;
typedef xyzz_t<fq_t> g1_xyzz_t;
typedef affine_t<fq2_t> g2_affine_t;
typedef xyzz_t<fq2_t> g2_xyzz_t;

static_assert(sizeof(g1_affine_t) == 96 && sizeof(g1_xyzz_t) == 4 * 48, "G1 layout = the CPU's");
static_assert(sizeof(g2_affine_t) == 192 && sizeof(g2_xyzz_t) == 4 * 96, "G2 layout = the CPU's");

}  // namespace cuzk
