"""The CPU backend's stages: C++ through Cython, every heavy call without the GIL, synchronous.

``run`` computes H, the H MSM, and the L, A, B_G1 queries (batch addition of the ones plus the
tail MSM); ``finish`` computes the B_G2 query (the G2 work that the GPU backend may leave on
the CPU, outside the engine's kernel lock), the epilogue, and verifies.  This backend is the
byte-exact reference of every other one.
"""
from __future__ import annotations

import numpy as np

from .._cuda_pending import ReadyPoint
from ._base import Completed, HostKey, Stages

__all__ = ["CpuStages", "pow2_at_least", "padded", "host_partition_bytes"]


def pow2_at_least(m: int) -> int:
    """The least power of two >= m (>= 1)."""
    return 1 << max(0, int(m) - 1).bit_length()


def padded(v, n):
    """uint64 (n, 4): ``v`` followed by zero rows."""
    out = np.zeros((n, 4), dtype=np.uint64)
    out[: v.shape[0]] = v
    return out


def host_partition_bytes(asg) -> int:
    """Host bytes a partition's stage buffers take beyond its assignment: the padded a, b, c
    copies of the H stage and the prep_msm output (bitmaps + at most every aux scalar twice)."""
    n = pow2_at_least(asg.a.shape[0])
    return 3 * n * 32 + 2 * asg.aux.shape[0] * 40 + 3 * (asg.aux.shape[0] // 8 + 8)


class CpuStages(Stages):
    """The CPU backend (see the module docstring).

    Parameters
    ----------
    threads : int or None
        CPU threads per call (None/0 = all cores); a context may override it.
    """

    name = "cpu"

    # ---- keys ---------------------------------------------------------------------------
    def load_key(self, pk, budget=None, progress=None, lasting=True, partitions=1):
        """The CPU uses the key where it is; with a budget its host bytes are reserved."""
        res = None
        if budget is not None:
            res = budget.reserve(_key_bytes(pk), "proving key (host)", lasting=True)
        return HostKey(pk, res)

    # ---- stage bodies (also used by the CUDA backend where it runs a stage on the CPU) --
    def _t(self, threads):
        return self.threads if threads is None else threads

    #: form of the tail scalars prep_msm hands the tail MSMs (the CPU MSM reads canonical ones)
    tail_form = "canonical"

    def prep_msm(self, asg, threads=None):
        """Split aux scalars into ones (bitmaps) and full values (tails, in ``tail_form``); see
        ``_prep``."""
        from .._native import _prep
        threads = self._t(threads)
        return _prep.prep_msm(asg.inputs, asg.aux, asg.a_aux_density.words,
                              asg.b_input_density.words, asg.b_aux_density.words,
                              threads=threads, form=self.tail_form)

    def h_coeffs(self, asg, threads=None):
        """Coefficients of h = (a·b − c)/Z, Montgomery uint64 (n, 4), n = domain size."""
        from .._native import _ntt
        threads = self._t(threads)
        n = pow2_at_least(asg.a.shape[0])
        a, b, c = (padded(v, n) for v in (asg.a, asg.b, asg.c))
        _ntt.h_stage(a, b, c, threads=threads)
        return a

    def h(self, pk, asg, threads=None):
        """The H term: Σ hᵢ·Hᵢ over the n − 1 H points (affine G1)."""
        from .._native import _field, _msm
        threads = self._t(threads)
        h = self.h_coeffs(asg, threads)
        scal = _field.from_mont(h[: h.shape[0] - 1], "fr", threads=threads)
        return _msm.msm(pk.h, scal, "g1", threads=threads)

    def query(self, points, prep, q, group, threads=None):
        """Σ over one query: batch addition of the ones plus the tail MSM."""
        from .._native import _field, _msm
        threads = self._t(threads)
        ones = _msm.batch_add(points, prep[q + "_ones"], group, threads=threads)
        tail = _msm.msm_indexed(points, prep[q + "_tail_scalars"], prep[q + "_tail_idx"], group,
                                threads=threads)
        return _field.point_add(ones, tail, group)

    def msm(self, points, scalars, group, threads=None):
        """Σ scalars[i]·points[i] (canonical scalars uint64 (n, 4)): affine Montgomery."""
        from .._native import _msm
        return _msm.msm(points, scalars, group, threads=self._t(threads))

    def snarkjs_h(self, a, b, c, root_exponent, threads=None):
        """snarkjs's H scalars (canonical uint64 (n, 4)) from its A·w, B·w, C vectors."""
        from .._native import _sparse
        return _sparse.snarkjs_h(a, b, c, root_exponent, threads=self._t(threads))

    def b_g2_msm(self, pk, prep, threads=None):
        """The B_G2 query (G2): batch addition of the ones plus the tail MSM."""
        return self.query(pk.b_g2, prep, "b", "g2", threads)

    # ---- the four calls -----------------------------------------------------------------
    def _stage_in(self, part):
        """The CPU's ``upload``: reserve the partition's host buffers from the context's budget."""
        ctx = part.ctx
        if ctx.budget is not None:
            part.reservations.append(ctx.budget.reserve(host_partition_bytes(part.asg),
                                                        f"{ctx.name}: partition buffers"))

    def run(self, part):
        pk, asg, t, prep = part.key.pk, part.asg, part.ctx.threads, part.prep
        p = part.parts
        p["h"] = ReadyPoint(part.lap("h", self.h, pk, asg, t))
        p["l"] = ReadyPoint(part.lap("l", self.query, pk.l, prep, "l", "g1", t))
        p["a"] = ReadyPoint(part.lap("a", self.query, pk.a, prep, "a", "g1", t))
        p["b_g1"] = ReadyPoint(part.lap("b_g1", self.query, pk.b_g1, prep, "b", "g1", t))
        part.done = Completed()
        return part.done

    def finish(self, part, verify=True) -> bytes:
        try:
            if "b_g2" not in part.parts:
                part.parts["b_g2"] = ReadyPoint(part.lap(
                    "b_g2", self.query, part.key.pk.b_g2, part.prep, "b", "g2", part.ctx.threads))
            points = {k: v.value() for k, v in part.parts.items()}
            return self._epilogue_and_verify(part, points, verify)
        finally:
            part.release()


def _key_bytes(pk) -> int:
    return sum(int(getattr(pk, q).nbytes) for q in ("h", "l", "a", "b_g1", "b_g2"))
