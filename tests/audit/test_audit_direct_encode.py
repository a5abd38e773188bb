"""The audit log's hot path calls the canonical encoder directly (``canonical_arguments``,
``canonical_result``, a journaled completion's usage): the same bytes as
``canonical_json_ijson``, and the same AuditError, for any value — also with the pure-Python
encoders (the conftest runs every test both ways) and for values nested past the accelerator's
depth cap."""

from __future__ import annotations

import math
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.audit import AuditLog
from runtime.audit._canonical import canonical_json_ijson
from runtime.errors import AuditError

_SETTINGS = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(["\ud800", math.nan, b"b", (1, 2)])
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=4) | st.integers(0, 3), inner, max_size=4)
    ),
    max_leaves=12,
)


def _reference(value: Any) -> tuple[str, Any]:
    try:
        return "ok", canonical_json_ijson(value)
    except Exception as exc:  # the audit log turns every one of these into AuditError
        return "error", type(exc).__name__


def _got(fn: Any, value: Any) -> tuple[str, Any]:
    try:
        return "ok", fn(value)
    except AuditError:
        return "error", None


@_SETTINGS
@given(value=_VALUES)
def test_arguments_and_results_equal_the_reference(log: AuditLog, value: Any) -> None:
    expected = _reference(value)
    for fn in (log.canonical_arguments, log.canonical_result):
        got = _got(fn, value)
        assert got[0] == expected[0]
        if got[0] == "ok":
            assert got[1] == expected[1]


@_SETTINGS
@given(usage=st.dictionaries(st.text(max_size=6), _SCALARS, max_size=5))
def test_a_journaled_completions_usage_is_its_canonical_text(
    log: AuditLog, usage: dict[str, Any]
) -> None:
    sandbox = log.prepare("sandbox", {"backend": "wasm"})
    kind, expected = _reference(usage)

    def complete() -> None:
        log.record_completion(
            call_id="c",
            tool="t",
            outcome="success",
            error_type=None,
            duration_ms=1.0,
            usage=usage,
            result=None,
            backend="wasm",
            sandbox=sandbox,
            returning=False,
            defer=True,
        )

    if kind == "error":
        with pytest.raises(AuditError):
            complete()
        return
    complete()
    row = log.tail(1)[0]
    assert row.usage == usage or canonical_json_ijson(row.usage) == expected
    assert log.verify().ok


def test_values_past_the_accelerators_depth_cap(log: AuditLog) -> None:
    deep: Any = "x"
    for _ in range(1100):
        deep = [deep]
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(20_000)
    try:
        expected = canonical_json_ijson(deep)
        assert log.canonical_arguments(deep) == expected
        assert log.canonical_result(deep) == expected
    finally:
        sys.setrecursionlimit(limit)
