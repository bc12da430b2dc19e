"""Argument normalisation shared by the Python and Cython front ends.

The thread-count rule, one for the whole package (every ``threads=`` argument of the public
API, the stages, the engine and every native module goes through :func:`threads_arg`):

* ``None`` or ``0``: all cores (the native code resolves 0 to the hardware thread count);
* a positive integer ``n`` (anything with ``__index__``): ``n`` threads;
* a negative integer: ``ValueError``;
* not an integer (a float, a string, a bool): ``TypeError``.
"""

import operator

__all__ = ["threads_arg"]


def threads_arg(threads) -> int:
    """``threads`` as the native modules take it.

    Parameters
    ----------
    threads : int or None
        None or 0 for all cores, else a positive number of threads.

    Returns
    -------
    int
        0 (all cores) or the positive count.

    Raises
    ------
    ValueError
        ``threads`` is negative.
    TypeError
        ``threads`` is not an integer (bools are refused too).
    """
    if threads is None:
        return 0
    try:
        if isinstance(threads, bool):
            raise TypeError
        t = operator.index(threads)
    except TypeError:
        raise TypeError(f"threads must be a non-negative integer or None (0 or None = all "
                        f"cores), got {type(threads).__name__} {threads!r}") from None
    if t < 0:
        raise ValueError(f"threads must be a non-negative integer or None (0 or None = all "
                         f"cores), got {threads!r}")
    return t
