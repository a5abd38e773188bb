"""The 2026-07-28 protocol era (``mcp.Client``'s default): approvals as multi-round-trip
``InputRequiredResult``s whose sealed state is bound to the exact call."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from tests.mcp.conftest import HttpServer, child_env, fixture_argv

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["stdio", "http"])
def target(request: pytest.FixtureRequest, workspace: Path) -> Iterator[Any]:
    argv = fixture_argv(workspace)
    if request.param == "stdio":
        yield StdioServerParameters(command=argv[0], args=argv[1:], env=child_env())
        return
    server: HttpServer = request.getfixturevalue("shared_http_server")
    yield server.url


@asynccontextmanager
async def client(target: Any, **kw: Any) -> AsyncIterator[Client]:
    async with Client(target, **kw) as c:
        assert c.session.protocol_version == "2026-07-28"
        yield c


def approver(answer: dict[str, Any] | None, seen: list[str]) -> Any:
    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params.message)
        if answer is None:
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content=answer)

    return callback


async def test_list_and_call(target: Any) -> None:
    async with client(target) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        ok = await c.call_tool("echo", {"text": "hi"})
        bad = await c.call_tool("echo", {"text": 1})
        with pytest.raises(MCPError) as info:
            await c.call_tool("hidden", {})
    assert "echo" in names and "hidden" not in names
    assert ok.structured_content == {"echo": "hi"}
    assert bad.is_error and bad.structured_content is not None
    assert bad.structured_content["error"]["type"] == "invalid_arguments"
    assert info.value.code == types.INVALID_PARAMS


async def test_approval_round_trip(target: Any) -> None:
    seen: list[str] = []
    async with client(target, elicitation_callback=approver({"approve": True}, seen)) as c:
        result = await c.call_tool("guarded", {"text": "go"})
    assert not result.is_error
    assert result.structured_content == {"echo": "go"}
    assert len(seen) == 1 and '"go"' in seen[0]


async def test_the_first_leg_of_an_approval_logs_no_approver_failure(
    workspace: Path, tmp_path: Path
) -> None:
    """The first leg's "waiting for the client's approval" is the approver's answer, not its
    failure: every approval round logged "approver raised for guarded" and a traceback."""
    argv = fixture_argv(workspace)
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=child_env())
    errlog = tmp_path / "server.err"
    with errlog.open("w") as err:
        transport = stdio_client(params, errlog=err)
        async with client(transport, elicitation_callback=approver({"approve": True}, [])) as c:
            result = await c.call_tool("guarded", {"text": "go"})
    assert result.structured_content == {"echo": "go"}
    assert "approver raised" not in errlog.read_text()


async def test_approval_declined(target: Any) -> None:
    seen: list[str] = []
    async with client(target, elicitation_callback=approver(None, seen)) as c:
        result = await c.call_tool("guarded", {"text": "go"})
    assert result.is_error and result.structured_content is not None
    assert result.structured_content["error"]["type"] == "policy_denied"


async def test_without_elicitation_is_approval_required(target: Any) -> None:
    async with client(target) as c:
        result = await c.call_tool("guarded", {"text": "go"})
    assert result.is_error and result.structured_content is not None
    assert result.structured_content["error"]["type"] == "approval_required"
    assert result.structured_content["error"]["details"]["reason"] == "cannot_ask"


APPROVED = {"approve": types.ElicitResult(action="accept", content={"approve": True})}


async def test_forged_state_is_rejected(target: Any) -> None:
    seen: list[str] = []
    async with client(target, elicitation_callback=approver({"approve": True}, seen)) as c:
        with pytest.raises(MCPError) as info:
            await c.session.call_tool(
                "guarded",
                {"text": "go"},
                input_responses=APPROVED,  # type: ignore[arg-type]
                request_state="runtime-approval:v1",  # the plaintext, unsealed
                allow_input_required=True,
            )
    assert info.value.code == types.INVALID_PARAMS
    assert seen == []


async def test_state_cannot_move_to_other_arguments(target: Any) -> None:
    seen: list[str] = []
    async with client(target, elicitation_callback=approver({"approve": True}, seen)) as c:
        first = await c.session.call_tool(
            "guarded", {"text": "harmless"}, allow_input_required=True
        )
        assert isinstance(first, types.InputRequiredResult)
        assert first.request_state
        with pytest.raises(MCPError) as info:
            await c.session.call_tool(
                "guarded",
                {"text": "something else"},
                input_responses=APPROVED,  # type: ignore[arg-type]
                request_state=first.request_state,
                allow_input_required=True,
            )
        same = await c.session.call_tool(
            "guarded",
            {"text": "harmless"},
            input_responses=APPROVED,  # type: ignore[arg-type]
            request_state=first.request_state,
            allow_input_required=True,
        )
    assert info.value.code == types.INVALID_PARAMS
    assert isinstance(same, types.CallToolResult)
    assert same.structured_content == {"echo": "harmless"}


async def test_ask_user_round_trip(target: Any) -> None:
    seen: list[str] = []
    async with client(target, elicitation_callback=approver({"answer": "blue"}, seen)) as c:
        result = await c.call_tool("ask", {"question": "Which colour?"})
    assert result.structured_content == {"answer": "blue"}
    assert seen == ["Which colour?"]


async def test_ask_user_declined(target: Any) -> None:
    seen: list[str] = []
    async with client(target, elicitation_callback=approver(None, seen)) as c:
        result = await c.call_tool("ask", {"question": "Which colour?"})
    assert result.is_error and result.structured_content is not None
    assert result.structured_content["error"]["type"] == "tool_error"


async def test_an_answer_is_good_for_one_run(target: Any) -> None:
    seen: list[str] = []
    async with client(target, elicitation_callback=approver({"approve": True}, seen)) as c:
        first = await c.session.call_tool("guarded", {"text": "once"}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        kwargs: dict[str, Any] = {
            "input_responses": APPROVED,
            "request_state": first.request_state,
            "allow_input_required": True,
        }
        ran = await c.session.call_tool("guarded", {"text": "once"}, **kwargs)
        replay = await c.session.call_tool("guarded", {"text": "once"}, **kwargs)
    assert isinstance(ran, types.CallToolResult) and ran.structured_content == {"echo": "once"}
    assert isinstance(replay, types.InputRequiredResult)  # asked again, not run again


@pytest.fixture(params=["stdio", "http"])
def gated_target(request: pytest.FixtureRequest, workspace: Path) -> Iterator[Any]:
    """The fixture server with its ``ask`` tool (which asks the user) gated by ``ask``."""
    argv = fixture_argv(workspace)
    argv += ["--action", "ask=ask"]
    if request.param == "stdio":
        yield StdioServerParameters(command=argv[0], args=argv[1:], env=child_env())
        return
    server = HttpServer([*argv, "--http", "127.0.0.1:0"])
    yield server.url
    server.close()


async def test_an_approved_tool_that_asks_completes(gated_target: Any) -> None:
    # Two answers, one per round: the approval, then the tool's question. The round that
    # answered the question carried no approval and asked for it again, for ever.
    seen: list[str] = []

    async def both(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params.message)
        schema = params.requested_schema if hasattr(params, "requested_schema") else {}
        if "approve" in schema.get("properties", {}):
            return types.ElicitResult(action="accept", content={"approve": True})
        return types.ElicitResult(action="accept", content={"answer": "red"})

    async with client(gated_target, elicitation_callback=both) as c:
        result = await c.call_tool("ask", {"question": "Which colour?"})
    assert result.structured_content == {"answer": "red"}, result
    assert len(seen) == 2 and seen[1] == "Which colour?"


async def test_a_granted_approval_is_good_for_one_run(gated_target: Any) -> None:
    unused: list[str] = []  # the rounds are driven by hand; the callback declares the capability
    async with client(gated_target, elicitation_callback=approver(None, unused)) as c:
        first = await c.session.call_tool("ask", {"question": "Q?"}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        second = await c.session.call_tool(
            "ask",
            {"question": "Q?"},
            input_responses=APPROVED,  # type: ignore[arg-type]
            request_state=first.request_state,
            allow_input_required=True,
        )
        assert isinstance(second, types.InputRequiredResult)
        assert second.input_requests is not None and list(second.input_requests) == ["answer"]
        answered = {"answer": types.ElicitResult(action="accept", content={"answer": "blue"})}
        kwargs: dict[str, Any] = {
            "input_responses": answered,
            "request_state": second.request_state,
            "allow_input_required": True,
        }
        ran = await c.session.call_tool("ask", {"question": "Q?"}, **kwargs)
        replay = await c.session.call_tool("ask", {"question": "Q?"}, **kwargs)
        with pytest.raises(MCPError):  # the grant is bound to the arguments
            await c.session.call_tool("ask", {"question": "Other?"}, **kwargs)
    assert isinstance(ran, types.CallToolResult) and ran.structured_content == {"answer": "blue"}
    assert isinstance(replay, types.InputRequiredResult)  # asked again, not run again
    assert replay.input_requests is not None and list(replay.input_requests) == ["approve"]
