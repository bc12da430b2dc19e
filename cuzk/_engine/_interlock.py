"""The per-device interlock: which locks a worker holds around which stage (DESIGN §4).

A lock mode is a *plan*: the sequence of lock acquisitions, stage calls and lock releases one
worker performs for one partition.  The engine's workers execute the plan step by step and the
deadlock model (``_model.py``) explores every interleaving of the same plans, so the protocol
is written down once, here.

Stages (the stage interface of ``cuzk._stages``): ``prepare`` (host work: validation, the
a∘b = c check, prep_msm), ``upload`` (budget reservation, allocation, upload issue), ``run``
(the kernel region is enqueued), ``sync`` (wait for its last event), ``finish`` (host epilogue,
verification, release of the reservation).

* ``coarse``: one ``device`` lock around prepare + upload + run + sync + finish.
* ``narrow``: prepare and upload outside; the ``compute`` lock around run + sync; finish outside.
* ``two-lock``: prepare outside; the ``memory`` lock around upload (reservation, allocation,
  upload issue: pre-staging the next partition while another computes), the ``compute`` lock
  around run + sync; order memory -> compute, never nested the other way.
* ``overlap`` (opt-in, not in ``LOCK_MODES``' default comparison): two-lock with the ``compute``
  lock around run only (the region *enqueued*), sync outside it: the next partition's kernels
  are enqueued while this one's still run, so the GPU may overlap the end of one region with
  the start of the next (kernel tails, low-occupancy steps).  Safe because every stage orders
  its device work by its own streams' events and each partition reserves its own scratch
  (a streamed key's slots wait for the previous user's events, ``StreamedKey.take_slots``).
* ``EARLY_PLANS``: a partition that finds its device idle runs
  ``early_head`` (upload, the H kernels, prep_msm under them, the second upload) and
  ``early_rest`` (the other kernels) under its mode's locks instead of prepare/upload/run.

Invariant the model checks: a worker that waits for the budget (inside ``prepare``) holds no
lock that a reservation holder needs before it can release (the budget wait is in ``upload``;
``finish`` runs outside every lock in narrow, two-lock and overlap; in coarse the lock holder is
the only partition holding a reservation).

Locks hand themselves to the waiter with the best ``(priority rank, arrival)``: a ``critical``
partition waits at most for the kernel region already running.  Waiting uses
:class:`threading.Condition` (the GIL is released while blocked).
"""
import heapq
import itertools
import threading
import time

__all__ = ["LOCK_MODES", "ACQUIRE", "RELEASE", "STAGE", "GATE", "STAGES", "PLANS", "EARLY_PLANS",
           "LOCK_RANK", "lock_mode_arg", "gated_plan", "PriorityLock", "Interlock"]

#: The issue's three modes: what ``cuzk bench`` compares by default.  ``PLANS`` also has
#: ``overlap`` (opt-in).
LOCK_MODES = ("coarse", "narrow", "two-lock")
ACQUIRE, RELEASE, STAGE = "acquire", "release", "stage"
#: ``(GATE, "host")``, right before prepare in the plans of ``thread_share="adaptive"``
#: (``gated_plan``): wait while no kernel region runs on the device and another of its workers is
#: between this step and the end of its upload.  Holds nothing new.
GATE = "gate"
#: Stage calls of one partition, in order (``sync`` is ``run(...).synchronize()``), then those of
#: the early plans (``EARLY_PLANS``).
STAGES = ("prepare", "upload", "run", "sync", "finish", "early_head", "early_rest")

PLANS = {
    "coarse": ((ACQUIRE, "device"), (STAGE, "prepare"), (STAGE, "upload"), (STAGE, "run"),
               (STAGE, "sync"), (STAGE, "finish"), (RELEASE, "device")),
    "narrow": ((STAGE, "prepare"), (STAGE, "upload"), (ACQUIRE, "compute"), (STAGE, "run"),
               (STAGE, "sync"), (RELEASE, "compute"), (STAGE, "finish")),
    "two-lock": ((STAGE, "prepare"), (ACQUIRE, "memory"), (STAGE, "upload"), (RELEASE, "memory"),
                 (ACQUIRE, "compute"), (STAGE, "run"), (STAGE, "sync"), (RELEASE, "compute"),
                 (STAGE, "finish")),
    "overlap": ((STAGE, "prepare"), (ACQUIRE, "memory"), (STAGE, "upload"), (RELEASE, "memory"),
                (ACQUIRE, "compute"), (STAGE, "run"), (RELEASE, "compute"), (STAGE, "sync"),
                (STAGE, "finish")),
}

#: The early plans: the H kernels enqueued before prep_msm (``early_head``: validate, upload a, b,
#: c, enqueue the H NTT and MSM, prep_msm while they run, upload its output; ``early_rest``: the
#: remaining kernels), as ``cuzk.prove`` does.  A partition takes one only when it finds its
#: device with no other partition in flight (the ramp of a job: its first kernel ~0.3 s earlier
#: at 2^27).  early_head holds the compute lock, so its reservations never wait: when another
#: partition holds device bytes as it starts, or its bytes do not fit, the worker aborts the
#: partition, releases its locks and runs the mode's plan from the start (the fallback; the
#: model explores it).
EARLY_PLANS = {
    "coarse": ((ACQUIRE, "device"), (STAGE, "early_head"), (STAGE, "early_rest"), (STAGE, "sync"),
               (STAGE, "finish"), (RELEASE, "device")),
    "narrow": ((ACQUIRE, "compute"), (STAGE, "early_head"), (STAGE, "early_rest"), (STAGE, "sync"),
               (RELEASE, "compute"), (STAGE, "finish")),
    "two-lock": ((ACQUIRE, "memory"), (ACQUIRE, "compute"), (STAGE, "early_head"),
                 (RELEASE, "memory"), (STAGE, "early_rest"), (STAGE, "sync"), (RELEASE, "compute"),
                 (STAGE, "finish")),
    "overlap": ((ACQUIRE, "memory"), (ACQUIRE, "compute"), (STAGE, "early_head"),
                (RELEASE, "memory"), (STAGE, "early_rest"), (RELEASE, "compute"), (STAGE, "sync"),
                (STAGE, "finish")),
}


def gated_plan(plan):
    """``plan`` with ``(GATE, "host")`` inserted right before its prepare."""
    i = plan.index((STAGE, "prepare"))
    return plan[:i] + ((GATE, "host"),) + plan[i:]


#: Lock order: a worker may only acquire a lock of a higher rank than every lock it holds.
LOCK_RANK = {"memory": 0, "compute": 1, "device": 1}


def lock_mode_arg(mode):
    """Normalise a lock mode name (``two_lock`` and ``twolock`` are accepted for ``two-lock``).

    Raises
    ------
    ValueError
        Unknown mode.
    """
    m = str(mode).strip().lower().replace("_", "-")
    if m == "twolock":
        m = "two-lock"
    if m not in PLANS:
        raise ValueError(f"unknown lock mode {mode!r}; known: {', '.join(PLANS)}")
    return m


class PriorityLock:
    """A non-reentrant lock granted to the waiter with the lowest ``(rank, arrival)``.

    ``acquire`` blocks with the GIL released (``threading.Condition.wait``).  Only the owning
    thread may release.
    """

    def __init__(self, name):
        self.name = name
        self._cond = threading.Condition(threading.Lock())
        self._owner = None
        self._waiters = []               # heap of (rank, seq)
        self._seq = itertools.count()

    @property
    def owner(self):
        """Thread ident of the holder, or None."""
        return self._owner

    @property
    def waiting(self):
        """Number of threads waiting to acquire."""
        return len(self._waiters)

    def acquire(self, rank=1, timeout=None):
        """Take the lock; returns False when ``timeout`` seconds passed first."""
        me = threading.get_ident()
        with self._cond:
            if self._owner == me:
                raise RuntimeError(f"lock {self.name!r} is not reentrant")
            if self._owner is None and not self._waiters:
                self._owner = me
                return True
            ticket = (int(rank), next(self._seq))
            heapq.heappush(self._waiters, ticket)
            deadline = None if timeout is None else time.monotonic() + timeout
            while not (self._owner is None and self._waiters[0] == ticket):
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    self._waiters.remove(ticket)
                    heapq.heapify(self._waiters)
                    self._cond.notify_all()      # the next ticket may be free to go now
                    return False
                self._cond.wait(left)
            heapq.heappop(self._waiters)
            self._owner = me
            return True

    def release(self):
        with self._cond:
            if self._owner != threading.get_ident():
                raise RuntimeError(f"lock {self.name!r} released by a thread that does not hold it")
            self._owner = None
            self._cond.notify_all()


class Interlock:
    """The locks of one device for one lock mode, with the lock order enforced per thread.

    Parameters
    ----------
    mode : {"coarse", "narrow", "two-lock", "overlap"}
    name : str
        Device label (for messages).
    gated : bool
        The plan has the host gate (``gated_plan``: ``thread_share="adaptive"``).
    """

    def __init__(self, mode, name="device", gated=False):
        self.mode = lock_mode_arg(mode)
        self.name = name
        self.plan = gated_plan(PLANS[self.mode]) if gated else PLANS[self.mode]
        #: the mode's early plan (``EARLY_PLANS``), or None
        self.early_plan = EARLY_PLANS.get(self.mode)
        self.locks = {n: PriorityLock(f"{name}/{n}") for k, n in self.plan if k == ACQUIRE}
        self._held = threading.local()

    def held(self):
        """Names of the locks the calling thread holds, in acquisition order."""
        return list(getattr(self._held, "names", ()))

    def acquire(self, lock, rank=1):
        """Acquire ``lock`` (a name in this mode's plan); returns the seconds spent waiting.

        Raises
        ------
        RuntimeError
            The acquisition would break the lock order memory -> compute.
        """
        held = getattr(self._held, "names", None)
        if held is None:
            held = self._held.names = []
        for h in held:
            if LOCK_RANK[h] >= LOCK_RANK[lock]:
                raise RuntimeError(f"lock order: {lock!r} requested while holding {h!r} "
                                   f"on {self.name}")
        t0 = time.perf_counter()
        self.locks[lock].acquire(rank)
        held.append(lock)
        return time.perf_counter() - t0

    def release(self, lock):
        self.locks[lock].release()
        self._held.names.remove(lock)

    def release_all(self):
        """Release every lock the calling thread holds (newest first); returns their names."""
        names = self.held()
        for n in reversed(names):
            self.release(n)
        return names

    def snapshot(self):
        return {n: {"held": lk.owner is not None, "waiting": lk.waiting}
                for n, lk in self.locks.items()}
