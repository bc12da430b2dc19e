"""Per-device state shared by the CUDA front ends (cuzk._cuda_ntt, cuzk._cuda_msm).

Each front end keeps its own ``_states`` dict and ``_driver()`` accessor (tests replace both
per module) and builds its state through ``state_for``.
"""

import os
import threading

from . import _kernels

__all__ = ["DeviceState", "state_for", "device_pool", "memo", "POOL_RELEASE_THRESHOLD",
           "POOL_INTERNAL_DEPENDENCIES"]

# cuzk's pools keep what they hold across synchronizations (no release at every sync); memory
# goes back to the device only through ``MemPool.trim``, which the engine calls when idle.
POOL_RELEASE_THRESHOLD = 2**64 - 1
#: Whether an allocation from cuzk's pool may take bytes whose free is still pending on another
#: stream by making its stream wait for that free (``MemPool.internal_dependencies``; on: the
#: driver's default, kept).  Off, one worker's upload never waits for another worker's kernels,
#: but where the budget admits more than the card has, an allocation fails instead of waiting:
#: an H100 run in which a 2^27 partition's a, b upload waited 1.09 s on the other worker's
#: region ran out of memory with it off (bench/RESULTS.md, sessions 45-46; the cause was a key's
#: 8 GiB of twiddle tables outliving it, now fixed).  Off for A/B runs: the stage option
#: ``pool_deps=0`` or ``CUZK_POOL_INTERNAL_DEPS=0`` (``bench/gpu_round.sh poolab``).  What off
#: requires: a reservation is released only once its buffers' frees have run
#: (``CudaStages._free_device``), so the bytes it gives back are there for any stream.
POOL_INTERNAL_DEPENDENCIES = os.environ.get("CUZK_POOL_INTERNAL_DEPS", "1") not in ("", "0")

_pools = {}
_pools_lock = threading.Lock()


def memo(cache, lock, key, make):
    """``cache[key]``, made once by ``make()`` under ``lock`` (double-checked: a hit takes no
    lock).  The one memo of the per-device objects (pools, budgets, front-end states)."""
    value = cache.get(key)
    if value is None:
        with lock:
            value = cache.get(key)
            if value is None:
                value = cache[key] = make()
    return value


def device_pool(driver, device):
    """cuzk's own stream-ordered memory pool of ``device`` (cuMemPoolCreate; never the device's
    default pool, which other CUDA users of the process share), one per device and driver,
    shared by every front end and stage; ``POOL_INTERNAL_DEPENDENCIES`` set on it."""
    def make():
        pool = driver.MemPool(device, POOL_RELEASE_THRESHOLD, create=True)
        if not POOL_INTERNAL_DEPENDENCIES:     # on is the driver's default: nothing to set
            pool.internal_dependencies = False
        return pool
    return memo(_pools, _pools_lock, (id(driver), device.ordinal, device.context), make)


def pools_reserved_bytes(device):
    """The bytes cuzk's pools of ``device`` hold from the driver (used or kept for reuse)."""
    with _pools_lock:
        pools = [p for (_, ordinal, ctx), p in _pools.items()
                 if ordinal == device.ordinal and ctx == device.context]
    return sum(int(p.reserved_bytes) for p in pools)


class DeviceState:
    """One program's loaded module on one device, its memoized functions, cuzk's memory pool of
    the device (``device_pool``) and streams private to each calling thread."""

    def __init__(self, driver, device, program, extra_options=()):
        self.driver = driver
        self.device = device
        self.module = _kernels.get_module(device, program, tuple(extra_options))
        self.pool = device_pool(driver, device)
        self._lock = threading.RLock()
        self._fns = {}
        self._smem = {}        # name -> dynamic shared memory bytes the function is allowed
        self._local = threading.local()

    def _memo(self, cache, key, make):
        """cache[key], made once under the state's lock (``memo``)."""
        return memo(cache, self._lock, key, make)

    def fn(self, name, smem=0):
        """The kernel ``name``, allowed at least ``smem`` bytes of dynamic shared memory (the
        attribute only grows: a launch with less shared memory than an earlier one needs nothing
        new, one with more raises it first)."""
        f = self._memo(self._fns, name, lambda: self.module.function(name))
        if smem > 48 * 1024 and smem > self._smem.get(name, 48 * 1024):
            with self._lock:
                if smem > self._smem.get(name, 48 * 1024):
                    f.set_max_dynamic_shared(smem)
                    self._smem[name] = smem
        return f

    def streams(self):
        """(compute, upload) streams private to the calling thread."""
        loc = self._local
        if getattr(loc, "streams", None) is None:
            loc.streams = (self.driver.Stream(self.device), self.driver.Stream(self.device))
        return loc.streams


def state_for(states, lock, driver, device, factory):
    """``states[(ordinal, context)]`` of ``device`` (None: device 0; an int: that ordinal),
    made once by ``factory(device)``."""
    if device is None or isinstance(device, int):
        device = driver.Device.get(device or 0)
    return memo(states, lock, (device.ordinal, device.context), lambda: factory(device))
