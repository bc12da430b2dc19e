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
from cuzk._demo import entry_name

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


def test_mixed_forms_and_bad_snarkjs_proofs_exit_2(capsys, keydir, tmp_path):
    """Options of the other prove form, a directory given as a file, two --public files for a
    snarkjs proof and a snarkjs proof whose point is off the curve: exit 2, one line naming
    the option or file, nothing written."""
    d = DATA / "mulchain"
    out = tmp_path / "p.bin"
    rc, _, err = run(capsys, "prove", "--params", keydir / "circuit.params", "--assignment",
                     keydir / "assignment.npz", "--out", out, "--proof", tmp_path / "x.json")
    assert rc == 2 and "--proof/--public belong to the snarkjs form" in err
    rc, _, err = run(capsys, "prove", "--zkey", d / "circuit.zkey", "--wtns", d / "witness.wtns",
                     "--proof", tmp_path / "p.json", "--public", tmp_path / "q.json",
                     "--params", keydir / "circuit.params")
    assert rc == 2 and "--params/--assignment/--out belong to the bellperson form" in err
    rc, _, err = run(capsys, "prove", "--params", tmp_path, "--assignment",
                     keydir / "assignment.npz", "--out", out)
    assert rc == 2 and "is a directory" in err
    assert_one_line_error(err, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    proof, public = tmp_path / "proof.json", tmp_path / "public.json"
    assert main(["prove", "--zkey", str(d / "circuit.zkey"), "--wtns", str(d / "witness.wtns"),
                 "--proof", str(proof), "--public", str(public), "--backend", "cpu"]) == 0
    capsys.readouterr()
    vk = d / "verification_key.json"
    rc, _, err = run(capsys, "verify", "--vk", vk, "--proof", proof, "--public", public, public)
    assert rc == 2 and "a snarkjs proof takes one --public file, got 2" in err
    doc = json.loads(proof.read_text())
    doc["pi_a"][1] = str((int(doc["pi_a"][1]) + 1) % sj.Q)     # y + 1: off the curve
    off = tmp_path / "off.json"
    off.write_text(json.dumps(doc))
    rc, _, err = run(capsys, "verify", "--vk", vk, "--proof", off, "--public", public)
    assert rc == 2
    assert_one_line_error(err, off)


# ---------------------------------------------------------------------------------------------
# demo, bench, kernels

def test_demo_generates_once_then_uses_the_cache(capsys, tmp_path):
    cache = tmp_path / "cache"
    rc, out, err = run(capsys, "demo", "--log-n", LOG_N, "--backend", "cpu", "--cache-dir", cache)
    assert rc == 0, out + err
    assert "verify: OK" in out and "backend: cpu" in out and "total" in out
    assert "generating" in err
    entry = cache / entry_name(LOG_N)
    assert sorted(p.name for p in entry.iterdir()) == sorted(
        ["circuit.params", "circuit.vk", "assignment.npz", "public.json"])
    assert [p.name for p in cache.iterdir()] == [entry.name]      # no temp dirs left
    rc, out, err = run(capsys, "demo", "--log-n", LOG_N, "--backend", "cpu", "--cache-dir", cache)
    assert rc == 0 and "verify: OK" in out and "generating" not in err


def test_demo_never_uses_a_partial_or_broken_cache_entry(capsys, tmp_path):
    from cuzk import _demo
    cache = tmp_path / "cache"
    entry = cache / entry_name(LOG_N)
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


# ---------------------------------------------------------------------------------------------
# issue 12: what a prover engineer sees (each test failed before the fix)

PROVE_ARGS = ("--backend", "cpu", "--threads", "2")


def _prove_args(keydir, out, *asg):
    asg = asg or (keydir / "assignment.npz",)
    return ["prove", "--params", keydir / "circuit.params", "--assignment", *asg,
            "--out", out, *PROVE_ARGS]


def _left_over(d):
    return sorted(p.name for p in Path(d).iterdir() if ".tmp" in p.name or "probe" in p.name)


def test_prove_self_verifies_by_default_and_says_where_it_ran(capsys, keydir, tmp_path):
    out = tmp_path / "p.bin"
    rc, stdout, _ = run(capsys, *_prove_args(keydir, out))
    assert rc == 0 and out.stat().st_size == 192
    assert "verified: OK" in stdout and "backend: cpu" in stdout and "(cpu)" not in stdout
    rc, stdout, _ = run(capsys, *_prove_args(keydir, out), "--no-verify")
    assert rc == 0 and "not verified (--no-verify)" in stdout
    rc, stdout, _ = run(capsys, *_prove_args(keydir, out), "--verify")     # old flag: no-op
    assert rc == 0 and "verified: OK" in stdout


def test_prove_passes_verify_and_reports_device(capsys, keydir, tmp_path, monkeypatch):
    import cuzk._prover as prover
    seen = {}

    def fake(pk, assignments, *, backend, device, threads, verify, timings):
        seen["verify"], seen["n"] = verify, len(list(assignments))
        timings.update(backend="cuda", device="NVIDIA H200 (device 0)")
        return b"\x00" * 192 * seen["n"]
    monkeypatch.setattr(prover, "prove_partitions", fake)
    rc, stdout, _ = run(capsys, *_prove_args(keydir, tmp_path / "p.bin"))
    assert rc == 0 and seen == {"verify": True, "n": 1}
    assert "backend: cuda, device: NVIDIA H200 (device 0)" in stdout
    run(capsys, *_prove_args(keydir, tmp_path / "p.bin"), "--no-verify")
    assert seen["verify"] is False


def test_failed_self_verification_exits_1_and_writes_nothing(capsys, keydir, tmp_path,
                                                            monkeypatch):
    import cuzk._prover as prover
    from cuzk import ProofVerificationError
    msg = "the assignment does not satisfy the circuit (a∘b = c holds, so check aux / the key)"

    def fake(*a, **kw):
        raise ProofVerificationError(msg)
    monkeypatch.setattr(prover, "prove_partitions", fake)
    out = tmp_path / "p.bin"
    rc, _, err = run(capsys, *_prove_args(keydir, out))
    assert rc == 1 and msg in err and not out.exists()
    assert_one_line_error(err, "assignment does not satisfy")


@pytest.mark.parametrize("exc", ["cuda", "nvrtc", "backend"])
def test_device_and_compiler_errors_exit_3(capsys, keydir, tmp_path, monkeypatch, exc):
    import cuzk._prover as prover
    from cuzk import BackendUnavailable, CudaError, NvrtcError
    e = {"cuda": CudaError("cuLaunchKernel", 700, "CUDA_ERROR_ILLEGAL_ADDRESS"),
         "nvrtc": NvrtcError("nvrtcCompileProgram", 6, "msm.cu(1): error"),
         "backend": BackendUnavailable("cuda", "no CUDA device")}[exc]

    def fake(*a, **kw):
        raise e
    monkeypatch.setattr(prover, "prove_partitions", fake)
    rc, _, err = run(capsys, *_prove_args(keydir, tmp_path / "p.bin"))
    assert rc == 3 and "Traceback" not in err and not (tmp_path / "p.bin").exists()


def test_multi_partition_prove_and_verify(capsys, keydir, tmp_path):
    asg, pub, vk = keydir / "assignment.npz", keydir / "public.json", keydir / "circuit.vk"
    out = tmp_path / "p.bin"
    rc, stdout, _ = run(capsys, *_prove_args(keydir, out, asg, asg))
    assert rc == 0 and out.stat().st_size == 384 and "2 partitions" in stdout
    raw = out.read_bytes()
    assert raw[:192] != raw[192:]                       # fresh randomizers per partition
    rc, stdout, _ = run(capsys, "verify", "--vk", vk, "--proof", out, "--public", pub, pub)
    assert rc == 0 and "all 2 partition proofs are valid" in stdout
    bad = tmp_path / "bad.bin"
    bad.write_bytes(raw[:192] + raw[192:336] + raw[192:240])      # partition 1: C := A
    rc, stdout, _ = run(capsys, "verify", "--vk", vk, "--proof", bad, "--public", pub, pub)
    assert rc == 1 and "partition 1 of 2" in stdout
    # before: "got 193 bytes" for a 384-byte file; now the real count, and what was expected
    rc, _, err = run(capsys, "verify", "--vk", vk, "--proof", out, "--public", pub)
    assert rc == 2 and "got 384 bytes" in err and "192 = 192 bytes" in err
    assert_one_line_error(err, out)
    odd = tmp_path / "odd.bin"
    odd.write_bytes(raw + b"\x00")
    rc, _, err = run(capsys, "verify", "--vk", vk, "--proof", odd, "--public", pub, pub)
    assert rc == 2 and "got 385 bytes" in err and "at offset 384" in err


def test_decode_proofs_is_public():
    import cuzk
    assert "decode_proofs" in cuzk.__all__ and cuzk.decode_proofs is not None


def test_output_paths_checked_before_any_work(capsys, keydir, tmp_path, monkeypatch):
    import cuzk._params as params

    def no_work(*a, **kw):
        raise AssertionError("the key was loaded before --out was checked")
    monkeypatch.setattr(params, "read_params", no_work)
    missing_dir = tmp_path / "nodir" / "proof.bin"
    rc, _, err = run(capsys, *_prove_args(keydir, missing_dir))
    assert rc == 2 and "no such directory" in err
    assert_one_line_error(err, missing_dir)
    a_dir = tmp_path / "outdir"
    a_dir.mkdir()
    rc, _, err = run(capsys, *_prove_args(keydir, a_dir))
    assert rc == 2 and "is a directory" in err and ".tmp" not in err
    assert_one_line_error(err, a_dir)
    assert list(a_dir.iterdir()) == [] and _left_over(tmp_path) == []
    # snarkjs form and bench --json: same checks
    d = DATA / "mulchain"
    rc, _, err = run(capsys, "prove", "--zkey", d / "circuit.zkey", "--wtns", d / "witness.wtns",
                     "--proof", missing_dir, "--public", tmp_path / "public.json")
    assert rc == 2 and "no such directory" in err and not (tmp_path / "public.json").exists()
    rc, _, err = run(capsys, "bench", "--log-n", "4", "--json", missing_dir)
    assert rc == 2 and "no such directory" in err


def test_unwritable_output_dir(capsys, keydir, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        try:
            (ro / "probe").write_bytes(b"")
            pytest.skip("this user can write into a 0500 directory (root): no capability")
        except PermissionError:
            pass
        rc, _, err = run(capsys, *_prove_args(keydir, ro / "p.bin"))
        assert rc == 2 and "cannot write" in err and ".tmp" not in err
        assert_one_line_error(err, ro / "p.bin")
        assert list(ro.iterdir()) == []
    finally:
        ro.chmod(0o700)


def test_atomic_write_leaves_nothing_on_failure(tmp_path, monkeypatch):
    from cuzk import _io
    target = tmp_path / "proof.bin"
    _io.atomic_write(target, b"old")

    def boom(src, dst):
        raise OSError(28, "No space left on device", src)
    monkeypatch.setattr(_io.os, "replace", boom)
    with pytest.raises(OSError) as ei:
        _io.atomic_write(target, b"new")
    assert ei.value.filename == str(target)                 # never the temp name
    assert target.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["proof.bin"]


@pytest.mark.parametrize("which", ["params", "assignment", "assignment2", "zkey", "wtns",
                                   "vk", "proof", "public"])
def test_missing_files_one_style(capsys, keydir, proof_bin, tmp_path, which):
    gone = tmp_path / f"gone.{which}"
    asg, pub, vk = keydir / "assignment.npz", keydir / "public.json", keydir / "circuit.vk"
    d = DATA / "mulchain"
    argv = {
        "params": ["prove", "--params", gone, "--assignment", asg, "--out", tmp_path / "p"],
        "assignment": ["prove", "--params", keydir / "circuit.params", "--assignment", gone,
                       "--out", tmp_path / "p"],
        "assignment2": ["prove", "--params", keydir / "circuit.params", "--assignment", asg, gone,
                        "--out", tmp_path / "p"],
        "zkey": ["prove", "--zkey", gone, "--wtns", d / "witness.wtns",
                 "--proof", tmp_path / "p", "--public", tmp_path / "q"],
        "wtns": ["prove", "--zkey", d / "circuit.zkey", "--wtns", gone,
                 "--proof", tmp_path / "p", "--public", tmp_path / "q"],
        "vk": ["verify", "--vk", gone, "--proof", proof_bin, "--public", pub],
        "proof": ["verify", "--vk", vk, "--proof", gone, "--public", pub],
        "public": ["verify", "--vk", vk, "--proof", proof_bin, "--public", gone],
    }[which]
    rc, _, err = run(capsys, *argv, *(PROVE_ARGS if argv[0] == "prove" else ()))
    assert rc == 2 and err.strip() == f"cuzk: error: {gone}: no such file"
    assert not (tmp_path / "p").exists()


def test_keygen_bad_log_n_leaves_no_directory(capsys, tmp_path):
    out = tmp_path / "X"
    rc, _, err = run(capsys, "keygen", "--log-n", "0", "--out", out)
    assert rc == 2 and "log_n" in err and not out.exists()
    f = tmp_path / "file"
    f.write_text("")
    rc, _, err = run(capsys, "keygen", "--log-n", "4", "--out", f)
    assert rc == 2 and "not a directory" in err
    assert_one_line_error(err, f)


def _env(**kw):
    env = dict(os.environ)
    env.pop("CUZK_DEBUG", None)
    env.update(kw)
    return env


def test_info_into_a_closed_pipe_is_quiet():
    p = subprocess.Popen([sys.executable, "-m", "cuzk", "info"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=REPO, env=_env())
    first = p.stdout.readline()
    p.stdout.close()                         # `| head -1`
    rc = p.wait(timeout=300)
    err = p.stderr.read().decode()
    p.stderr.close()
    assert first.startswith(b"cuzk ")
    assert rc == 0 and "Broken pipe" not in err and "Traceback" not in err, err


def test_broken_pipe_in_process(capsys, monkeypatch):
    class Closed:
        def write(self, s):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            raise BrokenPipeError(32, "Broken pipe")
    monkeypatch.setattr(sys, "stdout", Closed())
    assert main(["info"]) == 0
    assert "Broken pipe" not in capsys.readouterr().err


def test_help_texts_defaults_version(capsys):
    from cuzk import __version__
    from cuzk._cli import _parser
    p = _parser()
    import argparse
    subs = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    for name, sp in subs.choices.items():
        for a in sp._actions:
            if a.dest != "help":
                assert a.help, f"cuzk {name} {a.option_strings}: no help text"
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"cuzk {__version__}"
    with pytest.raises(SystemExit):
        main(["prove", "--help"])
    out = capsys.readouterr().out
    assert "(default: auto)" in out and "--no-verify" in out
    with pytest.raises(SystemExit):
        main(["keygen", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "log2 of the FFT domain" in out and "(default: porep-like)" in out
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "CUZK_DEBUG" in out and "3 device or compiler error" in " ".join(out.split())


def test_progress_reaches_pipes(capsys, keydir, tmp_path, monkeypatch):
    # stderr is not a TTY here (capsys): whole lines, not a bar; interval 0 = a line per step
    import cuzk._prover as prover
    monkeypatch.setenv("CUZK_PROGRESS_INTERVAL", "0")
    asg = keydir / "assignment.npz"
    rc, _, err = run(capsys, *_prove_args(keydir, tmp_path / "p.bin", asg, asg, asg))
    assert rc == 0 and "\r" not in err
    for k in (1, 2, 3):                                   # one tick per partition
        assert f"prove 3 partitions: {k}/3" in err, err
    assert "prove 3 partitions: done 3/3" in err and "load circuit.params: 1/1" in err
    rc, _, err = run(capsys, "keygen", "--log-n", "6", "--out", tmp_path / "k")
    assert rc == 0 and "keygen 2^6: 4/4 (100%)" in err and "keygen 2^6: done 4/4" in err

    # ticks follow the prover pulling partitions, not the end of the run
    seen = []

    def pulling(pk, assignments, **kw):
        for _ in assignments:
            seen.append(capsys.readouterr().err)
        return b"\x00" * 192 * len(seen)
    monkeypatch.setattr(prover, "prove_partitions", pulling)
    rc, _, err = run(capsys, *_prove_args(keydir, tmp_path / "p.bin", asg, asg), "--no-verify")
    assert rc == 0 and len(seen) == 2
    assert "prove 2 partitions: 1/2" not in seen[0] and "prove 2 partitions: 1/2" in seen[1]
    assert "prove 2 partitions: 2/2" in err


def test_prove_and_verify_through_a_subprocess(keydir, tmp_path):
    out = tmp_path / "p.bin"
    res = subprocess.run([sys.executable, "-m", "cuzk", *map(str, _prove_args(keydir, out))],
                         capture_output=True, text=True, timeout=300, cwd=REPO, env=_env())
    assert res.returncode == 0, res.stderr
    assert "verified: OK" in res.stdout and "backend: cpu" in res.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.bin"]
    res = subprocess.run([sys.executable, "-m", "cuzk", *map(str, _prove_args(
        keydir, tmp_path / "nodir" / "p.bin"))], capture_output=True, text=True, timeout=300,
        cwd=REPO, env=_env())
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.bin"]
