// Pippenger MSM Σ k_i·P_i on the GPU, templated over the point types (ec/xyzz_t.cuh):
// G1 (affine_t<fq_t>, xyzz_t<fq_t>) and G2 (affine_t<fq2_t>, xyzz_t<fq2_t>).  Instantiated as
// extern "C" kernels in msm/msm.cu; driven by cuzk/_cuda_msm.py.  All state comes in through
// arguments (per launch); nothing is kept in globals.
//
// Digits.  Scalars (8 x 32-bit limbs; canonical < 2^255, or Montgomery < r converted here) are
// recoded into W = ceil(256/c) signed digits d_w in [−2^(c−1) + 1, 2^(c−1)] with
// k = Σ d_w 2^(w·c): raw window v_w + carry, minus 2^c (carry 1) when above 2^(c−1).  Since
// k < 2^255 <= 2^(c·W − 1) the top window never carries out.  Bucket (w, |d| − 1) gets P_i
// with the sign of d folded into y (−(x, y) = (x, −y)); d = 0 gives no entry.  With k
// precomputed copies of the bases (table[q·N + j] = 2^(q·c·Wk)·P_j, Wk = ceil(W/k)) window
// w = q·Wk + w' goes to bucket window w' with copy q: Wk windows instead of W.
//
// Steps (stream-ordered, no host synchronization; sizes the host cannot know, like the number
// of non-zero digits, are read from device memory by the kernels):
//   1. count      counts[b] = entries of bucket b (atomic histogram)
//   2. scan       off[b] = Σ_{b'<b} counts[b'] (64-bit; tiles, then the tile totals)
//   3. scatter    entries sorted by bucket (a counting sort; positions come from counting
//                 counts[b] back down, so the order inside a bucket is arbitrary: the sums
//                 are the same group elements whatever the order)
//   4. segments   every bucket is cut into segments of <= S entries; one thread per segment
//                 (segment → bucket by binary search over seg[b] = Σ_{b'<b} ceil(cnt/S)),
//                 then the same step over the segment sums, until each bucket has <= 1 sum
//                 (the plan allows the levels of the worst case, one bucket holding every
//                 entry; a level after the one that left every bucket <= 1 sum does nothing).
//                 A bucket holding 45 % of the points (bits90: every scalar 1) is spread over
//                 0.45·n/S threads, so no thread sums more than S points of any distribution.
//                 Or ("flat", level 0 only): one thread per S consecutive sorted entries,
//                 cut at bucket boundaries (chunk_sums below): equal work per thread.
//                 Or ("affine", level 0 only): the flat chunks and pieces, summed with affine
//                 additions that share one inversion per block and step (sum_points_affine).
//                 Or ("batch", level 0 only): the flat chunks, J per thread, with affine
//                 additions that share one inversion per thread and step (sum_points_batch).
//   5. windows    P blocks per window: Σ_j (j + 1)·B_j by running sums, then a tree.
// The host finishes Σ_w 2^(w·c)·window_w by Horner's rule (cuzk/_cuda_pending.py).
#pragma once
#include "ec/batch_affine.cuh"

namespace cuzk {
namespace msm {

constexpr uint32_t NEG_BIT = 0x80000000u;  // entry = point index | NEG_BIT when d < 0

// Loads of data read once per pass (the scalars and indices of count and scatter): cached
// streaming (ld.global.cs: evict-first in L2), so the stream does not push out the lines that
// must stay in L2 meanwhile (the counters, and the partly written sectors of the buckets'
// write frontiers).  The scatter's 14 passes at 2^27 (c = 20, k = 2) each re-read the 4.3 GB of
// scalars, 32 bytes per ~1 entry a pass.  H200, session 12: scatter 93.6 -> 89.6 ms there
// (53 -> 51 ps per entry); the 2^24 MSMs unchanged.  Most of the 2^27 scatter's cost is not
// this eviction, then.  CUZK_MSM_SCALARS_CACHED (development, A/B measurements): the default
// policy.
#if defined(CUZK_HOST_EMU) || defined(CUZK_MSM_SCALARS_CACHED)
CUZK_DEVICE uint4 load_once(const uint4* p) { return *p; }
CUZK_DEVICE uint32_t load_once(const uint32_t* p) { return *p; }
#else
CUZK_DEVICE uint4 load_once(const uint4* p) { return __ldcs(p); }
CUZK_DEVICE uint32_t load_once(const uint32_t* p) { return __ldcs(p); }
#endif

// Scalar i as 8 canonical 32-bit limbs (from Montgomery form when mont: k = x·2^-256 mod r).
CUZK_DEVICE void load_scalar(uint32_t s[8], const uint32_t* __restrict__ scalars, uint32_t i, uint32_t mont)
{
    const uint4* q = reinterpret_cast<const uint4*>(scalars + 8 * (uint64_t)i);
    const uint4 a = load_once(q), b = load_once(q + 1);
    s[0] = a.x; s[1] = a.y; s[2] = a.z; s[3] = a.w;
    s[4] = b.x; s[5] = b.y; s[6] = b.z; s[7] = b.w;
    if (mont) {
        fr_t x;
#pragma unroll
        for (int k = 0; k < 8; k++) x.l[k] = s[k];
        x = x.from_mont();
#pragma unroll
        for (int k = 0; k < 8; k++) s[k] = x.l[k];
    }
}

// Digits without a carry chain.  With D = Σ_{w<W} (2^(c−1) − 1)·2^(w·c) and t = k + D, window
// w's signed digit is d_w = u_w − (2^(c−1) − 1), u_w = bits [w·c, w·c + c) of t: adding
// 2^(c−1) − 1 to a window carries out exactly when the recoding carries (raw + carry > 2^(c−1)),
// so the additions' carries are the recoding's.  t < 2^(W·c) (k < 2^255 <= 2^(W·c − 1) and
// D < 2^(W·c − 1)) fits 9 limbs.  Every window then costs the same few operations, whichever
// windows a pass needs (scatter's bucket ranges).
constexpr uint32_t DIGIT_LIMBS = 9;

// D's limbs for width c and W windows (once per thread: a loop over the 288 bit positions).
CUZK_DEVICE void digit_offset(uint32_t D[DIGIT_LIMBS], uint32_t c, uint32_t W)
{
    const uint32_t top = W * c;
    uint32_t r = 0;                                   // position mod c
#pragma unroll
    for (uint32_t j = 0; j < DIGIT_LIMBS; j++) {
        uint32_t v = 0;
#pragma unroll
        for (uint32_t b = 0; b < 32; b++) {
            if (32 * j + b < top && r != c - 1) v |= 1u << b;
            r = r + 1 == c ? 0 : r + 1;
        }
        D[j] = v;
    }
}

// t = s + D (s: 8 limbs, D: digit_offset).
CUZK_DEVICE void digit_base(uint32_t t[DIGIT_LIMBS], const uint32_t s[8], const uint32_t D[DIGIT_LIMBS])
{
    uint64_t acc = 0;
#pragma unroll
    for (uint32_t j = 0; j < 8; j++) {
        acc += (uint64_t)s[j] + D[j];
        t[j] = (uint32_t)acc;
        acc >>= 32;
    }
    t[8] = (uint32_t)acc + D[8];
}

// Bits [bit, bit + c) of t (9 limbs; bits at or above 288 read as 0), c <= 32.
CUZK_DEVICE uint32_t raw_window(const uint32_t t[DIGIT_LIMBS], uint32_t bit, uint32_t c)
{
    const uint32_t limb = bit >> 5, sh = bit & 31u;
    uint64_t v = 0;
#pragma unroll
    for (uint32_t k = 0; k < DIGIT_LIMBS; k++) {   // registers, not a stack array: unrolled selects
        if (k == limb) v |= t[k];
        if (k == limb + 1) v |= (uint64_t)t[k] << 32;
    }
    return (uint32_t)(v >> sh) & (uint32_t)((1ull << c) - 1);
}

// f(w, b, neg) for every window w < W whose signed digit d_w = ±m is non-zero and whose bucket
// b = (w mod Wk)·2^(c−1) + m − 1 lies in [b_lo, b_hi) (t: digit_base).  Only the windows that
// can reach the range are decoded: w = q·Wk + w' with w' from b_lo's bucket window to b_hi's.
template <class F>
CUZK_DEVICE void for_each_digit(const uint32_t t[DIGIT_LIMBS], uint32_t c, uint32_t W, uint32_t Wk,
                                uint32_t b_lo, uint32_t b_hi, F f)
{
    const uint32_t half = 1u << (c - 1);
    const uint32_t w_lo = b_lo >> (c - 1), w_hi = (b_hi - 1) >> (c - 1);   // b_lo < b_hi
    for (uint32_t q = 0; q * Wk < W; q++) {
        for (uint32_t w1 = w_lo; w1 <= w_hi; w1++) {
            const uint32_t w = q * Wk + w1;
            if (w >= W) break;
            const int32_t d = (int32_t)raw_window(t, w * c, c) - (int32_t)(half - 1);
            if (d == 0) continue;
            const uint32_t m = d < 0 ? (uint32_t)(-d) : (uint32_t)d;
            const uint32_t b = (w1 << (c - 1)) + m - 1;                      // < nb < 2^32
            if (b >= b_lo && b < b_hi) f(w, b, d < 0);
        }
    }
}

// Warp-aggregated bucket atomics.  Skewed scalars send most digits to a few buckets (bits90:
// 45 % of all scalars are 1, i.e. bucket 0 of window 0), and atomics on one address serialize
// in L2 (~1 per clock), so the lanes of a warp that hit the same bucket add once: the lanes now
// executing (__activemask) are grouped by bucket (__match_any_sync), the lowest lane of a group
// updates the counter for all of it.  Blocks are 1-D with blockDim.x a multiple of 32.
CUZK_DEVICE uint32_t lane_id() { return threadIdx.x & 31u; }
CUZK_DEVICE uint32_t bucket_peers(uint32_t b) { return __match_any_sync(__activemask(), b); }

// counts[(w mod Wk)·2^(c−1) + m − 1] += 1 for every scalar i < n and non-zero digit ±m of
// window w.
CUZK_DEVICE void count(uint32_t* counts, const uint32_t* scalars, uint32_t n, uint32_t c, uint32_t W,
                       uint32_t Wk, uint32_t mont)
{
    uint32_t D[DIGIT_LIMBS];
    digit_offset(D, c, W);
    const uint32_t nb = Wk << (c - 1);
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        uint32_t s[8], t[DIGIT_LIMBS];
        load_scalar(s, scalars, i, mont);
        digit_base(t, s, D);
        for_each_digit(t, c, W, Wk, 0, nb, [&](uint32_t, uint32_t b, bool) {
            const uint32_t peers = bucket_peers(b);
            if (lane_id() == __ffs(peers) - 1) atomicAdd(counts + b, (uint32_t)__popc(peers));
        });
    }
}

// entries[off[b] + counts[b]−−  − 1] = (copy·N + point) | NEG_BIT·(d < 0) for every entry of
// count() whose bucket b lies in [b_lo, b_hi); point = idx[i] (an indexed MSM) or i (idx null),
// copy = w / Wk.  Takes those counts to 0.  A group of g lanes on bucket b takes counts[b] down
// by g at once; lane of rank j in it (lanes numbered from the lowest) writes position old − 1 − j.
// off null: counts holds cursors (cursors() below: each bucket's end as an absolute position),
// taken down to each bucket's start; an entry then costs one atomic and one write, without the
// load of off[b] (a third random access to L2 per entry).
// The host runs it over bucket ranges one after another (passes): the writes of one pass go to
// the entry ranges of fewer buckets at a time, whose partly written sectors then stay in L2
// (profile at 2^27, c = 20: 3.6 M buckets in one pass cost 93 ps per entry, 0.26 M 34 ps).
CUZK_DEVICE void scatter(uint32_t* entries, uint32_t* counts, const uint64_t* off, const uint32_t* scalars,
                         const uint32_t* idx, uint32_t n, uint32_t N, uint32_t c, uint32_t W, uint32_t Wk,
                         uint32_t mont, uint32_t b_lo, uint32_t b_hi)
{
    uint32_t D[DIGIT_LIMBS];
    digit_offset(D, c, W);
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        uint32_t s[8], t[DIGIT_LIMBS];
        load_scalar(s, scalars, i, mont);
        digit_base(t, s, D);
        const uint32_t pt = idx ? load_once(idx + i) : i;
        for_each_digit(t, c, W, Wk, b_lo, b_hi, [&](uint32_t w, uint32_t b, bool neg) {
            const uint32_t peers = bucket_peers(b), lane = lane_id();
            const uint32_t leader = __ffs(peers) - 1, rank = __popc(peers & ((1u << lane) - 1u));
            uint32_t left = 0;                                           // counts[b] before the group
            if (lane == leader) left = atomicAdd(counts + b, 0u - (uint32_t)__popc(peers));
            left = __shfl_sync(peers, left, leader);
            const uint64_t at = (off ? off[b] : 0) + (left - 1 - rank);
            entries[at] = (pt + (w / Wk) * N) | (neg ? NEG_BIT : 0u);
        });
    }
}

// cur[b] = off[b + 1] (the end of bucket b's entries) for b < nb, as 32 bits: scatter's cursors
// (off null there).  The host takes this form only when every position fits (n·W < 2^32).
CUZK_DEVICE void cursors(uint32_t* cur, const uint64_t* off, uint32_t nb)
{
    for (uint32_t b = blockIdx.x * blockDim.x + threadIdx.x; b < nb; b += gridDim.x * blockDim.x)
        cur[b] = (uint32_t)off[b + 1];
}

// Exclusive prefix sums out[b] = Σ_{b'<b} value(b'), b <= nb (out[nb] = the total), in three
// launches: tile_totals (one block per tile of K·blockDim.x items), scan (one block, over the
// tile totals), tile_apply (one block per tile again).  Thread u of tile t takes the K items
// from (t·blockDim.x + u)·K.  value(b) is read twice (it is a load or two).

// [b, e): the items of the calling thread; 64-bit, since the last tile may reach past 2^32.
CUZK_DEVICE void tile_items(uint32_t nb, uint32_t K, uint32_t& b, uint32_t& e)
{
    const uint64_t lo = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) * K;
    b = lo < nb ? (uint32_t)lo : nb;
    e = lo + K < nb ? (uint32_t)(lo + K) : nb;
}

// Σ value(i) over the calling thread's items [b, e) (tile_items).
template <class V>
CUZK_DEVICE uint64_t tile_sum(uint32_t nb, uint32_t K, V value, uint32_t& b, uint32_t& e)
{
    tile_items(nb, K, b, e);
    uint64_t sum = 0;
    for (uint32_t i = b; i < e; i++) sum += value(i);
    return sum;
}

// tiles[blockIdx.x] = Σ value over the tile.  red: blockDim.x words of shared memory.
template <class V>
CUZK_DEVICE void tile_totals(uint64_t* tiles, uint64_t* red, uint32_t nb, uint32_t K, V value)
{
    uint32_t b, e;
    const uint64_t sum = tile_sum(nb, K, value, b, e);
    const uint32_t t = threadIdx.x;
    red[t] = sum;
    __syncthreads();
    for (uint32_t half = blockDim.x >> 1; half; half >>= 1) {
        if (t < half) red[t] += red[t + half];
        __syncthreads();
    }
    if (t == 0) tiles[blockIdx.x] = red[0];
}

// out[b] for the tile's items from tile_off = the scanned tile totals (ntiles + 1 words);
// block 0 also writes out[nb] = tile_off[ntiles].  chunk: blockDim.x words of shared memory.
template <class V>
CUZK_DEVICE void tile_apply(uint64_t* out, uint64_t* chunk, const uint64_t* tile_off, uint32_t nb, uint32_t K,
                            uint32_t ntiles, V value)
{
    uint32_t b, e;
    const uint64_t sum = tile_sum(nb, K, value, b, e);
    const uint32_t t = threadIdx.x;
    chunk[t] = sum;
    __syncthreads();
    if (t == 0) {
        uint64_t run = tile_off[blockIdx.x];
        for (uint32_t k = 0; k < blockDim.x; k++) {
            const uint64_t v = chunk[k];
            chunk[k] = run;
            run += v;
        }
        if (blockIdx.x == 0) out[nb] = tile_off[ntiles];
    }
    __syncthreads();
    uint64_t run = chunk[t];
    for (uint32_t i = b; i < e; i++) {
        const uint64_t v = value(i);
        out[i] = run;
        run += v;
    }
}

// The middle launch: out[b] = Σ_{b'<b} in[b'], b <= n, one block; thread t scans its chunk
// [t·K, (t+1)·K), K = ceil(n / blockDim.x), after thread 0 has scanned the chunk totals.
// chunk: blockDim.x words of shared memory.
CUZK_DEVICE void scan_block(uint64_t* out, uint64_t* chunk, const uint64_t* in, uint32_t n)
{
    const uint32_t t = threadIdx.x, K = (n + blockDim.x - 1) / blockDim.x;
    const uint32_t b = t * K < n ? t * K : n, e = b + K < n ? b + K : n;
    uint64_t sum = 0;
    for (uint32_t i = b; i < e; i++) sum += in[i];
    chunk[t] = sum;
    __syncthreads();
    if (t == 0) {
        uint64_t run = 0;
        for (uint32_t k = 0; k < blockDim.x; k++) {
            const uint64_t v = chunk[k];
            chunk[k] = run;
            run += v;
        }
        out[n] = run;
    }
    __syncthreads();
    uint64_t run = chunk[t];
    for (uint32_t i = b; i < e; i++) {
        const uint64_t v = in[i];
        out[i] = run;
        run += v;
    }
}

// The last segment step that ran of `levels` (0 = level 0): the first level L whose
// apply_segments left more[L] = 0 (every bucket at most one sum), so level L + 1 and all after it
// returned at once; levels − 1 when every level ran.
CUZK_DEVICE uint32_t last_level(const uint32_t* more, uint32_t levels)
{
    uint32_t L = 0;
    while (L + 1 < levels && more[L]) L++;
    return L;
}

// The bucket b < nb whose segments [seg[b], seg[b+1]) hold segment g (g < seg[nb]):
// the largest b with seg[b] <= g.
CUZK_DEVICE uint32_t bucket_of(const uint64_t* seg, uint32_t nb, uint64_t g)
{
    uint32_t lo = 0, hi = nb;   // seg[lo] <= g < seg[hi]
    while (hi - lo > 1) {
        const uint32_t mid = lo + (hi - lo) / 2;
        if (seg[mid] <= g) lo = mid;
        else hi = mid;
    }
    return lo;
}

// One segment step.  Bucket b holds items [off[b], off[b+1]); its segment g − seg[b] covers
// items off[b] + (g − seg[b])·S ... (at most S, within the bucket); out[g] = their sum.
// load(j) is item j as an addend (an affine point with its sign, or an XYZZ partial sum).
template <class xyzz_t, class L>
CUZK_DEVICE void segment_sums(xyzz_t* out, const uint64_t* seg, const uint64_t* off, uint32_t nb, uint32_t S,
                              L load)
{
    const uint64_t total = seg[nb];
    for (uint64_t g = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; g < total;
         g += (uint64_t)gridDim.x * blockDim.x) {
        const uint32_t b = bucket_of(seg, nb, g);
        uint64_t j = off[b] + (g - seg[b]) * S;
        const uint64_t end = j + S < off[b + 1] ? j + S : off[b + 1];
        xyzz_t acc = xyzz_t::infinity();
        for (; j < end; j++) acc = acc.add(load(j));
        out[g] = acc;
    }
}

// Level 0, balanced ("flat"): thread m sums the sorted entries [m·S, min((m + 1)·S, E)),
// E = off[nb], cut at bucket boundaries into pieces, so every thread does S additions (the
// last fewer) whatever the bucket sizes; bucket-relative segments (segment_sums) leave a warp
// waiting for its longest segment when buckets are Poisson-sized (c >= 18: a bucket of ~100
// entries becomes a 64 and a ~36).  Pieces of bucket b are cut at the global multiples of S:
// pieces(b) = floor((off[b+1] − 1)/S) − floor(off[b]/S) + 1 (0 when empty), and the piece of
// chunk m goes to out[seg[b] + m − floor(off[b]/S)], seg[b] = Σ_{b'<b} pieces(b') — the same
// layout segment_sums leaves, so the following levels are unchanged.
CUZK_DEVICE uint64_t flat_pieces(const uint64_t* off, uint32_t b, uint32_t S)
{
    const uint64_t lo = off[b], hi = off[b + 1];
    return hi > lo ? (hi - 1) / S - lo / S + 1 : 0;
}

// Sums bucket b leaves for the next step: bucket-relative segments of <= S items, or (flat, a
// level 0 cut by chunk_sums) its pieces.
CUZK_DEVICE uint64_t segments_of(const uint64_t* off, uint32_t b, uint32_t S, uint32_t flat)
{
    return flat ? flat_pieces(off, b, S) : (off[b + 1] - off[b] + S - 1) / S;
}

template <class xyzz_t, class L>
CUZK_DEVICE void chunk_sums(xyzz_t* out, const uint64_t* seg, const uint64_t* off, uint32_t nb, uint32_t S,
                            L load)
{
    const uint64_t E = off[nb], chunks = (E + S - 1) / S;
    for (uint64_t m = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; m < chunks;
         m += (uint64_t)gridDim.x * blockDim.x) {
        uint64_t j = m * S;
        const uint64_t end = j + S < E ? j + S : E;
        uint32_t b = bucket_of(off, nb, j);     // off[b] <= j < off[b + 1]: non-empty
        uint64_t bend = off[b + 1];
        xyzz_t acc = xyzz_t::infinity();
        for (; j < end; j++) {
            acc = acc.add(load(j));
            if (j + 1 == bend || j + 1 == end) {
                out[seg[b] + (m - off[b] / S)] = acc;
                acc = xyzz_t::infinity();
                if (j + 1 < end) {              // the next non-empty bucket starts at j + 1
                    b = bucket_of(off, nb, j + 1);
                    bend = off[b + 1];
                }
            }
        }
    }
}

// The addend of sorted entry j: its point, negated when the entry's sign bit is set.
template <class affine>
CUZK_DEVICE affine entry_point(const uint32_t* entries, const affine* points, uint64_t j)
{
    const uint32_t e = entries[j];
    const affine p = affine::load(points + (e & ~NEG_BIT));
    return (e & NEG_BIT) ? p.neg() : p;
}

template <class xyzz_t>
CUZK_DEVICE void sum_points_flat(xyzz_t* out, const uint64_t* seg, const uint64_t* off, const uint32_t* entries,
                                 const typename xyzz_t::affine* points, uint32_t nb, uint32_t S)
{
    chunk_sums(out, seg, off, nb, S, [&](uint64_t j) { return entry_point(entries, points, j); });
}

// ---- level 0 in affine coordinates ("affine"): the flat chunks, batch-inverted additions

// Lanes (flat chunks) per thread of sum_points_affine: the additions one inversion serves are
// blockDim.x·J per step.  A compile-time constant (per-lane state lives in arrays of J);
// cuzk/_cuda_msm.py reads it from here (_affine_lanes) to size the grid.  32, the most the
// lane bit masks allow, timed fastest on the H200 (G1 2^24 uniform: 4/8/16/32 lanes 245/193/
// 165/150 ms; cuzk/_cuda_msm.py has the table).  G2 at 16 lanes halves the frame (9 664 → 4 864
// B per thread; the local memory the driver keeps on an H100 2.34 → 1.04 GB) but lost (H100,
// bench/RESULTS.md session 49): 2^24 uniform +8.7 %, 2^24 real_tail +43 %.
#ifndef CUZK_MSM_AFFINE_LANES
#define CUZK_MSM_AFFINE_LANES 32
#endif

// 1/v for every thread's v (non-zero) with one inversion per block (Montgomery's trick over a
// product tree): up-sweep node i = node 2i · node 2i+1 (leaves T + t = the threads' v, never
// stored: level 1 is built from register values), invert the root, down-sweep
// 1/left = 1/parent · right, 1/right = 1/parent · left; at the bottom 1/v_t = 1/(v_t·v_t^1) ·
// v_t^1.  log2(T) + 2 barriers each way.  Cost: one inversion + ~3(T − 1) M for the block.
// T = blockDim.x, a power of two; tree: T field elements of shared memory (internal nodes at
// 1 .. T−1; reused for the sibling exchange).  Every thread of the block must call it.
template <class F>
CUZK_DEVICE F block_inverse(const F& v, F* tree)
{
    const uint32_t T = blockDim.x, t = threadIdx.x;
    if (T == 1) return inverse(v);
    const uint32_t parent = (T + t) >> 1;                      // level-1 node of leaf T + t
    if (t & 1) tree[parent] = v;
    __syncthreads();
    if (!(t & 1)) tree[parent] = v * tree[parent];             /* v_t · v_{t+1} */
    __syncthreads();
    for (uint32_t lo = T >> 2; lo; lo >>= 1) {                 // nodes [lo, 2·lo)
        if (t < lo) tree[lo + t] = tree[2 * (lo + t)] * tree[2 * (lo + t) + 1];
        __syncthreads();
    }
    if (t == 0) tree[1] = inverse(tree[1]);                    /* 1/Π v */
    __syncthreads();
    for (uint32_t lo = 1; 2 * lo < T; lo <<= 1) {              // node i in [lo, 2·lo), children internal
        if (t < lo) {
            const uint32_t i = lo + t;
            const F a = tree[2 * i], b = tree[2 * i + 1], p = tree[i];
            tree[2 * i] = p * b;                               /* 1/a = 1/(a·b) · b */
            tree[2 * i + 1] = p * a;
        }
        __syncthreads();
    }
    const F pinv = tree[parent];                               /* 1/(v_t · v_{t^1}) */
    __syncthreads();
    tree[t] = v;
    __syncthreads();
    const F r = pinv * tree[t ^ 1u];
    __syncthreads();                                           // tree free for the next call
    return r;
}

// Level 0 with affine accumulators: the flat variant's chunks and pieces (chunk_sums: chunk
// m = sorted entries [m·S, min((m + 1)·S, E)), cut at bucket boundaries, the piece of bucket b
// to out[seg[b] + m − floor(off[b]/S)]), but each addition is affine and shares one inversion
// with every other addition of its block and step:
//   λ = (y2 − y1)/(x2 − x1)  (P ≠ ±acc)   or   3·x1^2 / (2·y1)  (P == acc, a = 0)
//   x3 = λ^2 − x1 − x2,  y3 = λ·(x1 − x3) − y1
// Per addition: 1M for the thread's prefix product, 2M to peel 1/d off the running inverse,
// 1M λ, 1S λ^2, 1M y3 (≈ 5M + 1S, a doubling 1S more) plus the block's share of the tree
// (~3M per thread, over J lanes) and of one inversion (over blockDim.x·J lanes) — against
// 8M + 2S for the XYZZ mixed addition of chunk_sums.
//
// Work split.  Block iteration `first` (block-uniform: every barrier is reached by the whole
// block) takes T·Jr consecutive chunks (Jr <= J lanes in use, below), lane l of thread t chunk
// m = first + l·T + t; all lanes
// take step s (entry m·S + s) together, S steps; a lane whose chunk is exhausted (or past the
// last chunk) idles with d = 1.  Cases of a step, P = entry m·S + s (its sign applied):
//   P infinity (an all-zero base) or lane idle:   nothing (d = 1)
//   accumulator empty:                          acc = P (d = 1)
//   P.x ≠ acc.x:                                  add,  d = P.x − acc.x
//   P.x = acc.x, P.y = −acc.y (also y = 0):       acc empty (d = 1)
//   P.x = acc.x, P.y = acc.y:                     double, d = 2·acc.y (≠ 0)
// so every d is non-zero and the block's product is invertible.  Pass 1 (lanes forward) keeps
// the exclusive prefix products pre[l] of the thread's d; block_inverse gives 1/Π_l d_l; pass 2
// (lanes backward) peels 1/d_l = inv·pre[l], inv ← inv·d_l, recomputing d (and reloading P: in
// L1/L2) rather than storing it.  When a lane's piece ends (bucket end or chunk end) it writes
// acc as XYZZ (ZZ = ZZZ = 1, or infinity when empty) and starts the next piece empty.
// smem: blockDim.x field elements (block_inverse); blockDim.x a power of two.
template <int J, class F>
CUZK_DEVICE void sum_points_affine(xyzz_t<F>* out, const uint64_t* seg, const uint64_t* off,
                                   const uint32_t* entries, const affine_t<F>* points, uint32_t nb, uint32_t S,
                                   void* smem)
{
    static_assert(J >= 1 && J <= 32, "sum_points_affine: 1..32 lanes (bit masks of uint32)");
    typedef affine_t<F> affine;
    F* tree = reinterpret_cast<F*>(smem);
    const uint64_t E = off[nb], chunks = (E + S - 1) / S;
    const uint32_t T = blockDim.x, t = threadIdx.x;
    // Lanes in use, Jr <= J: just enough for the grid (sized to the blocks an SM holds at once)
    // to cover the chunks in one pass.  A block's time is S steps × Jr lanes, so skewed scalars
    // (few entries) must not be packed into a few blocks of J lanes each while the other SMs
    // idle (H200, G2 2^22 at Jr = J = 32: bits90 83 ms, the same as uniform).
    const uint64_t spread = ((uint64_t)gridDim.x * T + chunks - 1) / ((uint64_t)gridDim.x * T);
    const int Jr = chunks == 0 ? 1 : (int)(spread < (uint64_t)J ? spread : (uint64_t)J);
    const uint64_t per_block = (uint64_t)T * Jr;
    for (uint64_t first = blockIdx.x * per_block; first < chunks; first += (uint64_t)gridDim.x * per_block) {
        F ax[J], ay[J], pre[J];            // accumulators (valid unless empty), prefix products
        uint32_t bk[J];                    // current bucket of the lane
        uint64_t bend[J];                  // off[bk + 1]
        uint32_t empty = ~0u;              // bit l: lane l's accumulator is empty
        for (int l = 0; l < Jr; l++) {
            const uint64_t m = first + (uint64_t)l * T + t;
            if (m < chunks) {
                bk[l] = bucket_of(off, nb, m * S);     // off[b] <= m·S < off[b + 1]: non-empty
                bend[l] = off[bk[l] + 1];
            }
        }
        for (uint32_t s = 0; s < S; s++) {
            uint32_t add = 0, dbl = 0;     // bit l: lane l adds / doubles this step
            F run = F::one();              // Π d over the lanes so far (1: none yet)
            for (int l = 0; l < Jr; l++) {
                const uint64_t m = first + (uint64_t)l * T + t, j = m * S + s;
                if (m >= chunks || j >= E) continue;
                const affine P = entry_point(entries, points, j);
                if (P.is_inf()) continue;
                const uint32_t bit = 1u << l;
                if (empty & bit) {
                    ax[l] = P.x;
                    ay[l] = P.y;
                    empty &= ~bit;
                    continue;
                }
                F d = P.x - ax[l];
                if (!d.is_zero()) {
                    add |= bit;
                } else if ((P.y + ay[l]).is_zero()) {   // P == −acc
                    empty |= bit;
                    continue;
                } else {                                // P == acc
                    d = ay[l] + ay[l];                  /* d = 2·y1 */
                    dbl |= bit;
                }
                pre[l] = run;                           /* Π_{l' < l} d_l' */
                run = (add | dbl) == bit ? d : run * d;
            }
            F inv = block_inverse(run, tree);           /* 1/Π_l d_l */
            for (int l = Jr - 1; l >= 0; l--) {
                const uint64_t m = first + (uint64_t)l * T + t, j = m * S + s;
                if (m >= chunks || j >= E) continue;
                const uint32_t bit = 1u << l;
                if ((add | dbl) & bit) {
                    const bool before = ((add | dbl) & (bit - 1)) != 0;   // lanes below l hold d's
                    const F x1 = ax[l], y1 = ay[l];
                    F d, num, x2;
                    if (dbl & bit) {
                        d = y1 + y1;
                        const F xx = x1.sqr();
                        num = xx + xx + xx;                 /* 3·x1^2 */
                        x2 = x1;
                    } else {
                        const affine P = entry_point(entries, points, j);
                        d = P.x - x1;
                        num = P.y - y1;
                        x2 = P.x;
                    }
                    const F dinv = before ? inv * pre[l] : inv;   /* 1/d_l */
                    if (before) inv = inv * d;                    /* 1/Π_{l' < l} d_l' */
                    const F lambda = num * dinv;
                    const F x3 = lambda.sqr() - x1 - x2;          /* x3 = λ^2 − x1 − x2 */
                    ay[l] = lambda * (x1 - x3) - y1;              /* y3 = λ·(x1 − x3) − y1 */
                    ax[l] = x3;
                }
                const uint64_t end = m * S + S < E ? m * S + S : E;
                if (j + 1 == bend[l] || j + 1 == end) {           // the piece ends
                    const uint32_t b = bk[l];
                    out[seg[b] + (m - off[b] / S)] = (empty & bit) ? xyzz_t<F>::infinity()
                                                                   : xyzz_t<F>{ax[l], ay[l], F::one(), F::one()};
                    empty |= bit;
                    if (j + 1 < end) {                  // the next non-empty bucket starts at j + 1
                        bk[l] = bucket_of(off, nb, j + 1);
                        bend[l] = off[bk[l] + 1];
                    }
                }
            }
        }
    }
}

// ---- level 0 with batch-inverted affine additions, lane state in device memory ("batch")

// Level 0 with affine accumulators and one inversion per thread and step, shared by the J lanes
// (flat chunks) of the thread.  The flat variant's chunks and pieces (chunk_sums: chunk m =
// sorted entries [m·S, min((m + 1)·S, E)), cut at bucket boundaries, the piece of bucket b to
// out[seg[b] + m − floor(off[b]/S)]); thread g of G = gridDim.x·blockDim.x owns chunks
// m = g + l·G, l < J = its share of ceil(E/S).  The lanes' state lives in device memory, indexed
// by chunk (consecutive threads: consecutive rows, so a warp's accesses coalesce): acc[m] (the
// affine accumulator), pre[m] (its exclusive prefix product in the current batch), word[m] =
// (bucket, LANE_* flags).  No barriers, no shared memory: threads never wait for each other,
// and the registers hold one lane at a time (the block-shared inversion of sum_points_affine
// left a block idle while one thread inverted, with the lanes in local memory).
//
// Sweep k = 0 .. S visits the thread's lanes, forward for even k, backward for odd k, and in
// each lane:
//   1. applies step k − 1 (entry m·S + k − 1): if it waits (LANE_ADD / LANE_DBL),
//      1/d = inv·pre[m], inv ← inv·d (Montgomery's trick backwards: this sweep runs in the
//      opposite order of the one that built the products), then
//        λ = (y2 − y1)/(x2 − x1)  or  3·x1^2 / (2·y1),  x3 = λ^2 − x1 − x2,  y3 = λ·(x1 − x3) − y1;
//      if that entry ends the lane's piece (bucket end or chunk end), writes the piece's sum as
//      XYZZ (ZZ = ZZZ = 1, or infinity when empty) and starts the next bucket empty;
//   2. prepares step k (entry m·S + k, P with its sign applied):
//        P infinity:                        nothing
//        accumulator empty:                 acc = P
//        P.x ≠ acc.x:                       LANE_ADD, d = P.x − acc.x
//        P.x = acc.x, P.y = −acc.y:         acc empty (also y = 0: P + P = O)
//        P.x = acc.x, P.y = acc.y:          LANE_DBL, d = 2·acc.y (≠ 0)
//      and for a waiting lane pre[m] = Π of the d's before it in this sweep, run ← run·d;
// then inv = 1/run (every d is non-zero, so run is too) when any lane waits.
// Per addition: 1M (run), 2M (peeling), 1M λ, 1S λ^2, 1M y3 = 5M + 1S, plus 1/J of an
// inversion — against 8M + 2S for the XYZZ mixed addition.  Memory per addition: ~450 bytes
// (the point twice, x only the first time; acc, pre and word read and written once).  A lane's
// loads are issued together at its start, with its entries fetched while the previous lane ran:
// with every load waiting on the one before (word → acc, entry → point, then pre) the first
// version spent most of its time waiting (H200, 194 registers, 8 warps per SM: G1 2^27 level 0
// 675 ms against XYZZ's 692).
// Session 12 (ncu, G1 2^24): 2 warps per scheduler (240 registers), 28 % of issue slots busy,
// half of the stall cycles on fixed-latency dependencies: latency-bound.  Session 13 (G1 2^24
// k = 4 / 2^27 k = 2, level 0 ms, against 85.8 / 559.3): the lane's points loaded where used (201
// registers) 94.4 / 615.6; that capped at 3 blocks per SM (168 registers + a 136-byte stack)
// 94.7 / 605.8: the early loads are worth more than 50 % more warps.  The next lane's rows and
// points prefetched (prefetch.global.L1 or .L2, entries two lanes ahead, 241 registers) 89.9 /
// 584 (not profiled).  All three removed.
template <class F>
CUZK_DEVICE void sum_points_batch(xyzz_t<F>* out, const uint64_t* seg, const uint64_t* off,
                                  const uint32_t* entries, const affine_t<F>* points, uint32_t nb, uint32_t S,
                                  affine_t<F>* acc, F* pre, uint2* word)
{
    typedef affine_t<F> affine;
    const uint64_t E = off[nb], chunks = (E + S - 1) / S;
    const uint64_t G = (uint64_t)gridDim.x * blockDim.x;
    const uint64_t g = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= chunks) return;
    const uint64_t J = (chunks - 1 - g) / G + 1;          // lanes: m = g + l·G < chunks
    F inv = F::one();                                      // 1/Π of the previous sweep's d's
    for (uint32_t k = 0; k <= S; k++) {
        const bool fwd = !(k & 1u);
        auto lane = [&](uint64_t i) { return g + (fwd ? i : J - 1 - i) * G; };
        // The entries of steps k − 1 and k of the i-th lane of this sweep (0 past its chunk), one
        // lane ahead: each lane's loads then issue at once, not entry → point one after another.
        auto lane_entries = [&](uint64_t i, uint32_t& ep, uint32_t& ec) {
            ep = ec = 0;
            if (i >= J) return;
            const uint64_t base = lane(i) * S, cend = base + S < E ? base + S : E;
            if (k > 0 && base + k <= cend) ep = entries[base + k - 1];
            if (base + k < cend) ec = entries[base + k];
        };
        uint32_t ep_next, ec_next;
        lane_entries(0, ep_next, ec_next);
        F run = F::one();
        bool any = false;
        for (uint64_t i = 0; i < J; i++) {
            const uint32_t ep = ep_next, ec = ec_next;
            lane_entries(i + 1, ep_next, ec_next);
            const uint64_t m = lane(i);
            const uint64_t base = m * S, cend = base + S < E ? base + S : E;
            if (base + k > cend) continue;                 // the chunk ended in an earlier sweep
            const bool cur = base + k < cend;              // step k exists (else: only k − 1 to finish)
            // Every load of the lane first (used or not: they do not wait for one another).
            uint32_t b, fl;
            affine a = affine::infinity(), Pp;
            F pm, pxc;
            if (k == 0) {
                b = bucket_of(off, nb, base);              // off[b] <= m·S < off[b + 1]: non-empty
                fl = LANE_EMPTY;
            } else {
                const uint2 w = word[m];
                b = w.x;
                fl = w.y;
#ifdef CUZK_INITCHECK
                // compute-sanitizer initcheck (bench/gpu_round.sh sanitize): no read of the state a
                // lane never wrote (the loads below then wait for word's: slower, the same sums)
                if (!(fl & LANE_EMPTY)) a = affine::load(acc + m);
                if (fl & (LANE_ADD | LANE_DBL)) pm = load_field(pre + m);
#else
                a = affine::load(acc + m);                 // stale when the lane is empty: unused
                pm = load_field(pre + m);                  // stale unless the lane waits: unused
#endif
                Pp = affine::load(points + (ep & ~NEG_BIT));
            }
            if (cur) pxc = load_field(&points[ec & ~NEG_BIT].x);
            if (k > 0) {
                const uint64_t j = base + k - 1;           // apply step k − 1
                if (fl & (LANE_ADD | LANE_DBL)) {
                    apply_waiting(a, (fl & LANE_DBL) != 0, Pp, (ep & NEG_BIT) != 0, pm, inv);
                    fl = 0;
                }
                if (j + 1 == off[b + 1] || !cur) {         // the piece ends at j
                    out[seg[b] + (m - off[b] / S)] = (fl & LANE_EMPTY) ? xyzz_t<F>::infinity()
                                                                       : xyzz_t<F>{a.x, a.y, F::one(), F::one()};
                    fl = LANE_EMPTY;
                    if (!cur) continue;                     // the chunk is done
                    b = bucket_of(off, nb, j + 1);          // the next non-empty bucket starts at j + 1
                }
            }
            // prepare step k (entry base + k, point ec; reached only when it exists)
            const affine* pp = points + (ec & ~NEG_BIT);
            const bool neg = (ec & NEG_BIT) != 0;
            if (fl & LANE_EMPTY) {
                const affine P = affine::load(pp);
                if (!P.is_inf()) {
                    a = neg ? P.neg() : P;
                    fl = 0;
                }
            } else {
                F py;
                bool inf = false, have_y = false;
                if (pxc.is_zero()) {                        // x = 0: infinity, or a point (0, ±2)
                    py = load_field(&pp->y);
                    have_y = true;
                    inf = py.is_zero();
                }
                if (!inf) {
                    F d = pxc - a.x;
                    if (d.is_zero()) {
                        if (!have_y) py = load_field(&pp->y);
                        if (neg) py = -py;
                        if ((py + a.y).is_zero()) {
                            fl = LANE_EMPTY;                // P == −acc
                        } else {
                            d = a.y + a.y;                  /* P == acc: d = 2·y1 */
                            fl = LANE_DBL;
                        }
                    } else {
                        fl = LANE_ADD;
                    }
                    if (fl & (LANE_ADD | LANE_DBL)) {
                        store_field(pre + m, run);          /* Π of this sweep's d's before lane m */
                        run = any ? run * d : d;
                        any = true;
                    }
                }
            }
            if (!(fl & LANE_EMPTY)) a.store(acc + m);
            word[m] = make_uint2(b, fl);
        }
        if (any) inv = inverse(run);
    }
}

template <class xyzz_t>
CUZK_DEVICE void sum_points(xyzz_t* out, const uint64_t* seg, const uint64_t* off, const uint32_t* entries,
                            const typename xyzz_t::affine* points, uint32_t nb, uint32_t S)
{
    segment_sums(out, seg, off, nb, S, [&](uint64_t j) { return entry_point(entries, points, j); });
}

template <class xyzz_t>
CUZK_DEVICE void sum_partials(xyzz_t* out, const uint64_t* seg, const uint64_t* off, const xyzz_t* in,
                              uint32_t nb, uint32_t S)
{
    segment_sums(out, seg, off, nb, S, [&](uint64_t j) { return in[j]; });
}

// Partial window sums: block (w, p) = (blockIdx.x / P, blockIdx.x % P) writes sums[blockIdx.x]
// = Σ_j (j + 1)·B(w, j) over its buckets j in [p·H/P, (p + 1)·H/P), H = 2^(c−1), where
// B(w, j) = bsum[seg[b]] if seg[b+1] > seg[b] else infinity, b = w·H + j (the last segment
// step left at most one sum per bucket).  blockDim.x = segments per block (a power of two;
// P·blockDim.x divides H); thread t takes L = H / (P·blockDim.x) buckets from lo: with running
// sums from the top, R = Σ B_j and T = Σ (j − lo)·B_j, its share is T + (lo + 1)·R; then a
// tree in shared memory (part: blockDim.x points).
template <class xyzz_t>
CUZK_DEVICE void windows(xyzz_t* sums, xyzz_t* part, const xyzz_t* bsum, const uint64_t* seg, uint32_t c,
                         uint32_t P)
{
    const uint32_t H = 1u << (c - 1);
    const uint32_t w = blockIdx.x / P, p = blockIdx.x % P;
    const uint32_t t = threadIdx.x, L = H / (P * blockDim.x);
    const uint32_t lo = (p * blockDim.x + t) * L;
    const uint64_t* sg = seg + (uint64_t)w * H;
    auto B = [&](uint32_t j) { return sg[j + 1] > sg[j] ? bsum[sg[j]] : xyzz_t::infinity(); };
    xyzz_t R = xyzz_t::infinity(), T = xyzz_t::infinity();
    for (uint32_t j = lo + L - 1; j > lo; j--) {
        R = R.add(B(j));
        T = T.add(R);
    }
    R = R.add(B(lo));
    block_sum(part, T.add(R.mul_u32(lo + 1)));
    if (t == 0) sums[blockIdx.x] = part[0];
}

// ---- precomputed multiples of fixed bases

// Inversions: cuzk::inverse (ff/fq2_t.cuh).

template <class xyzz_t>
CUZK_DEVICE typename xyzz_t::affine to_affine(const xyzz_t& p)
{
    typedef typename xyzz_t::affine affine;
    if (p.is_inf()) return affine::infinity();
    const auto zzz_inv = inverse(p.ZZZ);                 /* 1/ZZZ = 1/Z^3 */
    const auto z_inv = zzz_inv * p.ZZ;                   /* 1/Z = ZZ/ZZZ */
    return affine{p.X * z_inv.sqr(), p.Y * zzz_inv};     /* x = X/ZZ, y = Y/ZZZ */
}

// table[q·N + j] = 2^shift · table[(q − 1)·N + j] for q = 1 .. k − 1, j < N (copy 0, the bases,
// already in place): k − 1 times `shift` doublings and one inversion per point.
template <class xyzz_t>
CUZK_DEVICE void precompute(typename xyzz_t::affine* table, uint32_t N, uint32_t k, uint32_t shift)
{
    typedef typename xyzz_t::affine affine;
    for (uint32_t j = blockIdx.x * blockDim.x + threadIdx.x; j < N; j += gridDim.x * blockDim.x) {
        affine p = affine::load(table + j);
        for (uint32_t q = 1; q < k; q++) {
            xyzz_t acc = xyzz_t::from_affine(p);
            for (uint32_t s = 0; s < shift; s++) acc = acc.dbl();
            p = to_affine(acc);
            p.store(table + (uint64_t)q * N + j);
        }
    }
}

}  // namespace msm
}  // namespace cuzk
