"""A request that Python reads as JSON but the MCP SDK's parser refuses (a lone UTF-16
surrogate escape, ``"\\ud800"``, in its arguments or tool name): the SDK dropped it with a
debug log line and sent nothing back, so the client waited for its answer for ever. Such a
request, when it has an id, is answered with a JSON-RPC error under that id."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.mcp.conftest import INITIALIZE, serve_mcp_argv, server_env


def _exchange(workspace: Path, lines: list[str], expect: set[Any]) -> dict[Any, dict[str, Any]]:
    """Send ``lines``, read answers until every id in ``expect`` has one (or 120 s pass),
    then close stdin; return every answer by id. (Closing stdin at once would do as well
    now that the server answers what it read before it ends: tests/mcp/test_stdio_eof.py.)"""
    proc = subprocess.Popen(
        serve_mcp_argv("--workspace", str(workspace)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=server_env(),
    )
    assert proc.stdin is not None and proc.stdout is not None
    answers: dict[Any, dict[str, Any]] = {}
    timer = threading.Timer(120, proc.kill)
    timer.start()
    try:
        proc.stdin.write("".join(line + "\n" for line in lines))
        proc.stdin.flush()
        while not expect <= answers.keys():
            line = proc.stdout.readline()
            if not line:
                break  # the server ended (or was killed at the deadline)
            if line.strip():
                message = json.loads(line)
                answers[message.get("id")] = message
        proc.stdin.close()
        for line in proc.stdout:
            if line.strip():
                message = json.loads(line)
                answers[message.get("id")] = message
        proc.wait(timeout=60)
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        if not proc.stdin.closed:
            proc.stdin.close()
    return answers


def test_requests_the_sdk_cannot_read_are_answered(workspace: Path) -> None:
    def call(i: int, name: str, arguments: dict[str, Any]) -> str:
        params = {"name": name, "arguments": arguments}
        return json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params})

    answers = _exchange(
        workspace,
        [
            json.dumps(INITIALIZE),
            json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            call(2, "json_parse", {"text": "\ud800"}),
            call("s3", "json_\udc00", {"text": "1"}),
            json.dumps({"jsonrpc": "2.0", "method": "notifications/x", "params": {"a": "\ud800"}}),
            json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}),
        ],
        expect={1, 2, 4, "s3"},
    )
    assert sorted(answers, key=str) == [1, 2, 4, "s3"]
    for i in (2, "s3"):
        error = answers[i]["error"]
        assert error["code"] == -32700 and "could not be read" in error["message"], error
    assert answers[4]["result"]["tools"]


def _initialized(version: str) -> list[str]:
    init = json.loads(json.dumps(INITIALIZE))
    init["params"]["protocolVersion"] = version
    return [json.dumps(init), json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})]


@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18", "2025-11-25"])
@pytest.mark.parametrize("batch", ["[]", "PINGS"])
def test_a_batch_is_answered_with_invalid_request(
    workspace: Path, version: str, batch: str
) -> None:
    # JSON-RPC batches were dropped from MCP in 2025-06-18, and the SDK never read them:
    # a batch line was dropped with a debug log line and its client waited for ever. It
    # gets JSON-RPC's one answer to a batch that cannot be served: Invalid Request, id
    # null. The next request is served as usual.
    pings = [{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in (7, 8)]
    line = json.dumps(pings) if batch == "PINGS" else batch
    answers = _exchange(
        workspace,
        [*_initialized(version), line, json.dumps({"jsonrpc": "2.0", "id": 9, "method": "ping"})],
        expect={1, None, 9},
    )
    assert sorted(answers, key=str) == [1, 9, None]
    error = answers[None]["error"]
    assert error["code"] == -32600 and "batch" in error["message"], error
    assert answers[9]["result"] == {}


def test_a_non_object_line_that_is_no_batch_is_not_answered(workspace: Path) -> None:
    # Benign control of the above: JSON that is neither an object nor an array (a number,
    # a string) carries no request id and is no batch; it stays unanswered, as before.
    answers = _exchange(
        workspace,
        [
            *_initialized("2025-11-25"),
            "3",
            '"x"',
            json.dumps({"jsonrpc": "2.0", "id": 9, "method": "ping"}),
        ],
        expect={1, 9},
    )
    assert sorted(answers, key=str) == [1, 9]
