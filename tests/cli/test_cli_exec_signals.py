"""``runtime exec`` stopped by SIGTERM (``timeout 5 runtime exec …``, a CI job cancelled) or
SIGHUP: the process died on the spot and the call's completion was never recorded (the log
listed it as interrupted). Now it ends as Ctrl-C does: the call is cancelled (its sandbox
ended) and recorded, the audit log closed, and the exit status is the signal's (128 + n)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from runtime.audit import AuditLog
from tests._pythonpath import python_path
from tests.audit.audit_helpers import wait_for_request_record
from tests.cli.test_cli import ROOT


def _start_sleep(tmp_path: Path) -> tuple[Path, subprocess.Popen[bytes]]:
    """``runtime exec`` of a sandboxed ``sleep 60``: its audit log's path and its process."""
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
    return audit, proc


@pytest.mark.sandbox
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_ends_exec_with_the_call_recorded(tmp_path: Path, sig: int) -> None:
    audit, proc = _start_sleep(tmp_path)
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


def _fork_server(pid: int) -> psutil.Process:
    for child in psutil.Process(pid).children():
        if "sandbox.zygote" in " ".join(child.cmdline()):
            return child
    raise AssertionError("no fork-server under the runtime process")


@pytest.mark.sandbox
def test_a_second_sigterm_does_not_lose_the_completion(tmp_path: Path) -> None:
    # ``timeout 5 runtime exec …`` sends SIGTERM to the process, then to its group. The
    # second one, landing in the wait for the cancelled call's teardown (slow under load;
    # here the fork-server is stopped, so it never answers), ended that wait, and the
    # broker closed the control socket under the teardown's wait for its exit report:
    # never woken, it waited its full 30 s, and its completion met a closed audit log
    # ("audit log write failed", the call listed as interrupted).
    audit, proc = _start_sleep(tmp_path)
    zygote = None
    try:
        wait_for_request_record(audit)
        zygote = _fork_server(proc.pid)
        zygote.suspend()
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)  # the call is being torn down
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if zygote is not None:
            with contextlib.suppress(psutil.Error):
                zygote.kill()
    assert proc.returncode in (128 + signal.SIGTERM, -signal.SIGTERM), err.decode()
    assert b"audit log write failed" not in err, err.decode()
    with AuditLog(audit) as log:
        assert log.verify().ok and log.interrupted() == []
        assert [(r.kind, r.outcome) for r in log.tail(2)] == [
            ("request", None),
            ("completion", "cancelled"),
        ]
