"""Keygen against independent references, and the verifier on proofs computed here with
py_arkworks multi-exponentiations (a slow prover independent of cuzk's prover stages)."""
import random

import numpy as np
import pytest
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from cuzk._assignment import R_MOD, fr_ints_to_mont, fr_mont_to_ints
from cuzk._circuit import CSR, R1CS, porep_like
from cuzk._errors import FormatError
from cuzk._keygen import domain_root_int, keygen, keygen_random
from cuzk._params import decode_proof, encode_proof, read_params, write_params
from cuzk._verifier import (from_arkworks_g1, from_arkworks_g2, to_arkworks_g1, to_arkworks_g2,
                            verify, verify_batch)

r = R_MOD
G1, G2 = G1Point(), G2Point()


def g1(k):
    return from_arkworks_g1(G1 * Scalar(k % r))


def g2(k):
    return from_arkworks_g2(G2 * Scalar(k % r))


# ----------------------------------------------------------------------------- keygen

def cubic():
    """x^3 + x + 5 = out, with bellperson's input rows."""
    A = CSR.from_rows([[(2, 1)], [(3, 1)], [(4, 1), (2, 1), (0, 5)]])
    B = CSR.from_rows([[(2, 1)], [(2, 1)], [(0, 1)]])
    C = CSR.from_rows([[(3, 1)], [(4, 1)], [(1, 1)]])
    return R1CS(2, 3, A, B, C).with_input_rows()


def test_keygen_matches_bigint_qap():
    cs = cubic()
    tau, al, be, ga, de = 123456789, 1111, 2222, 3333, 4444
    pk = keygen(cs, tau, al, be, ga, de, threads=2)
    n = cs.domain_size
    w = domain_root_int(n.bit_length() - 1)
    dom = [pow(w, i, r) for i in range(n)]

    def lag(i):
        num = den = 1
        for j in range(n):
            if j != i:
                num = num * (tau - dom[j]) % r
                den = den * (dom[i] - dom[j]) % r
        return num * pow(den, -1, r) % r

    L = [lag(i) for i in range(n)]
    nv = cs.n_vars
    qap = []
    for M in (cs.A, cs.B, cs.C):
        vals = fr_mont_to_ints(M.vals)
        acc = [0] * nv
        for i in range(M.n_rows):
            for k in range(M.indptr[i], M.indptr[i + 1]):
                acc[M.cols[k]] = (acc[M.cols[k]] + vals[k] * L[i]) % r
        qap.append(acc)
    u, v, ww = qap
    gi, di = pow(ga, -1, r), pow(de, -1, r)
    k = cs.n_inputs
    ic = [(be * u[j] + al * v[j] + ww[j]) * gi % r for j in range(k)]
    ls = [(be * u[j] + al * v[j] + ww[j]) * di % r for j in range(k, nv)]
    zt = (pow(tau, n, r) - 1) % r
    hs = [pow(tau, i, r) * zt * di % r for i in range(n - 1)]
    da, dbi, dba = cs.densities()
    a_vars = list(range(k)) + [k + j for j in np.flatnonzero(da.to_bools())]
    b_vars = list(np.flatnonzero(dbi.to_bools())) + [k + j for j in np.flatnonzero(dba.to_bools())]

    assert np.array_equal(pk.vk.alpha_g1, g1(al)) and np.array_equal(pk.vk.beta_g1, g1(be))
    assert np.array_equal(pk.vk.beta_g2, g2(be)) and np.array_equal(pk.vk.gamma_g2, g2(ga))
    assert np.array_equal(pk.vk.delta_g1, g1(de)) and np.array_equal(pk.vk.delta_g2, g2(de))
    assert [tuple(p) for p in pk.vk.ic] == [tuple(g1(s)) for s in ic]
    assert [tuple(p) for p in pk.l] == [tuple(g1(s)) for s in ls]
    assert [tuple(p) for p in pk.h] == [tuple(g1(s)) for s in hs]
    assert [tuple(p) for p in pk.a] == [tuple(g1(u[j])) for j in a_vars]
    assert [tuple(p) for p in pk.b_g1] == [tuple(g1(v[j])) for j in b_vars]
    assert [tuple(p) for p in pk.b_g2] == [tuple(g2(v[j])) for j in b_vars]


def test_keygen_rejects_degenerate():
    cs = cubic()
    w = domain_root_int(3)
    with pytest.raises(ValueError, match="domain"):
        keygen(cs, w, 1, 2, 3, 4)
    with pytest.raises(ValueError):
        keygen(cs, 5, 1, 2, 0, 4)
    with pytest.raises(TypeError):
        keygen(cs, 5.0, 1, 2, 3, 4)
    # an aux variable used nowhere: L point at infinity (bellperson: UnconstrainedVariable)
    A = CSR.from_rows([[(2, 1)]])
    B = CSR.from_rows([[(0, 1)]])
    C = CSR.from_rows([[(2, 1)]])
    lonely = R1CS(2, 2, A, B, C).with_input_rows()
    with pytest.raises(ValueError, match="L\\[1\\]"):
        keygen_random(lonely, seed=0)


# ----------------------------------------------------------------------------- slow prover

def compute_h(asg, n):
    """Coefficients of (A·B − C)/Z via cuzk's CPU NTT (ntt_mont) and Python-int pointwise."""
    _ntt = pytest.importorskip("cuzk._native._ntt",
                               reason="needs the CPU NTT module (cuzk._native._ntt)")
    polys = []
    for x in (asg.a, asg.b, asg.c):
        e = np.zeros((n, 4), np.uint64)
        e[:x.shape[0]] = x
        _ntt.ntt_mont(e, inverse=True)
        _ntt.ntt_mont(e, coset=True)
        polys.append(fr_mont_to_ints(e))
    zinv = pow((pow(7, n, r) - 1) % r, -1, r)  # Z(g·ω^i) = g^n − 1 on the coset
    q = fr_ints_to_mont([(a * b - c) * zinv % r for a, b, c in zip(*polys)])
    _ntt.ntt_mont(q, inverse=True, coset=True)
    return fr_mont_to_ints(q)


def slow_prove(pk, asg, rr, ss):
    """bellperson's prover equations with arkworks multiexps (r, s = rr, ss)."""
    n = asg.domain_size
    h = compute_h(asg, n)
    assert h[n - 1] == 0  # deg h ≤ n − 2 for a satisfied circuit
    inputs = fr_mont_to_ints(asg.inputs)
    aux = fr_mont_to_ints(asg.aux)
    a_aux = [x for x, d in zip(aux, asg.a_aux_density.to_bools()) if d]
    b_in = [x for x, d in zip(inputs, asg.b_input_density.to_bools()) if d]
    b_aux = [x for x, d in zip(aux, asg.b_aux_density.to_bools()) if d]

    def mexp1(pts, ks):
        return G1Point.multiexp_unchecked([to_arkworks_g1(p, False) for p in pts],
                                          [Scalar(k) for k in ks])

    def mexp2(pts, ks):
        return G2Point.multiexp_unchecked([to_arkworks_g2(p, False) for p in pts],
                                          [Scalar(k) for k in ks])

    vk = pk.vk
    alpha, beta1 = to_arkworks_g1(vk.alpha_g1), to_arkworks_g1(vk.beta_g1)
    beta2, delta1, delta2 = (to_arkworks_g2(vk.beta_g2), to_arkworks_g1(vk.delta_g1),
                             to_arkworks_g2(vk.delta_g2))
    A = alpha + mexp1(pk.a, inputs + a_aux) + delta1 * Scalar(rr)
    B2 = beta2 + mexp2(pk.b_g2, b_in + b_aux) + delta2 * Scalar(ss)
    B1 = beta1 + mexp1(pk.b_g1, b_in + b_aux) + delta1 * Scalar(ss)
    C = (mexp1(pk.l, aux) + mexp1(pk.h, h[:n - 1]) + A * Scalar(ss) + B1 * Scalar(rr)
         - delta1 * Scalar(rr * ss % r))
    return from_arkworks_g1(A), from_arkworks_g2(B2), from_arkworks_g1(C)


@pytest.fixture(scope="module")
def setup8():
    cs, inputs, aux = porep_like(8, 21)
    pk = keygen_random(cs, seed=5, threads=2)
    asg = cs.assignment(inputs, aux)
    asg.validate(pk)
    proof = slow_prove(pk, asg, 1234567, 7654321)
    return cs, pk, asg, proof


def test_proof_verifies(setup8):
    cs, pk, asg, proof = setup8
    pub = asg.public_inputs()
    assert len(pub) == cs.n_inputs - 1
    assert verify(pk.vk, proof, pub)
    blob = encode_proof(*proof)
    assert len(blob) == 192
    assert verify(pk.vk, blob, pub)
    assert verify(pk.vk, blob, asg.inputs[1:])           # Montgomery array form


def test_rejects_tampered(setup8):
    cs, pk, asg, proof = setup8
    pub = asg.public_inputs()
    A, B, C = proof
    plus_g = from_arkworks_g1(to_arkworks_g1(A) + G1)
    assert not verify(pk.vk, (plus_g, B, C), pub)
    assert not verify(pk.vk, (A, B, from_arkworks_g1(to_arkworks_g1(C) + G1)), pub)
    assert not verify(pk.vk, (A, from_arkworks_g2(to_arkworks_g2(B) + G2), C), pub)
    assert not verify(pk.vk, (C, B, A), pub)
    bad_pub = list(pub)
    bad_pub[0] = (bad_pub[0] + 1) % r
    assert not verify(pk.vk, proof, bad_pub)
    # a valid encoding of a wrong point: False, not an exception
    assert not verify(pk.vk, encode_proof(plus_g, B, C), pub)


def test_rejects_wrong_vk(setup8):
    cs, pk, asg, proof = setup8
    other = keygen_random(cs, seed=6)
    assert not verify(other.vk, proof, asg.public_inputs())


def test_verify_input_errors(setup8):
    cs, pk, asg, proof = setup8
    pub = asg.public_inputs()
    with pytest.raises(ValueError, match="public inputs"):
        verify(pk.vk, proof, pub[:-1])
    with pytest.raises(ValueError, match="not in"):
        verify(pk.vk, proof, [r] + pub[1:])
    blob = bytearray(encode_proof(*proof))
    with pytest.raises(FormatError):
        verify(pk.vk, bytes(blob[:100]), pub)
    blob[0] ^= 0x80  # drop the compression flag
    with pytest.raises(FormatError):
        verify(pk.vk, bytes(blob), pub)
    with pytest.raises(ValueError):
        bad = proof[0].copy()
        bad[0] ^= 1
        verify(pk.vk, (bad, proof[1], proof[2]), pub)


def _mont_plus_p(point, coord):
    """``point`` (Montgomery limbs) with coordinate ``coord``'s Montgomery value raised by p:
    the same field element, in a representation that is not reduced."""
    from cuzk._verifier import Q_MOD
    out = point.copy()
    m = int.from_bytes(out[6 * coord:6 * coord + 6].astype("<u8").tobytes(), "little") + Q_MOD
    assert m < 1 << 384
    out[6 * coord:6 * coord + 6] = np.frombuffer(m.to_bytes(48, "little"), "<u8")
    return out


def test_arkworks_conversions_check_their_points(setup8):
    """to_arkworks_g1/g2: all-zero limbs are the identity; a coordinate whose Montgomery value
    is not below p, a wrong limb count and a point off the curve raise ValueError (unchecked,
    the unreduced value converts as its value mod p); verify refuses such proof arrays and a
    proof or public inputs of the wrong form."""
    cs, pk, asg, proof = setup8
    pub = asg.public_inputs()
    A, B, C = proof
    assert to_arkworks_g1(np.zeros(12, np.uint64)) == G1Point.identity()
    assert to_arkworks_g2(np.zeros(24, np.uint64)) == G2Point.identity()
    for coord in (0, 1):
        bad = _mont_plus_p(A, coord)
        with pytest.raises(ValueError, match="G1 coordinate not reduced"):
            to_arkworks_g1(bad)
        assert to_arkworks_g1(bad, checked=False) == to_arkworks_g1(A)
        with pytest.raises(ValueError, match="not reduced"):
            verify(pk.vk, (bad, B, C), pub)
    for coord in range(4):
        bad = _mont_plus_p(B, coord)
        with pytest.raises(ValueError, match="G2 coordinate not reduced"):
            to_arkworks_g2(bad)
        assert to_arkworks_g2(bad, checked=False) == to_arkworks_g2(B)
    with pytest.raises(ValueError, match=r"a G1 point must be 12 uint64 limbs, got shape \(11,\)"):
        to_arkworks_g1(A[:11])
    with pytest.raises(ValueError, match=r"a G2 point must be 24 uint64 limbs, got shape \(12,\)"):
        to_arkworks_g2(A)
    off = B.copy()
    off[18] ^= 1                            # y.c1 changed: (x, y) is off the curve
    with pytest.raises(ValueError, match="not a valid G2 point"):
        to_arkworks_g2(off)
    with pytest.raises(ValueError, match="not a valid G2 point"):
        verify(pk.vk, (A, off, C), pub)
    with pytest.raises(TypeError, match="192 bytes or an"):
        verify(pk.vk, 5, pub)
    with pytest.raises(TypeError, match="VerifyingKey"):
        verify_batch(object(), [proof], [pub])
    with pytest.raises(ValueError, match=r"uint64 \(k, 4\)"):
        verify(pk.vk, proof, asg.inputs[1:].reshape(-1))


def test_verify_prepared_inputs(setup8):
    """verify(..., prepared=prepare_inputs(vk, pub)): the same verdicts as with the inputs, for
    the right and a tampered proof and for other inputs; prepared inputs of another vk are
    refused, and the inputs' errors come from prepare_inputs."""
    from cuzk._verifier import prepare_inputs
    cs, pk, asg, proof = setup8
    pub = asg.public_inputs()
    prep = prepare_inputs(pk.vk, pub)
    assert verify(pk.vk, proof, prepared=prep)
    assert verify(pk.vk, encode_proof(*proof), prepared=prep)
    A, B, C = proof
    assert not verify(pk.vk, (A, B, from_arkworks_g1(to_arkworks_g1(C) + G1)), prepared=prep)
    bad_pub = list(pub)
    bad_pub[0] = (bad_pub[0] + 1) % r
    assert not verify(pk.vk, proof, prepared=prepare_inputs(pk.vk, bad_pub))
    other = keygen_random(cs, seed=6)
    with pytest.raises(ValueError, match="another verifying key"):
        verify(other.vk, proof, prepared=prep)
    with pytest.raises(ValueError, match="public inputs"):
        prepare_inputs(pk.vk, pub[:-1])
    with pytest.raises(TypeError, match="public_inputs or prepared"):
        verify(pk.vk, proof)


def test_verify_batch(setup8):
    cs, pk, asg, proof = setup8
    pub = asg.public_inputs()
    # a second proof of the same statement with other randomizers, and one of another witness
    proof2 = slow_prove(pk, asg, 99, 101)
    assert proof2[0].tobytes() != proof[0].tobytes()
    assert verify_batch(pk.vk, [proof, encode_proof(*proof2)], [pub, pub])
    assert verify_batch(pk.vk, [], [])
    bad_pub = list(pub)
    bad_pub[-1] = (bad_pub[-1] + 5) % r
    assert not verify_batch(pk.vk, [proof, proof2], [pub, bad_pub])
    A, B, C = proof2
    assert not verify_batch(pk.vk, [proof, (A, B, from_arkworks_g1(to_arkworks_g1(C) + G1))],
                            [pub, pub])
    with pytest.raises(ValueError):
        verify_batch(pk.vk, [proof], [pub, pub])


def test_params_file_proof_roundtrip(setup8, tmp_path):
    """The written .params reproduce the same proof bytes."""
    cs, pk, asg, proof = setup8
    p = tmp_path / "c.params"
    write_params(p, pk)
    pk2 = read_params(p, checked=True)
    assert pk2 == pk
    assert verify(pk2.vk, decode_proof(encode_proof(*proof)), asg.public_inputs())


def test_keygen_deterministic_and_sizes():
    cs, inputs, aux = porep_like(10, 2)
    pk1 = keygen_random(cs, seed=9)
    pk2 = keygen_random(cs, seed=9)
    assert pk1 == pk2
    asg = cs.assignment(inputs, aux)
    asg.validate(pk1)
    assert pk1.h.shape[0] == 1023
    proof = slow_prove(pk1, asg, random.randrange(r), random.randrange(r))
    assert verify(pk1.vk, proof, asg.public_inputs())


def test_verify_cli_bellperson_form(setup8, tmp_path, capsys):
    import argparse
    from cuzk import _snarkjs as sj
    from cuzk._params import write_vk
    from cuzk._cli import verify_cli
    cs, pk, asg, proof = setup8
    vk, pb, pub = tmp_path / "c.vk", tmp_path / "proof.bin", tmp_path / "public.json"
    write_vk(vk, pk.vk)
    pb.write_bytes(encode_proof(*proof))
    sj.write_public_json(pub, asg.public_inputs())
    ns = argparse.Namespace(vk=str(vk), proof=str(pb), public=str(pub))
    assert verify_cli(ns) == 0 and "OK" in capsys.readouterr().out
    pb.write_bytes(encode_proof(proof[2], proof[1], proof[0]))
    assert verify_cli(ns) == 1 and "INVALID" in capsys.readouterr().out
    sj.write_public_json(pub, asg.public_inputs()[1:])
    with pytest.raises(FormatError, match="public inputs") as ei:
        verify_cli(ns)
    assert ei.value.path == str(pub)
    sj.write_public_json(pub, asg.public_inputs())
    pb.write_bytes(encode_proof(*proof)[:191])
    with pytest.raises(FormatError) as ei:
        verify_cli(ns)
    assert ei.value.path == str(pb)
