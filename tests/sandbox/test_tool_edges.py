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


def test_a_workspace_removed_or_replaced_between_calls_is_named(workspace: Path) -> None:
    """The workspace removed (or a file put in its place) after the broker opened it: calls
    failed with the set-up's internals — "open_tree: No such file or directory" (as an
    ordinary user), "FileNotFoundError: [Errno 2] …" (as root), and for a file "move_mount
    /tmp/workspace: Is a directory", a path that is not the user's. Each now names the
    workspace and what is wrong; the next call after it is back works."""
    import shutil

    from runtime.broker import SyncBroker

    audit = workspace.parent / "audit.db"
    call = {"tool": "read_file", "arguments": {"path": "hello.txt"}}
    with SyncBroker(workspace=workspace, audit=audit) as broker:
        assert broker.call(call).success
        shutil.rmtree(workspace)
        gone = broker.call(call)
        workspace.write_text("")
        a_file = broker.call(call)
        shell = broker.call({"tool": "shell_exec", "arguments": {"command": "true"}})
        workspace.unlink()
        workspace.mkdir()
        (workspace / "hello.txt").write_text("back\n")
        workspace.chmod(0o777)
        back = broker.call(call)
    assert gone.error is not None and gone.error.type == "sandbox_error", gone
    assert str(workspace) in gone.error.message and "does not exist" in gone.error.message
    for result in (a_file, shell):
        assert result.error is not None and result.error.type == "sandbox_error", result
        assert str(workspace) in result.error.message
        assert "not a directory" in result.error.message
    assert back.success and back.result is not None and back.result["content"] == "back\n"
