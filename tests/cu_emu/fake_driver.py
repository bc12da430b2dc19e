"""A fake ``cuzk._native._driver`` over host memory and the kernel emulator (emu.cpp).

Developer/test tool only (tests/test_cu_emu.py); never shipped, never used by cuzk
at run time.  ``FakeDriver(lib_path)`` loads a built emulator library and offers
the subset of the driver's API that ``cuzk._cuda_ntt`` uses, with the checks a real
device would make where they are cheap:

* device memory is host memory in buffers with poisoned contents (0xFF) and
  guarded red zones; a write past either end is reported after the launch, free
  or copy that follows it; freed buffers are poisoned;
* kernel pointer arguments must point into a live device or pinned buffer, copies
  must stay inside the device buffers they name;
* launches are checked like cuLaunchKernel does: argument count and sizes against
  the kernel's parameters, 1..1024 threads, dynamic shared memory above 48 KiB
  only after ``set_max_dynamic_shared``;
* everything is synchronous: streams and events only record the calls;
* ``devices`` emulated devices (1 unless set): a device buffer, stream, event, pool and
  module belong to one device, and a launch, copy, memset, pool allocation or event record
  that mixes two devices fails as the driver would (a context mismatch), so multi-GPU code
  is checked for handles crossing devices;
* cuMemHostRegister refuses a byte range that overlaps one registered already
  (CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, 712), as the driver does (two ranges that
  only share a page are both accepted, as natively);
* pool memory (cuMemAllocFromPoolAsync) is stream-ordered: a launch, copy or memset on
  another stream that is not ordered after the allocation (an event waited for, or a host
  wait, in between) fails, as it may find the memory still in use by the pool's previous
  user on the allocating stream; and a stream-ordered free must be ordered after every use of
  the buffer on other streams (the pool may hand it out again at once);
* ``with drv.reordered(seed):`` streams run out of order (``_Reorder``): every launch, copy,
  memset and stream-ordered free is queued on its stream and runs later, in an order drawn
  from ``seed`` among those CUDA allows (each stream in order, after the events it waits
  for), and a host wait runs only what it waits for.  A missing event wait, a buffer freed
  or a pinned buffer reused while another stream may still use it, or a host read before its
  copy is waited for, then shows as wrong bytes or an error, where in-order emulation always
  gets lucky.

``install(monkeypatch)`` points ``cuzk._cuda_ntt`` at the fake (driver, module
loader and per-device state) through pytest's ``monkeypatch``, so the real driver
is untouched and everything is restored after the test.
"""

import collections
import contextlib
import ctypes
import random
import threading

import numpy as np

from cuzk._errors import CudaError

__all__ = ["FakeDriver", "KernelEmulator"]

_FMT = {  # kernel-argument formats of cuzk._native._driver.LaunchArgs -> ctypes type
    "P": ctypes.c_uint64, "Q": ctypes.c_uint64, "q": ctypes.c_int64, "d": ctypes.c_double,
    "I": ctypes.c_uint32, "i": ctypes.c_int32, "f": ctypes.c_float,
    "H": ctypes.c_uint16, "h": ctypes.c_int16, "B": ctypes.c_uint8, "b": ctypes.c_int8,
}
_INT_RANGE = {"P": (0, 2**64), "Q": (0, 2**64), "q": (-2**63, 2**63), "I": (0, 2**32),
              "i": (-2**31, 2**31), "H": (0, 2**16), "h": (-2**15, 2**15), "B": (0, 2**8),
              "b": (-2**7, 2**7)}
_ALIGN = 256                 # cuMemAlloc alignment
_REDZONE = 256               # guard bytes on each side of a device buffer
_GUARD = 0xEB
_POISON = 0xFF               # fresh and freed device memory (not a reduced field element)
_SMEM_DEFAULT = 48 * 1024    # dynamic shared memory without the opt-in
_SMEM_OPTIN = 227 * 1024     # sm_90's per-block opt-in maximum

# CUresult codes used in the errors raised
_INVALID_VALUE, _NOT_FOUND, _ILLEGAL_ADDRESS, _LAUNCH_FAILED = 1, 500, 700, 719
_INVALID_CONTEXT, _INVALID_HANDLE, _ALREADY_REGISTERED = 201, 400, 712


def _err(call, code, name, message):
    return CudaError(call, code, name, message)


class KernelEmulator:
    """ctypes front of a built emu.cpp library."""

    def __init__(self, lib_path, workers=0):
        self.path = str(lib_path)
        self.workers = workers
        self._lib = ctypes.CDLL(self.path)
        self._lib.emu_has_kernel.argtypes = [ctypes.c_char_p]
        self._lib.emu_has_kernel.restype = ctypes.c_int
        self._lib.emu_launch.argtypes = [
            ctypes.c_char_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
            ctypes.POINTER(ctypes.c_uint), ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint,
            ctypes.c_char_p, ctypes.c_size_t]
        self._lib.emu_launch.restype = ctypes.c_int

    def has_kernel(self, name):
        return bool(self._lib.emu_has_kernel(name.encode()))

    def launch(self, name, grid, block, smem, args):
        """args: list of (fmt, int/float) already validated; raises CudaError on failure."""
        n = len(args)
        holders = [_FMT[fmt](v) for fmt, v in args]
        ptrs = (ctypes.c_void_p * max(n, 1))()
        sizes = (ctypes.c_uint * max(n, 1))()
        for i, h in enumerate(holders):
            ptrs[i] = ctypes.cast(ctypes.pointer(h), ctypes.c_void_p)
            sizes[i] = ctypes.sizeof(h)
        err = ctypes.create_string_buffer(512)
        rc = self._lib.emu_launch(name.encode(), grid, block, smem, n, sizes, ptrs, self.workers,
                                  err, len(err))
        if rc != 0:
            raise _err("cuLaunchKernel", _LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED (emulator)",
                       err.value.decode(errors="replace"))


def _dims(d, what):
    t = (d,) if isinstance(d, int) else tuple(d)
    if not 1 <= len(t) <= 3 or any(int(x) < 1 for x in t):
        raise ValueError(f"{what}: expected 1-3 positive ints, got {d!r}")
    if any(int(x) != 1 for x in t[1:]):
        raise NotImplementedError(f"the emulator runs 1-D launches only, {what}={d!r}")
    return int(t[0])


class _Closable:
    """close() / context-manager protocol shared by the fake handles."""
    closed = False

    def close(self):
        self.closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _Reorder:
    """Streams run out of order: each stream's operations wait in its queue and run later, in a
    random order CUDA allows (a stream's own in order, each after what its event waits name).
    After each enqueue, ``wander`` may run a few ready heads at random.  A host wait,
    ``flush(sid, pos)``, runs until stream sid has run its first ``pos`` operations: each step
    either runs a random ready head (of any stream: other streams' work overtakes) or follows
    the waits from sid's head to a runnable one; work no wait needs may stay queued.
    Positions count a stream's operations from 1; (sid, 0) is always done.  Operations are
    queued in call order, so what one waits for is always queued before it: no cycle."""

    def __init__(self, seed, p=0.25, mix=0.5):
        self.rng = random.Random(seed)
        self.p, self.mix = p, mix
        self.queues = {}        # sid -> deque of (pos, fn, deps)
        self.enq = {}           # sid -> operations queued
        self.done = {}          # sid -> operations run
        self.ran = 0
        self.out_of_order = 0   # operations run while another stream had work waiting

    def tail(self, sid):
        return (sid, self.enq.get(sid, 0))

    def enqueue(self, sid, fn, deps=()):
        pos = self.enq.get(sid, 0) + 1
        self.enq[sid] = pos
        self.queues.setdefault(sid, collections.deque()).append((pos, fn, tuple(deps)))
        self.wander()
        return (sid, pos)

    def _blocked(self, sid):
        """The first unmet wait of stream sid's head, or None."""
        for d in self.queues[sid][0][2]:
            if self.done.get(d[0], 0) < d[1]:
                return d
        return None

    def _ready(self):
        return sorted(s for s, q in self.queues.items() if q and self._blocked(s) is None)

    def _run(self, sid):
        pos, fn, _ = self.queues[sid].popleft()
        if any(q for s, q in self.queues.items() if s != sid):
            self.out_of_order += 1
        self.done[sid] = pos
        self.ran += 1
        fn()

    def wander(self):
        while self.rng.random() < self.p:
            ready = self._ready()
            if not ready:
                return
            self._run(self.rng.choice(ready))

    def flush(self, sid, pos):
        while self.done.get(sid, 0) < pos:
            if self.rng.random() < self.mix:
                self._run(self.rng.choice(self._ready()))   # some head is ready: a DAG
                continue
            s = sid
            while True:                 # from sid's head along the waits to a runnable head
                d = self._blocked(s)
                if d is None:
                    break
                s = d[0]
            self._run(s)

    def flush_all(self):
        for s in sorted(self.queues):
            self.flush(s, self.enq[s])


class FakeDriver:
    """The driver API subset used by cuzk._cuda_ntt, over host memory and the emulator."""

    def __init__(self, lib_path, workers=0, devices=1):
        self.emu = KernelEmulator(lib_path, workers)
        self.devices = int(devices)  # emulated devices (a test may raise it: monkeypatch)
        self.local_frame = 0         # every module's largest kernel frame (Module.max_local_size_bytes)
        self.registered = {}        # id -> (lo, hi): host ranges page-locked by register_host
        self.launches = []          # (kernel name, grid, block, shmem, args) of every launch
        self.launch_streams = []    # the stream of each launch, in launch order
        self.waits = []             # (stream, event) of every Stream.wait_event
        self._live = {}             # id -> _Alloc (device buffers and pinned buffers)
        self._lock = threading.RLock()
        self.order = None           # a _Reorder while ``reordered`` is on; None: in call order
        # happens-before, kept in either mode: a vector clock per stream (what of every stream
        # its next operation is ordered after: its own operations, the events it waited for,
        # and what the host had waited for when it enqueued) and the host's
        self.vc, self.ops, self.host_vc = {}, {}, {}
        drv = self

        # ------------------------------------------------------------ memory
        class _Alloc(_Closable):
            """Host storage with red zones; ``ptr`` is aligned like cuMemAlloc's."""
            kind = "device"
            device = None           # the owning Device (device buffers)

            def __init__(self, nbytes):
                if nbytes < 0:
                    raise ValueError("nbytes must be >= 0")
                self._nbytes = int(nbytes)
                self._raw = np.empty(self._nbytes + 2 * _REDZONE + _ALIGN, np.uint8)
                base = self._raw.ctypes.data
                start = (base + _REDZONE + _ALIGN - 1) // _ALIGN * _ALIGN
                self._off = start - base
                self._raw[:] = _GUARD
                self._raw[self._off:self._off + self._nbytes] = self._fill
                self._ptr = start
                self.closed = False
                with drv._lock:
                    drv._live[id(self)] = self

            _fill = _POISON

            @property
            def ptr(self):
                if self.closed:
                    raise ValueError(f"{self.kind} buffer is closed")
                return self._ptr

            @property
            def nbytes(self):
                return self._nbytes

            def __len__(self):
                return self._nbytes

            def check_guards(self):
                lo = self._raw[:self._off]
                hi = self._raw[self._off + self._nbytes:]
                if (lo != _GUARD).any() or (hi != _GUARD).any():
                    raise _err("emulator", _ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
                               f"a write outside the {self._nbytes}-byte {self.kind} buffer "
                               f"at {self._ptr:#x} (red zone overwritten)")

            def contains(self, ptr, nbytes):
                return self._ptr <= ptr and ptr + nbytes <= self._ptr + self._nbytes

            def _poison(self):
                self.check_guards()
                self._raw[self._off:self._off + self._nbytes] = _POISON
                with drv._lock:
                    drv._live.pop(id(self), None)

            def close(self):
                """Free now (cuMemFree, cuMemFreeHost: they wait for the device's work first)."""
                if self.closed:
                    return
                self.closed = True
                with drv._lock:
                    if drv.order is not None:
                        drv.order.flush_all()
                    self._poison()

            def free(self, stream=None):
                self.close()

        class DeviceBuffer(_Alloc):
            pool = None

            @staticmethod
            def alloc(device, nbytes):
                b = DeviceBuffer(nbytes)
                b.device = device
                return b

        class PinnedBuffer(_Alloc):
            kind = "pinned"
            _fill = 0

            def __init__(self, nbytes, device=None):
                super().__init__(nbytes)
                self.device = device

            def asarray(self, dtype="uint8", shape=None):
                dt = np.dtype(dtype)
                a = np.ctypeslib.as_array((ctypes.c_uint8 * self._nbytes).from_address(self.ptr))
                a = a[: self._nbytes // dt.itemsize * dt.itemsize].view(dt)
                return a if shape is None else a.reshape(shape)

        class _PoolBuffer(DeviceBuffer):
            stream = None

            def free(self, stream=None):
                """cuMemFreeAsync on ``stream`` (default: the allocation stream; a closed one:
                at once, on the thread's default stream, which no other stream waits for)."""
                if self.closed:
                    return
                self.closed = True
                s = stream if stream is not None else self.stream
                with drv._lock:
                    if s is None or getattr(s, "closed", False):
                        drv._freed_after_uses(self, None)
                        self._poison()      # the per-thread stream: ordered after nothing queued
                    else:
                        drv._do(s, self._poison, ptrs=((self._ptr, "the freed buffer"),),
                                freed=self)

            def close(self):
                self.free()

        class MemPool:
            def __init__(self, device, release_threshold=2**64 - 1, create=False):
                self.device = device
                self.internal_dependencies = True       # the driver's default

            def alloc(self, nbytes, stream):
                drv._same_device("cuMemAllocFromPoolAsync", self.device, stream)
                b = _PoolBuffer(nbytes)
                b.device, b.pool, b.stream = self.device, self, stream
                b.uses = {}         # stream -> its last operation that used the buffer
                if stream is not None:
                    with drv._lock:
                        b.alloc_at = (id(stream), drv._tick(stream))
                return b

            def trim(self, keep_bytes=0):
                pass

            # the driver's pool counters (the emulator keeps no pool: host memory serves)
            used_bytes = reserved_bytes = 0

            def close(self):
                pass

        # ------------------------------------------------------------ device, streams, events
        class Device(_Closable):
            _devices = {}

            def __init__(self, ordinal=0):
                if not 0 <= ordinal < drv.devices:
                    raise _err("cuDeviceGet", 101, "CUDA_ERROR_INVALID_DEVICE",
                               f"the emulator has {drv.devices} device(s), not ordinal {ordinal}")
                self.ordinal = ordinal
                self.name = "cuzk host emulator" + (f" {ordinal}" if ordinal else "")
                self.arch = "sm_90"
                self.cc = (9, 0)
                self.sm_count = 4
                self.max_threads_per_sm = 2048
                self.total_mem = 1 << 34
                self.l2_size = 1 << 20
                self.max_shared_per_block_optin = _SMEM_OPTIN
                self.cooperative_launch = False
                self.closed = False

            @staticmethod
            def get(ordinal=0):
                d = Device._devices.get(ordinal)
                if d is None:
                    d = Device._devices[ordinal] = Device(ordinal)
                return d

            @property
            def context(self):
                return id(self)

            handle = context

            def set_current(self):
                pass

            def synchronize(self):
                with drv._lock:
                    if drv.order is not None:
                        drv.order.flush_all()
                    for vc in drv.vc.values():
                        drv._join(drv.host_vc, vc)

            def mem_info(self):
                return self.total_mem, self.total_mem

            def close(self):
                pass

        class Stream(_Closable):
            def __init__(self, device, nonblocking=True, priority=0):
                self.device, self.nonblocking, self.priority = device, nonblocking, priority
                self.closed = False

            handle = property(lambda self: id(self))

            def _at(self):      # reordered: the stream's last queued position (else None)
                return drv.order.tail(id(self)) if drv.order is not None else None

            def synchronize(self):
                with drv._lock:
                    drv._host_wait(self._at(), drv.vc.get(id(self), {}))

            def wait_event(self, event):
                if not isinstance(event, Event):
                    raise TypeError(f"wait_event needs an Event, got {type(event).__name__}")
                drv.waits.append((self, event))
                with drv._lock:     # the event's latest record, as at this call (or nothing)
                    drv._join(drv.vc.setdefault(id(self), {}), getattr(event, "vc", {}))
                    at = getattr(event, "at", None)
                    if drv.order is not None and at is not None:
                        drv.order.enqueue(id(self), lambda: None, (at,))

            def query(self):
                with drv._lock:
                    return drv._host_query(self._at(), drv.vc.get(id(self), {}))

            def close(self):
                """cuStreamSynchronize, then cuStreamDestroy (as the native Stream.close)."""
                if not self.closed:
                    self.synchronize()
                    self.closed = True

        class Event(_Closable):
            def __init__(self, device, timing=True, blocking_sync=False):
                self.device, self.timing = device, timing
                self.closed = False

            handle = property(lambda self: id(self))

            def record(self, stream=None):
                if stream is not None:
                    drv._same_device("cuEventRecord", self.device, stream, _INVALID_HANDLE)
                # where and after how many launches: what a wait on it orders after
                self.recorded = (stream, len(drv.launches))
                with drv._lock:     # reordered: the stream's position a wait or sync orders after
                    self.at = (drv.order.tail(id(stream)) if drv.order is not None
                               and stream is not None else None)
                    if stream is not None:
                        drv._tick(stream)
                        self.vc = dict(drv.vc[id(stream)])

            def synchronize(self):
                with drv._lock:
                    drv._host_wait(getattr(self, "at", None), getattr(self, "vc", {}))

            def query(self):
                with drv._lock:
                    return drv._host_query(getattr(self, "at", None), getattr(self, "vc", {}))

            @staticmethod
            def elapsed_ms(start, end):
                return 0.0

        # ------------------------------------------------------------ modules and launches
        class Function:
            def __init__(self, module, name):
                self.module, self.name = module, name
                self.max_dynamic_shared = _SMEM_DEFAULT

            def set_max_dynamic_shared(self, nbytes):
                if not 0 <= nbytes <= _SMEM_OPTIN:
                    raise _err("cuFuncSetAttribute", _INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE",
                               f"{nbytes} bytes of dynamic shared memory (max {_SMEM_OPTIN})")
                self.max_dynamic_shared = nbytes

            def launch(self, stream, grid, block, args=(), shmem=0, cooperative=False):
                g, b = _dims(grid, "grid"), _dims(block, "block")
                if cooperative:
                    raise NotImplementedError("the emulator has no cooperative launches")
                if shmem > self.max_dynamic_shared:
                    raise _err("cuLaunchKernel", _INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE",
                               f"{self.name}: {shmem} bytes of dynamic shared memory, the "
                               f"function allows {self.max_dynamic_shared}")
                dev = self.module.device
                drv._same_device("cuLaunchKernel", dev, stream)
                packed = [drv._pack_arg(self.name, i, a) for i, a in enumerate(args)]
                for i, (fmt, v) in enumerate(packed):
                    if fmt == "P" and v:
                        drv._on_device(f"cuLaunchKernel ({self.name}, argument {i})", v, 1,
                                       getattr(stream, "device", dev))
                drv.launches.append((self.name, g, b, shmem, [v for _, v in packed]))
                drv.launch_streams.append(stream)
                name = self.name

                def run():
                    for i, (fmt, v) in enumerate(packed):     # still live when it runs
                        if fmt == "P" and v and drv._find(v, 1, ("device", "pinned")) is None:
                            raise _err("cuLaunchKernel", _ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
                                       f"{name}: argument {i} = {v:#x} was freed before the kernel ran")
                    drv.emu.launch(name, g, b, shmem, packed)
                    drv.check_guards()
                with drv._lock:
                    drv._do(stream, run, ptrs=[(v, f"{name}: argument {i}")
                                               for i, (fmt, v) in enumerate(packed)
                                               if fmt == "P" and v])

        class Module:
            def __init__(self, device=None):
                self.device = device
                self.closed = False

            def max_local_size_bytes(self):
                """The largest kernel frame: ``FakeDriver.local_frame`` (0: none, as the
                emulator's kernels have none; a test sets it)."""
                return drv.local_frame

            def function(self, name):
                if not drv.emu.has_kernel(name):
                    raise _err("cuModuleGetFunction", _NOT_FOUND, "CUDA_ERROR_NOT_FOUND",
                               f"no kernel {name!r} in the emulator")
                return Function(self, name)

            def close(self):
                self.closed = True

        self.DeviceBuffer, self.PinnedBuffer, self.MemPool = DeviceBuffer, PinnedBuffer, MemPool
        self.Device, self.Stream, self.Event = Device, Stream, Event
        self.Module, self.Function = Module, Function
        self._Alloc = _Alloc

    # ---------------------------------------------------------------- helpers
    def register_host(self, obj, device=None):
        """cuMemHostRegister stand-in: host memory is host memory here; keeps ``obj`` alive
        and refuses a range that overlaps a registered one (712), as the driver does."""
        a = np.asarray(obj)
        drv, lo, hi = self, a.ctypes.data, a.ctypes.data + a.nbytes

        class _Registration(_Closable):
            ptr, nbytes, _obj = lo, a.nbytes, a

            def close(self):
                with drv._lock:
                    drv.registered.pop(id(self), None)
                self._obj = None
        reg = _Registration()
        with self._lock:
            for l2, h2 in self.registered.values():
                if lo < h2 and l2 < hi:
                    raise _err("cuMemHostRegister", _ALREADY_REGISTERED,
                               "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
                               f"[{lo:#x}, +{a.nbytes}) overlaps the registered [{l2:#x}, +{h2 - l2})")
            if hi > lo:
                self.registered[id(reg)] = (lo, hi)
        return reg

    def probe(self):
        return True, "cuzk host emulator"

    def device_count(self):
        return self.devices

    @staticmethod
    def _ordinal(x):
        return getattr(x, "ordinal", x)

    def _same_device(self, call, device, stream, code=_INVALID_CONTEXT):
        """A handle of ``device`` used on ``stream`` must belong to the stream's device."""
        sdev = getattr(stream, "device", None)
        if device is None or sdev is None or self._ordinal(device) == self._ordinal(sdev):
            return
        raise _err(call, code, "CUDA_ERROR_INVALID_CONTEXT" if code == _INVALID_CONTEXT
                   else "CUDA_ERROR_INVALID_HANDLE",
                   f"a handle of device {self._ordinal(device)} used on a stream of device "
                   f"{self._ordinal(sdev)}")

    def _on_device(self, call, ptr, nbytes, device):
        """Device memory at ptr must belong to ``device`` (pinned host memory may be anywhere)."""
        a = self._find(ptr, nbytes)
        if a is not None and a.device is not None and device is not None \
                and self._ordinal(a.device) != self._ordinal(device):
            raise _err(call, _ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
                       f"{ptr:#x} is memory of device {self._ordinal(a.device)}, used on device "
                       f"{self._ordinal(device)}")

    def check_guards(self):
        with self._lock:
            allocs = list(self._live.values())
        for a in allocs:
            a.check_guards()

    def _find(self, ptr, nbytes, kinds=("device",)):
        with self._lock:
            allocs = list(self._live.values())
        for a in allocs:
            if a.kind in kinds and a.contains(ptr, nbytes):
                return a
        return None

    def _dev(self, call, x, nbytes, stream=None):
        """A device pointer (DeviceBuffer or int) whose [ptr, ptr+nbytes) is live device memory
        (of the stream's device when a stream is given)."""
        ptr = x.ptr if isinstance(x, self._Alloc) else int(x)
        if self._find(ptr, nbytes) is None:
            raise _err(call, _INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE",
                       f"[{ptr:#x}, +{nbytes}) is not inside a live device buffer")
        self._on_device(call, ptr, nbytes, getattr(stream, "device", None))
        return ptr

    def _host(self, call, x, nbytes):
        """A host pointer: int, PinnedBuffer or a contiguous writable-or-readable buffer."""
        if isinstance(x, self._Alloc):
            if x.kind != "pinned":
                raise _err(call, _INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE",
                           "a device buffer given where host memory is expected")
            if nbytes > x.nbytes:
                raise ValueError(f"{call}: {nbytes} bytes but the host buffer has {x.nbytes}")
            return x.ptr
        if isinstance(x, int):
            if self._find(x, 1) is not None:
                raise _err(call, _INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE",
                           "a device pointer given where host memory is expected")
            return x
        a = np.asarray(x)
        if not a.flags.c_contiguous:
            raise ValueError(f"{call}: host buffer must be C-contiguous")
        if nbytes > a.nbytes:
            raise ValueError(f"{call}: {nbytes} bytes but the host buffer has {a.nbytes}")
        return a.ctypes.data

    def _pack_arg(self, kname, i, a):
        if isinstance(a, tuple):
            fmt, v = a
        elif isinstance(a, self._Alloc):
            fmt, v = "P", a
        elif isinstance(a, float):
            fmt, v = "d", a
        elif isinstance(a, int):
            fmt, v = ("q" if a < 0 else "Q"), a
        else:
            raise TypeError(f"{kname}: argument {i}: unsupported {type(a).__name__}")
        if fmt not in _FMT:
            raise ValueError(f"{kname}: argument {i}: unknown format {fmt!r}")
        if isinstance(v, self._Alloc):
            v = v.ptr
        if fmt in _INT_RANGE:
            lo, hi = _INT_RANGE[fmt]
            if not isinstance(v, int) or not lo <= v < hi:
                raise OverflowError(f"{kname}: argument {i} ({fmt}) out of range: {v!r}")
        if fmt == "P" and v != 0 and self._find(v, 1, ("device", "pinned")) is None:
            raise _err("cuLaunchKernel", _ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
                       f"{kname}: argument {i} = {v:#x} is not in a live device or pinned buffer")
        return fmt, v

    # ---------------------------------------------------------------- copies and memsets
    @staticmethod
    def _join(dst, src):
        for k, v in src.items():
            if dst.get(k, 0) < v:
                dst[k] = v

    def _host_wait(self, at, vc):
        """The host waits for stream position ``at`` ((stream id, position) under ``reordered``;
        None: nothing queued to run) whose happens-before is ``vc``.  Caller holds _lock."""
        if self.order is not None and at is not None:
            self.order.flush(*at)
        self._join(self.host_vc, vc)

    def _host_query(self, at, vc):
        """Whether position ``at`` has run (``_host_wait``'s arguments); if so the host has seen
        it, as after a wait.  Caller holds _lock."""
        if self.order is not None and at is not None:
            self.order.wander()
            if self.order.done.get(at[0], 0) < at[1]:
                return False
        self._join(self.host_vc, vc)
        return True

    def _tick(self, stream):
        """One operation on ``stream``: its clock takes in what the host has waited for, then
        counts the operation; returns the operation's number on its stream.  Caller holds _lock."""
        sid = id(stream)
        vc = self.vc.setdefault(sid, {})
        self._join(vc, self.host_vc)
        self.ops[sid] = vc[sid] = self.ops.get(sid, 0) + 1
        return vc[sid]

    def _use(self, stream, ptr, what):
        """Pool memory at ``ptr`` used on ``stream`` (after ``_tick``): that stream must be
        ordered after the allocation (cuMemAllocFromPoolAsync is stream-ordered); the use is
        remembered for the free.  Caller holds _lock."""
        a = self._find(ptr, 1)
        at = getattr(a, "alloc_at", None)
        if at is None:
            return
        sid = id(stream)
        if at[0] != sid and self.vc[sid].get(at[0], 0) < at[1]:
            raise _err("stream order", _INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE",
                       f"{what}: pool memory at {ptr:#x} allocated on another stream is used "
                       f"on this one with no event or host wait after its allocation")
        a.uses[sid] = self.ops[sid]

    def _freed_after_uses(self, buf, stream):
        """A stream-ordered free on ``stream`` (None: on a stream no other waits for, after the
        host's waits) must be ordered after every use of the buffer on other streams, or the
        pool may hand the memory out while they still run.  Caller holds _lock."""
        vc = self.host_vc if stream is None else self.vc[id(stream)]
        for sid, pos in buf.uses.items():
            if (stream is None or sid != id(stream)) and vc.get(sid, 0) < pos:
                raise _err("stream order", _INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE",
                           f"pool memory at {buf._ptr:#x} freed with no event or host wait after "
                           f"its use on another stream")

    def _do(self, stream, fn, sync=False, ptrs=(), freed=None):
        """Run ``fn`` in stream order: now in call order; reordered, queued on ``stream`` (None:
        the legacy stream, which waits for everything queued first), or with ``sync`` (a
        call that returns once done) after the stream's earlier work.  ``ptrs``: (device
        address, label) it uses, each checked to be ordered after its pool allocation;
        ``freed``: the pool buffer it frees, checked to be ordered after its uses.
        Caller holds _lock."""
        if stream is not None:
            self._tick(stream)
            if freed is not None:
                self._freed_after_uses(freed, stream)
            for ptr, label in ptrs:
                self._use(stream, ptr, label)
            if sync:            # the call returns once done: the host has waited for it
                self._join(self.host_vc, self.vc[id(stream)])
        order = self.order
        if order is None:
            fn()
        elif stream is None:
            order.flush_all()
            fn()
        elif sync:
            order.flush(*order.tail(id(stream)))
            fn()
        else:
            order.enqueue(id(stream), fn)

    def _pinned(self, ptr, nbytes):
        """Whether host [ptr, +nbytes) is page-locked (a pinned buffer or a registered range):
        the DMA then reads or writes it when the copy runs, not when it is called."""
        if self._find(ptr, nbytes, ("pinned",)) is not None:
            return True
        return any(lo <= ptr and ptr + nbytes <= hi for lo, hi in self.registered.values())

    def _host_live(self, call, ptr, nbytes):
        if not self._pinned(ptr, nbytes):
            raise _err(call, _ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
                       f"host [{ptr:#x}, +{nbytes}) was unpinned or freed before the copy ran")

    def copy_htod(self, dst, src, nbytes, stream):
        d = self._dev("cuMemcpyHtoDAsync", dst, nbytes, stream)
        h = self._host("cuMemcpyHtoDAsync", src, nbytes)
        with self._lock:
            if self.order is not None and stream is not None and self._pinned(h, nbytes):
                def run():              # the DMA reads the page-locked source when it runs
                    self._host_live("cuMemcpyHtoDAsync", h, nbytes)
                    self._dev("cuMemcpyHtoDAsync", d, nbytes)
                    ctypes.memmove(d, h, nbytes)
            else:                       # pageable: read at the call, written in stream order
                data = ctypes.string_at(h, nbytes) if self.order is not None else None

                def run():
                    self._dev("cuMemcpyHtoDAsync", d, nbytes)
                    ctypes.memmove(d, h if data is None else data, nbytes)
            self._do(stream, run, ptrs=((d, "cuMemcpyHtoDAsync"),))

    def copy_dtoh(self, dst, src, nbytes, stream):
        s = self._dev("cuMemcpyDtoHAsync", src, nbytes, stream)
        h = self._host("cuMemcpyDtoHAsync", dst, nbytes)
        with self._lock:
            pinned = self._pinned(h, nbytes)

            def run():
                if pinned:
                    self._host_live("cuMemcpyDtoHAsync", h, nbytes)
                self._dev("cuMemcpyDtoHAsync", s, nbytes)
                ctypes.memmove(h, s, nbytes)
            # into pageable memory the call returns once the copy is done
            self._do(stream, run, sync=not pinned, ptrs=((s, "cuMemcpyDtoHAsync"),))

    def copy_dtod(self, dst, src, nbytes, stream):
        d = self._dev("cuMemcpyDtoDAsync", dst, nbytes, stream)
        s = self._dev("cuMemcpyDtoDAsync", src, nbytes, stream)

        def run():
            ctypes.memmove(self._dev("cuMemcpyDtoDAsync", d, nbytes),
                           self._dev("cuMemcpyDtoDAsync", s, nbytes), nbytes)
        with self._lock:
            self._do(stream, run, ptrs=((d, "cuMemcpyDtoDAsync"), (s, "cuMemcpyDtoDAsync")))

    def memset_d8(self, ptr, value, nbytes, stream):
        p = self._dev("cuMemsetD8Async", ptr, nbytes, stream)
        with self._lock:
            self._do(stream, lambda: ctypes.memset(self._dev("cuMemsetD8Async", p, nbytes),
                                                   value & 0xFF, nbytes),
                     ptrs=((p, "cuMemsetD8Async"),))

    def memset_d32(self, ptr, value, count, stream):
        p = self._dev("cuMemsetD32Async", ptr, 4 * count, stream)

        def run():
            q = self._dev("cuMemsetD32Async", p, 4 * count)
            np.ctypeslib.as_array((ctypes.c_uint32 * count).from_address(q))[:] = value & 0xFFFFFFFF
        with self._lock:
            self._do(stream, run, ptrs=((p, "cuMemsetD32Async"),))

    @contextlib.contextmanager
    def reordered(self, seed, p=0.25, mix=0.5):
        """Streams run out of order inside the block (``_Reorder``); everything queued runs at
        its end.  Yields the ``_Reorder`` (``ran``, ``out_of_order``: evidence that it did)."""
        with self._lock:
            if self.order is not None:
                raise RuntimeError("reordered() does not nest")
            self.order = _Reorder(seed, p, mix)
            order = self.order
        try:
            yield order
        finally:
            with self._lock:
                try:
                    order.flush_all()
                finally:
                    self.order = None

    # ---------------------------------------------------------------- cuzk._cuda_ntt
    def install(self, monkeypatch, states=None, module="cuzk._cuda_ntt"):
        """Point ``module`` (cuzk._cuda_ntt or cuzk._cuda_msm) at this driver for the current
        test (monkeypatch restores it).

        ``states``: the dict to use as the module's per-device state cache (keep one per
        FakeDriver across tests to reuse twiddle tables); a fresh one when None.
        """
        import importlib
        m = importlib.import_module(module)
        monkeypatch.setattr(m, "_driver", lambda: self)
        kernels = importlib.import_module("cuzk._kernels")     # DeviceState loads modules there
        monkeypatch.setattr(kernels, "get_module",
                            lambda device, name, extra_options=(): self.Module(device))
        if hasattr(m, "_states"):
            monkeypatch.setattr(m, "_states", {} if states is None else states)
        return m
