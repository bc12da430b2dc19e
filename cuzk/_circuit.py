"""R1CS container, GIL-free sparse products, and the synthetic PoRep-like circuit family.

An :class:`R1CS` holds the three constraint matrices in CSR form over rows (constraints);
columns are variables in the order ``[inputs..., aux...]`` with input 0 the constant 1.
Groth16 as bellperson runs it appends one row per public input (``input_i · 0 = 0``: A holds
input_i, B and C are empty) so that the IC query is fully dense; an R1CS here is always the
COMPLETE system, those rows included (:meth:`R1CS.with_input_rows` appends them), so that
``keygen`` and ``assignment`` see the same rows the prover's ``a, b, c`` have.

:func:`porep_like` builds circuits shaped like one Filecoin PoRep partition (DESIGN §1).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ._assignment import Assignment, Density, R_MOD, fr_ints_to_mont

__all__ = ["CSR", "R1CS", "porep_like", "porep_like_sizes"]

_ONE = fr_ints_to_mont([1])[0]


def _r1cs_native():
    from ._native import _r1cs
    return _r1cs


@dataclasses.dataclass(eq=False)
class CSR:
    """A sparse Fr matrix in compressed-sparse-row form.

    ``indptr`` int64 (m+1,), ``cols`` uint32 (nnz,), ``vals`` uint64 (nnz, 4) Montgomery.
    Row i holds entries ``indptr[i] .. indptr[i+1]-1``.
    """

    indptr: np.ndarray
    cols: np.ndarray
    vals: np.ndarray

    def __post_init__(self):
        self.indptr = np.ascontiguousarray(self.indptr, dtype=np.int64).reshape(-1)
        self.cols = np.ascontiguousarray(self.cols, dtype=np.uint32).reshape(-1)
        self.vals = np.ascontiguousarray(self.vals, dtype=np.uint64)
        if self.indptr.shape[0] < 1:
            raise ValueError("indptr must have at least one entry")
        nnz = self.cols.shape[0]
        if self.vals.ndim != 2 or self.vals.shape != (nnz, 4):
            raise ValueError(f"vals must have shape ({nnz}, 4), got {self.vals.shape}")
        if self.indptr[0] != 0:
            raise ValueError("indptr[0] must be 0")
        if self.indptr[-1] != nnz:
            raise ValueError(f"indptr[-1] = {int(self.indptr[-1])}, expected nnz = {nnz}")
        d = np.diff(self.indptr)
        bad = np.flatnonzero(d < 0)
        if bad.size:
            raise ValueError(f"indptr decreases at row {int(bad[0])}")

    @property
    def n_rows(self) -> int:
        return self.indptr.shape[0] - 1

    @property
    def nnz(self) -> int:
        return self.cols.shape[0]

    @classmethod
    def from_rows(cls, rows) -> "CSR":
        """From a list of rows, each a list of ``(col, value)`` with Python-int values < r."""
        indptr = [0]
        cols, vals = [], []
        for row in rows:
            for c, v in row:
                cols.append(int(c))
                vals.append(int(v) % R_MOD)
            indptr.append(len(cols))
        return cls(np.array(indptr, np.int64), np.array(cols, np.uint32),
                   fr_ints_to_mont(vals) if vals else np.zeros((0, 4), np.uint64))

    def used_columns(self, n_vars: int) -> np.ndarray:
        """Boolean (n_vars,): the variable occurs in some row with a non-zero coefficient."""
        used = np.zeros(n_vars, dtype=bool)
        nz = self.vals.any(axis=1)
        used[self.cols[nz]] = True
        return used


class R1CS:
    """A rank-1 constraint system ``(A·z) ∘ (B·z) = C·z`` over Fr, z = [inputs, aux].

    Parameters
    ----------
    n_inputs : int
        Number of public inputs INCLUDING the constant 1 (input 0).
    n_aux : int
        Number of auxiliary (witness) variables.
    A, B, C : CSR
        Matrices with equal row counts; every column index < n_inputs + n_aux.

    Raises ValueError for inconsistent shapes or out-of-range columns (naming the matrix and
    the first bad entry).
    """

    def __init__(self, n_inputs: int, n_aux: int, A: CSR, B: CSR, C: CSR):
        self.n_inputs, self.n_aux = int(n_inputs), int(n_aux)
        if self.n_inputs < 1:
            raise ValueError("n_inputs must count the constant 1 (>= 1)")
        if self.n_aux < 0:
            raise ValueError("n_aux must be >= 0")
        if self.n_vars >= 2**32:
            raise ValueError("at most 2^32 - 1 variables (uint32 column indices)")
        self.A, self.B, self.C = A, B, C
        m = A.n_rows
        for name, M in (("A", A), ("B", B), ("C", C)):
            if not isinstance(M, CSR):
                raise TypeError(f"{name} must be a CSR")
            if M.n_rows != m:
                raise ValueError(f"{name} has {M.n_rows} rows, A has {m}")
            if M.nnz:
                bad = np.flatnonzero(M.cols >= self.n_vars)
                if bad.size:
                    raise ValueError(f"{name}: entry {int(bad[0])} has column "
                                     f"{int(M.cols[bad[0]])} >= n_vars = {self.n_vars}")
        self._densities = None

    @property
    def n_vars(self) -> int:
        return self.n_inputs + self.n_aux

    @property
    def n_constraints(self) -> int:
        """Rows, including the input rows."""
        return self.A.n_rows

    @property
    def domain_size(self) -> int:
        """next_pow2(n_constraints): the Groth16 evaluation domain."""
        m = max(1, self.n_constraints)
        return 1 << (m - 1).bit_length()

    def __repr__(self):
        return (f"R1CS(n_inputs={self.n_inputs}, n_aux={self.n_aux}, "
                f"constraints={self.n_constraints}, nnz A/B/C={self.A.nnz}/{self.B.nnz}/"
                f"{self.C.nnz})")

    def with_input_rows(self) -> "R1CS":
        """A copy with bellperson's ``input_i · 0 = 0`` rows appended (A = input_i, B = C = 0)."""
        k = self.n_inputs

        def extend(M, diag):
            nnz = M.nnz
            if diag:
                indptr = np.concatenate([M.indptr, nnz + np.arange(1, k + 1, dtype=np.int64)])
                cols = np.concatenate([M.cols, np.arange(k, dtype=np.uint32)])
                vals = np.concatenate([M.vals, np.tile(_ONE, (k, 1))])
            else:
                indptr = np.concatenate([M.indptr, np.full(k, nnz, np.int64)])
                cols, vals = M.cols, M.vals
            return CSR(indptr, cols, vals)

        return R1CS(k, self.n_aux, extend(self.A, True), extend(self.B, False),
                    extend(self.C, False))

    def densities(self):
        """``(a_aux, b_input, b_aux)`` :class:`Density` bit vectors from column usage
        (a variable counts when it occurs with a non-zero coefficient, as bellperson's
        ``DensityTracker``)."""
        if self._densities is None:
            k = self.n_inputs
            ua = self.A.used_columns(self.n_vars)
            ub = self.B.used_columns(self.n_vars)
            self._densities = (Density.from_bools(ua[k:]), Density.from_bools(ub[:k]),
                               Density.from_bools(ub[k:]))
        return self._densities

    def _z(self, inputs, aux) -> np.ndarray:
        inputs = np.ascontiguousarray(inputs, dtype=np.uint64)
        aux = np.ascontiguousarray(aux, dtype=np.uint64)
        if inputs.shape != (self.n_inputs, 4):
            raise ValueError(f"inputs must have shape ({self.n_inputs}, 4), got {inputs.shape}")
        if aux.shape != (self.n_aux, 4):
            raise ValueError(f"aux must have shape ({self.n_aux}, 4), got {aux.shape}")
        if not np.array_equal(inputs[0], _ONE):
            raise ValueError("inputs[0] must be 1 (Montgomery form)")
        return np.concatenate([inputs, aux])

    def evaluate(self, inputs, aux, threads=None):
        """``(A·z, B·z, C·z)`` as three (m, 4) Montgomery arrays (native, GIL released)."""
        z = self._z(inputs, aux)
        nat = _r1cs_native()
        return tuple(nat.spmv(M.indptr, M.cols, M.vals, z, threads=threads)
                     for M in (self.A, self.B, self.C))

    def assignment(self, inputs, aux, threads=None) -> Assignment:
        """The prover input for witness ``(inputs, aux)`` (Montgomery (n, 4) arrays,
        ``inputs[0] = 1``): evaluations and densities."""
        a, b, c = self.evaluate(inputs, aux, threads)
        da, dbi, dba = self.densities()
        return Assignment(a, b, c, np.ascontiguousarray(inputs, dtype=np.uint64),
                          np.ascontiguousarray(aux, dtype=np.uint64), da, dbi, dba)

    def unsatisfied_row(self, inputs, aux, threads=None) -> int:
        """First row i with ``(A·z)_i·(B·z)_i ≠ (C·z)_i``, or -1."""
        a, b, c = self.evaluate(inputs, aux, threads)
        return _r1cs_native().first_unsatisfied(a, b, c, threads=threads)

    def is_satisfied(self, inputs, aux, threads=None) -> bool:
        """Whether ``(inputs, aux)`` satisfies every constraint."""
        return self.unsatisfied_row(inputs, aux, threads) < 0


# ----------------------------------------------------------------------------- PoRep-like

# Shape of a 32 GiB PoRep partition (DESIGN §1), the targets of porep_like.
_A_AUX_DENSITY = 0.997
_B_AUX_DENSITY = 0.254
_P_ZERO, _P_ONE = 0.45, 0.45          # aux values: 45 % zeros, 45 % ones, 10 % full
_A_EXTRA = ([0, 1, 2, 3], [0.2, 0.3, 0.4, 0.1])   # + 1 leading entry: 2.4 per row
_C_EXTRA = ([0, 1, 2, 3], [0.3, 0.3, 0.3, 0.1])   # + 1 pivot: 2.2 per row
_MAX_INPUTS = 328

_R_LIMBS = [(R_MOD >> (64 * i)) & (2**64 - 1) for i in range(4)]
_POW2 = fr_ints_to_mont([1 << j for j in range(1, 64)])  # Montgomery 2^1 .. 2^63


def porep_like_sizes(log_n: int):
    """``(n_inputs, n_aux, n_constraints)`` of ``porep_like(log_n, ·)``.

    n_inputs = min(328, max(2, 2^log_n / 512)) (the constant 1 included); the system has
    2^log_n − 2^log_n/32 rows including the n_inputs input rows (about the 97 % fill of the
    real circuit's 2^27 domain), and as many aux variables as circuit rows.
    """
    if not 4 <= int(log_n) <= 31:
        raise ValueError(f"log_n must be in 4..31, got {log_n}")
    n = 1 << int(log_n)
    k = min(_MAX_INPUTS, max(2, n // 512))
    m_total = n - max(1, n >> 5)
    return k, m_total - k, m_total


def _random_fr(rng, count) -> np.ndarray:
    """Uniform-ish random Fr elements (as Montgomery representations, all < r)."""
    v = rng.integers(0, 2**64, size=(count, 4), dtype=np.uint64, endpoint=False)
    v[:, 3] %= np.uint64(_R_LIMBS[3])  # top limb below r's: value < r
    return v


def _coeffs(rng, count, p_one, p_pow2) -> np.ndarray:
    """Coefficients: 1 (p_one), a power of two 2^1..2^63 (p_pow2), else a full element."""
    out = _random_fr(rng, count)
    u = rng.random(count)
    one = u < p_one
    pw = (~one) & (u < p_one + p_pow2)
    out[one] = _ONE
    out[pw] = _POW2[rng.integers(0, 63, size=int(pw.sum()))]
    return out


def _row_counts_to_indptr(counts) -> np.ndarray:
    indptr = np.zeros(counts.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    return indptr


def porep_like(log_n: int, seed: int = 0,
               threads: int | None = None) -> tuple[R1CS, np.ndarray, np.ndarray]:
    """A synthetic circuit shaped like one Filecoin PoRep partition, with a satisfying witness.

    Shape (the real 32 GiB partition in brackets, DESIGN §1): domain exactly 2^log_n with
    ~97 % of it used; aux variables = circuit rows; A touches 99.7 % of aux variables
    [99.7 %] with 2.4 entries per row [2.4]; B touches 25.4 % [25.4 %] with 1 entry per row
    [1.0]; C has 2.2 entries per row [2.2]; aux values 45 % zeros, 45 % ones, 10 % full field
    elements [~90 % bits]; n_inputs = min(328, max(2, 2^log_n/512)) public inputs (full
    field elements) [328]; bellperson's input rows included.  Coefficients are 1 (60 %),
    small powers of two (20 %) or full elements (20 %), except each C row's first entry,
    which is solved for so the row holds (its variable has value 1).

    Deterministic in ``(log_n, seed)`` for a given NumPy version (NumPy may change a
    ``Generator`` method's stream between feature releases; anything cached by seed should
    also key on ``numpy.__version__``).  Vectorized NumPy plus native sparse products, so
    2^20 takes seconds.

    Returns ``(r1cs, inputs, aux)`` with Montgomery (n, 4) arrays, ``inputs[0] = 1``.
    """
    k, n_aux, m_total = porep_like_sizes(log_n)
    m_c = m_total - k
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), int(log_n)])))

    # ---- witness
    u = rng.random(n_aux)
    aux = _random_fr(rng, n_aux)
    aux[u < _P_ZERO] = 0
    ones = (u >= _P_ZERO) & (u < _P_ZERO + _P_ONE)
    ones[0] = True                      # at least one 1-valued variable for the C pivots
    aux[ones] = _ONE
    inputs = _random_fr(rng, k)
    inputs[0] = _ONE
    z = np.concatenate([inputs, aux])
    one_vars = np.flatnonzero(ones).astype(np.uint32) + np.uint32(k)

    # ---- variable sets
    perm = rng.permutation(n_aux)
    n_excl = min(n_aux - 1, int(round((1 - _A_AUX_DENSITY) * n_aux)))
    excluded = perm[:n_excl]              # aux variables absent from A
    a_set = perm[n_excl:].astype(np.uint32) + np.uint32(k)
    n_b = max(1, int(round(_B_AUX_DENSITY * n_aux)))
    b_set = rng.choice(n_aux, size=n_b, replace=False).astype(np.uint32) + np.uint32(k)

    # ---- A: a leading entry that covers the A set, then extras from the A set (2 % inputs)
    extra = rng.choice(_A_EXTRA[0], size=m_c, p=_A_EXTRA[1])
    counts = np.concatenate([1 + extra, np.ones(k, np.int64)])
    indptr = _row_counts_to_indptr(counts)
    nnz = int(indptr[-1])
    cols = a_set[rng.integers(0, a_set.shape[0], size=nnz)]
    to_input = rng.random(nnz) < 0.02
    cols[to_input] = rng.integers(0, k, size=int(to_input.sum()), dtype=np.uint32)
    lead = np.concatenate([a_set, a_set[rng.integers(0, a_set.shape[0], size=m_c - a_set.shape[0])]])
    cols[indptr[:m_c]] = rng.permutation(lead)
    cols[indptr[m_c:-1]] = np.arange(k, dtype=np.uint32)      # input rows: A = input_i
    vals = _coeffs(rng, nnz, 0.6, 0.2)
    vals[indptr[m_c:-1]] = _ONE
    A = CSR(indptr, cols, vals)

    # ---- B: one entry per circuit row: each B-set variable once, else the constant 1,
    # and about half of the other inputs once each
    counts = np.concatenate([np.ones(m_c, np.int64), np.zeros(k, np.int64)])
    indptr = _row_counts_to_indptr(counts)
    rows = rng.permutation(m_c)
    cols = np.zeros(m_c, dtype=np.uint32)
    cols[rows[:n_b]] = b_set
    in_b = np.flatnonzero(rng.random(k - 1) < 0.5).astype(np.uint32) + np.uint32(1)
    in_b = in_b[: max(0, m_c - n_b)]
    cols[rows[n_b:n_b + in_b.shape[0]]] = in_b
    vals = _coeffs(rng, m_c, 0.8, 0.1)
    B = CSR(indptr, cols, vals)

    # ---- C: a pivot (a 1-valued aux variable) and extras; each A-excluded variable is
    # appended to one row so every variable is constrained
    extra = rng.choice(_C_EXTRA[0], size=m_c, p=_C_EXTRA[1])
    ex_rows = rng.choice(m_c, size=n_excl, replace=False) if n_excl else np.zeros(0, np.int64)
    extra[ex_rows] += 1
    counts = np.concatenate([1 + extra, np.zeros(k, np.int64)])
    indptr = _row_counts_to_indptr(counts)
    nnz = int(indptr[-1])
    cols = (rng.integers(0, n_aux, size=nnz) + k).astype(np.uint32)
    cols[indptr[ex_rows + 1] - 1] = excluded.astype(np.uint32) + np.uint32(k)
    cols[indptr[:m_c]] = one_vars[rng.integers(0, one_vars.shape[0], size=m_c)]
    vals = _coeffs(rng, nnz, 0.6, 0.2)
    C = CSR(indptr, cols, vals)

    nat = _r1cs_native()
    a = nat.spmv(A.indptr, A.cols, A.vals, z, threads=threads)
    b = nat.spmv(B.indptr, B.cols, B.vals, z, threads=threads)
    nat.fix_pivots(C.indptr, C.cols, C.vals, z, a, b, threads=threads)
    return R1CS(k, n_aux, A, B, C), inputs, aux
