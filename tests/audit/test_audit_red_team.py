"""Audit gaps a red-team pass found, each shown with the real store:

- a log whose name holds glob characters: its crashed broker's journal was never found
  ('a[1].db'), or another log's journals were taken ('a*.db');
- a log opened through a symlink kept its journals beside the link, so the real file's
  openers never saw the crashed broker's records;
- JSON columns are hashed as stored text: text that is not one JSON value moved the bounds
  between columns without changing the hash (another call_id and backend, same hash);
- a number beyond a double ('1e400') made the call fail closed with no record at all.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from audit_helpers import crash_with_deferred

from runtime import SyncBroker
from runtime.audit import AuditLog


def test_a_name_with_glob_characters_finds_its_own_journal(tmp_path: Path) -> None:
    path = tmp_path / "a[1].db"
    crash_with_deferred(path, 2)
    with AuditLog(path) as log:
        report = log.verify()
        assert report.ok and report.count == 2
        assert sorted(log.interrupted()) == ["crash-0", "crash-1"]


def test_a_name_with_a_star_takes_no_other_log(tmp_path: Path) -> None:
    with AuditLog(tmp_path / "a*.db"):
        pass
    crash_with_deferred(tmp_path / "audit.db", 2)
    with AuditLog(tmp_path / "a*.db") as star:
        assert star.verify().count == 0
    with AuditLog(tmp_path / "audit.db") as log:
        assert log.verify().count == 2


def test_a_log_opened_through_a_symlink_keeps_its_journal_beside_the_file(
    tmp_path: Path,
) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "links").mkdir()
    with AuditLog(tmp_path / "real" / "audit.db"):
        pass
    (tmp_path / "links" / "audit.db").symlink_to("../real/audit.db")
    crash_with_deferred(tmp_path / "links" / "audit.db", 2)
    with AuditLog(tmp_path / "real" / "audit.db") as log:
        report = log.verify()
        assert report.ok and report.count == 2


def test_columns_resplit_under_the_same_hash_are_detected(tmp_path: Path) -> None:
    db = tmp_path / "audit.db"
    # The arguments (the model's) spell the column literals that follow them in the body.
    args = {
        "a": 1,
        "arguments_digest": "0" * 64,
        "backend": "host",
        "call_id": "call_innocent",
        "decision": {},
    }
    with AuditLog(db) as log:
        log.record_request(
            call_id="call_real",
            tool="write_file",
            arguments=args,
            decision={"action": "deny", "rule": "r"},
            backend="wasm",
            sandbox=None,
        )
        anchor = log.head()
    con = sqlite3.connect(db)
    con.isolation_level = None
    a_digest, backend, call_id, decision, before = con.execute(
        "SELECT arguments_digest, backend, call_id, decision, hash FROM audit_records"
    ).fetchone()
    con.execute("DROP TRIGGER audit_records_no_update")
    moved = (
        '{}},"arguments_digest":"'
        + a_digest
        + '","backend":"'
        + backend
        + '","call_id":"'
        + call_id
        + '","decision":'
        + decision
    )
    con.execute(
        "UPDATE audit_records SET arguments=?, arguments_digest=?, backend=?, call_id=?,"
        " decision=? WHERE seq=1",
        ('{"a":1', "0" * 64, "host", "call_innocent", moved),
    )
    after = con.execute("SELECT hash FROM audit_records").fetchone()[0]
    con.close()
    assert after == before  # the stored hash is untouched ...
    with AuditLog(db) as log:
        report = log.verify(expected_head=anchor)
    assert not report.ok  # ... and the body it hashes is no longer one reading
    assert report.first_bad == 1
    assert "not one JSON value" in report.reason


def test_a_number_beyond_a_double_is_refused_and_recorded(tmp_path: Path) -> None:
    db = tmp_path / "audit.db"
    with SyncBroker(workspace=tmp_path / "ws", audit=db) as broker:
        text = broker.call('{"tool": "json_stringify", "arguments": {"data": [1e400]}}')
        api = broker.call({"tool": "json_stringify", "arguments": {"data": [float("inf")]}})
    for result in (text, api):
        assert result.error is not None
        assert result.error.type.value == "invalid_arguments"
    with AuditLog(db) as log:
        report = log.verify()
        assert report.ok and report.count >= 2


def _two_records(db: Path) -> None:
    with AuditLog(db) as log:
        for call_id in ("c1", "c2"):
            log.record_request(
                call_id=call_id,
                tool="json_parse",
                arguments={"text": "1"},
                decision={"action": "allow", "rule": "r"},
                backend="wasm",
                sandbox=None,
            )


def _edit(db: Path, sql: str) -> None:
    con = sqlite3.connect(db)
    con.isolation_level = None
    con.execute("DROP TRIGGER IF EXISTS audit_records_no_update")
    con.execute(sql)
    con.close()


def test_text_that_is_not_utf8_is_a_verdict(tmp_path: Path) -> None:
    """Verification stopped with 'Could not decode to UTF-8 column' and no verdict."""
    db = tmp_path / "audit.db"
    _two_records(db)
    _edit(db, "UPDATE audit_records SET call_id = CAST(x'80ff' AS TEXT) WHERE seq = 2")
    with AuditLog(db) as log:
        report = log.verify()
    assert not report.ok and report.first_bad == 2


def test_reading_a_record_that_is_not_text_is_a_clear_error(tmp_path: Path) -> None:
    from runtime.errors import AuditError

    db = tmp_path / "audit.db"
    _two_records(db)
    _edit(db, "UPDATE audit_records SET call_id = CAST(x'80ff' AS TEXT) WHERE seq = 2")
    with AuditLog(db) as log, pytest.raises(AuditError):
        log.tail(5)
