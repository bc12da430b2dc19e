"""mont_t::sqr() (cuzk/cu/ff/mont_t.cuh) against Python big ints and against the product a * a.

Fq has a dedicated squaring (out of line in fq_t, the curve code's field; inlined in
mont_t<fq_params_t>, both checked); Fr's sqr() is the product.  The field code runs on the
host under CUZK_HOST_EMU (tests/cu_emu/field_sqr.cpp: only the field headers, so it builds in
a second; see tests/test_cu_emu.py for the emulator): every operation starts with the carry
flag set, so a chain that reads it before setting it gives wrong results.
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
from test_cu_emu import P, R, adversarial_values, edge_values

# name -> (emu_field_sqr's field id, modulus, 32-bit limbs)
FIELDS = {"fr": (0, R, 8), "fq": (1, P, 12), "fq_inline": (2, P, 12)}


@pytest.fixture(scope="module")
def sqr_lib(tmp_path_factory):
    cxx = cxx_compiler()
    if cxx is None:
        pytest.skip("no C++ compiler (c++, g++, clang++ or $CXX) to build the field harness")
    cu = Path(os.environ.get("CUZK_CU_DIR") or CU_DIR).resolve()
    lib = tmp_path_factory.mktemp("cu_emu_sqr") / "libcuzk_sqr.so"
    cmd = cxx + ["-O2", "-std=c++20", "-shared", "-fPIC", "-fvisibility=hidden", f"-I{cu}",
                 str(EMU_DIR / "field_sqr.cpp"), "-o", str(lib)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        pytest.fail(f"building the field harness failed (kernel sources {cu}):\n"
                    f"$ {shlex.join(cmd)}\n{tail_text(r.stderr + r.stdout)}", pytrace=False)
    so = ctypes.CDLL(str(lib))
    u32p = ctypes.POINTER(ctypes.c_uint32)
    so.emu_field_sqr.argtypes = [ctypes.c_int, u32p, u32p, u32p, ctypes.c_size_t]
    so.emu_field_sqr.restype = ctypes.c_int
    return so


def sqr_and_mul(lib, field, vals):
    """(a.sqr(), a * a) for each a in vals (Montgomery-form ints < p), as ints."""
    fid, _, n = FIELDS[field]
    raw = b"".join(v.to_bytes(4 * n, "little") for v in vals)
    a = np.frombuffer(raw, dtype="<u4").copy()
    s, m = np.zeros_like(a), np.zeros_like(a)
    u32p = ctypes.POINTER(ctypes.c_uint32)
    rc = lib.emu_field_sqr(fid, a.ctypes.data_as(u32p), s.ctypes.data_as(u32p),
                           m.ctypes.data_as(u32p), len(vals))
    assert rc == 0

    def ints(x):
        b = x.tobytes()
        return [int.from_bytes(b[i:i + 4 * n], "little") for i in range(0, len(b), 4 * n)]
    return ints(s), ints(m)


def sqr_edge_values(p, n):
    """0, 1, R mod p, p-1, p-2, 2^k and p - 2^k for every k, runs of all-ones / all-zeros
    limbs, limbs with the top bit set or clear (the doubling's carries), the values of
    tests/test_cu_emu.edge_values; all reduced below p."""
    bits, ones = p.bit_length(), 0xffffffff
    e = set(edge_values(p, 4 * n)) | {0, 1, (1 << (32 * n)) % p, p - 1, p - 2}
    e |= {1 << k for k in range(bits - 1)} | {p - (1 << k) for k in range(bits - 1)}
    for k in range(1, n):
        e |= {(1 << (32 * k)) - 1, p - (1 << (32 * k)), ones << (32 * k)}   # low / one limb all ones
        e |= {((1 << (32 * n)) - 1) >> (32 * k) << (32 * k)}                # high limbs all ones
    for pat in (ones, 0x80000000, 0x7fffffff, 0x80000001):
        full = sum(pat << (32 * k) for k in range(n))
        e |= {full, full & ~(ones << (32 * (n - 1))),                       # top limb 0
              sum(pat << (64 * k) for k in range(n // 2)),                  # even limbs only
              sum(pat << (64 * k + 32) for k in range(n // 2))}             # odd limbs only
    return sorted({v if v < p else v % p for v in e})


def check(lib, field, vals):
    _, p, n = FIELDS[field]
    rinv = pow(1 << (32 * n), -1, p)
    got_sqr, got_mul = sqr_and_mul(lib, field, vals)
    for v, s, m in zip(vals, got_sqr, got_mul):
        want = v * v * rinv % p
        assert m == want, f"{field} a*a: a={v:#x} got {m:#x} want {want:#x}"
        assert s == want, f"{field} a.sqr(): a={v:#x} got {s:#x} want {want:#x}"
    return got_sqr


@pytest.mark.parametrize("field", list(FIELDS))
def test_sqr_edge_values(sqr_lib, field):
    _, p, n = FIELDS[field]
    vals = sqr_edge_values(p, n)
    assert len(vals) > 2 * p.bit_length()
    check(sqr_lib, field, vals)


@pytest.mark.parametrize("field", list(FIELDS))
def test_sqr_random(sqr_lib, rng, field):
    """4000 uniform values and 2000 of limbs from {0, 1, 2^32-1, 2^32-2, random} (and p - 1 - v)."""
    _, p, n = FIELDS[field]
    rnd = random.Random(int(rng.integers(2**63)))
    vals = [rnd.randrange(p) for _ in range(4000)] + adversarial_values(rnd, p, 4 * n, 2000)
    check(sqr_lib, field, vals)


@pytest.mark.parametrize("field", list(FIELDS))
def test_sqr_iterated(sqr_lib, rng, field):
    """x -> x.sqr() 300 times from a few starts: each output, fed back, is a valid input
    (fully reduced), and the last one is x^(2^300) in Montgomery form."""
    _, p, n = FIELDS[field]
    R_ = 1 << (32 * n)
    rnd = random.Random(int(rng.integers(2**63)))
    starts = [rnd.randrange(p) for _ in range(8)] + [p - 1, R_ % p]
    xs = list(starts)
    for _ in range(300):
        xs = check(sqr_lib, field, xs)
    rinv = pow(R_, -1, p)
    for x0, x in zip(starts, xs):
        assert x == pow(x0 * rinv, 1 << 300, p) * R_ % p
