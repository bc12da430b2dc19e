"""The shared CPU thread pool (cuzk/parallel.hpp, cuzk._native._pool) and per-thread budgets.

Pool behaviour is observed through a native probe (_pool._probe: which worker id and which
kernel thread ran each unit) and the pool's counters; stage results are checked against the
independent references of the stage test modules (arkworks for the MSM, big-int FFTs for the
NTT, a direct Python classification for prep_msm).  Tests that need a given pool size run in a
subprocess with $CUZK_POOL_THREADS set (the pool is sized once per process).
"""
import functools
import json
import multiprocessing
import os
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import helpers
from cuzk._native import _msm, _ntt, _pool, _prep

import test_msm
import test_ntt
import test_prep


def run_child(code, pool_threads):
    """Run `code` in a fresh interpreter with the pool sized pool_threads; return its last
    stdout line parsed as JSON."""
    env = dict(os.environ, CUZK_POOL_THREADS=str(pool_threads))
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, check=True,
                         capture_output=True, text=True, timeout=300).stdout
    return json.loads(out.strip().splitlines()[-1])


def tids(rows):
    return {tid for row in rows for _, tid in row[:1]}


# ---- the pool itself ----------------------------------------------------------------------------
def test_pool_size_follows_affinity():
    if "CUZK_POOL_THREADS" in os.environ:
        pytest.skip("pool size overridden by $CUZK_POOL_THREADS")
    assert _pool.pool_threads() == len(os.sched_getaffinity(0))
    assert _pool._resolve(None) == _pool._resolve(0) == _pool.pool_threads()
    assert _pool._resolve(5) == 5


@pytest.mark.parametrize("units,threads", [(0, None), (1, None), (2, 1), (7, 2), (64, None), (33, 5)])
def test_every_unit_runs_once(units, threads):
    rows = _pool._probe(units, threads, spin_us=50)
    assert len(rows) == units
    limit = min(_pool._resolve(threads), max(units, 1))
    for row in rows:
        worker, tid = row[0]
        assert tid > 0, "unit did not run"
        assert 0 <= worker < limit
    # one worker id is one thread at a time: a worker id never maps to two threads
    by_worker = {}
    for row in rows:
        by_worker.setdefault(row[0][0], set()).add(row[0][1])
    assert all(len(s) == 1 for s in by_worker.values())


def test_pool_size_and_budget_honoured():
    """With an 8-thread pool: no budget uses more than 3 threads, budget 3 at most 3, an explicit
    threads=5 at most 5, and budgets are per OS thread."""
    got = run_child("""
        import json, threading
        from cuzk._native import _pool
        def used(threads=None):
            rows = _pool._probe(48, threads, spin_us=4000)
            assert all(r[0][1] > 0 for r in rows)
            return len({r[0][1] for r in rows}), max(r[0][0] for r in rows)
        res = {"size": _pool.pool_threads(), "free": used()}
        assert _pool.set_thread_budget(3) is None
        res["budget"] = used()
        res["explicit"] = used(5)
        res["resolve"] = _pool._resolve()
        with _pool.thread_budget_scope(2):
            res["scoped"] = used()
        res["after_scope"] = _pool.thread_budget()
        other = []
        t = threading.Thread(target=lambda: other.append((_pool.thread_budget(), used())))
        t.start(); t.join()
        res["other_thread"] = other[0]
        assert _pool.set_thread_budget(None) == 3
        res["cleared"] = _pool.thread_budget()
        print(json.dumps(res))
    """, 8)
    assert got["size"] == 8
    assert got["free"][0] > 3  # the probe can see a budget being ignored
    assert got["free"][0] <= 8 and got["free"][1] < 8
    assert got["budget"][0] <= 3 and got["budget"][1] < 3
    assert got["explicit"][0] <= 5 and got["explicit"][1] < 5
    assert got["resolve"] == 3
    assert got["scoped"][0] <= 2
    assert got["after_scope"] == 3
    budget, (n, _) = got["other_thread"]
    assert budget is None and n > 3  # another thread's budget is its own
    assert got["cleared"] is None


def test_concurrent_budgets_bound_total_threads():
    """Four Python threads with budget 2 each, calling at once, use at most 2 threads each."""
    got = run_child("""
        import json, threading
        from cuzk._native import _pool
        out = [None] * 4
        bar = threading.Barrier(4)
        def work(i):
            _pool.set_thread_budget(2)
            bar.wait()
            rows = _pool._probe(40, None, spin_us=3000)
            out[i] = [len({r[0][1] for r in rows}), max(r[0][0] for r in rows),
                      all(r[0][1] > 0 for r in rows)]
        ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        [t.start() for t in ts]; [t.join() for t in ts]
        print(json.dumps(out))
    """, 8)
    for n, wmax, ok in got:
        assert ok and n <= 2 and wmax <= 1


def test_nested_calls_run_inline():
    before = _pool._stats()["nested"]
    rows = _pool._probe(16, None, inner=5, spin_us=200)
    for row in rows:
        (_, tid), inner = row[0], row[1:]
        assert inner == [(0, tid)] * 5  # on the unit's own thread, as worker 0
    if _pool.pool_threads() > 1:
        assert _pool._stats()["nested"] >= before + 16


def test_many_python_threads_share_the_pool():
    """16 Python threads calling the probe at once: every call completes with every unit run,
    and all of them together use only the pool's helpers plus the callers."""
    def call(i):
        rows = _pool._probe(24, None if i % 2 else 3, spin_us=300)
        assert all(r[0][1] > 0 for r in rows)
        return tids(rows)
    used = set().union(*helpers.run_threaded(call, 16))
    assert len(used) <= 16 + _pool._stats()["helpers"]


def test_exception_propagates_and_pool_survives():
    with pytest.raises(RuntimeError, match="probe unit 5"):
        _pool._probe(32, None, spin_us=100, throw_at=5)
    rows = _pool._probe(32, None, spin_us=100)
    assert all(r[0][1] > 0 for r in rows)


def _fork_child(q):
    rows = _pool._probe(16, None, spin_us=200)
    q.put(all(r[0][1] > 0 for r in rows))


def test_pool_works_in_forked_child():
    _pool._probe(8, None, spin_us=100)  # the parent's pool exists before the fork
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_fork_child, args=(q,))
    p.start()
    ok = q.get(timeout=60)
    p.join(60)
    assert ok and p.exitcode == 0


def test_budget_argument_checked():
    with pytest.raises(ValueError):
        _pool.set_thread_budget(-1)
    with pytest.raises((TypeError, ValueError)):  # cuzk._args.threads_arg's rule
        _pool.set_thread_budget(1.5)
    assert _pool.thread_budget() is None


# ---- every native module uses the one pool ------------------------------------------------------
def test_native_modules_share_one_pool_and_budget():
    """Calls of the field, MSM, NTT, prep, r1cs and sparse modules hand work to the one pool of
    _pool (its counter moves), start no threads of their own (the cuzk-pool threads of the
    process are the pool's helpers), and follow the caller's budget (budget 1: inline)."""
    got = run_child("""
        import json, os
        import numpy as np
        from cuzk._native import _pool, _field, _msm, _ntt, _prep, _r1cs, _sparse
        rng = np.random.default_rng(3)
        n = 1 << 14
        fr = _field.to_mont(np.ascontiguousarray(rng.integers(0, 2**62, size=(n, 4), dtype=np.uint64)))
        aux = np.ascontiguousarray(np.concatenate([fr] * 8))  # prep splits per 2^16 values
        pwords = np.full((len(aux) + 63) // 64, 0x5555555555555555, dtype=np.uint64)
        pts = np.zeros((n, 12), dtype=np.uint64)  # all infinity: the MSM still splits its work
        sc = np.ascontiguousarray(rng.integers(0, 2**62, size=(n, 4), dtype=np.uint64))
        indptr = np.arange(n + 1, dtype=np.int64)
        cols = np.arange(n, dtype=np.uint32)
        calls = {
            "field": lambda: _field.mul(fr, fr),
            "msm": lambda: _msm.msm(_field.generator("g1")[None].repeat(n, 0), sc, "g1"),
            "ntt": lambda: _ntt.ntt_mont(fr.copy()),
            "prep": lambda: _prep.prep_msm(fr[:2].copy(), aux, pwords, np.ones(1, np.uint64), pwords),
            "r1cs": lambda: _r1cs.geometric(fr[1], fr[2], n),
        }
        res = {}
        for budget in (None, 1):
            _pool.set_thread_budget(budget)
            for name, f in calls.items():
                before = _pool._stats()["posted"]
                f()
                res[f"{name}/{budget}"] = _pool._stats()["posted"] - before
        names = [open(f"/proc/self/task/{t}/comm").read().strip()
                 for t in os.listdir("/proc/self/task")]
        res["pool_threads_named"] = names.count("cuzk-pool")
        res["helpers"] = _pool._stats()["helpers"]
        print(json.dumps(res))
    """, 4)
    for name in ("field", "msm", "ntt", "prep", "r1cs"):
        assert got[f"{name}/None"] > 0, name
        assert got[f"{name}/1"] == 0, name
    assert got["helpers"] == 3
    assert got["pool_threads_named"] == 3


# ---- stages: same bytes on any thread count, from many threads at once -------------------------
@functools.lru_cache(maxsize=None)
def stage_case():
    """Inputs and independent reference results of one MSM, one NTT and one prep_msm."""
    rng = random.Random(11)
    n_msm = 3000
    ints = test_msm.random_scalars(rng, n_msm, "uniform")
    msm = (test_msm._mont_points("g1", n_msm), test_msm.scalars_array(ints),
           test_msm.to_mont([test_msm.reference(test_msm._points("g1", n_msm), ints, "g1")], "g1")[0])
    x = [rng.randrange(test_ntt.R) for _ in range(1 << 11)]
    ntt = (test_ntt.to_mont(x), test_ntt.to_mont(test_ntt.transform_ref(x, False, True)))
    n_aux = 200_000
    kind = [rng.choice((0, 0, 1, 1, 2)) for _ in range(n_aux)]
    aux = [k if k < 2 else rng.randrange(2, test_prep.R) for k in kind]
    inputs = [1, 5, rng.randrange(test_prep.R)]
    bits = [[rng.random() < p for _ in range(n)] for p, n in ((0.997, n_aux), (0.5, 3), (0.25, n_aux))]
    prep_args = (test_prep.to_mont(inputs), test_prep.to_mont(aux)) + tuple(map(test_prep.bits_to_words, bits))
    prep_ref = test_prep.reference(inputs, aux, bits[0], bits[1], bits[2])
    prep_want = _prep.prep_msm(*prep_args, threads=1)
    for q in "lab":  # the threads=1 result against the independent reference, once
        ones, tail, size = prep_ref[q]
        words = prep_want[q + "_ones"]
        assert {w * 64 + b for w in range(len(words)) for b in range(64) if (int(words[w]) >> b) & 1} == ones
        assert [int(i) for i in prep_want[q + "_tail_idx"]] == [i for _, i in tail]
    return msm, ntt, (prep_args, prep_want)


def run_stages(threads):
    """Each stage once with `threads`; assert the reference bytes."""
    (pts, sc, msm_want), (x, ntt_want), (prep_args, prep_want) = stage_case()
    assert np.array_equal(_msm.msm(pts, sc, "g1", threads or 0), msm_want)
    v = x.copy()
    _ntt.ntt_mont(v, coset=True, threads=threads)
    assert np.array_equal(v, ntt_want)
    got = _prep.prep_msm(*prep_args, threads=threads or 0)
    assert got.keys() == prep_want.keys()
    for k, want in prep_want.items():
        assert np.array_equal(got[k], want), k


@pytest.mark.parametrize("threads", [1, 2, 3, None, 7])
def test_stages_same_bytes_any_thread_count(threads):
    run_stages(threads)


def test_stages_same_bytes_under_budget():
    with _pool.thread_budget_scope(2):
        run_stages(None)


def test_stages_from_eight_python_threads_at_once():
    """8 Python threads (as engine workers) run MSM, NTT and prep at once, some with budgets."""
    stage_case()

    def work(i):
        if i % 3 == 0:
            _pool.set_thread_budget(2)
        for _ in range(2):
            run_stages((None, 1, 2, 3)[i % 4])
        return True

    assert all(helpers.run_threaded(work, 8))


@pytest.mark.parametrize("threads", [1, 2, 3, 0])
@pytest.mark.parametrize("m,n", [(0, 5), (1, 1), (4095, 4097), ((1 << 20) + 3, (1 << 20) + 3),
                                 ((5 << 20) + 7, (9 << 20) + 11), (64 << 20, 64 << 20)])
def test_copy_into_pieces_cover_every_byte(threads, m, n):
    """copy_into cuts the copy into pieces by thread count: every source byte lands once at
    its offset, and the rest of dst is zeroed, for sizes around the 1 MiB/4 KiB rounding."""
    from cuzk._native import _pool
    rng = np.random.default_rng(m + n + threads)
    src = rng.integers(0, 256, size=m, dtype=np.uint8)
    dst = np.full(n, 0xAB, dtype=np.uint8)
    _pool.copy_into(dst, src, threads)
    assert np.array_equal(dst[:m], src)
    assert not dst[m:].any()
