"""The result is serialised once per call: the bytes the broker sizes are the bytes the
completion record digests, and they equal what the audit log computes on its own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from runtime.audit._canonical import canonical_json_ijson, sha256_hex
from runtime.backends.base import ExecRequest

pytestmark = pytest.mark.anyio


async def test_completion_digest_is_the_sized_bytes(make_broker: Callable[..., Any]) -> None:
    value = {"z": [1, 2.0, -0.0, 1e21, "é"], "a": {"big": 2**60}, "k": None}

    def handler(_req: ExecRequest) -> Any:
        return value

    async with make_broker(handler) as broker:
        seen: list[bytes] = []
        real = broker.audit.canonical_result

        def spy(result: Any) -> bytes:
            data: bytes = real(result)
            seen.append(data)
            return data

        broker.audit.canonical_result = spy
        r = await broker.call({"tool": "echo", "arguments": {"text": "hi"}})
        assert r.success and r.result == value
        done = broker.audit.tail(1)[0]
        assert broker.audit.verify().ok
    expected = canonical_json_ijson(value)
    assert seen == [expected]  # serialised once, by the size check
    assert done.result_digest == sha256_hex(expected)
    assert done.result_size == len(expected)


async def test_non_json_result_still_sized_and_refused(make_broker: Callable[..., Any]) -> None:
    def handler(_req: ExecRequest) -> Any:
        return {"when": object()}

    async with make_broker(handler) as broker:
        r = await broker.call({"tool": "echo", "arguments": {"text": "hi"}})
        assert broker.audit.verify().ok
        assert broker.audit.interrupted() == []  # its completion is recorded
    # Not JSON data: the tool's error, refused before the completion record (which could not
    # hold it: the call used to be left with no completion at all).
    assert not r.success and r.error is not None
    assert r.error.type == "tool_error" and r.error.details["reason"] == "result_not_json"


async def test_arguments_serialised_once_for_record_and_backend(
    make_broker: Callable[..., Any],
) -> None:
    """The write-ahead record's digest and the request's ``arguments_json`` come from one
    serialisation: the canonical text the backend may reuse is the digested text."""
    seen: list[ExecRequest] = []

    def handler(req: ExecRequest) -> Any:
        seen.append(req)
        return {"ok": True}

    async with make_broker(handler) as broker:
        r = await broker.call({"tool": "echo", "arguments": {"text": 'hi é " \n'}})
        request_record = broker.audit.tail(2)[0]
        assert broker.audit.verify().ok
    assert r.success and len(seen) == 1
    expected = canonical_json_ijson({"text": 'hi é " \n'})
    assert seen[0].arguments_json == expected
    assert request_record.kind == "request"
    assert request_record.arguments_digest == sha256_hex(expected)
