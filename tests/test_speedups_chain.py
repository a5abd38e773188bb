"""The accelerator's batch chaining (``chain``): the rows of journaled records, exactly those
of ``_record.chain_row`` one after the other, on generated records; NotImplemented (then the
Python loop decides) for anything outside the shape AuditLog builds."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.audit import AuditLog, _canonical
from runtime.audit._canonical import GENESIS_HASH
from runtime.audit._record import (
    body_bytes,
    body_parts,
    chain_hash,
    chain_rows,
    py_chain_rows,
)
from tests.test_speedups_record import rows

HEAD = st.tuples(st.integers(0, 2**62), st.sampled_from([GENESIS_HASH, "ab" * 32, "", "x"]))


_python = py_chain_rows


def _records(fields_list: list[tuple[Any, ...]], with_end: bool) -> list[Any]:
    out: list[Any] = []
    for i, fields in enumerate(fields_list):
        try:
            parts = body_parts((None, *fields))
        except ValueError:
            continue  # text the database cannot take: never journaled
        out.append((fields, i * 100, parts) if with_end else (fields, parts))
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(rows(), max_size=5), HEAD, st.booleans())
def test_chain_equals_chain_row(
    c_mod: ModuleType, fields_list: list[tuple[Any, ...]], head: tuple[int, str], end: bool
) -> None:
    records = _records(fields_list, end)
    got = c_mod.chain(records, *head)
    assert got == _python(records, *head)
    for row in got:  # and each hash is the record's own chain hash (seq within I-JSON)
        if row[0] < 2**53:
            assert row[-1] == chain_hash(row[-2], body_bytes(row))


@pytest.mark.parametrize(
    ("records", "seq", "prev"),
    [
        ([("fields", b"")], 0, GENESIS_HASH),  # not a record tuple
        ([((1,) * 15, (b"", b"", "x"))], 0, GENESIS_HASH),  # a part that is not bytes
        ([((1,) * 14, (b"", b"", b""))], 0, GENESIS_HASH),  # fields of the wrong length
        ([], 0, "é"),  # a hash the Python code cannot encode as ASCII
        ([], 2**70, GENESIS_HASH),
        ([], -1, GENESIS_HASH),
        ([], True, GENESIS_HASH),
        ((), 0, GENESIS_HASH),
    ],
)
def test_other_shapes_are_left_to_python(
    c_mod: ModuleType, records: Any, seq: Any, prev: Any
) -> None:
    assert c_mod.chain(records, seq, prev) is NotImplemented


def test_chain_rows_falls_back_and_raises_like_python(c_mod: ModuleType) -> None:
    fields = ("request", "c", "t", "tool", None, '{"a":1}', None, "wasm", *[None] * 7)
    records = [(fields, body_parts((None, *fields)))] * 3
    with_c = chain_rows(records, 4, GENESIS_HASH)
    assert with_c == _python(records, 4, GENESIS_HASH)
    with pytest.raises(UnicodeEncodeError):
        chain_rows(records, 0, "é")
    _canonical._select(None)
    try:
        assert _canonical._chain is None
        assert chain_rows(records, 4, GENESIS_HASH) == with_c
    finally:
        _canonical._select(c_mod)
    with pytest.raises(TypeError):
        c_mod.chain(records, 4)


@pytest.mark.parametrize("pure", [False, True])
def test_journaled_log_verifies_on_both_paths(
    c_mod: ModuleType, tmp_path: Path, pure: bool
) -> None:
    if pure:
        _canonical._select(None)
    try:
        with AuditLog(tmp_path / "a.db") as log:
            for i in range(40):
                log.record_request(
                    call_id=f"c{i}", tool="t", arguments={"i": i}, decision=None,
                    backend="wasm", sandbox=None, returning=False, defer=True,
                )  # fmt: skip
            log.flush()
            assert log.verify().ok
            assert log.head()[0] == 40
    finally:
        _canonical._select(c_mod)
