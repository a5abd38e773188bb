"""stdio lines that cannot be read are answered with a parse error (-32700), never run.

* Not UTF-8: the wire was decoded with errors="replace", so a request's invalid bytes
  became U+FFFD and the call ran with arguments the client never sent (HTTP answered such
  a body -32700).
* Not JSON (trailing text after the object, a request cut in two by a raw newline, a
  line of text): no answer at all, and the client waited for ever; JSON-RPC 2.0 §5.1
  answers a parse error, id null. Here the id is the request's when the line's first
  members show it, as for a message nested too deeply (``leading_members``); each half of
  a cut request is answered as what it is, not joined.
* A line too long to read was answered with id null although its id was at its start.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.mcp.conftest import INITIALIZE, INITIALIZED, fixture_argv, server_env

PING = b'{"jsonrpc":"2.0","id":"last","method":"ping"}'


def _serve(workspace: Path, lines: list[bytes]) -> list[dict[str, Any]]:
    """The fixture server over stdio, fed ``lines`` as bytes after the handshake and
    before a last ping (then end of input): what it wrote, in order."""
    handshake = [json.dumps(INITIALIZE).encode(), json.dumps(INITIALIZED).encode()]
    proc = subprocess.run(
        fixture_argv(workspace),
        input=b"".join(line + b"\n" for line in [*handshake, *lines, PING]),
        capture_output=True,
        env=server_env(),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    written = [json.loads(line) for line in proc.stdout.splitlines()]
    assert written[0]["id"] == 1 and written[-1] == {"jsonrpc": "2.0", "id": "last", "result": {}}
    return written[1:-1]


def _echo(request_id: int, text: bytes) -> bytes:
    head = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call",' % request_id
    return head + b'"params":{"name":"echo","arguments":{"text":"' + text + b'"}}}'


def test_a_request_that_is_not_utf8_is_a_parse_error_not_a_call(workspace: Path) -> None:
    written = _serve(
        workspace,
        [
            _echo(2, b"A\xff\xfeB"),  # invalid bytes in an argument
            _echo(3, "é".encode() + b"\xc3"),  # a character cut at its first byte
            b'{"jsonrpc":"2.0","method":"tools/call","id":\xff4}',  # in the id: unread
        ],
    )
    assert [m.get("id") for m in written] == [2, 3, None], written
    for message in written:
        assert "result" not in message  # the echo never ran
        assert message["error"]["code"] == -32700
        assert "not UTF-8" in message["error"]["message"]


def test_a_line_that_is_not_json_is_a_parse_error(workspace: Path) -> None:
    cut = _echo(23, b"a\nb")  # a raw newline inside the string cuts the request in two
    written = _serve(
        workspace,
        [
            b'{"jsonrpc":"2.0","id":22,"method":"ping"} xx',  # trailing text
            cut,
            b"hello",
            b"",  # an empty line carries no message: no answer
            b'{"jsonrpc":"2.0","method":"ping","params":{},"id":24} }',  # id after params
        ],
    )
    assert [m.get("id") for m in written] == [22, 23, None, None, None], written
    assert all(m["error"]["code"] == -32700 for m in written)
    assert "Extra data" in written[0]["error"]["message"]
    assert "Unterminated string" in written[1]["error"]["message"]


def test_an_over_long_line_is_answered_under_the_id_at_its_start(workspace: Path) -> None:
    from runtime.mcp.transport import MAX_LINE

    pad = b"x" * MAX_LINE
    written = _serve(
        workspace,
        [
            b'{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"x":"' + pad + b'"}}',
            b'{"jsonrpc":"2.0","method":"tools/list","x":"' + pad + b'","id":8}',
        ],
    )
    assert [m.get("id") for m in written] == [7, None], written
    assert all(m["error"]["code"] == -32600 for m in written)
    assert all("longer than" in m["error"]["message"] for m in written)
