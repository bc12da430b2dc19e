# cython: language_level=3
"""The process-wide CPU thread pool of the native modules, and per-thread thread budgets.

Every native function that takes ``threads`` runs its parallel loops on one persistent pool
(``cuzk/parallel.hpp``), created on first use and sized by the process's CPU affinity mask
(``os.sched_getaffinity``; ``$CUZK_POOL_THREADS`` overrides it, read once).  ``threads=k``
means at most k threads (the caller included); ``threads=None`` or ``0`` means the calling
thread's budget (:func:`set_thread_budget`), or the whole pool when none is set.

An engine passes each worker's thread count explicitly (``Engine(thread_share="split")``:
``pool_threads() // N`` for N workers; ``"shared"``: all of them); several workers then share
the pool instead of each starting one thread per core.  ``set_thread_budget`` sets the
default for one OS thread's calls.
"""
from cpython.pycapsule cimport PyCapsule_New
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memset
from libcpp.vector cimport vector

from cuzk._args import threads_arg

__all__ = ["pool_threads", "set_thread_budget", "thread_budget", "thread_budget_scope", "copy_into"]


cdef extern from "cuzk/parallel.hpp" namespace "cuzk" nogil:
    ctypedef struct pool_api_t "cuzk::pool_api_t":
        size_t (*threads)()
        size_t (*budget)()
        size_t (*set_budget)(size_t)
        void (*stats)(uint64_t* out, size_t n)
    const pool_api_t* local_api "cuzk::pool_detail::local_api"()
    size_t resolve_threads "cuzk::resolve_threads"(size_t threads)


cdef extern from * nogil:
    """
    #include <unistd.h>
    #include <sys/syscall.h>
    #include <chrono>
    #include <stdexcept>
    #include <string>
    #include "cuzk/parallel.hpp"
    // Test probe: par_for(units, threads) where every unit records (its worker id, the kernel
    // thread id that ran it) and busy-waits spin_us so that helpers have time to join; with
    // inner > 0 every unit makes a nested par_for of `inner` units (which must run inline);
    // unit throw_at throws std::runtime_error.
    inline void cuzk_pool_probe(size_t units, size_t threads, size_t inner, long spin_us,
                                size_t throw_at, int64_t* out /* (units * (1 + inner)) x 2 */) {
        auto spin = [spin_us] {
            auto t0 = std::chrono::steady_clock::now();
            while (std::chrono::steady_clock::now() - t0 < std::chrono::microseconds(spin_us)) {}
        };
        cuzk::par_for(units, threads, [&](size_t u, size_t w) {
            int64_t* o = out + 2 * u * (1 + inner);
            o[0] = (int64_t)w;
            o[1] = (int64_t)syscall(SYS_gettid);
            spin();
            if (u == throw_at) throw std::runtime_error("probe unit " + std::to_string(u));
            cuzk::par_for(inner, 0, [&](size_t v, size_t w2) {
                o[2 + 2 * v] = (int64_t)w2;
                o[3 + 2 * v] = (int64_t)syscall(SYS_gettid);
            });
        });
    }
    """
    void cuzk_pool_probe(size_t units, size_t threads, size_t inner, long spin_us,
                         size_t throw_at, int64_t* out) except +


cdef extern from * nogil:
    """
    #include <cstring>
    #include "cuzk/parallel.hpp"
    // dst[0, n) = src[0, m) followed by n - m zero bytes, in 16 MiB pieces on the pool: the host
    // side of a pinned upload (one core copies ~10 GB/s; the pool's threads share the bandwidth).
    inline void cuzk_copy_into(unsigned char* dst, size_t n, const unsigned char* src, size_t m,
                               size_t threads) {
        // Two pieces per thread, each >= 1 MiB and a multiple of 4 KiB: a 64 MiB staging chunk
        // then uses every thread (fixed 16 MiB pieces capped a ring chunk at 4 threads, and a
        // 16 MiB one at 1: 18.7 and 5.4 GB/s on the H200 host, bench/bench_upload.py).
        const size_t t = cuzk::resolve_threads(threads), lo_piece = size_t(1) << 20;
        size_t piece = (n + 2 * t - 1) / (2 * t);
        piece = piece < lo_piece ? lo_piece : (piece + 4095) / 4096 * 4096;
        const size_t pieces = (n + piece - 1) / piece;
        cuzk::par_for(pieces, threads, [&](size_t p, size_t) {
            const size_t lo = p * piece, hi = lo + piece < n ? lo + piece : n;
            const size_t c = m > lo ? (m < hi ? m : hi) - lo : 0;
            if (c) std::memcpy(dst + lo, src + lo, c);
            if (lo + c < hi) std::memset(dst + lo + c, 0, hi - lo - c);
        });
    }
    """
    void cuzk_copy_into(unsigned char* dst, size_t n, const unsigned char* src, size_t m,
                        size_t threads) except +


def copy_into(dst, src, threads=None):
    """Copy the bytes of ``src`` to the start of ``dst`` and zero the rest of ``dst``, on the pool
    with the GIL released (staging a partition's inputs into pinned memory).

    Parameters
    ----------
    dst : writable C-contiguous buffer (a NumPy view of a PinnedBuffer)
    src : C-contiguous buffer, at most as many bytes as ``dst``
    threads : int or None
        As everywhere (None: the thread's budget, else the whole pool).

    Raises
    ------
    ValueError
        ``src`` is larger than ``dst``.
    """
    cdef const unsigned char[::1] s = memoryview(src).cast("B")
    cdef unsigned char[::1] d = memoryview(dst).cast("B")
    cdef size_t n = d.shape[0], m = s.shape[0], nt = threads_arg(threads)
    if m > n:
        raise ValueError(f"copy_into: {m} source bytes do not fit in {n}")
    if n == 0:
        return
    with nogil:
        cuzk_copy_into(&d[0], n, &s[0] if m else <const unsigned char*>&d[0], m, nt)


_api = PyCapsule_New(<void*>local_api(), b"cuzk._native._pool._api", NULL)


def pool_threads():
    """Threads of the pool, the caller included: what ``threads=None`` means with no budget.

    Returns
    -------
    int
        CPUs in the affinity mask when the pool was created, or ``$CUZK_POOL_THREADS``.
    """
    return local_api().threads()


def set_thread_budget(k):
    """Set the calling OS thread's thread budget: the ``threads`` that native calls made from
    this thread use when they pass ``threads=None`` (or 0).  An explicit ``threads=k`` still
    wins.  The budget belongs to the thread (thread-local); other threads are unaffected.

    Parameters
    ----------
    k : int or None
        At most k threads per call (the caller included); None or 0 clears the budget (calls
        then use the whole pool).

    Returns
    -------
    int or None
        The previous budget (None when none was set).

    Raises
    ------
    ValueError, TypeError
        k is negative, or not an integer (the rule of ``cuzk._args.threads_arg``).
    """
    cdef size_t old = local_api().set_budget(<size_t>threads_arg(k))
    return old or None


def thread_budget():
    """The calling thread's budget (int), or None when none is set."""
    return local_api().budget() or None


class thread_budget_scope:
    """``with thread_budget_scope(k):`` sets the calling thread's budget and restores the
    previous one on exit."""

    def __init__(self, k):
        threads_arg(k)
        self._k = k
        self._old = None

    def __enter__(self):
        self._old = set_thread_budget(self._k)
        return self

    def __exit__(self, *exc):
        set_thread_budget(self._old)
        return False


def _resolve(threads=None):
    """resolve_threads as the native modules see it from this thread (tests)."""
    return resolve_threads(<size_t>threads_arg(threads))


def _stats():
    """Counters of the pool (tests): ``posted`` calls that handed work to helpers, ``joins`` of
    helpers, ``nested`` calls that ran inline inside a unit, ``helpers`` threads started."""
    cdef uint64_t v[4]
    memset(v, 0, sizeof(v))
    local_api().stats(v, 4)
    return {"posted": v[0], "joins": v[1], "nested": v[2], "helpers": v[3]}


def _probe(size_t units, threads=None, size_t inner=0, long spin_us=2000, throw_at=None):
    """Run a probe par_for (tests).  Returns one list per unit: [(worker, tid), ...] for the unit
    itself, then for each of its ``inner`` nested units; unit ``throw_at`` raises RuntimeError."""
    cdef size_t t = threads_arg(threads)
    cdef size_t bad = <size_t>-1 if throw_at is None else <size_t>throw_at
    cdef vector[int64_t] out
    out.resize(2 * units * (1 + inner), -1)
    with nogil:
        cuzk_pool_probe(units, t, inner, spin_us, bad, out.data())
    res = []
    for u in range(units):
        row = []
        for k in range(1 + inner):
            i = 2 * (u * (1 + inner) + k)
            row.append((out[i], out[i + 1]))
        res.append(row)
    return res
