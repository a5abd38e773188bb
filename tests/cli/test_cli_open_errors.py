"""What the CLI prints when its workspace or audit log cannot be opened: one line naming
the path and the reason, and an exit code of DESIGN §7 — not a Python traceback with exit 1
(which reads as "the tool ran and failed")."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_cli import run

CALL = '{"tool": "no_such_tool", "arguments": {}}'


def _no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("runtime: "), proc.stderr


def test_exec_workspace_that_is_a_file_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "ws").write_text("not a directory")
    proc = run("exec", "-", "--workspace", "ws", cwd=tmp_path, stdin=CALL)
    assert proc.returncode == 64
    _no_traceback(proc)
    assert "ws" in proc.stderr and proc.stdout == ""


@pytest.mark.parametrize("what", ["garbage", "directory"])
def test_exec_audit_log_that_cannot_be_opened(tmp_path: Path, what: str) -> None:
    audit = tmp_path / "audit.db"
    if what == "garbage":
        audit.write_text("this is not a database\n" * 100)
    else:
        audit.mkdir()
    proc = run("exec", "-", "--audit", str(audit), cwd=tmp_path, stdin=CALL)
    assert proc.returncode == 70
    _no_traceback(proc)
    assert str(audit) in proc.stderr


@pytest.mark.parametrize("command", ["verify", "tail", "export"])
def test_audit_commands_on_a_database_that_cannot_be_opened(tmp_path: Path, command: str) -> None:
    audit = tmp_path / "audit.db"
    audit.write_text("this is not a database\n" * 100)
    proc = run("audit", command, "--audit", str(audit), cwd=tmp_path)
    assert proc.returncode == 70
    _no_traceback(proc)
    assert str(audit) in proc.stderr


@pytest.mark.parametrize("command", ["tail", "export"])
def test_audit_commands_on_a_record_edited_into_nonsense(tmp_path: Path, command: str) -> None:
    audit = tmp_path / "audit.db"
    run("exec", "-", "--audit", str(audit), cwd=tmp_path, stdin=CALL)
    with sqlite3.connect(audit) as db:
        db.execute("DROP TRIGGER audit_records_no_update")
        db.execute("UPDATE audit_records SET kind = 'zzz' WHERE seq = 1")
    proc = run("audit", command, "--audit", str(audit), cwd=tmp_path)
    assert proc.returncode == 70
    _no_traceback(proc)
    assert "verify" in proc.stderr  # it says what to run next


def test_exec_audit_log_locked_by_another_process(tmp_path: Path) -> None:
    audit = tmp_path / "audit.db"
    run("exec", "-", "--audit", str(audit), cwd=tmp_path, stdin=CALL)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys, time\n"
            "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "db.execute('BEGIN EXCLUSIVE')\n"
            "print('locked', flush=True)\n"
            "time.sleep(60)\n",
            str(audit),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    try:
        assert holder.stdout.readline() == "locked\n"
        proc = run("exec", "-", "--audit", str(audit), cwd=tmp_path, stdin=CALL)
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    assert proc.returncode == 70
    _no_traceback(proc)
    assert "locked" in proc.stderr
    # the lock is gone with the holder: the log still verifies
    assert run("audit", "verify", "--audit", str(audit), cwd=tmp_path).returncode == 0


@pytest.mark.parametrize("what", ["bad_manifest", "missing_folder"])
def test_tools_with_a_tools_dir_that_does_not_load(tmp_path: Path, what: str) -> None:
    folder = tmp_path / "mytools"
    if what == "bad_manifest":
        folder.mkdir()
        (folder / "x.json").write_text('{"name": "x"}')
    proc = run("tools", "--tools-dir", str(folder), cwd=tmp_path)
    assert proc.returncode == 64  # like exec and policy check with the same folder
    _no_traceback(proc)
    assert "mytools" in proc.stderr


def test_serve_with_an_audit_log_that_cannot_be_opened(tmp_path: Path) -> None:
    audit = tmp_path / "audit.db"
    audit.write_text("this is not a database\n" * 100)
    proc = run("serve", "--mcp", "--workspace", "ws", "--audit", str(audit), cwd=tmp_path)
    assert proc.returncode == 70
    _no_traceback(proc)
    assert str(audit) in proc.stderr
