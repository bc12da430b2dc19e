"""cuzk.Engine on the CPU backend: proofs, lock modes x workers x simulated devices, faults,
budgets, cancellation, close, priorities, max_in_flight, key cache, soak.

Every wait is bounded (futures and close with a timeout; no pytest-timeout needed)."""
import contextlib
import os
import threading
import time

import numpy as np
import pytest

import cuzk
from cuzk import Engine, EngineBusy, EngineClosed, EngineError
from cuzk._errors import BudgetError, UnsatisfiedAssignmentError
from cuzk._engine import PLANS
from cuzk._stages import CpuStages, StageContext, stages_for
from cuzk._stages._cpu import host_partition_bytes

from engine_helpers import (TIMEOUT, FakeStages, Injected, Wrapped, circuit, engine,
                            verify_all)
from helpers import start_daemon, wait_until

MODES = sorted(PLANS)      # the three and ``overlap``


def _free_after(eng):
    """Budgets hold exactly the resident keys; nothing queued or in flight; no lock held."""
    st = eng.status()
    assert st["in_flight"] == 0 and sum(st["queued"].values()) == 0 and st["jobs_pending"] == 0
    for dev in st["devices"]:
        keys = sum(k["nbytes"][dev["index"]] for k in st["keys"])
        assert dev["budget"]["used"] == keys, dev["budget"]
        assert all(not v["held"] and v["waiting"] == 0 for v in dev["locks"].values()), dev
    for k in st["keys"]:
        assert k["in_use"] == 0


def _wait_idle(eng, timeout=TIMEOUT):
    """Until every worker is idle (a job's future resolves before its partition record ends)."""
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        st = eng.status()
        if st["in_flight"] == 0 and all(w["state"] == "idle" for d in st["devices"]
                                        for w in d["workers"]):
            return
        time.sleep(0.01)
    raise AssertionError(f"engine not idle after {timeout} s: {eng.status()}")


def test_engine_bytes_equal_prove():
    """Same (r, s) -> the engine's bytes equal cuzk.prove's (an independent code path)."""
    pk, asg = circuit(4)
    rs = [(3, 5), (7, 11), (123456789, 987654321)]
    with engine("cpu", workers_per_gpu=2, threads=2) as eng:
        out = eng.submit(pk, [asg] * 3, randomizers=rs).result(TIMEOUT)
        one = eng.prove(pk, [asg], "high", TIMEOUT, randomizers=rs[:1])   # submit + result
    want = b"".join(cuzk.prove(pk, asg, r, s, backend="cpu", threads=1) for r, s in rs)
    assert out == want and one == want[:192]
    verify_all(pk, out, [asg] * 3)


@pytest.mark.parametrize("devices", [1, 2])
@pytest.mark.parametrize("workers,share", [(1, "split"), (2, "split"), (4, "split"), (2, "adaptive"),
                                           (4, "adaptive")])
@pytest.mark.parametrize("mode", MODES)
def test_many_jobs(mode, workers, share, devices):
    pk4, a4 = circuit(4)
    pk5, a5 = circuit(5)
    jobs = []
    with engine("cpu", devices=devices, workers_per_gpu=workers, lock_mode=mode,
                threads=2, thread_share=share) as eng:
        k4, k5 = eng.load(pk4), eng.load(pk5)
        prios = ["low", "normal", "high", "critical"]
        for j in range(8):
            key, pk, a = (k4, pk4, a4) if j % 2 == 0 else (k5, pk5, a5)
            n = 1 + j % 3
            jobs.append((pk, [a] * n, eng.submit(key, [a] * n, priority=prios[j % 4])))
        for pk, asgs, fut in jobs:
            verify_all(pk, fut.result(TIMEOUT), asgs)
        _wait_idle(eng)
        _free_after(eng)
        m = eng.timeline.metrics()
        assert m["partitions"] == sum(len(a) for _, a, _ in jobs) and m["failed"] == 0
        used = {r.device for r in eng.timeline.records("partition")}
        assert used <= set(range(devices))
        st = eng.status()
    assert st["completed"] == m["partitions"]


BOUNDARIES = ["prepare-before", "prepare-after", "upload-before", "upload-after", "run-before",
              "run-after", "sync",
              "finish-before", "finish-after"]


@pytest.mark.parametrize("share", ["split", "adaptive"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("where", BOUNDARIES)
def test_injected_failure(where, mode, share):
    """The poisoned partition's job fails with the injected error; locks and reservations are
    released (adaptive: the host and region counts too, or the gate would stall); the other jobs
    finish and the workers go on."""
    pk, asg = circuit(4)
    poison = _clone(asg)
    stages = [Wrapped(CpuStages(1), fail={where: lambda a: a is poison}) for _ in range(2)]
    with engine(devices=2, workers_per_gpu=2, lock_mode=mode, stages=stages.__getitem__,
                threads=2, thread_share=share) as eng:
        good1 = eng.submit(pk, [asg] * 2)
        bad = eng.submit(pk, [asg, poison, asg])
        good2 = eng.submit(pk, [asg] * 3, priority="high")
        with pytest.raises(Injected, match=where) as err:
            bad.result(TIMEOUT)
        # the error names where it happened; a non-CUDA error quarantines no device
        assert any(f"job {bad.job_id} partition 1 of 3" in n for n in err.value.__notes__)
        assert all(d["failed"] is None for d in eng.status()["devices"])
        verify_all(pk, good1.result(TIMEOUT), [asg] * 2)
        verify_all(pk, good2.result(TIMEOUT), [asg] * 3)
        after = eng.submit(pk, [asg] * 2)            # the workers are still there
        verify_all(pk, after.result(TIMEOUT), [asg] * 2)
        _wait_idle(eng)
        _free_after(eng)
        errs = [r for r in eng.timeline.records("partition") if r.args["status"] == "error"]
        assert len(errs) == 1 and errs[0].job == bad.job_id and errs[0].partition == 1
        assert eng.status()["failed"] == 1
        assert [(d.host, d.regions) for d in eng.devices] == [(0, 0)] * 2
        assert eng._host_total == 0


@pytest.mark.parametrize("mode", MODES)
def test_bad_assignments(mode):
    pk4, a4 = circuit(4)
    _, a5 = circuit(5)
    aux = a4.aux.copy()
    aux[-1] ^= np.uint64(1)                       # breaks a row: a∘b != c
    broken = cuzk.Assignment(**{**{f: getattr(a4, f) for f in a4.__dataclass_fields__},
                                "aux": aux})
    r1cs, inputs, aux = cuzk.porep_like(4, 0)
    unsat = r1cs.assignment(inputs, aux)           # a/b/c of the witness, then break c
    c = unsat.c.copy()
    c[3] ^= np.uint64(1)
    unsat = cuzk.Assignment(**{**{f: getattr(unsat, f) for f in unsat.__dataclass_fields__},
                               "c": c})
    with engine("cpu", workers_per_gpu=2, lock_mode=mode, threads=2) as eng:
        good = eng.submit(pk4, [a4] * 2)
        wrong_size = eng.submit(pk4, [a4, a5])
        bad_row = eng.submit(pk4, [unsat])
        bad_aux = eng.submit(pk4, [broken])
        with pytest.raises(ValueError, match="points"):
            wrong_size.result(TIMEOUT)
        with pytest.raises(UnsatisfiedAssignmentError):
            bad_row.result(TIMEOUT)
        with pytest.raises((cuzk.ProofVerificationError, ValueError)):
            bad_aux.result(TIMEOUT)
        verify_all(pk4, good.result(TIMEOUT), [a4] * 2)
        _wait_idle(eng)
        _free_after(eng)
    with pytest.raises(TypeError, match="Assignment"):
        with engine("cpu", workers_per_gpu=1) as eng:
            eng.submit(pk4, [a4, "nope"])


@pytest.mark.parametrize("mode", MODES)
def test_out_of_budget(mode):
    """A partition larger than the budget less the resident keys fails at once with
    BudgetError (it would otherwise wait forever); smaller partitions still run."""
    pk4, a4 = circuit(4)
    pk6, a6 = circuit(6)
    st = CpuStages(1)
    keys = sum(int(getattr(p, q).nbytes) for p in (pk4, pk6) for q in ("h", "l", "a", "b_g1",
                                                                       "b_g2"))
    budget = keys + 2 * host_partition_bytes(a4)
    assert host_partition_bytes(a6) > 2 * host_partition_bytes(a4)
    with engine("cpu", workers_per_gpu=3, lock_mode=mode, vram_budget=budget, threads=2) as eng:
        k4, k6 = eng.load(pk4), eng.load(pk6)
        assert eng.status()["devices"][0]["budget"]["used"] == keys
        good = eng.submit(k4, [a4] * 6)
        big = eng.submit(k6, [a6])
        with pytest.raises(BudgetError, match="resident keys"):
            big.result(TIMEOUT)
        verify_all(pk4, good.result(TIMEOUT), [a4] * 6)
        _wait_idle(eng)
        _free_after(eng)
        peak = eng.status()["devices"][0]["budget"]["peak"]
        assert peak <= budget
        assert not eng.status()["devices"][0]["serialized"]   # two fit: the third worker's wait is normal
    # a key larger than the whole budget: BudgetError from load, nothing left reserved
    with engine("cpu", workers_per_gpu=1, vram_budget=100) as eng:
        with pytest.raises(BudgetError):
            eng.load(pk4)
        assert eng.status()["devices"][0]["budget"]["used"] == 0
    del st


def test_budget_for_one_partition_says_workers_take_turns(caplog):
    """Room beside the keys for one partition only: the second worker's reservation waits for
    the first partition, the engine says once that its workers take turns (status
    ``serialized``), and every proof verifies; with room for two it says nothing."""
    from cuzk._stages._cpu import _key_bytes
    pk4, a4 = circuit(4)
    keys = _key_bytes(pk4)
    part = host_partition_bytes(a4)
    for room, want in ((part + part // 2, True), (2 * part + part // 2, False)):
        caplog.clear()
        with caplog.at_level("WARNING", logger="cuzk.engine"):
            with engine("cpu", workers_per_gpu=2, lock_mode="two-lock", vram_budget=keys + room,
                        threads=2) as eng:
                k4 = eng.load(pk4)
                verify_all(pk4, eng.submit(k4, [a4] * 6).result(TIMEOUT), [a4] * 6)
                assert eng.status()["devices"][0]["serialized"] is want
        said = [r for r in caplog.records if "take turns" in r.getMessage()]
        assert len(said) == (1 if want else 0)


@pytest.mark.parametrize("where, hint", [("device", True), ("auto", False), (None, False)])
def test_take_turns_hint_names_key_where_when_forced(caplog, where, hint):
    """The "take turns" warning suggests streaming part of the key only where the caller forced
    the whole key onto the device (stage option key_where=device; an H100 80 GB at 2^27: 20.39 s
    per 10 partitions against 15.67 with "auto"); the CPU backend has no such option."""
    from types import SimpleNamespace
    from cuzk._budget import Budget, BudgetError
    from cuzk._engine._engine import _DeviceBudget
    stages = SimpleNamespace() if where is None else SimpleNamespace(key_where=where)
    budget = Budget(100, "cuda:0")
    held = budget.reserve(60, "the partition in flight")
    db = _DeviceBudget(budget, SimpleNamespace(stages=stages, reserving=1), workers=2)
    with caplog.at_level("WARNING", logger="cuzk.engine"):
        with pytest.raises(BudgetError):
            db.reserve(50, "the next partition", timeout=0.01)
    (said,) = [r.getMessage() for r in caplog.records if "take turns" in r.getMessage()]
    assert ("key_where=auto" in said) is hint and db.serialized
    held.release()


def _gated(n_devices=1, mode="narrow"):
    """Stages whose prepare of a partition picked by ``hold`` waits for ``gate``."""
    gate = threading.Event()
    held = set()
    stages = [Wrapped(CpuStages(1), gate=lambda a: gate if id(a) in held else None)
              for _ in range(n_devices)]
    return gate, held, stages


def _prepare_order(eng, skip=()):
    """(job, partition) of every prepare stage in the timeline, in start order, but the jobs in
    ``skip``."""
    return [(job, part) for _, job, part in sorted(
        (r.t0, r.job, r.partition) for r in eng.timeline.records("stage")
        if r.name == "prepare" and r.job not in skip)]


def _submit_in_thread(eng, *args):
    """``eng.submit(*args)`` (blocking) on a daemon thread (``start_daemon``); returns
    (thread, out): out receives the future.  A submit a defect leaves blocked fails the test
    through a bounded join instead of hanging it."""
    out = []
    return start_daemon(lambda: out.append(eng.submit(*args))), out


def _clone(asg):
    return cuzk.Assignment(**{f: getattr(asg, f) for f in asg.__dataclass_fields__})


def test_cancel_queued_partitions():
    pk, asg = circuit(4)
    gate, held, stages = _gated()
    blocker = _clone(asg)
    held.add(id(blocker))
    with engine(workers_per_gpu=1, stages=stages.__getitem__, threads=1) as eng:
        first = eng.submit(pk, [blocker])
        assert stages[0].entered.wait(TIMEOUT)
        victim = eng.submit(pk, [asg] * 5)
        others = [eng.submit(pk, [asg] * n, priority=p) for n, p in ((1, "high"), (2, "low"),
                                                                     (2, "normal"))]
        assert eng.status()["queued"] == {"critical": 0, "high": 1, "normal": 7, "low": 2}
        assert eng.status()["jobs_pending"] == 5
        assert victim.cancel() and victim.cancelled()
        assert eng.status()["queued"]["normal"] == 2 and eng.status()["jobs_pending"] == 4
        later = eng.submit(pk, [asg])
        gate.set()
        verify_all(pk, first.result(TIMEOUT), [blocker])
        verify_all(pk, later.result(TIMEOUT), [asg])
        for f in others:
            f.result(TIMEOUT)
        with pytest.raises(Exception):
            victim.result(0)
        _wait_idle(eng)
        _free_after(eng)
        ran = {r.job for r in eng.timeline.records("stage")}
        assert victim.job_id not in ran
        assert not later.cancel()                  # done futures cannot be cancelled
        # the queue left in order by the removal: high, the normal ones (the later job last), low
        hi, lo, nb = (f.job_id for f in others)
        seq = _prepare_order(eng, {first.job_id})
        assert seq == [(hi, 0), (nb, 0), (nb, 1), (later.job_id, 0), (lo, 0), (lo, 1)], seq


def test_close_while_submit_waits_for_a_slot():
    """A blocking submit waiting for a slot (``max_in_flight``) when the engine closes returns a
    cancelled future: none of its partitions was queued, and nothing would ever resolve it."""
    pk, asg = circuit(4)
    gate, held, stages = _gated()
    blocker = _clone(asg)
    held.add(id(blocker))
    eng = Engine(workers_per_gpu=1, max_in_flight=1, stages=stages.__getitem__, threads=1)
    running = eng.submit(pk, [blocker])
    assert stages[0].entered.wait(TIMEOUT)
    submitter, box = _submit_in_thread(eng, pk, [asg] * 3)
    submitter.join(0.3)
    assert submitter.is_alive() and not box          # waiting for the slot the blocker holds
    closer = start_daemon(lambda: eng.close(cancel_pending=True, timeout=TIMEOUT))
    submitter.join(TIMEOUT)
    assert not submitter.is_alive() and box[0].cancelled()
    gate.set()
    closer.join(TIMEOUT)
    assert not closer.is_alive()
    verify_all(pk, running.result(TIMEOUT), [blocker])
    st = eng.status()
    assert st["closed"] and st["in_flight"] == 0 and st["jobs_pending"] == 0


@pytest.mark.parametrize("cancel_pending", [False, True])
def test_close_with_work_in_flight(cancel_pending):
    pk, asg = circuit(4)
    gate, held, stages = _gated()
    blocker = _clone(asg)
    held.add(id(blocker))
    eng = Engine(workers_per_gpu=1, stages=stages.__getitem__, threads=1)
    running = eng.submit(pk, [blocker])
    assert stages[0].entered.wait(TIMEOUT)
    queued = [eng.submit(pk, [asg] * 2) for _ in range(3)]
    budget = eng.devices[0].budget
    closer = threading.Thread(target=eng.close, kwargs={"cancel_pending": cancel_pending,
                                                         "timeout": TIMEOUT})
    closer.start()
    t_end = time.monotonic() + TIMEOUT
    while not eng.status()["closing"] and time.monotonic() < t_end:
        time.sleep(0.005)
    with pytest.raises(EngineClosed):
        eng.submit(pk, [asg])
    closer.join(0.2)
    assert closer.is_alive(), "close returned while a partition was still running"
    gate.set()
    closer.join(TIMEOUT)
    assert not closer.is_alive()
    assert not any(ws.thread.is_alive() for ws in eng.devices[0].workers)
    verify_all(pk, running.result(TIMEOUT), [blocker])
    for f in queued:
        if cancel_pending:
            assert f.cancelled()
        else:
            verify_all(pk, f.result(TIMEOUT), [asg] * 2)
    assert budget.used == 0                       # keys released too
    st = eng.status()
    assert st["closed"] and all(w["state"] == "exited" for w in st["devices"][0]["workers"])
    assert st["in_flight"] == 0                   # cancelled partitions gave their slots back
    eng.close()                                   # idempotent
    with pytest.raises(EngineClosed):
        eng.load(pk)


def test_close_timeout_with_a_stuck_worker():
    """close(timeout) raises EngineError naming the worker when one is still running then;
    once it is done, close completes."""
    pk, asg = circuit(4)
    gate, held, stages = _gated()
    stuck = _clone(asg)
    held.add(id(stuck))
    eng = Engine(workers_per_gpu=1, stages=stages.__getitem__, threads=1)
    try:
        fut = eng.submit(pk, [stuck])
        assert stages[0].entered.wait(TIMEOUT)
        with pytest.raises(EngineError, match=r"close: worker .* still running after 0.2 s"):
            eng.close(timeout=0.2)
    finally:
        gate.set()
    eng.close(timeout=TIMEOUT)
    verify_all(pk, fut.result(TIMEOUT), [stuck])
    assert eng.status()["closed"]


def test_close_closes_every_worker_context_once():
    """close() closes each worker's stage context (CUDA: its streams, pinned staging and
    results) exactly once, also when close is called again."""
    pk, asg = circuit(4)
    closed = []

    class Ctx(StageContext):
        def close(self):
            closed.append(self.name)
            super().close()

    fake = FakeStages()
    fake.context = lambda budget=None, threads=None, name="w0": Ctx(fake, budget, threads, name)
    eng = Engine(devices=2, workers_per_gpu=2, stages=lambda i: fake, threads=1)
    try:
        assert len(eng.submit(pk, [asg] * 3).result(TIMEOUT)) == 3 * 192
    finally:
        eng.close(timeout=TIMEOUT)
    eng.close()
    names = [ctx.name for dev in eng.devices for ctx in dev.contexts]
    assert len(names) == 4 and sorted(closed) == sorted(names), (closed, names)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("mode", MODES)
def test_critical_starts_next(mode, workers):
    """A critical job submitted behind 20 queued partitions is the next one to start."""
    pk, asg = circuit(4)
    gate, held, stages = _gated(mode=mode)
    blockers = [_clone(asg) for _ in range(workers)]
    held.update(id(b) for b in blockers)
    with engine(workers_per_gpu=workers, lock_mode=mode, stages=stages.__getitem__,
                threads=2) as eng:
        firsts = [eng.submit(pk, [b]) for b in blockers]
        t_end = time.monotonic() + TIMEOUT
        while sum(1 for w in eng.status()["devices"][0]["workers"]
                  if w["state"] != "idle") < workers:
            assert time.monotonic() < t_end
            time.sleep(0.005)
        normal = [eng.submit(pk, [asg] * 5, priority=p) for p in ("normal", "low", "high",
                                                                  "normal")]
        assert sum(eng.status()["queued"].values()) == 20
        crit = eng.submit(pk, [asg], priority="critical")
        gate.set()
        verify_all(pk, crit.result(TIMEOUT), [asg])
        for f in firsts + normal:
            f.result(TIMEOUT)
        _wait_idle(eng)
        gated = {f.job_id for f in firsts}
        seq = _prepare_order(eng, gated)
        order = [j for j, _ in seq]
        assert order[0] == crit.job_id, order
        # then by priority: high, normal (in submission order), low
        jobs = [f.job_id for f in normal]
        ranks = {jobs[0]: 2, jobs[1]: 3, jobs[2]: 1, jobs[3]: 2, crit.job_id: 0}
        assert [ranks[j] for j in order] == sorted(ranks[j] for j in order)
        if workers == 1:    # one worker: partitions start in queue order, FIFO within a priority
            assert seq == [(crit.job_id, 0)] + [(j, i) for j in (jobs[2], jobs[0], jobs[3], jobs[1])
                                                for i in range(5)], seq


def test_max_in_flight():
    pk, asg = circuit(4)
    gate, held, stages = _gated()
    blocker = _clone(asg)
    held.add(id(blocker))
    with engine(workers_per_gpu=1, max_in_flight=3, stages=stages.__getitem__,
                threads=1) as eng:
        first = eng.submit(pk, [blocker, asg])
        assert stages[0].entered.wait(TIMEOUT)
        with pytest.raises(EngineBusy):
            eng.submit(pk, [asg] * 2, block=False)
        assert eng.status()["in_flight"] == 2
        second = eng.submit(pk, [asg], block=False)          # exactly fits
        done = threading.Event()
        box = []

        def blocking():
            box.append(eng.submit(pk, [asg] * 4))            # waits for slots
            done.set()

        t = threading.Thread(target=blocking)
        t.start()
        assert not done.wait(0.2)                            # blocked behind the gate
        assert eng.status()["in_flight"] == 3
        gate.set()
        assert done.wait(TIMEOUT)
        t.join(TIMEOUT)
        verify_all(pk, first.result(TIMEOUT), [blocker, asg])
        verify_all(pk, second.result(TIMEOUT), [asg])
        verify_all(pk, box[0].result(TIMEOUT), [asg] * 4)
        _wait_idle(eng)
        _free_after(eng)
        assert eng.status()["devices"][0]["budget"]["peak"] <= (
            eng.status()["keys"][0]["nbytes"][0] + 3 * host_partition_bytes(asg))


def test_failed_job_runs_no_further_partition():
    """A job whose first partition fails while its blocking submit waits for a slot
    (``max_in_flight=1``) runs nothing more: the slot the failure frees queues nothing (the job
    has failed when the slot comes), the rest is never queued; the slots and the key's uses
    return; the worker counts the two partitions it handled."""
    pk, asg = circuit(4)
    poison = _clone(asg)
    stages = [Wrapped(CpuStages(1), fail={"prepare-before": lambda a: a is poison})]
    with engine(workers_per_gpu=1, max_in_flight=1, stages=stages.__getitem__, threads=1) as eng:
        t, box = _submit_in_thread(eng, pk, [poison] + [asg] * 3)
        t.join(TIMEOUT)
        assert not t.is_alive(), "the blocking submit never got its slots back"
        bad = box[0]
        with pytest.raises(Injected, match="prepare-before"):
            bad.result(TIMEOUT)
        wait_until(lambda: eng.status()["in_flight"] == 0, "every slot back")
        good = eng.submit(pk, [asg], block=False)     # the slot came back
        verify_all(pk, good.result(TIMEOUT), [asg])
        _wait_idle(eng)
        _free_after(eng)
        ran = {r.partition for r in eng.timeline.records("stage") if r.job == bad.job_id}
        assert ran == {0}, ran
        got = [(r.partition, r.args["status"]) for r in eng.timeline.records("partition")
               if r.job == bad.job_id]
        assert got == [(0, "error")], got     # the slot freed by the failure queued nothing
        assert sum(w["done"] for w in eng.status()["devices"][0]["workers"]) == 2
        assert eng.status()["failed"] == 1


def test_partition_of_a_job_that_failed_after_its_dequeue_is_skipped():
    """A partition dequeued just before its job fails (on another worker) is skipped: it runs
    no stage, records status "skipped", and returns its slot and key use.  The race is made
    deterministic: the failing partition's prepare waits until the other is dequeued, and that
    one is held after its dequeue until the job has failed."""
    pk, asg = circuit(4)
    poison = _clone(asg)
    dequeued = threading.Event()
    stages = [Wrapped(CpuStages(1), fail={"prepare-before": lambda a: a is poison},
                      gate=lambda a: dequeued if a is poison else None)]
    with engine(workers_per_gpu=2, stages=stages.__getitem__, threads=1) as eng:
        run = eng._run_partition        # called per dequeued task (the workers block in get)

        def held_run(dev, ws, ctx, task):
            if task.index == 1:
                dequeued.set()
                assert task.job.future.exception(TIMEOUT) is not None
            return run(dev, ws, ctx, task)
        eng._run_partition = held_run
        bad = eng.submit(pk, [poison, asg])
        with pytest.raises(Injected, match="prepare-before"):
            bad.result(TIMEOUT)
        wait_until(lambda: eng.status()["in_flight"] == 0, "every slot back")
        _wait_idle(eng)
        _free_after(eng)
        got = sorted((r.partition, r.args["status"]) for r in eng.timeline.records("partition")
                     if r.job == bad.job_id)
        assert got == [(0, "error"), (1, "skipped")], got
        ran = {r.partition for r in eng.timeline.records("stage") if r.job == bad.job_id}
        assert ran == {0}, ran
        st = eng.status()
        assert (st["failed"], st["completed"]) == (1, 0)
        assert all(k.in_use == 0 for k in eng.keys)


def test_status_names_what_each_worker_runs():
    """``status()`` from inside a stage: the worker's state is the stage, with the job and
    partition it runs and the partitions it finished before; idle with none after."""
    pk, asg = circuit(4)
    seen, engines = [], []
    fake = FakeStages(on_run=lambda part: seen.append(
        engines[0].status()["devices"][0]["workers"]))
    with engine(workers_per_gpu=1, stages=lambda i: fake) as eng:
        engines.append(eng)
        fut = eng.submit(pk, [asg] * 2)
        assert len(fut.result(TIMEOUT)) == 384
        _wait_idle(eng)
        after = eng.status()["devices"][0]["workers"]
    got = [(w[0]["state"], w[0]["job"], w[0]["partition"], w[0]["done"]) for w in seen]
    assert got == [("run", fut.job_id, 0, 0), ("run", fut.job_id, 1, 1)], got
    assert [(w["state"], w["job"], w["partition"], w["done"]) for w in after] == \
        [("idle", None, None, 2)]


@pytest.mark.parametrize("mode,workers,want", [("coarse", 3, 1), ("narrow", 3, 3),
                                                ("two-lock", 2, 2), ("overlap", 1, 1)])
def test_key_placed_for_the_partitions_in_flight(mode, workers, want):
    """``load`` asks the stages to place the key for the partitions that may hold device memory
    at once: one under ``coarse`` (one lock around the whole partition), else one per worker."""
    pk, _ = circuit(4)
    asked = []

    class Placing(Wrapped):
        def load_key(self, *a, **kw):
            asked.append(kw.get("partitions"))
            return super().load_key(*a, **kw)
    with engine(workers_per_gpu=workers, lock_mode=mode, stages=lambda i: Placing(CpuStages(1)),
                threads=1) as eng:
        eng.load(pk, progress=False)
    assert asked == [want]


def test_failed_job_drops_its_queued_partitions():
    """The queued partitions of a failed job leave the queue at once: with one worker (which
    handles the failure before it takes the next partition), the three behind the failing one
    are never dequeued, so they leave no partition record (not even "skipped")."""
    pk, asg = circuit(4)
    poison = _clone(asg)
    stages = [Wrapped(CpuStages(1), fail={"prepare-before": lambda a: a is poison})]
    with engine(workers_per_gpu=1, stages=stages.__getitem__, threads=1) as eng:
        bad = eng.submit(pk, [poison] + [asg] * 3)
        with pytest.raises(Injected, match="prepare-before"):
            bad.result(TIMEOUT)
        _wait_idle(eng)
        _free_after(eng)
        got = [(r.partition, r.args["status"]) for r in eng.timeline.records("partition")
               if r.job == bad.job_id]
        assert got == [(0, "error")], got


def test_key_cache_and_evict(tmp_path):
    pk4, a4 = circuit(4)
    pk5, a5 = circuit(5)
    path = tmp_path / "k4.params"
    cuzk.write_params(str(path), pk4)
    with engine("cpu", devices=2, workers_per_gpu=1) as eng:
        k = eng.load(str(path))
        assert eng.load(os.path.join(str(tmp_path), ".", "k4.params")) is k
        assert eng.load(k) is k and k.path == os.path.realpath(path)
        k5 = eng.load(pk5)
        assert eng.load(pk5) is k5 and len(eng.keys) == 2
        st = eng.status()
        assert [x["where"] for x in st["keys"]] == [["host", "host"], ["host", "host"]]
        assert [x["kept"] for x in st["keys"]] == [[[], []], [[], []]]
        assert [x["h_msm"] for x in st["keys"]] == [[None, None], [None, None]]   # no H copies on the CPU
        assert [x["h_tables"] for x in st["keys"]] == [[None, None], [None, None]]  # no twiddle tables
        verify_all(pk4, eng.submit(str(path), [a4] * 2).result(TIMEOUT), [a4] * 2)
        verify_all(pk5, eng.submit(k5, [a5]).result(TIMEOUT), [a5])
        _wait_idle(eng)
        used = [d["budget"]["used"] for d in eng.status()["devices"]]
        assert eng.evict(k)
        assert not eng.evict(k)
        after = [d["budget"]["used"] for d in eng.status()["devices"]]
        assert [u - a for u, a in zip(used, after)] == k.nbytes and all(k.nbytes)
        with pytest.raises(EngineError, match="evicted"):
            eng.submit(k, [a4])
        # in use: refuse
        gate, held, stages = _gated()
    blocker = _clone(a4)
    held.add(id(blocker))
    with engine(workers_per_gpu=1, stages=stages.__getitem__) as eng:
        key = eng.load(pk4)
        fut = eng.submit(key, [blocker])
        with pytest.raises(EngineError, match="queued or running"):
            eng.evict(key)
        gate.set()
        fut.result(TIMEOUT)
        _wait_idle(eng)
        assert eng.evict(pk4)
    with pytest.raises(cuzk.FormatError):
        with engine("cpu", workers_per_gpu=1) as eng:
            bad = tmp_path / "bad.params"
            bad.write_bytes(b"\0" * 10)
            eng.load(str(bad))


def test_arguments():
    with pytest.raises(ValueError, match="lock mode"):
        Engine("cpu", lock_mode="fine")
    with pytest.raises(ValueError, match="workers_per_gpu"):
        Engine("cpu", workers_per_gpu=0)
    with pytest.raises(ValueError, match="devices"):
        Engine("cpu", devices=0)
    with pytest.raises(ValueError, match="max_in_flight"):
        Engine("cpu", max_in_flight=0)
    pk, asg = circuit(4)
    with engine("cpu", workers_per_gpu=1, lock_mode="two_lock") as eng:
        assert eng.lock_mode == "two-lock"
        with pytest.raises(ValueError, match="priority"):
            eng.submit(pk, [asg], priority="urgent")
        with pytest.raises(ValueError, match="at least one"):
            eng.submit(pk, [])
        with pytest.raises(ValueError, match="randomizer"):
            eng.submit(pk, [asg], randomizers=[(1, 2), (3, 4)])
        with pytest.raises(ValueError, match=r"\[0, r\)"):
            eng.submit(pk, [asg], randomizers=[(-1, 2)]).result(TIMEOUT)


@pytest.mark.parametrize("mode,expect", [("coarse", False), ("narrow", True),
                                         ("two-lock", True)])
def test_prepare_overlaps_kernel_region(mode, expect):
    """Timing-independent: with narrow and two-lock, one worker's prepare runs while another
    worker is inside run (the kernel region); with coarse it cannot (the waits are bounded)."""
    pk, asg = circuit(4)
    a0, a1 = _clone(asg), _clone(asg)
    t = TIMEOUT if expect else 0.5
    a0_in_run, a1_entered = threading.Event(), threading.Event()
    running, observed = [False], []

    def on_prepare(part):
        if part.asg is a1:
            a0_in_run.wait(t)
            observed.append(running[0])
            a1_entered.set()

    def on_run(part):
        if part.asg is a0:
            running[0] = True
            a0_in_run.set()
            a1_entered.wait(t)
            running[0] = False

    fake = FakeStages(on_prepare=on_prepare, on_run=on_run)
    _run_pair(pk, a0, a1, mode, fake)
    assert observed == [expect]
    assert not fake.live


def _run_pair(pk, a0, a1, mode, fake):
    """One job of partitions ``a0``, ``a1`` through two workers on ``fake``; the timeline's
    records once both ended and every reserved byte was freed."""
    with engine(workers_per_gpu=2, lock_mode=mode, stages=lambda i: fake) as eng:
        out = eng.submit(pk, [a0, a1]).result(TIMEOUT)
        assert len(out) == 384
        _wait_idle(eng)
        _free_after(eng)
        return eng.timeline.records()


@pytest.mark.parametrize("mode,expect", [("coarse", False), ("narrow", False),
                                         ("two-lock", False), ("overlap", True)])
def test_run_overlaps_previous_region(mode, expect):
    """Timing-independent: with ``overlap`` a second partition's run (its region enqueued)
    starts while the first partition is still in sync (its region running); every other mode
    holds its compute (or device) lock through sync, so it cannot (the waits are bounded)."""
    pk, asg = circuit(4)
    a0, a1 = _clone(asg), _clone(asg)
    t = TIMEOUT if expect else 0.5
    a1_in_run, observed = threading.Event(), []

    def on_run(part):
        if part.asg is a1:
            a1_in_run.set()

    def on_sync(part):
        if part.asg is a0:
            observed.append(a1_in_run.wait(t))

    fake = FakeStages(on_run=on_run, on_sync=on_sync)
    records = _run_pair(pk, a0, a1, mode, fake)
    holds = [r for r in records if r.kind == "hold" and r.name == "compute"]
    syncs = {r.partition: r for r in records if r.kind == "stage" and r.name == "sync"}
    assert observed == [expect]
    assert not fake.live
    if mode == "overlap":       # each compute hold ends before its partition's sync begins
        assert len(holds) == 2
        assert all(h.t1 <= syncs[h.partition].t0 for h in holds)


def _rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _soak(n):
    pk, asg = circuit(4)
    with engine("cpu", workers_per_gpu=2, lock_mode="narrow", threads=2,
                timeline_maxlen=4096) as eng:
        key = eng.load(pk)
        warm = n // 5
        for f in [eng.submit(key, [asg]) for _ in range(warm)]:
            f.result(TIMEOUT)
        rss0 = _rss()
        futs = []
        for i in range(n - warm):
            futs.append(eng.submit(key, [asg], priority=("low", "normal", "high")[i % 3]))
            if len(futs) >= 50 or i == n - warm - 1:
                for f in futs:
                    last = f.result(TIMEOUT)
                    assert len(last) == 192
                futs = []
        verify_all(pk, last, [asg])
        _wait_idle(eng)
        rss1 = _rss()
        _free_after(eng)
        assert eng.status()["completed"] == n
        assert eng.devices[0].budget.peak <= key.nbytes[0] + 2 * host_partition_bytes(asg)
    return rss0, rss1


def test_soak_1000():
    """1,000 tiny proofs through one engine (about 25 s on 2 busy cores: under the 60 s that
    would make it ``slow``): host RSS flat after a 200-proof warm-up."""
    rss0, rss1 = _soak(1000)
    assert rss1 - rss0 < 8 << 20, (rss0, rss1)


def test_stages_for_cpu_is_what_the_engine_uses():
    with engine("cpu", devices=2, workers_per_gpu=1) as eng:
        assert [d.stages.name for d in eng.devices] == ["cpu", "cpu"]
        assert [d.label for d in eng.devices] == ["cpu:0", "cpu:1"]
        assert type(eng.devices[0].stages) is type(stages_for("cpu"))


@pytest.mark.parametrize("verify", [True, False])
def test_verify_flag_reaches_finish(verify):
    pk, asg = circuit(4)
    seen = []
    fake = FakeStages()
    inner = fake.finish
    fake.finish = lambda part, verify=True: seen.append(verify) or inner(part, verify)
    with engine(workers_per_gpu=1, stages=lambda i: fake, verify=verify) as eng:
        eng.submit(pk, [asg] * 3).result(TIMEOUT)
    assert seen == [verify] * 3


def test_stage_records_carry_their_own_timings():
    """Each stage record's ``timings`` are what that stage added to the partition's timings
    (the bench's per-stage medians read them): prepare's validation and prep_msm, run's
    reductions, finish's epilogue and verification, and no key in two stages' records."""
    pk, asg = circuit(4)
    with engine(workers_per_gpu=1, threads=1) as eng:
        eng.submit(pk, [asg] * 2).result(TIMEOUT)
        recs = [r for r in eng.timeline.records("stage") if r.partition == 1]
    t = {r.name: set((r.args or {}).get("timings", {})) for r in recs}
    assert {"validate", "prep_msm"} <= t["prepare"] and "h" in t["run"]
    assert {"epilogue", "verify"} <= t["finish"], t
    keys = [k for names in t.values() for k in names]
    assert len(keys) == len(set(keys)), t


class _FakeNvtx:
    """The ``nvtx`` package's calls the engine makes, recorded per thread: ranges opened by
    ``annotate`` (stages) and ``push_range``/``pop_range`` (lock holds)."""

    def __init__(self):
        self.mu = threading.Lock()
        self.stacks, self.names = {}, []

    def _stack(self):
        return self.stacks.setdefault(threading.get_ident(), [])

    def push_range(self, message, color=None, domain=None):
        with self.mu:
            self._stack().append(message)
            self.names.append(message)

    def pop_range(self, domain=None):
        with self.mu:
            self._stack().pop()

    @contextlib.contextmanager
    def annotate(self, message, color=None, domain=None):
        self.push_range(message)
        try:
            yield
        finally:
            self.pop_range()


@pytest.mark.parametrize("mode", MODES)
def test_nvtx_ranges_balanced_with_failures(monkeypatch, mode):
    """With ``nvtx`` present every stage and every lock hold is one range, and every range a
    worker opens it closes, also when a stage fails under a lock (an injected failure at each
    boundary of one partition each)."""
    from cuzk._engine import _nvtx
    fake = _FakeNvtx()
    monkeypatch.setattr(_nvtx, "_nvtx", fake)
    pk, asg = circuit(4)
    where = ["prepare-after", "upload-after", "run-after", "sync", "finish-before"]
    bad = {w: _clone(asg) for w in where}
    fail = {w: (lambda a, w=w: a is bad[w]) for w in where}
    stages = [Wrapped(CpuStages(1), fail=fail)]
    with engine(workers_per_gpu=2, lock_mode=mode, stages=stages.__getitem__, threads=1) as eng:
        jobs = [eng.submit(pk, [bad[w]]) for w in where] + [eng.submit(pk, [asg] * 2)]
        for w, job in zip(where, jobs):
            with pytest.raises(Injected, match=w):
                job.result(TIMEOUT)
        verify_all(pk, jobs[-1].result(TIMEOUT), [asg] * 2)
        _wait_idle(eng)
    assert all(not st for st in fake.stacks.values()), fake.stacks
    held = {"coarse": {"hold device"}}.get(mode, {"hold compute"} | (
        {"hold memory"} if mode in ("two-lock", "overlap") else set()))
    assert held <= set(fake.names)
    assert {"prepare", "upload", "run", "sync", "finish"} <= set(fake.names)


def test_nvtx_missing_is_said_once(caplog):
    import logging
    from cuzk._engine import _nvtx
    if _nvtx._nvtx is not None:
        pytest.skip("the nvtx package is installed here")
    _nvtx._said = False
    with caplog.at_level(logging.INFO, logger="cuzk.engine"):
        assert not _nvtx.available() and not _nvtx.available()
        with _nvtx.nvtx_range("run"):
            _nvtx.push("hold compute")
            _nvtx.pop()
    assert sum("nvtx" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize("mode", MODES)
def test_failing_device_leaves_the_other_working(mode):
    """Issue 11 on simulated devices: device 1's kernel region always fails with a CudaError.
    Every job whose partitions ran there fails with that typed error; the jobs device 0 ran
    verify; device 0's workers keep proving afterwards; per-device accounting returns to zero."""
    from cuzk._errors import CudaError

    class DeadDevice(Wrapped):
        def run(self, part):
            raise CudaError("cuLaunchKernel", 719, "CUDA_ERROR_LAUNCH_FAILED", "injected")

    pk, asg = circuit(4)
    stages = [Wrapped(CpuStages(1)), DeadDevice(CpuStages(1))]
    with engine(devices=2, workers_per_gpu=1, lock_mode=mode, stages=stages.__getitem__,
                threads=1) as eng:
        futs = [eng.submit(pk, [asg]) for _ in range(12)]
        ok = failed = 0
        for f in futs:
            try:
                verify_all(pk, f.result(TIMEOUT), [asg])
                ok += 1
            except CudaError:
                failed += 1
        # device 1 fails once and is quarantined; device 0 proves the rest
        assert ok + failed == 12 and failed <= 1 and ok >= 11
        parts = eng.timeline.records("partition")
        assert all(r.args["status"] == "ok" for r in parts if r.device == 0)
        assert all(r.args["status"] == "error" for r in parts if r.device == 1)
        st = eng.status()
        assert st["devices"][0]["failed"] is None
        assert failed == 0 or "CUDA_ERROR_LAUNCH_FAILED" in st["devices"][1]["failed"]
        verify_all(pk, eng.submit(pk, [asg] * 3).result(TIMEOUT), [asg] * 3)
        st = eng.status()
        assert st["in_flight"] == 0 and sum(st["queued"].values()) == 0
        for dev in st["devices"]:
            keys = sum(k["nbytes"][dev["index"]] for k in st["keys"])
            assert dev["budget"]["used"] == keys


def test_worker_of_a_quarantined_device_hands_partitions_back():
    """A worker that dequeues a partition after its device was quarantined hands it back to the
    queue and stops: the partition is proved on the other device, nothing runs on the
    quarantined one, no job is lost.  Deterministic: device 0 is quarantined by hand (the state
    a fault leaves), device 1's two workers are held in prepare, so device 0's two workers are
    the only ones that can dequeue the next job's partitions."""
    from cuzk._errors import CudaError
    pk, asg = circuit(4)
    hold = threading.Event()
    stages = [Wrapped(CpuStages(1)), Wrapped(CpuStages(1), gate=lambda a: hold)]
    # "split": no host gate, so both of device 1's workers enter prepare
    with engine(devices=2, workers_per_gpu=2, stages=stages.__getitem__, threads=2,
                thread_share="split") as eng:
        try:
            eng.devices[0].failed = CudaError("cuLaunchKernel", 719, "CUDA_ERROR_LAUNCH_FAILED",
                                              "by hand")
            blockers = eng.submit(pk, [asg] * 2)
            wait_until(lambda: [w["state"] for w in eng.status()["devices"][1]["workers"]]
                       == ["prepare"] * 2, "device 1's workers held in prepare")
            job = eng.submit(pk, [asg] * 2)
            wait_until(lambda: [w["state"] for w in eng.status()["devices"][0]["workers"]]
                       == ["quarantined"] * 2, "device 0's workers to hand their partitions back")
        finally:
            hold.set()
        verify_all(pk, blockers.result(TIMEOUT), [asg] * 2)
        verify_all(pk, job.result(TIMEOUT), [asg] * 2)
        assert not [r for r in eng.timeline.records("stage") if r.device == 0]
        assert eng.status()["in_flight"] == 0


def test_every_device_quarantined_fails_queued_jobs():
    """When the only device faults, its queued jobs fail with EngineError and submit refuses."""
    from cuzk._errors import CudaError

    class DeadDevice(Wrapped):
        def run(self, part):
            raise CudaError("cuLaunchKernel", 719, "CUDA_ERROR_LAUNCH_FAILED", "injected")

    pk, asg = circuit(4)
    stages = [DeadDevice(CpuStages(1))]
    with engine(devices=1, workers_per_gpu=1, stages=stages.__getitem__, threads=1) as eng:
        futs = [eng.submit(pk, [asg]) for _ in range(5)]
        errors = []
        for f in futs:
            with pytest.raises((CudaError, EngineError)) as e:
                f.result(TIMEOUT)
            errors.append(type(e.value))
        assert errors.count(CudaError) >= 1 and errors[0] is CudaError
        with pytest.raises(EngineError, match="quarantined"):
            eng.submit(pk, [asg])
        st = eng.status()       # the dropped partitions gave back their slots and key uses
        assert st["in_flight"] == 0 and st["jobs_pending"] == 0 and st["keys"][0]["in_use"] == 0
