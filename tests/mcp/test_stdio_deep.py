"""A deeply nested stdio line (``[`` a thousand times, 2 KB) ended ``runtime serve --mcp``:
the line was parsed again with ``json.loads``, whose RecursionError escaped the read side
and ended the server's task group, losing the answers to the calls in flight. Such a line
no longer ends anything, and it is answered: a parse error (-32700) under the id its first
members show (so the client's pending call ends), or with id null when the id is not among
them. Before, it got no answer at all, and its client waited for ever."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.mcp.conftest import INITIALIZE, INITIALIZED, fixture_argv, server_env


def _serve(workspace: Path, lines: list[str]) -> subprocess.CompletedProcess[str]:
    """The fixture server over stdio, fed ``lines`` (then end of input), run to its end."""
    return subprocess.run(
        fixture_argv(workspace),
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
    deep_id = 2 if with_id else None  # a notification's line is answered with id null
    assert sorted(answers, key=str) == sorted([1, 9, "slow", deep_id], key=str), answers.keys()
    assert answers["slow"]["result"]["structuredContent"] == {"slept": 1}
    assert answers[9]["result"] == {}
    assert answers[deep_id]["error"]["code"] == -32700


DEEP = "[" * 2_000 + "]" * 2_000


@pytest.mark.parametrize(
    ("line", "answer_id"),
    [
        # The id before the deep value: the client's pending call 7 ends.
        ('{"jsonrpc":"2.0","id":7,"method":"tools/call","params":' + DEEP + "}", 7),
        ('{"id":"s7", "jsonrpc":"2.0", "params":' + DEEP + ',"method":"tools/call"}', "s7"),
        # The id after it, or none: JSON-RPC's id null.
        ('{"jsonrpc":"2.0","method":"tools/call","params":' + DEEP + ',"id":8}', None),
        ('{"jsonrpc":"2.0","method":"notifications/x","params":' + DEEP + "}", None),
        # An id that is no request id, or the id of no request: id null too.
        ('{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":' + DEEP + "}", None),
        ('{"jsonrpc":"2.0","id":7,"x":' + DEEP + "}", None),
    ],
)
def test_a_request_too_deep_to_read_is_answered(
    workspace: Path, line: str, answer_id: object
) -> None:
    ping = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
    proc = _serve(
        workspace, [json.dumps(INITIALIZE), json.dumps(INITIALIZED), line, json.dumps(ping)]
    )
    answers = [json.loads(a) for a in proc.stdout.splitlines()]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [a["id"] for a in answers] == [1, answer_id, 9], answers
    error = answers[1]["error"]
    assert error == {"code": -32700, "message": "Parse error: the message is nested too deeply"}


def test_a_response_too_deep_to_read_is_not_answered(workspace: Path) -> None:
    # A response (to a request of the server's) is never answered, deep or not.
    line = '{"jsonrpc":"2.0","id":3,"result":' + DEEP + "}"
    ping = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
    proc = _serve(
        workspace, [json.dumps(INITIALIZE), json.dumps(INITIALIZED), line, json.dumps(ping)]
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [json.loads(a)["id"] for a in proc.stdout.splitlines()] == [1, 9]


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


@pytest.mark.parametrize(
    ("text", "members", "container"),
    [
        (
            '{"jsonrpc":"2.0","id":7,"method":"m","params":[[',
            {"jsonrpc": "2.0", "id": 7, "method": "m"},
            "params",
        ),
        (' {\n"id" : "a\\"b" , "x":{"id":1}}', {"id": 'a"b'}, "x"),
        ('{"id":1,"id":2,"r":[', {"id": 2}, "r"),  # the later value wins, as in a parser
        ('{"id":-1.5e3,"t":true,"n":null}', {"id": -1500.0, "t": True, "n": None}, None),
        ('{"id":1 "method":"m"}', {}, None),  # not JSON after the first value: not taken
        ('{"id":01,"p":[', {}, None),
        ('[{"id":1}]', {}, None),
        ('"id"', {}, None),
        ('{"id":"\\ud800","p":[', {"id": "\ud800"}, "p"),  # read; deep_parse_error drops it
    ],
)
def test_leading_members_reads_the_first_members(
    text: str, members: dict[str, object], container: str | None
) -> None:
    from runtime.mcp._jsonrpc import leading_members

    assert leading_members(text) == (members, container)
    assert leading_members(text.encode("utf-8", "surrogatepass")) in (
        (members, container),
        ({}, None),  # the lone surrogate's bytes are no UTF-8
    )


def test_leading_members_reads_a_bounded_prefix() -> None:
    from runtime.mcp._jsonrpc import SCAN_CHARS, leading_members

    pad = "x" * (SCAN_CHARS - len('{"a":"","id":12'))
    # The id cut by the bound (12 of 1234) is not taken; whole, it is.
    assert leading_members('{"a":"' + pad + '","id":1234}') == ({"a": pad}, None)
    assert leading_members('{"a":"' + pad[:-5] + '","id":1234}')[0]["id"] == 1234
    # A string that does not end within the bound ends the scan, whatever follows.
    assert leading_members('{"id":3,"a":"' + "x" * 100_000 + '"}') == ({"id": 3}, None)
    assert leading_members(b'{"id":3,"a":"\xff"}') == ({}, None)  # not UTF-8
    assert leading_members(b'{"id":3,"a":"' + "é".encode() * SCAN_CHARS) == ({"id": 3}, None)
