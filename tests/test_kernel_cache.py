"""NVRTC compilation and the on-disk kernel cache (no GPU needed)."""

import os
import shutil
import sys
import time

import pytest

from helpers import run_threaded

from cuzk import _kernels
from cuzk._errors import NvrtcError
from cuzk._native import _nvrtc

PROGRAMS = _kernels.programs()

EM_CUDA = 190  # ELF e_machine of CUDA binaries


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty private cache directory."""
    d = tmp_path / "cache"
    monkeypatch.setenv("CUZK_CACHE_DIR", str(d))
    monkeypatch.delenv("CUZK_KERNEL_CACHE", raising=False)
    return d


@pytest.fixture
def cu_copy(tmp_path):
    """A private copy of the kernel source tree."""
    d = tmp_path / "cu"
    shutil.copytree(_kernels.cu_root(), d)
    return d


@pytest.fixture
def count_compiles(monkeypatch):
    """Count NVRTC compilations (the real compiler still runs)."""
    calls = []
    real = _nvrtc.compile

    def counting(*a, **k):
        calls.append(a[1] if len(a) > 1 else k.get("name"))
        return real(*a, **k)

    monkeypatch.setattr(_nvrtc, "compile", counting)
    return calls


def entries(d):
    return sorted(p for p in d.iterdir() if not p.name.startswith(".")) if d.exists() else []


def test_nvrtc_version_and_archs():
    major, minor = _nvrtc.version()
    assert major >= 12
    assert 90 in _nvrtc.supported_archs()


@pytest.mark.parametrize("name", PROGRAMS)
def test_every_registered_program_compiles_to_cubin_sm90(name, cache):
    image = _kernels.compile_program(name, "sm_90")
    assert image[:4] == b"\x7fELF"
    assert int.from_bytes(image[18:20], "little") == EM_CUDA


def test_selftest_is_registered():
    assert _kernels.KERNELS["selftest"] == "util/selftest.cu"
    assert os.path.isfile(os.path.join(_kernels.cu_root(), "util", "selftest.cu"))


def test_compile_all_then_all_cached(cache):
    first = _kernels.compile_all("sm_90")
    assert [r[0] for r in first] == PROGRAMS
    assert all(nbytes > 0 and secs >= 0 for _, nbytes, secs, _ in first)
    second = _kernels.compile_all("sm_90")
    assert all(cached for *_, cached in second)
    assert [r[1] for r in second] == [r[1] for r in first]


def test_compile_all_reports_misses_then_hits(cache, cu_copy):
    """``compile_all`` (``cuzk kernels --compile``) over a tree holding one program: a miss with
    its compile time, then a hit; each time within the call's own wall time."""
    for name in PROGRAMS:
        if name != "selftest":
            (cu_copy / _kernels.KERNELS[name]).unlink()
    rounds = []
    for _ in range(2):
        t0 = time.perf_counter()
        rows = _kernels.compile_all("sm_90", cu_root=cu_copy)
        rounds.append((rows, time.perf_counter() - t0))
    (first, wall1), (second, wall2) = rounds
    assert [(r[0], r[3]) for r in first] == [("selftest", False)]
    assert [(r[0], r[3]) for r in second] == [("selftest", True)]
    assert first[0][1] == second[0][1] == len(_kernels.compile_program("selftest", cu_root=cu_copy)) > 0
    assert 0 <= first[0][2] <= wall1 and 0 <= second[0][2] <= wall2


def test_ptx_target(cache):
    ptx = _kernels.compile_program("selftest", "sm_90", target="ptx")
    assert b".target sm_90" in ptx and b"cuzk_selftest_iota3" in ptx
    assert not ptx.endswith(b"\0")


def test_options():
    opts = _kernels.nvrtc_options("selftest", "sm_90")
    assert opts[0] == "-arch=sm_90"
    assert "--std=c++17" in opts and "-default-device" in opts and "-DCUZK_NVRTC=1" in opts
    assert f"-I{_kernels.cu_root()}" in opts
    assert "--use_fast_math" not in opts
    assert _kernels.nvrtc_options("selftest", 90, "ptx")[0] == "-arch=compute_90"
    assert _kernels.nvrtc_options("selftest", "sm_90a")[0] == "-arch=sm_90a"
    with pytest.raises(ValueError):
        _kernels.nvrtc_options("selftest", "gfx90")
    with pytest.raises(ValueError):
        _kernels.nvrtc_options("selftest", "sm_90", "sass")
    with pytest.raises(KeyError):
        _kernels.nvrtc_options("no-such-program")


def test_register_rules():
    _kernels.register("selftest", "util/selftest.cu")  # identical: no-op
    with pytest.raises(ValueError, match="already registered"):
        _kernels.register("selftest", "util/other.cu")
    for name, rel in (("escape", "../x.cu"), ("abs", "/tmp/x.cu"), ("header", "util/x.cuh")):
        with pytest.raises(ValueError, match="relpath must be a .cu file inside the cu root"):
            _kernels.register(name, rel)
    with pytest.raises(ValueError, match="bad program name"):
        _kernels.register("bad name!", "util/selftest.cu")
    for macro in ("1ABC", "A-B", ""):
        with pytest.raises(ValueError, match=f"bad macro name '{macro}'"):
            _kernels.register("badmacro", "util/selftest.cu", {"OK": 1, macro: 2})
    assert not {"escape", "abs", "header", "badmacro"} & set(_kernels.KERNELS)
    with pytest.raises(KeyError, match="unknown kernel program 'nosuch'; registered: .*'selftest'"):
        _kernels.compile_program("nosuch")


def test_cache_dir_default_and_override(tmp_path, monkeypatch):
    """``$CUZK_CACHE_DIR`` (``~`` expanded, made absolute), else ``~/.cache/cuzk/kernels``."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CUZK_CACHE_DIR", raising=False)
    assert _kernels.cache_dir() == str(tmp_path / ".cache" / "cuzk" / "kernels")
    monkeypatch.setenv("CUZK_CACHE_DIR", "~/kc")
    assert _kernels.cache_dir() == str(tmp_path / "kc")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CUZK_CACHE_DIR", "rel")
    assert _kernels.cache_dir() == str(tmp_path / "rel")


def test_defines_reach_nvrtc_and_key(cache, cu_copy, monkeypatch):
    (cu_copy / "util" / "deftest.cu").write_text(
        "#if CUZK_DEFTEST != 42\n#error CUZK_DEFTEST must be 42\n#endif\n"
        'extern "C" __global__ void k(unsigned* d_o) { d_o[0] = CUZK_DEFTEST; }\n')
    monkeypatch.setitem(_kernels.KERNELS, "deftest", "util/deftest.cu")
    monkeypatch.setitem(_kernels._DEFINES, "deftest", (("CUZK_DEFTEST", "42"),))
    assert "-DCUZK_DEFTEST=42" in _kernels.nvrtc_options("deftest", cu_root=cu_copy)
    assert _kernels.compile_program("deftest", cu_root=cu_copy)[:4] == b"\x7fELF"
    monkeypatch.setitem(_kernels._DEFINES, "deftest", (("CUZK_DEFTEST", "41"),))
    with pytest.raises(NvrtcError, match="CUZK_DEFTEST must be 42"):
        _kernels.compile_program("deftest", cu_root=cu_copy)
    # through ``register``: a value as -DNAME=value, None as a bare -DNAME, sorted by name
    monkeypatch.setattr(_kernels, "KERNELS", dict(_kernels.KERNELS))
    monkeypatch.setattr(_kernels, "_DEFINES", dict(_kernels._DEFINES))
    _kernels.register("deftest2", "util/deftest.cu", {"CUZK_DEFTEST": 42, "CUZK_AFLAG": None})
    opts = _kernels.nvrtc_options("deftest2", cu_root=cu_copy)
    assert [o for o in opts if o.startswith(("-DCUZK_AFLAG", "-DCUZK_DEFTEST"))] == ["-DCUZK_AFLAG", "-DCUZK_DEFTEST=42"]
    assert _kernels.compile_program("deftest2", cu_root=cu_copy)[:4] == b"\x7fELF"


def test_env_options_reach_nvrtc_and_key(cache, cu_copy, monkeypatch):
    """$CUZK_NVRTC_OPTIONS (e.g. -lineinfo for compute-sanitizer) reaches every program's
    NVRTC call and its cache key: an entry built without them is not reused."""
    (cu_copy / "util" / "envtest.cu").write_text(
        "#if CUZK_ENVTEST != 7\n#error CUZK_ENVTEST must be 7\n#endif\n"
        'extern "C" __global__ void k(unsigned* d_o) { d_o[0] = CUZK_ENVTEST; }\n')
    monkeypatch.setitem(_kernels.KERNELS, "envtest", "util/envtest.cu")
    monkeypatch.setitem(_kernels._DEFINES, "envtest", ())
    monkeypatch.delenv("CUZK_NVRTC_OPTIONS", raising=False)
    plain = _kernels.cache_key("envtest", cu_root=cu_copy)
    with pytest.raises(NvrtcError, match="CUZK_ENVTEST must be 7"):
        _kernels.compile_program("envtest", cu_root=cu_copy)
    monkeypatch.setenv("CUZK_NVRTC_OPTIONS", " -lineinfo  -DCUZK_ENVTEST=7 ")
    assert _kernels.nvrtc_options("envtest", cu_root=cu_copy)[-2:] == ["-lineinfo", "-DCUZK_ENVTEST=7"]
    assert _kernels.cache_key("envtest", cu_root=cu_copy) != plain
    assert _kernels.compile_program("envtest", cu_root=cu_copy)[:4] == b"\x7fELF"


# --------------------------------------------------------------------------- keys

def test_key_is_stable_and_independent_of_install_path(cu_copy, monkeypatch):
    k = _kernels.cache_key("selftest", "sm_90")
    assert k == _kernels.cache_key("selftest", "sm_90")
    assert len(k) == 64 and int(k, 16) >= 0
    assert _kernels.cache_key("selftest", "sm_90", cu_root=cu_copy) == k
    monkeypatch.setenv("CUZK_CU_DIR", str(cu_copy))
    assert _kernels.cu_root() == str(cu_copy)
    assert _kernels.cache_key("selftest", "sm_90") == k


def test_key_changes_with_arch_target_and_options():
    base = _kernels.cache_key("selftest", "sm_90")
    others = {
        _kernels.cache_key("selftest", "sm_80"),
        _kernels.cache_key("selftest", "sm_90", target="ptx"),
        _kernels.cache_key("selftest", "sm_90",
                           _kernels.nvrtc_options("selftest", "sm_90", extra_options=["-lineinfo"])),
    }
    assert base not in others and len(others) == 3


def test_key_changes_with_each_of_its_inputs(monkeypatch):
    """Arch and target count apart from the options (an explicit option list stays the same);
    so do the key's schema, cuzk's version and NVRTC's; fields are framed, so options that
    concatenate to the same text are still different keys."""
    opts = _kernels.nvrtc_options("selftest", "sm_90")
    base = _kernels.cache_key("selftest", "sm_90", opts)
    keys = {base, _kernels.cache_key("selftest", "sm_80", opts),
            _kernels.cache_key("selftest", "sm_90", opts, target="ptx"),
            _kernels.cache_key("selftest", "sm_90", opts + ["-DA", "-DB"]),
            _kernels.cache_key("selftest", "sm_90", opts + ["-DA-DB", ""])}
    monkeypatch.setattr(_kernels, "SCHEMA_VERSION", _kernels.SCHEMA_VERSION + 1)
    keys.add(_kernels.cache_key("selftest", "sm_90", opts))
    monkeypatch.undo()
    monkeypatch.setattr(_kernels, "__version__", _kernels.__version__ + ".x")
    keys.add(_kernels.cache_key("selftest", "sm_90", opts))
    monkeypatch.undo()
    monkeypatch.setattr(_kernels, "_nvrtc_version", lambda: (99, 9))
    keys.add(_kernels.cache_key("selftest", "sm_90", opts))
    monkeypatch.undo()
    assert len(keys) == 8 and _kernels.cache_key("selftest", "sm_90", opts) == base


def test_key_ignores_hidden_and_cache_files_and_listing_order(cu_copy, monkeypatch):
    """Editor and Python droppings (hidden files and folders, __pycache__, .pyc) are not part of
    the key, and neither is the order the file system lists a folder in."""
    def key():
        return _kernels.cache_key("selftest", "sm_90", cu_root=cu_copy)

    k0 = key()
    (cu_copy / "util" / ".selftest.cu.swp").write_bytes(b"swap")
    (cu_copy / "util" / "x.pyc").write_bytes(b"pyc")
    for folder in (".git", "__pycache__"):
        (cu_copy / folder).mkdir()
        (cu_copy / folder / "plain.cuh").write_bytes(b"#pragma once\n")
    assert key() == k0
    walk = os.walk
    monkeypatch.setattr(_kernels.os, "walk",
                        lambda root: ((d, dirs, files[::-1]) for d, dirs, files in walk(root)))
    assert key() == k0


def test_key_changes_when_any_cu_file_changes(cu_copy):
    def key():
        return _kernels.cache_key("selftest", "sm_90", cu_root=cu_copy)

    k0 = key()
    seen = {k0}

    def changed():
        k = key()
        assert k not in seen
        seen.add(k)

    top = cu_copy / "util" / "selftest.cu"
    original = top.read_bytes()
    top.write_bytes(original + b"\n")                  # the program's own source
    changed()
    top.write_bytes(original)
    assert key() == k0
    hdr = cu_copy / "ff" / "zz_unrelated.cuh"          # a new header elsewhere
    hdr.parent.mkdir(exist_ok=True)
    hdr.write_bytes(b"#pragma once\n")
    changed()
    hdr.write_bytes(b"#pragma once\n// edited\n")      # an edit to that header
    changed()
    hdr.rename(cu_copy / "ff" / "zz_renamed.cuh")      # same bytes, new path
    changed()
    sub = cu_copy / "ec" / "deep" / "x.cuh"            # a file in a new subdirectory
    sub.parent.mkdir(parents=True)
    sub.write_bytes(b"")
    changed()
    sub.unlink()                                        # deletion
    (cu_copy / "ff" / "zz_renamed.cuh").unlink()
    assert key() == k0  # back to the original tree: the original key


def test_every_existing_file_is_hashed(cu_copy):
    base = _kernels.cache_key("selftest", "sm_90", cu_root=cu_copy)
    files = sorted(p for p in cu_copy.rglob("*") if p.is_file())
    assert files
    for p in files:
        data = p.read_bytes()
        p.write_bytes(data + b" ")
        assert _kernels.cache_key("selftest", "sm_90", cu_root=cu_copy) != base, p
        p.write_bytes(data)
    assert _kernels.cache_key("selftest", "sm_90", cu_root=cu_copy) == base


def test_header_edit_triggers_recompile(cache, cu_copy, count_compiles):
    inc = cu_copy / "util" / "zz_selftest_extra.cuh"
    inc.write_text("#define CUZK_EXTRA 1\n")
    a = _kernels.compile_program("selftest", cu_root=cu_copy)
    assert _kernels.compile_program("selftest", cu_root=cu_copy) == a
    assert len(count_compiles) == 1 and len(entries(cache)) == 1
    inc.write_text("#define CUZK_EXTRA 2\n")
    _kernels.compile_program("selftest", cu_root=cu_copy)
    assert len(count_compiles) == 2 and len(entries(cache)) == 2


# --------------------------------------------------------------------------- entries

@pytest.mark.parametrize("damage", ["flip_payload", "flip_header_hash", "truncate_half", "truncate_header",
                                    "empty", "garbage", "trailing", "flip_magic"])
def test_damaged_entry_is_recompiled(damage, cache, count_compiles, caplog):
    good = _kernels.compile_program("selftest")
    (entry,) = entries(cache)
    raw = entry.read_bytes()
    if damage == "flip_magic":
        bad = bytes([raw[0] ^ 1]) + raw[1:]
    elif damage == "flip_payload":
        bad = raw[:-100] + bytes([raw[-100] ^ 1]) + raw[-99:]
    elif damage == "flip_header_hash":
        bad = raw[:60] + bytes([raw[60] ^ 0x80]) + raw[61:]
    elif damage == "truncate_half":
        bad = raw[:len(raw) // 2]
    elif damage == "truncate_header":
        bad = raw[:20]
    elif damage == "empty":
        bad = b""
    elif damage == "garbage":
        bad = os.urandom(len(raw))
    else:
        bad = raw + b"\0"
    entry.write_bytes(bad)
    caplog.set_level("WARNING", logger=_kernels.log.name)
    again = _kernels.compile_program("selftest")
    assert again == good
    if damage in ("flip_payload", "trailing"):   # the right key, a payload that fails its hash: said
        assert [r.getMessage() for r in caplog.records] == [f"kernel cache entry {entry} is corrupt; recompiling"]
    assert len(count_compiles) == 2
    assert entry.read_bytes() == raw  # rewritten
    _kernels.compile_program("selftest")
    assert len(count_compiles) == 2  # and now a hit


def test_entry_of_another_key_is_a_miss(cache, count_compiles):
    a = _kernels.compile_program("selftest", "sm_90")
    b = _kernels.compile_program("selftest", "sm_80")
    ka, kb = _kernels.cache_key("selftest", "sm_90"), _kernels.cache_key("selftest", "sm_80")
    pa, pb = cache / f"{ka}.cubin", cache / f"{kb}.cubin"
    pa.write_bytes(pb.read_bytes())  # valid entry, wrong key
    assert _kernels.compile_program("selftest", "sm_90") == a != b
    assert len(count_compiles) == 3


def test_concurrent_compile_gives_one_valid_entry(cache, count_compiles):
    opts = ("-DCUZK_CONCURRENCY_TEST=1",)
    images = run_threaded(lambda i: _kernels.compile_program("selftest", "sm_90", extra_options=opts), 8)
    assert all(im == images[0] for im in images)
    assert len(count_compiles) == 1
    names = [p.name for p in cache.iterdir()]
    assert len(names) == 1 and names[0].endswith(".cubin"), names  # no temp files left behind
    key = _kernels.cache_key("selftest", "sm_90",
                             _kernels.nvrtc_options("selftest", "sm_90", extra_options=opts))
    assert names[0] == f"{key}.cubin"
    assert _kernels._read_entry(str(cache / names[0]), key) == images[0]


def test_concurrent_processes_give_one_valid_entry(cache, tmp_path):
    import subprocess
    code = ("import sys; from cuzk import _kernels; "
            "sys.stdout.write(_kernels.compile_program('selftest', 'sm_86').hex()[:64])")
    env = dict(os.environ, CUZK_CACHE_DIR=str(cache))
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    assert len({o[0] for o in outs}) == 1
    assert [p.suffix for p in cache.iterdir()] == [".cubin"]


def test_unwritable_cache_dir_still_compiles(tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "file"
    blocker.write_bytes(b"x")
    monkeypatch.setenv("CUZK_CACHE_DIR", str(blocker / "sub"))
    monkeypatch.setattr(_kernels, "_warned_unwritable", False)
    assert _kernels.compile_program("selftest")[:4] == b"\x7fELF"
    assert any("not writable" in r.getMessage() for r in caplog.records)


def test_unwritable_cache_dir_warns_once_per_process(tmp_path):
    """A fresh process warns on its first compile into an unwritable cache, and not again."""
    import subprocess
    blocker = tmp_path / "file"
    blocker.write_bytes(b"x")
    code = ("from cuzk import _kernels; _kernels.compile_program('selftest'); "
            "_kernels.compile_program('selftest', extra_options=['-DCUZK_SECOND=1'])")
    env = dict(os.environ, CUZK_CACHE_DIR=str(blocker / "sub"))
    env.pop("CUZK_KERNEL_CACHE", None)
    err = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, timeout=300).stderr
    assert err.count("not writable") == 1, err


def test_nvrtc_log_goes_to_the_debug_log(cache, monkeypatch, caplog):
    """NVRTC's messages for a program that compiles (warnings) reach the debug log, not stdout."""
    real = _nvrtc.compile
    monkeypatch.setattr(_nvrtc, "compile", lambda *a, **k: (real(*a, **k)[0], "zz warning: cuzk test\n"))
    caplog.set_level("DEBUG", logger=_kernels.log.name)
    _kernels.compile_program("selftest")
    assert any("NVRTC log for selftest (sm_90)" in r.getMessage() and "zz warning: cuzk test" in r.getMessage()
               for r in caplog.records)


def test_cache_can_be_disabled(cache, monkeypatch, count_compiles):
    monkeypatch.setenv("CUZK_KERNEL_CACHE", "0")
    _kernels.compile_program("selftest")
    _kernels.compile_program("selftest")
    assert len(count_compiles) == 2 and not entries(cache)


# --------------------------------------------------------------------------- errors

def test_nvrtc_error_carries_log():
    src = b'extern "C" __global__ void k(unsigned* d_o) { d_o[0] = undefined_name_xyz; }\n'
    with pytest.raises(NvrtcError) as ei:
        _nvrtc.compile(src, "broken.cu", ["-arch=sm_90"])
    e = ei.value
    assert e.call == "nvrtcCompileProgram" and e.code != 0 and e.name
    assert "undefined_name_xyz" in e.log and "broken.cu" in e.log
    assert e.log in str(e)


def test_broken_program_raises_and_caches_nothing(cache, cu_copy):
    top = cu_copy / "util" / "selftest.cu"
    top.write_bytes(top.read_bytes() + b"\nstatic_assert(false, \"cuzk broken on purpose\");\n")
    with pytest.raises(NvrtcError) as ei:
        _kernels.compile_program("selftest", cu_root=cu_copy)
    assert "cuzk broken on purpose" in ei.value.log
    assert str(top) in ei.value.log  # diagnostics name the real file
    assert not entries(cache)


def test_relative_include_from_program_directory(cache, cu_copy, monkeypatch):
    (cu_copy / "util" / "zz_sibling.cuh").write_text("#define CUZK_SIBLING 5u\n")
    (cu_copy / "util" / "reltest.cu").write_text(
        '#include "zz_sibling.cuh"\n#include "util/zz_sibling.cuh"\n'
        'extern "C" __global__ void k(unsigned* d_o) { d_o[0] = CUZK_SIBLING; }\n')
    monkeypatch.setitem(_kernels.KERNELS, "reltest", "util/reltest.cu")
    monkeypatch.setitem(_kernels._DEFINES, "reltest", ())
    assert _kernels.compile_program("reltest", cu_root=cu_copy)[:4] == b"\x7fELF"


def test_static_registry_needs_no_stage_module():
    """The program table is static: a fresh interpreter that imports only cuzk._kernels lists
    every program, and no CUDA front end gets imported to register itself."""
    import subprocess
    code = ("import sys, cuzk._kernels as k; "
            "print(sorted(k.KERNELS)); print(sorted(k.programs())); "
            "print(sorted(m for m in sys.modules if m in "
            "('cuzk._cuda_ntt', 'cuzk._cuda_msm', 'cuzk._cuda_batch', 'cuzk._cuda_fixed_base')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    names = eval(out[0])
    assert {"selftest", "ntt", "msm", "batch_add", "fixed_base"} <= set(names)
    assert {"selftest", "ntt", "msm"} <= set(eval(out[1]))
    assert eval(out[2]) == []
    for name, (rel, defs) in _kernels.PROGRAMS.items():
        assert _kernels.KERNELS[name] == rel
        assert rel.endswith(".cu") and isinstance(defs, dict)


def test_every_program_file_in_the_tree_is_in_the_table():
    """A top-level kernel file (a .cu with an extern "C" __global__) that nobody listed would
    never be compiled by ``cuzk kernels --compile``: the table must name it."""
    root = _kernels.cu_root()
    listed = set(_kernels.PROGRAMS[n][0] for n in _kernels.PROGRAMS)
    unlisted = []
    for d, _, files in os.walk(root):
        for f in files:
            if f.endswith(".cu"):
                rel = os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/")
                with open(os.path.join(d, f), encoding="utf-8") as fh:
                    if 'extern "C"' in fh.read() and rel not in listed:
                        unlisted.append(rel)
    assert not unlisted, unlisted


def test_program_without_its_file_is_skipped_until_it_exists(cache, cu_copy, monkeypatch):
    monkeypatch.setitem(_kernels.KERNELS, "later", "util/later.cu")
    monkeypatch.setitem(_kernels._DEFINES, "later", ())
    assert "later" not in _kernels.programs(cu_root=cu_copy)
    with pytest.raises(FileNotFoundError, match="later.cu"):
        _kernels.compile_program("later", cu_root=cu_copy)
    (cu_copy / "util" / "later.cu").write_text('extern "C" __global__ void k(unsigned* d_o) { d_o[0] = 1; }\n')
    assert "later" in _kernels.programs(cu_root=cu_copy)
    assert _kernels.compile_program("later", cu_root=cu_copy)[:4] == b"\x7fELF"


# --------------------------------------------------------------------------- modules

def test_get_module_loads_once_per_device_program_and_options(monkeypatch):
    """``get_module`` compiles and loads a program once per (device, context, program,
    options), also for callers racing on threads; ``clear_module_memo`` forgets them all (no
    GPU: the compiler and the driver's Module are stand-ins that count their calls)."""
    import threading
    from types import SimpleNamespace
    from cuzk._native import _driver
    compiles, loads, lock = [], [], threading.Lock()

    def compile_program(name, arch, target, extra_options):
        time.sleep(0.05)                              # a slow compile: racing callers wait for it
        with lock:
            compiles.append((name, arch, target, tuple(extra_options)))
        return f"{name}/{arch}/{extra_options}".encode()

    class Module:
        @staticmethod
        def load(device, image):
            with lock:
                loads.append((device.ordinal, image))
            return SimpleNamespace(image=image)

    monkeypatch.setattr(_kernels, "compile_program", compile_program)
    monkeypatch.setattr(_driver, "Module", Module)
    _kernels.clear_module_memo()
    try:
        d0 = SimpleNamespace(ordinal=0, context=10, arch="sm_90")
        d1 = SimpleNamespace(ordinal=1, context=11, arch="sm_80")
        mods = run_threaded(lambda i: _kernels.get_module(d0, "selftest"), 8)
        assert all(m is mods[0] for m in mods) and mods[0].image == b"selftest/sm_90/()"
        assert compiles == [("selftest", "sm_90", "cubin", ())] and len(loads) == 1
        assert _kernels.get_module(d0, "selftest") is mods[0] and len(loads) == 1
        other = [_kernels.get_module(d0, "selftest", ("-DX=1",)), _kernels.get_module(d1, "selftest"),
                 _kernels.get_module(SimpleNamespace(ordinal=0, context=12, arch="sm_90"), "selftest"),
                 _kernels.get_module(d0, "ntt")]
        assert len({id(m) for m in other + [mods[0]]}) == 5 and len(loads) == 5
        assert other[1].image == b"selftest/sm_80/()" and loads[2][0] == 1
        _kernels.clear_module_memo()
        again = _kernels.get_module(d0, "selftest")
        assert again is not mods[0] and len(loads) == 6
    finally:
        _kernels.clear_module_memo()
