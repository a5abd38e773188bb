"""``transport = "sse"`` and ``"auto"``: the legacy HTTP+SSE transport (MCP 2024-11-05)
against the SDK's own SSE server (``url_server.py --sse``) and the hostile server's legacy
routes, through the same gateway, policy and audit as Streamable HTTP."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mcp.conftest import HttpServer
from tests.mcp.test_url_hostile import broker_for, call, completions, entry, forget
from tests.mcp.test_url_servers import TOKEN, URL_SERVER

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def sse_server() -> Iterator[HttpServer]:
    server = HttpServer([sys.executable, str(URL_SERVER), "--sse", "--token", TOKEN])
    yield server
    server.close()


@pytest.fixture
def bearer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("URL_MCP_BEARER", f"Bearer {TOKEN}")


def legacy_url(server: HttpServer, kind: str) -> str:
    return server.url.replace("/mcp", f"/legacy/{kind}")


@pytest.mark.parametrize("transport", ["sse", "auto"])
async def test_sdk_sse_server_listed_called_and_audited(
    sse_server: HttpServer, bearer: None, tmp_path: Path, transport: str
) -> None:
    server = entry(
        sse_server.url,
        transport=transport,
        headers={"Authorization": "env:URL_MCP_BEARER"},
        prefix="u",
    )
    async with broker_for(server, tmp_path) as broker:
        proxy = broker.test_proxy
        assert proxy.errors == {} and proxy.transports == {"h": "sse"}
        assert "u__add" in [s.name for s in proxy.specs]
        ok = await broker.call({"tool": "u__add", "arguments": {"a": 2, "b": 40}})
        failed = await broker.call({"tool": "u__fail", "arguments": {}})
    assert ok.success, ok.error
    assert ok.result == {"sum": 42} and ok.backend == "mcp"
    assert failed.error is not None and failed.error.type == "tool_error"
    assert "fail from the url server" in failed.error.message
    done = [r for r in completions(tmp_path) if r.tool == "u__add"]
    # The top-level backend is the tool's kind, as for every transport; the fingerprint
    # names the server and the gateway.
    assert done and done[0].backend == "mcp"
    assert done[0].sandbox is not None and done[0].sandbox["backend"] == "mcp:h"
    assert "egress-gateway" in done[0].sandbox["mechanisms"]


async def test_auto_keeps_streamable_http_when_it_answers(
    hostile: HttpServer, tmp_path: Path
) -> None:
    async with broker_for(entry(hostile.url, transport="auto"), tmp_path) as broker:
        assert broker.test_proxy.transports == {"h": "streamable-http"}
        assert (await call(broker, "ok")).success


async def test_wrong_token_is_not_a_transport_question(
    sse_server: HttpServer, tmp_path: Path
) -> None:
    # 401 to the initialize POST: auto does not fall back, the error says why.
    async with broker_for(entry(sse_server.url, transport="auto"), tmp_path) as broker:
        assert broker.test_proxy.specs == []
        assert "HTTP 401" in broker.test_proxy.errors["h"]


@pytest.mark.parametrize(
    ("kind", "words"),
    [
        ("otherhost", "another origin"),
        ("private", "another origin"),
        ("otherport", "another origin"),
    ],
)
async def test_an_endpoint_elsewhere_is_refused(
    hostile: HttpServer, tmp_path: Path, kind: str, words: str
) -> None:
    server = entry(legacy_url(hostile, kind), transport="sse")
    async with broker_for(server, tmp_path) as broker:
        assert broker.test_proxy.specs == []
        assert words in broker.test_proxy.errors["h"]


async def test_legacy_server_requests_and_hostile_answers(
    hostile: HttpServer, tmp_path: Path
) -> None:
    async with broker_for(entry(legacy_url(hostile, "ok"), transport="sse"), tmp_path) as broker:
        ping = await call(broker, "ask:ping")
        sampling = await call(broker, "ask:sampling/createMessage")
        chatter = await call(broker, "chatter")
        huge = await call(broker, "huge")
        endless = await call(broker, "endless", tool="h__e")
        wrong = await call(broker, "badid", tool="h__e")
        after = await call(broker, "ok")
    assert ping.success and ping.result["value"]["result"] == {}
    assert sampling.success and sampling.result["value"]["error"]["code"] == -32601
    assert chatter.success and chatter.result["value"] == "after the chatter"
    assert huge.error is not None and huge.error.type == "output_too_large"
    assert endless.error is not None and endless.error.type == "timeout"
    assert wrong.error is not None and wrong.error.type == "timeout"  # no answer ever came
    assert after.success


async def test_legacy_flood_ends_the_stream_and_the_next_call_opens_another(
    hostile: HttpServer, tmp_path: Path
) -> None:
    async with broker_for(entry(legacy_url(hostile, "ok"), transport="sse"), tmp_path) as broker:
        flood = await call(broker, "flood")
        after = await call(broker, "count:flood")
    assert flood.error is not None and flood.error.type == "sandbox_error"
    assert "flooded" in flood.error.message and "not sent again" in flood.error.message
    assert after.success and after.result["value"] == 1
    assert after.usage.model_dump().get("mcp_sessions") == 1


async def test_legacy_session_lost_is_renewed(hostile: HttpServer, tmp_path: Path) -> None:
    async with broker_for(entry(legacy_url(hostile, "ok"), transport="sse"), tmp_path) as broker:
        before = await call(broker, "ok")
        await forget(hostile)  # the server ends its streams and forgets the sessions
        after = await call(broker, "ok")
    assert before.success and after.success, after.error
    assert after.usage.model_dump().get("mcp_sessions") == 1
    done = [r for r in completions(tmp_path) if r.tool == "h__t"]
    assert done[-1].usage is not None and done[-1].usage["mcp_sessions"] == 1


async def test_a_message_before_the_endpoint_is_skipped(
    hostile: HttpServer, tmp_path: Path
) -> None:
    server = entry(legacy_url(hostile, "late"), transport="sse")
    async with broker_for(server, tmp_path) as broker:
        assert broker.test_proxy.errors == {}
        assert (await call(broker, "ok")).success


async def test_a_stream_that_ends_before_its_endpoint(hostile: HttpServer, tmp_path: Path) -> None:
    server = entry(legacy_url(hostile, "none"), transport="sse")
    async with broker_for(server, tmp_path) as broker:
        assert broker.test_proxy.specs == []
        assert "ended" in broker.test_proxy.errors["h"]


async def test_a_new_stream_that_ends_early_is_tried_again(
    hostile: HttpServer, tmp_path: Path
) -> None:
    # After the forget, the call needs a new session; the first new stream ends before its
    # endpoint. The call was not sent yet, so it is sent on the next stream.
    server = entry(legacy_url(hostile, "flaky"), transport="sse")
    async with broker_for(server, tmp_path) as broker:
        before = await call(broker, "ok")
        await forget(hostile)
        after = await call(broker, "count:ok")
    assert before.success and after.success, after.error
    usage = after.usage.model_dump()
    assert usage.get("mcp_sessions") == 1 and usage.get("mcp_retries", 0) >= 1
