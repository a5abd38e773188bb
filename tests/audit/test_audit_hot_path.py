"""The journaled hot path of ``record_request``/``record_completion`` (prepared decision and
sandbox, text names, ``defer=True``) writes exactly the columns the general path writes, and
everything it does not cover (redaction, a foreign or missing PreparedObject, odd types)
takes the general path with its errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from runtime.audit import REDACTED, AuditLog, _log
from runtime.errors import AuditError

DECISION = {"action": "allow", "rule": "tools.echo", "reasons": []}
SANDBOX = {"backend": "mock", "mechanisms": ["none"], "missing": [], "mode": "mock"}
# Columns that differ between two writes of the same record.
_VARYING = {"seq", "time", "prev_hash", "hash"}

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**60), max_value=2**60),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
_json = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_arguments = st.dictionaries(st.text(max_size=10), _json, max_size=5)


def _write(
    log: AuditLog,
    call_id: str,
    decision: Any,
    sandbox: Any,
    arguments: Any,
    outcome: str,
    error_type: str | None,
    usage: Any,
    result: Any,
) -> None:
    log.record_request(
        call_id=call_id,
        tool="echo",
        arguments=arguments,
        decision=decision,
        backend="mock",
        sandbox=sandbox,
        returning=False,
        defer=True,
    )
    log.record_completion(
        call_id=call_id,
        tool="echo",
        outcome=outcome,
        error_type=error_type,
        duration_ms=2.5,
        usage=usage,
        result=result,
        result_bytes=None if result is None else log.canonical_result(result),
        backend="mock",
        sandbox=sandbox,
        returning=False,
        defer=True,
    )


def _columns(log: AuditLog) -> list[dict[str, Any]]:
    records = log.tail(4)
    return [
        {k: v for k, v in r.model_dump().items() if k not in _VARYING and k != "call_id"}
        for r in records
    ]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    arguments=_arguments,
    outcome=st.sampled_from(["success", "error", "denied", "cancelled"]),
    error_type=st.one_of(st.none(), st.sampled_from(["tool_failed", "timeout"])),
    usage=st.one_of(st.none(), st.fixed_dictionaries({"cpu_ms": st.floats(0, 1e6)})),
    result=st.one_of(st.none(), _json),
)
def test_hot_path_writes_the_general_columns(
    tmp_path: Path,
    arguments: dict[str, Any],
    outcome: str,
    error_type: str | None,
    usage: dict[str, Any] | None,
    result: Any,
) -> None:
    with AuditLog(tmp_path / "hot.db") as log:
        dec, sb = log.prepare("decision", DECISION), log.prepare("sandbox", SANDBOX)
        args = (arguments, outcome, error_type, usage, result)
        _write(log, "hot", dec, sb, *args)  # prepared: the hot path
        _write(log, "general", dict(DECISION), dict(SANDBOX), *args)  # plain dicts: general
        hot_req, hot_done, gen_req, gen_done = _columns(log)
        assert hot_req == gen_req
        assert hot_done == gen_done
        assert log.verify().ok


def test_hot_path_redacts_through_the_general_path(tmp_path: Path) -> None:
    with AuditLog(tmp_path / "r.db") as log:
        dec, sb = log.prepare("decision", DECISION), log.prepare("sandbox", SANDBOX)
        _write(log, "c1", dec, sb, {"token": "s3cr3t-value"}, "success", None, None, None)
        request = log.tail(2)[0]
    assert request.arguments == {"token": REDACTED}


def test_hot_path_refuses_what_the_general_path_refuses(tmp_path: Path) -> None:
    with AuditLog(tmp_path / "e.db") as log, AuditLog(tmp_path / "other.db") as other:
        dec, sb = log.prepare("decision", DECISION), log.prepare("sandbox", SANDBOX)
        with pytest.raises(AuditError, match="usage must be an object"):
            _write(log, "c1", dec, sb, {}, "success", None, [1], None)
        with pytest.raises(AuditError, match="outcome 'weird'"):
            _write(log, "c2", dec, sb, {}, "weird", None, None, None)
        with pytest.raises(AuditError, match="call_id must be a string"):
            _write(log, 3, dec, sb, {}, "success", None, None, None)  # type: ignore[arg-type]
        # Another log's PreparedObject is prepared again (the general path) and recorded.
        foreign = other.prepare("sandbox", SANDBOX)
        _write(log, "c4", dec, foreign, {}, "success", None, None, {"ok": True})
        assert [r.sandbox for r in log.tail(2)] == [SANDBOX, SANDBOX]
        assert log.verify().ok


def test_a_batch_larger_than_one_insert_statement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Batches are inserted _ROWS_PER_INSERT rows per statement: 700 pending records take
    # three statements in one transaction and still form one verifiable chain. The idle
    # flusher waits longer than the loop can take on a loaded machine (at 0.1 s it inserted
    # some of the 700 records before the count below, in the pure-Python run under load).
    monkeypatch.setattr(_log, "_BATCH", 10_000)
    monkeypatch.setattr(_log, "_IDLE_S", 60.0)
    with AuditLog(tmp_path / "big.db") as log:
        dec, sb = log.prepare("decision", DECISION), log.prepare("sandbox", SANDBOX)
        for i in range(350):
            _write(log, f"c{i}", dec, sb, {"i": i}, "success", None, None, {"i": i})
        assert len(log._pending) == 700
        log.flush()
        assert log.head()[0] == 700
        assert log.verify().ok
        assert [r.call_id for r in log.tail(2)] == ["c349", "c349"]
