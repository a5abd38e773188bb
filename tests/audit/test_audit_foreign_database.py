"""``--audit FILE`` / ``Broker(audit=FILE)`` naming another program's SQLite database: the
writer tightened it to 0600, switched it to WAL and added the audit tables to it (``audit
verify`` already refused to read it). Now the writer refuses it before changing anything,
with the readers' words (one shared check): AuditFileRefused, ``runtime exec`` exits 64.
A missing directory for the log was created with all its parents wherever the path said
(a mistyped ``--audit``); it is now an error naming it."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
from pathlib import Path

import pytest

from runtime.audit import AuditLog
from runtime.errors import AuditFileRefused
from tests._cli_run import run_runtime

CALL = '{"tool": "json_parse", "arguments": {"text": "[1]"}}'


def _foreign(path: Path) -> str:
    conn = sqlite3.connect(path)
    conn.execute("create table users(id integer)")
    conn.execute("insert into users values (1)")
    conn.commit()
    conn.close()
    path.chmod(0o644)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _untouched(path: Path, digest: str) -> None:
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    assert path.stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in path.parent.iterdir() if p.name.startswith(path.name)) == [
        path.name
    ]  # no -wal, -shm, digest key or journal
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        assert conn.execute("pragma journal_mode").fetchone()[0] == "delete"
    finally:
        conn.close()


def test_the_writer_refuses_another_programs_database(tmp_path: Path) -> None:
    app = tmp_path / "app.db"
    digest = _foreign(app)
    with pytest.raises(AuditFileRefused, match="is a SQLite database but not an audit log") as e:
        AuditLog(app)
    assert "its tables: users" in e.value.message and "left untouched" in e.value.message
    _untouched(app, digest)


def test_exec_exits_64_and_leaves_it_as_it_was(tmp_path: Path) -> None:
    app = tmp_path / "app.db"
    digest = _foreign(app)
    call = tmp_path / "call.json"
    call.write_text(CALL)
    proc = run_runtime(
        "exec", str(call), "--audit", str(app), "--workspace", str(tmp_path / "ws"), cwd=tmp_path
    )
    assert proc.returncode == 64, proc.stderr
    assert f"{app} is a SQLite database but not an audit log (its tables: users)" in proc.stderr
    assert "Traceback" not in proc.stderr
    _untouched(app, digest)


@pytest.mark.parametrize("make", ["empty file", "no tables"])
def test_a_database_with_no_tables_of_its_own_is_still_a_log_to_start(
    tmp_path: Path, make: str
) -> None:
    path = tmp_path / "a.db"
    if make == "empty file":
        path.touch()
    else:
        conn = sqlite3.connect(path)
        conn.execute("create table t(x)")
        conn.execute("drop table t")  # a header, no tables
        conn.commit()
        conn.close()
    with AuditLog(path) as log:
        log.record_request(
            call_id="c", tool="t", arguments={}, decision=None, backend=None, sandbox=None
        )
        assert log.verify().count == 1


def test_a_missing_directory_is_named_not_created(tmp_path: Path) -> None:
    path = tmp_path / "no" / "such" / "a.db"
    with pytest.raises(AuditFileRefused, match=r"its directory .*/no/such does not exist"):
        AuditLog(path)
    assert not (tmp_path / "no").exists()
    call = tmp_path / "call.json"
    call.write_text(CALL)
    proc = run_runtime(
        "exec", str(call), "--audit", str(path), "--workspace", str(tmp_path / "ws"), cwd=tmp_path
    )
    assert proc.returncode == 64, proc.stderr
    assert f"its directory {path.parent} does not exist" in proc.stderr
    assert not (tmp_path / "no").exists()


# Another program's database with a table of its own named audit_records: recognised by the
# name alone, it was taken for a log and changed (0600, WAL, our columns, tables and
# triggers: the program's own UPDATE refused) while the call ran and its record never
# reached the file ("no such column: seq"). A log is now recognised by its columns.


def _app_with_its_own_audit_records(path: Path) -> str:
    conn = sqlite3.connect(path)
    conn.execute("create table users(name text)")
    conn.execute("create table audit_records(id integer primary key, who text, what text)")
    conn.execute("insert into audit_records(who, what) values ('bob', 'login')")
    conn.commit()
    conn.close()
    path.chmod(0o644)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _app_can_still_update(path: Path) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute("update audit_records set what = 'logout' where who = 'bob'")
        conn.rollback()  # the file stays as it was for the callers' checks
    finally:
        conn.close()


def test_a_table_named_audit_records_that_is_not_a_log_is_refused(tmp_path: Path) -> None:
    app = tmp_path / "app.db"
    digest = _app_with_its_own_audit_records(app)
    with pytest.raises(AuditFileRefused, match="is a SQLite database but not an audit log") as e:
        AuditLog(app)
    assert "its tables: audit_records, users" in e.value.message
    assert "audit_records has the columns id, who, what, without the log's seq" in e.value.message
    _untouched(app, digest)
    _app_can_still_update(app)


@pytest.mark.parametrize(("command", "status"), [("exec", 64), ("serve", 64), ("verify", 70)])
def test_the_cli_leaves_a_foreign_audit_records_table_as_it_was(
    tmp_path: Path, command: str, status: int
) -> None:
    app = tmp_path / "app.db"
    digest = _app_with_its_own_audit_records(app)
    proc = _cli(tmp_path, command, app)
    assert proc.returncode == status, proc.stderr
    assert f"{app} is a SQLite database but not an audit log" in proc.stderr
    assert "Traceback" not in proc.stderr
    _untouched(app, digest)
    _app_can_still_update(app)


def _cli(tmp_path: Path, command: str, audit: Path) -> subprocess.CompletedProcess[str]:
    """``exec`` and ``serve`` (which open the log for writing; serve before reading a
    request), ``audit verify`` (a reader): each naming ``audit``."""
    ws = str(tmp_path / "ws")
    if command == "verify":
        return run_runtime("audit", "verify", "--audit", str(audit), cwd=tmp_path)
    if command == "serve":
        return run_runtime("serve", "--mcp", "--workspace", ws, "--audit", str(audit), cwd=tmp_path)
    call = tmp_path / "call.json"
    call.write_text(CALL)
    return run_runtime("exec", str(call), "--audit", str(audit), "--workspace", ws, cwd=tmp_path)


# An existing file that is not a SQLite database at all (``--audit notes.txt``): its mode
# was tightened to 0600 before SQLite's open failed ("file is not a database", exit 70).


@pytest.mark.parametrize("text", [b"my notes\n", b"x", b"this is not a database\n" * 100])
def test_a_file_that_is_not_a_database_is_refused_unchanged(tmp_path: Path, text: bytes) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_bytes(text)
    notes.chmod(0o644)
    with pytest.raises(AuditFileRefused, match="is not a SQLite database") as e:
        AuditLog(notes)
    assert str(notes) in e.value.message and "left untouched" in e.value.message
    assert notes.read_bytes() == text
    assert notes.stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize(("command", "status"), [("exec", 64), ("serve", 64), ("verify", 70)])
def test_the_cli_leaves_a_file_that_is_not_a_database_as_it_was(
    tmp_path: Path, command: str, status: int
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"my notes\n")
    notes.chmod(0o644)
    proc = _cli(tmp_path, command, notes)
    assert proc.returncode == status, proc.stderr
    assert f"{notes} is not a SQLite database" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert notes.read_bytes() == b"my notes\n"
    assert notes.stat().st_mode & 0o777 == 0o644
    assert not list(tmp_path.glob("notes.txt?*"))  # no -wal, -shm, journal
