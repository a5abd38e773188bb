from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.errors import InvalidArguments, InvalidCall
from runtime.shapes import CallLimits, normalize_call, parse_call_bytes


def test_native_shape_keeps_call_id() -> None:
    call = normalize_call({"tool": "read_file", "arguments": {"path": "a"}, "call_id": "c-1"})
    assert (call.tool, call.arguments, call.call_id) == ("read_file", {"path": "a"}, "c-1")
    assert call.context["shape"] == "native"


def test_openai_chat_arguments_are_a_json_string() -> None:
    call = normalize_call(
        {
            "id": "call_abc",
            "type": "function",
            "function": {"name": "read_file", "arguments": '{"path": "x.txt"}'},
        }
    )
    assert call.call_id == "call_abc"
    assert call.arguments == {"path": "x.txt"}
    assert call.context["shape"] == "openai"


def test_openai_broken_json_arguments_are_invalid_arguments() -> None:
    with pytest.raises(InvalidArguments) as info:
        normalize_call({"type": "function", "function": {"name": "t", "arguments": '{"a": '}})
    assert "not valid JSON" in info.value.message
    assert not isinstance(info.value, InvalidCall)


def test_openai_responses_function_call() -> None:
    call = normalize_call(
        {"type": "function_call", "call_id": "fc_1", "name": "t", "arguments": '{"x": 1}'}
    )
    assert (call.call_id, call.tool, call.arguments) == ("fc_1", "t", {"x": 1})


def test_anthropic_tool_use() -> None:
    call = normalize_call({"type": "tool_use", "id": "toolu_1", "name": "t", "input": {"x": 1}})
    assert (call.call_id, call.tool, call.arguments) == ("toolu_1", "t", {"x": 1})
    assert call.context["shape"] == "anthropic"


def test_mcp_shapes() -> None:
    call = normalize_call({"name": "t", "arguments": {"y": 2}})
    assert (call.tool, call.arguments, call.context["shape"]) == ("t", {"y": 2}, "mcp")
    req = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "t"}}
    assert normalize_call(req).tool == "t"


def test_generated_call_id_when_missing() -> None:
    a = normalize_call({"tool": "t"})
    b = normalize_call({"tool": "t"})
    assert a.call_id.startswith("call_") and a.call_id != b.call_id


@pytest.mark.parametrize(
    "obj",
    [[], "x", 3, {}, {"type": "tool_use"}, {"tool": ""}, {"tool": 3}, {"something": "else"}],
)
def test_unrecognised_shapes_are_invalid_call(obj: object) -> None:
    with pytest.raises(InvalidCall):
        normalize_call(obj)


def test_arguments_must_be_an_object() -> None:
    with pytest.raises(InvalidArguments, match="must be a JSON object"):
        normalize_call({"tool": "t", "arguments": [1, 2]})


def test_size_cap_checked_before_parsing() -> None:
    limits = CallLimits(max_bytes=100)
    with pytest.raises(InvalidCall, match="exceeds 100 bytes"):
        parse_call_bytes(b'{"tool": "t", "arguments": {"a": "' + b"x" * 200 + b'"}}', limits)


def test_depth_bomb_refused_without_recursion() -> None:
    bomb = '{"tool": "t", "arguments": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}"
    with pytest.raises(InvalidCall, match="nests deeper than 64"):
        parse_call_bytes(bomb)


def test_depth_in_openai_string_arguments() -> None:
    args = '{"a": ' + "[" * 70 + "]" * 70 + "}"
    with pytest.raises(InvalidArguments, match="deeper"):
        normalize_call({"type": "function", "function": {"name": "t", "arguments": args}})


def test_string_length_cap() -> None:
    with pytest.raises(InvalidArguments, match="exceeds 10"):
        normalize_call({"tool": "t", "arguments": {"s": "y" * 11}}, CallLimits(max_string=10))


def test_nan_and_infinity_rejected() -> None:
    with pytest.raises(InvalidCall):
        parse_call_bytes('{"tool": "t", "arguments": {"x": NaN}}')


def test_not_utf8() -> None:
    with pytest.raises(InvalidCall, match="UTF-8"):
        parse_call_bytes(b'{"tool": "\xff"}')


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(args=st.dictionaries(st.text(max_size=10), json_values, max_size=5))
def test_every_shape_gives_the_same_call(args: dict[str, object]) -> None:
    text = json.dumps(args)
    shapes = [
        {"tool": "t", "arguments": args},
        {"type": "function", "function": {"name": "t", "arguments": text}},
        {"type": "function_call", "name": "t", "arguments": text},
        {"type": "tool_use", "name": "t", "input": args},
        {"name": "t", "arguments": args},
    ]
    for shape in shapes:
        call = parse_call_bytes(json.dumps(shape))
        assert call.tool == "t"
        assert call.arguments == args


def test_call_body_cannot_set_its_own_context() -> None:
    """Profile, session and environment are the API caller's, not the (untrusted) call's."""
    call = normalize_call(
        {"tool": "t", "arguments": {}, "context": {"profile": "admin", "env": {"X": "1"}}}
    )
    assert call.context == {"shape": "native"}


# The path of a shape error quoted a key whole: a 300,000-character key made a
# 300,066-character message. Each key is cut to its first 64 characters, its length said.
@pytest.mark.parametrize("value", [2**70, {"a": float("nan")}, [[[[1]]]]])
def test_a_long_key_in_a_shape_error_is_cut(value: object) -> None:
    limits = CallLimits(max_depth=3)
    with pytest.raises(InvalidArguments) as info:
        normalize_call({"tool": "x", "arguments": {"K" * 300_000: value}}, limits)
    path = "$.arguments." + "K" * 64 + "… (300000 characters)"
    assert info.value.details["path"].startswith(path)
    assert len(info.value.message) < 300
