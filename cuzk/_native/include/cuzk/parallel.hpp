// One persistent CPU thread pool for the CPU backend, shared by every extension module, with a
// per-thread budget (DESIGN §4).  Real OS threads, no GIL (callers hold none; tasks never touch
// Python).
//
//   par_for(units, threads, fn)       fn(unit, worker) for every unit in [0, units), on at most
//                                     `threads` threads counting the caller (0 = the budget);
//                                     worker < workers_for(units, threads), 0 being the caller
//   parallel_chunks(n, parts, fn)     fn(begin, end, chunk) on `parts` nearly equal chunks of
//                                     [0, n); chunk k always covers the same range whatever runs it
//   parallel_for(n, threads, grain, fn)   parallel_chunks with at least `grain` items per chunk
//   resolve_threads(threads)          threads, or when 0 the calling thread's budget, or when
//                                     none is set the pool size
//
// Contract:
// * The caller blocks until every unit has run; it works on its own units, and once all are
//   claimed it waits only for helpers still inside one.  A helper woken late (a busy machine,
//   other engine workers) finds nothing and leaves, so a call never waits on the OS scheduler
//   for a helper that has not started.  Units are claimed in increasing order.
// * Concurrent calls from several OS threads share the helpers (first come, first served);
//   each call gets at most threads − 1 of them, so N workers with budget cores/N use about
//   cores threads in all.  A call made from inside a unit that runs on the pool (nested) runs
//   inline on its thread.
// * The first exception thrown by fn stops the units not yet started and is rethrown on the
//   caller's thread.
// * threads (and budgets) larger than the pool are allowed: chunking follows `threads`, the
//   concurrency is bounded by the pool.  Results must not depend on either (every user's
//   contract).
//
// Sharing across modules: each Cython extension is its own shared object loaded RTLD_LOCAL
// (and built -fno-gnu-unique), so every one of them holds its own copy of this header's
// statics.  The pool therefore lives in cuzk._native._pool, which exports a table of C
// function pointers (pool_api_t, in a capsule); every other extension binds to it at import
// (_pool.pxd: bind_shared_pool()).  Only plain C types cross the boundary, so modules built
// from different versions of this header stay compatible while CUZK_POOL_ABI is unchanged.
// A module that never binds uses a private pool of its own: correct, only not shared.
//
// Pool size: CPUs in the process's affinity mask (sched_getaffinity) at first use, or
// $CUZK_POOL_THREADS when set (a positive integer; tests use it); size − 1 helper threads, the
// caller being the other one.  An idle helper polls for 100 us (yielding the CPU) before it
// sleeps on a condition variable.  The pool is never destroyed (helpers are detached and end with
// the process); a forked child starts a fresh one on first use.
#pragma once
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <exception>
#include <mutex>
#include <new>
#include <thread>
#include <type_traits>
#include <vector>

#define CUZK_POOL_ABI 1u

namespace cuzk {

// ---- the ABI shared by the extension modules --------------------------------------------------
typedef void (*pool_invoke_t)(void* ctx, size_t unit, size_t worker);  // must not throw

struct pool_api_t {
    uint32_t abi;   // CUZK_POOL_ABI
    uint32_t size;  // sizeof(pool_api_t)
    size_t (*threads)();               // pool size, the caller included
    size_t (*budget)();                // the calling thread's budget, 0 = none
    size_t (*set_budget)(size_t);      // set it (0 clears); returns the previous one
    // invoke(ctx, unit, worker) for every unit on at most max_threads (>= 1) threads
    void (*run)(size_t units, size_t max_threads, pool_invoke_t invoke, void* ctx);
    // counters: [0] calls that posted work to helpers, [1] helper joins, [2] calls run inline
    // because they were nested, [3] helper threads started
    void (*stats)(uint64_t* out, size_t n);
};

namespace pool_detail {

inline thread_local size_t tl_budget = 0;   // set_thread_budget of this OS thread
inline thread_local unsigned tl_depth = 0;  // > 0 while this thread runs units of a call

inline size_t affinity_cpus() {
    for (int ncpu = 1024; ncpu <= (1 << 16); ncpu *= 4) {
        cpu_set_t* set = CPU_ALLOC(ncpu);
        if (!set) break;
        const size_t bytes = CPU_ALLOC_SIZE(ncpu);
        CPU_ZERO_S(bytes, set);
        if (sched_getaffinity(0, bytes, set) == 0) {
            const int c = CPU_COUNT_S(bytes, set);
            CPU_FREE(set);
            return c > 0 ? size_t(c) : 1;
        }
        CPU_FREE(set);  // EINVAL: the kernel's mask is larger; try a bigger set
    }
    const unsigned t = std::thread::hardware_concurrency();
    return t ? t : 1;
}

inline size_t configured_size() {
    if (const char* s = std::getenv("CUZK_POOL_THREADS")) {
        char* end = nullptr;
        const unsigned long v = std::strtoul(s, &end, 10);
        if (end != s && *end == '\0' && v >= 1 && v <= 4096) return size_t(v);
    }
    return affinity_cpus();
}

// One call's shared state, on the caller's stack.  next is claimed lock-free; the rest is
// guarded by the pool's mutex.  The caller returns only once the job has left the queue (no new
// helper can join) and no helper is inside it.
struct job_t {
    pool_invoke_t invoke;
    void* ctx;
    size_t units;
    std::atomic<size_t> next{0};
    size_t want = 0;     // helpers it may take
    size_t joined = 0;   // helpers that joined; helper k is worker k
    size_t active = 0;   // helpers inside drain()
    bool queued = false;
    std::condition_variable idle;

    void drain(size_t worker) {
        for (;;) {
            const size_t u = next.fetch_add(1, std::memory_order_relaxed);
            if (u >= units) return;
            invoke(ctx, u, worker);
        }
    }
};

class thread_pool_t {
  public:
    explicit thread_pool_t(size_t size) : size_(size ? size : 1) {
        for (size_t i = 1; i < size_; i++) {
            try {
                std::thread([this] { loop(); }).detach();
                started_++;
            } catch (...) {
                break;  // no more threads: fewer helpers, same results
            }
        }
    }
    size_t size() const { return size_; }

    void run(size_t units, size_t max_threads, pool_invoke_t invoke, void* ctx) {
        if (units == 0) return;
        const size_t parts = std::min(std::max<size_t>(max_threads, 1), units);
        const size_t helpers = std::min(parts - 1, started_);
        if (helpers == 0 || tl_depth > 0) {
            if (tl_depth > 0) nested_.fetch_add(1, std::memory_order_relaxed);
            tl_depth++;
            for (size_t u = 0; u < units; u++) invoke(ctx, u, 0);
            tl_depth--;
            return;
        }
        job_t j;
        j.invoke = invoke;
        j.ctx = ctx;
        j.units = units;
        j.want = helpers;
        {
            std::lock_guard<std::mutex> g(mu_);
            j.queued = true;
            q_.push_back(&j);
            queued_.fetch_add(1, std::memory_order_relaxed);
        }
        posted_.fetch_add(1, std::memory_order_relaxed);
        if (helpers >= started_) cv_.notify_all();
        else for (size_t i = 0; i < helpers; i++) cv_.notify_one();
        tl_depth++;
        j.drain(0);
        tl_depth--;
        std::unique_lock<std::mutex> lk(mu_);
        if (j.queued) {
            q_.erase(std::find(q_.begin(), q_.end(), &j));
            queued_.fetch_sub(1, std::memory_order_relaxed);
            j.queued = false;
        }
        j.idle.wait(lk, [&] { return j.active == 0; });
    }

    void stats(uint64_t* out, size_t n) const {
        const uint64_t v[4] = {posted_.load(), joins_.load(), nested_.load(), uint64_t(started_)};
        for (size_t i = 0; i < n && i < 4; i++) out[i] = v[i];
    }

  private:
    void loop() {
        pthread_setname_np(pthread_self(), "cuzk-pool");
        std::unique_lock<std::mutex> lk(mu_);
        for (;;) {
            if (q_.empty()) {
                // Poll (yielding) for a short while before sleeping: the passes of one call (NTT
                // stages, MSM phases) come back to back, and a sleeping helper wakes late.
                lk.unlock();
                const auto t0 = std::chrono::steady_clock::now();
                while (queued_.load(std::memory_order_relaxed) == 0 &&
                       std::chrono::steady_clock::now() - t0 < std::chrono::microseconds(kSpinUs))
                    std::this_thread::yield();
                lk.lock();
                cv_.wait(lk, [&] { return !q_.empty(); });
            }
            job_t* j = q_.front();
            const size_t worker = ++j->joined;
            j->active++;
            if (j->joined == j->want) {  // full: later helpers go to the next job
                q_.pop_front();
                queued_.fetch_sub(1, std::memory_order_relaxed);
                j->queued = false;
            }
            lk.unlock();
            joins_.fetch_add(1, std::memory_order_relaxed);
            tl_depth++;
            j->drain(worker);
            tl_depth--;
            lk.lock();
            // under the mutex: the caller cannot see active == 0 and return before we let go
            if (--j->active == 0 && !j->queued) j->idle.notify_one();
        }
    }

    static constexpr long kSpinUs = 100;
    const size_t size_;
    size_t started_ = 0;
    std::atomic<size_t> queued_{0};  // q_.size(), for the polling helpers
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<job_t*> q_;
    std::atomic<uint64_t> posted_{0}, joins_{0}, nested_{0};
};

// This module's pool: created on first use, never destroyed; a forked child drops the parent's
// (its helpers did not survive the fork) and creates its own.
struct pool_holder_t {
    std::atomic<thread_pool_t*> pool{nullptr};
    std::mutex create;
    bool atfork = false;
};
inline pool_holder_t& holder() {
    static pool_holder_t* h = new pool_holder_t();  // leaked: usable during exit
    return *h;
}
inline void after_fork_child() {
    pool_holder_t& h = holder();
    h.pool.store(nullptr);                // the old pool is leaked: its mutex may be held
    new (&h.create) std::mutex();         // the child has one thread: re-initialise
}
inline thread_pool_t& local_pool() {
    pool_holder_t& h = holder();
    thread_pool_t* p = h.pool.load(std::memory_order_acquire);
    if (p) return *p;
    std::lock_guard<std::mutex> g(h.create);
    p = h.pool.load(std::memory_order_acquire);
    if (!p) {
        if (!h.atfork) {
            pthread_atfork(nullptr, nullptr, after_fork_child);
            h.atfork = true;
        }
        p = new thread_pool_t(configured_size());
        h.pool.store(p, std::memory_order_release);
    }
    return *p;
}

// This module's pool as the ABI table (what cuzk._native._pool exports).
inline const pool_api_t* local_api() {
    static const pool_api_t api = {
        CUZK_POOL_ABI,
        uint32_t(sizeof(pool_api_t)),
        [] { return local_pool().size(); },
        [] { return tl_budget; },
        [](size_t k) { size_t old = tl_budget; tl_budget = k; return old; },
        [](size_t units, size_t max_threads, pool_invoke_t invoke, void* ctx) {
            local_pool().run(units, max_threads, invoke, ctx);
        },
        [](uint64_t* out, size_t n) { local_pool().stats(out, n); },
    };
    return &api;
}

inline std::atomic<const pool_api_t*>& bound_api() {
    static std::atomic<const pool_api_t*> a{nullptr};
    return a;
}

}  // namespace pool_detail

// Bind this module to a pool exported by another (a pool_api_t*); false (and unbound) when its
// ABI differs.
inline bool pool_bind(const void* api) {
    const pool_api_t* a = static_cast<const pool_api_t*>(api);
    if (!a || a->abi != CUZK_POOL_ABI || a->size < sizeof(pool_api_t)) return false;
    pool_detail::bound_api().store(a, std::memory_order_release);
    return true;
}

// The pool this module uses: the bound one, else its own.
inline const pool_api_t& pool() {
    const pool_api_t* a = pool_detail::bound_api().load(std::memory_order_acquire);
    return a ? *a : *pool_detail::local_api();
}

// threads == 0 means "the calling thread's budget, else every thread of the pool".
inline size_t resolve_threads(size_t threads) {
    if (threads) return threads;
    const pool_api_t& p = pool();
    const size_t b = p.budget();
    return b ? b : p.threads();
}

// Threads a par_for(units, threads, ...) may use: worker ids are below this.
inline size_t workers_for(size_t units, size_t threads) {
    return std::max<size_t>(1, std::min(resolve_threads(threads), units));
}

template <class Fn>
inline void par_for(size_t units, size_t threads, Fn&& fn) {
    if (units == 0) return;
    threads = resolve_threads(threads);
    if (threads <= 1 || units == 1) {
        for (size_t u = 0; u < units; u++) fn(u, size_t(0));
        return;
    }
    typedef typename std::remove_reference<Fn>::type fn_t;
    struct ctx_t {
        fn_t* fn;
        std::atomic<bool> failed{false};
        std::mutex mu;
        std::exception_ptr err;
    } c;
    c.fn = &fn;
    pool().run(units, threads, [](void* p, size_t u, size_t w) {
        ctx_t* c = static_cast<ctx_t*>(p);
        if (c->failed.load(std::memory_order_relaxed)) return;
        try {
            (*c->fn)(u, w);
        } catch (...) {
            std::lock_guard<std::mutex> g(c->mu);
            if (!c->err) c->err = std::current_exception();
            c->failed.store(true);
        }
    }, &c);
    if (c.err) std::rethrow_exception(c.err);
}

// Split [0, n) into `parts` nearly equal chunks (the first n % parts one longer) and run
// fn(begin, end, chunk) for each, on up to `parts` threads.
template <class Fn>
inline void parallel_chunks(size_t n, size_t parts, Fn&& fn) {
    if (parts <= 1 || n <= 1) { fn(size_t(0), n, size_t(0)); return; }
    parts = std::min(parts, n);
    const size_t base = n / parts, extra = n % parts;
    par_for(parts, parts, [&](size_t p, size_t) {
        const size_t b = p * base + std::min(p, extra);
        fn(b, b + base + (p < extra), p);
    });
}

// Like parallel_chunks but with at least `grain` items per chunk; threads 0 = resolve_threads.
template <class Fn>
inline void parallel_for(size_t n, size_t threads, size_t grain, Fn&& fn) {
    threads = resolve_threads(threads);
    size_t parts = grain ? std::max<size_t>(1, std::min(threads, (n + grain - 1) / grain)) : threads;
    parallel_chunks(n, parts, fn);
}

}  // namespace cuzk
