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


def test_a_workspace_whose_path_is_not_utf8_is_refused_at_once(workspace: Path) -> None:
    """A directory name need not be UTF-8 (an old archive's Latin-1 name). With such a
        workspace every sandboxed call hung for 30 s and then failed with internal_error
        'UnicodeEncodeError: ... surrogates not allowed' (the call's plan could not be sent to
        the fork-server, and the backend waited for the report of a call never started). It
        is now a sandbox_error saying so; tools without a workspace (current_time, sandboxed
    too) still run."""
    import os

    from runtime.broker import SyncBroker

    odd = Path(os.fsdecode(bytes(workspace.parent) + b"/caf\xe9"))
    odd.mkdir()
    odd.chmod(0o777)
    (odd / "f.txt").write_text("x")
    with SyncBroker(workspace=odd, audit=workspace.parent / "audit.db") as broker:
        result = broker.call({"tool": "read_file", "arguments": {"path": "f.txt"}})
        clock = broker.call({"tool": "current_time", "arguments": {}})
    assert result.error is not None and result.error.type == "sandbox_error", result
    assert "UTF-8" in result.error.message and "caf\\xe9" in result.error.message
    assert clock.success, clock


def test_a_spawn_that_cannot_be_encoded_is_a_sandbox_error(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever makes a call's spawn message unencodable (here the workspace check above
    is switched off), the call is a sandbox_error saying so, and the backend does not wait
    for the exit report of a call the fork-server never heard of (it waited 30 s, then the
    UnicodeEncodeError escaped as internal_error); the next call runs."""
    import os

    from runtime.backends.sandbox import backend
    from runtime.broker import SyncBroker

    monkeypatch.setattr(backend, "_carried", lambda workspace: workspace)
    odd = Path(os.fsdecode(bytes(workspace.parent) + b"/caf\xe9"))
    odd.mkdir()
    odd.chmod(0o777)
    with SyncBroker(workspace=odd, audit=workspace.parent / "audit.db") as broker:
        result = broker.call({"tool": "read_file", "arguments": {"path": "f.txt"}})
        clock = broker.call({"tool": "current_time", "arguments": {}})
    assert result.error is not None and result.error.type == "sandbox_error", result
    assert "could not be encoded" in result.error.message
    assert clock.success, clock


def test_a_tree_too_deep_to_mask_can_be_deleted_from_inside(workspace: Path) -> None:
    """A tree deeper than the mask walk checks (``mkdir -p`` in a shell, or by hand) failed
    every call at mount_masks, delete_file of it too: nothing could repair the workspace
    from inside. Other calls still fail closed, and say how to repair; a recursive
    delete_file of a folder that holds the deep part runs (the walk stops inside what it
    removes) and removes it, past the call's nofile limit; then calls run again."""
    import os

    from runtime.backends.sandbox import masks
    from runtime.broker import SyncBroker

    os.makedirs(workspace / ("d/" * (masks.MAX_DEPTH + 40)))
    (workspace / "d" / "d" / "f.txt").write_text("x\n")
    read = {"tool": "read_file", "arguments": {"path": "hello.txt"}}
    with SyncBroker(workspace=workspace) as broker:
        refused = broker.call(read)
        shallow = broker.call({"tool": "delete_file", "arguments": {"path": "hello.txt"}})
        deleted = broker.call(
            {"tool": "delete_file", "arguments": {"path": "d/d", "recursive": True}}
        )
        after = broker.call(read)
    for result in (refused, shallow):
        assert result.error is not None and result.error.type == "sandbox_error", result
        assert f"deeper than {masks.MAX_DEPTH}" in result.error.message
        assert "delete_file" in result.error.message
    assert deleted.success, deleted
    assert after.success, after
    assert os.listdir(workspace / "d") == []
