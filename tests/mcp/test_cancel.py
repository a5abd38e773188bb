"""``notifications/cancelled`` for a call in flight (MCP basic/utilities/cancellation): the
call is really stopped (its sandboxed process ends before it could act, the audit log says
``cancelled``) and no response is ever sent for it, while the connection serves on."""

from __future__ import annotations

import json
import select
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.mcp.conftest import INITIALIZE, serve_mcp_argv, server_env

pytestmark = pytest.mark.sandbox


def _send(proc: subprocess.Popen[str], message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(message) + "\n")
    proc.stdin.flush()


def _read_until(
    proc: subprocess.Popen[str], seconds: float, count: int | None = None
) -> list[dict[str, Any]]:
    """Every message the server writes within ``seconds`` (the first ``count`` of them)."""
    assert proc.stdout is not None
    out: list[dict[str, Any]] = []
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0 and len(out) != count:
        ready, _, _ = select.select([proc.stdout], [], [], left)
        if not ready:
            break
        line = proc.stdout.readline()
        if not line:
            break
        out.append(json.loads(line))
    return out


def test_a_cancelled_call_is_stopped_and_never_answered(workspace: Path, tmp_path: Path) -> None:
    audit = tmp_path / "audit.db"
    proc = subprocess.Popen(
        serve_mcp_argv("--workspace", str(workspace), "--audit", str(audit)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=server_env(),
    )
    try:
        _send(proc, INITIALIZE)
        assert _read_until(proc, 60, count=1)[0]["id"] == 1
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        command = "sleep 3; echo late > late.txt"
        params = {"name": "shell_exec", "arguments": {"command": command}}
        _send(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params})
        time.sleep(1.0)  # the call is running (or about to): either way it must not finish
        cancel = {"requestId": 2, "reason": "the user stopped it"}
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
        _send(proc, {"jsonrpc": "2.0", "id": 3, "method": "ping"})
        # Past the moment the command would have written its file and answered.
        seen = _read_until(proc, 5.0)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=60)
        assert proc.stdout is not None
        proc.stdout.close()
    assert [m.get("id") for m in seen] == [3], seen
    assert not (workspace / "late.txt").exists()
    from runtime.audit import AuditLog

    with AuditLog(audit) as log:
        records = [r for r in log.tail(50) if r.tool == "shell_exec"]
    assert [r.kind for r in records] == ["request", "completion"]
    assert records[1].outcome == "cancelled"
