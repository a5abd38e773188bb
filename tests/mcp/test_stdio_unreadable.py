"""A request that Python reads as JSON but the MCP SDK's parser refuses (a lone UTF-16
surrogate escape, ``"\\ud800"``, in its arguments or tool name): the SDK dropped it with a
debug log line and sent nothing back, so the client waited for its answer for ever. Such a
request, when it has an id, is answered with a JSON-RPC error under that id."""

from __future__ import annotations

import json
import os
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


PING_9 = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "ping"})


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


def _answers_in_order(workspace: Path, lines: list[str]) -> list[dict[str, Any]]:
    """Every answer to an initialized session that sends ``lines`` then ping 9, in order."""
    proc = subprocess.run(
        serve_mcp_argv("--workspace", str(workspace)),
        input="".join(f"{line}\n" for line in [*_initialized("2025-11-25"), *lines, PING_9]),
        capture_output=True,
        text=True,
        env=server_env(),
        timeout=120,
    )
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def test_json_that_is_no_jsonrpc_message_is_answered_with_invalid_request(
    workspace: Path,
) -> None:
    # JSON that is no request, notification or response (a number, a string, an object
    # without jsonrpc/method) was dropped with a debug log line: JSON-RPC 2.0 answers it
    # with Invalid Request, id null, or the request's id when it could be read.
    lines = [
        "3",
        '"x"',
        json.dumps({"hello": 1}),
        json.dumps({"jsonrpc": "1.0", "id": 5, "method": "ping"}),
        json.dumps({"jsonrpc": "2.0", "id": 6, "method": "ping", "params": 3}),
    ]
    answers = _answers_in_order(workspace, lines)
    assert [a["id"] for a in answers] == [1, None, None, None, 5, 6, 9]
    for answer in answers[1:6]:
        error = answer["error"]
        assert error["code"] == -32600 and len(error["message"]) < 120, error
    assert "expected one JSON object" in answers[1]["error"]["message"]
    assert '"params" must be an object' in answers[5]["error"]["message"]
    assert answers[6]["result"] == {}


def test_a_line_that_is_not_json_is_a_parse_error_with_id_null(workspace: Path) -> None:
    # Text that is not JSON shows no request id: JSON-RPC 2.0 §5.1's parse error, id null
    # (it went unanswered: a client whose request it was waited for ever; more in
    # tests/mcp/test_stdio_parse_errors.py), and the next request is served.
    answers = _answers_in_order(workspace, ["garbage", "{"])
    assert [a["id"] for a in answers] == [1, None, None, 9], answers
    assert [a["error"]["code"] for a in answers[1:3]] == [-32700, -32700]
    assert answers[-1]["result"] == {}


def test_a_request_whose_id_mcp_does_not_allow_is_answered(workspace: Path) -> None:
    # An id that is neither a string nor an integer: the SDK's notification model ignores
    # members it does not know, so it read such a request as a notification and dropped
    # it, and its client waited for ever. It is answered with Invalid Request, id null,
    # and the next request is served.
    bad = [1.5, None, True, {"a": 1}, [2], 1.0]
    lines = [json.dumps({"jsonrpc": "2.0", "id": i, "method": "ping"}) for i in bad]
    answers = _answers_in_order(workspace, lines)
    assert [a["id"] for a in answers] == [1, *[None] * len(bad), 9], answers
    for answer in answers[1:-1]:
        error = answer["error"]
        assert error["code"] == -32600, error
        assert '"id" must be a string or an integer' in error["message"], error
    assert answers[-1]["result"] == {}


def test_the_tools_read_eof_on_fd_0_while_serving(workspace: Path) -> None:
    # The wire's stdin is read on a private descriptor; fd 0 points at the null device, so
    # nothing the server starts can read the client's frames.
    from runtime.mcp.transport import _claimed_stdin

    read, write = os.pipe()
    saved = os.dup(0)
    try:
        os.dup2(read, 0)
        os.write(write, b"frame\n")
        with _claimed_stdin() as wire:
            assert os.read(0, 10) == b""  # the null device
            assert wire.readline() == b"frame\n"  # bytes: each line is decoded strictly
        os.write(write, b"after\n")
        assert os.read(0, 10) == b"after\n"  # fd 0 restored
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read, write):
            os.close(fd)
