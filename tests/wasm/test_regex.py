"""regex_match: a Pike VM, compared with Python's re.search (ASCII mode) on generated patterns."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime.backends.wasm import WasmBackend
from runtime.errors import ToolFailed

from .conftest import call

pytestmark = pytest.mark.wasm


def python_search(pattern: str, text: str) -> dict[str, Any]:
    m = re.search(pattern, text, re.ASCII)
    if m is None:
        return {"matched": False, "match": None, "start": None, "end": None}
    return {"matched": True, "match": m.group(0), "start": m.start(), "end": m.end()}


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        ("b+c", "aabbbcd"),
        ("(a|ab)(c|bcd)", "xabcd"),
        ("a*?b", "aaab"),
        ("\\d{2,3}", "a12345"),
        ("\\d{2,3}?", "a12345"),
        ("^$", ""),
        ("$", "ab"),
        ("a$", "a\n"),
        ("^b", "ab"),
        ("[^a-c]+", "abcdef"),
        ("[]a]+", "x]a]"),
        ("[a-]+", "-a-"),
        ("\\w+@\\w+\\.com", "mail bob@example.com now"),
        ("(?:ab){2,}", "abababx"),
        ("x{", "x{"),
        ("é.", "xxéé"),
        (".", "\n"),
        ("\\s\\S", "a b"),
        ("colou?r", "the color red"),
        ("a|b|", "c"),
    ],
)
def test_regex_matches_python(backend: WasmBackend, pattern: str, text: str) -> None:
    assert call(backend, "regex_match", {"pattern": pattern, "text": text}) == python_search(
        pattern, text
    )


def test_catastrophic_pattern_is_linear(backend: WasmBackend) -> None:
    # Exponential for a backtracking engine; here bounded by len(text) * program size, which
    # the fuel limit makes a hard guarantee.
    text = "a" * 5000 + "b"
    out = call(backend, "regex_match", {"pattern": "(a+)+$", "text": text}, wasm_fuel=200_000_000)
    assert out["matched"] is False


@pytest.mark.parametrize(
    ("pattern", "fragment"),
    [
        ("(a", "missing ), unterminated group"),
        ("a)", "unbalanced parenthesis"),
        ("*a", "nothing to repeat"),
        ("a**", "multiple repeat"),
        ("(a)\\1", "backreferences are not supported"),
        ("(?=a)", "lookaround"),
        ("[a", "unterminated character class"),
        ("[z-a]", "bad character range"),
        ("a{1001}", "repeat count over 1000"),
        ("a{3,2}", "min repeat greater than max repeat"),
        ("(a{1000}){1000}", "pattern too large"),
        ("\\q", "unsupported escape"),
    ],
)
def test_bad_patterns(backend: WasmBackend, pattern: str, fragment: str) -> None:
    with pytest.raises(ToolFailed, match=r"invalid pattern|pattern too large") as info:
        call(backend, "regex_match", {"pattern": pattern, "text": "aaa"})
    assert fragment in info.value.message


atom = st.sampled_from(["a", "b", ".", "[ab]", "[^a]", "\\d", "\\w", "\\s", "x", "é"])
quant = st.sampled_from(["", "", "*", "+", "?", "*?", "+?", "??", "{2}", "{1,2}", "{0,}"])


@st.composite
def patterns(draw: st.DrawFn, depth: int = 0) -> str:
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        if depth < 2 and draw(st.booleans()) and draw(st.booleans()):
            alts = draw(st.lists(patterns(depth + 1), min_size=1, max_size=3))
            # A quantified group must not match empty: nested empty loops are where
            # backtracking engines and automata legitimately differ.
            parts.append("(?:" + "|".join(alts) + ")" + draw(st.sampled_from(["", "", "+"])))
            if any(re.fullmatch("(?:" + a + ")", "") for a in alts):
                parts[-1] = "(?:" + "|".join(alts) + ")"
        else:
            parts.append(draw(atom) + draw(quant))
    prefix = draw(st.sampled_from(["", "", "^"]))
    suffix = draw(st.sampled_from(["", "", "$"]))
    return prefix + "".join(parts) + suffix if depth == 0 else "".join(parts)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(pattern=patterns(), text=st.text(st.sampled_from(list("aabbx1 é\n")), max_size=12))
def test_regex_differential(backend: WasmBackend, pattern: str, text: str) -> None:
    assert call(backend, "regex_match", {"pattern": pattern, "text": text}) == python_search(
        pattern, text
    )
