"""cuzk.msm and cuzk.ntt (the public primitives on canonical bytes): against arkworks'
multiexp and a naive sum, edge and mostly-bit scalars, input validation, and the GIL."""
import importlib.util
import random
import threading
import time

import numpy as np
import pytest

import refs
from cuzk import _primitives as prim
from cuzk._native import _field as F

GROUPS = ["g1", "g2"]
USIZE = {"g1": 96, "g2": 192}
EDGE = [0, 1, refs.R - 1, 2, 3, 255, 2**64 - 1, 2**64, refs.R - 2, (refs.R - 1) // 2]


def scalar_rows(ks):
    return np.frombuffer(b"".join(k.to_bytes(32, "little") for k in ks), dtype=np.uint8).reshape(len(ks), 32)


def point_rows(arks, group):
    c = refs.CURVES[group]
    return np.frombuffer(b"".join(c.encode(refs.ark_to_point(a, group), False) for a in arks),
                         dtype=np.uint8).reshape(len(arks), USIZE[group])


def make_points(group, n, seed, with_infinity=True):
    rnd = random.Random(seed)
    cls = refs.ark_class(group)
    arks = [cls() * refs.ark_scalar(rnd.randrange(1, refs.R)) for _ in range(n)]
    if with_infinity and n > 4:
        arks[3] = cls.identity()
    return arks


def ark_msm(arks, ks, group):
    return refs.ark_class(group).multiexp_unchecked(arks, [refs.ark_scalar(k) for k in ks])


def naive(arks, ks, group):
    acc = refs.ark_class(group).identity()
    for a, k in zip(arks, ks):
        acc = acc + a * refs.ark_scalar(k)
    return acc


def scalar_mix(kind, n, rnd):
    if kind == "edge":
        return [EDGE[i % len(EDGE)] for i in range(n)]
    if kind == "bits":                                    # ~90 % in {0, 1}, like real witnesses
        return [rnd.choice((0, 1)) if rnd.random() < 0.9 else rnd.randrange(refs.R) for _ in range(n)]
    if kind == "small":
        return [rnd.randrange(2**16) for _ in range(n)]
    if kind == "same":
        return [refs.R - 1] * n
    return [rnd.randrange(refs.R) for _ in range(n)]


MSM_CASES = [(g, k, n) for g in GROUPS for k in ("edge", "bits", "small", "random", "same")
             for n in (1, 2, 3, 37, 300) if not (g == "g2" and n == 300 and k in ("small", "same"))]


@pytest.mark.parametrize("group,kind,n", MSM_CASES)
def test_msm_against_arkworks(group, kind, n):
    rnd = random.Random(n * 31 + len(kind))
    arks = make_points(group, n, seed=n)
    ks = scalar_mix(kind, n, rnd)
    got = prim.msm(point_rows(arks, group), scalar_rows(ks), group)
    want = ark_msm(arks, ks, group)
    assert got == want.to_compressed_bytes()
    if n <= 37:
        assert got == naive(arks, ks, group).to_compressed_bytes()


@pytest.mark.parametrize("group", GROUPS)
def test_msm_threads_and_cancellation(group):
    arks = make_points(group, 64, seed=9)
    rnd = random.Random(1)
    ks = scalar_mix("random", 64, rnd)
    pts, sc = point_rows(arks, group), scalar_rows(ks)
    want = ark_msm(arks, ks, group).to_compressed_bytes()
    for t in (1, 2, 3, 0, None):
        assert prim.msm(pts, sc, group, threads=t) == want
    # P and -P with the same scalar cancel: the result is the point at infinity
    both = np.concatenate([pts[:5], point_rows([-a for a in arks[:5]], group)])
    inf = b"\xc0" + bytes(47 if group == "g1" else 95)
    assert prim.msm(both, scalar_rows(ks[:5] * 2), group) == inf
    assert prim.msm(pts[:0], sc[:0], group) == inf
    assert prim.msm(pts[:7], scalar_rows([0] * 7), group) == inf


@pytest.mark.parametrize("group", GROUPS)
def test_msm_simple_reference_path(group):
    """The in-module fallback (used for n <= 2 and when _msm is absent) on its own."""
    arks = make_points(group, 50, seed=5)
    ks = scalar_mix("bits", 50, random.Random(2)) + []
    ks[0], ks[1] = refs.R - 1, 2**255 + 12345           # any 256-bit integer is accepted here
    pts = F.decode_points(point_rows(arks, group), group)
    kl = np.array([refs.limbs(k, 4) for k in ks], dtype=np.uint64)
    for t in (1, 2):
        got = F.encode_points(F.msm_simple(pts, kl, group, threads=t)[None], group)[0].tobytes()
        assert got == naive(arks, [k % refs.R for k in ks], group).to_compressed_bytes()


def test_msm_validation():
    arks = make_points("g1", 6, seed=3, with_infinity=False)
    pts = point_rows(arks, "g1")
    ks = scalar_rows([5] * 6)
    bad_k = scalar_rows([1, 2, 3, refs.R, refs.R + 5, 2**256 - 1])
    with pytest.raises(ValueError, match=r"scalars\[3\]"):
        prim.msm(pts, bad_k)
    bad_p = pts.copy()
    bad_p[4, -1] ^= 1                                     # off the curve
    bad_p[5, -1] ^= 1
    with pytest.raises(ValueError, match=r"points\[4\].*not on the curve"):
        prim.msm(bad_p, ks)
    cmp = np.frombuffer(b"".join(a.to_compressed_bytes() for a in arks), dtype=np.uint8).reshape(6, 48)
    with pytest.raises(ValueError, match="points"):
        prim.msm(cmp, ks)                                 # compressed points are not accepted
    with pytest.raises(ValueError, match="points"):
        prim.msm(pts, ks, group="g2")
    with pytest.raises(ValueError, match="differ in length"):
        prim.msm(pts, ks[:5])
    with pytest.raises(ValueError, match="scalars"):
        prim.msm(pts, ks.view(np.uint64))
    with pytest.raises(ValueError, match="scalars"):
        prim.msm(pts, ks.reshape(-1))
    with pytest.raises(ValueError, match="group"):
        prim.msm(pts, ks, group="g3")
    with pytest.raises(ValueError, match="threads"):
        prim.msm(pts, ks, threads=-1)
    with pytest.raises(ValueError, match="NumPy"):
        prim.msm(pts.tolist(), ks)
    # an on-curve point outside the subgroup is accepted (the contract checks the curve only)
    ns = refs.G1.encode(refs.non_subgroup_point("g1", 8), False)
    rows = np.frombuffer(ns, dtype=np.uint8).reshape(1, 96)
    assert len(prim.msm(rows, scalar_rows([3]))) == 48


# ---- ntt -------------------------------------------------------------------------------------
needs_ntt = pytest.mark.skipif(importlib.util.find_spec("cuzk._native._ntt") is None,
                               reason="cuzk._native._ntt is not built")


def fr_rows(vals):
    return scalar_rows(vals)


def fr_vals(rows):
    return [int.from_bytes(r.tobytes(), "little") for r in rows]


@needs_ntt
@pytest.mark.parametrize("inverse", [False, True])
@pytest.mark.parametrize("coset", [False, True])
@pytest.mark.parametrize("lg", [0, 1, 2, 3, 5, 6])
def test_ntt_against_naive_dft(lg, inverse, coset):
    rnd = random.Random(lg)
    n = 1 << lg
    xs = [rnd.randrange(refs.R) for _ in range(n)]
    xs[0] = refs.R - 1
    out = prim.ntt(fr_rows(xs), inverse=inverse, coset=coset)
    assert out.dtype == np.uint8 and out.shape == (n, 32)
    assert fr_vals(out) == refs.dft(xs, inverse=inverse, coset=coset)


@needs_ntt
@pytest.mark.parametrize("coset", [False, True])
def test_ntt_round_trip(coset, rng):
    n = 1 << 12
    xs = [int.from_bytes(rng.bytes(32), "little") % refs.R for _ in range(n)]
    v = fr_rows(xs)
    fwd = prim.ntt(v, coset=coset, threads=2)
    assert not np.array_equal(fwd, v)
    assert np.array_equal(prim.ntt(fwd, inverse=True, coset=coset), v)


@needs_ntt
def test_ntt_validation():
    with pytest.raises(ValueError, match="power of two"):
        prim.ntt(np.zeros((6, 32), dtype=np.uint8))
    with pytest.raises(ValueError, match="power of two"):
        prim.ntt(np.zeros((0, 32), dtype=np.uint8))
    with pytest.raises(ValueError, match="values"):
        prim.ntt(np.zeros((4, 4), dtype=np.uint64))
    with pytest.raises(ValueError, match=r"values\[2\]"):
        prim.ntt(fr_rows([0, 1, refs.R, 2]))


# ---- the GIL ------------------------------------------------------------------------------------
def _watch(fn):
    """Run fn in another thread while this one spins; returns (seconds, longest stall, loops).

    The longest stall is the largest gap between two iterations of the spinning loop: a
    native call that holds the GIL stalls it for the whole call, one that releases the GIL
    only for OS scheduling slices (robust to a loaded machine, unlike a rate threshold).
    """
    done = threading.Event()

    def work():
        try:
            fn()
        finally:
            done.set()

    t = threading.Thread(target=work)
    t0 = last = time.perf_counter()                       # before start: a GIL grab shows as a stall
    t.start()
    stall, loops = 0.0, 0
    while not done.is_set():
        now = time.perf_counter()
        stall = max(stall, now - last)
        last = now
        loops += 1
    t.join()
    return time.perf_counter() - t0, max(stall, time.perf_counter() - last), loops


def test_gil_released_during_msm():
    """While one thread is inside a long native MSM, another Python thread keeps running."""
    arks = make_points("g1", 64, seed=1, with_infinity=False)
    base = point_rows(arks, "g1")
    rnd = random.Random(0)
    n = 1 << 12
    while True:                                           # size the call to take >= 0.4 s here
        pts = np.tile(base, (n // 64, 1))
        ks = scalar_rows([rnd.randrange(refs.R) for _ in range(n)])
        t0 = time.perf_counter()
        prim.msm(pts, ks, threads=1)
        if time.perf_counter() - t0 >= 0.4 or n >= 1 << 20:
            break
        n *= 4
    # the instrument first: a call known to hold the GIL (CPython's big-int pow) stalls the loop
    m = 1 << 4500
    held, held_stall, _ = _watch(lambda: pow(3, m - 1, m + 1))
    assert held_stall >= 0.5 * held
    dt, stall, loops = _watch(lambda: prim.msm(pts, ks, threads=1))
    assert dt >= 0.3
    assert stall < 0.25 * dt, (stall, dt)
    assert loops > 1000
