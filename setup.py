"""Build the Cython/C++ extensions of cuzk.

Every ``cuzk/_native/*.pyx`` becomes one extension module, compiled as C++17.
Modules that ``cimport cuda.bindings.cydriver`` need ``cuda.h`` at build time,
at least as new as cuda-bindings' ``.pxd`` files; ``find_cuda_include`` looks in
pip's ``nvidia/cu13/include`` (the nvidia-cuda-runtime wheel), ``$CUDA_HOME``,
``$CUDA_PATH`` and ``/usr/local/cuda`` and takes the newest.  Nothing links
libcuda: cuda-bindings loads the driver at run time.

The default build is portable (the compiler's generic target): a wheel or a shared venv
runs on any x86-64 CPU.  CPU features are chosen at run time (mulx/adx and the AVX-512 IFMA
MSM lanes, compiled in with function-level target attributes; see msm.hpp).  The extensions
compile in parallel, one job per core (``build_ext -j N`` or ``CUZK_BUILD_JOBS`` overrides).

Environment:
  CUZK_NATIVE_ARCH=1   add -march=native: fastest on the build host, SIGILL on older CPUs.
  CUZK_DEBUG=1         -O0 -g.
  CUZK_ONLY=a,b        build only these modules (development).
  CUZK_BUILD_JOBS=N    parallel compile jobs (default: the usable cores); also Cython's.
"""
import glob
import os
import re
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext as _build_ext


def build_jobs():
    """Parallel jobs for cythonize and the C++ compiles: $CUZK_BUILD_JOBS, else usable cores."""
    env = os.environ.get("CUZK_BUILD_JOBS")
    if env:
        return max(1, int(env))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def native_arch():
    """Whether to add -march=native (opt-in: CUZK_NATIVE_ARCH=1)."""
    v = os.environ.get("CUZK_NATIVE_ARCH", "0")
    if v not in ("0", "1", ""):
        raise RuntimeError(f"CUZK_NATIVE_ARCH must be 0 or 1, got {v!r}")
    return v == "1"


class build_ext(_build_ext):
    """build_ext whose default is one compile job per core (setuptools' own thread pool)."""

    def finalize_options(self):
        super().finalize_options()
        if not self.parallel:
            self.parallel = build_jobs()


def _cuda_version(include_dir):
    try:
        with open(os.path.join(include_dir, "cuda.h"), encoding="latin-1") as f:
            m = re.search(r"^#define\s+CUDA_VERSION\s+(\d+)", f.read(), re.M)
        return int(m.group(1)) if m else None
    except OSError:
        return None


def find_cuda_include():
    """Return the directory holding the newest cuda.h found, or None."""
    candidates = []
    paths = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    paths.update(p for p in sys.path if p)
    for base in paths:
        for sub in ("nvidia/cu13/include", "nvidia/cuda_runtime/include"):
            candidates.append(os.path.join(base, sub))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(os.path.join(os.environ[var], "include"))
    candidates.append("/usr/local/cuda/include")
    found = [(v, d) for d in candidates if (v := _cuda_version(d))]
    if not found:
        return None
    found.sort(reverse=True)
    return found[0][1]


def cuda_bindings_include():
    try:
        import cuda.bindings
    except ImportError:
        return None
    return os.path.dirname(os.path.dirname(os.path.dirname(cuda.bindings.__file__)))


def extensions():
    import numpy

    debug = os.environ.get("CUZK_DEBUG") == "1"
    # -fno-gnu-unique: function-local statics of shared headers (ntt.hpp's twiddle cache) stay
    # per extension; GNU unique symbols would make all extensions share one instance, and
    # modules built at different header versions then corrupt each other (seen: segfault).
    cflags = ["-std=c++17", "-pthread", "-fno-strict-aliasing", "-Wno-unused-function",
              "-fno-gnu-unique"]
    if debug:
        cflags += ["-O0", "-g"]
    else:
        # -g0: debug info for the heavily inlined field code multiplies compile time
        cflags += ["-O3", "-g0", "-fno-math-errno"]
    if native_arch():
        cflags.append("-march=native")
    incs = [numpy.get_include(), "cuzk/_native/include"]
    cuda_inc = find_cuda_include()
    only = {m for m in os.environ.get("CUZK_ONLY", "").split(",") if m}
    exts = []
    for pyx in sorted(glob.glob("cuzk/_native/*.pyx")):
        stem = os.path.splitext(os.path.basename(pyx))[0]
        if only and stem not in only:
            continue
        name = "cuzk._native." + stem
        with open(pyx, encoding="utf-8") as f:
            needs_cuda = "cuda.bindings" in f.read()
        inc = list(incs)
        if needs_cuda:
            if cuda_inc is None:
                raise RuntimeError(
                    f"{pyx} needs cuda.h: install nvidia-cuda-runtime or set CUDA_HOME")
            inc.append(cuda_inc)
        exts.append(Extension(
            name, [pyx], language="c++", include_dirs=inc,
            extra_compile_args=cflags, extra_link_args=["-pthread"],
            define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
            depends=glob.glob("cuzk/_native/include/cuzk/*.hpp") + glob.glob("cuzk/_native/*.pxd"),
        ))
    from Cython.Build import cythonize
    return cythonize(
        exts, language_level=3, nthreads=build_jobs() if len(exts) > 1 else 0,
        compiler_directives={"boundscheck": False, "wraparound": False, "cdivision": True,
                             "embedsignature": True},
    )


setup(ext_modules=extensions(), cmdclass={"build_ext": build_ext})
