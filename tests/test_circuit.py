"""R1CS container, native sparse kernels, the PoRep-like family, fixed-base multiplication and
the Assignment model, against Python big-int and py_arkworks references."""
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from cuzk._assignment import (Assignment, Density, R_MOD, fr_ints_to_mont, fr_mont_to_ints)
from cuzk._circuit import CSR, R1CS, porep_like, porep_like_sizes
from cuzk._errors import FormatError
from cuzk._native import _r1cs
from cuzk._verifier import from_arkworks_g1, from_arkworks_g2

r = R_MOD


def rand_fr(rng, n):
    return [rng.randrange(r) for _ in range(n)]


def csr_rows(M):
    """CSR -> list of rows of (col, int value)."""
    vals = fr_mont_to_ints(M.vals)
    return [[(int(M.cols[k]), vals[k]) for k in range(M.indptr[i], M.indptr[i + 1])]
            for i in range(M.n_rows)]


def random_csr(rng, m, n_vars, max_row=4):
    rows = []
    for _ in range(m):
        rows.append([(rng.randrange(n_vars), rng.choice([1, 2, rng.randrange(r)]))
                     for _ in range(rng.randrange(max_row + 1))])
    return rows


# ----------------------------------------------------------------------------- sparse kernels

def test_spmv_matches_bigints():
    rng = random.Random(1)
    n_vars, m = 37, 53
    rows = random_csr(rng, m, n_vars)
    M = CSR.from_rows(rows)
    z = rand_fr(rng, n_vars)
    out = fr_mont_to_ints(_r1cs.spmv(M.indptr, M.cols, M.vals, fr_ints_to_mont(z), threads=3))
    want = [sum(c * z[j] for j, c in row) % r for row in rows]
    assert out == want


def test_sparse_kernels_reject_bad_structure():
    M = CSR.from_rows([[(0, 1), (3, 2)], [(1, 5)]])
    z = fr_ints_to_mont([1, 2, 3])
    with pytest.raises(ValueError, match="out of range"):
        _r1cs.spmv(M.indptr, M.cols, M.vals, z)
    with pytest.raises(ValueError, match="out of range"):
        _r1cs.spmv_t(M.indptr, M.cols, M.vals, z, 3)
    with pytest.raises(ValueError, match="decreases"):
        _r1cs.spmv(np.array([0, 3, 2, 3]), M.cols, M.vals, fr_ints_to_mont([1, 2, 3, 4]))
    with pytest.raises(ValueError, match="indptr"):
        _r1cs.spmv(np.array([0, 1, 2], np.int64), M.cols, M.vals, fr_ints_to_mont([1] * 4))
    with pytest.raises(ValueError):
        _r1cs.spmv(M.indptr, M.cols.astype(np.int64), M.vals, fr_ints_to_mont([1] * 4))


def test_spmv_t_matches_bigints():
    rng = random.Random(2)
    n_vars, m = 41, 29
    rows = random_csr(rng, m, n_vars)
    M = CSR.from_rows(rows)
    y = rand_fr(rng, m + 3)  # y may be longer than m
    for threads in (1, 2, 5):
        out = fr_mont_to_ints(_r1cs.spmv_t(M.indptr, M.cols, M.vals, fr_ints_to_mont(y),
                                           n_vars, threads=threads))
        want = [0] * n_vars
        for i, row in enumerate(rows):
            for j, c in row:
                want[j] = (want[j] + c * y[i]) % r
        assert out == want


def test_lagrange_coeffs_bigints():
    from cuzk._keygen import domain_root_int
    rng = random.Random(3)
    for log_n in (0, 1, 3, 6):
        n = 1 << log_n
        w = domain_root_int(log_n)
        assert pow(w, n, r) == 1 and (n == 1 or pow(w, n // 2, r) != 1)
        tau = rng.randrange(r)
        got = fr_mont_to_ints(_r1cs.lagrange_coeffs(fr_ints_to_mont([tau])[0],
                                                    fr_ints_to_mont([w])[0], n, threads=2))
        pts = [pow(w, i, r) for i in range(n)]
        for i in range(n):  # L_i(τ) = Π_{j≠i} (τ − ω^j)/(ω^i − ω^j)
            num = den = 1
            for j in range(n):
                if j != i:
                    num = num * (tau - pts[j]) % r
                    den = den * (pts[i] - pts[j]) % r
            assert got[i] == num * pow(den, -1, r) % r
    with pytest.raises(ValueError, match="domain"):
        w = domain_root_int(2)
        _r1cs.lagrange_coeffs(fr_ints_to_mont([w])[0], fr_ints_to_mont([w])[0], 4)


def test_geometric_and_combine():
    rng = random.Random(4)
    f, q = rng.randrange(r), rng.randrange(r)
    got = fr_mont_to_ints(_r1cs.geometric(fr_ints_to_mont([f])[0], fr_ints_to_mont([q])[0],
                                          1000, threads=3))
    assert got == [f * pow(q, i, r) % r for i in range(1000)]
    u, v, w = (rand_fr(rng, 50) for _ in range(3))
    al, be, s = rand_fr(rng, 3)
    m = lambda x: fr_ints_to_mont(x)  # noqa: E731
    got = fr_mont_to_ints(_r1cs.qap_combine(m(u), m(v), m(w), m([al])[0], m([be])[0],
                                            m([s])[0], threads=2))
    assert got == [(be * u[i] + al * v[i] + w[i]) * s % r for i in range(50)]


def test_fr_first_unreduced():
    a = fr_ints_to_mont([1, 2, 3])
    assert _r1cs.fr_first_unreduced(a) == -1
    a[1] = [0xFFFFFFFF00000001, 0x53BDA402FFFE5BFE, 0x3339D80809A1D805, 0x73EDA753299D7D48]
    assert _r1cs.fr_first_unreduced(a) == 1


# ----------------------------------------------------------------------------- fixed base

EDGE = [0, 1, 2, r - 1, r - 2, (r - 1) // 2, 1 << 128, (1 << 254) + 12345]


@pytest.mark.parametrize("window", [None, 2, 5, 8, 13])
def test_fixed_base_g1_matches_arkworks(window):
    rng = random.Random(5)
    ks = EDGE + rand_fr(rng, 40)
    out = _r1cs.fixed_base_mul("g1", fr_ints_to_mont(ks), window=window, threads=3)
    for k, p in zip(ks, out):
        assert np.array_equal(p, from_arkworks_g1(G1Point() * Scalar(k))), k


@pytest.mark.parametrize("window", [None, 3, 7])
def test_fixed_base_g2_matches_arkworks(window):
    rng = random.Random(6)
    ks = EDGE + rand_fr(rng, 12)
    out = _r1cs.fixed_base_mul("g2", fr_ints_to_mont(ks), window=window, threads=2)
    for k, p in zip(ks, out):
        assert np.array_equal(p, from_arkworks_g2(G2Point() * Scalar(k))), k


def test_fixed_base_custom_base_and_errors():
    base_k = 987654321
    base = from_arkworks_g1(G1Point() * Scalar(base_k))
    ks = [3, r - 5, 77]
    out = _r1cs.fixed_base_mul("g1", fr_ints_to_mont(ks), base=base)
    for k, p in zip(ks, out):
        assert np.array_equal(p, from_arkworks_g1(G1Point() * Scalar(k * base_k % r)))
    with pytest.raises(ValueError):
        _r1cs.fixed_base_mul("g3", fr_ints_to_mont([1]))
    with pytest.raises(ValueError):
        _r1cs.fixed_base_mul("g1", fr_ints_to_mont([1]), base=np.zeros(12, np.uint64))
    with pytest.raises(ValueError):
        _r1cs.fixed_base_mul("g1", fr_ints_to_mont([1]), window=1)
    assert _r1cs.fixed_base_mul("g2", np.zeros((0, 4), np.uint64)).shape == (0, 24)


# ----------------------------------------------------------------------------- R1CS

def test_r1cs_validation():
    ok = CSR.from_rows([[(0, 1)], [(1, 2)]])
    with pytest.raises(ValueError, match="column"):
        R1CS(1, 1, ok, ok, CSR.from_rows([[(0, 1)], [(2, 1)]]))
    with pytest.raises(ValueError, match="rows"):
        R1CS(1, 1, ok, ok, CSR.from_rows([[(0, 1)]]))
    with pytest.raises(ValueError, match="decreases"):
        CSR(np.array([0, 2, 1, 2]), np.zeros(2, np.uint32), np.zeros((2, 4), np.uint64))
    with pytest.raises(ValueError, match="nnz"):
        CSR(np.array([0, 1]), np.zeros(2, np.uint32), np.zeros((2, 4), np.uint64))


def test_small_r1cs_assignment_and_input_rows():
    # x^3 + x + 5 = out (out public): aux = [x, x2, x3]; z = [1, out, x, x2, x3]
    A = CSR.from_rows([[(2, 1)], [(3, 1)], [(4, 1), (2, 1), (0, 5)]])
    B = CSR.from_rows([[(2, 1)], [(2, 1)], [(0, 1)]])
    C = CSR.from_rows([[(3, 1)], [(4, 1)], [(1, 1)]])
    cs = R1CS(2, 3, A, B, C).with_input_rows()
    assert cs.n_constraints == 5 and cs.domain_size == 8
    x = 3
    inputs = fr_ints_to_mont([1, x**3 + x + 5])
    aux = fr_ints_to_mont([x, x * x, x**3])
    assert cs.is_satisfied(inputs, aux)
    assert cs.unsatisfied_row(inputs, fr_ints_to_mont([x, x * x, x**3 + 1])) == 1
    asg = cs.assignment(inputs, aux)
    assert fr_mont_to_ints(asg.a) == [3, 9, 35, 1, 35]
    assert fr_mont_to_ints(asg.b) == [3, 3, 1, 0, 0]
    assert fr_mont_to_ints(asg.c) == [9, 27, 35, 0, 0]
    assert asg.a_aux_density.to_bools().tolist() == [True, True, True]
    assert asg.b_input_density.to_bools().tolist() == [True, False]
    assert asg.b_aux_density.to_bools().tolist() == [True, False, False]
    with pytest.raises(ValueError, match="inputs\\[0\\]"):
        cs.assignment(fr_ints_to_mont([2, 35]), aux)


@pytest.mark.parametrize("log_n,seed", [(4, 0), (5, 1), (6, 2), (8, 3), (10, 4), (12, 5)])
def test_porep_like_satisfied(log_n, seed):
    cs, inputs, aux = porep_like(log_n, seed)
    k, n_aux, m = porep_like_sizes(log_n)
    assert (cs.n_inputs, cs.n_aux, cs.n_constraints) == (k, n_aux, m)
    assert cs.domain_size == 1 << log_n
    assert cs.is_satisfied(inputs, aux)
    asg = cs.assignment(inputs, aux, threads=2)
    assert asg.domain_size == 1 << log_n
    assert asg.a.shape[0] == m
    # the input rows: A = input_i, B = C = 0
    assert np.array_equal(asg.a[m - k:], inputs)
    assert not asg.b[m - k:].any() and not asg.c[m - k:].any()


def test_porep_like_bigint_reference():
    cs, inputs, aux = porep_like(6, 11)
    z = fr_mont_to_ints(np.concatenate([inputs, aux]))
    ev = [[sum(c * z[j] for j, c in row) % r for row in csr_rows(M)] for M in (cs.A, cs.B, cs.C)]
    assert all(a * b % r == c for a, b, c in zip(*ev))
    asg = cs.assignment(inputs, aux)
    assert [fr_mont_to_ints(x) for x in (asg.a, asg.b, asg.c)] == ev


def test_porep_like_shape_targets():
    log_n = 14
    cs, inputs, aux = porep_like(log_n, 7)
    da, dbi, dba = cs.densities()
    m = cs.n_constraints
    assert abs(da.popcount() / cs.n_aux - 0.997) < 0.001
    assert abs(dba.popcount() / cs.n_aux - 0.254) < 0.002
    assert dbi.to_bools()[0]                 # the constant 1 is in B
    assert cs.n_inputs == 32 and 0 < dbi.popcount() < cs.n_inputs
    assert abs(cs.A.nnz / m - 2.4) < 0.05
    assert abs(cs.B.nnz / m - 1.0) < 0.05
    assert abs(cs.C.nnz / m - 2.2) < 0.05
    vals = fr_mont_to_ints(aux)
    bits = sum(v in (0, 1) for v in vals) / len(vals)
    assert abs(bits - 0.90) < 0.02
    assert sum(v == 0 for v in vals) > 0.4 * len(vals)
    assert 0.95 < cs.n_aux / m < 1.0        # constraints ≈ variables
    # every aux variable is constrained somewhere
    used = (cs.A.used_columns(cs.n_vars) | cs.B.used_columns(cs.n_vars)
            | cs.C.used_columns(cs.n_vars))
    assert used.all()


def test_porep_like_deterministic():
    a = porep_like(9, 42)
    b = porep_like(9, 42)
    c = porep_like(9, 43)
    for M1, M2 in zip((a[0].A, a[0].B, a[0].C), (b[0].A, b[0].B, b[0].C)):
        for f in ("indptr", "cols", "vals"):
            assert np.array_equal(getattr(M1, f), getattr(M2, f))
    assert np.array_equal(a[1], b[1]) and np.array_equal(a[2], b[2])
    assert not np.array_equal(a[2], c[2])
    assert porep_like_sizes(27) == (328, porep_like_sizes(27)[1], (1 << 27) - (1 << 22))
    with pytest.raises(ValueError):
        porep_like(3, 0)


# ----------------------------------------------------------------------------- Density/Assignment

def test_density_bits():
    rng = np.random.default_rng(0)
    for n in (0, 1, 63, 64, 65, 200):
        m = rng.random(n) < 0.3
        d = Density.from_bools(m)
        assert d.words.shape == ((n + 63) // 64,)
        assert d.popcount() == int(m.sum())
        assert d.to_bools().tolist() == m.tolist()
        for i in range(n):
            assert bool((int(d.words[i // 64]) >> (i % 64)) & 1) == m[i]
    d = Density(np.array([2**64 - 1], np.uint64), 3)  # stray bits past n_bits are ignored
    assert d.popcount() == 3
    with pytest.raises(ValueError):
        Density(np.zeros(2, np.uint64), 64)


@pytest.fixture(scope="module")
def small_asg():
    cs, inputs, aux = porep_like(8, 1)
    return cs.assignment(inputs, aux)


@pytest.mark.parametrize("form", ["montgomery", "canonical"])
def test_assignment_npz_roundtrip(tmp_path, small_asg, form):
    p = tmp_path / "a.npz"
    small_asg.save_npz(p, form=form)
    with np.load(p) as f:
        assert str(f["form"][()]) == form
        if form == "canonical":
            assert fr_mont_to_ints(small_asg.aux[:5]) == [
                int.from_bytes(row.astype("<u8").tobytes(), "little") for row in f["aux"][:5]]
    back = Assignment.load_npz(p)
    for name in ("a", "b", "c", "inputs", "aux"):
        assert np.array_equal(getattr(back, name), getattr(small_asg, name))
    assert back.a_aux_density == small_asg.a_aux_density
    assert back.b_input_density == small_asg.b_input_density
    assert back.b_aux_density == small_asg.b_aux_density
    assert Assignment.load_npz(p, form=form).n_aux == small_asg.n_aux
    other = "canonical" if form == "montgomery" else "montgomery"
    with pytest.raises(FormatError, match="form"):
        Assignment.load_npz(p, form=other)


def test_assignment_npz_errors(tmp_path, small_asg):
    p = tmp_path / "junk.npz"
    p.write_bytes(b"not a zip file at all")
    with pytest.raises(FormatError):
        Assignment.load_npz(p)
    good = tmp_path / "g.npz"
    small_asg.save_npz(good)
    with np.load(good) as f:
        d = {k: f[k] for k in f.files}
    for mutate, match in [
        (lambda d: d.pop("aux"), "keys"),
        (lambda d: d.__setitem__("form", np.array("hex")), "form"),
        (lambda d: d.__setitem__("a", d["a"][:, :3]), "'a'"),
        (lambda d: d.__setitem__("b_aux", d["b_aux"][:-1]), "b_aux"),
        (lambda d: d.__setitem__("a_aux_bits", np.array(5)), "a_aux_bits"),
        (lambda d: d["aux"].__setitem__(3, [2**64 - 1] * 4), "aux\\[3\\]"),
        (lambda d: d.__setitem__("c", d["c"][:-1]), "equal lengths"),
    ]:
        dd = {k: v.copy() for k, v in d.items()}
        mutate(dd)
        q = tmp_path / "m.npz"
        np.savez(q, **dd)
        with pytest.raises(FormatError, match=match):
            Assignment.load_npz(q)


def test_assignment_validate(small_asg):
    class V:
        pass

    def pk_like(ic, l, a, b, h):
        pk, vk = V(), V()
        vk.ic = np.zeros((ic, 12))
        pk.vk, pk.l, pk.a = vk, np.zeros((l, 12)), np.zeros((a, 12))
        pk.b_g1, pk.b_g2, pk.h = np.zeros((b, 12)), np.zeros((b, 24)), np.zeros((h, 12))
        return pk

    s = small_asg
    na = s.n_inputs + s.a_aux_density.popcount()
    nb = s.b_input_density.popcount() + s.b_aux_density.popcount()
    good = (s.n_inputs, s.n_aux, na, nb, s.domain_size - 1)
    s.validate(pk_like(*good))
    for i, what in enumerate(["IC", "L", "A", "B_G1", "H"]):
        bad = list(good)
        bad[i] += 1
        with pytest.raises(ValueError, match=what):
            s.validate(pk_like(*bad))
    with pytest.raises(ValueError, match="a_aux density"):
        Assignment(s.a, s.b, s.c, s.inputs, s.aux, Density.from_bools(np.ones(3, bool)),
                   s.b_input_density, s.b_aux_density)
    s.check_reduced()


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_fuzz_npz_loader(tmp_path, small_asg, data):
    good = tmp_path / "good.npz"
    if not good.exists():
        small_asg.save_npz(good)
    d = bytearray(good.read_bytes())
    for _ in range(data.draw(st.integers(1, 6))):
        i = data.draw(st.integers(0, len(d) - 1))
        d[i] ^= data.draw(st.integers(1, 255))
    if data.draw(st.booleans()):
        d = d[:data.draw(st.integers(0, len(d)))]
    p = tmp_path / "fuzz.npz"
    p.write_bytes(bytes(d))
    try:
        Assignment.load_npz(p)
    except FormatError:
        pass
