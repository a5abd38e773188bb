"""A call refused before it is normalised still answers to the provider's call id and tool.

An agent loop posts the result back under the call's id (OpenAI ``tool_call_id``, Anthropic
``tool_use_id``); a result under a fresh id cannot be matched to its call. The CLI and the
raw-text API hand the broker bytes, so the id must be found in the text, not only in a dict.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

pytestmark = pytest.mark.anyio

MakeBroker = Callable[..., Any]

BROKEN = '{"path": "a'  # an LLM's truncated arguments string

CALLS = [
    {"id": "call_abc", "type": "function", "function": {"name": "echo", "arguments": BROKEN}},
    {"type": "function_call", "call_id": "call_abc", "name": "echo", "arguments": BROKEN},
    {"type": "tool_use", "id": "call_abc", "name": "echo", "input": BROKEN},
    {"tool": "echo", "call_id": "call_abc", "arguments": BROKEN},
]


@pytest.mark.parametrize("as_text", [False, True], ids=["object", "text"])
@pytest.mark.parametrize("call", CALLS, ids=["openai", "responses", "anthropic", "native"])
async def test_broken_arguments_keep_call_id_and_tool(
    make_broker: MakeBroker, call: dict[str, Any], as_text: bool
) -> None:
    raw: Any = json.dumps(call) if as_text else call
    async with make_broker() as broker:
        result = await broker.call(raw.encode() if as_text else raw)
        assert result.error is not None and result.error.type == "invalid_arguments"
        assert result.call_id == "call_abc"
        assert result.tool == "echo"
        # the audit log files the refusal under the same id
        assert {r.call_id for r in broker.audit.tail(2)} == {"call_abc"}


async def test_text_that_is_not_a_call_gets_a_fresh_id(make_broker: MakeBroker) -> None:
    async with make_broker() as broker:
        result = await broker.call(b'{"id": "x", "tool": ')
    assert result.error is not None and result.error.type == "invalid_arguments"
    assert result.call_id.startswith("call_") and result.tool == "<invalid>"


async def test_a_secret_looking_unknown_tool_name_is_redacted_in_the_log(
    make_broker: MakeBroker,
) -> None:
    """tool_not_found records the name the caller sent: a token pasted there was stored raw
    in the tool column."""
    name = "sk-live-abcdefghijklmnopqrstuv0123"
    async with make_broker() as broker:
        result = await broker.call({"tool": name, "arguments": {}, "call_id": "c1"})
        assert result.error is not None and result.error.type == "tool_not_found"
        records = broker.audit.tail(5)
        assert records and {r.tool for r in records} == {"[REDACTED]"}
        assert broker.audit.verify().ok
        db = (
            broker.audit.path.read_bytes()
            + broker.audit.path.with_name("audit.db-wal").read_bytes()
        )
        assert b"abcdefghijklmnopqrstuv0123" not in db
