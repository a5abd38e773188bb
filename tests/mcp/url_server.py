"""An MCP server reached by URL (Streamable HTTP, official SDK + uvicorn) for the tests of
``[[mcp_servers]] url``. Run as a process: ``python url_server.py``; it prints ``listening
on http://127.0.0.1:PORT`` on stderr once it accepts connections.

``--sse``: the legacy HTTP+SSE transport (GET ``/sse``, POSTs to the endpoint it names)
instead. ``--grow``: a tool ``grow`` that adds a tool ``extra`` and notifies
tools/list_changed. ``--resumable``: an event store (the spec's resumability) and the tools
``poll``, which closes its answer's stream mid-call so that the client must resume it,
``runs``, how often ``poll`` ran, and ``away``, which closes the GET stream and notifies
tools/list_changed while the client is away. ``--port PORT``: listen there (a restart on
the same port). ``--token TOKEN``: every request must carry ``Authorization: Bearer
TOKEN`` (401 otherwise), so a test sees that the broker sent the header. Routes besides
``/mcp``: ``/garbage`` answers every POST with a body that is not JSON; ``/moved`` redirects (307)
to the same server under the name ``localhost``, another origin.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from typing import Any

import uvicorn
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http import EventMessage, EventStore
from mcp_types import JSONRPCMessage
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

server = MCPServer("url")


@server.tool()
def add(a: int, b: int) -> dict[str, int]:
    """Add two integers."""
    return {"sum": a + b}


@server.tool()
def fail() -> str:
    """Always fails with an error result."""
    raise ToolError("fail from the url server")


@server.tool()
async def slow(seconds: float) -> str:
    """Answers after ``seconds``."""
    await asyncio.sleep(seconds)
    return "late"


@server.tool()
def big(n: int) -> str:
    """A text of ``n`` bytes."""
    return "x" * n


@server.tool()
def die() -> str:
    """Ends the server process in the middle of the call."""
    os._exit(3)


async def grow(ctx: Context) -> str:
    """Adds the tool ``extra`` and tells the client its tools changed (a notification
    outside any answer: the SDK sends it on the session's GET stream)."""
    if "extra" not in [t.name for t in await server.list_tools()]:
        server.add_tool(_extra, name="extra", description="Added by grow.")
    await ctx.session.send_tool_list_changed()
    return "grown"


def _extra(word: str) -> str:
    return word.upper()


class _Events(EventStore):
    """Every event of every stream, in memory, ids in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, JSONRPCMessage | None]] = []

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        event_id = f"e{len(self.events)}"
        self.events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id: str, send_callback: Any) -> str | None:
        ids = [e[0] for e in self.events]
        if last_event_id not in ids:
            return None
        stream = self.events[ids.index(last_event_id)][1]
        for event_id, stream_id, message in self.events[ids.index(last_event_id) + 1 :]:
            if stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream


_runs = 0


async def poll(ctx: Context) -> str:
    """Closes its answer's stream (the events are kept), then answers."""
    global _runs
    _runs += 1
    await ctx.info("working")  # an event with an id: where the client resumes from
    await ctx.close_sse_stream()
    await asyncio.sleep(0.3)
    return "polled"


async def away(ctx: Context) -> str:
    """A message on the GET stream (an event id to resume from), the GET stream closed,
    then ``extra`` added and tools/list_changed sent while the client is away: only a
    client that resumes its GET stream hears of it."""
    await ctx.session.send_log_message("info", "before the break")
    await asyncio.sleep(0.3)  # the event reaches the client before its stream closes
    await ctx.close_standalone_sse_stream()
    await asyncio.sleep(0.05)
    if "extra" not in [t.name for t in await server.list_tools()]:
        server.add_tool(_extra, name="extra", description="Added while the client was away.")
    await ctx.session.send_tool_list_changed()
    return "away"


def runs() -> int:
    """How often poll ran."""
    return _runs


async def garbage(request: Request) -> Response:
    return Response(b"{not json", media_type="application/json")


async def moved(request: Request) -> Response:
    port = request.url.port
    return RedirectResponse(f"http://localhost:{port}/mcp", status_code=307)


def _guarded(app: Any, token: str) -> Any:
    expected = f"Bearer {token}".encode()

    async def guard(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await Response(b"unauthorized", status_code=401)(scope, receive, send)
            return
        await app(scope, receive, send)

    return guard


def main() -> None:
    legacy = "--sse" in sys.argv
    if "--grow" in sys.argv:
        server.add_tool(grow)
    events = None
    if "--resumable" in sys.argv:
        events = _Events()
        server.add_tool(poll)
        server.add_tool(runs)
        server.add_tool(away)
    app = server.sse_app() if legacy else server.streamable_http_app(event_store=events)
    app.router.routes.append(Route("/garbage", garbage, methods=["POST", "DELETE"]))
    app.router.routes.append(Route("/moved", moved, methods=["POST", "DELETE"]))
    token = sys.argv[sys.argv.index("--token") + 1] if "--token" in sys.argv else None
    port = int(sys.argv[sys.argv.index("--port") + 1]) if "--port" in sys.argv else 0
    asgi = _guarded(app, token) if token else app
    sock = socket.socket()
    # A restart on the port of the server it replaces (--port) must not wait for TIME_WAIT.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    # Listening before uvicorn runs: a client that connects at once waits in the backlog
    # until the server (and its session manager) is up, so the line below is never early.
    sock.listen(128)
    port = sock.getsockname()[1]
    path = "/sse" if legacy else "/mcp"
    print(f"listening on http://127.0.0.1:{port}{path}", file=sys.stderr, flush=True)
    server_ = uvicorn.Server(uvicorn.Config(asgi, log_level="warning", lifespan="on"))
    asyncio.run(server_.serve(sockets=[sock]))


if __name__ == "__main__":
    main()
