"""cuzk.Prover: one key made ready for many prove calls from many threads (the CPU backend;
tests/test_gpu_prover.py runs the same on the GPU).  Its bytes are cuzk.prove's, which the
other prover tests check against the verifier and the CPU reference."""
import threading

import pytest

import cuzk
from cuzk._budget import Budget
from cuzk._stages import CpuStages

TIMEOUT = 120


@pytest.fixture(scope="module")
def circ():
    r1cs, inputs, aux = cuzk.porep_like(6, 3)
    pk = cuzk.keygen_random(r1cs, 3, 1)
    return pk, r1cs.assignment(inputs, aux)


class _Counting(CpuStages):
    """CpuStages counting load_key calls, the keys released and the contexts made and closed,
    with every key's bytes reserved from one budget (so a key left behind shows)."""

    def __init__(self):
        super().__init__(1)
        self.budget = Budget(None, "test")
        self.loads, self.lasting, self.made, self.closed = 0, [], 0, 0

    def load_key(self, pk, budget=None, progress=None, lasting=True, partitions=1):
        self.loads += 1
        self.lasting.append(lasting)
        return super().load_key(pk, self.budget, progress, lasting)

    def context(self, budget=None, threads=None, name="w0"):
        self.made += 1
        ctx = super().context(budget, threads, name)
        close = ctx.close

        def counted_close():
            self.closed += 1
            close()
        ctx.close = counted_close
        return ctx


def test_prover_bytes_equal_prove(circ):
    pk, asg = circ
    rs = [(5, 7), (11, 13), (17, 19)]
    want = [cuzk.prove(pk, asg, r, s, backend="cpu", threads=1) for r, s in rs]
    with cuzk.Prover(pk, backend="cpu", threads=1) as pr:
        assert pr.backend == "cpu" and "closed" not in repr(pr)
        got = [pr.prove(asg, r, s) for r, s in rs]
        t = {}
        pr.prove(asg, 5, 7, verify=True, timings=t)
        assert t["backend"] == "cpu" and t["total"] > 0
    assert got == want
    assert cuzk.verify(pk.vk, got[0], cuzk.public_inputs(asg))
    assert "closed" in repr(pr)
    with pytest.raises(ValueError, match="closed"):
        pr.prove(asg, 5, 7)
    pr.close()                                   # idempotent


def test_prover_loads_once_and_serves_threads(circ):
    """One load_key for the Prover's life (lasting: it serves many calls), 4 threads × 3 proofs
    with their own contexts (at most one per concurrent call, reused), every proof the
    sequential bytes; close releases the key and closes every context."""
    pk, asg = circ
    st = _Counting()
    rs = [(100 + i, 200 + i) for i in range(12)]
    want = {rs_: cuzk.prove(pk, asg, *rs_, backend="cpu", threads=1) for rs_ in rs}
    got, errors = {}, []
    barrier = threading.Barrier(4, timeout=TIMEOUT)
    with cuzk.Prover(pk, stages=st) as pr:
        assert st.loads == 1 and st.lasting == [True]
        assert st.budget.used > 0                # the key's reservation

        def work(k):
            try:
                barrier.wait()
                for r, s in rs[k::4]:
                    got[(r, s)] = pr.prove(asg, r, s)
            except BaseException as e:           # reported below, not lost in the thread
                errors.append(e)
        ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(TIMEOUT)
        assert not errors, errors
        assert st.loads == 1
        assert 1 <= st.made <= 4
    assert got == want
    assert st.closed == st.made
    assert st.budget.used == 0


def test_prover_survives_a_bad_assignment(circ):
    """A failing call raises its typed error and the Prover goes on."""
    pk, asg = circ
    bad = cuzk.Assignment(**{f: getattr(asg, f) for f in asg.__dataclass_fields__})
    bad.c = bad.c.copy()
    bad.c[3, 0] ^= 1
    with cuzk.Prover(pk, backend="cpu", threads=1) as pr:
        with pytest.raises(cuzk.UnsatisfiedAssignmentError):
            pr.prove(bad, 1, 2)
        assert pr.prove(asg, 1, 2) == cuzk.prove(pk, asg, 1, 2, backend="cpu", threads=1)


def test_one_call_prove_loads_for_the_call(circ):
    """cuzk.prove / prove_partitions: a key for the call only (lasting=False), released after."""
    pk, asg = circ
    st = _Counting()
    cuzk.prove(pk, asg, 1, 2, stages=st)
    cuzk.prove_partitions(pk, [asg, asg], stages=st)
    assert st.loads == 2 and st.lasting == [False, False]
    assert st.budget.used == 0 and st.closed == st.made == 2


def test_prover_rejects_cpu_stage_options(circ):
    pk, _ = circ
    with pytest.raises(ValueError):
        cuzk.Prover(pk, backend="cpu", stage_options={"precompute": 2})
