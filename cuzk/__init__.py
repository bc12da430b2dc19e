"""cuzk: Groth16 over BLS12-381 for Filecoin provers, on NVIDIA GPUs and on the CPU."""
from ._version import __version__
from ._errors import CuzkError, FormatError, CudaError, NvrtcError, BackendUnavailable

__all__ = ["__version__", "CuzkError", "FormatError", "CudaError", "NvrtcError",
           "BackendUnavailable"]
