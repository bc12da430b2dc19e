"""Whole proofs on the GPU (issue 8's test list): CUDA bytes == CPU bytes for the same (r, s) at
2^10 … 2^18, a 2^20 proof that verifies, and many threads proving at once on one device over one
resident key.  The thread test also runs on the CPU backend (in CI), which checks its own logic."""
import threading

import pytest

from cuzk._circuit import porep_like
from cuzk._keygen import keygen_random
from cuzk._prover import prove, public_inputs
from cuzk._constants import FR_MODULUS as R_MODULUS
from cuzk._errors import FormatError
from cuzk._verifier import verify
from helpers import unsatisfied_witness


def _cuda_ok():
    from cuzk._backend import cuda_available
    return cuda_available()[0]


needs_gpu = [pytest.mark.gpu, pytest.mark.skipif(not _cuda_ok(), reason="no usable CUDA device")]


def _circuit(log_n, seed):
    r1cs, inputs, aux = porep_like(log_n, seed)
    pk = keygen_random(r1cs, seed=seed, backend="auto")     # the GPU keygen where there is one
    return pk, r1cs.assignment(inputs, aux)


@pytest.mark.parametrize("log_n", [10, 12, 14, 16, 18])
@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_ok(), reason="no usable CUDA device")
def test_cuda_proof_bytes_equal_cpu(log_n):
    pk, asg = _circuit(log_n, log_n)
    r, s = 1000 + log_n, 2000 + log_n
    t = {}
    gpu = prove(pk, asg, r, s, backend="cuda", timings=t)
    assert t["backend"] == "cuda" and t["device"].startswith("cuda:")
    assert gpu == prove(pk, asg, r, s, backend="cpu")
    assert verify(pk.vk, gpu, public_inputs(asg))


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_ok(), reason="no usable CUDA device")
def test_cuda_proof_2_20_verifies():
    pk, asg = _circuit(20, 20)
    proof = prove(pk, asg, backend="cuda", verify=True)
    assert len(proof) == 192 and verify(pk.vk, proof, public_inputs(asg))
    # the check can fail: the same proof against other public inputs (well-formed: False), and a
    # flipped byte (no longer a point on the curve, or a different one: FormatError or False)
    pub = public_inputs(asg)
    assert not verify(pk.vk, proof, [(pub[0] + 1) % R_MODULUS] + pub[1:])
    other = bytearray(proof)
    other[100] ^= 1
    try:
        assert not verify(pk.vk, bytes(other), pub)
    except FormatError:
        pass


@pytest.mark.parametrize("backend", ["cpu", pytest.param("cuda", marks=needs_gpu)])
def test_threads_prove_at_once_on_one_resident_key(backend):
    """Four threads, each with its own context, prove eight partitions at once through one stage
    object and one key loaded once: every proof has the bytes the CPU gives alone."""
    from cuzk._stages import stages_for
    pk, asg = _circuit(12 if backend == "cpu" else 16, 7)
    rs = [(10 + i, 20 + i) for i in range(8)]
    want = [prove(pk, asg, r, s, backend="cpu") for r, s in rs]
    st = stages_for(backend, threads=2)
    key = st.load_key(pk)
    out, errors = [None] * len(rs), []
    start = threading.Barrier(4)

    def worker(w):
        ctx = st.context(name=f"t{w}")
        try:
            start.wait(60)
            for i in range(w, len(rs), 4):
                part = st.prepare(key, asg, ctx, *rs[i])
                try:
                    st.run(part).synchronize()
                    out[i] = st.finish(part, verify=True)
                except BaseException:
                    st.abort(part)
                    raise
        except BaseException as e:                     # reported by the main thread
            errors.append(e)
        finally:
            ctx.close()
    threads = [threading.Thread(target=worker, args=(w,), daemon=True) for w in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(600)
    try:
        assert not any(th.is_alive() for th in threads), "a prover thread hung"
        assert not errors, errors[0]
        assert out == want
    finally:
        key.release()


@pytest.mark.parametrize("backend", ["cpu", pytest.param("cuda", marks=needs_gpu)])
def test_prover_threads_on_one_key(backend):
    """cuzk.Prover (the key loaded once, with the engine's precompute "auto" on CUDA): four
    threads × two proofs through Prover.prove (the early H path on CUDA), every proof the bytes
    the CPU gives alone, verified."""
    from cuzk._prover import Prover
    pk, asg = _circuit(12 if backend == "cpu" else 16, 9)
    rs = [(30 + i, 40 + i) for i in range(8)]
    want = [prove(pk, asg, r, s, backend="cpu") for r, s in rs]
    out, errors = [None] * len(rs), []
    start = threading.Barrier(4)
    with Prover(pk, backend=backend, threads=2) as pr:
        def worker(w):
            try:
                start.wait(60)
                for i in range(w, len(rs), 4):
                    out[i] = pr.prove(asg, *rs[i], verify=True)
            except BaseException as e:                 # reported by the main thread
                errors.append(e)
        threads = [threading.Thread(target=worker, args=(w,), daemon=True) for w in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(600)
        assert not any(th.is_alive() for th in threads), "a prover thread hung"
    assert not errors, errors[0]
    assert out == want
    assert all(verify(pk.vk, p, public_inputs(asg)) for p in out[:2])


@pytest.mark.parametrize("log_n", [10, 14])
@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_ok(), reason="no usable CUDA device")
def test_cuda_keygen_bytes_equal_cpu(log_n, monkeypatch):
    """The GPU fixed-base pass (pinned double buffers) gives the CPU keygen's key, byte for
    byte; small chunks make both pinned slots turn over several times."""
    from cuzk import _cuda_fixed_base
    monkeypatch.setattr(_cuda_fixed_base, "_CHUNK", 1000)
    r1cs, _, _ = porep_like(log_n, log_n)
    assert keygen_random(r1cs, seed=7, backend="cuda") == keygen_random(r1cs, seed=7, backend="cpu")


@pytest.mark.parametrize("early", [True, False], ids=["early", "normal"])
@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_ok(), reason="no usable CUDA device")
def test_cuda_side_stream_bytes_equal_cpu(early):
    """``streams=2`` (batch additions and tails concurrent with H on a second stream): the CPU
    backend's bytes at 2^16, on both paths, and the timings name the side stream."""
    from cuzk._stages._cuda import CudaStages
    pk, asg = _circuit(16, 16)
    st = CudaStages(streams=2, early_h=early)
    ctx = st.context()
    key = st.load_key(pk)
    try:
        got, t = st.prove_one(key, asg, ctx, 31, 32, verify=True)
    finally:
        key.release()
        ctx.close()
    assert got == prove(pk, asg, 31, 32, backend="cpu")
    assert t["gpu:side"] > 0 and "gpu:side_wait" in t


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_ok(), reason="no usable CUDA device")
def test_cuda_key_release_gives_its_device_memory_back():
    """A resident key's load and release leave the device's free memory where it was, its H
    twiddle tables included (session 46: a 2^27 key's 8 GiB of tables outlived it, and the next
    engine's budget admitted memory the card did not have)."""
    from cuzk import _cuda_ntt
    from cuzk._stages._cuda import CudaStages
    pk, _ = _circuit(20, 20)
    st = CudaStages()
    st.load_key(pk, where="device").release()       # modules and constants loaded once
    st.trim()
    before = st.device.mem_info()[0]
    nst = _cuda_ntt._state(st.device)
    holds = nst.held_h_tables()                     # other tests' keys still loaded, if any
    key = st.load_key(pk, where="device")
    held = (20, key.deep_tables)
    tables = _cuda_ntt.h_tables_bytes(*held)
    assert nst.held_h_tables().get(held) == holds.get(held, 0) + 1 and tables >= 64 << 20
    key.release()
    st.trim()
    after = st.device.mem_info()[0]
    assert nst.held_h_tables() == holds
    assert abs(before - after) < tables // 4, (before, after, tables)


@pytest.mark.parametrize("chunk,h_buffers,c_upload", [(None, 4, "register"), (1 << 20, 4, "register"),
                                                       (1 << 20, 3, "register"), (1 << 20, 2, "register"),
                                                       (1 << 20, 2, "ring")],
                         ids=["1GiB", "1MiB", "1MiB-h3", "1MiB-h2", "1MiB-h2-ring"])
@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_ok(), reason="no usable CUDA device")
def test_cuda_streamed_key_in_chunks_bytes_equal_cpu(chunk, h_buffers, c_upload):
    """A key kept in host memory and streamed through slots of ``stream_chunk`` bytes (1 MiB:
    5,440 points, so every query of a 2^16 key takes several chunks): the CPU backend's bytes,
    twice on one context (the slots and the pool reused); also with H in a, b, c's buffers
    (``h_buffers=3``: in-place bit-reversals, h in a's region) and in a's and b's (2: c uploaded
    into a's during the region, by DMA from c page-locked in place or through the ring:
    ``c_upload``); no page-lock of c outlives its partition."""
    from cuzk._stages import _cuda as sc
    from cuzk._stages._cuda import CudaStages, StreamedKey
    pk, asg = _circuit(16, 17)
    st = CudaStages(stream_chunk=chunk, h_buffers=h_buffers, c_upload=c_upload)
    ctx = st.context()
    key = st.load_key(pk, where="host")
    try:
        assert isinstance(key, StreamedKey) and key.h_buffers == h_buffers
        assert len(key.chunks("h")) == (1 if chunk is None else -(-len(pk.h) // key.chunk_points))
        got = [st.prove_one(key, asg, ctx, 41 + i, 42 + i, verify=True)[0] for i in range(2)]
        assert all(k[0] != asg.c.ctypes.data for k in sc._pins)    # the key's queries only
    finally:
        key.release()
        ctx.close()
    assert not sc._pins
    assert got == [prove(pk, asg, 41 + i, 42 + i, backend="cpu") for i in range(2)]


@pytest.mark.parametrize("resident,split_side", [(("h", "l"), False), (("h", "l"), True),
                                                 (("a", "b_g1", "b_g2"), False)])
@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_ok(), reason="no usable CUDA device")
def test_cuda_partly_resident_key_bytes_equal_cpu(resident, split_side):
    """A key split by ``stream_plan``'s rule (``StreamedKey(resident=...)``): the resident queries
    read in place, the others streamed through 1 MiB slots (with H resident and ``split_side``,
    on the side stream beside H's MSM); the CPU backend's bytes, twice."""
    from cuzk._stages._cuda import CudaStages, StreamedKey
    pk, asg = _circuit(16, 23)
    st = CudaStages(split_side=split_side)
    ctx = st.context()
    key = StreamedKey(pk, st.device, st.pool, None, 1 << 20, resident=resident, h_head=split_side)
    try:
        assert all(len(key.chunks(q)) == 1 for q in resident)
        assert all(len(key.chunks(q)) > 1 for q in ("h", "l", "a") if q not in resident)
        got = [st.prove_one(key, asg, ctx, 51 + i, 52, verify=True)[0] for i in range(2)]
    finally:
        key.release()
        ctx.close()
    assert got == [prove(pk, asg, 51 + i, 52, backend="cpu") for i in range(2)]


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_ok(), reason="no usable CUDA device")
def test_cuda_streamed_key_slots_shared_by_threads():
    """One streamed key (1 MiB slots, the key's own) used by two threads with a context each, three
    partitions apiece: each region's refills of a slot wait for the other worker's last kernels
    on it (events across streams), and every proof has the CPU backend's bytes."""
    import threading
    from cuzk._stages._cuda import CudaStages, StreamedKey
    pk, asg = _circuit(16, 19)
    st = CudaStages(stream_chunk=1 << 20)
    key = st.load_key(pk, where="host")
    ctxs = [st.context(name=f"w{i}") for i in range(2)]
    got, errors = {}, []

    def worker(i):
        try:
            for j in range(3):
                r = 60 + 10 * i + j
                got[r] = st.prove_one(key, asg, ctxs[i], r, 7, verify=True)[0]
        except Exception as e:                    # noqa: BLE001 (reported below)
            errors.append(e)
    try:
        assert isinstance(key, StreamedKey) and len(key.chunks("h")) >= 2
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
    finally:
        key.release()
        for c in ctxs:
            c.close()
    assert not errors and len(got) == 6
    for r, proof in got.items():
        assert proof == prove(pk, asg, r, 7, backend="cpu")


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_ok(), reason="no usable CUDA device")
def test_cuda_two_streamed_keys_of_one_pk():
    """Two streamed keys of the same ProvingKey at once (a Prover beside an engine, or one per
    device): the driver refuses a second cuMemHostRegister of the same range, so they share one
    page-lock; each proves with the CPU's bytes, the second after the first is released."""
    from cuzk._stages import _cuda as sc
    from cuzk._stages._cuda import CudaStages
    pk, asg = _circuit(14, 23)
    st = CudaStages(key_where="host", stream_chunk=1 << 18)
    ctx = st.context()
    k1 = st.load_key(pk)
    try:
        k2 = st.load_key(pk)
        try:
            a = st.prove_one(k1, asg, ctx, 71, 72, verify=True)[0]
            k1.release()
            b = st.prove_one(k2, asg, ctx, 73, 74, verify=True)[0]
        finally:
            k2.release()
    finally:
        k1.release()
        ctx.close()
    assert not sc._pins
    assert [a, b] == [prove(pk, asg, 71, 72, backend="cpu"), prove(pk, asg, 73, 74, backend="cpu")]


def _cuda_devices():
    if not _cuda_ok():
        return 0
    from cuzk._native import _driver
    return _driver.device_count()


@pytest.mark.parametrize("where", ["device", "host"])
@pytest.mark.gpu
@pytest.mark.skipif(_cuda_devices() < 2, reason="needs two CUDA devices")
def test_engine_on_two_gpus(where):
    """cuzk.Engine over two GPUs, two workers each, the key resident on both or streamed to both
    from the same host arrays: every proof has the CPU backend's bytes and both devices prove."""
    import cuzk
    pk, asg = _circuit(16, 29)
    rs = [(80 + i, 90 + i) for i in range(8)]
    with cuzk.Engine(backend="cuda", devices=2, workers_per_gpu=2, lock_mode="two-lock",
                     stage_options={"key_where": where}) as eng:
        key = eng.load(pk, progress=False)
        out = eng.submit(key, [asg] * len(rs), randomizers=rs).result(600)
        ran = {r.device for r in eng.timeline.records() if r.kind == "stage"
               and r.name in ("run", "early_head")}
        st = eng.status()
    assert out == b"".join(prove(pk, asg, r, s, backend="cpu") for r, s in rs)
    assert ran == {0, 1} and st["keys"][0]["where"] == [where] * 2


@pytest.mark.parametrize("where", ["device", "host"])
@pytest.mark.parametrize("mode,workers", [("two-lock", 2), ("overlap", 2), ("overlap", 3)])
@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_ok(), reason="no usable CUDA device")
def test_engine_regions_on_one_gpu(mode, workers, where):
    """cuzk.Engine on one GPU, the key resident or streamed: every proof has the CPU backend's
    bytes; with ``overlap`` (the compute lock released once a region is enqueued) the regions of
    different partitions run on the GPU at once, and nothing of a partition is reused early."""
    import cuzk
    pk, asg = _circuit(16, 31)
    rs = [(100 + i, 110 + i) for i in range(8)]
    with cuzk.Engine(backend="cuda", devices=1, workers_per_gpu=workers, lock_mode=mode,
                     stage_options={"key_where": where}) as eng:
        key = eng.load(pk, progress=False)
        out = eng.submit(key, [asg] * len(rs), randomizers=rs).result(600)
    assert out == b"".join(prove(pk, asg, r, s, backend="cpu") for r, s in rs)


@pytest.mark.parametrize("early", [True, False], ids=["early", "normal"])
@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_ok(), reason="no usable CUDA device")
def test_cuda_row_check_on_failure(early):
    """``row_check="on_failure"`` on the GPU at 2^14: a verified good partition skips the row
    check and has the CPU's bytes; a witness that leaves a row unsatisfied raises
    UnsatisfiedAssignmentError with that row once its proof fails verification."""
    from cuzk._errors import UnsatisfiedAssignmentError
    from cuzk._stages._cuda import CudaStages
    pk, asg, bad, row = unsatisfied_witness(14, 14, backend="auto")
    st = CudaStages(early_h=early, row_check="on_failure")
    ctx = st.context()
    key = st.load_key(pk)
    try:
        got, t = st.prove_one(key, asg, ctx, 41, 42, verify=True)
        with pytest.raises(UnsatisfiedAssignmentError) as e:
            st.prove_one(key, bad, ctx, 41, 42, verify=True)
    finally:
        key.release()
        ctx.close()
    assert got == prove(pk, asg, 41, 42, backend="cpu") and "row_check" not in t
    assert e.value.row == row


_LOCAL_PROBE = r"""
import json
import numpy as np
from cuzk import _cuda_batch as B, _cuda_msm as M
from cuzk._cuda_state import pools_reserved_bytes
from cuzk._native import _r1cs
from cuzk._native._driver import Device
import cuzk._stages._cuda as sc
dev = Device.get(0)
local = sc.local_memory_bytes(dev)          # loads the proving modules: their code counted before
budget = sc.device_budget(dev)
held = sc.hold_local_memory(dev, budget)
f0, p0 = dev.mem_info()[0], pools_reserved_bytes(dev)
k = np.random.default_rng(1).integers(0, 2**64, size=(4096, 4), dtype=np.uint64)
k[:, 3] &= np.uint64((1 << 60) - 1)
bits = np.full(4096 // 64, 0x5555555555555555, np.uint64)
for g in ("g1", "g2"):          # every level 0 and batch addition (the largest frames among them)
    pts = _r1cs.fixed_base_mul(g, k, threads=0)
    for b in M.BALANCES:
        (M.msm_g1 if g == "g1" else M.msm_g2)(pts, k, balance=b)
    for kind in ("xyzz", "affine", "balanced"):
        B.batch_add(pts, bits, g, kind=kind)
dev.synchronize()
drop = (f0 - dev.mem_info()[0]) - (pools_reserved_bytes(dev) - p0)
key = (dev.ordinal, dev.context)
print(json.dumps({"local": local, "drop": drop, "held": held, "taken": sc._context_bytes[key],
                  "margin": sc._BUDGET_MARGIN,
                  "reserved": [n for w, n in budget.snapshot()["reservations"]
                               if w == "context and driver local memory"]}))
"""


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_ok(), reason="no usable CUDA device")
def test_driver_local_memory_count_matches_the_device():
    """In a fresh process, what the device loses once every MSM level 0 and batch addition has run
    (less what cuzk's pool took) is the local memory ``local_memory_bytes`` counts from the
    modules' frames (cuModuleEnumerateFunctions on the real driver, lazily loaded functions
    included; H100: 2.33 GB, bench/RESULTS.md sessions 47 and 49), and the device budget holds
    it, less the margin the context left, as one "context and driver local memory" reservation."""
    import json
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", _LOCAL_PROBE], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["local"] > 0, got                 # the G2 affine level 0's frame is ~9.6 KB
    assert abs(got["drop"] - got["local"]) <= 0.05 * got["local"] + (64 << 20), got
    want = max(0, got["taken"] + got["local"] - got["margin"])
    assert got["held"] == want and got["reserved"] == ([want] if want else []), got
