"""``[[mcp_servers]] url`` against a server that misbehaves on purpose (``hostile_server.py``,
a real HTTP server on 127.0.0.1): server requests mid-answer, streams that never end, huge
events, floods, wrong ids, dropped connections, list_changed, a forgotten session. Every one
is a typed result; the broker lives on and the next call works."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from runtime.mcp.external import ExternalServer
from tests.mcp.conftest import HOSTILE, HttpServer
from tests.mcp.test_url_servers import broker_for as servers_broker_for

pytestmark = pytest.mark.anyio

POLICY = """\
version = 1
default = "deny"

[categories]
mcp = "allow"

[tools]
"h__t" = { action = "allow", limits = { timeout_s = 30, output_bytes = 100000 } }
"h__e" = { action = "allow", limits = { timeout_s = 2, output_bytes = 100000 } }
"""


def entry(url: str, **kw: Any) -> ExternalServer:
    return ExternalServer.model_validate({"name": "h", "url": url, **kw})


@asynccontextmanager
async def broker_for(server: ExternalServer, tmp_path: Path) -> AsyncIterator[Any]:
    async with servers_broker_for([server], tmp_path, POLICY) as broker:
        yield broker


async def call(broker: Any, mode: str, tool: str = "h__t") -> Any:
    return await broker.call({"tool": tool, "arguments": {"mode": mode}})


async def forget(server: HttpServer) -> None:
    """The server forgets every session, as after a restart."""
    async with httpx.AsyncClient() as client:
        await client.post(server.url.replace("/mcp", "/control/forget"))


def completions(tmp_path: Path) -> list[Any]:
    from runtime.audit import AuditLog

    log = AuditLog(tmp_path / "audit.db")
    try:
        assert log.verify().ok
        return [r for r in log.tail(200) if r.kind == "completion"]
    finally:
        log.close()


@pytest.mark.parametrize(
    ("method", "words"),
    [
        ("sampling/createMessage", "drive the model"),
        ("elicitation/create", "prompt the user"),
        ("roots/list", "roots"),
        ("x/unknown", "no such method"),
    ],
)
async def test_server_requests_are_refused_and_the_answer_arrives(
    hostile: HttpServer, tmp_path: Path, method: str, words: str
) -> None:
    async with broker_for(entry(hostile.url), tmp_path) as broker:
        result = await call(broker, f"ask:{method}")
    assert result.success, result.error
    answer = result.result["value"]  # what the server received from us
    assert answer["error"]["code"] == -32601
    assert words in answer["error"]["message"]


async def test_ping_is_answered(hostile: HttpServer, tmp_path: Path) -> None:
    async with broker_for(entry(hostile.url), tmp_path) as broker:
        result = await call(broker, "ask:ping")
    assert result.success, result.error
    assert result.result["value"]["result"] == {}


async def test_a_stream_that_never_ends_times_out(hostile: HttpServer, tmp_path: Path) -> None:
    async with broker_for(entry(hostile.url), tmp_path) as broker:
        endless = await call(broker, "endless", tool="h__e")
        after = await call(broker, "ok")
    assert endless.error is not None and endless.error.type == "timeout"
    assert after.success


async def test_a_huge_event_is_output_too_large(hostile: HttpServer, tmp_path: Path) -> None:
    async with broker_for(entry(hostile.url), tmp_path) as broker:
        huge = await call(broker, "huge")
        after = await call(broker, "ok")
    assert huge.error is not None and huge.error.type == "output_too_large"
    assert after.success


async def test_a_request_flood_is_cut_off(hostile: HttpServer, tmp_path: Path) -> None:
    async with broker_for(entry(hostile.url), tmp_path) as broker:
        flood = await call(broker, "flood")
        after = await call(broker, "ok")
    assert flood.error is not None and flood.error.type == "sandbox_error"
    assert "flooded" in flood.error.message and flood.error.details["reason"] == "flood"
    assert after.success


async def test_a_stream_of_comments_is_cut_off(hostile: HttpServer, tmp_path: Path) -> None:
    # Comments reach no message budget; the stream's bytes are capped all the same.
    async with broker_for(entry(hostile.url), tmp_path) as broker:
        babble = await call(broker, "babble")
        after = await call(broker, "ok")
    assert babble.error is not None and babble.error.type == "sandbox_error"
    assert babble.error.details["reason"] == "flood"
    assert after.success


async def test_notifications_on_the_way_are_bounded(
    hostile: HttpServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="runtime.mcp.remote")
    async with broker_for(entry(hostile.url), tmp_path) as broker:
        first = await call(broker, "chatter")
        second = await call(broker, "chatter")
    assert first.success and first.result["value"] == "after the chatter"
    assert second.success
    # 200 notifications arrived; the log holds at most its budget of them, and says so.
    lines = [r for r in caplog.records if r.name == "runtime.mcp.remote"]
    assert 0 < len(lines) <= 101
    assert "not logged" in lines[-1].getMessage()


async def test_answers_with_a_wrong_id_are_not_taken(hostile: HttpServer, tmp_path: Path) -> None:
    async with broker_for(entry(hostile.url), tmp_path) as broker:
        wrong = await call(broker, "badid")
        count = await call(broker, "count:badid")
    assert wrong.error is not None and wrong.error.type == "sandbox_error"
    assert "no answer" in wrong.error.message
    assert count.result["value"] == 1  # a call the server may have run is not sent again


async def test_a_dropped_connection_is_not_replayed(hostile: HttpServer, tmp_path: Path) -> None:
    async with broker_for(entry(hostile.url), tmp_path) as broker:
        dropped = await call(broker, "drop")
        count = await call(broker, "count:drop")
    assert dropped.error is not None and dropped.error.type == "sandbox_error"
    assert dropped.error.details["reason"] == "connection_lost"
    assert dropped.error.details["replayed"] is False
    assert "not sent again" in dropped.error.message
    assert count.success and count.result["value"] == 1


async def test_list_changed_refreshes_the_servers_tools(
    hostile: HttpServer, tmp_path: Path
) -> None:
    async with broker_for(entry(hostile.url), tmp_path) as broker:
        assert "h__extra" not in broker.catalogue
        grown = await call(broker, "grow")
        assert grown.success
        for _ in range(400):  # the refresh runs in the proxy's own task: 20 s at most
            if "h__extra" in broker.catalogue:
                break
            await anyio.sleep(0.05)
        spec = broker.catalogue.get("h__extra")
        assert (spec.category, spec.backend.value) == ("mcp", "mcp")
        # The policy still decides: mcp is allowed by category here.
        extra = await call(broker, "ok", tool="h__extra")
        assert extra.success, extra.error
        assert "h__extra" in [s.name for s in broker.test_proxy.specs]


async def test_a_forgotten_session_is_renewed_and_audited(
    hostile: HttpServer, tmp_path: Path
) -> None:
    async with broker_for(entry(hostile.url), tmp_path) as broker:
        before = await call(broker, "ok")
        await forget(hostile)
        after = await call(broker, "ok")
    assert before.success and after.success, after.error
    assert after.usage.model_dump().get("mcp_sessions") == 1
    done = [r for r in completions(tmp_path) if r.tool == "h__t"]
    assert done[-1].usage is not None and done[-1].usage["mcp_sessions"] == 1
    assert "mcp_sessions" not in (done[0].usage or {})


async def test_concurrent_calls_renew_the_session_once(hostile: HttpServer, tmp_path: Path) -> None:
    async with broker_for(entry(hostile.url), tmp_path) as broker:
        assert (await call(broker, "ok")).success
        before = (await call(broker, "count:initialize")).result["value"]
        await forget(hostile)
        results: list[Any] = []

        async def one() -> None:
            results.append(await call(broker, "ok"))

        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(one)
        after = (await call(broker, "count:initialize")).result["value"]
    assert all(r.success for r in results), [r.error for r in results]
    assert after - before == 1
    assert sum(r.usage.model_dump().get("mcp_sessions", 0) for r in results) == 1


async def test_close_does_not_wait_for_a_listing_in_flight(tmp_path: Path) -> None:
    # Its own server: the listing it is asked for after list_changed never ends.
    server = HttpServer([sys.executable, str(HOSTILE)])
    try:
        with anyio.fail_after(20):  # a hang guard: the listing alone would take 60 s
            async with broker_for(entry(server.url, start_timeout_s=60), tmp_path) as broker:
                assert (await call(broker, "slowlist")).success
                await anyio.sleep(0.5)  # the refresh task is now waiting on tools/list
    finally:
        server.close()


async def test_a_redirect_of_the_mcp_endpoint_is_not_followed(
    hostile: HttpServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # It was: the POST went again, with the entry's secret header, to wherever the 307
    # pointed (any allowed origin), and that answer was taken as the result.
    monkeypatch.setenv("HOSTILE_KEY", "k3y-value")
    server = entry(hostile.url, headers={"X-Api-Key": "env:HOSTILE_KEY"})
    async with broker_for(server, tmp_path) as broker:
        result = await call(broker, "redirect")
        assert result.error is not None and result.error.type == "sandbox_error", result
        origin = hostile.url.removesuffix("/mcp")
        assert f"a redirect to {origin}: refused, not followed" in result.error.message
        assert "s3cr3t" not in result.error.message and "followed=1" not in result.error.message
        assert result.error.details["reason"] == "redirect"
        assert (await call(broker, "count:followed")).result["value"] == 0
        # The session is fine: the next call works.
        assert (await call(broker, "ok")).success


def test_location_origin() -> None:
    from runtime.mcp._client import location_origin

    base = "https://mcp.example:8443/mcp"
    assert location_origin(base, "https://u:p@other.example/x?token=1") == "https://other.example"
    assert location_origin(base, "/elsewhere?token=1") == "https://mcp.example:8443"
    assert location_origin(base, "http://[::1]:9/") == "http://[::1]:9"
    assert location_origin(base, None) == "no location"
    assert location_origin(base, "http://bad:port/") == "an unreadable location"
