"""NTT family and the H stage over BLS12-381 Fr on a CUDA device.

Conventions (the same as the CPU ``cuzk._native._ntt``): values are NumPy uint64
arrays of shape (n, 4), Montgomery form (R = 2^256), n = 2^k.  The forward
transform evaluates at ω^i with ω = 7^((r-1)/n); ``coset`` evaluates at 7·ω^i;
``inverse`` undoes the matching forward transform (1/n included).

Kernels: ``cuzk/cu/ntt/ntt.cu`` (program "ntt").  A transform of size 2^k is 1
(k <= 11), 2 (k <= 20) or 3 passes over memory; each pass does up to 10 levels
of the remainder tree in shared memory with per-node twiddles from a
heap-ordered table (n Fr per table, 4 GiB at 2^27), computed once per device,
size and kind and kept resident until ``release()`` (the H stage may read deep tables
instead: n/8 entries and a small tail, the three deepest levels' twiddles computed; ``h_deep``).
Bit-reversals are folded into the first or last pass, so the public functions take and return
natural order at no extra pass.

The H stage (six transforms instead of bellperson's seven; ``h_consts`` has the
algebra) composes orders so no pass is spent on them: U = iNTT((a·b - γc)·α/n)
with the pointwise step and the bit-reversed gather in its first pass; for a and
b: iNTT (gather in, natural out) -> NTT on the coset w_2n·H (natural in,
bit-reversed out; its first pass fused with the iNTT's last); then A~·B~ times a
constant fused into the first pass of the coset-w iNTT (bit-reversed in, natural
out) whose last pass adds U.  The inverse transforms run unscaled and the 1/n
factors fold into the pointwise constants.  16 kernel launches at 2^27
(3 + 5 + 5 + 3 passes).
"""

import os
import threading

import numpy as np

from ._cuda_state import DeviceState, state_for

__all__ = ["MAX_LOG_SIZE", "R_MODULUS", "COSET_GENERATOR", "ntt", "ntt_device", "h_stage",
           "h_stage_device", "h_stage_inplace", "h_stage_abc", "h_stage_ab", "snarkjs_h", "release",
           "pass_plan", "h_consts"]

from ._constants import FR_GENERATOR as COSET_GENERATOR, FR_MODULUS as R_MODULUS  # noqa: E402
from ._constants import fr_root_of_unity, fr_to_mont_int as _mont  # noqa: E402
#: largest supported transform, 2^MAX_LOG_SIZE (kernels allow up to 2^29; tables are n·32 bytes)
MAX_LOG_SIZE = 28

_R_TOP = R_MODULUS >> 192
_FR_BYTES = 32

# pass flags (cuzk/cu/ntt/ntt.cuh)
F_INV, F_FWD, F_LOAD_BITREV, F_STORE_BITREV, F_POINTWISE, F_SCALE_OUT = 1, 2, 4, 8, 16, 32
F_PLAIN_INV, F_PLAIN_FWD = 64, 128   # the table is plain: top-level twiddles are 1
F_PRODUCT, F_ADD_OUT = 256, 512
F_MIRROR_INV = 1024                  # inverse rounds on the w-coset forward table (no winv kept)
F_DEEP = 2048                        # deep tables: the round over bits 0..2 computes its twiddles
# The tables the H stage reads (and warm-up builds): its inverse coset transform reads wfwd
# mirrored (F_MIRROR_INV), so a domain of n keeps 2·n·32 bytes of tables, not 3.
H_TABLES = ("inv", "wfwd")
# CUZK_NTT_INV_W=table: the last transform reads a built inverse w table instead (measurement:
# the A/B of bench/gpu_round.sh winvab; the table is built on first use, 4 GiB at 2^27)
_INV_W_TABLE = os.environ.get("CUZK_NTT_INV_W", "mirror") == "table"
# Deep tables (F_DEEP, ntt.cuh deep_base): the H stage's tables keep the levels above the three
# deepest (n/8 entries and a small tail instead of n), and the round over the three deepest
# computes its twiddles: 1 GiB of tables instead of 8 at 2^27.  The H stage's callers choose
# (``deep=``; the CUDA stages: a key streamed from host memory, where device memory is short).
_DEEP_LEVELS = 3
# Tiles hold 2^11 elements (64 KiB of shared memory, two blocks per SM) up to 2^20 and
# 2^10 (32 KiB, four blocks per SM) for the 3-pass sizes: measured on an H200, 2^10
# tiles run 2^27 in 40.0 ms vs 43.6 ms (bench/gpu_ntt_notes.md).  Up to 2^11 the whole
# transform is one block.  CUZK_NTT_TILE_LOG=9..11 forces one tile size (experiments).
_TILE_LOG_ENV = os.environ.get("CUZK_NTT_TILE_LOG")
if _TILE_LOG_ENV is not None and not 9 <= int(_TILE_LOG_ENV) <= 11:
    raise ValueError(f"CUZK_NTT_TILE_LOG must be 9, 10 or 11, got {_TILE_LOG_ENV}")
_SINGLE_MAX_LOG = 11
# CUZK_NTT_EVEN_SPLIT=1: split the bits evenly over the passes (the first build's plan; A/B).
_EVEN_SPLIT = os.environ.get("CUZK_NTT_EVEN_SPLIT", "0") not in ("", "0")


def _tile_log(lg_n):
    if _TILE_LOG_ENV is not None:
        return int(_TILE_LOG_ENV)
    return 11 if lg_n <= 20 else 10


_PASS_SMEM_MAX = (1 << 11) * _FR_BYTES   # the pass kernel's largest dynamic shared memory

# program "ntt": cuzk._kernels.PROGRAMS (the static table)


def _driver():
    from ._native import _driver as d
    return d


# --------------------------------------------------------------------------- host-side math

def _rows(ints):
    """Python ints (canonical, < r) -> Montgomery uint64 array (k, 4)."""
    raw = b"".join(_mont(v).to_bytes(32, "little") for v in ints)
    return np.frombuffer(raw, dtype="<u8").reshape(-1, 4).astype(np.uint64)


def _powers(base, count):
    out, acc = [], 1
    for _ in range(count):
        out.append(acc)
        acc = acc * base % R_MODULUS
    return out


def pass_plan(lg_n):
    """The passes of a transform of size 2^lg_n, top bits first.

    Returns
    -------
    list of (S, LC, lo)
        Each pass covers bits [lo, lo+S) of the position with tiles of 2^LC
        sub-problems (one launch of ``cuzk_ntt_pass``).
    """
    if not 1 <= lg_n <= MAX_LOG_SIZE:
        raise ValueError(f"lg_n must be in [1, {MAX_LOG_SIZE}], got {lg_n}")
    tile = _tile_log(lg_n)
    if lg_n <= min(_SINGLE_MAX_LOG, tile):
        return [(lg_n, 0, 0)]
    k = 2 if lg_n <= 2 * min(tile, 10) else 3
    if _EVEN_SPLIT:   # development: the even split of the first build (A/B measurements)
        sizes = [lg_n // k + (1 if i < lg_n % k else 0) for i in range(k)]
        sizes = sizes if sizes[0] <= min(tile, 10) else None
    else:
        sizes = _pass_sizes(lg_n, k, min(tile, 10))
    if sizes is None:
        raise ValueError(f"2^{lg_n} does not fit in 3 passes of 2^{tile}-element tiles")
    out, lo = [], lg_n
    for s in sizes:
        lo -= s
        out.append((s, tile - s, lo))
    return out


def _pass_sizes(lg_n, k, smax):
    """Bits per pass, top first: k parts of lg_n, each <= smax, with as few bits outside whole
    3-bit rounds as possible (a leftover bit runs as a single-bit round: 2 elements per
    thread between barriers instead of 8, measured slower), then as even as possible.
    None when lg_n > k·smax."""
    best = None

    def parts(left, n):
        if n == 1:
            if 1 <= left <= smax:
                yield (left,)
            return
        for first in range(min(smax, left - (n - 1)), 0, -1):
            for rest in parts(left - first, n - 1):
                if rest[0] <= first:
                    yield (first,) + rest

    for p in parts(lg_n, k):
        key = (sum(x % 3 for x in p), max(p) - min(p))
        if best is None or key < best[0]:
            best = (key, list(p))
    return None if best is None else best[1]


def h_deep(lg_n, deep=True):
    """Whether the H stage at 2^lg_n reads deep tables when ``deep`` asks for them: from 2^6,
    where the transform's bottom pass holds a whole 3-bit round (forced small tiles may not:
    full tables then)."""
    return bool(deep) and lg_n >= 2 * _DEEP_LEVELS and pass_plan(lg_n)[-1][0] >= _DEEP_LEVELS


def _deep_layout(lg_n):
    """(heap entries, lg_lo, lg_hi, total entries) of a deep table at 2^lg_n (ntt.cuh deep_base)."""
    lt = lg_n - _DEEP_LEVELS
    lg_lo = (lt + 1) // 2
    return 1 << lt, lg_lo, lt - lg_lo, (1 << lt) + 4 + (1 << lg_lo) + (1 << (lt - lg_lo))


def table_bytes(lg_n, deep):
    """Device bytes of one twiddle table at 2^lg_n (deep: ``_deep_layout``)."""
    return (_deep_layout(lg_n)[3] if deep else 1 << lg_n) * _FR_BYTES


def h_tables_bytes(lg_n, deep=False):
    """Device bytes of the H stage's twiddle tables at 2^lg_n (``H_TABLES``; deep: ``h_deep``)."""
    return len(H_TABLES) * table_bytes(lg_n, h_deep(lg_n, deep))


def _check_fr(values, name):
    """Validate a (n, 4) uint64 array of reduced Montgomery elements; returns it C-contiguous."""
    if not isinstance(values, np.ndarray) or values.dtype != np.uint64 or values.ndim != 2 \
            or values.shape[1] != 4:
        got = getattr(values, "dtype", type(values).__name__), getattr(values, "shape", None)
        raise ValueError(f"{name} must be a uint64 array of shape (n, 4), got {got}")
    n = values.shape[0]
    if n == 0 or n & (n - 1):
        raise ValueError(f"{name}: the number of values must be a power of two, got {n}")
    if n > 1 << MAX_LOG_SIZE:
        raise ValueError(f"{name}: at most 2^{MAX_LOG_SIZE} values, got {n}")
    v = np.ascontiguousarray(values)
    for i in np.flatnonzero(v[:, 3] >= np.uint64(_R_TOP)):
        x = int(v[i, 0]) | int(v[i, 1]) << 64 | int(v[i, 2]) << 128 | int(v[i, 3]) << 192
        if x >= R_MODULUS:
            raise ValueError(f"{name}[{int(i)}] is not a reduced element of Fr (>= r)")
    return v


# --------------------------------------------------------------------------- per-device state

class _DeviceState(DeviceState):
    """Module, functions, resident twiddle tables and constants of one device."""

    def __init__(self, device):
        super().__init__(_driver(), device, "ntt")
        self._tables = {}      # (lg_n, kind, deep) -> DeviceBuffer (plain allocation, resident)
        self._holds = {}       # (lg_n, deep) -> how many keys hold the H stage's tables
        self._held_built = set()   # tables a hold built: the last holder's release frees them
        self._consts = {}      # lg_n -> DeviceBuffer of H_CONSTS (Montgomery)
        self._staging = []     # free PinnedBuffers for uploads

    def table(self, lg_n, kind, stream, deep=False):
        """Twiddle table Z (heap order) of ``kind`` at size 2^lg_n.

        kinds: fwd/inv (plain), cfwd/cinv (coset g = COSET_GENERATOR), wfwd/winv (coset
        w_2n, the primitive 2^(lg_n+1)-th root of unity: the other half of the domain
        of size 2n, used by the H stage).  ``deep``: the deep form (F_DEEP, ntt.cuh
        ``deep_base``): the levels above the three deepest, then the tail they are computed from.
        """
        return self._memo(self._tables, (lg_n, kind, deep),
                          lambda: self._make_table(lg_n, kind, stream, deep))

    def hold_h_tables(self, lg_n, stream=None, deep=False, build=True):
        """Build (or share) the H stage's tables at 2^lg_n for a holder: a resident or streamed
        key, whose budget reservation counts them (``h_tables_bytes``).  ``release_h_tables``
        gives them up; the last holder's release frees the tables that a hold built, so the
        budget's bytes come back as device memory.  Tables built outside any hold (a one-shot
        ``ntt``, ``h_stage``, ``snarkjs_h``) stay cached for the process.  A thread that
        enqueues on this module's device-buffer functions at a key's size while that key may
        be released holds the tables too (``build=False``: a use, not an owner).

        Why (bench/RESULTS.md, session 46): a resident key's 8 GiB of plain tables at 2^27
        outlived its engine; the next engine's budget counted its own deep tables (1 GiB) and
        not those, so it admitted ~8 GiB the card did not have.  Its pool then met the
        partitions' allocations by making one worker's upload stream wait for the other's
        frees: a, b's put waited 1.09 s for the other region (16.1 against 14.6 s per 10
        partitions on an H100), and with the pool's internal dependencies off, it ran out of
        memory."""
        deep = h_deep(lg_n, deep)
        with self._lock:
            for kind in self._h_kinds() if build else ():
                if (lg_n, kind, deep) not in self._tables:
                    self.table(lg_n, kind, stream, deep)
                    self._held_built.add((lg_n, kind, deep))
            self._holds[(lg_n, deep)] = self._holds.get((lg_n, deep), 0) + 1

    def release_h_tables(self, lg_n, deep=False):
        """End one ``hold_h_tables(lg_n, deep=deep)``; the last one frees what holds built (no
        kernel reads them by then: each holder's partitions are done before it lets go)."""
        deep = h_deep(lg_n, deep)
        with self._lock:
            left = self._holds.get((lg_n, deep), 0) - 1
            if left < 0:
                raise RuntimeError(f"H tables 2^{lg_n} (deep={deep}) released more often than held")
            self._holds[(lg_n, deep)] = left
            if left:
                return
            del self._holds[(lg_n, deep)]
            for kind in self._h_kinds():
                key = (lg_n, kind, deep)
                if key in self._held_built:
                    self._held_built.discard(key)
                    buf = self._tables.pop(key, None)   # None: ``release()`` freed it already
                    if buf is not None:
                        buf.free()

    def held_h_tables(self):
        """{(lg_n, deep): holders} of the H stage's tables (tests, status)."""
        with self._lock:
            return dict(self._holds)

    @staticmethod
    def _h_kinds():
        return H_TABLES + (("winv",) if _INV_W_TABLE else ())

    def _make_table(self, lg_n, kind, stream, deep):
        d = _driver()
        n = 1 << lg_n
        if kind not in ("fwd", "inv", "cfwd", "cinv", "wfwd", "winv"):
            raise ValueError(f"unknown twiddle table kind {kind!r}")
        inverse = kind.endswith("inv")
        shift = {"c": COSET_GENERATOR, "w": _root_of_unity(lg_n + 1)}.get(kind[0])
        w = _root_of_unity(lg_n)
        if inverse:
            w = pow(w, -1, R_MODULUS)
        g = 1 if shift is None else pow(shift, -1 if inverse else 1, R_MODULUS)
        lg_half = lg_n - 1
        lg_lo = (lg_half + 1) // 2
        lg_hi = lg_half - lg_lo
        pow_lo = _rows(_powers(w, 1 << lg_lo))
        pow_hi = _rows(_powers(pow(w, 1 << lg_lo, R_MODULUS), 1 << lg_hi))
        host = [pow_lo, pow_hi]
        if shift is not None:
            host.append(_rows([pow(g, 1 << (lg_n - 1 - l), R_MODULUS) for l in range(lg_n)]))
        count, tail = n, None
        if deep:
            count, dlo, dhi, total = _deep_layout(lg_n)
            w8 = pow(w, n >> 3, R_MODULUS)
            tail = np.concatenate([
                _rows([w8 * w8 % R_MODULUS, w8, pow(w8, 3, R_MODULUS), 0]),
                _rows([g * v % R_MODULUS for v in _powers(w, 1 << dlo)]),
                _rows(_powers(pow(w, 1 << dlo, R_MODULUS), 1 << dhi))])
            assert count + len(tail) == total
        tmp = []
        for h in host:
            b = self.pool.alloc(h.nbytes, stream)
            d.copy_htod(b, h, h.nbytes, stream)
            tmp.append(b)
        buf = d.DeviceBuffer.alloc(self.device, table_bytes(lg_n, deep))
        if tail is not None:
            d.copy_htod(buf.ptr + count * _FR_BYTES, tail, tail.nbytes, stream)
        block = 256
        grid = max(1, min((count + block - 1) // block, self.device.sm_count * 8))
        self.fn("cuzk_ntt_gen_zetas").launch(
            stream, grid, block,
            [("P", buf.ptr), ("I", lg_n), ("P", tmp[0].ptr), ("P", tmp[1].ptr), ("I", lg_lo),
             ("P", tmp[2].ptr if shift is not None else 0), ("I", count)])
        for b in tmp:
            b.free(stream)
        stream.synchronize()   # once per table: later users on any stream see it complete
        return buf

    def consts(self, lg_n, stream):
        """``h_consts(lg_n)`` in Montgomery form, resident (K[0..5] of the kernels)."""
        def make():
            d = _driver()
            h = _rows(h_consts(lg_n))
            buf = d.DeviceBuffer.alloc(self.device, h.nbytes)
            d.copy_htod(buf, h, h.nbytes, stream)
            stream.synchronize()
            return buf
        return self._memo(self._consts, lg_n, make)

    def staging(self, nbytes):
        """A pinned host buffer of at least ``nbytes`` (give it back with ``unstage``)."""
        with self._lock:
            for i, p in enumerate(self._staging):
                if p.nbytes >= nbytes:
                    return self._staging.pop(i)
        return _driver().PinnedBuffer(nbytes, self.device)

    def unstage(self, p):
        with self._lock:
            self._staging.append(p)

    def release(self):
        with self._lock:
            for b in list(self._tables.values()) + list(self._consts.values()):
                b.close()
            for p in self._staging:
                p.close()
            self._tables.clear()
            self._held_built.clear()
            self._consts.clear()
            self._staging.clear()

    # ---- kernel sequences --------------------------------------------------------------

    def launch_pass(self, stream, lg_n, S, LC, lo, flags, d_out, d_in, d_b=0, d_c=0,
                    zinv=0, zfwd=0, k=0):
        E = 1 << (S + LC)
        self.fn("cuzk_ntt_pass_deep" if flags & F_DEEP else "cuzk_ntt_pass", _PASS_SMEM_MAX).launch(
            stream, (1 << lg_n) // E, max(1, E // 8),
            [("P", _ptr(d_out)), ("P", _ptr(d_in)), ("P", _ptr(d_b)), ("P", _ptr(d_c)),
             ("P", _ptr(zinv)), ("P", _ptr(zfwd)), ("P", _ptr(k)),
             ("I", lg_n), ("I", lo), ("I", S), ("I", LC), ("I", flags)],
            shmem=E * _FR_BYTES)

    def h_passes(self, stream, lg_n, d_a, d_b, d_c, d_h, ready=(None, None, None), c_from_ab=False,
                 steps=("a", "rest"), deep=False):
        """h = (a·b - c)/Z as coefficients into d_h with six transforms (see ``h_consts``);
        d_a, d_b, d_c are clobbered.

        ``ready``: optional events to wait for before a, b, c are read.
        ``c_from_ab``: c = a∘b row by row (a satisfied assignment: the caller checks it), so c is
        never read and d_c is scratch; then A~ (which needs a alone) comes first, and ``steps``
        can enqueue the work in two calls: "a" (wait for a, then A~ into d_c) and "rest" (wait
        for b, then U, B~ and h), so that A~ runs while b is still uploading.  Without it
        ``steps`` must be both.  ``deep``: read deep tables (``h_deep``; the same field elements).
        """
        if not c_from_ab and tuple(steps) != ("a", "rest"):
            raise ValueError("the H stage with c read from d_c runs in one call")
        plan = pass_plan(lg_n)
        fd, zi, zwf, zwi, mirror = self._h_tables(stream, lg_n, deep)
        k = self.consts(lg_n, stream)
        inv_plan = list(reversed(plan))                           # bottom bits first

        def wait(*evs):
            for ev in evs:
                if ev is not None:
                    stream.wait_event(ev)

        def u(flags0, kp):
            # U = n·iNTT(first-pass input) into d_h (a, b (and c) gathered: read, not clobbered)
            for j, (S, LC, lo) in enumerate(inv_plan):
                flags = F_INV | F_PLAIN_INV | fd | ((F_LOAD_BITREV | flags0) if j == 0 else 0)
                self.launch_pass(stream, lg_n, S, LC, lo, flags, d_h, d_a if j == 0 else d_h,
                                 d_b=d_b, d_c=d_c, zinv=zi, k=kp)

        if c_from_ab:
            if "a" in steps:
                wait(ready[0])
                self.to_coset_w(stream, lg_n, d_a, d_c, zi, zwf, fd)   # A~ = NTT_w(n·iNTT(a)) into d_c
            if "rest" not in steps:
                return
            wait(ready[1])
            # U = n·iNTT(a·b/(2n)) (a·b − K[0]·a·b)·K[1] = a·b·(α − β)/n = a·b/(2n)): an F_PRODUCT
            # pass reads its factor at d_k[3], so it is given d_k + 2 rows, where K[5] sits
            u(F_PRODUCT, _ptr(k) + 2 * _FR_BYTES)
            self.to_coset_w(stream, lg_n, d_b, d_a, zi, zwf, fd)   # B~ into d_a
        else:
            wait(*ready)
            u(F_POINTWISE, k)                                       # U = n·iNTT((a·b - K[0]·c)·K[1])
            # A~ = NTT_w(n·iNTT(a)) into d_c, then B~ into d_a (bit-reversed order)
            for src, w in ((d_a, d_c), (d_b, d_a)):
                self.to_coset_w(stream, lg_n, src, w, zi, zwf, fd)
        # h = U + n·iNTT_w(A~·B~·K[3]): in place on d_c, the last pass adds U into d_h; the
        # inverse w twiddles are the forward ones mirrored (F_MIRROR_INV, ntt.cuh mirror_node)
        for j, (S, LC, lo) in enumerate(inv_plan):
            last = j == len(plan) - 1
            flags = F_INV | mirror | fd | (F_PRODUCT if j == 0 else 0) | (F_ADD_OUT if last else 0)
            self.launch_pass(stream, lg_n, S, LC, lo, flags, d_h if last else d_c, d_c,
                             d_b=d_a, d_c=d_h, zinv=zwi, k=k)

    def h_passes_abc(self, stream, lg_n, d_a, d_b, d_c, ready=None, deep=False):
        """The H stage's step "rest" in a, b, c's three buffers, after step "a" (``h_passes``
        with ``c_from_ab``: A~ in d_c, a in d_a): h lands in d_a, and d_b, d_c are dead after.

        With no fourth buffer for a gather, the two transforms that read natural order bit-reverse
        their input in place first (``cuzk_fr_bitrev``): d_a <- a∘b (pointwise, in place); d_b <-
        B~ (bit-reversal, the inverse passes ungathered, NTT_w); d_c <- n·iNTT_w(A~·B~·K[3]) in
        place; d_a <- bit-reversal, n·iNTT, its last pass scaled by K[5] = 1/(2n) (U of
        ``h_passes``) and adding d_c.  The same field elements as ``h_passes``; two permutation
        passes and one pointwise pass more.  ``ready``: an event to wait for before b is read."""
        tabs = self._h_tables(stream, lg_n, deep)
        n = 1 << lg_n
        if ready is not None:
            stream.wait_event(ready)
        self._elementwise(stream, "cuzk_fr_mul", n, [("P", _ptr(d_a)), ("P", _ptr(d_a)), ("P", _ptr(d_b)),
                                                      ("Q", n)])
        self._coset_in_place(stream, lg_n, d_b, tabs)              # B~ in d_b
        self._v_in_place(stream, lg_n, d_c, d_b, tabs)            # d_c <- n·iNTT_w(A~·B~·K[3])
        self._u_plus(stream, lg_n, d_a, d_c, tabs)                # h = U + d_c in d_a

    def h_passes_ab(self, stream, lg_n, d_a, d_b, step, ready=None, deep=False, a_spent=None):
        """One step of the H stage of a satisfied assignment (c = a∘b) in a's and b's two
        buffers, with c uploaded into a's between steps "b" and "c"; h lands in d_a, and d_b is
        dead after "c".  ``ready``: an event to wait for first.
          "a": A~ in place in d_a (bit-reversal, the inverse passes ungathered, NTT_w);
          "b": B~ in place in d_b, then d_b <- n·iNTT_w(A~·B~·K[3]) in place, the product in its
               first pass: d_a is dead after that pass, and ``a_spent`` (a callable, or None) is
               called once it is enqueued on ``stream``, before the transform's other passes;
          "c": with c in d_a (natural order), d_a <- bit-reversal, n·iNTT(c)·K[5] + d_b (U of
               ``h_passes``, from c for a∘b).
        The same field elements as ``h_passes`` for a satisfied assignment, in n field elements
        less than ``h_passes_abc`` (c's upload: n·32 bytes more through the bus)."""
        if step not in ("a", "b", "c"):
            raise ValueError(f"step must be 'a', 'b' or 'c', got {step!r}")
        tabs = self._h_tables(stream, lg_n, deep)
        if ready is not None:
            stream.wait_event(ready)
        if step == "a":
            self._coset_in_place(stream, lg_n, d_a, tabs)          # A~ in d_a
        elif step == "b":
            self._coset_in_place(stream, lg_n, d_b, tabs)          # B~ in d_b
            self._v_in_place(stream, lg_n, d_b, d_a, tabs, a_spent)  # d_b <- n·iNTT_w(A~·B~·K[3])
        else:
            self._u_plus(stream, lg_n, d_a, d_b, tabs)            # h = U(c) + d_b in d_a

    def _coset_in_place(self, stream, lg_n, d, tabs):
        """d <- n·(values on the coset w_2n·H, bit-reversed) of the polynomial whose values on H d
        holds (natural order), in place: a bit-reversal, then ``to_coset_w`` ungathered."""
        fd, zi, zwf, _, _ = tabs
        self._bitrev(stream, lg_n, d)
        self.to_coset_w(stream, lg_n, d, d, zi, zwf, fd, gathered=False)

    def _v_in_place(self, stream, lg_n, d, d_other, tabs, other_spent=None):
        """d <- n·iNTT_w(d·d_other·K[3]) in place (both coset values, bit-reversed): the product
        fused into the first inverse pass, the only one that reads d_other (``other_spent``, if
        given, is called once that pass is enqueued); the inverse w twiddles are the forward ones
        mirrored (F_MIRROR_INV) unless a winv table was built (``_h_tables``)."""
        fd, _, _, zwi, mirror = tabs
        k = self.consts(lg_n, stream)
        for j, (S, LC, lo) in enumerate(reversed(pass_plan(lg_n))):
            flags = F_INV | mirror | fd | (F_PRODUCT if j == 0 else 0)
            self.launch_pass(stream, lg_n, S, LC, lo, flags, d, d, d_b=d_other if j == 0 else 0,
                             zinv=zwi, k=k)
            if j == 0 and other_spent is not None:
                other_spent()

    def _u_plus(self, stream, lg_n, d, d_v, tabs):
        """d <- n·iNTT(d)·K[5] + d_v in place (d: a∘b's or c's values, natural order; K[5] =
        1/(2n)): a bit-reversal, the plain inverse passes, the last one scaled and adding d_v."""
        fd, zi, _, _, _ = tabs
        k = self.consts(lg_n, stream)
        plan = list(reversed(pass_plan(lg_n)))
        self._bitrev(stream, lg_n, d)
        for j, (S, LC, lo) in enumerate(plan):
            last = j == len(plan) - 1
            flags = F_INV | F_PLAIN_INV | fd | ((F_SCALE_OUT | F_ADD_OUT) if last else 0)
            # F_SCALE_OUT reads its factor at d_k[2]: given d_k + 3 rows, it reads K[5]
            self.launch_pass(stream, lg_n, S, LC, lo, flags, d, d, d_c=d_v, zinv=zi,
                             k=_ptr(k) + 3 * _FR_BYTES)

    def _h_tables(self, stream, lg_n, deep):
        """(F_DEEP or 0, the inv and wfwd tables, the last transform's table and F_MIRROR_INV or
        0) of the H stages at 2^lg_n, deep where ``h_deep`` allows ``deep``.  The last transform
        reads wfwd mirrored (ntt.cuh mirror_node), or a built winv table under
        CUZK_NTT_INV_W=table."""
        deep = h_deep(lg_n, deep)
        zi = self.table(lg_n, "inv", stream, deep)
        zwf = self.table(lg_n, "wfwd", stream, deep)
        zwi, mirror = (self.table(lg_n, "winv", stream, deep), 0) if _INV_W_TABLE else (zwf, F_MIRROR_INV)
        return (F_DEEP if deep else 0), zi, zwf, zwi, mirror

    def _elementwise(self, stream, name, n, args):
        block = 256
        grid = max(1, min((n + block - 1) // block, self.device.sm_count * 16))
        self.fn(name).launch(stream, grid, block, args)

    def _bitrev(self, stream, lg_n, d):
        self._elementwise(stream, "cuzk_fr_bitrev", 1 << lg_n, [("P", _ptr(d)), ("I", lg_n)])

    def to_coset_w(self, stream, lg_n, src, w, zi, zwf, fd=0, gathered=True):
        """w <- n·(values on the coset w_2n·H, bit-reversed) of the polynomial whose values on H
        are src (natural order): iNTT (gathered from src, unscaled) then NTT_w, the iNTT's
        last pass fused with the NTT_w's first.  src is read only; zi/zwf: inv/wfwd tables,
        deep when ``fd`` is F_DEEP.  ``gathered=False``: src is already in bit-reversed order and
        may be w itself (every pass in place)."""
        plan = pass_plan(lg_n)
        for j, (S, LC, lo) in enumerate(reversed(plan)):
            top = j == len(plan) - 1
            gather = F_LOAD_BITREV if j == 0 and gathered else 0
            flags = F_INV | F_PLAIN_INV | fd | gather | (F_FWD if top else 0)
            self.launch_pass(stream, lg_n, S, LC, lo, flags, w, src if j == 0 else w,
                             zinv=zi, zfwd=zwf)
        for (S, LC, lo) in plan[1:]:
            self.launch_pass(stream, lg_n, S, LC, lo, F_FWD | fd, w, w, zfwd=zwf)

    def snarkjs_h_passes(self, stream, lg_n, d_a, d_b, d_c, d_tmp, J, ready=(None, None, None),
                         deep=False):
        """snarkjs's H scalars (canonical, snarkjs's order); returns the buffer holding them.

        A, B, C go to the coset w_2n (iNTT, then NTT_w: the values at w_2n^(2k+1), in
        bit-reversed order), then ``cuzk_h_odd_gather`` writes (A·B - C) in snarkjs's order.
        All four buffers are clobbered; the result lands in d_c.  ``deep``: as ``h_passes``.
        """
        fd, zi, zwf, _, _ = self._h_tables(stream, lg_n, deep)
        bufs = (d_a, d_b, d_c, d_tmp)
        for i in range(3):                  # a -> d_tmp, b -> d_a, c -> d_b (gathers need two buffers)
            if ready[i] is not None:
                stream.wait_event(ready[i])
            self.to_coset_w(stream, lg_n, bufs[i], bufs[i - 1], zi, zwf, fd)
        n = 1 << lg_n
        block = 256
        grid = max(1, min((n + block - 1) // block, self.device.sm_count * 16))
        self.fn("cuzk_h_odd_gather").launch(
            stream, grid, block,
            [("P", _ptr(d_c)), ("P", _ptr(d_tmp)), ("P", _ptr(d_a)), ("P", _ptr(d_b)),
             ("P", self.consts(lg_n, stream).ptr), ("I", lg_n), ("Q", int(J) % (2 * n))])
        return d_c


def _root_of_unity(lg):
    """The primitive 2^lg-th root of unity of the transforms (COSET_GENERATOR^((r-1)/2^lg))."""
    return fr_root_of_unity(lg, COSET_GENERATOR)


def h_consts(lg_n):
    """The constants K[0..5] of the H stages at n = 2^lg_n (canonical ints, not Montgomery).

    bellperson's h is the coset-g interpolant of (A·B - C)/(g^n - 1), A, B, C the
    degree < n interpolants of a, b, c over the domain.  With A·B = P + X^n Q
    (deg P < n, deg Q <= n-2): iNTT(a·b) = P + Q (A·B mod X^n - 1), and on the coset
    w·H (w = w_2n, so X^n = -1 there) iNTT_w(A_w·B_w) = P - Q.  Then
        h = Q + (P + Q - C)/(g^n - 1) = iNTT(α·a·b - β·c) - iNTT_w(A_w·B_w)/2,
    β = 1/(g^n - 1), α = 1/2 + β: six transforms (iNTT and NTT_w of a and of b, one
    iNTT, one iNTT_w) instead of bellperson's seven, the same field elements out.
    The kernels' inverse passes leave out 1/n, so with A~ = n·A_w:
        K[0] = β/α, K[1] = α/n   U = n·iNTT((a·b - K[0]·c)·K[1])
        K[2] = 1/n               (F_SCALE_OUT of a plain inverse transform)
        K[3] = -1/(2n^3)         h = U + n·iNTT_w(A~·B~·K[3])
    K[4] is 1/n as a raw limb value, not Montgomery (stored as (1/n)·2^-256 here, which the
    upload's Montgomery conversion turns into 1/n): a Montgomery product by it divides by n
    and leaves canonical form (snarkjs's H, ``cuzk_h_odd_gather``).
        K[5] = 1/(2n)            U when c = a∘b: (1 − K[0])·K[1] = (α − β)/n
    """
    r = R_MODULUS
    n = 1 << lg_n
    ninv = pow(n, -1, r)
    beta = pow((pow(COSET_GENERATOR, n, r) - 1) % r, -1, r)
    alpha = (pow(2, -1, r) + beta) % r
    return [beta * pow(alpha, -1, r) % r, alpha * ninv % r, ninv, (-pow(2 * n * n * n, -1, r)) % r,
            ninv * pow(1 << 256, -1, r) % r, pow(2 * n, -1, r)]


def _ptr(x):
    return x if isinstance(x, int) else x.ptr


_states = {}
_states_lock = threading.Lock()


def _state(device):
    return state_for(_states, _states_lock, _driver(), device, _DeviceState)


def release(device=None):
    """Free the resident twiddle tables, constants and pinned staging buffers of ``device``."""
    _state(device).release()


# --------------------------------------------------------------------------- public API

def ntt_device(d_in, d_out, n, inverse=False, coset=False, device=None, stream=None, natural=True):
    """Transform ``n`` Fr elements already on the device (no host copies, no sync).

    Parameters
    ----------
    d_in, d_out : DeviceBuffer or int
        Input (used as scratch: clobbered) and output, ``n * 32`` bytes each; distinct
        buffers when ``natural`` is true.
    n : int
        Power of two, 2 <= n <= 2^MAX_LOG_SIZE.
    inverse, coset : bool
        As ``ntt``.
    natural : bool
        True: natural order in and out.  False: a forward transform leaves bit-reversed
        order in ``d_out`` and an inverse one takes bit-reversed input (no permutation).
    device : Device, int or None
    stream : Stream or None
        None: a stream private to the calling thread.
    """
    _check_size(n)
    st = _state(device)
    s = stream if stream is not None else st.streams()[0]
    lg = n.bit_length() - 1
    if natural and _ptr(d_in) == _ptr(d_out):
        raise ValueError("natural-order transforms need distinct input and output buffers")
    _run_transform(st, s, lg, d_in, d_out, inverse, coset, natural)


def _run_transform(st, s, lg, d_in, d_out, inverse, coset, natural):
    plan = pass_plan(lg)
    if inverse:
        z = st.table(lg, "cinv" if coset else "inv", s)
        k = st.consts(lg, s)
        cur = d_in
        for j, (S, LC, lo) in enumerate(reversed(plan)):
            first, last = j == 0, j == len(plan) - 1
            flags = F_INV | (0 if coset else F_PLAIN_INV) | (F_LOAD_BITREV if first and natural else 0) \
                | (F_SCALE_OUT if last else 0)
            st.launch_pass(s, lg, S, LC, lo, flags, d_out, cur, zinv=z, k=k)
            cur = d_out
    else:
        z = st.table(lg, "cfwd" if coset else "fwd", s)
        cur = d_in
        for j, (S, LC, lo) in enumerate(plan):
            last = j == len(plan) - 1
            flags = F_FWD | (0 if coset else F_PLAIN_FWD) | (F_STORE_BITREV if last and natural else 0)
            out = d_out if last else cur      # in place until the last pass
            st.launch_pass(s, lg, S, LC, lo, flags, out, cur, zfwd=z)
            cur = out


def ntt(values, inverse=False, coset=False, device=None, stream=None):
    """Number-theoretic transform over Fr on the GPU.

    Parameters
    ----------
    values : numpy.ndarray
        uint64 (n, 4), Montgomery form, n a power of two (n <= 2^MAX_LOG_SIZE).
    inverse, coset : bool
        Forward: evaluations at ω^i (``coset``: at 7·ω^i), natural order; inverse undoes
        the matching forward transform.
    device : Device, int or None
        None: device 0.
    stream : Stream or None
        None: a stream private to the calling thread.  The call returns after the
        result is on the host.

    Returns
    -------
    numpy.ndarray
        uint64 (n, 4), Montgomery form (a new array).

    Raises
    ------
    ValueError
        Bad dtype/shape, n not a power of two, or an element >= r (naming the first).
    CudaError
        A driver call failed.
    """
    v = _check_fr(values, "values")
    n = v.shape[0]
    if n == 1:
        return v.copy()
    d = _driver()
    st = _state(device)
    s = stream if stream is not None else st.streams()[0]
    nbytes = n * _FR_BYTES
    x = st.pool.alloc(nbytes, s)
    y = st.pool.alloc(nbytes, s)
    try:
        d.copy_htod(x, v, nbytes, s)
        _run_transform(st, s, n.bit_length() - 1, x, y, inverse, coset, True)
        out = np.empty_like(v)
        d.copy_dtoh(out, y, nbytes, s)
        s.synchronize()
    finally:
        x.free(s)
        y.free(s)
    return out


def h_stage_inplace(d_a, d_b, d_c, d_h, n, device=None, stream=None, ready=(None, None, None),
                    c_from_ab=False, steps=("a", "rest"), deep=False):
    """The H polynomial on device buffers: coefficients of h = (a·b - c)/Z into ``d_h``.

    ``d_a``, ``d_b``, ``d_c`` (evaluations, natural order, Montgomery) are clobbered.
    Queues six transforms (``h_consts`` says how) on ``stream``; returns without waiting.
    ``ready``: events to wait for before a, b, c are read (None: no wait).
    ``c_from_ab``: the caller guarantees c = a∘b row by row (it checks the assignment), so
    ``d_c`` is only scratch (never read; it need not be uploaded), and ``steps`` may split the
    enqueue in two calls, "a" then "rest" (``_DeviceState.h_passes``).  ``deep``: read the deep
    twiddle tables (``h_deep``: an eighth of the bytes; the same coefficients).
    """
    _check_size(n)
    st = _state(device)
    s = stream if stream is not None else st.streams()[0]
    st.h_passes(s, n.bit_length() - 1, d_a, d_b, d_c, d_h, ready, c_from_ab, steps, deep)


def h_stage_abc(d_a, d_b, d_c, n, device=None, stream=None, steps=("a", "rest"), ready=(None, None),
                deep=False):
    """The H polynomial of a satisfied assignment (c = a∘b) in a, b, c's three buffers: its
    coefficients land in ``d_a`` (``_DeviceState.h_passes_abc``), no fourth buffer.  ``d_c`` is
    scratch (c is never read); all three are clobbered.  ``steps`` as ``h_stage_inplace``'s:
    "a" (A~ into d_c, after ``ready[0]``) then "rest" (after ``ready[1]``, b uploaded)."""
    _check_size(n)
    st = _state(device)
    s = stream if stream is not None else st.streams()[0]
    lg = n.bit_length() - 1
    if "a" in steps:
        st.h_passes(s, lg, d_a, None, d_c, None, (ready[0], None, None), True, ("a",), deep)
    if "rest" in steps:
        st.h_passes_abc(s, lg, d_a, d_b, d_c, ready[1], deep)


def h_stage_ab(d_a, d_b, n, device=None, stream=None, steps=("a", "b", "c"), ready=(None, None, None),
               deep=False, a_spent=None):
    """The H polynomial of a satisfied assignment (c = a∘b) in a's and b's two buffers: its
    coefficients land in ``d_a`` (``_DeviceState.h_passes_ab``).  Steps, in order, each after its
    event in ``ready`` (None: no wait): "a" (A~ in place in d_a: a uploaded), "b" (B~ in d_b,
    then A~·B~'s transform in d_b: b uploaded), "c" (c uploaded into d_a: h in d_a).  d_a is dead
    from the first pass of step "b"'s inverse transform: ``a_spent`` (a callable) is called once
    that pass is enqueued, so c's upload into d_a can wait for an event recorded there instead of
    for the whole step, where ``h_stage_abc`` computes a∘b in a third buffer."""
    _check_size(n)
    st = _state(device)
    s = stream if stream is not None else st.streams()[0]
    for step, ev in zip(("a", "b", "c"), ready):
        if step in steps:
            st.h_passes_ab(s, n.bit_length() - 1, d_a, d_b, step, ev, deep, a_spent)


def _check_size(n):
    """ValueError unless n is a power of two in [2, 2^MAX_LOG_SIZE]."""
    if n < 2 or n & (n - 1) or n > 1 << MAX_LOG_SIZE:
        raise ValueError(f"n must be a power of two in [2, 2^{MAX_LOG_SIZE}], got {n}")


def h_stage_device(a, b, c, device=None, stream=None, deep=False):
    """H stage with the result left on the device (for the H MSM).

    Parameters
    ----------
    a, b, c : numpy.ndarray
        Evaluations A·z, B·z, C·z over the domain: uint64 (n, 4) Montgomery, n = 2^k >= 2.
    device : Device, int or None
    stream : Stream or None
        Stream the kernels run on (None: a stream private to the calling thread).  The
        uploads run on a second stream, staged through pinned buffers, and the kernels
        wait for them through events; the call returns once the uploads are done and
        the kernels are queued.
    deep : bool
        Read the deep twiddle tables (``h_stage_inplace``).

    Returns
    -------
    DeviceBuffer
        n·32 bytes: coefficients of h = (a·b - c)/(X^n - 1), natural order, Montgomery,
        allocated from the device's stream-ordered pool on ``stream``.
    """
    vs = _check_abc(a, b, c)
    return _h_upload_and_run(vs, device, stream, deep=deep)


def _check_abc(a, b, c):
    vs = [_check_fr(x, nm) for x, nm in ((a, "a"), (b, "b"), (c, "c"))]
    n = vs[0].shape[0]
    if any(x.shape[0] != n for x in vs):
        raise ValueError(f"a, b, c must have the same length, got {[x.shape[0] for x in vs]}")
    if n < 2:
        raise ValueError("the H stage needs n >= 2")
    return vs


def _h_upload_and_run(vs, device, stream, run=None, deep=False):
    """Upload a, b, c (pinned staging, upload stream, events) and queue ``run(st, comp, lg,
    bufs, scratch, events) -> result buffer`` (default: bellperson's H into a fresh buffer, on
    deep tables if ``deep``); returns the result buffer, allocated from the pool on the compute
    stream."""
    n = vs[0].shape[0]
    d = _driver()
    st = _state(device)
    comp, up = st.streams()
    if stream is not None:
        comp = stream
    nbytes = n * _FR_BYTES
    bufs, events, pins = [], [], []
    try:
        for v in vs:
            p = st.staging(nbytes)
            pins.append(p)
            np.copyto(p.asarray(np.uint64)[: n * 4].reshape(n, 4), v)
            buf = st.pool.alloc(nbytes, up)
            d.copy_htod(buf, p.ptr, nbytes, up)
            ev = d.Event(st.device, timing=False)
            ev.record(up)
            bufs.append(buf)
            events.append(ev)
        h = st.pool.alloc(nbytes, comp)
        if run is None:
            st.h_passes(comp, n.bit_length() - 1, bufs[0], bufs[1], bufs[2], h, tuple(events),
                        deep=deep)
            out = h
        else:
            out = run(st, comp, n.bit_length() - 1, bufs, h, tuple(events))
        for buf in bufs + [h]:
            if buf is not out:
                buf.free(comp)
    finally:
        up.synchronize()      # no copy reads the staging buffers any more
        for p in pins:
            st.unstage(p)
    return out


def _download(st, comp, buf, n):
    out = np.empty((n, 4), dtype=np.uint64)
    try:
        _driver().copy_dtoh(out, buf, n * _FR_BYTES, comp)
        comp.synchronize()
    finally:
        buf.free(comp)
    return out


def snarkjs_h(a, b, c, J, device=None, stream=None, deep=False):
    """snarkjs's H MSM scalars on the GPU: the same bytes as ``cuzk._native._sparse.snarkjs_h``.

    Parameters
    ----------
    a, b, c : numpy.ndarray
        uint64 (n, 4), Montgomery, n = 2^k with 1 <= k < 32: A·w, B·w, C·w at ω7_n^i
        (``cuzk._snarkjs_prover.witness_vectors``).  Not modified.
    J : int
        The odd exponent with ω5 = ω7^J (``cuzk._snarkjs_prover.ROOT_EXPONENT``).
    device, stream, deep : as ``h_stage``.

    Returns
    -------
    numpy.ndarray
        uint64 (n, 4), canonical (not Montgomery): h[j] = (A·B − C)(ω5_2n^(2j+1)).
    """
    vs = _check_abc(a, b, c)
    j = int(J)
    if j <= 0 or j % 2 == 0:
        raise ValueError(f"J must be a positive odd integer, got {J}")
    st = _state(device)
    comp = stream if stream is not None else st.streams()[0]

    def run(st, comp, lg, bufs, scratch, events):
        return st.snarkjs_h_passes(comp, lg, bufs[0], bufs[1], bufs[2], scratch, j, events, deep)

    buf = _h_upload_and_run(vs, st.device, comp, run)
    return _download(st, comp, buf, vs[0].shape[0])


def h_stage(a, b, c, device=None, stream=None, deep=False):
    """Coefficients of h = (a·b - c)/Z computed on the GPU, as bellperson does:
    iNTT(a, b, c) -> coset NTT -> multiply (a·b - c) by (g^n - 1)^-1 -> coset iNTT.

    Parameters
    ----------
    a, b, c : numpy.ndarray
        uint64 (n, 4), Montgomery form, n = 2^k >= 2: the evaluations A·z, B·z, C·z.
    device : Device, int or None
    stream : Stream or None
    deep : bool
        Read the deep twiddle tables (``h_deep``: the three deepest levels' twiddles computed,
        an eighth of the table bytes); the same coefficients.

    Returns
    -------
    numpy.ndarray
        uint64 (n, 4), Montgomery form: the n coefficients of h (the top one is 0 for a
        satisfied circuit).

    Raises
    ------
    ValueError
        Bad dtype/shape, different lengths, or an element >= r.
    """
    vs = _check_abc(a, b, c)
    st = _state(device)
    comp = stream if stream is not None else st.streams()[0]
    h = _h_upload_and_run(vs, st.device, comp, deep=deep)
    return _download(st, comp, h, vs[0].shape[0])
