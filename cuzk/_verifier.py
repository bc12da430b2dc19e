"""Groth16 verification through an independent pairing library (py_arkworks_bls12381).

Equation (bellperson ``src/groth16/verifier.rs``):
``e(A, B) = e(α, β) · e(Σ_i x_i·IC_i, γ) · e(C, δ)`` with x_0 = 1, checked as one
multi-pairing ``e(A, B)·e(−acc, γ)·e(−C, δ)·e(−α, β) = 1``.  Batches use random 128-bit
weights r_j (a random linear combination, one Miller loop per proof plus three).

Points cross to arkworks as canonical big-endian x‖y (G2 as x.c0‖x.c1‖y.c0‖y.c1, arkworks'
order); no pairing or curve arithmetic is written here.
"""
from __future__ import annotations

import secrets

import numpy as np

try:
    from py_arkworks_bls12381 import G1Point, G2Point, GT, Scalar
except ImportError as _e:  # a declared dependency; absent only on hand-built hosts
    _ARKWORKS_ERROR = _e
    G1Point = G2Point = GT = Scalar = None
else:
    _ARKWORKS_ERROR = None

from collections.abc import Sequence

from ._assignment import R_MOD, fr_mont_to_ints
from ._errors import FormatError
from ._params import PROOF_BYTES, VerifyingKey, _g, decode_proof

__all__ = ["verify", "verify_batch", "prepare_inputs", "PreparedInputs", "to_arkworks_g1",
           "to_arkworks_g2", "from_arkworks_g1", "from_arkworks_g2"]

from ._constants import FQ_MODULUS as Q_MOD, fq_from_mont_int, fq_to_mont_int  # noqa: E402


def _fq_ints(limbs: np.ndarray, what: str | None = None) -> list:
    """Montgomery limbs (6 per coordinate) -> canonical Fq ints.  With ``what`` (a checked
    conversion), a coordinate whose Montgomery value is not below p raises ValueError: it is
    not the representation cuzk and bellperson write, though its value mod p would convert."""
    raw = np.ascontiguousarray(limbs, dtype="<u8").tobytes()
    ms = [int.from_bytes(raw[48 * i:48 * i + 48], "little") for i in range(len(raw) // 48)]
    if what is not None and any(m >= Q_MOD for m in ms):
        raise ValueError(f"{what} coordinate not reduced: its Montgomery value is not below p")
    return [fq_from_mont_int(m) for m in ms]


def _point_limbs(p, words: int, what: str) -> np.ndarray:
    """``p`` flattened to the point's ``words`` uint64 limbs (``_params._g``'s check)."""
    return _g(np.asarray(p, dtype=np.uint64).reshape(-1), words, f"a {what} point")


def _fq_mont(values) -> np.ndarray:
    out = bytearray()
    for v in values:
        out += fq_to_mont_int(v).to_bytes(48, "little")
    return np.frombuffer(bytes(out), dtype="<u8").astype(np.uint64)


def _need_arkworks():
    if _ARKWORKS_ERROR is not None:
        raise ImportError("cuzk's verifier needs py-arkworks-bls12381 (pip install "
                          "py-arkworks-bls12381)") from _ARKWORKS_ERROR


def to_arkworks_g1(p, checked: bool = True) -> G1Point:
    """Montgomery affine G1 (12,) -> arkworks point (all-zero -> identity).  ``checked``
    verifies reduced coordinates, on-curve and subgroup (ValueError otherwise)."""
    _need_arkworks()
    p = _point_limbs(p, 12, "G1")
    if not p.any():
        return G1Point.identity()
    x, y = _fq_ints(p, "G1" if checked else None)
    data = x.to_bytes(48, "big") + y.to_bytes(48, "big")
    try:
        return (G1Point.from_xy_bytes_be if checked else G1Point.from_xy_bytes_unchecked_be)(data)
    except Exception as e:  # arkworks raises its own exception types
        raise ValueError(f"not a valid G1 point: {e}") from None


def to_arkworks_g2(p, checked: bool = True) -> G2Point:
    """Montgomery affine G2 (24,) (x.c0, x.c1, y.c0, y.c1) -> arkworks point; ``checked`` as
    for ``to_arkworks_g1``."""
    _need_arkworks()
    p = _point_limbs(p, 24, "G2")
    if not p.any():
        return G2Point.identity()
    coords = _fq_ints(p, "G2" if checked else None)
    data = b"".join(c.to_bytes(48, "big") for c in coords)
    try:
        return (G2Point.from_xy_bytes_be if checked else G2Point.from_xy_bytes_unchecked_be)(data)
    except Exception as e:
        raise ValueError(f"not a valid G2 point: {e}") from None


def from_arkworks_g1(P: G1Point) -> np.ndarray:
    """arkworks G1 point -> Montgomery affine (12,) (identity -> all-zero)."""
    raw = P.to_xy_bytes_be()
    if P == G1Point.identity():
        return np.zeros(12, np.uint64)
    return _fq_mont([int.from_bytes(raw[0:48], "big"), int.from_bytes(raw[48:96], "big")])


def from_arkworks_g2(P: G2Point) -> np.ndarray:
    """arkworks G2 point -> Montgomery affine (24,)."""
    if P == G2Point.identity():
        return np.zeros(24, np.uint64)
    raw = P.to_xy_bytes_be()
    return _fq_mont([int.from_bytes(raw[48 * i:48 * i + 48], "big") for i in range(4)])


class _PreparedVk:
    __slots__ = ("alpha", "beta", "gamma", "delta", "ic")

    def __init__(self, vk: VerifyingKey):
        if not isinstance(vk, VerifyingKey):
            raise TypeError("vk must be a cuzk VerifyingKey")
        # vk points come from the checked reader or from keygen: no subgroup re-check
        self.alpha = to_arkworks_g1(vk.alpha_g1, checked=False)
        self.beta = to_arkworks_g2(vk.beta_g2, checked=False)
        self.gamma = to_arkworks_g2(vk.gamma_g2, checked=False)
        self.delta = to_arkworks_g2(vk.delta_g2, checked=False)
        self.ic = [to_arkworks_g1(p, checked=False) for p in vk.ic]


def _publics(public_inputs, n_expected) -> list:
    if isinstance(public_inputs, np.ndarray) and public_inputs.dtype == np.uint64:
        if public_inputs.ndim != 2 or public_inputs.shape[1] != 4:
            raise ValueError("public inputs as an array must be uint64 (k, 4) Montgomery")
        xs = fr_mont_to_ints(public_inputs)
    else:
        xs = []
        for i, x in enumerate(public_inputs):
            x = int(x)
            if not 0 <= x < R_MOD:
                raise ValueError(f"public input {i} is not in [0, r)")
            xs.append(x)
    if len(xs) != n_expected:
        raise ValueError(f"the verifying key takes {n_expected} public inputs (IC has "
                         f"{n_expected + 1} points), got {len(xs)}")
    return xs


def _proof_points(proof, path="<proof>"):
    """(A, B, C) as arkworks points; FormatError for undecodable bytes."""
    if isinstance(proof, (bytes, bytearray, memoryview)):
        if len(proof) != PROOF_BYTES:
            raise FormatError(path, min(len(proof), PROOF_BYTES),
                              f"a {PROOF_BYTES}-byte proof, got {len(proof)} bytes")
        A, B, C = decode_proof(proof, path)
        return (to_arkworks_g1(A, checked=False), to_arkworks_g2(B, checked=False),
                to_arkworks_g1(C, checked=False))
    try:
        A, B, C = proof
    except (TypeError, ValueError):
        raise TypeError("proof must be 192 bytes or an (A, B, C) tuple of Montgomery "
                        "affine arrays") from None
    return to_arkworks_g1(A), to_arkworks_g2(B), to_arkworks_g1(C)


def _acc(pvk: _PreparedVk, scalars: list) -> G1Point:
    """IC_0·s_0 + Σ IC_i·s_i as one multi-exponentiation."""
    return G1Point.multiexp_unchecked(pvk.ic, [Scalar(s) for s in scalars])


class PreparedInputs:
    """What :func:`verify` needs besides the proof, computed ahead (:func:`prepare_inputs`):
    the vk's points in arkworks form and acc = IC_0 + Σ x_i·IC_i (a multi-exponentiation over
    the public inputs: ~10–30 ms of the host for PoRep's 328 inputs).  ``cuzk.prove`` computes
    it while the GPU runs the partition, so only the pairing is left after the epilogue."""
    __slots__ = ("vk", "pvk", "acc")

    def __init__(self, vk: VerifyingKey, public_inputs):
        self.vk = vk
        self.pvk = _PreparedVk(vk)
        xs = _publics(public_inputs, len(self.pvk.ic) - 1)
        self.acc = _acc(self.pvk, [1] + xs)


def prepare_inputs(vk: VerifyingKey, public_inputs: Sequence[int] | np.ndarray) -> PreparedInputs:
    """The proof-independent part of :func:`verify` (raises as it does for the inputs)."""
    return PreparedInputs(vk, public_inputs)


def verify(vk: VerifyingKey, proof: bytes | tuple[np.ndarray, np.ndarray, np.ndarray],
           public_inputs: Sequence[int] | np.ndarray | None = None, *,
           prepared: PreparedInputs | None = None) -> bool:
    """Check a Groth16 proof.

    Parameters
    ----------
    vk : VerifyingKey
    proof : bytes (192, bellperson encoding) or (A (12,), B (24,), C (12,)) Montgomery arrays.
    public_inputs : list of ints in [0, r), or uint64 (k, 4) Montgomery — WITHOUT the leading 1.
    prepared : PreparedInputs, optional
        ``prepare_inputs(vk, public_inputs)`` computed ahead, instead of ``public_inputs``.

    Returns True iff the proof verifies; False for a well-formed but invalid proof.

    Raises
    ------
    FormatError
        ``proof`` bytes that do not decode (length, flags, off-curve, non-subgroup, infinity).
    ValueError
        Wrong number of public inputs, an input ≥ r, or proof arrays that are not valid points.
    """
    if prepared is None:
        if public_inputs is None:
            raise TypeError("verify needs public_inputs or prepared")
        prepared = PreparedInputs(vk, public_inputs)
    elif prepared.vk is not vk:
        raise ValueError("prepared inputs were computed for another verifying key")
    pvk, acc = prepared.pvk, prepared.acc
    A, B, C = _proof_points(proof)
    return bool(GT.pairing_check([A, -acc, -C, -pvk.alpha], [B, pvk.gamma, pvk.delta, pvk.beta]))


def verify_batch(vk: VerifyingKey, proofs: bytes | Sequence[bytes],
                 publics: Sequence[Sequence[int] | np.ndarray]) -> bool:
    """Check many proofs for one vk at once (random linear combination).

    ``proofs`` and ``publics`` are sequences of equal length, items as in :func:`verify`.
    Returns True iff every proof verifies (up to probability 2^-128); True for an empty batch.
    Raises as :func:`verify`.
    """
    proofs, publics = list(proofs), list(publics)
    if len(proofs) != len(publics):
        raise ValueError(f"{len(proofs)} proofs but {len(publics)} public-input lists")
    if not proofs:
        return True
    pvk = _PreparedVk(vk)
    k = len(pvk.ic) - 1
    xs = [_publics(p, k) for p in publics]
    pts = [_proof_points(p) for p in proofs]
    rs = [secrets.randbits(128) | 1 for _ in proofs]
    # Π e(r_j·A_j, B_j) = e(Σr_j·α, β) · e(Σ_j r_j·acc_j, γ) · e(Σ r_j·C_j, δ)
    s = [sum(rs) % R_MOD] + [sum(r * x[i] for r, x in zip(rs, xs)) % R_MOD for i in range(k)]
    acc = _acc(pvk, s)
    csum = G1Point.multiexp_unchecked([p[2] for p in pts], [Scalar(r) for r in rs])
    g1s = [p[0] * Scalar(r) for p, r in zip(pts, rs)]
    g2s = [p[1] for p in pts]
    g1s += [-acc, -csum, -(pvk.alpha * Scalar(sum(rs) % R_MOD))]
    g2s += [pvk.gamma, pvk.delta, pvk.beta]
    return bool(GT.pairing_check(g1s, g2s))
