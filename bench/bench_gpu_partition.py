"""One PoRep-shaped partition end to end on a backend: keygen, resident key, per-stage table.

    python bench/bench_gpu_partition.py --log-n 20 24 [--backend cuda] [--repeat 3] [--check-cpu]
                                        [--json out.json] [--config "precompute=2,h_window=20" --config ""]
                                        [--where host] [--budget-gib 32]

For each size: porep_like(log_n) (≈90 % bit aux values), keygen (on the GPU when the backend is
cuda), the key made resident (``Stages.load_key``: upload time and bytes), one verified warm-up
proof, then ``--repeat`` proofs through prepare / run / synchronize / finish.  Reported (medians):
host stages (validate, prep_msm, upload issue, epilogue, verify), device steps from CUDA events
(``gpu:h_ntt``, ``gpu:h``, ``gpu:l:ones`` …, ``gpu:region``), the region's host wall time, and the
wall time of the whole ``cuzk.prove``-equivalent.  ``--where host`` keeps the key in host memory
(streamed per partition in chunks: ``StreamedKey``; ``stream_chunk=B`` in a config sets the chunk);
``--budget-gib`` reserves from a device budget of that size instead of the card's (a smaller card's
arithmetic on this one: what must fit, fits in that many bytes).  ``--check-cpu`` also proves on the CPU backend
with the same (r, s) and asserts identical bytes (small sizes).  Prints a table last.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time


def _one(st, key, asg, ctx, r, s, verify):
    t0 = time.perf_counter()
    part = st.prepare(key, asg, ctx, r, s)
    t1 = time.perf_counter()
    done = st.run(part)
    t2 = time.perf_counter()
    done.synchronize()
    t3 = time.perf_counter()
    proof = st.finish(part, verify=verify)
    t4 = time.perf_counter()
    t = dict(part.timings)
    t.update({"host:prepare": t1 - t0, "host:enqueue": t2 - t1, "host:region": t3 - t1,
              "host:finish": t4 - t3, "wall": t4 - t0, "uploaded_GB": part.bytes_uploaded / 1e9})
    return proof, t


_KEY_ITEMS = {"where": str, "budget_gib": float}     # --config items that are not stage options


def _parse_config(text):
    """``--config`` text -> stage options (cuzk._stages.parse_stage_options; '' -> defaults), with
    ``where=`` and ``budget_gib=`` (``_KEY_ITEMS``) set apart under the key "_key"."""
    from cuzk._stages import parse_stage_options
    items, key = [], {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        k, _, v = item.partition("=")
        if k.strip() in _KEY_ITEMS:
            key[k.strip()] = _KEY_ITEMS[k.strip()](v.strip())
        else:
            items.append(item)
    try:
        out = parse_stage_options(",".join(items))
    except ValueError as e:
        raise SystemExit(f"--config: {e}") from None
    if key:
        out["_key"] = key
    return out


def _profiled(fn, *args, top=30):
    """fn(*args) under cProfile; prints the ``top`` functions by cumulative time."""
    import cProfile
    import pstats
    pr = cProfile.Profile()
    try:
        return pr.runcall(fn, *args)
    finally:
        pstats.Stats(pr).sort_stats("cumulative").print_stats(top)


def run(log_n, backend, repeat, check_cpu, seed=1, configs=(None,), where="auto", budget_gib=None,
        profile=False):
    """Rows for one size: the circuit and key made once, then each configuration (stage options)
    on a freshly loaded resident key."""
    import cuzk
    from cuzk._stages import stages_for
    t0 = time.perf_counter()
    r1cs, inputs, aux = cuzk.porep_like(log_n, seed)
    asg = r1cs.assignment(inputs, aux)
    circuit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    pk = cuzk.keygen_random(r1cs, seed=seed, backend=backend)
    keygen_s = time.perf_counter() - t0
    del r1cs
    rows = []
    for options in configs:
        row = {"log_n": log_n, "backend": backend, "circuit_s": circuit_s, "keygen_s": keygen_s}
        options = dict(options or {})
        kw = options.pop("_key", {})
        where_c, budget_c = kw.get("where", where), kw.get("budget_gib", budget_gib)
        st = stages_for(backend, **options)
        row["options"] = dict(options, **kw)
        budget = None
        if budget_c is not None:
            from cuzk._budget import Budget
            budget = Budget(int(budget_c * (1 << 30)), f"{budget_c} GiB budget")
        ctx = st.context(budget=budget)
        t0 = time.perf_counter()
        key = st.load_key(pk, budget=budget, where=where_c) if backend != "cpu" else st.load_key(pk)
        row["load_key_s"] = time.perf_counter() - t0
        row["key_bytes"] = key.nbytes
        row["where"] = getattr(key, "where", "host")
        row["h_buffers"] = getattr(key, "h_buffers", None)      # the H stage's buffers (h_buffers)
        row["slot_bytes"] = getattr(key, "slot_bytes", None)    # a streamed key's slots
        row["device"] = st.device_label
        try:
            proof, _ = _one(st, key, asg, ctx, 11, 22, True)          # warm-up, verified
            row["verified"] = True
            row["proof_sha256"] = hashlib.sha256(proof).hexdigest()[:16]   # same bytes across configs
            if check_cpu:
                row["cpu_equal"] = proof == cuzk.prove(pk, asg, 11, 22, backend="cpu")
                if not row["cpu_equal"]:
                    raise SystemExit(f"2^{log_n}: {backend} proof differs from the CPU backend's")
            runs = []
            for i in range(repeat):
                args = (st, key, asg, ctx, 100 + i, 200 + i, True)
                runs.append((_profiled(_one, *args) if profile and i == 0 else _one(*args))[1])
            if budget is not None:
                row["budget_peak_gib"] = budget.peak / (1 << 30)
        finally:
            key.release()
            ctx.close()
            st.trim()
        keys = sorted({k for t in runs for k in t if isinstance(t[k], float)})
        row["median"] = {k: statistics.median(t[k] for t in runs if k in t) for k in keys}
        rows.append(row)
    return rows


def _label(row):
    o = row["options"]
    return f"2^{row['log_n']}" + ("" if not o else " " + ",".join(f"{k}={v}" for k, v in o.items()))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log-n", type=int, nargs="+", default=[16, 20])
    ap.add_argument("--backend", default="cuda", choices=["cpu", "cuda", "auto"])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--check-cpu", action="store_true", help="assert bytes equal to the CPU backend")
    ap.add_argument("--json", default=None)
    ap.add_argument("--precompute", type=int, default=None, help="CUDA: copies of the H bases")
    ap.add_argument("--h-window", type=int, default=None, help="CUDA: H MSM window width")
    ap.add_argument("--b-g2", default=None, choices=["gpu", "cpu"], help="CUDA: where B_G2 runs")
    ap.add_argument("--where", default="auto", choices=["auto", "device", "host"],
                    help="CUDA: where the key lives (host: streamed per partition in chunks)")
    ap.add_argument("--budget-gib", type=float, default=None,
                    help="CUDA: the device budget in GiB (default: the card's, less a margin)")
    ap.add_argument("--profile", action="store_true",
                    help="print a cProfile of the host side of each configuration's first timed proof")
    ap.add_argument("--config", action="append", default=None, metavar="K=V[,K=V...]",
                    help="CUDA stage options of one configuration (precompute, h_window, b_g2; '' for the "
                         "defaults); repeat to compare several on one circuit and key (keygen once)")
    a = ap.parse_args(argv)
    if a.config is not None:
        configs = [_parse_config(c) for c in a.config]
    else:
        configs = [{k: v for k, v in (("precompute", a.precompute), ("h_window", a.h_window),
                                      ("b_g2", a.b_g2)) if v is not None}]
    rows = []
    for lg in a.log_n:
        for row in run(lg, a.backend, a.repeat, a.check_cpu, configs=configs, where=a.where,
                       budget_gib=a.budget_gib, profile=a.profile):
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "median"}), flush=True)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    names = sorted({k for r in rows for k in r["median"]})
    w = max([12] + [len(_label(r)) + 2 for r in rows])
    print(f"\n{'stage (median s)':<22s}" + "".join(f"{_label(r):>{w}s}" for r in rows))
    for k in names:
        print(f"{k:<22s}" + "".join(f"{r['median'].get(k, float('nan')):{w}.4f}" for r in rows))
    for k in ("keygen_s", "load_key_s"):
        print(f"{k:<22s}" + "".join(f"{r[k]:{w}.3f}" for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
