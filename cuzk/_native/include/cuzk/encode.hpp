// Byte encodings of BLS12-381 field elements and points (zcash / bellperson convention),
// point validation, and bulk (multithreaded, GIL-free) array kernels over them. CPU backend.
//
// Points (big-endian field elements; G2 coordinates as c1‖c0):
//   G1 compressed 48 B = x | flags,  uncompressed 96 B = x‖y
//   G2 compressed 96 B = x.c1‖x.c0 | flags,  uncompressed 192 B = x.c1‖x.c0‖y.c1‖y.c0
// Flags live in the top 3 bits of byte 0: 0x80 compressed form, 0x40 point at infinity,
// 0x20 y is lexicographically largest (compressed form only).
// Infinity is exactly 0xc0 (compressed) or 0x40 (uncompressed) followed by zero bytes; every
// other byte string carrying the infinity flag is invalid. An all-zero uncompressed string
// (no flag) is (0, 0), which is not on the curve, so it is rejected rather than read as
// infinity (blst's rule; arkworks' from_xy_bytes accepts it, zcash does not).
//
// In memory, affine points are Montgomery x‖y with infinity all-zero (ec.hpp), so a uint64
// array of shape (n, 12) / (n, 24) is an array of g1_affine_t / g2_affine_t.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "ec.hpp"
#include "parallel.hpp"

namespace cuzk {

static_assert(sizeof(fr_t) == 32 && sizeof(fq_t) == 48 && sizeof(fq2_t) == 96, "limb layout");
static_assert(sizeof(g1_affine_t) == 96 && sizeof(g2_affine_t) == 192, "affine layout");
static_assert(sizeof(g1_jacobian_t) == 144 && sizeof(g2_jacobian_t) == 288, "jacobian layout");
static_assert(std::is_standard_layout<g2_affine_t>::value, "affine layout");

// Per-element decode status (stable numbers: exposed to Python).
enum decode_status : int {
    DECODE_OK = 0,
    DECODE_BAD_FLAGS = 1,         // compression flag wrong for the form, or sign flag in uncompressed form
    DECODE_BAD_INFINITY = 2,      // infinity flag with the sign flag or any other bit set
    DECODE_NONCANONICAL = 3,      // a coordinate is >= p
    DECODE_NOT_ON_CURVE = 4,      // (x, y) off the curve; compressed: x^3 + b is not a square
    DECODE_NOT_IN_SUBGROUP = 5,   // on the curve, not in the prime-order subgroup
};

constexpr uint8_t FLAG_COMPRESSED = 0x80, FLAG_INFINITY = 0x40, FLAG_SIGN = 0x20;

// ---- integers <-> bytes -----------------------------------------------------------
// nlimbs little-endian limbs from 8·nlimbs big-endian bytes
inline void limbs_from_be(uint64_t* out, const uint8_t* b, size_t nlimbs) {
    for (size_t i = 0; i < nlimbs; i++) {
        const uint8_t* p = b + 8 * (nlimbs - 1 - i);
        uint64_t v = 0;
        for (int k = 0; k < 8; k++) v = (v << 8) | p[k];
        out[i] = v;
    }
}
inline void limbs_to_be(uint8_t* b, const uint64_t* in, size_t nlimbs) {
    for (size_t i = 0; i < nlimbs; i++) {
        uint8_t* p = b + 8 * (nlimbs - 1 - i);
        uint64_t v = in[i];
        for (int k = 7; k >= 0; k--) { p[k] = (uint8_t)v; v >>= 8; }
    }
}

// ---- field element codecs (big-endian canonical bytes <-> Montgomery) ---------------
template <class F> struct field_codec;

template <> struct field_codec<fq_t> {
    static constexpr size_t NBYTES = 48;
    // false when the value is >= p
    static inline bool from_be(fq_t& out, const uint8_t* b) {
        uint64_t v[6]; limbs_from_be(v, b, 6);
        if (!fq_t::is_canonical(v)) return false;
        out = fq_t::from_canonical(v);
        return true;
    }
    static inline void to_be(uint8_t* b, const fq_t& a) { uint64_t v[6]; a.to_canonical(v); limbs_to_be(b, v, 6); }
    static inline bool sqrt(fq_t& out, const fq_t& a) { return fq_sqrt(out, a); }
    static inline bool lex_largest(const fq_t& a) { return fq_is_lexicographically_largest(a); }
};

template <> struct field_codec<fq2_t> {
    static constexpr size_t NBYTES = 96;  // c1‖c0
    static inline bool from_be(fq2_t& out, const uint8_t* b) {
        return field_codec<fq_t>::from_be(out.c1, b) && field_codec<fq_t>::from_be(out.c0, b + 48);
    }
    static inline void to_be(uint8_t* b, const fq2_t& a) {
        field_codec<fq_t>::to_be(b, a.c1); field_codec<fq_t>::to_be(b + 48, a.c0);
    }
    static inline bool sqrt(fq2_t& out, const fq2_t& a) { return fq2_sqrt(out, a); }
    static inline bool lex_largest(const fq2_t& a) { return fq2_is_lexicographically_largest(a); }
};

// ---- fast subgroup membership (Scott, "A note on group membership tests for G1, G2 and
// GT on BLS pairing-friendly curves", eprint 2021/1130; the test blst uses) -------------
// G1: P ∈ G1  iff  σ²(P) = [-z²]P, σ(x, y) = (βx, y), β a primitive cube root of unity.
// G2: P ∈ G2  iff  ψ(P) = [z]P,   ψ(x, y) = (x̄·(1+u)^-((p-1)/3), ȳ·(1+u)^-((p-1)/2)).
// z = -0xd201000000010000. Cost: two (G1) / one (G2) 64-bit scalar multiplications,
// about 1/3 (G1) and 1/4 (G2) of the exact [r]P test.
// The constants are derived once at first use from the field constants and checked on the
// generators (which choice of β is the right eigenvalue is settled there), so no extra
// hand-written constant can be wrong.
struct endo_constants {
    fq_t beta2;           // β² for σ²
    fq2_t psi_x, psi_y;   // ψ coefficients
    bool ok;

    static const endo_constants& get() {
        static const endo_constants c = make();
        return c;
    }

  private:
    // (p - 1) / 3 as little-endian limbs
    static void p_minus_1_div_3(uint64_t out[6]) {
        static constexpr uint64_t M[6] = CUZK_FQ_MOD;
        uint64_t v[6]; std::memcpy(v, M, sizeof v); v[0] -= 1;  // p is odd: no borrow
        u128 rem = 0;
        for (size_t i = 6; i-- > 0;) {
            u128 cur = (rem << 64) | v[i];
            out[i] = (uint64_t)(cur / 3);
            rem = cur % 3;
        }
    }
    static endo_constants make() {
        endo_constants c;
        uint64_t e3[6]; p_minus_1_div_3(e3);
        static constexpr uint64_t E2[6] = CUZK_FQ_P_MINUS_1_DIV_2;
        static constexpr uint64_t AZ = 0xd201000000010000ull;  // |z|
        // β candidates: w = 2^((p-1)/3) and w^2 (2 is not a cube mod p)
        fq_t w = fq_t::from_u64(2).pow(e3, 6);
        g1_affine_t g = g1_affine_t::generator();
        g1_jacobian_t mz2 = -scalar_mul(scalar_mul(g, &AZ, 1), &AZ, 1);  // [-z²]G
        c.ok = false;
        fq_t cands[2] = {w.sqr(), w.sqr().sqr()};  // β² for β = w, β = w²
        for (const fq_t& b2 : cands) {
            g1_jacobian_t s = g1_jacobian_t::from_affine({g.x * b2, g.y});
            if (!w.is_one() && s == mz2) { c.beta2 = b2; c.ok = true; break; }
        }
        fq2_t one_u = {fq_t::one(), fq_t::one()};
        c.psi_x = one_u.pow(e3, 6).inv();
        c.psi_y = one_u.pow(E2, 6).inv();
        g2_affine_t h = g2_affine_t::generator();
        g2_jacobian_t zh = -scalar_mul(h, &AZ, 1);  // [z]H, z < 0
        g2_affine_t ph = {h.x.conj() * c.psi_x, h.y.conj() * c.psi_y};
        c.ok = c.ok && g2_jacobian_t::from_affine(ph) == zh;
        return c;
    }
};

// P must be on the curve. Falls back to the exact test should the constants fail their check.
inline bool in_subgroup_fast(const g1_affine_t& p) {
    if (p.is_inf()) return true;
    const endo_constants& c = endo_constants::get();
    if (!c.ok) return in_subgroup(p);
    static constexpr uint64_t AZ = 0xd201000000010000ull;
    g1_jacobian_t t = -scalar_mul(scalar_mul(p, &AZ, 1), &AZ, 1);  /* [-z²]P */
    return g1_jacobian_t::from_affine({p.x * c.beta2, p.y}) == t;   /* σ²(P) */
}
inline bool in_subgroup_fast(const g2_affine_t& p) {
    if (p.is_inf()) return true;
    const endo_constants& c = endo_constants::get();
    if (!c.ok) return in_subgroup(p);
    static constexpr uint64_t AZ = 0xd201000000010000ull;
    g2_jacobian_t t = -scalar_mul(p, &AZ, 1);                        /* [z]P */
    g2_affine_t s = {p.x.conj() * c.psi_x, p.y.conj() * c.psi_y};    /* ψ(P) */
    return g2_jacobian_t::from_affine(s) == t;
}

// ---- point codecs -------------------------------------------------------------------
template <class C>
struct point_codec {
    typedef affine_t<C> A;
    typedef typename C::field_t F;
    typedef field_codec<F> FC;
    static constexpr size_t COMPRESSED = FC::NBYTES;
    static constexpr size_t UNCOMPRESSED = 2 * FC::NBYTES;

    static inline void encode_uncompressed(uint8_t* out, const A& p) {
        if (p.is_inf()) {
            std::memset(out, 0, UNCOMPRESSED);
            out[0] = FLAG_INFINITY;
            return;
        }
        FC::to_be(out, p.x);
        FC::to_be(out + FC::NBYTES, p.y);
    }
    static inline void encode_compressed(uint8_t* out, const A& p) {
        if (p.is_inf()) {
            std::memset(out, 0, COMPRESSED);
            out[0] = FLAG_COMPRESSED | FLAG_INFINITY;
            return;
        }
        FC::to_be(out, p.x);
        out[0] |= FLAG_COMPRESSED | (FC::lex_largest(p.y) ? FLAG_SIGN : 0);
    }

    // true iff byte 0 without its flags and every later byte are zero
    static inline bool rest_zero(const uint8_t* in, size_t n) {
        uint8_t acc = in[0] & 0x1f;
        for (size_t i = 1; i < n; i++) acc |= in[i];
        return acc == 0;
    }
    static inline int decode_uncompressed(A& out, const uint8_t* in, bool subgroup) {
        uint8_t f = in[0] & 0xe0;
        if (f & FLAG_COMPRESSED) return DECODE_BAD_FLAGS;
        if (f & FLAG_INFINITY) {
            if ((f & FLAG_SIGN) || !rest_zero(in, UNCOMPRESSED)) return DECODE_BAD_INFINITY;
            out = A::infinity();
            return DECODE_OK;
        }
        if (f & FLAG_SIGN) return DECODE_BAD_FLAGS;
        A p;
        if (!FC::from_be(p.x, in) || !FC::from_be(p.y, in + FC::NBYTES)) return DECODE_NONCANONICAL;
        // (0, 0) is our in-memory infinity but is not a curve point: reject it explicitly
        if (p.is_inf() || !p.on_curve()) return DECODE_NOT_ON_CURVE;
        if (subgroup && !in_subgroup_fast(p)) return DECODE_NOT_IN_SUBGROUP;
        out = p;
        return DECODE_OK;
    }
    static inline int decode_compressed(A& out, const uint8_t* in, bool subgroup) {
        uint8_t f = in[0] & 0xe0;
        if (!(f & FLAG_COMPRESSED)) return DECODE_BAD_FLAGS;
        if (f & FLAG_INFINITY) {
            if ((f & FLAG_SIGN) || !rest_zero(in, COMPRESSED)) return DECODE_BAD_INFINITY;
            out = A::infinity();
            return DECODE_OK;
        }
        uint8_t buf[COMPRESSED];
        std::memcpy(buf, in, COMPRESSED);
        buf[0] &= 0x1f;
        A p;
        if (!FC::from_be(p.x, buf)) return DECODE_NONCANONICAL;
        F rhs = p.x.sqr() * p.x + C::b();  /* y^2 = x^3 + b */
        if (!FC::sqrt(p.y, rhs)) return DECODE_NOT_ON_CURVE;
        // y = 0 cannot occur: x^3 = -b has no solution over Fq (G1) nor Fq2 (G2)
        if (FC::lex_largest(p.y) != bool(f & FLAG_SIGN)) p.y = -p.y;
        if (subgroup && !in_subgroup_fast(p)) return DECODE_NOT_IN_SUBGROUP;
        out = p;
        return DECODE_OK;
    }
};

// ---- bulk kernels ---------------------------------------------------------------------
// Bulk results: index of the first bad element (n when none) and its status.
struct bulk_result {
    size_t index;
    int status;
};

// Lowers `best` to idx if smaller (lock-free).
inline void atomic_min(std::atomic<size_t>& best, size_t idx) {
    size_t cur = best.load(std::memory_order_relaxed);
    while (idx < cur && !best.compare_exchange_weak(cur, idx, std::memory_order_relaxed)) {}
}

// Decode n points of `stride` bytes each. Bad elements leave out[i] = infinity.
// With status != nullptr every element is decoded and status[i] set; without it a chunk
// stops at its first bad element (the result is the same first bad index either way).
template <class C>
inline bulk_result decode_points(affine_t<C>* out, const uint8_t* in, size_t n, bool compressed,
                                 bool subgroup, size_t threads, uint8_t* status) {
    typedef point_codec<C> PC;
    const size_t stride = compressed ? PC::COMPRESSED : PC::UNCOMPRESSED;
    std::atomic<size_t> first(n);
    size_t grain = compressed || subgroup ? 64 : 1024;
    parallel_for(n, threads, grain, [&](size_t b, size_t e, size_t) {
        for (size_t i = b; i < e; i++) {
            if (!status && first.load(std::memory_order_relaxed) < i) {
                for (size_t j = i; j < e; j++) out[j] = affine_t<C>::infinity();
                return;
            }
            int s = compressed ? PC::decode_compressed(out[i], in + i * stride, subgroup)
                               : PC::decode_uncompressed(out[i], in + i * stride, subgroup);
            if (status) status[i] = (uint8_t)s;
            if (s != DECODE_OK) {
                out[i] = affine_t<C>::infinity();
                atomic_min(first, i);
                if (!status) {
                    for (size_t j = i + 1; j < e; j++) out[j] = affine_t<C>::infinity();
                    return;
                }
            }
        }
    });
    bulk_result r{first.load(), DECODE_OK};
    if (r.index < n) {
        // recompute the status of the first bad element (cheap, and exact without `status`)
        affine_t<C> tmp;
        r.status = compressed ? PC::decode_compressed(tmp, in + r.index * stride, subgroup)
                              : PC::decode_uncompressed(tmp, in + r.index * stride, subgroup);
    }
    return r;
}

template <class C>
inline void encode_points(uint8_t* out, const affine_t<C>* in, size_t n, bool compressed, size_t threads) {
    typedef point_codec<C> PC;
    const size_t stride = compressed ? PC::COMPRESSED : PC::UNCOMPRESSED;
    parallel_for(n, threads, compressed ? 256 : 1024, [&](size_t b, size_t e, size_t) {
        for (size_t i = b; i < e; i++) {
            if (compressed) PC::encode_compressed(out + i * stride, in[i]);
            else PC::encode_uncompressed(out + i * stride, in[i]);
        }
    });
}

// Check affine points already in memory: status per point as for decoding (on-curve,
// optional subgroup). Infinity (all-zero) is valid.
template <class C>
inline bulk_result check_points(const affine_t<C>* in, size_t n, bool subgroup, size_t threads) {
    std::atomic<size_t> first(n);
    parallel_for(n, threads, subgroup ? 64 : 1024, [&](size_t b, size_t e, size_t) {
        for (size_t i = b; i < e && first.load(std::memory_order_relaxed) > i; i++) {
            bool ok = in[i].on_curve() && (!subgroup || in_subgroup_fast(in[i]));
            if (!ok) { atomic_min(first, i); return; }
        }
    });
    bulk_result r{first.load(), DECODE_OK};
    if (r.index < n) r.status = in[r.index].on_curve() ? DECODE_NOT_IN_SUBGROUP : DECODE_NOT_ON_CURVE;
    return r;
}

// Canonical little-endian limbs (w limbs per element; an element of a prime field F, or
// both halves of an Fq2 element when w = 2·F::N) -> Montgomery. Returns the first element
// holding a value >= the modulus, or n; out may alias in.
template <class F>
inline size_t to_mont(uint64_t* out, const uint64_t* in, size_t n, size_t w, size_t threads) {
    std::atomic<size_t> first(n);
    const size_t parts = w / F::N;
    parallel_for(n, threads, 4096, [&](size_t b, size_t e, size_t) {
        for (size_t i = b; i < e; i++) {
            for (size_t k = 0; k < parts; k++) {
                const uint64_t* v = in + i * w + k * F::N;
                if (!F::is_canonical(v)) { atomic_min(first, i); return; }
                F m = F::from_canonical(v);
                std::memcpy(out + i * w + k * F::N, m.l, F::NBYTES);
            }
        }
    });
    return first.load();
}

template <class F>
inline void from_mont(uint64_t* out, const uint64_t* in, size_t n, size_t w, size_t threads) {
    const size_t parts = w / F::N;
    parallel_for(n, threads, 4096, [&](size_t b, size_t e, size_t) {
        for (size_t i = b; i < e; i++)
            for (size_t k = 0; k < parts; k++)
                F::from_limbs(in + i * w + k * F::N).to_canonical(out + i * w + k * F::N);
    });
}

// First element (of w limbs, F::N-limb parts) that is >= the modulus, or n.
template <class F>
inline size_t first_noncanonical(const uint64_t* in, size_t n, size_t w, size_t threads) {
    std::atomic<size_t> first(n);
    const size_t parts = w / F::N;
    parallel_for(n, threads, 1 << 14, [&](size_t b, size_t e, size_t) {
        for (size_t i = b; i < e && first.load(std::memory_order_relaxed) > i; i++)
            for (size_t k = 0; k < parts; k++)
                if (!F::is_canonical(in + i * w + k * F::N)) { atomic_min(first, i); return; }
    });
    return first.load();
}

// Jacobian (X‖Y‖Z Montgomery, infinity Z = 0) -> affine (infinity all-zero), one field
// inversion per chunk (Montgomery's trick).
template <class C>
inline void jacobian_to_affine(affine_t<C>* out, const jacobian_t<C>* in, size_t n, size_t threads) {
    typedef typename C::field_t F;
    parallel_for(n, threads, 256, [&](size_t b, size_t e, size_t) {
        std::vector<F> scratch(2 * (e - b));
        batch_to_affine(out + b, in + b, e - b, scratch.data());
    });
}

// Σ k_i·P_i by one shared double-and-add chain per thread (Straus with 1-bit windows):
// 255 doublings + popcount(k_i) mixed additions, per chunk. Correct for any inputs; the slow
// reference path of cuzk.msm when the Pippenger module is absent. k: 4 canonical limbs each.
template <class C>
inline jacobian_t<C> msm_simple(const affine_t<C>* p, const uint64_t* k, size_t n, size_t threads) {
    size_t parts = std::max<size_t>(1, std::min(resolve_threads(threads), (n + 63) / 64));
    std::vector<jacobian_t<C>> partial(parts, jacobian_t<C>::infinity());
    parallel_chunks(n, parts, [&](size_t b, size_t e, size_t w) {
        int top = -1;
        for (size_t i = b; i < e; i++)
            for (int j = 255; j > top; j--)
                if ((k[4 * i + j / 64] >> (j % 64)) & 1) { top = j; break; }
        jacobian_t<C> acc = jacobian_t<C>::infinity();
        for (int j = top; j >= 0; j--) {
            acc = acc.dbl();
            for (size_t i = b; i < e; i++)
                if ((k[4 * i + j / 64] >> (j % 64)) & 1) acc = acc.add(p[i]);
        }
        partial[w] = acc;
    });
    jacobian_t<C> r = jacobian_t<C>::infinity();
    for (auto& q : partial) r = r.add(q);
    return r;
}

}  // namespace cuzk
