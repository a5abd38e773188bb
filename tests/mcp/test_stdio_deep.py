"""A deeply nested stdio line (``[`` a thousand times, 2 KB) ended ``runtime serve --mcp``:
the line was parsed again with ``json.loads``, whose RecursionError escaped the read side
and ended the server's task group, losing the answers to the calls in flight. Such a line
is now read as text the server cannot read (no answer: its id cannot be read), and the
server answers everything else."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mcp.conftest import FIXTURE_SERVER, INITIALIZE, INITIALIZED, server_env


def _serve(workspace: Path, lines: list[str]) -> subprocess.CompletedProcess[str]:
    """The fixture server over stdio, fed ``lines`` (then end of input), run to its end."""
    return subprocess.run(
        [sys.executable, str(FIXTURE_SERVER), "--workspace", str(workspace)],
        input="".join(f"{line}\n" for line in lines),
        capture_output=True,
        text=True,
        env=server_env(),
        timeout=120,
    )


def _deep(depth: int, *, with_id: bool) -> str:
    head = (
        '{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"x":'
        if with_id
        else '{"jsonrpc":"2.0","method":"notifications/x","params":{"x":'
    )
    return head + "[" * depth + "]" * depth + "}}"


@pytest.mark.parametrize("depth", [1_000, 100_000])
@pytest.mark.parametrize("with_id", [True, False], ids=["request", "notification"])
def test_a_deeply_nested_line_does_not_end_the_server(
    workspace: Path, depth: int, with_id: bool
) -> None:
    slow = {
        "jsonrpc": "2.0",
        "id": "slow",
        "method": "tools/call",
        "params": {"name": "slow", "arguments": {"seconds": 1}},
    }
    ping = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
    lines = [json.dumps(INITIALIZE), json.dumps(INITIALIZED), json.dumps(slow)]
    lines += [_deep(depth, with_id=with_id), json.dumps(ping)]
    proc = _serve(workspace, lines)
    answers = {m.get("id"): m for m in map(json.loads, proc.stdout.splitlines())}
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "RecursionError" not in proc.stderr
    assert sorted(answers, key=str) == [1, 9, "slow"], answers.keys()
    assert answers["slow"]["result"]["structuredContent"] == {"slept": 1}
    assert answers[9]["result"] == {}


@pytest.mark.anyio
async def test_no_refused_line_ends_the_read_side(monkeypatch: pytest.MonkeyPatch) -> None:
    # Whatever goes wrong answering a line the SDK refused, the line is handed to the
    # SDK's own handling (dropped), not raised into the server's task group.
    import anyio

    from runtime.mcp import transport

    def broken(exc: Exception) -> None:
        raise RecursionError("deep")

    monkeypatch.setattr(transport, "answer_refused", broken)
    send, receive = anyio.create_memory_object_stream[object](2)
    refused = ValueError("a line the SDK refused")
    await send.send(refused)
    stream = transport._AnswerUnreadable(receive, write_stream=None)
    assert await stream.receive() is refused
    send.close()
    receive.close()


def test_an_id_in_flight_is_refused_and_the_first_is_answered(workspace: Path) -> None:
    # The SDK keeps one entry per request id: a second request reusing the id of one in
    # flight replaced it, and the first one's answer was lost ("Connection closed" at the
    # end). The second is Invalid Request now; the first is answered.
    def slow(seconds: float) -> str:
        params = {"name": "slow", "arguments": {"seconds": seconds}}
        return json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params})

    lines = [json.dumps(INITIALIZE), json.dumps(INITIALIZED), slow(1), slow(0)]
    proc = _serve(workspace, lines)
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [a["id"] for a in answers] == [1, 7, 7], answers
    assert answers[1]["error"]["code"] == -32600
    assert "id already in use" in answers[1]["error"]["message"]
    assert answers[2]["result"]["structuredContent"] == {"slept": 1}
