from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests._pythonpath import python_path

HERE = Path(__file__).resolve().parent
FIXTURE_SERVER = HERE / "fixture_server.py"
HOSTILE = HERE / "hostile_server.py"
SessionFactory = Callable[..., Any]


#: A raw JSON-RPC ``initialize`` request (id 1), for tests that speak stdio by hand.
INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}

#: Its ``notifications/initialized``, and the Accept header a Streamable HTTP POST needs.
INITIALIZED: dict[str, Any] = {"jsonrpc": "2.0", "method": "notifications/initialized"}
ACCEPT = "application/json, text/event-stream"


def raw_http_session(url: str, version: str = "2025-06-18") -> dict[str, str]:
    """An HTTP session opened by hand (initialize at ``version``, then initialized): the
    headers of its later POSTs (Accept and Mcp-Session-Id; no MCP-Protocol-Version)."""
    init = {**INITIALIZE, "params": {**INITIALIZE["params"], "protocolVersion": version}}
    response = httpx.post(url, json=init, headers={"Accept": ACCEPT}, timeout=10)
    assert response.status_code == 200, response.text
    headers = {"Accept": ACCEPT, "Mcp-Session-Id": response.headers["mcp-session-id"]}
    assert httpx.post(url, json=INITIALIZED, headers=headers, timeout=10).status_code == 202
    return headers


def server_env() -> dict[str, str]:
    """The environment of a server child a test starts by hand: this one, with the checkout
    first on PYTHONPATH and whatever PYTHONPATH already held after it (the unprivileged-user
    runs find their dependencies through it: replacing it lost them)."""
    return {**os.environ, "PYTHONPATH": python_path(HERE.parents[1])}


def fixture_argv(workspace: Path, *options: str) -> list[str]:
    """The fixture server (``fixture_server.py``) on ``workspace`` with ``options``, run by
    this interpreter: over stdio unless the options say ``--http ADDRESS:PORT``."""
    return [sys.executable, str(FIXTURE_SERVER), "--workspace", str(workspace), *options]


def serve_mcp_argv(*options: str) -> list[str]:
    """``runtime serve --mcp`` with ``options``, run by this interpreter."""
    return [sys.executable, "-m", "runtime", "serve", "--mcp", *options]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("hello from the workspace\n")
    return ws


def child_env() -> dict[str, str] | None:
    """What a stdio server child needs besides the few variables the SDK's stdio client
    hands on (HOME, PATH, ...): PYTHONPATH, which is how runs under another interpreter
    (the unprivileged-user runs: the system python3) find the dependencies."""
    path = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": path} if path else None


@asynccontextmanager
async def stdio_session(argv: list[str], **session_kw: Any) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=child_env())
    with open("/dev/null", "w") as errlog:  # noqa: ASYNC230 - opened once per test
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, **session_kw) as session,
        ):
            await session.initialize()
            yield session


class HttpServer:
    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert self.proc.stderr is not None
        self.url = ""
        for line in self.proc.stderr:
            match = re.search(r"listening on (http://\S+)", line)
            if match:
                self.url = match.group(1)
                break
        if not self.url:
            self.close()
            raise RuntimeError(f"server did not start: exit {self.proc.returncode}")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def http_fixture_server(workspace: Path) -> Iterator[HttpServer]:
    server = HttpServer(fixture_argv(workspace, "--http", "127.0.0.1:0"))
    yield server
    server.close()


@asynccontextmanager
async def http_session(url: str, **session_kw: Any) -> AsyncIterator[ClientSession]:
    async with (
        streamable_http_client(url) as (read, write),
        ClientSession(read, write, **session_kw) as session,
    ):
        await session.initialize()
        yield session


@pytest.fixture(scope="module")
def shared_http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """One HTTP fixture server per test module: HTTP sessions are independent, so tests can
    share the process (a spawn costs more than most tests)."""
    ws = tmp_path_factory.mktemp("http") / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("hello from the workspace\n")
    server = HttpServer(fixture_argv(ws, "--http", "127.0.0.1:0"))
    yield server
    server.close()


@pytest.fixture(params=["stdio", "http"])
def connect(request: pytest.FixtureRequest, workspace: Path) -> Callable[..., Any]:
    """A session factory for the fixture server over each transport."""

    def factory(**session_kw: Any) -> Any:
        if request.param == "stdio":
            return stdio_session(fixture_argv(workspace), **session_kw)
        server: HttpServer = request.getfixturevalue("shared_http_server")
        return http_session(server.url, **session_kw)

    return factory


@pytest.fixture(scope="module")
def hostile() -> Iterator[HttpServer]:
    """``hostile_server.py``, one per test module."""
    server = HttpServer([sys.executable, str(HOSTILE)])
    yield server
    server.close()
