"""The exit report's verdicts keep what the tool had already said: a call a process of
which was killed for memory still returns the output printed before."""

from __future__ import annotations

import pytest

from runtime.backends.sandbox import _outcome
from runtime.errors import ResourceLimitExceeded
from runtime.models import Limits


@pytest.mark.parametrize(
    "terminal",
    [
        # The shell lived on and returned (its child was the one killed).
        {"type": "result", "value": {"stdout": "held\n", "stderr": "Killed\n", "exit_code": 137}},
        # The tool failed on its own afterwards (a timeout with its partial output).
        {
            "type": "error",
            "kind": "typed",
            "error_type": "timeout",
            "message": "the command did not finish",
            "details": {"stdout": "held\n", "stderr": "Killed\n"},
        },
    ],
)
def test_an_oom_kill_keeps_the_commands_output(terminal: dict[str, object]) -> None:
    """A call whose cgroup OOM-killed a process reported only "the call exceeded its N MiB
    memory limit": what the command had printed (a build's log up to the kill) was lost."""
    report = {"type": "exit", "code": 0, "oom_kills": 1}
    with pytest.raises(ResourceLimitExceeded) as exc:
        _outcome.outcome(terminal, None, report, Limits(memory_mb=128), {"wall_ms": 1.0})
    assert exc.value.details["limit"] == "memory_mb"
    assert exc.value.details["stdout"] == "held\n"
    assert exc.value.details["stderr"] == "Killed\n"


def test_an_oom_kill_keeps_only_bounded_strings() -> None:
    """The child is hostile: only string streams are taken, each bounded like any detail."""
    terminal = {"type": "result", "value": {"stdout": "x" * 100_000, "stderr": {"a": 1}}}
    report = {"type": "exit", "code": 0, "oom_kills": 1}
    with pytest.raises(ResourceLimitExceeded) as exc:
        _outcome.outcome(terminal, None, report, Limits(), {})
    assert len(exc.value.details["stdout"]) <= 1024
    assert "stderr" not in exc.value.details
    with pytest.raises(ResourceLimitExceeded) as exc:
        _outcome.outcome(None, None, report, Limits(), {})
    assert set(exc.value.details) == {"limit"}
