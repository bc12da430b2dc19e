"""The ``cuzk`` command line (snarkjs-like); all of cuzk's CLI glue lives here.

Exit codes:

==  ==========================================================================================
0   success; for ``verify``: the proof is valid
1   invalid proof: ``verify`` rejects it, or ``prove``'s self-verification failed (nothing
    written; the message says whether the assignment or the backend is at fault)
2   bad input or usage: a missing, malformed or mismatched file, an unusable output path
    (one line on stderr naming the file, no traceback; nothing written)
3   device or compiler error: CUDA driver (``CudaError``), NVRTC (``NvrtcError``), or a
    requested backend that cannot run here (``BackendUnavailable``)
130 interrupted (Ctrl-C)
==  ==========================================================================================

``CUZK_DEBUG=1`` re-raises the error with its traceback instead of the one-line message.
Output paths are checked before any work starts; every output is written atomically
(:func:`cuzk._io.atomic_write`), so a failed run leaves no file, complete or partial.
"""
from __future__ import annotations

import argparse
import errno
import os
import sys
import tempfile
import time

__all__ = ["main", "EXIT_OK", "EXIT_INVALID", "EXIT_INPUT", "EXIT_DEVICE"]

EXIT_OK, EXIT_INVALID, EXIT_INPUT, EXIT_DEVICE = 0, 1, 2, 3

_EPILOG = """\
exit codes: 0 success / valid proof, 1 invalid proof (verify, or prove's self-check),
2 bad input or usage, 3 device or compiler error (CUDA driver, NVRTC, backend unavailable),
130 interrupted.

environment:
  CUZK_DEBUG=1             show the full traceback instead of the one-line error
  CUZK_CACHE_DIR           kernel cache directory (see `cuzk info`)
  CUZK_DEMO_CACHE          where `cuzk demo` / `cuzk bench` cache generated circuits
  CUZK_PROGRESS_INTERVAL   seconds between progress lines when stderr is not a terminal
"""


class _Formatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Defaults shown (but not the uninformative None / False of optional flags); epilog kept."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


# ----------------------------------------------------------------------------- paths

def _need_file(path):
    """An input file that must exist: ``FILE: no such file`` (exit 2) before any work."""
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, "is a directory, expected a file", path)
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, "no such file", path)


def _probe_writable_dir(d, path):
    """Create and remove a temp file in ``d``: the only test that also holds for root and for
    read-only mounts."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".cuzk-probe-", dir=d)
    except OSError as e:
        raise PermissionError(e.errno or errno.EACCES,
                              f"cannot write in directory {d} ({e.strerror})", path) from None
    os.close(fd)
    os.unlink(tmp)


def _check_out_file(path):
    """An output file: its directory exists and is writable, and it is not a directory."""
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, "is a directory, expected a file path", path)
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise FileNotFoundError(errno.ENOENT, f"no such directory {d}", path)
    _probe_writable_dir(d, path)


def _check_out_dir(path):
    """An output directory (created when missing): not a file; it or its nearest existing
    ancestor is writable."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise NotADirectoryError(errno.ENOTDIR, "exists and is not a directory", path)
    d = os.path.abspath(path)
    while not os.path.isdir(d):
        parent = os.path.dirname(d)
        if os.path.exists(d) or parent == d:
            raise NotADirectoryError(errno.ENOTDIR, f"{d} is not a directory", path)
        d = parent
    _probe_writable_dir(d, path)


# ----------------------------------------------------------------------------- reporting

def _ran_on(t, requested):
    """'backend: cpu; auto chose the CPU: <why>' / 'backend: cuda, device: <label>'."""
    name = t.get("backend")
    if name is None:                      # an older prover: say what resolve_backend picks
        from ._backend import resolve_backend
        name = resolve_backend(requested)
    s = f"backend: {name}"
    dev = t.get("device")
    if dev not in (None, "", name):      # the CPU backend labels its device "cpu"
        s += f", device: {dev}"
    if requested == "auto" and name == "cpu":
        from ._backend import cuda_available
        ok, reason = cuda_available()
        if not ok:
            s += f"; auto chose the CPU: {reason}"
    return s


def _progress(label, total):
    from ._progress import Progress
    return Progress(label, total)


# ----------------------------------------------------------------------------- commands

def _cmd_info(args):
    from . import __version__
    from ._backend import cuda_available
    from ._kernels import cache_dir
    print(f"cuzk {__version__}")
    print("backends: cpu (always)", end="")
    ok, reason = cuda_available()
    print(f", cuda ({'usable' if ok else 'unusable'}: {reason})")
    if ok:
        from ._native import _driver
        for i in range(_driver.device_count()):
            d = _driver.Device.get(i)
            print(f"  device {i}: {d.name} {d.arch} {d.sm_count} SMs {d.total_mem / 2**30:.1f} GiB")
    try:
        from ._native import _nvrtc
        print("nvrtc: %d.%d" % _nvrtc.version())
    except Exception as e:  # NVRTC missing: say so, info must not fail
        print(f"nvrtc: unavailable ({type(e).__name__}: {e})")
    print(f"kernel cache: {cache_dir()}")
    print(f"cpu threads: {os.cpu_count()}")
    return EXIT_OK


def _cmd_kernels(args):
    from ._kernels import compile_all
    if not args.compile:
        from ._kernels import programs
        for name in programs():
            print(name)
        return EXIT_OK
    t0 = time.perf_counter()
    rows = compile_all(args.arch, target="ptx" if args.ptx else "cubin")
    for name, nbytes, secs, cached in rows:
        print(f"{name:24s} {nbytes:10d} bytes {secs:7.2f} s {'cached' if cached else 'compiled'}")
    print(f"{len(rows)} programs for {args.arch} in {time.perf_counter() - t0:.2f} s")
    return EXIT_OK


def _cmd_keygen(args):
    from ._circuit import porep_like_sizes
    from ._demo import keygen_to_dir
    porep_like_sizes(args.log_n)            # a bad size fails before --out is created
    _check_out_dir(args.out)
    keygen_to_dir(args.out, args.circuit, args.log_n, args.seed, threads=args.threads,
                  progress=True)
    print(f"wrote {args.out}/circuit.params, circuit.vk, assignment.npz, public.json")
    return EXIT_OK


def _cmd_prove(args):
    """``cuzk prove``: the bellperson form (--params/--assignment/--out) or the snarkjs form."""
    if args.zkey or args.wtns:
        return _prove_snarkjs(args)
    if not (args.params and args.assignment and args.out):
        raise ValueError("cuzk prove needs --params, --assignment and --out "
                         "(or --zkey, --wtns, --proof and --public)")
    if args.proof or args.public:
        raise ValueError("--proof/--public belong to the snarkjs form (--zkey/--wtns); "
                         "the bellperson form writes --out")
    for p in (args.params, *args.assignment):
        _need_file(p)
    _check_out_file(args.out)
    from ._assignment import Assignment
    from ._params import read_params
    from ._prover import prove_partitions

    with _progress(f"load {os.path.basename(args.params)}", 1) as bar:
        pk = read_params(args.params, threads=args.threads)
        bar.update()
    n = len(args.assignment)
    t = {}
    t0 = time.perf_counter()
    with _progress(f"prove {n} partition{'s' if n > 1 else ''}", n) as bar:
        def partitions():                # one assignment in memory at a time, ticking per
            for i, path in enumerate(args.assignment):      # partition as the prover pulls
                if i:
                    bar.update()
                yield Assignment.load_npz(path)
            bar.update()
        proof = prove_partitions(pk, partitions(), backend=args.backend, device=args.device,
                                 threads=args.threads, verify=args.verify, timings=t)
        bar.update(n)
    wall = time.perf_counter() - t0
    from ._io import atomic_write
    atomic_write(args.out, proof)
    print(f"proof: {args.out} ({len(proof)} bytes, {n} partition{'s' if n > 1 else ''}) "
          f"in {wall:.3f} s")
    print(_ran_on(t, args.backend))
    print("verified: OK" if args.verify else "not verified (--no-verify)")
    return EXIT_OK


def _prove_snarkjs(args):
    """``cuzk prove --zkey Z --wtns W --proof proof.json --public public.json``."""
    from . import _snarkjs as sj
    from ._errors import ProofVerificationError
    from ._snarkjs_prover import _verify_zkey, prove_zkey
    missing = [o for o, v in (("--zkey", args.zkey), ("--wtns", args.wtns),
                              ("--proof", args.proof), ("--public", args.public)) if not v]
    if missing:
        raise ValueError(f"cuzk prove (snarkjs form) needs {', '.join(missing)}")
    if args.params or args.assignment or args.out:
        raise ValueError("--params/--assignment/--out belong to the bellperson form; "
                         "the snarkjs form writes --proof and --public")
    _need_file(args.zkey)
    _need_file(args.wtns)
    _check_out_file(args.proof)
    _check_out_file(args.public)
    with _progress(f"load {os.path.basename(args.zkey)}", 1) as bar:
        zkey = sj.read_zkey(args.zkey)
        w = sj.read_wtns(args.wtns)
        bar.update()
    t = {}
    with _progress("prove", 1) as bar:
        proof, public = prove_zkey(zkey, w, threads=args.threads, backend=args.backend,
                                   timings=t)
        bar.update()
    if args.verify and not _verify_zkey(zkey, proof, public):
        raise ProofVerificationError(
            f"the {t.get('backend', args.backend)} backend's proof does not verify against the "
            "zkey's verification key; nothing written")
    sj.write_proof_json(args.proof, *proof)
    sj.write_public_json(args.public, public)
    print(f"proof: {args.proof}, public: {args.public} ({len(public)} signals) "
          f"in {t['total']:.3f} s")
    print(_ran_on(t, args.backend))
    print("verified: OK" if args.verify else "not verified (--no-verify)")
    return EXIT_OK


def _is_json(path) -> bool:
    """Whether the file's first non-blank byte is ``{`` (a snarkjs JSON file)."""
    with open(path, "rb") as f:
        head = f.read(64).lstrip()
    return head[:1] == b"{"


def _snarkjs_vk(path):
    """snarkjs ``verification_key.json`` → VerifyingKey (β·G1 and δ·G1, which verification does
    not use and the file does not hold, are left as the point at infinity)."""
    import numpy as np
    from . import _snarkjs as sj
    from ._params import VerifyingKey
    d = sj.read_verification_key_json(path)
    z = np.zeros(12, np.uint64)
    return VerifyingKey(alpha_g1=sj.g1_to_mont(d["vk_alpha_1"]), beta_g1=z,
                        beta_g2=sj.g2_to_mont(d["vk_beta_2"]),
                        gamma_g2=sj.g2_to_mont(d["vk_gamma_2"]), delta_g1=z,
                        delta_g2=sj.g2_to_mont(d["vk_delta_2"]),
                        ic=np.stack([sj.g1_to_mont(p) for p in d["IC"]]))


def _read_proofs(path, n_expected):
    """A bellperson proof file of ``n_expected`` concatenated 192-byte proofs → [(A, B, C)]."""
    from ._errors import FormatError
    from ._params import PROOF_BYTES, decode_proofs
    size = os.path.getsize(path)
    if size == 0 or size % PROOF_BYTES:
        raise FormatError(path, size - size % PROOF_BYTES,
                          f"{PROOF_BYTES} bytes per partition, got {size} bytes")
    if size // PROOF_BYTES != n_expected:
        raise FormatError(path, None,
                          f"one proof per --public file ({n_expected} × {PROOF_BYTES} = "
                          f"{n_expected * PROOF_BYTES} bytes), got {size} bytes = "
                          f"{size // PROOF_BYTES} proofs")
    with open(path, "rb") as f:
        return decode_proofs(f.read(), path)


def verify_cli(args) -> int:
    """``cuzk verify --vk VK --proof PROOF --public P1.json [P2.json ...]``.

    Two forms, told apart by the key file: a snarkjs ``verification_key.json`` (then PROOF is
    snarkjs ``proof.json`` and one public file is given) or a bellperson ``.vk`` (then PROOF is
    ``proof.bin``: 192 bytes per partition, one ``public.json`` per partition in order).
    Returns 0 when every proof is valid, 1 when one is not (and prints which).  Unreadable or
    malformed files raise FormatError / ValueError / OSError naming the file.
    """
    from . import _snarkjs as sj
    from ._errors import FormatError
    from ._params import read_vk
    from ._verifier import verify, verify_batch
    pubs = [args.public] if isinstance(args.public, (str, os.PathLike)) else list(args.public)
    for p in (args.vk, args.proof, *pubs):
        _need_file(p)
    if _is_json(args.vk):
        if len(pubs) != 1:
            raise ValueError(f"a snarkjs proof takes one --public file, got {len(pubs)}")
        vk = _snarkjs_vk(args.vk)
        A, B, C = sj.read_proof_json(args.proof)
        proofs = [(sj.g1_to_mont(A), sj.g2_to_mont(B), sj.g1_to_mont(C))]
    else:
        vk = read_vk(args.vk)
        proofs = _read_proofs(args.proof, len(pubs))
    publics = []
    for p in pubs:
        xs = sj.read_public_json(p)
        if len(xs) != vk.n_inputs - 1:
            raise FormatError(p, None, f"{vk.n_inputs - 1} public inputs for this "
                                       f"verifying key, found {len(xs)}")
        publics.append(xs)
    try:
        if len(proofs) == 1:
            bad = [] if verify(vk, proofs[0], publics[0]) else [0]
        elif verify_batch(vk, proofs, publics):
            bad = []
        else:                            # name the partitions that fail
            bad = [i for i, (pr, xs) in enumerate(zip(proofs, publics)) if not verify(vk, pr, xs)]
            bad = bad or list(range(len(proofs)))
    except ValueError as e:  # a proof point off the curve or outside the subgroup
        raise FormatError(args.proof, None, f"valid proof points ({e})") from None
    n = len(proofs)
    if not bad:
        print("OK: proof is valid" if n == 1 else f"OK: all {n} partition proofs are valid")
        return EXIT_OK
    if n == 1:
        print("INVALID: proof does not verify")
    else:
        print(f"INVALID: partition{'s' if len(bad) > 1 else ''} "
              f"{', '.join(str(i) for i in bad)} of {n} (from 0) do not verify")
    return EXIT_INVALID


_cmd_verify = verify_cli


def _cmd_demo(args):
    from ._demo import run_demo
    return run_demo(log_n=args.log_n, backend=args.backend, threads=args.threads,
                    cache=args.cache_dir)


def _cmd_bench(args):
    from ._demo import run_bench
    from ._engine._bench import run_engine_bench, wants_engine_bench
    if args.json:
        _check_out_file(args.json)
    if wants_engine_bench(args):
        return run_engine_bench(args)
    return run_bench(args)


# ----------------------------------------------------------------------------- parser

_BACKEND_HELP = "where to prove: cuda, cpu, or auto (cuda when a device is usable)"
_THREADS_HELP = "CPU threads for the CPU stages (all cores when not given)"


def _parser():
    from . import __version__
    p = argparse.ArgumentParser(prog="cuzk", description="Groth16 over BLS12-381 on GPU and CPU",
                                epilog=_EPILOG, formatter_class=_Formatter)
    p.add_argument("--version", action="version", version=f"cuzk {__version__}",
                   help="print the version and exit")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    def cmd(name, help_, fn):
        s = sub.add_parser(name, help=help_, description=help_, epilog=_EPILOG,
                           formatter_class=_Formatter)
        s.set_defaults(fn=fn)
        return s

    cmd("info", "version, backends, devices, kernel cache", _cmd_info)

    s = cmd("kernels", "list or compile the CUDA kernels (no GPU needed)", _cmd_kernels)
    s.add_argument("--compile", action="store_true", help="compile every program through NVRTC")
    s.add_argument("--arch", default="sm_90", help="target architecture")
    s.add_argument("--ptx", action="store_true", help="emit PTX instead of CUBIN")

    s = cmd("keygen", "generate a test circuit's parameters, assignment and public inputs",
            _cmd_keygen)
    s.add_argument("--circuit", default="porep-like", choices=["porep-like"],
                   help="circuit family (PoRep-shaped synthetic circuit)")
    s.add_argument("--log-n", type=int, required=True,
                   help="log2 of the FFT domain size (4..31); the constraints fill ~97%% of it")
    s.add_argument("--seed", type=int, default=0,
                   help="seed of the circuit, witness and toxic waste (deterministic)")
    s.add_argument("--out", required=True,
                   help="output directory (created when missing): circuit.params, circuit.vk, "
                        "assignment.npz, public.json")
    s.add_argument("--threads", type=int, default=None, help=_THREADS_HELP)

    s = cmd("prove", "prove: bellperson --params + --assignment (one per partition) → --out, "
                     "or snarkjs --zkey + --wtns → --proof + --public", _cmd_prove)
    g = s.add_argument_group("bellperson form")
    g.add_argument("--params", help="bellperson .params file (the proving key)")
    g.add_argument("--assignment", nargs="+", metavar="NPZ",
                   help="assignment .npz per partition, in partition order")
    g.add_argument("--out", help="proof.bin to write (192 bytes per partition, concatenated)")
    g = s.add_argument_group("snarkjs form")
    g.add_argument("--zkey", help="snarkjs .zkey (Groth16, curve bls12381)")
    g.add_argument("--wtns", help="snarkjs .wtns witness")
    g.add_argument("--proof", help="proof.json to write")
    g.add_argument("--public", help="public.json to write")
    s.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"], help=_BACKEND_HELP)
    s.add_argument("--device", type=int, default=None, metavar="N",
                   help="CUDA device ordinal (bellperson form; default: device 0)")
    s.add_argument("--threads", type=int, default=None, help=_THREADS_HELP)
    s.add_argument("--verify", action=argparse.BooleanOptionalAction, default=True,
                   help="verify each proof before writing it (milliseconds); --no-verify skips")

    s = cmd("verify", "verify a proof; exit 0 valid, 1 invalid", _cmd_verify)
    s.add_argument("--vk", required=True,
                   help="snarkjs verification_key.json, or bellperson .vk")
    s.add_argument("--proof", required=True,
                   help="snarkjs proof.json, or bellperson proof.bin (192 bytes per partition)")
    s.add_argument("--public", required=True, nargs="+", metavar="JSON",
                   help="public.json (decimal strings, without the leading 1); for a "
                        "multi-partition proof.bin one per partition, in partition order")

    s = cmd("demo", "keygen (cached), prove, verify and time a small circuit", _cmd_demo)
    s.add_argument("--log-n", type=int, default=14, help="log2 of the FFT domain size")
    s.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"], help=_BACKEND_HELP)
    s.add_argument("--threads", type=int, default=None, help=_THREADS_HELP)
    s.add_argument("--cache-dir", default=None,
                   help="where generated circuits are cached ($CUZK_DEMO_CACHE, else "
                        "~/.cache/cuzk/demo)")

    s = cmd("bench", "end-to-end per-stage timings over sizes", _cmd_bench)
    s.add_argument("--log-n", type=int, nargs="+", default=[14, 16],
                   help="log2 of the FFT domain sizes to time")
    s.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"], help=_BACKEND_HELP)
    s.add_argument("--threads", type=int, default=None, help=_THREADS_HELP)
    s.add_argument("--repeat", type=int, default=3, help="timed proves per size (median shown)")
    s.add_argument("--json", default=None, help="also write the results as JSON here")
    s.add_argument("--cache-dir", default=None,
                   help="where generated circuits are cached ($CUZK_DEMO_CACHE, else "
                        "~/.cache/cuzk/demo); 'memory': generate in memory and write nothing "
                        "(sizes whose .params would not fit the disk: 2^27 is 44 GiB)")
    e = s.add_argument_group("engine bench (any of these runs cuzk.Engine over every lock mode)")
    e.add_argument("--circuit", default=None, choices=["porep-like"], help="circuit family")
    e.add_argument("--partitions", type=int, default=None,
                   help="partitions per configuration (default 10)")
    e.add_argument("--workers-per-gpu", default=None, metavar="W[,W...]",
                   help="worker threads per device, e.g. 2 or 1,2,4 (default 2)")
    e.add_argument("--lock-mode", default=None, metavar="MODE[,MODE...]",
                   help="coarse,narrow,two-lock (the default: all three), overlap (opt-in: two-lock "
                        "with the compute lock released once a region is enqueued), or none "
                        "(only --single)")
    e.add_argument("--devices", default=None, metavar="N[,N...]",
                   help="devices to use, e.g. 2 or 1,2 (each count benched in turn on the same "
                        "inputs: multi-GPU scaling; CPU backend: simulated devices; default all / 1)")
    e.add_argument("--thread-share", default=None, metavar="SHARE[,SHARE...]",
                   help="how the workers share the CPU threads: split (threads / workers each), "
                        "shared (all threads each) and/or adaptive (all threads for a host stage "
                        "alone, else split; one prepare/upload at a time while the GPU idles), "
                        "e.g. split,adaptive (default split)")
    e.add_argument("--stage-options", default=None, metavar="K=V[,K=V...][;K=V...]",
                   help="CUDA stage options of every worker: precompute=K|auto (copies of the H "
                        "bases; default auto: measured best per size), h_window=C (the H MSM's "
                        "window), b_g2=gpu|cpu, streams=1|2 (default 2: batch additions and "
                        "tails beside H on a second stream); several sets separated by ';' are "
                        "benched in turn on the same inputs")
    e.add_argument("--vram-budget", default=None, metavar="GIB[,GIB...]",
                   help="the engine's device budget in GiB (default: the card's, less a margin); a "
                        "key that does not fit beside one partition is streamed from host memory "
                        "per partition; several, comma-separated, are benched in turn on the same "
                        "inputs")
    e.add_argument("--single", type=int, default=None, metavar="N",
                   help="also time N partitions through cuzk.prove's path (Stages.prove_one, one "
                        "worker, no engine), CUDA: its one-call key with and without the early H "
                        "overlap, then cuzk.Prover's lasting key (its H copies)")
    e.add_argument("--priority-mix", action="store_true",
                   help="jobs of mixed priorities (normal 10, critical 1, high 4, low 2)")
    e.add_argument("--trace", default=None, metavar="DIR",
                   help="write a Chrome trace (.json) and a Gantt chart (.png) per configuration")
    return p


# ----------------------------------------------------------------------------- errors

def _message(e) -> str:
    """One line: ``FILE: what`` for OS errors (one style for every file argument)."""
    if isinstance(e, OSError) and e.filename is not None:
        what = e.strerror or str(e)
        if e.errno is not None and what == os.strerror(e.errno):   # the system's wording
            what = {errno.ENOENT: "no such file", errno.EISDIR: "is a directory",
                    errno.ENOTDIR: "not a directory", errno.EACCES: "permission denied",
                    errno.ENOSPC: "no space left on device"}.get(e.errno, what.lower())
        return f"{e.filename}: {what}"
    return str(e)


def _exit_code(e) -> int:
    from ._errors import BackendUnavailable, CudaError, NvrtcError, ProofVerificationError
    if isinstance(e, ProofVerificationError):
        return EXIT_INVALID
    if isinstance(e, (CudaError, NvrtcError, BackendUnavailable)):
        return EXIT_DEVICE
    return EXIT_INPUT


def _quiet_stdout():
    """After EPIPE (``cuzk info | head -1``): point stdout at /dev/null so the interpreter's
    final flush cannot fail again and print 'Broken pipe'."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def main(argv=None):
    """Entry point of the ``cuzk`` console script; returns the exit code (module docstring)."""
    from ._errors import CuzkError
    args = _parser().parse_args(argv)
    try:
        rc = args.fn(args)
        sys.stdout.flush()
        return rc
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_OK
    except (CuzkError, ValueError, OSError) as e:
        if os.environ.get("CUZK_DEBUG") == "1":
            raise
        try:
            print(f"cuzk: error: {_message(e)}", file=sys.stderr)
        except OSError:
            pass
        return _exit_code(e)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
