"""Several processes (brokers, ``wasm_calls_per_s_2p``'s two workers) may open the same *new*
audit log at once. SQLite answers the WAL switch of a racing opener with SQLITE_BUSY without
calling its busy handler, so the opener retries the switch itself until its busy timeout."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from runtime.audit import AuditLog, _store
from runtime.errors import AuditError


class _BusyAtFirst:
    """A connection whose first ``busy`` WAL switches fail as a racing opener's do."""

    def __init__(self, conn: sqlite3.Connection, busy: int) -> None:
        self._conn = conn
        self.busy = busy
        self.tries = 0

    def execute(self, sql: str, *args: Any) -> Any:
        if sql == "PRAGMA journal_mode=WAL":
            self.tries += 1
            if self.busy > 0:
                self.busy -= 1
                exc = sqlite3.OperationalError("database is locked")
                exc.sqlite_errorcode = sqlite3.SQLITE_BUSY  # type: ignore[attr-defined]
                raise exc
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def _patched(monkeypatch: pytest.MonkeyPatch, busy: int) -> list[_BusyAtFirst]:
    made: list[_BusyAtFirst] = []
    real = _store._connect

    def connect(target: Path | str, busy_timeout_s: float) -> Any:
        conn = _BusyAtFirst(real(target, busy_timeout_s), busy if not made else 0)
        made.append(conn)
        return conn

    monkeypatch.setattr(_store, "_connect", connect)
    return made


def test_a_busy_wal_switch_is_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made = _patched(monkeypatch, busy=3)
    with AuditLog(tmp_path / "a.db") as log:
        assert log.verify().ok
    assert made[0].tries == 4


def test_a_switch_busy_past_the_timeout_still_fails_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _patched(monkeypatch, busy=10**6)
    with pytest.raises(AuditError, match="database is locked"):
        AuditLog(tmp_path / "a.db", busy_timeout_s=0.05)


def _open_together(path: Path, openers: int) -> list[BaseException]:
    barrier = threading.Barrier(openers)
    errors: list[BaseException] = []

    def open_it() -> None:
        barrier.wait()
        try:
            with AuditLog(path):
                pass
        except BaseException as exc:  # collected, asserted by the caller
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(openers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_four_openers_of_one_new_log(tmp_path: Path) -> None:
    for round_ in range(20):
        (tmp_path / f"r{round_}").mkdir()
        assert _open_together(tmp_path / f"r{round_}" / "audit.db", 4) == []
