"""Batches do not wait for another writer's lock on the hot path (two broker processes on
one log): the records stay pending, journaled, and go in at a later try; from _BATCH_MAX
pending records on the appender waits (and fails closed) as before."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import runtime.audit._log as audit_log_module
from runtime.audit import AuditLog
from runtime.audit._store import Database, WriterBusy
from runtime.errors import AuditError


def _request(log: AuditLog, call_id: str) -> None:
    log.record_request(
        call_id=call_id,
        tool="json_parse",
        arguments={"text": "[1, 2]"},
        decision={"action": "allow", "rule": "categories.data", "reasons": []},
        backend="wasm",
        sandbox={"backend": "wasm", "mechanisms": ["fuel"]},
        returning=False,
        defer=True,
    )


@contextmanager
def _write_locked(path: Path) -> Iterator[sqlite3.Connection]:
    """Another connection (another process's broker) holding SQLite's write lock."""
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        yield other
        other.execute("ROLLBACK")
    finally:
        other.close()


def _committed(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [r[0] for r in conn.execute("SELECT call_id FROM audit_records ORDER BY seq")]


def test_append_batch_without_waiting_raises_writer_busy(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    AuditLog(path).close()
    db = Database(path, busy_timeout_s=30.0, create=False)
    built: list[Any] = []
    try:
        with _write_locked(path):
            with pytest.raises(WriterBusy):
                db.append_batch(lambda seq, head: built.append(seq) or [], wait=False)
            assert built == []  # nothing was built or written
            # The connection's own busy timeout is back (30 s, in ms).
            assert db.conn.execute("PRAGMA busy_timeout").fetchone()[0] == 30_000
            assert not db.conn.in_transaction
        assert db.append_batch(lambda seq, head: [], wait=False) is None  # free again
    finally:
        db.close()


def test_busy_batch_stays_pending_and_goes_in_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit_log_module, "_BATCH", 2)
    monkeypatch.setattr(audit_log_module, "_RETRY_EVERY", 2)
    monkeypatch.setattr(audit_log_module, "_BATCH_MAX", 100)
    path = tmp_path / "a.db"
    # A busy timeout that would fail the test's run time if the hot path waited for it.
    with AuditLog(path, busy_timeout_s=600.0) as log:
        with _write_locked(path):
            for i in range(5):
                _request(log, f"c{i}")  # returns at once: the batches are not inserted
            assert len(log._pending) == 5
            assert log._retry_at == 6  # tried at 2 and 4; next at 6
        assert _committed(path) == []
        _request(log, "c5")  # the lock is free: the whole batch goes in, in order
        assert log._pending == [] and log._retry_at == 0
        assert _committed(path) == [f"c{i}" for i in range(6)]
        assert log.verify().ok


def test_at_the_bound_the_appender_waits_and_fails_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit_log_module, "_BATCH", 2)
    monkeypatch.setattr(audit_log_module, "_RETRY_EVERY", 1)
    monkeypatch.setattr(audit_log_module, "_BATCH_MAX", 4)
    path = tmp_path / "a.db"
    with AuditLog(path, busy_timeout_s=0.05) as log:
        with _write_locked(path):
            for i in range(4):  # the 4th waits for the lock (50 ms), fails, keeps them
                _request(log, f"c{i}")
            assert len(log._failed) == 4
            with pytest.raises(AuditError):  # and the next record is refused
                _request(log, "refused")
        _request(log, "c4")  # retries the kept batch first (then c4 waits for its own)
        assert _committed(path) == [f"c{i}" for i in range(4)]
        log.flush()
        assert _committed(path) == [f"c{i}" for i in range(5)]
        assert log.verify().ok


def test_idle_flush_does_not_wait_for_a_young_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a.db"
    with AuditLog(path, busy_timeout_s=600.0) as log:
        _request(log, "c0")
        log._oldest -= audit_log_module._IDLE_S  # due for the idle flush, but young
        with _write_locked(path):
            assert log._idle_flush() is True  # returned without waiting 600 s
            assert len(log._pending) == 1
        log._oldest -= audit_log_module._IDLE_WAIT_S  # old: this one waits (lock is free)
        assert log._idle_flush() is True
        assert log._pending == [] and _committed(path) == ["c0"]
