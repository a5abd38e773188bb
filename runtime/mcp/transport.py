"""Transports for :class:`~runtime.mcp.server.McpToolServer`: stdio and streamable HTTP.

stdio hazard: stdout *is* the protocol. The SDK's ``stdio_server`` points fd 1 at stderr while
serving and writes frames to a private duplicate, so a stray ``print`` from a host tool or a
child that inherits fd 1 lands on stderr instead of corrupting a frame. (Do not swap
``sys.stdout`` for ``sys.stderr`` around it: the SDK then serves the wire on stderr.)

HTTP: uvicorn serves the SDK's Starlette app on a socket bound *here*, so port 0 works (the
bound address is reported through ``on_ready`` before the first request can arrive) and no
access log is written to stdout. The endpoint has no authentication of its own: anyone who
can reach it can call every tool the policy allows (shell included). So only loopback is
served unless ``allow_remote`` says otherwise, and Host and Origin checks (DNS-rebinding
protection) keep web pages in a browser out, on loopback and remote addresses alike
(``runtime.mcp._http_guard``, which also answers a bad MCP-Protocol-Version and a body
that is not one JSON-RPC message).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import ipaddress
import json
import logging
import os
import socket
import stat
import sys
from collections.abc import Callable, Iterable
from typing import Any

import anyio
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp.shared.message import SessionMessage

from runtime.errors import ConfigError
from runtime.mcp._connections import (
    ConnectionLimits,
    default_limits,
    guarded_protocol,
    quiet_accept_errors,
)
from runtime.mcp._http_guard import (
    check_allowed_host,
    check_allowed_origin,
    guarded_app,
    served_names,
)
from runtime.mcp._jsonrpc import (
    SCAN_CHARS,
    answer_refused,
    invalid_request,
    is_request_id,
    parse_error,
    request_id_at_start,
)
from runtime.mcp.server import McpToolServer

__all__ = ["bind_socket", "is_loopback", "parse_host_port", "serve_http", "serve_stdio"]

log = logging.getLogger("runtime.mcp")

#: Longest stdio message (one line), bytes: the bound of an HTTP body (4 MiB), one
#: constant for both. A longer line is answered with Invalid Request and skipped unread.
MAX_LINE = DEFAULT_MAX_REQUEST_BODY_SIZE
_SKIP_CHUNK = 65536  # bytes of an over-long line dropped per read


async def serve_stdio(tool_server: McpToolServer) -> None:
    """Serve one MCP client over this process's stdin/stdout until it disconnects.

    The end of stdin is not the end of the connection (a one-shot pipe closes it after its
    last request and waits for the answers). The reader of stdout going away is: no answer
    can reach anyone, so the calls still running are cancelled (and recorded so) and the
    server returns normally, where it ran every call to its end and then died of a broken
    pipe with a traceback."""
    # Flush what Python buffered for fd 1 before the SDK re-points it: those bytes were
    # written before serving and must not land in the middle of the first frame.
    sys.stdout.flush()
    try:
        # The wire's write end, watched for its reader closing (the SDK re-points fd 1).
        watch = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError:
        watch = -1
    try:
        with _claimed_stdin() as wire:
            lines = _StdinLines(wire)
            try:
                async with stdio_server(stdin=lines) as (read_stream, write_stream):  # type: ignore[arg-type]
                    pending = _Pending()
                    answers = _TrackAnswers(write_stream, pending)
                    lines.answer_to(write_stream)
                    try:
                        async with anyio.create_task_group() as tg:
                            if watch >= 0:
                                tg.start_soon(_end_when_unread, watch, tg.cancel_scope)
                            await tool_server.server.run(
                                _AnswerUnreadable(read_stream, answers, pending),
                                answers,
                                tool_server.initialization_options(),
                            )
                            tg.cancel_scope.cancel()  # served: stop watching
                    finally:
                        # While fd 1 still points at stderr: a host tool's buffered print()
                        # was otherwise flushed at interpreter exit, after the SDK restored
                        # fd 1, onto the protocol stream (hidden whenever PYTHONUNBUFFERED
                        # is set).
                        _flush_quietly()
            except* BrokenPipeError:
                # An answer written after the client closed stdout: nobody is there to read.
                log.info("mcp stdio: the client closed its end; the session ends")
    finally:
        if watch >= 0:
            os.close(watch)


async def _end_when_unread(fd: int, scope: anyio.CancelScope) -> None:
    """Cancel ``scope`` once nobody reads the pipe ``fd`` (its write end) any more: the
    reader closing makes it report an error, which the event loop delivers to a reader's
    wait (epoll reports EPOLLERR whatever was asked). Only a pipe is watched: a terminal is
    readable when someone types, a socket when its peer sends."""
    if not stat.S_ISFIFO(os.fstat(fd).st_mode):
        return
    await anyio.wait_readable(fd)
    log.info("mcp stdio: the client no longer reads the output; cancelling its calls")
    scope.cancel()


@contextlib.contextmanager
def _claimed_stdin() -> Any:
    """The wire's stdin as a binary file on a private descriptor (:class:`_StdinLines`
    decodes each line, strictly), with fd 0 pointed at the null device while serving, so a
    tool or child reading fd 0 reads EOF, not the client's frames (the SDK does this itself
    only for a stdin it reads on its own; this module reads it, see :class:`_StdinLines`).
    fd 0 is restored on exit. The private descriptor is never closed: a worker thread may
    still block reading it after the transport ends, and a recycled number would hand it
    another file."""
    try:
        private = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    except OSError as exc:
        raise ConfigError(f"serving MCP over stdio needs a standard input: {exc}") from exc
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        yield os.fdopen(private, "rb", closefd=False)
    finally:
        os.dup2(private, 0)


class _StdinLines:
    """The lines of the wire's stdin, as the SDK's reader iterates them, minus requests
    whose id is neither a string nor an integer (``1.5``, ``null``, ``true``, ``{}``),
    which are answered here with Invalid Request, id null (JSON-RPC 2.0 §5), lines that
    are not UTF-8 and lines past :data:`MAX_LINE` (both answered here, under the id the
    line's first members show, else id null).

    Not UTF-8: the wire was decoded with errors="replace", so a request's invalid bytes
    became U+FFFD and the call ran with arguments the client never sent (written to a file,
    run as a command); HTTP answers such a body with a parse error. It is a parse error
    (-32700) here too, and the line never reaches the SDK.

    Why here: the SDK's notification model ignores members it does not know, so it reads
    such a request as a notification and drops it, and its client waits for ever. Only a
    line that mentions ``"id"`` is decoded a second time. Hazard: the line is the
    client's; it is only parsed, and nothing of it goes back.
    """

    def __init__(self, wire: Any) -> None:
        self._wire = wire  # a binary file: read with a bound in a worker thread
        self._write: Any = None
        self._ready = anyio.Event()

    def answer_to(self, write_stream: Any) -> None:
        self._write = write_stream
        self._ready.set()

    def __aiter__(self) -> Any:
        return self._lines()

    async def _read(self, size: int) -> bytes:
        line: bytes = await anyio.to_thread.run_sync(self._wire.readline, size)
        return line

    async def _answer(self, answer: Any) -> None:
        await self._ready.wait()
        await self._write.send(SessionMessage(answer))

    async def _lines(self) -> Any:
        while raw := await self._read(MAX_LINE + 1):
            if len(raw) > MAX_LINE and not raw.endswith(b"\n"):
                # Hazard: an unbounded readline held a 100 MB line (and its decoded copies,
                # ~300 MB) before anything refused it. The rest is dropped a chunk at a time.
                head = raw[:SCAN_CHARS]  # its id, if its first members show one
                del raw
                while (rest := await self._read(_SKIP_CHUNK)) and not rest.endswith(b"\n"):
                    pass
                await self._answer(_too_long(head))
                continue
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                await self._answer(_not_utf8(raw, exc))
                continue
            del raw
            try:
                answer = _bad_id_answer(line)
            except Exception:  # the line is the client's: it never ends the server
                log.warning("mcp stdio: a line could not be checked; the SDK reads it")
                answer = None
            if answer is None:
                yield line
                continue
            await self._answer(answer)


def _too_long(head: bytes) -> Any:
    """Invalid Request for a line past :data:`MAX_LINE`, under the id its first members
    (``head``, its first KiBs) show: the rest was never read, but a request's id usually
    comes first, and its client's pending call must end."""
    import mcp_types as types

    return types.JSONRPCError(
        jsonrpc="2.0",
        id=request_id_at_start(head),
        error=types.ErrorData(
            code=types.INVALID_REQUEST,
            message=f"message longer than {MAX_LINE} bytes: not read",
        ),
    )


def _not_utf8(raw: bytes, exc: UnicodeDecodeError) -> Any:
    """The parse error for a line that is not UTF-8, under the id the members before its
    first invalid byte show (a cut member is left out)."""
    return parse_error(
        raw[: exc.start], f"the message is not UTF-8 text (invalid byte at offset {exc.start})"
    )


def _flush_quietly() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            if stream is not None:
                stream.flush()


def _bad_id_answer(line: str) -> Any:
    """Invalid Request for a line that is a request whose id MCP does not allow, else
    None (the SDK reads the line as it always did)."""
    if '"id"' not in line:
        return None
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        # RecursionError: nested deeper than the interpreter's stack (a 2 KB line of
        # ``[`` does it); the SDK's parser refuses it too, and answer_refused decides.
        return None
    if not isinstance(value, dict) or "method" not in value or "id" not in value:
        return None
    if is_request_id(value["id"]):
        return None
    return invalid_request(value, unit="line")


class _Pending:
    """What is still owed across the stdio pipe: the client's requests not answered yet,
    and the server's own requests (an elicitation) the client has not answered.

    Why: stdin's end is how a client says it has nothing more to send, and a one-shot pipe
    (``printf '...' | runtime serve --mcp``) closes it right after its last request. The
    SDK treats the end of the read stream as the connection's end and cancels every
    request still running ("Connection closed"), so such a pipe lost the answers it was
    written for. At the end of stdin the read side now reports the end only once every
    request read is answered (each call is bounded by its own timeout). What the server
    asks the client from then on (an approval, a question) can get no answer, so the read
    side answers it itself with an error, which the call reports as it would any failed
    elicitation (approval_required, a tool error).
    """

    def __init__(self) -> None:
        self.requests: set[tuple[type, object]] = set()
        self.asked: dict[tuple[type, object], Any] = {}
        self.at_end = False
        self.wake = anyio.Event()

    @staticmethod
    def key(request_id: object) -> tuple[type, object]:
        return (type(request_id), request_id)  # 1 and "1" are different ids

    def check(self) -> None:
        if self.at_end and (not self.requests or self.asked):
            self.wake.set()

    async def after_end(self) -> Any:
        """The next item the read side hands on once stdin has ended: an error answer to
        a request of the server's, or EndOfStream when nothing is owed any more."""
        import mcp_types as types
        from mcp.shared.message import SessionMessage

        self.at_end = True
        while True:
            if self.asked:
                key = next(iter(self.asked))
                request_id = self.asked.pop(key)
                error = types.JSONRPCError(
                    jsonrpc="2.0",
                    id=request_id,
                    error=types.ErrorData(
                        code=types.CONNECTION_CLOSED,
                        message="the client's input ended before it answered",
                    ),
                )
                return SessionMessage(error)
            if not self.requests:
                raise anyio.EndOfStream
            self.wake = anyio.Event()
            await self.wake.wait()


class _TrackAnswers:
    """The stdio write stream, noting each answer and each request the server sends."""

    def __init__(self, inner: Any, pending: _Pending) -> None:
        self._inner = inner
        self._pending = pending

    async def send(self, item: Any, /) -> None:
        await self._inner.send(item)
        import mcp_types as types

        message = getattr(item, "message", None)
        if isinstance(message, (types.JSONRPCResponse, types.JSONRPCError)):
            self._pending.requests.discard(_Pending.key(message.id))
        elif isinstance(message, types.JSONRPCRequest):
            self._pending.asked[_Pending.key(message.id)] = message.id
        self._pending.check()

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _TrackAnswers:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _AnswerUnreadable:
    """The stdio read stream, minus the requests the SDK could not read, which are answered.

    The SDK's stdio reader hands a line its parser refuses to the server as an Exception,
    which the server drops (a debug log line): a request that Python's json reads but
    pydantic-core does not (a lone UTF-16 surrogate escape, ``"\\ud800"``, valid JSON text
    but not Unicode) got no answer at all, and its client waited for ever. When the refused
    line is a JSON object with a request id and a method, a parse error goes back under
    that id; when it is JSON but not one JSON-RPC message (a batch, ``{"hello": 1}``), an
    Invalid Request error (``runtime.mcp._jsonrpc.answer_refused``). Hazard: the line is
    the client's; it is only parsed, never run.
    """

    def __init__(self, inner: Any, write_stream: Any, pending: _Pending | None = None) -> None:
        self._inner = inner
        self._write = write_stream
        self._pending = pending

    @property
    def last_context(self) -> Any:  # the dispatcher runs handlers in the sender's context
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        while True:
            if self._pending is not None and self._pending.at_end:
                return await self._pending.after_end()
            try:
                item = await self._inner.receive()
            except anyio.EndOfStream:
                if self._pending is None:
                    raise
                return await self._pending.after_end()
            if not isinstance(item, Exception):
                if self._pending is not None:
                    refused = _id_in_use(self._pending, item)
                    if refused is not None:
                        await self._write.send(refused)
                        # The refusal carries the id, which _TrackAnswers takes for the
                        # first request's answer: that one is still owed.
                        self._pending.requests.add(_Pending.key(item.message.id))
                        continue
                    _note_received(self._pending, item)
                return item
            try:
                answer = answer_refused(item)
            except Exception:  # the refused line is the client's: it never ends the server
                log.warning("mcp stdio: a refused line could not be answered; dropped")
                answer = None
            if answer is None:
                return item  # the SDK's own handling (a debug log line)
            await self._write.send(answer)

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _AnswerUnreadable:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _AnswerUnreadable:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _id_in_use(pending: _Pending, item: Any) -> SessionMessage | None:
    """Invalid Request for a request whose id is still being answered, else None.

    Why: the SDK keeps one entry per request id; a second request with the id of one in
    flight replaced it, and the first one's answer was lost (its client got "Connection
    closed" at the end, if anything). JSON-RPC ids must be unique among a client's
    requests in flight; the second is refused and the first runs on."""
    import mcp_types as types

    message = getattr(item, "message", None)
    if not isinstance(message, types.JSONRPCRequest):
        return None
    if _Pending.key(message.id) not in pending.requests:
        return None
    error = types.JSONRPCError(
        jsonrpc="2.0",
        id=message.id,
        error=types.ErrorData(
            code=types.INVALID_REQUEST,
            message="id already in use: a request with this id is still being answered",
        ),
    )
    return SessionMessage(error)


def _note_received(pending: _Pending, item: Any) -> None:
    """Note a request the client sent (it is owed an answer), an answer to one of the
    server's requests, or a cancellation (a cancelled request is never answered)."""
    import mcp_types as types

    message = getattr(item, "message", None)
    if isinstance(message, types.JSONRPCRequest):
        pending.requests.add(_Pending.key(message.id))
    elif isinstance(message, (types.JSONRPCResponse, types.JSONRPCError)):
        pending.asked.pop(_Pending.key(message.id), None)
    elif (
        isinstance(message, types.JSONRPCNotification)
        and message.method == "notifications/cancelled"
        and isinstance(message.params, dict)
    ):
        pending.requests.discard(_Pending.key(message.params.get("requestId")))
    pending.check()


def parse_host_port(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) → (host, port). Port 0 picks a free port."""
    host, sep, port_s = value.rpartition(":")
    if not sep or not host or not port_s.isdigit() or int(port_s) > 65535:
        raise ConfigError(f"--http expects HOST:PORT, got {value!r}", field="http")
    return host.strip("[]"), int(port_s)


def bind_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.set_inheritable(False)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}", field="http") from exc
    return sock


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _graceful_server_class() -> type[Any]:
    import uvicorn

    class GracefulServer(uvicorn.Server):
        """uvicorn's server, minus the signal it raises again after its graceful stop.

        uvicorn stops gracefully on SIGTERM or SIGINT, then puts the default handlers back
        and raises the signal again — which killed the process (exit -15) right after
        ``serve()`` returned, before the broker behind the app closed: the last calls'
        records stayed in the journal instead of the database, and a reader of the log
        did not see them. The stop is the caller's to finish: serve_http returns, the
        broker closes, and ``runtime serve`` exits 0, as it does on stdio."""

        @contextlib.contextmanager
        def capture_signals(self) -> Any:
            with super().capture_signals():
                try:
                    yield
                finally:
                    captured = getattr(self, "_captured_signals", None)
                    if isinstance(captured, list):
                        captured.clear()

    return GracefulServer


def _graceful_server(config: Any) -> Any:
    """A uvicorn server for ``config`` that leaves the stop to the caller (uvicorn is
    imported on first use, so the class is made then)."""
    return _graceful_server_class()(config)


async def serve_http(
    tool_server: McpToolServer,
    host: str,
    port: int,
    *,
    on_ready: Callable[[str], None] | None = None,
    path: str = "/mcp",
    allow_remote: bool = False,
    allowed_hosts: Iterable[str] = (),
    allowed_origins: Iterable[str] = (),
    limits: ConnectionLimits | None = None,
) -> None:
    """Serve streamable HTTP at ``http://host:port/mcp`` until cancelled or signalled.

    ``allowed_hosts`` and ``allowed_origins`` add to the Host and Origin values served
    (``runtime.mcp._http_guard``: the defaults, and the other checks before the SDK's).
    ``limits`` bound the connections and the time a request's head and body may take
    (``runtime.mcp._connections``; default: from the descriptor limit)."""
    import uvicorn

    if not allow_remote and not is_loopback(host):
        raise ConfigError(
            f"--http {host}: the MCP endpoint has no authentication; serve loopback only, "
            "or pass --allow-remote behind your own authenticating proxy",
            field="http",
        )
    sock = bind_socket(host, port)
    with contextlib.closing(sock):
        bound_host, bound_port = sock.getsockname()[:2]
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        url = f"http://{shown}:{bound_port}{path}"
        served = served_names(
            host,
            bound_host,
            bound_port,
            loopback=is_loopback(host),
            allowed_hosts=[check_allowed_host(v) for v in allowed_hosts],
            allowed_origins=[check_allowed_origin(v) for v in allowed_origins],
        )
        app = guarded_app(
            tool_server.server, path=path, served=served, versions=tool_server.session_versions
        )
        config = uvicorn.Config(
            app,
            log_config=None,
            access_log=False,
            # The client address is the socket's: uvicorn's default trusts X-Forwarded-For
            # from 127.0.0.1, so any local client could name itself a new peer per
            # request (a stateless request's queue is its peer's: McpToolServer.queue_key).
            proxy_headers=False,
            lifespan="on",
            timeout_graceful_shutdown=5,
        )
        config.load()
        # Open connections, request heads and bodies bounded (slowloris held a descriptor
        # per connection for ever): uvicorn has none of these bounds for a connection's
        # first request, nor a body deadline at all.
        config.http_protocol_class = guarded_protocol(
            config.http_protocol_class, limits or default_limits(loopback=is_loopback(host))
        )
        server = _graceful_server(config)
        log.info("MCP streamable HTTP on %s", url)
        if on_ready is not None:
            on_ready(url)
        loop = asyncio.get_running_loop()
        previous = quiet_accept_errors(loop)
        try:
            await server.serve(sockets=[sock])
        finally:
            loop.set_exception_handler(previous)
