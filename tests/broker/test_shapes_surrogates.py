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
from runtime.shapes import parse_call_bytes

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
