"""Transports for :class:`~runtime.mcp.server.McpToolServer`: stdio and streamable HTTP.

stdio hazard: stdout *is* the protocol. The SDK's ``stdio_server`` points fd 1 at stderr while
serving and writes frames to a private duplicate, so a stray ``print`` from a host tool or a
child that inherits fd 1 lands on stderr instead of corrupting a frame. (Do not swap
``sys.stdout`` for ``sys.stderr`` around it: the SDK then serves the wire on stderr.)

HTTP: uvicorn serves the SDK's Starlette app on a socket bound *here*, so port 0 works (the
bound address is reported through ``on_ready`` before the first request can arrive) and no
access log is written to stdout. The endpoint has no authentication of its own: anyone who
can reach it can call every tool the policy allows (shell included). So only loopback is
served unless ``allow_remote`` says otherwise, and on loopback the SDK's DNS-rebinding
protection (Host and Origin checks) keeps web pages in the user's browser out.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import socket
import sys
from collections.abc import Callable
from typing import Any

import anyio
from mcp.server.stdio import stdio_server

from runtime.errors import ConfigError
from runtime.mcp.server import McpToolServer

__all__ = ["bind_socket", "is_loopback", "parse_host_port", "serve_http", "serve_stdio"]

log = logging.getLogger("runtime.mcp")


async def serve_stdio(tool_server: McpToolServer) -> None:
    """Serve one MCP client over this process's stdin/stdout until it disconnects."""
    # Flush what Python buffered for fd 1 before the SDK re-points it: those bytes were
    # written before serving and must not land in the middle of the first frame.
    sys.stdout.flush()
    async with stdio_server() as (read_stream, write_stream):
        await tool_server.server.run(
            _AnswerUnreadable(read_stream, write_stream),
            write_stream,
            tool_server.initialization_options(),
        )


class _AnswerUnreadable:
    """The stdio read stream, minus the requests the SDK could not read, which are answered.

    The SDK's stdio reader hands a line its parser refuses to the server as an Exception,
    which the server drops (a debug log line): a request that Python's json reads but
    pydantic-core does not (a lone UTF-16 surrogate escape, ``"\\ud800"``, valid JSON text
    but not Unicode) got no answer at all, and its client waited for ever. When the refused
    line is a JSON object with a request id and a method, a parse error goes back under
    that id. Hazard: the line is the client's; it is only parsed, never run.
    """

    def __init__(self, inner: Any, write_stream: Any) -> None:
        self._inner = inner
        self._write = write_stream

    @property
    def last_context(self) -> Any:  # the dispatcher runs handlers in the sender's context
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            answer = _parse_error_for(item)
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


def _parse_error_for(exc: Exception) -> Any:
    """A SessionMessage with a JSON-RPC parse error for the request behind ``exc`` (a
    pydantic ValidationError of the SDK's reader, whose errors carry the line as their
    input), or None when there is no request id to answer."""
    import mcp_types as types
    from mcp.shared.message import SessionMessage
    from pydantic import ValidationError

    if not isinstance(exc, ValidationError) or not exc.errors():
        return None
    first = exc.errors()[0]
    line = first.get("input")
    if not isinstance(line, str):
        return None
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or "method" not in message:
        return None  # a notification or a response: nothing to answer
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, (int, str)):
        return None
    if isinstance(request_id, str) and not _is_text(request_id):
        return None  # the answer could not carry it either
    error = types.JSONRPCError(
        jsonrpc="2.0",
        id=request_id,
        error=types.ErrorData(
            code=types.PARSE_ERROR,
            message=f"request {request_id!r} could not be read: {first.get('msg', exc)}",
        ),
    )
    return SessionMessage(error)


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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


async def serve_http(
    tool_server: McpToolServer,
    host: str,
    port: int,
    *,
    on_ready: Callable[[str], None] | None = None,
    path: str = "/mcp",
    allow_remote: bool = False,
) -> None:
    """Serve streamable HTTP at ``http://host:port/mcp`` until cancelled or signalled."""
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
        app = tool_server.server.streamable_http_app(streamable_http_path=path, host=host)
        config = uvicorn.Config(
            app,
            log_config=None,
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=5,
        )
        server = uvicorn.Server(config)
        log.info("MCP streamable HTTP on %s", url)
        if on_ready is not None:
            on_ready(url)
        await server.serve(sockets=[sock])
