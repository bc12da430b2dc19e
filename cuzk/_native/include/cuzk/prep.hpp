// prep_msm: split a partition's witness for the bit-scalar MSM strategy (DESIGN §2 stage 1).
//
// For each query Q in {L, A, B} the SRS points are indexed in Q's density-compacted space:
//   L: aux j                       -> j
//   A: input i                     -> i;  aux j with a_aux bit -> n_in + rank(a_aux, j)
//   B: input i with b_input bit    -> rank(b_input, i); aux j with b_aux bit -> popcount(b_input) + rank(b_aux, j)
// Every aux scalar (Montgomery) is classified: 0 (skipped), 1 (a bit in Q's `ones` bitmap: batch
// addition) or full (appended to Q's tail as canonical scalar — or left in Montgomery form for
// the GPU MSM — + SRS index). Inputs always go to
// the tail (canonical), whatever their value. Tails are ordered by SRS index.
// Parallel within one partition: per-chunk counts (prep_count, also sizing the outputs and
// classifying aux into two bitmaps, ones and full), prefix sums, fill (prep_fill: word-level over
// the bitmaps, reading aux again only for its full scalars); bitmap words shared by two chunks
// are merged with atomic OR. Cost: one pass over aux (n_aux·32 bytes) plus the full scalars,
// the bitmaps (n_aux/4 bytes) and the outputs.
#pragma once
#include <atomic>
#include <cstring>
#include <vector>

#include "ff.hpp"
#include "parallel.hpp"

namespace cuzk {

static CUZK_INLINE bool bit_at(const uint64_t* w, size_t i) { return (w[i >> 6] >> (i & 63)) & 1; }

// Set bits among the first nbits of w.  A portable build (no -march) compiles
// __builtin_popcountll to a bit-twiddling sequence; on x86-64 CPUs with POPCNT (every one since
// 2008) the same loop inlined into a function built for it runs instead, ~3x faster.
__attribute__((always_inline)) static inline size_t popcount_words_body(const uint64_t* w, size_t nbits) {
    size_t c = 0, full = nbits >> 6;
    for (size_t i = 0; i < full; i++) c += (size_t)__builtin_popcountll(w[i]);
    if (nbits & 63) c += (size_t)__builtin_popcountll(w[full] & ((1ULL << (nbits & 63)) - 1));
    return c;
}
#if defined(__x86_64__) && !defined(__POPCNT__)
__attribute__((target("popcnt"))) static size_t popcount_words_popcnt(const uint64_t* w, size_t nbits) {
    return popcount_words_body(w, nbits);
}
#endif

inline size_t popcount_words(const uint64_t* w, size_t nbits) {
#if defined(__x86_64__) && !defined(__POPCNT__)
    static const bool has = __builtin_cpu_supports("popcnt");
    if (has) return popcount_words_popcnt(w, nbits);
#endif
    return popcount_words_body(w, nbits);
}

struct prep_query_t {
    uint64_t* ones;       // bitmap over the query's SRS index space (zeroed by the caller)
    uint64_t* tail_scalars;  // (cap, 4) canonical
    uint32_t* tail_idx;   // (cap,): SRS indices (the caller checks the index spaces fit 32 bits)
    size_t n_ones, n_tail;
};

struct prep_counts_t {
    size_t ones[3], full[3];  // per query L, A, B (aux only)
};

// Chunks of the aux words that both passes split the same way (parallel_chunks over the
// n_aux/64 words of the bitmaps: chunk k always covers the same words, and no two chunks share
// one): the count pass records, per chunk, its full scalars per query and its density ranks, so
// the fill pass starts writing without counting again.
struct prep_chunk_t {
    size_t full[3];   // full scalars of the chunk in L, A, B
    size_t ra, rb;    // set a_aux / b_aux bits of the chunk
};

inline size_t prep_words(size_t n_aux) { return (n_aux + 63) / 64; }

// The bits of word w that stand for aux values (all but past n_aux in the last word).
static CUZK_INLINE uint64_t prep_live(size_t n_aux, size_t w) {
    const size_t nb = std::min<size_t>(64, n_aux - w * 64);
    return nb == 64 ? ~0ULL : (1ULL << nb) - 1;
}

inline size_t prep_parts(size_t n_aux, size_t threads) {
    return std::max<size_t>(1, std::min(resolve_threads(threads), (n_aux + 65535) / 65536));
}

// Pass 1, the only one that reads every aux scalar: classifies aux j into the bitmaps
// one_w (v = 1; this is L's `ones`, its index space is aux's) and full_w (v ∉ {0, 1}), both
// prep_words(n_aux) words, every word written; returns the totals that size the outputs and
// fills the per-chunk counts of prep_fill (chunks: `parts` entries, parts = prep_parts(n_aux,
// threads)).  Counts per query are popcounts of whole words (ones and full bits & density).
inline prep_counts_t prep_count(const fr_t* aux, size_t n_aux, const uint64_t* a_aux,
                                const uint64_t* b_aux, size_t parts, prep_chunk_t* chunks,
                                uint64_t* one_w, uint64_t* full_w) {
    const size_t nw = prep_words(n_aux);
    std::vector<prep_counts_t> part(parts);
    parallel_chunks(nw, parts, [&](size_t wb, size_t we, size_t t) {
        prep_counts_t c{};
        prep_chunk_t k{};
        for (size_t w = wb; w < we; w++) {
            const size_t j0 = w * 64, j1 = std::min(j0 + 64, n_aux);
            // branch-free: the three classes come in random order (a branch per value would
            // mispredict about half the time)
            uint64_t o = 0, nz = 0;
            for (size_t j = j0; j < j1; j++) {
                const uint64_t* l = aux[j].l;
                uint64_t any = 0, diff = 0;
                for (int i = 0; i < 4; i++) { any |= l[i]; diff |= l[i] ^ fr_t::one().l[i]; }
                const uint64_t sh = j - j0;
                nz |= (uint64_t)(any != 0) << sh;
                o |= (uint64_t)(diff == 0) << sh;
            }
            const uint64_t f = nz & ~o;
            const uint64_t live = prep_live(n_aux, w);
            const uint64_t A = a_aux[w] & live, B = b_aux[w] & live;
            one_w[w] = o;
            full_w[w] = f;
            k.ra += (size_t)__builtin_popcountll(A);
            k.rb += (size_t)__builtin_popcountll(B);
            c.ones[0] += (size_t)__builtin_popcountll(o);
            c.ones[1] += (size_t)__builtin_popcountll(o & A);
            c.ones[2] += (size_t)__builtin_popcountll(o & B);
            c.full[0] += (size_t)__builtin_popcountll(f);
            c.full[1] += (size_t)__builtin_popcountll(f & A);
            c.full[2] += (size_t)__builtin_popcountll(f & B);
        }
        for (int q = 0; q < 3; q++) k.full[q] = c.full[q];
        part[t] = c;
        chunks[t] = k;
    });
    prep_counts_t tot{};
    for (auto& c : part)
        for (int q = 0; q < 3; q++) { tot.ones[q] += c.ones[q]; tot.full[q] += c.full[q]; }
    return tot;
}

// Bits of x at the set positions of mask, packed from bit 0 in the order of those positions
// (BMI2's pext, written out: portable builds, and the ones are few per word).
static CUZK_INLINE uint64_t pack_bits(uint64_t x, uint64_t mask) {
    uint64_t out = 0;
    for (uint64_t m = x & mask; m; m &= m - 1) {
        const uint64_t low = (m & (0 - m)) - 1;       // the bits below the lowest set bit of m
        out |= 1ULL << __builtin_popcountll(mask & low);
    }
    return out;
}

// Pass 2: fill. q[0..2] = L, A, B outputs sized from prep_count (+ inputs in the tails of A, B);
// q[0].ones is prep_count's one_w (already L's bitmap). chunks/parts: prep_count's per-chunk
// counts over the same words; one_w/full_w: its bitmaps.  Reads aux only for the full scalars;
// the ones of A and B are word-level packs of one_w along the density bits.
inline void prep_fill(const fr_t* inputs, size_t n_in, const fr_t* aux, size_t n_aux,
                      const uint64_t* a_aux, const uint64_t* b_input, const uint64_t* b_aux,
                      prep_query_t* q, size_t parts, const prep_chunk_t* chunks,
                      const uint64_t* one_w, const uint64_t* full_w, bool canonical = true) {
    // tails in canonical form (the CPU MSM), or left in Montgomery form (the GPU MSM converts)
    auto put = [canonical](uint64_t* dst, const fr_t& v) {
        if (canonical) {
            v.to_canonical(dst);
        } else {
            std::memcpy(dst, &v, 32);
        }
    };
    // inputs first: they come first in the A and B index spaces, so tails stay index-ordered
    size_t ta = 0, tb = 0, rb = 0;
    for (size_t i = 0; i < n_in; i++) {
        uint64_t c[4];
        put(c, inputs[i]);
        std::memcpy(q[1].tail_scalars + 4 * ta, c, 32);
        q[1].tail_idx[ta++] = (uint32_t)i;
        if (bit_at(b_input, i)) {
            std::memcpy(q[2].tail_scalars + 4 * tb, c, 32);
            q[2].tail_idx[tb++] = (uint32_t)rb++;
        }
    }
    const size_t a_base = n_in, b_base = rb, nw = prep_words(n_aux);
    std::vector<prep_chunk_t> start(parts);
    // exclusive prefix sums: where each chunk starts writing (tails after the inputs)
    prep_chunk_t run{{0, ta, tb}, 0, 0};
    for (size_t t = 0; t < parts; t++) {
        start[t] = run;
        for (int k = 0; k < 3; k++) run.full[k] += chunks[t].full[k];
        run.ra += chunks[t].ra; run.rb += chunks[t].rb;
    }
    std::atomic<size_t> ones_tot[3] = {{0}, {0}, {0}};
    parallel_chunks(nw, parts, [&](size_t wb, size_t we, size_t t) {
        prep_chunk_t c = start[t];
        size_t nones[3] = {0, 0, 0};
        // A's and B's bitmaps: a chunk's bits start at arbitrary positions, so the words at its
        // two ends may be shared with the neighbours: every word is OR'd atomically (relaxed;
        // two per aux word, uncontended except at the ends)
        auto append = [&](int k, size_t pos, uint64_t bits, size_t nbits) {
            if (!bits) return;
            uint64_t* dst = q[k].ones;
            const size_t w = pos >> 6, sh = pos & 63;
            __atomic_fetch_or(&dst[w], bits << sh, __ATOMIC_RELAXED);
            if (sh && sh + nbits > 64) __atomic_fetch_or(&dst[w + 1], bits >> (64 - sh), __ATOMIC_RELAXED);
            nones[k] += (size_t)__builtin_popcountll(bits);
        };
        size_t ra = c.ra, rbb = c.rb;
        for (size_t w = wb; w < we; w++) {
            const size_t j0 = w * 64;
            const uint64_t live = prep_live(n_aux, w);
            const uint64_t A = a_aux[w] & live, B = b_aux[w] & live, o = one_w[w];
            const size_t pa = (size_t)__builtin_popcountll(A), pb = (size_t)__builtin_popcountll(B);
            nones[0] += (size_t)__builtin_popcountll(o);
            append(1, a_base + ra, pack_bits(o, A), pa);
            append(2, b_base + rbb, pack_bits(o, B), pb);
            // the full scalars are sparse (~10 %): the hardware prefetcher does not follow them,
            // and with canonical tails each one's conversion (a Montgomery product) fills the
            // out-of-order window, so their loads would not overlap: fetch two words ahead
            if (w + 2 < we)
                for (uint64_t f = full_w[w + 2]; f; f &= f - 1)
                    __builtin_prefetch(aux + (w + 2) * 64 + (size_t)__builtin_ctzll(f));
            for (uint64_t f = full_w[w]; f; f &= f - 1) {
                const int i = __builtin_ctzll(f);
                const uint64_t below = (1ULL << i) - 1;
                const size_t j = j0 + (size_t)i;
                uint64_t cs[4];
                put(cs, aux[j]);
                std::memcpy(q[0].tail_scalars + 4 * c.full[0], cs, 32);
                q[0].tail_idx[c.full[0]++] = (uint32_t)j;
                if ((A >> i) & 1) {
                    std::memcpy(q[1].tail_scalars + 4 * c.full[1], cs, 32);
                    q[1].tail_idx[c.full[1]++] = (uint32_t)(a_base + ra + (size_t)__builtin_popcountll(A & below));
                }
                if ((B >> i) & 1) {
                    std::memcpy(q[2].tail_scalars + 4 * c.full[2], cs, 32);
                    q[2].tail_idx[c.full[2]++] = (uint32_t)(b_base + rbb + (size_t)__builtin_popcountll(B & below));
                }
            }
            ra += pa;
            rbb += pb;
        }
        for (int k = 0; k < 3; k++) ones_tot[k] += nones[k];
    });
    for (int k = 0; k < 3; k++) q[k].n_ones = ones_tot[k];
    q[0].n_tail = run.full[0];
    q[1].n_tail = run.full[1];
    q[2].n_tail = run.full[2];
}

}  // namespace cuzk
