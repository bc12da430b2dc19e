"""The Groth16 prover (bellperson/Filecoin path), as separate stages on a backend.

Stages (DESIGN §2): prep_msm → H (iNTT, coset NTT, (a·b − c)/Z, coset iNTT, MSM over the
n − 1 H points) → batch additions of the SRS points whose scalar is 1 (L, A, B_G1, B_G2)
→ tail MSMs over the full scalars → b_g2_msm → epilogue with the randomizers r, s:

    A = α₁ + Σ aᵢ·Aᵢ + r·δ₁
    B = β₂ + Σ bᵢ·B₂ᵢ + s·δ₂            (and B₁ = β₁ + Σ bᵢ·B₁ᵢ + s·δ₁ in G1)
    C = s·A + r·B₁ − r·s·δ₁ + H + L

Both backends expose the same stage methods and give the same bytes for the same inputs
and (r, s). The engine schedules the stages; ``prove`` runs them in order.
"""
import secrets
import time

import numpy as np

from ._errors import ProofVerificationError

__all__ = ["CpuStages", "CudaStages", "stages_for", "prove", "prove_partitions",
           "public_inputs", "R_MODULUS"]

R_MODULUS = 0x73eda753299d7d483339d80809a1d80553bda402fffe5bfeffffffff00000001


def _pow2_at_least(m):
    n = 1
    while n < m:
        n <<= 1
    return n


def _nthreads(threads):
    return 0 if threads is None else int(threads)


class CpuStages:
    """The CPU backend's stages (C++ through Cython; every call releases the GIL)."""

    name = "cpu"

    def __init__(self, threads=None):
        self.threads = _nthreads(threads)

    # ---- stage 1 ------------------------------------------------------------------
    def prep_msm(self, asg):
        """Split aux scalars into ones (bitmaps) and full values (tails); see _prep."""
        from ._native import _prep
        return _prep.prep_msm(asg.inputs, asg.aux, asg.a_aux_density.words,
                              asg.b_input_density.words, asg.b_aux_density.words,
                              threads=self.threads)

    # ---- stage 2 ------------------------------------------------------------------
    @staticmethod
    def _padded(v, n):
        out = np.zeros((n, 4), dtype=np.uint64)
        out[: v.shape[0]] = v
        return out

    def h_coeffs(self, asg):
        """Coefficients of h = (a·b − c)/Z, Montgomery uint64 (n, 4), n = domain size."""
        from ._native import _ntt
        n = _pow2_at_least(asg.a.shape[0])
        a, b, c = (self._padded(v, n) for v in (asg.a, asg.b, asg.c))
        _ntt.h_stage(a, b, c, threads=self.threads)
        return a

    def h(self, pk, asg):
        """The H term: Σ hᵢ·Hᵢ over the n − 1 H points (affine G1)."""
        from ._native import _field
        h = self.h_coeffs(asg)
        n = h.shape[0]
        scal = _field.from_mont(h[: n - 1], "fr", threads=self.threads)
        return self.msm_g1(pk.h, scal)

    def msm_g1(self, points, scalars):
        from ._native import _msm
        return _msm.msm(points, scalars, "g1", threads=self.threads)

    # ---- stages 3-5 ---------------------------------------------------------------
    def batch_add(self, points, ones, group):
        from ._native import _msm
        return _msm.batch_add(points, ones, group, threads=self.threads)

    def tail_msm(self, points, scalars, idx, group):
        from ._native import _msm
        return _msm.msm_indexed(points, scalars, idx, group, threads=self.threads)

    def query(self, points, prep, q, group):
        """Σ over one query: batch addition of the ones plus the tail MSM."""
        from ._native import _field
        ones = self.batch_add(points, prep[q + "_ones"], group)
        tail = self.tail_msm(points, prep[q + "_tail_scalars"], prep[q + "_tail_idx"], group)
        return _field.point_add(ones, tail, group)

    def b_g2_msm(self, pk, prep):
        return self.query(pk.b_g2, prep, "b", "g2")

    # ---- stage 6 ------------------------------------------------------------------
    @staticmethod
    def epilogue(vk, parts, r, s):
        """Combine the stage results with (r, s) into the 192-byte proof."""
        from ._native import _field as f
        from ._params import encode_proof
        g_a = f.point_add(f.point_add(vk.alpha_g1, parts["a"], "g1"),
                          f.point_mul(vk.delta_g1, r, "g1"), "g1")
        g_b = f.point_add(f.point_add(vk.beta_g2, parts["b_g2"], "g2"),
                          f.point_mul(vk.delta_g2, s, "g2"), "g2")
        b1 = f.point_add(f.point_add(vk.beta_g1, parts["b_g1"], "g1"),
                         f.point_mul(vk.delta_g1, s, "g1"), "g1")
        g_c = f.point_add(parts["h"], parts["l"], "g1")
        g_c = f.point_add(g_c, f.point_mul(g_a, s, "g1"), "g1")
        g_c = f.point_add(g_c, f.point_mul(b1, r, "g1"), "g1")
        g_c = f.point_add(g_c, f.point_mul(vk.delta_g1, (R_MODULUS - r * s % R_MODULUS) % R_MODULUS,
                                           "g1"), "g1")
        return encode_proof(g_a, g_b, g_c)


class CudaStages(CpuStages):
    """CUDA backend: the H polynomial (NTT family + pointwise) and the G1 MSMs (H, and the tail
    MSMs of L, A, B_G1) run on the GPU; batch additions, the G2 MSM and the epilogue use the
    CPU stages.  Same bytes as the CPU backend."""

    name = "cuda"

    def __init__(self, threads=None, device=0):
        super().__init__(threads)
        self.device = device

    def h_coeffs(self, asg):
        from . import _cuda_ntt
        n = _pow2_at_least(asg.a.shape[0])
        a, b, c = (self._padded(v, n) for v in (asg.a, asg.b, asg.c))
        return _cuda_ntt.h_stage(a, b, c, device=self.device)

    def msm_g1(self, points, scalars):
        from . import _cuda_msm
        return _cuda_msm.msm_g1(points, scalars, device=self.device)

    def tail_msm(self, points, scalars, idx, group):
        if group != "g1":
            return super().tail_msm(points, scalars, idx, group)
        from . import _cuda_msm
        return _cuda_msm.msm_g1_indexed(points, scalars, idx, device=self.device)


def stages_for(backend="auto", threads=None):
    """The stage object of a backend ("auto" picks CUDA when a device is usable)."""
    from ._backend import resolve_backend
    name = resolve_backend(backend)
    return CudaStages(threads) if name == "cuda" else CpuStages(threads)


def public_inputs(asg):
    """The public inputs of an assignment as canonical ints, without the leading 1."""
    from ._native import _field
    can = _field.from_mont(asg.inputs[1:], "fr")
    return [int.from_bytes(row.tobytes(), "little") for row in can]


def _random_scalar():
    return secrets.randbelow(R_MODULUS)


def prove(pk, asg, r=None, s=None, *, backend="auto", threads=None, verify=False,
          timings=None, stages=None):
    """Prove one partition.

    Parameters
    ----------
    pk : ProvingKey
    asg : Assignment
        Validated against ``pk`` first.
    r, s : int or None
        Randomizers in [0, r); ``None`` draws them from a CSPRNG. Fixed values give
        reproducible bytes on every backend.
    backend : {"auto", "cpu", "cuda"}
    threads : int or None
        CPU threads for the CPU stages (None = all cores).
    verify : bool
        Verify the proof with ``pk.vk`` before returning it.
    timings : dict or None
        Filled with per-stage seconds (prep_msm, h, batch_add+tail as l/a/b_g1, b_g2_msm,
        epilogue, total).
    stages : CpuStages or None
        A stage object to reuse (overrides backend/threads).

    Returns
    -------
    bytes
        The 192-byte proof A‖B‖C (compressed, bellperson order).

    Raises
    ------
    ValueError
        The assignment does not fit the parameters.
    ProofVerificationError
        ``verify=True`` and the computed proof does not verify.
    """
    st = stages or stages_for(backend, threads)
    r = _random_scalar() if r is None else int(r)
    s = _random_scalar() if s is None else int(s)
    if not (0 <= r < R_MODULUS and 0 <= s < R_MODULUS):
        raise ValueError("r and s must lie in [0, r)")
    asg.validate(pk)
    t = {} if timings is None else timings
    t0 = time.perf_counter()

    def lap(name, fn, *a):
        s0 = time.perf_counter()
        out = fn(*a)
        t[name] = t.get(name, 0.0) + time.perf_counter() - s0
        return out

    parts = {}
    parts["h"] = lap("h", st.h, pk, asg)
    prep = lap("prep_msm", st.prep_msm, asg)
    parts["l"] = lap("l", st.query, pk.l, prep, "l", "g1")
    parts["a"] = lap("a", st.query, pk.a, prep, "a", "g1")
    parts["b_g1"] = lap("b_g1", st.query, pk.b_g1, prep, "b", "g1")
    parts["b_g2"] = lap("b_g2_msm", st.b_g2_msm, pk, prep)
    proof = lap("epilogue", st.epilogue, pk.vk, parts, r, s)
    if verify:
        from ._verifier import verify as _verify
        if not lap("verify", _verify, pk.vk, proof, public_inputs(asg)):
            raise ProofVerificationError(
                f"{st.name} backend produced a proof that does not verify; not returned")
    t["total"] = time.perf_counter() - t0
    return proof


def prove_partitions(pk, assignments, *, backend="auto", threads=None, verify=False,
                     timings=None):
    """Prove several partitions with one key; returns their proofs concatenated."""
    st = stages_for(backend, threads)
    return b"".join(prove(pk, a, backend=backend, threads=threads, verify=verify,
                          timings=timings, stages=st) for a in assignments)
