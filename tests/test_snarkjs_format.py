"""snarkjs formats: fixtures made by snarkjs 0.7.6 (tests/data/snarkjs/README.md), the readers and
writers of cuzk._snarkjs, the Python reference prover of tests/snarkjs_ref.py, and interop with
the snarkjs CLI (skipped when node or snarkjs is missing)."""
from __future__ import annotations

import hashlib
import json
import pickle
import shutil
import struct
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from helpers import find_snarkjs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import snarkjs_ref as ref
from cuzk import FormatError
from cuzk import _snarkjs as sj

DATA = Path(__file__).parent / "data" / "snarkjs"
REPO = Path(__file__).resolve().parent.parent
CIRCUITS = ["mulchain", "rangecheck"]
FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def fx(circuit, name):
    return DATA / circuit / name


@pytest.fixture(scope="module", params=CIRCUITS)
def circuit(request):
    c = request.param
    z = sj.read_zkey(fx(c, "circuit.zkey"))
    w = sj.fr_to_ints(sj.read_wtns(fx(c, "witness.wtns")))
    return {"name": c, "zkey": z, "w": w, "r1cs": ref.read_r1cs(fx(c, "circuit.r1cs")),
            "vk": sj.read_verification_key_json(fx(c, "verification_key.json")),
            "public": sj.read_public_json(fx(c, "public.json"))}


# ---------------------------------------------------------------------------------------------
# Fixtures and the layout claims of cuzk/_snarkjs.py

def test_fixture_checksums():
    lines = (DATA / "SHA256SUMS").read_text().split("\n")
    entries = [ln.split() for ln in lines if ln.strip()]
    assert len(entries) == 16
    for digest, name in entries:
        assert hashlib.sha256((DATA / name).read_bytes()).hexdigest() == digest, name
    total = sum(p.stat().st_size for p in DATA.rglob("*") if p.is_file())
    assert total < 1 << 20


def test_header_matches_r1cs(circuit):
    z, r1 = circuit["zkey"], circuit["r1cs"]
    assert r1["prime"] == sj.R
    n_cons = len(r1["constraints"])
    n_pub = r1["n_outputs"] + r1["n_pub_inputs"]
    assert (z.n_vars, z.n_public) == (r1["n_wires"], n_pub)
    # zkey_new.js: cirPower = log2(nConstraints + nPublic) + 1 (floor log2)
    assert z.domain_size == 1 << ((n_cons + n_pub).bit_length())
    assert z.log_domain_size == (n_cons + n_pub).bit_length()
    assert (z.ic.shape, z.a.shape, z.b1.shape, z.b2.shape, z.c.shape, z.h.shape) == (
        (n_pub + 1, 12), (z.n_vars, 12), (z.n_vars, 12), (z.n_vars, 24),
        (z.n_vars - n_pub - 1, 12), (z.domain_size, 12))


def test_header_points_are_montgomery_and_match_vk_json(circuit):
    """Header order alpha1 beta1 beta2 gamma2 delta1 delta2; Fq Montgomery, R = 2^384; c0 first."""
    z, vk = circuit["zkey"], circuit["vk"]
    assert ref.vk_from_zkey(z) == vk
    # The same, decoded with plain big ints straight from the file bytes.
    raw = fx(circuit["name"], "circuit.zkey").read_bytes()
    off = z.sections[2][0] + 4 + 48 + 4 + 32 + 12
    rinv = pow(2**384, -1, sj.Q)
    fq = [int.from_bytes(raw[off + 48 * i:off + 48 * i + 48], "little") * rinv % sj.Q
          for i in range((3 * 96 + 3 * 192) // 48)]
    assert tuple(fq[0:2]) == vk["vk_alpha_1"]
    assert ((fq[4], fq[5]), (fq[6], fq[7])) == vk["vk_beta_2"]
    assert ((fq[8], fq[9]), (fq[10], fq[11])) == vk["vk_gamma_2"]
    assert ((fq[14], fq[15]), (fq[16], fq[17])) == vk["vk_delta_2"]
    assert _on_g1(*fq[2:4]) and _on_g1(*fq[12:14])                  # beta1, delta1
    assert [sj.g1_from_mont(p) for p in z.ic] == vk["IC"]
    # the zkey beacon moved delta away from the generator, so a delta mix-up cannot pass unseen
    assert vk["vk_delta_2"] != vk["vk_gamma_2"]


def _on_g1(x, y):
    return (y * y - x ** 3 - 4) % sj.Q == 0


def _on_g2(x, y):
    def mul(a, b):
        return ((a[0] * b[0] - a[1] * b[1]) % sj.Q, (a[0] * b[1] + a[1] * b[0]) % sj.Q)
    x3 = mul(mul(x, x), x)
    y2 = mul(y, y)
    return ((y2[0] - x3[0] - 4) % sj.Q, (y2[1] - x3[1] - 4) % sj.Q) == (0, 0)


@pytest.mark.parametrize("zname", ["circuit.zkey", "circuit_0000.zkey"])
def test_all_points_valid_and_infinity_is_zero(circuit, zname):
    z = sj.read_zkey(fx(circuit["name"], zname))
    for name in ("ic", "a", "b1", "c", "h"):
        for p in getattr(z, name):
            pt = sj.g1_from_mont(p)
            assert pt is None or _on_g1(*pt), name
            assert ref.g1_ark(pt).is_in_subgroup()
    for p in z.b2:
        pt = sj.g2_from_mont(p)
        assert pt is None or _on_g2(*pt)
        assert ref.g2_ark(pt).is_in_subgroup()
    # Infinity = all-zero: B1/B2 of a signal that appears in no B row; A of a private signal
    # in no A row. Every other base is a real point here.
    cons = circuit["r1cs"]["constraints"]
    in_a = {s for a, _, _ in cons for s in a} | set(range(z.n_public + 1))
    in_b = {s for _, b, _ in cons for s in b}
    assert [bool(p.any()) for p in z.b1] == [s in in_b for s in range(z.n_vars)]
    assert [bool(p.any()) for p in z.b2] == [s in in_b for s in range(z.n_vars)]
    assert [bool(p.any()) for p in z.a] == [s in in_a for s in range(z.n_vars)]
    assert not all(s in in_b for s in range(z.n_vars))       # the fixtures do hold infinities
    assert z.h.any(axis=1).all()


def test_out_of_order_file_reads_the_same(circuit):
    """circuit_0000.zkey keeps snarkjs's write order; the beacon only changes delta, C and H."""
    z, z0 = circuit["zkey"], sj.read_zkey(fx(circuit["name"], "circuit_0000.zkey"))
    assert list(z0.sections)[:5] == [1, 2, 4, 3, 9]
    for name in ("alpha1", "beta1", "beta2", "gamma2", "ic", "a", "b1", "b2"):
        assert np.array_equal(getattr(z, name), getattr(z0, name)), name
    assert np.array_equal(z.coeffs.records, z0.coeffs.records)
    assert sj.g1_from_mont(z0.delta1) == ref.g1_ints(ref.ark.G1Point())   # delta = generator
    assert not np.array_equal(z.delta1, z0.delta1)


def test_coefficients_are_r1cs_times_2_512_plus_public_rows(circuit):
    z, cons = circuit["zkey"], circuit["r1cs"]["constraints"]
    r2 = pow(2, 512, sj.R)
    want = []
    for i, (a, b, _) in enumerate(cons):
        want += [(0, i, s, v * r2 % sj.R) for s, v in a.items()]
        want += [(1, i, s, v * r2 % sj.R) for s, v in b.items()]
    want += [(0, len(cons) + s, s, r2) for s in range(z.n_public + 1)]
    got = list(zip(z.coeffs.matrix.tolist(), z.coeffs.constraint.tolist(),
                   z.coeffs.signal.tolist(), sj.fr_to_ints(z.coeffs.value)))
    assert sorted(got) == sorted(want)
    assert len(z.coeffs) == len(want)
    assert any(v != r2 for *_, v in got)                     # not only unit coefficients
    # the parallel arrays and the structured view agree
    assert np.array_equal(z.coeffs.records["value"], z.coeffs.value)
    assert np.array_equal(z.coeffs.records["signal"], z.coeffs.signal)


def test_witness_is_canonical_and_satisfies_r1cs(circuit):
    w, r1, z = circuit["w"], circuit["r1cs"], circuit["zkey"]
    assert w[0] == 1 and len(w) == z.n_vars
    for a, b, c in r1["constraints"]:
        ev = [sum(v * w[s] for s, v in lc.items()) % sj.R for lc in (a, b, c)]
        assert ev[0] * ev[1] % sj.R == ev[2]
    assert circuit["public"] == w[1:z.n_public + 1]
    inp = json.loads(fx(circuit["name"], "input.json").read_text())
    if circuit["name"] == "mulchain":                        # out, then public inputs a, b
        assert w[2:4] == [int(inp["a"]), int(inp["b"])]
        assert w[4] == int(inp["x"])
    else:
        assert w[1] == (int(inp["v"]) + 1) ** 2


def test_arrays_are_aligned_readonly_and_mapped_when_possible(circuit):
    z = circuit["zkey"]
    arrays = {n: getattr(z, n) for n in ("alpha1", "beta1", "beta2", "gamma2", "delta1",
                                         "delta2", "ic", "a", "b1", "b2", "c", "h")}
    arrays.update({"coef." + n: getattr(z.coeffs, n)
                   for n in ("matrix", "constraint", "signal", "value")})
    arrays["wtns"] = sj.read_wtns(fx(circuit["name"], "witness.wtns"))
    for n, a in arrays.items():
        assert a.flags.c_contiguous and a.flags.aligned and not a.flags.writeable, n
        assert a.dtype in (np.uint64, np.uint32), n
    sid = {"ic": 3, "a": 5, "b1": 6, "b2": 7, "c": 8, "h": 9}
    mapped = [n for n, s in sid.items() if z.sections[s][0] % 8 == 0]
    assert mapped                                               # both fixtures have some
    for n in mapped:
        assert not getattr(z, n).flags.owndata, n              # a view of the mapping


# ---------------------------------------------------------------------------------------------
# JSON readers and writers

@pytest.mark.parametrize("c", CIRCUITS)
def test_json_writers_reproduce_snarkjs_bytes(tmp_path, c):
    A, B, C = sj.read_proof_json(fx(c, "proof.json"))
    sj.write_proof_json(tmp_path / "proof.json", A, B, C)
    assert (tmp_path / "proof.json").read_bytes() == fx(c, "proof.json").read_bytes()
    sj.write_public_json(tmp_path / "public.json", sj.read_public_json(fx(c, "public.json")))
    assert (tmp_path / "public.json").read_bytes() == fx(c, "public.json").read_bytes()
    keys = list(json.loads(fx(c, "proof.json").read_text()))
    assert keys == ["pi_a", "pi_b", "pi_c", "protocol", "curve"]


coord = st.integers(0, sj.Q - 1)
g1 = st.none() | st.tuples(coord, coord)
g2 = st.none() | st.tuples(st.tuples(coord, coord), st.tuples(coord, coord))


@FUZZ
@given(A=g1, B=g2, C=g1, public=st.lists(st.integers(0, sj.R - 1), max_size=5))
def test_json_round_trip(tmp_path_factory, A, B, C, public):
    d = tmp_path_factory.mktemp("json", numbered=True)
    sj.write_proof_json(d / "p.json", A, B, C)
    assert sj.read_proof_json(d / "p.json") == (A, B, C)
    sj.write_public_json(d / "q.json", public)
    assert sj.read_public_json(d / "q.json") == public


def test_json_infinity_is_snarkjs_to_object(tmp_path):
    sj.write_proof_json(tmp_path / "p.json", None, None, None)
    obj = json.loads((tmp_path / "p.json").read_text())
    assert obj["pi_a"] == obj["pi_c"] == ["0", "1", "0"]
    assert obj["pi_b"] == [["0", "0"], ["1", "0"], ["0", "0"]]


@settings(max_examples=20, deadline=None)
@given(z=st.integers(2, sj.Q - 1), z2=st.tuples(coord, coord).filter(lambda t: t != (0, 0)))
def test_read_proof_normalizes_jacobian(tmp_path_factory, z, z2):
    d = tmp_path_factory.mktemp("jac", numbered=True)
    A, B, C = sj.read_proof_json(fx("mulchain", "proof.json"))
    obj = json.loads(fx("mulchain", "proof.json").read_text())
    obj["pi_a"] = [str(A[0] * z * z % sj.Q), str(A[1] * z ** 3 % sj.Q), str(z)]
    m = sj._fq2_mul
    zz = m(z2, z2)
    obj["pi_b"] = [[str(v) for v in m(B[0], zz)], [str(v) for v in m(B[1], m(zz, z2))],
                   [str(v) for v in z2]]
    (d / "p.json").write_text(json.dumps(obj))
    assert sj.read_proof_json(d / "p.json") == (A, B, C)


def test_json_writers_reject_out_of_range(tmp_path):
    with pytest.raises(ValueError, match="A.x"):
        sj.write_proof_json(tmp_path / "p.json", (sj.Q, 1), None, None)
    with pytest.raises(ValueError, match="B.y.c1"):
        sj.write_proof_json(tmp_path / "p.json", None, ((1, 2), (3, -1)), None)
    with pytest.raises(ValueError, match="public input 2"):
        sj.write_public_json(tmp_path / "q.json", [0, 1, sj.R])


@pytest.mark.parametrize("mutate, what", [
    (lambda o: o.update(protocol="plonk"), "protocol"),
    (lambda o: o.update(curve="bn128"), "curve"),
    (lambda o: o["IC"].pop(), "IC"),
    (lambda o: o.pop("vk_delta_2"), "vk_delta_2"),
    (lambda o: o["vk_alpha_1"].__setitem__(0, str(sj.Q)), "vk_alpha_1[0]"),
    (lambda o: o["vk_beta_2"][1].__setitem__(1, "12a"), "vk_beta_2[1][1]"),
    (lambda o: o["vk_gamma_2"].__setitem__(0, ["1"]), "vk_gamma_2[0]"),
])
def test_vk_json_errors(tmp_path, mutate, what):
    obj = json.loads(fx("mulchain", "verification_key.json").read_text())
    mutate(obj)
    (tmp_path / "vk.json").write_text(json.dumps(obj))
    with pytest.raises(FormatError, match=what.replace("[", r"\[").replace("]", r"\]")) as e:
        sj.read_verification_key_json(tmp_path / "vk.json")
    assert e.value.path == str(tmp_path / "vk.json")


@pytest.mark.parametrize("text", ['["1", "2"', '{"a": 1}', '["-1"]', f'["{sj.R}"]', '[1.5]',
                                  '["1e3"]', '["' + "9" * 5000 + '"]'])
def test_public_json_errors(tmp_path, text):
    (tmp_path / "p.json").write_text(text)
    with pytest.raises(FormatError):
        sj.read_public_json(tmp_path / "p.json")


# Regressions from the fuzzing of issue 12: each raised something other than a FormatError
# naming the file (RecursionError, Python's digit-limit ValueError, a message blaming the proof).

def _vk_obj():
    return json.loads(fx("mulchain", "verification_key.json").read_text())


@pytest.mark.parametrize("reader", [sj.read_proof_json, sj.read_public_json,
                                    sj.read_verification_key_json])
@pytest.mark.parametrize("text", ["[" * 1000 + "]" * 1000, '{"a": ' * 1000 + "1" + "}" * 1000,
                                  "[" + "7" * 4301 + "]", '{"nPublic": ' + "1" * 5000 + "}"],
                         ids=["deep-list", "deep-object", "int-4301-digits", "int-5000-digits"])
def test_json_depth_and_long_literals_are_format_errors(tmp_path, reader, text):
    p = tmp_path / "x.json"
    p.write_text(text)
    with pytest.raises(FormatError) as e:
        reader(p)
    assert e.value.path == str(p)
    assert "\n" not in str(e.value) and len(str(e.value)) < 400


def test_json_deep_value_in_a_field_is_described_briefly(tmp_path):
    # nesting the parser accepts, where a number belongs: the message must not repr it
    obj = _vk_obj()
    obj["IC"][0][0] = json.loads("[" * 500 + "]" * 500)
    obj["protocol"] = ["x" * 10000]
    p = tmp_path / "vk.json"
    p.write_text(json.dumps(obj))
    with pytest.raises(FormatError, match="a list of 1 items") as e:
        sj.read_verification_key_json(p)
    assert len(str(e.value)) < 300


@pytest.mark.parametrize("digits", [11, 300, 4300])
def test_vk_json_huge_npublic(tmp_path, digits):
    obj = _vk_obj()
    text = json.dumps(obj).replace(f'"nPublic": {obj["nPublic"]}', '"nPublic": ' + "9" * digits)
    p = tmp_path / "vk.json"
    p.write_text(text)
    with pytest.raises(FormatError, match="nPublic|literals") as e:
        sj.read_verification_key_json(p)
    assert e.value.path == str(p)


@pytest.mark.parametrize("point, index, group", [("vk_alpha_1", (1,), "G1"),
                                                  ("IC", (0, 1), "G1"),
                                                  ("vk_delta_2", (1, 0), "G2"),
                                                  ("vk_beta_2", (0, 1), "G2")])
def test_vk_json_off_curve_point_names_the_vk(tmp_path, capsys, point, index, group):
    obj = _vk_obj()
    cell = obj[point]
    for i in index[:-1]:
        cell = cell[i]
    cell[index[-1]] = str((int(cell[index[-1]]) + 1) % sj.Q)
    p = tmp_path / "vk.json"
    p.write_text(json.dumps(obj))
    with pytest.raises(FormatError, match=f"{point}.*{group} point on the curve") as e:
        sj.read_verification_key_json(p)
    assert e.value.path == str(p)
    # the CLI used to blame the proof: "proof.json: expected valid proof points"
    from cuzk._cli import main
    d = DATA / "mulchain"
    rc = main(["verify", "--vk", str(p), "--proof", str(d / "proof.json"),
               "--public", str(d / "public.json")])
    err = capsys.readouterr().err
    assert rc == 2 and str(p) in err and "proof.json" not in err, err


def test_public_json_accepts_snarkjs_number_forms(tmp_path):
    (tmp_path / "p.json").write_text('["12", "0x1f", 7]')
    assert sj.read_public_json(tmp_path / "p.json") == [12, 31, 7]


# ---------------------------------------------------------------------------------------------
# The reference prover

def test_roots_of_unity_from_5():
    assert ref.least_qnr() == 5
    w = ref.roots_of_unity()
    assert pow(w[32], 1 << 31, sj.R) == sj.R - 1
    assert all(pow(w[k], 1 << k, sj.R) == 1 and pow(w[k], 1 << (k - 1), sj.R) != 1
               for k in range(1, 33))
    assert ref.roots_of_unity(7)[5] != w[5]


@pytest.mark.parametrize("n", [1, 2, 4, 8, 32])
def test_ntt_matches_naive_dft(n):
    omega = ref.roots_of_unity()[n.bit_length() - 1]
    a = [(i * 0x1234567 + 99) ** 3 % sj.R for i in range(n)]
    naive = [sum(a[i] * pow(omega, i * j, sj.R) for i in range(n)) % sj.R for j in range(n)]
    assert ref.ntt(a, omega) == naive
    assert ref.intt(naive, omega) == a


def test_h_scalars_are_abc_on_the_odd_points(circuit):
    """P = A·B − C (degree < 2n) vanishes on the n-domain; H = P at w_2n^(2j+1)."""
    z, w = circuit["zkey"], circuit["w"]
    n, lg = z.domain_size, z.log_domain_size
    roots = ref.roots_of_unity()
    polys = [ref.intt(v, roots[lg]) for v in ref.abc_evaluations(z, w)]
    p = [0] * (2 * n)
    for i, x in enumerate(polys[0]):
        for j, y in enumerate(polys[1]):
            p[i + j] += x * y
    for i, x in enumerate(polys[2]):
        p[i] -= x
    p = [v % sj.R for v in p]
    evals = ref.ntt(p, roots[lg + 1])                 # P on the doubled domain, natural order
    assert evals[0::2] == [0] * n
    h = ref.h_scalars(z, w)
    assert evals[1::2] == h
    assert any(h)


@pytest.mark.parametrize("rs", [(0, 0), (1, 2), (12345678901234567890, sj.R - 1)])
def test_reference_proof_verifies(circuit, rs):
    proof = ref.prove(circuit["zkey"], circuit["w"], *rs)
    assert ref.verify(circuit["vk"], proof, circuit["public"])
    assert ref.prove(circuit["zkey"], circuit["w"], *rs) == proof       # reproducible


def test_snarkjs_proof_verifies_with_reference_verifier(circuit):
    proof = sj.read_proof_json(fx(circuit["name"], "proof.json"))
    assert ref.verify(circuit["vk"], proof, circuit["public"])
    bad = list(circuit["public"])
    bad[0] = (bad[0] + 1) % sj.R
    assert not ref.verify(circuit["vk"], proof, bad)


def test_reference_proof_from_the_unsorted_zkey(circuit):
    z0 = sj.read_zkey(fx(circuit["name"], "circuit_0000.zkey"))
    proof = ref.prove(z0, circuit["w"], 3, 4)
    assert ref.verify(ref.vk_from_zkey(z0), proof, circuit["public"])
    assert not ref.verify(circuit["vk"], proof, circuit["public"])


@pytest.mark.parametrize("variant", [{"gen": 7}, {"odd": False}, {"skip_public_rows": True}])
def test_wrong_conventions_are_caught(circuit, variant):
    """Each convention the reference follows matters: changing it breaks the proof."""
    proof = ref.prove(circuit["zkey"], circuit["w"], 5, 6, **variant)
    assert not ref.verify(circuit["vk"], proof, circuit["public"])


@pytest.fixture(scope="module")
def snarkjs_cli():
    exe = find_snarkjs()
    if exe is None or shutil.which("node") is None:
        pytest.skip("snarkjs CLI or node not found (set CUZK_SNARKJS)")
    probe = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=120)
    if "snarkjs@" not in probe.stdout + probe.stderr:
        pytest.skip(f"{exe} --version does not run: {probe.stderr[-200:]}")
    return exe


def _cli_verify(exe, vk, public, proof):
    res = subprocess.run([exe, "groth16", "verify", str(vk), str(public), str(proof)],
                         capture_output=True, text=True, timeout=300)
    return res.returncode, res.stdout + res.stderr


def test_reference_proof_accepted_by_snarkjs(circuit, snarkjs_cli, tmp_path):
    A, B, C = ref.prove(circuit["zkey"], circuit["w"], 0xC0FFEE, 0xBEEF)
    pub = circuit["w"][1:circuit["zkey"].n_public + 1]
    sj.write_proof_json(tmp_path / "proof.json", A, B, C)
    sj.write_public_json(tmp_path / "public.json", pub)
    vk = fx(circuit["name"], "verification_key.json")
    rc, out = _cli_verify(snarkjs_cli, vk, tmp_path / "public.json", tmp_path / "proof.json")
    assert rc == 0 and "OK!" in out, out
    # tampered public input
    sj.write_public_json(tmp_path / "bad_public.json", [(pub[0] + 1) % sj.R] + pub[1:])
    rc, out = _cli_verify(snarkjs_cli, vk, tmp_path / "bad_public.json", tmp_path / "proof.json")
    assert rc == 1 and "Invalid proof" in out, out
    # tampered proof: C replaced by another valid point (C + A)
    C2 = ref.g1_ints(ref.g1_ark(C) + ref.g1_ark(A))
    sj.write_proof_json(tmp_path / "bad_proof.json", A, B, C2)
    rc, out = _cli_verify(snarkjs_cli, vk, tmp_path / "public.json", tmp_path / "bad_proof.json")
    assert rc == 1 and "Invalid proof" in out, out


# ---------------------------------------------------------------------------------------------
# Malformed input → FormatError naming the file and offset, never a crash or a hang

_counter = iter(range(10 ** 9))


@pytest.fixture(scope="module")
def fuzzdir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


def _write(d, data: bytes) -> Path:
    # A fresh name each time: a Zkey still alive keeps its file mapped, never truncate that file.
    p = d / f"f{next(_counter)}.bin"
    p.write_bytes(data)
    return p


def _expect_error(d, reader, data: bytes, offset=None, match=None):
    p = _write(d, data)
    with pytest.raises(FormatError) as e:
        reader(p)
    err = e.value
    assert err.path == str(p)
    assert err.offset is None or 0 <= err.offset <= len(data)
    if offset is not None:
        assert err.offset == offset, str(err)
    if match is not None:
        assert match in str(err), str(err)
    assert pickle.loads(pickle.dumps(err)).offset == err.offset
    return err


def _read_or_format_error(d, reader, data: bytes):
    p = _write(d, data)
    try:
        return reader(p)
    except FormatError as e:
        assert e.path == str(p) and (e.offset is None or 0 <= e.offset <= len(data))
        return None


ZKEY = (DATA / "mulchain" / "circuit.zkey").read_bytes()
ZKEY0 = (DATA / "mulchain" / "circuit_0000.zkey").read_bytes()
WTNS = (DATA / "mulchain" / "witness.wtns").read_bytes()
_ZMAGIC, _ZVER, _ZSECS = ref.split_binfile(ZKEY)
_WMAGIC, _WVER, _WSECS = ref.split_binfile(WTNS)


def _zkey_with(section_id, body=None, patch=None):
    """ZKEY with one section replaced (``body``) or patched at ``{offset_in_section: bytes}``."""
    secs = []
    for sid, b in _ZSECS:
        if sid == section_id:
            if body is not None:
                b = body
            for o, v in (patch or {}).items():
                b = b[:o] + v + b[o + len(v):]
        secs.append((sid, b))
    return ref.binfile(_ZMAGIC, secs, _ZVER)


def _sec_off(data, sid):
    off = 12
    while True:
        s, size = struct.unpack_from("<IQ", data, off)
        if s == sid:
            return off + 12
        off += 12 + size


@FUZZ
@given(cut=st.integers(0, len(ZKEY) - 1))
def test_zkey_truncated(fuzzdir, cut):
    _expect_error(fuzzdir, sj.read_zkey, ZKEY[:cut])


def test_zkey_truncated_at_every_section_boundary(fuzzdir):
    z = sj.read_zkey(DATA / "mulchain" / "circuit.zkey")
    cuts = {0, 4, 11, 12}
    for off, size in z.sections.values():
        cuts |= {off - 12, off - 1, off, off + size - 1}
    for cut in sorted(cuts):
        _expect_error(fuzzdir, sj.read_zkey, ZKEY[:cut])


def test_wtns_truncated_everywhere(fuzzdir):
    for cut in range(len(WTNS)):
        _expect_error(fuzzdir, sj.read_wtns, WTNS[:cut])


@FUZZ
@given(data=st.data())
def test_zkey_random_corruption(fuzzdir, data):
    base = data.draw(st.sampled_from([ZKEY, ZKEY0]))
    buf = bytearray(base)
    for _ in range(data.draw(st.integers(1, 8))):
        buf[data.draw(st.integers(0, len(buf) - 1))] = data.draw(st.integers(0, 255))
    z = _read_or_format_error(fuzzdir, sj.read_zkey, bytes(buf))
    if z is not None:
        assert z.a.shape == (z.n_vars, 12) and z.h.shape == (z.domain_size, 12)


@FUZZ
@given(data=st.data())
def test_wtns_random_corruption(fuzzdir, data):
    buf = bytearray(WTNS)
    for _ in range(data.draw(st.integers(1, 4))):
        buf[data.draw(st.integers(0, len(buf) - 1))] = data.draw(st.integers(0, 255))
    w = _read_or_format_error(fuzzdir, sj.read_wtns, bytes(buf))
    if w is not None:
        assert w.ndim == 2 and w.shape[1] == 4


@FUZZ
@given(idx=st.integers(0, len(_ZSECS) - 1), sid=st.integers(0, 2**32 - 1) | st.integers(0, 12),
       size=st.integers(0, 2**64 - 1) | st.integers(0, len(ZKEY)), which=st.integers(0, 2))
def test_zkey_corrupted_section_header(fuzzdir, idx, sid, size, which):
    buf = bytearray(ZKEY)
    pos = 12 + sum(12 + len(b) for _, b in _ZSECS[:idx])
    if which in (0, 2):
        struct.pack_into("<I", buf, pos, sid)
    if which in (1, 2):
        struct.pack_into("<Q", buf, pos + 4, size)
    z = _read_or_format_error(fuzzdir, sj.read_zkey, bytes(buf))
    if z is not None and bytes(buf) != ZKEY:
        assert _ZSECS[idx][0] == 10     # only the unused contributions section goes unseen


@FUZZ
@given(perm=st.permutations(list(range(len(_ZSECS)))))
def test_zkey_sections_in_any_order(fuzzdir, perm):
    p = _write(fuzzdir, ref.binfile(_ZMAGIC, [_ZSECS[i] for i in perm], _ZVER))
    z, want = sj.read_zkey(p), sj.read_zkey(DATA / "mulchain" / "circuit.zkey")
    for n in ("alpha1", "delta2", "ic", "a", "b1", "b2", "c", "h"):
        assert np.array_equal(getattr(z, n), getattr(want, n))
    assert np.array_equal(z.coeffs.records, want.coeffs.records)


def test_zkey_container_errors(fuzzdir):
    _expect_error(fuzzdir, sj.read_zkey, b"", 0)
    _expect_error(fuzzdir, sj.read_zkey, WTNS, 0, "magic")
    _expect_error(fuzzdir, sj.read_zkey, b"zkey" + struct.pack("<I", 3) + ZKEY[8:], 4, "version")
    _expect_error(fuzzdir, sj.read_zkey, ZKEY[:8] + struct.pack("<I", 2**32 - 1) + ZKEY[12:], 8)
    _expect_error(fuzzdir, sj.read_zkey, ZKEY[:8] + struct.pack("<I", 11) + ZKEY[12:],
                  len(ZKEY), "truncated")
    # fewer sections than stored: the rest is ignored, as snarkjs does, unless a needed one is cut
    _expect_error(fuzzdir, sj.read_zkey, ZKEY[:8] + struct.pack("<I", 8) + ZKEY[12:], 8,
                  "H section (id 9)")
    missing = ref.binfile(_ZMAGIC, [s for s in _ZSECS if s[0] != 6], _ZVER)
    _expect_error(fuzzdir, sj.read_zkey, missing, 8, "B1 section (id 6)")
    dup = ref.binfile(_ZMAGIC, _ZSECS + [s for s in _ZSECS if s[0] == 7], _ZVER)
    _expect_error(fuzzdir, sj.read_zkey, dup, len(ZKEY), "one B2 section")


def test_zkey_header_errors(fuzzdir):
    s2 = _sec_off(ZKEY, 2)
    _expect_error(fuzzdir, sj.read_zkey, _zkey_with(1, struct.pack("<I", 2)), 24, "Groth16")
    _expect_error(fuzzdir, sj.read_zkey, _zkey_with(1, struct.pack("<II", 1, 0)), 16, "header")
    _expect_error(fuzzdir, sj.read_zkey, _zkey_with(2, patch={0: struct.pack("<I", 32)}), s2,
                  "n8q")
    _expect_error(fuzzdir, sj.read_zkey, _zkey_with(2, patch={4: b"\x00"}), s2 + 4, "q =")
    _expect_error(fuzzdir, sj.read_zkey, _zkey_with(2, patch={56: b"\x02"}), s2 + 56, "r =")
    _expect_error(fuzzdir, sj.read_zkey, _zkey_with(2, patch={52: struct.pack("<I", 48)}),
                  s2 + 52, "n8r")
    # a bn128 header: different primes, smaller section
    bn_q = 21888242871839275222246405745257275088696311157297823662689037894645226208583
    bn_r = 21888242871839275222246405745257275088548364400416034343698204186575808495617
    bn = (struct.pack("<I", 32) + bn_q.to_bytes(32, "little") + struct.pack("<I", 32) +
          bn_r.to_bytes(32, "little") + struct.pack("<III", 24, 3, 32) + bytes(64 * 3 + 128 * 3))
    _expect_error(fuzzdir, sj.read_zkey, _zkey_with(2, bn), s2, "n8q = 48")
    _expect_error(fuzzdir, sj.read_zkey, _zkey_with(2, dict(_ZSECS)[2][:30]), s2 - 8, "short")
    _expect_error(fuzzdir, sj.read_zkey, _zkey_with(2, dict(_ZSECS)[2] + b"\0"), s2 - 8,
                  "964 bytes")


@pytest.mark.parametrize("at, value, what", [
    (88, 25, "A section of 25 points"),       # sizes of A/B1/B2/C no longer match
    (88, 3, "nVars >= nPublic + 1"),
    (92, 4, "IC section of 5 points"),
    (92, 30, "nVars >= nPublic + 1"),
    (96, 48, "domainSize a power of two"),
    (96, 0, "domainSize a power of two"),
    (96, 64, "H section of 64 points"),
])
def test_zkey_wrong_counts(fuzzdir, at, value, what):
    s2 = _sec_off(ZKEY, 2)
    data = _zkey_with(2, patch={at: struct.pack("<I", value)})
    err = _expect_error(fuzzdir, sj.read_zkey, data, None, what)
    if "section" not in what:
        assert err.offset == s2 + at - (4 if at == 92 else 0)   # nPublic is judged via nVars
    else:                                                        # that section's size field
        sid = {"A": 5, "IC": 3, "H": 9}[what.split()[0]]
        assert err.offset == _sec_off(ZKEY, sid) - 8


def test_zkey_coefficient_row_outside_domain(fuzzdir):
    """domainSize 16 with 16 H points: the public rows (23..26) fall outside the domain."""
    secs = []
    for sid, body in _ZSECS:
        if sid == 2:
            body = body[:96] + struct.pack("<I", 16) + body[100:]
        if sid == 9:
            body = body[:16 * 96]
        secs.append((sid, body))
    err = _expect_error(fuzzdir, sj.read_zkey, ref.binfile(_ZMAGIC, secs, _ZVER), None,
                        "constraint < domainSize = 16")
    z = sj.read_zkey(DATA / "mulchain" / "circuit.zkey")
    i = int(np.flatnonzero(z.coeffs.constraint >= 16)[0])
    assert err.offset == _sec_off(ZKEY, 4) + 4 + 44 * i + 4


def test_zkey_wrong_coefficient_count(fuzzdir):
    s4 = _sec_off(ZKEY, 4)
    n = struct.unpack_from("<I", ZKEY, s4)[0]
    for bad in (n - 1, n + 1, 2**32 - 1):
        _expect_error(fuzzdir, sj.read_zkey, _zkey_with(4, patch={0: struct.pack("<I", bad)}),
                      s4, "coefficient count")
    body = dict(_ZSECS)[4]
    _expect_error(fuzzdir, sj.read_zkey, _zkey_with(4, body[:-1]), s4, "coefficient count")
    _expect_error(fuzzdir, sj.read_zkey, _zkey_with(4, b"\x00\x00"), s4 - 8, "coefficients")


@FUZZ
@given(i=st.integers(0, 97), field=st.sampled_from(["matrix", "constraint", "signal", "value"]),
       data=st.data())
def test_zkey_bad_coefficient(fuzzdir, i, field, data):
    s4 = _sec_off(ZKEY, 4)
    rel = 4 + 44 * i + {"matrix": 0, "constraint": 4, "signal": 8, "value": 12}[field]
    if field == "value":
        v = data.draw(st.integers(sj.R, 2**256 - 1)).to_bytes(32, "little")
    else:
        lo = {"matrix": 2, "constraint": 32, "signal": 24}[field]
        v = struct.pack("<I", data.draw(st.integers(lo, 2**32 - 1)))
    _expect_error(fuzzdir, sj.read_zkey, _zkey_with(4, patch={rel: v}), s4 + rel,
                  f"coefficient {i}")


@FUZZ
@given(sid=st.sampled_from([2, 3, 5, 6, 7, 8, 9]), data=st.data())
def test_zkey_non_canonical_coordinate(fuzzdir, sid, data):
    body = dict(_ZSECS)[sid]
    first = 4 + 48 + 4 + 32 + 12 if sid == 2 else 0
    k = data.draw(st.integers(0, (len(body) - first) // 48 - 1))
    v = data.draw(st.sampled_from([sj.Q, sj.Q + 1, 2**384 - 1]) | st.integers(sj.Q, 2**384 - 1))
    rel = first + 48 * k
    _expect_error(fuzzdir, sj.read_zkey, _zkey_with(sid, patch={rel: v.to_bytes(48, "little")}),
                  _sec_off(ZKEY, sid) + rel, "< q")


def _wtns_with(header=None, values=None, n=None):
    h = dict(_WSECS)[1]
    if header is not None:
        h = header
    if n is not None:
        h = h[:36] + struct.pack("<I", n)
    v = dict(_WSECS)[2] if values is None else values
    return ref.binfile(_WMAGIC, [(1, h), (2, v)], _WVER)


def test_wtns_errors(fuzzdir):
    hdr = dict(_WSECS)[1]
    _expect_error(fuzzdir, sj.read_wtns, b"", 0)
    _expect_error(fuzzdir, sj.read_wtns, ZKEY, 0, "magic")
    _expect_error(fuzzdir, sj.read_wtns, _wtns_with(header=struct.pack("<I", 48) + hdr[4:]), 24,
                  "n8")
    _expect_error(fuzzdir, sj.read_wtns, _wtns_with(header=hdr[:4] + b"\x02" + hdr[5:]), 28,
                  "prime")
    _expect_error(fuzzdir, sj.read_wtns, _wtns_with(header=hdr[:-1]), 16, "header")
    for n in (23, 25, 2**32 - 1):
        _expect_error(fuzzdir, sj.read_wtns, _wtns_with(n=n), 60, "witness count")
    _expect_error(fuzzdir, sj.read_wtns, ref.binfile(_WMAGIC, [(1, hdr)], _WVER), 8, "witness")


@FUZZ
@given(i=st.integers(0, 23), v=st.integers(sj.R, 2**256 - 1))
def test_wtns_non_canonical_value(fuzzdir, i, v):
    vals = bytearray(dict(_WSECS)[2])
    vals[32 * i:32 * i + 32] = v.to_bytes(32, "little")
    _expect_error(fuzzdir, sj.read_wtns, _wtns_with(values=bytes(vals)), 76 + 32 * i,
                  f"witness value {i}")


# ---------------------------------------------------------------------------------------------
# Larger synthetic files exercise the vectorized checks

def _random_fq_limbs(rng, n):
    """n random Fq elements < q as (n, 6) uint64 (top limb below q's top limb)."""
    a = rng.integers(0, 2**64, size=(n, 6), dtype=np.uint64)
    a[:, 5] %= np.uint64(sj.Q >> 320)
    return a


def _synthetic_zkey(n_vars, n_public, log_n, n_coef, seed=1):
    rng = np.random.default_rng(seed)
    n = 1 << log_n
    pts = lambda k, w: _random_fq_limbs(rng, k * w).tobytes()          # noqa: E731
    hdr = (struct.pack("<I", 48) + sj.Q.to_bytes(48, "little") + struct.pack("<I", 32) +
           sj.R.to_bytes(32, "little") + struct.pack("<III", n_vars, n_public, n) +
           pts(1, 2 * 3 + 4 * 3))
    rec = np.zeros(n_coef, dtype=sj._COEF_DTYPE)
    rec["matrix"] = rng.integers(0, 2, n_coef)
    rec["constraint"] = rng.integers(0, n, n_coef)
    rec["signal"] = rng.integers(0, n_vars, n_coef)
    val = rng.integers(0, 2**64, size=(n_coef, 4), dtype=np.uint64)
    val[:, 3] %= np.uint64(sj.R >> 192)
    rec["value"] = val
    secs = [(1, struct.pack("<I", 1)), (2, hdr),
            (4, struct.pack("<I", n_coef) + rec.tobytes()),
            (3, pts(n_public + 1, 2)), (9, pts(n, 2)), (8, pts(n_vars - n_public - 1, 2)),
            (5, pts(n_vars, 2)), (6, pts(n_vars, 2)), (7, pts(n_vars, 4)), (10, b"\x00" * 68)]
    return ref.binfile(b"zkey", secs), rec


def test_synthetic_large_zkey(fuzzdir):
    data, rec = _synthetic_zkey(n_vars=1 << 14, n_public=7, log_n=15, n_coef=1 << 16)
    p = _write(fuzzdir, data)
    t = time.perf_counter()
    z = sj.read_zkey(p)
    elapsed = time.perf_counter() - t
    assert elapsed < 5.0                       # ~10 ms; a per-element Python loop takes seconds
    assert np.array_equal(z.coeffs.value, rec["value"])
    assert np.array_equal(z.coeffs.signal, rec["signal"])
    assert z.b2.shape == (1 << 14, 24)
    # a bad coordinate deep inside B2 is found at its exact offset
    s7 = _sec_off(data, 7)
    rel = 192 * 12345 + 48 * 3
    bad = data[:s7 + rel] + sj.Q.to_bytes(48, "little") + data[s7 + rel + 48:]
    err = _expect_error(fuzzdir, sj.read_zkey, bad, s7 + rel, "point 12345, coordinate 3")
    assert "B2" in str(err)


def test_helpers_round_trip():
    for pt in [None, (1, 2), (sj.Q - 1, 0)]:
        assert sj.g1_from_mont(sj.g1_to_mont(pt)) == pt
    for pt in [None, ((1, 2), (3, 4)), ((sj.Q - 1, 0), (5, sj.Q - 2))]:
        assert sj.g2_from_mont(sj.g2_to_mont(pt)) == pt
    assert int.from_bytes(sj.fq_to_mont(1).tobytes(), "little") == 2**384 % sj.Q
    vals = [0, 1, sj.R - 1, 2**200 + 5]
    assert sj.fr_to_ints(sj.fr_from_ints(vals)) == vals
    with pytest.raises(ValueError, match="value 1"):
        sj.fr_from_ints([0, sj.R])


def test_synthetic_edge_sizes(fuzzdir):
    """No private signals (empty C section) and no coefficients, with C as the last section."""
    data, _ = _synthetic_zkey(n_vars=8, n_public=7, log_n=3, n_coef=0)
    magic, version, secs = ref.split_binfile(data)
    secs = [s for s in secs if s[0] not in (8, 10)] + [s for s in secs if s[0] == 8]
    assert secs[-1] == (8, b"")
    z = sj.read_zkey(_write(fuzzdir, ref.binfile(magic, secs, version)))
    assert z.c.shape == (0, 12) and len(z.coeffs) == 0 and z.coeffs.value.shape == (0, 4)
    assert z.ic.shape == (8, 12) and z.h.shape == (8, 12)


def test_moduli_from_the_curve_parameter():
    """BLS12-381: x = -0xd201000000010000, r = x^4 - x^2 + 1, q = (x - 1)^2 r / 3 + x."""
    x = -0xD201000000010000
    assert sj.R == x**4 - x**2 + 1
    assert sj.Q == (x - 1) ** 2 * sj.R // 3 + x
