// Number-theoretic transforms over Fr (BLS12-381 scalar field) and the Groth16 H stage, CPU.
//
// ---- Conventions (the GPU backend must reproduce these bytes exactly) ----------------------
// Data: n = 2^lg elements, 0 <= lg <= 32, each 4 little-endian uint64 limbs in Montgomery form
//   (x·2^256 mod r), fully reduced (< r) on input and on output.  Natural order in and out;
//   every transform works in place.
// Domain: ω_n = 7^((r-1)/n) = CUZK_FR_ROOT_OF_UNITY^(2^(32-lg)) (bellperson/arkworks; 7 is the
//   multiplicative generator g, two-adicity 32).  ω_1 = 1.
//   forward         X[i] = Σ_j x[j]·ω_n^(i·j)
//   inverse         x[j] = n^-1 · Σ_i X[i]·ω_n^(-i·j)
//   coset forward   X[i] = Σ_j x[j]·(g·ω_n^i)^j     (scale x[j] by g^j, then forward)
//   coset inverse   x[j] = g^-j · n^-1 · Σ_i X[i]·ω_n^(-i·j)   (inverse, then scale by g^-j)
// H stage (bellperson `create_proof`): with a, b, c the evaluations of A·z, B·z, C·z on the
//   domain, a ← coset_inverse( (coset(a)·coset(b) − coset(c)) · (g^n − 1)^-1 ), where
//   coset(v) = coset_forward(inverse(v)) (computed with six transforms instead of those
//   seven, same field elements: see detail::h_stage).  a then holds the n coefficients of
//   h = (A·B − C)/Z, Z = X^n − 1; the top coefficient is 0 when A·B − C vanishes on the domain
//   (bellperson drops it: the H MSM runs over n − 1 points).  b and c are overwritten.
//
// ---- Algorithm and costs -----------------------------------------------------------------
// Core transform: radix-2 decimation in frequency (natural in, bit-reversed out), then one
// blocked bit-reversal pass.  Up to 2^18 elements it is one contiguous DIF (measured on one
// thread: 7-15% faster than four-step at 2^16-2^18, the data being in L2/L3, and it needs no
// extra twiddle products); on several threads its first stages are shared out piecewise, one
// fork-join per stage, and the remaining stages run as independent sub-blocks.  Above 2^18 it
// is Bailey's four-step split n = n1·n2 (j = j1·n2 + j2, k = k1 + n1·k2): n2 column DFTs of
// length n1 (gathered C columns at a time into a per-worker buffer), the twiddle ω_n^(j2·k1) on
// the way back, then n1 contiguous row DFTs of length n2.  With both sub-transforms in DIF
// order the result lands in full bit-reversed order, so the same bit-reversal pass finishes it.
// Arithmetic: x86-64 CPUs with BMI2 and ADX (checked at run time; any recent x86) run inline
// asm (mulx with two carry chains, adcx/adox; branch-free add/sub with cmov); elsewhere, or with
// CUZK_NTT_PORTABLE defined, portable unsigned __int128 code.  Both give the same bytes.
// Multiplications: (n/2)·lg − (n − 1) butterflies need one (the first butterfly of every block
// has twiddle 1 and is skipped), plus 2n for four-step twiddles (n to generate, n to apply;
// the inverse's n^-1 rides in them for free); coset scaling adds 2n.
// Internal values are kept lazily in [0, 2r) (r < 2^255, so 2r < R = 2^256):
// a butterfly is x' = x + y and x − y, each brought back into [0, 2r) by one conditional ±2r,
// and y' = w·(x − y) with w < r: a Montgomery product with one factor < r and the other < 2r is
// < (2r·r + R·r)/R < 2r without the final subtraction.  Outputs are normalized to [0, r) in
// the bit-reversal pass (or the final scaling pass).
// Twiddle tables: level L (blocks of 2^L) holds ω_(2^L)^j for j < 2^(L−1); built once per level
// on first use (thread-safe, never freed), ≤ 2^18 elements per direction (8 MiB).  The four-step
// twiddles ω_n^(j2·k1) are generated per call (n products; 8% of a 2^20 transform): caching them
// would hold 32·n bytes per size and direction.
// Threads: every pass is one par_for (parallel.hpp: the shared pool) over independent blocks
// claimed in order, in which the caller never waits for a helper that has not started;
// threads == 0 means the calling thread's budget, else all of the pool.  Nothing here touches
// Python; callers release the GIL.
// Results do not depend on the thread count (exact arithmetic, canonical outputs).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <memory>
#include <new>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <vector>

#include "ff.hpp"
#include "parallel.hpp"

// The asm is compiled into every x86-64 GCC/clang build (inline asm needs no -m flags) and used
// when the running CPU has BMI2 + ADX (fast_ok(): compile-time true under -march flags that
// imply them, else ff.hpp's run-time probe).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(CUZK_NTT_PORTABLE)
#define CUZK_NTT_X86_ASM 1
#endif

namespace cuzk {
namespace ntt {

static constexpr int kMaxLg = CUZK_FR_TWO_ADICITY;  // 32
static constexpr int kMaxSubLg = 18;               // largest contiguous DIF (tables up to here)
static constexpr int kDirectMaxLg = 18;            // one contiguous DIF up to here, four-step above

namespace detail {

static constexpr uint64_t kR[4] = CUZK_FR_MOD;
// 2r (checked against CUZK_FR_MOD below)
alignas(32) static constexpr uint64_t kR2[4] = {0xfffffffe00000002ull, 0xa77b4805fffcb7fdull,
                                                0x6673b0101343b00aull, 0xe7db4ea6533afa90ull};
constexpr bool kR2_is_twice_r() {
    uint64_t carry = 0;
    for (int i = 0; i < 4; i++) {
        uint64_t d = (kR[i] << 1) | carry;
        if (d != kR2[i]) return false;
        carry = kR[i] >> 63;
    }
    return carry == 0;  // 2r < 2^256: lazy values in [0, 2r) fit in 4 limbs
}
static_assert(kR2_is_twice_r(), "kR2 must be 2r, and 2r < 2^256");

// ---- lazy arithmetic, portable (unsigned __int128) ------------------------------------------
struct arith_generic {
    // [0, 2^256) with a borrow-select: x − m if x >= m
    static CUZK_INLINE void csub(fr_t& x, const uint64_t* m) {
        uint64_t t[4], borrow = 0;
        CUZK_UNROLL for (int i = 0; i < 4; i++) {
            u128 d = (u128)x.l[i] - m[i] - borrow;
            t[i] = (uint64_t)d; borrow = (uint64_t)(d >> 64) & 1;
        }
        uint64_t keep = borrow - 1;
        CUZK_UNROLL for (int i = 0; i < 4; i++) x.l[i] = (t[i] & keep) | (x.l[i] & ~keep);
    }
    // x, y < 2r -> x + y reduced into [0, 2r); the sum (< 4r) may carry out of 2^256
    static CUZK_INLINE fr_t add(const fr_t& x, const fr_t& y) {
        fr_t s; uint64_t c = 0;
        CUZK_UNROLL for (int i = 0; i < 4; i++) {
            u128 t = (u128)x.l[i] + y.l[i] + c;
            s.l[i] = (uint64_t)t; c = (uint64_t)(t >> 64);
        }
        uint64_t t[4], b = 0;
        CUZK_UNROLL for (int i = 0; i < 4; i++) {
            u128 d = (u128)s.l[i] - kR2[i] - b;
            t[i] = (uint64_t)d; b = (uint64_t)(d >> 64) & 1;
        }
        uint64_t take = 0 - (c | (b ^ 1));  // sum >= 2r
        CUZK_UNROLL for (int i = 0; i < 4; i++) s.l[i] = (t[i] & take) | (s.l[i] & ~take);
        return s;
    }
    // x, y < 2r -> x − y (+ 2r on borrow), in [0, 2r)
    static CUZK_INLINE fr_t sub(const fr_t& x, const fr_t& y) {
        fr_t d; uint64_t b = 0;
        CUZK_UNROLL for (int i = 0; i < 4; i++) {
            u128 t = (u128)x.l[i] - y.l[i] - b;
            d.l[i] = (uint64_t)t; b = (uint64_t)(t >> 64) & 1;
        }
        uint64_t mask = 0 - b, c = 0;
        CUZK_UNROLL for (int i = 0; i < 4; i++) {
            u128 t = (u128)d.l[i] + (kR2[i] & mask) + c;
            d.l[i] = (uint64_t)t; c = (uint64_t)(t >> 64);
        }
        return d;
    }
    // Montgomery product w·x·R^-1 for w < r, x < 2r: result < (r·2r + R·r)/R < 2r since
    // 2r < R (no final subtraction).  CIOS, w the multiplicand: the running sum stays < 2r + 1
    // < 2^256, so the top carry never overflows (the "no-carry" condition, r's top limb < 2^63).
    static CUZK_INLINE fr_t mul(const fr_t& w, const fr_t& x) {
        uint64_t t[4] = {0, 0, 0, 0};
        CUZK_UNROLL for (int i = 0; i < 4; i++) {
            u128 s = (u128)w.l[0] * x.l[i] + t[0];
            uint64_t A = (uint64_t)(s >> 64), lo = (uint64_t)s;
            uint64_t m = lo * (uint64_t)CUZK_FR_M0;
            u128 c = (u128)m * kR[0] + lo;
            uint64_t C = (uint64_t)(c >> 64);
            CUZK_UNROLL for (int j = 1; j < 4; j++) {
                s = (u128)w.l[j] * x.l[i] + t[j] + A;
                A = (uint64_t)(s >> 64);
                c = (u128)m * kR[j] + (uint64_t)s + C;
                C = (uint64_t)(c >> 64);
                t[j - 1] = (uint64_t)c;
            }
            t[3] = C + A;
        }
        fr_t r; r.l[0] = t[0]; r.l[1] = t[1]; r.l[2] = t[2]; r.l[3] = t[3];
        return r;
    }
    // DIF butterflies in place: (p, q) <- (p + q, w·(p − q)) and (p + q, p − q)
    static CUZK_INLINE void bf(fr_t* p, fr_t* q, const fr_t* w) {
        fr_t u = *p, v = *q;
        *p = add(u, v);
        *q = mul(*w, sub(u, v));
    }
    static CUZK_INLINE void bf1(fr_t* p, fr_t* q) {
        fr_t u = *p, v = *q;
        *p = add(u, v);
        *q = sub(u, v);
    }
    static CUZK_INLINE void mul_in(fr_t* x, const fr_t* w) { *x = mul(*w, *x); }
    static CUZK_INLINE void red_in(fr_t* x) { csub(*x, kR); }
    static CUZK_INLINE void mulr_to(fr_t* o, const fr_t* a, const fr_t* b) {
        *o = mul(*a, *b);
        csub(*o, kR);
    }
};

#if CUZK_NTT_X86_ASM
// ---- lazy arithmetic, x86-64 with BMI2 (mulx) and ADX (adcx/adox) ---------------------------
// Same contracts as arith_generic; identical results bit for bit.
// r's limbs, then −r^-1 mod 2^64
alignas(64) static constexpr uint64_t kModM0[5] = {kR[0], kR[1], kR[2], kR[3], CUZK_FR_M0};

// t += w·x[i] (t in T0..T3, T4 zeroed here): two carry chains (OF for low halves, CF for high)
#define CUZK_NTT_MULROW(OFF, T0, T1, T2, T3, T4)                                  \
    "movq " #OFF "(%[x]), %%rdx\n\t"                                              \
    "xorl %k" #T4 ", %k" #T4 "\n\t"                                               \
    "mulxq 0(%[w]), %[lo], %[hi]\n\t"                                             \
    "adoxq %[lo], %" #T0 "\n\t"                                                   \
    "adcxq %[hi], %" #T1 "\n\t"                                                   \
    "mulxq 8(%[w]), %[lo], %[hi]\n\t"                                             \
    "adoxq %[lo], %" #T1 "\n\t"                                                   \
    "adcxq %[hi], %" #T2 "\n\t"                                                   \
    "mulxq 16(%[w]), %[lo], %[hi]\n\t"                                            \
    "adoxq %[lo], %" #T2 "\n\t"                                                   \
    "adcxq %[hi], %" #T3 "\n\t"                                                   \
    "mulxq 24(%[w]), %[lo], %[hi]\n\t"                                            \
    "adoxq %[lo], %" #T3 "\n\t"                                                   \
    "adcxq %[hi], %" #T4 "\n\t"                                                   \
    "movl $0, %k[lo]\n\t"                                                         \
    "adoxq %[lo], %" #T4 "\n\t"
// m = T0·(−r^-1) mod 2^64; t = (t + m·r) / 2^64 (T0 becomes 0 and is dropped)
#define CUZK_NTT_REDROW(T0, T1, T2, T3, T4)                                       \
    "movq %" #T0 ", %%rdx\n\t"                                                    \
    "imulq 32(%[m]), %%rdx\n\t"                                                   \
    "xorl %k[lo], %k[lo]\n\t"                                                     \
    "mulxq 0(%[m]), %[lo], %[hi]\n\t"                                             \
    "adoxq %[lo], %" #T0 "\n\t"                                                   \
    "adcxq %[hi], %" #T1 "\n\t"                                                   \
    "mulxq 8(%[m]), %[lo], %[hi]\n\t"                                             \
    "adoxq %[lo], %" #T1 "\n\t"                                                   \
    "adcxq %[hi], %" #T2 "\n\t"                                                   \
    "mulxq 16(%[m]), %[lo], %[hi]\n\t"                                            \
    "adoxq %[lo], %" #T2 "\n\t"                                                   \
    "adcxq %[hi], %" #T3 "\n\t"                                                   \
    "mulxq 24(%[m]), %[lo], %[hi]\n\t"                                            \
    "adoxq %[lo], %" #T3 "\n\t"                                                   \
    "adcxq %[hi], %" #T4 "\n\t"                                                   \
    "movl $0, %k[lo]\n\t"                                                         \
    "adoxq %[lo], %" #T4 "\n\t"

// The asm reads its inputs through pointers and stores its result itself ("memory" clobber):
// returning 4 limbs by value made GCC pack them through vector registers, ~30% of a butterfly.
// Outputs may alias inputs (all loads happen before the stores).
struct arith_x86 {
    // *o = x + y: 5-limb sum, minus 2r, keep the sum on borrow (sum < 2r).  Branch-free.
    static CUZK_INLINE void add_to(uint64_t* o, const uint64_t* x, const uint64_t* y) {
        uint64_t t0, t1, t2, t3, t4, u0, u1, u2, u3;
        asm volatile(
            "movq 0(%[x]), %[t0]\n\t"
            "movq 8(%[x]), %[t1]\n\t"
            "movq 16(%[x]), %[t2]\n\t"
            "movq 24(%[x]), %[t3]\n\t"
            "xorl %k[t4], %k[t4]\n\t"
            "addq 0(%[y]), %[t0]\n\t"
            "adcq 8(%[y]), %[t1]\n\t"
            "adcq 16(%[y]), %[t2]\n\t"
            "adcq 24(%[y]), %[t3]\n\t"
            "adcq $0, %[t4]\n\t"
            "movq %[t0], %[u0]\n\t"
            "movq %[t1], %[u1]\n\t"
            "movq %[t2], %[u2]\n\t"
            "movq %[t3], %[u3]\n\t"
            "subq %[k0], %[u0]\n\t"
            "sbbq %[k1], %[u1]\n\t"
            "sbbq %[k2], %[u2]\n\t"
            "sbbq %[k3], %[u3]\n\t"
            "sbbq $0, %[t4]\n\t"
            "cmovcq %[t0], %[u0]\n\t"
            "cmovcq %[t1], %[u1]\n\t"
            "cmovcq %[t2], %[u2]\n\t"
            "cmovcq %[t3], %[u3]\n\t"
            "movq %[u0], 0(%[o])\n\t"
            "movq %[u1], 8(%[o])\n\t"
            "movq %[u2], 16(%[o])\n\t"
            "movq %[u3], 24(%[o])\n\t"
            : [t0] "=&r"(t0), [t1] "=&r"(t1), [t2] "=&r"(t2), [t3] "=&r"(t3), [t4] "=&r"(t4),
              [u0] "=&r"(u0), [u1] "=&r"(u1), [u2] "=&r"(u2), [u3] "=&r"(u3)
            : [o] "r"(o), [x] "r"(x), [y] "r"(y), [k0] "m"(kR2[0]), [k1] "m"(kR2[1]),
              [k2] "m"(kR2[2]), [k3] "m"(kR2[3])
            : "cc", "memory");
    }
    // *o = x − y, plus 2r (or 0, by cmov on the borrow).  Branch-free.
    static CUZK_INLINE void sub_to(uint64_t* o, const uint64_t* x, const uint64_t* y) {
        uint64_t t0, t1, t2, t3, m0, m1, m2, m3, z;
        asm volatile(
            "xorl %k[z], %k[z]\n\t"
            "movq 0(%[x]), %[t0]\n\t"
            "movq 8(%[x]), %[t1]\n\t"
            "movq 16(%[x]), %[t2]\n\t"
            "movq 24(%[x]), %[t3]\n\t"
            "movq %[k0], %[m0]\n\t"
            "movq %[k1], %[m1]\n\t"
            "movq %[k2], %[m2]\n\t"
            "movq %[k3], %[m3]\n\t"
            "subq 0(%[y]), %[t0]\n\t"
            "sbbq 8(%[y]), %[t1]\n\t"
            "sbbq 16(%[y]), %[t2]\n\t"
            "sbbq 24(%[y]), %[t3]\n\t"
            "cmovncq %[z], %[m0]\n\t"
            "cmovncq %[z], %[m1]\n\t"
            "cmovncq %[z], %[m2]\n\t"
            "cmovncq %[z], %[m3]\n\t"
            "addq %[m0], %[t0]\n\t"
            "adcq %[m1], %[t1]\n\t"
            "adcq %[m2], %[t2]\n\t"
            "adcq %[m3], %[t3]\n\t"
            "movq %[t0], 0(%[o])\n\t"
            "movq %[t1], 8(%[o])\n\t"
            "movq %[t2], 16(%[o])\n\t"
            "movq %[t3], 24(%[o])\n\t"
            : [t0] "=&r"(t0), [t1] "=&r"(t1), [t2] "=&r"(t2), [t3] "=&r"(t3),
              [m0] "=&r"(m0), [m1] "=&r"(m1), [m2] "=&r"(m2), [m3] "=&r"(m3), [z] "=&r"(z)
            : [o] "r"(o), [x] "r"(x), [y] "r"(y), [k0] "m"(kR2[0]), [k1] "m"(kR2[1]),
              [k2] "m"(kR2[2]), [k3] "m"(kR2[3])
            : "cc", "memory");
    }
    // *o = w·x·R^-1 (w < r, x < 2r -> < 2r): CIOS over rows of x, w the multiplicand.
    static CUZK_INLINE void mul_to(uint64_t* o, const uint64_t* w, const uint64_t* x) {
        uint64_t r0, r1, r2, r3, r4, lo, hi;
        asm volatile(
            // first row: t = w·x[0] (single carry chain)
            "movq 0(%[x]), %%rdx\n\t"
            "mulxq 0(%[w]), %[r0], %[r1]\n\t"
            "mulxq 8(%[w]), %[lo], %[r2]\n\t"
            "addq %[lo], %[r1]\n\t"
            "mulxq 16(%[w]), %[lo], %[r3]\n\t"
            "adcq %[lo], %[r2]\n\t"
            "mulxq 24(%[w]), %[lo], %[r4]\n\t"
            "adcq %[lo], %[r3]\n\t"
            "adcq $0, %[r4]\n\t"
            CUZK_NTT_REDROW([r0], [r1], [r2], [r3], [r4])
            CUZK_NTT_MULROW(8, [r1], [r2], [r3], [r4], [r0])
            CUZK_NTT_REDROW([r1], [r2], [r3], [r4], [r0])
            CUZK_NTT_MULROW(16, [r2], [r3], [r4], [r0], [r1])
            CUZK_NTT_REDROW([r2], [r3], [r4], [r0], [r1])
            CUZK_NTT_MULROW(24, [r3], [r4], [r0], [r1], [r2])
            CUZK_NTT_REDROW([r3], [r4], [r0], [r1], [r2])
            // the rows rotated the registers: the result is r4, r0, r1, r2
            "movq %[r4], 0(%[o])\n\t"
            "movq %[r0], 8(%[o])\n\t"
            "movq %[r1], 16(%[o])\n\t"
            "movq %[r2], 24(%[o])\n\t"
            : [r0] "=&r"(r0), [r1] "=&r"(r1), [r2] "=&r"(r2), [r3] "=&r"(r3), [r4] "=&r"(r4),
              [lo] "=&r"(lo), [hi] "=&r"(hi)
            : [o] "r"(o), [w] "r"(w), [x] "r"(x), [m] "r"(kModM0)
            : "rdx", "cc", "memory");
    }
    static CUZK_INLINE fr_t add(const fr_t& x, const fr_t& y) { fr_t r; add_to(r.l, x.l, y.l); return r; }
    static CUZK_INLINE fr_t sub(const fr_t& x, const fr_t& y) { fr_t r; sub_to(r.l, x.l, y.l); return r; }
    static CUZK_INLINE fr_t mul(const fr_t& w, const fr_t& x) { fr_t r; mul_to(r.l, w.l, x.l); return r; }
    // DIF butterflies in place: (p, q) <- (p + q, w·(p − q)) and (p + q, p − q)
    static CUZK_INLINE void bf(fr_t* p, fr_t* q, const fr_t* w) {
        fr_t d;
        sub_to(d.l, p->l, q->l);
        add_to(p->l, p->l, q->l);
        mul_to(q->l, w->l, d.l);
    }
    static CUZK_INLINE void bf1(fr_t* p, fr_t* q) {
        fr_t d;
        sub_to(d.l, p->l, q->l);
        add_to(p->l, p->l, q->l);
        *q = d;
    }
    static CUZK_INLINE void mul_in(fr_t* x, const fr_t* w) { mul_to(x->l, w->l, x->l); }
    // [0, 2r) -> [0, r) in place: subtract r unless that borrows.  Branch-free.
    static CUZK_INLINE void red_in(fr_t* x) {
        uint64_t t0, t1, t2, t3, u0, u1, u2, u3;
        asm volatile(
            "movq 0(%[x]), %[t0]\n\t"
            "movq 8(%[x]), %[t1]\n\t"
            "movq 16(%[x]), %[t2]\n\t"
            "movq 24(%[x]), %[t3]\n\t"
            "movq %[t0], %[u0]\n\t"
            "movq %[t1], %[u1]\n\t"
            "movq %[t2], %[u2]\n\t"
            "movq %[t3], %[u3]\n\t"
            "subq %[k0], %[u0]\n\t"
            "sbbq %[k1], %[u1]\n\t"
            "sbbq %[k2], %[u2]\n\t"
            "sbbq %[k3], %[u3]\n\t"
            "cmovcq %[t0], %[u0]\n\t"
            "cmovcq %[t1], %[u1]\n\t"
            "cmovcq %[t2], %[u2]\n\t"
            "cmovcq %[t3], %[u3]\n\t"
            "movq %[u0], 0(%[x])\n\t"
            "movq %[u1], 8(%[x])\n\t"
            "movq %[u2], 16(%[x])\n\t"
            "movq %[u3], 24(%[x])\n\t"
            : [t0] "=&r"(t0), [t1] "=&r"(t1), [t2] "=&r"(t2), [t3] "=&r"(t3),
              [u0] "=&r"(u0), [u1] "=&r"(u1), [u2] "=&r"(u2), [u3] "=&r"(u3)
            : [x] "r"(x->l), [k0] "m"(kR[0]), [k1] "m"(kR[1]), [k2] "m"(kR[2]), [k3] "m"(kR[3])
            : "cc", "memory");
    }
    // *o = a·b fully reduced (a, b < r)
    static CUZK_INLINE void mulr_to(fr_t* o, const fr_t* a, const fr_t* b) {
        mul_to(o->l, a->l, b->l);
        red_in(o);
    }
};
#undef CUZK_NTT_MULROW
#undef CUZK_NTT_REDROW
typedef arith_x86 arith_fast;
#if defined(__BMI2__) && defined(__ADX__)
inline bool fast_ok() { return true; }
#else
inline bool fast_ok() { return cpu_has_bmi2_adx(); }
#endif
#else
typedef arith_generic arith_fast;
inline bool fast_ok() { return true; }
#endif

// fully reduced product of a, b < r (the lazy product is < 2r)
template <class A>
CUZK_INLINE fr_t mul_full(const fr_t& a, const fr_t& b) { fr_t r; A::mulr_to(&r, &a, &b); return r; }

// bits-bit reversal of i (bits <= 32)
CUZK_INLINE uint64_t bitrev(uint64_t i, int bits) {
    if (bits == 0) return 0;
    uint32_t v = (uint32_t)i;
    v = ((v >> 1) & 0x55555555u) | ((v & 0x55555555u) << 1);
    v = ((v >> 2) & 0x33333333u) | ((v & 0x33333333u) << 2);
    v = ((v >> 4) & 0x0f0f0f0fu) | ((v & 0x0f0f0f0fu) << 4);
    v = __builtin_bswap32(v);
    return (uint64_t)(v >> (32 - bits));
}

// ---- domain constants (fully reduced Montgomery) --------------------------------------------
inline fr_t omega(int lg, bool inverse) {
    static constexpr uint64_t root[4] = CUZK_FR_ROOT_OF_UNITY;
    fr_t w = fr_t::from_limbs(root);
    for (int i = lg; i < kMaxLg; i++) w = w.sqr();
    return inverse ? w.inv() : w;
}
inline fr_t generator(bool inverse) {
    static constexpr uint64_t g[4] = CUZK_FR_GENERATOR;
    fr_t v = fr_t::from_limbs(g);
    return inverse ? v.inv() : v;
}
// (2^lg)^-1
inline fr_t size_inv(int lg) {
    fr_t half = fr_t::from_u64(2).inv(), r = fr_t::one();
    for (int i = 0; i < lg; i++) r = r * half;
    return r;
}

// ---- twiddle tables -------------------------------------------------------------------------
// level(L, inv)[j] = ω_(2^L)^(±j), j < 2^(L-1); built from level L-1 (its entries are the even
// powers), 2^(L-2) independent multiplications.
class twiddles {
  public:
    static const fr_t* level(int L, bool inverse) {
        static twiddles inst;
        return inst.get(L, inverse);
    }

  private:
    std::once_flag once_[kMaxSubLg + 1][2];
    fr_t* tab_[kMaxSubLg + 1][2] = {};

    const fr_t* get(int L, bool inv) {
        if (L > 1) get(L - 1, inv);
        std::call_once(once_[L][inv], [this, L, inv] { build(L, inv); });
        return tab_[L][inv];
    }
    void build(int L, bool inv) {
        size_t h = L >= 1 ? size_t(1) << (L - 1) : 1;
        fr_t* t = static_cast<fr_t*>(::operator new(h * sizeof(fr_t)));  // intentionally never freed
        t[0] = fr_t::one();
        if (L >= 2) {
            const fr_t* p = tab_[L - 1][inv];
            fr_t w = omega(L, inv);
            for (size_t j = 0; j < h / 2; j++) {
                t[2 * j] = p[j];
                t[2 * j + 1] = p[j] * w;
            }
        }
        tab_[L][inv] = t;
    }
};

// 64-byte aligned scratch, freed on scope exit
struct scratch_t {
    fr_t* p = nullptr;
    explicit scratch_t(size_t n) {
        if (n) p = static_cast<fr_t*>(::operator new(n * sizeof(fr_t), std::align_val_t(64)));
    }
    ~scratch_t() { if (p) ::operator delete(p, std::align_val_t(64)); }
    scratch_t(const scratch_t&) = delete;
    scratch_t& operator=(const scratch_t&) = delete;
};

// ---- kernels --------------------------------------------------------------------------------
// In-place radix-2 DIF of 2^L contiguous elements: natural in, bit-reversed out, values in
// [0, 2r) in and out.  tw[l] = level table l.  (2^(L-1))·L butterflies, 2^L − 1 of them trivial.
template <class A>
inline void dif_block(fr_t* x, int L, const fr_t* const* tw) {
    const size_t m = size_t(1) << L;
    for (int lev = L; lev >= 3; lev--) {
        const size_t h = size_t(1) << (lev - 1);
        const fr_t* t = tw[lev];
        for (size_t blk = 0; blk < m; blk += 2 * h) {
            fr_t* p = x + blk;
            fr_t* q = p + h;
            A::bf1(p, q);
            for (size_t j = 1; j < h; j++) A::bf(p + j, q + j, t + j);
        }
    }
    if (L >= 2) {  // blocks of 4: twiddles 1, ω_4
        const fr_t* w4 = tw[2] + 1;
        for (size_t blk = 0; blk < m; blk += 4) {
            A::bf1(x + blk, x + blk + 2);
            A::bf(x + blk + 1, x + blk + 3, w4);
        }
    }
    if (L >= 1) {  // blocks of 2: twiddle 1
        for (size_t blk = 0; blk < m; blk += 2) A::bf1(x + blk, x + blk + 1);
    }
}

// out[m] = s·w^bitrev_L(m) for m < 2^L (fully reduced), by doubling: after handling bits
// 0..p of m the list has 2^(p+1) entries and appending bit p multiplies by w^(2^(L-1-p)).
// 2^L − 1 independent products (no dependency chain), plus L − 1 squarings.
template <class A>
inline void bitrev_powers(fr_t* out, int L, const fr_t& s, const fr_t& w) {
    fr_t pw[kMaxLg + 1];
    pw[0] = w;
    for (int i = 1; i < L; i++) pw[i] = mul_full<A>(pw[i - 1], pw[i - 1]);  // w^(2^i)
    out[0] = s;
    size_t len = 1;
    for (int i = L - 1; i >= 0; i--) {  // append a copy times w^(2^i)
        const fr_t f = pw[i];
        for (size_t j = 0; j < len; j++) A::mulr_to(out + len + j, &f, out + j);
        len *= 2;
    }
}

// Bit-reversal permutation of 2^lg elements with normalization to [0, r) and an optional
// factor (scale != nullptr: each element times *scale).  Tiles of 2^t × 2^t for large lg.
static constexpr int kTileLg = 4;

// *o = v (times *scale when given), normalized to [0, r)
template <class A>
CUZK_INLINE void finish(fr_t* o, const fr_t& v, const fr_t* scale) {
    *o = v;
    if (scale) A::mul_in(o, scale);
    A::red_in(o);
}

template <class A>
inline void bitrev_small(fr_t* x, int lg, const fr_t* scale) {
    const size_t n = size_t(1) << lg;
    for (size_t i = 0; i < n; i++) {
        size_t j = bitrev(i, lg);
        if (i < j) { fr_t t = x[i]; x[i] = x[j]; x[j] = t; }
    }
    for (size_t i = 0; i < n; i++) finish<A>(x + i, x[i], scale);
}

// one tile pair (mid, rev(mid)), mid <= rev(mid)
template <class A>
inline void bitrev_tile(fr_t* x, int lg, uint64_t mid, const fr_t* scale) {
    constexpr int t = kTileLg;
    constexpr size_t T = size_t(1) << t;
    const int mbits = lg - 2 * t;
    const uint64_t rmid = bitrev(mid, mbits);
    const int hs = lg - t;  // shift of the high t bits
    alignas(64) fr_t a[T * T], b[T * T];
    static const uint8_t rt[16] = {0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15};
    static_assert(kTileLg == 4, "rt is the 4-bit reversal table");
    for (size_t hi = 0; hi < T; hi++) {
        const fr_t* src = x + ((hi << hs) | (mid << t));
        for (size_t lo = 0; lo < T; lo++) a[hi * T + lo] = src[lo];
    }
    if (rmid != mid) {
        for (size_t hi = 0; hi < T; hi++) {
            const fr_t* src = x + ((hi << hs) | (rmid << t));
            for (size_t lo = 0; lo < T; lo++) b[hi * T + lo] = src[lo];
        }
    }
    // element (hi, mid, lo) goes to (rt[lo], rmid, rt[hi])
    for (size_t dh = 0; dh < T; dh++) {
        fr_t* dst = x + ((dh << hs) | (rmid << t));
        for (size_t dl = 0; dl < T; dl++) finish<A>(dst + dl, a[rt[dl] * T + rt[dh]], scale);
    }
    if (rmid != mid) {
        for (size_t dh = 0; dh < T; dh++) {
            fr_t* dst = x + ((dh << hs) | (mid << t));
            for (size_t dl = 0; dl < T; dl++) finish<A>(dst + dl, b[rt[dl] * T + rt[dh]], scale);
        }
    }
}

template <class A>
inline void bitrev_pass(fr_t* const* xs, size_t count, int lg, const fr_t* scale, size_t threads) {
    if (lg < 2 * kTileLg) {
        par_for(count, threads, [&](size_t a, size_t) { bitrev_small<A>(xs[a], lg, scale); });
        return;
    }
    const int mbits = lg - 2 * kTileLg;
    const size_t mids = size_t(1) << mbits;
    const size_t group = std::min<size_t>(mids, 16);  // tiles per work item
    const size_t per = mids / group;
    par_for(count * per, threads, [&](size_t item, size_t) {
        fr_t* x = xs[item / per];
        const size_t m0 = (item % per) * group;
        for (size_t mid = m0; mid < m0 + group; mid++)
            if (bitrev(mid, mbits) >= mid) bitrev_tile<A>(x, lg, mid, scale);
    });
}

// x[i] <- x[i]·s·q^i (values < 2r in; < 2r out, or < r when normalize)
template <class A>
inline void scale_powers(fr_t* const* xs, size_t count, int lg, const fr_t& s, const fr_t& q,
                         bool normalize, size_t threads) {
    const size_t n = size_t(1) << lg;
    const size_t chunk = std::min<size_t>(n, 4096);
    const size_t per = n / chunk;
    fr_t q4 = mul_full<A>(q, q);
    q4 = mul_full<A>(q4, q4);
    par_for(count * per, threads, [&](size_t item, size_t) {
        fr_t* x = xs[item / per];
        const size_t begin = (item % per) * chunk;
        uint64_t e = begin;
        fr_t f[4];
        f[0] = mul_full<A>(s, q.pow(&e, 1));
        for (int k = 1; k < 4; k++) f[k] = mul_full<A>(f[k - 1], q);
        size_t i = begin, end = begin + chunk;
        for (; i + 4 <= end; i += 4) {
            for (int k = 0; k < 4; k++) {
                A::mul_in(x + i + k, f + k);
                if (normalize) A::red_in(x + i + k);
                A::mulr_to(f + k, f + k, &q4);
            }
        }
        for (int k = 0; i < end; i++, k++) {
            A::mul_in(x + i, f + k);
            if (normalize) A::red_in(x + i);
        }
    });
}

// Contiguous DIF of 2^lg elements (lg <= kMaxSubLg) for each array, on several threads: the first
// `split` stages cooperatively (each cut into pieces of whole butterflies, one fork-join per stage),
// then 2^split independent sub-blocks per array.  Same butterflies as dif_block, same result.
template <class A>
inline void dif_parallel(fr_t* const* xs, size_t count, int lg, const fr_t* const* tw, size_t threads) {
    const size_t T = resolve_threads(threads);
    int split = 0;
    while ((count << split) < 4 * T && split < lg - 6) split++;
    const size_t half = size_t(1) << (lg - 1);
    const size_t pieces = size_t(1) << split;  // per array and stage
    const size_t plen = half / pieces;         // butterflies per piece
    for (int t = 0; t < split; t++) {
        const int lev = lg - t;
        const size_t h = size_t(1) << (lev - 1);
        const fr_t* w = tw[lev];
        par_for(count * pieces, threads, [&](size_t item, size_t) {
            fr_t* x = xs[item / pieces];
            const size_t b0 = (item % pieces) * plen, b1 = b0 + plen;
            for (size_t b = b0; b < b1;) {  // butterfly b: block b / h, offset j = b % h
                const size_t blk = b / h, j0 = b % h, j1 = std::min(h, j0 + (b1 - b));
                fr_t* p = x + blk * 2 * h;
                fr_t* q = p + h;
                size_t j = j0;
                if (j == 0) { A::bf1(p, q); j = 1; }
                for (; j < j1; j++) A::bf(p + j, q + j, w + j);
                b += j1 - j0;
            }
        });
    }
    const int sub = lg - split;
    par_for(count * pieces, threads, [&](size_t item, size_t) {
        dif_block<A>(xs[item / pieces] + (item % pieces) * (size_t(1) << sub), sub, tw);
    });
}

// Core DFT, natural order in (values < 2r) and out (< r): X[i] = s·Σ x[j]·ω^(±ij).
// path: kAuto, kDirect (lg <= kMaxSubLg) or kFourStep (lg >= 2) — the last two for tests only.
enum path_t { kAuto = 0, kDirect = 1, kFourStep = 2 };

template <class A>
inline void dft(fr_t* const* xs, size_t count, int lg, bool inverse, const fr_t* s, size_t threads,
                int path) {
    const fr_t* tw[kMaxSubLg + 1];
    const bool direct = path == kDirect || (path == kAuto && lg <= kDirectMaxLg) || lg < 2;
    if (direct && lg <= kMaxSubLg) {
        for (int l = 1; l <= lg; l++) tw[l] = twiddles::level(l, inverse);
        if (lg <= 12 || resolve_threads(threads) == 1)  // below 2^13 a fork-join costs more than it saves
            par_for(count, threads, [&](size_t a, size_t) { dif_block<A>(xs[a], lg, tw); });
        else
            dif_parallel<A>(xs, count, lg, tw, threads);
        bitrev_pass<A>(xs, count, lg, s, threads);
        return;
    }
    // four-step: n1 = 2^lg1 rows of n2 = 2^lg2 contiguous elements
    const int lg1 = lg / 2, lg2 = lg - lg1;
    const size_t n1 = size_t(1) << lg1, n2 = size_t(1) << lg2;
    for (int l = 1; l <= lg2; l++) tw[l] = twiddles::level(l, inverse);
    // columns: C at a time, gathered into [C][n1] + an n1 twiddle row per worker
    size_t C = 16;
    while (C > 2 && C * n1 > (size_t(1) << 13)) C /= 2;
    C = std::min(C, n2);
    const size_t per = n2 / C;
    const size_t workers = workers_for(count * per, threads);
    const size_t wsz = (C + 1) * n1;
    scratch_t buf(workers * wsz);
    const fr_t wn = omega(lg, inverse);
    const fr_t one = fr_t::one(), sc = s ? *s : one;
    par_for(count * per, threads, [&](size_t item, size_t worker) {
        fr_t* x = xs[item / per];
        const size_t c0 = (item % per) * C;
        fr_t* g = buf.p + worker * wsz;  // g[c·n1 + j1]
        fr_t* pw = g + C * n1;
        for (size_t j1 = 0; j1 < n1; j1++) {
            const fr_t* src = x + j1 * n2 + c0;
            for (size_t c = 0; c < C; c++) g[c * n1 + j1] = src[c];
        }
        uint64_t e = c0;
        fr_t wc = wn.pow(&e, 1);  // ω_n^(c0)
        for (size_t c = 0; c < C; c++) {
            fr_t* col = g + c * n1;
            dif_block<A>(col, lg1, tw);
            // position m holds frequency k1 = bitrev(m): times s·ω_n^(c·k1)
            bitrev_powers<A>(pw, lg1, sc, wc);
            for (size_t m = 0; m < n1; m++) A::mul_in(col + m, pw + m);
            wc = mul_full<A>(wc, wn);
        }
        for (size_t m = 0; m < n1; m++) {
            fr_t* dst = x + m * n2 + c0;
            for (size_t c = 0; c < C; c++) dst[c] = g[c * n1 + m];
        }
    });
    // rows: contiguous DIFs, grouped so an item is >= 2^13 elements
    const size_t rows_per = std::max<size_t>(1, std::min(n1, (size_t(1) << 13) >> lg2));
    const size_t ritems = n1 / rows_per;
    par_for(count * ritems, threads, [&](size_t item, size_t) {
        fr_t* x = xs[item / ritems];
        const size_t r0 = (item % ritems) * rows_per;
        for (size_t r = r0; r < r0 + rows_per; r++) dif_block<A>(x + r * n2, lg2, tw);
    });
    bitrev_pass<A>(xs, count, lg, nullptr, threads);
}

template <class A>
inline void transform(fr_t* const* xs, size_t count, int lg, bool inverse, bool coset, size_t threads,
                      int path) {
    if (count == 0) return;
    if (!inverse) {
        if (coset) scale_powers<A>(xs, count, lg, fr_t::one(), generator(false), false, threads);
        dft<A>(xs, count, lg, false, nullptr, threads, path);
    } else if (!coset) {
        const fr_t ninv = size_inv(lg);
        dft<A>(xs, count, lg, true, &ninv, threads, path);
    } else {
        dft<A>(xs, count, lg, true, nullptr, threads, path);
        scale_powers<A>(xs, count, lg, size_inv(lg), generator(true), true, threads);
    }
}

// o[i] = f(i) for i < n on several threads (chunks of 8192).
template <class Fn>
inline void for_each_index(size_t n, size_t threads, Fn&& f) {
    const size_t chunk = 8192, nchunks = (n + chunk - 1) / chunk;
    par_for(nchunks, threads, [&](size_t item, size_t) {
        const size_t begin = item * chunk, end = std::min(n, begin + chunk);
        for (size_t i = begin; i < end; i++) f(i);
    });
}

// bellperson's order, seven transforms: the reference the six-transform h_stage must equal
// (tests and the A/B benchmark select it with test flag bit 3).
template <class A>
inline void h_stage_seven(fr_t* a, fr_t* b, fr_t* c, int lg, size_t threads, int path) {
    fr_t* abc[3] = {a, b, c};
    const size_t n = size_t(1) << lg;
    // evaluations on the domain -> coefficients (n^-1 folded into the coset scaling)
    dft<A>(abc, 3, lg, true, nullptr, threads, path);
    scale_powers<A>(abc, 3, lg, size_inv(lg), generator(false), false, threads);
    // -> evaluations on the coset g·<ω>
    dft<A>(abc, 3, lg, false, nullptr, threads, path);
    // a·b − c on the coset (fully reduced)
    for_each_index(n, threads, [&](size_t i) {
        A::mulr_to(a + i, a + i, b + i);
        a[i] = a[i] - c[i];
    });
    // back to coefficients; Z = X^n − 1 is the constant g^n − 1 on the coset
    uint64_t e = n;
    fr_t zinv = (generator(false).pow(&e, 1) - fr_t::one()).inv();
    fr_t s = zinv * size_inv(lg);
    dft<A>(&a, 1, lg, true, nullptr, threads, path);
    scale_powers<A>(&a, 1, lg, s, generator(true), true, threads);
}

// bellperson's h (see the conventions at the top) with six transforms instead of its seven
// (the GPU's algorithm too, cuzk/_cuda_ntt.py `h_consts`); lg < kMaxLg.  With
// A·B = P + X^n·Q (deg P < n, deg Q <= n − 2): iNTT(a·b) = P + Q, and on the coset w·<ω>
// (w = ω_2n, X^n = −1 there) the interpolant of A·B is P − Q.  bellperson's coset-g result is
// Q + (P + Q − C)/(g^n − 1) for any a, b, c, so with β = 1/(g^n − 1), α = 1/2 + β:
//     h = iNTT(α·a·b − β·c) − iNTT_w(A_w·B_w)/2.
// Products: 6 DFTs + 6n (pointwise 3n, scalings 3n) instead of 7 DFTs + 5n.  Needs the
// 2n-th root w, so lg < kMaxLg (2^31 elements: 64 GiB per vector).
template <class A>
inline void h_stage(fr_t* a, fr_t* b, fr_t* c, int lg, size_t threads, int path) {
    const size_t n = size_t(1) << lg;
    uint64_t e = n;
    const fr_t beta = (generator(false).pow(&e, 1) - fr_t::one()).inv();
    const fr_t half = fr_t::from_u64(2).inv();
    const fr_t alpha = half + beta, alpha_inv = alpha.inv();
    const fr_t gamma = beta * alpha_inv;
    // c <- a·b − γ·c (reduced); a and b stay
    for_each_index(n, threads, [&](size_t i) {
        fr_t ab, gc;
        A::mulr_to(&ab, a + i, b + i);
        A::mulr_to(&gc, &gamma, c + i);
        c[i] = ab - gc;
    });
    // c <- U = (α/n)·iDFT(c) = iNTT(α·a·b − β·c); a, b <- α·(coefficients of A, B)
    fr_t* abc[3] = {a, b, c};
    const fr_t s1 = alpha * size_inv(lg);
    dft<A>(abc, 3, lg, true, &s1, threads, path);
    // a, b <- A, B evaluated on w·<ω>: coefficient j times w^j / α, then a forward DFT
    scale_powers<A>(abc, 2, lg, alpha_inv, omega(lg + 1, false), false, threads);
    dft<A>(abc, 2, lg, false, nullptr, threads, path);
    for_each_index(n, threads, [&](size_t i) { A::mulr_to(a + i, a + i, b + i); });
    // a <- −iNTT_w(a)/2 = −(1/2n)·w^-j·iDFT(a), then h = U + that
    dft<A>(&a, 1, lg, true, nullptr, threads, path);
    scale_powers<A>(&a, 1, lg, -(half * size_inv(lg)), omega(lg + 1, true), true, threads);
    for_each_index(n, threads, [&](size_t i) { a[i] = a[i] + c[i]; });
}

}  // namespace detail

// ---- public entry points (raw limb pointers, for Cython) -------------------------------------
// Index of the first element that is not < r, or n when all are.
inline size_t first_noncanonical(const uint64_t* v, size_t n, size_t threads) {
    std::atomic<size_t> first{n};
    const size_t chunk = size_t(1) << 16, nchunks = (n + chunk - 1) / chunk;
    par_for(nchunks, threads, [&](size_t item, size_t) {
        const size_t begin = item * chunk, end = std::min(n, begin + chunk);
        for (size_t i = begin; i < end; i++) {
            if (i >= first.load(std::memory_order_relaxed)) return;
            if (!fr_t::is_canonical(v + 4 * i)) {
                size_t cur = first.load();
                while (i < cur && !first.compare_exchange_weak(cur, i)) {}
                return;
            }
        }
    });
    return first.load();
}

// In-place transform of 2^lg Montgomery elements (see the conventions at the top).
// test_flags (tests only; 0 in production): bit 0 forces the portable arithmetic, bits 1-2 the
// path (1: one contiguous DIF, 2: four-step).  Every choice gives the same bytes.
inline void ntt_inplace(uint64_t* data, int lg, bool inverse, bool coset, size_t threads,
                        int test_flags = 0) {
    if (lg < 0 || lg > kMaxLg) throw std::invalid_argument("ntt: lg out of range");
    fr_t* x = reinterpret_cast<fr_t*>(data);
    const int path = (test_flags >> 1) & 3;
    if ((test_flags & 1) || !detail::fast_ok())
        detail::transform<detail::arith_generic>(&x, 1, lg, inverse, coset, threads, path);
    else
        detail::transform<detail::arith_fast>(&x, 1, lg, inverse, coset, threads, path);
}

// The H stage on 2^lg evaluations (lg < 32); the coefficients of h end up in a; b and c are
// scratch.  test_flags as ntt_inplace's, plus bit 3: bellperson's seven-transform order
// (the same bytes; tests and A/B benchmarks).
inline void h_stage_inplace(uint64_t* a, uint64_t* b, uint64_t* c, int lg, size_t threads,
                            int test_flags = 0) {
    if (lg < 0 || lg >= kMaxLg) throw std::invalid_argument("h_stage: lg out of range (0 <= lg < 32)");
    fr_t* pa = reinterpret_cast<fr_t*>(a);
    fr_t* pb = reinterpret_cast<fr_t*>(b);
    fr_t* pc = reinterpret_cast<fr_t*>(c);
    const int path = (test_flags >> 1) & 3;
    const bool seven = (test_flags & 8) != 0;
    if ((test_flags & 1) || !detail::fast_ok())
        (seven ? detail::h_stage_seven<detail::arith_generic>
               : detail::h_stage<detail::arith_generic>)(pa, pb, pc, lg, threads, path);
    else
        (seven ? detail::h_stage_seven<detail::arith_fast>
               : detail::h_stage<detail::arith_fast>)(pa, pb, pc, lg, threads, path);
}

// Test hook for the lazy arithmetic: out = {x + y, x − y, w·x·R^-1} (4 limbs each, each < 2r,
// congruent mod r) for x, y < 2r and w < r, through the fast or the portable implementation.
inline void arith_probe(const uint64_t* x, const uint64_t* y, const uint64_t* w, uint64_t* out,
                        bool generic) {
    fr_t X = fr_t::from_limbs(x), Y = fr_t::from_limbs(y), W = fr_t::from_limbs(w), r[3];
    if (generic || !detail::fast_ok()) {
        r[0] = detail::arith_generic::add(X, Y);
        r[1] = detail::arith_generic::sub(X, Y);
        r[2] = detail::arith_generic::mul(W, X);
    } else {
        r[0] = detail::arith_fast::add(X, Y);
        r[1] = detail::arith_fast::sub(X, Y);
        r[2] = detail::arith_fast::mul(W, X);
    }
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 4; i++) out[4 * k + i] = r[k].l[i];
}

// ω_(2^lg), Montgomery form, 4 limbs.
inline void domain_root(uint64_t* out, int lg) {
    if (lg < 0 || lg > kMaxLg) throw std::invalid_argument("domain_root: lg out of range");
    fr_t w = detail::omega(lg, false);
    for (int i = 0; i < 4; i++) out[i] = w.l[i];
}

}  // namespace ntt
}  // namespace cuzk
