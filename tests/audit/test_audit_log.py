from __future__ import annotations

import copy
import datetime
import io
import itertools
import json
import shutil
import sqlite3
import threading
import unicodedata
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from audit_helpers import write_calls

from runtime.audit import GENESIS_HASH, REDACTED, AuditLog, canonical_json
from runtime.audit._canonical import sha256_hex
from runtime.audit._digestkey import key_path
from runtime.errors import AuditError, ErrorType


def test_request_record_is_redacted_with_digest_of_real_arguments(log: AuditLog) -> None:
    args = {"url": "https://x.test", "headers": {"Authorization": "Bearer sk-live-123456789"}}
    before = copy.deepcopy(args)
    rec = log.record_request(
        call_id="c1",
        tool="http_get",
        arguments=args,
        decision={"action": "allow", "rule": "net", "env": {"GITHUB_TOKEN": "ghp_x"}},
        backend="host",
        sandbox={"userns": False},
    )
    assert args == before  # the caller's object is untouched
    assert rec.seq == 1 and rec.kind == "request" and rec.prev_hash == GENESIS_HASH
    assert rec.arguments == {"url": "https://x.test", "headers": {"Authorization": REDACTED}}
    # Keyed (the redacted value cannot be guessed against it), and reproducible with the key.
    assert rec.arguments_digest != sha256_hex(canonical_json(args))
    assert rec.arguments_digest == log.digest_arguments(args)
    assert rec.arguments_digest is not None and rec.arguments_digest.startswith("hmac-sha256:")
    assert rec.decision is not None and rec.decision["env"] == {"GITHUB_TOKEN": REDACTED}
    # Nothing secret reached the file.
    assert b"sk-live" not in log.path.read_bytes()
    stored = log.tail(1)[0]
    assert stored == rec


def test_request_record_hides_a_nested_encoded_url_and_an_authentication_header(
    log: AuditLog,
) -> None:
    """Finding L3: an http_get call's arguments were stored with ``Authentication: SEKRET5``
    and a percent-encoded redirect target's ``access_token%3DSEKRETQ&sig...`` in clear."""
    inner = quote("http://127.0.0.1:18082/echo?access_token=SEKRETQ&sig=SEKRETS", safe="")
    args = {
        "url": f"http://127.0.0.1:18081/redir307?to={inner}&token=SEKRETQ0",
        "headers": {"Authentication": "SEKRET5", "Accept": "text/plain"},
    }
    rec = log.record_request(
        call_id="c1",
        tool="http_get",
        arguments=args,
        decision={"action": "allow", "rule": "net"},
        backend="host",
        sandbox={},
    )
    assert rec.arguments is not None
    assert rec.arguments["headers"] == {"Authentication": REDACTED, "Accept": "text/plain"}
    assert "access_token%3D[REDACTED]%26sig%3D[REDACTED]" in rec.arguments["url"]
    assert b"SEKRET" not in log.path.read_bytes()
    assert log.tail(1)[0] == rec


def test_completion_stores_digest_and_size_not_result(log: AuditLog) -> None:
    result = {"content": "secret file content"}
    rec = log.record_completion(
        call_id="c1",
        tool="read_file",
        outcome="error",
        error_type="tool_error",
        duration_ms=12,
        usage={"cpu_ms": 3.5, "max_rss_kb": 1024},
        result=result,
    )
    data = canonical_json(result)
    assert rec.result_digest == sha256_hex(data) and rec.result_size == len(data)
    assert rec.duration_ms == 12.0 and rec.error_type == "tool_error"
    assert rec.arguments is None and rec.arguments_digest is None
    assert "secret file content" not in json.dumps([r.model_dump() for r in log.tail()])
    none = log.record_completion(
        call_id="c2",
        tool="t",
        outcome="denied",
        error_type="policy_denied",
        duration_ms=0.0,
        usage=None,
        result=None,
    )
    assert none.result_digest is None and none.result_size is None


def test_redact_keys_from_policy(log_path: Path) -> None:
    with AuditLog(log_path, redact_keys=["tenant-id"]) as log:
        rec = log.record_request(
            call_id="c",
            tool="t",
            arguments={"tenant_id": "acme", "tenantId": "acme", "name": "n"},
            decision=None,
            backend=None,
            sandbox=None,
        )
    assert rec.arguments == {"tenant_id": REDACTED, "tenantId": REDACTED, "name": "n"}


def test_chain_links_and_verifies(log: AuditLog) -> None:
    write_calls(log, 5)
    records = log.tail(100)
    assert [r.seq for r in records] == list(range(1, 11))
    for prev, rec in itertools.pairwise(records):
        assert rec.prev_hash == prev.hash
    report = log.verify()
    assert report.ok and report.count == 10 and report.first_bad is None
    assert report.head == log.head() == (10, records[-1].hash)
    assert log.tail(3) == records[-3:]
    assert log.tail(0) == []


def test_empty_log(log: AuditLog) -> None:
    assert log.head() == (0, GENESIS_HASH)
    report = log.verify(expected_head=(0, GENESIS_HASH))
    assert report.ok and report.count == 0
    assert log.interrupted() == []


def test_reopen_continues_chain(log_path: Path) -> None:
    with AuditLog(log_path) as log:
        write_calls(log, 2)
    with AuditLog(log_path) as log:
        write_calls(log, 2, prefix="again")
        assert log.verify().count == 8 and log.verify().ok


def test_interrupted_lists_requests_without_completion(log: AuditLog) -> None:
    write_calls(log, 2)
    for call_id in ("a", "b", "c"):
        log.record_request(
            call_id=call_id, tool="t", arguments={}, decision=None, backend=None, sandbox=None
        )
    log.record_completion(
        call_id="b",
        tool="t",
        outcome="cancelled",
        error_type=None,
        duration_ms=1.0,
        usage=None,
        result=None,
    )
    # A reused call_id with a new request after its completion is pending again.
    log.record_request(
        call_id="call_0", tool="t", arguments={}, decision=None, backend=None, sandbox=None
    )
    assert log.interrupted() == ["a", "c", "call_0"]


def test_export_jsonl_has_otel_keys(log: AuditLog) -> None:
    write_calls(log, 1)
    log.record_completion(
        call_id="x",
        tool="shell_exec",
        outcome="error",
        error_type="timeout",
        duration_ms=5.0,
        usage=None,
        result=None,
    )
    out = io.StringIO()
    assert log.export_jsonl(out) == 3
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(lines) == 3
    for line in lines:
        assert line["gen_ai.operation.name"] == "execute_tool"
        assert line["gen_ai.tool.name"] == line["tool"]
        assert line["gen_ai.tool.call.id"] == line["call_id"]
        assert {"seq", "hash", "prev_hash", "kind", "time"} <= line.keys()
    assert "error.type" not in lines[0]
    assert lines[2]["error.type"] == "timeout"


def test_export_jsonl_escapes_unicode_line_breaks(log: AuditLog) -> None:
    """U+2028, U+2029 and U+0085 from untrusted arguments were written raw: a consumer
    splitting with str.splitlines() read non-JSON lines. Now one record is one line to any
    splitter; other text stays UTF-8 and every value reads back as it was."""
    text = 'a\u2028{"forged": 1}\u2029b\u0085c é 中 \U0001f600'
    log.record_request(
        call_id="c\u2028",
        tool="t",
        arguments={"s": text},
        decision=None,
        backend=None,
        sandbox=None,
    )
    out = io.StringIO()
    assert log.export_jsonl(out) == 1
    exported = out.getvalue()
    assert not {"\u2028", "\u2029", "\u0085"} & set(exported)
    assert "é 中 \U0001f600" in exported  # not \u-escaped
    (line,) = exported.splitlines()
    record = json.loads(line)
    assert record["arguments"] == {"s": text} and record["call_id"] == "c\u2028"


def test_triggers_refuse_update_and_delete(log: AuditLog) -> None:
    write_calls(log, 1)
    conn = sqlite3.connect(log.path)
    try:
        with pytest.raises(sqlite3.IntegrityError, match="append-only: UPDATE refused"):
            conn.execute("UPDATE audit_records SET tool = 'other' WHERE seq = 1")
        with pytest.raises(sqlite3.IntegrityError, match="append-only: DELETE refused"):
            conn.execute("DELETE FROM audit_records WHERE seq = 2")
    finally:
        conn.close()
    assert log.verify().ok and log.verify().count == 2


def test_bad_outcome_and_non_json_fail_closed(log: AuditLog) -> None:
    with pytest.raises(AuditError, match="outcome"):
        log.record_completion(
            call_id="c",
            tool="t",
            outcome="fine",
            error_type=None,
            duration_ms=1.0,
            usage=None,
            result=None,
        )
    with pytest.raises(AuditError, match="not JSON") as info:
        log.record_request(
            call_id="c",
            tool="t",
            arguments={"x": float("nan")},
            decision=None,
            backend=None,
            sandbox=None,
        )
    assert isinstance(info.value.__cause__, ValueError)
    with pytest.raises(AuditError, match="not JSON"):
        log.record_request(
            call_id="c",
            tool="t",
            arguments={"x": {1, 2}},
            decision=None,
            backend=None,
            sandbox=None,
        )
    assert log.verify().count == 0


def test_big_integers_are_recorded_as_ijson_strings(log: AuditLog) -> None:
    rec = log.record_request(
        call_id="c", tool="t", arguments={"n": 2**60}, decision=None, backend=None, sandbox=None
    )
    assert rec.arguments == {"n": 2**60}  # the object in hand
    assert log.tail(1)[0].arguments == {"n": str(2**60)}  # the stored I-JSON form
    assert log.verify().ok


def test_threads_share_one_chain(log: AuditLog) -> None:
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            write_calls(log, 25, prefix=f"t{k}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    report = log.verify()
    assert report.ok and report.count == 200
    assert log.interrupted() == []


def test_several_instances_share_one_chain(log_path: Path) -> None:
    logs = [AuditLog(log_path) for _ in range(3)]
    try:
        for i in range(10):
            for k, lg in enumerate(logs):
                write_calls(lg, 1, prefix=f"i{k}_{i}")
        for lg in logs:
            report = lg.verify()
            assert report.ok and report.count == 60
    finally:
        for lg in logs:
            lg.close()


def test_closed_log_raises(log_path: Path) -> None:
    log = AuditLog(log_path)
    log.close()
    log.close()  # idempotent
    with pytest.raises(AuditError, match="closed"):
        write_calls(log, 1)
    with pytest.raises(AuditError, match="closed"):
        log.verify()


def test_identifiers_must_be_text(log: AuditLog) -> None:
    with pytest.raises(AuditError, match="call_id must be a string"):
        log.record_request(
            call_id=5,  # type: ignore[arg-type]
            tool="t",
            arguments={},
            decision=None,
            backend=None,
            sandbox=None,
        )
    with pytest.raises(AuditError, match="error_type must be a string"):
        log.record_completion(
            call_id="c",
            tool="t",
            outcome="error",
            error_type=3,  # type: ignore[arg-type]
            duration_ms=1.0,
            usage=None,
            result=None,
        )
    # A StrEnum is text: stored and hashed as its value.
    log.record_completion(
        call_id="c",
        tool="t",
        outcome="error",
        error_type=ErrorType.TIMEOUT,
        duration_ms=1.0,
        usage=None,
        result=None,
    )
    assert log.tail(1)[0].error_type == "timeout"
    assert log.verify().ok and log.verify().count == 1


def test_lone_surrogates_fail_closed(log: AuditLog) -> None:
    with pytest.raises(AuditError, match="not valid text"):
        log.record_request(
            call_id="c\ud800", tool="t", arguments={}, decision=None, backend=None, sandbox=None
        )
    with pytest.raises(AuditError, match="not JSON"):
        log.record_request(
            call_id="c",
            tool="t",
            arguments={"x": "\udfff"},
            decision=None,
            backend=None,
            sandbox=None,
        )
    assert log.verify().count == 0


def test_json_objects_must_be_dicts(log: AuditLog) -> None:
    with pytest.raises(AuditError, match="decision must be an object"):
        log.record_request(
            call_id="c",
            tool="t",
            arguments=[1, 2],  # arguments may be any JSON value
            decision=["allow"],  # type: ignore[arg-type]
            backend=None,
            sandbox=None,
        )
    with pytest.raises(AuditError, match="usage must be an object"):
        log.record_completion(
            call_id="c",
            tool="t",
            outcome="success",
            error_type=None,
            duration_ms=1.0,
            usage=5,  # type: ignore[arg-type]
            result=None,
        )
    assert log.verify().count == 0
    rec = log.record_request(
        call_id="c", tool="t", arguments=[1, 2], decision=None, backend=None, sandbox=None
    )
    assert rec.arguments == [1, 2]


def test_time_is_rfc3339_utc(log: AuditLog) -> None:
    rec = log.record_request(
        call_id="c", tool="t", arguments={}, decision=None, backend=None, sandbox=None
    )
    assert rec.time.endswith("Z")
    parsed = datetime.datetime.fromisoformat(rec.time.replace("Z", "+00:00"))
    assert parsed.utcoffset() == datetime.timedelta(0)


def test_nfc_and_nfd_arguments_get_different_digests(log: AuditLog) -> None:
    digests = {
        log.record_request(
            call_id=form,
            tool="t",
            arguments={"name": unicodedata.normalize(form, "café")},
            decision=None,
            backend=None,
            sandbox=None,
        ).arguments_digest
        for form in ("NFC", "NFD")
    }
    assert len(digests) == 2
    assert log.verify().ok


def test_deep_nesting_fails_closed(log: AuditLog) -> None:
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(AuditError, match="nested too deeply"):
        log.record_request(
            call_id="c", tool="t", arguments={"x": deep}, decision=None, backend=None, sandbox=None
        )
    assert log.verify().count == 0


def test_returning_false_writes_the_same_record(tmp_path: Path) -> None:
    """The broker's hot path (no AuditRecord built) stores exactly what the full path does."""
    kw: dict[str, Any] = {
        "call_id": "c",
        "tool": "t",
        "arguments": {"token": "s3cret", "n": 2**60},
        "decision": {"action": "allow", "rule": "r", "reasons": []},
        "backend": "mock",
        "sandbox": {"backend": "mock", "mechanisms": []},
    }
    done: dict[str, Any] = {
        "call_id": "c",
        "tool": "t",
        "outcome": "success",
        "error_type": None,
        "duration_ms": 1.5,
        "usage": {"cpu_ms": 1.0},
        "result": {"ok": True},
    }
    with AuditLog(tmp_path / "fast.db") as fast, AuditLog(tmp_path / "full.db") as full:
        assert fast.record_request(**kw, returning=False) is None
        assert fast.record_completion(**done, returning=False) is None
        # One digest key for both (the redacted call's digest is keyed per log).
        shutil.copyfile(key_path(fast.path), key_path(full.path))
        full.record_request(**kw)
        full.record_completion(**done)
        ignore = {"time", "hash", "prev_hash"}
        got = [r.model_dump(exclude=ignore) for r in fast.tail()]
        want = [r.model_dump(exclude=ignore) for r in full.tail()]
        assert got == want
        assert fast.verify().ok


def test_clock_matches_isoformat() -> None:
    from runtime.audit import _log

    now = [0]
    clock = _log._Clock(lambda: now[0])
    for ns in (
        0,
        1_700_000_000_123_456_789,
        1_700_000_000_999_999_999,
        1_700_000_001_000_000_000,
        1_700_000_000_000_000_001,  # back a second: the cached prefix is not reused
    ):
        now[0] = ns
        second, micro = divmod(ns // 1000, 1_000_000)
        expected = datetime.datetime.fromtimestamp(second, datetime.UTC).replace(microsecond=micro)
        assert clock() == expected.isoformat(timespec="microseconds").replace("+00:00", "Z")


def test_a_secret_looking_tool_name_is_redacted(log: AuditLog) -> None:
    """The tool column of a refused call holds whatever name the caller sent."""
    name = "ghp_abcdefghijklmnopqrstuvwxyz0123"
    sandbox = log.prepare("sandbox", {"userns": True})
    decision = log.prepare("decision", {"action": "allow", "rule": "r"})
    log.record_request(
        call_id="a", tool=name, arguments={}, decision=None, backend=None, sandbox=None
    )
    log.record_completion(
        call_id="a",
        tool=name,
        outcome="error",
        error_type="tool_not_found",
        duration_ms=0.0,
        usage=None,
        result=None,
    )
    # The hot paths (journaled, accelerator where loaded) too.
    log.record_request(
        call_id="b",
        tool=name,
        arguments={"x": 1},
        decision=decision,
        backend="wasm",
        sandbox=sandbox,
        returning=False,
        defer=True,
    )
    log.record_completion(
        call_id="b",
        tool=name,
        outcome="success",
        error_type=None,
        duration_ms=1.0,
        usage={"fuel": 1},
        result=None,
        backend="wasm",
        sandbox=sandbox,
        returning=False,
        defer=True,
    )
    assert [r.tool for r in log.tail(10)] == [REDACTED] * 4
    assert log.verify().ok
    log.record_request(
        call_id="c", tool="read_file", arguments={}, decision=None, backend=None, sandbox=None
    )
    assert log.tail(1)[0].tool == "read_file"
