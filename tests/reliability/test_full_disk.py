"""Issue 8 §4: full disks. The driver runs in a mount namespace of its own (``unshare -m``)
with small tmpfs mounts, so nothing is mounted on the host.

A workspace that is full: write_file fails with a clear error, the existing file keeps its
content and no temp file is left. An audit log that cannot be written: the broker refuses
every call (internal_error, details.fail_closed) and the tool never runs; once there is room
again the broker records and runs calls, and the chain verifies.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.reliability.conftest import HERE

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.timeout(120),
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root"),
    pytest.mark.skipif(shutil.which("unshare") is None, reason="unshare(1) is missing"),
]


@pytest.fixture(scope="module")
def findings() -> dict[str, Any]:
    base = Path("/tmp") / f"rt-full-disk-{os.getpid()}"
    base.mkdir(mode=0o755)
    try:
        proc = subprocess.run(
            [
                "unshare",
                "-m",
                "--propagation",
                "private",
                sys.executable,
                str(HERE / "full_disk_driver.py"),
                str(base),
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=100,
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


def test_write_file_on_a_full_workspace_fails_clearly_and_keeps_the_file(
    findings: dict[str, Any],
) -> None:
    write = findings["write"]
    assert write["success"] is False
    assert write["error"]["type"] == "tool_error"
    assert "no space left" in write["error"]["message"]
    assert write["error"]["details"]["reason"] == "no_space"
    assert findings["keep"] == "old\n"
    assert findings["ws_files"] == [".runtime", "filler", "keep.txt"]  # no temp file


def test_an_unwritable_audit_log_fails_closed(findings: dict[str, Any]) -> None:
    assert findings["before"]["success"] is True
    for refused in findings["refused"]:
        assert refused["success"] is False
        error = refused["error"]
        assert error["type"] == "internal_error"
        assert error["details"]["fail_closed"] is True
        assert "audit" in error["message"] and "full" in error["message"]
    assert findings["markers"] == []  # the tool never ran
    # Room again: the broker records and runs calls; refused calls left no record.
    assert findings["after"]["success"] is True
    assert findings["verify"] == {"ok": True, "count": 4}
    assert findings["interrupted"] == []
