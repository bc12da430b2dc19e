"""snarkjs file formats for the bls12381 curve: ``.zkey`` (Groth16), ``.wtns`` and the JSON files.

Byte layouts, as snarkjs 0.7.6 / ffjavascript 0.3.1 / @iden3/binfileutils 0.0.12 write them
(each fact is checked against snarkjs-made fixtures in ``tests/test_snarkjs_format.py``):

* Container (binfileutils ``readBinFile``): 4-byte magic (``b"zkey"``, ``b"wtns"``), u32 version,
  u32 section count, then sections ``{u32 id, u64 size, size bytes}``. All integers little-endian.
  Sections are located by id, never by position (``zkey new`` writes 1,2,4,3,9,8,5,6,7,10).
* Field elements on disk are little-endian, ``n8`` bytes (48 for Fq, 32 for Fr).
* zkey points (``zkey_utils.js`` ``writeG1``/``writeG2`` → ffjavascript ``toRprLEM``) are the raw
  wasm memory of an affine point: coordinates in Montgomery form with R = 2^384, G1 = x‖y
  (96 bytes), G2 = x.c0‖x.c1‖y.c0‖y.c1 (192 bytes), the point at infinity all zero
  (wasmcurves ``g1m_zeroAffine``). This is cuzk's in-memory layout, so points are handed over as
  uint64 arrays without conversion.
* zkey header (section 2, ``readHeaderGroth16``): n8q, q, n8r, r, nVars, nPublic, domainSize,
  alpha1, beta1, beta2, gamma2, delta1, delta2 (the order in the code; the comment at the top of
  ``zkey_utils.js`` lists another order and is wrong).
* zkey coefficients (section 4, ``zkey_new.js`` ``processConstraints``): u32 count, then 44-byte
  records ``{u32 matrix (0 = A, 1 = B), u32 constraint, u32 signal, 32-byte value}``, value =
  coef·2^512 mod r written canonically, i.e. the Montgomery form (R = 2^256) of coef·R. C is not
  stored; the records end with the nPublic+1 rows ``A[nConstraints+s][s] = 1`` for s = 0..nPublic.
* zkey IC (3), A (5), B1 (6) and B2 (7) have one point per signal (IC: nPublic+1), C (8) one per
  private signal (nVars-nPublic-1), H (9) domainSize points: the odd-indexed Lagrange basis
  points of the doubled domain, over δ (``writeHs``).
* wtns (``wtns_utils.js``): section 1 = n8, prime, u32 count; section 2 = the values, canonical
  little-endian (``writeBigInt``), not Montgomery.
* Prover side (``groth16_prove.js``; reproduced by ``tests/snarkjs_ref.py``, whose proofs
  ``snarkjs groth16 verify`` accepts): A·w and B·w per row from the records, C = A·w ∘ B·w;
  roots of unity from ffjavascript's nqr = 5 (w_2^32 = 5^((r-1)/2^32), squared downwards);
  H scalars = A·B − C evaluated at the odd points w_2n^(2j+1) (iFFT, scale coefficient i by
  w_2n^i, FFT), canonical, no division by Z; MSMs A, B1, B2 over w, C over w[nPublic+1:].
* JSON files are ``bfj.write(obj, {space: 1})``, which equals ``json.dumps(obj, indent=1)`` with
  no trailing newline; numbers are decimal strings.

Every reader raises :class:`cuzk.FormatError` naming the file, the byte offset and what was
expected there; no malformed input makes them crash, hang or read out of bounds.
"""
from __future__ import annotations

import dataclasses
import json
import mmap
import os
import struct

import numpy as np

from ._errors import FormatError

__all__ = [
    "Q", "R", "Coefficients", "Zkey", "read_zkey", "read_wtns",
    "write_proof_json", "write_public_json", "read_proof_json", "read_public_json",
    "read_verification_key_json",
    "fq_from_mont", "fq_to_mont", "g1_from_mont", "g2_from_mont", "g1_to_mont", "g2_to_mont",
    "fr_to_ints", "fr_from_ints",
]

# q (base field) and r (scalar field), one definition: cuzk._constants
from ._constants import FQ_MODULUS as Q, FR_MODULUS as R, fq_from_mont_int, fq_to_mont_int  # noqa: E402

_N8Q, _N8R = 48, 32
_G1, _G2 = 2 * _N8Q, 4 * _N8Q                      # affine point sizes in bytes
_Q_LIMBS = np.array([(Q >> (64 * i)) & (2**64 - 1) for i in range(6)], dtype=np.uint64)
_R_LIMBS = np.array([(R >> (64 * i)) & (2**64 - 1) for i in range(4)], dtype=np.uint64)
_MAX_SECTIONS = 4096                               # real files have ~10 (groth16) to ~20 (fflonk)

# One record of zkey section 4; packed (44 bytes), as snarkjs writes it.
_COEF_DTYPE = np.dtype([("matrix", "<u4"), ("constraint", "<u4"), ("signal", "<u4"),
                        ("value", "<u8", (4,))])
assert _COEF_DTYPE.itemsize == 44


# ----------------------------------------------------------------------------------------------
# Small conversions between cuzk's uint64 layout and Python ints (a few points, not bulk data).

def fq_from_mont(limbs) -> int:
    """Canonical int of one Fq element given as 6 little-endian uint64 limbs in Montgomery form."""
    return fq_from_mont_int(int.from_bytes(np.asarray(limbs, dtype="<u8").tobytes(), "little"))


def fq_to_mont(x: int) -> np.ndarray:
    """6 little-endian uint64 limbs of the Montgomery form (R = 2^384) of the Fq element ``x``."""
    return np.frombuffer(fq_to_mont_int(x % Q).to_bytes(_N8Q, "little"), dtype="<u8").astype(np.uint64)


def g1_from_mont(p):
    """Affine G1 point (12 uint64, Montgomery) → ``(x, y)`` canonical ints; ``None`` at infinity."""
    p = np.asarray(p, dtype=np.uint64).reshape(12)
    if not p.any():
        return None
    return fq_from_mont(p[0:6]), fq_from_mont(p[6:12])


def g2_from_mont(p):
    """Affine G2 point (24 uint64, Montgomery, x.c0‖x.c1‖y.c0‖y.c1) →
    ``((x0, x1), (y0, y1))``
    canonical ints, or ``None`` at infinity."""
    p = np.asarray(p, dtype=np.uint64).reshape(24)
    if not p.any():
        return None
    c = [fq_from_mont(p[6 * i:6 * i + 6]) for i in range(4)]
    return (c[0], c[1]), (c[2], c[3])


def g1_to_mont(pt) -> np.ndarray:
    """Inverse of :func:`g1_from_mont`: ``(x, y)`` or ``None`` → 12 uint64."""
    if pt is None:
        return np.zeros(12, dtype=np.uint64)
    return np.concatenate([fq_to_mont(pt[0]), fq_to_mont(pt[1])])


def g2_to_mont(pt) -> np.ndarray:
    """Inverse of :func:`g2_from_mont`: ``((x0, x1), (y0, y1))`` or ``None`` → 24 uint64."""
    if pt is None:
        return np.zeros(24, dtype=np.uint64)
    (x0, x1), (y0, y1) = pt
    return np.concatenate([fq_to_mont(v) for v in (x0, x1, y0, y1)])


def fr_to_ints(a) -> list:
    """Rows of an ``(n, 4)`` uint64 array of canonical Fr values → list of Python ints."""
    b = np.ascontiguousarray(a, dtype="<u8").tobytes()
    return [int.from_bytes(b[i:i + 32], "little") for i in range(0, len(b), 32)]


def fr_from_ints(values) -> np.ndarray:
    """Python ints in [0, r) → ``(n, 4)`` uint64 array (canonical, little-endian limbs).

    Raises
    ------
    ValueError
        naming the first value outside [0, r).
    """
    out = bytearray()
    for i, v in enumerate(values):
        v = int(v)
        if not 0 <= v < R:
            raise ValueError(f"value {i} is not a canonical Fr element: {v}")
        out += v.to_bytes(32, "little")
    return np.frombuffer(bytes(out), dtype="<u8").astype(np.uint64).reshape(-1, 4)


# ----------------------------------------------------------------------------------------------
# Binary container.

class _Bin:
    """A read-only mapping of one binfile with its section table (id → [(offset, size), ...])."""

    def __init__(self, path, magic: bytes, max_version: int):
        self.path = os.fspath(path)
        with open(self.path, "rb") as f:
            self.size = os.fstat(f.fileno()).st_size
            if self.size < 12:
                raise FormatError(self.path, self.size, f"a 12-byte {magic.decode()} file header "
                                  f"(file has {self.size} bytes)")
            self.mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        got, version, n_sections = struct.unpack_from("<4sII", self.mm, 0)
        if got != magic:
            raise FormatError(self.path, 0, f"magic {magic!r}, found {got!r}")
        if not 1 <= version <= max_version:
            raise FormatError(self.path, 4, f"{magic.decode()} version 1..{max_version}, "
                              f"found {version}")
        if n_sections > _MAX_SECTIONS:
            raise FormatError(self.path, 8, f"at most {_MAX_SECTIONS} sections, found {n_sections}")
        self.sections = {}
        pos = 12
        for i in range(n_sections):
            if pos + 12 > self.size:
                raise FormatError(self.path, pos, f"header of section {i + 1} of {n_sections} "
                                  "(file truncated)")
            sid, ssize = struct.unpack_from("<IQ", self.mm, pos)
            if ssize > self.size - pos - 12:
                raise FormatError(self.path, pos + 4, f"size of section {sid} at most "
                                  f"{self.size - pos - 12} bytes (to end of file), found {ssize}")
            self.sections.setdefault(sid, []).append((pos + 12, ssize, pos))
            pos += 12 + ssize

    def section(self, sid: int, name: str):
        """(offset, size) of the unique section ``sid``."""
        found = self.sections.get(sid)
        if not found:
            raise FormatError(self.path, 8, f"a {name} section (id {sid}); it is missing")
        if len(found) > 1:
            raise FormatError(self.path, found[1][2], f"one {name} section (id {sid}), "
                              f"found {len(found)}")
        return found[0][0], found[0][1]

    def u32(self, off: int) -> int:
        return struct.unpack_from("<I", self.mm, off)[0]

    def bigint(self, off: int, n8: int) -> int:
        return int.from_bytes(self.mm[off:off + n8], "little")

    def u64s(self, off: int, count: int) -> np.ndarray:
        """``count`` little-endian uint64 at ``off``: a zero-copy read-only view of the mapping
        when ``off`` is 8-byte aligned, else an aligned read-only copy."""
        a = np.frombuffer(self.mm, dtype="<u8", count=count, offset=off)
        if off % 8:
            a = a.copy()
            a.flags.writeable = False
        return a


def _first_not_below(limbs: np.ndarray, modulus: np.ndarray) -> int:
    """Index of the first row of ``limbs`` (m, k) uint64 (little-endian) that is >= modulus, or -1.

    Cost: 3k vectorized passes over the rows.
    """
    k = modulus.shape[0]
    lt = np.zeros(limbs.shape[0], dtype=bool)
    eq = np.ones(limbs.shape[0], dtype=bool)
    for j in range(k - 1, -1, -1):
        col = limbs[:, j]
        lt |= eq & (col < modulus[j])
        eq &= col == modulus[j]
    bad = np.flatnonzero(~lt)
    return int(bad[0]) if bad.size else -1


def _check_fq(b: _Bin, arr: np.ndarray, off: int, what: str, elem_per_point: int):
    """FormatError at the first coordinate of ``arr`` (points at file offset ``off``) not < q."""
    i = _first_not_below(arr.reshape(-1, 6), _Q_LIMBS)
    if i >= 0:
        raise FormatError(b.path, off + i * _N8Q, f"{what}: Fq coordinates < q in Montgomery form "
                          f"(point {i // elem_per_point}, coordinate {i % elem_per_point})")


# ----------------------------------------------------------------------------------------------
# zkey

@dataclasses.dataclass(frozen=True, eq=False)
class Coefficients:
    """Sparse A and B matrices of a snarkjs zkey, as parallel arrays (one entry per record).

    ``matrix`` (uint32, 0 = A, 1 = B), ``constraint`` and ``signal`` (uint32), and ``value``
    ((n, 4) uint64): the stored value coef·2^512 mod r, canonical little-endian. Read as a
    Montgomery-form element (R = 2^256) it is coef·R, so a Montgomery multiplication by a
    *canonical* witness value w gives the Montgomery form of coef·w (snarkjs's ``buildABC1``),
    and a Montgomery multiplication by 1 gives the Montgomery form of coef (cuzk's layout).
    ``records`` is the structured zero-copy view of the section the arrays were copied from.
    """

    matrix: np.ndarray
    constraint: np.ndarray
    signal: np.ndarray
    value: np.ndarray = dataclasses.field(repr=False)
    records: np.ndarray = dataclasses.field(repr=False)

    def __len__(self):
        return self.matrix.shape[0]


@dataclasses.dataclass(frozen=True, eq=False)
class Zkey:
    """A snarkjs Groth16 proving key for BLS12-381 (see the module docstring for the layouts).

    Scalars: ``n_vars`` (signals, including the constant 1), ``n_public`` (public signals, not
    including 1), ``domain_size`` (power of two > nConstraints + nPublic). Points are read-only
    uint64 arrays in cuzk's layout (affine, Montgomery, infinity = 0): single points
    ``alpha1 beta1 delta1`` (12,), ``beta2 gamma2 delta2`` (24,); bases ``ic`` (nPublic+1, 12),
    ``a`` ``b1`` (nVars, 12), ``b2`` (nVars, 24), ``c`` (nVars-nPublic-1, 12), ``h``
    (domainSize, 12). Large sections are views of a read-only memory map when they are 8-byte
    aligned in the file, aligned copies otherwise (so the file must not be truncated while
    they are alive). ``coeffs`` is a :class:`Coefficients`. ``sections`` maps section id →
    (offset, size) of its data.
    """

    path: str
    n_vars: int
    n_public: int
    domain_size: int
    alpha1: np.ndarray = dataclasses.field(repr=False)
    beta1: np.ndarray = dataclasses.field(repr=False)
    beta2: np.ndarray = dataclasses.field(repr=False)
    gamma2: np.ndarray = dataclasses.field(repr=False)
    delta1: np.ndarray = dataclasses.field(repr=False)
    delta2: np.ndarray = dataclasses.field(repr=False)
    ic: np.ndarray = dataclasses.field(repr=False)
    coeffs: Coefficients = dataclasses.field(repr=False)
    a: np.ndarray = dataclasses.field(repr=False)
    b1: np.ndarray = dataclasses.field(repr=False)
    b2: np.ndarray = dataclasses.field(repr=False)
    c: np.ndarray = dataclasses.field(repr=False)
    h: np.ndarray = dataclasses.field(repr=False)
    sections: dict = dataclasses.field(repr=False)

    @property
    def log_domain_size(self) -> int:
        """log2(domain_size)."""
        return self.domain_size.bit_length() - 1


_GROTH16_HEADER_SIZE = 4 + _N8Q + 4 + _N8R + 12 + 3 * _G1 + 3 * _G2   # 964 bytes


def read_zkey(path: str | os.PathLike) -> Zkey:
    """Read a snarkjs Groth16 ``.zkey`` for BLS12-381.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    Zkey
        Points stay in the file's layout (affine, little-endian Montgomery limbs, infinity = 0),
        which is cuzk's; see :class:`Zkey` and :class:`Coefficients`.

    Raises
    ------
    cuzk.FormatError
        with the file, byte offset and expectation: bad magic/version, truncated or missing
        sections, a protocol other than Groth16 (1), a curve other than BLS12-381 (q, r),
        section sizes that disagree with the header, coefficients with a matrix other than
        A/B, a constraint >= domainSize, a signal >= nVars or a value >= r, point coordinates
        >= q.
    OSError
        when the file cannot be opened.
    """
    b = _Bin(path, b"zkey", 2)
    p = b.path

    off, size = b.section(1, "header")
    if size != 4:
        raise FormatError(p, off - 8, f"header section of 4 bytes, found {size}")
    protocol = b.u32(off)
    if protocol != 1:
        raise FormatError(p, off, f"protocol id 1 (Groth16), found {protocol}")

    off, size = b.section(2, "Groth16 header")

    def need(pos, n, what):
        if pos + n > off + size:
            raise FormatError(p, off - 8, f"Groth16 header section of {_GROTH16_HEADER_SIZE} "
                              f"bytes, found {size} (too short for {what})")

    pos = off
    need(pos, 4, "n8q")
    n8q = b.u32(pos)
    if n8q != _N8Q:
        raise FormatError(p, pos, f"n8q = 48 (BLS12-381), found {n8q}")
    need(pos + 4, _N8Q, "q")
    if b.bigint(pos + 4, _N8Q) != Q:
        raise FormatError(p, pos + 4, "q = BLS12-381 base field modulus")
    pos += 4 + _N8Q
    need(pos, 4, "n8r")
    n8r = b.u32(pos)
    if n8r != _N8R:
        raise FormatError(p, pos, f"n8r = 32 (BLS12-381), found {n8r}")
    need(pos + 4, _N8R, "r")
    if b.bigint(pos + 4, _N8R) != R:
        raise FormatError(p, pos + 4, "r = BLS12-381 scalar field modulus")
    pos += 4 + _N8R
    if size != _GROTH16_HEADER_SIZE:
        raise FormatError(p, off - 8, f"Groth16 header section of {_GROTH16_HEADER_SIZE} bytes, "
                          f"found {size}")
    n_vars, n_public, domain_size = struct.unpack_from("<III", b.mm, pos)
    if n_vars < n_public + 1:
        raise FormatError(p, pos, f"nVars >= nPublic + 1 = {n_public + 1}, found {n_vars}")
    if domain_size < 2 or domain_size & (domain_size - 1) or domain_size <= n_public:
        raise FormatError(p, pos + 8, f"domainSize a power of two > nPublic, found {domain_size}")
    pos += 12
    hdr = b.u64s(pos, (3 * _G1 + 3 * _G2) // 8).copy()
    _check_fq(b, hdr, pos, "Groth16 header points", 1)
    hdr.flags.writeable = False
    g1w, g2w = _G1 // 8, _G2 // 8
    alpha1 = hdr[0:g1w]
    beta1 = hdr[g1w:2 * g1w]
    beta2 = hdr[2 * g1w:2 * g1w + g2w]
    gamma2 = hdr[2 * g1w + g2w:2 * g1w + 2 * g2w]
    delta1 = hdr[2 * g1w + 2 * g2w:3 * g1w + 2 * g2w]
    delta2 = hdr[3 * g1w + 2 * g2w:3 * g1w + 3 * g2w]

    def points(sid, name, count, psize):
        off, size = b.section(sid, name)
        if size != count * psize:
            raise FormatError(p, off - 8, f"{name} section of {count} points = {count * psize} "
                              f"bytes, found {size}")
        arr = b.u64s(off, count * psize // 8).reshape(count, psize // 8)
        _check_fq(b, arr, off, f"{name} section", psize // _N8Q)
        return arr

    ic = points(3, "IC", n_public + 1, _G1)
    a = points(5, "A", n_vars, _G1)
    b1 = points(6, "B1", n_vars, _G1)
    b2 = points(7, "B2", n_vars, _G2)
    c = points(8, "C", n_vars - n_public - 1, _G1)
    h = points(9, "H", domain_size, _G1)

    off, size = b.section(4, "coefficients")
    if size < 4:
        raise FormatError(p, off - 8, f"coefficients section of at least 4 bytes, found {size}")
    n = b.u32(off)
    if size != 4 + n * _COEF_DTYPE.itemsize:
        raise FormatError(p, off, f"coefficient count = (section size - 4) / 44 = "
                          f"{(size - 4) / 44:g}, found {n}")
    rec = np.frombuffer(b.mm, dtype=_COEF_DTYPE, count=n, offset=off + 4)
    coeffs = Coefficients(
        matrix=np.ascontiguousarray(rec["matrix"], dtype=np.uint32),
        constraint=np.ascontiguousarray(rec["constraint"], dtype=np.uint32),
        signal=np.ascontiguousarray(rec["signal"], dtype=np.uint32),
        value=np.ascontiguousarray(rec["value"], dtype=np.uint64),
        records=rec,
    )
    base = off + 4
    for field, limit, desc in (("matrix", 2, "matrix 0 (A) or 1 (B)"),
                               ("constraint", domain_size,
                                f"constraint < domainSize = {domain_size}"),
                               ("signal", n_vars, f"signal < nVars = {n_vars}")):
        bad = np.flatnonzero(getattr(coeffs, field) >= limit)
        if bad.size:
            i = int(bad[0])
            found = int(getattr(coeffs, field)[i])
            raise FormatError(p, base + 44 * i + _COEF_DTYPE.fields[field][1],
                              f"coefficient {i}: {desc}, found {found}")
    i = _first_not_below(coeffs.value, _R_LIMBS)
    if i >= 0:
        raise FormatError(p, base + 44 * i + 12, f"coefficient {i}: value < r")
    for arr in (coeffs.matrix, coeffs.constraint, coeffs.signal, coeffs.value):
        arr.flags.writeable = False

    sections = {sid: (v[0][0], v[0][1]) for sid, v in b.sections.items()}
    return Zkey(path=p, n_vars=n_vars, n_public=n_public, domain_size=domain_size,
                alpha1=alpha1, beta1=beta1, beta2=beta2, gamma2=gamma2, delta1=delta1,
                delta2=delta2, ic=ic, coeffs=coeffs, a=a, b1=b1, b2=b2, c=c, h=h,
                sections=sections)


# ----------------------------------------------------------------------------------------------
# wtns

def read_wtns(path: str | os.PathLike) -> np.ndarray:
    """Read a snarkjs/circom ``.wtns`` witness for BLS12-381.

    Returns
    -------
    numpy.ndarray
        ``(nWitness, 4)`` uint64, read-only: the values as stored, canonical (NOT Montgomery)
        little-endian limbs. Entry 0 is the constant 1, entries 1..nPublic the public signals.

    Raises
    ------
    cuzk.FormatError
        bad magic/version, missing/duplicated/truncated sections, n8 != 32, a prime other than
        BLS12-381's r, a count that disagrees with the section size, a value >= r.
    OSError
        when the file cannot be opened.
    """
    b = _Bin(path, b"wtns", 2)
    p = b.path
    off, size = b.section(1, "header")
    if size != 4 + _N8R + 4:
        raise FormatError(p, off - 8, f"wtns header section of {4 + _N8R + 4} bytes (n8 = 32), "
                          f"found {size}")
    n8 = b.u32(off)
    if n8 != _N8R:
        raise FormatError(p, off, f"n8 = 32 (BLS12-381 r), found {n8}")
    if b.bigint(off + 4, _N8R) != R:
        raise FormatError(p, off + 4, "prime = BLS12-381 scalar field modulus r")
    n = b.u32(off + 4 + _N8R)
    off2, size2 = b.section(2, "witness")
    if size2 != n * _N8R:
        raise FormatError(p, off + 4 + _N8R, f"witness count = section 2 size / 32 = "
                          f"{size2 / _N8R:g}, found {n}")
    w = b.u64s(off2, 4 * n).reshape(n, 4)
    i = _first_not_below(w, _R_LIMBS)
    if i >= 0:
        raise FormatError(p, off2 + 32 * i, f"witness value {i} < r")
    return w


# ----------------------------------------------------------------------------------------------
# JSON

def _dec(v) -> str:
    return str(int(v))


def _check_coord(v, what):
    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < Q:
        raise ValueError(f"{what}: an int in [0, q) expected, got {v!r}")


def _g1_json(pt, what):
    if pt is None:                                   # snarkjs G1.toObject(zero)
        return ["0", "1", "0"]
    x, y = pt
    _check_coord(x, what + ".x"), _check_coord(y, what + ".y")
    return [_dec(x), _dec(y), "1"]


def _g2_json(pt, what):
    if pt is None:                                   # snarkjs G2.toObject(zero)
        return [["0", "0"], ["1", "0"], ["0", "0"]]
    (x0, x1), (y0, y1) = pt
    for v, n in ((x0, "x.c0"), (x1, "x.c1"), (y0, "y.c0"), (y1, "y.c1")):
        _check_coord(v, f"{what}.{n}")
    return [[_dec(x0), _dec(x1)], [_dec(y0), _dec(y1)], ["1", "0"]]


def _write_json(path, obj):
    from ._io import atomic_write
    atomic_write(path, json.dumps(obj, indent=1))


def write_proof_json(path: str | os.PathLike, A: tuple, B: tuple, C: tuple) -> None:
    """Write ``proof.json`` byte-for-byte as ``snarkjs groth16 prove`` does for bls12381.

    Parameters
    ----------
    A, C : tuple (x, y) of canonical ints, or None for the point at infinity
    B : tuple ((x.c0, x.c1), (y.c0, y.c1)) of canonical ints, or None

    Raises
    ------
    ValueError
        naming the first coordinate that is not an int in [0, q).
    """
    obj = {"pi_a": _g1_json(A, "A"), "pi_b": _g2_json(B, "B"), "pi_c": _g1_json(C, "C"),
           "protocol": "groth16", "curve": "bls12381"}
    _write_json(path, obj)


def write_public_json(path: str | os.PathLike, public: list) -> None:
    """Write ``public.json`` (the public signals, without the leading 1) as snarkjs does.

    Raises
    ------
    ValueError
        naming the first value that is not an int in [0, r).
    """
    out = []
    for i, v in enumerate(public):
        if isinstance(v, np.integer):
            v = int(v)
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < R:
            raise ValueError(f"public input {i}: an int in [0, r) expected, got {v!r}")
        out.append(_dec(v))
    _write_json(path, out)


_JSON_MAX_DIGITS = 200      # an integer literal: q has 116 digits, nPublic < 2^32 ten


class _LongLiteral(Exception):
    pass


def _json_int(s: str) -> int:
    if len(s.lstrip("-")) > _JSON_MAX_DIGITS:
        raise _LongLiteral(len(s))
    return int(s)


def _load_json(path):
    """Parse a snarkjs JSON file.  FormatError for bytes that are not UTF-8 JSON, nesting past
    the interpreter's recursion limit (snarkjs files nest four deep) and integer literals of
    more than _JSON_MAX_DIGITS digits (Python's own limit would raise a ValueError naming no
    file)."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    try:
        return path, json.loads(data.decode("utf-8"), parse_int=_json_int)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FormatError(path, getattr(e, "pos", getattr(e, "start", None)),
                          f"UTF-8 JSON ({e})") from None
    except RecursionError:
        raise FormatError(path, None, "JSON nested a few levels deep (snarkjs nests four), "
                                      "found nesting past the recursion limit") from None
    except _LongLiteral as e:
        raise FormatError(path, None, f"integer literals of at most {_JSON_MAX_DIGITS} digits "
                                      f"(snarkjs writes numbers as decimal strings), found one "
                                      f"of {e.args[0]} characters") from None


def _brief(v) -> str:
    """A short description of a JSON value for messages: never a whole (or deep) repr."""
    if isinstance(v, str):
        return repr(v[:60]) + ("..." if len(v) > 60 else "")
    if isinstance(v, list):
        return f"a list of {len(v)} items"
    if isinstance(v, dict):
        return f"an object of {len(v)} keys"
    if isinstance(v, int) and not isinstance(v, bool) and v.bit_length() > 700:
        return f"an integer of {v.bit_length()} bits"
    return repr(v)


def _num(path, v, what, modulus):
    """A snarkjs number (decimal or 0x-hex string, or JSON int) in [0, modulus)."""
    if isinstance(v, str):
        s = v.strip()
        ok = s.isascii() and (s.isdigit() or (s[:2] in ("0x", "0X") and len(s) > 2 and
                                              all(c in "0123456789abcdefABCDEF" for c in s[2:])))
        if ok and len(s) <= 200:
            n = int(s, 0) if s[:2] in ("0x", "0X") else int(s)
            if n < modulus:
                return n
    elif isinstance(v, int) and not isinstance(v, bool) and 0 <= v < modulus:
        return v
    name = "q" if modulus == Q else "r"
    raise FormatError(path, None, f"{what}: a decimal string < {name}, found {_brief(v)}")


def _fq2(path, v, what):
    if not isinstance(v, list) or len(v) != 2:
        raise FormatError(path, None, f"{what}: a pair [c0, c1], found {_brief(v)}")
    return _num(path, v[0], what + "[0]", Q), _num(path, v[1], what + "[1]", Q)


def _fq2_mul(a, b):
    return ((a[0] * b[0] - a[1] * b[1]) % Q, (a[0] * b[1] + a[1] * b[0]) % Q)


def _fq2_inv(a):
    t = pow(a[0] * a[0] + a[1] * a[1], -1, Q)
    return (a[0] * t % Q, -a[1] * t % Q)


def _read_g1(path, v, what):
    """snarkjs G1 object [x, y, z] (Jacobian; z = 1 affine, z = 0 infinity) → (x, y) or None."""
    if not isinstance(v, list) or len(v) not in (2, 3):
        raise FormatError(path, None, f"{what}: a list [x, y, z] of decimal strings, "
                          f"found {_brief(v)}")
    x, y = _num(path, v[0], what + "[0]", Q), _num(path, v[1], what + "[1]", Q)
    z = _num(path, v[2], what + "[2]", Q) if len(v) == 3 else 1
    if z == 0:
        return None
    if z != 1:
        zi = pow(z, -1, Q)
        x, y = x * zi * zi % Q, y * zi * zi * zi % Q
    return x, y


def _read_g2(path, v, what):
    """snarkjs G2 object [[x0,x1],[y0,y1],[z0,z1]] (Jacobian) → ((x0,x1),(y0,y1)) or None."""
    if not isinstance(v, list) or len(v) not in (2, 3):
        raise FormatError(path, None, f"{what}: a list [x, y, z] of Fq2 pairs, found {_brief(v)}")
    x, y = _fq2(path, v[0], what + "[0]"), _fq2(path, v[1], what + "[1]")
    z = _fq2(path, v[2], what + "[2]") if len(v) == 3 else (1, 0)
    if z == (0, 0):
        return None
    if z != (1, 0):
        zi = _fq2_inv(z)
        zi2 = _fq2_mul(zi, zi)
        x, y = _fq2_mul(x, zi2), _fq2_mul(y, _fq2_mul(zi2, zi))
    return x, y


def _check_points(path, named, group):
    """FormatError naming the first of ``named`` ((what, affine canonical point) pairs) that
    is not on the curve or not in the prime-order subgroup (infinity passes)."""
    from ._native import _field
    if not named:
        return
    conv = g1_to_mont if group == "g1" else g2_to_mont
    pts = np.stack([conv(p) for _, p in named])
    try:
        _field.check_points(pts, group, subgroup=True)
    except ValueError:
        for what, p in named:
            try:
                _field.check_points(conv(p)[None, :], group, subgroup=True)
            except ValueError as e:
                reason = str(e).split(": ", 1)[-1]
                raise FormatError(path, None, f"{what}: a {group.upper()} point on the curve, "
                                              f"in the prime-order subgroup ({reason})") from None
        raise


def _check_header(path, obj, keys):
    if not isinstance(obj, dict):
        raise FormatError(path, 0, "a JSON object")
    for k in keys:
        if k not in obj:
            raise FormatError(path, None, f"key {k!r}")
    if obj.get("protocol") != "groth16":
        raise FormatError(path, None, f"protocol \"groth16\", found {_brief(obj.get('protocol'))}")
    curve = obj.get("curve")
    # snarkjs curves.js normalizes names to upper-case alphanumerics ("bls12-381" → "BLS12381")
    if not isinstance(curve, str) or "".join(c for c in curve.upper() if c.isalnum()) != "BLS12381":
        raise FormatError(path, None, f"curve \"bls12381\", found {_brief(obj.get('curve'))}")


def read_proof_json(path):
    """Read a snarkjs Groth16 ``proof.json`` for bls12381.

    Returns
    -------
    (A, B, C)
        affine canonical ints as taken by :func:`write_proof_json` (None = infinity);
        Jacobian inputs (z other than 1) are normalized.

    Raises
    ------
    cuzk.FormatError
        not JSON, protocol/curve other than groth16/bls12381, malformed or out-of-range numbers.
        (Points are not checked against the curve here, so any coordinates round-trip through
        :func:`write_proof_json`; :func:`cuzk.verify` checks them.)
    """
    path, obj = _load_json(path)
    _check_header(path, obj, ("pi_a", "pi_b", "pi_c"))
    return (_read_g1(path, obj["pi_a"], "pi_a"), _read_g2(path, obj["pi_b"], "pi_b"),
            _read_g1(path, obj["pi_c"], "pi_c"))


def read_public_json(path) -> list:
    """Read ``public.json``: a list of decimal strings < r → list of ints.

    Raises
    ------
    cuzk.FormatError
        not a JSON list, or an entry that is not a number in [0, r).
    """
    path, obj = _load_json(path)
    if not isinstance(obj, list):
        raise FormatError(path, 0, "a JSON list of decimal strings")
    return [_num(path, v, f"public[{i}]", R) for i, v in enumerate(obj)]


def read_verification_key_json(path) -> dict:
    """Read a snarkjs Groth16 ``verification_key.json`` for bls12381.

    Returns
    -------
    dict
        ``protocol``, ``curve``, ``nPublic`` (int), ``vk_alpha_1`` ((x, y)), ``vk_beta_2``,
        ``vk_gamma_2``, ``vk_delta_2`` (((x0, x1), (y0, y1))), ``IC`` (list of nPublic+1 G1
        tuples), all affine canonical ints (None = infinity).

    Raises
    ------
    cuzk.FormatError
        missing keys, protocol/curve mismatch, malformed numbers, ``len(IC) != nPublic + 1``,
        points off the curve or outside the prime-order subgroup (reported against this file,
        not against a proof checked with it).
    """
    path, obj = _load_json(path)
    keys = ("nPublic", "vk_alpha_1", "vk_beta_2", "vk_gamma_2", "vk_delta_2", "IC")
    _check_header(path, obj, keys)
    n_public = obj["nPublic"]
    if not isinstance(n_public, int) or isinstance(n_public, bool) or not 0 <= n_public < 2**32:
        raise FormatError(path, None, f"nPublic: an integer in [0, 2^32), found "
                                      f"{_brief(n_public)}")
    ic = obj["IC"]
    if not isinstance(ic, list) or len(ic) != n_public + 1:
        raise FormatError(path, None, f"IC: a list of nPublic + 1 = {n_public + 1} points")
    out = {
        "protocol": "groth16",
        "curve": obj["curve"],
        "nPublic": n_public,
        "vk_alpha_1": _read_g1(path, obj["vk_alpha_1"], "vk_alpha_1"),
        "vk_beta_2": _read_g2(path, obj["vk_beta_2"], "vk_beta_2"),
        "vk_gamma_2": _read_g2(path, obj["vk_gamma_2"], "vk_gamma_2"),
        "vk_delta_2": _read_g2(path, obj["vk_delta_2"], "vk_delta_2"),
        "IC": [_read_g1(path, p, f"IC[{i}]") for i, p in enumerate(ic)],
    }
    _check_points(path, [("vk_alpha_1", out["vk_alpha_1"])]
                  + [(f"IC[{i}]", p) for i, p in enumerate(out["IC"])], "g1")
    _check_points(path, [(k, out[k]) for k in ("vk_beta_2", "vk_gamma_2", "vk_delta_2")], "g2")
    return out
