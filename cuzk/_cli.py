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
    from ._prover import prove_cli
    return prove_cli(args)


def _cmd_verify(args):
    from ._verifier import verify_cli
    return verify_cli(args)


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
