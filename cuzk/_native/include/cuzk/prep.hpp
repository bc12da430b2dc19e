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
// Parallel within one partition: per-chunk counts (prep_count, also sizing the outputs), prefix
// sums, fill; bitmap words shared by two chunks are merged with atomic OR. Cost: two passes over
// aux (n_aux·32 bytes each) plus the outputs.
#pragma once
#include <atomic>
#include <vector>

#include "ff.hpp"
#include "parallel.hpp"

namespace cuzk {

static CUZK_INLINE bool bit_at(const uint64_t* w, size_t i) { return (w[i >> 6] >> (i & 63)) & 1; }

inline size_t popcount_words(const uint64_t* w, size_t nbits) {
    size_t c = 0, full = nbits >> 6;
    for (size_t i = 0; i < full; i++) c += (size_t)__builtin_popcountll(w[i]);
    if (nbits & 63) c += (size_t)__builtin_popcountll(w[full] & ((1ULL << (nbits & 63)) - 1));
    return c;
}

struct prep_query_t {
    uint64_t* ones;       // bitmap over the query's SRS index space (zeroed by the caller)
    uint64_t* tail_scalars;  // (cap, 4) canonical
    uint64_t* tail_idx;   // (cap,)
    size_t n_ones, n_tail;
};

struct prep_counts_t {
    size_t ones[3], full[3];  // per query L, A, B (aux only)
};

// Chunks of the aux range that both passes split the same way (parallel_chunks: chunk k always
// covers the same range): the count pass records, per chunk, its full scalars per query and its
// density ranks, so the fill pass starts writing without counting again.
struct prep_chunk_t {
    size_t full[3];   // full scalars of the chunk in L, A, B
    size_t ra, rb;    // set a_aux / b_aux bits of the chunk
};

inline size_t prep_parts(size_t n_aux, size_t threads) {
    return std::max<size_t>(1, std::min(resolve_threads(threads), (n_aux + 65535) / 65536));
}

// Pass 1 of prep (the only one that reads aux twice): totals for sizing the outputs, and the
// per-chunk counts of prep_fill (chunks: `parts` entries, parts = prep_parts(n_aux, threads)).
inline prep_counts_t prep_count(const fr_t* aux, size_t n_aux, const uint64_t* a_aux,
                                const uint64_t* b_aux, size_t parts, prep_chunk_t* chunks) {
    std::vector<prep_counts_t> part(parts);
    parallel_chunks(n_aux, parts, [&](size_t b, size_t e, size_t t) {
        prep_counts_t c{};
        prep_chunk_t k{};
        for (size_t j = b; j < e; j++) {
            const bool ia = bit_at(a_aux, j), ib = bit_at(b_aux, j);
            k.ra += ia; k.rb += ib;
            const fr_t& v = aux[j];
            if (v.is_zero()) continue;
            size_t* dst = v.is_one() ? c.ones : c.full;
            dst[0]++;
            dst[1] += ia;
            dst[2] += ib;
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

// Pass 2: fill. q[0..2] = L, A, B outputs sized from prep_count (+ inputs in the tails of A, B);
// chunks/parts: prep_count's per-chunk counts over the same aux and densities.
inline void prep_fill(const fr_t* inputs, size_t n_in, const fr_t* aux, size_t n_aux,
                      const uint64_t* a_aux, const uint64_t* b_input, const uint64_t* b_aux,
                      prep_query_t* q, size_t parts, const prep_chunk_t* chunks, bool canonical = true) {
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
        q[1].tail_idx[ta++] = i;
        if (bit_at(b_input, i)) {
            std::memcpy(q[2].tail_scalars + 4 * tb, c, 32);
            q[2].tail_idx[tb++] = rb++;
        }
    }
    const size_t a_base = n_in, b_base = rb;
    std::vector<prep_chunk_t> start(parts);
    // exclusive prefix sums: where each chunk starts writing (tails after the inputs)
    prep_chunk_t run{{0, ta, tb}, 0, 0};
    for (size_t t = 0; t < parts; t++) {
        start[t] = run;
        for (int k = 0; k < 3; k++) run.full[k] += chunks[t].full[k];
        run.ra += chunks[t].ra; run.rb += chunks[t].rb;
    }
    std::atomic<size_t> ones_tot[3] = {{0}, {0}, {0}};
    parallel_chunks(n_aux, parts, [&](size_t b, size_t e, size_t t) {
        prep_chunk_t c = start[t];
        size_t nones[3] = {0, 0, 0};
        // bitmap words: accumulate locally per query and flush with atomic OR
        uint64_t acc[3] = {0, 0, 0};
        size_t accw[3] = {SIZE_MAX, SIZE_MAX, SIZE_MAX};
        auto setbit = [&](int k, size_t idx) {
            size_t w = idx >> 6;
            if (w != accw[k]) {
                if (accw[k] != SIZE_MAX && acc[k])
                    __atomic_fetch_or(&q[k].ones[accw[k]], acc[k], __ATOMIC_RELAXED);
                accw[k] = w; acc[k] = 0;
            }
            acc[k] |= 1ULL << (idx & 63);
            nones[k]++;
        };
        size_t ra = c.ra, rbb = c.rb;
        for (size_t j = b; j < e; j++) {
            bool ia = bit_at(a_aux, j), ib = bit_at(b_aux, j);
            size_t ia_idx = a_base + ra, ib_idx = b_base + rbb;
            ra += ia; rbb += ib;
            const fr_t& v = aux[j];
            if (v.is_zero()) continue;
            if (v.is_one()) {
                setbit(0, j);
                if (ia) setbit(1, ia_idx);
                if (ib) setbit(2, ib_idx);
                continue;
            }
            uint64_t cs[4];
            put(cs, v);
            std::memcpy(q[0].tail_scalars + 4 * c.full[0], cs, 32);
            q[0].tail_idx[c.full[0]++] = j;
            if (ia) { std::memcpy(q[1].tail_scalars + 4 * c.full[1], cs, 32); q[1].tail_idx[c.full[1]++] = ia_idx; }
            if (ib) { std::memcpy(q[2].tail_scalars + 4 * c.full[2], cs, 32); q[2].tail_idx[c.full[2]++] = ib_idx; }
        }
        for (int k = 0; k < 3; k++) {
            if (accw[k] != SIZE_MAX && acc[k])
                __atomic_fetch_or(&q[k].ones[accw[k]], acc[k], __ATOMIC_RELAXED);
            ones_tot[k] += nones[k];
        }
    });
    for (int k = 0; k < 3; k++) q[k].n_ones = ones_tot[k];
    q[0].n_tail = run.full[0];
    q[1].n_tail = run.full[1];
    q[2].n_tail = run.full[2];
}

}  // namespace cuzk
