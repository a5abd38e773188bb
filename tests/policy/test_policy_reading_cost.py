"""The command rules read each argument that may name a program as that program's start
('ifne rm -rf /'): one reading per such argument, each over the words after it, was
quadratic in the words of a command. A 12,000-character environment key 'A bA b...' of a
folder tool's ``env`` argument (judged as 'export A bA b...=v') took 16 s and a
60,000-character one minutes, as did a shell_exec command of 'echo rm rm rm ...'.

Asserted on the work done, not on seconds: the calls of the rule matcher (one per rule,
plus one per reading) stay far below the arguments' count; before the fix they grew with
it, and the counter stops such a run early instead of letting it hang."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _policy_helpers import decide

from runtime.catalogue import Catalogue
from runtime.models import ToolCall
from runtime.policy import Policy
from runtime.policy import commands as commands_module
from runtime.policy._writes import writes_through_arguments

#: Most rule-matcher calls a decision below may make: one per rule for each command (some
#: 70), and a few readings. Before the fix each of the 20,000 arguments added one.
MAX_CALLS = 200


class _TooMuchWork(AssertionError):
    pass


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts the calls of ``_Compiled.match_program``; fails the test past MAX_CALLS."""
    count = [0]
    real = commands_module._Compiled.match_program

    def counted(self: Any, cmd: Any) -> Any:
        count[0] += 1
        if count[0] > MAX_CALLS:
            raise _TooMuchWork(f"more than {MAX_CALLS} rule matches for one decision")
        return real(self, cmd)

    monkeypatch.setattr(commands_module._Compiled, "match_program", counted)
    yield count


def _env_tool(folder: Path) -> Catalogue:
    """A folder tool whose schema takes any environment keys, read by the policy as an
    environment (arg_roles ``env``): shell_exec's own schema refuses such keys."""
    manifest = {
        "name": "run_with_env",
        "description": "run a fixed program with extra environment variables",
        "category": "custom",
        "parameters": {
            "type": "object",
            "properties": {"env": {"type": "object", "additionalProperties": {"type": "string"}}},
        },
        "backend": "subprocess",
        "command": ["true"],
        "sandbox": {"exec": True},
        "arg_roles": {"env": "env"},
    }
    (folder / "run_with_env.json").write_text(json.dumps(manifest))
    return Catalogue(folders=[folder])


@pytest.fixture
def allowing() -> Policy:
    return Policy.from_toml(
        'version = 1\ndefault = "deny"\n[tools.run_with_env]\naction = "allow"\n'
        '[categories]\nshell = "allow"\n'
    )


def test_a_long_env_key_with_spaces_is_judged_in_linear_work(
    tmp_path: Path, allowing: Policy, calls: list[int]
) -> None:
    spec = _env_tool(tmp_path).get("run_with_env")
    key = "A b" * 20_000  # 60,000 characters: 'export A bA bA b...=v' is 20,001 words
    call = ToolCall(tool="run_with_env", arguments={"env": {key: "v"}})
    d = allowing.decide(call, spec)
    # No word names a program a rule is about: the tool's own allowance decides.
    assert (d.action, d.rule) == ("allow", "tools.run_with_env")
    assert calls[0] < MAX_CALLS


def test_an_env_key_past_the_analysers_length_is_unparseable(
    tmp_path: Path, allowing: Policy, calls: list[int]
) -> None:
    spec = _env_tool(tmp_path).get("run_with_env")
    call = ToolCall(tool="run_with_env", arguments={"env": {"A b" * 34_000: "v"}})
    d = allowing.decide(call, spec)
    assert (d.action, d.rule) == ("ask", "commands.hazard.unparseable")
    assert calls[0] < MAX_CALLS


def test_a_command_of_many_names_of_a_writing_program_is_bounded(
    allowing: Policy, calls: list[int]
) -> None:
    # Each 'cp' may start a copy onto a block device: the readings stop at their word
    # budget, and the rule may then apply (ask), saying why.
    d = decide(allowing, "shell_exec", command="echo " + "cp " * 20_000)
    assert (d.action, d.rule) == ("ask", "commands.deny.device-write")
    assert "too many of its arguments may name a program" in d.reasons[0]
    assert calls[0] < MAX_CALLS


def test_a_command_of_many_names_of_a_ruled_program_is_bounded(
    allowing: Policy, calls: list[int]
) -> None:
    d = decide(allowing, "shell_exec", command="echo " + "rm " * 20_000)
    assert d.action == "ask"
    assert any("too many of its arguments may name a program" in r for r in d.reasons)
    assert calls[0] < MAX_CALLS


def test_few_readings_are_still_made(allowing: Policy) -> None:
    # The budget leaves ordinary commands their readings.
    d = decide(allowing, "shell_exec", command="ifne " + "x " * 2000 + "dd of=/dev/sda")
    assert (d.action, d.rule) == ("ask", "commands.deny.dd-device")
    assert "only known at run time" in d.reasons[0]


def test_many_arguments_naming_no_writer_are_not_read(allowing: Policy, calls: list[int]) -> None:
    # 'rm f0 ... f9999' (58,890 characters): no argument names a program that writes
    # through its arguments, so the device-write rule reads none of them.
    d = decide(allowing, "shell_exec", command="rm " + " ".join(f"f{i}" for i in range(10_000)))
    assert d.action == "allow"
    assert calls[0] < MAX_CALLS


@pytest.mark.parametrize(
    ("program", "writes"),
    [
        ("cp", True),
        ("dd", True),
        ("tee", True),
        ("sed", True),
        ("gawk", True),
        ("sort", True),
        ("openssl", True),
        ("gcc-12", True),
        ("git", True),
        ("bA", False),
        ("echo", False),
        ("ifne", False),
    ],
)
def test_writes_through_arguments(program: str, writes: bool) -> None:
    assert writes_through_arguments(program) is writes
