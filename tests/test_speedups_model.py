"""The accelerator's ``model`` (runtime/_trusted.py): the broker's ToolCall, Usage and
ToolResult built without validation, checked against the Python twin ``py_model`` and
against pydantic's validation of the same values."""

from __future__ import annotations

import datetime as dt
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime import _trusted
from runtime.models import ToolCall, ToolResult, Usage

_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "fuel": st.integers(0, 2**40),
        "cpu_ms": st.floats(0, 1e6),
        "wall_ms": st.floats(0, 1e6),
        "peak_memory_bytes": st.integers(0, 2**40),
    },
)


def _state(m: Any) -> tuple[Any, ...]:
    return (
        type(m),
        m.__dict__,
        m.__pydantic_fields_set__,
        m.__pydantic_extra__,
        m.__pydantic_private__,
    )


@given(data=_FIELDS)
def test_usage_equals_the_twin_and_validation(c_mod: ModuleType, data: dict[str, Any]) -> None:
    fields = dict.fromkeys(Usage.model_fields)
    fields.update(data)
    extra: dict[str, Any] = {}
    c = c_mod.model(Usage, fields, data, extra)
    py = _trusted.py_model(Usage, dict(fields), data, extra)
    assert _state(c) == _state(py)
    assert c.__dict__ is fields  # stored as given, as object.__setattr__ does
    assert c.__pydantic_extra__ is not extra and c.__pydantic_fields_set__ is not data
    assert c == Usage.model_validate(data)
    assert c.model_dump() == Usage.model_validate(data).model_dump()


@given(call_id=st.text(min_size=1), tool=st.sampled_from(["json_parse", "echo"]))
def test_tool_call_and_result(c_mod: ModuleType, call_id: str, tool: str) -> None:
    names = tuple(ToolCall.model_fields)
    fields = {"call_id": call_id, "tool": tool, "arguments": {"a": 1}, "context": {}}
    c = c_mod.model(ToolCall, fields, names, None)
    assert _state(c) == _state(_trusted.py_model(ToolCall, dict(fields), names, None))
    assert c == ToolCall(**fields)
    now = dt.datetime.now(dt.UTC)
    result = {
        "call_id": call_id,
        "tool": tool,
        "success": True,
        "result": {"data": [1]},
        "error": None,
        "started_at": now,
        "completed_at": now,
        "duration_ms": 1.5,
        "backend": "wasm",
        "usage": Usage(),
        "decision": {"action": "allow", "rule": "r"},
    }
    c = c_mod.model(ToolResult, result, frozenset(ToolResult.model_fields), None)
    assert c == ToolResult(**result)
    assert c.model_dump_json() == ToolResult(**result).model_dump_json()


class _Refuses:
    def __new__(cls, *args: Any) -> Any:
        raise RuntimeError("no instance")


class _Plain:
    pass


def test_errors_are_the_twins(c_mod: ModuleType) -> None:
    for args in (
        (1, {}, (), None),
        (Usage, [], (), None),
        (Usage, {}, (), []),
        (Usage, {}, ()),
    ):
        with pytest.raises(TypeError):
            c_mod.model(*args)
    for fn in (c_mod.model, _trusted.py_model):
        with pytest.raises(RuntimeError, match="no instance"):
            fn(_Refuses, {}, (), None)
        with pytest.raises(TypeError):
            fn(Usage, {}, 3, None)  # fields_set not iterable
        # A class without the pydantic slots: the attributes land in its __dict__ alike.
        out = fn(_Plain, {"x": 1}, ("x",), None)
        assert out.x == 1


def test_the_first_call_selects_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_trusted, "model", _trusted._first_model)
    monkeypatch.setattr(_trusted._speedups, "module", lambda: None)
    out = _trusted.model(Usage, dict.fromkeys(Usage.model_fields), (), {})
    assert _trusted.model is _trusted.py_model
    assert out == Usage()
