// 32-bit carry-chain primitives: one PTX instruction each.
//
// Contract: the carry flag (CC.CF) lives between consecutive calls; a chain
// starts with a primitive that does not read CF (add_cc, sub_cc, mad_lo_cc,
// mad_hi_cc) and every primitive between two links of a chain is itself a
// link.  Each call is one `asm volatile` statement, so the compiler keeps their
// order; the code generated around them never touches CF.
//
// Under CUZK_HOST_EMU the same primitives run on the host with a thread-local
// carry flag, bit for bit as PTX defines them (the borrow of sub.cc/subc is
// CF = 1), so the field and NTT code can be exercised without a GPU.
#pragma once
#include "util/types.cuh"

namespace cuzk {
namespace cc {

#if defined(__CUDA_ARCH__)

#define CUZK_CC_OP2(name, op)                                                  \
    CUZK_DEVICE uint32_t name(uint32_t a, uint32_t b)                           \
    {                                                                          \
        uint32_t r;                                                            \
        asm volatile(op " %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));            \
        return r;                                                              \
    }
#define CUZK_CC_OP3(name, op)                                                  \
    CUZK_DEVICE uint32_t name(uint32_t a, uint32_t b, uint32_t c)               \
    {                                                                          \
        uint32_t r;                                                            \
        asm volatile(op " %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(c)); \
        return r;                                                              \
    }

CUZK_CC_OP2(add_cc, "add.cc.u32")
CUZK_CC_OP2(addc_cc, "addc.cc.u32")
CUZK_CC_OP2(addc, "addc.u32")
CUZK_CC_OP2(sub_cc, "sub.cc.u32")
CUZK_CC_OP2(subc_cc, "subc.cc.u32")
CUZK_CC_OP2(subc, "subc.u32")
CUZK_CC_OP3(mad_lo_cc, "mad.lo.cc.u32")
CUZK_CC_OP3(mad_hi_cc, "mad.hi.cc.u32")
CUZK_CC_OP3(madc_lo_cc, "madc.lo.cc.u32")
CUZK_CC_OP3(madc_hi_cc, "madc.hi.cc.u32")
CUZK_CC_OP3(madc_lo, "madc.lo.u32")
CUZK_CC_OP3(madc_hi, "madc.hi.u32")

#undef CUZK_CC_OP2
#undef CUZK_CC_OP3

CUZK_DEVICE uint32_t mul_lo(uint32_t a, uint32_t b) { return a * b; }
CUZK_DEVICE uint32_t mul_hi(uint32_t a, uint32_t b) { return __umulhi(a, b); }
// -a as an opaque asm statement (see mont_t::redc_row for why it is not `0 - a`).
CUZK_DEVICE uint32_t neg(uint32_t a)
{
    uint32_t r;
    asm volatile("sub.u32 %0, 0, %1;" : "=r"(r) : "r"(a));
    return r;
}

#else  // host emulation of the PTX semantics

extern thread_local uint32_t emu_cf;

inline uint32_t add_cc(uint32_t a, uint32_t b)
{ uint64_t s = (uint64_t)a + b; emu_cf = (uint32_t)(s >> 32); return (uint32_t)s; }
inline uint32_t addc_cc(uint32_t a, uint32_t b)
{ uint64_t s = (uint64_t)a + b + emu_cf; emu_cf = (uint32_t)(s >> 32); return (uint32_t)s; }
inline uint32_t addc(uint32_t a, uint32_t b) { return a + b + emu_cf; }
inline uint32_t sub_cc(uint32_t a, uint32_t b)
{ uint64_t d = (uint64_t)a - b; emu_cf = (uint32_t)(d >> 63); return (uint32_t)d; }
inline uint32_t subc_cc(uint32_t a, uint32_t b)
{ uint64_t d = (uint64_t)a - b - emu_cf; emu_cf = (uint32_t)(d >> 63); return (uint32_t)d; }
inline uint32_t subc(uint32_t a, uint32_t b) { return a - b - emu_cf; }
inline uint32_t mad_lo_cc(uint32_t a, uint32_t b, uint32_t c)
{ return add_cc((uint32_t)((uint64_t)a * b), c); }
inline uint32_t mad_hi_cc(uint32_t a, uint32_t b, uint32_t c)
{ return add_cc((uint32_t)(((uint64_t)a * b) >> 32), c); }
inline uint32_t madc_lo_cc(uint32_t a, uint32_t b, uint32_t c)
{ return addc_cc((uint32_t)((uint64_t)a * b), c); }
inline uint32_t madc_hi_cc(uint32_t a, uint32_t b, uint32_t c)
{ return addc_cc((uint32_t)(((uint64_t)a * b) >> 32), c); }
inline uint32_t madc_lo(uint32_t a, uint32_t b, uint32_t c)
{ return addc((uint32_t)((uint64_t)a * b), c); }
inline uint32_t madc_hi(uint32_t a, uint32_t b, uint32_t c)
{ return addc((uint32_t)(((uint64_t)a * b) >> 32), c); }
inline uint32_t mul_lo(uint32_t a, uint32_t b) { return a * b; }
inline uint32_t mul_hi(uint32_t a, uint32_t b) { return (uint32_t)(((uint64_t)a * b) >> 32); }
inline uint32_t neg(uint32_t a) { return 0u - a; }

#endif

}  // namespace cc
}  // namespace cuzk
