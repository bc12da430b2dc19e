"""The parser contract under a bounded, deterministic mutation loop (issue 12).

Every input format cuzk reads is mutated from a valid seed file (bit flips, truncations,
insertions, count and size fields set to 0 / 1 / 2^31 / 2^32-1, npz members of wrong dtype,
shape and kind, JSON of wrong types, depth and size) and read back.  The contract: a reader
returns, or raises :class:`cuzk.FormatError` naming the file (with an offset inside it when it
gives one) in one line; no other exception escapes, and no mutant makes a reader allocate more
than a few GiB (the loop runs under an address-space limit, so such a mutant shows as a
MemoryError).

Seeded per format, so a failure names a reproducible mutant (format, index, operation);
``CUZK_FUZZ_N`` sets the number of mutants per format (default 200: a few seconds on 2 cores).
"""
from __future__ import annotations

import io
import json
import os
import random
import resource
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest

from cuzk import FormatError, keygen_random, porep_like, prove
from cuzk import _snarkjs as sj
from cuzk._assignment import Assignment
from cuzk._params import decode_proofs, read_params, read_vk, write_params, write_vk

N = int(os.environ.get("CUZK_FUZZ_N", "200"))
DATA = Path(__file__).parent / "data" / "snarkjs" / "mulchain"
COUNTS = (0, 1, 2**31, 2**32 - 1)
HEADROOM = 4 << 30          # address space a reader may add while the loop runs


# ----------------------------------------------------------------------------- seeds

@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    """format -> (seed bytes, reader(path), count-field offsets and their byte order)."""
    d = tmp_path_factory.mktemp("seeds")
    cs, inputs, aux = porep_like(5, 2)
    pk = keygen_random(cs, seed=3)
    asg = cs.assignment(inputs, aux)
    write_params(d / "k.params", pk)
    write_vk(d / "k.vk", pk.vk)
    asg.save_npz(d / "a.npz")
    proof = prove(pk, asg, 1, 2, backend="cpu", threads=1, verify=False)

    def read_proof_bin(p):
        return decode_proofs(Path(p).read_bytes(), path=str(p))

    vk_ic = 3 * 96 + 3 * 192
    params_counts = [vk_ic]
    off = vk_ic + 4 + 96 * pk.vk.ic.shape[0]
    for name, size in (("h", 96), ("l", 96), ("a", 96), ("b_g1", 96), ("b_g2", 192)):
        params_counts.append(off)
        off += 4 + size * getattr(pk, name).shape[0]

    def binfile_counts(data):
        """Offsets of the u32 section count, each section id (u32) and size (u64)."""
        out, pos = [(8, 4)], 12
        for _ in range(struct.unpack_from("<I", data, 8)[0]):
            out += [(pos, 4), (pos + 4, 8)]
            pos += 12 + struct.unpack_from("<Q", data, pos + 4)[0]
        return out

    zkey = (DATA / "circuit.zkey").read_bytes()
    wtns = (DATA / "witness.wtns").read_bytes()
    return {
        "params": ((d / "k.params").read_bytes(), lambda p: read_params(p, threads=1),
                   [(o, 4) for o in params_counts], ">"),
        "vk": ((d / "k.vk").read_bytes(), lambda p: read_vk(p, threads=1), [(vk_ic, 4)], ">"),
        "npz": ((d / "a.npz").read_bytes(), Assignment.load_npz, [], "<"),
        "proof.bin": (proof + proof, read_proof_bin, [], ">"),
        "proof.json": ((DATA / "proof.json").read_bytes(), sj.read_proof_json, [], "<"),
        "public.json": ((DATA / "public.json").read_bytes(), sj.read_public_json, [], "<"),
        "verification_key.json": ((DATA / "verification_key.json").read_bytes(),
                                  sj.read_verification_key_json, [], "<"),
        "zkey": (zkey, sj.read_zkey, binfile_counts(zkey), "<"),
        "wtns": (wtns, sj.read_wtns, binfile_counts(wtns), "<"),
    }


# ----------------------------------------------------------------------------- mutations

def _bytes_mutant(rnd: random.Random, data: bytes, counts, order):
    d = bytearray(data)
    op = rnd.choice(["flip", "flip", "truncate", "insert", "count", "count", "splice"])
    if op == "flip":
        for _ in range(rnd.randint(1, 8)):
            d[rnd.randrange(len(d))] ^= 1 << rnd.randrange(8)
    elif op == "truncate":
        d = d[:rnd.randrange(len(d))]
    elif op == "insert":
        at = rnd.randrange(len(d) + 1)
        d[at:at] = rnd.randbytes(rnd.randint(1, 16))
    elif op == "count":
        v = rnd.choice(COUNTS)
        if counts and rnd.random() < 0.7:
            at, width = rnd.choice(counts)
        else:
            at, width = rnd.randrange(max(1, len(d) - 8)), rnd.choice((4, 8))
        d[at:at + width] = v.to_bytes(width, "big" if order == ">" else "little")
    else:  # a block copied over another place
        a, b = rnd.randrange(len(d)), rnd.randrange(len(d))
        n = rnd.randint(1, 200)
        d[b:b + n] = d[a:a + n]
    return bytes(d), op


_WRONG = [0, -1, 1.5, 2**64, "", "x", "0x", "-5", "1e3", None, True, [], {}, ["1"], [["1"]],
          {"a": "1"}, "9" * 5000, "@DEEP@", "@LONGINT@"]


def _json_paths(obj, path=()):
    yield path
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _json_paths(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _json_paths(v, path + (i,))


def _json_mutant(rnd: random.Random, data: bytes):
    obj = json.loads(data)
    paths = list(_json_paths(obj))
    path = rnd.choice(paths)
    new = rnd.choice(_WRONG)
    op = f"json {list(path)} = {str(new)[:20]}"
    if rnd.random() < 0.2 and path:     # delete the node instead
        parent = obj
        for k in path[:-1]:
            parent = parent[k]
        del parent[path[-1]]
        op = f"json del {list(path)}"
    elif not path:
        obj = new
    else:
        parent = obj
        for k in path[:-1]:
            parent = parent[k]
        parent[path[-1]] = new
    text = json.dumps(obj)
    text = text.replace('"@DEEP@"', "[" * 1200 + "]" * 1200)
    text = text.replace('"@LONGINT@"', "7" * 4400)
    return text.encode(), op


def _npz_mutant(rnd: random.Random, data: bytes):
    with np.load(io.BytesIO(data)) as z:
        arrays = {k: z[k] for k in z.files}
    key = rnd.choice(sorted(arrays))
    v = arrays[key]
    op = rnd.choice(["dtype", "shape", "drop", "scalar", "bits", "object", "rows", "raw",
                     "garbage", "long-header", "plain-npy"])
    if op == "plain-npy":                   # a .npy given where an .npz belongs
        buf = io.BytesIO()
        np.save(buf, v)
        return buf.getvalue(), f"npz {op} {key}"
    if op == "dtype":
        dt = rnd.choice([np.float64, np.int8, np.uint32, np.int64, "U3"])
        try:
            arrays[key] = v.astype(dt)
        except ValueError:                  # a text member ("form") has no number: zeros instead
            arrays[key] = np.zeros(v.shape, dt)
    elif op == "shape":
        arrays[key] = v.reshape(-1)[:rnd.randint(0, v.size)] if v.ndim else np.zeros((2, 4), v.dtype)
    elif op == "drop":
        del arrays[key]
    elif op == "scalar":
        arrays[key] = np.array(rnd.choice(COUNTS), np.uint64)
    elif op == "bits":
        arrays[rnd.choice(["a_aux_bits", "b_input_bits", "b_aux_bits"])] = np.array(
            rnd.choice([-1, *COUNTS]), np.int64)
    elif op == "object":
        arrays[key] = np.array([1, "x"], dtype=object)
    elif op == "rows" and v.ndim == 2:
        arrays[key] = np.full((v.shape[0] + rnd.randint(-2, 2), v.shape[1]), 2**64 - 1, np.uint64)
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays) if rnd.random() < 0.3 else np.savez(buf, **arrays)
    out = buf.getvalue()
    member = None
    if op == "raw":  # a member whose npy header asks for far more than the archive holds
        shape = rnd.choice([(2**31, 4), (2**40,), (2**32 - 1, 4)])
        hdr = ("{'descr': '<u8', 'fortran_order': False, 'shape': %r, }" % (shape,)).encode()
        hdr += b" " * ((-(10 + len(hdr) + 1)) % 64) + b"\n"
        member = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr + bytes(64)
    elif op == "garbage":  # a member that is not npy data at all
        member = rnd.choice([b"", b"hello", rnd.randbytes(rnd.randint(1, 300))])
    elif op == "long-header":  # an npy 2.0 header past NumPy's max_header_size
        hdr = ("{'descr': '<u8', 'fortran_order': False, 'shape': (1, 4), }" +
               " " * rnd.randint(10000, 70000)).encode() + b"\n"
        member = b"\x93NUMPY\x02\x00" + struct.pack("<I", len(hdr)) + hdr + bytes(32)
    if member is not None and key in arrays:
        rebuilt = io.BytesIO()
        with zipfile.ZipFile(io.BytesIO(out)) as zi, zipfile.ZipFile(rebuilt, "w") as zo:
            for n in zi.namelist():
                zo.writestr(n, member if n == key + ".npy" else zi.read(n))
        out = rebuilt.getvalue()
    return out, f"npz {op} {key}"


def _params_section_mutant(rnd: random.Random, data: bytes, counts):
    """A section count changed and the section cut (or padded) to match: the file stays
    self-consistent, so only checks across sections can refuse it."""
    i = rnd.randrange(1, len(counts))            # H, L, A, B_G1 or B_G2
    at = counts[i][0]
    size = 192 if i == len(counts) - 1 else 96
    n = struct.unpack_from(">I", data, at)[0]
    k = rnd.choice([0, 1, max(0, n - 1), n + 1])
    body = data[at + 4:at + 4 + size * n]
    body = body[:size * k] if k <= n else body + body[:size]
    out = data[:at] + struct.pack(">I", k) + body + data[at + 4 + size * n:]
    return out, f"params section {i} count {n} -> {k}"


# ----------------------------------------------------------------------------- the loop

def _address_space_limit():
    """Cap the address space at the current size + HEADROOM (restored by the caller)."""
    with open("/proc/self/status") as f:
        vm = next(int(ln.split()[1]) * 1024 for ln in f if ln.startswith("VmSize:"))
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = vm + HEADROOM
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    return soft, hard


@pytest.mark.parametrize("fmt", ["params", "vk", "npz", "proof.bin", "proof.json",
                                 "public.json", "verification_key.json", "zkey", "wtns"])
def test_mutants_raise_only_format_errors(tmp_path, seeds, fmt):
    seed, reader, counts, order = seeds[fmt]
    reader(_write(tmp_path, "seed", seed))             # the seed itself reads
    rnd = random.Random(f"cuzk-fuzz-{fmt}")
    bad = []
    saved = _address_space_limit()
    try:
        for i in range(N):
            if fmt.endswith(".json") and rnd.random() < 0.6:
                data, op = _json_mutant(rnd, seed)
            elif fmt == "npz" and rnd.random() < 0.6:
                data, op = _npz_mutant(rnd, seed)
            elif fmt == "params" and rnd.random() < 0.2:
                data, op = _params_section_mutant(rnd, seed, counts)
            else:
                data, op = _bytes_mutant(rnd, seed, counts, order)
            p = _write(tmp_path, i, data)
            try:
                reader(p)
            except FormatError as e:
                msg = str(e)
                # a wrapped MemoryError means the reader tried the allocation a header asked for
                if e.path != str(p) or "\n" in msg or "MemoryError" in msg or not (
                        e.offset is None or 0 <= e.offset <= len(data)):
                    bad.append(f"{fmt} #{i} ({op}): FormatError breaks the contract: {msg[:200]}")
            except Exception as e:  # noqa: BLE001  (the contract under test)
                bad.append(f"{fmt} #{i} ({op}): {type(e).__name__}: {str(e)[:200]}")
            if len(bad) >= 5:
                break
    finally:
        resource.setrlimit(resource.RLIMIT_AS, saved)
    assert not bad, "\n".join(bad)


def _write(d, i, data):
    # a fresh name per mutant: a zkey still alive keeps its file mapped
    p = d / f"m{i}.bin"
    p.write_bytes(data)
    return p
