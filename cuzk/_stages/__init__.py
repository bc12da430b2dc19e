"""The stage interface and its backends (DESIGN §3): ``stages_for`` picks one."""
from __future__ import annotations

from ._base import (Completed, HostKey, Partition, R_MODULUS, StageContext, Stages,
                    c_upload_arg, check_randomizers, flag_arg, h_buffers_arg, h_tables_arg,
                    key_where_arg, ones_kind_arg, precompute_arg, random_scalar, row_check_arg,
                    streams_arg, timed)
from ._cpu import CpuStages

__all__ = ["Stages", "StageContext", "Partition", "HostKey", "Completed", "CpuStages",
           "CudaStages", "stages_for", "STAGE_OPTIONS", "parse_stage_options", "R_MODULUS",
           "random_scalar", "check_randomizers", "timed"]

#: The CUDA backend's stage options (``CudaStages`` keywords) and their types.
STAGE_OPTIONS = {"precompute": precompute_arg, "h_window": int, "b_g2": str,
                 "streams": streams_arg, "early_h": flag_arg, "abc_scratch": flag_arg,
                 "ones_kind": ones_kind_arg, "row_check": row_check_arg, "share_sort": flag_arg,
                 "side_scratch": flag_arg, "stream_chunk": int, "stream_slots": int,
                 "key_where": key_where_arg, "h_tables": h_tables_arg, "split_side": flag_arg,
                 "h_buffers": h_buffers_arg, "c_upload": c_upload_arg, "pool_deps": flag_arg}


def parse_stage_options(text):
    """``"precompute=2,h_window=20,b_g2=gpu"`` -> ``{"precompute": 2, ...}`` ('' -> ``{}``).

    Raises
    ------
    ValueError
        An item that is not ``K=V`` with K one of ``STAGE_OPTIONS``, or a value of the wrong type.
    """
    out = {}
    for item in filter(None, (x.strip() for x in str(text).split(","))):
        k, sep, v = item.partition("=")
        k = k.strip().replace("-", "_")
        if not sep or k not in STAGE_OPTIONS:
            raise ValueError(f"stage option {item!r} is not one of "
                             f"{', '.join(f'{n}=V' for n in STAGE_OPTIONS)}")
        try:
            out[k] = STAGE_OPTIONS[k](v.strip())
        except ValueError:
            raise ValueError(f"stage option {k}: {v.strip()!r} is not "
                             f"{STAGE_OPTIONS[k].__name__}") from None
    return out


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
        CUDA backend options (``STAGE_OPTIONS``: ``b_g2``, ``precompute``, ``h_window``).

    Raises
    ------
    ValueError
        Options for the CPU backend (it has none), or a CPU device other than 0.
    """
    from .._backend import resolve_backend
    name = resolve_backend(backend)
    if name == "cuda":
        from ._cuda import CudaStages
        return CudaStages(threads, device=device, **options)
    if options:
        raise ValueError(f"stage options {sorted(options)} are CUDA options; the cpu backend has none")
    if device not in (None, 0):
        raise ValueError(f"the cpu backend has no device {device!r}")
    return CpuStages(threads)
