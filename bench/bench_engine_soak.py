"""Engine soak: one cuzk.Engine proves N partitions of a PoRep-like circuit in a steady stream
(``--in-flight`` one-partition jobs kept queued or running, default 2 x workers x devices),
every proof verified by the engine; host RSS (/proc/self/statm) and, on CUDA, the device pool's
used and reserved bytes (cuMemPoolGetAttribute, via ``Engine.status()``) sampled every K proofs.

Verdict: memory with the engine idle after the warm-up (the first 10 % of the proofs, then the
stream drains) against memory with the engine idle after the last proof; each quantity is
``flat`` when it grew by less than max(64 MiB, 2 % of its warm-up value), else ``growing``.
Both points are idle states of the same open engine, so partitions in flight cannot hide a leak
or fake one; the samples in between show the trend under load.  Exit 1 if any proof failed.

    python bench/bench_engine_soak.py --backend cuda --log-n 20 --proofs 200 \\
        --workers-per-gpu 2 --lock-mode narrow --sample-every 10 --json soak.json

The circuit is ``cuzk bench``'s (the same cache entry; keys generated once).
"""
import argparse
import collections
import concurrent.futures
import math
import os
import platform
import sys
import time

import cuzk
from cuzk._engine._bench import rss_bytes

__all__ = ["rss_bytes", "pool_bytes", "verdict", "verdict_line", "run_soak", "format_samples",
           "main"]

MIB = 1 << 20
#: growth below max(FLAT_MIN_BYTES, FLAT_FRACTION x the warm-up value) is "flat"
FLAT_MIN_BYTES = 64 * MIB
FLAT_FRACTION = 0.02
#: the fraction of the proofs that is warm-up
WARMUP_FRACTION = 0.10
#: the quantities sampled (``sample[name]`` in bytes; the pool ones are None on the CPU)
QUANTITIES = ("rss", "pool_used", "pool_reserved")


def pool_bytes(eng):
    """(used, reserved) bytes of the engine's device memory pools, summed over devices, or
    (None, None) when no device has a pool (the CPU backend)."""
    pools = [d["pool"] for d in eng.status()["devices"] if d.get("pool") is not None]
    if not pools:
        return None, None
    return sum(p["used"] for p in pools), sum(p["reserved"] for p in pools)


def _sample(eng, proofs, t0, phase):
    used, reserved = pool_bytes(eng)
    return {"proofs": proofs, "t_s": time.perf_counter() - t0, "phase": phase,
            "rss": rss_bytes(), "pool_used": used, "pool_reserved": reserved}


def verdict(baseline, end):
    """Growth of every sampled quantity from ``baseline`` to ``end`` (two samples).

    Returns
    -------
    dict
        ``{"growth_mib": {q: MiB or None}, "threshold_mib": {q: MiB or None},
        "flat": {q: bool or None}, "verdict": "flat" | "growing"}``; a quantity that is None
        in either sample (no device pool) is None throughout and does not vote.
    """
    growth, thresh, flat = {}, {}, {}
    for q in QUANTITIES:
        b, e = baseline.get(q), end.get(q)
        if b is None or e is None:
            growth[q] = thresh[q] = flat[q] = None
            continue
        limit = max(FLAT_MIN_BYTES, FLAT_FRACTION * b)
        growth[q], thresh[q] = (e - b) / MIB, limit / MIB
        flat[q] = e - b < limit
    ok = all(v for v in flat.values() if v is not None)
    return {"growth_mib": growth, "threshold_mib": thresh, "flat": flat,
            "verdict": "flat" if ok else "growing"}


def _wait_idle(eng, timeout=600.0):
    """Until no partition is in flight and every worker is idle (a job's future resolves just
    before its partition gives its buffers and slot back)."""
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        st = eng.status()
        if st["in_flight"] == 0 and all(w["state"] in ("idle", "exited", "quarantined")
                                        for d in st["devices"] for w in d["workers"]):
            return
        time.sleep(0.005)
    raise cuzk.EngineError(f"soak: engine not idle after {timeout} s")


def run_soak(eng, key, asg, proofs, in_flight, sample_every, warmup=None, log=None):
    """Stream ``proofs`` one-partition jobs through ``eng`` and sample memory.

    Parameters
    ----------
    eng : cuzk.Engine
        Open, with ``key`` loaded; proofs are checked by the engine (``verify=True``).
    key : EngineKey
    asg : Assignment
        Every job proves it (with fresh randomizers).
    proofs, in_flight, sample_every : int
        Jobs in all; jobs kept submitted and unfinished; a sample every that many finished.
    warmup : int or None
        Proofs before the baseline (None: ceil(10 % of proofs), at least 1).
    log : callable or None
        Called with each sample as it is taken.

    Returns
    -------
    dict
        ``samples`` (``proofs``, ``t_s``, ``phase`` = start / warmup / baseline / stream / end,
        and the
        bytes of every quantity), ``baseline`` and ``end`` (the idle samples), ``warmup``,
        ``ok`` and ``failed`` counts, ``errors`` (the first few, as text), ``wall_s``,
        ``proofs_per_s`` and :func:`verdict`'s fields.
    """
    if proofs < 2:
        raise ValueError(f"--proofs must be >= 2 (a warm-up and a stream), got {proofs}")
    if in_flight < 1 or sample_every < 1:
        raise ValueError(f"in_flight and sample_every must be >= 1, got {in_flight}, "
                         f"{sample_every}")
    if warmup is None:
        warmup = max(1, math.ceil(WARMUP_FRACTION * proofs))
    warmup = min(max(1, int(warmup)), proofs - 1)
    t0 = time.perf_counter()
    samples, errors = [], []
    counts = collections.Counter()

    def take(done, phase):
        s = _sample(eng, done, t0, phase)
        samples.append(s)
        if log is not None:
            log(s)
        return s

    def collect(fut):
        try:
            proof = fut.result()
            assert len(proof) == 192, len(proof)
            counts["ok"] += 1
        except Exception as e:                # a failed proof is counted, the stream goes on
            counts["failed"] += 1
            if len(errors) < 5:
                errors.append(f"{type(e).__name__}: {e}")

    def stream(first, last, phase):
        """Jobs first..last-1, ``in_flight`` of them unfinished at a time; returns when all
        are done.  Samples every ``sample_every`` finished proofs (counted from 0)."""
        pending, submitted, done = set(), first, first
        while done < last:
            while submitted < last and len(pending) < in_flight:
                pending.add(eng.submit(key, [asg]))
                submitted += 1
            finished, pending = concurrent.futures.wait(
                pending, return_when=concurrent.futures.FIRST_COMPLETED)
            for f in finished:
                collect(f)
                done += 1
                if done % sample_every == 0 and done < last:
                    take(done, phase)

    take(0, "start")
    stream(0, warmup, "warmup")
    _wait_idle(eng)
    baseline = take(warmup, "baseline")
    t_stream = time.perf_counter()
    stream(warmup, proofs, "stream")
    wall = time.perf_counter() - t_stream
    _wait_idle(eng)
    end = take(proofs, "end")
    out = {"samples": samples, "baseline": baseline, "end": end, "warmup": warmup,
           "ok": counts["ok"], "failed": counts["failed"], "errors": errors,
           "stream_wall_s": wall,
           "proofs_per_s": (proofs - warmup) / wall if wall > 0 else None}
    out.update(verdict(baseline, end))
    out["peak_mib"] = {q: (max(s[q] for s in samples) / MIB
                           if all(s[q] is not None for s in samples) else None)
                       for q in QUANTITIES}
    return out


def _mib(v):
    return f"{v / MIB:10.1f}" if v is not None else f"{'-':>10s}"


def format_samples(samples):
    """The sample table: proofs done, seconds, phase, RSS and pool used / reserved in MiB."""
    head = (f"{'proofs':>7s} {'t_s':>8s} {'phase':>8s} {'rss MiB':>10s} {'pool MiB':>10s} "
            f"{'reserved':>10s}")
    lines = [head, "-" * len(head)]
    for s in samples:
        lines.append(f"{s['proofs']:>7d} {s['t_s']:8.2f} {s['phase']:>8s} {_mib(s['rss'])} "
                     f"{_mib(s['pool_used'])} {_mib(s['pool_reserved'])}")
    return "\n".join(lines)


def verdict_line(res):
    """``verdict: flat (rss +1.2 MiB < 64.0, ...) between proof W and N``."""
    parts = []
    for q in QUANTITIES:
        g = res["growth_mib"][q]
        if g is not None:
            parts.append(f"{q} {g:+.1f} MiB {'<' if res['flat'][q] else '>='} "
                         f"{res['threshold_mib'][q]:.1f}")
    return (f"verdict: {res['verdict']} ({', '.join(parts)}) between the idle engine after "
            f"{res['warmup']} warm-up proofs and after {res['end']['proofs']}")


def _parser():
    from cuzk._engine._engine import DEFAULT_THREAD_SHARE, THREAD_SHARES
    from cuzk._engine._interlock import LOCK_MODES
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--log-n", type=int, default=16, help="log2 of the FFT domain size")
    ap.add_argument("--proofs", type=int, default=200, help="proofs in all (warm-up included)")
    ap.add_argument("--workers-per-gpu", type=int, default=2)
    ap.add_argument("--lock-mode", default="narrow", choices=list(LOCK_MODES))
    ap.add_argument("--thread-share", default=DEFAULT_THREAD_SHARE, choices=list(THREAD_SHARES))
    ap.add_argument("--devices", type=int, default=None,
                    help="devices (CPU: simulated ones; default all / 1)")
    ap.add_argument("--threads", type=int, default=None, help="CPU threads (default all)")
    ap.add_argument("--in-flight", type=int, default=None,
                    help="jobs kept unfinished (default 2 x workers x devices)")
    ap.add_argument("--sample-every", type=int, default=None,
                    help="a sample every K proofs (default proofs / 20, at least 1)")
    ap.add_argument("--json", default=None, help="write the samples and the verdict here")
    ap.add_argument("--cache-dir", default=None, help="circuit cache (as cuzk bench)")
    ap.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return ap


def main(argv=None):
    """Run the soak; 0 when every proof verified, 1 otherwise."""
    a = _parser().parse_args(argv)
    from cuzk._demo import _load_or_regenerate
    _, (pk, asg, _, _) = _load_or_regenerate(a.log_n, 0, a.cache_dir, a.threads, a.quiet)
    sample_every = a.sample_every or max(1, a.proofs // 20)
    with cuzk.Engine(a.backend, devices=a.devices or "auto", workers_per_gpu=a.workers_per_gpu,
                     lock_mode=a.lock_mode, threads=a.threads, verify=True,
                     thread_share=a.thread_share) as eng:
        in_flight = a.in_flight or 2 * a.workers_per_gpu * len(eng.devices)
        key = eng.load(pk, progress=not a.quiet)
        labels = [d.label for d in eng.devices]
        print(f"engine soak: PoRep-like 2^{a.log_n} ({int(asg.a.shape[0])} constraints), "
              f"backend {eng.backend} ({', '.join(labels)}), {a.proofs} proofs, "
              f"{a.workers_per_gpu} worker(s) per device, {a.lock_mode}, threads "
              f"{a.threads or 'all'} ({eng.thread_share}), {in_flight} in flight, a sample "
              f"every {sample_every}, every proof verified", flush=True)

        def log(s):
            if not a.quiet:
                print(f"  {s['proofs']:>6d} proofs {s['t_s']:8.2f} s  rss {s['rss'] / MIB:.1f} "
                      f"MiB", file=sys.stderr, flush=True)
        res = run_soak(eng, key, asg, a.proofs, in_flight, sample_every, log=log)
        backend, tpw = eng.backend, eng.threads_per_worker
        st = eng.status()
    print(format_samples(res["samples"]))
    if res["failed"]:
        print(f"FAILED: {res['failed']} of {a.proofs} proofs ({'; '.join(res['errors'])})")
    print(f"{res['ok']} of {a.proofs} proofs verified, {res['proofs_per_s'] or 0:.2f} proofs/s "
          f"after the warm-up")
    line = verdict_line(res)
    print(line)
    if a.json:
        import json
        from cuzk._io import atomic_write
        doc = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": platform.node(),
               "cpu_count": os.cpu_count(), "commit": _commit(), "backend": backend,
               "device_labels": labels, "log_n": a.log_n,
               "constraints": int(asg.a.shape[0]), "proofs": a.proofs,
               "workers_per_gpu": a.workers_per_gpu, "lock_mode": a.lock_mode,
               "thread_share": a.thread_share, "threads": a.threads,
               "threads_per_worker": tpw, "in_flight": in_flight,
               "sample_every": sample_every, "completed": st["completed"],
               "verdict_line": line, **res}
        atomic_write(a.json, json.dumps(doc, indent=1) + "\n")
    return 0 if res["failed"] == 0 and res["ok"] == a.proofs else 1


def _commit():
    """The repository's HEAD commit, or None (not a checkout, no git)."""
    import subprocess
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              cwd=os.path.dirname(os.path.abspath(__file__)),
                              timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


if __name__ == "__main__":
    sys.exit(main())
