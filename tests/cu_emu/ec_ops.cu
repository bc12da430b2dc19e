// Harness kernels (emulator only) exposing the XYZZ template's operations for
// tests/test_cu_emu_ec.py: for each pair (a[i], b[i]) of affine points, EC_OPS XYZZ results:
//   0 a + b (madd)            1 a + b (add, both XYZZ)     2 2a (dbl)
//   3 a + a (madd: P == Q)    4 2a + b (madd, ZZ != 1)     5 2a + 2b (add, ZZ != 1 on both sides)
//   6 2a + 2a (add: P == Q)   7 2a + (−2a) (add: P == −Q)  8 a − b (sub, madd of −b)
//   9 5·(2a) (mul_u32)       10 2a − 2b (sub, XYZZ)
#include "ec/xyzz_t.cuh"

#define EC_OPS 11

template <class F>
static void emu_ec_ops(cuzk::xyzz_t<F>* d_out, const cuzk::affine_t<F>* d_a, const cuzk::affine_t<F>* d_b,
                       uint64_t n)
{
    typedef cuzk::xyzz_t<F> X;
    typedef cuzk::affine_t<F> A;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        const A a = A::load(d_a + i), b = A::load(d_b + i);
        const X xa = X::from_affine(a), xb = X::from_affine(b);
        const X a2 = xa.dbl(), b2 = xb.dbl();
        X* o = d_out + EC_OPS * i;
        o[0] = xa.add(b);
        o[1] = xa.add(xb);
        o[2] = a2;
        o[3] = xa.add(a);
        o[4] = a2.add(b);
        o[5] = a2.add(b2);
        o[6] = a2.add(a2);
        o[7] = a2.add(a2.neg());
        o[8] = xa.sub(b);
        o[9] = a2.mul_u32(5);
        o[10] = a2.sub(b2);
    }
}
extern "C" __global__ void emu_ec_ops_g1(cuzk::g1_xyzz_t* d_out, const cuzk::g1_affine_t* d_a,
                                         const cuzk::g1_affine_t* d_b, uint64_t n)
{
    emu_ec_ops(d_out, d_a, d_b, n);
}
extern "C" __global__ void emu_ec_ops_g2(cuzk::g2_xyzz_t* d_out, const cuzk::g2_affine_t* d_a,
                                         const cuzk::g2_affine_t* d_b, uint64_t n)
{
    emu_ec_ops(d_out, d_a, d_b, n);
}

// Field inversions (tests/test_cu_emu_inverse.py), 2 outputs per a[i] (b unused):
//   mont_t (Fr, Fq): inverse(a) (ff/inverse.cuh: safegcd), inverse_fermat(a)
//   Fq2:             inverse(a), a·inverse(a)
template <class F>
static void emu_inverse(F* d_out, const F* d_a, uint64_t n)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        const F a = d_a[i];
        d_out[2 * i] = cuzk::inverse(a);
        d_out[2 * i + 1] = cuzk::inverse_fermat(a);
    }
}
extern "C" __global__ void emu_inverse_fr(cuzk::fr_t* d_out, const cuzk::fr_t* d_a, const cuzk::fr_t*, uint64_t n)
{
    emu_inverse(d_out, d_a, n);
}
extern "C" __global__ void emu_inverse_fq(cuzk::fq_t* d_out, const cuzk::fq_t* d_a, const cuzk::fq_t*, uint64_t n)
{
    emu_inverse(d_out, d_a, n);
}
extern "C" __global__ void emu_inverse_fq2(cuzk::fq2_t* d_out, const cuzk::fq2_t* d_a, const cuzk::fq2_t*,
                                           uint64_t n)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (uint64_t)gridDim.x * blockDim.x) {
        const cuzk::fq2_t a = d_a[i], r = cuzk::inverse(a);
        d_out[2 * i] = r;
        d_out[2 * i + 1] = a * r;
    }
}
