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
import logging
import socket
import sys
from collections.abc import Callable

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
            read_stream, write_stream, tool_server.initialization_options()
        )


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
