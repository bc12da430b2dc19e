"""The CUDA backend's stages: a device-resident key, and a kernel region that only enqueues.

Data flow of one partition (DESIGN §3):

* ``load_key``: the five queries (H, L, A, B_G1, B_G2) go to device memory once, from cuzk's own
  pool, through a pinned staging ring of two chunks on the upload stream; the twiddle
  tables and constants of the key's domain are built at the same time (warm-up), so no table is
  made inside a kernel region.  Every byte is reserved from the device's ``Budget`` first.
* ``prepare`` (host, before the lock): validate, a∘b = c check, prep_msm on the CPU, reserve the
  partition's device bytes (a, b, c, H, tails, bitmaps, MSM scratch), copy a, b, c, the tail
  scalars/indices and the bitmaps chunk by chunk through the worker's pinned staging ring
  (``_Ring``: 4 × 64 MiB, whatever the partition size) and enqueue their uploads on the worker's
  upload stream; an event marks their end.
* ``run`` (the kernel region): the compute stream waits for that event, then H (six NTT passes
  on the device, result left there), the H MSM reading H's Montgomery output as its scalars,
  the batch additions and tail MSMs of L, A, B_G1 (and B_G2 when ``b_g2="gpu"``) over the
  resident bases; every reduction ends as a few partial sums copied into the worker's pinned
  result slab.  One event ends the region: the only host synchronization of the partition.
* ``finish`` (host, after the lock): Horner/partial sums on the CPU, B_G2 on the CPU when
  ``b_g2="cpu"``, the epilogue, verification, release.

``cuzk.prove`` (``prove_one``, one worker, no lock) with a key whose H bases are on the device whole
(a resident key, or a partly resident one that keeps H: ``_h_whole``) takes an early path
instead: a, b, c are uploaded and the row check, H NTT and H MSM enqueued before prep_msm, which
then runs on the CPU while the GPU computes H; its output is uploaded and the batch additions
and tail MSMs enqueued after.  The same kernels and result views in the same order: the same
bytes.  The engine keeps the four calls (its lock brackets ``run``), except for a partition that
finds its device idle: it takes the early path too, as ``early_head`` + ``early_rest`` under its
lock mode's locks (``_engine._interlock.EARLY_PLANS``).
"""
from __future__ import annotations

import logging
import os
import threading
import time

import numpy as np

from .._assignment import popcount_words
from .._cuda_msm import G1_ONE_SET
from .._cuda_pending import XYZZ_WORDS
from .._errors import BudgetError
from ._base import (DEFAULT_STREAMS, Partition, StageContext, check_randomizers, h_buffers_arg,
                    c_upload_arg, h_tables_arg, key_where_arg, ones_kind_arg, precompute_arg,
                    row_check_arg, streams_arg, timed)
from ._cpu import CpuStages, pow2_at_least

__all__ = ["CudaStages", "ResidentKey", "StreamedKey", "CudaContext", "device_budget", "QUERIES",
           "tail_rows_bound"]

log = logging.getLogger("cuzk.stages")

# query name -> (ProvingKey attribute, group)
QUERIES = {"h": ("h", "g1"), "l": ("l", "g1"), "a": ("a", "g1"), "b_g1": ("b_g1", "g1"),
           "b_g2": ("b_g2", "g2")}
_POINT_BYTES = {"g1": 96, "g2": 192}
_FR = 32
_RING_SLOTS = 4          # pinned staging ring of a worker: slots x _STAGE_CHUNK bytes
# Pinned staging chunk (partition and key uploads).  H200 host, 4 GiB through a 4-slot ring
# (bench/bench_upload.py, session 8): 64 MiB chunks 38.2 / 25.1 / 17.2 GB/s at 16 / 8 / 4 copy
# threads, 16 MiB chunks 47.7 / 30.9 / 22.6 (the DMA alone: 55 GB/s).
_STAGE_CHUNK = 16 << 20
# Device bytes left outside the default budget (driver, modules, other users of the device).
_BUDGET_MARGIN = 2 << 30
# A streamed key's chunk: what each of its device slots holds (``StreamedKey``), sized by
# ``stream_chunk_bytes`` from what the budget leaves beside one partition, between these bounds.
# Larger chunks mean fewer, larger MSMs: the 2^27 region on the H200 with the key streamed at
# 55 GB/s took 2.04 s with 2 slots of 1 GiB and 1.80 s with 2 of 2 GiB (bench/RESULTS.md, session 26).
STREAM_CHUNK_MIN, STREAM_CHUNK_MAX = 256 << 20, 4 << 30
# Slots of a streamed key: the upload of a chunk may run this many chunks minus one ahead of the
# kernels (an H chunk has much work per byte, an L or A chunk little).  H200, 2^27 (bench/RESULTS.md
# session 26): in a 40 GiB budget 3 slots of 4 GiB took a 1.548 s region against 2 slots' 1.808
# (the kernels' wait for the uploads 0.10 against 0.36 s), in 30 GiB 3 of 0.93 GiB 1.935 against 2
# of 1.4 GiB 2.030.
STREAM_SLOTS = 3
# The smallest slot for which ``stream_chunk_bytes`` leaves room for more than one partition in
# flight: below it the chunks' fixed costs outweigh the overlap.  H200, 2^27 (bench/RESULTS.md
# session 26): 3 slots of 0.93 GiB gave a 1.94 s region against 1.55 s with 4 GiB, while a
# partition that waits for the one in flight lost ~0.75 s (2.30 s per partition in 40 GiB).
STREAM_CHUNK_SHARED = 1 << 30
# Partitions in flight a key is placed for when the budget cannot hold the whole key beside every
# worker's partition: two keep the GPU fed (one in its kernel region, the next uploaded beside it);
# further workers do their host stages and wait for a reservation instead of pushing queries off
# the device.  H100 80 GB, 2^27, two-lock (bench/RESULTS.md session 37): with the key placed for
# three partitions, three workers streamed H, L and A (only B resident) and took 15.31 s per 10
# partitions against two workers' 14.31 (H, L, B resident, A streamed), same run; placed for two,
# three workers took 14.31 against two's 14.41.
_PLACED_IN_FLIGHT = 2
# Chunk boundaries fall on multiples of this many points, so a chunk's bits start a uint64 word of
# the bitmap (the batch addition reads whole words).
_CHUNK_ALIGN = 64


def _driver():
    from .._native import _driver as d
    return d


_budgets = {}
_budgets_lock = threading.Lock()
# Per device budget (its memo key): the device bytes taken when it was made (the context, before
# cuzk's allocations: what of the margin is already spent), and the driver's local memory held
# out of it so far (``hold_local_memory``: its reservations, whether it warned).
_context_bytes = {}
_local_holds = {}
_local_lock = threading.Lock()      # a leaf: only the budget's own lock is taken under it
# The driver's default stack (local memory) per thread of a context, which the context's own
# bytes already hold for every resident thread; the programs whose kernels a proof launches.
_LOCAL_DEFAULT = 1024
_PROVING_PROGRAMS = ("ntt", "msm", "batch_add")


def device_budget(device, total=None):
    """The process-wide ``Budget`` of a CUDA device (made on first use: ``total`` bytes, default
    the device's memory less a 2 GiB margin; the device's used bytes then noted for
    ``hold_local_memory``)."""
    from .._budget import Budget
    from .._cuda_state import memo, pools_reserved_bytes
    size = max(0, int(device.total_mem) - _BUDGET_MARGIN) if total is None else total
    key = (device.ordinal, device.context)

    def make():     # what is taken but not by cuzk's pools (a GPU keygen may have filled them)
        taken = int(device.total_mem) - int(device.mem_info()[0])
        _context_bytes[key] = max(0, taken - pools_reserved_bytes(device))
        return Budget(size, f"cuda:{device.ordinal}")
    return memo(_budgets, _budgets_lock, key, make)


def local_memory_bytes(device):
    """The driver's local memory beyond its default that cuzk's proving kernels make it keep:
    (the largest per-thread frame of any of their kernels − the default stack) × SMs × resident
    threads per SM.  The driver grows its local memory to the frame of the largest kernel
    launched and never shrinks it: at 2^27 the G2 affine level 0 (9 664 B per thread) keeps
    2.33 GB on an H100 (bench/RESULTS.md session 47).  Loads the proving programs' modules."""
    from .. import _kernels
    frame = max(_kernels.get_module(device, p).max_local_size_bytes() for p in _PROVING_PROGRAMS)
    return max(0, frame - _LOCAL_DEFAULT) * int(device.sm_count) * int(device.max_threads_per_sm)


def hold_local_memory(device, budget):
    """Hold out of the device's own ``budget`` (``device_budget``; any other budget is the
    caller's share of the card) what the driver's local memory (``local_memory_bytes``) takes
    beyond the part of the 2 GiB margin the context left (the bytes the device had taken when the
    budget was made: this context's, and any other process's then): a lasting reservation for
    the process's life (the driver never gives it back), grown, never released; made before a
    key is placed and before an engine's ``untracked_bytes`` check (which then does not hold the
    same bytes again), so keys and partitions are admitted without it.  Returns the bytes held.
    On a driver failure (a driver without cuModuleEnumerateFunctions) or a budget already too
    full, logs once and holds what it held."""
    key = (device.ordinal, device.context)
    if _budgets.get(key) is not budget:
        return 0
    with _local_lock:
        hold = _local_holds.setdefault(key, {"reservations": [], "warned": False, "local": None})
        held = sum(r.nbytes for r in hold["reservations"])
        try:
            if hold["local"] is None:   # fixed per device (the modules' frames): counted once
                hold["local"] = local_memory_bytes(device)
            taken, local = _context_bytes.get(key, 0), hold["local"]
            need = max(0, taken + local - _BUDGET_MARGIN)
            if need > held:
                hold["reservations"].append(budget.reserve(
                    need - held, "context and driver local memory", block=False, lasting=True))
                held = need
                log.info("%s: %.2f GB held out of the budget: the driver's local memory %.2f GB and "
                         "%.2f GB the device had taken when the budget was made (this context; any "
                         "other process's), less the %.2f GB margin", budget.name, need / 1e9,
                         local / 1e9, taken / 1e9, _BUDGET_MARGIN / 1e9)
        except Exception as e:      # accounting only: the device works without it
            if not hold["warned"]:
                hold["warned"] = True
                log.warning("%s: the driver's local memory was not held out of the budget (%s): "
                            "partitions may be admitted into it", budget.name, e)
        return held


# Host arrays page-locked in place (``_HostPin``), by (address, bytes): a streamed key's
# queries, and c for the two-buffer H stage.  Every user of the same array shares one
# registration (two devices streaming one key, two provers or engines holding it, two
# partitions of a benchmark's array): the driver refuses a second cuMemHostRegister of a range
# (CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED), and the registration is portable, so it serves
# every device.  The last release unregisters it.
_pins = {}
_pins_lock = threading.Lock()
_pin_refused = []        # logged once: the first refusal


class _HostPin:
    """A host array page-locked in place (cuMemHostRegister, portable: every device's copies may
    read it) for as long as its user needs it: ``ptr``, ``nbytes``; ``release()`` (idempotent)
    once no copy reads it any more.  Users of the same array share one registration.  Where
    the driver refuses (e.g. the array overlaps a range someone else registered), ``pin``
    returns None, and the caller stages through its pinned ring; with ``required=True`` it
    raises the driver's error instead (a streamed key has no other way to its device).

    Why in place (``CudaStages(c_upload="register")``): c's upload with two H buffers runs
    inside the region while the H NTT waits for it, and through the ring it ran at the host
    copy's ~7 GB/s (4.3 GB at 2^27: 0.58 s, bench/RESULTS.md session 30); from the array itself
    it is a bare DMA (~53 GB/s), and registering costs ~0.15 s and unregistering ~0.09 s per
    4 GiB on an idle device (session 8's ``bench_upload.py``), with no second host copy (issue
    8: host memory ≤ a, b, c + aux + 2 GiB per partition).  Beside another worker's device
    work unregistering took ~0.6 s and held that worker's enqueues meanwhile (session 34), and
    the engine's A/B lost (session 35: 10 partitions +10 to +15 %), so "ring" is the default."""

    def __init__(self, key):
        self.key, self.ptr, self.nbytes = key, key[0], key[1]

    @classmethod
    def pin(cls, arr, device, required=False):
        from .._errors import CudaError
        arr = np.ascontiguousarray(arr)
        key = (int(arr.ctypes.data), int(arr.nbytes))
        if key[1] == 0:
            return None
        with _pins_lock:        # held while registering: a key's load, or c in a prepare
            entry = _pins.get(key)
            if entry is None:
                try:
                    reg = _driver().register_host(arr, device)
                except CudaError as e:
                    if required:
                        raise
                    if not _pin_refused:
                        _pin_refused.append(e)
                        log.info("page-locking a partition's array in place was refused (%s): "
                                 "it goes through the pinned ring (said once)", e)
                    return None
                entry = _pins[key] = [reg, 0]
            entry[1] += 1
        return cls(key)

    def release(self):
        key, self.key = self.key, None
        if key is None:
            return
        with _pins_lock:
            entry = _pins[key]
            entry[1] -= 1
            if entry[1] == 0:
                del _pins[key]
                entry[0].close()


class _Pinned:
    """A growable pinned host buffer owned by one worker (grown only outside kernel regions)."""

    def __init__(self, device):
        self.device, self.buf = device, None
        self._lock = threading.Lock()

    def get(self, nbytes):
        """The buffer, grown to ``nbytes`` first if needed (only the owning worker calls this,
        between its partitions: no upload of it is in flight then)."""
        with self._lock:
            if self.buf is None or self.buf.nbytes < nbytes:
                self._drop()
                # with headroom: a pinned allocation takes ~0.4 s/GB and stalls the driver
                # for the other workers too, so a partition a little larger must not regrow it
                self.buf = _driver().PinnedBuffer(_align(nbytes + nbytes // 8, 4096), self.device)
            return self.buf

    def warm(self, nbytes):
        """Allocate ``nbytes`` now if the worker has no buffer yet (callable from another
        thread: an existing buffer, possibly in use, is never replaced here)."""
        with self._lock:
            if self.buf is None:
                self.buf = _driver().PinnedBuffer(_align(max(nbytes, 4096), 4096), self.device)

    def close(self):
        with self._lock:
            self._drop()

    def _drop(self):
        buf, self.buf = self.buf, None
        if buf is not None:
            try:
                buf.close()
            except BufferError:
                pass        # a finished partition still holds a view: freed with the last view


class _Ring:
    """A pinned staging ring: ``slots`` page-locked chunks, each refilled once the upload that
    read it has completed (one event per slot).  Host memory stays slots × chunk bytes whatever
    the upload size (a 2^27 partition's a, b, c alone are 12.9 GB; issue 8 allows the partition
    2 GiB of host memory beyond its inputs).  Used by one thread at a time (the worker, or the key
    loader); ``warm`` may come from another thread."""

    def __init__(self, device, slots=_RING_SLOTS, chunk=None):
        self.device, self.slots = device, int(slots)
        self.chunk = int(_STAGE_CHUNK if chunk is None else chunk)
        self._bufs, self._evs, self._used, self._next = [], [], [], 0
        self._lock = threading.Lock()

    @property
    def allocated(self):
        """Bytes of pinned memory held (0 before the first use or ``warm``)."""
        return len(self._bufs) * self.chunk

    def warm(self):
        """Allocate the slots now (a pinned allocation costs ~0.4 s/GB and stalls the driver for
        other threads: never inside a partition)."""
        with self._lock:
            self._alloc()

    def _alloc(self):
        if not self._bufs:
            d = _driver()
            self._bufs = [d.PinnedBuffer(self.chunk, self.device) for _ in range(self.slots)]
            self._evs = [d.Event(self.device, timing=False) for _ in range(self.slots)]
            self._used = [False] * self.slots

    def put(self, dst_ptr, src, nbytes, stream, threads=None, progress=None, timings=None,
            name="put"):
        """Enqueue the copy of ``src`` (a C-contiguous buffer, zero-padded to ``nbytes``) to device
        address ``dst_ptr`` on ``stream``, chunk by chunk through the slots (the CPU copy of a
        chunk on the pool, GIL released, overlaps the DMA of the previous ones).  Returns once
        the last chunk is enqueued; ``progress(m)`` after each chunk of m bytes.  ``timings``: a
        dict that gains where the time went, in seconds: ``name + ":wait"`` (for a slot's
        previous DMA), ``":copy"`` (the CPU copies into the slots) and ``":enqueue"`` (the
        copies' and events' enqueue)."""
        from .._native import _pool
        d = _driver()
        src = memoryview(src).cast("B")
        if src.nbytes > nbytes:
            raise ValueError(f"{src.nbytes} source bytes do not fit in {nbytes}")
        clock = time.perf_counter
        spent = [0.0, 0.0, 0.0]                     # wait, copy, enqueue
        with self._lock:
            self._alloc()
            for off in range(0, int(nbytes), self.chunk):
                m = min(self.chunk, int(nbytes) - off)
                k = self._next
                self._next = (k + 1) % self.slots
                t0 = clock()
                if self._used[k]:
                    self._evs[k].synchronize()        # slot k's previous upload has read it
                t1 = clock()
                _pool.copy_into(self._bufs[k].asarray(np.uint8)[:m], src[off: off + m], threads)
                t2 = clock()
                d.copy_htod(dst_ptr + off, self._bufs[k].ptr, m, stream)
                self._evs[k].record(stream)
                self._used[k] = True
                spent[0] += t1 - t0
                spent[1] += t2 - t1
                spent[2] += clock() - t2
                if progress is not None:
                    progress(m)
        if timings is not None:
            for part, t in zip((":wait", ":copy", ":enqueue"), spent):
                timings[name + part] = timings.get(name + part, 0.0) + t

    def drain(self):
        """Wait until no upload reads the slots."""
        with self._lock:
            for k, used in enumerate(self._used):
                if used:
                    self._evs[k].synchronize()
                    self._used[k] = False

    def close(self):
        self.drain()
        with self._lock:
            for b in self._bufs:
                try:
                    b.close()
                except BufferError:
                    pass
            for e in self._evs:
                e.close()
            self._bufs, self._evs, self._used = [], [], []


class CudaContext(StageContext):
    """A worker's CUDA objects: compute, side and upload streams, pinned staging and result
    memory.  ``side`` carries the batch additions and tail MSMs beside the H NTT and H MSM on
    ``compute`` when the stages run with ``streams=2`` (a resident key), and c's upload of a
    streamed key's partition with two H buffers (``CudaStages._upload_c``)."""

    def __init__(self, stages, budget=None, threads=None, name="w0"):
        super().__init__(stages, budget, threads, name)
        d = _driver()
        dev = stages.device
        self.device = dev
        self.compute = d.Stream(dev)
        # default priority: at the highest one (its kernels dispatched first) the 2^27 engine
        # lost, 15.06 s per 10 partitions against 14.83 (bench/RESULTS.md, session 8)
        self.side = d.Stream(dev)
        self.upload = d.Stream(dev)
        self.staging = _Ring(dev)
        self.results = _Pinned(dev)

    def event(self, stream, timing=False):
        """An event recorded on ``stream`` now (``timing=True``: usable with elapsed_ms)."""
        ev = _driver().Event(self.device, timing=timing)
        ev.record(stream)
        return ev

    def close(self):
        for s in (self.compute, self.side, self.upload):
            s.synchronize()
        self.staging.close()
        self.results.close()
        for s in (self.compute, self.side, self.upload):
            s.close()


class ResidentKey:
    """A proving key whose five queries live in device memory (cuzk's pool of the device).

    ``where`` is ``"device"``; ``nbytes`` the device bytes reserved (points + warm-up tables);
    ``ptr(q)`` the device address of query ``q`` (one of ``QUERIES``).  Shared read-only by
    every worker of the device; ``release()`` frees it (idempotent).  ``deep_tables``: its H
    stage reads deep twiddle tables (``cuzk._cuda_ntt.h_deep``: 1 GiB instead of 8 at 2^27).
    """

    where = "device"
    h_head = True           # its H MSM is one plan, run first (``_heads``)
    h_buffers = 4           # a, b, c's buffer and H's output (``CudaStages(h_buffers=)``)

    def __init__(self, pk, device, pool, budget, progress=None, precompute=1, c=None,
                 abc_scratch=False, side_scratch=False, deep_tables=False):
        from .. import _cuda_msm, _cuda_ntt
        self.pk, self.device, self.pool = pk, device, pool
        self._bufs = {}
        self._res = None
        self._tables_held = False       # the H stage's tables held (``_hold_tables``)
        lg = pk.domain_size.bit_length() - 1
        self.deep_tables = _cuda_ntt.h_deep(lg, deep_tables)
        sizes = {q: _query_bytes(pk, q) for q in QUERIES}
        base = _key_device_bytes(pk, self.deep_tables)   # the five queries and the H stage's tables
        # the H MSM (the partition's largest, over uniform scalars) may read `precompute` shifted
        # copies of the H bases (``_cuda_msm.precompute_bases``): fewer windows per MSM
        nh = pk.h.shape[0]
        if precompute == "auto":
            precompute, c = auto_h_msm(pk.domain_size, nh, device, budget, base, c, abc_scratch,
                                       side_scratch)
        self.h_plan_args = {"k": 1, "c": h_msm_window(nh, 1, c)}
        pre = 0
        if precompute > 1 and nh:
            plan = _cuda_msm.msm_plan(nh, "g1", device, npoints=nh, k=precompute, c=c)
            self.h_plan_args = {"k": plan.k, "c": plan.c}
            pre = plan.precompute_bytes
        log.info("resident key 2^%d: H MSM with %d precomputed copies, window %d", lg,
                 self.h_plan_args["k"], self.h_plan_args["c"])
        # the table's copy 0 is the H query itself (uploaded straight into it): the precompute
        # costs (k − 1)·|H| bytes beyond the five queries (2^27, k = 2: 12 GiB, not 24)
        self.precompute_bytes = max(0, pre - sizes["h"]) if pre else 0
        self.nbytes = base + self.precompute_bytes
        if budget is not None:
            self._res = budget.reserve(self.nbytes, "resident key", block=False, lasting=True)
        d = _driver()
        up = d.Stream(device)
        ring = _Ring(device, slots=2)
        try:
            total, done = sum(sizes.values()), [0]

            def step(m):
                done[0] += m
                if progress is not None:
                    progress(done[0], total)
            for q, (attr, _) in QUERIES.items():
                host = np.ascontiguousarray(getattr(pk, attr)).view(np.uint8).reshape(-1)
                if host.size == 0:
                    continue
                if q == "h" and pre:            # into copy 0 of the table: no separate H buffer
                    buf = self._bufs["h_table"] = pool.alloc(pre, up)
                else:
                    buf = self._bufs[q] = pool.alloc(host.size, up)
                ring.put(buf.ptr, host, host.size, up, progress=step)
            if pre:
                table = self._bufs["h_table"].ptr
                _cuda_msm.precompute_bases(plan, up, table, table)
            _hold_tables(self, lg, up)
            up.synchronize()
        except BaseException:
            up.synchronize()
            self.release()
            raise
        finally:
            ring.close()
            up.close()

    def ptr(self, q):
        """Device address of query q's bases (for "h" with precomputed copies: the table)."""
        b = self._bufs.get("h_table" if q == "h" and "h_table" in self._bufs else q)
        return b.ptr if b is not None else 0

    def release(self):
        bufs, self._bufs = self._bufs, {}
        for b in bufs.values():
            b.free()
        _release_held_tables(self)
        if self._res is not None:
            self._res.release()

    def __repr__(self):
        return f"ResidentKey(domain={self.pk.domain_size}, {self.nbytes} device bytes)"


class StreamedKey:
    """A proving key that does not fit the device budget: its queries stay in host memory,
    page-locked in place (cuMemHostRegister: no second host copy), and every partition streams
    them in chunks of ``chunk_points`` points through the key's ``slots`` device slots on the
    worker's upload stream, each refilled once the kernels that read it are done (each reduction
    of a partition runs per chunk: the H MSM over the chunk's scalars, a batch addition over the
    chunk's bits, a tail MSM over the tail entries whose indices fall in it; ``finish`` adds the
    partial sums).  ``where`` is ``"host"``; ``nbytes`` the device bytes reserved for good (the
    warm-up tables, the slots and the ``resident`` queries); ``slot_bytes`` the largest chunk of
    any streamed query.

    The slots belong to the key, not to a partition: partitions that use them take turns while
    their kernel regions are enqueued (``take_slots``), and each refill waits for the kernels of
    the previous user of its slot (``slot_free``: events, kept from one partition to the next),
    so a partition reserves no slot and the next one's first chunks upload as soon as the last
    kernels reading them are done.

    ``resident``: queries kept on the device anyway (a partly resident key, ``stream_plan``),
    uploaded once with the key and read in place as one chunk each (B_G1 and B_G2 together:
    their tails share one index array, uploaded chunk-relative only for streamed queries).

    ``h_head``: with H resident, its MSM runs first as one plan and the other reductions (and the
    slots' waits and refills) may go to the side stream beside it, as a resident key's do
    (``CudaStages(split_side=True)``; ``_heads``).

    ``deep_tables``: the H stage reads deep twiddle tables (``cuzk._cuda_ntt.h_deep``: at 2^27
    1 GiB instead of 8, which go to the slots and the partitions in flight).  ``h_buffers``: how
    many buffers of n field elements its partitions compute H in (4, 3 or 2;
    ``CudaStages(h_buffers=...)``): the slots are sized for partitions of that many.
    ``h_window``: the H MSM's window (None: ``h_msm_window``'s choice, per chunk of a streamed H).

    ``slots``: None is ``STREAM_SLOTS``; more let the uploads run further ahead of the kernels.
    ``chunk_bytes``: the slot size (None: ``stream_chunk_bytes`` of the budget for
    ``partitions`` partitions in flight whose tails may take ``room`` bytes of a, b, c's buffer),
    divided by the largest point (G2's 192 bytes when the
    key has B_G2 points) and rounded down to ``_CHUNK_ALIGN`` points.  So a 2^27 PoRep key
    (44 GiB) needs a few slots of 0.25–4 GiB on the device, and proves where its tables, the
    slots, a, b, c and H fit (a 30 GiB budget: peak 27.8 GiB, bench/RESULTS.md session 26).
    """

    where = "host"

    def __init__(self, pk, device, pool, budget, chunk_bytes=None, slots=None, partitions=1, room=0,
                 resident=(), deep_tables=True, h_head=False, h_buffers=4, h_window=None):
        from .. import _cuda_ntt
        self.pk, self.device = pk, device
        self.slots = STREAM_SLOTS if slots is None else int(slots)
        if self.slots < 2:
            raise ValueError(f"a streamed key needs at least 2 slots, got {slots!r}")
        self._regs = {}
        self._res = None
        self.slot_bufs = []
        self.slot_free = [[] for _ in range(self.slots)]
        self._slot_lock = threading.Lock()
        self._bufs = {}
        self._tables_held = False       # the H stage's tables held (``_hold_tables``)
        bad = set(resident) - set(QUERIES)
        if bad:
            raise ValueError(f"resident queries must be among {sorted(QUERIES)}, got {sorted(bad)}")
        if any(0 < len(set(u) & set(resident)) < len(u) for u in _SPLIT_UNITS):
            raise ValueError(f"b_g1 and b_g2 are resident together or not at all, got {sorted(resident)}")
        # the queries kept on the device (a partly resident key: ``stream_plan``)
        self.resident = tuple(q for q in QUERIES if q in set(resident) and self.points(q))
        self.h_head = bool(h_head) and "h" in self.resident
        self.h_buffers = int(h_buffers)
        if self.h_buffers not in (2, 3, 4):
            raise ValueError(f"h_buffers must be 2, 3 or 4, got {h_buffers!r}")
        lg = pk.domain_size.bit_length() - 1
        self.deep_tables = _cuda_ntt.h_deep(lg, deep_tables)
        tables = _tables_bytes(pk.domain_size, self.deep_tables)
        kept = sum(_align(_query_bytes(pk, q)) for q in self.resident)
        if chunk_bytes is None:
            free = None if budget is None or budget.free is None else budget.free - kept
            chunk_bytes = stream_chunk_bytes(pk.domain_size, free, tables, self.slots, partitions, room,
                                             self.h_buffers)
        widest = max([_POINT_BYTES[g] for q, (_, g) in QUERIES.items()
                      if self.points(q) and q not in self.resident] or [_POINT_BYTES["g1"]])
        self.chunk_points = max(_CHUNK_ALIGN, chunk_bytes // widest // _CHUNK_ALIGN * _CHUNK_ALIGN)
        self.slot_bytes = max([4] + [min(self.points(q), self.chunk_points) * _POINT_BYTES[g]
                                     for q, (_, g) in QUERIES.items() if q not in self.resident])
        self.nbytes = tables + self.slots * _align(self.slot_bytes) + kept
        # no copies of H (they need a whole key's budget); a resident H is one chunk: its window now
        c = h_msm_window(self.points("h"), 1, h_window) if "h" in self.resident else h_window
        self.h_plan_args = {"k": 1, "c": c}
        self.precompute_bytes = 0
        if budget is not None:
            self._res = budget.reserve(self.nbytes, "streamed key: tables and slots", block=False,
                                       lasting=True)
        d = _driver()
        try:
            for q, (attr, _) in QUERIES.items():   # shared with every other user of pk's arrays
                pin = _HostPin.pin(getattr(pk, attr), device, required=True)
                if pin is not None:
                    self._regs[q] = pin
            up = d.Stream(device)
            try:
                self.slot_bufs = [pool.alloc(self.slot_bytes, up) for _ in range(self.slots)]
                for q in self.resident:     # straight from the page-locked query
                    nb = _query_bytes(pk, q)
                    self._bufs[q] = pool.alloc(nb, up)
                    d.copy_htod(self._bufs[q], self.host_ptr(q), nb, up)
                _hold_tables(self, lg, up)
                up.synchronize()
            finally:
                up.close()
        except BaseException:
            self.release()
            raise

    def points(self, q):
        """Points of query q."""
        return int(getattr(self.pk, QUERIES[q][0]).shape[0])

    def chunks(self, q):
        """[(lo, hi)]: query q's chunks of points, in order (one for a resident query)."""
        n, c = self.points(q), self.chunk_points
        if q in self.resident:
            return [(0, n)]
        return [(lo, min(n, lo + c)) for lo in range(0, n, c)]

    def ptr(self, q):
        """Device address of resident query q's bases (``resident``)."""
        return self._bufs[q].ptr

    def host_ptr(self, q):
        r = self._regs.get(q)
        return r.ptr if r is not None else 0

    def take_slots(self):
        """The slots, for one partition's kernel region while ``_Bases`` enqueues it: one
        partition at a time, in the order they ask; ``_Bases.close`` gives them back
        (``give_slots``) with the events its successor's refills wait for.  A leaf lock: held
        only while ``run`` enqueues (the engine's compute or device lock already held, or none
        under ``cuzk.prove``), and nothing is waited for under it but the driver's launch queue,
        no other lock and no budget, so it adds no edge to the interlock's deadlock model."""
        self._slot_lock.acquire()
        return self.slot_bufs, [list(evs) for evs in self.slot_free]

    def give_slots(self, free):
        """End a ``take_slots``: ``free[k]`` the events after which slot k may be rewritten."""
        self.slot_free = [list(evs) for evs in free]
        self._slot_lock.release()

    def release(self):
        for evs in self.slot_free:      # the last kernels and copies that touch the slots
            for e in evs:
                e.synchronize()
        self.slot_free = [[] for _ in range(self.slots)]
        bufs, self.slot_bufs = self.slot_bufs + list(self._bufs.values()), []
        self._bufs = {}
        for b in bufs:
            b.free()
        regs, self._regs = self._regs, {}
        for r in regs.values():
            r.release()
        _release_held_tables(self)
        if self._res is not None:
            self._res.release()
            self._res = None

    def __repr__(self):
        kept = f", resident {'/'.join(self.resident)}" if self.resident else ""
        return f"StreamedKey(domain={self.pk.domain_size}, {self.slots} slots of {self.slot_bytes} bytes{kept})"


class _Bases:
    """Where a partition's kernels read the bases of each unit (``_unit_of``: a query of a
    resident key, or a (query, chunk) of a streamed one): the resident key, or one of the streamed
    key's device slots, which the upload stream fills in ``order``, each refill waiting for the
    kernels that read the slot's previous unit (this partition's, or for its first units the
    previous partition's: ``StreamedKey.take_slots``).  A streamed key's slots are this
    partition's from construction to ``close`` (call it once every kernel is enqueued, also
    after a failure)."""

    def __init__(self, part, order):
        self.part, self.key, self.ctx, self.order = part, part.key, part.ctx, order
        self.streamed = part.key.where == "host"
        if self.streamed:
            # the units that go through the slots (a partly resident key reads the others in place)
            self.order = order = [u for u in order if u[0] not in self.key.resident]
            self.ready = {}
            # timing events: (start, end) of each chunk's upload, and of each compute-stream wait
            # for one (``times``)
            self.uploads, self.waits, self.waited = [], [], set()
            if not order:       # every unit resident (the early path's H): no slot taken
                self.slots, self.free = [], None
                return
            self.slots, self.free = self.key.take_slots()
            # per slot: whether its last upload has no reader enqueued yet (then a successor's
            # refill also waits for that upload: ``close``), and that upload's event
            self.unread = [False] * len(self.slots)
            self.last_up = [None] * len(self.slots)
            try:
                for i in range(min(len(self.slots), len(order))):
                    self._upload(i)
            except BaseException:
                self.close()
                raise

    def close(self):
        """Give a streamed key's slots back (idempotent)."""
        if not self.streamed or self.free is None:
            return
        free = [evs + ([up] if unread else []) for evs, up, unread in zip(self.free, self.last_up, self.unread)]
        self.free = None
        self.key.give_slots(free)

    def _upload(self, i):
        d = _driver()
        (q, j), k = self.order[i], i % len(self.slots)
        up = self.ctx.upload
        for e in self.free[k]:
            up.wait_event(e)                      # kernels of the slot's previous unit are done
        lo, hi = self.key.chunks(q)[j]
        pb = _POINT_BYTES[QUERIES[q][1]]
        start = self.ctx.event(up, timing=True)
        if hi > lo:
            d.copy_htod(self.slots[k], self.key.host_ptr(q) + lo * pb, (hi - lo) * pb, up)
            self.part.bytes_uploaded += (hi - lo) * pb
        self.ready[(q, j)] = self.last_up[k] = self.ctx.event(up, timing=True)
        self.unread[k] = True
        self.uploads.append((start, self.ready[(q, j)]))

    def ptr(self, unit, stream=None):
        """The device address of ``unit``'s bases for kernels enqueued next on ``stream`` (None:
        the compute stream; every unit that goes through the slots on one stream)."""
        if not self.streamed:
            return self.key.ptr(unit)
        if unit[0] in self.key.resident:
            return self.key.ptr(unit[0])
        if unit not in self.waited:         # a unit's ones and tail: one wait
            self.waited.add(unit)
            c = self.ctx.compute if stream is None else stream
            before = self.ctx.event(c, timing=True)
            c.wait_event(self.ready[unit])
            self.waits.append((before, self.ctx.event(c, timing=True)))
        return self.slots[self.order.index(unit) % len(self.slots)].ptr

    def done(self, unit, stream=None):
        """The kernels reading ``unit`` are enqueued on ``stream`` (None: the compute stream):
        refill its slot with the unit as many places on as there are slots."""
        if not self.streamed or unit[0] in self.key.resident:
            return
        i, m = self.order.index(unit), len(self.slots)
        self.free[i % m] = [self.ctx.event(self.ctx.compute if stream is None else stream)]
        self.unread[i % m] = False
        if i + m < len(self.order):
            self._upload(i + m)

    def times(self):
        """A streamed key's {"gpu:key_upload": seconds the upload stream copied its chunks (their
        bytes count in ``part.bytes_uploaded``), "gpu:key_wait": seconds the compute stream waited
        for them} (after the region; {} for a resident key)."""
        if not self.streamed:
            return {}
        d = _driver()
        span = lambda marks: sum(d.Event.elapsed_ms(a, b) for a, b in marks) / 1e3   # noqa: E731
        return {"gpu:key_upload": span(self.uploads), "gpu:key_wait": span(self.waits)}


def _unit_of(name):
    """The bases a reduction named ``name`` reads: its query ("l:tail" -> "l"), or for a streamed
    key's chunk ("l:tail@3", "h@0") the pair (query, chunk)."""
    base, at, j = name.partition("@")
    q = base.partition(":")[0]
    return (q, int(j)) if at else q


def _query_of(name):
    """The query of a reduction named ``name`` ("b_g1:ones@2" -> "b_g1")."""
    return name.partition("@")[0].partition(":")[0]


def _tables_bytes(domain, deep=False):
    """Device bytes of the H stage's warm-up tables at ``domain``: its twiddle tables
    (``_cuda_ntt.h_tables_bytes``: 32 bytes per element each; an eighth and a tail when ``deep``)
    and constants (< 4 KiB)."""
    from .. import _cuda_ntt
    return _cuda_ntt.h_tables_bytes(domain.bit_length() - 1, deep) + 4096


def _query_bytes(pk, q):
    """Bytes of query q's points."""
    return int(getattr(pk, QUERIES[q][0]).nbytes)


def _key_device_bytes(pk, deep=False):
    """Device bytes of ``pk`` resident without precomputed copies: its five queries and the
    H stage's tables, deep or not (``ResidentKey`` with ``precompute=1``)."""
    return sum(_query_bytes(pk, q) for q in QUERIES) + _tables_bytes(pk.domain_size, deep)


def _fits_whole(pk, budget, partitions, deep):
    """Whether ``budget``, less its resident keys, holds ``pk`` whole (``_key_device_bytes``;
    ``deep``: its H tables deep) and ``partitions`` partitions beside it (``partition_bytes``);
    True for a budget without a total."""
    return budget is None or not budget.never_fits(
        _key_device_bytes(pk, deep) + partitions * partition_bytes(pk.domain_size))


def _hold_tables(key, lg, stream):
    """The twiddle tables (``key.deep_tables`` or not) and constants of the H stage at 2^lg,
    built now (not in a kernel region) and held for ``key`` until ``_release_held_tables``
    (``hold_h_tables``)."""
    from .. import _cuda_ntt
    st = _cuda_ntt._state(key.device)
    st.hold_h_tables(lg, stream, key.deep_tables)
    key._tables_held = True
    st.consts(lg, stream)


def _release_held_tables(key):
    """A key's release of the H tables it holds (``_hold_tables``; idempotent): before its
    reservation goes back, so the budget never counts bytes the tables still take."""
    held, key._tables_held = key._tables_held, False
    if held:
        from .. import _cuda_ntt
        lg = key.pk.domain_size.bit_length() - 1
        _cuda_ntt._state(key.device).release_h_tables(lg, key.deep_tables)


class _Region:
    """A slice of another device buffer (``ptr``, ``nbytes``); it goes with that buffer, so
    ``free`` does nothing."""

    __slots__ = ("ptr", "nbytes")

    def __init__(self, ptr, nbytes):
        self.ptr, self.nbytes = ptr, nbytes

    def free(self, stream=None):
        return None


class _Arena:
    """The allocator interface of ``enqueue_msm`` (``alloc(nbytes, stream)``, buffers with
    ``ptr`` and ``free(stream)``) over one device buffer whose contents are dead by then (a, b,
    c's after the H NTT: ``abc_scratch``): consecutive 256-byte-aligned slices from the bottom,
    never reused until ``reset``, freed with the buffer; from the first request that does not
    fit on, every request goes to ``spill`` (the pool), as ``_abc_split`` counts.  Kernels on
    the stream order every use.

    ``reset``: the next reduction on the same stream starts at the bottom again (the previous
    one's slices are dead: stream order).  ``alloc_keep``: a slice off the top that outlives
    ``reset`` until it is freed (a sort kept for a later MSM, ``SortShare``), or from ``spill``
    when it does not fit above the bottom's slices."""

    def __init__(self, ptr, nbytes, spill):
        self.ptr, self.nbytes, self.at, self.spill = ptr, nbytes, 0, spill
        self.spilling = False
        self.kept = []                 # live alloc_keep slices

    def top(self):
        """Offset of the lowest live kept slice (the bottom's limit)."""
        return min((r.ptr - self.ptr for r in self.kept), default=self.nbytes)

    def alloc(self, nbytes, stream=None):
        size = _align(nbytes)
        if self.spilling or self.at + size > self.top():
            self.spilling = True
            return self.spill.alloc(nbytes, stream)
        region = _Region(self.ptr + self.at, nbytes)
        self.at += size
        return region

    def alloc_keep(self, nbytes, stream=None):
        size = _align(nbytes)
        top = self.top()
        if top - size < self.at:
            return self.spill.alloc(nbytes, stream)
        region = _Kept(self, self.ptr + top - size, nbytes)
        self.kept.append(region)
        return region

    def reset(self):
        self.at, self.spilling = 0, False


class _Kept(_Region):
    """An ``_Arena.alloc_keep`` slice: freeing it gives its bytes back to the arena (stream
    order: the later users of the arena are on the same stream)."""

    __slots__ = ("arena",)

    def __init__(self, arena, ptr, nbytes):
        super().__init__(ptr, nbytes)
        self.arena = arena

    def free(self, stream=None):
        if self in self.arena.kept:
            self.arena.kept.remove(self)


def _abc_split(buffers, room):
    """``(in the arena, beyond it)``: bytes of an MSM plan's ``buffers`` (name, bytes), taken in
    order (``enqueue_msm`` allocates them so) into ``room`` bytes until one does not fit; that one
    and the rest go to the pool (``_Arena``)."""
    at = 0
    for i, (_, nb) in enumerate(buffers):
        if at + _align(nb) > room:
            return at, sum(_align(b) for _, b in buffers[i:])
        at += _align(nb)
    return at, 0


def _pool_peaks(plans, room, pair=None):
    """Pool bytes each of ``plans`` (name, kind, plan) holds at its peak when they run one after
    another on one stream, each MSM taking its scratch from an ``_Arena`` of ``room`` bytes
    (reset before it; the kept sort of ``pair`` = (giver, taker) indices off its top:
    ``enqueue_msm``'s ``alloc_keep``) and each batch addition from the pool; bytes kept in the
    pool from the giver to the taker count in every plan between.  ``room`` 0: no arena.  The
    same requests in the same order as ``enqueue_msm`` and ``enqueue_batch_add`` make them."""
    from .._cuda_msm import SortShare
    gi, ti = pair or (None, None)
    kept_at, kept_pool = [], 0             # sizes of the kept slices in the arena; kept pool bytes
    out = []
    for i, (_, kind, p) in enumerate(plans):
        if kind != "msm" or not p.n:
            out.append(p.scratch_bytes + kept_pool)
            continue
        top = room - sum(kept_at)
        at, spilled, spilling = 0, 0, False
        reqs = [(b, _align(nb)) for b, nb in p.buffers
                if not (i == ti and b in ("counts", "entries", "off_a"))]
        if i == gi:
            reqs.append(("kept_off", SortShare.offsets_bytes(p)))
        for b, size in reqs:
            if i == gi and b in ("entries", "kept_off"):         # alloc_keep
                if top - size < at:
                    kept_pool += size
                else:
                    top -= size
                    kept_at.append(size)
            elif spilling or at + size > top:
                spilling = True
                spilled += size
            else:
                at += size
        out.append(spilled + kept_pool)        # only the giver's own requests change kept_pool
        if i == ti:
            kept_at, kept_pool = [], 0
    return out


class _Done:
    """The end of a kernel region: an event on the worker's compute stream."""

    __slots__ = ("event",)

    def __init__(self, event):
        self.event = event

    def synchronize(self):
        self.event.synchronize()

    def query(self):
        return self.event.query()


class CudaStages(CpuStages):
    """The CUDA backend (see the module docstring).

    Parameters
    ----------
    threads : int or None
        CPU threads of the host stages (prep_msm, epilogue, B_G2 on the CPU).
    device : int or None
        CUDA device ordinal (None: 0).
    b_g2 : {"auto", "gpu", "cpu"}
        Where the B_G2 query (batch addition + tail MSM over G2) runs.  "auto" picks the GPU on
        hosts with fewer than 64 CPU cores (an H200 host has 16: the GPU is faster there) and says
        so once in the log.
    precompute : int or "auto"
        Shifted copies of the H bases kept beside the resident key (1: none; k: the H MSM
        processes ceil(W/k) windows; (k − 1)·|H|·96 bytes beyond the key, reserved from the
        budget).  "auto" (default): the measured best k and window for the key's domain
        (``auto_h_msm``: none below 2^16, 16 up to 2^21, 8 up to 2^23, 4 below 2^24, 13 with a
        20-bit window from 2^24 to 2^26 (else 4 or 2), 5 at 2^27 where they fit (else 4: the
        H200), fewer copies when the budget would not keep room for two partitions in flight.
    h_window : int or None
        Window width of the H MSM, resident or streamed (None: ``h_msm_window``'s choice for uniform
        scalars, or the one ``precompute="auto"`` picks with its copies).
    early_h : bool
        With H's bases on the device (a resident key, or a partly resident one that keeps H),
        start the row check, H NTT and H MSM before prep_msm, so that they overlap it (the module
        docstring; a split 2^27 key on an H100: 14.26 -> 14.02 s per 10 partitions, the first
        partition's prep_msm off the ramp, bench/RESULTS.md session 47): ``prove_one``
        (``cuzk.prove``) always, the engine for a partition that finds its device idle
        (``_interlock.EARLY_PLANS``).  False: prepare /
        run / finish one after another (an attribute: a benchmark may set it per run to compare
        the two; the stage option ``early_h=0``).
    abc_scratch : bool
        a, b and c share one device buffer, and the H MSM takes its scratch from it (a, b, c
        are dead once the H NTT has run): a partition reserves the larger of the two instead
        of their sum (2^27: ~17.5 instead of ~27.5 GiB), which leaves room for more
        precomputed H copies under ``precompute="auto"`` (2^27: 4 instead of 2 beside two
        partitions; the 10-partition proof 12.70 -> 12.53 s on the H200, bench/RESULTS.md,
        session 14).  The same bytes either way; False: separate buffers (the stage option
        ``abc_scratch=0``).
    streams : {1, 2}
        Compute streams of a partition's kernel region with a resident key.  1: every kernel
        on the worker's compute stream, one after another.  2: the batch additions and tail
        MSMs on the worker's side stream, concurrent with the row check, H NTT and H MSM on
        the compute stream (they do not depend on H), which waits for them at the end; the
        region's scratch is then H's plus the largest other, not the largest (at 2^27 with
        ``abc_scratch`` H's takes none beside a, b, c).  The same kernels into the same result
        views: the same bytes.  Default 2 (``DEFAULT_STREAMS``; measured on the H200 at 2^27:
        a 10-partition proof 12.47 -> 12.29 s, bench/RESULTS.md session 15)
    ones_kind : {"auto", "xyzz", "affine", "balanced"}
        The batch additions' kernel (``cuzk._cuda_batch.KINDS``): "auto" (default) takes
        ``default_kind`` per query (by group, points and bits set); a kernel name forces it for
        all four (the same bytes: a benchmark compares kernels inside whole proofs).
    row_check : {"beside", "on_failure"}
        The row check a∘b = c of ``check=True`` (H takes c = a∘b, so an unsatisfied row must be
        caught on the host).  "beside" (default): on the worker's CPU threads while the region
        runs, every partition.  "on_failure": "beside" for a partition whose proof ``finish``
        will not verify (``Partition.verify``, set from ``verify`` by ``cuzk.prove`` and the
        engine); a verified one skips the check and runs it only if its proof fails
        verification, to name the first bad row (``UnsatisfiedAssignmentError``).  A witness
        that leaves a row unsatisfied (a, b, c = A·w, B·w, C·w) still raises: its proof verifies
        only if the key's secret τ is a root of C − C' (C, C' the degree < n interpolants of c
        and a∘b), probability <= n/r.  What it no longer reports is a c that disagrees with a∘b
        while a, b and the witness agree: c is never read, and the proof returned is the valid
        one of the witness.  It saves the check's CPU work on every good partition (2^24 ~0.6,
        2^27 ~3 core-seconds: the row check's median times 8 threads, H200 host, bench/RESULTS.md
        session 22); timed in the engine (session 23): no change where the GPU is the bottleneck,
        so "beside" stays the default.
    share_sort : bool
        The B_G2 tail MSM reuses the B_G1 tail's sort (``_cuda_msm.SortShare``: the same
        scalars and base indices, so the same sorted entries) instead of counting, scanning and
        scattering again, when their plans sort alike; the entries are held from one to the
        other (counted in the partition's scratch).  The same bytes; False: each sorts (the
        stage option ``share_sort=0``, for an A/B).
    side_scratch : bool
        With ``abc_scratch``, the tail MSMs after H's take their scratch from the part of a, b,
        c's buffer that H's MSM leaves (all of it on one stream), once the H NTT is done (the
        side stream waits for it before its first tail MSM); the kept sort of ``share_sort``
        from its top.  A partition then reserves only what does not fit there (2^27 PoRep-like:
        17.0 instead of 19.0 GiB), which leaves room for a fifth precomputed H copy beside two
        partitions on the H200 (region −6.6 ms, bench/RESULTS.md session 25).  The same bytes;
        False: the tails' scratch from the pool (the stage option ``side_scratch=0``).
    stream_chunk : int or None
        Bytes of each device slot through which a key kept in host memory
        (``StreamedKey``) is streamed, chunk by chunk (None: ``stream_chunk_bytes``: what the
        budget leaves beside one partition, 0.25–4 GiB).
    stream_slots : int or None
        How many such slots (None: ``STREAM_SLOTS``).
    key_where : str
        Where ``load_key`` puts a key by default: "auto" (on the device, wholly or in part
        (``stream_plan``), as the budget and the partitions in flight allow; the rest streamed
        from host memory), "device" or "host" (the stage option ``key_where``).
    h_tables : str
        The H stage's twiddle tables: "auto" (deep for a key streamed from host memory, wholly or
        in part, where device memory is short; full for a resident key), "full" or "deep" (the
        stage option ``h_tables``).  Deep tables (``cuzk._cuda_ntt.h_deep``) keep the levels
        above the three deepest and compute those in the round that reads them: at 2^27 1 GiB
        instead of 8, which lets a 2^27 partition prove on a streamed key in ~21 GiB (24 GB
        cards).  The same bytes.
    split_side : bool
        With ``streams=2``, a partly resident key that keeps H (``stream_plan``) runs its H MSM
        first and its other reductions, and the slots' waits and refills, on the side stream
        beside it, as a resident key's do; its partitions then count the tails' scratch in the
        part of a, b, c's buffer that H's MSM leaves (``_abc_left``; 2^27: 18.3 GiB per partition
        instead of 17.0).  Off by default (the stage option ``split_side=1``): measured on an
        H100 at 2^27 in the engine (bench/RESULTS.md session 36), the region was the same (1.421
        against 1.426 s: H's MSM beside the tails took 0.905 s instead of 0.814) and a partition
        reserved 18.3–19.6 GiB, so two no longer fit beside the key: 16.78 s per 10 partitions
        against 14.73.
    h_buffers : {"auto", 4, 3, 2}
        How many buffers of n field elements a partition of a key streamed from host memory
        (without ``split_side``) computes H in (the stage option ``h_buffers``).  4: a, b, c's and
        H's output, as a resident key's partitions always do.  3: a, b, c's
        (``cuzk._cuda_ntt.h_stage_abc``: two in-place bit-reversals instead of the gathers that
        need a fourth), h in a's, the MSMs' scratch in the other two (2^27: 4 GiB less).  2: a's
        and b's (``h_stage_ab``), c uploaded into a's once A~ is spent (n·32 bytes more through
        the bus, 4.3 GB at 2^27, while the H NTT waits for it), the MSMs' scratch in b's (8 GiB
        less: a 2^27 partition on a 16 GB card).  "auto" (default): 3, or 2 where only two keep
        the most partitions in flight (the engine's workers; ``_streamed_buffers``), 4 only
        where four leave the slots at ``STREAM_CHUNK_MAX``: one 2^27 partition on a 16 GB card
        with 2, two on a 32 GB card with 2 (with 3 from ~31 GiB).  The same bytes in every case.
    pool_deps : bool or None
        Sets the device pool's ``internal_dependencies`` for every user of the pool, from this
        object's construction on (the pool starts with ``POOL_INTERNAL_DEPENDENCIES``: on, the
        driver's default; off, no stream waits for another's pending free); None leaves it.
        For A/B runs in one process (the stage option ``pool_deps``; bench/RESULTS.md
        sessions 45-46: off ran out of memory where the budget had admitted more than the card
        held, on made an upload wait for the other worker's frees).
    c_upload : {"ring", "register"}
        How c reaches a's buffer inside the region with two H buffers.  "ring" (default):
        through the worker's pinned ring (the CPU copies c chunk by chunk while the H NTT
        waits: ~0.58 s at 2^27, bench/RESULTS.md session 30).  "register": c is page-locked in
        place during ``prepare`` (``_HostPin``; outside every lock and region) and the region
        copies it by DMA alone, unregistered when the partition ends; where the driver refuses,
        the ring.  The same bytes (GPU tests, sessions 34–35).  Slower wherever measured
        (H100, 2^27 streamed key, bench/RESULTS.md session 35): the region is 0.09–0.15 s
        shorter, but one partition's wall is 0.05–0.11 s longer (page-locking c takes ~0.14 s
        in ``prepare``, unlocking it more at the end), and two workers prove 10 partitions in
        21.07–21.96 s against 19.16 through the ring (steady busy 81–84 % against 100 %:
        unregistering beside a busy GPU took 0.63 s instead of 0.11 idle and held the other
        worker's enqueues up to 0.74 s, session 34).  Kept as an option for such A/B runs (the
        stage option ``c_upload=register``).
    """

    name = "cuda"

    def __init__(self, threads=None, device=None, b_g2="auto", precompute="auto", h_window=None,
                 early_h=True, streams=DEFAULT_STREAMS, abc_scratch=True, ones_kind="auto",
                 row_check="beside", share_sort=True, side_scratch=True, stream_chunk=None,
                 stream_slots=None, key_where="auto", h_tables="auto", split_side=False,
                 h_buffers="auto", c_upload="ring", pool_deps=None):
        super().__init__(threads)
        self.c_upload = c_upload_arg(c_upload)
        self.key_where = key_where_arg(key_where)
        self.h_tables = h_tables_arg(h_tables)
        self.split_side = bool(split_side)
        self.h_buffers = h_buffers_arg(h_buffers)
        self.stream_slots = STREAM_SLOTS if stream_slots is None else int(stream_slots)
        self.stream_chunk = None if stream_chunk is None else int(stream_chunk)
        if self.stream_chunk is not None and self.stream_chunk <= 0:
            raise ValueError(f"stream_chunk must be a positive number of bytes, got {stream_chunk!r}")
        self.share_sort = bool(share_sort)
        self.side_scratch = bool(side_scratch)
        self.ones_kind = ones_kind_arg(ones_kind)
        self.row_check = row_check_arg(row_check)
        self.precompute, self.h_window = precompute_arg(precompute), h_window
        self.early_h = bool(early_h)
        self.abc_scratch = bool(abc_scratch)
        self.streams = streams_arg(streams)
        d = _driver()
        self.device = d.Device.get(device or 0)
        if b_g2 not in ("auto", "gpu", "cpu"):
            raise ValueError(f"b_g2 must be 'auto', 'gpu' or 'cpu', got {b_g2!r}")
        if b_g2 == "auto":
            cores = os.cpu_count() or 1
            b_g2 = "gpu" if cores < 64 else "cpu"
            log.info("b_g2 'auto' -> %s (%d CPU cores)", b_g2, cores)
        self.b_g2 = b_g2
        # every tail MSM on the GPU: leave the tail scalars in Montgomery form (the MSM's digit
        # kernels convert; prep_msm skips a Montgomery reduction per full scalar); with B_G2 on
        # the CPU the CPU MSM needs canonical ones
        self.tail_form = "montgomery" if b_g2 == "gpu" else "canonical"
        from .._cuda_state import POOL_INTERNAL_DEPENDENCIES, device_pool
        self.pool = device_pool(d, self.device)
        if pool_deps is not None and bool(pool_deps) != self.pool.internal_dependencies:
            self.pool.internal_dependencies = bool(pool_deps)
            log.info("cuda:%d: the memory pool's internal dependencies %s (pool_deps; the default "
                     "is %s) for every user of the device's pool", self.device.ordinal,
                     "on" if pool_deps else "off", "on" if POOL_INTERNAL_DEPENDENCIES else "off")

    @property
    def device_label(self):
        return f"cuda:{self.device.ordinal} ({self.device.name})"

    # ---- objects ------------------------------------------------------------------------
    def context(self, budget=None, threads=None, name="w0"):
        budget = budget if budget is not None else device_budget(self.device)
        return CudaContext(self, budget, self.threads if threads is None else threads, name)

    def load_key(self, pk, budget=None, progress=None, where=None, lasting=True, partitions=1):
        """Make ``pk`` usable on the device.

        ``where``: "device" (``ResidentKey``: upload once; BudgetError when it does not fit),
        "host" (``StreamedKey``: every query streamed per partition), or "auto": on the device
        when the budget less its resident keys holds the key and ``partitions`` partitions
        (``partition_bytes``); else split by ``stream_plan`` (some queries resident, the rest
        streamed) when that keeps two or more partitions in flight; else on the device when one
        partition fits beside it (they take turns); else split for one partition (said once in
        the log).  None: the stage option ``key_where``.  ``lasting=False`` (``cuzk.prove``: the
        key serves one call): ``precompute="auto"`` makes no copies, whose build (2^27, 2 copies:
        9.8 s on the H200) takes ~140 partitions to repay (−68 ms each).  ``partitions``: how many
        partitions the caller keeps in flight (the engine: its workers per device); the key is
        placed for at most two of them where more do not fit beside the whole key
        (``_placed_partitions``).

        Measured at 2^27 on the H200 in 80 GiB, two workers (bench/RESULTS.md session 27): the
        whole key resident with its partitions taking turns 15.41–15.42 s per 10 partitions,
        wholly streamed with two in flight 16.36, split (H and L resident) with two in flight
        15.59 (steady 15.12 against 15.48): splitting ties the resident key there and is what
        lets two partitions in where the key and one partition only just fit."""
        budget = budget if budget is not None else device_budget(self.device)
        hold_local_memory(self.device, budget)
        where = self.key_where if where is None else key_where_arg(where)
        pre = 1 if self.precompute == "auto" and not lasting else self.precompute
        lg = pk.domain_size.bit_length() - 1
        # a streamed key's reductions run on one stream: its tails may take a, b, c's whole buffer
        room = 3 * pk.domain_size * _FR if self.abc_scratch and self.side_scratch else 0
        kept = ()
        deep_resident, deep_streamed = self.h_tables == "deep", self.h_tables != "full"
        partitions = self._placed_partitions(pk, budget, partitions, deep_resident)
        h_head = self.split_side and self.streams == 2
        # with H resident and split_side, the tails share a, b, c's buffer with H's MSM
        room_h = self._room_beside_h(pk) if h_head and room else None
        room4 = room

        def room_of(hbuf):      # with H in a's buffer, the MSMs' scratch is the rest (``_abc_room``)
            return _abc_room(pk.domain_size, hbuf) if hbuf < 4 and room4 else room4
        hbuf = self._streamed_buffers(pk, budget, room_of, deep_streamed, partitions)
        room = room_of(hbuf)
        if where == "auto" and not _fits_whole(pk, budget, partitions, deep_resident):
            p, kept = stream_plan(pk, budget.free, self.stream_slots, partitions, room, deep_streamed,
                                  room_h, hbuf)
            if p < 2 and _fits_whole(pk, budget, 1, deep_resident):
                kept = ()               # one partition at a time either way: all resident
            else:
                log.info("key of domain 2^%d: %s streamed per partition, %d partition(s) in "
                         "flight beside it (%s leaves %.2f GiB beside its resident keys)", lg,
                         f"queries {'/'.join(kept)} resident, the rest" if kept else "every query",
                         p, budget.name, budget.beside_keys / (1 << 30))
                where = "host"
        if where != "host":
            try:
                return ResidentKey(pk, self.device, self.pool, budget, progress, pre, self.h_window,
                                   abc_scratch=self.abc_scratch, side_scratch=self.side_scratch,
                                   deep_tables=deep_resident)
            except BudgetError as e:
                if where == "device":
                    raise
                log.info("key of domain 2^%d does not fit %s (%s): kept in host memory and "
                         "streamed per partition", lg, budget.name, e)
        if room_h is not None and "h" in kept:
            room = room_h
        return StreamedKey(pk, self.device, self.pool, budget, self.stream_chunk, self.stream_slots,
                           partitions, room, resident=kept, deep_tables=deep_streamed, h_head=h_head,
                           h_buffers=hbuf, h_window=self.h_window)

    @staticmethod
    def _placed_partitions(pk, budget, partitions, deep):
        """The partitions in flight ``load_key`` places ``pk`` for: ``partitions``, or at most
        ``_PLACED_IN_FLIGHT`` when the budget (less its resident keys) cannot hold the whole key
        (``deep``: its H tables deep) and ``partitions`` partitions beside it.  The other workers
        then wait for a reservation (``Budget.reserve``) after their host stages."""
        partitions = max(1, int(partitions))
        if partitions <= _PLACED_IN_FLIGHT or _fits_whole(pk, budget, partitions, deep):
            return partitions
        log.info("key of domain 2^%d placed for %d partitions in flight, not %d: %s leaves %.2f GiB "
                 "beside its resident keys", pk.domain_size.bit_length() - 1, _PLACED_IN_FLIGHT,
                 partitions, budget.name, budget.beside_keys / (1 << 30))
        return _PLACED_IN_FLIGHT

    def _streamed_buffers(self, pk, budget, room_of, deep, partitions=1):
        """How many buffers of n field elements partitions of ``pk`` compute H in if it is
        streamed (``h_buffers``): 4 without ``abc_scratch`` (H in a, b, c's buffer needs it) or
        under ``split_side`` with two streams (H's MSM beside the tails: they share that buffer);
        else the option, or for "auto", counted as ``stream_plan`` counts them (the key's tables,
        its slots, the partitions by ``partition_bytes``; ``room_of(hbuf)``: the tails' room in
        a, b, c's buffer; within what the budget leaves beside its resident keys): for the most
        partitions in flight, up to ``partitions`` (the engine's workers), that 3 or 2 buffers
        keep with slots at their floor (for one partition ``stream_chunk`` or
        ``STREAM_CHUNK_MIN``, or the largest query where that is less; for more
        ``STREAM_CHUNK_SHARED``), 3 if it keeps them (4 where four keep them with slots of
        ``STREAM_CHUNK_MAX``, the most a slot takes: a fourth buffer then costs the slots
        nothing), else 2; 2 (and a warning at load) when not even one fits: its reservation then
        says by how much.  ``deep``: the key's tables are deep.

        Why (bench/RESULTS.md session 30, the H200 at 2^27): one partition in 22 GiB took a
        region of 1.60 s with three buffers (2.65 GB slots), 1.90 with four (1.22 GB slots) and
        1.98 with two (4.08 GB slots: c's upload held the H NTT ~0.39 s, bound by the host's
        staging of c, not the bus); two workers in 30 GiB, steady, 16.77 s per 10 partitions with
        two buffers and two in flight against 18.22 taking turns with three (the same run)."""
        if not self.abc_scratch or (self.split_side and self.streams == 2):
            return 4
        if self.h_buffers != "auto":
            return self.h_buffers
        if budget is None or budget.total is None:
            return 4
        from .. import _cuda_ntt
        n = pk.domain_size
        tables = _tables_bytes(n, _cuda_ntt.h_deep(n.bit_length() - 1, deep))
        floor = STREAM_CHUNK_MIN if self.stream_chunk is None else self.stream_chunk
        slot1 = _align(min(floor, max(_query_bytes(pk, q) for q in QUERIES)))
        left = budget.beside_keys

        def share(p, hbuf):
            return _slot_share(n, left, tables, self.stream_slots, p, room_of(hbuf), hbuf)
        for p in range(max(1, int(partitions)), 0, -1):
            slot = slot1 if p == 1 else STREAM_CHUNK_SHARED
            if share(p, 3) >= slot:
                return 4 if share(p, 4) >= STREAM_CHUNK_MAX else 3
            if share(p, 2) >= slot:
                return 2
        need = tables + self.stream_slots * slot1 + partition_bytes(n, room_of(2), 2)
        log.warning("key of domain 2^%d: %s leaves %.2f GiB beside its resident keys, and one "
                    "partition streamed with H in two buffers needs ~%.2f GiB with the key's "
                    "tables and slots: its partitions will fail with BudgetError", n.bit_length() - 1,
                    budget.name, left / (1 << 30), need / (1 << 30))
        return 2

    def _room_beside_h(self, pk):
        """Bytes of a, b, c's buffer that a whole H MSM of ``pk`` without copies leaves to the
        tails beside it (``_abc_left``)."""
        from .. import _cuda_msm
        n = pk.domain_size
        plan = _cuda_msm.msm_plan(n - 1, "g1", self.device, npoints=pk.h.shape[0], k=1,
                                  c=h_msm_window(n - 1, 1, self.h_window))
        return _abc_left(plan, n)

    # ---- whole-array stages (the snarkjs prover: its bases are not resident) ------------
    def msm(self, points, scalars, group, threads=None):
        from .. import _cuda_msm
        fn = _cuda_msm.msm_g1 if group == "g1" else _cuda_msm.msm_g2
        return fn(points, scalars, device=self.device)

    def snarkjs_h(self, a, b, c, root_exponent, threads=None):
        from .. import _cuda_ntt
        n = a.shape[0]
        if 2 <= n <= 1 << _cuda_ntt.MAX_LOG_SIZE:
            return _cuda_ntt.snarkjs_h(a, b, c, root_exponent, device=self.device)
        log.info("snarkjs H: a domain of %d points is outside the GPU transforms: on the CPU", n)
        return super().snarkjs_h(a, b, c, root_exponent, threads)

    # ---- plans --------------------------------------------------------------------------
    def _groups(self):
        """(name, prep query, group) of the queries whose reductions run on the GPU (H aside)."""
        groups = [("l", "l", "g1"), ("a", "a", "g1"), ("b_g1", "b", "g1")]
        if self.b_g2 == "gpu":
            groups.append(("b_g2", "b", "g2"))
        return groups

    def _h_plan(self, key, n):
        """The H MSM's plan: n − 1 scalars over the key's H bases (and its precomputed copies)."""
        from .. import _cuda_msm
        k, c = key.h_plan_args["k"], key.h_plan_args["c"]
        return _cuda_msm.msm_plan(n - 1, "g1", self.device, npoints=key.pk.h.shape[0], k=k,
                                  c=h_msm_window(n - 1, k, c))

    def _plans(self, key, prep, n):
        """(name, kind, plan) of every GPU reduction of a partition, H's first."""
        return [("h", "msm", self._h_plan(key, n))] + self._query_plans(key, prep)

    def _query_plans(self, key, prep):
        """(name, kind, plan) of the batch additions and tail MSMs (they need prep_msm's output)."""
        from .. import _cuda_batch, _cuda_msm
        pk, dev = key.pk, self.device
        out = []
        for name, q, group in self._groups():
            npts = getattr(pk, QUERIES[name][0]).shape[0]
            if npts and prep[q + "_n_ones"]:
                kind = None if self.ones_kind == "auto" else self.ones_kind
                out.append((name + ":ones", "batch",
                            _cuda_batch.batch_add_plan(npts, group, dev, kind, prep[q + "_n_ones"])))
            tail = prep[q + "_tail_scalars"]
            if tail.shape[0]:
                bal = _cuda_msm.sampled_balance(group, tail, prep["tail_form"], indexed=True)
                out.append((name + ":tail", "msm",
                            _cuda_msm.msm_plan(tail.shape[0], group, dev, npoints=npts, indexed=True,
                                               balance=bal)))
        return out

    def _streamed_plans(self, key, prep, n):
        """The plans of a partition of a streamed key (``StreamedKey``), one per chunk of bases it
        reads, named "h@j", "<query>:ones@j" and "<query>:tail@j" (j: the chunk), and their spans
        {name: (first point, first scalar)}: where in the query and in the H or tail scalars each
        starts.  Chunks of H alternate with the others' in proportion, so that the upload of an
        L, A or B chunk (little work per byte) runs under an H chunk's MSM (much work per byte):
        the upload stream and the kernels stay busy together."""
        from .. import _cuda_batch, _cuda_msm
        dev = self.device
        hplans, spans = self._h_chunk_plans(key, n)
        heads, rest = [[p] for p in hplans], []
        kind = None if self.ones_kind == "auto" else self.ones_kind
        for name, q, group in self._groups():
            ones, tail, idx = prep[q + "_ones"], prep[q + "_tail_scalars"], prep[q + "_tail_idx"]
            chunks = key.chunks(name)
            # the tail entries of each chunk (one search in idx's own dtype: a Python int would
            # make numpy compare a converted copy of the whole array, once per chunk)
            cut = np.searchsorted(idx, np.array([lo for lo, _ in chunks] + [key.points(name)],
                                                dtype=idx.dtype))
            for j, (lo, hi) in enumerate(chunks):
                unit = []
                n_set = popcount_words(ones[lo // 64:], hi - lo) if prep[q + "_n_ones"] else 0
                if n_set:
                    unit.append((f"{name}:ones@{j}", "batch",
                                 _cuda_batch.batch_add_plan(hi - lo, group, dev, kind, n_set)))
                    spans[unit[-1][0]] = (lo, 0)
                t_lo, t_hi = int(cut[j]), int(cut[j + 1])
                if t_hi > t_lo:
                    bal = _cuda_msm.sampled_balance(group, tail[t_lo:t_hi], prep["tail_form"],
                                                    indexed=True)
                    unit.append((f"{name}:tail@{j}", "msm",
                                 _cuda_msm.msm_plan(t_hi - t_lo, group, dev, npoints=hi - lo,
                                                    indexed=True, balance=bal)))
                    spans[unit[-1][0]] = (lo, t_lo)
                if unit:
                    rest.append(unit)
        # a proportional merge of the two lists of units (ties: H's first)
        order = sorted([(i * len(rest), 0, u) for i, u in enumerate(heads)]
                       + [(i * len(heads), 1, u) for i, u in enumerate(rest)], key=lambda t: t[:2])
        return [p for _, _, u in order for p in u], spans

    def _h_chunk_plans(self, key, n):
        """A streamed key's H plans, one per chunk of its H bases with scalars (named "h@j"), and
        their spans {name: (first point, first scalar)} (``_streamed_plans``)."""
        plans, spans = [], {}
        for j, (lo, hi) in enumerate(key.chunks("h")):
            m = min(hi, n - 1) - lo
            if m > 0:
                name = f"h@{j}"
                spans[name] = (lo, lo)
                plans.append((name, "msm", self._h_chunk_plan(key, m, hi - lo)))
        return plans, spans

    def _h_chunk_plan(self, key, m, npoints):
        """The MSM plan of a streamed key's H chunk: m scalars over its ``npoints`` bases, in the
        key's H window (``h_window``)."""
        from .. import _cuda_msm
        return _cuda_msm.msm_plan(m, "g1", self.device, npoints=npoints,
                                  c=h_msm_window(m, 1, key.h_plan_args["c"]))

    def _result_words_bound(self, key, n):
        """The most pinned result words (uint64) a partition of ``key`` at domain n can need, known
        before prep_msm: H's plan, and per GPU query its batch addition's (either kernel) plus the
        largest tail plan's of any tail size (``tail_rows_bound``); for a streamed key, per chunk
        of its bases."""
        from .. import _cuda_batch
        streamed = key.where == "host"      # per chunk of its bases (``_streamed_plans``)
        if streamed:
            hplans = self._h_chunk_plans(key, n)[0]
        else:
            hplans = [("h", "msm", self._h_plan(key, n))]
        words = sum(p.host_rows for _, _, p in hplans) * XYZZ_WORDS["g1"]
        for name, _, group in self._groups():
            npts = getattr(key.pk, QUERIES[name][0]).shape[0]
            for lo, hi in (key.chunks(name) if streamed else [(0, npts)]):
                if hi > lo:
                    rows = (max(_cuda_batch.batch_add_plan(hi - lo, group, self.device, kind=k).host_rows
                                for k in _cuda_batch.KINDS)
                            + tail_rows_bound(hi - lo, group, self.device))
                    words += rows * XYZZ_WORDS[group]
        return words

    # ---- the four calls -----------------------------------------------------------------
    def trim(self):
        self.pool.trim(0)

    def untracked_bytes(self, budget):
        """Bytes ``budget`` would admit beyond what the device can give now: the budget's free
        bytes less the device's free memory and what cuzk's pool holds unused (cuMemGetInfo: at
        an engine's start, never in a hot path).  Above 0: memory that no reservation counts is
        taken (another process or library on the device, or device memory of cuzk's that
        outlived its reservation).  Partitions admitted into it make the pool wait for another
        worker's frees, or fail (bench/RESULTS.md session 46: a key's 8 GiB of twiddle tables
        left behind; 0 where the budget has no total)."""
        if budget is None or budget.free is None:
            return 0
        hold_local_memory(self.device, budget)     # counted where it belongs, not held twice
        free = int(self.device.mem_info()[0])
        spare = max(0, int(self.pool.reserved_bytes) - int(self.pool.used_bytes))
        return max(0, int(budget.free) - free - spare)

    def warm(self, ctx, key):
        """Prepare ``ctx`` for partitions of ``key`` before the first one: the pinned staging
        ring and result slab allocated, and the device pool grown by what a partition allocates
        on the upload stream (a, b, c, H's output and the H MSM's scratch (a streamed key's: what
        a, b, c's buffer cannot hold of an H chunk's); freed at once, the pool keeps it).
        Measured on the H200 (2^24, narrow, two workers, bench/RESULTS.md session 4): with staging
        sized too small here, each worker's first upload took 0.85–0.92 s instead of 0.07 s — a
        pinned allocation inside the first partition."""
        n = key.pk.domain_size
        hbuf = key.h_buffers
        abc = _abc_elems(hbuf) * n * _FR
        ctx.staging.warm()
        ctx.results.warm(1 << 20)
        try:
            if key.where == "host":
                # a streamed key (device memory is short): the largest H chunk's MSM, its scratch
                # beyond what a, b, c's buffer holds of it, not the whole of it
                m = min(max(hi - lo for lo, hi in key.chunks("h")), n - 1)
                grow = abc + (n * _FR if hbuf == 4 else 0) + _h_scratch_beyond_abc(
                    self._h_chunk_plan(key, m, m), n, self.abc_scratch, _abc_room(n, hbuf))
            else:
                grow = abc + n * _FR + self._h_plan(key, n).scratch_bytes
            self.pool.alloc(grow, ctx.upload).free(ctx.upload)
            ctx.upload.synchronize()
        except Exception as e:      # a warm-up only: a partition that needs the memory will say
            log.info("warm-up of %s: the device pool was not grown (%s)", ctx.name, e)

    def _validate(self, part, check):
        """Shapes on the host.  The row check a∘b = c (``check``) is deferred to ``_check_rows``,
        on the CPU while the GPU runs the region: H takes c = a∘b (``h_stage_inplace(...,
        c_from_ab=True)``), so c is never uploaded (a third of a partition's upload: 4.3 GB at
        2^27), and ``finish`` raises ``UnsatisfiedAssignmentError`` for the first bad row before
        anything computed from it leaves (``row_check="on_failure"``: for a verified partition,
        only once its proof fails verification)."""
        part.asg.validate(part.key.pk)
        part.row_check = bool(check)
        part.rows_deferred = False
        part.bad_row = -1
        if part.key.h_buffers == 2 and self.c_upload == "register":
            # c is uploaded inside the region (``_upload_c``): page-locked here, before every lock
            part.c_pin = timed(part.timings, "pin_c", _HostPin.pin, part.asg.c, self.device)

    def _check_rows(self, part):
        """The deferred row check (``_validate``), called once the region is enqueued, so it runs
        beside the kernels; left to ``finish`` (``rows_deferred``) under
        ``row_check="on_failure"`` when the partition's proof will be verified."""
        if getattr(part, "row_check", False):
            if self.row_check == "on_failure" and part.verify:
                part.rows_deferred = True
            else:
                self._row_check_now(part)

    @staticmethod
    def _row_check_now(part):
        """a∘b = c row by row (native, GIL-free, the worker's threads): ``part.bad_row`` is the
        first bad row or −1."""
        from .._native import _r1cs
        asg = part.asg
        part.rows_deferred = False
        part.bad_row = part.lap("row_check", _r1cs.first_unsatisfied, asg.a, asg.b, asg.c,
                                part.ctx.threads)
        return part.bad_row

    # staging: the normal upload is _stage_in (everything at once, after prep_msm); the early path
    # (prove_one) stages a, b, c first (_stage_in_abc) and the prep_msm output later
    # (_stage_in_prep).  Both go through _begin, _slab, _stage.
    def _stage_in(self, part):
        """Reserve the partition's device bytes, enqueue the uploads through the staging ring."""
        n, key = self._begin(part), part.key
        part.hbuf = key.h_buffers
        if key.where == "host":
            part.plans, part.spans = self._streamed_plans(key, part.prep, n)
            chunk, kept = key.chunk_points, key.resident
        else:
            part.plans = self._plans(key, part.prep, n)
            chunk, kept = None, ()
        self._slab(part, sum(p.host_rows * XYZZ_WORDS[_group_of(name)]
                             for name, _, p in part.plans))
        self._stage(part, self._abc_uploads(part) + self._prep_uploads(part.prep, chunk, kept), outputs=True)

    def _stage_in_abc(self, part, wait=True):
        """The early path's first upload (before prep_msm): a, b (c's buffer allocated: H's
        scratch), H's output, the H MSM's scratch; the result slab sized for any plans prep_msm
        can lead to.  Once a is uploaded, the part of H that needs a alone is enqueued
        (``_enqueue_h_first``), so it runs while b uploads.  A partly resident key that keeps H
        (``_h_whole``): its one H chunk's plan ("h@0"), H in the key's ``h_buffers``."""
        n, key = self._begin(part), part.key
        part.hbuf = key.h_buffers
        if key.where == "host":
            part.plans, part.spans = self._h_chunk_plans(key, n)
        else:
            part.plans = [("h", "msm", self._h_plan(key, n))]
        self._slab(part, self._result_words_bound(key, n))
        self._stage(part, self._abc_uploads(part), outputs=True, block=wait,
                    after={"a": lambda ev: self._enqueue_h_first(part, ev)})

    def _stage_in_prep(self, part):
        """The early path's second upload (after prep_msm): bitmaps, tail scalars and indices;
        the reductions' scratch beyond the H MSM's.  Its reservation never waits (BudgetError when
        the bytes do not fit now): the partition already holds its first one, and threads that
        each held one while waiting for a second could wait for each other forever.  A partly
        resident key: the plans and spans of its chunks (``_streamed_plans``, whose first is the
        H plan already enqueued), the tail indices chunk-relative for its streamed queries."""
        key = part.key
        if key.where == "host":
            plans, part.spans = self._streamed_plans(key, part.prep, part.n)
            if plans[0][0] != part.plans[0][0]:
                raise RuntimeError(f"internal: the early path enqueued {part.plans[0][0]} first, "
                                   f"the streamed plans start with {plans[0][0]}")
            part.plans = part.plans[:1] + plans[1:]
            uploads = self._prep_uploads(part.prep, key.chunk_points, key.resident)
        else:
            part.plans = part.plans[:1] + self._query_plans(key, part.prep)
            uploads = self._prep_uploads(part.prep)
        self._stage(part, uploads, outputs=False, block=False)

    @staticmethod
    def _begin(part):
        part.dev = {}
        part.hbuf = 4               # buffers H is computed in (``h_buffers``; set by _stage_in)
        part.scratch_reserved = 0
        part.n = pow2_at_least(part.asg.a.shape[0])
        return part.n

    @staticmethod
    def _abc_uploads(part):
        """(device name, host array, device bytes) of c's buffer with no array (H's scratch: c
        itself is never uploaded here, ``_validate``; none with two H buffers, where c goes into
        a's during the region, ``_upload_c``), then a and b (zero-padded to n rows)."""
        asg, n = part.asg, part.n
        c = [("c", None, n * _FR)] if part.hbuf > 2 else []
        return c + [("a", asg.a, n * _FR), ("b", asg.b, n * _FR)]

    @staticmethod
    def _prep_uploads(prep, chunk=None, resident=()):
        """(device name, host array, device bytes) of prep_msm's output, in staging order.  With a
        streamed key's ``chunk`` (points), the tail indices relative to their chunk (idx mod
        chunk: a chunk's tail MSM reads its bases from the slot that holds that chunk), but those
        of its ``resident`` queries (one chunk, read in place)."""
        out = []
        for q in ("l", "a", "b"):
            out.append((q + "_ones", prep[q + "_ones"], prep[q + "_ones"].nbytes))
            sc = prep[q + "_tail_scalars"]
            out.append((q + "_tail_scalars", sc, sc.nbytes))
            idx = np.asarray(prep[q + "_tail_idx"], dtype=np.uint32)   # uint32 from prep_msm: no copy
            if chunk is not None and q not in {_prep_query(r) for r in resident}:
                idx = idx % np.uint32(chunk)
            out.append((q + "_tail_idx", idx, idx.shape[0] * 4))
        return out

    @staticmethod
    def _slab(part, words):
        """The partition's pinned result slab: ``words`` uint64 for the reductions' partial sums
        (cut in plan order by ``_cut_views``).  Taken once, before anything of the partition is
        enqueued: ``_Pinned.get`` may replace the buffer, which no view given to an enqueued copy
        may outlive."""
        res = part.ctx.results.get(max(words, 1) * 8).asarray(np.uint64)
        part.slab, part.slab_words, part.slab_at = res, words, 0
        part.result_views = []

    @staticmethod
    def _cut_views(part):
        """Result views of the plans that have none yet, in plan order, from the slab."""
        at = part.slab_at
        for name, _, p in part.plans[len(part.result_views):]:
            w = XYZZ_WORDS[_group_of(name)]
            if at + p.host_rows * w > part.slab_words:
                raise RuntimeError(f"internal: the result rows of {name} ({p.host_rows}) overflow "
                                   f"the {part.slab_words}-word slab sized for the partition")
            part.result_views.append(part.slab[at: at + p.host_rows * w].reshape(p.host_rows, w))
            at += p.host_rows * w
        part.slab_at = at

    def _stage(self, part, uploads, outputs, block=True, after=None):
        """Reserve, then allocate and enqueue: the device bytes of ``uploads`` (an upload with no
        array is only allocated), with ``outputs`` also H's output,
        and the scratch the plans so far need beyond the scratch reserved already; result views
        for the new plans; the uploads through the worker's pinned ring on its upload stream;
        ``part.uploaded`` an event after them.  ``block``: whether the reservation may wait for the
        bytes (``Budget.reserve``).  ``after``: {upload name: f(event)}, called with an event on
        the upload stream right after that upload is enqueued."""
        ctx, n = part.ctx, part.n
        dev_bytes = sum(_align(nb) for _, _, nb in uploads)
        if outputs and part.hbuf == 4:
            dev_bytes += n * _FR                            # H's output
        scratch = self._scratch_peak(part)
        dev_bytes += max(0, scratch - part.scratch_reserved)
        tm = part.timings       # stage:reserve / stage:alloc / stage:put: where an upload's time goes
        part.reservations.append(timed(tm, "stage:reserve", lambda: ctx.budget.reserve(
            dev_bytes, f"{ctx.name}: partition", block=block)))
        part.scratch_reserved = max(scratch, part.scratch_reserved)
        self._cut_views(part)
        up = ctx.upload
        regions = self._abc_regions(part, uploads, up)
        for name, arr, nb in uploads:
            if nb == 0:
                continue
            if name in regions:
                buf = part.dev[name] = regions[name]
            else:
                buf = part.dev[name] = timed(tm, "stage:alloc", self.pool.alloc, nb, up)
            if arr is None:
                continue
            # through the worker's pinned ring (CPU copies on the pool, GIL released); a, b are
            # padded with zero rows to n
            timed(tm, "stage:put", ctx.staging.put, buf.ptr, np.ascontiguousarray(arr), nb, up, ctx.threads,
                  None, tm, "stage:put")
            part.bytes_uploaded += nb
            if after and name in after:
                after[name](ctx.event(up))
        if outputs:     # with fewer than 4 buffers, H lands in a's region (h_stage_abc, h_stage_ab)
            part.dev["h"] = part.dev["a"] if part.hbuf < 4 else self.pool.alloc(n * _FR, up)
        part.uploaded = ctx.event(up)

    def _abc_regions(self, part, uploads, stream):
        """With ``abc_scratch``, when ``uploads`` hold a, b and c: one buffer for the three
        (``part.dev["abc"]``, allocated on ``stream``) and their regions in it, by name; else
        {}.  The budget counts the same bytes either way (each is n field elements)."""
        names = [name for name, _, _ in uploads]
        order = _ABC_ORDER[part.hbuf]
        if not self.abc_scratch or not set(order) <= set(names):
            return {}
        size = _FR * part.n
        buf = part.dev["abc"] = timed(part.timings, "stage:alloc", self.pool.alloc, len(order) * size,
                                      stream)
        return {q: _Region(buf.ptr + i * size, size) for i, q in enumerate(order)}

    def _h_scratch_pool(self, part):
        """Where the H MSM takes its scratch: a, b, c's buffer as far as it holds it (``_abc_room``
        at its top; ``abc_scratch``: the H NTT before it on the compute stream is their last use),
        the pool for the rest."""
        if "abc" in part.dev:
            return self._abc_arena(part, _abc_room(part.n, part.hbuf))
        return self.pool

    def _abc_arena(self, part, room):
        """An ``_Arena`` of the top ``room`` bytes of a, b, c's buffer, the pool beyond it."""
        top = part.dev["abc"].ptr + _abc_elems(part.hbuf) * part.n * _FR
        return _Arena(top - room, room, self.pool)

    def _side_arena(self, part, start):
        """The ``_Arena`` of ``_side_room`` at the top of a, b, c's buffer for the reductions
        from ``start`` on (None for H's, or when there is no room)."""
        if start < _heads(part) or "abc" not in part.dev:
            return None
        room = self._side_room(part)
        if room <= 0:
            return None
        return self._abc_arena(part, room)

    def _concurrent(self, part):
        """Whether the reductions after H's run on the side stream (``streams=2``, H's bases on
        the device whole: a partly resident key's streamed chunks then all go through the side
        stream, which waits for their uploads and frees their slots)."""
        return self.streams == 2 and part.key.h_head

    def _scratch_peak(self, part):
        """The most MSM/batch scratch the partition's plans hold in the pool at once.  On one
        stream each reduction frees its scratch stream-ordered before the next allocates: the
        largest.  With the side stream, H's (``plans[0]``) beside the largest of the others.
        Each counts what a, b, c's buffer cannot hold (``_h_scratch_beyond_abc``, ``_pool_peaks``
        over ``_side_room``) and the sort kept from B_G1's tail to B_G2's."""
        plans = part.plans
        if not plans:
            return 0
        first = 1 if _query_of(plans[0][0]) == "h" else 0
        cap = _abc_room(part.n, part.hbuf)
        head = [_h_scratch_beyond_abc(plans[0][2], part.n, self.abc_scratch, cap)] if first else []
        pair = self._sort_share(plans)
        if pair:
            pair = (pair[0] - first, pair[1] - first)
        rest = _pool_peaks(plans[first:], self._side_room(part), pair)
        if self._concurrent(part) and head:
            return head[0] + max(rest, default=0)
        return max(head + rest)

    def _side_room(self, part):
        """Bytes of a, b, c's buffer that the reductions after H's take their MSM scratch from
        (``side_scratch``): all of it on one stream (H's MSM is done by then), on the side stream
        what H's MSM leaves (``_abc_split``), after the H NTT (an event wait); 0 without
        ``abc_scratch`` or ``side_scratch``."""
        if not (self.abc_scratch and self.side_scratch):
            return 0
        if self._concurrent(part) and part.plans and _query_of(part.plans[0][0]) == "h":
            return _abc_left(part.plans[0][2], part.n)
        return _abc_room(part.n, part.hbuf)

    def _sort_share(self, plans):
        """(giver, taker): the indices in ``plans`` of the B_G1 and B_G2 tail MSMs when the second
        can take the first's sort (``share_sort``, both on the GPU, plans that sort alike), else
        None."""
        from .. import _cuda_msm
        if not self.share_sort:
            return None
        at = {name: i for i, (name, kind, _) in enumerate(plans) if kind == "msm"}
        gi, ti = at.get("b_g1:tail"), at.get("b_g2:tail")
        if gi is None or ti is None or ti < gi:
            return None
        if not _cuda_msm.SortShare.compatible(plans[gi][2], plans[ti][2]):
            return None
        return gi, ti

    # kernels: run = _enqueue_head (row check, H NTT, H MSM) + _enqueue_rest (batch additions,
    # tail MSMs); the early path calls the two with prep_msm and its upload between them
    def run(self, part):
        units = [_unit_of(name) for name, _, _ in part.plans]
        bases = part.bases = _Bases(part, list(dict.fromkeys(units)))    # in first-use order
        try:
            self._enqueue_head(part, bases)
            done = self._enqueue_rest(part, bases)
        finally:
            bases.close()
        self._check_rows(part)
        return done

    def _enqueue_h_first(self, part, ready):
        """The region's first kernels, on the compute stream after event ``ready`` (a uploaded):
        its start mark, then the part of H that reads a alone (``h_stage_inplace`` step "a", or
        ``h_stage_ab``'s with two H buffers)."""
        from .. import _cuda_ntt
        ctx, dev = part.ctx, part.dev
        s = ctx.compute
        s.wait_event(ready)
        part.gpu_marks = [("start", ctx.event(s, timing=True))]
        if part.hbuf == 2:      # A~ in place in a's buffer
            _cuda_ntt.h_stage_ab(dev["a"], None, part.n, device=self.device, stream=s, steps=("a",),
                                 deep=part.key.deep_tables)
            return
        # step "a" reads a and writes c's buffer (b and H's output may not be allocated yet)
        _cuda_ntt.h_stage_inplace(dev["a"], None, dev["c"], None, part.n, device=self.device,
                                  stream=s, c_from_ab=True, steps=("a",), deep=part.key.deep_tables)

    def _enqueue_head(self, part, bases):
        """On the compute stream, after ``part.uploaded``: the H NTT (its first step already, when
        the early path's upload enqueued it), the H MSM (``part.plans[0]``), with a timing mark
        after each."""
        from .. import _cuda_ntt
        ctx, dev = part.ctx, part.dev
        s = ctx.compute
        if not getattr(part, "gpu_marks", None):
            self._enqueue_h_first(part, part.uploaded)
        s.wait_event(part.uploaded)
        deep = part.key.deep_tables
        if part.hbuf == 3:      # h into a's region, three buffers
            _cuda_ntt.h_stage_abc(dev["a"], dev["b"], dev["c"], part.n, device=self.device, stream=s,
                                  steps=("rest",), deep=deep)
        elif part.hbuf == 2:    # two buffers: c into a's once step "b"'s product has spent A~
            spent = []
            _cuda_ntt.h_stage_ab(dev["a"], dev["b"], part.n, device=self.device, stream=s, steps=("b",),
                                 deep=deep, a_spent=lambda: spent.append(ctx.event(s)))
            _cuda_ntt.h_stage_ab(dev["a"], dev["b"], part.n, device=self.device, stream=s, steps=("c",),
                                 ready=(None, None, self._upload_c(part, spent[0])), deep=deep)
        else:
            _cuda_ntt.h_stage_inplace(dev["a"], dev["b"], dev["c"], dev["h"], part.n, device=self.device,
                                      stream=s, c_from_ab=True, steps=("rest",), deep=deep)
        marks = part.gpu_marks
        part.h_ntt = ctx.event(s, timing=True)          # a, b, c's buffer is dead from here
        marks.append(("h_ntt", part.h_ntt))
        self._enqueue_reductions(part, bases, 0, _heads(part), s, marks)

    @staticmethod
    def _upload_c(part, spent):
        """With two H buffers (``h_buffers=2``, a streamed key): c (zero-padded to n rows) into
        a's region, by DMA from c itself when ``_validate`` page-locked it (``c_upload``), else
        through the worker's pinned ring, after event ``spent`` (recorded on the compute
        stream after its last read of A~ there: the first pass of ``h_stage_ab`` step "b"'s inverse
        transform, so the copy overlaps that transform's other passes); returns an event after the
        upload.  On the worker's side stream, which a streamed key's partition leaves idle (its
        reductions run on the compute stream): on the upload stream c would queue behind the first slot fills
        (``_Bases``), which wait for the previous partition's last kernels on those slots, and
        hold this partition's H NTT until that partition's region ends.  Through the ring, whose
        slots turn over only as the copies run, this returns about when the H NTT's first steps
        are done: the rest of the region is enqueued while the last chunks copy
        (``part.timings["region:put_c"]``: the host's time in it, not an upload time)."""
        ctx, nb = part.ctx, part.n * _FR
        ctx.side.wait_event(spent)
        pin, dst = getattr(part, "c_pin", None), part.dev["a"].ptr
        if pin is not None:         # page-locked in ``_validate``: the DMA alone, zero rows after
            d = _driver()
            d.copy_htod(dst, pin.ptr, pin.nbytes, ctx.side)
            if nb > pin.nbytes:
                d.memset_d8(dst + pin.nbytes, 0, nb - pin.nbytes, ctx.side)
        else:
            timed(part.timings, "region:put_c", ctx.staging.put, dst,
                  np.ascontiguousarray(part.asg.c), nb, ctx.side, ctx.threads)
        part.bytes_uploaded += nb
        return ctx.event(ctx.side)

    def _enqueue_rest(self, part, bases, wait=False):
        """The reductions after H's (``part.plans[1:]``), then the partition's device buffers
        freed stream-ordered and the region's last event (``part.done``).

        One stream: on the compute stream after H's; ``wait``: it first waits for
        ``part.uploaded`` (marked ``prep_wait``: the GPU's idle time until prep_msm's output is
        uploaded).  Side stream (``_concurrent``): the side stream waits for ``part.uploaded``,
        runs them (marks in ``part.side_marks``, from ``side_start``), and the compute stream
        waits for the last of them after H's MSM (marked ``side_wait``: the compute stream's
        idle time at the join)."""
        ctx = part.ctx
        s = ctx.compute
        if self._concurrent(part):
            side = ctx.side
            side.wait_event(part.uploaded)
            sm = part.side_marks = [("side_start", ctx.event(side, timing=True))]
            self._enqueue_reductions(part, bases, _heads(part), len(part.plans), side, sm)
            s.wait_event(sm[-1][1])
            part.gpu_marks.append(("side_wait", ctx.event(s, timing=True)))
        else:
            if wait:
                s.wait_event(part.uploaded)
                part.gpu_marks.append(("prep_wait", ctx.event(s, timing=True)))
            self._enqueue_reductions(part, bases, _heads(part), len(part.plans), s, part.gpu_marks)
        self._free_device(part)
        part.done = _Done(ctx.event(s))
        return part.done

    def _enqueue_reductions(self, part, bases, start, stop, s, marks):
        """Enqueue ``part.plans[start:stop]`` on stream ``s`` into their result views, a timing
        mark (appended to ``marks``) after each."""
        from .. import _cuda_batch, _cuda_msm
        ctx, dev = part.ctx, part.dev
        units = [_unit_of(name) for name, _, _ in part.plans]
        spans = getattr(part, "spans", None) or {}
        pair = self._sort_share(part.plans)
        gi, ti = pair if pair and start <= pair[0] and pair[1] < stop else (None, None)
        share = _cuda_msm.SortShare() if gi is not None else None
        arena, waited = self._side_arena(part, start), s is ctx.compute
        try:
            for i in range(start, stop):
                (name, kind, plan), view, unit = part.plans[i], part.result_views[i], units[i]
                q = _query_of(name)
                pq = _prep_query(q)
                lo, t_lo = spans.get(name, (0, 0))     # a streamed key's chunk: its offsets
                tails = self.pool
                if arena is not None and kind == "msm" and q != "h":
                    if not waited:          # the side stream: a, b, c's buffer once the H NTT is done
                        s.wait_event(part.h_ntt)
                        waited = True
                    arena.reset()
                    tails = arena
                if kind == "batch":
                    part.parts[name] = _cuda_batch.enqueue_batch_add(
                        plan, s, self.pool, bases.ptr(unit, s), dev[pq + "_ones"].ptr + lo // 8, view)
                elif q == "h":
                    part.parts[name] = _cuda_msm.enqueue_msm(
                        plan, s, self._h_scratch_pool(part), bases.ptr(unit, s), dev["h"].ptr + lo * _FR,
                        view, scalar_form="montgomery")
                else:
                    part.parts[name] = _cuda_msm.enqueue_msm(
                        plan, s, tails, bases.ptr(unit, s), dev[pq + "_tail_scalars"].ptr + t_lo * _FR,
                        view, d_idx_ptr=dev[pq + "_tail_idx"].ptr + t_lo * 4,
                        scalar_form=part.prep["tail_form"], keep_sort=share if i == gi else None,
                        sorted_from=share if i == ti else None)
                marks.append((name, ctx.event(s, timing=True)))
                if i + 1 == len(units) or units[i + 1] != unit:
                    bases.done(unit, s)
        finally:
            if share is not None:
                share.release(s)       # kept and not taken (a failure between the two): freed

    def early_ready(self, key):
        """Whether partitions of ``key`` can take the early path (``early_head``/``early_rest``):
        ``early_h`` and H's bases on the device whole (``_h_whole``: a resident key, or a partly
        resident one that keeps H)."""
        return self.early_h and _h_whole(key)

    def early_head(self, key, asg, ctx, r=None, s=None, check=True, wait=True):
        """The early path's first half; returns the partition.  validate → reserve + upload a,
        b, c → enqueue the row check, H NTT and H MSM → prep_msm on the CPU while the GPU runs
        them → reserve + upload its output.  The second reservation never waits (``BudgetError``
        when the bytes do not fit now: the partition holds its first one, and the engine holds
        its compute lock here); ``wait=False``: the first one does not wait either (the engine,
        which calls this only while no other partition holds device bytes).  The kernel region
        starts inside this call: the engine holds every lock of its plan around it.  On any
        error the partition is aborted."""
        r, s = check_randomizers(r, s)
        part = Partition(key, asg, ctx, r, s)
        part.timings["overlap"] = "early"
        try:
            part.lap("validate", self._validate, part, check)
            part.lap("upload", self._stage_in_abc, part, wait)
            part.timings["upload:abc"] = part.timings["upload"]
            part.t_region = time.perf_counter()
            # H's bases are on the device whole: no streamed key's slot is taken for them
            part.bases = _Bases(part, [_unit_of(part.plans[0][0])])
            self._enqueue_head(part, part.bases)
            part.prep = part.lap("prep_msm", self.prep_msm, asg, ctx.threads)
            part.lap("upload", self._stage_in_prep, part)
        except BaseException:
            self.abort(part)
            raise
        return part

    def early_rest(self, part, verify=True):
        """The early path's second half: enqueue the batch additions and tail MSMs (after the
        second upload), the row check and (``verify``) the self-check's host preparation beside
        the kernels; returns the region's last event (as ``run``).  A partly resident key's
        streamed chunks go through its slots (``_Bases``, taken here, given back once enqueued)."""
        try:
            part.verify = bool(verify)
            if part.key.where == "host":
                units = [_unit_of(name) for name, _, _ in part.plans]
                part.bases = _Bases(part, list(dict.fromkeys(units)))
                try:
                    done = self._enqueue_rest(part, part.bases, wait=True)
                finally:
                    part.bases.close()
            else:
                done = self._enqueue_rest(part, part.bases, wait=True)
            self._check_rows(part)
            if verify:
                self._prepare_verify(part)
        except BaseException:
            self.abort(part)
            raise
        return done

    def prove_one(self, key, asg, ctx, r=None, s=None, check=True, verify=True):
        """One partition with no lock (``cuzk.prove``).  With ``early_h`` and H's bases on the
        device whole (``early_ready``) the H kernels start before prep_msm (``early_head``, ``early_rest``), then synchronize →
        ``finish``.  Same bytes as prepare/run/finish; ``timings["overlap"] = "early"``,
        ``timings["region"]`` the host wall time from the first kernel enqueued to the
        synchronize (it spans prep_msm and the second upload), ``gpu:prep_wait`` the GPU's wait
        for them.  When the second reservation does not fit (other threads' partitions) the
        partition is proved on the normal path.  Otherwise (a streamed H, ``early_h=False``)
        ``Stages.prove_one``."""
        if not self.early_ready(key):
            return super().prove_one(key, asg, ctx, r, s, check, verify)
        r, s = check_randomizers(r, s)
        try:
            part = self.early_head(key, asg, ctx, r, s, check)
        except BudgetError as e:
            # the second reservation does not fit now (other threads' partitions): everything
            # was given back; the normal path's one reservation waits holding nothing (and a
            # partition larger than the whole budget fails there with the same error)
            log.info("%s: early H path out of device budget (%s): the partition is proved "
                     "on the normal path", ctx.name, e)
            return super().prove_one(key, asg, ctx, r, s, check, verify)
        try:
            done = self.early_rest(part, verify)
            done.synchronize()
            part.timings["region"] = time.perf_counter() - part.t_region
        except BaseException:
            self.abort(part)
            raise
        return self.finish(part, verify=verify), part.timings

    def _free_device(self, part, wait=False):
        """Give the partition's device buffers back to the pool, ordered after its kernels
        (``_enqueue_rest``: before the region's last event, which the host waits for before the
        reservation goes back).  ``wait``: also wait for the frees (``abort``, which releases
        the reservation next): without internal dependencies (``POOL_INTERNAL_DEPENDENCIES``
        off) the pool lets another stream take the bytes only once their frees have run."""
        bufs, part.dev = getattr(part, "dev", {}), {}
        s = part.ctx.compute
        for b in bufs.values():
            b.free(s)
        if bufs and wait:
            s.synchronize()

    def finish(self, part, verify=True) -> bytes:
        from .._errors import UnsatisfiedAssignmentError
        from .._native import _field
        try:
            self._gpu_times(part)
            if getattr(part, "rows_deferred", False) and not verify:
                self._row_check_now(part)           # left for a verification that is not coming
            if getattr(part, "bad_row", -1) >= 0:
                raise UnsatisfiedAssignmentError(part.bad_row)
            pts = {}
            for name, p in part.parts.items():
                q = _query_of(name)
                v = p.value()
                group = _group_of(name)
                pts[q] = _field.point_add(pts[q], v, group) if q in pts else v
            for q in ("l", "a", "b_g1") + (("b_g2",) if self.b_g2 == "gpu" else ()):
                pts.setdefault(q, np.zeros(24 if q == "b_g2" else 12, np.uint64))
            if self.b_g2 == "cpu":
                pts["b_g2"] = part.lap("b_g2", self.query, part.key.pk.b_g2, part.prep, "b", "g2",
                                       part.ctx.threads)
            return self._epilogue_and_verify(part, pts, verify)
        finally:
            self.abort(part)

    @staticmethod
    def _gpu_times(part):
        """Device time of each step of the region (CUDA events) into part.timings as
        ``gpu:<step>``, and ``gpu:region`` for the whole (seconds)."""
        d = _driver()
        marks = getattr(part, "gpu_marks", None)
        if not marks:
            return
        side = getattr(part, "side_marks", None) or []
        for m in (marks, side):
            for (_, a), (name, b) in zip(m, m[1:]):
                k = "gpu:" + name.partition("@")[0]        # a streamed key's chunks: their sum
                part.timings[k] = part.timings.get(k, 0.0) + d.Event.elapsed_ms(a, b) / 1e3
        if side:     # the side stream's whole span, from the region's start
            part.timings["gpu:side"] = d.Event.elapsed_ms(marks[0][1], side[-1][1]) / 1e3
        part.timings["gpu:region"] = d.Event.elapsed_ms(marks[0][1], marks[-1][1]) / 1e3
        bases = getattr(part, "bases", None)
        if bases is not None:
            part.timings.update(bases.times())

    def abort(self, part):
        """Release everything ``part`` holds (idempotent).  After a failure its uploads and
        kernels may still be in flight: the worker's upload and compute streams are synchronized
        first (the uploads read the pinned ring, the kernels the device buffers, their copies
        write the result slab); after a region, its last event."""
        try:
            if getattr(part, "dev", None):
                try:
                    part.ctx.upload.synchronize()
                finally:
                    try:
                        part.ctx.side.synchronize()
                    finally:
                        part.ctx.compute.synchronize()
            elif part.done is not None:
                part.done.synchronize()
        finally:
            try:
                self._free_device(part, wait=True)
            finally:
                pin, part.c_pin = getattr(part, "c_pin", None), None
                try:
                    if pin is not None:     # no copy reads it: the streams are synchronized
                        pin.release()
                finally:
                    part.release()

    def _diagnose(self, part):
        """A GPU proof that fails verification: the first bad row when the row check was left
        for this (``UnsatisfiedAssignmentError``); else prove the same partition (same r, s) on
        the CPU and say whose fault it is."""
        from .._errors import ProofVerificationError, UnsatisfiedAssignmentError
        from .._prover import prove
        if getattr(part, "rows_deferred", False) and self._row_check_now(part) >= 0:
            return UnsatisfiedAssignmentError(part.bad_row)
        try:
            cpu = prove(part.key.pk, part.asg, part.r, part.s, backend="cpu", verify=True,
                        threads=part.ctx.threads)
        except ProofVerificationError:
            return super()._diagnose(part)
        return ProofVerificationError(
            f"the {self.device_label} backend computed a wrong result: the same inputs and "
            f"randomizers verify on the CPU backend (CPU proof {cpu[:8].hex()}…); not returned",
            cause="backend", backend=self.name)


# The H MSM's precompute k and window c by domain size when ``precompute="auto"``, from the H200
# (bench/RESULTS.md, G1 uniform, medians, ms).  Session 8 (dedicated Fq squaring), c = 16,
# k = 4 / 8 / 16: 2^20 11.19 / 10.20 / 9.26 (k = 1: 13.74); 2^22 33.27 / 31.99 / 32.01; 2^24
# 122.33 / 122.37 / 123.14 (the least memory among equals: 4).  Session 4: 2^26 best k = 2, c = 16
# (505.7; c = 20: 522.0); 2^27 best k = 2, c = 20 (977.7; c = 16: 1000.9, k = 1: 1039.7; 826.6 in
# session 8).  Session 13, 2^27, c = 20: k = 2 / 4 / 6 689.4 / 667.8 / 659.6 (4 and 6 fit beside
# two partitions only with ``abc_scratch``); session 14, the 10-partition proof with k = 4 and
# ``abc_scratch`` 12.53 s against 12.70 with k = 2 (same run).  Below 2^16 no copies (~1 ms MSMs).
# k copies of a 2^d-point H cost (k − 1)·2^d·96 bytes: 1.4 GiB at 2^20 with 16, 2.6 GiB at 2^22,
# 36 GiB at 2^27 with 4 (the budget halves k where that leaves no room for two partitions).
# Session 18 (the MSM alone, uniform, batch level 0): every window on one bucket set, c = 20 with
# k = 13 copies (W = 13, so Wk = 1: one scatter pass range, one window's reduction, 13 entries per
# scalar against c = 16's 16): 2^24 91.03 ms against 101.88 (c = 16, k = 4) and 103.69 (c = 16,
# k = 13); 2^26 328.12 against 353.99 (c = 20, k = 4); c = 22 with k = 12 107.27 / 340.56.  It
# costs 12 copies (18 GiB at 2^24, 72 at 2^26, 144 at 2^27: not on a 141 GB card), so it is tried
# first and, where it does not fit whole, the earlier choice follows (a halved k would leave Wk > 1
# at c = 20: 2^24 k = 4 c = 20 109.74).  Entries: (limit, choice, ...): domains below limit try
# each (k, c) in turn at full k; the last one's k is halved until it fits.
# Session 23: at 2^27 (c = 20, W = 13) 5 copies give the bucket sets of 6 (Wk = ceil(13/k) = 3)
# for 12 GiB less: the MSM alone 658.8 → 652.1 ms, the engine's region 1194.3 → 1187.5 (same
# runs).  On the H200 they do not fit beside two PoRep-like partitions (key 104.1 GiB with 5
# copies, 2 × 19.0 GiB of partitions, budget 137.8: the second partition waited ~0.8 s for its
# reservation, 14.2 s per 10 partitions against 12.1), which ``_tails_allowance`` now counts; 5
# is tried first for a larger card, else 4 (halved as before).
_AUTO_H = ((1 << 16, (1, None)), (1 << 21, (16, 16)), (1 << 23, (8, 16)), (1 << 24, (4, None)),
           (1 << 25, G1_ONE_SET, (4, None)), (1 << 27, G1_ONE_SET, (2, None)), (1 << 64, (5, 20), (4, 20)))


def h_msm_window(m, k=1, c=None):
    """The window of an H MSM of m scalars over k copies of its bases: ``c`` where given (the
    stage option ``h_window``), else the plain API's choice for uniform scalars
    (``_cuda_msm.default_window``), which H's are (the quotient's values on the coset): c = 20
    from domain 2^27 on without copies and 2^26 with them (its n − 1 scalars count as n), not
    the cost model's 16, which ``window_bits`` caps for skewed inputs.  Measured at 2^27 without
    copies (the H100's partly resident key; bench/RESULTS.md session 36)."""
    from .. import _cuda_msm
    return int(c) if c is not None else _cuda_msm.default_window("g1", m + 1, k)


def auto_h_msm(domain, nh, device, budget, base_bytes, c=None, abc_scratch=False,
               side_scratch=False):
    """(k, c) of the H MSM for ``precompute="auto"``: the measured choice for ``domain``
    (``_AUTO_H``; an explicit ``c`` wins, and skips the choices that come with their own window),
    the first that fits whole, else the last with k halved (… → 4 → 2 → 1), where fitting means
    that the key's ``base_bytes`` plus the (k − 1)·|H| extra still leave ``budget`` room for two
    partitions of this domain in flight (a, b, c, H's output and the H MSM's scratch each; with
    ``abc_scratch`` only the scratch that a, b, c's buffer cannot hold; plus
    ``_tails_allowance``, less what the rest of that buffer holds with ``side_scratch``)."""
    from .. import _cuda_msm
    for limit, *choices in _AUTO_H:
        if domain < limit:
            break
    free = None if budget is None else budget.free

    def fits(k, cw):
        plan = _cuda_msm.msm_plan(nh, "g1", device, npoints=nh, k=k, c=cw if c is None else c)
        extra = plan.precompute_bytes - nh * _POINT_BYTES["g1"]     # copy 0 is the H query
        room = _abc_left(plan, domain) if abc_scratch and side_scratch else 0
        per_part = (4 * domain * _FR + _h_scratch_beyond_abc(plan, domain, abc_scratch)
                    + _tails_allowance(domain, room))
        return free is None or base_bytes + extra + 2 * per_part <= free

    *first, (k, cw) = choices
    for kf, cf in first:
        if c is None and nh and fits(kf, cf):
            return kf, cf
    while k > 1 and nh and not fits(k, cw):
        k //= 2
    # the table's window belongs to its k: without copies ``h_msm_window`` picks (None)
    return k, (c if c is not None else (cw if k > 1 else None))


def stream_chunk_bytes(domain, free, tables, slots=STREAM_SLOTS, partitions=1, room=0, h_buffers=4):
    """The slot size of a streamed key (``StreamedKey``) with ``slots`` slots at ``domain`` when the
    budget has ``free`` bytes (None: no limit) before its ``tables``: what ``partitions``
    partitions in flight leave (``partition_bytes(domain, room, h_buffers)`` each), shared by the slots,
    within [``STREAM_CHUNK_MIN``, ``STREAM_CHUNK_MAX``].  Fewer partitions when that slot would be
    smaller than ``STREAM_CHUNK_SHARED`` (down to one, which takes what is left).  At the lower
    bound one partition may still not fit: its reservation then says so (``BudgetError``)."""
    if free is None:
        return STREAM_CHUNK_MAX
    for p in range(max(1, int(partitions)), 0, -1):
        chunk = _slot_share(domain, free, tables, slots, p, room, h_buffers)
        if p == 1 or chunk >= STREAM_CHUNK_SHARED:
            return max(STREAM_CHUNK_MIN, min(STREAM_CHUNK_MAX, chunk))


def _slot_share(domain, free, tables, slots, partitions, room, h_buffers=4):
    """Bytes each of ``slots`` slots gets of ``free`` less the key's ``tables`` and ``partitions``
    partitions (``partition_bytes(domain, room, h_buffers)`` each); may be negative."""
    return (free - tables - partitions * partition_bytes(domain, room, h_buffers)) // slots


# What a partly resident key keeps or streams together: B_G1 and B_G2 share their tail indices
# (uploaded chunk-relative for a streamed query, absolute for a resident one).
_SPLIT_UNITS = (("h",), ("l",), ("a",), ("b_g1", "b_g2"))


def stream_plan(pk, free, slots=STREAM_SLOTS, partitions=1, room=0, deep=True, room_h=None,
                h_buffers=4):
    """(p, resident): how a key that is not kept whole on the device is split when the budget has
    ``free`` bytes: which queries stay resident (``StreamedKey(resident=...)``) and how many
    partitions p <= ``partitions`` fit in flight beside it (``partition_bytes(domain, room)``
    each).  The largest p for which some split leaves each of the ``slots`` slots at least
    ``STREAM_CHUNK_SHARED`` (for p = 1: ``STREAM_CHUNK_MIN``; streaming every query always
    counts as fitting there); among those splits, the one whose streamed queries make the fewest
    chunks (each chunk's reductions have a fixed cost: ~6 ms of region per chunk at 2^27,
    bench/RESULTS.md session 26), then the one that keeps the most bytes resident.  ``deep``: the
    key's H tables are deep (``StreamedKey(deep_tables=)``).  ``room_h``: the tails' room in a
    split that keeps H (``CudaStages(split_side=True)``: H's MSM beside them); None: ``room``.
    ``h_buffers``: the buffers of n field elements the partitions compute H in (``partition_bytes``)."""
    from .. import _cuda_ntt
    n = pk.domain_size
    tables = _tables_bytes(n, _cuda_ntt.h_deep(n.bit_length() - 1, deep))
    qs = [q for q in QUERIES if _query_bytes(pk, q)]
    units = [u for u in _SPLIT_UNITS if any(q in qs for q in u)]
    for p in range(max(1, int(partitions)), 0, -1):
        floor = STREAM_CHUNK_SHARED if p > 1 else STREAM_CHUNK_MIN
        best = None
        for mask in range((1 << len(units)) - 1):       # every split but "all resident"
            kept = tuple(q for q in qs if any(mask >> i & 1 and q in u for i, u in enumerate(units)))
            kb = sum(_align(_query_bytes(pk, q)) for q in kept)
            r = room_h if room_h is not None and "h" in kept else room
            chunk = min(STREAM_CHUNK_MAX, _slot_share(n, free - kb, tables, slots, p, r, h_buffers))
            if chunk < floor and (p > 1 or kept):
                continue
            chunk = max(chunk, STREAM_CHUNK_MIN)
            count = sum(-(-_query_bytes(pk, q) // chunk) for q in qs if q not in kept)
            cand = (count, -kb, kept)
            if best is None or cand < best:
                best = cand
        if best is not None:
            return p, best[2]


def partition_bytes(domain, room=0, h_buffers=4):
    """Device bytes one partition at ``domain`` reserves beside its key, as the key placement
    counts them before any witness is seen: a, b, c and H's output (4·n·32) and
    ``_tails_allowance(domain, room)`` (``room``: the bytes of a, b, c's buffer its tail MSMs may
    take, ``side_scratch``).  2^27 PoRep-like: 19.2 GiB counted with no room, 17.6 with a, b, c's
    whole buffer (a streamed key's one stream); reserved 17.02–18.26 in the runs of
    bench/RESULTS.md sessions 25–27.  ``h_buffers``: H computed in that many buffers of n field
    elements (``CudaStages(h_buffers=...)``): 3 (a, b, c's) or 2 (a's and b's) instead of 4."""
    return h_buffers * domain * _FR + _tails_allowance(domain, room)


def _tails_allowance(domain, room=0):
    """Device bytes a partition reserves beyond a, b, c, H's output and the H MSM's scratch:
    prep_msm's output (tail scalars and indices, bitmaps) and the side stream's largest scratch
    (a tail MSM's) beyond the ``room`` bytes of a, b, c's buffer it may take (``side_scratch``),
    which depend on the witness and are not known when the key is loaded.  Measured on the H200
    (bench/RESULTS.md, session 23): a PoRep-like 2^27 partition reserves 19.04 GiB, 3.04 GiB
    (0.76·n·32 bytes) more than a, b, c and H: the L tail's scratch 1.57 GiB (its plan, ~9.7 %
    of n scalars) and prep_msm's output the other ~1.47 (0.37·n·32); counted as 2/5·n·32 each,
    the tail's less ``room``."""
    return 2 * domain * _FR // 5 + max(0, 2 * domain * _FR // 5 - room)


# The regions of a partition's a, b, c buffer, bottom up, by the buffers H is computed in
# (``CudaStages(h_buffers=...)``): with 4 c's at the bottom (the MSMs' scratch runs from the top
# down); with fewer a's (then h) at the bottom, b's (and c's) above it, one range of scratch; with
# 2 no c region (``h_stage_ab``: c goes into a's).
_ABC_ORDER = {4: ("c", "a", "b"), 3: ("a", "b", "c"), 2: ("a", "b")}


def _abc_elems(h_buffers):
    """Field elements (in units of n) of a partition's a, b, c buffer when H is computed in
    ``h_buffers`` buffers (``_ABC_ORDER``)."""
    return len(_ABC_ORDER[h_buffers])


def _abc_room(n, h_buffers=4):
    """Bytes of a, b, c's buffer (``_abc_elems`` · n field elements) free for MSM scratch once H
    is computed: all of it with 4 H buffers (H's output apart), else all but a's region at the
    bottom, where h lands."""
    return (_abc_elems(h_buffers) - (h_buffers < 4)) * n * _FR


def _h_whole(key):
    """Whether ``key``'s H bases are on the device whole: a resident key, or a partly resident one
    that keeps H (its one H chunk, "h@0", is then its partitions' first plan: ``_streamed_plans``)."""
    return key.where == "device" or "h" in key.resident


def _heads(part):
    """How many of ``part.plans`` ``_enqueue_head`` runs after the H NTT: the H MSM (plan 0) when
    H's bases are on the device whole (``_h_whole``; the plans that follow it run after it, on
    the compute stream or, under ``key.h_head``, the side stream), else none (H's chunks are
    interleaved with the others', ``_streamed_plans``)."""
    return 1 if _h_whole(part.key) else 0


def _prep_query(q):
    """The prep_msm output a query's reductions read: "b" for B_G1 and B_G2, else the query."""
    return "b" if q.startswith("b_") else q


def _group_of(name):
    return "g2" if name.startswith("b_g2") else "g1"


def tail_rows_bound(npoints, group, device):
    """The most result rows (``host_rows``) of a tail MSM over a query of ``npoints`` bases
    (``msm_plan(m, group, npoints=npoints, indexed=True)``) for any tail size 1 <= m <= npoints
    (a tail multiplies distinct bases).  host_rows = Wk·P is not monotone in m: at 132 SMs a
    10^4-scalar tail (c = 10) takes 26 rows, a 1-scalar one (c = 3) 86, 10^6 (c = 16) 256.  The
    width ``window_bits(m)`` is nondecreasing in m (its cost n·W(c) + B(c) has decreasing
    differences in (n, c)), so the widths to try are window_bits(1) … window_bits(npoints)."""
    from .. import _cuda_msm
    cs = range(_cuda_msm.window_bits(1), _cuda_msm.window_bits(max(int(npoints), 1)) + 1)
    return max(_cuda_msm.msm_plan(1, group, device, npoints=npoints, c=c, indexed=True).host_rows
               for c in cs)


def _abc_left(plan, n):
    """Bytes of a, b, c's buffer (3·n field elements) that the H MSM's ``plan`` leaves unused when
    it takes its scratch there (``_abc_split``)."""
    return 3 * n * _FR - _abc_split(plan.buffers, 3 * n * _FR)[0]


def _h_scratch_beyond_abc(plan, n, abc_scratch, cap=None):
    """The H MSM's scratch bytes that a partition reserves beside a, b, c's buffers: all of them,
    or with ``abc_scratch`` those that the 3·n field elements of a, b, c (``cap`` bytes of them:
    fewer with h in a's region, ``_abc_room``) cannot hold (``_abc_split``; at 2^27 none: 10.1 GiB
    in 12)."""
    cap = _abc_room(n) if cap is None else cap
    return _abc_split(plan.buffers, cap)[1] if abc_scratch else plan.scratch_bytes


def _align(nb, a=256):
    return (nb + a - 1) // a * a
