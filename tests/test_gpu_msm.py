"""GPU MSM (cuzk._cuda_msm) against the CPU MSM (cuzk._native._msm), byte for byte, on every
scalar distribution of issue 9 (cuzk._msm_dists), G1 and G2, both scalar forms.

GPU tests are marked ``gpu`` and skip without a usable device; the same kernels run on the
host emulator in tests/test_cu_emu_msm.py (CI).
"""
import numpy as np
import pytest

from cuzk import _cuda_msm as M
from cuzk._assignment import fr_to_mont
from cuzk._backend import cuda_available
from cuzk._msm_dists import KINDS, scalars as dist_scalars

CUDA_OK, CUDA_WHY = cuda_available()

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not CUDA_OK, reason=f"no usable CUDA device: {CUDA_WHY}")]

_POINTS = {}


def random_points(group, n, seed=1):
    """n random points (affine Montgomery) from the CPU's fixed-base batch multiplication,
    cached per group (the largest set drawn so far, sliced)."""
    from cuzk._native import _r1cs
    have = _POINTS.get((group, seed))
    if have is None or have.shape[0] < n:
        rng = np.random.default_rng(seed)
        k = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
        k[:, 3] &= np.uint64((1 << 60) - 1)      # < 2^252 < r, and a valid Montgomery value
        have = _POINTS[(group, seed)] = _r1cs.fixed_base_mul(group, k, threads=0)
    return np.ascontiguousarray(have[:n])


def cpu(pts, sc, group, idx=None):
    from cuzk._native import _msm
    return _msm.msm(pts, sc, group) if idx is None else _msm.msm_indexed(pts, sc, idx, group)


def gpu_msm(group, *a, **kw):
    return (M.msm_g1 if group == "g1" else M.msm_g2)(*a, **kw)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("lg", [10, 20])
def test_msm_g1_distributions(lg, kind, rng):
    n = (1 << lg) - 3                              # not a power of two
    pts, sc = random_points("g1", n), dist_scalars(rng, n, kind)
    assert np.array_equal(M.msm_g1(pts, sc), cpu(pts, sc, "g1")), kind


@pytest.mark.parametrize("lg,kind", [(0, "uniform"), (1, "uniform"), (4, "bits90"), (12, "real_tail"),
                                     (16, "uniform"), (18, "bits90"), (20, "uniform")])
@pytest.mark.parametrize("form", ["canonical", "montgomery"])
def test_msm_g1_sizes_and_forms(lg, kind, form, rng):
    n = 1 << lg
    pts, sc = random_points("g1", n), dist_scalars(rng, n, kind)
    arg = fr_to_mont(sc) if form == "montgomery" else sc
    assert np.array_equal(M.msm_g1(pts, arg, scalar_form=form), cpu(pts, sc, "g1"))


@pytest.mark.parametrize("c", [3, 7, 11, 13, 16, 18, 20])
def test_msm_g1_every_window_width(c, rng):
    n = 3001
    pts, sc = random_points("g1", n), dist_scalars(rng, n, "uniform")
    pts[::97] = 0                                  # points at infinity
    sc[::89] = 0
    assert np.array_equal(M.msm_g1(pts, sc, c=c), cpu(pts, sc, "g1"))


@pytest.mark.parametrize("segment", [2, 16, 256, 4096])
@pytest.mark.parametrize("kind", ["ones", "bits90", "equal"])
def test_msm_g1_segment_sizes(segment, kind, rng):
    n = 1 << 16
    pts, sc = random_points("g1", n), dist_scalars(rng, n, kind)
    assert np.array_equal(M.msm_g1(pts, sc, segment=segment), cpu(pts, sc, "g1"))


@pytest.mark.parametrize("k,c", [(2, 16), (4, 16), (8, 20), (16, 16)])
@pytest.mark.parametrize("kind", ["uniform", "bits90", "r_minus_1"])
def test_msm_g1_precomputed(k, c, kind, rng):
    n = (1 << 16) + 5
    pts, sc = random_points("g1", n), dist_scalars(rng, n, kind)
    assert np.array_equal(M.msm_g1(pts, sc, c=c, k=k), cpu(pts, sc, "g1"))


@pytest.mark.parametrize("kind", ["uniform", "real_tail", "ones"])
def test_msm_g1_indexed(kind, rng):
    N, m = 1 << 18, 50000
    pts = random_points("g1", N)
    idx = rng.integers(0, N, size=m).astype(np.uint32)
    sc = dist_scalars(rng, m, kind)
    assert np.array_equal(M.msm_g1_indexed(pts, sc, idx), cpu(pts, sc, "g1", idx))


@pytest.mark.parametrize("kind", ["uniform", "bits90", "ones", "equal", "small", "r_minus_1", "real_tail",
                                  "single", "zeros"])
def test_msm_g2_distributions(kind, rng):
    n = (1 << 14) + 7
    pts, sc = random_points("g2", n), dist_scalars(rng, n, kind)
    assert np.array_equal(M.msm_g2(pts, sc), cpu(pts, sc, "g2")), kind


@pytest.mark.parametrize("lg,form,k", [(0, "canonical", 1), (10, "montgomery", 1), (18, "canonical", 1),
                                       (16, "montgomery", 4)])
def test_msm_g2_sizes(lg, form, k, rng):
    n = 1 << lg
    pts, sc = random_points("g2", n), dist_scalars(rng, n, "bits90" if lg > 10 else "uniform")
    arg = fr_to_mont(sc) if form == "montgomery" else sc
    assert np.array_equal(M.msm_g2(pts, arg, scalar_form=form, k=k), cpu(pts, sc, "g2"))


def test_msm_g2_indexed(rng):
    N, m = 1 << 14, 20000
    pts = random_points("g2", N)
    idx = rng.integers(0, N, size=m).astype(np.uint32)
    sc = dist_scalars(rng, m, "real_tail")
    assert np.array_equal(M.msm_g2_indexed(pts, sc, idx), cpu(pts, sc, "g2", idx))


def test_enqueue_resident_bases(rng):
    """Resident bases and precomputed table uploaded once, three MSMs enqueued back to back on one
    stream with pinned result slices, one synchronization, every result == CPU."""
    from cuzk._native import _driver as d
    n = 1 << 18
    pts = random_points("g1", n)
    dev = d.Device.get(0)
    st = M._state(dev)
    s = st.streams()[0]
    plan = M.msm_plan(n, "g1", dev, npoints=n, k=4)
    kinds = ["uniform", "bits90", "real_tail"]
    scs = [dist_scalars(rng, n, kd) for kd in kinds]
    pinned = d.PinnedBuffer(3 * plan.host_rows * 24 * 8, dev)
    views = pinned.asarray("uint64", (3, plan.host_rows, 24))
    bufs = [st.pool.alloc(pts.nbytes, s), st.pool.alloc(plan.precompute_bytes, s)]
    try:
        d.copy_htod(bufs[0], pts, pts.nbytes, s)
        M.precompute_bases(plan, s, bufs[0].ptr, bufs[1].ptr)
        pend = []
        for i, sc in enumerate(scs):
            mont = fr_to_mont(sc)
            b = st.pool.alloc(mont.nbytes, s)
            bufs.append(b)
            d.copy_htod(b, mont, mont.nbytes, s)
            pend.append(M.enqueue_msm(plan, s, st.pool, bufs[1].ptr, b.ptr, views[i], scalar_form="montgomery"))
        s.synchronize()
        for kd, sc, p in zip(kinds, scs, pend):
            assert np.array_equal(p.value(), cpu(pts, sc, "g1")), kd
    finally:
        for b in bufs:
            b.free(s)
        s.synchronize()
        del pinned          # freed with its last view (PendingPoints hold views)


def test_msm_g1_threads(rng):
    """Several Python threads, each on its own stream, at once."""
    from helpers import run_threaded
    cases = [(random_points("g1", 5000), dist_scalars(rng, 5000, kd)) for kd in ("uniform", "bits90", "ones", "small")]
    want = [cpu(p, s, "g1") for p, s in cases]
    got = run_threaded(lambda i: M.msm_g1(*cases[i]), len(cases))
    assert all(np.array_equal(g, w) for g, w in zip(got, want))


@pytest.mark.parametrize("balance", M.BALANCES)
@pytest.mark.parametrize("group,kind,lg,k,c", [("g1", "uniform", 16, 1, None), ("g1", "bits90", 18, 4, 16),
                                               ("g1", "ones", 16, 1, 12), ("g1", "real_tail", 16, 2, 20),
                                               ("g2", "uniform", 14, 1, None), ("g2", "equal", 12, 2, 8)])
def test_msm_level0_balances(balance, group, kind, lg, k, c, rng):
    """Every level-0 work split (BALANCES: bucket, flat, affine, batch) gives the CPU's bytes, plain and
    indexed, with precomputed copies and points at infinity."""
    n = (1 << lg) + 5
    pts, sc = random_points(group, n).copy(), dist_scalars(rng, n, kind)
    pts[::101] = 0                                 # points at infinity (a copy: the cache stays)
    assert np.array_equal(gpu_msm(group, pts, sc, c=c, k=k, balance=balance), cpu(pts, sc, group)), balance
    idx = rng.integers(0, n, size=n // 2).astype(np.uint32)
    fn = M.msm_g1_indexed if group == "g1" else M.msm_g2_indexed
    assert np.array_equal(fn(pts, sc[: n // 2], idx, c=c, balance=balance), cpu(pts, sc[: n // 2], group, idx))


@pytest.mark.parametrize("group,kind,lg,k,c,S", [("g1", "uniform", 20, 1, 16, 64), ("g1", "bits90", 20, 2, 16, 64),
                                                 ("g1", "uniform", 19, 2, 20, 16), ("g2", "uniform", 18, 1, 16, 32)])
def test_msm_batch_many_lanes(group, kind, lg, k, c, S, rng):
    """balance "batch" with more flat chunks than resident threads (J > 1 lanes per thread, the
    sweeps alternating direction over them) gives the CPU's bytes."""
    n = (1 << lg) + 3
    pts, sc = random_points(group, n), dist_scalars(rng, n, kind)
    got = gpu_msm(group, pts, sc, c=c, k=k, segment=S, balance="batch")
    assert np.array_equal(got, cpu(pts, sc, group))
