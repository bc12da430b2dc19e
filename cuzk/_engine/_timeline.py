"""The engine's timeline: records, derived metrics, Chrome-trace JSON, PNG Gantt chart.

Every record is one interval on the host clock (``time.perf_counter`` seconds since the
timeline's origin) of one worker:

* ``stage``: ``prepare`` / ``run`` / ``sync`` / ``finish`` of one partition; ``args`` carry the
  stage's own ``part.timings`` and ``reserved_bytes`` / ``uploaded_bytes`` when reported.
* ``wait`` / ``hold``: waiting for, and holding, a lock (``name`` = the lock).
* ``partition``: dequeue to completion (``args["status"]`` = ``ok`` / ``error`` / ``skipped``).
* ``queued``: submit to dequeue (``worker`` = the worker that took it).

The kernel region of a partition is ``run.start .. sync.end`` (DESIGN §3: enqueue plus the wait
for the last event; on the CPU backend ``run`` computes and ``sync`` returns at once); an early
plan's runs from the end of its early_head's a, b, c upload to ``sync.end``.
"""
import json
import math
import statistics
import threading
import time
from collections import defaultdict, deque

__all__ = ["Record", "Timeline", "GAP_BINS", "KERNEL_TIMINGS", "merge_intervals"]

#: Gap histogram bins (seconds): < 50 ms, 50-500 ms, > 500 ms.
GAP_BINS = (("lt_50ms", 0.0, 0.05), ("50_500ms", 0.05, 0.5), ("gt_500ms", 0.5, math.inf))
#: ``part.timings`` keys holding a partition's device-measured kernel-region seconds.
KERNEL_TIMINGS = ("gpu:region", "kernel")


class Record:
    """One interval; ``t0``/``t1`` are seconds since the timeline origin."""

    __slots__ = ("kind", "name", "device", "worker", "job", "partition", "priority", "t0", "t1",
                 "args")

    def __init__(self, kind, name, device, worker, job, partition, priority, t0, t1, args=None):
        self.kind, self.name, self.device, self.worker = kind, name, device, worker
        self.job, self.partition, self.priority = job, partition, priority
        self.t0, self.t1, self.args = t0, t1, args

    @property
    def duration(self):
        return self.t1 - self.t0

    def as_dict(self):
        return {k: getattr(self, k) for k in self.__slots__}

    def __repr__(self):
        return (f"Record({self.kind}:{self.name} d{self.device} w{self.worker} "
                f"job {self.job}/{self.partition} {self.t0:.4f}..{self.t1:.4f})")


def merge_intervals(intervals):
    """Union of ``(t0, t1)`` intervals as a sorted list of disjoint intervals."""
    out = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1][1] = b
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


class Timeline:
    """Thread-safe record store with derived metrics and exports.

    Parameters
    ----------
    maxlen : int or None
        Keep at most this many records (oldest dropped first); None keeps all.
    """

    def __init__(self, maxlen=None):
        self.origin = time.perf_counter()
        self.origin_epoch = time.time()
        self._records = deque(maxlen=maxlen)
        self._lock = threading.Lock()
        self.workers = {}                # (device, worker) -> label

    def now(self):
        """Seconds since the origin (the clock every record uses)."""
        return time.perf_counter() - self.origin

    def add(self, kind, name, device, worker, job, partition, priority, t0, t1, args=None):
        rec = Record(kind, name, device, worker, job, partition, priority, t0, t1, args)
        with self._lock:
            self._records.append(rec)
        return rec

    def records(self, kind=None):
        """A copy of the records (of one ``kind``), in insertion order."""
        with self._lock:
            recs = list(self._records)
        return recs if kind is None else [r for r in recs if r.kind == kind]

    def clear(self):
        with self._lock:
            self._records.clear()
            self.origin = time.perf_counter()
            self.origin_epoch = time.time()

    def __len__(self):
        return len(self._records)

    # ---- derived -------------------------------------------------------------------------
    def kernel_regions(self, recs=None):
        """``{device: [(t0, t1, kernel_s), ...]}``: one entry per partition whose run (or early
        plan's early_head, from the end of its a, b, c upload) and sync completed.  ``kernel_s``
        is the device-measured kernel time when the stage reports one
        (``part.timings["gpu:region"]``, CUDA events, in any stage's timings), else the region's
        host-clock length."""
        recs = self.records() if recs is None else recs
        runs, syncs, kernel = {}, {}, {}
        for r in recs:
            if r.kind != "stage":
                continue
            k = (r.device, r.job, r.partition)
            t = (r.args or {}).get("timings") or {}
            if r.name == "run":
                runs[k] = r.t0
            elif r.name == "sync":
                syncs[k] = r
            elif r.name == "early_head" and "fallback" not in (r.args or {}):
                # the early plan: the region starts once a, b, c are uploaded (its first kernels)
                runs[k] = r.t0 + float(t.get("validate", 0.0)) + float(t.get("upload:abc", 0.0))
            for name in KERNEL_TIMINGS:
                if isinstance(t.get(name), (int, float)):
                    kernel[k] = float(t[name])
        out = defaultdict(list)
        for k, t0 in runs.items():
            sync = syncs.get(k)
            if sync is None:
                continue
            out[sync.device].append((t0, sync.t1, kernel.get(k, sync.t1 - t0)))
        return dict(out)

    def metrics(self, partitions_per_proof=10):
        """Derived figures over everything recorded.

        Returns
        -------
        dict
            ``partitions`` (completed), ``failed``, ``wall_s`` (first dequeue to last
            completion), ``partitions_per_s``, ``s_per_partition``, ``s_per_proof`` (for
            ``partitions_per_proof`` partitions), ``gpu_efficiency`` (merged kernel-region
            time over wall, averaged over devices), ``kernel_busy`` (reported kernel seconds
            over wall, averaged over devices), ``steady_gpu_efficiency`` and
            ``steady_kernel_busy`` (the same over each device's steady span, from its first
            kernel region's start to its last one's end: the pipeline fill before the first
            region and the drain after the last are left out), ``steady_s_per_partition`` and
            ``steady_s_per_proof`` (the pipeline's period: per device, the time from its first
            kernel region's end to its last one's over the regions between, the devices'
            rates added; None without a device of two regions: the rate a continuous stream of
            partitions reaches, where ``s_per_partition`` also pays one fill and drain), ``gaps`` (histogram of the idle gaps between
            merged kernel regions, per :data:`GAP_BINS`, plus ``total_s``),
            ``stage_median_s`` (per stage and per ``part.timings`` key), ``lock_wait_median_s``
            and ``lock_wait_total_s`` per lock, ``early_partitions`` and ``early_fallbacks``
            (partitions that ran the early plan, and those whose early_head fell back to the
            mode's plan).
        """
        recs = self.records()
        parts = [r for r in recs if r.kind == "partition"]
        ok = [r for r in parts if (r.args or {}).get("status") == "ok"]
        m = {"partitions": len(ok), "failed": sum(1 for r in parts
                                                  if (r.args or {}).get("status") == "error")}
        if parts:
            wall = max(r.t1 for r in parts) - min(r.t0 for r in parts)
        else:
            wall = 0.0
        m["wall_s"] = wall
        m["partitions_per_s"] = len(ok) / wall if wall > 0 else 0.0
        m["s_per_partition"] = wall / len(ok) if ok else None
        m["s_per_proof"] = (m["s_per_partition"] * partitions_per_proof if ok else None)
        regions = self.kernel_regions(recs)
        devices = sorted({r.device for r in parts} | set(regions))
        effs, busy, s_effs, s_busy, rates = [], [], [], [], []
        gaps = {name: 0 for name, _, _ in GAP_BINS}
        gaps["total_s"] = 0.0
        for d in devices:
            rs = regions.get(d, [])
            merged = merge_intervals([(a, b) for a, b, _ in rs])
            covered, kernel_s = sum(b - a for a, b in merged), sum(k for _, _, k in rs)
            if wall > 0:
                effs.append(covered / wall)
                busy.append(min(1.0, kernel_s / wall))
            span = merged[-1][1] - merged[0][0] if merged else 0.0
            if span > 0:
                s_effs.append(covered / span)
                s_busy.append(min(1.0, kernel_s / span))
            ends = sorted(b for _, b, _ in rs)
            if len(ends) > 1 and ends[-1] > ends[0]:
                rates.append((len(ends) - 1) / (ends[-1] - ends[0]))
            for (_, b), (a, _) in zip(merged, merged[1:]):
                g = a - b
                gaps["total_s"] += g
                for name, lo, hi in GAP_BINS:
                    if lo <= g < hi:
                        gaps[name] += 1
        m["devices"] = len(devices)
        m["gpu_efficiency"] = statistics.fmean(effs) if effs else 0.0
        m["kernel_busy"] = statistics.fmean(busy) if busy else 0.0
        m["steady_gpu_efficiency"] = statistics.fmean(s_effs) if s_effs else 0.0
        m["steady_kernel_busy"] = statistics.fmean(s_busy) if s_busy else 0.0
        m["steady_s_per_partition"] = 1.0 / sum(rates) if rates else None
        m["steady_s_per_proof"] = (m["steady_s_per_partition"] * partitions_per_proof
                                   if rates else None)
        m["gaps"] = gaps
        per = defaultdict(list)
        for r in recs:
            if r.kind == "stage":
                per[r.name].append(r.duration)
                for k, v in ((r.args or {}).get("timings") or {}).items():
                    if isinstance(v, (int, float)):
                        per[f"{r.name}.{k}"].append(float(v))
        m["stage_median_s"] = {k: statistics.median(v) for k, v in sorted(per.items())}
        waits = defaultdict(list)
        for r in recs:
            if r.kind == "wait":
                waits[r.name].append(r.duration)
        m["lock_wait_median_s"] = {k: statistics.median(v) for k, v in sorted(waits.items())}
        m["lock_wait_total_s"] = {k: sum(v) for k, v in sorted(waits.items())}
        heads = [r for r in recs if r.kind == "stage" and r.name == "early_head"]
        m["early_fallbacks"] = sum(1 for r in heads if "fallback" in (r.args or {}))
        m["early_partitions"] = len(heads) - m["early_fallbacks"]
        return m

    # ---- exports -------------------------------------------------------------------------
    def chrome_trace(self):
        """The timeline as a Chrome-trace dict (``{"traceEvents": [...]}``; Perfetto and
        chrome://tracing read it): one process per device, one thread per worker, complete
        ("X") events in microseconds; lock holds enclose the stages they cover."""
        recs = [r for r in self.records() if r.kind != "queued"]
        ev = []
        seen = {(r.device, r.worker) for r in recs}
        for d in sorted({d for d, _ in seen}):
            ev.append({"name": "process_name", "ph": "M", "pid": d, "tid": 0,
                       "args": {"name": f"device {d}"}})
        for d, w in sorted(seen):
            label = self.workers.get((d, w), f"worker {w}")
            ev.append({"name": "thread_name", "ph": "M", "pid": d, "tid": w,
                       "args": {"name": label}})
        # longer intervals first at equal start: parents precede children
        for r in sorted(recs, key=lambda r: (r.t0, -(r.t1 - r.t0))):
            name = r.name if r.kind == "stage" else f"{r.kind} {r.name}"
            args = {"job": r.job, "partition": r.partition, "priority": r.priority}
            for k, v in (r.args or {}).items():
                args[k] = v
            ev.append({"name": name, "cat": r.kind, "ph": "X", "pid": r.device, "tid": r.worker,
                       "ts": round(r.t0 * 1e6, 3), "dur": round(max(0.0, r.duration) * 1e6, 3),
                       "args": args})
        return {"traceEvents": ev, "displayTimeUnit": "ms",
                "otherData": {"origin_epoch": self.origin_epoch}}

    def write_chrome_trace(self, path):
        """Write :meth:`chrome_trace` as JSON (``cuzk._io.atomic_write``)."""
        from .._io import atomic_write
        atomic_write(path, json.dumps(self.chrome_trace(), default=_json_default))
        return path

    def write_png(self, path, title=None):
        """A Gantt chart: one row per worker, stages coloured, lock holds shaded, lock waits
        hatched.  Needs matplotlib (``pip install cuzk[plot]``).

        Raises
        ------
        cuzk.BackendUnavailable
            matplotlib is not installed.
        """
        try:
            import matplotlib
            matplotlib.use("Agg", force=False)
            import matplotlib.pyplot as plt
            from matplotlib.patches import Patch
        except ImportError as e:
            from .._errors import BackendUnavailable
            raise BackendUnavailable("matplotlib", f"the PNG Gantt chart needs matplotlib "
                                                   f"(pip install cuzk[plot]): {e}") from None
        recs = [r for r in self.records() if r.kind in ("stage", "hold", "wait")]
        rows = sorted({(r.device, r.worker) for r in recs})
        ypos = {k: i for i, k in enumerate(rows)}
        colours = {"prepare": "#4e79a7", "upload": "#b07aa1", "run": "#e15759", "sync": "#f28e2b",
                   "finish": "#59a14f", "early_head": "#76b7b2", "early_rest": "#9c2f2f"}
        shade = {"device": "#bab0ac", "compute": "#ff9da7", "memory": "#9c755f"}
        fig, ax = plt.subplots(figsize=(12, 1.0 + 0.6 * max(1, len(rows))), dpi=100)
        for r in recs:
            y = ypos[(r.device, r.worker)]
            if r.kind == "hold":
                ax.broken_barh([(r.t0, r.duration)], (y - 0.45, 0.9),
                               facecolors=shade.get(r.name, "#cccccc"), alpha=0.35, zorder=1)
            elif r.kind == "wait":
                ax.broken_barh([(r.t0, r.duration)], (y - 0.1, 0.2), facecolors="none",
                               edgecolors="#555555", hatch="///", zorder=2)
            else:
                ax.broken_barh([(r.t0, r.duration)], (y - 0.3, 0.6),
                               facecolors=colours.get(r.name, "#76b7b2"), zorder=3)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels([self.workers.get(k, f"d{k[0]} w{k[1]}") for k in rows])
        ax.set_xlabel("host time (s)")
        ax.invert_yaxis()
        handles = [Patch(color=c, label=n) for n, c in colours.items()]
        handles += [Patch(color=c, alpha=0.35, label=f"{n} lock held") for n, c in shade.items()
                    if any(r.kind == "hold" and r.name == n for r in recs)]
        handles.append(Patch(facecolor="none", edgecolor="#555555", hatch="///",
                             label="lock wait"))
        # right of the axes, one column: below them it met the x label whatever the row count
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), ncol=1,
                  fontsize=8, frameon=False)
        if title:
            ax.set_title(title)
        fig.tight_layout()
        from .._io import atomic_write
        try:
            atomic_write(path, lambda f: fig.savefig(f, format="png", bbox_inches="tight"))
        finally:
            plt.close(fig)
        return path


def _json_default(o):
    try:
        import numpy as np
        if isinstance(o, np.generic):
            return o.item()
    except ImportError:
        pass
    return str(o)
