"""A Streamable HTTP session ended by its client (``DELETE``) takes its calls with it: the
running one is stopped before it could act and the queued one never runs, both recorded as
``cancelled``; the server serves on. (A client merely disconnecting does not cancel: the MCP
spec lets it resume the stream, and its calls stay bounded by ``[limits] max_queued``.)"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from runtime.audit import AuditLog
from tests.mcp.conftest import ACCEPT, INITIALIZE, INITIALIZED, HttpServer

pytestmark = [pytest.mark.sandbox, pytest.mark.anyio]

POLICY = '[limits]\nmax_concurrent = 1\n[[rules]]\nid = "all"\naction = "allow"\ntools = ["*"]\n'


def _call(request_id: int, command: str) -> dict[str, Any]:
    params = {"name": "shell_exec", "arguments": {"command": command}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


async def test_deleting_a_session_cancels_its_running_and_queued_calls(
    workspace: Path, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    audit = tmp_path / "audit.db"
    argv = [sys.executable, "-m", "runtime", "serve", "--mcp", "--http", "127.0.0.1:0"]
    argv += ["--workspace", str(workspace), "--audit", str(audit), "--policy", str(policy)]
    server = HttpServer(argv)
    try:
        async with httpx.AsyncClient(timeout=60) as client:
            url = server.url
            opened = await client.post(url, json=INITIALIZE, headers={"Accept": ACCEPT})
            headers = {
                "Accept": ACCEPT,
                "Mcp-Session-Id": opened.headers["mcp-session-id"],
                "MCP-Protocol-Version": "2025-06-18",
            }
            assert (await client.post(url, json=INITIALIZED, headers=headers)).status_code == 202
            answers: list[httpx.Response] = []

            async def post(message: dict[str, Any]) -> None:
                answers.append(await client.post(url, json=message, headers=headers))

            async with anyio.create_task_group() as tg:
                tg.start_soon(post, _call(2, "sleep 3; echo late > late.txt"))
                await anyio.sleep(1.0)  # running (max_concurrent 1) ...
                tg.start_soon(post, _call(3, "echo queued > queued.txt"))
                await anyio.sleep(0.5)  # ... and this one waits for its slot
                deleted = await client.delete(url, headers=headers)
                assert deleted.status_code == 200
            # Another session is served at once.
            again = await client.post(url, json=INITIALIZE, headers={"Accept": ACCEPT})
            assert again.status_code == 200
        await anyio.sleep(3.0)  # past the moment the first command would have written its file
    finally:
        server.close()
    assert not (workspace / "late.txt").exists()
    assert not (workspace / "queued.txt").exists()
    assert all('"result"' not in answer.text for answer in answers), answers
    with AuditLog(audit) as log:
        assert log.verify().ok
        records = [r for r in log.tail(50) if r.tool == "shell_exec"]
    assert sorted(r.kind for r in records) == ["completion", "completion", "request", "request"]
    assert [r.outcome for r in records if r.kind == "completion"] == ["cancelled", "cancelled"]
