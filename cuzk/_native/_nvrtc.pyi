"""Type stubs for cuzk._native._nvrtc (NVRTC over cuda.bindings.cynvrtc)."""
from typing import Literal, Mapping, Sequence

__all__ = ["version", "supported_archs", "compile"]


def version() -> tuple[int, int]: ...
def supported_archs() -> list[int]: ...
def compile(source: bytes | str, name: str = "program.cu", options: Sequence[str] = (),
            headers: Mapping[str, bytes | str] | None = None,
            target: Literal["cubin", "ptx", "ltoir"] = "cubin") -> tuple[bytes, str]: ...
