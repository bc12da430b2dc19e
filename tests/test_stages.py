"""The stage interface (cuzk/_stages) and the device byte budget (cuzk/_budget.py), on the CPU."""
import threading
import time

import numpy as np
import pytest

from cuzk import porep_like, keygen_random
from cuzk._budget import Budget
from cuzk._errors import BudgetError, ProofVerificationError, UnsatisfiedAssignmentError
from cuzk._prover import prove, prove_partitions, public_inputs
from cuzk._stages import CpuStages, stages_for
from cuzk._verifier import verify
from helpers import start_daemon, wait_until


@pytest.fixture(scope="module")
def circuit():
    r1cs, inputs, aux = porep_like(6, 3)
    pk = keygen_random(r1cs, seed=11)
    return r1cs, pk, r1cs.assignment(inputs, aux)


# --------------------------------------------------------------------------- budget

def _reserve_in_thread(b, nbytes, what, **kw):
    """``b.reserve(nbytes, what, **kw)`` on a daemon thread (``start_daemon``); returns
    (thread, out): out receives the Reservation or the BudgetError."""
    out = []

    def go():
        try:
            out.append(b.reserve(nbytes, what, **kw))
        except BudgetError as e:
            out.append(e)
    return start_daemon(go), out


def test_budget_reserve_release_and_peak():
    b = Budget(100, "t")
    r1 = b.reserve(60, "x", block=False)     # block=False: a defect fails here, never hangs
    assert b.used == 60 and b.free == 40
    with b.reserve(np.int64(40), "y", block=False) as r2:
        assert b.used == 100 and type(r2.nbytes) is int
        assert b.snapshot()["reservations"] == [("x", 60), ("y", 40)]
    r1.release()
    r1.release()                                # idempotent
    assert b.used == 0 and b.peak == 100 and b.snapshot()["reservations"] == []


def test_budget_refuses_what_never_fits_and_nonblocking():
    b = Budget(10, "dev")
    with pytest.raises(BudgetError, match="more than the whole budget"):
        b.reserve(11, "big", timeout=10)
    r = b.reserve(8, block=False)
    with pytest.raises(BudgetError, match="dev: later needs 5 bytes; 2 of 10 free$"):
        b.reserve(5, "later", block=False, timeout=10)      # refused at once, not after 10 s
    t, out = _reserve_in_thread(b, 5, "later", timeout=0.05)    # a timeout that never fires:
    t.join(10)                                                  # the join fails, no hang
    assert not t.is_alive() and len(out) == 1
    assert str(out[0]).endswith("later needs 5 bytes; 2 of 10 free after 0.05 s")
    assert b.used == 8 and b.waiting == 0
    r.release()


def test_budget_lasting_reservations_bound_what_may_wait():
    """A key's ``lasting`` bytes are never waited for: a reservation that fits the budget but not
    beside them fails at once (it would wait forever), naming the keys; one that fits beside them
    is made; once the key is released the larger one fits."""
    b = Budget(24, "dev")
    key = b.reserve(8, "key", block=False, lasting=True)
    assert b.lasting == 8
    t0 = time.monotonic()
    with pytest.raises(BudgetError, match="less 8 bytes of resident keys leaves 16"):
        b.reserve(20, "partition", timeout=10)
    assert time.monotonic() - t0 < 1 and b.waiting == 0
    with b.reserve(16, "partition", block=False):
        assert b.used == 24
    key.release()
    assert b.lasting == 0
    with b.reserve(20, "partition", block=False):
        assert b.used == 20


def test_budget_waiter_fails_when_a_key_takes_its_room():
    """A reservation waiting for a partition's bytes fails once a key (lasting) has taken the room
    it waited for, instead of waiting on."""
    b = Budget(10)
    part = b.reserve(6, "partition", block=False)
    t, errors = _reserve_in_thread(b, 7, "next", timeout=10)
    wait_until(lambda: b.waiting == 1, "the waiter")
    key = b.reserve(4, "key", block=False, lasting=True)
    part.release()                           # wakes the waiter: 7 > 10 - 4
    t.join(5)
    assert not t.is_alive() and isinstance(errors[0], BudgetError)
    assert "resident keys" in str(errors[0])
    key.release()


def test_budget_blocking_waits_for_release():
    b = Budget(10)
    r = b.reserve(10, block=False)
    t, got = _reserve_in_thread(b, 7, "w", timeout=10)
    wait_until(lambda: b.waiting == 1, "the waiter")
    assert not got
    r.release()
    t.join(5)
    assert got and b.used == 7
    got[0].release()


def test_budget_unlimited_counts():
    b = Budget(None)
    with b.reserve(1 << 60, block=False):
        assert b.used == 1 << 60
    assert b.used == 0


def test_budget_rejects_negative_sizes_and_says_its_state():
    with pytest.raises(ValueError, match="budget total must be >= 0, got -1"):
        Budget(-1)
    z = Budget(0, "empty")                       # the bounds themselves are allowed
    assert z.peak == 0
    with z.reserve(0, block=False):
        assert z.used == 0
    b = Budget(10, "cuda:3")
    with pytest.raises(ValueError, match="nbytes must be >= 0, got -5"):
        b.reserve(-5, "x")
    assert b.used == 0
    r = b.reserve(4, "tables", block=False)
    assert repr(r) == "Reservation(4 bytes, 'tables', held)"
    assert repr(b) == "Budget('cuda:3', used=4, total=10)"
    r.release()
    assert repr(r) == "Reservation(4 bytes, 'tables', released)" and b.used == 0


# --------------------------------------------------------------------------- the four calls

def test_four_calls_equal_prove(circuit):
    _, pk, asg = circuit
    st = CpuStages(threads=2)
    budget = Budget(1 << 30, "cpu:0")
    ctx = st.context(budget=budget)
    key = st.load_key(pk, budget=budget)
    part = st.prepare(key, asg, ctx, r=5, s=7)
    assert part.reserved_bytes > 0 and budget.used == key.nbytes + part.reserved_bytes
    done = st.run(part)
    done.synchronize()
    assert done.query()
    proof = st.finish(part, verify=True)
    assert budget.used == key.nbytes
    key.release()
    assert budget.used == 0
    assert proof == prove(pk, asg, 5, 7, backend="cpu")
    assert verify(pk.vk, proof, public_inputs(asg))


def test_timings_report_backend_and_sum_over_partitions(circuit):
    _, pk, asg = circuit
    t1 = {}
    prove(pk, asg, 1, 2, backend="cpu", timings=t1)
    assert t1["backend"] == "cpu" and t1["device"] == "cpu"
    for name in ("validate", "prep_msm", "h", "l", "a", "b_g1", "b_g2", "epilogue", "total"):
        assert t1[name] >= 0
    t3 = {}
    out = prove_partitions(pk, [asg, asg, asg], backend="cpu", timings=t3)
    assert len(out) == 3 * 192
    # total is the sum over the partitions, not the last one
    assert t3["total"] >= t3["h"] + t3["l"]
    assert t3["total"] > 1.5 * (t3["total"] / 3)


def test_prepare_failure_leaves_nothing_reserved(circuit):
    r1cs, pk, asg = circuit
    bad_c = asg.c.copy()
    bad_c[3] = bad_c[4]
    bad = type(asg)(a=asg.a, b=asg.b, c=bad_c, inputs=asg.inputs, aux=asg.aux,
                    a_aux_density=asg.a_aux_density, b_input_density=asg.b_input_density,
                    b_aux_density=asg.b_aux_density)
    st = CpuStages()
    budget = Budget(1 << 30)
    ctx = st.context(budget=budget)
    key = st.load_key(pk)
    with pytest.raises(UnsatisfiedAssignmentError) as e:
        st.prepare(key, bad, ctx)
    assert e.value.row == 3
    assert budget.used == 0
    # an out-of-budget reservation: typed error, nothing held
    tiny = Budget(100)
    with pytest.raises(BudgetError):
        st.prepare(key, asg, st.context(budget=tiny))
    assert tiny.used == 0


def test_abort_after_run_releases(circuit):
    _, pk, asg = circuit
    st = CpuStages()
    budget = Budget(1 << 30)
    ctx = st.context(budget=budget)
    part = st.prepare(st.load_key(pk), asg, ctx)
    st.run(part)
    st.abort(part)
    st.abort(part)
    assert budget.used == 0


def test_wrong_aux_is_blamed_on_the_assignment(circuit):
    """a∘b = c holds but an aux value is wrong: the check passes, verification fails, and the error
    says the assignment (not the backend) is at fault."""
    _, pk, asg = circuit
    aux = asg.aux.copy()
    aux[0] = aux[1] if not np.array_equal(aux[0], aux[1]) else aux[2]
    bad = type(asg)(a=asg.a, b=asg.b, c=asg.c, inputs=asg.inputs, aux=aux,
                    a_aux_density=asg.a_aux_density, b_input_density=asg.b_input_density,
                    b_aux_density=asg.b_aux_density)
    with pytest.raises(ProofVerificationError) as e:
        prove(pk, bad, backend="cpu", verify=True)
    assert e.value.cause == "assignment" and e.value.backend == "cpu"
    assert "does not satisfy" in str(e.value)


def test_prove_accepts_a_path_and_refuses_other_types(circuit, tmp_path):
    _, pk, asg = circuit
    p = tmp_path / "a.npz"
    asg.save_npz(str(p))
    assert prove(pk, str(p), 3, 4, backend="cpu") == prove(pk, asg, 3, 4, backend="cpu")
    with pytest.raises(TypeError, match="int"):
        prove(pk, 42, backend="cpu")


def test_stages_for_cpu_has_no_device():
    assert stages_for("cpu").device_label == "cpu"
    with pytest.raises(ValueError, match="no device"):
        stages_for("cpu", device=1)


def test_concurrent_workers_share_one_key(circuit):
    """Four threads, one key, one context each: every proof equals the sequential one."""
    _, pk, asg = circuit
    st = CpuStages(threads=1)
    budget = Budget(1 << 30)
    key = st.load_key(pk, budget=budget)
    want = {i: prove(pk, asg, 100 + i, 200 + i, backend="cpu") for i in range(8)}
    got, errors = {}, []

    def worker(ids):
        ctx = st.context(budget=budget)
        try:
            for i in ids:
                part = st.prepare(key, asg, ctx, 100 + i, 200 + i)
                st.run(part).synchronize()
                got[i] = st.finish(part)
        except Exception as e:   # forwarded to the assertion below
            errors.append(e)

    ts = [threading.Thread(target=worker, args=([j, j + 4],)) for j in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert not errors and got == want
    key.release()
    assert budget.used == 0
