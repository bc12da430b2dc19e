// Multi-scalar multiplication (Pippenger) and bitmap batch addition over G1 and G2, CPU backend.
//
// Public entry points (namespace cuzk, templated on the curve C = g1_curve | g2_curve):
//   msm<C>(points, scalars, n, threads)            Σ s_i·P_i
//   msm_indexed<C>(base, scalars, idx64, idx32, m, threads)
//                                                   Σ s_i·base[idx_i]  (the prover's tail lists)
//   batch_add<C>(points, n, bitmap, threads)        Σ P_i over the set bits of bitmap
// Inputs: points affine Montgomery (all-zero = infinity, skipped), scalars canonical little-endian
// 4×u64 and < 2^255 (every value < r qualifies); threads == 0 means all cores. The result is an
// affine point (infinity = all-zero). Results do not depend on the thread count.
//
// Algorithm.
// * Scalars are recoded once into signed base-2^c digits d ∈ [-2^(c-1), 2^(c-1)] (W = ⌈256/c⌉
//   windows); bucket |d| collects ±P. c comes from a cost model over the number of non-trivial
//   scalars (scalars equal to 1 only touch window 0).
// * Bucket accumulation is "sort, then batch-affine tree": a task (window, bucket range) counting-
//   sorts its points by bucket (4-byte entries), gathers the lists of a group of buckets (~768 KiB,
//   so the rounds run in L2) and halves every list per round by adding neighbours in affine
//   coordinates with one shared inversion per sub-batch (Montgomery's trick): 5M + 1S per
//   addition instead of 8M + 2S (XYZZ mixed add). Equal x (P+P, P−P) and infinities are handled
//   per pair, so repeated points and buckets holding most of the points (mostly-bit scalars) need
//   nothing special. A round with too few pairs to amortize an inversion finishes in XYZZ.
// * Each bucket range is reduced by running sums (XYZZ); ranges are combined with a small scalar
//   multiple, windows by c doublings each (Horner).
// * Parallelism: tasks are (window × bucket range) pairs scheduled longest-first on `threads`
//   workers; points are processed in blocks to bound the digit memory.
// * Field arithmetic: 6-limb Montgomery products with mulx/adcx/adox (two carry chains) when the
//   CPU has BMI2+ADX (checked at run time), else ff.hpp's portable operators. On CPUs with
//   AVX-512 IFMA (checked at run time; the lane code is compiled into every x86-64 build with
//   function-level target attributes, so a portable build still uses it) the hot loops run on 8
//   lanes of radix-2^52 limbs: the tree's three passes (8 independent prefix-product chains) and
//   the running sums (8 bucket sub-ranges in lockstep). Every path produces the same fully
//   reduced values. CUZK_CPU_IFMA=0 in the environment turns the lanes off (read once).
#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

#include "ec.hpp"
#include "parallel.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#define CUZK_MSM_X86 1
#include <x86intrin.h>
#else
#define CUZK_MSM_X86 0
#endif

namespace cuzk {

// Tuning knobs; 0 = choose automatically. Exposed for tests and benchmarks.
struct msm_config {
    unsigned window = 0;     // c, window width in bits (1..24)
    unsigned ranges = 0;     // bucket ranges per window (parallel split)
    size_t block = 0;        // points per recoding block
    size_t batch = 0;        // pairs per shared inversion
    size_t small = 0;        // a round with fewer pairs finishes in XYZZ
    size_t scratch = 0;      // points per accumulation pass of a task
    size_t group = 0;        // list elements per cache-resident reduction group
    int portable = 0;        // 1: force ff.hpp arithmetic (no mulx/adx, no IFMA lanes)
    int no_simd = 0;         // 1: no AVX-512 IFMA lanes (scalar mulx path only)
};

namespace msm_detail {

// ============================================================================
// Field operations. Two back ends with one interface (static functions): ops_ref = ec.hpp's
// field_ops over ff.hpp's operators, ops_adx with inline mulx/adcx/adox assembly.  Fq2
// operations derive from the Fq ones (ops_base = ec.hpp's field_ops_base).
// ============================================================================
template <class D>
using ops_base = field_ops_base<D>;
typedef field_ops ops_ref;

#if CUZK_MSM_X86
struct ops_adx : ops_base<ops_adx> {
    CUZK_FIELD_OPS_BASE(ops_base<ops_adx>);

    // r = a - p if a >= p, else a (a < 2p)
    static CUZK_INLINE fq_t final_sub(uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5) {
        unsigned long long s0, s1, s2, s3, s4, s5;
        unsigned char bo = _subborrow_u64(0, a0, fq_params::MOD[0], &s0);
        bo = _subborrow_u64(bo, a1, fq_params::MOD[1], &s1);
        bo = _subborrow_u64(bo, a2, fq_params::MOD[2], &s2);
        bo = _subborrow_u64(bo, a3, fq_params::MOD[3], &s3);
        bo = _subborrow_u64(bo, a4, fq_params::MOD[4], &s4);
        bo = _subborrow_u64(bo, a5, fq_params::MOD[5], &s5);
        fq_t r;
        r.l[0] = bo ? a0 : s0; r.l[1] = bo ? a1 : s1; r.l[2] = bo ? a2 : s2;
        r.l[3] = bo ? a3 : s3; r.l[4] = bo ? a4 : s4; r.l[5] = bo ? a5 : s5;
        return r;
    }
    // Montgomery product: ff.hpp's mulx/adcx/adox CIOS (72 mulx; ~2x the u128 code)
    static inline fq_t mul(const fq_t& A, const fq_t& B) {
        fq_t r;
        mont_mul6_mulx<fq_params>(r.l, A.l, B.l);
        return r;
    }
    static inline fq_t sqr(const fq_t& a) { return mul(a, a); }
    static CUZK_INLINE fq_t add(const fq_t& a, const fq_t& b) {
        unsigned long long s[6];
        unsigned char c = 0;
        CUZK_UNROLL for (int i = 0; i < 6; i++) c = _addcarry_u64(c, a.l[i], b.l[i], &s[i]);
        return final_sub(s[0], s[1], s[2], s[3], s[4], s[5]);  // a + b < 2p < 2^384: no carry out
    }
    static CUZK_INLINE fq_t dbl(const fq_t& a) { return add(a, a); }
    static CUZK_INLINE fq_t sub(const fq_t& a, const fq_t& b) {
        unsigned long long s[6];
        unsigned char bo = 0, c = 0;
        CUZK_UNROLL for (int i = 0; i < 6; i++) bo = _subborrow_u64(bo, a.l[i], b.l[i], &s[i]);
        uint64_t mask = 0 - (uint64_t)bo;  // add p back on borrow
        fq_t r;
        CUZK_UNROLL for (int i = 0; i < 6; i++) {
            unsigned long long v;
            c = _addcarry_u64(c, s[i], fq_params::MOD[i] & mask, &v);
            r.l[i] = v;
        }
        return r;
    }
    static CUZK_INLINE fq_t neg(const fq_t& a) { return sub(fq_t::zero(), a); }
};

inline bool cpu_has_adx() { return cpu_has_bmi2_adx(); }  // ff.hpp
#else
typedef ops_ref ops_adx;
inline bool cpu_has_adx() { return false; }
#endif

// AVX-512 IFMA lanes: compiled on x86-64 with GCC >= 8 or clang whatever the -march (target
// attributes below), used when the running CPU (and OS: libgcc checks the ZMM state in XCR0)
// has AVX512F + AVX512IFMA and CUZK_CPU_IFMA is not "0".
#if CUZK_MSM_X86 && (defined(__clang__) || __GNUC__ >= 8) && !defined(CUZK_MSM_NO_IFMA)
#define CUZK_MSM_IFMA 1
#define CUZK_IFMA_TARGET "avx512f,avx512ifma"
#define CUZK_IFMA_FN __attribute__((target(CUZK_IFMA_TARGET)))
inline bool cpu_has_ifma() {
    static const bool ok = [] {
        const char* e = std::getenv("CUZK_CPU_IFMA");
        if (e && e[0] == '0' && e[1] == 0) return false;
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512ifma");
    }();
    return ok;
}
#else
#define CUZK_MSM_IFMA 0
inline bool cpu_has_ifma() { return false; }
#endif


// ============================================================================
// Eight Fq elements at once with AVX-512 IFMA (Zen 4, Sapphire Rapids, Ice Lake and later; every
// function of this namespace is compiled for CUZK_IFMA_TARGET, callers check cpu_has_ifma()). Lanes hold radix-2^52 limbs (8 × 52 = 416 bits); the Montgomery
// product divides by 2^384 exactly like the scalar code (7 reduction steps of 52 bits, one of 20),
// so values move between the two forms by re-slicing bits, with no domain change. 8-lane products
// cost ~5.5 ns per element here against ~33 ns for the scalar mulx product.
// ============================================================================
#if CUZK_MSM_IFMA
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512ifma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512ifma")  /* = CUZK_IFMA_TARGET (pragmas do not expand macros) */
#endif
namespace ifma {
typedef __m512i V;
struct alignas(64) fq8_t { V l[8]; };
// Shifts through the zero-masked forms: same instructions, and GCC 12's unmasked ones trip
// -Wuninitialized (their pass-through operand is _mm512_undefined_epi32()).
static CUZK_INLINE V shr(V a, unsigned n) { return _mm512_maskz_srli_epi64((__mmask8)0xFF, a, n); }
static CUZK_INLINE V shl(V a, unsigned n) { return _mm512_maskz_slli_epi64((__mmask8)0xFF, a, n); }
static CUZK_INLINE V sar(V a, unsigned n) { return _mm512_maskz_srai_epi64((__mmask8)0xFF, a, n); }

struct consts_t {
    uint64_t p52[8];
    uint64_t two_p52[8];  // 2p in normalized 52-bit limbs
    uint64_t m0;  // -p^-1 mod 2^52
    consts_t() {
        const uint64_t* P = fq_params::MOD;
        for (int k = 0; k < 8; k++) {
            int off = 52 * k, li = off / 64, sh = off % 64;
            uint64_t v = P[li] >> sh;
            if (sh + 52 > 64 && li + 1 < 6) v |= P[li + 1] << (64 - sh);
            p52[k] = v & ((uint64_t(1) << 52) - 1);
        }
        uint64_t c = 0;
        for (int j = 0; j < 8; j++) {
            uint64_t x = 2 * p52[j] + c;
            c = x >> 52;
            two_p52[j] = x & ((uint64_t(1) << 52) - 1);
        }
        m0 = fq_params::M0 & ((uint64_t(1) << 52) - 1);
    }
};
inline const consts_t& K() { static const consts_t k; return k; }

// Montgomery product a·b·2^-384 mod p per lane. Inputs < 2p with limbs < 2^52; output < 2p, limbs
// < 2^52 (a, b < 2p < 2^382 give ab/2^384 < p/2). Operand scanning: row i adds a·b_i (64 madd52),
// then, for i < 7, m = t0·(-p^-1) mod 2^52 and t += m·p, t >>= 52; last a 20-bit step t >>= 20.
// Limb accumulators stay below 2^58 (at most ~32 terms < 2^52 each), so no carries until the end.
inline void mul(fq8_t& r, const fq8_t& a, const fq8_t& b) {
    const consts_t& k = K();
    const V z = _mm512_setzero_si512(), m0 = _mm512_set1_epi64((long long)k.m0);
    V p[8];
    for (int j = 0; j < 8; j++) p[j] = _mm512_set1_epi64((long long)k.p52[j]);
    V t[9];
    for (int j = 0; j < 9; j++) t[j] = z;
    for (int i = 0; i < 8; i++) {
        const V bi = b.l[i];
        for (int j = 0; j < 8; j++) {
            t[j] = _mm512_madd52lo_epu64(t[j], a.l[j], bi);
            t[j + 1] = _mm512_madd52hi_epu64(t[j + 1], a.l[j], bi);
        }
        if (i < 7) {
            const V m = _mm512_madd52lo_epu64(z, t[0], m0);
            for (int j = 0; j < 8; j++) {
                t[j] = _mm512_madd52lo_epu64(t[j], m, p[j]);
                t[j + 1] = _mm512_madd52hi_epu64(t[j + 1], m, p[j]);
            }
            t[1] = _mm512_add_epi64(t[1], shr(t[0], 52));  /* t0 ≡ 0 mod 2^52 */
            for (int j = 0; j < 8; j++) t[j] = t[j + 1];
            t[8] = z;
        }
    }
    const V m20 = _mm512_set1_epi64((1 << 20) - 1), M = _mm512_set1_epi64((1ll << 52) - 1);
    const V m = _mm512_and_si512(_mm512_madd52lo_epu64(z, t[0], m0), m20);
    for (int j = 0; j < 8; j++) {
        t[j] = _mm512_madd52lo_epu64(t[j], m, p[j]);
        t[j + 1] = _mm512_madd52hi_epu64(t[j + 1], m, p[j]);
    }
    // t / 2^20: limb j takes t_j >> 20 and the low 20 bits of t_{j+1} (at bit 32)
    for (int j = 0; j < 8; j++)
        r.l[j] = _mm512_add_epi64(shr(t[j], 20),
                                  shl(_mm512_and_si512(t[j + 1], m20), 32));
    for (int j = 0; j < 7; j++) {
        r.l[j + 1] = _mm512_add_epi64(r.l[j + 1], shr(r.l[j], 52));
        r.l[j] = _mm512_and_si512(r.l[j], M);
    }
}
// r < 2p -> r mod p
inline void canon(fq8_t& r) {
    const consts_t& k = K();
    const V M = _mm512_set1_epi64((1ll << 52) - 1), z = _mm512_setzero_si512();
    V s[8], c = z;
    for (int j = 0; j < 8; j++) {
        V v = _mm512_add_epi64(_mm512_sub_epi64(r.l[j], _mm512_set1_epi64((long long)k.p52[j])), c);
        c = sar(v, 52);  /* borrow: -1 or 0 */
        s[j] = _mm512_and_si512(v, M);
    }
    const __mmask8 ge = _mm512_cmpeq_epi64_mask(c, z);
    for (int j = 0; j < 8; j++) r.l[j] = _mm512_mask_mov_epi64(r.l[j], ge, s[j]);
}
// 8×8 transpose of 64-bit words: unpack pairs, then 128-bit and 256-bit blocks (24 shuffles)
inline void transpose(V* r) {
    V s[8], t[8];
    for (int k = 0; k < 8; k += 2) {
        s[k] = _mm512_maskz_unpacklo_epi64((__mmask8)0xFF, r[k], r[k + 1]);
        s[k + 1] = _mm512_maskz_unpackhi_epi64((__mmask8)0xFF, r[k], r[k + 1]);
    }
    const V i0 = _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0), i1 = _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2);
    for (int k = 0; k < 8; k += 4) {
        t[k] = _mm512_permutex2var_epi64(s[k], i0, s[k + 2]);
        t[k + 2] = _mm512_permutex2var_epi64(s[k], i1, s[k + 2]);
        t[k + 1] = _mm512_permutex2var_epi64(s[k + 1], i0, s[k + 3]);
        t[k + 3] = _mm512_permutex2var_epi64(s[k + 1], i1, s[k + 3]);
    }
    const V j0 = _mm512_set_epi64(11, 10, 9, 8, 3, 2, 1, 0), j1 = _mm512_set_epi64(15, 14, 13, 12, 7, 6, 5, 4);
    for (int k = 0; k < 4; k++) {
        r[k] = _mm512_permutex2var_epi64(t[k], j0, t[k + 4]);
        r[k + 4] = _mm512_permutex2var_epi64(t[k], j1, t[k + 4]);
    }
}
// 8 canonical scalar elements -> lanes (bit re-slicing 6×64 -> 8×52)
inline void pack(fq8_t& r, const fq_t* const* src) {
    V q[8];
    for (int l = 0; l < 8; l++) q[l] = _mm512_maskz_loadu_epi64(0x3F, src[l]->l);
    transpose(q);
    const V M = _mm512_set1_epi64((1ll << 52) - 1);
    r.l[0] = _mm512_and_si512(q[0], M);
    r.l[1] = _mm512_and_si512(_mm512_or_si512(shr(q[0], 52), shl(q[1], 12)), M);
    r.l[2] = _mm512_and_si512(_mm512_or_si512(shr(q[1], 40), shl(q[2], 24)), M);
    r.l[3] = _mm512_and_si512(_mm512_or_si512(shr(q[2], 28), shl(q[3], 36)), M);
    r.l[4] = _mm512_and_si512(_mm512_or_si512(shr(q[3], 16), shl(q[4], 48)), M);
    r.l[5] = _mm512_and_si512(shr(q[4], 4), M);
    r.l[6] = _mm512_and_si512(_mm512_or_si512(shr(q[4], 56), shl(q[5], 8)), M);
    r.l[7] = shr(q[5], 44);
}
// lanes (canonical) -> 8 scalar elements
inline void unpack(fq_t* const* dst, const fq8_t& a) {
    V q[8];
    q[0] = _mm512_or_si512(a.l[0], shl(a.l[1], 52));
    q[1] = _mm512_or_si512(shr(a.l[1], 12), shl(a.l[2], 40));
    q[2] = _mm512_or_si512(shr(a.l[2], 24), shl(a.l[3], 28));
    q[3] = _mm512_or_si512(shr(a.l[3], 36), shl(a.l[4], 16));
    q[4] = _mm512_or_si512(_mm512_or_si512(shr(a.l[4], 48), shl(a.l[5], 4)),
                           shl(a.l[6], 56));
    q[5] = _mm512_or_si512(shr(a.l[6], 8), shl(a.l[7], 44));
    q[6] = q[7] = _mm512_setzero_si512();
    transpose(q);
    for (int l = 0; l < 8; l++) _mm512_mask_storeu_epi64(dst[l]->l, 0x3F, q[l]);
}

// Lane values kept in [0, 2p) with 52-bit limbs (the product's output range).
// normalize: propagate signed carries so every limb is in [0, 2^52) (value must be ≥ 0)
inline void carry(V* t) {
    const V M = _mm512_set1_epi64((1ll << 52) - 1);
    for (int j = 0; j < 7; j++) {
        t[j + 1] = _mm512_add_epi64(t[j + 1], sar(t[j], 52));
        t[j] = _mm512_and_si512(t[j], M);
    }
}
// t in [0, 4p), normalized -> t mod 2p
inline void sub_2p_if(fq8_t& r, V* t) {
    const consts_t& k = K();
    const V M = _mm512_set1_epi64((1ll << 52) - 1), z = _mm512_setzero_si512();
    V s[8], c = z;
    for (int j = 0; j < 8; j++) {
        V v = _mm512_add_epi64(_mm512_sub_epi64(t[j], _mm512_set1_epi64((long long)k.two_p52[j])), c);
        c = sar(v, 52);
        s[j] = _mm512_and_si512(v, M);
    }
    const __mmask8 ge = _mm512_cmpeq_epi64_mask(c, z);
    for (int j = 0; j < 8; j++) r.l[j] = _mm512_mask_mov_epi64(t[j], ge, s[j]);
}
inline void add(fq8_t& r, const fq8_t& a, const fq8_t& b) {
    V t[8];
    for (int j = 0; j < 8; j++) t[j] = _mm512_add_epi64(a.l[j], b.l[j]);
    carry(t);
    sub_2p_if(r, t);
}
// a - b + 2p in (0, 4p), then mod 2p
inline void sub(fq8_t& r, const fq8_t& a, const fq8_t& b) {
    const consts_t& k = K();
    V t[8];
    for (int j = 0; j < 8; j++)
        t[j] = _mm512_add_epi64(_mm512_sub_epi64(a.l[j], b.l[j]), _mm512_set1_epi64((long long)(2 * k.p52[j])));
    carry(t);
    sub_2p_if(r, t);
}
inline void sqr(fq8_t& r, const fq8_t& a) { mul(r, a, a); }

// Fq2 lanes: Karatsuba 3 products, complex squaring 2
struct fq28_t { fq8_t c0, c1; };
inline void mul(fq28_t& r, const fq28_t& a, const fq28_t& b) {
    fq8_t v0, v1, s, t;
    mul(v0, a.c0, b.c0);
    mul(v1, a.c1, b.c1);
    add(s, a.c0, a.c1);
    add(t, b.c0, b.c1);
    mul(s, s, t);
    sub(r.c0, v0, v1);
    sub(s, s, v0);
    sub(r.c1, s, v1);
}
inline void sqr(fq28_t& r, const fq28_t& a) {
    fq8_t s, d, t;
    add(s, a.c0, a.c1);
    sub(d, a.c0, a.c1);
    mul(t, a.c0, a.c1);
    mul(r.c0, s, d);
    add(r.c1, t, t);
}
inline void canon(fq28_t& r) { canon(r.c0); canon(r.c1); }
inline void pack(fq28_t& r, const fq2_t* const* src) {
    const fq_t* p0[8];
    const fq_t* p1[8];
    for (int l = 0; l < 8; l++) { p0[l] = &src[l]->c0; p1[l] = &src[l]->c1; }
    pack(r.c0, p0);
    pack(r.c1, p1);
}
inline void unpack(fq2_t* const* dst, const fq28_t& a) {
    fq_t* p0[8];
    fq_t* p1[8];
    for (int l = 0; l < 8; l++) { p0[l] = &dst[l]->c0; p1[l] = &dst[l]->c1; }
    unpack(p0, a.c0);
    unpack(p1, a.c1);
}
// lanes whose value (< 2p) is ≡ 0 mod p
inline __mmask8 is_zero(const fq8_t& a) {
    fq8_t c = a;
    canon(c);
    V o = c.l[0];
    for (int j = 1; j < 8; j++) o = _mm512_or_si512(o, c.l[j]);
    return _mm512_cmpeq_epi64_mask(o, _mm512_setzero_si512());
}
inline __mmask8 is_zero(const fq28_t& a) { return is_zero(a.c0) & is_zero(a.c1); }
inline void blend(fq8_t& r, __mmask8 m, const fq8_t& b) {
    for (int j = 0; j < 8; j++) r.l[j] = _mm512_mask_mov_epi64(r.l[j], m, b.l[j]);
}
inline void blend(fq28_t& r, __mmask8 m, const fq28_t& b) { blend(r.c0, m, b.c0); blend(r.c1, m, b.c1); }
inline void add(fq28_t& r, const fq28_t& a, const fq28_t& b) { add(r.c0, a.c0, b.c0); add(r.c1, a.c1, b.c1); }
inline void sub(fq28_t& r, const fq28_t& a, const fq28_t& b) { sub(r.c0, a.c0, b.c0); sub(r.c1, a.c1, b.c1); }

template <class F> struct lanes_of;
template <> struct lanes_of<fq_t> { typedef fq8_t type; };
template <> struct lanes_of<fq2_t> { typedef fq28_t type; };
}  // namespace ifma
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif

// Point arithmetic: ec.hpp's xyzz_formulas over the chosen field back end.
template <class C, class O>
using pt = xyzz_formulas<C, O>;

// ============================================================================
// Batch-affine tree reduction.
//
// buf holds, for every bucket b, a list buf[start[b] .. start[b]+len[b]) of affine points
// (infinity allowed). reduce() leaves each list's sum at buf[start[b]] with len[b] = 1 (or
// len 0 untouched). A round replaces the list (e0, e1, e2, ...) by (e0+e1, e2+e3, ...), keeping
// the odd element first when len is odd; results are written in place (the output index of a
// pair never exceeds its input indices). One inversion per sub-batch of `batch` pairs:
//   pass 1: d_k = x2 - x1 (2·y1 for a doubling), prefix products       1M
//   pass 2: backwards, 1/d_k from the running inverse                     2M
//   pass 3: λ = (y2-y1)/d (3x1²/d), x3 = λ² - x1 - x2, y3 = λ(x1-x3) - y1   2M + 1S
// ============================================================================
template <class C, class O>
struct tree_t {
    typedef typename C::field_t F;
    typedef affine_t<C> A;
    typedef pt<C, O> P;
    enum : uint8_t { K_ADD = 0, K_DBL = 1, K_INF = 2, K_COPY_A = 3, K_COPY_B = 4 };

    size_t batch, small;
    std::vector<F> pre;
    std::vector<uint32_t> pin, pout;
    std::vector<uint8_t> kind;
    std::vector<uint32_t> next_active;
    std::vector<typename P::X> fin;
    std::vector<F> fin_z, fin_s;

    bool lanes;  // use the IFMA lanes (mulx back end on an IFMA target)
    tree_t(size_t batch_, size_t small_, bool simd = true) : batch(batch_), small(small_) {
        pre.resize(batch);
        pin.resize(batch);
        pout.resize(batch);
        kind.resize(batch);
        lanes = simd && simd_capable() && cpu_has_ifma();
    }

    static constexpr bool simd_capable() {
#if CUZK_MSM_IFMA
        return (std::is_same<F, fq_t>::value || std::is_same<F, fq2_t>::value) && std::is_same<O, ops_adx>::value;
#else
        return false;
#endif
    }

    static CUZK_INLINE void prefetch_pair(const A* p) {
        const char* c = reinterpret_cast<const char*>(p);
        for (size_t o = 0; o < 2 * sizeof(A); o += 64) __builtin_prefetch(c + o);
    }

    void flush(A* buf, size_t k) {
#if CUZK_MSM_IFMA
        if constexpr (simd_capable()) {
            if (lanes && k >= 16) { flush_lanes(buf, k); return; }
        }
#endif
        flush_scalar(buf, pin.data(), pout.data(), k);
    }

    // k pairs (buf[in[j]], buf[in[j]+1]) -> buf[out[j]], in order of j
    void flush_scalar(A* buf, const uint32_t* in, const uint32_t* out, size_t k) {
        F acc = F::one();
        for (size_t j = 0; j < k; j++) {
            if (j + 6 < k) prefetch_pair(buf + in[j + 6]);
            const A& a = buf[in[j]];
            const A& b = buf[in[j] + 1];
            uint8_t t;
            F d;
            if (a.is_inf()) t = K_COPY_B;
            else if (b.is_inf()) t = K_COPY_A;
            else if (a.x != b.x) { t = K_ADD; d = O::sub(b.x, a.x); }
            else if (a.y == b.y && !a.y.is_zero()) { t = K_DBL; d = O::dbl(a.y); }
            else t = K_INF;  // P + (-P), or a 2-torsion doubling
            kind[j] = t;
            if (t <= K_DBL) { pre[j] = acc; acc = O::mul(acc, d); }
        }
        F iv = O::inv(acc);
        for (size_t j = k; j-- > 0;) {
            if (kind[j] > K_DBL) continue;
            const A& a = buf[in[j]];
            const A& b = buf[in[j] + 1];
            F d = kind[j] == K_ADD ? O::sub(b.x, a.x) : O::dbl(a.y);
            F t = O::mul(iv, pre[j]);
            iv = O::mul(iv, d);
            pre[j] = t;
        }
        for (size_t j = 0; j < k; j++) {
            const A& a = buf[in[j]];
            const A& b = buf[in[j] + 1];
            A r;
            switch (kind[j]) {
            case K_ADD: {
                F l = O::mul(O::sub(b.y, a.y), pre[j]);
                r.x = O::sub(O::sub(O::sqr(l), a.x), b.x);
                r.y = O::sub(O::mul(l, O::sub(a.x, r.x)), a.y);
                break;
            }
            case K_DBL: {
                F xs = O::sqr(a.x);
                F l = O::mul(O::add(O::dbl(xs), xs), pre[j]);
                r.x = O::sub(O::sqr(l), O::dbl(a.x));
                r.y = O::sub(O::mul(l, O::sub(a.x, r.x)), a.y);
                break;
            }
            case K_INF: r = A::infinity(); break;
            case K_COPY_A: r = a; break;
            default: r = b; break;
            }
            buf[out[j]] = r;
        }
    }

#if CUZK_MSM_IFMA
    // The same sub-batch on 8 IFMA lanes. Pairs with distinct x (all but a vanishing few for
    // random points) are dealt to 8 independent prefix-product chains (pairs 8g..8g+7 form group
    // g); the lane inverses come from one scalar inversion. Per group: 6 lane products (the
    // scalar 5M + 1S), 6 lane subtractions, 6 packs and 2 unpacks (bit re-slicing + transpose).
    // Other pairs (infinity, equal x) take the scalar path on copies, written back last, so
    // every write still lands after the reads it could clobber.
    std::vector<uint32_t> nrm, spc, sin, sout;
    std::vector<A> side;
    typedef typename ifma::lanes_of<F>::type L;
    std::vector<L> pre8, d8;

    CUZK_IFMA_FN void flush_lanes(A* buf, size_t k) {
        using namespace ifma;
        nrm.clear();
        spc.clear();
        for (size_t j = 0; j < k; j++) {
            if (j + 6 < k) prefetch_pair(buf + pin[j + 6]);
            const A& a = buf[pin[j]];
            const A& b = buf[pin[j] + 1];
            if (!a.is_inf() && !b.is_inf() && a.x != b.x) nrm.push_back((uint32_t)j);
            else spc.push_back((uint32_t)j);
        }
        const size_t ns = spc.size();
        if (ns) {
            side.resize(2 * ns);
            sin.resize(ns);
            sout.resize(ns);
            for (size_t i = 0; i < ns; i++) {
                side[2 * i] = buf[pin[spc[i]]];
                side[2 * i + 1] = buf[pin[spc[i]] + 1];
                sin[i] = (uint32_t)(2 * i);
                sout[i] = (uint32_t)i;
            }
            flush_scalar(side.data(), sin.data(), sout.data(), ns);
        }
        const size_t nn = nrm.size();
        if (nn) {
            const size_t G = (nn + 7) / 8;
            if (pre8.size() < G) { pre8.resize(G); d8.resize(G); }
            alignas(64) F v[8], w[8];
            const F* pv[8];
            F* pw[8];
            for (int l = 0; l < 8; l++) { pv[l] = &v[l]; pw[l] = &w[l]; }
            auto pair_of = [&](size_t g, int l) -> uint32_t { return pin[nrm[std::min(8 * g + l, nn - 1)]]; };
            // pass 1: d = x2 - x1, lane chains of prefix products
            const F* p1[8];
            const F* p2[8];
            L acc, u, t;
            for (int l = 0; l < 8; l++) v[l] = F::one();
            pack(acc, pv);
            for (size_t g = 0; g < G; g++) {
                for (int l = 0; l < 8; l++) {
                    const A* e = buf + pair_of(g, l);
                    p1[l] = &e[0].x;
                    p2[l] = &e[1].x;
                }
                pack(u, p1);
                pack(t, p2);
                sub(d8[g], t, u);
                pre8[g] = acc;
                mul(acc, acc, d8[g]);
            }
            // one scalar inversion for the 8 chain products
            canon(acc);
            unpack(pw, acc);
            F c = w[0];
            for (int l = 1; l < 8; l++) { v[l] = c; c = O::mul(c, w[l]); }
            c = O::inv(c);
            for (int l = 7; l > 0; l--) { F t = O::mul(c, v[l]); c = O::mul(c, w[l]); v[l] = t; }
            v[0] = c;
            L iv;
            pack(iv, pv);
            // pass 2: backwards, 1/d_k = iv·pre_k, iv = iv·d_k
            for (size_t g = G; g-- > 0;) {
                mul(t, iv, pre8[g]);
                mul(iv, iv, d8[g]);
                pre8[g] = t;
            }
            // pass 3: λ = (y2 - y1)/d, x3 = λ² - x1 - x2, y3 = λ(x1 - x3) - y1, all on lanes; the
            // results go straight to their slots (padding lanes to a sink)
            const F* p3[8];
            const F* p4[8];
            F* ox[8];
            F* oy[8];
            A sink;
            for (size_t g = 0; g < G; g++) {
                for (int l = 0; l < 8; l++) {
                    const A* e = buf + pair_of(g, l);
                    p1[l] = &e[0].x;
                    p2[l] = &e[1].x;
                    p3[l] = &e[0].y;
                    p4[l] = &e[1].y;
                }
                L x1, x2, y1, lam, x3;
                pack(x1, p1);
                pack(x2, p2);
                pack(y1, p3);
                pack(t, p4);
                sub(t, t, y1);
                mul(lam, t, pre8[g]);
                sqr(t, lam);
                sub(t, t, x1);
                sub(x3, t, x2);
                sub(t, x1, x3);
                mul(t, lam, t);
                sub(t, t, y1);
                canon(x3);
                canon(t);
                const size_t real = std::min<size_t>(8, nn - 8 * g);
                for (size_t l = 0; l < 8; l++) {
                    A* o = l < real ? buf + pout[nrm[8 * g + l]] : &sink;
                    ox[l] = &o->x;
                    oy[l] = &o->y;
                }
                unpack(ox, x3);
                unpack(oy, t);
            }
        }
        for (size_t i = 0; i < ns; i++) buf[pout[spc[i]]] = side[i];
    }
#endif

    // Sum the remaining lists of `active` buckets in XYZZ, then back to affine (one inversion).
    void finish(A* buf, const uint32_t* start, uint32_t* len, const std::vector<uint32_t>& active) {
        size_t m = active.size();
        fin.resize(m);
        fin_z.resize(m);
        fin_s.resize(m);
        F acc = F::one();
        for (size_t i = 0; i < m; i++) {
            uint32_t b = active[i];
            const A* e = buf + start[b];
            typename P::X s = P::from_affine(e[0]);
            for (uint32_t k = 1; k < len[b]; k++) s = P::madd(s, e[k]);
            fin[i] = s;
            if (!s.ZZ.is_zero()) {
                F z = O::mul(s.ZZ, s.ZZZ);
                fin_z[i] = z;
                fin_s[i] = acc;
                acc = O::mul(acc, z);
            }
        }
        F iv = O::inv(acc);
        for (size_t i = m; i-- > 0;) {
            uint32_t b = active[i];
            len[b] = 1;
            const typename P::X& s = fin[i];
            if (s.ZZ.is_zero()) { buf[start[b]] = A::infinity(); continue; }
            F zi = O::mul(iv, fin_s[i]);  /* 1/(ZZ·ZZZ) */
            iv = O::mul(iv, fin_z[i]);
            buf[start[b]] = A{O::mul(s.X, O::mul(zi, s.ZZZ)), O::mul(s.Y, O::mul(zi, s.ZZ))};
        }
    }

    // Reduce the lists of the buckets in `active` (each len ≥ 2). With keep_small, stop as soon as
    // a round would have fewer than `small` pairs and leave those lists (batch_add carries them
    // over); otherwise finish them in XYZZ so every list ends with one element.
    void reduce(A* buf, const uint32_t* start, uint32_t* len, std::vector<uint32_t>& active, bool keep_small) {
        while (!active.empty()) {
            size_t pairs = 0;
            for (uint32_t b : active) pairs += len[b] >> 1;
            if (pairs < small) {
                if (!keep_small) finish(buf, start, len, active);
                return;
            }
            size_t k = 0;
            for (uint32_t b : active) {
                uint32_t off = len[b] & 1, np = len[b] >> 1, s = start[b] + off;
                for (uint32_t p = 0; p < np; p++) {
                    pin[k] = s + 2 * p;
                    pout[k] = s + p;
                    if (++k == batch) { flush(buf, k); k = 0; }
                }
            }
            if (k) flush(buf, k);
            next_active.clear();
            for (uint32_t b : active) {
                len[b] = (len[b] & 1) + (len[b] >> 1);
                if (len[b] >= 2) next_active.push_back(b);
            }
            active.swap(next_active);
        }
    }
};

#if CUZK_MSM_IFMA
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512ifma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512ifma")  /* = CUZK_IFMA_TARGET (pragmas do not expand macros) */
#endif
// ============================================================================
// Running-sum reduction on 8 IFMA lanes: a bucket range is cut into 8 consecutive sub-ranges
// that run their sums in lockstep, in XYZZ (madd-2008-s, add-2008-s as above). Infinity is
// tracked per lane with masks; a lane meeting P = 0 (equal x: a doubling or a cancellation,
// practically never for random points) sends that step of all lanes to the scalar formulas.
// ============================================================================
template <class C>
struct lane_sums {
    typedef typename C::field_t F;
    typedef affine_t<C> A;
    typedef pt<C, ops_adx> P;
    typedef typename P::X X;
    typedef typename ifma::lanes_of<F>::type L;
    struct X8 { L X, Y, ZZ, ZZZ; };

    static void blend(X8& r, __mmask8 m, const X8& b) {
        ifma::blend(r.X, m, b.X); ifma::blend(r.Y, m, b.Y);
        ifma::blend(r.ZZ, m, b.ZZ); ifma::blend(r.ZZZ, m, b.ZZZ);
    }
    static void to_scalar(X* out, const X8& v, __mmask8 inf) {
        alignas(64) F t[8];
        F* pt8[8];
        for (int l = 0; l < 8; l++) pt8[l] = &t[l];
        const L* c[4] = {&v.X, &v.Y, &v.ZZ, &v.ZZZ};
        for (int k = 0; k < 4; k++) {
            L u = *c[k];
            ifma::canon(u);
            ifma::unpack(pt8, u);
            for (int l = 0; l < 8; l++) (&out[l].X)[k] = t[l];
        }
        for (int l = 0; l < 8; l++)
            if ((inf >> l) & 1) out[l] = P::inf();
    }
    static void from_scalar(X8& v, __mmask8& inf, const X* in) {
        const F* p[8];
        for (int k = 0; k < 4; k++) {
            for (int l = 0; l < 8; l++) p[l] = &(&in[l].X)[k];
            ifma::pack(k == 0 ? v.X : k == 1 ? v.Y : k == 2 ? v.ZZ : v.ZZZ, p);
        }
        inf = 0;
        for (int l = 0; l < 8; l++)
            if (in[l].ZZ.is_zero()) inf |= (__mmask8)(1u << l);
    }

    // p += (qx, qy) where q is not infinity on lanes outside qinf; false: a lane hit P = 0
    static bool madd(X8& p, __mmask8& pinf, const L& qx, const L& qy, __mmask8 qinf, const L& one) {
        using namespace ifma;
        const __mmask8 act = (__mmask8)(~qinf & ~pinf);
        L Pp, R, t;
        mul(t, qx, p.ZZ); sub(Pp, t, p.X);
        mul(t, qy, p.ZZZ); sub(R, t, p.Y);
        if (act & is_zero(Pp)) return false;
        X8 r;
        L PP, PPP, Q;
        sqr(PP, Pp); mul(PPP, Pp, PP); mul(Q, p.X, PP);
        sqr(t, R); sub(t, t, PPP); sub(t, t, Q); sub(r.X, t, Q);   /* X3 = R^2 - PPP - 2Q */
        sub(t, Q, r.X); mul(t, R, t); mul(Q, p.Y, PPP); sub(r.Y, t, Q);
        mul(r.ZZ, p.ZZ, PP);
        mul(r.ZZZ, p.ZZZ, PPP);
        blend(p, act, r);
        const __mmask8 fresh = (__mmask8)(pinf & ~qinf);  // run was infinity: becomes q
        X8 q{qx, qy, one, one};
        blend(p, fresh, q);
        pinf &= qinf;
        return true;
    }
    // p += q (both XYZZ lanes)
    static bool add(X8& p, __mmask8& pinf, const X8& q, __mmask8 qinf) {
        using namespace ifma;
        const __mmask8 act = (__mmask8)(~qinf & ~pinf);
        L U1, U2, S1, S2, Pp, R, t;
        mul(U1, p.X, q.ZZ); mul(U2, q.X, p.ZZ);
        mul(S1, p.Y, q.ZZZ); mul(S2, q.Y, p.ZZZ);
        sub(Pp, U2, U1); sub(R, S2, S1);
        if (act & is_zero(Pp)) return false;
        X8 r;
        L PP, PPP, Q;
        sqr(PP, Pp); mul(PPP, Pp, PP); mul(Q, U1, PP);
        sqr(t, R); sub(t, t, PPP); sub(t, t, Q); sub(r.X, t, Q);
        sub(t, Q, r.X); mul(t, R, t); mul(Q, S1, PPP); sub(r.Y, t, Q);
        mul(t, p.ZZ, q.ZZ); mul(r.ZZ, t, PP);
        mul(t, p.ZZZ, q.ZZZ); mul(r.ZZZ, t, PPP);
        blend(p, act, r);
        blend(p, (__mmask8)(pinf & ~qinf), q);
        pinf &= qinf;
        return true;
    }

    // T = Σ_j (j+1)·B_j and S = Σ_j B_j over the nb buckets ac[0..nb) (nb ≥ 8)
    static void run(const A* ac, uint32_t nb, X& T, X& S) {
        const uint32_t m = (nb + 7) / 8;
        static const A inf_pt = A::infinity();
        alignas(64) F one_s[8];
        const F* po[8];
        for (int l = 0; l < 8; l++) { one_s[l] = F::one(); po[l] = &one_s[l]; }
        L one;
        ifma::pack(one, po);
        X8 run{}, tot{};
        __mmask8 rinf = 0xFF, tinf = 0xFF;
        const F* px[8];
        const F* py[8];
        for (uint32_t s = m; s-- > 0;) {
            __mmask8 qinf = 0;
            for (int l = 0; l < 8; l++) {
                uint32_t j = l * m + s;
                const A* q = j < nb ? ac + j : &inf_pt;
                if (q->is_inf()) qinf |= (__mmask8)(1u << l);
                px[l] = &q->x;
                py[l] = &q->y;
            }
            if (qinf != 0xFF) {
                L qx, qy;
                ifma::pack(qx, px);
                ifma::pack(qy, py);
                if (!madd(run, rinf, qx, qy, qinf, one)) {
                    X r8[8];
                    to_scalar(r8, run, rinf);
                    for (int l = 0; l < 8; l++) {
                        uint32_t j = l * m + s;
                        if (j < nb) r8[l] = P::madd(r8[l], ac[j]);
                    }
                    from_scalar(run, rinf, r8);
                }
            }
            if (rinf != 0xFF && !add(tot, tinf, run, rinf)) {
                X t8[8], r8[8];
                to_scalar(t8, tot, tinf);
                to_scalar(r8, run, rinf);
                for (int l = 0; l < 8; l++) t8[l] = P::add(t8[l], r8[l]);
                from_scalar(tot, tinf, t8);
            }
        }
        // lane l covers buckets [l·m, l·m + m): T = Σ_l (T_l + l·m·S_l), S = Σ_l S_l
        X t8[8], s8[8];
        to_scalar(t8, tot, tinf);
        to_scalar(s8, run, rinf);
        X acc = P::inf(), lsum = P::inf();
        T = P::inf();
        for (int l = 7; l >= 1; l--) {  // Σ_l l·S_l by running sums
            acc = P::add(acc, s8[l]);
            lsum = P::add(lsum, acc);
        }
        S = P::add(acc, s8[0]);
        for (int l = 0; l < 8; l++) T = P::add(T, t8[l]);
        T = P::add(T, P::mul_small(lsum, m));
    }
};
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif

// ============================================================================
// Planning
// ============================================================================
struct plan_t {
    unsigned c, windows, ranges;
    size_t block, batch, small;
};

// Relative costs (G1 and G2 scale alike): a batch-affine bucket addition 6.5 (5M + 1S plus its
// share of the inversions), a bucket of the running-sum reduction 13 (XYZZ mixed add + XYZZ add,
// 24 M, but sequential and cache-resident: measured ≈ 2× a bucket addition, not 3.7×).
inline unsigned choose_window(size_t n_full, size_t n_one) {
    if (n_full + n_one == 0) return 1;
    double best = 0;
    unsigned bc = 1;
    for (unsigned c = 1; c <= 20; c++) {  // c ≤ 20: buckets (W·2^(c-1) points) stay ≤ 650 MiB for G1
        unsigned w = (256 + c - 1) / c;
        double cost = (double)w * ((double)n_full * 6.5 + (double)(1u << (c - 1)) * 13.0) +
                      (double)n_one * 6.5 + (n_one ? 13.0 : 0.0);
        if (c == 1 || cost < best) { best = cost; bc = c; }
    }
    return bc;
}

inline plan_t make_plan(size_t n_full, size_t n_one, size_t threads, const msm_config& cfg) {
    plan_t p;
    p.c = cfg.window ? std::min(cfg.window, 24u) : choose_window(n_full, n_one);
    p.windows = (256 + p.c - 1) / p.c;
    if (cfg.ranges) p.ranges = cfg.ranges;
    else {
        // enough (window, range) tasks for longest-first scheduling to balance `threads` workers
        size_t want = threads > 1 ? 8 * threads : 1;
        p.ranges = (unsigned)std::max<size_t>(1, (want + p.windows - 1) / p.windows);
        while (p.ranges > 1 && (size_t(1) << (p.c - 1)) / p.ranges < 64) p.ranges--;
    }
    // digits of one block: windows × block × 4 bytes ≤ 256 MiB
    p.block = cfg.block ? cfg.block : std::max<size_t>(size_t(1) << 16, (size_t(64) << 20) / p.windows);
    p.batch = cfg.batch ? cfg.batch : 2048;
    p.small = cfg.small ? cfg.small : 32;
    return p;
}

// c consecutive bits of a 256-bit little-endian scalar from bit `off` (off < 256, c ≤ 24)
static CUZK_INLINE uint64_t scalar_bits(const uint64_t* s, unsigned off, unsigned c) {
    unsigned li = off >> 6, sh = off & 63;
    uint64_t v = s[li] >> sh;
    if (sh + c > 64 && li < 3) v |= s[li + 1] << (64 - sh);
    return v & ((uint64_t(1) << c) - 1);
}

static CUZK_INLINE bool scalar_is_zero(const uint64_t* s) { return (s[0] | s[1] | s[2] | s[3]) == 0; }
static CUZK_INLINE bool scalar_is_one(const uint64_t* s) { return s[0] == 1 && (s[1] | s[2] | s[3]) == 0; }

// Run fn(task, worker) for tasks 0..ntasks-1 on `threads` workers (worker < min(threads,
// ntasks)) pulling in order; the first exception stops the rest and is rethrown on the caller's
// thread.  (The shared pool's par_for, parallel.hpp.)
template <class Fn>
inline void run_tasks(size_t ntasks, size_t threads, Fn&& fn) {
    par_for(ntasks, threads, fn);
}

// Per-worker scratch of the MSM.
template <class C, class O>
struct msm_worker {
    typedef affine_t<C> A;
    tree_t<C, O> tree;
    std::vector<A> buf;
    std::vector<uint32_t> start, len, cnt, fill, sorted;
    std::vector<uint32_t> active;
    msm_worker(size_t batch, size_t small, bool simd) : tree(batch, small, simd) {}
};

// The MSM engine. get(i) returns the i-th point (affine, by reference).
template <class C, class O, class Get>
affine_t<C> msm_engine(Get get, const uint64_t* scalars, size_t n, size_t threads, const msm_config& cfg) {
    typedef affine_t<C> A;
    typedef pt<C, O> P;
    typedef typename P::X X;
    threads = resolve_threads(threads);
    if (n == 0) return A::infinity();

    // ---- census: zero / one / other scalars (points at infinity count as zero)
    size_t nchunks = std::min<size_t>(threads * 4, std::max<size_t>(1, n / 4096));
    std::vector<size_t> c_one(nchunks, 0), c_full(nchunks, 0);
    run_tasks(nchunks, threads, [&](size_t t, size_t) {
        size_t b = n * t / nchunks, e = n * (t + 1) / nchunks, one = 0, full = 0;
        for (size_t i = b; i < e; i++) {
            const uint64_t* s = scalars + 4 * i;
            if (scalar_is_zero(s)) continue;
            if (scalar_is_one(s)) one++;
            else full++;
        }
        c_one[t] = one;
        c_full[t] = full;
    });
    size_t n_one = 0, n_full = 0;
    for (size_t t = 0; t < nchunks; t++) { n_one += c_one[t]; n_full += c_full[t]; }
    if (n_one + n_full == 0) return A::infinity();

    // a worker per ~2^14 bucket additions at most (~1 ms): thread start-up would dominate below
    {
        unsigned c0 = cfg.window ? std::min(cfg.window, 24u) : choose_window(n_full, n_one);
        size_t work = n_full * ((256 + c0 - 1) / c0) + n_one;
        threads = std::min(threads, 1 + work / 16384);
    }
    const plan_t pl = make_plan(n_full, n_one, threads, cfg);
    const unsigned c = pl.c, W = pl.windows, R = pl.ranges;
    const uint64_t half = uint64_t(1) << (c - 1);

    // buckets per window: the top window only sees the remaining bits plus a carry
    std::vector<uint32_t> nbw(W);
    for (unsigned w = 0; w < W; w++) {
        unsigned bits = std::min<unsigned>(c, 255 - std::min<unsigned>(255, w * c));
        nbw[w] = (uint32_t)std::min<uint64_t>(half, uint64_t(1) << bits);
    }
    // tasks (window, range): bucket range [b0, b1) of window w
    struct task_t { unsigned w; uint32_t b0, b1; size_t acc_off; uint64_t est; };
    std::vector<task_t> tasks;
    size_t acc_total = 0;
    for (unsigned w = 0; w < W; w++) {
        unsigned rr = std::min<uint32_t>(R, nbw[w]);
        for (unsigned r = 0; r < rr; r++) {
            uint32_t b0 = (uint32_t)((uint64_t)nbw[w] * r / rr), b1 = (uint32_t)((uint64_t)nbw[w] * (r + 1) / rr);
            if (b1 > b0) { tasks.push_back({w, b0, b1, acc_total, 0}); acc_total += b1 - b0; }
        }
    }
    // per-task accumulators, persistent across point blocks; each task sets its own to infinity
    // (in parallel: first touch)
    std::unique_ptr<A[]> acc(new A[acc_total]);
    std::vector<size_t> order(tasks.size());

    const size_t block = std::min(std::min(n, pl.block), size_t(1) << 30);  // 2·i + sign fits 32 bits
    std::unique_ptr<uint32_t[]> digits(new uint32_t[(size_t)W * block]);  // recoding writes all
    std::vector<std::vector<uint64_t>> wcount(threads, std::vector<uint64_t>(W));
    std::vector<std::unique_ptr<msm_worker<C, O>>> workers(threads);

    // points sorted per accumulation pass (4 bytes each; one pass per block unless capped), and
    // list elements per cache-resident group (~768 KiB of points: L2 on Zen 4 and Sapphire Rapids)
    const size_t s_cap = cfg.scratch ? cfg.scratch : block;
    const size_t g_cap = cfg.group ? cfg.group : std::max<size_t>(64, (size_t(768) << 10) / sizeof(A));

    for (size_t blk0 = 0; blk0 < n; blk0 += block) {
        const size_t bn = std::min(block, n - blk0);
        // ---- recode: digit code e = 2|d| + (d < 0), 0 for d = 0
        for (auto& v : wcount) std::fill(v.begin(), v.end(), 0);
        size_t rchunks = std::min<size_t>(threads * 4, std::max<size_t>(1, bn / 2048));
        run_tasks(rchunks, threads, [&](size_t t, size_t worker) {
            size_t b = bn * t / rchunks, e = bn * (t + 1) / rchunks;
            uint64_t* cnt = wcount[worker].data();
            for (size_t i = b; i < e; i++) {
                const uint64_t* s = scalars + 4 * (blk0 + i);
                if (scalar_is_zero(s) || get(blk0 + i).is_inf()) {
                    for (unsigned w = 0; w < W; w++) digits[(size_t)w * bn + i] = 0;
                    continue;
                }
                uint64_t carry = 0;
                for (unsigned w = 0; w < W; w++) {
                    uint64_t v = (w * c < 256 ? scalar_bits(s, w * c, std::min(c, 256 - w * c)) : 0) + carry;
                    uint32_t code;
                    if (v > half) {  // d = v - 2^c < 0 (0 when v = 2^c)
                        uint64_t mag = (uint64_t(1) << c) - v;
                        carry = 1;
                        code = mag ? (uint32_t)(mag << 1) | 1 : 0;
                    } else {
                        carry = 0;
                        code = (uint32_t)(v << 1);
                    }
                    digits[(size_t)w * bn + i] = code;
                    cnt[w] += code != 0;
                }
            }
        });
        std::vector<uint64_t> wn(W, 0);
        for (auto& v : wcount) for (unsigned w = 0; w < W; w++) wn[w] += v[w];
        for (auto& t : tasks) t.est = wn[t.w] * (t.b1 - t.b0) / nbw[t.w] + (t.b1 - t.b0) / 8;
        for (size_t i = 0; i < order.size(); i++) order[i] = i;
        std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return tasks[a].est > tasks[b].est; });

        // ---- accumulate: each task merges this block's points into its bucket accumulators
        run_tasks(tasks.size(), threads, [&](size_t ti, size_t worker) {
            const task_t& T = tasks[order[ti]];
            A* ac = acc.get() + T.acc_off;
            if (blk0 == 0) std::fill(ac, ac + (T.b1 - T.b0), A::infinity());
            if (wn[T.w] == 0) return;
            if (!workers[worker]) workers[worker].reset(new msm_worker<C, O>(pl.batch, pl.small, !cfg.no_simd));
            msm_worker<C, O>& wk = *workers[worker];
            const uint32_t nb = T.b1 - T.b0;
            const uint32_t* dg = digits.get() + (size_t)T.w * bn;
            const uint32_t lo = 2 * (T.b0 + 1), hi = 2 * (T.b1 + 1);  // codes of this range: [lo, hi)
            wk.start.resize(nb);
            wk.len.resize(nb);
            wk.cnt.resize(nb + 1);
            size_t pos = 0;
            while (pos < bn) {
                // pass 1: histogram of (up to s_cap) points of this range
                std::fill(wk.cnt.begin(), wk.cnt.end(), 0);
                size_t taken = 0, end = pos;
                for (; end < bn && taken < s_cap; end++) {
                    uint32_t e = dg[end];
                    if (e >= lo && e < hi) { wk.cnt[(e >> 1) - T.b0]++; taken++; }
                }
                if (taken == 0) break;
                // pass 2: counting sort of 2·i + sign by bucket; bucket b owns sorted[cnt[b], cnt[b+1])
                for (uint32_t b = 0; b < nb; b++) wk.cnt[b + 1] += wk.cnt[b];
                wk.fill.assign(wk.cnt.begin(), wk.cnt.end() - 1);
                wk.sorted.resize(taken);
                uint32_t* srt = wk.sorted.data();
                for (size_t i = pos; i < end; i++) {
                    uint32_t e = dg[i];
                    if (e >= lo && e < hi) srt[wk.fill[(e >> 1) - 1 - T.b0]++] = (uint32_t)(i << 1) | (e & 1);
                }
                // bucket groups of about g_cap list elements (accumulator, then ±points): each group is
                // gathered and reduced while it sits in L2
                for (uint32_t g0 = 0, g1; g0 < nb; g0 = g1) {
                    size_t tot = 0;
                    for (g1 = g0; g1 < nb; g1++) {
                        size_t l = (wk.cnt[g1 + 1] - wk.cnt[g1]) + !ac[g1].is_inf();
                        if (g1 > g0 && tot + l > g_cap) break;
                        tot += l;
                    }
                    if (tot == 0) continue;
                    if (wk.buf.size() < tot) wk.buf.resize(tot);
                    A* buf = wk.buf.data();
                    const uint32_t qend = wk.cnt[g1];
                    uint32_t off = 0;
                    wk.active.clear();
                    for (uint32_t b = g0; b < g1; b++) {
                        const uint32_t k = b - g0;
                        wk.start[k] = off;
                        if (!ac[b].is_inf()) buf[off++] = ac[b];
                        for (uint32_t q = wk.cnt[b]; q < wk.cnt[b + 1]; q++) {
                            if (q + 16 < qend) {  // both cache lines of a point 16 ahead
                                const char* f = reinterpret_cast<const char*>(&get(blk0 + (srt[q + 16] >> 1)));
                                __builtin_prefetch(f);
                                __builtin_prefetch(f + sizeof(A) - 1);
                            }
                            const A& p = get(blk0 + (srt[q] >> 1));
                            if (srt[q] & 1) buf[off++] = P::neg(p);
                            else buf[off++] = p;
                        }
                        wk.len[k] = off - wk.start[k];
                        if (wk.len[k] >= 2) wk.active.push_back(k);
                    }
                    wk.tree.reduce(buf, wk.start.data(), wk.len.data(), wk.active, false);
                    for (uint32_t b = g0; b < g1; b++)
                        if (wk.len[b - g0]) ac[b] = buf[wk.start[b - g0]];
                }
                pos = end;
            }
        });
    }
    workers.clear();
    digits.reset();

    // ---- reduce every range by running sums: T = Σ_j (j+1)·B_j, S = Σ_j B_j (j local);
    // the range contributes T + b0·S (bucket b holds digit value b+1)
    std::vector<X> part(tasks.size());
    run_tasks(tasks.size(), threads, [&](size_t ti, size_t) {
        const task_t& T = tasks[ti];
        const A* ac = acc.get() + T.acc_off;
        const uint32_t nb = T.b1 - T.b0;
        X run = P::inf(), tot = P::inf();
#if CUZK_MSM_IFMA
        if constexpr (tree_t<C, O>::simd_capable()) {
            if (!cfg.no_simd && nb >= 64 && cpu_has_ifma()) {
                lane_sums<C>::run(ac, nb, tot, run);
                part[ti] = P::add(tot, P::mul_small(run, T.b0));
                return;
            }
        }
#endif
        for (uint32_t j = nb; j-- > 0;) {
            run = P::madd(run, ac[j]);
            tot = P::add(tot, run);
        }
        part[ti] = P::add(tot, P::mul_small(run, T.b0));
    });
    // ---- combine windows (Horner): Σ_w 2^(c·w)·window_w
    std::vector<X> win(W, P::inf());
    for (size_t ti = 0; ti < tasks.size(); ti++) win[tasks[ti].w] = P::add(win[tasks[ti].w], part[ti]);
    X r = win[W - 1];
    for (unsigned w = W - 1; w-- > 0;) {
        for (unsigned k = 0; k < c; k++) r = P::dbl(r);
        r = P::add(r, win[w]);
    }
    return P::to_affine(r);
}

// The i-th point of an MSM: points[i], points[idx64[i]] or points[idx32[i]] (one engine serves
// all three; the branches are perfectly predicted and the points are read once per window).
template <class C>
struct get_point {
    const affine_t<C>* p;
    const uint64_t* idx64;
    const uint32_t* idx32;
    CUZK_INLINE const affine_t<C>& operator()(size_t i) const {
        return idx64 ? p[idx64[i]] : idx32 ? p[idx32[i]] : p[i];
    }
};

// ============================================================================
// Batch addition over a bitmap
// ============================================================================
template <class C, class O>
affine_t<C> batch_add_engine(const affine_t<C>* pts, size_t n, const uint64_t* bits, size_t threads,
                             const msm_config& cfg) {
    typedef affine_t<C> A;
    typedef pt<C, O> P;
    typedef typename P::X X;
    threads = resolve_threads(threads);
    const size_t nwords = (n + 63) / 64;
    if (nwords == 0) return A::infinity();
    const size_t batch = cfg.batch ? cfg.batch : 2048, small = cfg.small ? cfg.small : 32;
    // chunks of words claimed dynamically; one chunk's points (≤ ~768 KiB) stay in L2 while reduced
    const size_t cw_max = std::max<size_t>(1, (cfg.group ? cfg.group : (size_t(768) << 10) / sizeof(A)) / 64);
    const size_t cw = std::max<size_t>(1, std::min<size_t>(cw_max, nwords / (threads * 4) + 1));
    const size_t nchunks = (nwords + cw - 1) / cw;
    struct wstate {
        std::vector<A> buf;
        uint32_t carry = 0;
        X sum;
    };
    std::vector<std::unique_ptr<wstate>> ws(threads);
    std::vector<std::unique_ptr<tree_t<C, O>>> trees(threads);
    run_tasks(nchunks, threads, [&](size_t t, size_t worker) {
        if (!ws[worker]) {
            ws[worker].reset(new wstate());
            ws[worker]->sum = P::inf();
            trees[worker].reset(new tree_t<C, O>(batch, small, !cfg.no_simd));
        }
        wstate& s = *ws[worker];
        size_t w0 = t * cw, w1 = std::min(nwords, w0 + cw);
        if (s.buf.size() < s.carry + (w1 - w0) * 64) s.buf.resize(s.carry + (w1 - w0) * 64);
        A* buf = s.buf.data();
        uint32_t k = s.carry;
        for (size_t w = w0; w < w1; w++) {
            uint64_t m = bits[w];
            if (w == nwords - 1 && (n & 63)) m &= (uint64_t(1) << (n & 63)) - 1;
            while (m) {
                size_t i = w * 64 + __builtin_ctzll(m);
                m &= m - 1;
                if (!pts[i].is_inf()) buf[k++] = pts[i];
            }
        }
        uint32_t start = 0, len = k;
        std::vector<uint32_t> active;
        if (len >= 2) active.push_back(0);
        trees[worker]->reduce(buf, &start, &len, active, true);
        s.carry = len;
    });
    X total = P::inf();
    for (size_t w = 0; w < threads; w++) {
        if (!ws[w]) continue;
        X s = P::inf();
        for (uint32_t k = 0; k < ws[w]->carry; k++) s = P::madd(s, ws[w]->buf[k]);
        total = P::add(total, s);
    }
    return P::to_affine(total);
}

}  // namespace msm_detail

// ============================================================================
// Public API
// ============================================================================

// Σ scalars_i · points_i. points: n affine Montgomery points (infinity = all-zero);
// scalars: n × 4 canonical little-endian u64, each < 2^255. threads 0 = all cores.
template <class C>
inline affine_t<C> msm(const affine_t<C>* points, const uint64_t* scalars, size_t n, size_t threads,
                       const msm_config& cfg = msm_config()) {
    msm_detail::get_point<C> g{points, nullptr, nullptr};
    if (!cfg.portable && msm_detail::cpu_has_adx())
        return msm_detail::msm_engine<C, msm_detail::ops_adx>(g, scalars, n, threads, cfg);
    return msm_detail::msm_engine<C, msm_detail::ops_ref>(g, scalars, n, threads, cfg);
}

// Σ scalars_i · base[idx_i] for i < m; exactly one of idx64 / idx32 is non-null and every index
// must be valid for base.
template <class C>
inline affine_t<C> msm_indexed(const affine_t<C>* base, const uint64_t* scalars, const uint64_t* idx64,
                               const uint32_t* idx32, size_t m, size_t threads,
                               const msm_config& cfg = msm_config()) {
    msm_detail::get_point<C> g{base, idx64, idx32};
    if (!cfg.portable && msm_detail::cpu_has_adx())
        return msm_detail::msm_engine<C, msm_detail::ops_adx>(g, scalars, m, threads, cfg);
    return msm_detail::msm_engine<C, msm_detail::ops_ref>(g, scalars, m, threads, cfg);
}

// Σ points_i over the i < n whose bit (bitmap[i / 64] >> (i % 64)) & 1 is set; bits ≥ n ignored.
template <class C>
inline affine_t<C> batch_add(const affine_t<C>* points, size_t n, const uint64_t* bitmap, size_t threads,
                             const msm_config& cfg = msm_config()) {
    if (!cfg.portable && msm_detail::cpu_has_adx())
        return msm_detail::batch_add_engine<C, msm_detail::ops_adx>(points, n, bitmap, threads, cfg);
    return msm_detail::batch_add_engine<C, msm_detail::ops_ref>(points, n, bitmap, threads, cfg);
}

}  // namespace cuzk

// ============================================================================
// Flat entry points over raw u64 arrays (for Cython). group: 1 = G1 (points 12 u64, out 12),
// 2 = G2 (points 24 u64, out 24). Exactly one of idx64 / idx32 is non-null in msm_indexed_u64.
// ============================================================================
namespace cuzk {

inline void msm_u64(int group, uint64_t* out, const uint64_t* points, const uint64_t* scalars, size_t n,
                    size_t threads, const msm_config& cfg) {
    if (group == 1) {
        g1_affine_t r = msm<g1_curve>(reinterpret_cast<const g1_affine_t*>(points), scalars, n, threads, cfg);
        std::memcpy(out, &r, sizeof(r));
    } else {
        g2_affine_t r = msm<g2_curve>(reinterpret_cast<const g2_affine_t*>(points), scalars, n, threads, cfg);
        std::memcpy(out, &r, sizeof(r));
    }
}

inline void msm_indexed_u64(int group, uint64_t* out, const uint64_t* base, const uint64_t* scalars,
                            const uint64_t* idx64, const uint32_t* idx32, size_t m, size_t threads,
                            const msm_config& cfg) {
    if (group == 1) {
        g1_affine_t r = msm_indexed<g1_curve>(reinterpret_cast<const g1_affine_t*>(base), scalars, idx64, idx32,
                                              m, threads, cfg);
        std::memcpy(out, &r, sizeof(r));
    } else {
        g2_affine_t r = msm_indexed<g2_curve>(reinterpret_cast<const g2_affine_t*>(base), scalars, idx64, idx32,
                                              m, threads, cfg);
        std::memcpy(out, &r, sizeof(r));
    }
}

inline void batch_add_u64(int group, uint64_t* out, const uint64_t* points, size_t n, const uint64_t* bitmap,
                          size_t threads, const msm_config& cfg) {
    if (group == 1) {
        g1_affine_t r = batch_add<g1_curve>(reinterpret_cast<const g1_affine_t*>(points), n, bitmap, threads, cfg);
        std::memcpy(out, &r, sizeof(r));
    } else {
        g2_affine_t r = batch_add<g2_curve>(reinterpret_cast<const g2_affine_t*>(points), n, bitmap, threads, cfg);
        std::memcpy(out, &r, sizeof(r));
    }
}

}  // namespace cuzk

// ============================================================================
// CPU features. msm_compiled_isa: the ISA extensions this translation unit was compiled to
// assume everywhere (bit 0 BMI2, 1 ADX, 2 AVX2, 3 AVX512F, 4 AVX512IFMA; 0 for a portable build,
// which runs on any x86-64). msm_runtime_isa: the MSM paths the running CPU takes (bit 0 mulx/adx,
// bit 1 AVX-512 IFMA lanes, bit 2 the lane code is compiled in).
// ============================================================================
namespace cuzk {

inline unsigned msm_compiled_isa() {
    unsigned m = 0;
#if defined(__BMI2__)
    m |= 1u;
#endif
#if defined(__ADX__)
    m |= 2u;
#endif
#if defined(__AVX2__)
    m |= 4u;
#endif
#if defined(__AVX512F__)
    m |= 8u;
#endif
#if defined(__AVX512IFMA__)
    m |= 16u;
#endif
    return m;
}

inline unsigned msm_runtime_isa() {
    return (msm_detail::cpu_has_adx() ? 1u : 0u) | (msm_detail::cpu_has_ifma() ? 2u : 0u) |
           (CUZK_MSM_IFMA ? 4u : 0u);
}

}  // namespace cuzk
