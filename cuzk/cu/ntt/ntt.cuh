// NTT over BLS12-381 Fr: one radix-2^S pass of a multi-pass transform.
//
// Mathematics (remainder tree).  The forward transform of x (length n = 2^lg_n,
// coset shift g, g = 1 for the plain transform) evaluates P(X) = sum x_i X^i at
// the roots of X^n - g^n by splitting X^2m - c^2 = (X^m - c)(X^m + c) level by
// level: a Cooley-Tukey butterfly (u, v) -> (u + z v, u - z v) on positions
// (p, p + 2^b), b = lg_n-1 .. 0.  Every pair inside one node shares its twiddle
//     z(l, j) = g^(2^b) * w_(2^(l+1))^bitrev_l(j),   l = lg_n-1-b, j = p >> (b+1),
// stored once per node in heap order: Z[2^l + j] (n entries, Z[0] unused).
// The output is in bit-reversed order: position p holds P(g w_n^bitrev(p)).
// The inverse runs the same tree upwards with Gentleman-Sande butterflies
// (x, y) -> (x + y, (x - y) / z), b = 0 .. lg_n-1, from bit-reversed input to
// natural output, scaled by n (the 1/n is folded elsewhere by the caller).
// Because the twiddle depends only on the node, a pass over bits [lo, lo+S)
// needs no twiddle multiplication between passes, and a coset costs nothing.
// Cost: n/2 * lg_n Fr multiplications per transform; a plain (non-coset)
// transform skips the 7n/8 whose twiddle is Z[1], Z[2] or Z[4] = 1 (its top
// three levels, when they form one 3-bit round) or the n/2 of level 0.
//
// Pass structure.  A pass covers global bits [lo, lo+S) of the position: a
// sub-problem is the 2^S positions that differ only there.  A block holds a
// tile of C = 2^LC sub-problems ("columns"), E = 2^(S+LC) elements, in shared
// memory, and runs rounds of up to 3 bits (8 elements per thread in registers,
// 12 butterflies for a full round) between block barriers.
//   lo > 0  ("column" layout): columns are C consecutive values of the low bits,
//           so every row of the tile is C contiguous elements in memory.
//   lo == 0 ("chunk" layout): columns are C chunks of 2^S contiguous elements;
//           with a bit-reversal on the load (gather) or the store (scatter) the
//           chunk numbers are taken in bit-reversed order so that the permuted
//           side is contiguous across columns.  Permutations cost no extra pass.
// Shared memory holds each element as two 16-byte halves in two planes;
// phys(e) = e ^ ((e >> 3) & 7) makes every round's 8-lane phases hit 8
// distinct 16-byte bank groups (checked for every LC, S used).
#pragma once
#include "ff/bls12_381.cuh"


namespace cuzk {
namespace ntt {

enum : uint32_t {
    F_INV = 1u,           // run the inverse rounds (GS, bits ascending), table d_zinv
    F_FWD = 2u,           // then the forward rounds (CT, bits descending), table d_zfwd
    F_LOAD_BITREV = 4u,   // position p reads d_in[bitrev(p)] (lo == 0 only; d_in != d_out)
    F_STORE_BITREV = 8u,  // position p writes d_out[bitrev(p)] (lo == 0 only; d_in != d_out)
    F_POINTWISE = 16u,    // input = (d_in*d_in_b - d_in_c*K[0]) * K[1]  (gathered with F_LOAD_BITREV)
    F_SCALE_OUT = 32u,    // output *= K[2]
    F_PLAIN_INV = 64u,    // d_zinv is a plain (non-coset) table: Z[1] = Z[2] = Z[4] = 1
    F_PLAIN_FWD = 128u,   // d_zfwd is a plain (non-coset) table
    F_PRODUCT = 256u,     // input = d_in*d_in_b*K[3]  (gathered with F_LOAD_BITREV)
    F_ADD_OUT = 512u,     // output += d_in_c (same index; d_in_c may equal d_out); no d_k
    F_MIRROR_INV = 1024u, // the inverse rounds read d_zinv = the w-coset forward table, mirrored
                          // (mirror_node: no inverse w table is kept)
    F_DEEP = 2048u,       // the tables hold levels < lg_n-3 only, then the deep tail (deep_base):
};                        // the round over bits 0..2 computes its twiddles

CUZK_DEVICE uint32_t brev_bits(uint32_t x, int bits)
{
    return bits == 0 ? 0u : (__brev(x) >> (32 - bits));
}

CUZK_DEVICE fr_t load_fr(const fr_t* p)
{
    const uint4* q = reinterpret_cast<const uint4*>(p);
    uint4 a = q[0], b = q[1];
    fr_t r;
    r.l[0] = a.x; r.l[1] = a.y; r.l[2] = a.z; r.l[3] = a.w;
    r.l[4] = b.x; r.l[5] = b.y; r.l[6] = b.z; r.l[7] = b.w;
    return r;
}

CUZK_DEVICE fr_t load_fr_ro(const fr_t* p)  // read-only path (twiddles)
{
    const uint4* q = reinterpret_cast<const uint4*>(p);
    uint4 a = __ldg(q), b = __ldg(q + 1);
    fr_t r;
    r.l[0] = a.x; r.l[1] = a.y; r.l[2] = a.z; r.l[3] = a.w;
    r.l[4] = b.x; r.l[5] = b.y; r.l[6] = b.z; r.l[7] = b.w;
    return r;
}

CUZK_DEVICE void store_fr(fr_t* p, const fr_t& v)
{
    uint4* q = reinterpret_cast<uint4*>(p);
    q[0] = make_uint4(v.l[0], v.l[1], v.l[2], v.l[3]);
    q[1] = make_uint4(v.l[4], v.l[5], v.l[6], v.l[7]);
}

// The w-coset tables (g = w_2n) need no inverse: there z(l, j) = w_(2^(l+2))^(1 + 2·bitrev_l(j))
// (g^(2^b) = w_(2^(l+2)), w_(2^(l+1)) = its square), and w_(2^(l+2))^(2^(l+1)) = -1, so
//     1/z(l, j) = w_(2^(l+2))^(2^(l+2) - 1 - 2·bitrev_l(j)) = -z(l, 2^l - 1 - j)
// (bitrev_l(2^l - 1 - j) = 2^l - 1 - bitrev_l(j)): the node mirrored inside its level, whose heap
// index is h ^ (2^l - 1), l = floor(log2 h).  A Gentleman-Sande butterfly's (x - y)/z(h) is then
// (y - x)·z(mirror_node(h)), with no extra product; adjacent nodes read adjacent (descending)
// entries, so the loads stay coalesced.  h >= 1.
CUZK_DEVICE uint32_t mirror_node(uint32_t h)
{
    return h ^ ((0x80000000u >> __clz(h)) - 1u);
}

// Deep tables (F_DEEP).  The three deepest levels hold 7/8 of a heap table (3.5 GiB of 4 at
// 2^27); a deep table keeps the levels < lt = lg_n - 3 (2^lt entries) and, after them, a tail
//     T[0..2] = w8^2, w8, w8^3     (w8 = w^(n/8): the table's primitive 8th root of unity)
//     T[4 ..)  = g·w^i, i < 2^lg_lo, then w^(i·2^lg_lo), i < 2^(lt - lg_lo),   lg_lo = ceil(lt/2)
// (w the table's root of order n, g its coset shift at the deepest level, 1 for a plain table).
// For a node h of level lt, j = h - 2^lt, the base B = g·w^bitrev_lt(j) gives the whole 3-level
// subtree below it (bitrev_(lt+2)(4j + k) = bitrev_2(k)·2^lt + bitrev_lt(j)):
//     z(lt+2, 4j + k) = B·w8^bitrev_2(k),  z(lt+1, 2j + k) = B^2·w8^(2k),  z(lt, j) = B^4,
// so the round over bits 0..2 (lo == 0, A == 0: exactly these levels) costs 1 product for B and
// 2-6 for its seven twiddles instead of seven table loads from the largest levels.
CUZK_DEVICE fr_t deep_base(const fr_t* __restrict__ d_z, uint32_t lg_n, uint32_t h)
{
    const uint32_t lt = lg_n - 3, lg_lo = (lt + 1) / 2;
    const fr_t* pow_lo = d_z + (1u << lt) + 4;
    const uint32_t e = brev_bits(h - (1u << lt), (int)lt);
    return load_fr_ro(pow_lo + (e & ((1u << lg_lo) - 1))) * load_fr_ro(pow_lo + (1u << lg_lo) + (e >> lg_lo));
}

// Twiddle of child k of the group's node at level lt + 2 - t (t = 2: the node itself), from
// B and B2 = B^2 (see deep_base); T = the tail.  k is a compile-time constant where inlined.
CUZK_DEVICE fr_t deep_twiddle(int t, uint32_t k, const fr_t& B, const fr_t& B2, const fr_t* __restrict__ T)
{
    if (t == 2) return B2 * B2;
    if (t == 1) return k == 0 ? B2 : B2 * load_fr_ro(T);
    return k == 0 ? B : B * load_fr_ro(T + (k - 1));   // w8^bitrev_2(k): k = 1, 2, 3 -> T[0..2]
}

// Tile in shared memory (E <= 2^11 elements, E * 32 bytes of dynamic shared
// memory): half h of element e at s[h*E + phys(e)].
constexpr uint32_t TILE_LOG_MAX = 11;

struct tile_t {
    uint4* s;
    uint32_t E;
    static CUZK_DEVICE uint32_t phys(uint32_t e) { return e ^ ((e >> 3) & 7u); }
    CUZK_DEVICE fr_t get(uint32_t pe) const
    {
        uint4 a = s[pe], b = s[E + pe];
        fr_t r;
        r.l[0] = a.x; r.l[1] = a.y; r.l[2] = a.z; r.l[3] = a.w;
        r.l[4] = b.x; r.l[5] = b.y; r.l[6] = b.z; r.l[7] = b.w;
        return r;
    }
    CUZK_DEVICE void put(uint32_t pe, const fr_t& v) const
    {
        s[pe] = make_uint4(v.l[0], v.l[1], v.l[2], v.l[3]);
        s[E + pe] = make_uint4(v.l[4], v.l[5], v.l[6], v.l[7]);
    }
};

// One pass: where its tile lives and how it is cut.  Everything a round needs
// to name the tree nodes of its elements, and the loads/stores need to find
// them in memory.
struct pass_geom_t {
    uint32_t lg_n, lo, S, LC;
    uint32_t E, threads;  // 2^(S+LC), max(1, E/8)
    uint32_t t_blk;       // column layout: the high bits T shared by the tile
    uint32_t l_base;      // column layout: low bits of column 0
    uint32_t t_first;     // chunk layout: chunk number of column 0 (before permutation)
    bool chunk;           // lo == 0
    bool perm;            // chunk layout with bit-reversed chunk order

    // High bits T of the sub-problem of column c.
    CUZK_DEVICE uint32_t sub_t(uint32_t c) const
    {
        if (!chunk) return t_blk;
        uint32_t t = t_first + c;
        return perm ? brev_bits(t, (int)(lg_n - S)) : t;
    }

    // Memory index of tile element (c, m); `permuted` selects the bit-reversed side.
    CUZK_DEVICE uint64_t mem_index(uint32_t c, uint32_t m, bool permuted) const
    {
        if (!chunk)
            return ((uint64_t)t_blk << (lo + S)) | ((uint64_t)m << lo) | (l_base + c);
        if (permuted)  // bitrev(p) for p = (bitrev(t) << S) | m
            return ((uint64_t)brev_bits(m, (int)S) << (lg_n - S)) | (t_first + c);
        return ((uint64_t)sub_t(c) << S) | m;
    }

    // Heap index of the top tree node of the W-bit round at local bit A for the
    // group whose first element is e0 (its bits [A, A+W) of m are 0).
    CUZK_DEVICE uint32_t node(uint32_t e0, uint32_t A, uint32_t W) const
    {
        uint32_t c = e0 & ((1u << LC) - 1);
        uint32_t m0 = e0 >> LC;
        uint32_t lvl = lg_n - lo - A - W;
        return (1u << lvl) + ((sub_t(c) << (S - A - W)) | (m0 >> (A + W)));
    }
};

// Round of W = 3 bits at local bit A: 8 elements per thread, 12 butterflies.
// FWD: Cooley-Tukey top bit first; else Gentleman-Sande bottom bit first.
// TRIV: the round covers the top three levels of the tree (every group has
// h == 1) and the table is plain, so Z[1] = Z[2] = Z[4] = 1: 7 of the 12
// butterflies need no multiplication (decided at compile time per butterfly).
// MIRROR (inverse only): d_z is the w-coset forward table, read through mirror_node.
// DEEP: the round over bits 0..2 of a deep table (F_DEEP; A == 0, lo == 0): twiddles from
// deep_base (mirrored: the base of the mirrored node, children in reverse order).
template <bool FWD, bool TRIV, bool MIRROR = false, bool DEEP = false>
CUZK_DEVICE void round3(const tile_t& tile, const pass_geom_t& g, uint32_t A, const fr_t* __restrict__ d_z)
{
    const uint32_t SH = g.LC + A;  // position of the round's bits in e
    const uint32_t G = g.E >> 3;
    const uint32_t lowmask = (1u << SH) - 1;
    for (uint32_t grp = threadIdx.x; grp < G; grp += g.threads) {
        uint32_t e0 = (grp & lowmask) | ((grp & ~lowmask) << 3);
        uint32_t p0 = tile_t::phys(e0);
        fr_t x[8];
#pragma unroll
        for (int j = 0; j < 8; j++) x[j] = tile.get(p0 ^ tile_t::phys((uint32_t)j << SH));
        uint32_t h = TRIV ? 1u : g.node(e0, A, 3);
        fr_t B, B2, zd;                     // DEEP: the subtree's base, its square, the twiddle
        const fr_t* T = d_z + (1u << (g.lg_n - 3));
        if (DEEP) {
            B = deep_base(d_z, g.lg_n, MIRROR ? mirror_node(h) : h);
            B2 = B * B;
        }
        if (FWD) {
#pragma unroll
            for (int t = 2; t >= 0; t--) {
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    if (j & (1 << t)) continue;
                    const bool one = TRIV && (j >> (t + 1)) == 0;  // Z[1], Z[2] or Z[4]
                    fr_t v = x[j + (1 << t)];
                    if (DEEP) {
                        if ((j & ((2 << t) - 1)) == 0)     // first use of this node's twiddle
                            zd = deep_twiddle(t, (uint32_t)(j >> (t + 1)), B, B2, T);
                        v = v * zd;
                    } else if (!one) {
                        v = v * load_fr_ro(d_z + ((h << (2 - t)) + (j >> (t + 1))));
                    }
                    x[j + (1 << t)] = x[j] - v;
                    x[j] = x[j] + v;
                }
            }
        } else {
#pragma unroll
            for (int t = 0; t < 3; t++) {
#pragma unroll
                for (int j = 0; j < 8; j++) {
                    if (j & (1 << t)) continue;
                    const bool one = TRIV && (j >> (t + 1)) == 0;
                    const uint32_t z = (h << (2 - t)) + (j >> (t + 1));
                    fr_t u = x[j], v = x[j + (1 << t)];
                    x[j] = u + v;
                    if (DEEP) {
                        if ((j & ((2 << t) - 1)) == 0) {   // first use of this node's twiddle
                            const uint32_t k = (uint32_t)(j >> (t + 1));
                            zd = deep_twiddle(t, MIRROR ? (4u >> t) - 1u - k : k, B, B2, T);
                        }
                        x[j + (1 << t)] = MIRROR ? (v - u) * zd : (u - v) * zd;
                    } else if (one)
                        x[j + (1 << t)] = u - v;
                    else if (MIRROR)
                        x[j + (1 << t)] = (v - u) * load_fr_ro(d_z + mirror_node(z));
                    else
                        x[j + (1 << t)] = (u - v) * load_fr_ro(d_z + z);
                }
            }
        }
#pragma unroll
        for (int j = 0; j < 8; j++) tile.put(p0 ^ tile_t::phys((uint32_t)j << SH), x[j]);
    }
}

// The deep round (round3 with DEEP, A == 0) out of line: its own register allocation, so that
// its extra live values (B, B^2, the twiddle) do not make the other rounds of the deep kernel spill.
template <bool FWD, bool MIRROR>
CUZK_NOINLINE void round3_deep(const tile_t tile, const pass_geom_t g, const fr_t* __restrict__ d_z)
{
    round3<FWD, false, MIRROR, true>(tile, g, 0, d_z);
}

// Round of one bit at local bit A (the top rounds when 3 does not divide S).
// plain: the table is plain, so the level-0 node (h == 1, uniform across the
// block when the round is the top level) has twiddle 1.  MIRROR: as in round3.
template <bool FWD, bool MIRROR = false>
CUZK_DEVICE void round1(const tile_t& tile, const pass_geom_t& g, uint32_t A, const fr_t* __restrict__ d_z,
                        bool plain)
{
    const uint32_t SH = g.LC + A;
    const uint32_t G = g.E >> 1;
    const uint32_t lowmask = (1u << SH) - 1;
#pragma unroll 1
    for (uint32_t grp = threadIdx.x; grp < G; grp += g.threads) {
        uint32_t e0 = (grp & lowmask) | ((grp & ~lowmask) << 1);
        uint32_t p0 = tile_t::phys(e0), p1 = p0 ^ tile_t::phys(1u << SH);
        fr_t u = tile.get(p0), v = tile.get(p1);
        uint32_t h = g.node(e0, A, 1);
        const bool one = plain && h == 1u;
        if (FWD) {
            if (!one) v = v * load_fr_ro(d_z + h);
            tile.put(p0, u + v);
            tile.put(p1, u - v);
        } else {
            tile.put(p0, u + v);
            if (one)
                tile.put(p1, u - v);
            else if (MIRROR)
                tile.put(p1, (v - u) * load_fr_ro(d_z + mirror_node(h)));
            else
                tile.put(p1, (u - v) * load_fr_ro(d_z + h));
        }
    }
}

// Rounds cover local bits [3k, min(3k+3, S)); a partial top round runs as
// single-bit rounds.  Every round ends with a block barrier.  plain: the table
// is plain (F_PLAIN_*), so the top-level twiddles are 1 (see round3/round1).
// MIRROR: d_z is the w-coset forward table (F_MIRROR_INV; never plain).
// deep: the tables are deep (F_DEEP): the round over bits 0..2 (lo == 0, A == 0; S >= 3, lg_n >= 6)
// computes its twiddles.
template <bool MIRROR>
CUZK_DEVICE void rounds_inv(const tile_t& tile, const pass_geom_t& g, const fr_t* d_z, bool plain, bool deep)
{
    uint32_t A = 0;
    if (deep && g.lo == 0) {
        round3_deep<false, MIRROR>(tile, g, d_z);
        __syncthreads();
        A = 3;
    }
#pragma unroll 1
    for (; A + 3 <= g.S; A += 3) {
        if (!MIRROR && plain && g.lo + A + 3 == g.lg_n)
            round3<false, true>(tile, g, A, d_z);
        else
            round3<false, false, MIRROR>(tile, g, A, d_z);
        __syncthreads();
    }
#pragma unroll 1
    for (; A < g.S; A++) {
        round1<false, MIRROR>(tile, g, A, d_z, plain && !MIRROR);
        __syncthreads();
    }
}

CUZK_DEVICE void rounds_fwd(const tile_t& tile, const pass_geom_t& g, const fr_t* d_z, bool plain, bool deep)
{
    uint32_t full = g.S / 3 * 3;
    const uint32_t last = deep && g.lo == 0 ? 3u : 0u;   // the deep round runs after the loop
#pragma unroll 1
    for (uint32_t A = g.S; A-- > full;) {
        round1<true>(tile, g, A, d_z, plain);
        __syncthreads();
    }
#pragma unroll 1
    for (uint32_t A = full; A >= last + 3;) {
        A -= 3;
        if (plain && g.lo + A + 3 == g.lg_n)
            round3<true, true>(tile, g, A, d_z);
        else
            round3<true, false>(tile, g, A, d_z);
        __syncthreads();
    }
    if (last) {
        round3_deep<true, false>(tile, g, d_z);
        __syncthreads();
    }
}

// The whole pass: load (optionally gathered, or the H pointwise product),
// inverse rounds, forward rounds, store (optionally scattered and scaled).
// Grid: n / 2^(S+LC) blocks of max(1, 2^(S+LC-3)) threads; dynamic shared
// memory 2^(S+LC) * 32 bytes (S + LC <= TILE_LOG_MAX).
// DEEP: the tables are deep (F_DEEP must be set); a separate instantiation (kernel), so that the
// deep round's registers leave the full-table kernel's allocation as it was.
template <bool DEEP>
CUZK_DEVICE void run_pass(fr_t* d_out, const fr_t* d_in, const fr_t* d_in_b, const fr_t* d_in_c,
                          const fr_t* d_zinv, const fr_t* d_zfwd, const fr_t* d_k,
                          uint32_t lg_n, uint32_t lo, uint32_t S, uint32_t LC, uint32_t flags)
{
    CUZK_DYN_SMEM(uint4, smem);
    pass_geom_t g;
    g.lg_n = lg_n;
    g.lo = lo;
    g.S = S;
    g.LC = LC;
    g.E = 1u << (S + LC);
    g.threads = g.E >= 8 ? g.E >> 3 : 1;
    tile_t tile{smem, g.E};
    g.chunk = lo == 0;
    g.perm = (flags & (F_LOAD_BITREV | F_STORE_BITREV)) != 0;
    if (g.chunk) {
        g.t_first = blockIdx.x << LC;
        g.t_blk = g.l_base = 0;
    } else {
        uint32_t lg_groups = lo - LC;  // column groups per value of T
        g.t_blk = blockIdx.x >> lg_groups;
        g.l_base = (blockIdx.x & ((1u << lg_groups) - 1)) << LC;
        g.t_first = 0;
    }
    const uint32_t cmask = (1u << LC) - 1;

    {  // load: element e = (c, m), c = e mod C
        const bool gather = (flags & F_LOAD_BITREV) != 0;
        if (flags & (F_POINTWISE | F_PRODUCT)) {
            const bool pw = (flags & F_POINTWISE) != 0;
            const fr_t k0 = load_fr_ro(d_k + (pw ? 0 : 3));
            const fr_t k1 = pw ? load_fr_ro(d_k + 1) : k0;
#pragma unroll 1
            for (uint32_t e = threadIdx.x; e < g.E; e += g.threads) {
                uint64_t idx = g.mem_index(e & cmask, e >> LC, gather);
                fr_t v = load_fr(d_in + idx) * load_fr(d_in_b + idx);
                v = pw ? (v - load_fr(d_in_c + idx) * k0) * k1 : v * k0;
                tile.put(tile_t::phys(e), v);
            }
        } else {
#pragma unroll 4
            for (uint32_t e = threadIdx.x; e < g.E; e += g.threads) {
                uint64_t idx = g.mem_index(e & cmask, e >> LC, gather);
                tile.put(tile_t::phys(e), load_fr(d_in + idx));
            }
        }
    }
    __syncthreads();
    const bool deep = DEEP;
    if (flags & F_INV) {
        if (flags & F_MIRROR_INV)
            rounds_inv<true>(tile, g, d_zinv, false, deep);
        else
            rounds_inv<false>(tile, g, d_zinv, (flags & F_PLAIN_INV) != 0, deep);
    }
    if (flags & F_FWD) rounds_fwd(tile, g, d_zfwd, (flags & F_PLAIN_FWD) != 0, deep);
    {  // store (every round ended with a barrier)
        const bool scatter = (flags & F_STORE_BITREV) != 0;
        if (flags & (F_SCALE_OUT | F_ADD_OUT)) {
            const bool scale = (flags & F_SCALE_OUT) != 0, add = (flags & F_ADD_OUT) != 0;
            const fr_t k2 = scale ? load_fr_ro(d_k + 2) : fr_t::zero();  // d_k only read when used
#pragma unroll 1
            for (uint32_t e = threadIdx.x; e < g.E; e += g.threads) {
                uint64_t idx = g.mem_index(e & cmask, e >> LC, scatter);
                fr_t v = tile.get(tile_t::phys(e));
                if (scale) v = v * k2;
                if (add) v = v + load_fr(d_in_c + idx);
                store_fr(d_out + idx, v);
            }
        } else {
#pragma unroll 4
            for (uint32_t e = threadIdx.x; e < g.E; e += g.threads) {
                uint64_t idx = g.mem_index(e & cmask, e >> LC, scatter);
                store_fr(d_out + idx, tile.get(tile_t::phys(e)));
            }
        }
    }
}

}  // namespace ntt
}  // namespace cuzk
