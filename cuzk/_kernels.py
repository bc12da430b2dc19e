"""Kernel registry, NVRTC disk cache and per-device module memo.

Kernel sources are the ``.cu``/``.cuh`` files under ``cuzk/cu/`` (package
data).  A *program* is one top-level ``.cu`` file; the programs are a static
table (``PROGRAMS``: name -> .cu path and defines), so listing or compiling
them imports no stage module.  ``register(name, relpath, defines)`` adds one
(tests, experiments).  NVRTC compiles a program with ``-I<cu root>``.

Cache key (``cache_key``): sha256 over labelled, length-prefixed fields:
schema version, cuzk version, NVRTC version, program name and path, arch,
target, options (the cu root spelled ``<cu>`` so the key does not depend on
where cuzk is installed) and the relative path + bytes of every file under
the cu root (headers are read from disk, so hashing only the top-level source
could not see their changes).

Disk entries live in ``$CUZK_CACHE_DIR`` (default ``~/.cache/cuzk/kernels``),
one file per key, written by ``cuzk._io.atomic_write``; each holds
a magic, the key, the payload length and the payload's sha256, so a corrupt or
truncated entry is a miss and gets rewritten.  Within a process, one thread
compiles a given key while the others wait for it.

Environment: ``CUZK_CACHE_DIR`` (cache directory), ``CUZK_CU_DIR`` (kernel
source root, for development), ``CUZK_KERNEL_CACHE=0`` (disable the disk cache),
``CUZK_NVRTC_OPTIONS`` (extra NVRTC options for every program, part of the key; for
development: ``-lineinfo`` for source lines in compute-sanitizer and ncu reports, or ``-D``
variants of a kernel).
"""

import hashlib
import logging
import os
import re
import threading
import time

from ._io import atomic_write
from ._version import __version__

__all__ = [
    "PROGRAMS", "KERNELS", "SCHEMA_VERSION", "register", "programs", "cu_root", "cache_dir",
    "nvrtc_options",
    "cache_key", "compile_program", "get_module", "compile_all", "load_program_modules",
    "clear_module_memo",
]

log = logging.getLogger("cuzk.kernels")

SCHEMA_VERSION = 1

#: The programs of cuzk: name -> (top-level .cu file relative to the cu root, defines).
#: A program whose file is not (yet) in the cu root is listed but skipped by ``programs()`` and
#: ``compile_all``; compiling it by name fails with FileNotFoundError naming the file.
PROGRAMS = {
    "selftest": ("util/selftest.cu", {}),
    "ntt": ("ntt/ntt.cu", {}),             # cuzk._cuda_ntt
    "msm": ("msm/msm.cu", {}),             # cuzk._cuda_msm
    "batch_add": ("msm/batch_add.cu", {}),  # cuzk._cuda_batch
    "fixed_base": ("ec/fixed_base.cu", {}),  # cuzk._cuda_fixed_base
}

#: program name -> top-level .cu file, relative to the cu root (POSIX separators): PROGRAMS
#: plus whatever ``register`` added.
KERNELS: dict = {}
_DEFINES: dict = {}            # program name -> tuple of (macro, value or None)
_registry_lock = threading.Lock()

_DEFAULT_CU_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cu")
_MAGIC = b"CUZKKC01"
_HEADER = len(_MAGIC) + 32 + 8 + 32    # magic, key, payload length (LE u64), payload sha256
_ARCH_RE = re.compile(r"^(?:sm|compute)_(\d+)([af]?)$")


def register(name, relpath, defines=None):
    """Register program ``name`` compiled from ``relpath`` (relative to the cu root).

    Parameters
    ----------
    name : str
        Program name used by ``compile_program``/``get_module``.
    relpath : str
        Top-level ``.cu`` file, relative to ``cuzk/cu`` (e.g. ``"ntt/ntt.cu"``).
    defines : dict[str, object] or None
        Macros passed as ``-DNAME=value`` (``None`` value: ``-DNAME``).

    Re-registering the same program identically is a no-op (modules may be
    re-imported); a different definition raises ValueError.
    """
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.\-]+", name):
        raise ValueError(f"bad program name {name!r}")
    rel = str(relpath).replace("\\", "/")
    if rel.startswith("/") or ".." in rel.split("/") or not rel.endswith(".cu"):
        raise ValueError(f"program {name!r}: relpath must be a .cu file inside the cu root, got {relpath!r}")
    defs = tuple(sorted((str(k), None if v is None else str(v)) for k, v in (defines or {}).items()))
    for k, _ in defs:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
            raise ValueError(f"program {name!r}: bad macro name {k!r}")
    with _registry_lock:
        if name in KERNELS and (KERNELS[name], _DEFINES[name]) != (rel, defs):
            raise ValueError(f"program {name!r} already registered as {KERNELS[name]!r} {_DEFINES[name]!r}")
        KERNELS[name] = rel
        _DEFINES[name] = defs


for _name, (_rel, _defs) in PROGRAMS.items():
    register(_name, _rel, _defs)
del _name, _rel, _defs


def programs(cu_root=None):
    """Sorted names of the registered programs whose top-level file exists under the cu root."""
    root = _root(cu_root)
    with _registry_lock:
        items = sorted(KERNELS.items())
    return [n for n, rel in items if os.path.isfile(os.path.join(root, *rel.split("/")))]


def cu_root():
    """The kernel source root: ``$CUZK_CU_DIR`` if set, else the packaged ``cuzk/cu``."""
    return _root(None)


def _root(root):
    return os.path.abspath(root or os.environ.get("CUZK_CU_DIR") or _DEFAULT_CU_ROOT)


def cache_dir():
    """The disk cache directory: ``$CUZK_CACHE_DIR`` or ``~/.cache/cuzk/kernels``."""
    d = os.environ.get("CUZK_CACHE_DIR")
    if d:
        return os.path.abspath(os.path.expanduser(d))
    return os.path.join(os.path.expanduser("~"), ".cache", "cuzk", "kernels")


def _arch(arch):
    """Normalize 90 / "90" / "sm_90" / "sm_90a" to (sm_XX, compute_XX)."""
    a = str(arch)
    if a.isdigit():
        a = "sm_" + a
    m = _ARCH_RE.match(a)
    if not m:
        raise ValueError(f"bad arch {arch!r}: expected e.g. 'sm_90'")
    return f"sm_{m.group(1)}{m.group(2)}", f"compute_{m.group(1)}{m.group(2)}"


def _program(name):
    with _registry_lock:
        if name not in KERNELS:
            raise KeyError(f"unknown kernel program {name!r}; registered: {sorted(KERNELS)}")
        return KERNELS[name], _DEFINES[name]


def nvrtc_options(name, arch="sm_90", target="cubin", extra_options=(), *, cu_root=None):
    """The NVRTC option list for program ``name``.

    CUBIN builds for ``-arch=sm_XX``, PTX for ``-arch=compute_XX``; then
    ``--std=c++17 -default-device -I<cu root> -DCUZK_NVRTC=1``, the program's
    defines, ``extra_options`` and ``$CUZK_NVRTC_OPTIONS`` (split on whitespace; e.g.
    ``-lineinfo``).
    """
    root = _root(cu_root)
    sm, compute = _arch(arch)
    if target not in ("cubin", "ptx"):
        raise ValueError(f"target must be 'cubin' or 'ptx', got {target!r}")
    _, defs = _program(name)
    opts = [f"-arch={sm if target == 'cubin' else compute}", "--std=c++17", "-default-device",
            f"-I{root}", "-DCUZK_NVRTC=1"]
    opts += [f"-D{k}" if v is None else f"-D{k}={v}" for k, v in defs]
    opts += [str(o) for o in extra_options]
    opts += os.environ.get("CUZK_NVRTC_OPTIONS", "").split()
    return opts


def _tree(root):
    """Sorted (relative POSIX path, bytes) of every file under ``root``
    (skipping hidden names and __pycache__)."""
    out = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if not x.startswith(".") and x != "__pycache__")
        for f in files:
            if f.startswith(".") or f.endswith((".pyc", ".pyo")):
                continue
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                out.append((os.path.relpath(p, root).replace(os.sep, "/"), fh.read()))
    out.sort()
    return out


def _field(h, label, data):
    if isinstance(data, str):
        data = data.encode()
    lb = label.encode()
    h.update(len(lb).to_bytes(2, "little") + lb + len(data).to_bytes(8, "little"))
    h.update(data)


def _nvrtc_version():
    from ._native import _nvrtc
    return _nvrtc.version()


def cache_key(name, arch="sm_90", options=None, target="cubin", *, cu_root=None):
    """Hex sha256 identifying the compiled image of program ``name``.

    ``options`` is the full NVRTC option list (default ``nvrtc_options(name,
    arch, target)``); occurrences of the cu root in it are replaced by ``<cu>``.
    """
    root = _root(cu_root)
    rel, _ = _program(name)
    if options is None:
        options = nvrtc_options(name, arch, target, cu_root=root)
    major, minor = _nvrtc_version()
    h = hashlib.sha256()
    _field(h, "schema", str(SCHEMA_VERSION))
    _field(h, "cuzk", __version__)
    _field(h, "nvrtc", f"{major}.{minor}")
    _field(h, "program", name)
    _field(h, "source", rel)
    _field(h, "arch", _arch(arch)[0])
    _field(h, "target", target)
    _field(h, "noptions", str(len(options)))
    for o in options:
        _field(h, "option", str(o).replace(root, "<cu>"))
    files = _tree(root)
    _field(h, "nfiles", str(len(files)))
    for path, data in files:
        _field(h, "path", path)
        _field(h, "bytes", data)
    return h.hexdigest()


# --------------------------------------------------------------------------- disk entries

def _entry_path(key, target):
    return os.path.join(cache_dir(), f"{key}.{target}")


def _read_entry(path, key):
    """The payload of a valid entry, or None (missing, short, corrupt, other key)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if len(data) < _HEADER or data[:len(_MAGIC)] != _MAGIC:
        return None
    o = len(_MAGIC)
    if data[o:o + 32] != bytes.fromhex(key):
        return None
    n = int.from_bytes(data[o + 32:o + 40], "little")
    digest = data[o + 40:o + 72]
    payload = data[_HEADER:]
    if len(payload) != n or hashlib.sha256(payload).digest() != digest:
        log.warning("kernel cache entry %s is corrupt; recompiling", path)
        return None
    return payload


_warned_unwritable = False


def _write_entry(path, key, payload):
    """Atomically write an entry; a cache that cannot be written only costs time."""
    global _warned_unwritable
    d = os.path.dirname(path)
    try:
        os.makedirs(d, exist_ok=True)
        atomic_write(path, _MAGIC + bytes.fromhex(key) + len(payload).to_bytes(8, "little")
                     + hashlib.sha256(payload).digest() + payload)
    except OSError as e:
        if not _warned_unwritable:
            _warned_unwritable = True
            log.warning("kernel cache %s not writable (%s); compiling without it", d, e)


_key_locks = {}
_key_locks_lock = threading.Lock()


def _key_lock(key):
    with _key_locks_lock:
        lk = _key_locks.get(key)
        if lk is None:
            lk = _key_locks[key] = threading.Lock()
        return lk


def _compile(name, arch, target, extra_options, root):
    """(image, cached, seconds) for program ``name``."""
    from ._native import _nvrtc
    root = _root(root)
    rel, _ = _program(name)
    opts = nvrtc_options(name, arch, target, extra_options, cu_root=root)
    t0 = time.perf_counter()
    key = cache_key(name, arch, opts, target, cu_root=root)
    use_cache = os.environ.get("CUZK_KERNEL_CACHE", "1") != "0"
    path = _entry_path(key, target)
    with _key_lock(key):
        if use_cache:
            image = _read_entry(path, key)
            if image is not None:
                return image, True, time.perf_counter() - t0
        src_path = os.path.join(root, *rel.split("/"))
        with open(src_path, "rb") as f:
            source = f.read()
        # The absolute path as the program name lets NVRTC resolve quoted
        # includes relative to the top-level file, as a compiler would.
        image, clog = _nvrtc.compile(source, src_path, opts, None, target)
        if clog.strip():
            log.debug("NVRTC log for %s (%s):\n%s", name, arch, clog)
        if use_cache:
            _write_entry(path, key, image)
        return image, False, time.perf_counter() - t0


def compile_program(name, arch="sm_90", target="cubin", extra_options=(), *, cu_root=None):
    """Compile program ``name`` for ``arch`` (or load it from the disk cache).

    Parameters
    ----------
    name : str
        A registered program (see ``KERNELS``).
    arch : str
        ``"sm_90"`` etc.  CUBIN is built for exactly this arch.
    target : {"cubin", "ptx"}
    extra_options : sequence of str
        Added NVRTC options (part of the key).
    cu_root : str or None
        Kernel source root (default ``cu_root()``).

    Returns
    -------
    bytes
        The CUBIN (or PTX text).

    Raises
    ------
    KeyError for an unknown program, NvrtcError (with the log) when NVRTC fails.
    """
    return _compile(name, arch, target, tuple(extra_options), cu_root)[0]


# --------------------------------------------------------------------------- modules

_modules = {}
_module_locks = {}
_modules_lock = threading.Lock()


def get_module(device, name, extra_options=()):
    """The loaded Module of program ``name`` on ``device`` (compiled for ``device.arch``).

    Memoized per (device context, program, options); thread-safe: concurrent
    callers for the same key wait for one compile and load.
    """
    from ._native._driver import Module
    k = (device.ordinal, device.context, name, tuple(extra_options))
    mod = _modules.get(k)
    if mod is not None:
        return mod
    with _modules_lock:
        lk = _module_locks.setdefault(k, threading.Lock())
    with lk:
        mod = _modules.get(k)
        if mod is None:
            image = compile_program(name, device.arch, "cubin", extra_options)
            mod = Module.load(device, image)
            _modules[k] = mod
    return mod


def clear_module_memo():
    """Forget the memoized modules (they unload when no longer referenced)."""
    with _modules_lock:
        _modules.clear()
        _module_locks.clear()


def load_program_modules():
    """Nothing to do: the programs are the static ``PROGRAMS`` table (kept for old callers)."""


def compile_all(arch="sm_90", target="cubin", *, cu_root=None):
    """Compile every program of ``programs()`` (used by ``cuzk kernels --compile``).

    Returns
    -------
    list of (name, nbytes, seconds, cached)
    """
    out = []
    for name in programs(cu_root):
        image, cached, secs = _compile(name, arch, target, (), cu_root)
        out.append((name, len(image), secs, cached))
    return out
