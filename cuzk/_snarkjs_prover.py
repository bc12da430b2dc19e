"""Groth16 proofs from a snarkjs ``.zkey`` and ``.wtns`` (curve bls12381), as snarkjs computes them.

The proof follows snarkjs 0.7.6 ``src/groth16_prove.js`` step by step, so that
``snarkjs groth16 verify`` accepts it and, for the same (r, s), it equals the big-int reference
``tests/snarkjs_ref.py``:

1. Witness-side vectors (``buildABC1``): A·w and B·w per row from the zkey's coefficient records
   (these include the nPublic+1 rows ``A[nConstraints+s][s] = 1``), C = A·w ∘ B·w row by row
   (the zkey stores no C matrix).  GIL-free native sparse product, ``_native/_sparse``.
2. H scalars: A·B − C evaluated on the odd points ω5_2n^(2j+1) of the doubled domain, no
   division by Z: the zkey's H section holds the odd Lagrange points over δ (``zkey_new.js``
   ``writeHs``).
3. MSMs straight over the zkey's point sections (they already are cuzk's affine Montgomery
   layout): A, B1, B2 over the whole witness, C over w[nPublic+1:], H over the H scalars.
4. Epilogue: πA = α₁ + ΣA + r·δ₁; πB = β₂ + ΣB2 + s·δ₂; B₁ = β₁ + ΣB1 + s·δ₁;
   πC = ΣC + ΣH + s·πA + r·B₁ − rs·δ₁.

Roots of unity.  snarkjs (ffjavascript) takes the 2^32-th root ω5 = 5^((r-1)/2^32) (5 is the
least quadratic non-residue) and ω5_m = ω5^(2^32/m); cuzk's NTT uses ω7 = 7^((r-1)/2^32).  Both
generate the cyclic 2-Sylow subgroup of order 2^32, so ω5 = ω7^J for one odd J (``ROOT_EXPONENT``,
found by Pohlig-Hellman below), and ω5_m = ω7_m^(J mod m) for every m = 2^k.  Hence:

* snarkjs's row i is the point ω5_n^i = ω7_n^(J·i): the sparse product writes row i at index
  J·i mod n, which puts the evaluations in cuzk's natural order at no cost.
* After iNTT (coefficients do not depend on the point order), scaling coefficient i by ω7_2n^i
  and NTT, entry k holds the value at ω7_2n^(2k+1).  snarkjs's H[j] is the value at
  ω5_2n^(2j+1) = ω7_2n^(J·(2j+1)), i.e. entry k = (J·(2j+1) mod 2n − 1)/2 — one gather.
"""
from __future__ import annotations

import logging
import os
import time

import numpy as np

from . import _snarkjs as sj
from ._args import threads_arg
from ._constants import FR_TWO_ADICITY as _TWO_ADICITY, SNARKJS_FR_GENERATOR, fr_root_of_unity
from ._stages import check_randomizers, timed

__all__ = ["ROOT_EXPONENT", "snarkjs_root", "witness_vectors", "h_scalars", "prove_zkey",
           "zkey_verifying_key"]

log = logging.getLogger("cuzk.snarkjs")

_R = sj.R


def _root_exponent() -> int:
    """The odd J < 2^32 with 5^((r-1)/2^32) = (7^((r-1)/2^32))^J mod r (Pohlig-Hellman, 32 steps)."""
    t = (_R - 1) >> _TWO_ADICITY
    g5, g7 = pow(5, t, _R), pow(7, t, _R)
    g7_inv = pow(g7, -1, _R)
    j = 0
    for bit in range(_TWO_ADICITY):
        # g5·g7^-j has order 2^(32-bit) at most; its top power decides bit `bit` of J
        x = g5 * pow(g7_inv, j, _R) % _R
        if pow(x, 1 << (_TWO_ADICITY - 1 - bit), _R) != 1:
            j |= 1 << bit
    assert pow(g7, j, _R) == g5 and j & 1
    return j


#: ω5_(2^32) = ω7_(2^32)^ROOT_EXPONENT (see the module docstring).
ROOT_EXPONENT = _root_exponent()


def snarkjs_root(log_n: int) -> int:
    """ffjavascript's primitive 2^log_n-th root of unity, 5^((r-1)/2^log_n), as an int."""
    return fr_root_of_unity(log_n, SNARKJS_FR_GENERATOR)


def _load(zkey, witness):
    if not isinstance(zkey, sj.Zkey):
        zkey = sj.read_zkey(zkey)
    if isinstance(witness, (str, bytes, os.PathLike)):
        witness = sj.read_wtns(witness)
    w = np.asarray(witness)
    if w.dtype != np.uint64 or w.ndim != 2 or w.shape[1] != 4:
        raise ValueError(f"witness: expected a uint64 array of shape (n, 4) (canonical Fr), "
                         f"got dtype {w.dtype}, shape {w.shape}")
    if w.shape[0] != zkey.n_vars:
        raise ValueError(f"witness has {w.shape[0]} values, the zkey {zkey.path} needs "
                         f"nVars = {zkey.n_vars}")
    return zkey, np.ascontiguousarray(w)


def witness_vectors(zkey, witness, threads=None):
    """A·w, B·w, C = A·w ∘ B·w on the zkey's domain, in cuzk's point order.

    Parameters
    ----------
    zkey : Zkey
    witness : ndarray uint64 (nVars, 4), canonical
    threads : int or None

    Returns
    -------
    (a, b, c) : ndarray uint64 (domainSize, 4), Montgomery form; entry k is the value at
        ω7_n^k, i.e. snarkjs's row i sits at k = ROOT_EXPONENT·i mod n.
    """
    from ._native import _sparse
    co = zkey.coeffs
    return _sparse.abc_eval(co.matrix, co.constraint, co.signal, co.value, witness,
                            zkey.domain_size, row_mult=ROOT_EXPONENT, threads=threads_arg(threads))


def h_scalars(zkey, witness, threads=None):
    """snarkjs's H MSM scalars: A·B − C at ω5_2n^(2j+1), canonical uint64 (domainSize, 4)."""
    from ._native import _sparse
    a, b, c = witness_vectors(zkey, witness, threads)
    return _sparse.snarkjs_h(a, b, c, ROOT_EXPONENT, threads=threads_arg(threads))


def prove_zkey(zkey: sj.Zkey | str | os.PathLike, witness: np.ndarray | str | os.PathLike,
               r: int | None = None, s: int | None = None, threads: int | None = None,
               backend: str = "auto", timings: dict | None = None) -> tuple:
    """A Groth16 proof from a snarkjs zkey and witness, exactly as ``snarkjs groth16 prove``.

    Parameters
    ----------
    zkey : Zkey or path
        A bls12381 Groth16 proving key (``cuzk._snarkjs.read_zkey``).
    witness : ndarray uint64 (nVars, 4) or path
        Canonical witness values (``read_wtns``), entry 0 = 1.
    r, s : int or None
        Randomizers in [0, r); ``None`` draws them from ``secrets``.
    threads : int or None
        CPU threads (None = all cores); every heavy step releases the GIL.
    backend : {"auto", "cpu", "cuda"}
        "cuda" runs the H scalars (the NTTs) and the five MSMs on the GPU through the CUDA stage
        object (the zkey's bases are uploaded per MSM: a zkey is not made resident); "auto" picks
        CUDA when a device is usable.  Both give the same proof bytes.
    timings : dict or None
        Filled with seconds per stage: ``abc`` (sparse products), ``h`` (NTTs), ``msm_h``,
        ``msm_a``, ``msm_b1``, ``msm_b2``, ``msm_c``, ``epilogue``, ``total``; and
        ``backend`` and ``device`` (the ones used).

    Returns
    -------
    ((A, B, C), public)
        A, C as ``(x, y)``, B as ``((x0, x1), (y0, y1))``, canonical ints (None = infinity),
        ready for ``write_proof_json``; ``public`` the nPublic public signals as ints.

    Raises
    ------
    cuzk.FormatError
        A file is malformed.
    ValueError
        The witness does not fit the zkey, r or s out of range, or a record/witness value is bad.
    cuzk.BackendUnavailable
        backend="cuda" and no usable CUDA device.
    """
    from ._stages import stages_for
    t = {} if timings is None else timings
    st = stages_for(backend, threads)
    t["backend"], t["device"] = st.name, st.device_label
    nt = threads_arg(threads)
    r, s = check_randomizers(r, s)
    t0 = time.perf_counter()
    zkey, w = _load(zkey, witness)

    def lap(name, fn, *a):
        return timed(t, name, fn, *a)

    a, b, c = lap("abc", witness_vectors, zkey, w, nt)
    h = lap("h", st.snarkjs_h, a, b, c, ROOT_EXPONENT, nt)
    del a, b, c
    sum_h = lap("msm_h", st.msm, zkey.h, h, "g1", nt)
    sum_a = lap("msm_a", st.msm, zkey.a, w, "g1", nt)
    sum_b1 = lap("msm_b1", st.msm, zkey.b1, w, "g1", nt)
    sum_b2 = lap("msm_b2", st.msm, zkey.b2, w, "g2", nt)
    sum_c = lap("msm_c", st.msm, zkey.c, w[zkey.n_public + 1:], "g1", nt)

    def epilogue():
        from ._stages import Stages
        parts = {"a": sum_a, "b_g1": sum_b1, "b_g2": sum_b2, "h": sum_h, "l": sum_c}
        pa, pb, pc = Stages.epilogue_points(zkey_verifying_key(zkey), parts, r, s)
        return sj.g1_from_mont(pa), sj.g2_from_mont(pb), sj.g1_from_mont(pc)

    proof = lap("epilogue", epilogue)
    public = sj.fr_to_ints(w[1:zkey.n_public + 1])
    t["total"] = time.perf_counter() - t0
    return proof, public


def zkey_verifying_key(zkey):
    """The verification key inside a zkey as a bellperson-style ``cuzk._params.VerifyingKey``
    (the Groth16 check is the same: e(A,B) = e(α,β)·e(Σ IC·x, γ)·e(C,δ))."""
    from ._params import VerifyingKey
    return VerifyingKey(alpha_g1=np.array(zkey.alpha1), beta_g1=np.array(zkey.beta1),
                        beta_g2=np.array(zkey.beta2), gamma_g2=np.array(zkey.gamma2),
                        delta_g1=np.array(zkey.delta1), delta_g2=np.array(zkey.delta2),
                        ic=np.array(zkey.ic))


def _verify_zkey(zkey, proof, public) -> bool:
    """Check a proof (affine ints) against the zkey's own verification key."""
    from ._params import encode_proof
    from ._verifier import verify
    A, B, C = proof
    enc = encode_proof(sj.g1_to_mont(A), sj.g2_to_mont(B), sj.g1_to_mont(C))
    return verify(zkey_verifying_key(zkey), enc, public)
