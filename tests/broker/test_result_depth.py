"""A result nested deeper than every serialiser on its way out can carry is refused where
every backend's result enters the broker (``_check_result``), as ``output_too_large``, and
recorded as such.

Before, a 500-level ``json_parse`` result was recorded as a success, then crashed
``runtime exec`` (pydantic's serialiser stops at 255 levels: traceback, exit 1, nothing on
stdout) and came back from the MCP server as a JSON-RPC error with code 0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from runtime._depth import RESULT_MAX_DEPTH, nests_deeper

pytestmark = pytest.mark.anyio


def _nested(levels: int) -> Any:
    """``levels`` lists one inside the other: ``[[...]]``."""
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    return value


def test_nesting_is_counted_in_levels_of_arrays_and_objects() -> None:
    assert not nests_deeper("x" * 10, 0)
    assert not nests_deeper([], 1) and nests_deeper([], 0)
    assert not nests_deeper({"a": [1, {"b": 2}]}, 3) and nests_deeper({"a": [1, {"b": {}}]}, 3)
    assert not nests_deeper(_nested(128), 128) and nests_deeper(_nested(129), 128)
    assert nests_deeper(_nested(100_000), 128)  # a loop, not recursion


async def test_a_result_at_the_limit_is_returned_whole(make_broker: Callable[..., Any]) -> None:
    value = _nested(RESULT_MAX_DEPTH - 1)  # {"value": ...} is one level more

    async with make_broker(lambda request: {"value": value}) as broker:
        result = await broker.call({"tool": "echo", "arguments": {"text": "hi"}})
    assert result.success, result.error
    assert result.to_json_dict()["result"] == {"value": value}


@pytest.mark.parametrize("levels", [RESULT_MAX_DEPTH, 300, 500, 5_000])
async def test_a_deeper_result_is_a_recorded_output_too_large(
    make_broker: Callable[..., Any], levels: int
) -> None:
    value = _nested(levels)  # with {"value": ...}, one level past the limit at least

    async with make_broker(lambda request: {"value": value}) as broker:
        result = await broker.call({"tool": "echo", "arguments": {"text": "hi"}})
        again = await broker.call({"tool": "echo", "arguments": {"text": "again"}})
        assert again.success is False  # the broker lives on, and refuses it again
        assert broker.audit.verify().ok and broker.audit.interrupted() == []
        records = [(r.kind, r.outcome, r.error_type) for r in broker.audit.tail(4)][:2]
    assert result.success is False and result.error is not None
    assert result.error.type == "output_too_large"
    assert f"deeper than {RESULT_MAX_DEPTH} levels" in result.error.message
    assert result.error.details == {"reason": "result_too_deep", "max_depth": RESULT_MAX_DEPTH}
    assert records == [("request", None, None), ("completion", "error", "output_too_large")]
    result.to_json_dict()  # what the CLI and the MCP server write: no error


async def test_many_shallow_containers_are_not_too_deep(make_broker: Callable[..., Any]) -> None:
    # More brackets than the limit, nested two levels: the walk, not the count, decides.
    value = [{"a": [i]} for i in range(5_000)]

    async with make_broker(lambda request: {"value": value}) as broker:
        result = await broker.call({"tool": "echo", "arguments": {"text": "hi"}})
    assert result.success, result.error
