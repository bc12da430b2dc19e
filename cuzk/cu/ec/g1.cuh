// BLS12-381 G1 on the GPU: the names msm.cu uses, over the one XYZZ template (ec/xyzz_t.cuh).
//
// affine_g1_t: x ‖ y, each an Fq element in Montgomery form (12 x 32-bit limbs, the same
// bytes as the CPU's 6 x 64-bit limbs); all-zero = the point at infinity (as on the CPU).
// xyzz_g1_t (X, Y, ZZ, ZZZ): x = X/ZZ, y = Y/ZZZ, ZZ^3 = ZZZ^2; infinity iff ZZ == 0.
// Formulas and costs: see ec/xyzz_t.cuh.
#pragma once
#include "ec/xyzz_t.cuh"

namespace cuzk {

typedef g1_affine_t affine_g1_t;
typedef g1_xyzz_t xyzz_g1_t;

}  // namespace cuzk
