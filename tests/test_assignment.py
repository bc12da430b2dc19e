"""Assignment hygiene (issue 12): the npz reader under hostile members, the a∘b = c row check,
validate's length and input-row checks, repr and coerce.

References are independent of the code under test: Python big ints for the Fr products, the
CPU prover plus the arkworks verifier for what a change the checks cannot see does to a proof.
"""
from __future__ import annotations

import io
import pickle
import struct
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cuzk import FormatError, keygen_random, porep_like, prove, verify
from cuzk._assignment import R_MOD, Assignment, fr_ints_to_mont, fr_mont_to_ints
from cuzk._errors import UnsatisfiedAssignmentError
from cuzk._prover import public_inputs


@pytest.fixture(scope="module")
def circuit():
    cs, inputs, aux = porep_like(5, 3)
    return cs, inputs, aux, keygen_random(cs, seed=1)


@pytest.fixture
def asg(circuit):
    cs, inputs, aux, _ = circuit
    return cs.assignment(inputs.copy(), aux.copy())   # (Assignment shares the witness arrays)


@pytest.fixture(scope="module")
def npz_bytes(circuit, tmp_path_factory):
    cs, inputs, aux, _ = circuit
    p = tmp_path_factory.mktemp("npz") / "a.npz"
    cs.assignment(inputs, aux).save_npz(p)
    return p.read_bytes()


def _npz_with(npz_bytes, member, data, compress=zipfile.ZIP_STORED):
    """The archive with ``member`` (a key: "aux", "form", ...) replaced by raw ``data``."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(npz_bytes)) as z, zipfile.ZipFile(out, "w") as o:
        for n in z.namelist():
            if n == member + ".npy":
                o.writestr(n, data, compress_type=compress)
            else:
                o.writestr(n, z.read(n))
    return out.getvalue()


def _npy(header: str, version=(1, 0), body=b""):
    h = header.encode("latin1")
    n_len = 2 if version == (1, 0) else 4
    pad = (-(6 + 2 + n_len + len(h) + 1)) % 64
    h += b" " * pad + b"\n"
    size = struct.pack("<H" if n_len == 2 else "<I", len(h))
    return b"\x93NUMPY" + bytes(version) + size + h + body


def _load_error(tmp_path, data, match=None):
    p = tmp_path / "x.npz"
    p.write_bytes(data)
    with pytest.raises(FormatError) as e:
        Assignment.load_npz(p)
    err = e.value
    assert err.path == str(p)
    assert err.offset is None or 0 <= err.offset <= len(data)
    assert "\n" not in str(err) and "allow_pickle" not in str(err), str(err)
    if match:
        assert match in str(err), str(err)
    return err


# ----------------------------------------------------------------------------- npz reader

def test_plain_npy_is_a_format_error(tmp_path):
    # regression: np.load returned an ndarray and `with npz:` raised TypeError
    buf = io.BytesIO()
    np.save(buf, np.zeros((3, 4), np.uint64))
    _load_error(tmp_path, buf.getvalue(), "plain .npy")


@pytest.mark.parametrize("member", ["form", "a", "b", "c", "inputs", "aux", "a_aux", "b_input",
                                    "b_aux", "a_aux_bits", "b_input_bits", "b_aux_bits"])
@pytest.mark.parametrize("data", [b"", b"hello", b"\x93NUMPY", b"PK\x03\x04" + bytes(40)],
                         ids=["empty", "text", "magic-only", "zip-header"])
def test_member_that_is_not_npy_data(tmp_path, npz_bytes, member, data):
    # regression: NumPy returned bytes for such a member and `.dtype` raised AttributeError
    _load_error(tmp_path, _npz_with(npz_bytes, member, data), repr(member))


def test_npy_header_over_the_limit_is_one_line(tmp_path, npz_bytes):
    big = "{'descr': '<u8', 'fortran_order': False, 'shape': (3, 4), }" + " " * 20000
    err = _load_error(tmp_path, _npz_with(npz_bytes, "aux", _npy(big, (2, 0))), "at most 10000")
    assert "'aux'" in str(err)


@pytest.mark.parametrize("shape", ["(8000000000, 4)", f"({2**40}, 4)", "(" + "9" * 4000 + ", 4)",
                                   "(1, 4)"], ids=["256GB", "2^45B", "4000-digits", "too-small"])
@pytest.mark.parametrize("compress", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_npy_shape_checked_against_the_data_before_allocating(tmp_path, npz_bytes, shape,
                                                             compress):
    # regression: a header asking for 64-256 GiB made NumPy try the allocation first
    hdr = "{'descr': '<u8', 'fortran_order': False, 'shape': %s, }" % shape
    data = _npz_with(npz_bytes, "aux", _npy(hdr, body=bytes(64)), compress)
    _load_error(tmp_path, data, "'aux'")


def test_zip_entry_claiming_more_than_the_archive_can_hold(tmp_path, npz_bytes):
    # a stored member whose zip entries (local header and central directory) claim 4 GiB and
    # whose npy header agrees: only the archive's real size shows the lie
    claimed = 2**32 - 1
    hdr = "{'descr': '<u1', 'fortran_order': False, 'shape': (%d,), }" % (claimed - 128)
    member = _npy(hdr, body=bytes(32))
    assert len(member) == 128 + 32
    data = bytearray(_npz_with(npz_bytes, "aux", member))
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as z:
        local = z.getinfo("aux.npy").header_offset
    central = data.find(b"PK\x01\x02\x14\x03")      # first central entry ...
    while data[central + 46:central + 53] != b"aux.npy":
        central = data.find(b"PK\x01\x02", central + 4)
    struct.pack_into("<II", data, central + 20, claimed, claimed)   # compressed, uncompressed
    struct.pack_into("<II", data, local + 18, claimed, claimed)
    _load_error(tmp_path, bytes(data), "'aux'")


@pytest.mark.parametrize("descr, what", [("|O", "a"), ("[('x', '<u8')]", "a"), ("<f8", "a"),
                                         ("<u4", "a"), ("<u8", "form"), ("<f8", "a_aux_bits")])
def test_wrong_member_dtypes(tmp_path, npz_bytes, descr, what):
    shape = "()" if what != "a" else "(31, 4)"
    itemsize = {"|O": 8, "<f8": 8, "<u4": 4}.get(descr, 8)
    n = 1 if shape == "()" else 31 * 4
    hdr = "{'descr': %s, 'fortran_order': False, 'shape': %s, }" % (
        descr if descr.startswith("[") else repr(descr), shape)
    _load_error(tmp_path, _npz_with(npz_bytes, what, _npy(hdr, body=bytes(n * itemsize))),
                repr(what))


def test_fortran_order_and_deflate_still_load(tmp_path, asg):
    p = tmp_path / "f.npz"
    d = {"form": np.array("montgomery"), "a": np.asfortranarray(asg.a), "b": asg.b, "c": asg.c,
         "inputs": asg.inputs, "aux": asg.aux, "a_aux": asg.a_aux_density.words,
         "b_input": asg.b_input_density.words, "b_aux": asg.b_aux_density.words}
    np.savez_compressed(p, **d)
    back = Assignment.load_npz(p)
    for k in ("a", "b", "c", "inputs", "aux"):
        assert np.array_equal(getattr(back, k), getattr(asg, k))


def test_not_a_zip_and_truncated_zip(tmp_path, npz_bytes):
    _load_error(tmp_path, b"hello world", "npz archive")
    for cut in (10, len(npz_bytes) // 2, len(npz_bytes) - 10):
        _load_error(tmp_path, npz_bytes[:cut])


# ----------------------------------------------------------------------------- a∘b = c

def test_check_satisfied_accepts_a_satisfying_assignment(asg):
    a, b, c = (fr_mont_to_ints(x) for x in (asg.a, asg.b, asg.c))
    assert all(x * y % R_MOD == z for x, y, z in zip(a, b, c))   # the reference
    asg.check_satisfied()
    asg.check_satisfied(threads=1)


@pytest.mark.parametrize("rows", [[0], [5], [-1], [3, 7], [7, 3]])
def test_check_satisfied_names_the_first_bad_row(asg, rows):
    m = asg.n_constraints
    for r in rows:
        c = fr_mont_to_ints(asg.c[r:r + 1] if r >= 0 else asg.c[r:])[0]
        asg.c[r] = fr_ints_to_mont([(c + 1) % R_MOD])[0]
    first = min(r % m for r in rows)
    with pytest.raises(UnsatisfiedAssignmentError) as e:
        asg.check_satisfied(threads=2)
    assert e.value.row == first
    assert str(e.value) == (f"a[{first}]·b[{first}] != c[{first}] at row {first}: "
                            "the assignment does not satisfy the circuit")
    assert isinstance(e.value, ValueError)
    again = pickle.loads(pickle.dumps(e.value))
    assert again.row == first and str(again) == str(e.value)


def test_check_satisfied_large_and_threaded():
    # many chunks: the first bad row wins whichever thread finds it first
    rng = np.random.default_rng(5)
    n = 70_000
    a = fr_ints_to_mont([int(x) for x in rng.integers(1, 2**62, n)])
    b = fr_ints_to_mont([int(x) for x in rng.integers(1, 2**62, n)])
    from cuzk._native import _field
    c = _field.mul(a, b)
    asg = Assignment(a, b, c, fr_ints_to_mont([1]), np.zeros((0, 4), np.uint64),
                     *_empty_densities())
    asg.check_satisfied(threads=4)
    for bad in (n - 1, 40_000, 17):
        asg.c[bad, 0] ^= 1
        with pytest.raises(UnsatisfiedAssignmentError) as e:
            asg.check_satisfied(threads=4)
        assert e.value.row == bad


def _empty_densities():
    from cuzk._assignment import Density
    return (Density.from_bools(np.zeros(0, bool)), Density.from_bools(np.ones(1, bool)),
            Density.from_bools(np.zeros(0, bool)))


# ----------------------------------------------------------------------------- validate

@pytest.mark.parametrize("drop", [1, 2, 3, 5])
def test_validate_refuses_shortened_abc(circuit, asg, drop):
    # regression: dropping a few rows keeps the domain, so the H count still matched
    pk = circuit[3]
    asg.validate(pk)
    short = Assignment(asg.a[:-drop], asg.b[:-drop], asg.c[:-drop], asg.inputs, asg.aux,
                       asg.a_aux_density, asg.b_input_density, asg.b_aux_density)
    assert short.domain_size == asg.domain_size
    short.check_satisfied()              # a∘b = c still holds on the rows left
    with pytest.raises(ValueError, match="input rows"):
        short.validate(pk)


def test_validate_refuses_lengths_changed_after_construction(circuit, asg):
    asg.c = asg.c[:-1]
    with pytest.raises(ValueError, match="equal lengths"):
        asg.validate(circuit[3])


def test_validate_refuses_fewer_rows_than_inputs(asg):
    class K:
        pass
    t = Assignment(asg.a[:1], asg.b[:1], asg.c[:1], asg.inputs, asg.aux, asg.a_aux_density,
                   asg.b_input_density, asg.b_aux_density)
    with pytest.raises(ValueError, match="fewer than"):
        t.validate(K())


# ----------------------------------------------------------------------------- property

ROW_CHANGE = settings(max_examples=60, deadline=None,
                      suppress_health_check=[HealthCheck.function_scoped_fixture])


@ROW_CHANGE
@given(data=st.data())
def test_single_row_change_is_refused_or_fails_verification(circuit, data):
    """A random single-row change of a, b, c or aux: check_satisfied or validate refuses it, or
    (the change keeps a∘b = c and the input rows: a wrong aux, or a row of a whose b is 0) the
    proof does not verify, which is what verification is for."""
    cs, inputs, aux, pk = circuit
    asg = cs.assignment(inputs.copy(), aux.copy())
    name = data.draw(st.sampled_from(["a", "b", "c", "aux"]), label="array")
    arr = getattr(asg, name)
    row = data.draw(st.integers(0, arr.shape[0] - 1), label="row")
    old = fr_mont_to_ints(arr[row:row + 1])[0]
    new = data.draw(st.integers(0, R_MOD - 1).filter(lambda v: v != old), label="value")
    arr[row] = fr_ints_to_mont([new])[0]
    try:
        asg.check_satisfied()
        asg.validate(pk)
    except UnsatisfiedAssignmentError as e:
        assert name in "abc" and e.row == row
        return
    except ValueError as e:
        assert "input rows" in str(e)
        return
    # not refused: the change must keep every row's product (checked with big ints) ...
    a, b, c = (fr_mont_to_ints(x) for x in (asg.a, asg.b, asg.c))
    assert all(x * y % R_MOD == z for x, y, z in zip(a, b, c))
    # ... and the proof of it must not verify
    proof = prove(pk, asg, 3, 5, backend="cpu", threads=1, verify=False)
    assert not verify(pk.vk, proof, public_inputs(asg))


# ----------------------------------------------------------------------------- repr, coerce

def test_repr_shows_counts_not_arrays():
    cs, inputs, aux = porep_like(12, 1)
    big = cs.assignment(inputs, aux)
    r = repr(big)
    assert len(r) < 200, r
    assert f"constraints={big.n_constraints}" in r and f"aux={big.n_aux}" in r
    assert "array" not in r and "[" not in r


def test_coerce(tmp_path, asg):
    assert Assignment.coerce(asg) is asg
    p = tmp_path / "a.npz"
    asg.save_npz(p)
    for arg in (p, str(p)):
        back = Assignment.coerce(arg)
        assert np.array_equal(back.aux, asg.aux)
    for bad in (None, b"a.npz", {"a": 1}, asg.a, 3):
        with pytest.raises(TypeError, match=type(bad).__qualname__):
            Assignment.coerce(bad)
    with pytest.raises(FormatError):
        p.write_bytes(b"junk")
        Assignment.coerce(p)


def test_constructors_name_what_is_off(tmp_path, asg):
    """Density and Assignment built by hand: a negative bit count, a word count that does not
    match it, a, b, c of different lengths, an Fr array not (n, 4), no inputs, density bit counts
    that do not match the variables, and an unknown npz form raise ValueError naming the item;
    a missing file is FileNotFoundError."""
    from cuzk._assignment import Density
    with pytest.raises(ValueError, match="n_bits must be >= 0"):
        Density(np.zeros(0, np.uint64), -1)
    with pytest.raises(ValueError, match="density of 65 bits needs 2 words, got 1"):
        Density(np.zeros(1, np.uint64), 65)
    d = Density.from_bools([True, False, True])
    assert d == Density(np.array([5], np.uint64), 3) and d != Density(np.array([5], np.uint64), 4)
    assert (d == "101") is False and repr(d) == "Density(n_bits=3, popcount=2)"
    parts = dict(a=asg.a, b=asg.b, c=asg.c, inputs=asg.inputs, aux=asg.aux,
                 a_aux_density=asg.a_aux_density, b_input_density=asg.b_input_density,
                 b_aux_density=asg.b_aux_density)
    with pytest.raises(ValueError, match="a, b, c must have equal lengths"):
        Assignment(**{**parts, "b": asg.b[:-1]})
    with pytest.raises(ValueError, match=r"aux must have shape \(n, 4\)"):
        Assignment(**{**parts, "aux": asg.aux.reshape(-1)})
    with pytest.raises(ValueError, match="at least the constant 1"):
        Assignment(**{**parts, "inputs": asg.inputs[:0], "b_input_density": Density.from_bools([])})
    short = Density.from_bools(np.ones(asg.n_aux - 1, bool))
    for name in ("a_aux", "b_aux"):
        with pytest.raises(ValueError, match=f"{name} density has {asg.n_aux - 1} bits, "
                                             f"expected n_aux = {asg.n_aux}"):
            Assignment(**{**parts, name + "_density": short})
    with pytest.raises(ValueError, match=f"b_input density has {asg.n_aux - 1} bits, "
                                         f"expected n_inputs = {asg.n_inputs}"):
        Assignment(**{**parts, "b_input_density": short})
    bad = asg.aux.copy()
    bad[2] = [0, 0, 0, 0xFFFFFFFFFFFFFFFF]             # 2^256 − 2^192 ≥ r
    with pytest.raises(ValueError, match=r"aux\[2\] is not a reduced Fr element"):
        Assignment(**{**parts, "aux": bad}).check_reduced()
    asg.check_reduced()
    with pytest.raises(ValueError, match="form must be one of"):
        asg.save_npz(tmp_path / "x.npz", form="hex")
    assert not (tmp_path / "x.npz").exists()
    with pytest.raises(ValueError, match="form must be one of"):
        Assignment.load_npz(tmp_path / "x.npz", form="hex")
    with pytest.raises(FileNotFoundError, match="no such file"):
        Assignment.load_npz(tmp_path / "x.npz")
