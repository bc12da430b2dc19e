"""A minimal progress bar on stderr (no dependency): shown only on a terminal."""
import sys
import threading
import time

__all__ = ["Progress"]


class Progress:
    """``with Progress("keygen", total) as p: p.update(k)`` draws ``label [####   ] k/total``.

    Drawing happens at most 10 times a second and only when stderr is a TTY (or
    ``force=True``), so piping output or running under CI stays quiet.
    """

    def __init__(self, label, total, force=False, stream=None):
        self.label, self.total = label, max(1, int(total))
        self.stream = stream or sys.stderr
        self.enabled = force or getattr(self.stream, "isatty", lambda: False)()
        self.done = 0
        self._last = 0.0
        self._lock = threading.Lock()
        self._t0 = time.perf_counter()

    def update(self, n=1):
        with self._lock:
            self.done = min(self.total, self.done + n)
            now = time.perf_counter()
            if self.enabled and (now - self._last > 0.1 or self.done == self.total):
                self._last = now
                self._draw(now)

    def _draw(self, now):
        width = 30
        fill = int(width * self.done / self.total)
        bar = "#" * fill + " " * (width - fill)
        self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total} {now - self._t0:6.1f}s")
        self.stream.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
        return False
