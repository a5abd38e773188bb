from __future__ import annotations

import pytest

from runtime.policy import Policy


@pytest.fixture(scope="session")
def default_policy() -> Policy:
    return Policy.default()
