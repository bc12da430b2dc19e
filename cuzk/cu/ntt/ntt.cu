// Program "ntt": NTT passes over BLS12-381 Fr and their twiddle tables.
// Driven by cuzk/_cuda_ntt.py; the mathematics is in ntt/ntt.cuh.
//
// Kernels (all state comes in through arguments; nothing is kept in globals):
//   cuzk_ntt_pass             one pass over bits [lo, lo+S) with tiles of 2^LC
//                             sub-problems (S + LC <= 11).
//   cuzk_ntt_pass_deep        the same on deep tables (F_DEEP).
//   cuzk_ntt_gen_zetas        heap-ordered twiddle table of one transform kind (or its levels
//                             above the deep ones).
//   cuzk_h_odd_gather         snarkjs's H scalars from A, B, C on the coset w_2n (gather).
//   cuzk_fr_bitrev            in-place bit-reversal permutation.
//   cuzk_fr_mul/add/sub       elementwise Fr arithmetic (tests, small jobs, the 3-buffer H).
#include "ntt/ntt.cuh"

using cuzk::fr_t;

// One pass over bits [lo, lo+S) with tiles of 2^LC sub-problems (S + LC <= 11):
// grid = n / 2^(S+LC) blocks of max(1, 2^(S+LC-3)) threads, dynamic shared memory
// 2^(S+LC) * 32 bytes (64 KiB for 2^11 tiles).  The bound (256 threads, 2 blocks) caps
// registers at 128: two 2^11 tiles or four 2^10 tiles per SM.  See ntt/ntt.cuh.
// CUZK_NTT_MAX_THREADS / CUZK_NTT_MIN_BLOCKS: development knobs (occupancy experiments;
// a smaller MAX_THREADS needs CUZK_NTT_TILE_LOG <= 3 + log2 of it).
#ifndef CUZK_NTT_MIN_BLOCKS
#define CUZK_NTT_MIN_BLOCKS 2
#endif
#ifndef CUZK_NTT_MAX_THREADS
#define CUZK_NTT_MAX_THREADS 256
#endif
extern "C" __global__ void __launch_bounds__(CUZK_NTT_MAX_THREADS, CUZK_NTT_MIN_BLOCKS)
cuzk_ntt_pass(fr_t* d_out, const fr_t* d_in, const fr_t* d_in_b, const fr_t* d_in_c,
              const fr_t* d_zinv, const fr_t* d_zfwd, const fr_t* d_k, uint32_t lg_n, uint32_t lo,
              uint32_t S, uint32_t LC, uint32_t flags)
{
    cuzk::ntt::run_pass<false>(d_out, d_in, d_in_b, d_in_c, d_zinv, d_zfwd, d_k, lg_n, lo, S, LC, flags);
}

// The same pass on deep tables (F_DEEP; ntt.cuh deep_base), as its own kernel.
extern "C" __global__ void __launch_bounds__(CUZK_NTT_MAX_THREADS, CUZK_NTT_MIN_BLOCKS)
cuzk_ntt_pass_deep(fr_t* d_out, const fr_t* d_in, const fr_t* d_in_b, const fr_t* d_in_c,
                   const fr_t* d_zinv, const fr_t* d_zfwd, const fr_t* d_k, uint32_t lg_n,
                   uint32_t lo, uint32_t S, uint32_t LC, uint32_t flags)
{
    cuzk::ntt::run_pass<true>(d_out, d_in, d_in_b, d_in_c, d_zinv, d_zfwd, d_k, lg_n, lo, S, LC, flags);
}

// Z[2^l + j] = w^(bitrev_l(j) * 2^(lg_n-1-l)) * level[l]  (level omitted when null),
// Z[0] = 1, for a root w of order n = 2^lg_n given as w^e = pow_lo[e mod 2^lg_lo] *
// pow_hi[e >> lg_lo] (e < n/2).  Forward plain: w = w_n, level = null; forward coset:
// level[l] = g^(2^(lg_n-1-l)); inverse: w = w_n^-1 and level = g^-(2^(lg_n-1-l)).
// Entries h < count (<= n; a deep table, F_DEEP in ntt.cuh: n/8, its tail written by the host).
// 1-2 Fr multiplications per entry; grid-stride.
extern "C" __global__ void cuzk_ntt_gen_zetas(fr_t* d_z, uint32_t lg_n, const fr_t* d_pow_lo,
                                              const fr_t* d_pow_hi, uint32_t lg_lo,
                                              const fr_t* d_level, uint32_t count)
{
    using namespace cuzk::ntt;
    for (uint32_t h = blockIdx.x * blockDim.x + threadIdx.x; h < count; h += gridDim.x * blockDim.x) {
        if (h == 0) {
            store_fr(d_z, fr_t::one());
            continue;
        }
        int l = 31 - __clz(h);
        uint32_t j = h - (1u << l);
        uint32_t e = brev_bits(j, l) << (lg_n - 1 - l);
        fr_t z = load_fr(d_pow_lo + (e & ((1u << lg_lo) - 1))) * load_fr(d_pow_hi + (e >> lg_lo));
        if (d_level) z = z * load_fr(d_level + l);
        store_fr(d_z + h, z);
    }
}

// snarkjs's H MSM scalars (cuzk/_snarkjs_prover.py): d_a, d_b, d_c hold n·A, n·B, n·C at
// the points w_2n^(2k+1), k < n, in bit-reversed order (position brev(k); the unscaled
// inverse passes leave the factor n); out[j] is (A·B − C) at k = (J·(2j+1) mod 2n − 1)/2,
// canonical (not Montgomery), for j < n: (a·b·K[2] − c)·K[4], K[2] = 1/n and K[4] = 1/n as
// a raw value (cuzk._cuda_ntt.h_consts).  J_mod_2n = J mod 2n, J odd; lg_n < 32.
extern "C" __global__ void cuzk_h_odd_gather(fr_t* d_out, const fr_t* d_a, const fr_t* d_b,
                                             const fr_t* d_c, const fr_t* d_k, uint32_t lg_n,
                                             uint64_t J_mod_2n)
{
    using namespace cuzk::ntt;
    const uint64_t n = 1ull << lg_n, mask2 = 2 * n - 1;
    const fr_t ninv = load_fr_ro(d_k + 2), ninv_raw = load_fr_ro(d_k + 4);
    for (uint64_t j = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; j < n;
         j += (uint64_t)gridDim.x * blockDim.x) {
        const uint32_t k = (uint32_t)(((J_mod_2n * (2 * j + 1)) & mask2) >> 1);
        const uint32_t p = brev_bits(k, (int)lg_n);
        const fr_t v = load_fr(d_a + p) * load_fr(d_b + p) * ninv - load_fr(d_c + p);
        store_fr(d_out + j, v * ninv_raw);
    }
}

// d[0..2^lg_n) permuted in place into bit-reversed order: the pair (i, bitrev(i)) swapped by
// the thread of i < bitrev(i) (lg_n < 32).  The H stage in three buffers (cuzk._cuda_ntt
// h_passes_abc) uses it where the transforms' gathers would need a fourth.
extern "C" __global__ void cuzk_fr_bitrev(fr_t* d, uint32_t lg_n)
{
    using namespace cuzk::ntt;
    const uint64_t n = 1ull << lg_n;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        const uint32_t j = brev_bits((uint32_t)i, (int)lg_n);
        if (i < j) {
            const fr_t x = load_fr(d + i), y = load_fr(d + j);
            store_fr(d + i, y);
            store_fr(d + j, x);
        }
    }
}

// d_out[i] = d_a[i] op d_b[i] for i < n (Montgomery form in and out).
#define CUZK_FR_BINOP(NAME, EXPR)                                                          \
    extern "C" __global__ void NAME(fr_t* d_out, const fr_t* d_a, const fr_t* d_b, uint64_t n) \
    {                                                                                      \
        using namespace cuzk::ntt;                                                         \
        for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;          \
             i += (uint64_t)gridDim.x * blockDim.x) {                                      \
            fr_t a = load_fr(d_a + i), b = load_fr(d_b + i);                               \
            store_fr(d_out + i, EXPR);                                                     \
        }                                                                                  \
    }
CUZK_FR_BINOP(cuzk_fr_mul, a * b)
CUZK_FR_BINOP(cuzk_fr_add, a + b)
CUZK_FR_BINOP(cuzk_fr_sub, a - b)
