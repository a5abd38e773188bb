"""Why an external MCP server could not start is said in words: the proxy's error (logged,
and in ``McpProxyBackend.errors``) was "ExceptionGroup: unhandled errors in a TaskGroup (1
sub-exception)" for a server that exits at once — a user of ``runtime serve --mcp`` saw its
tools missing and nothing naming the cause."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError

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


async def test_a_call_to_a_tool_of_a_server_that_did_not_start(tmp_path: Path) -> None:
    # The client got "Unknown tool: quits__x", as for a name that never existed.
    from tests.mcp.conftest import serve_mcp_argv, stdio_session

    python, _ = _python()
    policy = tmp_path / "policy.toml"
    policy.write_text(
        f"""
version = 1
default = "deny"

[sandbox]
mode = "best_effort"

[categories]
mcp = "allow"

[[mcp_servers]]
name = "quits"
command = ["{python}", "-c", "import sys; sys.exit(3)"]
"""
    )
    argv = serve_mcp_argv("--policy", str(policy), "--workspace", str(tmp_path / "ws"))
    async with stdio_session(argv) as session:
        with pytest.raises(MCPError) as info:
            await session.call_tool("quits__x", {})
        with pytest.raises(MCPError) as plain:
            await session.call_tool("nothing__x", {})
    assert "Unknown tool: quits__x" in str(info.value)
    assert "did not start" in str(info.value) and "before it was ready" in str(info.value)
    assert "did not start" not in str(plain.value)
