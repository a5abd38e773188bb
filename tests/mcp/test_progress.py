"""Progress heartbeats for long calls: a ``tools/call`` that carries ``_meta.progressToken``
and is still running after the interval gets ``notifications/progress`` (elapsed seconds,
strictly increasing, the timeout as total), all of them before its result and none after;
a call without a token gets none, nor does a call that ends within the interval. Clients
time a request out (~60 s) unless progress arrives, which cut legitimate long builds.

The fixture server's ``--progress-interval`` shortens the interval (5 s in service); the
slow mock tool sleeps for the seconds it is given."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.mcp.conftest import (
    INITIALIZE,
    INITIALIZED,
    HttpServer,
    fixture_argv,
    raw_http_session,
    server_env,
)


def _call(request_id: int, tool: str, arguments: dict[str, Any], token: Any = None) -> Any:
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if token is not None:
        params["_meta"] = {"progressToken": token}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def _stdio(workspace: Path, interval: float, messages: list[Any]) -> list[dict[str, Any]]:
    """Every message the fixture server writes for ``messages`` sent as a one-shot pipe."""
    argv = fixture_argv(workspace)
    done = subprocess.run(
        [*argv, "--progress-interval", str(interval)],
        input="".join(json.dumps(m) + "\n" for m in messages),
        capture_output=True,
        text=True,
        timeout=60,
        env=server_env(),
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def _progress(messages: list[dict[str, Any]], token: Any) -> list[tuple[int, dict[str, Any]]]:
    return [
        (i, m["params"])
        for i, m in enumerate(messages)
        if m.get("method") == "notifications/progress" and m["params"]["progressToken"] == token
    ]


def _index_of_answer(messages: list[dict[str, Any]], request_id: int) -> int:
    return next(
        i for i, m in enumerate(messages) if m.get("id") == request_id and "method" not in m
    )


def _check_beats(beats: list[dict[str, Any]], tool: str) -> None:
    values = [b["progress"] for b in beats]
    assert values == sorted(set(values)), values  # strictly increasing
    for beat in beats:
        assert tool in beat["message"]
        if "total" in beat:
            assert beat["progress"] <= beat["total"] <= 21  # the stand-in policy's 20 s timeout


def test_stdio_a_slow_call_with_a_token_gets_progress_before_its_result(
    workspace: Path,
) -> None:
    # Call 2 asks for progress and takes 1 s; call 3 asks for none and outlives it by
    # 0.6 s, so a heartbeat of call 2 that was not stopped would show after its answer.
    messages = _stdio(
        workspace,
        0.1,
        [
            INITIALIZE,
            INITIALIZED,
            _call(2, "slow", {"seconds": 1.0}, token="tok-2"),
            _call(3, "slow", {"seconds": 1.6}),
        ],
    )
    answer = _index_of_answer(messages, 2)
    assert messages[answer]["result"]["structuredContent"] == {"slept": 1.0}
    beats = _progress(messages, "tok-2")
    assert len(beats) >= 2, messages
    assert all(i < answer for i, _ in beats)  # none after the result
    _check_beats([b for _, b in beats], "slow")
    assert any("total" in b for _, b in beats)
    # Call 3 gave no token: no progress for anything else.
    assert {m["params"]["progressToken"] for m in messages if "method" in m and "params" in m} == {
        "tok-2"
    }


def test_stdio_a_fast_call_gets_no_progress(workspace: Path) -> None:
    # Benign control: a call that ends within the interval is answered with no heartbeat
    # (integer token this time: both kinds are the spec's).
    messages = _stdio(
        workspace,
        2.0,
        [INITIALIZE, INITIALIZED, _call(2, "echo", {"text": "hi"}, token=7)],
    )
    assert messages[_index_of_answer(messages, 2)]["result"]["isError"] is False
    assert _progress(messages, 7) == []


@pytest.fixture
def http_server(workspace: Path) -> Iterator[HttpServer]:
    argv = fixture_argv(workspace)
    server = HttpServer([*argv, "--http", "127.0.0.1:0", "--progress-interval", "0.1"])
    yield server
    server.close()


def _session(url: str) -> dict[str, str]:
    return {**raw_http_session(url), "MCP-Protocol-Version": "2025-06-18"}


def _sse_messages(url: str, headers: dict[str, str], body: Any) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a POST's SSE answer, in the order they came."""
    out: list[dict[str, Any]] = []
    with httpx.stream("POST", url, json=body, headers=headers, timeout=30) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data:") and line[5:].strip():
                out.append(json.loads(line[5:]))
    return out


def test_http_a_slow_call_with_a_token_gets_progress_on_its_stream(
    http_server: HttpServer,
) -> None:
    headers = _session(http_server.url)
    messages = _sse_messages(
        http_server.url, headers, _call(2, "slow", {"seconds": 0.8}, token="h-2")
    )
    answer = _index_of_answer(messages, 2)
    assert answer == len(messages) - 1  # the result ends the stream; progress came first
    beats = _progress(messages, "h-2")
    assert len(beats) >= 2, messages
    _check_beats([b for _, b in beats], "slow")


def test_http_without_a_token_no_progress(http_server: HttpServer) -> None:
    headers = _session(http_server.url)
    messages = _sse_messages(http_server.url, headers, _call(2, "slow", {"seconds": 0.5}))
    assert [m for m in messages if "method" in m] == []
    assert messages[-1]["result"]["structuredContent"] == {"slept": 0.5}


def test_beat_total_is_never_below_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    from runtime.mcp import _progress

    now = [100.0]
    monkeypatch.setattr(_progress.time, "monotonic", lambda: now[0])
    beat = _progress._Beat("shell_exec")
    now[0] = 103.0
    assert beat.next() == (3.0, None, "shell_exec: waiting to run (3 s)")  # not started yet
    beat.started(10.0)  # ran after 3 s of waiting: its timeout ends at 13 s
    now[0] = 108.0
    assert beat.next()[:2] == (8.0, 13.0)
    assert beat.next()[:2] == (8.1, 13.0)  # strictly increasing, even on a stalled clock
    now[0] = 114.0  # in the grace after the timeout: no total below the progress
    assert beat.next()[:2] == (14.0, None)
