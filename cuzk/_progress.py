"""Progress of long work (keygen, key loading, proving) on stderr, for terminals and for logs.

On a terminal a bar is redrawn in place (``\\r``) at most ``1/tty_interval`` times a second.
Anywhere else (a pipe, a log file, CI) whole lines are written instead, one every
``interval`` seconds while the work lasts and, when there was one, a last one at the end
(work shorter than ``interval`` stays silent, and a failure is left to the error message),
so that a piped ``cuzk keygen --log-n 20`` shows it is alive::

    keygen 2^20: 2/4 (50%) 25.1 s
    keygen 2^20: done 4/4 in 50.3 s

A heartbeat thread keeps the output going when updates are rare (a key load is one step).
No dependency: tqdm draws ``\\r`` frames into pipes too, which is what logs must not get.
"""
from __future__ import annotations

import os
import sys
import threading
import time

__all__ = ["Progress", "LINE_INTERVAL"]

#: Seconds between progress lines when stderr is not a terminal (``CUZK_PROGRESS_INTERVAL``).
LINE_INTERVAL = 10.0
_TTY_INTERVAL = 0.1
_WIDTH = 30


def _line_interval() -> float:
    v = os.environ.get("CUZK_PROGRESS_INTERVAL")
    try:
        return max(0.0, float(v)) if v else LINE_INTERVAL
    except ValueError:
        return LINE_INTERVAL


class Progress:
    """``with Progress("keygen", total) as p: p.update(k)``.

    Parameters
    ----------
    label : str
        Printed before the counts.
    total : int
        Number of steps (at least 1).
    enabled : bool
        False makes every call a no-op (library callers that want silence).
    tty : bool or None
        Force the terminal (bar) or line style; None asks ``stream.isatty()``.
    stream : file or None
        Where to write (default ``sys.stderr``, looked up when the Progress is made).
    interval : float or None
        Seconds between lines in line style (default :data:`LINE_INTERVAL`, or
        ``$CUZK_PROGRESS_INTERVAL``); 0 writes a line at every update.
    force : bool
        Old spelling of ``tty=True``.
    """

    def __init__(self, label, total, enabled=True, tty=None, stream=None, interval=None,
                 force=False):
        self.label, self.total = label, max(1, int(total))
        self.stream = stream if stream is not None else sys.stderr
        if force:
            tty = True
        if tty is None:
            try:
                tty = bool(self.stream.isatty())
            except (AttributeError, ValueError):     # no isatty, or a closed stream
                tty = False
        self.tty, self.enabled = tty, bool(enabled)
        self.interval = _TTY_INTERVAL if tty else (_line_interval() if interval is None
                                                   else float(interval))
        self.done = 0
        self._lock = threading.Lock()
        self._t0 = time.perf_counter()
        self._last = self._t0
        self._closed = False
        self._lines = 0                 # periodic lines written (line style)
        self._stop = threading.Event()
        self._beat = None

    # -- drawing (caller holds the lock)
    def _text(self, now):
        pct = 100 * self.done // self.total
        return f"{self.label}: {self.done}/{self.total} ({pct}%) {now - self._t0:.1f} s"

    def _write(self, s):
        try:
            self.stream.write(s)
            self.stream.flush()
        except (OSError, ValueError):    # a closed pipe or stream: progress is never fatal
            self.enabled = False

    def _draw(self, now):
        self._last = now
        if self.tty:
            fill = _WIDTH * self.done // self.total
            bar = "#" * fill + " " * (_WIDTH - fill)
            self._write(f"\r{self.label} [{bar}] {self.done}/{self.total} {now - self._t0:6.1f}s")
        else:
            self._lines += 1
            self._write(self._text(now) + "\n")

    def update(self, n=1):
        """Advance by ``n`` steps (thread-safe); draws when the interval has passed."""
        with self._lock:
            self.done = min(self.total, self.done + int(n))
            if not self.enabled or self._closed:
                return
            now = time.perf_counter()
            if now - self._last >= self.interval or (self.tty and self.done == self.total):
                self._draw(now)

    def _heartbeat(self):
        while not self._stop.wait(max(self.interval, 0.05)):
            with self._lock:
                if self._closed or not self.enabled:
                    return
                now = time.perf_counter()
                if now - self._last >= max(self.interval, 0.05) * 0.99:
                    self._draw(now)

    def __enter__(self):
        if self.enabled:
            if self.tty:
                with self._lock:
                    self._draw(time.perf_counter())
            self._beat = threading.Thread(target=self._heartbeat, name="cuzk-progress",
                                          daemon=True)
            self._beat.start()
        return self

    def close(self, ok=True):
        """Stop the heartbeat and end the output: on a terminal the bar's line (`` failed``
        appended when ``ok`` is false), in line style a ``done`` line after periodic ones."""
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
            self._beat = None
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if not self.enabled:
                return
            now = time.perf_counter()
            if self.tty:
                self._draw(now)
                self._write("\n" if ok else " failed\n")
            elif ok and self._lines:
                self._write(f"{self.label}: done {self.done}/{self.total} "
                            f"in {now - self._t0:.1f} s\n")

    def __exit__(self, exc_type, *exc):
        self.close(ok=exc_type is None)
        return False
