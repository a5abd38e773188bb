"""``body_parts`` + ``chain_row`` (the batch chaining of journaled records) give exactly the
body and hash that ``body_bytes`` + ``chain_hash`` (verify) give, for any column values."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.audit._canonical import GENESIS_HASH, canonical_json
from runtime.audit._record import body_bytes, body_parts, chain_hash, chain_row

_text = st.none() | st.text(max_size=40)
_json_text = st.none() | st.dictionaries(
    st.text(max_size=8), st.integers(-(2**53) + 1, 2**53 - 1) | st.text(max_size=8), max_size=4
).map(lambda d: canonical_json(d).decode("utf-8"))
_fields = st.tuples(
    st.sampled_from(["request", "completion"]),
    st.text(min_size=1, max_size=40),  # call_id
    st.just("2026-01-02T03:04:05.678901Z"),
    st.text(min_size=1, max_size=20),  # tool
    _text,  # arguments_digest
    _json_text,  # arguments
    _json_text,  # decision
    _text,  # backend
    _json_text,  # sandbox
    _text,  # outcome
    _text,  # error_type
    st.none() | st.floats(allow_nan=False, allow_infinity=False) | st.integers(0, 10**6),
    _json_text,  # usage
    _text,  # result_digest
    st.none() | st.integers(0, 2**40),  # result_size
)


def _check(fields: tuple[Any, ...], seq: int, prev: str) -> None:
    try:
        expected_body = body_bytes((seq, *fields, prev, None))
    except ValueError:  # lone surrogates: both refuse
        with pytest.raises(ValueError):
            body_parts((None, *fields))
        return
    row = chain_row(fields, body_parts((None, *fields)), seq, prev)
    assert row == (seq, *fields, prev, chain_hash(prev, expected_body))


@settings(max_examples=300, deadline=None)
@given(_fields, st.integers(1, 2**40), st.sampled_from([GENESIS_HASH, "ab" * 32]))
def test_parts_give_the_verified_body_and_hash(
    fields: tuple[Any, ...], seq: int, prev: str
) -> None:
    _check(fields, seq, prev)


@pytest.mark.parametrize(
    "odd",
    [
        {11: 1.0},  # an integral float duration (canonical "1")
        {11: 2.5e-9},  # exponent form
        {6: {"b": 1, "a": [1, 2]}},  # a JSON column given as an object (recovered line)
        {14: True},  # not an int: takes the column loop
        {1: "tab\tand\u2028é"},
    ],
)
def test_unusual_column_types_take_the_exact_loop(odd: dict[int, Any]) -> None:
    fields = [
        "completion",
        "c1",
        "2026-01-02T03:04:05.678901Z",
        "echo",
        None,
        None,
        '{"action":"allow"}',
        "mock",
        None,
        "success",
        None,
        0.5,
        '{"cpu_ms":0}',
        "d" * 64,
        12,
    ]
    for i, value in odd.items():
        fields[i] = value
    _check(tuple(fields), 7, GENESIS_HASH)
