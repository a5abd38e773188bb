"""Resumability of ``[[mcp_servers]] url`` answers (the spec's ``Last-Event-ID``): an SSE
answer whose connection drops after events with ids is picked up by a GET on the endpoint,
and the ``tools/call`` is never sent again; without ids, or when the server will not
resume, the call is lost as before (``connection_lost``, ``replayed = false``). Against
``hostile_server.py`` (hand-written) and ``url_server.py --resumable`` (the SDK's server
with an event store)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from runtime.mcp._sse import SseParser
from tests.mcp.conftest import HttpServer
from tests.mcp.test_url_hostile import broker_for, call, completions, entry
from tests.mcp.test_url_servers import URL_SERVER

pytestmark = pytest.mark.anyio


def _usage(result: Any) -> dict[str, Any]:
    return dict(result.usage.model_dump())


async def test_a_dropped_answer_is_resumed_not_replayed(
    hostile: HttpServer, tmp_path: Path
) -> None:
    async with broker_for(entry(hostile.url), tmp_path) as broker:
        resumed = await call(broker, "resume")
        ran = await call(broker, "count:resume")
        gets = await call(broker, "count:get:resume")
    assert resumed.success, resumed.error
    assert resumed.result["value"] == "resumed"
    assert ran.result["value"] == 1  # the call reached the server once
    assert gets.result["value"] == 1
    assert _usage(resumed)["mcp_resumes"] == 1
    assert "mcp_retries" not in _usage(resumed)
    record = next(r for r in completions(tmp_path) if r.call_id == resumed.call_id)
    assert record.usage["mcp_resumes"] == 1


async def test_a_stream_that_drops_twice_is_resumed_twice(
    hostile: HttpServer, tmp_path: Path
) -> None:
    async with broker_for(entry(hostile.url), tmp_path) as broker:
        resumed = await call(broker, "resume2")
        ran = await call(broker, "count:resume2")
    assert resumed.success, resumed.error
    assert resumed.result["value"] == "resumed"
    assert ran.result["value"] == 1
    assert _usage(resumed)["mcp_resumes"] == 2


async def test_a_priming_event_and_a_clean_close_are_resumed(
    hostile: HttpServer, tmp_path: Path
) -> None:
    # 2025-11-25: an id with empty data first (not a message), the connection closed
    # before the answer; the client waits the server's retry and polls.
    async with broker_for(entry(hostile.url), tmp_path) as broker:
        resumed = await call(broker, "prime")
        ran = await call(broker, "count:prime")
    assert resumed.success, resumed.error
    assert resumed.result["value"] == "resumed"
    assert ran.result["value"] == 1


async def test_a_server_that_does_not_resume_loses_the_call(
    hostile: HttpServer, tmp_path: Path
) -> None:
    async with broker_for(entry(hostile.url), tmp_path) as broker:
        refused = await call(broker, "refused")
        ran = await call(broker, "count:refused")
        after = await call(broker, "ok")
    assert refused.error is not None and refused.error.type == "sandbox_error"
    assert refused.error.details["reason"] == "connection_lost"
    assert refused.error.details["replayed"] is False
    assert "405" in refused.error.message
    assert ran.result["value"] == 1
    assert _usage(refused)["mcp_resumes"] == 1
    assert after.success


@pytest.mark.parametrize("mode", ["stuck", "repeat"])
async def test_resumptions_that_bring_nothing_give_up(
    hostile: HttpServer, tmp_path: Path, mode: str
) -> None:
    # Nothing at all, or the last event again under its id: no new id, no progress.
    async with broker_for(entry(hostile.url), tmp_path) as broker:
        stuck = await call(broker, mode)
        ran = await call(broker, f"count:{mode}")
        gets = await call(broker, f"count:get:{mode}")
    assert stuck.error is not None and stuck.error.type == "sandbox_error"
    assert stuck.error.details["reason"] == "connection_lost"
    assert stuck.error.details["replayed"] is False
    assert ran.result["value"] == 1
    assert gets.result["value"] == 4  # IDLE_RESUMES
    assert _usage(stuck)["mcp_resumes"] == 4


async def test_the_sdk_server_resumes_from_its_event_store(tmp_path: Path) -> None:
    # The SDK's server closes the call's stream mid-call (close_sse_stream) and keeps the
    # events; the answer comes on the GET that resumes it.
    server = HttpServer([sys.executable, str(URL_SERVER), "--resumable"])
    try:
        async with broker_for(entry(server.url), tmp_path) as broker:
            polled = await broker.call({"tool": "h__poll", "arguments": {}})
            runs = await broker.call({"tool": "h__runs", "arguments": {}})
    finally:
        server.close()
    assert polled.success, polled.error
    assert polled.result == {"result": "polled"}
    assert runs.result == {"result": 1}
    assert _usage(polled)["mcp_resumes"] >= 1


def test_the_parser_keeps_ids_and_retry() -> None:
    parser = SseParser(1024)
    events = parser.feed(b"id: a1\nretry: 250\ndata: \n\n")
    assert [e.data for e in events] == [""] and parser.last_event_id == "a1"
    assert parser.retry_ms == 250
    parser.feed(b'data: {"x": 1}\n\n')  # no id: the last one stays
    assert parser.last_event_id == "a1"
    parser.feed(b"id: a\x01b\ndata: 1\n\n")  # not printable: ignored
    assert parser.last_event_id == "a1"
    parser.feed(b"id: " + b"z" * 2000 + b"\ndata: 1\n\n")  # too long for a header
    assert parser.last_event_id == "a1"
    parser.feed(b"retry: soon\nid: a2\n")  # not digits: ignored; a2 not dispatched yet
    assert (parser.retry_ms, parser.last_event_id) == (250, "a1")
    parser.feed(b"\n")
    assert parser.last_event_id == "a2"
    parser.feed(b"id\n\n")  # an empty id clears it
    assert parser.last_event_id == ""


async def test_the_get_stream_is_resumed_and_misses_nothing(tmp_path: Path) -> None:
    # The SDK's server closes the GET stream and says tools/list_changed while the client
    # is away; the listener comes back with Last-Event-ID and hears it.
    server = HttpServer([sys.executable, str(URL_SERVER), "--resumable"])
    try:
        async with broker_for(entry(server.url), tmp_path) as broker:
            assert "h__extra" not in broker.catalogue
            away = await broker.call({"tool": "h__away", "arguments": {}})
            assert away.success, away.error
            for _ in range(400):  # the notification and the listing: 20 s at most
                if "h__extra" in broker.catalogue:
                    break
                await anyio.sleep(0.05)
            extra = await broker.call({"tool": "h__extra", "arguments": {"word": "hi"}})
    finally:
        server.close()
    assert extra.success, extra.error
    assert extra.result == {"result": "HI"}
