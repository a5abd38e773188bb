"""The bulk canonicaliser (stdlib C encoder, checked) gives exactly the exact walk's bytes, or
the walk's own error, for any value: JSON data, and the non-JSON shapes the C encoder would
quietly coerce (non-string keys, tuples, subclasses, big integers, lone surrogates)."""

from __future__ import annotations

import enum
from collections import OrderedDict
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.audit._canonical import (
    CanonicalizationError,
    canonical_json_ijson,
    canonical_json_ijson_bulk,
)

ANY_INT = st.integers(min_value=-(2**70), max_value=2**70)
FLOATS = st.floats(allow_nan=False, allow_infinity=False)
TEXT = st.text()  # lone surrogates included: both must refuse them alike
KEYS = TEXT | st.integers(-5, 5) | st.booleans() | st.none() | st.floats(allow_nan=False)

WILD = st.recursive(
    st.none() | st.booleans() | ANY_INT | FLOATS | TEXT,
    lambda children: (
        st.lists(children, max_size=5)
        | st.lists(children, max_size=3).map(tuple)
        | st.dictionaries(TEXT, children, max_size=5)
        | st.dictionaries(KEYS, children, max_size=3)
    ),
    max_leaves=30,
)


def _outcome(fn: Any, value: Any) -> bytes | str:
    try:
        data: bytes = fn(value)
    except CanonicalizationError as exc:
        return f"error: {type(exc).__name__}"
    return data


@settings(deadline=None, max_examples=400)
@given(WILD)
def test_bulk_equals_the_exact_walk(value: Any) -> None:
    assert _outcome(canonical_json_ijson_bulk, value) == _outcome(canonical_json_ijson, value)


@pytest.mark.parametrize(
    "value",
    [
        {"a": 1.0},  # integral float: "1", not "1.0"
        {"a": -0.0},
        [1e16, 1e21, 1e-7, 1.5e-5, 5e-324, 1.7976931348623157e308],
        {"n": 2**53, "m": -(2**60), "k": 9007199254740991},
        {1: "int key"},
        {True: "bool key"},
        {None: "none key"},
        (1, 2, 3),
        {"\uff61": 1, "\U0001f600": 2},  # UTF-16 key order differs from code point order
        {"s": "\ud800"},  # lone surrogate
        {"x": "1.0", "y": "2e+5", "z": "12345678901234567"},  # look-alikes inside strings
        OrderedDict([("b", 1), ("a", 2)]),
        {"e": enum.IntEnum("E", "A")["A"]},
        [0.1 + 0.2, 123.456, -7.25, 1 / 3],
    ],
)
def test_bulk_on_the_edges(value: Any) -> None:
    assert _outcome(canonical_json_ijson_bulk, value) == _outcome(canonical_json_ijson, value)


@settings(deadline=None)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-(2**53) + 1, 2**53 - 1)
        | FLOATS
        | st.text(st.characters(exclude_categories=("Cs",))),
        lambda c: st.lists(c, max_size=5) | st.dictionaries(st.text(), c, max_size=5),
        max_leaves=30,
    )
)
def test_bulk_matches_the_rfc8785_reference(value: Any) -> None:
    try:
        expected = rfc8785.dumps(value)
    except CanonicalizationError:
        with pytest.raises(CanonicalizationError):
            canonical_json_ijson_bulk(value)
        return
    assert canonical_json_ijson_bulk(value) == expected


def test_nan_and_deep_nesting_are_refused_like_the_walk() -> None:
    with pytest.raises(CanonicalizationError):
        canonical_json_ijson_bulk({"x": float("nan")})
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(RecursionError):
        canonical_json_ijson(deep)
    with pytest.raises(RecursionError):
        canonical_json_ijson_bulk(deep)
