"""Slow reference (Python big ints) of how snarkjs 0.7.6 builds a Groth16 proof from a .zkey and
a .wtns (``src/groth16_prove.js``), for tests only. The native provers are checked against it.

Conventions followed (snarkjs / ffjavascript sources):
- ``buildABC1``: A_T[c] = Σ coef·w[s] over the section-4 records of matrix 0 (B_T: matrix 1),
  coef = stored value / 2^512 mod r; C_T[c] = A_T[c]·B_T[c] (the zkey has no C matrix). Rows
  nConstraints..nConstraints+nPublic hold A[.][s] = 1 for the public signals (incl. the 1).
- Roots of unity (ffjavascript ``WasmField1`` constructor): nqr = the least quadratic non-residue
  counted up from 2 (5 for BLS12-381's r), w[32] = nqr^((r-1)/2^32), w[k] = w[k+1]^2.
- H scalars: for P in (A, B, C): coefficients = iFFT_n(P_T), multiplied by inc^i with
  inc = w[log n + 1] (``batchApplyKey``), FFT_n again → values at the odd points
  w_{2n}^(2j+1); H[j] = A_odd[j]·B_odd[j] - C_odd[j] (``joinABC``), no division by Z: the zkey's
  H bases are the odd Lagrange points of the doubled domain over δ (``zkey_new.js`` ``writeHs``).
- MSMs: A, B1, B2 over all of w; C over w[nPublic+1:]; H over the H scalars.
- Epilogue: πA = α + Σw·A + rδ₁, πB = β₂ + Σw·B2 + sδ₂,
  B1 = β₁ + Σw·B1 + sδ₁,
  πC = Σw·C + Σh·H + s·πA + r·B1 - rs·δ₁.
"""
from __future__ import annotations

import struct

import py_arkworks_bls12381 as ark

from cuzk._snarkjs import R, fr_to_ints, g1_from_mont, g2_from_mont

TWO_ADICITY = 32
_INV_R2 = pow(1 << 512, -1, R)


# --- field helpers ----------------------------------------------------------------------------

def least_qnr(p: int = R) -> int:
    """The least quadratic non-residue >= 2 mod p (ffjavascript's ``nqr``)."""
    n = 2
    while pow(n, (p - 1) // 2, p) != p - 1:
        n += 1
    return n


def roots_of_unity(gen: int = 5) -> list:
    """w[k] = a primitive 2^k-th root of unity, w[32] = gen^((r-1)/2^32), w[k] = w[k+1]^2."""
    w = [0] * (TWO_ADICITY + 1)
    w[TWO_ADICITY] = pow(gen, (R - 1) >> TWO_ADICITY, R)
    for k in range(TWO_ADICITY - 1, -1, -1):
        w[k] = w[k + 1] * w[k + 1] % R
    assert w[0] == 1 and w[1] == R - 1
    return w


def ntt(a: list, omega: int) -> list:
    """Natural-order DFT: out[j] = Σ a[i]·omega^(ij) (iterative radix 2, O(n log n))."""
    n = len(a)
    out = list(a)
    j = 0
    for i in range(1, n):                      # bit-reversal permutation
        bit = n >> 1
        while j & bit:
            j ^= bit
            bit >>= 1
        j |= bit
        if i < j:
            out[i], out[j] = out[j], out[i]
    length = 2
    while length <= n:
        wl = pow(omega, n // length, R)
        for start in range(0, n, length):
            wk = 1
            for k in range(length // 2):
                u, v = out[start + k], out[start + k + length // 2] * wk % R
                out[start + k] = (u + v) % R
                out[start + k + length // 2] = (u - v) % R
                wk = wk * wl % R
        length <<= 1
    return out


def intt(a: list, omega: int) -> list:
    n_inv = pow(len(a), -1, R)
    return [v * n_inv % R for v in ntt(a, pow(omega, -1, R))]


# --- witness-side vectors -------------------------------------------------------------------

def coefficient_list(zkey):
    """[(matrix, constraint, signal, coef)] with coef canonical (stored value / 2^512 mod r)."""
    vals = fr_to_ints(zkey.coeffs.value)
    return [(int(m), int(c), int(s), v * _INV_R2 % R)
            for m, c, s, v in zip(zkey.coeffs.matrix, zkey.coeffs.constraint,
                                  zkey.coeffs.signal, vals)]


def abc_evaluations(zkey, w: list, skip_public_rows: bool = False):
    """(A_T, B_T, C_T): A·w, B·w and their product, one entry per row of the domain."""
    n = zkey.domain_size
    a, b = [0] * n, [0] * n
    out = (a, b)
    rows_public = None
    if skip_public_rows:                       # a deliberately wrong variant, for negative tests
        rows_public = max(int(c) for c in zkey.coeffs.constraint) - zkey.n_public
    for m, c, s, coef in coefficient_list(zkey):
        if rows_public is not None and c >= rows_public:
            continue
        out[m][c] = (out[m][c] + coef * w[s]) % R
    c = [x * y % R for x, y in zip(a, b)]
    return a, b, c


def h_scalars(zkey, w: list, gen: int = 5, odd: bool = True, skip_public_rows: bool = False):
    """snarkjs's H MSM scalars: A·B - C at the odd points of the doubled domain."""
    n = zkey.domain_size
    lg = zkey.log_domain_size
    roots = roots_of_unity(gen)
    omega = roots[lg]
    inc = roots[lg + 1] if odd else 1
    evals = []
    for vals in abc_evaluations(zkey, w, skip_public_rows):
        coeffs = intt(vals, omega)
        t = 1
        for i in range(n):
            coeffs[i] = coeffs[i] * t % R
            t = t * inc % R
        evals.append(ntt(coeffs, omega))
    a, b, c = evals
    return [(x * y - z) % R for x, y, z in zip(a, b, c)]


def msm_scalars(zkey, w: list, **variant) -> dict:
    """The five MSM scalar vectors of a snarkjs proof: ``a``, ``b1``, ``b2``, ``c``, ``h``."""
    return {"a": list(w), "b1": list(w), "b2": list(w), "c": list(w[zkey.n_public + 1:]),
            "h": h_scalars(zkey, w, **variant)}


# --- curve helpers (py_arkworks_bls12381) -----------------------------------------------------

def g1_ark(pt):
    """(x, y) canonical ints or None → ark G1Point (checked: on curve, in subgroup)."""
    if pt is None:
        return ark.G1Point.identity()
    return ark.G1Point.from_xy_bytes_le(pt[0].to_bytes(48, "little") + pt[1].to_bytes(48, "little"))


def g2_ark(pt):
    if pt is None:
        return ark.G2Point.identity()
    (x0, x1), (y0, y1) = pt
    return ark.G2Point.from_xy_bytes_le(
        b"".join(v.to_bytes(48, "little") for v in (x0, x1, y0, y1)))


def g1_ints(p):
    b = p.to_xy_bytes_le()
    x, y = int.from_bytes(b[:48], "little"), int.from_bytes(b[48:], "little")
    return None if x == 0 and y == 0 else (x, y)


def g2_ints(p):
    b = p.to_xy_bytes_le()
    c = [int.from_bytes(b[48 * i:48 * i + 48], "little") for i in range(4)]
    return None if not any(c) else ((c[0], c[1]), (c[2], c[3]))


def g1_points(arr):
    return [g1_ark(g1_from_mont(row)) for row in arr]


def g2_points(arr):
    return [g2_ark(g2_from_mont(row)) for row in arr]


def _msm(cls, points, scalars):
    if not points:
        return cls.identity()
    return cls.multiexp_unchecked(points, [ark.Scalar(int(s)) for s in scalars])


# --- prover / verifier ------------------------------------------------------------------------

def prove(zkey, w: list, r: int = 0, s: int = 0, **variant):
    """A Groth16 proof (A, B, C) as affine canonical ints, computed the way snarkjs does."""
    sc = msm_scalars(zkey, w, **variant)
    alpha1, beta1, delta1 = (g1_ark(g1_from_mont(p))
                             for p in (zkey.alpha1, zkey.beta1, zkey.delta1))
    beta2, delta2 = g2_ark(g2_from_mont(zkey.beta2)), g2_ark(g2_from_mont(zkey.delta2))
    pa = _msm(ark.G1Point, g1_points(zkey.a), sc["a"])
    pb1 = _msm(ark.G1Point, g1_points(zkey.b1), sc["b1"])
    pb = _msm(ark.G2Point, g2_points(zkey.b2), sc["b2"])
    pc = _msm(ark.G1Point, g1_points(zkey.c), sc["c"])
    ph = _msm(ark.G1Point, g1_points(zkey.h), sc["h"])
    rs, ss = ark.Scalar(r % R), ark.Scalar(s % R)
    pa = pa + alpha1 + delta1 * rs
    pb = pb + beta2 + delta2 * ss
    pb1 = pb1 + beta1 + delta1 * ss
    pc = pc + ph + pa * ss + pb1 * rs - delta1 * ark.Scalar(r * s % R)
    return g1_ints(pa), g2_ints(pb), g1_ints(pc)


def vk_from_zkey(zkey) -> dict:
    """The verification key inside a zkey, in ``read_verification_key_json``'s shape."""
    return {"protocol": "groth16", "curve": "bls12381", "nPublic": zkey.n_public,
            "vk_alpha_1": g1_from_mont(zkey.alpha1), "vk_beta_2": g2_from_mont(zkey.beta2),
            "vk_gamma_2": g2_from_mont(zkey.gamma2), "vk_delta_2": g2_from_mont(zkey.delta2),
            "IC": [g1_from_mont(p) for p in zkey.ic]}


def verify(vk: dict, proof, public: list) -> bool:
    """snarkjs's check e(-A,B)·e(IC·pub, γ)·e(C, δ)·e(α, β) = 1, with arkworks pairings."""
    A, B, C = proof
    if len(public) != vk["nPublic"] or any(not 0 <= x < R for x in public):
        return False
    ic = [g1_ark(p) for p in vk["IC"]]
    cpub = ic[0]
    for p, x in zip(ic[1:], public):
        cpub = cpub + p * ark.Scalar(x)
    return ark.GT.pairing_check(
        [-g1_ark(A), cpub, g1_ark(C), g1_ark(vk["vk_alpha_1"])],
        [g2_ark(B), g2_ark(vk["vk_gamma_2"]), g2_ark(vk["vk_delta_2"]), g2_ark(vk["vk_beta_2"])])


# --- other snarkjs files (tests only) ---------------------------------------------------------

def read_r1cs(path) -> dict:
    """circom .r1cs (r1csfile): header and constraints [(A, B, C)] as {wire: canonical coef}."""
    data = open(path, "rb").read()
    assert data[:4] == b"r1cs"
    n_sections = struct.unpack_from("<I", data, 8)[0]
    pos, sec = 12, {}
    for _ in range(n_sections):
        sid, size = struct.unpack_from("<IQ", data, pos)
        sec[sid] = (pos + 12, size)
        pos += 12 + size
    off = sec[1][0]
    n8 = struct.unpack_from("<I", data, off)[0]
    prime = int.from_bytes(data[off + 4:off + 4 + n8], "little")
    n_wires, n_out, n_pub_in, n_prv_in = struct.unpack_from("<IIII", data, off + 4 + n8)
    n_labels, n_constraints = struct.unpack_from("<QI", data, off + 20 + n8)
    pos = sec[2][0]
    cons = []
    for _ in range(n_constraints):
        lcs = []
        for _ in range(3):
            (k,) = struct.unpack_from("<I", data, pos)
            pos += 4
            lc = {}
            for _ in range(k):
                (wire,) = struct.unpack_from("<I", data, pos)
                lc[wire] = int.from_bytes(data[pos + 4:pos + 4 + n8], "little")
                pos += 4 + n8
            lcs.append(lc)
        cons.append(tuple(lcs))
    return {"prime": prime, "n_wires": n_wires, "n_outputs": n_out, "n_pub_inputs": n_pub_in,
            "n_prv_inputs": n_prv_in, "n_labels": n_labels, "constraints": cons}


def binfile(magic: bytes, sections, version: int = 1, n_sections: int | None = None) -> bytes:
    """A binfileutils container from [(id, bytes)] in the given order."""
    out = bytearray(magic + struct.pack("<II", version,
                                        len(sections) if n_sections is None else n_sections))
    for sid, body in sections:
        out += struct.pack("<IQ", sid, len(body)) + body
    return bytes(out)


def split_binfile(data: bytes):
    """Inverse of :func:`binfile` for well-formed input: (magic, version, [(id, bytes)])."""
    magic, version, n = data[:4], *struct.unpack_from("<II", data, 4)
    pos, out = 12, []
    for _ in range(n):
        sid, size = struct.unpack_from("<IQ", data, pos)
        out.append((sid, data[pos + 12:pos + 12 + size]))
        pos += 12 + size
    return magic, version, out
