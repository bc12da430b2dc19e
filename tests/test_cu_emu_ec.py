"""The GPU curve code (cuzk/cu/ec/xyzz_t.cuh over Fq and Fq2), batch addition
(cuzk/cu/msm/batch_add.cu) and fixed-base multiplication (cuzk/cu/ec/fixed_base.cu) on the host
emulator (see tests/test_cu_emu.py), against the CPU backend (cuzk._native: ec.hpp's Jacobian
formulas, _msm.batch_add, _r1cs.fixed_base_mul).
"""
import random
import threading
import time

import numpy as np
import pytest

from helpers import run_threaded
from test_cu_emu import R, to_arr

from cuzk._cuda_pending import AFFINE_WORDS, XYZZ_WORDS
from cuzk._native import _field, _msm, _r1cs

GROUPS = ["g1", "g2"]


def points(group, n, seed):
    """n affine Montgomery points k·G for random k (the CPU's fixed-base path)."""
    rnd = random.Random(seed)
    ks = to_arr([rnd.randrange(1, R) for _ in range(n)], 32)
    return _r1cs.fixed_base_mul(group, _field.to_mont(ks, "fr"))


def to_affine(xyzz, group):
    """XYZZ rows uint64 (k, 24|48) -> affine (k, 12|24), one at a time through the CPU's Horner."""
    fn = _field.g1_xyzz_horner if group == "g1" else _field.g2_xyzz_horner
    return np.stack([fn(np.ascontiguousarray(r[None, :]), 1, 1, 0) for r in xyzz])


@pytest.fixture
def gpu_batch(fake, monkeypatch):
    return fake.install(monkeypatch, None, "cuzk._cuda_batch")


@pytest.fixture
def gpu_fb(fake, monkeypatch):
    return fake.install(monkeypatch, None, "cuzk._cuda_fixed_base")


# --------------------------------------------------------------------------- point operations

EC_OPS = 11


@pytest.mark.parametrize("group", GROUPS)
def test_xyzz_ops_exceptional_cases(fake, group):
    """madd / add / dbl / sub / mul_u32 of the template (emu_ec_ops_*: see tests/cu_emu/ec_ops.cu)
    on random pairs and on P + P, P + (−P), infinity on either or both sides, against the CPU."""
    w = AFFINE_WORDS[group]
    p = points(group, 6, 11 if group == "g1" else 12)
    inf = np.zeros(w, np.uint64)
    neg = lambda q: _field.point_neg(q, group)           # noqa: E731
    pairs = [(p[0], p[1]), (p[2], p[3]), (p[0], p[0]), (p[1], neg(p[1])), (inf, p[4]),
             (p[5], inf), (inf, inf), (neg(p[2]), p[2])]
    a = np.ascontiguousarray(np.stack([x for x, _ in pairs]))
    b = np.ascontiguousarray(np.stack([y for _, y in pairs]))
    dev = fake.Device.get(0)
    n = len(pairs)
    da, db = fake.DeviceBuffer.alloc(dev, a.nbytes), fake.DeviceBuffer.alloc(dev, b.nbytes)
    do = fake.DeviceBuffer.alloc(dev, n * EC_OPS * XYZZ_WORDS[group] * 8)
    try:
        fake.copy_htod(da, a, a.nbytes, None)
        fake.copy_htod(db, b, b.nbytes, None)
        fake.Module(dev).function(f"emu_ec_ops_{group}").launch(
            None, 2, 4, [("P", do.ptr), ("P", da.ptr), ("P", db.ptr), ("Q", n)])
        raw = np.empty((n * EC_OPS, XYZZ_WORDS[group]), np.uint64)
        fake.copy_dtoh(raw, do, raw.nbytes, None)
    finally:
        for x in (da, db, do):
            x.free()
    got = to_affine(raw, group).reshape(n, EC_OPS, w)
    add = lambda x, y: _field.point_add(x, y, group)     # noqa: E731
    dbl = lambda x: _field.point_double(x, group)        # noqa: E731
    names = ["a+b madd", "a+b add", "2a dbl", "a+a madd", "2a+b madd", "2a+2b add", "2a+2a add",
             "2a-2a add", "a-b sub", "5(2a) mul_u32", "2a-2b sub"]
    for i, (x, y) in enumerate(pairs):
        x2, y2 = dbl(x), dbl(y)
        want = [add(x, y), add(x, y), x2, x2, add(x2, y), add(x2, y2), dbl(x2), inf,
                add(x, neg(y)), _field.point_mul(x2, 5, group), add(x2, neg(y2))]
        for k, wv in enumerate(want):
            assert np.array_equal(got[i, k], wv), f"{group} pair {i}: {names[k]}"


def test_g2_xyzz_horner_matches_cpu():
    """_field.g2_xyzz_horner: Σ_w 2^(w·c) Σ_p parts against point arithmetic (XYZZ rows built
    from affine points with ZZ = ZZZ = 1, plus infinity rows)."""
    p = points("g2", 6, 5)
    one = _field.to_mont(to_arr([1], 48), "fq")[0]
    rows = []
    for q in p:
        r = np.zeros(48, np.uint64)
        r[:24] = q                                       # X = x, Y = y
        r[24:30] = one                                   # ZZ = 1 (c0), c1 = 0
        r[36:42] = one                                   # ZZZ = 1
        rows.append(r)
    inf = np.zeros(48, np.uint64)
    parts = np.ascontiguousarray(np.stack(rows[:3] + [inf] + rows[3:5]))   # W = 3, P = 2
    got = _field.g2_xyzz_horner(parts, 3, 2, 4)
    s = [_field.point_add(parts_aff[0], parts_aff[1], "g2") for parts_aff in
         ((p[0], p[1]), (p[2], np.zeros(24, np.uint64)), (p[3], p[4]))]
    want = np.zeros(24, np.uint64)
    for w in (2, 1, 0):
        want = _field.point_mul(want, 16, "g2") if want.any() else want
        want = _field.point_add(want, s[w], "g2")
    assert np.array_equal(got, want)
    with pytest.raises(ValueError, match="48"):
        _field.g2_xyzz_horner(np.zeros((2, 24), np.uint64), 1, 2, 0)


# --------------------------------------------------------------------------- batch addition

def bitmaps(n, rnd):
    nw = (n + 63) // 64
    full = np.full(nw, np.uint64(2**64 - 1))
    if n % 64:
        full[-1] = np.uint64((1 << (n % 64)) - 1)
    one = np.zeros(nw, np.uint64)
    j = rnd.randrange(n)
    one[j // 64] = np.uint64(1 << (j % 64))
    last = np.zeros(nw, np.uint64)
    last[(n - 1) // 64] = np.uint64(1 << ((n - 1) % 64))
    rand = np.array([rnd.getrandbits(64) for _ in range(nw)], dtype=np.uint64) & full
    dense = np.array([sum(1 << b for b in range(64) if rnd.random() < 0.9) for _ in range(nw)],
                     dtype=np.uint64) & full
    return {"none": np.zeros(nw, np.uint64), "all": full, "one": one, "last": last,
            "random": rand, "bits90": dense}


@pytest.mark.parametrize("kind", ["xyzz", "affine", "balanced"])
@pytest.mark.parametrize("group,n", [("g1", 1), ("g1", 64), ("g1", 333), ("g1", 3000),
                                     ("g2", 1), ("g2", 130), ("g2", 700)])
def test_batch_add_matches_cpu(gpu_batch, group, n, kind):
    rnd = random.Random(n)
    pts = points(group, n, n)
    if n > 10:
        pts[3] = 0                                       # infinity rows add nothing
        pts[7] = _field.point_neg(pts[5], group)         # P and −P cancel
        pts[9] = pts[8]                                  # P + P: a doubling inside a thread
        pts[2] = _field.point_neg(pts[1], group)         # −P right after P: the lane empties
        pts[4] = pts[1]                                  # ... and takes the next point anew
    for name, bits in bitmaps(n, rnd).items():
        want = _msm.batch_add(pts, bits, group, 2)
        got = gpu_batch.batch_add(pts, bits, group, kind=kind)
        assert np.array_equal(got, want), f"{group} n={n} bitmap {name} {kind}"


@pytest.mark.parametrize("lane_bits", [8, 16, 32, 64])
def test_batch_add_affine_lanes(gpu_batch, monkeypatch, lane_bits):
    """The affine kernel with every lane width: many lanes per thread (a small grid), lanes that
    straddle no word and a short last lane, points at x = 0 (infinity) and equal or opposite
    points meeting in one lane after others; the plan sizes the lane state for every lane."""
    monkeypatch.setattr(gpu_batch, "_LANE_BITS_ENV", lane_bits)
    monkeypatch.setattr(gpu_batch, "_AFFINE_THREADS", 8)
    n = 64 * 9 + 21
    pts = points("g1", n, 5)
    for i in range(0, n, 37):
        pts[i] = 0
    pts[100] = pts[98]
    pts[200] = _field.point_neg(pts[150], "g1")
    plan = gpu_batch.batch_add_plan(n, "g1", kind="affine")
    assert plan.lane_bits == lane_bits and plan.lanes == -(-n // lane_bits)
    assert plan.scratch_bytes == plan.blocks * 4 * 48 + plan.lanes * (96 + 48 + 16)
    rnd = random.Random(lane_bits)
    for name, bits in bitmaps(n, rnd).items():
        got = gpu_batch.batch_add(pts, bits, "g1", kind="affine")
        assert np.array_equal(got, _msm.batch_add(pts, bits, "g1", 2)), name
    with pytest.raises(ValueError, match="kind"):
        gpu_batch.batch_add_plan(n, "g1", kind="tree")


def test_batch_add_default_kind_and_lane_bits():
    """The measured choice of kernel: affine for dense bitmaps (at least 60 % of the bits set) of
    G2 and of G1 from 2^24 points, and for sparse G2 ones from 2^26; else balanced (a bitmap of
    unknown count taken as sparse); the lane width is sqrt(points per thread) to the nearest power
    of two in 8..64."""
    from cuzk import _cuda_batch as B
    assert B.default_kind("g1", 1 << 27) == B.default_kind("g1", 1 << 20) == "balanced"
    assert B.default_kind("g1", 1000, 600) == "balanced"            # dense but small
    assert B.default_kind("g1", 1 << 24, 10066330) == "affine"       # 0.6 * 2^24 = 10066329.6
    assert B.default_kind("g1", 1 << 24, 10066329) == B.default_kind("g1", (1 << 24) - 1, 1 << 24) == "balanced"
    assert B.default_kind("g1", 1 << 27, 1 << 26) == "balanced"
    assert B.default_kind("g2", 1) == B.default_kind("g2", (1 << 26) - 1, 1 << 25) == "balanced"
    assert B.default_kind("g2", 1 << 26) == B.default_kind("g2", 1 << 27, 1 << 26) == "affine"
    assert B.default_kind("g2", 1000, 600) == B.default_kind("g2", 1 << 20, 1 << 20) == "affine"
    assert [B._lane_bits(t) for t in (1, 30, 300, 1000, 3970, 10**6)] == [8, 8, 16, 32, 64, 64]


@pytest.mark.parametrize("kind", ["xyzz", "balanced"])
def test_batch_add_enqueue_many_blocks(gpu_batch, fake, monkeypatch, kind):
    """The plan / enqueue interface with device buffers and a host slice, several blocks of 8
    threads (words split across threads and blocks), bitmap bits past n ignored by the kernel."""
    monkeypatch.setitem(gpu_batch._THREADS, "g1", 8)
    n = 64 * 40 + 17
    pts = points("g1", n, 3)
    rnd = random.Random(1)
    bits = bitmaps(n, rnd)["bits90"]
    plan = gpu_batch.batch_add_plan(n, "g1", kind=kind)
    assert plan.blocks >= 2 and plan.host_rows == plan.blocks
    dev = fake.Device.get(0)
    st = gpu_batch._state(None)
    d_p = fake.DeviceBuffer.alloc(dev, pts.nbytes)
    padded = np.concatenate([bits, np.full(3, np.uint64(2**64 - 1))])
    d_b = fake.DeviceBuffer.alloc(dev, padded.nbytes)
    fake.copy_htod(d_p, pts, pts.nbytes, None)
    # garbage above bit n in the last word too: the kernel masks it
    padded[-4] |= np.uint64(~((1 << (n % 64)) - 1) & (2**64 - 1))
    fake.copy_htod(d_b, padded, padded.nbytes, None)
    host = np.empty((plan.host_rows, XYZZ_WORDS["g1"]), np.uint64)
    pend = gpu_batch.enqueue_batch_add(plan, None, st.pool, d_p.ptr, d_b, host)
    assert pend.P == plan.blocks
    assert np.array_equal(pend.value(), _msm.batch_add(pts, bits, "g1", 2))
    d_p.free()
    d_b.free()


@pytest.mark.parametrize("threads", [4, 8])
def test_batch_add_balanced_tiles(gpu_batch, monkeypatch, threads):
    """The balanced kernel over several tiles per block (a small grid, blocks of 4 or 8 threads, a
    short last tile, a last word cut at n), every bitmap shape: ranks dealt out across a tile's
    words, a doubling and a cancellation split between threads, infinity rows."""
    monkeypatch.setattr(gpu_batch, "_BALANCED_THREADS", threads)
    n = 64 * 140 + 29
    pts = points("g1", n, 7)
    for i in range(0, n, 41):
        pts[i] = 0
    pts[65] = pts[64]                                        # P + P
    pts[130] = _field.point_neg(pts[2], "g1")                # P and −P, different words
    plan = gpu_batch.batch_add_plan(n, "g1", kind="balanced")
    assert plan.blocks >= 4 and plan.threads == threads and -(-plan.words // plan.blocks) > 2 * threads
    rnd = random.Random(threads)
    for name, bits in bitmaps(n, rnd).items():
        got = gpu_batch.batch_add(pts, bits, "g1", kind="balanced")
        assert np.array_equal(got, _msm.batch_add(pts, bits, "g1", 2)), f"{name} T={threads}"


def test_batch_add_rejects_bad_input(gpu_batch):
    pts = points("g1", 70, 2)
    with pytest.raises(ValueError, match="bit 70 is set"):
        gpu_batch.batch_add(pts, np.array([0, 1 << 6], np.uint64), "g1")
    with pytest.raises(ValueError, match=">= 2"):
        gpu_batch.batch_add(pts, np.zeros(1, np.uint64), "g1")
    with pytest.raises(ValueError, match="shape"):
        gpu_batch.batch_add(pts, np.zeros(2, np.uint64), "g2")
    with pytest.raises(ValueError, match="group"):
        gpu_batch.batch_add(pts, np.zeros(2, np.uint64), "g3")
    assert not gpu_batch.batch_add(pts[:0], np.zeros(0, np.uint64), "g1").any()
    bits = np.zeros(4, np.uint64)
    bits[3] = np.uint64(1 << 8)                          # past the first word after n: bit 200
    with pytest.raises(ValueError, match="bit 200 is set but there are only 70 points"):
        gpu_batch.batch_add(pts, bits, "g1")
    with pytest.raises(ValueError, match="n_points must be >= 0"):
        gpu_batch.batch_add_plan(-1, "g1")
    with pytest.raises(ValueError, match="at most 2"):
        gpu_batch.batch_add_plan(1 << 40, "g1", kind="balanced")
    assert gpu_batch.batch_add_plan((1 << 40) - 1, "g1", kind="balanced").words == 1 << 34
    with pytest.raises(ValueError, match="group"):
        gpu_batch.batch_add_plan(10, "g3")
    strided = gpu_batch.check_bitmap(np.zeros(8, np.uint64)[::2], 200)
    assert strided.flags.c_contiguous and strided.shape == (4,)


@pytest.mark.parametrize("group", GROUPS)
def test_batch_add_plan_shapes(gpu_batch, fake, group):
    """Each kind's plan: words = ceil(n / 64); one block while the words (xyzz, balanced) or the
    lanes (affine) fit in one block's threads, never more blocks than that; lane state only for
    affine (else lane_bits = lanes = 0 and the scratch is the partials alone); n = 0 gives no
    block, and its enqueue launches nothing and gives infinity; repr names the plan."""
    B = gpu_batch
    rows = XYZZ_WORDS[group]
    for kind in B.KINDS:
        for n in (1, 64, 65, 700):
            p = B.batch_add_plan(n, group, kind=kind)
            assert p.words == -(-n // 64) and p.host_rows == p.blocks
            units = p.lanes if kind == "affine" else p.words
            assert p.blocks == -(-units // p.threads) == 1, (kind, n)
            if kind == "affine":
                assert p.lanes == -(-n // p.lane_bits) and p.lane_bits in B._LANE_BITS
            else:
                assert p.lane_bits == p.lanes == 0
                assert p.scratch_bytes == p.blocks * rows * 8
        assert f"BatchPlan(n_points=65, group='{group}', kind='{kind}'" in repr(B.batch_add_plan(65, group, kind=kind))
        empty = B.batch_add_plan(0, group, kind=kind)
        assert empty.blocks == empty.host_rows == 0
        launches = len(fake.launches)
        got = B.enqueue_batch_add(empty, None, B._state(None).pool, 0, 0,
                                  np.empty((0, rows), np.uint64)).value()
        assert len(fake.launches) == launches and got.shape == (AFFINE_WORDS[group],) and not got.any()


def test_batch_add_enqueue_checks_host_view_and_frees(gpu_batch, fake):
    """``enqueue_batch_add`` refuses a host slice of the wrong shape, dtype or order (nothing is
    allocated or launched); ``batch_add`` takes points in any memory order (Fortran, strided),
    gives the CPU's sum while the emulator's streams run out of order, and leaves no device
    buffer behind."""
    B = gpu_batch
    n = 200
    pts = points("g1", 2 * n, 23)
    bits = bitmaps(n, random.Random(4))["random"]
    want = _msm.batch_add(np.ascontiguousarray(pts[::2]), bits, "g1", 2)
    with fake.reordered(3, p=0.0):
        assert np.array_equal(B.batch_add(pts[::2], bits, "g1"), want)
    before = set(fake._live)
    assert np.array_equal(B.batch_add(np.asfortranarray(pts[::2]), bits, "g1", kind="affine"), want)
    assert set(fake._live) == before
    plan = B.batch_add_plan(n, "g1", kind="balanced")
    good = (plan.host_rows, XYZZ_WORDS["g1"])
    launches = len(fake.launches)
    for bad in (np.empty(good, np.uint32), np.empty((good[0] + 1, good[1]), np.uint64),
                np.empty((good[0], 2 * good[1]), np.uint64)[:, ::2], list(np.empty(good, np.uint64))):
        with pytest.raises(ValueError, match="host_view must be"):
            B.enqueue_batch_add(plan, None, B._state(None).pool, 0, 0, bad)
    assert len(fake.launches) == launches and set(fake._live) == before


def test_batch_add_exports():
    """The module's public names exist."""
    from cuzk import _cuda_batch as B
    assert {"batch_add", "batch_add_plan", "enqueue_batch_add", "check_bitmap"} <= set(B.__all__)
    assert all(hasattr(B, name) for name in B.__all__)


# --------------------------------------------------------------------------- fixed base

@pytest.mark.parametrize("group,n,w", [("g1", 1, 4), ("g1", 300, 5), ("g1", 100, 16),
                                       ("g2", 1, 3), ("g2", 150, 6)])
def test_fixed_base_matches_cpu(gpu_fb, group, n, w):
    rnd = random.Random(n * 7 + w)
    edge = [0, 1, 2, R - 1, R - 2, (1 << 254), (1 << 16) - 1, 1 << (w - 1), (1 << w) - 1]
    ints = [rnd.choice(edge) if rnd.random() < 0.3 else rnd.randrange(R) for _ in range(n)]
    ints[0] = 0 if n > 1 else ints[0]
    k = to_arr(ints, 32)
    km = _field.to_mont(k, "fr")
    want = _r1cs.fixed_base_mul(group, km.copy())
    assert np.array_equal(gpu_fb.fixed_base_mul(None, k, group, window=w), want)
    assert np.array_equal(gpu_fb.fixed_base_mul(None, km, group, montgomery=True, window=w), want)
    base = points(group, 1, 99)[0]
    assert np.array_equal(gpu_fb.fixed_base_mul(base, k, group, window=w),
                          _r1cs.fixed_base_mul(group, km.copy(), base=base))


def test_fixed_base_rejects_bad_input(gpu_fb):
    with pytest.raises(ValueError, match=r"scalars\[1\]"):
        gpu_fb.fixed_base_mul(None, to_arr([1, R, 2], 32), "g1")
    with pytest.raises(ValueError, match="infinity"):
        gpu_fb.fixed_base_mul(np.zeros(12, np.uint64), to_arr([1], 32), "g1")
    with pytest.raises(ValueError, match="window"):
        gpu_fb.fixed_base_mul(None, to_arr([1], 32), "g1", window=17)
    assert gpu_fb.fixed_base_mul(None, to_arr([], 32).reshape(0, 4), "g2").shape == (0, 24)
    one = to_arr([1], 32)
    with pytest.raises(ValueError, match="group must be 'g1' or 'g2', got 'g3'"):
        gpu_fb.fixed_base_mul(None, one, "g3")
    for bad in (one.astype(np.int64), one[:, :3], one.reshape(-1), one.tolist(), one.reshape(1, 2, 2)):
        with pytest.raises(ValueError, match=r"scalars: expected a uint64 array of shape \(n, 4\)"):
            gpu_fb.fixed_base_mul(None, bad, "g1")
    with pytest.raises(ValueError, match="base must hold 12 uint64 limbs for g1"):
        gpu_fb.fixed_base_mul(np.ones(6, np.uint64), one, "g1")
    for form, word in ((False, "canonical"), (True, "Montgomery")):      # the first bad index, even 0
        with pytest.raises(ValueError, match=rf"scalars\[0\] is not a {word} Fr element \(>= r\)"):
            gpu_fb.fixed_base_mul(None, to_arr([R, R + 1], 32), "g1", montgomery=form)


def test_fixed_base_exports(gpu_fb):
    assert set(gpu_fb.__all__) == {"fixed_base_mul", "window_bits", "table_scalars"}
    assert all(hasattr(gpu_fb, name) for name in gpu_fb.__all__)


def test_fixed_base_takes_any_layout(gpu_fb):
    """The base as a list, a (1, words) row or signed ints, and scalars in Fortran order or
    strided: the bytes of contiguous uint64 input."""
    rnd = random.Random(5)
    k = to_arr([rnd.randrange(R) for _ in range(40)], 32)
    for group in ("g1", "g2"):
        base = points(group, 1, 7)[0]
        want = gpu_fb.fixed_base_mul(base, k, group, window=4)
        for b in (base.tolist(), base.reshape(1, -1), base.astype(np.int64)):
            assert np.array_equal(gpu_fb.fixed_base_mul(b, k, group, window=4), want)
        assert np.array_equal(gpu_fb.fixed_base_mul(base, np.asfortranarray(k), group, window=4), want)
        wide = np.zeros((40, 8), np.uint64)
        wide[:, ::2] = k
        assert np.array_equal(gpu_fb.fixed_base_mul(base, wide[:, ::2], group, window=4), want)


def test_fixed_base_frees_and_launches(gpu_fb, fake, monkeypatch):
    """A call leaves nothing behind but its table (device and pinned buffers freed, events
    closed; its events only order, untimed) and launches one block per 128 scalars of a chunk,
    at most 8 per SM (the fake has 4); window 2 and 16 are the bounds."""
    events = []
    real_event = fake.Event

    def event(*a, **kw):
        events.append(real_event(*a, **kw))
        return events[-1]

    monkeypatch.setattr(fake, "Event", event)
    k = to_arr([random.Random(2).randrange(R) for _ in range(300)], 32)
    want = _r1cs.fixed_base_mul("g1", _field.to_mont(k, "fr"))
    gpu_fb.fixed_base_mul(None, k, "g1", window=5)           # builds the table
    before, since = set(fake._live), len(fake.launches)
    assert np.array_equal(gpu_fb.fixed_base_mul(None, k, "g1", window=5), want)
    assert set(fake._live) == before and events and all(e.closed and not e.timing for e in events)
    assert [x[1] for x in fake.launches[since:] if x[0] == "cuzk_fixed_base_g1"] == [3]
    monkeypatch.setattr(gpu_fb, "_CHUNK", 5000)
    since = len(fake.launches)
    big = np.tile(k, (17, 1))[:5000]
    gpu_fb.fixed_base_mul(None, big, "g1", window=5)
    assert [x[1] for x in fake.launches[since:] if x[0] == "cuzk_fixed_base_g1"] == [4 * 8]
    for w in (2, 16):
        assert np.array_equal(gpu_fb.fixed_base_mul(None, k[:7], "g1", window=w), want[:7])
    with pytest.raises(ValueError, match="window must be in 2..16, got 1"):
        gpu_fb.fixed_base_mul(None, k, "g1", window=1)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_fixed_base_table_ready_for_other_streams(gpu_fb, fake, seed):
    """Two threads (two streams) start on a table neither has: the one that builds it waits for
    its upload before sharing it, so the other's kernel, run out of order, still reads it."""
    rnd = random.Random(seed)
    k = to_arr([rnd.randrange(R) for _ in range(64)], 32)
    want = _r1cs.fixed_base_mul("g1", _field.to_mont(k, "fr"))
    with fake.reordered(seed, p=0.5) as order:
        outs = run_threaded(lambda i: gpu_fb.fixed_base_mul(None, k, "g1", window=4 + seed % 3), 2)
    assert order.ran > 0 and all(np.array_equal(o, want) for o in outs)


@pytest.mark.parametrize("seed", [1, 2])
def test_fixed_base_failure_mid_pipeline_cleans_up(gpu_fb, fake, monkeypatch, seed):
    """A host copy that fails after a chunk's kernel and copies are queued: the error reaches
    the caller only after the stream is done with the pinned and device buffers, which are then
    all released (run out of order, a late copy into a freed buffer would be caught)."""
    from cuzk._native import _pool
    monkeypatch.setattr(gpu_fb, "_CHUNK", 16)
    k = to_arr([random.Random(seed).randrange(R) for _ in range(80)], 32)
    gpu_fb.fixed_base_mul(None, k, "g1", window=4, threads=1)      # the table, built beforehand
    before, calls, real = set(fake._live), [], _pool.copy_into

    def failing(*a, **kw):
        calls.append(1)
        if len(calls) == 3:             # chunk 1's scalars, after chunk 0 is queued
            raise RuntimeError("injected host copy failure")
        return real(*a, **kw)

    monkeypatch.setattr(_pool, "copy_into", failing)
    with fake.reordered(seed, p=0.5):
        with pytest.raises(RuntimeError, match="injected host copy failure"):
            gpu_fb.fixed_base_mul(None, k, "g1", window=4, threads=1)
    assert set(fake._live) == before


def test_fixed_base_table_built_once(gpu_fb, monkeypatch):
    """A (group, base, window) table is built once per device, also for threads racing on its
    first use, and reused after; another window or base gets its own."""
    builds, real, lock = [], _r1cs.fixed_base_mul, threading.Lock()

    def counting(group, ks, base=None, **kw):
        time.sleep(0.05)                    # a slow build: the racing callers wait for it
        with lock:
            builds.append((group, ks.shape[0], None if base is None else base.tobytes()))
        return real(group, ks, base=base, **kw)

    other = points("g1", 1, 3)[0]
    monkeypatch.setattr(_r1cs, "fixed_base_mul", counting)
    k = to_arr([3, 5, 7], 32)
    want = real("g1", _field.to_mont(k, "fr"))
    outs = run_threaded(lambda i: gpu_fb.fixed_base_mul(None, k, "g1", window=5), 4)
    assert all(np.array_equal(o, want) for o in outs)
    assert builds == [("g1", 52 * 16, None)]           # ceil(256/5) windows x 2^4 multiples
    gpu_fb.fixed_base_mul(None, k, "g1", window=5)
    assert len(builds) == 1
    gpu_fb.fixed_base_mul(None, k, "g1", window=6)
    gpu_fb.fixed_base_mul(other, k, "g1", window=5)
    assert len(builds) == 3
