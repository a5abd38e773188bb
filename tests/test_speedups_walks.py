"""The accelerator's two walks over every call: the caps walk (``violation``, the reference is
``runtime.shapes._violation``) and the redaction gate (``maybe_secret``, the reference is
``runtime.audit._redact._py_maybe_secret``). Each gives the reference's answer or
NotImplemented (then the reference decides), on generated values; and each module falls back
to its reference when the accelerator is not there."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import _speedups, shapes
from runtime.audit import _redact
from runtime.audit._canonical import canonical_json
from runtime.audit._redact import Redactor
from runtime.errors import InvalidArguments
from runtime.shapes import CallLimits, _check_value, _violation
from tests._pythonpath import python_path

ROOT = Path(__file__).resolve().parents[1]


class Text(str):
    __slots__ = ()

    def __len__(self) -> int:  # what the Python walk would ask
        return 0


class Mapping(dict[Any, Any]):
    pass


class Sequence(list[Any]):
    pass


class Number(float):
    pass


class PosingAsStr:
    """isinstance(x, str) is True for it (``__class__``), so the Python walk measures it."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return str

    def __len__(self) -> int:
        return 99


_ODD = st.sampled_from(
    [Text("abcdefgh"), Mapping(a="xxxxxxx"), Sequence([math.nan]), Number("nan"), (1, "x"),
     b"bytes", PosingAsStr(), 2**80, -(2**80), math.inf, -0.0]
)  # fmt: skip
_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(["", "é" * 6, "\ud800", "😀" * 3])
)
_KEYS = st.text(max_size=3) | st.integers(0, 3) | st.sampled_from([None, 1.5, True])
_ODD_KEYS = st.sampled_from([(1,), Text("k"), b"k"])


def _values(odd: bool) -> st.SearchStrategy[Any]:
    leaves = _LEAVES | _ODD if odd else _LEAVES
    keys = _KEYS | _ODD_KEYS if odd else _KEYS
    return st.recursive(
        leaves,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
        max_leaves=14,
    )


_CAPS = st.integers(-2, 6)


@settings(max_examples=600, deadline=None)
@given(_values(False), _CAPS, _CAPS)
def test_violation_equals_the_python_walk(
    c_mod: ModuleType, value: Any, max_depth: int, max_string: int
) -> None:
    got = c_mod.violation(value, max_depth, max_string)
    assert got is not NotImplemented  # plain JSON values never need the Python walk
    assert got == _violation(value, max_depth, max_string, 0)
    if got is not None:
        assert all(type(k) in (str, int) for k in got[1])


@settings(max_examples=600, deadline=None)
@given(_values(True), _CAPS, _CAPS)
def test_violation_on_odd_values_is_the_python_walk_or_leaves_it(
    c_mod: ModuleType, value: Any, max_depth: int, max_string: int
) -> None:
    got = c_mod.violation(value, max_depth, max_string)
    if got is not NotImplemented:
        assert got == _violation(value, max_depth, max_string, 0)


def _nested(arrays: int, leaf: Any) -> Any:
    for _ in range(arrays):
        leaf = [leaf]
    return leaf


def _outcome(value: Any, limits: CallLimits) -> Any:
    try:
        _check_value(value, limits)
    except InvalidArguments as exc:
        return exc.message, exc.details
    except Exception as exc:  # the type is what is compared
        return type(exc)
    return None


@pytest.fixture(scope="module")
def both(c_mod: ModuleType) -> Iterator[tuple[ModuleType, Any]]:
    """(the accelerator, a function running ``fn(*args)`` with the Python code selected)."""

    def pure(fn: Any, *args: Any) -> Any:
        shapes._select(None)
        _redact._select(None)
        try:
            return fn(*args)
        finally:
            shapes._select(c_mod)
            _redact._select(c_mod)

    shapes._select(c_mod)
    _redact._select(c_mod)
    yield c_mod, pure
    shapes._select(c_mod)
    _redact._select(c_mod)


@settings(max_examples=400, deadline=None)
@given(_values(True), st.integers(0, 4), st.integers(0, 6))
def test_check_value_same_errors_both_paths(
    both: tuple[ModuleType, Any], value: Any, max_depth: int, max_string: int
) -> None:
    _, pure = both
    limits = CallLimits(max_depth=max_depth, max_string=max_string)
    assert _outcome(value, limits) == pure(_outcome, value, limits)


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ({"a": [1, {"b": "x" * 9}]}, "max_string"),
        ({"a": [[[[[1]]]]]}, "max_depth"),
        ({"a": [1.0, math.nan]}, None),
        ({"a": {2: 1}}, None),
    ],
)
def test_check_value_names_the_path(
    both: tuple[ModuleType, Any], value: Any, rule: str | None
) -> None:
    _, pure = both
    limits = CallLimits(max_depth=4, max_string=8)
    got = _outcome(value, limits)
    assert got == pure(_outcome, value, limits)
    assert got is not None and got[1].get("rule") == rule and got[1]["path"].startswith("$.a")


def test_deep_nesting_is_left_to_the_python_walk(both: tuple[ModuleType, Any]) -> None:
    c_mod, pure = both
    deep: Any = "x"
    for _ in range(1500):
        deep = [deep]
    assert c_mod.violation(deep, 10**6, 10) is NotImplemented
    limits = CallLimits(max_depth=10**6, max_string=0)
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(5000)
    try:
        got = _outcome(deep, limits)
        assert got == pure(_outcome, deep, limits)
    finally:
        sys.setrecursionlimit(old)
    assert got[1]["rule"] == "max_string"
    # Within the default caps the C walk answers itself: the 65th array is the first too deep
    # (only arrays and objects are levels; the string inside the 1500th is not looked at).
    assert c_mod.violation(deep, 64, 10) == ("max_depth", [0] * 64)
    assert c_mod.violation(_nested(64, "x"), 64, 10) is None


@pytest.mark.parametrize("cap", [1.5, True, 2**70, -(2**70), "3", None])
def test_caps_other_than_plain_ints_are_left_to_the_python_walk(
    c_mod: ModuleType, cap: Any
) -> None:
    assert c_mod.violation({"a": "xyz"}, cap, 5) is NotImplemented
    assert c_mod.violation({"a": "xyz"}, 5, cap) is NotImplemented


def test_violation_wrong_arguments(c_mod: ModuleType) -> None:
    with pytest.raises(TypeError):
        c_mod.violation({})


# -- the redaction gate --------------------------------------------------------------------

_PIECES = st.sampled_from(
    ["to", "ken", "auth", "a", "Key", "K", "ey", "pass", "Session", "-", "_", ".", " ", "x",
     "AKIA", "ABCD", "://", "sk-", "SK-", "ghp_", "GHP_", "github_pat_", "eyJ", "xox", "Aiza",
     "tenant", "TENANT", "7", "\n", '"', "\\", "é", "\u212a", "İ", "\x00", "\x7f"]
)  # fmt: skip
_TEXT = st.lists(_PIECES, max_size=8).map("".join) | st.text(max_size=12)
_GATES = st.sampled_from(
    [_redact._SQUASHED_FRAGMENTS, (*_redact._SQUASHED_FRAGMENTS, "tenantid"), ("",), ("é",), ()]
)


@settings(max_examples=1500, deadline=None)
@given(_TEXT, _GATES)
def test_maybe_secret_equals_the_python_gate(
    c_mod: ModuleType, text: str, gate: tuple[str, ...]
) -> None:
    got = c_mod.maybe_secret(text, _redact._AWS_PREFIXES, _redact._LOWERED_FRAGMENTS, gate)
    if text.isascii():
        assert got is not NotImplemented
        assert got == _redact._py_maybe_secret(text, gate)
    else:
        assert got is NotImplemented
    assert _redact._maybe_secret(text, gate) == _redact._py_maybe_secret(text, gate)


_JSON_PIECES = st.sampled_from(
    ["to", "ken", "\\n", "\\t", "\\\\", '\\"', "\\/", "\\u0074", "\\u000A", "\\u212a", "\\u00",
     "\\", "\\q", "AK", "IA", "x", "\\u0041", "://", "sk", "-", "\\u002d"]
)  # fmt: skip


@settings(max_examples=1500, deadline=None)
@given(st.lists(_JSON_PIECES, max_size=8).map("".join), _GATES)
def test_maybe_secret_on_json_text_equals_the_python_gate(
    c_mod: ModuleType, text: str, gate: tuple[str, ...]
) -> None:
    aws, lowered = _redact._AWS_PREFIXES, _redact._LOWERED_FRAGMENTS
    got = c_mod.maybe_secret(text, aws, lowered, gate, True)
    expected = _redact._py_maybe_secret(text, gate, True)
    if got is NotImplemented:  # an escape beyond ASCII, or no JSON escape
        assert "\\u" in text.lower() or expected is True
    else:
        assert got is expected


def test_maybe_secret_long_text_and_odd_fragments(c_mod: ModuleType) -> None:
    aws, lowered = _redact._AWS_PREFIXES, _redact._LOWERED_FRAGMENTS
    long = "x" * 5000 + "-To_Ken"
    assert c_mod.maybe_secret(long, aws, lowered, ("token",)) is True
    assert c_mod.maybe_secret("x" * 5000, aws, lowered, ("token",)) is False
    many = (*(f"zz{i}" for i in range(70)), "token")  # past the C bucket table: memmem
    for text in ("x-to.ken", "zz69", "zz7", "z", "", "TOKEN", "zz"):
        for gate in (many, many[:-1], ("", *many), ("é", "token")):
            expected = _redact._py_maybe_secret(text, gate)
            assert c_mod.maybe_secret(text, aws, lowered, gate) is expected
    assert c_mod.maybe_secret("xy", aws, lowered, (Text("x"),)) is NotImplemented
    assert c_mod.maybe_secret(Text("xy"), aws, lowered, ("x",)) is NotImplemented
    assert c_mod.maybe_secret("xy", aws, lowered, ["x"]) is NotImplemented
    with pytest.raises(TypeError):
        _redact._maybe_secret("xy", (1,))  # type: ignore[arg-type]  # as `in` raises
    with pytest.raises(TypeError):
        c_mod.maybe_secret("xy", aws, lowered)


@settings(max_examples=400, deadline=None)
@given(st.recursive(_TEXT | st.integers(-99, 99), lambda i: st.dictionaries(_TEXT, i, max_size=3)))
def test_redactor_same_on_both_paths(both: tuple[ModuleType, Any], value: Any) -> None:
    _, pure = both
    for redactor in (Redactor(), Redactor(["X-Tenant-Id"])):
        text = canonical_json(value).decode("utf-8", "surrogatepass")
        assert redactor.may_redact(text) == pure(redactor.may_redact, text)
        assert redactor(value) == pure(redactor, value)


def test_forced_pure_uses_the_python_walks() -> None:
    code = (
        "from runtime import shapes\n"
        "from runtime.audit import _redact\n"
        "from runtime.shapes import CallLimits, normalize_call\n"
        "normalize_call({'tool': 't', 'arguments': {'a': 'token'}})\n"
        "assert _redact._maybe_secret('a token')\n"
        "print(shapes._find is shapes._py_find, _redact._gate is _redact._py_gate)\n"
    )
    for pure, expected in (("1", "True True"), ("", "False False")):
        env = {**os.environ, "PYTHONPATH": python_path(ROOT), _speedups.PURE_ENV: pure}
        if not pure and os.environ.get(_speedups.PURE_ENV, "") not in ("", "0"):
            continue  # the environment forces pure for every test
        proc = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == expected
