"""``notifications/tools/list_changed`` for the clients of the broker's MCP server.

The tool list a client sees is the catalogue as the policy shows the server's profile, and
it changes while the server runs: a tool registered or removed through the API, an
external server's ``tools/list_changed`` (the proxy lists it again), a url server reached
after start-up. One mechanism covers them all: the catalogue tells its listeners of every
change (:meth:`runtime.catalogue.Catalogue.on_change`), and :class:`ToolsChanged` compares
what the profile sees with what it last announced; if that differs, every connected client
hears of it, in its era:

* handshake era (``initialize``; stdio and Streamable HTTP): the server declares
  ``tools.listChanged`` and sends the notification on each connection's own channel (the
  stdio pipe, the session's GET stream). A connection counts once its
  ``notifications/initialized`` arrived (the spec's start of normal operation) and stops
  counting when it closes;
* 2026-07-28 era: on the ``subscriptions/listen`` streams the client opened (the SDK's
  listen handler; the capability follows from it being served).

Why compare instead of forwarding every change: a change the profile cannot see must not
reach its clients (hidden tools are indistinguishable from missing ones, and a
notification would tell that something hidden moved), and a refresh that registers the
same tools again says nothing new. A burst of changes (a server's whole list) settles for
:data:`SETTLE_S` and becomes one notification.

Hazard: catalogue changes may come from any thread; the listener only wakes the announcing
task on the server's event loop, it never sends from the caller's thread.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
from mcp.server import NotificationOptions, Server
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged

from runtime.catalogue import Catalogue

__all__ = ["SETTLE_S", "AnnouncingServer", "ToolsChanged"]

log = logging.getLogger("runtime.mcp")

#: How long a burst of catalogue changes settles before it is announced, seconds.
SETTLE_S = 0.05
#: Bound of one connection's notification, seconds: a client that does not read its
#: stream must not hold the others back.
_SEND_TIMEOUT_S = 5.0


class AnnouncingServer(Server[Any]):
    """The SDK's low-level server, declaring ``tools.listChanged`` in the handshake era
    whoever asks for its initialization options (stdio passes them; the Streamable HTTP
    session manager asks with none)."""

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )


class ToolsChanged:
    """Announces changes of ``visible()`` (the tool definitions a profile sees, in a
    comparable form) caused by changes of ``catalogue``. Hand :meth:`lifespan` to the
    server (it runs the announcing task while the server serves), :attr:`listen` as its
    ``subscriptions/listen`` handler, and :meth:`track` to its middleware."""

    def __init__(self, catalogue: Catalogue, visible: Callable[[], object]) -> None:
        self._catalogue = catalogue
        self._visible = visible
        self._live: weakref.WeakSet[Connection] = weakref.WeakSet()
        self._bus = InMemorySubscriptionBus()
        self.listen = ListenHandler(self._bus)
        self._wake: anyio.Event | None = None
        self._token: anyio.lowlevel.EventLoopToken | None = None
        self._thread: int | None = None

    # -- the server's hooks ---------------------------------------------------------------
    @asynccontextmanager
    async def lifespan(self, server: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        if self._token is not None:  # entered already (stdio runs once per client)
            yield {}
            return
        self._token, self._thread = anyio.lowlevel.current_token(), threading.get_ident()
        self._wake = anyio.Event()
        stop = self._catalogue.on_change(self._changed)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._announce)
                try:
                    yield {}
                finally:
                    tg.cancel_scope.cancel()
        finally:
            stop()
            self._token = self._thread = self._wake = None

    async def track(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Middleware: a handshake-era connection counts from its ``initialized``."""
        result = await call_next(ctx)
        if ctx.method == "notifications/initialized":
            # The SDK's per-request session wraps the connection, which outlives it.
            conn = getattr(ctx.session, "_connection", None)
            if isinstance(conn, Connection) and conn not in self._live:
                self._live.add(conn)
                conn.exit_stack.callback(self._live.discard, conn)
        return result

    # -- announcing -----------------------------------------------------------------------
    def _changed(self) -> None:
        """The catalogue's listener: wake the announcing task, from whatever thread."""
        token, wake = self._token, self._wake
        if token is None or wake is None:
            return
        if threading.get_ident() == self._thread:
            wake.set()
            return
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody listens now
            anyio.from_thread.run_sync(wake.set, token=token)

    async def _announce(self) -> None:
        announced = self._visible()
        while True:
            assert self._wake is not None
            await self._wake.wait()
            await anyio.sleep(SETTLE_S)
            self._wake = anyio.Event()
            now = self._visible()
            if now == announced:
                continue
            announced = now
            await self.notify()

    async def notify(self) -> None:
        """``notifications/tools/list_changed`` to every connected client."""
        async with anyio.create_task_group() as tg:
            for conn in list(self._live):
                tg.start_soon(self._notify_one, conn)
        await self._bus.publish(ToolsListChanged())

    async def _notify_one(self, conn: Connection) -> None:
        with anyio.move_on_after(_SEND_TIMEOUT_S):
            try:
                await conn.send_tool_list_changed()  # best effort: it drops on a dead stream
            except Exception as exc:  # one client's broken pipe must not stop the others
                log.debug("tools/list_changed not delivered: %s", exc)
