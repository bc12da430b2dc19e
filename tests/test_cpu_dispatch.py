"""Run-time CPU dispatch of the CPU MSM (msm.hpp): the portable build still takes the mulx/adx
and AVX-512 IFMA paths when the running CPU has them, and every path gives the same bytes.

The CPU's features come from /proc/cpuinfo (the kernel's cpuid report), independently of the
extension's own probe (libgcc's __builtin_cpu_supports).
"""
import os
import random
import subprocess
import sys

import numpy as np
import pytest

from cuzk._native import _msm
from test_msm import _mont_points, _points, check, random_scalars, reference, scalars_array


def _check_portable():
    """scripts/check_portable.py (CI's portable-build check) as a module: its cpuinfo reader."""
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "scripts" / "check_portable.py"
    spec = importlib.util.spec_from_file_location("cuzk_check_portable", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


FLAGS = _check_portable().cpuinfo_flags()
FEATURES = _msm.cpu_features()
needs_cpuinfo = pytest.mark.skipif(FLAGS is None, reason="no /proc/cpuinfo flags (not Linux x86)")
HAS_IFMA = FLAGS is not None and {"avx512f", "avx512ifma"} <= FLAGS
needs_ifma = pytest.mark.skipif(not HAS_IFMA, reason="CPU without AVX-512 IFMA (/proc/cpuinfo)")

# Every path the dispatch can take, forced through the private tuning switch.
PATHS = {"auto": None, "mulx": {"no_simd": True}, "portable": {"portable": True}}


def test_features_shape():
    f = _msm.cpu_features()
    assert set(f) == {"compiled_for", "adx", "ifma", "ifma_compiled"}
    assert set(f["compiled_for"]) <= {"bmi2", "adx", "avx2", "avx512f", "avx512ifma"}


@needs_cpuinfo
def test_dispatch_follows_cpuid():
    """The run-time probe agrees with the kernel's cpuid flags (whatever the build's -march)."""
    assert FEATURES["adx"] == ({"bmi2", "adx"} <= FLAGS)
    if os.environ.get("CUZK_CPU_IFMA") != "0":
        assert FEATURES["ifma"] == (FEATURES["ifma_compiled"] and HAS_IFMA)


@pytest.mark.skipif(sys.platform != "linux" or os.uname().machine != "x86_64", reason="x86-64 only")
def test_ifma_lanes_compiled_into_every_x86_build():
    assert FEATURES["ifma_compiled"]


def _inputs(group, n, kind, seed):
    rng = random.Random(seed)
    ints = random_scalars(rng, n, kind)
    return _points(group, n), _mont_points(group, n), ints, scalars_array(ints)


@needs_ifma
@pytest.mark.parametrize("group,n", [("g1", 3000), ("g2", 700)])
@pytest.mark.parametrize("kind", ["uniform", "bits90"])
def test_ifma_and_scalar_paths_same_bytes(group, n, kind):
    """IFMA lanes (auto on this CPU), scalar mulx and portable arithmetic: identical results,
    equal to arkworks' multiexp. Sizes put > 16 pairs per tree flush and >= 64 buckets per
    running-sum range, so the lane code runs."""
    assert FEATURES["ifma"], "IFMA CPU but the MSM does not dispatch to the lanes"
    pts, mpts, ints, sc = _inputs(group, n, kind, n)
    outs = {name: _msm.msm(mpts, sc, group, 2, _tune=t) for name, t in PATHS.items()}
    for name, out in outs.items():
        assert outs["auto"].tobytes() == out.tobytes(), name
    check(outs["auto"], reference(pts, ints, group), group)


@needs_ifma
@pytest.mark.parametrize("group", ["g1", "g2"])
def test_ifma_and_scalar_paths_same_bytes_indexed_and_batch_add(group):
    n = 2000 if group == "g1" else 600
    _, mpts, _, sc = _inputs(group, n, "uniform", 7)
    rng = np.random.default_rng(5)
    idx = rng.integers(0, n, size=n, dtype=np.uint64)
    bits = rng.integers(0, 1 << 63, size=(n + 63) // 64, dtype=np.uint64)
    if n % 64:
        bits[-1] &= np.uint64((1 << (n % 64)) - 1)  # no bits past the last point
    ref_idx = ref_bits = None
    for name, t in PATHS.items():
        got_idx = _msm.msm_indexed(mpts, sc, idx, group, 2, _tune=t).tobytes()
        got_bits = _msm.batch_add(mpts, bits, group, 2, _tune=t).tobytes()
        if ref_idx is None:
            ref_idx, ref_bits = got_idx, got_bits
        assert got_idx == ref_idx, name
        assert got_bits == ref_bits, name
    # independent check of the indexed result: the plain MSM over the gathered points
    assert ref_idx == _msm.msm(np.ascontiguousarray(mpts[idx.astype(np.intp)]), sc, group, 2,
                               _tune={"portable": True}).tobytes()


@needs_ifma
def test_env_turns_ifma_off():
    """CUZK_CPU_IFMA=0 (read once, in a fresh process) disables the lanes; same bytes."""
    code = ("import sys, numpy as np; sys.path.insert(0, sys.argv[1]);"
            "from cuzk._native import _msm; from test_msm import _mont_points, scalars_array;"
            "import random; from test_msm import random_scalars;"
            "p = _mont_points('g1', 1500); s = scalars_array(random_scalars(random.Random(3), 1500));"
            "print(_msm.cpu_features()['ifma'], _msm.msm(p, s, 'g1', 2).tobytes().hex())")
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, CUZK_CPU_IFMA="0")
    out = subprocess.run([sys.executable, "-c", code, here], env=env, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out[0] == "False"
    p = _mont_points("g1", 1500)
    s = scalars_array(random_scalars(random.Random(3), 1500))
    assert out[1] == _msm.msm(p, s, "g1", 2).tobytes().hex()
