"""The wire of the Streamable HTTP client (:mod:`runtime.mcp.remote`): one JSON-RPC
message out by POST, its answer in, and what the server sends on the way.

The answer is read as it arrives, JSON or an SSE stream: notifications and server requests
before the answer are handled on the way (a server may ask and wait mid-answer), and the
stream is closed as soon as the answer is in. Every byte is the server's: a message is
parsed as data, bounded (the request's byte cap plus :data:`~runtime.mcp._client.ENVELOPE_BYTES`,
a :class:`~runtime.mcp._peer.Budget` for everything besides the answer), never run.

What went wrong is said with three exceptions that the session layer's retry rules read:
:class:`NotSent` (provably never reached the server: it may be sent again),
:class:`Lost` (may have reached it: only a request that is safe to repeat is sent again),
:class:`SessionExpired` (404 to our session id: renew the session, send again).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
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
from runtime.mcp._client import HttpStatusError, RemoteBase, Trace, delivered, visible_ascii
from runtime.mcp._peer import MAX_CHATTER_BYTES, Budget, classify, same_id
from runtime.mcp._sse import EventTooLarge, SseEvent, SseParser, SseSyntaxError

__all__ = [
    "ATTEMPTS",
    "BACKOFF_S",
    "IDLE_RESUMES",
    "Lost",
    "NotSent",
    "SessionExpired",
    "StreamableWire",
    "describe_error",
]

_ACCEPT = "application/json, text/event-stream"
#: Sends of one request at most (the first included).
ATTEMPTS = 4
#: First delay before a request is sent again, seconds; doubled per attempt, at most 2 s.
BACKOFF_S = 0.1
#: Resumptions in a row that bring nothing new (no event, no event id) before the answer
#: is given up as lost.
IDLE_RESUMES = 4
#: Bound of one answer to a server's request (a ping), seconds.
_REPLY_TIMEOUT_S = 10.0


class SessionExpired(Exception):
    """The server answered 404 to a request carrying ``session``, our session id."""

    def __init__(self, session: str) -> None:
        super().__init__(session)
        self.session = session


class NotSent(Exception):
    """The request never reached the server (its cause says why)."""


class Lost(Exception):
    """The request may have reached the server; its answer did not arrive."""


@dataclass(slots=True)
class _Answer:
    """The SSE answer to one request, over its POST stream and the GETs that resume it:
    one budget and one byte allowance for all of them."""

    request_id: int
    max_bytes: int
    budget: Budget
    #: Bytes its streams carried.
    total: int = 0
    last_event_id: str | None = None
    #: The server's ``retry``, seconds.
    retry_s: float | None = None
    #: New event ids seen: a resumption that moved it brought something new (one that
    #: only repeats what was sent before does not, however much it repeats).
    progress: int = 0
    #: Why the last stream ended without the answer.
    ended: BaseException | None = None


class StreamableWire(RemoteBase):
    """One message out, its answer in; the session id the server gave us."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._session_id: str | None = None

    async def _exchange(
        self,
        message: dict[str, Any],
        *,
        timeout_s: float,
        max_bytes: int,
        trace: Trace | None = None,
    ) -> dict[str, Any]:
        """One POST and its answer, read as it arrives; an SSE answer whose stream ends or
        breaks first is resumed (:meth:`_resume`)."""
        request_id = message["id"]
        opening = message["method"] == "initialize"
        # The session this request carries: a 404 names it, so that a renewal by another
        # call meanwhile is not taken for a second forgotten session.
        sent = None if opening else self._session_id
        payload = {
            "method": "POST",
            "url": self.url,
            "headers": {**self._request_headers(sent), "Content-Type": "application/json"},
            "body": json.dumps(message, separators=(",", ":")).encode(),
            "timeout_s": timeout_s,
            "follow_redirects": False,
        }
        answer: _Answer | None = None
        async with self._stream(payload, trace) as reply:
            await self._check_status(reply, sent)
            if opening:
                session = reply.headers.get("mcp-session-id")
                if session is not None and not visible_ascii(session):
                    raise self.malformed("a session id that is not visible ASCII")
                self._session_id = sent = session
            content_type = _content_type(reply)
            try:
                if content_type == "application/json":
                    return await self._json_answer(reply, request_id, max_bytes)
                if content_type == "text/event-stream":
                    answer = _Answer(request_id, max_bytes, Budget(self.server.name))
                    found = await self._read_sse(reply, answer)
                    if found is not None:
                        return found
            except (ToolFailed, SandboxError) as exc:
                if isinstance(exc, ToolFailed) and _is_transport(exc):
                    raise Lost from exc
                raise
            if answer is None:
                raise self.malformed(f"an answer of type {content_type[:100]!r}")
        # The stream ended or broke before the answer (its connection is closed now).
        return await self._resume(answer, sent, timeout_s, trace if trace is not None else {})

    @asynccontextmanager
    async def _stream(
        self, payload: dict[str, Any], trace: Trace | None = None
    ) -> AsyncIterator[StreamedReply]:
        """The gateway's streamed reply to ``payload``; a failure to send it is
        :class:`NotSent` or :class:`Lost` (refusals and timeouts pass as they are). The
        request goes in ``trace``'s egress log once its status is in, or it failed."""
        note: dict[str, Any] = {}
        error: RuntimeToolError | None = None
        reply: StreamedReply | None = None
        try:
            stream = self._gateway.stream(payload, note=note)
            reply = await stream.__aenter__()
        except RuntimeToolError as exc:
            error = exc
            if isinstance(exc, ToolFailed | InvalidArguments):
                if delivered(exc):
                    raise Lost from exc
                raise NotSent from exc
            raise
        finally:
            headers = reply.headers if reply is not None else None
            self.log_egress(
                trace, payload["method"], payload["url"], note=note, error=error, headers=headers
            )
        try:
            yield reply
        finally:
            await stream.__aexit__(None, None, None)

    async def _check_status(self, reply: StreamedReply, sent: str | None) -> None:
        status = reply.status
        if status == 404 and sent is not None:
            raise SessionExpired(sent)
        if not 200 <= status < 300:
            body = bytearray()
            with anyio.move_on_after(2):
                async for chunk in reply.chunks(200):
                    body += chunk
                    if len(body) >= 200:
                        break
            raise self.status_error(status, body, headers=reply.headers)

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

    async def _read_sse(self, reply: StreamedReply, answer: _Answer) -> dict[str, Any] | None:
        """The answer if this stream carries it; None when the stream ends or breaks
        first (``answer.ended`` says how; a broken stream's unfinished event is dropped)."""
        parser = SseParser(answer.max_bytes)
        try:
            try:
                async for chunk in reply.chunks():
                    answer.total += len(chunk)
                    if answer.total > answer.max_bytes + MAX_CHATTER_BYTES:
                        # Comments and empty lines reach no budget: the streams are capped.
                        answer.budget.spend("junk", MAX_CHATTER_BYTES + 1)  # raises: a flood
                    found = await self._events(parser.feed(chunk), parser, answer)
                    if found is not None:
                        return found
            except ToolFailed as exc:
                if not _is_transport(exc):
                    raise
                answer.ended = exc
                return None
            last = parser.close()
            found = await self._events([last] if last else [], parser, answer)
            if found is not None:
                return found
        except EventTooLarge as exc:
            raise self._too_large(answer.max_bytes) from exc
        except SseSyntaxError as exc:
            raise self.malformed(f"an answer that is not JSON ({exc})") from exc
        answer.ended = self.malformed(f"no answer to request {answer.request_id}")
        return None

    async def _events(
        self, events: list[SseEvent], parser: SseParser, answer: _Answer
    ) -> dict[str, Any] | None:
        for event in events:
            if not event.data:  # a "priming" event: an id to resume from, no message
                answer.budget.spend("junk", 0)
                continue
            found = await self._event(event.data, answer.request_id, answer.budget)
            if found is not None:
                return found
        if parser.last_event_id is not None and parser.last_event_id != answer.last_event_id:
            answer.last_event_id = parser.last_event_id
            answer.progress += 1
        if parser.retry_ms is not None:
            answer.retry_s = parser.retry_ms / 1000
        return None

    async def _resume(
        self, answer: _Answer, session: str | None, timeout_s: float, trace: Trace
    ) -> dict[str, Any]:
        """Resume an answer's stream: a GET with ``Last-Event-ID`` (the spec's resumption),
        after the server's ``retry`` (or a backoff), until the answer arrives, the server
        refuses, or :data:`IDLE_RESUMES` resumptions in a row bring nothing new. Nothing
        is sent again: a tools/call that may have run is never replayed. Without an event
        id there is nothing to resume from, and the answer is :class:`Lost`."""
        idle = 0
        while answer.last_event_id and idle < IDLE_RESUMES:
            backoff = min(BACKOFF_S * 2**idle, 2.0)
            await anyio.sleep(max(answer.retry_s or 0.0, backoff))
            trace["mcp_resumes"] = trace.get("mcp_resumes", 0) + 1
            before = answer.progress
            headers = {
                **self._request_headers(session),
                "Accept": "text/event-stream",
                "Last-Event-ID": answer.last_event_id,
            }
            payload = {"method": "GET", "url": self.url, "headers": headers}
            refusal: SandboxError | None = None
            found: dict[str, Any] | None = None
            try:
                async with self._stream(
                    {**payload, "timeout_s": timeout_s, "follow_redirects": False}, trace
                ) as reply:
                    refusal = self._refusal(reply)
                    if refusal is None:
                        found = await self._read_sse(reply, answer)
            except (NotSent, Lost) as exc:  # the connection failed: tried again
                answer.ended = exc.__cause__ or exc
            if refusal is not None:
                raise Lost from refusal
            if found is not None:
                return found
            idle = 0 if answer.progress > before else idle + 1
        raise Lost from answer.ended

    def _refusal(self, reply: StreamedReply) -> SandboxError | None:
        """Why a resumed stream will not carry the answer, or None. 405: the server does
        not resume; 404: the session, and its streams, are gone."""
        if not 200 <= reply.status < 300:
            return self.status_error(reply.status, b"", " to a resumption", reply.headers)
        if _content_type(reply) != "text/event-stream":
            return self.malformed("a resumed stream that is not SSE")
        return None

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
                except (RuntimeToolError, NotSent, Lost) as exc:
                    # The server's problem: the awaited answer may still come.
                    text = describe_error(exc)
                    self.inbound.note("answer to its request not delivered: %s", text)
        elif kind == "notification":
            self.inbound.notification(message)
        return None

    async def _notify(
        self, message: dict[str, Any], timeout_s: float, trace: Trace | None = None
    ) -> None:
        """POST a notification or a response: the server answers 202 and no body."""
        reply = await self.post_message(
            self.url,
            self._request_headers(self._session_id),
            message,
            timeout_s=timeout_s,
            follow_redirects=False,
            lost=Lost,
            not_sent=NotSent,
            trace=trace,
        )
        if not 200 <= reply["status"] < 300:
            raise self.status_error(reply["status"], reply["body"], headers=reply["headers"])

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


def _content_type(reply: StreamedReply) -> str:
    return reply.headers.get("content-type", "").split(";")[0].strip().lower()


def _is_transport(exc: ToolFailed) -> bool:
    """A gateway error raised while reading a body (the connection dropped)."""
    return exc.__cause__ is not None and not isinstance(exc, HttpStatusError)


def describe_error(exc: BaseException) -> str:
    return str(getattr(exc, "message", "") or exc or type(exc).__name__)[:300]
