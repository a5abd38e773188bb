"""The accelerator's audit record encoder: the journal line and body parts of one record, byte
for byte those of ``_journal.encode_line`` and ``_record.body_parts``, on generated rows."""

from __future__ import annotations

import enum
import math
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.audit import _canonical
from runtime.audit._journal import encode_line
from runtime.audit._record import body_bytes, body_parts, journal_record


class Tag(enum.StrEnum):
    A = "a"


TEXT = st.text(st.characters(exclude_categories=("Cs",))) | st.lists(
    st.sampled_from(["a", "\x00", "\n", "\x1f", "\x7f", '"', "\\", "é", "\uff61", "😀"]),
    max_size=6,
).map("".join)
BAD_TEXT = st.sampled_from(["\ud800", "x\udfff", Tag.A])
OPT_TEXT = st.none() | TEXT
JSON_TEXT = st.none() | st.sampled_from(['{"a":1}', '{"t":"é\\n😀"}', "{}", '{"k":[1,2.5,null]}'])
DURATION = st.none() | st.floats(allow_nan=False, allow_infinity=False)
SIZE = st.none() | st.integers(min_value=0, max_value=2**53 - 1)
# Values outside the shapes AuditLog writes: the Python code decides (bytes or its error).
ODD = st.sampled_from(
    [math.nan, math.inf, 2**53, 2**70, -(2**64), True, 3, 1.5, "x", None, b"b", Tag.A, "\ud800"]
)


def _fields(draw: Any, odd: bool) -> tuple[Any, ...]:
    def pick(base: st.SearchStrategy[Any]) -> Any:
        return draw(ODD | BAD_TEXT if odd and draw(st.integers(0, 5)) == 0 else base)

    return (
        pick(st.sampled_from(["request", "completion"])),
        pick(TEXT),
        pick(TEXT),
        pick(TEXT),
        pick(OPT_TEXT),
        pick(JSON_TEXT),
        pick(JSON_TEXT),
        pick(OPT_TEXT),
        pick(JSON_TEXT),
        pick(OPT_TEXT),
        pick(OPT_TEXT),
        pick(DURATION),
        pick(JSON_TEXT),
        pick(OPT_TEXT),
        pick(SIZE),
    )


@st.composite
def rows(draw: Any) -> tuple[Any, ...]:
    return _fields(draw, False)


@st.composite
def odd_rows(draw: Any) -> tuple[Any, ...]:
    return _fields(draw, True)


def _python(fields: tuple[Any, ...]) -> tuple[str, Any]:
    try:
        return "ok", (encode_line(fields), body_parts((None, *fields)))
    except Exception as exc:  # the type is what is compared
        return "error", type(exc)


@given(rows())
def test_record_equals_encode_line_and_body_parts(
    c_mod: ModuleType, fields: tuple[Any, ...]
) -> None:
    out = c_mod.record(fields)
    assert out is not None
    line, pre, mid, post = out
    assert ("ok", (line, (pre, mid, post))) == _python(fields)
    # The parts are the body of the finished row.
    row = (7, *fields, "ab" * 32, None)
    assert pre + b"ab" * 32 + mid + b"7" + post == body_bytes(row)


@given(odd_rows())
def test_odd_rows_take_the_python_code(c_mod: ModuleType, fields: tuple[Any, ...]) -> None:
    out = c_mod.record(fields)
    expected = _python(fields)
    if out is not None:
        line, pre, mid, post = out
        assert expected == ("ok", (line, (pre, mid, post)))
    try:
        got: tuple[str, Any] = "ok", journal_record(fields)
    except Exception as exc:  # the type is what is compared
        got = "error", type(exc)
    assert got == expected


@pytest.mark.parametrize(
    ("at", "value"),
    [(11, math.nan), (14, 2**53), (5, "\ud800"), (1, "\udc00"), (0, None), (3, Tag.A)],
)
def test_values_outside_the_shape_return_none(c_mod: ModuleType, at: int, value: Any) -> None:
    fields: list[Any] = ["request", "c", "t", "tool", *[None] * 11]
    fields[at] = value
    assert c_mod.record(tuple(fields)) is None


def test_wrong_length_or_type(c_mod: ModuleType) -> None:
    assert c_mod.record(("request",)) is None
    with pytest.raises(TypeError):
        c_mod.record(["request"])


def test_pure_switch_reaches_journal_record(c_mod: ModuleType) -> None:
    fields = ("request", "c", "t", "tool", None, '{"a":1}', None, "wasm", None, *[None] * 6)
    with_c = journal_record(fields)
    _canonical._select(None)
    try:
        assert _canonical._record is None
        assert journal_record(fields) == with_c
    finally:
        _canonical._select(c_mod)
