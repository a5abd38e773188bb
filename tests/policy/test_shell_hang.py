"""bashlex 0.18 loops forever on an unclosed ``${`` inside a word (``a'${'``): the policy's
shell analysis must end, with the command unparseable (ask or deny, never allow). A
regression hangs here until pytest's per-test timeout fails it."""

from __future__ import annotations

import pytest

from runtime.policy.commands import CommandRules
from runtime.policy.schema import CommandsSection
from runtime.policy.shell import analyse

# Found by the property test of test_policy_commands.py (and a random search): each one
# froze the broker before the guard.
HANGS = [
    "a'${'",
    "echo a'${'",
    "~m'>=b${<'",
    "'r>?!/${]<'/",
    "}f'${\n{;~m';>|",
    "rm -rf / ; x'${y'",
]


@pytest.mark.parametrize("command", HANGS)
def test_unclosed_parameter_expansion_is_unparseable(command: str) -> None:
    found = analyse(command)
    assert any(h.kind == "unparseable" for h in found.hazards), found


def test_closed_parameter_expansion_still_parses() -> None:
    found = analyse("echo a'${'}")
    assert not any(h.kind == "unparseable" for h in found.hazards), found
    assert [c.program for c in found.commands] == ["echo"]


@pytest.mark.parametrize("command", HANGS)
def test_the_command_rules_never_allow_it(command: str) -> None:
    found = CommandRules(CommandsSection()).check(command)
    assert found and {f.action for f in found} <= {"ask", "deny"}, found
