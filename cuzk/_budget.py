"""A byte budget per device: memory is reserved before it is allocated (DESIGN §3–4).

The resident key, warm-up tables and every partition's buffers take a ``Reservation`` from
the device's ``Budget`` before any allocation.  A reservation that cannot fit waits (the GIL is
released while it waits) or fails with ``BudgetError``; it never leaves the device out of
memory half-way through a partition.  A worker waits for a reservation holding no device
buffer, so two workers cannot deadlock on memory (the failure of the first two-lock design on
a 16 GB card).  Keys reserve ``lasting`` bytes (held until the key is released): a reservation
larger than the budget less them fails at once instead of waiting for bytes that only releasing
a key would free (``cuzk.prove`` on a card too small for a 2^27 partition beside its key).
"""
from __future__ import annotations

import threading
import time

from ._errors import BudgetError

__all__ = ["Budget", "Reservation", "BudgetError"]


class Reservation:
    """Bytes held from a ``Budget`` until ``release()`` (idempotent; also a context manager)."""

    __slots__ = ("budget", "nbytes", "what", "lasting", "_held")

    def __init__(self, budget, nbytes, what, lasting=False):
        self.budget, self.nbytes, self.what, self._held = budget, nbytes, what, True
        self.lasting = bool(lasting)

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
            if self.lasting:
                budget._lasting -= self.nbytes
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
        self._lasting = 0
        self._peak = 0
        self._waiting = 0
        self._live = set()
        self._cond = threading.Condition()

    @property
    def used(self) -> int:
        return self._used

    @property
    def lasting(self) -> int:
        """Bytes held by ``lasting`` reservations (keys)."""
        return self._lasting

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

    @property
    def beside_keys(self) -> int | None:
        """Bytes the budget leaves beside its ``lasting`` reservations (the resident keys): the
        most any other reservation can ever get; None without a total."""
        return None if self.total is None else self.total - self._lasting

    def _fits(self, nbytes):
        return self.total is None or self._used + nbytes <= self.total

    def reserve(self, nbytes: int, what: str = "", *, block: bool = True,
                timeout: float | None = None, lasting: bool = False) -> Reservation:
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
        lasting : bool
            Bytes a key holds until it is released (a resident key, its tables): other
            reservations never wait for them.

        Returns
        -------
        Reservation

        Raises
        ------
        BudgetError
            ``nbytes`` exceeds the whole budget, or (not ``lasting``) the budget less the lasting
            reservations, or does not fit now with ``block=False``, or did not fit within
            ``timeout``.
        """
        nbytes = int(nbytes)
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes}")
        if self.total is not None and nbytes > self.total:
            raise BudgetError(f"{self.name}: {what or 'reservation'} needs {nbytes} bytes, more than "
                              f"the whole budget of {self.total} bytes")
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._refuse_never_fitting(nbytes, what, lasting)
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
                        self._refuse_never_fitting(nbytes, what, lasting)   # a key loaded meanwhile
                finally:
                    self._waiting -= 1
            self._used += nbytes
            if lasting:
                self._lasting += nbytes
            self._peak = max(self._peak, self._used)
            res = Reservation(self, nbytes, what, lasting)
            self._live.add(res)
            return res

    def never_fits(self, nbytes) -> bool:
        """Whether a reservation of ``nbytes`` (not lasting) cannot fit while the lasting
        reservations are held, so ``reserve`` would refuse it at once."""
        return self.total is not None and int(nbytes) + self._lasting > self.total

    def _refuse_never_fitting(self, nbytes, what, lasting):
        """Raise BudgetError for ``never_fits`` (under the condition's lock)."""
        if not lasting and self.never_fits(nbytes):
            raise BudgetError(f"{self.name}: {what or 'reservation'} needs {nbytes} bytes; the "
                              f"budget of {self.total} bytes less {self._lasting} bytes of "
                              f"resident keys leaves {self.beside_keys}")

    def snapshot(self) -> dict:
        """{name, total, used, peak, waiting, reservations: [(what, nbytes)]} at this moment."""
        with self._cond:
            return {"name": self.name, "total": self.total, "used": self._used, "peak": self._peak,
                    "waiting": self._waiting,
                    "reservations": sorted(((r.what, r.nbytes) for r in self._live),
                                           key=lambda x: -x[1])}

    def __repr__(self):
        return f"Budget({self.name!r}, used={self._used}, total={self.total})"
