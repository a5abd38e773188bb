"""The call depth cap is one rule in every call shape: at most ``CallLimits.max_depth`` levels
of arrays and objects, counted from the arguments object (level 1), scalars not a level.

It depended on the shape: the whole call was walked, so a native or Anthropic envelope
counted as a level where a ToolCall's or OpenAI's decoded arguments did not; a scalar leaf
counted as a level; and the text pre-check of ``runtime exec``'s bytes counted the envelope's
brackets. ``data`` of 63 nested arrays (what the json tools' manifests promise) was refused
as bytes and accepted as a dict; 63 arrays around a scalar were refused as a dict and
accepted from OpenAI."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runtime.errors import InvalidArguments, InvalidCall
from runtime.models import ToolCall
from runtime.shapes import DEFAULT_LIMITS, CallLimits, normalize_call, parse_call_bytes

MAX = DEFAULT_LIMITS.max_depth


def _nest(arrays: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(arrays):
        value = [value]
    return value


def _shapes(args: dict[str, Any]) -> dict[str, Any]:
    text = json.dumps(args)
    return {
        "native dict": lambda: normalize_call({"tool": "t", "arguments": args}),
        "native bytes": lambda: parse_call_bytes(
            json.dumps({"tool": "t", "arguments": args}).encode()
        ),
        "anthropic": lambda: normalize_call(
            {"type": "tool_use", "id": "x", "name": "t", "input": args}
        ),
        "anthropic bytes": lambda: parse_call_bytes(
            json.dumps({"type": "tool_use", "id": "x", "name": "t", "input": args})
        ),
        "openai": lambda: normalize_call(
            {"type": "function", "function": {"name": "t", "arguments": text}}
        ),
        "openai object arguments": lambda: normalize_call(
            {"type": "function", "function": {"name": "t", "arguments": args}}
        ),
        "responses": lambda: normalize_call(
            {"type": "function_call", "name": "t", "arguments": text}
        ),
        "mcp request bytes": lambda: parse_call_bytes(
            json.dumps(
                {"method": "tools/call", "params": {"name": "t", "arguments": args}, "id": "1"}
            )
        ),
        "mcp": lambda: normalize_call({"name": "t", "arguments": args}),
        "ToolCall": lambda: normalize_call(ToolCall(tool="t", arguments=args)),
    }


_WITHIN = {
    f"{MAX - 1} arrays, innermost empty": _nest(MAX - 2, []),
    f"{MAX - 1} arrays around a scalar": _nest(MAX - 1, 1),
    f"{MAX - 1} levels, an object innermost": _nest(MAX - 2, {"k": "v"}),
}
_BEYOND = {
    f"{MAX} arrays, innermost empty": _nest(MAX - 1, []),
    f"{MAX} arrays around a scalar": _nest(MAX, "s"),
}


@pytest.mark.parametrize("data", list(_WITHIN.values()), ids=list(_WITHIN))
@pytest.mark.parametrize("shape", list(_shapes({})))
def test_data_within_the_limit_is_accepted_in_every_shape(shape: str, data: Any) -> None:
    call = _shapes({"data": data})[shape]()
    assert call.arguments == {"data": data}


@pytest.mark.parametrize("data", list(_BEYOND.values()), ids=list(_BEYOND))
@pytest.mark.parametrize("shape", list(_shapes({})))
def test_data_past_the_limit_is_refused_in_every_shape(shape: str, data: Any) -> None:
    with pytest.raises(InvalidArguments) as info:
        _shapes({"data": data})[shape]()
    assert info.value.details["rule"] == "max_depth"
    assert f"deeper than {MAX} levels of arrays and objects" in info.value.message
    assert "the arguments object is level 1" in info.value.message


def test_the_refusal_names_the_first_array_too_deep() -> None:
    with pytest.raises(InvalidArguments) as info:
        normalize_call({"tool": "t", "arguments": {"data": _nest(MAX, 1)}})
    # The arguments object is level 1, data's arrays 2..: the one at level MAX + 1.
    assert info.value.details["path"] == "$.arguments.data" + "[0]" * (MAX - 1)


def test_a_small_cap_counts_the_same_way() -> None:
    limits = CallLimits(max_depth=2)
    assert normalize_call({"tool": "t", "arguments": {"a": [1]}}, limits)
    assert parse_call_bytes('{"tool": "t", "arguments": {"a": [1]}}', limits)
    assert normalize_call(ToolCall(tool="t", arguments={"a": {"b": 1}}), limits)
    for call in (
        {"tool": "t", "arguments": {"a": [[]]}},
        ToolCall(tool="t", arguments={"a": [[]]}),
    ):
        with pytest.raises(InvalidArguments, match="deeper than 2 levels"):
            normalize_call(call, limits)


def test_a_deep_text_is_still_refused_before_parsing() -> None:
    # Past the deepest envelope (MCP's params.arguments) the text is refused unparsed, as
    # invalid_call: a 100,000-deep text never reaches the parser's recursion.
    for n in (MAX + 3, 100_000):
        bomb = '{"tool": "t", "arguments": {"a": ' + "[" * n + "]" * n + "}}"
        with pytest.raises(InvalidCall, match=f"nests deeper than {MAX} levels") as info:
            parse_call_bytes(bomb)
        assert info.value.details["rule"] == "max_depth"
