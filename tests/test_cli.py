"""The ``cuzk`` command line: exit codes (0 ok/valid, 1 invalid proof, 2 bad input with one line
naming the file and no traceback), the bellperson and snarkjs prove/verify paths, keygen, demo,
bench and kernels.  Runs in-process through ``cuzk._cli.main`` (fast) and once as a subprocess."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import find_snarkjs

from cuzk import _snarkjs as sj
from cuzk._cli import main

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data" / "snarkjs"
LOG_N = 8


def run(capsys, *argv):
    """main(argv) → (exit code, stdout, stderr)."""
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def assert_one_line_error(err, name):
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("cuzk: error:") and str(name) in lines[0], err
    assert "Traceback" not in err


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch):
    monkeypatch.delenv("CUZK_DEBUG", raising=False)


# ---------------------------------------------------------------------------------------------

def test_info(capsys):
    rc, out, _ = run(capsys, "info")
    assert rc == 0
    assert out.startswith("cuzk ") and "backends: cpu" in out and "kernel cache:" in out


def test_usage_error_exits_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["prove", "--backend", "tpu"])
    assert e.value.code == 2
    rc, _, err = run(capsys, "prove", "--params", "x.params")
    assert rc == 2 and "--assignment" in err


# ---------------------------------------------------------------------------------------------
# bellperson path: keygen → prove → verify

@pytest.fixture(scope="module")
def keydir(tmp_path_factory):
    d = tmp_path_factory.mktemp("keygen")
    assert main(["keygen", "--circuit", "porep-like", "--log-n", str(LOG_N), "--seed", "5",
                 "--out", str(d), "--threads", "2"]) == 0
    return d


@pytest.fixture(scope="module")
def proof_bin(keydir):
    p = keydir / "proof.bin"
    assert main(["prove", "--params", str(keydir / "circuit.params"),
                 "--assignment", str(keydir / "assignment.npz"), "--out", str(p),
                 "--backend", "cpu", "--verify"]) == 0
    return p


def test_keygen_writes_the_four_files(keydir):
    for f in ("circuit.params", "circuit.vk", "assignment.npz", "public.json"):
        assert (keydir / f).stat().st_size > 0, f
    assert not [p for p in keydir.iterdir() if ".tmp" in p.name]
    pub = json.loads((keydir / "public.json").read_text())
    assert isinstance(pub, list) and pub and all(isinstance(v, str) and v.isdigit() for v in pub)
    from cuzk._assignment import Assignment
    from cuzk._params import read_params
    from cuzk._prover import public_inputs
    pk = read_params(keydir / "circuit.params")
    asg = Assignment.load_npz(keydir / "assignment.npz")
    asg.validate(pk)
    assert public_inputs(asg) == [int(v) for v in pub]        # without the leading 1
    assert len(pub) == asg.inputs.shape[0] - 1
    assert pk.h.shape[0] == (1 << LOG_N) - 1


def test_prove_and_verify_bellperson(capsys, keydir, proof_bin):
    assert proof_bin.stat().st_size == 192
    rc, _, _ = run(capsys, "verify", "--vk", keydir / "circuit.vk", "--proof", proof_bin,
                   "--public", keydir / "public.json")
    assert rc == 0


def test_tampered_proof_and_wrong_public_exit_1(capsys, keydir, proof_bin, tmp_path):
    raw = proof_bin.read_bytes()
    bad = tmp_path / "bad.bin"
    bad.write_bytes(raw[:144] + raw[:48])                      # C := A, a valid point
    rc, _, _ = run(capsys, "verify", "--vk", keydir / "circuit.vk", "--proof", bad,
                   "--public", keydir / "public.json")
    assert rc == 1
    pub = [int(v) for v in json.loads((keydir / "public.json").read_text())]
    wrong = tmp_path / "public.json"
    sj.write_public_json(wrong, [(pub[0] + 1) % sj.R] + pub[1:])
    rc, _, _ = run(capsys, "verify", "--vk", keydir / "circuit.vk", "--proof", proof_bin,
                   "--public", wrong)
    assert rc == 1


def test_bad_files_exit_2_with_one_line(capsys, keydir, proof_bin, tmp_path):
    vk, pub = keydir / "circuit.vk", keydir / "public.json"
    # truncated parameters
    params = tmp_path / "trunc.params"
    params.write_bytes((keydir / "circuit.params").read_bytes()[:1000])
    rc, _, err = run(capsys, "prove", "--params", params, "--assignment",
                     keydir / "assignment.npz", "--out", tmp_path / "p.bin")
    assert rc == 2
    assert_one_line_error(err, params)
    assert not (tmp_path / "p.bin").exists()
    # proof of the wrong length
    short = tmp_path / "short.bin"
    short.write_bytes(proof_bin.read_bytes()[:100])
    rc, _, err = run(capsys, "verify", "--vk", vk, "--proof", short, "--public", pub)
    assert rc == 2
    assert_one_line_error(err, short)
    # public.json that is not JSON
    junk = tmp_path / "junk.json"
    junk.write_text("[1, 2")
    rc, _, err = run(capsys, "verify", "--vk", vk, "--proof", proof_bin, "--public", junk)
    assert rc == 2
    assert_one_line_error(err, junk)
    # a missing file
    missing = tmp_path / "nope.vk"
    rc, _, err = run(capsys, "verify", "--vk", missing, "--proof", proof_bin, "--public", pub)
    assert rc == 2
    assert_one_line_error(err, missing)
    # an assignment that does not fit the parameters (other size)
    other = tmp_path / "other"
    assert main(["keygen", "--log-n", str(LOG_N - 1), "--out", str(other)]) == 0
    capsys.readouterr()
    rc, _, err = run(capsys, "prove", "--params", keydir / "circuit.params", "--assignment",
                     other / "assignment.npz", "--out", tmp_path / "p.bin")
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_bad_file_through_a_subprocess(keydir, proof_bin, tmp_path):
    garbage = tmp_path / "garbage.vk"
    garbage.write_bytes(b"\x01" * 37)
    env = dict(os.environ)
    env.pop("CUZK_DEBUG", None)
    res = subprocess.run([sys.executable, "-m", "cuzk", "verify", "--vk", str(garbage),
                          "--proof", str(proof_bin), "--public", str(keydir / "public.json")],
                         capture_output=True, text=True, timeout=300, cwd=REPO, env=env)
    assert res.returncode == 2
    assert_one_line_error(res.stderr, garbage)
    res = subprocess.run([sys.executable, "-m", "cuzk", "verify", "--vk", str(keydir / "circuit.vk"),
                          "--proof", str(proof_bin), "--public", str(keydir / "public.json")],
                         capture_output=True, text=True, timeout=300, cwd=REPO, env=env)
    assert res.returncode == 0, res.stderr


# ---------------------------------------------------------------------------------------------
# snarkjs path

@pytest.mark.parametrize("circuit", ["mulchain", "rangecheck"])
def test_snarkjs_prove_and_verify(capsys, tmp_path, circuit):
    d = DATA / circuit
    proof, public = tmp_path / "proof.json", tmp_path / "public.json"
    rc, out, _ = run(capsys, "prove", "--zkey", d / "circuit.zkey", "--wtns", d / "witness.wtns",
                     "--proof", proof, "--public", public, "--backend", "cpu", "--verify")
    assert rc == 0 and "proof.json" in out
    assert json.loads(public.read_text()) == json.loads((d / "public.json").read_text())
    assert json.loads(proof.read_text())["curve"] == "bls12381"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["proof.json", "public.json"]
    vk = d / "verification_key.json"
    rc, _, _ = run(capsys, "verify", "--vk", vk, "--proof", proof, "--public", public)
    assert rc == 0
    wrong = tmp_path / "wrong.json"
    pub = sj.read_public_json(public)
    sj.write_public_json(wrong, [(pub[0] + 1) % sj.R] + pub[1:])
    rc, _, _ = run(capsys, "verify", "--vk", vk, "--proof", proof, "--public", wrong)
    assert rc == 1
    exe = find_snarkjs()
    if exe is None or shutil.which("node") is None:
        pytest.skip("snarkjs CLI or node not found (set CUZK_SNARKJS); cuzk's own checks passed")
    res = subprocess.run([exe, "groth16", "verify", str(vk), str(public), str(proof)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0 and "OK!" in res.stdout + res.stderr, res.stdout + res.stderr


def test_snarkjs_bad_inputs_exit_2(capsys, tmp_path):
    d = DATA / "mulchain"
    bad = tmp_path / "bad.zkey"
    bad.write_bytes((d / "circuit.zkey").read_bytes()[:500])
    args = ["--proof", tmp_path / "p.json", "--public", tmp_path / "q.json"]
    rc, _, err = run(capsys, "prove", "--zkey", bad, "--wtns", d / "witness.wtns", *args)
    assert rc == 2
    assert_one_line_error(err, bad)
    rc, _, err = run(capsys, "prove", "--zkey", d / "circuit.zkey",
                     "--wtns", DATA / "rangecheck" / "witness.wtns", *args)
    assert rc == 2 and "nVars" in err and "Traceback" not in err
    rc, _, err = run(capsys, "prove", "--zkey", d / "circuit.zkey", "--wtns", d / "witness.wtns")
    assert rc == 2 and "--proof" in err
    assert not (tmp_path / "p.json").exists() and not (tmp_path / "q.json").exists()


# ---------------------------------------------------------------------------------------------
# demo, bench, kernels

def test_demo_generates_once_then_uses_the_cache(capsys, tmp_path):
    cache = tmp_path / "cache"
    rc, out, err = run(capsys, "demo", "--log-n", LOG_N, "--backend", "cpu", "--cache-dir", cache)
    assert rc == 0, out + err
    assert "verify: OK" in out and "backend: cpu" in out and "total" in out
    assert "generating" in err
    entry = cache / f"{LOG_N}-0"
    assert sorted(p.name for p in entry.iterdir()) == sorted(
        ["circuit.params", "circuit.vk", "assignment.npz", "public.json"])
    assert [p.name for p in cache.iterdir()] == [entry.name]      # no temp dirs left
    rc, out, err = run(capsys, "demo", "--log-n", LOG_N, "--backend", "cpu", "--cache-dir", cache)
    assert rc == 0 and "verify: OK" in out and "generating" not in err


def test_demo_never_uses_a_partial_or_broken_cache_entry(capsys, tmp_path):
    from cuzk import _demo
    cache = tmp_path / "cache"
    entry = cache / f"{LOG_N}-0"
    entry.mkdir(parents=True)
    (entry / "circuit.params").write_bytes(b"partial")        # an interrupted writer
    (cache / f".tmp-{LOG_N}-0-zzz").mkdir()                      # a dead writer's temp dir
    path, generated = _demo.ensure_circuit(LOG_N, cache=cache, quiet=True)
    assert generated and Path(path) == entry
    assert (entry / "circuit.params").stat().st_size > 100
    # complete but corrupt: loading fails, the entry is regenerated once
    (entry / "circuit.vk").write_bytes(b"\x00" * 5)
    rc, out, err = run(capsys, "demo", "--log-n", LOG_N, "--backend", "cpu", "--cache-dir", cache)
    assert rc == 0 and "verify: OK" in out and "regenerating" in err


def test_bench_prints_a_table_and_json(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("CUZK_DEMO_CACHE", str(tmp_path / "cache"))
    j = tmp_path / "bench.json"
    rc, out, _ = run(capsys, "bench", "--log-n", LOG_N - 1, LOG_N, "--repeat", "2",
                     "--backend", "cpu", "--json", j)
    assert rc == 0
    lines = out.splitlines()
    head = next(ln for ln in lines if ln.split() and ln.split()[0] == "log_n")
    assert "total" in head.split() and "h" in head.split()
    rows = [ln.split() for ln in lines if ln.split() and ln.split()[0] in (str(LOG_N - 1), str(LOG_N))]
    assert len(rows) == 2
    doc = json.loads(j.read_text())
    assert [r["log_n"] for r in doc["results"]] == [LOG_N - 1, LOG_N]
    for r in doc["results"]:
        assert len(r["runs"]) == 2 and r["median"]["total"] > 0 and r["backend"] == "cpu"


def test_kernels_compile_lists_programs(capsys, tmp_path, monkeypatch):
    try:
        from cuzk._native import _nvrtc
        _nvrtc.version()
    except Exception as e:  # NVRTC is a hard dependency; without it this is an install defect
        pytest.fail(f"NVRTC unusable: {e}")
    monkeypatch.setenv("CUZK_CACHE_DIR", str(tmp_path / "kc"))
    rc, out, _ = run(capsys, "kernels")
    assert rc == 0
    names = [ln.strip() for ln in out.splitlines() if ln.strip()]
    assert names
    rc, out, _ = run(capsys, "kernels", "--compile", "--arch", "sm_90")
    assert rc == 0
    rows = out.strip().splitlines()
    assert rows[-1].startswith(f"{len(names)} programs for sm_90")
    assert {r.split()[0] for r in rows[:-1]} == set(names)
    assert all(r.split()[-1] == "compiled" for r in rows[:-1])
    rc, out, _ = run(capsys, "kernels", "--compile", "--arch", "sm_90")
    assert rc == 0 and all(r.split()[-1] == "cached" for r in out.strip().splitlines()[:-1])
