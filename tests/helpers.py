"""Small helpers shared by several test modules (imported as ``import helpers``)."""
import os
import shlex
import shutil
import threading
import time
from pathlib import Path

__all__ = ["run_threaded", "find_snarkjs", "CU_DIR", "EMU_DIR", "cxx_compiler", "tail_text",
           "unsatisfied_witness", "wait_until", "start_daemon"]

_HERE = Path(__file__).resolve().parent
#: The host emulator's sources (tests/cu_emu) and the kernel sources of the checkout under test.
EMU_DIR = _HERE / "cu_emu"
CU_DIR = _HERE.parent / "cuzk" / "cu"


def cxx_compiler():
    """The C++ compiler command ($CXX, else c++, g++ or clang++), or None."""
    if os.environ.get("CXX"):
        cmd = shlex.split(os.environ["CXX"])
        return cmd if shutil.which(cmd[0]) else None
    for c in ("c++", "g++", "clang++"):
        if shutil.which(c):
            return [c]
    return None


def tail_text(text, n=6000):
    """The last ``n`` characters of a compiler's output."""
    return text if len(text) <= n else "...\n" + text[-n:]


def start_daemon(target, *args):
    """``target(*args)`` on a started daemon thread, returned: a thread left blocked by a defect
    under test fails the test through its bounded joins and waits, and cannot keep the test
    process from exiting."""
    t = threading.Thread(target=target, args=args, daemon=True)
    t.start()
    return t


def wait_until(cond, what, timeout=10):
    """Poll ``cond()`` until it is true, for at most ``timeout`` s; AssertionError naming ``what``
    after that (a test's wait for another thread's state, bounded)."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"still waiting after {timeout} s for {what}"
        time.sleep(0.005)


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


def unsatisfied_witness(log_n, seed, backend="cpu"):
    """``(pk, good, bad, row)`` of ``porep_like(log_n, seed)``: a good assignment and one whose
    witness (one aux value changed) leaves row ``row`` unsatisfied, a, b, c = A·w, B·w, C·w."""
    from cuzk._circuit import porep_like
    from cuzk._keygen import keygen_random
    r1cs, inputs, aux = porep_like(log_n, seed)
    pk = keygen_random(r1cs, seed=seed, backend=backend)
    aux2 = aux.copy()
    aux2[5] = aux2[9]
    row = r1cs.unsatisfied_row(inputs, aux2)
    assert row >= 0
    return pk, r1cs.assignment(inputs, aux), r1cs.assignment(inputs, aux2), row
