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
import os

import numpy as np

from ._errors import FormatError

__all__ = ["Density", "Assignment", "R_MOD", "fr_to_mont", "fr_from_mont",
           "fr_ints_to_mont", "fr_mont_to_ints"]

#: The BLS12-381 scalar field modulus r.
R_MOD = 0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001
_R = (1 << 256) % R_MOD           # Montgomery R mod r
_RINV = pow(1 << 256, -1, R_MOD)  # R^-1 mod r
_FORMS = ("montgomery", "canonical")


# ----------------------------------------------------------------------------- Fr helpers
# Small-array conversions in Python big ints (inputs, toxic waste, tests); bulk conversions of
# large arrays go through the native field module (cuzk._native._field).

def fr_ints_to_mont(values) -> np.ndarray:
    """Python ints (each 0 <= v < r) -> uint64 (n, 4) Montgomery.  ValueError names the first
    value out of range."""
    vals = [int(v) for v in values]
    out = np.empty((len(vals), 4), dtype=np.uint64)
    for i, v in enumerate(vals):
        if not 0 <= v < R_MOD:
            raise ValueError(f"value {i} is not in [0, r)")
        out[i] = np.frombuffer(((v * _R) % R_MOD).to_bytes(32, "little"), dtype="<u8")
    return out


def fr_mont_to_ints(arr) -> list:
    """uint64 (n, 4) Montgomery -> list of Python ints in [0, r)."""
    a = np.ascontiguousarray(arr, dtype="<u8").reshape(-1, 4)
    raw = a.tobytes()
    return [(int.from_bytes(raw[32 * i:32 * i + 32], "little") * _RINV) % R_MOD
            for i in range(a.shape[0])]


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


# ----------------------------------------------------------------------------- Density

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
        if self.n_bits == 0:
            return 0
        w = self.words.copy()
        tail = self.n_bits % 64
        if tail:
            w[-1] &= np.uint64((1 << tail) - 1)
        if hasattr(np, "bitwise_count"):  # NumPy >= 2.0
            return int(np.bitwise_count(w).sum())
        return int(np.unpackbits(w.astype("<u8", copy=False).view(np.uint8)).sum())

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

    # ---- checks
    def check_reduced(self) -> None:
        """ValueError naming the first array and row holding a value ≥ r."""
        for name in ("a", "b", "c", "inputs", "aux"):
            i = _first_unreduced(getattr(self, name))
            if i >= 0:
                raise ValueError(f"{name}[{i}] is not a reduced Fr element (≥ r)")

    def validate(self, pk) -> None:
        """Check the sizes against a :class:`cuzk._params.ProvingKey`.

        L = n_aux, A = n_in + popcount(a_aux), B_G1 = B_G2 = popcount(b_input) +
        popcount(b_aux), H = domain − 1, IC = n_in.  Raises ValueError naming the first count
        that is off.
        """
        checks = [
            ("IC (vk.ic)", pk.vk.ic.shape[0], self.n_inputs, "n_inputs"),
            ("L", pk.l.shape[0], self.n_aux, "n_aux"),
            ("A", pk.a.shape[0], self.n_inputs + self.a_aux_density.popcount(),
             "n_inputs + popcount(a_aux)"),
            ("B_G1", pk.b_g1.shape[0],
             self.b_input_density.popcount() + self.b_aux_density.popcount(),
             "popcount(b_input) + popcount(b_aux)"),
            ("B_G2", pk.b_g2.shape[0],
             self.b_input_density.popcount() + self.b_aux_density.popcount(),
             "popcount(b_input) + popcount(b_aux)"),
            ("H", pk.h.shape[0], self.domain_size - 1, "domain - 1"),
        ]
        for what, have, want, formula in checks:
            if have != want:
                raise ValueError(f"parameters have {have} {what} points, the assignment needs "
                                 f"{want} ({formula})")

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
        path = os.fspath(path)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, path)

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
        # NumPy's npz/npy readers raise many exception types on corrupt input (BadZipFile,
        # ValueError, SyntaxError from the header's literal_eval, EOFError, ...): at this
        # file-format boundary every one of them means "not a valid assignment file".
        try:
            npz = np.load(path, allow_pickle=False)
        except Exception as e:  # noqa: BLE001
            raise FormatError(path, None, f"an npz archive ({type(e).__name__}: {e})") from None
        with npz:
            keys = set(npz.files)
            required = ["a", "b", "c", "inputs", "aux", "a_aux", "b_input", "b_aux"]
            missing = [k for k in ["form"] + required if k not in keys]
            if missing:
                raise FormatError(path, None, f"npz keys {missing}")
            try:
                file_form = str(npz["form"][()])
                arrays = {k: npz[k] for k in required}
                bits = {k: int(npz[k + "_bits"][()]) if k + "_bits" in keys else None
                        for k in ("a_aux", "b_input", "b_aux")}
            except Exception as e:  # noqa: BLE001  (see above)
                raise FormatError(path, None,
                                  f"readable arrays ({type(e).__name__}: {e})") from None
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
