"""Groth16 parameters in bellperson's formats: ``.params``, ``.vk`` and the 192-byte proof.

File layout (all integers big-endian; points uncompressed zcash encodings, G1 96 bytes =
x‖y, G2 192 bytes = x.c1‖x.c0‖y.c1‖y.c0, field elements big-endian, flags in the top three
bits of byte 0: 0x80 compressed, 0x40 infinity, 0x20 y-sign)::

    .vk      alpha_g1 beta_g1 beta_g2 gamma_g2 delta_g1 delta_g2 | u32 n_ic | n_ic × G1 (IC)
    .params  <vk block> | u32 | H (G1) | u32 | L (G1) | u32 | A (G1) | u32 | B_G1 (G1)
             | u32 | B_G2 (G2)

(bellperson ``src/groth16/verifying_key.rs`` ``VerifyingKey::write/read``, and
``src/groth16/params.rs`` ``Parameters::write/read``.)  Validation follows bellperson on
blstrs, whose "unchecked" decoding is blst's ``blst_p1_deserialize``: flags, canonical
coordinates and the curve equation are always checked; the subgroup check is the
``checked`` flag.  The six vk points and IC are always fully checked
(``from_uncompressed``).  The point at infinity is rejected in IC, H, L, A, B_G1 and B_G2
(bellperson: "point at infinity"), accepted for the six vk points (as bellperson).  Bytes
after the last section are rejected (bellperson ignores them; a truncated-then-padded file
is more likely a fault than a feature).

In memory every point is Montgomery affine (G1 uint64 (12,), G2 (24,) as x.c0‖x.c1‖y.c0‖y.c1,
infinity all-zero).  Reading maps the file and decodes each section straight from the
mapping into its own array on all cores (no intermediate copy of the file), releasing the
decoded pages of the mapping as it goes, so a file of tens of GiB never needs two copies in
RAM.

The proof is bellperson's ``Proof::write``: A (G1, 48 bytes) ‖ B (G2, 96) ‖ C (G1, 48),
compressed; a multi-partition proof is the concatenation.
"""
from __future__ import annotations

import dataclasses
import mmap
import os
import struct

import numpy as np

from ._errors import FormatError
from ._io import atomic_write

__all__ = [
    "VerifyingKey", "ProvingKey", "read_params", "write_params", "read_vk", "write_vk",
    "encode_proof", "decode_proof", "decode_proofs", "PROOF_BYTES",
]

PROOF_BYTES = 192
_G1, _G2 = 96, 192                 # uncompressed sizes
_VK_POINTS = (("alpha_g1", "g1"), ("beta_g1", "g1"), ("beta_g2", "g2"), ("gamma_g2", "g2"),
              ("delta_g1", "g1"), ("delta_g2", "g2"))
_SECTIONS = (("h", "g1", "H"), ("l", "g1", "L"), ("a", "g1", "A"), ("b_g1", "g1", "B_G1"),
             ("b_g2", "g2", "B_G2"))
_WORDS = {"g1": 12, "g2": 24}
_SIZE = {"g1": _G1, "g2": _G2}
_WRITE_CHUNK = 1 << 20             # points encoded per write() call
_INF_SCAN_CHUNK = 1 << 22          # rows per infinity-flag scan


def _field():
    from ._native import _field
    return _field


# ----------------------------------------------------------------------------- data model

def _g(arr, words, name):
    a = np.ascontiguousarray(arr, dtype=np.uint64)
    if a.shape != (words,):
        raise ValueError(f"{name} must be {words} uint64 limbs, got shape {a.shape}")
    return a


def _pts(arr, words, name):
    a = np.ascontiguousarray(arr, dtype=np.uint64)
    if a.ndim != 2 or a.shape[1] != words:
        raise ValueError(f"{name} must have shape (n, {words}), got {a.shape}")
    return a


@dataclasses.dataclass(eq=False)
class VerifyingKey:
    """Groth16 verifying key (bellperson order).  G1 points uint64 (12,), G2 (24,),
    ``ic`` (n_inputs, 12) — one point per public input, the constant 1 included."""

    alpha_g1: np.ndarray
    beta_g1: np.ndarray
    beta_g2: np.ndarray
    gamma_g2: np.ndarray
    delta_g1: np.ndarray
    delta_g2: np.ndarray
    ic: np.ndarray

    def __post_init__(self):
        for name, group in _VK_POINTS:
            setattr(self, name, _g(getattr(self, name), _WORDS[group], name))
        self.ic = _pts(self.ic, 12, "ic")

    def __eq__(self, other):
        if not isinstance(other, VerifyingKey):
            return NotImplemented
        return all(np.array_equal(getattr(self, f.name), getattr(other, f.name))
                   for f in dataclasses.fields(self))

    @property
    def n_inputs(self) -> int:
        """Public inputs including the constant 1 (= len(ic))."""
        return self.ic.shape[0]


@dataclasses.dataclass(eq=False)
class ProvingKey:
    """Groth16 proving key (bellperson ``Parameters``).

    ``h`` (n−1, 12) with n the domain size; ``l`` (n_aux, 12); ``a`` (n_in + popcount(a_aux),
    12); ``b_g1`` (popcount(b_in) + popcount(b_aux), 12); ``b_g2`` (same, 24).  ``path`` is the
    file it was read from, if any.
    """

    vk: VerifyingKey
    h: np.ndarray
    l: np.ndarray  # noqa: E741 (bellperson's name)
    a: np.ndarray
    b_g1: np.ndarray
    b_g2: np.ndarray
    path: str | None = None

    def __post_init__(self):
        if not isinstance(self.vk, VerifyingKey):
            raise TypeError("vk must be a VerifyingKey")
        for name, group, _ in _SECTIONS:
            setattr(self, name, _pts(getattr(self, name), _WORDS[group], name))
        if self.b_g1.shape[0] != self.b_g2.shape[0]:
            raise ValueError(f"b_g1 has {self.b_g1.shape[0]} points, b_g2 {self.b_g2.shape[0]}")

    def __eq__(self, other):
        if not isinstance(other, ProvingKey):
            return NotImplemented
        return self.vk == other.vk and all(
            np.array_equal(getattr(self, n), getattr(other, n)) for n, _, _ in _SECTIONS)

    @property
    def domain_size(self) -> int:
        return self.h.shape[0] + 1

    @property
    def n_inputs(self) -> int:
        return self.vk.ic.shape[0]

    @property
    def n_aux(self) -> int:
        return self.l.shape[0]

    def __repr__(self):
        return (f"ProvingKey(domain={self.domain_size}, inputs={self.n_inputs}, "
                f"aux={self.n_aux}, A={self.a.shape[0]}, B={self.b_g1.shape[0]}, "
                f"path={self.path!r})")


# ----------------------------------------------------------------------------- decoding

class _Reader:
    """Sequential decoder over a byte buffer (an mmap or bytes) with FormatError reporting."""

    def __init__(self, buf, path, threads):
        self.buf, self.path, self.threads = buf, path, threads
        self.size = len(buf)
        self.off = 0

    def need(self, nbytes, what):
        rem = self.size - self.off
        if nbytes > rem:
            raise FormatError(self.path, self.off,
                              f"{what} ({nbytes} bytes), but only {rem} bytes remain")

    def u32(self, what):
        self.need(4, f"u32 big-endian count of {what}")
        (v,) = struct.unpack_from(">I", self.buf, self.off)
        self.off += 4
        return v

    def points(self, count, group, what, subgroup, allow_infinity):
        """Decode ``count`` uncompressed points at the current offset; return (count, words)."""
        size = _SIZE[group]
        start = self.off
        self.need(count * size, f"{count} uncompressed {group.upper()} points for {what}")
        f = _field()
        self.off += count * size
        if count == 0:
            return np.zeros((0, _WORDS[group]), np.uint64)
        raw = np.frombuffer(self.buf, dtype=np.uint8, count=count * size, offset=start)
        raw = raw.reshape(count, size)
        try:
            first_inf = -1 if allow_infinity else self._first_infinity(raw)
            try:
                out = f.decode_points(raw, group, subgroup=subgroup, threads=self.threads,
                                      name=what)
                bad = -1
            except ValueError:
                out = None
                _, status = f.decode_points(raw, group, subgroup, self.threads, True, what)
                bad = int(np.flatnonzero(status)[0])
                reason = f.STATUS_MESSAGES.get(int(status[bad]), "invalid encoding")
            if first_inf >= 0 and (bad < 0 or first_inf < bad):
                raise FormatError(self.path, start + first_inf * size,
                                  f"{what}[{first_inf}] not the point at infinity")
            if bad >= 0:
                chk = " in the prime-order subgroup" if subgroup else ""
                raise FormatError(self.path, start + bad * size,
                                  f"{what}[{bad}] a valid uncompressed {group.upper()} point"
                                  f"{chk} ({reason})")
            return out
        finally:
            del raw

    @staticmethod
    def _first_infinity(raw):
        n = raw.shape[0]
        for s in range(0, n, _INF_SCAN_CHUNK):
            flags = raw[s:s + _INF_SCAN_CHUNK, 0] & 0x40
            hit = np.flatnonzero(flags)
            if hit.size:
                return s + int(hit[0])
        return -1

    def release(self, start, end):
        """Drop the pages of [start, end) from the mapping (they are decoded)."""
        if isinstance(self.buf, mmap.mmap) and hasattr(self.buf, "madvise"):
            page = mmap.PAGESIZE
            s = start // page * page
            e = end // page * page
            if e > s:
                try:
                    self.buf.madvise(mmap.MADV_DONTNEED, s, e - s)
                except (OSError, ValueError):  # advisory only
                    pass


def _read_vk_block(r: _Reader) -> VerifyingKey:
    pts = {}
    for name, group in _VK_POINTS:
        pts[name] = r.points(1, group, name, subgroup=True, allow_infinity=True)[0]
    n_ic = r.u32("IC points")
    ic = r.points(n_ic, "g1", "IC", subgroup=True, allow_infinity=False)
    return VerifyingKey(ic=ic, **pts)


def _open_map(path):
    path = os.fspath(path)
    f = open(path, "rb")
    try:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            raise FormatError(path, 0, "a bellperson parameter file, got an empty file")
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    finally:
        f.close()
    return path, mm


def _close_map(mm):
    try:
        mm.close()
    except BufferError:  # a view is still alive (an exception traceback): unmapped with it
        pass


def read_vk(path: str | os.PathLike, threads: int | None = None) -> VerifyingKey:
    """Read a bellperson ``.vk`` file (every point checked: flags, canonical coordinates,
    on-curve, subgroup; IC never infinity).  Raises FormatError(path, offset, expected)."""
    path, mm = _open_map(path)
    r = None
    try:
        r = _Reader(mm, path, threads)
        vk = _read_vk_block(r)
        if r.off != r.size:
            raise FormatError(path, r.off, f"end of file after the verifying key "
                                           f"({r.size - r.off} extra bytes)")
        return vk
    finally:
        del r
        _close_map(mm)


def read_params(path: str | os.PathLike, checked: bool = False,
                threads: int | None = None) -> ProvingKey:
    """Read a bellperson ``.params`` file into a :class:`ProvingKey`.

    Parameters
    ----------
    path : str or PathLike
    checked : bool
        Also check that every point of H, L, A, B_G1, B_G2 lies in the prime-order subgroup
        (bellperson ``checked``).  Flags, canonical coordinates and the curve equation are
        always checked; the vk block always fully.
    threads : int or None
        Decoding threads (None = all cores).

    Raises
    ------
    FormatError
        Truncation, impossible counts (B_G2's differing from B_G1's), bad flags,
        non-canonical coordinates, off-curve or
        (checked) non-subgroup points, points at infinity where bellperson forbids them,
        trailing bytes — with the byte offset of the first bad item.
    """
    path, mm = _open_map(path)
    r = None
    try:
        try:
            mm.madvise(mmap.MADV_SEQUENTIAL)
        except (AttributeError, OSError, ValueError):
            pass
        r = _Reader(mm, path, threads)
        vk = _read_vk_block(r)
        out = {}
        for name, group, label in _SECTIONS:
            n = r.u32(f"{label} points")
            if name == "b_g2" and n != out["b_g1"].shape[0]:
                # one point per B-dense variable in both B queries
                raise FormatError(path, r.off - 4, f"a B_G2 count equal to the B_G1 count "
                                                   f"({out['b_g1'].shape[0]}), found {n}")
            start = r.off
            out[name] = r.points(n, group, label, subgroup=checked, allow_infinity=False)
            r.release(start, r.off)
        if r.off != r.size:
            raise FormatError(path, r.off, f"end of file after the B_G2 section "
                                           f"({r.size - r.off} extra bytes)")
        return ProvingKey(vk, path=path, **out)
    finally:
        del r
        _close_map(mm)


# ----------------------------------------------------------------------------- encoding

def _no_infinity(arr, what):
    if arr.shape[0] == 0:
        return
    nz = arr.any(axis=1)
    if not nz.all():
        raise ValueError(f"{what}[{int(np.flatnonzero(~nz)[0])}] is the point at infinity, "
                         "which bellperson's reader rejects")


def _write_points(f, arr, group, threads):
    fld = _field()
    for s in range(0, arr.shape[0], _WRITE_CHUNK):
        f.write(fld.encode_points(arr[s:s + _WRITE_CHUNK], group, compressed=False,
                                  threads=threads))


def _write_vk_block(f, vk: VerifyingKey, threads):
    _no_infinity(vk.ic, "IC")
    for name, group in _VK_POINTS:
        _write_points(f, getattr(vk, name)[None, :], group, threads)
    f.write(struct.pack(">I", vk.ic.shape[0]))
    _write_points(f, vk.ic, "g1", threads)


def write_vk(path: str | os.PathLike, vk: VerifyingKey, threads: int | None = None) -> None:
    """Write ``vk`` as a bellperson ``.vk`` file (atomically: temp file + rename)."""
    atomic_write(path, lambda f: _write_vk_block(f, vk, threads))


def write_params(path: str | os.PathLike, pk: ProvingKey, threads: int | None = None) -> None:
    """Write ``pk`` as a bellperson ``.params`` file (atomically: temp file + rename).

    Points are encoded in chunks, so writing needs no second full copy in memory.
    Raises ValueError if a section bellperson reads without infinity holds the point at
    infinity, or if a count does not fit in u32.
    """
    for name, _, label in _SECTIONS:
        arr = getattr(pk, name)
        if arr.shape[0] >= 2**32:
            raise ValueError(f"{label} has {arr.shape[0]} points; the format's count is u32")
        _no_infinity(arr, label)

    def body(f):
        _write_vk_block(f, pk.vk, threads)
        for name, group, _ in _SECTIONS:
            arr = getattr(pk, name)
            f.write(struct.pack(">I", arr.shape[0]))
            _write_points(f, arr, group, threads)

    atomic_write(path, body)


# ----------------------------------------------------------------------------- proofs

def encode_proof(A_g1: np.ndarray, B_g2: np.ndarray, C_g1: np.ndarray) -> bytes:
    """The 192-byte bellperson proof A‖B‖C (compressed) from Montgomery affine points."""
    fld = _field()
    a = fld.encode_points(_g(A_g1, 12, "A")[None, :], "g1", compressed=True)
    b = fld.encode_points(_g(B_g2, 24, "B")[None, :], "g2", compressed=True)
    c = fld.encode_points(_g(C_g1, 12, "C")[None, :], "g1", compressed=True)
    return a.tobytes() + b.tobytes() + c.tobytes()


def decode_proof(data: bytes, path: str = "<proof>") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Decode one 192-byte proof into ``(A (12,), B (24,), C (12,))`` Montgomery arrays.

    As bellperson's ``Proof::read``: compressed encodings, on-curve and subgroup checked,
    the point at infinity rejected.  Raises FormatError(path, offset, expected).
    """
    buf = bytes(data)
    if len(buf) != PROOF_BYTES:
        raise FormatError(path, min(len(buf), PROOF_BYTES),
                          f"a {PROOF_BYTES}-byte proof, got {len(buf)} bytes")
    return _decode_proof_at(buf, 0, path)


def _decode_proof_at(buf, base, path):
    fld = _field()
    out = []
    off = base
    for label, group, size in (("A", "g1", 48), ("B", "g2", 96), ("C", "g1", 48)):
        raw = np.frombuffer(buf, dtype=np.uint8, count=size, offset=off).reshape(1, size)
        pts, status = fld.decode_points(raw, group, True, None, True, label)
        if status[0]:
            raise FormatError(path, off, f"proof {label}: a valid compressed {group.upper()} "
                                         f"point ({fld.STATUS_MESSAGES.get(int(status[0]))})")
        if not pts[0].any():
            raise FormatError(path, off, f"proof {label}: not the point at infinity")
        out.append(pts[0].copy())
        off += size
    return tuple(out)


def decode_proofs(data: bytes, path: str = "<proof>") -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Decode a concatenation of 192-byte proofs (a multi-partition proof) into a list of
    ``(A, B, C)``.  Raises FormatError when the length is not a positive multiple of 192."""
    buf = bytes(data)
    if len(buf) == 0 or len(buf) % PROOF_BYTES:
        raise FormatError(path, len(buf) - len(buf) % PROOF_BYTES,
                          f"a positive multiple of {PROOF_BYTES} bytes, got {len(buf)}")
    return [_decode_proof_at(buf, i, path) for i in range(0, len(buf), PROOF_BYTES)]
