"""A tool's result that is not JSON data (a lone surrogate, NaN, bytes, a key that is not a
string, an integer past CPython's 4300 digits) is the tool's error, recorded like any other.
Before, the audit log refused it at the completion record: the call came back as an
internal error with its completion never written (the log listed it as interrupted), or the
sizing of the result raised out of the broker."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    "value",
    [10**5000, "\ud800", float("nan"), b"x", {1: 2}],
    ids=["huge-int", "lone-surrogate", "nan", "bytes", "int-key"],
)
async def test_a_result_that_is_not_json_is_a_recorded_tool_error(
    make_broker: Callable[..., Any], value: Any
) -> None:
    def handler(request: Any) -> dict[str, Any]:
        return {"value": value}

    async with make_broker(handler) as broker:
        result = await broker.call({"tool": "echo", "arguments": {"text": "hi"}})
        again = await broker.call({"tool": "echo", "arguments": {"text": "again"}})
        assert again.success is False  # the broker lives on, and refuses it again
        assert broker.audit.verify().ok and broker.audit.interrupted() == []
        records = [(r.kind, r.outcome, r.error_type) for r in broker.audit.tail(4)][:2]
    assert result.success is False and result.error is not None
    assert result.error.type == "tool_error"
    assert result.error.details["reason"] == "result_not_json"
    assert records == [("request", None, None), ("completion", "error", "tool_error")]
