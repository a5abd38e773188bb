"""``AuditLog.prepare``: a decision/sandbox/usage serialised once and passed to many records
gives exactly the records the plain dict gives, redaction included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime.audit import REDACTED, AuditLog
from runtime.errors import AuditError

DECISION = {
    "action": "ask",
    "rule": "r1",
    "reasons": ["curl -H 'Authorization: Bearer abcdefgh123'"],
}
SANDBOX = {"backend": "mock", "mechanisms": ["none"], "missing": [], "mode": "mock"}


def _pair(log: AuditLog, call_id: str, decision: Any, sandbox: Any, defer: bool) -> None:
    log.record_request(
        call_id=call_id,
        tool="echo",
        arguments={"text": "x"},
        decision=decision,
        backend="mock",
        sandbox=sandbox,
        returning=False,
        defer=defer,
    )
    log.record_completion(
        call_id=call_id,
        tool="echo",
        outcome="success",
        error_type=None,
        duration_ms=1.5,
        usage=None,
        result={"ok": True},
        sandbox=sandbox,
        returning=False,
        defer=defer,
    )


@pytest.mark.parametrize("defer", [False, True])
def test_prepared_objects_give_the_same_records(log: AuditLog, defer: bool) -> None:
    decision, sandbox = dict(DECISION), dict(SANDBOX)
    prepared = (log.prepare("decision", decision), log.prepare("sandbox", sandbox))
    decision["action"] = "deny"  # later changes do not reach the records
    _pair(log, "plain", DECISION, SANDBOX, defer)
    _pair(log, "prepared", *prepared, defer)
    plain_req, plain_done, req, done = log.tail(4)
    for a, b in ((plain_req, req), (plain_done, done)):
        assert (a.decision, a.sandbox) == (b.decision, b.sandbox)
    assert REDACTED in req.decision["reasons"][0] and "abcdefgh123" not in str(req.decision)
    assert req.decision["action"] == "ask"
    assert log.verify().ok


def test_another_logs_prepared_object_is_redacted_by_this_log(tmp_path: Path) -> None:
    with (
        AuditLog(tmp_path / "a.db") as plain,
        AuditLog(tmp_path / "b.db", redact_keys=["rule"]) as strict,
    ):
        foreign = plain.prepare("decision", DECISION)
        assert foreign.shown["rule"] == "r1"
        _pair(strict, "c", foreign, None, False)
        assert strict.tail(2)[0].decision["rule"] == REDACTED


def test_prepare_refuses_what_a_record_cannot_hold(log: AuditLog) -> None:
    with pytest.raises(ValueError, match="cannot prepare"):
        log.prepare("arguments", {})
    with pytest.raises(AuditError, match="not JSON data"):
        log.prepare("usage", {"x": float("nan")})
