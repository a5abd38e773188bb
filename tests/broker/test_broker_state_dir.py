"""The workspace's ``.runtime`` is checked before the broker keeps its audit log and state in
it (``runtime/broker/_statedir.py``). A checkout can carry a ``.runtime`` symlink: it sent a
root broker's audit.db and state.db (0644, readable by every user) wherever it pointed."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from runtime import SyncBroker
from runtime.broker import Broker
from runtime.errors import ConfigError, ToolFailed
from tests.cli.test_cli import run

CALL = '{"tool": "no_such_tool", "arguments": {}}'


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    return tmp_path / "ws"


def test_symlinked_state_dir_is_refused(ws: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (ws / ".runtime").symlink_to(elsewhere)
    with pytest.raises(ConfigError, match="symlink") as info:
        Broker(workspace=ws)
    assert info.value.details["path"] == str(ws / ".runtime")
    assert "--audit" in info.value.message
    assert list(elsewhere.iterdir()) == []


def test_cli_symlinked_state_dir_exits_64(ws: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (ws / ".runtime").symlink_to(elsewhere)
    proc = run("exec", "-", "--workspace", str(ws), cwd=tmp_path, stdin=CALL)
    assert proc.returncode == 64, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert f"{ws}/.runtime" in proc.stderr and "symlink" in proc.stderr
    assert list(elsewhere.iterdir()) == []


@pytest.mark.wasm
def test_symlinked_state_dir_with_audit_elsewhere_is_not_used(ws: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (ws / ".runtime").symlink_to(elsewhere)
    with SyncBroker(workspace=ws, audit=tmp_path / "audit.db") as broker:
        assert broker.call({"tool": "json_parse", "arguments": {"text": "[1]"}}).success
        memory = broker.call({"tool": "memory_write", "arguments": {"key": "k", "content": "v"}})
        assert memory.error is not None and memory.error.type == "tool_error"
    assert list(elsewhere.iterdir()) == []


def test_symlinked_default_audit_log_is_refused(ws: Path, tmp_path: Path) -> None:
    (ws / ".runtime").mkdir(mode=0o700)
    (ws / ".runtime" / "audit.db").symlink_to(tmp_path / "planted.db")
    with pytest.raises(ConfigError, match="symlink"):
        Broker(workspace=ws)
    assert not (tmp_path / "planted.db").exists()


def test_a_state_dir_owned_by_another_user_is_refused(ws: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a directory another user owns needs root")
    (ws / ".runtime").mkdir(mode=0o700)
    os.chown(ws / ".runtime", 65534, 65534)
    with pytest.raises(ConfigError, match="owned by uid 65534"):
        Broker(workspace=ws)
    assert list((ws / ".runtime").iterdir()) == []


@pytest.mark.parametrize("mode", [0o755, 0o777])
def test_a_loose_state_dir_of_ours_is_tightened(ws: Path, mode: int) -> None:
    (ws / ".runtime").mkdir()
    (ws / ".runtime").chmod(mode)
    with SyncBroker(workspace=ws) as broker:
        assert broker.state_dir == ws / ".runtime"
        assert (ws / ".runtime").stat().st_mode & 0o777 == 0o700


def test_a_new_state_dir_is_private(ws: Path) -> None:
    old = os.umask(0)
    try:
        with SyncBroker(workspace=ws):
            pass
    finally:
        os.umask(old)
    assert (ws / ".runtime").stat().st_mode & 0o777 == 0o700


# The state store (.runtime/state.db) is checked as the default audit log is: SQLite opened a
# symlinked name's target (another workspace's memories read and written) and created a
# dangling one's (a 0644 file of a root broker anywhere).


def _victim(tmp_path: Path) -> Path:
    """A workspace with a memory in its state store; its store's path."""
    with SyncBroker(workspace=tmp_path / "victim") as broker:
        wrote = broker.call(
            {"tool": "memory_write", "arguments": {"key": "db-password", "content": "hunter2"}}
        )
        assert wrote.success, wrote.error
    return tmp_path / "victim" / ".runtime" / "state.db"


def test_symlinked_state_store_is_refused(ws: Path, tmp_path: Path) -> None:
    store = _victim(tmp_path)
    before = store.read_bytes()
    (ws / ".runtime").mkdir(mode=0o700)
    (ws / ".runtime" / "state.db").symlink_to(store)
    with pytest.raises(ConfigError, match="symlink") as info:
        Broker(workspace=ws)
    assert info.value.details["path"] == str(ws / ".runtime" / "state.db")
    assert store.read_bytes() == before


def test_dangling_state_store_link_creates_nothing(ws: Path, tmp_path: Path) -> None:
    (ws / ".runtime").mkdir(mode=0o700)
    (ws / ".runtime" / "state.db").symlink_to(tmp_path / "created-by-broker")
    with pytest.raises(ConfigError, match="symlink"):
        Broker(workspace=ws)
    assert not os.path.lexists(tmp_path / "created-by-broker")


def test_cli_symlinked_state_store_exits_64(ws: Path, tmp_path: Path) -> None:
    (ws / ".runtime").mkdir(mode=0o700)
    (ws / ".runtime" / "state.db").symlink_to(tmp_path / "created-by-broker")
    proc = run("exec", "-", "--workspace", str(ws), cwd=tmp_path, stdin=CALL)
    assert proc.returncode == 64, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert f"{ws}/.runtime/state.db" in proc.stderr and "symlink" in proc.stderr
    assert not os.path.lexists(tmp_path / "created-by-broker")


def test_a_state_store_that_is_not_a_file_is_refused(ws: Path) -> None:
    (ws / ".runtime" / "state.db").mkdir(mode=0o700, parents=True)
    with pytest.raises(ConfigError, match="not a regular file"):
        Broker(workspace=ws)


def test_a_state_store_owned_by_another_user_is_refused(ws: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a file another user owns needs root")
    (ws / ".runtime").mkdir(mode=0o700)
    (ws / ".runtime" / "state.db").touch()
    os.chown(ws / ".runtime" / "state.db", 65534, 65534)
    with pytest.raises(ConfigError, match="owned by uid 65534"):
        Broker(workspace=ws)


def test_a_default_audit_log_that_is_not_a_file_is_refused(ws: Path) -> None:
    (ws / ".runtime" / "audit.db").mkdir(mode=0o700, parents=True)
    with pytest.raises(ConfigError, match="not a regular file"):
        Broker(workspace=ws)


def test_symlinked_state_store_with_audit_elsewhere_is_not_used(ws: Path, tmp_path: Path) -> None:
    (ws / ".runtime").mkdir(mode=0o700)
    (ws / ".runtime" / "state.db").symlink_to(tmp_path / "created-by-broker")
    with SyncBroker(workspace=ws, audit=tmp_path / "audit.db") as broker:
        assert broker.state_dir is None
        memory = broker.call({"tool": "memory_write", "arguments": {"key": "k", "content": "v"}})
        assert memory.error is not None and memory.error.type == "tool_error"
    assert not os.path.lexists(tmp_path / "created-by-broker")


def test_a_state_store_link_planted_after_open_is_refused_per_call(
    ws: Path, tmp_path: Path
) -> None:
    store = _victim(tmp_path)
    before = store.read_bytes()
    with SyncBroker(workspace=ws) as broker:
        (ws / ".runtime" / "state.db").symlink_to(store)
        read = broker.call({"tool": "memory_read", "arguments": {"key": "db-password"}})
        assert read.error is not None and "symlink" in read.error.message
        (ws / ".runtime" / "state.db").unlink()
        (ws / ".runtime" / "state.db").symlink_to(tmp_path / "created-by-broker")
        wrote = broker.call({"tool": "memory_write", "arguments": {"key": "k", "content": "v"}})
        assert wrote.error is not None and "symlink" in wrote.error.message
    assert store.read_bytes() == before
    assert not os.path.lexists(tmp_path / "created-by-broker")


def test_a_state_dir_swapped_for_a_link_after_open_is_refused_per_call(
    ws: Path, tmp_path: Path
) -> None:
    store = _victim(tmp_path)
    before = store.read_bytes()
    empty = tmp_path / "empty"
    empty.mkdir()
    with SyncBroker(workspace=ws) as broker:
        (ws / ".runtime").rename(tmp_path / "moved")
        (ws / ".runtime").symlink_to(store.parent)
        read = broker.call({"tool": "memory_read", "arguments": {"key": "db-password"}})
        assert read.error is not None and read.error.type == "tool_error"
        assert "no longer a directory" in read.error.message and read.result is None
        (ws / ".runtime").unlink()
        (ws / ".runtime").symlink_to(empty)
        wrote = broker.call({"tool": "memory_write", "arguments": {"key": "k", "content": "v"}})
        assert wrote.error is not None and "no longer a directory" in wrote.error.message
    assert store.read_bytes() == before
    assert list(empty.iterdir()) == []  # not even an empty store made there


@pytest.mark.parametrize("first", ["write_file", "memory_write"])
def test_a_removed_workspace_is_not_made_again_by_memory_write(
    ws: Path, tmp_path: Path, first: str
) -> None:
    """Red team Q7: after ``rm -rf WS`` under a running broker (its audit log elsewhere),
    the file tools said the workspace does not exist, but memory_write made it again
    (0755, with a new empty store: what was remembered silently gone) and succeeded. It
    now fails as they do, and makes nothing. ``first``: the host backend starts at its
    first call, and its start made the state directory's parents too."""
    audit = tmp_path / "audit" / "audit.db"
    audit.parent.mkdir()
    calls = {
        "write_file": {"path": "a.txt", "content": "1"},
        "memory_write": {"key": "k", "content": "v"},
    }
    with SyncBroker(workspace=ws, audit=audit) as broker:
        if first == "write_file":
            assert broker.call({"tool": first, "arguments": calls[first]}).success
        shutil.rmtree(ws)
        results = {t: broker.call({"tool": t, "arguments": a}) for t, a in calls.items()}
        assert not os.path.lexists(ws)
        snippet = broker.call({"tool": "snippet_save", "arguments": {"name": "n", "code": "c"}})
        assert not os.path.lexists(ws)
        ws.write_text("a file")  # replaced by a file
        by_file = broker.call({"tool": "memory_write", "arguments": calls["memory_write"]})
    messages = set()
    for result in (*results.values(), snippet):
        assert result.error is not None and result.error.type == "sandbox_error", result
        messages.add(result.error.message)
    assert messages == {
        f"the workspace {ws} does not exist (removed or renamed since the broker opened it); "
        "create it again, or open the broker on another workspace"
    }
    assert by_file.error is not None and by_file.error.type == "sandbox_error"
    assert "not a directory" in by_file.error.message
    assert ws.read_text() == "a file"


def test_a_store_sqlite_reached_through_a_link_is_not_used(tmp_path: Path) -> None:
    """The check after the connect (the name checked out, SQLite opened another file: a
    swap between the two), driven by a ``.runtime`` link that ``_check_dir`` would have
    refused first."""
    from tests.tools.conftest import load_tool

    memory = sys.modules[load_tool("memory_read").__module__]
    store = _victim(tmp_path)
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / ".runtime").symlink_to(store.parent)
    with pytest.raises(ToolFailed, match="changed while it was opened"):
        memory._connect(tmp_path / "ws" / ".runtime" / "state.db")


def test_a_digest_key_owned_by_another_user_is_refused(ws: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a file another user owns needs root")
    (ws / ".runtime").mkdir(mode=0o700)
    key = ws / ".runtime" / "audit.db.digest-key"
    key.write_bytes(b"k" * 32)
    os.chown(key, 65534, 65534)
    with pytest.raises(ConfigError, match="owned by uid 65534"):
        Broker(workspace=ws)
