"""Deferred appends (``defer=True``): journaled at once, in SQLite in batches, one chain."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

import runtime.audit._log as audit_log_module
from runtime.audit import AuditLog
from runtime.audit._digestkey import KEY_BYTES, key_path
from runtime.audit._journal import Journal
from runtime.errors import AuditError

ROOT = Path(__file__).resolve().parents[2]


def _request(log: AuditLog, call_id: str, **kw: Any) -> None:
    log.record_request(
        call_id=call_id,
        tool="json_parse",
        arguments={"text": "[1, 2]", "token": "sk-" + "a" * 30},
        decision={"action": "allow", "rule": "categories.data", "reasons": []},
        backend="wasm",
        sandbox={"backend": "wasm", "mechanisms": ["fuel"]},
        returning=False,
        **kw,
    )


def _completion(log: AuditLog, call_id: str, **kw: Any) -> None:
    log.record_completion(
        call_id=call_id,
        tool="json_parse",
        outcome="success",
        error_type=None,
        duration_ms=0.25,
        usage={"fuel": 1234},
        result={"value": [1, 2]},
        backend="wasm",
        returning=False,
        **kw,
    )


def _journals(log_path: Path) -> list[Path]:
    return sorted(log_path.parent.glob(log_path.name + ".rtj-*"))


def test_deferred_records_equal_synchronous_ones(tmp_path: Path) -> None:
    """The same calls written both ways give the same records (time, seq and hash aside)."""
    rows = []
    for defer in (False, True):
        # One digest key for both logs: a redacted call's digest is keyed per log.
        key_path(tmp_path / f"{defer}.db").write_bytes(b"k" * KEY_BYTES)
        with AuditLog(tmp_path / f"{defer}.db") as log:
            for i in range(3):
                _request(log, f"c{i}", defer=defer)
                _completion(log, f"c{i}", defer=defer)
            assert log.verify().ok
            rows.append([r.model_dump(exclude={"time", "hash", "prev_hash"}) for r in log.tail(6)])
    assert rows[0] == rows[1]
    assert "sk-" not in str(rows[1])  # redacted before the journal, too


def test_reads_flush_and_order_is_kept(log: AuditLog) -> None:
    _request(log, "a", defer=True)
    log.record_request(  # synchronous: inserts the pending record first
        call_id="b", tool="t", arguments={}, decision=None, backend=None, sandbox=None
    )
    _completion(log, "a", defer=True)
    assert [(r.call_id, r.kind) for r in log.tail(3)] == [
        ("a", "request"),
        ("b", "request"),
        ("a", "completion"),
    ]
    assert log.interrupted() == ["b"]
    assert log.verify().ok


def test_batches_are_inserted_without_a_read(
    log: AuditLog, log_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit_log_module, "_BATCH", 4)
    for i in range(4):
        _request(log, f"c{i}", defer=True)
    with AuditLog(log_path) as other:  # another instance sees them: they are in SQLite
        assert other.verify().count == 4


def test_idle_records_reach_the_database(
    log: AuditLog, log_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit_log_module, "_IDLE_S", 0.01)
    _request(log, "idle", defer=True)

    deadline = time.monotonic() + 10
    while True:
        with AuditLog(log_path) as other:
            if other.interrupted() == ["idle"]:
                break
        assert time.monotonic() < deadline, "the idle flusher never inserted the record"
        time.sleep(0.02)


def test_close_removes_the_journal(log_path: Path) -> None:
    with AuditLog(log_path) as log:
        _request(log, "c", defer=True)
        assert len(_journals(log_path)) == 1
    assert _journals(log_path) == []
    with AuditLog(log_path) as log:
        assert log.verify().count == 1


def test_rotation_bounds_the_journal(
    log: AuditLog, log_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit_log_module, "_BATCH", 2)
    monkeypatch.setattr(audit_log_module, "_ROTATE_BYTES", 1000)
    monkeypatch.setattr(audit_log_module, "_IDLE_S", 0.01)
    names = set()
    for i in range(20):
        _request(log, f"c{i}", defer=True)
        names.update(p.name for p in _journals(log_path))
        # A rotated journal is removed once a checkpoint put its records in the database
        # file, not just in the WAL (test_audit_wal_loss): by the idle thread, soon after.
        deadline = time.monotonic() + 10
        while len(_journals(log_path)) > 1:
            assert time.monotonic() < deadline, "the rotated journal was never removed"
            time.sleep(0.005)
    assert len(names) > 2  # rotated several times
    assert log.verify().count == 20


def test_lone_surrogates_fail_closed_before_the_journal(log: AuditLog) -> None:
    with pytest.raises(AuditError, match="not valid text"):
        _request(log, "bad\ud800", defer=True)
    assert log.verify().count == 0


def test_defer_needs_returning_false(log: AuditLog) -> None:
    with pytest.raises(ValueError, match="returning=False"):
        log.record_request(  # type: ignore[call-overload]
            call_id="c",
            tool="t",
            arguments={},
            decision=None,
            backend=None,
            sandbox=None,
            defer=True,
        )


def test_removed_journal_fails_closed(log: AuditLog, log_path: Path) -> None:
    _request(log, "a", defer=True)
    for path in _journals(log_path):
        path.unlink()
    with pytest.raises(AuditError, match="removed while open"):
        _request(log, "b", defer=True)


def test_a_failing_database_refuses_the_next_record(
    log: AuditLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch insert fails: the records stay in the journal, and the next deferred
    append retries and refuses while the database still fails (fail closed)."""
    monkeypatch.setattr(audit_log_module, "_BATCH", 2)
    assert log._writer is not None
    real = log._writer.append_batch
    broken = {"on": True}

    def append_batch(*args: Any, **kw: Any) -> Any:
        if broken["on"]:
            raise AuditError("disk I/O error")
        return real(*args, **kw)

    monkeypatch.setattr(log._writer, "append_batch", append_batch)
    _request(log, "a", defer=True)
    _request(log, "b", defer=True)  # journaled; its batch insert fails (kept)
    with pytest.raises(AuditError, match="disk I/O error"):
        _request(log, "c", defer=True)
    broken["on"] = False
    _request(log, "d", defer=True)
    assert [r.call_id for r in log.tail(10)] == ["a", "b", "d"]
    assert log.verify().ok


def test_damaged_journal_of_a_dead_broker_fails_closed(log_path: Path) -> None:
    AuditLog(log_path).close()
    journal = Journal(log_path)
    journal.append(b"not json\n")
    journal.close()  # its owner is gone
    with pytest.raises(AuditError, match="damaged"):
        AuditLog(log_path)


def test_live_journals_are_left_alone(log_path: Path) -> None:
    with AuditLog(log_path) as first:
        _request(first, "live", defer=True)
        with AuditLog(log_path) as second:  # opening does not steal the live journal
            assert second.verify().count == 0
        assert len(_journals(log_path)) == 1
    with AuditLog(log_path) as log:
        assert log.verify().count == 1


@pytest.mark.parametrize("records", [1, 3, 150])
def test_killed_broker_is_recovered_from_its_journal(log_path: Path, records: int) -> None:
    """SIGKILL after deferred appends: every record a caller was told about is recovered
    by the next open, chained after the existing ones, and the interrupted call shows."""
    with AuditLog(log_path) as log:
        _request(log, "before")
        _completion(log, "before")
    script = textwrap.dedent(
        f"""
        import sys, time
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_audit_journal import _request, _completion
        from runtime.audit import AuditLog
        log = AuditLog({str(log_path)!r})
        for i in range({records} - 1):
            _request(log, f"done{{i}}", defer=True)
            _completion(log, f"done{{i}}", defer=True)
        _request(log, "victim", defer=True)
        print("ready", flush=True)
        time.sleep(60)
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True
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
    assert len(_journals(log_path)) == 1
    with AuditLog(log_path) as log:
        assert _journals(log_path) == []
        report = log.verify()
        assert report.ok and report.count == 2 + 2 * (records - 1) + 1
        assert log.interrupted() == ["victim"]
        assert log.tail(1)[0].arguments == {"text": "[1, 2]", "token": "[REDACTED]"}
    with AuditLog(log_path) as log:  # recovered once, not twice
        assert log.verify().count == 2 + 2 * (records - 1) + 1


def test_torn_last_line_is_dropped(log_path: Path) -> None:
    """A process killed inside write() leaves a line without its newline: that write never
    returned, so no caller was told; the complete lines before it are recovered."""
    AuditLog(log_path).close()
    with AuditLog(log_path) as writer:
        _request(writer, "whole", defer=True)
        journal = writer._journal
        assert journal is not None
        data = journal.path.read_bytes()
        # Simulate the crash: the owner goes away without close(), leaving a torn line.
        with open(journal.path, "ab") as f:
            f.write(data[: len(data) // 2])
        journal.close()
        writer._journal = None
        writer._pending.clear()
        with AuditLog(log_path) as log:
            assert [r.call_id for r in log.tail(5)] == ["whole"]
            assert log.verify().ok


@pytest.mark.parametrize("defer", [False, True])
def test_memoised_small_objects_keep_types_and_redaction(log: AuditLog, defer: bool) -> None:
    """decision/sandbox/usage texts are memoised by value: 1, True and 1.5 stay distinct
    (they hash alike as 1 == True), and a cached decision is still the redacted one."""
    for value in (1, True, 1.5, 1, True):
        log.record_completion(
            call_id="c",
            tool="t",
            outcome="success",
            error_type=None,
            duration_ms=1.0,
            usage={"n": value},
            result=None,
            decision={"action": "deny", "rule": "r", "reasons": ["password=hunter22 given"]},
            returning=False,
            defer=defer,
        )
    records = log.tail(5)
    assert [r.usage for r in records] == [{"n": v} for v in (1, True, 1.5, 1, True)]
    assert [type(r.usage["n"]) for r in records if r.usage] == [int, bool, float, int, bool]
    for r in records:
        assert r.decision is not None and "hunter22" not in str(r.decision)
    assert log.verify().ok


def test_a_dropped_log_is_collected_and_its_idle_thread_ends(log_path: Path) -> None:
    import gc
    import weakref

    log = AuditLog(log_path)
    _request(log, "dropped", defer=True)
    thread = log._thread
    assert thread is not None and thread.is_alive()
    ref = weakref.ref(log)
    del log
    gc.collect()
    assert ref() is None  # the idle thread does not keep it alive
    thread.join(timeout=10)
    assert not thread.is_alive()
    with AuditLog(log_path) as log:  # the dropped journal's lock is gone: recovered now
        assert log.interrupted() == ["dropped"]


def test_a_full_file_system_refuses_write_ahead_records_only(
    log: AuditLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The journal's last page could take a few more lines on a full file system, which the
    database could not: a record that lets a call run is refused, a completion is kept."""
    _request(log, "a", defer=True)
    real = os.fstatvfs

    def full(fd: int) -> Any:
        st = real(fd)
        return os.statvfs_result((*st[:4], 0, *st[5:]))  # f_bavail = 0

    monkeypatch.setattr(os, "fstatvfs", full)
    with pytest.raises(AuditError, match="file system is full"):
        _request(log, "b", defer=True)
    _completion(log, "a", defer=True)
    monkeypatch.undo()
    _request(log, "c", defer=True)
    assert [r.call_id for r in log.tail(10)] == ["a", "a", "c"]
    assert log.verify().ok


def test_close_after_the_finalizer_leaves_a_reused_fd_alone(tmp_path: Path) -> None:
    # The journal's finalizer (it was collected, or the interpreter is exiting) closed its
    # fd; the number may belong to another file by the time close() runs.
    journal = Journal(tmp_path / "audit.db")
    fd = journal._fd
    assert journal._finalizer is not None and journal._finalizer.atexit is False
    journal._finalizer()
    other = os.open(tmp_path / "other", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        assert other == fd  # the lowest free number: the journal's old one
        journal.close()
        os.fstat(other)  # still open
    finally:
        os.close(other)
    journal.remove()
