"""The CPU prover end to end, and stage by stage against plain references."""
import numpy as np
import pytest

from cuzk._circuit import porep_like
from cuzk._keygen import keygen_random
from cuzk._prover import CpuStages, R_MODULUS, prove, prove_partitions, public_inputs
from cuzk._verifier import verify, verify_batch
from cuzk._native import _field, _msm


@pytest.fixture(scope="module", params=[(7, 1), (9, 2)], ids=["2^7", "2^9"])
def circuit(request):
    log_n, seed = request.param
    r1cs, inputs, aux = porep_like(log_n, seed)
    pk = keygen_random(r1cs, seed=seed)
    asg = r1cs.assignment(inputs, aux)
    return r1cs, pk, asg


def test_proof_verifies_and_is_reproducible(circuit):
    _, pk, asg = circuit
    t = {}
    p1 = prove(pk, asg, r=12345, s=67890, backend="cpu", timings=t)
    assert len(p1) == 192
    assert verify(pk.vk, p1, public_inputs(asg))
    assert prove(pk, asg, r=12345, s=67890, backend="cpu", threads=1) == p1
    for stage in ("h", "prep_msm", "l", "a", "b_g1", "b_g2", "epilogue", "total"):
        assert t[stage] >= 0
    # random randomizers: different bytes, still valid
    p2 = prove(pk, asg, backend="cpu", verify=True)
    assert p2 != p1 and verify(pk.vk, p2, public_inputs(asg))


def test_bad_proofs_rejected(circuit):
    r1cs, pk, asg = circuit
    proof = prove(pk, asg, r=1, s=2, backend="cpu")
    pub = public_inputs(asg)
    # a different valid-looking proof: swap in A of another proof
    other = prove(pk, asg, r=3, s=4, backend="cpu")
    assert not verify(pk.vk, other[:48] + proof[48:], pub)
    wrong = list(pub)
    wrong[0] = (wrong[0] + 1) % R_MODULUS
    assert not verify(pk.vk, proof, wrong)
    pk_other = keygen_random(r1cs, seed=1234)   # same circuit, other toxic waste: wrong vk
    assert not verify(pk_other.vk, proof, pub)


def test_batch_and_partitions(circuit):
    _, pk, asg = circuit
    proofs = prove_partitions(pk, [asg, asg], backend="cpu")
    assert len(proofs) == 384
    pub = public_inputs(asg)
    assert verify_batch(pk.vk, [proofs[:192], proofs[192:]], [pub, pub])


def test_split_equals_plain_msm(circuit):
    """prep_msm split + batch add + tail MSM == the plain MSM over the whole query."""
    _, pk, asg = circuit
    st = CpuStages(threads=2)
    prep = st.prep_msm(asg)
    n_in = asg.inputs.shape[0]
    aux_can = _field.from_mont(asg.aux, "fr")
    in_can = _field.from_mont(asg.inputs, "fr")
    a_bits = np.unpackbits(asg.a_aux_density.words.view(np.uint8), bitorder="little")[: asg.aux.shape[0]]
    b_bits = np.unpackbits(asg.b_aux_density.words.view(np.uint8), bitorder="little")[: asg.aux.shape[0]]
    bi_bits = np.unpackbits(asg.b_input_density.words.view(np.uint8), bitorder="little")[:n_in]
    plain = {
        "l": (pk.l, aux_can),
        "a": (pk.a, np.concatenate([in_can, aux_can[a_bits.astype(bool)]])),
        "b": (pk.b_g1, np.concatenate([in_can[bi_bits.astype(bool)], aux_can[b_bits.astype(bool)]])),
    }
    for q, (pts, scal) in plain.items():
        assert pts.shape[0] == scal.shape[0]
        want = _msm.msm(pts, np.ascontiguousarray(scal), "g1")
        got = st.query(pts, prep, q, "g1")
        assert np.array_equal(got, want), q
    scal = plain["b"][1]
    assert np.array_equal(st.b_g2_msm(pk, prep), _msm.msm(pk.b_g2, np.ascontiguousarray(scal), "g2"))


def test_h_is_exact_quotient():
    """h·Z == a·b − c as polynomials (Python big ints, naive interpolation at a small size)."""
    r1cs, inputs, aux = porep_like(5, 3)
    asg = r1cs.assignment(inputs, aux)
    h = CpuStages(threads=1).h_coeffs(asg)
    n = h.shape[0]
    R = R_MODULUS
    def ints(arr):
        can = _field.from_mont(arr, "fr")
        return [int.from_bytes(row.tobytes(), "little") for row in can]
    a, b, c = (ints(v) + [0] * (n - v.shape[0]) for v in (asg.a, asg.b, asg.c))
    hc = ints(h)
    w = pow(7, (R - 1) // n, R)
    def interp(ev):  # inverse DFT
        ninv = pow(n, -1, R)
        return [sum(ev[j] * pow(w, (-i * j) % n, R) for j in range(n)) * ninv % R for i in range(n)]
    A, B, C = interp(a), interp(b), interp(c)
    prod = [0] * (2 * n)
    for i, x in enumerate(A):
        if x:
            for j, y in enumerate(B):
                prod[i + j] = (prod[i + j] + x * y) % R
    for i, x in enumerate(C):
        prod[i] = (prod[i] - x) % R
    # h·(X^n − 1)
    hz = [0] * (2 * n)
    for i, x in enumerate(hc):
        hz[i + n] = (hz[i + n] + x) % R
        hz[i] = (hz[i] - x) % R
    assert hz == prod
    assert hc[n - 1] == 0


def test_assignment_mismatch_is_value_error(circuit):
    _, pk, asg = circuit
    other_r1cs, i2, a2 = porep_like(6, 1)
    with pytest.raises(ValueError):
        prove(pk, other_r1cs.assignment(i2, a2), backend="cpu")


def _cuda_ok():
    from cuzk._backend import cuda_available
    return cuda_available()[0]


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_ok(), reason="no usable CUDA device")
def test_cuda_backend_gives_cpu_bytes(circuit):
    _, pk, asg = circuit
    cpu = prove(pk, asg, r=777, s=888, backend="cpu")
    gpu = prove(pk, asg, r=777, s=888, backend="cuda", verify=True)
    assert gpu == cpu


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_ok(), reason="no usable CUDA device")
def test_cuda_backend_row_check(circuit):
    """On the GPU the a∘b = c check runs on the CPU beside the region (c is never uploaded):
    the first bad row is named."""
    from cuzk._assignment import Assignment
    from cuzk._errors import UnsatisfiedAssignmentError
    _, pk, asg = circuit
    c = asg.c.copy()
    c[5] = c[6]
    bad = Assignment(**{f: getattr(asg, f) for f in asg.__dataclass_fields__ if f != "c"}, c=c)
    with pytest.raises(UnsatisfiedAssignmentError) as e:
        prove(pk, bad, backend="cuda")
    assert e.value.row == 5
