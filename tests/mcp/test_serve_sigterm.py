"""``runtime serve --mcp`` stopped by SIGTERM (systemd, ``docker stop``, a client shutting its
server down) or SIGHUP (its terminal closed): the process died on the spot, and a call in
flight was left without its completion record ("interrupted" in ``runtime audit verify``).
It now stops as on the end of its input: in-flight calls are cancelled (their sandboxes
ended) and recorded, the audit log is closed, and it exits 0."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from runtime.audit import AuditLog
from runtime.errors import AuditError
from tests.mcp.conftest import serve_mcp_argv

ROOT = Path(__file__).resolve().parents[2]


def _send(proc: subprocess.Popen[bytes], message: dict[str, object]) -> None:
    assert proc.stdin is not None
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()


def _started(audit: Path) -> bool:
    """The call's request record is in the log (which may not have its schema yet)."""
    if not audit.exists():
        return False
    try:
        with AuditLog(audit, read_only=True) as log:
            return bool(log.tail(1))
    except AuditError:
        return False


@pytest.mark.sandbox
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_stops_the_server_and_records_the_call(tmp_path: Path, sig: int) -> None:
    audit = tmp_path / "audit.db"
    proc = subprocess.Popen(
        serve_mcp_argv("--workspace", str(tmp_path / "ws"), "--audit", str(audit)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        _send(
            proc,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "0"},
                },
            },
        )
        assert proc.stdout is not None and proc.stdout.readline()
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        params = {"name": "shell_exec", "arguments": {"command": "sleep 60"}}
        _send(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params})
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the call has started: its request is recorded
            if _started(audit):
                break
            time.sleep(0.1)
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
