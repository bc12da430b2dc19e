"""Benchmark: GPU batch addition (cuzk._cuda_batch) on device-resident points, and GPU fixed-base
multiplication (cuzk._cuda_fixed_base) vs the CPU's.

    python bench/bench_gpu_batch.py [--g1 20,24,27] [--g2 20,24] [--density 0.9[,0.45]] [--runs 7]
                                    [--kind auto|xyzz,affine,balanced] [--lane-bits auto|8,16,32,64]
                                    [--fixed 20,22] [--check-max 24] [--json F] [--peer LIB]

Batch addition: points and bitmap already on the device (the resident SRS of the prover);
timed with CUDA events around ``enqueue_batch_add`` alone (kernel + the copy of the block
partials), median of --runs after one warm-up; the CPU's Horner sum of the partials is
timed separately (wall clock).  Points: 2^min(lg, 22) distinct random points (made by the
GPU fixed-base kernel) tiled up to 2^lg on the device; each bit set with probability
--density (a list: every density a row; PoRep's ones are ~45 % of the aux values).  --kind and
--lane-bits (the "affine" kernel's bits per lane) take lists: every combination is a row.  Sizes
up to 2^--check-max are checked byte-equal against the CPU's batch_add.
Fixed base: whole calls (upload scalars, kernels, download), wall clock, vs the CPU path on
all cores, results checked equal.
--peer LIB: a peer's G1 batch addition timed in the same process on the same points and bitmap
(the C ABI in bench_gpu_msm.py's doc, ``peer_batch_add_g1``), its sum checked against cuzk's.
"""

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

from cuzk import _cuda_batch as B
from cuzk import _cuda_fixed_base as F
from cuzk._assignment import popcount_words
from cuzk._cuda_pending import XYZZ_WORDS
from cuzk._native import _driver as d
from cuzk._native import _field, _msm, _r1cs

R = _field.FR_MODULUS
# sppark's batch addition of 2^27 G1 points, 90 % of the bits set, on the same H200 (issue 8)
SPPARK_G1_2_27_MS = 54.5


def rand_scalars(rng, n):
    k = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
    k[:, 3] &= np.uint64((1 << 62) - 1)
    k[:, 3] %= np.uint64(R >> 192)
    return k


def bits_for(rng, n, density):
    nw = (n + 63) // 64
    out = np.empty(nw, np.uint64)
    step = 1 << 20
    for lo in range(0, nw, step):                      # by pieces: 2^27 bools at once is 128 MiB
        hi = min(nw, lo + step)
        sel = rng.random((hi - lo) * 64) < density
        out[lo:hi] = np.packbits(sel.reshape(hi - lo, 64), axis=1, bitorder="little").view(np.uint64).ravel()
    if n % 64:
        out[-1] &= np.uint64((1 << (n % 64)) - 1)
    return out


def bench_batch(group, lg, density, runs, check, rng, kind=None, lane_bits=None, peer=None):
    n = 1 << lg
    base_n = 1 << min(lg, 22)
    pts = F.fixed_base_mul(None, rand_scalars(rng, base_n), group)
    bits = bits_for(rng, n, density)
    B._LANE_BITS_ENV = lane_bits or 0
    plan = B.batch_add_plan(n, group, kind=kind)
    st = B._state(None)
    s = st.streams()[0]
    d_pts = st.pool.alloc(n * pts.shape[1] * 8, s)
    d_bits = st.pool.alloc(bits.nbytes, s)
    for lo in range(0, n, base_n):
        d.copy_htod(d_pts.ptr + lo * pts.shape[1] * 8, pts, pts.nbytes, s)
    d.copy_htod(d_bits, bits, bits.nbytes, s)
    pinned = d.PinnedBuffer(plan.host_rows * XYZZ_WORDS[group] * 8, st.device)
    host = pinned.asarray("uint64", (plan.host_rows, XYZZ_WORDS[group]))
    e0, e1 = d.Event(st.device), d.Event(st.device)
    got = B.enqueue_batch_add(plan, s, st.pool, d_pts, d_bits, host)   # warm-up
    s.synchronize()
    got = got.value()
    same = None
    if check:
        tiled = np.tile(pts, (n // base_n, 1))
        same = bool(np.array_equal(got, _msm.batch_add(tiled, bits, group, 0)))
        del tiled
    ms, horner = [], []
    for _ in range(runs):
        e0.record(s)
        pend = B.enqueue_batch_add(plan, s, st.pool, d_pts, d_bits, host)
        e1.record(s)
        e1.synchronize()
        ms.append(d.Event.elapsed_ms(e0, e1))
        t0 = time.perf_counter()
        pend.value()
        horner.append(1e3 * (time.perf_counter() - t0))
    d_pts.free(s)
    d_bits.free(s)
    s.synchronize()
    del pinned          # freed with its last view (PendingPoints hold views)
    peer_ms = peer_same = None
    if peer is not None and group == "g1":
        peer_ms, peer_sum = peer.batch_add(pts, n, bits, runs)
        peer_same = bool(np.array_equal(peer_sum, got))
    set_bits = popcount_words(bits)
    return {"group": group, "lg": lg, "n": n, "density": density, "set_bits": set_bits, "kind": plan.kind,
            "lane_bits": plan.lane_bits, "scratch_mib": plan.scratch_bytes / 2**20,
            "blocks": plan.blocks, "threads": plan.threads, "gpu_ms": statistics.median(ms),
            "gpu_ms_all": ms, "host_horner_ms": statistics.median(horner), "same": same,
            "peer_ms": peer_ms, "peer_same": peer_same}


def bench_fixed(group, lg, runs, rng):
    n = 1 << lg
    k = rand_scalars(rng, n)
    km = _field.to_mont(k, "fr")
    g = F.fixed_base_mul(None, km, group, montgomery=True)          # warm-up (table, module)
    t0 = time.perf_counter()
    c = _r1cs.fixed_base_mul(group, km.copy(), threads=0)
    cpu = time.perf_counter() - t0
    tg = []
    for _ in range(runs):
        t0 = time.perf_counter()
        F.fixed_base_mul(None, km, group, montgomery=True)
        tg.append(time.perf_counter() - t0)
    return {"group": group, "lg": lg, "n": n, "window": F.window_bits(n),
            "gpu_ms": 1e3 * statistics.median(tg), "cpu_ms": 1e3 * cpu, "same": bool(np.array_equal(g, c))}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--g1", default="20,24,27")
    p.add_argument("--g2", default="20,24")
    p.add_argument("--density", default="0.9", help="fractions of the bits set, a list")
    p.add_argument("--kind", default="auto", help=f"auto (default_kind) or a list of {','.join(B.KINDS)}")
    p.add_argument("--lane-bits", default="auto", help="the affine kernel's bits per lane: auto or a list")
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--fixed", default="20,22", help="fixed-base sizes (log2), G1 and G2; '' = none")
    p.add_argument("--check-max", type=int, default=24)
    p.add_argument("--json", default=None)
    p.add_argument("--peer", default=None, help="a peer batch-addition library to time beside cuzk (G1)")
    args = p.parse_args(argv)
    ok, why = d.probe()
    if not ok:
        print(f"no usable CUDA device: {why}", file=sys.stderr)
        return 2
    rng = np.random.default_rng(27)
    dev = d.Device.get(0)
    print(f"{dev.name}; {dev.sm_count} SMs; CPU: {os.cpu_count()} cores")
    peer = None
    if args.peer:
        from bench_gpu_msm import Peer                 # bench/ is the script's directory
        peer = Peer(args.peer)
    rows, all_ok = [], True
    kinds = [None if k == "auto" else k for k in args.kind.split(",") if k]
    lanes = [None if b == "auto" else int(b) for b in args.lane_bits.split(",") if b]
    print(f"{'group':>5s} {'n':>6s} {'dens':>5s} {'kind':>6s} {'B':>3s} {'blocks':>6s} {'gpu ms':>9s} "
          f"{'host ms':>8s}  same")
    for group, sizes in (("g1", args.g1), ("g2", args.g2)):
        for lg in (int(x) for x in sizes.split(",") if x):
            for density in (float(x) for x in args.density.split(",") if x):
                for kind in kinds:
                    for lb in (lanes if kind in (None, "affine") else [None]):
                        r = bench_batch(group, lg, density, args.runs, lg <= args.check_max, rng, kind, lb, peer)
                        if r["kind"] != "affine" and lb is not None:
                            continue               # auto picked another kernel: the lane sweep is moot
                        rows.append(("batch_add", r))
                        all_ok &= r["same"] is not False and r["peer_same"] is not False
                        print(f"{group:>5s} {'2^%d' % lg:>6s} {density:5.2f} {r['kind']:>6s} {r['lane_bits']:3d} "
                              f"{r['blocks']:6d} {r['gpu_ms']:9.3f} {r['host_horner_ms']:8.3f}  {r['same']}"
                              + (f"  peer {r['peer_ms']:.3f} ms (cuzk / peer {r['gpu_ms'] / r['peer_ms']:.3f}, "
                                 f"peer same {r['peer_same']})" if r["peer_ms"] else ""),
                              flush=True)
                        if group == "g1" and lg == 27 and density == 0.9:
                            print(f"      sppark 2^27 G1 90 %: {SPPARK_G1_2_27_MS} ms "
                                  f"-> cuzk / sppark = {r['gpu_ms'] / SPPARK_G1_2_27_MS:.2f}")
    if args.fixed:
        print(f"\n{'fixed':>5s} {'n':>6s} {'w':>3s} {'gpu ms':>9s} {'cpu ms':>9s} {'cpu/gpu':>8s}  same")
        for group in ("g1", "g2"):
            for lg in (int(x) for x in args.fixed.split(",") if x):
                r = bench_fixed(group, lg, max(1, args.runs // 2), rng)
                rows.append(("fixed_base", r))
                all_ok &= r["same"]
                print(f"{group:>5s} {'2^%d' % lg:>6s} {r['window']:3d} {r['gpu_ms']:9.2f} {r['cpu_ms']:9.2f} "
                      f"{r['cpu_ms'] / r['gpu_ms']:8.2f}  {r['same']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"kind": k, **r} for k, r in rows], f, indent=1)
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
