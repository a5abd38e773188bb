from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

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


_HERE = Path(__file__).parent

# httpcore's HTTP/1.1 body generator nests an inner async generator that it never acloses;
# stopping at the byte cap leaves it to trio's GC finaliser, which warns. The gateway closes
# the connection itself (runtime.egress._transport._ResponseStream); the warning is upstream's.
_HTTPCORE_GENERATOR_WARNING = pytest.mark.filterwarnings(
    "ignore:Async generator 'httpcore._async.http11.AsyncHTTP11Connection."
    "_receive_response_body':ResourceWarning"
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(_HTTPCORE_GENERATOR_WARNING)
