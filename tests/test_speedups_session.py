"""The session column in the accelerator's record encoder, journal writer and batch chaining:
byte for byte the Python code's (``_journal.encode_line``, ``_record.body_parts``,
``py_chain_rows``) on generated records with and without a session, errors included, and a
record of schema version 1 (15 fields, no session) encoded as a record with a null session."""

from __future__ import annotations

import os
import tempfile
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.audit import _canonical
from runtime.audit._journal import encode_line
from runtime.audit._record import body_bytes, body_parts, journal_record, py_chain_rows
from tests.test_speedups_record import BAD_TEXT, ODD, TEXT, odd_rows, rows

SESSION = st.none() | TEXT
ODD_SESSION = SESSION | BAD_TEXT | ODD


def _python(fields: tuple[Any, ...]) -> tuple[str, Any]:
    try:
        return "ok", (encode_line(fields), body_parts((None, *fields)))
    except Exception as exc:  # the type is what is compared
        return "error", type(exc)


@given(rows(), SESSION)
def test_record_with_a_session_equals_the_python_code(
    c_mod: ModuleType, fields: tuple[Any, ...], session: str | None
) -> None:
    fields = (*fields, session)
    out = c_mod.record(fields)
    assert out is not None
    line, pre, mid, post = out
    assert ("ok", (line, (pre, mid, post))) == _python(fields)
    row = (7, *fields, "ab" * 32, None)
    body = pre + b"ab" * 32 + mid + b"7" + post
    assert body == body_bytes(row)
    # A null session is not in the body; any other is, as a JSON string.
    assert (b'"session":' in body) is (session is not None)


@given(odd_rows(), ODD_SESSION)
def test_odd_sessions_take_the_python_code(
    c_mod: ModuleType, fields: tuple[Any, ...], session: Any
) -> None:
    fields = (*fields, session)
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


@pytest.mark.parametrize("session", ["\ud800", 3, b"s", 1.5])
def test_a_session_outside_the_shape_returns_none(c_mod: ModuleType, session: Any) -> None:
    fields = ("request", "c", "t", "tool", *[None] * 11, session)
    assert c_mod.record(fields) is None


@given(rows())
def test_a_version_1_record_is_a_record_without_a_session(
    c_mod: ModuleType, fields: tuple[Any, ...]
) -> None:
    """15 fields (a journal line of a broker from before sessions): the same body and hash as
    the 16 fields with a null session, in C and in Python."""
    old = c_mod.record(fields)
    new = c_mod.record((*fields, None))
    assert old is not None and new is not None
    assert old[1:] == new[1:]  # the body parts
    assert body_parts((None, *fields)) == body_parts((None, *fields, None))
    assert body_bytes((7, *fields, "p", None)) == body_bytes((7, *fields, None, "p", None))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(rows(), SESSION), max_size=5), st.integers(0, 2**40))
def test_chain_with_sessions_equals_the_python_loop(
    c_mod: ModuleType, drawn: list[tuple[tuple[Any, ...], str | None]], seq: int
) -> None:
    records = []
    for fields, session in drawn:
        record = (*fields, session)
        records.append((record, body_parts((None, *record))))
    got = c_mod.chain(records, seq, "ab" * 32)
    assert got == py_chain_rows(records, seq, "ab" * 32)
    for row, (record, _) in zip(got, records, strict=True):
        assert row[1:-2] == record


@given(rows(), SESSION)
def test_journal_write_with_a_session_writes_the_python_line(
    c_mod: ModuleType, fields: tuple[Any, ...], session: str | None
) -> None:
    fields = (*fields, session)
    with tempfile.TemporaryFile() as f:
        out = c_mod.journal_write(f.fileno(), fields, False)  # unlinked: no link check
        assert out is not None
        f.seek(0)
        written = f.read()
    line, parts = journal_record(fields)
    assert out[:3] == (0, len(line), len(line))
    assert written == line
    assert tuple(out[3:]) == parts


def test_pure_mode_encodes_sessions_as_the_accelerator(c_mod: ModuleType) -> None:
    fields = ("request", "c", "t", "tool", None, '{"a":1}', None, "wasm", *[None] * 7, "s1")
    with_c = journal_record(fields)
    _canonical._select(None)
    try:
        assert _canonical._record is None
        assert journal_record(fields) == with_c
    finally:
        _canonical._select(c_mod)
    assert os.environ.get("RUNTIME_PURE_PYTHON", "") in ("", "0")
