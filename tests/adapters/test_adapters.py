from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from runtime.adapters import (
    anthropic_tool_result,
    detect_format,
    extract_tool_calls,
    openai_chat_tool_message,
    openai_responses_output,
    result_content,
    run_assistant_message,
)
from runtime.errors import ErrorType, InvalidCall
from runtime.models import ErrorInfo, ToolResult


def make_result(success: bool = True) -> ToolResult:
    now = datetime.now(UTC)
    return ToolResult(
        call_id="call_1",
        tool="echo",
        success=success,
        result={"echo": "hi"} if success else None,
        error=None
        if success
        else ErrorInfo(type=ErrorType.POLICY_DENIED, message="no", details={"rule": "r"}),
        started_at=now,
        completed_at=now,
        duration_ms=1.0,
    )


def test_openai_chat() -> None:
    msg = openai_chat_tool_message(make_result())
    assert msg == {"role": "tool", "tool_call_id": "call_1", "content": '{"echo": "hi"}'}
    assert openai_chat_tool_message(make_result(), "x")["tool_call_id"] == "x"


def test_openai_responses() -> None:
    out = openai_responses_output(make_result(False))
    assert out["type"] == "function_call_output" and out["call_id"] == "call_1"
    assert json.loads(out["output"]) == {"error": {"type": "policy_denied", "message": "no"}}


def test_anthropic() -> None:
    ok = anthropic_tool_result(make_result())
    assert ok == {
        "type": "tool_result",
        "tool_use_id": "call_1",
        "content": '{"echo": "hi"}',
        "is_error": False,
    }
    bad = anthropic_tool_result(make_result(False))
    assert bad["is_error"] is True
    assert json.loads(bad["content"])["error"]["type"] == "policy_denied"


def test_result_content_non_object() -> None:
    result = make_result()
    result.result = [1, "two"]
    assert json.loads(result_content(result)) == [1, "two"]


OPENAI = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "a",
            "type": "function",
            "function": {"name": "echo", "arguments": '{"text": "1", "delay": 30}'},
        },
        {"id": "b", "type": "function", "function": {"name": "fail", "arguments": "{}"}},
        {"id": "c", "type": "function", "function": {"name": "forbidden", "arguments": "{}"}},
        {"id": "d", "type": "function", "function": {"name": "echo", "arguments": '{"text": '}},
        {"id": "e", "type": "function", "function": {"name": "nope", "arguments": "{}"}},
        {"id": "f", "type": "function", "function": {"name": "echo", "arguments": '{"text": "6"}'}},
    ],
}
RESPONSES = [
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {
        "type": "function_call",
        "call_id": "fc_a",
        "name": "echo",
        "arguments": '{"text": "1", "delay": 30}',
    },
    {"type": "message", "role": "assistant", "content": []},
    {"type": "function_call", "call_id": "fc_b", "name": "echo", "arguments": '{"text": "2"}'},
]
ANTHROPIC = {
    "role": "assistant",
    "content": [
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_a", "name": "echo", "input": {"text": "1", "delay": 30}},
        {"type": "tool_use", "id": "toolu_b", "name": "forbidden", "input": {}},
        {"type": "tool_use", "id": "toolu_c", "name": "echo", "input": {"text": "3"}},
    ],
}


def test_detect_and_extract() -> None:
    assert detect_format(OPENAI) == "openai"
    assert detect_format(RESPONSES) == "openai-responses"
    assert detect_format({"output": RESPONSES}) == "openai-responses"
    assert detect_format(ANTHROPIC) == "anthropic"
    assert [c["call_id"] for c in extract_tool_calls(RESPONSES)[1]] == ["fc_a", "fc_b"]
    assert [c["id"] for c in extract_tool_calls(ANTHROPIC)[1]] == ["toolu_a", "toolu_b", "toolu_c"]
    assert extract_tool_calls({"role": "assistant", "content": "just text"}) == ("openai", [])
    with pytest.raises(InvalidCall):
        detect_format(42)


@pytest.mark.anyio
async def test_run_openai_message_in_order(broker: Any, gate: Any) -> None:
    gate.expected = 2  # the two valid echo calls must be in flight together
    out = await run_assistant_message(broker, OPENAI)
    assert [m["tool_call_id"] for m in out] == ["a", "b", "c", "d", "e", "f"]
    assert all(m["role"] == "tool" for m in out)
    content = [json.loads(m["content"]) for m in out]
    assert content[0] == {"echo": "1"}
    assert content[1]["error"]["type"] == "tool_error"
    assert content[2]["error"]["type"] == "policy_denied"
    assert content[3]["error"]["type"] == "invalid_arguments"
    assert content[4]["error"]["type"] == "tool_not_found"
    assert content[5] == {"echo": "6"}
    assert gate.peak >= 2  # ran concurrently
    assert gate.order == ["6", "1"]  # finished out of order, returned in order


@pytest.mark.anyio
async def test_run_responses_output(broker: Any, gate: Any) -> None:
    gate.expected = 2
    out = await run_assistant_message(broker, {"output": RESPONSES})
    assert [o["call_id"] for o in out] == ["fc_a", "fc_b"]
    assert all(o["type"] == "function_call_output" for o in out)
    assert [json.loads(o["output"]) for o in out] == [{"echo": "1"}, {"echo": "2"}]
    assert gate.order == ["2", "1"]


@pytest.mark.anyio
async def test_run_anthropic_message(broker: Any, gate: Any) -> None:
    gate.expected = 2
    out = await run_assistant_message(broker, ANTHROPIC)
    assert [b["tool_use_id"] for b in out] == ["toolu_a", "toolu_b", "toolu_c"]
    assert [b["is_error"] for b in out] == [False, True, False]
    assert json.loads(out[1]["content"])["error"]["type"] == "policy_denied"


@pytest.mark.anyio
async def test_run_respects_limiter(broker: Any, gate: Any) -> None:
    broker_limit = broker.policy.max_concurrent
    calls = [
        {"type": "tool_use", "id": f"t{i}", "name": "echo", "input": {"text": str(i)}}
        for i in range(broker_limit * 2)
    ]
    gate.expected = broker_limit
    out = await run_assistant_message(broker, {"role": "assistant", "content": calls})
    assert len(out) == broker_limit * 2
    assert gate.peak == broker_limit  # never more than the limiter allows


@pytest.mark.anyio
async def test_no_tool_calls(broker: Any) -> None:
    assert await run_assistant_message(broker, {"role": "assistant", "content": "done"}) == []
