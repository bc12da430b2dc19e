"""GPU batch addition (cuzk._cuda_batch) and fixed-base multiplication (cuzk._cuda_fixed_base)
against the CPU (cuzk._native._msm.batch_add, cuzk._native._r1cs.fixed_base_mul), byte for byte.

GPU tests are marked ``gpu`` and skip without a usable device; the same kernels run on the
host emulator in tests/test_cu_emu_ec.py (CI).
"""
import numpy as np
import pytest

from cuzk._backend import cuda_available
from refs import R  # the moduli: one place (tests/refs.py)

CUDA_OK, CUDA_WHY = cuda_available()

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not CUDA_OK, reason=f"no usable CUDA device: {CUDA_WHY}")]


def random_points(rng, n, group):
    """n random points (affine Montgomery) from the CPU's fixed-base batch multiplication."""
    from cuzk._native import _r1cs
    k = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
    k[:, 3] &= np.uint64((1 << 60) - 1)          # < 2^252 < r, and a valid Montgomery value
    return _r1cs.fixed_base_mul(group, k, threads=0)


def bitmap(rng, n, kind):
    nw = (n + 63) // 64
    full = np.full(nw, np.uint64(2**64 - 1))
    if n % 64:
        full[-1] = np.uint64((1 << (n % 64)) - 1)
    if kind == "none":
        return np.zeros(nw, np.uint64)
    if kind == "all":
        return full
    if kind == "one":
        b = np.zeros(nw, np.uint64)
        j = int(rng.integers(n))
        b[j // 64] = np.uint64(1 << (j % 64))
        return b
    if kind == "random":
        return rng.integers(0, 2**64, size=nw, dtype=np.uint64) & full
    sel = rng.random(nw * 64) < 0.9                 # bits90
    return np.packbits(sel.reshape(nw, 64), axis=1, bitorder="little").view(np.uint64).ravel() & full


@pytest.mark.parametrize("group,n", [("g1", 1), ("g1", 1000), ("g1", 65537), ("g1", 1 << 20),
                                     ("g2", 1), ("g2", 4097), ("g2", 1 << 18)])
@pytest.mark.parametrize("kind", ["none", "all", "one", "random", "bits90"])
@pytest.mark.parametrize("kernel", ["xyzz", "affine", "balanced"])
def test_batch_add_matches_cpu(rng, group, n, kind, kernel):
    from cuzk import _cuda_batch as B
    from cuzk._native import _field, _msm
    pts = random_points(rng, n, group)
    if n > 100:
        pts[::53] = 0                                 # infinity rows
        pts[11] = pts[10]                             # a doubling
        pts[13] = _field.point_neg(pts[12], group)    # a cancellation
    bits = bitmap(rng, n, kind)
    assert np.array_equal(B.batch_add(pts, bits, group, kind=kernel), _msm.batch_add(pts, bits, group, 0))


def test_batch_add_enqueue_resident(rng):
    """plan / enqueue on device-resident inputs into a pinned slice; one sync; two queries on one
    stream (G1 and G2) like the prover's batch-add stage."""
    from cuzk import _cuda_batch as B
    from cuzk._cuda_pending import XYZZ_WORDS
    from cuzk._native import _driver as d, _msm
    n1, n2 = 300_001, 70_001
    p1, p2 = random_points(rng, n1, "g1"), random_points(rng, n2, "g2")
    b1, b2 = bitmap(rng, n1, "bits90"), bitmap(rng, n2, "bits90")
    pl1, pl2 = B.batch_add_plan(n1, "g1"), B.batch_add_plan(n2, "g2")
    st = B._state(None)
    s = st.streams()[0]
    rows = pl1.host_rows * XYZZ_WORDS["g1"] + pl2.host_rows * XYZZ_WORDS["g2"]
    pinned = d.PinnedBuffer(rows * 8, st.device)
    flat = pinned.asarray("uint64")
    h1 = flat[:pl1.host_rows * 24].reshape(pl1.host_rows, 24)
    h2 = flat[pl1.host_rows * 24:].reshape(pl2.host_rows, 48)
    bufs = [st.pool.alloc(a.nbytes, s) for a in (p1, b1, p2, b2)]
    try:
        for buf, a in zip(bufs, (p1, b1, p2, b2)):
            d.copy_htod(buf, a, a.nbytes, s)
        r1 = B.enqueue_batch_add(pl1, s, st.pool, bufs[0], bufs[1], h1)
        r2 = B.enqueue_batch_add(pl2, s, st.pool, bufs[2].ptr, bufs[3].ptr, h2)
        s.synchronize()
        assert np.array_equal(r1.value(), _msm.batch_add(p1, b1, "g1", 0))
        assert np.array_equal(r2.value(), _msm.batch_add(p2, b2, "g2", 0))
    finally:
        for buf in bufs:
            buf.free(s)
        s.synchronize()
        # pinned memory is freed with its last view (the PendingPoints hold views)


@pytest.mark.parametrize("group,n,w", [("g1", 1, None), ("g1", 5000, None), ("g1", 1 << 20, None),
                                       ("g1", 3000, 16), ("g2", 7, None), ("g2", 1 << 16, None)])
def test_fixed_base_matches_cpu(rng, group, n, w):
    from cuzk import _cuda_fixed_base as F
    from cuzk._native import _field, _r1cs
    k = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
    k[:, 3] &= np.uint64((1 << 62) - 1)
    k[:, 3] %= np.uint64(R >> 192)                    # < r
    k[::97] = 0
    km = _field.to_mont(k, "fr")
    want = _r1cs.fixed_base_mul(group, km.copy(), threads=0)
    assert np.array_equal(F.fixed_base_mul(None, k, group, window=w), want)
    assert np.array_equal(F.fixed_base_mul(None, km, group, montgomery=True, window=w), want)


@pytest.mark.parametrize("group,n,chunk", [("g1", 5000, 1024), ("g1", 4096, 1024), ("g2", 3001, 700)])
def test_fixed_base_pinned_slots_rotate(rng, monkeypatch, group, n, chunk):
    """Small chunks, so both pinned slots are reused several times (and the last chunk is
    short): a slot refilled before its previous chunk's DMA finished would change bytes."""
    from cuzk import _cuda_fixed_base as F
    from cuzk._native import _field, _r1cs
    monkeypatch.setattr(F, "_CHUNK", chunk)
    k = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
    k[:, 3] %= np.uint64(R >> 192)
    km = _field.to_mont(k, "fr")
    want = _r1cs.fixed_base_mul(group, km.copy(), threads=0)
    assert np.array_equal(F.fixed_base_mul(None, km, group, montgomery=True), want)
