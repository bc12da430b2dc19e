"""Small helpers shared by several test modules (imported as ``import helpers``)."""
import threading

__all__ = ["run_threaded", "find_snarkjs"]


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


def find_snarkjs():
    """The snarkjs CLI: $CUZK_SNARKJS, .ci/node (what .ci/run installs), /tmp/jstools, PATH."""
    import os
    import shutil
    from pathlib import Path
    repo = Path(__file__).resolve().parent.parent
    cands = [os.environ.get("CUZK_SNARKJS"), str(repo / ".ci/node/node_modules/.bin/snarkjs"),
             "/tmp/jstools/node_modules/.bin/snarkjs", shutil.which("snarkjs")]
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None
