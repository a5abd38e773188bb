from __future__ import annotations

import os
from types import ModuleType

import pytest
from hypothesis import settings

from runtime import _speedups

# Hypothesis' default 200 ms per-example deadline is a timing assertion: on a loaded 2-core
# machine (or CI) a correct example can take longer and the test fails for the wrong reason.
# Speed lives in benchmarks/, so no property test has a deadline.
settings.register_profile("runtime", deadline=None)
settings.load_profile("runtime")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def c_mod() -> ModuleType:
    """The C accelerator (runtime/_speedups.c); the test is skipped when the environment
    forces the pure-Python path, and fails when the module could not be built otherwise."""
    mod = _speedups.module()
    if mod is None and os.environ.get(_speedups.PURE_ENV, "") not in ("", "0"):
        pytest.skip("forced pure by the environment")
    assert mod is not None, _speedups.status()
    return mod
