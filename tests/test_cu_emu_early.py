"""The CUDA backend's early path (``CudaStages.prove_one``, used by ``cuzk.prove``): the row
check, H NTT and H MSM enqueued before prep_msm, the batch additions and tail MSMs after its
upload.  Checked on the host emulator of tests/test_cu_emu.py (its fixtures are shared): the
bytes against the CPU backend and against the normal prepare / run / finish path, the order of
the enqueues, and the clean-up after failures injected at each step.  The slab bound
``tail_rows_bound`` is checked against every plan it must cover (no emulator needed).
"""
from types import SimpleNamespace

import pytest

from test_cu_emu import _install_stages, _keys_in_host

from cuzk import _cuda_msm


_CPU = {}


@pytest.fixture(scope="module")
def circuit():
    """A small PoRep-shaped circuit (2^7 domain), its key and a satisfying assignment."""
    from cuzk._circuit import porep_like
    from cuzk._keygen import keygen_random
    r1cs, inputs, aux = porep_like(7, 11)
    pk = keygen_random(r1cs, seed=11)
    _CPU.clear()
    return pk, r1cs.assignment(inputs, aux)


def cpu_proof(pk, asg, r, s):
    """The CPU backend's proof of the module's circuit (the reference bytes), once per (r, s)."""
    from cuzk._prover import prove
    if (r, s) not in _CPU:
        _CPU[r, s] = prove(pk, asg, r, s, backend="cpu")
    return _CPU[r, s]


def pool_buffers(fake):
    """Live device buffers taken from a pool (the fake driver's allocation table)."""
    return sum(1 for b in list(fake._live.values())
               if b.kind == "device" and getattr(b, "pool", None) is not None and not b.closed)


@pytest.mark.parametrize("b_g2,precompute", [("gpu", 1), ("cpu", 1), ("gpu", 2), ("cpu", 2), ("gpu", 16)])
def test_early_path_equals_cpu(fake, monkeypatch, circuit, b_g2, precompute):
    """cuzk.prove on CudaStages with a resident key takes the early path and gives the CPU
    backend's bytes for fixed (r, s), which verify; budget and pool are empty afterwards."""
    from cuzk._prover import prove, public_inputs
    from cuzk._stages._cuda import CudaStages, device_budget
    from cuzk._verifier import verify
    _install_stages(fake, monkeypatch)
    pk, asg = circuit
    st = CudaStages(threads=2, b_g2=b_g2, precompute=precompute)
    before = pool_buffers(fake)
    t = {}
    got = prove(pk, asg, r=111, s=222, stages=st, timings=t, verify=True)
    assert got == cpu_proof(pk, asg, 111, 222)
    assert verify(pk.vk, got, public_inputs(asg))
    assert t["overlap"] == "early" and t["backend"] == "cuda"
    # one stream marks the GPU's wait for prep_msm's upload; two (the default) the side's span
    marks = ("gpu:prep_wait",) if st.streams == 1 else ("gpu:side", "gpu:side_wait")
    for k in ("validate", "prep_msm", "upload", "region", "epilogue", "verify", "gpu:h_ntt",
              "gpu:h", "gpu:region") + marks:
        assert t[k] >= 0, k
    assert ("b_g2" in t) == (b_g2 == "cpu")
    assert device_budget(st.device).used == 0
    assert pool_buffers(fake) == before


def test_early_and_normal_paths_same_bytes(fake, monkeypatch, circuit):
    """The early path and the normal one (``early_h=False``: prepare / run / finish) give the
    same bytes for the same (r, s), on one context and key; only the early one says so in its
    timings, and both leave only the key reserved (one stream: the marks compared below are
    those of the compute stream)."""
    from cuzk._stages._cuda import CudaStages
    _install_stages(fake, monkeypatch)
    pk, asg = circuit
    st = CudaStages(threads=2, b_g2="gpu", precompute=2, streams=1)
    ctx = st.context()
    key = st.load_key(pk)
    try:
        early, te = st.prove_one(key, asg, ctx, 5, 6, verify=False)
        assert ctx.budget.used == key.nbytes
        st.early_h = False
        normal, tn = st.prove_one(key, asg, ctx, 5, 6, verify=False)
        assert ctx.budget.used == key.nbytes
    finally:
        key.release()
        ctx.close()
    assert early == normal == cpu_proof(pk, asg, 5, 6)
    assert te["overlap"] == "early" and "overlap" not in tn
    assert "gpu:prep_wait" in te and "gpu:prep_wait" not in tn
    # the same reductions, marked in the same order
    steps = [k for k in tn if k.startswith("gpu:")]
    assert [k for k in te if k.startswith("gpu:") and k != "gpu:prep_wait"] == steps


@pytest.mark.parametrize("streams", [1, 2])
def test_abc_scratch_same_bytes_smaller_reservation(fake, monkeypatch, circuit, streams):
    """``abc_scratch``: a, b, c in one buffer, the H MSM's scratch taken from it after the H NTT
    (``_Arena``). Early and normal paths give the CPU's bytes; a partition reserves the H MSM's
    scratch less (the largest of its plans' with one stream, H's share with two); budget and
    pool are back to the key afterwards.  (``side_scratch`` off: the tails' share of a, b, c's
    buffer is test_cu_emu.py's ``test_cuda_stages_b_g2_tail_takes_b_g1_sort``.)"""
    from cuzk._budget import Budget
    from cuzk._stages import _cuda as sc
    _install_stages(fake, monkeypatch)
    pk, asg = circuit
    reserved, arena = [], []
    real_reserve, real_alloc = Budget.reserve, sc._Arena.alloc

    def reserve(self, nbytes, what="", **kw):
        if "partition" in what:
            reserved[-1] += nbytes
        return real_reserve(self, nbytes, what, **kw)

    def alloc(self, nbytes, stream=None):
        arena.append(sc._align(nbytes))
        return real_alloc(self, nbytes, stream)
    monkeypatch.setattr(Budget, "reserve", reserve)
    monkeypatch.setattr(sc._Arena, "alloc", alloc)
    proofs, totals = {}, {}
    before = pool_buffers(fake)
    for abc in (False, True):
        st = sc.CudaStages(threads=2, b_g2="gpu", precompute=2, streams=streams, abc_scratch=abc,
                           side_scratch=False)
        ctx = st.context()
        key = st.load_key(pk)
        try:
            for early in (True, False):
                st.early_h = early
                reserved.append(0)
                proofs[abc, early], _ = st.prove_one(key, asg, ctx, 5, 6, verify=False)
                totals[abc, early] = reserved[-1]
                assert ctx.budget.used == key.nbytes
            n = sc.pow2_at_least(asg.a.shape[0])
            plan = st._h_plan(key, n)
        finally:
            key.release()
            ctx.close()
        assert bool(arena) == abc
    want = cpu_proof(pk, asg, 5, 6)
    assert all(p == want for p in proofs.values())
    # at 2^7 the H MSM's scratch (fixed per-bucket arrays) is larger than a, b, c: the arena
    # holds its first buffers, the pool the rest (at 2^27 the arena holds all 10.1 GiB)
    in_abc, beyond = sc._abc_split(plan.buffers, 3 * 32 * n)
    assert in_abc > 0 and beyond > 0 and in_abc + beyond == plan.scratch_bytes
    for early in (True, False):
        saved = totals[False, early] - totals[True, early]
        assert 0 < saved <= in_abc
        if streams == 2:
            assert saved == in_abc                        # H's scratch beside the others'
    assert sum(arena) == 2 * plan.scratch_bytes           # every request seen by the two arenas
    assert pool_buffers(fake) == before


def test_ones_kind_forces_the_batch_kernel(fake, monkeypatch, circuit):
    """Stage option ``ones_kind``: "auto" takes ``default_kind`` per query (group, points, bits
    set), a kernel name is every query's batch addition; every choice gives the CPU's bytes."""
    from cuzk import _cuda_batch
    from cuzk._stages._cuda import CudaStages
    _install_stages(fake, monkeypatch)
    pk, asg = circuit
    seen = []
    real_plan = _cuda_batch.batch_add_plan

    def spy(n_points, group, device=None, kind=None, n_set=None):
        p = real_plan(n_points, group, device, kind, n_set)
        if n_set is not None:                  # a partition's plan (not _result_words_bound's)
            seen.append((group, p.kind, _cuda_batch.default_kind(group, n_points, n_set)))
        return p
    monkeypatch.setattr(_cuda_batch, "batch_add_plan", spy)
    want = cpu_proof(pk, asg, 5, 6)
    for ones in ("auto",) + _cuda_batch.KINDS:
        st = CudaStages(threads=2, b_g2="gpu", ones_kind=ones)
        ctx = st.context()
        key = st.load_key(pk)
        try:
            seen.clear()
            proof, _ = st.prove_one(key, asg, ctx, 5, 6, verify=False)
        finally:
            key.release()
            ctx.close()
        assert proof == want, ones
        assert sorted(g for g, _, _ in seen) == ["g1", "g1", "g1", "g2"]
        assert all(k == (auto if ones == "auto" else ones) for _, k, auto in seen), (ones, seen)
    with pytest.raises(ValueError, match="ones_kind"):
        CudaStages(threads=2, ones_kind="fast")


@pytest.mark.parametrize("skewed", [False, True])
def test_tails_take_the_sampled_balance(fake, monkeypatch, circuit, skewed):
    """The tail MSMs' level 0 is chosen from a sample of their host scalars
    (``sampled_balance(..., indexed=True)``): uniform full values (porep_like's) take the wide
    balances of their size, "batch" for G1 and "affine" for G2 (thresholds lowered here to reach
    them at 2^7), mostly small ones stay "flat"; the bytes are the CPU's either way."""
    from cuzk._prover import prove
    from cuzk._stages._cuda import CudaStages
    _install_stages(fake, monkeypatch)
    monkeypatch.setattr(_cuda_msm, "_G1_BATCH_MIN", 1)
    monkeypatch.setattr(_cuda_msm, "_G2_AFFINE_UNIFORM_MIN", 1)
    if skewed:
        monkeypatch.setattr(_cuda_msm, "_skewed", lambda scalars, form: True)
    plans = []
    real_plan = _cuda_msm.msm_plan

    def spy(n, group="g1", *a, **kw):
        p = real_plan(n, group, *a, **kw)
        if kw.get("indexed") and "balance" in kw:   # the tails' plans (not tail_rows_bound's)
            plans.append((group, p.balance))
        return p
    monkeypatch.setattr(_cuda_msm, "msm_plan", spy)
    pk, asg = circuit
    got = prove(pk, asg, r=31, s=32, stages=CudaStages(threads=2, b_g2="gpu", precompute=1), verify=True)
    assert got == cpu_proof(pk, asg, 31, 32)
    assert {g for g, _ in plans} == {"g1", "g2"}
    want = {"g1": "flat", "g2": "flat"} if skewed else {"g1": "batch", "g2": "affine"}
    assert all(bal == want[g] for g, bal in plans), plans


def spy_launches_at_prep(st, monkeypatch, fake):
    """A list that gets, at each prep_msm call, the names of the kernels launched so far."""
    seen = []
    real = st.prep_msm

    def spy(*a, **kw):
        seen.append([name for name, *_ in fake.launches])
        return real(*a, **kw)
    monkeypatch.setattr(st, "prep_msm", spy)
    return seen


def assert_h_before_prep(before, fake):
    """``before`` (the launches when prep_msm ran) holds the H NTT and the H MSM (one windows
    kernel) and no batch addition; the launches after it, the batch additions and B_G2's MSM."""
    assert any(n.startswith("cuzk_ntt") for n in before)
    assert before.count("cuzk_msm_windows_g1") == 1         # the H MSM's last kernel, H whole
    assert not any("batch" in n for n in before)
    later = [name for name, *_ in fake.launches][len(before):]
    assert any("batch" in n for n in later) and "cuzk_msm_windows_g2" in later


def test_early_path_enqueues_h_before_prep(fake, monkeypatch, circuit):
    """prep_msm runs after the H NTT and the H MSM are enqueued and before any batch addition or
    tail MSM is (the emulator runs each launch when it is enqueued); the row check a∘b = c runs
    on the CPU once the region is enqueued."""
    from cuzk._stages._cuda import CudaStages
    _install_stages(fake, monkeypatch)
    pk, asg = circuit
    st = CudaStages(threads=2, b_g2="gpu")
    ctx = st.context()
    key = st.load_key(pk)
    seen = spy_launches_at_prep(st, monkeypatch, fake)
    try:
        del fake.launches[:]
        proof, t = st.prove_one(key, asg, ctx, 7, 8)
    finally:
        key.release()
        ctx.close()
    assert proof == cpu_proof(pk, asg, 7, 8)
    assert len(seen) == 1
    assert t["row_check"] >= 0
    assert_h_before_prep(seen[0], fake)


def test_early_path_starts_h_before_b_is_uploaded(fake, monkeypatch, circuit):
    """The early path uploads c's buffer not at all (H takes c = a∘b), and enqueues the part of
    H that needs a alone (A~: NTT passes) between a's upload and b's, so that it runs while b
    uploads; the bytes are the CPU's."""
    from cuzk._stages._cuda import CudaStages
    _install_stages(fake, monkeypatch)
    pk, asg = circuit
    st = CudaStages(threads=2, b_g2="gpu")
    ctx = st.context()
    key = st.load_key(pk)
    copies = []
    real = fake.copy_htod

    def copy(dst, src, nbytes, stream):
        copies.append((nbytes, len(fake.launches)))
        return real(dst, src, nbytes, stream)
    monkeypatch.setattr(fake, "copy_htod", copy)
    try:
        del fake.launches[:]
        del copies[:]
        proof, t = st.prove_one(key, asg, ctx, 7, 8, verify=False)
    finally:
        key.release()
        ctx.close()
    assert proof == cpu_proof(pk, asg, 7, 8)
    n_bytes = 32 << (asg.a.shape[0] - 1).bit_length()   # a and b padded to the domain
    abc = [at for nb, at in copies if nb == n_bytes][:2]  # one ring chunk each here
    assert len(abc) == 2, copies
    between = [name for name, *_ in fake.launches[abc[0]:abc[1]]]
    assert between and all(name.startswith("cuzk_ntt") for name in between), between
    assert t["upload"] >= 0 and t["row_check"] >= 0


def test_early_path_unsatisfied_assignment(fake, monkeypatch, circuit):
    """A changed row of c (never uploaded: H takes c = a∘b): the row check on the CPU beside the
    region reports the first bad row as UnsatisfiedAssignmentError, and no proof leaves; nothing
    stays reserved or allocated."""
    from cuzk._assignment import Assignment
    from cuzk._errors import UnsatisfiedAssignmentError
    from cuzk._prover import prove
    from cuzk._stages._cuda import CudaStages, device_budget
    _install_stages(fake, monkeypatch)
    pk, asg = circuit
    c = asg.c.copy()
    c[41], c[17] = c[40], c[16]
    bad = Assignment(**{f: getattr(asg, f) for f in asg.__dataclass_fields__ if f != "c"}, c=c)
    st = CudaStages(threads=2, b_g2="gpu")
    before = pool_buffers(fake)
    t = {}
    with pytest.raises(UnsatisfiedAssignmentError) as e:
        prove(pk, bad, 1, 2, stages=st, timings=t)
    assert e.value.row == 17
    assert device_budget(st.device).used == 0 and pool_buffers(fake) == before


def _fail_prep(st, monkeypatch, fake):
    def boom(*a, **kw):
        raise RuntimeError("injected: prep_msm")
    monkeypatch.setattr(st, "prep_msm", boom)


def _fail_second_upload(st, monkeypatch, fake):
    """The fifth staged copy (the first three are a, b, c; the fourth L's bitmap) fails after
    it is enqueued: some of the second upload's buffers and its reservation are held."""
    import cuzk._stages._cuda as sc
    real, calls = sc._Ring.put, []

    def put(self, *a, **kw):
        real(self, *a, **kw)
        calls.append(1)
        if len(calls) == 5:
            raise RuntimeError("injected: second upload")
    monkeypatch.setattr(sc._Ring, "put", put)


def _fail_tail_enqueue(st, monkeypatch, fake):
    """The second MSM enqueued (the first tail; H's is the first) fails, after L's batch
    addition was enqueued."""
    real, calls = _cuda_msm.enqueue_msm, []

    def enqueue(*a, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("injected: tail enqueue")
        return real(*a, **kw)
    monkeypatch.setattr(_cuda_msm, "enqueue_msm", enqueue)


@pytest.mark.parametrize("split", [False, True], ids=["resident", "split"])
@pytest.mark.parametrize("inject", [_fail_prep, _fail_second_upload, _fail_tail_enqueue],
                         ids=["prep_msm", "second_upload", "tail_enqueue"])
def test_early_path_failure_releases_everything(fake, monkeypatch, circuit, inject, split):
    """An error at each step after the H kernels are enqueued leaves nothing of the partition
    reserved and no pool buffer live (the key's aside), and the next partition on the same
    context and key proves; with a partly resident key that keeps H (``split``: A streamed in
    chunks), its slots are given back too (the tail's failure comes once they are taken)."""
    from cuzk._stages._cuda import CudaStages, StreamedKey
    _install_stages(fake, monkeypatch)
    pk, asg = circuit
    st = CudaStages(threads=2, b_g2="gpu")
    ctx = st.context()
    if split:
        key = StreamedKey(pk, st.device, st.pool, ctx.budget, 32 * 96, 3,
                          resident=("h", "l", "b_g1", "b_g2"))
    else:
        key = st.load_key(pk)
    try:
        with_key = pool_buffers(fake)
        with monkeypatch.context() as m:
            inject(st, m, fake)
            with pytest.raises(RuntimeError, match="injected"):
                st.prove_one(key, asg, ctx, 3, 4)
        assert ctx.budget.used == key.nbytes
        assert pool_buffers(fake) == with_key
        assert not (split and key._slot_lock.locked())
        proof, t = st.prove_one(key, asg, ctx, 3, 4)
        assert t["overlap"] == "early" and ctx.budget.used == key.nbytes
    finally:
        key.release()
        ctx.close()
    assert proof == cpu_proof(pk, asg, 3, 4)
    assert ctx.budget.used == 0


def test_streamed_key_takes_the_normal_path(fake, monkeypatch, circuit):
    """cuzk.prove with a key kept in host memory (StreamedKey) proves through the normal
    prepare / run / finish (no early path: its bases are streamed in query order)."""
    from cuzk._prover import prove
    from cuzk._stages._cuda import CudaStages, StreamedKey, device_budget
    _install_stages(fake, monkeypatch)
    pk, asg = circuit
    st = CudaStages(threads=2, b_g2="gpu")
    keys = _keys_in_host(st, monkeypatch)
    t = {}
    got = prove(pk, asg, 9, 10, stages=st, timings=t, verify=True)
    assert isinstance(keys[0], StreamedKey)
    assert got == cpu_proof(pk, asg, 9, 10)
    assert "overlap" not in t and "gpu:prep_wait" not in t and t["gpu:region"] >= 0
    assert device_budget(st.device).used == 0


# --------------------------------------------------------------------------- the slab bound

@pytest.mark.parametrize("sm_count", [4, 132])
@pytest.mark.parametrize("group", ["g1", "g2"])
def test_tail_rows_bound_covers_every_tail(sm_count, group):
    """``tail_rows_bound(N)`` >= the result rows of the tail plan of every size m <= N (all m up
    to 256, then the first m of each auto window width, the auto window width changes, up to 2^27), and is reached."""
    from cuzk._stages._cuda import tail_rows_bound
    dev = SimpleNamespace(sm_count=sm_count)

    def rows(m, n):
        return _cuda_msm.msm_plan(m, group, dev, npoints=n, indexed=True).host_rows
    # the first m of each auto width c (window_bits is nondecreasing: a binary search per c)
    firsts = {1}
    for c in range(_cuda_msm.window_bits(1) + 1, _cuda_msm.window_bits(1 << 27) + 1):
        lo, hi = 1, 1 << 27
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (mid + 1, hi) if _cuda_msm.window_bits(mid) < c else (lo, mid)
        firsts.add(lo)
    for n in (1, 3, 100, 3000, 10**4, 10**5, 1 << 20, 1 << 27):
        bound = tail_rows_bound(n, group, dev)
        ms = set(range(1, min(n, 256) + 1)) | {m for m in firsts if m <= n} | {n}
        got = max(rows(m, n) for m in ms)
        assert got == bound, (n, got, bound)


def test_tail_rows_bound_is_not_the_full_tail():
    """Why the bound tries every width: at 132 SMs a 10^4-point query's full tail (c = 10) has
    fewer result rows than a one-scalar tail (c = 3)."""
    from cuzk._stages._cuda import tail_rows_bound
    dev = SimpleNamespace(sm_count=132)
    full = _cuda_msm.msm_plan(10**4, "g1", dev, npoints=10**4, indexed=True).host_rows
    one = _cuda_msm.msm_plan(1, "g1", dev, npoints=10**4, indexed=True).host_rows
    assert full < one <= tail_rows_bound(10**4, "g1", dev)


def test_early_path_full_budget_falls_back(fake, monkeypatch, circuit):
    """When prep_msm's bytes do not fit the budget at once (other threads' partitions hold it),
    the early path gives back what it holds and proves on the normal path (one reservation that
    may wait holding nothing) instead of waiting while it holds a, b, c: same bytes, nothing left
    reserved, and the second reservation never waits."""
    from cuzk._errors import BudgetError
    from cuzk._stages._cuda import CudaStages
    _install_stages(fake, monkeypatch)
    pk, asg = circuit
    st = CudaStages(threads=2, b_g2="gpu")
    ctx = st.context()
    key = st.load_key(pk)
    real, seen = type(ctx.budget).reserve, []

    def reserve(budget, nbytes, what="", *, block=True, **kw):
        seen.append(block)
        if not block:
            raise BudgetError(f"{budget.name}: injected: {nbytes} bytes do not fit now")
        return real(budget, nbytes, what, block=block, **kw)
    try:
        with_key = pool_buffers(fake)
        with monkeypatch.context() as m:
            m.setattr(type(ctx.budget), "reserve", reserve)
            proof, t = st.prove_one(key, asg, ctx, 7, 8)
        assert seen == [True, False, True]      # a, b, c; prep's (refused); the normal path's
        assert "overlap" not in t
        assert ctx.budget.used == key.nbytes and pool_buffers(fake) == with_key
    finally:
        key.release()
        ctx.close()
    assert proof == cpu_proof(pk, asg, 7, 8)


# --------------------------------------------------------------------------- precompute "auto"

class _Free:
    def __init__(self, free):
        self.free = free


@pytest.mark.parametrize("lg,want", [(10, (1, None)), (15, (1, None)), (16, (16, 16)), (20, (16, 16)),
                                     (21, (8, 16)), (22, (8, 16)), (23, (4, None)), (24, (13, 20)),
                                     (25, (13, 20)), (26, (13, 20)), (27, (5, 20))])
def test_auto_h_msm_by_size(lg, want):
    """The measured choice per domain (cuzk/_stages/_cuda.py _AUTO_H) when the budget has room."""
    from cuzk._stages._cuda import auto_h_msm
    dev = SimpleNamespace(sm_count=132)
    n = 1 << lg
    assert auto_h_msm(n, n - 1, dev, None, 0) == want
    assert auto_h_msm(n, n - 1, dev, _Free(1 << 50), 1 << 30) == want


def test_auto_h_msm_fits_the_budget():
    """13 copies at c = 20 where they fit whole, else the next choice, its copies dropped (4 → 2 →
    1) until two partitions still fit beside the key; an explicit window is kept (and skips the
    13-copy choice); without copies the table's window (20 at 2^27) gives way to the cost model."""
    from cuzk._stages._cuda import auto_h_msm
    dev = SimpleNamespace(sm_count=132)
    n = 1 << 24
    H = (n - 1) * 96                        # bytes of one copy of the H bases
    part = 4 * n * 32                       # a partition's a, b, c and H output
    base = 10 << 30
    scratch = 6 << 30                       # > 2 x the H MSM's scratch (2.4 GiB at k = 4 with batch lanes)
    roomy = base + 3 * H + 2 * part + scratch
    assert auto_h_msm(n, n - 1, dev, _Free(base + 12 * H + 2 * part + scratch), base) == (13, 20)
    assert auto_h_msm(n, n - 1, dev, _Free(roomy), base) == (4, None)     # 13 copies do not fit: the next choice
    assert auto_h_msm(n, n - 1, dev, None, 0, c=16) == (4, 16)           # an explicit window skips (13, 20)
    k, _ = auto_h_msm(n, n - 1, dev, _Free(base + 2 * H + 2 * part + scratch), base)
    assert k == 2
    assert auto_h_msm(n, n - 1, dev, _Free(base + part), base) == (1, None)
    assert auto_h_msm(n, n - 1, dev, _Free(base + part), base, c=18) == (1, 18)
    n27 = 1 << 27
    assert auto_h_msm(n27, n27 - 1, dev, _Free(0), 0) == (1, None)
    assert auto_h_msm(n27, n27 - 1, dev, None, 0, c=16) == (4, 16)


def test_cuda_stages_precompute_default_is_auto(fake, monkeypatch, circuit):
    """CudaStages() defaults to precompute "auto"; a small key (2^7) gets no copies, an explicit
    k still does, and bad values are refused."""
    from cuzk._stages._cuda import CudaStages
    _install_stages(fake, monkeypatch)
    pk, _ = circuit
    st = CudaStages(threads=2)
    assert st.precompute == "auto"
    key = st.load_key(pk)
    try:
        assert key.h_plan_args["k"] == 1 and key.precompute_bytes == 0
    finally:
        key.release()
    assert CudaStages(threads=2, precompute="2").precompute == 2
    with pytest.raises(ValueError):
        CudaStages(threads=2, precompute=0)


def test_precompute_auto_only_for_lasting_keys(fake, monkeypatch, circuit):
    """precompute "auto" builds copies for a key that serves many partitions (the engine's
    load_key) and none for cuzk.prove's one-call key (their build takes ~140 partitions to repay
    at 2^27); an explicit k is honoured either way.  (The size table is patched so that the 2^7
    test key qualifies.)"""
    import cuzk._stages._cuda as sc
    from cuzk._prover import prove
    from cuzk._stages._cuda import CudaStages
    _install_stages(fake, monkeypatch)
    monkeypatch.setattr(sc, "_AUTO_H", ((1 << 4, (1, None)), (1 << 64, (2, None))))
    pk, asg = circuit
    st = CudaStages(threads=2, b_g2="gpu")
    seen = []
    real = sc.ResidentKey.__init__

    def init(self, *a, **kw):
        real(self, *a, **kw)
        seen.append(self.h_plan_args["k"])
    monkeypatch.setattr(sc.ResidentKey, "__init__", init)
    for lasting, want in ((True, 2), (False, 1)):
        st.load_key(pk, lasting=lasting).release()
        assert seen[-1] == want, lasting
    assert prove(pk, asg, 1, 2, stages=st) == cpu_proof(pk, asg, 1, 2) and seen[-1] == 1
    st2 = CudaStages(threads=2, b_g2="gpu", precompute=3)
    st2.load_key(pk, lasting=False).release()
    assert seen[-1] == 3


# ----------------------------------------------------------------------------- streams=2

@pytest.mark.parametrize("early", [True, False], ids=["early", "normal"])
def test_side_stream_same_bytes_and_budget(fake, monkeypatch, circuit, early):
    """``streams=2``: the batch additions and tail MSMs on the side stream give the CPU bytes on
    both paths; the timings name the side stream's span and the join, and after the partition
    only the key stays reserved."""
    from cuzk._stages._cuda import CudaStages
    _install_stages(fake, monkeypatch)
    pk, asg = circuit
    st = CudaStages(threads=2, b_g2="gpu", precompute=2, streams=2, early_h=early)
    ctx = st.context()
    key = st.load_key(pk)
    try:
        with_key = pool_buffers(fake)
        proof, t = st.prove_one(key, asg, ctx, 5, 6, verify=False)
        assert ctx.budget.used == key.nbytes and pool_buffers(fake) == with_key
    finally:
        key.release()
        ctx.close()
    assert proof == cpu_proof(pk, asg, 5, 6)
    assert t["gpu:side"] >= 0 and t["gpu:side_wait"] >= 0 and t["gpu:l:tail"] >= 0
    assert "gpu:prep_wait" not in t
    assert ("overlap" in t) == early


def test_side_stream_launches_and_join(fake, monkeypatch, circuit):
    """prepare / run with ``streams=2``: the region's launches are those of ``streams=1`` (same
    names, same count); NTTs, the row check and the H MSM on the compute stream, every batch
    addition and tail MSM on the side stream, which first waits for the partition's upload;
    the compute stream then waits for an event recorded on the side stream after its last
    launch, and the scratch reserved is H's plus the largest other (H's own buffers, not a, b,
    c's: ``abc_scratch`` off; test_abc_scratch_same_bytes_smaller_reservation covers it on)."""
    from collections import Counter
    from cuzk._stages._cuda import CudaStages, _pool_peaks
    _install_stages(fake, monkeypatch)
    pk, asg = circuit
    regions = {}
    for streams in (1, 2):
        st = CudaStages(threads=2, b_g2="gpu", streams=streams, abc_scratch=False)
        ctx = st.context()
        key = st.load_key(pk)
        try:
            part = st.prepare(key, asg, ctx, 1, 2)
            # (another test may have emptied fake.launches: launch_streams keeps its own count)
            lo, slo, wlo = len(fake.launches), len(fake.launch_streams), len(fake.waits)
            st.run(part)
            hi = len(fake.launches)
            names = [n for n, *_ in fake.launches[lo:hi]]
            regions[streams] = (names, fake.launch_streams[slo:slo + hi - lo], fake.waits[wlo:],
                                ctx, part, lo, hi, st)
            # the others' pool bytes at their peaks (a kept sort included: ``_pool_peaks``,
            # checked against the allocator in test_cu_emu_msm.py)
            pair = st._sort_share(part.plans)
            rest = _pool_peaks(part.plans[1:], 0, pair and (pair[0] - 1, pair[1] - 1))
            h = part.plans[0][2].scratch_bytes
            want = h + max(rest) if streams == 2 else max([h] + rest)
            assert part.scratch_reserved == want
            assert st.finish(part, verify=False) == cpu_proof(pk, asg, 1, 2)
        finally:
            key.release()
            ctx.close()
    one, two = regions[1][0], regions[2][0]
    assert Counter(one) == Counter(two)
    names, streams, waits, ctx, part, lo, hi, st = regions[2]
    stray = [(n, s) for n, s in zip(regions[1][0], regions[1][1]) if s is not regions[1][3].compute]
    assert not stray, stray
    on_side = [n for n, s in zip(names, streams) if s is ctx.side]
    on_comp = [n for n, s in zip(names, streams) if s is ctx.compute]
    assert len(on_side) + len(on_comp) == len(names)
    assert any("batch" in n for n in on_side) and not any("batch" in n for n in on_comp)
    assert any(n.startswith("cuzk_ntt") for n in on_comp) and not any(n.startswith("cuzk_ntt") for n in on_side)
    assert on_comp.count("cuzk_msm_windows_g1") == 1            # the H MSM alone
    assert "cuzk_msm_windows_g2" in on_side                     # the B_G2 tail
    side_waits = [e for s, e in waits if s is ctx.side]
    assert side_waits and side_waits[0].recorded[0] is ctx.upload
    last_side = lo + max(i for i, s in enumerate(streams) if s is ctx.side) + 1
    joins = [e for s, e in waits if s is ctx.compute and e.recorded[0] is ctx.side]
    assert joins and joins[-1].recorded[1] >= last_side


def test_abc_scratch_holds_the_2_27_h_msm():
    """``abc_scratch`` at 2^27 (132 SMs): the H MSM's whole scratch (k = 2: 10.1 GiB, k = 4: 9.5)
    fits in a, b, c's 12 GiB, so a partition reserves none beside them, and ``precompute="auto"``
    keeps its copies with room for two partitions' a, b, c and H output only."""
    from cuzk import _cuda_msm
    from cuzk._stages._cuda import _abc_split, _tails_allowance, auto_h_msm
    dev = SimpleNamespace(sm_count=132)
    n = 1 << 27
    for k in (2, 4, 5):
        plan = _cuda_msm.msm_plan(n - 1, "g1", dev, npoints=n - 1, k=k, c=20)
        assert _abc_split(plan.buffers, 3 * 32 * n) == (plan.scratch_bytes, 0)
    # a partition: a, b, c, H's output and the tails' allowance (prep_msm's output, a tail's scratch)
    H, part, base = (n - 1) * 96, 4 * n * 32 + _tails_allowance(n), 50 << 30
    free = _Free(base + H + 2 * part)
    assert auto_h_msm(n, n - 1, dev, free, base, abc_scratch=True) == (2, 20)
    assert auto_h_msm(n, n - 1, dev, free, base) == (1, None)
    # room for 4 copies beside two partitions' a, b, c and H output: only with abc_scratch (the
    # engine's default since session 14); without, the scratch beside them halves k to 2
    free = _Free(base + 3 * H + 2 * part)
    assert auto_h_msm(n, n - 1, dev, free, base, abc_scratch=True) == (4, 20)
    assert auto_h_msm(n, n - 1, dev, free, base) == (2, 20)
    # one copy more of room: 5 copies (Wk = 3, the bucket sets of 6), tried before 4
    free = _Free(base + 4 * H + 2 * part)
    assert auto_h_msm(n, n - 1, dev, free, base, abc_scratch=True) == (5, 20)
    # the H200 of session 23 (bench/RESULTS.md): key 56.07 GiB without copies, budget 137.8 GiB,
    # a PoRep-like partition reserves 19.04: 5 copies (104.07) leave 33.7 < 2 x 19.04, 4 fit
    gib = 1 << 30
    assert int((19.04 - 16) * gib) <= _tails_allowance(n) < int((19.04 - 16) * gib) + gib // 4
    assert auto_h_msm(n, n - 1, dev, _Free(int(137.8 * gib)), int(56.07 * gib), abc_scratch=True) == (4, 20)
    # session 24: the key's tables are 2 x 4 GiB (no inverse w table), 52.07 GiB without copies;
    # 5 copies (100.07) leave 37.7 GiB, still < 2 x (16 + the allowance): 4 on this card
    assert auto_h_msm(n, n - 1, dev, _Free(int(137.8 * gib)), int(52.07 * gib), abc_scratch=True) == (4, 20)
    # session 25, ``side_scratch``: the tails take their scratch from the 2.5-2.7 GiB of a, b, c's
    # buffer that H's MSM leaves, so a partition counts prep_msm's output only: 5 copies fit
    plan5 = _cuda_msm.msm_plan(n - 1, "g1", dev, npoints=n - 1, k=5, c=20)
    room = 3 * 32 * n - _abc_split(plan5.buffers, 3 * 32 * n)[0]
    assert room > 2 * gib and _tails_allowance(n, room) == _tails_allowance(n, 1 << 40) < 1.7 * gib
    assert auto_h_msm(n, n - 1, dev, _Free(int(137.8 * gib)), int(52.07 * gib), abc_scratch=True,
                      side_scratch=True) == (5, 20)
    assert auto_h_msm(n, n - 1, dev, _Free(int(137.8 * gib)), int(52.07 * gib), side_scratch=True) \
        == auto_h_msm(n, n - 1, dev, _Free(int(137.8 * gib)), int(52.07 * gib))   # no a, b, c buffer
    assert _abc_split([("x", 100), ("y", 300), ("z", 10)], 512) == (256, 768)   # y spills, z after it


def test_stream_chunk_bytes_by_budget():
    """A streamed key's slot size (``stream_chunk_bytes``): a share of what the budget leaves beside
    its tables and one partition (a, b, c, H's output, ``_tails_allowance``), so the partition and
    the slots fit; within [STREAM_CHUNK_MIN, STREAM_CHUNK_MAX]; the largest with no budget; room
    for more partitions in flight where each slot keeps STREAM_CHUNK_SHARED."""
    from cuzk._stages._cuda import (STREAM_CHUNK_MAX, STREAM_CHUNK_MIN, STREAM_CHUNK_SHARED,
                                    _tails_allowance, partition_bytes, stream_chunk_bytes)
    gib, n = 1 << 30, 1 << 27
    tables = 2 * n * 32                                  # the H stage's two twiddle tables: 8 GiB
    part = 4 * n * 32 + _tails_allowance(n)
    assert part == partition_bytes(n)
    assert stream_chunk_bytes(n, None, tables) == STREAM_CHUNK_MAX
    for free in (28 * gib, 30 * gib, 32 * gib, 40 * gib, 80 * gib):
        for slots in (2, 3):
            c = stream_chunk_bytes(n, free, tables, slots)
            assert STREAM_CHUNK_MIN <= c <= STREAM_CHUNK_MAX
            assert tables + part + slots * c <= free or c == STREAM_CHUNK_MIN
            assert c == STREAM_CHUNK_MAX or tables + part + slots * (c + 1) > free  # no larger fits
    assert stream_chunk_bytes(n, 20 * gib, tables) == STREAM_CHUNK_MIN       # too small: the floor
    # the 30 GiB budget of bench/RESULTS.md session 26 (a 32 GB card): 2 slots of 1.4 GiB, 3 (the
    # default) of 0.93
    assert 1.3 * gib < stream_chunk_bytes(n, 30 * gib, tables, 2) < 1.5 * gib
    assert abs(stream_chunk_bytes(n, 30 * gib, tables) - stream_chunk_bytes(n, 30 * gib, tables, 2) * 2 / 3) <= 1
    # ``partitions``: the slots leave room for that many partitions in flight while each slot
    # keeps STREAM_CHUNK_SHARED, else for fewer (down to one)
    for free in (40 * gib, 48 * gib, 52 * gib, 60 * gib, 80 * gib, 120 * gib):
        for p in (1, 2, 3):
            c = stream_chunk_bytes(n, free, tables, 3, p)
            fit = max(q for q in range(1, p + 1) if q == 1 or (free - tables - q * part) // 3 >= STREAM_CHUNK_SHARED)
            assert c == max(STREAM_CHUNK_MIN, min(STREAM_CHUNK_MAX, (free - tables - fit * part) // 3))
            assert fit == 1 or tables + fit * part + 3 * c <= free
    assert stream_chunk_bytes(n, 40 * gib, tables, 3, 2) == stream_chunk_bytes(n, 40 * gib, tables, 3, 1)
    assert stream_chunk_bytes(n, 60 * gib, tables, 3, 2) == STREAM_CHUNK_MAX     # 2 × 19.2 + 8 + 12
    assert STREAM_CHUNK_SHARED <= stream_chunk_bytes(n, 52 * gib, tables, 3, 2) < STREAM_CHUNK_MAX
    # ``room``: tails that take their scratch from a, b, c's buffer leave more for the slots; a
    # streamed 2^27 partition counts 17.6 GiB (reserved 17.02 in bench/RESULTS.md session 27), so
    # two fit in 48 GiB beside 3 slots of 1.6 GiB (not with the 19.2 GiB of no room)
    whole = 3 * n * 32
    assert partition_bytes(n, whole) == 4 * n * 32 + 2 * n * 32 // 5 < part
    assert stream_chunk_bytes(n, 48 * gib, tables, 3, 2) == stream_chunk_bytes(n, 48 * gib, tables, 3, 1)
    c = stream_chunk_bytes(n, 48 * gib, tables, 3, 2, whole)
    assert STREAM_CHUNK_SHARED <= c and tables + 2 * partition_bytes(n, whole) + 3 * c <= 48 * gib


# The PoRep-like key's query sizes at 2^27, as fractions of n affine G1 points (96 bytes each)
_POREP_QUERY_FRACTIONS = {"h": 0.99999, "l": 0.9668, "a": 0.9658, "b_g1": 0.2466, "b_g2": 0.4932}


def _porep_key_sizes_2_27():
    """A stand-in proving key with only the 2^27 PoRep-like key's domain and query byte sizes
    (what ``stream_plan`` reads)."""
    n = 1 << 27
    return SimpleNamespace(domain_size=n, **{q: SimpleNamespace(nbytes=int(f * n * 96))
                                             for q, f in _POREP_QUERY_FRACTIONS.items()})


@pytest.mark.parametrize("deep", [True, False])
def test_stream_plan_splits_a_key_by_budget(deep):
    """``stream_plan`` at 2^27 with the PoRep-like key's query sizes (H 12.0, L 11.6, A 11.6, B_G1
    2.96, B_G2 5.9 GiB; tables 1 GiB deep (a streamed key's default), 8 full; a streamed
    partition 17.6 GiB): the most partitions in flight whose slots keep STREAM_CHUNK_SHARED, then
    the split with the fewest chunks, then the most bytes resident; what it keeps, its slots and
    its partitions fit the budget."""
    from cuzk._stages._cuda import (STREAM_CHUNK_MAX, STREAM_CHUNK_MIN, STREAM_CHUNK_SHARED, _align,
                                    _tables_bytes, partition_bytes, stream_chunk_bytes, stream_plan)
    gib, n = 1 << 30, 1 << 27
    pk = _porep_key_sizes_2_27()
    room = 3 * n * 32
    size = {q: getattr(pk, q).nbytes for q in _POREP_QUERY_FRACTIONS}
    tables = _tables_bytes(n, deep)
    assert tables == (1 << 30) + 2 * (4 + 2 * 4096) * 32 + 4096 if deep else 8 * gib + 4096
    if deep:     # the 7 GiB the deep tables leave: more resident at 80 and 60, two in flight at 40
        expect = {80: (2, ("h", "l", "b_g1", "b_g2")), 60: (2, ("h",)), 48: (2, ()), 40: (2, ()),
                  36: (1, ()), 22: (1, ())}
    else:
        expect = {80: (2, ("h", "l")), 60: (2, ()), 48: (2, ()), 40: (1, ())}
    for free_gib, want in expect.items():
        p, kept = stream_plan(pk, free_gib * gib, 3, 2, room, deep)
        assert (p, kept) == want, free_gib
        left = free_gib * gib - tables - p * partition_bytes(n, room) - sum(_align(size[q]) for q in kept)
        assert left >= 3 * (STREAM_CHUNK_SHARED if p > 1 else 0)
    if deep:     # a 24 GB card (~22 GiB usable): one partition and three slots of over 1 GiB
        assert 22 * gib - tables - partition_bytes(n, room) > 3 * gib
        # with H in a, b, c's buffers (h_buffers=3: 3·n field elements, the tails' room 2·n):
        # slots of ~2.5 GiB there, and two partitions in flight from 32 GiB
        room3 = 2 * n * 32
        assert partition_bytes(n, room3, 3) == partition_bytes(n, room) - n * 32
        assert stream_chunk_bytes(n, 22 * gib, tables, 3, 1, room3, 3) > 2.4 * gib
        assert stream_plan(pk, 32 * gib, 3, 2, room3, deep, None, 3) == (2, ())
        assert stream_plan(pk, 30 * gib, 3, 2, room3, deep, None, 3) == (1, ())
        # a 16 GB card (15.6–16 GiB seen by the driver, less the 2 GiB margin: 13.6–14): one partition
        # only in a's and b's buffers (h_buffers=2: 2·n field elements, the tails' room n), with
        # slots of ~1 GiB; with 3 buffers it does not fit at all
        room2 = n * 32
        card16 = int(13.6 * gib)
        assert partition_bytes(n, room2, 2) == partition_bytes(n, room) - 2 * n * 32
        assert stream_chunk_bytes(n, card16, tables, 3, 1, room2, 2) > 0.9 * gib
        assert (card16 - tables - partition_bytes(n, room3, 3)) // 3 < STREAM_CHUNK_MIN
        assert stream_plan(pk, card16, 3, 2, room2, deep, None, 2) == (1, ())
        return
    # 80 GiB: streaming A and B (B_G1 and B_G2 go together) makes 6 chunks of 4 GiB (so does
    # streaming L and B, or H and L, …: the tie goes to the most bytes resident), all 12
    chunk = min(STREAM_CHUNK_MAX, (80 * gib - tables - 2 * partition_bytes(n, room)
                                   - sum(size[q] for q in ("h", "l"))) // 3)
    assert chunk == STREAM_CHUNK_MAX and sum(-(-size[q] // chunk) for q in ("a", "b_g1", "b_g2")) == 6
    assert sum(-(-size[q] // chunk) for q in size) == 12
    assert stream_plan(pk, 200 * gib, 3, 4, room, deep)[0] == 4      # more partitions when they fit
    assert stream_plan(pk, 20 * gib, 3, 2, room, deep) == (1, ())    # none fits: one, all streamed


def test_stream_sizing_defaults():
    """The documented defaults of ``stream_chunk_bytes`` (STREAM_SLOTS slots, one partition, no
    room, four H buffers) and ``stream_plan`` (also deep tables, ``room_h`` = ``room``): the
    one-argument calls equal the explicit ones, and each default is one that changes the answer
    somewhere (the PoRep-like 2^27 key of the test above, 20-120 GiB)."""
    from cuzk._stages._cuda import (STREAM_CHUNK_SHARED, STREAM_SLOTS, partition_bytes,
                                    stream_chunk_bytes, stream_plan)
    gib, n = 1 << 30, 1 << 27
    pk = _porep_key_sizes_2_27()
    tables, room = 2 * n * 32, 3 * n * 32
    frees = [g * gib for g in (20, 22, 26, 30, 36, 40, 48, 52, 60, 80, 120)]
    chunk = {f: stream_chunk_bytes(n, f, tables) for f in frees}
    assert chunk == {f: stream_chunk_bytes(n, f, tables, STREAM_SLOTS, 1, 0, 4) for f in frees}
    for other in ((STREAM_SLOTS + 1, 1, 0, 4), (STREAM_SLOTS, 2, 0, 4), (STREAM_SLOTS, 1, room, 4),
                  (STREAM_SLOTS, 1, 0, 3)):
        assert chunk != {f: stream_chunk_bytes(n, f, tables, *other) for f in frees}, other
    # two partitions whose slots keep exactly STREAM_CHUNK_SHARED: two, not one with larger slots
    exact = tables + 2 * partition_bytes(n) + 3 * STREAM_CHUNK_SHARED
    assert stream_chunk_bytes(n, exact, tables, 3, 2) == STREAM_CHUNK_SHARED
    assert stream_chunk_bytes(n, exact - 3, tables, 3, 2) == stream_chunk_bytes(n, exact - 3, tables, 3, 1)
    plan = {f: stream_plan(pk, f) for f in frees}
    assert plan == {f: stream_plan(pk, f, STREAM_SLOTS, 1, 0, True, None, 4) for f in frees}
    assert {p for p, _ in plan.values()} == {1}                # one partition asked for: one
    for other in ((STREAM_SLOTS, 2, 0, True, None, 4), (STREAM_SLOTS, 1, room, True, None, 4),
                  (STREAM_SLOTS, 1, 0, False, None, 4), (STREAM_SLOTS, 1, 0, True, None, 3),
                  (STREAM_SLOTS, 1, 0, True, room, 4)):
        assert plan != {f: stream_plan(pk, f, *other) for f in frees}, other


def test_h_whole_and_heads_by_placement():
    """``_h_whole``/``_heads``: H's bases are on the device whole for a resident key and for a
    partly resident one that keeps H (the H MSM then runs in the region's head, after the H NTT),
    not for one that streams H (its chunks interleave with the others')."""
    from cuzk._stages._cuda import _h_whole, _heads
    for where, resident, whole in (("device", (), True), ("host", ("h",), True),
                                   ("host", ("l", "h", "b_g1"), True), ("host", ("l", "a"), False),
                                   ("host", (), False)):
        key = SimpleNamespace(where=where, resident=resident)
        assert _h_whole(key) is whole and _heads(SimpleNamespace(key=key)) == int(whole), (where, resident)


def test_bench_single_paths(fake, monkeypatch, circuit):
    """``cuzk bench --single`` on the CUDA backend: cuzk.prove's one-call key on the early and the
    normal path, then cuzk.Prover's lasting key on the early path; every row verified, the same
    bytes as the CPU backend's for the bench's randomizers, the key released after each use."""
    import hashlib
    from cuzk._engine._bench import _randomizers, bench_single
    from cuzk._stages._cuda import CudaStages, device_budget
    _install_stages(fake, monkeypatch)
    monkeypatch.setattr("cuzk._backend.resolve_backend", lambda b: b)
    pk, asg = circuit
    loads = []
    real = CudaStages.load_key

    def spy(self, pk, *a, **kw):
        loads.append((self, kw.get("lasting", True)))
        return real(self, pk, *a, **kw)

    monkeypatch.setattr(CudaStages, "load_key", spy)
    before = pool_buffers(fake)
    rows = bench_single(7, 1, backend="cuda", threads=2, quiet=True, circuit=(pk, asg, None))
    assert [r["path"] for r in rows] == ["early", "normal", "prover"]
    assert [lasting for _, lasting in loads] == [False, True]
    assert all(r["verified"] and r["runs"] == 1 and r["backend"] == "cuda" for r in rows)
    rs = _randomizers(7, 0, 1)
    want = hashlib.sha256(b"".join(cpu_proof(pk, asg, r, s) for r, s in rs)).hexdigest()
    assert {r["sha256"] for r in rows} == {want}
    assert device_budget(loads[0][0].device).used == 0 and pool_buffers(fake) == before


@pytest.mark.parametrize("early,inject", [(True, None), (False, None), (True, _fail_second_upload),
                                          (True, _fail_tail_enqueue)],
                         ids=["early", "normal", "fail_second_upload", "fail_tail_enqueue"])
def test_reservation_released_after_its_frees_run(fake, monkeypatch, circuit, early, inject):
    """A partition gives its reservation back only once the host has waited for every
    stream-ordered free of its pool buffers, after a proof and after a failure: cuzk's pool lets
    no stream take bytes whose free is pending on another (``POOL_INTERNAL_DEPENDENCIES`` off),
    so bytes released earlier could be in the budget and not yet in the pool.  Checked at each
    release on the emulator's clocks."""
    import cuzk._budget as bud
    from cuzk._stages._cuda import CudaStages
    _install_stages(fake, monkeypatch)
    pk, asg = circuit
    frees, checked = [], []
    real_alloc, real_release = fake.MemPool.alloc, bud.Reservation.release

    def alloc(self, nbytes, stream):
        buf = real_alloc(self, nbytes, stream)
        real_free = buf.free

        def free(stream=None):
            s = stream if stream is not None else buf.stream
            real_free(stream)
            if s is not None and not getattr(s, "closed", False):
                frees.append((id(s), fake.ops[id(s)]))
        buf.free = free
        return buf

    def release(self):
        late = [(sid, at) for sid, at in frees if fake.host_vc.get(sid, 0) < at]
        assert not late, f"{self.what}: released before its frees ran on the streams {late}"
        checked.append(self.what)
        real_release(self)
    monkeypatch.setattr(fake.MemPool, "alloc", alloc)
    monkeypatch.setattr(bud.Reservation, "release", release)
    st = CudaStages(threads=2, b_g2="gpu", pool_deps=False)
    st.early_h = early
    assert st.pool.internal_dependencies is False
    ctx = st.context()
    key = st.load_key(pk)
    try:
        if inject is None:
            proof, t = st.prove_one(key, asg, ctx, 7, 8)
            assert proof == cpu_proof(pk, asg, 7, 8)
            assert ("overlap" in t) == early
        else:
            inject(st, monkeypatch, fake)
            with pytest.raises(RuntimeError, match="injected"):
                st.prove_one(key, asg, ctx, 7, 8)
    finally:
        key.release()
        ctx.close()
    assert any("partition" in w for w in checked), checked


@pytest.mark.parametrize("default", [True, False], ids=["default_on", "default_off"])
def test_pool_deps_option_sets_the_shared_pool(fake, monkeypatch, default):
    """cuzk's pool starts with ``POOL_INTERNAL_DEPENDENCIES`` (``CUZK_POOL_INTERNAL_DEPS``);
    the stage option ``pool_deps`` sets it for every user of the pool (an A/B knob); without
    it the pool keeps what it has."""
    from cuzk import _cuda_state
    from cuzk._stages import parse_stage_options
    from cuzk._stages._cuda import CudaStages
    _install_stages(fake, monkeypatch)
    monkeypatch.setattr(_cuda_state, "POOL_INTERNAL_DEPENDENCIES", default)
    assert CudaStages(threads=1).pool.internal_dependencies is default
    a = CudaStages(threads=1, **parse_stage_options(f"pool_deps={int(not default)}"))
    assert a.pool.internal_dependencies is (not default)
    b = CudaStages(threads=1)
    assert b.pool is a.pool and b.pool.internal_dependencies is (not default)
    CudaStages(threads=1, pool_deps=default)
    assert a.pool.internal_dependencies is default


@pytest.mark.parametrize("h_buffers", [4, 3, 2])
@pytest.mark.parametrize("resident", [("h",), ("h", "l", "b_g1", "b_g2"), ("l",)])
def test_partly_resident_key_keeping_h_takes_the_early_path(fake, monkeypatch, circuit, resident,
                                                            h_buffers):
    """A partly resident key (``StreamedKey(resident=...)``, as "auto" places a 2^27 key on an
    80 GB card) that keeps H takes the early path: the H NTT and the H MSM are enqueued before
    prep_msm and nothing else is; the streamed queries' chunks go through the slots after it (the
    slot lock given back); H in 4, 3 or 2 buffers.  A key that streams H proves on the normal
    path.  The CPU's bytes, twice on one context; only the key stays reserved."""
    from cuzk._budget import Budget
    from cuzk._stages._cuda import CudaStages, StreamedKey
    _install_stages(fake, monkeypatch)
    pk, asg = circuit
    st = CudaStages(threads=2, b_g2="gpu", stream_chunk=32 * 96)
    budget = Budget(None, "big")
    ctx = st.context(budget=budget)
    key = StreamedKey(pk, st.device, st.pool, budget, 32 * 96, 3, resident=resident,
                      h_buffers=h_buffers)
    assert len(key.chunks("a")) > 1                # a streams in chunks here
    seen = spy_launches_at_prep(st, monkeypatch, fake)
    early = "h" in resident
    try:
        for i in range(2):
            del fake.launches[:]
            del seen[:]
            proof, t = st.prove_one(key, asg, ctx, 5 + i, 6)
            assert proof == cpu_proof(pk, asg, 5 + i, 6)
            assert ("overlap" in t) == early and not key._slot_lock.locked()
            assert budget.used == key.nbytes
            assert t["gpu:key_upload"] >= 0 and t["gpu:region"] >= 0
            if early:
                assert_h_before_prep(seen[0], fake)
    finally:
        key.release()
        ctx.close()
    assert budget.used == 0
