"""Instruction counts per function of a cuzk kernel program's SASS (no GPU needed).

Compiles a program of cuzk._kernels (NVRTC, CUBIN for --arch) and disassembles it with
nvdisasm: $NVDISASM, else `nvdisasm` on PATH, else the one of an installed
nvidia-cuda-nvdisasm wheel (this script installs nothing).  For every function whose name
matches --filter it prints the instruction total, the multiplier-pipe (IMAD*) counts by
opcode, the CALL sites per callee and, for kernels, the register count ptxas gave them (the
CUBIN's .nv.info) and their local-memory loads/stores (spills: LDL/STL).  A kernel's outlined
device functions (e.g. the Fq product, __noinline__) are copied into its section by ptxas;
each copy is its own row, named KERNEL$MANGLED_CALLEE, and the kernel's own row excludes them.

    python bench/sass_count.py msm --filter 'sum_points_flat_g1|mul_outline|sqr_outline'
    python bench/sass_count.py msm --cu-root /tmp/cu_before      # another source tree
"""
import argparse
import collections
import glob
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

_SECTION = re.compile(r"^\s*\.text\.(\S+?):?\s*$")
_SUB = re.compile(r"^\$(\S+)\$(\S+?):\s*$")                  # $kernel$callee: (a copy)
_CALL = re.compile(r"CALL\.\S+\s+`\(\$(\S+?)\$(\S+?)\)")
_INSN = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")


def find_nvdisasm():
    """Path of an nvdisasm binary already on this machine, or None."""
    if os.environ.get("NVDISASM"):
        return os.environ["NVDISASM"]
    if shutil.which("nvdisasm"):
        return shutil.which("nvdisasm")
    for base in sys.path:
        hits = sorted(glob.glob(os.path.join(base, "nvidia", "cu*", "bin", "nvdisasm")) +
                      glob.glob(os.path.join(base, "nvidia", "cuda_nvdisasm", "bin", "nvdisasm")))
        if hits:
            return hits[-1]
    return None


def register_counts(cubin):
    """{kernel: registers} from an ELF64 CUBIN's .nv.info section: its EIATTR_REGCOUNT (0x2f)
    records give (symbol index, registers); names come from .symtab."""
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    heads = [struct.unpack_from("<IIQQQQII", cubin, shoff + i * shentsize) for i in range(shnum)]

    def cstr(at):
        return cubin[at:cubin.index(b"\0", at)].decode()
    names = {cstr(heads[shstrndx][4] + h[0]): h for h in heads}
    symtab = next(h for h in heads if h[1] == 2)                 # SHT_SYMTAB
    strtab_off = heads[symtab[6]][4]
    info = names.get(".nv.info")
    if info is None:
        return {}
    regs, at, end = {}, info[4], info[4] + info[5]
    while at + 4 <= end:
        fmt, attr, size = struct.unpack_from("<BBH", cubin, at)
        if fmt != 0x04:                                          # only EIFMT_SVAL carries a payload
            at += 4
            continue
        if attr == 0x2F and size == 8:
            sym, count = struct.unpack_from("<II", cubin, at + 4)
            st_name, = struct.unpack_from("<I", cubin, symtab[4] + sym * 24)
            regs[cstr(strtab_off + st_name)] = count
        at += 4 + size
    return regs


def disassemble(cubin, nvdisasm):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "prog.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        return subprocess.run([nvdisasm, "-c", path], check=True, capture_output=True,
                              text=True).stdout


def count(sass):
    """({function: Counter(opcode -> count)}, {function: Counter(callee -> call sites)})."""
    ops, calls, cur = {}, {}, None
    for line in sass.splitlines():
        m = _SECTION.match(line) or _SUB.match(line)
        if m:
            cur = m.group(1) if m.re is _SECTION else f"{m.group(1)}${m.group(2)}"
            ops.setdefault(cur, collections.Counter())
            calls.setdefault(cur, collections.Counter())
            continue
        m = _INSN.match(line)
        if m and cur is not None:
            ops[cur][m.group(1)] += 1
            c = _CALL.search(line)
            if c:
                calls[cur][c.group(2)] += 1
    return ops, calls


def imad_breakdown(ops):
    """(IMAD-class total, {kind: count}): WIDE, HI, MOV, IADD, SHL, other (plain IMAD, .X)."""
    kinds = collections.Counter()
    for op, n in ops.items():
        if not op.startswith("IMAD"):
            continue
        parts = op.split(".")[1:]
        kind = next((k for k in ("WIDE", "HI", "MOV", "IADD", "SHL") if k in parts), "other")
        kinds[kind] += n
    return sum(kinds.values()), dict(kinds)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("program", help="a cuzk._kernels program name (e.g. msm)")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--cu-root", default=None, help="kernel source root (default: cuzk/cu)")
    ap.add_argument("--filter", default="", help="regex on function names (default: all)")
    ap.add_argument("--opcodes", action="store_true", help="also print every opcode's count")
    args = ap.parse_args(argv)

    nvdisasm = find_nvdisasm()
    if nvdisasm is None:
        sys.exit("no nvdisasm: set $NVDISASM, put it on PATH or install nvidia-cuda-nvdisasm")
    from cuzk import _kernels
    cubin = _kernels.compile_program(args.program, args.arch, "cubin", cu_root=args.cu_root)
    funcs, calls = count(disassemble(cubin, nvdisasm))
    regs = register_counts(cubin)
    pat = re.compile(args.filter)
    print(f"{'function':<70} {'insns':>7} {'IMAD*':>6}  breakdown")
    for name in sorted(funcs):
        if not pat.search(name):
            continue
        ops = funcs[name]
        total, kinds = imad_breakdown(ops)
        print(f"{name:<70} {sum(ops.values()):>7} {total:>6}  "
              + " ".join(f"{k}={v}" for k, v in sorted(kinds.items())))
        if name in regs:
            spills = sum(n for op, n in ops.items() if op.startswith(("LDL", "STL")))
            print(f"    registers {regs[name]}, local loads/stores {spills}")
        for callee, n in sorted(calls[name].items()):
            print(f"    calls {callee} x{n}")
        if args.opcodes:
            for op, n in ops.most_common():
                print(f"    {op:<28} {n}")


if __name__ == "__main__":
    main()
