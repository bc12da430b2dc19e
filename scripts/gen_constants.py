"""Derive the BLS12-381 constants of cuzk/_native/include/cuzk/bls12_381_constants.hpp and of
cuzk/_constants.py (the Python side) and check them.

Run: python scripts/gen_constants.py             (checks both, exit 1 on mismatch)
     python scripts/gen_constants.py --print     (prints the C constant block)
     python scripts/gen_constants.py --print-py  (prints the Python literals)
"""
import ast
import re
import sys
from pathlib import Path

P = 0x1a0111ea397fe69a4b1ba7b6434bacd764774b84f38512bf6730d2a0f6b0f6241eabfffeb153ffffb9feffffffffaaab
R = 0x73eda753299d7d483339d80809a1d80553bda402fffe5bfeffffffff00000001
X = -0xd201000000010000  # BLS parameter
assert (X - 1) ** 2 * (X ** 4 - X ** 2 + 1) // 3 + X == P
assert X ** 4 - X ** 2 + 1 == R
HEADER = Path(__file__).resolve().parents[1] / "cuzk/_native/include/cuzk/bls12_381_constants.hpp"
PY_MODULE = Path(__file__).resolve().parents[1] / "cuzk/_constants.py"


def limbs(v, n):
    return [(v >> (64 * i)) & (2**64 - 1) for i in range(n)]


def fmt(v, n):
    return "{" + ", ".join(f"0x{x:016x}" for x in limbs(v, n)) + "}"


def field(name, m, n):
    rr = 1 << (64 * n)
    return {
        f"{name}_MOD": fmt(m, n),
        f"{name}_ONE": fmt(rr % m, n),                       # R mod m
        f"{name}_RR": fmt(rr * rr % m, n),                   # R^2 mod m
        f"{name}_M0": f"0x{(-pow(m, -1, 2**64)) % 2**64:016x}",  # -m^-1 mod 2^64
    }


def constants():
    c = {}
    c.update(field("FQ", P, 6))
    c.update(field("FR", R, 4))
    # Fr: two-adicity 32, roots of unity from generator 7 (bellperson/arkworks convention)
    s = ((R - 1) & -(R - 1)).bit_length() - 1
    assert s == 32
    w = pow(7, (R - 1) >> s, R)
    c["FR_ROOT_OF_UNITY"] = fmt(w * 2**256 % R, 4)          # Montgomery form, order 2^32
    c["FR_GENERATOR"] = fmt(7 * 2**256 % R, 4)
    c["FR_TWO_ADICITY"] = str(s)
    # exponents (canonical, not Montgomery) used by inversion and square roots
    c["FQ_P_MINUS_2"] = fmt(P - 2, 6)
    c["FQ_P_PLUS_1_DIV_4"] = fmt((P + 1) // 4, 6)
    c["FQ_P_MINUS_3_DIV_4"] = fmt((P - 3) // 4, 6)
    c["FQ_P_MINUS_1_DIV_2"] = fmt((P - 1) // 2, 6)
    c["FR_R_MINUS_2"] = fmt(R - 2, 4)
    c["FR_R_MINUS_1_DIV_2"] = fmt((R - 1) // 2, 4)
    c["FQ_B_G1"] = fmt(4 * 2**384 % P, 6)                   # y^2 = x^3 + 4, Montgomery
    # G1 generator (affine, Montgomery) and G2 generator
    g1x = 0x17f1d3a73197d7942695638c4fa9ac0fc3688c4f9774b905a14e3a3f171bac586c55e83ff97a1aeffb3af00adb22c6bb
    g1y = 0x08b3f481e3aaa0f1a09e30ed741d8ae4fcf5e095d5d00af600db18cb2c04b3edd03cc744a2888ae40caa232946c5e7e1
    c["G1_GEN_X"] = fmt(g1x * 2**384 % P, 6)
    c["G1_GEN_Y"] = fmt(g1y * 2**384 % P, 6)
    g2 = [0x024aa2b2f08f0a91260805272dc51051c6e47ad4fa403b02b4510b647ae3d1770bac0326a805bbefd48056c8c121bdb8,
          0x13e02b6052719f607dacd3a088274f65596bd0d09920b61ab5da61bbdc7f5049334cf11213945d57e5ac7d055d042b7e,
          0x0ce5d527727d6e118cc9cdc6da2e351aadfd9baa8cbdd3a76d429a695160d12c923ac9cc3baca289e193548608b82801,
          0x0606c4a02ea734cc32acd2b02bc28b99cb3e287e85a763af267492ab572e99ab3f370d275cec1da1aaa9075ff05f79be]
    for name, v in zip(("G2_GEN_X0", "G2_GEN_X1", "G2_GEN_Y0", "G2_GEN_Y1"), g2):
        c[name] = fmt(v * 2**384 % P, 6)
    # sanity: generators on their curves
    assert (g1y**2 - g1x**3 - 4) % P == 0
    return c


def py_constants():
    """The integer literals of cuzk/_constants.py, derived."""
    s = ((R - 1) & -(R - 1)).bit_length() - 1
    for g in (7, 5):  # quadratic non-residues: g^((r-1)/2^s) has order exactly 2^s
        assert pow(g, (R - 1) // 2, R) == R - 1
    return {
        "FR_MODULUS": R,
        "FQ_MODULUS": P,
        "FR_BYTES": (R.bit_length() + 63) // 64 * 8,
        "FQ_BYTES": (P.bit_length() + 7) // 8,
        "FR_MONT_R": 2**256 % R,
        "FR_MONT_R_INV": pow(2**256, -1, R),
        "FQ_MONT_R": 2**384 % P,
        "FQ_MONT_R_INV": pow(2**384, -1, P),
        "FR_TWO_ADICITY": s,
        "FR_GENERATOR": 7,          # bellperson / blstrs / arkworks
        "SNARKJS_FR_GENERATOR": 5,  # ffjavascript
    }


def render():
    return "\n".join(f"#define CUZK_{k} {v}" for k, v in constants().items())


def render_py():
    return "\n".join(f"{k} = {v:#x}" if v > 64 else f"{k} = {v}" for k, v in py_constants().items())


def module_literals(path):
    """NAME -> int for every top-level ``NAME = <int literal>`` of a Python module (not imported)."""
    out = {}
    for node in ast.parse(path.read_text()).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Constant)
                and type(node.value.value) is int):
            out[node.targets[0].id] = node.value.value
    return out


def check_header():
    text = HEADER.read_text()
    bad = 0
    for k, v in constants().items():
        m = re.search(rf"^#define CUZK_{k} (.*)$", text, re.M)
        if not m or m.group(1).strip() != v:
            print(f"mismatch: CUZK_{k}: header {m.group(1) if m else None!r}, derived {v!r}")
            bad += 1
    return bad


def check_py(path=PY_MODULE):
    have = module_literals(path)
    bad = 0
    for k, v in py_constants().items():
        if have.get(k) != v:
            got = have.get(k)
            print(f"mismatch: {path.name}: {k} = {got if got is None else hex(got)}, derived {hex(v)}")
            bad += 1
    return bad


def main():
    if "--print" in sys.argv:
        print(render())
        return 0
    if "--print-py" in sys.argv:
        print(render_py())
        return 0
    bad = check_header() + check_py()
    print("ok" if not bad else f"{bad} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
