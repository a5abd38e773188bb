"""The end of stdin is how a stdio client says it has nothing more to send: a one-shot pipe
(``printf '...' | runtime serve --mcp``) closes it right after its last request. The SDK took
that end as the connection's and cancelled every request still running, so such a pipe got
"Connection closed" instead of the answers it was written for. The server now answers every
request it read before it ends; it does not wait for what can no longer come (an approval
asked of a client whose input has ended, a request the client cancelled)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.mcp.conftest import INITIALIZE, serve_mcp_argv, server_env

INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def _call(request_id: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }


def _one_shot(workspace: Path, messages: list[dict[str, Any]], *options: str) -> dict[Any, Any]:
    """Write every message and close stdin at once, as a pipe does; every answer by id.
    The 120 s bound only stops a hung server from hanging the suite."""
    text = "".join(json.dumps(m) + "\n" for m in messages)
    done = subprocess.run(
        serve_mcp_argv("--workspace", str(workspace), *options),
        input=text,
        capture_output=True,
        text=True,
        timeout=120,
        env=server_env(),
    )
    assert done.returncode == 0, done.stderr
    messages = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return {m.get("id"): m for m in messages if "method" not in m}  # answers, not requests


def test_a_one_shot_pipe_gets_every_answer(workspace: Path) -> None:
    answers = _one_shot(
        workspace,
        [
            INITIALIZE,
            INITIALIZED,
            _call(2, "read_file", {"path": "notes.txt"}),
            _call(3, "shell_exec", {"command": "sleep 0.5; echo slow"}),
            _call("four", "list_files", {"path": "."}),  # type: ignore[arg-type]
        ],
    )
    assert answers[2]["result"]["structuredContent"]["content"] == "hello from the workspace\n"
    assert answers[3]["result"]["structuredContent"]["stdout"] == "slow\n"
    assert not answers["four"]["result"]["isError"]


def test_a_cancelled_request_is_not_waited_for(workspace: Path) -> None:
    # The dispatcher never answers a request its client cancelled: waiting for that
    # answer at the end of stdin would hang the server.
    cancel = {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": 2, "reason": "changed my mind"},
    }
    answers = _one_shot(
        workspace,
        [INITIALIZE, INITIALIZED, _call(2, "shell_exec", {"command": "sleep 30"}), cancel],
    )
    assert 2 not in answers


def test_an_approval_asked_after_the_end_is_not_waited_for(workspace: Path, tmp_path: Path) -> None:
    # The client declared elicitation, so an ask decision elicits it; its input has ended,
    # so no answer can come: the call is refused as approval_required at once rather than
    # waiting out --ask-timeout (an hour: the run's 120 s bound would fail first).
    policy = tmp_path / "ask.toml"
    policy.write_text(
        'version = 1\ndefault = "deny"\n[sandbox]\nmode = "strict"\n'
        '[tools.read_file]\naction = "ask"\n'
    )
    init = json.loads(json.dumps(INITIALIZE))
    init["params"]["capabilities"] = {"elicitation": {}}
    answers = _one_shot(
        workspace,
        [init, INITIALIZED, _call(2, "read_file", {"path": "notes.txt"})],
        "--policy",
        str(policy),
        "--ask-timeout",
        "3600",
    )
    error = answers[2]["result"]["structuredContent"]["error"]
    assert error["type"] == "approval_required"
    assert "input ended" in error["message"]


def test_a_client_that_stops_reading_ends_the_session_and_its_calls(
    workspace: Path, tmp_path: Path
) -> None:
    """A client that closes both ends mid-call (it crashed, or gave up): the server ran the
    call to its end (25 s of sandbox nobody could read) and then died of a broken pipe,
    rc 1 with a traceback. Now the reader's going away ends the session at once: the call
    is cancelled and recorded so, and the server exits normally."""
    from runtime.audit import AuditLog
    from tests.audit.audit_helpers import wait_for_request_record

    audit = tmp_path / "audit.db"
    proc = subprocess.Popen(
        serve_mcp_argv("--workspace", str(workspace), "--audit", str(audit)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=server_env(),
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        proc.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1
        for message in (INITIALIZED, _call(2, "shell_exec", {"command": "sleep 60"})):
            proc.stdin.write((json.dumps(message) + "\n").encode())
        proc.stdin.flush()
        wait_for_request_record(audit)  # the call has started
        proc.stdout.close()
        proc.stdin.close()
        proc.wait(timeout=50)  # well before the call's own end
        err = proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    with AuditLog(audit) as log:
        assert log.verify().ok and log.interrupted() == []
        assert [(r.kind, r.outcome) for r in log.tail(2)] == [
            ("request", None),
            ("completion", "cancelled"),
        ]
