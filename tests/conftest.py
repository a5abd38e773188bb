from __future__ import annotations

import pytest
from hypothesis import settings

# Hypothesis' default 200 ms per-example deadline is a timing assertion: on a loaded 2-core
# machine (or CI) a correct example can take longer and the test fails for the wrong reason.
# Speed lives in benchmarks/, so no property test has a deadline.
settings.register_profile("runtime", deadline=None)
settings.load_profile("runtime")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
