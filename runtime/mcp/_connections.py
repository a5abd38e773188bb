"""Bounds on the Streamable HTTP endpoint's connections: how many may be open, how many
one peer may hold, and how long a request's head, then its body, may take to arrive.

Why: uvicorn's h11 protocol has no deadline for a request head before the first request of
a connection completes, and no cap on open connections. A client opening connections that
never finish their head (slowloris: ``GET / HTTP/1.1\\r\\n`` and nothing more) held each
one, and its descriptor, for ever: some 20,000 of them used up the process's descriptors,
so new clients and live sessions timed out (a call needs descriptors too: sandbox pipes,
the audit database), and every failed ``accept`` logged a traceback (36 MB of them).

What happens now (:func:`guarded_protocol` wraps the protocol class uvicorn would use):

* a connection past :attr:`ConnectionLimits.max_connections` open ones, or past
  :attr:`ConnectionLimits.max_per_peer` from one address, is answered ``503`` and closed
  at once (its descriptor is back before the next accept);
* a request head (request line and headers) must be complete within
  :attr:`ConnectionLimits.head_timeout_s` of the connection opening or of the previous
  response ending; else the connection is closed. Only the head: a long ``tools/call``
  stream or an SSE ``GET`` that is answering is never cut (uvicorn's keep-alive timeout
  still closes an idle connection between requests);
* a request's body must be complete within :attr:`ConnectionLimits.body_timeout_s` of its
  head (of the previous response ending, for a pipelined request whose head came before
  that); else it is answered ``408`` and the connection closed (the app behind sees the
  client gone). Before, a client that sent a valid head with ``Content-Length`` and then a
  byte now and then held its connection, and a request task, for as long as it liked:
  only the connection cap bounded how many;
* the refusals, the closings, and an ``accept`` failing for want of descriptors, are
  logged at most once a minute each (with a count), without a traceback. So is a client
  gone before its request body was read (it hung up, or the body deadline closed it):
  the MCP SDK logs that ``ClientDisconnect`` as an ERROR with a traceback, ten lines a
  request, which any client could repeat as fast as it can connect
  (:class:`_QuietDisconnects` turns them into the one line).

Hazard: the peer's address is the kernel's (the socket's), not a header: a proxy in front
makes every client one peer, which is why the per-peer bound defaults to the total on
loopback.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import resource
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from starlette.requests import ClientDisconnect

__all__ = ["ConnectionLimits", "default_limits", "guarded_protocol", "quiet_accept_errors"]

log = logging.getLogger("runtime.mcp")

_LOG_EVERY_S = 60.0
_LATE_BODY = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: 34\r\nconnection: close\r\n\r\nrequest body not received in time\n"
)
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: 32\r\nconnection: close\r\n\r\ntoo many connections; try again\n"
)
#: Descriptors kept out of the connections' share: the broker's own (audit database and
#: journal, the fork-server's pipes, each running call's frames and output pipes).
_RESERVED_FDS = 256


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Bounds of the HTTP endpoint's connections (see the module docstring)."""

    #: Open connections at most, all peers together; one more is answered 503 and closed.
    max_connections: int
    #: Open connections at most from one peer address (the kernel's, not a header's).
    max_per_peer: int
    #: Seconds a request head (request line + headers) may take to arrive, counted from the
    #: connection opening or the previous response ending.
    head_timeout_s: float = 10.0
    #: Seconds a request body may take to arrive whole, counted from its head's end: a
    #: 4 MiB body (the largest read) needs some 140 KB/s.
    body_timeout_s: float = 30.0


def default_limits(*, loopback: bool) -> ConnectionLimits:
    """Half of what the descriptor limit (RLIMIT_NOFILE) leaves after a reserve for the
    broker, between 32 and 1,024 connections; one peer may hold all of them on loopback
    (every local client is 127.0.0.1), a quarter of them otherwise."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    room = 1_000_000 if soft == resource.RLIM_INFINITY else soft
    total = max(32, min(1024, (room - _RESERVED_FDS) // 2))
    return ConnectionLimits(max_connections=total, max_per_peer=total if loopback else total // 4)


class _Throttled:
    """A warning logged at most once per ``_LOG_EVERY_S``, with how many it stands for."""

    def __init__(self, message: str) -> None:
        self._message = message
        self._last = -_LOG_EVERY_S
        self._count = 0

    def note(self) -> None:
        self._count += 1
        now = time.monotonic()
        if now - self._last >= _LOG_EVERY_S:
            log.warning("%s (%d since the last such line)", self._message, self._count)
            self._last, self._count = now, 0


class _QuietDisconnects(logging.Filter):
    """Drop the MCP SDK's records of a ``ClientDisconnect`` (``Error handling POST
    request`` and its traceback), noting them in a throttled line instead; every other
    record passes."""

    def __init__(self) -> None:
        super().__init__()
        self._gone = _Throttled(
            "mcp http: requests dropped: client gone before its request body was read"
        )

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, ClientDisconnect):
            self._gone.note()
            return False
        return True


#: The SDK's logger that reports a POST whose client went away mid-body.
_SDK_HTTP_LOGGER = "mcp.server.streamable_http"
_QUIET_DISCONNECTS = _QuietDisconnects()


def guarded_protocol(base: type[Any], limits: ConnectionLimits) -> type[Any]:
    """A subclass of uvicorn's HTTP protocol class ``base`` (h11 or httptools: both keep
    ``server_state.connections``, ``transport``, ``client`` and the request ``cycle``)
    that holds the connections to ``limits``.

    Also quiets the SDK's log of clients gone mid-body (once per process: the filter is
    one object, and ``addFilter`` adds it only once)."""
    logging.getLogger(_SDK_HTTP_LOGGER).addFilter(_QUIET_DISCONNECTS)
    peers: Counter[str] = Counter()
    refused = _Throttled(
        f"mcp http: connections refused past {limits.max_connections} open "
        f"({limits.max_per_peer} per peer)"
    )
    slow = _Throttled(
        f"mcp http: connections closed for not sending a request head within "
        f"{limits.head_timeout_s:g} s"
    )
    slow_body = _Throttled(
        f"mcp http: requests answered 408 for not sending their body within "
        f"{limits.body_timeout_s:g} s of the head"
    )

    class GuardedProtocol(base):  # type: ignore[misc]
        _refused = False
        _peer: str | None = None
        _head_timer: asyncio.TimerHandle | None = None
        _body_timer: asyncio.TimerHandle | None = None
        _body_cycle: Any = None  # the request whose body the timer waits for

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            peername = transport.get_extra_info("peername")
            peer = str(peername[0]) if isinstance(peername, tuple) and peername else "?"
            if (
                len(self.server_state.connections) >= limits.max_connections
                or peers[peer] >= limits.max_per_peer
            ):
                self._refused = True
                refused.note()
                if isinstance(transport, asyncio.WriteTransport):
                    transport.write(_BUSY)
                transport.close()
                return
            self._peer = peer
            peers[peer] += 1
            super().connection_made(transport)
            self._arm_head_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._refused:
                return  # never served: uvicorn's state does not know it
            self._disarm_head_timer()
            self._disarm_body_timer()
            self._release_peer()
            super().connection_lost(exc)

        def _release_peer(self) -> None:
            if self._peer is not None:
                peers[self._peer] -= 1
                if peers[self._peer] <= 0:
                    del peers[self._peer]
                self._peer = None

        def data_received(self, data: bytes) -> None:
            if self._refused:
                return
            super().data_received(data)
            if self.transport.get_protocol() is not self:
                # Upgraded (a WebSocket, when a library for it is installed): the new
                # protocol owns the connection now, and this one hears no connection_lost.
                self._disarm_head_timer()
                self._disarm_body_timer()
                self._release_peer()
                return
            if self._head_timer is not None and self._in_request():
                self._disarm_head_timer()
            self._watch_body()

        def on_response_complete(self) -> None:
            self._disarm_body_timer()
            super().on_response_complete()
            if self.transport.is_closing():
                return
            # A pipelined request whose head was already buffered starts here (h11:
            # ``handle_events`` after ``start_next_cycle``), with no data_received to
            # follow: its body deadline is armed now, or never.
            if self._in_request():
                self._disarm_head_timer()
                self._watch_body()
            else:
                self._arm_head_timer()  # the next request's head, if any, has its deadline

        def _in_request(self) -> bool:
            cycle = getattr(self, "cycle", None)
            return cycle is not None and not cycle.response_complete

        def _arm_head_timer(self) -> None:
            self._disarm_head_timer()
            loop = asyncio.get_running_loop()
            self._head_timer = loop.call_later(limits.head_timeout_s, self._head_late)

        def _disarm_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _watch_body(self) -> None:
            """Arm the body deadline when a request's head has arrived and its body has
            not (once per request), disarm it when the body is whole."""
            cycle = getattr(self, "cycle", None)
            pending = self._in_request() and bool(getattr(cycle, "more_body", False))
            if not pending:
                self._disarm_body_timer()
            elif cycle is not self._body_cycle:
                self._disarm_body_timer()
                self._body_cycle = cycle
                loop = asyncio.get_running_loop()
                self._body_timer = loop.call_later(limits.body_timeout_s, self._body_late)

        def _disarm_body_timer(self) -> None:
            if self._body_timer is not None:
                self._body_timer.cancel()
                self._body_timer = None

        def _body_late(self) -> None:
            self._body_timer = None
            cycle = getattr(self, "cycle", None)
            if (
                cycle is not self._body_cycle
                or not self._in_request()
                or not getattr(cycle, "more_body", False)
                or self.transport.is_closing()
            ):
                return
            slow_body.note()
            if not getattr(cycle, "response_started", True):
                self.transport.write(_LATE_BODY)
            # Closing tells the request's task the client is gone (http.disconnect).
            self.transport.close()

        def _head_late(self) -> None:
            self._head_timer = None
            if self._in_request() or self.transport.is_closing():
                return
            slow.note()
            self.transport.close()

    GuardedProtocol.__name__ = GuardedProtocol.__qualname__ = f"Guarded{base.__name__}"
    return GuardedProtocol


_OUT_OF_DESCRIPTORS = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


def quiet_accept_errors(loop: asyncio.AbstractEventLoop) -> Any:
    """Make ``loop`` log an ``accept`` that failed for want of descriptors as one line a
    minute instead of a traceback each time (asyncio retries the accept a second later
    by itself); every other error goes to the handler in place before. Returns that
    handler, to put back with ``loop.set_exception_handler``."""
    previous = loop.get_exception_handler()
    short = _Throttled("mcp http: accept failed: out of file descriptors")

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if (
            isinstance(exc, OSError)
            and exc.errno in _OUT_OF_DESCRIPTORS
            and "accept" in str(context.get("message", ""))
        ):
            short.note()
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    loop.set_exception_handler(handler)
    return previous
