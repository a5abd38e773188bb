from __future__ import annotations

import pytest

from runtime.policy import Policy


@pytest.fixture(scope="session")
def default_policy() -> Policy:
    return Policy.default()


@pytest.fixture(scope="module")
def policy() -> Policy:
    """The built-in default policy, one per test module (the rounds' files judge commands
    with it)."""
    return Policy.default()
