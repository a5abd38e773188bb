"""A hand-written MCP server on 127.0.0.1 that misbehaves on request, for the tests of the
URL client (``[[mcp_servers]] url``): it speaks Streamable HTTP at ``/mcp`` and the legacy
HTTP+SSE transport at ``/legacy/<endpoint kind>``. Run as a process; it prints ``listening
on http://127.0.0.1:PORT/mcp`` on stderr.

Its tool ``t`` (and ``e``, the same) does what its ``mode`` argument says (see
:func:`_call`; ``redirect`` is answered 307 to ``/mcp?followed=1``); ``count`` reads how
many calls of a mode the server received (a tools/call sent again would show). POST
``/control/forget`` forgets every Streamable HTTP session (a restart, as the client sees it).

Resumability (the spec's ``Last-Event-ID``): the modes ``resume``, ``resume2``, ``prime``,
``refused``, ``stuck`` and ``repeat`` give their events ids and end the answer's stream
before the answer; a GET on ``/mcp`` with ``Last-Event-ID`` (and the session id) picks the stream up
where it ended (see :func:`_resumed`). A GET without it is answered 405 (no GET stream).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import sys
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

_sessions: set[str] = set()
_ids = itertools.count(1)
_answers: dict[str, asyncio.Future[dict[str, Any]]] = {}
_calls: Counter[str] = Counter()
_legacy: dict[str, asyncio.Queue[str]] = {}
_grown = False
_slow_list = asyncio.Event()
_tasks: set[asyncio.Task[None]] = set()
#: Event id -> (mode, request id) of a stream that a GET with Last-Event-ID resumes.
_resumable: dict[str, tuple[str, Any]] = {}
_END = "\0end"
PORT = 0

TOOL = {
    "name": "t",
    "inputSchema": {"type": "object", "properties": {"mode": {"type": "string"}}},
}
#: The same tool under another name, which the tests give a short timeout.
SHORT = {**TOOL, "name": "e"}
EXTRA = {"name": "extra", "inputSchema": {"type": "object"}}


def _result(request_id: Any, value: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "result": {
            "content": [{"type": "text", "text": json.dumps(value)}],
            "structuredContent": {"value": value},
        },
    }


def _event(message: Any, event_id: str | None = None) -> bytes:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: message\ndata: {json.dumps(message)}\n\n".encode()


def _progress(step: int) -> dict[str, Any]:
    log = {"level": "info", "data": f"step {step}"}
    return {"jsonrpc": "2.0", "method": "notifications/message", "params": log}


def _ask() -> tuple[str, asyncio.Future[dict[str, Any]]]:
    """An id for a request to the client, and where its answer will land."""
    key = f"q{next(_ids)}"
    future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    _answers[key] = future
    return key, future


async def _call(request_id: Any, arguments: dict[str, Any]) -> AsyncIterator[bytes]:
    """The SSE answer of ``t`` for ``arguments["mode"]``."""
    global _grown
    mode = str(arguments.get("mode", "ok"))
    _calls[mode] += 1
    if mode.startswith("ask:"):
        key, future = _ask()
        yield _event({"jsonrpc": "2.0", "id": key, "method": mode[4:], "params": {}})
        try:
            answer = await asyncio.wait_for(future, 5)
        except TimeoutError:
            answer = None
        yield _event(_result(request_id, answer))
    elif mode == "endless":
        while True:
            yield b": keep-alive\n\n"
            await asyncio.sleep(0.02)
    elif mode == "babble":
        comment = b": " + b"z" * 65_536 + b"\n\n"
        while True:  # comments only, as fast as the client reads them
            yield comment
            await asyncio.sleep(0)  # lets starlette see the client go and end this
    elif mode == "huge":
        yield _event(_result(request_id, "x" * 3_000_000))
    elif mode == "flood":
        for i in range(200):
            yield _event({"jsonrpc": "2.0", "id": f"f{i}", "method": "ping"})
        yield _event(_result(request_id, "after the flood"))
    elif mode == "chatter":
        for i in range(50):
            progress = {"progressToken": 1, "progress": i}
            yield _event({"jsonrpc": "2.0", "method": "notifications/progress", "params": progress})
            log = {"level": "info", "data": f"line {i}"}
            yield _event({"jsonrpc": "2.0", "method": "notifications/message", "params": log})
        yield _event(_result(request_id, "after the chatter"))
    elif mode == "badid":
        # Answers that look like ours and are not: a string id, a boolean, a null error.
        for wrong in (str(request_id), True, None, [request_id]):
            yield _event({"jsonrpc": "2.0", "id": wrong, "result": {"content": []}})
    elif mode == "slowlist":
        _slow_list.set()
        yield _event({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        yield _event(_result(request_id, "listing is slow now"))
    elif mode == "grow":
        _grown = True
        yield _event({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        yield _event(_result(request_id, "grown"))
    elif mode == "drop":
        yield b": the answer is coming\n\n"
        raise RuntimeError("the connection drops before the answer")
    elif mode in ("resume", "resume2", "refused", "stuck", "repeat"):
        key = f"{mode}-{next(_ids)}"
        yield _event(_progress(1), f"{key}-1")
        _resumable[f"{key}-1"] = (mode, request_id)
        raise RuntimeError("the connection drops after an event with an id")
    elif mode == "prime":
        # 2025-11-25: an id and empty data first, a retry, then the connection closes
        # cleanly before the answer (the server "polls" its client).
        key = f"{mode}-{next(_ids)}"
        yield f"id: {key}-0\nretry: 50\ndata: \n\n".encode()
        _resumable[f"{key}-0"] = ("resume", request_id)
    elif mode.startswith("count:"):
        yield _event(_result(request_id, _calls[mode[6:]]))
    else:
        yield _event(_result(request_id, "ok"))


def _handle(message: dict[str, Any]) -> tuple[int, Any]:
    """(status, body) for a message that is not tools/call."""
    method = message.get("method")
    if method is None:  # the client's answer to one of our requests
        future = _answers.pop(str(message.get("id")), None)
        if future is not None and not future.done():
            future.set_result(message)
        return 202, None
    if method == "initialize":
        info = {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "hostile", "version": "1"},
        }
        return 200, {"jsonrpc": "2.0", "id": message["id"], "result": info}
    if method == "tools/list" and _slow_list.is_set():
        return 0, None  # the caller sleeps: a listing that never ends
    if method == "tools/list":
        tools = [TOOL, SHORT, EXTRA] if _grown else [TOOL, SHORT]
        return 200, {"jsonrpc": "2.0", "id": message["id"], "result": {"tools": tools}}
    if "id" not in message:
        return 202, None
    error = {"code": -32601, "message": f"no {method}"}
    return 200, {"jsonrpc": "2.0", "id": message["id"], "error": error}


async def _resumed(mode: str, request_id: Any, last: str) -> AsyncIterator[bytes]:
    """The rest of a stream after event ``last``: ``resume`` sends the answer; ``resume2``
    one more event with an id and then breaks again; ``stuck`` nothing at all; ``repeat``
    the event ``last`` once more."""
    if mode == "resume2":
        yield _event(_progress(2), f"{last}-2")
        _resumable[f"{last}-2"] = ("resume", request_id)
        raise RuntimeError("the resumed stream drops too")
    if mode == "repeat":  # the same event again, under the same id: nothing new
        yield _event(_progress(1), last)
    if mode == "resume":
        _calls["resumed"] += 1
        yield _event(_result(request_id, "resumed"), f"{last}-end")


async def streamable(request: Request) -> Response:
    if request.method == "GET":
        last = request.headers.get("last-event-id")
        if last is None or last not in _resumable:
            return Response(status_code=405)
        if request.headers.get("mcp-session-id") not in _sessions:
            return Response(b"unknown session", status_code=404)
        mode, request_id = _resumable[last]
        _calls[f"get:{mode}"] += 1
        if mode == "refused":
            return Response(status_code=405)
        return StreamingResponse(_resumed(mode, request_id, last), media_type="text/event-stream")
    if request.method == "DELETE":
        return Response(status_code=200)
    message = json.loads(await request.body())
    session = request.headers.get("mcp-session-id")
    if message.get("method") == "initialize":
        session = f"s{next(_ids)}"
        _sessions.add(session)
        _calls["initialize"] += 1
    elif session not in _sessions:
        return Response(b"unknown session", status_code=404)
    headers = {"mcp-session-id": session}
    if message.get("method") == "tools/call":
        arguments = message["params"].get("arguments") or {}
        if request.query_params.get("followed"):
            _calls["followed"] += 1  # a client that followed the redirect below
            if request.headers.get("x-api-key"):
                _calls["followed with the key"] += 1
        elif arguments.get("mode") == "redirect":
            # The spec has no redirects on the MCP endpoint; this one points at the same
            # (allowed) origin, with a token in its query.
            where = f"http://127.0.0.1:{PORT}/mcp?followed=1&token=s3cr3t-in-query"
            return Response(status_code=307, headers={**headers, "location": where})
        return StreamingResponse(
            _call(message["id"], arguments), media_type="text/event-stream", headers=headers
        )
    status, body = _handle(message)
    if status == 0:
        await asyncio.sleep(3600)
    if body is None:
        return Response(status_code=status, headers=headers)
    return JSONResponse(body, status_code=status, headers=headers)


async def forget(request: Request) -> Response:
    _sessions.clear()
    for queue in list(_legacy.values()):
        queue.put_nowait(_END)  # the legacy streams end: their sessions are gone
    _legacy.clear()
    return Response(status_code=200)


def _endpoint(kind: str, session: str) -> str:
    path = f"/legacy/{kind}/messages?session_id={session}"
    return {
        "ok": path,
        "otherhost": f"http://localhost:{PORT}{path}",
        "private": f"http://10.0.0.1:{PORT}{path}",
        "otherport": f"http://127.0.0.1:{PORT + 1 if PORT < 65535 else 1}{path}",
    }.get(kind, path)


async def legacy_stream(request: Request) -> Response:
    kind = request.path_params["kind"]
    session = f"l{next(_ids)}"
    queue: asyncio.Queue[str] = asyncio.Queue()
    _legacy[session] = queue

    _calls[f"get:{kind}"] += 1
    # "flaky": its second stream (the first after a forget) ends before its endpoint, as a
    # server still restarting might; the third is whole again.
    short = kind == "none" or (kind == "flaky" and _calls[f"get:{kind}"] == 2)

    async def events() -> AsyncIterator[bytes]:
        if kind == "late" or short:
            yield _event({"jsonrpc": "2.0", "method": "notifications/message"})
        if short:
            return
        yield f"event: endpoint\ndata: {_endpoint(kind, session)}\n\n".encode()
        try:
            while (item := await queue.get()) is not _END:
                yield item.encode()
        finally:
            _legacy.pop(session, None)

    return StreamingResponse(events(), media_type="text/event-stream")


async def legacy_post(request: Request) -> Response:
    queue = _legacy.get(request.query_params.get("session_id", ""))
    if queue is None:
        return Response(b"unknown session", status_code=404)
    message = json.loads(await request.body())
    if message.get("method") == "tools/call":

        async def run() -> None:
            arguments = message["params"].get("arguments") or {}
            async for chunk in _call(message["id"], arguments):
                queue.put_nowait(chunk.decode())

        task = asyncio.get_running_loop().create_task(run())
        _tasks.add(task)  # held: a task nobody references may be collected mid-run
        task.add_done_callback(_tasks.discard)
        return Response(status_code=202)
    _, body = _handle(message)
    if body is not None:
        queue.put_nowait(_event(body).decode())
    return Response(status_code=202)


def main() -> None:
    global PORT
    app = Starlette(
        routes=[
            Route("/mcp", streamable, methods=["GET", "POST", "DELETE"]),
            Route("/control/forget", forget, methods=["POST"]),
            Route("/legacy/{kind}", legacy_stream, methods=["GET"]),
            Route("/legacy/{kind}/messages", legacy_post, methods=["POST"]),
        ]
    )
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    PORT = sock.getsockname()[1]
    print(f"listening on http://127.0.0.1:{PORT}/mcp", file=sys.stderr, flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="critical", lifespan="off"))
    asyncio.run(server.serve(sockets=[sock]))


if __name__ == "__main__":
    main()
