"""Helpers shared by the audit tests (a module, not conftest: tests import it by name)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from runtime.audit import AuditLog

ROOT = Path(__file__).resolve().parents[2]


def write_calls(log: AuditLog, n: int, *, prefix: str = "call") -> list[str]:
    """n complete calls (request + completion) = 2n records."""
    ids = []
    for i in range(n):
        call_id = f"{prefix}_{i}"
        log.record_request(
            call_id=call_id,
            tool="read_file",
            arguments={"path": f"f{i}.txt"},
            decision={"action": "allow", "rule": "files"},
            backend="subprocess",
            sandbox={"userns": True},
        )
        log.record_completion(
            call_id=call_id,
            tool="read_file",
            outcome="success",
            error_type=None,
            duration_ms=1.25 + i,
            usage={"cpu_ms": 1.0},
            result={"content": "x" * i},
        )
        ids.append(call_id)
    return ids


def attacker(path: Path) -> sqlite3.Connection:
    """A raw connection with the append-only triggers dropped, as someone with file access."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("DROP TRIGGER audit_records_no_update")
    conn.execute("DROP TRIGGER audit_records_no_delete")
    return conn


def wait_for_request_record(audit: Path, timeout: float = 60.0) -> None:
    """Wait until a call's request record is in the log at ``audit`` (another process
    writes it; the file may not exist, or have its schema, yet), or ``timeout`` passes."""
    import time

    from runtime.errors import AuditError

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if audit.exists():
            try:
                with AuditLog(audit, read_only=True) as log:
                    if log.tail(1):
                        return
            except AuditError:
                pass
        time.sleep(0.1)


def crash_with_deferred(path: Path, n: int) -> None:
    """Journal ``n`` write-ahead records (not yet in SQLite), then die by SIGKILL."""
    script = f"""
        import os, signal
        from runtime.audit import AuditLog
        log = AuditLog({str(path)!r})
        for i in range({n}):
            log.record_request(call_id=f"crash-{{i}}", tool="json_parse",
                               arguments={{"text": "[1]"}},
                               decision={{"action": "allow", "rule": "r"}}, backend="wasm",
                               sandbox=None, returning=False, defer=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """
    child = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], cwd=ROOT, check=False, timeout=60
    )
    assert child.returncode == -9
