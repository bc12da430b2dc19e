"""Host-side steps of keygen and R1CS.assignment, timed one by one (CPU only; the fixed-base
multiplications themselves are not run: on the GPU host they are kernels).

    python bench/keygen_host_steps.py LOG_N [THREADS ...]     # e.g. 22 1 2

Prints one line per step and thread count: seconds.  With ``--old`` it times the steps of the
first keygen (concatenations, bool masks, NumPy zero checks) instead of the current ones.
"""
import sys
import time

import numpy as np

from cuzk._assignment import R_MOD, fr_ints_to_mont
from cuzk._circuit import porep_like
from cuzk._keygen import domain_root_int
from cuzk._native import _r1cs as nat


def _first_zero(arr):
    if arr.shape[0] == 0:
        return -1
    z = np.flatnonzero(~arr.any(axis=1))
    return int(z[0]) if z.size else -1


def old_steps(r1cs, T, tm):
    n, k, nv = r1cs.domain_size, r1cs.n_inputs, r1cs.n_vars
    tau, alpha, beta, gamma, delta = 11, 12, 13, 14, 15
    tau_m, alpha_m, beta_m, omega_m, ginv_m, dinv_m = fr_ints_to_mont(
        [tau, alpha, beta, domain_root_int(n.bit_length() - 1), pow(gamma, -1, R_MOD),
         pow(delta, -1, R_MOD)])
    lag = tm("lagrange_coeffs", nat.lagrange_coeffs, tau_m, omega_m, n, threads=T)
    u, v, w = (tm(f"spmv_t {name}", nat.spmv_t, M.indptr, M.cols, M.vals, lag, nv, threads=T)
               for name, M in (("A", r1cs.A), ("B", r1cs.B), ("C", r1cs.C)))
    ic_s = tm("qap_combine ic", nat.qap_combine, u[:k], v[:k], w[:k], alpha_m, beta_m, ginv_m,
              threads=T)
    l_s = tm("qap_combine l", nat.qap_combine, u[k:], v[k:], w[k:], alpha_m, beta_m, dinv_m,
             threads=T)
    r1cs._densities = None
    da, dbi, dba = tm("densities", r1cs.densities)
    ma, mbi, mba = tm("to_bools x3", lambda: (da.to_bools(), dbi.to_bools(), dba.to_bools()))
    a_s = tm("a_s mask+concat", lambda: np.concatenate([u[:k], u[k:][ma]]))
    b_s = tm("b_s mask+concat", lambda: np.concatenate([v[:k][mbi], v[k:][mba]]))
    h_first = fr_ints_to_mont([5])[0]
    h_s = tm("geometric", nat.geometric, h_first, tau_m, n - 1, threads=T)
    tm("first_zero x4", lambda: [_first_zero(a) for a in (ic_s, l_s, a_s, b_s)])
    vk1 = fr_ints_to_mont([alpha, beta, delta])
    s1 = tm("concat g1 scalars", np.concatenate, [vk1, ic_s, h_s, l_s, a_s, b_s])
    s2 = tm("concat g2 scalars", np.concatenate, [vk1, b_s])
    tm("fr_first_unreduced g1+g2 (cuda path)", lambda: (nat.fr_first_unreduced(s1),
                                                       nat.fr_first_unreduced(s2)))
    return s1, s2


def new_steps(r1cs, T, tm):
    """The steps of cuzk._keygen._exponents, one by one, then the fixed-base pass's host copies
    (a 4M-point G1 chunk through the pool copy, as _cuda_fixed_base does per chunk)."""
    from cuzk._native import _pool
    n, k, nv = r1cs.domain_size, r1cs.n_inputs, r1cs.n_vars
    tau_m, alpha_m, beta_m, omega_m, ginv_m, dinv_m = fr_ints_to_mont(
        [11, 12, 13, domain_root_int(n.bit_length() - 1), pow(14, -1, R_MOD),
         pow(15, -1, R_MOD)])
    r1cs._densities = None
    da, dbi, dba = tm("densities", r1cs.densities)
    n_a, n_bi, n_ba = da.popcount(), dbi.popcount(), dba.popcount()
    sizes = (3, k, n - 1, nv - k, k + n_a, n_bi + n_ba)
    offs = np.cumsum((0,) + sizes).tolist()
    s1 = tm("alloc s1", np.empty, (offs[-1], 4), np.uint64)
    sec = [s1[offs[i]:offs[i + 1]] for i in range(6)]
    lag = tm("lagrange_coeffs", nat.lagrange_coeffs, tau_m, omega_m, n, threads=T)
    u, v, w = (tm(f"spmv_t {name}", nat.spmv_t, M.indptr, M.cols, M.vals, lag, nv, threads=T)
               for name, M in (("A", r1cs.A), ("B", r1cs.B), ("C", r1cs.C)))
    tm("qap_combine ic", nat.qap_combine, u[:k], v[:k], w[:k], alpha_m, beta_m, ginv_m,
       threads=T, out=sec[1])
    tm("qap_combine l", nat.qap_combine, u[k:], v[k:], w[k:], alpha_m, beta_m, dinv_m,
       threads=T, out=sec[3])
    sec[4][:k] = u[:k]
    tm("gather a", nat.gather_rows, u[k:], da.words, nv - k, out=sec[4][k:], threads=T)
    tm("gather b", lambda: (nat.gather_rows(v[:k], dbi.words, k, out=sec[5][:n_bi], threads=T),
                            nat.gather_rows(v[k:], dba.words, nv - k, out=sec[5][n_bi:],
                                            threads=T)))
    tm("geometric", nat.geometric, fr_ints_to_mont([5])[0], tau_m, n - 1, threads=T,
       out=sec[2])
    tm("first_zero x4", lambda: [nat.fr_first_zero(a, threads=T) for a in sec[1:]])
    s2 = np.empty((3 + sizes[5], 4), dtype=np.uint64)
    tm("copy g2 scalars", _pool.copy_into, s2[3:], sec[5], T)
    tm("fr_first_unreduced g1+g2 (cuda path)", lambda: (nat.fr_first_unreduced(s1, threads=T),
                                                       nat.fr_first_unreduced(s2, threads=T)))
    chunk = np.ones((1 << 22, 12), np.uint64)
    dst = np.empty((1 << 22, 12), np.uint64)
    tm("fixed-base host copy, one 4M G1 chunk out (fresh pages)", _pool.copy_into, dst, chunk, T)
    tm("fixed-base host copy, one 4M G1 chunk out (again)", _pool.copy_into, dst, chunk, T)


def assignment_steps(r1cs, inputs, aux, T, tm):
    z = tm("assignment: _z concat", r1cs._z, inputs, aux)
    for name, M in (("A", r1cs.A), ("B", r1cs.B), ("C", r1cs.C)):
        tm(f"assignment: spmv {name}", nat.spmv, M.indptr, M.cols, M.vals, z, threads=T)
    tm("assignment: total", r1cs.assignment, inputs, aux, threads=T)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    log_n = int(args[0])
    threads = [int(a) for a in args[1:]] or [1, 2]
    t0 = time.perf_counter()
    r1cs, inputs, aux = porep_like(log_n)
    print(f"# porep_like({log_n}) {time.perf_counter() - t0:.1f} s: {r1cs}", flush=True)
    for T in threads:
        def tm(name, fn, *a, **kw):
            s = time.perf_counter()
            res = fn(*a, **kw)
            print(f"{log_n}\t{T}\t{name}\t{time.perf_counter() - s:.3f}", flush=True)
            return res
        if "--old" in sys.argv:
            old_steps(r1cs, T, tm)
        else:
            new_steps(r1cs, T, tm)
        assignment_steps(r1cs, inputs, aux, T, tm)


if __name__ == "__main__":
    main()
