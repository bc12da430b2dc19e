"""Benchmark: the GPU MSM (cuzk._cuda_msm) on the scalar distributions provers have (issue 9).

    python bench/bench_gpu_msm.py [--quick] [--g1 20,22,24] [--g2 20,22] [--kinds uniform,bits90,real_tail]
                                  [--c auto|16,18,20] [--segment 64|32,64,128] [--k 1|1,4,8]
                                  [--balance bucket|bucket,flat] [--scatter-buckets auto|17,19,32]
                                  [--scatter auto|offsets,cursors]
                                  [--form montgomery|canonical] [--runs 5] [--no-check] [--json F]
                                  [--peer LIB]

Bases and scalars are on the device before timing (the prover's resident SRS; scalars as the
NTT leaves them, Montgomery by default).  Each row: one warm-up, then --runs timed MSMs, the
median of each column:

  gpu ms     CUDA events around enqueue_msm on the stream (every kernel + the copy of the
             partial window sums into pinned memory)
  host ms    PendingPoint.value(): the Horner finish on the CPU, after the sync
  h2d ms     copying the scalars from pinned host memory (for a caller whose scalars are on the
             host), events
  pre ms     precompute_bases for k > 1 (once per resident key), events; pre GiB its table

--c/--segment/--k/--balance/--scatter-buckets/--scatter take lists: every combination is a row (the choices issue 9 leaves to
measurement).  Bases: a random set of 2^18 points (fixed-base multiplication on the CPU) tiled to
n — the MSM's time does not depend on the bases being distinct.  Each (group, n, kind) is checked
against the CPU MSM (cuzk._native._msm, all cores) unless --no-check.  The table is printed last;
sppark's figures (issue 9: H200, 2026-12-01, points and scalars on the device) for comparison.

--peer LIB times a peer G1 MSM in the same process, on the same points and scalars: a shared
library (built by whoever runs the comparison, outside this repository) with the C functions
  int peer_msm_g1(const void* points, size_t n, const void* scalars, int mont, int runs,
                  double* ms, void* out)   /* points: n affine Montgomery rows of 12 words (the
                  layout cuzk uses); scalars: n rows of 4 words, Montgomery when mont; the peer
                  keeps both on the device, then times `runs` MSMs host to host (ms[i]) and
                  writes the last sum to out as Jacobian Montgomery X, Y, Z (6 words each) */
  size_t peer_point_bytes(void)          /* 144 */
and, for bench_gpu_batch.py --peer,
  int peer_batch_add_g1(const void* base_points, size_t base_n, size_t n, const void* bits, int runs,
                        double* ms, void* out)   /* Σ of the n points (base_points tiled on the
                        device) whose bit is set (bits: LSB first); ms[i]: kernel + the copy of its
                        partials, events; out: XYZZ Montgomery X, Y, ZZ, ZZZ (6 words each) */
Its column "peer ms" is the median of the runs after one warm-up (wall clock: the peer's own
finish on the host included, as cuzk's "gpu + host"); "peer ok" says whether its sum equals the
CPU's (or cuzk's when --no-check).
"""

import argparse
import ctypes
import itertools
import json
import os
import statistics
import sys
import time

import numpy as np

from cuzk import _cuda_msm as M
from cuzk._assignment import fr_to_mont
from cuzk._cuda_pending import XYZZ_WORDS
from cuzk._msm_dists import KINDS, scalars as dist_scalars
from cuzk._native import _driver as d
from cuzk._native import _field, _msm, _r1cs

# sppark @17278d7 msm_t on the same H200 (issue 9), ms: (group, lg, kind) -> median
SPPARK = {("g1", 20, "uniform"): 20.4, ("g1", 22, "uniform"): 53.1, ("g1", 24, "uniform"): 155.3,
          ("g1", 26, "uniform"): 568.3, ("g1", 20, "bits90"): 14.4, ("g1", 22, "bits90"): 17.8,
          ("g1", 24, "bits90"): 47.4, ("g1", 26, "bits90"): 171.4}
BASE_LG = 18


def _ints(text):
    return [int(x) for x in text.split(",") if x]


def _opt_ints(text):
    return [None if x == "auto" else int(x) for x in text.split(",") if x]


def bases(group, n, cache):
    """n bases: 2^BASE_LG random points tiled (cached per group)."""
    if group not in cache:
        rng = np.random.default_rng(7)
        k = rng.integers(0, 2**64, size=(1 << BASE_LG, 4), dtype=np.uint64)
        k[:, 3] &= np.uint64((1 << 60) - 1)
        cache[group] = _r1cs.fixed_base_mul(group, k, threads=0)
    b = cache[group]
    reps = -(-n // b.shape[0])
    return np.ascontiguousarray(np.tile(b, (reps, 1))[:n])


def timed(st, s, fn, runs):
    """Median ms (CUDA events) of fn() enqueued on s, after one warm-up; fn's last result."""
    e0, e1 = d.Event(st.device), d.Event(st.device)
    out = fn()
    s.synchronize()
    times = []
    for _ in range(runs):
        e0.record(s)
        out = fn()
        e1.record(s)
        e1.synchronize()
        times.append(d.Event.elapsed_ms(e0, e1))
    e0.close()
    e1.close()
    return statistics.median(times), out


def bench_one(st, s, group, n, d_pts, d_sc, sc_host, kind, c, segment, k, form, runs, want, cache, balance=None,
              scatter=None, mode=None):
    M._SCATTER_BUCKETS = scatter or _SCATTER_DEFAULT
    M._SCATTER_MODE = mode or _SCATTER_MODE_DEFAULT
    if c is None:                   # "auto": what msm_g1/msm_g2 choose for these host scalars
        c = M.sampled_window(group, sc_host, "canonical", k)             # sc_host: canonical
    if balance is None:
        balance = M.sampled_balance(group, sc_host, "canonical", c, k)
    plan = M.msm_plan(n, group, st.device, npoints=n, c=c, k=k, segment=segment, balance=balance)
    row = dict(group=group, lg=n.bit_length() - 1, n=n, kind=kind, c=plan.c, W=plan.W, k=k, Wk=plan.Wk,
               balance=plan.balance, sb=M._SCATTER_BUCKETS, scatter=M._SCATTER_MODE,
               S=plan.S, levels=plan.levels, P=plan.P, form=form,
               scratch_gib=plan.scratch_bytes / 2**30, pre_gib=plan.precompute_bytes / 2**30)
    table = None
    if k > 1:
        key = (group, n, plan.c, k)
        if key not in cache:
            for tb, _ in cache.values():                   # one table at a time (memory)
                tb.free(s)
            if cache:                                      # its bytes back to the device: the next
                s.synchronize()                            # table may be larger (k = 12 at 2^26: 72 GiB)
                st.pool.trim(0)
            cache.clear()
            tb = st.pool.alloc(plan.precompute_bytes, s)
            pre_ms, _ = timed(st, s, lambda: M.precompute_bases(plan, s, d_pts.ptr, tb.ptr), 1)
            cache[key] = (tb, pre_ms)
        table, row["pre_ms"] = cache[key]
    src = table.ptr if table is not None else d_pts.ptr
    pinned = d.PinnedBuffer(plan.host_rows * XYZZ_WORDS[group] * 8, st.device)
    view = pinned.asarray("uint64", (plan.host_rows, XYZZ_WORDS[group]))
    try:
        row["gpu_ms"], pend = timed(
            st, s, lambda: M.enqueue_msm(plan, s, st.pool, src, d_sc.ptr, view, scalar_form=form), runs)
        hs = []
        for _ in range(max(1, runs)):
            pend._value = None
            t0 = time.perf_counter()
            got = pend.value()
            hs.append((time.perf_counter() - t0) * 1e3)
        row["host_ms"] = statistics.median(hs)
    finally:
        del pinned          # freed with its last view (PendingPoints hold views)
    row["same"] = None if want is None else bool(np.array_equal(got, want))
    row["_got"] = got
    sp = SPPARK.get((group, row["lg"], kind))
    row["sppark_ms"] = sp
    return row


_SCATTER_DEFAULT, _SCATTER_MODE_DEFAULT = M._SCATTER_BUCKETS, M._SCATTER_MODE


class Peer:
    """A peer G1 MSM loaded from a shared library (``--peer``; the C ABI in this module's doc)."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(os.path.abspath(path))
        self.lib.peer_msm_g1.restype = ctypes.c_int
        self.lib.peer_msm_g1.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_int,
                                         ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        self.lib.peer_point_bytes.restype = ctypes.c_size_t
        if self.lib.peer_point_bytes() != 144:
            raise ValueError(f"{path}: peer_point_bytes() = {self.lib.peer_point_bytes()}, expected 144")
        if hasattr(self.lib, "peer_batch_add_g1"):      # optional: bench_gpu_batch.py's
            self.lib.peer_batch_add_g1.restype = ctypes.c_int
            self.lib.peer_batch_add_g1.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t,
                                                   ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]

    def time(self, pts, sc_dev_form, mont, runs):
        """(median ms of runs after one warm-up, affine Montgomery words of the sum)."""
        pts = np.ascontiguousarray(pts)
        sc = np.ascontiguousarray(sc_dev_form)
        ms = np.zeros(runs + 1, dtype=np.float64)
        out = np.zeros(18, dtype=np.uint64)
        rc = self.lib.peer_msm_g1(pts.ctypes.data, pts.shape[0], sc.ctypes.data, int(mont), runs + 1,
                                  ms.ctypes.data, out.ctypes.data)
        if rc != 0:
            raise RuntimeError(f"peer_msm_g1 returned {rc}")
        return statistics.median(ms[1:]), _field.jacobian_to_affine(out[None, :], "g1")[0]

    def batch_add(self, base_pts, n, bits, runs):
        """Σ of the n points (base_pts tiled on the device) whose bit is set in bits (uint64 words, LSB
        first): (median ms of runs after one warm-up, affine Montgomery words of the sum)."""
        base_pts = np.ascontiguousarray(base_pts)
        bits = np.ascontiguousarray(bits)
        ms = np.zeros(runs + 1, dtype=np.float64)
        out = np.zeros(24, dtype=np.uint64)
        rc = self.lib.peer_batch_add_g1(base_pts.ctypes.data, base_pts.shape[0], n, bits.ctypes.data, runs + 1,
                                        ms.ctypes.data, out.ctypes.data)
        if rc != 0:
            raise RuntimeError(f"peer_batch_add_g1 returned {rc}")
        return statistics.median(ms[1:]), _field.g1_xyzz_horner(out[None, :], 1, 1, 0)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="G1 2^20 and G2 2^16, uniform and bits90, 3 runs")
    p.add_argument("--g1", default="20,22,24", help="log2 sizes for G1 (add 26 for the optional row)")
    p.add_argument("--g2", default="20,22", help="log2 sizes for G2 ('' for none)")
    p.add_argument("--kinds", default="uniform,bits90,real_tail", help=f"of {','.join(KINDS)}")
    p.add_argument("--c", default="auto", help="window widths: auto or a list")
    p.add_argument("--segment", default="auto", help="entries per segment S: auto or a list")
    p.add_argument("--balance", default="auto",
                   help=f"level 0's work split, a list of auto (default_balance), {','.join(M.BALANCES)}")
    p.add_argument("--scatter-buckets", default="auto",
                   help="buckets per scatter pass (log2 values), auto or a list: CUZK_MSM_SCATTER_BUCKETS's default")
    p.add_argument("--scatter", default="auto",
                   help="the scatter's bucket positions, auto (CUZK_MSM_SCATTER) or a list of "
                        + ",".join(M.SCATTER_MODES))
    p.add_argument("--k", default="1", help="precomputed copies of the bases, a list")
    p.add_argument("--form", choices=M.SCALAR_FORMS, default="montgomery")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--no-check", action="store_true", help="skip the CPU comparison")
    p.add_argument("--json", default=None)
    p.add_argument("--peer", default=None, help="a peer MSM library to time beside cuzk (G1; see above)")
    args = p.parse_args(argv)
    if args.quick:
        args.g1, args.g2, args.kinds, args.runs = "20", "16", "uniform,bits90", 3
    ok, why = d.probe()
    if not ok:
        print(f"no usable CUDA device: {why}", file=sys.stderr)
        return 2
    dev = d.Device.get(0)
    st = M._state(dev)
    s = st.streams()[0]
    kinds = [x for x in args.kinds.split(",") if x]
    balances = [None if x == "auto" else x for x in args.balance.split(",") if x]
    scat = [None if x is None else 1 << x for x in _opt_ints(args.scatter_buckets)]
    modes = [None if x == "auto" else x for x in args.scatter.split(",") if x]
    combos = list(itertools.product(_opt_ints(args.c), _opt_ints(args.segment), _ints(args.k), balances, scat, modes))
    sizes = [("g1", lg) for lg in _ints(args.g1)] + [("g2", lg) for lg in _ints(args.g2)]
    print(f"{dev.name}; CPU: {os.cpu_count()} cores; scalars {args.form}; runs {args.runs}", flush=True)
    peer = Peer(args.peer) if args.peer else None
    rows, all_ok, base_cache = [], True, {}
    rng = np.random.default_rng(21)
    for group, lg in sizes:
        n = 1 << lg
        pts = bases(group, n, base_cache)
        d_pts = st.pool.alloc(pts.nbytes, s)
        d.copy_htod(d_pts, pts, pts.nbytes, s)
        tables = {}
        for kind in kinds:
            sc = dist_scalars(rng, n, kind)
            dev_form = fr_to_mont(sc) if args.form == "montgomery" else sc
            pin = d.PinnedBuffer(dev_form.nbytes, dev)
            pin.asarray("uint64", dev_form.shape)[:] = dev_form
            d_sc = st.pool.alloc(dev_form.nbytes, s)
            h2d_ms, _ = timed(st, s, lambda: d.copy_htod(d_sc, pin.ptr, dev_form.nbytes, s), args.runs)
            want = None if args.no_check else _msm.msm(pts, sc, group)
            peer_ms = peer_sum = None
            if peer is not None and group == "g1":
                peer_ms, peer_sum = peer.time(pts, dev_form, args.form == "montgomery", args.runs)
                print(f"  {group} 2^{lg} {kind:9s} peer: {peer_ms:.2f} ms", flush=True)
            for c, seg, k, bal, sb, mode in combos:
                try:
                    row = bench_one(st, s, group, n, d_pts, d_sc, sc, kind, c, seg, k, args.form, args.runs,
                                    want, tables, bal, sb, mode)
                except (ValueError, MemoryError) as e:
                    print(f"  {group} 2^{lg} {kind} c={c} S={seg} k={k}: skipped ({e})", flush=True)
                    continue
                row["h2d_ms"] = h2d_ms
                row["peer_ms"] = peer_ms
                if peer_sum is not None:
                    ref = want if want is not None else row.pop("_got")
                    row["peer_same"] = bool(np.array_equal(peer_sum, ref))
                    all_ok &= row["peer_same"]
                row.pop("_got", None)
                all_ok &= row["same"] is not False
                rows.append(row)
                print(f"  {group} 2^{lg} {kind:9s} c={row['c']} S={row['S']} k={k} {bal} sb={row['sb']} "
                      f"{row['scatter']}: gpu {row['gpu_ms']:.2f} ms, host {row['host_ms']:.2f} ms, "
                      f"same={row['same']}", flush=True)
            d_sc.free(s)
            s.synchronize()
            pin.close()
        for tb, _ in tables.values():
            tb.free(s)
        d_pts.free(s)
        s.synchronize()

    print()
    print(f"{'grp':3s} {'n':>5s} {'kind':9s} {'c':>2s} {'S':>4s} {'k':>2s} {'Wk':>2s} {'bal':>6s} {'sb':>3s} "
          f"{'scatter':>7s} {'gpu ms':>8s} {'host ms':>7s} {'h2d ms':>6s} {'pre ms':>7s} {'pre GiB':>7s} "
          f"{'scr GiB':>7s} {'sppark':>6s} same")
    for r in rows:
        pre = f"{r['pre_ms']:7.1f}" if "pre_ms" in r else f"{'-':>7s}"
        sp = f"{r['sppark_ms']:6.1f}" if r["sppark_ms"] else f"{'-':>6s}"
        print(f"{r['group']:3s} 2^{r['lg']:<3d} {r['kind']:9s} {r['c']:2d} {r['S']:4d} {r['k']:2d} {r['Wk']:2d} "
              f"{r['balance']:>6s} {r['sb'].bit_length() - 1:3d} {r['scatter']:>7s} "
              f"{r['gpu_ms']:8.2f} {r['host_ms']:7.2f} {r['h2d_ms']:6.2f} {pre} {r['pre_gib']:7.2f} "
              f"{r['scratch_gib']:7.2f} {sp} {r['same']}"
              + (f" {r['peer_ms']:8.2f} {(r['gpu_ms'] + r['host_ms']) / r['peer_ms']:9.3f} {r.get('peer_same')}"
                 if r.get("peer_ms") else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=dev.name, cores=os.cpu_count(), form=args.form, runs=args.runs, rows=rows), f,
                      indent=1)
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
