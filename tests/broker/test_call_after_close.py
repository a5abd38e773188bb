"""A call on a closed Broker is refused as internal_error "the broker is closed"; its log is
closed too, so nothing can be recorded. It tried anyway and logged "audit log ... is closed"
as an error for every such call."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from runtime import Broker

pytestmark = pytest.mark.anyio


async def test_a_call_after_close_is_refused_without_an_audit_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    async with Broker(workspace=ws) as broker:
        assert (await broker.call({"tool": "json_parse", "arguments": {"text": "[1]"}})).success
    with caplog.at_level(logging.WARNING, logger="runtime"):
        result = await broker.call({"tool": "json_parse", "arguments": {"text": "[1]"}})
    assert result.error is not None
    assert result.error.type == "internal_error"
    assert "the broker is closed" in result.error.message
    assert not [r for r in caplog.records if "audit log" in r.getMessage()]
