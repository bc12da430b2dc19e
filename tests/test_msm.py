"""CPU MSM, indexed MSM and bitmap batch addition (cuzk._native._msm) against py_arkworks_bls12381.

Reference: arkworks' G1Point/G2Point arithmetic and multiexp_unchecked (an independent
implementation). Points travel between the two as canonical little-endian x‖y bytes
(``to_xy_bytes_le``), converted to cuzk's Montgomery limbs with Python big ints.
"""
import functools
import random
import threading
import time

import numpy as np
import pytest

from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from cuzk._native import _msm

from refs import P, R  # the moduli: one place (tests/refs.py)
MONT = (1 << 384) % P
MONT_INV = pow(MONT, -1, P)

GROUPS = {"g1": (G1Point, 12), "g2": (G2Point, 24)}


# ---- conversions (canonical bytes <-> Montgomery limbs) ---------------------------------------
def _limbs(v, k):
    return [(v >> (64 * i)) & 0xFFFFFFFFFFFFFFFF for i in range(k)]


def to_mont(points, group):
    """arkworks points -> uint64 (n, 12|24) affine Montgomery (infinity all-zero)."""
    width = GROUPS[group][1]
    out = np.zeros((len(points), width), dtype=np.uint64)
    for i, pt in enumerate(points):
        b = pt.to_xy_bytes_le()
        row = []
        for j in range(width // 6):
            c = int.from_bytes(b[48 * j: 48 * j + 48], "little")
            row += _limbs(c * MONT % P, 6)
        out[i] = row
    return out


def from_mont(row, group):
    """uint64 (12|24,) affine Montgomery -> arkworks point (checked decoding)."""
    cls, width = GROUPS[group]
    row = [int(v) for v in row]
    b = b""
    for j in range(width // 6):
        m = sum(row[6 * j + i] << (64 * i) for i in range(6))
        assert m < P, "coordinate not fully reduced"
        b += (m * MONT_INV % P).to_bytes(48, "little")
    return cls.from_xy_bytes_le(b)


def scalars_array(ints):
    out = np.zeros((len(ints), 4), dtype=np.uint64)
    for i, s in enumerate(ints):
        out[i] = _limbs(s, 4)
    return out


# ---- inputs -----------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _points(group, n, seed=1):
    """n distinct-looking random subgroup points: a random walk over 32 random steps."""
    cls = GROUPS[group][0]
    rng = random.Random(seed)
    steps = [cls() * Scalar(rng.randrange(1, R)) for _ in range(32)]
    pts, acc = [], steps[0]
    for _ in range(n):
        acc = acc + steps[rng.randrange(32)]
        pts.append(acc)
    return tuple(pts)


@functools.lru_cache(maxsize=None)
def _mont_points(group, n, seed=1):
    a = to_mont(_points(group, n, seed), group)
    a.flags.writeable = False
    return a


def random_scalars(rng, n, kind="uniform"):
    if kind == "uniform":
        return [rng.randrange(R) for _ in range(n)]
    if kind == "bits90":  # ~90 % zeros and ones, the rest full-size
        return [rng.choice((0, 1)) if rng.random() < 0.9 else rng.randrange(R) for _ in range(n)]
    if kind == "edge":
        edge = [0, 1, 2, 3, R - 1, R - 2, (R - 1) // 2, 1 << 254, (1 << 128) - 1, 7]
        return [rng.choice(edge) if rng.random() < 0.5 else rng.randrange(R) for _ in range(n)]
    if kind == "small":
        return [rng.randrange(0, 1 << rng.choice((1, 4, 9, 17, 33))) for _ in range(n)]
    raise AssertionError(kind)


def reference(points, scalars, group):
    cls = GROUPS[group][0]
    if not points:
        return cls.identity()
    return cls.multiexp_unchecked(list(points), [Scalar(s) for s in scalars])


def naive(points, scalars, group):
    cls = GROUPS[group][0]
    acc = cls.identity()
    for p, s in zip(points, scalars):
        acc = acc + p * Scalar(s)
    return acc


def check(got, expected, group):
    exp = to_mont([expected], group)[0]
    assert got.dtype == np.uint64 and got.shape == exp.shape
    assert np.array_equal(got, exp), f"MSM mismatch: got {from_mont(got, group)} want {expected}"


# ---- msm --------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 3, 5, 17, 64, 255, 1000, 4096])
@pytest.mark.parametrize("kind", ["uniform", "edge", "bits90"])
def test_msm_g1_sizes(n, kind):
    rng = random.Random(n * 31 + len(kind))
    pts = _points("g1", n)
    ints = random_scalars(rng, n, kind)
    got = _msm.msm(_mont_points("g1", n), scalars_array(ints), "g1")
    check(got, reference(pts, ints, "g1"), "g1")


@pytest.mark.parametrize("n", [1, 3, 40, 300])
def test_msm_g1_naive(n):
    rng = random.Random(n)
    pts = _points("g1", n, seed=2)
    ints = random_scalars(rng, n, "edge")
    got = _msm.msm(to_mont(pts, "g1"), scalars_array(ints), "g1")
    check(got, naive(pts, ints, "g1"), "g1")


@pytest.mark.parametrize("n", [1, 2, 9, 100, 1024])
@pytest.mark.parametrize("kind", ["uniform", "edge", "bits90"])
def test_msm_g2_sizes(n, kind):
    rng = random.Random(n * 17 + len(kind))
    pts = _points("g2", n)
    ints = random_scalars(rng, n, kind)
    got = _msm.msm(_mont_points("g2", n), scalars_array(ints), "g2")
    check(got, reference(pts, ints, "g2"), "g2")


def test_msm_g2_naive():
    rng = random.Random(5)
    pts = _points("g2", 20, seed=3)
    ints = random_scalars(rng, 20, "edge")
    got = _msm.msm(to_mont(pts, "g2"), scalars_array(ints), "g2")
    check(got, naive(pts, ints, "g2"), "g2")


@pytest.mark.parametrize("group,kind", [("g1", "uniform"), ("g1", "bits90"), ("g2", "uniform")])
def test_msm_large(group, kind):
    n = 1 << 14 if group == "g1" else 1 << 12
    rng = random.Random(99)
    pts = _points(group, n)
    ints = random_scalars(rng, n, kind)
    got = _msm.msm(_mont_points(group, n), scalars_array(ints), group)
    check(got, reference(pts, ints, group), group)


@pytest.mark.parametrize("window", list(range(1, 17)))
def test_msm_every_window(window):
    # c = 3, 5, 15 divide 255: the top window holds only a carry
    n = 300
    rng = random.Random(window)
    pts = _points("g1", n)
    ints = random_scalars(rng, n, "edge")
    got = _msm.msm(_mont_points("g1", n), scalars_array(ints), "g1", 2, _tune={"window": window})
    check(got, reference(pts, ints, "g1"), "g1")


@pytest.mark.parametrize("tune", [
    {"ranges": 3}, {"ranges": 7, "window": 6}, {"block": 100}, {"block": 64, "ranges": 2},
    {"scratch": 50}, {"scratch": 1, "window": 4}, {"batch": 1}, {"batch": 3, "small": 1},
    {"small": 1}, {"small": 1 << 30}, {"portable": True}, {"portable": True, "window": 5},
    {"group": 1}, {"group": 40, "ranges": 2}, {"group": 7, "scratch": 60, "block": 200},
    {"no_simd": True}, {"no_simd": True, "batch": 3},
])
@pytest.mark.parametrize("group", ["g1", "g2"])
def test_msm_tuning_paths(tune, group):
    n = 500 if group == "g1" else 150
    rng = random.Random(len(str(tune)))
    pts = _points(group, n)
    ints = random_scalars(rng, n, "bits90" if "block" in tune else "edge")
    got = _msm.msm(_mont_points(group, n), scalars_array(ints), group, 2, _tune=tune)
    check(got, reference(pts, ints, group), group)


@pytest.mark.parametrize("group", ["g1", "g2"])
def test_msm_infinity_points(group):
    cls = GROUPS[group][0]
    rng = random.Random(3)
    pts = list(_points(group, 200))
    for i in rng.sample(range(200), 60):
        pts[i] = cls.identity()
    ints = random_scalars(rng, 200, "edge")
    arr = to_mont(pts, group)
    assert not arr[[i for i, p in enumerate(pts) if p == cls.identity()]].any()
    got = _msm.msm(arr, scalars_array(ints), group)
    check(got, reference(pts, ints, group), group)
    # all points at infinity, or all scalars zero: infinity
    zero = np.zeros((50, GROUPS[group][1]), dtype=np.uint64)
    assert not _msm.msm(zero, scalars_array(random_scalars(rng, 50)), group).any()
    assert not _msm.msm(arr, scalars_array([0] * 200), group).any()


@pytest.mark.parametrize("group", ["g1", "g2"])
@pytest.mark.parametrize("kind", ["uniform", "small", "bits90", "ones"])
def test_msm_repeated_points(group, kind):
    """The same point many times, and P with -P: equal-x pairs inside batch-affine rounds."""
    rng = random.Random(11)
    p, q = _points(group, 2, seed=7)
    n = 700
    pts = [p] * (n // 2) + [-p] * (n // 4) + [q] * (n - n // 2 - n // 4)
    rng.shuffle(pts)
    ints = [1] * n if kind == "ones" else random_scalars(rng, n, kind)
    got = _msm.msm(to_mont(pts, group), scalars_array(ints), group, 2)
    check(got, reference(pts, ints, group), group)


@pytest.mark.parametrize("group", ["g1", "g2"])
def test_msm_cancellation(group):
    """Σ s·P + s·(-P) = O; and s·P + s·P = 2s·P (doublings)."""
    rng = random.Random(12)
    pts = list(_points(group, 50, seed=9))
    ints = random_scalars(rng, 50)
    both = pts + [-p for p in pts]
    got = _msm.msm(to_mont(both, group), scalars_array(ints + ints), group)
    assert not got.any()
    twice = _msm.msm(to_mont(pts + pts, group), scalars_array(ints + ints), group)
    check(twice, reference(pts, [2 * s % R for s in ints], group), group)
    # one point, many copies with scalar 1: n·P by tree doublings
    p = pts[0]
    ones = _msm.msm(to_mont([p] * 1000, group), scalars_array([1] * 1000), group)
    check(ones, p * Scalar(1000), group)


def test_msm_threads_identical():
    n = 12000  # enough non-trivial scalars for the engine to use several workers
    rng = random.Random(4)
    pts = _mont_points("g1", n)
    sc = scalars_array(random_scalars(rng, n, "edge"))
    outs = [_msm.msm(pts, sc, "g1", t) for t in (1, 2, 3, 8)]
    for o in outs[1:]:
        assert np.array_equal(o, outs[0])
    check(outs[0], reference(_points("g1", n), [int.from_bytes(r.tobytes(), "little") for r in sc], "g1"), "g1")


# ---- msm_indexed -----------------------------------------------------------------------------
@pytest.mark.parametrize("group", ["g1", "g2"])
@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
def test_msm_indexed(group, dtype):
    nb = 400 if group == "g1" else 120
    base = _mont_points(group, nb)
    rng = random.Random(8)
    m = 700
    idx = np.array([rng.randrange(nb) for _ in range(m)], dtype=dtype)  # with repeats
    sc = scalars_array(random_scalars(rng, m, "edge"))
    got = _msm.msm_indexed(base, sc, idx, group, 2)
    want = _msm.msm(np.ascontiguousarray(base[idx.astype(np.int64)]), sc, group, 1)
    assert np.array_equal(got, want)
    pts = _points(group, nb)
    ints = [int.from_bytes(r.tobytes(), "little") for r in sc]
    check(got, reference([pts[i] for i in idx], ints, group), group)
    # empty tail
    assert not _msm.msm_indexed(base, sc[:0], idx[:0], group).any()


def test_msm_indexed_errors():
    base = _mont_points("g1", 10)
    sc = scalars_array([1, 2, 3])
    with pytest.raises(ValueError, match=r"idx\[2\]"):
        _msm.msm_indexed(base, sc, np.array([0, 9, 10], dtype=np.uint64), "g1")
    with pytest.raises(ValueError, match="idx"):
        _msm.msm_indexed(base, sc, np.array([0, 1, 2], dtype=np.int64), "g1")
    with pytest.raises(ValueError, match="rows"):
        _msm.msm_indexed(base, sc, np.array([0, 1], dtype=np.uint32), "g1")


# ---- batch_add ---------------------------------------------------------------------------------
def _bitmap(sel, n):
    words = np.zeros((n + 63) // 64, dtype=np.uint64)
    for i in sel:
        words[i // 64] |= np.uint64(1 << (i % 64))
    return words


def _sum(pts, sel, group):
    acc = GROUPS[group][0].identity()
    for i in sel:
        acc = acc + pts[i]
    return acc


@pytest.mark.parametrize("group", ["g1", "g2"])
@pytest.mark.parametrize("n,density", [(1, 1.0), (63, 0.5), (64, 1.0), (1000, 0.9), (4097, 0.3), (5000, 0.02)])
def test_batch_add(group, n, density):
    if group == "g2" and n > 1000:
        n //= 4
    rng = random.Random(n)
    pts = _points(group, n)
    sel = [i for i in range(n) if rng.random() < density]
    got = _msm.batch_add(_mont_points(group, n), _bitmap(sel, n), group, 2)
    check(got, _sum(pts, sel, group), group)


@pytest.mark.parametrize("group", ["g1", "g2"])
def test_batch_add_special(group):
    cls = GROUPS[group][0]
    rng = random.Random(21)
    p, q = _points(group, 2, seed=5)
    pts = [p] * 300 + [-p] * 100 + [cls.identity()] * 50 + [q] * 150
    rng.shuffle(pts)
    arr = to_mont(pts, group)
    sel = [i for i in range(len(pts)) if rng.random() < 0.8]
    want = _sum(pts, sel, group)
    for t in (1, 2, 4):
        check(_msm.batch_add(arr, _bitmap(sel, len(pts)), group, t), want, group)
    # nothing selected; all selected cancelling to infinity
    assert not _msm.batch_add(arr, _bitmap([], len(pts)), group).any()
    canc = to_mont([p, -p] * 100, group)
    assert not _msm.batch_add(canc, _bitmap(range(200), 200), group).any()


@pytest.mark.parametrize("tune", [{"batch": 1}, {"small": 1}, {"small": 1 << 30}, {"portable": True},
                                  {"group": 64}, {"group": 200, "batch": 5}, {"no_simd": True},
                                  {"batch": 17}])
def test_batch_add_tuning(tune):
    n = 3000
    rng = random.Random(2)
    sel = [i for i in range(n) if rng.random() < 0.7]
    got = _msm.batch_add(_mont_points("g1", n), _bitmap(sel, n), "g1", 2, _tune=tune)
    check(got, _sum(_points("g1", n), sel, "g1"), "g1")


def test_batch_add_threads_identical():
    n = 20000
    rng = np.random.default_rng(3)
    words = rng.integers(0, 1 << 63, size=(n + 63) // 64, dtype=np.uint64) | rng.integers(0, 2, size=(n + 63) // 64, dtype=np.uint64) << np.uint64(63)
    words[-1] &= np.uint64((1 << (n % 64)) - 1)
    pts = _mont_points("g1", 2000)
    big = np.ascontiguousarray(np.tile(pts, (10, 1)))
    outs = [_msm.batch_add(big, words, "g1", t) for t in (1, 2, 5)]
    assert np.array_equal(outs[0], outs[1]) and np.array_equal(outs[0], outs[2])
    # equals the MSM with 0/1 scalars
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")[:n]
    sc = np.zeros((n, 4), dtype=np.uint64)
    sc[:, 0] = bits
    assert np.array_equal(outs[0], _msm.msm(big, sc, "g1"))


def test_batch_add_errors():
    pts = _mont_points("g1", 70)
    with pytest.raises(ValueError, match="bit 70"):
        _msm.batch_add(pts, np.array([0, 1 << 6], dtype=np.uint64), "g1")
    with pytest.raises(ValueError, match="bitmap_words"):
        _msm.batch_add(pts, np.array([0], dtype=np.uint64), "g1")
    with pytest.raises(ValueError, match="bitmap_words"):
        _msm.batch_add(pts, np.array([0, 0], dtype=np.int64), "g1")
    # extra all-zero words are fine
    assert not _msm.batch_add(pts, np.zeros(5, dtype=np.uint64), "g1").any()


# ---- validation --------------------------------------------------------------------------------
def test_msm_errors():
    pts = _mont_points("g1", 4)
    sc = scalars_array([1, 2, 3, 4])
    with pytest.raises(ValueError, match="group"):
        _msm.msm(pts, sc, "g3")
    with pytest.raises(ValueError, match=r"\(n, 24\)"):
        _msm.msm(pts, sc, "g2")
    with pytest.raises(ValueError, match="points"):
        _msm.msm(pts.astype(np.int64), sc, "g1")
    with pytest.raises(ValueError, match="C-contiguous"):
        _msm.msm(np.asfortranarray(pts), sc, "g1")
    with pytest.raises(ValueError, match="rows"):
        _msm.msm(pts, sc[:3], "g1")
    with pytest.raises(ValueError, match="scalars"):
        _msm.msm(pts, sc.astype(np.uint32), "g1")
    bad = sc.copy()
    bad[2, 3] = np.uint64(1 << 63)
    with pytest.raises(ValueError, match=r"scalars\[2\]"):
        _msm.msm(pts, bad, "g1")
    with pytest.raises(ValueError, match="threads"):
        _msm.msm(pts, sc, "g1", -1)
    assert not _msm.msm(pts[:0], sc[:0], "g1").any()
    # read-only inputs are accepted
    ro = sc.copy()
    ro.flags.writeable = False
    check(_msm.msm(pts, ro, "g1"), reference(_points("g1", 4), [1, 2, 3, 4], "g1"), "g1")


def test_gil_released():
    """A second Python thread keeps running while an MSM runs in native code."""
    n = 1 << 14
    pts = _mont_points("g1", n)
    sc = scalars_array(random_scalars(random.Random(1), n))
    done = threading.Event()
    ticks = 0

    def work():
        for _ in range(3):
            _msm.msm(pts, sc, "g1", 1)
        done.set()

    t0 = time.perf_counter()
    th = threading.Thread(target=work)
    th.start()
    while not done.is_set():
        ticks += 1
        time.sleep(0.001)
    th.join()
    elapsed = time.perf_counter() - t0
    # with the GIL held for the whole MSM the loop would tick ~3 times
    assert ticks > 20 and ticks > elapsed * 100, (ticks, elapsed)
