"""G1 and G2 point arithmetic against py_arkworks_bls12381 and the big-int reference, one
property suite parametrized over both groups, and the subgroup checks (fast and exact)."""
import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import refs
from cuzk._native import _field as F

GROUPS = ["g1", "g2"]
WIDTH = {"g1": 12, "g2": 24}
INF = {g: np.zeros(WIDTH[g], dtype=np.uint64) for g in GROUPS}

scalars = st.one_of(st.sampled_from([0, 1, 2, 3, refs.R - 1, refs.R - 2, refs.R, refs.R + 1, 2**64 - 1]),
                    st.integers(0, refs.R - 1))


def mont(p, group):
    return np.array(refs.point_to_mont(p, group), dtype=np.uint64)


def ark_mont(pt, group):
    return mont(refs.ark_to_point(pt, group), group)


def ark_mul(group, k):
    return refs.ark_class(group)() * refs.ark_scalar(k)


def test_generators():
    assert refs.point_from_mont(F.generator("g1"), "g1") == refs.G1_GEN
    assert refs.point_from_mont(F.generator("g2"), "g2") == refs.G2_GEN
    for g in GROUPS:
        assert np.array_equal(F.generator(g), ark_mont(refs.ark_class(g)(), g))


def test_no_point_with_y_zero():
    # y = 0 would need x^3 = -b; -4 is not a cube in Fq, nor -4(1+u) in Fq2, so the sign
    # flag of a compressed encoding is never ambiguous.
    assert pow(-4 % refs.P, (refs.P - 1) // 3, refs.P) != 1
    assert refs.Fq2Ops.pow(refs.Fq2Ops.neg((4, 4)), (refs.P**2 - 1) // 3) != (1, 0)


@pytest.mark.parametrize("group", GROUPS)
def test_against_python_reference(group):
    """Independent big-int affine formulas (slow, a few points)."""
    c = refs.CURVES[group]
    rnd = random.Random(7)
    p = c.mul(c.gen, rnd.randrange(refs.R))
    q = c.mul(c.gen, rnd.randrange(refs.R))
    P, Q = mont(p, group), mont(q, group)
    assert refs.point_from_mont(F.point_add(P, Q, group), group) == c.add(p, q)
    assert refs.point_from_mont(F.point_double(P, group), group) == c.double(p)
    assert refs.point_from_mont(F.point_neg(P, group), group) == c.neg(p)
    k = rnd.randrange(2**300)                             # larger than r: not reduced
    assert refs.point_from_mont(F.point_mul(P, k, group), group) == c.mul(p, k % refs.R)
    ns = refs.non_subgroup_point(group, 11)
    assert refs.point_from_mont(F.point_mul(mont(ns, group), 12345, group), group) == c.mul(ns, 12345)


@pytest.mark.parametrize("group", GROUPS)
class TestGroupProperties:
    @given(a=scalars, b=scalars)
    def test_add_double_neg_match_arkworks(self, group, a, b):
        pa, pb = ark_mul(group, a), ark_mul(group, b)
        P, Q = ark_mont(pa, group), ark_mont(pb, group)
        assert np.array_equal(F.point_add(P, Q, group), ark_mont(pa + pb, group))
        assert np.array_equal(F.point_add(Q, P, group), F.point_add(P, Q, group))
        assert np.array_equal(F.point_double(P, group), ark_mont(pa + pa, group))
        assert np.array_equal(F.point_add(P, P, group), F.point_double(P, group))
        assert np.array_equal(F.point_neg(P, group), ark_mont(-pa, group))
        assert np.array_equal(F.point_add(P, F.point_neg(P, group), group), INF[group])
        assert np.array_equal(F.point_add(P, INF[group], group), P)
        assert np.array_equal(F.point_add(INF[group], P, group), P)

    @given(a=scalars, k=scalars)
    def test_scalar_mul_matches_arkworks(self, group, a, k):
        pa = ark_mul(group, a)
        P = ark_mont(pa, group)
        assert np.array_equal(F.point_mul(P, k, group), ark_mont(pa * refs.ark_scalar(k), group))
        assert np.array_equal(F.point_mul(P, -k, group), ark_mont(-(pa * refs.ark_scalar(k)), group))

    @given(a=scalars, b=scalars, c=scalars)
    def test_group_laws(self, group, a, b, c):
        P, Q, S = (ark_mont(ark_mul(group, x), group) for x in (a, b, c))
        add = lambda x, y: F.point_add(x, y, group)  # noqa: E731
        assert np.array_equal(add(add(P, Q), S), add(P, add(Q, S)))
        # [x]P + [y]P = [x + y]P and [x]([y]P) = [xy]P
        G = F.generator(group)
        assert np.array_equal(add(F.point_mul(G, a, group), F.point_mul(G, b, group)),
                              F.point_mul(G, a + b, group))
        assert np.array_equal(F.point_mul(F.point_mul(G, a, group), b, group),
                              F.point_mul(G, a * b % refs.R, group))
        assert np.array_equal(F.point_mul(G, refs.R, group), INF[group])

    @given(a=scalars)
    def test_on_curve(self, group, a):
        P = ark_mont(ark_mul(group, a), group)
        assert F.on_curve(P, group)
        if P.any():
            bad = P.copy()
            bad[-1] ^= 1                                  # perturb y (stays < p: top limb small)
            assert not F.on_curve(bad, group)
        assert F.on_curve(INF[group], group)

    @given(seed=st.integers(0, 2**64), a=scalars)
    def test_subgroup_checks(self, group, seed, a):
        h = refs.H1 if group == "g1" else refs.H2
        ns = refs.non_subgroup_point(group, seed)
        N = mont(ns, group)
        ark_ns = refs.ark_from_point(ns, group, check=False)
        assert F.on_curve(N, group)
        assert not ark_ns.is_in_subgroup()                # independent verdict
        assert not F.in_subgroup(N, group) and not F.in_subgroup(N, group, exact=True)
        cleared = F.point_mul(N, h, group)                # cofactor clearing lands in the subgroup
        assert F.in_subgroup(cleared, group) and F.in_subgroup(cleared, group, exact=True)
        assert refs.ark_from_point(refs.point_from_mont(cleared, group), group, check=False).is_in_subgroup()
        P = ark_mont(ark_mul(group, a), group)
        assert F.in_subgroup(P, group) and F.in_subgroup(P, group, exact=True)
        mixed = F.point_add(P, N, group)                  # subgroup + non-subgroup: outside
        assert not F.in_subgroup(mixed, group) and not F.in_subgroup(mixed, group, exact=True)


@pytest.mark.parametrize("group", GROUPS)
def test_jacobian_to_affine(group, rng):
    """Jacobian inputs built in Python with random Z (and infinities) map to the affine points."""
    c = refs.CURVES[group]
    Fo = c.F
    rnd = random.Random(3)
    pts = [refs.random_point(group, rnd)[0] for _ in range(40)] + [None, None]
    rnd.shuffle(pts)
    rows = []
    for p in pts:
        if p is None:
            z = Fo.zero
            x = y = Fo.one
        else:
            z = (rnd.randrange(1, refs.P), rnd.randrange(refs.P)) if group == "g2" else rnd.randrange(1, refs.P)
            z2 = Fo.mul(z, z)
            x, y = Fo.mul(p[0], z2), Fo.mul(p[1], Fo.mul(z2, z))
        field = "fq" if group == "g1" else "fq2"
        rows.append(refs.to_mont(x, field) + refs.to_mont(y, field) + refs.to_mont(z, field))
    jac = np.array(rows, dtype=np.uint64)
    expect = np.array([refs.point_to_mont(p, group) for p in pts], dtype=np.uint64)
    for t in (1, 2, None):
        assert np.array_equal(F.jacobian_to_affine(jac, group, threads=t), expect)


@pytest.mark.parametrize("group", GROUPS)
def test_check_points(group):
    rnd = random.Random(5)
    good = np.array([refs.point_to_mont(refs.random_point(group, rnd)[0], group) for _ in range(20)]
                    + [refs.point_to_mont(None, group)], dtype=np.uint64)
    F.check_points(good, group, subgroup=True)
    bad = good.copy()
    bad[13] = mont(refs.non_subgroup_point(group, 99), group)
    F.check_points(bad, group)                            # on the curve: fine without subgroup check
    with pytest.raises(ValueError, match=r"points\[13\].*subgroup"):
        F.check_points(bad, group, subgroup=True)
    bad[4, -1] ^= 1
    with pytest.raises(ValueError, match=r"points\[4\].*not on the curve"):
        F.check_points(bad, group, subgroup=True, threads=2)


def test_point_argument_errors():
    with pytest.raises(ValueError, match="group"):
        F.generator("g3")
    with pytest.raises(ValueError, match="shape"):
        F.point_add(np.zeros(12, dtype=np.uint64), np.zeros(24, dtype=np.uint64), "g1")
    with pytest.raises(ValueError, match="shape"):
        F.point_neg(np.zeros(12, dtype=np.uint32), "g1")
