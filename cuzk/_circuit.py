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
import os

import numpy as np

from ._assignment import Assignment, Density, R_MOD, fr_ints_to_mont

__all__ = ["CSR", "R1CS", "POREP_LIKE_VERSION", "porep_like", "porep_like_sizes"]

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
        bad = np.flatnonzero(self.indptr[1:] < self.indptr[:-1])
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
            if M.nnz and int(M.cols.max()) >= self.n_vars:
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
            k, nv, nat = self.n_inputs, self.n_vars, _r1cs_native()

            def bits(M, lo, hi):   # native, parallel; the bits of CSR.used_columns
                return Density(nat.column_bits(M.cols, M.vals, lo, hi), hi - lo)

            self._densities = (bits(self.A, k, nv), bits(self.B, 0, k), bits(self.B, k, nv))
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
        z = inputs.base       # two adjacent views of one [inputs, aux] array (porep_like's):
        if (isinstance(z, np.ndarray) and z is aux.base and z.dtype == np.uint64   # no copy
                and z.shape == (self.n_vars, 4) and z.flags.c_contiguous
                and inputs.ctypes.data == z.ctypes.data
                and aux.ctypes.data == z.ctypes.data + inputs.nbytes):
            return z
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
# Montgomery 1, 2^1 .. 2^63: a coefficient's "code" indexes this table
_COEF_TABLE = np.concatenate([_ONE[None], fr_ints_to_mont([1 << j for j in range(1, 64)])])

#: Version of porep_like's construction and random stream; anything cached by ``(log_n, seed)``
#: keys on it (and on NumPy's feature version), so a circuit from another version is never
#: picked up.  2: parallel chunks (``_SEL_CHUNK``) with their own generators.
POREP_LIKE_VERSION = 2
# Aux variables and circuit rows are cut into chunks of _SEL_CHUNK (the last takes the
# remainder: _SEL_CHUNK .. 2·_SEL_CHUNK − 1) for the variable sets, and into blocks of
# _FILL_BLOCK rows for the columns and coefficients; each chunk and block draws from its own
# generator, so the circuit depends on these constants, never on the thread count.
_SEL_CHUNK = 1 << 20
_FILL_BLOCK = 1 << 17


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


def _u32_threshold(p: float) -> np.uint64:
    return np.uint64(int(round(p * 2**32)))


def _random_fr(rng, count) -> np.ndarray:
    """Uniform-ish random Fr elements (as Montgomery representations, all < r)."""
    v = rng.bit_generator.random_raw(4 * count).reshape(count, 4)
    v[:, 3] %= np.uint64(_R_LIMBS[3])  # top limb below r's: value < r
    return v


def _coeffs_into(rng, out, p_one, p_pow2):
    """Fill ``out`` (count, 4) with coefficients: 1 (p_one), a power of two 2^1..2^63
    (p_pow2), else a full element.  One raw draw per coefficient picks both its kind (high
    32 bits) and its power (low 32 bits)."""
    count = out.shape[0]
    raw = rng.bit_generator.random_raw(count)
    kind = raw >> np.uint64(32)
    code = (((raw & np.uint64(0xFFFFFFFF)) * np.uint64(63)) >> np.uint64(32)) + np.uint64(1)
    code[kind < _u32_threshold(p_one)] = 0
    np.take(_COEF_TABLE, code.view(np.intp), axis=0, out=out, mode="wrap")  # unbuffered
    full = np.flatnonzero(kind >= _u32_threshold(p_one + p_pow2))
    out[full] = _random_fr(rng, full.shape[0])


def _categorical(rng, count, spec) -> np.ndarray:
    """``count`` draws from ``spec = (values, probabilities)`` (values 0, 1, 2, ...), int8."""
    u = rng.bit_generator.random_raw(count) >> np.uint64(32)
    out = np.zeros(count, np.int8)
    for c in np.cumsum(spec[1])[:-1]:
        out += u >= _u32_threshold(c)
    return out


def _quota(lo, hi, p) -> int:
    """Items of ``[lo, hi)``'s share when a fraction p of ``[0, n)`` is picked chunk by chunk."""
    return int(round(hi * p)) - int(round(lo * p))


def _chunks(n):
    """``[(lo, hi), ...]``: [0, n) cut at multiples of _SEL_CHUNK, the remainder in the last."""
    cuts = list(range(0, max(1, n // _SEL_CHUNK) * _SEL_CHUNK, _SEL_CHUNK)) + [n]
    return list(zip(cuts[:-1], cuts[1:]))


def _run_chunks(fn, n_chunks, threads):
    """``[fn(0), ..., fn(n_chunks − 1)]`` on up to ``threads`` Python threads (None = all
    cores; NumPy's generator fills, ufuncs and indexing release the GIL).  The last item (the
    largest chunk) starts first."""
    from ._args import threads_arg
    t = min(threads_arg(threads) or (os.cpu_count() or 1), n_chunks)
    order = range(n_chunks - 1, -1, -1)
    if t <= 1:
        out = {c: fn(c) for c in order}
    else:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(max_workers=t) as ex:
            out = dict(zip(order, ex.map(fn, order)))
    return [out[c] for c in range(n_chunks)]


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

    Rows and aux variables go in chunks of 2^20 (the last takes the remainder): a chunk's
    A-excluded and B variables (exact shares of the totals) are placed in its own rows, its
    A leading entries are a random permutation of its A variables (plus repeats); the A extras,
    C entries and C pivots are drawn from all variables.  Each chunk, and each block of 2^17
    rows of the column/coefficient pass, has its own generator (``SeedSequence([seed, log_n],
    spawn_key=(pass, index))``), so the result is the same for any ``threads``.

    Deterministic in ``(log_n, seed)`` for a given :data:`POREP_LIKE_VERSION` and NumPy
    version (NumPy may change a ``Generator`` method's stream between feature releases;
    anything cached by seed keys on both).  Chunks run on ``threads`` Python threads (None =
    all cores), the sparse products natively.

    Returns ``(r1cs, inputs, aux)`` with Montgomery (n, 4) arrays, ``inputs[0] = 1`` (two
    views of one ``[inputs, aux]`` array).
    """
    k, n_aux, m_total = porep_like_sizes(log_n)
    m_c = m_total - k                     # circuit rows; == n_aux, so one chunking serves both
    assert _SEL_CHUNK % _FILL_BLOCK == 0, "fill blocks must nest in chunks"
    seed, log_n = int(seed), int(log_n)
    chunks = _chunks(m_c)

    def gen(stream, c):
        ss = np.random.SeedSequence([seed, log_n], spawn_key=(stream, c))
        return np.random.Generator(np.random.PCG64(ss))

    p_excl = 1 - _A_AUX_DENSITY
    n_excl = _quota(0, n_aux, p_excl)
    n_a = n_aux - n_excl
    kk = np.uint32(k)

    z = np.zeros((k + n_aux, 4), np.uint64)   # [inputs, aux]: returned as two views
    inputs, aux = z[:k], z[k:]
    a_set = np.empty(n_a, np.uint32)       # aux variables in A (column indices), ascending
    lead = np.empty(m_c, np.uint32)        # A's leading column per circuit row
    b_cols = np.zeros(m_c, np.uint32)      # B's one column per circuit row (0: the constant 1)
    c_ex = np.zeros(m_c, np.uint32)        # an A-excluded variable appended to this C row, or 0
    a_cnt = np.empty(m_c, np.int8)         # entries per circuit row (1 .. 5)
    c_cnt = np.empty(m_c, np.int8)
    t_zero, t_one = _u32_threshold(_P_ZERO), _u32_threshold(_P_ZERO + _P_ONE)

    # ---- pass 1, per chunk: witness, variable sets, A leads, B columns, row counts
    def select(c):
        lo, hi = chunks[c]
        n = hi - lo
        rng = gen(1, c)
        kind = rng.bit_generator.random_raw(n) >> np.uint64(32)
        if c == 0:
            kind[0] = t_zero              # at least one 1-valued variable for the C pivots
        ones = np.flatnonzero((kind >= t_zero) & (kind < t_one))
        full = np.flatnonzero(kind >= t_one)
        w = aux[lo:hi]
        w[ones] = _ONE
        w[full] = _random_fr(rng, full.shape[0])
        one_vars = ones.astype(np.uint32) + np.uint32(k + lo)

        e = _quota(lo, hi, p_excl)
        excl = rng.choice(n, size=e, replace=False)
        in_a = np.ones(n, bool)
        in_a[excl] = False
        mine = np.flatnonzero(in_a).astype(np.uint32) + np.uint32(k + lo)
        a0 = lo - _quota(0, lo, p_excl)
        a_set[a0:a0 + mine.shape[0]] = mine
        lead[lo:hi] = rng.permutation(
            np.concatenate([mine, mine[rng.integers(0, mine.shape[0], size=e)]]))

        nb = _quota(lo, hi, _B_AUX_DENSITY)
        b_vars = rng.choice(n, size=nb, replace=False)
        b_rows = rng.choice(n, size=nb, replace=False)
        b_cols[lo + b_rows] = b_vars.astype(np.uint32) + np.uint32(k + lo)

        ex_rows = rng.choice(n, size=e, replace=False)
        c_ex[lo + ex_rows] = excl.astype(np.uint32) + np.uint32(k + lo)
        a_cnt[lo:hi] = 1 + _categorical(rng, n, _A_EXTRA)
        c_cnt[lo:hi] = 1 + _categorical(rng, n, _C_EXTRA) + (c_ex[lo:hi] != 0)
        starts = np.arange(0, n, _FILL_BLOCK)
        return (one_vars, np.add.reduceat(a_cnt[lo:hi], starts, dtype=np.int64),
                np.add.reduceat(c_cnt[lo:hi], starts, dtype=np.int64))

    res = _run_chunks(select, len(chunks), threads)
    one_vars = np.concatenate([r[0] for r in res])
    a_off = np.concatenate([[0]] + [r[1] for r in res]).cumsum()   # per fill block
    c_off = np.concatenate([[0]] + [r[2] for r in res]).cumsum()
    n_blocks = a_off.shape[0] - 1
    nnz_a, nnz_c = int(a_off[-1]), int(c_off[-1])

    inputs[:] = _random_fr(gen(0, 0), k)
    inputs[0] = _ONE
    # about half of the other inputs once each in B, in free rows of the first chunk
    rng0 = gen(0, 1)
    in_b = np.flatnonzero(rng0.random(k - 1) < 0.5).astype(np.uint32) + np.uint32(1)
    free = np.flatnonzero(b_cols[:chunks[0][1]] == 0)
    in_b = in_b[:free.shape[0]]
    b_cols[free[rng0.choice(free.shape[0], size=in_b.shape[0], replace=False)]] = in_b

    a_indptr = np.empty(m_total + 1, np.int64)
    a_cols = np.empty(nnz_a + k, np.uint32)
    a_vals = np.empty((nnz_a + k, 4), np.uint64)
    b_indptr = np.empty(m_total + 1, np.int64)
    b_vals = np.empty((m_c, 4), np.uint64)
    c_indptr = np.empty(m_total + 1, np.int64)
    c_cols = np.empty(nnz_c, np.uint32)
    c_vals = np.empty((nnz_c, 4), np.uint64)
    a_indptr[0] = b_indptr[0] = c_indptr[0] = 0

    # ---- pass 2, per block of rows: indptr, columns and coefficients
    def fill(j):
        lo, hi = j * _FILL_BLOCK, min(m_c, (j + 1) * _FILL_BLOCK)
        rng = gen(2, j)
        ipa = np.empty(hi - lo + 1, np.int64)     # this block's indptr (row lo's start is
        ipc = np.empty(hi - lo + 1, np.int64)     # also the previous block's end: not shared)
        ipa[0], ipc[0] = a_off[j], c_off[j]
        np.cumsum(a_cnt[lo:hi], dtype=np.int64, out=ipa[1:])
        np.cumsum(c_cnt[lo:hi], dtype=np.int64, out=ipc[1:])
        ipa[1:] += ipa[0]
        ipc[1:] += ipc[0]
        a_indptr[lo + 1:hi + 1] = ipa[1:]
        c_indptr[lo + 1:hi + 1] = ipc[1:]
        # A: extras from the A set (2 % inputs), then the leading entries
        e0, e1 = int(ipa[0]), int(ipa[-1])
        cols = a_set[rng.integers(0, n_a, size=e1 - e0)]
        to_input = np.flatnonzero(rng.random(e1 - e0) < 0.02)
        cols[to_input] = rng.integers(0, k, size=to_input.shape[0], dtype=np.uint32)
        cols[ipa[:-1] - e0] = lead[lo:hi]
        a_cols[e0:e1] = cols
        _coeffs_into(rng, a_vals[e0:e1], 0.6, 0.2)
        # B: one entry per row (its column set in pass 1)
        b_indptr[lo + 1:hi + 1] = np.arange(lo + 1, hi + 1)
        _coeffs_into(rng, b_vals[lo:hi], 0.8, 0.1)
        # C: a pivot (a 1-valued variable), extras from all aux, the excluded one last
        e0, e1 = int(ipc[0]), int(ipc[-1])
        cols = rng.integers(0, n_aux, size=e1 - e0, dtype=np.uint32) + kk
        ex = np.flatnonzero(c_ex[lo:hi])
        cols[ipc[1:][ex] - 1 - e0] = c_ex[lo:hi][ex]
        cols[ipc[:-1] - e0] = one_vars[rng.integers(0, one_vars.shape[0], size=hi - lo)]
        c_cols[e0:e1] = cols
        _coeffs_into(rng, c_vals[e0:e1], 0.6, 0.2)

    _run_chunks(fill, n_blocks, threads)

    # the input rows: A = input_i, B = C = 0
    a_indptr[m_c + 1:] = nnz_a + np.arange(1, k + 1, dtype=np.int64)
    a_cols[nnz_a:] = np.arange(k, dtype=np.uint32)
    a_vals[nnz_a:] = _ONE
    c_indptr[m_c + 1:] = nnz_c
    b_indptr[m_c + 1:] = m_c
    A = CSR(a_indptr, a_cols, a_vals)
    B = CSR(b_indptr, b_cols, b_vals)
    C = CSR(c_indptr, c_cols, c_vals)

    nat = _r1cs_native()
    a = nat.spmv(A.indptr, A.cols, A.vals, z, threads=threads)
    b = nat.spmv(B.indptr, B.cols, B.vals, z, threads=threads)
    nat.fix_pivots(C.indptr, C.cols, C.vals, z, a, b, threads=threads)
    return R1CS(k, n_aux, A, B, C), inputs, aux
