"""Deeply nested results at the CLI and MCP boundaries.

Before: a ``json_parse`` of a 500-level document returned a 501-level result, recorded as a
success; ``runtime exec`` then died in pydantic's serialiser (255 levels) with a traceback,
exit 1 and nothing on stdout, and ``runtime serve --mcp`` answered a JSON-RPC error with
code 0. A custom wasm guest returning ``[`` x 300 did the same. Now the json guest stops at
127 levels (a ``tool_error``), the broker refuses any result nested deeper than 128 levels as
``output_too_large`` (every backend), and the audit says so; whatever still cannot be written
becomes an ``internal_error`` result at the boundary (exit 70 / ``isError``).
"""

from __future__ import annotations

import datetime as dt
import importlib
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from runtime._depth import RESULT_MAX_DEPTH
from runtime.cli.exitcodes import EX_INTERNAL, EX_TOOL_FAILED
from runtime.mcp.server import call_result
from runtime.models import ToolResult
from tests._wasm_tools import constant_guest_tool
from tests.cli.test_cli import result_of, run

pytestmark = pytest.mark.wasm

# the module (runtime.cli's ``app`` is the Typer object of the same name)
cli_app = importlib.import_module("runtime.cli.app")

_DEEP = 300


def _deep_guest(folder: Path) -> Path:
    """A custom wasm tool ``deep`` whose result is ``[`` x 300 ``]`` x 300."""
    payload = b"\x00" + b"[" * _DEEP + b"]" * _DEEP
    return constant_guest_tool(folder, "deep", payload, "A result nested 300 levels deep.")


def _last_completion(tmp_path: Path) -> dict[str, Any]:
    proc = run("audit", "tail", "-n", "1", "--workspace", "ws", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    record: dict[str, Any] = json.loads(proc.stdout.splitlines()[-1])
    assert record["kind"] == "completion"
    return record


def test_json_parse_of_500_levels_is_a_tool_error(tmp_path: Path) -> None:
    text = "[" * 500 + "]" * 500
    call = json.dumps({"tool": "json_parse", "arguments": {"text": text}})
    proc = run("exec", "-", "--workspace", "ws", cwd=tmp_path, stdin=call)
    assert proc.returncode == EX_TOOL_FAILED, proc.stderr
    assert "Traceback" not in proc.stderr
    res = result_of(proc)
    assert res["success"] is False
    assert res["error"]["type"] == "tool_error"
    assert "nesting too deep (limit 127 levels)" in res["error"]["message"]
    record = _last_completion(tmp_path)
    assert (record["outcome"], record["error_type"]) == ("error", "tool_error")


def test_a_custom_guest_returning_300_levels_is_output_too_large(tmp_path: Path) -> None:
    tools = _deep_guest(tmp_path / "tools")
    call = json.dumps({"tool": "deep", "arguments": {}})
    proc = run(
        "exec", "-", "--workspace", "ws", "--tools-dir", str(tools), cwd=tmp_path, stdin=call
    )
    assert proc.returncode == EX_TOOL_FAILED, proc.stderr
    assert "Traceback" not in proc.stderr
    res = result_of(proc)
    assert res["success"] is False
    assert res["error"]["type"] == "output_too_large"
    assert res["error"]["details"] == {"reason": "result_too_deep", "max_depth": RESULT_MAX_DEPTH}
    record = _last_completion(tmp_path)
    assert (record["outcome"], record["error_type"]) == ("error", "output_too_large")


def test_the_mcp_server_answers_a_result_not_an_error_code_0(tmp_path: Path) -> None:
    tools = _deep_guest(tmp_path / "tools")
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "deep", "arguments": {}},
        },
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "json_parse", "arguments": {"text": "[" * 500 + "]" * 500}},
        },
    ]
    stdin = "".join(json.dumps(line) + "\n" for line in lines)
    proc = run(
        "serve", "--mcp", "--workspace", "ws", "--tools-dir", str(tools), cwd=tmp_path, stdin=stdin
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    answers = {m["id"]: m for m in map(json.loads, proc.stdout.splitlines()) if "id" in m}
    for key, error_type in ((2, "output_too_large"), (3, "tool_error")):
        assert "error" not in answers[key], answers[key]
        result = answers[key]["result"]
        assert result["isError"] is True
        assert result["structuredContent"]["error"]["type"] == error_type


def _deep_result(levels: int) -> ToolResult:
    value: Any = []
    for _ in range(levels - 1):
        value = [value]
    now = dt.datetime.now(dt.UTC)
    return ToolResult(
        call_id="call_1",
        tool="deep",
        success=True,
        result=value,
        started_at=now,
        completed_at=now,
        duration_ms=1.0,
    )


def test_a_result_the_cli_cannot_write_is_an_internal_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Past the broker's check (were it missing or another limit lower): the CLI's own.
    monkeypatch.setattr(cli_app, "_exec", lambda *args: _deep_result(400))
    call = tmp_path / "call.json"
    call.write_text('{"tool": "deep", "arguments": {}}')
    done = CliRunner().invoke(cli_app.app, ["exec", str(call), "--json"])
    assert done.exit_code == EX_INTERNAL, done.output
    assert done.exception is None or isinstance(done.exception, SystemExit)
    res = json.loads(done.stdout)
    assert res["success"] is False and res["result"] is None
    assert res["error"]["type"] == "internal_error"
    assert "could not be written as JSON" in res["error"]["message"]


def test_a_result_the_mcp_server_cannot_send_is_an_internal_error() -> None:
    answer = call_result(_deep_result(400))
    assert answer.is_error is True
    assert answer.structured_content is not None
    assert answer.structured_content["error"]["type"] == "internal_error"
    answer.model_dump(mode="json", by_alias=True)  # what the SDK sends: no error
    fine = call_result(_deep_result(RESULT_MAX_DEPTH))
    assert fine.is_error is False
