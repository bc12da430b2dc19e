// Fixed-width integer types for kernel sources compiled by NVRTC (which ships
// no standard headers).  Under CUZK_HOST_EMU (a host-side emulation build used
// only by developers) the host's <cstdint> provides them instead.
#pragma once

#ifndef CUZK_HOST_EMU
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef int int32_t;
typedef long long int64_t;
#endif

#ifndef CUZK_DEVICE
#define CUZK_DEVICE __device__ __forceinline__
#endif

// A device function kept out of line (its own register allocation; the host emulator's
// compiler spells it differently).
#ifdef CUZK_HOST_EMU
#define CUZK_NOINLINE __attribute__((noinline))
#else
#define CUZK_NOINLINE __device__ __noinline__
#endif

// Dynamic shared memory as an array `name` of `type` (the host emulator supplies a buffer).
#ifdef CUZK_HOST_EMU
#define CUZK_DYN_SMEM(type, name) type* name = (type*)emu_dyn_smem
#else
#define CUZK_DYN_SMEM(type, name) extern __shared__ type name[]
#endif
