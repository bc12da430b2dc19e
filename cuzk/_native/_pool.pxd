# The process-wide CPU thread pool (cuzk/parallel.hpp), for the other native modules.
#
# Every extension whose C++ includes cuzk/parallel.hpp (directly or through msm.hpp, ntt.hpp,
# prep.hpp, encode.hpp, r1cs.hpp, sparse.hpp) binds to the pool of cuzk._native._pool once,
# at import, so that all of them share one pool and one per-thread budget:
#
#     from cuzk._native._pool cimport bind_shared_pool
#     bind_shared_pool()
#
# A module that does not bind still works, on a private pool of its own.
from cpython.pycapsule cimport PyCapsule_GetPointer


cdef extern from "cuzk/parallel.hpp" namespace "cuzk" nogil:
    bint pool_bind(const void* api)


cdef inline int bind_shared_pool() except -1:
    from cuzk._native import _pool  # a plain import: works while cuzk/__init__ is still running
    cdef void* api = PyCapsule_GetPointer(_pool._api, b"cuzk._native._pool._api")
    if not pool_bind(api):
        raise ImportError("cuzk._native._pool was built from another version of "
                          "cuzk/parallel.hpp (CUZK_POOL_ABI differs): rebuild the extensions")
    return 0
