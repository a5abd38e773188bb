"""The MCP lifecycle (``runtime.mcp._lifecycle``): ``initialize`` once, first.

A second ``initialize`` in a live session was accepted and renegotiated it: over HTTP a
2025-06-18 session re-initialized at 2024-11-05 refused its owner's next requests (400),
and on stdio a re-initialize without capabilities dropped the client's elicitation. A
request before ``initialize`` got -32602 "Invalid request parameters". Both are Invalid
Request (-32600) now, saying why, and the session is as it was.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import httpx

from tests.mcp.conftest import (
    ACCEPT,
    INITIALIZE,
    INITIALIZED,
    HttpServer,
    fixture_argv,
    raw_http_session,
    server_env,
)


def _serve(workspace: Path, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The fixture server over stdio, fed ``messages`` (then end of input): what it wrote."""
    proc = subprocess.run(
        fixture_argv(workspace),
        input="".join(json.dumps(m) + "\n" for m in messages),
        capture_output=True,
        text=True,
        env=server_env(),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _initialize(request_id: int, version: str, capabilities: dict[str, Any]) -> dict[str, Any]:
    params = {**INITIALIZE["params"], "protocolVersion": version, "capabilities": capabilities}
    return {**INITIALIZE, "id": request_id, "params": params}


def _by_id(written: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    return {m["id"]: m for m in written if "method" not in m}


def test_a_second_initialize_on_stdio_is_refused_and_changes_nothing(workspace: Path) -> None:
    guarded = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "guarded", "arguments": {"text": "x"}},
    }
    written = _serve(
        workspace,
        [
            _initialize(1, "2025-06-18", {"elicitation": {}}),
            INITIALIZED,
            _initialize(2, "2024-11-05", {}),
            guarded,
        ],
    )
    answers = _by_id(written)
    assert answers[1]["result"]["protocolVersion"] == "2025-06-18"
    error = answers[2]["error"]
    assert error["code"] == -32600 and error["message"].startswith("already initialized")
    # The client's elicitation capability is still the session's: the guarded call asks.
    asked = [m for m in written if m.get("method") == "elicitation/create"]
    assert len(asked) == 1, written


def test_a_request_before_initialize_on_stdio_says_so(workspace: Path) -> None:
    written = _serve(
        workspace,
        [
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 2, "method": "ping"},
            {"jsonrpc": "2.0", "id": 3, "method": "no/such/method"},
            _initialize(4, "2025-06-18", {}),
            INITIALIZED,
            {"jsonrpc": "2.0", "id": 5, "method": "tools/list"},
        ],
    )
    answers = _by_id(written)
    error = answers[1]["error"]
    assert error["code"] == -32600
    assert error["message"].startswith("not initialized: tools/list was sent before initialize")
    assert answers[2]["result"] == {}  # ping may come first
    assert answers[3]["error"]["code"] == -32601  # not served: the SDK's answer, as before
    assert answers[4]["result"]["protocolVersion"] == "2025-06-18"  # initialize still works
    assert answers[5]["result"]["tools"]


def test_a_bare_initialized_on_stdio_does_not_open_the_connection(workspace: Path) -> None:
    # The SDK took notifications/initialized with no initialize before it as the whole
    # handshake: the requests after it were served with nothing negotiated.
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "x"}},
    }
    written = _serve(
        workspace,
        [
            INITIALIZED,
            {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            call,
            _initialize(3, "2025-06-18", {}),
            INITIALIZED,
            {"jsonrpc": "2.0", "id": 4, "method": "tools/list"},
        ],
    )
    answers = _by_id(written)
    for request_id, method in ((1, "tools/list"), (2, "tools/call")):
        error = answers[request_id]["error"]
        assert error["code"] == -32600
        assert error["message"].startswith(f"not initialized: {method} was sent")
    assert answers[3]["result"]["protocolVersion"] == "2025-06-18"  # initialize still works
    assert answers[4]["result"]["tools"]


def test_a_bare_initialized_over_http_opens_no_session(shared_http_server: HttpServer) -> None:
    # Over HTTP only initialize opens a session: a bare notifications/initialized is
    # refused and the session id it was answered with names nothing.
    url = shared_http_server.url
    bare = httpx.post(url, json=INITIALIZED, headers={"Accept": ACCEPT}, timeout=10)
    assert bare.status_code == 400
    session = bare.headers.get("mcp-session-id")
    if session is not None:
        listed = httpx.post(
            url,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Accept": ACCEPT, "Mcp-Session-Id": session},
            timeout=10,
        )
        assert listed.status_code == 404


def _answer(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC answer of a POST, sent as JSON or as an SSE stream's last event."""
    if response.headers.get("content-type", "").startswith("application/json"):
        answer: dict[str, Any] = response.json()
        return answer
    data = [line for line in response.text.splitlines() if line.startswith("data:")]
    answer = json.loads(data[-1].removeprefix("data:"))
    return answer


def test_a_second_initialize_over_http_is_refused_and_changes_nothing(
    shared_http_server: HttpServer,
) -> None:
    url = shared_http_server.url
    headers = raw_http_session(url, "2025-06-18")
    again = httpx.post(url, json=_initialize(9, "2024-11-05", {}), headers=headers, timeout=10)
    error = _answer(again)["error"]
    assert error["code"] == -32600 and error["message"].startswith("already initialized")
    # The session still serves its owner at the version it negotiated, and only that one.
    listed = httpx.post(
        url,
        json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
        headers={**headers, "MCP-Protocol-Version": "2025-06-18"},
        timeout=10,
    )
    assert listed.status_code == 200, listed.text
    assert _answer(listed)["result"]["tools"]
    older = httpx.post(
        url,
        json={"jsonrpc": "2.0", "id": 4, "method": "tools/list"},
        headers={**headers, "MCP-Protocol-Version": "2024-11-05"},
        timeout=10,
    )
    assert older.status_code == 400
