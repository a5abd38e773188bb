"""The MCP server records each call's MCP session in the audit log: streamable HTTP's
``Mcp-Session-Id`` (one per client session, as a digest: the raw id is the key to the live
session), one id per stdio connection."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from runtime.audit import AuditLog
from tests.mcp.conftest import FIXTURE_SERVER, HttpServer, http_session, stdio_session

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
    argv = [sys.executable, str(FIXTURE_SERVER), "--workspace", str(workspace)]
    async with stdio_session(argv) as session:
        for text in ("a", "b"):
            assert not (await session.call_tool("echo", {"text": text})).is_error
    assert _sessions(workspace) == ["mcp-conn:1"] * 4
