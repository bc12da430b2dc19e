"""Fr, Fq, Fq2: Montgomery conversions and arithmetic against Python big ints (tests/refs.py),
and one property suite parametrized over the three fields (ring laws, inverses, sqrt, round trips)."""
import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import refs
from cuzk._native import _field as F

FIELDS = ["fr", "fq", "fq2"]
MOD = {"fr": refs.R, "fq": refs.P, "fq2": refs.P}
OPS = {"fr": refs.FrOps, "fq": refs.FqOps, "fq2": refs.Fq2Ops}
LIMBS = {"fr": 4, "fq": 6, "fq2": 12}


def prime_elements(m):
    edges = [0, 1, 2, m - 1, m - 2, (m - 1) // 2, (m + 1) // 2, 2**64 - 1, 2**64, 2**255 % m, 2**254]
    return st.one_of(st.sampled_from(edges), st.integers(0, m - 1))


def elements(field):
    base = prime_elements(MOD[field])
    return st.tuples(base, base) if field == "fq2" else base


def arr(vals, field):
    return np.array([refs.to_mont(v, field) for v in vals], dtype=np.uint64).reshape(-1, LIMBS[field])


def vals(a, field):
    return [refs.from_mont(row, field) for row in a]


def canon(vals_, field):
    return np.array([refs.canonical_limbs(v, field) for v in vals_], dtype=np.uint64).reshape(-1, LIMBS[field])


def random_vals(field, n, rng):
    m = MOD[field]
    one = [int.from_bytes(rng.bytes(64), "little") % m for _ in range(n)]
    if field != "fq2":
        return one
    return list(zip(one, [int.from_bytes(rng.bytes(64), "little") % m for _ in range(n)]))


# ---- exact references --------------------------------------------------------------------
@pytest.mark.parametrize("field", FIELDS)
def test_montgomery_layout_matches_reference(field, rng):
    xs = random_vals(field, 64, rng) + ([0, 1, MOD[field] - 1] if field != "fq2" else [(0, 0), (1, 0), (0, MOD[field] - 1)])
    c = canon(xs, field)
    m = F.to_mont(c, field)
    assert m.tolist() == arr(xs, field).tolist()              # R = 2^256 (fr), 2^384 (fq)
    assert F.from_mont(m, field).tolist() == c.tolist()
    # uint8 little-endian bytes give the same result as uint64 limbs
    assert F.to_mont(c.view(np.uint8), field).tolist() == m.tolist()


def test_known_montgomery_one():
    # R mod r and R mod p: the blst/blstrs "one"
    assert F.to_mont(np.array([[1, 0, 0, 0]], dtype=np.uint64), "fr")[0].tolist() == refs.limbs(2**256 % refs.R, 4)
    assert F.to_mont(np.array([[1, 0, 0, 0, 0, 0]], dtype=np.uint64), "fq")[0].tolist() == refs.limbs(2**384 % refs.P, 6)


@pytest.mark.parametrize("field", FIELDS)
def test_ops_against_big_ints(field, rng):
    O = OPS[field]
    xs, ys = random_vals(field, 200, rng), random_vals(field, 200, rng)
    xs[:3] = [O.zero, O.one, O.neg(O.one)]
    a, b = arr(xs, field), arr(ys, field)
    assert vals(F.add(a, b, field), field) == [O.add(x, y) for x, y in zip(xs, ys)]
    assert vals(F.sub(a, b, field), field) == [O.sub(x, y) for x, y in zip(xs, ys)]
    assert vals(F.mul(a, b, field), field) == [O.mul(x, y) for x, y in zip(xs, ys)]
    assert vals(F.neg(a, field), field) == [O.neg(x) for x in xs]
    assert vals(F.sqr(a, field), field) == [O.mul(x, x) for x in xs]
    assert vals(F.inv(a, field), field) == [O.inv(x) for x in xs]
    e = int.from_bytes(rng.bytes(40), "little")
    assert vals(F.pow(a[:20], e, field), field) == [O.pow(x, e) for x in xs[:20]]
    assert vals(F.pow(a[:4], 0, field), field) == [O.one] * 4


def test_portable_and_mulx_products_agree(rng, tmp_path):
    """The products with mulx/adx (Fr: inline, Fq: out of line; taken when the CPU has them) and
    the portable ones (CUZK_FF_PORTABLE=1, in a subprocess) give the same bytes, and match Python
    big ints, on random and edge operands of Fr, Fq and Fq2."""
    import subprocess
    import sys
    ins = {}
    for field in FIELDS:
        O = OPS[field]
        xs, ys = random_vals(field, 300, rng), random_vals(field, 300, rng)
        xs[:3] = [O.zero, O.one, O.neg(O.one)]
        ys[:3] = [O.neg(O.one), O.neg(O.one), O.neg(O.one)]
        ins[field] = (arr(xs, field), arr(ys, field))
        assert vals(F.mul(*ins[field], field), field) == [O.mul(x, y) for x, y in zip(xs, ys)]
    np.savez(tmp_path / "in.npz", **{f"{f}_{i}": v for f in FIELDS for i, v in enumerate(ins[f])})
    code = ("import sys, numpy as np; from cuzk._native import _field as F; d = np.load(sys.argv[1]); "
            "np.savez(sys.argv[2], **{f: F.mul(d[f + '_0'], d[f + '_1'], f) for f in ('fr', 'fq', 'fq2')})")
    env = dict(os.environ, CUZK_FF_PORTABLE="1")
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "in.npz"), str(tmp_path / "out.npz")],
                   env=env, check=True, timeout=120)
    out = np.load(tmp_path / "out.npz")
    for field in FIELDS:
        assert out[field].tolist() == F.mul(*ins[field], field).tolist(), field


@pytest.mark.parametrize("field", FIELDS)
def test_broadcast_and_threads(field, rng):
    O = OPS[field]
    xs = random_vals(field, 3000, rng)
    for i in range(0, 3000, 7):
        xs[i] = O.zero                                    # zeros scattered through batch inversion
    a = arr(xs, field)
    c = arr(random_vals(field, 1, rng), field)
    ref = vals(F.mul(a, np.repeat(c, len(a), axis=0), field, threads=1), field)
    for t in (1, 2, 3, None):
        assert vals(F.mul(a, c, field, threads=t), field) == ref
        inv = F.inv(a, field, threads=t)
        assert vals(inv, field) == [O.inv(x) for x in xs]
        assert F.to_mont(F.from_mont(a, field, threads=t), field, threads=t).tolist() == a.tolist()


def test_fq_sqrt_against_reference(rng):
    xs = random_vals("fq", 100, rng) + [0, 1, refs.P - 1, 4]
    roots, ok = F.sqrt(arr(xs, "fq"), "fq")
    for x, r, k in zip(xs, vals(roots, "fq"), ok):
        expect = refs.sqrt_fq(x)
        assert k == (expect is not None)
        if k:
            assert r * r % refs.P == x
    assert ok.any() and not ok.all()


def test_fq2_sqrt_against_reference(rng):
    xs = random_vals("fq2", 60, rng) + [(0, 0), (1, 0), (refs.P - 1, 0), (0, 1), (5, 0), (0, 5)]
    roots, ok = F.sqrt(arr(xs, "fq2"), "fq2")
    for x, r, k in zip(xs, vals(roots, "fq2"), ok):
        expect = refs.Fq2Ops.sqrt(x)                     # a different algorithm (norm method)
        assert k == (expect is not None), x
        if k:
            assert refs.Fq2Ops.mul(r, r) == x
    assert ok.any() and not ok.all()


# ---- validation -----------------------------------------------------------------------------
@pytest.mark.parametrize("field", FIELDS)
def test_noncanonical_rejected_with_first_index(field, rng):
    m = MOD[field]
    good = canon(random_vals(field, 10, rng), field)
    assert F.canonical_limbs(good, field).tolist() == good.tolist()
    bad = good.copy()
    if field == "fq2":
        bad[7, 6:] = refs.limbs(m, 6)                    # c1 = p, c0 fine
    else:
        bad[7] = refs.limbs(m, LIMBS[field])
    bad[9] = 0xFFFFFFFFFFFFFFFF
    for fn in (F.to_mont, F.canonical_limbs):
        with pytest.raises(ValueError, match=r"values\[7\]"):
            fn(bad, field)
        with pytest.raises(ValueError, match=r"values\[7\]"):
            fn(bad.view(np.uint8), field, threads=2)
    # m - 1 is fine
    edge = canon([m - 1] if field != "fq2" else [(m - 1, m - 1)], field)
    assert F.from_mont(F.to_mont(edge, field), field).tolist() == edge.tolist()


@pytest.mark.parametrize("bad", [
    np.zeros((3, 4), dtype=np.uint32), np.zeros((3, 5), dtype=np.uint64), np.zeros(4, dtype=np.uint64),
    np.zeros((3, 31), dtype=np.uint8), [[0, 0, 0, 0]],
])
def test_bad_arrays_rejected(bad):
    with pytest.raises(ValueError):
        F.to_mont(bad, "fr")
    with pytest.raises(ValueError):
        F.add(bad, bad, "fr")


def test_bad_arguments_rejected():
    a = np.zeros((2, 4), dtype=np.uint64)
    with pytest.raises(ValueError, match="field"):
        F.add(a, a, "fp")
    with pytest.raises(ValueError, match="same length"):
        F.add(a, np.zeros((3, 4), dtype=np.uint64))
    with pytest.raises(ValueError, match="threads"):
        F.to_mont(a, threads=-1)
    with pytest.raises(ValueError, match="fq and fq2"):
        F.sqrt(a, "fr")
    with pytest.raises(ValueError):
        F.pow(a, -1)


def test_empty_arrays():
    for field, w in (("fr", 4), ("fq", 6), ("fq2", 12)):
        e = np.zeros((0, w), dtype=np.uint64)
        assert F.to_mont(e, field).shape == (0, w)
        assert F.mul(e, e, field).shape == (0, w)
        assert F.inv(e, field).shape == (0, w)


def test_unaligned_and_strided_input(rng):
    xs = random_vals("fr", 8, rng)
    c = canon(xs, "fr")
    raw = np.zeros(8 * 32 + 1, dtype=np.uint8)
    raw[1:] = c.view(np.uint8).ravel()
    unaligned = raw[1:].reshape(8, 32)                   # not 8-byte aligned
    assert F.to_mont(unaligned, "fr").tolist() == arr(xs, "fr").tolist()
    strided = np.repeat(c, 2, axis=0)[::2]
    assert F.to_mont(strided, "fr").tolist() == arr(xs, "fr").tolist()


# ---- property suite, one for every field ------------------------------------------------------
@pytest.mark.parametrize("field", FIELDS)
class TestFieldProperties:
    @given(data=st.data())
    def test_ring_laws(self, field, data):
        xs = data.draw(st.lists(elements(field), min_size=3, max_size=3))
        a, b, c = (arr([x], field) for x in xs)
        zero, one = arr([OPS[field].zero], field), arr([OPS[field].one], field)
        eq = np.array_equal
        assert eq(F.add(a, b, field), F.add(b, a, field))
        assert eq(F.mul(a, b, field), F.mul(b, a, field))
        assert eq(F.add(F.add(a, b, field), c, field), F.add(a, F.add(b, c, field), field))
        assert eq(F.mul(F.mul(a, b, field), c, field), F.mul(a, F.mul(b, c, field), field))
        assert eq(F.mul(a, F.add(b, c, field), field),
                  F.add(F.mul(a, b, field), F.mul(a, c, field), field))
        assert eq(F.add(a, zero, field), a) and eq(F.mul(a, one, field), a)
        assert eq(F.add(a, F.neg(a, field), field), zero)
        assert eq(F.sub(a, b, field), F.add(a, F.neg(b, field), field))
        assert eq(F.sqr(a, field), F.mul(a, a, field))
        # and against the big-int reference
        O = OPS[field]
        assert vals(F.mul(a, F.add(b, c, field), field), field) == [O.mul(xs[0], O.add(xs[1], xs[2]))]

    @given(data=st.data())
    def test_inverse(self, field, data):
        x = data.draw(elements(field))
        a = arr([x], field)
        one = arr([OPS[field].one], field)
        inv = F.inv(a, field)
        if OPS[field].is_zero(x):
            assert not inv.any()
        else:
            assert np.array_equal(F.mul(a, inv, field), one)
            assert np.array_equal(F.inv(inv, field), a)
            # Fermat / Lagrange: a^(|F*|) = 1
            order = MOD[field] - 1 if field != "fq2" else refs.P**2 - 1
            assert np.array_equal(F.pow(a, order, field), one)

    @given(data=st.data())
    def test_encoding_round_trip(self, field, data):
        xs = data.draw(st.lists(elements(field), min_size=1, max_size=8))
        c = canon(xs, field)
        m = F.to_mont(c.view(np.uint8), field)
        assert m.tolist() == arr(xs, field).tolist()
        assert F.from_mont(m, field).view(np.uint8).tobytes() == c.view(np.uint8).tobytes()


@pytest.mark.parametrize("field", ["fq", "fq2"])                 # cuzk needs no square roots in Fr
@given(data=st.data())
def test_sqrt_of_square(field, data):
    x = data.draw(elements(field))
    a = arr([x], field)
    root, ok = F.sqrt(F.sqr(a, field), field)
    assert ok[0]
    assert np.array_equal(root, a) or np.array_equal(root, F.neg(a, field))
