// Program "msm": G1 multi-scalar multiplication Σ k_i·P_i (bucket method), driven by
// cuzk/_cuda_msm.py.  All state comes in through arguments; nothing is kept in globals.
//
// Scalars: canonical, 8 x 32-bit limbs (the CPU's 4 x 64-bit little-endian), < 2^255.
// Window w (w < W) holds bits [w·c, w·c + c) of every scalar: an unsigned digit d.  Bucket
// (w, d) is B[w·2^c + d] = Σ of the points whose digit in window w is d (d = 0 is skipped).
//   1. cuzk_msm_count     histogram of the buckets (atomic counters)
//      cuzk_msm_scan      their exclusive prefix sum (offsets) and a copy (cursors)
//   2. cuzk_msm_scatter   point indices sorted by bucket (a counting sort; the order inside
//                         a bucket depends on the atomics, the bucket sums do not)
//   3. cuzk_msm_buckets   one thread per bucket: XYZZ sum of its points (mixed additions)
//   4. cuzk_msm_windows   P blocks per window: Σ_d d·B(w, d) over their digits by running
//                         sums over segments, one segment per thread, then a tree in
//                         shared memory
// A bucket is summed by one thread, so the windows must spread the points evenly: the
// host picks c so that the top window (bits c·(W−1) .. 254) is (nearly) as wide as the
// others — a 3-bit top window would put n/8 points into each of its buckets.
// The host sums the W·P partial window sums by Horner's rule (255 doublings: a latency
// chain that one CPU core runs faster than one GPU thread) and converts to affine.
#include "ec/g1.cuh"

using cuzk::affine_g1_t;
using cuzk::xyzz_g1_t;

namespace {

// Digit of window w of scalar i (c <= 16; bits at or above 256 read as 0).
CUZK_DEVICE uint32_t msm_digit(const uint32_t* __restrict__ s, uint32_t w, uint32_t c)
{
    const uint32_t bit = w * c, limb = bit >> 5, sh = bit & 31u;
    if (limb >= 8) return 0;
    uint64_t v = s[limb];
    if (limb + 1 < 8) v |= (uint64_t)s[limb + 1] << 32;
    return (uint32_t)(v >> sh) & ((1u << c) - 1u);
}

CUZK_DEVICE affine_g1_t load_affine(const affine_g1_t* p)
{
    const uint4* q = reinterpret_cast<const uint4*>(p);
    affine_g1_t r;
    uint4 v[6];
#pragma unroll
    for (int k = 0; k < 6; k++) v[k] = q[k];
#pragma unroll
    for (int k = 0; k < 3; k++) {
        r.x.l[4 * k] = v[k].x; r.x.l[4 * k + 1] = v[k].y; r.x.l[4 * k + 2] = v[k].z; r.x.l[4 * k + 3] = v[k].w;
        r.y.l[4 * k] = v[k + 3].x; r.y.l[4 * k + 1] = v[k + 3].y; r.y.l[4 * k + 2] = v[k + 3].z;
        r.y.l[4 * k + 3] = v[k + 3].w;
    }
    return r;
}

}  // namespace

// counts[w·2^c + d] += 1 for every point i < n and window w < W with digit d != 0.
extern "C" __global__ void cuzk_msm_count(uint32_t* counts, const uint32_t* scalars, uint32_t n,
                                          uint32_t c, uint32_t W)
{
    const uint64_t total = (uint64_t)n * W;
    for (uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (uint64_t)gridDim.x * blockDim.x) {
        const uint32_t i = (uint32_t)(t / W), w = (uint32_t)(t % W);
        const uint32_t d = msm_digit(scalars + 8 * (uint64_t)i, w, c);
        if (d) atomicAdd(counts + ((uint64_t)w << c) + d, 1u);
    }
}

// sorted[cursor[b]++] = i for every (i, w) with digit d != 0, b = w·2^c + d; cursor starts as
// the exclusive prefix sum of counts.
extern "C" __global__ void cuzk_msm_scatter(uint32_t* sorted, uint32_t* cursor, const uint32_t* scalars,
                                            uint32_t n, uint32_t c, uint32_t W)
{
    const uint64_t total = (uint64_t)n * W;
    for (uint64_t t = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total;
         t += (uint64_t)gridDim.x * blockDim.x) {
        const uint32_t i = (uint32_t)(t / W), w = (uint32_t)(t % W);
        const uint32_t d = msm_digit(scalars + 8 * (uint64_t)i, w, c);
        if (d) sorted[atomicAdd(cursor + ((uint64_t)w << c) + d, 1u)] = i;
    }
}

// buckets[b] = Σ points[base(sorted[j])], offsets[b] <= j < offsets[b + 1], for b < nb, where
// base(i) = idx[i] (an indexed MSM: scalar i multiplies point idx[i]) or i when idx is null.
extern "C" __global__ void cuzk_msm_buckets(xyzz_g1_t* buckets, const uint32_t* offsets,
                                            const uint32_t* sorted, const affine_g1_t* points,
                                            const uint32_t* idx, uint32_t nb)
{
    for (uint32_t b = blockIdx.x * blockDim.x + threadIdx.x; b < nb; b += gridDim.x * blockDim.x) {
        xyzz_g1_t acc = xyzz_g1_t::infinity();
        const uint32_t end = offsets[b + 1];
        for (uint32_t j = offsets[b]; j < end; j++) {
            const uint32_t i = sorted[j];
            acc = acc.add(load_affine(points + (idx ? idx[i] : i)));
        }
        buckets[b] = acc;
    }
}

// Partial window sums: block (w, p) = (blockIdx.x / P, blockIdx.x % P) writes
// sums[blockIdx.x] = Σ_d d·buckets[w·2^c + d] over its digits [p·2^c/P, (p + 1)·2^c/P).
// blockDim.x = segments per block (a power of two; P·blockDim.x divides 2^c); thread t takes
// L = 2^c / (P·blockDim.x) digits from lo: with running sums from the top, R = Σ B_d and
// S = Σ (d − lo)·B_d, so its share is S + lo·R; then a tree in shared memory.  Dynamic shared
// memory: blockDim.x XYZZ points.
extern "C" __global__ void cuzk_msm_windows(xyzz_g1_t* sums, const xyzz_g1_t* buckets, uint32_t c,
                                            uint32_t P)
{
    CUZK_DYN_SMEM(xyzz_g1_t, part);
    const uint32_t w = blockIdx.x / P, p = blockIdx.x % P;
    const uint32_t t = threadIdx.x, L = (1u << c) / (P * blockDim.x);
    const uint32_t lo = (p * blockDim.x + t) * L;
    const xyzz_g1_t* B = buckets + ((uint64_t)w << c);
    xyzz_g1_t R = xyzz_g1_t::infinity(), S = xyzz_g1_t::infinity();
    for (uint32_t d = lo + L - 1; d > lo; d--) {
        R = R.add(B[d]);
        S = S.add(R);
    }
    R = R.add(B[lo]);
    part[t] = lo ? S.add(R.mul_u32(lo)) : S;
    __syncthreads();
    for (uint32_t half = blockDim.x >> 1; half; half >>= 1) {
        if (t < half) part[t] = part[t].add(part[t + half]);
        __syncthreads();
    }
    if (t == 0) sums[blockIdx.x] = part[0];
}

// offsets[i] = Σ_{j<i} counts[j] for i <= nb and cursor[i] = offsets[i] for i < nb: one block;
// thread t scans its chunk [t·K, (t + 1)·K), K = ceil(nb / blockDim.x), after thread 0 has
// scanned the chunk totals.  Dynamic shared memory: blockDim.x words.
extern "C" __global__ void cuzk_msm_scan(uint32_t* offsets, uint32_t* cursor, const uint32_t* counts,
                                         uint32_t nb)
{
    CUZK_DYN_SMEM(uint32_t, chunk);  // (extern shared arrays of one program share a symbol: distinct names)
    const uint32_t t = threadIdx.x, K = (nb + blockDim.x - 1) / blockDim.x;
    const uint32_t b = t * K < nb ? t * K : nb, e = b + K < nb ? b + K : nb;
    uint32_t sum = 0;
    for (uint32_t i = b; i < e; i++) sum += counts[i];
    chunk[t] = sum;
    __syncthreads();
    if (t == 0) {
        uint32_t run = 0;
        for (uint32_t k = 0; k < blockDim.x; k++) {
            const uint32_t v = chunk[k];
            chunk[k] = run;
            run += v;
        }
        offsets[nb] = run;
    }
    __syncthreads();
    uint32_t run = chunk[t];
    for (uint32_t i = b; i < e; i++) {
        offsets[i] = run;
        cursor[i] = run;
        run += counts[i];
    }
}
