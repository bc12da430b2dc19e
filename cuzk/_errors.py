"""Typed, picklable exceptions shared by every layer of cuzk."""

__all__ = ["CuzkError", "FormatError", "CudaError", "NvrtcError", "BackendUnavailable",
           "ProofVerificationError", "BudgetError", "UnsatisfiedAssignmentError",
           "EngineError", "EngineBusy", "EngineClosed"]


class CuzkError(Exception):
    """Base class of every error cuzk raises on purpose."""


class FormatError(CuzkError, ValueError):
    """A file or buffer does not hold what its format requires.

    Parameters
    ----------
    path : str or None
        The file (or a label such as ``"<bytes>"``).
    offset : int or None
        Byte offset of the first bad byte.
    expected : str
        What the format requires there.
    """

    def __init__(self, path, offset, expected):
        self.path, self.offset, self.expected = path, offset, expected
        where = str(path) if path is not None else "<input>"
        if offset is not None:
            where += f" at offset {offset}"
        super().__init__(f"{where}: expected {expected}")

    def __reduce__(self):
        return (type(self), (self.path, self.offset, self.expected))


class CudaError(CuzkError, RuntimeError):
    """A CUDA driver call failed: ``call`` names it, ``code``/``name`` is its CUresult."""

    def __init__(self, call, code, name="", message=""):
        self.call, self.code, self.name, self.message = call, int(code), name, message
        super().__init__(f"{call} failed: {name or code} ({int(code)}){': ' + message if message else ''}")

    def __reduce__(self):
        return (type(self), (self.call, self.code, self.name, self.message))


class NvrtcError(CuzkError, RuntimeError):
    """NVRTC failed; ``log`` holds the compiler log when there is one."""

    def __init__(self, call, code, log="", name=""):
        self.call, self.code, self.log, self.name = call, int(code), log, name
        msg = f"{call} failed: {name or code} ({int(code)})"
        if log:
            msg += "\n" + log
        super().__init__(msg)

    def __reduce__(self):
        return (type(self), (self.call, self.code, self.log, self.name))


class BackendUnavailable(CuzkError, RuntimeError):
    """The requested backend cannot be used here (``reason`` says why)."""

    def __init__(self, backend, reason):
        self.backend, self.reason = backend, reason
        super().__init__(f"backend {backend!r} unavailable: {reason}")

    def __reduce__(self):
        return (type(self), (self.backend, self.reason))


class ProofVerificationError(CuzkError):
    """A freshly computed proof failed self-verification (``prove(..., verify=True)``); nothing
    was returned.

    ``cause`` says whose fault it is: ``"assignment"`` (the inputs do not satisfy the circuit:
    a∘b = c holds, so the aux/input values or the key are wrong) or ``"backend"`` (the backend
    computed a wrong result: the same inputs verify on the CPU backend); ``None`` when unknown.
    ``backend`` names the backend that produced the proof.
    """

    def __init__(self, message, cause=None, backend=None):
        self.cause, self.backend = cause, backend
        super().__init__(message)

    def __reduce__(self):
        return (type(self), (self.args[0] if self.args else "", self.cause, self.backend))


class BudgetError(CuzkError, MemoryError):
    """A reservation does not fit a device's byte budget (``cuzk._budget``): it exceeds the
    whole budget, or did not fit in time.  Nothing was allocated for it."""


class UnsatisfiedAssignmentError(CuzkError, ValueError):
    """An assignment's evaluations break a constraint: ``a[row]·b[row] != c[row]`` in Fr
    (``Assignment.check_satisfied``).  ``row`` is the first such row; nothing was proved."""

    def __init__(self, row):
        self.row = int(row)
        super().__init__(f"a[{self.row}]·b[{self.row}] != c[{self.row}] at row {self.row}: "
                         "the assignment does not satisfy the circuit")

    def __reduce__(self):
        return (type(self), (self.row,))


class EngineError(CuzkError, RuntimeError):
    """An engine request that cannot be served as asked (``cuzk.Engine``; the message says why)."""


class EngineBusy(EngineError):
    """``Engine.submit(..., block=False)`` beyond ``max_in_flight`` partitions; nothing was
    queued."""


class EngineClosed(EngineError):
    """The engine is closed or closing: it takes no new work."""
