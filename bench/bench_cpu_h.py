"""Benchmark: the CPU H stage, six transforms (production) vs bellperson's seven, same run.

    python bench/bench_cpu_h.py [--sizes 16,18,20] [--threads 0] [--reps 5] [--json FILE]

Both orders are the same C++ (cuzk._native._ntt; ``_h_stage_impl(seven=True)`` selects the
seven-transform order) and give the same bytes (checked here on every size).  Runs alternate
between the two so that drifting machine load hits both; the minimum of --reps is reported.
Prediction: 6 DFTs + 6n products vs 7 DFTs + 5n, a DFT being ~(n/2)·lg products, so
six/seven ~ 0.87 at 2^16..2^20.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

from cuzk._native._ntt import _h_stage_impl


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="16,18,20")
    p.add_argument("--threads", type=int, default=0, help="0: all cores")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    rng = np.random.default_rng(11)
    rows = []
    print(f"cores: {os.cpu_count()}, threads: {args.threads or 'all'}")
    for lg in (int(x) for x in args.sizes.split(",")):
        n = 1 << lg
        base = rng.integers(0, 2**64, size=(3, n, 4), dtype=np.uint64)
        base[:, :, 3] &= np.uint64((1 << 60) - 1)          # < 2^252 < r: valid elements
        times = {True: [], False: []}
        out = {}
        for _ in range(args.reps):
            for seven in (True, False):
                a, b, c = (base[i].copy() for i in range(3))
                t = time.perf_counter()
                _h_stage_impl(a, b, c, threads=args.threads, seven=seven)
                times[seven].append(time.perf_counter() - t)
                out[seven] = a
        same = bool(np.array_equal(out[True], out[False]))
        t7, t6 = min(times[True]), min(times[False])
        rows.append(dict(lg=lg, seven_ms=t7 * 1e3, six_ms=t6 * 1e3, ratio=t6 / t7, same_bytes=same))
        print(f"2^{lg}: seven {t7 * 1e3:9.1f} ms   six {t6 * 1e3:9.1f} ms   six/seven {t6 / t7:.3f}   "
              f"same bytes: {same}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(cores=os.cpu_count(), threads=args.threads, rows=rows), f, indent=1)
    return 0 if all(r["same_bytes"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
