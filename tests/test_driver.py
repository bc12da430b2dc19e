"""The CUDA driver layer: import and probe without a GPU; objects, copies and
launches on a GPU (``-m gpu``, skipped on a real capability probe)."""

import logging
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from helpers import run_threaded

from cuzk import _backend
from cuzk._backend import cuda_available, resolve_backend
from cuzk._errors import BackendUnavailable, CudaError, NvrtcError
from cuzk._native import _driver

CUDA_OK, CUDA_WHY = cuda_available()
gpu = [pytest.mark.gpu, pytest.mark.skipif(not CUDA_OK, reason=f"no usable CUDA device: {CUDA_WHY}")]
DRIVER_OK = _driver.probe()[0]
no_gpu_only = pytest.mark.skipif(CUDA_OK, reason="a CUDA device is usable here")
no_driver_only = pytest.mark.skipif(DRIVER_OK, reason="a CUDA driver and device are present")


# --------------------------------------------------------------------------- no GPU needed

def test_import_exposes_contract():
    for name in ["probe", "device_count", "Device", "Stream", "Event", "MemPool", "DeviceBuffer",
                 "PinnedBuffer", "register_host", "copy_htod", "copy_dtoh", "copy_dtod",
                 "memset_d8", "memset_d32", "Module", "Function", "LaunchArgs"]:
        assert name in _driver.__all__
        assert hasattr(_driver, name)


@pytest.mark.parametrize("module", ["cuzk._cuda_batch", "cuzk._cuda_fixed_base", "cuzk._cuda_msm",
                                    "cuzk._cuda_ntt", "cuzk._stages._cuda"])
def test_front_ends_call_the_native_driver(module):
    """Each CUDA front end reaches the driver through its ``_driver()`` (the emulator's tests swap
    it), which gives this module."""
    import importlib
    assert importlib.import_module(module)._driver() is _driver


def test_bad_window_grid_switch_fails_at_import():
    """CUZK_MSM_WINDOW_GRID, read at import, with a value it does not know stops the import with
    a message naming it (not a silent default)."""
    r = subprocess.run([sys.executable, "-c", "import cuzk._cuda_msm"], capture_output=True, text=True,
                       env=dict(os.environ, CUZK_MSM_WINDOW_GRID="tiles"), timeout=60)
    assert r.returncode != 0 and "CUZK_MSM_WINDOW_GRID must be 'spread' or 'wave'" in r.stderr


def test_probe_reports_cleanly():
    ok, reason = _driver.probe()
    assert isinstance(ok, bool)
    assert isinstance(reason, str) and reason
    assert _driver.probe() == (ok, reason)
    if not ok:
        assert cuda_available() == (False, reason)


def test_probe_in_fresh_interpreter():
    # The probe runs first thing in the process, before anything else touches cuda-bindings.
    code = "from cuzk._native import _driver; ok, why = _driver.probe(); print(ok); print(why)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    ok, why = r.stdout.splitlines()[:2]
    assert ok == str(CUDA_OK)
    assert why


@no_driver_only
def test_without_driver_calls_raise_runtime_errors():
    ok, reason = _driver.probe()
    assert not ok
    assert "libcuda" in reason or "cuInit" in reason or "no devices" in reason
    with pytest.raises(RuntimeError):
        _driver.device_count()
    with pytest.raises(RuntimeError):
        _driver.Device(0)
    with pytest.raises(RuntimeError):
        _driver.Device.get(0)


@no_gpu_only
def test_resolve_cuda_without_device_raises():
    with pytest.raises(BackendUnavailable) as ei:
        resolve_backend("cuda")
    assert ei.value.backend == "cuda" and ei.value.reason == CUDA_WHY
    assert resolve_backend("auto") == "cpu"


def test_cuda_error_pickles():
    e = CudaError("cuMemAllocAsync", 2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory")
    e2 = pickle.loads(pickle.dumps(e))
    assert type(e2) is CudaError
    assert (e2.call, e2.code, e2.name, e2.message) == ("cuMemAllocAsync", 2, "CUDA_ERROR_OUT_OF_MEMORY",
                                                       "out of memory")
    assert str(e2) == str(e) and "cuMemAllocAsync" in str(e2)
    assert isinstance(e2, RuntimeError)


def test_nvrtc_error_pickles():
    log = "k.cu(3): error: identifier \"x\" is undefined\n1 error detected"
    e = NvrtcError("nvrtcCompileProgram", 6, log, "NVRTC_ERROR_COMPILATION")
    e2 = pickle.loads(pickle.dumps(e))
    assert type(e2) is NvrtcError
    assert (e2.call, e2.code, e2.log, e2.name) == ("nvrtcCompileProgram", 6, log, "NVRTC_ERROR_COMPILATION")
    assert log in str(e2)


def test_launch_args_packing_follows_c_abi():
    # I@0, Q@8, f@16, q@24, B@32, d@40 -> 48 bytes
    la = _driver.LaunchArgs([("I", 1), 2, ("f", 1.5), -3, ("B", 7), 2.5])
    assert len(la) == 6 and la.nbytes == 48
    assert _driver.LaunchArgs([("B", 1), ("H", 2), ("i", -3)]).nbytes == 8
    assert _driver.LaunchArgs([]).nbytes == 0


@pytest.mark.parametrize("args, exc, index", [
    ([1, ("I", -1)], OverflowError, 1),
    ([("I", 2**32)], OverflowError, 0),
    ([1, 2, True], TypeError, 2),
    (["x"], TypeError, 0),
    ([1, ("Z", 1)], ValueError, 1),
    ([("Q", 2**64)], OverflowError, 0),
])
def test_launch_args_reject_bad_values_naming_index(args, exc, index):
    with pytest.raises(exc, match=f"argument {index}"):
        _driver.LaunchArgs(args)


def test_resolve_backend_names():
    assert resolve_backend("cpu") == "cpu"
    assert resolve_backend("CPU") == "cpu"
    with pytest.raises(ValueError):
        resolve_backend("opencl")
    assert resolve_backend("auto") == ("cuda" if CUDA_OK else "cpu")


@pytest.fixture
def fake_probe(monkeypatch):
    """Replace the CUDA probe with a scripted one; restore the real cache afterwards."""
    def install(fn):
        monkeypatch.setattr(_backend, "_probe_cuda", fn)
        _backend._reset()
    yield install
    monkeypatch.undo()
    _backend._reset()


def test_auto_logs_choice_once(fake_probe, caplog):
    fake_probe(lambda: (True, "fake device"))
    with caplog.at_level(logging.INFO, logger="cuzk.backend"):
        assert resolve_backend("auto") == "cuda"
        assert resolve_backend("auto") == "cuda"
        assert resolve_backend("cuda") == "cuda"
    msgs = [r.getMessage() for r in caplog.records if r.name == "cuzk.backend"]
    assert len(msgs) == 1 and "cuda" in msgs[0] and "fake device" in msgs[0]


def test_auto_falls_back_to_cpu_and_cuda_raises(fake_probe, caplog):
    fake_probe(lambda: (False, "no driver here"))
    with caplog.at_level(logging.INFO, logger="cuzk.backend"):
        assert resolve_backend("auto") == "cpu"
    assert any("cpu" in r.getMessage() and "no driver here" in r.getMessage() for r in caplog.records)
    with pytest.raises(BackendUnavailable, match="no driver here"):
        resolve_backend("cuda")


def test_cuda_available_catches_probe_exceptions(fake_probe):
    calls = []

    def boom():
        calls.append(1)
        raise OSError("libcuda.so: cannot open shared object file")

    fake_probe(boom)
    ok, reason = cuda_available()
    assert ok is False and "libcuda.so" in reason
    assert cuda_available() == (ok, reason)
    assert len(calls) == 1  # cached


def test_probe_exception_from_driver_layer_is_caught(monkeypatch):
    def raising_probe():
        raise RuntimeError("driver exploded")

    monkeypatch.setattr(_driver, "probe", raising_probe)
    ok, reason = _backend._probe_cuda()
    assert ok is False and "driver exploded" in reason


# --------------------------------------------------------------------------- GPU

@pytest.fixture(scope="module")
def dev():
    return _driver.Device.get(0)


@pytest.fixture(scope="module", autouse=True)
def _private_kernel_cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("CUZK_CACHE_DIR", str(tmp_path_factory.mktemp("kcache")))
    yield
    mp.undo()


@pytest.fixture(scope="module")
def mod(dev):
    from cuzk import _kernels
    return _kernels.get_module(dev, "selftest")


@pytest.fixture
def stream(dev):
    with _driver.Stream(dev) as s:
        yield s


class TestGpu:
    pytestmark = gpu

    def test_device_attributes(self, dev):
        assert _driver.Device.get(0) is dev
        assert _driver.device_count() >= 1
        assert dev.arch == f"sm_{dev.cc[0]}{dev.cc[1]}"
        assert dev.sm_count > 0 and dev.total_mem > 0 and dev.l2_size > 0
        assert dev.max_threads_per_sm in (1024, 1536, 2048)
        assert dev.max_shared_per_block_optin >= 48 * 1024
        free, total = dev.mem_info()
        assert 0 < free <= total
        assert dev.context != 0
        dev.close()  # shared instance: close is a no-op
        assert not dev.closed
        with _driver.Device(0) as own:
            assert own.context == dev.context  # same primary context
        assert own.closed
        with pytest.raises(ValueError):
            _driver.Device(_driver.device_count())

    def test_stream_event_query_and_timing(self, dev, mod, stream):
        pool = _driver.MemPool(dev)
        flag = pool.alloc(4, stream)
        done = pool.alloc(4, stream)
        _driver.memset_d32(flag, 0, 1, stream)
        _driver.memset_d32(done, 0, 1, stream)
        stream.synchronize()
        start, end = _driver.Event(dev), _driver.Event(dev)
        start.record(stream)
        spin = mod.function("cuzk_selftest_spin")
        spin.launch(stream, 1, 1, [flag, ("Q", 10_000_000), done])  # <= ~10 s unless released
        end.record(stream)
        assert stream.query() is False
        assert end.query() is False
        with _driver.Stream(dev) as other:  # non-blocking: runs beside the spinning kernel
            _driver.memset_d32(flag, 1, 1, other)
            other.synchronize()
        end.synchronize()
        assert stream.query() is True and end.query() is True
        out = np.zeros(1, np.uint32)
        _driver.copy_dtoh(out, done, 4, stream)
        assert out[0] == 1
        assert _driver.Event.elapsed_ms(start, end) >= 0.0
        waiter = _driver.Event(dev, timing=False)
        waiter.record(stream)
        with _driver.Stream(dev, priority=-1) as s2:
            s2.wait_event(waiter)
            s2.synchronize()
        flag.free(stream)
        done.free(stream)
        for e in (start, end, waiter):
            e.close()
            e.close()
        with pytest.raises(ValueError):
            start.record(stream)

    def test_mempool_accounting_and_trim(self, dev, stream):
        with _driver.MemPool(dev, create=True) as pool:
            base = pool.used_bytes
            bufs = [pool.alloc(1 << 20, stream) for _ in range(4)]
            assert pool.used_bytes >= base + 4 * (1 << 20)
            assert pool.reserved_bytes >= pool.used_bytes
            for b in bufs:
                b.free(stream)
                b.free(stream)  # idempotent
                with pytest.raises(ValueError):
                    b.ptr
            stream.synchronize()
            assert pool.used_bytes == base
            before = pool.reserved_bytes
            assert before >= 4 * (1 << 20)  # the high release threshold kept it
            pool.trim(0)
            assert pool.reserved_bytes < before
        default = _driver.MemPool(dev)
        assert default.release_threshold == 2**64 - 1
        with pytest.raises(ValueError):
            default.alloc(0, stream)

    def test_mempool_internal_dependencies(self, dev):
        """The reuse attribute reads back what was set; cuzk's own pool has
        ``POOL_INTERNAL_DEPENDENCIES``."""
        from cuzk._cuda_state import POOL_INTERNAL_DEPENDENCIES, device_pool
        with _driver.MemPool(dev, create=True) as pool:
            assert pool.internal_dependencies is True           # the driver's default
            pool.internal_dependencies = False
            assert pool.internal_dependencies is False
            pool.internal_dependencies = True
            assert pool.internal_dependencies is True
        assert device_pool(_driver, dev).internal_dependencies is POOL_INTERNAL_DEPENDENCIES

    def test_buffer_freed_when_its_stream_closes_first(self, dev):
        pool = _driver.MemPool(dev)
        s = _driver.Stream(dev)
        b = pool.alloc(4096, s)
        s.close()
        b.close()
        assert b.closed

    def test_pool_accounting_after_its_stream_closes(self, dev):
        """A pool buffer freed after its allocation stream closed (a resident key released after
        its upload stream) lowers the pool's used bytes, as a stream-ordered free does, and its
        bytes are reusable (the engine's pool-bytes-flat checks read this counter)."""
        with _driver.MemPool(dev, create=True) as pool:
            base = pool.used_bytes
            for _ in range(3):
                s = _driver.Stream(dev)
                bufs = [pool.alloc(1 << 22, s) for _ in range(3)]
                s.close()
                assert pool.used_bytes >= base + 3 * (1 << 22)
                for b in bufs:
                    b.free()
                assert pool.used_bytes == base
                assert pool.reserved_bytes >= pool.used_bytes

    def test_copies_pinned_and_pageable(self, dev, stream):
        n = 1 << 16
        rng = np.random.default_rng(1)
        src = rng.integers(0, 2**63, size=n, dtype=np.uint64)
        plain = _driver.DeviceBuffer.alloc(dev, n * 8)
        pool = _driver.MemPool(dev)
        d2 = pool.alloc(n * 8, stream)
        with _driver.PinnedBuffer(n * 8) as pin:
            h = pin.asarray(np.uint64)
            h[:] = src
            _driver.copy_htod(plain, pin, n * 8, stream)
            _driver.copy_dtod(d2, plain, n * 8, stream)
            h[:] = 0
            _driver.copy_dtoh(pin, d2, n * 8, stream)
            stream.synchronize()
            assert np.array_equal(h, src)
            with pytest.raises(BufferError):
                pin.close()
            del h
        out = np.empty(n, np.uint64)
        _driver.memset_d8(d2, 0xAB, 16, stream)
        _driver.copy_dtoh(out, d2, n * 8, stream)  # pageable: returns when done
        assert out[0] == out[1] == 0xABABABABABABABAB and np.array_equal(out[2:], src[2:])
        with pytest.raises(ValueError):
            _driver.copy_dtoh(out, d2, n * 8 + 8, stream)
        with pytest.raises(ValueError):
            _driver.copy_htod(d2, out[:10], 11 * 8, stream)
        with pytest.raises(ValueError):
            _driver.memset_d32(d2, 0, 2 * n + 1, stream)
        with pytest.raises(BufferError):  # read-only destination
            _driver.copy_dtoh(b"\0" * 8, d2, 8, stream)
        d2.free(stream)
        plain.free()
        plain.free()

    def test_register_host(self, dev, stream):
        a = np.arange(1 << 15, dtype=np.uint32)
        b = np.zeros_like(a)
        d = _driver.DeviceBuffer.alloc(dev, a.nbytes)
        with _driver.register_host(a) as ra, _driver.register_host(b):
            assert ra.ptr == a.ctypes.data and ra.nbytes == a.nbytes
            _driver.copy_htod(d, a, a.nbytes, stream)
            _driver.copy_dtoh(b, d, a.nbytes, stream)
            stream.synchronize()
        assert np.array_equal(a, b)
        d.close()

    def test_module_function_global(self, dev, mod, stream):
        from cuzk import _kernels
        assert _kernels.get_module(dev, "selftest") is mod
        f = mod.function("cuzk_selftest_iota3")
        assert mod.function("cuzk_selftest_iota3") is f
        assert f.max_threads_per_block >= 256 and f.num_regs > 0
        assert f.local_size_bytes >= 0
        assert f.occupancy(256) > 0
        assert f in mod.functions()
        assert mod.max_local_size_bytes() >= f.local_size_bytes
        ptr, size = mod.global_ptr("cuzk_selftest_magic")
        assert size == 4
        out = np.zeros(1, np.uint32)
        _driver.copy_dtoh(out, ptr, 4, stream)
        assert out[0] == 0xC0FFEE01
        with pytest.raises(CudaError) as ei:
            mod.function("no_such_kernel")
        assert ei.value.call == "cuModuleGetFunction"
        assert pickle.loads(pickle.dumps(ei.value)).code == ei.value.code

    def test_bad_image_raises_cuda_error(self, dev):
        with pytest.raises(CudaError) as ei:
            _driver.Module.load(dev, b".version 8.0\n.target sm_90\n.address_size 64\nthis is not ptx;\n")
        e = ei.value
        assert e.call == "cuModuleLoadDataEx" and e.code != 0 and e.name
        assert e.message  # includes the JIT error log

    def test_ptx_module_loads(self, dev):
        from cuzk import _kernels
        from cuzk._native import _nvrtc
        if _nvrtc.version() > _driver.driver_version():
            pytest.skip("NVRTC newer than the driver: its PTX may be refused")
        ptx = _kernels.compile_program("selftest", dev.arch, target="ptx")
        with _driver.Module.load(dev, ptx) as m, _driver.Stream(dev) as s:
            d = _driver.DeviceBuffer.alloc(dev, 4 * 100)
            m.function("cuzk_selftest_iota3").launch(s, 1, 128, [d, ("I", 100)])
            out = np.empty(100, np.uint32)
            _driver.copy_dtoh(out, d, 400, s)
            assert np.array_equal(out, 3 * np.arange(100, dtype=np.uint32) + 1)
            d.close()

    def test_launch_iota_and_add(self, dev, mod, stream):
        n = 1_000_003
        pool = _driver.MemPool(dev)
        d = pool.alloc(n * 4, stream)
        _driver.memset_d8(d, 0xFF, n * 4, stream)
        mod.function("cuzk_selftest_iota3").launch(stream, (dev.sm_count * 4,), (256, 1, 1),
                                                   [d, ("I", n)])
        out = np.empty(n, np.uint32)
        _driver.copy_dtoh(out, d, n * 4, stream)
        assert np.array_equal(out, (3 * np.arange(n, dtype=np.uint64) + 1).astype(np.uint32))
        d.free(stream)

        m = 4099
        rng = np.random.default_rng(7)
        a = rng.integers(0, 2**64, size=m, dtype=np.uint64, endpoint=False)
        b = rng.integers(0, 2**64, size=m, dtype=np.uint64, endpoint=False)
        a[0], b[0] = 2**64 - 1, 2  # wraps
        da, db, dc = (pool.alloc(m * 8, stream) for _ in range(3))
        _driver.copy_htod(da, a, m * 8, stream)
        _driver.copy_htod(db, b, m * 8, stream)
        args = _driver.LaunchArgs([dc, da, db, ("Q", m)])
        mod.function("cuzk_selftest_add_u64").launch(stream, 8, 128, args)
        c = np.empty(m, np.uint64)
        _driver.copy_dtoh(c, dc, m * 8, stream)
        assert np.array_equal(c, a + b) and c[0] == 1
        for x in (da, db, dc):
            x.free(stream)

    def test_launch_argument_packing(self, dev, mod, stream):
        out = _driver.DeviceBuffer.alloc(dev, 8 * 8)
        f = np.float32(-1.25)
        mod.function("cuzk_selftest_args").launch(
            stream, 1, 1, [out, ("I", 0xDEADBEEF), ("Q", 2**64 - 5), ("i", -7), ("f", float(f)),
                           ("d", 3.5), ("B", 200), ("h", -300)])
        r = np.empty(8, np.uint64)
        _driver.copy_dtoh(r, out, 64, stream)
        assert r[0] == 0xDEADBEEF and r[1] == 2**64 - 5
        assert r[2] == np.uint64(2**64 - 7)
        assert r[3] == np.float32(f).view(np.uint32)
        assert r[4] == np.float64(3.5).view(np.uint64)
        assert r[5] == 200 and r[6] == np.uint64(2**64 - 300) and r[7] == 0xC0FFEE01
        out.close()

    def test_dynamic_shared_opt_in(self, dev, mod, stream):
        chunk = 16384  # 64 KiB of shared memory per block: needs the opt-in
        nblk = 3
        data = np.arange(chunk * nblk, dtype=np.uint32)
        d = _driver.DeviceBuffer.alloc(dev, data.nbytes)
        _driver.copy_htod(d, data, data.nbytes, stream)
        f = mod.function("cuzk_selftest_reverse_chunks")
        with pytest.raises(CudaError):
            f.launch(stream, nblk, 256, [d, ("I", chunk)], shmem=chunk * 4)
        f.set_max_dynamic_shared(chunk * 4)
        assert f.max_dynamic_shared == chunk * 4
        f.launch(stream, nblk, 256, [d, ("I", chunk)], shmem=chunk * 4)
        out = np.empty_like(data)
        _driver.copy_dtoh(out, d, data.nbytes, stream)
        assert np.array_equal(out, data.reshape(nblk, chunk)[:, ::-1].ravel())
        d.close()

    def test_cooperative_launch(self, dev, mod, stream):
        if not dev.cooperative_launch:
            pytest.skip("device has no cooperative launch")
        f = mod.function("cuzk_selftest_iota3")
        grid = f.occupancy(256) * dev.sm_count
        n = grid * 256 * 2 + 5
        d = _driver.DeviceBuffer.alloc(dev, n * 4)
        f.launch(stream, grid, 256, [d, ("I", n)], cooperative=True)
        out = np.empty(n, np.uint32)
        _driver.copy_dtoh(out, d, n * 4, stream)
        assert np.array_equal(out, (3 * np.arange(n, dtype=np.uint64) + 1).astype(np.uint32))
        d.close()

    def test_eight_threads_with_own_streams(self, dev, mod):
        iota = mod.function("cuzk_selftest_iota3")
        add = mod.function("cuzk_selftest_add_u64")
        pool = _driver.MemPool(dev)

        def worker(i):
            rng = np.random.default_rng(100 + i)
            with _driver.Stream(dev) as s, _driver.Event(dev) as ev:
                for it in range(6):
                    n = 50_000 + 977 * i + 13 * it
                    a = rng.integers(0, 2**64, size=n, dtype=np.uint64, endpoint=False)
                    b = rng.integers(0, 2**64, size=n, dtype=np.uint64, endpoint=False)
                    pin = _driver.PinnedBuffer(n * 8)
                    h = pin.asarray(np.uint64)
                    h[:] = a
                    da, db, dc, di = (pool.alloc(n * 8, s) for _ in range(4))
                    _driver.copy_htod(da, pin, n * 8, s)
                    _driver.copy_htod(db, b, n * 8, s)
                    add.launch(s, 64, 128, [dc, da, db, ("Q", n)])
                    iota.launch(s, 32, 256, [di, ("I", n)])
                    _driver.copy_dtoh(pin, dc, n * 8, s)
                    ev.record(s)
                    ev.synchronize()
                    assert np.array_equal(h, a + b), (i, it)
                    got = np.empty(n, np.uint32)
                    _driver.copy_dtoh(got, di, n * 4, s)
                    assert np.array_equal(got, (3 * np.arange(n, dtype=np.uint64) + 1).astype(np.uint32))
                    for x in (da, db, dc, di):
                        x.free(s)
                    del h
                    s.synchronize()
                    pin.close()
            return i

        assert run_threaded(worker, 8) == list(range(8))

    def test_get_module_from_threads_loads_once(self, dev, tmp_path, monkeypatch):
        from cuzk import _kernels
        monkeypatch.setenv("CUZK_CACHE_DIR", str(tmp_path))
        opts = ("-DCUZK_SELFTEST_THREADS=1",)
        mods = run_threaded(lambda i: _kernels.get_module(dev, "selftest", opts), 8)
        assert all(m is mods[0] for m in mods)
        assert len(list(tmp_path.glob("*.cubin"))) == 1

    def test_interpreter_exit_is_quiet(self, tmp_path):
        code = textwrap.dedent("""
            import numpy as np
            from cuzk._native import _driver as d
            from cuzk import _kernels
            dev = d.Device(0)
            s = d.Stream(dev)
            ev = d.Event(dev)
            pool = d.MemPool(dev, create=True)
            buf = pool.alloc(1 << 20, s)
            plain = d.DeviceBuffer.alloc(dev, 4096)
            pin = d.PinnedBuffer(4096, dev)
            view = pin.asarray(np.uint32)
            arr = np.zeros(1024, np.uint32)
            reg = d.register_host(arr, dev)
            mod = _kernels.get_module(dev, "selftest")
            mod.function("cuzk_selftest_iota3").launch(s, 1, 32, [buf, ("I", 32)])
            ev.record(s)
            KEEP = [dev, s, ev, pool, buf, plain, pin, view, reg, mod]
            print("ok")
        """)
        env = dict(os.environ, CUZK_CACHE_DIR=str(tmp_path))
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                           env=env)
        assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
        assert r.stderr == ""

