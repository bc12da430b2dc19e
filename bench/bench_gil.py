"""GIL-free scaling: N Python threads each running MSMs (native threads=1 per call).

Aggregate throughput with N threads vs one thread; the goal is >= 0.9·N on N free cores.
Measures the public ``cuzk.msm`` (bytes in, bytes out: decode, MSM, encode), so every stage of
the call is covered, not only the Pippenger core. cpu/wall shows how many cores the run got.
Usage: python bench/bench_gil.py [--group g1|g2] [--lg 14] [--calls 4] [--max-threads N]
"""
import argparse
import os
import random
import sys
import threading
import time

import numpy as np

import cuzk._primitives as prim
from cuzk._constants import FR_MODULUS as R
from cuzk._native import _field


def inputs(group, n, seed=0):
    """n uncompressed points (256 distinct multiples of the generator, tiled) and n random scalars."""
    rnd = random.Random(seed)
    g = _field.generator(group)
    distinct = np.array([_field.point_mul(g, rnd.randrange(1, R), group) for _ in range(min(n, 256))])
    base = _field.encode_points(distinct, group, compressed=False)
    pts = np.ascontiguousarray(np.resize(base, (n, base.shape[1])))
    ks = np.frombuffer(b"".join(rnd.randrange(R).to_bytes(32, "little") for _ in range(n)),
                       dtype=np.uint8).reshape(n, 32)
    return pts, ks


def run(nthreads, calls, pts, ks, group):
    """(wall s, process CPU s) for nthreads Python threads each doing `calls` MSMs."""
    barrier = threading.Barrier(nthreads + 1)
    errors = []

    def worker():
        barrier.wait()
        try:
            for _ in range(calls):
                prim.msm(pts, ks, group, threads=1)
        except Exception as e:  # forwarded to the main thread
            errors.append(e)

    ts = [threading.Thread(target=worker) for _ in range(nthreads)]
    for t in ts:
        t.start()
    barrier.wait()
    t0, c0 = time.perf_counter(), time.process_time()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - t0, time.process_time() - c0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--group", default="g1", choices=["g1", "g2"])
    ap.add_argument("--lg", type=int, default=14, help="log2 of the MSM size")
    ap.add_argument("--calls", type=int, default=4, help="MSMs per thread")
    ap.add_argument("--max-threads", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args(argv)
    n = 1 << a.lg
    pts, ks = inputs(a.group, n)
    native = prim._native_msm() is not None
    prim.msm(pts, ks, a.group, threads=1)                # warm-up (and first-use constants)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"# {a.group} MSM n=2^{a.lg}, {a.calls} calls/thread, native threads=1 per call, "
          f"{os.cpu_count()} cores (load average {load:.1f} at start), "
          f"path={'cuzk._native._msm' if native else 'msm_simple fallback'}")
    # cpu/wall: how many cores the run really got (on a shared machine, fewer than asked)
    print(f"{'threads':>7} {'wall s':>8} {'MSM/s':>8} {'speed-up':>8} {'goal 0.9N':>9} {'cpu/wall':>8}")
    base = None
    for nt in range(1, a.max_threads + 1):
        dt, cpu = run(nt, a.calls, pts, ks, a.group)
        rate = nt * a.calls / dt
        base = base or rate
        print(f"{nt:>7} {dt:>8.3f} {rate:>8.2f} {rate / base:>8.2f} {0.9 * nt:>9.2f} {cpu / dt:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
