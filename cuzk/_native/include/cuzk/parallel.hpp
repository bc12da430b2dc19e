// Fork-join helpers for the CPU backend: real OS threads, no GIL (callers hold none).
// Contract: fn(begin, end, worker) is called on disjoint chunks covering [0, n);
// the caller's thread runs worker 0. Exceptions must not escape fn.
#pragma once
#include <algorithm>
#include <cstddef>
#include <thread>
#include <vector>

namespace cuzk {

inline size_t hw_threads() {
    unsigned t = std::thread::hardware_concurrency();
    return t ? t : 1;
}

// threads == 0 means "all hardware threads".
inline size_t resolve_threads(size_t threads) { return threads ? threads : hw_threads(); }

// Split [0, n) into `parts` nearly equal chunks and run them on parts threads.
template <class Fn>
inline void parallel_chunks(size_t n, size_t parts, Fn&& fn) {
    if (parts <= 1 || n <= 1) { fn(size_t(0), n, size_t(0)); return; }
    parts = std::min(parts, n);
    std::vector<std::thread> pool;
    pool.reserve(parts - 1);
    size_t base = n / parts, extra = n % parts, start = 0;
    size_t first_end = base + (extra > 0);
    start = first_end;
    for (size_t p = 1; p < parts; p++) {
        size_t len = base + (p < extra);
        size_t b = start, e = start + len;
        start = e;
        pool.emplace_back([&fn, b, e, p] { fn(b, e, p); });
    }
    fn(size_t(0), first_end, size_t(0));
    for (auto& t : pool) t.join();
}

// Like parallel_chunks but with at least `grain` items per chunk.
template <class Fn>
inline void parallel_for(size_t n, size_t threads, size_t grain, Fn&& fn) {
    threads = resolve_threads(threads);
    size_t parts = grain ? std::max<size_t>(1, std::min(threads, (n + grain - 1) / grain)) : threads;
    parallel_chunks(n, parts, fn);
}

}  // namespace cuzk
