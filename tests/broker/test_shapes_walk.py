"""The argument walk in shapes (no path strings on the hot path) reports exactly what the
straightforward recursive walk reports: same error, same JSONPath, same rule."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.errors import InvalidArguments
from runtime.shapes import CallLimits, _check_value

LIMITS = CallLimits(max_depth=3, max_string=5)


def _reference(value: Any, limits: CallLimits, depth: int = 0, path: str = "$") -> None:
    # Only arrays and objects are levels (``depth``: those around ``value``), the value
    # checked being the first; a scalar inside the deepest allowed one is not refused.
    if isinstance(value, (dict, list)) and depth >= limits.max_depth:
        raise InvalidArguments(
            f"{path}: nesting deeper than {limits.max_depth} levels of arrays and objects "
            "(the arguments object is level 1)",
            path=path,
            rule="max_depth",
        )
    if isinstance(value, str):
        if len(value) > limits.max_string:
            raise InvalidArguments(
                f"{path}: string of {len(value)} characters exceeds {limits.max_string}",
                path=path,
                rule="max_string",
            )
    elif isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise InvalidArguments(f"{path}: object keys must be strings", path=path)
            _reference(v, limits, depth + 1, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _reference(v, limits, depth + 1, f"{path}[{i}]")
    elif isinstance(value, float):
        if not math.isfinite(value):
            # Infinity too: no audit record can hold it (a call with one failed closed
            # unrecorded).
            what = "NaN" if math.isnan(value) else "infinity"
            raise InvalidArguments(f"{path}: {what} is not JSON", path=path)
    elif isinstance(value, int):
        if not -(2**63) <= value <= 2**64 - 1:
            raise InvalidArguments(
                f"{path}: integer outside the 64-bit range (-2**63 .. 2**64-1)",
                path=path,
                rule="integer",
            )
    elif value is not None:
        raise InvalidArguments(
            f"{path}: a {type(value).__name__} is not JSON data", path=path, rule="type"
        )


def _outcome(fn: Any, value: Any) -> tuple[str, dict[str, Any]] | None:
    try:
        fn(value, LIMITS)
    except InvalidArguments as exc:
        return exc.message, exc.details
    return None


_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(2**63 - 2, 2**64 + 1)
    | st.integers(-(2**63) - 1, -(2**63) + 1)
    | st.floats()
    | st.text(max_size=8)
    | st.binary(max_size=2)
    | st.tuples(st.integers())
)
_keys = st.text(max_size=3) | st.integers(0, 3)
_values = st.recursive(
    _leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(_values)
def test_walk_matches_reference(value: Any) -> None:
    assert _outcome(_check_value, value) == _outcome(_reference, value)
