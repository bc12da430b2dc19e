"""Fixed-base batch multiplication on a CUDA device, out[i] = k_i·G (parameter generation;
kernels in ``cuzk/cu/ec/fixed_base.cu``, program "fixed_base").

Signed w-bit windows over a device-resident table of j·2^(w·t)·G (built once per base and
width on the CPU by ``cuzk._native._r1cs.fixed_base_mul`` and kept per device): at most
⌈256/w⌉ mixed XYZZ additions per scalar, then affine through one batch inversion per GPU
thread (Montgomery's trick).  Output bytes = ``cuzk._native._r1cs.fixed_base_mul``'s.

Host side: chunks of ``_CHUNK`` scalars go through two pinned slots each way; the parallel
host copies (pool, GIL released) of chunk i's scalars in and chunk i−1's points out overlap
the GPU's work on chunk i, and the DMA runs at pinned speed (keygen at 2^27 moves 14 GB in
and 42 GB out for G1).
"""
from __future__ import annotations

import threading

import numpy as np

from ._cuda_pending import AFFINE_WORDS
from ._cuda_state import DeviceState, state_for

__all__ = ["fixed_base_mul", "window_bits", "table_scalars"]

# program "fixed_base": cuzk._kernels.PROGRAMS (the static table)

_FIELD_WORDS = {"g1": 6, "g2": 12}
_THREADS = 128
_BLOCKS_PER_SM = 8
_CHUNK = 1 << 22               # points per launch (bounds the 3-field-element scratch per point)


def _driver():
    from ._native import _driver as d
    return d


class _State(DeviceState):
    def __init__(self, driver, device):
        super().__init__(driver, device, "fixed_base")
        self.tables = {}       # (group, base bytes, w) -> DeviceBuffer


_states = {}
_states_lock = threading.Lock()


def _state(device):
    return state_for(_states, _states_lock, _driver(), device, lambda dev: _State(_driver(), dev))


def window_bits(n):
    """Window width for n scalars: the table (⌈256/w⌉·2^(w−1) points, built on the CPU) stays
    small next to the n·⌈256/w⌉ additions."""
    if n < 1 << 12:
        return 6
    if n < 1 << 18:
        return 10
    return 13 if n < 1 << 22 else 16


def table_scalars(w):
    """Canonical scalars (j·2^(w·t) mod r) of the table entries, row t = window t, j = 1..2^(w−1):
    uint64 (⌈256/w⌉·2^(w−1), 4)."""
    from ._native._field import FR_MODULUS as R
    K, half = -(-256 // w), 1 << (w - 1)
    vals = [(j << (w * t)) % R for t in range(K) for j in range(1, half + 1)]
    raw = b"".join(v.to_bytes(32, "little") for v in vals)
    return np.frombuffer(raw, dtype="<u8").reshape(len(vals), 4).astype(np.uint64)


def _table(st, group, base, w, stream):
    key = (group, None if base is None else base.tobytes(), w)
    buf = st.tables.get(key)
    if buf is None:
        with st._lock:
            buf = st.tables.get(key)
            if buf is None:
                from ._native import _field, _r1cs
                ks = _field.to_mont(table_scalars(w), "fr")
                tab = np.ascontiguousarray(_r1cs.fixed_base_mul(group, ks, base=base))
                buf = st.pool.alloc(tab.nbytes, stream)
                _driver().copy_htod(buf, tab, tab.nbytes, stream)
                stream.synchronize()       # the table is shared by later calls on other streams
                st.tables[key] = buf
    return buf


def fixed_base_mul(base, scalars, group, device=None, *, montgomery=False, window=None,
                   threads=None):
    """out[i] = scalars[i]·base on the GPU, affine.

    Parameters
    ----------
    base : numpy.ndarray or None
        Affine Montgomery point uint64 (12,) / (24,), not infinity; None: the standard generator.
    scalars : numpy.ndarray
        uint64 (n, 4), canonical little-endian Fr scalars (< r); with ``montgomery=True``
        Montgomery Fr (the layout keygen's QAP evaluations come in, and what
        ``cuzk._native._r1cs.fixed_base_mul`` takes).
    group : {"g1", "g2"}
    device : Device, int or None
    window : int or None
        Window width 2..16 (default ``window_bits(n)``).
    threads : int or None
        CPU threads of the host copies and the input check (None: the thread's budget, else
        the whole pool).

    Returns
    -------
    numpy.ndarray
        uint64 (n, 12) / (n, 24): affine Montgomery points in the CPU layout (zero scalar:
        all-zero), the bytes of the CPU fixed-base path.

    Raises
    ------
    ValueError
        Bad group, base, shapes or dtypes, a scalar >= r (first index named), a bad window.
    """
    if group not in ("g1", "g2"):
        raise ValueError(f"group must be 'g1' or 'g2', got {group!r}")
    words = AFFINE_WORDS[group]
    if (not isinstance(scalars, np.ndarray) or scalars.dtype != np.uint64 or scalars.ndim != 2
            or scalars.shape[1] != 4):
        raise ValueError(f"scalars: expected a uint64 array of shape (n, 4), got "
                         f"{getattr(scalars, 'dtype', type(scalars).__name__)} "
                         f"{getattr(scalars, 'shape', '')}")
    if base is not None:
        base = np.ascontiguousarray(base, dtype=np.uint64).reshape(-1)
        if base.shape[0] != words:
            raise ValueError(f"base must hold {words} uint64 limbs for {group}")
        if not base.any():
            raise ValueError("base must not be the point at infinity")
    n = scalars.shape[0]
    w = window_bits(n) if window is None else int(window)
    if not 2 <= w <= 16:
        raise ValueError(f"window must be in 2..16, got {w}")
    out = np.empty((n, words), dtype=np.uint64)
    if n == 0:
        return out
    scalars = np.ascontiguousarray(scalars)
    from ._native import _r1cs
    bad = _r1cs.fr_first_unreduced(scalars, threads=threads)
    if bad >= 0:
        raise ValueError(f"scalars[{bad}] is not a {'Montgomery' if montgomery else 'canonical'} "
                         f"Fr element (>= r)")

    from ._native import _pool
    d = _driver()
    st = _state(device)
    s = st.streams()[0]
    table = _table(st, group, base, w, s)
    fn = st.fn(f"cuzk_fixed_base_{group}")
    fw = _FIELD_WORDS[group] * 8
    m = min(n, _CHUNK)
    d_k = st.pool.alloc(m * 32, s)
    d_out = st.pool.alloc(m * words * 8, s)
    d_tmp = st.pool.alloc(m * 3 * fw, s)
    pins, evs, h_k, h_out = [], [], [], []
    try:
        for _ in range(2):
            pins.append((d.PinnedBuffer(m * 32, st.device),
                         d.PinnedBuffer(m * words * 8, st.device)))
            evs.append(d.Event(st.device, timing=False))
            h_k.append(pins[-1][0].asarray(np.uint64, (m, 4)))
            h_out.append(pins[-1][1].asarray(np.uint64, (m, words)))

        def drain(j, lo, cnt):
            evs[j].synchronize()                      # chunk's points are in slot j
            _pool.copy_into(out[lo:lo + cnt], h_out[j][:cnt], threads)

        pending = None
        for i, lo in enumerate(range(0, n, m)):
            j, cnt = i % 2, min(m, n - lo)
            # slot j's last chunk (i − 2) is done: drained in the previous iteration
            _pool.copy_into(h_k[j][:cnt], scalars[lo:lo + cnt], threads)
            d.copy_htod(d_k, h_k[j], cnt * 32, s)
            blocks = max(1, min(st.device.sm_count * _BLOCKS_PER_SM, -(-cnt // _THREADS)))
            fn.launch(s, blocks, _THREADS,
                      [("P", d_out.ptr), ("P", d_tmp.ptr), ("P", table.ptr), ("P", d_k.ptr),
                       ("Q", cnt), ("I", w), ("I", 1 if montgomery else 0)])
            d.copy_dtoh(h_out[j], d_out, cnt * words * 8, s)
            evs[j].record(s)
            if pending is not None:
                drain(*pending)                       # overlaps this chunk's kernel
            pending = (j, lo, cnt)
        drain(*pending)
    finally:
        s.synchronize()
        for b in (d_k, d_out, d_tmp):
            b.free(s)
        for e in evs:
            e.close()
        h_k.clear()                                   # the views go before their buffers
        h_out.clear()
        for pair in pins:
            for b in pair:
                b.close()
    return out
