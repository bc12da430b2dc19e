"""Shared fixtures: a seeded NumPy generator and the hypothesis profiles."""
import os
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

# "dev" (default) keeps the whole suite fast on 2 cores; CUZK_HYPOTHESIS_PROFILE=thorough for more.
settings.register_profile("dev", max_examples=25, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=300, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("CUZK_HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture
def rng(request):
    """A NumPy Generator seeded from the test's node id (reproducible, different per test)."""
    seed = zlib.crc32(request.node.nodeid.encode())
    return np.random.default_rng(seed)
