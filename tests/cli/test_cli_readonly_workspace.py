"""A workspace this user may only read (a read-only checkout, someone else's tree).

The default audit log lives in the workspace (``.runtime/audit.db``), and the broker always
made ``.runtime/`` there, so ``runtime exec`` in such a workspace failed even with ``--audit``
pointing elsewhere ('cannot create …/.runtime as a directory: Permission denied'), and said
nothing of the way out. Now: with ``--audit`` elsewhere the read tools work (and the call is
recorded there); without it, one line names the default log that cannot be made and the
``--audit`` option (exit 64), before anything runs.

The CLI runs from outside the workspace (``python -m runtime`` puts its current directory
on sys.path): without root the read-only tree is this user's own after a chmod, which a call
could undo, so the broker refuses a workspace holding a directory it imports from.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.audit import AuditLog
from runtime.errors import ConfigError
from tests.cli.test_cli_open_errors import _as_reader_without_write_access

CALL = {"tool": "read_file", "arguments": {"path": "notes.txt"}, "call_id": "ro1"}


@pytest.fixture
def checkout() -> Iterator[tuple[Path, Path]]:
    """(a workspace with a file and a call, a directory anyone may write for the log).
    Not under tmp_path: pytest makes it private to this user."""
    ws = Path(tempfile.mkdtemp(prefix="rt-ro-ws-"))
    logs = Path(tempfile.mkdtemp(prefix="rt-ro-logs-"))
    (ws / "notes.txt").write_text("read me\n")
    (ws / "call.json").write_text(json.dumps(CALL))
    ws.chmod(0o755)
    logs.chmod(0o777)
    try:
        yield ws, logs
    finally:
        ws.chmod(0o755)
        shutil.rmtree(ws)
        shutil.rmtree(logs)


def test_without_audit_the_error_names_the_default_log_and_the_fix(
    checkout: tuple[Path, Path],
) -> None:
    ws, logs = checkout
    proc = _as_reader_without_write_access(
        ws, "exec", str(ws / "call.json"), "--workspace", str(ws), cwd=logs
    )
    assert proc.returncode == 64, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert f"{ws}/.runtime" in proc.stderr and "--audit" in proc.stderr
    assert not (ws / ".runtime").exists()


@pytest.mark.sandbox
def test_with_audit_elsewhere_read_tools_work(checkout: tuple[Path, Path]) -> None:
    ws, logs = checkout
    audit = logs / "audit.db"
    proc = _as_reader_without_write_access(
        ws, "exec", str(ws / "call.json"), "--workspace", str(ws), "--audit", str(audit), cwd=logs
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["result"]["content"] == "read me\n"
    assert not (ws / ".runtime").exists()
    with AuditLog(audit) as log:
        assert [(r.kind, r.call_id) for r in log.tail(5)] == [
            ("request", "ro1"),
            ("completion", "ro1"),
        ]


def _refuse_state_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    """mkdir of a ``.runtime`` directory fails as in a read-only workspace (root may write
    anywhere, so the permission is simulated here)."""
    real = Path.mkdir

    def mkdir(self: Path, *args: Any, **kw: Any) -> None:
        if self.name == ".runtime":
            raise PermissionError(13, "Permission denied", str(self))
        real(self, *args, **kw)

    monkeypatch.setattr(Path, "mkdir", mkdir)


def test_api_without_audit_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runtime import SyncBroker

    _refuse_state_dir(monkeypatch)
    with pytest.raises(ConfigError) as info:
        SyncBroker(workspace=tmp_path / "ws").open()
    message = info.value.message
    assert str(tmp_path / "ws" / ".runtime") in message and "audit=" in message


@pytest.mark.wasm
def test_api_with_audit_elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from runtime import SyncBroker

    _refuse_state_dir(monkeypatch)
    with SyncBroker(workspace=tmp_path / "ws", audit=tmp_path / "audit.db") as broker:
        ok = broker.call({"tool": "json_parse", "arguments": {"text": "[1]"}})
        assert ok.success, ok.error
        # The host tools that keep state there say why they cannot; the rest work.
        memory = broker.call({"tool": "memory_write", "arguments": {"key": "k", "content": "v"}})
        assert memory.error is not None and memory.error.type == "tool_error"
        assert ".runtime" in memory.error.message
        env = broker.call({"tool": "get_env", "arguments": {"key": "HOME"}})
        assert env.error is None or env.error.type != "internal_error", env.error
