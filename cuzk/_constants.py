"""BLS12-381 constants of the Python side and the int <-> Montgomery conversions built on them.

One place per fact: every module that needs the field moduli, the Montgomery radix, a root of
unity or a Montgomery conversion imports it from here.  ``scripts/gen_constants.py`` derives
each literal independently (from the BLS parameter x) and checks this module, as it checks the
C headers (tests/test_constants.py runs the check).

Montgomery form (the in-memory layout of cuzk, blst and blstrs): ``x·2^256 mod r`` for Fr,
``x·2^384 mod p`` for Fq, as little-endian 64-bit limbs (4 for Fr, 6 for Fq).
"""
import numpy as np

__all__ = [
    "FR_MODULUS", "FQ_MODULUS", "FR_BYTES", "FQ_BYTES", "FR_MONT_R", "FR_MONT_R_INV",
    "FQ_MONT_R", "FQ_MONT_R_INV", "FR_TWO_ADICITY", "FR_GENERATOR", "SNARKJS_FR_GENERATOR",
    "fr_root_of_unity", "fr_to_mont_int", "fr_from_mont_int", "fq_to_mont_int",
    "fq_from_mont_int", "fr_ints_to_mont", "fr_mont_to_ints",
]

#: r, the order of G1/G2 (the scalar field Fr).
FR_MODULUS = 0x73eda753299d7d483339d80809a1d80553bda402fffe5bfeffffffff00000001
#: p, the base field Fq.
FQ_MODULUS = 0x1a0111ea397fe69a4b1ba7b6434bacd764774b84f38512bf6730d2a0f6b0f6241eabfffeb153ffffb9feffffffffaaab
FR_BYTES = 32
FQ_BYTES = 48
#: Montgomery radix R = 2^256 mod r and its inverse mod r.
FR_MONT_R = 0x1824b159acc5056f998c4fefecbc4ff55884b7fa0003480200000001fffffffe
FR_MONT_R_INV = 0x1bbe869330009d577204078a4f77266aab6fca8f09dc705f13f75b69fe75c040
#: Montgomery radix 2^384 mod p and its inverse mod p.
FQ_MONT_R = 0x15f65ec3fa80e4935c071a97a256ec6d77ce5853705257455f48985753c758baebf4000bc40c0002760900000002fffd
FQ_MONT_R_INV = 0x14fec701e8fb0ce9ed5e64273c4f538b1797ab1458a88de9343ea97914956dc87fe11274d898fafbf4d38259380b4820
#: 2^32 divides r − 1.
FR_TWO_ADICITY = 32
#: Multiplicative generator whose powers give the domains of bellperson, blstrs and cuzk.
FR_GENERATOR = 7
#: ffjavascript's (snarkjs') generator: its domains are other roots of the same orders.
SNARKJS_FR_GENERATOR = 5


def fr_root_of_unity(log_n: int, generator: int = FR_GENERATOR) -> int:
    """The primitive 2^log_n-th root of unity ``generator^((r − 1)/2^log_n) mod r``.

    Parameters
    ----------
    log_n : int
        0 ≤ log_n ≤ 32 (FR_TWO_ADICITY).
    generator : int
        FR_GENERATOR (7: bellperson, blstrs, cuzk) or SNARKJS_FR_GENERATOR (5: snarkjs).

    Returns
    -------
    int
        The root, canonical (not Montgomery).

    Raises
    ------
    ValueError
        ``log_n`` outside 0..32.
    """
    if isinstance(log_n, bool) or not isinstance(log_n, int) or not 0 <= log_n <= FR_TWO_ADICITY:
        raise ValueError(f"log_n must be an int in 0..{FR_TWO_ADICITY}, got {log_n!r}")
    return pow(generator, (FR_MODULUS - 1) >> log_n, FR_MODULUS)


def fr_to_mont_int(x: int) -> int:
    """Canonical Fr value (any int, reduced mod r) -> its Montgomery representative."""
    return x * FR_MONT_R % FR_MODULUS


def fr_from_mont_int(m: int) -> int:
    """Montgomery representative -> canonical Fr value in [0, r)."""
    return m * FR_MONT_R_INV % FR_MODULUS


def fq_to_mont_int(x: int) -> int:
    """Canonical Fq value -> its Montgomery representative (mod p)."""
    return x * FQ_MONT_R % FQ_MODULUS


def fq_from_mont_int(m: int) -> int:
    """Montgomery representative -> canonical Fq value in [0, p)."""
    return m * FQ_MONT_R_INV % FQ_MODULUS


def fr_ints_to_mont(values) -> np.ndarray:
    """Canonical Fr ints (each in [0, r)) -> uint64 array (k, 4), Montgomery, little-endian limbs.

    Raises ValueError naming the first value outside [0, r).
    """
    values = list(values)
    out = np.empty((len(values), 4), dtype=np.uint64)
    for i, v in enumerate(values):
        v = int(v)
        if not 0 <= v < FR_MODULUS:
            raise ValueError(f"value {i} is not in [0, r)")
        out[i] = np.frombuffer(fr_to_mont_int(v).to_bytes(FR_BYTES, "little"), dtype="<u8")
    return out


def fr_mont_to_ints(arr) -> list:
    """uint64 array (k, 4) of Montgomery Fr values -> list of canonical ints."""
    raw = np.ascontiguousarray(arr, dtype="<u8").reshape(-1, 4).tobytes()
    return [fr_from_mont_int(int.from_bytes(raw[FR_BYTES * i:FR_BYTES * (i + 1)], "little"))
            for i in range(len(raw) // FR_BYTES)]
