"""The Groth16 prover (bellperson/Filecoin path) on the stage interface of ``cuzk._stages``.

Stages (DESIGN §2): prep_msm → H (iNTT, coset NTT, (a·b − c)/Z, coset iNTT, MSM over the
n − 1 H points) → batch additions of the SRS points whose scalar is 1 (L, A, B_G1, B_G2)
→ tail MSMs over the full scalars → B_G2 → epilogue with the randomizers r, s:

    A = α₁ + Σ aᵢ·Aᵢ + r·δ₁
    B = β₂ + Σ bᵢ·B₂ᵢ + s·δ₂            (and B₁ = β₁ + Σ bᵢ·B₁ᵢ + s·δ₁ in G1)
    C = s·A + r·B₁ − r·s·δ₁ + H + L

Both backends give the same bytes for the same inputs and (r, s).  ``prove`` runs
prepare → run → synchronize → finish with no lock (``Stages.prove_one``: the CUDA backend
overlaps the H kernels with prep_msm there); the engine (``cuzk.Engine``) runs the same
calls from many workers behind its interlock.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable

from ._assignment import Assignment
from ._params import ProvingKey
from ._stages import CpuStages, R_MODULUS, Stages, stages_for

__all__ = ["CpuStages", "CudaStages", "stages_for", "prove", "prove_partitions",
           "public_inputs", "R_MODULUS"]


def __getattr__(name):
    if name == "CudaStages":
        from ._stages._cuda import CudaStages
        return CudaStages
    raise AttributeError(name)


def public_inputs(asg: Assignment) -> list[int]:
    """The public inputs of an assignment as canonical ints, without the leading 1."""
    from ._native import _field
    can = _field.from_mont(asg.inputs[1:], "fr")
    return [int.from_bytes(row.tobytes(), "little") for row in can]


def _assignment(asg):
    return Assignment.coerce(asg)


class _Session:
    """A stage object with one context and one key, for ``prove`` and ``prove_partitions``."""

    def __init__(self, pk, backend, device, threads, stages):
        self.st = stages if stages is not None else stages_for(backend, threads, device)
        self.ctx = self.st.context(threads=threads)
        try:
            self.key = self.st.load_key(pk, lasting=False)    # one call's key: no one-time builds
        except BaseException:
            self.ctx.close()
            raise

    def prove(self, asg, r, s, verify, check, timings):
        st = self.st
        t0 = time.perf_counter()
        proof, t = st.prove_one(self.key, asg, self.ctx, r, s, check=check, verify=verify)
        if timings is not None:
            for k, v in t.items():       # seconds add up over partitions; labels are kept
                timings[k] = v if isinstance(v, str) else timings.get(k, 0.0) + v
            timings["total"] = timings.get("total", 0.0) + time.perf_counter() - t0
            timings["backend"] = st.name
            timings["device"] = st.device_label
        return proof

    def close(self):
        try:
            self.key.release()
        finally:
            self.ctx.close()


def prove(pk: ProvingKey, asg: Assignment | str | os.PathLike, r: int | None = None, s: int | None = None, *, backend: str = "auto",
          device: int | None = None, threads: int | None = None, verify: bool = False,
          check: bool = True, timings: dict | None = None, stages: Stages | None = None) -> bytes:
    """Prove one partition.

    Parameters
    ----------
    pk : ProvingKey
    asg : Assignment or str or os.PathLike
        A path is loaded with ``Assignment.load_npz``.  Validated against ``pk`` first.
    r, s : int or None
        Randomizers in [0, r); ``None`` draws them from a CSPRNG. Fixed values give
        reproducible bytes on every backend.
    backend : {"auto", "cpu", "cuda"}
    device : int or None
        CUDA device ordinal (None: 0).
    threads : int or None
        CPU threads for the host stages (None = all cores).
    verify : bool
        Verify the proof with ``pk.vk`` before returning it; a proof that fails raises
        ``ProofVerificationError`` whose ``cause`` says whether the assignment or the backend is
        at fault (a GPU proof that fails is re-proved on the CPU to tell).
    check : bool
        Check a_i·b_i = c_i on every row before proving (O(n), milliseconds).
    timings : dict or None
        Filled with per-stage seconds (see ``Stages.stage_names``), ``total``, and the
        ``backend`` and ``device`` that ran (the CUDA backend's overlapped path adds
        ``overlap = "early"``: see ``CudaStages.prove_one``).
    stages : Stages or None
        A stage object to reuse (overrides backend/device/threads).

    Returns
    -------
    bytes
        The 192-byte proof A‖B‖C (compressed, bellperson order).

    Raises
    ------
    TypeError
        ``asg`` is neither an Assignment nor a path.
    ValueError
        The assignment does not fit the parameters (``UnsatisfiedAssignmentError`` when a row
        of a∘b = c fails).
    ProofVerificationError
        ``verify=True`` and the computed proof does not verify.
    """
    asg = _assignment(asg)
    sess = _Session(pk, backend, device, threads, stages)
    try:
        return sess.prove(asg, r, s, verify, check, timings)
    finally:
        sess.close()


def prove_partitions(pk: ProvingKey, assignments: Iterable[Assignment | str | os.PathLike], *,
                     backend: str = "auto", device: int | None = None,
                     threads: int | None = None, verify: bool = False, check: bool = True,
                     timings: dict | None = None, stages: Stages | None = None,
                     progress: Callable[[int], None] | None = None) -> bytes:
    """Prove several partitions with one key (loaded once); returns their proofs concatenated
    in partition order (192 bytes each).  ``assignments`` may be any iterable (an iterator is
    pulled one partition at a time).  ``timings`` accumulates over the partitions (``total`` is
    the sum).  ``progress(i)`` is called after the i-th partition.  Other parameters and
    errors as ``prove``."""
    sess = _Session(pk, backend, device, threads, stages)
    try:
        out = []
        for a in assignments:           # pulled one at a time: an iterator may load them lazily
            out.append(sess.prove(_assignment(a), None, None, verify, check, timings))
            if progress is not None:
                progress(len(out))
        return b"".join(out)
    finally:
        sess.close()
