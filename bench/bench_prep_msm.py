"""prep_msm on the CPU (cuzk._native._prep): the split of a partition's aux scalars into zeros,
ones (bitmaps for batch addition) and full-value tails, on a PoRep-shaped witness.

Inputs: aux of 2^K Montgomery scalars with the bits90 mix (45 % zeros, 45 % ones, 10 % uniform),
random A/B densities (B about a quarter of aux), 4 inputs.  Prints the minimum and median of
several calls and a sha256 over every output, so two builds can be compared for speed and bytes.

Run (from the repository root):
    python bench/bench_prep_msm.py [--log-n 22] [--threads 2] [--reps 7] [--form canonical|montgomery]
    pytest bench/bench_prep_msm.py    (pytest-benchmark, 2^20)
"""
import argparse
import hashlib
import statistics
import time

import numpy as np


def inputs(log_n, seed=1):
    from cuzk._assignment import fr_to_mont
    from cuzk._msm_dists import scalars as dist
    rng = np.random.default_rng(seed)
    n = 1 << log_n
    aux = fr_to_mont(dist(rng, n, "bits90"))
    ins = fr_to_mont(dist(rng, 4, "uniform"))
    w = (n + 63) // 64
    a_aux = rng.integers(0, 2**64, size=w, dtype=np.uint64)
    b_aux = rng.integers(0, 2**64, size=w, dtype=np.uint64) & rng.integers(0, 2**64, size=w, dtype=np.uint64)
    return ins, aux, a_aux, np.array([5], dtype=np.uint64), b_aux


def digest(out):
    h = hashlib.sha256()
    for k in sorted(out):
        v = out[k]
        h.update(k.encode())
        h.update(str(v).encode() if isinstance(v, int) else np.asarray(v).tobytes())
    return h.hexdigest()[:16]


def main(argv=None):
    from cuzk._native import _prep
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--log-n", type=int, default=22, help="log2 of the aux size")
    ap.add_argument("--threads", type=int, default=2, help="CPU threads (0: all)")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--form", default="canonical", choices=["canonical", "montgomery"],
                    help="tail scalars: canonical (CPU MSM) or Montgomery (GPU MSM)")
    a = ap.parse_args(argv)
    args = inputs(a.log_n)
    ts, out = [], None
    for _ in range(a.reps):
        t0 = time.perf_counter()
        out = _prep.prep_msm(*args, threads=a.threads, form=a.form)
        ts.append(time.perf_counter() - t0)
    print(f"prep_msm 2^{a.log_n} threads={a.threads} {a.form}: min {min(ts) * 1e3:.1f} ms, "
          f"median {statistics.median(ts) * 1e3:.1f} ms, outputs sha256 {digest(out)}")
    return 0


def test_prep_msm_2_20(benchmark):
    from cuzk._native import _prep
    args = inputs(20)
    out = benchmark(lambda: _prep.prep_msm(*args, threads=0))
    assert out["l_size"] == 1 << 20


if __name__ == "__main__":
    raise SystemExit(main())
