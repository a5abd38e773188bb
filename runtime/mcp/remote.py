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
named, one resolution whose address is pinned for the connection (no DNS rebinding), every
redirect checked again and credentials dropped on a change of origin. The entry names its
own origin (scheme, host, port): :func:`origin_rules` adds exactly that origin to a copy of
the rules used by this server's connection only; the network tools never see it. A host
*name* that resolves to a private address still needs ``[network] allow_private``, as for
any exact allow entry; an IP literal in the URL names that address itself.

Transport: the 2025-06-18 handshake (``initialize``, then ``notifications/initialized``; a
server that answers with a version outside 2025-03-26, 2025-06-18 and 2025-11-25 is refused),
one POST per JSON-RPC message with ``Accept: application/json, text/event-stream``. The
answer is read as it arrives, JSON or an SSE stream: notifications and server requests
before the answer are handled on the way (a server may ask and wait mid-answer), and the
stream is closed as soon as the answer is in. ``Mcp-Session-Id`` and
``MCP-Protocol-Version`` are sent back as the spec asks. With a task group, a GET stream
listens for messages outside any answer (``tools/list_changed``); a server that offers none
answers 405 and is not asked again.

Reconnecting (bounded: :data:`ATTEMPTS` sends of one request, backoff from
:data:`BACKOFF_S` doubling, all within the request's own deadline):

* a request the server never received (the connection was refused, the name did not
  resolve: a server restarting) is sent again after the backoff;
* a session the server forgot (404 to our ``Mcp-Session-Id``: the spec's signal, sent
  before the server handles the request) is replaced by a fresh ``initialize`` and the
  request sent again; twice in one request is an error;
* a connection lost after the request left (reset mid-answer, a stream that ends without
  the answer) repeats ``initialize`` and ``tools/list`` once, and never ``tools/call``: the
  call may have run on the server, so its result is a ``SandboxError`` with
  ``reason = "connection_lost"`` and ``replayed = false``.

What happened is counted per call (``mcp_retries``, ``mcp_sessions``) into the call's usage,
which the audit record keeps.

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
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

from runtime.egress import StreamedReply
from runtime.errors import (
    InvalidArguments,
    OutputTooLarge,
    RuntimeToolError,
    SandboxError,
    ToolFailed,
)
from runtime.mcp._client import (
    ENVELOPE_BYTES,
    LIST_BYTES,
    PROTOCOL_VERSION,
    HttpStatusError,
    RemoteBase,
    Trace,
    delivered,
    origin_rules,
    resolve_headers,
    visible_ascii,
)
from runtime.mcp._peer import MAX_CHATTER_BYTES, SESSION_WINDOW_S, Budget, classify, same_id
from runtime.mcp._sse import EventTooLarge, SseParser, SseSyntaxError

__all__ = [
    "ATTEMPTS",
    "BACKOFF_S",
    "ENVELOPE_BYTES",
    "LIST_BYTES",
    "PROTOCOL_VERSION",
    "HttpStatusError",
    "RemoteClient",
    "origin_rules",
    "resolve_headers",
]

log = logging.getLogger("runtime.mcp.remote")

_ACCEPT = "application/json, text/event-stream"
#: Sends of one request at most (the first included).
ATTEMPTS = 4
#: First delay before a request is sent again, seconds; doubled per attempt, at most 2 s.
BACKOFF_S = 0.1
_CLOSE_TIMEOUT_S = 5.0
#: Bound of one answer to a server's request (a ping), seconds.
_REPLY_TIMEOUT_S = 10.0
#: GET streams opened in a row that fail or end before the listener gives up.
_LISTEN_FAILURES = 5
#: Cap of one event on the GET stream, bytes (list_changed and pings are small).
_LISTEN_EVENT_BYTES = 1024 * 1024


class _SessionExpired(Exception):
    """The server answered 404 to a request carrying ``session``, our session id."""

    def __init__(self, session: str) -> None:
        super().__init__(session)
        self.session = session


class _NotSent(Exception):
    """The request never reached the server (its cause says why)."""


class _Lost(Exception):
    """The request may have reached the server; its answer did not arrive."""


class RemoteClient(RemoteBase):
    """One server reached by Streamable HTTP; see the module docstring."""

    transport = "streamable-http"

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._session_id: str | None = None
        self._renewing = anyio.Lock()
        self._listening = False
        self._listener: anyio.CancelScope | None = None

    # -- lifecycle ----------------------------------------------------------------------------
    async def _open(self, *, timeout_s: float, trace: Trace) -> None:
        last: BaseException | None = None
        for attempt in range(ATTEMPTS):
            if attempt:
                await anyio.sleep(min(BACKOFF_S * 2 ** (attempt - 1), 2.0))
            try:
                await self._initialize(timeout_s=timeout_s)
                break
            except (_NotSent, _Lost) as exc:  # initialize may be sent again
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

    async def _initialize(self, *, timeout_s: float) -> None:
        # The old session stays in place until the new one is open: calls in flight keep
        # using it (and renew through the lock if the server forgot it), never none at all.
        request_id = next(self._ids)
        answer = await self._exchange(
            self.initialize_message(request_id), timeout_s=timeout_s, max_bytes=LIST_BYTES
        )
        self.accept_initialize(answer)
        await self._notify({"jsonrpc": "2.0", "method": "notifications/initialized"}, timeout_s)

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
                    return await self._exchange(message, timeout_s=timeout_s, max_bytes=max_bytes)
                except _SessionExpired as exc:
                    if renewed:
                        raise SandboxError(
                            f"MCP server {self.server.name!r} forgot the session it had just "
                            "opened",
                            server=self.server.name,
                        ) from exc
                    last = exc
                    try:
                        renewed = await self._renew(exc.session, timeout_s, trace)
                    except (_NotSent, _Lost) as inner:
                        last = inner.__cause__ or inner  # retried: the request was not sent
                except _NotSent as exc:
                    last = exc.__cause__ or exc
                except _Lost as exc:
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
                await self._initialize(timeout_s=timeout_s)
                trace["mcp_sessions"] = trace.get("mcp_sessions", 0) + 1
                # A listener that gave up while the server was away listens again.
                self._start_listening()
                log.info(
                    "mcp server %r: a new session after the server forgot its own", self.server.name
                )
        return True

    async def _exchange(
        self, message: dict[str, Any], *, timeout_s: float, max_bytes: int
    ) -> dict[str, Any]:
        """One POST and its answer, read as it arrives."""
        request_id = message["id"]
        opening = message["method"] == "initialize"
        # The session this request carries: a 404 names it, so that a renewal by another
        # call meanwhile is not taken for a second forgotten session.
        sent = None if opening else self._session_id
        async with self._post(message, sent, timeout_s=timeout_s) as reply:
            await self._check_status(reply, sent)
            if opening:
                session = reply.headers.get("mcp-session-id")
                if session is not None and not visible_ascii(session):
                    raise self.malformed("a session id that is not visible ASCII")
                self._session_id = session
            content_type = reply.headers.get("content-type", "").split(";")[0].strip().lower()
            try:
                if content_type == "application/json":
                    return await self._json_answer(reply, request_id, max_bytes)
                if content_type == "text/event-stream":
                    return await self._sse_answer(reply, request_id, max_bytes)
            except (ToolFailed, SandboxError) as exc:
                if isinstance(exc, ToolFailed) and _is_transport(exc):
                    raise _Lost from exc
                raise
            raise self.malformed(f"an answer of type {content_type[:100]!r}")

    @asynccontextmanager
    async def _post(
        self, message: dict[str, Any], session: str | None, *, timeout_s: float
    ) -> AsyncIterator[StreamedReply]:
        payload = {
            "method": "POST",
            "url": self.url,
            "headers": {
                **self._request_headers(session),
                "Content-Type": "application/json",
            },
            "body": json.dumps(message, separators=(",", ":")).encode(),
            "timeout_s": timeout_s,
            "follow_redirects": True,
        }
        try:
            stream = self._gateway.stream(payload)
            reply = await stream.__aenter__()
        except (ToolFailed, InvalidArguments) as exc:
            # Refusals (EgressDenied) and timeouts pass through as they are.
            if delivered(exc):
                raise _Lost from exc
            raise _NotSent from exc
        try:
            yield reply
        finally:
            await stream.__aexit__(None, None, None)

    async def _check_status(self, reply: StreamedReply, sent: str | None) -> None:
        status = reply.status
        if status == 404 and sent is not None:
            raise _SessionExpired(sent)
        if not 200 <= status < 300:
            body = bytearray()
            with anyio.move_on_after(2):
                async for chunk in reply.chunks(200):
                    body += chunk
                    if len(body) >= 200:
                        break
            raise self.status_error(status, body)

    async def _json_answer(
        self, reply: StreamedReply, request_id: int, max_bytes: int
    ) -> dict[str, Any]:
        body = bytearray()
        async for chunk in reply.chunks(max_bytes + 1 - len(body)):
            body += chunk
            if len(body) > max_bytes:
                raise self._too_large(max_bytes)
        try:
            decoded = json.loads(body)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, bad UTF-8
            raise self.malformed(f"an answer that is not JSON ({exc})") from exc
        messages = decoded if isinstance(decoded, list) else [decoded]
        budget = Budget(self.server.name)
        for item in messages:
            found = await self._handle(item, request_id, budget, 0)
            if found is not None:
                return found
        raise self.malformed(f"no answer to request {request_id}")

    async def _sse_answer(
        self, reply: StreamedReply, request_id: int, max_bytes: int
    ) -> dict[str, Any]:
        parser = SseParser(max_bytes)
        budget = Budget(self.server.name)
        # Comments and empty lines reach no budget: the whole stream is capped too.
        allowance = max_bytes + MAX_CHATTER_BYTES
        total = 0
        try:
            async for chunk in reply.chunks():
                total += len(chunk)
                if total > allowance:
                    budget.spend("junk", MAX_CHATTER_BYTES + 1)  # raises: a flood
                for event in parser.feed(chunk):
                    found = await self._event(event.data, request_id, budget)
                    if found is not None:
                        return found
            last = parser.close()
            if last is not None:
                found = await self._event(last.data, request_id, budget)
                if found is not None:
                    return found
        except EventTooLarge as exc:
            raise self._too_large(max_bytes) from exc
        except SseSyntaxError as exc:
            raise self.malformed(f"an answer that is not JSON ({exc})") from exc
        # The stream ended without the answer: the server may have handled the request.
        raise _Lost from self.malformed(f"no answer to request {request_id}")

    async def _event(self, data: str, request_id: int, budget: Budget) -> dict[str, Any] | None:
        try:
            message = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise self.malformed(f"an answer that is not JSON ({exc})") from exc
        return await self._handle(message, request_id, budget, len(data))

    async def _handle(
        self, message: Any, request_id: int, budget: Budget, size: int
    ) -> dict[str, Any] | None:
        """The result if ``message`` answers ``request_id``; anything else handled."""
        kind = classify(message)
        if kind == "response" and same_id(message["id"], request_id):
            return self.result_of(message)
        budget.spend(kind, size)
        if kind == "request":
            answer = self.inbound.request(message)
            if answer is not None:
                try:
                    await self._notify(answer, _REPLY_TIMEOUT_S)
                except (RuntimeToolError, _NotSent, _Lost) as exc:
                    # The server's problem: the awaited answer may still come.
                    self.inbound.note("answer to its request not delivered: %s", _text(exc))
        elif kind == "notification":
            self.inbound.notification(message)
        return None

    async def _notify(self, message: dict[str, Any], timeout_s: float) -> None:
        """POST a notification or a response: the server answers 202 and no body."""
        reply = await self.post_message(
            self.url,
            self._request_headers(self._session_id),
            message,
            timeout_s=timeout_s,
            follow_redirects=True,
            lost=_Lost,
            not_sent=_NotSent,
        )
        if not 200 <= reply["status"] < 300:
            raise self.status_error(reply["status"], reply["body"])

    def _request_headers(self, session: str | None) -> dict[str, str]:
        headers = {**self._headers, "Accept": _ACCEPT, "MCP-Protocol-Version": self._protocol}
        if session is not None:
            headers["Mcp-Session-Id"] = session
        return headers

    def _too_large(self, max_bytes: int) -> OutputTooLarge:
        return OutputTooLarge(
            f"MCP server {self.server.name!r} answered more than {max_bytes} bytes",
            limit_bytes=max_bytes,
        )

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
            except (RuntimeToolError, _NotSent, _Lost, _SessionExpired) as exc:
                self.inbound.note("GET stream failed: %s", _text(exc))
                heard = False
            except Exception as exc:  # a hostile stream must not take the broker down
                self.inbound.note("GET stream failed: %s", _text(exc))
                heard = False
            failures = 0 if heard else failures + 1
            await anyio.sleep(min(BACKOFF_S * 2**failures, 5.0))

    async def _listen_once(self) -> bool:
        payload = {
            "method": "GET",
            "url": self.url,
            "headers": {**self._request_headers(self._session_id), "Accept": "text/event-stream"},
            "timeout_s": self.server.start_timeout_s,
            "follow_redirects": True,
        }
        heard = False
        async with self._gateway.stream(payload) as reply:
            if reply.status in (404, 405) or not 200 <= reply.status < 300:
                if reply.status == 405:
                    raise _Stop  # the server offers no GET stream (the spec allows it)
                return False
            parser = SseParser(_LISTEN_EVENT_BYTES)
            budget = Budget(self.server.name, window_s=SESSION_WINDOW_S)
            async for chunk in reply.chunks():
                for event in parser.feed(chunk):
                    message = json.loads(event.data)
                    await self._handle(message, -1, budget, len(event.data))
                    heard = True
        return heard


class _Stop(Exception):
    """The listener is not wanted (the server has no GET stream)."""


def _is_transport(exc: ToolFailed) -> bool:
    """A gateway error raised while reading a body (the connection dropped)."""
    return exc.__cause__ is not None and not isinstance(exc, HttpStatusError)


def _text(exc: BaseException) -> str:
    return str(getattr(exc, "message", "") or exc or type(exc).__name__)[:300]
