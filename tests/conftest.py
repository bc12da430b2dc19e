"""Shared fixtures: a seeded NumPy generator, the hypothesis profiles, and the kernel emulator.

The emulator's fixtures live here, not in tests/test_cu_emu.py: a session fixture imported into
several modules is a separate fixture per module, and each built the emulator again (seven ~100 s
builds on the CI's 2 cores; one now).
"""
import importlib.util
import os
import shlex
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest
from helpers import CU_DIR, EMU_DIR, cxx_compiler, tail_text
from hypothesis import HealthCheck, settings

# "dev" (default) keeps the whole suite fast on 2 cores; CUZK_HYPOTHESIS_PROFILE=thorough for more.
settings.register_profile("dev", max_examples=25, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=300, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("CUZK_HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture
def rng(request):
    """A NumPy Generator seeded from the test's node id (reproducible, different per test)."""
    seed = zlib.crc32(request.node.nodeid.encode())
    return np.random.default_rng(seed)


_PROBE = r"""
#include <ucontext.h>
#include <sys/mman.h>
#include <thread>
#include <concepts>
static_assert(__cplusplus >= 202002L, "C++20");
thread_local int tl;
extern "C" int probe() { ucontext_t c; getcontext(&c); std::thread t([] { tl = 1; }); t.join(); return 0; }
"""


@pytest.fixture(scope="session")
def emu_lib(tmp_path_factory):
    """The kernel emulator library (tests/test_cu_emu.py) built once per session from
    tests/cu_emu/emu.cpp and the kernel sources.

    Kernel sources: $CUZK_CU_DIR if set (as cuzk._kernels), else the checkout's cuzk/cu.
    Portable flags only (no -march=native, whatever CUZK_NATIVE_ARCH says).  No compiler, or
    one that cannot build the platform probe: skipped; any other build error fails.
    """
    cxx = cxx_compiler()
    if cxx is None:
        pytest.skip("no C++ compiler (c++, g++, clang++ or $CXX) to build the kernel emulator")
    cu = Path(os.environ.get("CUZK_CU_DIR") or CU_DIR).resolve()
    out = tmp_path_factory.mktemp("cu_emu")
    flags = ["-std=c++20", "-shared", "-fPIC", "-pthread"]

    probe = out / "probe.cpp"
    probe.write_text(_PROBE)
    r = subprocess.run(cxx + flags + [str(probe), "-o", str(out / "probe.so")],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        pytest.skip(f"{' '.join(cxx)} cannot build the emulator's platform probe (C++20, "
                    f"<ucontext.h>, threads):\n{tail_text(r.stderr, 1500)}")

    lib = out / "libcuzk_emu.so"
    cmd = cxx + ["-O2", "-fvisibility=hidden", *flags, f"-I{cu}", str(EMU_DIR / "emu.cpp"),
                 "-o", str(lib)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        pytest.fail(f"building the kernel emulator failed (kernel sources {cu}):\n"
                    f"$ {shlex.join(cmd)}\n{tail_text(r.stderr + r.stdout)}", pytrace=False)
    return lib


@pytest.fixture(scope="session")
def fake(emu_lib):
    """A FakeDriver over the built emulator ($CUZK_EMU_WORKERS host threads, default: all)."""
    spec = importlib.util.spec_from_file_location("cuzk_test_fake_driver", EMU_DIR / "fake_driver.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.FakeDriver(emu_lib, workers=int(os.environ.get("CUZK_EMU_WORKERS", "0")))
