# cdef declarations of cuzk._native._driver, for other Cython modules to cimport.
#
# Contract: every driver call runs without the GIL; `check` takes the GIL only when
# the CUresult is not CUDA_SUCCESS and raises cuzk._errors.CudaError naming `call`.
# Every object stores the raw CUcontext it was created in and makes it current
# on the calling thread before each driver call, so any thread may use any object.

from libc.stdint cimport uintptr_t, uint64_t
from cuda.bindings cimport cydriver


cdef int check(cydriver.CUresult err, const char* call) except? -1 nogil
cdef int set_context(cydriver.CUcontext ctx) except? -1 nogil
cdef int stream_handle(object stream, cydriver.CUstream* out) except -1
cdef int device_ptr(object obj, cydriver.CUdeviceptr* out, size_t* capacity) except -1


cdef class _Closable:      # __enter__ / __exit__ (-> close()) of the owners below
    pass


cdef class Device(_Closable):
    cdef readonly int ordinal
    cdef cydriver.CUdevice _dev
    cdef cydriver.CUcontext _ctx
    cdef bint _shared
    cdef readonly str name
    cdef readonly str arch
    cdef readonly tuple cc
    cdef readonly int sm_count
    cdef readonly int max_threads_per_sm
    cdef readonly size_t total_mem
    cdef readonly int l2_size
    cdef readonly int max_shared_per_block_optin
    cdef readonly bint cooperative_launch


cdef class Stream(_Closable):
    cdef cydriver.CUstream _h
    cdef cydriver.CUcontext _ctx
    cdef readonly Device device
    cdef readonly int priority
    cdef readonly bint nonblocking


cdef class Event(_Closable):
    cdef cydriver.CUevent _h
    cdef cydriver.CUcontext _ctx
    cdef readonly Device device
    cdef readonly bint timing


cdef class MemPool(_Closable):
    cdef cydriver.CUmemoryPool _pool
    cdef cydriver.CUcontext _ctx
    cdef bint _owned
    cdef readonly Device device
    cdef uint64_t _get(self, cydriver.CUmemPool_attribute a, const char* call) except? 0xFFFFFFFFFFFFFFFF
    cdef int _get_int(self, cydriver.CUmemPool_attribute a) except? -1
    cdef int _set_int(self, cydriver.CUmemPool_attribute a, int v) except -1


cdef class DeviceBuffer(_Closable):
    cdef cydriver.CUdeviceptr _ptr
    cdef size_t _nbytes
    cdef cydriver.CUcontext _ctx
    cdef bint _async
    cdef cydriver.CUstream _sh      # stream the pool allocation is ordered on
    cdef object _stream             # the Stream object behind _sh (kept alive), or None
    cdef readonly object device
    cdef readonly object pool
    cdef int _release(self, object stream) except -1


cdef class PinnedBuffer(_Closable):
    cdef void* _p
    cdef size_t _nbytes
    cdef cydriver.CUcontext _ctx
    cdef int _exports
    cdef Py_ssize_t _shape[1]
    cdef Py_ssize_t _strides[1]
    cdef readonly Device device


cdef class Module(_Closable):
    cdef cydriver.CUmodule _m
    cdef cydriver.CUcontext _ctx
    cdef dict _functions
    cdef readonly Device device


cdef class Function:
    cdef cydriver.CUfunction _f
    cdef cydriver.CUcontext _ctx
    cdef readonly Module module
    cdef readonly str name
    cdef int _get(self, cydriver.CUfunction_attribute a) except? -1


cdef class LaunchArgs:
    cdef char* _buf
    cdef void** _params
    cdef Py_ssize_t _n
    cdef size_t _nbytes_packed
    cdef list _keep
