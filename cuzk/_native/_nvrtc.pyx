# cython: language_level=3
"""NVRTC (runtime compilation of CUDA C++) over ``cuda.bindings.cynvrtc``.

Compiles to CUBIN for a real architecture (``-arch=sm_XX``) by default: an
NVRTC newer than the driver writes PTX the driver refuses, CUBIN it accepts.
PTX (``-arch=compute_XX``) and LTO-IR stay available.  Every NVRTC call runs
with the GIL released; programs are independent, so threads compile in parallel.
libnvrtc is loaded by cuda-bindings on first use (RuntimeError when absent).
"""

from libc.stdlib cimport malloc, free
from cuda.bindings cimport cynvrtc

from cuzk._errors import NvrtcError

__all__ = ["version", "supported_archs", "compile"]

_TARGETS = ("cubin", "ptx", "ltoir")


cdef str _name(cynvrtc.nvrtcResult r):
    cdef const char* s = NULL
    try:
        s = cynvrtc.nvrtcGetErrorString(r)
    except Exception:
        s = NULL
    return s.decode("utf-8", "replace") if s != NULL else ""


cdef int _check(cynvrtc.nvrtcResult r, str call, str log="") except -1:
    if r != cynvrtc.NVRTC_SUCCESS:
        raise NvrtcError(call, <int>r, log, _name(r))
    return 0


def version():
    """The NVRTC version, (major, minor)."""
    cdef int major = 0, minor = 0
    cdef cynvrtc.nvrtcResult r
    with nogil:
        r = cynvrtc.nvrtcVersion(&major, &minor)
    _check(r, "nvrtcVersion")
    return major, minor


def supported_archs():
    """Compute capabilities NVRTC can target, e.g. [75, 80, ..., 90, 100, 120]."""
    cdef int n = 0
    cdef int* archs
    cdef cynvrtc.nvrtcResult r
    with nogil:
        r = cynvrtc.nvrtcGetNumSupportedArchs(&n)
    _check(r, "nvrtcGetNumSupportedArchs")
    archs = <int*>malloc((n if n > 0 else 1) * sizeof(int))
    if archs == NULL:
        raise MemoryError()
    try:
        with nogil:
            r = cynvrtc.nvrtcGetSupportedArchs(archs)
        _check(r, "nvrtcGetSupportedArchs")
        return [archs[i] for i in range(n)]
    finally:
        free(archs)


cdef str _log(cynvrtc.nvrtcProgram prog):
    cdef size_t size = 0
    cdef char* buf
    cdef cynvrtc.nvrtcResult r
    with nogil:
        r = cynvrtc.nvrtcGetProgramLogSize(prog, &size)
    if r != cynvrtc.NVRTC_SUCCESS or size <= 1:
        return ""
    buf = <char*>malloc(size)
    if buf == NULL:
        raise MemoryError()
    try:
        with nogil:
            r = cynvrtc.nvrtcGetProgramLog(prog, buf)
        if r != cynvrtc.NVRTC_SUCCESS:
            return ""
        return buf[:size - 1].decode("utf-8", "replace").rstrip("\0")
    finally:
        free(buf)


cdef bytes _output(cynvrtc.nvrtcProgram prog, str target, str log):
    cdef size_t size = 0
    cdef char* buf
    cdef cynvrtc.nvrtcResult r
    cdef int kind = _TARGETS.index(target)
    with nogil:
        if kind == 0:
            r = cynvrtc.nvrtcGetCUBINSize(prog, &size)
        elif kind == 1:
            r = cynvrtc.nvrtcGetPTXSize(prog, &size)
        else:
            r = cynvrtc.nvrtcGetLTOIRSize(prog, &size)
    _check(r, f"nvrtcGet{target.upper()}Size", log)
    if size == 0:
        hint = {"cubin": "compile with -arch=sm_XX (a real architecture)",
                "ptx": "compile without -dlto",
                "ltoir": "compile with -dlto"}[target]
        raise NvrtcError(f"nvrtcGet{target.upper()}", 0, log,
                         f"no {target} output: {hint}")
    buf = <char*>malloc(size)
    if buf == NULL:
        raise MemoryError()
    try:
        with nogil:
            if kind == 0:
                r = cynvrtc.nvrtcGetCUBIN(prog, buf)
            elif kind == 1:
                r = cynvrtc.nvrtcGetPTX(prog, buf)
            else:
                r = cynvrtc.nvrtcGetLTOIR(prog, buf)
        _check(r, f"nvrtcGet{target.upper()}", log)
        if target == "ptx" and size and buf[size - 1] == 0:
            size -= 1  # PTX text: drop the terminating NUL
        return buf[:size]
    finally:
        free(buf)


def compile(source, name="program.cu", options=(), headers=None, target="cubin"):
    """Compile CUDA C++ ``source`` with NVRTC (GIL released).

    Parameters
    ----------
    source : bytes or str
        The translation unit.
    name : str
        Its name in diagnostics (and the base of relative ``#include`` search).
    options : sequence of str
        NVRTC options, e.g. ``["--std=c++17", "-arch=sm_90", "-I/path"]``.
        ``target="cubin"`` needs ``-arch=sm_XX``; ``"ptx"`` works with
        ``-arch=compute_XX``.
    headers : dict[str, bytes | str] or None
        In-memory headers, include name -> contents.
    target : {"cubin", "ptx", "ltoir"}

    Returns
    -------
    (bytes, str)
        The image (PTX without its trailing NUL) and the compiler log
        (warnings; empty when there are none).

    Raises
    ------
    NvrtcError
        On any NVRTC failure; ``log`` holds the full compiler log.
    """
    cdef bytes bsrc, bname
    cdef const char* csrc
    cdef const char* cname
    cdef const char** copts = NULL
    cdef const char** hsrc = NULL
    cdef const char** hnames = NULL
    cdef int nopts, nh = 0, i
    cdef cynvrtc.nvrtcProgram prog = NULL
    cdef cynvrtc.nvrtcResult r, rc
    if target not in _TARGETS:
        raise ValueError(f"target must be one of {_TARGETS}, got {target!r}")
    bsrc = source.encode() if isinstance(source, str) else bytes(source)
    bname = name.encode()
    if b"\0" in bsrc:
        raise ValueError("source contains a NUL byte")
    opts = [o.encode() if isinstance(o, str) else bytes(o) for o in options]
    for i, o in enumerate(opts):
        if b"\0" in o:
            raise ValueError(f"option {i} contains a NUL byte")
    hdrs = []
    if headers:
        for k, v in headers.items():
            hdrs.append((k.encode() if isinstance(k, str) else bytes(k),
                         v.encode() if isinstance(v, str) else bytes(v)))
    nopts = len(opts)
    nh = len(hdrs)
    csrc = bsrc
    cname = bname
    try:
        copts = <const char**>malloc((nopts + 1) * sizeof(char*))
        hsrc = <const char**>malloc((nh + 1) * sizeof(char*))
        hnames = <const char**>malloc((nh + 1) * sizeof(char*))
        if copts == NULL or hsrc == NULL or hnames == NULL:
            raise MemoryError()
        for i in range(nopts):
            copts[i] = <bytes>opts[i]
        for i in range(nh):
            hnames[i] = <bytes>hdrs[i][0]
            hsrc[i] = <bytes>hdrs[i][1]
        with nogil:
            r = cynvrtc.nvrtcCreateProgram(&prog, csrc, cname, nh, hsrc, hnames)
        _check(r, "nvrtcCreateProgram")
        with nogil:
            rc = cynvrtc.nvrtcCompileProgram(prog, nopts, copts)
        log = _log(prog)
        _check(rc, "nvrtcCompileProgram", log)
        return _output(prog, target, log), log
    finally:
        if prog != NULL:
            with nogil:
                cynvrtc.nvrtcDestroyProgram(&prog)
        free(copts)
        free(hsrc)
        free(hnames)
