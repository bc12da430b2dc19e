"""GIL-free scaling of the native MSM: N Python threads, each running MSMs with threads=1.

Every call of ``cuzk._native._msm.msm`` (and batch_add) releases the GIL for all of its work,
so N Python threads doing independent MSMs should run N times as fast as one thread on N free
cores. Reported: aggregate MSMs per second for N = 1 … --max-threads and the speed-up over
N = 1 (goal: >= 0.9·N while N <= free cores). Also prints process CPU seconds over wall
seconds, which shows how many cores the run actually got on a shared machine.

Run (from the repository root; PYTHONPATH=. when cuzk is not installed):
    python bench/bench_msm_gil.py [--group g1|g2] [--lg 14] [--calls 4] [--max-threads 2]
    pytest bench/bench_msm_gil.py     (pytest-benchmark: one group per N)
"""
import argparse
import datetime
import os
import sys
import threading
import time

import numpy as np

P = 0x1a0111ea397fe69a4b1ba7b6434bacd764774b84f38512bf6730d2a0f6b0f6241eabfffeb153ffffb9feffffffffaaab
MONT = (1 << 384) % P
WIDTH = {"g1": 12, "g2": 24}


def inputs(group, n, seed=1):
    """n Montgomery affine points (a random walk over 16 random steps) and uniform scalars."""
    from py_arkworks_bls12381 import G1Point, G2Point, Scalar
    cls = G1Point if group == "g1" else G2Point
    rng = np.random.default_rng(seed)
    steps = [cls() * Scalar(int.from_bytes(rng.bytes(31), "little")) for _ in range(16)]
    raw, acc = bytearray(), steps[0]
    for k in rng.integers(0, 16, size=n):
        acc = acc + steps[int(k)]
        b = acc.to_xy_bytes_le()
        for j in range(0, len(b), 48):
            raw += (int.from_bytes(b[j:j + 48], "little") * MONT % P).to_bytes(48, "little")
    pts = np.frombuffer(bytes(raw), dtype=np.uint64).reshape(n, WIDTH[group]).copy()
    sc = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
    sc[:, 3] &= np.uint64((1 << 62) - 1)
    return pts, sc


def run(nthreads, calls, pts, sc, group):
    """(wall seconds, process CPU seconds) for nthreads Python threads each doing `calls` MSMs."""
    from cuzk._native._msm import msm
    results = [None] * nthreads
    barrier = threading.Barrier(nthreads + 1)

    def worker(k):
        barrier.wait()
        out = None
        for _ in range(calls):
            out = msm(pts, sc, group, 1)
        results[k] = out

    ths = [threading.Thread(target=worker, args=(k,)) for k in range(nthreads)]
    for t in ths:
        t.start()
    barrier.wait()
    w0, c0 = time.perf_counter(), time.process_time()
    for t in ths:
        t.join()
    w1, c1 = time.perf_counter(), time.process_time()
    assert all(np.array_equal(r, results[0]) for r in results)
    return w1 - w0, c1 - c0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--group", choices=["g1", "g2"], default="g1")
    p.add_argument("--lg", type=int, default=14, help="log2 of the MSM size")
    p.add_argument("--calls", type=int, default=4, help="MSMs per thread")
    p.add_argument("--max-threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--reps", type=int, default=3, help="best of reps for each N")
    a = p.parse_args(argv)
    pts, sc = inputs(a.group, 1 << a.lg)
    run(1, 1, pts, sc, a.group)  # warm-up: first-touch page faults, lazy imports
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"# cuzk native MSM GIL scaling — {datetime.datetime.now().isoformat(timespec='seconds')}")
    print(f"# {a.group} 2^{a.lg}, {a.calls} MSMs per Python thread, native threads=1 per call; "
          f"{os.cpu_count()} logical CPUs, load avg {load:.1f}; best of {a.reps}")
    print("| Python threads | wall s | MSM/s | speed-up | goal 0.9·N | CPU s / wall s |")
    print("|---|---|---|---|---|---|")
    base = None
    for n in range(1, a.max_threads + 1):
        best = min((run(n, a.calls, pts, sc, a.group) for _ in range(a.reps)), key=lambda t: t[0])
        rate = n * a.calls / best[0]
        base = base or rate
        print(f"| {n} | {best[0]:.3f} | {rate:.2f} | {rate / base:.2f} | {0.9 * n:.1f} | "
              f"{best[1] / best[0]:.2f} |", flush=True)


# ---- pytest-benchmark mode ------------------------------------------------------------------------
if "pytest" in sys.modules and __name__ != "__main__":
    import pytest

    _data = {}

    @pytest.mark.parametrize("nthreads", [1, 2])
    def test_msm_gil_scaling(benchmark, nthreads):
        if "g1" not in _data:
            _data["g1"] = inputs("g1", 1 << 13)
        pts, sc = _data["g1"]
        benchmark.group = "msm gil g1 2^13 x2 per thread"
        benchmark.extra_info["python_threads"] = nthreads
        benchmark.pedantic(run, args=(nthreads, 2, pts, sc, "g1"), rounds=3, warmup_rounds=1)


if __name__ == "__main__":
    main()
