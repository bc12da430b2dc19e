// Host stand-ins for the CUDA language features that cuzk's kernels use, so that
// cuzk/cu sources compile with an ordinary C++20 compiler under CUZK_HOST_EMU.
// Developer/test tool only (tests/test_cu_emu.py): never shipped, never used by
// cuzk at run time.  The PTX carry-chain semantics are NOT emulated here: they
// come from cuzk/cu/ff/carry.cuh's own CUZK_HOST_EMU branch.
//
// Execution model (see emu.cpp): every CUDA thread of a block is a fiber on one
// host thread; __syncthreads() switches fibers.  Built-ins that a kernel may
// read (threadIdx, blockIdx, emu_dyn_smem) are per host thread, and the
// scheduler sets them before it resumes a fiber.  An intrinsic missing here is
// a compile error on purpose: add it (with PTX semantics) rather than stub it.
#pragma once
#ifndef CUZK_HOST_EMU
#define CUZK_HOST_EMU 1
#endif
#include <cstdint>
#include <cstring>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __launch_bounds__(...)

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return uint4{a, b, c, d}; }
struct alignas(8) uint2 {
    unsigned x, y;
};
inline uint2 make_uint2(unsigned a, unsigned b) { return uint2{a, b}; }

extern thread_local dim3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;
// Base of the block's dynamic shared memory (`extern __shared__` has no host
// equivalent; CUZK_DYN_SMEM in cuzk/cu/util/types.cuh reads this under CUZK_HOST_EMU).
extern thread_local void* emu_dyn_smem;

void __syncthreads();

inline uint4 __ldg(const uint4* p) { return *p; }
inline unsigned __brev(unsigned x)
{
    unsigned r = 0;
    for (int i = 0; i < 32; i++) r |= ((x >> i) & 1u) << (31 - i);
    return r;
}
inline int __clz(unsigned x) { return x ? __builtin_clz(x) : 32; }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }  // 1 + index of the lowest set bit, 0 for 0
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
// Warp intrinsics.  The emulator runs each CUDA thread as its own fiber with no SIMT
// convergence, so the lanes "now executing together" are the calling lane alone: a valid
// answer of __activemask on a GPU too (independent thread scheduling), and the only mask the
// *_sync intrinsics below accept.
inline unsigned emu_lane_bit() { return 1u << (threadIdx.x & 31u); }
unsigned emu_check_mask(unsigned mask, const char* what);
inline unsigned __activemask() { return emu_lane_bit(); }
inline unsigned __match_any_sync(unsigned mask, unsigned) { return emu_check_mask(mask, "__match_any_sync"); }
inline unsigned __shfl_sync(unsigned mask, unsigned v, int src)
{
    emu_check_mask(mask, "__shfl_sync");
    if ((unsigned)src != (threadIdx.x & 31u)) emu_check_mask(0, "__shfl_sync source lane");
    return v;
}
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((uint64_t)a * b) >> 32); }
// Device-wide atomics: blocks run concurrently on host worker threads.
inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v)
{
    unsigned long long old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (v < old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return old;
}
