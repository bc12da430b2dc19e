"""Scalar distributions of the MSM tests and benchmarks (issue 9): the inputs provers have, not
only uniform ones.  Canonical uint64 (n, 4) little-endian limbs, every value < r (so each also
has a Montgomery form: ``cuzk._assignment.fr_to_mont``).

uniform      values < r
bits90       0 with probability 45 %, 1 with 45 %, else uniform (a Filecoin-like witness)
zeros        all 0
ones         all 1
equal        one uniform value repeated
small        < 2^16
r_minus_1    all r − 1
real_tail    90 % from a set of 8 small values, else uniform (the tails after prep_msm)
single       one uniform non-zero value at a random index, the rest 0
"""
import numpy as np

__all__ = ["KINDS", "R", "scalars"]

from ._constants import FR_MODULUS as R  # noqa: E402

KINDS = ("uniform", "bits90", "zeros", "ones", "equal", "small", "r_minus_1", "real_tail", "single")
_R_LIMBS = [(R >> (64 * i)) & (2**64 - 1) for i in range(4)]


def _uniform(rng, n):
    s = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
    s[:, 3] &= np.uint64((1 << 63) - 1)
    top = np.uint64(_R_LIMBS[3])
    over = s[:, 3] >= top                  # maybe >= r: top limb minus r's (then < 2^(192+60) < r)
    s[over, 3] -= top
    return s


def scalars(rng, n, kind="uniform"):
    """n canonical scalars < r of the distribution ``kind`` (see the module docstring), drawn
    from the NumPy Generator ``rng``."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    s = _uniform(rng, n)
    if kind == "bits90":
        u = rng.random(n)
        s[u < 0.9] = 0
        s[u < 0.45, 0] = 1
    elif kind == "zeros":
        s[:] = 0
    elif kind == "ones":
        s[:] = 0
        s[:, 0] = 1
    elif kind == "equal":
        s[:] = s[0] if n else 0
    elif kind == "small":
        s[:, 1:] = 0
        s[:, 0] &= np.uint64(0xffff)
    elif kind == "r_minus_1":
        s[:] = np.array(_R_LIMBS, dtype=np.uint64)
        s[:, 0] -= np.uint64(1)
    elif kind == "real_tail":
        pick = rng.random(n) < 0.9
        vals = rng.integers(2, 1 << 12, size=8, dtype=np.uint64)
        s[pick] = 0
        s[pick, 0] = vals[rng.integers(0, 8, size=int(pick.sum()))]
    elif kind == "single":
        keep = rng.integers(n) if n else 0
        s[np.arange(n) != keep] = 0
        if n and not s[keep].any():
            s[keep, 0] = 1
    return s
