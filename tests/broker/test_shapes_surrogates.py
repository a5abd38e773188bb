r"""A lone UTF-16 surrogate escape (``"\udcff"``) is valid JSON text but not Unicode text: it
cannot be written to the audit log, a file name or a pipe. A call carrying one was
``internal_error`` (exit 70) from the audit log refusing the write-ahead record, and left no
audit record; it is ``invalid_arguments`` naming the JSON path, and the refusal is recorded.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from runtime.errors import InvalidArguments
from runtime.models import ToolCall
from runtime.shapes import normalize_call, parse_call_bytes

MakeBroker = Callable[..., Any]


@pytest.mark.parametrize(
    ("text", "path"),
    [
        (r'{"tool": "echo", "arguments": {"text": "a\udcffb"}}', "$.arguments.text"),
        (r'{"tool": "echo", "arguments": {"list": ["ok", "\uD800"]}}', "$.arguments.list[1]"),
        (r'{"tool": "echo", "arguments": {"\udcff": 1}}', "$.arguments"),
        (
            json.dumps(
                {
                    "type": "function",
                    "function": {"name": "echo", "arguments": r'{"text": "\udc80"}'},
                }
            ),
            "$.text",
        ),
    ],
)
def test_lone_surrogate_is_invalid_arguments(text: str, path: str) -> None:
    with pytest.raises(InvalidArguments, match="surrogate") as info:
        parse_call_bytes(text.encode())
    assert info.value.details["path"] == path


def test_surrogate_pairs_and_escaped_backslashes_are_fine() -> None:
    tc = parse_call_bytes(rb'{"tool": "echo", "arguments": {"a": "\ud83d\ude00", "b": "\\udcff"}}')
    assert tc.arguments == {"a": "\N{GRINNING FACE}", "b": "\\udcff"}


@pytest.mark.anyio
async def test_the_refusal_is_a_result_and_recorded(make_broker: MakeBroker) -> None:
    async with make_broker() as broker:
        result = await broker.call(
            rb'{"tool": "echo", "call_id": "c1", "arguments": {"text": "\udcff"}}'
        )
        assert result.error is not None and result.error.type == "invalid_arguments"
        records = broker.audit.tail(2)
    assert [(r.kind, r.call_id, r.tool) for r in records] == [
        ("request", "c1", "echo"),
        ("completion", "c1", "echo"),
    ]


@pytest.mark.anyio
async def test_a_refused_call_whose_own_id_is_not_text_is_recorded(
    make_broker: MakeBroker,
) -> None:
    # The refusal took the call's id from its text, lone surrogate and all: the audit log
    # could not write it ("audit log write failed"), and the result carried it too.
    async with make_broker() as broker:
        result = await broker.call(rb'{"tool": "echo", "call_id": "\udcff", "arguments": {}}')
        assert result.error is not None and result.error.type == "invalid_arguments"
        assert result.call_id.startswith("call_")
        records = broker.audit.tail(2)
    assert [(r.kind, r.call_id) for r in records] == [
        ("request", result.call_id),
        ("completion", result.call_id),
    ]


@pytest.mark.anyio
async def test_a_refused_call_whose_tool_name_is_not_text_is_recorded(
    make_broker: MakeBroker,
) -> None:
    async with make_broker() as broker:
        result = await broker.call(rb'{"tool": "e\udcff", "call_id": "c2", "arguments": {}}')
        assert result.error is not None and result.error.type == "invalid_arguments"
        records = broker.audit.tail(2)
    assert result.tool == "<invalid>"
    assert [(r.kind, r.call_id, r.tool) for r in records] == [
        ("request", "c2", "<invalid>"),
        ("completion", "c2", "<invalid>"),
    ]


# A call given to the Python API as a dict (or a ToolCall) never passes through JSON text:
# its strings can hold a lone surrogate as they are. Such a call went on through validation
# and policy and ended as internal_error ('audit: arguments are not JSON data') with no audit
# record; it is invalid_arguments naming the JSON path, like the same call as text.
_DICT_CALLS = [
    ({"tool": "echo", "arguments": {"text": "\ud800"}}, "$.arguments.text"),
    ({"tool": "echo", "arguments": {"text": "ok", "\udcff": "x"}}, "$.arguments"),
    ({"tool": "echo", "arguments": {"list": ["é", ["a\udfffb"]]}}, "$.arguments.list[1][0]"),
    ({"tool": "e\ud800", "arguments": {}}, "$.tool"),
    ({"tool": "echo", "call_id": "c\ud800", "arguments": {}}, "$.call_id"),
    (
        {
            "type": "function",
            "id": "o1",
            "function": {"name": "echo", "arguments": '{"text": "\ud800"}'},
        },
        "$.function.arguments",
    ),
    (
        {"type": "tool_use", "id": "a1", "name": "echo", "input": {"text": "😀\udc00"}},
        "$.input.text",
    ),
    ({"name": "echo", "arguments": {"text": "\ud83d\ude00"}}, "$.arguments.text"),  # two halves
]


@pytest.mark.parametrize(("call", "path"), _DICT_CALLS)
def test_lone_surrogate_in_a_dict_call_is_invalid_arguments(call: Any, path: str) -> None:
    with pytest.raises(InvalidArguments, match="surrogate") as info:
        normalize_call(call)
    assert info.value.details["path"] == path


def test_lone_surrogate_in_a_toolcall_is_invalid_arguments() -> None:
    for tc, path in [
        (ToolCall(call_id="c1", tool="echo", arguments={"text": "\ud800"}), "$.text"),
        (ToolCall(call_id="c\ud800", tool="echo", arguments={}), "$.call_id"),
        (ToolCall(call_id="c1", tool="e\udc00", arguments={}), "$.tool"),
    ]:
        with pytest.raises(InvalidArguments, match="surrogate") as info:
            normalize_call(tc)
        assert info.value.details["path"] == path


def test_a_str_call_with_a_raw_lone_surrogate_is_invalid_arguments() -> None:
    # Call text given as str may hold the surrogate itself rather than its \u escape.
    with pytest.raises(InvalidArguments, match="surrogate") as info:
        parse_call_bytes('{"tool": "echo", "arguments": {"text": "\ud800"}}')
    assert info.value.details["path"] == "$.arguments.text"


@pytest.mark.anyio
@pytest.mark.parametrize(("call", "path"), _DICT_CALLS)
async def test_a_dict_call_with_a_lone_surrogate_is_refused_and_recorded(
    make_broker: MakeBroker, call: Any, path: str
) -> None:
    async with make_broker() as broker:
        result = await broker.call(call)
        assert result.error is not None and result.error.type == "invalid_arguments"
        assert result.error.details["path"] == path
        records = broker.audit.tail(2)
        assert [(r.kind, r.call_id) for r in records] == [
            ("request", result.call_id),
            ("completion", result.call_id),
        ]
        assert records[1].error_type == "invalid_arguments"
        assert result.call_id.encode() and result.tool.encode()  # both are text
        # The broker lives on.
        ok = await broker.call({"tool": "echo", "arguments": {"text": "fine"}})
        assert ok.success, ok.error
