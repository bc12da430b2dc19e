"""prep_msm against a direct Python classification (independent of the C++ index arithmetic)."""
import numpy as np
import pytest

from cuzk._native._prep import popcount, prep_msm

from refs import R  # the moduli: one place (tests/refs.py)
RM = 2**256 % R


def to_mont(vals):
    out = np.zeros((len(vals), 4), dtype=np.uint64)
    for i, v in enumerate(vals):
        m = v * RM % R
        for k in range(4):
            out[i, k] = (m >> (64 * k)) & (2**64 - 1)
    return out


def limbs_to_int(row):
    return sum(int(x) << (64 * k) for k, x in enumerate(row))


def bits_to_words(bits):
    n = len(bits)
    w = np.zeros(max(1, (n + 63) // 64), dtype=np.uint64)
    for i, b in enumerate(bits):
        if b:
            w[i // 64] |= np.uint64(1 << (i % 64))
    return w


def reference(inputs, aux, a_bits, bi_bits, b_bits):
    n_in = len(inputs)
    spaces = {
        "l": [("aux", j) for j in range(len(aux))],
        "a": [("in", i) for i in range(n_in)] + [("aux", j) for j in range(len(aux)) if a_bits[j]],
        "b": [("in", i) for i in range(n_in) if bi_bits[i]] + [("aux", j) for j in range(len(aux)) if b_bits[j]],
    }
    out = {}
    for q, space in spaces.items():
        ones, tail = set(), []
        for idx, (kind, j) in enumerate(space):
            v = inputs[j] if kind == "in" else aux[j]
            if kind == "in":
                tail.append((v, idx))
            elif v == 1:
                ones.add(idx)
            elif v != 0:
                tail.append((v, idx))
        out[q] = (ones, tail, len(space))
    return out


@pytest.mark.parametrize("form", ["canonical", "montgomery"])
@pytest.mark.parametrize("n_in,n_aux,threads", [(1, 0, 1), (3, 1, 1), (5, 200, 1), (7, 5000, 2),
                                                  (2, 300_000, 0), (4, 300_001, 3)])
def test_prep_matches_reference(n_in, n_aux, threads, form):
    rng = np.random.default_rng(n_aux + n_in)
    kind = rng.choice(3, size=n_aux, p=[0.45, 0.45, 0.10])
    aux = [0 if k == 0 else 1 if k == 1 else int(rng.integers(2, 2**62)) * int(rng.integers(1, 2**62)) % R
           for k in kind]
    inputs = [1] + [int(rng.integers(0, 3)) if i % 2 else int(rng.integers(0, 2**62)) for i in range(1, n_in)]
    a_bits = rng.random(n_aux) < 0.997
    b_bits = rng.random(n_aux) < 0.25
    bi_bits = rng.random(n_in) < 0.5
    got = prep_msm(to_mont(inputs), to_mont(aux), bits_to_words(a_bits), bits_to_words(bi_bits),
                   bits_to_words(b_bits), threads=threads, form=form)
    assert got["tail_form"] == form
    _check(got, reference(inputs, aux, a_bits, bi_bits, b_bits), form)


def _check(got, ref, form):
    """prep_msm's output == the Python classification (Montgomery tails: v·2^256 mod r)."""
    enc = (lambda v: v) if form == "canonical" else (lambda v: v * RM % R)
    for q in "lab":
        ones, tail, size = ref[q]
        words = got[q + "_ones"]
        assert got[q + "_size"] == size and got[q + "_n_ones"] == len(ones)
        assert len(words) == (size + 63) // 64
        assert {w * 64 + b for w in range(len(words)) for b in range(64) if (int(words[w]) >> b) & 1} == ones
        assert got[q + "_tail_idx"].dtype == np.uint32          # what the GPU MSM reads
        assert [int(i) for i in got[q + "_tail_idx"]] == [i for _, i in tail]
        assert [limbs_to_int(r) for r in got[q + "_tail_scalars"]] == [enc(v) for v, _ in tail]


@pytest.mark.parametrize("pattern", ["all_ones", "all_full", "all_zero", "runs", "alternate"])
@pytest.mark.parametrize("density", ["none", "all", "sparse"])
@pytest.mark.parametrize("n_aux,threads", [(63, 1), (64, 2), (200_003, 4)])
def test_prep_extreme_patterns(pattern, density, n_aux, threads):
    """Word-level edges of the fill pass: bitmaps all set or empty, densities none/all/sparse (the
    A and B ones are packed along the density bits and land at unaligned positions, across the
    chunks' shared words), a partial last word, several chunks."""
    rng = np.random.default_rng(n_aux + len(pattern) + 7 * len(density))
    full = lambda: int(rng.integers(2, 2**62)) * int(rng.integers(1, 2**62)) % R  # noqa: E731
    if pattern == "all_ones":
        aux = [1] * n_aux
    elif pattern == "all_full":
        aux = [full() for _ in range(n_aux)]
    elif pattern == "all_zero":
        aux = [0] * n_aux
    elif pattern == "runs":                       # long runs of each class, crossing words
        aux = [(0, 1, None)[(j // 97) % 3] for j in range(n_aux)]
        aux = [full() if v is None else v for v in aux]
    else:
        aux = [1 if j % 2 else full() for j in range(n_aux)]
    bits = {"none": np.zeros(n_aux, bool), "all": np.ones(n_aux, bool),
            "sparse": rng.random(n_aux) < 0.03}[density]
    inputs = [1, 5, 0]
    bi = np.array([True, False, True])
    b_bits = ~bits if density == "sparse" else bits
    got = prep_msm(to_mont(inputs), to_mont(aux), bits_to_words(bits), bits_to_words(bi),
                   bits_to_words(b_bits), threads=threads, form="montgomery")
    _check(got, reference(inputs, aux, bits, bi, b_bits), "montgomery")


def test_prep_rejects_bad_shapes():
    z = np.zeros((4, 4), np.uint64)
    with pytest.raises(ValueError, match="form"):
        prep_msm(z, z, np.zeros(1, np.uint64), np.zeros(1, np.uint64), np.zeros(1, np.uint64), form="mont")
    with pytest.raises(ValueError, match="aux"):
        prep_msm(z, np.zeros((4, 3), np.uint64), np.zeros(1, np.uint64), np.zeros(1, np.uint64), np.zeros(1, np.uint64))
    with pytest.raises(ValueError, match="a_aux"):
        prep_msm(z, np.zeros((200, 4), np.uint64), np.zeros(1, np.uint64), np.zeros(1, np.uint64), np.zeros(4, np.uint64))


def test_popcount_matches_numpy():
    """_prep.popcount (Density.popcount, popcount_words) against a bit-by-bit count: every
    prefix length across word edges, all-ones and empty vectors; bad shapes and lengths raise."""
    rng = np.random.default_rng(5)
    w = rng.integers(0, 2**64, size=9, dtype=np.uint64)
    bits = np.unpackbits(w.view(np.uint8), bitorder="little")
    for nbits in list(range(0, 130)) + [500, 575, 576]:
        assert popcount(w, nbits) == int(bits[:nbits].sum()), nbits
    assert popcount(w) == int(bits.sum())
    assert popcount(np.full(3, 2**64 - 1, np.uint64)) == 192
    assert popcount(np.zeros(0, np.uint64)) == 0
    with pytest.raises(ValueError, match="bits asked"):
        popcount(w, 577)
    with pytest.raises(ValueError, match="1-D"):
        popcount(w.reshape(3, 3))
