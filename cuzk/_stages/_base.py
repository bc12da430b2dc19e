"""The stage interface every backend implements (DESIGN §3).

One partition goes through four calls::

    part = st.prepare(key, asg, ctx)   # host: validate, a∘b = c check, prep_msm, reserve the
                                       # partition's bytes, enqueue uploads (CUDA)
    done = st.run(part)                # the kernel region: H, H MSM, batch additions, tail MSMs
                                       # (b_g2 when on the GPU); returns an object with
                                       # .synchronize() / .query()
    done.synchronize()
    proof = st.finish(part)            # host: b_g2 when on the CPU, epilogue, verify, release

and ``st.abort(part)`` after any failure releases whatever the partition still holds.  The
engine locks exactly the calls its lock mode names; ``cuzk.prove`` calls ``st.prove_one``: the
four lines with no lock (a backend may overlap them there).  A key (``st.load_key(pk)``) is shared read-only by every worker of a device; a
context (``st.context()``) belongs to one worker thread.
"""
from __future__ import annotations

import functools
import secrets
import time

from .._args import threads_arg
from .._constants import FR_MODULUS as R_MODULUS
from .._errors import ProofVerificationError

__all__ = ["Stages", "StageContext", "Partition", "HostKey", "Completed", "R_MODULUS",
           "random_scalar", "check_randomizers", "timed", "precompute_arg", "streams_arg",
           "flag_arg", "STREAM_COUNTS", "DEFAULT_STREAMS"]

# Stage names, in the order a partition's timings list them.
STAGE_NAMES = ("validate", "prep_msm", "upload", "h", "l", "a", "b_g1", "b_g2", "region",
               "verify_prep", "epilogue", "verify")


def timed(timings, name, fn, *args):
    """fn(*args), its wall time (seconds) added to ``timings[name]`` (also when it raises)."""
    t0 = time.perf_counter()
    try:
        return fn(*args)
    finally:
        timings[name] = timings.get(name, 0.0) + time.perf_counter() - t0


#: Compute streams of a kernel region (``CudaStages(streams=)``; why 2: its docstring).
STREAM_COUNTS = (1, 2)
DEFAULT_STREAMS = 2


def streams_arg(v):
    """A ``streams`` stage option: 1 or 2 (ValueError otherwise)."""
    k = int(v)
    if k not in STREAM_COUNTS:
        raise ValueError(f"streams must be one of {STREAM_COUNTS}, got {v!r}")
    return k


streams_arg.__name__ = "1 or 2"      # parse_stage_options' message: "... is not 1 or 2"


# The batch-addition kernels (cuzk._cuda_batch.KINDS, written here so that the CPU-only import
# path does not load the CUDA front end; tests/test_engine_threads.py checks the two agree).
ONES_KINDS = ("auto", "xyzz", "affine", "balanced")


def choice_arg(option, choices):
    """The parser of a stage option that takes one of ``choices`` (any case; ValueError
    otherwise), named for ``parse_stage_options``' message ("... is not one of a/b")."""
    def parse(v):
        k = str(v).strip().lower()
        if k not in choices:
            raise ValueError(f"{option} must be one of {choices}, got {v!r}")
        return k
    parse.__name__ = "one of " + "/".join(choices)
    return parse


#: ``ones_kind``: "auto" or a batch-addition kernel.
ones_kind_arg = choice_arg("ones_kind", ONES_KINDS)

#: Where the CUDA backend's row check a∘b = c runs (``CudaStages(row_check=...)``).
ROW_CHECKS = ("beside", "on_failure")
row_check_arg = choice_arg("row_check", ROW_CHECKS)

#: Where the CUDA backend's ``load_key`` puts a key (``CudaStages(key_where=...)``).
KEY_WHERE = ("auto", "device", "host")
key_where_arg = choice_arg("key_where", KEY_WHERE)

#: The H stage's twiddle tables (``CudaStages(h_tables=...)``): "auto" (deep for a key streamed
#: from host memory, full for a resident one), "full" or "deep" (``cuzk._cuda_ntt.h_deep``).
H_TABLES_MODES = ("auto", "full", "deep")
h_tables_arg = choice_arg("h_tables", H_TABLES_MODES)

#: Buffers of n field elements a streamed key's partition computes H in
#: (``CudaStages(h_buffers=...)``): "auto", 4, 3 or 2.
H_BUFFERS = ("auto", "4", "3", "2")
_h_buffers_choice = choice_arg("h_buffers", H_BUFFERS)


def h_buffers_arg(v):
    """An ``h_buffers`` stage option: "auto" or the int 4, 3 or 2 (ValueError otherwise)."""
    k = _h_buffers_choice(v)
    return k if k == "auto" else int(k)


h_buffers_arg.__name__ = _h_buffers_choice.__name__

#: How c reaches the device with two H buffers (``CudaStages(c_upload=...)``): page-locked in
#: place and copied by DMA ("register"), or through the worker's pinned ring ("ring").
C_UPLOADS = ("register", "ring")
c_upload_arg = choice_arg("c_upload", C_UPLOADS)


def precompute_arg(v):
    """A ``precompute`` stage option: ``"auto"`` or an int >= 1 (ValueError otherwise)."""
    if str(v).strip().lower() == "auto":
        return "auto"
    k = int(v)
    if k < 1:
        raise ValueError(f"precompute must be 'auto' or >= 1, got {k}")
    return k


precompute_arg.__name__ = "int or auto"      # parse_stage_options' message: "... is not int or auto"


def flag_arg(v):
    """A boolean stage option (``early_h``, ``abc_scratch``): 1/0, true/false, yes/no, on/off
    (ValueError otherwise)."""
    t = str(v).strip().lower()
    if t in ("1", "true", "yes", "on"):
        return True
    if t in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"not a flag: {v!r}")


flag_arg.__name__ = "0 or 1"      # parse_stage_options' message: "... is not 0 or 1"


def random_scalar() -> int:
    """A uniform element of [0, r) from the OS CSPRNG (a Groth16 randomizer)."""
    return secrets.randbelow(R_MODULUS)


def check_randomizers(r, s):
    """(r, s) as ints in [0, r); None draws a fresh one.  ValueError outside the range."""
    r = random_scalar() if r is None else int(r)
    s = random_scalar() if s is None else int(s)
    if not (0 <= r < R_MODULUS and 0 <= s < R_MODULUS):
        raise ValueError("r and s must lie in [0, r)")
    return r, s


class Completed:
    """The ``run`` result of a synchronous backend: already complete."""

    __slots__ = ()

    def synchronize(self):
        return None

    def query(self):
        return True


class HostKey:
    """A proving key used where it is (host memory): the CPU backend's resident form."""

    where = "host"

    def __init__(self, pk, reservation=None):
        self.pk = pk
        self._res = reservation
        self.nbytes = reservation.nbytes if reservation is not None else 0

    def release(self):
        if self._res is not None:
            self._res.release()

    def __repr__(self):
        return f"HostKey(domain={self.pk.domain_size}, {self.nbytes} bytes reserved)"


class StageContext:
    """What one worker owns: its budget (shared by the workers of a device), its CPU thread count,
    and (CUDA) its streams and staging memory.  Made by ``Stages.context``."""

    def __init__(self, stages, budget=None, threads=None, name="w0"):
        self.stages = stages
        self.budget = budget
        self.threads = threads_arg(threads)
        self.name = name

    def close(self):
        return None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Partition:
    """The state of one partition between ``prepare`` and ``finish``."""

    def __init__(self, key, asg, ctx, r, s):
        self.key, self.asg, self.ctx, self.r, self.s = key, asg, ctx, r, s
        self.index = 0
        # whether finish will verify the proof (the caller sets it before run when it will not;
        # CudaStages' row_check="on_failure" leaves the row check to a failed verification)
        self.verify = True
        self.timings = {}
        self.parts = {}          # name -> PendingPoint / ReadyPoint
        self.prep = None
        self.reservations = []
        self.bytes_uploaded = 0
        self.done = None         # the object run() returned
        self._closed = False

    @property
    def reserved_bytes(self) -> int:
        return sum(r.nbytes for r in self.reservations if r.held)

    def lap(self, name, fn, *args):
        """fn(*args), its wall time added to timings[name]."""
        return timed(self.timings, name, fn, *args)

    def release(self):
        """Give back every reservation (idempotent)."""
        for r in self.reservations:
            r.release()


class Stages:
    """Base of the backends' stage objects (see the module docstring for the protocol)."""

    name = "?"
    stage_names = STAGE_NAMES

    def __init__(self, threads=None):
        self.threads = threads_arg(threads)

    @property
    def device_label(self) -> str:
        return self.name

    # ---- objects ------------------------------------------------------------------------
    def context(self, budget=None, threads=None, name="w0") -> StageContext:
        return StageContext(self, budget, self.threads if threads is None else threads, name)

    def load_key(self, pk, budget=None, progress=None, lasting=True, partitions=1):
        """The backend's resident form of ``pk`` (shared by the device's workers).  ``lasting``:
        the key will serve many partitions (the engine), so one-time costs that make each
        partition faster pay (CUDA: precomputed copies of the H bases under ``precompute="auto"``);
        ``cuzk.prove`` loads with False.  ``partitions``: how many partitions of it the caller
        keeps in flight at once (the engine: its workers per device; CUDA sizes a streamed key's
        slots by it)."""
        raise NotImplementedError

    # ---- the calls ----------------------------------------------------------------------
    def prepare(self, key, asg, ctx, r=None, s=None, check=True, upload=True) -> Partition:
        """Host work before the kernel region: validate (and with ``check`` the row check),
        prep_msm; then, unless ``upload=False``, ``upload(part)``.  On any error nothing stays
        reserved or allocated."""
        r, s = check_randomizers(r, s)
        part = Partition(key, asg, ctx, r, s)
        try:
            part.lap("validate", self._validate, part, check)
            part.prep = part.lap("prep_msm", self.prep_msm, asg, ctx.threads)
            if upload:
                self.upload(part)
        except BaseException:
            self.abort(part)
            raise
        return part

    def upload(self, part) -> None:
        """Reserve the partition's bytes from its context's budget (waiting while they do not fit)
        and issue its uploads (CUDA: on the worker's upload stream, ordered by an event); the
        engine's two-lock mode holds its memory lock around exactly this call.  On an error the
        partition must be aborted (``abort``)."""
        part.lap("upload", self._stage_in, part)

    def _stage_in(self, part):
        raise NotImplementedError

    def warm(self, ctx, key) -> None:
        """Size ``ctx``'s staging memory for partitions of ``key`` now (warm-up), so that the
        partitions' ``upload`` does not allocate it (CUDA: pinned host memory)."""
        return None

    def trim(self) -> None:
        """Give memory held by idle pools back (CUDA: cuMemPoolTrimTo; call only when no kernel
        of this device runs)."""
        return None

    def untracked_bytes(self, budget) -> int:
        """Bytes ``budget`` counts as free that the device cannot give (CUDA: memory taken
        outside every reservation; read at an engine's start).  0 on the CPU."""
        return 0

    def run(self, part):
        raise NotImplementedError

    def finish(self, part, verify=True) -> bytes:
        raise NotImplementedError

    def abort(self, part) -> None:
        """Release everything ``part`` holds after a failure (idempotent)."""
        part.release()

    def early_ready(self, key) -> bool:
        """Whether partitions of ``key`` can take the early path (``early_head`` +
        ``early_rest``: the first kernels enqueued before prep_msm; the CUDA backend with a
        resident key).  The engine asks before it picks a partition's plan."""
        return False

    def prove_one(self, key, asg, ctx, r=None, s=None, check=True, verify=True):
        """One partition with no lock (``cuzk.prove``): prepare → run → synchronize → finish,
        aborted on any error.  Returns ``(proof, timings)``; ``timings["region"]`` is the host
        wall time of run + synchronize.  A backend may overlap the steps here (CudaStages: the
        H kernels run while prep_msm does); the engine never calls this (its lock brackets
        ``run``)."""
        part = self.prepare(key, asg, ctx, r, s, check=check)
        part.verify = bool(verify)
        try:
            t1 = time.perf_counter()
            done = self.run(part)
            if verify:
                self._prepare_verify(part)
            done.synchronize()
            part.timings["region"] = time.perf_counter() - t1
            proof = self.finish(part, verify=verify)
        except BaseException:
            self.abort(part)
            raise
        return proof, part.timings

    # ---- shared host steps --------------------------------------------------------------
    def _validate(self, part, check):
        """Shapes against the key, then (check=True) the row check a_i·b_i = c_i."""
        asg, pk = part.asg, part.key.pk
        asg.validate(pk)
        if check:
            asg.check_satisfied(threads=part.ctx.threads)

    @staticmethod
    def epilogue_points(vk, parts, r, s):
        """The proof's points (affine Montgomery A (12,), B (24,), C (12,)) from the stage results
        ``parts`` (h, l, a, b_g1, b_g2: affine Montgomery) and (r, s):
        A = α₁ + ΣA + r·δ₁;  B = β₂ + ΣB₂ + s·δ₂;  B₁ = β₁ + ΣB₁ + s·δ₁;
        C = H + L + s·A + r·B₁ − r·s·δ₁.  ``vk`` supplies α₁, β₁, β₂, δ₁, δ₂ (a VerifyingKey;
        the snarkjs prover passes its zkey's)."""
        from .._native import _field as f
        add, mul = f.point_add, f.point_mul
        g_a = add(add(vk.alpha_g1, parts["a"], "g1"), mul(vk.delta_g1, r, "g1"), "g1")
        g_b = add(add(vk.beta_g2, parts["b_g2"], "g2"), mul(vk.delta_g2, s, "g2"), "g2")
        b1 = add(add(vk.beta_g1, parts["b_g1"], "g1"), mul(vk.delta_g1, s, "g1"), "g1")
        g_c = add(parts["h"], parts["l"], "g1")
        g_c = add(g_c, mul(g_a, s, "g1"), "g1")
        g_c = add(g_c, mul(b1, r, "g1"), "g1")
        g_c = add(g_c, mul(vk.delta_g1, (R_MODULUS - r * s % R_MODULUS) % R_MODULUS, "g1"), "g1")
        return g_a, g_b, g_c

    @classmethod
    def epilogue(cls, vk, parts, r, s) -> bytes:
        """``epilogue_points`` encoded as the 192-byte bellperson proof."""
        from .._params import encode_proof
        return encode_proof(*cls.epilogue_points(vk, parts, r, s))

    @staticmethod
    def _prepare_verify(part):
        """The proof-independent part of the self-verification (``prepare_inputs``: the public
        inputs' multi-exponentiation), run by ``prove_one`` while the region computes, so
        ``finish`` is left with the pairing."""
        from .._verifier import prepare_inputs
        from .._prover import public_inputs
        part.verify_prep = part.lap("verify_prep", prepare_inputs, part.key.pk.vk,
                                    public_inputs(part.asg))
        return part.verify_prep

    def _epilogue_and_verify(self, part, points, verify):
        pk = part.key.pk
        proof = part.lap("epilogue", self.epilogue, pk.vk, points, part.r, part.s)
        if verify:
            from .._verifier import verify as _verify
            prep = getattr(part, "verify_prep", None) or self._prepare_verify(part)
            ok = part.lap("verify", functools.partial(_verify, prepared=prep), pk.vk, proof)
            if not ok:
                raise self._diagnose(part)
        return proof

    def _diagnose(self, part):
        """The error for a proof that failed self-verification, saying whose fault it is."""
        return ProofVerificationError(
            "the proof does not verify although a∘b = c holds row by row: the assignment does not "
            "satisfy the circuit (check the aux and input values against the key); not returned",
            cause="assignment", backend=self.name)
