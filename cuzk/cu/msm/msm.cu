// Program "msm": multi-scalar multiplication Σ k_i·P_i over G1 and G2 (signed digits, buckets
// cut into fixed-size segments, precomputed multiples of fixed bases), driven by
// cuzk/_cuda_msm.py.  The algorithm and the contracts of every step: msm/msm.cuh.  Here: the
// extern "C" kernels, group-independent ones once, the others per group (_g1, _g2).
#include "msm/msm.cuh"

using namespace cuzk;

extern "C" __global__ void cuzk_msm_count(uint32_t* counts, const uint32_t* scalars, uint32_t n, uint32_t c,
                                          uint32_t W, uint32_t Wk, uint32_t mont)
{
    msm::count(counts, scalars, n, c, W, Wk, mont);
}

extern "C" __global__ void cuzk_msm_scatter(uint32_t* entries, uint32_t* counts, const uint64_t* off,
                                            const uint32_t* scalars, const uint32_t* idx, uint32_t n,
                                            uint32_t N, uint32_t c, uint32_t W, uint32_t Wk, uint32_t mont,
                                            uint32_t b_lo, uint32_t b_hi)
{
    msm::scatter(entries, counts, off, scalars, idx, n, N, c, W, Wk, mont, b_lo, b_hi);
}

extern "C" __global__ void cuzk_msm_cursors(uint32_t* cur, const uint64_t* off, uint32_t nb)
{
    msm::cursors(cur, off, nb);
}

// Prefix sums over the buckets (msm::tile_totals / scan_block / tile_apply): of the counts
// (off[b] = Σ_{b'<b} counts[b']) and of the segments (seg[b] = Σ_{b'<b} ceil((off[b'+1] −
// off[b']) / S): segments of <= S items per bucket).  Dynamic shared memory: 8·blockDim.x bytes
// (extern shared arrays of one program need distinct names).
extern "C" __global__ void cuzk_msm_tiles_counts(uint64_t* tiles, const uint32_t* counts, uint32_t nb, uint32_t K)
{
    CUZK_DYN_SMEM(uint64_t, tc_red);
    msm::tile_totals(tiles, tc_red, nb, K, [&](uint32_t b) { return (uint64_t)counts[b]; });
}
extern "C" __global__ void cuzk_msm_apply_counts(uint64_t* off, const uint64_t* tile_off, const uint32_t* counts,
                                                 uint32_t nb, uint32_t K, uint32_t ntiles)
{
    CUZK_DYN_SMEM(uint64_t, ac_chunk);
    msm::tile_apply(off, ac_chunk, tile_off, nb, K, ntiles, [&](uint32_t b) { return (uint64_t)counts[b]; });
}
// flat != 0: the pieces of msm::chunk_sums (cut at global multiples of S) instead of
// bucket-relative segments (msm::segments_of).
// Levels past the one that left every bucket one sum do nothing (a uniform MSM needs one or two of
// the levels its plan allows for the worst case, all its scalars equal): level L's
// apply_segments sets more[L] when some bucket gets more than one sum, and level L + 1's four
// launches (tiles_segments, scan_block, apply_segments, sum_partials) return at once when their
// `need` (= more + L) is 0; `need` null: always run (level 0, the counts' scan).  The window
// kernel then reads the last level that ran (msm::last_level).
#define CUZK_MSM_UNLESS_NEEDED(need) if ((need) && *(need) == 0) return
extern "C" __global__ void cuzk_msm_tiles_segments(uint64_t* tiles, const uint64_t* off, uint32_t nb, uint32_t S,
                                                   uint32_t K, uint32_t flat, const uint32_t* need)
{
    CUZK_MSM_UNLESS_NEEDED(need);
    CUZK_DYN_SMEM(uint64_t, ts_red);
    msm::tile_totals(tiles, ts_red, nb, K, [&](uint32_t b) { return msm::segments_of(off, b, S, flat); });
}
extern "C" __global__ void cuzk_msm_apply_segments(uint64_t* seg, const uint64_t* tile_off, const uint64_t* off,
                                                   uint32_t nb, uint32_t S, uint32_t K, uint32_t ntiles,
                                                   uint32_t flat, const uint32_t* need, uint32_t* more)
{
    CUZK_MSM_UNLESS_NEEDED(need);
    CUZK_DYN_SMEM(uint64_t, as_chunk);
    bool many = false;
    msm::tile_apply(seg, as_chunk, tile_off, nb, K, ntiles, [&](uint32_t b) {
        const uint64_t v = msm::segments_of(off, b, S, flat);
        many |= v > 1;
        return v;
    });
    if (many) *more = 1;                      // the same word from any thread: a benign race
}
extern "C" __global__ void cuzk_msm_scan_block(uint64_t* out, const uint64_t* in, uint32_t n, const uint32_t* need)
{
    CUZK_MSM_UNLESS_NEEDED(need);
    CUZK_DYN_SMEM(uint64_t, sb_chunk);
    msm::scan_block(out, sb_chunk, in, n);
}

// Level 0 over the sorted entries: bucket-relative segments (NAME = cuzk_msm_sum_points) or
// flat chunks (cuzk_msm_sum_points_flat), the same arguments; cuzk_msm_sum_points_affine takes
// them too (the flat chunks, affine additions sharing one inversion per block and step), with
// dynamic shared memory of blockDim.x field elements, blockDim.x a power of two;
// cuzk_msm_sum_points_batch takes them and its lanes' state (affine accumulators, prefix products
// and words, cap rows each: msm::sum_points_batch).
#define CUZK_MSM_POINTS_KERNEL(NAME, FN, G)                                                             \
    extern "C" __global__ void NAME##_##G(G##_xyzz_t* out, const uint64_t* seg, const uint64_t* off,    \
                                          const uint32_t* entries, const G##_affine_t* points,          \
                                          uint32_t nb, uint32_t S)                                      \
    {                                                                                                   \
        msm::FN(out, seg, off, entries, points, nb, S);                                                 \
    }

// The batch kernels are left at the compiler's register choice (sm_90: 240 registers, 2 blocks of
// 128 per SM).  Capped by __launch_bounds__(128, 3) (168 registers + a 280-byte stack, 3 blocks)
// they were slower on the H200 (session 10: G1 2^24 c = 16 k = 4 118.9 vs 101.7 ms, 2^27 c = 20
// k = 2 790.6 vs 694.4; session 13, with the lane's points loaded late to fit: 110.9 vs 102.0,
// 736.5 vs 689.9).  Capped by __maxnreg__ (H100, session 40, G1 c = 20 k = 2, level 0 at 2^24 /
// 2^27 against the default's 86.7 / 575.2 ms, same call): 224 registers + 44 local loads/stores,
// 3 blocks of 96: 112.5 / 771.9; 200 + 104, 5 of 64: 95.1 / 643.7; 184 + 152, 11 of 32: 103.7 /
// 719.0.  More warps per SM do not pay for the spills: the default stays.

/* lanes: cap rows of acc (affine), then cap of pre (field), then cap of word (uint2); F: the field
   type the kernel computes in (the same bytes as the group's: only its products may differ) */
#define CUZK_MSM_BATCH_KERNEL(G, F)                                                                     \
    extern "C" __global__ void cuzk_msm_sum_points_batch_##G(                                          \
        G##_xyzz_t* out, const uint64_t* seg, const uint64_t* off, const uint32_t* entries,             \
        const G##_affine_t* points, uint32_t nb, uint32_t S, G##_affine_t* lanes, uint64_t cap)         \
    {                                                                                                   \
        typedef affine_t<F> A;                                                                          \
        A* acc = reinterpret_cast<A*>(lanes);                                                           \
        F* pre = reinterpret_cast<F*>(acc + cap);                                                       \
        msm::sum_points_batch(reinterpret_cast<xyzz_t<F>*>(out), seg, off, entries,                     \
                              reinterpret_cast<const A*>(points), nb, S, acc, pre,                      \
                              reinterpret_cast<uint2*>(pre + cap));                                     \
    }

// The field each group's batch kernel computes in.  G1 with the Fq products inlined
// (mont_t<fq_params_t>, the same bytes as fq_t) was slower on the H200 (session 15: level 0
// 552 → 615 ms at 2^27, 86 → 95 ms at 2^24; 230 registers, a larger body): fq_t's calls stay.
#define CUZK_MSM_BATCH_FIELD_g1 fq_t
#define CUZK_MSM_BATCH_FIELD_g2 fq2_t

#define CUZK_MSM_GROUP(G)                                                                               \
    CUZK_MSM_POINTS_KERNEL(cuzk_msm_sum_points, sum_points, G)                                          \
    CUZK_MSM_POINTS_KERNEL(cuzk_msm_sum_points_flat, sum_points_flat, G)                                \
    extern "C" __global__ void cuzk_msm_sum_points_affine_##G(                                          \
        G##_xyzz_t* out, const uint64_t* seg, const uint64_t* off, const uint32_t* entries,             \
        const G##_affine_t* points, uint32_t nb, uint32_t S)                                            \
    {                                                                                                   \
        CUZK_DYN_SMEM(uint4, affine_tree_##G);                                                          \
        msm::sum_points_affine<CUZK_MSM_AFFINE_LANES>(out, seg, off, entries, points, nb, S,            \
                                                      affine_tree_##G);                                 \
    }                                                                                                   \
    CUZK_MSM_BATCH_KERNEL(G, CUZK_MSM_BATCH_FIELD_##G)                                                  \
    extern "C" __global__ void cuzk_msm_sum_partials_##G(G##_xyzz_t* out, const uint64_t* seg,          \
                                                         const uint64_t* off, const G##_xyzz_t* in,     \
                                                         uint32_t nb, uint32_t S, const uint32_t* need) \
    {                                                                                                   \
        CUZK_MSM_UNLESS_NEEDED(need);                                                                   \
        msm::sum_partials(out, seg, off, in, nb, S);                                                    \
    }                                                                                                   \
    /* dynamic shared memory: blockDim.x XYZZ points; the sums and offsets of the last level that */   \
    /* ran: even levels write sums_e at seg_e, odd ones sums_o at seg_o (msm::last_level) */            \
    extern "C" __global__ void cuzk_msm_windows_##G(G##_xyzz_t* sums, const G##_xyzz_t* sums_e,         \
                                                    const uint64_t* seg_e, const G##_xyzz_t* sums_o,    \
                                                    const uint64_t* seg_o, const uint32_t* more,        \
                                                    uint32_t levels, uint32_t c, uint32_t P)            \
    {                                                                                                   \
        CUZK_DYN_SMEM(G##_xyzz_t, part_##G);                                                            \
        const bool odd = msm::last_level(more, levels) & 1u;                                            \
        msm::windows(sums, part_##G, odd ? sums_o : sums_e, odd ? seg_o : seg_e, c, P);                 \
    }                                                                                                   \
    extern "C" __global__ void cuzk_msm_precompute_##G(G##_affine_t* table, uint32_t N, uint32_t k,     \
                                                       uint32_t shift)                                  \
    {                                                                                                   \
        msm::precompute<G##_xyzz_t>(table, N, k, shift);                                                \
    }

CUZK_MSM_GROUP(g1)
CUZK_MSM_GROUP(g2)
#undef CUZK_MSM_GROUP
#undef CUZK_MSM_POINTS_KERNEL
#undef CUZK_MSM_UNLESS_NEEDED
