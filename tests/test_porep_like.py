"""porep_like's parallel construction: the same circuit for any thread count, every row
satisfied, the documented shape statistics, and a demo cache keyed on the generator."""
import numpy as np
import pytest

from cuzk import _circuit
from cuzk._assignment import fr_mont_to_ints
from cuzk._circuit import POREP_LIKE_VERSION, porep_like, porep_like_sizes
from cuzk._demo import entry_name

_ONE_MONT = _circuit._ONE
_POW2_MONT = _circuit._COEF_TABLE[1:]


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 2^10 variables and fill blocks of 2^8 rows, so 2^14 has 15 chunks and 62
    blocks (the real constants, 2^20 and 2^17, give one of each below 2^20)."""
    monkeypatch.setattr(_circuit, "_SEL_CHUNK", 1 << 10)
    monkeypatch.setattr(_circuit, "_FILL_BLOCK", 1 << 8)


def _arrays(res):
    cs, inputs, aux = res
    out = [inputs, aux]
    for M in (cs.A, cs.B, cs.C):
        out += [M.indptr, M.cols, M.vals]
    return out


def _same(r1, r2):
    return all(x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(_arrays(r1), _arrays(r2)))


@pytest.mark.parametrize("log_n", [6, 14])
def test_same_circuit_for_any_thread_count(small_chunks, log_n):
    base = porep_like(log_n, 5, threads=1)
    assert _same(base, porep_like(log_n, 5, threads=2))
    assert _same(base, porep_like(log_n, 5, threads=3))
    assert _same(base, porep_like(log_n, 5, threads=None))
    assert not np.array_equal(base[2], porep_like(log_n, 6, threads=2)[2])


def test_chunking_is_part_of_the_circuit(monkeypatch):
    """The chunk constants (not the threads) define the stream: other constants, other circuit
    (which is why POREP_LIKE_VERSION must change with them)."""
    a = porep_like(12, 1, threads=2)
    monkeypatch.setattr(_circuit, "_SEL_CHUNK", 1 << 10)
    monkeypatch.setattr(_circuit, "_FILL_BLOCK", 1 << 10)
    assert not _same(a, porep_like(12, 1, threads=2))


def test_default_chunks_same_for_threads():
    assert _same(porep_like(14, 9, threads=1), porep_like(14, 9, threads=2))


def _kinds(vals):
    """Fractions of rows of ``vals`` (Montgomery) equal to 1 and to a power 2^1..2^63."""
    v = vals.view(np.dtype((np.void, 32))).reshape(-1)
    one = np.isin(v, _ONE_MONT.view(np.dtype((np.void, 32))))
    pw = np.isin(v, np.ascontiguousarray(_POW2_MONT).view(np.dtype((np.void, 32))).reshape(-1))
    return one.mean(), pw.mean()


@pytest.mark.parametrize("chunked", [False, True])
def test_satisfied_and_shape_statistics(monkeypatch, chunked):
    if chunked:
        monkeypatch.setattr(_circuit, "_SEL_CHUNK", 1 << 10)
        monkeypatch.setattr(_circuit, "_FILL_BLOCK", 1 << 8)
    log_n = 14
    cs, inputs, aux = porep_like(log_n, 3, threads=2)
    k, n_aux, m = porep_like_sizes(log_n)
    m_c = m - k
    assert (cs.n_inputs, cs.n_aux, cs.n_constraints) == (k, n_aux, m)
    assert cs.is_satisfied(inputs, aux, threads=2)
    # densities: exact shares (chunk quotas add up to the rounded totals)
    da, dbi, dba = cs.densities()
    assert da.popcount() == n_aux - round(0.003 * n_aux)
    assert dba.popcount() == round(0.254 * n_aux)
    assert dbi.to_bools()[0] and 0 < dbi.popcount() < k
    # B: one entry per circuit row; each B variable exactly once; the rest the constant 1 or
    # an input (about half the inputs, once each)
    assert np.array_equal(np.diff(cs.B.indptr), np.r_[np.ones(m_c, int), np.zeros(k, int)])
    bc = cs.B.cols
    aux_cols = bc[bc >= k]
    assert np.unique(aux_cols).shape[0] == aux_cols.shape[0] == round(0.254 * n_aux)
    in_cols = bc[(bc > 0) & (bc < k)]
    assert np.unique(in_cols).shape[0] == in_cols.shape[0] > 0
    # entries per row (circuit rows)
    assert abs(cs.A.indptr[m_c] / m_c - 2.4) < 0.03
    assert abs(cs.C.indptr[m_c] / m_c - 2.2) < 0.03
    # A's input rows: A = input_i
    assert np.array_equal(cs.A.cols[cs.A.indptr[m_c]:], np.arange(k))
    # about 2 % of A's non-leading entries are inputs; A never uses an A-excluded variable
    ac = cs.A.cols[:cs.A.indptr[m_c]]
    nonlead = np.ones(ac.shape[0], bool)
    nonlead[cs.A.indptr[:m_c]] = False
    assert abs((ac[nonlead] < k).mean() - 0.02) < 0.01
    assert (ac[~nonlead] >= k).all()
    # aux values: 45 % zeros, 45 % ones, 10 % full
    vals = fr_mont_to_ints(aux)
    zeros = sum(v == 0 for v in vals) / n_aux
    ones = sum(v == 1 for v in vals) / n_aux
    assert abs(zeros - 0.45) < 0.02 and abs(ones - 0.45) < 0.02
    assert all(v < _circuit.R_MOD for v in vals)
    # coefficients: A 60 / 20 / 20 %, B 80 / 10 / 10 %, C's non-pivot entries 60 / 20 / 20 %
    one, pw = _kinds(cs.A.vals[:cs.A.indptr[m_c]])
    assert abs(one - 0.6) < 0.02 and abs(pw - 0.2) < 0.02
    one, pw = _kinds(cs.B.vals)
    assert abs(one - 0.8) < 0.02 and abs(pw - 0.1) < 0.02
    cnonpiv = np.ones(cs.C.nnz, bool)
    cnonpiv[cs.C.indptr[:m_c]] = False
    one, pw = _kinds(cs.C.vals[cnonpiv])
    assert abs(one - 0.6) < 0.02 and abs(pw - 0.2) < 0.02
    # C's pivots are 1-valued aux variables; every aux variable is constrained somewhere
    piv = cs.C.cols[cs.C.indptr[:m_c]]
    assert (piv >= k).all() and (aux[piv - k] == _ONE_MONT).all()
    used = (cs.A.used_columns(cs.n_vars) | cs.B.used_columns(cs.n_vars)
            | cs.C.used_columns(cs.n_vars))
    assert used.all()


def test_demo_cache_entry_names_the_generator():
    name = entry_name(14, 3)
    assert name.startswith("14-3-") and f"g{POREP_LIKE_VERSION}" in name
    assert "np" + ".".join(np.__version__.split(".")[:2]) in name
    assert entry_name(14, 3) != entry_name(14, 4) != entry_name(15, 3)


def test_demo_cache_ignores_an_old_generators_entry(tmp_path, monkeypatch):
    """An entry under the old name (``<log_n>-<seed>``) or another version's name is never
    loaded: a new entry is generated beside it."""
    from cuzk import _demo
    cache = tmp_path / "cache"
    for old in ("6-0", f"6-0-g{POREP_LIKE_VERSION - 1}-np" + ".".join(np.__version__.split(".")[:2])):
        d = cache / old
        d.mkdir(parents=True)
        for f in _demo._FILES:
            (d / f).write_bytes(b"stale")
    path, generated = _demo.ensure_circuit(6, cache=cache, quiet=True)
    assert generated and path == str(cache / entry_name(6))
    pk, asg, vk, public = _demo.load_circuit(path)
    cs, inputs, aux = porep_like(6, 0)
    assert np.array_equal(asg.aux, aux) and np.array_equal(asg.inputs, inputs)
