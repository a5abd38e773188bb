"""Crash safety with real processes killed by SIGKILL, and several writer processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from audit_helpers import write_calls

from runtime.audit import AuditLog

ROOT = Path(__file__).resolve().parents[2]


def _spawn(script: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_killed_between_request_and_completion(log_path: Path) -> None:
    with AuditLog(log_path) as log:
        write_calls(log, 2)
    child = _spawn(
        f"""
        import time
        from runtime.audit import AuditLog
        log = AuditLog({str(log_path)!r})
        log.record_request(call_id="victim", tool="shell_exec", arguments={{"command": "sleep 9"}},
                           decision={{"action": "allow", "rule": "shell"}}, backend="subprocess",
                           sandbox={{"userns": True}})
        print("ready", flush=True)
        time.sleep(60)
        """
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=30)
        if child.stdout is not None:
            child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    with AuditLog(log_path) as log:
        report = log.verify()
        assert report.ok and report.count == 5
        assert log.interrupted() == ["victim"]
        # The restarted broker closes the interrupted call; the chain goes on.
        log.record_completion(
            call_id="victim",
            tool="shell_exec",
            outcome="cancelled",
            error_type="internal_error",
            duration_ms=0.0,
            usage=None,
            result=None,
        )
        assert log.interrupted() == []
        assert log.verify().ok


@pytest.mark.parametrize("after_lines", [1, 3, 7])
def test_killed_in_a_write_loop(log_path: Path, after_lines: int) -> None:
    child = _spawn(
        f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from audit_helpers import write_calls
        from runtime.audit import AuditLog
        log = AuditLog({str(log_path)!r})
        i = 0
        while True:
            write_calls(log, 10, prefix=f"loop{{i}}")
            i += 1
            print(i, flush=True)
        """
    )
    try:
        assert child.stdout is not None
        for _ in range(after_lines):
            assert child.stdout.readline()
        os.kill(child.pid, signal.SIGKILL)  # lands anywhere: mid-transaction, mid-commit...
    finally:
        child.wait(timeout=30)
        if child.stdout is not None:
            child.stdout.close()
    with AuditLog(log_path) as log:
        report = log.verify()
        assert report.ok, report
        assert report.count >= after_lines * 20
        assert len(log.interrupted()) <= 1
        write_calls(log, 3, prefix="after")
        report = log.verify()
        assert report.ok and report.head is not None and report.head[0] == report.count


def test_several_processes_one_chain(log_path: Path) -> None:
    AuditLog(log_path).close()
    children = [
        _spawn(
            f"""
            import sys
            sys.path.insert(0, {str(Path(__file__).parent)!r})
            from audit_helpers import write_calls
            from runtime.audit import AuditLog
            with AuditLog({str(log_path)!r}, busy_timeout_s=30) as log:
                write_calls(log, 40, prefix="p{k}")
            print("done", flush=True)
            """
        )
        for k in range(3)
    ]
    for child in children:
        out, _ = child.communicate(timeout=90)
        assert child.returncode == 0 and out.strip() == "done"
    with AuditLog(log_path) as log:
        report = log.verify()
        assert report.ok and report.count == 240
        assert log.interrupted() == []
        seqs = [r.seq for r in log.tail(240)]
        assert seqs == list(range(1, 241))
