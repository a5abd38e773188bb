"""Built-in tools through the broker and the real sandbox at the edges a user meets: what
each says when the sandbox's own mounts stand in the way."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = [pytest.mark.sandbox]


def test_deleting_a_folder_that_holds_a_masked_file_says_why(workspace: Path) -> None:
    """``sub/.env`` is hidden by a mount (default policy, ``**/.env``): delete_file of
    ``sub`` failed with "cannot access path 'sub': Device or resource busy" (os_error),
    which named neither the cause nor what to do."""
    from runtime.broker import SyncBroker

    (workspace / "sub").mkdir()
    (workspace / "sub" / ".env").write_text("TOKEN=1\n")
    (workspace / "sub").chmod(0o777)
    with SyncBroker(workspace=workspace) as broker:
        result = broker.call(
            {"tool": "delete_file", "arguments": {"path": "sub", "recursive": True}}
        )
    assert result.error is not None and result.error.type == "tool_error", result
    assert result.error.details["reason"] == "masked", result.error
    assert "policy" in result.error.message
    assert (workspace / "sub" / ".env").read_text() == "TOKEN=1\n"
