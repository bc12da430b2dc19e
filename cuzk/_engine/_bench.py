"""The engine bench (``cuzk bench --lock-mode ... --partitions P ...``): every lock mode, worker
count and thread-share policy on the same inputs in one process, every proof verified.

For each size, the circuit comes from ``cuzk._demo``'s cache (keys generated once, reused by
later runs); the P partitions get fixed randomizers, so every configuration must produce the
same bytes (checked: ``bytes_match``).  Each configuration runs in a fresh :class:`Engine`
after one untimed warm-up partition; figures come from its timeline
(:meth:`Timeline.metrics`).
"""
import dataclasses
import hashlib
import os
import platform
import random
import sys
import threading
import time

from ._engine import DEFAULT_THREAD_SHARE, thread_share_arg
from ._interlock import LOCK_MODES, lock_mode_arg

__all__ = ["ENGINE_OPTIONS", "key_summary", "compare_to_coarse", "wants_engine_bench", "parse_modes", "parse_workers",
           "parse_devices", "parse_thread_shares", "parse_stage_option_sets", "job_plan", "bench_engine", "format_engine_table", "bench_single",
           "format_single_table", "rss_bytes", "host_memory", "RssPeak", "run_engine_bench"]

#: ``cuzk bench`` options that select the engine bench (any of them given).
ENGINE_OPTIONS = ("circuit", "partitions", "workers_per_gpu", "lock_mode", "devices",
                  "priority_mix", "trace", "thread_share", "stage_options", "single", "vram_budget")

# (priority, partitions) of the jobs of --priority-mix, cycled: sector proofs (10), a
# WinningPoSt-like critical partition, WindowPoSt-like high and low jobs
_MIX = (("normal", 10), ("critical", 1), ("high", 4), ("low", 2))


def wants_engine_bench(args):
    """Whether ``args`` (``cuzk bench``) asks for the engine bench."""
    return any(getattr(args, o, None) not in (None, False) for o in ENGINE_OPTIONS)


def parse_modes(text):
    """``"coarse,narrow,two-lock"`` -> a list of lock modes (``all`` = every mode, ``none`` = no
    engine rows: ``--single`` only)."""
    if text is None or str(text).strip().lower() == "all":
        return list(LOCK_MODES)
    if str(text).strip().lower() == "none":
        return []
    modes = [lock_mode_arg(m) for m in str(text).split(",") if m.strip()]
    if not modes:
        raise ValueError("--lock-mode: no mode given")
    return list(dict.fromkeys(modes))


def _counts(text, option):
    """``"2"`` or ``"1,2,4"`` -> the counts (each >= 1), in order, without repeats."""
    out = []
    for w in str(text).split(","):
        try:
            n = int(w)
        except ValueError:
            raise ValueError(f"{option}: {w!r} is not an integer") from None
        if n < 1:
            raise ValueError(f"{option} must be >= 1, got {n}")
        out.append(n)
    return list(dict.fromkeys(out))


def parse_workers(text):
    """``"2"`` or ``"1,2,4"`` -> list of worker counts (each >= 1; None: [2])."""
    return [2] if text is None else _counts(text, "--workers-per-gpu")


def parse_devices(text):
    """``--devices``: None -> ``["auto"]`` (every CUDA device, one CPU device), ``"2"`` or
    ``"1,2"`` -> device counts (each >= 1), each benched in turn on the same inputs."""
    if text is None or str(text).strip() == "auto":
        return ["auto"]
    return _counts(text, "--devices")


def parse_stage_option_sets(text):
    """``--stage-options``: one set ``"K=V,K=V"``, or several separated by ``;`` (each benched
    in turn on the same inputs, e.g. ``"streams=1;streams=2"``) -> a list of dicts (``[{}]``
    for None or '')."""
    from .._stages import parse_stage_options
    return [parse_stage_options(t) for t in str(text or "").split(";")]


def parse_thread_shares(text):
    """``"split"`` or ``"split,shared"`` -> a list of thread-share policies (None: the
    engine's default, :data:`cuzk._engine._engine.DEFAULT_THREAD_SHARE`)."""
    if text is None:
        return [DEFAULT_THREAD_SHARE]
    try:
        out = [thread_share_arg(t) for t in str(text).split(",") if t.strip()]
    except ValueError as e:
        raise ValueError(f"--thread-share: {e}") from None
    if not out:
        raise ValueError("--thread-share: no policy given")
    return list(dict.fromkeys(out))


def job_plan(partitions, priority_mix=False):
    """``[(priority, n_partitions), ...]`` summing to ``partitions``: jobs of 10 (sector
    proofs), or with ``priority_mix`` the cycle normal 10 / critical 1 / high 4 / low 2."""
    if partitions < 1:
        raise ValueError(f"--partitions must be >= 1, got {partitions}")
    jobs, left, k = [], partitions, 0
    while left:
        prio, n = _MIX[k % len(_MIX)] if priority_mix else ("normal", 10)
        n = min(n, left)
        jobs.append((prio, n))
        left -= n
        k += 1
    return jobs


def _one(pk, asg, public, rs, jobs, backend, devices, workers, mode, threads, trace, tag,
         share=DEFAULT_THREAD_SHARE, stage_options=None, vram_budget=None):
    from .._verifier import verify
    from ._engine import Engine
    host = host_memory()
    t_start = time.perf_counter()
    with Engine(backend, devices=devices, workers_per_gpu=workers, lock_mode=mode,
                threads=threads, verify=True, thread_share=share, stage_options=stage_options,
                vram_budget=vram_budget) as eng:
        key = eng.load(pk, progress=False)
        eng.submit(key, [asg], randomizers=[rs[0]]).result()       # warm-up, untimed
        eng.timeline.clear()
        # partitions alternate between two c arrays (the same values): consecutive partitions in
        # flight do not share host pages, as a pipeline's distinct witnesses do not (c_upload's
        # page-locking is then paid per partition, not shared: ``_HostPin``)
        asgs = (asg, dataclasses.replace(asg, c=asg.c.copy()))
        futs, k = [], 0
        for prio, n in jobs:
            futs.append(eng.submit(key, [asgs[(k + i) % 2] for i in range(n)], priority=prio,
                                   randomizers=rs[k:k + n]))
            k += n
        proofs = [f.result() for f in futs]
        m = eng.timeline.metrics()
        # the devices' memory pools after the run (CUDA; their release threshold keeps what the
        # run's peak made them reserve): the check that the budget's accounting holds
        st = eng.status()
        pools = [dv.get("pool") for dv in st["devices"]]
        untracked = [dv.get("untracked_bytes_at_start") for dv in st["devices"]]
        key0 = st["keys"][0] if st["keys"] else {}
        budgets = [{k: (dv.get("budget") or {}).get(k) for k in ("total", "peak")}
                   for dv in st["devices"]]
        serialized = any(dv.get("serialized") for dv in st["devices"])
        # a partition's reservation (device bytes on CUDA, host bytes on the CPU): the stage args
        # carry the running total, so a partition's largest figure is all it held at once
        reserved = max((int((r.args or {}).get("reserved_bytes", 0))
                        for r in eng.timeline.records("stage")), default=0)
        labels = [d.label for d in eng.devices]
        backend_name = eng.backend
        tpw = eng.threads_per_worker
        if trace:
            os.makedirs(trace, exist_ok=True)
            eng.timeline.write_chrome_trace(os.path.join(trace, f"{tag}.json"))
            try:
                eng.timeline.write_png(os.path.join(trace, f"{tag}.png"), title=tag)
            except Exception as e:          # matplotlib missing: the JSON trace is still there
                print(f"  {tag}: no PNG ({e})", file=sys.stderr)
    blob = b"".join(proofs)
    ok = all(verify(pk.vk, blob[i:i + 192], public) for i in range(0, len(blob), 192))
    return {"mode": mode, "workers": workers, "thread_share": share,
            "threads_per_worker": tpw, "devices": len(labels), "device_labels": labels,
            "backend": backend_name, "partitions": m["partitions"],
            "s_per_partition": m["s_per_partition"], "partitions_per_s": m["partitions_per_s"],
            "s_per_10_partitions": m["s_per_proof"], "gpu_efficiency": m["gpu_efficiency"],
            "kernel_busy": m["kernel_busy"], "steady_gpu_efficiency": m["steady_gpu_efficiency"],
            "steady_kernel_busy": m["steady_kernel_busy"],
            "steady_s_per_10_partitions": m["steady_s_per_proof"], "gaps": m["gaps"],
            "stage_median_s": m["stage_median_s"], "lock_wait_total_s": m["lock_wait_total_s"],
            "wall_s": m["wall_s"], "pools": pools, "untracked_bytes": untracked,
            "h_msm": key0.get("h_msm"),
            "reserved_bytes_max": reserved, "key_bytes": key0.get("nbytes"),
            # per device: where the key lives ("device"/"host") and the queries a "host" key keeps
            # on the device anyway (a partly resident key)
            "key_where": key0.get("where"), "key_kept": key0.get("kept"),
            "h_tables": key0.get("h_tables"), "h_buffers": key0.get("h_buffers"),
            "budgets": budgets, "serialized": serialized,
            "early_partitions": m["early_partitions"],
            "early_fallbacks": m["early_fallbacks"], "verified": bool(ok and m["failed"] == 0),
            "sha256": hashlib.sha256(blob).hexdigest(), "host_at_start": host,
            "engine_s": time.perf_counter() - t_start}


def _circuit(log_n, seed, cache, threads, quiet, circuit):
    """(pk, asg, public): ``circuit`` when given (loaded once by the caller for several benches:
    at 2^27 making it in memory takes minutes), else from ``cuzk._demo``'s cache."""
    if circuit is not None:
        return circuit
    from .._demo import _load_or_regenerate
    _, (pk, asg, _, public) = _load_or_regenerate(log_n, seed, cache, threads, quiet)
    return pk, asg, public


def _randomizers(log_n, seed, count):
    """The bench's fixed (r, s) per partition: the same for every configuration and for the
    ``--single`` rows, so their proof bytes can be compared."""
    from .._stages import R_MODULUS
    rnd = random.Random(f"cuzk engine bench {log_n} {seed}")
    return [(rnd.randrange(R_MODULUS), rnd.randrange(R_MODULUS)) for _ in range(count)]


def bench_engine(log_n, partitions, modes, workers, backend="auto", devices="auto",
                 threads=None, priority_mix=False, trace=None, cache=None, seed=0, quiet=False,
                 shares=(DEFAULT_THREAD_SHARE,), stage_options=None, circuit=None, tag_extra="",
                 vram_budget=None):
    """Run every (thread share, workers, mode) configuration on the same P partitions of one
    size (``tag_extra`` ends every configuration's tag and trace file name; ``vram_budget``: the
    engine's, bytes per device).

    Returns
    -------
    list of dict
        One row per configuration (see :func:`format_engine_table` for the fields), each
        with ``verified``, ``bytes_match`` and ``speedup_vs_coarse`` (None without a coarse
        row of the same worker count and thread share).  Trace files are named
        ``engine-lg{log_n}-{mode}-w{workers}``, with ``-{share}`` appended when more than one
        thread share is benched.
    """
    pk, asg, public = _circuit(log_n, seed, cache, threads, quiet, circuit)
    rs = _randomizers(log_n, seed, partitions)
    jobs = job_plan(partitions, priority_mix)
    shares = list(shares)
    rows = []
    for share in shares:
        for w in workers:
            for mode in modes:
                tag = f"engine-lg{log_n}-{mode}-w{w}"   # file names: letters, digits, - . _
                if len(shares) > 1:
                    tag += f"-{share}"
                tag += tag_extra
                if not quiet:
                    print(f"  {tag}: {partitions} partitions ...", file=sys.stderr)
                row = _one(pk, asg, public, rs, jobs, backend, devices, w, mode, threads, trace,
                           tag, share, stage_options, vram_budget)
                row["stage_options"] = dict(stage_options or {})
                row["vram_budget"] = vram_budget
                row["log_n"] = log_n
                row["constraints"] = int(asg.a.shape[0])
                rows.append(row)
                if not quiet:       # now, not only in the final table: a run cut short keeps it
                    print(f"  {tag}: {row['s_per_partition'] or 0:.4f} s/partition, steady busy "
                          f"{row['steady_kernel_busy']:.1%}, verified {row['verified']}"
                          + (f", H MSM {row['h_msm']}" if any(row.get("h_msm") or ()) else "")
                          + (f", key streamed ({'/'.join(row['key_kept'][0]) or 'nothing'} "
                             f"kept on the device, {(row.get('h_tables') or ['?'])[0]} H tables, "
                             f"H in {(row.get('h_buffers') or ['?'])[0]} buffers)"
                             if "host" in (row.get("key_where") or ())
                             and row.get("backend") == "cuda" else "")
                          + (", two partitions did not fit: the workers took turns"
                             if row.get("serialized") else ""), file=sys.stderr)
    ref = rows[0]["sha256"] if rows else None
    for row in rows:
        row["bytes_match"] = row["sha256"] == ref
    return compare_to_coarse(rows)


def compare_to_coarse(rows):
    """Set each row's ``speedup_vs_coarse`` (its throughput over the coarse row with the same
    workers, thread share and devices; None without one) and ``coarse_key_differs`` ("auto"
    places the key per configuration: coarse holds one partition in flight, so it can keep
    resident a key that two-lock must stream in part, and the ratio then includes that);
    returns ``rows``."""
    for row in rows:
        base = next((r for r in rows if r["mode"] == "coarse" and r["workers"] == row["workers"]
                     and r["thread_share"] == row["thread_share"]
                     and r["devices"] == row["devices"]), None)
        row["speedup_vs_coarse"] = (row["partitions_per_s"] / base["partitions_per_s"]
                                    if base and base["partitions_per_s"] else None)
        row["coarse_key_differs"] = bool(base) and key_summary(base) != key_summary(row)
    return rows


def key_summary(row):
    """The key's placement in a bench row, short: "dev" (resident), "part" (streamed, some
    queries kept on the device), "host" (streamed) or "-" (CPU backend), with the H MSM's copies
    ("k5"); devices that differ are joined by "/"."""
    if row.get("backend") != "cuda" or not row.get("key_where"):
        return "-"
    kept = row.get("key_kept") or [()] * len(row["key_where"])
    hm = row.get("h_msm") or [None] * len(row["key_where"])
    out = []
    for where, kp, h in zip(row["key_where"], kept, hm):
        place = "dev" if where == "device" else ("part" if kp else "host")
        k = h.get("k") if isinstance(h, dict) else None
        tag = f"{place} k{k}" if k else place
        if tag not in out:
            out.append(tag)
    return "/".join(out)


def parse_vram_budgets(text):
    """``--vram-budget``: None -> [None] (the card's default), ``"40,52.5"`` -> their bytes
    ([40 GiB, 52.5 GiB]), each benched in turn on the same inputs.

    Raises
    ------
    ValueError
        An item that is not a number of GiB > 0.
    """
    if text is None:
        return [None]
    out = []
    for item in filter(None, (x.strip() for x in str(text).split(","))):
        gib = float(item)
        if not gib > 0:
            raise ValueError(f"--vram-budget must be > 0 GiB, got {item}")
        out.append(int(gib * (1 << 30)))
    if not out:
        raise ValueError(f"--vram-budget: no budget in {text!r}")
    return out


def rss_bytes():
    """Resident set size of this process (/proc/self/statm: pages x page size)."""
    with open("/proc/self/statm") as f:
        resident = int(f.read().split()[1])
    return resident * os.sysconf("SC_PAGE_SIZE")


def host_memory():
    """The host's memory as a bench row starts: ``rss_bytes`` (this process) and
    ``available_bytes`` (the host's MemAvailable, /proc/meminfo), both None where /proc does not
    exist.  Rows record it so that a stage slower in one run than in another (session 35: a, b's
    upload at 2^27 three times slower after an engine run on one H100 host than alone on another)
    can be told apart from the host's memory state."""
    out = {"rss_bytes": None, "available_bytes": None}
    try:
        out["rss_bytes"] = rss_bytes()
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    out["available_bytes"] = int(line.split()[1]) * 1024
                    break
    except OSError:
        pass
    return out


class RssPeak:
    """``with RssPeak() as p: ...``: ``p.extra`` = the highest RSS seen while the block ran
    (sampled every ``every`` seconds by a thread, and at both ends) minus the RSS at entry;
    None where /proc/self/statm does not exist."""

    def __init__(self, every=0.005):
        self.every, self.extra = every, None
        self._stop = threading.Event()

    def _run(self):
        while not self._stop.wait(self.every):
            self._peak = max(self._peak, rss_bytes())

    def __enter__(self):
        try:
            self._base = self._peak = rss_bytes()
        except OSError:
            self._base = None
            return self
        self._thread = threading.Thread(target=self._run, name="cuzk-rss", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        if self._base is not None:
            self._stop.set()
            self._thread.join()
            self.extra = max(self._peak, rss_bytes()) - self._base


def bench_single(log_n, runs, backend="auto", threads=None, cache=None, seed=0, quiet=False,
                 stage_options=None, circuit=None, tag_extra=""):
    """``runs`` partitions through ``Stages.prove_one`` (the path of ``cuzk.prove`` and
    ``cuzk.Prover.prove``: one worker, no engine, no lock), after one untimed warm-up, on the
    engine bench's inputs and randomizers.  CUDA: the key as ``cuzk.prove`` loads it (one call:
    no precomputed H copies) with the early H overlap (``early_h``, the default) and without,
    then the key as ``cuzk.Prover`` keeps it (``lasting``: the copies of ``precompute="auto"``,
    built once at load) on the early path.

    Returns
    -------
    list of dict
        One row per path ("early", "normal", "prover"; the CPU backend: "cpu"):
        ``wall_median_s`` (host wall of a whole ``prove_one``), ``stage_median_s`` (its timings),
        ``verified``, ``sha256`` (equal across the paths: same randomizers).
    """
    from .._stages import stages_for
    pk, asg, _ = _circuit(log_n, seed, cache, threads, quiet, circuit)
    rs = _randomizers(log_n, seed, max(1, runs))
    st = stages_for(backend, threads, **(stage_options or {}))
    ctx = st.context(threads=threads)
    rows = []
    # per key (lasting?): its paths (name, early_h). cuzk.prove's one-call key on both CUDA
    # paths, then cuzk.Prover's lasting one (one key resident at a time: a 2^27 key is 44 GiB)
    plans = ({False: [("early", True), ("normal", False)], True: [("prover", True)]}
             if hasattr(st, "early_h") else {False: [("cpu", None)]})
    try:
        for lasting, paths in plans.items():
            key = st.load_key(pk, lasting=lasting)
            try:
                for path, early in paths:
                    if early is not None:
                        st.early_h = early
                    rows.append(_single_row(st, key, asg, ctx, rs[:runs], log_n, path, quiet,
                                            tag_extra, stage_options))
            finally:
                key.release()
    finally:
        ctx.close()
    return rows


def _single_row(st, key, asg, ctx, rs, log_n, path, quiet, tag_extra, stage_options):
    """One ``bench_single`` row: a warm-up, then one ``prove_one`` per (r, s) of ``rs``."""
    from statistics import median
    if not quiet:
        print(f"  single-lg{log_n}-{path}{tag_extra}: {len(rs)} partitions ...", file=sys.stderr)
    host = host_memory()
    st.prove_one(key, asg, ctx, *rs[0], verify=True)          # warm-up, untimed
    walls, times, proofs, extras = [], {}, [], []
    for r, s in rs:
        t0 = time.perf_counter()
        with RssPeak() as peak:
            proof, t = st.prove_one(key, asg, ctx, r, s, verify=True)
        walls.append(time.perf_counter() - t0)
        extras.append(peak.extra)
        proofs.append(proof)
        for k, v in t.items():
            if isinstance(v, float):
                times.setdefault(k, []).append(v)
    if not quiet:
        print(f"  single-lg{log_n}-{path}{tag_extra}: wall {median(walls):.3f} s", file=sys.stderr)
    staging = getattr(getattr(ctx, "staging", None), "allocated", 0)
    return {"path": path, "log_n": log_n, "runs": len(rs), "backend": st.name,
            "device": st.device_label, "wall_median_s": median(walls),
            # host bytes a partition adds beyond its inputs: the RSS peak of the call over its
            # start, plus the context's pinned staging (allocated once by the warm-up, so
            # already in the start's RSS)
            "host_extra_bytes": (None if None in extras else int(median(extras))),
            "host_staging_bytes": int(staging), "host_at_start": host,
            "stage_median_s": {k: median(v) for k, v in times.items()},
            "verified": True,       # prove_one(verify=True) raised otherwise
            "sha256": hashlib.sha256(b"".join(proofs)).hexdigest(),
            "stage_options": dict(stage_options or {})}


def format_single_table(rows):
    """One line per ``bench_single`` row: path, wall, the stages that make it up, and the host
    memory a partition adds beyond its inputs (RSS peak over the call's start + staging, GiB)."""
    keys = ("validate", "upload", "prep_msm", "region", "gpu:region", "gpu:prep_wait", "epilogue",
            "verify_prep", "verify")
    head = (f"{'log_n':>5s} {'path':>7s} {'wall s':>8s} " + " ".join(f"{k:>13s}" for k in keys)
            + f" {'host+ GiB':>9s}")
    lines = [head, "-" * len(head)]
    for r in rows:
        m = r["stage_median_s"]
        extra = r.get("host_extra_bytes")
        host = (f"{(extra + r.get('host_staging_bytes', 0)) / 2**30:9.2f}" if extra is not None
                else f"{'-':>9s}")
        lines.append(f"{r['log_n']:>5d} {r['path']:>7s} {r['wall_median_s']:8.3f} "
                     + " ".join(f"{m[k]:13.3f}" if k in m else f"{'-':>13s}" for k in keys)
                     + f" {host}")
    return "\n".join(lines)


def format_engine_table(rows):
    """The bench table: mode, workers, thread share, s/partition, throughput, GPU efficiency,
    kernel busy, steady-state kernel busy (first region to last, fill and drain left out), the
    steady period per 10 partitions (region end to region end: a continuous stream's rate), gap
    counts (<50 ms / 50-500 ms / >500 ms), the key's placement (``key_summary``), speed-up vs
    coarse ("*": against a coarse row whose key was placed differently, explained under the
    table), verified."""
    scaled = any(r.get("speedup_vs_fewest_devices") for r in rows)
    keys = [key_summary(r) for r in rows]
    kw = max([3] + [len(k) for k in keys])
    marked = [bool(r.get("speedup_vs_coarse") and r.get("coarse_key_differs")) for r in rows]
    head = (f"{'log_n':>5s} {'mode':>9s} {'dev':>3s} {'workers':>7s} {'share':>6s} {'s/part':>9s} "
            f"{'part/s':>8s} "
            f"{'s/10part':>9s} {'steady10':>8s} {'gpu_eff':>7s} {'busy':>6s} {'steady':>6s} {'gaps <50ms/50-500/>500':>23s} "
            f"{'key':>{kw}s} {'vs coarse':>9s} " + (f"{'vs fewest dev':>13s} " if scaled else "")
            + f"{'verified':>8s}")
    lines = [head, "-" * len(head)]
    for r, key, mark in zip(rows, keys, marked):
        g = r["gaps"]
        gaps = f"{g['lt_50ms']}/{g['50_500ms']}/{g['gt_500ms']}"
        sp = (f"{r['speedup_vs_coarse']:.2f}x" + ("*" if mark else "")) if r.get("speedup_vs_coarse") else "-"
        spp = r["s_per_partition"] or 0.0
        share = r.get("thread_share", DEFAULT_THREAD_SHARE)
        dx = r.get("speedup_vs_fewest_devices")
        lines.append(f"{r['log_n']:>5d} {r['mode']:>9s} {r.get('devices', 1):>3d} {r['workers']:>7d} "
                     f"{share:>6s} {spp:9.4f} "
                     f"{r['partitions_per_s']:8.2f} {(r['s_per_10_partitions'] or 0):9.3f} "
                     f"{(r.get('steady_s_per_10_partitions') or 0):8.3f} "
                     f"{r['gpu_efficiency']:7.1%} {r['kernel_busy']:6.1%} "
                     f"{r.get('steady_kernel_busy', 0.0):6.1%} {gaps:>23s} "
                     f"{key:>{kw}s} {sp:>9s} " + ((f"{dx:.2f}x" if dx else "-").rjust(13) + " " if scaled else "")
                     + f"{('yes' if r['verified'] and r['bytes_match'] else 'NO'):>8s}")
    if any(marked):
        lines.append("* against a coarse row whose key was placed differently (key: dev = resident, "
                     "part = streamed with some queries kept on the device, host = streamed; "
                     "kN = the H MSM's copies): the ratio includes the placement")
    return "\n".join(lines)


def run_engine_bench(args):
    """``cuzk bench`` with engine options; returns the exit code (1 if any proof failed)."""
    import json
    if getattr(args, "circuit", None) not in (None, "porep-like"):
        raise ValueError(f"unknown circuit {args.circuit!r}; known: porep-like")
    modes = parse_modes(getattr(args, "lock_mode", None))
    workers = parse_workers(getattr(args, "workers_per_gpu", None))
    shares = parse_thread_shares(getattr(args, "thread_share", None))
    partitions = getattr(args, "partitions", None) or 10
    device_counts = parse_devices(getattr(args, "devices", None))
    cache = getattr(args, "cache_dir", None)
    option_sets = parse_stage_option_sets(getattr(args, "stage_options", None))
    single = getattr(args, "single", None) or 0
    budgets = parse_vram_budgets(getattr(args, "vram_budget", None))
    if single < 0:
        raise ValueError(f"--single must be >= 0, got {single}")
    if not modes and not single:
        raise ValueError("--lock-mode none needs --single N")
    rows, singles = [], []
    for lg in args.log_n:
        circuit = _circuit(lg, 0, cache, args.threads, False, None)     # once for both benches
        for i, opts in enumerate(option_sets):
            extra = f"-o{i}" if len(option_sets) > 1 else ""
            for vb in budgets if modes else ():
                for nd in device_counts:
                    rows += bench_engine(lg, partitions, modes, workers, backend=args.backend,
                                         devices=nd, threads=args.threads,
                                         priority_mix=bool(getattr(args, "priority_mix", False)),
                                         trace=getattr(args, "trace", None), cache=cache,
                                         shares=shares, stage_options=opts, circuit=circuit,
                                         tag_extra=extra + (f"-v{vb >> 30}" if len(budgets) > 1 else "")
                                         + (f"-d{nd}" if len(device_counts) > 1 else ""),
                                         vram_budget=vb)
            if single:
                singles += bench_single(lg, single, backend=args.backend, threads=args.threads,
                                        cache=cache, stage_options=opts, circuit=circuit,
                                        tag_extra=extra)
        del circuit
    for r in rows:      # every configuration of a size proves the same partitions: same bytes
        ref = next(x["sha256"] for x in rows if x["log_n"] == r["log_n"])
        r["bytes_match"] = r["sha256"] == ref
        if len(device_counts) > 1:      # throughput against the same configuration on fewer devices
            same = [x for x in rows if all(x[k] == r[k] for k in (
                "log_n", "mode", "workers", "thread_share", "stage_options", "vram_budget"))]
            base = min(same, key=lambda x: x["devices"])
            r["speedup_vs_fewest_devices"] = (r["partitions_per_s"] / base["partitions_per_s"]
                                              if base["partitions_per_s"] else None)
    be = rows[0]["backend"] if rows else (singles[0]["backend"] if singles else args.backend)
    labels = (", ".join(max((r["device_labels"] for r in rows), key=len)) if rows
              else (singles[0]["device"] if singles else ""))
    print(f"cuzk bench (engine): PoRep-like, backend {be} ({labels}), {partitions} partitions "
          f"per configuration, threads {args.threads or os.cpu_count()}, every proof verified"
          + (f", stage options {option_sets[0]}" if len(option_sets) == 1 and option_sets[0]
             else ""))
    for i, opts in enumerate(option_sets):
        mine = [r for r in rows if r["stage_options"] == opts]
        ones = [r for r in singles if r["stage_options"] == opts]
        if len(option_sets) > 1:
            print(f"stage options o{i}: {opts or 'defaults'}")
        for vb in budgets:
            these = [r for r in mine if r["vram_budget"] == vb]
            if these and len(budgets) > 1:
                print(f"vram budget {'the default' if vb is None else f'{vb / (1 << 30):g} GiB'}:")
            if these:
                print(format_engine_table(these))
        if ones:
            print(f"one partition at a time through cuzk.prove's path (medians of {single}):")
            print(format_single_table(ones))
    if getattr(args, "json", None):
        from .._io import atomic_write
        doc = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": platform.node(),
               "cpu": platform.processor() or platform.machine(), "cpu_count": os.cpu_count(),
               "backend": be, "threads": args.threads, "thread_shares": shares,
               "stage_options": option_sets[0] if len(option_sets) == 1 else option_sets,
               "partitions": partitions,
               "priority_mix": bool(getattr(args, "priority_mix", False)), "results": rows,
               "single": singles}
        atomic_write(args.json, json.dumps(doc, indent=1) + "\n")
    ok_single = all(len({r["sha256"] for r in singles if r["log_n"] == lg}) <= 1 for lg in args.log_n)
    return 0 if all(r["verified"] and r["bytes_match"] for r in rows) and ok_single else 1
