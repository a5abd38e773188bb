"""The MCP server, driven by the official client over stdio and streamable HTTP."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from tests.mcp.conftest import INITIALIZE

pytestmark = pytest.mark.anyio


def error_of(result: types.CallToolResult) -> dict[str, Any]:
    assert result.is_error
    assert result.structured_content is not None
    text = result.content[0]
    assert isinstance(text, types.TextContent)
    assert json.loads(text.text)["error"] == result.structured_content["error"]
    error: dict[str, Any] = result.structured_content["error"]
    return error


async def test_list_tools(connect: Any) -> None:
    async with connect() as session:
        listing = await session.list_tools()
    tools = {t.name: t for t in listing.tools}
    assert "hidden" not in tools  # the policy hides it
    assert {"echo", "fail", "guarded", "forbidden", "read_text", "gather", "ask"} <= set(tools)
    echo = tools["echo"]
    assert echo.input_schema["properties"]["text"]["type"] == "string"
    assert echo.output_schema is not None and echo.output_schema["required"] == ["echo"]
    assert echo.annotations is not None
    assert echo.annotations.read_only_hint is True
    assert echo.annotations.idempotent_hint is True
    assert echo.annotations.destructive_hint is False
    assert echo.annotations.open_world_hint is False
    guarded = tools["guarded"]
    assert guarded.annotations is not None and guarded.annotations.destructive_hint is True


async def test_list_tools_has_display_titles(connect: Any) -> None:
    # MCP 2025-06-18 added Tool.title, the display name clients show first (then
    # annotations.title, then name); every listed tool carries one, the same as its
    # annotations' title.
    async with connect() as session:
        listing = await session.list_tools()
    for tool in listing.tools:
        assert tool.title, tool.name
        assert tool.annotations is not None and tool.annotations.title == tool.title
    echo = next(t for t in listing.tools if t.name == "echo")
    assert echo.title == "echo"


async def test_list_tools_is_one_page_and_refuses_a_cursor_it_never_issued(connect: Any) -> None:
    # Every tool comes in one page (no nextCursor), so any cursor a client sends is one we
    # never issued: the spec's answer to an invalid cursor is -32602, not the first page
    # again (a paginating client would loop on it or list every tool twice).
    async with connect() as session:
        listing = await session.list_tools()
        assert listing.next_cursor is None
        with pytest.raises(MCPError) as info:
            await session.list_tools(params=types.PaginatedRequestParams(cursor="bogus"))
        assert info.value.code == types.INVALID_PARAMS
        assert "cursor" in info.value.message
        again = await session.list_tools(params=types.PaginatedRequestParams())
    assert [t.name for t in again.tools] == [t.name for t in listing.tools]


async def test_call_success(connect: Any) -> None:
    async with connect() as session:
        result = await session.call_tool("echo", {"text": "hi"})
    assert not result.is_error
    assert result.structured_content == {"echo": "hi"}
    text = result.content[0]
    assert isinstance(text, types.TextContent) and json.loads(text.text) == {"echo": "hi"}


@pytest.mark.parametrize(
    "arguments", [{"text": 3}, {}, {"text": "x", "extra": 1}, {"text": "x" * 5000}]
)
async def test_bad_arguments_are_error_results(connect: Any, arguments: dict[str, Any]) -> None:
    async with connect() as session:
        result = await session.call_tool("echo", arguments)
    error = error_of(result)
    assert error["type"] == "invalid_arguments"
    assert error["message"]


async def test_tool_failure(connect: Any) -> None:
    async with connect() as session:
        result = await session.call_tool("fail", {})
    error = error_of(result)
    assert error["type"] == "tool_error"
    assert "on purpose" in error["message"]


async def test_policy_denial(connect: Any) -> None:
    async with connect() as session:
        result = await session.call_tool("forbidden", {})
    error = error_of(result)
    assert error["type"] == "policy_denied"
    assert "tools.forbidden" in error["message"]


@pytest.mark.parametrize("path", ["../../etc/passwd", "/etc/passwd", "a/../../../etc/passwd"])
async def test_traversal_is_contained(connect: Any, path: str) -> None:
    async with connect() as session:
        ok = await session.call_tool("read_text", {"path": "notes.txt"})
        bad = await session.call_tool("read_text", {"path": path})
    assert ok.structured_content == {"text": "hello from the workspace\n"}
    error = error_of(bad)
    assert error["type"] == "policy_denied"
    dumped = bad.model_dump_json()
    assert "root:" not in dumped


@pytest.mark.parametrize("name", ["no_such_tool", "hidden"])
async def test_unknown_tool_is_protocol_error(connect: Any, name: str) -> None:
    async with connect() as session:
        with pytest.raises(MCPError) as info:
            await session.call_tool(name, {})
    assert info.value.code == types.INVALID_PARAMS


async def test_concurrent_calls(connect: Any) -> None:
    n = 4
    results: list[types.CallToolResult] = []
    async with connect() as session:

        async def one() -> None:
            results.append(await session.call_tool("gather", {"n": n}))

        async with anyio.create_task_group() as tg:
            for _ in range(n):
                tg.start_soon(one)
            tg.start_soon(session.call_tool, "echo", {"text": "between"})
    assert len(results) == n
    for result in results:
        assert not result.is_error
        assert result.structured_content == {"peak": n}


async def test_ask_without_elicitation_is_approval_required(connect: Any) -> None:
    async with connect() as session:
        result = await session.call_tool("guarded", {"text": "x"})
    error = error_of(result)
    assert error["type"] == "approval_required"
    # The approver's own refusal, as it raised it: not "the approver failed (...)".
    assert error["details"]["reason"] == "cannot_ask"
    assert "the MCP client cannot be asked" in error["message"]
    assert "approver failed" not in error["message"]


def elicitor(answer: dict[str, Any] | None, seen: list[str]) -> Any:
    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params.message)
        if answer is None:
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content=answer)

    return callback


async def test_ask_approved_by_elicitation(connect: Any) -> None:
    seen: list[str] = []
    async with connect(elicitation_callback=elicitor({"approve": True}, seen)) as session:
        result = await session.call_tool("guarded", {"text": "go"})
    assert not result.is_error, result
    assert result.structured_content == {"echo": "go"}
    assert len(seen) == 1 and "guarded" in seen[0] and '"go"' in seen[0]


@pytest.mark.parametrize("answer", [None, {"approve": False}])
async def test_ask_refused_by_elicitation(connect: Any, answer: dict[str, Any] | None) -> None:
    seen: list[str] = []
    async with connect(elicitation_callback=elicitor(answer, seen)) as session:
        result = await session.call_tool("guarded", {"text": "go"})
    assert error_of(result)["type"] == "policy_denied"
    assert len(seen) == 1


async def test_ask_user_uses_elicitation(connect: Any) -> None:
    seen: list[str] = []
    async with connect(elicitation_callback=elicitor({"answer": "blue"}, seen)) as session:
        result = await session.call_tool("ask", {"question": "Which colour?"})
    assert result.structured_content == {"answer": "blue"}
    assert seen == ["Which colour?"]


async def test_ask_user_without_elicitation_fails_cleanly(connect: Any) -> None:
    async with connect() as session:
        result = await session.call_tool("ask", {"question": "Which colour?"})
    assert error_of(result)["type"] == "tool_error"


def _raw_exchange(workspace: Path, messages: list[dict[str, Any] | str], answers: int) -> list[str]:
    """Speak raw JSON-RPC lines to the fixture server; return its stdout lines."""
    import subprocess

    from tests.mcp.conftest import fixture_argv

    # Buffered as a host's stdout is by default: with PYTHONUNBUFFERED (our shells set it) a
    # tool's print() reached fd 1 at once, while it pointed at stderr, and hid that the
    # buffer was flushed at exit onto the protocol stream.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    proc = subprocess.Popen(
        fixture_argv(workspace),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        for message in messages:
            proc.stdin.write(message if isinstance(message, str) else json.dumps(message) + "\n")
        proc.stdin.flush()
        lines = [proc.stdout.readline() for _ in range(answers)]
        proc.stdin.close()
        lines += proc.stdout.readlines()  # anything else written before exit
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    return lines


async def test_stdout_carries_only_protocol(workspace: Path) -> None:
    """Every line on stdout is a JSON-RPC message, even when a tool prints or a child
    process writes to the inherited fd 1."""
    call = {"name": "noisy", "arguments": {}}
    messages = [
        INITIALIZE,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
    ]
    lines = await anyio.to_thread.run_sync(_raw_exchange, workspace, messages, 3)
    out = [json.loads(line) for line in lines if line.strip()]
    assert len(out) == len([line for line in lines if line.strip()])
    assert sorted(m["id"] for m in out) == [1, 2, 3]
    assert all(m["jsonrpc"] == "2.0" for m in out)
    by_id = {m["id"]: m for m in out}
    assert by_id[2]["result"]["structuredContent"] == {"noisy": True}


async def test_an_over_long_line_is_refused_unread(workspace: Path) -> None:
    """A line past the HTTP body cap (4 MiB) is answered with Invalid Request, under the id
    its first members show (tests/mcp/test_stdio_parse_errors.py: id null otherwise), and
    skipped; the next line is served. It was read whole (100 MB raised RSS by 300 MB)."""
    from runtime.mcp.transport import MAX_LINE

    messages: list[dict[str, Any] | str] = [
        INITIALIZE,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        '{"jsonrpc": "2.0", "id": 2, "method": "tools/list", "x": "' + "x" * MAX_LINE + '"}\n',
        {"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
    ]
    lines = await anyio.to_thread.run_sync(_raw_exchange, workspace, messages, 3)
    out = [json.loads(line) for line in lines if line.strip()]
    assert [m.get("id") for m in out] == [1, 2, 3]
    assert out[1]["error"]["code"] == -32600
    assert "longer than" in out[1]["error"]["message"]
    assert "tools" in out[2]["result"]


async def test_unanswered_approval_times_out(workspace: Path) -> None:

    from tests.mcp.conftest import fixture_argv, stdio_session

    async def never(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    argv = fixture_argv(workspace, "--ask-timeout", "0.5")
    async with stdio_session(argv, elicitation_callback=never) as session:
        result = await session.call_tool("guarded", {"text": "x"})
        after = await session.call_tool("echo", {"text": "still serving"})
    assert error_of(result)["type"] == "approval_required"
    assert after.structured_content == {"echo": "still serving"}
