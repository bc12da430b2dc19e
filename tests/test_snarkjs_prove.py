"""The snarkjs-compatible prover (cuzk/_snarkjs_prover.py, cuzk/_native/_sparse.pyx): every stage
against the big-int reference of tests/snarkjs_ref.py, whole proofs equal to the reference for
fixed (r, s), and accepted by ``snarkjs groth16 verify`` (skipped when node/snarkjs is missing)."""
from __future__ import annotations

import dataclasses
import random
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from helpers import find_snarkjs

import snarkjs_ref as ref
from cuzk import _snarkjs as sj
from cuzk import _snarkjs_prover as sp
from cuzk._native import _ntt, _sparse

DATA = Path(__file__).parent / "data" / "snarkjs"
REPO = Path(__file__).resolve().parent.parent
CIRCUITS = ["mulchain", "rangecheck"]
R = sj.R
RINV = pow(1 << 256, -1, R)


def mont_ints(a):
    """(n, 4) Montgomery → canonical ints."""
    return [v * RINV % R for v in sj.fr_to_ints(a)]


@pytest.fixture(scope="module", params=CIRCUITS)
def circuit(request):
    c = request.param
    z = sj.read_zkey(DATA / c / "circuit.zkey")
    w = sj.read_wtns(DATA / c / "witness.wtns")
    return {"name": c, "zkey": z, "w": w, "wi": sj.fr_to_ints(w),
            "vk": sj.read_verification_key_json(DATA / c / "verification_key.json")}


# ---------------------------------------------------------------------------------------------
# Roots of unity: snarkjs (generator 5) vs cuzk's NTT (generator 7)

def test_root_exponent_maps_generator_5_roots_to_generator_7_roots():
    J = sp.ROOT_EXPONENT
    assert J % 2 == 1 and 0 < J < 1 << 32
    assert ref.least_qnr() == 5
    w5 = ref.roots_of_unity(5)
    for lg in (1, 2, 5, 10, 17, 31, 32):
        w7 = int.from_bytes(_ntt.domain_root(lg).tobytes(), "little") * RINV % R
        assert w7 == pow(7, (R - 1) >> lg, R)
        assert sp.snarkjs_root(lg) == w5[lg]
        assert pow(w7, J % (1 << lg), R) == w5[lg], lg
    assert sp.snarkjs_root(3) != int.from_bytes(_ntt.domain_root(3).tobytes(), "little") * RINV % R
    with pytest.raises(ValueError):
        sp.snarkjs_root(33)


# ---------------------------------------------------------------------------------------------
# Witness-side vectors

def test_witness_vectors_match_reference(circuit):
    z = circuit["zkey"]
    n = z.domain_size
    a, b, c = sp.witness_vectors(z, circuit["w"])
    ra, rb, rc = ref.abc_evaluations(z, circuit["wi"])
    perm = [(sp.ROOT_EXPONENT * i) % n for i in range(n)]
    for got, want in ((a, ra), (b, rb), (c, rc)):
        gi = mont_ints(got)
        assert [gi[perm[i]] for i in range(n)] == want
    # the public rows A[nConstraints + s][s] = 1 are there: row of signal 0 holds w[0] = 1
    n_cons = int(z.coeffs.constraint.max()) - z.n_public
    assert ra[n_cons] == 1 and ra[n_cons + 1:n_cons + z.n_public + 1] == circuit["wi"][1:z.n_public + 1]


def test_h_scalars_match_reference(circuit):
    z = circuit["zkey"]
    h = sp.h_scalars(z, circuit["w"])
    assert h.dtype == np.uint64 and h.shape == (z.domain_size, 4)
    want = ref.h_scalars(z, circuit["wi"])
    assert sj.fr_to_ints(h) == want
    # the wrong conventions give other scalars: generator 7, even points, no public rows
    assert want != ref.h_scalars(z, circuit["wi"], gen=7)
    assert want != ref.h_scalars(z, circuit["wi"], odd=False)
    assert want != ref.h_scalars(z, circuit["wi"], skip_public_rows=True)


def test_h_scalars_independent_of_threads(circuit):
    z = circuit["zkey"]
    h1 = sp.h_scalars(z, circuit["w"], threads=1)
    h2 = sp.h_scalars(z, circuit["w"], threads=2)
    h5 = sp.h_scalars(z, circuit["w"], threads=5)
    assert np.array_equal(h1, h2) and np.array_equal(h1, h5)


@dataclasses.dataclass
class FakeZkey:
    """What ref.h_scalars / abc_evaluations read from a Zkey."""
    coeffs: sj.Coefficients
    domain_size: int
    n_public: int = 0

    @property
    def log_domain_size(self):
        return self.domain_size.bit_length() - 1


def random_records(rng, n, n_vars, nnz, sort):
    """Random section-4 records; a third of the coefficients are ±1 (the shortcut paths)."""
    recs = []
    for _ in range(nnz):
        k = rng.random()
        coef = 1 if k < 0.2 else (R - 1 if k < 0.33 else rng.randrange(R))
        recs.append((rng.randrange(2), rng.randrange(n), rng.randrange(n_vars), coef))
    if sort:
        recs.sort(key=lambda x: x[1])
    m = np.array([x[0] for x in recs], dtype=np.uint32)
    c = np.array([x[1] for x in recs], dtype=np.uint32)
    s = np.array([x[2] for x in recs], dtype=np.uint32)
    v = sj.fr_from_ints([x[3] * (1 << 512) % R for x in recs])
    return sj.Coefficients(matrix=m, constraint=c, signal=s, value=v, records=None)


@pytest.mark.parametrize("lg,sort,threads", [(1, True, 0), (4, False, 1), (6, True, 3),
                                             (10, False, 0), (10, True, 2)])
def test_random_records_match_reference(lg, sort, threads):
    rng = random.Random(1000 * lg + sort)
    n = 1 << lg
    n_vars = rng.randrange(1, 3 * n)
    co = random_records(rng, n, n_vars, rng.randrange(0, 4 * n), sort)
    wi = [rng.choice([0, 1, R - 1, rng.randrange(R)]) for _ in range(n_vars)]
    w = sj.fr_from_ints(wi)
    fz = FakeZkey(co, n)
    a, b, c = _sparse.abc_eval(co.matrix, co.constraint, co.signal, co.value, w, n,
                               row_mult=sp.ROOT_EXPONENT, threads=threads)
    ra, rb, rc = ref.abc_evaluations(fz, wi)
    perm = [(sp.ROOT_EXPONENT * i) % n for i in range(n)]
    for got, want in ((a, ra), (b, rb), (c, rc)):
        gi = mont_ints(got)
        assert [gi[perm[i]] for i in range(n)] == want
    h = _sparse.snarkjs_h(a, b, c, sp.ROOT_EXPONENT, threads=threads)
    assert sj.fr_to_ints(h) == ref.h_scalars(fz, wi)


def test_unsorted_records_give_the_same_vectors(circuit):
    z, w = circuit["zkey"], circuit["w"]
    co = z.coeffs
    p = np.random.default_rng(7).permutation(len(co))
    assert not np.all(np.diff(co.constraint[p].astype(np.int64)) >= 0)
    shuffled = [np.ascontiguousarray(x[p]) for x in (co.matrix, co.constraint, co.signal, co.value)]
    got = _sparse.abc_eval(*shuffled, w, z.domain_size, row_mult=sp.ROOT_EXPONENT)
    want = sp.witness_vectors(z, w)
    for g, x in zip(got, want):
        assert np.array_equal(g, x)


def test_row_mult_one_is_natural_order(circuit):
    z, w = circuit["zkey"], circuit["w"]
    co = z.coeffs
    a, _, _ = _sparse.abc_eval(co.matrix, co.constraint, co.signal, co.value, w, z.domain_size)
    assert mont_ints(a) == ref.abc_evaluations(z, circuit["wi"])[0]


def test_abc_eval_rejects_bad_input(circuit):
    z, w = circuit["zkey"], circuit["w"]
    co = z.coeffs
    args = [co.matrix.copy(), co.constraint.copy(), co.signal.copy(), co.value.copy()]

    def run(*a, n=z.domain_size, wit=w, **kw):
        return _sparse.abc_eval(*a, wit, n, **kw)

    bad = [x.copy() for x in args]
    bad[2][5] = z.n_vars
    with pytest.raises(ValueError, match="coefficient 5: signal"):
        run(*bad)
    bad = [x.copy() for x in args]
    bad[1][7] = z.domain_size
    with pytest.raises(ValueError, match="coefficient 7: constraint"):
        run(*bad)
    bad = [x.copy() for x in args]
    bad[0][3] = 2
    with pytest.raises(ValueError, match="coefficient 3: matrix"):
        run(*bad)
    bad = [x.copy() for x in args]
    bad[3][9] = sj.fr_from_ints([R - 1])[0]
    bad[3][9, 0] += 1                                   # = r
    with pytest.raises(ValueError, match="coefficient 9: value"):
        run(*bad)
    wb = np.array(w)
    wb[4] = sj.fr_from_ints([R - 1])[0]
    wb[4, 0] += 1
    with pytest.raises(ValueError, match=r"witness\[4\]"):
        run(*args, wit=wb)
    with pytest.raises(ValueError, match="row_mult"):
        run(*args, row_mult=4)
    with pytest.raises(ValueError, match="power of two"):
        run(*args, n=48)
    with pytest.raises(ValueError, match="uint32"):
        run(args[0].astype(np.int64), *args[1:])
    with pytest.raises(ValueError, match="threads"):
        run(*args, threads=-1)


def test_snarkjs_h_rejects_bad_input():
    a, b, c = (np.zeros((8, 4), np.uint64) for _ in range(3))
    with pytest.raises(ValueError, match="odd"):
        _sparse.snarkjs_h(a, b, c, 2)
    with pytest.raises(ValueError, match="overlap"):
        _sparse.snarkjs_h(a, a, c, 1)
    with pytest.raises(ValueError, match="lengths"):
        _sparse.snarkjs_h(a, b, np.zeros((4, 4), np.uint64), 1)
    ro = np.zeros((8, 4), np.uint64)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        _sparse.snarkjs_h(a, b, ro, 1)
    assert not _sparse.snarkjs_h(a, b, c, 1).any()


# ---------------------------------------------------------------------------------------------
# Whole proofs

@pytest.mark.parametrize("r,s", [(0xC0FFEE, 0xBEEF), (0, 0), (R - 1, 1)])
def test_proof_equals_reference(circuit, r, s):
    z, wi = circuit["zkey"], circuit["wi"]
    t = {}
    proof, public = sp.prove_zkey(z, circuit["w"], r, s, timings=t)
    assert proof == ref.prove(z, wi, r, s)
    assert public == wi[1:z.n_public + 1]
    assert ref.verify(circuit["vk"], proof, public)
    assert t["backend"] == "cpu"
    for k in ("abc", "h", "msm_h", "msm_a", "msm_b1", "msm_b2", "msm_c", "epilogue", "total"):
        assert t[k] >= 0.0


def test_random_proofs_verify_and_differ(circuit):
    z = circuit["zkey"]
    p1, pub = sp.prove_zkey(DATA / circuit["name"] / "circuit.zkey",
                            DATA / circuit["name"] / "witness.wtns", threads=1)
    p2, _ = sp.prove_zkey(z, circuit["w"], threads=2)
    assert p1 != p2
    assert ref.verify(circuit["vk"], p1, pub) and ref.verify(circuit["vk"], p2, pub)
    bad = [(pub[0] + 1) % R] + pub[1:]
    assert not ref.verify(circuit["vk"], p1, bad)


def test_proof_verifies_with_cuzk_verifier(circuit):
    from cuzk import _snarkjs_prover as spm
    proof, pub = sp.prove_zkey(circuit["zkey"], circuit["w"])
    assert spm._verify_zkey(circuit["zkey"], proof, pub)
    A, B, C = proof
    assert not spm._verify_zkey(circuit["zkey"], (C, B, A), pub)


def test_prove_rejects_bad_witness_and_randomizers(circuit):
    z, w = circuit["zkey"], circuit["w"]
    with pytest.raises(ValueError, match="nVars"):
        sp.prove_zkey(z, w[:-1])
    with pytest.raises(ValueError, match="shape"):
        sp.prove_zkey(z, w.reshape(-1))
    with pytest.raises(ValueError, match=r"\[0, r\)"):
        sp.prove_zkey(z, w, r=R)
    other = "rangecheck" if circuit["name"] == "mulchain" else "mulchain"
    with pytest.raises(ValueError, match="nVars"):
        sp.prove_zkey(z, DATA / other / "witness.wtns")


def _cuda_ok():
    from cuzk._backend import cuda_available
    return cuda_available()[0]


@pytest.mark.skipif(_cuda_ok(), reason="a usable CUDA device is present")
def test_cuda_backend_without_device_is_refused_auto_uses_cpu(circuit):
    from cuzk import BackendUnavailable
    with pytest.raises(BackendUnavailable):
        sp.prove_zkey(circuit["zkey"], circuit["w"], backend="cuda")
    t = {}
    sp.prove_zkey(circuit["zkey"], circuit["w"], backend="auto", timings=t)
    assert t["backend"] == "cpu"


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_ok(), reason="no usable CUDA device")
def test_cuda_backend_gives_cpu_bytes(circuit):
    """H scalars on the GPU: the same proof as the CPU for the same (r, s)."""
    t = {}
    cpu = sp.prove_zkey(circuit["zkey"], circuit["w"], r=4242, s=2424, backend="cpu")
    gpu = sp.prove_zkey(circuit["zkey"], circuit["w"], r=4242, s=2424, backend="cuda", timings=t)
    assert t["backend"] == "cuda"
    assert gpu == cpu
    a, b, c = sp.witness_vectors(circuit["zkey"], circuit["w"], 2)
    want = _sparse.snarkjs_h(a.copy(), b.copy(), c.copy(), sp.ROOT_EXPONENT, threads=2)
    from cuzk import _cuda_ntt
    assert np.array_equal(_cuda_ntt.snarkjs_h(a, b, c, sp.ROOT_EXPONENT), want)


# ---------------------------------------------------------------------------------------------
# snarkjs CLI interop

@pytest.fixture(scope="module")
def snarkjs_cli():
    exe = find_snarkjs()
    if exe is None or shutil.which("node") is None:
        pytest.skip("snarkjs CLI or node not found (set CUZK_SNARKJS)")
    return exe


def snarkjs_verify(exe, vk, public, proof):
    res = subprocess.run([exe, "groth16", "verify", str(vk), str(public), str(proof)],
                         capture_output=True, text=True, timeout=300)
    return res.returncode, res.stdout + res.stderr


def test_snarkjs_accepts_cuzk_proof(circuit, snarkjs_cli, tmp_path):
    proof, public = sp.prove_zkey(circuit["zkey"], circuit["w"])
    sj.write_proof_json(tmp_path / "proof.json", *proof)
    sj.write_public_json(tmp_path / "public.json", public)
    vk = DATA / circuit["name"] / "verification_key.json"
    rc, out = snarkjs_verify(snarkjs_cli, vk, tmp_path / "public.json", tmp_path / "proof.json")
    assert rc == 0 and "OK!" in out, out
    sj.write_public_json(tmp_path / "bad.json", [(public[0] + 1) % R] + public[1:])
    rc, out = snarkjs_verify(snarkjs_cli, vk, tmp_path / "bad.json", tmp_path / "proof.json")
    assert rc == 1 and "Invalid proof" in out, out
