"""What device memory a cuzk process keeps once its work is released, and whether it is the
driver's local memory (session 47: an engine that starts after another in one process finds
~0.90 GB of the H100's memory taken that no reservation counts; ``untracked_bytes``).

    python3 bench/device_memory_probe.py [--log-n 16]

Steps on device 0, the device's free memory (``cuMemGetInfo``) after each: the context alone; a
GPU keygen of a PoRep-like circuit; an engine (one worker) proving one partition and closed (its
key released, its pool trimmed); then the context's stack limit set again to its own value
(``cuCtxSetLimit``), and set to 1 KiB, after which the driver sizes its local memory afresh.  Printed: each step's
drop, the kernels launched with their local memory per thread (``local_size_bytes``), and the
local memory the driver keeps for the largest of them: that size × SMs × resident threads per SM.
"""
from __future__ import annotations

import argparse


def _free(dev):
    return int(dev.mem_info()[0])


def _set_stack_limit(ordinal, nbytes=None):
    """Set the primary context's stack limit (cuda.bindings) to ``nbytes`` (None: its own value);
    returns the limit it had."""
    from cuda.bindings import driver as cu

    def ok(res):
        err, *rest = res if isinstance(res, tuple) else (res,)
        if err != cu.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"driver call failed: {err}")
        return rest[0] if rest else None
    dev = ok(cu.cuDeviceGet(ordinal))
    ctx = ok(cu.cuDevicePrimaryCtxRetain(dev))
    try:
        ok(cu.cuCtxSetCurrent(ctx))
        limit = ok(cu.cuCtxGetLimit(cu.CUlimit.CU_LIMIT_STACK_SIZE))
        ok(cu.cuCtxSetLimit(cu.CUlimit.CU_LIMIT_STACK_SIZE, limit if nbytes is None else nbytes))
        ok(cu.cuCtxSynchronize())
    finally:
        ok(cu.cuDevicePrimaryCtxRelease(dev))
    return int(limit)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log-n", type=int, default=16)
    args = ap.parse_args(argv)
    import cuzk
    from cuzk import _kernels
    from cuzk._native._driver import Device
    dev = Device.get(0)
    rows = [("context", _free(dev))]
    r1cs, inputs, aux = cuzk.porep_like(args.log_n, 1)
    asg = r1cs.assignment(inputs, aux)
    pk = cuzk.keygen_random(r1cs, seed=1, backend="cuda")
    rows.append(("GPU keygen", _free(dev)))
    with cuzk.Engine(backend="cuda", workers_per_gpu=1, verify=False) as eng:   # no verifier needed
        key = eng.load(pk, progress=False)
        eng.submit(key, [asg]).result()
        eng.evict(key)
    rows.append(("engine closed", _free(dev)))
    limit = _set_stack_limit(dev.ordinal)
    rows.append((f"stack limit reset ({limit} B)", _free(dev)))
    _set_stack_limit(dev.ordinal, 1024)
    rows.append(("stack limit set to 1024 B", _free(dev)))

    fns = [fn for mod in list(_kernels._modules.values()) for fn in mod.functions()]
    local = sorted(((fn.local_size_bytes, fn.num_regs, fn.name) for fn in fns), reverse=True)
    print(f"{dev.name}: {dev.sm_count} SMs x {dev.max_threads_per_sm} threads, "
          f"{len(fns)} kernels launched")
    print(f"{'local B/thread':>14} {'regs':>5}  kernel")
    for b, regs, name in local:
        if b:
            print(f"{b:>14} {regs:>5}  {name}")
    top = local[0][0] if local else 0
    print(f"largest local frame {top} B -> driver local memory "
          f"{top * dev.sm_count * dev.max_threads_per_sm / 1e9:.3f} GB for it")
    print(f"{'step':<34} {'free GB':>10} {'drop GB':>9}")
    for (name, f), (_, before) in zip(rows, [rows[0]] + rows[:-1]):
        print(f"{name:<34} {f / 1e9:>10.3f} {(before - f) / 1e9:>9.3f}")
    print(f"kept after the engine closed: {(rows[0][1] - rows[2][1]) / 1e9:.3f} GB; given back by "
          f"the stack-limit reset: {(rows[3][1] - rows[2][1]) / 1e9:.3f} GB, by the limit at 1024 B: "
          f"{(rows[4][1] - rows[2][1]) / 1e9:.3f} GB")


if __name__ == "__main__":
    main()
