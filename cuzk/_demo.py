"""Test-circuit generation, the ``cuzk demo`` run and the ``cuzk bench`` table.

* :func:`keygen_to_dir` writes a PoRep-like circuit's parameters (bellperson ``.params`` and
  ``.vk``), its assignment (``.npz``) and its public inputs (``public.json``) to a directory.
* :func:`ensure_circuit` keeps such directories in a cache (``<cache>/<entry_name(log_n, seed)>``:
  size, seed, generator version and NumPy feature version, so another generator's entry is never
  picked up); an entry is generated in a temporary directory beside it and renamed into place
  when complete, so a partially written entry is never used; an entry that fails to load is
  regenerated.
* :func:`run_demo` proves and verifies one cached circuit and prints per-stage timings.
* :func:`run_bench` repeats that over sizes and prints median per-stage timings.
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time

__all__ = ["CIRCUITS", "DEMO_SEED", "generate_circuit", "keygen_to_dir", "default_cache_dir", "ensure_circuit",
           "entry_name", "load_circuit", "bench_sizes", "format_table", "run_demo", "run_bench"]

#: Circuit families ``keygen_to_dir`` knows.
CIRCUITS = ("porep-like",)
#: Seed of the circuits ``cuzk demo`` and ``cuzk bench`` generate.
DEMO_SEED = 0
_FILES = ("circuit.params", "circuit.vk", "assignment.npz", "public.json")
# stage keys of cuzk._prover.prove's timings, in pipeline order (others are appended)
_STAGE_ORDER = ("validate", "h", "prep_msm", "upload", "l", "a", "b_g1", "b_g2", "region", "batch_add", "tail_msm",
                "epilogue", "verify", "total")


def keygen_to_dir(out, circuit="porep-like", log_n=10, seed=0, threads=None, quiet=True,
                  progress=None):
    """Generate a test circuit, its parameters and a satisfying assignment into ``out``.

    Writes ``out/circuit.params`` and ``out/circuit.vk`` (bellperson format),
    ``out/assignment.npz`` (:class:`cuzk._assignment.Assignment`) and ``out/public.json``
    (the public inputs as decimal strings, without the leading 1). Each file is written to a
    temporary name and renamed.

    Parameters
    ----------
    out : str or os.PathLike
        Directory (created when missing).
    circuit : {"porep-like"}
    log_n : int
        log2 of the domain (constraints including the input rows fill it).
    seed : int
        Makes the circuit, the witness and the toxic waste deterministic.
    threads : int or None
        CPU threads (None = all cores).
    quiet : bool
        When False, print one line per step with its duration.
    progress : bool or None
        Report keygen progress on stderr (:class:`cuzk._progress.Progress`: a bar on a
        terminal, periodic lines elsewhere); None means ``not quiet``.

    Returns
    -------
    dict
        Seconds per step: ``circuit``, ``keygen``, ``assignment``, ``write``.

    Raises
    ------
    ValueError
        Unknown circuit or a size the generator refuses (before anything is created).
    OSError
        ``out`` exists and is not a directory, or cannot be created or written.
    """
    if circuit not in CIRCUITS:
        raise ValueError(f"unknown circuit {circuit!r}; known: {', '.join(CIRCUITS)}")
    from ._circuit import porep_like_sizes
    porep_like_sizes(log_n)                 # refuse a bad size before creating anything
    out = os.fspath(out)
    created = not os.path.exists(out)
    os.makedirs(out, exist_ok=True)
    try:
        return _keygen_into(out, log_n, seed, threads, quiet,
                            (not quiet) if progress is None else progress)
    except BaseException:
        if created:
            shutil.rmtree(out, ignore_errors=True)
        raise


def generate_circuit(log_n, seed=DEMO_SEED, threads=None, quiet=True, progress=False, timings=None):
    """A PoRep-like circuit's key and witness made in memory (what :func:`keygen_to_dir` writes).

    Returns
    -------
    (pk, asg, vk, public)
        As :func:`load_circuit`.  ``timings`` (a dict), when given, gets seconds per step:
        ``circuit``, ``keygen``, ``assignment``.
    """
    from ._circuit import porep_like
    from ._keygen import KEYGEN_STEPS, keygen_random
    from ._progress import Progress
    from ._prover import public_inputs
    t = {} if timings is None else timings

    def step(name, fn, *a, **kw):
        s0 = time.perf_counter()
        res = fn(*a, **kw)
        t[name] = time.perf_counter() - s0
        if not quiet:
            print(f"  {name:<10s} {t[name]:8.2f} s", file=sys.stderr)
        return res

    r1cs, inputs, aux = step("circuit", porep_like, log_n, seed)
    with Progress(f"keygen 2^{log_n}", KEYGEN_STEPS, enabled=progress) as bar:
        pk = step("keygen", keygen_random, r1cs, seed, threads, bar, backend="auto")
    asg = step("assignment", r1cs.assignment, inputs, aux)
    return pk, asg, pk.vk, public_inputs(asg)


def _keygen_into(out, log_n, seed, threads, quiet, progress):
    from . import _snarkjs as sj
    from ._params import write_params, write_vk
    t = {}
    pk, asg, vk, public = generate_circuit(log_n, seed, threads, quiet, progress, t)
    s0 = time.perf_counter()
    # each writer is atomic (temp file + rename)
    write_params(os.path.join(out, "circuit.params"), pk)
    write_vk(os.path.join(out, "circuit.vk"), vk)
    asg.save_npz(os.path.join(out, "assignment.npz"))
    sj.write_public_json(os.path.join(out, "public.json"), public)
    t["write"] = time.perf_counter() - s0
    if not quiet:
        print(f"  {'write':<10s} {t['write']:8.2f} s", file=sys.stderr)
    return t


def default_cache_dir():
    """``$CUZK_DEMO_CACHE``, else ``$XDG_CACHE_HOME/cuzk/demo``, else ``~/.cache/cuzk/demo``."""
    d = os.environ.get("CUZK_DEMO_CACHE")
    if d:
        return os.path.abspath(os.path.expanduser(d))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "cuzk", "demo")


def load_circuit(path, threads=None):
    """Load a directory written by :func:`keygen_to_dir`.

    Returns
    -------
    (pk, asg, vk, public)
        ProvingKey, Assignment (validated against pk), VerifyingKey, list of ints.

    Raises
    ------
    cuzk.FormatError, ValueError, OSError
        A file is missing, malformed or does not fit the others.
    """
    from . import _snarkjs as sj
    from ._assignment import Assignment
    from ._params import read_params, read_vk
    pk = read_params(os.path.join(path, "circuit.params"), threads=threads)
    asg = Assignment.load_npz(os.path.join(path, "assignment.npz"))
    asg.validate(pk)
    vk = read_vk(os.path.join(path, "circuit.vk"))
    public = sj.read_public_json(os.path.join(path, "public.json"))
    return pk, asg, vk, public


def entry_name(log_n, seed=DEMO_SEED):
    """The cache entry's name: size, seed, and what the circuit for them depends on (the
    generator's version and NumPy's feature version, see :func:`cuzk.porep_like`)."""
    import numpy as np
    from ._circuit import POREP_LIKE_VERSION
    np_feature = ".".join(np.__version__.split(".")[:2])
    return f"{log_n}-{seed}-g{POREP_LIKE_VERSION}-np{np_feature}"


def ensure_circuit(log_n, seed=DEMO_SEED, cache=None, threads=None, circuit="porep-like",
                   quiet=False):
    """The cache directory of a generated circuit, generating it first when needed.

    The entry ``<cache>/<entry_name(log_n, seed)>`` appears only complete: it is written into a
    temporary directory in ``cache`` and renamed. An entry that exists but lacks a file is replaced.

    Returns
    -------
    (path, generated) : (str, bool)
    """
    if circuit != "porep-like":
        raise ValueError(f"unknown circuit {circuit!r}; known: {', '.join(CIRCUITS)}")
    root = os.path.abspath(os.path.expanduser(os.fspath(cache))) if cache else default_cache_dir()
    entry = os.path.join(root, entry_name(log_n, seed))
    if os.path.isdir(entry) and all(os.path.isfile(os.path.join(entry, f)) for f in _FILES):
        return entry, False
    os.makedirs(root, exist_ok=True)
    if not quiet:
        print(f"generating a PoRep-like circuit 2^{log_n} (seed {seed}) into {entry}",
              file=sys.stderr)
    tmp = tempfile.mkdtemp(prefix=f".tmp-{log_n}-{seed}-", dir=root)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)          # mkdtemp makes it 0700; the entry is not a secret
    try:
        keygen_to_dir(tmp, circuit, log_n, seed, threads=threads, quiet=quiet)
        if os.path.isdir(entry):            # stale or incomplete: move it aside, then drop it
            old = tempfile.mkdtemp(prefix=f".old-{log_n}-{seed}-", dir=root)
            os.rename(entry, os.path.join(old, "entry"))
            shutil.rmtree(old, ignore_errors=True)
        try:
            os.rename(tmp, entry)
        except OSError:
            # another process renamed a complete entry into place first: use that one
            if not os.path.isdir(entry):
                raise
    finally:
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
    return entry, True


def _load_or_regenerate(log_n, seed, cache, threads, quiet):
    """(path, (pk, asg, vk, public)) from the cache; ``cache="memory"``: generated in memory and
    never written (path None), for sizes whose .params would not fit the disk (2^27: 44 GiB)."""
    from ._errors import FormatError
    if cache == "memory":
        return None, generate_circuit(log_n, seed, threads, quiet)
    path, generated = ensure_circuit(log_n, seed, cache, threads, quiet=quiet)
    try:
        return path, load_circuit(path, threads)
    except (FormatError, ValueError, OSError) as e:
        if generated:
            raise
        if not quiet:
            print(f"cached circuit {path} is unusable ({e}); regenerating", file=sys.stderr)
        shutil.rmtree(path, ignore_errors=True)
        path, _ = ensure_circuit(log_n, seed, cache, threads, quiet=quiet)
        return path, load_circuit(path, threads)


def _stage_keys(rows):
    keys = []
    for k in _STAGE_ORDER:
        if any(k in r for r in rows):
            keys.append(k)
    for r in rows:
        for k in r:
            if k not in keys and isinstance(r[k], (int, float)):
                keys.append(k)
    # total last
    if "total" in keys:
        keys.remove("total")
        keys.append("total")
    return keys


def format_table(rows, label="log_n"):
    """Text table: one row per ``{label: ..., stage: seconds, ...}`` dict, stages as columns."""
    keys = _stage_keys([{k: v for k, v in r.items() if k != label} for r in rows])
    head = f"{label:>6s} " + " ".join(f"{k:>10s}" for k in keys)
    lines = [head, "-" * len(head)]
    for r in rows:
        cells = []
        for k in keys:
            v = r.get(k)
            cells.append(f"{v:10.4f}" if isinstance(v, (int, float)) else f"{'-':>10s}")
        lines.append(f"{r[label]!s:>6s} " + " ".join(cells))
    return "\n".join(lines)


def run_demo(log_n=14, backend="auto", threads=None, cache=None, seed=DEMO_SEED):
    """``cuzk demo``: keygen (cached), prove, verify a PoRep-like circuit; print timings.

    Returns
    -------
    int
        0 when the proof verifies, 1 otherwise.
    """
    from ._prover import prove, stages_for
    from ._verifier import verify
    path, (pk, asg, vk, public) = _load_or_regenerate(log_n, seed, cache, threads, False)
    st = stages_for(backend, threads)
    t = {}
    proof = prove(pk, asg, backend=backend, threads=threads, timings=t, stages=st)
    s0 = time.perf_counter()
    ok = verify(vk, proof, public)
    t_verify = time.perf_counter() - s0
    n_cons = int(asg.a.shape[0])
    print(f"cuzk demo: PoRep-like circuit 2^{log_n} ({n_cons} constraints, "
          f"{asg.inputs.shape[0]} inputs, {asg.aux.shape[0]} aux) from {path}")
    from ._cli import _ran_on
    print(_ran_on(t, backend) + f"; threads: {threads or os.cpu_count()}")
    print("stage timings (s):")
    for k in _stage_keys([t]):
        if isinstance(t.get(k), (int, float)):
            print(f"  {k:<10s} {t[k]:9.4f}")
    print(f"proof: {len(proof)} bytes, {proof[:8].hex()}...")
    print(f"verify: {'OK' if ok else 'FAILED'} ({t_verify:.3f} s)")
    return 0 if ok else 1


def bench_sizes(log_ns, backend="auto", threads=None, repeat=3, cache=None, seed=DEMO_SEED,
                quiet=False):
    """Median per-stage prove timings for each size (keygen cached; one verified warm-up).

    Returns
    -------
    list of dict
        ``{"log_n", "constraints", "backend", "repeat", "median": {stage: s}, "runs": [...]}``.

    Raises
    ------
    cuzk.ProofVerificationError
        The warm-up proof does not verify.
    """
    from ._errors import ProofVerificationError
    from ._prover import prove, stages_for
    from ._verifier import verify
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    st = stages_for(backend, threads)
    results = []
    for lg in log_ns:
        _, (pk, asg, vk, public) = _load_or_regenerate(lg, seed, cache, threads, quiet)
        proof = prove(pk, asg, backend=backend, threads=threads, stages=st)
        if not verify(vk, proof, public):
            raise ProofVerificationError(f"bench: the 2^{lg} warm-up proof does not verify")
        runs = []
        for _ in range(repeat):
            t = {}
            prove(pk, asg, backend=backend, threads=threads, timings=t, stages=st)
            runs.append({k: v for k, v in t.items() if isinstance(v, (int, float))})
        keys = _stage_keys(runs)
        med = {k: statistics.median(r.get(k, 0.0) for r in runs) for k in keys}
        results.append({"log_n": lg, "constraints": int(asg.a.shape[0]), "backend": st.name,
                        "repeat": repeat, "median": med, "runs": runs})
        if not quiet:
            print(f"  2^{lg}: total {med.get('total', 0.0):.3f} s (median of {repeat})",
                  file=sys.stderr)
    return results


def run_bench(args):
    """``cuzk bench``: median per-stage timings over ``args.log_n`` sizes; optional JSON."""
    cache = getattr(args, "cache_dir", None)
    res = bench_sizes(args.log_n, backend=args.backend, threads=args.threads,
                      repeat=args.repeat, cache=cache)
    backend = res[0]["backend"] if res else args.backend
    print(f"cuzk bench: PoRep-like circuits, backend {backend}, threads "
          f"{args.threads or os.cpu_count()}, median of {args.repeat} proves (seconds)")
    print(format_table([{"log_n": r["log_n"], **r["median"]} for r in res]))
    if args.json:
        doc = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": platform.node(),
               "cpu": platform.processor() or platform.machine(), "cpu_count": os.cpu_count(),
               "backend": backend, "threads": args.threads, "repeat": args.repeat,
               "results": res}
        from ._io import atomic_write
        atomic_write(args.json, json.dumps(doc, indent=1) + "\n")
    return 0
