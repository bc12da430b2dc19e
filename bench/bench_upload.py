"""Benchmark: host-to-device upload paths for a partition's a, b, c (12.9 GB at 2^27).

    python bench/bench_upload.py [--gib 4] [--threads 16,8,4] [--chunk-mib 64] [--json F]

Rows (GB/s, wall clock from the first enqueue to the stream's synchronize, median of --runs):
* ``dma pinned``: one pinned buffer copied to the device chunk by chunk (the DMA alone; the
  floor of every path that goes through pinned memory).
* ``ring tN``: the stages' pinned staging ring (``_Ring.put``) from a pageable NumPy array, its
  CPU copies on N pool threads (what a partition's upload does today).
* ``register``: cuMemHostRegister of the pageable array itself (the time to page-lock it),
  then ``dma registered``: the DMA straight from it (no host copy), then the unregister.

The question it answers: is the upload bound by the DMA or by the host copy into the ring, and
would page-locking the caller's arrays in place beat the ring once its cost is counted.
"""
import argparse
import json
import statistics
import threading
import time

import numpy as np

from cuzk import _cuda_msm
from cuzk._native import _driver as d
from cuzk._stages._cuda import _Ring


def _timed(fn, runs):
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gib", type=float, default=4.0, help="bytes per upload, GiB")
    ap.add_argument("--threads", default="16,8,4", help="pool threads of the ring's copies")
    ap.add_argument("--chunk-mib", default="64", help="ring chunk sizes, MiB (comma list)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--beside", action="store_true",
                    help="also page-lock and unlock while the GPU is busy and another thread enqueues")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    nbytes = int(a.gib * (1 << 30)) // 4096 * 4096
    st = _cuda_msm._state(None)
    s = st.streams()[1]
    dst = st.pool.alloc(nbytes, s)
    src = np.ones(nbytes, dtype=np.uint8)            # touched: its pages exist
    rows = []

    def row(name, sec, **extra):
        rows.append(dict(path=name, seconds=sec, gbps=nbytes / sec / 1e9, **extra))
        print(f"{name:<22} {sec * 1e3:9.1f} ms {nbytes / sec / 1e9:7.2f} GB/s", flush=True)

    print(f"upload of {nbytes / 2**30:.2f} GiB to {st.device}")
    chunk = 64 << 20
    pin = d.PinnedBuffer(chunk, st.device)

    def dma_pinned():
        for off in range(0, nbytes, chunk):
            d.copy_htod(dst.ptr + off, pin.ptr, min(chunk, nbytes - off), s)
        s.synchronize()
    dma_pinned()
    row("dma pinned", _timed(dma_pinned, a.runs))

    for cm in [int(x) for x in a.chunk_mib.split(",") if x]:
        ring = _Ring(st.device, chunk=cm << 20)
        ring.warm()
        for t in [int(x) for x in a.threads.split(",") if x]:
            def put():
                ring.put(dst.ptr, src, nbytes, s, threads=t)
                s.synchronize()
            put()
            row(f"ring t{t} c{cm}MiB", _timed(put, a.runs), threads=t, chunk_mib=cm)
        ring.close()

    reg_s, dma_s, unreg_s = [], [], []
    for _ in range(a.runs):
        fresh = np.ones(nbytes, dtype=np.uint8)
        t0 = time.perf_counter()
        reg = d.register_host(fresh, st.device)
        t1 = time.perf_counter()
        d.copy_htod(dst.ptr, reg.ptr, nbytes, s)
        s.synchronize()
        t2 = time.perf_counter()
        reg.close()
        t3 = time.perf_counter()
        reg_s.append(t1 - t0)
        dma_s.append(t2 - t1)
        unreg_s.append(t3 - t2)
        del fresh
    row("register", statistics.median(reg_s))
    row("dma registered", statistics.median(dma_s))
    row("unregister", statistics.median(unreg_s))
    tot = statistics.median([x + y + z for x, y, z in zip(reg_s, dma_s, unreg_s)])
    row("register+dma+unreg", tot)
    if a.beside:
        _beside(d, st, dst, nbytes, a, rows)
    pin.close()
    dst.free(s)
    s.synchronize()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"bytes": nbytes, "device": str(st.device), "rows": rows}, f, indent=1)


def _beside(d, st, dst, nbytes, a, rows):
    """Page-lock and unlock a fresh array (``CudaStages(c_upload="register")``'s calls, made in
    one worker's prepare and finish) while a chain of device copies keeps the GPU busy (another
    worker's region) and a second thread enqueues 1 MiB copies behind it, timing each enqueue.
    Rows: the chain alone; register and unregister beside it; the other thread's enqueue
    latency (median / max) with and without them.  Does either wait for the device, or stall
    another thread's driver calls?"""
    s2 = d.Stream(st.device)
    half = nbytes // 2

    def chain(k):
        for _ in range(k):
            d.copy_dtod(dst.ptr + half, dst.ptr, half, s2)
    chain(4)
    s2.synchronize()
    t = time.perf_counter()
    chain(64)
    s2.synchronize()
    per = (time.perf_counter() - t) / 64
    k = max(8, int(1.5 / per))              # ~1.5 s of device work

    def probe(pinning):
        lat, stop = [], threading.Event()

        def enqueue():
            while not stop.is_set():
                t0 = time.perf_counter()
                d.copy_dtod(dst.ptr + half, dst.ptr, 1 << 20, s2)
                lat.append(time.perf_counter() - t0)
                time.sleep(0.001)
        fresh = np.ones(nbytes, dtype=np.uint8)
        th = threading.Thread(target=enqueue)
        t0 = time.perf_counter()
        chain(k)
        th.start()
        time.sleep(0.05)
        t1 = time.perf_counter()
        reg = d.register_host(fresh, st.device) if pinning else None
        t2 = time.perf_counter()
        if reg is not None:
            reg.close()
        t3 = time.perf_counter()
        time.sleep(0.05)
        stop.set()
        th.join()
        s2.synchronize()
        return dict(chain_s=time.perf_counter() - t0, register_s=t2 - t1, unregister_s=t3 - t2,
                    lat_median_ms=statistics.median(lat) * 1e3, lat_max_ms=max(lat) * 1e3,
                    enqueues=len(lat))
    for pinning in (False, True, False, True):
        r = probe(pinning)
        r["path"] = "beside " + ("register" if pinning else "none")
        rows.append(r)
        print(f"{r['path']:<18} chain {r['chain_s'] * 1e3:7.1f} ms  register {r['register_s'] * 1e3:7.1f} ms"
              f"  unregister {r['unregister_s'] * 1e3:7.1f} ms  other thread's enqueue median "
              f"{r['lat_median_ms']:.3f} / max {r['lat_max_ms']:.2f} ms ({r['enqueues']})", flush=True)
    s2.close()


if __name__ == "__main__":
    main()
