"""Benchmark: the CPU's Fr product, mulx/adx against portable, same binary, same run.

    python bench/bench_fr_product.py [--reps 5] [--log-h 18] [--json FILE]

The extension takes the mulx/adx product (cuzk/_native/include/cuzk/ff.hpp ``mont_mul4_mulx``)
when the CPU has BMI2 and ADX, and the portable one (``mul_inline``) under CUZK_FF_PORTABLE=1.
Each measurement runs in a child process per path, the two alternating ``--reps`` times; the
minimum is reported with the ratio.  Rows: ``_field.mul`` on 2^14 elements (in cache) and 2^22
(from memory), one thread; the row check (``_r1cs.first_unsatisfied``: one product and a compare
per row) at 2^22, one thread; the CPU H stage at 2^log_h on every core.
"""

import argparse
import json
import os
import subprocess
import sys

_CHILD = r"""
import sys, time, numpy as np
from cuzk._native import _field, _r1cs, _ntt
rng = np.random.default_rng(5)
def rand(n):
    v = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
    v[:, 3] &= np.uint64((1 << 60) - 1)
    return v
def best(fn, reps):
    b = 1e9
    for _ in range(reps):
        t = time.perf_counter(); fn(); b = min(b, time.perf_counter() - t)
    return b
log_h = int(sys.argv[1])
out = {}
a, b = rand(1 << 14), rand(1 << 14)
out["mul 2^14 (ns/element)"] = best(lambda: _field.mul(a, b, "fr", threads=1), 200) / (1 << 14) * 1e9
A, B = rand(1 << 22), rand(1 << 22)
C = _field.mul(A, B, "fr", threads=1)
out["mul 2^22 (ns/element)"] = best(lambda: _field.mul(A, B, "fr", threads=1), 5) / (1 << 22) * 1e9
out["row check 2^22 (ns/row)"] = best(lambda: _r1cs.first_unsatisfied(A, B, C, 1), 5) / (1 << 22) * 1e9
n = 1 << log_h
h = [rand(n) for _ in range(3)]
out[f"H 2^{log_h}, all cores (ms)"] = best(lambda: _ntt._h_stage_impl(*(x.copy() for x in h), threads=0), 3) * 1e3
print(repr(out))
"""


def child(portable, log_h):
    env = dict(os.environ)
    if portable:
        env["CUZK_FF_PORTABLE"] = "1"
    else:
        env.pop("CUZK_FF_PORTABLE", None)
    r = subprocess.run([sys.executable, "-c", _CHILD, str(log_h)], env=env, check=True, capture_output=True,
                       text=True, timeout=600)
    import ast
    return ast.literal_eval(r.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--log-h", type=int, default=18)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    res = {"mulx": [], "portable": []}
    for _ in range(args.reps):
        for path in ("portable", "mulx"):
            res[path].append(child(path == "portable", args.log_h))
    rows = {k: (min(r[k] for r in res["portable"]), min(r[k] for r in res["mulx"])) for k in res["mulx"][0]}
    print(f"CPU: {os.cpu_count()} cores; minimum of {args.reps} child runs per path")
    print(f"{'measure':34s} {'portable':>10s} {'mulx':>10s} {'mulx/portable':>14s}")
    for k, (po, mx) in rows.items():
        print(f"{k:34s} {po:10.2f} {mx:10.2f} {mx / po:14.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cores": os.cpu_count(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
