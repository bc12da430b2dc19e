"""``cuzk.Engine``: resident keys, a priority queue of partitions, N workers per device behind a
selectable interlock, a byte budget per device, and a timeline (DESIGN §4, issue 10).

Threads: every worker is an OS thread that pulls partitions from one queue shared by all
devices and runs them through its device's stage object (``cuzk._stages``) following the
device's interlock plan (``_interlock.PLANS``).  Stage calls, lock waits and budget waits
release the GIL.  A failure anywhere in a partition aborts it (``st.abort``), releases the
locks it holds and fails its job's future; the worker goes on with the next partition.
"""
import concurrent.futures
import contextlib
import itertools
import heapq
import logging
import os
import threading
import time

from .._errors import BudgetError, CudaError, EngineBusy, EngineClosed, EngineError
from . import _nvtx
from ._interlock import ACQUIRE, GATE, RELEASE, STAGE, Interlock, lock_mode_arg
from ._timeline import Timeline

__all__ = ["Engine", "EngineKey", "JobFuture", "EngineError", "EngineBusy", "EngineClosed",
           "PRIORITIES", "priority_arg", "THREAD_SHARES", "DEFAULT_THREAD_SHARE",
           "thread_share_arg", "worker_threads"]

log = logging.getLogger("cuzk.engine")

#: Priority names and their ranks (lower goes first).
PRIORITIES = {"critical": 0, "high": 1, "normal": 2, "low": 3}
_RANK_NAME = {v: k for k, v in PRIORITIES.items()}


def priority_arg(priority):
    """Rank of a priority name (``low``, ``normal``, ``high``, ``critical``) or rank 0-3."""
    if isinstance(priority, str) and priority.lower() in PRIORITIES:
        return PRIORITIES[priority.lower()]
    if isinstance(priority, int) and not isinstance(priority, bool) and priority in _RANK_NAME:
        return priority
    raise ValueError(f"priority must be one of {', '.join(PRIORITIES)}, got {priority!r}")


#: How the workers' host stages share the CPU pool (``Engine(thread_share=...)``):
#: ``split``: each worker may use ``threads // workers`` (at least 1);
#: ``shared``: each worker may use all ``threads`` (no per-worker budget when ``threads`` is
#: None), and the pool's one queue shares the cores between concurrent calls;
#: ``adaptive``: a host stage (prepare, upload, finish) that starts while no other worker is in
#: one gets all ``threads``, else the split share; and while no kernel region runs on a device,
#: a worker starts its prepare only once the device's other workers have left prepare and
#: upload (the first partition, or a lone critical one, then prepares and uploads on every core
#: instead of half of them beside a second worker that the idle GPU cannot serve yet).
THREAD_SHARES = ("split", "shared", "adaptive")
#: Host stages for ``adaptive`` (the CPU work of a partition around its kernel region).
_HOST_STAGES = ("prepare", "upload", "finish", "early_head")
#: The host stages a prepare waits for on an idle device (finish is short and ends a partition).
_GATED_STAGES = ("prepare", "upload", "early_head")
#: The stages that start a kernel region (the early plan's first kernels start inside early_head,
#: but its region is counted from early_rest: early_head is host work, the gate's business).
_REGION_STAGES = ("run", "early_rest")
#: The default policy, here only.  H200 + 16 cores, two-lock, 2 workers, same run: 2^27 10-partition
#: proof 17.50 s split, 16.47 s adaptive (the first partition prepares and uploads on every
#: core); 2^24 8 partitions 0.2638 against 0.2646 s/partition (even).  bench/RESULTS.md, session 8.
DEFAULT_THREAD_SHARE = "adaptive"


def thread_share_arg(thread_share):
    """A thread-share policy name (one of ``THREAD_SHARES``, any case); ValueError otherwise."""
    if isinstance(thread_share, str) and thread_share.strip().lower() in THREAD_SHARES:
        return thread_share.strip().lower()
    raise ValueError(f"thread_share must be one of {', '.join(THREAD_SHARES)}, "
                     f"got {thread_share!r}")


def worker_threads(thread_share, threads, n_workers):
    """The ``threads`` value of each worker's host stages under a policy.

    Parameters
    ----------
    thread_share : {"split", "shared", "adaptive"}
    threads : int or None
        CPU threads of the whole engine (None/0: the whole CPU pool).
    n_workers : int
        Workers of the engine (all devices).

    Returns
    -------
    int
        ``split`` and ``adaptive``: ``max(1, (threads or pool_threads()) // n_workers)``;
        ``shared``: ``threads``, or 0 (the native rule: no budget, the whole pool) when it is
        None.
    """
    from .._args import threads_arg
    share, t = thread_share_arg(thread_share), threads_arg(threads)
    if share == "shared":
        return t
    # split, and adaptive's share when other workers are in host stages
    if not t:
        from .._native import _pool
        t = _pool.pool_threads()
    return max(1, t // max(1, int(n_workers)))


class EngineKey:
    """A proving key loaded into an engine: the host ``pk`` and one resident key per device.

    ``path`` is the file it came from (None for a ProvingKey passed in); ``nbytes``, ``where``
    (``"device"`` or ``"host"``) and ``kept`` (the queries of a ``"host"`` key kept on the device
    anyway: a partly resident key) are per device.
    """

    def __init__(self, pk, path, resident):
        self.pk, self.path = pk, path
        self.resident = resident                 # device index -> stage key
        self.in_use = 0                          # partitions queued or running
        self.evicted = False

    @property
    def nbytes(self):
        return [int(getattr(k, "nbytes", 0)) for _, k in sorted(self.resident.items())]

    @property
    def where(self):
        return [getattr(k, "where", "host") for _, k in sorted(self.resident.items())]

    @property
    def kept(self):
        return [list(getattr(k, "resident", ())) for _, k in sorted(self.resident.items())]

    @property
    def h_tables(self):
        """Per device, the H stage's twiddle tables: "deep" (the three deepest levels computed,
        ``cuzk._cuda_ntt.h_deep``) or "full"; None where the stages have no tables (CPU)."""
        return [("deep" if k.deep_tables else "full") if hasattr(k, "deep_tables") else None
                for _, k in sorted(self.resident.items())]

    @property
    def h_buffers(self):
        """Per device, how many buffers of n field elements its partitions compute H in (4, 3 or
        2: ``CudaStages(h_buffers=...)``); None where the stages have none (CPU)."""
        return [getattr(k, "h_buffers", None) for _, k in sorted(self.resident.items())]

    @property
    def h_msm(self):
        """Per device, the H MSM's precomputed copies ``k`` and window ``c`` (None: the cost
        model's) that the resident key was built with (``precompute="auto"`` picks them by
        size and budget); None where the stages have no such choice (CPU)."""
        return [dict(k.h_plan_args) if hasattr(k, "h_plan_args") else None
                for _, k in sorted(self.resident.items())]

    def __repr__(self):
        src = self.path or "<ProvingKey>"
        return f"EngineKey({src}, domain={self.pk.domain_size}, where={self.where})"


class JobFuture(concurrent.futures.Future):
    """The future of one job.  ``cancel()`` drops its queued partitions (partitions already
    running complete and their proofs are discarded) and succeeds unless the job is done."""

    def __init__(self, engine, job):
        super().__init__()
        self._engine, self._job = engine, job

    @property
    def job_id(self):
        return self._job.id

    def cancel(self):
        if self.done():
            return False
        self._engine._cancel_job(self._job)
        return super().cancel()


class _Job:
    __slots__ = ("id", "key", "n", "rank", "future", "results", "remaining", "failed", "lock",
                 "t_submit")

    def __init__(self, jid, key, n, rank, engine):
        self.id, self.key, self.n, self.rank = jid, key, n, rank
        self.future = JobFuture(engine, self)
        self.results = [None] * n
        self.remaining = n
        self.failed = False
        self.lock = threading.Lock()
        self.t_submit = 0.0

    @property
    def finished(self):
        return self.failed or self.future.done()


class _Task:
    __slots__ = ("job", "index", "asg", "r", "s", "seq", "t_queued")

    def __init__(self, job, index, asg, r, s):
        self.job, self.index, self.asg, self.r, self.s = job, index, asg, r, s
        self.seq, self.t_queued = 0, 0.0

    def __lt__(self, other):
        return (self.job.rank, self.seq) < (other.job.rank, other.seq)


class _Queue:
    """Partitions by (priority rank, submission order); ``get`` blocks (GIL released)."""

    def __init__(self):
        self._heap = []
        self._cond = threading.Condition(threading.Lock())
        self._seq = itertools.count()
        self._closed = False

    def put(self, task):
        with self._cond:
            if self._closed:
                raise EngineClosed("the engine is closing; no new partitions")
            task.seq = next(self._seq)
            heapq.heappush(self._heap, task)
            self._cond.notify()

    def get(self):
        """The next partition, or None once closed and empty."""
        with self._cond:
            while not self._heap:
                if self._closed:
                    return None
                self._cond.wait()
            return heapq.heappop(self._heap)

    def requeue(self, task):
        """Put back a partition a quarantined device's worker took (keeps its place in order)."""
        with self._cond:
            heapq.heappush(self._heap, task)
            self._cond.notify()

    def remove(self, pred):
        """Take every queued partition with ``pred(task)`` out; returns them."""
        with self._cond:
            out = [t for t in self._heap if pred(t)]
            if out:
                self._heap = [t for t in self._heap if not pred(t)]
                heapq.heapify(self._heap)
            return out

    def close(self):
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def counts(self):
        with self._cond:
            c = {k: 0 for k in PRIORITIES}
            for t in self._heap:
                c[_RANK_NAME[t.job.rank]] += 1
            return c


class _Slots:
    """``max_in_flight``: partitions admitted between submit and completion."""

    def __init__(self, limit):
        self.limit = limit
        self.used = 0
        self._cond = threading.Condition(threading.Lock())

    def acquire(self, n=1, block=True, cancelled=lambda: False):
        with self._cond:
            if self.limit is None:
                self.used += n
                return True
            if not block:
                if self.used + n > self.limit:
                    return False
                self.used += n
                return True
            while self.used + n > self.limit:
                if cancelled():
                    return False
                self._cond.wait(0.1)
            self.used += n
            return True

    def release(self, n=1):
        with self._cond:
            self.used -= n
            self._cond.notify_all()


class _DeviceBudget:
    """The budget the worker contexts of a device see: the device's Budget (where a reservation
    that could not fit even with every partition finished, more than the budget less the keys'
    lasting reservations, fails at once with ``BudgetError`` instead of waiting forever), which
    also says once when two partitions cannot overlap."""

    def __init__(self, budget, dev=None, workers=1):
        self.budget = budget
        self.dev, self.workers = dev, workers
        self.serialized = False          # a partition waited with only one other holding bytes

    def reserve(self, nbytes, what="", *, block=True, timeout=None):
        # more than the budget less the resident keys (the keys' ``lasting`` reservations):
        # ``Budget.reserve`` fails at once
        total = self.budget.total
        free = self.budget.free
        if (block and not self.budget.never_fits(nbytes) and free is not None
                and free < int(nbytes) and self.workers > 1 and not self.serialized
                and self.dev is not None and self.dev.reserving <= 2):
            # the partition waits for the only other one in flight: two cannot overlap, so the
            # workers take turns (H200, 2^27 with 5 H copies: 16 % slower, RESULTS session 23;
            # H100 80 GB, 2^27 with the whole key resident: 20.39 s per 10 partitions against
            # 15.67 with part of it streamed, session 35)
            self.serialized = True
            gib = 1 << 30
            where = getattr(self.dev.stages, "key_where", None)     # None: the CPU backend
            log.warning("%s: a partition's reservation of %.2f GiB waits for the one in flight: "
                        "resident keys hold %.2f GiB of the %.2f GiB budget, so two partitions do "
                        "not fit at once and the %d workers take turns (fewer precomputed H "
                        "copies, stage option precompute, %sor a larger vram_budget let them "
                        "overlap)", self.budget.name, int(nbytes) / gib, self.budget.lasting / gib,
                        total / gib, self.workers,
                        "a key streamed in part from host memory, stage option key_where=auto "
                        "(the default), " if where == "device" else "")
        return self.budget.reserve(nbytes, what, block=block, timeout=timeout)

    def __getattr__(self, name):
        return getattr(self.budget, name)


class _Device:
    """One (real or simulated) device: its stage object, budget, interlock and workers."""

    def __init__(self, index, stages, budget, interlock):
        self.index, self.stages, self.budget, self.interlock = index, stages, budget, interlock
        self.worker_budget = None        # _DeviceBudget over ``budget``
        self.label = stages.device_label if stages.name != "cpu" else f"cpu:{index}"
        self.workers = []                # [_WorkerState]
        self.contexts = []
        self.failed = None               # the CudaError that quarantined the device
        self.host = 0                    # workers in prepare/upload (thread_share "adaptive")
        self.regions = 0                 # workers in run/sync (their kernel region)
        self.active = 0                  # partitions between dequeue and their end
        self.reserving = 0               # partitions from their reservation (upload) to their end
        self.untracked = 0               # ``_untracked_at_start``
        self.untracked_res = None        # its lasting reservation, released at close


class _WorkerState:
    __slots__ = ("name", "index", "thread", "state", "job", "partition", "done")

    def __init__(self, name, index):
        self.name, self.index = name, index
        self.thread = None
        self.state, self.job, self.partition, self.done = "idle", None, None, 0

    def snapshot(self):
        return {"name": self.name, "state": self.state, "job": self.job,
                "partition": self.partition, "done": self.done}


# Device memory outside every reservation, at an engine's start, from which the log warns.
_UNTRACKED_WARN = 1 << 30


def _untracked_at_start(dev):
    """The stage object's ``untracked_bytes`` of the device's budget when the engine starts
    (None where the driver call failed: it must not stop the engine).
    From ``_UNTRACKED_WARN`` it is said in the log and reserved (lasting) until the engine
    closes, so that keys are placed and partitions admitted as if the budget were that much
    smaller, instead of the pool making uploads wait for other workers' frees or running out
    of memory (bench/RESULTS.md session 46)."""
    try:
        n = int(dev.stages.untracked_bytes(dev.budget))
    except Exception:
        log.exception("engine: device %s: its free memory could not be read", dev.label)
        return None
    if n >= _UNTRACKED_WARN:
        from .._errors import BudgetError
        try:        # held out of the budget while the engine runs: keys are placed without it
            dev.untracked_res = dev.budget.reserve(n, "device memory taken outside the budget",
                                                   block=False, lasting=True)
            held = "; the engine holds it out of its budget until it closes"
        except BudgetError as e:
            held = f"; it could not be held out of the budget ({e})"
        log.warning("engine: device %s: the budget counts %.2f GiB as free that the device does "
                    "not have (taken by another process, or by device memory no reservation "
                    "counts)%s", dev.label, n / 2**30, held)
    return n


def _pool_bytes(stages):
    """``{"used": bytes, "reserved": bytes}`` of the stage object's device memory pool (CUDA:
    cuzk's pool of the device, cuMemPoolGetAttribute, no synchronization), or None without a
    pool, on a closed pool or after a driver error (a snapshot must not raise)."""
    pool = getattr(stages, "pool", None)
    if pool is None:
        return None
    try:
        return {"used": int(pool.used_bytes), "reserved": int(pool.reserved_bytes)}
    except Exception:
        return None


def _resolve_devices(backend, devices):
    """Device indices for the backend (``"auto"``: every CUDA device, or one CPU)."""
    if backend == "cuda":
        from .._native import _driver
        count = _driver.device_count()
        if devices == "auto" or devices is None:
            return list(range(count))
        if isinstance(devices, int) and not isinstance(devices, bool):
            if not 1 <= devices <= count:
                raise ValueError(f"devices={devices}: {count} CUDA device(s) here")
            return list(range(devices))
        idx = [int(d) for d in devices]
        bad = [d for d in idx if not 0 <= d < count]
        if bad or not idx:
            raise ValueError(f"devices={devices!r}: valid ordinals are 0..{count - 1}")
        return idx
    if devices == "auto" or devices is None:
        return [0]
    if isinstance(devices, int) and not isinstance(devices, bool):
        if devices < 1:
            raise ValueError(f"devices must be >= 1, got {devices}")
        return list(range(devices))
    idx = list(devices)
    if not idx:
        raise ValueError("devices must not be empty")
    return list(range(len(idx)))


class Engine:
    """A persistent prover: keys stay loaded, partitions are queued by priority and proved by
    ``workers_per_gpu`` worker threads per device behind the device's interlock.

    Parameters
    ----------
    backend : {"auto", "cpu", "cuda"}
        "auto" picks CUDA when a device is usable (and logs its choice).
    devices : "auto", int or sequence of int
        CUDA: "auto" = every device, N = the first N, or ordinals.  CPU: N simulated devices
        (each with its own workers, interlock and budget); "auto" = 1.
    workers_per_gpu : int
        Worker threads per device (>= 1).
    lock_mode : {"coarse", "narrow", "two-lock", "overlap"}
        The interlock (see ``cuzk._engine._interlock``; ``overlap`` is two-lock with the compute
        lock released once the kernel region is enqueued).
    max_in_flight : int or None
        Partitions admitted between submit and completion; ``submit`` blocks (or raises
        :class:`EngineBusy` with ``block=False``) beyond it.  None = unbounded.
    vram_budget : int or None
        Bytes per device that keys and partitions may reserve (CPU: the host bytes the CPU
        stages reserve).  None: the backend's default (CUDA: device memory less a margin;
        CPU: unlimited, still counted).
    threads : int or None
        CPU threads of the host stages (None = the whole CPU pool); how the workers share
        them is ``thread_share``.
    verify : bool
        Verify every proof before it is returned (``ProofVerificationError`` otherwise).
    thread_share : {"split", "shared", "adaptive"}, keyword-only
        ``split``: each worker's native calls use at
        most ``threads // workers`` threads (all devices' workers counted, at least 1).
        ``shared``: each worker's calls may use all ``threads`` (None: the whole pool); the
        pool's job queue shares the cores between concurrent calls, so a worker alone in its
        host stage gets every core.  ``adaptive`` (the default, :data:`DEFAULT_THREAD_SHARE`):
        a host stage started while no other worker
        is in one uses all ``threads``, otherwise the split share; and on a device with no
        kernel region running, a worker waits to start its prepare until the device's other
        workers have left prepare and upload (timeline records ``wait``/``host``).
        ``threads_per_worker`` (in ``status()``) is the split share (``split``, ``adaptive``)
        or ``threads`` (``shared``), 0 meaning the whole pool.
    stage_options : dict or None, keyword-only
        CUDA stage options for every device (``cuzk._stages.STAGE_OPTIONS``: ``precompute``,
        ``h_window``, ``b_g2``); the CPU backend has none (ValueError).

    Raises
    ------
    ValueError
        A bad argument.
    cuzk.BackendUnavailable
        ``backend="cuda"`` without a usable device.
    """

    def __init__(self, backend="auto", devices="auto", workers_per_gpu=2, lock_mode="narrow",
                 max_in_flight=None, vram_budget=None, threads=None, verify=True, *,
                 thread_share=DEFAULT_THREAD_SHARE, stages=None, timeline_maxlen=200_000,
                 stage_options=None):
        from .._args import threads_arg
        from .._backend import resolve_backend
        self.lock_mode = lock_mode_arg(lock_mode)
        self.thread_share = thread_share_arg(thread_share)
        if int(workers_per_gpu) < 1:
            raise ValueError(f"workers_per_gpu must be >= 1, got {workers_per_gpu}")
        self.workers_per_gpu = int(workers_per_gpu)
        if max_in_flight is not None and int(max_in_flight) < 1:
            raise ValueError(f"max_in_flight must be >= 1 or None, got {max_in_flight}")
        if vram_budget is not None and int(vram_budget) < 0:
            raise ValueError(f"vram_budget must be >= 0 or None, got {vram_budget}")
        self.verify = bool(verify)
        if stages is None:
            self.backend = resolve_backend(backend)
            idx = _resolve_devices(self.backend, devices)
        else:                            # stage objects given (tests: fault injection)
            idx = _resolve_devices("cpu", devices)
        factory = stages if callable(stages) else (lambda i: stages)
        self.threads = threads_arg(threads)          # 0: the whole pool
        self.threads_per_worker = worker_threads(self.thread_share, self.threads,
                                                 len(idx) * self.workers_per_gpu)
        self.timeline = Timeline(maxlen=timeline_maxlen)
        self._queue = _Queue()
        self._slots = _Slots(None if max_in_flight is None else int(max_in_flight))
        self.max_in_flight = self._slots.limit
        self._keys = {}
        self._keys_lock = threading.Lock()
        self._jobs = {}                 # id -> _Job (pending ones)
        self._jobs_lock = threading.Lock()
        self._job_ids = itertools.count()
        self._closing = False
        self._closed = False
        self._host_cond = threading.Condition()     # thread_share "adaptive": host/region counts
        self._host_total = 0                         # workers of every device in a host stage
        self._completed = 0
        self._failed = 0
        _nvtx.available()
        self.devices = []
        try:
            for i, dev_idx in enumerate(idx):
                if stages is None:
                    from .._stages import stages_for
                    st = stages_for(self.backend, threads=self.threads_per_worker,
                                    device=dev_idx if self.backend == "cuda" else None,
                                    **(stage_options or {}))
                else:
                    st = factory(i)
                    self.backend = st.name
                from .._budget import Budget
                if vram_budget is not None or st.name != "cuda":
                    budget = Budget(vram_budget, name=f"{st.name}:{dev_idx}")
                else:                    # the process-wide budget of the CUDA device
                    from .._stages._cuda import device_budget
                    budget = device_budget(st.device)
                dev = _Device(i, st, budget, Interlock(self.lock_mode, f"{st.name}:{dev_idx}",
                                                       gated=self.thread_share == "adaptive"))
                dev.worker_budget = _DeviceBudget(budget, dev, self.workers_per_gpu)
                for w in range(self.workers_per_gpu):
                    ctx = st.context(budget=dev.worker_budget, threads=self.threads_per_worker,
                                     name=f"d{i}w{w}")
                    dev.contexts.append(ctx)
                self.devices.append(dev)
                dev.untracked = _untracked_at_start(dev)    # close() releases what it holds
            for dev in self.devices:
                for w, ctx in enumerate(dev.contexts):
                    ws = _WorkerState(f"{dev.label} w{w}", w)
                    self.timeline.workers[(dev.index, w)] = ws.name
                    ws.thread = threading.Thread(target=self._worker, args=(dev, ws, ctx),
                                                 name=f"cuzk-{dev.label}-w{w}", daemon=True)
                    dev.workers.append(ws)
            for dev in self.devices:
                for ws in dev.workers:
                    ws.thread.start()
        except BaseException:
            self.close(cancel_pending=True)
            raise
        log.info("engine: backend %s, %d device(s), %d worker(s) each, lock mode %s, "
                 "threads %s per worker (%s)", self.backend, len(self.devices),
                 self.workers_per_gpu, self.lock_mode, self.threads_per_worker or "all",
                 self.thread_share)

    # ---- keys ---------------------------------------------------------------------------
    def load(self, source, progress=True):
        """Load a proving key once (cached by real path) and make it resident on every device.

        Parameters
        ----------
        source : str, os.PathLike, ProvingKey or EngineKey
            A bellperson ``.params`` file or a key already in memory.
        progress : bool
            Progress on stderr while reading and uploading (``cuzk._progress``).

        Returns
        -------
        EngineKey

        Raises
        ------
        cuzk.FormatError, OSError
            The file cannot be read as parameters.
        cuzk.BudgetError
            The key does not fit a device's budget.
        EngineClosed
        """
        self._check_open()
        if isinstance(source, EngineKey):
            if source.evicted:
                raise EngineError(f"{source!r} was evicted; load it again")
            return source
        from .._params import ProvingKey
        if isinstance(source, ProvingKey):
            cache_key, path, pk = ("pk", id(source)), None, source
        else:
            path = os.path.realpath(os.fspath(source))
            cache_key, pk = ("path", path), None
        with self._keys_lock:
            hit = self._keys.get(cache_key)
            if hit is not None:             # the handle keeps the pk alive: ids are not reused
                return hit
            from .._progress import Progress
            label = f"load {os.path.basename(path)}" if path else "load key"
            with Progress(label, 1 + len(self.devices), enabled=bool(progress)) as bar:
                if pk is None:
                    from .._params import read_params
                    pk = read_params(path, threads=self.threads)   # all the engine's threads
                bar.update(1)
                resident = {}
                try:
                    for dev in self.devices:
                        resident[dev.index] = dev.stages.load_key(pk, budget=dev.budget,
                                                                  partitions=self._in_flight())
                        bar.update(1)
                except BaseException:
                    for k in resident.values():
                        k.release()
                    raise
                for dev in self.devices:
                    for ctx in dev.contexts:     # staging sized now, not in a partition
                        dev.stages.warm(ctx, resident[dev.index])
            ek = EngineKey(pk, path, resident)
            self._keys[cache_key] = ek
            return ek

    def evict(self, key):
        """Release a key's resident copies and drop it from the cache.

        Raises
        ------
        EngineError
            Partitions of this key are still queued or running.
        """
        with self._keys_lock:
            for ck, ek in list(self._keys.items()):
                if ek is key or ek.pk is key or ek.path == key:
                    if ek.in_use:
                        raise EngineError(f"{ek!r} has {ek.in_use} partition(s) queued or "
                                          f"running; evict it after they finish")
                    del self._keys[ck]
                    self._release_key(ek)
                    return True
        return False

    def _release_key(self, ek):
        ek.evicted = True
        for d, k in ek.resident.items():
            k.release()

    @property
    def keys(self):
        with self._keys_lock:
            return list(self._keys.values())

    # ---- jobs ---------------------------------------------------------------------------
    def submit(self, key, assignments, priority="normal", *, block=True, randomizers=None):
        """Queue a job: the partitions of one key.

        Parameters
        ----------
        key : EngineKey, ProvingKey or path
            Loaded (``load``) first when it is not an EngineKey.
        assignments : Assignment or sequence of Assignment
            The partitions, in proof order.
        priority : {"low", "normal", "high", "critical"}
        block : bool
            With ``max_in_flight``: wait for room (True) or raise :class:`EngineBusy`.
        randomizers : sequence of (r, s) or None
            Per partition; None draws them from a CSPRNG (fixed values give reproducible bytes).

        Returns
        -------
        JobFuture
            Resolves to the concatenated 192-byte proofs in partition order, or raises the
            typed error of the first partition that failed.

        Raises
        ------
        EngineBusy, EngineClosed, ValueError
        """
        from .._assignment import Assignment
        self._check_open()
        rank = priority_arg(priority)
        ek = self.load(key)
        asgs = [assignments] if isinstance(assignments, Assignment) else list(assignments)
        if self.devices and all(dv.failed is not None for dv in self.devices):
            raise EngineError("every device of the engine is quarantined after a device fault")
        if not asgs:
            raise ValueError("a job needs at least one assignment")
        for i, a in enumerate(asgs):
            if not isinstance(a, Assignment):
                raise TypeError(f"assignment {i} is a {type(a).__name__}, not an Assignment")
        if randomizers is None:
            randomizers = [(None, None)] * len(asgs)
        else:
            randomizers = [tuple(rs) for rs in randomizers]
            if len(randomizers) != len(asgs):
                raise ValueError(f"{len(randomizers)} randomizer pairs for {len(asgs)} partitions")
        job = _Job(next(self._job_ids), ek, len(asgs), rank, self)
        job.t_submit = self.timeline.now()
        if not block and not self._slots.acquire(job.n, block=False):
            raise EngineBusy(f"max_in_flight={self.max_in_flight}: {self._slots.used} partition(s) "
                             f"in flight, this job has {job.n}")
        admitted = job.n if not block else 0
        queued = 0
        with self._jobs_lock:
            self._jobs[job.id] = job
        with self._keys_lock:
            ek.in_use += job.n
        # the job failed or was cancelled, or the engine is closing
        stop = lambda: job.finished or self._closing      # noqa: E731
        try:
            for i, (a, (r, s)) in enumerate(zip(asgs, randomizers)):
                if block:
                    if not self._slots.acquire(1, True, stop):
                        break
                    if stop():      # the slot came as the job ended: queue nothing more
                        self._slots.release(1)
                        break
                    admitted += 1
                task = _Task(job, i, a, r, s)
                task.t_queued = self.timeline.now()
                self._queue.put(task)
                queued += 1
        finally:
            # partitions never queued (cancelled, failed or closing meanwhile) give back
            # their slot and key use; the queued ones do so when they complete or are dropped
            if queued < job.n:
                self._slots.release(admitted - queued)
                with self._keys_lock:
                    ek.in_use -= job.n - queued
                if not job.finished:
                    job.future.cancel()
        return job.future

    def prove(self, key, assignments, priority="normal", timeout=None, **kw):
        """``submit(...).result(timeout)``."""
        return self.submit(key, assignments, priority, **kw).result(timeout)

    def _cancel_job(self, job):
        """Take the job's queued partitions out (they release their slots and key uses)."""
        with job.lock:
            job.failed = True
        dropped = self._queue.remove(lambda t: t.job is job)
        for t in dropped:
            self._partition_done(t, "cancelled")
        with self._jobs_lock:
            self._jobs.pop(job.id, None)

    def _partition_done(self, task, status):
        self._slots.release(1)
        with self._keys_lock:
            task.job.key.in_use -= 1
            if status == "ok":
                self._completed += 1
            elif status == "error":
                self._failed += 1

    def _job_result(self, task, proof=None, error=None):
        job = task.job
        resolve = None
        with job.lock:
            if job.failed:
                return
            if error is not None:
                job.failed = True
                resolve = ("error", error)
            else:
                job.results[task.index] = proof
                job.remaining -= 1
                if job.remaining == 0:
                    resolve = ("ok", b"".join(job.results))
        if resolve is None:
            return
        with self._jobs_lock:
            self._jobs.pop(job.id, None)
        try:
            if resolve[0] == "ok":
                job.future.set_result(resolve[1])
            else:
                job.future.set_exception(resolve[1])
        except concurrent.futures.InvalidStateError:
            pass                            # cancelled meanwhile: the result is dropped
        if resolve[0] == "error":
            for t in self._queue.remove(lambda t: t.job is job):
                self._partition_done(t, "cancelled")

    def _after_quarantine(self):
        """When no device is left in service, fail every queued partition's job."""
        if any(dv.failed is None for dv in self.devices):
            return
        err = EngineError("every device of the engine is quarantined after a device fault: "
                          + "; ".join(f"{dv.label}: {dv.failed}" for dv in self.devices))
        for t in self._queue.remove(lambda t: True):
            self._job_result(t, error=err)
            self._partition_done(t, "cancelled")

    # ---- workers ------------------------------------------------------------------------
    def _worker(self, dev, ws, ctx):
        # one CPU pool for every worker; ctx.threads carries the thread-share policy
        # (worker_threads): a count, or 0 = no budget on this thread, i.e. the whole pool
        while True:
            task = self._queue.get()
            if task is None:
                ws.state = "exited"
                return
            if dev.failed is not None:      # quarantined while this worker waited: hand it back
                self._queue.requeue(task)
                ws.state = "quarantined"
                return
            try:
                self._run_partition(dev, ws, ctx, task)
                if dev.failed is not None:
                    ws.state = "quarantined"
                    self._after_quarantine()
                    return
            except BaseException:           # a bug in the engine itself: never kill the worker
                log.exception("engine worker %s: internal error", ws.name)

    def _run_partition(self, dev, ws, ctx, task):
        tl, job = self.timeline, task.job
        d, w = dev.index, ws.index
        t_deq = tl.now()
        tl.add("queued", "queue", d, w, job.id, task.index, job.rank, task.t_queued, t_deq)
        if job.finished:
            self._partition_done(task, "skipped")
            tl.add("partition", "partition", d, w, job.id, task.index, job.rank, t_deq, tl.now(),
                   {"status": "skipped"})
            return
        ws.state, ws.job, ws.partition = "running", job.id, task.index
        st, lock = dev.stages, dev.interlock
        key = job.key.resident[d]
        part = done = proof = None
        stage, holds, seen_timings = None, {}, {}
        t_stage = None
        reserving = False
        with self._host_cond:
            # the early plan (interlock.EARLY_PLANS) for a partition that finds its device idle
            # (a stage object without early_ready, e.g. a wrapper, never takes it)
            ready = getattr(st, "early_ready", None)
            early = (lock.early_plan is not None and dev.active == 0 and ready is not None
                     and ready(key))
            dev.active += 1
        plan = lock.early_plan if early else lock.plan

        def record(kind, name, t0, args=None):
            tl.add(kind, name, d, w, job.id, task.index, job.rank, t0, tl.now(), args)

        def fall_back(why):
            """early_head cannot reserve without waiting: its locks released, the mode's plan."""
            for name in reversed(lock.held()):
                lock.release(name)
                _nvtx.pop()
                record("hold", name, holds.pop(name, t_deq))
            record("stage", "early_head", t_stage, {"fallback": why})
            log.info("engine: job %d partition %d takes the %s plan: %s", job.id, task.index,
                     self.lock_mode, why)

        try:
            steps, at = plan, 0
            while at < len(steps):
                kind, name = steps[at]
                at += 1
                if kind == STAGE and name in ("upload", "early_head"):
                    with self._host_cond:
                        busy = name == "early_head" and dev.reserving > 0
                        if not busy and not reserving:
                            dev.reserving += 1
                            reserving = True
                if kind == ACQUIRE:
                    ws.state = f"waiting {name}"
                    t0 = tl.now()
                    lock.acquire(name, job.rank)
                    record("wait", name, t0)
                    holds[name] = tl.now()
                    _nvtx.push(f"hold {name}")
                elif kind == RELEASE:
                    lock.release(name)
                    _nvtx.pop()
                    record("hold", name, holds.pop(name))
                elif kind == GATE:
                    ws.state = f"waiting {name}"
                    self._host_gate(dev, record)
                else:
                    stage, ws.state = name, name
                    t_stage = tl.now()
                    with _nvtx.nvtx_range(name), self._stage_scope(dev, ctx, name):
                        if name == "prepare":
                            part = st.prepare(key, task.asg, ctx, r=task.r, s=task.s,
                                              upload=False)
                            part.index, part.verify = task.index, self.verify
                        elif name == "early_head":
                            fallback = "another partition holds device bytes" if busy else None
                            if fallback is None:
                                try:
                                    part = st.early_head(key, task.asg, ctx, r=task.r, s=task.s,
                                                         wait=False)
                                except BudgetError as e:    # aborted: it holds nothing now
                                    fallback = f"{type(e).__name__}: {e}"
                                else:                       # early_rest sets part.verify
                                    part.index = task.index
                        elif name == "early_rest":
                            done = st.early_rest(part, verify=self.verify)
                        elif name == "upload":
                            st.upload(part)
                        elif name == "run":
                            done = st.run(part)
                        elif name == "sync":
                            done.synchronize()
                        else:
                            args = self._stage_args(name, part, seen_timings)
                            proof = st.finish(part, verify=self.verify)
                    if name == "early_head" and fallback is not None:
                        fall_back(fallback)
                        stage = t_stage = None
                        steps, at = lock.plan, 0
                        continue
                    if name != "finish":
                        args = self._stage_args(name, part, seen_timings)
                    else:
                        args.update(self._stage_args(name, part, seen_timings, sizes=False))
                    record("stage", name, t_stage, args)
                    stage = t_stage = None
        except BaseException as e:
            if part is not None:
                try:
                    st.abort(part)
                except BaseException:       # the first error is the one the job reports
                    log.exception("engine: abort of job %d partition %d failed", job.id,
                                  task.index)
            for name in reversed(lock.held()):
                lock.release(name)
                _nvtx.pop()
                record("hold", name, holds.pop(name, t_deq))
            if stage is not None:
                record("stage", stage, t_stage, {"error": f"{type(e).__name__}: {e}"})
            if hasattr(e, "add_note"):
                e.add_note(f"cuzk engine: job {job.id} partition {task.index} of {job.n}, "
                           f"stage {stage or '?'}, worker {ws.name}, lock mode {self.lock_mode}")
            if isinstance(e, CudaError) and dev.failed is None:
                # a device fault: take the device out of service, so that it does not fail every
                # partition the queue would hand it; the other devices go on
                dev.failed = e
                log.error("engine: device %s quarantined after %s", dev.label, e)
            self._job_result(task, error=e)
            status = "error"
        else:
            self._job_result(task, proof=proof)
            status = "ok"
        finally:
            ws.state, ws.job, ws.partition = "idle", None, None
            with self._host_cond:
                dev.active -= 1
                dev.reserving -= reserving
        ws.done += 1
        self._partition_done(task, status)
        tl.add("partition", "partition", d, w, job.id, task.index, job.rank, t_deq, tl.now(),
               {"status": status})

    # ---- thread_share "adaptive" -----------------------------------------------------------
    def _host_gate(self, dev, record):
        """The plan's GATE step (``adaptive``, before prepare): while no kernel region runs on
        ``dev`` and another of its workers is in prepare or upload, wait (holding no reservation;
        the deadlock model explores the gated plans), so that the host stages of an idle device
        run one at a time on every core."""
        waited = False
        t_wait = self.timeline.now()
        with self._host_cond:
            while dev.host > 0 and dev.regions == 0 and dev.failed is None:
                waited = True
                self._host_cond.wait(0.5)
        if waited:
            record("wait", "host", t_wait)

    @contextlib.contextmanager
    def _stage_scope(self, dev, ctx, name):
        """The context of one stage call: under ``adaptive``, the host/region counts (and the
        stage's thread count, ``ctx.threads``); otherwise nothing."""
        if self.thread_share != "adaptive":
            yield
            return
        host = name in _HOST_STAGES
        gated = name in _GATED_STAGES
        with self._host_cond:
            if host:
                ctx.threads = self.threads if self._host_total == 0 else self.threads_per_worker
                self._host_total += 1
                dev.host += gated
            elif name in _REGION_STAGES:
                dev.regions += 1
        ok = False
        try:
            yield
            ok = True
        finally:
            with self._host_cond:
                if host:
                    dev.host -= gated
                    self._host_total -= 1
                elif name == "sync" or (name in _REGION_STAGES and not ok):
                    dev.regions -= 1     # the region ended (sync), or never began (run failed)
                self._host_cond.notify_all()

    @staticmethod
    def _stage_args(name, part, seen, sizes=True):
        """Timeline args of a stage: the part.timings entries it added, reserved/uploaded bytes."""
        args = {}
        if part is None:
            return args
        t = getattr(part, "timings", None) or {}
        new = {k: v - seen.get(k, 0.0) for k, v in t.items()
               if isinstance(v, (int, float)) and v != seen.get(k)}
        seen.update({k: v for k, v in t.items() if isinstance(v, (int, float))})
        if new:
            args["timings"] = new
        if sizes:
            rb = getattr(part, "reserved_bytes", None)
            if rb:
                args["reserved_bytes"] = int(rb)
            ub = getattr(part, "bytes_uploaded", None)
            if ub:
                args["uploaded_bytes"] = int(ub)
        return args

    # ---- state --------------------------------------------------------------------------
    def status(self):
        """A snapshot: devices (workers, budget, locks, ``pool``: the device memory pool's
        used and reserved bytes, None on the CPU, and ``serialized``: whether a partition had to
        wait for the only other one in flight, i.e. two do not fit beside the keys;
        ``untracked_bytes_at_start``: memory the budget counted as free that the device did not
        have when the engine started, ``_untracked_at_start``), keys and
        where they live, queued partitions per priority, partitions in flight, completed and
        failed counts, the thread policy."""
        with self._keys_lock:
            keys = [{"path": k.path, "domain": int(k.pk.domain_size), "nbytes": k.nbytes,
                     "where": k.where, "kept": k.kept, "h_tables": k.h_tables,
                     "h_buffers": k.h_buffers, "h_msm": k.h_msm,
                     "in_use": k.in_use}
                    for k in self._keys.values()]
        with self._jobs_lock:
            jobs = len(self._jobs)
        return {
            "backend": self.backend, "lock_mode": self.lock_mode, "verify": self.verify,
            "closed": self._closed, "closing": self._closing,
            "thread_share": self.thread_share, "threads": self.threads,
            "threads_per_worker": self.threads_per_worker,
            "devices": [{"index": dv.index, "label": dv.label,
                         "failed": None if dv.failed is None else str(dv.failed),
                         "workers": [ws.snapshot() for ws in dv.workers],
                         "budget": dv.budget.snapshot() if dv.budget is not None else None,
                         "serialized": bool(dv.worker_budget is not None
                                            and dv.worker_budget.serialized),
                         "pool": _pool_bytes(dv.stages),
                         "untracked_bytes_at_start": dv.untracked,
                         "locks": dv.interlock.snapshot()} for dv in self.devices],
            "keys": keys, "queued": self._queue.counts(), "in_flight": self._slots.used,
            "max_in_flight": self.max_in_flight, "jobs_pending": jobs,
            "completed": self._completed, "failed": self._failed,
        }

    def _in_flight(self):
        """Partitions of a device that may hold device memory at once: its workers, or one
        under ``coarse`` (one lock around the whole partition)."""
        return 1 if self.lock_mode == "coarse" else self.workers_per_gpu

    def _check_open(self):
        if self._closing:
            raise EngineClosed("the engine is closed")

    def close(self, cancel_pending=False, timeout=None):
        """Stop taking work, finish (or with ``cancel_pending`` cancel) the queued partitions,
        join the workers and release every key and worker context.

        Parameters
        ----------
        cancel_pending : bool
            Cancel every job that still has queued partitions instead of proving them; jobs
            whose partitions are all running finish.
        timeout : float or None
            Seconds to wait for the workers; raises :class:`EngineError` if they are still
            running then (nothing is released in that case).
        """
        if self._closed:
            return
        self._closing = True
        if cancel_pending:
            dropped = self._queue.remove(lambda t: True)
            for t in dropped:
                self._partition_done(t, "cancelled")
            for job in {id(t.job): t.job for t in dropped}.values():
                job.future.cancel()
        self._queue.close()
        deadline = None if timeout is None else time.monotonic() + timeout
        for dev in self.devices:
            for ws in dev.workers:
                if ws.thread is not None and ws.thread.is_alive():
                    ws.thread.join(None if deadline is None
                                   else max(0.0, deadline - time.monotonic()))
                    if ws.thread.is_alive():
                        raise EngineError(f"close: worker {ws.name} still running after "
                                          f"{timeout} s")
        with self._keys_lock:
            keys, self._keys = list(self._keys.values()), {}
        for ek in keys:
            self._release_key(ek)
        for dev in self.devices:
            for ctx in dev.contexts:
                try:
                    ctx.close()
                except Exception:
                    log.exception("engine: closing a worker context failed")
            if dev.untracked_res is not None:
                dev.untracked_res.release()
                dev.untracked_res = None
            try:
                dev.stages.trim()           # idle now: give the pool's memory back to the device
            except Exception:
                log.exception("engine: trimming device %d's pool failed", dev.index)
        self._closed = True

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        self.close(cancel_pending=exc_type is not None)
        return False

    def __repr__(self):
        return (f"Engine({self.backend}, {len(self.devices)} device(s) x {self.workers_per_gpu} "
                f"worker(s), {self.lock_mode})")
