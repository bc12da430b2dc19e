"""The GPU MSM (cuzk._cuda_msm + cuzk/cu/msm) through the host emulator, without a GPU.

The emulator and the fake driver are those of tests/test_cu_emu.py (its fixtures are shared):
the real kernel sources compiled for the host, driven by the module's real host code.
References: the CPU MSM (cuzk._native._msm.msm / msm_indexed) for the sums, a Python signed-digit
recoding and Python big ints for the digits the device writes.
"""
import random
from types import SimpleNamespace as NS

import numpy as np
import pytest

from test_cu_emu import from_arr, to_arr

from cuzk._assignment import fr_to_mont
from cuzk._msm_dists import KINDS, R, scalars as dist_scalars

AFFINE = {"g1": 12, "g2": 24}


@pytest.fixture
def gpu_msm(fake, monkeypatch):  # noqa: F811
    """cuzk._cuda_msm running on the emulator for this test only."""
    return fake.install(monkeypatch, None, "cuzk._cuda_msm")


def _g2_ready():
    from cuzk._native import _field
    return hasattr(_field, "g2_xyzz_horner")


needs_g2 = pytest.mark.skipif(not _g2_ready(), reason="cuzk._native._field.g2_xyzz_horner not built")


_POINTS = {}


def points(group, n, seed=0):
    """n affine Montgomery points: multiples of the generator by random scalars (CPU), cached."""
    from cuzk._native import _field
    key = (group, seed)
    have = _POINTS.get(key)
    if have is None or have.shape[0] < n:
        rnd = random.Random(seed * 1000 + (group == "g2"))
        g = _field.generator(group)
        have = np.stack([_field.point_mul(g, rnd.randrange(1, R), group) for _ in range(max(n, 64))])
        _POINTS[key] = have
    return np.ascontiguousarray(have[:n])


def cpu_msm(pts, sc, group, idx=None):
    from cuzk._native import _msm
    if idx is None:
        return _msm.msm(pts, sc, group, 2)
    return _msm.msm_indexed(pts, sc, idx, group, 2)


# --------------------------------------------------------------------------- digit planning

def signed_digits(k, c):
    """Python reference: digits d_w in [−2^(c−1), 2^(c−1)], Σ d_w 2^(w·c) = k, W = ceil(256/c)."""
    W = -(-256 // c)
    out, carry = [], 0
    for w in range(W):
        v = ((k >> (w * c)) & ((1 << c) - 1)) + carry
        carry = int(v > 1 << (c - 1))
        out.append(v - (carry << c))
    assert carry == 0
    return out


EDGE = [0, 1, 2, 3, R - 1, R - 2, (1 << 255) - 1, 1 << 254, (1 << 128) - 1, 1 << 128, 2**64 - 1,
        0x5555 << 200, int("10" * 127, 2), int("01" * 127, 2)]


def test_signed_digits_reference():
    """The reference itself: digit range, reconstruction and no carry out of the top window for
    every c the plans allow, on edge scalars < 2^255 (the MSM's contract)."""
    rnd = random.Random(3)
    for c in range(2, 25):
        half = 1 << (c - 1)
        for k in EDGE + [rnd.randrange(1 << 255) for _ in range(20)] + [half, (half << c) - 1]:
            d = signed_digits(k, c)
            assert all(-half <= x <= half for x in d)
            assert sum(x << (w * c) for w, x in enumerate(d)) == k


def _reference_buckets(ints, plan):
    """{bucket: entries} of the reference digits under the plan's window/copy mapping."""
    out = {}
    for v in ints:
        for w, x in enumerate(signed_digits(v, plan.c)):
            if x:
                b = (w % plan.Wk) * plan.H + abs(x) - 1
                out[b] = out.get(b, 0) + 1
    return out


def device_entries(fake, gpu_msm, ints, c, form="canonical", k=1, N=None):
    """The counting sort (count, scan, scatter) on `ints`; (plan, off, entries) read back."""
    M = gpu_msm
    n = len(ints)
    N = n if N is None else N
    plan = M.msm_plan(n, "g1", None, npoints=N, c=c, k=k)
    sc = to_arr(ints, 32)
    if form == "montgomery":
        sc = fr_to_mont(sc)
    dev = fake.Device.get(0)
    st = M._state(dev)
    bufs = {name: fake.DeviceBuffer.alloc(dev, max(nb, 8)) for name, nb in plan.buffers}
    d_sc = fake.DeviceBuffer.alloc(dev, sc.nbytes)
    try:
        fake.copy_htod(d_sc, np.ascontiguousarray(sc), sc.nbytes, None)
        ptr = {name: b.ptr for name, b in bufs.items()}
        M._sort(st, None, plan, ptr, d_sc.ptr, 0, int(form == "montgomery"))
        counts = np.zeros(plan.nb, np.int64)
        for bkt, reps in _reference_buckets(ints, plan).items():
            counts[bkt] = reps
        off = np.empty(plan.nb + 1, np.uint64)
        fake.copy_dtoh(off, bufs["off_a"], off.nbytes, None)
        ent = np.empty(max(int(off[-1]), 1), np.uint32)
        fake.copy_dtoh(ent, bufs["entries"], ent.nbytes, None)
        left = np.empty(plan.nb, np.uint32)
        fake.copy_dtoh(left, bufs["counts"], left.nbytes, None)
    finally:
        for b in list(bufs.values()) + [d_sc]:
            b.free()
    if M.scatter_cursors(plan):
        assert np.array_equal(left, off[:-1].astype(np.uint32)), "every cursor ends at its bucket's start"
    else:
        assert not left.any(), "scatter must count every bucket back to 0"
    assert np.array_equal(np.diff(off.astype(np.int64)), counts), "bucket sizes = the reference digits'"
    return plan, off, ent[: int(off[-1])]


@pytest.fixture(params=["offsets", "cursors"])
def scatter_mode(request, gpu_msm, monkeypatch):
    """Both scatter forms (``_cuda_msm.SCATTER_MODES``): through off[b], through cursors."""
    monkeypatch.setattr(gpu_msm, "_SCATTER_MODE", request.param)
    return request.param


@pytest.mark.parametrize("c,k", [(2, 1), (3, 1), (4, 1), (5, 1), (8, 1), (13, 1), (16, 1), (4, 3), (7, 2),
                                 (5, 52)])
@pytest.mark.parametrize("form", ["canonical", "montgomery"])
def test_device_digits_reconstruct_scalars(fake, gpu_msm, scatter_mode, c, k, form):
    """The entries the device writes (bucket → ±point, copy) are exactly the reference's signed
    digits: for every scalar, Σ ±(j + 1)·2^((q·Wk + w')·c) over its entries == k_i (both scatter
    forms)."""
    rnd = random.Random(c * 100 + k)
    ints = [x % R for x in EDGE] + [rnd.randrange(R) for _ in range(26)]
    n = len(ints)
    plan, off, ent = device_entries(fake, gpu_msm, ints, c, form, k)
    H, Wk = plan.H, plan.Wk
    got = [0] * n
    ndig = [0] * n
    for b in range(plan.nb):
        w1, j = divmod(b, H)
        for e in ent[int(off[b]): int(off[b + 1])]:
            e = int(e)
            copy, i = divmod(e & 0x7fffffff, n)
            w = copy * Wk + w1
            got[i] += (-1 if e >> 31 else 1) * (j + 1) << (w * c)
            ndig[i] += 1
    assert got == ints
    assert ndig == [sum(1 for x in signed_digits(v, c) if x) for v in ints], "one entry per non-zero digit"


@pytest.mark.parametrize("c,k,per_pass", [(2, 1, 1), (5, 1, 5), (8, 2, 37), (13, 1, 4096), (7, 2, 64)])
def test_scatter_in_bucket_passes(fake, gpu_msm, scatter_mode, monkeypatch, c, k, per_pass):
    """The scatter run in several bucket-range passes (ranges that cut windows in the middle, one
    bucket per pass) sorts exactly the reference's entries: bucket sizes, every digit once, the
    scalars reconstructed, every count back to 0 or cursor at its bucket's start (device_entries
    checks these), in both scatter forms."""
    monkeypatch.setattr(gpu_msm, "_SCATTER_BUCKETS", per_pass)
    rnd = random.Random(c * 1000 + per_pass)
    ints = [x % R for x in EDGE] + [rnd.randrange(R) for _ in range(10)]
    n = len(ints)
    plan, off, ent = device_entries(fake, gpu_msm, ints, c, "montgomery", k)
    assert len(gpu_msm.scatter_passes(plan.nb)) == -(-plan.nb // per_pass) > 1
    got = [0] * n
    for b in range(plan.nb):
        w1, j = divmod(b, plan.H)
        for e in ent[int(off[b]): int(off[b + 1])]:
            copy, i = divmod(int(e) & 0x7fffffff, n)
            got[i] += (-1 if int(e) >> 31 else 1) * (j + 1) << ((copy * plan.Wk + w1) * c)
    assert got == ints


def test_scatter_cursors_only_where_positions_fit(gpu_msm, monkeypatch):
    """The cursor form is taken only where asked and every entry position (< n·W) fits 32 bits;
    an unknown CUZK_MSM_SCATTER is a ValueError naming the choices."""
    small = gpu_msm.msm_plan(1000, "g1", None, c=16)
    big = gpu_msm.msm_plan(1 << 28, "g1", None, c=16)                  # W = 16: n·W = 2^32
    edge = gpu_msm.msm_plan((1 << 28) - 1, "g1", None, c=16)           # n·W = 2^32 − 16
    assert big.n * big.W >= 1 << 32 > edge.n * edge.W
    monkeypatch.setattr(gpu_msm, "_SCATTER_MODE", "offsets")
    assert not gpu_msm.scatter_cursors(small)
    monkeypatch.setattr(gpu_msm, "_SCATTER_MODE", "cursors")
    assert gpu_msm.scatter_cursors(small) and gpu_msm.scatter_cursors(edge)
    assert not gpu_msm.scatter_cursors(big)
    monkeypatch.setattr(gpu_msm, "_SCATTER_MODE", "cursor")
    with pytest.raises(ValueError, match="offsets"):
        gpu_msm.scatter_cursors(small)


def test_scatter_passes_cover_the_buckets(gpu_msm):
    """scatter_passes: consecutive, disjoint, in order, covering [0, nb), <= per_pass each."""
    for nb in (1, 2, 7, 64, 1000, 1 << 20):
        for per in (1, 3, 64, 1 << 19, 1 << 30):
            ps = gpu_msm.scatter_passes(nb, per)
            assert ps[0][0] == 0 and ps[-1][1] == nb
            assert all(a[1] == b[0] for a, b in zip(ps, ps[1:]))
            assert all(0 < hi - lo <= per for lo, hi in ps)
    for nb in (1, 5):           # a per-pass size below 1 (CUZK_MSM_SCATTER_BUCKETS=0) means 1
        for per in (0, -5):
            assert gpu_msm.scatter_passes(nb, per) == [(b, b + 1) for b in range(nb)]


def test_window_split_grids():
    """Both window grids split every bucket set evenly (P·threads divides H, powers of two), keep
    >= 8 buckets per thread where H allows, and "wave" never has more blocks than SMs (beyond one
    block per window) nor fewer buckets per thread than "spread"."""
    from cuzk._cuda_msm import _grid, _pow2_floor, _scan_threads, _window_split
    for sm in (1, 4, 132):
        for c in range(2, 25):
            H = 1 << (c - 1)
            for Wk in (1, 2, 4, 13, 16, 128):
                got = {g: _window_split(c, Wk, sm, g) for g in ("spread", "wave")}
                for P, segs in got.values():
                    assert P & (P - 1) == 0 and segs & (segs - 1) == 0 and H % (P * segs) == 0
                    assert H // (P * segs) >= min(8, H // segs)
                (Ps, ts), (Pw, tw) = got["spread"], got["wave"]
                assert ts == tw and Pw <= Ps and (Wk * Pw <= sm or Pw == 1)
                # each grid stops at its bound: "spread" at the first P with >= 4 blocks per SM
                # in all, "wave" at the last P with at most one; or where H cannot split further
                assert H // (2 * Ps * ts) < 8 or Wk * Ps >= 4 * sm
                assert Ps == 1 or Wk * (Ps // 2) < 4 * sm
                assert H // (2 * Pw * tw) < 8 or Wk * 2 * Pw > sm
    # the scan block's threads: ~1 per 16 tiles, a power of two in 32..1024
    assert [_pow2_floor(x) for x in (0, 1, 2, 3, 4, 1000, 1 << 40)] == [1, 1, 2, 2, 4, 512, 1 << 40]
    assert [_scan_threads(nt) for nt in (1, 16 * 64, 16 * 1000, 10 ** 9)] == [32, 64, 512, 1024]
    # a launch grid: one block per `threads` items, capped at one wave of resident blocks
    assert [_grid(i, 128, 132, 2) for i in (0, 1, 128, 129, 1000, 10 ** 9)] == [1, 1, 1, 2, 8, 264]


@pytest.mark.parametrize("grid", ["spread", "wave"])
def test_msm_window_grids_same_bytes(gpu_msm, monkeypatch, rng, grid):
    """c = 13 (2^12 buckets a window) with 4 copies (Wk = 5): the two grids split the window step
    differently on the emulator's 4 SMs ("spread" 2 blocks a window of 8 buckets a thread, "wave"
    1 of 16): the CPU's bytes with both, G1 and (if built) G2."""
    from cuzk._cuda_msm import _window_split
    monkeypatch.setattr(gpu_msm, "_WINDOW_GRID", grid)
    assert _window_split(13, 5, 4) == ((2, 256) if grid == "spread" else (1, 256))
    n = 64
    pts = points("g1", n)
    sc = dist_scalars(rng, n, "uniform")
    assert np.array_equal(gpu_msm.msm_g1(pts, sc, c=13, k=4), cpu_msm(pts, sc, "g1"))
    if _g2_ready():
        p2 = points("g2", 24)
        s2 = dist_scalars(rng, 24, "bits90")
        assert np.array_equal(gpu_msm.msm_g2(p2, s2, c=13, k=4), cpu_msm(p2, s2, "g2"))


def test_plan_invariants(gpu_msm):
    """Window/segment planning against its contracts, for many sizes (no tuning constants)."""
    M = gpu_msm
    for n in (1, 2, 3, 100, 1 << 10, 3 << 14, 1 << 20, 1 << 24, 1 << 27):
        for k in (1, 2, 4):
            for c in (None, 4, 9, 16):
                p = M.msm_plan(n, "g1", None, npoints=n, c=c, k=k, balance="bucket")
                assert p.W * p.c >= 256 and (p.W - 1) * p.c < 256        # covers k < 2^255 + carry
                assert p.Wk * p.k >= p.W and (p.Wk - 1) * p.k < p.W
                assert p.nb == p.Wk << (p.c - 1) and p.H == 1 << (p.c - 1)
                assert p.S ** p.levels >= n * k > p.S ** (p.levels - 1) or (n * k == 1 and p.levels == 1)
                assert p.H % (p.P * p.segs) == 0 and p.host_rows == p.Wk * p.P
                assert p.scratch_bytes >= sum(b for _, b in p.buffers)
                assert p.S == M.default_segment(n, p.W)
                # the count scan's block: the least power of two >= its threads' share of the
                # buckets (_SCAN_ITEMS each), within 32..256; its tiles cover every bucket
                t, q = p.scan_threads, -(-p.nb // M._SCAN_ITEMS)
                assert t & (t - 1) == 0 and 32 <= t <= 256 and (t >= q or t == 256) and (t == 32 or t // 2 < q)
                assert p.ntiles == -(-p.nb // (M._SCAN_ITEMS * t))
                assert p.S == (M._SEGMENT_BIG if n * p.W >= M._SEGMENT_BIG_ENTRIES else M._SEGMENT)
                assert dict(p.buffers)["entries"] == 4 * n * p.W
                assert (dict(p.buffers)["sums_b"] == 0) == (p.levels == 1)     # level 1's sums only if it runs
                # level 0's sums: sum_b ceil(cnt_b / S) <= ceil(n W / S) + nb, no more (the budget counts it)
                sums1, xyzz = -(-n * p.W // p.S) + p.nb, M.XYZZ_WORDS["g1"] * 8
                assert dict(p.buffers)["sums_a"] == sums1 * xyzz
                if p.levels > 1:                                   # level 1's: the same bound over level 0's sums
                    assert dict(p.buffers)["sums_b"] == (-(-sums1 // p.S) + p.nb) * xyzz
                assert p.precompute_bytes == (k * n * 96 if k > 1 else 0)
    assert M.window_bits(1 << 24) > M.window_bits(1 << 16) > M.window_bits(1 << 8)
    assert M.window_bits(1 << 24) == M._C_AUTO_MAX                   # the search reaches its top width
    A = M._ALIGN                                                       # buffers padded to whole alignment units
    assert [M._align(x) for x in (0, 1, A, A + 1, 5 * A)] == [A, A, A, 2 * A, 5 * A]
    empty = M.msm_plan(0, "g1", None)
    assert empty.host_rows == 0 and empty.scratch_bytes == 0
    assert M.SortShare.offsets_bytes(empty) == 0 and M.SortShare.kept_bytes(empty) == 0   # nothing kept
    with pytest.raises(ValueError, match=f"k·npoints = {1 << 31} >= 2\\^31"):
        M.msm_plan(1 << 28, "g1", None, k=8)
    with pytest.raises(ValueError, match="c must be"):
        M.msm_plan(10, "g1", None, c=25)
    with pytest.raises(ValueError, match="c must be"):
        M.msm_plan(10, "g1", None, c=1)
    assert M.msm_plan(10, "g1", None, c=24).c == 24 and M.msm_plan(10, "g1", None, c=2).c == 2
    with pytest.raises(ValueError, match="group"):
        M.msm_plan(10, "g3", None)
    with pytest.raises(ValueError, match="only 5 points"):
        M.msm_plan(10, "g1", None, npoints=5)
    for kw, what in (({"n": -1}, "must be >= 0"), ({"n": 1 << 32, "indexed": True, "npoints": 10}, "at most 2\\^32 - 1"),
                     ({"k": 0}, "k must be >= 1"), ({"segment": 1}, "segment must be >= 2"),
                     ({"k": 17, "c": 16}, "k = 17 copies but only W = 16 windows")):
        with pytest.raises(ValueError, match=what):
            M.msm_plan(**{"n": 10, "group": "g1", "device": None, "npoints": 10, **kw})
    assert M.msm_plan(10, "g1", None, k=16, c=16).Wk == 1
    assert repr(M.msm_plan(10, "g1", None, c=5)).startswith("MsmPlan(n=10, npoints=10, group='g1'")
    # NumPy integers plan as Python ints: no 32-bit wrap in n·W, no 8-bit k·N slipping past 2^31
    big = M.msm_plan(np.uint32(3 << 28), "g1", None, npoints=1000, indexed=True, k=np.int8(2))
    assert type(big.n) is int and type(big.k) is int
    assert dict(big.buffers)["entries"] == 4 * (3 << 28) * big.W > 1 << 32
    with pytest.raises(ValueError, match="2\\^31"):
        M.msm_plan(10, "g1", None, npoints=1 << 29, indexed=True, k=np.int8(4))


# --------------------------------------------------------------------------- MSM == CPU

def _sc(rng, n, kind, form):
    s = dist_scalars(rng, n, kind)
    return s, (fr_to_mont(s) if form == "montgomery" else s)


G1_CASES = [(kind, 97, 5, "canonical") for kind in KINDS] + [
    ("uniform", 1, None, "canonical"), ("uniform", 2, 3, "montgomery"), ("uniform", 300, 8, "canonical"),
    ("bits90", 256, 6, "montgomery"), ("real_tail", 211, 4, "montgomery"), ("r_minus_1", 40, 7, "montgomery"),
    ("equal", 130, 2, "canonical"), ("single", 64, 11, "montgomery")]


@pytest.mark.parametrize("kind,n,c,form", G1_CASES, ids=[f"{k}-n{n}-c{c}-{f[:4]}" for k, n, c, f in G1_CASES])
def test_msm_g1_matches_cpu(gpu_msm, rng, kind, n, c, form):
    pts = points("g1", n)
    canon, sc = _sc(rng, n, kind, form)
    got = gpu_msm.msm_g1(pts, sc, c=c, scalar_form=form)
    assert np.array_equal(got, cpu_msm(pts, canon, "g1")), f"{kind} n={n} c={c} {form}"


@pytest.mark.parametrize("segment", [2, 3, 5])
@pytest.mark.parametrize("kind", ["ones", "bits90", "equal"])
def test_msm_g1_tiny_segments(gpu_msm, rng, kind, segment):
    """Segments of 2..5 entries: heavy buckets go through several segment levels."""
    n = 150
    pts = points("g1", n)
    sc = dist_scalars(rng, n, kind)
    got = gpu_msm.msm_g1(pts, sc, c=4, segment=segment)
    assert np.array_equal(got, cpu_msm(pts, sc, "g1")), f"{kind} S={segment}"


def _last_level(ints, plan):
    """The segment level after which every bucket holds <= 1 sum (Python reference): level 0
    cuts bucket b's cnt_b sorted entries into ceil(cnt_b / S) segments ("bucket") or into the
    pieces its range [off_b, off_b + cnt_b) makes of the global chunks of S ("flat", "batch");
    each level after makes ceil(m / S) of m."""
    S, sizes = plan.S, _reference_buckets(ints, plan)
    at, m = 0, []
    for b in sorted(sizes):
        cnt = sizes[b]
        if plan.balance == "bucket":
            m.append(-(-cnt // S))
        else:
            m.append((at + cnt - 1) // S - at // S + 1)
        at += cnt
    level = 0
    while m and max(m) > 1:
        m, level = [-(-x // S) for x in m], level + 1
    return level


LEVEL_CASES = [("uniform", 300, 12, 4, "bucket"), ("uniform", 300, 12, 4, "flat"),
               ("uniform", 300, 7, 4, "bucket"), ("uniform", 300, 7, 2, "batch"),
               ("uniform", 300, 5, 3, "flat"), ("equal", 130, 2, 3, "bucket"), ("ones", 150, 4, 2, "flat")]


@pytest.mark.parametrize("kind,n,c,S,balance", LEVEL_CASES,
                         ids=[f"{k}-c{c}-S{s}-{b}" for k, _, c, s, b in LEVEL_CASES])
def test_msm_levels_after_one_sum_per_bucket_do_nothing(gpu_msm, fake, monkeypatch, rng, kind, n, c, S, balance):
    """Segment levels after the one that left every bucket one sum return at once (more[L] = 0),
    and the window kernel reads the last level that ran (its parity picks the buffers): the CPU's
    bytes either way.  The more[] words, read as the window kernel starts, against a reference
    from the bucket sizes (``_last_level``): level L + 1 runs iff some bucket had > 1 sum after L."""
    seen = []
    real = fake.emu.launch

    def spy(name, g, b, shmem, packed):
        if name.startswith("cuzk_msm_windows_"):
            ptr, levels = packed[5][1], packed[6][1]
            words = np.zeros(levels, np.uint32)
            fake.copy_dtoh(words, ptr, words.nbytes, None)
            seen.append(words)
        return real(name, g, b, shmem, packed)
    monkeypatch.setattr(fake.emu, "launch", spy)
    pts = points("g1", n)
    sc = dist_scalars(rng, n, kind)
    got = gpu_msm.msm_g1(pts, sc, c=c, segment=S, balance=balance)
    assert np.array_equal(got, cpu_msm(pts, sc, "g1")), f"{kind} c={c} S={S} {balance}"
    (more,) = seen
    plan = gpu_msm.msm_plan(n, "g1", None, npoints=n, c=c, segment=S, balance=balance)
    want = _last_level(from_arr(sc), plan)
    assert len(more) == plan.levels > want
    assert list(more) == [1] * want + [0] * (plan.levels - want), (list(more), want)


def test_msm_level_cases_cover_skips_and_full_runs(gpu_msm, rng):
    """LEVEL_CASES hold both: MSMs whose later levels are skipped and MSMs that need every level."""
    skipped = full = 0
    for kind, n, c, S, balance in LEVEL_CASES:
        plan = gpu_msm.msm_plan(n, "g1", None, npoints=n, c=c, segment=S, balance=balance)
        sc = dist_scalars(np.random.default_rng(0), n, kind)
        last = _last_level(from_arr(sc), plan)
        skipped += last + 1 < plan.levels
        full += last + 1 == plan.levels
    assert skipped >= 3 and full >= 1


@pytest.mark.parametrize("k,c", [(2, 5), (3, 4), (4, 8), (52, 5), (16, 16)])   # (16, 16): precompute "auto" to 2^21
@pytest.mark.parametrize("kind", ["uniform", "bits90", "r_minus_1"])
def test_msm_g1_precomputed(gpu_msm, scatter_mode, rng, k, c, kind):
    """k shifted copies of the bases (precompute_bases): ceil(W/k) windows, the same sum (both
    scatter forms)."""
    n = 60
    pts = points("g1", n)
    sc = dist_scalars(rng, n, kind)
    got = gpu_msm.msm_g1(pts, sc, c=c, k=k)
    assert np.array_equal(got, cpu_msm(pts, sc, "g1")), f"k={k} c={c} {kind}"


FLAT_CASES = [(kind, 97, 5, 64) for kind in KINDS] + [
    ("uniform", 1, None, 64), ("uniform", 300, 3, 2), ("uniform", 300, 3, 7), ("bits90", 256, 6, 3),
    ("ones", 150, 4, 5), ("equal", 130, 2, 3), ("real_tail", 211, 9, 4), ("single", 64, 11, 2),
    ("uniform", 200, 12, 64),   # c = 12 at n = 200: mostly empty buckets, pieces skip them
    ("uniform", 2000, 8, 256)]  # the large-MSM segment (default_segment from 2^30 entries)


@pytest.mark.parametrize("kind,n,c,segment", FLAT_CASES,
                         ids=[f"{k}-n{n}-c{c}-S{s}" for k, n, c, s in FLAT_CASES])
def test_msm_g1_flat_balance_matches_cpu(gpu_msm, rng, kind, n, c, segment):
    """Level 0 split into equal chunks of S sorted entries cut at bucket boundaries (balance
    "flat"): the same bytes as the CPU for every distribution, tiny chunks (many pieces per
    bucket, several levels) and mostly empty buckets."""
    pts = points("g1", n)
    sc = dist_scalars(rng, n, kind)
    got = gpu_msm.msm_g1(pts, fr_to_mont(sc), c=c, segment=segment, balance="flat", scalar_form="montgomery")
    assert np.array_equal(got, cpu_msm(pts, sc, "g1")), f"flat {kind} n={n} c={c} S={segment}"


def test_msm_flat_balance_indexed_precomputed_g2(gpu_msm, scatter_mode, rng):
    """Flat level 0 with an indexed MSM over precomputed copies, G1 and (if built) G2 (both
    scatter forms)."""
    rnd = random.Random(12)
    pts = points("g1", 40, seed=3)
    idx = np.array([rnd.randrange(40) for _ in range(150)], dtype=np.uint32)
    sc = dist_scalars(rng, 150, "real_tail")
    want = cpu_msm(pts, sc, "g1", idx)
    assert np.array_equal(gpu_msm.msm_g1_indexed(pts, sc, idx, c=5, k=3, segment=4, balance="flat"), want)
    if _g2_ready():
        p2 = points("g2", 16, seed=5)
        i2 = np.array([rnd.randrange(16) for _ in range(40)], dtype=np.uint32)
        s2 = dist_scalars(rng, 40, "bits90")
        got = gpu_msm.msm_g2_indexed(p2, s2, i2, c=4, k=2, segment=3, balance="flat")
        assert np.array_equal(got, cpu_msm(p2, s2, "g2", i2))


def test_flat_plan_levels(gpu_msm):
    """A flat level 0 can leave one piece more per bucket: one level more at most, never fewer."""
    M = gpu_msm
    for n in (1, 2, 3, 64, 65, 100, 4096, 1 << 20, 1 << 24):
        for S in (2, 3, 64):
            a = M.msm_plan(n, "g1", None, npoints=n, c=8, segment=S, balance="bucket")
            b = M.msm_plan(n, "g1", None, npoints=n, c=8, segment=S, balance="flat")
            assert a.levels <= b.levels <= a.levels + 1
            m, lv = n, 1                        # the reference: pieces ceil(m/S) + 1 after level 0
            m = -(-m // S) + 1 if m > 1 else 1
            while m > 1:
                m, lv = -(-m // S), lv + 1
            assert b.levels == lv
    with pytest.raises(ValueError, match="balance"):
        M.msm_plan(10, "g1", None, balance="even")


def test_default_balance_by_group_and_indexing(gpu_msm):
    """The measured default work split, scalars not looked at (plain ones taken as uniform, indexed
    ones as skewed): G2 affine from 2^21 plain / 2^23 indexed scalars, flat below; indexed (tail)
    G1 MSMs flat; a plain G1 MSM batch from 2^23 scalars, else bucket below c = 20 and flat from
    there.  Told the skew, both kinds follow it; an explicit balance always wins."""
    M = gpu_msm
    got = {(g, ix): M.msm_plan(100, g, None, npoints=200, c=6, indexed=ix).balance
           for g in ("g1", "g2") for ix in (False, True)}
    assert got == {("g1", False): "bucket", ("g1", True): "flat", ("g2", False): "flat", ("g2", True): "flat"}
    # large G2 MSMs (the 2^27 partition's B_G2 tail: ~13 M points) take the affine level 0
    big = M._G2_AFFINE_MIN
    mid = M._G2_AFFINE_UNIFORM_MIN
    for ix in (False, True):
        assert M.default_balance("g2", ix, big) == "affine"
        assert M.default_balance("g2", ix, big - 1) == ("flat" if ix else "affine")
        assert M.default_balance("g2", ix, mid) == ("flat" if ix else "affine")
        assert M.default_balance("g2", ix, mid - 1) == "flat"
        assert M.default_balance("g1", ix, big - 1) == ("flat" if ix else "bucket")
        assert M.default_balance("g1", ix, M._G1_BATCH_MIN) == ("flat" if ix else "batch")
        assert M.default_balance("g1", ix, M._G1_BATCH_MIN, 16) == ("flat" if ix else "batch")
        # told the skew, plain and indexed alike
        assert M.default_balance("g1", ix, M._G1_BATCH_MIN, 16, skewed=False) == "batch"
        assert M.default_balance("g1", ix, M._G1_BATCH_MIN, 16, skewed=True) == ("flat" if ix else "bucket")
        assert M.default_balance("g2", ix, mid, skewed=False) == "affine"
        assert M.default_balance("g2", ix, big - 1, skewed=True) == "flat"
        assert M.default_balance("g2", ix, big, skewed=True) == "affine"
    assert M.msm_plan(big, "g2", None, npoints=big, indexed=True).balance == "affine"
    assert M.msm_plan(100, "g2", None, c=6, balance="bucket").balance == "bucket"
    # wide plain G1 windows (the 2^27 H MSM: c = 20) have Poisson-sized buckets: flat
    assert [M.msm_plan(1000, "g1", None, c=c).balance for c in (16, 19, 20, 22)] == ["bucket"] * 2 + ["flat"] * 2
    assert M.msm_plan(1000, "g1", None, c=20, balance="bucket").balance == "bucket"


def test_sampled_window_widens_large_uniform_g1(gpu_msm, rng, monkeypatch):
    """``sampled_window``: plain G1 MSMs of uniform scalars from ``_G1_WIDE_MIN`` on take
    c = ``_G1_WIDE_C`` (without copies from ``_G1_WIDE_MIN_K1``); skewed scalars (mostly < 2^16), G2, indexed (tail) MSMs, fewer scalars or
    more copies than that width has windows keep ``window_bits``; with exactly W(20) copies the
    threshold is ``_G1_ONE_SET_MIN``.  At the real thresholds (2^26 and 2^24 scalars: one row
    broadcast, no 2 GB array) and, lowered, on sampled distributions."""
    M = gpu_msm
    assert M._G1_WIDE_MIN >= 1 << 25 and M._G1_WIDE_C > M._C_AUTO_MAX
    assert M._G1_WIDE_MIN_K1 > M._G1_WIDE_MIN
    n = M._G1_WIDE_MIN
    row = dist_scalars(rng, 1, "uniform")
    wide = np.broadcast_to(row, (n, 4))
    assert M.sampled_window("g1", wide, k=2) == M._G1_WIDE_C
    assert M.sampled_window("g1", wide, k=4) == M._G1_WIDE_C
    assert M.sampled_window("g1", wide[:n - 1], k=2) == M.window_bits(n - 1, 2) <= M._C_AUTO_MAX
    assert M.sampled_window("g1", wide) == M.window_bits(n)          # k = 1: from _G1_WIDE_MIN_K1
    k1 = np.broadcast_to(row, (M._G1_WIDE_MIN_K1, 4))
    assert M.sampled_window("g1", k1) == M._G1_WIDE_C
    assert M.sampled_window("g1", k1[:-1]) == M.window_bits(M._G1_WIDE_MIN_K1 - 1)
    assert M.default_window("g1", M._G1_WIDE_MIN_K1) == M._G1_WIDE_C
    assert M.default_window("g1", M._G1_WIDE_MIN_K1, skewed=True) == M.window_bits(M._G1_WIDE_MIN_K1)
    one = M._G1_ONE_SET_MIN                        # k = W(20) copies: one bucket set, wide from here on
    W20 = -(-256 // M._G1_WIDE_C)
    assert M._G1_ONE_SET_MIN < M._G1_WIDE_MIN
    assert M.sampled_window("g1", wide[:one], k=W20) == M._G1_WIDE_C
    assert M.sampled_window("g1", wide[:one], k=W20 - 1) == M.window_bits(one, W20 - 1) <= M._C_AUTO_MAX
    assert M.sampled_window("g1", wide[:one - 1], k=W20) == M.window_bits(one - 1, W20)
    assert M.sampled_window("g1", wide, k=W20 + 1) == M.window_bits(n, W20 + 1)
    assert M.sampled_window("g1", np.broadcast_to(np.array([[5, 0, 0, 0]], np.uint64), (n, 4)), k=2) == M.window_bits(n, 2)
    assert M.sampled_window("g2", wide, k=2) == M.window_bits(n, 2)
    assert M.sampled_window("g1", wide, k=2, indexed=True) == M.window_bits(n, 2)
    monkeypatch.setattr(M, "_G1_WIDE_MIN", 1 << 12)
    monkeypatch.setattr(M, "_G1_WIDE_MIN_K1", 1 << 12)
    m = 1 << 13
    for kind in KINDS:
        sc = dist_scalars(rng, m, kind)
        skewed = M._skewed(sc, "canonical")
        assert M.sampled_window("g1", sc) == (M.window_bits(m) if skewed else M._G1_WIDE_C), kind
        assert M.sampled_window("g1", fr_to_mont(sc), "montgomery") == M.sampled_window("g1", sc), kind
    assert M.sampled_window("g1", dist_scalars(rng, m, "uniform")) == M._G1_WIDE_C
    for kind in ("bits90", "real_tail", "small", "zeros", "ones"):
        assert M.sampled_window("g1", dist_scalars(rng, m, kind)) == M.window_bits(m), kind


def test_msm_g1_indexed_matches_cpu(gpu_msm, scatter_mode, rng):
    """Σ k_i·P[idx_i] with repeated and unused bases (the prover's tails), also precomputed (both
    scatter forms)."""
    rnd = random.Random(9)
    pts = points("g1", 40, seed=3)
    m = 150
    idx = np.array([rnd.randrange(40) for _ in range(m)], dtype=np.uint32)
    for kind in ("uniform", "real_tail"):
        sc = dist_scalars(rng, m, kind)
        want = cpu_msm(pts, sc, "g1", idx)
        assert np.array_equal(gpu_msm.msm_g1_indexed(pts, sc, idx, c=6), want)
        assert np.array_equal(gpu_msm.msm_g1_indexed(pts, fr_to_mont(sc), idx, c=5, k=3,
                                                     scalar_form="montgomery"), want)
    with pytest.raises(ValueError, match="outside"):
        gpu_msm.msm_g1_indexed(pts, sc, idx + 40)


def test_msm_g1_exceptional_cases(gpu_msm):
    """Repeated points (doublings inside buckets), P and −P (cancellation), points at infinity and
    zero scalars: the same bytes as the CPU."""
    from cuzk._native import _field
    rnd = random.Random(5)
    p, q = points("g1", 2, seed=77)
    neg_p = _field.point_neg(p, "g1")
    rows = [p] * 40 + [neg_p] * 20 + [q] * 30 + [np.zeros(12, np.uint64)] * 10
    order = list(range(len(rows)))
    rnd.shuffle(order)
    pts = np.stack([rows[i] for i in order])
    for ints in ([1] * len(rows), [rnd.randrange(1 << 20) for _ in rows], [7] * len(rows), [R - 1] * len(rows)):
        sc = to_arr(ints, 32)
        assert np.array_equal(gpu_msm.msm_g1(pts, sc, c=4), cpu_msm(pts, sc, "g1"))
        assert np.array_equal(gpu_msm.msm_g1(pts, sc, c=3, segment=2), cpu_msm(pts, sc, "g1"))
    both = np.stack([p, neg_p])
    assert not gpu_msm.msm_g1(both, to_arr([12345, 12345], 32)).any()
    assert not gpu_msm.msm_g1(pts, to_arr([0] * len(rows), 32)).any()


def test_enqueue_msm_device_interface(gpu_msm, fake, rng):
    """msm_plan / enqueue_msm with device-resident inputs: nothing read back before the caller's
    sync, the PendingPoint finishes on the host; n = 0 is infinity without a launch."""
    M = gpu_msm
    dev = fake.Device.get(0)
    n = 77
    pts = points("g1", n)
    sc = dist_scalars(rng, n, "bits90")
    plan = M.msm_plan(n, "g1", dev, npoints=n, c=5)
    st = M._state(dev)
    s = fake.Stream(dev)
    d_pts, d_sc = st.pool.alloc(pts.nbytes, s), st.pool.alloc(sc.nbytes, s)
    fake.copy_htod(d_pts, pts, pts.nbytes, s)
    mont = fr_to_mont(sc)
    fake.copy_htod(d_sc, mont, mont.nbytes, s)
    host = fake.PinnedBuffer(plan.host_rows * 24 * 8).asarray("uint64", (plan.host_rows, 24))
    launches = len(fake.launches)
    pend = M.enqueue_msm(plan, s, st.pool, d_pts.ptr, d_sc.ptr, host, scalar_form="montgomery")
    s.synchronize()
    assert np.array_equal(pend.value(), cpu_msm(pts, sc, "g1"))
    # count, the scan's three, (cursors,) one scatter pass; four per level; the windows
    assert len(fake.launches) - launches == 5 + M.scatter_cursors(plan) + 4 * plan.levels + 1
    with pytest.raises(ValueError, match="host_view"):
        M.enqueue_msm(plan, s, st.pool, d_pts.ptr, d_sc.ptr, host[1:])
    with pytest.raises(ValueError, match="d_idx_ptr"):
        M.enqueue_msm(plan, s, st.pool, d_pts.ptr, d_sc.ptr, host, d_idx_ptr=d_sc.ptr)
    with pytest.raises(ValueError, match="scalar_form"):
        M.enqueue_msm(plan, s, st.pool, d_pts.ptr, d_sc.ptr, host, scalar_form="mont")
    launches = len(fake.launches)
    empty = M.enqueue_msm(M.msm_plan(0, "g1", dev), s, st.pool, d_pts.ptr, d_sc.ptr, host[:0])
    assert not empty.value().any() and len(fake.launches) == launches
    d_pts.free(s)
    d_sc.free(s)


def _tail_inputs(M, fake, rng, n, N, kind, idx_seed, pts_seed):
    """Device inputs of B-like tails: N G1 and G2 bases (seed ``pts_seed``), n Montgomery scalars
    of distribution ``kind`` and n base indices; (device, MSM state, stream, indices, canonical
    scalars, {"g1", "g2", "sc", "idx": device buffer})."""
    dev = fake.Device.get(0)
    rnd = random.Random(idx_seed)
    idx = np.array([rnd.randrange(N) for _ in range(n)], dtype=np.uint32)
    canonical = dist_scalars(rng, n, kind)
    st = M._state(dev)
    s = fake.Stream(dev)
    up = {}
    for name, arr in (("g1", points("g1", N, seed=pts_seed)), ("g2", points("g2", N, seed=pts_seed)),
                      ("sc", fr_to_mont(canonical)), ("idx", idx)):
        up[name] = st.pool.alloc(arr.nbytes, s)
        fake.copy_htod(up[name], arr, arr.nbytes, s)
    return dev, st, s, idx, canonical, up


@needs_g2
@pytest.mark.parametrize("kind", ["uniform", "real_tail"])
def test_sort_share_g1_tail_to_g2(gpu_msm, fake, rng, kind):
    """B_G1's tail sort taken by B_G2's (``SortShare``): the same scalars and base indices, so
    the G2 MSM over the kept entries (no count, scan or scatter launch of its own; its level 1
    overwrites the offsets, hence the copy) gives the CPU's sum, as the G1 one does; what the
    first kept is freed by the second, or by ``release`` when no second comes; a share is
    refused when it is already full, empty, or from another shape."""
    from test_cu_emu_early import pool_buffers
    M = gpu_msm
    n, N = 300, 64
    dev, st, s, idx, canonical, up = _tail_inputs(M, fake, rng, n, N, kind, kind == "uniform", 5)
    plans = {g: M.msm_plan(n, g, dev, npoints=N, c=5, indexed=True, segment=8) for g in ("g1", "g2")}
    assert M.SortShare.compatible(plans["g1"], plans["g2"]) and plans["g2"].levels > 1
    from cuzk._cuda_pending import XYZZ_WORDS
    hosts = {g: fake.PinnedBuffer(plans[g].host_rows * XYZZ_WORDS[g] * 8).asarray(
        "uint64", (plans[g].host_rows, XYZZ_WORDS[g])) for g in plans}
    before = pool_buffers(fake)

    def run(g, **kw):
        return M.enqueue_msm(plans[g], s, st.pool, up[g].ptr, up["sc"].ptr, hosts[g], d_idx_ptr=up["idx"].ptr,
                             scalar_form="montgomery", **kw)

    share = M.SortShare()
    p1 = run("g1", keep_sort=share)
    assert share.entries is not None and pool_buffers(fake) == before + 2     # entries + offsets
    with pytest.raises(ValueError, match="keep_sort"):
        run("g1", keep_sort=share)
    at = len(fake.launches)
    p2 = run("g2", sorted_from=share)
    names = [ln[0] for ln in fake.launches[at:]]
    sorting = ("cuzk_msm_count", "cuzk_msm_scatter", "cuzk_msm_cursors", "cuzk_msm_apply_counts")
    assert not any(x in sorting for x in names), names
    s.synchronize()
    want = {g: cpu_msm(points(g, N, seed=5), canonical, g, idx) for g in plans}
    assert np.array_equal(p1.value(), want["g1"]) and np.array_equal(p2.value(), want["g2"])
    assert share.entries is None and pool_buffers(fake) == before
    with pytest.raises(ValueError, match="sorted_from"):
        run("g2", sorted_from=share)                                          # empty
    run("g1", keep_sort=share)
    other = M.msm_plan(n, "g2", dev, npoints=N, c=6, indexed=True)
    with pytest.raises(ValueError, match="sorted_from"):
        M.enqueue_msm(other, s, st.pool, up["g2"].ptr, up["sc"].ptr,
                      np.zeros((other.host_rows, XYZZ_WORDS["g2"]), np.uint64), d_idx_ptr=up["idx"].ptr,
                      scalar_form="montgomery", sorted_from=share)           # another window
    share.release(s)
    assert share.entries is None and pool_buffers(fake) == before
    for b in up.values():
        b.free(s)


class _SpyPool:
    """A pool that records its live bytes: ``starts[i]`` when step i began, ``peaks[i]`` the most
    held while it ran."""

    def __init__(self, pool):
        self.pool, self.live, self.starts, self.peaks = pool, 0, [], []

    def step(self):
        self.starts.append(self.live)
        self.peaks.append(self.live)

    def alloc(self, nbytes, stream):
        b = self.pool.alloc(nbytes, stream)
        self.live += nbytes
        self.peaks[-1] = max(self.peaks[-1], self.live)
        real = b.free

        def free(stream=None):
            self.live -= nbytes
            real(stream)
        b.free = free
        return b


@needs_g2
@pytest.mark.parametrize("frac", [0, 0.3, 0.7, 1.0, 1.6, 4.0])
def test_arena_holds_tails_and_kept_sort(gpu_msm, fake, rng, frac):
    """Tail MSMs taking their scratch from an ``_Arena`` over a dead buffer (``side_scratch``:
    the rest of a, b, c's): B_G1's tail keeps its sort off the arena's top (``alloc_keep``), an
    MSM between the two runs from its bottom (reset), B_G2's tail takes the kept sort; each gives
    the CPU's sum (a kept entry overwritten would break B_G2's), writes stay inside the buffer
    (red zones), and the bytes each MSM takes from the pool at its peak are what
    ``_pool_peaks`` counts for the partition's reservation, for arenas from none to roomy."""
    from test_cu_emu_early import pool_buffers
    from cuzk._stages._cuda import _Arena, _pool_peaks
    M = gpu_msm
    n, N = 300, 64
    dev, st, s, idx, canonical, up = _tail_inputs(M, fake, rng, n, N, "real_tail", 7, 6)
    giver = M.msm_plan(n, "g1", dev, npoints=N, c=5, indexed=True, segment=8)
    between = M.msm_plan(n, "g1", dev, npoints=N, c=6, indexed=True, segment=8)
    taker = M.msm_plan(n, "g2", dev, npoints=N, c=5, indexed=True, segment=8)
    plans = [("b_g1:tail", "msm", giver), ("l:tail", "msm", between), ("b_g2:tail", "msm", taker)]
    room = int(frac * (giver.scratch_bytes + M.SortShare.offsets_bytes(giver))) // 256 * 256
    from cuzk._cuda_pending import XYZZ_WORDS
    hosts = [fake.PinnedBuffer(p.host_rows * XYZZ_WORDS[p.group] * 8).asarray(
        "uint64", (p.host_rows, XYZZ_WORDS[p.group])) for _, _, p in plans]
    before = pool_buffers(fake)
    dead = st.pool.alloc(max(room, 256), s)
    spy = _SpyPool(st.pool)
    arena = _Arena(dead.ptr, room, spy)
    share = M.SortShare()
    pend = []
    for i, (_, _, p) in enumerate(plans):
        spy.step()
        arena.reset()
        pend.append(M.enqueue_msm(p, s, arena, up[p.group].ptr, up["sc"].ptr, hosts[i], d_idx_ptr=up["idx"].ptr,
                                  scalar_form="montgomery", keep_sort=share if i == 0 else None,
                                  sorted_from=share if i == 2 else None))
    s.synchronize()
    for (_, _, p), v in zip(plans, pend):
        assert np.array_equal(v.value(), cpu_msm(points(p.group, N, seed=6), canonical, p.group, idx))
    assert spy.peaks == _pool_peaks(plans, room, (0, 2))
    if frac >= 4:
        assert spy.peaks == [0, 0, 0]                          # everything in the arena
    if frac == 0:
        assert spy.starts[1] == M.SortShare.kept_bytes(giver)   # the kept sort held in the pool
        assert spy.peaks[1] >= M.SortShare.kept_bytes(giver)
    assert spy.live == 0 and not arena.kept and share.entries is None
    dead.check_guards()
    dead.free(s)
    assert pool_buffers(fake) == before
    for b in up.values():
        b.free(s)


class _Spill:
    """An ``_Arena``'s spill pool that records its requests and hands out ("spill", nbytes)."""

    def __init__(self):
        self.asked = []

    def alloc(self, nbytes, stream):
        self.asked.append((nbytes, stream))
        return ("spill", nbytes)


def test_arena_slices_spill_and_kept_top():
    """``_Arena`` alone: a fresh arena hands out 256-byte-aligned slices from its bottom; the
    first request that does not fit, and every one after it until ``reset``, goes to the spill
    pool; ``alloc_keep`` takes slices off the top (the bottom's limit) or the pool when they do
    not fit above the bottom, and freeing one gives its bytes back."""
    from cuzk._stages._cuda import _Arena, _Kept
    spill = _Spill()
    a = _Arena(1 << 20, 1024, spill)
    r = a.alloc(100, "s")
    assert (r.ptr, r.nbytes, a.at) == (1 << 20, 100, 256) and spill.asked == []
    assert r.free("s") is None
    r = a.alloc(512)
    assert (r.ptr, a.at) == ((1 << 20) + 256, 768)
    assert a.alloc(300, "s") == ("spill", 300)             # 768 + 512 > 1024
    assert a.alloc(1, "t") == ("spill", 1)                  # spilling until reset
    assert spill.asked == [(300, "s"), (1, "t")]
    a.reset()
    assert (a.at, a.spilling) == (0, False)
    k = a.alloc_keep(200)
    assert type(k) is _Kept and (k.ptr, k.nbytes) == ((1 << 20) + 768, 200) and a.top() == 768
    assert a.alloc(512).ptr == 1 << 20 and a.at == 512
    assert a.alloc(257) == ("spill", 257)                  # 512 + 512 > top 768
    assert a.alloc_keep(512) == ("spill", 512)             # 768 - 512 < 512: no room above the bottom
    a.reset()
    k2 = a.alloc_keep(256)
    assert k2.ptr == (1 << 20) + 512 and a.top() == 512 and a.kept == [k, k2]
    k.free("s")
    assert a.kept == [k2] and a.top() == 512
    k2.free()
    k2.free()                                               # a second free changes nothing
    assert a.kept == [] and a.top() == 1024
    a.reset()
    assert a.alloc(768).ptr == 1 << 20 and a.alloc(256).ptr == (1 << 20) + 768   # an exact fit
    assert a.alloc(1) == ("spill", 1)


def test_abc_split_is_the_arena_replayed():
    """``_abc_split`` (the bytes an MSM plan's buffers take in an arena of ``room`` bytes, and
    beyond it) against an ``_Arena`` fed the same requests: exact fits, a too-large first
    request, and random sizes."""
    from cuzk._stages._cuda import _Arena, _abc_split, _align

    def replay(buffers, room):
        a, spilled = _Arena(4096, room, _Spill()), 0
        for _, nb in buffers:
            if a.alloc(nb) == ("spill", nb):
                spilled += _align(nb)
        return a.at, spilled

    assert _abc_split([("a", 256), ("b", 200)], 512) == (512, 0)
    assert _abc_split([("a", 256), ("b", 257)], 512) == (256, 512)
    assert _abc_split([("a", 600), ("b", 10)], 512) == (0, 1024)
    assert _abc_split([], 0) == (0, 0)
    rng = random.Random(5)
    for _ in range(300):
        buffers = [(str(i), rng.choice([1, 255, 256, 257, 1000, 4096])) for i in range(rng.randrange(6))]
        room = rng.choice([0, 256, 512, 1024, 4096, rng.randrange(9000)])
        assert _abc_split(buffers, room) == replay(buffers, room), (buffers, room)


def test_pool_peaks_counts_kept_sort_and_batches():
    """``_pool_peaks`` on stand-in plans, counted by hand: a giver keeping its sort (entries and
    offsets off the arena's top, or in the pool when they do not fit above its bottom), a batch
    addition between (its scratch plus the kept bytes), the taker (skips the sort's buffers),
    and an MSM after the taker (the kept bytes gone)."""
    from cuzk._stages._cuda import _pool_peaks

    sort = [("counts", 256), ("entries", 1024), ("off_a", 256), ("sums", 512)]
    plans = [("b_g1:tail", "msm", NS(n=9, nb=31, buffers=sort, scratch_bytes=2048)),
             ("ones", "batch", NS(n=9, scratch_bytes=300)),
             ("l:tail", "msm", NS(n=9, nb=31, buffers=[("x", 1280)], scratch_bytes=1280)),
             ("b_g2:tail", "msm", NS(n=9, nb=31, buffers=sort, scratch_bytes=2048)),
             ("a:tail", "msm", NS(n=9, nb=31, buffers=[("x", 512)], scratch_bytes=512)),
             ("c:tail", "msm", NS(n=0, nb=0, buffers=[], scratch_bytes=0))]
    # room 1024: sums fills the bottom exactly; entries and the 256 offset bytes stay in the pool
    assert _pool_peaks(plans, 1024, (0, 3)) == [1280, 1580, 2560, 1280, 0, 0]
    # room 2048: entries off the top (l's 1280 no longer fit below them); the offsets do not
    # fit above the bottom's 1024
    assert _pool_peaks(plans, 2048, (0, 3)) == [256, 556, 1536, 256, 0, 0]
    # room 1280: entries fit exactly above counts, then everything else spills
    assert _pool_peaks(plans, 1280, (0, 3)) == [1024, 556, 1536, 768, 0, 0]
    # no arena: every request in the pool
    assert _pool_peaks(plans, 0, (0, 3)) == [2304, 1580, 2560, 1792, 512, 0]
    # no sort shared: each MSM's requests alone
    assert _pool_peaks(plans, 1024) == [1792, 300, 1280, 1792, 0, 0]    # entries spill, and all after it
    assert _pool_peaks(plans, 0) == [2048, 300, 1280, 2048, 512, 0]


@pytest.mark.parametrize("abc_scratch,streams,want", [(True, 1, 2048), (True, 2, 2560),
                                                       (False, 1, 2048), (False, 2, 3072)])
def test_scratch_peak_by_hand(abc_scratch, streams, want):
    """``CudaStages._scratch_peak`` on stand-in plans, counted by hand (n = 8: a, b, c's buffer
    768 bytes): H's MSM takes 512 + 512 (with ``abc_scratch`` 512 of them in the buffer, 256 of
    it left), L's tail 2048 (never fits), A's 256 (fits the room left).  One stream: the largest;
    the side stream: H's beside the largest of the others."""
    from cuzk._stages._cuda import CudaStages
    st = CudaStages.__new__(CudaStages)
    st.abc_scratch, st.side_scratch, st.share_sort, st.streams = abc_scratch, True, True, streams
    h = NS(n=9, buffers=[("x", 512), ("w", 512)], scratch_bytes=1024)
    plans = [("h", "msm", h), ("l:tail", "msm", NS(n=9, nb=1, buffers=[("y", 2048)], scratch_bytes=2048)),
             ("a:tail", "msm", NS(n=9, nb=1, buffers=[("z", 256)], scratch_bytes=256))]
    part = NS(plans=plans, n=8, hbuf=4, key=NS(h_head=True))
    assert st._side_room(part) == (0 if not abc_scratch else 256 if streams == 2 else 768)
    assert st._scratch_peak(part) == want
    part.plans = []
    assert st._scratch_peak(part) == 0


def test_msm_rejects_bad_input(gpu_msm):
    pts = points("g1", 3)
    with pytest.raises(ValueError, match="2\\^255"):
        gpu_msm.msm_g1(pts, to_arr([1, 1 << 255, 2], 32))
    with pytest.raises(ValueError, match=">= r"):
        gpu_msm.msm_g1(pts, to_arr([1, R, 2], 32), scalar_form="montgomery")
    with pytest.raises(ValueError, match="scalar_form"):
        gpu_msm.msm_g1(pts, to_arr([1, 2, 3], 32), scalar_form="Montgomery")
    with pytest.raises(ValueError, match="differ"):
        gpu_msm.msm_g1(pts, to_arr([1, 2], 32))
    with pytest.raises(ValueError, match="shape"):
        gpu_msm.msm_g1(pts[:, :6], to_arr([1, 2, 3], 32))
    with pytest.raises(ValueError, match="shape"):
        gpu_msm.msm_g2(pts, to_arr([1, 2, 3], 32))


# --------------------------------------------------------------------------- G2

G2_CASES = [("uniform", 33, 4, "canonical"), ("bits90", 64, 3, "montgomery"), ("ones", 20, 4, "canonical"),
            ("real_tail", 45, 5, "montgomery"), ("single", 9, None, "canonical"), ("r_minus_1", 7, 6, "canonical")]


@needs_g2
@pytest.mark.parametrize("kind,n,c,form", G2_CASES, ids=[f"{k}-n{n}-c{c}-{f[:4]}" for k, n, c, f in G2_CASES])
def test_msm_g2_matches_cpu(gpu_msm, rng, kind, n, c, form):
    pts = points("g2", n)
    canon, sc = _sc(rng, n, kind, form)
    got = gpu_msm.msm_g2(pts, sc, c=c, scalar_form=form)
    assert np.array_equal(got, cpu_msm(pts, canon, "g2")), f"g2 {kind} n={n} c={c} {form}"


@needs_g2
def test_msm_g2_indexed_precomputed(gpu_msm, rng):
    rnd = random.Random(4)
    pts = points("g2", 16, seed=5)
    idx = np.array([rnd.randrange(16) for _ in range(40)], dtype=np.uint32)
    sc = dist_scalars(rng, 40, "uniform")
    got = gpu_msm.msm_g2_indexed(pts, sc, idx, c=4, k=2, segment=3)
    assert np.array_equal(got, cpu_msm(pts, sc, "g2", idx))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_msm_reordered(gpu_msm, fake, rng, seed):
    """The MSM front end with the emulated stream's work queued and run late
    (``FakeDriver.reordered``): uploads, precomputed copies, sort, levels and windows enqueued on
    one stream, the buffers freed stream-ordered; plain, precomputed and indexed MSMs keep the
    CPU's sums, so nothing is read on the host or freed before the stream has run it."""
    pts = points("g1", 120, seed=seed)
    sc = dist_scalars(rng, 120, ("uniform", "bits90", "real_tail")[seed % 3])
    rnd = random.Random(seed)
    idx = np.array([rnd.randrange(120) for _ in range(90)], dtype=np.uint32)
    with fake.reordered(seed, p=(0.02, 0.1, 0.3)[seed % 3]) as order:
        got = [gpu_msm.msm_g1(pts, sc, c=5),
               gpu_msm.msm_g1(pts, sc, c=4, k=3, segment=4),
               gpu_msm.msm_g1_indexed(pts, sc[:90], idx, c=5, k=2, balance="flat")]
    assert order.ran > 0
    assert [g.tolist() for g in got] == [cpu_msm(pts, sc, "g1").tolist(),
                                         cpu_msm(pts, sc, "g1").tolist(),
                                         cpu_msm(pts, sc[:90], "g1", idx).tolist()]
