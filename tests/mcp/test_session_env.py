"""Each MCP session has its own session environment: what one client sets with set_env is
neither read nor run by another's calls (red-team: alice's OPENAI_API_KEY was bob's
get_env answer, and her EDITOR was in bob's shell_exec), while budgets stay the broker's.
A session's environment is forgotten when its connection goes."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import mcp_types as types
import pytest
from mcp.client.session import ClientSession

from tests.mcp.conftest import HttpServer, http_session, serve_mcp_argv, stdio_session
from tests.mcp.standins import real_module

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        not all(real_module(m) for m in ("runtime.policy", "runtime.audit")),
        reason="needs the policy engine and the audit log",
    ),
]

_SECRET = "sk-alice-secret-123"


def _argv(ws: Path, *extra: str) -> list[str]:
    return serve_mcp_argv("--workspace", str(ws), "--audit", str(ws.parent / "audit.db"), *extra)


def _value(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return dict(result.structured_content)


async def _set(session: ClientSession, key: str, value: str) -> None:
    _value(await session.call_tool("set_env", {"key": key, "value": value}))


async def _get(session: ClientSession, key: str) -> dict[str, Any]:
    return _value(await session.call_tool("get_env", {"key": key}))


@pytest.mark.sandbox
async def test_two_http_sessions_have_their_own_environments(workspace: Path) -> None:
    server = HttpServer(_argv(workspace, "--http", "127.0.0.1:0"))
    try:
        async with http_session(server.url) as alice, http_session(server.url) as bob:
            await _set(alice, "OPENAI_API_KEY", _SECRET)
            await _set(bob, "MY_FLAG", "bob")
            assert await _get(bob, "OPENAI_API_KEY") == {
                "key": "OPENAI_API_KEY",
                "value": None,
                "exists": False,
            }
            assert (await _get(alice, "OPENAI_API_KEY"))["value"] == _SECRET
            assert (await _get(alice, "MY_FLAG"))["exists"] is False
            command = {"command": "env | grep -E '^(OPENAI_API_KEY|MY_FLAG)=' | sort"}
            seen = _value(await bob.call_tool("shell_exec", command))["stdout"]
            assert seen == "MY_FLAG=bob\n"
            seen = _value(await alice.call_tool("shell_exec", command))["stdout"]
            assert seen == f"OPENAI_API_KEY={_SECRET}\n"
        # A new session starts empty.
        async with http_session(server.url) as carol:
            assert (await _get(carol, "OPENAI_API_KEY"))["exists"] is False
    finally:
        server.close()


async def test_a_stdio_connection_is_one_session(workspace: Path) -> None:
    async with stdio_session(_argv(workspace)) as session:
        await _set(session, "NOTE", "kept")
        assert (await _get(session, "NOTE"))["value"] == "kept"
        await _set(session, "NOTE", "again")
        assert (await _get(session, "NOTE"))["value"] == "again"


def test_a_sessions_environment_goes_with_its_connection(tmp_path: Path) -> None:
    from runtime.broker import Broker
    from runtime.mcp.server import McpToolServer

    broker = Broker(workspace=tmp_path / "ws")
    server = McpToolServer(broker)

    class Connection:
        session_id = "live-http-session"

    conn = Connection()
    ctx: Any = SimpleNamespace(session=SimpleNamespace(_connection=conn))
    name = server.session_id(ctx)
    server._end_with(ctx, name)
    server._end_with(ctx, name)  # once per connection
    broker.session_env(name)["A"] = "1"
    broker.session_env("other")["B"] = "2"
    del conn, ctx
    gc.collect()
    assert name not in broker._session_env
    assert broker.session_env("other") == {"B": "2"}
    json.dumps(broker._session_env)  # nothing else left behind
