"""A byte budget per device: memory is reserved before it is allocated (DESIGN §3–4).

The resident key, warm-up tables and every partition's buffers take a ``Reservation`` from
the device's ``Budget`` before any allocation.  A reservation that cannot fit waits (the GIL is
released while it waits) or fails with ``BudgetError``; it never leaves the device out of
memory half-way through a partition.  A worker waits for a reservation holding no device
buffer, so two workers cannot deadlock on memory (the failure of the first two-lock design on
a 16 GB card).
"""
from __future__ import annotations

import threading
import time

from ._errors import BudgetError

__all__ = ["Budget", "Reservation", "BudgetError"]


class Reservation:
    """Bytes held from a ``Budget`` until ``release()`` (idempotent; also a context manager)."""

    __slots__ = ("budget", "nbytes", "what", "_held")

    def __init__(self, budget, nbytes, what):
        self.budget, self.nbytes, self.what, self._held = budget, nbytes, what, True

    @property
    def held(self) -> bool:
        return self._held

    def release(self) -> None:
        budget = self.budget
        with budget._cond:
            if not self._held:
                return
            self._held = False
            budget._used -= self.nbytes
            budget._live.discard(self)
            budget._cond.notify_all()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def __repr__(self):
        state = "held" if self._held else "released"
        return f"Reservation({self.nbytes} bytes, {self.what!r}, {state})"


class Budget:
    """A byte budget (one per device).

    Parameters
    ----------
    total : int or None
        Bytes that may be reserved at once; None = unlimited (reservations are still counted).
    name : str
        Shown in errors and ``snapshot()`` (e.g. ``"cuda:0"``).
    """

    def __init__(self, total: int | None = None, name: str = "device"):
        if total is not None and int(total) < 0:
            raise ValueError(f"budget total must be >= 0, got {total}")
        self.total = None if total is None else int(total)
        self.name = name
        self._used = 0
        self._peak = 0
        self._waiting = 0
        self._live = set()
        self._cond = threading.Condition()

    @property
    def used(self) -> int:
        return self._used

    @property
    def peak(self) -> int:
        return self._peak

    @property
    def waiting(self) -> int:
        """Reservations now waiting for room."""
        return self._waiting

    @property
    def free(self) -> int | None:
        return None if self.total is None else self.total - self._used

    def _fits(self, nbytes):
        return self.total is None or self._used + nbytes <= self.total

    def reserve(self, nbytes: int, what: str = "", *, block: bool = True,
                timeout: float | None = None) -> Reservation:
        """Reserve ``nbytes``.

        Parameters
        ----------
        nbytes : int
            >= 0.
        what : str
            What the bytes are for (errors, ``snapshot``).
        block : bool
            Wait until the bytes fit (True) or fail at once (False).
        timeout : float or None
            Seconds to wait at most when blocking (None: no limit).

        Returns
        -------
        Reservation

        Raises
        ------
        BudgetError
            ``nbytes`` exceeds the whole budget, or does not fit now with ``block=False``, or
            did not fit within ``timeout``.
        """
        nbytes = int(nbytes)
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes}")
        if self.total is not None and nbytes > self.total:
            raise BudgetError(f"{self.name}: {what or 'reservation'} needs {nbytes} bytes, more than "
                              f"the whole budget of {self.total} bytes")
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            if not self._fits(nbytes):
                if not block:
                    raise BudgetError(f"{self.name}: {what or 'reservation'} needs {nbytes} bytes; "
                                      f"{self.total - self._used} of {self.total} free")
                self._waiting += 1
                try:
                    while not self._fits(nbytes):
                        left = None if deadline is None else deadline - time.monotonic()
                        if left is not None and left <= 0:
                            raise BudgetError(
                                f"{self.name}: {what or 'reservation'} needs {nbytes} bytes; "
                                f"{self.total - self._used} of {self.total} free after {timeout} s")
                        self._cond.wait(left)
                finally:
                    self._waiting -= 1
            self._used += nbytes
            self._peak = max(self._peak, self._used)
            res = Reservation(self, nbytes, what)
            self._live.add(res)
            return res

    def snapshot(self) -> dict:
        """{name, total, used, peak, waiting, reservations: [(what, nbytes)]} at this moment."""
        with self._cond:
            return {"name": self.name, "total": self.total, "used": self._used, "peak": self._peak,
                    "waiting": self._waiting,
                    "reservations": sorted(((r.what, r.nbytes) for r in self._live),
                                           key=lambda x: -x[1])}

    def __repr__(self):
        return f"Budget({self.name!r}, used={self._used}, total={self.total})"
