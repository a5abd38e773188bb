"""verify() against an attacker with write access to the file (triggers dropped)."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

import pytest
from audit_helpers import attacker, write_calls

from runtime.audit import GENESIS_HASH, AuditLog
from runtime.audit._record import COLUMNS, body_bytes, chain_hash
from runtime.errors import AuditError


@pytest.fixture
def filled(log: AuditLog) -> AuditLog:
    write_calls(log, 5)  # seq 1..10
    assert log.verify().ok
    return log


def _tamper(path: Path, *statements: str) -> None:
    conn = attacker(path)
    try:
        for sql in statements:
            conn.execute(sql)
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("statement", "seq"),
    [
        ("UPDATE audit_records SET tool = 'shell_exec' WHERE seq = 3", 3),
        ('UPDATE audit_records SET arguments = \'{"path":"/etc/shadow"}\' WHERE seq = 3', 3),
        ("UPDATE audit_records SET arguments_digest = NULL WHERE seq = 3", 3),
        ("UPDATE audit_records SET time = '2020-01-01T00:00:00.000000Z' WHERE seq = 5", 5),
        ("UPDATE audit_records SET duration_ms = 0.5 WHERE seq = 4", 4),
        ("UPDATE audit_records SET usage = NULL WHERE seq = 4", 4),
        ("UPDATE audit_records SET result_size = 0 WHERE seq = 10", 10),
        ("UPDATE audit_records SET hash = '" + "f" * 64 + "' WHERE seq = 7", 7),
        ("UPDATE audit_records SET kind = 'completion' WHERE seq = 1", 1),
    ],
)
def test_edited_field_is_named(filled: AuditLog, statement: str, seq: int) -> None:
    _tamper(filled.path, statement)
    report = filled.verify()
    assert not report.ok
    assert report.first_bad == seq
    assert f"record {seq} " in report.reason
    assert report.count == 10


def test_edit_with_rehash_of_one_record_breaks_the_next_link(filled: AuditLog) -> None:
    conn = attacker(filled.path)
    try:
        conn.execute("UPDATE audit_records SET outcome = 'error' WHERE seq = 4")
        row = conn.execute(
            f"SELECT {', '.join(COLUMNS)} FROM audit_records WHERE seq = 4"
        ).fetchone()
        new_hash = chain_hash(row[COLUMNS.index("prev_hash")], body_bytes(row))
        conn.execute("UPDATE audit_records SET hash = ? WHERE seq = 4", (new_hash,))
    finally:
        conn.close()
    report = filled.verify()
    assert not report.ok and report.first_bad == 5
    assert "does not link to record 4" in report.reason


def test_deleted_record_is_named(filled: AuditLog) -> None:
    _tamper(filled.path, "DELETE FROM audit_records WHERE seq = 5")
    report = filled.verify()
    assert not report.ok and report.first_bad == 5 and "missing" in report.reason
    assert report.count == 9


def test_swapped_records_are_named(filled: AuditLog) -> None:
    _tamper(
        filled.path,
        "UPDATE audit_records SET seq = -3 WHERE seq = 3",
        "UPDATE audit_records SET seq = 3 WHERE seq = 4",
        "UPDATE audit_records SET seq = 4 WHERE seq = -3",
    )
    report = filled.verify()
    assert not report.ok and report.first_bad == 3


def test_renumbered_after_delete_is_named(filled: AuditLog) -> None:
    _tamper(
        filled.path,
        "DELETE FROM audit_records WHERE seq = 6",
        "UPDATE audit_records SET seq = seq - 1 WHERE seq > 6",
        "UPDATE sqlite_sequence SET seq = 9 WHERE name = 'audit_records'",
    )
    report = filled.verify()
    assert not report.ok and report.first_bad == 6


def test_truncated_tail_is_caught_by_the_high_water_mark(filled: AuditLog) -> None:
    _tamper(filled.path, "DELETE FROM audit_records WHERE seq >= 9")
    report = filled.verify()
    assert not report.ok and report.first_bad == 9
    assert "removed from the end" in report.reason


def test_everything_deleted_is_caught(filled: AuditLog) -> None:
    _tamper(filled.path, "DELETE FROM audit_records")
    report = filled.verify()
    assert not report.ok and report.first_bad == 1 and report.count == 0


def test_truncation_hiding_the_high_water_mark_needs_the_anchor(filled: AuditLog) -> None:
    # The documented limit: an attacker who also lowers sqlite_sequence leaves a valid, shorter
    # chain. Only an anchor kept outside the file tells.
    anchor = filled.head()
    assert anchor[0] == 10
    _tamper(
        filled.path,
        "DELETE FROM audit_records WHERE seq >= 9",
        "UPDATE sqlite_sequence SET seq = 8 WHERE name = 'audit_records'",
    )
    assert filled.verify().ok
    report = filled.verify(expected_head=anchor)
    assert not report.ok and report.first_bad == 9 and "truncated" in report.reason


def test_rewritten_chain_needs_the_anchor(filled: AuditLog) -> None:
    anchor = filled.head()
    conn = attacker(filled.path)
    try:
        # Rewrite record 2 and re-hash every record after it: internally consistent again.
        conn.execute("UPDATE audit_records SET outcome = 'denied' WHERE seq = 2")
        prev = conn.execute("SELECT hash FROM audit_records WHERE seq = 1").fetchone()[0]
        rows = conn.execute(
            f"SELECT {', '.join(COLUMNS)} FROM audit_records WHERE seq >= 2 ORDER BY seq"
        ).fetchall()
        for row in rows:
            row = (*row[: COLUMNS.index("prev_hash")], prev, None)
            prev = chain_hash(prev, body_bytes(row))
            conn.execute(
                "UPDATE audit_records SET prev_hash = ?, hash = ? WHERE seq = ?",
                (row[COLUMNS.index("prev_hash")], prev, row[0]),
            )
    finally:
        conn.close()
    assert filled.verify().ok
    report = filled.verify(expected_head=anchor)
    assert not report.ok and report.first_bad == 10 and "rewritten" in report.reason


def test_anchor_allows_later_appends(filled: AuditLog) -> None:
    anchor = filled.head()
    write_calls(filled, 2, prefix="later")
    report = filled.verify(expected_head=anchor)
    assert report.ok and report.count == 14
    assert filled.verify(expected_head=(0, GENESIS_HASH)).ok


def test_reopened_log_restores_the_triggers(filled: AuditLog) -> None:
    attacker(filled.path).close()
    AuditLog(filled.path).close()
    conn = sqlite3.connect(filled.path)
    try:
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute("DELETE FROM audit_records")
    finally:
        conn.close()


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE audit_records SET kind = 'bogus' WHERE seq = 9",
        "UPDATE audit_records SET usage = 'not json' WHERE seq = 10",
        "UPDATE audit_records SET usage = '" + "[" * 100_000 + "]" * 100_000 + "' WHERE seq = 10",
    ],
    ids=["kind", "usage-not-json", "usage-deep"],
)
def test_malformed_rows_fail_closed_on_read(filled: AuditLog, statement: str) -> None:
    _tamper(filled.path, statement)
    with pytest.raises(AuditError, match="malformed record"):
        filled.tail(5)
    with pytest.raises(AuditError, match="malformed record"):
        filled.export_jsonl(io.StringIO())
    report = filled.verify()
    assert not report.ok and report.first_bad in (9, 10)
