"""CPU MSM benchmark: cuzk (cuzk._native._msm) against arkworks, same inputs, same cores, one run.

Peer: py-arkworks-bls12381 (PyPI), ``G1Point/G2Point.multiexp_unchecked`` — arkworks'
``VariableBaseMSM``, with its default threading (the 0.5 wheel runs it on one thread: the
"thr" columns, process CPU time over wall time, show the cores each side actually used).
Its time includes moving the Python lists of points and scalars across the binding, which
is how it is called from Python; that cost is measured alone and printed beside it.

Inputs: random subgroup points (an arkworks random walk, converted to cuzk's Montgomery
layout) and two scalar mixes: ``uniform`` (random 254-bit) and ``bits90`` (45 % zeros,
45 % ones, 10 % uniform — the shape of real Filecoin witnesses before the 0/1 split).
The two results are compared for every row (an "!" marks a mismatch).

Run (from the repository root; PYTHONPATH=. when cuzk is not installed):
    python bench/bench_cpu_msm.py [--g1 10-18] [--g2 10-16] [--threads 0] [--reps 3]
                                  [--mix uniform,bits90] [--clock wall|cpu]
    pytest bench/bench_cpu_msm.py    (pytest-benchmark; cuzk and arkworks in the same groups)
"""
import argparse
import datetime
import os
import platform
import sys
import time

import numpy as np

from cuzk._constants import FQ_MODULUS as P, FQ_MONT_R as MONT, FQ_MONT_R_INV as MONT_INV, FR_MODULUS as R
WIDTH = {"g1": 12, "g2": 24}
MIXES = ("uniform", "bits90")


def _cls(group):
    from py_arkworks_bls12381 import G1Point, G2Point
    return G1Point if group == "g1" else G2Point


class Inputs:
    """Points (arkworks objects + cuzk Montgomery array) and scalar mixes, cached by size."""

    def __init__(self, group, n_max, seed=7):
        from py_arkworks_bls12381 import Scalar
        cls = _cls(group)
        rng = np.random.default_rng(seed)
        steps = [cls() * Scalar(int.from_bytes(rng.bytes(31), "little")) for _ in range(16)]
        pts, acc = [], steps[0]
        picks = rng.integers(0, 16, size=n_max)
        for k in picks:
            acc = acc + steps[int(k)]
            pts.append(acc)
        self.group, self.points = group, pts
        self.mont = np.zeros((n_max, WIDTH[group]), dtype=np.uint64)
        raw = bytearray()
        for p in pts:
            b = p.to_xy_bytes_le()
            for j in range(0, len(b), 48):
                raw += (int.from_bytes(b[j:j + 48], "little") * MONT % P).to_bytes(48, "little")
        self.mont[:] = np.frombuffer(bytes(raw), dtype=np.uint64).reshape(n_max, WIDTH[group])
        self.ark = pts  # the same points as arkworks objects
        self.rng = rng
        self._sc = {}

    def scalars(self, n, mix):
        key = (n, mix)
        if key not in self._sc:
            from py_arkworks_bls12381 import Scalar
            s = self.rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
            s[:, 3] &= np.uint64((1 << 62) - 1)  # < 2^254 < r
            if mix == "bits90":
                u = self.rng.random(n)
                bit = u < 0.9
                s[bit] = 0
                s[bit & (u < 0.45), 0] = 1
            raw = s.tobytes()
            ark = [Scalar.from_le_bytes(raw[32 * i:32 * i + 32]) for i in range(n)]
            self._sc[key] = (s, ark)
        return self._sc[key]


def cuzk_msm(inp, n, mix, threads):
    from cuzk._native._msm import msm
    s, _ = inp.scalars(n, mix)
    return msm(inp.mont[:n], s, inp.group, threads)


def ark_msm(inp, n, mix):
    _, ark = inp.scalars(n, mix)
    return _cls(inp.group).multiexp_unchecked(inp.ark[:n], ark)


def to_mont(pt, group):
    b = pt.to_xy_bytes_le()
    raw = b"".join((int.from_bytes(b[j:j + 48], "little") * MONT % P).to_bytes(48, "little")
                   for j in range(0, len(b), 48))
    return np.frombuffer(raw, dtype=np.uint64)


def _cpu():
    return time.process_time()


def timed(fn, reps, clock):
    """Best-of-reps seconds (wall or process CPU) and the CPU/wall ratio of that run."""
    best, par, out = float("inf"), 0.0, None
    for _ in range(reps):
        w0, c0 = time.perf_counter(), _cpu()
        out = fn()
        w1, c1 = time.perf_counter(), _cpu()
        t = (w1 - w0) if clock == "wall" else (c1 - c0)
        if t < best:
            best, par = t, (c1 - c0) / max(w1 - w0, 1e-9)
    return best, par, out


def _machine():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    return f"{cpu}, {os.cpu_count()} logical CPUs, load avg {load:.1f}"


def _range(s):
    a, _, b = s.partition("-")
    return list(range(int(a), int(b or a) + 1))


def run_table(sizes, threads, reps, mixes, clock, peer=True):
    import py_arkworks_bls12381
    print(f"# cuzk CPU MSM benchmark — {datetime.datetime.now().isoformat(timespec='seconds')}")
    print(f"# machine: {_machine()}; python {platform.python_version()}")
    print(f"# cuzk threads={threads or os.cpu_count()} (0 = all); arkworks: rayon default "
          f"(RAYON_NUM_THREADS={os.environ.get('RAYON_NUM_THREADS', 'unset')}); "
          f"py_arkworks_bls12381 {getattr(py_arkworks_bls12381, '__version__', '0.5')}; clock={clock}, best of {reps}")
    print("| group | n | scalars | cuzk ms | cuzk thr | arkworks ms | ark thr | list conv ms | cuzk/ark |")
    print("|---|---|---|---|---|---|---|---|---|")
    for group, lgs in sizes.items():
        if not lgs:
            continue
        t0 = time.perf_counter()
        inp = Inputs(group, 1 << max(lgs))
        print(f"# {group}: {1 << max(lgs)} points generated in {time.perf_counter() - t0:.1f} s",
              file=sys.stderr)
        for lg in lgs:
            n = 1 << lg
            for mix in mixes:
                inp.scalars(n, mix)
                tc, pc, rc = timed(lambda: cuzk_msm(inp, n, mix, threads), reps, clock)
                if peer:
                    ta, pa, ra = timed(lambda: ark_msm(inp, n, mix), reps, clock)
                    _, ark_sc = inp.scalars(n, mix)
                    conv, _, _ = timed(lambda: (list(inp.ark[:n]), list(ark_sc)), 1, clock)
                    ok = np.array_equal(rc, to_mont(ra, group))
                    print(f"| {group} | 2^{lg} | {mix} | {tc * 1e3:.1f} | {pc:.1f} | {ta * 1e3:.1f} | "
                          f"{pa:.1f} | {conv * 1e3:.1f} | {tc / ta:.2f}{'' if ok else ' !'} |", flush=True)
                else:
                    print(f"| {group} | 2^{lg} | {mix} | {tc * 1e3:.1f} | {pc:.1f} | - | - | - | - |",
                          flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--g1", default="10-18", help="log2 sizes for G1, e.g. 10-18 ('' = none)")
    p.add_argument("--g2", default="10-16", help="log2 sizes for G2, e.g. 10-16 ('' = none)")
    p.add_argument("--threads", type=int, default=0, help="cuzk threads (0 = all); also sets "
                   "RAYON_NUM_THREADS for arkworks when given")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--mix", default=",".join(MIXES))
    p.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                   help="wall clock, or process CPU seconds (all threads; robust on a busy machine)")
    p.add_argument("--no-peer", action="store_true")
    a = p.parse_args(argv)
    if a.threads:
        os.environ.setdefault("RAYON_NUM_THREADS", str(a.threads))
    sizes = {"g1": _range(a.g1) if a.g1 else [], "g2": _range(a.g2) if a.g2 else []}
    run_table(sizes, a.threads, a.reps, a.mix.split(","), a.clock, peer=not a.no_peer)


# ---- pytest-benchmark mode ------------------------------------------------------------------------
try:
    import pytest
except ImportError:  # script mode needs no pytest
    pytest = None

if pytest is not None and "pytest" in sys.modules and __name__ != "__main__":
    _CASES = [("g1", lg, mix) for lg in (10, 12, 14, 16) for mix in MIXES] + \
             [("g2", lg, mix) for lg in (10, 12, 14) for mix in MIXES]
    _inputs = {}

    def _inp(group):
        if group not in _inputs:
            _inputs[group] = Inputs(group, 1 << 16 if group == "g1" else 1 << 14)
        return _inputs[group]

    @pytest.mark.parametrize("group,lg,mix", _CASES)
    def test_cuzk_msm(benchmark, group, lg, mix):
        inp = _inp(group)
        inp.scalars(1 << lg, mix)
        benchmark.group = f"msm {group} 2^{lg} {mix}"
        benchmark.pedantic(cuzk_msm, args=(inp, 1 << lg, mix, 0), rounds=3, warmup_rounds=1)

    @pytest.mark.parametrize("group,lg,mix", _CASES)
    def test_arkworks_msm(benchmark, group, lg, mix):
        inp = _inp(group)
        inp.scalars(1 << lg, mix)
        benchmark.group = f"msm {group} 2^{lg} {mix}"
        benchmark.pedantic(ark_msm, args=(inp, 1 << lg, mix), rounds=3, warmup_rounds=1)


if __name__ == "__main__":
    main()
