"""``runtime audit verify|tail|export --audit FILE`` on a SQLite database that is not an audit
log (another program's, or a log path mistyped into a neighbouring database): verify said
``{"ok": true, "records": 0}`` and each of the three wrote the audit schema (tables,
triggers, WAL mode) into that database. They only read: such a file is now "not an audit
log" (exit 70) and is left byte for byte as it was."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from tests.cli.test_cli import run


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("command", ["verify", "tail", "export"])
@pytest.mark.parametrize("tables", [["create table notes(x)"], []])
def test_audit_reads_of_a_database_that_is_not_an_audit_log(
    tmp_path: Path, command: str, tables: list[str]
) -> None:
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    for statement in tables:
        conn.execute(statement)
    conn.execute("pragma user_version = 7")  # a header is written even with no table
    conn.commit()
    conn.close()
    before = _digest(other)
    proc = run("audit", command, "--audit", str(other), cwd=tmp_path)
    assert proc.returncode == 70, (proc.stdout, proc.stderr)
    assert "not an audit log" in proc.stderr and str(other) in proc.stderr
    assert "Traceback" not in proc.stderr
    assert _digest(other) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]  # no -wal, -shm
