"""The broker's unvalidated model builders equal what pydantic validation would build."""

from __future__ import annotations

import datetime as dt
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings
from pydantic import ValidationError

from runtime.broker import _fast
from runtime.models import ErrorInfo, ToolResult, Usage


def _kw(**over: object) -> dict[str, object]:
    now = dt.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=dt.UTC)
    kw: dict[str, object] = {
        "call_id": "c-1",
        "tool": "echo",
        "success": True,
        "result": {"ok": True, "n": [1, 2.5, None]},
        "error": None,
        "started_at": now,
        "completed_at": now + dt.timedelta(milliseconds=3),
        "duration_ms": 3.25,
        "backend": "mock",
        "usage": Usage.model_validate({"cpu_ms": 1.5, "custom": 7}),
        "decision": {"action": "allow", "rule": "tools.echo"},
    }
    kw.update(over)
    return kw


def test_tool_result_equals_validated() -> None:
    for kw in (
        _kw(),
        _kw(success=False, result=None, error=ErrorInfo(type="tool_error", message="boom")),
        _kw(backend=None, decision=None, duration_ms=2),
    ):
        fast = _fast.tool_result(**kw)  # type: ignore[arg-type]
        slow = ToolResult(**kw)  # type: ignore[arg-type]
        assert fast == slow
        assert fast.model_fields_set == slow.model_fields_set
        assert fast.model_dump(mode="json") == slow.model_dump(mode="json")
        assert fast.model_dump_json() == slow.model_dump_json()
        assert isinstance(fast.duration_ms, float)


def test_empty_usage_equals_validated() -> None:
    fast = _fast.usage({})
    slow = Usage.model_validate({})
    assert fast == slow
    assert fast.model_dump() == slow.model_dump()
    assert fast.model_extra == slow.model_extra == {}
    fast.cpu_ms = 2.0  # a fresh object each time: mutating one never leaks into the next
    assert _fast.usage({}).cpu_ms is None


def test_non_empty_usage_is_validated() -> None:
    assert _fast.usage({"cpu_ms": "1.5"}).cpu_ms == 1.5
    try:
        _fast.usage({"max_rss_kb": "lots"})
    except ValueError:
        pass
    else:
        raise AssertionError("invalid usage passed unvalidated")


_usage_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.text(max_size=4),
    st.lists(st.integers(), max_size=2),
)


@settings(max_examples=300, deadline=None)
@given(
    data=st.dictionaries(
        st.sampled_from([*Usage.model_fields, "custom", "cpu"]), _usage_values, max_size=6
    )
)
def test_usage_built_or_validated_equals_validated(data: dict[str, Any]) -> None:
    try:
        ref = Usage.model_validate(data)
    except ValidationError:
        with pytest.raises(ValidationError):
            _fast.usage(data)
        return
    fast = _fast.usage(data)
    assert fast.model_dump() == ref.model_dump() or (
        # NaN is not equal to itself: compare the text
        fast.model_dump_json() == ref.model_dump_json()
    )
    assert fast.model_fields_set == ref.model_fields_set
    assert fast.__pydantic_extra__ == ref.__pydantic_extra__
    assert {k: type(v) for k, v in fast.__dict__.items()} == {
        k: type(v) for k, v in ref.__dict__.items()
    }


def test_usage_signature_memo_is_bounded_and_exact() -> None:
    """The fast path's memo is keyed by the keys and the exact value types: a signature seen
    with ints is not taken for floats, and distinct signatures never grow it past its bound."""
    assert _fast.usage({"fuel": 3, "cpu_ms": 1.5}).fuel == 3
    assert type(_fast.usage({"fuel": 3.0, "cpu_ms": 1.5}).fuel) is int  # validated: 3.0 -> 3
    with pytest.raises(ValidationError):
        _fast.usage({"fuel": 3.5, "cpu_ms": 1.5})
    for i in range(3 * _fast._SIGNATURES_MAX):
        _fast.usage({f"extra{i}": i})
        assert len(_fast._SIGNATURES) <= _fast._SIGNATURES_MAX
