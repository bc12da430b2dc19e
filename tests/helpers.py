"""Small helpers shared by several test modules (imported as ``import helpers``)."""
import threading

__all__ = ["run_threaded"]


def run_threaded(fn, nthreads):
    """Run fn(i) on nthreads threads started together; re-raise the first error."""
    barrier = threading.Barrier(nthreads)
    errors = [None] * nthreads
    results = [None] * nthreads

    def body(i):
        try:
            barrier.wait()
            results[i] = fn(i)
        except BaseException as e:  # forwarded to the caller below
            errors[i] = e

    threads = [threading.Thread(target=body, args=(i,)) for i in range(nthreads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for e in errors:
        if e is not None:
            raise e
    return results
