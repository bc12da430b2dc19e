"""The engine's own overhead: cuzk.Engine over stages that only sleep (GIL released), with the
stage times of a 2^24 partition on the H200 (bench/RESULTS.md): prepare 100 ms, upload 60 ms,
kernel region 250 ms, finish 25 ms.  Prints s/partition per lock mode and worker count next to
the ideal (coarse: the sum; narrow / two-lock: max(region, (host + region) / workers)).  A gap here is the
engine's; a gap on the GPU that is absent here is the stages' (CPU or device contention).

    python bench/bench_engine_overhead.py [--partitions 12]
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

import cuzk                                            # noqa: E402
from engine_helpers import FakeStages, circuit         # noqa: E402

PREPARE, UPLOAD, REGION, FINISH = 0.100, 0.060, 0.250, 0.025


class SleepStages(FakeStages):
    def prepare(self, key, asg, ctx, r=None, s=None, check=True, upload=True):
        time.sleep(PREPARE)
        return super().prepare(key, asg, ctx, r, s, check, upload)

    def upload(self, part):
        time.sleep(UPLOAD)
        super().upload(part)

    def run(self, part):
        end = time.monotonic() + REGION

        class Done:
            def synchronize(self):
                time.sleep(max(0.0, end - time.monotonic()))

            def query(self):
                return time.monotonic() >= end
        return Done()

    def finish(self, part, verify=True):
        time.sleep(FINISH)
        return super().finish(part, verify)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=12)
    a = ap.parse_args(argv)
    pk, asg = circuit(4)
    total = PREPARE + UPLOAD + REGION + FINISH
    print(f"{'mode':<9s} {'workers':>7s} {'s/part':>8s} {'ideal':>8s}")
    for mode in ("coarse", "narrow", "two-lock"):
        for w in (1, 2, 3):
            st = SleepStages()
            with cuzk.Engine(backend="cpu", devices=1, workers_per_gpu=w, lock_mode=mode,
                             stages=lambda i: st, threads=1, verify=False) as eng:
                key = eng.load(pk, progress=False)
                t0 = time.perf_counter()
                eng.submit(key, [asg] * a.partitions).result(300)
                dt = (time.perf_counter() - t0) / a.partitions
            # narrow / two-lock: the region is exclusive, a worker's cycle is host + region
            ideal = total if mode == "coarse" else max(REGION, total / w)
            print(f"{mode:<9s} {w:>7d} {dt:8.3f} {ideal:8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
