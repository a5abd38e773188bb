from __future__ import annotations

from collections.abc import Iterator

import pytest
from egress_support import Server, serve


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def server() -> Iterator[Server]:
    yield from serve("public")


@pytest.fixture
def internal() -> Iterator[Server]:
    """A second local server playing an internal service that must stay unreachable."""
    yield from serve("internal")
