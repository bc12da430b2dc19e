"""Benchmark: raw GPU Fq product rate, integer (IMAD pipe) against FP64-pipe (fq_f64.cuh), and
both at once in one kernel.

    python bench/bench_gpu_fq_mul.py [--warps 8,16,24] [--chains 2,4] [--iters 1024] [--json FILE]
    python bench/bench_gpu_fq_mul.py --sass          # instruction counts per mode, no GPU

Every thread runs CHAINS independent chains of ``x = x * y`` entirely in registers (no memory
traffic), with the product chosen per kernel (MODE):
  int    fq_t's operator* (the curve code's product: a call, 12 x 32-bit limbs, IMAD pipe)
  f64    fq_mul_f64 (8 x 48-bit words as doubles, DFMA on the FP64 pipe; inlined)
  warp   in each block of 8 warps, 4 int and 4 f64 (one of each kind per scheduler), so a
         scheduler can feed both pipes from different warps
  chain  in every thread, even chains int and odd chains f64

All modes compute the same values, so their outputs must be the same bytes (printed as a
check).  Rows: products per second and the ratio against ``int`` at the same warps and chains.
Blocks of 256 threads, warps/SM / 8 blocks per SM: one wave when the kernel's registers (printed)
admit that occupancy, else the rest runs in a second wave.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np

from cuzk import _cuda_msm  # noqa: F401  (registers the "msm" program, whose options we reuse)
from cuzk import _kernels
from cuzk._native import _nvrtc

MODES = {"int": 0, "f64": 1, "warp": 2, "chain": 3}

SOURCE = r"""
#include "ff/fq_f64.cuh"
using cuzk::fq_t;
#ifndef CHAINS
#define CHAINS 4
#endif
#ifndef MODE
#define MODE 0
#endif
__device__ __forceinline__ fq_t ld(const uint32_t* p, uint32_t i)
{
    fq_t r;
#pragma unroll
    for (int k = 0; k < 12; k++) r.l[k] = p[(i * 12 + k) % 1536];
    return r;
}
__device__ __forceinline__ fq_t mul_int(const fq_t& a, const fq_t& b) { return a * b; }
__device__ __forceinline__ fq_t mul_f64(const fq_t& a, const fq_t& b) { return cuzk::fq_mul_f64(a, b); }
extern "C" __global__ void mul_chain(uint32_t* out, const uint32_t* in, uint32_t iters)
{
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    fq_t x[CHAINS];
#pragma unroll
    for (int c = 0; c < CHAINS; c++) x[c] = ld(in, t + c);
    const fq_t y = ld(in, t + 77);
#if MODE == 2
    // warps 0-3 of a block of 8 (one per scheduler: warp w runs on scheduler w % 4) int,
    // warps 4-7 f64, so every scheduler holds warps of both kinds
    const bool use_f64 = (threadIdx.x >> 7) & 1;
#endif
#pragma unroll 1
    for (uint32_t i = 0; i < iters; i++) {
#if MODE == 0
#pragma unroll
        for (int c = 0; c < CHAINS; c++) x[c] = mul_int(x[c], y);
#elif MODE == 1
#pragma unroll
        for (int c = 0; c < CHAINS; c++) x[c] = mul_f64(x[c], y);
#elif MODE == 2
        if (use_f64) {
#pragma unroll
            for (int c = 0; c < CHAINS; c++) x[c] = mul_f64(x[c], y);
        } else {
#pragma unroll
            for (int c = 0; c < CHAINS; c++) x[c] = mul_int(x[c], y);
        }
#else
#pragma unroll
        for (int c = 0; c < CHAINS; c++) x[c] = (c & 1) ? mul_f64(x[c], y) : mul_int(x[c], y);
#endif
    }
    fq_t s = x[0];
#pragma unroll
    for (int c = 1; c < CHAINS; c++) s = s + x[c];
#pragma unroll
    for (int k = 0; k < 12; k++) out[t * 12 + k] = s.l[k];
}
"""


def compile_mode(mode, chains, arch):
    opts = _kernels.nvrtc_options("msm", arch) + [f"-DCHAINS={chains}", f"-DMODE={MODES[mode]}"]
    image, _ = _nvrtc.compile(SOURCE.encode(), os.path.join(_kernels.cu_root(), "bench_fq_mul.cu"),
                              opts, None, "cubin")
    return image


def sass_counts(chains, arch):
    """Instruction counts of the loop body per mode (nvdisasm of the cubin; no GPU)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import sass_count
    nvd = sass_count.find_nvdisasm()
    if nvd is None:
        print("no nvdisasm (install the nvidia-cuda-nvdisasm wheel or set $NVDISASM)", file=sys.stderr)
        return 2
    for mode in ("int", "f64"):
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(compile_mode(mode, chains, arch))
            f.flush()
            text = subprocess.run([nvd, "-c", f.name], capture_output=True, text=True, check=True).stdout
        ops = {}
        for line in text.splitlines():
            m = sass_count._INSN.match(line)
            if m:
                op = m.group(1).split(".")[0]
                ops[op] = ops.get(op, 0) + 1
        total = sum(ops.values())
        top = ", ".join(f"{k} {v}" for k, v in sorted(ops.items(), key=lambda kv: -kv[1])[:12])
        print(f"{mode:5s} chains {chains}: {total} instructions in the module: {top}")
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    p.add_argument("--warps", type=ints, default=[8, 16, 24], help="warps per SM (multiples of 8)")
    p.add_argument("--chains", type=ints, default=[2, 4])
    p.add_argument("--modes", default="int,f64,warp,chain")
    p.add_argument("--iters", type=int, default=1024)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--sass", action="store_true", help="print instruction counts (no GPU) and exit")
    p.add_argument("--arch", default="sm_90", help="for --sass")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    if args.sass:
        return max(sass_counts(c, args.arch) for c in args.chains)
    from cuzk._native import _driver as d
    ok, why = d.probe()
    if not ok:
        print(f"no usable CUDA device: {why}", file=sys.stderr)
        return 2
    dev = d.Device.get(0)
    stream = d.Stream(dev)
    rng = np.random.default_rng(5)
    host = rng.integers(0, 2**32, size=1536, dtype=np.uint32)
    host[11::12] &= 0x0fffffff                                    # every element < 2^380 < p
    d_in = d.DeviceBuffer.alloc(dev, host.nbytes)
    d.copy_htod(d_in, host, host.nbytes, stream)
    rows, base = [], {}
    print(f"{dev.name}: {dev.sm_count} SMs; Fq products per second, {args.iters} steps per chain")
    for chains in args.chains:
        for w in args.warps:
            block = 256
            grid = dev.sm_count * max(1, w // 8)
            n_threads = grid * block
            outs = {}
            for mode in args.modes.split(","):
                mod = d.Module.load(dev, compile_mode(mode, chains, dev.arch))
                fn = mod.function("mul_chain")
                d_out = d.DeviceBuffer.alloc(dev, n_threads * 48)
                launch = lambda: fn.launch(stream, grid, block,  # noqa: E731
                                           [("P", d_out.ptr), ("P", d_in.ptr), ("I", args.iters)])
                launch()
                stream.synchronize()
                times = []
                for _ in range(args.runs):
                    e0, e1 = d.Event(dev), d.Event(dev)
                    e0.record(stream)
                    launch()
                    e1.record(stream)
                    e1.synchronize()
                    times.append(d.Event.elapsed_ms(e0, e1))
                    e0.close()
                    e1.close()
                o = np.empty(n_threads * 12, np.uint32)
                d.copy_dtoh(o, d_out, o.nbytes, stream)
                stream.synchronize()
                outs[mode] = o.tobytes()
                d_out.close()
                ms = statistics.median(times)
                rate = n_threads * args.iters * chains / (ms / 1e3)
                base.setdefault((chains, w), rate if mode == "int" else None)
                ref = base[(chains, w)]
                rows.append(dict(mode=mode, chains=chains, warps_per_sm=w, ms=ms, products_per_s=rate,
                                 regs=fn.num_regs, vs_int=(rate / ref) if ref else None))
                print(f"{mode:5s} chains {chains} warps/SM {w:3d} regs {fn.num_regs:3d}: {ms:8.3f} ms "
                      f"{rate / 1e9:7.3f} G products/s" + (f"  {rate / ref:5.2f}x int" if ref else ""), flush=True)
            same = len(set(outs.values())) == 1
            print(f"  chains {chains} warps/SM {w}: all modes the same bytes: {'yes' if same else 'NO'}")
            rows.append(dict(chains=chains, warps_per_sm=w, same_bytes=same))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=dev.name, iters=args.iters, rows=rows), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
