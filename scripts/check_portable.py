"""Check that the installed cuzk build is portable and still dispatches at run time (CI).

Portable: the native extensions were compiled to assume no ISA extension beyond baseline x86-64
(``_msm.cpu_features()["compiled_for"]`` reads the compiler's predefined macros of the real build;
every extension gets the same flags from setup.py), so the build runs on any x86-64 CPU.
Dispatch: the run-time probes agree with the kernel's cpuid flags (/proc/cpuinfo), so a portable
build on an ADX / AVX-512 IFMA machine still takes those paths.
Package: ``build_py`` (what a wheel ships as Python files and package data) has no generated
``.cpp`` file.

Run: python scripts/check_portable.py [--no-package]   (exit 1 on a failed check)
"""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cpuinfo_flags():
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return None


def check_build():
    from cuzk._native import _msm
    f = _msm.cpu_features()
    print(f"cpu features: {f}")
    bad = []
    if f["compiled_for"]:
        bad.append(f"the build assumes {f['compiled_for']} (built with CUZK_NATIVE_ARCH=1?)")
    flags = cpuinfo_flags()
    if flags is not None:
        if f["adx"] != ({"bmi2", "adx"} <= flags):
            bad.append(f"adx dispatch {f['adx']} disagrees with /proc/cpuinfo")
        want_ifma = f["ifma_compiled"] and {"avx512f", "avx512ifma"} <= flags \
            and os.environ.get("CUZK_CPU_IFMA") != "0"
        if f["ifma"] != want_ifma:
            bad.append(f"IFMA dispatch {f['ifma']} disagrees with /proc/cpuinfo ({want_ifma})")
    return bad


def check_package():
    with tempfile.TemporaryDirectory() as d:
        # CUZK_ONLY: build_py compiles nothing, and one CUDA-free extension spares the cuda.h
        # lookup; package data does not depend on it
        subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", d],
                       cwd=ROOT, check=True, stdout=subprocess.DEVNULL,
                       env=dict(os.environ, CUZK_ONLY="_prep"))
        shipped = [str(p.relative_to(d)) for p in Path(d).rglob("*") if p.suffix in (".cpp", ".c")]
        kernels = list(Path(d).rglob("*.cu"))
    bad = [f"generated sources shipped: {shipped[:5]}"] if shipped else []
    if not kernels:
        bad.append("no kernel sources (.cu) in the package data")
    return bad


def main():
    bad = check_build()
    if "--no-package" not in sys.argv:
        bad += check_package()
    for b in bad:
        print(f"FAIL: {b}")
    print("portable build: ok" if not bad else f"portable build: {len(bad)} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
