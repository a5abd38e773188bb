"""Inputs the CLI cannot use are usage errors (exit 64) with a clear message, never a
traceback or an internal error: stdin closed, a --session that is not UTF-8, a --policy
that never ends, an ``audit tail -n`` or ``--expect-head`` SEQ out of bounds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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


def _audited(tmp_path: Path) -> None:
    assert run("exec", "-", "--workspace", "ws", cwd=tmp_path, stdin=CALL).returncode == 0


@pytest.mark.parametrize("n", ["99999999999999999999", "1000000001", "-5"])
def test_audit_tail_count_out_of_bounds_is_a_usage_error(tmp_path: Path, n: str) -> None:
    # Past SQLite's integers: an OverflowError traceback (exit 1); negative: nothing, exit 0.
    _audited(tmp_path)
    proc = run("audit", "tail", "--workspace", "ws", "-n", n, cwd=tmp_path)
    assert proc.returncode == 64, proc.stderr
    assert "Invalid value for '-n'" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_audit_tail_bounds_themselves_are_accepted(tmp_path: Path) -> None:
    _audited(tmp_path)
    assert run("audit", "tail", "--workspace", "ws", "-n", "0", cwd=tmp_path).stdout == ""
    whole = run("audit", "tail", "--workspace", "ws", "-n", "1000000000", cwd=tmp_path)
    assert whole.returncode == 0 and len(whole.stdout.splitlines()) == 2


# A SEQ past SQLite's integers was read as a mismatch (exit 1); one in other scripts' digits
# ('١٢', which str.isdigit accepts) as the number 12.
@pytest.mark.parametrize("seq", ["99999999999999999999999", "\u0661\u0662"])
def test_expect_head_seq_that_is_no_log_position_is_a_usage_error(tmp_path: Path, seq: str) -> None:
    _audited(tmp_path)
    head = f"{seq}:{'a' * 64}"
    proc = run("audit", "verify", "--workspace", "ws", "--expect-head", head, cwd=tmp_path)
    assert proc.returncode == 64, proc.stderr
    assert "--expect-head wants SEQ:HASH" in proc.stderr
