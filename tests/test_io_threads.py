"""One atomic writer (cuzk._io.atomic_write) and one thread-count rule (cuzk._args.threads_arg),
checked through every entry point that uses them."""
import os
import threading

import numpy as np
import pytest

from cuzk._args import threads_arg
from cuzk._io import atomic_write


# ---------------------------------------------------------------------------- thread rule

@pytest.mark.parametrize("value,want", [(None, 0), (0, 0), (1, 1), (7, 7), (np.int64(3), 3)])
def test_threads_rule_accepts(value, want):
    assert threads_arg(value) == want


@pytest.mark.parametrize("value", [-1, -8, np.int32(-2)])
def test_threads_rule_rejects_negative(value):
    with pytest.raises(ValueError, match="threads must be a non-negative integer or None"):
        threads_arg(value)


@pytest.mark.parametrize("value", [1.0, 2.5, "4", True, False, [2]])
def test_threads_rule_rejects_non_integers(value):
    with pytest.raises(TypeError, match="threads must be a non-negative integer or None"):
        threads_arg(value)


def _fr_rows(n):
    return np.arange(4 * n, dtype=np.uint64).reshape(n, 4) % 1000


def _entry_points():
    """Callables f(threads) over every native module and the Python front ends."""
    from cuzk import _primitives
    from cuzk._native import _field, _msm, _ntt, _prep, _r1cs, _sparse
    from cuzk._stages import CpuStages
    g1 = _field.generator("g1")[None, :]
    sc = np.array([[3, 0, 0, 0]], dtype=np.uint64)
    z = np.zeros((1, 4), np.uint64)
    w = np.zeros(1, np.uint64)
    return {
        "_field.to_mont": lambda t: _field.to_mont(_fr_rows(4), "fr", threads=t),
        "_msm.msm": lambda t: _msm.msm(g1, sc, "g1", t),
        "_ntt.ntt_mont": lambda t: _ntt.ntt_mont(_fr_rows(8), threads=t),
        "_r1cs.geometric": lambda t: _r1cs.geometric(z[0], z[0], 4, threads=t),
        "_prep.prep_msm": lambda t: _prep.prep_msm(z, z, w, w, w, t),
        "_sparse.snarkjs_h": lambda t: _sparse.snarkjs_h(_fr_rows(4), _fr_rows(4), _fr_rows(4),
                                                         1, threads=t),
        "cuzk.ntt": lambda t: _primitives.ntt(np.zeros((8, 32), np.uint8), threads=t),
        "CpuStages": lambda t: CpuStages(threads=t),
    }


@pytest.mark.parametrize("name", sorted(_entry_points()))
def test_every_entry_point_follows_the_rule(name):
    f = _entry_points()[name]
    f(None)
    f(0)
    f(1)
    with pytest.raises(ValueError, match="threads must be a non-negative integer"):
        f(-1)
    with pytest.raises(TypeError, match="threads must be a non-negative integer"):
        f(1.5)


# ---------------------------------------------------------------------------- atomic_write

def _leftovers(d, keep):
    return sorted(p for p in os.listdir(d) if p != keep)


def test_atomic_write_bytes_str_and_writer(tmp_path):
    p = tmp_path / "out.bin"
    atomic_write(p, b"abc")
    assert p.read_bytes() == b"abc"
    atomic_write(str(p), "héllo")
    assert p.read_bytes() == "héllo".encode()
    atomic_write(p, lambda f: (f.write(b"1"), f.write(b"23")))
    assert p.read_bytes() == b"123"
    assert _leftovers(tmp_path, "out.bin") == []


def test_atomic_write_follows_umask(tmp_path):
    old = os.umask(0o027)
    os.umask(old)
    p = tmp_path / "m.bin"
    atomic_write(p, b"x")
    assert (p.stat().st_mode & 0o777) == 0o666 & ~old


def test_atomic_write_streaming_npz(tmp_path):
    """np.savez into the writer's file object: no '.npz' appended, loadable."""
    p = tmp_path / "a.npz"
    atomic_write(p, lambda f: np.savez(f, x=np.arange(5)))
    assert np.load(p)["x"].tolist() == [0, 1, 2, 3, 4]
    assert _leftovers(tmp_path, "a.npz") == []


class _Boom(Exception):
    pass


@pytest.mark.parametrize("exc", [_Boom, KeyboardInterrupt, OSError])
def test_atomic_write_error_leaves_old_file_and_no_temp(tmp_path, exc):
    p = tmp_path / "keep.bin"
    p.write_bytes(b"old")

    def writer(f):
        f.write(b"partial new content")
        raise exc("stop")

    with pytest.raises(exc):
        atomic_write(p, writer)
    assert p.read_bytes() == b"old"
    assert _leftovers(tmp_path, "keep.bin") == []


def test_atomic_write_missing_dir_and_directory_target(tmp_path):
    with pytest.raises(FileNotFoundError) as ei:
        atomic_write(tmp_path / "nodir" / "x.bin", b"x")
    assert ei.value.filename == str(tmp_path / "nodir" / "x.bin")
    d = tmp_path / "adir"
    d.mkdir()
    with pytest.raises(IsADirectoryError):
        atomic_write(d, b"x")
    assert _leftovers(tmp_path, "adir") == [] and os.listdir(d) == []


def test_atomic_write_rejects_bad_data(tmp_path):
    with pytest.raises(TypeError):
        atomic_write(tmp_path / "x", 12345)
    assert os.listdir(tmp_path) == []


def test_atomic_write_concurrent_writers_never_mix(tmp_path):
    """8 threads x 20 writes of distinct 256 KiB payloads to one path: a reader only ever sees
    one whole payload, and no temporary file survives."""
    p = tmp_path / "shared.bin"
    size = 256 << 10
    payloads = [bytes([k]) * size for k in range(8)]
    atomic_write(p, payloads[0])
    stop = threading.Event()
    seen, errors = set(), []

    def reader():
        while not stop.is_set():
            data = p.read_bytes()
            if len(data) != size or data.count(data[:1]) != size:
                errors.append(len(data))
            seen.add(data[:1])

    def writer(k):
        try:
            for _ in range(20):
                atomic_write(p, payloads[k])
        except BaseException as e:  # forwarded to the main thread
            errors.append(e)

    r = threading.Thread(target=reader)
    r.start()
    ws = [threading.Thread(target=writer, args=(k,)) for k in range(8)]
    for t in ws:
        t.start()
    for t in ws:
        t.join()
    stop.set()
    r.join()
    assert errors == []
    assert p.read_bytes() in payloads
    assert _leftovers(tmp_path, "shared.bin") == []


# ---------------------------------------------------------------------------- the writers

def _small_assignment():
    from cuzk._assignment import Assignment, Density
    from cuzk._constants import fr_ints_to_mont
    a = fr_ints_to_mont([2, 3])
    c = fr_ints_to_mont([4, 9])
    none = Density.from_bools(np.zeros(0, bool))
    return Assignment(a, a.copy(), c, fr_ints_to_mont([1]), np.zeros((0, 4), np.uint64),
                      none, Density.from_bools(np.ones(1, bool)), none)


def test_save_npz_is_atomic(tmp_path, monkeypatch):
    from cuzk._assignment import Assignment
    asg = _small_assignment()
    p = tmp_path / "a.npz"
    asg.save_npz(p)
    good = p.read_bytes()
    assert Assignment.load_npz(p).c.tobytes() == asg.c.tobytes()

    def broken_savez(f, **arrays):
        f.write(b"PK\x03\x04 half a zip")
        raise _Boom("disk full")

    monkeypatch.setattr(np, "savez", broken_savez)
    with pytest.raises(_Boom):
        asg.save_npz(p)
    assert p.read_bytes() == good
    assert _leftovers(tmp_path, "a.npz") == []


def test_kernel_cache_entry_goes_through_atomic_write(tmp_path, monkeypatch):
    from cuzk import _kernels
    calls = []
    monkeypatch.setattr(_kernels, "atomic_write",
                        lambda path, data: (calls.append(path), atomic_write(path, data)))
    path = str(tmp_path / "kc" / "k.cubin")
    _kernels._write_entry(path, "00" * 32, b"payload")
    assert calls == [path]
    assert _kernels._read_entry(path, "00" * 32) == b"payload"
    assert os.listdir(tmp_path / "kc") == ["k.cubin"]
