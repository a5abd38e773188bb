"""Event payloads as seed 000 lists them (TOOL_CALL_REQUESTED {toolName, params},
TOOL_CALL_COMPLETED {toolName, result, durationMs}, TOOL_CALL_FAILED {toolName, error,
durationMs}): arguments, result and error message ride on the events, as copies."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runtime import SyncBroker
from runtime.broker import Event

pytestmark = pytest.mark.anyio


async def test_payloads(make_broker: Callable[..., Any]) -> None:
    got: list[Event] = []
    async with make_broker(on_event=got.append) as broker:
        ok = await broker.call({"tool": "echo", "arguments": {"text": "hi"}})
        await broker.call({"tool": "http_get", "arguments": {"url": "http://x/"}})
        await broker.call({"tool": "echo", "arguments": {"bogus": 1}})
    requested = [e for e in got if e.kind == "requested"]
    assert [e.data["arguments"] for e in requested] == [
        {"text": "hi"},
        {"url": "http://x/"},
        {"bogus": 1},
    ]
    completed, denied, failed = (e for e in got if e.kind != "requested")
    assert completed.kind == "completed" and completed.data["result"] == ok.result
    assert completed.data["error_type"] is None and completed.data["duration_ms"] >= 0
    assert "error" not in completed.data
    assert denied.kind == "denied" and denied.data["error_type"] == "policy_denied"
    assert "denied by policy" in denied.data["error"] and "result" not in denied.data
    assert failed.kind == "failed" and failed.data["error_type"] == "invalid_arguments"
    assert "bogus" in failed.data["error"]


async def test_subscribers_get_copies(make_broker: Callable[..., Any]) -> None:
    """A callback that edits what it is given changes neither the call nor its result."""
    seen: list[Any] = []

    def meddle(event: Event) -> None:
        if event.kind == "requested":
            event.data["arguments"]["text"] = "changed"
        else:
            event.data["result"]["arguments"]["text"] = "changed too"
        seen.append(event.kind)

    async with make_broker(on_event=meddle) as broker:
        result = await broker.call({"tool": "echo", "arguments": {"text": "original"}})
    assert seen == ["requested", "completed"]
    assert result.result is not None
    assert result.result["arguments"] == {"text": "original"}


def test_sync_fast_path_has_them_too(tmp_path: Path) -> None:
    got: list[Event] = []
    with SyncBroker(workspace=tmp_path / "ws", on_event=got.append) as broker:
        r = broker.call({"tool": "base64_encode", "arguments": {"text": "hi"}})
        assert r.success
    assert (got[0].kind, got[0].data) == ("requested", {"arguments": {"text": "hi"}})
    assert got[1].kind == "completed" and got[1].data["result"] == {"encoded": "aGk="}
