"""``runtime serve --mcp`` end to end: the real CLI, policy, audit log, sandbox and tools,
driven by the official client over stdio and streamable HTTP."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from tests.mcp.conftest import HttpServer, child_env, http_session, serve_mcp_argv
from tests.mcp.standins import real_module

REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.sandbox,
    pytest.mark.skipif(
        not all(
            real_module(m) for m in ("runtime.policy", "runtime.audit", "runtime.backends.sandbox")
        ),
        reason="needs the policy engine, the audit log and the sandbox backend",
    ),
]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    (workspace / "notes").mkdir(parents=True)
    (workspace / "notes" / "hello.txt").write_text("hello from the workspace\n")
    return workspace


def serve_argv(ws: Path, *extra: str) -> list[str]:
    audit = ws.parent / "audit.db"
    return serve_mcp_argv("--workspace", str(ws), "--audit", str(audit), *extra)


@asynccontextmanager
async def stdio(ws: Path) -> AsyncIterator[ClientSession]:
    argv = serve_argv(ws)
    params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(REPO), env=child_env())
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


@pytest.fixture(params=["stdio", "http"])
def connect(request: pytest.FixtureRequest, ws: Path) -> Iterator[Any]:
    if request.param == "stdio":
        yield lambda: stdio(ws)
        return
    server = HttpServer(serve_argv(ws, "--http", "127.0.0.1:0"))
    yield lambda: http_session(server.url)
    server.close()


def error_type(result: types.CallToolResult) -> str:
    assert result.is_error and result.structured_content is not None
    return str(result.structured_content["error"]["type"])


async def test_end_to_end(connect: Any, ws: Path) -> None:
    async with connect() as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        read = await session.call_tool("read_file", {"path": "notes/hello.txt"})
        bad = await session.call_tool("read_file", {"path": 7})
        traversal = await session.call_tool("read_file", {"path": "../../etc/passwd"})
        absolute = await session.call_tool("read_file", {"path": "/etc/passwd"})
        with pytest.raises(MCPError) as unknown:
            await session.call_tool("no_such_tool", {})
    assert "read_file" in tools
    ann = tools["read_file"].annotations
    assert ann is not None and ann.read_only_hint is True and ann.destructive_hint is False
    assert tools["read_file"].output_schema is not None
    assert not read.is_error, read
    assert read.structured_content is not None
    assert read.structured_content["content"] == "hello from the workspace\n"
    assert error_type(bad) == "invalid_arguments"
    for result in (traversal, absolute):
        assert result.is_error  # denied or failed; never the host's file
        assert "root:" not in result.model_dump_json()
    assert unknown.value.code == types.INVALID_PARAMS
    from runtime.audit import AuditLog

    log = AuditLog(ws.parent / "audit.db")
    try:
        tail = log.tail(50)
    finally:
        log.close()
    tools_audited = [getattr(r, "tool", None) for r in tail]
    assert tools_audited.count("read_file") >= 2 * 4  # request + completion per call


async def test_stdout_is_protocol_only_with_real_tools(ws: Path) -> None:
    """A shell command writing to stdout reaches the client as a result, not as a frame."""
    async with stdio(ws) as session:
        tools = {t.name for t in (await session.list_tools()).tools}
        if "shell_exec" not in tools:
            pytest.skip("the policy hides shell_exec")
        result = await session.call_tool("shell_exec", {"command": "echo not-a-frame"})
        ok = await session.call_tool("read_file", {"path": "notes/hello.txt"})
    assert not ok.is_error
    if not result.is_error:
        assert "not-a-frame" in json.dumps(result.structured_content)
