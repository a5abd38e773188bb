"""Arguments from the Python API that are not JSON data (bytes, a tuple, any object, an
integer beyond 64 bits) are refused as invalid_arguments, and the refusal is recorded like
any other. They were internal_error with no record ("arguments are not JSON data"), and an
integer past CPython's 4300-digit text limit raised ValueError out of Broker.call."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from runtime import shapes
from runtime.errors import InvalidArguments
from runtime.shapes import INT_MAX, INT_MIN, normalize_call

pytestmark = pytest.mark.anyio

MakeBroker = Callable[..., Any]


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        (b"x", "type"),
        (object(), "type"),
        ((1, 2), "type"),
        ({1, 2}, "type"),
        (10**5000, "integer"),
        (INT_MAX + 1, "integer"),
        (INT_MIN - 1, "integer"),
        ([0, {"deep": b"x"}], "type"),
    ],
    ids=["bytes", "object", "tuple", "set", "10**5000", "2**64", "-2**63-1", "nested"],
)
async def test_non_json_values_are_invalid_arguments(
    make_broker: MakeBroker, value: Any, rule: str
) -> None:
    async with make_broker() as broker:
        result = await broker.call({"tool": "echo", "arguments": {"text": value}})
        assert result.error is not None and result.error.type == "invalid_arguments"
        assert result.error.details["rule"] == rule
        records = broker.audit.tail(2)
        assert [(r.kind, r.outcome) for r in records] == [
            ("request", None),
            ("completion", "error"),
        ]
        assert records[1].error_type == "invalid_arguments"
        assert broker.audit.verify().ok


def test_integers_of_64_bits_are_accepted() -> None:
    for value in (INT_MIN, -1, 0, 2**53 + 1, 2**63, INT_MAX, True):
        assert normalize_call({"tool": "t", "arguments": {"n": value}}).arguments == {"n": value}
    with pytest.raises(InvalidArguments, match=r"\$\.arguments\.n\[1\]: integer outside"):
        normalize_call({"tool": "t", "arguments": {"n": [0, INT_MAX + 1]}})


async def test_an_unrecordable_value_fails_closed_without_raising(
    make_broker: MakeBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Behind the shapes walk, the audit encoder's ValueError (int text past 4300 digits)
    becomes a fail-closed result, never an exception out of the call."""
    monkeypatch.setattr(shapes, "_find", lambda value, max_depth, max_string: None)
    async with make_broker() as broker:
        result = await broker.call({"tool": "echo", "arguments": {"text": 10**5000}})
    assert not result.success  # the call's own refusal (the schema's) stands
    assert result.error is not None and result.error.type == "invalid_arguments"
