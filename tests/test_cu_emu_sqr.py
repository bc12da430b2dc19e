"""mont_t::sqr() (cuzk/cu/ff/mont_t.cuh) against Python big ints and against the product a * a,
and Fq's lazy product mont_t::mul_lazy (no final subtraction; operands and result < 2p).

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
from test_cu_emu import P, R, adversarial_values, edge_values, from_arr, to_arr

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
    so.emu_field_mul_lazy.argtypes = [ctypes.c_int, u32p, u32p, u32p, u32p, u32p, ctypes.c_size_t]
    so.emu_field_mul_lazy.restype = ctypes.c_int
    return so


def sqr_and_mul(lib, field, vals):
    """(a.sqr(), a * a) for each a in vals (Montgomery-form ints < p), as ints."""
    fid, _, n = FIELDS[field]
    a = to_arr(vals, 4 * n)                 # the limbs' bytes, little-endian (rows of n/2 u64)
    s, m = np.zeros_like(a), np.zeros_like(a)
    u32p = ctypes.POINTER(ctypes.c_uint32)
    rc = lib.emu_field_sqr(fid, a.ctypes.data_as(u32p), s.ctypes.data_as(u32p),
                           m.ctypes.data_as(u32p), len(vals))
    assert rc == 0
    return from_arr(s), from_arr(m)


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


def lazy_products(lib, field, pairs):
    """(mul_lazy(a, b), mul_lazy(a, b).reduced(), a * b) for each (a, b) (ints < 2p)."""
    fid, _, n = FIELDS[field]
    a = to_arr([x for x, _ in pairs], 4 * n)
    b = to_arr([y for _, y in pairs], 4 * n)
    outs = [np.zeros_like(a) for _ in range(3)]
    u32p = ctypes.POINTER(ctypes.c_uint32)
    rc = lib.emu_field_mul_lazy(fid, a.ctypes.data_as(u32p), b.ctypes.data_as(u32p),
                                *(o.ctypes.data_as(u32p) for o in outs), len(pairs))
    assert rc == 0
    return [from_arr(o) for o in outs]


def check_lazy(lib, field, pairs):
    """Every result ≡ a·b·R^-1 (mod p); the lazy one < 2p, the reduced and full ones < p."""
    _, p, n = FIELDS[field]
    rinv = pow(1 << (32 * n), -1, p)
    lazy, red, full = lazy_products(lib, field, pairs)
    for (a, b), z, r, m in zip(pairs, lazy, red, full):
        want = a * b * rinv % p
        assert z < 2 * p and z % p == want, f"{field} mul_lazy: a={a:#x} b={b:#x} got {z:#x} want {want:#x}"
        assert r == want, f"{field} mul_lazy().reduced(): a={a:#x} b={b:#x} got {r:#x} want {want:#x}"
        assert m == want, f"{field} a * b (lazy operands): a={a:#x} b={b:#x} got {m:#x} want {want:#x}"
    return lazy


LAZY_FIELDS = ["fq", "fq_inline"]


def lazy_operands(p, n, rnd):
    """Pairs of values < 2p: every pair of a small set; the squaring's edge values v and v + p
    (when < 2p), 2p − 1 and 2p − 2^k, each paired with a random one of them; 1500 uniform pairs."""
    base = sqr_edge_values(p, n)
    vals = set(base) | {v + p for v in base} | {2 * p - 1, 2 * p - 2, p}
    vals |= {2 * p - (1 << k) for k in range(0, p.bit_length(), 7)}
    vals = sorted(v for v in vals if v < 2 * p)
    small = [0, 1, p - 1, p, p + 1, 2 * p - 1, (1 << (32 * n)) % p + p]
    pairs = [(a, b) for a in small for b in small]
    pairs += [(v, rnd.choice(vals)) for v in vals] + [(rnd.choice(vals), v) for v in vals]
    pairs += [(rnd.randrange(2 * p), rnd.randrange(2 * p)) for _ in range(1500)]
    return pairs


@pytest.mark.parametrize("field", LAZY_FIELDS)
def test_mul_lazy_edges_and_random(sqr_lib, rng, field):
    _, p, n = FIELDS[field]
    rnd = random.Random(int(rng.integers(2**63)))
    lazy = check_lazy(sqr_lib, field, lazy_operands(p, n, rnd))
    # the lazy results reach [p, 2p): the test covers operands and results above p
    assert any(z >= p for z in lazy)


@pytest.mark.parametrize("field", LAZY_FIELDS)
def test_mul_lazy_chains(sqr_lib, rng, field):
    """The batch additions' use: a running product x ← mul_lazy(x, d) over 400 steps (x stays
    < 2p, never reduced), then x.reduced() == Π d (Montgomery form)."""
    _, p, n = FIELDS[field]
    R_ = 1 << (32 * n)
    rinv = pow(R_, -1, p)
    rnd = random.Random(int(rng.integers(2**63)))
    xs = [rnd.randrange(2 * p) for _ in range(16)] + [2 * p - 1, p, R_ % p]
    want = [x % p for x in xs]
    seen_high = False
    for _ in range(400):
        ds = [rnd.choice((rnd.randrange(p), p - 1, 1, R_ % p)) for _ in xs]
        xs = check_lazy(sqr_lib, field, list(zip(xs, ds)))
        want = [w * d * rinv % p for w, d in zip(want, ds)]
        seen_high |= any(x >= p for x in xs)
    assert [x % p for x in xs] == want
    assert seen_high

