"""The arithmetic and literal-text readers (``runtime/policy/_arith.py``,
``_literal_spans.py``, ``_integer_vars.py``) do work linear in the command's text.

Hazard fixed here (review of this session's change): each opener was closed by a scan to
the end of the text, each nested expression read again, each operand looked for in the
whole text before its operator, each literal range tried for every question: a 64 KB
command (within ``MAX_COMMAND_CHARS``) of ``(( a=`` took minutes in the policy decision,
``${x:`` nested half a minute, ``declare -i n; read a read a ...`` seventeen seconds. And
``${`` nested past the stack raised RecursionError out of the decision. Measured here by
the work done (characters handed to the arithmetic reader, scans of the text), not by time.
"""

from __future__ import annotations

from typing import Any

import pytest

from runtime.catalogue import Catalogue
from runtime.models import ToolCall
from runtime.policy import Policy, _arith, _integer_vars
from runtime.policy._literal_spans import literal_spans

SIZE = 64_000

UNITS = [
    "a[",
    "((",
    "$[",
    "(( a=",
    " [",
    "[[",
    "'x'a[]",
    "x=$(( a[",
    " -eq ",
    "${x:",
    "${a:=",
    "declare -i a ",
]


def _text(unit: str) -> str:
    return "echo " + unit * (SIZE // len(unit))


@pytest.mark.parametrize("unit", UNITS)
def test_the_arithmetic_read_is_linear_in_the_text(
    unit: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    read = [0]
    targets = _arith.arith_targets

    def counting(expr: str) -> Any:
        read[0] += len(expr)
        return targets(expr)

    monkeypatch.setattr(_arith, "arith_targets", counting)
    text = _text(unit)
    _arith.text_assignments(text)
    # The whole text may be read once as one expression (an integer declaration), and each
    # region once more: never a region again for every opener inside it.
    assert read[0] <= 4 * len(text)


@pytest.mark.parametrize(
    "text",
    [
        "declare -i n; " + "read a " * 9000,
        "declare -i n; " + "printf -v a x " * 4500,
        "declare -i n; " + "for n in b c " * 5000,
        "echo " + "declare -i a " * 5000,
    ],
)
def test_integer_variables_scan_each_statement_once(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    scanned = [0]
    statement = _integer_vars._statement

    def counting(t: str, start: int) -> str:
        found = statement(t, start)
        scanned[0] += len(found)
        return found

    monkeypatch.setattr(_integer_vars, "_statement", counting)
    _arith.text_assignments(text)
    assert scanned[0] <= 2 * len(text)


def test_many_integer_variables_are_not_followed() -> None:
    """Each declared name is a scan of the text: past 64 names their values are taken for
    run-time ones (the decision asks) instead of scanning the text for each."""
    names = " ".join(f"v{i}" for i in range(65))
    found = _arith.text_assignments(f"declare -i {names}; v1=2")
    assert found.unknown_name
    few = " ".join(f"v{i}" for i in range(64))
    assert not _arith.text_assignments(f"declare -i {few}; v1=2").unknown_name


def test_nesting_deeper_than_the_stack_is_not_followed_and_the_decision_is_typed() -> None:
    text = "echo " + "${" * 1200
    assert literal_spans(text).spans == []
    decision = Policy.default().decide(
        ToolCall(tool="shell_exec", arguments={"command": text}),
        Catalogue(folders=()).get("shell_exec"),
    )
    assert decision.action in ("ask", "deny")


def test_holds_answers_as_a_scan_of_every_range_would() -> None:
    text = "echo 'a' \"b\" 'cd' x 'efg'"
    spans = literal_spans(text)
    for start in range(len(text)):
        for end in range(start, len(text) + 1):
            expected = any(a <= start and end <= b for a, b in spans.spans)
            assert spans.holds(start, end) == expected, (start, end)
