// Program "batch_add": Σ points[i] over the set bits i of a bitmap, G1 and G2 (driven by
// cuzk/_cuda_batch.py).  The prover's "scalar is 1" sums for L, A, B_G1 (G1) and B_G2 (G2).
//
// Bitmap: the CPU's cuzk._native._msm.batch_add semantics: bit i of word i / 64 (LSB first)
// selects point i, i < n.  Bits at positions >= n are ignored here (the front end rejects them,
// as the CPU does).  Points: affine Montgomery, all-zero rows = infinity (they add nothing).
//
// Work split: thread g of the G·T threads walks the contiguous word range
// [g·K, min((g + 1)·K, ⌈n/64⌉)), K = ⌈⌈n/64⌉ / (G·T)⌉, with one XYZZ accumulator and a mixed
// addition per set bit (madd-2008-s; its loop runs over set bits, not words, so the lanes of a
// warp diverge only by their popcounts); then a tree over the block's T accumulators in
// shared memory; thread 0 writes the block's partial.  No state outlives the launch: the
// partials are the only output (d_part[blockIdx.x], G of them), summed by the host
// (cuzk._cuda_pending.PendingPoint: W = 1, P = G).
//
// Cost floor at 2^27 G1 points, 90 % of the bits set (issue 8's benchmark):
//   1.21e8 mixed additions x (8M + 2S = 10 Fq products) = 1.21e9 Fq products;
//   an Fq product is 12 rows x (4·12 + 1) ≈ 590 IMAD-class instructions (ff/mont_t.cuh; the
//   lo/hi pairs fuse into IMAD.WIDE, 2 issue slots each) ≈ 590 multiplier slots; the H200's
//   132 SMs x 64 slots/clk x ~1.75 GHz ≈ 1.5e13 slots/s → ≈ 48 ms of multiplier time;
//   reads: 2^27 x 96 bytes = 12.9 GB (at most: unset rows are skipped by the sector) + 16 MiB
//   of bitmap at ~4.5 TB/s ≈ 3 ms, hidden under the arithmetic.  So the kernel is compute
//   bound (sppark: 54.5 ms on the same device).  G2 (B_G2, 33.1 M points, 90 %): an Fq2 madd
//   is 8·3 + 2·2 = 28 Fq products → 8.3e8 products ≈ 32 ms.  All four PoRep queries (293 M G1
//   + 33 M G2 points) ≈ 105 + 32 ms in XYZZ: above the 120 ms goal; reaching it needs affine
//   additions with a shared inversion (Montgomery's trick, ~6M per addition), the next step.
#include "ec/xyzz_t.cuh"

namespace {

using cuzk::affine_t;
using cuzk::xyzz_t;

template <class F>
CUZK_DEVICE void batch_add_body(xyzz_t<F>* __restrict__ d_part, const affine_t<F>* __restrict__ d_points,
                                const uint64_t* __restrict__ d_bits, uint64_t n)
{
    typedef xyzz_t<F> X;
    CUZK_DYN_SMEM(uint4, batch_add_smem);
    X* part = reinterpret_cast<X*>(batch_add_smem);

    const uint64_t nw = (n + 63) >> 6;
    const uint64_t threads = (uint64_t)gridDim.x * blockDim.x;
    const uint64_t g = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const uint64_t K = (nw + threads - 1) / threads;
    uint64_t w = g * K;
    const uint64_t w_end = w + K < nw ? w + K : nw;
    const uint64_t last_mask = (n & 63) ? ((uint64_t)1 << (n & 63)) - 1 : ~(uint64_t)0;

    X acc = X::infinity();
    uint64_t bits = 0;
    if (w < w_end) bits = d_bits[w] & (w + 1 == nw ? last_mask : ~(uint64_t)0);
    while (w < w_end) {
        if (bits == 0) {
            if (++w >= w_end) break;
            bits = d_bits[w] & (w + 1 == nw ? last_mask : ~(uint64_t)0);
            continue;
        }
        const uint32_t i = (uint32_t)__ffsll((long long)bits) - 1;  // lowest set bit
        bits &= bits - 1;
        acc = acc.add(affine_t<F>::load(d_points + (w << 6) + i));
    }

    const uint32_t t = threadIdx.x;
    part[t] = acc;
    __syncthreads();
    for (uint32_t half = blockDim.x >> 1; half; half >>= 1) {  // blockDim.x: a power of two
        if (t < half) part[t] = part[t].add(part[t + half]);
        __syncthreads();
    }
    if (t == 0) d_part[blockIdx.x] = part[0];
}

}  // namespace

// d_part[b] (b < gridDim.x) = Σ of the points selected in block b's words (see above).
// blockDim.x a power of two <= 256 (G1) / 128 (G2); dynamic shared memory blockDim.x XYZZ points.
extern "C" __global__ void __launch_bounds__(256)
cuzk_batch_add_g1(cuzk::g1_xyzz_t* d_part, const cuzk::g1_affine_t* d_points, const uint64_t* d_bits,
                  uint64_t n)
{
    batch_add_body(d_part, d_points, d_bits, n);
}

extern "C" __global__ void __launch_bounds__(128)
cuzk_batch_add_g2(cuzk::g2_xyzz_t* d_part, const cuzk::g2_affine_t* d_points, const uint64_t* d_bits,
                  uint64_t n)
{
    batch_add_body(d_part, d_points, d_bits, n);
}
