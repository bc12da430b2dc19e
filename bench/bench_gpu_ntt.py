"""Benchmark: GPU NTT family and the H polynomial (cuzk._cuda_ntt) on one device.

    python bench/bench_gpu_ntt.py [--ntt 20,24,27] [--h 24,27] [--deep 0,1] [--runs 7] [--warmup 2] [--log FILE]

Builds nothing (needs cuzk._native._driver/_nvrtc built; _ntt for the CPU check).
1. Checks GPU == CPU bytes at --check-ntt sizes (all four transforms; default 2^12) and
   --check-h sizes (the H stage; default 2^12 and 2^20; 2^27 takes ~1 min of CPU on 16 cores).
2. Times with CUDA events, data resident on the device, median of --runs after
   --warmup: forward / inverse / coset-forward NTT (natural order in and out) at
   each --ntt size, and the whole H polynomial (7 transforms + pointwise) at each
   --h size.  Inputs are random full-width field elements (never zeros), restored
   from pristine copies before every run (outside the timed region).
3. Prints the table last, with two floors per row:
     mem  = bytes that must move (every input read once, every output written once)
            / measured device-to-device copy bandwidth;
     imad = Fr multiplications x IMAD_PER_MUL 32-bit multiply-adds
            / (SMs x 64 IMAD/clk x max SM clock).
   IMAD_PER_MUL = 256 (the issue's figure: 8x8 limb products lo+hi, plus the same
   again for the Montgomery reduction); 64 IMAD/clk/SM is the sm_90 throughput of
   32-bit integer multiply-add.  A transform of 2^k does 2^(k-1)*k multiplications
   (remainder tree, no trivial twiddles); the inverse adds n (the 1/n), H adds 3n.
   H's floor is the issue's: bellperson's algorithm, 7 transforms + 3n products.
   cuzk's H does 6 transforms + 5n (cuzk._cuda_ntt.h_consts), 0.88x of that work, and
   its plain transforms skip the 7n/8 products of their top three levels (twiddle 1).
"""

import argparse
import json
import statistics
import subprocess
import sys
import time

import numpy as np

from cuzk import _cuda_ntt as G
from cuzk._native import _driver as d

IMAD_PER_MUL = 256
SPPARK = {("fwd", 20): 0.27, ("fwd", 24): 4.4, ("fwd", 27): 47.0, ("H", 27): 320.0}


def rand_fr(rng, n):
    v = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
    v[:, 3] &= np.uint64((1 << 63) - 1)
    over = v[:, 3] >= np.uint64(G.R_MODULUS >> 192)
    v[over, 3] -= np.uint64(G.R_MODULUS >> 192)
    return v


def max_sm_clock_hz():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.max.sm,clocks.sm", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20).stdout.split("\n")[0]
        mx, cur = (float(x) for x in out.split(","))
        return mx * 1e6, cur * 1e6
    except Exception:
        return 1.98e9, float("nan")


class Bench:
    def __init__(self, args):
        self.args = args
        self.dev = d.Device.get(0)
        t = time.time()
        self.st = G._state(self.dev)
        self.load_s = time.time() - t
        self.s = d.Stream(self.dev)
        self.pool = self.st.pool
        self.rows = []
        self.rng = np.random.default_rng(2026)
        self.clock, self.clock_now = max_sm_clock_hz()
        self.imad_rate = self.dev.sm_count * 64 * self.clock

    def log(self, msg):
        print(msg, flush=True)
        if self.args.log:
            with open(self.args.log, "a") as f:
                f.write(msg + "\n")

    def time_ms(self, prepare, body):
        e0, e1 = d.Event(self.dev), d.Event(self.dev)
        times = []
        for i in range(self.args.warmup + self.args.runs):
            prepare()
            e0.record(self.s)
            body()
            e1.record(self.s)
            e1.synchronize()
            if i >= self.args.warmup:
                times.append(d.Event.elapsed_ms(e0, e1))
        return statistics.median(times), min(times), times

    def random_device(self, n, block_lg=22):
        """A device buffer of n random elements (a random 2^22 block tiled)."""
        buf = self.pool.alloc(n * 32, self.s)
        blk = min(n, 1 << block_lg)
        host = rand_fr(self.rng, blk)
        d.copy_htod(buf, host, blk * 32, self.s)
        for off in range(blk, n, blk):
            d.copy_dtod(buf.ptr + off * 32, buf.ptr, blk * 32, self.s)
        return buf

    # ---- checks --------------------------------------------------------------------
    def check(self):
        try:
            from cuzk._native import _ntt as cpu
        except ImportError:
            self.log("check: CPU reference not built; skipped")
            return True
        ok = True
        for lg in self.args.check_ntt:
            x = rand_fr(self.rng, 1 << lg)
            for inv, cos in ((False, False), (True, False), (False, True), (True, True)):
                ref = x.copy()
                cpu.ntt_mont(ref, inv, cos, 0)
                same = np.array_equal(G.ntt(x, inverse=inv, coset=cos, stream=self.s), ref)
                ok &= same
                self.log(f"check ntt 2^{lg} inverse={inv} coset={cos}: {'OK' if same else 'MISMATCH'}")
        for lg in self.args.check_h:
            abc = [rand_fr(self.rng, 1 << lg) for _ in range(3)]
            ref = [v.copy() for v in abc]
            cpu.h_stage(*ref, threads=0)
            for deep in sorted(set(self.args.deep)):
                same = np.array_equal(G.h_stage(*abc, stream=self.s, deep=bool(deep)), ref[0])
                ok &= same
                self.log(f"check H 2^{lg}{' (deep tables)' if deep else ''}: {'OK' if same else 'MISMATCH'}")
        return ok

    # ---- ceilings ------------------------------------------------------------------
    def copy_bandwidth(self):
        n = 1 << 27
        a = self.pool.alloc(n * 32, self.s)
        b = self.pool.alloc(n * 32, self.s)
        d.memset_d32(a, 0x12345678, n * 8, self.s)
        med, _, _ = self.time_ms(lambda: None, lambda: d.copy_dtod(b, a, n * 32, self.s))
        a.free(self.s)
        b.free(self.s)
        bw = 2 * n * 32 / (med * 1e-3)
        self.log(f"device-to-device copy 4 GiB: {med:.3f} ms = {bw / 1e12:.2f} TB/s (read + write)")
        return bw

    # ---- timings -------------------------------------------------------------------
    def add_row(self, op, lg, med, mn, mults, nbytes):
        fl_mem = nbytes / self.bw * 1e3
        fl_imad = mults * IMAD_PER_MUL / self.imad_rate * 1e3
        floor = max(fl_mem, fl_imad)
        sp = SPPARK.get((op, lg))
        self.rows.append(dict(op=op, lg=lg, median_ms=med, min_ms=mn, floor_mem_ms=fl_mem,
                              floor_imad_ms=fl_imad, vs_floor=med / floor,
                              sppark_ms=sp, vs_sppark=(med / sp if sp else None)))
        self.log(f"{op:5s} 2^{lg}: median {med:.3f} ms (min {mn:.3f}); floors mem {fl_mem:.3f} / "
                 f"imad {fl_imad:.3f} ms -> {med / floor:.2f}x" + (f"; sppark {sp} ms" if sp else ""))

    def bench_ntt(self, lg):
        n = 1 << lg
        src = self.random_device(n)
        x = self.pool.alloc(n * 32, self.s)
        y = self.pool.alloc(n * 32, self.s)
        for op, inv, cos in (("fwd", False, False), ("inv", True, False), ("cfwd", False, True)):
            def prep():
                d.copy_dtod(x, src, n * 32, self.s)

            def body():
                G.ntt_device(x, y, n, inverse=inv, coset=cos, stream=self.s)
            med, mn, _ = self.time_ms(prep, body)
            mults = n // 2 * lg + (n if inv else 0)
            self.add_row(op, lg, med, mn, mults, 2 * n * 32)
        for b in (src, x, y):
            b.free(self.s)

    def bench_h(self, lg, deep=False):
        n = 1 << lg
        src = [self.random_device(n) for _ in range(3)]
        work = [self.pool.alloc(n * 32, self.s) for _ in range(4)]

        def prep():
            for w, s0 in zip(work, src):
                d.copy_dtod(w, s0, n * 32, self.s)

        def body():
            G.h_stage_inplace(work[0], work[1], work[2], work[3], n, stream=self.s, deep=deep)
        med, mn, _ = self.time_ms(prep, body)
        self.add_row("Hdeep" if deep else "H", lg, med, mn, 7 * (n // 2 * lg) + 3 * n, 4 * n * 32)
        for b in src + work:
            b.free(self.s)

    def run(self):
        dev = self.dev
        self.log(f"device: {dev.name} ({dev.arch}, {dev.sm_count} SMs), max SM clock {self.clock / 1e6:.0f} MHz "
                 f"(now {self.clock_now / 1e6:.0f} MHz); IMAD floor rate {self.imad_rate / 1e12:.2f} T/s")
        self.log(f"module load (NVRTC compile or disk cache): {self.load_s:.1f} s")
        ok = self.check()
        self.bw = self.copy_bandwidth()
        for lg in self.args.ntt:
            self.bench_ntt(lg)
        for lg in self.args.h:
            for deep in self.args.deep:
                self.bench_h(lg, bool(deep))
        self.log("")
        self.log(f"{'op':5s} {'size':>5s} {'median ms':>10s} {'floor mem':>10s} {'floor imad':>10s} "
                 f"{'x floor':>8s} {'sppark ms':>10s} {'x sppark':>8s}")
        for r in self.rows:
            sp = f"{r['sppark_ms']:10.2f}" if r["sppark_ms"] else f"{'-':>10s}"
            vs = f"{r['vs_sppark']:8.2f}" if r["vs_sppark"] else f"{'-':>8s}"
            self.log(f"{r['op']:5s} {'2^' + str(r['lg']):>5s} {r['median_ms']:10.3f} {r['floor_mem_ms']:10.3f} "
                     f"{r['floor_imad_ms']:10.3f} {r['vs_floor']:8.2f} {sp} {vs}")
        self.log(f"checks: {'all OK' if ok else 'MISMATCH'}")
        if self.args.json:
            with open(self.args.json, "w") as f:
                json.dump(dict(device=dev.name, clock_hz=self.clock, copy_bw=self.bw, rows=self.rows,
                               checks_ok=bool(ok)), f, indent=1)
        return 0 if ok else 1


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    p.add_argument("--ntt", type=ints, default=[20, 24, 27])
    p.add_argument("--h", type=ints, default=[24, 27])
    p.add_argument("--check-ntt", type=ints, default=[12], help="sizes of the NTT checks against the CPU")
    p.add_argument("--check-h", type=ints, default=[12, 20], help="sizes of the H check against the CPU")
    p.add_argument("--deep", type=ints, default=[0],
                   help="H on full (0) and/or deep (1) twiddle tables, in this order per size (e.g. 0,1,0,1)")
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--log", default=None)
    p.add_argument("--json", default=None)
    p.add_argument("--profile", type=int, default=0,
                   help="only run this many forward NTTs at 2^max(--ntt) (for ncu) and exit")
    args = p.parse_args(argv)
    ok, why = d.probe()
    if not ok:
        print(f"no usable CUDA device: {why}", file=sys.stderr)
        return 2
    if args.profile:
        return profile(args)
    return Bench(args).run()


def profile(args):
    """Forward transforms back to back, nothing else (under ncu: -k regex:cuzk_ntt_pass)."""
    st = G._state(None)
    s = st.streams()[0]
    n = 1 << max(args.ntt)
    x, y = st.pool.alloc(n * 32, s), st.pool.alloc(n * 32, s)
    d.copy_htod(x, rand_fr(np.random.default_rng(1), min(n, 1 << 22)), min(n, 1 << 22) * 32, s)
    for _ in range(args.profile):
        G.ntt_device(x, y, n, stream=s)
    s.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
