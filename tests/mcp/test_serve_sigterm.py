"""``runtime serve --mcp`` stopped by SIGTERM (systemd, ``docker stop``, a client shutting its
server down) or SIGHUP (its terminal closed): the process died on the spot, and a call in
flight was left without its completion record ("interrupted" in ``runtime audit verify``).
It now stops as on the end of its input: in-flight calls are cancelled (their sandboxes
ended) and recorded, the audit log is closed, and it exits 0."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import anyio
import pytest

from runtime.audit import AuditLog
from tests.audit.audit_helpers import wait_for_request_record
from tests.mcp.conftest import INITIALIZE, HttpServer, http_session, serve_mcp_argv, server_env


def _send(proc: subprocess.Popen[bytes], message: dict[str, object]) -> None:
    assert proc.stdin is not None
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()


@pytest.mark.sandbox
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_stops_the_server_and_records_the_call(tmp_path: Path, sig: int) -> None:
    audit = tmp_path / "audit.db"
    proc = subprocess.Popen(
        serve_mcp_argv("--workspace", str(tmp_path / "ws"), "--audit", str(audit)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=server_env(),
    )
    try:
        _send(proc, INITIALIZE)
        assert proc.stdout is not None and proc.stdout.readline()
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        params = {"name": "shell_exec", "arguments": {"command": "sleep 60"}}
        _send(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params})
        wait_for_request_record(audit)  # the call has started
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err.decode()
    with AuditLog(audit) as log:
        report = log.verify()
        assert report.ok and log.interrupted() == []
        assert [(r.kind, r.outcome) for r in log.tail(2)] == [
            ("request", None),
            ("completion", "cancelled"),
        ]


def test_sigterm_on_http_closes_the_audit_log(tmp_path: Path) -> None:
    # uvicorn stopped gracefully, then raised SIGTERM again with the default handler back:
    # the process died (-15) before the broker closed, and the last records stayed in the
    # journal, unseen by a reader of the database.
    audit = tmp_path / "audit.db"
    server = HttpServer(
        serve_mcp_argv(
            "--workspace", str(tmp_path / "ws"), "--audit", str(audit), "--http", "127.0.0.1:0"
        )
    )
    try:

        async def one_call() -> None:
            async with http_session(server.url) as session:
                result = await session.call_tool("json_parse", {"text": "[1]"})
                assert not result.is_error

        anyio.run(one_call)
    finally:
        server.close()  # SIGTERM, then a wait
    assert server.proc.returncode == 0
    assert not list(tmp_path.glob("audit.db.rtj-*"))  # the journal was moved into the log
    with AuditLog(audit, read_only=True) as log:
        assert log.verify().ok
        assert [(r.kind, r.tool) for r in log.tail(2)] == [
            ("request", "json_parse"),
            ("completion", "json_parse"),
        ]
