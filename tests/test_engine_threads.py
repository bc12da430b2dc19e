"""Engine(thread_share=...): how the workers' host stages share the one CPU pool (issue 10).

``split``: each worker's native calls get ``threads // workers``; ``shared``: each gets all
``threads`` (no per-worker budget when threads is None, i.e. the whole pool); ``adaptive``: all
``threads`` for a host stage that starts while no other worker is in one, else the split share,
and on an idle device one worker at a time in prepare/upload.  The figures
are checked where the native code sees them: ``_pool._resolve(ctx.threads)`` called from the
worker thread itself, so that a per-thread budget set there would show too.
"""
import os
import threading

import pytest

import cuzk
from cuzk._engine._engine import (DEFAULT_THREAD_SHARE, THREAD_SHARES, thread_share_arg,
                                  worker_threads)
from cuzk._native import _pool
from engine_helpers import TIMEOUT, FakeStages, circuit, engine, verify_all


def test_thread_share_arg():
    assert THREAD_SHARES == ("split", "shared", "adaptive")
    assert DEFAULT_THREAD_SHARE in THREAD_SHARES
    assert thread_share_arg("Shared ") == "shared"
    assert thread_share_arg("split") == "split"
    for bad in ("", "both", None, 1, True):
        with pytest.raises(ValueError, match="thread_share must be one of split, shared"):
            thread_share_arg(bad)


def test_worker_threads_rule():
    p = _pool.pool_threads()
    assert worker_threads("split", 8, 3) == 2
    assert worker_threads("split", 8, 8) == 1
    assert worker_threads("split", 1, 4) == 1            # at least one each
    assert worker_threads("split", None, 2) == max(1, p // 2)
    assert worker_threads("split", 0, 1) == p
    assert worker_threads("shared", 8, 3) == 8
    assert worker_threads("shared", None, 3) == 0        # 0: the whole pool, no budget
    assert worker_threads("adaptive", 8, 3) == 2         # its share when others are busy
    with pytest.raises(ValueError):
        worker_threads("split", -1, 2)
    with pytest.raises(ValueError):
        worker_threads("spread", 4, 2)


def test_engine_rejects_bad_thread_share():
    with pytest.raises(ValueError, match="thread_share"):
        cuzk.Engine("cpu", thread_share="half", stages=FakeStages())
    with pytest.raises(TypeError):                       # keyword-only
        cuzk.Engine("cpu", "auto", 2, "narrow", None, None, 2, True, "shared")


def _seen_threads(share, threads, workers, devices=1):
    """{worker thread name: _pool._resolve(ctx.threads) inside prepare}, the contexts' and the
    stage objects' ``threads``, and the status snapshot of an engine over FakeStages."""
    seen, lock = {}, threading.Lock()
    barrier = threading.Barrier(workers * devices, timeout=TIMEOUT)

    def on_prepare(part):
        n = _pool._resolve(part.ctx.threads)
        with lock:
            seen[threading.current_thread().name] = n
        barrier.wait()                   # every worker takes one partition

    stages = [FakeStages(on_prepare=on_prepare) for _ in range(devices)]
    pk, asg = circuit(4)
    with engine(devices=devices, workers_per_gpu=workers, stages=stages.__getitem__,
                threads=threads, thread_share=share, verify=False) as eng:
        futs = [eng.submit(pk, [asg]) for _ in range(workers * devices)]
        for f in futs:
            f.result(TIMEOUT)
        ctx_threads = {c.threads for dv in eng.devices for c in dv.contexts}
        st = eng.status()
    assert len(seen) == workers * devices
    return set(seen.values()), ctx_threads, st


@pytest.mark.parametrize("share,threads,workers,devices,want", [
    ("split", 4, 2, 1, 2),
    ("split", 6, 2, 3, 1),
    ("split", 3, 3, 1, 1),
    ("shared", 4, 2, 1, 4),
    ("shared", 6, 2, 3, 6),
])
def test_worker_budget_follows_policy(share, threads, workers, devices, want):
    seen, ctx_threads, st = _seen_threads(share, threads, workers, devices)
    assert seen == {want}
    assert ctx_threads == {want}
    assert st["thread_share"] == share and st["threads"] == threads
    assert st["threads_per_worker"] == want


def test_worker_budget_without_threads():
    p = _pool.pool_threads()
    seen, ctx_threads, st = _seen_threads("shared", None, 2)
    assert seen == {p} and ctx_threads == {0}            # the whole pool for each worker
    assert st["threads_per_worker"] == 0 and st["threads"] == 0
    seen, ctx_threads, st = _seen_threads("split", None, 2)
    assert seen == {max(1, p // 2)} and ctx_threads == {max(1, p // 2)}


def test_default_is_the_constant():
    with engine("cpu", workers_per_gpu=1, threads=1, stages=FakeStages()) as eng:
        assert eng.thread_share == DEFAULT_THREAD_SHARE
        assert eng.status()["thread_share"] == DEFAULT_THREAD_SHARE


@pytest.mark.parametrize("share", THREAD_SHARES)
def test_real_stages_follow_policy(share):
    """The CPU stage object built by the engine (stages_for) and its contexts carry the policy,
    and proofs under either policy are the bytes of cuzk.prove."""
    pk, asg = circuit(5)
    rs = [(3 + i, 5 + i) for i in range(4)]
    with engine("cpu", workers_per_gpu=2, threads=2, thread_share=share) as eng:
        want_t = 2 if share == "shared" else 1           # adaptive: the split share at rest
        assert eng.devices[0].stages.threads == want_t
        assert {c.threads for c in eng.devices[0].contexts} == {want_t}
        proof = eng.submit(pk, [asg] * 4, randomizers=rs).result(TIMEOUT)
        assert eng.status()["devices"][0]["pool"] is None      # no device memory pool on CPU
    want = b"".join(cuzk.prove(pk, asg, r, s, backend="cpu", threads=1) for r, s in rs)
    assert proof == want
    verify_all(pk, proof, [asg] * 4)


class _FakePool:
    def __init__(self, used, reserved, fail=False):
        self.used, self.reserved, self.fail = used, reserved, fail

    @property
    def used_bytes(self):
        if self.fail:
            raise ValueError("memory pool is closed")   # what a closed MemPool raises
        return self.used

    @property
    def reserved_bytes(self):
        return self.reserved


def test_status_reports_device_pool_bytes():
    a, b = FakeStages(), FakeStages()
    a.pool, b.pool = _FakePool(1 << 20, 3 << 20), _FakePool(0, 0, fail=True)
    stages = [a, b]
    with engine(devices=2, workers_per_gpu=1, stages=stages.__getitem__, threads=1) as eng:
        devs = eng.status()["devices"]
    assert devs[0]["pool"] == {"used": 1 << 20, "reserved": 3 << 20}
    assert devs[1]["pool"] is None                        # a failing pool never breaks status()


def test_parse_thread_shares():
    from cuzk._engine._bench import parse_thread_shares, wants_engine_bench
    assert parse_thread_shares(None) == [DEFAULT_THREAD_SHARE]
    assert parse_thread_shares("shared") == ["shared"]
    assert parse_thread_shares("split, shared,split") == ["split", "shared"]
    for bad in ("", ",", "split,half"):
        with pytest.raises(ValueError, match="--thread-share"):
            parse_thread_shares(bad)

    class A:
        log_n, partitions, thread_share = [14], None, "shared"
    assert wants_engine_bench(A())


def test_bench_cli_thread_share(tmp_path, capsys):
    import json
    from cuzk._cli import main
    out, trace = tmp_path / "b.json", tmp_path / "trace"
    rc = main(["bench", "--log-n", "4", "--partitions", "3", "--workers-per-gpu", "2",
               "--lock-mode", "coarse,narrow", "--thread-share", "split,shared",
               "--backend", "cpu", "--json", str(out), "--trace", str(trace),
               "--cache-dir", str(tmp_path / "cache"), "--threads", "2"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "share" in text.splitlines()[1] and text.count(" shared ") == 2
    doc = json.loads(out.read_text())
    assert doc["thread_shares"] == ["split", "shared"]
    rows = doc["results"]
    assert [(r["thread_share"], r["mode"]) for r in rows] == [
        ("split", "coarse"), ("split", "narrow"), ("shared", "coarse"), ("shared", "narrow")]
    assert [r["threads_per_worker"] for r in rows] == [1, 1, 2, 2]
    assert all(r["verified"] and r["bytes_match"] for r in rows)
    # each thread share is compared with its own coarse row
    assert [r["speedup_vs_coarse"] == 1.0 for r in rows] == [True, False, True, False]
    names = {p.name for p in trace.iterdir()}
    assert {"engine-lg4-narrow-w2-split.json", "engine-lg4-coarse-w2-shared.json"} <= names
    # one value: the names stay as before
    rc = main(["bench", "--log-n", "4", "--partitions", "2", "--workers-per-gpu", "1",
               "--lock-mode", "narrow", "--thread-share", "shared", "--backend", "cpu",
               "--trace", str(tmp_path / "t1"), "--cache-dir", str(tmp_path / "cache"),
               "--threads", "2"])
    assert rc == 0
    assert "engine-lg4-narrow-w1.json" in {p.name for p in (tmp_path / "t1").iterdir()}


def test_bench_cli_vram_budgets(tmp_path, capsys):
    """``--vram-budget A,B``: each budget benched in turn on the same inputs (one circuit), a
    table each, the budget in every JSON row; a bad value is a usage error."""
    import json
    from cuzk._cli import main
    from cuzk._engine._bench import parse_vram_budgets
    assert parse_vram_budgets(None) == [None]
    assert parse_vram_budgets(" 40, 52.5") == [40 << 30, int(52.5 * (1 << 30))]
    for bad in ("0", "-1", "x", ","):
        with pytest.raises(ValueError):
            parse_vram_budgets(bad)
    out = tmp_path / "v.json"
    rc = main(["bench", "--log-n", "4", "--partitions", "2", "--workers-per-gpu", "1",
               "--lock-mode", "narrow", "--backend", "cpu", "--vram-budget", "1,2", "--json", str(out),
               "--cache-dir", "memory", "--threads", "2", "--trace", str(tmp_path / "t")])
    assert rc == 0
    text = capsys.readouterr().out
    assert "vram budget 1 GiB:" in text and "vram budget 2 GiB:" in text
    rows = json.loads(out.read_text())["results"]
    assert [r["vram_budget"] for r in rows] == [1 << 30, 2 << 30]
    assert all(r["key_where"] == ["host"] and r["key_kept"] == [[]] for r in rows)   # CPU: host memory
    assert all(r["verified"] and r["bytes_match"] for r in rows)
    assert {"engine-lg4-narrow-w1-v1.json", "engine-lg4-narrow-w1-v2.json"} <= {
        p.name for p in (tmp_path / "t").iterdir()}
    rc = main(["bench", "--log-n", "4", "--backend", "cpu", "--vram-budget", "0",
               "--cache-dir", "memory"])
    assert rc == 2 and "--vram-budget" in capsys.readouterr().err


def test_bench_cli_bad_thread_share(tmp_path, capsys):
    from cuzk._cli import main
    rc = main(["bench", "--log-n", "4", "--thread-share", "split,half", "--backend", "cpu",
               "--cache-dir", str(tmp_path / "cache")])
    assert rc == 2
    assert "--thread-share" in capsys.readouterr().err


def test_bench_cli_cache_memory_writes_nothing(tmp_path, capsys, monkeypatch):
    """``--cache-dir memory``: the circuit is made in memory (no .params on disk, for 2^27's
    44 GiB) and proves the same bytes as the cached circuit of the same size and seed."""
    import json
    from cuzk._cli import main
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CUZK_DEMO_CACHE", str(tmp_path / "default-cache"))
    args = ["bench", "--log-n", "4", "--partitions", "2", "--workers-per-gpu", "1", "--lock-mode", "narrow",
            "--backend", "cpu", "--threads", "2"]
    rc = main(args + ["--cache-dir", "memory", "--json", str(tmp_path / "m.json")])
    assert rc == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]      # nothing else written
    rc = main(args + ["--cache-dir", str(tmp_path / "c"), "--json", str(tmp_path / "c.json")])
    assert rc == 0
    sha = [json.loads((tmp_path / f).read_text())["results"][0]["sha256"] for f in ("m.json", "c.json")]
    assert sha[0] == sha[1]


def test_parse_stage_options():
    from cuzk._stages import STAGE_OPTIONS, parse_stage_options
    assert parse_stage_options("") == {}
    assert parse_stage_options(" precompute=2, h-window=20 ,b_g2=gpu") == {
        "precompute": 2, "h_window": 20, "b_g2": "gpu"}
    assert set(STAGE_OPTIONS) == {"precompute", "h_window", "b_g2", "streams", "early_h",
                                  "abc_scratch", "ones_kind", "row_check", "share_sort", "side_scratch",
                                  "stream_chunk", "stream_slots", "key_where", "h_tables", "split_side",
                                  "h_buffers", "c_upload", "pool_deps"}
    assert parse_stage_options("key_where=Host") == {"key_where": "host"}
    assert parse_stage_options("pool_deps=0") == {"pool_deps": False}
    assert parse_stage_options("h_buffers=2") == {"h_buffers": 2}
    assert parse_stage_options("c_upload=RING") == {"c_upload": "ring"}
    with pytest.raises(ValueError, match="c_upload"):
        parse_stage_options("c_upload=copy")
    assert parse_stage_options("h_buffers=Auto") == {"h_buffers": "auto"}
    for bad in ("h_buffers=1", "h_buffers=5", "h_in_abc=1"):
        with pytest.raises(ValueError):
            parse_stage_options(bad)
    assert parse_stage_options("h_tables=Deep,split_side=1") == {"h_tables": "deep", "split_side": True}
    assert parse_stage_options("stream_chunk=268435456,stream-slots=3") == {"stream_chunk": 1 << 28,
                                                                           "stream_slots": 3}
    assert parse_stage_options("ones_kind=Balanced,ones-kind=auto") == {"ones_kind": "auto"}
    assert parse_stage_options("share_sort=0") == {"share_sort": False}
    assert parse_stage_options("side_scratch=0,ones_kind=affine") == {"side_scratch": False,
                                                                      "ones_kind": "affine"}
    assert parse_stage_options("streams=2") == {"streams": 2}
    assert parse_stage_options("early_h=0,early-h=yes") == {"early_h": True}
    assert parse_stage_options("early_h=off") == {"early_h": False}
    for bad, why in (("precompute", "not one of"), ("k=2", "not one of"), ("precompute=two", "not int"),
                     ("streams=3", "not 1 or 2"), ("streams=x", "not 1 or 2"), ("early_h=2", "not 0 or 1"),
                     ("ones_kind=fast", "not one of auto/xyzz/affine/balanced"),
                     ("row_check=never", "not one of beside/on_failure"),
                     ("key_where=gpu", "not one of auto/device/host"),
                     ("h_tables=half", "not one of auto/full/deep"), ("split_side=2", "not 0 or 1")):
        with pytest.raises(ValueError, match=why):
            parse_stage_options(bad)


def test_ones_kinds_are_the_batch_kernels():
    """The stage option's kernel names (written in _stages._base so that the CPU path need not
    import the CUDA front end) are cuzk._cuda_batch.KINDS, plus "auto"."""
    from cuzk import _cuda_batch
    from cuzk._stages._base import ONES_KINDS
    assert ONES_KINDS == ("auto",) + _cuda_batch.KINDS


def test_engine_passes_stage_options_to_every_device(monkeypatch):
    """Engine(stage_options=...) reaches stages_for for every device; the CPU backend refuses them."""
    import cuzk
    import cuzk._stages as stages_mod
    from cuzk._stages import CpuStages
    with pytest.raises(ValueError, match="CUDA options"):
        cuzk.Engine(backend="cpu", stage_options={"precompute": 2})
    seen = []

    def fake_stages_for(backend, threads=None, device=None, **options):
        seen.append(options)
        return CpuStages(threads)
    monkeypatch.setattr(stages_mod, "stages_for", fake_stages_for)
    with cuzk.Engine(backend="cpu", devices=2, workers_per_gpu=1, threads=2,
                     stage_options={"precompute": 2, "h_window": 20}):
        pass
    assert seen == [{"precompute": 2, "h_window": 20}] * 2


def test_bench_cli_stage_options_errors(tmp_path, capsys):
    from cuzk._cli import main
    base = ["bench", "--log-n", "4", "--partitions", "1", "--backend", "cpu", "--cache-dir", "memory"]
    assert main(base + ["--stage-options", "precompute=2"]) == 2
    assert "CUDA options" in capsys.readouterr().err
    assert main(base + ["--stage-options", "warp=9"]) == 2
    assert "not one of" in capsys.readouterr().err


def test_bench_cli_single(tmp_path, capsys):
    """``--single N``: N partitions through cuzk.prove's path after the engine rows (same inputs and
    randomizers: the first single proof's bytes are the engine's first partition's); ``--lock-mode
    none`` runs only those; ``none`` without ``--single`` is refused."""
    import json
    from cuzk._cli import main
    base = ["bench", "--log-n", "4", "--partitions", "2", "--workers-per-gpu", "1", "--backend", "cpu",
            "--threads", "2", "--cache-dir", "memory"]
    rc = main(base + ["--lock-mode", "narrow", "--single", "2", "--json", str(tmp_path / "a.json")])
    out = capsys.readouterr().out
    assert rc == 0 and "cuzk.prove's path" in out
    doc = json.loads((tmp_path / "a.json").read_text())
    (row,) = doc["single"]
    assert row["path"] == "cpu" and row["runs"] == 2 and row["verified"]
    assert row["wall_median_s"] > 0 and row["stage_median_s"]["prep_msm"] >= 0
    assert isinstance(row["host_extra_bytes"], int) and row["host_extra_bytes"] >= 0
    assert row["host_staging_bytes"] == 0 and "host+ GiB" in out     # the CPU has no ring
    assert len(doc["results"]) == 1
    for r in (row, doc["results"][0]):     # the host's memory as each row started (Linux: both known)
        host = r["host_at_start"]
        assert 0 < host["rss_bytes"] and 0 < host["available_bytes"] < os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    rc = main(base + ["--lock-mode", "none", "--single", "2", "--json", str(tmp_path / "b.json")])
    doc2 = json.loads((tmp_path / "b.json").read_text())
    assert rc == 0 and doc2["results"] == [] and doc2["single"][0]["sha256"] == row["sha256"]
    assert main(base + ["--lock-mode", "none"]) == 2
    assert "--single" in capsys.readouterr().err


def test_bench_cli_makes_the_circuit_once(monkeypatch, capsys):
    """The engine rows and the --single rows of one size share one circuit: with --cache-dir memory
    (2^27: minutes to make) it is generated once, not once per bench (the H200 run of session 6
    lost its engine table to a second generation past the time limit)."""
    import cuzk._demo as demo
    from cuzk._cli import main
    calls = []
    real = demo.generate_circuit

    def counting(*a, **kw):
        calls.append(a[0] if a else kw.get("log_n"))
        return real(*a, **kw)
    monkeypatch.setattr(demo, "generate_circuit", counting)
    rc = main(["bench", "--log-n", "4", "--partitions", "1", "--workers-per-gpu", "1", "--lock-mode", "narrow",
               "--backend", "cpu", "--threads", "2", "--cache-dir", "memory", "--single", "1"])
    err = capsys.readouterr().err
    assert rc == 0 and calls == [4]
    assert "engine-lg4-narrow-w1: " in err and "s/partition" in err      # printed as it finishes


class _HostLog(FakeStages):
    """FakeStages that logs, at every prepare, the threads it got (``_pool._resolve``) and how
    many partitions were then in prepare/upload (from prepare's start to upload's end) and in a
    region (from run's start to finish's start: it covers the engine's run + sync).  ``hold``:
    an Event the first partition's finish waits for."""

    def __init__(self, nap=0.05, hold=None):
        super().__init__(on_prepare=self._prep)
        self.nap, self.hold = nap, hold
        self.mu = threading.Lock()
        self.host = self.region = 0
        self.log = []                    # (threads, others in prepare/upload, in region)
        self.finishes = 0

    def _prep(self, part):
        with self.mu:
            self.log.append((_pool._resolve(part.ctx.threads), self.host, self.region))
            self.host += 1
        threading.Event().wait(self.nap)

    def upload(self, part):
        super().upload(part)
        threading.Event().wait(self.nap)
        with self.mu:
            self.host -= 1

    def run(self, part):
        with self.mu:
            self.region += 1
        return super().run(part)

    def finish(self, part, verify=True):
        with self.mu:
            self.region -= 1
            first = self.finishes == 0
            self.finishes += 1
        if first and self.hold is not None:
            assert self.hold.wait(TIMEOUT)
        return super().finish(part, verify)


@pytest.mark.parametrize("mode", ["narrow", "two-lock", "coarse"])
def test_adaptive_one_host_stage_at_a_time_on_an_idle_device(mode):
    """adaptive: no prepare starts while another partition is in prepare/upload and no region
    runs; the first partition prepares on every thread.  split (the control, same timing): both workers
    prepare at once at the start, with half the threads each."""
    pk, asg = circuit(4)
    for share in ("adaptive", "split"):
        st = _HostLog()
        with engine(workers_per_gpu=2, stages=st, threads=4, thread_share=share,
                    lock_mode=mode, verify=False) as eng:
            eng.submit(pk, [asg] * 6).result(TIMEOUT)
            if share == "adaptive":
                waits = [r for r in eng.timeline.records() if r.kind == "wait" and r.name == "host"]
        assert len(st.log) == 6
        clash = [e for e in st.log if e[1] > 0 and e[2] == 0]
        if share == "adaptive":
            assert clash == [], st.log
            assert st.log[0][0] == 4, st.log          # the first partition: every thread
            if mode != "coarse":
                assert waits, "the second worker waited for the first's upload"
        elif mode != "coarse":
            assert clash, "the control must show two host stages at once on an idle device"
            assert {t for t, _, _ in st.log} == {2}


def test_adaptive_lone_worker_never_waits_at_the_host_gate():
    """adaptive with one worker per device: the host gate never has another worker to wait
    for, so the timeline holds no "host" wait (a wait is recorded only when one happened)."""
    pk, asg = circuit(4)
    with engine(workers_per_gpu=1, stages=_HostLog(), threads=2, thread_share="adaptive",
                verify=False) as eng:
        eng.submit(pk, [asg] * 3).result(TIMEOUT)
        waits = [r for r in eng.timeline.records() if r.kind == "wait" and r.name == "host"]
    assert waits == []


def test_adaptive_splits_threads_beside_another_host_stage():
    """adaptive: a prepare that starts while another worker is in its finish (a host stage) gets
    the split share; a lone partition gets every thread."""
    pk, asg = circuit(4)
    hold = threading.Event()
    st = _HostLog(nap=0.0, hold=hold)
    with engine(workers_per_gpu=2, stages=st, threads=4, thread_share="adaptive",
                verify=False) as eng:
        f1 = eng.submit(pk, [asg])
        for _ in range(int(TIMEOUT / 0.01)):     # the first partition is in its finish
            if st.finishes:
                break
            threading.Event().wait(0.01)
        f2 = eng.submit(pk, [asg])
        for _ in range(int(TIMEOUT / 0.01)):
            if len(st.log) == 2:
                break
            threading.Event().wait(0.01)
        hold.set()
        f1.result(TIMEOUT)
        f2.result(TIMEOUT)
    assert [t for t, _, _ in st.log] == [4, 2], st.log


def test_rss_peak_sees_a_transient_allocation():
    """RssPeak: memory allocated and freed inside the block counts (its peak), memory that was
    there before does not."""
    import numpy as np
    from cuzk._engine._bench import RssPeak
    before = np.ones(32 << 20, np.uint8)          # resident before the block: not counted
    with RssPeak(every=0.001) as p:
        tmp = np.ones(96 << 20, np.uint8)          # touched: resident
        threading.Event().wait(0.02)
        del tmp
    assert p.extra is not None and p.extra >= 64 << 20, p.extra
    with RssPeak() as q:
        pass
    assert q.extra is not None and q.extra < 32 << 20
    del before


def test_parse_stage_option_sets():
    from cuzk._engine._bench import parse_stage_option_sets
    assert parse_stage_option_sets(None) == [{}] and parse_stage_option_sets("") == [{}]
    assert parse_stage_option_sets("streams=1;streams=2,precompute=2") == [
        {"streams": 1}, {"streams": 2, "precompute": 2}]
    with pytest.raises(ValueError, match="not one of"):
        parse_stage_option_sets("streams=1;warp=9")


def test_bench_cli_option_sets_bench_each(tmp_path, capsys):
    """Several ``--stage-options`` sets (here two empty ones: the CPU backend takes no options)
    bench every configuration once per set on the same inputs: one table per set, rows and
    single rows tagged per set, and the bytes of all of them equal."""
    import json
    from cuzk._cli import main
    rc = main(["bench", "--log-n", "4", "--partitions", "2", "--workers-per-gpu", "1", "--backend",
               "cpu", "--threads", "2", "--cache-dir", "memory", "--lock-mode", "narrow",
               "--single", "1", "--stage-options", ";", "--json", str(tmp_path / "b.json")])
    cap = capsys.readouterr()
    assert rc == 0
    assert "stage options o0" in cap.out and "stage options o1" in cap.out
    assert "engine-lg4-narrow-w1-o1" in cap.err and "single-lg4-cpu-o1" in cap.err
    doc = json.loads((tmp_path / "b.json").read_text())
    assert len(doc["results"]) == 2 and len(doc["single"]) == 2
    assert all(r["verified"] and r["bytes_match"] for r in doc["results"])
    assert len({r["sha256"] for r in doc["results"]}) == 1
