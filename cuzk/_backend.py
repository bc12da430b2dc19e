"""Backend selection: is a CUDA device usable here, and which backend runs a job."""

import logging
import threading

from ._errors import BackendUnavailable

__all__ = ["BACKENDS", "cuda_available", "resolve_backend"]

log = logging.getLogger("cuzk.backend")

BACKENDS = ("auto", "cpu", "cuda")

_lock = threading.Lock()
_cuda_state = None          # (bool, reason) once probed
_auto_logged = False


def _probe_cuda():
    """(usable, reason): the driver layer imports, a device exists, NVRTC loads and can
    target device 0's architecture."""
    try:
        from ._native import _driver
    except Exception as e:  # not built, or cuda-bindings missing/broken
        return False, f"the cuzk CUDA driver layer cannot be imported: {type(e).__name__}: {e}"
    try:
        ok, reason = _driver.probe()
    except Exception as e:  # probe() never raises by contract; belt and braces
        return False, f"CUDA probe failed: {type(e).__name__}: {e}"
    if not ok:
        return False, reason
    try:
        from ._native import _nvrtc
        major, minor = _nvrtc.version()
        archs = _nvrtc.supported_archs()
        dev = _driver.Device.get(0)
        cc = dev.cc[0] * 10 + dev.cc[1]
    except Exception as e:
        return False, f"CUDA device found but NVRTC or the device is unusable: {type(e).__name__}: {e}"
    if cc not in archs:
        return False, f"NVRTC {major}.{minor} cannot target {dev.arch} ({dev.name}); it supports {archs}"
    return True, f"{reason}; NVRTC {major}.{minor}"


def cuda_available() -> tuple[bool, str]:
    """Whether the CUDA backend is usable in this process (probed once, then cached).

    Returns
    -------
    (bool, str)
        The answer and a one-line reason.  Never raises.
    """
    global _cuda_state
    with _lock:
        if _cuda_state is None:
            try:
                _cuda_state = _probe_cuda()
            except Exception as e:
                _cuda_state = (False, f"CUDA probe failed: {type(e).__name__}: {e}")
        return _cuda_state


def resolve_backend(name: str = "auto") -> str:
    """Map a backend request to the backend that will run.

    Parameters
    ----------
    name : {"auto", "cpu", "cuda"}
        ``"auto"`` picks ``"cuda"`` when a device is usable, else ``"cpu"``,
        and logs its choice and the reason once per process.

    Returns
    -------
    str
        ``"cpu"`` or ``"cuda"``.

    Raises
    ------
    ValueError
        For an unknown name.
    BackendUnavailable
        For ``"cuda"`` when no usable device exists.
    """
    global _auto_logged
    key = name.lower() if isinstance(name, str) else name
    if key not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {name!r}")
    if key == "cpu":
        return "cpu"
    ok, reason = cuda_available()
    if key == "cuda":
        if not ok:
            raise BackendUnavailable("cuda", reason)
        return "cuda"
    choice = "cuda" if ok else "cpu"
    with _lock:
        first = not _auto_logged
        _auto_logged = True
    if first:
        log.info("backend 'auto' -> %s (%s)", choice, reason)
    return choice


def _reset():
    """Forget the cached probe and the 'auto' log flag (tests only)."""
    global _cuda_state, _auto_logged
    with _lock:
        _cuda_state = None
        _auto_logged = False
