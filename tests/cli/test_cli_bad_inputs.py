"""Inputs the CLI cannot use are usage errors (exit 64) with a clear message, never a
traceback or an internal error: stdin closed, a --session that is not UTF-8, a --policy
that never ends."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests._pythonpath import python_path
from tests.cli.test_cli import ROOT, run

CALL = '{"tool": "json_parse", "arguments": {"text": "1"}}'


def test_exec_from_closed_stdin_is_a_usage_error(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": python_path(ROOT)}
    proc = subprocess.run(
        ["sh", "-c", 'exec "$0" -m runtime exec - --workspace ws <&-', sys.executable],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 64, proc.stderr
    assert "stdin is closed" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_session_that_is_not_utf8_is_a_usage_error(tmp_path: Path) -> None:
    proc = run("exec", "-", "--workspace", "ws", "--session", b"\xff", cwd=tmp_path, stdin=CALL)
    assert proc.returncode == 64, proc.stderr
    assert "--session must be valid UTF-8" in proc.stderr
    assert proc.stdout == ""


def test_policy_file_without_end_is_refused(tmp_path: Path) -> None:
    proc = run("exec", "-", "--workspace", "ws", "--policy", "/dev/zero", cwd=tmp_path, stdin=CALL)
    assert proc.returncode == 64, proc.stderr
    assert "/dev/zero: policy file is larger than 4194304 bytes" in proc.stderr
