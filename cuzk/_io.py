"""Writing files so that readers never see a half-written one.

:func:`atomic_write` is the one atomic writer of the package: the data goes to a temporary
file created (uniquely, by :func:`tempfile.mkstemp`) in the target's directory, is flushed and
fsynced, and is renamed onto the target with :func:`os.replace` (atomic on POSIX within one
file system).  On any exception the temporary file is removed and the target is untouched;
errors name the target, never the temporary file.
"""
from __future__ import annotations

import os
import tempfile

__all__ = ["atomic_write"]


def _umask() -> int:
    # os.umask can only be read by setting it; done once, at import (single-threaded then)
    m = os.umask(0o022)
    os.umask(m)
    return m


_UMASK = _umask()


def _fsync_dir(d: str) -> None:
    """Make the rename durable (best effort: some file systems refuse O_RDONLY on dirs)."""
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path, data) -> None:
    """Write ``data`` to ``path`` atomically.

    Parameters
    ----------
    path : str or os.PathLike
        The target file; its directory must exist.  An existing file is replaced.
    data : bytes-like, str, or callable
        The whole content (``str`` is encoded as UTF-8), or ``data(f)`` that writes it to
        ``f``, the temporary file open in binary mode (large outputs streamed in chunks:
        ``.params`` files, ``np.savez(f, ...)``).  An exception from it aborts the write.

    Raises
    ------
    OSError
        The directory is missing or not writable, ``path`` is a directory, the disk is full, …
        ``filename`` is ``path`` (never the temporary name).  Nothing is left behind.
    TypeError
        ``data`` is neither bytes-like, str nor callable.
    """
    path = os.fspath(path)
    if isinstance(data, str):
        data = data.encode("utf-8")
    elif not isinstance(data, (bytes, bytearray, memoryview)) and not callable(data):
        raise TypeError(f"atomic_write: data must be bytes, str or a writer callable, "
                        f"not {type(data).__name__}")
    d, base = os.path.split(os.path.abspath(path))
    tmp = None
    try:
        if os.path.isdir(path):
            raise IsADirectoryError(21, "Is a directory", path)
        fd, tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=".tmp", dir=d)
        with os.fdopen(fd, "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)      # mkstemp makes 0600; a written file follows umask
        os.replace(tmp, path)
        tmp = None
        _fsync_dir(d)
    except OSError as e:
        if e.filename == path:
            raise
        raise type(e)(e.errno, e.strerror, path) from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
