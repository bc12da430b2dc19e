// Affine additions that share one inversion per thread and step (Montgomery's trick): the pieces
// common to the MSM's batch level 0 (msm/msm.cuh sum_points_batch) and the batch additions'
// affine kernel (msm/batch_add.cu batch_add_affine_body).  A thread's lanes each hold an affine
// accumulator; a sweep over the lanes builds the prefix products of the waiting additions'
// denominators, one inversion per sweep serves them all, and the next sweep (in the opposite
// order) peels the inverses off while it applies the additions.
#pragma once
#include "ec/xyzz_t.cuh"

namespace cuzk {

// Lane flags: the accumulator is empty; an addition / a doubling waits for the thread's next
// inversion.
constexpr uint32_t LANE_EMPTY = 1u, LANE_ADD = 2u, LANE_DBL = 4u;

// The waiting addition of a lane: a ← a + P (dbl false; P.x ≠ a.x; P's y negated when neg_y) or
// a ← 2·a (dbl true; P unused), with 1/d = inv·pre (pre: the product of the d's before this lane
// in the sweep that built them) and inv ← inv·d, d = x2 − x1 or 2·y1:
//   λ = (y2 − y1)/(x2 − x1)  or  3·x1^2 / (2·y1),  x3 = λ^2 − x1 − x2,  y3 = λ·(x1 − x3) − y1.
// 4M + 1S here (the sweep that built pre spent 1M): 5M + 1S per addition, against 8M + 2S for
// the XYZZ mixed addition.  Products without the final subtraction (< 2p) for pre, 1/d and inv
// were timed in level 0 (session 41, G1 c = 20 k = 2): as a second outlined product body,
// +5.9 % / +1.4 % at 2^24 / 2^27 (H100); as the kernel's only product body (λ and y3 reduced
// inline), +0.35 % / −0.7 % (H200).  The doubling's set-up below and a piece's end (msm.cuh
// sum_points_batch) as out-of-line calls (the lane loop 1 319 → 1 059 instructions): +0.36 % /
// −0.04 % (session 43, H100).  Neither adopted (bench/RESULTS.md).
template <class F>
CUZK_DEVICE void apply_waiting(affine_t<F>& a, bool dbl, const affine_t<F>& P, bool neg_y, const F& pre,
                               F& inv)
{
    F d, num, x2;
    if (dbl) {
        d = a.y + a.y;
        const F xx = a.x.sqr();
        num = xx + xx + xx;                /* 3·x1^2 */
        x2 = a.x;
    } else {
        const F py = neg_y ? -P.y : P.y;
        d = P.x - a.x;
        num = py - a.y;
        x2 = P.x;
    }
    const F dinv = inv * pre;              /* 1/d */
    inv = inv * d;
    const F lambda = num * dinv;
    const F x3 = lambda.sqr() - a.x - x2;
    a.y = lambda * (a.x - x3) - a.y;
    a.x = x3;
}

}  // namespace cuzk
