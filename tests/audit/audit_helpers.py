"""Helpers shared by the audit tests (a module, not conftest: tests import it by name)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from runtime.audit import AuditLog


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
