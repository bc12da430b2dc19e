"""The host side of the GPU fixed-base pass (cuzk/_cuda_fixed_base.py: chunks through two
pinned slots each way) on the host emulator (tests/test_cu_emu.py), against the CPU backend:
many chunks, a short last chunk, both groups, and keygen with its fixed-base passes there."""
import random

import numpy as np
import pytest

from test_cu_emu import R, to_arr

from cuzk._native import _field, _r1cs


@pytest.fixture
def gpu_fb(fake, monkeypatch):
    return fake.install(monkeypatch, None, "cuzk._cuda_fixed_base")


@pytest.mark.parametrize("group,n,chunk", [("g1", 301, 64), ("g1", 128, 64), ("g2", 97, 32),
                                           ("g1", 5, 8)])
def test_fixed_base_chunks_match_cpu(gpu_fb, monkeypatch, group, n, chunk):
    monkeypatch.setattr(gpu_fb, "_CHUNK", chunk)
    rnd = random.Random(n * 31 + chunk)
    ints = [rnd.randrange(R) for _ in range(n)]
    ints[n // 2] = 0
    km = _field.to_mont(to_arr(ints, 32), "fr")
    want = _r1cs.fixed_base_mul(group, km.copy())
    for threads in (1, 2):
        got = gpu_fb.fixed_base_mul(None, km, group, montgomery=True, window=5, threads=threads)
        assert np.array_equal(got, want)


def test_keygen_cuda_backend_matches_cpu(gpu_fb, monkeypatch):
    """keygen with backend "cuda" (its two fixed-base passes on the emulator, several chunks
    each) gives the CPU backend's key."""
    from cuzk import _keygen
    from cuzk._circuit import porep_like
    monkeypatch.setattr(gpu_fb, "_CHUNK", 700)
    monkeypatch.setattr(gpu_fb, "window_bits", lambda n: 6)
    monkeypatch.setattr("cuzk._backend.resolve_backend", lambda b: b)
    cs, _, _ = porep_like(8, seed=2)
    waste = dict(tau=987654321, alpha=11, beta=12, gamma=13, delta=14)
    want = _keygen.keygen(cs, **waste, threads=2, backend="cpu")
    got = _keygen.keygen(cs, **waste, threads=2, backend="cuda")
    assert got == want


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fixed_base_chunks_reordered(gpu_fb, fake, monkeypatch, seed):
    """The two-slot pipeline with the emulated stream's work queued and run late
    (``FakeDriver.reordered``): the host refills a slot's pinned scalars and reads its pinned
    points only after the event of that slot's last chunk, so the results stay the CPU's
    (checked by dropping that event wait: every seed fails, the in-order tests still pass)."""
    monkeypatch.setattr(gpu_fb, "_CHUNK", 16)
    rnd = random.Random(seed)
    km = _field.to_mont(to_arr([rnd.randrange(R) for _ in range(83)], 32), "fr")
    want = _r1cs.fixed_base_mul("g1", km.copy())
    with fake.reordered(seed, p=(0.02, 0.1, 0.3)[seed % 3]) as order:
        got = gpu_fb.fixed_base_mul(None, km, "g1", montgomery=True, window=5, threads=1)
    assert order.ran > 0 and np.array_equal(got, want)
