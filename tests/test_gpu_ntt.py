"""GPU NTT family and H stage (cuzk._cuda_ntt, kernels in cuzk/cu/ntt).

CI (no GPU): the kernels compile through NVRTC for sm_90, the pass plan covers
every size, the constant header matches its generator script, inputs are
validated.  GPU (``-m gpu``): every transform equals the CPU reference
(cuzk._native._ntt) and a pure-Python DFT, the H stage equals the CPU H stage,
and several threads on their own streams get the same answers at once.
"""

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from cuzk import _cuda_ntt as G
from cuzk._backend import cuda_available

CUDA_OK, CUDA_WHY = cuda_available()

R = G.R_MODULUS
RINV = pow(1 << 256, -1, R)
ROOT = Path(__file__).resolve().parents[1]

try:
    from cuzk._native import _ntt as cpu_ntt
except ImportError:  # the CPU reference is not built: the Python DFT still checks small sizes
    cpu_ntt = None
needs_cpu = pytest.mark.skipif(cpu_ntt is None, reason="cuzk._native._ntt (CPU reference) not built")


# --------------------------------------------------------------------------- helpers

def rand_fr(rng, n):
    """n uniformly random reduced Montgomery elements (uint64 (n, 4))."""
    v = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
    v[:, 3] &= np.uint64((1 << 63) - 1)
    over = v[:, 3] >= np.uint64(R >> 192)
    v[over, 3] -= np.uint64(R >> 192)        # keeps the tail random, value < r
    return v


def to_ints(a):
    """Montgomery uint64 (n, 4) -> canonical Python ints."""
    return [(int(a[i, 0]) | int(a[i, 1]) << 64 | int(a[i, 2]) << 128 | int(a[i, 3]) << 192) * RINV % R
            for i in range(a.shape[0])]


def from_ints(xs):
    return G._rows(xs)


def dft_ref(xs, inverse, coset):
    """Naive transform over Python ints: evaluations at g·ω^k (g = 7 for cosets, else 1)."""
    n = len(xs)
    w = pow(7, (R - 1) // n, R)
    g = 7 if coset else 1
    if not inverse:
        out = []
        for k in range(n):
            p, acc = g * pow(w, k, R) % R, 0
            for x in reversed(xs):
                acc = (acc * p + x) % R
            out.append(acc)
        return out
    winv, ninv, ginv = pow(w, -1, R), pow(n, -1, R), pow(g, -1, R)
    out = []
    for i in range(n):
        p = pow(winv, i, R)
        acc = 0
        for y in reversed(xs):
            acc = (acc * p + y) % R
        out.append(acc * ninv * pow(ginv, i, R) % R)
    return out


def h_ref(a, b, c):
    """bellperson's H: iNTT(a,b,c) -> coset NTT -> (a·b - c)/(g^n - 1) -> coset iNTT (Python ints)."""
    n = len(a)
    ca = [dft_ref(dft_ref(v, True, False), False, True) for v in (a, b, c)]
    zinv = pow(pow(7, n, R) - 1, -1, R)
    hc = [(x * y - z) * zinv % R for x, y, z in zip(*ca)]
    return dft_ref(hc, True, True)


def cpu_transform(v, inverse, coset):
    out = v.copy()
    cpu_ntt.ntt_mont(out, inverse, coset, 0)
    return out


# --------------------------------------------------------------------------- CI (no GPU)

def test_pass_plan_covers_every_size():
    for lg in range(1, G.MAX_LOG_SIZE + 1):
        plan = G.pass_plan(lg)
        assert sum(s for s, _, _ in plan) == lg
        assert [lo for _, _, lo in plan] == sorted((lo for _, _, lo in plan), reverse=True)
        assert plan[-1][2] == 0
        for S, LC, lo in plan:
            assert 1 <= S <= 10 or len(plan) == 1
            assert S + LC <= 11
            assert lo == 0 or lo >= LC            # column tiles need 2^LC low-bit values
            assert lg - lo - S >= 0 and (lo > 0 or lg - S >= LC)   # enough sub-problems
        assert len(plan) == (1 if lg <= 11 else 2 if lg <= 20 else 3)
    # passes in whole 3-bit rounds where the sizes allow it (single-bit rounds are slower)
    assert [S for S, _, _ in G.pass_plan(27)] == [9, 9, 9]
    assert [S for S, _, _ in G.pass_plan(24)] == [9, 9, 6]
    assert [S for S, _, _ in G.pass_plan(21)] == [9, 6, 6]
    with pytest.raises(ValueError):
        G.pass_plan(G.MAX_LOG_SIZE + 1)


def test_kernels_compile_for_sm90():
    """Every kernel of program "ntt" compiles through NVRTC to CUBIN for sm_90 (no GPU needed)."""
    from cuzk import _kernels
    image = _kernels.compile_program("ntt", "sm_90", "cubin")
    assert image[:4] == b"\x7fELF"
    for name in (b"cuzk_ntt_pass", b"cuzk_ntt_pass_deep", b"cuzk_ntt_gen_zetas", b"cuzk_fr_mul",
                 b"cuzk_fr_add", b"cuzk_fr_sub", b"cuzk_fr_bitrev"):
        assert name in image


def test_constant_header_matches_script():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_cu_constants.py")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("fn", [lambda v: G.ntt(v), lambda v: G.h_stage(v, v, v)])
def test_inputs_are_validated(fn):
    good = from_ints([1, 2, 3, 4])
    with pytest.raises(ValueError, match="power of two"):
        fn(good[:3])
    with pytest.raises(ValueError, match="shape"):
        fn(good.astype(np.uint32))
    bad = good.copy()
    bad[2] = [(R >> (64 * i)) & (2**64 - 1) for i in range(4)]       # r itself
    with pytest.raises(ValueError, match=r"\[2\]"):
        fn(bad)


# --------------------------------------------------------------------------- GPU

VARIANTS = [(False, False), (True, False), (False, True), (True, True)]


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA_OK, reason=f"no usable CUDA device: {CUDA_WHY}")
@pytest.mark.parametrize("op", ["mul", "add", "sub"])
def test_fr_arithmetic_matches_python(op, rng):
    """Elementwise kernels, edge values included, bit for bit against Python ints."""
    from cuzk._native import _driver as d
    edge = [0, 1, 2, R - 1, R - 2, (R - 1) // 2, (1 << 255) % R, 1 << 64, (1 << 256) % R]
    n = 1 << 12
    a_int = edge + [int(x) for x in to_ints(rand_fr(rng, n - len(edge)))]
    b_int = edge[::-1] + [int(x) for x in to_ints(rand_fr(rng, n - len(edge)))]
    a, b = from_ints(a_int), from_ints(b_int)
    st = G._state(None)
    s = st.streams()[0]
    bufs = [st.pool.alloc(n * 32, s) for _ in range(3)]
    d.copy_htod(bufs[1], a, n * 32, s)
    d.copy_htod(bufs[2], b, n * 32, s)
    d.memset_d8(bufs[0], 0xFF, n * 32, s)
    st.fn(f"cuzk_fr_{op}").launch(s, 16, 256, [("P", bufs[0].ptr), ("P", bufs[1].ptr),
                                                ("P", bufs[2].ptr), ("Q", n)])
    out = np.empty((n, 4), np.uint64)
    d.copy_dtoh(out, bufs[0], n * 32, s)
    s.synchronize()
    for x in bufs:
        x.free(s)
    f = {"mul": lambda x, y: x * y, "add": lambda x, y: x + y, "sub": lambda x, y: x - y}[op]
    assert to_ints(out) == [f(x, y) % R for x, y in zip(a_int, b_int)]



@pytest.mark.gpu
@pytest.mark.skipif(not CUDA_OK, reason=f"no usable CUDA device: {CUDA_WHY}")
@pytest.mark.parametrize("inverse,coset", VARIANTS)
@pytest.mark.parametrize("lg", [1, 2, 3, 4, 5, 8])
def test_ntt_matches_python_dft(lg, inverse, coset, rng):
    x = rand_fr(rng, 1 << lg)
    got = G.ntt(x, inverse=inverse, coset=coset)
    assert to_ints(got) == dft_ref(to_ints(x), inverse, coset)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA_OK, reason=f"no usable CUDA device: {CUDA_WHY}")
@needs_cpu
@pytest.mark.parametrize("inverse,coset", VARIANTS)
@pytest.mark.parametrize("lg", list(range(1, 25)))
def test_ntt_matches_cpu(lg, inverse, coset, rng):
    """Device-resident transform with a poisoned output buffer, against the CPU NTT."""
    from cuzk._native import _driver as d
    n = 1 << lg
    x = rand_fr(rng, n)
    ref = cpu_transform(x, inverse, coset)
    st = G._state(None)
    s = st.streams()[0]
    d_in, d_out = st.pool.alloc(n * 32, s), st.pool.alloc(n * 32, s)
    try:
        d.copy_htod(d_in, x, n * 32, s)
        d.memset_d8(d_out, 0xFF, n * 32, s)      # poison: an unwritten element is >= r
        G.ntt_device(d_in, d_out, n, inverse=inverse, coset=coset, stream=s)
        got = np.empty_like(x)
        d.copy_dtoh(got, d_out, n * 32, s)
        s.synchronize()
    finally:
        d_in.free(s)
        d_out.free(s)
    bad = np.flatnonzero((got != ref).any(axis=1))
    assert bad.size == 0, f"{bad.size} of {n} differ, first at {bad[:8].tolist()}"


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA_OK, reason=f"no usable CUDA device: {CUDA_WHY}")
@needs_cpu
@pytest.mark.parametrize("lg", [10, 16])
def test_bit_reversed_orders_compose(lg, rng):
    """natural=False: forward leaves bit-reversed order that the inverse takes back."""
    from cuzk._native import _driver as d
    n = 1 << lg
    x = rand_fr(rng, n)
    st = G._state(None)
    s = st.streams()[0]
    d_x, d_y = st.pool.alloc(n * 32, s), st.pool.alloc(n * 32, s)
    d.copy_htod(d_x, x, n * 32, s)
    G.ntt_device(d_x, d_x, n, coset=True, stream=s, natural=False)      # in place
    mid = np.empty_like(x)
    d.copy_dtoh(mid, d_x, n * 32, s)
    G.ntt_device(d_x, d_y, n, inverse=True, coset=True, stream=s, natural=False)
    back = np.empty_like(x)
    d.copy_dtoh(back, d_y, n * 32, s)
    s.synchronize()
    d_x.free(s)
    d_y.free(s)
    rev = np.array([int(f"{i:0{lg}b}"[::-1], 2) for i in range(n)])
    assert np.array_equal(mid[rev], cpu_transform(x, False, True))
    assert np.array_equal(back, x)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA_OK, reason=f"no usable CUDA device: {CUDA_WHY}")
@pytest.mark.parametrize("lg", [1, 2, 3, 6])
def test_h_stage_matches_python(lg, rng):
    a, b, c = (rand_fr(rng, 1 << lg) for _ in range(3))
    got = G.h_stage(a, b, c)
    assert to_ints(got) == h_ref(to_ints(a), to_ints(b), to_ints(c))


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA_OK, reason=f"no usable CUDA device: {CUDA_WHY}")
@pytest.mark.parametrize("lg", [1, 3, 11, 12, 16, 20, 22])
def test_snarkjs_h_matches_cpu(lg, rng):
    from cuzk._native import _sparse
    from cuzk._snarkjs_prover import ROOT_EXPONENT
    n = 1 << lg
    a, b, c = (rand_fr(rng, n) for _ in range(3))
    want = _sparse.snarkjs_h(a.copy(), b.copy(), c.copy(), ROOT_EXPONENT, threads=0)
    assert np.array_equal(G.snarkjs_h(a, b, c, ROOT_EXPONENT), want)
    assert np.array_equal(G.snarkjs_h(a, b, c, ROOT_EXPONENT, deep=True), want)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA_OK, reason=f"no usable CUDA device: {CUDA_WHY}")
@needs_cpu
@pytest.mark.parametrize("lg", [1, 4, 11, 12, 15, 17, 20, 21, 22])
def test_h_stage_matches_cpu(lg, rng):
    n = 1 << lg
    a, b, c = (rand_fr(rng, n) for _ in range(3))
    ref = [v.copy() for v in (a, b, c)]
    cpu_ntt.h_stage(*ref, threads=0)
    got = G.h_stage(a, b, c)
    assert np.array_equal(got, ref[0])
    assert np.array_equal(G.h_stage(a, b, c, deep=True), ref[0])   # deep tables (from 2^6)
    from cuzk._native import _driver as d
    buf = G.h_stage_device(a, b, c)        # device-resident variant, same bytes
    st = G._state(None)
    s = st.streams()[0]
    got2 = np.empty_like(a)
    d.copy_dtoh(got2, buf, n * 32, s)
    s.synchronize()
    buf.free(s)
    assert np.array_equal(got2, ref[0])


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA_OK, reason=f"no usable CUDA device: {CUDA_WHY}")
@pytest.mark.parametrize("lg", [23, 26])
def test_h_stage_deep_tables_equal_full_large(lg, rng):
    """Deep tables at three-pass sizes with different bottom passes (2^23: 7 bits, 2^26: 8):
    the same coefficients as the full tables (each checked against the CPU up to 2^22 above)."""
    n = 1 << lg
    a, b, c = (rand_fr(rng, n) for _ in range(3))
    assert G.h_deep(lg) and G.pass_plan(lg)[-1][0] >= 3
    assert np.array_equal(G.h_stage(a, b, c, deep=True), G.h_stage(a, b, c))


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA_OK, reason=f"no usable CUDA device: {CUDA_WHY}")
@pytest.mark.parametrize("buffers", [3, 2])
@pytest.mark.parametrize("lg,deep", [(12, False), (20, True), (23, True)])
def test_h_stage_in_fewer_buffers_equals_four(buffers, lg, deep, rng):
    """H of a satisfied assignment (c = a∘b) in three buffers (``h_stage_abc``: in-place
    bit-reversals, h in a's buffer) or in two (``h_stage_ab``: c copied into a's between steps
    "b" and "c", as the stages upload it) == the four-buffer H stage's coefficients."""
    from cuzk._native import _field
    n = 1 << lg
    a, b = rand_fr(rng, n), rand_fr(rng, n)
    c = _field.mul(a, b, "fr")
    want = G.h_stage(a, b, c)
    d = G._driver()

    def run(st, comp, lg_n, bufs, h, events):
        if buffers == 3:
            comp.wait_event(events[2])      # the third buffer's upload lands before step "a"
            for step in ("a", "rest"):      # writes A~ there
                G.h_stage_abc(bufs[0], bufs[1], bufs[2], n, stream=comp, steps=(step,),
                              ready=events[:2], deep=deep)
        else:
            G.h_stage_ab(bufs[0], bufs[1], n, stream=comp, steps=("a", "b"), ready=events, deep=deep)
            d.copy_htod(bufs[0], c, n * 32, comp)
            G.h_stage_ab(bufs[0], bufs[1], n, stream=comp, steps=("c",), deep=deep)
            comp.synchronize()      # c's host array outlives the copy
        return bufs[0]

    st = G._state(None)
    comp = st.streams()[0]
    got = G._download(st, comp, G._h_upload_and_run([a, b, rand_fr(rng, n)], None, comp, run), n)
    assert np.array_equal(got, want)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA_OK, reason=f"no usable CUDA device: {CUDA_WHY}")
@needs_cpu
def test_threads_on_their_own_streams(rng):
    """Six threads, each with its own stream, mixing transforms and H stages at once."""
    from cuzk._native import _driver as d
    dev = d.Device.get(0)
    jobs = []
    for i in range(6):
        lg = (12, 14, 16)[i % 3]
        x = rand_fr(rng, 1 << lg)
        jobs.append((lg, x, cpu_transform(x, bool(i & 1), bool(i & 2)),
                     [rand_fr(rng, 1 << lg) for _ in range(3)]))
    href = []
    for lg, _, _, abc in jobs:
        r = [v.copy() for v in abc]
        cpu_ntt.h_stage(*r, threads=0)
        href.append(r[0])
    errors = []
    barrier = threading.Barrier(len(jobs))

    def work(i):
        try:
            lg, x, ref, abc = jobs[i]
            with d.Stream(dev) as s:
                barrier.wait()
                for _ in range(3):
                    got = G.ntt(x, inverse=bool(i & 1), coset=bool(i & 2), stream=s)
                    assert np.array_equal(got, ref), f"thread {i}: ntt differs"
                    h = G.h_stage(*abc, stream=s)
                    assert np.array_equal(h, href[i]), f"thread {i}: h differs"
        except BaseException as e:  # forwarded below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(len(jobs))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[0]
