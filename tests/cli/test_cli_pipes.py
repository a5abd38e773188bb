"""The CLI's standard output going away: ``runtime audit export --jsonl | head -1``,
``runtime tools | head -1``, ``runtime exec … | head -c 10``.

A reader that stops early is ordinary Unix use: the command ends quietly with the status of a
process stopped by SIGPIPE (141, as ``cat`` or ``git log`` give under ``set -o pipefail``),
no traceback, and the call's audit records are whole (``exec`` writes its result only after
the broker closed the log). Before: exit 1 ("the tool ran and failed"), or a traceback and
exit 120 when the error came at the interpreter's final flush. A standard output closed from
the start was an AttributeError traceback after the call had run; it is a usage error (64)
before anything runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.audit import AuditLog
from tests._pythonpath import python_path

ROOT = Path(__file__).resolve().parents[2]
SIGPIPE_STATUS = 141


def _closed_reader(*args: str, cwd: Path) -> tuple[int, str]:
    """Run ``runtime ARGS`` with its stdout a pipe whose reader is gone before it writes."""
    env = {**os.environ, "PYTHONPATH": python_path(ROOT)}
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write to write_end is EPIPE from now on
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "runtime", *args],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            timeout=120,
        )
    finally:
        os.close(write_end)
    return proc.returncode, proc.stderr


def _closed_stdout(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": python_path(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "runtime", *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        timeout=120,
        preexec_fn=lambda: os.close(1),  # the child starts without a standard output
    )


def _log_with_records(tmp_path: Path, n: int) -> Path:
    path = tmp_path / "workspace" / ".runtime" / "audit.db"
    path.parent.mkdir(parents=True)
    with AuditLog(path) as log:
        for i in range(n):
            log.record_request(
                call_id=f"c{i}",
                tool="echo",
                arguments={"text": "x" * 200},
                decision=None,
                backend=None,
                sandbox=None,
            )
    return path


def _call_file(tmp_path: Path) -> Path:
    (tmp_path / "workspace").mkdir(exist_ok=True)
    (tmp_path / "workspace" / "notes.txt").write_text("hello\n" * 50)
    call = tmp_path / "call.json"
    call.write_text(json.dumps({"tool": "read_file", "arguments": {"path": "notes.txt"}}))
    return call


def test_tools_into_a_closed_pipe(tmp_path: Path) -> None:
    assert _closed_reader("tools", cwd=tmp_path) == (SIGPIPE_STATUS, "")


@pytest.mark.parametrize("command", [["export", "--jsonl"], ["tail", "-n", "500"]])
def test_audit_reads_into_a_closed_pipe(tmp_path: Path, command: list[str]) -> None:
    _log_with_records(tmp_path, 500)
    assert _closed_reader("audit", *command, cwd=tmp_path) == (SIGPIPE_STATUS, "")


@pytest.mark.sandbox
def test_exec_into_a_closed_pipe_keeps_its_audit_records(tmp_path: Path) -> None:
    call = _call_file(tmp_path)
    assert _closed_reader("exec", str(call), cwd=tmp_path) == (SIGPIPE_STATUS, "")
    with AuditLog(tmp_path / "workspace" / ".runtime" / "audit.db") as log:
        assert log.verify().ok
        records = log.tail(10)
        assert [(r.kind, r.outcome) for r in records] == [
            ("request", None),
            ("completion", "success"),
        ]


def test_exec_with_stdout_closed_runs_nothing(tmp_path: Path) -> None:
    call = _call_file(tmp_path)
    proc = _closed_stdout("exec", str(call), cwd=tmp_path)
    assert proc.returncode == 64, proc.stderr
    assert "Traceback" not in proc.stderr and "standard output" in proc.stderr
    assert not (tmp_path / "workspace" / ".runtime" / "audit.db").exists()


@pytest.mark.parametrize("args", [["tools"], ["audit", "export"], ["doctor"]])
def test_other_commands_with_stdout_closed(tmp_path: Path, args: list[str]) -> None:
    _log_with_records(tmp_path, 1)
    proc = _closed_stdout(*args, cwd=tmp_path)
    assert proc.returncode == 64, proc.stderr
    assert "Traceback" not in proc.stderr and "standard output" in proc.stderr
