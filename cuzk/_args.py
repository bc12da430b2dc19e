"""Argument normalisation shared by the Python and Cython front ends."""

import operator

__all__ = ["threads_arg"]


def threads_arg(threads):
    """``threads`` as the native modules take it: None or 0 -> 0 (all hardware threads), else
    the positive int; anything else raises ValueError."""
    if threads is None:
        return 0
    try:
        t = operator.index(threads)
    except TypeError:
        raise ValueError(f"threads must be a non-negative integer or None, got {threads!r}") from None
    if t < 0:
        raise ValueError(f"threads must be a non-negative integer or None, got {threads!r}")
    return t
