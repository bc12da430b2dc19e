"""cuzk: Groth16 over BLS12-381 for Filecoin provers, on NVIDIA GPUs and on the CPU."""
from ._version import __version__
from ._errors import (CuzkError, FormatError, CudaError, NvrtcError, BackendUnavailable,
                      ProofVerificationError, UnsatisfiedAssignmentError, BudgetError)
from ._backend import cuda_available, resolve_backend
from ._primitives import msm, ntt
from ._params import (VerifyingKey, ProvingKey, read_params, write_params, read_vk, write_vk,
                      encode_proof, decode_proof, decode_proofs)
from ._assignment import Assignment, Density
from ._circuit import R1CS, porep_like
from ._keygen import keygen, keygen_random
from ._prover import Prover, prove, prove_partitions, public_inputs
from ._budget import Budget
from ._verifier import verify, verify_batch
from ._snarkjs import read_zkey, read_wtns, write_proof_json, write_public_json
from ._snarkjs_prover import prove_zkey
from ._errors import EngineError, EngineBusy, EngineClosed
from ._engine import Engine

__all__ = [
    "__version__",
    "CuzkError", "FormatError", "CudaError", "NvrtcError", "BackendUnavailable",
    "ProofVerificationError", "UnsatisfiedAssignmentError", "BudgetError",
    "cuda_available", "resolve_backend",
    "msm", "ntt",
    "VerifyingKey", "ProvingKey", "read_params", "write_params", "read_vk", "write_vk",
    "encode_proof", "decode_proof", "decode_proofs",
    "Assignment", "Density",
    "R1CS", "porep_like",
    "keygen", "keygen_random",
    "prove", "prove_partitions", "Prover", "public_inputs", "Budget",
    "verify", "verify_batch",
    "read_zkey", "read_wtns", "prove_zkey", "write_proof_json", "write_public_json",
    "Engine", "EngineError", "EngineBusy", "EngineClosed",
]
