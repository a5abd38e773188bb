"""The legacy HTTP+SSE transport (MCP 2024-11-05), and ``transport = "auto"``.

::

    [[mcp_servers]]
    name = "old"
    url = "https://mcp.example.com/sse"
    transport = "sse"        # or "auto": Streamable HTTP first, this one if refused

How it goes: a GET opens an SSE stream held for the whole session; its first event,
``endpoint``, names the URL to POST every JSON-RPC message to; the server answers each POST
with 202 and puts the response on the GET stream. One reader task per stream (in the task
group the proxy lends) hands responses to the waiting requests by id.

Hazards and their answers:

* The endpoint is the server's word: it is resolved against the server URL and must be on
  the same origin (scheme, host, port), else the connection is refused — a server must not
  point the broker at another host or a private address. Every POST still goes through the
  egress gateway's rules and address checks, as the GET did.
* The stream never ends by design, so no byte cap spans it: each event is capped
  (:data:`EVENT_BYTES`; a response larger than its request's cap is ``OutputTooLarge``), and
  messages besides the awaited responses are bounded per stream (``_peer.Budget``: a flood
  closes the stream, which fails its pending requests).
* A stream that ends or breaks fails every request waiting on it. The next request opens a
  new stream and a new session (this transport has no session to resume). A ``tools/call``
  whose POST was accepted is never sent again (it may have run); ``initialize`` and
  ``tools/list`` are. A POST answered 404 (the server forgot the session) or refused at
  connect never reached the server and is sent again on a new stream. All within the
  request's deadline and at most ``ATTEMPTS`` sends, with the same backoff as Streamable HTTP.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin

import anyio
import anyio.abc
import mcp_types as types

from runtime.egress import parse_target
from runtime.errors import (
    OutputTooLarge,
    RuntimeToolError,
    SandboxError,
    ToolFailed,
)
from runtime.mcp._client import LIST_BYTES, HttpStatusError, RemoteBase, Trace, delivered
from runtime.mcp._peer import SESSION_WINDOW_S, Budget, classify
from runtime.mcp._sse import EventTooLarge, SseParser, SseSyntaxError
from runtime.mcp.remote import ATTEMPTS, BACKOFF_S, RemoteClient
from runtime.policy.network import NetworkRules
from runtime.policy.schema import McpServerEntry

__all__ = ["EVENT_BYTES", "LegacySseClient", "connect_remote"]

#: Cap of one event on the GET stream, bytes (the gateway's ceiling for this connection).
EVENT_BYTES = 64 * 1024 * 1024 + 65_536
_MAX_ENDPOINT = 2048
_POST_TIMEOUT_S = 10.0
#: Statuses of the first initialize POST that make ``auto`` try this transport (the spec's
#: backwards-compatibility procedure names "an HTTP 4xx"; 401/403 and the like are about
#: credentials, not the transport, and are reported as they are).
_FALLBACK_STATUS = frozenset({400, 404, 405})


class _NotSent(Exception):
    """The request never reached the server (its cause says why)."""


class _Died(Exception):
    """The stream a request waited on ended or broke before its response."""


@dataclass(slots=True)
class _Pending:
    max_bytes: int
    done: anyio.Event = field(default_factory=anyio.Event)
    message: dict[str, Any] | None = None
    error: BaseException | None = None


@dataclass(slots=True)
class _Stream:
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    ready: anyio.Event = field(default_factory=anyio.Event)
    endpoint: str | None = None
    error: RuntimeToolError | None = None
    dead: bool = False
    pending: dict[int, _Pending] = field(default_factory=dict)
    #: What the gateway noted of the stream's GET (for the egress log).
    note: dict[str, Any] = field(default_factory=dict)


class LegacySseClient(RemoteBase):
    """One server spoken to by the legacy HTTP+SSE transport; needs the task group."""

    transport = "sse"
    spoken = frozenset({"2024-11-05", "2025-03-26", "2025-06-18"})

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._stream: _Stream | None = None
        self._opening = anyio.Lock()
        self._sessions = 0

    async def _open(self, *, timeout_s: float, trace: Trace) -> None:
        if self._task_group is None:
            raise SandboxError(
                f"MCP server {self.server.name!r}: the sse transport needs a task group",
                server=self.server.name,
            )
        last: BaseException | None = None
        for attempt in range(ATTEMPTS):
            if attempt:
                await anyio.sleep(min(BACKOFF_S * 2 ** (attempt - 1), 2.0))
            try:
                await self._ready(timeout_s, trace)
                return
            except (_NotSent, _Died) as exc:
                last = exc.__cause__ or exc
        assert last is not None
        raise self.unreachable(last, ATTEMPTS) from last

    async def aclose(self) -> None:
        self._closed = True
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.scope.cancel()
        await self._gateway.aclose()

    # -- requests -----------------------------------------------------------------------------
    async def _request(
        self,
        method: str,
        params: dict[str, Any],
        *,
        timeout_s: float,
        max_bytes: int,
        trace: Trace,
    ) -> dict[str, Any]:
        with anyio.fail_after(timeout_s):
            last: BaseException | None = None
            for attempt in range(ATTEMPTS):
                if attempt:
                    await anyio.sleep(min(BACKOFF_S * 2 ** (attempt - 1), 2.0))
                    trace["mcp_retries"] = trace.get("mcp_retries", 0) + 1
                try:
                    stream = await self._ready(timeout_s, trace)
                except (_NotSent, _Died) as exc:
                    # Opening a new session failed: this request was not sent yet.
                    last = exc.__cause__ or exc
                    continue
                try:
                    message = {
                        "jsonrpc": "2.0",
                        "id": next(self._ids),
                        "method": method,
                        "params": params,
                    }
                    return await self._call_on(stream, message, max_bytes, trace)
                except _NotSent as exc:
                    last = exc.__cause__ or exc
                except _Died as exc:
                    if method == "tools/call":
                        cause = exc.__cause__ or exc
                        raise self.lost(method, cause) from cause
                    last = exc.__cause__ or exc
            assert last is not None
            raise self.unreachable(last, ATTEMPTS) from last

    async def _ready(self, timeout_s: float, trace: Trace) -> _Stream:
        """The live stream, or a new one with a new session (initialize and initialized)."""
        async with self._opening:
            stream = self._stream
            if stream is not None and not stream.dead:
                return stream
            stream = await self._connect(timeout_s, trace)
            try:
                request = self.initialize_message(next(self._ids))
                self.accept_initialize(await self._call_on(stream, request, LIST_BYTES, trace))
                initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
                await self._post(stream, initialized, trace)
            except BaseException:
                stream.scope.cancel()
                raise
            self._sessions += 1
            if self._sessions > 1:
                trace["mcp_sessions"] = trace.get("mcp_sessions", 0) + 1
            self._stream = stream
            return stream

    async def _call_on(
        self, stream: _Stream, message: dict[str, Any], max_bytes: int, trace: Trace | None
    ) -> dict[str, Any]:
        request_id: int = message["id"]
        pending = stream.pending[request_id] = _Pending(max_bytes)
        try:
            await self._post(stream, message, trace)
            await pending.done.wait()
        finally:
            stream.pending.pop(request_id, None)
        if pending.error is not None:
            raise pending.error  # _Died, or OutputTooLarge
        assert pending.message is not None
        return self.result_of(pending.message)

    async def _post(
        self, stream: _Stream, message: dict[str, Any], trace: Trace | None = None
    ) -> None:
        if stream.dead:
            raise _NotSent from stream.error
        assert stream.endpoint is not None
        reply = await self.post_message(
            stream.endpoint,
            self._headers,
            message,
            timeout_s=_POST_TIMEOUT_S,
            follow_redirects=False,
            lost=_Died,
            not_sent=_NotSent,
            trace=trace,
        )
        status = reply["status"]
        if status == 404:
            # The server forgot the session (restarted): it did not handle the message.
            stream.dead = True
            stream.scope.cancel()
            raise _NotSent from self.malformed("HTTP 404 to a message: the session is gone")
        if not 200 <= status < 300:
            raise self.status_error(status, reply["body"], headers=reply["headers"])

    # -- the stream ---------------------------------------------------------------------------
    async def _connect(self, timeout_s: float, trace: Trace | None = None) -> _Stream:
        """A new event stream (its GET in ``trace``'s egress log), ready with its endpoint."""
        assert self._task_group is not None
        stream = _Stream()
        self._task_group.start_soon(self._read, stream, timeout_s)
        try:
            with anyio.fail_after(timeout_s):
                await stream.ready.wait()
        except BaseException:
            stream.scope.cancel()
            self.log_egress(trace, "GET", self.url, note=stream.note)
            raise
        failed = stream.error if stream.endpoint is None else None
        self.log_egress(trace, "GET", self.url, note=stream.note, error=failed)
        if stream.endpoint is None:
            error = stream.error or self._ended()
            if isinstance(error, ToolFailed) and not delivered(error):
                raise _NotSent from error
            if isinstance(error, ToolFailed) or error.details.get("reason") == "stream_ended":
                # Reached, and gone again (a server restarting): another stream may do.
                raise _Died from error
            raise error  # refused by the rules, an HTTP status, a bad endpoint: as it is
        return stream

    def _ended(self) -> SandboxError:
        return SandboxError(
            f"MCP server {self.server.name!r} ended its event stream",
            server=self.server.name,
            reason="stream_ended",
        )

    async def _read(self, stream: _Stream, timeout_s: float) -> None:
        error: RuntimeToolError = self._ended()
        with stream.scope:
            try:
                await self._read_events(stream, timeout_s)
            except RuntimeToolError as exc:
                error = exc
            except Exception as exc:  # a hostile stream never crashes the broker
                error = self.malformed(f"an event stream that failed ({type(exc).__name__})")
        stream.dead = True
        stream.error = stream.error or error
        for pending in stream.pending.values():
            if pending.error is None and pending.message is None:
                died = _Died()
                died.__cause__ = stream.error
                pending.error = died
                pending.done.set()
        stream.ready.set()

    async def _read_events(self, stream: _Stream, timeout_s: float) -> None:
        payload = {
            "method": "GET",
            "url": self.url,
            "headers": {**self._headers, "Accept": "text/event-stream"},
            "timeout_s": timeout_s,
            "follow_redirects": False,
        }
        async with self._gateway.stream(payload, note=stream.note) as reply:
            content_type = reply.headers.get("content-type", "").split(";")[0].strip().lower()
            if not 200 <= reply.status < 300:
                raise self.status_error(
                    reply.status, b"", " to the event stream's GET", reply.headers
                )
            if content_type != "text/event-stream":
                raise self.malformed(f"an event stream of type {content_type[:100]!r}")
            parser = SseParser(EVENT_BYTES)
            budget = Budget(self.server.name, window_s=SESSION_WINDOW_S)
            try:
                async for chunk in reply.chunks():
                    for event in parser.feed(chunk):
                        await self._on_event(stream, event.event, event.data, budget)
            except EventTooLarge as exc:
                raise self.malformed(f"an event larger than {EVENT_BYTES} bytes") from exc
            except SseSyntaxError as exc:
                raise self.malformed(f"an event stream that is not UTF-8 ({exc})") from exc

    async def _on_event(self, stream: _Stream, kind: str, data: str, budget: Budget) -> None:
        if kind == "endpoint":
            if stream.endpoint is None:
                stream.endpoint = self._endpoint(data)
                stream.ready.set()
            else:
                budget.spend("junk", len(data))  # the first endpoint stands
            return
        if kind != "message" or stream.endpoint is None:
            budget.spend("junk", len(data))
            return
        try:
            message = json.loads(data)
        except (ValueError, RecursionError):
            budget.spend("junk", len(data))
            self.inbound.note("a message that is not JSON")
            return
        what = classify(message)
        if what == "response":
            request_id = message["id"]
            pending = stream.pending.get(request_id) if type(request_id) is int else None
            if pending is not None and pending.message is None and pending.error is None:
                size = len(data) if data.isascii() else len(data.encode("utf-8", "replace"))
                if size > pending.max_bytes:
                    pending.error = OutputTooLarge(
                        f"MCP server {self.server.name!r} answered more than "
                        f"{pending.max_bytes} bytes",
                        limit_bytes=pending.max_bytes,
                    )
                else:
                    pending.message = message
                pending.done.set()
                return
        budget.spend(what, len(data))
        if what == "request":
            answer = self.inbound.request(message)
            if answer is not None:
                try:
                    await self._post(stream, answer)
                except (RuntimeToolError, _NotSent, _Died) as exc:
                    self.inbound.note("answer to its request not delivered: %s", type(exc).__name__)
        elif what == "notification":
            self.inbound.notification(message)

    def _endpoint(self, data: str) -> str:
        """The POST URL an ``endpoint`` event names, if it is on the server's origin."""
        text = data.strip()
        if (
            not text
            or len(text) > _MAX_ENDPOINT
            or any(ord(c) < 0x21 or ord(c) == 0x7F for c in text)
        ):
            raise self.malformed("an endpoint event that is not a URL")
        url = urljoin(self.url, text)
        try:
            origin = parse_target(url).origin
        except RuntimeToolError as exc:
            raise self.malformed(f"an endpoint the gateway refuses ({exc})") from exc
        if origin != parse_target(self.url).origin:
            raise SandboxError(
                f"MCP server {self.server.name!r} named an endpoint on another origin "
                f"({url[:200]!r}); only its own origin is reached",
                server=self.server.name,
                reason="endpoint",
            )
        return url


async def connect_remote(
    server: McpServerEntry,
    network: NetworkRules,
    task_group: anyio.abc.TaskGroup | None,
    **kw: Any,
) -> tuple[RemoteBase, list[types.Tool]]:
    """The client of ``server`` by its ``transport``, connected, and its tools. ``auto``
    tries Streamable HTTP and falls back to this transport when the first initialize POST
    is answered 400, 404 or 405."""
    kind = server.transport or "streamable-http"
    first: RemoteBase = (LegacySseClient if kind == "sse" else RemoteClient)(server, network, **kw)
    try:
        return first, await first.connect(task_group)
    except HttpStatusError as exc:
        await first.aclose()
        if kind != "auto" or exc.details.get("status") not in _FALLBACK_STATUS:
            raise
    except BaseException:
        with anyio.CancelScope(shield=True):
            await first.aclose()
        raise
    legacy = LegacySseClient(server, network, **kw)
    try:
        return legacy, await legacy.connect(task_group)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await legacy.aclose()
        raise
