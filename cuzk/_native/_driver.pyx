# cython: language_level=3
"""Thin nogil layer over the CUDA driver API (``cuda.bindings.cydriver``).

Nothing here links libcuda: cuda-bindings loads the driver on the first call,
so importing this module works on a machine without a GPU (``probe()`` then
returns ``(False, reason)``).

Threading contract: every driver call runs with the GIL released; every object
remembers the context it was created in and makes it current on the calling
thread before its driver calls, so any Python thread may use any object.  The
only shared mutable state is the ``Device.get`` memo (guarded by a lock).

Lifetimes: every owner of a GPU resource has ``close()`` and is a context
manager; ``__dealloc__`` releases what was not closed, silently, and does
nothing once the interpreter has started to exit (the driver tears the
process's resources down itself).
"""

cimport cython
from cpython.buffer cimport (
    PyObject_GetBuffer, PyBuffer_Release, PyBUF_ANY_CONTIGUOUS, PyBUF_WRITABLE, PyBUF_FORMAT,
    PyBUF_ND, PyBUF_STRIDES,
)
from libc.stdint cimport uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, uint64_t, int64_t, uintptr_t
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memset
from cuda.bindings cimport cydriver

import atexit
import operator
import threading

from cuzk._errors import CudaError

__all__ = [
    "probe", "device_count", "driver_version",
    "Device", "Stream", "Event", "MemPool", "DeviceBuffer", "PinnedBuffer", "HostRegistration",
    "register_host", "copy_htod", "copy_dtoh", "copy_dtod", "memset_d8", "memset_d32",
    "Module", "Function", "LaunchArgs",
]

cdef enum:
    _JIT_LOG_BYTES = 16384
cdef size_t _SIZE_MAX = <size_t>-1
cdef char* _FORMAT_B = b"B"

# Set once by atexit (before module teardown): __dealloc__ then releases nothing.
cdef bint _exiting = False


def _mark_exiting():
    global _exiting
    _exiting = True


atexit.register(_mark_exiting)


# --------------------------------------------------------------------------- errors

cdef object _result_name(cydriver.CUresult err):
    cdef const char* s = NULL
    try:
        if cydriver.cuGetErrorName(err, &s) == cydriver.CUDA_SUCCESS and s != NULL:
            return s.decode("utf-8", "replace")
    except Exception:
        pass
    return ""


cdef object _result_message(cydriver.CUresult err):
    cdef const char* s = NULL
    try:
        if cydriver.cuGetErrorString(err, &s) == cydriver.CUDA_SUCCESS and s != NULL:
            return s.decode("utf-8", "replace")
    except Exception:
        pass
    return ""


cdef object _error(cydriver.CUresult err, const char* call, str extra=""):
    msg = _result_message(err)
    if extra:
        msg = (msg + "\n" + extra) if msg else extra
    return CudaError(call.decode("utf-8", "replace"), <int>err, _result_name(err), msg)


cdef int check(cydriver.CUresult err, const char* call) except? -1 nogil:
    """Return 0 on CUDA_SUCCESS; otherwise take the GIL and raise CudaError(call, ...)."""
    if err == cydriver.CUDA_SUCCESS:
        return 0
    with gil:
        raise _error(err, call)


cdef int set_context(cydriver.CUcontext ctx) except? -1 nogil:
    """Make ``ctx`` current on the calling thread (thread-local; ~tens of ns)."""
    return check(cydriver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")


cdef int stream_handle(object stream, cydriver.CUstream* out) except -1:
    """Stream object -> its handle; None -> the legacy default stream; int -> raw handle."""
    if isinstance(stream, Stream):
        if (<Stream>stream)._h == NULL:
            raise ValueError("stream is closed")
        out[0] = (<Stream>stream)._h
    elif stream is None:
        out[0] = NULL
    elif isinstance(stream, int):
        out[0] = <cydriver.CUstream><uintptr_t>stream
    else:
        raise TypeError(f"expected a Stream, an int handle or None, got {type(stream).__name__}")
    return 0


cdef int device_ptr(object obj, cydriver.CUdeviceptr* out, size_t* capacity) except -1:
    """DeviceBuffer -> (ptr, nbytes); int -> (int, unbounded)."""
    if isinstance(obj, DeviceBuffer):
        if (<DeviceBuffer>obj)._ptr == 0:
            raise ValueError("device buffer was freed")
        out[0] = (<DeviceBuffer>obj)._ptr
        capacity[0] = (<DeviceBuffer>obj)._nbytes
    elif isinstance(obj, int) and not isinstance(obj, bool):
        out[0] = <cydriver.CUdeviceptr><uint64_t>obj
        capacity[0] = _SIZE_MAX
    else:
        raise TypeError(f"expected a DeviceBuffer or an int device pointer, got {type(obj).__name__}")
    return 0


cdef int _ctx_of(object stream, object buf, cydriver.CUcontext* out) except -1:
    """The context to make current for a copy: the stream's, else the buffer's, else none."""
    if isinstance(stream, Stream):
        out[0] = (<Stream>stream)._ctx
    elif isinstance(buf, DeviceBuffer):
        out[0] = (<DeviceBuffer>buf)._ctx
    else:
        out[0] = NULL
    return 0


# --------------------------------------------------------------------------- lifetimes
#
# The owners of a driver handle share close() / __dealloc__: claim the handle
# under the GIL (a second close() sees NULL), then destroy it with the GIL
# released in the context it was created in.  Each owner keeps its typed field
# and passes its address and a wrapper of its destroy call.

# A destroy call, taking the handle as void*; it may raise like the cydriver calls.
ctypedef cydriver.CUresult (*_destroy_fn)(void* h) except ?cydriver.CUDA_ERROR_NOT_FOUND nogil

ctypedef void* _hostptr_t    # (a fused type takes no bare void*)

ctypedef fused _handle_t:
    cydriver.CUstream
    cydriver.CUevent
    cydriver.CUmodule
    cydriver.CUmemoryPool
    _hostptr_t


cdef cydriver.CUresult _stream_destroy(void* h) except ?cydriver.CUDA_ERROR_NOT_FOUND nogil:
    return cydriver.cuStreamDestroy(<cydriver.CUstream>h)


cdef cydriver.CUresult _event_destroy(void* h) except ?cydriver.CUDA_ERROR_NOT_FOUND nogil:
    return cydriver.cuEventDestroy(<cydriver.CUevent>h)


cdef cydriver.CUresult _module_unload(void* h) except ?cydriver.CUDA_ERROR_NOT_FOUND nogil:
    return cydriver.cuModuleUnload(<cydriver.CUmodule>h)


cdef cydriver.CUresult _pool_destroy(void* h) except ?cydriver.CUDA_ERROR_NOT_FOUND nogil:
    return cydriver.cuMemPoolDestroy(<cydriver.CUmemoryPool>h)


cdef cydriver.CUresult _host_free(void* h) except ?cydriver.CUDA_ERROR_NOT_FOUND nogil:
    return cydriver.cuMemFreeHost(h)


cdef cydriver.CUresult _host_unregister(void* h) except ?cydriver.CUDA_ERROR_NOT_FOUND nogil:
    return cydriver.cuMemHostUnregister(h)


cdef int _destroy(void* h, cydriver.CUcontext ctx, _destroy_fn destroy, const char* call) except -1:
    """Make ``ctx`` current and destroy ``h`` (GIL released); failures raise CudaError(call, ...)."""
    with nogil:
        set_context(ctx)
        check(destroy(h), call)
    return 0


cdef void _destroy_quietly(void* h, cydriver.CUcontext ctx, _destroy_fn destroy) noexcept:
    """``_destroy`` for __dealloc__: never raises, skips the call if ``ctx`` cannot be made
    current, and does nothing once the interpreter has started to exit."""
    if _exiting:
        return
    try:
        with nogil:
            if cydriver.cuCtxSetCurrent(ctx) == cydriver.CUDA_SUCCESS:
                destroy(h)
    except BaseException:
        pass


cdef int _close(_handle_t* slot, cydriver.CUcontext ctx, _destroy_fn destroy, const char* call) except -1:
    """close(): claim ``slot[0]`` (nothing to do when NULL) and ``_destroy`` it."""
    cdef _handle_t h = slot[0]
    if h == NULL:
        return 0
    slot[0] = NULL
    return _destroy(<void*>h, ctx, destroy, call)


cdef void _close_quietly(_handle_t* slot, cydriver.CUcontext ctx, _destroy_fn destroy) noexcept:
    """__dealloc__: claim ``slot[0]`` (nothing to do when NULL) and ``_destroy_quietly`` it."""
    cdef _handle_t h = slot[0]
    if h == NULL:
        return
    slot[0] = NULL
    _destroy_quietly(<void*>h, ctx, destroy)


cdef class _Closable:
    """Base of the resource owners: a context manager whose exit calls ``close()``."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# --------------------------------------------------------------------------- probing

def probe():
    """Report whether a CUDA device is usable, never raising.

    Returns
    -------
    (bool, str)
        ``(True, description)`` when the driver loads, ``cuInit`` succeeds and
        at least one device exists; otherwise ``(False, reason)``.
    """
    cdef cydriver.CUresult err
    cdef int n = 0
    cdef int ver = 0
    cdef char name[256]
    cdef cydriver.CUdevice dev
    try:
        with nogil:
            err = cydriver.cuInit(0)
    except Exception as e:
        return False, f"CUDA driver library (libcuda) cannot be loaded: {type(e).__name__}: {e}"
    try:
        if err != cydriver.CUDA_SUCCESS:
            return False, f"cuInit failed: {_result_name(err) or int(err)} ({_result_message(err)})"
        with nogil:
            err = cydriver.cuDeviceGetCount(&n)
        if err != cydriver.CUDA_SUCCESS:
            return False, f"cuDeviceGetCount failed: {_result_name(err) or int(err)}"
        if n == 0:
            return False, "the CUDA driver reports no devices"
        with nogil:
            cydriver.cuDriverGetVersion(&ver)
            err = cydriver.cuDeviceGet(&dev, 0)
            if err == cydriver.CUDA_SUCCESS:
                err = cydriver.cuDeviceGetName(name, 256, dev)
        dev0 = name.decode("utf-8", "replace") if err == cydriver.CUDA_SUCCESS else "?"
        return True, f"CUDA driver {ver // 1000}.{(ver % 1000) // 10}, {n} device(s), device 0: {dev0}"
    except Exception as e:
        return False, f"CUDA probe failed: {type(e).__name__}: {e}"


def device_count():
    """Number of CUDA devices (initialises the driver).

    Raises CudaError when cuInit fails, RuntimeError when libcuda cannot be loaded.
    """
    cdef int n = 0
    with nogil:
        check(cydriver.cuInit(0), "cuInit")
        check(cydriver.cuDeviceGetCount(&n), "cuDeviceGetCount")
    return n


def driver_version():
    """The CUDA version the installed driver supports, as (major, minor)."""
    cdef int ver = 0
    with nogil:
        check(cydriver.cuDriverGetVersion(&ver), "cuDriverGetVersion")
    return ver // 1000, (ver % 1000) // 10


# --------------------------------------------------------------------------- device

_shared_lock = threading.Lock()
_shared_devices = {}


cdef int _attr(cydriver.CUdevice dev, cydriver.CUdevice_attribute a) except? -1 nogil:
    cdef int v = 0
    check(cydriver.cuDeviceGetAttribute(&v, a, dev), "cuDeviceGetAttribute")
    return v


@cython.no_gc_clear
cdef class Device(_Closable):
    """A CUDA device and a retain of its primary context.

    ``Device(ordinal)`` retains the primary context until ``close()``;
    ``Device.get(ordinal)`` returns one process-wide instance whose ``close()``
    does nothing (it lives as long as the process).
    """

    def __cinit__(self, int ordinal=0):
        cdef int n = 0
        cdef cydriver.CUdevice dev
        cdef cydriver.CUcontext ctx = NULL
        cdef char name[256]
        cdef size_t total = 0
        cdef int major, minor
        with nogil:
            check(cydriver.cuInit(0), "cuInit")
            check(cydriver.cuDeviceGetCount(&n), "cuDeviceGetCount")
        if not 0 <= ordinal < n:
            raise ValueError(f"device ordinal {ordinal} out of range: {n} device(s)")
        with nogil:
            check(cydriver.cuDeviceGet(&dev, ordinal), "cuDeviceGet")
            check(cydriver.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain")
        self.ordinal = ordinal
        self._dev = dev
        self._ctx = ctx
        with nogil:
            check(cydriver.cuDeviceGetName(name, 256, dev), "cuDeviceGetName")
            check(cydriver.cuDeviceTotalMem(&total, dev), "cuDeviceTotalMem")
            major = _attr(dev, cydriver.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
            minor = _attr(dev, cydriver.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
            self.sm_count = _attr(dev, cydriver.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            self.max_threads_per_sm = _attr(dev, cydriver.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)
            self.l2_size = _attr(dev, cydriver.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
            self.max_shared_per_block_optin = _attr(
                dev, cydriver.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            self.cooperative_launch = _attr(dev, cydriver.CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH) != 0
        self.name = name.decode("utf-8", "replace")
        self.total_mem = total
        self.cc = (major, minor)
        self.arch = f"sm_{major}{minor}"

    @staticmethod
    def get(int ordinal=0):
        """The process-wide shared Device for ``ordinal`` (created on first use)."""
        with _shared_lock:
            d = _shared_devices.get(ordinal)
            if d is None:
                d = Device(ordinal)
                (<Device>d)._shared = True
                _shared_devices[ordinal] = d
            return d

    @property
    def handle(self):
        """The CUdevice ordinal handle (int)."""
        return <int>self._dev

    @property
    def context(self):
        """The retained primary CUcontext, as an int (0 once closed)."""
        return <uintptr_t>self._ctx

    @property
    def closed(self):
        return self._ctx == NULL

    def set_current(self):
        """Make this device's primary context current on the calling thread."""
        self._check_open()
        with nogil:
            set_context(self._ctx)

    def mem_info(self):
        """(free, total) device memory in bytes (cuMemGetInfo: do not call in a hot path)."""
        cdef size_t free_b = 0, total_b = 0
        self._check_open()
        with nogil:
            set_context(self._ctx)
            check(cydriver.cuMemGetInfo(&free_b, &total_b), "cuMemGetInfo")
        return free_b, total_b

    def synchronize(self):
        """cuCtxSynchronize: waits for all work on the device (never in a hot path)."""
        self._check_open()
        with nogil:
            set_context(self._ctx)
            check(cydriver.cuCtxSynchronize(), "cuCtxSynchronize")

    def _check_open(self):
        if self._ctx == NULL:
            raise ValueError("device is closed")

    def close(self):
        """Release this instance's retain of the primary context (no-op for Device.get)."""
        cdef cydriver.CUdevice dev = self._dev
        if self._ctx == NULL or self._shared:
            return
        self._ctx = NULL
        with nogil:
            check(cydriver.cuDevicePrimaryCtxRelease(dev), "cuDevicePrimaryCtxRelease")

    def __dealloc__(self):
        if self._ctx == NULL or self._shared or _exiting:
            return
        try:
            with nogil:
                cydriver.cuDevicePrimaryCtxRelease(self._dev)
        except BaseException:
            pass
        self._ctx = NULL

    def __repr__(self):
        return f"<cuzk Device {self.ordinal}: {self.name} ({self.arch}, {self.sm_count} SMs)>"


# --------------------------------------------------------------------------- stream / event

@cython.no_gc_clear
cdef class Stream(_Closable):
    """A CUDA stream (non-blocking by default: no implicit sync with the legacy stream).

    ``priority``: lower is higher priority; the driver clamps to its range.
    ``close()`` waits for the stream's work, then destroys it.
    """

    def __cinit__(self, Device device not None, bint nonblocking=True, int priority=0):
        cdef cydriver.CUstream h = NULL
        cdef unsigned int flags = cydriver.CU_STREAM_NON_BLOCKING if nonblocking else cydriver.CU_STREAM_DEFAULT
        device._check_open()
        self.device = device
        self._ctx = device._ctx
        self.nonblocking = nonblocking
        with nogil:
            set_context(self._ctx)
            check(cydriver.cuStreamCreateWithPriority(&h, flags, priority), "cuStreamCreateWithPriority")
            check(cydriver.cuStreamGetPriority(h, &priority), "cuStreamGetPriority")
        self._h = h
        self.priority = priority

    @property
    def handle(self):
        """The CUstream, as an int."""
        return <uintptr_t>self._h

    @property
    def closed(self):
        return self._h == NULL

    def _handle_checked(self):
        if self._h == NULL:
            raise ValueError("stream is closed")

    def synchronize(self):
        """Wait (GIL released) until all work queued on the stream has finished."""
        cdef cydriver.CUstream h = self._h
        self._handle_checked()
        with nogil:
            set_context(self._ctx)
            check(cydriver.cuStreamSynchronize(h), "cuStreamSynchronize")

    def wait_event(self, Event event not None):
        """Make later work on this stream wait for ``event`` (no host wait)."""
        cdef cydriver.CUstream h = self._h
        self._handle_checked()
        if event._h == NULL:
            raise ValueError("event is closed")
        with nogil:
            set_context(self._ctx)
            check(cydriver.cuStreamWaitEvent(h, event._h, 0), "cuStreamWaitEvent")

    def query(self):
        """True when all work queued on the stream has finished."""
        cdef cydriver.CUresult err
        cdef cydriver.CUstream h = self._h
        self._handle_checked()
        with nogil:
            set_context(self._ctx)
            err = cydriver.cuStreamQuery(h)
        if err == cydriver.CUDA_ERROR_NOT_READY:
            return False
        check(err, "cuStreamQuery")
        return True

    def close(self):
        """Wait for the stream's work, then destroy it (idempotent)."""
        cdef cydriver.CUstream h = self._h
        cdef cydriver.CUresult err
        if h == NULL:
            return
        self._h = NULL
        with nogil:
            set_context(self._ctx)
            err = cydriver.cuStreamSynchronize(h)
            check(cydriver.cuStreamDestroy(h), "cuStreamDestroy")
            check(err, "cuStreamSynchronize")

    def __dealloc__(self):
        _close_quietly(&self._h, self._ctx, _stream_destroy)

    def __repr__(self):
        return f"<cuzk Stream 0x{<uintptr_t>self._h:x} on device {self.device.ordinal}>"


@cython.no_gc_clear
cdef class Event(_Closable):
    """A CUDA event; ``timing=False`` makes record/wait cheaper.

    ``blocking_sync=True`` makes ``synchronize()`` sleep instead of spin.
    """

    def __cinit__(self, Device device not None, bint timing=True, bint blocking_sync=False):
        cdef cydriver.CUevent h = NULL
        cdef unsigned int flags = 0
        device._check_open()
        if not timing:
            flags |= cydriver.CU_EVENT_DISABLE_TIMING
        if blocking_sync:
            flags |= cydriver.CU_EVENT_BLOCKING_SYNC
        self.device = device
        self._ctx = device._ctx
        self.timing = timing
        with nogil:
            set_context(self._ctx)
            check(cydriver.cuEventCreate(&h, flags), "cuEventCreate")
        self._h = h

    @property
    def handle(self):
        """The CUevent, as an int."""
        return <uintptr_t>self._h

    @property
    def closed(self):
        return self._h == NULL

    def _handle_checked(self):
        if self._h == NULL:
            raise ValueError("event is closed")

    def record(self, stream=None):
        """Record the event on ``stream`` (a Stream, an int handle, or None: legacy stream)."""
        cdef cydriver.CUstream s
        cdef cydriver.CUevent h = self._h
        self._handle_checked()
        stream_handle(stream, &s)
        with nogil:
            set_context(self._ctx)
            check(cydriver.cuEventRecord(h, s), "cuEventRecord")

    def synchronize(self):
        """Wait (GIL released) until the recorded work has completed."""
        cdef cydriver.CUevent h = self._h
        self._handle_checked()
        with nogil:
            set_context(self._ctx)
            check(cydriver.cuEventSynchronize(h), "cuEventSynchronize")

    def query(self):
        """True when the recorded work has completed (or nothing was recorded)."""
        cdef cydriver.CUresult err
        cdef cydriver.CUevent h = self._h
        self._handle_checked()
        with nogil:
            set_context(self._ctx)
            err = cydriver.cuEventQuery(h)
        if err == cydriver.CUDA_ERROR_NOT_READY:
            return False
        check(err, "cuEventQuery")
        return True

    @staticmethod
    def elapsed_ms(Event start not None, Event end not None):
        """Milliseconds between two completed, timing-enabled events."""
        cdef float ms = 0
        start._handle_checked()
        end._handle_checked()
        with nogil:
            set_context(start._ctx)
            check(cydriver.cuEventElapsedTime(&ms, start._h, end._h), "cuEventElapsedTime")
        return ms

    def close(self):
        """Destroy the event (idempotent)."""
        _close(&self._h, self._ctx, _event_destroy, "cuEventDestroy")

    def __dealloc__(self):
        _close_quietly(&self._h, self._ctx, _event_destroy)


# --------------------------------------------------------------------------- memory

@cython.no_gc_clear
cdef class MemPool(_Closable):
    """A stream-ordered memory pool of one device.

    By default the device's default pool, configured with ``release_threshold``
    (memory the pool keeps reserved across synchronizations; the default keeps
    everything until ``trim``).  ``create=True`` makes a private pool instead,
    destroyed by ``close()``.
    """

    def __cinit__(self, Device device not None, release_threshold=2**64 - 1, bint create=False):
        cdef cydriver.CUmemoryPool pool = NULL
        cdef cydriver.CUmemPoolProps props
        cdef uint64_t thr = release_threshold
        device._check_open()
        self.device = device
        self._ctx = device._ctx
        if create:
            memset(&props, 0, sizeof(props))
            props.allocType = cydriver.CU_MEM_ALLOCATION_TYPE_PINNED
            props.handleTypes = cydriver.CU_MEM_HANDLE_TYPE_NONE
            props.location.type = cydriver.CU_MEM_LOCATION_TYPE_DEVICE
            props.location.id = device.ordinal
            with nogil:
                set_context(self._ctx)
                check(cydriver.cuMemPoolCreate(&pool, &props), "cuMemPoolCreate")
            self._pool = pool
            self._owned = True
        else:
            with nogil:
                set_context(self._ctx)
                check(cydriver.cuDeviceGetDefaultMemPool(&pool, device._dev), "cuDeviceGetDefaultMemPool")
            self._pool = pool
        with nogil:
            check(cydriver.cuMemPoolSetAttribute(pool, cydriver.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr),
                  "cuMemPoolSetAttribute")

    @property
    def handle(self):
        """The CUmemoryPool, as an int."""
        return <uintptr_t>self._pool

    def _pool_checked(self):
        if self._pool == NULL:
            raise ValueError("memory pool is closed")

    def alloc(self, size_t nbytes, stream):
        """Allocate ``nbytes`` ordered on ``stream`` (cuMemAllocFromPoolAsync).

        The memory may be used by work queued on ``stream`` after this call (or
        on other streams once ordered after it by an event).  Free it with
        ``DeviceBuffer.free(stream)``; dropping the buffer frees it on the
        allocation stream.
        """
        cdef cydriver.CUdeviceptr p = 0
        cdef cydriver.CUstream s
        cdef DeviceBuffer buf
        self._pool_checked()
        if nbytes == 0:
            raise ValueError("nbytes must be positive")
        stream_handle(stream, &s)
        with nogil:
            set_context(self._ctx)
            check(cydriver.cuMemAllocFromPoolAsync(&p, nbytes, self._pool, s), "cuMemAllocFromPoolAsync")
        buf = DeviceBuffer.__new__(DeviceBuffer)
        buf._ptr = p
        buf._nbytes = nbytes
        buf._ctx = self._ctx
        buf._async = True
        buf._sh = s
        buf._stream = stream if isinstance(stream, Stream) else None
        buf.device = self.device
        buf.pool = self
        return buf

    cdef uint64_t _get(self, cydriver.CUmemPool_attribute a, const char* call) except? 0xFFFFFFFFFFFFFFFF:
        cdef uint64_t v = 0
        self._pool_checked()
        with nogil:
            set_context(self._ctx)
            check(cydriver.cuMemPoolGetAttribute(self._pool, a, &v), call)
        return v

    @property
    def used_bytes(self):
        """Bytes currently handed out by the pool."""
        return self._get(cydriver.CU_MEMPOOL_ATTR_USED_MEM_CURRENT, "cuMemPoolGetAttribute")

    @property
    def reserved_bytes(self):
        """Bytes of device memory the pool currently holds."""
        return self._get(cydriver.CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, "cuMemPoolGetAttribute")

    @property
    def release_threshold(self):
        return self._get(cydriver.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, "cuMemPoolGetAttribute")

    cdef int _get_int(self, cydriver.CUmemPool_attribute a) except? -1:
        """An int-valued pool attribute (the CU_MEMPOOL_ATTR_REUSE_* flags)."""
        cdef int v = 0
        self._pool_checked()
        with nogil:
            set_context(self._ctx)
            check(cydriver.cuMemPoolGetAttribute(self._pool, a, &v), "cuMemPoolGetAttribute")
        return v

    cdef int _set_int(self, cydriver.CUmemPool_attribute a, int v) except -1:
        self._pool_checked()
        with nogil:
            set_context(self._ctx)
            check(cydriver.cuMemPoolSetAttribute(self._pool, a, &v), "cuMemPoolSetAttribute")
        return 0

    @property
    def internal_dependencies(self):
        """Whether an allocation on one stream may take memory whose free, enqueued on another
        stream, has not run yet, by making the allocating stream wait for that free
        (CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES; the driver's default: True).  Off, an
        allocation takes completed frees or new memory and never waits on another stream."""
        return bool(self._get_int(cydriver.CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES))

    @internal_dependencies.setter
    def internal_dependencies(self, bint on):
        self._set_int(cydriver.CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, 1 if on else 0)

    def trim(self, size_t keep_bytes=0):
        """Return reserved memory above ``keep_bytes`` to the device (cuMemPoolTrimTo).

        Serializes with running work on the device: call only when idle.
        """
        self._pool_checked()
        with nogil:
            set_context(self._ctx)
            check(cydriver.cuMemPoolTrimTo(self._pool, keep_bytes), "cuMemPoolTrimTo")

    def close(self):
        """Destroy a created pool (its memory is released once every allocation is freed);
        for the default pool only forgets it."""
        if self._owned:
            _close(&self._pool, self._ctx, _pool_destroy, "cuMemPoolDestroy")
        else:
            self._pool = NULL

    def __dealloc__(self):
        if self._owned:
            _close_quietly(&self._pool, self._ctx, _pool_destroy)


@cython.no_gc_clear
cdef class DeviceBuffer(_Closable):
    """Device memory: from a MemPool (stream-ordered) or ``DeviceBuffer.alloc`` (cuMemAlloc).

    ``ptr`` raises ValueError once freed.  Freeing is idempotent and thread-safe.
    """

    def __cinit__(self):
        self._ptr = 0
        self._stream = None

    @staticmethod
    def alloc(Device device not None, size_t nbytes):
        """A plain cuMemAlloc buffer (for memory allocated once and kept)."""
        cdef cydriver.CUdeviceptr p = 0
        cdef DeviceBuffer buf
        device._check_open()
        if nbytes == 0:
            raise ValueError("nbytes must be positive")
        with nogil:
            set_context(device._ctx)
            check(cydriver.cuMemAlloc(&p, nbytes), "cuMemAlloc")
        buf = DeviceBuffer.__new__(DeviceBuffer)
        buf._ptr = p
        buf._nbytes = nbytes
        buf._ctx = device._ctx
        buf._async = False
        buf.device = device
        return buf

    @property
    def ptr(self):
        """The device address (int)."""
        if self._ptr == 0:
            raise ValueError("device buffer was freed")
        return <uint64_t>self._ptr

    @property
    def nbytes(self):
        return self._nbytes

    @property
    def closed(self):
        return self._ptr == 0

    def __len__(self):
        return self._nbytes

    cdef int _release(self, object stream) except -1:
        cdef cydriver.CUdeviceptr p = self._ptr
        cdef cydriver.CUstream s = self._sh
        cdef bint sync = not self._async
        cdef bint wait = False
        if p == 0:
            return 0
        # Claim the pointer under the GIL first: a second free() sees 0.
        self._ptr = 0
        if not sync:
            if stream is not None:
                stream_handle(stream, &s)
            elif self._stream is not None and (<Stream>self._stream)._h == NULL:
                # Allocation stream closed (close() synchronized it): free now, stream-ordered
                # on this thread's default stream and waited for (cuMemFree's ordering).
                # cuMemFree itself returns pool memory without lowering the pool's
                # USED_MEM_CURRENT on the H200's driver (bench/RESULTS.md, session 14).
                s = <cydriver.CUstream>cydriver.CU_STREAM_PER_THREAD
                wait = True
        self._stream = None
        with nogil:
            set_context(self._ctx)
            if sync:
                check(cydriver.cuMemFree(p), "cuMemFree")
            else:
                check(cydriver.cuMemFreeAsync(p, s), "cuMemFreeAsync")
                if wait:
                    check(cydriver.cuStreamSynchronize(s), "cuStreamSynchronize")
        return 0

    def free(self, stream=None):
        """Free the memory (idempotent).

        Pool buffers are freed with cuMemFreeAsync on ``stream`` (default: the
        allocation stream; pass 0 for the legacy stream); others with cuMemFree.
        """
        self._release(stream)

    def close(self):
        """Same as ``free()`` on the allocation stream."""
        self._release(None)

    def __dealloc__(self):
        if self._ptr == 0 or _exiting:
            return
        try:
            self._release(None)
        except BaseException:
            pass

    def __repr__(self):
        return f"<cuzk DeviceBuffer 0x{<uint64_t>self._ptr:x}, {self._nbytes} bytes>"


@cython.no_gc_clear
cdef class PinnedBuffer(_Closable):
    """Page-locked, portable host memory (cuMemHostAlloc), exposing the buffer protocol.

    ``asarray(dtype, shape)`` gives a NumPy view (which keeps the buffer alive);
    ``close()`` refuses while views exist.
    """

    def __cinit__(self, size_t nbytes, Device device=None):
        cdef void* p = NULL
        if nbytes == 0:
            raise ValueError("nbytes must be positive")
        if device is None:
            device = Device.get(0)
        device._check_open()
        self.device = device
        self._ctx = device._ctx
        with nogil:
            set_context(self._ctx)
            check(cydriver.cuMemHostAlloc(&p, nbytes, cydriver.CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc")
        self._p = p
        self._nbytes = nbytes
        self._shape[0] = <Py_ssize_t>nbytes
        self._strides[0] = 1

    @property
    def ptr(self):
        """The host address (int)."""
        if self._p == NULL:
            raise ValueError("pinned buffer is closed")
        return <uintptr_t>self._p

    @property
    def nbytes(self):
        return self._nbytes

    @property
    def closed(self):
        return self._p == NULL

    def __len__(self):
        return self._nbytes

    def __getbuffer__(self, Py_buffer* view, int flags):
        if self._p == NULL:
            raise BufferError("pinned buffer is closed")
        view.buf = self._p
        view.obj = self
        view.len = <Py_ssize_t>self._nbytes
        view.readonly = 0
        view.itemsize = 1
        view.format = NULL
        if flags & PyBUF_FORMAT:
            view.format = _FORMAT_B
        view.ndim = 1
        view.shape = NULL
        view.strides = NULL
        if (flags & PyBUF_ND) == PyBUF_ND:
            view.shape = self._shape
        if (flags & PyBUF_STRIDES) == PyBUF_STRIDES:
            view.strides = self._strides
        view.suboffsets = NULL
        view.internal = NULL
        self._exports += 1

    def __releasebuffer__(self, Py_buffer* view):
        self._exports -= 1

    def asarray(self, dtype="uint8", shape=None):
        """A NumPy array viewing the buffer (C order); ``shape`` defaults to 1-D."""
        import numpy as np
        if self._p == NULL:
            raise ValueError("pinned buffer is closed")
        dt = np.dtype(dtype)
        if self._nbytes % dt.itemsize:
            raise ValueError(f"{self._nbytes} bytes is not a multiple of {dt} itemsize {dt.itemsize}")
        a = np.frombuffer(self, dtype=dt)
        if shape is not None:
            a = a.reshape(shape)
        return a

    def close(self):
        """Free the memory (idempotent); BufferError while NumPy views exist."""
        if self._p != NULL and self._exports:
            raise BufferError(f"pinned buffer has {self._exports} live view(s)")
        _close(&self._p, self._ctx, _host_free, "cuMemFreeHost")

    def __dealloc__(self):
        _close_quietly(&self._p, self._ctx, _host_free)


@cython.no_gc_clear
cdef class HostRegistration(_Closable):
    """Page-locks an existing contiguous host buffer (cuMemHostRegister, portable)
    until ``close()``/context exit; holds the buffer (and so the array) meanwhile."""

    cdef Py_buffer _view
    cdef bint _held
    cdef bint _registered
    cdef cydriver.CUcontext _ctx
    cdef readonly Device device

    def __cinit__(self, obj, Device device=None):
        if device is None:
            device = Device.get(0)
        device._check_open()
        self.device = device
        self._ctx = device._ctx
        PyObject_GetBuffer(obj, &self._view, PyBUF_ANY_CONTIGUOUS)
        self._held = True
        if self._view.len > 0:
            with nogil:
                set_context(self._ctx)
                check(cydriver.cuMemHostRegister(self._view.buf, <size_t>self._view.len,
                                                 cydriver.CU_MEMHOSTREGISTER_PORTABLE),
                      "cuMemHostRegister")
            self._registered = True

    @property
    def ptr(self):
        return <uintptr_t>self._view.buf if self._held else 0

    @property
    def nbytes(self):
        return self._view.len if self._held else 0

    def close(self):
        """Unregister and release the buffer (idempotent)."""
        if not self._held:
            return
        try:
            if self._registered:
                self._registered = False
                _destroy(self._view.buf, self._ctx, _host_unregister, "cuMemHostUnregister")
        finally:
            self._held = False
            PyBuffer_Release(&self._view)

    def __dealloc__(self):
        if not self._held:
            return
        if self._registered:
            _destroy_quietly(self._view.buf, self._ctx, _host_unregister)
        self._held = False
        PyBuffer_Release(&self._view)


def register_host(obj, Device device=None):
    """Page-lock an existing C- or F-contiguous buffer (e.g. a NumPy array).

    Returns a HostRegistration; use it as a context manager or call close().
    """
    return HostRegistration(obj, device)


# --------------------------------------------------------------------------- copies

cdef int _host_ptr(object obj, bint writable, Py_buffer* view, void** out, size_t* cap) except -1:
    """int -> (pointer, unbounded), returns 0; buffer -> fills ``view``, returns 1."""
    if isinstance(obj, int) and not isinstance(obj, bool):
        out[0] = <void*><uintptr_t>obj
        cap[0] = _SIZE_MAX
        return 0
    PyObject_GetBuffer(obj, view, PyBUF_ANY_CONTIGUOUS | (PyBUF_WRITABLE if writable else 0))
    out[0] = view.buf
    cap[0] = <size_t>view.len
    return 1


cdef int _fits(size_t nbytes, size_t cap, str what) except -1:
    if nbytes > cap:
        raise ValueError(f"{nbytes} bytes do not fit in {what} of {cap} bytes")
    return 0


def copy_htod(dst, src, size_t nbytes, stream):
    """Copy ``nbytes`` host -> device on ``stream`` (GIL released).

    ``dst``: DeviceBuffer or int device pointer; ``src``: int host pointer or a
    contiguous buffer (NumPy array, PinnedBuffer).  From pinned memory the copy
    is asynchronous: keep ``src`` alive until the stream reaches it.
    """
    cdef cydriver.CUdeviceptr d
    cdef size_t dcap, scap
    cdef void* s
    cdef Py_buffer view
    cdef cydriver.CUstream h
    cdef cydriver.CUcontext ctx
    cdef int held
    device_ptr(dst, &d, &dcap)
    _fits(nbytes, dcap, "the destination")
    stream_handle(stream, &h)
    _ctx_of(stream, dst, &ctx)
    held = _host_ptr(src, False, &view, &s, &scap)
    try:
        _fits(nbytes, scap, "the source")
        with nogil:
            if ctx != NULL:
                set_context(ctx)
            check(cydriver.cuMemcpyHtoDAsync(d, s, nbytes, h), "cuMemcpyHtoDAsync")
    finally:
        if held:
            PyBuffer_Release(&view)


def copy_dtoh(dst, src, size_t nbytes, stream):
    """Copy ``nbytes`` device -> host on ``stream`` (GIL released).

    ``dst``: int host pointer or a writable contiguous buffer; ``src``:
    DeviceBuffer or int device pointer.  Into pinned memory the copy is
    asynchronous: synchronize the stream before reading ``dst``.
    """
    cdef cydriver.CUdeviceptr s
    cdef size_t dcap, scap
    cdef void* d
    cdef Py_buffer view
    cdef cydriver.CUstream h
    cdef cydriver.CUcontext ctx
    cdef int held
    device_ptr(src, &s, &scap)
    _fits(nbytes, scap, "the source")
    stream_handle(stream, &h)
    _ctx_of(stream, src, &ctx)
    held = _host_ptr(dst, True, &view, &d, &dcap)
    try:
        _fits(nbytes, dcap, "the destination")
        with nogil:
            if ctx != NULL:
                set_context(ctx)
            check(cydriver.cuMemcpyDtoHAsync(d, s, nbytes, h), "cuMemcpyDtoHAsync")
    finally:
        if held:
            PyBuffer_Release(&view)


def copy_dtod(dst, src, size_t nbytes, stream):
    """Copy ``nbytes`` device -> device on ``stream``."""
    cdef cydriver.CUdeviceptr d, s
    cdef size_t dcap, scap
    cdef cydriver.CUstream h
    cdef cydriver.CUcontext ctx
    device_ptr(dst, &d, &dcap)
    device_ptr(src, &s, &scap)
    _fits(nbytes, dcap, "the destination")
    _fits(nbytes, scap, "the source")
    stream_handle(stream, &h)
    _ctx_of(stream, dst, &ctx)
    with nogil:
        if ctx != NULL:
            set_context(ctx)
        check(cydriver.cuMemcpyDtoDAsync(d, s, nbytes, h), "cuMemcpyDtoDAsync")


def memset_d8(ptr, unsigned char value, size_t nbytes, stream):
    """Set ``nbytes`` bytes at ``ptr`` to ``value`` on ``stream``."""
    cdef cydriver.CUdeviceptr d
    cdef size_t cap
    cdef cydriver.CUstream h
    cdef cydriver.CUcontext ctx
    device_ptr(ptr, &d, &cap)
    _fits(nbytes, cap, "the destination")
    stream_handle(stream, &h)
    _ctx_of(stream, ptr, &ctx)
    with nogil:
        if ctx != NULL:
            set_context(ctx)
        check(cydriver.cuMemsetD8Async(d, value, nbytes, h), "cuMemsetD8Async")


def memset_d32(ptr, unsigned int value, size_t count, stream):
    """Set ``count`` 32-bit words at ``ptr`` (4-byte aligned) to ``value`` on ``stream``."""
    cdef cydriver.CUdeviceptr d
    cdef size_t cap
    cdef cydriver.CUstream h
    cdef cydriver.CUcontext ctx
    device_ptr(ptr, &d, &cap)
    if count > cap // 4:
        raise ValueError(f"{count} words do not fit in the destination of {cap} bytes")
    stream_handle(stream, &h)
    _ctx_of(stream, ptr, &ctx)
    with nogil:
        if ctx != NULL:
            set_context(ctx)
        check(cydriver.cuMemsetD32Async(d, value, count, h), "cuMemsetD32Async")


# --------------------------------------------------------------------------- modules

@cython.no_gc_clear
cdef class Module(_Closable):
    """A loaded CUBIN/PTX image (``Module.load``); ``function(name)`` is memoized."""

    def __cinit__(self):
        self._m = NULL
        self._functions = {}

    @staticmethod
    def load(Device device not None, image):
        """Load a CUBIN, fatbin or PTX image into ``device``'s primary context.

        Raises CudaError (with the JIT error log for PTX) when the driver refuses it.
        """
        cdef bytes data = bytes(image)
        cdef Module mod
        cdef cydriver.CUmodule m = NULL
        cdef cydriver.CUresult err
        cdef char* errlog
        cdef cydriver.CUjit_option opts[2]
        cdef void* vals[2]
        cdef const char* p
        device._check_open()
        if not data:
            raise ValueError("empty module image")
        if not (data.startswith(b"\x7fELF") or data.startswith(b"\x50\xed\x55\xba")
                or data.startswith(b"\xb1\x43\x62\x46")):
            # PTX text must be NUL-terminated.
            if not data.endswith(b"\0"):
                data = data + b"\0"
        p = data
        errlog = <char*>malloc(_JIT_LOG_BYTES)
        if errlog == NULL:
            raise MemoryError()
        try:
            errlog[0] = 0
            opts[0] = cydriver.CU_JIT_ERROR_LOG_BUFFER
            vals[0] = errlog
            opts[1] = cydriver.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
            vals[1] = <void*><uintptr_t>_JIT_LOG_BYTES
            with nogil:
                set_context(device._ctx)
                err = cydriver.cuModuleLoadDataEx(&m, p, 2, opts, vals)
            if err != cydriver.CUDA_SUCCESS:
                errlog[_JIT_LOG_BYTES - 1] = 0
                raise _error(err, "cuModuleLoadDataEx", errlog.decode("utf-8", "replace").strip())
        finally:
            free(errlog)
        mod = Module.__new__(Module)
        mod._m = m
        mod._ctx = device._ctx
        mod.device = device
        return mod

    @property
    def handle(self):
        """The CUmodule, as an int."""
        return <uintptr_t>self._m

    @property
    def closed(self):
        return self._m == NULL

    def _module_checked(self):
        if self._m == NULL:
            raise ValueError("module is closed")

    def function(self, str name not None):
        """The kernel ``name`` (an extern "C" symbol or a mangled name); memoized."""
        cdef cydriver.CUfunction f = NULL
        cdef Function fn
        cdef bytes bname
        cdef const char* cname
        found = self._functions.get(name)
        if found is not None:
            return found
        self._module_checked()
        bname = name.encode()
        cname = bname
        with nogil:
            set_context(self._ctx)
            check(cydriver.cuModuleGetFunction(&f, self._m, cname), "cuModuleGetFunction")
        fn = Function.__new__(Function)
        fn._f = f
        fn._ctx = self._ctx
        fn.module = self
        fn.name = name
        return self._functions.setdefault(name, fn)

    def functions(self):
        """The kernels fetched from this module so far (``function``'s memo), in fetch order."""
        return list(self._functions.values())

    def max_local_size_bytes(self):
        """The largest local memory per thread (stack frame and spills) of any kernel in the
        module (cuModuleEnumerateFunctions): what the driver's local memory grows to, per resident
        thread, once that kernel launches (it is not shrunk)."""
        cdef unsigned int count = 0, i
        cdef cydriver.CUfunction* fs
        cdef int v, best = 0
        self._module_checked()
        with nogil:
            set_context(self._ctx)
            check(cydriver.cuModuleGetFunctionCount(&count, self._m), "cuModuleGetFunctionCount")
        if count == 0:
            return 0
        fs = <cydriver.CUfunction*>malloc(count * sizeof(cydriver.CUfunction))
        if fs == NULL:
            raise MemoryError()
        try:
            with nogil:
                check(cydriver.cuModuleEnumerateFunctions(fs, count, self._m), "cuModuleEnumerateFunctions")
                for i in range(count):
                    v = 0
                    check(cydriver.cuFuncGetAttribute(&v, cydriver.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, fs[i]),
                          "cuFuncGetAttribute")
                    if v > best:
                        best = v
        finally:
            free(fs)
        return best

    def global_ptr(self, str name not None):
        """(device address, size in bytes) of the ``__device__`` variable ``name``."""
        cdef cydriver.CUdeviceptr p = 0
        cdef size_t size = 0
        cdef bytes bname = name.encode()
        cdef const char* cname = bname
        self._module_checked()
        with nogil:
            set_context(self._ctx)
            check(cydriver.cuModuleGetGlobal(&p, &size, self._m, cname), "cuModuleGetGlobal")
        return <uint64_t>p, size

    def close(self):
        """Unload the module (idempotent); its Functions can no longer launch."""
        _close(&self._m, self._ctx, _module_unload, "cuModuleUnload")

    def __dealloc__(self):
        _close_quietly(&self._m, self._ctx, _module_unload)


cdef int _dims(object d, unsigned int* out, str what) except -1:
    cdef Py_ssize_t i
    out[0] = out[1] = out[2] = 1
    try:
        t = (operator.index(d),) if hasattr(d, "__index__") else tuple(d)
    except TypeError:
        raise TypeError(f"{what} must be an int or a tuple of 1 to 3 ints, got {d!r}") from None
    if not 1 <= len(t) <= 3:
        raise ValueError(f"{what} must be an int or a tuple of 1 to 3 ints, got {d!r}")
    for i in range(len(t)):
        x = t[i]
        try:
            x = operator.index(x) if not isinstance(x, bool) else None
        except TypeError:
            x = None
        if x is None or not 1 <= x <= 0xFFFFFFFF:
            raise ValueError(f"{what}[{i}] must be an int in [1, 2**32), got {t[i]!r}")
        out[i] = <unsigned int>x
    return 0


cdef class Function:
    """A kernel in a loaded Module."""

    @property
    def handle(self):
        """The CUfunction, as an int."""
        return <uintptr_t>self._f

    cdef int _get(self, cydriver.CUfunction_attribute a) except? -1:
        cdef int v = 0
        with nogil:
            set_context(self._ctx)
            check(cydriver.cuFuncGetAttribute(&v, a, self._f), "cuFuncGetAttribute")
        return v

    @property
    def max_threads_per_block(self):
        return self._get(cydriver.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)

    @property
    def num_regs(self):
        return self._get(cydriver.CU_FUNC_ATTRIBUTE_NUM_REGS)

    @property
    def local_size_bytes(self):
        """Local memory per thread (the stack frame and spills): the driver keeps this times the
        device's resident threads (SMs × threads per SM) reserved once a launch needed it."""
        return self._get(cydriver.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)

    @property
    def shared_size_bytes(self):
        """Static shared memory per block."""
        return self._get(cydriver.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)

    @property
    def max_dynamic_shared(self):
        return self._get(cydriver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)

    def set_max_dynamic_shared(self, int nbytes):
        """Allow launches with up to ``nbytes`` of dynamic shared memory (opt-in above 48 KiB)."""
        with nogil:
            set_context(self._ctx)
            check(cydriver.cuFuncSetAttribute(self._f, cydriver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                              nbytes), "cuFuncSetAttribute")

    def occupancy(self, int block, size_t shmem=0):
        """Resident blocks per SM for ``block`` threads and ``shmem`` dynamic shared bytes."""
        cdef int n = 0
        with nogil:
            set_context(self._ctx)
            check(cydriver.cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, self._f, block, shmem),
                  "cuOccupancyMaxActiveBlocksPerMultiprocessor")
        return n

    def launch(self, stream, grid, block, args=(), unsigned int shmem=0, bint cooperative=False):
        """Queue the kernel on ``stream`` (GIL released).

        ``grid``/``block``: int or tuple of 1–3 ints.  ``args``: a LaunchArgs or a
        sequence of ``(fmt, value)`` pairs / plain values (see LaunchArgs).
        ``cooperative=True`` uses cuLaunchCooperativeKernel (grid must be co-resident).
        """
        cdef unsigned int g[3]
        cdef unsigned int b[3]
        cdef cydriver.CUstream s
        cdef LaunchArgs la
        cdef cydriver.CUresult err
        _dims(grid, g, "grid")
        _dims(block, b, "block")
        stream_handle(stream, &s)
        la = args if isinstance(args, LaunchArgs) else LaunchArgs(args)
        if self.module._m == NULL:
            raise ValueError("module is closed")
        with nogil:
            set_context(self._ctx)
            if cooperative:
                check(cydriver.cuLaunchCooperativeKernel(self._f, g[0], g[1], g[2], b[0], b[1], b[2],
                                                         shmem, s, la._params), "cuLaunchCooperativeKernel")
            else:
                check(cydriver.cuLaunchKernel(self._f, g[0], g[1], g[2], b[0], b[1], b[2],
                                              shmem, s, la._params, NULL), "cuLaunchKernel")

    def __repr__(self):
        return f"<cuzk Function {self.name}>"


# Kernel-argument formats: size = alignment (the C ABI of kernel parameters).
_FMT_SIZES = {"P": 8, "Q": 8, "q": 8, "d": 8, "I": 4, "i": 4, "f": 4, "H": 2, "h": 2, "B": 1, "b": 1}


cdef class LaunchArgs:
    """Kernel arguments packed once into one host block (reusable across launches).

    Each argument is ``(fmt, value)`` with fmt in P (device pointer / uint64),
    Q (uint64), q (int64), I (uint32), i (int32), H/h (16-bit), B/b (8-bit),
    f (float), d (double); or a plain value: DeviceBuffer -> its ptr ('P'),
    int -> 'Q' (or 'q' when negative), float -> 'd'.  Buffers passed are kept
    alive as long as this object.
    """

    def __cinit__(self, args=()):
        cdef list items = list(args)
        cdef Py_ssize_t n = len(items), i
        cdef size_t off = 0, size
        cdef list fmts = []
        cdef list offs = []
        cdef uint64_t u64
        cdef int64_t i64
        cdef double f64
        cdef float f32
        cdef uint32_t u32
        cdef int32_t i32
        cdef uint16_t u16
        cdef int16_t i16
        cdef uint8_t u8
        cdef int8_t i8
        self._keep = []
        self._n = n
        values = []
        for i in range(n):
            a = items[i]
            if isinstance(a, tuple):
                if len(a) != 2 or not isinstance(a[0], str) or a[0] not in _FMT_SIZES:
                    raise ValueError(f"argument {i}: expected (fmt, value) with fmt in "
                                     f"{''.join(_FMT_SIZES)}, got {a!r}")
                fmt, v = a
            elif isinstance(a, DeviceBuffer):
                fmt, v = "P", a
            elif isinstance(a, bool):
                raise TypeError(f"argument {i}: a bool is ambiguous, pass ('B', v) or ('I', v)")
            elif isinstance(a, int):
                fmt, v = ("q" if a < 0 else "Q"), a
            elif isinstance(a, float):
                fmt, v = "d", a
            else:
                raise TypeError(f"argument {i}: cannot pass {type(a).__name__} to a kernel")
            size = _FMT_SIZES[fmt]
            off = (off + size - 1) & ~(size - 1)
            fmts.append(fmt)
            offs.append(off)
            values.append(v)
            off += size
        self._nbytes_packed = off
        self._buf = <char*>malloc(off if off else 1)
        self._params = <void**>malloc((n if n else 1) * sizeof(void*))
        if self._buf == NULL or self._params == NULL:
            raise MemoryError()
        for i in range(n):
            fmt = fmts[i]
            v = values[i]
            off = offs[i]
            self._params[i] = self._buf + off
            try:
                if fmt == "P" or fmt == "Q":
                    if isinstance(v, DeviceBuffer):
                        u64 = v.ptr
                        self._keep.append(v)
                    else:
                        u64 = v
                    memcpy(self._buf + off, &u64, 8)
                elif fmt == "q":
                    i64 = v
                    memcpy(self._buf + off, &i64, 8)
                elif fmt == "d":
                    f64 = v
                    memcpy(self._buf + off, &f64, 8)
                elif fmt == "I":
                    u32 = v
                    memcpy(self._buf + off, &u32, 4)
                elif fmt == "i":
                    i32 = v
                    memcpy(self._buf + off, &i32, 4)
                elif fmt == "f":
                    f32 = v
                    memcpy(self._buf + off, &f32, 4)
                elif fmt == "H":
                    u16 = v
                    memcpy(self._buf + off, &u16, 2)
                elif fmt == "h":
                    i16 = v
                    memcpy(self._buf + off, &i16, 2)
                elif fmt == "B":
                    u8 = v
                    memcpy(self._buf + off, &u8, 1)
                else:
                    i8 = v
                    memcpy(self._buf + off, &i8, 1)
            except (TypeError, OverflowError, ValueError) as e:
                raise type(e)(f"argument {i} ({fmt!r}, {v!r}): {e}") from None

    def __len__(self):
        return self._n

    @property
    def nbytes(self):
        """Bytes of the packed parameter block."""
        return self._nbytes_packed

    def __dealloc__(self):
        free(self._buf)
        free(self._params)
