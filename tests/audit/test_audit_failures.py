"""Fail closed: every way the file can go wrong surfaces as AuditError, never silence."""

from __future__ import annotations

import io
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from audit_helpers import write_calls

from runtime.audit import AuditLog
from runtime.audit._store import Database
from runtime.errors import AuditError, AuditFileRefused

ROOT = Path(__file__).resolve().parents[2]


def _request(log: AuditLog, call_id: str = "c") -> Any:
    return log.record_request(
        call_id=call_id, tool="t", arguments={"a": 1}, decision=None, backend=None, sandbox=None
    )


def test_directory_removed_while_open(log_path: Path) -> None:
    with AuditLog(log_path) as log:
        _request(log, "before")
        shutil.rmtree(log_path.parent)
        with pytest.raises(AuditError, match="removed while open") as info:
            _request(log, "after")
        assert isinstance(info.value.__cause__, FileNotFoundError)


def test_file_replaced_while_open(log_path: Path) -> None:
    with AuditLog(log_path) as log:
        _request(log)
        moved = log_path.with_name("rotated.db")
        log_path.rename(moved)
        AuditLog(log_path).close()  # someone starts a fresh log under the old name
        with pytest.raises(AuditError, match="replaced"):
            _request(log)


def test_parent_is_not_a_directory(tmp_path: Path) -> None:
    # Was "cannot open" from mkdir's FileExistsError; now said before anything is tried.
    (tmp_path / "file").write_text("x")
    with pytest.raises(AuditFileRefused, match="file is not a directory"):
        AuditLog(tmp_path / "file" / "audit.db")
    assert (tmp_path / "file").read_text() == "x"


def test_corrupted_file(tmp_path: Path) -> None:
    # Refused before SQLite opens it (which tightened its mode first): a file that does not
    # begin with SQLite's header is not a log (tests/audit/test_audit_foreign_database.py).
    path = tmp_path / "audit.db"
    path.write_bytes(b"this is not a database, just garbage\n" * 200)
    with pytest.raises(AuditFileRefused, match="is not a SQLite database"):
        AuditLog(path)


def test_corrupted_header_of_a_real_log(log_path: Path) -> None:
    with AuditLog(log_path) as log:
        write_calls(log, 3)
    with log_path.open("r+b") as f:
        f.write(b"\xff" * 100)
    with pytest.raises(AuditError):
        AuditLog(log_path)


def test_locked_beyond_timeout(log_path: Path) -> None:
    with AuditLog(log_path, busy_timeout_s=0.05) as log:
        _request(log, "first")
        other = sqlite3.connect(log_path, isolation_level=None)
        try:
            other.execute("BEGIN EXCLUSIVE")
            with pytest.raises(AuditError, match="lock") as info:
                _request(log, "blocked")
            assert isinstance(info.value.__cause__, sqlite3.OperationalError)
        finally:
            other.close()
        _request(log, "after")
        report = log.verify()
        assert report.ok and report.count == 2


def test_disk_full(log: AuditLog) -> None:
    # SQLITE_FULL without filling the host's disk: cap the file at its current size.
    assert log._writer is not None
    conn = log._writer.conn
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {max(pages, 2)}")
    written = 0
    with pytest.raises(AuditError, match="full") as info:
        for i in range(10_000):
            _request(log, f"c{i}")
            written += 1
    assert isinstance(info.value.__cause__, sqlite3.OperationalError)
    report = log.verify()
    assert report.ok and report.count == written


def test_read_only_filesystem(log_path: Path) -> None:
    """The audit directory is on a read-only mount (a real ro bind mount in a mount namespace).

    Root ignores file modes, so chmod cannot make the file read-only for this test; the kernel
    refuses the write instead. (Remounting read-only while the file is open for writing is
    refused by the kernel with EBUSY, so the log is opened after the remount.)
    """
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        pytest.skip("needs unshare(1) and mount(8)")
    with AuditLog(log_path) as log:
        write_calls(log, 1)
    d = str(log_path.parent)
    script = textwrap.dedent(
        f"""
        from runtime.audit import AuditLog
        from runtime.errors import AuditError
        try:
            log = AuditLog({str(log_path)!r})
            log.record_request(call_id="ro", tool="t", arguments={{}}, decision=None,
                               backend=None, sandbox=None)
            print("written")
        except AuditError as exc:
            print("AuditError:", exc.message, "| cause:", type(exc.__cause__).__name__)
        """
    )
    remount = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
    # An ordinary user may make a mount namespace only inside a user namespace of its own
    # (-r: this user mapped to root there, owning its files as before).
    namespaces = ["-m"] if os.geteuid() == 0 else ["-r", "-m"]
    proc = subprocess.run(
        ["unshare", *namespaces, "sh", "-c", remount, d, sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if proc.returncode != 0 and "mount" in proc.stderr:
        pytest.skip(f"cannot make a read-only bind mount here: {proc.stderr.strip()}")
    assert proc.stdout.startswith("AuditError:"), (proc.stdout, proc.stderr)
    assert "OperationalError" in proc.stdout
    with AuditLog(log_path) as log:
        report = log.verify()
        assert report.ok and report.count == 2


class _FailingConnection:
    """A connection whose data statements fail as a broken disk would."""

    def __init__(self, real: sqlite3.Connection) -> None:
        self._real = real

    def execute(self, sql: str, *args: Any) -> Any:
        if sql.split()[0].upper() in {"SELECT", "INSERT", "PRAGMA"}:
            raise sqlite3.OperationalError("disk I/O error")
        return self._real.execute(sql, *args)


OPERATIONS: dict[str, Callable[[AuditLog], Any]] = {
    "record_request": _request,
    "record_completion": lambda log: log.record_completion(
        call_id="c",
        tool="t",
        outcome="success",
        error_type=None,
        duration_ms=1.0,
        usage=None,
        result=1,
    ),
    "verify": lambda log: log.verify(),
    "head": lambda log: log.head(),
    "tail": lambda log: log.tail(5),
    "interrupted": lambda log: log.interrupted(),
    "export_jsonl": lambda log: log.export_jsonl(io.StringIO()),
}


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_every_operation_maps_sqlite_errors(
    log: AuditLog, operation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_calls(log, 1)
    log.tail()  # open the reader connection too
    real = Database.conn.fget
    assert real is not None
    monkeypatch.setattr(Database, "conn", property(lambda db: _FailingConnection(real(db))))
    with pytest.raises(AuditError, match="disk I/O error") as info:
        OPERATIONS[operation](log)
    assert isinstance(info.value.__cause__, sqlite3.Error)
    monkeypatch.undo()
    assert log.verify().ok
