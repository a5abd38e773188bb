"""A request that Python reads as JSON but the MCP SDK's parser refuses (a lone UTF-16
surrogate escape, ``"\\ud800"``, in its arguments or tool name): the SDK dropped it with a
debug log line and sent nothing back, so the client waited for its answer for ever. Such a
request, when it has an id, is answered with a JSON-RPC error under that id."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tests.mcp.conftest import serve_mcp_argv

ROOT = Path(__file__).resolve().parents[2]

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}


def _exchange(workspace: Path, lines: list[str]) -> dict[Any, dict[str, Any]]:
    """Send ``lines``, close stdin, and return every answer by id (the server exits on EOF)."""
    proc = subprocess.run(
        serve_mcp_argv("--workspace", str(workspace)),
        input="".join(line + "\n" for line in lines),
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    out = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    return {m.get("id"): m for m in out}


def test_requests_the_sdk_cannot_read_are_answered(workspace: Path) -> None:
    def call(i: int, name: str, arguments: dict[str, Any]) -> str:
        params = {"name": name, "arguments": arguments}
        return json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params})

    answers = _exchange(
        workspace,
        [
            json.dumps(INIT),
            json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            call(2, "json_parse", {"text": "\ud800"}),
            call("s3", "json_\udc00", {"text": "1"}),
            json.dumps({"jsonrpc": "2.0", "method": "notifications/x", "params": {"a": "\ud800"}}),
            json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}),
        ],
    )
    assert sorted(answers, key=str) == [1, 2, 4, "s3"]
    for i in (2, "s3"):
        error = answers[i]["error"]
        assert error["code"] == -32700 and "could not be read" in error["message"], error
    assert answers[4]["result"]["tools"]
