// Montgomery prime-field arithmetic over 64-bit limbs (CPU backend).
//
// mont_t<P> holds an element a·R mod m with R = 2^(64·N), little-endian limbs:
// the in-memory layout of blst/blstrs and of the GPU's 32-bit-limb form (same bytes).
// Contract: every value stays fully reduced (< m); all operations keep that.
// Both BLS12-381 moduli leave spare top bits, so sums fit in N limbs and the
// "no-carry" CIOS multiplication (top limb of m < 2^63 - 1) applies.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "bls12_381_constants.hpp"
#if defined(__x86_64__) && defined(__GNUC__)
#include <x86intrin.h>
#endif

#if defined(__GNUC__)
#define CUZK_INLINE inline
#define CUZK_UNROLL _Pragma("GCC unroll 16")
#else
#define CUZK_INLINE inline
#define CUZK_UNROLL
#endif

namespace cuzk {

typedef unsigned __int128 u128;

struct fr_params {
    static constexpr size_t N = 4;
    static constexpr uint64_t MOD[4] = CUZK_FR_MOD;
    static constexpr uint64_t ONE[4] = CUZK_FR_ONE;
    static constexpr uint64_t RR[4] = CUZK_FR_RR;
    static constexpr uint64_t M0 = CUZK_FR_M0;
    static constexpr uint64_t MOD_MINUS_2[4] = CUZK_FR_R_MINUS_2;
};

struct fq_params {
    static constexpr size_t N = 6;
    static constexpr uint64_t MOD[6] = CUZK_FQ_MOD;
    static constexpr uint64_t ONE[6] = CUZK_FQ_ONE;
    static constexpr uint64_t RR[6] = CUZK_FQ_RR;
    static constexpr uint64_t M0 = CUZK_FQ_M0;
    static constexpr uint64_t MOD_MINUS_2[6] = CUZK_FQ_P_MINUS_2;
};

#if defined(__x86_64__) && defined(__GNUC__)
#define CUZK_HAVE_MULX_ASM 1
// CIOS with mulx and two carry chains (adox: low halves into t_j, adcx: high halves into
// t_{j+1}), for 6 limbs (Fq: 72 mulx, ~150 adcx/adox; ~2x faster than the u128 code GCC 12 makes
// of mul_inline, 45 vs 87-103 ns) and 4 (Fr: 32 mulx; 0.54x, bench/bench_fr_product.py).
// "No-carry" bound as above: t stays < 2m, the top word never overflows.  The rows are built
// from one step: t_j += lo(x·rdx) (adox), t_{j+1} += hi (adcx), x = off(%[src]).
#define CUZK_FF_STEP(src, off, tj, tj1) \
"mulxq " #off "(%[" #src "]), %[lo], %[hi]\n\t" "adoxq %[lo], %[" #tj "]\n\t" "adcxq %[hi], %[" #tj1 "]\n\t"
// the product row's last step writes its high half straight into the new top word (0 before)
#define CUZK_FF_TOP(off, tj, tn) \
"mulxq " #off "(%[a]), %[lo], %[" #tn "]\n\t" "adoxq %[lo], %[" #tj "]\n\t" \
"adcxq %%rax, %[" #tn "]\n\t" "adoxq %%rax, %[" #tn "]\n\t"
// row 0: t = a·b[0] with one carry chain
#define CUZK_FF_HEAD0 "movq 0(%[b]), %%rdx\n\t" "mulxq 0(%[a]), %[t0], %[t1]\n\t" \
"mulxq 8(%[a]), %[lo], %[t2]\n\t" "addq %[lo], %[t1]\n\t"
#define CUZK_FF_ROW0(off, tj, tn) "mulxq " #off "(%[a]), %[lo], %[" #tn "]\n\t" "adcq %[lo], %[" #tj "]\n\t"
#define CUZK_FF_MULHEAD(off) "movq " #off "(%[b]), %%rdx\n\t" "xorl %%eax, %%eax\n\t"
#define CUZK_FF_REDHEAD(t0) "movabsq %[m0], %%rdx\n\t" "imulq %[" #t0 "], %%rdx\n\t" "xorl %%eax, %%eax\n\t"
#define CUZK_FF_MULROW(off, t0, t1, t2, t3, t4, t5, t6)                                            \
    CUZK_FF_MULHEAD(off) CUZK_FF_STEP(a, 0, t0, t1) CUZK_FF_STEP(a, 8, t1, t2)                   \
    CUZK_FF_STEP(a, 16, t2, t3) CUZK_FF_STEP(a, 24, t3, t4) CUZK_FF_STEP(a, 32, t4, t5)          \
    CUZK_FF_TOP(40, t5, t6)
#define CUZK_FF_REDROW(t0, t1, t2, t3, t4, t5, t6)                                                \
    CUZK_FF_REDHEAD(t0) CUZK_FF_STEP(p, 0, t0, t1) CUZK_FF_STEP(p, 8, t1, t2)                    \
    CUZK_FF_STEP(p, 16, t2, t3) CUZK_FF_STEP(p, 24, t3, t4) CUZK_FF_STEP(p, 32, t4, t5)          \
    CUZK_FF_STEP(p, 40, t5, t6) "adoxq %%rax, %[" #t6 "]\n\t"
#define CUZK_FF_MULROW4(off, t0, t1, t2, t3, t4)                                                  \
    CUZK_FF_MULHEAD(off) CUZK_FF_STEP(a, 0, t0, t1) CUZK_FF_STEP(a, 8, t1, t2)                   \
    CUZK_FF_STEP(a, 16, t2, t3) CUZK_FF_TOP(24, t3, t4)
#define CUZK_FF_REDROW4(t0, t1, t2, t3, t4)                                                       \
    CUZK_FF_REDHEAD(t0) CUZK_FF_STEP(p, 0, t0, t1) CUZK_FF_STEP(p, 8, t1, t2)                    \
    CUZK_FF_STEP(p, 16, t2, t3) CUZK_FF_STEP(p, 24, t3, t4) "adoxq %%rax, %[" #t4 "]\n\t"

// r = t − m when t >= m, else t (t < 2m; borrow chain + select, no u128).
template <class P, size_t N>
inline void mulx_reduce_once(uint64_t* r, const uint64_t (&t)[N]) {
    unsigned long long d[N];
    unsigned char bo = 0;
    for (size_t i = 0; i < N; i++) bo = _subborrow_u64(bo, t[i], P::MOD[i], &d[i]);
    for (size_t i = 0; i < N; i++) r[i] = bo ? t[i] : d[i];
}

// Callers must know the CPU has BMI2 and ADX (compile-time flags, or cpu_has_bmi2_adx() below).
template <class P>
inline void mont_mul6_mulx(uint64_t* r, const uint64_t* A, const uint64_t* B) {
    uint64_t t0, t1, t2, t3, t4, t5, t6, lo, hi;
    __asm__(
        CUZK_FF_HEAD0 CUZK_FF_ROW0(16, t2, t3) CUZK_FF_ROW0(24, t3, t4) CUZK_FF_ROW0(32, t4, t5)
        CUZK_FF_ROW0(40, t5, t6) "adcq $0, %[t6]\n\t"
        CUZK_FF_REDROW(t0, t1, t2, t3, t4, t5, t6)
        CUZK_FF_MULROW(8, t1, t2, t3, t4, t5, t6, t0)
        CUZK_FF_REDROW(t1, t2, t3, t4, t5, t6, t0)
        CUZK_FF_MULROW(16, t2, t3, t4, t5, t6, t0, t1)
        CUZK_FF_REDROW(t2, t3, t4, t5, t6, t0, t1)
        CUZK_FF_MULROW(24, t3, t4, t5, t6, t0, t1, t2)
        CUZK_FF_REDROW(t3, t4, t5, t6, t0, t1, t2)
        CUZK_FF_MULROW(32, t4, t5, t6, t0, t1, t2, t3)
        CUZK_FF_REDROW(t4, t5, t6, t0, t1, t2, t3)
        CUZK_FF_MULROW(40, t5, t6, t0, t1, t2, t3, t4)
        CUZK_FF_REDROW(t5, t6, t0, t1, t2, t3, t4)
        : [t0] "=&r"(t0), [t1] "=&r"(t1), [t2] "=&r"(t2), [t3] "=&r"(t3), [t4] "=&r"(t4),
          [t5] "=&r"(t5), [t6] "=&r"(t6), [lo] "=&r"(lo), [hi] "=&r"(hi)
        : [a] "r"(A), [b] "r"(B), [p] "r"(P::MOD), [m0] "i"(P::M0)
        : "rax", "rdx", "cc", "memory");
    const uint64_t t[6] = {t6, t0, t1, t2, t3, t4};
    mulx_reduce_once<P>(r, t);
}

// The 4-limb (Fr) product.  The limbs it reads are declared as memory inputs (no "memory"
// clobber), so the compiler keeps the callers' loop state in registers; it inlines into the
// NTT, MSM and row-check loops.
template <class P>
inline void mont_mul4_mulx(uint64_t* r, const uint64_t* A, const uint64_t* B) {
    typedef const uint64_t limbs4[4];
    uint64_t t0, t1, t2, t3, t4, lo, hi;
    __asm__(
        CUZK_FF_HEAD0 CUZK_FF_ROW0(16, t2, t3) CUZK_FF_ROW0(24, t3, t4) "adcq $0, %[t4]\n\t"
        CUZK_FF_REDROW4(t0, t1, t2, t3, t4)
        CUZK_FF_MULROW4(8, t1, t2, t3, t4, t0)
        CUZK_FF_REDROW4(t1, t2, t3, t4, t0)
        CUZK_FF_MULROW4(16, t2, t3, t4, t0, t1)
        CUZK_FF_REDROW4(t2, t3, t4, t0, t1)
        CUZK_FF_MULROW4(24, t3, t4, t0, t1, t2)
        CUZK_FF_REDROW4(t3, t4, t0, t1, t2)
        : [t0] "=&r"(t0), [t1] "=&r"(t1), [t2] "=&r"(t2), [t3] "=&r"(t3), [t4] "=&r"(t4),
          [lo] "=&r"(lo), [hi] "=&r"(hi)
        : [a] "r"(A), [b] "r"(B), [p] "r"(P::MOD), [m0] "i"(P::M0),
          "m"(*(limbs4*)A), "m"(*(limbs4*)B), "m"(*(limbs4*)P::MOD)
        : "rax", "rdx", "cc");
    const uint64_t t[4] = {t4, t0, t1, t2};
    mulx_reduce_once<P>(r, t);
}
#undef CUZK_FF_STEP
#undef CUZK_FF_HEAD0
#undef CUZK_FF_ROW0
#undef CUZK_FF_TOP
#undef CUZK_FF_MULHEAD
#undef CUZK_FF_REDHEAD
#undef CUZK_FF_MULROW
#undef CUZK_FF_REDROW
#undef CUZK_FF_MULROW4
#undef CUZK_FF_REDROW4

// Whether the running CPU has BMI2 + ADX (probed once per extension). Inline asm needs no
// compile flags, so portable builds call mont_mul6_mulx / mont_mul4_mulx after this check.
// CUZK_FF_PORTABLE=1 in the environment (read once) takes the portable products anyway: the
// tests run both paths on one CPU (tests/test_field.py).
inline bool cpu_has_bmi2_adx() {
    static const bool ok = __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("adx") && [] {
        const char* v = std::getenv("CUZK_FF_PORTABLE");
        return !(v && *v && std::strcmp(v, "0") != 0);
    }();
    return ok;
}
#endif

template <class P>
struct mont_t {
    static constexpr size_t N = P::N;
    static constexpr size_t NBYTES = 8 * N;
    uint64_t l[N];

    // ---- construction -------------------------------------------------
    static CUZK_INLINE mont_t zero() { mont_t r; CUZK_UNROLL for (size_t i = 0; i < N; i++) r.l[i] = 0; return r; }
    static CUZK_INLINE mont_t one() { mont_t r; CUZK_UNROLL for (size_t i = 0; i < N; i++) r.l[i] = P::ONE[i]; return r; }
    static CUZK_INLINE mont_t from_limbs(const uint64_t* v) { mont_t r; std::memcpy(r.l, v, NBYTES); return r; }
    // canonical integer (little-endian limbs, must be < m) -> Montgomery form: a·R^2·R^-1
    static CUZK_INLINE mont_t from_canonical(const uint64_t* v) {
        mont_t a = from_limbs(v), rr = from_limbs(P::RR);
        return a * rr;
    }
    static CUZK_INLINE mont_t from_u64(uint64_t v) {
        mont_t a = zero(); a.l[0] = v; return from_canonical(a.l);
    }
    // Montgomery form -> canonical integer: a·R·R^-1
    CUZK_INLINE void to_canonical(uint64_t* out) const {
        mont_t u = zero(); u.l[0] = 1;
        mont_t c = (*this) * u;
        std::memcpy(out, c.l, NBYTES);
    }
    // true iff v < m (v canonical little-endian limbs)
    static CUZK_INLINE bool is_canonical(const uint64_t* v) {
        for (size_t i = N; i-- > 0;) {
            if (v[i] < P::MOD[i]) return true;
            if (v[i] > P::MOD[i]) return false;
        }
        return false;
    }

    // ---- predicates ---------------------------------------------------
    CUZK_INLINE bool is_zero() const { uint64_t t = 0; CUZK_UNROLL for (size_t i = 0; i < N; i++) t |= l[i]; return t == 0; }
    CUZK_INLINE bool is_one() const { uint64_t t = 0; CUZK_UNROLL for (size_t i = 0; i < N; i++) t |= l[i] ^ P::ONE[i]; return t == 0; }
    CUZK_INLINE bool operator==(const mont_t& b) const { uint64_t t = 0; CUZK_UNROLL for (size_t i = 0; i < N; i++) t |= l[i] ^ b.l[i]; return t == 0; }
    CUZK_INLINE bool operator!=(const mont_t& b) const { return !(*this == b); }

    // ---- additive group ----------------------------------------------
    // r = a - m if a >= m (a < 2m, fits in N limbs)
    static CUZK_INLINE void reduce_once(uint64_t* a) {
        uint64_t t[N]; uint64_t borrow = 0;
        CUZK_UNROLL for (size_t i = 0; i < N; i++) {
            u128 d = (u128)a[i] - P::MOD[i] - borrow;
            t[i] = (uint64_t)d; borrow = (uint64_t)(d >> 64) & 1;
        }
        uint64_t keep = borrow - 1;  // all ones when no borrow (a >= m)
        CUZK_UNROLL for (size_t i = 0; i < N; i++) a[i] = (t[i] & keep) | (a[i] & ~keep);
    }
    friend CUZK_INLINE mont_t operator+(const mont_t& a, const mont_t& b) {
        mont_t r; uint64_t carry = 0;
        CUZK_UNROLL for (size_t i = 0; i < N; i++) {
            u128 s = (u128)a.l[i] + b.l[i] + carry;
            r.l[i] = (uint64_t)s; carry = (uint64_t)(s >> 64);
        }
        reduce_once(r.l);
        return r;
    }
    friend CUZK_INLINE mont_t operator-(const mont_t& a, const mont_t& b) {
        mont_t r; uint64_t borrow = 0;
        CUZK_UNROLL for (size_t i = 0; i < N; i++) {
            u128 d = (u128)a.l[i] - b.l[i] - borrow;
            r.l[i] = (uint64_t)d; borrow = (uint64_t)(d >> 64) & 1;
        }
        uint64_t mask = 0 - borrow, carry = 0;  // add m back on borrow
        CUZK_UNROLL for (size_t i = 0; i < N; i++) {
            u128 s = (u128)r.l[i] + (P::MOD[i] & mask) + carry;
            r.l[i] = (uint64_t)s; carry = (uint64_t)(s >> 64);
        }
        return r;
    }
    CUZK_INLINE mont_t operator-() const { return is_zero() ? *this : mont_t::from_limbs(P::MOD) - *this; }
    CUZK_INLINE mont_t dbl() const { return *this + *this; }
    CUZK_INLINE mont_t& operator+=(const mont_t& b) { return *this = *this + b; }
    CUZK_INLINE mont_t& operator-=(const mont_t& b) { return *this = *this - b; }

    // ---- multiplication ----------------------------------------------
    // CIOS Montgomery product, "no-carry" variant: a·b·R^-1 mod m, N^2 + N^2 64x64 products.
    static CUZK_INLINE mont_t mul_inline(const mont_t& a, const mont_t& b) {
        uint64_t t[N] = {0};
        CUZK_UNROLL for (size_t i = 0; i < N; i++) {
            u128 s = (u128)a.l[0] * b.l[i] + t[0];
            uint64_t A = (uint64_t)(s >> 64);
            uint64_t lo = (uint64_t)s;
            uint64_t m = lo * P::M0;
            u128 c = (u128)m * P::MOD[0] + lo;
            uint64_t C = (uint64_t)(c >> 64);
            CUZK_UNROLL for (size_t j = 1; j < N; j++) {
                s = (u128)a.l[j] * b.l[i] + t[j] + A;
                A = (uint64_t)(s >> 64);
                c = (u128)m * P::MOD[j] + (uint64_t)s + C;
                C = (uint64_t)(c >> 64);
                t[j - 1] = (uint64_t)c;
            }
            t[N - 1] = C + A;
        }
        mont_t r; std::memcpy(r.l, t, NBYTES);
        reduce_once(r.l);
        return r;
    }
    // Fr (4 limbs) multiplies inline in the NTT/MSM hot loops; the 6-limb Fq product is one
    // out-of-line function: inlining it into every curve formula multiplies code size and
    // compile time for a few percent of speed.
    static __attribute__((noinline)) void mul_outline(mont_t& r, const mont_t& a, const mont_t& b) {
#if defined(__x86_64__) && defined(__GNUC__)
        if constexpr (N == 6) {
#if !(defined(__BMI2__) && defined(__ADX__))
            if (cpu_has_bmi2_adx())  // portable build: run-time dispatch
#endif
            { mont_mul6_mulx<P>(r.l, a.l, b.l); return; }
        }
#endif
        r = mul_inline(a, b);
    }
    friend CUZK_INLINE mont_t operator*(const mont_t& a, const mont_t& b) {
        if constexpr (N == 4) {
#if defined(__x86_64__) && defined(__GNUC__)
#if !(defined(__BMI2__) && defined(__ADX__))
            if (cpu_has_bmi2_adx())  // portable build: run-time dispatch
#endif
            { mont_t r; mont_mul4_mulx<P>(r.l, a.l, b.l); return r; }
#endif
            return mul_inline(a, b);
        } else {
            mont_t r;
            mul_outline(r, a, b);
            return r;
        }
    }
    CUZK_INLINE mont_t& operator*=(const mont_t& b) { return *this = *this * b; }
    CUZK_INLINE mont_t sqr() const { return (*this) * (*this); }

    // a^e, e little-endian canonical limbs (n of them); left-to-right square-and-multiply
    inline mont_t pow(const uint64_t* e, size_t n) const {
        mont_t r = one();
        for (size_t i = n; i-- > 0;)
            for (int b = 63; b >= 0; b--) {
                r = r.sqr();
                if ((e[i] >> b) & 1) r = r * (*this);
            }
        return r;
    }
    CUZK_INLINE mont_t pow_u64(uint64_t e) const { return pow(&e, 1); }
    // Fermat inverse a^(m-2); inverse of 0 is 0
    inline mont_t inv() const { return pow(P::MOD_MINUS_2, N); }
};

typedef mont_t<fr_params> fr_t;
typedef mont_t<fq_params> fq_t;

// Montgomery batch inversion: out[i] = in[i]^-1 (zeros stay zero); 3(n-1) M + 1 I.
// out may alias in; scratch needs n elements.
template <class F>
inline void batch_inverse(F* out, const F* in, size_t n, F* scratch) {
    F acc = F::one();
    for (size_t i = 0; i < n; i++) {
        scratch[i] = acc;
        if (!in[i].is_zero()) acc = acc * in[i];
    }
    acc = acc.inv();
    for (size_t i = n; i-- > 0;) {
        if (in[i].is_zero()) { out[i] = in[i]; continue; }
        F v = in[i];
        out[i] = acc * scratch[i];
        acc = acc * v;
    }
}

// ---- Fq ------------------------------------------------------------------
// Square root in Fq (p ≡ 3 mod 4): a^((p+1)/4); returns false when a is not a square.
inline bool fq_sqrt(fq_t& out, const fq_t& a) {
    static constexpr uint64_t E[6] = CUZK_FQ_P_PLUS_1_DIV_4;
    fq_t r = a.pow(E, 6);
    if (r.sqr() != a) return false;
    out = r;
    return true;
}
// canonical value > (p-1)/2: the zcash "lexicographically largest" y-sign
inline bool fq_is_lexicographically_largest(const fq_t& a) {
    static constexpr uint64_t H[6] = CUZK_FQ_P_MINUS_1_DIV_2;
    uint64_t c[6]; a.to_canonical(c);
    for (size_t i = 6; i-- > 0;) {
        if (c[i] > H[i]) return true;
        if (c[i] < H[i]) return false;
    }
    return false;
}

// ---- Fq2 = Fq[u]/(u^2 + 1) ---------------------------------------------
struct fq2_t {
    fq_t c0, c1;
    static constexpr size_t NBYTES = 2 * fq_t::NBYTES;
    static CUZK_INLINE fq2_t zero() { return {fq_t::zero(), fq_t::zero()}; }
    static CUZK_INLINE fq2_t one() { return {fq_t::one(), fq_t::zero()}; }
    CUZK_INLINE bool is_zero() const { return c0.is_zero() && c1.is_zero(); }
    CUZK_INLINE bool operator==(const fq2_t& b) const { return c0 == b.c0 && c1 == b.c1; }
    CUZK_INLINE bool operator!=(const fq2_t& b) const { return !(*this == b); }
    friend CUZK_INLINE fq2_t operator+(const fq2_t& a, const fq2_t& b) { return {a.c0 + b.c0, a.c1 + b.c1}; }
    friend CUZK_INLINE fq2_t operator-(const fq2_t& a, const fq2_t& b) { return {a.c0 - b.c0, a.c1 - b.c1}; }
    CUZK_INLINE fq2_t operator-() const { return {-c0, -c1}; }
    CUZK_INLINE fq2_t dbl() const { return {c0.dbl(), c1.dbl()}; }
    CUZK_INLINE fq2_t& operator+=(const fq2_t& b) { return *this = *this + b; }
    CUZK_INLINE fq2_t& operator-=(const fq2_t& b) { return *this = *this - b; }
    // Karatsuba: 3 M
    friend CUZK_INLINE fq2_t operator*(const fq2_t& a, const fq2_t& b) {
        fq_t v0 = a.c0 * b.c0, v1 = a.c1 * b.c1;
        fq_t s = (a.c0 + a.c1) * (b.c0 + b.c1);
        return {v0 - v1, s - v0 - v1};
    }
    CUZK_INLINE fq2_t& operator*=(const fq2_t& b) { return *this = *this * b; }
    // complex squaring: (c0+c1)(c0-c1) + 2·c0·c1·u, 2 M
    CUZK_INLINE fq2_t sqr() const { fq_t t = c0 * c1; return {(c0 + c1) * (c0 - c1), t.dbl()}; }
    CUZK_INLINE fq2_t mul_fq(const fq_t& s) const { return {c0 * s, c1 * s}; }
    CUZK_INLINE fq2_t conj() const { return {c0, -c1}; }
    // (c0 - c1 u) / (c0^2 + c1^2)
    CUZK_INLINE fq2_t inv() const { fq_t n = (c0.sqr() + c1.sqr()).inv(); return {c0 * n, -(c1 * n)}; }
    inline fq2_t pow(const uint64_t* e, size_t n) const {
        fq2_t r = one();
        for (size_t i = n; i-- > 0;)
            for (int b = 63; b >= 0; b--) {
                r = r.sqr();
                if ((e[i] >> b) & 1) r = r * (*this);
            }
        return r;
    }
    // a^p: conjugation (Frobenius, since u^p = -u)
    CUZK_INLINE fq2_t frobenius() const { return conj(); }
};

// Square root in Fq2 for q ≡ 3 (mod 4) (Adj & Rodríguez-Henríquez 2012, Alg. 9):
// a1 = a^((q-3)/4); α = a1²·a; x0 = a1·a; α == -1 → x = u·x0, else x = (1+α)^((q-1)/2)·x0.
inline bool fq2_sqrt(fq2_t& out, const fq2_t& a) {
    static constexpr uint64_t E1[6] = CUZK_FQ_P_MINUS_3_DIV_4;
    static constexpr uint64_t E2[6] = CUZK_FQ_P_MINUS_1_DIV_2;
    if (a.is_zero()) { out = a; return true; }
    fq2_t a1 = a.pow(E1, 6);
    fq2_t alpha = a1.sqr() * a;
    fq2_t x0 = a1 * a;
    fq2_t minus_one = -fq2_t::one();
    fq2_t x;
    if (alpha == minus_one) {
        x = {-x0.c1, x0.c0};  // u·x0
    } else {
        fq2_t b = (fq2_t::one() + alpha).pow(E2, 6);
        x = b * x0;
    }
    if (x.sqr() != a) return false;
    out = x;
    return true;
}
// zcash convention: c1 decides unless it is zero, then c0
inline bool fq2_is_lexicographically_largest(const fq2_t& a) {
    if (!a.c1.is_zero()) return fq_is_lexicographically_largest(a.c1);
    return fq_is_lexicographically_largest(a.c0);
}

}  // namespace cuzk
