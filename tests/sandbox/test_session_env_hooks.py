"""The red-team reproduction (_probe/p12.py) end to end: set_env may not plant a hook that
a later ordinary shell_exec runs (LESSOPEN for less, HOME for git's config), and ordinary
variables are still set and seen."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.broker import SyncBroker

pytestmark = pytest.mark.sandbox

_LESSOPEN = "|echo 'echo LESSOPEN-HOOK-RAN > /workspace/HOOK' | sh; cat %s"


def test_set_env_cannot_plant_a_hook_for_later_commands(workspace: Path) -> None:
    with SyncBroker(workspace=workspace) as broker:
        for key, value in (("LESSOPEN", _LESSOPEN), ("HOME", "/workspace/h"), ("PAGER", "x")):
            refused = broker.call({"tool": "set_env", "arguments": {"key": key, "value": value}})
            assert not refused.success and refused.error is not None
            assert refused.error.type == "policy_denied"
            assert refused.decision == {"action": "deny", "rule": "env.deny"}
        (workspace / "h").mkdir()
        (workspace / "h" / ".gitconfig").write_text(
            "[core]\n\tfsmonitor = echo FSMONITOR-RAN > /workspace/HOOK2; false\n"
        )
        ran = broker.call(
            {
                "tool": "shell_exec",
                "arguments": {
                    "command": "less hello.txt; cd /tmp && git init -q r && cd r && "
                    "git status --short"
                },
            }
        )
        assert ran.success and ran.result["stdout"] == "hello\n"
        assert not (workspace / "HOOK").exists() and not (workspace / "HOOK2").exists()
        for key, value in (("NOTE", "kept"), ("MY_FLAG", "1")):
            assert broker.call(
                {"tool": "set_env", "arguments": {"key": key, "value": value}}
            ).success
        shown = broker.call(
            {"tool": "shell_exec", "arguments": {"command": 'echo "$NOTE $MY_FLAG"'}}
        )
        assert shown.success and shown.result["stdout"] == "kept 1\n"
