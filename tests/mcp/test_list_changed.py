"""``notifications/tools/list_changed`` from the broker's MCP server: declared in the
handshake (``tools.listChanged``), sent to every connected client when the tools its
profile sees change (the catalogue, in-process here; a proxied server's list and a server
joining late, end to end in ``test_list_changed_proxied``), and on the 2026-07-28 era's
``subscriptions/listen`` streams."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client._memory import InMemoryTransport
from mcp.client.session import ClientSession
from mcp.client.subscriptions import ToolsListChanged

from tests.mcp import standins
from tests.mcp.conftest import http_session
from tests.mcp.fixture_server import Handler, catalogue, spec

pytestmark = pytest.mark.anyio


class Heard:
    """A client's message handler that counts tools/list_changed notifications."""

    def __init__(self) -> None:
        self.count = 0
        self._event = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.count += 1
            self._event.set()

    async def next(self, timeout_s: float = 10) -> None:
        with anyio.fail_after(timeout_s):
            await self._event.wait()
        self._event = anyio.Event()


@asynccontextmanager
async def served(
    tmp_path: Path, transport: str, *, hidden: set[str] | None = None
) -> AsyncIterator[tuple[Any, Any]]:
    """(catalogue, connect) of an MCP server over ``transport``: ``"memory"`` (the SDK's
    in-process pair of streams, the stdio path's Server.run) or ``"http"`` (serve_http on
    127.0.0.1, port 0). ``connect(handler)`` opens an initialised client session."""
    from runtime.backends.mock import MockBackend
    from runtime.broker import Broker
    from runtime.mcp import McpToolServer, serve_http

    cat = catalogue()
    policy = standins.ScriptedPolicy(hidden=hidden)
    backends = {"mock": MockBackend(Handler())}
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    async with (
        Broker(ws, policy=policy, catalogue=cat, backends=backends, audit=None) as broker,
        anyio.create_task_group() as tg,
    ):
        tool_server = McpToolServer(broker)
        url = ""
        if transport == "http":
            ready = anyio.Event()

            def on_ready(where: str) -> None:
                nonlocal url
                url = where
                ready.set()

            tg.start_soon(lambda: serve_http(tool_server, "127.0.0.1", 0, on_ready=on_ready))
            await ready.wait()

        @asynccontextmanager
        async def connect(handler: Heard) -> AsyncIterator[ClientSession]:
            if transport == "http":
                async with http_session(url, message_handler=handler) as session:
                    yield session
                return
            async with (
                InMemoryTransport(tool_server.server) as (read, write),
                ClientSession(read, write, message_handler=handler) as session,
            ):
                await session.initialize()
                yield session

        # What mcp.Client connects to: the server itself (in-process) or its URL.
        connect.target = url or tool_server.server  # type: ignore[attr-defined]
        yield cat, connect
        tg.cancel_scope.cancel()


def _names(listing: types.ListToolsResult) -> set[str]:
    return {t.name for t in listing.tools}


@pytest.mark.parametrize("transport", ["memory", "http"])
async def test_a_registered_tool_is_announced(tmp_path: Path, transport: str) -> None:
    async with served(tmp_path, transport) as (cat, connect):
        heard = Heard()
        async with connect(heard) as session:
            caps = session.server_capabilities
            assert caps is not None and caps.tools is not None
            assert caps.tools.list_changed is True
            assert "late" not in _names(await session.list_tools())
            cat.register(spec("late", {}))
            await heard.next()
            assert "late" in _names(await session.list_tools())
            cat.unregister("late")
            await heard.next()
            assert "late" not in _names(await session.list_tools())
    assert heard.count == 2


async def test_every_connected_client_hears(tmp_path: Path) -> None:
    async with served(tmp_path, "http") as (cat, connect):
        first, second = Heard(), Heard()
        async with connect(first), connect(second) as session:
            await session.list_tools()
            cat.register(spec("late", {}))
            await first.next()
            await second.next()


async def test_a_change_the_profile_cannot_see_is_not_announced(tmp_path: Path) -> None:
    async with served(tmp_path, "memory", hidden={"hidden", "secret"}) as (cat, connect):
        heard = Heard()
        async with connect(heard) as session:
            cat.register(spec("secret", {}))
            await anyio.sleep(0.5)  # ten settling periods: it would have been sent by now
            cat.register(spec("late", {}))
            await heard.next()
            names = _names(await session.list_tools())
    assert heard.count == 1
    assert "late" in names and "secret" not in names


async def test_a_burst_of_changes_is_one_notification(tmp_path: Path) -> None:
    async with served(tmp_path, "memory") as (cat, connect):
        heard = Heard()
        async with connect(heard):
            cat.register_many([spec(f"t{i}", {}) for i in range(20)])
            await heard.next()
            await anyio.sleep(0.3)
    assert heard.count == 1


async def test_a_change_from_another_thread_is_announced(tmp_path: Path) -> None:
    async with served(tmp_path, "memory") as (cat, connect):
        heard = Heard()
        async with connect(heard) as session:
            thread = threading.Thread(target=cat.register, args=(spec("late", {}),))
            await anyio.to_thread.run_sync(lambda: (thread.start(), thread.join()))
            await heard.next()
            assert "late" in _names(await session.list_tools())


@pytest.mark.parametrize("transport", ["memory", "http"])
async def test_the_2026_era_listen_stream(tmp_path: Path, transport: str) -> None:
    async with (
        served(tmp_path, transport) as (cat, connect),
        Client(connect.target) as client,
        client.listen(tools_list_changed=True) as sub,
    ):
        assert client.session.protocol_version == "2026-07-28"
        cat.register(spec("late", {}))
        with anyio.fail_after(10):
            event = await anext(aiter(sub))
        assert isinstance(event, ToolsListChanged)
        assert "late" in _names(await client.list_tools())
