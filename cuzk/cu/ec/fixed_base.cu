// Program "fixed_base": out[i] = k_i·G for one fixed base G, G1 and G2 (parameter generation;
// driven by cuzk/_cuda_fixed_base.py).  Output: affine Montgomery points in the CPU's layout
// (k_i = 0: all-zero), the bytes of cuzk._native._r1cs.fixed_base_mul.
//
// Signed fixed windows of w bits (2 <= w <= 16), the CPU's recoding (cuzk/r1cs.hpp
// fixed_base_t): k = Σ_t d_t·2^(w·t), d_t ∈ [−2^(w−1)+1, 2^(w−1)], K = ⌈256/w⌉ windows (k < 2^255
// leaves the top window room for the last carry).  d_table holds j·2^(w·t)·G, j = 1..2^(w−1), as
// affine points, row t = window t (K·2^(w−1) points, built once by the host), so a
// multiplication is <= K mixed additions (madd-2008-s, 8M + 2S) and no doubling.
//
// To affine: Montgomery's trick over each thread's points (i = g, g + G·T, g + 2·G·T, ...):
// pass 1 computes every point, keeps X, Y in d_out and (ZZ, ZZZ, prefix product of ZZ·ZZZ) in
// d_tmp; one inversion per thread (Fermat, a^(p−2): 380 S + ~190 M; Fq2 through the norm);
// pass 2 walks back: 3M per point for the inverse, 4M for x = X·ZZZ·inv, y = Y·ZZ·inv.  Per
// point: K·10 + 8 Fq products (G1, w = 16: 168) + 570 / (points per thread).
#include "ec/xyzz_t.cuh"

namespace {

using cuzk::affine_t;
using cuzk::fq2_t;
using cuzk::fq_t;
using cuzk::fr_t;
using cuzk::xyzz_t;

using cuzk::inverse;   // ff/fq2_t.cuh

// Signed digit t of canonical k (8 x 32-bit limbs, bits >= 256 read as 0), consuming and
// producing the carry (the CPU's fixed_base_t::digit).
CUZK_DEVICE int32_t fb_digit(const uint32_t* k, uint32_t t, uint32_t w, uint32_t& carry)
{
    const uint32_t bit = t * w, limb = bit >> 5, sh = bit & 31u;
    uint64_t v = limb < 8 ? k[limb] : 0;
    if (limb + 1 < 8) v |= (uint64_t)k[limb + 1] << 32;
    uint32_t d = (uint32_t)(v >> sh) & ((1u << w) - 1u);
    d += carry;
    if (d > (1u << (w - 1))) {
        carry = 1;
        return (int32_t)d - (int32_t)(1u << w);
    }
    carry = 0;
    return (int32_t)d;
}

template <class F>
CUZK_DEVICE void fixed_base_body(affine_t<F>* __restrict__ d_out, F* __restrict__ d_tmp,
                                 const affine_t<F>* __restrict__ d_table, const uint32_t* __restrict__ d_k,
                                 uint64_t n, uint32_t w, uint32_t mont)
{
    typedef xyzz_t<F> X;
    typedef affine_t<F> A;
    const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    const uint64_t g = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const uint32_t K = (256u + w - 1) / w, half = 1u << (w - 1);

    // pass 1: the points, X‖Y into d_out, (ZZ, ZZZ, prefix) into d_tmp
    F acc = F::one();
    for (uint64_t i = g; i < n; i += stride) {
        fr_t s;
#pragma unroll
        for (int j = 0; j < 8; j++) s.l[j] = d_k[8 * i + j];
        if (mont) s = s.from_mont();
        uint32_t carry = 0;
        X p = X::infinity();
        for (uint32_t t = 0; t < K; t++) {
            const int32_t d = fb_digit(s.l, t, w, carry);
            if (d == 0) continue;
            const A T = A::load(d_table + (uint64_t)t * half + (uint32_t)(d > 0 ? d : -d) - 1);
            p = p.add(d > 0 ? T : T.neg());
        }
        A xy;
        xy.x = p.X;
        xy.y = p.Y;
        xy.store(d_out + i);
        F* tmp = d_tmp + 3 * i;
        tmp[0] = p.ZZ;
        tmp[1] = p.ZZZ;
        tmp[2] = acc;                                   /* prefix: Π of the earlier ZZ·ZZZ */
        if (!p.is_inf()) acc = acc * (p.ZZ * p.ZZZ);
    }
    if (g >= n) return;

    // one inversion, then pass 2 backwards
    F inv = inverse(acc);                             /* inv = (Π ZZ·ZZZ)^−1 */
    const uint64_t cnt = (n - 1 - g) / stride + 1;
    for (uint64_t j = cnt; j-- > 0;) {
        const uint64_t i = g + j * stride;
        const F* tmp = d_tmp + 3 * i;
        const F ZZ = tmp[0], ZZZ = tmp[1];
        A r = A::load(d_out + i);
        if (ZZ.is_zero()) {
            r = A::infinity();
        } else {
            const F di = inv * tmp[2];                  /* (ZZ·ZZZ)^−1 of this point */
            inv = inv * (ZZ * ZZZ);                     /* drop it from the running inverse */
            r.x = r.x * (di * ZZZ);                     /* x = X/ZZ = X·ZZZ·(ZZ·ZZZ)^−1 */
            r.y = r.y * (di * ZZ);                      /* y = Y/ZZZ = Y·ZZ·(ZZ·ZZZ)^−1 */
        }
        r.store(d_out + i);
    }
}

}  // namespace

// d_out[i] = k_i·G (i < n), affine; k_i = d_k[8i .. 8i + 8) (canonical, or Montgomery Fr when
// mont != 0), < 2^255; d_table: ⌈256/w⌉·2^(w−1) affine points (see above); d_tmp: 3n field
// elements of scratch.
extern "C" __global__ void __launch_bounds__(128)
cuzk_fixed_base_g1(cuzk::g1_affine_t* d_out, fq_t* d_tmp, const cuzk::g1_affine_t* d_table,
                   const uint32_t* d_k, uint64_t n, uint32_t w, uint32_t mont)
{
    fixed_base_body(d_out, d_tmp, d_table, d_k, n, w, mont);
}

extern "C" __global__ void __launch_bounds__(128)
cuzk_fixed_base_g2(cuzk::g2_affine_t* d_out, fq2_t* d_tmp, const cuzk::g2_affine_t* d_table,
                   const uint32_t* d_k, uint64_t n, uint32_t w, uint32_t mont)
{
    fixed_base_body(d_out, d_tmp, d_table, d_k, n, w, mont);
}
