"""The red-team reproductions of the oversized session environment, end to end through a
broker: the call that would overflow is refused with a typed error, and every sandboxed
tool keeps working (it failed for good, for every session and MCP client of the broker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.broker import SyncBroker
from runtime.models import ToolResult
from runtime.toolkit_env import SESSION_ENV_MAX_BYTES

pytestmark = pytest.mark.sandbox


def _set(broker: SyncBroker, key: str, value: str | None) -> ToolResult:
    return broker.call({"tool": "set_env", "arguments": {"key": key, "value": value}})


def test_one_value_of_128_kib_is_refused_and_the_sandbox_lives_on(workspace: Path) -> None:
    """_probe/p10.py: 32768 emoji are 128 KiB of UTF-8 in one value."""
    with SyncBroker(workspace=workspace) as broker:
        assert broker.call({"tool": "shell_exec", "arguments": {"command": "echo warm"}}).success
        refused = _set(broker, "NOTE", "\U0001f600" * 32768)
        assert not refused.success and refused.error is not None
        error = refused.error
        assert error.type == "resource_limit"
        assert error.details["reason"] == "env_too_large"
        assert str(SESSION_ENV_MAX_BYTES) in error.message
        read = broker.call({"tool": "read_file", "arguments": {"path": "hello.txt"}})
        assert read.success and read.result["content"] == "hello\n"
        after = broker.call({"tool": "shell_exec", "arguments": {"command": "echo after"}})
        assert after.success and after.result["stdout"] == "after\n"


def test_four_values_of_32_kib_fill_the_bound_and_the_sandbox_lives_on(
    workspace: Path,
) -> None:
    """_probe/p8.py 4: four ASCII values of 32 KiB each; what fits is kept and seen."""
    with SyncBroker(workspace=workspace) as broker:
        assert broker.call({"tool": "shell_exec", "arguments": {"command": "echo warm"}}).success
        results = [_set(broker, f"V{i}", "x" * 32768).success for i in range(4)]
        assert results[0] and not any(results[1:])
        shown = broker.call(
            {"tool": "shell_exec", "arguments": {"command": 'printf %s "$V0" | wc -c'}}
        )
        assert shown.success and shown.result["stdout"].strip() == "32768"
        assert broker.call({"tool": "read_file", "arguments": {"path": "hello.txt"}}).success
