"""``runtime audit verify`` lists a killed call although a later call reused its call_id
(tests/audit/test_audit_interrupted.py has the pairing). The red-team reproduction: a
provider's ``toolu_01`` killed with SIGKILL mid-``sleep``, then ``current_time`` under the
same id; verify said ``"interrupted": []``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests._pythonpath import python_path
from tests.cli.test_cli import ROOT, result_of, run


@pytest.mark.sandbox
def test_a_killed_call_stays_interrupted_after_its_id_is_reused(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    first = {
        "tool": "shell_exec",
        "call_id": "toolu_01",
        "arguments": {"command": "touch started && sleep 20"},
    }
    (tmp_path / "d1.json").write_text(json.dumps(first))
    child = subprocess.Popen(
        [sys.executable, "-m", "runtime", "exec", "d1.json", "--workspace", str(ws)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": python_path(ROOT)},
    )
    try:
        deadline = time.monotonic() + 60
        while not (ws / "started").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (ws / "started").exists()
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=30)
    second = {"tool": "current_time", "call_id": "toolu_01", "arguments": {}}
    proc = run("exec", "-", "--workspace", str(ws), cwd=tmp_path, stdin=json.dumps(second))
    assert proc.returncode == 0, proc.stderr
    proc = run("audit", "verify", "--workspace", str(ws), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = result_of(proc)
    assert report["ok"] is True
    assert report["interrupted"] == ["toolu_01"]
