"""GPU G1 MSM (cuzk._cuda_msm) against the CPU MSM (cuzk._native._msm), byte for byte.

GPU tests are marked ``gpu`` and skip without a usable device; the same kernels run on the
host emulator in tests/test_cu_emu.py (CI).
"""
import numpy as np
import pytest

from cuzk import _cuda_msm as M
from cuzk._backend import cuda_available

CUDA_OK, CUDA_WHY = cuda_available()
R = 0x73eda753299d7d483339d80809a1d80553bda402fffe5bfeffffffff00000001
RR = (1 << 256) % R

gpu = pytest.mark.gpu
needs_gpu = pytest.mark.skipif(not CUDA_OK, reason=f"no usable CUDA device: {CUDA_WHY}")


def random_points(rng, n):
    """n random G1 points (affine Montgomery) from the CPU's fixed-base batch multiplication."""
    from cuzk._native import _r1cs
    k = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
    k[:, 3] &= np.uint64((1 << 60) - 1)          # < 2^252 < r, and a valid Montgomery value
    return _r1cs.fixed_base_mul("g1", k, threads=0)


def random_scalars(rng, n, kind="uniform"):
    s = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
    s[:, 3] &= np.uint64((1 << 63) - 1)           # < 2^255 (the MSM's contract)
    if kind == "bits90":                          # Filecoin-like: 90 % zeros and ones
        small = rng.random(n) < 0.9
        s[small] = 0
        s[small, 0] = rng.integers(0, 2, size=int(small.sum()), dtype=np.uint64)
    return s


def test_window_bits():
    assert M.window_bits(1) == 5 and M.window_bits(1 << 12) == 8 and M.window_bits(1 << 18) == 15
    assert M.window_bits(1 << 20) == 16
    for c in range(4, 17):          # the window kernel's split covers every digit exactly once
        parts, segs = M._window_split(c)
        assert (1 << c) % (parts * segs) == 0 and (1 << c) // (parts * segs) >= 1


@gpu
@needs_gpu
@pytest.mark.parametrize("lg,kind", [(0, "uniform"), (4, "uniform"), (10, "uniform"), (12, "bits90"),
                                     (16, "uniform"), (18, "bits90"), (20, "uniform")])
def test_msm_g1_matches_cpu(lg, kind, rng):
    from cuzk._native import _msm
    n = 1 << lg
    pts, sc = random_points(rng, n), random_scalars(rng, n, kind)
    assert np.array_equal(M.msm_g1(pts, sc), _msm.msm(pts, sc, "g1"))


@gpu
@needs_gpu
@pytest.mark.parametrize("c", [4, 7, 11, 16])
def test_msm_g1_every_window_width(c, rng):
    from cuzk._native import _msm
    n = 3000
    pts, sc = random_points(rng, n), random_scalars(rng, n)
    pts[::97] = 0                                 # points at infinity
    sc[::89] = 0
    assert np.array_equal(M.msm_g1(pts, sc, c=c), _msm.msm(pts, sc, "g1"))


@gpu
@needs_gpu
def test_msm_g1_threads(rng):
    """Several Python threads, each on its own stream, at once."""
    from helpers import run_threaded
    from cuzk._native import _msm
    cases = [(random_points(rng, 5000), random_scalars(rng, 5000)) for _ in range(4)]
    want = [_msm.msm(p, s, "g1") for p, s in cases]
    got = run_threaded(lambda i: M.msm_g1(*cases[i]), len(cases))
    assert all(np.array_equal(g, w) for g, w in zip(got, want))
