"""The stage interface and its backends (DESIGN §3): ``stages_for`` picks one."""
from __future__ import annotations

from ._base import (Completed, HostKey, Partition, R_MODULUS, StageContext, Stages,
                    check_randomizers, random_scalar, timed)
from ._cpu import CpuStages

__all__ = ["Stages", "StageContext", "Partition", "HostKey", "Completed", "CpuStages",
           "CudaStages", "stages_for", "R_MODULUS", "random_scalar", "check_randomizers", "timed"]


def __getattr__(name):
    # CudaStages imports the CUDA front ends only when asked for
    if name == "CudaStages":
        from ._cuda import CudaStages
        return CudaStages
    raise AttributeError(name)


def stages_for(backend: str = "auto", threads: int | None = None, device: int | None = None,
               **options) -> Stages:
    """The stage object of a backend.

    Parameters
    ----------
    backend : {"auto", "cpu", "cuda"}
        "auto" picks CUDA when a device is usable (``cuzk.resolve_backend``).
    threads : int or None
        CPU threads of the host stages (None = all cores).
    device : int or None
        CUDA device ordinal (CUDA only).
    **options
        Backend options (CUDA: ``b_g2``).
    """
    from .._backend import resolve_backend
    name = resolve_backend(backend)
    if name == "cuda":
        from ._cuda import CudaStages
        return CudaStages(threads, device=device, **options)
    if device not in (None, 0):
        raise ValueError(f"the cpu backend has no device {device!r}")
    return CpuStages(threads)
