"""normalize_call builds its ToolCall without pydantic-core when the values have the exact types
validation produces; the result must equal the validated model, own its arguments dict, and
anything else (a str subclass, a non-text key) must still go through validation."""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings
from pydantic import ValidationError

from runtime.models import ToolCall
from runtime.shapes import _tool_call, normalize_call

_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.text(max_size=8)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=10,
)
_args = st.dictionaries(st.text(max_size=8), _json, max_size=4)


def _shapes(name: str, args: dict[str, Any], call_id: str) -> list[dict[str, Any]]:
    return [
        {"tool": name, "arguments": args, "call_id": call_id},
        {"type": "function", "id": call_id, "function": {"name": name, "arguments": args}},
        {"type": "function_call", "call_id": call_id, "name": name, "arguments": args},
        {"type": "tool_use", "id": call_id, "name": name, "input": args},
        {"name": name, "arguments": args, "id": call_id},
    ]


def _validated(tc: ToolCall) -> ToolCall:
    return ToolCall(
        call_id=tc.call_id, tool=tc.tool, arguments=tc.arguments, context=dict(tc.context)
    )


@settings(max_examples=100, deadline=None)
@given(
    name=st.text(min_size=1, max_size=12),
    args=_args,
    call_id=st.text(min_size=1, max_size=20),
)
def test_built_call_equals_the_validated_model(
    name: str, args: dict[str, Any], call_id: str
) -> None:
    for raw in _shapes(name, args, call_id):
        tc = normalize_call(raw)
        ref = _validated(tc)
        assert tc == ref
        assert tc.model_dump() == ref.model_dump()
        assert tc.model_fields_set == ref.model_fields_set
        assert tc.__pydantic_extra__ == ref.__pydantic_extra__
        assert tc.arguments is not args  # a copy, as validation makes: caller edits stay out
        assert ToolCall.model_validate_json(tc.model_dump_json()) == tc


class _Str(str):
    pass


def test_other_types_are_validated() -> None:
    # A str subclass becomes an exact str, as pydantic makes it.
    tc = _tool_call(_Str("id"), _Str("echo"), {_Str("k"): 1}, {"shape": "native"})
    assert type(tc.call_id) is str and type(tc.tool) is str
    assert [type(k) for k in tc.arguments] == [str]
    with pytest.raises(ValidationError):
        _tool_call("id", "echo", {1: "x"}, {"shape": "native"})  # type: ignore[dict-item]
