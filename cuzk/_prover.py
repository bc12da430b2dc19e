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
import threading
import time
from collections.abc import Callable, Iterable

from ._assignment import Assignment
from ._params import ProvingKey
from ._stages import CpuStages, R_MODULUS, Stages, stages_for

__all__ = ["CpuStages", "CudaStages", "stages_for", "prove", "prove_partitions", "Prover",
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


class Prover:
    """A proving key made ready once (on the CUDA backend: resident in device memory) for many
    ``prove`` calls, from any number of threads at once.

    ``cuzk.prove`` loads its key for the one call (a 2^27 PoRep key is 44 GiB: seconds of
    upload each time); a ``Prover`` loads it in the constructor and keeps it until ``close``.
    For queues, priorities and several workers per GPU behind an interlock use ``cuzk.Engine``.

    Parameters
    ----------
    pk : ProvingKey
    backend : {"auto", "cpu", "cuda"}, keyword-only
    device : int or None, keyword-only
        CUDA device ordinal (None: 0).
    threads : int or None, keyword-only
        CPU threads of each call's host stages (None = all cores).
    stage_options : dict or None, keyword-only
        CUDA stage options (``cuzk._stages.STAGE_OPTIONS``).  With ``precompute="auto"`` (the
        default) the key gets the H MSM's precomputed copies, as the engine's keys do: a build
        of seconds at 2^27, repaid after ~140 partitions.  The CPU backend takes none.
    stages : Stages or None, keyword-only
        A stage object to use (overrides backend/device/threads/stage_options).

    ``prove`` is thread-safe: each concurrent call gets its own stage context (streams, pinned
    staging), kept for the next call.  Use it as a context manager, or call ``close``.

    Raises
    ------
    ValueError
        Bad options; ``BudgetError`` when the device cannot hold even a streamed key.
    """

    def __init__(self, pk: ProvingKey, *, backend: str = "auto", device: int | None = None,
                 threads: int | None = None, stage_options: dict | None = None,
                 stages: Stages | None = None, _lasting: bool = True):
        self.st = stages if stages is not None else stages_for(backend, threads, device,
                                                               **(stage_options or {}))
        self.pk = pk
        self.threads = threads
        self._lock = threading.Lock()
        self._idle = []                     # contexts between calls
        self._contexts = []                 # every context made (closed by close())
        self._closed = False
        self.key = self.st.load_key(pk, lasting=_lasting)   # one call (cuzk.prove): no copies

    @property
    def backend(self) -> str:
        return self.st.name

    @property
    def device(self) -> str:
        return self.st.device_label

    def _context(self):
        with self._lock:
            if self._closed:
                raise ValueError("Prover is closed")
            if self._idle:
                return self._idle.pop()
        ctx = self.st.context(threads=self.threads)
        with self._lock:
            self._contexts.append(ctx)
        return ctx

    def prove(self, asg: Assignment | str | os.PathLike, r: int | None = None, s: int | None = None,
              *, verify: bool = False, check: bool = True, timings: dict | None = None) -> bytes:
        """One partition's 192-byte proof; parameters, result and errors as ``cuzk.prove``
        (``timings`` accumulates when the same dict is passed again)."""
        asg = _assignment(asg)
        ctx = self._context()
        try:
            t0 = time.perf_counter()
            proof, t = self.st.prove_one(self.key, asg, ctx, r, s, check=check, verify=verify)
            if timings is not None:
                for k, v in t.items():       # seconds add up over partitions; labels are kept
                    timings[k] = v if isinstance(v, str) else timings.get(k, 0.0) + v
                timings["total"] = timings.get("total", 0.0) + time.perf_counter() - t0
                timings["backend"] = self.st.name
                timings["device"] = self.st.device_label
            return proof
        finally:
            with self._lock:
                self._idle.append(ctx)

    def close(self):
        """Release the key and every context (idempotent; calls still running must end first)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            ctxs, self._contexts, self._idle = self._contexts, [], []
        try:
            self.key.release()
        finally:
            for ctx in ctxs:
                ctx.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if self._closed else "open"
        return f"Prover(domain 2^{self.pk.domain_size.bit_length() - 1}, {self.st.name}, {state})"


def _one_call(pk, backend, device, threads, stages):
    """The Prover of one ``prove``/``prove_partitions`` call: its key serves that call only."""
    return Prover(pk, backend=backend, device=device, threads=threads, stages=stages, _lasting=False)


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

    The key is loaded for this call and released after it (on the CUDA backend: uploaded to the
    device each call).  Many proofs with one key: ``cuzk.Prover`` (thread-safe) or
    ``cuzk.Engine``.

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
    with _one_call(pk, backend, device, threads, stages) as pr:
        return pr.prove(asg, r, s, verify=verify, check=check, timings=timings)


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
    with _one_call(pk, backend, device, threads, stages) as pr:
        out = []
        for a in assignments:           # pulled one at a time: an iterator may load them lazily
            out.append(pr.prove(a, verify=verify, check=check, timings=timings))
            if progress is not None:
                progress(len(out))
        return b"".join(out)
