"""zcash/bellperson point encodings: byte-exact against py_arkworks_bls12381 and the big-int
reference, every invalid form rejected with the right reason, bulk decode/encode."""
import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import refs
from cuzk._native import _field as F

GROUPS = ["g1", "g2"]
CSIZE = {"g1": 48, "g2": 96}
USIZE = {"g1": 96, "g2": 192}
OK, BAD_FLAGS, BAD_INF, NONCANON, OFF_CURVE, NOT_SUBGROUP = range(6)
REASON = {"flags": BAD_FLAGS, "infinity": BAD_INF, "non-canonical": NONCANON,
          "not on curve": OFF_CURVE, "not in subgroup": NOT_SUBGROUP}


def rows(blobs):
    return np.frombuffer(b"".join(blobs), dtype=np.uint8).reshape(len(blobs), -1)


def ark_uncompressed(pt, group):
    """zcash uncompressed bytes from an arkworks point (reorder G2, flag infinity)."""
    return refs.CURVES[group].encode(refs.ark_to_point(pt, group), compressed=False)


def status_of(blob, group, subgroup=False):
    _, st_ = F.decode_points(rows([blob]), group, subgroup=subgroup, return_status=True)
    return int(st_[0])


def ref_status(blob, group, subgroup=False):
    try:
        refs.CURVES[group].decode(blob, subgroup=subgroup)
        return OK
    except ValueError as e:
        return REASON[str(e)]


@pytest.fixture(scope="module", params=GROUPS)
def sample(request):
    """(group, reference points incl. infinity, arkworks points) — 24 random points."""
    group = request.param
    rnd = random.Random(11)
    cls = refs.ark_class(group)
    ks = [rnd.randrange(1, refs.R) for _ in range(23)]
    arks = [cls() * refs.ark_scalar(k) for k in ks] + [cls.identity()]
    return group, [refs.ark_to_point(a, group) for a in arks], arks


def test_infinity_bytes():
    for g in GROUPS:
        inf = np.zeros((1, 12 if g == "g1" else 24), dtype=np.uint64)
        assert F.encode_points(inf, g, compressed=True)[0].tobytes() == b"\xc0" + bytes(CSIZE[g] - 1)
        assert F.encode_points(inf, g, compressed=False)[0].tobytes() == b"\x40" + bytes(USIZE[g] - 1)
        assert refs.ark_class(g).identity().to_compressed_bytes() == b"\xc0" + bytes(CSIZE[g] - 1)
        for blob in (b"\xc0" + bytes(CSIZE[g] - 1), b"\x40" + bytes(USIZE[g] - 1)):
            assert not F.decode_points(rows([blob]), g).any()


def test_encode_matches_arkworks(sample):
    group, pts, arks = sample
    m = np.array([refs.point_to_mont(p, group) for p in pts], dtype=np.uint64)
    comp = F.encode_points(m, group, compressed=True)
    unc = F.encode_points(m, group, compressed=False, threads=2)
    for i, a in enumerate(arks):
        assert comp[i].tobytes() == a.to_compressed_bytes()
        assert unc[i].tobytes() == ark_uncompressed(a, group)
        assert comp[i].tobytes() == refs.CURVES[group].encode(pts[i], True)


def test_decode_matches_arkworks(sample):
    group, pts, arks = sample
    expect = np.array([refs.point_to_mont(p, group) for p in pts], dtype=np.uint64)
    comp = rows([a.to_compressed_bytes() for a in arks])
    unc = rows([ark_uncompressed(a, group) for a in arks])
    for t in (1, 2, None):
        for sg in (False, True):
            assert np.array_equal(F.decode_points(comp, group, subgroup=sg, threads=t), expect)
            assert np.array_equal(F.decode_points(unc, group, subgroup=sg, threads=t), expect)
    # and arkworks reads what cuzk writes
    back = F.encode_points(expect, group, compressed=True)
    cls = refs.ark_class(group)
    assert [cls.from_compressed_bytes(r.tobytes()) for r in back] == arks


def _mutations(group, pts):
    """(blob, expected status, subgroup flag) for every invalid form we know of."""
    c = refs.CURVES[group]
    n = CSIZE[group]
    p = pts[0]
    comp, unc = c.encode(p, True), c.encode(p, False)
    out = []
    # flags
    out.append((bytes([comp[0] & 0x7F]) + comp[1:], BAD_FLAGS, False))       # compressed w/o 0x80
    out.append((bytes([unc[0] | 0x80]) + unc[1:], BAD_FLAGS, False))          # uncompressed with 0x80
    out.append((bytes([unc[0] | 0x20]) + unc[1:], BAD_FLAGS, False))          # sign in uncompressed
    out.append((b"\x40" + bytes(n - 1), BAD_FLAGS, False))                    # infinity w/o compression flag
    out.append((b"\xc0" + bytes(2 * n - 1), BAD_FLAGS, False))                # compressed flag, long form
    # infinity variants
    out.append((b"\xe0" + bytes(n - 1), BAD_INF, False))                      # infinity + sign
    out.append((b"\xc0" + bytes(n - 2) + b"\x01", BAD_INF, False))            # nonzero tail
    out.append((b"\xc1" + bytes(n - 1), BAD_INF, False))                      # nonzero bits in byte 0
    out.append((b"\x60" + bytes(2 * n - 1), BAD_INF, False))
    out.append((b"\x40" + bytes(2 * n - 2) + b"\x01", BAD_INF, False))
    out.append((b"\x40" + comp[1:] + unc[n:], BAD_INF, False))                # infinity flag on a point
    # all-zero uncompressed is (0, 0): not on the curve (not infinity)
    out.append((bytes(2 * n), OFF_CURVE, False))
    # non-canonical coordinates: add p to one 48-byte half (x small enough that it fits)
    xs = refs.non_subgroup_point(group, 3)                                   # a small x
    big = lambda v: (v + refs.P).to_bytes(48, "big")  # noqa: E731
    if group == "g1":
        out.append((bytes([big(xs[0])[0] | 0x80]) + big(xs[0])[1:], NONCANON, False))
        out.append((big(xs[0]) + xs[1].to_bytes(48, "big"), NONCANON, False))
        out.append((unc[:n] + (p[1] + refs.P).to_bytes(48, "big"), NONCANON, False))
    else:
        x0, x1 = xs[0]
        enc = c.encode(xs, True)
        out.append((bytes([big(x1)[0] | 0x80 | (enc[0] & 0x20)]) + big(x1)[1:] + x0.to_bytes(48, "big"),
                    NONCANON, False))                                         # c1 = x1 + p
        out.append((enc[:48] + refs.P.to_bytes(48, "big"), NONCANON, False))  # c0 = p
        out.append((unc[:n] + unc[n:n + 48] + refs.P.to_bytes(48, "big"), NONCANON, False))
    # not on the curve
    bad_y = bytearray(unc)
    bad_y[-1] ^= 1
    out.append((bytes(bad_y), OFF_CURVE, False))
    x = 0
    while True:                                                              # x with x^3 + b not a square
        xv = x if group == "g1" else (x, 0)
        if c.F.sqrt(c.rhs(xv)) is None:
            break
        x += 1
    blob = bytearray(c.encode((xv, c.F.one), True))                          # y irrelevant: flags only
    blob[0] &= 0x9F
    out.append((bytes(blob), OFF_CURVE, False))
    # on the curve, outside the subgroup
    ns = refs.non_subgroup_point(group, 12345)
    for comp_form in (True, False):
        out.append((c.encode(ns, comp_form), NOT_SUBGROUP, True))
        out.append((c.encode(ns, comp_form), OK, False))
    return out


@pytest.mark.parametrize("group", GROUPS)
def test_invalid_encodings(group):
    rnd = random.Random(2)
    pts = [refs.random_point(group, rnd)[0]]
    for blob, expect, sg in _mutations(group, pts):
        assert ref_status(blob, group, sg) == expect, (blob.hex(), expect)   # the test data itself
        assert status_of(blob, group, sg) == expect, (blob.hex(), expect)
        if expect != OK:
            with pytest.raises(ValueError, match=r"points\[0\]"):
                F.decode_points(rows([blob]), group, subgroup=sg)
        # arkworks' compressed reader rejects them too (it always checks the subgroup); it is
        # lenient about junk after the infinity flag, which zcash's bls12_381 and blst reject
        if len(blob) == CSIZE[group] and expect != BAD_INF:
            with pytest.raises(Exception):
                refs.ark_class(group).from_compressed_bytes(blob)


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("compressed", [True, False])
def test_bulk_first_bad_index_and_status(group, compressed):
    rnd = random.Random(4)
    c = refs.CURVES[group]
    pts = [refs.random_point(group, rnd)[0] for _ in range(300)]
    blobs = [c.encode(p, compressed) for p in pts]
    ns = c.encode(refs.non_subgroup_point(group, 77), compressed)
    bad = {37: b"\x00" * len(blobs[0]) if not compressed else b"\x40" + bytes(len(blobs[0]) - 1),
           150: ns, 299: b"\xe0" + bytes(len(blobs[0]) - 1)}
    for i, b in bad.items():
        blobs[i] = b
    arr = rows(blobs)
    for t in (1, 2, 5, None):
        with pytest.raises(ValueError, match=r"points\[37\]"):
            F.decode_points(arr, group, threads=t)
        out, st_ = F.decode_points(arr, group, subgroup=True, threads=t, return_status=True)
        expect = [ref_status(b, group, subgroup=(i == 150)) for i, b in enumerate(blobs)]
        assert st_.tolist() == expect
        assert not out[[37, 150, 299]].any()
        good = [i for i in range(300) if i not in bad]
        assert out[good].tolist() == [refs.point_to_mont(pts[i], group) for i in good]
    # only the subgroup failure left: caught only with subgroup=True
    blobs[37], blobs[299] = c.encode(pts[37], compressed), c.encode(pts[299], compressed)
    F.decode_points(rows(blobs), group, threads=2)
    with pytest.raises(ValueError, match=r"points\[150\].*subgroup"):
        F.decode_points(rows(blobs), group, subgroup=True, threads=2)


@pytest.mark.parametrize("group", GROUPS)
@given(data=st.data())
def test_decode_agrees_with_reference_on_mutations(group, data):
    """Random byte flips in valid encodings: cuzk and the reference agree on status and point."""
    c = refs.CURVES[group]
    k = data.draw(st.integers(1, refs.R - 1))
    p = refs.ark_to_point(refs.ark_class(group)() * refs.ark_scalar(k), group)
    comp = data.draw(st.booleans())
    blob = bytearray(c.encode(p, comp))
    for _ in range(data.draw(st.integers(0, 3))):
        i = data.draw(st.integers(0, len(blob) - 1))
        blob[i] ^= 1 << data.draw(st.integers(0, 7))
    blob = bytes(blob)
    sg = data.draw(st.booleans())
    expect = ref_status(blob, group, sg)
    out, st_ = F.decode_points(rows([blob]), group, subgroup=sg, return_status=True)
    assert int(st_[0]) == expect
    if expect == OK:
        assert out[0].tolist() == refs.point_to_mont(c.decode(blob), group)
        assert F.encode_points(out, group, compressed=comp)[0].tobytes() == blob


@pytest.mark.parametrize("group", GROUPS)
@given(k=st.integers(0, refs.R - 1), comp=st.booleans())
def test_encoding_round_trip(group, k, comp):
    pt = refs.ark_class(group)() * refs.ark_scalar(k)
    m = np.array([refs.point_to_mont(refs.ark_to_point(pt, group), group)], dtype=np.uint64)
    enc = F.encode_points(m, group, compressed=comp)
    assert np.array_equal(F.decode_points(enc, group, subgroup=True), m)
    want = pt.to_compressed_bytes() if comp else ark_uncompressed(pt, group)
    assert enc[0].tobytes() == want


def test_decode_argument_errors():
    with pytest.raises(ValueError, match="shape"):
        F.decode_points(np.zeros((2, 95), dtype=np.uint8), "g1")
    with pytest.raises(ValueError, match="shape"):
        F.decode_points(np.zeros((2, 48), dtype=np.uint8), "g2")
    with pytest.raises(ValueError, match="uint8"):
        F.decode_points(np.zeros((2, 12), dtype=np.uint64), "g1")
    with pytest.raises(ValueError, match="group"):
        F.decode_points(np.zeros((2, 96), dtype=np.uint8), "G1")
    assert F.decode_points(np.zeros((0, 96), dtype=np.uint8), "g1").shape == (0, 12)
    assert F.encode_points(np.zeros((0, 24), dtype=np.uint64), "g2").shape == (0, 96)
