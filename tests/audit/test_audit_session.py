"""The session in the audit record (seed 005's session_id): written by every path, shown by
tail, exported as ``gen_ai.conversation.id``, tamper-evident; and a log written before the
column existed (schema version 1) migrates in place, verifies, and extends as one chain."""

from __future__ import annotations

import hashlib
import io
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from audit_helpers import attacker

from runtime.audit import GENESIS_HASH, AuditLog
from runtime.audit._export import otel_record

# The table as schema version 1 created it (runtime/audit/_store.py before sessions).
_V1_TABLE = """
CREATE TABLE audit_records (
    seq              INTEGER PRIMARY KEY AUTOINCREMENT,
    kind             TEXT NOT NULL,
    call_id          TEXT NOT NULL,
    time             TEXT NOT NULL,
    tool             TEXT NOT NULL,
    arguments_digest TEXT,
    arguments        TEXT,
    decision         TEXT,
    backend          TEXT,
    sandbox          TEXT,
    outcome          TEXT,
    error_type       TEXT,
    duration_ms      REAL,
    usage            TEXT,
    result_digest    TEXT,
    result_size      INTEGER,
    prev_hash        TEXT NOT NULL,
    hash             TEXT NOT NULL
) STRICT
"""
_V1_COLUMNS = [
    "seq",
    "kind",
    "call_id",
    "time",
    "tool",
    "arguments_digest",
    "arguments",
    "decision",
    "backend",
    "sandbox",
    "outcome",
    "error_type",
    "duration_ms",
    "usage",
    "result_digest",
    "result_size",
    "prev_hash",
    "hash",
]
_JSON = ("arguments", "decision", "sandbox", "usage")


def _v1_records(n: int) -> list[dict[str, Any]]:
    """``n`` request/completion pairs as a version 1 writer stored them, each hash taken
    with the reference RFC 8785 encoder over every field (no session)."""
    out: list[dict[str, Any]] = []
    prev = GENESIS_HASH
    for i in range(2 * n):
        request = i % 2 == 0
        record: dict[str, Any] = dict.fromkeys(_V1_COLUMNS)
        record.update(
            seq=i + 1,
            kind="request" if request else "completion",
            call_id=f"old_{i // 2}",
            time=f"2026-01-01T00:00:0{i % 10}.000000Z",
            tool="json_parse",
            backend="wasm",
            sandbox={"wasm": True},
            prev_hash=prev,
        )
        if request:
            record.update(
                arguments={"text": f"[{i}]"},
                arguments_digest="d" * 64,
                decision={"action": "allow", "reasons": [], "rule": "data"},
            )
        else:
            record.update(outcome="success", duration_ms=0.5, usage={"fuel": 10 + i})
        body = rfc8785.dumps({k: v for k, v in record.items() if k != "hash"})
        record["hash"] = prev = hashlib.sha256(prev.encode("ascii") + body).hexdigest()
        out.append(record)
    return out


def _v1_log(path: Path, n: int = 2) -> list[dict[str, Any]]:
    path.parent.mkdir(parents=True, exist_ok=True)
    records = _v1_records(n)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(_V1_TABLE)
        for record in records:
            values = [
                json.dumps(record[c], separators=(",", ":"), sort_keys=True)
                if c in _JSON and record[c] is not None
                else record[c]
                for c in _V1_COLUMNS
            ]
            conn.execute(
                f"INSERT INTO audit_records ({', '.join(_V1_COLUMNS)}) "
                f"VALUES ({', '.join('?' * len(_V1_COLUMNS))})",
                values,
            )
        conn.execute("PRAGMA user_version=1")
    finally:
        conn.close()
    return records


def _request(log: AuditLog, call_id: str, session: str | None, **kw: Any) -> Any:
    return log.record_request(
        call_id=call_id,
        tool="json_parse",
        arguments={"text": "[1]"},
        decision={"action": "allow", "rule": "data"},
        backend="wasm",
        sandbox={"wasm": True},
        session=session,
        **kw,
    )


def _completion(log: AuditLog, call_id: str, session: str | None, **kw: Any) -> Any:
    return log.record_completion(
        call_id=call_id,
        tool="json_parse",
        outcome="success",
        error_type=None,
        duration_ms=1.0,
        usage={"fuel": 1},
        result=[1],
        backend="wasm",
        sandbox={"wasm": True},
        session=session,
        **kw,
    )


@pytest.mark.parametrize("defer", [False, True])
def test_records_carry_their_session(log: AuditLog, defer: bool) -> None:
    kw: dict[str, Any] = {"returning": False, "defer": defer}
    _request(log, "a", "s1", **kw)
    _completion(log, "a", "s1", **kw)
    _request(log, "b", None, **kw)
    _completion(log, "b", None, **kw)
    _request(log, "c", 'quote " and é', **kw)
    _completion(log, "c", 'quote " and é', **kw)
    assert [r.session for r in log.tail(6)] == [
        "s1",
        "s1",
        None,
        None,
        'quote " and é',
        'quote " and é',
    ]
    assert log.verify().ok


def test_a_returned_record_has_its_session(log: AuditLog) -> None:
    assert _request(log, "a", "s1").session == "s1"
    assert _completion(log, "a", "s1").session == "s1"
    assert log.verify().ok


def test_a_session_that_is_not_text_is_refused(log: AuditLog) -> None:
    from runtime.errors import AuditError

    with pytest.raises(AuditError, match="session"):
        _request(log, "a", 3)  # type: ignore[arg-type]
    with pytest.raises(AuditError, match="not valid text"):
        _request(log, "a", "\ud800", returning=False, defer=True)


def test_export_names_the_session_as_the_otel_conversation_id(log: AuditLog) -> None:
    _request(log, "a", "s1")
    _completion(log, "a", None)
    out = io.StringIO()
    assert log.export_jsonl(out) == 2
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first["gen_ai.conversation.id"] == "s1" and first["session"] == "s1"
    assert "gen_ai.conversation.id" not in second and second["session"] is None
    assert otel_record(log.tail(2)[0])["gen_ai.conversation.id"] == "s1"


@pytest.mark.parametrize(
    ("statement", "seq"),
    [
        ("UPDATE audit_records SET session = 'other' WHERE seq = 1", 1),
        ("UPDATE audit_records SET session = NULL WHERE seq = 1", 1),
        ("UPDATE audit_records SET session = 'added' WHERE seq = 3", 3),
    ],
)
def test_an_edited_session_is_found(log: AuditLog, statement: str, seq: int) -> None:
    _request(log, "a", "s1")
    _completion(log, "a", "s1")
    _request(log, "b", None)
    _completion(log, "b", None)
    assert log.verify().ok
    conn = attacker(log.path)
    try:
        conn.execute(statement)
    finally:
        conn.close()
    report = log.verify()
    assert not report.ok and report.first_bad == seq


def test_a_version_1_log_migrates_and_extends_as_one_chain(log_path: Path) -> None:
    old = _v1_log(log_path)
    with AuditLog(log_path) as log:
        report = log.verify()
        assert report.ok and report.count == 4
        assert report.head == (4, old[-1]["hash"])  # the old records are untouched
        _request(log, "new", "s1", returning=False, defer=True)
        _completion(log, "new", "s1", returning=False, defer=True)
        _request(log, "sync", None)
        records = log.tail(10)
        assert [r.session for r in records] == [None] * 4 + ["s1", "s1", None]
        assert [r.hash for r in records[:4]] == [r["hash"] for r in old]
        assert log.verify().ok and log.verify().count == 7
    conn = sqlite3.connect(log_path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
        columns = [r[1] for r in conn.execute("PRAGMA table_info(audit_records)")]
        assert "session" in columns
    finally:
        conn.close()
    with AuditLog(log_path) as again:  # a second open finds it migrated
        assert again.verify().ok and again.verify().count == 7


def test_a_version_1_log_reads_without_write_access(log_path: Path) -> None:
    _v1_log(log_path)
    with AuditLog(log_path, read_only=True) as reader:
        assert reader.verify().ok
        assert [r.session for r in reader.tail(4)] == [None] * 4
        # A writer migrates it meanwhile: the reader sees the new column's values.
        with AuditLog(log_path) as writer:
            _request(writer, "new", "s1")
        assert [r.session for r in reader.tail(1)] == ["s1"]
        assert reader.verify().ok and reader.verify().count == 5


def test_the_journal_of_a_dead_version_1_broker_is_recovered(log_path: Path) -> None:
    """Its lines have 15 fields (no session): recovered as records without a session, with
    the hashes a version 1 broker would have given them."""
    old = _v1_log(log_path, n=1)
    journal = log_path.with_name(log_path.name + ".rtj-0123456789abcdef")
    line = [
        "request",
        "dead_1",
        "2026-01-01T00:00:09.000000Z",
        "json_parse",
        "d" * 64,
        '{"text":"[9]"}',
        '{"action":"allow","reasons":[],"rule":"data"}',
        "wasm",
        '{"wasm":true}',
        *[None] * 6,
    ]
    journal.write_bytes((json.dumps(line, separators=(",", ":")) + "\n").encode())
    with AuditLog(log_path) as log:
        records = log.tail(3)
        assert [r.call_id for r in records] == ["old_0", "old_0", "dead_1"]
        assert records[-1].session is None
        assert log.verify().ok
        assert log.interrupted() == ["dead_1"]
    # The hash is the one the reference encoder gives the record without a session.
    expected: dict[str, Any] = dict(zip(_V1_COLUMNS[1:16], line, strict=True))
    for name in _JSON:
        expected[name] = json.loads(expected[name]) if expected[name] else None
    expected.update(seq=3, prev_hash=old[-1]["hash"])
    body = rfc8785.dumps(expected)
    want = hashlib.sha256(old[-1]["hash"].encode() + body).hexdigest()
    assert records[-1].hash == want
    assert not journal.exists()
