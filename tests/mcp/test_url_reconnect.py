"""A URL server that restarts, is down for a while, or tells the client its tools changed:
the real SDK server (``url_server.py``) on 127.0.0.1, stopped and started again on its port."""

from __future__ import annotations

import re
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.mcp.conftest import HttpServer
from tests.mcp.test_url_hostile import broker_for, completions, entry
from tests.mcp.test_url_servers import URL_SERVER

pytestmark = pytest.mark.anyio


def _start(*args: str) -> HttpServer:
    return HttpServer([sys.executable, str(URL_SERVER), *args])


@pytest.fixture
def restartable() -> Iterator[list[HttpServer]]:
    """A server, in a list so a test can replace it (the fixture closes the last one)."""
    servers = [_start()]
    yield servers
    servers[-1].close()


def _port(server: HttpServer) -> str:
    match = re.search(r":(\d+)/", server.url)
    assert match is not None
    return match.group(1)


async def _add(broker: Any, a: int) -> Any:
    return await broker.call({"tool": "h__add", "arguments": {"a": a, "b": 1}})


async def test_a_restarted_server_gets_a_new_session(
    restartable: list[HttpServer], tmp_path: Path
) -> None:
    first = restartable[0]
    async with broker_for(entry(first.url), tmp_path) as broker:
        before = await _add(broker, 1)
        first.close()
        down = await _add(broker, 2)
        restartable.append(_start("--port", _port(first)))
        after = await _add(broker, 3)
        again = await _add(broker, 4)
    assert before.success and after.success and again.success, (after.error, again.error)
    assert after.result == {"sum": 4}
    # Down: sent again with backoff while refused, then a typed error saying so.
    assert down.error is not None and down.error.type == "sandbox_error"
    assert "unreachable" in down.error.message and down.error.details["reason"] == "unreachable"
    assert down.usage.model_dump().get("mcp_retries") == 3
    # Up again: the stale session answered 404, a fresh initialize, the call sent again.
    assert after.usage.model_dump().get("mcp_sessions") == 1
    assert "mcp_sessions" not in again.usage.model_dump()
    records = {r.call_id: r for r in completions(tmp_path) if r.tool == "h__add"}
    assert records[after.call_id].usage["mcp_sessions"] == 1
    assert records[down.call_id].usage["mcp_retries"] == 3
    assert records[down.call_id].error_type == "sandbox_error"


async def test_list_changed_on_the_get_stream_adds_the_tool(tmp_path: Path) -> None:
    server = _start("--grow")
    try:
        async with broker_for(entry(server.url), tmp_path) as broker:
            assert "h__extra" not in broker.catalogue
            grown = await broker.call({"tool": "h__grow", "arguments": {}})
            assert grown.success, grown.error
            for _ in range(400):  # the notification and the listing: 20 s at most
                if "h__extra" in broker.catalogue:
                    break
                await anyio.sleep(0.05)
            extra = await broker.call({"tool": "h__extra", "arguments": {"word": "hi"}})
            bad = await broker.call({"tool": "h__extra", "arguments": {"word": 3}})
    finally:
        server.close()
    assert extra.success, extra.error
    assert bad.error is not None and bad.error.type == "invalid_arguments"  # its schema holds


async def test_a_server_down_at_start_up_is_reached_later(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nothing listens on, yet
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/mcp"
    server: HttpServer | None = None
    try:
        async with broker_for(entry(url, start_timeout_s=10), tmp_path) as broker:
            proxy = broker.test_proxy
            assert proxy.specs == [] and "unreachable" in proxy.errors["h"]
            missing = await _add(broker, 1)
            server = _start("--port", str(port))
            for _ in range(1200):  # tried again with backoff (at most 30 s apart): 60 s at most
                if "h__add" in broker.catalogue:
                    break
                await anyio.sleep(0.05)
            reached = await _add(broker, 2)
            assert proxy.errors == {}
    finally:
        if server is not None:
            server.close()
    assert missing.error is not None and missing.error.type == "tool_not_found"
    assert reached.success and reached.result == {"sum": 3}, reached.error


async def test_a_refusal_at_start_up_is_final(tmp_path: Path) -> None:
    # Refused by the rules (a deny entry): not tried again, however long the broker runs.
    from runtime.backends.mcp_proxy import McpProxyBackend
    from runtime.policy import Policy

    policy = Policy.from_toml('version = 1\n[network]\ndeny = ["127.0.0.1"]\n', "test")
    proxy = McpProxyBackend([entry("http://127.0.0.1:9/mcp")], network=policy.network)
    async with proxy:
        assert "refused by the network rules" in proxy.errors["h"]
        assert proxy._connections[0].retry_later is False
