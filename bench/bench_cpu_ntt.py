"""CPU NTT and H-stage benchmarks, against arkworks (and snarkjs's ffjavascript) in one run.

Peers, on the same inputs and the same cores, timed in the same process run:

* arkworks: ``ark-algebra-py`` (PyPI) wraps arkworks' ``ark-poly`` 0.4 radix-2 domain, built
  with rayon (all cores; ``RAYON_NUM_THREADS`` limits it).  It has no in-place NTT on raw
  limbs, only ``Domain.interpolate`` (iFFT, list of scalars in, polynomial out) and
  ``Polynomial.evaluate_over_domain`` (FFT, list out).  Its time is measured with the cost of
  moving the Python list across the binding (``Polynomial(list)`` in, ``coefficients()`` out,
  timed separately in the same run) subtracted; the raw time is printed as well.  Same
  ω convention as cuzk (generator 7), so the outputs are compared value for value.
  H peer: interpolate a, b, c, A·B − C (arkworks' FFT polynomial product), divide by X^n − 1.
* ffjavascript: snarkjs's own field/FFT engine (WebAssembly, worker threads), in a node child
  process on the same input bytes (both use Montgomery form with R = 2^256); its roots come
  from 5, not 7, so only X[0] = Σ x[j] is compared.  Found through ``CUZK_FFJAVASCRIPT``
  (a node_modules folder), ./node_modules, .ci/node/node_modules or /tmp/ffjs/node_modules.

py-arkworks-bls12381 (the issue's first choice) exposes no FFT, hence the peers above.

Run:
    python bench/bench_cpu_ntt.py [--ntt 12-22] [--h 16-20] [--threads 0] [--reps 5]
    pytest bench/bench_cpu_ntt.py            (pytest-benchmark; arkworks in the same groups,
                                              ffjavascript only in the table: it times itself)
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from cuzk._constants import FR_MODULUS as R, FR_MONT_R as MONT, FR_MONT_R_INV as MONT_INV

# wall clock by default; "cpu" = CPU seconds of the whole process (all its threads), which
# stays meaningful on a machine shared with other work, for comparisons on one thread
clock = time.perf_counter


def _limit_peer_threads(threads):
    if threads:
        os.environ.setdefault("RAYON_NUM_THREADS", str(threads))


def random_mont(rng, n):
    """n random Fr elements, Montgomery limbs (uint64 (n, 4)); any value < r is valid."""
    a = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
    a[:, 3] %= np.uint64(R >> 192)
    return a


def mont_to_ints(a):
    raw = a.tobytes()
    return [int.from_bytes(raw[32 * i:32 * i + 32], "little") * MONT_INV % R
            for i in range(a.shape[0])]


# ---- peers ------------------------------------------------------------------------------------
class Arkworks:
    """arkworks through ark-algebra-py; None when it is not installed."""
    name = "arkworks"

    def __init__(self):
        import ark_algebra_py as ark
        self.ark = ark
        self.version = _dist_version("ark-algebra-py")

    def scalars(self, ints):
        S = self.ark.Scalar
        return [S.from_le_bytes(v.to_bytes(32, "little")) for v in ints]

    def to_ints(self, scalars):
        return [int.from_bytes(bytes(s.to_le_bytes()), "little") for s in scalars]

    def domain(self, n):
        return self.ark.Domain(n)

    def time_intt(self, dom, vals):
        """(corrected, raw) seconds of one iFFT and the resulting coefficient list."""
        t0 = clock()
        poly = dom.interpolate(vals)
        t1 = clock()
        self.ark.Polynomial(vals)  # the list -> Vec conversion alone
        t2 = clock()
        return (t1 - t0) - (t2 - t1), t1 - t0, poly

    def time_ntt(self, dom, poly):
        t0 = clock()
        evals = poly.evaluate_over_domain(dom)
        t1 = clock()
        poly.coefficients()  # the Vec -> list conversion alone
        t2 = clock()
        return (t1 - t0) - (t2 - t1), t1 - t0, evals

    def time_h(self, dom, a, b, c):
        t0 = clock()
        A, B, C = dom.interpolate(a), dom.interpolate(b), dom.interpolate(c)
        q, r = ((A * B) - C).divide_by_vanishing_poly(dom)
        t1 = clock()
        for v in (a, b, c):
            self.ark.Polynomial(v)
        t2 = clock()
        return (t1 - t0) - (t2 - t1), t1 - t0, q, r


_FFJS_DRIVER = r"""
const { buildBls12381 } = require("ffjavascript");
const fs = require("fs");
(async () => {
  const [inFile, lg, reps, single, cpu] = process.argv.slice(2);
  const useCpu = cpu === "1";
  const curve = await buildBls12381(single === "1");
  const buf = new Uint8Array(fs.readFileSync(inFile));
  const times = [];
  let out;
  for (let r = 0; r < Number(reps); r++) {
    const t0 = process.hrtime.bigint(), c0 = process.cpuUsage();
    out = await curve.Fr.fft(buf);
    const c1 = process.cpuUsage(c0);
    times.push(useCpu ? (c1.user + c1.system) / 1e6 : Number(process.hrtime.bigint() - t0) / 1e9);
  }
  const first = Buffer.from(out.slice(0, 32)).toString("hex");
  process.stdout.write(JSON.stringify({ times, first, threads: curve.tm.concurrency }));
  await curve.terminate();
})();
"""


class FfJavascript:
    """ffjavascript (snarkjs's engine) in a node child process."""
    name = "ffjavascript"

    def __init__(self, threads):
        node = shutil.which("node")
        if not node:
            raise RuntimeError("node not found")
        here = os.path.dirname(os.path.abspath(__file__))
        cands = [os.environ.get("CUZK_FFJAVASCRIPT", ""), "node_modules",
                 os.path.join(here, "..", "node_modules"),
                 os.path.join(here, "..", ".ci", "node", "node_modules"), "/tmp/ffjs/node_modules"]
        mods = next((os.path.abspath(c) for c in cands
                     if c and os.path.isdir(os.path.join(c, "ffjavascript"))), None)
        if mods is None:
            raise RuntimeError("ffjavascript not found (npm install ffjavascript)")
        self.node, self.mods, self.single = node, mods, threads == 1
        with open(os.path.join(mods, "ffjavascript", "package.json")) as f:
            self.version = json.load(f)["version"]
        self.tmp = tempfile.mkdtemp(prefix="cuzk-ffjs-")
        self.driver = os.path.join(self.tmp, "driver.cjs")
        with open(self.driver, "w") as f:
            f.write(_FFJS_DRIVER)

    def time_ntt(self, a, reps):
        """Times of `reps` forward FFTs of the Montgomery array a (bytes shared with cuzk)."""
        path = os.path.join(self.tmp, "in.bin")
        a.tofile(path)
        env = dict(os.environ, NODE_PATH=self.mods)
        out = subprocess.run([self.node, self.driver, path, "0", str(reps), "1" if self.single else "0",
                              "1" if clock is time.process_time else "0"],
                             env=env, check=True, capture_output=True, text=True, timeout=3600)
        res = json.loads(out.stdout)
        return res["times"], bytes.fromhex(res["first"]), res["threads"]


def _dist_version(name):
    try:
        from importlib.metadata import version
        return version(name)
    except Exception:
        return "?"


def _peers(threads, want=("arkworks", "ffjavascript")):
    peers = {}
    if "arkworks" in want:
        try:
            peers["arkworks"] = Arkworks()
        except ImportError:
            pass
    if "ffjavascript" in want:
        try:
            peers["ffjavascript"] = FfJavascript(threads)
        except (RuntimeError, OSError):
            pass
    return peers


# ---- plain-script mode ----------------------------------------------------------------------------
def _machine():
    model = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",)
    return f"{model}, {os.cpu_count()} logical CPUs, load average {load[0]:.2f}"


def _range(s):
    if not s:
        return []
    lo, _, hi = s.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def run_table(ntt_sizes, h_sizes, threads, reps, peer_max, ffjs_max, use_peers):
    from cuzk._native._ntt import h_stage, ntt_mont

    peers = _peers(threads) if use_peers else {}
    ark, ffjs = peers.get("arkworks"), peers.get("ffjavascript")
    rng = np.random.default_rng(2026)
    print(f"# cuzk CPU NTT benchmark — {datetime.datetime.now().isoformat(timespec='seconds')}")
    print(f"machine: {_machine()}")
    print(f"command: {' '.join([os.path.basename(sys.executable)] + sys.argv)}")
    print(f"cuzk threads: {threads or os.cpu_count()} (threads={threads}); best of {reps}; "
          f"clock: {'process CPU time (all threads)' if clock is time.process_time else 'wall'}")
    print("peers: " + (", ".join(f"{k} {v.version}" for k, v in peers.items()) or "none"))
    if ark:
        print(f"  arkworks threads: RAYON_NUM_THREADS={os.environ.get('RAYON_NUM_THREADS', 'all')}; "
              "times exclude the Python-list conversion (raw in brackets)")
    print()
    print("| op | n | cuzk ms | arkworks ms [raw] | cuzk/ark | ffjavascript ms | cuzk/ffjs | check |")
    print("|---|---|---|---|---|---|---|---|")

    def fmt(v):
        return f"{v * 1e3:.2f}" if v is not None else "–"

    def ratio(x, y):
        return f"{x / y:.2f}" if (x is not None and y) else "–"

    for lg in ntt_sizes:
        n = 1 << lg
        a = random_mont(rng, n)
        for inverse in (False, True):
            t_cuzk = []
            b = a.copy()
            for _ in range(reps):
                c = a.copy()
                t0 = clock()
                ntt_mont(c, inverse=inverse, threads=threads)
                t_cuzk.append(clock() - t0)
            ntt_mont(b, inverse=inverse, threads=threads)
            t_ark = t_ark_raw = t_js = None
            check = []
            if ark and lg <= peer_max:
                dom = ark.domain(n)
                if inverse:
                    vals = ark.scalars(mont_to_ints(a))
                    res = [ark.time_intt(dom, vals) for _ in range(reps)]
                    got = ark.to_ints(res[-1][2].coefficients())
                else:
                    poly = ark.ark.Polynomial(ark.scalars(mont_to_ints(a)))
                    res = [ark.time_ntt(dom, poly) for _ in range(reps)]
                    got = ark.to_ints(res[-1][2])
                t_ark, t_ark_raw = min(r[0] for r in res), min(r[1] for r in res)
                got += [0] * (n - len(got))
                check.append("ark=" + ("ok" if got == mont_to_ints(b) else "MISMATCH"))
            if ffjs and not inverse and lg <= ffjs_max:
                times, first, _ = ffjs.time_ntt(a, reps)
                t_js = min(times)
                ours = int.from_bytes(b[0].tobytes(), "little")
                check.append("ffjs X0=" + ("ok" if int.from_bytes(first, "little") == ours else "MISMATCH"))
            tc = min(t_cuzk)
            name = "iNTT" if inverse else "NTT"
            raw = f" [{t_ark_raw * 1e3:.2f}]" if t_ark_raw is not None else ""
            print(f"| {name} | 2^{lg} | {fmt(tc)} | {fmt(t_ark)}{raw} | {ratio(tc, t_ark)} | {fmt(t_js)} | "
                  f"{ratio(tc, t_js)} | {' '.join(check) or '–'} |", flush=True)

    for lg in h_sizes:
        n = 1 << lg
        a, b = random_mont(rng, n), random_mont(rng, n)
        a_i, b_i = mont_to_ints(a), mont_to_ints(b)
        c_i = [u * v % R for u, v in zip(a_i, b_i)]
        c = np.frombuffer(b"".join((v * MONT % R).to_bytes(32, "little") for v in c_i),
                          dtype=np.uint64).reshape(n, 4).copy()
        t_cuzk = []
        for _ in range(reps):
            x, y, z = a.copy(), b.copy(), c.copy()
            t0 = clock()
            h_stage(x, y, z, threads=threads)
            t_cuzk.append(clock() - t0)
        t_ark = t_ark_raw = None
        check = []
        if ark and lg <= peer_max:
            dom = ark.domain(n)
            sa, sb, sc = ark.scalars(a_i), ark.scalars(b_i), ark.scalars(c_i)
            res = [ark.time_h(dom, sa, sb, sc) for _ in range(max(1, reps // 2))]
            t_ark, t_ark_raw = min(r[0] for r in res), min(r[1] for r in res)
            q = ark.to_ints(res[-1][2].coefficients())
            q += [0] * (n - len(q))
            ok = q == mont_to_ints(x) and not res[-1][3].coefficients()
            check.append("ark h=" + ("ok" if ok else "MISMATCH"))
        tc = min(t_cuzk)
        raw = f" [{t_ark_raw * 1e3:.2f}]" if t_ark_raw is not None else ""
        print(f"| H | 2^{lg} | {fmt(tc)} | {fmt(t_ark)}{raw} | {ratio(tc, t_ark)} | – | – | "
              f"{' '.join(check) or '–'} |", flush=True)
    print()
    print("H: cuzk = 3 iNTT + 3 coset NTT + pointwise + coset iNTT (bellperson); arkworks = "
          "3 interpolations, A·B − C by its FFT product (size 2n), division by X^n − 1.")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ntt", default="12-22", help="log2 sizes for the NTT, e.g. 12-22")
    p.add_argument("--h", default="16-20", help="log2 sizes for the H stage, e.g. 16-20")
    p.add_argument("--threads", type=int, default=0, help="cuzk threads (0 = all); also limits peers")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--peer-max", type=int, default=22, help="largest log2 size run on arkworks")
    p.add_argument("--ffjs-max", type=int, default=20, help="largest log2 size run on ffjavascript")
    p.add_argument("--no-peers", action="store_true")
    p.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                   help="wall time, or CPU time of the process (for a busy machine, with --threads 1)")
    args = p.parse_args(argv)
    global clock
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    _limit_peer_threads(args.threads)
    run_table(_range(args.ntt), _range(args.h), args.threads, args.reps, args.peer_max,
              args.ffjs_max, not args.no_peers)


# ---- pytest-benchmark mode ------------------------------------------------------------------------
try:
    import pytest
except ImportError:  # plain-script mode needs no pytest
    pytest = None

if pytest is not None:
    NTT_SIZES = [12, 14, 16, 18, 20, 22]
    H_SIZES = [16, 18, 20]

    @pytest.fixture(scope="module")
    def data():
        rng = np.random.default_rng(7)
        return {lg: random_mont(rng, 1 << lg) for lg in sorted(set(NTT_SIZES + H_SIZES))}

    @pytest.mark.parametrize("lg", NTT_SIZES)
    @pytest.mark.parametrize("variant", ["ntt", "intt", "coset_ntt"])
    def test_cuzk_ntt(benchmark, data, lg, variant):
        from cuzk._native._ntt import ntt_mont
        benchmark.group = f"{variant} 2^{lg}"
        a = data[lg].copy()  # repeated in-place transforms keep the values valid (< r)
        benchmark.pedantic(ntt_mont, args=(a,), kwargs=dict(inverse=variant == "intt",
                                                            coset=variant == "coset_ntt"),
                           rounds=3 if lg >= 20 else 10, warmup_rounds=1)

    @pytest.mark.parametrize("lg", NTT_SIZES[:5])
    def test_arkworks_intt(benchmark, data, lg):
        ark = pytest.importorskip("ark_algebra_py")
        peer = Arkworks()
        benchmark.group = f"intt 2^{lg}"
        vals = peer.scalars(mont_to_ints(data[lg]))
        dom = ark.Domain(1 << lg)
        conv = min(_time(lambda: ark.Polynomial(vals)) for _ in range(3))
        benchmark.extra_info["list_conversion_s"] = conv
        benchmark.pedantic(dom.interpolate, args=(vals,), rounds=3 if lg >= 20 else 10,
                           warmup_rounds=1)

    @pytest.mark.parametrize("lg", H_SIZES)
    def test_cuzk_h_stage(benchmark, data, lg):
        from cuzk._native._ntt import h_stage
        benchmark.group = f"h 2^{lg}"
        a, b, c = data[lg].copy(), data[lg][::-1].copy(), data[lg].copy()
        benchmark.pedantic(h_stage, args=(a, b, c), rounds=3, warmup_rounds=1)


def _time(fn):
    t0 = clock()
    fn()
    return clock() - t0


if __name__ == "__main__":
    main()
