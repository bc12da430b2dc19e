"""Benchmark: GPU G1 MSM (cuzk._cuda_msm) vs the CPU MSM (cuzk._native._msm, all cores), same run.

    python bench/bench_gpu_msm.py [--sizes 16,18,20,22] [--runs 5] [--kind uniform|bits90] [--json F]

Points come from the CPU's fixed-base batch multiplication, scalars are uniform < 2^255 (or
90 % zeros and ones with --kind bits90).  Each size: the results are checked equal (bytes),
then both are timed as whole calls (wall clock, median of --runs after one warm-up): the GPU
call includes the upload of points and scalars and the host's prefix sum, as the prover's
stages would pay today.
"""

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

from cuzk import _cuda_msm as M
from cuzk._native import _driver as d
from cuzk._native import _msm, _r1cs


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="16,18,20,22")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--kind", choices=["uniform", "bits90"], default="uniform")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    ok, why = d.probe()
    if not ok:
        print(f"no usable CUDA device: {why}", file=sys.stderr)
        return 2
    rng = np.random.default_rng(21)
    rows, all_ok = [], True
    print(f"{d.Device.get(0).name}; CPU: {os.cpu_count()} cores; scalars: {args.kind}")
    print(f"{'n':>6s} {'c':>3s} {'gpu ms':>9s} {'cpu ms':>9s} {'cpu/gpu':>8s}  same")
    for lg in (int(x) for x in args.sizes.split(",")):
        n = 1 << lg
        k = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
        k[:, 3] &= np.uint64((1 << 60) - 1)
        pts = _r1cs.fixed_base_mul("g1", k, threads=0)
        sc = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
        sc[:, 3] &= np.uint64((1 << 63) - 1)
        if args.kind == "bits90":
            small = rng.random(n) < 0.9
            sc[small] = 0
            sc[small, 0] = rng.integers(0, 2, size=int(small.sum()), dtype=np.uint64)
        g = M.msm_g1(pts, sc)                       # warm-up (module load / NVRTC) and check
        c = _msm.msm(pts, sc, "g1")
        same = bool(np.array_equal(g, c))
        all_ok &= same
        tg, tc = [], []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            M.msm_g1(pts, sc)
            tg.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            _msm.msm(pts, sc, "g1")
            tc.append(time.perf_counter() - t0)
        mg, mc = statistics.median(tg) * 1e3, statistics.median(tc) * 1e3
        rows.append(dict(lg=lg, c=M.window_bits(n), gpu_ms=mg, cpu_ms=mc, cpu_over_gpu=mc / mg, same=same))
        print(f"  2^{lg:<3d} {M.window_bits(n):3d} {mg:9.2f} {mc:9.2f} {mc / mg:8.2f}  {same}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(kind=args.kind, cores=os.cpu_count(), rows=rows), f, indent=1)
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
