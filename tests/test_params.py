"""bellperson .params / .vk / proof formats: byte layout against an independent encoder
(py_arkworks), round trips, typed errors with offsets, and fuzzing."""
import os
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from py_arkworks_bls12381 import G1Point, G2Point, Scalar

from cuzk._circuit import porep_like
from cuzk._errors import FormatError
from cuzk._keygen import keygen_random
from cuzk._params import (ProvingKey, VerifyingKey, decode_proof, decode_proofs, encode_proof,
                          read_params, read_vk, write_params, write_vk)
from cuzk._verifier import Q_MOD, from_arkworks_g1, from_arkworks_g2

VK_BYTES = 3 * 96 + 3 * 192


# ----------------------------------------------------------------------------- helpers

def zc_g1(P):
    """Independent zcash uncompressed G1 encoding via arkworks (x‖y big-endian)."""
    if P == G1Point.identity():
        return bytes([0x40]) + bytes(95)
    return P.to_xy_bytes_be()


def zc_g2(P):
    """zcash uncompressed G2: x.c1‖x.c0‖y.c1‖y.c0 (arkworks gives c0‖c1 order)."""
    if P == G2Point.identity():
        return bytes([0x40]) + bytes(191)
    b = P.to_xy_bytes_be()
    return b[48:96] + b[0:48] + b[144:192] + b[96:144]


@pytest.fixture(scope="module")
def pk():
    cs, _, _ = porep_like(5, 3)
    return keygen_random(cs, seed=1)


@pytest.fixture(scope="module")
def params_bytes(pk, tmp_path_factory):
    p = tmp_path_factory.mktemp("params") / "c.params"
    write_params(p, pk)
    return p.read_bytes()


def section_offsets(pk):
    """Offsets of each u32 count: vk-IC, H, L, A, B_G1, B_G2, end."""
    offs = {"ic": VK_BYTES}
    o = VK_BYTES + 4 + 96 * pk.vk.ic.shape[0]
    for name, size in (("h", 96), ("l", 96), ("a", 96), ("b_g1", 96), ("b_g2", 192)):
        offs[name] = o
        o += 4 + size * getattr(pk, name).shape[0]
    offs["end"] = o
    return offs


def write(tmp_path, data, name="x.params"):
    p = tmp_path / name
    p.write_bytes(bytes(data))
    return p


# ----------------------------------------------------------------------------- layout

def test_vk_layout_independent(tmp_path):
    ks = [11, 22, 33, 44, 55, 66]
    g1, g2 = G1Point(), G2Point()
    pts = [g1 * Scalar(ks[0]), g1 * Scalar(ks[1]), g2 * Scalar(ks[2]), g2 * Scalar(ks[3]),
           g1 * Scalar(ks[4]), g2 * Scalar(ks[5])]
    ic = [g1 * Scalar(1000 + i) for i in range(3)]
    vk = VerifyingKey(from_arkworks_g1(pts[0]), from_arkworks_g1(pts[1]),
                      from_arkworks_g2(pts[2]), from_arkworks_g2(pts[3]),
                      from_arkworks_g1(pts[4]), from_arkworks_g2(pts[5]),
                      np.stack([from_arkworks_g1(p) for p in ic]))
    p = tmp_path / "k.vk"
    write_vk(p, vk)
    want = (zc_g1(pts[0]) + zc_g1(pts[1]) + zc_g2(pts[2]) + zc_g2(pts[3]) + zc_g1(pts[4])
            + zc_g2(pts[5]) + struct.pack(">I", 3) + b"".join(zc_g1(q) for q in ic))
    assert p.read_bytes() == want
    assert read_vk(p) == vk


def test_params_layout_independent(pk, params_bytes):
    """Every section's bytes are the arkworks encodings of the in-memory points."""
    from cuzk._verifier import to_arkworks_g1, to_arkworks_g2
    offs = section_offsets(pk)
    assert len(params_bytes) == offs["end"]
    for name, group in (("h", "g1"), ("l", "g1"), ("a", "g1"), ("b_g1", "g1"), ("b_g2", "g2")):
        arr = getattr(pk, name)
        o = offs[name]
        assert struct.unpack_from(">I", params_bytes, o)[0] == arr.shape[0]
        o += 4
        size = 96 if group == "g1" else 192
        for i in (0, arr.shape[0] // 2, arr.shape[0] - 1):
            P = (to_arkworks_g1 if group == "g1" else to_arkworks_g2)(arr[i])
            enc = zc_g1(P) if group == "g1" else zc_g2(P)
            assert params_bytes[o + i * size:o + (i + 1) * size] == enc, (name, i)


def test_params_roundtrip_byte_identical(pk, params_bytes, tmp_path):
    p = write(tmp_path, params_bytes)
    back = read_params(p, threads=2)
    assert back == pk
    assert back.path == os.fspath(p)
    for name in ("h", "l", "a", "b_g1", "b_g2"):
        assert np.array_equal(getattr(back, name), getattr(pk, name))
    q = tmp_path / "again.params"
    write_params(q, back)
    assert q.read_bytes() == params_bytes
    assert read_params(p, checked=True) == pk
    v = tmp_path / "c.vk"
    write_vk(v, pk.vk)
    assert v.read_bytes() == params_bytes[:section_offsets(pk)["h"]]
    assert read_vk(v) == pk.vk


def test_empty_sections_roundtrip(tmp_path, pk):
    z1, z2 = np.zeros((0, 12), np.uint64), np.zeros((0, 24), np.uint64)
    small = ProvingKey(pk.vk, h=pk.h[:1], l=z1, a=z1, b_g1=z1, b_g2=z2)
    p = tmp_path / "s.params"
    write_params(p, small)
    assert read_params(p) == small


# ----------------------------------------------------------------------------- typed errors

def expect(tmp_path, data, offset, match=None, **kw):
    p = write(tmp_path, data)
    with pytest.raises(FormatError) as ei:
        read_params(p, **kw)
    assert ei.value.offset == offset, str(ei.value)
    assert ei.value.path == os.fspath(p)
    if match:
        assert match in ei.value.expected, ei.value.expected
    return ei.value


def test_empty_and_truncated(tmp_path, pk, params_bytes):
    expect(tmp_path, b"", 0, "empty")
    offs = section_offsets(pk)
    # truncated inside the vk block, at each count, and inside each section
    for cut in (10, 95, 96 + 50, offs["ic"] + 2, offs["h"], offs["h"] + 3, offs["h"] + 100,
                offs["b_g2"] + 4 + 191, offs["end"] - 1):
        e = expect(tmp_path, params_bytes[:cut], _trunc_offset(cut, offs))
        assert "remain" in e.expected


def _trunc_offset(cut, offs):
    """The offset a truncated file is reported at: the start of the item that does not fit."""
    if cut < VK_BYTES:
        starts = [0, 96, 192, 384, 576, 672]
        return max(s for s in starts if s <= cut)
    keys = ["ic", "h", "l", "a", "b_g1", "b_g2", "end"]
    for k0, k1 in zip(keys, keys[1:]):
        if offs[k0] <= cut < offs[k1]:
            return offs[k0] if cut < offs[k0] + 4 else offs[k0] + 4
    raise AssertionError


def test_bad_counts(tmp_path, pk, params_bytes):
    offs = section_offsets(pk)
    for name in ("ic", "h", "b_g1"):
        d = bytearray(params_bytes)
        d[offs[name]:offs[name] + 4] = struct.pack(">I", 0xFFFFFFFF)
        e = expect(tmp_path, d, offs[name] + 4, "4294967295")
        assert "remain" in e.expected
    # a count one too small leaves a point's bytes to be read as the next count/section
    d = bytearray(params_bytes)
    d[offs["l"]:offs["l"] + 4] = struct.pack(">I", pk.l.shape[0] - 1)
    expect(tmp_path, d, offs["a"] - 96 + 4, "remain")
    expect(tmp_path, params_bytes + b"\0", offs["end"], "end of file")


@pytest.mark.parametrize("count", [0, 1, 2**31, 2**32 - 1, "one less", "one more"])
def test_b_g2_count_differs_from_b_g1(tmp_path, pk, params_bytes, count):
    # regression: ProvingKey's plain ValueError ("b_g1 has 1 points, b_g2 0") named no file
    nb = pk.b_g1.shape[0]
    count = {"one less": nb - 1, "one more": nb + 1}.get(count, count)
    offs = section_offsets(pk)
    d = bytearray(params_bytes)
    d[offs["b_g2"]:offs["b_g2"] + 4] = struct.pack(">I", count)
    e = expect(tmp_path, d, offs["b_g2"], f"equal to the B_G1 count ({nb}), found {count}")
    assert "B_G2" in str(e)


def test_bad_points(tmp_path, pk, params_bytes):
    offs = section_offsets(pk)
    at = offs["l"] + 4 + 96 * 2  # L[2]
    # compressed flag on an uncompressed point
    d = bytearray(params_bytes)
    d[at] |= 0x80
    expect(tmp_path, d, at, "L[2]")
    # y-sign flag
    d = bytearray(params_bytes)
    d[at] |= 0x20
    expect(tmp_path, d, at, "flag")
    # infinity (valid encoding) where bellperson forbids it
    d = bytearray(params_bytes)
    d[at:at + 96] = bytes([0x40]) + bytes(95)
    expect(tmp_path, d, at, "infinity")
    # infinity flag with junk
    d[at + 50] = 1
    expect(tmp_path, d, at, "infinity")
    # non-canonical x (>= p)
    d = bytearray(params_bytes)
    d[at:at + 48] = (Q_MOD + 5).to_bytes(48, "big")
    expect(tmp_path, d, at, "canonical")
    # off-curve: change y
    d = bytearray(params_bytes)
    d[at + 95] ^= 1
    expect(tmp_path, d, at, "curve")
    # G2 section: x.c0 off by one
    at2 = offs["b_g2"] + 4 + 192
    d = bytearray(params_bytes)
    d[at2 + 95] ^= 1
    expect(tmp_path, d, at2, "B_G2[1]")
    # all-zero bytes are (0, 0), not infinity: rejected
    d = bytearray(params_bytes)
    d[at:at + 96] = bytes(96)
    expect(tmp_path, d, at, "curve")
    # the first bad item in file order wins
    d = bytearray(params_bytes)
    d[at + 95] ^= 1
    d[at + 96:at + 192] = bytes([0x40]) + bytes(95)
    expect(tmp_path, d, at)


def test_vk_errors(tmp_path, pk, params_bytes):
    vkb = params_bytes[:section_offsets(pk)["h"]]
    p = write(tmp_path, vkb[:-1], "t.vk")
    with pytest.raises(FormatError) as ei:
        read_vk(p)
    assert "remain" in ei.value.expected
    p = write(tmp_path, vkb + b"\0", "t.vk")
    with pytest.raises(FormatError, match="end of file"):
        read_vk(p)
    # IC point at infinity
    d = bytearray(vkb)
    d[VK_BYTES + 4:VK_BYTES + 100] = bytes([0x40]) + bytes(95)
    p = write(tmp_path, d, "t.vk")
    with pytest.raises(FormatError, match="IC\\[0\\]") as ei:
        read_vk(p)
    assert ei.value.offset == VK_BYTES + 4
    # alpha at infinity is accepted, as bellperson does
    d = bytearray(vkb)
    d[0:96] = bytes([0x40]) + bytes(95)
    vk = read_vk(write(tmp_path, d, "t.vk"))
    assert not vk.alpha_g1.any()


def test_key_objects_check_their_arrays(pk):
    """VerifyingKey and ProvingKey built by hand: a point of the wrong limb count, a query of
    the wrong shape, B's G1 and G2 queries of different lengths and a vk that is not a
    VerifyingKey raise at construction; equal copies compare equal, other types never."""
    vk = pk.vk
    fields = {f: getattr(vk, f) for f in ("alpha_g1", "beta_g1", "beta_g2", "gamma_g2",
                                          "delta_g1", "delta_g2", "ic")}
    assert VerifyingKey(**{f: a.copy() for f, a in fields.items()}) == vk
    with pytest.raises(ValueError, match="beta_g2 must be 24 uint64 limbs"):
        VerifyingKey(**{**fields, "beta_g2": vk.beta_g1})
    with pytest.raises(ValueError, match=r"ic must have shape \(n, 12\)"):
        VerifyingKey(**{**fields, "ic": vk.ic.reshape(-1)})
    assert (vk == 3) is False and (vk != "vk") is True
    queries = {q: getattr(pk, q) for q in ("h", "l", "a", "b_g1", "b_g2")}
    assert ProvingKey(vk, **{q: a.copy() for q, a in queries.items()}) == pk
    with pytest.raises(TypeError, match="vk must be a VerifyingKey"):
        ProvingKey(fields, **queries)
    with pytest.raises(ValueError, match=r"b_g2 must have shape \(n, 24\)"):
        ProvingKey(vk, **{**queries, "b_g2": pk.b_g1})
    with pytest.raises(ValueError, match=f"b_g1 has {pk.b_g1.shape[0]} points, b_g2 "
                                         f"{pk.b_g2.shape[0] - 1}"):
        ProvingKey(vk, **{**queries, "b_g2": pk.b_g2[1:]})
    assert (pk == vk) is False


def non_subgroup_g1():
    """A point on y^2 = x^3 + 4 outside the order-r subgroup (found by trying x = 1, 2, ...)."""
    for x in range(1, 100):
        rhs = (x**3 + 4) % Q_MOD
        y = pow(rhs, (Q_MOD + 1) // 4, Q_MOD)
        if y * y % Q_MOD == rhs:
            data = x.to_bytes(48, "big") + y.to_bytes(48, "big")
            P = G1Point.from_xy_bytes_unchecked_be(data)
            if not P.is_in_subgroup():
                return data
    raise AssertionError("no point found")


def test_checked_rejects_non_subgroup(tmp_path, pk, params_bytes):
    bad = non_subgroup_g1()
    offs = section_offsets(pk)
    at = offs["a"] + 4 + 96
    d = bytearray(params_bytes)
    d[at:at + 96] = bad
    p = write(tmp_path, d)
    loaded = read_params(p)              # on the curve: accepted unchecked (as blstrs)
    assert loaded.a.shape == pk.a.shape
    with pytest.raises(FormatError, match="subgroup") as ei:
        read_params(p, checked=True)
    assert ei.value.offset == at
    # the vk block is always checked
    d = bytearray(params_bytes)
    d[VK_BYTES + 4:VK_BYTES + 100] = bad
    with pytest.raises(FormatError, match="subgroup"):
        read_params(write(tmp_path, d))


# ----------------------------------------------------------------------------- proofs

def test_proof_roundtrip_independent():
    A, B, C = G1Point() * Scalar(5), G2Point() * Scalar(6), G1Point() * Scalar(7)
    b = encode_proof(from_arkworks_g1(A), from_arkworks_g2(B), from_arkworks_g1(C))
    assert b == A.to_compressed_bytes() + B.to_compressed_bytes() + C.to_compressed_bytes()
    a2, b2, c2 = decode_proof(b)
    assert np.array_equal(a2, from_arkworks_g1(A)) and np.array_equal(b2, from_arkworks_g2(B))
    assert np.array_equal(c2, from_arkworks_g1(C))
    two = decode_proofs(b + b)
    assert len(two) == 2 and np.array_equal(two[1][1], b2)


def test_proof_errors():
    A, B, C = G1Point() * Scalar(5), G2Point() * Scalar(6), G1Point() * Scalar(7)
    good = A.to_compressed_bytes() + B.to_compressed_bytes() + C.to_compressed_bytes()
    with pytest.raises(FormatError, match="192"):
        decode_proof(good[:-1])
    with pytest.raises(FormatError):
        decode_proofs(good + b"\0")
    inf = G1Point.identity().to_compressed_bytes()
    with pytest.raises(FormatError, match="infinity") as ei:
        decode_proof(good[:144] + inf)
    assert ei.value.offset == 144
    d = bytearray(good)
    d[0] &= 0x7F  # uncompressed flag in a compressed slot
    with pytest.raises(FormatError, match="proof A"):
        decode_proof(bytes(d))


# ----------------------------------------------------------------------------- fuzzing

FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])


@FUZZ
@given(data=st.data())
def test_fuzz_params_mutations(tmp_path, params_bytes, data):
    d = bytearray(params_bytes)
    kind = data.draw(st.sampled_from(["flip", "truncate", "insert", "set"]))
    if kind == "flip":
        for _ in range(data.draw(st.integers(1, 4))):
            i = data.draw(st.integers(0, len(d) - 1))
            d[i] ^= data.draw(st.integers(1, 255))
    elif kind == "truncate":
        d = d[:data.draw(st.integers(0, len(d)))]
    elif kind == "insert":
        i = data.draw(st.integers(0, len(d)))
        d[i:i] = data.draw(st.binary(min_size=1, max_size=8))
    else:
        i = data.draw(st.integers(0, len(d) - 4))
        d[i:i + 4] = data.draw(st.binary(min_size=4, max_size=4))
    p = write(tmp_path, d, "fuzz.params")
    try:
        read_params(p, checked=data.draw(st.booleans()), threads=2)
    except FormatError as e:
        assert e.path == os.fspath(p)
        assert e.offset is None or 0 <= e.offset <= len(d)


@FUZZ
@given(blob=st.binary(max_size=2000))
def test_fuzz_random_bytes(tmp_path, blob):
    p = write(tmp_path, blob, "r.params")
    with pytest.raises(FormatError):
        read_params(p)
    p = write(tmp_path, blob, "r.vk")
    with pytest.raises(FormatError):
        read_vk(p)


@FUZZ
@given(blob=st.binary(min_size=0, max_size=400))
def test_fuzz_proof_bytes(blob):
    try:
        decode_proofs(blob)
    except FormatError:
        pass
