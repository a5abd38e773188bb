"""``AuditLog.interrupted``: every request record without a completion. A call_id is the
caller's (a provider's ``toolu_…``, reused across runs), and the pairing was "an id's last
record": a request killed mid-call, then another call under the same id that completed,
read as nothing interrupted. The CLI's reproduction is in tests/cli/test_cli_audit_interrupted.py.
"""

from __future__ import annotations

from pathlib import Path

from runtime.audit import AuditLog


def _request(log: AuditLog, call_id: str) -> None:
    log.record_request(
        call_id=call_id,
        tool="shell_exec",
        arguments={"command": "sleep 20"},
        decision={"action": "allow", "rule": "shell"},
        backend="sandbox",
        sandbox=None,
    )


def _completion(log: AuditLog, call_id: str) -> None:
    log.record_completion(
        call_id=call_id,
        tool="current_time",
        outcome="success",
        error_type=None,
        duration_ms=1.0,
        usage=None,
        result={"ok": True},
    )


def test_a_reused_call_id_does_not_hide_an_interrupted_request(log_path: Path) -> None:
    with AuditLog(log_path) as log:
        _request(log, "toolu_01")  # killed: no completion
        _request(log, "toolu_01")
        _completion(log, "toolu_01")
        assert log.interrupted() == ["toolu_01"]
        _request(log, "toolu_01")  # a third, in flight
        assert log.interrupted() == ["toolu_01", "toolu_01"]
        _completion(log, "toolu_01")
        assert log.interrupted() == ["toolu_01"]
        assert log.verify().ok


def test_interrupted_requests_are_listed_in_log_order(log_path: Path) -> None:
    with AuditLog(log_path) as log:
        for call_id in ("a", "b", "a", "c", "b"):
            _request(log, call_id)
        _completion(log, "a")
        _completion(log, "c")
        _completion(log, "x")  # a completion of no request: closes nothing
        # Open: a (first), b, b; the completion of "a" closed its latest request.
        assert log.interrupted() == ["a", "b", "b"]
