"""The GPU field inversion (cuzk/cu/ff/inverse.cuh: Bernstein–Yang divsteps, Fermat kept as
inverse_fermat; Fq2 by the norm in ff/fq2_t.cuh) on the host emulator (see tests/test_cu_emu.py),
through the harness kernels emu_inverse_{fr,fq,fq2} of tests/cu_emu/ec_ops.cu, against Python's
pow(x, -1, p).

Inputs are Montgomery limbs as every kernel holds them: the algorithm works on the stored
integer x = a·R mod p, so the edge values are given both as stored integers (the bit patterns
that the divsteps see) and as canonical values converted to Montgomery form.
"""
import random

import pytest

from test_cu_emu import FIELDS, P, run_kernel


def mont_inverse_ref(x, p, nbytes):
    """Montgomery form of a^-1 for the stored x = a·R (0 ↦ 0), R = 2^(8·nbytes)."""
    if x == 0:
        return 0
    r = 1 << (8 * nbytes)
    return pow(x * pow(r, -1, p) % p, -1, p) * r % p


def bit_patterns(p):
    """Stored integers with structure: 0, 1, 2, p−1, p−2, powers of two, small values, values
    near 2^(bits−1), long runs of ones and zeros, alternating bits, limb-edge words."""
    bits = p.bit_length()
    v = {0, 1, 2, 3, p - 1, p - 2, p - 3, (p - 1) // 2, (p + 1) // 2}
    v |= {1 << k for k in range(bits)}
    v |= set(range(4, 80)) | {2**32 - 1, 2**32 + 1, 2**64 - 1}
    top = 1 << (bits - 1)
    v |= {top + d for d in range(-20, 21)} | {top - 2**200, top + 2**200}
    for k in sorted({1, 7, 31, 32, 33, 63, 64, 65, 127, 200, 255, 300, bits - 2, bits - 1}):
        if k >= bits:
            continue
        ones = (1 << k) - 1
        v |= {ones, ones << (bits - 1 - k), ones << ((bits - k) // 2)}
        v |= {ones ^ ((1 << (bits - 1)) - 1), p - ones, p - (ones << 3)}
    alt = int("10" * (bits // 2), 2)
    v |= {alt, alt >> 1, alt >> 2, int("1100" * (bits // 4), 2), int("1110" * (bits // 4), 2)}
    v |= {int("11110000" * (bits // 8), 2), int("1" * (bits - 2) + "01", 2)}
    return sorted(x % p for x in v)


def worst_divsteps(p, rnd, tries):
    """Among `tries` random x, the 8 that need the most divsteps from (δ, f, g) = (1/2, p, x)
    (the variant of inverse.cuh) to reach g = 0: the inputs closest to the loop's bound."""
    def count(x):
        eta, f, g, n = -1, p, x, 0                   # eta = −δ − 1/2
        while g:
            if eta < 0 and g & 1:
                eta, f, g = -eta - 2, g, (g - f) >> 1
            else:
                eta, g = eta - 1, (g + (g & 1) * f) >> 1
            n += 1
        return n
    xs = [rnd.randrange(1, p) for _ in range(tries)]
    return sorted(xs, key=count)[-8:]


def run_inverse(fake, field, xs):
    """(inverse, inverse_fermat) of every stored x through emu_inverse_<field>."""
    nbytes = FIELDS[field][1]
    out = run_kernel(fake, f"emu_inverse_{field}", xs, [0] * len(xs), nbytes, outs=2, block=64)
    return out[0::2], out[1::2]


def check(field, xs, got, what):
    p, nbytes = FIELDS[field]
    bad = [(x, g) for x, g in zip(xs, got) if g != mont_inverse_ref(x, p, nbytes)]
    assert not bad, (f"{field} {what}: {len(bad)} of {len(xs)} wrong; first x={bad[0][0]:#x} "
                     f"got {bad[0][1]:#x} want {mont_inverse_ref(bad[0][0], p, nbytes):#x}")


@pytest.mark.parametrize("field", ["fq", "fr"])
def test_inverse_edge_values(fake, field):
    """Structured stored integers and the same values as canonical elements (Montgomery form),
    for inverse (safegcd) and inverse_fermat."""
    p, nbytes = FIELDS[field]
    r = 1 << (8 * nbytes)
    pats = bit_patterns(p)
    xs = pats + [v * r % p for v in pats]
    inv, fermat = run_inverse(fake, field, xs)
    check(field, xs, inv, "inverse")
    check(field, xs, fermat, "inverse_fermat")
    assert inv[xs.index(0)] == 0 and fermat[xs.index(0)] == 0          # inverse(0) = 0
    one = r % p                                                        # Montgomery 1
    assert inv[xs.index(one)] == one


def test_inverse_fq_random(fake):
    """2000 random Fq elements plus the slowest of 3000 random inputs (most divsteps)."""
    rnd = random.Random(381)
    xs = [rnd.randrange(P) for _ in range(2000)] + worst_divsteps(P, rnd, 3000)
    inv, _ = run_inverse(fake, "fq", xs)
    check("fq", xs, inv, "inverse")


def test_inverse_fr_random(fake):
    p = FIELDS["fr"][0]
    rnd = random.Random(255)
    xs = [rnd.randrange(p) for _ in range(300)] + worst_divsteps(p, rnd, 2000)
    inv, _ = run_inverse(fake, "fr", xs)
    check("fr", xs, inv, "inverse")


def test_inverse_fq2(fake):
    """a·inverse(a) = 1 in Fq2 for random a (and a with one zero half), inverse(0) = 0, and the
    value against the norm formula in Python: (a0 − a1·u)/(a0^2 + a1^2)."""
    rnd = random.Random(2)
    r = 1 << 384
    rinv = pow(r, -1, P)
    pairs = [(0, 0), (r % P, 0), (0, r % P), (1, 0), (0, 1), (P - 1, P - 1)]
    pairs += [(rnd.randrange(P), rnd.randrange(P)) for _ in range(200)]
    pairs += [(rnd.randrange(P), 0) for _ in range(10)] + [(0, rnd.randrange(P)) for _ in range(10)]
    xs = [c0 | c1 << 384 for c0, c1 in pairs]
    out = run_kernel(fake, "emu_inverse_fq2", xs, [0] * len(xs), 96, outs=2, block=64)
    one = r % P
    for i, (c0, c1) in enumerate(pairs):
        inv, prod = out[2 * i], out[2 * i + 1]
        if c0 == c1 == 0:
            assert inv == 0 and prod == 0, "inverse(0) must be 0"
            continue
        assert prod == one, f"a·inverse(a) != 1 for a = ({c0:#x}, {c1:#x})"
        a0, a1 = c0 * rinv % P, c1 * rinv % P                    # canonical halves
        t = pow((a0 * a0 + a1 * a1) % P, -1, P)
        want = (a0 * t % P * r % P) | ((-a1 * t) % P * r % P) << 384
        assert inv == want, f"inverse({c0:#x}, {c1:#x})"
