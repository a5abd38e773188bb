"""Provider adapters: results back into each provider's message format, and whole assistant
messages run in one go.

Definitions in each format come from the catalogue (``broker.catalogue.export(fmt)``); this
module is the reverse direction::

    ToolResult → OpenAI chat        {"role": "tool", "tool_call_id", "content"}
               → OpenAI Responses   {"type": "function_call_output", "call_id", "output"}
               → Anthropic          {"type": "tool_result", "tool_use_id", "content", "is_error"}

The content the model reads is JSON text: the result on success, ``{"error": {type, message}}``
on failure, so the model can tell a denial from a bug and recover. The provider's call id is
echoed unchanged (the broker keeps the id of every accepted shape).

:func:`run_assistant_message` takes a whole assistant turn — an OpenAI chat message with
``tool_calls``, a Responses ``output`` list with ``function_call`` items, or an Anthropic message
whose ``content`` holds ``tool_use`` blocks — runs every call concurrently (the broker's limiter
bounds how many run at once) and returns the result messages in the calls' order. A bad call
never breaks the turn: it becomes an error result like any other.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import anyio

from runtime.errors import InvalidCall
from runtime.models import ToolResult

if TYPE_CHECKING:
    from runtime.broker import Broker

__all__ = [
    "MessageFormat",
    "anthropic_tool_result",
    "detect_format",
    "extract_tool_calls",
    "openai_chat_tool_message",
    "openai_responses_output",
    "result_content",
    "run_assistant_message",
]

MessageFormat = Literal["openai", "openai-responses", "anthropic"]


def result_content(result: ToolResult) -> str:
    """What the model reads: the result's JSON, or ``{"error": {type, message}}``."""
    if result.success:
        return json.dumps(result.result, ensure_ascii=False, default=str)
    assert result.error is not None
    error: dict[str, Any] = {"type": str(result.error.type), "message": result.error.message}
    return json.dumps({"error": error}, ensure_ascii=False)


def openai_chat_tool_message(result: ToolResult, call_id: str | None = None) -> dict[str, Any]:
    return {
        "role": "tool",
        "tool_call_id": call_id or result.call_id,
        "content": result_content(result),
    }


def openai_responses_output(result: ToolResult, call_id: str | None = None) -> dict[str, Any]:
    return {
        "type": "function_call_output",
        "call_id": call_id or result.call_id,
        "output": result_content(result),
    }


def anthropic_tool_result(result: ToolResult, call_id: str | None = None) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "tool_use_id": call_id or result.call_id,
        "content": result_content(result),
        "is_error": not result.success,
    }


_FORMATTERS = {
    "openai": openai_chat_tool_message,
    "openai-responses": openai_responses_output,
    "anthropic": anthropic_tool_result,
}


def detect_format(message: Any) -> MessageFormat:
    """Which provider shape an assistant message (or Responses output list) has."""
    if isinstance(message, Sequence) and not isinstance(message, (str, bytes)):
        return "openai-responses"
    if isinstance(message, Mapping):
        if "tool_calls" in message or (
            message.get("role") == "assistant"
            and isinstance(message.get("content"), (str, type(None)))
        ):
            return "openai"
        if isinstance(message.get("output"), list):
            return "openai-responses"
        if isinstance(message.get("content"), list):
            return "anthropic"
    raise InvalidCall("not an assistant message of a known provider shape")


def extract_tool_calls(message: Any) -> tuple[MessageFormat, list[dict[str, Any]]]:
    """The tool calls of an assistant message, each in its provider's own call shape."""
    fmt = detect_format(message)
    items: Any
    if fmt == "openai":
        items, wanted = message.get("tool_calls"), None
    elif fmt == "openai-responses":
        items = message.get("output") if isinstance(message, Mapping) else message
        wanted = "function_call"
    else:
        items, wanted = message.get("content"), "tool_use"
    calls: list[dict[str, Any]] = []
    for item in items or []:
        if isinstance(item, Mapping) and (wanted is None or item.get("type") == wanted):
            calls.append(dict(item))
    return fmt, calls


def _provider_id(call: Mapping[str, Any], fmt: MessageFormat) -> str | None:
    key = "call_id" if fmt == "openai-responses" else "id"
    value = call.get(key)
    return value if isinstance(value, str) and value else None


async def run_assistant_message(
    broker: Broker,
    message: Any,
    *,
    session: str | None = None,
    profile: str | None = None,
) -> list[dict[str, Any]]:
    """Run every tool call of ``message`` concurrently; result messages in call order."""
    fmt, calls = extract_tool_calls(message)
    results: list[ToolResult | None] = [None] * len(calls)

    async def run_one(index: int, call: dict[str, Any]) -> None:
        results[index] = await broker.call(call, session=session, profile=profile)

    async with anyio.create_task_group() as tg:
        for index, call in enumerate(calls):
            tg.start_soon(run_one, index, call)
    formatter = _FORMATTERS[fmt]
    out: list[dict[str, Any]] = []
    for call, result in zip(calls, results, strict=True):
        assert result is not None
        # Echo the provider's id even when the broker had to mint its own (a malformed call).
        out.append(formatter(result, _provider_id(call, fmt)))
    return out
