// Montgomery field over N 32-bit limbs (little-endian), R = 2^(32N).
//
// P supplies the modulus and constants as constexpr functions, so that after
// unrolling every limb is an immediate operand:
//   struct P { static constexpr int N; static constexpr uint32_t M0;   // -p^-1 mod 2^32
//              static constexpr uint32_t mod(int i), one(int i), rr(int i); };
// Requirements: N even, 2p < 2^(32N) (both BLS12-381 fields have spare top bits),
// values always fully reduced (< p).  In memory an element is the same bytes as
// the CPU's 64-bit-limb Montgomery form.
//
// Multiplication: CIOS with the partial products of even and odd limbs kept in
// two accumulators, each a single unbroken carry chain (the lo/hi halves of
// a[j]*b for even j tile columns j, j+1 without overlap; likewise for odd j).
// The one-word shift of CIOS is folded into the multiply-adds of the next row
// (the shifted accumulator is the addend of a 4-operand madc), so a row costs
// 2N mad + 2N mad (reduction) + 1 mul + 3 add.  Total for N = 8: 8*33 = 264
// IMAD-class instructions plus a 9-add merge and the final subtraction.
// Bound used to drop the carry out of the odd chains: the running value stays
// < 2p*2^32 < 2^(32(N+1)), and the odd accumulator alone (columns 1..N) is at
// most that value / 2^32 < 2^(32N).
//
// Squaring (sqr(), for moduli with 3p < 2^(32N) and the generic reduction row:
// Fq): the same frames as the product, but row i adds only the terms whose
// lower limb index is i, a_i * (a_i 2^(32i) + 2 sum_{j>i} a_j 2^(32j)), i.e.
// N - i limb products at the frame's columns i..N (the doubling is in the
// multiplicand: limbs of 2a, which fit since 2p < 2^(32N)).  From row 1 on a
// row has nothing in column 0, so each frame reduces first (the reduction's odd
// chain takes the carry of the word-shift merge) and then adds its row as two
// fresh chains.  N(N+1)/2 + N^2 lo/hi pairs and N m's: 234 IMAD-class for N = 12
// against the product's 300.  Bound: after frame i the partial square is
// L(a + H) < 2p 2^(32(i+1)) (L, H: the limbs of a at most / above i), so the
// running value stays < 3p 2^32 < 2^(32(N+1)); the result is < 2p as for the
// product, and after the final subtraction the same bytes.
#pragma once
#include "ff/carry.cuh"

namespace cuzk {

template <class P>
struct mont_t {
    static constexpr int N = P::N;
    static_assert(N % 2 == 0, "mont_t needs an even limb count");
    uint32_t l[N];

    static CUZK_DEVICE mont_t zero()
    {
        mont_t r;
#pragma unroll
        for (int i = 0; i < N; i++) r.l[i] = 0;
        return r;
    }
    static CUZK_DEVICE mont_t one()  // R mod p
    {
        mont_t r;
#pragma unroll
        for (int i = 0; i < N; i++) r.l[i] = P::one(i);
        return r;
    }
    static CUZK_DEVICE mont_t modulus()
    {
        mont_t r;
#pragma unroll
        for (int i = 0; i < N; i++) r.l[i] = P::mod(i);
        return r;
    }

    CUZK_DEVICE bool is_zero() const
    {
        uint32_t acc = 0;
#pragma unroll
        for (int i = 0; i < N; i++) acc |= l[i];
        return acc == 0;
    }
    CUZK_DEVICE bool operator==(const mont_t& b) const
    {
        uint32_t acc = 0;
#pragma unroll
        for (int i = 0; i < N; i++) acc |= l[i] ^ b.l[i];
        return acc == 0;
    }

    // r = x - p if x >= p else x, for x < 2p (x given without carry: 2p < 2^(32N)).
    static CUZK_DEVICE mont_t reduce_once(const uint32_t* x)
    {
        uint32_t t[N];
        t[0] = cc::sub_cc(x[0], P::mod(0));
#pragma unroll
        for (int i = 1; i < N; i++) t[i] = cc::subc_cc(x[i], P::mod(i));
        uint32_t borrow = cc::subc(0, 0);  // 0 or 0xffffffff (x < p)
        mont_t r;
#pragma unroll
        for (int i = 0; i < N; i++) r.l[i] = borrow ? x[i] : t[i];
        return r;
    }

    // a + b mod p: 2N add + final subtraction.
    friend CUZK_DEVICE mont_t operator+(const mont_t& a, const mont_t& b)
    {
        uint32_t s[N];
        s[0] = cc::add_cc(a.l[0], b.l[0]);
#pragma unroll
        for (int i = 1; i < N - 1; i++) s[i] = cc::addc_cc(a.l[i], b.l[i]);
        s[N - 1] = cc::addc(a.l[N - 1], b.l[N - 1]);
        return reduce_once(s);
    }

    // a - b mod p: subtract, then add p back under the borrow mask.
    friend CUZK_DEVICE mont_t operator-(const mont_t& a, const mont_t& b)
    {
        uint32_t d[N];
        d[0] = cc::sub_cc(a.l[0], b.l[0]);
#pragma unroll
        for (int i = 1; i < N; i++) d[i] = cc::subc_cc(a.l[i], b.l[i]);
        uint32_t mask = cc::subc(0, 0);
        mont_t r;
        r.l[0] = cc::add_cc(d[0], P::mod(0) & mask);
#pragma unroll
        for (int i = 1; i < N - 1; i++) r.l[i] = cc::addc_cc(d[i], P::mod(i) & mask);
        r.l[N - 1] = cc::addc(d[N - 1], P::mod(N - 1) & mask);
        return r;
    }

    CUZK_DEVICE mont_t operator-() const { return zero() - *this; }
    CUZK_DEVICE mont_t& operator+=(const mont_t& b) { return *this = *this + b; }
    CUZK_DEVICE mont_t& operator-=(const mont_t& b) { return *this = *this - b; }
    CUZK_DEVICE mont_t& operator*=(const mont_t& b) { return *this = *this * b; }

  private:
    // Moduli whose two low limbs are 1 and 0xffffffff (BLS12-381's r): then
    // M0 = -1, m = -E[0], and m * (p[0] + p[1] 2^32) adds nothing but ALU work
    // (see redc_row).  Evaluated at compile time.
#ifdef CUZK_MONT_GENERIC_REDC  // development: the generic row, for A/B measurements
    static constexpr bool LOW_LIMBS_1_FFFF = false;
#else
    static constexpr bool LOW_LIMBS_1_FFFF = P::mod(0) == 1u && P::mod(1) == 0xffffffffu;
#endif
    // Dedicated squaring rows (see the header; Fr: 3p > 2^256, and its reduction row is
    // the special one, so its sqr() is the product).
#ifdef CUZK_MONT_SQR_AS_MUL  // development: sqr() is the product, for A/B measurements
    static constexpr bool SQR_ROWS = false;
#else
    static constexpr bool SQR_ROWS = !LOW_LIMBS_1_FFFF && P::mod(N - 1) < 0x55555555u;
#endif

    // Reduction row: m = E[0]*M0; O += m*p_odd; E += m*p_even (E[0] becomes 0).
    // E[k] holds column k, O[k] column k+1.
    //
    // With LOW_LIMBS_1_FFFF, for e = E[0] != 0 (m = 2^32 - e) the two low limbs
    // add m - m 2^32 + m 2^64, i.e. column 0 += -e (it becomes 0 and carries
    // 1), column 1 += e + 1 and column 2 += ~e; for e == 0 nothing.  With
    // c = (e != 0), the carry of e + 0xffffffff: column 1 += e + c on the even
    // chain, column 2 += m - c on the odd one, and only p[2..] are multiplied.
    // m comes from an asm `sub`: given the plain expression, ptxas rewrites
    // the row and no longer fuses its lo/hi pairs into IMAD.WIDE (3 issue
    // slots of the multiplier per limb instead of 2).
    static CUZK_DEVICE void redc_row(uint32_t* E, uint32_t* O)
    {
        if constexpr (LOW_LIMBS_1_FFFF) {
            const uint32_t e = E[0];
            uint32_t m = cc::neg(e);
            uint32_t x = cc::sub_cc(0u, e);  // m, borrow = c
            x = cc::subc(x, 0u);             // m - c
            O[1] = cc::add_cc(O[1], x);
#pragma unroll
            for (int j = 2; j < N; j += 2) {
                O[j] = cc::madc_lo_cc(P::mod(j + 1), m, O[j]);
                O[j + 1] = cc::madc_hi_cc(P::mod(j + 1), m, O[j + 1]);
            }
            // carry out of the odd chain is 0 (see the bound in the header comment)
            (void)cc::add_cc(e, 0xffffffffu);  // carry = c
            E[1] = cc::addc_cc(E[1], e);
#pragma unroll
            for (int j = 2; j < N; j += 2) {
                E[j] = cc::madc_lo_cc(P::mod(j), m, E[j]);
                E[j + 1] = cc::madc_hi_cc(P::mod(j), m, E[j + 1]);
            }
        } else {
            uint32_t m = E[0] * P::M0;
            O[0] = cc::mad_lo_cc(P::mod(1), m, O[0]);
            O[1] = cc::madc_hi_cc(P::mod(1), m, O[1]);
#pragma unroll
            for (int j = 2; j < N; j += 2) {
                O[j] = cc::madc_lo_cc(P::mod(j + 1), m, O[j]);
                O[j + 1] = cc::madc_hi_cc(P::mod(j + 1), m, O[j + 1]);
            }
            // carry out of the odd chain is 0 (see the bound in the header comment)
            E[0] = cc::mad_lo_cc(P::mod(0), m, E[0]);
            E[1] = cc::madc_hi_cc(P::mod(0), m, E[1]);
#pragma unroll
            for (int j = 2; j < N; j += 2) {
                E[j] = cc::madc_lo_cc(P::mod(j), m, E[j]);
                E[j + 1] = cc::madc_hi_cc(P::mod(j), m, E[j + 1]);
            }
        }
        O[N - 1] = cc::addc(O[N - 1], 0);
    }

    // Product row after a reduction row.  On entry (previous roles) X[k] holds
    // column k (X[0] == 0) and Y[k] column k+1; dividing by 2^32 makes Y the
    // new even accumulator E (column k) and X shifted by one word the new odd
    // one O (column k+1).  Adds a*b into them: X[1] merges into E[0] and the
    // shift of X rides on the odd products' addends.
    static CUZK_DEVICE void mul_row(uint32_t* E /* = Y */, uint32_t* X, const uint32_t* a, uint32_t b)
    {
        E[0] = cc::add_cc(E[0], X[1]);  // column 0 = Y[0] + X[1]
#pragma unroll
        for (int j = 0; j < N - 2; j += 2) {  // O[j] (column j+1) = X[j+2] + lo(a[j+1] b) ...
            X[j] = cc::madc_lo_cc(a[j + 1], b, X[j + 2]);
            X[j + 1] = cc::madc_hi_cc(a[j + 1], b, X[j + 3]);
        }
        X[N - 2] = cc::madc_lo_cc(a[N - 1], b, 0);
        X[N - 1] = cc::madc_hi(a[N - 1], b, 0);  // hi(a*b) + 1 < 2^32
        E[0] = cc::mad_lo_cc(a[0], b, E[0]);
        E[1] = cc::madc_hi_cc(a[0], b, E[1]);
#pragma unroll
        for (int j = 2; j < N; j += 2) {
            E[j] = cc::madc_lo_cc(a[j], b, E[j]);
            E[j + 1] = cc::madc_hi_cc(a[j], b, E[j + 1]);
        }
        X[N - 1] = cc::addc(X[N - 1], 0);
    }

  public:
    // a * b * R^-1 mod p (CIOS, see header).
    // P::OUTLINE_MUL (optional, default false): the product is a real call instead of being
    // inlined everywhere (Fq: the curve code would otherwise inline hundreds of 12-limb
    // products per kernel, minutes of NVRTC/host-compiler time).
    friend CUZK_DEVICE mont_t operator*(const mont_t& a, const mont_t& b)
    {
        if constexpr (outline_mul<P>(0)) return mul_outline(a, b);
        else return mul_inline(a, b);
    }

  private:
    template <class Q>
    static constexpr bool outline_mul(decltype(Q::OUTLINE_MUL)) { return Q::OUTLINE_MUL; }
    template <class Q>
    static constexpr bool outline_mul(...) { return false; }
    // By value: the operands arrive in registers (through references they are loads from
    // the caller's stack, and ptxas then splits the a·b rows into IMAD + IMAD.HI + adds).
    static CUZK_NOINLINE mont_t mul_outline(const mont_t a, const mont_t b)
    {
        return mul_inline(a, b);
    }
    static CUZK_DEVICE mont_t mul_inline(const mont_t& a, const mont_t& b)
    {
        uint32_t e[N], o[N];
#pragma unroll
        for (int j = 0; j < N; j += 2) {
            e[j] = cc::mul_lo(a.l[j], b.l[0]);
            e[j + 1] = cc::mul_hi(a.l[j], b.l[0]);
            o[j] = cc::mul_lo(a.l[j + 1], b.l[0]);
            o[j + 1] = cc::mul_hi(a.l[j + 1], b.l[0]);
        }
        redc_row(e, o);
#pragma unroll
        for (int i = 1; i < N; i += 2) {
            mul_row(o, e, a.l, b.l[i]);  // roles: E = o, O = e
            redc_row(o, e);
            if (i + 1 < N) {
                mul_row(e, o, a.l, b.l[i + 1]);
                redc_row(e, o);
            }
        }
        return last_frame(o, e);  // last row had E = o, O = e
    }

    // The value of the last frame (E: columns 0..N-1 with E[0] == 0, O: columns 1..N)
    // divided by 2^32, i.e. O + (E >> 32), < 2p; then the final subtraction.
    static CUZK_DEVICE mont_t last_frame(const uint32_t* E, const uint32_t* O)
    {
        uint32_t r[N];
        r[0] = cc::add_cc(O[0], E[1]);
#pragma unroll
        for (int k = 1; k < N - 1; k++) r[k] = cc::addc_cc(O[k], E[k + 1]);
        r[N - 1] = cc::addc(O[N - 1], 0);
        return reduce_once(r);
    }

    // (hi << 1) | (lo >> 31).  On the GPU an opaque funnel shift: ptxas would otherwise move
    // some of these shifts onto the multiplier (IMAD.SHL), the pipe the square is short of.
    static CUZK_DEVICE uint32_t shl1(uint32_t hi, uint32_t lo)
    {
#if defined(__CUDA_ARCH__)
        uint32_t r;
        asm("shf.l.clamp.b32 %0, %1, %2, 1;" : "=r"(r) : "r"(lo), "r"(hi));
        return r;
#else
        return (hi << 1) | (lo >> 31);
#endif
    }

    // Limb j (j >= i) of row i's multiplicand a_i 2^(32i) + 2 sum_{j>i} a_j 2^(32j), in the
    // row's frame: a_i, then a_{i+1} << 1 (a_i's top bit belongs to no term of the row),
    // then the limbs of 2a (a2).
    static CUZK_DEVICE uint32_t sqr_limb(const uint32_t* a, const uint32_t* a2, int i, int j)
    {
        return j == i ? a[i] : j == i + 1 ? a2[j] & ~1u : a2[j];
    }

    // Row I >= 1 of the square into a frame after its reduction row: the products of even j
    // (columns j, j+1) on E, those of odd j on O (O[j-1], O[j]), each chain from its first
    // j >= I; E's carry goes to column N, O's top is the frame's top (carry 0: the bound).
    template <int I>
    static CUZK_DEVICE void sqr_row(uint32_t* E, uint32_t* O, const uint32_t* a, const uint32_t* a2)
    {
        constexpr int JE = I + (I & 1), JO = I + 1 - (I & 1);  // first even / odd j >= I
        if constexpr (JE < N) {
            E[JE] = cc::mad_lo_cc(a[I], sqr_limb(a, a2, I, JE), E[JE]);
            E[JE + 1] = cc::madc_hi_cc(a[I], sqr_limb(a, a2, I, JE), E[JE + 1]);
#pragma unroll
            for (int j = JE + 2; j < N; j += 2) {
                E[j] = cc::madc_lo_cc(a[I], a2[j], E[j]);
                E[j + 1] = cc::madc_hi_cc(a[I], a2[j], E[j + 1]);
            }
            O[N - 1] = cc::addc(O[N - 1], 0);
        }
        if constexpr (JO == N - 1) {
            O[N - 2] = cc::mad_lo_cc(a[I], sqr_limb(a, a2, I, JO), O[N - 2]);
            O[N - 1] = cc::madc_hi(a[I], sqr_limb(a, a2, I, JO), O[N - 1]);
        } else {
            O[JO - 1] = cc::mad_lo_cc(a[I], sqr_limb(a, a2, I, JO), O[JO - 1]);
            O[JO] = cc::madc_hi_cc(a[I], sqr_limb(a, a2, I, JO), O[JO]);
#pragma unroll
            for (int j = JO + 2; j < N - 1; j += 2) {
                O[j - 1] = cc::madc_lo_cc(a[I], a2[j], O[j - 1]);
                O[j] = cc::madc_hi_cc(a[I], a2[j], O[j]);
            }
            O[N - 2] = cc::madc_lo_cc(a[I], a2[N - 1], O[N - 2]);
            O[N - 1] = cc::madc_hi(a[I], a2[N - 1], O[N - 1]);
        }
    }

    // Frame I >= 1 of the square.  On entry (previous roles) X[k] holds column k (X[0] == 0)
    // and Y[k] column k+1; after the shift Y is E (column k) and X, one word down, O (column
    // k+1), X[1] merged into E[0].  Column 0 gets no product of row I, so it is final: the
    // reduction row comes first, its odd chain riding the shift (as mul_row's) and taking the
    // merge's carry, then row I.
    template <int I>
    static CUZK_DEVICE void sqr_frame(uint32_t* E /* = Y */, uint32_t* X, const uint32_t* a, const uint32_t* a2)
    {
        const uint32_t m = (E[0] + X[1]) * P::M0;  // plain add: no carry-flag read across it
        E[0] = cc::add_cc(E[0], X[1]);
#pragma unroll
        for (int j = 1; j < N - 1; j += 2) {  // O[j-1] (column j) = X[j+1] + lo(m p[j]) ...
            X[j - 1] = cc::madc_lo_cc(P::mod(j), m, X[j + 1]);
            X[j] = cc::madc_hi_cc(P::mod(j), m, X[j + 2]);
        }
        X[N - 2] = cc::madc_lo_cc(P::mod(N - 1), m, 0);
        X[N - 1] = cc::madc_hi(P::mod(N - 1), m, 0);  // hi(m p) + 1 < 2^32
        E[0] = cc::mad_lo_cc(P::mod(0), m, E[0]);     // column 0 becomes 0
        E[1] = cc::madc_hi_cc(P::mod(0), m, E[1]);
#pragma unroll
        for (int j = 2; j < N; j += 2) {
            E[j] = cc::madc_lo_cc(P::mod(j), m, E[j]);
            E[j + 1] = cc::madc_hi_cc(P::mod(j), m, E[j + 1]);
        }
        X[N - 1] = cc::addc(X[N - 1], 0);
        sqr_row<I>(E, X, a, a2);
    }

    template <int I>
    static CUZK_DEVICE void sqr_frames(uint32_t* Y, uint32_t* X, const uint32_t* a, const uint32_t* a2)
    {
        sqr_frame<I>(Y, X, a, a2);
        if constexpr (I + 1 < N) sqr_frames<I + 1>(X, Y, a, a2);
    }

    // a^2 R^-1 mod p with N(N+1)/2 limb products (see the header).
    static CUZK_DEVICE mont_t sqr_inline(const mont_t& x)
    {
        const uint32_t* a = x.l;
        uint32_t a2[N], e[N], o[N];
        a2[0] = a[0] << 1;
#pragma unroll
        for (int j = 1; j < N; j++) a2[j] = shl1(a[j], a[j - 1]);  // 2a < 2^(32N)
#pragma unroll
        for (int j = 0; j < N; j += 2) {  // row 0: fresh accumulators, no overlap
            const uint32_t de = sqr_limb(a, a2, 0, j), dod = sqr_limb(a, a2, 0, j + 1);
            e[j] = cc::mul_lo(a[0], de);
            e[j + 1] = cc::mul_hi(a[0], de);
            o[j] = cc::mul_lo(a[0], dod);
            o[j + 1] = cc::mul_hi(a[0], dod);
        }
        redc_row(e, o);
        sqr_frames<1>(o, e, a, a2);
        return last_frame(o, e);  // N - 1 is odd: the last frame had E = o, O = e
    }
    static CUZK_NOINLINE mont_t sqr_outline(const mont_t a)
    {
        return sqr_inline(a);
    }

  public:
    // a^2 R^-1 mod p, the same bytes as a * a.  Out of line where the product is (P::OUTLINE_MUL).
    CUZK_DEVICE mont_t sqr() const
    {
        if constexpr (!SQR_ROWS) return *this * *this;
        else if constexpr (outline_mul<P>(0)) return sqr_outline(*this);
        else return sqr_inline(*this);
    }

    // Montgomery form <-> canonical (both as N limbs).
    CUZK_DEVICE mont_t to_mont() const
    {
        mont_t rr;
#pragma unroll
        for (int i = 0; i < N; i++) rr.l[i] = P::rr(i);
        return *this * rr;
    }
    CUZK_DEVICE mont_t from_mont() const
    {
        mont_t u = zero();
        u.l[0] = 1;
        return *this * u;
    }

    // this^e for a 32-bit exponent (square and multiply, MSB first).
    CUZK_DEVICE mont_t pow_u32(uint32_t e) const
    {
        mont_t r = one();
        for (int i = 31; i >= 0; i--) {
            r = r.sqr();
            if ((e >> i) & 1) r = r * *this;
        }
        return r;
    }
};

}  // namespace cuzk
