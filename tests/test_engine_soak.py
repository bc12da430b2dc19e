"""bench/bench_engine_soak.py on the CPU backend: tiny proofs, its JSON and verdict, the
growth rule, and a failing proof turning into exit status 1."""
import importlib.util
import itertools
import json
import os

import pytest

from cuzk._stages import stages_for
from engine_helpers import Wrapped, circuit, engine

_PATH = os.path.join(os.path.dirname(__file__), "..", "bench", "bench_engine_soak.py")


@pytest.fixture(scope="module")
def soak():
    spec = importlib.util.spec_from_file_location("bench_engine_soak", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_soak_main_cpu(soak, tmp_path, capsys):
    out = tmp_path / "soak.json"
    rc = soak.main(["--backend", "cpu", "--log-n", "8", "--proofs", "20", "--workers-per-gpu",
                    "2", "--lock-mode", "two-lock", "--thread-share", "shared",
                    "--sample-every", "5", "--threads", "2", "--json", str(out),
                    "--cache-dir", str(tmp_path / "cache"), "--quiet"])
    assert rc == 0
    text = capsys.readouterr().out
    last = text.strip().splitlines()[-1]
    assert last.startswith("verdict: flat (rss +") and "after 2 warm-up proofs" in last
    assert "20 of 20 proofs verified" in text
    doc = json.loads(out.read_text())
    for k, v in {"backend": "cpu", "log_n": 8, "proofs": 20, "workers_per_gpu": 2,
                 "lock_mode": "two-lock", "thread_share": "shared", "threads": 2,
                 "threads_per_worker": 2, "in_flight": 4, "sample_every": 5, "warmup": 2,
                 "ok": 20, "failed": 0, "completed": 20, "verdict": "flat",
                 "verdict_line": last, "errors": []}.items():
        assert doc[k] == v, k
    assert doc["constraints"] > 0 and doc["proofs_per_s"] > 0
    samples = doc["samples"]
    assert [s["proofs"] for s in samples] == [0, 2, 5, 10, 15, 20]
    assert [s["phase"] for s in samples] == ["start", "baseline", "stream", "stream", "stream",
                                            "end"]
    assert doc["baseline"] == samples[1] and doc["end"] == samples[-1]
    for s in samples:
        assert s["rss"] > 1 << 20 and s["pool_used"] is None and s["pool_reserved"] is None
    assert doc["growth_mib"]["rss"] == pytest.approx((samples[-1]["rss"] - samples[1]["rss"])
                                                     / (1 << 20))
    assert doc["growth_mib"]["pool_used"] is None and doc["flat"]["pool_used"] is None
    assert doc["threshold_mib"]["rss"] >= 64
    assert doc["peak_mib"]["rss"] * (1 << 20) == max(s["rss"] for s in samples)


def test_rss_bytes_is_the_status_figure(soak):
    with open("/proc/self/status") as f:
        kb = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    assert abs(soak.rss_bytes() - kb * 1024) < 16 << 20


def test_verdict_rule(soak):
    M = 1 << 20
    base = {"rss": 1000 * M, "pool_used": 10 * M, "pool_reserved": 10000 * M}
    flat = soak.verdict(base, {"rss": 1063 * M, "pool_used": 10 * M, "pool_reserved": 10199 * M})
    assert flat["verdict"] == "flat"
    assert flat["growth_mib"] == {"rss": 63, "pool_used": 0, "pool_reserved": 199}
    assert flat["threshold_mib"] == {"rss": 64, "pool_used": 64, "pool_reserved": 200}
    # 64 MiB is the floor; 2 % of a large value is the limit above it
    assert soak.verdict(base, dict(base, rss=1064 * M))["flat"]["rss"] is False
    grow = soak.verdict(base, dict(base, pool_reserved=10200 * M))
    assert grow["verdict"] == "growing" and grow["flat"]["pool_reserved"] is False
    assert soak.verdict(base, dict(base, rss=500 * M))["verdict"] == "flat"    # shrinking
    cpu = soak.verdict({"rss": M, "pool_used": None, "pool_reserved": None},
                       {"rss": 100 * M, "pool_used": None, "pool_reserved": None})
    assert cpu["verdict"] == "growing" and cpu["flat"]["pool_used"] is None
    line = soak.verdict_line(dict(cpu, warmup=3, end={"proofs": 30}))
    assert line.startswith("verdict: growing (rss +99.0 MiB >= 64.0)") and "pool" not in line


def test_failed_proof_is_counted(soak):
    pk, asg = circuit(4)
    n = itertools.count()
    st = Wrapped(stages_for("cpu", threads=1), fail={"finish-before": lambda a: next(n) == 6})
    with engine(workers_per_gpu=2, stages=lambda i: st, threads=1) as eng:
        key = eng.load(pk, progress=False)
        res = soak.run_soak(eng, key, asg, proofs=12, in_flight=3, sample_every=4)
    assert res["failed"] == 1 and res["ok"] == 11
    assert res["errors"] and res["errors"][0].startswith("Injected: finish-before")
    assert [s["proofs"] for s in res["samples"]] == [0, 2, 4, 8, 12]


def test_soak_main_exit_1_on_failure(soak, tmp_path, monkeypatch, capsys):
    calls = itertools.count()
    real = soak.run_soak

    def failing(eng, key, asg, *a, **kw):
        res = real(eng, key, asg, *a, **kw)
        if next(calls) == 0:
            res = dict(res, failed=1, ok=res["ok"] - 1, errors=["Injected: x"])
        return res
    monkeypatch.setattr(soak, "run_soak", failing)
    rc = soak.main(["--backend", "cpu", "--log-n", "6", "--proofs", "4", "--threads", "1",
                    "--workers-per-gpu", "1", "--cache-dir", str(tmp_path / "cache"),
                    "--quiet"])
    assert rc == 1
    assert "FAILED: 1 of 4 proofs (Injected: x)" in capsys.readouterr().out


def test_soak_rejects_bad_counts(soak):
    with pytest.raises(ValueError, match="--proofs"):
        soak.run_soak(None, None, None, proofs=1, in_flight=1, sample_every=1)
    with pytest.raises(ValueError, match="in_flight"):
        soak.run_soak(None, None, None, proofs=4, in_flight=0, sample_every=1)


@pytest.mark.parametrize("mode", ["narrow", "two-lock"])
def test_soak_thousand_proofs_cpu(soak, tmp_path, capsys, mode):
    """Issue 10's soak in CI: 1,000 verified small proofs through one engine; host RSS flat
    between the idle engine after the warm-up and the end (the verdict rule's threshold)."""
    out = tmp_path / "soak.json"
    rc = soak.main(["--backend", "cpu", "--log-n", "4", "--proofs", "1000", "--workers-per-gpu", "2",
                    "--lock-mode", mode, "--sample-every", "100", "--threads", "2", "--json", str(out),
                    "--cache-dir", str(tmp_path / "cache"), "--quiet"])
    assert rc == 0
    doc = json.loads(out.read_text())
    assert (doc["ok"], doc["failed"], doc["completed"]) == (1000, 0, 1000)
    assert doc["verdict"] == "flat" and doc["errors"] == []
    assert doc["growth_mib"]["rss"] < doc["threshold_mib"]["rss"]
