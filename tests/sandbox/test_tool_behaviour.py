"""Built-in tools through the broker and the real sandbox, as a demanding user calls them:
what each must return when a call reaches a limit or meets an odd workspace."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from runtime.policy import Policy
from runtime.policy.engine import default_policy_path

pytestmark = [pytest.mark.sandbox]


def _policy(**limits: Any) -> Policy:
    """The built-in default policy with some ``[limits]`` changed."""
    text = default_policy_path().read_text()
    for key, value in limits.items():
        text, n = re.subn(rf"(?m)^{key} = \S+", f"{key} = {value}", text, count=1)
        assert n == 1, key
    return Policy.from_toml(text, "test")


def test_shell_timeout_by_default_keeps_the_partial_output(workspace: Path) -> None:
    """shell_exec's own timeout defaulted to the call's, so the call's deadline (which ends
    the whole sandbox) always came first: the user got "the call exceeded its timeout"
    without a byte of what the command had printed. The tool now stops the command early
    enough to report it."""
    from runtime.broker import SyncBroker

    with SyncBroker(workspace=workspace, policy=_policy(timeout_s=8)) as broker:
        result = broker.call(
            {"tool": "shell_exec", "arguments": {"command": "echo started; sleep 60"}}
        )
        after = broker.call({"tool": "shell_exec", "arguments": {"command": "echo next"}})
    assert result.error is not None and result.error.type == "timeout", result
    assert result.error.details["stdout"] == "started\n"
    assert "killed" in result.error.message
    assert after.success and after.result == {
        "stdout": "next\n",
        "stderr": "",
        "exit_code": 0,
        "truncated": False,
    }
