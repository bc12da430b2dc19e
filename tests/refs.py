"""Pure-Python BLS12-381 reference (big ints), independent of cuzk's C++ code.

Fields: Fr and Fq are ints mod R / P; Fq2 = Fq[u]/(u^2+1) elements are (c0, c1) tuples.
Curves: affine points are (x, y) tuples, the point at infinity is ``None``.
Formula sources: textbook affine chord-and-tangent; Fq2 square root by the "complex" method
(norm, then a square root in Fq) — deliberately a different algorithm from the C++ one.
Encodings: the zcash/bellperson convention (flags 0x80 compressed, 0x40 infinity, 0x20 sign).
Everything here is slow and simple; it exists to be obviously right.
"""
from __future__ import annotations

P = 0x1a0111ea397fe69a4b1ba7b6434bacd764774b84f38512bf6730d2a0f6b0f6241eabfffeb153ffffb9feffffffffaaab
R = 0x73eda753299d7d483339d80809a1d80553bda402fffe5bfeffffffff00000001
Z = -0xd201000000010000  # BLS parameter
H1 = (Z - 1) ** 2 // 3   # G1 cofactor
assert Z ** 4 - Z ** 2 + 1 == R and H1 * R == P - Z    # #E(Fq) = p + 1 - t, t = z + 1
R_FR = 1 << 256          # Montgomery radix of Fr
R_FQ = 1 << 384          # Montgomery radix of Fq

G1_GEN = (0x17f1d3a73197d7942695638c4fa9ac0fc3688c4f9774b905a14e3a3f171bac586c55e83ff97a1aeffb3af00adb22c6bb,
          0x08b3f481e3aaa0f1a09e30ed741d8ae4fcf5e095d5d00af600db18cb2c04b3edd03cc744a2888ae40caa232946c5e7e1)
G2_GEN = ((0x024aa2b2f08f0a91260805272dc51051c6e47ad4fa403b02b4510b647ae3d1770bac0326a805bbefd48056c8c121bdb8,
           0x13e02b6052719f607dacd3a088274f65596bd0d09920b61ab5da61bbdc7f5049334cf11213945d57e5ac7d055d042b7e),
          (0x0ce5d527727d6e118cc9cdc6da2e351aadfd9baa8cbdd3a76d429a695160d12c923ac9cc3baca289e193548608b82801,
           0x0606c4a02ea734cc32acd2b02bc28b99cb3e287e85a763af267492ab572e99ab3f370d275cec1da1aaa9075ff05f79be))


# ---- prime fields -----------------------------------------------------------
def sqrt_fq(a):
    """A square root of a in Fq, or None (p ≡ 3 mod 4)."""
    a %= P
    s = pow(a, (P + 1) // 4, P)
    return s if s * s % P == a else None


def fq_lex_largest(a):
    return a > (P - 1) // 2


# ---- Fq2 ----------------------------------------------------------------------
class Fq2Ops:
    """Fq2 arithmetic on (c0, c1) tuples."""
    zero, one = (0, 0), (1, 0)

    @staticmethod
    def add(a, b):
        return ((a[0] + b[0]) % P, (a[1] + b[1]) % P)

    @staticmethod
    def sub(a, b):
        return ((a[0] - b[0]) % P, (a[1] - b[1]) % P)

    @staticmethod
    def neg(a):
        return (-a[0] % P, -a[1] % P)

    @staticmethod
    def mul(a, b):
        return ((a[0] * b[0] - a[1] * b[1]) % P, (a[0] * b[1] + a[1] * b[0]) % P)

    @staticmethod
    def inv(a):
        n = pow(a[0] * a[0] + a[1] * a[1], -1, P) if (a[0] or a[1]) else 0
        return (a[0] * n % P, -a[1] * n % P)

    @staticmethod
    def pow(a, e):
        r = (1, 0)
        for bit in bin(e)[2:]:
            r = Fq2Ops.mul(r, r)
            if bit == "1":
                r = Fq2Ops.mul(r, a)
        return r

    @staticmethod
    def is_zero(a):
        return a[0] % P == 0 and a[1] % P == 0

    @staticmethod
    def sqrt(a):
        """A square root of a, or None ("complex" method: via the norm a0^2 + a1^2)."""
        a0, a1 = a[0] % P, a[1] % P
        if a1 == 0:
            s = sqrt_fq(a0)
            if s is not None:
                return (s, 0)
            s = sqrt_fq(-a0)              # a0 = -(s^2) = (s·u)^2
            return (0, s) if s is not None else None
        n = sqrt_fq(a0 * a0 + a1 * a1)
        if n is None:
            return None
        inv2 = pow(2, -1, P)
        for cand in ((a0 + n) * inv2, (a0 - n) * inv2):
            x0 = sqrt_fq(cand)
            if x0 is not None and x0 != 0:
                x1 = a1 * pow(2 * x0, -1, P) % P
                r = (x0, x1)
                if Fq2Ops.mul(r, r) == (a0, a1):
                    return r
        return None

    @staticmethod
    def lex_largest(a):
        """zcash: c1 decides unless zero, then c0."""
        return fq_lex_largest(a[1]) if a[1] else fq_lex_largest(a[0])


class FqOps:
    zero, one = 0, 1
    add = staticmethod(lambda a, b: (a + b) % P)
    sub = staticmethod(lambda a, b: (a - b) % P)
    neg = staticmethod(lambda a: -a % P)
    mul = staticmethod(lambda a, b: a * b % P)
    inv = staticmethod(lambda a: pow(a, -1, P) if a % P else 0)
    pow = staticmethod(lambda a, e: pow(a, e, P))
    is_zero = staticmethod(lambda a: a % P == 0)
    sqrt = staticmethod(sqrt_fq)
    lex_largest = staticmethod(fq_lex_largest)


class FrOps:
    zero, one = 0, 1
    add = staticmethod(lambda a, b: (a + b) % R)
    sub = staticmethod(lambda a, b: (a - b) % R)
    neg = staticmethod(lambda a: -a % R)
    mul = staticmethod(lambda a, b: a * b % R)
    inv = staticmethod(lambda a: pow(a, -1, R) if a % R else 0)
    pow = staticmethod(lambda a, e: pow(a, e, R))
    is_zero = staticmethod(lambda a: a % R == 0)


# ---- curves: y^2 = x^3 + b -----------------------------------------------------
class Curve:
    def __init__(self, name, F, b, gen, nbytes):
        self.name, self.F, self.b, self.gen = name, F, b, gen
        self.fbytes = nbytes            # bytes of one coordinate
        self.compressed_size = nbytes
        self.uncompressed_size = 2 * nbytes

    def on_curve(self, p):
        if p is None:
            return True
        F = self.F
        x, y = p
        return F.sub(F.mul(y, y), F.add(F.mul(F.mul(x, x), x), self.b)) == F.zero

    def neg(self, p):
        return None if p is None else (p[0], self.F.neg(p[1]))

    def add(self, p, q):
        F = self.F
        if p is None:
            return q
        if q is None:
            return p
        if p[0] == q[0]:
            if p[1] != q[1] or F.is_zero(p[1]):
                return None
            lam = F.mul(F.mul(F.mul(p[0], p[0]), (3, 0) if F is Fq2Ops else 3), F.inv(F.add(p[1], p[1])))
        else:
            lam = F.mul(F.sub(q[1], p[1]), F.inv(F.sub(q[0], p[0])))
        x = F.sub(F.sub(F.mul(lam, lam), p[0]), q[0])
        y = F.sub(F.mul(lam, F.sub(p[0], x)), p[1])
        return (x, y)

    def double(self, p):
        return self.add(p, p)

    def mul(self, p, k):
        if k < 0:
            return self.mul(self.neg(p), -k)
        r = None
        for bit in bin(k)[2:]:
            r = self.add(r, r)
            if bit == "1":
                r = self.add(r, p)
        return r

    def in_subgroup(self, p):
        return self.mul(p, R) is None

    def rhs(self, x):
        F = self.F
        return F.add(F.mul(F.mul(x, x), x), self.b)

    # ---- zcash encodings ----
    def _coord_bytes(self, v):
        if self.F is Fq2Ops:
            return v[1].to_bytes(48, "big") + v[0].to_bytes(48, "big")
        return v.to_bytes(48, "big")

    def _coord_from(self, b):
        if self.F is Fq2Ops:
            c1, c0 = int.from_bytes(b[:48], "big"), int.from_bytes(b[48:], "big")
            if c0 >= P or c1 >= P:
                raise ValueError("non-canonical")
            return (c0, c1)
        v = int.from_bytes(b, "big")
        if v >= P:
            raise ValueError("non-canonical")
        return v

    def encode(self, p, compressed):
        n = self.fbytes
        if p is None:
            return bytes([0xC0 if compressed else 0x40]) + bytes((n if compressed else 2 * n) - 1)
        if compressed:
            b = bytearray(self._coord_bytes(p[0]))
            b[0] |= 0x80 | (0x20 if self.F.lex_largest(p[1]) else 0)
            return bytes(b)
        return self._coord_bytes(p[0]) + self._coord_bytes(p[1])

    def decode(self, data, subgroup=False):
        """Decode zcash bytes (form chosen by length); ValueError with a reason if invalid."""
        n = self.fbytes
        data = bytes(data)
        if len(data) not in (n, 2 * n):
            raise ValueError("length")
        compressed = len(data) == n
        flags = data[0] & 0xE0
        if bool(flags & 0x80) != compressed:
            raise ValueError("flags")
        body = bytes([data[0] & 0x1F]) + data[1:]
        if flags & 0x40:
            if flags & 0x20 or any(body):
                raise ValueError("infinity")
            return None
        if compressed:
            x = self._coord_from(body)
            y = self.F.sqrt(self.rhs(x))
            if y is None:
                raise ValueError("not on curve")
            if self.F.lex_largest(y) != bool(flags & 0x20):
                y = self.F.neg(y)
        else:
            if flags & 0x20:
                raise ValueError("flags")
            x, y = self._coord_from(body[:n]), self._coord_from(body[n:])
            if not self.on_curve((x, y)):
                raise ValueError("not on curve")
        if subgroup and not self.in_subgroup((x, y)):
            raise ValueError("not in subgroup")
        return (x, y)


G1 = Curve("g1", FqOps, 4, G1_GEN, 48)
G2 = Curve("g2", Fq2Ops, (4, 4), G2_GEN, 96)
CURVES = {"g1": G1, "g2": G2}


# ---- limbs and Montgomery form ----------------------------------------------------
def limbs(v, n):
    return [(v >> (64 * i)) & (2**64 - 1) for i in range(n)]


def from_limbs(row):
    return sum(int(x) << (64 * i) for i, x in enumerate(row))


def to_mont(v, field):
    """Montgomery limbs of a field element: fr/fq ints, fq2 (c0, c1)."""
    if field == "fr":
        return limbs(v * R_FR % R, 4)
    if field == "fq":
        return limbs(v * R_FQ % P, 6)
    return limbs(v[0] * R_FQ % P, 6) + limbs(v[1] * R_FQ % P, 6)


def from_mont(row, field):
    if field == "fr":
        return from_limbs(row) * pow(R_FR, -1, R) % R
    if field == "fq":
        return from_limbs(row) * pow(R_FQ, -1, P) % P
    return (from_mont(row[:6], "fq"), from_mont(row[6:], "fq"))


def canonical_limbs(v, field):
    """Canonical (non-Montgomery) limbs: fr 4, fq 6, fq2 c0‖c1 12."""
    if field == "fq2":
        return limbs(v[0], 6) + limbs(v[1], 6)
    return limbs(v, 4 if field == "fr" else 6)


def point_to_mont(p, group):
    """Montgomery affine limbs as cuzk lays them out (infinity = all zero)."""
    width = 12 if group == "g1" else 24
    if p is None:
        return [0] * width
    field = "fq" if group == "g1" else "fq2"
    return to_mont(p[0], field) + to_mont(p[1], field)


def point_from_mont(row, group):
    row = [int(v) for v in row]
    if not any(row):
        return None
    field = "fq" if group == "g1" else "fq2"
    h = len(row) // 2
    return (from_mont(row[:h], field), from_mont(row[h:], field))


# ---- NTT reference ------------------------------------------------------------------
def root_of_unity(n):
    """ω of order n (a power of two) from the multiplicative generator 7."""
    assert n & (n - 1) == 0
    return pow(7, (R - 1) // n, R)


def dft(vals, inverse=False, coset=False):
    """Naive O(n^2) evaluation at ω^i (forward) or its inverse; coset shift g = 7."""
    n = len(vals)
    w = root_of_unity(n)
    if not inverse:
        if coset:
            vals = [v * pow(7, j, R) % R for j, v in enumerate(vals)]
        return [sum(v * pow(w, i * j, R) for j, v in enumerate(vals)) % R for i in range(n)]
    wi, ni = pow(w, -1, R), pow(n, -1, R)
    out = [sum(v * pow(wi, i * j, R) for j, v in enumerate(vals)) * ni % R for i in range(n)]
    if coset:
        gi = pow(7, -1, R)
        out = [v * pow(gi, j, R) % R for j, v in enumerate(out)]
    return out


# ---- adapters to py_arkworks_bls12381 (the independent library the tests compare with) ----
def ark_class(group):
    import py_arkworks_bls12381 as ark
    return ark.G1Point if group == "g1" else ark.G2Point


def ark_to_point(pt, group):
    """arkworks point -> reference tuple. arkworks' xy bytes are big-endian, G2 as c0‖c1,
    and the identity is all zeros (unlike zcash)."""
    xy = pt.to_xy_bytes_be()
    if not any(xy):
        return None
    v = [int.from_bytes(xy[i:i + 48], "big") for i in range(0, len(xy), 48)]
    return (v[0], v[1]) if group == "g1" else ((v[0], v[1]), (v[2], v[3]))


def ark_from_point(p, group, check=True):
    """Reference tuple -> arkworks point (check=False skips arkworks' subgroup check)."""
    cls = ark_class(group)
    if p is None:
        return cls.identity()
    if group == "g1":
        vals = [p[0], p[1]]
    else:
        vals = [p[0][0], p[0][1], p[1][0], p[1][1]]
    data = b"".join(v.to_bytes(48, "big") for v in vals)
    return cls.from_xy_bytes_be(data) if check else cls.from_xy_bytes_unchecked_be(data)


def ark_scalar(k):
    import py_arkworks_bls12381 as ark
    return ark.Scalar(k % R)


def random_point(group, rnd):
    """A random subgroup point [k]G (k from the random.Random `rnd`), as a reference tuple."""
    k = rnd.randrange(1, R)
    return ark_to_point(ark_class(group)() * ark_scalar(k), group), k


def non_subgroup_point(group, seed):
    """A curve point outside the prime-order subgroup: the first x >= seed (G1) or
    x = (seed + i, 1) (G2) with x^3 + b a square, y the root refs' sqrt picks; the cofactor
    is not cleared, so the point lies outside G1/G2 with overwhelming probability."""
    c = CURVES[group]
    i = 0
    while True:
        x = (seed + i) % P if group == "g1" else ((seed + i) % P, 1)
        y = c.F.sqrt(c.rhs(x))
        if y is not None:
            return (x, y)
        i += 1


# G2 cofactor: #E'(Fq2) = h2·r
H2 = (Z**8 - 4 * Z**7 + 5 * Z**6 - 4 * Z**4 + 6 * Z**3 - 4 * Z**2 - 4 * Z + 13) // 9
