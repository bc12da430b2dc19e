"""Per-device state shared by the CUDA front ends (cuzk._cuda_ntt, cuzk._cuda_msm).

Each front end keeps its own ``_states`` dict and ``_driver()`` accessor (tests replace both
per module) and builds its state through ``state_for``.
"""

import threading

from . import _kernels

__all__ = ["DeviceState", "state_for"]


class DeviceState:
    """One program's loaded module on one device, its memoized functions, a stream-ordered
    memory pool and streams private to each calling thread."""

    def __init__(self, driver, device, program, extra_options=()):
        self.driver = driver
        self.device = device
        self.module = _kernels.get_module(device, program, tuple(extra_options))
        self.pool = driver.MemPool(device)
        self._lock = threading.RLock()
        self._fns = {}
        self._local = threading.local()

    def _memo(self, cache, key, make):
        """cache[key], made once under the state's lock (double-checked: reads take no lock)."""
        value = cache.get(key)
        if value is None:
            with self._lock:
                value = cache.get(key)
                if value is None:
                    value = cache[key] = make()
        return value

    def fn(self, name, smem=0):
        """The kernel ``name``, allowed ``smem`` bytes of dynamic shared memory."""
        def make():
            f = self.module.function(name)
            if smem > 48 * 1024:
                f.set_max_dynamic_shared(smem)
            return f
        return self._memo(self._fns, name, make)

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
    key = (device.ordinal, device.context)
    st = states.get(key)
    if st is None:
        with lock:
            st = states.get(key)
            if st is None:
                st = states[key] = factory(device)
    return st
