"""``runtime exec`` stopped by SIGTERM (``timeout 5 runtime exec …``, a CI job cancelled) or
SIGHUP: the process died on the spot and the call's completion was never recorded (the log
listed it as interrupted). Now it ends as Ctrl-C does: the call is cancelled (its sandbox
ended) and recorded, the audit log closed, and the exit status is the signal's (128 + n)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.audit import AuditLog
from tests._pythonpath import python_path
from tests.audit.audit_helpers import wait_for_request_record
from tests.cli.test_cli import ROOT


@pytest.mark.sandbox
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_ends_exec_with_the_call_recorded(tmp_path: Path, sig: int) -> None:
    audit = tmp_path / "audit.db"
    call = tmp_path / "call.json"
    call.write_text('{"tool": "shell_exec", "arguments": {"command": "sleep 60"}}')
    argv = [sys.executable, "-m", "runtime", "exec", str(call), "--audit", str(audit)]
    proc = subprocess.Popen(
        [*argv, "--workspace", str(tmp_path / "ws")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": python_path(ROOT)},
    )
    try:
        wait_for_request_record(audit)  # the call has started
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + sig, err.decode()
    assert b"Traceback" not in err
    with AuditLog(audit) as log:
        assert log.verify().ok and log.interrupted() == []
        assert [(r.kind, r.outcome) for r in log.tail(2)] == [
            ("request", None),
            ("completion", "cancelled"),
        ]
