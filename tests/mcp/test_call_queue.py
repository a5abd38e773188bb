"""One MCP session cannot starve the server: its calls that wait for a broker slot are
bounded (``[limits] max_queued``; one more fails at once as ``resource_limit``, audited),
and another session's call is served in turn, not behind that session's whole queue."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest

from runtime.audit import AuditLog
from runtime.backends.base import ExecRequest
from runtime.backends.mock import MockBackend
from runtime.broker import Broker
from runtime.catalogue import Catalogue
from runtime.mcp.server import McpToolServer
from runtime.models import ToolSpec
from runtime.policy import Policy
from tests.mcp.conftest import ACCEPT, HttpServer, fixture_argv

pytestmark = pytest.mark.anyio


def _spec(name: str) -> ToolSpec:
    return ToolSpec.model_validate(
        {
            "name": name,
            "description": f"Mock {name}.",
            "category": "data",
            "parameters": {"type": "object", "additionalProperties": True},
            "result": {"type": "object"},
            "backend": "mock",
        }
    )


class _Gate:
    """The mock backend's handler: ``slow`` calls run until released, ``quick`` at once."""

    def __init__(self) -> None:
        self.release = anyio.Event()
        self.started: list[str] = []

    async def __call__(self, request: ExecRequest) -> Any:
        label = str(request.arguments.get("label", ""))
        self.started.append(label)
        if request.spec.name == "slow":
            await self.release.wait()
        return {"label": label}


def _ctx(session: str) -> Any:
    """A request context of streamable HTTP session ``session`` (what _call_tool reads:
    the session the SDK serves the request in, on the server session's connection)."""
    request = SimpleNamespace(headers={"mcp-session-id": session})
    connection = SimpleNamespace(session_id=session)
    return SimpleNamespace(
        request=request, session=SimpleNamespace(_connection=connection), meta=None
    )


def _policy(max_concurrent: int, max_queued: int, max_queued_total: int = 256) -> Policy:
    return Policy.from_toml(
        f"[limits]\nmax_concurrent = {max_concurrent}\nmax_queued = {max_queued}\n"
        f"max_queued_total = {max_queued_total}\n"
        '[[rules]]\nid = "all"\naction = "allow"\ntools = ["*"]\n',
        "test",
    )


async def _server(tmp_path: Path, gate: _Gate, policy: Policy) -> tuple[Broker, McpToolServer]:
    catalogue = Catalogue(builtins=False)
    catalogue.register(_spec("slow"))
    catalogue.register(_spec("quick"))
    broker = Broker(
        workspace=tmp_path / "ws",
        backends={"mock": MockBackend(gate)},
        catalogue=catalogue,
        policy=policy,
    )
    return broker, McpToolServer(broker)


def _call(tool: str, label: str) -> types.CallToolRequestParams:
    return types.CallToolRequestParams(name=tool, arguments={"label": label})


async def test_the_max_queued_limit_is_read_from_the_policy(tmp_path: Path) -> None:
    broker, server = await _server(tmp_path, _Gate(), _policy(2, 7))
    async with broker:
        assert server.max_queued == 7
        assert server.max_queued_total == 256
    assert Policy.default().max_queued == 32
    assert Policy.default().max_queued_total == 256


async def test_a_session_past_its_queue_bound_is_refused_and_another_is_served(
    tmp_path: Path,
) -> None:
    gate = _Gate()
    broker, server = await _server(tmp_path, gate, _policy(1, 3))
    results: dict[str, types.CallToolResult] = {}

    async def call(session: str, tool: str, label: str) -> None:
        result = await server._call_tool(_ctx(session), _call(tool, label))
        assert isinstance(result, types.CallToolResult)
        results[label] = result

    async with broker, anyio.create_task_group() as tg:
        tg.start_soon(call, "A", "slow", "a-running")
        await anyio.wait_all_tasks_blocked()
        assert gate.started == ["a-running"]
        for i in range(3):  # session A fills its queue ...
            tg.start_soon(call, "A", "slow", f"a-queued-{i}")
            await anyio.wait_all_tasks_blocked()
        # ... and its next call fails at once, without waiting for a slot
        tg.start_soon(call, "A", "slow", "a-refused")
        await anyio.wait_all_tasks_blocked()
        assert "a-refused" in results, "the call past the bound waits"
        refused = results["a-refused"]
        assert refused.is_error
        assert refused.structured_content is not None
        error = refused.structured_content["error"]
        assert error["type"] == "resource_limit"
        assert error["details"]["limit"] == "max_queued"
        # Session B's call waits for one turn, not behind A's whole queue.
        tg.start_soon(call, "B", "quick", "b")
        await anyio.wait_all_tasks_blocked()
        assert gate.started == ["a-running"]
        gate.release.set()
        if "a-refused" not in results:  # without a bound: let the test end
            tg.cancel_scope.cancel()
    assert gate.started == ["a-running", "a-queued-0", "b", "a-queued-1", "a-queued-2"]
    assert all(not results[label].is_error for label in gate.started)
    with AuditLog(tmp_path / "ws" / ".runtime" / "audit.db", read_only=True) as log:
        assert log.verify().ok
        records = [r for r in log.tail(100) if r.error_type == "resource_limit"]
    assert len(records) == 1


async def test_many_sessions_past_the_total_bound_are_refused(tmp_path: Path) -> None:
    """A client that opens session after session (each under max_queued) meets
    max_queued_total; the refusal is audited, the queued calls still run."""
    gate = _Gate()
    broker, server = await _server(tmp_path, gate, _policy(1, 3, 4))
    results: dict[str, types.CallToolResult] = {}

    async def call(session: str, tool: str, label: str) -> None:
        result = await server._call_tool(_ctx(session), _call(tool, label))
        assert isinstance(result, types.CallToolResult)
        results[label] = result

    async with broker, anyio.create_task_group() as tg:
        tg.start_soon(call, "S0", "slow", "running")
        await anyio.wait_all_tasks_blocked()
        for i in range(4):  # four sessions, one queued call each
            tg.start_soon(call, f"S{i + 1}", "slow", f"queued-{i}")
            await anyio.wait_all_tasks_blocked()
        tg.start_soon(call, "S9", "quick", "refused")
        await anyio.wait_all_tasks_blocked()
        assert "refused" in results, "the call past the total bound waits"
        refused = results["refused"]
        assert refused.is_error and refused.structured_content is not None
        error = refused.structured_content["error"]
        assert error["type"] == "resource_limit"
        assert error["details"]["limit"] == "max_queued_total"
        gate.release.set()
    assert gate.started == ["running", *(f"queued-{i}" for i in range(4))]
    with AuditLog(tmp_path / "ws" / ".runtime" / "audit.db", read_only=True) as log:
        assert log.verify().ok
        records = [r for r in log.tail(100) if r.error_type == "resource_limit"]
    assert len(records) == 1


class _Connection:
    """A connection without a session (the server keeps a weak reference to each)."""

    session_id = None


def _stateless_ctx(peer: str) -> Any:
    """A 2026-era request over HTTP: no session, a connection of its own (each request is
    one), and the peer address its socket has."""
    request = SimpleNamespace(headers={}, client=SimpleNamespace(host=peer, port=40000))
    return SimpleNamespace(
        request=request, session=SimpleNamespace(_connection=_Connection()), meta=None
    )


async def test_stateless_requests_queue_per_peer(tmp_path: Path) -> None:
    """Each stateless request is a connection of its own, so each had a queue of its own
    and one client could fill max_queued_total alone. They wait in their peer's queue
    now: past max_queued they are refused, and another peer is served in turn."""
    gate = _Gate()
    broker, server = await _server(tmp_path, gate, _policy(1, 2, 64))
    results: dict[str, types.CallToolResult] = {}

    async def call(peer: str, tool: str, label: str) -> None:
        result = await server._call_tool(_stateless_ctx(peer), _call(tool, label))
        assert isinstance(result, types.CallToolResult)
        results[label] = result

    async with broker, anyio.create_task_group() as tg:
        tg.start_soon(call, "10.0.0.5", "slow", "a-running")
        await anyio.wait_all_tasks_blocked()
        for i in range(2):
            tg.start_soon(call, "10.0.0.5", "slow", f"a-queued-{i}")
            await anyio.wait_all_tasks_blocked()
        tg.start_soon(call, "10.0.0.5", "slow", "a-refused")
        await anyio.wait_all_tasks_blocked()
        assert "a-refused" in results, "a stateless call past its peer's bound waits"
        refused = results["a-refused"]
        assert refused.is_error and refused.structured_content is not None
        error = refused.structured_content["error"]
        assert error["type"] == "resource_limit"
        assert error["details"]["limit"] == "max_queued"
        tg.start_soon(call, "10.0.0.6", "quick", "b")  # another peer: its own queue
        await anyio.wait_all_tasks_blocked()
        assert "b" not in results
        gate.release.set()
        if "a-refused" not in results:
            tg.cancel_scope.cancel()
    assert gate.started == ["a-running", "a-queued-0", "b", "a-queued-1"]
    with AuditLog(tmp_path / "ws" / ".runtime" / "audit.db", read_only=True) as log:
        sessions = {r.session for r in log.tail(100)}
    # The audit keeps one session per request: only the queue is the peer's.
    assert len(sessions) == 5 and all(s and s.startswith("mcp-conn:") for s in sessions)


async def test_the_queue_key_of_each_kind_of_request() -> None:
    ctx = _stateless_ctx("::1")
    assert McpToolServer.queue_key(ctx, "mcp-conn:7") == "mcp-peer:::1"
    assert McpToolServer.queue_key(_ctx("S"), "mcp:0123456789abcdef") == "mcp:0123456789abcdef"
    stdio = SimpleNamespace(request=None, session=SimpleNamespace(), meta=None)
    assert McpToolServer.queue_key(stdio, "mcp-conn:1") == "mcp-conn:1"


def test_stateless_http_requests_of_one_peer_share_a_queue(workspace: Path) -> None:
    """End to end: 2026-07-28 requests over HTTP, each naming a different X-Forwarded-For
    (uvicorn trusted it from 127.0.0.1, so a local client could pick a fresh peer per
    request): with one slot and max_queued 1, the third concurrent call is refused."""
    server = HttpServer(
        fixture_argv(
            workspace, "--http", "127.0.0.1:0", "--max-concurrent", "1", "--max-queued", "1"
        )
    )
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    answers: dict[int, str] = {}

    def call(i: int) -> None:
        params = {"name": "slow", "arguments": {"seconds": 2}, "_meta": meta}
        response = httpx.post(
            server.url,
            json={"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params},
            headers={
                "Accept": ACCEPT,
                "MCP-Protocol-Version": "2026-07-28",
                "Mcp-Method": "tools/call",
                "Mcp-Name": "slow",
                "X-Forwarded-For": f"192.0.2.{i}",
            },
            timeout=30,
        )
        answers[i] = response.text

    try:
        threads = []
        for i in range(3):
            thread = threading.Thread(target=call, args=(i,))
            thread.start()
            threads.append(thread)
            time.sleep(0.7)  # running, then queued, then past the bound
        for thread in threads:
            thread.join(60)
    finally:
        server.close()
    assert sorted(answers) == [0, 1, 2]
    assert '"slept":2' in answers[0] and '"slept":2' in answers[1], answers
    assert "resource_limit" in answers[2] and "max_queued" in answers[2], answers[2]
