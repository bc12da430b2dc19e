"""The ``cuzk`` command line (snarkjs-like).

Exit codes: 0 success (and "valid" for verify), 1 "invalid proof", 2 bad input or usage
(one line on stderr, no traceback; ``CUZK_DEBUG=1`` shows the traceback).
"""
import argparse
import json
import os
import sys
import time

__all__ = ["main"]


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
    return 0


def _cmd_kernels(args):
    from ._kernels import compile_all
    if not args.compile:
        from ._kernels import KERNELS, load_program_modules
        load_program_modules()
        for name in sorted(KERNELS):
            print(name)
        return 0
    t0 = time.perf_counter()
    rows = compile_all(args.arch, target="ptx" if args.ptx else "cubin")
    for name, nbytes, secs, cached in rows:
        print(f"{name:24s} {nbytes:10d} bytes {secs:7.2f} s {'cached' if cached else 'compiled'}")
    print(f"{len(rows)} programs for {args.arch} in {time.perf_counter() - t0:.2f} s")
    return 0


def _cmd_keygen(args):
    from ._demo import keygen_to_dir
    keygen_to_dir(args.out, args.circuit, args.log_n, args.seed, threads=args.threads)
    print(f"wrote {args.out}/circuit.params, circuit.vk, assignment.npz, public.json")
    return 0


def _cmd_prove(args):
    """``cuzk prove``: the bellperson form (--params/--assignment/--out) or the snarkjs form."""
    if args.zkey or args.wtns:
        return _prove_snarkjs(args)
    if not (args.params and args.assignment and args.out):
        raise ValueError("cuzk prove needs --params, --assignment and --out "
                         "(or --zkey, --wtns, --proof and --public)")
    from ._assignment import Assignment
    from ._params import read_params
    from ._prover import prove
    pk = read_params(args.params, threads=args.threads)
    asg = Assignment.load_npz(args.assignment)
    t = {}
    proof = prove(pk, asg, backend=args.backend, threads=args.threads, verify=args.verify,
                  timings=t)
    tmp = args.out + ".tmp"
    with open(tmp, "wb") as fh:
        fh.write(proof)
    os.replace(tmp, args.out)
    print(f"proof: {args.out} ({len(proof)} bytes) in {t['total']:.3f} s")
    return 0


def _prove_snarkjs(args):
    """``cuzk prove --zkey Z --wtns W --proof proof.json --public public.json``."""
    from . import _snarkjs as sj
    from ._errors import ProofVerificationError
    from ._snarkjs_prover import _verify_zkey, prove_zkey
    missing = [o for o, v in (("--zkey", args.zkey), ("--wtns", args.wtns),
                              ("--proof", args.proof), ("--public", args.public)) if not v]
    if missing:
        raise ValueError(f"cuzk prove (snarkjs form) needs {', '.join(missing)}")
    zkey = sj.read_zkey(args.zkey)
    w = sj.read_wtns(args.wtns)
    t = {}
    proof, public = prove_zkey(zkey, w, threads=args.threads, backend=args.backend, timings=t)
    if args.verify and not _verify_zkey(zkey, proof, public):
        raise ProofVerificationError("the computed proof does not verify against the zkey's "
                                     "verification key; nothing written")
    _write_atomic(args.proof, sj.write_proof_json, *proof)
    _write_atomic(args.public, sj.write_public_json, public)
    print(f"proof: {args.proof}, public: {args.public} ({len(public)} signals) "
          f"in {t['total']:.3f} s on {t['backend']}")
    return 0


def _write_atomic(path, writer, *args):
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        writer(tmp, *args)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


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


def verify_cli(args) -> int:
    """``cuzk verify --vk VK --proof PROOF --public public.json`` (0 valid, 1 invalid)."""
    from . import _snarkjs as sj
    from ._errors import FormatError
    from ._params import PROOF_BYTES, decode_proof, read_vk
    from ._verifier import verify
    public = sj.read_public_json(args.public)
    if _is_json(args.vk):
        vk = _snarkjs_vk(args.vk)
        A, B, C = sj.read_proof_json(args.proof)
        proof = (sj.g1_to_mont(A), sj.g2_to_mont(B), sj.g1_to_mont(C))
    else:
        vk = read_vk(args.vk)
        with open(args.proof, "rb") as f:
            data = f.read(PROOF_BYTES + 1)
        proof = decode_proof(data, path=args.proof)
    if len(public) != vk.n_inputs - 1:
        raise FormatError(args.public, None, f"{vk.n_inputs - 1} public inputs for this "
                                             f"verifying key, found {len(public)}")
    try:
        ok = verify(vk, proof, public)
    except ValueError as e:  # a proof point off the curve or outside the subgroup
        raise FormatError(args.proof, None, f"valid proof points ({e})") from None
    print("OK: proof is valid" if ok else "INVALID: proof does not verify")
    return 0 if ok else 1


_cmd_verify = verify_cli


def _cmd_demo(args):
    from ._demo import run_demo
    return run_demo(log_n=args.log_n, backend=args.backend, threads=args.threads,
                    cache=args.cache_dir)


def _cmd_bench(args):
    from ._demo import run_bench
    return run_bench(args)


def _parser():
    p = argparse.ArgumentParser(prog="cuzk", description="Groth16 over BLS12-381 on GPU and CPU")
    sub = p.add_subparsers(dest="cmd", required=True)

    s = sub.add_parser("info", help="version, backends, devices, kernel cache")
    s.set_defaults(fn=_cmd_info)

    s = sub.add_parser("kernels", help="list or compile the CUDA kernels (no GPU needed)")
    s.add_argument("--compile", action="store_true", help="compile every program through NVRTC")
    s.add_argument("--arch", default="sm_90", help="target architecture (default sm_90)")
    s.add_argument("--ptx", action="store_true", help="emit PTX instead of CUBIN")
    s.set_defaults(fn=_cmd_kernels)

    s = sub.add_parser("keygen", help="generate a test circuit's parameters and assignment")
    s.add_argument("--circuit", default="porep-like", choices=["porep-like"])
    s.add_argument("--log-n", type=int, required=True, help="log2 of the constraint count")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", required=True, help="output directory")
    s.add_argument("--threads", type=int, default=None)
    s.set_defaults(fn=_cmd_keygen)

    s = sub.add_parser("prove", help="prove (snarkjs zkey+wtns, or bellperson params+assignment)")
    s.add_argument("--zkey"), s.add_argument("--wtns")
    s.add_argument("--proof", help="proof.json to write (snarkjs path)")
    s.add_argument("--public", help="public.json to write (snarkjs path)")
    s.add_argument("--params"), s.add_argument("--assignment")
    s.add_argument("--out", help="proof.bin to write (bellperson path, 192 bytes per partition)")
    s.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"])
    s.add_argument("--threads", type=int, default=None)
    s.add_argument("--verify", action="store_true", help="self-verify before writing")
    s.set_defaults(fn=_cmd_prove)

    s = sub.add_parser("verify", help="verify a proof; exit 0 valid, 1 invalid")
    s.add_argument("--vk", required=True, help="verification_key.json or a bellperson .vk")
    s.add_argument("--proof", required=True, help="proof.json or proof.bin")
    s.add_argument("--public", required=True, help="public.json (decimal strings)")
    s.set_defaults(fn=_cmd_verify)

    s = sub.add_parser("demo", help="keygen (cached), prove, verify and time a small circuit")
    s.add_argument("--log-n", type=int, default=14)
    s.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"])
    s.add_argument("--threads", type=int, default=None)
    s.add_argument("--cache-dir", default=None, help="where generated circuits are cached")
    s.set_defaults(fn=_cmd_demo)

    s = sub.add_parser("bench", help="end-to-end per-stage timings over sizes")
    s.add_argument("--log-n", type=int, nargs="+", default=[14, 16])
    s.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"])
    s.add_argument("--threads", type=int, default=None)
    s.add_argument("--repeat", type=int, default=3)
    s.add_argument("--json", default=None, help="also write the results as JSON here")
    s.add_argument("--cache-dir", default=None, help="where generated circuits are cached")
    s.set_defaults(fn=_cmd_bench)
    return p


def main(argv=None):
    """Entry point of the ``cuzk`` console script; returns the exit code."""
    from ._errors import CuzkError
    args = _parser().parse_args(argv)
    try:
        return args.fn(args)
    except (CuzkError, ValueError, OSError, json.JSONDecodeError) as e:
        if os.environ.get("CUZK_DEBUG") == "1":
            raise
        print(f"cuzk: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
