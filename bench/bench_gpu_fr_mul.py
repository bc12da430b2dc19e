"""Benchmark: raw GPU Fr (or Fq) multiplication rate (the NTT's inner operation; with
--field fq, the curve code's out-of-line fq_t product) vs warps per SM.

    python bench/bench_gpu_fr_mul.py [--field fr|fq] [--warps 4,8,16,32] [--iters 4096] [--json FILE]

Compiles a throw-away kernel with cuzk's NVRTC wrapper (the field code is
cuzk/cu/ff/, the same header the NTT uses) in which every thread runs CHAINS
independent chains of ``x = x * y`` (or of a radix-2 butterfly ``(u, v) ->
(u + z v, u - z v)``) for --iters steps, entirely in registers: no memory
traffic, so the time is the multiplier's alone.  Grid: one wave of
``warps``-per-SM blocks on every SM (occupancy is set by the launch, the kernel
needs few registers).

Printed per row: products per second and the fraction of the issue's floor
(IMAD_PER_MUL 32-bit IMAD per product at SMs x 64 IMAD/clk x max SM clock: 256 for Fr,
600 for Fq, the CIOS product's IMAD-pipe slots).  The NTT's
own rate (bench_gpu_ntt.py) divided by this one is how much of the multiplier's
attainable speed the NTT's data movement, barriers and addressing leave.
"""

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys

import numpy as np

from cuzk import _cuda_ntt  # noqa: F401  (registers the "ntt" program, whose options we reuse)
from cuzk import _kernels
from cuzk._errors import CudaError
from cuzk._native import _driver as d
from cuzk._native import _nvrtc

IMAD_PER_MUL = {"fr": 256, "fq": 600}
LIMBS = {"fr": 8, "fq": 12}

SOURCE = r"""
#include "ff/bls12_381.cuh"
typedef cuzk::FIELD field_t;  // FIELD, LIMBS, CHAINS: -D options from main()
__device__ __forceinline__ field_t ld(const uint32_t* p, uint32_t i)
{
    field_t r;
#pragma unroll
    for (int k = 0; k < LIMBS; k++) r.l[k] = p[(i & 1023) * LIMBS + k];  // 1024 elements
    return r;
}
// x_c <- x_c * y, CHAINS independent chains per thread.
extern "C" __global__ void mul_chain(uint32_t* out, const uint32_t* in, uint32_t iters)
{
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    field_t x[CHAINS];
#pragma unroll
    for (int c = 0; c < CHAINS; c++) x[c] = ld(in, t + c);
    const field_t y = ld(in, t + 77);
#pragma unroll 1
    for (uint32_t i = 0; i < iters; i++) {
#pragma unroll
        for (int c = 0; c < CHAINS; c++) x[c] = x[c] * y;
    }
    field_t s = x[0];
#pragma unroll
    for (int c = 1; c < CHAINS; c++) s = s + x[c];
#pragma unroll
    for (int k = 0; k < LIMBS; k++) out[t * LIMBS + k] = s.l[k];
}
// (u, v) <- (u + z v, u - z v): one product and an add and a subtract per step.
extern "C" __global__ void butterfly_chain(uint32_t* out, const uint32_t* in, uint32_t iters)
{
    const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
    field_t u[CHAINS / 2], v[CHAINS / 2];
#pragma unroll
    for (int c = 0; c < CHAINS / 2; c++) { u[c] = ld(in, t + 2 * c); v[c] = ld(in, t + 2 * c + 1); }
    const field_t z = ld(in, t + 77);
#pragma unroll 1
    for (uint32_t i = 0; i < iters; i++) {
#pragma unroll
        for (int c = 0; c < CHAINS / 2; c++) {
            field_t w = v[c] * z;
            v[c] = u[c] - w;
            u[c] = u[c] + w;
        }
    }
    field_t s = u[0] + v[0];
#pragma unroll
    for (int c = 1; c < CHAINS / 2; c++) s = s + u[c] + v[c];
#pragma unroll
    for (int k = 0; k < LIMBS; k++) out[t * LIMBS + k] = s.l[k];
}
"""


def max_sm_clock_hz():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.max.sm", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20).stdout.split("\n")[0]
        return float(out) * 1e6
    except Exception:
        return 1.98e9


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    p.add_argument("--warps", type=ints, default=[4, 8, 16, 32], help="warps per SM (one wave)")
    p.add_argument("--chains", type=ints, default=[2, 4])
    p.add_argument("--iters", type=int, default=4096)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--field", choices=sorted(LIMBS), default="fr")
    p.add_argument("--options", default="", help="extra NVRTC options (e.g. -DCUZK_MONT_GENERIC_REDC)")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    ok, why = d.probe()
    if not ok:
        print(f"no usable CUDA device: {why}", file=sys.stderr)
        return 2
    dev = d.Device.get(0)
    clock = max_sm_clock_hz()
    floor_rate = dev.sm_count * 64 * clock / IMAD_PER_MUL[args.field]  # products/s at the floor
    limbs = LIMBS[args.field]
    stream = d.Stream(dev)
    rng = np.random.default_rng(3)
    host = rng.integers(0, 2**32, size=1024 * limbs, dtype=np.uint32)
    host[limbs - 1::limbs] &= 0x0fffffff                          # every element < r (and < p)
    d_in = d.DeviceBuffer.alloc(dev, host.nbytes)
    d.copy_htod(d_in, host, host.nbytes, stream)
    rows = []
    print(f"{dev.name}: {dev.sm_count} SMs, max SM clock {clock / 1e6:.0f} MHz, "
          f"{args.field} floor {floor_rate / 1e9:.1f} G products/s ({IMAD_PER_MUL[args.field]} IMAD each)")
    for chains in args.chains:
        opts = _kernels.nvrtc_options("ntt", dev.arch) + [f"-DCHAINS={chains}", f"-DFIELD={args.field}_t",
                                                            f"-DLIMBS={limbs}"] + args.options.split()
        image, _ = _nvrtc.compile(SOURCE.encode(), os.path.join(_kernels.cu_root(), "bench_fr_mul.cu"),
                                  opts, None, "cubin")
        mod = d.Module.load(dev, image)
        for kname, prods_per_step in (("mul_chain", chains), ("butterfly_chain", chains // 2)):
            fn = mod.function(kname)
            for w in args.warps:
                block = 32 * min(w, 32)              # one block per SM: a wave of exactly w warps each
                blocks_per_sm = max(1, w * 32 // block)
                grid = dev.sm_count * blocks_per_sm
                n_threads = grid * block
                d_out = d.DeviceBuffer.alloc(dev, n_threads * 4 * limbs)
                launch = lambda: fn.launch(stream, grid, block,  # noqa: E731
                                           [("P", d_out.ptr), ("P", d_in.ptr), ("I", args.iters)])
                try:
                    launch()
                except CudaError as e:               # a block of 32w threads needs too many registers
                    print(f"{kname:16s} chains {chains}  warps/SM {w:3d}: skipped ({e})", flush=True)
                    d_out.close()
                    continue
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
                ms = statistics.median(times)
                res = np.zeros(n_threads * limbs, dtype=np.uint32)  # the same bytes for any product code
                d.copy_dtoh(res, d_out, res.nbytes, stream)
                stream.synchronize()
                digest = hashlib.sha256(res.tobytes()).hexdigest()[:12]
                prods = n_threads * args.iters * prods_per_step
                rate = prods / (ms / 1e3)
                rows.append(dict(field=args.field, kernel=kname, chains=chains, warps_per_sm=w, ms=ms,
                                 products_per_s=rate, vs_floor=floor_rate / rate, sha256=digest))
                print(f"{kname:16s} chains {chains}  warps/SM {w:3d}: {ms:8.3f} ms  "
                      f"{rate / 1e9:7.2f} G products/s  = {floor_rate / rate:5.2f}x the floor time  out {digest}", flush=True)
                d_out.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=dev.name, clock_hz=clock, floor_products_per_s=floor_rate, rows=rows,
                           field=args.field, options=args.options), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
