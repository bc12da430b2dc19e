"""The prover's per-partition input: evaluations, witness and densities.

An :class:`Assignment` is what a Filecoin prover (bellperson's ``ProvingAssignment``) hands
over for one partition:

- ``a``, ``b``, ``c``: the evaluations A·z, B·z, C·z, one row per constraint INCLUDING the
  ``input_i · 0 = 0`` rows bellperson appends for the public inputs (A has input_i, B and C are
  zero there); not padded to the domain (the domain is ``next_pow2(len(a))``);
- ``inputs`` (n_in, 4), ``inputs[0] = 1``, and ``aux`` (n_aux, 4);
- densities: bit vectors saying which variables occur in a matrix at all
  (``a_aux``: aux in A; ``b_input``: inputs in B; ``b_aux``: aux in B).

Every Fr array is uint64 (n, 4), little-endian limbs, Montgomery form (R = 2^256, the
blst/blstrs layout) in memory.

npz file layout (``save_npz`` / ``load_npz``), every array uint64 unless said otherwise:

=================  ==========================================================================
key                contents
=================  ==========================================================================
``form``           0-d unicode array, ``"montgomery"`` or ``"canonical"``: the form of every
                   Fr array in the file
``a`` ``b`` ``c``  (m, 4) evaluations
``inputs``         (n_in, 4), first row the constant 1
``aux``            (n_aux, 4)
``a_aux``          (ceil(n_aux/64),) density words, bit i of word i // 64
``b_input``        (ceil(n_in/64),) density words
``b_aux``          (ceil(n_aux/64),) density words
``a_aux_bits``     0-d int64: number of valid bits of ``a_aux`` (= n_aux); likewise
``b_input_bits``   ``b_input_bits`` (= n_in) and ``b_aux_bits`` (= n_aux)
``b_aux_bits``
=================  ==========================================================================
"""
from __future__ import annotations

import dataclasses
import io
import math
import os
import struct
import zipfile

import numpy as np

from ._errors import FormatError, UnsatisfiedAssignmentError

__all__ = ["Density", "Assignment", "R_MOD", "fr_to_mont", "fr_from_mont",
           "fr_ints_to_mont", "fr_mont_to_ints", "popcount_words"]

# R_MOD (r) and the small int <-> Montgomery converters live in cuzk._constants.
from ._constants import FR_MODULUS as R_MOD, fr_ints_to_mont, fr_mont_to_ints  # noqa: E402
_FORMS = ("montgomery", "canonical")


# ----------------------------------------------------------------------------- Fr helpers
# Small-array conversions in Python big ints are cuzk._constants' (inputs, toxic waste, tests);
# bulk conversions of large arrays go through the native field module (cuzk._native._field).

def fr_to_mont(arr: np.ndarray, threads=None) -> np.ndarray:
    """Canonical uint64 (n, 4) -> Montgomery (new array).  ValueError names the first value ≥ r."""
    from ._native import _field
    return _field.to_mont(np.ascontiguousarray(arr, dtype=np.uint64), "fr", threads=threads)


def fr_from_mont(arr: np.ndarray, threads=None) -> np.ndarray:
    """Montgomery uint64 (n, 4) -> canonical (new array)."""
    from ._native import _field
    return _field.from_mont(np.ascontiguousarray(arr, dtype=np.uint64), "fr", threads=threads)


def _first_unreduced(arr: np.ndarray) -> int:
    """First row ≥ r (not a reduced representative), or -1."""
    from ._native import _r1cs
    return _r1cs.fr_first_unreduced(np.ascontiguousarray(arr, dtype=np.uint64))


# ----------------------------------------------------------------------------- npz members
# np.load trusts an npy header before it reads any data: a plain .npy passed as .npz comes
# back as an ndarray, a member that is not npy data as bytes, a header's shape may ask for
# hundreds of GiB, and an oversized header raises NumPy's multi-line advice.  The members are
# therefore read here: the header is parsed by NumPy's own reader, every size is checked
# against the archive before anything is allocated.

_NPY_MAGIC = b"\x93NUMPY"
_NPY_MAX_HEADER = 10000          # bytes; NumPy's default max_header_size
_DEFLATE_MAX_RATIO = 1032        # deflate never expands more than ~1032:1
_READ_CHUNK = 1 << 26            # bytes per readinto from a member


def _member_data_offset(raw, info):
    """File offset of a member's data (after its local header), or the local header's."""
    try:
        raw.seek(info.header_offset)
        hdr = raw.read(30)
        if len(hdr) == 30 and hdr[:4] == b"PK\x03\x04":
            n_name, n_extra = struct.unpack_from("<HH", hdr, 26)
            return info.header_offset + 30 + n_name + n_extra
    except (OSError, ValueError):
        pass
    return info.header_offset


def _read_npy_member(zf, raw, archive_size, path, key, name):
    """Member ``name`` of the open archive as an ndarray, or FormatError naming ``key``.

    The header must be npy 1.0/2.0 (at most _NPY_MAX_HEADER bytes), the dtype a plain
    numeric or unicode one (no objects, no records), and shape × itemsize must equal the
    member's data size, which must be possible for the archive's size (stored: at most the
    file; deflated: at most _DEFLATE_MAX_RATIO × its compressed size).
    """
    info = zf.getinfo(name)
    off = _member_data_offset(raw, info)
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise FormatError(path, info.header_offset,
                          f"member {key!r} stored or deflated (as NumPy writes), found "
                          f"compression method {info.compress_type}")
    limit = (info.compress_size if info.compress_type == zipfile.ZIP_STORED
             else _DEFLATE_MAX_RATIO * info.compress_size + 4096)
    if info.compress_size > archive_size or info.file_size > limit:
        raise FormatError(path, info.header_offset,
                          f"member {key!r} of at most {min(limit, archive_size)} bytes for a "
                          f"{archive_size}-byte archive, its zip entry claims {info.file_size}")
    with zf.open(info) as f:
        head = f.read(10)
        if len(head) < 10 or head[:6] != _NPY_MAGIC:
            raise FormatError(path, off, f"member {key!r} as npy data (magic \\x93NUMPY), "
                                         f"found {head[:6]!r}")
        version = (head[6], head[7])
        if version == (1, 0):
            n_len, hlen = 2, struct.unpack_from("<H", head, 8)[0]
        elif version == (2, 0):
            more = f.read(2)
            if len(more) < 2:
                raise FormatError(path, off + 10, f"member {key!r}: an npy 2.0 header length")
            head += more
            n_len, hlen = 4, struct.unpack_from("<I", head, 8)[0]
        else:
            raise FormatError(path, off + 6, f"member {key!r}: npy format version 1.0 or 2.0, "
                                             f"found {version[0]}.{version[1]}")
        if hlen > _NPY_MAX_HEADER:
            raise FormatError(path, off + 8, f"member {key!r}: an npy header of at most "
                                             f"{_NPY_MAX_HEADER} bytes, found {hlen}")
        header = f.read(hlen)
        if len(header) < hlen:
            raise FormatError(path, off + 8 + n_len, f"member {key!r}: an npy header of {hlen} "
                                                     f"bytes, found {len(header)}")
        reader = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                  else np.lib.format.read_array_header_2_0)
        try:
            shape, fortran, dtype = reader(io.BytesIO(head[8:] + header),
                                           max_header_size=_NPY_MAX_HEADER)
        except (ValueError, TypeError, SyntaxError) as e:
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise FormatError(path, off + 8 + n_len,
                              f"member {key!r}: a valid npy header ({first})") from None
        if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None \
                or dtype.kind not in "biufU":
            raise FormatError(path, off + 8 + n_len,
                              f"member {key!r}: a plain numeric npy dtype, found {dtype}")
        data_off = 8 + n_len + hlen
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes != info.file_size - data_off:
            # a header may hold dimensions of thousands of digits: never format those
            big = any(d.bit_length() > 64 for d in shape) or nbytes.bit_length() > 64
            what = ("a shape of more than 2^64 bytes" if big else
                    f"shape {shape} of {dtype} ({nbytes} bytes)")
            raise FormatError(path, off + 8 + n_len,
                              f"member {key!r}: a shape that matches its "
                              f"{max(0, info.file_size - data_off)} bytes of data, found {what}")
        buf = np.empty(nbytes, dtype=np.uint8)
        view, got = memoryview(buf), 0
        while got < nbytes:
            k = f.readinto(view[got:got + _READ_CHUNK])
            if not k:
                raise FormatError(path, off + data_off + got,
                                  f"member {key!r}: {nbytes} bytes of data, found {got}")
            got += k
    arr = buf.view(dtype)
    if fortran:
        return arr.reshape(shape[::-1]).T
    return arr.reshape(shape)


def _npz_open(path):
    """(ZipFile, raw file, size) for ``path``, or FormatError for a file that is no zip."""
    raw = open(path, "rb")
    try:
        size = os.fstat(raw.fileno()).st_size
        magic = raw.read(6)
        raw.seek(0)
        if magic == _NPY_MAGIC:
            raise FormatError(path, 0, "an npz archive (a zip of .npy arrays), found a plain "
                                       ".npy file")
        try:
            zf = zipfile.ZipFile(raw)
        except Exception as e:  # noqa: BLE001  (zipfile raises many types on corrupt input)
            raise FormatError(path, None, f"an npz archive (zip), not readable as one "
                                          f"({type(e).__name__}: {str(e)[:100]})") from None
        return zf, raw, size
    except BaseException:
        raw.close()
        raise


# ----------------------------------------------------------------------------- Density

def popcount_words(words, nbits=None) -> int:
    """Set bits in a uint64 array: among its first ``nbits`` bits (None: every bit of every
    word).  Native, no copy, GIL released (2^27 bits: ~1 ms against ~13 for NumPy's)."""
    from ._native._prep import popcount
    return popcount(np.asarray(words, dtype=np.uint64).reshape(-1), nbits)


@dataclasses.dataclass(eq=False)
class Density:
    """A bit vector over variables: bit i is ``(words[i // 64] >> (i % 64)) & 1``.

    ``words`` is uint64 of length ``ceil(n_bits / 64)``; bits at or beyond ``n_bits`` are
    ignored (and cleared by the constructors here).
    """

    words: np.ndarray
    n_bits: int

    def __post_init__(self):
        self.words = np.ascontiguousarray(self.words, dtype=np.uint64).reshape(-1)
        self.n_bits = int(self.n_bits)
        if self.n_bits < 0:
            raise ValueError("n_bits must be >= 0")
        need = (self.n_bits + 63) // 64
        if self.words.shape[0] != need:
            raise ValueError(f"density of {self.n_bits} bits needs {need} words, "
                             f"got {self.words.shape[0]}")

    @classmethod
    def from_bools(cls, mask) -> "Density":
        """From a boolean array (one entry per variable)."""
        m = np.ascontiguousarray(mask, dtype=bool).reshape(-1)
        n = m.shape[0]
        nb = (n + 63) // 64 * 8
        packed = np.zeros(nb, dtype=np.uint8)
        packed[: (n + 7) // 8] = np.packbits(m, bitorder="little")
        return cls(packed.view("<u8").astype(np.uint64, copy=False), n)

    def to_bools(self) -> np.ndarray:
        """Boolean array of length n_bits."""
        b = np.unpackbits(self.words.astype("<u8", copy=False).view(np.uint8), bitorder="little")
        return b[: self.n_bits].astype(bool)

    def popcount(self) -> int:
        """Number of set bits among the first n_bits."""
        return popcount_words(self.words, self.n_bits)

    def __eq__(self, other):
        if not isinstance(other, Density):
            return NotImplemented
        return self.n_bits == other.n_bits and np.array_equal(self.to_bools(), other.to_bools())

    def __repr__(self):
        return f"Density(n_bits={self.n_bits}, popcount={self.popcount()})"


# ----------------------------------------------------------------------------- Assignment

def _fr2(a, name):
    a = np.ascontiguousarray(a, dtype=np.uint64)
    if a.ndim != 2 or a.shape[1] != 4:
        raise ValueError(f"{name} must have shape (n, 4), got {a.shape}")
    return a


@dataclasses.dataclass(eq=False)
class Assignment:
    """One partition's prover input (see the module docstring).  All Fr arrays Montgomery."""

    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    inputs: np.ndarray
    aux: np.ndarray
    a_aux_density: Density
    b_input_density: Density
    b_aux_density: Density

    def __post_init__(self):
        for name in ("a", "b", "c", "inputs", "aux"):
            setattr(self, name, _fr2(getattr(self, name), name))
        m = self.a.shape[0]
        if self.b.shape[0] != m or self.c.shape[0] != m:
            raise ValueError(f"a, b, c must have equal lengths, got {m}, {self.b.shape[0]}, "
                             f"{self.c.shape[0]}")
        if self.inputs.shape[0] < 1:
            raise ValueError("inputs must hold at least the constant 1")
        if self.a_aux_density.n_bits != self.n_aux:
            raise ValueError(f"a_aux density has {self.a_aux_density.n_bits} bits, "
                             f"expected n_aux = {self.n_aux}")
        if self.b_aux_density.n_bits != self.n_aux:
            raise ValueError(f"b_aux density has {self.b_aux_density.n_bits} bits, "
                             f"expected n_aux = {self.n_aux}")
        if self.b_input_density.n_bits != self.n_inputs:
            raise ValueError(f"b_input density has {self.b_input_density.n_bits} bits, "
                             f"expected n_inputs = {self.n_inputs}")

    # ---- sizes
    @property
    def n_inputs(self) -> int:
        return self.inputs.shape[0]

    @property
    def n_aux(self) -> int:
        return self.aux.shape[0]

    @property
    def n_constraints(self) -> int:
        """Rows of a, b, c (including the input rows)."""
        return self.a.shape[0]

    @property
    def domain_size(self) -> int:
        """next_pow2(len(a)) (at least 1)."""
        m = max(1, self.a.shape[0])
        return 1 << (m - 1).bit_length()

    def public_inputs(self) -> list:
        """The public inputs as Python ints, without the leading 1."""
        return fr_mont_to_ints(self.inputs[1:])

    def __repr__(self):
        return (f"Assignment(constraints={self.n_constraints}, domain={self.domain_size}, "
                f"inputs={self.n_inputs}, aux={self.n_aux}, "
                f"a_aux={self.a_aux_density.popcount()}/{self.a_aux_density.n_bits}, "
                f"b_input={self.b_input_density.popcount()}/{self.b_input_density.n_bits}, "
                f"b_aux={self.b_aux_density.popcount()}/{self.b_aux_density.n_bits})")

    @classmethod
    def coerce(cls, obj) -> "Assignment":
        """``obj`` as an Assignment: an Assignment as is, a str or PathLike loaded with
        :meth:`load_npz`.  Raises TypeError naming the type of anything else (and the errors
        of :meth:`load_npz` for a path)."""
        if isinstance(obj, cls):
            return obj
        if isinstance(obj, (str, os.PathLike)):
            return cls.load_npz(obj)
        raise TypeError(f"an assignment must be a cuzk.Assignment or the path of an .npz "
                        f"file, got {type(obj).__module__}.{type(obj).__qualname__}")

    # ---- checks
    def check_satisfied(self, threads=None) -> None:
        """Check ``a[i]·b[i] = c[i]`` (Fr) for every row: the evaluations of a satisfying
        witness pass, one Montgomery product per row (native, GIL released, ``threads``
        threads, None = all cores).

        It cannot see a wrong aux or input value whose rows still multiply out (a, b, c are
        not recomputed from the witness): verification of the proof catches those.

        Raises
        ------
        UnsatisfiedAssignmentError
            naming the first row that breaks (``.row``).
        """
        from ._native import _r1cs
        row = _r1cs.first_unsatisfied(self.a, self.b, self.c, threads=threads)
        if row >= 0:
            raise UnsatisfiedAssignmentError(row)

    def check_reduced(self) -> None:
        """ValueError naming the first array and row holding a value ≥ r."""
        for name in ("a", "b", "c", "inputs", "aux"):
            i = _first_unreduced(getattr(self, name))
            if i >= 0:
                raise ValueError(f"{name}[{i}] is not a reduced Fr element (≥ r)")

    def validate(self, pk) -> None:
        """Check the sizes against a :class:`cuzk._params.ProvingKey`, and the input rows.

        a, b, c: equal lengths, uint64 (m, 4), m ≥ n_in; L = n_aux, A = n_in +
        popcount(a_aux), B_G1 = B_G2 = popcount(b_input) + popcount(b_aux), H = domain − 1
        (domain = next_pow2(m)), IC = n_in.  The last n_in rows must be bellperson's input
        rows (a = inputs, b = c = 0): rows dropped from or added to the end of a, b, c shift
        them (the key holds no row count, only the domain, so this is how a shortened
        assignment shows).  Raises ValueError naming the first count or row that is off.
        """
        for name in ("a", "b", "c"):
            v = getattr(self, name)
            if not isinstance(v, np.ndarray) or v.dtype != np.uint64 or v.ndim != 2 \
                    or v.shape[1] != 4 or not v.flags.c_contiguous:
                raise ValueError(f"{name} must be a C-contiguous uint64 (n, 4) array")
        m = self.a.shape[0]
        if self.b.shape[0] != m or self.c.shape[0] != m:
            raise ValueError(f"a, b, c must have equal lengths, got {m}, {self.b.shape[0]}, "
                             f"{self.c.shape[0]}")
        k = self.n_inputs
        if m < k:
            raise ValueError(f"a, b, c have {m} rows, fewer than the {k} input rows that end "
                             "them")
        n_b = self.b_input_density.popcount() + self.b_aux_density.popcount()
        checks = [
            ("IC (vk.ic)", pk.vk.ic.shape[0], self.n_inputs, "n_inputs"),
            ("L", pk.l.shape[0], self.n_aux, "n_aux"),
            ("A", pk.a.shape[0], self.n_inputs + self.a_aux_density.popcount(),
             "n_inputs + popcount(a_aux)"),
            ("B_G1", pk.b_g1.shape[0], n_b, "popcount(b_input) + popcount(b_aux)"),
            ("B_G2", pk.b_g2.shape[0], n_b, "popcount(b_input) + popcount(b_aux)"),
            ("H", pk.h.shape[0], self.domain_size - 1, "domain - 1"),
        ]
        for what, have, want, formula in checks:
            if have != want:
                raise ValueError(f"parameters have {have} {what} points, the assignment needs "
                                 f"{want} ({formula})")
        rows = slice(m - k, m)
        for name, want in (("a", self.inputs), ("b", 0), ("c", 0)):
            bad = np.flatnonzero((getattr(self, name)[rows] != want).any(axis=1))
            if bad.size:
                j = int(bad[0])
                expect = f"inputs[{j}]" if name == "a" else "0"
                raise ValueError(f"{name}[{m - k + j}] != {expect}: the last {k} rows of a, b, c "
                                 f"must be the input rows (a = inputs, b = c = 0); rows "
                                 f"missing or added at the end?")

    # ---- npz
    def save_npz(self, path, form: str = "montgomery") -> None:
        """Write the assignment to ``path`` (npz, uncompressed; layout in the module docstring).

        ``form`` chooses how Fr arrays are stored ("montgomery" or "canonical"); it is recorded
        in the file.  The file is written to a temporary name and renamed into place.
        """
        if form not in _FORMS:
            raise ValueError(f"form must be one of {_FORMS}, got {form!r}")
        conv = (lambda x: x) if form == "montgomery" else fr_from_mont
        arrays = {
            "form": np.array(form),
            "a": conv(self.a), "b": conv(self.b), "c": conv(self.c),
            "inputs": conv(self.inputs), "aux": conv(self.aux),
            "a_aux": self.a_aux_density.words, "a_aux_bits": np.array(self.a_aux_density.n_bits),
            "b_input": self.b_input_density.words,
            "b_input_bits": np.array(self.b_input_density.n_bits),
            "b_aux": self.b_aux_density.words, "b_aux_bits": np.array(self.b_aux_density.n_bits),
        }
        from ._io import atomic_write
        atomic_write(path, lambda f: np.savez(f, **arrays))

    @classmethod
    def load_npz(cls, path, form: str | None = None) -> "Assignment":
        """Read an assignment written by :meth:`save_npz` (or by a Filecoin prover).

        ``form`` (optional) asserts the form the file must be in; by default the file's own
        ``form`` entry decides.  Canonical arrays are converted to Montgomery and checked to be
        < r.  Raises FormatError for a file that is not such an npz (missing keys, wrong
        shapes or dtypes, unknown form, values ≥ r).
        """
        path = os.fspath(path)
        if form is not None and form not in _FORMS:
            raise ValueError(f"form must be one of {_FORMS}, got {form!r}")
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path}: no such file")
        required = ["a", "b", "c", "inputs", "aux", "a_aux", "b_input", "b_aux"]
        zf, raw, archive_size = _npz_open(path)
        try:
            names = {}
            for n in zf.namelist():
                names.setdefault(n[:-4] if n.endswith(".npy") else n, n)
            missing = [k for k in ["form"] + required if k not in names]
            if missing:
                raise FormatError(path, None, f"npz keys {missing}")

            def member(k):
                return _read_npy_member(zf, raw, archive_size, path, k, names[k])

            # A corrupt archive can raise many types from zipfile/zlib mid-read (BadZipFile,
            # zlib.error, EOFError, ...): at this boundary each one means "not a valid file".
            try:
                f = member("form")
                if f.dtype.kind != "U" or f.shape != ():
                    raise FormatError(path, None, f"'form' as a 0-d unicode array, got "
                                                  f"{f.dtype} {f.shape}")
                file_form = str(f[()])
                arrays = {k: member(k) for k in required}
                bits = {}
                for k in ("a_aux", "b_input", "b_aux"):
                    if k + "_bits" not in names:
                        bits[k] = None
                        continue
                    v = member(k + "_bits")
                    if v.dtype.kind not in "iu" or v.shape != ():
                        raise FormatError(path, None, f"'{k}_bits' as a 0-d integer, got "
                                                      f"{v.dtype} {v.shape}")
                    bits[k] = int(v[()])
            except FormatError:
                raise
            except Exception as e:  # noqa: BLE001  (see above)
                raise FormatError(path, None, f"readable npz members ({type(e).__name__}: "
                                              f"{str(e)[:100]})") from None
        finally:
            zf.close()
            raw.close()
        if file_form not in _FORMS:
            raise FormatError(path, None, f"form 'montgomery' or 'canonical', got {file_form!r}")
        if form is not None and form != file_form:
            raise FormatError(path, None, f"form {form!r}, the file holds {file_form!r}")
        for k in ("a", "b", "c", "inputs", "aux"):
            v = arrays[k]
            if v.dtype.kind != "u" or v.dtype.itemsize != 8 or v.ndim != 2 or v.shape[1] != 4:
                raise FormatError(path, None, f"{k!r} as uint64 (n, 4), got {v.dtype} {v.shape}")
            i = _first_unreduced(np.ascontiguousarray(v, dtype=np.uint64))
            if i >= 0:
                raise FormatError(path, None, f"{k}[{i}] < r")
            if file_form == "canonical":
                arrays[k] = fr_to_mont(v)
        for k in ("a_aux", "b_input", "b_aux"):
            v = arrays[k]
            if v.dtype.kind != "u" or v.dtype.itemsize != 8 or v.ndim != 1:
                raise FormatError(path, None, f"{k!r} as uint64 words, got {v.dtype} {v.shape}")
        n_in, n_aux = arrays["inputs"].shape[0], arrays["aux"].shape[0]
        want = {"a_aux": n_aux, "b_input": n_in, "b_aux": n_aux}
        dens = {}
        for k, n in want.items():
            nb = bits[k] if bits[k] is not None else n
            if nb != n:
                raise FormatError(path, None, f"{k}_bits = {n}, got {nb}")
            if arrays[k].shape[0] != (n + 63) // 64:
                raise FormatError(path, None,
                                  f"{k!r} with {(n + 63) // 64} words, got {arrays[k].shape[0]}")
            dens[k] = Density(arrays[k], n)
        try:
            return cls(arrays["a"], arrays["b"], arrays["c"], arrays["inputs"], arrays["aux"],
                       dens["a_aux"], dens["b_input"], dens["b_aux"])
        except ValueError as e:
            raise FormatError(path, None, str(e)) from None
