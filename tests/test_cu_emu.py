"""The CUDA kernels' arithmetic and NTT/H logic, checked without a GPU.

tests/cu_emu/emu.cpp compiles the real kernel sources (cuzk/cu, or $CUZK_CU_DIR)
with the system C++ compiler under CUZK_HOST_EMU: the PTX carry chains run
through cuzk/cu/ff/carry.cuh's host branch, every CUDA thread of a block is a
fiber and __syncthreads() switches between them.  tests/cu_emu/fake_driver.py
stands in for cuzk._native._driver (host memory, checked launches) and is
installed into cuzk._cuda_ntt with monkeypatch for one test at a time, so the
module's real host code (pass plans, flags, tables, H-stage sequencing) drives
the emulated kernels.  References are independent of the kernels: Python big
ints for the field, the CPU cuzk._native._ntt (and a naive DFT) for transforms.

No compiler, or one that cannot build the harness's platform probe (C++20,
<ucontext.h>, threads): the module is skipped.  Any other build error fails:
it means the kernel sources (or the harness) are broken.
"""

import logging
import random
import threading
import time

import numpy as np
import pytest

from cuzk import _cuda_ntt

try:
    from cuzk._native import _ntt as cpu_ntt
except ImportError:  # pragma: no cover - the CPU extension is built wherever tests run
    cpu_ntt = None

from helpers import unsatisfied_witness
from refs import P, R  # the moduli: one place (tests/refs.py)

FIELDS = {"fr": (R, 32), "fq": (P, 48)}   # modulus, bytes (Montgomery R = 2^(8*bytes))

needs_cpu = pytest.mark.skipif(cpu_ntt is None, reason="cuzk._native._ntt (CPU reference) not built")


# --------------------------------------------------------------------------- fixtures
# emu_lib and fake (the built emulator, its fake driver): tests/conftest.py, one build per session

@pytest.fixture(scope="session")
def _emu_states():
    return {}   # cuzk._cuda_ntt per-device state of the fake device: tables reused across tests


@pytest.fixture
def gpu(fake, _emu_states, monkeypatch):
    """cuzk._cuda_ntt running on the emulator for this test only."""
    return fake.install(monkeypatch, _emu_states)


# --------------------------------------------------------------------------- helpers

def to_arr(vals, nbytes):
    raw = b"".join(v.to_bytes(nbytes, "little") for v in vals)
    return np.frombuffer(raw, dtype="<u8").reshape(len(vals), nbytes // 8).astype(np.uint64)


def from_arr(a):
    a = np.ascontiguousarray(a, dtype="<u8")
    w = a.shape[-1] * 8
    raw = a.tobytes()
    return [int.from_bytes(raw[i:i + w], "little") for i in range(0, len(raw), w)]


def run_kernel(fake, name, a_vals, b_vals, nbytes, outs=1, grid=3, block=96):
    """d_out (outs elements per input pair) of kernel(d_out, d_a, d_b, n); grid-stride kernels."""
    dev = fake.Device.get(0)
    n = len(a_vals)
    a, b = to_arr(a_vals, nbytes), to_arr(b_vals, nbytes)
    da = fake.DeviceBuffer.alloc(dev, a.nbytes)
    db = fake.DeviceBuffer.alloc(dev, b.nbytes)
    do = fake.DeviceBuffer.alloc(dev, outs * a.nbytes)
    try:
        fake.copy_htod(da, a, a.nbytes, None)
        fake.copy_htod(db, b, b.nbytes, None)
        fake.Module(dev).function(name).launch(
            None, grid, block, [("P", do.ptr), ("P", da.ptr), ("P", db.ptr), ("Q", n)])
        o = np.empty((n * outs, nbytes // 8), np.uint64)
        fake.copy_dtoh(o, do, o.nbytes, None)
    finally:
        for x in (da, db, do):
            x.free()
    return from_arr(o)


def edge_values(p, nbytes):
    bits = 8 * nbytes
    e = {0, 1, 2, 3, p - 1, p - 2, (p - 1) // 2, (p + 1) // 2, 2**32 - 1, 2**32, 2**64 - 1, 2**64,
         2**128, 2**192, p - 2**64, p - 2**32, (1 << bits) % p, (1 << (2 * bits)) % p,
         (1 << (bits - 1)) % p, (p >> 32) << 32, p >> 1, (1 << (p.bit_length() - 1))}
    return sorted(v % p for v in e)


def adversarial_values(rnd, p, nbytes, count):
    """Limbs (32-bit) from {0, 1, 0xffffffff, 0xfffffffe, random}, reduced by rejection;
    half of them reflected to p - v (values just under the modulus)."""
    limbs = nbytes // 4
    out = []
    while len(out) < count:
        v = 0
        for k in range(limbs):
            v |= rnd.choice((0, 1, 0xffffffff, 0xfffffffe, rnd.getrandbits(32))) << (32 * k)
        if v >= p:
            continue
        out.append(p - 1 - v if len(out) % 2 and v < p - 1 else v)
    return out


def operand_sets(rnd, p, nbytes, kind):
    if kind == "edge":          # every ordered pair of edge values
        e = edge_values(p, nbytes)
        return [x for x in e for _ in e], [y for _ in e for y in e]
    if kind == "random":
        n = 1500
        return [rnd.randrange(p) for _ in range(n)], [rnd.randrange(p) for _ in range(n)]
    n = 3000                    # adversarial
    a = adversarial_values(rnd, p, nbytes, n)
    b = adversarial_values(rnd, p, nbytes, n)
    b[: n // 4] = [(p - x) % p for x in a[: n // 4]]          # a + b == p (0), a - b wraps
    b[n // 4: n // 2] = a[n // 4: n // 2]                     # a - b == 0
    return a, b


def pyrand(rng):
    return random.Random(int(rng.integers(2**63)))


def rand_fr(rng, n):
    """n random reduced Montgomery Fr elements (uint64 (n, 4)), with 0 and r-1 mixed in."""
    v = rng.integers(0, 2**64, size=(n, 4), dtype=np.uint64)
    v[:, 3] &= np.uint64((1 << 63) - 1)
    over = v[:, 3] >= np.uint64(R >> 192)
    v[over, 3] -= np.uint64(R >> 192)
    if n >= 4:
        v[rng.integers(n)] = 0
        v[rng.integers(n)] = to_arr([R - 1], 32)[0]
    return v


def bitrev_perm(lg):
    n = 1 << lg
    return np.array([int(format(i, f"0{lg}b")[::-1], 2) if lg else 0 for i in range(n)])


def cpu_ntt_ref(x, inverse, coset):
    y = x.copy()
    cpu_ntt.ntt_mont(y, inverse=inverse, coset=coset, threads=2)
    return y


def cpu_h_ref(a, b, c):
    ra = a.copy()
    cpu_ntt.h_stage(ra, b.copy(), c.copy(), threads=2)
    return ra


def _h_through(gpu, rng, a, b, run):
    """(state, stream, result) of ``run(st, comp, lg_n, bufs, h, events)`` over a, b and a
    random c uploaded by ``_h_upload_and_run``; the result buffer ``run`` returns, downloaded."""
    st, n = gpu._state(None), a.shape[0]
    comp = st.streams()[0]
    got = gpu._download(st, comp, gpu._h_upload_and_run([a, b, rand_fr(rng, n)], None, comp, run), n)
    return st, comp, got


def assert_same(got, want, what):
    bad = np.flatnonzero((got != want).any(axis=1))
    assert bad.size == 0, f"{what}: {bad.size} of {len(want)} elements differ, first at {bad[:8].tolist()}"


VARIANTS = [(False, False), (False, True), (True, False), (True, True)]
VARIANT_IDS = ["fwd", "coset", "inv", "coset_inv"]


# --------------------------------------------------------------------------- field kernels

@pytest.mark.parametrize("kind", ["edge", "random", "adversarial"])
@pytest.mark.parametrize("op", ["mul", "add", "sub"])
def test_fr_kernels(fake, rng, op, kind):
    """cuzk_fr_mul/add/sub (Montgomery: mul is a*b*2^-256) against Python big ints."""
    a, b = operand_sets(pyrand(rng), R, 32, kind)
    got = run_kernel(fake, f"cuzk_fr_{op}", a, b, 32)
    rinv = pow(1 << 256, -1, R)
    f = {"mul": lambda x, y: x * y * rinv % R, "add": lambda x, y: (x + y) % R,
         "sub": lambda x, y: (x - y) % R}[op]
    bad = [i for i in range(len(a)) if got[i] != f(a[i], b[i])]
    assert not bad, (f"cuzk_fr_{op}: {len(bad)} of {len(a)} wrong; first a={a[bad[0]]:#x} "
                     f"b={b[bad[0]]:#x} got={got[bad[0]]:#x} want={f(a[bad[0]], b[bad[0]]):#x}")


@pytest.mark.parametrize("field", ["fr", "fq"])
def test_mont_ops(fake, rng, field):
    """Every mont_t operation (emu_*_ops harness kernel) for Fr and Fq against big ints."""
    p, nbytes = FIELDS[field]
    rnd = pyrand(rng)
    a, b = [], []
    for kind in ("edge", "random", "adversarial"):
        x, y = operand_sets(rnd, p, nbytes, kind)
        a += x[:800]
        b += y[:800]
    got = run_kernel(fake, f"emu_{field}_ops", a, b, nbytes, outs=12)
    R_ = 1 << (8 * nbytes)
    rinv = pow(R_, -1, p)
    names = ["a*b", "a+b", "a-b", "-a", "sqr", "to_mont", "from_mont", "one", "modulus",
             "pow_u32", "flags", "zero"]
    for i, (x, y) in enumerate(zip(a, b)):
        e = y & 0xffffffff
        want = [x * y * rinv % p, (x + y) % p, (x - y) % p, -x % p, x * x * rinv % p, x * R_ % p,
                x * rinv % p, R_ % p, p, pow(x * rinv % p, e, p) * R_ % p,
                int(x == y) | int(x == 0) << 1, 0]
        row = got[12 * i: 12 * i + 12]
        for k, (g, w) in enumerate(zip(row, want)):
            assert g == w, f"{field} {names[k]}: a={x:#x} b={y:#x} got {g:#x} want {w:#x}"


# --------------------------------------------------------------------------- NTT

@needs_cpu
@pytest.mark.parametrize("inverse,coset", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("lg", range(1, 14))
def test_ntt_matches_cpu(gpu, rng, lg, inverse, coset):
    """Default pass plans (1 pass up to 2^11, 2 above) against the CPU transform."""
    x = rand_fr(rng, 1 << lg)
    assert_same(gpu.ntt(x, inverse=inverse, coset=coset), cpu_ntt_ref(x, inverse, coset),
                f"2^{lg} plan {gpu.pass_plan(lg)}")


@pytest.mark.parametrize("inverse,coset", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("lg", [1, 2, 3, 4])
def test_ntt_matches_naive_dft(gpu, rng, lg, inverse, coset):
    """Tiny sizes against a Python DFT (independent of the CPU extension)."""
    n = 1 << lg
    rinv = pow(1 << 256, -1, R)
    xs = from_arr(rand_fr(rng, n))                      # Montgomery form
    vals = [v * rinv % R for v in xs]                   # canonical values
    w = pow(7, (R - 1) >> lg, R)
    g = 7 if coset else 1
    if not inverse:
        want = [sum(v * pow(g * pow(w, k, R), i, R) for i, v in enumerate(vals)) % R for k in range(n)]
    else:
        wi, ni, gi = pow(w, -1, R), pow(n, -1, R), pow(g, -1, R)
        want = [sum(v * pow(wi, i * k, R) for k, v in enumerate(vals)) * ni * pow(gi, i, R) % R
                for i in range(n)]
    got = from_arr(gpu.ntt(to_arr(xs, 32), inverse=inverse, coset=coset))
    assert [v * rinv % R for v in got] == want


# (tile log, lg_n, passes): CUZK_NTT_TILE_LOG=9 as the module would read it (2^10, 2^15 and
# 2^18 are 2-pass plans of 2^9 tiles, 2^19 the production-shaped 3-pass [7, 6, 6]);
# tiles of 2^3..2^5, below what the module's environment check allows but within the
# kernel's contract (S + LC <= 11), give cheap 3-pass plans with every S/LC combination.
FORCED = [(9, 10, 2), (9, 15, 2), (9, 18, 2), (9, 19, 3), (3, 7, 3), (3, 8, 3), (3, 9, 3),
          (4, 10, 3), (4, 12, 3), (5, 11, 3), (5, 13, 3), (5, 15, 3)]


@needs_cpu
@pytest.mark.parametrize("tile,lg,passes", FORCED, ids=[f"tile{t}-2^{g}" for t, g, _ in FORCED])
def test_ntt_forced_tiles(gpu, monkeypatch, rng, tile, lg, passes):
    monkeypatch.setattr(gpu, "_TILE_LOG_ENV", str(tile))
    plan = gpu.pass_plan(lg)
    assert len(plan) == passes, plan
    for inverse, coset in VARIANTS:
        x = rand_fr(rng, 1 << lg)
        assert_same(gpu.ntt(x, inverse=inverse, coset=coset), cpu_ntt_ref(x, inverse, coset),
                    f"2^{lg} inverse={inverse} coset={coset} plan {plan}")


@needs_cpu
@pytest.mark.parametrize("tile,lg", [(None, 5), (None, 12), (None, 13), (4, 11)])
def test_ntt_device_bitreversed_order(gpu, fake, monkeypatch, rng, tile, lg):
    """ntt_device(natural=False): forward leaves bit-reversed order, inverse takes it."""
    if tile is not None:
        monkeypatch.setattr(gpu, "_TILE_LOG_ENV", str(tile))
    n = 1 << lg
    perm = bitrev_perm(lg)
    dev = fake.Device.get(0)
    for inverse, coset in VARIANTS:
        x = rand_fr(rng, n)
        ref = cpu_ntt_ref(x, inverse, coset)
        src = x[perm] if inverse else x                # inverse: bit-reversed input
        d_in = fake.DeviceBuffer.alloc(dev, src.nbytes)
        d_out = fake.DeviceBuffer.alloc(dev, src.nbytes)
        fake.copy_htod(d_in, np.ascontiguousarray(src), src.nbytes, None)
        gpu.ntt_device(d_in, d_out, n, inverse=inverse, coset=coset, natural=False)
        got = np.empty_like(x)
        fake.copy_dtoh(got, d_out, got.nbytes, None)
        d_in.free()
        d_out.free()
        want = ref if inverse else ref[perm]
        assert_same(got, want, f"2^{lg} inverse={inverse} coset={coset} natural=False")


# --------------------------------------------------------------------------- H stage

H_CASES = [(None, 1), (None, 2), (None, 3), (None, 6), (None, 11), (None, 12), (None, 13),
           (9, 15), (9, 19), (3, 8), (4, 12), (5, 13)]


@needs_cpu
@pytest.mark.parametrize("tile,lg", H_CASES, ids=[f"tile{t or 'default'}-2^{g}" for t, g in H_CASES])
def test_h_stage_matches_cpu(gpu, monkeypatch, rng, tile, lg):
    if tile is not None:
        monkeypatch.setattr(gpu, "_TILE_LOG_ENV", str(tile))
    n = 1 << lg
    a, b, c = rand_fr(rng, n), rand_fr(rng, n), rand_fr(rng, n)
    assert_same(gpu.h_stage(a, b, c), cpu_h_ref(a, b, c), f"H 2^{lg} plan {gpu.pass_plan(lg)}")


@needs_cpu
@pytest.mark.parametrize("lg", [3, 13])
def test_h_stage_with_the_inverse_w_table(gpu, monkeypatch, rng, lg):
    """CUZK_NTT_INV_W=table (the A/B's other side: a built inverse w table, no mirror) gives the
    same H as the CPU."""
    monkeypatch.setattr(gpu, "_INV_W_TABLE", True)
    n = 1 << lg
    a, b, c = rand_fr(rng, n), rand_fr(rng, n), rand_fr(rng, n)
    assert_same(gpu.h_stage(a, b, c), cpu_h_ref(a, b, c), f"H 2^{lg} with the winv table")


@needs_cpu
@pytest.mark.parametrize("lg", [1, 5, 12])
def test_h_stage_c_from_ab(gpu, rng, lg):
    """H with c = a∘b taken from a and b (d_c is never read: it holds garbage here), enqueued in
    the two steps the early path uses ("a" while b uploads, then "rest"): the CPU's H of
    (a, b, a∘b)."""
    from cuzk._native import _field
    n = 1 << lg
    a, b = rand_fr(rng, n), rand_fr(rng, n)
    want = cpu_h_ref(a, b, _field.mul(a, b, "fr"))

    def run(st, comp, lg_n, bufs, h, events):
        comp.wait_event(events[2])      # the helper's c upload lands first (A~ goes into d_c)
        for step in ("a", "rest"):
            st.h_passes(comp, lg_n, bufs[0], bufs[1], bufs[2], h, events, c_from_ab=True, steps=(step,))
        return h

    st, comp, got = _h_through(gpu, rng, a, b, run)
    assert_same(got, want, f"H (c = a∘b) 2^{lg}")


@needs_cpu
@pytest.mark.parametrize("lg,deep,tile", [(1, False, None), (2, False, None), (5, False, None),
                                          (6, True, None), (12, False, None), (13, True, None),
                                          (12, True, 4), (15, True, 9)])
def test_h_stage_abc_three_buffers(gpu, monkeypatch, rng, lg, deep, tile):
    """H with c = a∘b in a, b, c's three buffers (``h_stage_abc``: in-place bit-reversals instead
    of gathers, h in a's buffer), steps "a" then "rest" as the stages enqueue them: the CPU's H of
    (a, b, a∘b), on full and deep tables; ``cuzk_fr_bitrev`` against a Python permutation."""
    from cuzk._native import _field
    if tile is not None:
        monkeypatch.setattr(gpu, "_TILE_LOG_ENV", str(tile))
    n = 1 << lg
    a, b = rand_fr(rng, n), rand_fr(rng, n)
    want = cpu_h_ref(a, b, _field.mul(a, b, "fr"))

    def run(st, comp, lg_n, bufs, h, events):
        comp.wait_event(events[2])      # the helper's c upload lands first (the stages upload none)
        for step in ("a", "rest"):
            gpu.h_stage_abc(bufs[0], bufs[1], bufs[2], n, stream=comp, steps=(step,),
                            ready=events[:2], deep=deep)
        return bufs[0]

    st, comp, got = _h_through(gpu, rng, a, b, run)
    assert_same(got, want, f"H in three buffers 2^{lg} deep={deep}")
    d = gpu._driver()
    buf = st.pool.alloc(n * 32, comp)
    d.copy_htod(buf, a, n * 32, comp)
    st._bitrev(comp, lg, buf)
    out = gpu._download(st, comp, buf, n)
    assert np.array_equal(out, a[bitrev_perm(lg)])


@needs_cpu
@pytest.mark.parametrize("lg,deep,tile", [(1, False, None), (2, False, None), (5, False, None),
                                          (6, True, None), (12, False, None), (13, True, None),
                                          (12, True, 4), (15, True, 9)])
def test_h_stage_ab_two_buffers(gpu, monkeypatch, rng, lg, deep, tile):
    """H with c = a∘b in a's and b's two buffers (``h_stage_ab``): steps "a", "b", with c copied
    into a's buffer as soon as step "b" calls ``a_spent`` (as the stages upload it: the emulator
    runs each launch as it is enqueued, so any later read of a's buffer would see c), then "c": the
    CPU's H of (a, b, a∘b), on full and deep tables, in b's buffer's company only (a third buffer
    is never touched)."""
    from cuzk._native import _field
    if tile is not None:
        monkeypatch.setattr(gpu, "_TILE_LOG_ENV", str(tile))
    n = 1 << lg
    a, b = rand_fr(rng, n), rand_fr(rng, n)
    c = _field.mul(a, b, "fr")
    want = cpu_h_ref(a, b, c)
    d = gpu._driver()

    def run(st, comp, lg_n, bufs, h, events):
        junk = rand_fr(rng, n)          # the third buffer: must not matter
        comp.wait_event(events[2])      # after the helper's c upload into it (session 30's race)
        d.copy_htod(bufs[2], junk, n * 32, comp)
        gpu.h_stage_ab(bufs[0], bufs[1], n, stream=comp, steps=("a",), ready=events, deep=deep)
        spent = []
        gpu.h_stage_ab(bufs[0], bufs[1], n, stream=comp, steps=("b",), ready=events, deep=deep,
                       a_spent=lambda: spent.append(d.copy_htod(bufs[0], c, n * 32, comp)))
        assert len(spent) == 1
        gpu.h_stage_ab(bufs[0], bufs[1], n, stream=comp, steps=("c",), deep=deep)
        assert np.array_equal(gpu._download(st, comp, bufs[2], n), junk)
        return bufs[0]

    st, comp, got = _h_through(gpu, rng, a, b, run)
    assert_same(got, want, f"H in two buffers 2^{lg} deep={deep}")
    with pytest.raises(ValueError, match="step"):
        st.h_passes_ab(comp, lg, 0, 0, "rest")


@pytest.mark.parametrize("lg", [1, 2, 3, 6, 9])
def test_w_inverse_twiddles_are_the_forward_ones_mirrored(gpu, lg):
    """The identity the H stage's last transform reads its twiddles by (F_MIRROR_INV, ntt.cuh
    ``mirror_node``): on the w-coset tables, 1/z[h] = −z[h ^ (2^l − 1)] for every node h >= 1,
    l = floor(log2 h).  Both tables as the table kernel builds them ("winv" only here), each
    against its formula in Python big ints (z[2^l + j] = w_2n^(2^(lg−1−l))·w_(2^(l+1))^bitrev_l(j))."""
    from cuzk._constants import fr_root_of_unity
    st = gpu._state(None)
    comp = st.streams()[0]
    n = 1 << lg
    tabs, rinv = {}, pow(1 << 256, -1, R)
    for kind in ("wfwd", "winv"):
        out = np.empty((n, 4), dtype=np.uint64)
        gpu._driver().copy_dtoh(out, st.table(lg, kind, comp), n * 32, comp)
        comp.synchronize()
        tabs[kind] = [v * rinv % R for v in from_arr(out)]    # out of Montgomery form
    g = fr_root_of_unity(lg + 1, gpu.COSET_GENERATOR)
    for h in range(1, n):
        lvl = h.bit_length() - 1
        jr = int(bitrev_perm(lvl)[h - (1 << lvl)])
        z = pow(g, 1 << (lg - 1 - lvl), R) * pow(g, 2 * jr * (1 << (lg - 1 - lvl)), R) % R
        assert tabs["wfwd"][h] == z, (lg, h)
        assert tabs["winv"][h] * z % R == 1, (lg, h)
        assert tabs["winv"][h] == (R - tabs["wfwd"][h ^ ((1 << lvl) - 1)]) % R, (lg, h)


DEEP_CASES = [(None, 6), (None, 9), (None, 11), (None, 12), (None, 14), (9, 15), (4, 12), (5, 13), (9, 19)]


@needs_cpu
@pytest.mark.parametrize("tile,lg", DEEP_CASES, ids=[f"tile{t or 'default'}-2^{g}" for t, g in DEEP_CASES])
def test_h_stage_deep_tables(gpu, monkeypatch, rng, tile, lg):
    """The H stage on deep tables (F_DEEP: the round over bits 0..2 computes its twiddles from
    deep_base, mirrored in the last transform) == the CPU, as the full-table run of the same
    inputs is; the winv-table variant too (deep, unmirrored); snarkjs's H on deep tables."""
    from cuzk._native import _sparse
    if tile is not None:
        monkeypatch.setattr(gpu, "_TILE_LOG_ENV", str(tile))
    n = 1 << lg
    a, b, c = rand_fr(rng, n), rand_fr(rng, n), rand_fr(rng, n)
    want = cpu_h_ref(a, b, c)
    assert gpu.h_deep(lg) == (gpu.pass_plan(lg)[-1][0] >= 3) and not gpu.h_deep(lg, False)
    what = f"H 2^{lg} deep={gpu.h_deep(lg)}, plan {gpu.pass_plan(lg)}"
    assert_same(gpu.h_stage(a, b, c, deep=True), want, what)
    assert_same(gpu.h_stage(a, b, c), want, f"H 2^{lg} full tables")
    monkeypatch.setattr(gpu, "_INV_W_TABLE", True)
    assert_same(gpu.h_stage(a, b, c, deep=True), want, what + " with the winv table")
    monkeypatch.setattr(gpu, "_INV_W_TABLE", False)
    if lg <= 13:
        from cuzk._snarkjs_prover import ROOT_EXPONENT
        want = _sparse.snarkjs_h(a.copy(), b.copy(), c.copy(), ROOT_EXPONENT, threads=2)
        assert_same(gpu.snarkjs_h(a, b, c, ROOT_EXPONENT, deep=True), want, "snarkjs " + what)


@pytest.mark.parametrize("lg", [6, 7, 10])
@pytest.mark.parametrize("kind", ["inv", "wfwd", "winv", "cfwd"])
def test_deep_table_layout(gpu, lg, kind):
    """A deep table holds the full table's first n/8 entries, then w8^2, w8, w8^3 (w8 = w^(n/8)),
    a zero row, g·w^i (i < 2^lg_lo) and w^(i·2^lg_lo), in Python big ints from the full table:
    w^(2^(lg-1-l)·bitrev_l(j)) = Z[2^l + j] / Z at the level's first node, g = the deepest level's
    first entry."""
    st = gpu._state(None)
    comp = st.streams()[0]
    rinv = pow(1 << 256, -1, R)

    def read(deep):
        nbytes = gpu.table_bytes(lg, deep)
        out = np.empty((nbytes // 32, 4), dtype=np.uint64)
        gpu._driver().copy_dtoh(out, st.table(lg, kind, comp, deep), nbytes, comp)
        comp.synchronize()
        return [v * rinv % R for v in from_arr(out)]

    full, deep = read(False), read(True)
    count, lg_lo, lg_hi, total = gpu._deep_layout(lg)
    assert len(deep) == total and count == 1 << (lg - 3)
    assert deep[:count] == full[:count]
    n = 1 << lg
    g = full[n >> 1]                                  # Z[n/2] = g·w^0 (deepest level, j = 0)
    w = full[(n >> 1) + (n >> 2)] * pow(g, -1, R) % R  # j = n/4: bitrev = 1 -> w^1
    assert pow(w, n, R) == 1 and pow(w, n >> 1, R) != 1
    w8 = pow(w, n >> 3, R)
    tail = deep[count:]
    assert tail[:4] == [w8 * w8 % R, w8, pow(w8, 3, R), 0]
    assert tail[4:4 + (1 << lg_lo)] == [g * pow(w, i, R) % R for i in range(1 << lg_lo)]
    assert tail[4 + (1 << lg_lo):] == [pow(w, i << lg_lo, R) for i in range(1 << lg_hi)]
    assert gpu.table_bytes(lg, True) < gpu.table_bytes(lg, False) // 4 + 64 * 32


def test_h_tables_bytes_at_2_27():
    """The H stage's tables at 2^27: 8 GiB full; deep an eighth of that and a 256 KiB tail."""
    from cuzk import _cuda_ntt as ntt
    assert ntt.h_deep(27) and not ntt.h_deep(27, False) and not ntt.h_deep(5)
    assert ntt.h_tables_bytes(27) == 8 << 30
    assert ntt.h_tables_bytes(27, True) == 2 * ((1 << 24) + 4 + (1 << 12) * 2) * 32


SNARKJS_H_CASES = [(None, 1), (None, 2), (None, 5), (None, 12), (4, 12), (9, 15)]


@needs_cpu
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_h_stage_reordered(gpu, fake, rng, seed):
    """bellperson's and snarkjs's H with the emulated streams run out of order
    (``FakeDriver.reordered``): a, b, c go through pinned staging on the upload stream, the
    passes run on the compute stream after the uploads' events, and the staging is released
    only after the upload stream is done: the CPU's H either way."""
    from cuzk._native import _sparse
    from cuzk._snarkjs_prover import ROOT_EXPONENT
    n = 1 << (5, 9, 12)[seed - 1]
    a, b, c = rand_fr(rng, n), rand_fr(rng, n), rand_fr(rng, n)
    want_s = _sparse.snarkjs_h(a.copy(), b.copy(), c.copy(), ROOT_EXPONENT, threads=2)
    with fake.reordered(seed, p=(0.02, 0.1, 0.3)[seed % 3]) as order:
        got = gpu.h_stage(a, b, c)
        got_s = gpu.snarkjs_h(a, b, c, ROOT_EXPONENT)
    assert order.out_of_order > 0
    assert_same(got, cpu_h_ref(a, b, c), f"H 2^{n.bit_length() - 1} reordered")
    assert_same(got_s, want_s, f"snarkjs H 2^{n.bit_length() - 1} reordered")


@needs_cpu
@pytest.mark.parametrize("tile,lg", SNARKJS_H_CASES,
                         ids=[f"tile{t or 'default'}-2^{g}" for t, g in SNARKJS_H_CASES])
def test_snarkjs_h_matches_cpu(gpu, monkeypatch, rng, tile, lg):
    """snarkjs's H scalars (coset w_2n, odd-point gather) == the CPU's _sparse.snarkjs_h."""
    from cuzk._native import _sparse
    from cuzk._snarkjs_prover import ROOT_EXPONENT
    if tile is not None:
        monkeypatch.setattr(gpu, "_TILE_LOG_ENV", str(tile))
    n = 1 << lg
    a, b, c = rand_fr(rng, n), rand_fr(rng, n), rand_fr(rng, n)
    want = _sparse.snarkjs_h(a.copy(), b.copy(), c.copy(), ROOT_EXPONENT, threads=2)
    keep = a.copy(), b.copy(), c.copy()
    got = gpu.snarkjs_h(a, b, c, ROOT_EXPONENT)
    assert_same(got, want, f"snarkjs H 2^{lg} plan {gpu.pass_plan(lg)}")
    assert all(np.array_equal(x, y) for x, y in zip((a, b, c), keep)), "inputs must not be modified"


# --------------------------------------------------------------------------- G1/G2 MSM

# tests/test_cu_emu_msm.py (the same emulator fixtures)


# --------------------------------------------------------------------------- whole proof

def _install_stages(fake, monkeypatch):
    for m in ("cuzk._cuda_ntt", "cuzk._cuda_msm", "cuzk._cuda_batch", "cuzk._stages._cuda"):
        fake.install(monkeypatch, None, m)
    import cuzk._cuda_state as cs
    import cuzk._stages._cuda as sc
    monkeypatch.setattr(cs, "_pools", {})
    monkeypatch.setattr(sc, "_budgets", {})
    monkeypatch.setattr(sc, "_context_bytes", {})
    monkeypatch.setattr(sc, "_local_holds", {})


@pytest.mark.parametrize("b_g2,precompute", [("gpu", 1), ("cpu", 1), ("gpu", 3)])
def test_cuda_stages_proof_equals_cpu(fake, monkeypatch, b_g2, precompute):
    """A Groth16 proof through CudaStages (resident key; H, H MSM, batch additions and tail MSMs
    enqueued on the emulated GPU; B_G2 on the GPU or the CPU) has the CPU backend's bytes and
    verifies; the device budget returns to zero and the pool holds nothing afterwards."""
    from cuzk._circuit import porep_like
    from cuzk._keygen import keygen_random
    from cuzk._prover import prove, public_inputs
    from cuzk._stages._cuda import CudaStages, device_budget
    from cuzk._verifier import verify
    _install_stages(fake, monkeypatch)
    r1cs, inputs, aux = porep_like(8, 4)
    pk = keygen_random(r1cs, seed=4)
    asg = r1cs.assignment(inputs, aux)
    cpu = prove(pk, asg, r=111, s=222, backend="cpu")
    st = CudaStages(threads=2, b_g2=b_g2, precompute=precompute)
    t = {}
    gpu = prove(pk, asg, r=111, s=222, stages=st, timings=t, verify=True)
    assert gpu == cpu
    assert verify(pk.vk, gpu, public_inputs(asg))
    assert t["backend"] == "cuda" and t["device"].startswith("cuda:0")
    assert t["gpu:region"] >= 0 and ("b_g2" in t) == (b_g2 == "cpu")
    assert device_budget(st.device).used == 0
    assert st.pool.used_bytes == 0 if hasattr(st.pool, "used_bytes") else True
    # the resident key holds H once: copy 0 of the precomputed table is the H query itself
    key = st.load_key(pk)
    try:
        h, rest = pk.h.nbytes, sum(getattr(pk, a).nbytes for a in ("l", "a", "b_g1", "b_g2"))
        assert key.precompute_bytes == (precompute - 1) * h
        assert key.nbytes == rest + h + key.precompute_bytes + 2 * pk.domain_size * 32 + 4096  # inv, wfwd
        assert ("h" in key._bufs) == (precompute == 1)
    finally:
        key.release()


def test_cuda_stages_upload_waits_for_its_bytes_and_counts_them(fake, monkeypatch):
    """``upload`` (no early path) waits in the budget while another holder keeps the partition's
    bytes, and goes on when they are released (it must not raise ``BudgetError``: the engine's
    workers take turns that way); ``part.bytes_uploaded`` is every byte put through the worker's
    pinned ring; the proof is the CPU's and the budget returns to the key alone."""
    from cuzk._budget import Budget
    from cuzk._circuit import porep_like
    from cuzk._keygen import keygen_random
    from cuzk._prover import prove
    import cuzk._stages._cuda as sc
    _install_stages(fake, monkeypatch)
    r1cs, inputs, aux = porep_like(7, 5)
    pk = keygen_random(r1cs, seed=5)
    asg = r1cs.assignment(inputs, aux)
    put_bytes = []
    real_put = sc._Ring.put

    def put(self, dst_ptr, src, nbytes, *a, **kw):
        put_bytes.append(nbytes)
        return real_put(self, dst_ptr, src, nbytes, *a, **kw)
    monkeypatch.setattr(sc._Ring, "put", put)
    st = sc.CudaStages(threads=2, b_g2="gpu", precompute=1, early_h=False)
    big = Budget(None, "big")
    key = st.load_key(pk, budget=big, where="device")
    ctx = st.context(budget=big)
    put_bytes.clear()                                        # the key's own uploads
    before = big.used
    part = st.prepare(key, asg, ctx, 9, 10)
    need = big.used - key.nbytes
    assert need > 0 and part.bytes_uploaded == sum(put_bytes) > 0
    # one reservation: the uploads, H's output, the plans' scratch peak (nothing more)
    uploads = st._abc_uploads(part) + st._prep_uploads(part.prep)
    assert part.hbuf == 4 and len(part.reservations) == 1
    assert big.used - before == (sum(sc._align(nb) for _, _, nb in uploads) + part.n * 32
                                 + st._scratch_peak(part))
    st.run(part).synchronize()
    want = st.finish(part)
    assert want == prove(pk, asg, 9, 10, backend="cpu") and big.used == key.nbytes
    ctx.close()
    key.release()

    tight = Budget(None, "tight")
    key = st.load_key(pk, budget=tight, where="device")
    tight.total = key.nbytes + need
    ctx = st.context(budget=tight)
    other = tight.reserve(1, "another worker's partition")
    timer = threading.Timer(0.3, other.release)
    t0 = time.perf_counter()
    timer.start()
    try:
        part = st.prepare(key, asg, ctx, 9, 10)
    finally:
        timer.join()
    assert time.perf_counter() - t0 >= 0.25
    st.run(part).synchronize()
    assert st.finish(part) == want and tight.used == key.nbytes
    ctx.close()
    key.release()
    assert tight.used == 0


@pytest.mark.parametrize("share_sort,streams,side_scratch",
                         [(True, 2, True), (True, 1, True), (False, 2, True), (True, 2, False)])
def test_cuda_stages_b_g2_tail_takes_b_g1_sort(fake, monkeypatch, share_sort, streams, side_scratch):
    """``share_sort``: the B_G2 tail MSM takes the B_G1 tail's sort (``SortShare``) on either
    stream layout, the proof keeps the CPU's bytes; ``share_sort=0`` sorts twice.
    ``side_scratch``: the tail MSMs take their scratch from the rest of a, b, c's buffer, on the
    side stream only after the H NTT's event.  Either way the pool bytes the reductions after H's
    hold at once (measured) are what the partition's reservation counts for them (``_pool_peaks``
    in ``_scratch_peak``), and nothing is left in the pool or the budget."""
    import cuzk._cuda_msm as M
    from cuzk._circuit import porep_like
    from cuzk._keygen import keygen_random
    from cuzk._prover import prove
    from cuzk._stages._cuda import (CudaStages, _abc_left, _abc_room, _h_scratch_beyond_abc,
                                    _pool_peaks, device_budget)
    from test_cu_emu_msm import _SpyPool
    _install_stages(fake, monkeypatch)
    r1cs, inputs, aux = porep_like(8, 4)
    pk = keygen_random(r1cs, seed=4)
    asg = r1cs.assignment(inputs, aux)
    cpu = prove(pk, asg, r=11, s=22, backend="cpu")
    st = CudaStages(threads=2, b_g2="gpu", share_sort=share_sort, streams=streams,
                    side_scratch=side_scratch)
    calls, seen = [], {}
    real_msm, real_red = M.enqueue_msm, CudaStages._enqueue_reductions

    def spy(plan, stream, pool, *a, keep_sort=None, sorted_from=None, **kw):
        calls.append((plan.group, keep_sort is not None, sorted_from is not None, type(pool).__name__))
        return real_msm(plan, stream, pool, *a, keep_sort=keep_sort, sorted_from=sorted_from, **kw)

    def reductions(self, part, bases, start, stop, s, marks):
        if start == 0:
            return real_red(self, part, bases, start, stop, s, marks)
        pool, self.pool = self.pool, _SpyPool(self.pool)
        self.pool.step()
        try:
            return real_red(self, part, bases, start, stop, s, marks)
        finally:
            seen.update(part=part, peak=self.pool.peaks[0], room=self._side_room(part), side=s)
            self.pool = pool

    monkeypatch.setattr(M, "enqueue_msm", spy)
    monkeypatch.setattr(CudaStages, "_enqueue_reductions", reductions)
    assert prove(pk, asg, r=11, s=22, stages=st, verify=True) == cpu
    tails = [c[:3] for c in calls if c[1] or c[2]]
    assert tails == ([("g1", True, False), ("g2", False, True)] if share_sort else [])
    part = seen["part"]
    pair = st._sort_share(part.plans)
    assert (pair is not None) == share_sort
    rest = _pool_peaks(part.plans[1:], seen["room"], pair and (pair[0] - 1, pair[1] - 1))
    assert seen["peak"] == max(rest)
    # the partition's scratch: H's MSM beyond a, b, c's buffer, beside the others' peak on the
    # side stream, else the larger of the two
    head = _h_scratch_beyond_abc(part.plans[0][2], part.n, True, _abc_room(part.n, part.hbuf))
    assert part.plans[0][0] == "h" and part.scratch_reserved == st._scratch_peak(part)
    assert st._scratch_peak(part) == (head + max(rest) if streams == 2 else max(head, max(rest)))
    pools = {c[3] for c in calls if c[0] and (c[1] or c[2] or c[0] == "g2")}
    if side_scratch:
        assert seen["room"] > 0 and pools == {"_Arena"}
        no_room = _pool_peaks(part.plans[1:], 0, pair and (pair[0] - 1, pair[1] - 1))
        assert max(rest) < max(no_room)                 # the arena took some of it
        if streams == 2:            # the side stream waits for the H NTT before its first tail MSM
            assert any(sw is seen["side"] and ev is part.h_ntt for sw, ev in fake.waits)
            # and takes only what H's MSM (running beside it) leaves of a, b, c's buffer
            assert seen["room"] == _abc_left(part.plans[0][2], part.n) < _abc_room(part.n, part.hbuf)
        else:
            assert seen["room"] == _abc_room(part.n, part.hbuf)     # H's MSM is done by then
    else:
        assert seen["room"] == 0 and "_Arena" not in pools
    assert device_budget(st.device).used == 0


def test_streamed_keys_of_one_pk_share_its_page_lock(fake, monkeypatch):
    """Two streamed keys of the same ProvingKey at once (a ``cuzk.Prover`` beside an engine, two
    one-call ``cuzk.prove``s, one key per device) share the page-lock of its arrays, which the
    driver would refuse to register twice; the last release unregisters them, and either key
    proves with the CPU's bytes while the other is gone.  A registration the driver refuses
    (a range someone else page-locked) fails the load with its error and leaves nothing
    reserved or page-locked."""
    import cuzk._stages._cuda as sc
    from cuzk._budget import Budget
    from cuzk._circuit import porep_like
    from cuzk._errors import CudaError
    from cuzk._keygen import keygen_random
    from cuzk._prover import prove
    from cuzk._stages._cuda import CudaStages
    _install_stages(fake, monkeypatch)
    monkeypatch.setattr(sc, "_pins", {})
    monkeypatch.setattr(fake, "registered", {})       # this test's page-locks only
    r1cs, inputs, aux = porep_like(6, 13)
    pk = keygen_random(r1cs, seed=13)
    asg = r1cs.assignment(inputs, aux)
    st = CudaStages(threads=1, b_g2="gpu", key_where="host")
    budget = Budget(None, "pins")
    ctx = st.context(budget=budget)
    queries = sum(1 for q in sc.QUERIES if getattr(pk, sc.QUERIES[q][0]).size)
    keys = []
    try:                                            # a failure here leaves no page-lock behind
        keys += [st.load_key(pk, budget=budget), st.load_key(pk, budget=budget)]
        k1, k2 = keys
        assert len(fake.registered) == len(sc._pins) == queries
        assert all(k1.host_ptr(q) == k2.host_ptr(q) for q in sc.QUERIES)
        k1.release()
        assert len(fake.registered) == queries      # k2 still streams from them
        assert st.prove_one(k2, asg, ctx, 7, 8)[0] == prove(pk, asg, 7, 8, backend="cpu")
    finally:
        for k in keys:
            k.release()
    assert not fake.registered and not sc._pins and budget.used == 0
    outside = fake.register_host(pk.b_g1)           # page-locked by someone else
    try:
        with pytest.raises(CudaError) as e:
            st.load_key(pk, budget=budget)
        assert e.value.code == 712
        assert list(fake.registered.values()) == [(pk.b_g1.ctypes.data,
                                                   pk.b_g1.ctypes.data + pk.b_g1.nbytes)]
        assert not sc._pins and budget.used == 0
    finally:
        outside.close()
    ctx.close()


def test_cuda_stages_streamed_key_equals_cpu(fake, monkeypatch):
    """A key that does not fit the device budget stays in host memory and is streamed per
    partition through the key's device slots: same bytes as the CPU; the budget returns to zero.
    "auto" also streams a key that fits where no partition fits beside it (a 2^27 key in 60 GiB:
    52 GiB resident, ~19 per partition), and keeps it resident with one partition's room."""
    from cuzk._budget import Budget
    from cuzk._circuit import porep_like
    from cuzk._keygen import keygen_random
    from cuzk._prover import prove
    from cuzk._stages._cuda import (CudaStages, ResidentKey, StreamedKey, _key_device_bytes,
                                    partition_bytes)
    _install_stages(fake, monkeypatch)
    r1cs, inputs, aux = porep_like(7, 5)
    pk = keygen_random(r1cs, seed=5)
    asg = r1cs.assignment(inputs, aux)
    st = CudaStages(threads=2, b_g2="gpu", precompute=1)
    probe = st.load_key(pk, budget=Budget(None, "probe"), where="host")
    streamed = probe.nbytes                      # its tables and slots, reserved for good
    probe.release()
    resident = _key_device_bytes(pk)
    assert resident > sum(int(getattr(pk, q).nbytes) for q in ("h", "l", "a", "b_g1", "b_g2"))
    small = Budget(max(streamed, resident - 1), "small")     # the key + its tables cannot fit
    key = st.load_key(pk, budget=small)
    assert isinstance(key, StreamedKey) and key.where == "host" and small.used == key.nbytes
    key.release()
    assert small.used == 0
    room = resident + partition_bytes(pk.domain_size)
    assert streamed <= room - 1
    for total, kind in ((room - 1, StreamedKey), (room, ResidentKey)):
        budget = Budget(total, "fits")
        key = st.load_key(pk, budget=budget)
        assert type(key) is kind and budget.used == key.nbytes
        key.release()
        assert budget.used == 0
    budget = Budget(room - 1, "forced")
    key = st.load_key(pk, budget=budget, where="device")      # asked for: resident all the same
    assert type(key) is ResidentKey
    key.release()
    key = CudaStages(threads=2, b_g2="gpu", precompute=1, key_where="host").load_key(pk, budget=budget)
    assert type(key) is StreamedKey                          # the stage option
    key.release()
    with pytest.raises(ValueError):
        CudaStages(threads=1, key_where="gpu")
    budget = Budget(None, "big")                 # (a tiny partition's MSM scratch exceeds its key)
    ctx = st.context(budget=budget)
    key = st.load_key(pk, budget=budget, where="host")
    assert isinstance(key, StreamedKey)
    part = st.prepare(key, asg, ctx, 9, 10)
    done = st.run(part)
    done.synchronize()
    assert done.query() is True                 # the region's end event, complete
    assert st.finish(part) == prove(pk, asg, 9, 10, backend="cpu")
    key.release()
    ctx.close()
    assert budget.used == 0


@pytest.mark.parametrize("h_tables", ["auto", "full", "deep"])
def test_cuda_stages_h_tables_option(fake, monkeypatch, h_tables):
    """The stage option ``h_tables``: "auto" gives a streamed key deep tables and a resident one
    full tables, "full"/"deep" both; each key reserves its tables' bytes, proves the CPU's bytes,
    and the budget returns to zero."""
    from cuzk._budget import Budget
    from cuzk._circuit import porep_like
    from cuzk._keygen import keygen_random
    from cuzk._prover import prove
    from cuzk._stages import parse_stage_options
    from cuzk._stages._cuda import CudaStages, _align, _key_device_bytes, _tables_bytes
    assert parse_stage_options(f"h_tables={h_tables}") == {"h_tables": h_tables}
    _install_stages(fake, monkeypatch)
    r1cs, inputs, aux = porep_like(7, 5)
    pk = keygen_random(r1cs, seed=5)
    asg = r1cs.assignment(inputs, aux)
    assert pk.domain_size >= 64                 # deep tables need 2^6 (a whole 3-bit bottom round)
    st = CudaStages(threads=2, b_g2="gpu", precompute=1, h_tables=h_tables)
    want = prove(pk, asg, 9, 10, backend="cpu")
    from cuzk import _cuda_ntt
    seen, h_stage_inplace = [], _cuda_ntt.h_stage_inplace

    def spy(*args, **kw):                       # the partition's H runs on the key's tables
        seen.append(kw.get("deep"))
        return h_stage_inplace(*args, **kw)
    monkeypatch.setattr(_cuda_ntt, "h_stage_inplace", spy)
    for where in ("device", "host"):
        budget = Budget(None, "big")
        ctx = st.context(budget=budget)
        key = st.load_key(pk, budget=budget, where=where)
        deep = h_tables == "deep" or (h_tables == "auto" and where == "host")
        assert key.deep_tables is deep, (where, h_tables)
        tables = _tables_bytes(pk.domain_size, deep)
        assert tables != _tables_bytes(pk.domain_size, not deep)
        if where == "device":
            assert key.nbytes == _key_device_bytes(pk, deep)
        else:
            assert key.nbytes == tables + key.slots * _align(key.slot_bytes)
        seen.clear()
        part = st.prepare(key, asg, ctx, 9, 10)
        st.run(part).synchronize()
        assert st.finish(part) == want, (where, h_tables)
        assert seen and set(seen) == {deep}, seen
        key.release()
        ctx.close()
        assert budget.used == 0
    with pytest.raises(ValueError):
        CudaStages(threads=1, h_tables="half")


@pytest.mark.parametrize("deep", [False, True])
def test_cuda_stages_h_buffers(fake, monkeypatch, deep):
    """Stage option ``h_buffers``: a streamed key's partitions compute H in a, b, c's three buffers
    (3: ``h_stage_abc``) or in a's and b's two (2: ``h_stage_ab``, c uploaded into a's region once
    step "b" is enqueued, the compute stream waiting for that upload), h in a's region at the
    bottom, their MSMs' scratch above it: the CPU's bytes, twice each (chunked key, deep and full
    tables), a partition reserving n (3) or 2·n (2) field elements less than with 4, as
    ``partition_bytes`` counts; a resident key's partitions keep four buffers; the budget returns
    to zero; c is the only extra upload (n·32 bytes)."""
    from cuzk._budget import Budget
    from cuzk._circuit import porep_like
    from cuzk._keygen import keygen_random
    from cuzk._prover import prove
    from cuzk._stages._cuda import CudaStages, _abc_elems, partition_bytes
    from cuzk import _cuda_ntt
    _install_stages(fake, monkeypatch)
    monkeypatch.setattr(_cuda_ntt, "_TILE_LOG_ENV", "4")    # transforms of several passes
    r1cs, inputs, aux = porep_like(8, 12)
    pk = keygen_random(r1cs, seed=12)
    asg = r1cs.assignment(inputs, aux)
    n = pk.domain_size
    for hbuf in (3, 2):
        assert partition_bytes(n, 0, hbuf) == partition_bytes(n, 0) - (4 - hbuf) * n * 32
    calls, spent_at, ready_c = [], [], []
    for name in ("h_stage_abc", "h_stage_ab", "h_stage_inplace"):
        def spy(*args, _f=getattr(_cuda_ntt, name), _name=name, **kw):
            calls.append((_name, kw.get("steps")))
            if kw.get("steps") == ("c",):
                ready_c.append(kw["ready"][2])
            if kw.get("steps") == ("b",):    # the launches of step "b", and where A~ was last read
                lo, a_ptr = len(fake.launches), args[0].ptr
                out = _f(*args, **kw)
                reads = [i for i in range(lo, len(fake.launches)) if a_ptr in fake.launches[i][4]]
                spent_at.append(reads[-1] + 1)
                return out
            return _f(*args, **kw)
        monkeypatch.setattr(_cuda_ntt, name, spy)
    reserved, uploaded = {}, {}
    for hbuf in (4, 3, 2):
        st = CudaStages(threads=1, b_g2="gpu", stream_chunk=64 * 192, h_buffers=hbuf,
                        h_tables="deep" if deep else "full")
        for where in ("host", "device"):
            budget = Budget(None, "big")
            ctx = st.context(budget=budget)
            key = st.load_key(pk, budget=budget, where=where)
            used = hbuf if where == "host" else 4
            assert key.h_buffers == used
            for i in range(2):
                calls.clear()
                part = st.prepare(key, asg, ctx, 21 + i, 22)
                if i == 0:
                    reserved[(hbuf, where)] = budget.used - key.nbytes
                assert part.hbuf == used and (part.dev["h"] is part.dev["a"]) == (used < 4)
                assert ("c" in part.dev) == (used > 2)
                assert part.dev["abc"].nbytes == _abc_elems(used) * n * 32
                st.run(part).synchronize()
                uploaded[(hbuf, where)] = part.bytes_uploaded
                want = {4: [("h_stage_inplace", ("a",)), ("h_stage_inplace", ("rest",))],
                        3: [("h_stage_inplace", ("a",)), ("h_stage_abc", ("rest",))],
                        2: [("h_stage_ab", ("a",)), ("h_stage_ab", ("b",)), ("h_stage_ab", ("c",))]}
                assert calls == want[used], (hbuf, where)
                if used == 2:   # c's upload (on the side stream, not behind the slot fills)
                    # after step "b"'s last read of a's buffer on the compute stream (the product,
                    # not the whole step); step "c" after it
                    assert any(sw is ctx.side and ev.recorded == (ctx.compute, spent_at[-1])
                               for sw, ev in fake.waits)
                    assert ready_c[-1].recorded[0] is ctx.side
                assert st.finish(part) == prove(pk, asg, 21 + i, 22, backend="cpu"), (hbuf, where, i)
            key.release()
            ctx.close()
            assert budget.used == 0
    # (at this toy size the MSMs' scratch outgrows the room above h, which the reservation counts)
    assert reserved[(3, "host")] <= reserved[(4, "host")] - n * 32 + 1024
    assert reserved[(2, "host")] < reserved[(3, "host")]
    for hbuf in (3, 2):
        assert reserved[(hbuf, "device")] == reserved[(4, "device")]
    assert uploaded[(2, "host")] == uploaded[(4, "host")] + n * 32
    assert uploaded[(3, "host")] == uploaded[(4, "host")]


@pytest.mark.parametrize("mode", ["register", "ring", "refused"])
def test_cuda_stages_c_upload(fake, monkeypatch, caplog, mode):
    """Stage option ``c_upload`` (two H buffers, c uploaded inside the region): "register"
    page-locks c in place in ``prepare`` (``_HostPin``) and the region copies it by one DMA
    from c's own address on the side stream (the zero rows up to n by a memset), nothing of c
    through the ring; "ring" (the default) stages it through the worker's pinned ring; a refused
    registration ("refused": the driver's CudaError) falls back to the ring, said once.  The
    CPU's bytes every time; two partitions of the same c share one registration, and every
    registration is gone once both finish."""
    from cuzk._budget import Budget
    from cuzk._circuit import porep_like
    from cuzk._errors import CudaError
    from cuzk._keygen import keygen_random
    from cuzk._prover import prove
    from cuzk._stages._cuda import CudaStages
    import cuzk._stages._cuda as sc
    _install_stages(fake, monkeypatch)
    monkeypatch.setattr(sc, "_pin_refused", [])
    monkeypatch.setattr(fake, "registered", {})       # this test's page-locks only
    r1cs, inputs, aux = porep_like(8, 12)
    pk = keygen_random(r1cs, seed=12)
    asg = r1cs.assignment(inputs, aux)
    n = pk.domain_size
    assert asg.c.shape[0] < n           # zero rows to pad on the device
    c_addr = asg.c.ctypes.data
    regs, copies, memsets, puts = [], [], [], []
    real_reg, real_copy, real_set = fake.register_host, fake.copy_htod, fake.memset_d8

    def register_host(obj, device=None):
        if np.asarray(obj).ctypes.data != c_addr:       # the streamed key's queries
            return real_reg(obj, device)
        if mode == "refused":
            raise CudaError("cuMemHostRegister", 712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED")
        reg = real_reg(obj, device)
        regs.append(reg)
        return reg

    def copy_htod(dst, src, nbytes, stream):
        if isinstance(src, int) and src == c_addr:
            copies.append((stream, nbytes))
        return real_copy(dst, src, nbytes, stream)

    def memset_d8(ptr, value, nbytes, stream):
        memsets.append((stream, nbytes))
        return real_set(ptr, value, nbytes, stream)
    monkeypatch.setattr(fake, "register_host", register_host)
    monkeypatch.setattr(fake, "copy_htod", copy_htod)
    monkeypatch.setattr(fake, "memset_d8", memset_d8)
    st = CudaStages(threads=1, b_g2="gpu", stream_chunk=64 * 192, h_buffers=2,
                    **({} if mode == "ring" else {"c_upload": "register"}))
    assert st.c_upload == ("ring" if mode == "ring" else "register")       # "ring": the default
    budget = Budget(None, "big")
    ctx = st.context(budget=budget)
    real_put = ctx.staging.put
    monkeypatch.setattr(ctx.staging, "put", lambda dst, src, *a, **kw: (
        puts.append(np.asarray(src).ctypes.data), real_put(dst, src, *a, **kw))[1])
    key = st.load_key(pk, budget=budget, where="host")
    assert key.h_buffers == 2
    caplog.set_level("INFO", logger="cuzk.stages")
    parts = [st.prepare(key, asg, ctx, 31 + i, 32) for i in range(2)]   # both hold c's pin
    c_pins = lambda: [k for k in sc._pins if k[0] == c_addr]          # noqa: E731 (the key's too)
    if mode == "register":
        assert len(regs) == 1 and len(c_pins()) == 1        # shared by the two partitions
        assert all(p.c_pin.ptr == c_addr for p in parts) and "pin_c" in parts[0].timings
    else:
        assert not regs and not c_pins() and all(getattr(p, "c_pin", None) is None for p in parts)
    for i, part in enumerate(parts):
        st.run(part).synchronize()
        assert st.finish(part) == prove(pk, asg, 31 + i, 32, backend="cpu"), (mode, i)
    if mode == "register":      # one DMA from c itself per partition, the rest zeroed, no ring
        assert copies == [(ctx.side, asg.c.nbytes)] * 2
        assert (ctx.side, n * 32 - asg.c.nbytes) in memsets
        assert c_addr not in puts
    else:
        assert not copies and puts.count(c_addr) == 2
    assert not c_pins() and budget.used == key.nbytes
    assert all(r._obj is None for r in regs)            # unregistered
    said = [r for r in caplog.records if "refused" in r.getMessage()]
    assert len(said) == (1 if mode == "refused" else 0)
    key.release()
    assert not sc._pins and not fake.registered         # the key's queries too
    ctx.close()
    with pytest.raises(ValueError):
        CudaStages(threads=1, c_upload="copy")


def test_host_pin_shared_by_threads(monkeypatch):
    """``_HostPin``: threads that pin and release the same array concurrently share one
    registration (the driver refuses a second registration of a range, as cuMemHostRegister
    does), it is unregistered once its last user releases it, and a release twice is a no-op."""
    import threading
    import cuzk._stages._cuda as sc
    from cuzk._errors import CudaError
    live, counts, lock = set(), {"reg": 0, "unreg": 0}, threading.Lock()

    class Reg:
        def __init__(self, obj):
            a = np.asarray(obj)
            self.key = (a.ctypes.data, a.nbytes)
            with lock:
                if self.key in live:
                    raise CudaError("cuMemHostRegister", 712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED")
                live.add(self.key)
                counts["reg"] += 1

        def close(self):
            with lock:
                live.remove(self.key)
                counts["unreg"] += 1

    class Stub:
        @staticmethod
        def register_host(obj, device=None):
            return Reg(obj)
    monkeypatch.setattr(sc, "_driver", lambda: Stub)
    monkeypatch.setattr(sc, "_pins", {})
    monkeypatch.setattr(sc, "_pin_refused", [])
    arrs = [np.ones((1000, 4), np.uint64) for _ in range(2)]
    p1, p2 = (sc._HostPin.pin(arrs[0], None) for _ in range(2))
    assert counts["reg"] == 1 and p1.ptr == p2.ptr == arrs[0].ctypes.data
    p1.release()
    assert len(live) == 1                   # p2 still reads it
    p2.release()
    assert not live and counts["unreg"] == 1
    bad = []

    def work(k):
        try:
            for i in range(200):
                held = [sc._HostPin.pin(arrs[(k + i) % 2], None) for _ in range(2)]
                if any(p is None or p.ptr != arrs[(k + i) % 2].ctypes.data for p in held):
                    bad.append((k, i))
                    continue
                for p in held:
                    p.release()
                    p.release()
        except Exception as e:              # a thread's failure fails the test
            bad.append(e)
    ths = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    assert not bad and not sc._pin_refused
    assert not sc._pins and not live and counts["reg"] == counts["unreg"] >= 2
    assert sc._HostPin.pin(np.ones((0, 4), np.uint64), None) is None      # nothing to pin


def test_cuda_stages_h_buffers_auto(fake, monkeypatch, caplog):
    """``h_buffers="auto"`` (the default): a streamed key's partitions take 3 buffers where the
    key's tables, its slots at their floor (here the forced ``stream_chunk``) and one partition
    (``partition_bytes``) fit what the budget leaves, 4 only where four buffers still leave each
    slot ``STREAM_CHUNK_MAX``, 2 only where three do not fit one partition (and a warning at load
    where two do not either); asked for two partitions in flight, the buffers that keep two
    (slots of ``STREAM_CHUNK_SHARED``; 3, else 2) before those for one; 4 without a budget, and 4
    whatever the budget without ``abc_scratch``; a resident key 4."""
    from cuzk._budget import Budget
    from cuzk._circuit import porep_like
    from cuzk._keygen import keygen_random
    from cuzk._stages._cuda import (STREAM_CHUNK_MAX, STREAM_SLOTS, CudaStages, _abc_room, _align,
                                    _tables_bytes, partition_bytes)
    from cuzk import _cuda_ntt
    _install_stages(fake, monkeypatch)
    r1cs, inputs, aux = porep_like(8, 12)
    pk = keygen_random(r1cs, seed=12)
    n, lg = pk.domain_size, pk.domain_size.bit_length() - 1
    chunk = 64 * 192
    tables = _tables_bytes(n, _cuda_ntt.h_deep(lg, True))
    key_bytes = tables + STREAM_SLOTS * _align(chunk)

    def parts(p, hbuf):
        return p * partition_bytes(n, _abc_room(n, hbuf), hbuf)

    def floor(hbuf):        # the least budget in which one partition with hbuf buffers fits
        return key_bytes + parts(1, hbuf)

    def roomy(p):           # the least budget in which four buffers leave slots of STREAM_CHUNK_MAX
        return tables + STREAM_SLOTS * STREAM_CHUNK_MAX + parts(p, 4)
    assert floor(2) < floor(3) < floor(4)
    st = CudaStages(threads=1, b_g2="gpu", stream_chunk=chunk)
    assert st.h_buffers == "auto"
    for total, want in ((None, 4), (roomy(1), 4), (roomy(1) - 1, 3), (floor(4), 3), (floor(3), 3),
                        (floor(3) - 1, 2), (floor(2), 2), (key_bytes, 2)):
        budget = Budget(total, "card")
        with caplog.at_level(logging.WARNING, logger="cuzk"):
            caplog.clear()
            key = st.load_key(pk, budget=budget, where="host")
        assert key.h_buffers == want, total
        assert key.nbytes == key_bytes
        # said once at load when not even two buffers fit one partition
        assert any("will fail with BudgetError" in r.getMessage() for r in caplog.records) == (
            total is not None and total < floor(2))
        key.release()
    # two partitions in flight (the engine's workers) first, slots of STREAM_CHUNK_SHARED each:
    # with three buffers, else with two; then one
    from cuzk._stages._cuda import STREAM_CHUNK_SHARED

    def floor2(hbuf):
        return tables + STREAM_SLOTS * STREAM_CHUNK_SHARED + parts(2, hbuf)
    for total, want in ((roomy(2), 4), (roomy(2) - 1, 3), (floor2(4), 3), (floor2(3), 3),
                        (floor2(3) - 1, 2), (floor2(2), 2), (floor2(2) - 1, 3)):
        key = st.load_key(pk, budget=Budget(total, "card"), where="host", partitions=2)
        assert key.h_buffers == want, total
        key.release()
    no_abc = CudaStages(threads=1, b_g2="gpu", stream_chunk=chunk, abc_scratch=False)
    key = no_abc.load_key(pk, budget=Budget(floor(2), "card"), where="host")
    assert key.h_buffers == 4
    key.release()
    key = st.load_key(pk, budget=Budget(None, "big"), where="device")
    assert key.h_buffers == 4
    key.release()


@pytest.mark.parametrize("chunk_points,slots", [(64, 2), (128, 2), (64, 3)])
def test_cuda_stages_streamed_key_in_chunks_equals_cpu(fake, monkeypatch, chunk_points, slots):
    """A streamed key in chunks (``stream_chunk``, ``stream_slots``): each device slot holds one
    chunk of a query, not the largest query; every reduction runs per chunk (H's MSM over the chunk's
    scalars, a batch addition over its bits, a tail MSM over the tail entries whose indices fall
    in it, indices made chunk-relative), H's chunks interleaved with the others'; the partial
    sums give the CPU's bytes, the timings keep one key per stage, the budget returns to zero."""
    from cuzk._budget import Budget
    from cuzk._circuit import porep_like
    from cuzk._keygen import keygen_random
    from cuzk._prover import prove
    from cuzk._stages._cuda import CudaStages, _align, _tables_bytes
    _install_stages(fake, monkeypatch)
    r1cs, inputs, aux = porep_like(8, 6)
    pk = keygen_random(r1cs, seed=6)
    asg = r1cs.assignment(inputs, aux)
    st = CudaStages(threads=2, b_g2="gpu", stream_chunk=chunk_points * 192, stream_slots=slots)
    budget = Budget(None, "big")
    ctx = st.context(budget=budget)
    key = st.load_key(pk, budget=budget, where="host")
    assert key.chunk_points == chunk_points and key.slots == slots
    assert key.slot_bytes == max(min(len(getattr(pk, q)), chunk_points) * (192 if q == "b_g2" else 96)
                                 for q in ("h", "l", "a", "b_g1", "b_g2"))
    part = st.prepare(key, asg, ctx, 9, 10)
    names = [name for name, _, _ in part.plans]
    heads = [name for name in names if name.startswith("h@")]
    assert heads == [f"h@{j}" for j in range(len(key.chunks("h")))] and len(heads) >= 2
    assert names[0] == "h@0" and names[-1] != heads[-1]          # interleaved, not H first
    for q, pq in (("l", "l"), ("a", "a"), ("b_g1", "b"), ("b_g2", "b")):
        tails = [p for name, kind, p in part.plans if name.startswith(q + ":tail@")]
        assert sum(p.n for p in tails) == part.prep[pq + "_tail_scalars"].shape[0]
        assert all(p.npoints <= chunk_points for p in tails)
    assert len({name.split("@")[1] for name in names if name.startswith("l:")}) >= 2
    assert len(key.slot_bufs) == slots and not any(k.startswith("slot") for k in part.dev)
    assert key.deep_tables == (pk.domain_size >= 64)
    assert key.nbytes == _tables_bytes(pk.domain_size, key.deep_tables) + slots * _align(key.slot_bytes)
    st.run(part).synchronize()
    assert st.finish(part) == prove(pk, asg, 9, 10, backend="cpu")
    assert "gpu:h" in part.timings and not any("@" in k for k in part.timings)
    assert part.timings["gpu:key_upload"] >= 0 and part.timings["gpu:key_wait"] >= 0
    key_bytes = sum(int(getattr(pk, q).nbytes) for q in ("h", "l", "a", "b_g1", "b_g2"))
    assert part.bytes_uploaded >= key_bytes          # every chunk once, beside a, b and prep's output
    key.release()
    ctx.close()
    assert budget.used == 0


@pytest.mark.parametrize("split_side", [False, True])
@pytest.mark.parametrize("resident", [("h",), ("l", "b_g1", "b_g2"), ("h", "a")])
def test_cuda_stages_partly_resident_key_equals_cpu(fake, monkeypatch, resident, split_side):
    """A key split by ``stream_plan`` (``StreamedKey(resident=...)``): the resident queries are
    uploaded once with the key (counted in its lasting bytes) and read in place as one chunk each,
    never through the slots; the others stream in chunks (with H resident and ``split_side``, on
    the side stream beside H's MSM; else on the compute stream); the CPU's bytes, twice; the budget
    returns to zero.  "auto" in a budget too small for the whole key beside two partitions, with
    two partitions asked for, splits it as ``stream_plan`` says (with ``split_side``, counting
    the tails' room beside H's MSM for splits that keep H)."""
    from cuzk._budget import Budget
    from cuzk._circuit import porep_like
    from cuzk._keygen import keygen_random
    from cuzk._prover import prove
    from cuzk._stages._cuda import (CudaStages, StreamedKey, _align, _key_device_bytes, _query_bytes,
                                    _tables_bytes, partition_bytes, stream_plan)
    _install_stages(fake, monkeypatch)
    r1cs, inputs, aux = porep_like(8, 10)
    pk = keygen_random(r1cs, seed=10)
    asg = r1cs.assignment(inputs, aux)
    st = CudaStages(threads=1, b_g2="gpu", stream_chunk=64 * 192, split_side=split_side)
    budget = Budget(None, "big")
    ctx = st.context(budget=budget)
    key = StreamedKey(pk, st.device, st.pool, budget, 64 * 192, 3, resident=resident, h_head=split_side)
    side = split_side and "h" in resident
    assert key.h_head == side
    kept = sum(_align(_query_bytes(pk, q)) for q in resident)
    assert key.resident == tuple(q for q in ("h", "l", "a", "b_g1", "b_g2") if q in resident)
    assert key.nbytes == _tables_bytes(pk.domain_size, key.deep_tables) + 3 * _align(key.slot_bytes) + kept
    assert budget.lasting == key.nbytes
    for q in resident:
        assert key.chunks(q) == [(0, key.points(q))]
    with pytest.raises(ValueError, match="together"):
        StreamedKey(pk, st.device, st.pool, budget, 64 * 192, 3, resident=("b_g2",))
    streamed = sum(_query_bytes(pk, q) for q in ("h", "l", "a", "b_g1", "b_g2") if q not in resident)
    for i in range(2):
        part = st.prepare(key, asg, ctx, 7 + i, 8)
        up0 = part.bytes_uploaded
        st.run(part).synchronize()
        assert part.bytes_uploaded - up0 == streamed       # only the streamed queries' chunks
        assert st.finish(part) == prove(pk, asg, 7 + i, 8, backend="cpu")
        # with H resident and split_side the other reductions (and the slots' waits) run on the
        # side stream beside H's MSM, as a resident key's do; else all on the compute stream
        assert ("gpu:side" in part.timings) == side
        ready = {id(e) for e in part.bases.ready.values()}
        waits = [sw for sw, ev in fake.waits if id(ev) in ready]
        assert waits and all(sw is (ctx.side if side else ctx.compute) for sw in waits)
        fake.waits.clear()
    key.release()
    assert budget.used == 0
    ctx.close()
    # auto: a budget that holds a split beside two partitions but not the whole key (the slot
    # floors scaled down to this key's size)
    import cuzk._stages._cuda as sc
    monkeypatch.setattr(sc, "STREAM_CHUNK_SHARED", 2048)
    monkeypatch.setattr(sc, "STREAM_CHUNK_MIN", 1024)
    st2 = CudaStages(threads=1, b_g2="gpu", split_side=split_side)
    total = _key_device_bytes(pk) + 2 * partition_bytes(pk.domain_size) - 1
    room_h = st2._room_beside_h(pk) if split_side else None
    assert room_h is None or 0 <= room_h < 3 * pk.domain_size * 32
    want = stream_plan(pk, total, 3, 2, 3 * pk.domain_size * 32, True, room_h)
    assert want[0] == 2 and want[1]
    budget = Budget(total, "split")
    key = st2.load_key(pk, budget=budget, partitions=2)
    assert isinstance(key, StreamedKey) and key.resident == want[1]
    assert key.h_head == (split_side and "h" in want[1])
    key.release()                # (a partition this small reserves far more than its estimate)
    assert budget.used == 0


def test_cuda_stages_key_placed_for_two_in_flight(fake, monkeypatch, caplog):
    """More workers than fit beside the whole key do not push queries off the device: "auto"
    places the key for two partitions in flight (``_placed_partitions``), so three asked for in a
    budget that holds the key and two partitions (not three) keep it whole, and in one that holds
    only a split beside two, the split that two get; the extra workers' reservations wait.  Where
    three fit beside the whole key, three it is (nothing said)."""
    from cuzk._budget import Budget
    from cuzk._circuit import porep_like
    from cuzk._keygen import keygen_random
    from cuzk._stages._cuda import (CudaStages, ResidentKey, StreamedKey, _key_device_bytes, partition_bytes,
                                    stream_plan)
    import cuzk._stages._cuda as sc
    _install_stages(fake, monkeypatch)
    monkeypatch.setattr(sc, "STREAM_CHUNK_SHARED", 2048)
    monkeypatch.setattr(sc, "STREAM_CHUNK_MIN", 1024)
    r1cs, _, _ = porep_like(8, 10)
    pk = keygen_random(r1cs, seed=10)
    st = CudaStages(threads=1, b_g2="gpu", precompute=1)
    whole, part = _key_device_bytes(pk), partition_bytes(pk.domain_size)
    assert st._placed_partitions(pk, Budget(whole + 3 * part, "roomy"), 3, False) == 3
    assert st._placed_partitions(pk, Budget(whole + 3 * part - 1, "tight"), 3, False) == 2
    assert st._placed_partitions(pk, Budget(whole, "tiny"), 2, False) == 2
    assert st._placed_partitions(pk, None, 4, False) == 4
    caplog.set_level(logging.INFO, logger="cuzk")
    budget = Budget(whole + 3 * part, "roomy")
    key = st.load_key(pk, budget=budget, partitions=3)
    assert isinstance(key, ResidentKey) and "placed for 2" not in caplog.text
    key.release()
    budget = Budget(whole + 3 * part - 1, "three do not fit")
    key = st.load_key(pk, budget=budget, partitions=3)
    assert isinstance(key, ResidentKey) and "placed for 2 partitions in flight, not 3" in caplog.text
    key.release()
    assert budget.used == 0
    total = whole + 2 * part - 1                     # a split beside two, not the whole key
    want = stream_plan(pk, total, 3, 2, 3 * pk.domain_size * 32, True)
    three = stream_plan(pk, total, 3, 3, 3 * pk.domain_size * 32, True)
    assert want[0] == 2 and want[1] and three != want  # three in flight would split it otherwise
    for n in (2, 3, 4):
        budget = Budget(total, "split")
        key = st.load_key(pk, budget=budget, partitions=n)
        assert isinstance(key, StreamedKey) and key.resident == want[1]
        key.release()
        assert budget.used == 0


def test_h_msm_window_rule():
    """``h_msm_window``: an explicit window wins; else c = 20 for an H MSM of a domain from 2^27
    on without copies (its n − 1 scalars count as n) and from 2^26 with copies, the cost model's
    window below (H's scalars are uniform: ``_cuda_msm.default_window`` with skewed=False)."""
    from cuzk import _cuda_msm as M
    from cuzk._stages._cuda import h_msm_window
    assert h_msm_window((1 << 27) - 1) == M._G1_WIDE_C == 20
    assert h_msm_window((1 << 26) - 1) == M.window_bits((1 << 26) - 1) == 16
    assert h_msm_window((1 << 26) - 1, 2) == 20
    assert h_msm_window((1 << 25) - 1, 2) == M.window_bits((1 << 25) - 1, 2)
    assert h_msm_window((1 << 27) - 1, 1, 16) == 16 and h_msm_window(255, 1, 7) == 7
    assert h_msm_window(255) == M.window_bits(255)


@pytest.mark.parametrize("where", ["device", "host", "split"])
def test_cuda_stages_h_window_reaches_every_key(fake, monkeypatch, where):
    """The stage option ``h_window`` sets the H MSM's window of a resident key (no copies), of a
    streamed key's H chunks and of a partly resident key's one H chunk; without it each H plan
    takes ``h_msm_window`` of its scalars.  The CPU's bytes either way."""
    from cuzk._budget import Budget
    from cuzk._circuit import porep_like
    from cuzk._keygen import keygen_random
    from cuzk._prover import prove
    from cuzk._stages._cuda import CudaStages, StreamedKey, h_msm_window
    _install_stages(fake, monkeypatch)
    r1cs, inputs, aux = porep_like(8, 11)
    pk = keygen_random(r1cs, seed=11)
    asg = r1cs.assignment(inputs, aux)
    want = prove(pk, asg, 3, 8, backend="cpu")
    for c in (5, None):
        st = CudaStages(threads=1, b_g2="gpu", precompute=1, h_window=c, stream_chunk=64 * 192)
        budget = Budget(None, "big")
        ctx = st.context(budget=budget)
        if where == "split":
            key = StreamedKey(pk, st.device, st.pool, budget, 64 * 192, 3, resident=("h",), h_window=c)
            assert key.h_plan_args == {"k": 1, "c": h_msm_window(key.points("h"), 1, c)}
        else:
            key = st.load_key(pk, budget=budget, where=where)
            assert key.where == where
        part = st.prepare(key, asg, ctx, 3, 8)
        st.run(part).synchronize()
        hs = [plan for name, _, plan in part.plans if name == "h" or name.startswith("h@")]
        assert len(hs) == (len(key.chunks("h")) if where == "host" else 1) and (where != "host" or len(hs) > 1)
        assert all(p.c == (c if c is not None else h_msm_window(p.n)) for p in hs), [p.c for p in hs]
        assert st.finish(part) == want
        key.release()
        ctx.close()
        assert budget.used == 0


def _streamed_two_workers(fake, monkeypatch, seed):
    """(pk, asg, stages, budget, key, ctx1, ctx2): a 2^8 PoRep-like key streamed in 64-point chunks
    through 3 slots on an unlimited budget, and two worker contexts."""
    from cuzk._budget import Budget
    from cuzk._circuit import porep_like
    from cuzk._keygen import keygen_random
    from cuzk._stages._cuda import CudaStages
    _install_stages(fake, monkeypatch)
    r1cs, inputs, aux = porep_like(8, seed)
    pk = keygen_random(r1cs, seed=seed)
    st = CudaStages(threads=1, b_g2="gpu", stream_chunk=64 * 192, stream_slots=3)
    budget = Budget(None, "big")
    key = st.load_key(pk, budget=budget, where="host")
    return (pk, r1cs.assignment(inputs, aux), st, budget, key, st.context(budget=budget, name="w1"),
            st.context(budget=budget, name="w2"))


def test_cuda_stages_streamed_key_slots_pass_between_partitions(fake, monkeypatch):
    """The streamed key's slots are the key's, reserved once with it: a partition reserves
    none, and the next partition's first refill of each slot waits for the events after the
    previous partition's last use of it (``slot_free``), also from another worker's streams;
    partitions on two threads take turns at the slots (``take_slots``) and each gives the CPU's
    bytes; the budget returns to the key's bytes, then to zero."""
    from cuzk._prover import prove
    pk, asg, st, budget, key, ctx1, ctx2 = _streamed_two_workers(fake, monkeypatch, 8)
    assert budget.used == key.nbytes and budget.lasting == key.nbytes
    cpu = prove(pk, asg, 5, 6, backend="cpu")
    part = st.prepare(key, asg, ctx1, 5, 6)
    alone = budget.used - key.nbytes
    st.run(part).synchronize()
    assert st.finish(part) == cpu
    left = [list(evs) for evs in key.slot_free]
    assert all(evs for evs in left)              # every slot was used, and says after what
    fake.waits.clear()
    part = st.prepare(key, asg, ctx2, 5, 6)
    assert budget.used - key.nbytes == alone     # the same reservation: no slots in it
    st.run(part).synchronize()
    assert st.finish(part) == cpu
    waited = {id(ev) for s, ev in fake.waits if s is ctx2.upload}
    assert all(id(ev) in waited for evs in left for ev in evs)
    # two threads, three partitions each, on one key: turns at the slots, every proof right
    out, errors = [], []

    def worker(ctx, r):
        try:
            for i in range(3):
                p = st.prepare(key, asg, ctx, r + i, 6)
                st.run(p).synchronize()
                out.append((r + i, st.finish(p)))
        except Exception as e:                     # noqa: BLE001 (reported below)
            errors.append(e)
    threads = [threading.Thread(target=worker, args=(c, r)) for c, r in ((ctx1, 20), (ctx2, 30))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors and len(out) == 6
    for r, proof in out:
        assert proof == prove(pk, asg, r, 6, backend="cpu")
    assert budget.used == key.nbytes
    assert key._slot_lock.acquire(blocking=False)     # given back after every region
    key._slot_lock.release()
    key.release()
    ctx1.close()
    ctx2.close()
    assert budget.used == 0 and budget.lasting == 0


@pytest.mark.parametrize("at", [1, 5])
def test_cuda_stages_streamed_key_failure_mid_region(fake, monkeypatch, at):
    """An MSM that fails in the middle of a streamed partition's region (the ``at``-th enqueued,
    after some chunks were uploaded and read): ``run`` raises, the key's slots are given back
    (with the failed partition's last uses as the next one's waits), ``abort`` leaves only the
    key reserved, and the next partitions on the same key (another context too) give the CPU's
    bytes."""
    import cuzk._cuda_msm as M
    from cuzk._prover import prove
    pk, asg, st, budget, key, ctx1, ctx2 = _streamed_two_workers(fake, monkeypatch, 12)
    real, calls = M.enqueue_msm, []

    def failing(*a, **kw):
        calls.append(1)
        if len(calls) == at:
            raise RuntimeError("injected MSM failure")
        return real(*a, **kw)
    monkeypatch.setattr(M, "enqueue_msm", failing)
    part = st.prepare(key, asg, ctx1, 5, 6)
    with pytest.raises(RuntimeError, match="injected"):
        st.run(part)
    assert key._slot_lock.acquire(blocking=False)      # given back by the failed region
    key._slot_lock.release()
    left = [list(evs) for evs in key.slot_free]
    assert all(left)            # every slot was written: its copy (or its reader) is waited for
    st.abort(part)
    assert budget.used == key.nbytes
    monkeypatch.setattr(M, "enqueue_msm", real)
    fake.waits.clear()
    for ctx, r in ((ctx2, 7), (ctx1, 8)):
        part = st.prepare(key, asg, ctx, r, 6)
        st.run(part).synchronize()
        assert st.finish(part) == prove(pk, asg, r, 6, backend="cpu")
    waited = {id(ev) for sw, ev in fake.waits if sw is ctx2.upload}
    assert all(id(ev) in waited for evs in left for ev in evs)
    key.release()
    ctx1.close()
    ctx2.close()
    assert budget.used == 0


def test_cuda_stages_partition_that_never_fits_beside_its_key_fails_at_once(fake, monkeypatch):
    """A budget that holds the (streamed) key's tables and not a partition beside them, though the
    partition alone would fit: ``cuzk.prove``'s path raises BudgetError naming the resident keys at
    once (it waited forever before: only releasing the key frees those bytes), leaving only the
    key reserved; with one byte more beside the key it proves."""
    from cuzk._budget import Budget
    from cuzk._circuit import porep_like
    from cuzk._errors import BudgetError
    from cuzk._keygen import keygen_random
    from cuzk._prover import prove
    from cuzk._stages._cuda import CudaStages
    _install_stages(fake, monkeypatch)
    r1cs, inputs, aux = porep_like(6, 7)
    pk = keygen_random(r1cs, seed=7)
    asg = r1cs.assignment(inputs, aux)
    # four H buffers under both budgets ("auto" takes 3 in the small one, where at this toy size
    # the MSMs' scratch outgrows the room above h: the probe's reservation would not be its own)
    st = CudaStages(threads=1, b_g2="gpu", early_h=False, h_buffers=4)
    probe = Budget(None, "probe")
    key = st.load_key(pk, budget=probe, where="host")
    ctx = st.context(budget=probe)
    part = st.prepare(key, asg, ctx, 3, 4)
    need = probe.used - key.nbytes                 # the partition's reservation
    st.abort(part)
    key.release()
    ctx.close()
    for extra, ok in ((-1, False), (0, True)):
        budget = Budget(key.nbytes + need + extra, "small")
        key = st.load_key(pk, budget=budget, where="host")
        ctx = st.context(budget=budget)
        done = []
        worker = threading.Thread(target=lambda: done.append(_outcome(st, key, asg, ctx)))
        worker.start()
        worker.join(120)
        assert not worker.is_alive() and done
        if ok:
            assert done[0] == prove(pk, asg, 3, 4, backend="cpu")
        else:
            assert isinstance(done[0], BudgetError) and "resident keys" in str(done[0])
            assert need <= budget.total              # it fits the budget alone: the new check
        assert budget.used == key.nbytes
        key.release()
        ctx.close()


def _outcome(st, key, asg, ctx):
    """``st.prove_one``'s proof, or the exception it raised."""
    try:
        return st.prove_one(key, asg, ctx, 3, 4)[0]
    except Exception as e:                          # noqa: BLE001 (the test inspects it)
        return e


def test_cuda_stages_row_check_beside_the_region(fake, monkeypatch):
    """The CUDA backend never uploads c (H takes c = a∘b) and checks a∘b = c on the CPU once the
    region is enqueued: a changed row of c is reported by ``finish`` as
    UnsatisfiedAssignmentError with that row (the first of two), nothing stays reserved, and the
    next partition on the same context proves."""
    from cuzk._assignment import Assignment
    from cuzk._circuit import porep_like
    from cuzk._errors import UnsatisfiedAssignmentError
    from cuzk._keygen import keygen_random
    from cuzk._prover import prove
    from cuzk._stages._cuda import CudaStages, device_budget
    _install_stages(fake, monkeypatch)
    r1cs, inputs, aux = porep_like(6, 3)
    pk = keygen_random(r1cs, seed=3)
    asg = r1cs.assignment(inputs, aux)
    c = asg.c.copy()
    c[41], c[17] = c[40], c[16]
    bad = Assignment(**{f: getattr(asg, f) for f in asg.__dataclass_fields__ if f != "c"}, c=c)
    st = CudaStages(threads=2, b_g2="gpu")
    ctx = st.context()
    key = st.load_key(pk)
    budget = device_budget(st.device)
    part = st.prepare(key, bad, ctx, 1, 2)          # no row check before the region
    st.run(part).synchronize()
    with pytest.raises(UnsatisfiedAssignmentError) as e:
        st.finish(part)
    assert e.value.row == 17 and budget.used == key.nbytes
    part = st.prepare(key, asg, ctx, 1, 2)
    st.run(part).synchronize()
    assert st.finish(part) == prove(pk, asg, 1, 2, backend="cpu")
    key.release()
    ctx.close()


def test_cuda_stages_row_check_on_failure(fake, monkeypatch):
    """``row_check="on_failure"``: a verified partition skips the row check (no ``row_check``
    time) and gives the CPU's bytes; a witness that leaves a row unsatisfied still raises
    UnsatisfiedAssignmentError with that row, found once its proof fails verification (the
    normal and the early path), and a partition that is not verified is checked beside the
    region or, when run expected a verification that finish does not do, in finish.  A c that
    disagrees with a∘b while the witness is good is not read: the witness's valid proof."""
    import dataclasses
    from cuzk._errors import UnsatisfiedAssignmentError
    from cuzk._prover import prove
    from cuzk._stages import parse_stage_options
    from cuzk._stages._cuda import CudaStages, device_budget
    _install_stages(fake, monkeypatch)
    pk, asg, bad, row = unsatisfied_witness(6, 3)
    c = asg.c.copy()
    c[17] = c[16]
    bad_c = dataclasses.replace(asg, c=c)
    with pytest.raises(ValueError, match="row_check"):
        CudaStages(row_check="sometimes")
    assert parse_stage_options("row_check=On_Failure") == {"row_check": "on_failure"}
    st = CudaStages(threads=2, b_g2="gpu", row_check="on_failure")
    ctx = st.context()
    key = st.load_key(pk)
    budget = device_budget(st.device)
    ref = prove(pk, asg, 1, 2, backend="cpu")

    def partition(a, verify=True):
        part = st.prepare(key, a, ctx, 1, 2)
        part.verify = verify
        st.run(part).synchronize()
        return part

    part = partition(asg)
    assert st.finish(part) == ref and "row_check" not in part.timings
    assert st.finish(partition(bad_c)) == ref
    part = partition(bad)
    with pytest.raises(UnsatisfiedAssignmentError) as e:
        st.finish(part)
    assert e.value.row == row and "row_check" in part.timings and budget.used == key.nbytes
    part = partition(bad, verify=False)
    assert "row_check" in part.timings                   # beside the region
    with pytest.raises(UnsatisfiedAssignmentError) as e:
        st.finish(part, verify=False)
    assert e.value.row == row
    part = partition(bad)
    with pytest.raises(UnsatisfiedAssignmentError) as e:
        st.finish(part, verify=False)                    # run expected a verification: in finish
    assert e.value.row == row
    t = {}
    with pytest.raises(UnsatisfiedAssignmentError) as e:
        prove(pk, bad, 1, 2, stages=st, timings=t)       # cuzk.prove's path (early with a resident key)
    assert e.value.row == row
    assert prove(pk, asg, 1, 2, stages=st) == ref
    assert budget.used == key.nbytes
    key.release()
    ctx.close()


def test_cuda_stages_abort_releases_everything(fake, monkeypatch):
    """A failure inside the kernel region (an injected error after prepare) leaves no reservation
    and no live pool allocation behind; the next partition on the same context proves."""
    from cuzk._circuit import porep_like
    from cuzk._keygen import keygen_random
    from cuzk._prover import prove
    from cuzk._stages._cuda import CudaStages, device_budget
    _install_stages(fake, monkeypatch)
    r1cs, inputs, aux = porep_like(6, 2)
    pk = keygen_random(r1cs, seed=2)
    asg = r1cs.assignment(inputs, aux)
    st = CudaStages(threads=2, b_g2="gpu")
    ctx = st.context()
    key = st.load_key(pk)
    budget = device_budget(st.device)
    part = st.prepare(key, asg, ctx, 1, 2)
    assert budget.used > key.nbytes
    st.abort(part)
    assert budget.used == key.nbytes
    part = st.prepare(key, asg, ctx, 1, 2)
    st.run(part).synchronize()
    assert st.finish(part) == prove(pk, asg, 1, 2, backend="cpu")
    key.release()
    ctx.close()
    assert budget.used == 0


# --------------------------------------------------------------------------- the harness itself

def test_fake_driver_rejects_bad_launches(fake):
    """The checks the tests above rely on: a launch the real driver would refuse fails."""
    from cuzk._errors import CudaError
    dev = fake.Device.get(0)
    mod = fake.Module(dev)
    buf = fake.DeviceBuffer.alloc(dev, 64)
    host = np.zeros(8, np.uint64)
    fn = mod.function("cuzk_fr_add")
    ok = [("P", buf.ptr), ("P", buf.ptr), ("P", buf.ptr), ("Q", 1)]
    fn.launch(None, 1, 1, ok)
    with pytest.raises(CudaError, match="4 arguments|takes 4"):
        fn.launch(None, 1, 1, ok[:3])
    with pytest.raises(CudaError, match="argument 3 is 4 bytes"):
        fn.launch(None, 1, 1, ok[:3] + [("I", 1)])
    with pytest.raises(CudaError, match="not in a live device"):
        fn.launch(None, 1, 1, [("P", host.ctypes.data)] + ok[1:])
    with pytest.raises(CudaError, match="invalid launch configuration"):
        fn.launch(None, 1, 1025, ok)
    with pytest.raises(CudaError, match="dynamic shared memory"):
        mod.function("cuzk_ntt_pass").launch(None, 1, 1, [], shmem=64 * 1024)
    with pytest.raises(CudaError, match="NOT_FOUND"):
        mod.function("no_such_kernel")
    buf.free()
    with pytest.raises(CudaError, match="not in a live device"):
        fn.launch(None, 1, 1, ok)


def _settled_budget(eng):
    """Device 0's budget bytes in use once no partition is in flight (a job's future resolves
    before its last partition releases)."""
    for _ in range(200):
        if eng.status()["in_flight"] == 0:
            break
        time.sleep(0.01)
    return eng.status()["devices"][0]["budget"]["used"]


def _keys_in_host(st, monkeypatch):
    """Make ``st.load_key`` keep every key in host memory (``StreamedKey``, as when the budget
    cannot hold it); returns the list the loaded keys are appended to."""
    from cuzk._stages._cuda import CudaStages
    keys = []

    def load_host(pk, budget=None, progress=None, where="auto", lasting=True, partitions=1):
        keys.append(CudaStages.load_key(st, pk, budget, progress, where="host", lasting=lasting,
                                        partitions=partitions))
        keys[-1].partitions_asked = partitions
        return keys[-1]
    monkeypatch.setattr(st, "load_key", load_host)
    return keys


def _keys_split(monkeypatch, resident):
    """Make "auto" split every key as on a card that holds it only in part (the H100's 2^27 key):
    ``resident`` kept on the device (``stream_plan``'s choice), the rest streamed, two partitions
    in flight beside it."""
    import cuzk._stages._cuda as sc
    monkeypatch.setattr(sc, "_fits_whole", lambda *a, **kw: False)
    monkeypatch.setattr(sc, "stream_plan", lambda *a, **kw: (2, tuple(resident)))


@pytest.mark.parametrize("mode", ["coarse", "narrow", "two-lock", "overlap"])
def test_engine_on_cuda_stages(fake, monkeypatch, mode):
    """cuzk.Engine driving CudaStages (resident key, warmed staging, device row check) on the
    emulated GPU with two workers: every proof has the CPU backend's bytes; the device budget
    holds only the key while loaded and nothing after close."""
    import cuzk
    from cuzk._circuit import porep_like
    from cuzk._keygen import keygen_random
    from cuzk._prover import prove
    from cuzk._stages._cuda import CudaStages, h_msm_window
    _install_stages(fake, monkeypatch)
    r1cs, inputs, aux = porep_like(6, 8)
    pk = keygen_random(r1cs, seed=8)
    asg = r1cs.assignment(inputs, aux)
    st = CudaStages(threads=1, b_g2="gpu")
    rs = [(10 + i, 20 + i) for i in range(4)]
    with cuzk.Engine(backend="cpu", devices=1, workers_per_gpu=2, lock_mode=mode,
                     stages=lambda i: st, threads=1) as eng:
        key = eng.load(pk, progress=False)
        assert all(ctx.staging.allocated > 0 for ctx in eng.devices[0].contexts)
        out = eng.submit(key, [asg] * 4, randomizers=rs).result(600)
        used = _settled_budget(eng)
        assert used == eng.status()["keys"][0]["nbytes"][0] > 0     # the resident key only
        # "auto": no copies this small, and the window the H MSM's plans take (``h_msm_window``)
        assert eng.status()["keys"][0]["h_msm"] == [{"k": 1, "c": h_msm_window(pk.h.shape[0])}]
        stages = [r for r in eng.timeline.records() if r.kind == "stage"]
        regions = eng.timeline.kernel_regions()
        metrics = eng.timeline.metrics()
    want = b"".join(prove(pk, asg, r, s, backend="cpu") for r, s in rs)
    assert out == want
    # the first partition found the device idle: the early plan (interlock.EARLY_PLANS), the
    # others the mode's plan; every partition has one kernel region
    heads = [r for r in stages if r.name == "early_head"]
    assert len(heads) == 1 and heads[0].partition == 0 and "fallback" not in (heads[0].args or {})
    assert sorted(r.partition for r in stages if r.name == "run") == [1, 2, 3]
    assert [r.partition for r in stages if r.name == "early_rest"] == [0]
    assert len(regions[0]) == 4
    assert (metrics["early_partitions"], metrics["early_fallbacks"]) == (1, 0)


@pytest.mark.parametrize("resident", [("h", "l", "b_g1", "b_g2"), ("l",)])
def test_engine_split_key_early_partition(fake, monkeypatch, resident):
    """A key that "auto" splits (the H100's 2^27 key: h, l, b kept, a streamed): the first
    partition, finding the device idle, takes the early path when H is kept (H's MSM enqueued
    before prep_msm, the streamed chunks through the slots after it), and the normal one when H
    is streamed; every proof has the CPU's bytes, and only the key stays reserved."""
    import cuzk
    from cuzk._circuit import porep_like
    from cuzk._keygen import keygen_random
    from cuzk._prover import prove
    from cuzk._stages._cuda import CudaStages
    _install_stages(fake, monkeypatch)
    _keys_split(monkeypatch, resident)
    r1cs, inputs, aux = porep_like(6, 8)
    pk = keygen_random(r1cs, seed=8)
    asg = r1cs.assignment(inputs, aux)
    st = CudaStages(threads=1, b_g2="gpu", stream_chunk=64 * 192)
    rs = [(10 + i, 20 + i) for i in range(4)]
    with cuzk.Engine(backend="cpu", devices=1, workers_per_gpu=2, lock_mode="two-lock",
                     stages=lambda i: st, threads=1) as eng:
        key = eng.load(pk, progress=False)
        assert key.where == ["host"] and key.kept == [list(resident)]
        out = eng.submit(key, [asg] * 4, randomizers=rs).result(600)
        assert _settled_budget(eng) == eng.status()["keys"][0]["nbytes"][0]
        metrics = eng.timeline.metrics()
        stages = [r for r in eng.timeline.records() if r.kind == "stage"]
    assert out == b"".join(prove(pk, asg, r, s, backend="cpu") for r, s in rs)
    early = "h" in resident
    assert (metrics["early_partitions"], metrics["early_fallbacks"]) == (int(early), 0)
    assert [r.partition for r in stages if r.name == "early_rest"] == ([0] if early else [])
    assert len([r for r in stages if r.name == "run"]) == (3 if early else 4)


@pytest.mark.parametrize("used_gib,frame,held_gib", [(0.5, 1024 + 320 * 1024, 1.0), (0.5, 4096, 0),
                                                     (1.5, 1024 + 320 * 1024, 2.0)])
def test_driver_local_memory_held_out_of_the_budget(fake, monkeypatch, used_gib, frame, held_gib):
    """Loading a key holds out of the device's own budget what the driver's local memory for the
    proving kernels' largest frame ((frame − 1 KiB) × SMs × threads per SM: here 2.5 GiB for a
    321 KiB frame on the emulator's 4 SMs × 2 048 threads) takes beyond the part of the 2 GiB
    margin the context left (the device's used bytes when the budget was made, less what cuzk's
    pool held): a lasting reservation, made once per device, kept after the key's release and the
    engine's close, and none for a budget that is not the device's own; the proofs are the
    CPU's."""
    import cuzk
    import cuzk._stages._cuda as sc
    from cuzk._budget import Budget
    from cuzk._circuit import porep_like
    from cuzk._keygen import keygen_random
    from cuzk._prover import prove
    from cuzk._stages._cuda import CudaStages, device_budget
    _install_stages(fake, monkeypatch)
    gib = 1 << 30
    monkeypatch.setattr(fake, "local_frame", frame)      # the fake is shared by the module's tests
    st = CudaStages(threads=1, b_g2="gpu")
    total = st.device.total_mem
    # a quarter GiB of the device's used bytes is cuzk's pool's (a GPU keygen's), not the context's
    monkeypatch.setattr(st.pool, "reserved_bytes", gib // 4, raising=False)
    monkeypatch.setattr(type(st.device), "mem_info",
                        lambda self: (total - int(used_gib * gib) - gib // 4, total))
    budget = device_budget(st.device)
    monkeypatch.setattr(st.pool, "reserved_bytes", 0, raising=False)
    lmem = (frame - 1024) * 4 * 2048
    assert sc.local_memory_bytes(st.device) == lmem
    want = max(0, int(used_gib * gib) + lmem - (2 << 30))
    assert abs(want - held_gib * gib) < 2 ** 20
    r1cs, inputs, aux = porep_like(6, 8)
    pk = keygen_random(r1cs, seed=8)
    asg = r1cs.assignment(inputs, aux)
    own = Budget(1 << 33, "the caller's share")
    assert sc.hold_local_memory(st.device, own) == 0 and own.used == 0
    for _ in range(2):              # once per device: a second engine holds nothing more
        with cuzk.Engine(backend="cpu", devices=1, workers_per_gpu=1, stages=lambda i: st,
                         threads=1) as eng:
            key = eng.load(pk, progress=False)
            assert budget.used == want + eng.status()["keys"][0]["nbytes"][0]
            out = eng.submit(key, [asg], randomizers=[(3, 4)]).result(600)
        assert out == prove(pk, asg, 3, 4, backend="cpu")
        assert budget.used == want and budget.lasting == want
        held = [n for what, n in budget.snapshot()["reservations"]
                if what == "context and driver local memory"]
        assert held == ([want] if want else [])


@pytest.mark.parametrize("free_gib,untracked_gib", [(4, 10), (15, 0)])
def test_engine_says_memory_its_budget_does_not_have(fake, monkeypatch, caplog, free_gib,
                                                     untracked_gib):
    """At its start the engine compares the device budget's free bytes with the device's free
    memory and what cuzk's pool holds unused: memory that no reservation counts (another
    process; session 46: a key's tables that outlived it) is logged as a warning from 1 GiB,
    reported in ``status()`` and held out of the budget until the engine closes; none when the
    device has what the budget counts."""
    import logging
    import cuzk
    from cuzk._stages._cuda import CudaStages, device_budget
    _install_stages(fake, monkeypatch)
    st = CudaStages(threads=1)
    total = device_budget(st.device).total           # the emulated 16 GiB less the 2 GiB margin
    assert total == 14 << 30
    monkeypatch.setattr(type(st.device), "mem_info", lambda self: (free_gib << 30, 16 << 30))
    monkeypatch.setattr(st.pool, "used_bytes", 1 << 30, raising=False)
    monkeypatch.setattr(st.pool, "reserved_bytes", 1 << 30, raising=False)   # none unused
    with caplog.at_level(logging.WARNING, logger="cuzk.engine"):
        with cuzk.Engine(backend="cpu", devices=1, workers_per_gpu=1, stages=lambda i: st,
                         threads=1) as eng:
            dev = eng.status()["devices"][0]
    assert dev["untracked_bytes_at_start"] == untracked_gib << 30
    assert dev["budget"]["used"] == untracked_gib << 30     # held out of the budget meanwhile
    assert device_budget(st.device).used == 0               # and given back at close
    said = [r.getMessage() for r in caplog.records if "does not have" in r.getMessage()]
    assert len(said) == (1 if untracked_gib else 0)
    if said:
        assert "10.00 GiB" in said[0] and "holds it out of its budget" in said[0]


@pytest.mark.parametrize("h_buffers", [4, 3, 2])
def test_engine_on_a_streamed_key(fake, monkeypatch, h_buffers):
    """cuzk.Engine with a key kept in host memory (as when the budget cannot hold it), streamed in
    chunks through the key's slots: two workers under two-lock prove every partition with the
    CPU backend's bytes, on the normal plan (a streamed key has no early one), the key sized for
    two partitions in flight, and the budget holds only the key's tables and slots once the job
    is done; also with H in 3 or 2 buffers (``h_buffers``, the workers' warm-up sized for it)."""
    import cuzk
    from cuzk._circuit import porep_like
    from cuzk._keygen import keygen_random
    from cuzk._prover import prove
    from cuzk._stages._cuda import CudaStages, StreamedKey
    _install_stages(fake, monkeypatch)
    r1cs, inputs, aux = porep_like(7, 9)
    pk = keygen_random(r1cs, seed=9)
    asg = r1cs.assignment(inputs, aux)
    st = CudaStages(threads=1, b_g2="gpu", stream_chunk=64 * 192, h_buffers=h_buffers)
    keys = _keys_in_host(st, monkeypatch)
    rs = [(30 + i, 40 + i) for i in range(3)]
    with cuzk.Engine(backend="cpu", devices=1, workers_per_gpu=2, lock_mode="two-lock",
                     stages=lambda i: st, threads=1) as eng:
        key = eng.load(pk, progress=False)
        out = eng.submit(key, [asg] * 3, randomizers=rs).result(600)
        status_key = eng.status()["keys"][0]
        used = _settled_budget(eng)
        stages = [r.name for r in eng.timeline.records() if r.kind == "stage"]
        slots = len(keys[0].slot_bufs)
    assert isinstance(keys[0], StreamedKey) and len(keys[0].chunks("h")) >= 2
    assert used == keys[0].nbytes                  # the tables and slots only
    assert keys[0].partitions_asked == 2 and slots == keys[0].slots and not keys[0].slot_bufs
    assert out == b"".join(prove(pk, asg, r, s, backend="cpu") for r, s in rs)
    assert "early_head" not in stages and stages.count("run") == 3
    assert status_key["where"] == ["host"] and status_key["h_tables"] == ["deep"]   # 2^7: deep possible


@pytest.mark.parametrize("where", ["device", "host"])
def test_engine_on_two_devices(fake, monkeypatch, where):
    """cuzk.Engine over two emulated GPUs, two workers each, one CudaStages per device: the key
    is loaded on both (resident, or streamed from the same host arrays: their page-lock is
    shared, where a second cuMemHostRegister of the same range is refused), every proof has the
    CPU backend's bytes, both devices prove, no handle crosses devices (the fake driver fails a
    launch, copy, pool allocation or event record that mixes them), and each device's budget
    holds only its key afterwards; nothing stays page-locked once the engine is closed."""
    import cuzk
    import cuzk._stages._cuda as sc
    from cuzk._circuit import porep_like
    from cuzk._keygen import keygen_random
    from cuzk._prover import prove
    from cuzk._stages._cuda import CudaStages, StreamedKey
    _install_stages(fake, monkeypatch)
    monkeypatch.setattr(fake, "devices", 2)
    monkeypatch.setattr(sc, "_pins", {})
    monkeypatch.setattr(fake, "registered", {})       # this test's page-locks only
    r1cs, inputs, aux = porep_like(6, 10)
    pk = keygen_random(r1cs, seed=10)
    asg = r1cs.assignment(inputs, aux)
    sts = [CudaStages(threads=1, device=i, b_g2="gpu", key_where=where) for i in range(2)]
    assert [st.device.ordinal for st in sts] == [0, 1]
    rs = [(50 + i, 60 + i) for i in range(6)]
    with cuzk.Engine(backend="cpu", devices=2, workers_per_gpu=2, lock_mode="two-lock",
                     stages=sts.__getitem__, threads=1) as eng:
        key = eng.load(pk, progress=False)
        out = eng.submit(key, [asg] * len(rs), randomizers=rs).result(600)
        _settled_budget(eng)
        st = eng.status()
        runs = [r.device for r in eng.timeline.records() if r.kind == "stage" and r.name in
                ("run", "early_head")]
        keys = list(key.resident.values())
        if where == "host":
            assert all(isinstance(k, StreamedKey) for k in keys)
            assert keys[0].host_ptr("l") == keys[1].host_ptr("l") == pk.l.ctypes.data
            assert len(fake.registered) == sum(1 for q in sc.QUERIES if keys[0].points(q))
    assert out == b"".join(prove(pk, asg, r, s, backend="cpu") for r, s in rs)
    assert sorted(set(runs)) == [0, 1], runs
    assert [d["budget"]["used"] for d in st["devices"]] == st["keys"][0]["nbytes"]
    assert st["keys"][0]["where"] == [where] * 2
    assert not fake.registered and not sc._pins


@pytest.mark.parametrize("verify", [True, False])
def test_engine_row_check_on_failure(fake, monkeypatch, verify):
    """The engine tells the stages whether it verifies (``Partition.verify``): with
    ``row_check="on_failure"`` and verify=True its good partitions skip the row check and keep the
    CPU's bytes, and a job whose witness leaves a row unsatisfied fails with that row while the
    other job proves; with verify=False every partition is checked beside its region."""
    import cuzk
    from cuzk._errors import UnsatisfiedAssignmentError
    from cuzk._prover import prove
    from cuzk._stages._cuda import CudaStages
    _install_stages(fake, monkeypatch)
    pk, asg, bad, row = unsatisfied_witness(6, 8)
    st = CudaStages(threads=1, b_g2="gpu", row_check="on_failure")
    rs = [(10 + i, 20 + i) for i in range(2)]
    with cuzk.Engine(backend="cpu", devices=1, workers_per_gpu=2, lock_mode="two-lock",
                     stages=lambda i: st, threads=1, verify=verify) as eng:
        key = eng.load(pk, progress=False)
        good = eng.submit(key, [asg] * 2, randomizers=rs)
        failing = eng.submit(key, [bad], randomizers=rs[:1])
        assert good.result(600) == b"".join(prove(pk, asg, r, s, backend="cpu") for r, s in rs)
        with pytest.raises(UnsatisfiedAssignmentError) as e:
            failing.result(600)
        assert e.value.row == row
        checked = [r.partition for r in eng.timeline.records()
                   if r.kind == "stage" and "row_check" in (r.args or {}).get("timings", {})]
    # verify: only the failing partition (its finish, which may not be recorded) runs the check
    assert len(checked) <= 1 if verify else len(checked) == 3, checked


@pytest.mark.parametrize("mode", ["coarse", "narrow", "two-lock", "overlap"])
@pytest.mark.parametrize("refuse", ["first", "second"])
def test_engine_early_plan_falls_back(fake, monkeypatch, mode, refuse):
    """The early plan's early_head never waits for device bytes: when a reservation it makes
    does not fit now (injected: the budget refuses it), the partition is aborted, its locks
    released, and it is proved on the mode's plan with the same bytes; nothing leaks."""
    import cuzk
    from cuzk._budget import Budget
    from cuzk._circuit import porep_like
    from cuzk._errors import BudgetError
    from cuzk._keygen import keygen_random
    from cuzk._prover import prove
    from cuzk._stages._cuda import CudaStages
    _install_stages(fake, monkeypatch)
    r1cs, inputs, aux = porep_like(6, 8)
    pk = keygen_random(r1cs, seed=8)
    asg = r1cs.assignment(inputs, aux)
    st = CudaStages(threads=1, b_g2="gpu")
    refusals = []
    real = Budget.reserve

    def reserve(self, nbytes, what="", *, block=True, **kw):
        if not block and "partition" in what:
            refusals.append(what)
            if len(refusals) == (1 if refuse == "first" else 2):
                raise BudgetError(f"{self.name}: injected: {nbytes} bytes do not fit now")
        return real(self, nbytes, what, block=block, **kw)
    monkeypatch.setattr(Budget, "reserve", reserve)
    rs = [(10 + i, 20 + i) for i in range(2)]
    with cuzk.Engine(backend="cpu", devices=1, workers_per_gpu=1, lock_mode=mode,
                     stages=lambda i: st, threads=1) as eng:
        key = eng.load(pk, progress=False)
        out = eng.submit(key, [asg] * 2, randomizers=rs).result(600)
        assert _settled_budget(eng) == eng.status()["keys"][0]["nbytes"][0]
        stages = [r for r in eng.timeline.records() if r.kind == "stage"]
        holds = [r for r in eng.timeline.records() if r.kind == "hold"]
        assert (eng.timeline.metrics()["early_partitions"],
                eng.timeline.metrics()["early_fallbacks"]) == (1, 1)
        assert all(not lk["held"] for lk in eng.status()["devices"][0]["locks"].values())
    assert out == b"".join(prove(pk, asg, r, s, backend="cpu") for r, s in rs)
    heads = [r for r in stages if r.name == "early_head"]
    # partition 0 fell back; partition 1 found the device idle again and took the early plan
    assert [("fallback" in (r.args or {})) for r in heads] == [True, False]
    assert "injected" in heads[0].args["fallback"]
    assert [r.partition for r in stages if r.name == "run"] == [0]
    lock = "device" if mode == "coarse" else "compute"
    assert sum(r.name == lock for r in holds) == 3        # early (released), normal, early


@pytest.mark.parametrize("nbytes", [8, 92416 + 8, 1 << 20, (1 << 20) + 8 * 7 + 8])
def test_pinned_results_view_any_row_count(fake, monkeypatch, nbytes):
    """The worker's growable pinned result buffer: any multiple of 8 bytes views as uint64 after
    growth (the H200 run of session 5 found a grown size of 92457 bytes, not a whole word)."""
    import cuzk._stages._cuda as sc
    _install_stages(fake, monkeypatch)
    pin = sc._Pinned(fake.Device.get(0))
    pin.warm(4096)
    words = pin.get(nbytes).asarray(np.uint64)
    assert words.nbytes >= nbytes and words.nbytes % 4096 == 0
    assert pin.get(nbytes // 2) is pin.get(nbytes)               # never shrinks or regrows
    pin.close()


@pytest.mark.parametrize("nbytes,src_bytes,chunk,slots", [(1000, 1000, 64, 3), (1000, 333, 64, 2),
                                                        (64, 64, 64, 4), (5, 0, 64, 1), (4096, 4000, 1000, 3)])
def test_staging_ring_uploads(fake, monkeypatch, nbytes, src_bytes, chunk, slots):
    """The pinned staging ring: any size through few small slots (each refilled only after its
    event), zero padding past the source, host memory slots × chunk whatever the size."""
    import cuzk._stages._cuda as sc
    _install_stages(fake, monkeypatch)
    dev = fake.Device.get(0)
    rng = np.random.default_rng(nbytes + src_bytes)
    src = rng.integers(0, 256, size=src_bytes, dtype=np.uint8)
    ring = sc._Ring(dev, slots=slots, chunk=chunk)
    buf = fake.MemPool(dev).alloc(nbytes, None)
    dst = buf.ptr
    seen = []
    ring.put(dst, src, nbytes, None, progress=seen.append)
    back = np.empty(nbytes, np.uint8)
    fake.copy_dtoh(back, dst, nbytes, None)
    want = np.zeros(nbytes, np.uint8)
    want[:src_bytes] = src
    assert np.array_equal(back, want)
    assert sum(seen) == nbytes and max(seen) <= chunk
    assert ring.allocated == slots * chunk
    with pytest.raises(ValueError, match="do not fit"):
        ring.put(dst, np.zeros(nbytes + 1, np.uint8), nbytes, None)
    ring.close()
    assert ring.allocated == 0
    buf.free()


def test_resident_key_round_trips(fake, monkeypatch, tmp_path):
    """A .params file read on the CPU and made resident: every query copied back from the device
    has the decoded bytes (the loader's chunked pinned staging, H table included)."""
    from cuzk._circuit import porep_like
    from cuzk._keygen import keygen_random
    from cuzk._params import read_params, write_params
    from cuzk._stages._cuda import QUERIES, CudaStages, _STAGE_CHUNK
    import cuzk._stages._cuda as sc
    _install_stages(fake, monkeypatch)
    monkeypatch.setattr(sc, "_STAGE_CHUNK", 4096)          # many chunks through both slots
    r1cs, inputs, aux = porep_like(7, 6)
    path = tmp_path / "k.params"
    write_params(str(path), keygen_random(r1cs, seed=6))
    pk = read_params(str(path))
    st = CudaStages(threads=1, b_g2="gpu")
    key = st.load_key(pk)
    s = fake.Stream(st.device)
    for q, (attr, _) in QUERIES.items():
        host = getattr(pk, attr)
        back = np.empty_like(host)
        fake.copy_dtoh(back, key.ptr(q), host.nbytes, s)
        assert np.array_equal(back, host), q
    key.release()
    assert _STAGE_CHUNK >= 1 << 20


@pytest.mark.parametrize("where", ["device", "host"])
def test_key_release_frees_the_h_tables_it_built(fake, monkeypatch, where):
    """A key holds the H stage's twiddle tables (its reservation counts them): keys of one size
    share them, the last release frees what the holds built, and tables built outside any hold
    (a one-shot transform) stay cached.  Before session 46 a key's tables outlived it: the next
    engine's budget did not see them and admitted memory the card did not have."""
    from cuzk import _cuda_ntt
    from cuzk._circuit import porep_like
    from cuzk._keygen import keygen_random
    from cuzk._stages._cuda import CudaStages, device_budget
    _install_stages(fake, monkeypatch)
    r1cs, _, _ = porep_like(7, 6)
    pk = keygen_random(r1cs, seed=6)
    st = CudaStages(threads=1, b_g2="gpu", stream_chunk=64 * 192)
    nst = _cuda_ntt._state(st.device)
    lg = pk.domain_size.bit_length() - 1
    k1 = st.load_key(pk, where=where)
    k2 = st.load_key(pk, where=where)
    deep = k1.deep_tables
    held = [(lg, kind, deep) for kind in _cuda_ntt.H_TABLES]
    assert nst.held_h_tables() == {(lg, deep): 2}
    bufs = [nst._tables[t] for t in held]
    k1.release()
    k1.release()                                    # idempotent: one hold given up, once
    assert nst.held_h_tables() == {(lg, deep): 1}
    assert all(nst._tables.get(t) is b for t, b in zip(held, bufs))
    nst.hold_h_tables(lg, deep=deep, build=False)   # a use beside the key: the last one frees
    k2.release()
    assert nst.held_h_tables() == {(lg, deep): 1} and not any(b.closed for b in bufs)
    nst.release_h_tables(lg, deep)
    assert nst.held_h_tables() == {}
    assert all(t not in nst._tables for t in held) and all(b.closed for b in bufs)
    assert device_budget(st.device).used == 0
    # a table built outside any hold (a one-shot transform) outlives the next key's release
    s = fake.Stream(st.device)
    own = nst.table(lg, "inv", s, deep)
    k3 = st.load_key(pk, where=where)
    k3.release()
    assert nst._tables.get((lg, "inv", deep)) is own and not own.closed
    assert (lg, "wfwd", deep) not in nst._tables         # that one the hold built
    with pytest.raises(RuntimeError, match="released more often"):
        nst.release_h_tables(lg, deep)


# ---- stream order: the stages' waits checked by running the streams out of order ---------------

_REORDER_CASES = {      # name: (log_n, CudaStages options, how the key is loaded,
    #                             the engine's (workers, lock mode) or None: no engine)
    "early": (6, {}, "device", None),
    "normal": (6, {"early_h": False}, "device", None),
    "one-stream": (6, {"streams": 1, "early_h": False}, "device", None),
    "side-scratch": (8, {"early_h": False}, "device", None),
    "streamed": (6, {"stream_chunk": 64 * 192}, "host", None),
    "streamed-h3": (6, {"stream_chunk": 64 * 192, "h_buffers": 3}, "host", None),
    "streamed-h2": (6, {"stream_chunk": 64 * 192, "h_buffers": 2}, "host", None),
    "streamed-h2-register": (6, {"stream_chunk": 64 * 192, "h_buffers": 2, "c_upload": "register"},
                             "host", None),
    "partly-split": (6, {"stream_chunk": 64 * 192, "split_side": True}, ("h", "l"), None),
    "partly-split-refill": (8, {"stream_chunk": 64 * 192, "split_side": True}, ("h", "l"), None),
    "engine": (6, {}, "device", (2, "two-lock")),
    "engine-streamed": (6, {"stream_chunk": 64 * 192}, "host", (2, "two-lock")),
    "engine-narrow": (6, {}, "device", (2, "narrow")),
    "engine-coarse-streamed": (6, {"stream_chunk": 64 * 192}, "host", (2, "coarse")),
    "engine3-streamed-h2": (6, {"stream_chunk": 64 * 192, "h_buffers": 2}, "host", (3, "two-lock")),
    # a partly resident key that keeps H: the early path (H's MSM before prep_msm, the streamed
    # chunks through the slots after it), H in 4 or 2 buffers, alone and in the engine
    "partly-early": (6, {"stream_chunk": 64 * 192}, ("h", "l"), None),
    "partly-early-h2": (6, {"stream_chunk": 64 * 192, "h_buffers": 2, "c_upload": "register"}, ("h",), None),
    "engine-partly": (6, {"stream_chunk": 64 * 192}, ("h", "b_g1", "b_g2"), (2, "two-lock")),
    # overlap: the next partition's region enqueued while this one's runs (no lock through sync)
    "engine-overlap": (6, {}, "device", (2, "overlap")),
    "engine-overlap-streamed": (6, {"stream_chunk": 64 * 192}, "host", (2, "overlap")),
    "engine3-overlap-streamed-h2": (6, {"stream_chunk": 64 * 192, "h_buffers": 2}, "host",
                                    (3, "overlap")),
    "engine-overlap-partly": (6, {"stream_chunk": 64 * 192}, ("h", "b_g1", "b_g2"), (2, "overlap")),
}


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("case", list(_REORDER_CASES))
def test_stream_order_reordered(fake, monkeypatch, case, seed):
    """The stages' proofs with the emulated streams run out of order (``FakeDriver.reordered``:
    each stream in order, after the events it waits for, otherwise in a random interleaving, and
    a host wait runs only what it needs): every proof has the CPU backend's bytes, for the
    early, normal and one-stream plans, the tails' scratch in a, b, c's buffer, a streamed key
    (H in 4, 3 and 2 buffers; c through the ring or page-locked in place), a partly resident
    key with its side stream (its slots refilled or not), and the engine's workers (two or
    three, each lock mode) sharing a resident or a streamed key.  In call order (every other
    test here) a missing event wait, a buffer reused while another stream may still use it, or
    a host read before its copy is waited for cannot show; here it gives other bytes or an
    emulator error (checked by removing the compute stream's wait for the side stream's last
    mark: every seed with a side stream fails; and the streamed key's wait before a slot
    refill: every case that refills a slot fails)."""
    import cuzk
    import cuzk._stages._cuda as sc
    from cuzk._budget import Budget
    from cuzk._circuit import porep_like
    from cuzk._keygen import keygen_random
    from cuzk._prover import prove
    from cuzk._stages._cuda import CudaStages, StreamedKey
    _install_stages(fake, monkeypatch)
    monkeypatch.setattr(sc, "_pins", {})
    monkeypatch.setattr(fake, "registered", {})       # this test's page-locks only
    log_n, opts, where, engine = _REORDER_CASES[case]
    r1cs, inputs, aux = porep_like(log_n, 30 + seed)
    pk = keygen_random(r1cs, seed=30 + seed)
    asg = r1cs.assignment(inputs, aux)
    rs = [(70 + i, 80 + i) for i in range(3)]
    st = CudaStages(threads=1, b_g2="gpu", **opts)
    p = (0.02, 0.1, 0.3)[seed % 3]          # how eagerly queued work runs between host waits
    with fake.reordered(seed, p=p) as order:
        if engine:
            workers, mode = engine
            if where == "host":
                _keys_in_host(st, monkeypatch)
            elif isinstance(where, tuple):
                _keys_split(monkeypatch, where)
            with cuzk.Engine(backend="cpu", devices=1, workers_per_gpu=workers,
                             lock_mode=mode, stages=lambda i: st, threads=1) as eng:
                key = eng.load(pk, progress=False)
                out = eng.submit(key, [asg] * len(rs), randomizers=rs).result(600)
            got = [out[192 * i:192 * (i + 1)] for i in range(len(rs))]
        else:
            budget = Budget(None, "reordered")
            ctx = st.context(budget=budget)
            if isinstance(where, tuple):
                key = StreamedKey(pk, st.device, st.pool, budget, opts["stream_chunk"], 3,
                                  resident=where, h_head=opts.get("split_side", False),
                                  h_buffers=opts.get("h_buffers", 4))
            else:
                key = st.load_key(pk, budget=budget, where=where)
            try:
                got = [st.prove_one(key, asg, ctx, r, s_)[0] for r, s_ in rs[:2]]
            finally:
                key.release()
                ctx.close()
            assert budget.used == 0
        assert order.out_of_order > 0               # it did run out of call order
    assert got == [prove(pk, asg, r, s_, backend="cpu") for r, s_ in rs[:len(got)]], (case, seed)
    assert not sc._pins and not fake.registered
