"""Groth16 parameter generation (test and benchmark circuits), compatible with bellperson.

The result is what bellperson's ``generate_parameters`` (``src/groth16/generator.rs``) makes
for the same circuit and toxic waste, with the standard generators as g1, g2:

- ``H_i = τ^i·Z(τ)/δ · G1`` for i < n−1, Z(τ) = τ^n − 1, n = next_pow2(constraints);
- ``IC_j = (β·u_j(τ) + α·v_j(τ) + w_j(τ))/γ · G1`` for the inputs, ``L_j`` the same over δ for
  the aux variables, where u_j, v_j, w_j are the QAP polynomials of column j of A, B, C
  (Σ over rows i of coeff·L_i(τ), L_i the Lagrange basis of the domain <ω>, ω = 7^((r−1)/n)
  as bellperson and cuzk's NTT);
- ``A = u_j(τ)·G1`` for every input, then for the aux variables in A (a_aux density);
  ``B_G1 / B_G2 = v_j(τ)·G`` for the inputs in B (b_input density), then the aux variables in
  B (b_aux density).  bellperson filters A/B points at infinity (u_j(τ) = 0) while its prover
  selects by density (the variable occurs in the matrix); the two agree except when
  u_j(τ) = 0 for a variable that occurs, which happens with probability ~1/r — we raise then;
  likewise for an IC/L point at infinity (bellperson: ``UnconstrainedVariable``).
- vk: α·G1, β·G1, β·G2, γ·G2, δ·G1, δ·G2, IC.

Cost: 3 transposed sparse products, one batch inversion (Lagrange basis) and one
fixed-base batch multiplication per group (about n + n_aux + |A| + |B| G1 points and |B| G2
points), all native and multithreaded.
"""
from __future__ import annotations

import random
import secrets

import numpy as np

from typing import TYPE_CHECKING

from ._assignment import R_MOD, fr_ints_to_mont
from ._constants import fr_root_of_unity
from ._params import ProvingKey, VerifyingKey

if TYPE_CHECKING:  # annotations only
    from ._circuit import R1CS
    from ._progress import Progress

__all__ = ["KEYGEN_STEPS", "keygen", "keygen_random", "domain_root_int"]


def domain_root_int(log_n: int) -> int:
    """ω of order 2^log_n: 7^((r−1)/2^log_n) mod r (bellperson / blstrs convention)."""
    return fr_root_of_unity(log_n)


def _check_waste(**vals):
    for name, v in vals.items():
        if not isinstance(v, int) or isinstance(v, bool):
            raise TypeError(f"{name} must be an int")
        if not 0 < v < R_MOD:
            raise ValueError(f"{name} must be in [1, r)")


KEYGEN_STEPS = 4  # progress ticks: QAP evaluations, checks, G1 fixed-base pass, G2 pass


def _fixed_base_pass(group, scalars_mont, backend, threads):
    """k_i·G for the group generator G and Montgomery scalars k_i: affine Montgomery points.
    ``backend`` "cuda" runs it on the GPU (window table of G in device memory), else the CPU;
    both give the same bytes."""
    from ._native import _r1cs as nat
    if backend == "cuda":
        from . import _cuda_fixed_base
        return _cuda_fixed_base.fixed_base_mul(None, scalars_mont, group, montgomery=True,
                                               threads=threads)
    return nat.fixed_base_mul(group, scalars_mont, threads=threads)


def _exponents(r1cs: R1CS, tau: int, alpha: int, beta: int, gamma: int, delta: int,
               threads: int | None = None, tick=lambda n=1: None):
    """The Fr exponents (Montgomery) of every key point: ``(s1, s2, sizes)`` with s1 the G1
    rows ``[α, β, δ | IC | H | L | A | B_G1]``, s2 the G2 rows ``[β, γ, δ | B_G2]`` and
    ``sizes`` the lengths of s1's six sections.  Each section is written in place into s1 by
    the native kernels (no concatenated copies); raises ValueError as :func:`keygen`."""
    from ._native import _pool
    from ._native import _r1cs as nat

    n = r1cs.domain_size
    log_n = n.bit_length() - 1
    k = r1cs.n_inputs
    nv = r1cs.n_vars
    w_int = domain_root_int(log_n)
    tau_m, alpha_m, beta_m, omega_m, ginv_m, dinv_m = fr_ints_to_mont(
        [tau, alpha, beta, w_int, pow(gamma, -1, R_MOD), pow(delta, -1, R_MOD)])
    da, dbi, dba = r1cs.densities()
    n_a, n_bi, n_ba = da.popcount(), dbi.popcount(), dba.popcount()
    sizes = (3, k, n - 1, nv - k, k + n_a, n_bi + n_ba)
    offs = np.cumsum((0,) + sizes).tolist()
    s1 = np.empty((offs[-1], 4), dtype=np.uint64)
    sec = [s1[offs[i]:offs[i + 1]] for i in range(6)]     # views: vk, ic, h, l, a, b

    # QAP evaluations at τ
    lag = nat.lagrange_coeffs(tau_m, omega_m, n, threads=threads)
    u, v, w = (nat.spmv_t(M.indptr, M.cols, M.vals, lag, nv, threads=threads)
               for M in (r1cs.A, r1cs.B, r1cs.C))
    del lag
    sec[0][:] = fr_ints_to_mont([alpha, beta, delta])
    nat.qap_combine(u[:k], v[:k], w[:k], alpha_m, beta_m, ginv_m, threads=threads, out=sec[1])
    nat.qap_combine(u[k:], v[k:], w[k:], alpha_m, beta_m, dinv_m, threads=threads, out=sec[3])
    del w
    sec[4][:k] = u[:k]
    nat.gather_rows(u[k:], da.words, nv - k, out=sec[4][k:], threads=threads)
    del u
    nat.gather_rows(v[:k], dbi.words, k, out=sec[5][:n_bi], threads=threads)
    nat.gather_rows(v[k:], dba.words, nv - k, out=sec[5][n_bi:], threads=threads)
    del v
    zt = (pow(tau, n, R_MOD) - 1) % R_MOD
    h_first = fr_ints_to_mont([zt * pow(delta, -1, R_MOD) % R_MOD])[0]
    nat.geometric(h_first, tau_m, n - 1, threads=threads, out=sec[2])
    tick()

    for what, arr in (("IC", sec[1]), ("L", sec[3])):
        i = nat.fr_first_zero(arr, threads=threads)
        if i >= 0:
            raise ValueError(f"{what}[{i}] is the point at infinity: the variable is "
                             "unconstrained (or the toxic waste is degenerate)")
    for what, arr in (("A", sec[4]), ("B", sec[5])):
        i = nat.fr_first_zero(arr, threads=threads)
        if i >= 0:
            raise ValueError(f"{what} query entry {i}: QAP evaluation is 0 at tau for a "
                             "variable that occurs in the matrix; choose other toxic waste")

    s2 = np.empty((3 + sizes[5], 4), dtype=np.uint64)
    s2[:3] = fr_ints_to_mont([beta, gamma, delta])
    _pool.copy_into(s2[3:], sec[5], threads)
    return s1, s2, sizes


def keygen(r1cs: R1CS, tau: int, alpha: int, beta: int, gamma: int, delta: int,
           threads: int | None = None, progress: Progress | None = None,
           backend: str = "cpu") -> ProvingKey:
    """Groth16 proving key for ``r1cs`` (a :class:`cuzk._circuit.R1CS` that includes
    bellperson's input rows) from toxic waste given as Python ints in [1, r).

    Raises ValueError when τ lies in the evaluation domain, or when a variable is
    unconstrained (IC/L point at infinity) or occurs in A/B with a QAP evaluation of zero
    at τ (choose other toxic waste).  ``progress`` (e.g. a :class:`cuzk._progress.Progress`
    of ``KEYGEN_STEPS``) has ``update()`` called after each step.  ``backend`` ("cpu", "cuda",
    "auto") runs the fixed-base multiplications (most of the time at large sizes) on the GPU
    when it resolves to "cuda"; the QAP evaluation stays on the CPU threads; same bytes.
    """
    from ._backend import resolve_backend
    backend = resolve_backend(backend)

    tick = progress.update if progress is not None else (lambda n=1: None)

    _check_waste(tau=tau, alpha=alpha, beta=beta, gamma=gamma, delta=delta)
    s1, s2, sizes = _exponents(r1cs, tau, alpha, beta, gamma, delta, threads, tick)
    tick()
    # one fixed-base pass per group; the ProvingKey arrays are row slices of its output
    g1 = _fixed_base_pass("g1", s1, backend, threads)
    del s1
    tick()
    g2 = _fixed_base_pass("g2", s2, backend, threads)
    tick()
    offs = np.cumsum((0,) + sizes).tolist()
    sl = [g1[offs[i]:offs[i + 1]] for i in range(6)]
    vk = VerifyingKey(alpha_g1=sl[0][0], beta_g1=sl[0][1], beta_g2=g2[0], gamma_g2=g2[1],
                      delta_g1=sl[0][2], delta_g2=g2[2], ic=sl[1])
    return ProvingKey(vk, h=sl[2], l=sl[3], a=sl[4], b_g1=sl[5], b_g2=g2[3:])


def keygen_random(r1cs: R1CS, seed: int | None = None, threads: int | None = None,
                  progress: Progress | None = None, backend: str = "cpu") -> ProvingKey:
    """:func:`keygen` with toxic waste drawn uniformly from [1, r): from the OS CSPRNG, or,
    when ``seed`` is given, deterministically from it (test and benchmark parameters only)."""
    rng = secrets.SystemRandom() if seed is None else random.Random(f"cuzk-keygen-{seed}")
    n = r1cs.domain_size
    while True:
        tau, alpha, beta, gamma, delta = (rng.randrange(1, R_MOD) for _ in range(5))
        if pow(tau, n, R_MOD) != 1:
            break
    return keygen(r1cs, tau, alpha, beta, gamma, delta, threads=threads, progress=progress,
                  backend=backend)
