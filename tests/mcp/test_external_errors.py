"""Why an external MCP server could not start is said in words: the proxy's error (logged,
and in ``McpProxyBackend.errors``) was "ExceptionGroup: unhandled errors in a TaskGroup (1
sub-exception)" for a server that exits at once — a user of ``runtime serve --mcp`` saw its
tools missing and nothing naming the cause."""

from __future__ import annotations

import pytest

from runtime.backends.mcp_proxy import McpProxyBackend
from tests.mcp.test_external import _python, server

pytestmark = pytest.mark.anyio


async def test_a_server_that_exits_at_once() -> None:
    python, _ = _python()
    quits = server(name="quits", command=[python, "-c", "import sys; sys.exit(3)"])
    async with McpProxyBackend([quits], mode="best_effort") as proxy:
        assert proxy.specs == []
        error = proxy.errors["quits"]
    assert "TaskGroup" not in error and "sub-exception" not in error, error
    assert "before it was ready" in error
