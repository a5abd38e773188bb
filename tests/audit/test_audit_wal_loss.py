"""The log's ``-wal`` removed while a broker runs (then the broker killed) loses nothing.

The red team's run: a SyncBroker wrote three calls of 900 KB (the journal rotated past
1 MiB), someone unlinked ``audit.db-wal``, three more calls ran, the broker was SIGKILLed.
The rotated journal had been removed as soon as its records were *inserted* (they were
only in the WAL: checkpoints come every 4096 rows), SQLite kept committing into the
unlinked WAL, and the next ``runtime exec`` found a database without tables, wrote the
schema again and started a new chain at seq 1 with the second journal's records: the
first calls were gone for good and verify said ok. Now:

(a) a journal is removed (rotated, closed, recovered) only after a complete checkpoint put
    its records in the database file (``PRAGMA wal_checkpoint``'s row checked);
(b) a ``-wal`` removed or replaced under an open writer fails closed at the next insertion
    (its dev/ino is checked with the database file's, once per batch);
(c) a writer refuses to write the schema into a database without its records table while
    journals lie beside it (a new chain at seq 1 over lost records).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

import runtime.audit._log as audit_log_module
from runtime.audit import AuditLog
from runtime.audit._journal import Journal
from runtime.audit._store import Database
from runtime.errors import AuditError

ROOT = Path(__file__).resolve().parents[2]


def _request(log: AuditLog, call_id: str, size: int = 10, **kw: Any) -> None:
    log.record_request(
        call_id=call_id,
        tool="write_file",
        arguments={"path": "f", "content": "x" * size},
        decision={"action": "allow", "rule": "categories.file", "reasons": []},
        backend="subprocess",
        sandbox={"backend": "subprocess"},
        returning=False,
        **kw,
    )


def _journals(log_path: Path) -> list[Path]:
    return sorted(log_path.parent.glob(log_path.name + ".rtj-*"))


def _wait(predicate: Any, what: str) -> None:
    deadline = time.monotonic() + 20
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


_KILLED_AFTER_WAL_LOSS = textwrap.dedent(
    """
    import os, signal, sys, time
    from runtime.audit import AuditLog
    path = sys.argv[1]
    log = AuditLog(path)
    def request(call_id, size):
        log.record_request(call_id=call_id, tool="write_file",
            arguments={"path": "f", "content": "x" * size}, decision=None, backend=None,
            sandbox=None, returning=False, defer=True)
    for i in range(3):  # ~2.7 MB: the journal rotates past 1 MiB
        request(f"big{i}", 900_000)
    time.sleep(0.5)  # the idle thread inserts them (and may checkpoint)
    os.unlink(path + "-wal")  # an over-eager clean-up
    for i in range(3):
        try:
            request(f"after{i}", 10)
        except Exception as exc:  # refused once the loss is seen: fine, nothing ran
            print("refused", type(exc).__name__, flush=True)
    time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def test_a_removed_wal_then_a_crash_loses_no_record(log_path: Path, canonical_impl: str) -> None:
    if canonical_impl != "c":
        pytest.skip("the broker process runs with the accelerator it finds; once is enough")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", _KILLED_AFTER_WAL_LOSS, str(log_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    with AuditLog(log_path) as log:
        report = log.verify()
        ids = [r.call_id for r in log.tail(100)]
    assert report.ok, report.reason
    # Every record that was written is there, big ones first, once each.
    written = ["big0", "big1", "big2", "after0", "after1", "after2"]
    assert [i for i in ids if i in written] == written[: len(ids)]
    assert ids[:3] == ["big0", "big1", "big2"], ids
    refused = proc.stdout.count("refused")
    assert ids[3:] == written[3 : 6 - refused], (ids, proc.stdout)


def test_a_rotated_journal_waits_for_a_complete_checkpoint(
    log: AuditLog, log_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(a) While checkpoints come back incomplete (a reader holding frames back), a
    rotated journal is kept, open and locked; the first complete one removes it."""
    monkeypatch.setattr(audit_log_module, "_BATCH", 2)
    monkeypatch.setattr(audit_log_module, "_ROTATE_BYTES", 200)
    monkeypatch.setattr(audit_log_module, "_IDLE_S", 0.01)
    complete = {"yes": False}
    real = Database.checkpoint

    def checkpoint(self: Database) -> bool:
        return real(self) and complete["yes"]

    monkeypatch.setattr(Database, "checkpoint", checkpoint)
    for i in range(4):
        _request(log, f"c{i}", defer=True)
    _wait(lambda: len(_journals(log_path)) >= 2, "the journal never rotated")
    time.sleep(0.2)  # several idle ticks: their checkpoints were incomplete
    first = _journals(log_path)
    assert len(first) >= 2  # the rotated ones are still there
    complete["yes"] = True
    _wait(lambda: len(_journals(log_path)) == 1, "the rotated journals were never removed")
    assert log.verify().count == 4


def test_close_keeps_a_journal_no_checkpoint_covered(
    log_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(a) at close: the journal stays for the next opener, which removes it after its own
    checkpoint, inserting nothing twice."""
    monkeypatch.setattr(Database, "checkpoint", lambda self: False)
    with AuditLog(log_path) as log:
        _request(log, "a", defer=True)
        _request(log, "b", defer=True)
    assert len(_journals(log_path)) == 1
    monkeypatch.undo()
    with AuditLog(log_path) as log:
        assert [r.call_id for r in log.tail(10)] == ["a", "b"]
        assert log.verify().ok
    assert _journals(log_path) == []


def test_a_removed_wal_fails_the_next_insertion_closed(log: AuditLog, log_path: Path) -> None:
    """(b) Both ways of appending refuse once the -wal is gone; the journaled record stays
    in the journal."""
    _request(log, "before")
    os.unlink(f"{log_path}-wal")
    with pytest.raises(AuditError, match=r"write-ahead file audit\.db-wal was removed"):
        _request(log, "sync")
    _request(log, "journaled", defer=True)
    with pytest.raises(AuditError, match=r"write-ahead file audit\.db-wal was removed"):
        log.flush()
    assert b'"journaled"' in _journals(log_path)[0].read_bytes()


def test_a_replaced_wal_fails_closed(log: AuditLog, log_path: Path) -> None:
    _request(log, "before")
    wal = Path(f"{log_path}-wal")
    other = wal.with_name("other")
    other.write_bytes(wal.read_bytes())
    other.replace(wal)
    with pytest.raises(AuditError, match="another file has its name"):
        _request(log, "after")


def test_another_writer_opening_and_closing_leaves_the_wal_alone(
    log: AuditLog, log_path: Path
) -> None:
    """(b) The detection's false alarm to rule out: SQLite removes the -wal when the *last*
    connection closes; another broker's open, appends and close (in another process, and
    in this one) must not look like a loss to this open log."""
    _request(log, "first")
    script = textwrap.dedent(
        """
        import sys
        from runtime.audit import AuditLog
        for _ in range(2):
            with AuditLog(sys.argv[1]) as other:
                other.record_request(call_id="other", tool="t", arguments={},
                    decision=None, backend=None, sandbox=None, returning=False, defer=True)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", script, str(log_path)], env=env, check=True, timeout=60)
    with AuditLog(log_path) as same_process:
        _request(same_process, "same")
    _request(log, "last")
    _request(log, "deferred", defer=True)
    log.flush()
    ids = [r.call_id for r in log.tail(10)]
    assert ids == ["first", "other", "other", "same", "last", "deferred"]
    assert log.verify().ok


def _table_less(log_path: Path) -> None:
    """A database as the lost -wal left it: WAL mode in its header, no table."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(log_path)
    conn.execute("PRAGMA journal_mode=WAL").fetchone()
    conn.close()


def test_no_new_chain_over_a_table_less_log_with_journals(log_path: Path) -> None:
    """(c) Refused, with nothing written: the database stays table-less, the journal
    stays, and the error names both."""
    _table_less(log_path)
    journal = Journal(log_path)
    journal.append(
        b'["request","lost","t","t",null,null,null,null,null,null,null,null,null,null,null,null]\n'
    )
    journal.close()
    with pytest.raises(AuditError, match="no records table") as info:
        AuditLog(log_path)
    assert journal.name in info.value.message
    assert journal.path.exists()
    conn = sqlite3.connect(log_path)
    try:
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == []
    finally:
        conn.close()


def test_a_table_less_log_without_journals_still_opens(log_path: Path) -> None:
    """A first open that died before its schema commit (or an empty file): nothing was
    recorded, so the schema is written as before."""
    _table_less(log_path)
    with AuditLog(log_path) as log:
        _request(log, "new")
        assert log.verify().count == 1
