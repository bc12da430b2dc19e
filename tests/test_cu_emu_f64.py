"""The FP64-pipe Fq product (cuzk/cu/ff/fq_f64.cuh) against Python big ints and against fq_t's
integer product, bit for bit, on the host emulator (tests/cu_emu/field_f64.cpp: std::fma rounds
as the device's __fma_rn does).

Inputs that stress the method: 48-bit words at 0, 1, 2^47 (limb products that tie exactly
half-way, where round-to-nearest-even decides the high part), 2^48 - 1 and the modulus' own
words; values just under p (the result before the final subtraction close to 2p); products
fed back 200 times (each output a valid input).
"""
import ctypes
import os
import random
import shlex
import subprocess
from pathlib import Path

import numpy as np
import pytest

from helpers import CU_DIR, EMU_DIR, cxx_compiler, tail_text
from test_cu_emu import P, adversarial_values, edge_values

RINV = pow(1 << 384, -1, P)
W48 = (1 << 48) - 1


@pytest.fixture(scope="module")
def f64_lib(tmp_path_factory):
    cxx = cxx_compiler()
    if cxx is None:
        pytest.skip("no C++ compiler (c++, g++, clang++ or $CXX) to build the field harness")
    cu = Path(os.environ.get("CUZK_CU_DIR") or CU_DIR).resolve()
    lib = tmp_path_factory.mktemp("cu_emu_f64") / "libcuzk_f64.so"
    cmd = cxx + ["-O2", "-std=c++20", "-shared", "-fPIC", "-fvisibility=hidden", f"-I{cu}",
                 str(EMU_DIR / "field_f64.cpp"), "-o", str(lib)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        pytest.fail(f"building the field harness failed (kernel sources {cu}):\n"
                    f"$ {shlex.join(cmd)}\n{tail_text(r.stderr + r.stdout)}", pytrace=False)
    so = ctypes.CDLL(str(lib))
    u32p, u64p = ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint64)
    so.emu_fq_mul_f64.argtypes = [u32p, u32p, u32p, u32p, ctypes.c_size_t]
    so.emu_fq_mul_f64.restype = None
    so.emu_fq_f64_constants.argtypes = [u64p, u64p]
    so.emu_fq_f64_constants.restype = None
    return so


def products(lib, xs, ys):
    """(fq_mul_f64(x, y), x * y by fq_t) for each pair, as ints."""
    arr = lambda vs: np.frombuffer(b"".join(v.to_bytes(48, "little") for v in vs), "<u4").copy()  # noqa: E731
    a, b = arr(xs), arr(ys)
    f, m = np.zeros_like(a), np.zeros_like(a)
    u32p = ctypes.POINTER(ctypes.c_uint32)
    lib.emu_fq_mul_f64(*(v.ctypes.data_as(u32p) for v in (a, b, f, m)), len(xs))

    def ints(v):
        raw = v.tobytes()
        return [int.from_bytes(raw[i:i + 48], "little") for i in range(0, len(raw), 48)]
    return ints(f), ints(m)


def check(lib, xs, ys):
    got, ref = products(lib, xs, ys)
    for x, y, g, r in zip(xs, ys, got, ref):
        want = x * y * RINV % P
        assert r == want, f"fq_t product: a={x:#x} b={y:#x}"  # the reference itself
        assert g == want, f"fq_mul_f64: a={x:#x} b={y:#x} got {g:#x} want {want:#x}"
    return got


def word48_values():
    """Values whose 48-bit words are 0, 1, 2^47, 2^47 +- 1, 2^48 - 1 or p's words, reduced."""
    pats = [0, 1, 1 << 47, (1 << 47) - 1, (1 << 47) + 1, W48, 1 << 24]
    vals = set()
    for pat in pats:
        vals.add(sum(pat << (48 * k) for k in range(8)) % P)
        for k in range(8):
            vals.add((pat << (48 * k)) % P)
            vals.add((P - (pat << (48 * k))) % P)
    pw = [(P >> (48 * k)) & W48 for k in range(8)]
    for k in range(8):
        vals.add(sum((pw[j] if j != k else W48) << (48 * j) for j in range(8)) % P)
    return sorted(vals)


def test_constants_match_the_modulus(f64_lib):
    words = (ctypes.c_uint64 * 8)()
    pinv = ctypes.c_uint64()
    f64_lib.emu_fq_f64_constants(words, ctypes.byref(pinv))
    assert sum(w << (48 * k) for k, w in enumerate(words)) == P
    assert all(w <= W48 for w in words)
    assert (P * pinv.value + 1) % (1 << 48) == 0


def test_edge_and_word_pairs(f64_lib):
    vals = sorted(set(edge_values(P, 48)) | set(word48_values()))
    assert len(vals) > 100
    check(f64_lib, [x for x in vals for _ in vals], [y for _ in vals for y in vals])


def test_random_and_adversarial(f64_lib, rng):
    rnd = random.Random(int(rng.integers(2**63)))
    xs = [rnd.randrange(P) for _ in range(3000)] + adversarial_values(rnd, P, 48, 3000)
    ys = [rnd.randrange(P) for _ in range(3000)] + adversarial_values(rnd, P, 48, 3000)
    near_p = [P - 1 - rnd.randrange(1 << 64) for _ in range(500)]
    check(f64_lib, xs + near_p, ys + near_p[::-1])


def test_iterated(f64_lib, rng):
    """x <- x * y 200 times: every output, fed back, is a valid input (fully reduced)."""
    rnd = random.Random(int(rng.integers(2**63)))
    xs = [rnd.randrange(P) for _ in range(16)] + [P - 1, (1 << 384) % P]
    ys = [rnd.randrange(P) for _ in range(len(xs))]
    x0 = list(xs)
    for _ in range(200):
        xs = check(f64_lib, xs, ys)
    for a, b, x in zip(x0, ys, xs):
        assert x == a * pow(b * RINV, 200, P) % P
