"""A tool's result that is not JSON data (a lone surrogate, NaN, bytes, a key that is not a
string, an integer past CPython's 4300 digits) is the tool's error, recorded like any other.
Before, the audit log refused it at the completion record: the call came back as an
internal error with its completion never written (the log listed it as interrupted), or the
sizing of the result raised out of the broker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime import SyncBroker
from runtime.audit import AuditLog
from runtime.backends.mock import MockBackend
from runtime.catalogue import Catalogue


@pytest.mark.parametrize(
    "value",
    [10**5000, "\ud800", float("nan"), b"x", {1: 2}],
    ids=["huge-int", "lone-surrogate", "nan", "bytes", "int-key"],
)
def test_a_result_that_is_not_json_is_a_recorded_tool_error(
    tmp_path: Path, catalogue: Catalogue, value: Any
) -> None:
    def handler(request: Any) -> dict[str, Any]:
        return {"value": value}

    with SyncBroker(
        workspace=tmp_path / "ws",
        audit=tmp_path / "audit.db",
        catalogue=catalogue,
        backends={"mock": MockBackend(handler)},
    ) as broker:
        result = broker.call({"tool": "echo", "arguments": {"text": "hi"}})
        assert broker.call({"tool": "echo", "arguments": {"text": "again"}}).success is False
    assert result.success is False and result.error is not None
    assert result.error.type == "tool_error"
    assert result.error.details["reason"] == "result_not_json"
    with AuditLog(tmp_path / "audit.db") as log:
        assert log.verify().ok and log.interrupted() == []
        assert [(r.kind, r.outcome, r.error_type) for r in log.tail(4)][:2] == [
            ("request", None, None),
            ("completion", "error", "tool_error"),
        ]
