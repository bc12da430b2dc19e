"""The GPU MSM's affine level 0 kernels through the host emulator: balance "affine" (msm.cuh
sum_points_affine, the flat chunks with affine additions sharing one block-wide inversion per
step) and balance "batch" (sum_points_batch: J chunks per thread sharing one inversion per thread
and step, the lanes' state in device memory, sweeps alternating direction).

Reference: the CPU MSM (cuzk._native._msm), byte for byte.  Small blocks (plan knobs,
``_AFFINE_THREADS`` and ``_BATCH_THREADS``) so that a few hundred points already spread pieces over lanes, threads and
blocks; tiny S and small c so that pieces cross chunk, lane and bucket boundaries.  Repeated
bases drive the special cases of the affine addition: P == acc (a doubling inside the batch)
and P == −acc (the accumulator empties).
"""
import random

import numpy as np
import pytest

from test_cu_emu import to_arr
from test_cu_emu_msm import _g2_ready, cpu_msm, gpu_msm, needs_g2, points  # noqa: F401  (gpu_msm: fixture)

from cuzk._assignment import fr_to_mont
from cuzk._msm_dists import KINDS, R, scalars as dist_scalars


@pytest.fixture(params=[("affine", 4), ("batch", 4), ("batch", 1)], ids=lambda p: f"{p[0]}-T{p[1]}")
def affine(gpu_msm, monkeypatch, request):  # noqa: F811
    """cuzk._cuda_msm on the emulator with blocks of T threads for the affine level 0 named by
    ``request.param`` = (balance, T); ``BAL`` names the balance.  The batch grid is the fake's 4
    SMs x ``_BATCH_PER_SM`` blocks (the fake has no occupancy query), so a thread gets several
    lanes from a few dozen chunks on."""
    bal, T = request.param
    monkeypatch.setattr(gpu_msm, "_AFFINE_THREADS" if bal == "affine" else "_BATCH_THREADS", T)
    monkeypatch.setattr(gpu_msm, "BAL", bal, raising=False)
    return gpu_msm


def _level0_launches(fake, since, bal=""):  # noqa: F811
    """The level-0 launches (of balance ``bal``; "": any) since launch ``since``."""
    return [x for x in fake.launches[since:] if x[0].startswith(f"cuzk_msm_sum_points_{bal}")]


def test_affine_lanes_read_from_source(gpu_msm):
    """The host's lane count is the kernel's macro (one place: msm/msm.cuh)."""
    import re
    from cuzk._kernels import cu_root
    import os
    text = open(os.path.join(cu_root(), "msm", "msm.cuh"), encoding="utf-8").read()
    want = int(re.search(r"#define CUZK_MSM_AFFINE_LANES (\d+)", text).group(1))
    assert gpu_msm._affine_lanes() == want >= 1


@pytest.mark.parametrize("opts,want", [("-lineinfo -DCUZK_MSM_AFFINE_LANES=16", 16),
                                       ("-DCUZK_MSM_AFFINE_LANES=8 -DCUZK_MSM_AFFINE_LANES=4", 4),
                                       ("-DCUZK_MSM_AFFINE_LANES_X=4 -lineinfo", None)])
def test_affine_lanes_follow_the_kernels_define(gpu_msm, monkeypatch, opts, want):
    """A lane count defined for the kernels through $CUZK_NVRTC_OPTIONS (a measurement:
    bench/RESULTS.md session 49) sizes the host's grid too (the last definition, as the compiler
    takes it); another macro does not."""
    monkeypatch.delenv("CUZK_NVRTC_OPTIONS", raising=False)
    source = gpu_msm._affine_lanes()
    monkeypatch.setenv("CUZK_NVRTC_OPTIONS", opts)
    assert gpu_msm._affine_lanes() == (source if want is None else want)
    monkeypatch.delenv("CUZK_NVRTC_OPTIONS")
    assert gpu_msm._affine_lanes() == source


AFFINE_CASES = [(kind, 97, 5, 64) for kind in KINDS] + [
    ("uniform", 1, None, 64), ("uniform", 211, 3, 2), ("uniform", 150, 4, 3), ("bits90", 256, 6, 3),
    ("ones", 150, 4, 5), ("equal", 130, 2, 3), ("real_tail", 211, 9, 4), ("single", 64, 11, 2),
    ("uniform", 200, 12, 64)]   # c = 12 at n = 200: mostly empty buckets, pieces skip them


@pytest.mark.parametrize("kind,n,c,segment", AFFINE_CASES,
                         ids=[f"{k}-n{n}-c{c}-S{s}" for k, n, c, s in AFFINE_CASES])
def test_msm_g1_affine_matches_cpu(affine, fake, rng, kind, n, c, segment):  # noqa: F811
    """Every scalar distribution, n not a power of two, tiny chunks (S = 2, 3: many pieces per
    bucket, several levels), mostly empty buckets: the CPU's bytes."""
    pts = points("g1", n)
    sc = dist_scalars(rng, n, kind)
    since = len(fake.launches)
    got = affine.msm_g1(pts, fr_to_mont(sc), c=c, segment=segment, balance=affine.BAL, scalar_form="montgomery")
    assert np.array_equal(got, cpu_msm(pts, sc, "g1")), f"{affine.BAL} {kind} n={n} c={c} S={segment}"
    if kind not in ("zeros",):      # level 0 ran this kernel, and no other level-0 kernel after it
        level0 = _level0_launches(fake, since)
        assert [x[0] for x in level0] == [f"cuzk_msm_sum_points_{affine.BAL}_g1"], level0
        # "affine": one coordinate (48 bytes) of shared memory per thread of its block tree
        assert level0[0][3] == (affine._AFFINE_THREADS * 48 if affine.BAL == "affine" else 0)
        if affine.BAL == "batch":   # one block per T lanes, at most a wave: the fake's 4 SMs x _BATCH_PER_SM
            plan = affine.msm_plan(n, "g1", None, c=c, segment=segment, balance="batch")
            lanes = affine._batch_cap(n * plan.W, plan.S)
            assert level0[0][1] == min(-(-lanes // affine._BATCH_THREADS), 4 * affine._BATCH_PER_SM)


@pytest.mark.parametrize("affine", [("affine", 1), ("affine", 2), ("affine", 8), ("batch", 2), ("batch", 32)],
                         indirect=True, ids=lambda p: f"{p[0]}-T{p[1]}")
def test_msm_g1_affine_block_sizes(affine, rng):
    """Blocks of 1 (no tree), 2 and 8 threads: the tree's edge shapes; batch grids of 16 threads
    (many lanes each) and of 256 threads (more than the chunks: threads without a lane)."""
    n = 90
    pts = points("g1", n)
    sc = dist_scalars(rng, n, "uniform")
    assert np.array_equal(affine.msm_g1(pts, sc, c=4, segment=3, balance=affine.BAL), cpu_msm(pts, sc, "g1"))


def _multiples(group, ks, seed=41):
    """Rows k·P for the integers ks (0: infinity, negative: −|k|·P) of one random point P."""
    from cuzk._native import _field
    p = points(group, 1, seed=seed)[0]
    rows = []
    for k in ks:
        q = _field.point_mul(p, abs(k) % R, group) if k else np.zeros_like(p)
        rows.append(_field.point_neg(q, group) if k < 0 else q)
    return np.stack(rows)


def _special_cases(group):
    """(bases, scalars) sets whose buckets add a point to an equal or opposite accumulator."""
    rnd = random.Random(8)
    ones = lambda n: to_arr([1] * n, 32)  # noqa: E731
    cases = [
        (_multiples(group, [1] * 40), ones(40)),                      # P, P: doubling, then 2P + P ...
        (_multiples(group, [1, -1] * 20), ones(40)),                  # P, −P: the accumulator empties
        (_multiples(group, [1, 1, 2] * 10), ones(30)),                # P + P = 2P, 2P + 2P: doubling
        (_multiples(group, [rnd.choice((1, -1, 2, -2, 3, 0)) for _ in range(60)]), ones(60)),
        (_multiples(group, [1] * 30), to_arr([rnd.choice((1, 2, 3, R - 1)) for _ in range(30)], 32)),
    ]
    return cases


@pytest.mark.parametrize("segment,c", [(64, 4), (3, 3), (2, 2)])
def test_msm_g1_affine_doublings_and_cancellations(affine, segment, c):
    """Repeated bases and their negatives: P == acc (the batch's doubling), P == −acc (empty
    accumulator), the running sum equal to the next base, infinity among the bases."""
    for i, (pts, sc) in enumerate(_special_cases("g1")):
        got = affine.msm_g1(pts, sc, c=c, segment=segment, balance=affine.BAL)
        assert np.array_equal(got, cpu_msm(pts, sc, "g1")), f"case {i} S={segment} c={c}"
    pts = _multiples("g1", [1, -1])
    assert not affine.msm_g1(pts, to_arr([12345, 12345], 32), c=4, balance=affine.BAL).any()


def test_msm_affine_indexed_precomputed(affine, rng):
    """An indexed MSM (repeated bases: doublings) over precomputed copies, G1 and (if built) G2."""
    rnd = random.Random(12)
    pts = points("g1", 40, seed=3)
    idx = np.array([rnd.randrange(40) for _ in range(150)], dtype=np.uint32)
    sc = dist_scalars(rng, 150, "real_tail")
    want = cpu_msm(pts, sc, "g1", idx)
    assert np.array_equal(affine.msm_g1_indexed(pts, sc, idx, c=5, k=3, segment=4, balance=affine.BAL), want)
    assert np.array_equal(affine.msm_g1_indexed(pts, sc, idx, c=6, balance=affine.BAL), want)
    if _g2_ready():
        p2 = points("g2", 16, seed=5)
        i2 = np.array([rnd.randrange(16) for _ in range(40)], dtype=np.uint32)
        s2 = dist_scalars(rng, 40, "bits90")
        got = affine.msm_g2_indexed(p2, s2, i2, c=4, k=2, segment=3, balance=affine.BAL)
        assert np.array_equal(got, cpu_msm(p2, s2, "g2", i2))


G2_CASES = [("uniform", 33, 4, 64), ("bits90", 64, 3, 3), ("ones", 20, 4, 2), ("real_tail", 45, 5, 4),
            ("single", 9, None, 64), ("r_minus_1", 7, 6, 2), ("equal", 24, 3, 5), ("zeros", 10, 4, 64),
            ("small", 30, 5, 3)]


@needs_g2
@pytest.mark.parametrize("kind,n,c,segment", G2_CASES, ids=[f"{k}-n{n}-c{c}-S{s}" for k, n, c, s in G2_CASES])
def test_msm_g2_affine_matches_cpu(affine, rng, kind, n, c, segment):
    pts = points("g2", n)
    sc = dist_scalars(rng, n, kind)
    got = affine.msm_g2(pts, sc, c=c, segment=segment, balance=affine.BAL)
    assert np.array_equal(got, cpu_msm(pts, sc, "g2")), f"g2 affine {kind} n={n} c={c} S={segment}"


@needs_g2
@pytest.mark.parametrize("affine", [("affine", 1024)], indirect=True, ids=["affine-T1024"])
def test_msm_g2_affine_raises_the_shared_memory_limit(affine, fake, rng):
    """Blocks of 1024 threads take 1024 Fq2 coordinates (96 KiB) of shared memory, past the
    48 KiB a kernel gets unasked: the kernel's limit is raised before the launch (the emulator
    refuses a launch above it, as cuLaunchKernel does)."""
    pts = points("g2", 40)
    sc = dist_scalars(rng, 40, "uniform")
    since = len(fake.launches)
    assert np.array_equal(affine.msm_g2(pts, sc, c=5, balance="affine"), cpu_msm(pts, sc, "g2"))
    assert [x[3] for x in _level0_launches(fake, since)] == [1024 * 96]


@needs_g2
def test_msm_g2_affine_doublings_and_cancellations(affine):
    for i, (pts, sc) in enumerate(_special_cases("g2")[:3]):
        got = affine.msm_g2(pts, sc, c=3, segment=3, balance=affine.BAL)
        assert np.array_equal(got, cpu_msm(pts, sc, "g2")), f"g2 case {i}"


def test_affine_plan(gpu_msm):
    """"affine" plans like "flat" (levels, buffers) and is the default only for large G2 MSMs
    (from 2^21 plain scalars, taken as uniform, or 2^23 indexed ones); "batch" plans like "flat"
    plus one lane row per possible flat chunk (ceil(n·W / S))."""
    M = gpu_msm
    for n in (1, 3, 100, 4096, 1 << 20):
        for S in (2, 64):
            for g in ("g1", "g2"):
                a = M.msm_plan(n, g, None, npoints=n, c=8, segment=S, balance="flat")
                b = M.msm_plan(n, g, None, npoints=n, c=8, segment=S, balance="affine")
                assert b.balance == "affine" and (b.levels, b.buffers) == (a.levels, a.buffers)
                t = M.msm_plan(n, g, None, npoints=n, c=8, segment=S, balance="batch")
                assert t.levels == a.levels and t.buffers[:-1] == a.buffers
                row = {"g1": 96 + 48 + 8, "g2": 192 + 96 + 8}[g]
                assert t.buffers[-1] == ("lanes", -(-n * a.W // S) * row)
                assert t.scratch_bytes > a.scratch_bytes
    assert {"affine", "batch"} <= set(M.BALANCES)
    assert all(M.default_balance(g, ix, n) != "affine" for g in ("g1", "g2") for ix in (False, True)
               for n in (None, 1, 1 << 20))
    assert M.default_balance("g2", False, 1 << 22) == "affine" != M.default_balance("g2", True, 1 << 22)
    assert all(M.default_balance("g1", ix, 1 << 27) != "affine" for ix in (False, True))


@pytest.mark.parametrize("T", [0, 96, 2048])
def test_affine_threads_must_be_a_power_of_two(gpu_msm, fake, rng, monkeypatch, T):
    """The affine level 0's block tree needs a power of two <= 1024 threads
    (``CUZK_MSM_AFFINE_THREADS``): any other count is refused, and no level-0 kernel runs."""
    monkeypatch.setattr(gpu_msm, "_AFFINE_THREADS", T)
    pts = points("g1", 40)
    since = len(fake.launches)
    with pytest.raises(ValueError, match=f"affine level 0: {T} threads per block, not a power of two"):
        gpu_msm.msm_g1(pts, dist_scalars(rng, 40, "uniform"), c=5, balance="affine")
    assert not _level0_launches(fake, since)


def test_numpy_msm_batch_by_sampled_skew(gpu_msm, fake, rng, monkeypatch):  # noqa: F811
    """The NumPy API's plain G1 MSM takes "batch" from ``_G1_BATCH_MIN`` scalars unless a sample of
    them is mostly small (< 2^16: one entry each), in either scalar form; the bytes are the CPU's
    either way."""
    M = gpu_msm
    monkeypatch.setattr(M, "_G1_BATCH_MIN", 64)
    n = 150
    pts = points("g1", n)
    for kind, batch in (("uniform", True), ("r_minus_1", True), ("bits90", False), ("real_tail", False),
                        ("small", False), ("zeros", False)):
        sc = dist_scalars(rng, n, kind)
        assert M._skewed(sc, "canonical") is (not batch), kind
        assert M._skewed(fr_to_mont(sc), "montgomery") is (not batch), kind
        since = len(fake.launches)
        got = M.msm_g1(pts, fr_to_mont(sc), c=5, scalar_form="montgomery")
        assert np.array_equal(got, cpu_msm(pts, sc, "g1")), kind
        if kind != "zeros":
            assert bool(_level0_launches(fake, since, "batch_")) is batch, kind
    assert not M._skewed(np.zeros((0, 4), dtype=np.uint64), "canonical")
