#!/usr/bin/env python3
"""CPU Groth16 benchmark: per-stage timings of PoRep-like partitions, and cuzk vs snarkjs.

Part 1 proves PoRep-like circuits (``cuzk._circuit.porep_like``, parameters generated once and
cached like ``cuzk demo``) of 2^14 … 2^18 constraints on the CPU backend and prints the median
per-stage timings of ``--repeat`` proves after one verified warm-up.

Part 2 builds one snarkjs circuit of 2^k constraints at run time (circom2 + snarkjs, in a cache
directory; nothing is committed), then times, on the same zkey and witness,
``snarkjs groth16 prove`` and ``cuzk prove --zkey`` (both as CLI processes, wall clock, median
of ``--repeat``) and cuzk's in-process stages; both proofs are checked with
``snarkjs groth16 verify``. The circuit (``--snarkjs-circuit``):

* ``mulchain``: t[i] = (t[i-1] + 3b + i)·(t[i-1] − x), witness of full field elements;
* ``bits``: 10 % multiplications as above, 90 % bit constraints v·(v − 1) = 0 on bits of the
  chain values, so ~90 % of the witness is 0/1 as in a Filecoin PoRep partition.

Usage (from the repository root, after ``pip install -e .``)::

    python bench/bench_cpu_groth16.py                       # 2^14..2^18 + snarkjs 2^16 mulchain
    python bench/bench_cpu_groth16.py --log-n 14 16 --repeat 3 --snarkjs-log-n 16 \\
        --snarkjs-circuit mulchain bits --json bench/cpu_groth16.json
    python bench/bench_cpu_groth16.py --skip-snarkjs        # part 1 only

Tools for part 2 are found as in tests/data/snarkjs/regen.sh: ``$CUZK_SNARKJS`` /
``$CUZK_CIRCOM2``, ``.ci/node/node_modules/.bin``, ``/tmp/jstools/node_modules/.bin``, PATH
(``npm install snarkjs@0.7.6 circom2@0.2.23``).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
try:                                   # an installed cuzk, else this checkout's in-place build
    import cuzk  # noqa: F401
except ImportError:
    sys.path.insert(0, str(REPO))


def find_tool(env, name):
    cands = [os.environ.get(env), str(REPO / ".ci/node/node_modules/.bin" / name),
             f"/tmp/jstools/node_modules/.bin/{name}", shutil.which(name)]
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def sh(cmd, cwd, timeout=7200):
    """Run a command, raise with its output on failure, return wall seconds."""
    t0 = time.perf_counter()
    res = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True,
                         timeout=timeout)
    dt = time.perf_counter() - t0
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({res.returncode}):\n"
                           f"{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    return dt


# ---------------------------------------------------------------------------------------------
# snarkjs circuit

CIRCOM = """pragma circom 2.0.0;

// cuzk benchmark circuit ({kind}): {n_mul} multiplications, {n_bits} bit constraints.
template Bench(M, B) {{
    signal input a;
    signal input b;
    signal input x;
    signal output out;
    signal t[M];
    signal bits[B];

    t[0] <== a * x;
    for (var i = 1; i < M; i++) {{
        t[i] <== (t[i-1] + 3*b + i) * (t[i-1] - x);
    }}
    for (var j = 0; j < B; j++) {{
        bits[j] <-- (t[j % M] >> (j % 200)) & 1;
        bits[j] * (bits[j] - 1) === 0;
    }}
    out <== t[M-1] * b;
}}

component main {{public [a, b]}} = Bench({n_mul}, {n_bits});
"""


BEACON = "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"


def circuit_sizes(kind, log_n):
    """(multiplications, bit constraints) so that nConstraints + nPublic fills 2^log_n - margin:
    snarkjs's domain is 2^(floor(log2(nConstraints + nPublic)) + 1)."""
    total = (1 << log_n) - 64 - 3          # constraints: M (incl. t[0]) + 1 (out) + B
    if kind == "mulchain":
        return total - 1, 0
    if kind == "bits":
        m = max(2, total // 10)
        return m, total - 1 - m
    raise ValueError(f"unknown snarkjs circuit {kind!r}")


def build_snarkjs_circuit(kind, log_n, work, snarkjs, circom2, log=print):
    """zkey + wtns + vk for the benchmark circuit in ``work/<kind>-<log_n>`` (cached)."""
    d = Path(work) / f"{kind}-{log_n}-v2"
    done = d / "DONE"
    if done.exists():
        return d
    d.mkdir(parents=True, exist_ok=True)
    ptau = Path(work) / f"pot{log_n}-beacon.ptau"
    if not ptau.exists():
        log(f"  snarkjs powersoftau (bls12381, 2^{log_n}) ...")
        tmp = Path(tempfile.mkdtemp(dir=work))
        sh([snarkjs, "powersoftau", "new", "bls12381", log_n, "pot0.ptau"], tmp)
        # `new` starts from τ = 1, whose Lagrange points are 0 but one: a beacon makes τ random
        # (and reproducible), so the zkey's A/B/C points are real points, not infinity
        sh([snarkjs, "powersoftau", "beacon", "pot0.ptau", "pot1.ptau", BEACON, 10,
            "-n=cuzk bench beacon"], tmp)
        sh([snarkjs, "powersoftau", "prepare", "phase2", "pot1.ptau", "pot.ptau"], tmp)
        os.replace(tmp / "pot.ptau", ptau)
        shutil.rmtree(tmp)
    n_mul, n_bits = circuit_sizes(kind, log_n)
    (d / "circuit.circom").write_text(CIRCOM.format(kind=kind, n_mul=n_mul, n_bits=n_bits))
    (d / "input.json").write_text(json.dumps({"a": "3", "b": "11", "x": "5"}))
    log(f"  circom2 + snarkjs groth16 setup ({kind}, {n_mul} mul + {n_bits} bits) ...")
    sh([circom2, "circuit.circom", "--r1cs", "--wasm", "-p", "bls12381", "--O1", "-o", "."], d)
    sh([snarkjs, "groth16", "setup", "circuit.r1cs", ptau, "circuit.zkey"], d)
    sh([snarkjs, "zkey", "export", "verificationkey", "circuit.zkey", "verification_key.json"], d)
    sh([snarkjs, "wtns", "calculate", "circuit_js/circuit.wasm", "input.json", "witness.wtns"], d)
    done.write_text("ok\n")
    return d


def snarkjs_compare(kind, log_n, repeat, threads, work, snarkjs, circom2):
    from cuzk import _snarkjs as sj
    from cuzk._snarkjs_prover import prove_zkey
    d = build_snarkjs_circuit(kind, log_n, work, snarkjs, circom2,
                              log=lambda m: print(m, file=sys.stderr))
    z = sj.read_zkey(d / "circuit.zkey")
    w = sj.read_wtns(d / "witness.wtns")
    ones = int(((w[:, 1:] == 0).all(axis=1) & (w[:, 0] <= 1)).sum())
    import cuzk
    env = dict(os.environ)
    # the CLI subprocess runs in the circuit's directory: let it import the same cuzk
    pkg_root = str(Path(cuzk.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [pkg_root, env.get("PYTHONPATH")]))
    cuzk_cmd = [sys.executable, "-m", "cuzk", "prove", "--zkey", "circuit.zkey", "--wtns",
                "witness.wtns", "--proof", "proof_cuzk.json", "--public", "public_cuzk.json",
                "--backend", "cpu"]
    if threads:
        cuzk_cmd += ["--threads", str(threads)]
    snark_cmd = [snarkjs, "groth16", "prove", "circuit.zkey", "witness.wtns",
                 "proof_snarkjs.json", "public_snarkjs.json"]
    # warm-up (page cache, node JIT), then verify both proofs with snarkjs
    sh(snark_cmd, d)
    subprocess.run(cuzk_cmd, cwd=d, check=True, capture_output=True, env=env)
    for p, q in (("proof_snarkjs.json", "public_snarkjs.json"),
                 ("proof_cuzk.json", "public_cuzk.json")):
        sh([snarkjs, "groth16", "verify", "verification_key.json", q, p], d)
    t_snark, t_cuzk, stages = [], [], []
    for _ in range(repeat):
        t_snark.append(sh(snark_cmd, d))
        t0 = time.perf_counter()
        subprocess.run(cuzk_cmd, cwd=d, check=True, capture_output=True, env=env)
        t_cuzk.append(time.perf_counter() - t0)
        t = {}
        prove_zkey(z, w, threads=threads, backend="cpu", timings=t)
        stages.append({k: v for k, v in t.items() if isinstance(v, float)})
    med = {k: statistics.median(s[k] for s in stages) for k in stages[0]}
    return {"circuit": kind, "log_n": log_n, "domain": z.domain_size, "n_vars": z.n_vars,
            "n_coeffs": len(z.coeffs), "witness_0_or_1": ones,
            "snarkjs_prove_s": statistics.median(t_snark),
            "cuzk_cli_prove_s": statistics.median(t_cuzk),
            "ratio_snarkjs_over_cuzk_cli": statistics.median(t_snark) / statistics.median(t_cuzk),
            "cuzk_inprocess": med, "snarkjs_runs": t_snark, "cuzk_cli_runs": t_cuzk}


# ---------------------------------------------------------------------------------------------

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--log-n", type=int, nargs="+", default=[14, 15, 16, 17, 18])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: all)")
    p.add_argument("--cache-dir", default=None, help="PoRep-like circuit cache (cuzk demo's)")
    p.add_argument("--skip-porep", action="store_true")
    p.add_argument("--backend", nargs="+", default=["cpu"], choices=["cpu", "cuda"],
                   help="part 1 backends, each on the same partitions (cuda: H on the GPU)")
    p.add_argument("--skip-snarkjs", action="store_true")
    p.add_argument("--snarkjs-log-n", type=int, default=16)
    p.add_argument("--snarkjs-circuit", nargs="+", default=["mulchain"],
                   choices=["mulchain", "bits"])
    p.add_argument("--snarkjs-work", default=os.path.join(os.path.expanduser("~"), ".cache",
                                                          "cuzk", "bench-snarkjs"))
    p.add_argument("--json", default=None, help="write all results here")
    args = p.parse_args(argv)

    from cuzk import __version__
    from cuzk._demo import bench_sizes, format_table
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                            capture_output=True, text=True).stdout.strip() or "?"
    doc = {"date": time.strftime("%Y-%m-%d %H:%M:%S %z"), "host": platform.node(),
           "machine": f"{platform.machine()}, {os.cpu_count()} CPUs", "cuzk": __version__,
           "commit": commit, "threads": args.threads, "repeat": args.repeat}
    print(f"# cuzk CPU Groth16 benchmark, {doc['date']}, {doc['machine']}, "
          f"cuzk {__version__} ({commit}), threads {args.threads or os.cpu_count()}")

    if not args.skip_porep:
        for backend in args.backend:
            res = bench_sizes(args.log_n, backend=backend, threads=args.threads, repeat=args.repeat,
                              cache=args.cache_dir)
            doc["porep_like" if backend == "cpu" else f"porep_like_{backend}"] = res
            print(f"\n## PoRep-like partitions, {backend} backend, median of {args.repeat} proves (s)\n")
            print(format_table([{"log_n": r["log_n"], **r["median"]} for r in res]))

    if not args.skip_snarkjs:
        snarkjs, circom2 = find_tool("CUZK_SNARKJS", "snarkjs"), find_tool("CUZK_CIRCOM2", "circom2")
        if not (snarkjs and circom2 and shutil.which("node")):
            print("\n(snarkjs comparison skipped: snarkjs/circom2/node not found)")
        else:
            os.makedirs(args.snarkjs_work, exist_ok=True)
            doc["snarkjs"] = []
            print(f"\n## snarkjs groth16 prove vs cuzk prove --zkey, 2^{args.snarkjs_log_n}, "
                  f"median of {args.repeat} (s, wall clock of the CLI processes)\n")
            print(f"{'circuit':>9s} {'nVars':>8s} {'0/1 wit':>8s} {'snarkjs':>9s} "
                  f"{'cuzk CLI':>9s} {'ratio':>7s} {'cuzk in-process stages'}")
            for kind in args.snarkjs_circuit:
                r = snarkjs_compare(kind, args.snarkjs_log_n, args.repeat, args.threads,
                                    args.snarkjs_work, snarkjs, circom2)
                doc["snarkjs"].append(r)
                st = " ".join(f"{k}={v:.3f}" for k, v in r["cuzk_inprocess"].items())
                print(f"{kind:>9s} {r['n_vars']:8d} {r['witness_0_or_1']:8d} "
                      f"{r['snarkjs_prove_s']:9.3f} {r['cuzk_cli_prove_s']:9.3f} "
                      f"{r['ratio_snarkjs_over_cuzk_cli']:6.1f}x {st}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
