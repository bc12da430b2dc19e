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
//   + 33 M G2 points) ≈ 105 + 32 ms in XYZZ (a 2^27 porep_like partition, ~45 % ones: 92 ms
//   measured, 85 with the affine kernel where default_kind picks it).
// The affine kernel below (batch_add_affine_body: ~6 products per addition and a shared
// inversion) measured 0.72–0.81× this one with 90 % of the bits set, 0.93–1.07× at 45 %
// (cuzk/_cuda_batch.py default_kind chooses).
#include "ec/batch_affine.cuh"

namespace {

using cuzk::affine_t;
using cuzk::xyzz_t;
using cuzk::LANE_ADD;
using cuzk::LANE_DBL;
using cuzk::LANE_EMPTY;

// The block's partial: the sum of its threads' accumulators (block_sum, ec/xyzz_t.cuh) into
// d_part[blockIdx.x]; dynamic shared memory of blockDim.x XYZZ points.
template <class F>
CUZK_DEVICE void block_partial(xyzz_t<F>* __restrict__ d_part, const xyzz_t<F>& acc)
{
    CUZK_DYN_SMEM(uint4, batch_add_smem);
    xyzz_t<F>* part = reinterpret_cast<xyzz_t<F>*>(batch_add_smem);
    block_sum(part, acc);
    if (threadIdx.x == 0) d_part[blockIdx.x] = part[0];
}

template <class F>
CUZK_DEVICE void batch_add_body(xyzz_t<F>* __restrict__ d_part, const affine_t<F>* __restrict__ d_points,
                                const uint64_t* __restrict__ d_bits, uint64_t n)
{
    typedef xyzz_t<F> X;
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

    block_partial(d_part, acc);
}

// Index of the r-th set bit (r = 0 for the lowest) of a word with more than r bits set: five
// halvings by popcount, then one bit.
CUZK_DEVICE uint32_t select_bit(uint64_t w, uint32_t r)
{
    uint32_t pos = 0;
    for (uint32_t width = 32; width >= 1; width >>= 1) {
        const uint32_t c = (uint32_t)__popc((unsigned)(w & ((((uint64_t)1) << width) - 1)));  // width <= 32
        if (r >= c) {
            r -= c;
            w >>= width;
            pos += width;
        }
    }
    return pos;
}

// The same sum with the set bits dealt out evenly ("balanced"): block b owns the contiguous
// words [b·K, min((b + 1)·K, ⌈n/64⌉)), K = ⌈⌈n/64⌉ / G⌉, in tiles of T = blockDim.x words.  Per
// tile each thread loads one word (coalesced) and its popcount; an inclusive scan over the tile
// in shared memory (Hillis–Steele, log2 T steps) gives every set bit a rank k, and thread t adds
// the points of ranks t, t + T, t + 2T, ...: the j with pre[j − 1] <= k < pre[j] by binary
// search, then the (k − pre[j − 1])-th set bit of word j.  Every thread of a tile makes the same
// number of additions (± 1), where "xyzz" gives each thread its words' popcount (at 2^24 points,
// 45 % set, 2 words a thread: 58 ± 6 additions, so a warp waits ~17 % of its time for its
// slowest lane), and a warp's 32 points are consecutive set bits (nearby rows) instead of 32
// rows 2 words apart.  Shared memory: the tile (T words, T counts) before the block tree, which
// reuses it (T XYZZ points are larger).
template <class F>
CUZK_DEVICE void batch_add_balanced_body(xyzz_t<F>* __restrict__ d_part, const affine_t<F>* __restrict__ d_points,
                                         const uint64_t* __restrict__ d_bits, uint64_t n)
{
    CUZK_DYN_SMEM(uint4, batch_add_bal_smem);
    const uint32_t T = blockDim.x, t = threadIdx.x;
    uint64_t* sw = reinterpret_cast<uint64_t*>(batch_add_bal_smem);
    uint32_t* pre = reinterpret_cast<uint32_t*>(sw + T);
    const uint64_t nw = (n + 63) >> 6;
    const uint64_t K = (nw + gridDim.x - 1) / gridDim.x;
    const uint64_t b0 = (uint64_t)blockIdx.x * K, b1 = b0 + K < nw ? b0 + K : nw;
    const uint64_t last_mask = (n & 63) ? ((uint64_t)1 << (n & 63)) - 1 : ~(uint64_t)0;

    xyzz_t<F> acc = xyzz_t<F>::infinity();
    for (uint64_t w0 = b0; w0 < b1; w0 += T) {
        const uint64_t w = w0 + t;
        const uint64_t word = w < b1 ? d_bits[w] & (w + 1 == nw ? last_mask : ~(uint64_t)0) : 0;
        sw[t] = word;
        pre[t] = (uint32_t)__popc((unsigned)word) + (uint32_t)__popc((unsigned)(word >> 32));
        __syncthreads();
        for (uint32_t d = 1; d < T; d <<= 1) {            // inclusive scan of the counts
            const uint32_t add = t >= d ? pre[t - d] : 0;
            __syncthreads();
            pre[t] += add;
            __syncthreads();
        }
        const uint32_t total = pre[T - 1];
        for (uint32_t k = t; k < total; k += T) {
            uint32_t lo = 0, hi = T - 1;                  // the first j with pre[j] > k
            while (lo < hi) {
                const uint32_t mid = (lo + hi) >> 1;
                if (pre[mid] > k) hi = mid;
                else lo = mid + 1;
            }
            const uint32_t r = k - (lo ? pre[lo - 1] : 0);
            acc = acc.add(affine_t<F>::load(d_points + ((w0 + lo) << 6) + select_bit(sw[lo], r)));
        }
        __syncthreads();                                  // the next tile (or the tree) reuses sw, pre
    }
    block_partial(d_part, acc);
}

// The same sums with affine additions that share one inversion per thread and step (Montgomery's
// trick; msm/msm.cuh sum_points_batch does the same over an MSM's sorted entries).  Lane m = bits
// [m·B, min((m + 1)·B, n)) of the bitmap, B in {8, 16, 32, 64} (part of one word); thread g of
// G = gridDim.x·blockDim.x owns lanes m = g + l·G (consecutive threads: consecutive rows of the
// lane state, so a warp's accesses coalesce).  Lane state in device memory (per launch, pointer
// arguments): acc[m] (affine accumulator), pre[m] (its prefix product in the current sweep),
// state[m] = (remaining bits lo, hi, LANE_* flags of ec/batch_affine.cuh, the pending point's
// bit).  Sweep k visits the thread's lanes forward for even k, backward for odd k; in each lane it
//   1. applies the pending addition of sweep k − 1 (apply_waiting: this sweep runs in the
//      opposite order of the one that built the products);
//   2. takes set bits until one makes an addition: an infinity point adds nothing, into an empty
//      accumulator the point is loaded, P = −acc empties it, P = acc is a doubling (d = 2·y1),
//      else d = x2 − x1; then pre[m] = Π of the sweep's d's before lane m, run ← run·d;
// then inv = 1/run.  Per addition 5M + 1S + 1/J of an inversion (J = the lanes of a thread that
// wait), against 8M + 2S for madd-2008-s; memory: the point (x, then the whole), acc, pre and
// state read and written once (~400 bytes for G1).  After the last sweep each thread sums its
// lanes' accumulators (XYZZ mixed additions) and the block tree gives d_part[blockIdx.x].
template <class F>
CUZK_DEVICE void batch_add_affine_body(xyzz_t<F>* __restrict__ d_part, const affine_t<F>* __restrict__ d_points,
                                       const uint64_t* __restrict__ d_bits, uint64_t n, uint32_t B,
                                       affine_t<F>* acc, F* pre, uint4* state)
{
    typedef affine_t<F> A;
    typedef xyzz_t<F> X;
    const uint64_t lanes = (n + B - 1) / B;
    const uint64_t G = (uint64_t)gridDim.x * blockDim.x;
    const uint64_t g = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const uint64_t J = g < lanes ? (lanes - 1 - g) / G + 1 : 0;
    for (uint64_t l = 0; l < J; l++) {
        const uint64_t m = g + l * G, lo = m * B, len = n - lo < B ? n - lo : B;
        uint64_t bits = d_bits[lo >> 6] >> (lo & 63);
        if (len < 64) bits &= ((uint64_t)1 << len) - 1;
        state[m] = make_uint4((uint32_t)bits, (uint32_t)(bits >> 32), LANE_EMPTY, 0u);
    }
    F inv = F::one();                                      // 1/Π of the previous sweep's d's
    bool active = J > 0;
    for (uint32_t k = 0; active; k++) {
        const bool fwd = !(k & 1u);
        F run = F::one();
        bool any = false;
        active = false;
        for (uint64_t i = 0; i < J; i++) {
            const uint64_t m = g + (fwd ? i : J - 1 - i) * G;
            const uint4 st = state[m];
            uint64_t bits = (uint64_t)st.x | ((uint64_t)st.y << 32);
            uint32_t fl = st.z, p = st.w;
            if (bits == 0 && !(fl & (LANE_ADD | LANE_DBL))) continue;   // done: acc[m] is final
            const A* base = d_points + m * B;
            A a = (fl & LANE_EMPTY) ? A::infinity() : A::load(acc + m);
            if (fl & (LANE_ADD | LANE_DBL)) {                // apply_waiting (ec/batch_affine.cuh)
                const bool dbl = (fl & LANE_DBL) != 0;
                apply_waiting(a, dbl, dbl ? a : A::load(base + p), false, load_field(pre + m), inv);
                fl = 0;
            }
            while (bits) {
                p = (uint32_t)__ffsll((long long)bits) - 1;
                bits &= bits - 1;
                const A* pp = base + p;
                if (fl & LANE_EMPTY) {
                    const A P = A::load(pp);
                    if (!P.is_inf()) {
                        a = P;
                        fl = 0;
                    }
                    continue;
                }
                const F px = load_field(&pp->x);
                F py;
                bool have_y = false;
                if (px.is_zero()) {                        // x = 0: infinity, or a point (0, ±2)
                    py = load_field(&pp->y);
                    have_y = true;
                    if (py.is_zero()) continue;            // infinity adds nothing
                }
                F d = px - a.x;
                if (d.is_zero()) {
                    if (!have_y) py = load_field(&pp->y);
                    if ((py + a.y).is_zero()) {            // P == −acc: the sum is O
                        fl = LANE_EMPTY;
                        continue;
                    }
                    d = a.y + a.y;                         /* P == acc: d = 2·y1 */
                    fl = LANE_DBL;
                } else {
                    fl = LANE_ADD;
                }
                store_field(pre + m, run);                 /* Π of this sweep's d's before lane m */
                run = any ? run * d : d;
                any = true;
                break;
            }
            if (!(fl & LANE_EMPTY)) a.store(acc + m);
            state[m] = make_uint4((uint32_t)bits, (uint32_t)(bits >> 32), fl, p);
            if (bits || (fl & (LANE_ADD | LANE_DBL))) active = true;
        }
        if (any) inv = inverse(run);
    }
    X sum = X::infinity();
    for (uint64_t l = 0; l < J; l++) {
        const uint64_t m = g + l * G;
        if (!(state[m].z & LANE_EMPTY)) sum = sum.add(A::load(acc + m));
    }
    block_partial(d_part, sum);
}

}  // namespace

// d_part[b] (b < gridDim.x) = Σ of the points selected in block b's words (see above): NAME_g1 /
// NAME_g2 running BODY (batch_add_body: "xyzz", batch_add_balanced_body: "balanced").
// blockDim.x a power of two <= 256 (G1) / 128 (G2); dynamic shared memory blockDim.x XYZZ points.
#define CUZK_BATCH_ADD_XYZZ(NAME, BODY, G, MAX_THREADS)                                               \
    extern "C" __global__ void __launch_bounds__(MAX_THREADS)                                         \
    NAME##_##G(cuzk::G##_xyzz_t* d_part, const cuzk::G##_affine_t* d_points, const uint64_t* d_bits,  \
               uint64_t n)                                                                            \
    {                                                                                                 \
        BODY(d_part, d_points, d_bits, n);                                                            \
    }
CUZK_BATCH_ADD_XYZZ(cuzk_batch_add, batch_add_body, g1, 256)
CUZK_BATCH_ADD_XYZZ(cuzk_batch_add, batch_add_body, g2, 128)
CUZK_BATCH_ADD_XYZZ(cuzk_batch_add_balanced, batch_add_balanced_body, g1, 256)
CUZK_BATCH_ADD_XYZZ(cuzk_batch_add_balanced, batch_add_balanced_body, g2, 128)
#undef CUZK_BATCH_ADD_XYZZ

// The affine variant (batch_add_affine_body): lanes of B bits; lane state for cap >= ceil(n / B)
// lanes: cap affine accumulators, then cap prefix products (one coordinate), then cap uint4 words.
// blockDim.x a power of two <= 128; dynamic shared memory blockDim.x XYZZ points.
#define CUZK_BATCH_ADD_AFFINE(G)                                                                     \
    extern "C" __global__ void __launch_bounds__(128)                                                 \
    cuzk_batch_add_affine_##G(cuzk::G##_xyzz_t* d_part, const cuzk::G##_affine_t* d_points,           \
                              const uint64_t* d_bits, uint64_t n, uint32_t B, cuzk::G##_affine_t* lanes, \
                              uint64_t cap)                                                           \
    {                                                                                                 \
        typedef decltype(cuzk::G##_affine_t::x) F;                                                    \
        F* pre = reinterpret_cast<F*>(lanes + cap);                                                   \
        batch_add_affine_body(d_part, d_points, d_bits, n, B, lanes, pre, reinterpret_cast<uint4*>(pre + cap)); \
    }
CUZK_BATCH_ADD_AFFINE(g1)
CUZK_BATCH_ADD_AFFINE(g2)
#undef CUZK_BATCH_ADD_AFFINE
