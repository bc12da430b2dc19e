"""Shared pieces of the engine tests: tiny circuits, stage wrappers for fault injection and
gating, and a fake stage object that follows the stage interface (cuzk._stages) exactly."""
import contextlib
import functools
import hashlib
import threading

import cuzk
from cuzk._budget import Budget
from cuzk._stages import Completed, HostKey, Partition, StageContext, check_randomizers

__all__ = ["circuit", "engine", "Injected", "Wrapped", "FakeStages", "verify_all", "TIMEOUT"]

#: Seconds any single wait in an engine test may take before the test fails (no pytest-timeout).
TIMEOUT = 60


@contextlib.contextmanager
def engine(*args, **kw):
    """``with engine(...) as eng``: a cuzk.Engine closed with a bounded wait (a stuck worker
    fails the test with EngineError instead of hanging it)."""
    eng = cuzk.Engine(*args, **kw)
    try:
        yield eng
    except BaseException:
        eng.close(cancel_pending=True, timeout=TIMEOUT)
        raise
    eng.close(timeout=TIMEOUT)


@functools.lru_cache(maxsize=None)
def circuit(log_n, seed=0):
    """(pk, asg) of a PoRep-like circuit (keys are random, cached per process)."""
    r1cs, inputs, aux = cuzk.porep_like(log_n, seed)
    pk = cuzk.keygen_random(r1cs, seed, 1)
    return pk, r1cs.assignment(inputs, aux)


def verify_all(pk, proof, asgs):
    """Every 192-byte proof of a job verifies against its assignment's public inputs."""
    assert len(proof) == 192 * len(asgs)
    for i, a in enumerate(asgs):
        assert cuzk.verify(pk.vk, proof[192 * i: 192 * (i + 1)], cuzk.public_inputs(a)), i


class Injected(RuntimeError):
    """The failure the wrappers inject."""


class _FailingDone:
    def __init__(self, inner, fail):
        self.inner, self.fail = inner, fail

    def synchronize(self):
        self.inner.synchronize()
        if self.fail:
            raise Injected("sync")

    def query(self):
        return self.inner.query()


class Wrapped:
    """A stage object around another one.

    ``fail``: ``{boundary: predicate(asg)}`` with boundaries ``prepare-before``,
    ``prepare-after``, ``run-before``, ``run-after``, ``sync``, ``finish-before``,
    ``finish-after``: raise :class:`Injected` there for the partitions the predicate picks.
    ``gate``: ``predicate(asg) -> threading.Event or None``: ``prepare`` of those partitions
    waits for the event first (and sets ``self.entered``).
    ``on_run``: called with the partition before the inner ``run``.
    """

    def __init__(self, inner, fail=None, gate=None, on_run=None):
        self.inner, self.fail, self.gate, self.on_run = inner, fail or {}, gate, on_run
        self.entered = threading.Event()
        self.name, self.stage_names = inner.name, inner.stage_names

    @property
    def device_label(self):
        return self.inner.device_label

    def context(self, *a, **kw):
        return self.inner.context(*a, **kw)

    def load_key(self, *a, **kw):
        return self.inner.load_key(*a, **kw)

    def _hit(self, where, asg):
        pred = self.fail.get(where)
        return pred is not None and pred(asg)

    def prepare(self, key, asg, ctx, r=None, s=None, check=True, upload=True):
        if self.gate is not None:
            ev = self.gate(asg)
            if ev is not None:
                self.entered.set()
                assert ev.wait(60), "gate never opened"
        if self._hit("prepare-before", asg):
            raise Injected("prepare-before")
        part = self.inner.prepare(key, asg, ctx, r, s, check, upload=False)
        if self._hit("prepare-after", asg):
            self.inner.abort(part)        # prepare cleans up after itself (stage contract)
            raise Injected("prepare-after")
        if upload:
            try:
                self.upload(part)
            except BaseException:
                self.inner.abort(part)
                raise
        return part

    def trim(self):
        self.inner.trim()

    def warm(self, ctx, key):
        self.inner.warm(ctx, key)

    def untracked_bytes(self, budget):
        return self.inner.untracked_bytes(budget)

    def upload(self, part):
        if self._hit("upload-before", part.asg):
            raise Injected("upload-before")
        self.inner.upload(part)
        if self._hit("upload-after", part.asg):
            raise Injected("upload-after")

    def run(self, part):
        if self.on_run is not None:
            self.on_run(part)
        if self._hit("run-before", part.asg):
            raise Injected("run-before")
        done = self.inner.run(part)
        if self._hit("run-after", part.asg):
            raise Injected("run-after")
        return _FailingDone(done, self._hit("sync", part.asg))

    def finish(self, part, verify=True):
        if self._hit("finish-before", part.asg):
            raise Injected("finish-before")
        proof = self.inner.finish(part, verify)
        if self._hit("finish-after", part.asg):
            raise Injected("finish-after")
        return proof

    def abort(self, part):
        self.inner.abort(part)


class _HookedDone(Completed):
    """A finished region whose ``synchronize`` first calls ``hook``."""

    def __init__(self, hook):
        self.hook = hook

    def synchronize(self):
        self.hook()


class FakeStages:
    """A stage object with the interface of cuzk._stages and no arithmetic: ``prepare``
    reserves ``nbytes`` per partition, ``run`` calls the optional hook ``on_run`` and returns a
    region whose ``synchronize`` calls ``on_sync`` (the engine's ``sync`` stage), the proof is
    192 bytes derived from (partition index, r, s).  For timing-independent protocol tests."""

    name = "cpu"
    device_label = "fake"
    stage_names = ("prepare", "upload", "run", "finish")

    def __init__(self, nbytes=100, on_prepare=None, on_run=None, on_sync=None):
        self.nbytes, self.on_prepare = nbytes, on_prepare
        self.on_run, self.on_sync = on_run, on_sync
        self.live = set()
        self.lock = threading.Lock()

    def context(self, budget=None, threads=None, name="w0"):
        return StageContext(self, budget, threads, name)

    def load_key(self, pk, budget=None, progress=None, lasting=True, partitions=1):
        return HostKey(pk, budget.reserve(10, "fake key") if budget is not None else None)

    def prepare(self, key, asg, ctx, r=None, s=None, check=True, upload=True):
        r, s = check_randomizers(r, s)
        part = Partition(key, asg, ctx, r, s)
        if self.on_prepare is not None:
            self.on_prepare(part)
        with self.lock:
            self.live.add(id(part))
        if upload:
            self.upload(part)
        return part

    def trim(self):
        pass

    def warm(self, ctx, key):
        pass

    def untracked_bytes(self, budget):
        return 0

    def upload(self, part):
        ctx = part.ctx
        if ctx.budget is not None:
            part.reservations.append(ctx.budget.reserve(self.nbytes, f"{ctx.name}: fake"))

    def run(self, part):
        if self.on_run is not None:
            self.on_run(part)
        if self.on_sync is None:
            return Completed()
        return _HookedDone(lambda: self.on_sync(part))

    def finish(self, part, verify=True):
        try:
            return hashlib.sha512(f"{part.r}:{part.s}".encode()).digest() * 3
        finally:
            self.abort(part)

    def abort(self, part):
        part.release()
        with self.lock:
            self.live.discard(id(part))


def new_budget(total=None):
    return Budget(total, "fake")
