// R1CS and Groth16 parameter-generation kernels (CPU backend).
//
// Matrices are CSR over rows (constraints): indptr[m+1] (int64), cols[nnz] (uint32 variable index
// in the order [inputs..., aux...]), vals[nnz] (Fr, Montgomery). Callers validate indices and
// shapes; nothing here allocates more than O(threads · block) scratch besides the table of
// fixed_base_t. All functions run on real OS threads and never touch Python.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "ec.hpp"
#include "parallel.hpp"

namespace cuzk {
namespace r1cs {

// Out-of-line point operations: each is compiled once per group instead of being inlined
// (with every field product unrolled) at every call site — same speed (a call is noise next
// to 7M + 4S), a fraction of the compile time.
template <class C>
__attribute__((noinline)) jacobian_t<C> madd(const jacobian_t<C>& p, const affine_t<C>& q) {
    return p.add(q);
}
template <class C>
__attribute__((noinline)) jacobian_t<C> dbl(const jacobian_t<C>& p) { return p.dbl(); }
template <class C>
__attribute__((noinline)) void to_affine_batch(affine_t<C>* out, const jacobian_t<C>* in,
                                               size_t n, typename C::field_t* scratch) {
    batch_to_affine(out, in, n, scratch);
}

// ---- sparse products --------------------------------------------------------------------

// Prefetch the (up to two) cache lines of one Fr element (32 bytes, 16-byte aligned rows of a
// NumPy array may straddle a line).
static inline void prefetch_fr(const fr_t* p, bool write) {
    const char* c = reinterpret_cast<const char*>(p);
    if (write) { __builtin_prefetch(c, 1); __builtin_prefetch(c + sizeof(fr_t) - 1, 1); }
    else { __builtin_prefetch(c, 0); __builtin_prefetch(c + sizeof(fr_t) - 1, 0); }
}

// fn(k) for every k < nnz with j0 <= cols[k] < j1, in increasing k.  64 entries at a time
// through a bit mask (a branch-free compare the compiler vectorizes): a thread that owns 1/T
// of the columns pays well under a nanosecond per entry it skips.
template <class Fn>
inline void for_cols_in(const uint32_t* cols, size_t nnz, size_t j0, size_t j1, Fn&& fn) {
    if (j1 <= j0) return;
    const uint32_t lo = (uint32_t)j0, w = (uint32_t)(j1 - j0);
    size_t k = 0;
    for (; k + 64 <= nnz; k += 64) {
        uint64_t m = 0;
        for (unsigned q = 0; q < 64; q++) m |= uint64_t(uint32_t(cols[k + q] - lo) < w) << q;
        while (m) { fn(k + (size_t)__builtin_ctzll(m)); m &= m - 1; }
    }
    for (; k < nnz; k++)
        if (uint32_t(cols[k] - lo) < w) fn(k);
}

// out[i] = Σ_k vals[k]·z[cols[k]] over row i.  Unit coefficients (the common case) skip the
// product: 1 Fr add instead of 1 Fr mul + add.  The gathers z[cols[k]] are random: the entry
// kPrefetch ahead is prefetched so that several misses are in flight per thread.
inline void spmv(const int64_t* indptr, const uint32_t* cols, const fr_t* vals, size_t m,
                 const fr_t* z, fr_t* out, size_t threads) {
    constexpr int64_t kPrefetch = 24;
    parallel_for(m, threads, 4096, [&](size_t b, size_t e, size_t) {
        const int64_t kend = indptr[e];
        for (size_t i = b; i < e; i++) {
            fr_t acc = fr_t::zero();
            for (int64_t k = indptr[i]; k < indptr[i + 1]; k++) {
                if (k + kPrefetch < kend) prefetch_fr(&z[cols[k + kPrefetch]], false);
                const fr_t& c = vals[k];
                const fr_t& x = z[cols[k]];
                acc += c.is_one() ? x : c * x;
            }
            out[i] = acc;
        }
    });
}

// Transposed product: out[j] = Σ_{(i,k): cols[k]=j} vals[k]·y[i]  for j < n_vars.
// With y = Lagrange coefficients at τ this is the QAP evaluation u_j(τ) (v_j, w_j for B, C).
// Parallel without a transpose: thread t owns the column range [j0, j1) and scans all column
// indices (for_cols_in), multiplying only its own entries — O(T·nnz) index reads, O(nnz) field
// products, no scratch beyond out.  The out[] line of an entry is prefetched a few entries
// before its sum.
inline void spmv_t(const int64_t* indptr, const uint32_t* cols, const fr_t* vals, size_t m,
                   const fr_t* y, size_t n_vars, fr_t* out, size_t threads) {
    size_t T = std::max<size_t>(1, std::min(resolve_threads(threads), (n_vars + 1023) / 1024));
    const size_t nnz = (size_t)indptr[m];
    parallel_chunks(n_vars, T, [&](size_t j0, size_t j1, size_t) {
        for (size_t j = j0; j < j1; j++) out[j] = fr_t::zero();
        // a ring of the last kRing hits: out[] prefetched when a hit is found, summed kRing
        // hits later
        constexpr size_t kRing = 32;
        size_t hk[kRing], hr[kRing], nh = 0, row = 0;
        auto sum = [&](size_t h) {
            const fr_t& c = vals[hk[h]];
            const fr_t& yi = y[hr[h]];
            out[cols[hk[h]]] += c.is_one() ? yi : c * yi;
        };
        for_cols_in(cols, nnz, j0, j1, [&](size_t k) {
            while ((size_t)indptr[row + 1] <= k) row++;
            const size_t h = nh++ % kRing;
            if (nh > kRing) sum(h);
            prefetch_fr(&out[cols[k]], false);
            hk[h] = k;
            hr[h] = row;
        });
        for (size_t i = nh > kRing ? nh - kRing : 0; i < nh; i++) sum(i % kRing);
    });
}

// Bit (j − j0) of words (⌈(j1 − j0)/64⌉ of them, all written) is set iff column j ∈ [j0, j1)
// occurs with a non-zero coefficient (a density: bellperson's DensityTracker).  Threads own
// word ranges and scan all column indices.
inline void column_bits(const uint32_t* cols, const fr_t* vals, size_t nnz, size_t j0,
                        size_t j1, uint64_t* words, size_t threads) {
    const size_t nw = (j1 - j0 + 63) / 64;
    size_t T = std::max<size_t>(1, std::min(resolve_threads(threads), (nw + 255) / 256));
    parallel_chunks(nw, T, [&](size_t w0, size_t w1, size_t) {
        for (size_t w = w0; w < w1; w++) words[w] = 0;
        for_cols_in(cols, nnz, j0 + 64 * w0, std::min(j1, j0 + 64 * w1), [&](size_t k) {
            if (vals[k].is_zero()) return;
            const size_t b = cols[k] - j0;
            words[b >> 6] |= 1ULL << (b & 63);
        });
    });
}

// First i in [1, n) with a[i] < a[i − 1], or -1 (a CSR indptr must not decrease).
inline int64_t first_decrease(const int64_t* a, size_t n, size_t threads) {
    std::vector<int64_t> bad(resolve_threads(threads) + 1, -1);
    if (n < 2) return -1;
    parallel_for(n - 1, threads, 1 << 16, [&](size_t b, size_t e, size_t t) {
        for (size_t i = b; i < e; i++)
            if (a[i + 1] < a[i]) { bad[t] = (int64_t)(i + 1); return; }
    });
    int64_t first = -1;
    for (int64_t v : bad)
        if (v >= 0 && (first < 0 || v < first)) first = v;
    return first;
}

// First k with cols[k] >= n_cols, or -1.
inline int64_t first_col_at_least(const uint32_t* cols, size_t nnz, uint64_t n_cols,
                                  size_t threads) {
    std::vector<int64_t> bad(resolve_threads(threads) + 1, -1);
    parallel_for(nnz, threads, 1 << 16, [&](size_t b, size_t e, size_t t) {
        uint32_t mx = 0;
        for (size_t k = b; k < e; k++) mx = std::max(mx, cols[k]);   // vectorizes
        if (mx < n_cols) return;
        for (size_t k = b; k < e; k++)
            if (cols[k] >= n_cols) { bad[t] = (int64_t)k; return; }
    });
    int64_t first = -1;
    for (int64_t v : bad)
        if (v >= 0 && (first < 0 || v < first)) first = v;
    return first;
}

// Synthetic-circuit helper: for every non-empty row i of C, rewrite the first coefficient so
// that C_i·z = a_i·b_i, given z[cols[first]] == 1:  c_first = a_i·b_i − Σ_{k>first} c_k·z_k.
// Returns the first row whose pivot variable is not 1, or -1.
inline int64_t fix_pivots(const int64_t* indptr, const uint32_t* cols, fr_t* vals, size_t m,
                          const fr_t* z, const fr_t* a, const fr_t* b, size_t threads) {
    std::vector<int64_t> bad(resolve_threads(threads) + 1, -1);
    parallel_for(m, threads, 4096, [&](size_t rb, size_t re, size_t t) {
        for (size_t i = rb; i < re; i++) {
            int64_t k0 = indptr[i];
            if (k0 == indptr[i + 1]) continue;
            if (!z[cols[k0]].is_one()) { bad[t] = (int64_t)i; return; }
            fr_t rest = fr_t::zero();
            for (int64_t k = k0 + 1; k < indptr[i + 1]; k++) rest += vals[k] * z[cols[k]];
            vals[k0] = a[i] * b[i] - rest;
        }
    });
    int64_t first = -1;
    for (int64_t v : bad)
        if (v >= 0 && (first < 0 || v < first)) first = v;
    return first;
}

// First i with a[i]·b[i] != c[i], or -1 (the R1CS satisfaction check on evaluations).
inline int64_t first_unsatisfied(const fr_t* a, const fr_t* b, const fr_t* c, size_t m,
                                 size_t threads) {
    std::vector<int64_t> bad(resolve_threads(threads) + 1, -1);
    parallel_for(m, threads, 4096, [&](size_t rb, size_t re, size_t t) {
        for (size_t i = rb; i < re; i++)
            if (a[i] * b[i] != c[i]) { bad[t] = (int64_t)i; return; }
    });
    int64_t first = -1;
    for (int64_t v : bad)
        if (v >= 0 && (first < 0 || v < first)) first = v;
    return first;
}

// ---- Fr vectors ----------------------------------------------------------------------------

// out[i] = first·ratio^i for i < n (chunk starts by exponentiation, then one M per element).
inline void geometric(const fr_t& first, const fr_t& ratio, size_t n, fr_t* out, size_t threads) {
    parallel_for(n, threads, 4096, [&](size_t b, size_t e, size_t) {
        uint64_t eb = b;
        fr_t cur = first * ratio.pow(&eb, 1);
        for (size_t i = b; i < e; i++) { out[i] = cur; cur *= ratio; }
    });
}

// Lagrange basis of the domain H = {ω^i : i < n} evaluated at τ ∉ H:
//   L_i(τ) = (τ^n − 1)/n · ω^i/(τ − ω^i).
// One batch inversion per chunk: 3 M per element for the inversion + 3 M.
// Returns false (out untouched beyond scratch use) when τ^n == 1, i.e. τ is in the domain.
inline bool lagrange_coeffs(const fr_t& tau, const fr_t& omega, size_t n, fr_t* out,
                            size_t threads) {
    uint64_t nn = n;
    fr_t zt = tau.pow(&nn, 1) - fr_t::one();  /* Z(τ) = τ^n − 1 */
    if (zt.is_zero()) return false;
    fr_t ninv = fr_t::from_u64(n).inv();
    fr_t c = zt * ninv;
    parallel_for(n, threads, 4096, [&](size_t b, size_t e, size_t) {
        std::vector<fr_t> scratch(e - b);
        uint64_t eb = b;
        fr_t w = omega.pow(&eb, 1);
        fr_t wi = w;
        for (size_t i = b; i < e; i++) { out[i] = tau - wi; wi *= omega; }
        batch_inverse(out + b, out + b, e - b, scratch.data());
        wi = w;
        for (size_t i = b; i < e; i++) { out[i] = out[i] * wi * c; wi *= omega; }
    });
    return true;
}

// out[j] = (β·u_j + α·v_j + w_j)·s — the IC (s = 1/γ) and L (s = 1/δ) exponents. 4 M per element.
inline void qap_combine(const fr_t* u, const fr_t* v, const fr_t* w, const fr_t& alpha,
                        const fr_t& beta, const fr_t& s, size_t n, fr_t* out, size_t threads) {
    parallel_for(n, threads, 4096, [&](size_t b, size_t e, size_t) {
        for (size_t j = b; j < e; j++) out[j] = (beta * u[j] + alpha * v[j] + w[j]) * s;
    });
}

// First index i < n with limbs[i] >= r (not a reduced Fr representative), or -1.
inline int64_t fr_first_unreduced(const uint64_t* limbs, size_t n, size_t threads) {
    std::vector<int64_t> bad(resolve_threads(threads) + 1, -1);
    parallel_for(n, threads, 1 << 16, [&](size_t b, size_t e, size_t t) {
        for (size_t i = b; i < e; i++)
            if (!fr_t::is_canonical(limbs + 4 * i)) { bad[t] = (int64_t)i; return; }
    });
    int64_t first = -1;
    for (int64_t v : bad)
        if (v >= 0 && (first < 0 || v < first)) first = v;
    return first;
}

// First index i < n with a[i] == 0, or -1 (a point at infinity among keygen's exponents).
inline int64_t fr_first_zero(const fr_t* a, size_t n, size_t threads) {
    std::vector<int64_t> bad(resolve_threads(threads) + 1, -1);
    parallel_for(n, threads, 1 << 16, [&](size_t b, size_t e, size_t t) {
        for (size_t i = b; i < e; i++)
            if (a[i].is_zero()) { bad[t] = (int64_t)i; return; }
    });
    int64_t first = -1;
    for (int64_t v : bad)
        if (v >= 0 && (first < 0 || v < first)) first = v;
    return first;
}

// Density compaction: out = the rows src[i], i < n_bits, whose bit i is set in words, in order
// (keygen's A and B queries).  Two passes over word chunks (popcounts, then copies), the same
// chunks in both.  Returns the set bits; writes nothing unless that equals out_rows.
inline size_t gather_rows(const fr_t* src, const uint64_t* words, size_t n_bits, fr_t* out,
                          size_t out_rows, size_t threads) {
    const size_t nw = (n_bits + 63) / 64;
    if (nw == 0) return 0;
    const size_t parts = std::max<size_t>(1, std::min(resolve_threads(threads), (nw + 1023) / 1024));
    auto live = [&](size_t w) {
        const size_t nb = std::min<size_t>(64, n_bits - w * 64);
        return words[w] & (nb == 64 ? ~0ULL : (1ULL << nb) - 1);
    };
    std::vector<size_t> start(parts + 1, 0);
    parallel_chunks(nw, parts, [&](size_t w0, size_t w1, size_t p) {
        size_t c = 0;
        for (size_t w = w0; w < w1; w++) c += (size_t)__builtin_popcountll(live(w));
        start[p + 1] = c;
    });
    for (size_t p = 0; p < parts; p++) start[p + 1] += start[p];
    if (start[parts] != out_rows) return start[parts];
    parallel_chunks(nw, parts, [&](size_t w0, size_t w1, size_t p) {
        fr_t* o = out + start[p];
        for (size_t w = w0; w < w1; w++)
            for (uint64_t m = live(w); m; m &= m - 1) *o++ = src[w * 64 + (size_t)__builtin_ctzll(m)];
    });
    return start[parts];
}

// ---- fixed-base batch scalar multiplication -------------------------------------------------
//
// [k_i]G for many k_i and one base G (parameter generation). Signed fixed windows of w bits:
// k = Σ_t d_t·2^(w·t), d_t ∈ [−2^(w−1)+1, 2^(w−1)], K = ceil(256/w) windows (K·w ≥ 256 leaves
// the top window room for the final carry since k < 2^255). The table holds
// j·2^(w·t)·G for j = 1..2^(w−1) as affine points, so one multiplication costs ≤ K affine
// additions with batched inversions (see mul) and no doublings.  Table: K·2^(w−1) points,
// built with K·2^(w−1) additions and one batch conversion to affine.
template <class C>
struct fixed_base_t {
    typedef affine_t<C> aff;
    typedef jacobian_t<C> jac;
    typedef typename C::field_t F;
    size_t w = 0, K = 0, half = 0;
    std::vector<aff> table;  // K × half, row t = window t

    // window minimizing n·K + table cost (a table point costs ~3 batched affine additions)
    static size_t choose_window(size_t n) {
        size_t best = 2;
        double best_cost = 1e300;
        for (size_t w = 2; w <= 16; w++) {
            size_t K = (256 + w - 1) / w;
            double cost = (double)n * K + 3.0 * (double)K * (double)(size_t(1) << (w - 1));
            if (cost < best_cost) { best_cost = cost; best = w; }
        }
        return best;
    }

    void build(const aff& base, size_t window, size_t threads) {
        w = window;
        K = (256 + w - 1) / w;
        half = size_t(1) << (w - 1);
        table.assign(K * half, aff::infinity());
        // window bases 2^(w·t)·G, affine
        std::vector<aff> wb(K);
        jac cur = jac::from_affine(base);
        for (size_t t = 0; t < K; t++) {
            wb[t] = cur.to_affine();
            for (size_t s = 0; s < w; s++) cur = r1cs::dbl(cur);
        }
        std::vector<jac> tj(K * half);
        parallel_for(K * half, threads, 1024, [&](size_t b, size_t e, size_t) {
            // entries b..e-1: (t, j) = (idx / half, idx % half + 1); restart the running sum
            // at each chunk or window boundary with one scalar multiplication
            size_t idx = b;
            while (idx < e) {
                size_t t = idx / half, j0 = idx % half;
                size_t stop = std::min(e, (t + 1) * half);
                // (j0+1)·base by double-and-add over the bits of j0+1, then running sums
                uint64_t jj = j0 + 1;
                jac acc = jac::infinity();
                for (int bit = 63; bit >= 0; bit--) {
                    acc = r1cs::dbl(acc);
                    if ((jj >> bit) & 1) acc = madd(acc, wb[t]);
                }
                tj[idx] = acc;
                for (size_t q = idx + 1; q < stop; q++) { acc = madd(acc, wb[t]); tj[q] = acc; }
                idx = stop;
            }
            std::vector<F> scratch(2 * (e - b));
            to_affine_batch(table.data() + b, tj.data() + b, e - b, scratch.data());
        });
    }

    // Signed digit t of canonical k (5 limbs, k[4] = 0), consuming and producing the carry.
    CUZK_INLINE int64_t digit(const uint64_t* k, size_t t, uint64_t& carry) const {
        size_t bit = t * w, limb = bit >> 6, sh = bit & 63;
        uint64_t v = k[limb] >> sh;
        if (sh + w > 64 && limb + 1 < 5) v |= k[limb + 1] << (64 - sh);
        v = (v & ((uint64_t(1) << w) - 1)) + carry;
        if (v > half) { carry = 1; return (int64_t)v - (int64_t(1) << w); }  // v − 2^w
        carry = 0;
        return (int64_t)v;
    }

    // out[i] = [k_i]·G, k_i given in Montgomery form; out affine (zero scalar -> all-zero).
    //
    // Blocks of BLK scalars advance window by window with AFFINE accumulators and one batch
    // inversion per window (Montgomery's trick): an addition costs 3M (inversion share) + 2M
    // + 1S instead of the 7M + 4S of a Jacobian mixed addition, and no final conversion.
    // The exceptional cases of the affine formula (accumulator = ±table point) are handled
    // one by one in Jacobian coordinates; with random scalars they essentially never occur.
    void mul(const fr_t* scalars, size_t n, aff* out, size_t threads) const {
        const size_t BLK = 1024;
        parallel_for(n, threads, 256, [&](size_t b, size_t e, size_t) {
            std::vector<uint64_t> k(5 * BLK), carry(BLK);
            std::vector<aff> acc(BLK);
            std::vector<uint8_t> live(BLK);
            std::vector<uint32_t> idx(BLK);
            std::vector<const aff*> addend(BLK);
            std::vector<aff> neg(BLK);
            std::vector<F> den(BLK), scratch(BLK);
            for (size_t s = b; s < e; s += BLK) {
                size_t cnt = std::min(BLK, e - s);
                for (size_t q = 0; q < cnt; q++) {
                    scalars[s + q].to_canonical(&k[5 * q]);
                    k[5 * q + 4] = 0;
                    carry[q] = 0;
                    live[q] = 0;
                }
                for (size_t t = 0; t < K; t++) {
                    size_t m = 0;
                    for (size_t q = 0; q < cnt; q++) {
                        int64_t d = digit(&k[5 * q], t, carry[q]);
                        if (d == 0) continue;
                        const aff* T = &table[t * half + (size_t)(d > 0 ? d : -d) - 1];
                        if (d < 0) { neg[q] = -*T; T = &neg[q]; }
                        if (!live[q]) { acc[q] = *T; live[q] = 1; continue; }
                        if (acc[q].x == T->x) {  // P ± P: doubling or infinity, rare
                            jac j = madd(jac::from_affine(acc[q]), *T);
                            if (j.is_inf()) live[q] = 0; else acc[q] = j.to_affine();
                            continue;
                        }
                        den[m] = T->x - acc[q].x;
                        addend[m] = T;
                        idx[m++] = (uint32_t)q;
                    }
                    batch_inverse(den.data(), den.data(), m, scratch.data());
                    for (size_t c = 0; c < m; c++) {
                        aff& P = acc[idx[c]];
                        const aff& Q = *addend[c];
                        F lam = (Q.y - P.y) * den[c];   /* λ = (y2 − y1)/(x2 − x1) */
                        F x3 = lam.sqr() - P.x - Q.x;   /* x3 = λ² − x1 − x2 */
                        P.y = lam * (P.x - x3) - P.y;   /* y3 = λ(x1 − x3) − y1 */
                        P.x = x3;
                    }
                }
                for (size_t q = 0; q < cnt; q++) out[s + q] = live[q] ? acc[q] : aff::infinity();
            }
        });
    }
};

typedef fixed_base_t<g1_curve> g1_fixed_base_t;
typedef fixed_base_t<g2_curve> g2_fixed_base_t;

}  // namespace r1cs
}  // namespace cuzk
