"""``runtime audit verify|tail|export`` without ``--audit`` read the workspace's
``.runtime/audit.db`` without the checks ``runtime exec`` makes of it: a checkout carrying
``.runtime/audit.db -> /another/log`` had the other log verified (and called this
workspace's), and a FIFO there hung the command for ever. Now the default log gets the
broker's checks (a symlink, a non-regular file, someone else's: exit 64, and
``--audit PATH`` named as the way out); an explicit ``--audit`` may be a symlink the user
named, but not a FIFO or a device."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from runtime.audit import AuditLog
from tests._cli_run import run_runtime

COMMANDS = ["verify", "tail", "export"]


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_runtime(*args, cwd=cwd, timeout=20)


def _state_dir(tmp_path: Path) -> Path:
    state = tmp_path / "ws" / ".runtime"
    state.mkdir(parents=True, mode=0o700)
    return state


def _other_log(tmp_path: Path) -> Path:
    other = tmp_path / "elsewhere" / "audit.db"
    other.parent.mkdir()
    AuditLog(other).close()
    return other


@pytest.mark.parametrize("command", COMMANDS)
def test_a_symlinked_default_log_is_refused(tmp_path: Path, command: str) -> None:
    other = _other_log(tmp_path)
    (_state_dir(tmp_path) / "audit.db").symlink_to(other)
    proc = _run("audit", command, "--workspace", "ws", cwd=tmp_path)
    assert proc.returncode == 64, (proc.stdout, proc.stderr)
    assert "symlink" in proc.stderr and "--audit" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


@pytest.mark.parametrize("command", COMMANDS)
def test_a_fifo_as_default_log_is_refused_not_waited_on(tmp_path: Path, command: str) -> None:
    os.mkfifo(_state_dir(tmp_path) / "audit.db")
    proc = _run("audit", command, "--workspace", "ws", cwd=tmp_path)
    assert proc.returncode == 64, (proc.stdout, proc.stderr)
    assert "not a regular file" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("command", COMMANDS)
def test_an_explicit_fifo_or_device_is_refused(tmp_path: Path, command: str) -> None:
    fifo = tmp_path / "log.db"
    os.mkfifo(fifo)
    for path in (str(fifo), "/dev/zero"):
        proc = _run("audit", command, "--audit", path, cwd=tmp_path)
        assert proc.returncode == 64, (path, proc.stdout, proc.stderr)
        assert f"{path} is not a regular file" in proc.stderr and "Traceback" not in proc.stderr


def test_an_explicit_symlink_is_followed(tmp_path: Path) -> None:
    # The user named it: --audit through a link reads the log it points to.
    link = tmp_path / "link.db"
    link.symlink_to(_other_log(tmp_path))
    proc = _run("audit", "verify", "--audit", str(link), cwd=tmp_path)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert '"ok": true' in proc.stdout


def test_the_default_log_still_reads(tmp_path: Path) -> None:
    AuditLog(_state_dir(tmp_path) / "audit.db").close()
    proc = _run("audit", "verify", "--workspace", "ws", cwd=tmp_path)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert '"ok": true' in proc.stdout


def test_a_symlinked_state_directory_is_refused(tmp_path: Path) -> None:
    other = _other_log(tmp_path)
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / ".runtime").symlink_to(other.parent)
    proc = _run("audit", "verify", "--workspace", "ws", cwd=tmp_path)
    assert proc.returncode == 64, (proc.stdout, proc.stderr)
    assert "symlink" in proc.stderr and "--audit" in proc.stderr
