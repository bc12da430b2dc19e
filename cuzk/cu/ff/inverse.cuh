// 1/a in a prime field mont_t<P> on the GPU: Bernstein–Yang "safegcd" divsteps in batches of 30.
// Montgomery in and out (a·R ↦ a^−1·R), 0 ↦ 0 (callers use it for the point at infinity).
// Inputs must be fully reduced (< p), as every mont_t value is.
//
// Algorithm: Bernstein–Yang divsteps (D. J. Bernstein, B.-Y. Yang, "Fast constant-time gcd
// computation and modular inversion", TCHES 2019, §§ 8–11), started at δ = 1/2 (P. Wuille's
// "hddivsteps", github.com/sipa/safegcd-bounds: a ~20% lower proven bound than from δ = 1).  divstep(δ, f, g),
// f odd:
//     (1 − δ, g, (g − f)/2)          if δ > 0 and g odd
//     (1 + δ, f, (g + (g mod 2)·f)/2) otherwise
// from (δ, f, g) = (1/2, p, x); the code keeps the integer eta = −δ − 1/2 (δ > 0 ⟺ eta < 0; a
// swap makes eta' = −eta − 2, any other step eta' = eta − 1).  Once g = 0, f = ±gcd(p, x) = ±1
// for x ≠ 0.  The divsteps of a batch read only δ and the low bits of f and g (step i needs bit 0
// of g_i, which depends on the low i + 1 bits of f_0, g_0), so a batch of 30 runs on the low
// 32-bit words (divsteps30) and returns its transition matrix M = [u v; q r] with
// 2^30·(f', g') = M·(f, g) exactly; |u| + |v| ≤ 2^30 and |q| + |r| ≤ 2^30 (each step doubles one
// row and adds the rows, so a row's L1 norm at most doubles): the entries fit an int32.  The
// batch then applies M to the full values: f, g signed (two's complement, N limbs; |f|, |g|
// never exceed p, since max(|f|, |g|) does not grow under divsteps) and d, e with
// f ≡ d·x/c, g ≡ e·x/c (mod p), updated as (d', e') = M·(d, e)/2^30 mod p by a 30-bit Montgomery
// reduction (add k·p, k = −D·p^−1 mod 2^30, shift).  Starting from d = 0, e = c = R^2 mod p, the
// end gives d = ±c/x = ±R/a for x = a·R, i.e. the Montgomery form of a^−1 with no extra
// product; its sign is f's.  x = 0 leaves g = 0 from the start: d = 0, so inverse(0) = 0.
//
// Bound.  For 0 ≤ g ≤ f ≤ 2^b, f odd and 4096·n ≥ 9437·b + 1, n divsteps from δ = 1/2 reach g = 0
// (theorem DIVSTEP_ENDTOEND_BITS_SIMPLE, HOL Light Divstep/divstep_bounds.ml: J. Harrison's
// formal proof over D. J. Bernstein's hull-light-20230416 certificate; Wuille's hull computations
// give the same ~2.30 steps per bit and 590 for b = 256).  With f = p < 2^(32N)
// and 0 ≤ g = x < p, b = 32N: Fq (N = 12) 885 divsteps = 30 batches of 30, Fr (N = 8) 590 → 20.
// The loop runs at most that many batches and leaves early once g = 0 (variable time: GPU MSM
// data is public; a thread that finishes early idles until the slowest lane of its warp is done).
// Random Fq inputs need ~769 divsteps, the slowest of 32 lanes ~779 (26 batches, often 27).
//
// Divergence: the 30 inner steps are straight-line mask arithmetic (no branches); batches have
// one uniform shape; the only per-thread branch is the early exit between batches.
//
// Cost, Fq (an estimate, not a timing: static SASS counts from NVRTC 13.5 for sm_90 read with
// nvdisasm, December 2026).  A batch is ~1470 instructions: ~790 for the 30 divsteps (~26 a
// step: masks, two words of f/g, four matrix entries) and ~680 for the f, g, d, e updates
// (4 + 4 int32 × 12-limb rows, 2 Montgomery k·p rows, operand negations/selects, shifts,
// reduce_once); of these ~540 go to the IMAD pipe and ~920 to the integer ALU pipe.  An Fq
// product is ~370 instructions, 276 of them IMAD.WIDE (two IMAD-pipe passes each): ~590
// IMAD-pipe slots (ff/mont_t.cuh).  So a batch is ~1.6 products where the pipes overlap (ALU-bound,
// 920 slots) and ~4 by plain instruction count: 26 batches (typical warp) ≈ 40–105 product
// equivalents, 30 (bound) ≈ 47–120, against Fermat's a^(p−2) = 381 squarings + ~190 products ≈
// 570: ~5–12× less work.  inverse_fermat keeps the old square-and-multiply as a reference.
#pragma once
#include "ff/mont_t.cuh"

namespace cuzk {

namespace safegcd {

constexpr int STEPS = 30;  // divsteps per batch: matrix entries ≤ 2^30 in magnitude fit an int32
// Divsteps from δ = 1/2 that suffice for 0 ≤ g ≤ f < 2^(32N) (⌈(9437·b + 1)/4096⌉, b = 32N; see
// the header), and the batches of STEPS that cover them.
__host__ __device__ constexpr int divsteps_bound(int N) { return (9437 * 32 * N + 1 + 4095) / 4096; }
__host__ __device__ constexpr int batches(int N) { return (divsteps_bound(N) + STEPS - 1) / STEPS; }
static_assert(divsteps_bound(8) == 590 && batches(8) == 20, "Fr: 590 divsteps, 20 batches");
static_assert(divsteps_bound(12) == 885 && batches(12) == 30, "Fq: 885 divsteps, 30 batches");

struct matrix_t {
    int32_t u, v, q, r;  // 2^30·(f', g') = (u·f + v·g, q·f + r·g)
};

// STEPS divsteps on the low words of f and g; eta = −δ − 1/2 is updated.  Rows (u, v) and (q, r) are
// kept in the doubled form 2^i·(f_i, g_i) = M_i·(f_0, g_0) so they stay integers; a swap takes
// row f ← 2·row g, row g ← row g − row f; an odd g without swap row g ← row g + row f,
// row f ← 2·row f; an even g only doubles row f.  All in uint32 (no signed overflow: |entries|
// ≤ 2^30); f, g words lose one exact top bit per step (32 − 30 ≥ 1 bit left for the last test).
CUZK_DEVICE matrix_t divsteps30(int32_t& eta, uint32_t f, uint32_t g)
{
    uint32_t u = 1, v = 0, q = 0, r = 1;
    uint32_t et = (uint32_t)eta;
#pragma unroll
    for (int i = 0; i < STEPS; i++) {
        const uint32_t odd = 0u - (g & 1u);                       /* g odd: all ones */
        const uint32_t swap = (uint32_t)((int32_t)et >> 31) & odd; /* δ > 0 (eta < 0) and g odd */
        et = (et ^ swap) - 1u;       /* δ' = 1 − δ on a swap: eta' = ~eta − 1; else 1 + δ: eta − 1 */
        const uint32_t xf = (f ^ swap) - swap;                    /* −f on a swap, else f */
        const uint32_t gn = (g + (xf & odd)) >> 1;                /* (g − f)/2, (g + f)/2, g/2 */
        f ^= (f ^ g) & swap;                                      /* f' = g on a swap */
        g = gn;
        const uint32_t xu = (u ^ swap) - swap, xv = (v ^ swap) - swap;
        const uint32_t su = u ^ ((u ^ q) & swap), sv = v ^ ((v ^ r) & swap);  /* row f or row g */
        q += xu & odd;                                            /* row g ± row f */
        r += xv & odd;
        u = su << 1;                                              /* 2·(selected row) */
        v = sv << 1;
    }
    eta = (int32_t)et;
    return matrix_t{(int32_t)u, (int32_t)v, (int32_t)q, (int32_t)r};
}

// acc[0..N] = m·x (N + 1 limbs, exact for x < 2^(32N)).
template <int N>
CUZK_DEVICE void mul_set(uint32_t* acc, const uint32_t* x, uint32_t m)
{
#pragma unroll
    for (int i = 0; i < N; i++) acc[i] = cc::mul_lo(x[i], m);
    acc[1] = cc::mad_hi_cc(x[0], m, acc[1]);
#pragma unroll
    for (int i = 2; i < N; i++) acc[i] = cc::madc_hi_cc(x[i - 1], m, acc[i]);
    acc[N] = cc::madc_hi(x[N - 1], m, 0u);
}
// acc[0..N] += m·x mod 2^(32(N+1)).
template <int N>
CUZK_DEVICE void mul_acc(uint32_t* acc, const uint32_t* x, uint32_t m)
{
    acc[0] = cc::mad_lo_cc(x[0], m, acc[0]);
#pragma unroll
    for (int i = 1; i < N; i++) acc[i] = cc::madc_lo_cc(x[i], m, acc[i]);
    acc[N] = cc::addc(acc[N], 0u);
    acc[1] = cc::mad_hi_cc(x[0], m, acc[1]);
#pragma unroll
    for (int i = 2; i < N; i++) acc[i] = cc::madc_hi_cc(x[i - 1], m, acc[i]);
    acc[N] = cc::madc_hi(x[N - 1], m, acc[N]);
}
// out[0..N−1] = acc >> 30 (the low 30 bits of acc are zero; the quotient fits N limbs).
template <int N>
CUZK_DEVICE void shr30(uint32_t* out, const uint32_t* acc)
{
#pragma unroll
    for (int i = 0; i < N; i++) out[i] = (acc[i] >> 30) | (acc[i + 1] << 2);
}

// (f, g) ← M·(f, g)/2^30, f and g signed N-limb two's complement.  A product m·x is computed as
// |m|·(±x): the unsigned row gives |m|·X for the limbs X of ±x, and a negative ±x (X − 2^(32N))
// takes |m| off limb N.
template <int N>
CUZK_DEVICE void update_fg(uint32_t* f, uint32_t* g, const matrix_t& M)
{
    uint32_t nf[N], ng[N];
    nf[0] = cc::sub_cc(0u, f[0]);
#pragma unroll
    for (int i = 1; i < N; i++) nf[i] = cc::subc_cc(0u, f[i]);
    ng[0] = cc::sub_cc(0u, g[0]);
#pragma unroll
    for (int i = 1; i < N; i++) ng[i] = cc::subc_cc(0u, g[i]);

    auto row = [&](uint32_t* out, int32_t a, int32_t b) {
        uint32_t acc[N + 1], x[N];
        const uint32_t ma = (uint32_t)(a >> 31), mb = (uint32_t)(b >> 31);
        const uint32_t aa = ((uint32_t)a ^ ma) - ma, ab = ((uint32_t)b ^ mb) - mb; /* |a|, |b| */
#pragma unroll
        for (int i = 0; i < N; i++) x[i] = ma ? nf[i] : f[i];          /* sign(a)·f */
        mul_set<N>(acc, x, aa);
        uint32_t corr = aa & (uint32_t)((int32_t)x[N - 1] >> 31);
#pragma unroll
        for (int i = 0; i < N; i++) x[i] = mb ? ng[i] : g[i];          /* sign(b)·g */
        mul_acc<N>(acc, x, ab);
        corr += ab & (uint32_t)((int32_t)x[N - 1] >> 31);
        acc[N] -= corr;                                                /* negative operands */
        shr30<N>(out, acc);
    };
    uint32_t f2[N];
    row(f2, M.u, M.v);
    row(g, M.q, M.r);
#pragma unroll
    for (int i = 0; i < N; i++) f[i] = f2[i];
}

// (d, e) ← M·(d, e)/2^30 mod p, d and e in [0, p).  m·y ≡ |m|·(p − y) for m < 0, so the sum
// D = |a|·ỹ + |b|·z̃ (ỹ, z̃ in [0, p]) is ≥ 0 and ≤ 2^30·p; k = −D·p^−1 mod 2^30 makes D + k·p
// a multiple of 2^30 below 2^31·p, and (D + k·p)/2^30 < 2p is reduced once.
template <class Pm>
CUZK_DEVICE void update_de(uint32_t* d, uint32_t* e, const matrix_t& M)
{
    constexpr int N = mont_t<Pm>::N;
    uint32_t nd[N], ne[N], pm[N];
#pragma unroll
    for (int i = 0; i < N; i++) pm[i] = Pm::mod(i);
    nd[0] = cc::sub_cc(pm[0], d[0]);
#pragma unroll
    for (int i = 1; i < N; i++) nd[i] = cc::subc_cc(pm[i], d[i]);
    ne[0] = cc::sub_cc(pm[0], e[0]);
#pragma unroll
    for (int i = 1; i < N; i++) ne[i] = cc::subc_cc(pm[i], e[i]);

    auto row = [&](uint32_t* out, int32_t a, int32_t b) {
        uint32_t acc[N + 1], x[N];
        const uint32_t ma = (uint32_t)(a >> 31), mb = (uint32_t)(b >> 31);
        const uint32_t aa = ((uint32_t)a ^ ma) - ma, ab = ((uint32_t)b ^ mb) - mb;
#pragma unroll
        for (int i = 0; i < N; i++) x[i] = ma ? nd[i] : d[i];
        mul_set<N>(acc, x, aa);
#pragma unroll
        for (int i = 0; i < N; i++) x[i] = mb ? ne[i] : e[i];
        mul_acc<N>(acc, x, ab);
        const uint32_t k = (acc[0] * Pm::M0) & ((1u << STEPS) - 1u);  /* −D·p^−1 mod 2^30 */
        mul_acc<N>(acc, pm, k);
        uint32_t t[N];
        shr30<N>(t, acc);
        const mont_t<Pm> r = mont_t<Pm>::reduce_once(t);
#pragma unroll
        for (int i = 0; i < N; i++) out[i] = r.l[i];
    };
    uint32_t d2[N];
    row(d2, M.u, M.v);
    row(e, M.q, M.r);
#pragma unroll
    for (int i = 0; i < N; i++) d[i] = d2[i];
}

}  // namespace safegcd

// 1/a by Bernstein–Yang divsteps from δ = 1/2 (see the header): Montgomery in and out, 0 ↦ 0, at
// most safegcd::batches(N) batches of 30 divsteps, fewer when g reaches 0 earlier (variable time).
template <class Pm>
CUZK_DEVICE mont_t<Pm> inverse_safegcd(const mont_t<Pm>& a)
{
    constexpr int N = mont_t<Pm>::N;
    uint32_t f[N], g[N], d[N], e[N];
#pragma unroll
    for (int i = 0; i < N; i++) {
        f[i] = Pm::mod(i);
        g[i] = a.l[i];
        d[i] = 0;
        e[i] = Pm::rr(i);  /* c = R^2 mod p: d ends as ±R^2/(a·R) = ±a^−1·R */
    }
    int32_t eta = -1;      /* δ = 1/2 */
    constexpr int NB = safegcd::batches(N);
    for (int b = 0; b < NB; b++) {
        uint32_t nz = 0;
#pragma unroll
        for (int i = 0; i < N; i++) nz |= g[i];
        if (nz == 0) break;  /* done: later divsteps would leave f and d as they are */
        const safegcd::matrix_t M = safegcd::divsteps30(eta, f[0], g[0]);
        safegcd::update_fg<N>(f, g, M);
        safegcd::update_de<Pm>(d, e, M);
    }
    mont_t<Pm> r;
#pragma unroll
    for (int i = 0; i < N; i++) r.l[i] = d[i];
    return (f[N - 1] >> 31) ? -r : r;  /* f = ±1 */
}

// 1/a by Fermat, a^(p−2) (0 ↦ 0): square and multiply over the bits of p − 2, MSB first
// (~N·32 squarings + half as many products).  Kept as the slow reference.  p − 2 is taken with
// its borrow (Fr's low limb is 1).
template <class Pm>
CUZK_DEVICE mont_t<Pm> inverse_fermat(const mont_t<Pm>& a)
{
    constexpr int N = mont_t<Pm>::N;
    uint32_t pm2[N], borrow = 2;                               // p − 2: p is odd and > 2
#pragma unroll
    for (int i = 0; i < N; i++) {
        pm2[i] = Pm::mod(i) - borrow;
        borrow = Pm::mod(i) < borrow ? 1u : 0u;
    }
    mont_t<Pm> r = mont_t<Pm>::one();
    for (int i = N - 1; i >= 0; i--) {
        const uint32_t e = pm2[i];
        for (int k = 31; k >= 0; k--) {
            r = r.sqr();
            if ((e >> k) & 1u) r = r * a;
        }
    }
    return r;
}

// The field inversion of the GPU code (every mont_t field: the bound above holds for any odd
// modulus below 2^(32N)).
template <class Pm>
CUZK_DEVICE mont_t<Pm> inverse(const mont_t<Pm>& a)
{
    return inverse_safegcd(a);
}

}  // namespace cuzk
