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
"""
from __future__ import annotations

import logging
import os
import threading

import numpy as np

from .._cuda_pending import XYZZ_WORDS, ReadyPoint
from .._errors import BudgetError
from ._base import StageContext
from ._cpu import CpuStages, pow2_at_least

__all__ = ["CudaStages", "ResidentKey", "StreamedKey", "CudaContext", "device_budget", "QUERIES"]

log = logging.getLogger("cuzk.stages")

# query name -> (ProvingKey attribute, group)
QUERIES = {"h": ("h", "g1"), "l": ("l", "g1"), "a": ("a", "g1"), "b_g1": ("b_g1", "g1"),
           "b_g2": ("b_g2", "g2")}
_POINT_BYTES = {"g1": 96, "g2": 192}
_FR = 32
_RING_SLOTS = 4          # pinned staging ring of a worker: slots x _STAGE_CHUNK bytes
_STAGE_CHUNK = 64 << 20          # pinned staging chunk for key uploads
# Device bytes left outside the default budget (driver, modules, other users of the device).
_BUDGET_MARGIN = 2 << 30


def _driver():
    from .._native import _driver as d
    return d


_budgets = {}
_budgets_lock = threading.Lock()


def device_budget(device, total=None):
    """The process-wide ``Budget`` of a CUDA device (made on first use: ``total`` bytes, default
    the device's memory less a 2 GiB margin)."""
    from .._budget import Budget
    from .._cuda_state import memo
    size = max(0, int(device.total_mem) - _BUDGET_MARGIN) if total is None else total
    return memo(_budgets, _budgets_lock, (device.ordinal, device.context),
                lambda: Budget(size, f"cuda:{device.ordinal}"))


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

    def put(self, dst_ptr, src, nbytes, stream, threads=None, progress=None):
        """Enqueue the copy of ``src`` (a C-contiguous buffer, zero-padded to ``nbytes``) to device
        address ``dst_ptr`` on ``stream``, chunk by chunk through the slots (the CPU copy of a
        chunk on the pool, GIL released, overlaps the DMA of the previous ones).  Returns once
        the last chunk is enqueued; ``progress(m)`` after each chunk of m bytes."""
        from .._native import _pool
        d = _driver()
        src = memoryview(src).cast("B")
        if src.nbytes > nbytes:
            raise ValueError(f"{src.nbytes} source bytes do not fit in {nbytes}")
        with self._lock:
            self._alloc()
            for off in range(0, int(nbytes), self.chunk):
                m = min(self.chunk, int(nbytes) - off)
                k = self._next
                self._next = (k + 1) % self.slots
                if self._used[k]:
                    self._evs[k].synchronize()        # slot k's previous upload has read it
                _pool.copy_into(self._bufs[k].asarray(np.uint8)[:m], src[off: off + m], threads)
                d.copy_htod(dst_ptr + off, self._bufs[k].ptr, m, stream)
                self._evs[k].record(stream)
                self._used[k] = True
                if progress is not None:
                    progress(m)

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
    """A worker's CUDA objects: compute and upload streams, pinned staging and result memory."""

    def __init__(self, stages, budget=None, threads=None, name="w0"):
        super().__init__(stages, budget, threads, name)
        d = _driver()
        dev = stages.device
        self.device = dev
        self.compute = d.Stream(dev)
        self.upload = d.Stream(dev)
        self.staging = _Ring(dev)
        self.results = _Pinned(dev)

    def event(self, stream, timing=False):
        """An event recorded on ``stream`` now (``timing=True``: usable with elapsed_ms)."""
        ev = _driver().Event(self.device, timing=timing)
        ev.record(stream)
        return ev

    def close(self):
        for s in (self.compute, self.upload):
            s.synchronize()
        self.staging.close()
        self.results.close()
        self.compute.close()
        self.upload.close()


class ResidentKey:
    """A proving key whose five queries live in device memory (cuzk's pool of the device).

    ``where`` is ``"device"``; ``nbytes`` the device bytes reserved (points + warm-up tables);
    ``ptr(q)`` the device address of query ``q`` (one of ``QUERIES``).  Shared read-only by
    every worker of the device; ``release()`` frees it (idempotent).
    """

    where = "device"

    def __init__(self, pk, device, pool, budget, progress=None, precompute=1, c=None):
        from .. import _cuda_msm
        self.pk, self.device, self.pool = pk, device, pool
        self._bufs = {}
        self._res = None
        lg = pk.domain_size.bit_length() - 1
        sizes = {q: int(getattr(pk, attr).nbytes) for q, (attr, _) in QUERIES.items()}
        tables = 3 * pk.domain_size * _FR + 4096
        # the H MSM (the partition's largest, over uniform scalars) may read `precompute` shifted
        # copies of the H bases (``_cuda_msm.precompute_bases``): fewer windows per MSM
        nh = pk.h.shape[0]
        self.h_plan_args = {"k": 1, "c": c}
        pre = 0
        if precompute > 1 and nh:
            plan = _cuda_msm.msm_plan(nh, "g1", device, npoints=nh, k=precompute, c=c)
            self.h_plan_args = {"k": plan.k, "c": plan.c}
            pre = plan.precompute_bytes
        self.precompute_bytes = pre
        self.nbytes = sum(sizes.values()) + tables + pre
        if budget is not None:
            self._res = budget.reserve(self.nbytes, "resident key", block=False)
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
                buf = self._bufs[q] = pool.alloc(host.size, up)
                ring.put(buf.ptr, host, host.size, up, progress=step)
            if pre:
                self._bufs["h_table"] = pool.alloc(pre, up)
                _cuda_msm.precompute_bases(plan, up, self._bufs["h"].ptr, self._bufs["h_table"].ptr)
            _warm_tables(device, lg, up)
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
        if self._res is not None:
            self._res.release()

    def __repr__(self):
        return f"ResidentKey(domain={self.pk.domain_size}, {self.nbytes} device bytes)"


class StreamedKey:
    """A proving key that does not fit the device budget: its queries stay in host memory,
    page-locked in place (cuMemHostRegister: no second host copy), and every partition streams
    them into two device slots on the worker's upload stream, double-buffered against the
    kernels that read them.  ``where`` is ``"host"``; ``nbytes`` the device bytes reserved (the
    warm-up tables); ``slot_bytes`` the largest query, which each partition reserves twice.
    """

    where = "host"

    def __init__(self, pk, device, budget):
        self.pk, self.device = pk, device
        self._regs = {}
        self._res = None
        lg = pk.domain_size.bit_length() - 1
        self.nbytes = 3 * pk.domain_size * _FR + 4096
        self.slot_bytes = max(int(getattr(pk, attr).nbytes) for attr, _ in QUERIES.values())
        self.h_plan_args = {"k": 1, "c": None}
        self.precompute_bytes = 0
        if budget is not None:
            self._res = budget.reserve(self.nbytes, "streamed key: tables", block=False)
        d = _driver()
        try:
            for q, (attr, _) in QUERIES.items():
                arr = np.ascontiguousarray(getattr(pk, attr))
                if arr.size:
                    self._regs[q] = d.register_host(arr, device)
            up = d.Stream(device)
            try:
                _warm_tables(device, lg, up)
                up.synchronize()
            finally:
                up.close()
        except BaseException:
            self.release()
            raise

    def host_ptr(self, q):
        r = self._regs.get(q)
        return r.ptr if r is not None else 0

    def query_bytes(self, q):
        r = self._regs.get(q)
        return r.nbytes if r is not None else 0

    def release(self):
        regs, self._regs = self._regs, {}
        for r in regs.values():
            r.close()
        if self._res is not None:
            self._res.release()

    def __repr__(self):
        return f"StreamedKey(domain={self.pk.domain_size}, slots of {self.slot_bytes} bytes)"


class _Bases:
    """Where a partition's kernels read each query's bases: the resident key, or (a streamed key)
    one of two device slots that the upload stream fills in query order, each refill waiting
    for the kernels that read the slot's previous query."""

    def __init__(self, part, order):
        self.key, self.ctx, self.order = part.key, part.ctx, order
        self.streamed = part.key.where == "host"
        if self.streamed:
            self.slots = [part.dev["slot0"], part.dev["slot1"]]
            self.ready = {}
            self.free = [None, None]
            for i in range(min(2, len(order))):
                self._upload(i)

    def _upload(self, i):
        d = _driver()
        q, k = self.order[i], i % 2
        up = self.ctx.upload
        if self.free[k] is not None:
            up.wait_event(self.free[k])            # kernels of the slot's previous query are done
        nb = self.key.query_bytes(q)
        if nb:
            d.copy_htod(self.slots[k], self.key.host_ptr(q), nb, up)
        self.ready[q] = self.ctx.event(up)

    def ptr(self, q):
        """The device address of query q's bases for kernels enqueued next on the compute stream."""
        if not self.streamed:
            return self.key.ptr(q)
        self.ctx.compute.wait_event(self.ready[q])
        return self.slots[self.order.index(q) % 2].ptr

    def done(self, q):
        """The kernels reading query q are enqueued: refill its slot with the query after next."""
        if not self.streamed:
            return
        i = self.order.index(q)
        self.free[i % 2] = self.ctx.event(self.ctx.compute)
        if i + 2 < len(self.order):
            self._upload(i + 2)


def _warm_tables(device, lg, stream):
    """Twiddle tables and constants of the H stage at 2^lg, built now (not in a kernel region)."""
    from .. import _cuda_ntt
    st = _cuda_ntt._state(device)
    for kind in ("inv", "wfwd", "winv"):
        st.table(lg, kind, stream)
    st.consts(lg, stream)


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
    precompute : int
        Shifted copies of the H bases kept beside the resident key (1: none; k: the H MSM
        processes ceil(W/k) windows; k·|H|·96 bytes, reserved from the budget).
    h_window : int or None
        Window width of the H MSM (None: the MSM's cost model).
    """

    name = "cuda"

    def __init__(self, threads=None, device=None, b_g2="auto", precompute=1, h_window=None):
        super().__init__(threads)
        self.precompute, self.h_window = int(precompute), h_window
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
        from .._cuda_state import device_pool
        self.pool = device_pool(d, self.device)

    @property
    def device_label(self):
        return f"cuda:{self.device.ordinal} ({self.device.name})"

    # ---- objects ------------------------------------------------------------------------
    def context(self, budget=None, threads=None, name="w0"):
        budget = budget if budget is not None else device_budget(self.device)
        return CudaContext(self, budget, self.threads if threads is None else threads, name)

    def load_key(self, pk, budget=None, progress=None, where="auto"):
        """Make ``pk`` usable on the device.

        ``where``: "device" (``ResidentKey``: upload once; BudgetError when it does not fit),
        "host" (``StreamedKey``: queries streamed per partition), or "auto" (device when the budget
        admits it now, else host, said once in the log)."""
        budget = budget if budget is not None else device_budget(self.device)
        if where not in ("auto", "device", "host"):
            raise ValueError(f"where must be 'auto', 'device' or 'host', got {where!r}")
        if where != "host":
            try:
                return ResidentKey(pk, self.device, self.pool, budget, progress, self.precompute,
                                   self.h_window)
            except BudgetError as e:
                if where == "device":
                    raise
                log.info("key of domain 2^%d does not fit %s (%s): kept in host memory and "
                         "streamed per partition", pk.domain_size.bit_length() - 1, budget.name, e)
        return StreamedKey(pk, self.device, budget)

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
    def _plans(self, key, prep, n):
        """(name, kind, plan) of every GPU reduction of a partition."""
        from .. import _cuda_batch, _cuda_msm
        pk, dev = key.pk, self.device
        groups = [("l", "l", "g1"), ("a", "a", "g1"), ("b_g1", "b", "g1")]
        if self.b_g2 == "gpu":
            groups.append(("b_g2", "b", "g2"))
        out = [("h", "msm", _cuda_msm.msm_plan(n - 1, "g1", dev, npoints=pk.h.shape[0],
                                               **key.h_plan_args))]
        for name, q, group in groups:
            npts = getattr(pk, QUERIES[name][0]).shape[0]
            if npts and prep[q + "_n_ones"]:
                out.append((name + ":ones", "batch",
                            _cuda_batch.batch_add_plan(npts, group, dev)))
            m = prep[q + "_tail_scalars"].shape[0]
            if m:
                out.append((name + ":tail", "msm",
                            _cuda_msm.msm_plan(m, group, dev, npoints=npts, indexed=True)))
        return out

    # ---- the four calls -----------------------------------------------------------------
    def trim(self):
        self.pool.trim(0)

    def warm(self, ctx, key):
        """Prepare ``ctx`` for partitions of ``key`` before the first one: the pinned staging
        ring and result slab allocated, and the device pool grown by what a partition allocates
        on the upload stream (a, b, c, H's output and the H MSM's scratch; freed at once, the
        pool keeps it).  Measured on the H200 (2^24, narrow, two workers, bench/RESULTS.md
        session 4): with staging sized too small here, each worker's first upload took
        0.85–0.92 s instead of 0.07 s — a pinned allocation inside the first partition."""
        n = key.pk.domain_size
        abc = 3 * n * _FR
        ctx.staging.warm()
        ctx.results.warm(1 << 20)
        from .. import _cuda_msm
        try:
            h = _cuda_msm.msm_plan(n - 1, "g1", self.device, npoints=key.pk.h.shape[0], **key.h_plan_args)
            nbytes = abc + n * _FR + h.scratch_bytes
            self.pool.alloc(nbytes, ctx.upload).free(ctx.upload)
            ctx.upload.synchronize()
        except Exception as e:      # a warm-up only: a partition that needs the memory will say
            log.info("warm-up of %s: the device pool was not grown (%s)", ctx.name, e)

    def _validate(self, part, check):
        """Shapes on the host; the row check a∘b = c runs on the GPU (``run``), on a, b, c that
        are uploaded for H anyway (a memory-bound pass instead of ~n products on the CPU), and
        ``finish`` raises ``UnsatisfiedAssignmentError`` for the first bad row."""
        part.asg.validate(part.key.pk)
        part.gpu_check = bool(check)

    def _stage_in(self, part):
        """Reserve the partition's device bytes, enqueue the uploads through the staging ring."""
        key, prep, ctx, asg = part.key, part.prep, part.ctx, part.asg
        part.dev = {}
        n = pow2_at_least(asg.a.shape[0])
        part.n = n
        plans = part.plans = self._plans(key, prep, n)
        # host arrays to upload, in staging order
        uploads = [("a", asg.a, n * _FR), ("b", asg.b, n * _FR), ("c", asg.c, n * _FR)]
        for name, q, _ in (("l", "l", 0), ("a", "a", 0), ("b", "b", 0)):
            uploads.append((q + "_ones", prep[q + "_ones"], prep[q + "_ones"].nbytes))
            sc = prep[q + "_tail_scalars"]
            uploads.append((q + "_tail_scalars", sc, sc.nbytes))
            idx = prep[q + "_tail_idx"]                  # uint32 from prep_msm: no copy
            uploads.append((q + "_tail_idx", np.asarray(idx, dtype=np.uint32), idx.shape[0] * 4))
        dev_bytes = sum(_align(nb) for _, _, nb in uploads) + n * _FR        # + the H output
        # the reductions run one after another on the compute stream and each frees its scratch
        # stream-ordered before the next allocates: the peak is the largest, not the sum
        dev_bytes += max((p.scratch_bytes for _, _, p in plans), default=0)
        if key.where == "host":
            dev_bytes += 2 * _align(key.slot_bytes)
        part.reservations.append(ctx.budget.reserve(dev_bytes, f"{ctx.name}: partition"))
        # pinned memory: the result rows of every reduction (uploads go through the ring)
        rows = sum(p.host_rows * XYZZ_WORDS[_group_of(name)] for name, _, p in plans)
        res = ctx.results.get(rows * 8 + 8).asarray(np.uint64)
        part.check_view = res[rows: rows + 1]                # the row check's first bad row
        part.result_views = []
        at = 0
        for name, _, p in plans:
            w = XYZZ_WORDS[_group_of(name)]
            part.result_views.append(res[at: at + p.host_rows * w].reshape(p.host_rows, w))
            at += p.host_rows * w
        off = 0
        up = ctx.upload
        for name, arr, nb in uploads:
            if nb == 0:
                continue
            buf = part.dev[name] = self.pool.alloc(nb, up)
            # through the worker's pinned ring (CPU copies on the pool, GIL released); a, b, c
            # are padded with zero rows to n
            ctx.staging.put(buf.ptr, np.ascontiguousarray(arr), nb, up, ctx.threads)
            off += nb
        part.dev["h"] = self.pool.alloc(n * _FR, up)
        part.dev["first_bad"] = self.pool.alloc(8, up)
        if key.where == "host":
            for k in ("slot0", "slot1"):
                part.dev[k] = self.pool.alloc(max(key.slot_bytes, 4), up)
        part.bytes_uploaded = off
        part.uploaded = ctx.event(up)

    def run(self, part):
        from .. import _cuda_batch, _cuda_msm, _cuda_ntt
        ctx, key, dev = part.ctx, part.key, part.dev
        s = ctx.compute
        s.wait_event(part.uploaded)
        marks = part.gpu_marks = [("start", ctx.event(s, timing=True))]
        if getattr(part, "gpu_check", False):
            d = _driver()
            d.memset_d32(dev["first_bad"], 0xFFFFFFFF, 2, s)
            nst = _cuda_ntt._state(self.device)
            grid = max(1, min(-(-part.n // 256), self.device.sm_count * 8))
            nst.fn("cuzk_fr_abc_check").launch(
                s, grid, 256, [("P", dev["first_bad"].ptr), ("P", dev["a"].ptr),
                               ("P", dev["b"].ptr), ("P", dev["c"].ptr), ("Q", part.n)])
            d.copy_dtoh(part.check_view, dev["first_bad"], 8, s)
            marks.append(("check", ctx.event(s, timing=True)))
        _cuda_ntt.h_stage_inplace(dev["a"], dev["b"], dev["c"], dev["h"], part.n, device=self.device,
                                  stream=s)
        marks.append(("h_ntt", ctx.event(s, timing=True)))
        names = [name.split(":")[0] for name, _, _ in part.plans]
        order = list(dict.fromkeys(names))                 # queries in first-use order
        bases = _Bases(part, order)
        for i, ((name, kind, plan), view) in enumerate(zip(part.plans, part.result_views)):
            q = names[i]
            pq = "b" if q.startswith("b_") else q
            if kind == "batch":
                part.parts[name] = _cuda_batch.enqueue_batch_add(
                    plan, s, self.pool, bases.ptr(q), dev[pq + "_ones"].ptr, view)
            elif q == "h":
                part.parts[name] = _cuda_msm.enqueue_msm(
                    plan, s, self.pool, bases.ptr("h"), dev["h"].ptr, view, scalar_form="montgomery")
            else:
                part.parts[name] = _cuda_msm.enqueue_msm(
                    plan, s, self.pool, bases.ptr(q), dev[pq + "_tail_scalars"].ptr, view,
                    d_idx_ptr=dev[pq + "_tail_idx"].ptr, scalar_form=part.prep["tail_form"])
            marks.append((name, ctx.event(s, timing=True)))
            if i + 1 == len(names) or names[i + 1] != q:
                bases.done(q)
        self._free_device(part)
        part.done = _Done(ctx.event(s))
        return part.done

    def _free_device(self, part):
        """Give the partition's device buffers back to the pool, ordered after its kernels."""
        bufs, part.dev = getattr(part, "dev", {}), {}
        s = part.ctx.compute
        for b in bufs.values():
            b.free(s)

    def finish(self, part, verify=True) -> bytes:
        from .._errors import UnsatisfiedAssignmentError
        from .._native import _field
        try:
            self._gpu_times(part)
            if getattr(part, "gpu_check", False) and int(part.check_view[0]) != 2**64 - 1:
                raise UnsatisfiedAssignmentError(int(part.check_view[0]))
            pts = {}
            for name, p in part.parts.items():
                q, _, _ = name.partition(":")
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
        for (_, a), (name, b) in zip(marks, marks[1:]):
            part.timings["gpu:" + name] = d.Event.elapsed_ms(a, b) / 1e3
        part.timings["gpu:region"] = d.Event.elapsed_ms(marks[0][1], marks[-1][1]) / 1e3

    def abort(self, part):
        if getattr(part, "dev", None):
            try:
                part.ctx.upload.synchronize()       # uploads may still read the staging memory
            finally:
                self._free_device(part)
        part.release()

    def _diagnose(self, part):
        """A GPU proof that fails verification: prove the same partition (same r, s) on the CPU
        and say whose fault it is."""
        from .._errors import ProofVerificationError
        from .._prover import prove
        try:
            cpu = prove(part.key.pk, part.asg, part.r, part.s, backend="cpu", verify=True,
                        threads=part.ctx.threads)
        except ProofVerificationError:
            return super()._diagnose(part)
        return ProofVerificationError(
            f"the {self.device_label} backend computed a wrong result: the same inputs and "
            f"randomizers verify on the CPU backend (CPU proof {cpu[:8].hex()}…); not returned",
            cause="backend", backend=self.name)


def _group_of(name):
    return "g2" if name.startswith("b_g2") else "g1"


def _align(nb, a=256):
    return (nb + a - 1) // a * a
