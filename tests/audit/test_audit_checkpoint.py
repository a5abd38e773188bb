"""WAL checkpoints off the hot path: the writer connection never checkpoints inside a COMMIT;
the idle thread does (on the reader connection) once enough records went in, and a log with
only synchronous appends checkpoints inline at the same count, as SQLite's automatic
checkpoint did. Checkpointed pages reach the database file; the chain is unchanged."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import runtime.audit._log as audit_log_module
from runtime.audit import AuditLog


def _request(log: AuditLog, call_id: str, *, defer: bool) -> None:
    log.record_request(
        call_id=call_id, tool="t", arguments={"i": call_id}, decision=None, backend="wasm",
        sandbox=None, returning=False, defer=defer,
    )  # fmt: skip


@pytest.fixture
def small_checkpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(audit_log_module, "_CHECKPOINT_ROWS", 8)
    monkeypatch.setattr(audit_log_module, "_IDLE_S", 0.01)


def test_the_writer_does_not_checkpoint_by_itself(tmp_path: Path) -> None:
    with AuditLog(tmp_path / "a.db") as log:
        assert log._writer is not None
        assert log._writer.conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0


def test_the_idle_thread_checkpoints_journaled_records(
    tmp_path: Path, small_checkpoints: None
) -> None:
    path = tmp_path / "a.db"
    with AuditLog(path) as log:
        before = path.stat().st_size
        for i in range(40):
            _request(log, f"c{i}", defer=True)
        log.flush()
        # Until the idle thread has checkpointed every inserted record: a pause in the loop
        # above (a loaded machine) lets it insert and checkpoint the first few on its own,
        # so the file can have grown while the rest still wait for their checkpoint.
        deadline = time.monotonic() + 20
        while (path.stat().st_size <= before or log._wal_rows >= 8) and (
            time.monotonic() < deadline
        ):
            time.sleep(0.01)
        assert path.stat().st_size > before  # pages copied out of the WAL
        assert log._wal_rows < 8
        assert log.verify().ok
        assert log.head()[0] == 40


def test_synchronous_appends_checkpoint_inline(tmp_path: Path, small_checkpoints: None) -> None:
    path = tmp_path / "a.db"
    with AuditLog(path) as log:
        before = path.stat().st_size
        for i in range(20):
            _request(log, f"c{i}", defer=False)
        assert log._thread is None  # nothing journaled: no idle thread
        assert path.stat().st_size > before
        assert log._wal_rows < 8
        assert log.verify().ok


def test_a_failed_idle_checkpoint_is_retried_later(
    tmp_path: Path, small_checkpoints: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runtime.audit._store import Database
    from runtime.errors import AuditError

    calls: list[int] = []
    real = Database.checkpoint

    def flaky(self: Database) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise AuditError("checkpoint failed (test)")
        real(self)

    monkeypatch.setattr(Database, "checkpoint", flaky)
    path = tmp_path / "a.db"
    with AuditLog(path) as log:
        before = path.stat().st_size
        for round_ in range(2):
            for i in range(10):
                _request(log, f"c{round_}-{i}", defer=True)
            log.flush()
            deadline = time.monotonic() + 20
            while len(calls) <= round_ and time.monotonic() < deadline:
                time.sleep(0.01)
        assert len(calls) >= 2
        deadline = time.monotonic() + 20
        while path.stat().st_size <= before and time.monotonic() < deadline:
            time.sleep(0.01)
        assert path.stat().st_size > before
        assert log.verify().ok
