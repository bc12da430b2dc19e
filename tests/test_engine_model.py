"""The lock + budget protocol, explored exhaustively (cuzk._engine._model) over the very plans
the engine executes, and the checker shown able to find deadlocks and leaks."""
import threading

import pytest

from cuzk._engine import PLANS, Interlock, PriorityLock
from cuzk._engine._interlock import EARLY_PLANS, gated_plan, lock_mode_arg
from cuzk._engine._model import explore
from helpers import start_daemon, wait_until

ACQ, REL = "acquire", "release"


@pytest.mark.parametrize("failures", [False, True])
@pytest.mark.parametrize("budget", [1, 2])
@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize("mode", sorted(PLANS))
def test_engine_plans_deadlock_free(mode, workers, budget, failures):
    res = explore([PLANS[mode]] * workers, budget, units=1, rounds=2, failures=failures)
    assert res.ok, (res.detail, res.deadlock, res.leak)
    assert res.finals >= 1 and res.states > workers


@pytest.mark.parametrize("failures", [False, True])
@pytest.mark.parametrize("budget", [1, 2])
@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize("mode", sorted(PLANS))
def test_gated_plans_deadlock_free(mode, workers, budget, failures):
    """The plans of thread_share="adaptive" (the host gate before prepare) are deadlock- and
    leak-free too, and the engine's Interlock executes exactly them."""
    plan = gated_plan(PLANS[mode])
    assert plan.index(("gate", "host")) + 1 == plan.index(("stage", "prepare"))
    assert Interlock(mode, gated=True).plan == plan and Interlock(mode).plan == PLANS[mode]
    res = explore([plan] * workers, budget, units=1, rounds=2, failures=failures)
    assert res.ok, (res.detail, res.deadlock, res.leak)
    assert res.finals >= 1


@pytest.mark.parametrize("failures", [False, True])
@pytest.mark.parametrize("budget", [1, 2, None])
@pytest.mark.parametrize("early_workers", [1, 2])
@pytest.mark.parametrize("gated", [False, True])
@pytest.mark.parametrize("mode", sorted(EARLY_PLANS))
def test_early_plans_deadlock_free(mode, gated, early_workers, budget, failures):
    """The early plans (early_head under every lock of the mode, its reservations never waiting,
    the fallback to the mode's plan) beside workers on the mode's plan, 3 workers: deadlock-
    and leak-free.  Every round of an early worker tries the early plan (the engine: only on an
    idle device), so the model covers more than the engine does; Interlock carries the plan."""
    normal = gated_plan(PLANS[mode]) if gated else PLANS[mode]
    assert Interlock(mode, gated=gated).early_plan == EARLY_PLANS[mode]
    plans = [EARLY_PLANS[mode]] * early_workers + [normal] * (3 - early_workers)
    fallbacks = [normal] * early_workers + [None] * (3 - early_workers)
    res = explore(plans, budget, units=1, rounds=2, failures=failures, fallbacks=fallbacks)
    assert res.ok, (res.detail, res.deadlock, res.leak)
    assert res.finals >= 1


def test_early_plan_that_waits_for_bytes_deadlocks():
    """Why early_head never waits: the same plan with a reservation that waits (``upload``)
    deadlocks against a two-lock worker that holds its bytes and waits for the compute lock."""
    waits = tuple(("stage", "upload") if st == ("stage", "early_head") else st
                  for st in EARLY_PLANS["two-lock"])
    res = explore([waits, PLANS["two-lock"]], 1, units=1, rounds=2)
    assert res.deadlock is not None and "holds ['compute', 'memory']" in res.detail
    ok = explore([EARLY_PLANS["two-lock"], PLANS["two-lock"]], 1, units=1, rounds=2,
                 fallbacks=[PLANS["two-lock"], None])
    assert ok.ok, (ok.detail, ok.deadlock)


def test_gate_with_a_reservation_held_deadlocks():
    """The checker sees the gate: a worker that waits at the gate while holding budget units
    blocks a host-busy worker whose upload needs them (the engine's gate comes before any
    reservation for that reason)."""
    bad = (("reserve", 1), ("gate", "host"), ("stage", "prepare"), ("stage", "upload"),
           ("stage", "run"), ("stage", "sync"), ("stage", "finish"), ("free",))
    res = explore([bad, bad], 2, units=1, rounds=1)
    assert res.deadlock is not None, res
    assert explore([bad, bad], 4, units=1, rounds=1).ok      # enough budget: no wait, no cycle


def test_plans_with_resident_key_units():
    # the key holds part of the budget: a partition still fits -> no deadlock
    for plan in PLANS.values():
        assert explore([plan] * 3, 3, units=1, key_units=1, rounds=2).ok
    # a partition that can never fit beside the key fails (abort path), never hangs
    res = explore([PLANS["two-lock"]] * 2, 2, units=3, key_units=1, rounds=1)
    assert res.ok


def test_mixed_lock_order_deadlocks():
    """memory -> compute nested in one worker, compute -> memory in the other: found."""
    mem_first = ((ACQ, "memory"), ("stage", "prepare"), (ACQ, "compute"), (REL, "memory"),
                 ("stage", "run"), (REL, "compute"), ("stage", "finish"))
    compute_first = ((ACQ, "compute"), (ACQ, "memory"), ("stage", "prepare"), (REL, "memory"),
                     ("stage", "run"), (REL, "compute"), ("stage", "finish"))
    res = explore([mem_first, compute_first], 4, rounds=1)
    assert res.deadlock is not None
    assert "holds ['memory']" in res.detail and "holds ['compute']" in res.detail
    # the same nesting in one order only is fine
    assert explore([mem_first, mem_first], 4, rounds=2).ok


def test_reservation_held_while_waiting_for_memory_deadlocks():
    """The first two-lock design: host bytes reserved, then the memory lock for the device
    bytes.  With a budget of two partitions' halves it deadlocks; with room for both it does
    not (so the checker's verdict depends on the budget, as the real bug did)."""
    plan = (("reserve", 1), (ACQ, "memory"), ("reserve", 1), (REL, "memory"),
            (ACQ, "compute"), ("stage", "run"), (REL, "compute"), ("free",))
    res = explore([plan, plan], 2, rounds=1)
    assert res.deadlock is not None and "budget 2/2" in res.detail
    assert explore([plan, plan], 4, rounds=2).ok


def test_leaks_found():
    no_release = ((ACQ, "compute"), ("stage", "prepare"), ("stage", "run"),
                  ("stage", "finish"))
    res = explore([no_release], None, rounds=1)
    assert res.leak is not None
    res = explore([no_release, no_release], None, rounds=1)
    assert res.deadlock is not None
    no_free = (("stage", "prepare"), ("stage", "run"))
    assert explore([no_free], 5, rounds=1).leak is not None


def test_interlock_enforces_lock_order():
    assert lock_mode_arg("twolock") == lock_mode_arg(" Two_Lock ") == "two-lock"
    il = Interlock("two-lock", "t")
    assert 0.0 <= il.acquire("compute") < 1.0    # the seconds waited (none: the lock is free)
    assert il.snapshot() == {"memory": {"held": False, "waiting": 0},
                             "compute": {"held": True, "waiting": 0}}
    with pytest.raises(RuntimeError, match="lock order"):
        il.acquire("memory")
    il.release("compute")
    il.acquire("memory")
    il.acquire("compute")                       # memory -> compute is the allowed order
    assert il.held() == ["memory", "compute"]
    assert il.release_all() == ["memory", "compute"] and il.held() == []
    with pytest.raises(ValueError):
        Interlock("fine")


def test_priority_lock_hands_over_by_rank():
    lk = PriorityLock("t")
    lk.acquire()
    order, started = [], []
    ready = threading.Condition()

    def take(rank, tag):
        with ready:
            started.append(tag)
            ready.notify_all()
        lk.acquire(rank)
        order.append(tag)
        lk.release()

    threads = []
    for rank, tag in ((2, "normal-1"), (3, "low"), (0, "critical"), (2, "normal-2"),
                      (1, "high")):
        threads.append(start_daemon(take, rank, tag))
        with ready:                              # one waiter at a time: arrival order fixed
            assert ready.wait_for(lambda: tag in started, 10)
        wait_until(lambda: lk.waiting == len(threads), f"{len(threads)} waiters")
    assert lk.waiting == 5
    lk.release()
    for t in threads:
        t.join(10)
    assert order == ["critical", "high", "normal-1", "normal-2", "low"]
    assert lk.acquire(timeout=0)                 # free again: taken at once
    with pytest.raises(RuntimeError, match="reentrant"):
        lk.acquire()
    lk.release()
    with pytest.raises(RuntimeError, match="does not hold"):
        lk.release()


def test_priority_lock_timeout_leaves_others_waiting():
    lk = PriorityLock("t")
    lk.acquire()
    assert lk.owner == threading.get_ident()
    got = []
    t = start_daemon(lambda: got.append(lk.acquire(2, timeout=10)) or lk.release())
    wait_until(lambda: lk.waiting == 1, "the first waiter")
    res = []
    t2 = start_daemon(lambda: res.append(lk.acquire(0, timeout=0.05)))
    t2.join(10)
    assert res == [False] and lk.waiting == 1
    lk.release()
    t.join(10)
    assert got == [True] and lk.owner is None


def test_priority_lock_timeout_keeps_the_rank_order():
    """A waiter that gives up leaves the others in rank order: once its ticket (rank 0, the heap's
    top) is removed, the later rank-0 waiter still goes before the rank-1 one that came between."""
    lk = PriorityLock("t")
    lk.acquire()
    order, gave_up = [], []

    def take(rank, tag, timeout=None):
        if lk.acquire(rank, timeout=timeout):
            order.append(tag)
            lk.release()
        else:
            gave_up.append(tag)
    threads = []
    for n, (rank, tag, timeout) in enumerate(((0, "first", 2.0), (1, "high", None),
                                               (0, "critical", None)), 1):
        threads.append(start_daemon(take, rank, tag, timeout))
        wait_until(lambda: lk.waiting == n, f"{n} waiters")
    wait_until(lambda: gave_up == ["first"], "the first waiter's timeout")
    assert lk.waiting == 2
    lk.release()
    for t in threads:
        t.join(10)
    assert order == ["critical", "high"] and lk.owner is None
