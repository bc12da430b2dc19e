"""CPU NTT and H stage (cuzk/_native/_ntt) against Python big-int references.

References are independent of the C++ code: ω is computed here with pow() on ints, Montgomery
conversion is x·2^256 mod r in Python, the DFT is the textbook sum (small n) or a recursive
radix-2 FFT over ints (medium n), and H is checked by exact polynomial division by X^n − 1.
"""
import threading
import time

import numpy as np
import pytest
from hypothesis import given, strategies as st

from cuzk._native._ntt import (MAX_LOG_SIZE, _arith_probe, _h_stage_impl, _ntt_mont_impl,
                               domain_root, h_stage, ntt_mont)

from refs import R  # the moduli: one place (tests/refs.py)
G = 7
MONT = (1 << 256) % R
MONT_INV = pow(MONT, -1, R)
MASK = (1 << 64) - 1
VARIANTS = [(False, False), (True, False), (False, True), (True, True)]  # (inverse, coset)


# ---- conversions and references ---------------------------------------------------------------
def to_mont(vals):
    out = np.empty((len(vals), 4), dtype=np.uint64)
    for i, v in enumerate(vals):
        m = v * MONT % R
        out[i] = [(m >> (64 * k)) & MASK for k in range(4)]
    return out


def from_mont(arr):
    return [(int(r[0]) | int(r[1]) << 64 | int(r[2]) << 128 | int(r[3]) << 192) * MONT_INV % R
            for r in arr]


def omega(n):
    return pow(G, (R - 1) // n, R)


def naive(x, inverse, coset):
    """Textbook transform: X[i] = Σ x[j]·w^(ij), w = ω or ω^-1, plus 1/n and coset shifts."""
    n = len(x)
    w = pow(omega(n), -1, R) if inverse else omega(n)
    if coset and not inverse:
        x = [v * pow(G, j, R) % R for j, v in enumerate(x)]
    out = []
    for i in range(n):
        wi, acc = pow(w, i, R), 0
        for v in reversed(x):  # Horner in w^i
            acc = (acc * wi + v) % R
        out.append(acc)
    if inverse:
        ninv = pow(n, -1, R)
        out = [v * ninv % R for v in out]
        if coset:
            ginv = pow(G, -1, R)
            out = [v * pow(ginv, j, R) % R for j, v in enumerate(out)]
    return out


def fft_ref(x, w):
    """Recursive radix-2 decimation-in-time FFT over ints: X[i] = Σ x[j]·w^(ij)."""
    n = len(x)
    if n == 1:
        return list(x)
    even, odd = fft_ref(x[0::2], w * w % R), fft_ref(x[1::2], w * w % R)
    out, t = [0] * n, 1
    for i in range(n // 2):
        o = odd[i] * t % R
        out[i], out[i + n // 2] = (even[i] + o) % R, (even[i] - o) % R
        t = t * w % R
    return out


def transform_ref(x, inverse, coset):
    n = len(x)
    if not inverse:
        if coset:
            x = [v * pow(G, j, R) % R for j, v in enumerate(x)]
        return fft_ref(x, omega(n))
    out = fft_ref(x, pow(omega(n), -1, R))
    ninv, ginv = pow(n, -1, R), pow(G, -1, R)
    return [v * ninv * (pow(ginv, j, R) if coset else 1) % R for j, v in enumerate(out)]


def random_mont(rng, n):
    """n uniformly random Fr elements as Montgomery limbs (any x < r is a valid representation)."""
    a = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
    a[:, 3] %= np.uint64(0x73eda753299d7d48)  # top limb below r's: the value is < r
    return a


def random_ints(rng, n):
    return [int.from_bytes(rng.bytes(40), "little") % R for _ in range(n)]


EDGE = {
    "zeros": lambda n: [0] * n,
    "ones": lambda n: [1] * n,
    "minus_one": lambda n: [R - 1] * n,
    "delta": lambda n: [1] + [0] * (n - 1),
    "last": lambda n: [0] * (n - 1) + [R - 1],
}


# ---- the lazy arithmetic inside the butterflies --------------------------------------------------
LAZY_EDGES = [0, 1, 2, R - 1, R, R + 1, 2 * R - 1, 2 * R - 2, (1 << 256) - 2 * R, (1 << 255) - 1,
              1 << 255, (1 << 64) - 1, 1 << 64, (1 << 192) - 1]
W_EDGES = [0, 1, R - 1, R - 2, (1 << 256) % R, (1 << 192) - 1, (1 << 64) - 1]


@pytest.mark.parametrize("portable", [False, True], ids=["fast", "portable"])
def test_lazy_arithmetic_edges(portable, rng):
    """Internal ops take values in [0, 2r) (not reduced) and must stay there, exactly mod r."""
    extra = [int.from_bytes(rng.bytes(32), "little") % (2 * R) for _ in range(6)]
    extra_w = [int.from_bytes(rng.bytes(32), "little") % R for _ in range(3)]
    rinv = pow(1 << 256, -1, R)
    for x in LAZY_EDGES + extra:
        for y in LAZY_EDGES + extra:
            s, d, _ = _arith_probe(x, y, 0, portable)
            assert s < 2 * R and s % R == (x + y) % R
            assert d < 2 * R and d % R == (x - y) % R
        for w in W_EDGES + extra_w:
            _, _, m = _arith_probe(x, 0, w, portable)
            assert m < 2 * R and m % R == w * x * rinv % R
    with pytest.raises(ValueError):
        _arith_probe(2 * R, 0, 0)
    with pytest.raises(ValueError):
        _arith_probe(0, 0, R)


# ---- exact references at small sizes -----------------------------------------------------------
@pytest.mark.parametrize("lg", range(0, 9))
@pytest.mark.parametrize("inverse,coset", VARIANTS)
def test_against_naive_dft(lg, inverse, coset, rng):
    x = random_ints(rng, 1 << lg)
    expect = naive(x, inverse, coset)
    for threads in (1, 2):
        a = to_mont(x)
        ntt_mont(a, inverse=inverse, coset=coset, threads=threads)
        assert from_mont(a) == expect
        # outputs are fully reduced Montgomery limbs: byte-exact with Python's conversion
        assert np.array_equal(a, to_mont(expect))


@pytest.mark.parametrize("kind", sorted(EDGE))
@pytest.mark.parametrize("inverse,coset", VARIANTS)
def test_edge_inputs(kind, inverse, coset):
    x = EDGE[kind](32)
    a = to_mont(x)
    ntt_mont(a, inverse=inverse, coset=coset)
    assert from_mont(a) == naive(x, inverse, coset)


@pytest.mark.parametrize("lg,threads,path", [
    (11, 2, "auto"), (12, 1, "auto"), (13, 3, "auto"), (14, 2, "auto"),  # one contiguous DIF
    (2, 1, "fourstep"), (5, 2, "fourstep"), (11, 1, "fourstep"), (12, 2, "fourstep"),
    (13, 3, "fourstep")])  # the path taken above 2^18, forced at sizes a Python FFT can check
@pytest.mark.parametrize("inverse,coset", VARIANTS)
def test_against_reference_fft(lg, threads, path, inverse, coset, rng):
    x = random_ints(rng, 1 << lg)
    a = to_mont(x)
    _ntt_mont_impl(a, inverse=inverse, coset=coset, threads=threads, path=path)
    assert from_mont(a) == transform_ref(x, inverse, coset)


@pytest.mark.parametrize("lg", [15, 18])
@pytest.mark.parametrize("inverse,coset", VARIANTS)
def test_paths_agree(lg, inverse, coset, rng):
    """The contiguous DIF and the four-step split are different algorithms: same bytes."""
    a = random_mont(rng, 1 << lg)
    outs = []
    for path, threads in (("auto", 2), ("direct", 1), ("fourstep", 2), ("fourstep", 1)):
        b = a.copy()
        _ntt_mont_impl(b, inverse=inverse, coset=coset, threads=threads, path=path)
        outs.append(b)
    for b in outs[1:]:
        assert np.array_equal(outs[0], b)


def test_spot_values_four_step_size(rng):
    """A few outputs of 2^19 transforms (four-step on every thread count) against their sums."""
    lg = 19
    n = 1 << lg
    a = random_mont(rng, n)
    x = from_mont(a)
    w = omega(n)
    fwd = a.copy()
    ntt_mont(fwd)
    cos = a.copy()
    ntt_mont(cos, coset=True)
    for arr, i, shift in ((fwd, 12345, 1), (cos, n - 1, G)):
        wi, acc = shift * pow(w, i, R) % R, 0
        for v in reversed(x):
            acc = (acc * wi + v) % R
        assert from_mont([arr[i]])[0] == acc


# ---- round trips and determinism ---------------------------------------------------------------
@pytest.mark.parametrize("lg", [1, 5, 9, 11, 12, 14, 15, 17, 20])
def test_round_trips(lg, rng):
    a = random_mont(rng, 1 << lg)
    for coset in (False, True):
        b = a.copy()
        ntt_mont(b, coset=coset)
        assert not np.array_equal(a, b)
        ntt_mont(b, inverse=True, coset=coset)
        assert np.array_equal(a, b)
    b = a.copy()  # inverse first, then forward
    ntt_mont(b, inverse=True)
    ntt_mont(b)
    assert np.array_equal(a, b)


@pytest.mark.parametrize("lg", [10, 11, 13, 16, 19])
@pytest.mark.parametrize("inverse,coset", VARIANTS)
def test_thread_count_does_not_change_bytes(lg, inverse, coset, rng):
    a = random_mont(rng, 1 << lg)
    outs = []
    for threads in (1, 2, 3, 0):
        b = a.copy()
        ntt_mont(b, inverse=inverse, coset=coset, threads=threads)
        outs.append(b)
    for b in outs[1:]:
        assert np.array_equal(outs[0], b)


@pytest.mark.parametrize("lg,path", [(0, "auto"), (3, "auto"), (8, "auto"), (12, "auto"),
                                     (12, "fourstep"), (17, "auto")])
@pytest.mark.parametrize("inverse,coset", VARIANTS)
def test_portable_arithmetic_matches_fast_path(lg, path, inverse, coset, rng):
    a = random_mont(rng, 1 << lg)
    a[: min(len(a), 4)] = to_mont([R - 1, 0, 1, R - 2][: min(len(a), 4)])
    b, c = a.copy(), a.copy()
    _ntt_mont_impl(b, inverse=inverse, coset=coset, threads=2, path=path)
    _ntt_mont_impl(c, inverse=inverse, coset=coset, threads=2, path=path, portable=True)
    assert np.array_equal(b, c)


@given(st.lists(st.integers(0, R - 1), min_size=1, max_size=64).map(
    lambda v: v[: 1 << (len(v).bit_length() - 1)]))
def test_property_linearity_and_naive(xs):
    """NTT(x + y) = NTT(x) + NTT(y) and agreement with the textbook sum, on arbitrary values."""
    n = len(xs)
    ys = [(v * 0x1234567 + 99) % R for v in xs]
    a, b, s = to_mont(xs), to_mont(ys), to_mont([(u + v) % R for u, v in zip(xs, ys)])
    for arr in (a, b, s):
        ntt_mont(arr)
    fa, fb, fs = from_mont(a), from_mont(b), from_mont(s)
    assert fs == [(u + v) % R for u, v in zip(fa, fb)]
    assert fa == naive(xs, False, False)
    assert n == len(fa)


@pytest.mark.parametrize("lg", [3, 10, 16])
def test_against_arkworks(lg, rng):
    """Same ω convention as arkworks' radix-2 domain (ark-poly, via ark-algebra-py)."""
    ark = pytest.importorskip("ark_algebra_py")
    n = 1 << lg
    a = random_mont(rng, n)
    vals = [ark.Scalar.from_le_bytes(v.to_bytes(32, "little")) for v in from_mont(a)]
    dom = ark.Domain(n)
    coeffs = [int.from_bytes(bytes(s.to_le_bytes()), "little")
              for s in dom.interpolate(vals).coefficients()]
    evals = [int.from_bytes(bytes(s.to_le_bytes()), "little")
             for s in ark.Polynomial(vals).evaluate_over_domain(dom)]
    inv, fwd = a.copy(), a.copy()
    ntt_mont(inv, inverse=True)
    ntt_mont(fwd)
    assert from_mont(inv) == coeffs + [0] * (n - len(coeffs))
    assert from_mont(fwd) == evals


# ---- domain ------------------------------------------------------------------------------------
@pytest.mark.parametrize("lg", [0, 1, 2, 5, 16, 27, 32])
def test_domain_root(lg):
    w = domain_root(lg)
    assert w.dtype == np.uint64 and w.shape == (4,)
    val = from_mont([w])[0]
    assert val == pow(G, (R - 1) >> lg, R)
    assert pow(val, 1 << lg, R) == 1
    if lg:
        assert pow(val, 1 << (lg - 1), R) == R - 1


# ---- H stage -----------------------------------------------------------------------------------
def poly_mul(p, q):
    out = [0] * (len(p) + len(q) - 1)
    for i, u in enumerate(p):
        if u:
            for j, v in enumerate(q):
                out[i + j] = (out[i + j] + u * v) % R
    return out


def h_reference(a_ev, b_ev, c_ev):
    """Exact (A·B − C) / (X^n − 1) from evaluations on <ω>; asserts the remainder is zero."""
    n = len(a_ev)
    A, B, C = (naive(v, True, False) for v in (a_ev, b_ev, c_ev))
    P = poly_mul(A, B)
    for i, v in enumerate(C):
        P[i] = (P[i] - v) % R
    Q = [0] * n
    for k in range(len(P) - 1, n - 1, -1):  # divide by X^n − 1 from the top
        Q[k - n] = P[k]
        P[k - n] = (P[k - n] + P[k]) % R
        P[k] = 0
    assert not any(P), "A·B − C does not vanish on the domain"
    return Q


@pytest.mark.parametrize("lg", [0, 1, 2, 4, 6])
def test_h_stage_against_polynomial_division(lg, rng):
    n = 1 << lg
    a_ev, b_ev = random_ints(rng, n), random_ints(rng, n)
    c_ev = [u * v % R for u, v in zip(a_ev, b_ev)]  # a∘b: A·B − C is divisible by Z
    expect = h_reference(a_ev, b_ev, c_ev)
    assert expect[-1] == 0
    for threads, kw in ((1, {}), (2, {}), (2, {"portable": True}), (2, {"path": "fourstep"})):
        a, b, c = to_mont(a_ev), to_mont(b_ev), to_mont(c_ev)
        _h_stage_impl(a, b, c, threads=threads, **kw)
        assert from_mont(a) == expect
        assert not a[-1].any()  # top coefficient of h is exactly zero


@pytest.mark.parametrize("lg,threads", [(11, 2), (13, 1), (14, 2)])
def test_h_stage_identity_at_random_point(lg, threads, rng):
    """A(τ)·B(τ) − C(τ) = h(τ)·(τ^n − 1) at a random τ, A, B, C by barycentric interpolation."""
    n = 1 << lg
    a, b = random_mont(rng, n), random_mont(rng, n)
    a_ev, b_ev = from_mont(a), from_mont(b)
    c_ev = [u * v % R for u, v in zip(a_ev, b_ev)]
    c = to_mont(c_ev)
    a2, b2, c2 = a.copy(), b.copy(), c.copy()
    h_stage(a, b, c, threads=threads)
    h = from_mont(a)
    assert h[-1] == 0
    tau = int.from_bytes(rng.bytes(40), "little") % R
    w, zt = omega(n), (pow(tau, n, R) - 1) % R
    pts, wi = [], 1
    for _ in range(n):
        pts.append(wi)
        wi = wi * w % R
    # barycentric weights on <ω>: L_i(τ) = (τ^n − 1)·ω^i / (n·(τ − ω^i))
    inv = [pow((tau - p) % R, -1, R) for p in pts]
    scale = zt * pow(n, -1, R) % R
    lag = [scale * p % R * q % R for p, q in zip(pts, inv)]
    ev = [sum(v * l for v, l in zip(vals, lag)) % R for vals in (a_ev, b_ev, c_ev)]
    h_tau = 0
    for v in reversed(h):
        h_tau = (h_tau * tau + v) % R
    assert (ev[0] * ev[1] - ev[2]) % R == h_tau * zt % R
    # same bytes on another thread count, through the portable arithmetic and the four-step path
    _h_stage_impl(a2, b2, c2, threads=3, portable=True, path="fourstep")
    assert np.array_equal(a, a2)


def test_h_stage_matches_composed_transforms(rng):
    """h_stage = coset_inverse((coset(a)·coset(b) − coset(c))·(g^n − 1)^-1), from ntt_mont calls."""
    n = 1 << 12
    a, b = random_mont(rng, n), random_mont(rng, n)
    c = random_mont(rng, n)  # arbitrary c: the formula still defines the bytes
    want = []
    for v in (a, b, c):
        t = v.copy()
        ntt_mont(t, inverse=True)
        ntt_mont(t, coset=True)
        want.append(from_mont(t))
    zinv = pow((pow(G, n, R) - 1) % R, -1, R)
    h = to_mont([(u * v - w) * zinv % R for u, v, w in zip(*want)])
    ntt_mont(h, inverse=True, coset=True)
    a2, b2, c2 = a.copy(), b.copy(), c.copy()
    h_stage(a, b, c, threads=2)
    assert np.array_equal(a, h)
    _h_stage_impl(a2, b2, c2, threads=2, path="fourstep")
    assert np.array_equal(a2, h)


@pytest.mark.parametrize("lg", [0, 1, 2, 5, 9, 13, 17, 19])
def test_h_stage_six_transforms_equal_seven(lg, rng):
    """The six-transform H (production) gives bellperson's seven-transform bytes for arbitrary
    (unsatisfied) a, b, c, on both CPU paths and both arithmetics."""
    n = 1 << lg
    abc = [random_mont(rng, n) for _ in range(3)]
    seven = [v.copy() for v in abc]
    _h_stage_impl(*seven, threads=2, seven=True)
    six = [v.copy() for v in abc]
    h_stage(*six, threads=2)
    assert np.array_equal(six[0], seven[0])
    if lg >= 2:
        four = [v.copy() for v in abc]
        _h_stage_impl(*four, threads=1, portable=True, path="fourstep")
        assert np.array_equal(four[0], seven[0])


# ---- validation --------------------------------------------------------------------------------
def test_rejects_bad_arrays():
    good = np.zeros((8, 4), dtype=np.uint64)
    with pytest.raises(TypeError):
        ntt_mont([[0, 0, 0, 0]])
    with pytest.raises(ValueError, match="dtype"):
        ntt_mont(good.astype(np.int64))
    with pytest.raises(ValueError, match="shape"):
        ntt_mont(np.zeros((8, 3), dtype=np.uint64))
    with pytest.raises(ValueError, match="shape"):
        ntt_mont(np.zeros(32, dtype=np.uint64))
    with pytest.raises(ValueError, match="power of two"):
        ntt_mont(np.zeros((6, 4), dtype=np.uint64))
    with pytest.raises(ValueError, match="power of two"):
        ntt_mont(np.zeros((0, 4), dtype=np.uint64))
    with pytest.raises(ValueError, match="contiguous"):
        ntt_mont(np.zeros((16, 4), dtype=np.uint64)[::2])
    ro = good.copy()
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        ntt_mont(ro)
    with pytest.raises(ValueError, match="threads"):
        ntt_mont(good, threads=-1)
    with pytest.raises(TypeError):
        ntt_mont(good, threads=1.5)
    ntt_mont(good, threads=None)  # None: all cores
    assert not good.any()


def test_rejects_unreduced_element_naming_index():
    a = to_mont(list(range(16)))
    a[11] = [0xffffffff00000001, 0x53bda402fffe5bfe, 0x3339d80809a1d805, 0x73eda753299d7d48]  # r
    a[13] = [MASK] * 4
    before = a.copy()
    with pytest.raises(ValueError, match=r"values\[11\]"):
        ntt_mont(a)
    assert np.array_equal(a, before)  # nothing written


def test_h_stage_rejects_mismatch_and_overlap():
    a, b = np.zeros((8, 4), np.uint64), np.zeros((8, 4), np.uint64)
    with pytest.raises(ValueError, match="same length"):
        h_stage(a, b, np.zeros((4, 4), np.uint64))
    with pytest.raises(ValueError, match="overlap"):
        h_stage(a, b, a)
    big = np.zeros((16, 4), np.uint64)
    with pytest.raises(ValueError, match="overlap"):
        h_stage(big[:8], big[4:12], b)
    c = np.zeros((8, 4), np.uint64)
    c[3, 3] = MASK
    with pytest.raises(ValueError, match=r"c\[3\]"):
        h_stage(a, b, c)


def test_domain_root_range():
    assert MAX_LOG_SIZE == 32
    for bad in (-1, 33):
        with pytest.raises(ValueError):
            domain_root(bad)


def test_concurrent_calls_from_python_threads(rng):
    """Several Python threads transforming their own arrays at once get the sequential bytes."""
    inputs = [random_mont(rng, 1 << lg) for lg in (9, 12, 13, 14, 15, 16)]
    expect = []
    for a in inputs:
        b = a.copy()
        ntt_mont(b, coset=True, threads=1)
        expect.append(b)
    results, errors = [None] * len(inputs), []

    def work(i):
        try:
            b = inputs[i].copy()
            for _ in range(3):
                ntt_mont(b, coset=True, threads=2)
                ntt_mont(b, inverse=True, coset=True, threads=2)
            ntt_mont(b, coset=True, threads=2)
            results[i] = b
        except Exception as e:  # forwarded to the main thread
            errors.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(len(inputs))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    for got, want in zip(results, expect):
        assert np.array_equal(got, want)


# ---- the GIL ------------------------------------------------------------------------------------
def test_gil_released_during_large_ntt(rng):
    """A second Python thread keeps running while a 2^20 NTT runs in native code."""
    a = random_mont(rng, 1 << 20)
    span = []

    def work():
        t0 = time.perf_counter()
        ntt_mont(a, threads=1)
        span.append((t0, time.perf_counter()))

    t = threading.Thread(target=work)
    stamps = []
    t.start()
    while t.is_alive():
        now = time.perf_counter()
        stamps.append(now)
    t.join()
    (t0, t1), = span
    inside = [s for s in stamps if t0 <= s <= t1]
    gaps = np.diff([t0] + inside + [t1])
    # holding the GIL would stall this loop for the whole call: one gap of about t1 − t0
    assert t1 - t0 > 0.02
    assert len(inside) > 100
    assert gaps.max() < 0.5 * (t1 - t0)
