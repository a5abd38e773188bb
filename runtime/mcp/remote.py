"""The client of an MCP server reached by URL: Streamable HTTP through the egress gateway.

Policy::

    [[mcp_servers]]
    name = "search"
    url = "https://mcp.example.com/mcp"
    headers = { Authorization = "env:SEARCH_MCP_TOKEN" }   # read from the broker's env
    transport = "streamable-http"   # or "sse" (legacy, runtime.mcp.remote_sse), or "auto"

Where it runs and why that is safe: in the broker process (a sandboxed process has no
network). The broker only relays JSON-RPC: it sends ``initialize``, ``tools/list``,
``tools/call`` and a closing ``DELETE``, parses the answers as data (``mcp_types`` models,
size-capped), and never runs, imports or evaluates anything the server sends. Requests the
server sends back are answered at once so that it does not hang: ``ping`` with an empty
result, everything else (sampling, elicitation, roots) refused (``runtime.mcp._peer``).

Reaching it: every request goes through :class:`runtime.egress.EgressGateway` under the
policy's ``[network]`` rules — deny entries, schemes, ports, private addresses only when
named, one resolution whose address is pinned for the connection (no DNS rebinding). No
redirect is followed: the MCP endpoint has none, and following one sent the request and its
headers (secrets) on to wherever the server pointed; a 3xx is an error naming the origin of
its ``Location`` (``HttpStatusError``, ``reason`` ``"redirect"``). The entry names its
own origin (scheme, host, port): :func:`origin_rules` adds exactly that origin to a copy of
the rules used by this server's connection only; the network tools never see it. A host
*name* that resolves to a private address still needs ``[network] allow_private``, as for
any exact allow entry; an IP literal in the URL names that address itself.

Transport: the handshake of 2025-11-25 (``initialize``, then ``notifications/initialized``;
a server that answers with a version outside 2025-03-26, 2025-06-18 and 2025-11-25 is refused),
one POST per JSON-RPC message with ``Accept: application/json, text/event-stream``. The
answer is read as it arrives, JSON or an SSE stream: notifications and server requests
before the answer are handled on the way (a server may ask and wait mid-answer), and the
stream is closed as soon as the answer is in. ``Mcp-Session-Id`` and
``MCP-Protocol-Version`` are sent back as the spec asks. With a task group, a GET stream
listens for messages outside any answer (``tools/list_changed``); a server that offers none
answers 405 and is not asked again.
The wire (one POST, its answer, what comes on the way) is :mod:`runtime.mcp._streamable`;
this module holds the session: the handshake, the retry rules, the GET stream.

Reconnecting (bounded: :data:`ATTEMPTS` sends of one request, backoff from
:data:`BACKOFF_S` doubling, all within the request's own deadline):

* a request the server never received (the connection was refused, the name did not
  resolve: a server restarting) is sent again after the backoff;
* a session the server forgot (404 to our ``Mcp-Session-Id``: the spec's signal, sent
  before the server handles the request) is replaced by a fresh ``initialize`` and the
  request sent again; twice in one request is an error;
* an SSE answer whose stream ends or breaks before the answer, after events with ids, is
  resumed, never sent again: a GET on the endpoint with ``Last-Event-ID`` (the spec's
  resumability; 2025-11-25 servers also close streams on purpose, after a "priming" event
  and a ``retry``, which is waited) picks the stream up where it stopped, as often as each
  resumption brings something new (at most :data:`IDLE_RESUMES` in a row that do not);
* a connection lost after the request left that cannot be resumed (no event ids, a server
  that answers the GET 405 or 404, resumptions that bring nothing) repeats ``initialize``
  and ``tools/list`` once, and never ``tools/call``: the call may have run on the server,
  so its result is a ``SandboxError`` with ``reason = "connection_lost"`` and
  ``replayed = false``.

What happened is counted per call (``mcp_retries``, ``mcp_sessions``, ``mcp_resumes``) into
the call's usage, which the audit record keeps, with the call's ``egress`` log: each POST
and resuming GET made for it (``runtime.mcp._client``, ``log_egress``).

Errors (all typed, none hangs): refused by the rules → ``EgressDenied`` (``policy_denied``);
past the call's ``timeout_s`` → ``ToolTimeout``; unreachable, connection lost mid-answer,
an HTTP error status, an answer that is not JSON-RPC, a flood of messages besides the answer
→ ``SandboxError``; an answer larger than the call's ``output_bytes`` (plus a fixed
allowance for the envelope) → ``OutputTooLarge``; a JSON-RPC error → ``ToolFailed`` with its
code.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio

from runtime.errors import RuntimeToolError, SandboxError
from runtime.mcp._client import (
    ENVELOPE_BYTES,
    LIST_BYTES,
    PROTOCOL_VERSION,
    HttpStatusError,
    Trace,
    origin_rules,
    resolve_headers,
)
from runtime.mcp._peer import SESSION_WINDOW_S, Budget
from runtime.mcp._sse import SseParser
from runtime.mcp._streamable import (
    ATTEMPTS,
    BACKOFF_S,
    IDLE_RESUMES,
    Lost,
    NotSent,
    SessionExpired,
    StreamableWire,
    describe_error,
)

__all__ = [
    "ATTEMPTS",
    "BACKOFF_S",
    "ENVELOPE_BYTES",
    "IDLE_RESUMES",
    "LIST_BYTES",
    "PROTOCOL_VERSION",
    "HttpStatusError",
    "RemoteClient",
    "origin_rules",
    "resolve_headers",
]

log = logging.getLogger("runtime.mcp.remote")

_CLOSE_TIMEOUT_S = 5.0
#: GET streams opened in a row that fail or end before the listener gives up.
_LISTEN_FAILURES = 5
#: Cap of one event on the GET stream, bytes (list_changed and pings are small).
_LISTEN_EVENT_BYTES = 1024 * 1024


class RemoteClient(StreamableWire):
    """One server reached by Streamable HTTP; see the module docstring."""

    transport = "streamable-http"
    #: 2025-11-25: what it adds for a client that declares no capabilities is SSE polling
    #: (priming events, ``retry``, streams the server closes before the answer), which the
    #: wire resumes; servers keep to the version we ask unless they do not speak it.
    offered = "2025-11-25"

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._renewing = anyio.Lock()
        self._listening = False
        self._listener: anyio.CancelScope | None = None
        #: (session, last event id) of the GET stream, and the server's retry (seconds).
        self._listen_from: tuple[str | None, str] | None = None
        self._listen_retry_s: float | None = None

    # -- lifecycle ----------------------------------------------------------------------------
    async def _open(self, *, timeout_s: float, trace: Trace) -> None:
        last: BaseException | None = None
        for attempt in range(ATTEMPTS):
            if attempt:
                await anyio.sleep(min(BACKOFF_S * 2 ** (attempt - 1), 2.0))
            try:
                await self._initialize(timeout_s=timeout_s)
                break
            except (NotSent, Lost) as exc:  # initialize may be sent again
                last = exc.__cause__ or exc
        else:
            assert last is not None
            raise self.unreachable(last, ATTEMPTS) from last
        self._start_listening()

    def _start_listening(self) -> None:
        """The GET stream's task, unless it runs (or there is no task group to run it)."""
        if self._task_group is not None and not self._listening and not self._closed:
            self._listening = True
            self._task_group.start_soon(self._listen)

    async def aclose(self) -> None:
        """End the session (a DELETE, best effort: the server may be gone) and close."""
        session, self._session_id = self._session_id, None
        self._closed = True
        if self._listener is not None:
            self._listener.cancel()
        with anyio.CancelScope(shield=True):
            try:
                if session is not None:
                    with anyio.move_on_after(_CLOSE_TIMEOUT_S):
                        await self._gateway.request(
                            {
                                "method": "DELETE",
                                "url": self.url,
                                "headers": self._request_headers(session),
                                "max_bytes": 4096,
                                "timeout_s": _CLOSE_TIMEOUT_S,
                                "follow_redirects": False,
                            }
                        )
            except RuntimeToolError:
                pass  # a server that is gone has no session to end
            finally:
                await self._gateway.aclose()

    async def _initialize(self, *, timeout_s: float, trace: Trace | None = None) -> None:
        # The old session stays in place until the new one is open: calls in flight keep
        # using it (and renew through the lock if the server forgot it), never none at all.
        # ``trace``: a call's, when its request renews the session (its egress log).
        request_id = next(self._ids)
        answer = await self._exchange(
            self.initialize_message(request_id),
            timeout_s=timeout_s,
            max_bytes=LIST_BYTES,
            trace=trace,
        )
        self.accept_initialize(answer)
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await self._notify(initialized, timeout_s, trace)

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
        with anyio.fail_after(timeout_s):  # raised as TimeoutError; the proxy maps it
            renewed = False
            last: BaseException | None = None
            for attempt in range(ATTEMPTS):
                if attempt:
                    await anyio.sleep(min(BACKOFF_S * 2 ** (attempt - 1), 2.0))
                    trace["mcp_retries"] = trace.get("mcp_retries", 0) + 1
                message = {
                    "jsonrpc": "2.0",
                    "id": next(self._ids),
                    "method": method,
                    "params": params,
                }
                try:
                    return await self._exchange(
                        message, timeout_s=timeout_s, max_bytes=max_bytes, trace=trace
                    )
                except SessionExpired as exc:
                    if renewed:
                        raise SandboxError(
                            f"MCP server {self.server.name!r} forgot the session it had just "
                            "opened",
                            server=self.server.name,
                        ) from exc
                    last = exc
                    try:
                        renewed = await self._renew(exc.session, timeout_s, trace)
                    except (NotSent, Lost) as inner:
                        last = inner.__cause__ or inner  # retried: the request was not sent
                except NotSent as exc:
                    last = exc.__cause__ or exc
                except Lost as exc:
                    if method == "tools/call":
                        raise self.lost(method, exc.__cause__ or exc) from exc.__cause__
                    last = exc.__cause__ or exc
            assert last is not None
            raise self.unreachable(last, ATTEMPTS) from last

    async def _renew(self, stale: str, timeout_s: float, trace: Trace) -> bool:
        """A fresh session in place of ``stale``, the one the server forgot (once for
        concurrent callers: the first renews, the others find the new session)."""
        async with self._renewing:
            if self._session_id == stale:
                await self._initialize(timeout_s=timeout_s, trace=trace)
                trace["mcp_sessions"] = trace.get("mcp_sessions", 0) + 1
                # A listener that gave up while the server was away listens again.
                self._start_listening()
                log.info(
                    "mcp server %r: a new session after the server forgot its own", self.server.name
                )
        return True

    # -- the GET stream -------------------------------------------------------------------
    async def _listen(self) -> None:
        """Messages outside any answer, until :meth:`aclose`. Bounded: a stream that fails or
        ends :data:`_LISTEN_FAILURES` times in a row, or floods, ends the listening (calls
        go on; only unsolicited messages are missed)."""
        try:
            with anyio.CancelScope() as scope:
                self._listener = scope
                if self._closed:
                    return
                await self._listen_loop()
        finally:
            self._listening = False

    async def _listen_loop(self) -> None:
        failures = 0
        while not self._closed and failures < _LISTEN_FAILURES:
            try:
                heard = await self._listen_once()
            except _Stop:
                return
            except (RuntimeToolError, NotSent, Lost, SessionExpired) as exc:
                self.inbound.note("GET stream failed: %s", describe_error(exc))
                heard = False
            except Exception as exc:  # a hostile stream must not take the broker down
                self.inbound.note("GET stream failed: %s", describe_error(exc))
                heard = False
            failures = 0 if heard else failures + 1
            backoff = min(BACKOFF_S * 2**failures, 5.0)
            await anyio.sleep(max(backoff, self._listen_retry_s or 0.0))

    async def _listen_once(self) -> bool:
        """One GET stream, resumed from the last event id it had, if the session is the
        same (a server that closes it on purpose, after a priming event, is polled)."""
        session = self._session_id
        headers = {**self._request_headers(session), "Accept": "text/event-stream"}
        if self._listen_from is not None and self._listen_from[0] == session:
            headers["Last-Event-ID"] = self._listen_from[1]
        payload = {
            "method": "GET",
            "url": self.url,
            "headers": headers,
            "timeout_s": self.server.start_timeout_s,
            "follow_redirects": False,
        }
        heard = False
        async with self._gateway.stream(payload) as reply:
            if reply.status in (404, 405) or not 200 <= reply.status < 300:
                if reply.status == 405:
                    raise _Stop  # the server offers no GET stream (the spec allows it)
                if 300 <= reply.status < 400:  # not followed, and it will not change
                    refused = self.status_error(
                        reply.status, b"", " to the GET stream", reply.headers
                    )
                    self.inbound.note("GET stream not opened: %s", refused.message)
                    raise _Stop
                return False
            parser = SseParser(_LISTEN_EVENT_BYTES)
            budget = Budget(self.server.name, window_s=SESSION_WINDOW_S)
            async for chunk in reply.chunks():
                for event in parser.feed(chunk):
                    heard = True
                    if not event.data:  # a priming event: an id, no message
                        budget.spend("junk", 0)
                        continue
                    message = json.loads(event.data)
                    await self._handle(message, -1, budget, len(event.data))
                if parser.last_event_id:
                    self._listen_from = (session, parser.last_event_id)
                if parser.retry_ms is not None:
                    self._listen_retry_s = parser.retry_ms / 1000
        return heard


class _Stop(Exception):
    """The listener is not wanted (the server has no GET stream)."""
