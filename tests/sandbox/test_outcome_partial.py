"""The exit report's verdicts keep what the tool had already said: a call a process of
which was killed for memory still returns the output printed before."""

from __future__ import annotations

import pytest

from runtime.backends.sandbox import _outcome
from runtime.backends.sandbox.child import STREAM_DETAIL_MAX_CHARS
from runtime.errors import ResourceLimitExceeded, ToolTimeout
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
    """The child is hostile: only string streams are taken, each bounded (its head and its
    tail, as a killed command's output is reported: toolkit_proc.DETAIL_*_BYTES)."""
    stdout = "x" * 100_000 + "END"
    terminal = {"type": "result", "value": {"stdout": stdout, "stderr": {"a": 1}}}
    report = {"type": "exit", "code": 0, "oom_kills": 1}
    with pytest.raises(ResourceLimitExceeded) as exc:
        _outcome.outcome(terminal, None, report, Limits(), {})
    kept = exc.value.details["stdout"]
    assert len(kept) <= STREAM_DETAIL_MAX_CHARS
    assert kept.startswith("xxx") and kept.endswith("xEND") and "characters left out" in kept
    assert "stderr" not in exc.value.details
    with pytest.raises(ResourceLimitExceeded) as exc:
        _outcome.outcome(None, None, report, Limits(), {})
    assert set(exc.value.details) == {"limit"}


def test_a_timeout_keeps_the_head_and_tail_the_tool_sent() -> None:
    """A command's timeout (raised by the tool in the child) carries each stream's first
    and last 4 KiB: the broker's bound on details kept only the first 1 KiB of them."""
    stdout = "a" * 4096 + "\n[... 99999 bytes of output left out ...]\n" + "z" * 4096
    frame = {
        "kind": "typed",
        "error_type": "timeout",
        "message": "the command did not finish within 1 s and was killed",
        "details": {"stdout": stdout, "stderr": "", "truncated": True, "timeout_s": 1},
    }
    with pytest.raises(ToolTimeout) as exc:
        _outcome.raise_tool_error(frame, Limits(), {})
    assert exc.value.details["stdout"] == stdout
    assert exc.value.details["truncated"] is True
    # Other details keep their bound.
    frame["details"] = {"reason": "r" * 5000}
    with pytest.raises(ToolTimeout) as exc:
        _outcome.raise_tool_error(frame, Limits(), {})
    assert len(exc.value.details["reason"]) == 1024
