"""The engine's timeline: derived metrics on hand-made records (exact answers), the Chrome
trace and PNG exports of a real run, and the engine bench (cuzk bench --lock-mode ...)."""
import json

import pytest

from cuzk._engine import Timeline
from cuzk._engine._bench import (job_plan, parse_devices, parse_modes, parse_workers,
                                 wants_engine_bench)
from cuzk._engine._timeline import merge_intervals

from engine_helpers import TIMEOUT, engine, circuit


def _tl(parts):
    """A timeline from (device, worker, job, index, run, sync, kernel) tuples: run=(t0, t1)."""
    tl = Timeline()
    for d, w, j, i, (r0, r1), (s0, s1), kern in parts:
        tl.add("partition", "partition", d, w, j, i, 2, r0 - 0.01, s1 + 0.01, {"status": "ok"})
        tl.add("stage", "prepare", d, w, j, i, 2, r0 - 0.01, r0, {"timings": {"prep_msm": 0.004}})
        tl.add("stage", "run", d, w, j, i, 2, r0, r1)
        args = {"timings": {"gpu:region": kern}} if kern is not None else None
        tl.add("stage", "sync", d, w, j, i, 2, s0, s1)
        tl.add("stage", "finish", d, w, j, i, 2, s1, s1 + 0.01, args)
        tl.add("wait", "compute", d, w, j, i, 2, r0 - 0.002, r0)
    return tl


def test_records_waits_and_trace_values(tmp_path):
    """The timeline's small contracts: ``add`` returns the record, ``len``, ``as_dict`` and the
    repr name the interval, lock waits summed and their median per lock, and the Chrome trace
    writes NumPy scalars as numbers and any other value as its text (returning the path)."""
    import pathlib

    import numpy as np
    tl = Timeline()
    rec = tl.add("wait", "compute", 0, 1, 7, 2, 1, 0.5, 1.5)
    for t0, t1 in ((2.0, 5.0), (6.0, 8.0)):
        tl.add("wait", "compute", 0, 1, 7, 2, 1, t0, t1)
    tl.add("wait", "memory", 0, 0, 7, 3, 1, 0.0, 0.25)
    tl.add("stage", "run", 0, 1, 7, 2, 1, 1.5, 2.0,
           {"bytes": np.int64(5), "where": pathlib.Path("k")})
    assert len(tl) == 5 and tl.records("wait")[0] is rec
    assert rec.as_dict() == {"kind": "wait", "name": "compute", "device": 0, "worker": 1,
                             "job": 7, "partition": 2, "priority": 1, "t0": 0.5, "t1": 1.5,
                             "args": None}
    assert "wait:compute" in repr(rec) and "job 7/2" in repr(rec)
    m = tl.metrics()
    assert m["lock_wait_median_s"] == {"compute": 2.0, "memory": 0.25}
    assert m["lock_wait_total_s"] == {"compute": 6.0, "memory": 0.25}
    path = tmp_path / "t.json"
    assert tl.write_chrome_trace(str(path)) == str(path)
    events = json.loads(path.read_text())["traceEvents"]
    run = [e for e in events if e["name"] == "run"]
    assert run[0]["args"]["bytes"] == 5 and run[0]["args"]["where"] == "k"
    assert [(e["pid"], e["args"]["name"]) for e in events if e["name"] == "process_name"] == \
        [(0, "device 0")]


def test_merge_intervals():
    assert merge_intervals([(3, 4), (0, 1), (0.5, 2), (2, 2.5), (5, 5)]) == [(0, 2.5), (3, 4),
                                                                            (5, 5)]
    assert merge_intervals([]) == []


def test_metrics_exact():
    # device 0: regions [1, 2] and [2.02, 3] (gap 20 ms) and [3.2, 4] (gap 200 ms);
    # device 1: [1, 1.5] and [2.5, 4] (gap 1 s)
    tl = _tl([(0, 0, 1, 0, (1.0, 1.1), (1.1, 2.0), None),
              (0, 1, 1, 1, (2.02, 2.1), (2.1, 3.0), 0.5),
              (0, 0, 2, 0, (3.2, 3.3), (3.3, 4.0), None),
              (1, 0, 3, 0, (1.0, 1.2), (1.2, 1.5), None),
              (1, 0, 3, 1, (2.5, 2.6), (2.6, 4.0), None)])
    m = tl.metrics()
    wall = 4.01 - 0.99
    assert m["partitions"] == 5 and m["failed"] == 0 and m["devices"] == 2
    assert m["wall_s"] == pytest.approx(wall)
    assert m["partitions_per_s"] == pytest.approx(5 / wall)
    assert m["s_per_proof"] == pytest.approx(10 * wall / 5)
    eff0 = (1.0 + 0.98 + 0.8) / wall
    eff1 = (0.5 + 1.5) / wall
    assert m["gpu_efficiency"] == pytest.approx((eff0 + eff1) / 2)
    busy0 = (1.0 + 0.5 + 0.8) / wall                # the reported gpu:region replaces 0.98
    assert m["kernel_busy"] == pytest.approx((busy0 + eff1) / 2)
    # steady span: device 0 from 1.0 to 4.0, device 1 from 1.0 to 4.0 (fill and drain left out)
    assert m["steady_gpu_efficiency"] == pytest.approx(((1.0 + 0.98 + 0.8) / 3.0 + 2.0 / 3.0) / 2)
    assert m["steady_kernel_busy"] == pytest.approx(((1.0 + 0.5 + 0.8) / 3.0 + 2.0 / 3.0) / 2)
    # steady period: device 0's regions end at 2, 3, 4 (1 s each), device 1's at 1.5, 4 (2.5 s)
    assert m["steady_s_per_partition"] == pytest.approx(1 / (1 / 1.0 + 1 / 2.5))
    assert m["steady_s_per_proof"] == pytest.approx(10 / (1 / 1.0 + 1 / 2.5))
    assert m["gaps"]["lt_50ms"] == 1 and m["gaps"]["50_500ms"] == 1 and m["gaps"]["gt_500ms"] == 1
    assert m["gaps"]["total_s"] == pytest.approx(0.02 + 0.2 + 1.0)
    med = m["stage_median_s"]
    assert med["run"] == pytest.approx(0.1) and med["prepare.prep_msm"] == pytest.approx(0.004)
    assert m["lock_wait_total_s"]["compute"] == pytest.approx(5 * 0.002)
    assert Timeline().metrics()["partitions_per_s"] == 0.0
    assert Timeline().metrics()["steady_s_per_proof"] is None
    one = _tl([(0, 0, 1, 0, (1.0, 1.1), (1.1, 2.0), None)]).metrics()   # one region: no period
    assert one["steady_s_per_partition"] is None and one["s_per_partition"] is not None
    assert (m["early_partitions"], m["early_fallbacks"]) == (0, 0)


def test_metrics_exact_under_a_second():
    """The same figures for a run shorter than a second (small partitions): regions [0.1, 0.3]
    and [0.4, 0.6] on one device, partitions from 0.09 to 0.61."""
    tl = _tl([(0, 0, 1, 0, (0.1, 0.15), (0.15, 0.3), None),
              (0, 1, 1, 1, (0.4, 0.45), (0.45, 0.6), None)])
    m = tl.metrics()
    wall = 0.61 - 0.09
    assert m["wall_s"] == pytest.approx(wall)
    assert m["gpu_efficiency"] == pytest.approx(0.4 / wall)
    assert m["kernel_busy"] == pytest.approx(0.4 / wall)
    assert m["steady_gpu_efficiency"] == pytest.approx(0.4 / 0.5)
    assert m["steady_kernel_busy"] == pytest.approx(0.4 / 0.5)
    assert m["steady_s_per_partition"] == pytest.approx(0.3)       # ends at 0.3 and 0.6
    assert m["gaps"]["50_500ms"] == 1 and m["gaps"]["total_s"] == pytest.approx(0.1)


def test_early_plan_regions_start_after_the_abc_upload():
    """An early-plan partition's kernel region starts inside early_head, once validate and the
    a, b, c upload are done; an early_head that fell back starts none (its run does)."""
    tl = Timeline()
    tl.add("partition", "partition", 0, 0, 1, 0, 2, 0.9, 3.0, {"status": "ok"})
    tl.add("stage", "early_head", 0, 0, 1, 0, 2, 1.0, 1.5,
           {"timings": {"validate": 0.01, "upload": 0.3, "upload:abc": 0.19, "prep_msm": 0.2}})
    tl.add("stage", "early_rest", 0, 0, 1, 0, 2, 1.5, 1.6)
    tl.add("stage", "sync", 0, 0, 1, 0, 2, 1.6, 2.5)
    tl.add("partition", "partition", 0, 1, 1, 1, 2, 1.0, 4.0, {"status": "ok"})
    tl.add("stage", "early_head", 0, 1, 1, 1, 2, 1.0, 1.0, {"fallback": "injected"})
    tl.add("stage", "run", 0, 1, 1, 1, 2, 2.6, 2.7)
    tl.add("stage", "sync", 0, 1, 1, 1, 2, 2.7, 3.5)
    regions = tl.kernel_regions()
    assert [(a, b) for a, b, _ in regions[0]] == [(pytest.approx(1.2), 2.5), (2.6, 3.5)]
    m = tl.metrics()
    assert (m["early_partitions"], m["early_fallbacks"]) == (1, 1)


@pytest.fixture(scope="module")
def run_timeline():
    pk, asg = circuit(4)
    with engine("cpu", devices=2, workers_per_gpu=2, lock_mode="two-lock", threads=2) as eng:
        eng.submit(pk, [asg] * 6).result(TIMEOUT)
        eng.submit(pk, [asg] * 2, priority="critical").result(TIMEOUT)
        return eng.timeline


def test_engine_records(run_timeline):
    tl = run_timeline
    kinds = {r.kind for r in tl.records()}
    assert kinds == {"queued", "stage", "wait", "hold", "partition"}
    parts = tl.records("partition")
    assert len(parts) == 8 and all(r.args["status"] == "ok" for r in parts)
    for p in parts:                 # every stage of a partition lies inside its record
        st = [r for r in tl.records("stage") if (r.job, r.partition) == (p.job, p.partition)]
        assert [r.name for r in st] == ["prepare", "upload", "run", "sync", "finish"]
        assert all(p.t0 <= r.t0 <= r.t1 <= p.t1 for r in st)
        assert "prep_msm" in st[0].args["timings"] and "reserved_bytes" in st[1].args
        holds = {r.name: r for r in tl.records("hold") if (r.job, r.partition) ==
                 (p.job, p.partition)}
        # two-lock: prepare outside every lock, upload under memory, run + sync under compute
        assert st[0].t1 <= holds["memory"].t0
        assert holds["memory"].t0 <= st[1].t0 and st[1].t1 <= holds["memory"].t1
        assert holds["compute"].t0 <= st[2].t0 and st[3].t1 <= holds["compute"].t1
    # per device, compute holds never overlap (the interlock worked)
    for d in (0, 1):
        hs = sorted((r.t0, r.t1) for r in tl.records("hold") if r.device == d
                    and r.name == "compute")
        assert all(a[1] <= b[0] for a, b in zip(hs, hs[1:]))


def test_chrome_trace(run_timeline, tmp_path):
    path = tmp_path / "t.json"
    run_timeline.write_chrome_trace(str(path))
    doc = json.loads(path.read_text())
    ev = doc["traceEvents"]
    names = {e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == {"cpu:0 w0", "cpu:0 w1", "cpu:1 w0", "cpu:1 w1"}
    xs = [e for e in ev if e["ph"] == "X"]
    assert {e["name"] for e in xs} >= {"prepare", "run", "sync", "finish", "hold compute",
                                      "hold memory", "wait compute", "partition partition"}
    # complete events of one thread nest properly (what the trace viewers require)
    by_thread = {}
    for e in xs:
        by_thread.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_thread.values():
        stack = []
        for a, b in spans:          # already sorted by start, parents first
            while stack and stack[-1] <= a + 1e-3:
                stack.pop()
            assert not stack or b <= stack[-1] + 1e-3
            stack.append(b)


def test_png(run_timeline, tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "g.png"
    assert run_timeline.write_png(str(path), title="two-lock") == str(path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_bench_parsing():
    assert parse_modes("coarse,two_lock,coarse") == ["coarse", "two-lock"]
    assert parse_modes(None) == ["coarse", "narrow", "two-lock"]
    with pytest.raises(ValueError):
        parse_modes("coarse,fine")
    assert parse_workers("1,2,4") == [1, 2, 4]
    with pytest.raises(ValueError):
        parse_workers("0")
    assert parse_devices(None) == parse_devices("auto") == ["auto"]
    assert parse_devices("2") == [2] and parse_devices("1,2,1") == [1, 2]
    for bad in ("0", "1,x", ""):
        with pytest.raises(ValueError):
            parse_devices(bad)
    assert job_plan(25) == [("normal", 10), ("normal", 10), ("normal", 5)]
    assert job_plan(20, priority_mix=True) == [("normal", 10), ("critical", 1), ("high", 4),
                                               ("low", 2), ("normal", 3)]

    class A:
        pass
    a = A()
    a.log_n, a.partitions, a.priority_mix = [14, 16], None, False
    assert not wants_engine_bench(a)
    a.priority_mix = True
    assert wants_engine_bench(a)


def _row(mode, where, kept, k, pps, backend="cuda"):
    return {"mode": mode, "workers": 2, "thread_share": "adaptive", "devices": len(where), "backend": backend,
            "key_where": where, "key_kept": kept, "h_msm": [{"k": k, "c": 20} for _ in where],
            "log_n": 27, "partitions": 10, "partitions_per_s": pps, "s_per_partition": 1 / pps,
            "s_per_10_partitions": 10 / pps, "steady_s_per_10_partitions": 10 / pps, "gpu_efficiency": 0.9,
            "kernel_busy": 0.9, "steady_kernel_busy": 0.9, "gaps": {"lt_50ms": 0, "50_500ms": 9, "gt_500ms": 0},
            "verified": True, "bytes_match": True}


def test_key_summary_and_marked_ratio():
    """The bench table names each row's key placement, and a ratio against a coarse row whose key
    "auto" placed differently (an 80 GB card: resident for coarse, partly streamed for two-lock)
    is marked and explained; equal placements are not marked."""
    from cuzk._engine._bench import compare_to_coarse, format_engine_table, key_summary
    assert key_summary(_row("coarse", ["device"], [[]], 5, 1.0)) == "dev k5"
    assert key_summary(_row("two-lock", ["host"], [["h", "l"]], 1, 1.0)) == "part k1"
    assert key_summary(_row("two-lock", ["host"], [[]], 1, 1.0)) == "host k1"
    assert key_summary(_row("coarse", ["device", "host"], [[], []], 1, 1.0)) == "dev k1/host k1"
    assert key_summary(_row("coarse", ["device", "device"], [[], []], 2, 1.0)) == "dev k2"
    assert key_summary(_row("coarse", ["device"], [[]], 1, 1.0, backend="cpu")) == "-"
    coarse, two = _row("coarse", ["device"], [[]], 1, 0.62), _row("two-lock", ["host"], [["h"]], 1, 0.63)
    lone = dict(_row("narrow", ["device"], [[]], 1, 0.5), workers=3)      # no coarse row with 3 workers
    compare_to_coarse([coarse, two, lone])
    assert not coarse["coarse_key_differs"] and two["coarse_key_differs"] and not lone["coarse_key_differs"]
    assert lone["speedup_vs_coarse"] is None and abs(two["speedup_vs_coarse"] - 0.63 / 0.62) < 1e-12
    lines = format_engine_table([coarse, two, lone]).splitlines()
    assert "dev k1" in lines[2] and "1.00x " in lines[2] and "*" not in lines[2]
    assert "part k1" in lines[3] and "1.02x*" in lines[3]
    assert "*" not in lines[4]
    assert lines[-1].startswith("* against a coarse row whose key was placed differently")
    coarse2, same = _row("coarse", ["device"], [[]], 1, 0.62), _row("two-lock", ["device"], [[]], 1, 0.7)
    compare_to_coarse([coarse2, same])
    assert not same["coarse_key_differs"] and "*" not in format_engine_table([coarse2, same])


def test_bench_cli(tmp_path, capsys):
    from cuzk._cli import main
    out = tmp_path / "b.json"
    trace = tmp_path / "trace"
    rc = main(["bench", "--log-n", "4", "--partitions", "4", "--workers-per-gpu", "1,2",
               "--lock-mode", "coarse,narrow,two-lock", "--backend", "cpu", "--devices", "2",
               "--priority-mix", "--json", str(out), "--trace", str(trace),
               "--cache-dir", str(tmp_path / "cache"), "--threads", "2"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "vs coarse" in text and text.count("two-lock") == 2
    doc = json.loads(out.read_text())
    rows = doc["results"]
    assert len(rows) == 6
    for r in rows:
        assert r["verified"] and r["bytes_match"] and r["partitions"] == 4
        assert r["devices"] == 2 and r["backend"] == "cpu"
        for k in ("s_per_partition", "partitions_per_s", "gpu_efficiency", "gaps",
                  "speedup_vs_coarse", "coarse_key_differs"):
            assert k in r
        assert r["coarse_key_differs"] is False      # the CPU backend has no key placement
    assert {r["speedup_vs_coarse"] for r in rows if r["mode"] == "coarse"} == {1.0}
    files = sorted(p.name for p in trace.iterdir())
    assert "engine-lg4-narrow-w2.json" in files
    try:
        import matplotlib  # noqa: F401
        assert "engine-lg4-narrow-w2.png" in files
    except ImportError:
        pass


def test_bench_cli_device_counts(tmp_path, capsys):
    """``cuzk bench --devices 1,2``: each device count on the same partitions in one process
    (simulated devices on the CPU backend), the same bytes, speed-up vs coarse within a device
    count, and the throughput against the same configuration on the fewest devices."""
    from cuzk._cli import main
    out = tmp_path / "d.json"
    rc = main(["bench", "--log-n", "4", "--partitions", "4", "--workers-per-gpu", "1",
               "--lock-mode", "coarse,two-lock", "--backend", "cpu", "--devices", "1,2",
               "--json", str(out), "--trace", str(tmp_path / "t"),
               "--cache-dir", str(tmp_path / "cache"), "--threads", "2"])
    assert rc == 0
    assert "vs fewest dev" in capsys.readouterr().out
    rows = json.loads(out.read_text())["results"]
    assert [(r["devices"], r["mode"]) for r in rows] == [(1, "coarse"), (1, "two-lock"),
                                                         (2, "coarse"), (2, "two-lock")]
    assert all(r["verified"] and r["bytes_match"] for r in rows)
    assert len({r["sha256"] for r in rows}) == 1
    assert [r["speedup_vs_coarse"] == 1.0 for r in rows] == [True, False, True, False]
    assert [r["speedup_vs_fewest_devices"] == 1.0 for r in rows] == [True, True, False, False]
    for r in rows[2:]:
        base = rows[[0, 1][r["mode"] == "two-lock"]]
        assert r["speedup_vs_fewest_devices"] == pytest.approx(
            r["partitions_per_s"] / base["partitions_per_s"])
    names = sorted(p.name for p in (tmp_path / "t").iterdir() if p.suffix == ".json")
    assert names == ["engine-lg4-coarse-w1-d1.json", "engine-lg4-coarse-w1-d2.json",
                     "engine-lg4-two-lock-w1-d1.json", "engine-lg4-two-lock-w1-d2.json"]
