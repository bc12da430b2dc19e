// Witness-side vectors of a snarkjs Groth16 proof (CPU backend): the sparse products A·w, B·w
// from a zkey's coefficient records, C = A·w ∘ B·w, and the non-NTT steps of the H scalars on
// the odd points of the doubled domain (the transforms are _native/_ntt's, called from
// _sparse.pyx: this header deliberately does not include ntt.hpp, whose function-local statics
// would be shared with _ntt's through GNU unique symbols).  Reference: snarkjs 0.7.6 src/groth16_prove.js (buildABC1, the FFT steps and
// joinABC) and ffjavascript's roots of unity; see cuzk/_snarkjs_prover.py for the derivation of
// the index maps between snarkjs's domain (generator 5) and cuzk's (generator 7).
//
// Data: records are parallel arrays (zkey section 4): matrix (0 = A, 1 = B), row (constraint),
// col (signal) as uint32 and value as 4 uint64 limbs = coef·2^512 mod r, canonical.  Read as a
// Montgomery element that value is coef·R (R = 2^256), so a Montgomery product with a canonical
// witness value w gives the Montgomery form of coef·w.  Witness values are canonical (< r).
// Outputs are Montgomery unless a name says canonical.  Nothing here touches Python; callers
// release the GIL.  Results do not depend on the thread count.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "ff.hpp"
#include "parallel.hpp"

namespace cuzk {
namespace sparse {

struct coeffs_t {
    const uint32_t* matrix;
    const uint32_t* row;
    const uint32_t* col;
    const uint64_t* value;  // nnz × 4 limbs
    size_t nnz;
};

// Status of validate(): the first offending record (or witness value) and why.
enum { SPARSE_OK = 0, SPARSE_BAD_MATRIX = 1, SPARSE_BAD_ROW = 2, SPARSE_BAD_COL = 3,
       SPARSE_BAD_VALUE = 4, SPARSE_BAD_WITNESS = 5 };

struct check_t {
    size_t index;  // first bad record (or witness entry for SPARSE_BAD_WITNESS)
    int status;
};

// First bad record (matrix > 1, row >= n_rows, col >= n_vars, value >= r), then first witness
// value >= r.  One parallel pass over the records and the witness.
inline check_t validate(const coeffs_t& co, size_t n_rows, const uint64_t* w, size_t n_vars,
                        size_t threads) {
    auto first_bad = [threads](size_t n, auto&& bad) {
        std::atomic<size_t> first{n};
        parallel_for(n, threads, size_t(1) << 15, [&](size_t b, size_t e, size_t) {
            for (size_t i = b; i < e; i++) {
                if (i >= first.load(std::memory_order_relaxed)) return;
                if (bad(i)) {
                    size_t cur = first.load();
                    while (i < cur && !first.compare_exchange_weak(cur, i)) {}
                    return;
                }
            }
        });
        return first.load();
    };
    size_t k = first_bad(co.nnz, [&](size_t i) {
        return co.matrix[i] > 1 || co.row[i] >= n_rows || co.col[i] >= n_vars ||
               !fr_t::is_canonical(co.value + 4 * i);
    });
    if (k < co.nnz) {
        int st = co.matrix[k] > 1 ? SPARSE_BAD_MATRIX
                 : co.row[k] >= n_rows ? SPARSE_BAD_ROW
                 : co.col[k] >= n_vars ? SPARSE_BAD_COL : SPARSE_BAD_VALUE;
        return {k, st};
    }
    k = first_bad(n_vars, [&](size_t i) { return !fr_t::is_canonical(w + 4 * i); });
    if (k < n_vars) return {k, SPARSE_BAD_WITNESS};
    return {0, SPARSE_OK};
}

// true iff row[] is non-decreasing (snarkjs writes the records constraint by constraint).
inline bool rows_sorted(const uint32_t* row, size_t nnz, size_t threads) {
    std::atomic<bool> ok{true};
    parallel_for(nnz > 0 ? nnz - 1 : 0, threads, size_t(1) << 16, [&](size_t b, size_t e, size_t) {
        for (size_t i = b; i < e; i++)
            if (row[i] > row[i + 1]) { ok.store(false, std::memory_order_relaxed); return; }
    });
    return ok.load();
}

// Stable counting sort of the record indices by row: order[k] = record index.  Serial,
// O(nnz + n_rows) time, n_rows + 1 counters of scratch.  Only needed for unsorted records.
inline void sort_by_row(const uint32_t* row, size_t nnz, size_t n_rows, uint32_t* order) {
    std::vector<uint64_t> start(n_rows + 1, 0);
    for (size_t i = 0; i < nnz; i++) start[row[i] + 1]++;
    for (size_t r = 0; r < n_rows; r++) start[r + 1] += start[r];
    for (size_t i = 0; i < nnz; i++) order[start[row[i]]++] = (uint32_t)i;
}

// a[π(i)] = Σ coef·w[col] over the A records of row i, b likewise for B, c[π(i)] = a·b, with
// π(i) = i·row_mult mod n (n = 2^lg; row_mult odd makes π a permutation).  a, b, c must be
// zero on entry (rows without records stay zero).  order: NULL when the records are sorted by
// row, else the permutation from sort_by_row.  Rows are cut into T disjoint runs of records,
// so no two threads touch the same output.  Cost per record: one Fr add when coef = ±1, else
// one Montgomery product + add; per row one product (c); plus n_vars products (the witness to
// Montgomery form, for the ±1 shortcut).
inline void abc_eval(const coeffs_t& co, const uint32_t* order, const uint64_t* w_canon,
                     size_t n_vars, int lg, uint64_t row_mult, fr_t* a, fr_t* b, fr_t* c,
                     size_t threads) {
    const uint64_t mask = (uint64_t(1) << lg) - 1;
    static constexpr uint64_t kOne[4] = CUZK_FR_RR;  // coef = 1: 2^512 mod r
    const fr_t one_coef = fr_t::from_limbs(kOne);
    const fr_t minus_one_coef = -one_coef;           // coef = -1: r - (2^512 mod r)
    const fr_t* wc = reinterpret_cast<const fr_t*>(w_canon);
    std::vector<fr_t> wm(n_vars);
    parallel_for(n_vars, threads, 4096, [&](size_t bb, size_t e, size_t) {
        for (size_t i = bb; i < e; i++) wm[i] = fr_t::from_canonical(w_canon + 4 * i);
    });
    const size_t nnz = co.nnz;
    if (nnz == 0) return;
    auto rec = [order](size_t k) -> size_t { return order ? order[k] : k; };
    // cut points: T nearly equal record ranges, each start moved forward to a row change
    const size_t T = std::max<size_t>(1, std::min(resolve_threads(threads), nnz / 4096 + 1));
    std::vector<size_t> cut(T + 1);
    cut[0] = 0;
    cut[T] = nnz;
    for (size_t t = 1; t < T; t++) {
        size_t p = std::max(cut[t - 1], nnz * t / T);
        while (p > 0 && p < nnz && co.row[rec(p)] == co.row[rec(p - 1)]) p++;
        cut[t] = p;
    }
    parallel_chunks(T, T, [&](size_t t0, size_t t1, size_t) {
        for (size_t t = t0; t < t1; t++) {
            size_t k = cut[t], end = cut[t + 1];
            while (k < end) {
                const uint32_t r = co.row[rec(k)];
                fr_t acc[2] = {fr_t::zero(), fr_t::zero()};
                for (; k < end; k++) {
                    const size_t i = rec(k);
                    if (co.row[i] != r) break;
                    const fr_t v = fr_t::from_limbs(co.value + 4 * i);
                    const uint32_t s = co.col[i];
                    fr_t& dst = acc[co.matrix[i] & 1];
                    if (v == one_coef) dst += wm[s];
                    else if (v == minus_one_coef) dst -= wm[s];
                    else dst += v * wc[s];  /* coef·R · w · R^-1 = Montgomery(coef·w) */
                }
                const size_t pos = (uint64_t(r) * row_mult) & mask;
                a[pos] = acc[0];
                b[pos] = acc[1];
                c[pos] = acc[0] * acc[1];
            }
        }
    });
}

// x[i] *= s·q^i for i < n (chunk starts by exponentiation, then one M per element).
inline void scale_geometric(fr_t* x, size_t n, const fr_t& s, const fr_t& q, size_t threads) {
    parallel_for(n, threads, 8192, [&](size_t b, size_t e, size_t) {
        uint64_t eb = b;
        fr_t cur = s * q.pow(&eb, 1);
        for (size_t i = b; i < e; i++) { x[i] = x[i] * cur; cur *= q; }
    });
}

// Last step of snarkjs's H scalars.  In: a, b, c = values of A·w, B·w, C·w at ω_2n^(2k+1)
// (k < n; after iNTT, scale_geometric by ω_2n and NTT, ω from generator 7).
// Out: h_canon[j] = a[k]·b[k] − c[k] with 2k+1 = J·(2j+1) mod 2n, canonical limbs: the value of
// A·B − C at ω5_2n^(2j+1) = ω_2n^(J·(2j+1)), where ω5_2n is ffjavascript's 2n-th root
// (generator 5) and J = log_{ω_2^32}(ω5_2^32) (odd).  One gather, 1 M + 1 sub + 1 M (to
// canonical) per element.  Needs lg < 32.
inline void h_gather(const fr_t* a, const fr_t* b, const fr_t* c, int lg, uint64_t J,
                     uint64_t* h_canon, size_t threads) {
    const size_t n = size_t(1) << lg;
    const uint64_t mask2 = (uint64_t(2) << lg) - 1;
    const uint64_t Jm = J & mask2;
    parallel_for(n, threads, 8192, [&](size_t bb, size_t e, size_t) {
        for (size_t j = bb; j < e; j++) {
            const uint64_t odd = (Jm * (2 * uint64_t(j) + 1)) & mask2;  // Jm < 2^32, 2j+1 < 2^32
            const size_t k = (size_t)(odd >> 1);
            fr_t v = a[k] * b[k] - c[k];
            v.to_canonical(h_canon + 4 * j);
        }
    });
}

}  // namespace sparse
}  // namespace cuzk
