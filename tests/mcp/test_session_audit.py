"""The MCP server records each call's MCP session in the audit log: streamable HTTP's
``Mcp-Session-Id`` (one per client session, as a digest: the raw id is the key to the live
session), one id per stdio connection."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runtime.audit import AuditLog
from tests.mcp.conftest import HttpServer, fixture_argv, http_session, stdio_session

pytestmark = pytest.mark.anyio


def _sessions(workspace: Path) -> list[str | None]:
    with AuditLog(workspace / ".runtime" / "audit.db", read_only=True) as log:
        assert log.verify().ok
        return [r.session for r in log.tail(100)]


async def test_http_calls_record_their_mcp_session_id(
    http_fixture_server: HttpServer, workspace: Path
) -> None:
    for _ in range(2):
        async with http_session(http_fixture_server.url) as session:
            for text in ("a", "b"):
                assert not (await session.call_tool("echo", {"text": text})).is_error
    http_fixture_server.close()  # the broker closes: every record is in the database
    sessions = _sessions(workspace)
    assert len(sessions) == 8
    first, second = sessions[0], sessions[4]
    assert sessions == [first] * 4 + [second] * 4
    assert first is not None and second is not None and first != second
    for recorded in (first, second):
        assert re.fullmatch(r"mcp:[0-9a-f]{16}", recorded)


async def test_a_stdio_connection_is_one_session(workspace: Path) -> None:
    argv = fixture_argv(workspace)
    async with stdio_session(argv) as session:
        for text in ("a", "b"):
            assert not (await session.call_tool("echo", {"text": text})).is_error
    assert _sessions(workspace) == ["mcp-conn:1"] * 4


def test_a_2026_request_cannot_choose_its_session(
    http_fixture_server: HttpServer, workspace: Path
) -> None:
    # 2026-07-28 requests are stateless: the SDK checks no Mcp-Session-Id, so the header
    # is the client's say. It chose the call's audit session and limiter queue (another
    # client's, or a fresh one per call); now each request is its own connection.
    import hashlib

    import httpx

    chosen = "someone-elses-session"
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    for i in (1, 2):
        response = httpx.post(
            http_fixture_server.url,
            json={
                "jsonrpc": "2.0",
                "id": i,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "x"}, "_meta": meta},
            },
            headers={
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2026-07-28",
                "Mcp-Method": "tools/call",
                "Mcp-Name": "echo",
                "Mcp-Session-Id": chosen,
            },
            timeout=10,
        )
        assert response.status_code == 200 and '"echo":"x"' in response.text, response.text
    http_fixture_server.close()
    sessions = _sessions(workspace)
    assert len(sessions) == 4
    forged = f"mcp:{hashlib.sha256(chosen.encode()).hexdigest()[:16]}"
    assert forged not in sessions
    assert all(s is not None and s.startswith("mcp-conn:") for s in sessions)
    assert sessions[0] == sessions[1] != sessions[2] == sessions[3]
